/* Every call of a producer's hook (uvt_hooks_t), and the one re-entry
 * guard around them (R-REENTER-1).  While a hook of a task runs, its bit
 * is set in t->in_hook: the rest of the core asks uvt__in_hook() instead
 * of keeping a flag of its own, and no hook is entered twice at once for
 * one task.  A hook may call anything of the library; the record is
 * pinned (t->pins) while one that may drop it runs, and unpinned without
 * a free: the caller holds it too.  This file calls nothing of the core,
 * so every layer of it may call a hook. */
#include "uvt-internal.h"

/* 0 when `hook` of `t` is already running; else marks it running. */
static int enter(uvt_task_t *t, unsigned hook) {
  if (t->in_hook & hook)
    return 0;
  t->in_hook |= hook;
  return 1;
}

static void leave(uvt_task_t *t, unsigned hook) {
  t->in_hook &= ~hook;
}

int uvt__hook_cancel(uvt_task_t *t, const char *reason, int *joined) {
  int err;
  *joined = 0;
  if (t->hooks.cancel == NULL)
    return UV_ENOTSUP;
  if (!enter(t, UVT__HOOK_CANCEL)) {
    /* The running call is this one's cancel too. */
    t->cancel_deferred = 1;
    return 0;
  }
  err = t->hooks.cancel(t, reason);
  leave(t, UVT__HOOK_CANCEL);
  if (t->cancel_deferred) {
    t->cancel_deferred = 0;
    *joined = 1;
  }
  return err;
}

int uvt__hook_read(uvt_task_t *t, uvt_buf_t *out) {
  int err;
  if (!enter(t, UVT__HOOK_READ))
    return UV_EBUSY;
  err = t->hooks.read_output(t, out);
  leave(t, UVT__HOOK_READ);
  return err;
}

int uvt__hook_read_late(uvt_task_t *t, uvt_buf_t *out) {
  int err;
  if (t->hooks.read_late == NULL || t->release_called)
    return 0;
  if (!enter(t, UVT__HOOK_READ))
    return UV_EBUSY;
  err = t->hooks.read_late(t, out);
  leave(t, UVT__HOOK_READ);
  return err;
}

int uvt__hook_quiesce(uvt_task_t *t) {
  int r;
  if (!enter(t, UVT__HOOK_QUIESCE))
    return 1; /* the running call is in progress */
  t->pins++;
  r = t->hooks.quiesce(t);
  leave(t, UVT__HOOK_QUIESCE);
  t->pins--; /* the caller holds the record too; no free here */
  return r;
}

void uvt__hook_settled(uvt_task_t *t) {
  if (t->hooks.settled == NULL || t->release_called ||
      !enter(t, UVT__HOOK_SETTLED))
    return;
  t->hooks.settled(t);
  leave(t, UVT__HOOK_SETTLED);
}

void uvt__hook_release(uvt_task_t *t) {
  if (t->hooks.release == NULL || t->release_called)
    return;
  t->release_called = 1;
  enter(t, UVT__HOOK_RELEASE);
  t->pins++; /* the hook may call anything (R-REENTER-1) */
  t->hooks.release(t);
  t->pins--;
  leave(t, UVT__HOOK_RELEASE);
}
