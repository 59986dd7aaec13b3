/* Spawning off the loop thread (P-SPAWN-6).
 *
 * posix_spawn returns once the child has exec'd: hundreds of microseconds,
 * more on a loaded machine, during which the calling thread waits.  So the
 * host's loop never calls it.  uvt_process_start does the checks that can
 * fail (options, cwd, the shell or argv[0] in PATH, pipes and other
 * descriptors) and builds an immutable request on the loop thread
 * (spawn.c), registers the task and returns; the request goes to the
 * registry's spawner threads, and the answer comes back through the
 * context's uv_async_t.
 *
 * The hand-off: a request is fully built before it is queued and is only
 * read by the spawner thread that takes it, which writes the answer fields
 * and queues it back; both queues are under one mutex, which orders every
 * access.  The one field the loop writes while a request is away is its
 * atomic `cancelled` flag (a kill before the child exists: the spawner then
 * does not spawn).  A spawner thread touches no task state, no handle and
 * no allocator of ours, and blocks every signal.
 *
 * How many threads: nproc of them, at most SPAWNERS_MAX, started with the
 * registry's first spawn.  posix_spawn with CLONE_VFORK holds its thread
 * until the child has exec'd, mostly in the kernel (page tables, exec,
 * the dynamic loader of the child), so a second thread on a second core
 * overlaps two spawns; more threads than cores only queue on the CPU.
 * bench-process measures it (--spawners N): see README, Performance.
 *
 * Close: after the last record was dropped, the context stops the
 * threads.  Requests still queued are answered "not spawned" on the loop
 * thread; a spawn in progress finishes and is answered; each thread says
 * it is leaving through the async, and the loop joins them (at once: they
 * have left) before closing the async handle (L-1). */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>

#include "process-internal.h"

/* At most this many spawner threads per registry. */
#define SPAWNERS_MAX 4

unsigned uvt__process_spawners;

/* Under the mutex, after a spawn: its leader joins the live set that
 * uvt_process_stop_all_now() reads (room was reserved by the start). */
static void spawned(uvt__procs_t *ps, const uvt__spawn_t *sp) {
  /* D-1: a durable task's keeper is not one of them: it outlives us. */
  if (sp->err == 0 && !sp->skipped && sp->pid > 0 && !sp->durable &&
      ps->leaders_n < ps->leaders_cap) {
    uvt__leader_t *l = &ps->leaders[ps->leaders_n++];
    l->pid = sp->pid;
    if (sp->cg.mask != 0 && sp->cg_err == 0) {
      memcpy(l->cg_name, sp->cg.name, sizeof(l->cg_name));
      l->cg_mask = sp->cg.mask;
    } else {
      l->cg_name[0] = '\0';
      l->cg_mask = 0;
    }
  }
  if (--ps->spawning_now == 0)
    uv_cond_broadcast(&ps->spawn_idle);
}

/* Make one spawn and queue its answer.  Called with spawn_mutex held;
 * returns with it released (the spawn runs outside it). */
static void spawn_one(uvt__procs_t *ps, uvt__spawn_t *sp) {
  if (ps->spawn_frozen)
    atomic_store(&sp->cancelled, 1); /* uvt_process_stop_all_now() */
  ps->spawning_now++;
  uv_mutex_unlock(&ps->spawn_mutex);
  uvt__spawn_run(sp);
  uv_mutex_lock(&ps->spawn_mutex);
  spawned(ps, sp);
  uvt__list_insert_tail(&ps->spawn_done, &sp->link);
  uv_mutex_unlock(&ps->spawn_mutex);
  uv_async_send(&ps->spawn_async);
}

static void spawner_main(void *arg) {
  uvt__procs_t *ps = arg;
  struct uvt__link *n;
  uvt__spawn_t *sp;
  sigset_t all;

  /* Signals are the loop thread's business (libuv's SIGCHLD handler). */
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  uv_mutex_lock(&ps->spawn_mutex);
  for (;;) {
    while (uvt__list_empty(&ps->spawn_queue) && !ps->spawn_stop)
      uv_cond_wait(&ps->spawn_cond, &ps->spawn_mutex);
    if (ps->spawn_stop)
      break;
    n = uvt__list_pop(&ps->spawn_queue);
    sp = uvt__container_of(n, uvt__spawn_t, link);
    spawn_one(ps, sp);
    uv_mutex_lock(&ps->spawn_mutex);
  }
  ps->spawners_left++;
  uv_mutex_unlock(&ps->spawn_mutex);
  uv_async_send(&ps->spawn_async);
}

/* Answers, on the loop thread. */
static void on_answers(uv_async_t *h) {
  uvt__procs_t *ps = h->data;
  struct uvt__link answers;
  struct uvt__link *n;
  unsigned left;
  unsigned i;

  uvt__list_init(&answers);
  uv_mutex_lock(&ps->spawn_mutex);
  uvt__list_splice(&ps->spawn_done, &answers);
  left = ps->spawners_left;
  uv_mutex_unlock(&ps->spawn_mutex);
  while ((n = uvt__list_pop(&answers)) != NULL) {
    uvt__spawn_t *sp = uvt__container_of(n, uvt__spawn_t, link);
    ps->spawns_out--;
    sp->done(sp);
  }
  if (ps->spawns_out == 0 && !ps->spawn_stop)
    uv_unref((uv_handle_t *)&ps->spawn_async);
  if (ps->spawn_stop && left == ps->spawners && !ps->spawners_joined) {
    for (i = 0; i < ps->spawners; i++)
      uv_thread_join(&ps->spawner[i]);
    ps->spawners_joined = 1;
    ps->check_closed(ps);
  }
}

int uvt__spawner_init(uvt__procs_t *ps) {
  int err;

  uvt__list_init(&ps->spawn_queue);
  uvt__list_init(&ps->spawn_done);
  err = uv_mutex_init(&ps->spawn_mutex);
  if (err != 0)
    return err;
  err = uv_cond_init(&ps->spawn_cond);
  if (err != 0) {
    uv_mutex_destroy(&ps->spawn_mutex);
    return err;
  }
  err = uv_cond_init(&ps->spawn_idle);
  if (err != 0) {
    uv_cond_destroy(&ps->spawn_cond);
    uv_mutex_destroy(&ps->spawn_mutex);
    return err;
  }
  err = uv_async_init(ps->loop, &ps->spawn_async, on_answers);
  if (err != 0) {
    uv_cond_destroy(&ps->spawn_idle);
    uv_cond_destroy(&ps->spawn_cond);
    uv_mutex_destroy(&ps->spawn_mutex);
    return err;
  }
  ps->spawn_async.data = ps;
  uv_unref((uv_handle_t *)&ps->spawn_async);
  ps->spawner_init = 1;
  return 0;
}

/* The threads, with the first spawn.  Fewer than asked is fine; none at
 * all means the spawns run on the loop thread (uvt__spawner_submit). */
unsigned uvt__spawner_count(void) {
  unsigned want = uvt__process_spawners;
  if (want == 0) {
    want = uv_available_parallelism();
    if (want > SPAWNERS_MAX)
      want = SPAWNERS_MAX;
  }
  if (want > SPAWNERS_MAX)
    want = SPAWNERS_MAX;
  return want;
}

static void spawners_start(uvt__procs_t *ps) {
  unsigned want = uvt__spawner_count();
  unsigned i;

  ps->spawners_tried = 1;
  for (i = 0; i < want; i++) {
    if (uv_thread_create(&ps->spawner[i], spawner_main, ps) != 0)
      break;
    ps->spawners++;
  }
}

void uvt__spawner_submit(uvt__procs_t *ps, uvt__spawn_t *sp,
                         void (*done)(uvt__spawn_t *sp)) {
  sp->done = done;
  if (!ps->spawners_tried)
    spawners_start(ps);
  ps->spawns_out++;
  /* Answers keep the loop alive while a spawn is out. */
  uv_ref((uv_handle_t *)&ps->spawn_async);
  if (ps->spawners == 0) {
    /* No thread could be started: spawn here, answer as usual. */
    uv_mutex_lock(&ps->spawn_mutex);
    spawn_one(ps, sp);
    return;
  }
  uv_mutex_lock(&ps->spawn_mutex);
  uvt__list_insert_tail(&ps->spawn_queue, &sp->link);
  uv_cond_signal(&ps->spawn_cond);
  uv_mutex_unlock(&ps->spawn_mutex);
}

int uvt__spawner_reserve(uvt__procs_t *ps) {
  uvt__leader_t *nl;
  size_t want;
  size_t cap;

  /* Room for every leader alive and every spawn out, so a thread never
   * allocates: it adds within what the loop reserved. */
  uv_mutex_lock(&ps->spawn_mutex);
  want = ps->leaders_n + ps->spawns_out + 1;
  if (want <= ps->leaders_cap) {
    uv_mutex_unlock(&ps->spawn_mutex);
    return 0;
  }
  cap = ps->leaders_cap ? ps->leaders_cap * 2 : 64;
  while (cap < want)
    cap *= 2;
  nl = uvt__realloc(ps->leaders, cap * sizeof(*nl));
  if (nl == NULL) {
    uv_mutex_unlock(&ps->spawn_mutex);
    return UV_ENOMEM;
  }
  ps->leaders = nl;
  ps->leaders_cap = cap;
  uv_mutex_unlock(&ps->spawn_mutex);
  return 0;
}

void uvt__spawner_reaped(uvt__procs_t *ps, pid_t pid) {
  size_t i;

  if (ps == NULL || !ps->spawner_init)
    return;
  uv_mutex_lock(&ps->spawn_mutex);
  for (i = 0; i < ps->leaders_n; i++) {
    if (ps->leaders[i].pid == pid) {
      ps->leaders[i] = ps->leaders[--ps->leaders_n];
      break;
    }
  }
  uv_mutex_unlock(&ps->spawn_mutex);
}

int uvt__spawner_stop(uvt__procs_t *ps) {
  struct uvt__link queued;
  struct uvt__link *n;

  if (!ps->spawner_init)
    return 0;
  if (!ps->spawn_stop) {
    uvt__list_init(&queued);
    uv_mutex_lock(&ps->spawn_mutex);
    ps->spawn_stop = 1;
    uvt__list_splice(&ps->spawn_queue, &queued);
    uv_cond_broadcast(&ps->spawn_cond);
    uv_mutex_unlock(&ps->spawn_mutex);
    /* Never taken by a thread: answered here, not spawned. */
    while ((n = uvt__list_pop(&queued)) != NULL) {
      uvt__spawn_t *sp = uvt__container_of(n, uvt__spawn_t, link);
      atomic_store(&sp->cancelled, 1);
      uvt__spawn_run(sp);
      ps->spawns_out--;
      sp->done(sp);
    }
    if (ps->spawners == 0)
      ps->spawners_joined = 1;
    else
      uv_ref((uv_handle_t *)&ps->spawn_async);
  }
  return ps->spawners_joined && ps->spawns_out == 0 ? 0 : -1;
}

unsigned uvt__spawner_close(uvt__procs_t *ps, uv_close_cb on_closed) {
  if (!ps->spawner_init)
    return 0;
  ps->spawner_init = 0;
  uvt__stopall_remove(ps);
  uv_cond_destroy(&ps->spawn_idle);
  uv_cond_destroy(&ps->spawn_cond);
  uv_mutex_destroy(&ps->spawn_mutex);
  uvt__free(ps->leaders);
  ps->leaders = NULL;
  uv_close((uv_handle_t *)&ps->spawn_async, on_closed);
  return 1;
}
