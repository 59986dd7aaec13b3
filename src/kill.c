/* Kill (R-KILL-1..4). */
#include <string.h>

#include "uvt-internal.h"

int uvt_kill(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
             const char *reason, uvt_kill_result_t *result) {
  uvt_task_t *t;
  char *copy = NULL;
  int was_running;
  int err;

  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  if (reason == NULL)
    reason = "killed";

  if (!uvt__task_live(t)) {
    t->reported = 1; /* R-KILL-4: the killer saw the end. */
    reg->metrics.kills++;
    if (result != NULL)
      *result = UVT_KILL_ALREADY_TERMINAL;
    return 0;
  }

  /* Allocate before cancelling, so a failure leaves the task untouched. */
  if (t->kill_reason == NULL && (copy = uvt__strdup(reason)) == NULL)
    return UV_ENOMEM;

  /* R-KILL-1, R-KILL-3: cancel first (again, if stopping: "stop now").  A
   * producer that already settled is past cancelling; its outcome is on
   * its way. */
  if (!atomic_load(&t->settle_called)) {
    err = t->hooks.cancel != NULL ? t->hooks.cancel(t, reason) : UV_ENOTSUP;
    if (err != 0) {
      uvt__free(copy);
      return err;
    }
  }

  /* R-KILL-2.  The cancel hook may have settled synchronously; that only
   * queues the outcome, so the record is still live here. */
  was_running = t->status == UVT_RUNNING;
  t->status = UVT_STOPPING;
  t->reported = 1;
  if (was_running) /* a transition only the first time (R-FEED-1) */
    uvt__feed(t, UVT__CHANGE_STOPPING);
  if (copy != NULL) {
    t->kill_reason = copy;
    t->kill_reason_owned = 1;
  }
  reg->metrics.kills++;
  if (result != NULL)
    *result = UVT_KILL_REQUESTED;
  return 0;
}
