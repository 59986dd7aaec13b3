/* Seeing leaders exit without pidfds (P-REAP-2).
 *
 * Where pidfd_open is not available (kernels before 5.3, seccomp filters,
 * valgrind), a task's leader is reaped when SIGCHLD says some child
 * changed state.  One watch serves every task of the registry: a
 * uv_signal_t per task would make libuv write one message per task into
 * its signal pipe for every SIGCHLD, and with a few hundred tasks that
 * pipe overflows and exits are lost (C-26).  Signals coalesce, so each
 * SIGCHLD reaps every watched leader that has exited (waitpid on each
 * leader's own pid, WNOHANG: only our own children).
 *
 * A signal can still go missing (a host that replaced the SIGCHLD
 * handler, a pipe full for some other reason): while a leader is watched,
 * a slow timer looks again every RECHECK_MS, so an exit is seen at most
 * that late and no task is stranded.  Both handles are unreferenced: the
 * tasks' own handles keep the loop alive. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>

#include "process-internal.h"

/* The safety re-check while some leader is watched. */
#define RECHECK_MS 1000

/* Reap every watched leader that exited.  Collect first: a reap closes
 * the task's handles and unlinks it from the list. */
static void reap_scan(uvt__procs_t *ps) {
  struct uvt__link aside;
  struct uvt__link *n;

  uvt__list_init(&aside);
  uvt__list_splice(&ps->unreaped, &aside);
  while ((n = uvt__list_pop(&aside)) != NULL) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, unreaped_link);
    uvt__list_insert_tail(&ps->unreaped, n);
    ps->check_leader(p); /* unlinks p once reaped */
  }
  if (uvt__list_empty(&ps->unreaped)) {
    if (ps->watching)
      uv_timer_stop(&ps->recheck);
    ps->check_closed(ps);
  }
}

static void on_sigchld(uv_signal_t *h, int signum) {
  uvt__procs_t *ps = h->data;
  (void)signum;
  reap_scan(ps);
  /* P-REAP-1 (members.c): members reparented to a subreaper host. */
  if (ps->subreaper && !ps->closing)
    uvt__members_reap_orphans(ps);
}

static void on_recheck(uv_timer_t *t) {
  reap_scan(t->data);
}

int uvt__reap_start(uvt__procs_t *ps) {
  int err;

  if (ps->watching)
    return 0;
  err = uv_signal_init(ps->loop, &ps->sigchld);
  if (err != 0)
    return err;
  ps->sigchld.data = ps;
  /* On Unix uv_timer_init cannot fail. */
  uv_timer_init(ps->loop, &ps->recheck);
  ps->recheck.data = ps;
  ps->watching = 1;
  err = uv_signal_start(&ps->sigchld, on_sigchld, SIGCHLD);
  uv_unref((uv_handle_t *)&ps->sigchld);
  uv_unref((uv_handle_t *)&ps->recheck);
  return err;
}

int uvt__reap_watch(uvt__procs_t *ps, uvt__proc_t *p,
                    int (*check)(uvt__proc_t *p)) {
  int err = uvt__reap_start(ps);
  if (err != 0)
    return err;
  ps->check_leader = check;
  uvt__list_insert_tail(&ps->unreaped, &p->unreaped_link);
  if (!uv_is_active((uv_handle_t *)&ps->recheck)) {
    uv_update_time(ps->loop);
    uv_timer_start(&ps->recheck, on_recheck, RECHECK_MS, RECHECK_MS);
  }
  /* A SIGCHLD from before the leader was on the list was not for it. */
  check(p);
  return 0;
}

void uvt__reap_unwatch(uvt__proc_t *p) {
  uvt__list_remove(&p->unreaped_link);
}

int uvt__reap_close(uvt__procs_t *ps, uv_close_cb on_closed) {
  struct uvt__link *n;

  if (!uvt__list_empty(&ps->unreaped)) {
    /* Tasks whose records were force-failed and dropped: stop them, and
     * keep watching until their leaders are reaped. */
    for (n = ps->unreaped.next; n != &ps->unreaped; n = n->next) {
      uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, unreaped_link);
      if (!p->killed_now) {
        p->killed_now = 1;
        kill(-p->pid, SIGKILL);
      }
    }
    return -1;
  }
  if (!ps->watching)
    return 0;
  ps->watching = 0;
  uv_close((uv_handle_t *)&ps->sigchld, on_closed);
  uv_close((uv_handle_t *)&ps->recheck, on_closed);
  return 2;
}
