/* M-MCP-5: a non-consuming look at a pending tool call, so a host can
 * report progress while run_command runs or task_output waits. */
#include "uvtasks/tools.h"

#include <string.h>

#include "tools-int.h"

/* The call states of tools.c: only a call inside its wait has a task. */
#define PROGRESS_CALL_WAITING 1

int uvt_tools_call_progress(const uvt_tools_call_t *req, char *line,
                            size_t size) {
  char raw[1024];
  uvt__text_t plain;
  uvt__text_t t;
  int err;

  if (line != NULL && size > 0)
    line[0] = '\0';
  if (req == NULL || line == NULL || size == 0 || req->tools == NULL ||
      req->state_ != PROGRESS_CALL_WAITING || req->task_id_[0] == '\0')
    return UV_EINVAL;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY(req->tools->registry);
  err = uvt_process_last_line(req->tools->registry, req->task_id_, req->caller_,
                              raw, sizeof(raw));
  if (err != 0)
    return UV_EINVAL;
  /* The line as a terminal shows it (M-TOOLS-7, as results do): no
   * escape sequences, redraws by backspace or erase-in-line applied.  Out
   * of memory it shows nothing. */
  uvt__text_init(&plain);
  uvt__term_plain(raw, strlen(raw), &plain);
  /* One line of valid UTF-8, cut to fit with its NUL. */
  uvt__text_init(&t);
  if (plain.err == 0 && plain.base != NULL)
    uvt__text_oneline(&t, plain.base, size > 4 ? size - 4 : 1);
  if (t.err == 0 && t.base != NULL && t.len < size)
    memcpy(line, t.base, t.len + 1);
  uvt__text_free(&t);
  uvt__text_free(&plain);
  return 0;
}
