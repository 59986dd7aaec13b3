/* Dropping a terminal record on request (R-FORGET-1, R-FORGET-2), so
 * long-lived hosts can bound what the registry retains.  Forgetting is a
 * disposal of one record: what the work left behind (a process group's
 * survivors) is stopped first, as at agent disposal (P-KILL-4).
 *
 * The record leaves lookups and lists at once.  It is dropped (release
 * hook, the feed's dropped change) when nothing needs it any more: once
 * the dispatch of its end is over (so a forget from a listener, or from a
 * wait callback of that dispatch, does not take the record from under the
 * listeners and waits still to be called), and once a quiesce in progress
 * ended (bounded by teardown_grace_ms).  Disposal of its agent or of the
 * registry waits for it until then. */
#include "uvt-internal.h"

int uvt_forget(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  int err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  if (uvt__task_live(t))
    return UV_EBUSY;
  uvt__hide(t);
  /* A disposal that already holds the record drops it on its own; else
   * this is a teardown of one record. */
  if (!t->in_teardown) {
    t->in_teardown = 1;
    uvt__teardown_after_terminal(t); /* quiesce, then drop; or wait */
  }
  return 0;
}

int64_t uvt_held_bytes(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller) {
  uvt_task_t *t;
  int err;
  UVT_LOOP_ONLY(reg); /* P-THREAD-1 */
  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  if (uvt__task_live(t))
    return 0;
  return (int64_t)t->output_len;
}
