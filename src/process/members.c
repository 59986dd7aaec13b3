/* The members of a task: every process of its session (P-KILL-5), signalled and
 * counted only while it is known to be ours (P-KILL-3), and members that
 * were reparented to the host are reaped by us (P-REAP-1).
 *
 * Membership.  A task's leader is its session's leader, so a process is
 * a member when field 6 of /proc/<pid>/stat (the session) is the leader's
 * pid.  `set -m` jobs have process groups of their own inside that
 * session; each group is signalled as a whole (kill(-pgid)), so a member
 * that forks while it is being signalled cannot slip through.  The
 * leader's own group is signalled at once while the leader is unreaped
 * (it holds the number, nothing can reuse it); other groups are found by
 * a pass over /proc.
 *
 * Reuse (P-KILL-3).  After the leader was reaped its pid, and so the
 * session id, can be reused, but the kernel keeps a number allocated
 * while any process still has it as its session or group: while a member
 * of ours is alive the number cannot be reused.  So after the reap the
 * number is checked first: if a process with the leader's pid exists, the
 * number was freed and reused, our session is gone for good and nothing
 * is signalled.  A member must also have started no earlier than the
 * leader (start times, field 22).  Once a pass finds no live member after
 * the leader's reap, the session is marked gone for good: nobody is left
 * to fork into it.  What remains possible: the number freed, reused by a
 * new session leader that exits again at once, all between two passes,
 * with that new session's members still running.  Reuse itself is not
 * rare (pid_max is 32768 on many machines, including the one these tests
 * ran on), but that sequence within one pass interval is.
 *
 * Passes are batched: requests made in one loop turn share one pass over
 * /proc, run from an idle handle of the registry's context (so a registry
 * close that kills 500 tasks reads /proc a few times, not 500 times).
 *
 * Reaping (P-REAP-1).  On a host that is a child subreaper or pid 1,
 * members whose parent died are reparented to the host and would stay
 * zombies there.  Every pass reaps the zombies among the members whose
 * parent is this process (waitpid on that pid: only our own pids), so
 * "the session is gone" means reaped; and every SIGCHLD the context sees
 * on such a host reaps the zombie children that belong to a tracked
 * session (the children are listed from /proc/self/task/<tid>/children,
 * not from all of /proc). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process-internal.h"

/* ---- is the session's number still in use? ---------------------------- */

/* The kernel keeps a pid number allocated while any process has it as its
 * pid, process group or session, zombies included (until they are
 * reaped), and F_SETOWN with a negative number fails with ESRCH exactly
 * when the number is not allocated.  So after the leader's reap, ESRCH
 * means no process is left in the session, not even a zombie: the cheap
 * test that spares a pass over /proc for the common task that left
 * nothing behind.  Success proves nothing (the number may be reused): a
 * pass decides then. */
static int number_free(uvt__procs_t *ps, pid_t sid) {
  int r;

  if (ps == NULL || ps->owner_fd < 0)
    return 0;
  r = fcntl(ps->owner_fd, F_SETOWN, -(int)sid);
  if (r == 0) {
    fcntl(ps->owner_fd, F_SETOWN, 0);
    return 0;
  }
  return errno == ESRCH;
}

int uvt__members_known_empty(uvt__proc_t *p) {
  if (!p->session_gone && p->pid > 0 && p->reaped &&
      number_free(p->procs, p->pid))
    p->session_gone = 1;
  return p->session_gone && (!p->cg || uvt__cgroup_empty(p));
}

/* ---- the table of tracked sessions (by leader pid = session id) ------- */

#define TABLE_MIN 64

static size_t bucket(const uvt__procs_t *ps, pid_t sid) {
  return ((size_t)sid * 2654435761u) & (ps->sessions_size - 1);
}

static void table_grow(uvt__procs_t *ps) {
  uvt__proc_t **nb;
  size_t size = ps->sessions_size * 2;
  size_t i;

  nb = uvt__calloc(size, sizeof(*nb));
  if (nb == NULL)
    return; /* longer chains, nothing lost */
  for (i = 0; i < ps->sessions_size; i++) {
    uvt__proc_t *p = ps->sessions[i];
    while (p != NULL) {
      uvt__proc_t *next = p->sid_next;
      size_t b = ((size_t)p->pid * 2654435761u) & (size - 1);
      p->sid_next = nb[b];
      nb[b] = p;
      p = next;
    }
  }
  uvt__free(ps->sessions);
  ps->sessions = nb;
  ps->sessions_size = size;
}

int uvt__members_init(uvt__procs_t *ps) {
  ps->sessions = uvt__calloc(TABLE_MIN, sizeof(*ps->sessions));
  if (ps->sessions == NULL)
    return UV_ENOMEM;
  /* For number_free(); without it every check is a pass. */
  ps->owner_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ps->sessions_size = TABLE_MIN;
  uvt__list_init(&ps->sweeping);
  return 0;
}

static uvt__proc_t *table_find(const uvt__procs_t *ps, pid_t sid) {
  uvt__proc_t *p;
  if (ps->sessions == NULL || sid <= 0)
    return NULL;
  for (p = ps->sessions[bucket(ps, sid)]; p != NULL; p = p->sid_next)
    if (p->pid == sid)
      return p;
  return NULL;
}

void uvt__members_track(uvt__proc_t *p) {
  uvt__procs_t *ps = p->procs;
  size_t b;

  if (ps == NULL || p->tracked || p->pid <= 0)
    return;
  if (ps->sessions_count >= ps->sessions_size)
    table_grow(ps);
  b = bucket(ps, p->pid);
  p->sid_next = ps->sessions[b];
  ps->sessions[b] = p;
  ps->sessions_count++;
  p->tracked = 1;
}

void uvt__members_untrack(uvt__proc_t *p) {
  uvt__procs_t *ps = p->procs;
  uvt__proc_t **pp;

  uvt__list_remove(&p->sweep_link);
  uvt__list_remove(&p->pass_link);
  if (!p->tracked || ps == NULL)
    return;
  for (pp = &ps->sessions[bucket(ps, p->pid)]; *pp != NULL;
       pp = &(*pp)->sid_next) {
    if (*pp == p) {
      *pp = p->sid_next;
      break;
    }
  }
  p->sid_next = NULL;
  ps->sessions_count--;
  p->tracked = 0;
}

/* ---- passes over /proc ------------------------------------------------ */

/* Before a pass: after the leader's reap, a process with its pid means the
 * number was reused and our session is gone for good. */
static void pass_begin(uvt__proc_t *p) {
  uvt__pstat_t st;

  p->pass_live = 0;
  p->pass_sandbox = 0;
  p->pass_dying = 0;
  p->pass_groups = 0;
  /* P-KILL-8: the leader's group got the signal at the call; the pass
   * reaches the other groups without sending it there a second time. */
  if (p->pass_lead && p->pid > 0) {
    p->pass_group[0] = p->pid;
    p->pass_groups = 1;
  }
  p->pass_lead = 0;
  if (p->pid <= 0)
    p->session_gone = 1;
  uvt__members_known_empty(p);
  if (!p->session_gone && p->reaped && uvt__pstat_read(p->pid, &st) == 0)
    p->session_gone = 1;
}

/* P-KILL-1, P-KILL-8: every SIGTERM the library sends is followed by
 * SIGCONT, so that a process stopped (SIGSTOP, or SIGTSTP/SIGTTIN in a
 * job of its own) acts on it at once instead of sitting stopped until the
 * grace's SIGKILL.  Returns kill()'s result for `sig`, errno kept. */
static int send_sig(pid_t target, int sig) {
  int r = kill(target, sig);
  int e = errno;

  if (sig == SIGTERM)
    kill(target, SIGCONT);
  errno = e;
  return r;
}

/* A process of the task's cgroup (P-KILL-5): those the session scan did
 * not count (they left the session) are counted and signalled here; the
 * group's membership is exact. */
static void cg_member(void *arg, pid_t pid) {
  uvt__proc_t *p = arg;
  uvt__pstat_t st;

  if (uvt__pstat_read(pid, &st) != 0 || st.state == 'Z' || st.state == 'X')
    return;
  if (!p->session_gone && st.sid == p->pid && st.start >= p->start_ticks)
    return; /* counted with the session */
  p->pass_live++;
  if (p->pass_sig == 0 && uvt__pstat_dying(&st))
    p->pass_dying++;
  if (p->pass_sig != 0)
    send_sig(pid, p->pass_sig);
}

static int signalled(const uvt__proc_t *p, pid_t pgrp) {
  unsigned i;
  for (i = 0; i < p->pass_groups && i < UVT__PASS_GROUPS; i++)
    if (p->pass_group[i] == pgrp)
      return 1;
  return 0;
}

/* One process of the pass, known to claim p's session. */
static void pass_member(uvt__proc_t *p, const uvt__pstat_t *st, pid_t self) {
  int status;

  if (p->session_gone || st->start < p->start_ticks)
    return;
  if (st->state == 'Z' || st->state == 'X') {
    /* P-REAP-1: a member reparented to us is ours to reap; the leader is
     * reaped by its own path, which reads its status. */
    if (st->ppid == self && !(st->pid == p->pid && !p->reaped))
      while (waitpid(st->pid, &status, WNOHANG) < 0 && errno == EINTR)
        ;
    return;
  }
  p->pass_live++;
  if (p->sandboxed && st->bwrap)
    p->pass_sandbox++;
  else if (p->pass_sig == 0 && uvt__pstat_dying(st))
    p->pass_dying++;
  if (p->pass_sig == SIGSTOP) {
    /* P-KILL-8: one process at a time, never a group: a group's signal
     * that lands while one of its members forks also reaches the child,
     * but the SIGCONT after it does not when the forking process leaves
     * SIGCONT at its default (the kernel drops it as ignored before it
     * records it for the fork), so the child was born stopped and its
     * parent waited for it for ever. */
    kill(st->pid, SIGSTOP);
    return;
  }
  if (p->pass_sig == 0 || signalled(p, st->pgrp))
    return;
  if (p->pass_groups < UVT__PASS_GROUPS) {
    send_sig(-st->pgrp, p->pass_sig);
    p->pass_group[p->pass_groups++] = st->pgrp;
  } else {
    /* P-KILL-8: past the groups a pass remembers, one process at a time,
     * so that none gets the signal twice (once per member of its
     * group). */
    send_sig(st->pid, p->pass_sig);
  }
}

/* One pass over /proc for every proc on `list` (linked by pass_link), each
 * sending its pass_sig to every group of its session. */
static void pass_run(struct uvt__link *list) {
  struct uvt__link *n;
  DIR *d;
  struct dirent *de;
  uvt__pstat_t st;
  pid_t self = getpid();
  pid_t pid;

  int wanted = 0;

  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    pass_begin(p);
    wanted += !p->session_gone;
  }
  if (!wanted)
    goto cgroups; /* every session known empty: no need to read /proc */
  d = opendir("/proc");
  if (d == NULL)
    return; /* no /proc: only the leader's group was signalled */
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    pid = (pid_t)strtol(de->d_name, NULL, 10);
    if (uvt__pstat_read(pid, &st) != 0)
      continue;
    for (n = list->next; n != list; n = n->next) {
      uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
      if (p->pid == st.sid)
        pass_member(p, &st, self);
    }
  }
  closedir(d);
cgroups:
  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    if (!p->cg)
      continue;
    if (p->pass_sig == SIGKILL)
      uvt__cgroup_kill(p);
    if (!uvt__cgroup_empty(p))
      uvt__cgroup_each(p, cg_member);
  }
  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    /* Nobody is left to fork into a session whose leader was reaped. */
    if (p->reaped && p->pass_live == 0)
      p->session_gone = 1;
    p->pass_sig = 0;
  }
}

/* A pass now for p alone, sending sig (0: none) to its session's groups,
 * `lead` saying that the leader's group got it already.  p may be on the
 * list of a batched pass whose callbacks are running (a host's callback
 * can signal or forget another task): its place there is kept. */
static void pass_one(uvt__proc_t *p, int sig, int lead) {
  struct uvt__link one;
  struct uvt__link *next = NULL;

  if (!uvt__list_empty(&p->pass_link)) {
    next = p->pass_link.next;
    uvt__list_remove(&p->pass_link);
  }
  uvt__list_init(&one);
  uvt__list_insert_tail(&one, &p->pass_link);
  p->pass_sig = sig;
  p->pass_lead = sig != 0 && lead;
  pass_run(&one);
  uvt__list_remove(&p->pass_link);
  if (next != NULL)
    uvt__list_insert_tail(next, &p->pass_link);
}

int uvt__members_count(uvt__proc_t *p, int sig) {
  int lead = 0;

  if (uvt__members_known_empty(p))
    return 0;
  if (sig != 0 && !p->reaped && p->pid > 0) {
    send_sig(-p->pid, sig);
    lead = 1;
  }
  pass_one(p, sig, lead);
  return (int)p->pass_live;
}

int uvt__members_leftovers(uvt__proc_t *p) {
  int live = uvt__members_count(p, 0);
  /* 0 without a pass (known empty): pass_sandbox and pass_dying are then
   * stale. */
  return live > 0 ? live - (int)p->pass_sandbox - (int)p->pass_dying : 0;
}

static void on_sweep(uv_idle_t *h) {
  uvt__procs_t *ps = h->data;
  struct uvt__link batch;
  struct uvt__link *n;
  uvt__proc_t *p;

  uv_idle_stop(h);
  uvt__list_init(&batch);
  /* Off the waiting list before the pass: a request made from a callback
   * below queues its proc for the next pass instead of being lost. */
  while ((n = uvt__list_pop(&ps->sweeping)) != NULL) {
    p = uvt__container_of(n, uvt__proc_t, sweep_link);
    p->pass_sig = p->want_sig;
    p->pass_lead = p->want_lead;
    p->want_sig = 0;
    p->want_lead = 0;
    uvt__list_insert_tail(&batch, &p->pass_link);
  }
  pass_run(&batch);
  /* Collect first, then call back: a callback may end and free its proc
   * (untracking takes it off the batch) or queue it again. */
  while ((n = uvt__list_pop(&batch)) != NULL) {
    p = uvt__container_of(n, uvt__proc_t, pass_link);
    p->swept(p);
  }
}

/* A kill's signal (SIGTERM, SIGKILL; 0 for a look) for the next batched
 * pass, `lead` saying that the leader's group got it already.  A SIGKILL
 * replaces a SIGTERM still waiting; chosen signals do not come here
 * (uvt__members_signal_now). */
static void sweep_request(uvt__proc_t *p, int sig, int lead) {
  uvt__procs_t *ps = p->procs;

  if (sig == SIGKILL || p->want_sig == 0) {
    p->want_sig = sig;
    p->want_lead = sig != 0 && lead;
  }
  if (ps == NULL || ps->closing) {
    /* No context (any more): do the pass now. */
    pass_one(p, p->want_sig, p->want_lead);
    p->want_sig = 0;
    p->want_lead = 0;
    p->swept(p);
    return;
  }
  if (uvt__list_empty(&p->sweep_link))
    uvt__list_insert_tail(&ps->sweeping, &p->sweep_link);
  if (!ps->sweeper_init) {
    uv_idle_init(ps->loop, &ps->sweeper);
    ps->sweeper.data = ps;
    ps->sweeper_init = 1;
  }
  if (!uv_is_active((uv_handle_t *)&ps->sweeper))
    uv_idle_start(&ps->sweeper, on_sweep);
}

/* The leader's group at once, while the leader holds its number; 0, or
 * the error of that kill (EPERM).  *lead says whether it was sent. */
static int signal_lead(uvt__proc_t *p, int sig, int *lead) {
  *lead = !p->reaped;
  if (*lead && send_sig(-p->pid, sig) != 0 && errno != ESRCH)
    return UVT__PERR(errno);
  if (p->cg && sig == SIGKILL)
    uvt__cgroup_kill(p);
  return 0;
}

int uvt__members_signal(uvt__proc_t *p, int sig) {
  int err;
  int lead;

  if (p->pid <= 0)
    return 0;
  err = signal_lead(p, sig, &lead);
  if (err == 0 && !uvt__members_known_empty(p))
    sweep_request(p, sig, lead);
  return err;
}

/* P-KILL-8: a chosen signal reaches every process of the session once,
 * and in the order of the calls: the leader's group at once, the other
 * groups from a pass run now rather than from the batched sweep, which
 * sent the leader's group the signal again and kept only one signal per
 * task (SIGSTOP then SIGCONT ended stopped).  A kill's signal still
 * waiting for the sweep goes out first. */
int uvt__members_signal_now(uvt__proc_t *p, int sig) {
  int err;
  int lead;

  if (p->pid <= 0)
    return 0;
  if (p->want_sig != 0) {
    pass_one(p, p->want_sig, p->want_lead);
    p->want_sig = 0;
    p->want_lead = 0;
  }
  if (sig == SIGSTOP) {
    /* Process by process, the leader too (pass_member). */
    pass_one(p, sig, 0);
    return 0;
  }
  err = signal_lead(p, sig, &lead);
  if (err == 0 && !uvt__members_known_empty(p))
    pass_one(p, sig, lead);
  return err;
}

void uvt__members_check(uvt__proc_t *p) {
  sweep_request(p, 0, 0);
}

/* ---- reaping reparented members on SIGCHLD (P-REAP-1) ----------------- */

/* One child of ours: a zombie member of a tracked session is reaped. */
static void orphan_check(uvt__procs_t *ps, pid_t child) {
  uvt__pstat_t st;
  uvt__proc_t *p;
  int status;

  p = table_find(ps, child);
  if (p != NULL && !p->reaped)
    return; /* a leader: its own path reaps it and reads its status */
  if (uvt__pstat_read(child, &st) != 0 || (st.state != 'Z' && st.state != 'X'))
    return;
  p = table_find(ps, st.sid);
  if (p == NULL || p->session_gone || st.start < p->start_ticks ||
      st.pid == st.sid) {
    /* Not a member of a tracked session; one that left it is still ours
     * if it died in a group of the registry's cgroup directory. */
    if (!uvt__cgroup_had(ps, child))
      return;
  }
  while (waitpid(child, &status, WNOHANG) < 0 && errno == EINTR)
    ;
}

static void orphan_pid(void *arg, pid_t pid) {
  orphan_check(arg, pid);
}

/* Read the pids in /proc/self/task/<tid>/children. */
static int children_of(uvt__procs_t *ps, const char *tid) {
  char path[sizeof("/proc/self/task//children") + 256]; /* a d_name */
  int fd;

  snprintf(path, sizeof(path), "/proc/self/task/%s/children", tid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  uvt__read_pids(fd, orphan_pid, ps);
  close(fd);
  return 0;
}

void uvt__members_reap_orphans(uvt__procs_t *ps) {
  DIR *d;
  struct dirent *de;
  uvt__pstat_t st;
  pid_t self;
  int listed = 0;

  if (ps->sessions_count == 0 && ps->cg_dirfd < 0)
    return;
  d = opendir("/proc/self/task");
  if (d != NULL) {
    while ((de = readdir(d)) != NULL)
      if (de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
          children_of(ps, de->d_name) == 0)
        listed = 1;
    closedir(d);
  }
  if (listed)
    return;
  /* A kernel without the children files: every process, filtered on its
   * parent. */
  self = getpid();
  d = opendir("/proc");
  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    pid_t pid;
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    pid = (pid_t)strtol(de->d_name, NULL, 10);
    if (uvt__pstat_read(pid, &st) == 0 && st.ppid == self)
      orphan_check(ps, pid);
  }
  closedir(d);
}

unsigned uvt__members_close(uvt__procs_t *ps, uv_close_cb on_closed) {
  struct uvt__link *n;
  size_t i;

  /* The context closes only once every task state it served was freed
   * (context.c, procs_live), and a freed state is untracked: the table
   * and the sweep list are empty here.  Emptying them stays as a guard. */
  while ((n = uvt__list_pop(&ps->sweeping)) != NULL)
    ;
  for (i = 0; i < ps->sessions_size; i++) {
    uvt__proc_t *p = ps->sessions[i];
    while (p != NULL) {
      uvt__proc_t *next = p->sid_next;
      if (p->cg)
        uvt__cgroup_remove(p);
      p->sid_next = NULL;
      p->tracked = 0;
      p->procs = NULL;
      p = next;
    }
  }
  uvt__cgroup_close(ps);
  uvt__free(ps->sessions);
  ps->sessions = NULL;
  ps->sessions_size = 0;
  ps->sessions_count = 0;
  if (ps->owner_fd >= 0)
    close(ps->owner_fd);
  ps->owner_fd = -1;
  if (!ps->sweeper_init)
    return 0;
  ps->sweeper_init = 0;
  uv_close((uv_handle_t *)&ps->sweeper, on_closed);
  return 1;
}
