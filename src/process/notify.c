/* on_output (P-EVT-1): "task X has new output", coalesced per loop
 * iteration.
 *
 * Output arrives in libuv's poll phase (and from the drain timer, in the
 * timer phase); each task with an on_output callback that got bytes is put
 * on the registry context's list once, and one uv_check handle of the
 * context, which runs right after the poll phase of the same iteration,
 * calls each task's callback once.  The handle is unreferenced (the
 * tasks' pipes keep the loop alive) and stopped while the list is empty,
 * so an idle registry costs nothing.
 *
 * The callbacks run as a fan-out that survives them (R-DONE-4's rule): the
 * list is moved aside first and each task taken off it before its call, so
 * a callback may read, kill, forget or start tasks, or close the registry;
 * a task that ends or goes away in between is taken off the list (and so
 * not called).  A call is skipped for a task that settled (its terminal
 * transition is under way or done) and for one whose new output was
 * already read by the time the check runs. */
#include <string.h>

#include "process-internal.h"

static void on_check(uv_check_t *h) {
  uvt__procs_t *ps = h->data;
  struct uvt__link batch;
  struct uvt__link *n;
  char id[UVT_ID_MAX];

  uvt__list_init(&batch);
  uvt__list_splice(&ps->notifying, &batch);
  uv_check_stop(h);
  while ((n = uvt__list_pop(&batch)) != NULL) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, notify_link);
    uvt_output_cb cb = p->on_output;
    /* A record force-failed by a teardown is terminal before the task
     * settles: no call after that either. */
    if (p->settled || p->released || cb == NULL ||
        uvt_status_is_terminal(uvt_task_status(p->task)) ||
        (p->out.buf.len == 0 && p->out.buf.dropped == 0 &&
         p->err.buf.len == 0 && p->err.buf.dropped == 0))
      continue;
    /* The callback may end, forget or free other tasks (they leave the
     * batch as they go); nothing of p is touched after its call. */
    memcpy(id, p->id, sizeof(id));
    cb(id, p->on_output_data);
  }
}

void uvt__notify_output(uvt__proc_t *p) {
  uvt__procs_t *ps = p->procs;

  if (p->on_output == NULL || p->settled || ps == NULL || ps->closing ||
      !uvt__list_empty(&p->notify_link))
    return;
  if (!ps->notify_init) {
    if (uv_check_init(ps->loop, &ps->notify_check) != 0)
      return;
    ps->notify_check.data = ps;
    uv_unref((uv_handle_t *)&ps->notify_check);
    ps->notify_init = 1;
  }
  uvt__list_insert_tail(&ps->notifying, &p->notify_link);
  if (!uv_is_active((uv_handle_t *)&ps->notify_check))
    uv_check_start(&ps->notify_check, on_check);
}

void uvt__notify_cancel(uvt__proc_t *p) {
  uvt__list_remove(&p->notify_link);
}

unsigned uvt__notify_close(uvt__procs_t *ps, uv_close_cb on_closed) {
  struct uvt__link *n;

  while ((n = uvt__list_pop(&ps->notifying)) != NULL)
    ;
  if (!ps->notify_init)
    return 0;
  ps->notify_init = 0;
  uv_close((uv_handle_t *)&ps->notify_check, on_closed);
  return 1;
}
