/* Stopping every process task of the process at once, without a loop
 * (uvt_process_stop_all_now()): for hosts that end the process from a
 * path where no registry gets to close (Node's process.exit(), an
 * uncaught exception, a second shutdown signal).
 *
 * Every registry's context is on one process-wide list.  Each context
 * keeps, under its spawn mutex, the set of its live leaders: a spawner
 * thread adds a leader right after its spawn (in room the start reserved,
 * so no thread allocates), the loop removes it when it reaps the leader.
 * A leader in the set is our unreaped child, so its session and group
 * numbers cannot have been reused: signalling them is safe from any
 * thread.  Stopping freezes each context first (its threads spawn nothing
 * more), waits for a spawn in progress to finish so that its child is in
 * the set, then sends SIGKILL to every session: the leader's group at
 * once, the session's other groups from one pass over /proc, and each
 * task's cgroup through cgroup.kill. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "process-internal.h"

static uv_once_t once = UV_ONCE_INIT;
static uv_mutex_t contexts_mutex;
static uvt__procs_t *contexts;

static void init_once(void) {
  if (uv_mutex_init(&contexts_mutex) != 0)
    abort();
}

void uvt__stopall_add(uvt__procs_t *ps) {
  uv_once(&once, init_once);
  uv_mutex_lock(&contexts_mutex);
  ps->stopall_next = contexts;
  contexts = ps;
  uv_mutex_unlock(&contexts_mutex);
}

void uvt__stopall_remove(uvt__procs_t *ps) {
  uvt__procs_t **pp;

  uv_once(&once, init_once);
  uv_mutex_lock(&contexts_mutex);
  for (pp = &contexts; *pp != NULL; pp = &(*pp)->stopall_next) {
    if (*pp == ps) {
      *pp = ps->stopall_next;
      break;
    }
  }
  ps->stopall_next = NULL;
  uv_mutex_unlock(&contexts_mutex);
}

/* Is `sid` one of this context's live leaders?  Under its mutex. */
static int live_session(const uvt__procs_t *ps, pid_t sid) {
  size_t i;
  for (i = 0; i < ps->leaders_n; i++)
    if (ps->leaders[i].pid == sid)
      return 1;
  return 0;
}

/* Under the context's mutex, its threads idle: SIGKILL to every session. */
static int stop_context(uvt__procs_t *ps) {
  DIR *d;
  struct dirent *de;
  uvt__pstat_t st;
  size_t i;

  for (i = 0; i < ps->leaders_n; i++) {
    kill(-ps->leaders[i].pid, SIGKILL);
    if (ps->leaders[i].cg_mask != 0) {
      /* Its cgroup: cgroup.kill in v2, each listed pid in v1. */
      uvt__cg_t g;
      int h;
      uvt__cg_init(&g);
      for (h = 0; h < UVT__CG_N; h++)
        if ((ps->leaders[i].cg_mask & UVT__CG_BIT(h)) &&
            ps->cgroot.shared[h] >= 0) {
          g.dir[h] = ps->cgroot.shared[h];
          g.mask |= UVT__CG_BIT(h);
        }
      memcpy(g.name, ps->leaders[i].cg_name, sizeof(g.name));
      if (g.mask != 0)
        uvt__cg_kill(&g);
    }
  }
  if (ps->leaders_n == 0)
    return 0;
  /* The sessions' other groups (`set -m` jobs). */
  d = opendir("/proc");
  if (d != NULL) {
    while ((de = readdir(d)) != NULL) {
      pid_t pid;
      if (de->d_name[0] < '1' || de->d_name[0] > '9')
        continue;
      pid = (pid_t)strtol(de->d_name, NULL, 10);
      if (uvt__pstat_read(pid, &st) == 0 && st.pgrp != st.sid &&
          live_session(ps, st.sid))
        kill(-st.pgrp, SIGKILL);
    }
    closedir(d);
  }
  return (int)ps->leaders_n;
}

int uvt_process_stop_all_now(void) {
  uvt__procs_t *ps;
  int n = 0;

  uv_once(&once, init_once);
  uv_mutex_lock(&contexts_mutex);
  for (ps = contexts; ps != NULL; ps = ps->stopall_next) {
    uv_mutex_lock(&ps->spawn_mutex);
    ps->spawn_frozen = 1;
    /* A spawn in progress finishes (posix_spawn returns once the child
     * has exec'd); its child is then in the set. */
    while (ps->spawning_now > 0)
      uv_cond_wait(&ps->spawn_idle, &ps->spawn_mutex);
    n += stop_context(ps);
    uv_mutex_unlock(&ps->spawn_mutex);
  }
  uv_mutex_unlock(&contexts_mutex);
  return n;
}
