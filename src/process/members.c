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
#include <time.h>
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
  if (!p->session_gone || p->esc_n > 0)
    return 0;
  /* Nothing can enter an empty group of a task with no process left: once
   * seen empty, it stays (one file read, not one per look). */
  if (p->cg && !p->cgroup.empty) {
    if (uvt__cg_populated(&p->cgroup))
      return 0;
    p->cgroup.empty = 1;
  }
  return 1;
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

/* ---- S-11: what left the session, by descent -------------------------- */

/* Without a cgroup a process that left the task's session (`setsid cmd &`,
 * a daemon's double fork) is still the task's while it descends from it:
 * a pass reads every process anyway, so it also follows parent links from
 * the session's members (and from what it found before) to processes in
 * other sessions, and remembers each (its pid and start time: it stays
 * the task's after its parent dies and it is re-parented, to the host
 * when the host is a child subreaper).  A remembered process also stands
 * for its own session: what it starts there later is the task's too.
 * Each is signalled alone (kill(pid)), after its start time was checked
 * (P-KILL-3).  What it cannot see: a process whose parent died before any
 * pass looked (a double fork between two passes, a `setsid` child of a
 * leader that exited before a kill or a look): see docs/limits.md. */

typedef struct {
  uvt__pstat_t st;
  uvt__proc_t *owner; /* the task, or NULL */
  int esc;            /* outside the owner's session */
} row_t;

typedef struct {
  row_t *v;
  size_t n;
  size_t cap;
} rows_t;

static void rows_add(rows_t *r, const uvt__pstat_t *st, uvt__proc_t *owner) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 256;
    row_t *nv = uvt__realloc(r->v, cap * sizeof(*nv));
    if (nv == NULL)
      return; /* a smaller pass: what is missed now is found later */
    r->v = nv;
    r->cap = cap;
  }
  r->v[r->n].st = *st;
  r->v[r->n].owner = owner;
  r->v[r->n].esc = 0;
  r->n++;
}

static int row_cmp(const void *a, const void *b) {
  pid_t x = ((const row_t *)a)->st.pid;
  pid_t y = ((const row_t *)b)->st.pid;
  return x < y ? -1 : x > y;
}

static row_t *row_find(rows_t *r, pid_t pid) {
  row_t key;
  key.st.pid = pid;
  return bsearch(&key, r->v, r->n, sizeof(*r->v), row_cmp);
}

/* Is `st` one of p's remembered processes, or of one of their sessions? */
static int esc_match(uvt__proc_t *p, const uvt__pstat_t *st) {
  unsigned i;
  for (i = 0; i < p->esc_n; i++) {
    if (p->esc[i].pid == st->pid && p->esc[i].start == st->start)
      return p->esc[i].seen = 1;
    if (p->esc[i].pid == st->sid && st->start >= p->esc[i].start)
      return p->esc[i].seen = 1;
  }
  return 0;
}

static void esc_remember(uvt__proc_t *p, const uvt__pstat_t *st) {
  unsigned i;
  for (i = 0; i < p->esc_n; i++)
    if (p->esc[i].pid == st->pid && p->esc[i].start == st->start)
      return;
  if (p->esc == NULL) {
    p->esc = uvt__calloc(UVT__ESC_MAX, sizeof(*p->esc));
    if (p->esc == NULL)
      return;
  }
  if (p->esc_n == UVT__ESC_MAX)
    return; /* still signalled now, by descent */
  p->esc[p->esc_n].pid = st->pid;
  p->esc[p->esc_n].start = st->start;
  p->esc[p->esc_n].seen = 1;
  p->esc_n++;
}

/* The tree below the live leader, through the kernel's children lists
 * (its main thread's; what other threads started is found by the next
 * pass through parent links): every process outside the session is
 * remembered.  A few reads for a usual task, done before a signal goes
 * to the leader's group, whose death would re-parent them. */
typedef struct {
  uvt__proc_t *p;
  pid_t *queue;
  size_t n;
  size_t cap;
} walk_t;

static void walk_add(void *arg, pid_t pid) {
  walk_t *w = arg;
  pid_t *nq;

  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 64;
    if (cap > 4096)
      return;
    nq = uvt__realloc(w->queue, cap * sizeof(*nq));
    if (nq == NULL)
      return;
    w->queue = nq;
    w->cap = cap;
  }
  w->queue[w->n++] = pid;
}

static void esc_walk(uvt__proc_t *p) {
  walk_t w = {p, NULL, 0, 0};
  size_t i;

  if (p->pid <= 0)
    return;
  walk_add(&w, p->pid);
  for (i = 0; i < w.n; i++) {
    char path[64];
    uvt__pstat_t st;
    int fd;
    if (i > 0) {
      if (uvt__pstat_read(w.queue[i], &st) != 0 || st.state == 'Z' ||
          st.state == 'X')
        continue;
      if (st.sid != p->pid && st.start >= p->start_ticks)
        esc_remember(p, &st);
    }
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)w.queue[i],
             (int)w.queue[i]);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    uvt__read_pids(fd, walk_add, &w);
    close(fd);
  }
  uvt__free(w.queue);
}

/* One process outside the session that is the task's. */
static void esc_member(uvt__proc_t *p, const uvt__pstat_t *st, pid_t self) {
  int status;

  if (st->state == 'Z' || st->state == 'X') {
    if (st->ppid == self) /* re-parented to us: ours to reap */
      while (waitpid(st->pid, &status, WNOHANG) < 0 && errno == EINTR)
        ;
    return;
  }
  p->pass_live++;
  if (p->pass_sig == 0 && uvt__pstat_dying(st))
    p->pass_dying++;
  if (p->pass_sig != 0)
    send_sig(st->pid, p->pass_sig);
}

static void descent_run(struct uvt__link *list, rows_t *r, pid_t self) {
  struct uvt__link *n;
  size_t i;
  int changed = 1;
  int rounds = 0;

  if (r->n == 0)
    return;
  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    for (i = 0; i < p->esc_n; i++)
      p->esc[i].seen = 0;
  }
  if (r->n > 1)
    qsort(r->v, r->n, sizeof(*r->v), row_cmp);
  /* Remembered ones first, then what descends from any of them. */
  for (i = 0; i < r->n; i++) {
    row_t *w = &r->v[i];
    if (w->owner != NULL)
      continue;
    for (n = list->next; n != list && w->owner == NULL; n = n->next) {
      uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
      if (!p->cg && esc_match(p, &w->st)) {
        w->owner = p;
        w->esc = 1;
      }
    }
  }
  while (changed && rounds++ < 64) {
    changed = 0;
    for (i = 0; i < r->n; i++) {
      row_t *w = &r->v[i];
      row_t *parent;
      if (w->owner != NULL || w->st.state == 'Z' || w->st.state == 'X')
        continue;
      parent = row_find(r, w->st.ppid);
      if (parent == NULL || parent->owner == NULL || parent->owner->cg ||
          parent->st.pid == self)
        continue;
      w->owner = parent->owner;
      w->esc = 1;
      esc_remember(w->owner, &w->st);
      changed = 1;
    }
  }
  for (i = 0; i < r->n; i++)
    if (r->v[i].esc)
      esc_member(r->v[i].owner, &r->v[i].st, self);
  /* Forget what no pass will find again. */
  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    unsigned k = 0;
    for (i = 0; i < p->esc_n; i++)
      if (p->esc[i].seen)
        p->esc[k++] = p->esc[i];
    p->esc_n = k;
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
  int descent = 0;
  rows_t rows = {NULL, 0, 0};

  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    pass_begin(p);
    wanted += !p->session_gone || p->esc_n > 0;
    /* S-11: without a cgroup, what left the session is found by descent. */
    descent += !p->cg && (!p->session_gone || p->esc_n > 0);
  }
  if (!wanted)
    goto cgroups; /* every session known empty: no need to read /proc */
  d = opendir("/proc");
  if (d == NULL)
    return; /* no /proc: only the leader's group was signalled */
  while ((de = readdir(d)) != NULL) {
    uvt__proc_t *owner = NULL;
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    pid = (pid_t)strtol(de->d_name, NULL, 10);
    if (uvt__pstat_read(pid, &st) != 0)
      continue;
    for (n = list->next; n != list; n = n->next) {
      uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
      if (p->pid == st.sid) {
        /* With descent, every process is read before any is signalled:
         * a parent killed in the middle of the scan would leave its
         * children re-parented before they are read. */
        if (!descent)
          pass_member(p, &st, self);
        if (!p->session_gone && st.start >= p->start_ticks)
          owner = p;
      }
    }
    if (descent)
      rows_add(&rows, &st, owner);
  }
  closedir(d);
  if (descent) {
    size_t i;
    for (i = 0; i < rows.n; i++)
      if (rows.v[i].owner != NULL)
        pass_member(rows.v[i].owner, &rows.v[i].st, self);
    descent_run(list, &rows, self);
  }
  uvt__free(rows.v);
cgroups:
  for (n = list->next; n != list; n = n->next) {
    uvt__proc_t *p = uvt__container_of(n, uvt__proc_t, pass_link);
    if (!p->cg)
      continue;
    if (p->pass_sig == SIGKILL)
      uvt__cg_kill(&p->cgroup);
    if (uvt__cg_populated(&p->cgroup))
      uvt__cg_each(&p->cgroup, cg_member, p);
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
    if (!p->cg)
      esc_walk(p); /* S-11: before the leader's group dies */
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
  /* S-11: without a cgroup, what descends from the leader is looked at
   * first: signalled, it would die and leave what it started out of the
   * session re-parented before the pass could see whose it is. */
  if (!p->reaped && !p->cg)
    esc_walk(p);
  *lead = !p->reaped;
  if (*lead && send_sig(-p->pid, sig) != 0 && errno != ESRCH)
    return UVT__PERR(errno);
  if (p->cg && sig == SIGKILL)
    uvt__cg_kill(&p->cgroup);
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

/* Is `pid` (a session leader, our child) a task's leader the loop does
 * not know yet?  The spawner threads list every leader they made (under
 * the mutex) once its spawn is over; while one runs, any could be. */
static int leader_unknown(uvt__procs_t *ps, pid_t pid) {
  size_t i;
  int found;

  uv_mutex_lock(&ps->spawn_mutex);
  found = ps->spawning_now > 0;
  for (i = 0; !found && i < ps->leaders_n; i++)
    found = ps->leaders[i].pid == pid;
  uv_mutex_unlock(&ps->spawn_mutex);
  return found;
}

/* S-11: did a tracked task remember this process (or its session)? */
static int esc_known(uvt__procs_t *ps, const uvt__pstat_t *st) {
  size_t b;
  unsigned i;

  for (b = 0; b < ps->sessions_size; b++) {
    uvt__proc_t *p;
    for (p = ps->sessions[b]; p != NULL; p = p->sid_next)
      for (i = 0; i < p->esc_n; i++)
        if ((p->esc[i].pid == st->pid && p->esc[i].start == st->start) ||
            (p->esc[i].pid == st->sid && st->start >= p->esc[i].start))
          return 1;
  }
  return 0;
}

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
  if (st.pid == st.sid && leader_unknown(ps, child))
    return; /* a leader whose spawn's answer is still on its way */
  p = table_find(ps, st.sid);
  if (p == NULL || p->session_gone || st.start < p->start_ticks ||
      st.pid == st.sid) {
    /* Not a member of a tracked session; one that left it is still ours
     * if it died in a group of the registry's cgroup directory, or was one
     * a task remembered (S-11). */
    if (!uvt__cgroup_had(ps, child) && !esc_known(ps, &st))
      return;
  }
  while (waitpid(child, &status, WNOHANG) < 0 && errno == EINTR)
    ;
}

static void orphan_pid(void *arg, pid_t pid) {
  orphan_check(arg, pid);
}

/* ---- S-11: strays of a host whose children are all the tasks' ---------- */

static int stray_excluded(const uvt__procs_t *ps, pid_t pid) {
  size_t i;
  uvt__proc_t *p = table_find(ps, pid);

  if (p != NULL && !p->reaped)
    return 1; /* a leader: its own path reaps it */
  for (i = 0; i < ps->strays_not_n; i++)
    if (ps->strays_not[i] == pid)
      return 1;
  for (i = 0; i < ps->leaders_n; i++)
    if (ps->leaders[i].pid == pid)
      return 1;
  return 0;
}

/* D-1: is this a detached durable task's keeper?  Forgotten with
 * `drop` (it was reaped: its pid may name another process next). */
static int stray_kept(uvt__procs_t *ps, pid_t pid, int drop) {
  size_t i;

  for (i = 0; i < ps->kept_n; i++)
    if (ps->kept[i] == pid) {
      if (drop)
        ps->kept[i] = ps->kept[--ps->kept_n];
      return 1;
    }
  return 0;
}

/* A zombie child that no task claims: a process that left a task unseen
 * (its parent died before a pass looked) and then exited.  Reaped unless
 * it is a leader (of a spawn whose answer has not reached the loop: none
 * while no spawn runs, and the live set lists every other one). */
static void stray_pid(void *arg, pid_t pid) {
  uvt__procs_t *ps = arg;
  uvt__pstat_t st;
  int status;
  int ok;

  if (uvt__pstat_read(pid, &st) != 0 || (st.state != 'Z' && st.state != 'X'))
    return;
  uv_mutex_lock(&ps->spawn_mutex);
  ok = ps->spawning_now == 0 && !stray_excluded(ps, pid);
  uv_mutex_unlock(&ps->spawn_mutex);
  if (ok) {
    while (waitpid(pid, &status, WNOHANG) < 0 && errno == EINTR)
      ;
    stray_kept(ps, pid, 1);
  }
}

static void stray_kill(void *arg, pid_t pid) {
  uvt__procs_t *ps = arg;
  uvt__pstat_t st;

  if (uvt__pstat_read(pid, &st) != 0)
    return;
  if (stray_excluded(ps, pid))
    return;
  if (st.state == 'Z' || st.state == 'X') {
    int status;
    while (waitpid(pid, &status, WNOHANG) < 0 && errno == EINTR)
      ;
    stray_kept(ps, pid, 1);
    return;
  }
  if (stray_kept(ps, pid, 0))
    return; /* D-1: it outlives us */
  kill(pid, SIGKILL);
  ps->strays_left++;
}

static void each_child(uvt__procs_t *ps, void (*fn)(void *arg, pid_t pid)) {
  char path[sizeof("/proc/self/task//children") + 256];
  DIR *d = opendir("/proc/self/task");
  struct dirent *de;
  int fd;

  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    uvt__read_pids(fd, fn, ps);
    close(fd);
  }
  closedir(d);
}

static void note_child(void *arg, pid_t pid) {
  uvt__procs_t *ps = arg;
  pid_t *nv;

  nv = uvt__realloc(ps->strays_not, (ps->strays_not_n + 1) * sizeof(*nv));
  if (nv == NULL)
    return;
  ps->strays_not = nv;
  ps->strays_not[ps->strays_not_n++] = pid;
}

int uvt__members_strays_on(uvt__procs_t *ps) {
  if (ps->strays)
    return 0;
  ps->strays = 1;
  each_child(ps, note_child);
  return 0;
}

int uvt__members_keep(uvt__procs_t *ps, pid_t pid) {
  pid_t *nv;

  if (!ps->strays || pid <= 0)
    return 0;
  nv = uvt__realloc(ps->kept, (ps->kept_n + 1) * sizeof(*nv));
  if (nv == NULL)
    return UV_ENOMEM;
  ps->kept = nv;
  ps->kept[ps->kept_n++] = pid;
  return 0;
}

void uvt__members_strays_stop(uvt__procs_t *ps) {
  int round;

  if (!ps->strays)
    return;
  /* What a killed stray started is re-parented to us in turn: a few
   * rounds, each a few milliseconds apart, until no stray is left. */
  for (round = 0; round < 50; round++) {
    struct timespec ts = {0, 2000000};
    ps->strays_left = 0;
    each_child(ps, stray_kill);
    if (ps->strays_left == 0)
      break;
    nanosleep(&ts, NULL);
  }
  each_child(ps, stray_pid);
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

  if (ps->strays)
    each_child(ps, stray_pid); /* S-11 */
  if (ps->sessions_count == 0 && ps->cgroot.base == 0)
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
        uvt__cgroot_release(NULL, &p->cgroup);
      p->cg = 0;
      p->sid_next = NULL;
      p->tracked = 0;
      p->procs = NULL;
      p = next;
    }
  }
  uvt__members_strays_stop(ps);
  uvt__free(ps->strays_not);
  ps->strays_not = NULL;
  uvt__free(ps->kept);
  ps->kept = NULL;
  ps->kept_n = 0;
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
