/* Completion listeners and the dispatch of a terminal record (R-DONE-3..5).
 *
 * Listeners are called through a contained fan-out (uvt__fanout_*), so a
 * listener may stop itself or any other, or start one, mid-dispatch.
 * Nothing a listener can do applies another settlement synchronously, so
 * dispatches never nest. */
#include "uvt-internal.h"

int uvt_listener_start(uvt_registry_t *reg, uvt_listener_t *l, uvt_done_cb cb) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || l == NULL || cb == NULL)
    return UV_EINVAL;
  if (l->active_ == UVT__LISTENER_ACTIVE && l->registry != NULL)
    return UV_EBUSY; /* R-BUSY-1: its link is in a list of ours */
  if (reg->closing)
    return UVT_ECLOSING;
  l->registry = reg;
  l->cb_ = cb;
  l->active_ = UVT__LISTENER_ACTIVE;
  uvt__list_init(&l->link_);
  uvt__list_insert_tail(&reg->listeners, &l->link_);
  return 0;
}

void uvt_listener_stop(uvt_listener_t *l) {
  if (l == NULL || l->active_ != UVT__LISTENER_ACTIVE || l->registry == NULL)
    return;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY_VOID(l->registry);
  uvt__list_remove(&l->link_);
  l->active_ = UVT__LISTENER_STOPPED;
}

void uvt__dispatch(uvt_task_t *t) {
  uvt_registry_t *reg = t->reg;
  uvt_agent_t *owner = t->owner;
  struct uvt__link *n;
  uvt_snapshot_t view;

  uvt__task_pin(t);
  /* Silent once registry close began (R-CLOSE-1). */
  if (!reg->closing) {
    uvt__fanout_begin(&reg->listeners, &reg->dispatching);
    while (!reg->closing &&
           (n = uvt__fanout_next(&reg->listeners, &reg->dispatching)) != NULL) {
      uvt_listener_t *l = uvt__container_of(n, uvt_listener_t, link_);
      uvt__snapshot_view(t, &view);
      l->cb_(l, &view, owner);
    }
    uvt__fanout_end(&reg->listeners, &reg->dispatching);
  }
  uvt__waits_deliver_counted(t);
  t->dispatched = 1;
  uvt__teardown_after_terminal(t);
  uvt__task_unpin(t);
}

/* For records made terminal inside a host's call (a force-fail during
 * uvt_agent_dispose, say): dispatch from the loop, never inside the call. */
void uvt__dispatch_later(uvt_task_t *t) {
  uvt__task_pin(t);
  uvt__list_insert_tail(&t->reg->dispatch, &t->dispatch_link);
  uvt__kick(t->reg);
}

void uvt__dispatch_drain(uvt_registry_t *reg) {
  struct uvt__link local;
  struct uvt__link *n;
  uvt__list_init(&local);
  uvt__list_splice(&reg->dispatch, &local);
  while ((n = uvt__list_pop(&local)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, dispatch_link);
    uvt__dispatch(t);
    uvt__task_unpin(t);
  }
}
