/* Kill (R-KILL-1..4, P-KILL-6's registry side).  The cancel itself is
 * uvt__task_cancel (teardown.c), shared with disposals. */
#include <string.h>

#include "uvt-internal.h"

int uvt_kill(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
             const char *reason, uvt_kill_result_t *result) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  char *copy = NULL;
  int was_running;
  int err;

  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  /* From inside the task's own cancel hook: that cancel is in progress,
   * and calling the hook again would recurse (R-REENTER-1). */
  if (uvt__in_hook(t, UVT__HOOK_CANCEL))
    return UV_EBUSY;
  if (reason == NULL)
    reason = "killed";

  if (!uvt__task_live(t)) {
    t->reported = 1; /* R-KILL-4: the killer saw the end. */
    reg->metrics.kills++;
    if (result != NULL)
      *result = UVT_KILL_ALREADY_TERMINAL;
    /* P-KILL-6: what the work left running is stopped; the kill does not
     * wait for it and the outcome stays. */
    uvt__quiesce_on_kill(t);
    return 0;
  }

  /* Allocate before cancelling, so a failure leaves the task untouched. */
  if (t->kill_reason == NULL && (copy = uvt__strdup(reason)) == NULL)
    return UV_ENOMEM;

  /* R-KILL-1, R-KILL-3: cancel first (again, if stopping: "stop now").  A
   * producer that already settled is past cancelling; its outcome is on
   * its way. */
  if (!atomic_load(&t->settle_called)) {
    err = uvt__task_cancel(t, reason);
    if (err != 0) {
      uvt__free(copy);
      return err;
    }
  }

  /* R-KILL-2.  The cancel hook may have settled synchronously; that only
   * queues the outcome, so the record is still live here.  It may also
   * have begun a teardown of the task (disposing its owner): then the
   * teardown's reason, recorded during the hook, is the first one. */
  was_running = t->status == UVT_RUNNING;
  if (uvt__task_live(t))
    t->status = UVT_STOPPING;
  t->reported = 1;
  if (was_running) /* a transition only the first time (R-FEED-1) */
    uvt__feed(t, UVT__CHANGE_STOPPING);
  if (copy != NULL && t->kill_reason == NULL) {
    t->kill_reason = copy;
    t->kill_reason_owned = 1;
  } else {
    uvt__free(copy);
  }
  reg->metrics.kills++;
  if (result != NULL)
    *result = UVT_KILL_REQUESTED;
  return 0;
}
