/* The change feed (R-FEED-1): every transition of every task, in order,
 * delivered from the loop.  Each record carries one queue node per
 * transition, so feeding never allocates; a queued transition pins the
 * record until it is delivered. */
#include "uvt-internal.h"

int uvt_watch_start(uvt_registry_t *reg, uvt_watch_t *w, uvt_change_cb cb) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || w == NULL || cb == NULL)
    return UV_EINVAL;
  if (w->active_ == UVT__WATCH_ACTIVE && w->registry != NULL)
    return UV_EBUSY; /* R-BUSY-1 */
  if (reg->closing)
    return UVT_ECLOSING;
  w->registry = reg;
  w->cb_ = cb;
  w->active_ = UVT__WATCH_ACTIVE;
  uvt__list_init(&w->link_);
  uvt__list_insert_tail(&reg->watchers, &w->link_);
  return 0;
}

void uvt_watch_stop(uvt_watch_t *w) {
  if (w == NULL || w->active_ != UVT__WATCH_ACTIVE || w->registry == NULL)
    return;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY_VOID(w->registry);
  uvt__list_remove(&w->link_);
  w->active_ = UVT__WATCH_STOPPED;
}

void uvt__feed(uvt_task_t *t, int which) {
  uvt_registry_t *reg = t->reg;
  struct uvt__change *c = &t->changes[which];
  /* Nobody to tell, or silent since close began: skip the work. */
  if (reg->closing || uvt__list_empty(&reg->watchers))
    return;
  if (c->fed)
    return; /* each transition happens once */
  c->fed = 1;
  c->which = (unsigned char)which;
  c->status = (unsigned char)t->status;
  c->next = NULL;
  uvt__task_pin(t);
  *reg->changes_tail = c;
  reg->changes_tail = &c->next;
  uvt__kick(reg);
}

void uvt__feed_drain(uvt_registry_t *reg) {
  struct uvt__change *c = reg->changes;
  struct uvt__link *m;
  uvt_snapshot_t view;

  /* Take what is queued now; transitions fed by the callbacks below are
   * delivered in the next turn.  Every node taken pins its record, so the
   * chain stays valid while callbacks run. */
  reg->changes = NULL;
  reg->changes_tail = &reg->changes;
  while (c != NULL) {
    struct uvt__change *next = c->next;
    uvt_task_t *t = uvt__container_of(c - c->which, uvt_task_t, changes);
    /* Same containment as listeners (R-DONE-4). */
    uvt__fanout_begin(&reg->watchers, &reg->watch_dispatching);
    while (!reg->closing &&
           (m = uvt__fanout_next(&reg->watchers, &reg->watch_dispatching)) !=
               NULL) {
      uvt_watch_t *w = uvt__container_of(m, uvt_watch_t, link_);
      uvt__snapshot_view(t, &view);
      view.status = (uvt_status_t)c->status;
      w->cb_(w, &view, c->which == UVT__CHANGE_DROPPED);
    }
    uvt__fanout_end(&reg->watchers, &reg->watch_dispatching);
    uvt__task_unpin(t);
    c = next;
  }
}
