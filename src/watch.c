/* The change feed (R-FEED-1): every transition of every task, in order,
 * delivered from the loop.  Each record carries one queue node per
 * transition, so feeding never allocates; a queued transition pins the
 * record until it is delivered. */
#include "uvt-internal.h"

int uvt_watch_start(uvt_registry_t *reg, uvt_watch_t *w, uvt_change_cb cb) {
  if (reg == NULL || w == NULL || cb == NULL)
    return UV_EINVAL;
  if (reg->closing)
    return UVT_ECLOSING;
  w->registry = reg;
  w->cb_ = cb;
  w->active_ = 1;
  uvt__list_init(&w->link_);
  uvt__list_insert_tail(&reg->watchers, &w->link_);
  return 0;
}

void uvt_watch_stop(uvt_watch_t *w) {
  if (w == NULL || w->active_ != 1)
    return;
  uvt__list_remove(&w->link_);
  w->active_ = 0;
}

void uvt__feed(uvt_task_t *t, int which) {
  uvt_registry_t *reg = t->reg;
  struct uvt__change *c = &t->changes[which];
  /* Nobody to tell, or silent since close began: skip the work. */
  if (reg->closing || uvt__list_empty(&reg->watchers))
    return;
  if (c->task != NULL)
    return; /* each transition happens once */
  c->task = t;
  c->which = which;
  c->status = t->status;
  uvt__task_pin(t);
  uvt__list_insert_tail(&reg->changes, &c->link);
  uvt__kick(reg);
}

void uvt__feed_drain(uvt_registry_t *reg) {
  struct uvt__link local;
  struct uvt__link *n, *m;
  uvt_snapshot_t view;

  uvt__list_init(&local);
  uvt__list_splice(&reg->changes, &local);
  while ((n = uvt__list_pop(&local)) != NULL) {
    struct uvt__change *c = uvt__container_of(n, struct uvt__change, link);
    uvt_task_t *t = c->task;
    /* Same containment as listeners (R-DONE-4). */
    uvt__list_splice(&reg->watchers, &reg->watch_dispatching);
    while (!reg->closing &&
           (m = uvt__list_pop(&reg->watch_dispatching)) != NULL) {
      uvt_watch_t *w = uvt__container_of(m, uvt_watch_t, link_);
      uvt__list_insert_tail(&reg->watchers, m);
      uvt__snapshot_view(t, &view);
      view.status = c->status;
      w->cb_(w, &view, c->which == UVT__CHANGE_DROPPED);
    }
    uvt__list_splice(&reg->watch_dispatching, &reg->watchers);
    uvt__task_unpin(t);
  }
}
