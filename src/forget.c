/* Dropping a terminal record on request (R-FORGET-1), so long-lived hosts
 * can bound what the registry retains.  Forgetting is a disposal of one
 * record: what the work left behind (a process group's survivors) is
 * stopped first, as at agent disposal (P-KILL-4).  The record leaves
 * lookups and lists at once; disposal of its agent or of the registry still
 * waits for it until it is dropped. */
#include "uvt-internal.h"

int uvt_forget(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller) {
  uvt_task_t *t;
  int err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  /* A live record, one whose end listeners have not seen yet, or one that
   * disposal is already draining stays. */
  if (uvt__task_live(t) || !t->dispatched || t->in_teardown)
    return UV_EBUSY;
  t->in_teardown = 1;
  uvt__hide(t);
  uvt__teardown_after_terminal(t); /* quiesce, then drop */
  return 0;
}
