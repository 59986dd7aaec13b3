/* Chosen signals for a live task (P-KILL-8): one signal to every process
 * of its session, without a kill's escalation. */
#define _GNU_SOURCE
#include <signal.h>

#include "process-internal.h"

/* The signals a host (or a model) may send: those a program is expected
 * to act on.  Anything else (SIGSEGV, SIGALRM, real-time signals) would
 * only confuse the program or fake a crash. */
static int allowed(int signum) {
  switch (signum) {
  case SIGINT:
  case SIGHUP:
  case SIGQUIT:
  case SIGUSR1:
  case SIGUSR2:
  case SIGTERM:
  case SIGKILL:
  case SIGCONT:
  case SIGSTOP:
  case SIGWINCH:
    return 1;
  default:
    return 0;
  }
}

int uvt_process_signal(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, int signum) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  uvt__proc_t *p;
  int err;

  if (!allowed(signum))
    return UV_EINVAL;
  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  /* A task that ended (or whose leader was reaped: it is ending) is not
   * signalled: P-KILL-3 allows that only for a kill's stop. */
  if (!uvt_task_is_live(t) || p->reaped || uvt__proc_ending(p))
    return UV_ESRCH;
  if (p->pid <= 0)
    return UV_EAGAIN; /* P-SPAWN-6: the spawn is still out */
  return uvt__members_signal_now(p, signum);
}
