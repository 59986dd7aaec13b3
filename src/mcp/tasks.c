/* MCP Tasks (protocol revision 2025-11-25) in uvtasks-mcp: a
 * task-augmented tools/call of run_command becomes a registry task owned by
 * the session's agent; tasks/get, tasks/result, tasks/list and tasks/cancel
 * work on those tasks only; notifications/tasks/status come from the
 * registry's change feed (R-FEED-1); a task's ttl ends with uvt_forget
 * (R-FORGET-1). */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

#define RELATED_TASK_KEY "io.modelcontextprotocol/related-task"

static int64_t now_ms(void) {
  uv_timeval64_t tv;

  if (uv_gettimeofday(&tv) != 0)
    return 0;
  return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ---------------------------------------------------------------------- */
/* Records                                                                 */

int mcp_task_visible(const mcp_task_t *t, int era) {
  return t != NULL && !t->expired && t->era == era;
}

mcp_task_t *mcp_task_find(mcp_server_t *server, const char *id) {
  mcp_task_t *t;

  if (id == NULL)
    return NULL;
  for (t = server->tasks; t != NULL; t = t->next)
    if (!t->expired && strcmp(t->id, id) == 0)
      return t;
  return NULL;
}

static void task_unlink_free(mcp_server_t *server, mcp_task_t *t) {
  if (t->prev != NULL)
    t->prev->next = t->next;
  else
    server->tasks = t->next;
  if (t->next != NULL)
    t->next->prev = t->prev;
  else
    server->tasks_tail = t->prev;
  free(t->detail);
  json_decref(t->result);
  json_decref(t->error);
  json_decref(t->waiters);
  free(t);
}

/* Take the status and detail of `s`; a change moves lastUpdatedAt. */
static void task_apply(mcp_task_t *t, const uvt_snapshot_t *s) {
  const char *d = s->detail != NULL ? s->detail : "";
  char *copy;

  if (t->status == s->status &&
      strcmp(t->detail != NULL ? t->detail : "", d) == 0)
    return;
  t->status = s->status;
  copy = d[0] != '\0' ? strdup(d) : NULL;
  free(t->detail);
  t->detail = copy;
  t->updated_ms = uvt_status_is_terminal(s->status) && s->finished_at_ms > 0
                      ? s->finished_at_ms
                      : now_ms();
}

/* Bring `t` up to date with its registry record, if it still has one. */
static void task_refresh(mcp_server_t *server, mcp_task_t *t) {
  uvt_snapshot_t s;

  if (server->reg == NULL)
    return;
  memset(&s, 0, sizeof(s));
  if (uvt_get(server->reg, t->id, &server->agent, &s) != 0)
    return;
  task_apply(t, &s);
  uvt_snapshot_cleanup(&s);
}

static const char *task_status(const mcp_task_t *t) {
  return mcp_task_status(t->status, t->cancelled);
}

/* The Task object of `t`. */
static json_t *task_json(const mcp_task_t *t) {
  char created[MCP_ISO8601_MAX];
  char updated[MCP_ISO8601_MAX];
  json_t *j;

  mcp_iso8601(t->created_ms, created, sizeof(created));
  mcp_iso8601(t->updated_ms, updated, sizeof(updated));
  j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:i}", "taskId", t->id, "status",
                task_status(t), "ttl", (json_int_t)t->ttl_ms, "createdAt",
                created, "lastUpdatedAt", updated, "pollInterval",
                MCP_TASK_POLL_MS);
  if (j != NULL && t->detail != NULL)
    json_object_set_new(j, "statusMessage",
                        mcp_rpc_string(t->detail, strlen(t->detail)));
  return j;
}

/* ---------------------------------------------------------------------- */
/* ttl                                                                     */

static void ttl_cb(uv_timer_t *timer);

/* Arm the timer for the next task whose ttl runs out. */
static void ttl_arm(mcp_server_t *server) {
  mcp_task_t *t;
  uint64_t next = UINT64_MAX;
  uint64_t now;

  if (!server->ttl_timer_open || server->shutting_down)
    return;
  for (t = server->tasks; t != NULL; t = t->next)
    if (!t->expired && t->expires_at < next)
      next = t->expires_at;
  if (next == UINT64_MAX) {
    uv_timer_stop(&server->ttl_timer);
    return;
  }
  now = uv_now(server->loop);
  uv_timer_start(&server->ttl_timer, ttl_cb, next > now ? next - now : 0, 0);
}

/* Answer every waiting tasks/result of `t` with an error. */
static void task_fail_waiters(mcp_server_t *server, mcp_task_t *t, int code,
                              const char *message) {
  size_t i;

  for (i = 0; i < json_array_size(t->waiters); i++)
    mcp_rpc_error(server, json_array_get(t->waiters, i), code, message);
  json_array_clear(t->waiters);
}

/* The ttl of `t` ran out: from now on it is unknown.  Work still running is
 * stopped (nobody could fetch its result); the record is forgotten once it
 * has ended. */
static void task_expire(mcp_server_t *server, mcp_task_t *t) {
  t->expired = 1;
  task_fail_waiters(server, t, RPC_INVALID_PARAMS,
                    "Failed to retrieve task: Task has expired");
  if (t->call != NULL) {
    if (server->reg != NULL)
      uvt_kill(server->reg, t->id, &server->agent, "task ttl expired", NULL);
    return; /* mcp_task_call_done() finishes the job */
  }
  if (server->reg != NULL)
    uvt_forget(server->reg, t->id, &server->agent);
  task_unlink_free(server, t);
}

static void ttl_cb(uv_timer_t *timer) {
  mcp_server_t *server = timer->data;
  mcp_task_t *t;
  mcp_task_t *next;
  uint64_t now = uv_now(server->loop);

  for (t = server->tasks; t != NULL; t = next) {
    next = t->next;
    if (!t->expired && t->expires_at <= now)
      task_expire(server, t);
  }
  ttl_arm(server);
}

/* ---------------------------------------------------------------------- */
/* Status notifications from the change feed                               */

static void feed_cb(uvt_watch_t *w, const uvt_snapshot_t *snap, int dropped) {
  mcp_server_t *server = w->data;
  mcp_task_t *t;
  json_t *params;
  json_t *msg;

  /* Only this session's MCP tasks, and only transitions after the
   * registration (whose state the CreateTaskResult carried). */
  if (dropped || snap->status == UVT_RUNNING || server->shutting_down ||
      snap->owner_session == NULL ||
      strcmp(snap->owner_session, server->session) != 0)
    return;
  t = mcp_task_find(server, snap->id);
  if (t == NULL || t->era != MCP_ERA_2025)
    return;
  task_apply(t, snap);
  /* M-MCP-8: one notification per status transition.  A cancelled task
   * reads "cancelled" while stopping and once ended: the second is no
   * transition. */
  if (strcmp(t->notified, task_status(t)) == 0)
    return;
  snprintf(t->notified, sizeof(t->notified), "%s", task_status(t));
  params = task_json(t);
  msg = json_object();
  if (params == NULL || msg == NULL) {
    json_decref(params);
    json_decref(msg);
    return;
  }
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set_new(msg, "method", json_string("notifications/tasks/status"));
  json_object_set_new(msg, "params", params);
  mcp_rpc_send(server, msg);
}

/* ---------------------------------------------------------------------- */
/* Life cycle                                                              */

int mcp_tasks_init(mcp_server_t *server) {
  int err;

  err = uv_timer_init(server->loop, &server->ttl_timer);
  if (err != 0)
    return err;
  server->ttl_timer.data = server;
  server->ttl_timer_open = 1;
  server->watch.data = server;
  err = uvt_watch_start(server->reg, &server->watch, feed_cb);
  if (err != 0)
    return err;
  server->watching = 1;
  return 0;
}

void mcp_tasks_stop(mcp_server_t *server) {
  if (server->watching) {
    uvt_watch_stop(&server->watch);
    server->watching = 0;
  }
  if (server->ttl_timer_open) {
    uv_close((uv_handle_t *)&server->ttl_timer, NULL);
    server->ttl_timer_open = 0;
  }
}

void mcp_tasks_free(mcp_server_t *server) {
  while (server->tasks != NULL)
    task_unlink_free(server, server->tasks);
}

int mcp_task_create(mcp_server_t *server, mcp_call_t *call, json_t *id,
                    double ttl_ms, int ttl_given) {
  const char *tid = uvt_tools_call_task(&call->req);
  mcp_task_t *t;
  json_t *task;
  json_t *result;
  uvt_snapshot_t s;

  t = calloc(1, sizeof(*t));
  if (t == NULL)
    return UV_ENOMEM;
  t->waiters = json_array();
  if (t->waiters == NULL) {
    free(t);
    return UV_ENOMEM;
  }
  snprintf(t->id, sizeof(t->id), "%s", tid);
  t->seq = ++server->task_seq;
  t->status = UVT_RUNNING;
  t->created_ms = now_ms();
  memset(&s, 0, sizeof(s));
  if (uvt_get(server->reg, t->id, &server->agent, &s) == 0) {
    t->created_ms = s.started_at_ms;
    task_apply(t, &s);
    uvt_snapshot_cleanup(&s);
  }
  t->updated_ms = t->created_ms;
  t->ttl_ms = mcp_task_ttl(ttl_given, ttl_ms, server->config.max_task_ttl_ms);
  snprintf(t->notified, sizeof(t->notified), "%s", task_status(t));
  t->expires_at = uv_now(server->loop) + t->ttl_ms;
  t->call = call;

  task = task_json(t);
  result = json_object();
  if (task == NULL || result == NULL) {
    json_decref(task);
    json_decref(result);
    json_decref(t->waiters);
    free(t->detail);
    free(t);
    return UV_ENOMEM;
  }
  json_object_set_new(result, "task", task);
  t->prev = server->tasks_tail;
  if (server->tasks_tail != NULL)
    server->tasks_tail->next = t;
  else
    server->tasks = t;
  server->tasks_tail = t;
  call->task = t;
  if (id != NULL)
    mcp_rpc_result(server, id, result);
  else
    json_decref(result); /* the 2026 caller answers in its own shape */
  ttl_arm(server);
  return 0;
}

void mcp_task_call_done(mcp_task_t *t, int status) {
  mcp_call_t *call = t->call;
  mcp_server_t *server = call->server;
  uvt_tools_call_t *req = &call->req;
  json_t *meta;
  char buf[200];
  size_t i;

  t->call = NULL;
  if (status == UVT_ECLOSING || status == UVT_EABORTED ||
      server->shutting_down) {
    /* Shutdown: the waiting tasks/result requests still get an answer
     * while the client can read it (M-MCP-6). */
    task_fail_waiters(server, t, RPC_INTERNAL_ERROR,
                      "Internal error: the server is shutting down; every "
                      "task is being stopped");
    return;
  }
  task_refresh(server, t);
  if (status != 0) {
    snprintf(buf, sizeof(buf), "Internal error: %s", uvt_strerror(status));
    t->error =
        json_pack("{s:i, s:s}", "code", RPC_INTERNAL_ERROR, "message", buf);
  } else {
    /* What the call itself would have answered, without the notices meant
     * for the next plain tool result, and naming its task (the spec asks
     * tasks/result to carry the related-task _meta). */
    t->result =
        mcp_rpc_tool_result(server, req->text, req->len, req->is_error, 0);
    meta = json_pack("{s:{s:s}}", RELATED_TASK_KEY, "taskId", t->id);
    if (t->result != NULL && meta != NULL)
      json_object_set_new(t->result, "_meta", meta);
    else
      json_decref(meta);
    if (t->result == NULL)
      t->error = json_pack("{s:i, s:s}", "code", RPC_INTERNAL_ERROR, "message",
                           "Internal error: out of memory");
  }
  if (t->expired) {
    uvt_forget(server->reg, t->id, &server->agent);
    task_unlink_free(server, t);
    return;
  }
  for (i = 0; i < json_array_size(t->waiters); i++) {
    if (t->result != NULL)
      mcp_rpc_result(server, json_array_get(t->waiters, i),
                     json_incref(t->result));
    else if (t->error != NULL)
      mcp_rpc_error(server, json_array_get(t->waiters, i),
                    (int)json_integer_value(json_object_get(t->error, "code")),
                    json_string_value(json_object_get(t->error, "message")));
  }
  json_array_clear(t->waiters);
}

int mcp_tasks_cancel_request(mcp_server_t *server, json_t *request_id) {
  mcp_task_t *t;
  size_t i;

  for (t = server->tasks; t != NULL; t = t->next) {
    for (i = 0; i < json_array_size(t->waiters); i++) {
      if (json_equal(json_array_get(t->waiters, i), request_id)) {
        json_array_remove(t->waiters, i);
        return 1;
      }
    }
  }
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Capabilities and tools/list                                             */

json_t *mcp_tasks_capability(void) {
  return json_pack("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel", "requests",
                   "tools", "call");
}

void mcp_tasks_tools_list(mcp_server_t *server, json_t *tools) {
  const char *support;
  json_t *tool;
  size_t i;

  (void)server;
  json_array_foreach(tools, i, tool) {
    support =
        mcp_tool_task_support(json_string_value(json_object_get(tool, "name")));
    if (support != NULL)
      json_object_set_new(tool, "execution",
                          json_pack("{s:s}", "taskSupport", support));
  }
}

/* ---------------------------------------------------------------------- */
/* tasks/get, tasks/result, tasks/list, tasks/cancel                       */

/* The task params.taskId names, or NULL after answering -32602. */
static mcp_task_t *task_param(mcp_server_t *server, json_t *id,
                              json_t *params) {
  json_t *jid = json_object_get(params, "taskId");
  mcp_task_t *t;

  if (!json_is_string(jid)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: taskId must be a string");
    return NULL;
  }
  /* Only MCP tasks of this session: a background task's id (bash-1 from
   * run_in_background) is as unknown here as a made-up one. */
  t = mcp_task_find(server, json_string_value(jid));
  if (t != NULL && !mcp_task_visible(t, server->era))
    t = NULL;
  if (t == NULL)
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Failed to retrieve task: Task not found");
  return t;
}

static void answer_task(mcp_server_t *server, json_t *id, mcp_task_t *t) {
  json_t *j = task_json(t);

  if (j == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  mcp_rpc_result(server, id, j);
}

static void tasks_get(mcp_server_t *server, json_t *id, json_t *params) {
  mcp_task_t *t = task_param(server, id, params);

  if (t == NULL)
    return;
  task_refresh(server, t);
  answer_task(server, id, t);
}

static void tasks_result(mcp_server_t *server, json_t *id, json_t *params) {
  mcp_task_t *t = task_param(server, id, params);

  if (t == NULL)
    return;
  if (t->result != NULL) {
    mcp_rpc_result(server, id, json_incref(t->result));
  } else if (t->error != NULL) {
    mcp_rpc_error(server, id,
                  (int)json_integer_value(json_object_get(t->error, "code")),
                  json_string_value(json_object_get(t->error, "message")));
  } else if (t->call == NULL || json_array_append(t->waiters, id) != 0) {
    /* No call left to end it (or no memory to wait): say so rather than
     * hang. */
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: the task's result is not available");
  }
  /* Otherwise answered when the call ends: no deadline but the command's
   * own (run_command's timeout_ms), and other requests go on meanwhile. */
}

static void tasks_list(mcp_server_t *server, json_t *id, json_t *params) {
  json_t *jcursor = json_object_get(params, "cursor");
  json_t *result;
  json_t *list;
  json_t *j;
  mcp_task_t *t;
  uint64_t after = 0;
  uint64_t last = 0;
  size_t n = 0;
  char cursor[MCP_CURSOR_MAX];

  if (jcursor != NULL && !json_is_null(jcursor) &&
      (!json_is_string(jcursor) ||
       mcp_cursor_parse(json_string_value(jcursor), &after) != 0)) {
    mcp_rpc_error(server, id, RPC_INVALID_PARAMS,
                  "Invalid params: invalid cursor");
    return;
  }
  result = json_object();
  list = json_array();
  if (result == NULL || list == NULL)
    goto nomem;
  for (t = server->tasks; t != NULL; t = t->next) {
    if (t->expired || t->seq <= after || t->era != MCP_ERA_2025)
      continue;
    if (n == server->config.tasks_page_size) {
      /* More follow: the cursor names the last one shown. */
      mcp_cursor_make(last, cursor);
      json_object_set_new(result, "nextCursor", json_string(cursor));
      break;
    }
    task_refresh(server, t);
    j = task_json(t);
    if (j == NULL || json_array_append_new(list, j) != 0)
      goto nomem;
    last = t->seq;
    n++;
  }
  json_object_set_new(result, "tasks", list);
  mcp_rpc_result(server, id, result);
  return;

nomem:
  json_decref(result);
  json_decref(list);
  mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                "Internal error: out of memory");
}

static void tasks_cancel(mcp_server_t *server, json_t *id, json_t *params) {
  mcp_task_t *t = task_param(server, id, params);
  uvt_kill_result_t res = UVT_KILL_REQUESTED;
  char buf[160];
  int err;

  if (t == NULL)
    return;
  task_refresh(server, t);
  if (!mcp_task_status_terminal(task_status(t))) {
    err = uvt_kill(server->reg, t->id, &server->agent,
                   "cancelled by tasks/cancel", &res);
    if (err != 0) {
      snprintf(buf, sizeof(buf), "Internal error: %s", uvt_strerror(err));
      mcp_rpc_error(server, id, RPC_INTERNAL_ERROR, buf);
      return;
    }
    if (res == UVT_KILL_REQUESTED) {
      /* The spec: cancelled before the answer, and for good. */
      t->cancelled = 1;
      t->updated_ms = now_ms();
      task_refresh(server, t);
      answer_task(server, id, t);
      return;
    }
    task_refresh(server, t);
  }
  snprintf(buf, sizeof(buf),
           "Cannot cancel task: already in terminal status '%s'",
           task_status(t));
  mcp_rpc_error(server, id, RPC_INVALID_PARAMS, buf);
}

void mcp_tasks_request(mcp_server_t *server, const char *method, json_t *id,
                       json_t *params) {
  char buf[300];

  /* Without the revision that has Tasks these methods do not exist. */
  if (server->tasks_enabled) {
    if (strcmp(method, "tasks/get") == 0) {
      tasks_get(server, id, params);
      return;
    }
    if (strcmp(method, "tasks/result") == 0) {
      tasks_result(server, id, params);
      return;
    }
    if (strcmp(method, "tasks/list") == 0) {
      tasks_list(server, id, params);
      return;
    }
    if (strcmp(method, "tasks/cancel") == 0) {
      tasks_cancel(server, id, params);
      return;
    }
  }
  snprintf(buf, sizeof(buf), "Method not found: %.200s", method);
  mcp_rpc_error(server, id, RPC_METHOD_NOT_FOUND, buf);
}

/* ---------------------------------------------------------------------- */
/* The 2026 era: the io.modelcontextprotocol/tasks extension (M-MCP-9)      */

/* A 2026 task's status: working until the call has ended (so "completed"
 * always comes with its result); "cancelled" once tasks/cancel (or the ttl)
 * stopped it; "completed" when the call gave a tool result (a command that
 * failed or was killed by its timeout_ms is a completed task whose result
 * has isError: true, as SEP-2663 keeps "failed" for protocol errors);
 * "failed" when the call ended without one. */
static const char *task_status_2026(const mcp_task_t *t) {
  if (t->cancelled)
    return "cancelled";
  if (t->call != NULL)
    return "working";
  if (t->result != NULL)
    return "completed";
  return "failed";
}

/* The Task fields of the 2026 wire (ttlMs, pollIntervalMs). */
static json_t *task_json_2026(const mcp_task_t *t) {
  char created[MCP_ISO8601_MAX];
  char updated[MCP_ISO8601_MAX];
  json_t *j;

  mcp_iso8601(t->created_ms, created, sizeof(created));
  mcp_iso8601(t->updated_ms, updated, sizeof(updated));
  j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:i}", "taskId", t->id, "status",
                task_status_2026(t), "ttlMs", (json_int_t)t->ttl_ms,
                "createdAt", created, "lastUpdatedAt", updated,
                "pollIntervalMs", MCP_TASK_POLL_MS);
  if (j != NULL && t->detail != NULL)
    json_object_set_new(j, "statusMessage",
                        mcp_rpc_string(t->detail, strlen(t->detail)));
  return j;
}

int mcp_task_create_2026(mcp_server_t *server, mcp_call_t *call, json_t *id) {
  mcp_task_t *t;
  json_t *result;
  int err;

  /* The same record as a 2025 task, with the longest ttl granted (a 2026
   * client does not ask for one). */
  err = mcp_task_create(server, call, NULL, 0, 0);
  if (err != 0)
    return err;
  t = call->task;
  t->era = MCP_ERA_2026;
  result = task_json_2026(t);
  if (result == NULL) {
    /* The record stays until its call ends; nobody can see it. */
    t->expired = 1;
    return UV_ENOMEM;
  }
  json_object_set_new(result, "resultType", json_string("task"));
  mcp_rpc_result(server, id, result);
  return 0;
}

static void tasks_get_2026(mcp_server_t *server, json_t *id, json_t *params) {
  mcp_task_t *t = task_param(server, id, params);
  const char *status;
  json_t *j;

  if (t == NULL)
    return;
  task_refresh(server, t);
  j = task_json_2026(t);
  if (j == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  /* The result travels with the task once it has ended, without the
   * 2025 related-task _meta (the taskId is beside it). */
  status = task_status_2026(t);
  if (t->result != NULL && strcmp(status, "working") != 0) {
    json_t *r = json_deep_copy(t->result);
    if (r != NULL) {
      json_object_del(r, "_meta");
      json_object_set_new(r, "resultType", json_string("complete"));
      json_object_set_new(j, "result", r);
    }
  } else if (t->error != NULL && strcmp(status, "failed") == 0) {
    json_object_set(j, "error", t->error);
  }
  mcp_rpc_result(server, id, j);
}

static void tasks_cancel_2026(mcp_server_t *server, json_t *id,
                              json_t *params) {
  mcp_task_t *t = task_param(server, id, params);
  uvt_kill_result_t res = UVT_KILL_REQUESTED;

  if (t == NULL)
    return;
  /* Acknowledged whatever the state: a task that has ended stays as it
   * ended; one still running is stopped and reads "cancelled". */
  if (t->call != NULL && !t->cancelled && server->reg != NULL &&
      uvt_kill(server->reg, t->id, &server->agent, "cancelled by tasks/cancel",
               &res) == 0 &&
      res == UVT_KILL_REQUESTED) {
    t->cancelled = 1;
    t->updated_ms = now_ms();
  }
  mcp_rpc_result(server, id, json_object());
}

void mcp_tasks_request_2026(mcp_server_t *server, const char *method,
                            json_t *id, json_t *params) {
  if (strcmp(method, "tasks/get") == 0) {
    tasks_get_2026(server, id, params);
  } else if (strcmp(method, "tasks/cancel") == 0) {
    tasks_cancel_2026(server, id, params);
  } else {
    /* tasks/update: our tasks never wait for input, so there is nothing
     * to deliver; a known task is acknowledged. */
    if (task_param(server, id, params) != NULL)
      mcp_rpc_result(server, id, json_object());
  }
}
