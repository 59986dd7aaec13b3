/* M-MCP-5: notifications/progress for a tools/call that carries
 * _meta.progressToken, at least every MCP_PROGRESS_INTERVAL_MS (well under
 * the 5 s the clause allows) while the call is pending, so a client with
 * resetTimeoutOnProgress keeps it alive.  progress is the seconds elapsed
 * since the request (it only grows), message the last line of output the
 * command printed (uvt_tools_call_progress: nothing is consumed).  The
 * same in both protocol eras. */
#include "mcp.h"

#include <string.h>

/* The timer ticks this often; each call is reported once its last report
 * is MCP_PROGRESS_INTERVAL_MS old. */
#define PROGRESS_TICK_MS 1000

/* The longest progress message, in bytes. */
#define PROGRESS_LINE_MAX 240

static void progress_send(mcp_server_t *server, mcp_call_t *call,
                          uint64_t now) {
  char line[PROGRESS_LINE_MAX];
  json_t *params;
  json_t *msg;

  call->progress_ms = now;
  params = json_pack("{s:O, s:f}", "progressToken", call->progress, "progress",
                     (double)(now - call->started_ms) / 1000.0);
  msg = json_object();
  if (params == NULL || msg == NULL) {
    json_decref(params);
    json_decref(msg);
    return;
  }
  if (uvt_tools_call_progress(&call->req, line, sizeof(line)) == 0 &&
      line[0] != '\0')
    json_object_set_new(params, "message", mcp_rpc_string(line, strlen(line)));
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set_new(msg, "method", json_string("notifications/progress"));
  json_object_set_new(msg, "params", params);
  mcp_rpc_send(server, msg);
}

static void progress_cb(uv_timer_t *timer) {
  mcp_server_t *server = timer->data;
  mcp_call_t *call;
  uint64_t now = uv_now(server->loop);

  if (server->shutting_down)
    return;
  for (call = server->calls; call != NULL; call = call->next)
    if (call->progress != NULL && !call->cancelled &&
        now - call->progress_ms >= MCP_PROGRESS_INTERVAL_MS)
      progress_send(server, call, now);
}

int mcp_progress_init(mcp_server_t *server) {
  int err = uv_timer_init(server->loop, &server->progress_timer);

  if (err != 0)
    return err;
  server->progress_timer.data = server;
  server->progress_timer_open = 1;
  return 0;
}

void mcp_progress_update(mcp_server_t *server) {
  mcp_call_t *call;

  if (!server->progress_timer_open)
    return;
  for (call = server->calls; call != NULL; call = call->next)
    if (call->progress != NULL && !call->cancelled)
      break;
  if (call == NULL || server->shutting_down) {
    uv_timer_stop(&server->progress_timer);
    return;
  }
  if (uv_is_active((uv_handle_t *)&server->progress_timer))
    return;
  uv_update_time(server->loop); /* R-TIME-1 */
  uv_timer_start(&server->progress_timer, progress_cb, PROGRESS_TICK_MS,
                 PROGRESS_TICK_MS);
}

void mcp_progress_stop(mcp_server_t *server) {
  if (server->progress_timer_open) {
    uv_close((uv_handle_t *)&server->progress_timer, NULL);
    server->progress_timer_open = 0;
  }
}
