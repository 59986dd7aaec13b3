/* tools/call (M-MCP-2, M-TOOLS-*): a call's arguments read and checked
 * with the protocol's errors, the call handed to the tool surface, and its
 * answer sent in the request's own era and batch (or kept for its MCP
 * task); the --max-tasks bound over what ended tasks left running
 * (P-LEFT-1).  The CallToolResult is built in result.c. */
#include "mcp.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvtasks/process.h"

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
    else if (mcp_retention_leftovers(server, snaps[i].id))
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

void mcp_rpc_call_free(mcp_call_t *call) {
  mcp_server_t *server = call->server;
  mcp_batch_t *batch = call->batch;

  uvt_tools_call_cleanup(&call->req);
  json_decref(call->id);
  json_decref(call->progress);
  free(call);
  mcp_rpc_batch_release(server, batch);
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
    mcp_rpc_errorf(server, call->id, RPC_INTERNAL_ERROR, "Internal error: %s",
                   uvt_strerror(status));
    return;
  }
  if (call->task_errors && req->is_error) {
    mcp_rpc_error_len(server, call->id, RPC_INVALID_PARAMS, req->text,
                      req->len);
    return;
  }
  server->result_call = call;
  result = mcp_rpc_tool_result(server, req->text, req->len, req->is_error, 1);
  server->result_call = NULL;
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
    mcp_retention_bound(server);
    mcp_guardian_prune(server);
  }
}

/* Read one optional string argument into *out (NULL when not given).
 * With `len`, a string of any characters is taken, U+0000 included (it is
 * written as a byte), and *len gets its length (left alone when not
 * given); without, a NUL is refused.  `hint`, if not NULL, says in the
 * error what the string is for.  Returns 0, or -1 after answering. */
static int arg_string(mcp_server_t *server, json_t *id, json_t *args,
                      const char *tool, const char *key, const char *hint,
                      const char **out, size_t *len) {
  json_t *v = json_object_get(args, key);
  char buf[256];

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v)) {
    if (hint != NULL)
      snprintf(buf, sizeof(buf), "%s: %s must be a string (%s).", tool, key,
               hint);
    else
      snprintf(buf, sizeof(buf), "%s: %s must be a string.", tool, key);
    tool_error_result(server, id, buf);
    return -1;
  }
  if (len == NULL && strlen(json_string_value(v)) != json_string_length(v)) {
    snprintf(buf, sizeof(buf), "%s: %s must not contain NUL characters.", tool,
             key);
    tool_error_result(server, id, buf);
    return -1;
  }
  *out = json_string_value(v);
  if (len != NULL)
    *len = json_string_length(v);
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
  support = mcp_tool_task_support(name);
  if (server->era == MCP_ERA_2026)
    return server->req_tasks && support != NULL &&
           strcmp(support, "optional") == 0;
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
  if (support == NULL || strcmp(support, "forbidden") == 0) {
    mcp_rpc_errorf(server, id, RPC_METHOD_NOT_FOUND,
                   "Method not found: tool %.200s does not run as a task "
                   "(execution.taskSupport is forbidden)",
                   name);
    return -1;
  }
  return 1;
}

/* The task_id of a tool that reads or drives a task: a string, and not
 * an MCP task's (its output belongs to its tasks/result).  `screen`: the
 * words of task_screen. */
static int arg_task_id(mcp_server_t *server, json_t *id, json_t *args,
                       const char *tool, int screen, const char **out) {
  char buf[200];
  mcp_task_t *task;

  if (arg_string(server, id, args, tool, "task_id", NULL, out, NULL) != 0)
    return -1;
  if (*out == NULL || (task = mcp_task_find(server, *out)) == NULL)
    return 0;
  if (task->era == MCP_ERA_2026) /* no tasks/result there: M-MCP-9 */
    snprintf(buf, sizeof(buf),
             "%s: %.100s is an MCP task; use tasks/get (its result comes "
             "with it)%s.",
             tool, *out, screen ? "" : " or tasks/cancel");
  else if (screen)
    snprintf(buf, sizeof(buf),
             "%s: %.100s is an MCP task; use tasks/get or tasks/result.", tool,
             *out);
  else
    snprintf(buf, sizeof(buf),
             "%s: %.100s is an MCP task; use tasks/get, tasks/result or "
             "tasks/cancel.",
             tool, *out);
  tool_error_result(server, id, buf);
  return -1;
}

/* task_wait's task_ids (M-TOOLS-9), into `ids` (UVT_TOOLS_WAIT_IDS_MAX
 * of them), none an MCP task's. */
static int arg_task_ids(mcp_server_t *server, json_t *id, json_t *args,
                        const char *tool, uvt_tools_args_t *a,
                        const char **ids) {
  json_t *v = json_object_get(args, "task_ids");
  json_t *item;
  size_t i;
  char buf[200];

  if (!json_is_array(v) || json_array_size(v) == 0 ||
      json_array_size(v) > UVT_TOOLS_WAIT_IDS_MAX) {
    snprintf(buf, sizeof(buf),
             "%s: task_ids must be an array of 1 to %d task ids.", tool,
             UVT_TOOLS_WAIT_IDS_MAX);
    tool_error_result(server, id, buf);
    return -1;
  }
  json_array_foreach(v, i, item) {
    if (!json_is_string(item)) {
      snprintf(buf, sizeof(buf), "%s: every task id must be a string.", tool);
      tool_error_result(server, id, buf);
      return -1;
    }
    ids[i] = json_string_value(item);
    /* An MCP task's output belongs to its tasks/result. */
    if (mcp_task_find(server, ids[i]) != NULL) {
      snprintf(buf, sizeof(buf),
               "%s: %.100s is an MCP task; use tasks/get or tasks/result.",
               tool, ids[i]);
      tool_error_result(server, id, buf);
      return -1;
    }
  }
  a->task_ids = ids;
  a->task_ids_len = json_array_size(v);
  return 0;
}

/* ---------------------------------------------------------------------- */
/* The tools, one row each: the arguments a call reads, in the order they
 * are checked (the first bad one is the one answered).  Which of them
 * start a task is taskmap.c's mcp_tool_starts().  An argument no row
 * names is an error (M-TOOLS-16), but for those a host adds to every
 * call (Gemini CLI's wait_for_previous), which are ignored (M-TOOLS-15). */

enum {
  ARG_END = 0,
  ARG_STRING,     /* const char * */
  ARG_BOOL,       /* int */
  ARG_MS,         /* int64_t, whole milliseconds, at least 0 (yield_ms) */
  ARG_TIMEOUT,    /* int64_t, timeout_ms: at least 1 */
  ARG_MAX_BYTES,  /* int64_t, max_bytes (M-TOOLS-8): at least 1 */
  ARG_LINES,      /* int64_t, head_lines / tail_lines (M-TOOLS-16): >= 1 */
  ARG_TASK_ID,    /* task_id, not an MCP task's */
  ARG_SCREEN_ID,  /* task_screen's task_id (M-TOOLS-11) */
  ARG_TASK_IDS,   /* task_wait's task_ids (M-TOOLS-9) */
  ARG_CHARS,      /* write_stdin's chars (M-TOOLS-5) */
  ARG_STDIN_TEXT, /* run_command's stdin (M-TOOLS-13) */
  ARG_LIMIT       /* int64_t, a limit (L-LIM-3): at least 1 */
};

typedef struct {
  const char *key;
  int type;
  /* Where ARG_STRING .. ARG_MAX_BYTES put it in uvt_tools_args_t. */
  size_t off;
} mcp_arg_t;

#define ARG(key, type, field)                                                  \
  { key, type, offsetof(uvt_tools_args_t, field) }
#define ARG_SPECIAL(key, type)                                                 \
  { key, type, 0 }

typedef struct {
  const char *name;
  mcp_arg_t args[14]; /* ends at the first ARG_END (zero) */
} mcp_tool_t;

static const mcp_tool_t mcp_tools[] = {
    {UVT_TOOL_RUN_IN_BACKGROUND,
     {ARG("command", ARG_STRING, command), ARG("cwd", ARG_STRING, cwd),
      ARG("label", ARG_STRING, label), ARG("stdin", ARG_BOOL, stdin_pipe),
      ARG("tty", ARG_BOOL, tty),
      ARG("merge_stderr", ARG_BOOL, merge_stderr) /* M-TOOLS-12 */,
      ARG("memory_mb", ARG_LIMIT, memory_mb) /* L-LIM-3 */,
      ARG("max_processes", ARG_LIMIT, max_processes),
      ARG("cpu_percent", ARG_LIMIT, cpu_percent)}},
    {UVT_TOOL_RUN_COMMAND,
     {ARG("command", ARG_STRING, command), ARG("cwd", ARG_STRING, cwd),
      ARG("timeout_ms", ARG_TIMEOUT, timeout_ms),
      ARG("yield_ms", ARG_MS, yield_ms),
      ARG("max_bytes", ARG_MAX_BYTES, max_bytes),
      ARG("merge_stderr", ARG_BOOL, merge_stderr) /* M-TOOLS-12 */,
      ARG_SPECIAL("stdin", ARG_STDIN_TEXT),
      ARG("memory_mb", ARG_LIMIT, memory_mb) /* L-LIM-3 */,
      ARG("max_processes", ARG_LIMIT, max_processes),
      ARG("cpu_percent", ARG_LIMIT, cpu_percent),

      ARG("head_lines", ARG_LINES, head_lines) /* M-TOOLS-16 */,
      ARG("tail_lines", ARG_LINES, tail_lines),
      ARG("match", ARG_STRING, match)}},
    {UVT_TOOL_TASK_OUTPUT,
     {ARG_SPECIAL("task_id", ARG_TASK_ID), ARG("wait", ARG_BOOL, wait),
      ARG("timeout_ms", ARG_TIMEOUT, timeout_ms),
      ARG("max_bytes", ARG_MAX_BYTES, max_bytes),
      ARG("head_lines", ARG_LINES, head_lines) /* M-TOOLS-16 */,
      ARG("tail_lines", ARG_LINES, tail_lines),
      ARG("match", ARG_STRING, match)}},
    {UVT_TOOL_TASK_LIST, {{NULL, ARG_END, 0}}},
    {UVT_TOOL_TASK_KILL,
     {ARG_SPECIAL("task_id", ARG_TASK_ID), ARG("reason", ARG_STRING, reason),
      ARG("signal", ARG_STRING, signal) /* M-TOOLS-14 */}},
    {UVT_TOOL_WRITE_STDIN,
     {ARG_SPECIAL("task_id", ARG_TASK_ID), ARG_SPECIAL("chars", ARG_CHARS),
      ARG("close_stdin", ARG_BOOL, close_stdin),
      ARG("yield_ms", ARG_MS, yield_ms),
      ARG("max_bytes", ARG_MAX_BYTES, max_bytes)}},
    {UVT_TOOL_TASK_WAIT,
     {ARG_SPECIAL("task_ids", ARG_TASK_IDS), ARG("mode", ARG_STRING, mode),
      ARG("timeout_ms", ARG_TIMEOUT, timeout_ms),
      ARG("max_bytes", ARG_MAX_BYTES, max_bytes)}},
    {UVT_TOOL_TASK_SCREEN, {ARG_SPECIAL("task_id", ARG_SCREEN_ID)}},
};

static const mcp_tool_t *tool_find(const char *name) {
  size_t i;

  for (i = 0; name != NULL && i < sizeof(mcp_tools) / sizeof(mcp_tools[0]); i++)
    if (strcmp(name, mcp_tools[i].name) == 0)
      return &mcp_tools[i];
  return NULL;
}

/* M-TOOLS-15: arguments hosts add to every call that no schema names;
 * they mean nothing here and are let through. */
static const char *const host_args[] = {"wait_for_previous"};

/* M-TOOLS-16: an argument the tool does not take is an error (a model that
 * asks for tail_lines and gets the whole output silently is misled),
 * unless a host adds it to every call.  0, or -1 after answering. */
static int unknown_args(mcp_server_t *server, json_t *id, json_t *args,
                        const mcp_tool_t *tool) {
  const char *key;
  json_t *v;
  const mcp_arg_t *g;
  size_t i;
  char buf[600];
  size_t n;
  int known;

  json_object_foreach(args, key, v) {
    (void)v;
    known = 0;
    for (g = tool->args; !known && g->type != ARG_END; g++)
      known = strcmp(g->key, key) == 0;
    for (i = 0; !known && i < sizeof(host_args) / sizeof(host_args[0]); i++)
      known = strcmp(host_args[i], key) == 0;
    if (known)
      continue;
    n = (size_t)snprintf(buf, sizeof(buf),
                         "%s does not take the argument \"%.100s\"; it takes ",
                         tool->name, key);
    if (tool->args[0].type == ARG_END)
      n += (size_t)snprintf(buf + n, sizeof(buf) - n, "none");
    for (g = tool->args; g->type != ARG_END && n < sizeof(buf); g++)
      n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s",
                            g == tool->args ? "" : ", ", g->key);
    if (n < sizeof(buf))
      snprintf(buf + n, sizeof(buf) - n, ".");
    tool_error_result(server, id, buf);
    return -1;
  }
  return 0;
}

/* Read the arguments of `tool` into `a` (`ids` holds task_wait's ids).
 * 0, or -1 after answering with a tool error. */
static int tool_args(mcp_server_t *server, json_t *id, json_t *args,
                     const mcp_tool_t *tool, uvt_tools_args_t *a,
                     const char **ids) {
  const char *name = tool->name;
  const mcp_arg_t *g;
  char *field;
  int err = 0;

  if (args != NULL && unknown_args(server, id, args, tool) != 0)
    return -1;

  for (g = tool->args; err == 0 && g->type != ARG_END; g++) {
    field = (char *)a + g->off;
    switch (g->type) {
    case ARG_STRING:
      err = arg_string(server, id, args, name, g->key, NULL,
                       (const char **)field, NULL);
      break;
    case ARG_BOOL:
      err = arg_bool(server, id, args, name, g->key, (int *)field);
      break;
    case ARG_MS:
      err = arg_whole(server, id, args, name, g->key, 0, "milliseconds",
                      (int64_t *)field);
      break;
    case ARG_TIMEOUT:
      err = arg_timeout(server, id, args, name, (int64_t *)field);
      break;
    case ARG_MAX_BYTES:
      err = arg_max_bytes(server, id, args, name, (int64_t *)field);
      break;
    case ARG_LINES:
      err = arg_whole(server, id, args, name, g->key, 1, "lines",
                      (int64_t *)field);
      break;
    case ARG_TASK_ID:
    case ARG_SCREEN_ID:
      err = arg_task_id(server, id, args, name, g->type == ARG_SCREEN_ID,
                        &a->task_id);
      break;
    case ARG_TASK_IDS:
      err = arg_task_ids(server, id, args, name, a, ids);
      break;
    case ARG_CHARS: /* M-TOOLS-5: U+0000 is written as a byte */
      err = arg_string(server, id, args, name, g->key,
                       "\"\" to only read output", &a->chars, &a->chars_len);
      break;
    case ARG_LIMIT: /* L-LIM-3: the tools check it against the host's */
      err = arg_whole(server, id, args, name, g->key, 1,
                      strcmp(g->key, "memory_mb") == 0     ? "MiB"
                      : strcmp(g->key, "cpu_percent") == 0 ? "percent of a core"
                                                           : "processes",
                      (int64_t *)field);
      break;
    case ARG_STDIN_TEXT: /* M-TOOLS-13 */
      err = arg_string(server, id, args, name, g->key,
                       "the bytes the command reads, then end of file",
                       &a->stdin_text, &a->stdin_text_len);
      break;
    }
  }
  return err;
}

void mcp_rpc_tools_call(mcp_server_t *server, json_t *id, json_t *params) {
  json_t *jname = json_object_get(params, "name");
  json_t *args = json_object_get(params, "arguments");
  json_t *v;
  const char *name;
  const mcp_tool_t *tool;
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
  /* E-8, E-12, E-14: submit_job and cluster_info, with --slurm. */
  if (server->slurm != NULL && mcp_slurm_call(server, name, id, args) == 0)
    return;
#endif
  tool = tool_find(name);
  if (tool == NULL || !uvt_tools_has(name)) {
    mcp_rpc_errorf(server, id, RPC_INVALID_PARAMS, "Unknown tool: %.200s",
                   name);
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

  uvt_tools_args_init(&a);
  if (tool_args(server, id, args, tool, &a, ids) != 0)
    goto out;
  /* M-TOOLS-6: a task's result is the command's end (tasks/result, 2026
   * tasks/get), so a task-augmented call never yields: the task itself is
   * the "goes on in the background" (a yield_ms given is checked, then has
   * no effect). */
  if (as_task)
    a.yield_ms = 0;
  if (mcp_tool_starts(tool->name)) {
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
  if (a.task_id != NULL && strlen(a.task_id) < sizeof(call->task_id))
    strcpy(call->task_id, a.task_id);
  v = json_object_get(json_object_get(params, "_meta"), "progressToken");
  if (json_is_string(v) || json_is_integer(v))
    call->progress = json_incref(v);
  err = uvt_tools_call(&server->tools, &call->req, &server->agent, name, &a,
                       call_cb);
  if (err != 0) {
    mcp_rpc_errorf(server, id, RPC_INTERNAL_ERROR, "Internal error: %s",
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
