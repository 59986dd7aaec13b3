/* JSON-RPC 2.0 and the MCP methods of uvtasks-mcp (M-MCP-1..3).  Every
 * message is parsed and built with jansson; every text put into a message
 * is valid UTF-8 (the tools' results are, and anything else is repaired
 * first).  A tool result may hold NUL bytes of command output: it is
 * handled by its length throughout, and jansson writes each NUL as \u0000
 * (M-MCP-8). */
#include "mcp.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvtasks/process.h"

static const char *const protocol_versions[] = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07",
};

/* RFC 5424 severities as MCP names them, lowest first. */
static const char *const log_levels[] = {
    "debug", "info",     "notice", "warning",
    "error", "critical", "alert",  "emergency",
};
#define LOG_LEVEL_NOTICE 2

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
/* Sending                                                                 */

/* A JSON string of `len` bytes (NULs included), repaired to valid UTF-8 if
 * needed. */
json_t *mcp_rpc_string(const char *s, size_t len) {
  mcp_text_t t;
  json_t *j;

  j = json_stringn(s, len);
  if (j != NULL)
    return j;
  mcp_text_init(&t);
  mcp_text_utf8(&t, s, len);
  if (t.err != 0) {
    mcp_text_free(&t);
    return NULL;
  }
  j = json_stringn(t.base != NULL ? t.base : "", t.len);
  mcp_text_free(&t);
  return j;
}

/* A response (not a notification) of the batch being answered goes into
 * the batch's array instead of onto the wire. */
static int rpc_batch_take(mcp_server_t *server, json_t *msg) {
  if (server->batch == NULL || json_object_get(msg, "method") != NULL)
    return 0;
  json_array_append_new(server->batch->answers, msg);
  return 1;
}

/* Send `msg` as one line and release it. */
void mcp_rpc_send(mcp_server_t *server, json_t *msg) {
  char *s;
  size_t len;

  if (msg == NULL || rpc_batch_take(server, msg))
    return;
  /* M-MCP-8: a NUL in a string travels as \u0000 (jansson escapes it). */
  s = json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(12));
  json_decref(msg);
  if (s == NULL) {
    fprintf(stderr, "uvtasks-mcp: could not encode a message\n");
    return;
  }
  len = strlen(s);
  /* json_dumps gives a NUL-terminated string with room only for itself;
   * the newline goes in a second write behind it. */
  mcp_out_write(&server->out, s, len);
  mcp_out_write(&server->out, "\n", 1);
  free(s);
}

void mcp_rpc_result(mcp_server_t *server, json_t *id, json_t *result) {
  json_t *msg = json_object();

  if (msg == NULL || result == NULL) {
    json_decref(msg);
    json_decref(result);
    return;
  }
  /* M-MCP-9: every 2026-era result names its type. */
  if (server->era == MCP_ERA_2026 && json_is_object(result) &&
      json_object_get(result, "resultType") == NULL)
    json_object_set_new(result, "resultType", json_string("complete"));
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set(msg, "id", id);
  json_object_set_new(msg, "result", result);
  mcp_rpc_send(server, msg);
}

/* An error answer whose message is `len` bytes (a tool's text may hold
 * NULs); `id` NULL means the request's id is unknown (null). */
static void rpc_error_len(mcp_server_t *server, json_t *id, int code,
                          const char *message, size_t len) {
  json_t *msg = json_object();
  json_t *err = json_object();

  if (msg == NULL || err == NULL) {
    json_decref(msg);
    json_decref(err);
    return;
  }
  json_object_set_new(err, "code", json_integer(code));
  json_object_set_new(err, "message", mcp_rpc_string(message, len));
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set(msg, "id", id != NULL ? id : json_null());
  json_object_set_new(msg, "error", err);
  mcp_rpc_send(server, msg);
}

void mcp_rpc_error(mcp_server_t *server, json_t *id, int code,
                   const char *message) {
  rpc_error_len(server, id, code, message, strlen(message));
}

/* An error answer with `data` (released). */
static void rpc_error_data(mcp_server_t *server, json_t *id, int code,
                           const char *message, json_t *data) {
  json_t *msg = json_object();
  json_t *err = json_object();

  if (msg == NULL || err == NULL || data == NULL) {
    json_decref(msg);
    json_decref(err);
    json_decref(data);
    mcp_rpc_error(server, id, code, message);
    return;
  }
  json_object_set_new(err, "code", json_integer(code));
  json_object_set_new(err, "message", mcp_rpc_string(message, strlen(message)));
  json_object_set_new(err, "data", data);
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set(msg, "id", id != NULL ? id : json_null());
  json_object_set_new(msg, "error", err);
  mcp_rpc_send(server, msg);
}

static void rpc_errorf(mcp_server_t *server, json_t *id, int code,
                       const char *fmt, const char *arg) {
  char buf[512];

  snprintf(buf, sizeof(buf), fmt, arg);
  mcp_rpc_error(server, id, code, buf);
}

/* ---------------------------------------------------------------------- */
/* Notices (M-MCP-2)                                                       */

static int rpc_log_wanted(const mcp_server_t *server) {
  const mcp_call_t *call;

  if (server->version != NULL && server->log_level <= LOG_LEVEL_NOTICE)
    return 1;
  for (call = server->calls; call != NULL; call = call->next)
    if (call->era == MCP_ERA_2026 && call->log_level >= 0 &&
        call->log_level <= LOG_LEVEL_NOTICE && !call->cancelled)
      return 1;
  return 0;
}

void mcp_rpc_notice(uvt_tools_t *tools, uvt_agent_t *owner, const char *text) {
  mcp_server_t *server = tools->data;
  mcp_notice_t *n;
  json_t *msg;
  json_t *params;
  size_t len = strlen(text);

  /* Kept for the next tool result, so a model sees it. */
  n = malloc(sizeof(*n) + len);
  if (n != NULL) {
    memcpy(n->text, text, len + 1);
    n->next = NULL;
    if (server->notices_tail != NULL)
      server->notices_tail->next = n;
    else
      server->notices = n;
    server->notices_tail = n;
  }

  /* And sent at once as a log notification, unless nobody asked for one:
   * a 2025 session unless it asked for less than notices; 2026 requests
   * only while one that names a logLevel of notice or lower is pending
   * (M-MCP-9: no unsolicited log notifications). */
  if (!rpc_log_wanted(server))
    return;
  msg = json_object();
  params = json_object();
  if (msg == NULL || params == NULL) {
    json_decref(msg);
    json_decref(params);
    return;
  }
  json_object_set_new(params, "level", json_string("notice"));
  json_object_set_new(params, "logger", json_string("uvtasks"));
  json_object_set_new(params, "data", mcp_rpc_string(text, len));
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set_new(msg, "method", json_string("notifications/message"));
  json_object_set_new(msg, "params", params);
  mcp_rpc_send(server, msg);
}

void mcp_rpc_free_notices(mcp_server_t *server) {
  mcp_notice_t *n;

  while (server->notices != NULL) {
    n = server->notices;
    server->notices = n->next;
    free(n);
  }
  server->notices_tail = NULL;
}

/* ---------------------------------------------------------------------- */
/* tools/call                                                              */

static void call_unlink(mcp_call_t *call) {
  mcp_server_t *server = call->server;

  if (call->prev != NULL)
    call->prev->next = call->next;
  else
    server->calls = call->next;
  if (call->next != NULL)
    call->next->prev = call->prev;
}

/* The CallToolResult: one text block, notices first if asked. */
json_t *mcp_rpc_tool_result(mcp_server_t *server, const char *text, size_t len,
                            int is_error, int notices) {
  mcp_text_t t;
  mcp_notice_t *n;
  json_t *result;
  json_t *content;
  json_t *block;
  json_t *str;

  mcp_text_init(&t);
  for (n = notices ? server->notices : NULL; n != NULL; n = n->next) {
    mcp_text_str(&t, "[notice] ");
    mcp_text_str(&t, n->text);
    mcp_text_str(&t, "\n");
  }
  if (notices && server->notices != NULL)
    mcp_text_str(&t, "\n");
  mcp_text_raw(&t, text, len);
  if (t.err != 0) {
    mcp_text_free(&t);
    return NULL;
  }
  str = mcp_rpc_string(t.base != NULL ? t.base : "", t.len);
  mcp_text_free(&t);
  result = json_object();
  content = json_array();
  block = json_object();
  if (str == NULL || result == NULL || content == NULL || block == NULL) {
    json_decref(str);
    json_decref(result);
    json_decref(content);
    json_decref(block);
    return NULL;
  }
  /* Shown now: the notices are spent. */
  if (notices)
    mcp_rpc_free_notices(server);
  json_object_set_new(block, "type", json_string("text"));
  json_object_set_new(block, "text", str);
  json_array_append_new(content, block);
  json_object_set_new(result, "content", content);
  json_object_set_new(result, "isError", json_boolean(is_error));
  return result;
}

static void tool_error_result(mcp_server_t *server, json_t *id,
                              const char *text) {
  json_t *result;

  /* A call asked as a task that cannot start one: a protocol error. */
  if (server->parsing_task_call) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS, text);
    return;
  }
  result = mcp_rpc_tool_result(server, text, strlen(text), 1, 1);

  if (result == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  mcp_rpc_result(server, id, result);
}

/* P-LEFT-1: does ended task `id` still have processes running in its
 * session (or cgroup), whatever their process group (`set -m` jobs,
 * `nohup timeout 3600 cmd &`)?  Such a record is never forgotten by
 * retention: the model sees the count in its status lines, and a
 * forget would stop them without a word. */
static int rpc_has_leftovers(mcp_server_t *server, const char *id) {
  return uvt_process_leftovers(server->reg, id, &server->agent) > 0;
}

/* P-LEFT-1: the tasks the client holds against --max-tasks: its live
 * tasks and the ended ones whose processes still run (`cmd &` must not
 * take the client past the cap).  The registry counts only the live ones
 * (max_live_per_owner), so a start is refused here when the ended ones
 * make up the rest: 1 and `*held`, or 0. */
static int rpc_over_max_tasks(mcp_server_t *server, size_t *held) {
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  size_t i;
  size_t live = 0;

  *held = 0;
  if (server->config.max_tasks == 0 || server->reg == NULL ||
      uvt_list(server->reg, &server->agent, &snaps, &n) != 0)
    return 0;
  for (i = 0; i < n; i++) {
    if (!uvt_status_is_terminal(snaps[i].status))
      live++;
    else if (rpc_has_leftovers(server, snaps[i].id))
      (*held)++;
  }
  uvt_snapshots_free(snaps, n);
  /* With no ended task holding processes, the registry's own count (and
   * its error text) applies. */
  if (*held == 0)
    return 0;
  *held += live;
  return *held >= server->config.max_tasks;
}

/* Long sessions: beyond the --keep-finished count, forget the oldest
 * finished tasks whose end the model has seen (reported), so memory stays
 * bounded (R-FORGET-1).  Tasks with an unseen end are kept, and so are
 * tasks that left processes running (rpc_has_leftovers). */
static int rpc_forgettable(mcp_server_t *server, const uvt_snapshot_t *s) {
  if (!uvt_status_is_terminal(s->status) || !s->reported)
    return 0;
  /* MCP tasks keep their records for their ttl. */
  if (mcp_task_find(server, s->id) != NULL)
    return 0;
  return !rpc_has_leftovers(server, s->id);
}

/* M-MCP-11: the bounds live in retention.c; this predicate stays here. */
void mcp_rpc_bound_retention(mcp_server_t *server) {
  mcp_retention_bound(server, rpc_forgettable);
}

/* One answer fewer owed to `b`; the last one sends the array. */
static void rpc_batch_release(mcp_server_t *server, mcp_batch_t *b) {
  json_t *answers;

  if (b == NULL || --b->pending > 0)
    return;
  answers = b->answers;
  free(b);
  /* A batch of notifications only gets no answer at all. */
  if (json_array_size(answers) > 0)
    mcp_rpc_send(server, answers);
  else
    json_decref(answers);
}

void mcp_rpc_call_free(mcp_call_t *call) {
  mcp_server_t *server = call->server;
  mcp_batch_t *batch = call->batch;

  uvt_tools_call_cleanup(&call->req);
  json_decref(call->id);
  json_decref(call->progress);
  free(call);
  rpc_batch_release(server, batch);
}

static void call_answer(mcp_call_t *call, int status) {
  mcp_server_t *server = call->server;
  uvt_tools_call_t *req = &call->req;
  json_t *result;

  if (call->task != NULL) {
    /* Answered with a CreateTaskResult; the result belongs to the task. */
    mcp_task_call_done(call->task, status);
    return;
  }
  /* A cancelled request gets no answer (MCP cancellation).  At shutdown a
   * call stopped by the tools' detach is answered with an error while the
   * client can still read it (M-MCP-6: pending requests are answered). */
  if (call->cancelled || status == UVT_EABORTED)
    return;
  if (status == UVT_ECLOSING) {
    mcp_rpc_error(server, call->id, RPC_INTERNAL_ERROR,
                  "Internal error: the server is shutting down; every task "
                  "is being stopped");
    return;
  }
  if (status != 0) {
    rpc_errorf(server, call->id, RPC_INTERNAL_ERROR, "Internal error: %s",
               uvt_strerror(status));
    return;
  }
  if (call->task_errors && req->is_error) {
    rpc_error_len(server, call->id, RPC_INVALID_PARAMS, req->text, req->len);
    return;
  }
  result = mcp_rpc_tool_result(server, req->text, req->len, req->is_error, 1);
  if (result == NULL)
    mcp_rpc_error(server, call->id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
  else
    mcp_rpc_result(server, call->id, result);
}

static void call_cb(uvt_tools_call_t *req, int status) {
  mcp_call_t *call = req->data;
  mcp_server_t *server = call->server;
  int era = server->era;

  call_unlink(call);
  /* Answer in the request's own era and batch. */
  server->era = call->era;
  server->batch = call->batch;
  call_answer(call, status);
  server->batch = NULL;
  server->era = era;
  mcp_rpc_call_free(call);
  mcp_progress_update(server);
  if (status == 0) {
    mcp_rpc_bound_retention(server);
    mcp_guardian_prune(server);
  }
}

/* Read one optional string argument.  Returns 0, or -1 after answering. */
static int arg_string(mcp_server_t *server, json_t *id, json_t *args,
                      const char *tool, const char *key, const char **out) {
  json_t *v = json_object_get(args, key);
  char buf[256];

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v)) {
    snprintf(buf, sizeof(buf), "%s: %s must be a string.", tool, key);
    tool_error_result(server, id, buf);
    return -1;
  }
  if (strlen(json_string_value(v)) != json_string_length(v)) {
    snprintf(buf, sizeof(buf), "%s: %s must not contain NUL characters.", tool,
             key);
    tool_error_result(server, id, buf);
    return -1;
  }
  *out = json_string_value(v);
  return 0;
}

/* Read an optional whole-number argument `key` of at least `min` (JSON
 * integers, and reals with no fraction; values beyond int64 are
 * INT64_MAX, which every tool caps); `what` names its unit in the error.
 * Left alone when not given.  Returns 0, or -1 after answering. */
static int arg_whole(mcp_server_t *server, json_t *id, json_t *args,
                     const char *tool, const char *key, int64_t min,
                     const char *what, int64_t *out) {
  json_t *v = json_object_get(args, key);
  double d;
  char buf[200];

  if (v == NULL || json_is_null(v))
    return 0;
  if (json_is_integer(v) && json_integer_value(v) >= min) {
    *out = (int64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_real(v)) {
    d = json_real_value(v);
    if (d >= (double)min && (d >= 9e18 || d == (double)(int64_t)d)) {
      *out = d >= 9e18 ? INT64_MAX : (int64_t)d;
      return 0;
    }
  }
  snprintf(buf, sizeof(buf),
           "%s: %s must be a whole number of %s, at least %lld.", tool, key,
           what, (long long)min);
  tool_error_result(server, id, buf);
  return -1;
}

/* Read an optional boolean argument into *out (left alone when not
 * given).  Returns 0, or -1 after answering. */
static int arg_bool(mcp_server_t *server, json_t *id, json_t *args,
                    const char *tool, const char *key, int *out) {
  json_t *v = json_object_get(args, key);
  char buf[200];

  if (v == NULL || json_is_null(v))
    return 0;
  if (json_is_boolean(v)) {
    *out = json_is_true(v);
    return 0;
  }
  snprintf(buf, sizeof(buf), "%s: %s must be true or false.", tool, key);
  tool_error_result(server, id, buf);
  return -1;
}

/* write_stdin's chars (M-TOOLS-5): a string of any characters, U+0000
 * included (it is written as a byte), so it is taken with its length.
 * Returns 0, or -1 after answering. */
static int arg_chars(mcp_server_t *server, json_t *id, json_t *args,
                     const char *tool, uvt_tools_args_t *a) {
  json_t *v = json_object_get(args, "chars");
  char buf[200];

  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v)) {
    snprintf(buf, sizeof(buf),
             "%s: chars must be a string (\"\" to only read output).", tool);
    tool_error_result(server, id, buf);
    return -1;
  }
  a->chars = json_string_value(v);
  a->chars_len = json_string_length(v);
  return 0;
}

/* timeout_ms: at least 1; more than any cap is capped by the tool. */
static int arg_timeout(mcp_server_t *server, json_t *id, json_t *args,
                       const char *tool, int64_t *out) {
  return arg_whole(server, id, args, tool, "timeout_ms", 1, "milliseconds",
                   out);
}

/* max_bytes (M-TOOLS-8): at least 1 (the tools raise small ones to
 * UVT_TOOLS_MAX_BYTES_MIN). */
static int arg_max_bytes(mcp_server_t *server, json_t *id, json_t *args,
                         const char *tool, int64_t *out) {
  return arg_whole(server, id, args, tool, "max_bytes", 1, "bytes", out);
}

/* params.task of a tools/call (MCP Tasks).  Returns 1 if the call is to run
 * as a task, 0 if not, -1 after answering an error. */
static int tools_call_task(mcp_server_t *server, json_t *id, json_t *params,
                           const char *name, double *ttl, int *ttl_given) {
  json_t *task = json_object_get(params, "task");
  json_t *jttl;
  const char *support;

  *ttl = 0;
  *ttl_given = 0;
  /* 2026: the server decides.  run_command becomes a task when the request
   * opted into the Tasks extension; a legacy `task` field is tolerated and
   * means nothing. */
  if (server->era == MCP_ERA_2026)
    return server->req_tasks && strcmp(name, "run_command") == 0;
  /* Without Tasks negotiated the field means nothing (the spec: process
   * the request normally). */
  if (task == NULL || !server->tasks_enabled)
    return 0;
  if (!json_is_object(task)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: task must be an object");
    return -1;
  }
  jttl = json_object_get(task, "ttl");
  if (jttl != NULL) {
    if (!json_is_number(jttl) || json_number_value(jttl) < 0) {
      mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                    "Invalid params: task.ttl must be a number of "
                    "milliseconds, at least 0");
      return -1;
    }
    *ttl = json_number_value(jttl);
    *ttl_given = 1;
  }
  support = mcp_tool_task_support(name);
  if (support == NULL || strcmp(support, "forbidden") == 0) {
    rpc_errorf(server, id, RPC_METHOD_NOT_FOUND,
               "Method not found: tool %.200s does not run as a task "
               "(execution.taskSupport is forbidden)",
               name);
    return -1;
  }
  return 1;
}

/* The v3 arguments (M-TOOLS-9..13), in one place: task_screen's task_id,
 * task_wait's task_ids (into `ids`, which must hold
 * UVT_TOOLS_WAIT_IDS_MAX), mode, timeout_ms and max_bytes; merge_stderr of
 * the two starting tools; run_command's stdin string.  0, or -1 after
 * answering with a tool error. */
static int tools_args_v3(mcp_server_t *server, json_t *id, json_t *args,
                         const char *name, uvt_tools_args_t *a,
                         const char **ids) {
  json_t *v;
  json_t *item;
  size_t i;
  char buf[200];

  if (strcmp(name, "run_command") == 0 ||
      strcmp(name, "run_in_background") == 0) {
    if (arg_bool(server, id, args, name, "merge_stderr", &a->merge_stderr) != 0)
      return -1;
    v = json_object_get(args, "stdin");
    if (strcmp(name, "run_command") == 0 && v != NULL && !json_is_null(v)) {
      if (!json_is_string(v)) {
        tool_error_result(server, id,
                          "run_command: stdin must be a string (the bytes "
                          "the command reads, then end of file).");
        return -1;
      }
      a->stdin_text = json_string_value(v);
      a->stdin_text_len = json_string_length(v);
    }
    return 0;
  }
  if (strcmp(name, "task_screen") == 0) { /* M-TOOLS-11 */
    if (arg_string(server, id, args, name, "task_id", &a->task_id) != 0)
      return -1;
    if (a->task_id != NULL && mcp_task_find(server, a->task_id) != NULL) {
      snprintf(buf, sizeof(buf),
               "task_screen: %.100s is an MCP task; use tasks/get or "
               "tasks/result.",
               a->task_id);
      tool_error_result(server, id, buf);
      return -1;
    }
    return 0;
  }
  if (strcmp(name, "task_wait") != 0)
    return 0;
  v = json_object_get(args, "task_ids");
  if (!json_is_array(v) || json_array_size(v) == 0 ||
      json_array_size(v) > UVT_TOOLS_WAIT_IDS_MAX) {
    snprintf(buf, sizeof(buf),
             "task_wait: task_ids must be an array of 1 to %d task ids.",
             UVT_TOOLS_WAIT_IDS_MAX);
    tool_error_result(server, id, buf);
    return -1;
  }
  json_array_foreach(v, i, item) {
    if (!json_is_string(item)) {
      tool_error_result(server, id,
                        "task_wait: every task id must be a string.");
      return -1;
    }
    ids[i] = json_string_value(item);
    /* An MCP task's output belongs to its tasks/result. */
    if (mcp_task_find(server, ids[i]) != NULL) {
      snprintf(buf, sizeof(buf),
               "task_wait: %.100s is an MCP task; use tasks/get or "
               "tasks/result.",
               ids[i]);
      tool_error_result(server, id, buf);
      return -1;
    }
  }
  a->task_ids = ids;
  a->task_ids_len = json_array_size(v);
  if (arg_string(server, id, args, name, "mode", &a->mode) != 0 ||
      arg_timeout(server, id, args, name, &a->timeout_ms) != 0 ||
      arg_max_bytes(server, id, args, name, &a->max_bytes) != 0)
    return -1;
  return 0;
}

static void rpc_tools_call(mcp_server_t *server, json_t *id, json_t *params) {
  json_t *jname = json_object_get(params, "name");
  json_t *args = json_object_get(params, "arguments");
  json_t *v;
  const char *name;
  const char *started;
  uvt_tools_args_t a;
  const char *ids[UVT_TOOLS_WAIT_IDS_MAX];
  mcp_call_t *call;
  char buf[256];
  double ttl;
  int ttl_given;
  int as_task;
  int err;

  if (!json_is_string(jname)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: tools/call needs \"name\", a string");
    return;
  }
  name = json_string_value(jname);
#ifdef UVT_MCP_SLURM
  /* E-8: submit_job, with --slurm. */
  if (server->slurm != NULL && strcmp(name, "submit_job") == 0) {
    json_t *result;
    char text[512];
    int is_error = mcp_slurm_submit(server, args, text, sizeof(text));
    result = mcp_rpc_tool_result(server, text, strlen(text), is_error, 1);
    if (result == NULL)
      mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                    "Internal error: out of memory");
    else
      mcp_rpc_result(server, id, result);
    return;
  }
#endif
  if (!uvt_tools_has(name)) {
    rpc_errorf(server, id, RPC_INVALID_PARAMS, "Unknown tool: %.200s", name);
    return;
  }
  as_task = tools_call_task(server, id, params, name, &ttl, &ttl_given);
  if (as_task < 0)
    return;
  /* From here a task-augmented call's failures are JSON-RPC errors: there
   * is no task to hold a tool result.  (2026: the server decides, and a
   * call that cannot start a task is answered like a plain one.) */
  server->parsing_task_call = as_task && server->era == MCP_ERA_2025;
  if (args == NULL || json_is_null(args)) {
    args = NULL;
  } else if (!json_is_object(args)) {
    snprintf(buf, sizeof(buf), "%s: arguments must be an object.", name);
    tool_error_result(server, id, buf);
    goto out;
  }

  /* Only the arguments a schema names are looked at: those a host adds
   * (Gemini CLI's wait_for_previous) are ignored (M-TOOLS-15). */
  uvt_tools_args_init(&a);
  if (strcmp(name, "run_in_background") == 0) {
    if (arg_string(server, id, args, name, "command", &a.command) != 0 ||
        arg_string(server, id, args, name, "cwd", &a.cwd) != 0 ||
        arg_string(server, id, args, name, "label", &a.label) != 0 ||
        arg_bool(server, id, args, name, "stdin", &a.stdin_pipe) != 0 ||
        arg_bool(server, id, args, name, "tty", &a.tty) != 0)
      goto out;
  } else if (strcmp(name, "run_command") == 0) {
    if (arg_string(server, id, args, name, "command", &a.command) != 0 ||
        arg_string(server, id, args, name, "cwd", &a.cwd) != 0 ||
        arg_timeout(server, id, args, name, &a.timeout_ms) != 0 ||
        arg_whole(server, id, args, name, "yield_ms", 0, "milliseconds",
                  &a.yield_ms) != 0 ||
        arg_max_bytes(server, id, args, name, &a.max_bytes) != 0)
      goto out;
    /* M-TOOLS-6: a task's result is the command's end (tasks/result,
     * 2026 tasks/get), so a task-augmented call never yields: the task
     * itself is the "goes on in the background" (a yield_ms given is
     * checked, then has no effect). */
    if (as_task)
      a.yield_ms = 0;
  } else if (strcmp(name, "task_output") == 0 ||
             strcmp(name, "task_kill") == 0 ||
             strcmp(name, "write_stdin") == 0) {
    if (arg_string(server, id, args, name, "task_id", &a.task_id) != 0)
      goto out;
    /* An MCP task's output belongs to its tasks/result: the model's tools
     * leave it alone. */
    if (a.task_id != NULL && mcp_task_find(server, a.task_id) != NULL) {
      snprintf(buf, sizeof(buf),
               "%s: %.100s is an MCP task; use tasks/get, tasks/result or "
               "tasks/cancel.",
               name, a.task_id);
      tool_error_result(server, id, buf);
      goto out;
    }
    if (strcmp(name, "task_kill") == 0) {
      if (arg_string(server, id, args, name, "reason", &a.reason) != 0 ||
          arg_string(server, id, args, name, "signal", &a.signal) != 0)
        goto out;
    } else if (strcmp(name, "write_stdin") == 0) {
      /* M-TOOLS-5 */
      if (arg_chars(server, id, args, name, &a) != 0 ||
          arg_bool(server, id, args, name, "close_stdin", &a.close_stdin) !=
              0 ||
          arg_whole(server, id, args, name, "yield_ms", 0, "milliseconds",
                    &a.yield_ms) != 0 ||
          arg_max_bytes(server, id, args, name, &a.max_bytes) != 0)
        goto out;
    } else {
      if (arg_bool(server, id, args, name, "wait", &a.wait) != 0 ||
          arg_timeout(server, id, args, name, &a.timeout_ms) != 0 ||
          arg_max_bytes(server, id, args, name, &a.max_bytes) != 0)
        goto out;
    }
  }

  if (tools_args_v3(server, id, args, name, &a, ids) != 0)
    goto out;

  if (strcmp(name, "run_in_background") == 0 ||
      strcmp(name, "run_command") == 0) {
    size_t held;
    if (rpc_over_max_tasks(server, &held)) {
      snprintf(buf, sizeof(buf),
               "Not started: you already have the most running tasks "
               "allowed (%zu, counting ended tasks whose processes still "
               "run). Wait for one to end or stop one with task_kill; "
               "task_list shows them.",
               held);
      tool_error_result(server, id, buf);
      goto out;
    }
  }

  call = calloc(1, sizeof(*call));
  if (call == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    goto out;
  }
  call->server = server;
  call->id = json_incref(id);
  call->req.data = call;
  call->era = server->era;
  call->log_level = server->req_log_level;
  call->started_ms = uv_now(server->loop);
  call->progress_ms = call->started_ms;
  v = json_object_get(json_object_get(params, "_meta"), "progressToken");
  if (json_is_string(v) || json_is_integer(v))
    call->progress = json_incref(v);
  err = uvt_tools_call(&server->tools, &call->req, &server->agent, name, &a,
                       call_cb);
  if (err != 0) {
    rpc_errorf(server, id, RPC_INTERNAL_ERROR, "Internal error: %s",
               err == UVT_ECLOSING ? "the server is shutting down"
                                   : uvt_strerror(err));
    json_decref(call->id);
    json_decref(call->progress);
    free(call);
    goto out;
  }
  call->next = server->calls;
  if (server->calls != NULL)
    server->calls->prev = call;
  server->calls = call;
  /* Answered later: the batch waits for it. */
  if (server->batch != NULL) {
    call->batch = server->batch;
    call->batch->pending++;
  }
  if (call->progress != NULL)
    mcp_progress_update(server);
  if (as_task) {
    started = uvt_tools_call_task(&call->req);
    if (started == NULL) {
      /* The command did not start: its tool error becomes the answer
       * (2025: a JSON-RPC error; 2026: the plain tool result). */
      call->task_errors = server->era == MCP_ERA_2025;
    } else if ((server->era == MCP_ERA_2026
                    ? mcp_task_create_2026(server, call, id)
                    : mcp_task_create(server, call, id, ttl, ttl_given)) != 0) {
      /* No task record: answer now, and stop the command nobody can
       * reach. */
      call->cancelled = 1;
      uvt_tools_call_abort(&call->req);
      mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                    "Internal error: out of memory");
    }
  }

out:
  server->parsing_task_call = 0;
}

/* ---------------------------------------------------------------------- */
/* Other methods                                                           */

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
  mcp_sandbox_describe(server, tools); /* S-4 */
#ifdef UVT_MCP_SLURM
  if (server->slurm != NULL)
    json_array_append_new(tools, mcp_slurm_schema());
#endif
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
/* Lines                                                                   */

void mcp_rpc_oversized(mcp_server_t *server) {
  char buf[160];

  snprintf(buf, sizeof(buf),
           "Invalid Request: message longer than %u bytes; skipped",
           MCP_LINE_MAX);
  mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
}

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
    rpc_error_data(
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
    rpc_tools_call(server, id, params);
  else if (strcmp(method, "tasks/get") == 0 ||
           strcmp(method, "tasks/update") == 0 ||
           strcmp(method, "tasks/cancel") == 0) {
    if (!server->req_tasks) {
      data = json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
                       MCP_TASKS_EXTENSION);
      rpc_error_data(
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
    rpc_errorf(server, id, RPC_METHOD_NOT_FOUND, "Method not found: %.200s",
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
    rpc_tools_call(server, id, params);
  else if (strncmp(method, "tasks/", 6) == 0)
    mcp_tasks_request(server, method, id, params);
  else if (strcmp(method, "logging/setLevel") == 0)
    rpc_set_level(server, id, params);
  else
    rpc_errorf(server, id, RPC_METHOD_NOT_FOUND, "Method not found: %.200s",
               method);
}

/* One message (an object, or an element of a batch). */
static void rpc_message(mcp_server_t *server, json_t *msg) {
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

/* A JSON-RPC batch (M-MCP-8): only under 2025-03-26, the revision that had
 * them; the answers go back as one array once all are in. */
static void rpc_batch(mcp_server_t *server, json_t *msg) {
  mcp_batch_t *b;
  json_t *elem;
  size_t i;
  char buf[300];

  if (server->version == NULL ||
      strcmp(server->version, MCP_PROTOCOL_BATCHES) != 0) {
    snprintf(buf, sizeof(buf),
             "Invalid Request: batches are accepted only under protocol "
             "revision " MCP_PROTOCOL_BATCHES " (this session: %s)",
             server->version != NULL ? server->version : "not initialized");
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
    return;
  }
  if (json_array_size(msg) == 0) {
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST,
                  "Invalid Request: an empty batch");
    return;
  }
  /* M-MCP-12: the answer to one line is bounded like any other output. */
  if (json_array_size(msg) > MCP_BATCH_MAX) {
    snprintf(buf, sizeof(buf),
             "Invalid Request: batch too large (%zu requests; at most %u)",
             json_array_size(msg), (unsigned)MCP_BATCH_MAX);
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
    return;
  }
  b = calloc(1, sizeof(*b));
  if (b != NULL)
    b->answers = json_array();
  if (b == NULL || b->answers == NULL) {
    free(b);
    mcp_rpc_error(server, NULL, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  b->pending = 1; /* ours, while the elements are dispatched */
  json_array_foreach(msg, i, elem) {
    server->batch = b;
    rpc_message(server, elem);
  }
  server->batch = NULL;
  rpc_batch_release(server, b);
}

/* `v` as an integer if it is a real with a whole value that fits int64,
 * else NULL. */
static json_t *rpc_whole(const json_t *v) {
  double d;

  if (!json_is_real(v))
    return NULL;
  d = json_real_value(v);
  if (d < -9.2e18 || d > 9.2e18 || d != (double)(json_int_t)d)
    return NULL;
  return json_integer((json_int_t)d);
}

/* Turn the reals of `v` that are whole numbers within int64 back into
 * integers (for a message read with JSON_DECODE_INT_AS_REAL, below).
 * Returns 0, or -1 out of memory. */
static int rpc_whole_reals(json_t *v);

/* One member of a container: its integer replacement in `*w` (a whole
 * real), or NULL after fixing its own members.  0, or -1 out of memory. */
static int rpc_whole_member(json_t *elem, json_t **w) {
  *w = rpc_whole(elem);
  return *w == NULL && !json_is_real(elem) ? rpc_whole_reals(elem) : 0;
}

static int rpc_whole_reals(json_t *v) {
  const char *key;
  json_t *elem;
  json_t *w;
  void *tmp;
  size_t i;

  if (json_is_object(v)) {
    json_object_foreach_safe(v, tmp, key, elem) {
      if (rpc_whole_member(elem, &w) != 0 ||
          (w != NULL && json_object_set_new(v, key, w) != 0))
        return -1;
    }
  } else if (json_is_array(v)) {
    json_array_foreach(v, i, elem) {
      if (rpc_whole_member(elem, &w) != 0 ||
          (w != NULL && json_array_set_new(v, i, w) != 0))
        return -1;
    }
  }
  return 0;
}

/* M-MCP-12: the values a line holds, counted before parsing (each costs
 * jansson tens of bytes, a line of "[1,1,...]" of 4 MiB some 100 MB):
 * every ',' '[' '{' outside strings, and the elements of a top-level
 * array apart.  Stops counting past the limits. */
static void rpc_count_values(const char *line, size_t len, size_t *values,
                             size_t *batch) {
  int in_string = 0;
  int depth = 0;
  size_t i;

  *values = 0;
  *batch = 0;
  for (i = 0; i < len && *values <= MCP_LINE_VALUES_MAX; i++) {
    char c = line[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = 0;
      continue;
    }
    if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      if (depth == 0 && c == '[')
        *batch = 1;
      depth++;
      (*values)++;
    } else if (c == ']' || c == '}') {
      depth--;
    } else if (c == ',') {
      (*values)++;
      if (depth == 1 && *batch > 0)
        (*batch)++;
    }
  }
}

void mcp_rpc_line(mcp_server_t *server, const char *line, size_t len) {
  json_error_t jerr;
  json_t *msg;
  size_t i;
  char buf[400];

  if (server->shutting_down)
    return;
  /* Blank lines between messages are harmless. */
  for (i = 0; i < len; i++)
    if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
      break;
  if (i == len)
    return;

  /* M-MCP-12: refuse before parsing what would cost more than a few MiB:
   * a batch of more than MCP_BATCH_MAX requests, or too many values. */
  {
    size_t values;
    size_t batch;

    rpc_count_values(line, len, &values, &batch);
    if (batch > MCP_BATCH_MAX && server->version != NULL &&
        strcmp(server->version, MCP_PROTOCOL_BATCHES) == 0) {
      snprintf(buf, sizeof(buf),
               "Invalid Request: batch too large (%s%zu requests; at most "
               "%u)",
               values > MCP_LINE_VALUES_MAX ? "over " : "", batch,
               (unsigned)MCP_BATCH_MAX);
      mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
      return;
    }
    if (values > MCP_LINE_VALUES_MAX) {
      snprintf(buf, sizeof(buf),
               "Invalid Request: a message of more than %u JSON values",
               (unsigned)MCP_LINE_VALUES_MAX);
      mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
      return;
    }
  }
  msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (msg == NULL && json_error_code(&jerr) == json_error_numeric_overflow) {
    /* An integer beyond int64 is still JSON, and JavaScript writes its
     * numbers from 2^63 up to 1e21 that way (JSON.stringify(1e20)): read
     * the message with every integer as a real, then make the whole ones
     * that fit integers again, so ids and arguments look as usual and the
     * big ones are reals, which the tools cap (arg_whole).  Integers above
     * 2^53 in such a message lose their low bits. */
    msg = json_loadb(line, len,
                     JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
                     &jerr);
    if (msg != NULL && rpc_whole_reals(msg) != 0) {
      json_decref(msg);
      mcp_rpc_error(server, NULL, RPC_INTERNAL_ERROR,
                    "Internal error: out of memory");
      return;
    }
  }
  if (msg == NULL) {
    snprintf(buf, sizeof(buf), "Parse error: %s (at byte %d)", jerr.text,
             jerr.position);
    mcp_rpc_error(server, NULL, RPC_PARSE_ERROR, buf);
    return;
  }
  if (json_is_array(msg))
    rpc_batch(server, msg);
  else
    rpc_message(server, msg);
  json_decref(msg);
}
