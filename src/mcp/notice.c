/* Completion notices (M-MCP-2): the tools' notice callback keeps each
 * notice for the next tool result (result.c shows and spends them) and
 * sends it at once as a notifications/message to a client that asked for
 * notices (M-MCP-9: a 2026 client only while one of its requests names
 * such a logLevel). */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

static int rpc_log_wanted(const mcp_server_t *server) {
  const mcp_call_t *call;

  if (server->version != NULL && server->log_level <= MCP_LOG_LEVEL_NOTICE)
    return 1;
  for (call = server->calls; call != NULL; call = call->next)
    if (call->era == MCP_ERA_2026 && call->log_level >= 0 &&
        call->log_level <= MCP_LOG_LEVEL_NOTICE && !call->cancelled)
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
