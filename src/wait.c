/* Waits (R-WAIT-1..7).  A pending wait sits on its task's list with a
 * deadline in the registry's heap.  Settlement "counts" the pending waits
 * (they will get status 0, and the task is marked reported before any
 * listener runs); a deadline or an abort unlinks the wait at once, so
 * expired waits retain nothing (R-WAIT-6).  Results that are not produced
 * by settlement or a deadline are delivered from the registry's async
 * callback, never inside uvt_wait() or uvt_wait_abort(). */
#include "uvt-internal.h"

int uvt_wait(uvt_registry_t *reg, uvt_wait_t *req, const char *id,
             uint64_t timeout_ms, const uvt_agent_t *caller, uvt_wait_cb cb) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  int err;

  if (reg == NULL || req == NULL || id == NULL || cb == NULL)
    return UV_EINVAL;
  /* R-BUSY-1: a pending request is linked into our lists and the deadline
   * heap; resetting it would corrupt both (C-23: the loop then spun). */
  if (uvt__wait_in_use(req))
    return UV_EBUSY;
  /* R-WAIT-1: unknown or foreign id first, then the timeout. */
  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  if (timeout_ms == 0)
    return UV_EINVAL;
  if (reg->closing)
    return UVT_ECLOSING;

  req->registry = reg;
  req->cb_ = cb;
  req->task_ = t;
  req->status_ = 0;
  uvt__list_init(&req->link_);
  uvt__deadline_init(&req->deadline_);

  if (uvt_status_is_terminal(t->status)) {
    /* Already ended: deliver from the loop (R-WAIT-2).  Mark it reported
     * now, as settlement would have. */
    t->reported = 1;
    uvt__task_pin(t);
    req->state_ = UVT__WAIT_DUE;
    uvt__list_insert_tail(&reg->deferred, &req->link_);
    uvt__kick(reg);
    return 0;
  }
  req->state_ = UVT__WAIT_PENDING;
  uvt__list_insert_tail(&t->waits, &req->link_);
  uvt__deadline_add(reg, &req->deadline_, UVT__DEADLINE_WAIT, timeout_ms);
  return 0;
}

int uvt_wait_abort(uvt_wait_t *req) {
  uvt_registry_t *reg;
  if (req == NULL || !uvt__wait_in_use(req))
    return UV_EINVAL;
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(req->registry);
  switch (req->state_) {
  case UVT__WAIT_PENDING:
    reg = req->registry;
    uvt__list_remove(&req->link_);
    uvt__deadline_remove(reg, &req->deadline_);
    req->task_ = NULL;
    req->status_ = UVT_EABORTED;
    req->state_ = UVT__WAIT_DUE;
    uvt__list_insert_tail(&reg->deferred, &req->link_);
    reg->metrics.waits_aborted++;
    uvt__kick(reg);
    return 0;
  case UVT__WAIT_COUNTED:
    /* Settlement counted this waiter and suppressed the notice on its
     * behalf: it still gets the terminal snapshot (R-WAIT-5). */
    return 0;
  case UVT__WAIT_DUE:
    return req->status_ == 0 ? 0 : UV_EINVAL;
  default:
    return UV_EINVAL;
  }
}

void uvt__waits_count(uvt_task_t *t) {
  struct uvt__link *n;
  if (uvt__list_empty(&t->waits))
    return;
  t->reported = 1;
  for (n = t->waits.next; n != &t->waits; n = n->next) {
    uvt_wait_t *req = uvt__container_of(n, uvt_wait_t, link_);
    req->state_ = UVT__WAIT_COUNTED;
    uvt__deadline_remove(t->reg, &req->deadline_);
  }
  /* They stay on t->waits: a terminal task gains no pending wait (a wait
   * on it is deferred), so from here on that list holds counted ones. */
}

void uvt__waits_deliver_counted(uvt_task_t *t) {
  struct uvt__link local;
  struct uvt__link *n;
  uvt_snapshot_t view;
  uvt__list_init(&local);
  uvt__list_splice(&t->waits, &local);
  while ((n = uvt__list_pop(&local)) != NULL) {
    uvt_wait_t *req = uvt__container_of(n, uvt_wait_t, link_);
    req->state_ = UVT__WAIT_IDLE;
    req->task_ = NULL;
    uvt__snapshot_view(t, &view);
    req->cb_(req, 0, &view);
  }
}

void uvt__waits_drain(uvt_registry_t *reg) {
  struct uvt__link local;
  struct uvt__link *n;
  uvt_snapshot_t view;
  uvt__list_init(&local);
  uvt__list_splice(&reg->deferred, &local);
  while ((n = uvt__list_pop(&local)) != NULL) {
    uvt_wait_t *req = uvt__container_of(n, uvt_wait_t, link_);
    uvt_task_t *t = req->task_;
    int status = req->status_;
    req->state_ = UVT__WAIT_IDLE;
    req->task_ = NULL;
    if (t != NULL) {
      uvt__snapshot_view(t, &view);
      req->cb_(req, status, &view);
      uvt__task_unpin(t);
    } else {
      req->cb_(req, status, NULL);
    }
  }
}

/* The wait's own deadline passed (R-WAIT-4): called by the deadline sweep
 * (registry.c) for a wait still pending; one that settlement counted or an
 * abort took meanwhile left the sweep's list. */
void uvt__wait_expired(uvt_wait_t *req) {
  uvt_task_t *t = req->task_;
  uvt_snapshot_t view;
  uvt__list_remove(&req->link_); /* R-WAIT-6: retains nothing */
  req->registry->metrics.waits_timed_out++;
  req->state_ = UVT__WAIT_IDLE;
  req->task_ = NULL;
  uvt__task_pin(t);
  uvt__snapshot_view(t, &view);
  req->cb_(req, UVT_EWAITTIMEOUT, &view);
  uvt__task_unpin(t);
}
