/* task_screen (M-TOOLS-11): a terminal task's screen as it looks now,
 * rendered from its libvterm screen (screen.c) after a read has fed it
 * what the task printed since the last one, then its status line. */
#include "uvtasks/tools.h"

#include <stdint.h>
#include <string.h>

#include "tools-int.h"

void uvt__tool_task_screen(uvt_tools_call_t *req,
                           const uvt_tools_args_t *args) {
  uvt_tools_t *tools = req->tools;
  uvt__screen_t *s;
  uvt_read_t r;
  uvt__text_t t;
  uvt__text_t scratch;
  int err;

  if (uvt__tools_need_id(req, args, UVT_TOOL_TASK_SCREEN) != 0)
    return;
  uvt__text_init(&t);
  memset(&r, 0, sizeof(r));
  /* The read feeds the screen (output.c) and consumes what it shows; a
   * task without a screen is looked at (uvt_get), not read. */
  err =
      uvt__screen_find(tools, args->task_id) != NULL
          ? uvt_read(tools->registry, args->task_id, req->caller_, &r)
          : uvt_get(tools->registry, args->task_id, req->caller_, &r.snapshot);
  if (err != 0) {
    uvt__tools_task_error(&t, "read", args->task_id, err);
    uvt__tools_result(req, &t, 1);
    return;
  }
  s = uvt__screen_find(tools, args->task_id);
  if (s == NULL) {
    uvt_snapshot_cleanup(&r.snapshot);
    uvt__text_str(&t, "task_screen: ");
    uvt__text_oneline(&t, args->task_id, UVT_ID_MAX);
    uvt__text_str(&t, " does not run on a terminal (start it with "
                      "run_in_background and tty: true); task_output shows "
                      "its output.");
    uvt__tools_result(req, &t, 1);
    return;
  }
  uvt__text_init(&scratch);
  {
    uvt__shape_t sh = {SIZE_MAX, SIZE_MAX, -1, -1, NULL, req->caller_};
    uvt__tools_output(tools, args->task_id, &r, &sh, &scratch);
  }
  uvt__text_free(&scratch);
  /* The read may have been the task's last: the screen stays until its
   * record goes. */
  s = uvt__screen_find(tools, args->task_id);
  if (s != NULL)
    uvt__screen_render(s, &t);
  uvt__text_status(&t, &r.snapshot);
  uvt_read_cleanup(&r);
  uvt__tools_result(req, &t, 0);
}
