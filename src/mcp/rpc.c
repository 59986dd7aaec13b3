/* The MCP methods of uvtasks-mcp (M-MCP-1..3, M-MCP-9): one parsed
 * message checked and dispatched, in the era it belongs to (2025: the
 * version initialize agreed on; 2026: stateless, each request's _meta);
 * initialize, tools/list, server/discover, logging/setLevel,
 * notifications/cancelled, the Tasks methods (tasks.c) and tools/call
 * (call.c).  The wire is wire.c; the completion notices are notice.c's. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const protocol_versions[] = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07",
};

/* RFC 5424 severities as MCP names them, lowest first. */
static const char *const log_levels[] = {
    "debug", "info",     "notice", "warning",
    "error", "critical", "alert",  "emergency",
};

static const char server_instructions[] =
    "Runs shell commands. run_command runs one in the foreground and "
    "returns its output when it ends; one still running after its yield "
    "(yield_ms) goes on in the background and the result names its id. "
    "For background work, start one with "
    "run_in_background (it returns an id such as bash-1), read what it "
    "printed since your last read with task_output (wait: true waits for "
    "the end), see every task with task_list, stop one with task_kill. "
    "For an interactive program (a REPL, a prompt), start it with "
    "run_in_background and stdin: true (or tty: true for a terminal), then "
    "send it input and read its answer with write_stdin. "
    "Each result about a task ends with its status line, e.g. [status: "
    "completed, exit code: 0]. When a task you have not waited for ends, "
    "the next tool result begins with a [notice] line naming it.";

/* ---------------------------------------------------------------------- */
/* Methods                                                                 */

static json_t *rpc_server_info(void) {
  return json_pack("{s:s, s:s, s:s}", "name", "uvtasks-mcp", "title",
                   "uvtasks background tasks", "version", UVT_VERSION_STRING);
}

static void rpc_initialize(mcp_server_t *server, json_t *id, json_t *params) {
  json_t *jver = json_object_get(params, "protocolVersion");
  const char *version = MCP_PROTOCOL_LATEST;
  const char *asked;
  json_t *result;
  char buf[300];
  size_t i;

  /* M-MCP-8: one session per server; a second initialize cannot switch
   * versions under the first. */
  if (server->version != NULL) {
    snprintf(buf, sizeof(buf),
             "Invalid Request: already initialized (protocol version %s); "
             "start another server for another session",
             server->version);
    mcp_rpc_error(server, id, RPC_INVALID_REQUEST, buf);
    return;
  }
  /* Answer the client's version if we speak it, else our latest. */
  if (json_is_string(jver)) {
    asked = json_string_value(jver);
    for (i = 0; i < sizeof(protocol_versions) / sizeof(protocol_versions[0]);
         i++)
      if (strcmp(asked, protocol_versions[i]) == 0)
        version = protocol_versions[i];
  }
  result = json_pack("{s:s, s:{s:{s:b}, s:{}}, s:o, s:s}", "protocolVersion",
                     version, "capabilities", "tools", "listChanged", 0,
                     "logging", "serverInfo", rpc_server_info(), "instructions",
                     server_instructions);
  /* Tasks only with the revision that has them; an older client sees
   * neither the capability nor the tools' execution fields. */
  server->tasks_enabled = mcp_version_has_tasks(version);
  if (result != NULL && server->tasks_enabled &&
      json_object_set_new(json_object_get(result, "capabilities"), "tasks",
                          mcp_tasks_capability()) != 0) {
    json_decref(result);
    result = NULL;
  }
  server->initialized = 1;
  server->version = version;
  if (result == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  mcp_rpc_result(server, id, result);
}

static void rpc_tools_list(mcp_server_t *server, json_t *id) {
  json_error_t jerr;
  json_t *tools = json_loads(uvt_tools_schema_json(), 0, &jerr);
  json_t *result;

  if (tools == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: the tool schemas do not parse");
    return;
  }
  result = json_object();
  if (result == NULL) {
    json_decref(tools);
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  if (server->era == MCP_ERA_2026) {
    /* 2026: no Tool.execution; cache hints instead.  The list is the same
     * for every client and never changes while the server runs. */
    json_object_set_new(result, "ttlMs", json_integer(MCP_LIST_TTL_MS));
    json_object_set_new(result, "cacheScope", json_string("public"));
  } else if (server->tasks_enabled) {
    mcp_tasks_tools_list(server, tools);
  }
#ifdef UVT_MCP_SLURM
  if (server->slurm != NULL) {
    json_array_append_new(tools, mcp_slurm_schema());
    json_array_append_new(tools, mcp_slurm_info_schema());
  }
#endif
  /* After the Slurm tools: submit_job states the limits too (L-LIM-3);
   * the others look only at the tools that start commands here. */
  mcp_sandbox_describe(server, tools); /* S-4 */
  mcp_limits_describe(server, tools);  /* L-LIM-3 */
  mcp_durable_describe(server, tools); /* D-7 */
  json_object_set_new(result, "tools", tools);
  mcp_rpc_result(server, id, result);
}

/* server/discover (2026): what this server speaks and offers. */
static void rpc_discover(mcp_server_t *server, json_t *id) {
  json_t *result;

  result = json_pack(
      "{s:[s], s:{s:{s:b}, s:{}, s:{s:{}}}, s:s, s:i, s:s, s:{s:o}}",
      "supportedVersions", MCP_PROTOCOL_2026, "capabilities", "tools",
      "listChanged", 0, "logging", "extensions", MCP_TASKS_EXTENSION,
      "instructions", server_instructions, "ttlMs", MCP_LIST_TTL_MS,
      "cacheScope", "public", "_meta", MCP_META_SERVER_INFO, rpc_server_info());
  if (result == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  mcp_rpc_result(server, id, result);
}

static void rpc_set_level(mcp_server_t *server, json_t *id, json_t *params) {
  json_t *jlevel = json_object_get(params, "level");
  size_t i;

  if (json_is_string(jlevel)) {
    for (i = 0; i < sizeof(log_levels) / sizeof(log_levels[0]); i++) {
      if (strcmp(json_string_value(jlevel), log_levels[i]) == 0) {
        server->log_level = (int)i;
        mcp_rpc_result(server, id, json_object());
        return;
      }
    }
  }
  mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                "Invalid params: level must be one of debug, info, notice, "
                "warning, error, critical, alert, emergency");
}

static void rpc_cancelled(mcp_server_t *server, json_t *params) {
  json_t *rid = json_object_get(params, "requestId");
  mcp_call_t *call;

  if (rid == NULL)
    return;
  /* A waiting tasks/result given up: it will not be answered (the task
   * goes on). */
  if (mcp_tasks_cancel_request(server, rid))
    return;
  for (call = server->calls; call != NULL; call = call->next) {
    if (!call->cancelled && call->task == NULL && !call->task_errors &&
        json_equal(call->id, rid)) {
      /* M-MCP-1: stop that call's wait; it will not be answered. */
      call->cancelled = 1;
      uvt_tools_call_abort(&call->req);
      return;
    }
  }
}

static void rpc_notification(mcp_server_t *server, const char *method,
                             json_t *params) {
  if (strcmp(method, "notifications/cancelled") == 0)
    rpc_cancelled(server, params);
  /* notifications/initialized and everything else need nothing from us;
   * a notification is never answered, not even with an error. */
}

/* ---------------------------------------------------------------------- */
/* Dispatch, by era                                                        */

/* The index of a log level name, or -1. */
static int rpc_log_level(json_t *j) {
  size_t i;

  if (!json_is_string(j))
    return -1;
  for (i = 0; i < sizeof(log_levels) / sizeof(log_levels[0]); i++)
    if (strcmp(json_string_value(j), log_levels[i]) == 0)
      return (int)i;
  return -1;
}

/* Nonzero if a request belongs to the 2026 era (M-MCP-9): server/discover
 * always does; any other method when its _meta carries the protocol
 * version or the client capabilities.  Nothing is inferred from earlier
 * requests on the pipe. */
static int rpc_is_2026(const char *method, json_t *params) {
  json_t *meta = json_object_get(params, "_meta");

  if (strcmp(method, "server/discover") == 0)
    return 1;
  return json_is_object(meta) &&
         (json_object_get(meta, MCP_META_VERSION) != NULL ||
          json_object_get(meta, MCP_META_CAPS) != NULL);
}

/* A 2026-era request: check its _meta, then dispatch. */
static void rpc_request_2026(mcp_server_t *server, json_t *id,
                             const char *method, json_t *params) {
  json_t *meta = json_object_get(params, "_meta");
  json_t *ver = json_object_get(meta, MCP_META_VERSION);
  json_t *caps = json_object_get(meta, MCP_META_CAPS);
  json_t *exts;
  json_t *data;

  if (!json_is_object(meta)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: _meta with " MCP_META_VERSION
                  " and " MCP_META_CAPS " is required");
    return;
  }
  if (!json_is_string(ver)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: _meta." MCP_META_VERSION
                  " must be a string");
    return;
  }
  if (!json_is_object(caps)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: _meta." MCP_META_CAPS " must be an object");
    return;
  }
  if (strcmp(json_string_value(ver), MCP_PROTOCOL_2026) != 0) {
    data = json_pack("{s:O, s:[s]}", "requested", ver, "supported",
                     MCP_PROTOCOL_2026);
    mcp_rpc_error_data(
        server, id, RPC_UNSUPPORTED_VERSION,
        "Unsupported protocol version (this server speaks " MCP_PROTOCOL_2026
        " per request, and the 2025 revisions "
        "through initialize)",
        data);
    return;
  }
  exts = json_object_get(caps, "extensions");
  server->req_tasks =
      json_is_object(json_object_get(exts, MCP_TASKS_EXTENSION));
  server->req_log_level =
      rpc_log_level(json_object_get(meta, MCP_META_LOG_LEVEL));

  if (strcmp(method, "server/discover") == 0)
    rpc_discover(server, id);
  else if (strcmp(method, "tools/list") == 0)
    rpc_tools_list(server, id);
  else if (strcmp(method, "tools/call") == 0)
    mcp_rpc_tools_call(server, id, params);
  else if (strcmp(method, "tasks/get") == 0 ||
           strcmp(method, "tasks/update") == 0 ||
           strcmp(method, "tasks/cancel") == 0) {
    if (!server->req_tasks) {
      data = json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
                       MCP_TASKS_EXTENSION);
      mcp_rpc_error_data(
          server, id, RPC_MISSING_CAPABILITY,
          "Missing required client capability: the " MCP_TASKS_EXTENSION
          " extension",
          data);
      return;
    }
    mcp_tasks_request_2026(server, method, id, params);
  } else {
    /* initialize, ping, logging/setLevel, tasks/result, tasks/list and
     * everything unknown: not part of this era. */
    mcp_rpc_errorf(server, id, RPC_METHOD_NOT_FOUND, "Method not found: %.200s",
                   method);
  }
}

/* A 2025-era request. */
static void rpc_request_2025(mcp_server_t *server, json_t *id,
                             const char *method, json_t *params) {
  /* M-MCP-8: only ping before initialize. */
  if (server->version == NULL && strcmp(method, "initialize") != 0 &&
      strcmp(method, "ping") != 0) {
    mcp_rpc_error(
        server, id, RPC_INVALID_REQUEST,
        "Invalid Request: the session is not initialized; send "
        "initialize first (or, for protocol revision " MCP_PROTOCOL_2026
        ", the per-request _meta)");
    return;
  }
  if (strcmp(method, "initialize") == 0)
    rpc_initialize(server, id, params);
  else if (strcmp(method, "ping") == 0)
    mcp_rpc_result(server, id, json_object());
  else if (strcmp(method, "tools/list") == 0)
    rpc_tools_list(server, id);
  else if (strcmp(method, "tools/call") == 0)
    mcp_rpc_tools_call(server, id, params);
  else if (strncmp(method, "tasks/", 6) == 0)
    mcp_tasks_request(server, method, id, params);
  else if (strcmp(method, "logging/setLevel") == 0)
    rpc_set_level(server, id, params);
  else
    mcp_rpc_errorf(server, id, RPC_METHOD_NOT_FOUND, "Method not found: %.200s",
                   method);
}

/* One message (an object, or an element of a batch). */
void mcp_rpc_message(mcp_server_t *server, json_t *msg) {
  json_t *id;
  json_t *jmethod;
  json_t *params;
  const char *method;

  if (!json_is_object(msg)) {
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST,
                  "Invalid Request: a message must be a JSON object");
    return;
  }
  id = json_object_get(msg, "id");
  if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST,
                  "Invalid Request: id must be a string or an integer");
    return;
  }
  jmethod = json_object_get(msg, "method");
  if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
      strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0) {
    mcp_rpc_error(server, id, RPC_INVALID_REQUEST,
                  "Invalid Request: jsonrpc must be \"2.0\"");
    return;
  }
  if (jmethod == NULL && id != NULL &&
      (json_object_get(msg, "result") != NULL ||
       json_object_get(msg, "error") != NULL)) {
    /* A response: we send no requests, so there is nothing to match. */
    return;
  }
  if (!json_is_string(jmethod)) {
    mcp_rpc_error(server, id, RPC_INVALID_REQUEST,
                  "Invalid Request: method must be a string");
    return;
  }
  method = json_string_value(jmethod);
  params = json_object_get(msg, "params");
  if (params != NULL && !json_is_object(params)) {
    if (id != NULL)
      mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                    "Invalid params: params must be an object");
    return;
  }

  if (id == NULL) {
    rpc_notification(server, method, params);
    return;
  }
  server->req_tasks = 0;
  server->req_log_level = -1;
  if (rpc_is_2026(method, params)) {
    server->era = MCP_ERA_2026;
    rpc_request_2026(server, id, method, params);
  } else {
    server->era = MCP_ERA_2025;
    rpc_request_2025(server, id, method, params);
  }
  server->era = MCP_ERA_2025;
  server->req_tasks = 0;
  server->req_log_level = -1;
}
