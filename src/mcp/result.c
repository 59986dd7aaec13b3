/* The CallToolResult (M-MCP-2, M-TOOLS-18): a tool's text as one text
 * block, after the pending completion notices (notice.c), which it then
 * spends; a notice about a task whose end the text itself shows is left
 * out. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does the status line that ends `text` (n bytes) or starts at `at` show
 * an ended task? */
static int status_ended(const char *at, const char *end) {
  static const char *const ended[] = {"[status: completed", "[status: killed",
                                      "[status: failed"};
  size_t i;
  size_t k;

  for (i = 0; i < sizeof(ended) / sizeof(ended[0]); i++) {
    k = strlen(ended[i]);
    if ((size_t)(end - at) >= k && memcmp(at, ended[i], k) == 0)
      return 1;
  }
  return 0;
}

/* M-TOOLS-18: does the result `text` (of the call server->result_call)
 * show the end of the task notice `n` is about ("Task ID (...")?  Then the
 * notice says nothing the result does not. */
static int notice_shown(mcp_server_t *server, const mcp_notice_t *n,
                        const char *text, size_t len) {
  const mcp_call_t *call = server->result_call;
  const char *end = text + len;
  const char *id;
  const char *p;
  const char *st;
  char head[UVT_ID_MAX + 16];
  size_t k;

  if (call == NULL || strncmp(n->text, "Task ", 5) != 0)
    return 0;
  id = n->text + 5;
  k = strcspn(id, " ");
  if (k == 0 || k >= UVT_ID_MAX)
    return 0;
  /* task_output, write_stdin, run_command: one task, its status line
   * last. */
  if ((strlen(call->task_id) == k && memcmp(call->task_id, id, k) == 0) ||
      (uvt_tools_call_task(&call->req) != NULL &&
       strlen(uvt_tools_call_task(&call->req)) == k &&
       memcmp(uvt_tools_call_task(&call->req), id, k) == 0)) {
    for (st = end; st > text && st[-1] != '\n'; st--)
      ;
    return status_ended(st, end);
  }
  /* task_wait: a section "--- ID ---" per task, its status line last. */
  snprintf(head, sizeof(head), "--- %.*s ---\n", (int)k, id);
  for (p = text; p != NULL && p < end;) {
    p = strstr(p, head);
    if (p == NULL || (p > text && p[-1] != '\n'))
      return 0;
    p += strlen(head);
    st = strstr(p, "\n--- ");
    if (st == NULL)
      st = end;
    /* The section's last line. */
    {
      const char *ln = st;
      while (ln > p && ln[-1] != '\n')
        ln--;
      return status_ended(ln, st);
    }
  }
  return 0;
}

/* The CallToolResult: one text block, notices first if asked. */
json_t *mcp_rpc_tool_result(mcp_server_t *server, const char *text, size_t len,
                            int is_error, int notices) {
  size_t shown = 0;
  mcp_notice_t *n;
  char *all = NULL;
  size_t all_len = 0;
  FILE *f;
  int bad;
  json_t *result;
  json_t *content;
  json_t *block;
  json_t *str;

  f = open_memstream(&all, &all_len);
  if (f == NULL)
    return NULL;
  for (n = notices ? server->notices : NULL; n != NULL; n = n->next) {
    if (notice_shown(server, n, text, len))
      continue;
    fprintf(f, "[notice] %s\n", n->text);
    shown++;
  }
  if (shown > 0)
    fputc('\n', f);
  if (len > 0)
    fwrite(text, 1, len, f);
  bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(all);
    return NULL;
  }
  str = mcp_rpc_string(all, all_len);
  free(all);
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
