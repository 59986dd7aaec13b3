/* The thread producer (contract §4): completion, cancellation, kill, settle
 * ordering, coalesced completions (C-16), kill racing settlement (C-17),
 * force-fail with a late settle (R-DONE-2) and loop-thread callbacks (L-3). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test-util.h"
#include "uvtasks/thread.h"

/* Contexts alive now (src/thread/thread.c). */
long uvt__thread_live_contexts(void);

/* Wait, bounded, until every thread context is freed (abandoned threads
 * free their own when their function returns). */
static void await_contexts_freed(void) {
  int i;
  for (i = 0; i < 5000 && uvt__thread_live_contexts() != 0; i++)
    uv_sleep(1);
  assert_int_equal(uvt__thread_live_contexts(), 0);
}

/* Recorders ------------------------------------------------------------ */

#define MAX_REC 600

typedef struct {
  int calls;
  char ids[MAX_REC][UVT_ID_MAX];
  uvt_status_t status[MAX_REC];
  int reported[MAX_REC];
  int thread_gone[MAX_REC];
  int off_loop; /* calls that ran off the loop thread */
  uv_thread_t loop_thread;
  int order; /* sequence number of the last call */
  int *seq;  /* shared sequence counter */
} rec_t;

static atomic_int threads_exited;
static pthread_key_t exit_key;

static void exit_destructor(void *p) {
  (void)p;
  atomic_fetch_add(&threads_exited, 1);
}

/* Mark the calling thread so its exit is counted (after its function
 * returned and its TLS destructors ran, i.e. just before a join returns). */
static void count_exit(void) {
  pthread_setspecific(exit_key, (void *)1);
}

static void rec_listener(uvt_listener_t *l, const uvt_snapshot_t *snap,
                         uvt_agent_t *owner) {
  rec_t *r = l->data;
  uv_thread_t self = uv_thread_self();
  (void)owner;
  if (!uv_thread_equal(&self, &r->loop_thread))
    r->off_loop++;
  if (r->calls < MAX_REC) {
    snprintf(r->ids[r->calls], UVT_ID_MAX, "%s", snap->id);
    r->status[r->calls] = snap->status;
    r->reported[r->calls] = snap->reported;
    r->thread_gone[r->calls] = atomic_load(&threads_exited);
  }
  r->calls++;
  if (r->seq != NULL)
    r->order = ++*r->seq;
}

typedef struct {
  uvt_wait_t req;
  int calls;
  int status;
  uvt_snapshot_t snap;
  int off_loop;
  uv_thread_t loop_thread;
  int order;
  int *seq;
} waiter_t;

static void waiter_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  waiter_t *w = req->data;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &w->loop_thread))
    w->off_loop++;
  w->calls++;
  w->status = status;
  if (snap != NULL)
    uvt_snapshot_copy(&w->snap, snap);
  if (w->seq != NULL)
    w->order = ++*w->seq;
}

static void waiter_init(waiter_t *w) {
  memset(w, 0, sizeof(*w));
  w->req.data = w;
  w->loop_thread = uv_thread_self();
}

static int waiter_done(void *arg) {
  return ((waiter_t *)arg)->calls > 0;
}

/* Thread functions ----------------------------------------------------- */

typedef struct {
  uv_sem_t gate; /* the function blocks on it when `gated` */
  int gated;
  const char *detail;
  const char *output;
  uvt_status_t status;
  atomic_int saw_cancel;
  atomic_int returned;
} job_t;

static void job_init(job_t *j) {
  memset(j, 0, sizeof(*j));
  assert_int_equal(uv_sem_init(&j->gate, 0), 0);
  j->status = UVT_COMPLETED;
}

static void job_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  job_t *j = arg;
  count_exit();
  if (j->gated)
    uv_sem_wait(&j->gate);
  out->status = j->status;
  if (j->detail != NULL)
    uvt_thread_set_detail(ctx, out, j->detail);
  if (j->output != NULL) {
    /* Two appends: the copy grows. */
    size_t half = strlen(j->output) / 2;
    uvt_thread_append_output(ctx, out, j->output, half);
    uvt_thread_append_output(ctx, out, j->output + half,
                             strlen(j->output) - half);
  }
  atomic_store(&j->returned, 1);
}

/* Runs until cancelled; settles killed. */
static void until_cancel_fn(uvt_thread_ctx_t *ctx, void *arg,
                            uvt_outcome_t *out) {
  job_t *j = arg;
  count_exit();
  while (!uvt_thread_sleep(ctx, 60000))
    ;
  atomic_store(&j->saw_cancel, uvt_thread_cancelled(ctx));
  out->status = UVT_KILLED;
  out->detail = "cancelled";
}

static void setup_once(void) {
  static int done;
  if (!done) {
    assert_int_equal(pthread_key_create(&exit_key, exit_destructor), 0);
    done = 1;
  }
}

/* Tests ---------------------------------------------------------------- */

/* §4, R-READ-2, R-START-4: a thread task completes with the outcome its
 * function filled in; reads are empty while live, then the whole output on
 * every read. */
static void test_thread_completes(void **state) {
  fixture_t f;
  job_t j;
  waiter_t w;
  uvt_read_t rd;
  uvt_snapshot_t snap;
  uvt_thread_options_t o;
  char id[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  job_init(&j);
  j.gated = 1;
  j.detail = "answer: 42";
  j.output = "hello from a thread";
  uvt_thread_options_init(&o);
  o.label = "compute";
  assert_int_equal(uvt_thread_start(f.reg, &o, job_fn, &j, id), 0);
  assert_string_equal(id, "thread-1");

  assert_int_equal(uvt_get(f.reg, id, NULL, &snap), 0);
  assert_string_equal(snap.kind, "thread");
  assert_string_equal(snap.label, "compute");
  assert_int_equal(snap.status, UVT_RUNNING);
  uvt_snapshot_cleanup(&snap);

  assert_int_equal(uvt_read(f.reg, id, NULL, &rd), 0);
  assert_int_equal(rd.len, 0);
  assert_int_equal(rd.snapshot.reported, 0);
  uvt_read_cleanup(&rd);

  waiter_init(&w);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 10000, NULL, waiter_cb), 0);
  uv_sem_post(&j.gate);
  fixture_run_until(&f, waiter_done, &w);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_COMPLETED);
  assert_string_equal(w.snap.detail, "answer: 42");
  assert_int_equal(w.snap.reported, 1);
  assert_true(w.snap.finished_at_ms > 0);
  uvt_snapshot_cleanup(&w.snap);

  /* Final-output kind: the same output on every read, not consumed. */
  assert_int_equal(uvt_read(f.reg, id, NULL, &rd), 0);
  assert_int_equal(rd.len, strlen("hello from a thread"));
  assert_string_equal(rd.text, "hello from a thread");
  uvt_read_cleanup(&rd);
  assert_int_equal(uvt_read(f.reg, id, NULL, &rd), 0);
  assert_string_equal(rd.text, "hello from a thread");
  uvt_read_cleanup(&rd);

  fixture_close(&f);
  uv_sem_destroy(&j.gate);
  await_contexts_freed();
}

/* §4, R-KILL-2, R-KILL-3, R-KILL-4: kill sets the cancellation flag the
 * function observes; the task settles killed with the first reason kept. */
static void test_thread_kill(void **state) {
  fixture_t f;
  job_t j;
  waiter_t w;
  uvt_kill_result_t kr;
  uvt_snapshot_t snap;
  char id[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  job_init(&j);
  assert_int_equal(uvt_thread_start(f.reg, NULL, until_cancel_fn, &j, id), 0);

  assert_int_equal(uvt_kill(f.reg, id, NULL, "enough", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(uvt_get(f.reg, id, NULL, &snap), 0);
  /* The settlement is applied on the loop, never inside the kill. */
  assert_int_equal(snap.status, UVT_STOPPING);
  assert_int_equal(snap.reported, 1);
  assert_string_equal(snap.kill_reason, "enough");
  uvt_snapshot_cleanup(&snap);

  /* A repeated kill of a stopping task cancels again (R-KILL-3). */
  assert_int_equal(uvt_kill(f.reg, id, NULL, "again", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);

  waiter_init(&w);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 10000, NULL, waiter_cb), 0);
  fixture_run_until(&f, waiter_done, &w);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_string_equal(w.snap.detail, "cancelled");
  assert_string_equal(w.snap.kill_reason, "enough");
  uvt_snapshot_cleanup(&w.snap);
  assert_int_equal(atomic_load(&j.saw_cancel), 1);

  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);

  fixture_close(&f);
  await_contexts_freed();
}

/* R-DONE-3, contract §4: the thread is joined before any listener or wait sees
 * the outcome; the waiter counted at settlement marks the task reported
 * before the listener runs; listeners run before wait callbacks. */
static void test_thread_settle_order(void **state) {
  fixture_t f;
  job_t j;
  waiter_t w;
  rec_t *r = calloc(1, sizeof(*r));
  uvt_listener_t l = {0};
  int seq = 0;
  int exited_before;
  char id[UVT_ID_MAX];
  (void)state;

  setup_once();
  fixture_init(&f, NULL);
  r->loop_thread = uv_thread_self();
  r->seq = &seq;
  l.data = r;
  assert_int_equal(uvt_listener_start(f.reg, &l, rec_listener), 0);

  job_init(&j);
  j.gated = 1;
  exited_before = atomic_load(&threads_exited);
  assert_int_equal(uvt_thread_start(f.reg, NULL, job_fn, &j, id), 0);
  waiter_init(&w);
  w.seq = &seq;
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 10000, NULL, waiter_cb), 0);
  uv_sem_post(&j.gate);
  fixture_run_until(&f, waiter_done, &w);

  assert_int_equal(r->calls, 1);
  assert_string_equal(r->ids[0], id);
  assert_int_equal(r->status[0], UVT_COMPLETED);
  assert_int_equal(r->reported[0], 1);
  /* The thread had exited (been joined) when the listener ran. */
  assert_int_equal(r->thread_gone[0], exited_before + 1);
  assert_int_equal(w.calls, 1);
  assert_true(r->order < w.order);
  uvt_snapshot_cleanup(&w.snap);

  fixture_close(&f);
  uv_sem_destroy(&j.gate);
  free(r);
  await_contexts_freed();
}

/* C-16: 200 thread-settled tasks released together by a barrier: all 200
 * terminal, the listener called 200 times, once per task. */
typedef struct {
  uv_barrier_t *barrier;
} barrier_job_t;

static void barrier_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  barrier_job_t *b = arg;
  (void)ctx;
  uv_barrier_wait(b->barrier);
  out->status = UVT_COMPLETED;
  out->detail = "released";
}

static int listener_at(void *arg) {
  rec_t *r = arg;
  return r->calls >= r->order;
}

static void test_thread_c16_barrier(void **state) {
  enum { N = 200 };
  fixture_t f;
  uv_barrier_t barrier;
  barrier_job_t bj;
  rec_t *r = calloc(1, sizeof(*r));
  uvt_listener_t l = {0};
  uvt_thread_options_t o;
  uvt_snapshot_t *list;
  size_t count, i;
  int k;
  (void)state;

  fixture_init(&f, NULL);
  r->loop_thread = uv_thread_self();
  l.data = r;
  assert_int_equal(uvt_listener_start(f.reg, &l, rec_listener), 0);
  assert_int_equal(uv_barrier_init(&barrier, N + 1), 0);
  bj.barrier = &barrier;
  uvt_thread_options_init(&o);
  o.kind = "worker";
  o.stack_size = 256 * 1024;
  for (k = 0; k < N; k++)
    assert_int_equal(uvt_thread_start(f.reg, &o, barrier_fn, &bj, NULL), 0);
  /* Every thread is at the barrier: release them together. */
  uv_barrier_wait(&barrier);

  r->order = N; /* listener_at's target */
  fixture_run_until(&f, listener_at, r);
  assert_int_equal(r->calls, N);
  assert_int_equal(r->off_loop, 0);
  for (k = 0; k < N; k++) {
    int m;
    assert_int_equal(r->status[k], UVT_COMPLETED);
    for (m = 0; m < k; m++)
      assert_string_not_equal(r->ids[m], r->ids[k]);
  }
  assert_int_equal(uvt_list(f.reg, NULL, &list, &count), 0);
  assert_int_equal(count, N);
  for (i = 0; i < count; i++)
    assert_int_equal(list[i].status, UVT_COMPLETED);
  uvt_snapshots_free(list, count);

  fixture_close(&f);
  uv_barrier_destroy(&barrier);
  free(r);
  await_contexts_freed();
}

/* C-17: 500 tasks whose threads settle after a random 0-2 ms while the loop
 * kills them after 1 ms; the registry is closed from a listener half way.
 * Every task is terminal exactly once: each wait gets one terminal snapshot,
 * the listener sees no task twice. */
#define C17_N 500

typedef struct {
  long delay_us;
} delay_job_t;

static void delay_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  delay_job_t *d = arg;
  struct timespec ts;
  ts.tv_sec = 0;
  ts.tv_nsec = d->delay_us * 1000;
  nanosleep(&ts, NULL);
  out->status = uvt_thread_cancelled(ctx) ? UVT_KILLED : UVT_COMPLETED;
}

typedef struct {
  fixture_t *f;
  char ids[C17_N][UVT_ID_MAX];
  int kill_errors;
  int closes;
  rec_t rec;
} c17_t;

static void c17_kill_all(uv_timer_t *timer) {
  c17_t *c = timer->data;
  int k;
  for (k = 0; k < C17_N && c->f->reg != NULL; k++) {
    uvt_kill_result_t kr;
    int err = uvt_kill(c->f->reg, c->ids[k], NULL, "race", &kr);
    if (err != 0)
      c->kill_errors++;
  }
  uv_close((uv_handle_t *)timer, NULL);
}

static void c17_closed(void *data) {
  c17_t *c = data;
  c->closes++;
  c->f->closed++;
}

static void c17_listener(uvt_listener_t *l, const uvt_snapshot_t *snap,
                         uvt_agent_t *owner) {
  c17_t *c = l->data;
  /* Record through the shared recorder, then close half way (R-CLOSE-3). */
  uvt_listener_t fake = *l;
  fake.data = &c->rec;
  rec_listener(&fake, snap, owner);
  if (c->rec.calls == C17_N / 2) {
    if (uvt_registry_close(c->f->reg, c17_closed, c) == 0)
      c->f->reg = NULL;
  }
}

static void test_thread_c17_kill_race(void **state) {
  fixture_t f;
  c17_t *c = calloc(1, sizeof(*c));
  waiter_t *w = calloc(C17_N, sizeof(*w));
  delay_job_t *d = calloc(C17_N, sizeof(*d));
  uvt_listener_t l = {0};
  uv_timer_t timer;
  int k, m;
  (void)state;

  srand((unsigned)uv_hrtime());
  fixture_init(&f, NULL);
  c->f = &f;
  c->rec.loop_thread = uv_thread_self();
  l.data = c;
  assert_int_equal(uvt_listener_start(f.reg, &l, c17_listener), 0);
  for (k = 0; k < C17_N; k++) {
    d[k].delay_us = rand() % 2001;
    assert_int_equal(uvt_thread_start(f.reg, NULL, delay_fn, &d[k], c->ids[k]),
                     0);
    waiter_init(&w[k]);
    assert_int_equal(
        uvt_wait(f.reg, &w[k].req, c->ids[k], 60000, NULL, waiter_cb), 0);
  }
  assert_int_equal(uv_timer_init(&f.loop, &timer), 0);
  timer.data = c;
  assert_int_equal(uv_timer_start(&timer, c17_kill_all, 1, 0), 0);

  /* Run until the listener closed the registry and everything ended. */
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c->closes, 1);
  assert_int_equal(c->kill_errors, 0);
  assert_int_equal(c->rec.off_loop, 0);
  assert_true(c->rec.calls >= C17_N / 2 && c->rec.calls <= C17_N);
  for (k = 0; k < c->rec.calls; k++)
    for (m = 0; m < k; m++)
      assert_string_not_equal(c->rec.ids[m], c->rec.ids[k]);
  for (k = 0; k < C17_N; k++) {
    assert_int_equal(w[k].calls, 1);
    assert_int_equal(w[k].off_loop, 0);
    assert_int_equal(w[k].status, 0);
    assert_true(w[k].snap.status == UVT_COMPLETED ||
                w[k].snap.status == UVT_KILLED);
    assert_int_equal(w[k].snap.reported, 1);
    uvt_snapshot_cleanup(&w[k].snap);
  }
  /* The listener closed the registry: fixture_close only checks the loop. */
  fixture_close(&f);
  free(w);
  free(d);
  free(c);
  await_contexts_freed();
}

/* R-AGENT-4, R-DONE-2: a thread that ignores cancellation is force-failed at
 * registry close after teardown_grace_ms; its late settle, after the
 * registry is gone, is harmless, and the thread frees its own context. */
static void test_thread_force_fail_late_settle(void **state) {
  fixture_t f;
  uvt_options_t o;
  job_t j;
  waiter_t w;
  char id[UVT_ID_MAX];
  (void)state;

  uvt_options_init(&o);
  o.teardown_grace_ms = 50;
  fixture_init(&f, &o);
  job_init(&j);
  j.gated = 1; /* ignores the cancel: only the gate lets it go */
  assert_int_equal(uvt_thread_start(f.reg, NULL, job_fn, &j, id), 0);
  waiter_init(&w);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, waiter_cb), 0);

  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_FAILED);
  assert_non_null(strstr(w.snap.detail, "work may be orphaned"));
  assert_int_equal(f.warnings >= 1, 1);
  uvt_snapshot_cleanup(&w.snap);
  assert_int_equal(atomic_load(&j.returned), 0);
  assert_int_equal(uvt__thread_live_contexts(), 1);

  /* The registry is freed; the thread now settles late. */
  uv_sem_post(&j.gate);
  await_contexts_freed();
  assert_int_equal(atomic_load(&j.returned), 1);
  uv_sem_destroy(&j.gate);
}

/* R-AGENT-1, R-AGENT-4, R-DONE-2: agent disposal cancels its thread tasks
 * ("owner disposed"); a cooperative one settles killed and is joined, one
 * that ignores the cancel is force-failed after the grace; its late settle
 * gives no second notice. */
typedef struct {
  int calls;
} dispose_rec_t;

static void dispose_cb(uvt_agent_t *a) {
  dispose_rec_t *d = a->data;
  d->calls++;
}

static int dispose_done(void *arg) {
  return ((dispose_rec_t *)arg)->calls > 0;
}

static void test_thread_agent_dispose(void **state) {
  fixture_t f;
  uvt_options_t o;
  uvt_agent_t a = {0};
  dispose_rec_t dr = {0};
  job_t coop, stubborn, after;
  rec_t *r = calloc(1, sizeof(*r));
  uvt_listener_t l = {0};
  uvt_thread_options_t to;
  waiter_t w;
  uvt_snapshot_t snap;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX], id3[UVT_ID_MAX];
  (void)state;

  uvt_options_init(&o);
  o.teardown_grace_ms = 50;
  fixture_init(&f, &o);
  r->loop_thread = uv_thread_self();
  l.data = r;
  assert_int_equal(uvt_listener_start(f.reg, &l, rec_listener), 0);
  a.data = &dr;
  assert_int_equal(uvt_agent_register(f.reg, &a, "agent-a", "session-1"), 0);
  uvt_thread_options_init(&to);
  to.owner = &a;
  job_init(&coop);
  job_init(&stubborn);
  stubborn.gated = 1;
  assert_int_equal(uvt_thread_start(f.reg, &to, until_cancel_fn, &coop, id1),
                   0);
  assert_int_equal(uvt_thread_start(f.reg, &to, job_fn, &stubborn, id2), 0);

  assert_int_equal(uvt_agent_dispose(&a, dispose_cb), 0);
  assert_int_equal(dr.calls, 0);
  fixture_run_until(&f, dispose_done, &dr);
  assert_int_equal(dr.calls, 1);
  assert_int_equal(atomic_load(&coop.saw_cancel), 1);
  assert_int_equal(uvt_get(f.reg, id1, NULL, &snap), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, id2, NULL, &snap), UVT_ENOTASK);
  assert_int_equal(r->calls, 2);

  /* The stubborn thread settles late; then another task's settlement flows
   * through the same queue after it. */
  uv_sem_post(&stubborn.gate);
  /* Its context is freed by the thread after its settle was queued. */
  await_contexts_freed();
  job_init(&after);
  assert_int_equal(uvt_thread_start(f.reg, NULL, job_fn, &after, id3), 0);
  waiter_init(&w);
  assert_int_equal(uvt_wait(f.reg, &w.req, id3, 10000, NULL, waiter_cb), 0);
  fixture_run_until(&f, waiter_done, &w);
  assert_int_equal(w.snap.status, UVT_COMPLETED);
  uvt_snapshot_cleanup(&w.snap);
  assert_int_equal(r->calls, 3);
  assert_string_equal(r->ids[2], id3);

  fixture_close(&f);
  uv_sem_destroy(&stubborn.gate);
  uv_sem_destroy(&coop.gate);
  uv_sem_destroy(&after.gate);
  free(r);
  await_contexts_freed();
}

/* R-START-1, R-OWN-1, contract §4: failed starts create no thread. */
static void test_thread_start_errors(void **state) {
  fixture_t f;
  job_t j;
  uvt_agent_t stranger = {0};
  uvt_thread_options_t o;
  uvt_surface_t *s;
  char id[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  job_init(&j);
  memset(&stranger, 0, sizeof(stranger));
  assert_int_equal(uvt_thread_start(NULL, NULL, job_fn, &j, id), UV_EINVAL);
  assert_int_equal(uvt_thread_start(f.reg, NULL, NULL, &j, id), UV_EINVAL);
  uvt_thread_options_init(&o);
  o.kind = "bad kind";
  assert_int_equal(uvt_thread_start(f.reg, &o, job_fn, &j, id), UV_EINVAL);
  uvt_thread_options_init(&o);
  o.label = "";
  assert_int_equal(uvt_thread_start(f.reg, &o, job_fn, &j, id), UV_EINVAL);
  uvt_thread_options_init(&o);
  o.owner = &stranger;
  assert_int_equal(uvt_thread_start(f.reg, &o, job_fn, &j, id), UVT_ESTALE);
  s = &f.surface;
  uvt_surface_detach(s);
  assert_int_equal(uvt_thread_start(f.reg, NULL, job_fn, &j, id),
                   UVT_ENOSURFACE);
  assert_int_equal(uvt__thread_live_contexts(), 0);
  assert_int_equal(uvt_surface_attach(f.reg, s, "test"), 0);

  /* No id number was used by the failures (R-START-4). */
  assert_int_equal(uvt_thread_start(f.reg, NULL, job_fn, &j, id), 0);
  assert_string_equal(id, "thread-1");
  fixture_close(&f);
  uv_sem_destroy(&j.gate);
  await_contexts_freed();
}

/* contract §4: a function that leaves a non-terminal status settles failed. */
static void bad_status_fn(uvt_thread_ctx_t *ctx, void *arg,
                          uvt_outcome_t *out) {
  (void)ctx;
  (void)arg;
  out->status = UVT_STOPPING;
}

static void test_thread_bad_status(void **state) {
  fixture_t f;
  waiter_t w;
  char id[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(uvt_thread_start(f.reg, NULL, bad_status_fn, NULL, id), 0);
  waiter_init(&w);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 10000, NULL, waiter_cb), 0);
  fixture_run_until(&f, waiter_done, &w);
  assert_int_equal(w.snap.status, UVT_FAILED);
  assert_string_equal(w.snap.detail, "thread returned a non-terminal status");
  uvt_snapshot_cleanup(&w.snap);
  fixture_close(&f);
  await_contexts_freed();
}

/* L-3: every callback of ours runs on the loop thread, even when the
 * outcome comes from another thread: listener, wait, dispose and close. */
typedef struct {
  uv_thread_t loop_thread;
  int off_loop;
  int calls;
} l3_t;

static l3_t l3;

static void l3_note(void) {
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &l3.loop_thread))
    l3.off_loop++;
  l3.calls++;
}

static void l3_listener(uvt_listener_t *l, const uvt_snapshot_t *s,
                        uvt_agent_t *o) {
  (void)l;
  (void)s;
  (void)o;
  l3_note();
}

static void l3_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *s) {
  (void)req;
  (void)status;
  (void)s;
  l3_note();
}

static int l3_disposed;

static void l3_dispose(uvt_agent_t *a) {
  (void)a;
  l3_disposed++;
  l3_note();
}

static void l3_closed(void *data) {
  (void)data;
  l3_note();
}

static void test_thread_l3_loop_thread(void **state) {
  enum { N = 20 };
  uv_loop_t loop;
  uvt_registry_t *reg;
  uvt_surface_t s = {0};
  uvt_listener_t l = {0};
  uvt_agent_t a = {0};
  uvt_wait_t waits[N] = {{0}};
  uvt_thread_options_t o;
  job_t j;
  char id[UVT_ID_MAX];
  int k;
  (void)state;

  memset(&l3, 0, sizeof(l3));
  l3.loop_thread = uv_thread_self();
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uvt_registry_new(&loop, NULL, &reg), 0);
  assert_int_equal(uvt_surface_attach(reg, &s, "l3"), 0);
  assert_int_equal(uvt_listener_start(reg, &l, l3_listener), 0);
  assert_int_equal(uvt_agent_register(reg, &a, "l3-agent", "l3-session"), 0);
  job_init(&j);
  uvt_thread_options_init(&o);
  o.owner = &a;
  for (k = 0; k < N; k++) {
    o.owner = (k % 2) ? &a : NULL;
    assert_int_equal(
        uvt_thread_start(reg, &o, (k % 3) ? job_fn : until_cancel_fn, &j, id),
        0);
    assert_int_equal(uvt_wait(reg, &waits[k], id, 60000, o.owner, l3_wait), 0);
  }
  assert_int_equal(uvt_agent_dispose(&a, l3_dispose), 0);
  l3_disposed = 0;
  while (l3_disposed == 0)
    assert_int_not_equal(uv_run(&loop, UV_RUN_ONCE), 0);
  assert_int_equal(uvt_registry_close(reg, l3_closed, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  /* N waits + 1 dispose + 1 close, plus one listener call per task that
   * settled before close began. */
  assert_true(l3.calls >= N + 2);
  assert_int_equal(l3.off_loop, 0);
  uv_sem_destroy(&j.gate);
  await_contexts_freed();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_thread_completes),
      cmocka_unit_test(test_thread_kill),
      cmocka_unit_test(test_thread_settle_order),
      cmocka_unit_test(test_thread_c16_barrier),
      cmocka_unit_test(test_thread_c17_kill_race),
      cmocka_unit_test(test_thread_force_fail_late_settle),
      cmocka_unit_test(test_thread_agent_dispose),
      cmocka_unit_test(test_thread_start_errors),
      cmocka_unit_test(test_thread_bad_status),
      cmocka_unit_test(test_thread_l3_loop_thread),
  };
  setup_once();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
