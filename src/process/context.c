/* The process producer's per-registry context (an extension of the
 * registry, uvt-internal.h): what all tasks of one registry share: the
 * spawner threads (spawner.c), the cached environment (env.c), the one
 * SIGCHLD watch (reap.c), the table of sessions and the batched passes
 * over /proc (members.c).
 *
 * Created by the first task's start, it lives until registry close, which
 * shuts it down after every record was dropped: it closes its handles and
 * then tells the registry it is done, so its handles count towards the
 * registry's quiescence (L-1).  A task that outlives its record (one that
 * disposal force-failed, or whose spawn was answered only after that) is
 * waited for: the context ends after the last task state it serves is
 * freed, so no handle of a task is left on the loop and nothing of the
 * registry is read after the close callback (R-CLOSE-2).  That wait is
 * bounded by the task's own stop: SIGKILL at the force-fail, and at most
 * grace_ms + 10 s for SIGKILL to be answered (process.c) and drain_ms for
 * its pipes; a spawn still held by a stopped helper or spawner thread is
 * waited for as before. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "process-internal.h"

/* The context's key among the registry's extensions. */
static const char procs_key = 'p';

/* Drop one hold on the closing context; the last one ends it. */
static void procs_unhold(uvt__procs_t *ps) {
  uvt_context_done_cb done;

  if (--ps->handles_closing > 0)
    return;
  done = ps->done;
  if (ps->dstate_free != NULL)
    ps->dstate_free(ps); /* D-1 */
  uvt__free(ps->sessions);
  uvt__free(ps->landing);
  if (done != NULL)
    done(&ps->ext);
  uvt__free(ps);
}

static void procs_handle_closed(uv_handle_t *h) {
  procs_unhold(h->data);
}

void uvt__procs_maybe_closed(uvt__procs_t *ps) {
  int n;

  if (!ps->closing || ps->handles_closing > 0 || ps->close_checking)
    return;
  /* The answers given here may free task states, which call again. */
  ps->close_checking = 1;
  n = uvt__spawner_stop(ps);
  ps->close_checking = 0;
  if (n != 0)
    return; /* spawns still out: the threads' answers call again */
  if (ps->procs_live > 0)
    return; /* a task outlived its record: its free calls again */
  /* P-SPAWN-7: no request is out any more. */
  uvt__helper_stop(ps->helper);
  ps->helper = NULL;
  ps->helper_on = 0;
  n = uvt__reap_close(ps, procs_handle_closed);
  if (n < 0)
    return; /* a leader's reap still needs the SIGCHLD watch */
  n += (int)uvt__members_close(ps, procs_handle_closed);
  n += (int)uvt__notify_close(ps, procs_handle_closed);
  n += (int)uvt__trim_close(ps, procs_handle_closed);
  n += (int)uvt__spawner_close(ps, procs_handle_closed);
  if (ps->dstate_close != NULL)
    n += (int)ps->dstate_close(ps, procs_handle_closed); /* D-1 */
  uvt__env_cache_free(&ps->envc);
  /* Held while the handles are asked to close, so that a context with no
   * handle ends here and one with handles ends in their last callback. */
  ps->handles_closing = (unsigned)n + 1;
  procs_unhold(ps);
}

static void procs_close(uvt_context_t *ext, uvt_context_done_cb done) {
  uvt__procs_t *ps = uvt__container_of(ext, uvt__procs_t, ext);

  ps->closing = 1;
  ps->done = done;
  uvt__procs_maybe_closed(ps);
}

/* P-REAP-1: a host that is a child subreaper or pid 1 inherits the
 * members of our sessions whose parents died; the SIGCHLD watch reaps
 * them.  A host may become one at any time: asked again by a start at
 * most once per loop millisecond (two system calls off most starts). */
static int host_reaps_orphans(uvt__procs_t *ps) {
  int v = 0;
  uint64_t now = uv_now(ps->loop);
  if (ps->subreaper_checked && now == ps->subreaper_asked)
    return 0;
  ps->subreaper_checked = 1;
  ps->subreaper_asked = now;
  if (getpid() == 1)
    return 1;
  return prctl(PR_GET_CHILD_SUBREAPER, &v, 0, 0, 0) == 0 && v != 0;
}

int uvt__procs_get(uvt_registry_t *reg, uvt__procs_t **out) {
  uvt_context_t *e = uvt_context_find(reg, &procs_key);
  uvt__procs_t *ps;
  int err;

  if (e != NULL) {
    ps = uvt__container_of(e, uvt__procs_t, ext);
    *out = ps;
    if (!ps->subreaper && host_reaps_orphans(ps)) {
      ps->subreaper = 1;
      return uvt__reap_start(ps);
    }
    return 0;
  }
  ps = uvt__calloc(1, sizeof(*ps));
  if (ps == NULL)
    return UV_ENOMEM;
  ps->reg = reg;
  ps->loop = uvt_registry_loop(reg);
  ps->owner_fd = -1;
  {
    int h;
    for (h = 0; h < UVT__CG_N; h++)
      ps->cgroot.dir[h] = ps->cgroot.shared[h] = -1;
  }
  uvt__list_init(&ps->unreaped);
  uvt__list_init(&ps->notifying);
  ps->check_closed = uvt__procs_maybe_closed;
  ps->ext.key = &procs_key;
  ps->ext.close = procs_close;
  err = uvt__members_init(ps);
  if (err == 0) {
    err = uvt__spawner_init(ps);
    if (err != 0) {
      uvt__free(ps->sessions);
      if (ps->owner_fd >= 0)
        close(ps->owner_fd);
    }
  }
  if (err != 0) {
    uvt__free(ps);
    return err;
  }
  err = uvt_context_add(reg, &ps->ext);
  if (err == 0)
    uvt__stopall_add(ps);
  if (err != 0) {
    /* The registry began closing inside this start: undo through the
     * async handle's close. */
    ps->done = NULL;
    if (ps->owner_fd >= 0)
      close(ps->owner_fd);
    uv_cond_destroy(&ps->spawn_idle);
    uv_cond_destroy(&ps->spawn_cond);
    uv_mutex_destroy(&ps->spawn_mutex);
    ps->handles_closing = 1;
    uv_close((uv_handle_t *)&ps->spawn_async, procs_handle_closed);
    return err;
  }
  *out = ps;
  if (uvt__process_spawn_helper_default &&
      uvt__helper_start(uvt__spawner_count(), &ps->helper) == 0)
    ps->helper_on = 1;
  if (host_reaps_orphans(ps)) {
    ps->subreaper = 1;
    return uvt__reap_start(ps);
  }
  return 0;
}

/* P-KILL-5 (cgroup.c does the work): the registry's cgroup directory. */
int uvt_process_cgroups(uvt_registry_t *reg, const char *parent_dir) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__procs_t *ps;
  int err;

  if (reg == NULL)
    return UV_EINVAL;
  err = uvt__procs_get(reg, &ps);
  if (err != 0)
    return err;
  return uvt__cgroup_open(ps, parent_dir);
}

/* S-11 (members.c does the work): the host's other children are its
 * tasks' orphans. */
int uvt_process_orphans(uvt_registry_t *reg) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__procs_t *ps;
  int err;

  if (reg == NULL)
    return UV_EINVAL;
  err = uvt__procs_get(reg, &ps);
  if (err != 0)
    return err;
  err = uvt__members_strays_on(ps);
  if (err == 0 && !ps->subreaper && host_reaps_orphans(ps)) {
    ps->subreaper = 1;
    err = uvt__reap_start(ps);
  }
  return err;
}

/* P-SPAWN-7 (spawnhelper.c does the work): the spawn helper on or off. */
int uvt_process_spawn_helper(uvt_registry_t *reg, int on) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__procs_t *ps;
  int err;

  if (reg == NULL)
    return UV_EINVAL;
  err = uvt__procs_get(reg, &ps);
  if (err != 0)
    return err;
  if (!on) {
    /* Requests already out keep it; it ends at registry close. */
    ps->helper_on = 0;
    return 0;
  }
  if (ps->helper == NULL) {
    err = uvt__helper_start(uvt__spawner_count(), &ps->helper);
    if (err != 0)
      return err;
  }
  if (!uvt__helper_alive(ps->helper))
    return UV_ENOTSUP; /* they died, or their clone was refused */
  ps->helper_on = 1;
  return 0;
}
