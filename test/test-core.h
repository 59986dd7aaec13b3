/* Helpers shared by the core registry suites (test-agent, busy, errors,
 * forget, quiesce, reenter, registry, start, time, wait, listener): a
 * counting allocator that can fail the n-th allocation (R-START-3) and
 * proves that every test gives back what the library took, recorders for
 * wait/listener/agent callbacks (record inside callbacks, assert after
 * uv_run returns), and snapshot comparison.
 *
 * Everything is static inline so that each suite takes what it uses. */
#ifndef UVTASKS_TEST_CORE_H
#define UVTASKS_TEST_CORE_H

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"

#define TC_CONTAINER(ptr, type, field)                                         \
  ((type *)((char *)(ptr)-offsetof(type, field)))

/* ---------------------------------------------------------------------- */
/* Counting allocator.  Installed by each suite's main() before any other
 * call into the library; counters are atomic because settle copies outcomes
 * on producer threads. */

static atomic_long tc_live;     /* allocations not yet freed */
static atomic_long tc_calls;    /* allocation calls since start */
static atomic_long tc_fail_at;  /* >0: allocation call number that fails */
static atomic_int tc_fail_from; /* 1: every call from tc_fail_at on fails */
static atomic_long tc_failed;   /* allocations refused so far */

static inline int tc_should_fail(void) {
  long n = atomic_fetch_add(&tc_calls, 1) + 1;
  long at = atomic_load(&tc_fail_at);
  if (at <= 0)
    return 0;
  if (n == at || (atomic_load(&tc_fail_from) && n > at)) {
    atomic_fetch_add(&tc_failed, 1);
    return 1;
  }
  return 0;
}

static inline void *tc_malloc(size_t size) {
  void *p;
  if (tc_should_fail())
    return NULL;
  p = malloc(size);
  if (p != NULL)
    atomic_fetch_add(&tc_live, 1);
  return p;
}

static inline void *tc_calloc(size_t count, size_t size) {
  void *p;
  if (tc_should_fail())
    return NULL;
  p = calloc(count, size);
  if (p != NULL)
    atomic_fetch_add(&tc_live, 1);
  return p;
}

static inline void *tc_realloc(void *ptr, size_t size) {
  void *p;
  if (ptr != NULL && size == 0) {
    free(ptr);
    atomic_fetch_sub(&tc_live, 1);
    return NULL;
  }
  if (tc_should_fail())
    return NULL;
  p = realloc(ptr, size);
  if (p != NULL && ptr == NULL)
    atomic_fetch_add(&tc_live, 1);
  return p;
}

static inline void tc_free(void *ptr) {
  if (ptr == NULL)
    return;
  atomic_fetch_sub(&tc_live, 1);
  free(ptr);
}

/* Install the counting allocator; call first thing in main().  Also opens
 * and closes one loop, so that libuv's process-wide descriptors (its signal
 * lock pipe) exist before the first test counts descriptors (L-2). */
static inline void tc_install_allocator(void) {
  uv_loop_t warm;
  if (uvt_replace_allocator(tc_malloc, tc_realloc, tc_calloc, tc_free) != 0)
    abort();
  if (uv_loop_init(&warm) != 0 || uv_loop_close(&warm) != 0)
    abort();
}

/* Fail allocation call number `n` counted from now (n >= 1); `from` = 1
 * fails that one and every later one too.  n = 0 disarms. */
static inline void tc_arm(long n, int from) {
  atomic_store(&tc_fail_at, 0);
  atomic_store(&tc_calls, 0);
  atomic_store(&tc_failed, 0);
  atomic_store(&tc_fail_from, from);
  atomic_store(&tc_fail_at, n);
}

static inline void tc_disarm(void) {
  atomic_store(&tc_fail_at, 0);
  atomic_store(&tc_fail_from, 0);
}

static inline long tc_live_now(void) {
  return atomic_load(&tc_live);
}

/* cmocka group setup/teardown: every test must give back every allocation
 * the library made (the registry is closed and the loop closed by then). */
/* A pool of fake producers: every registered task needs its own fake_t
 * (its cancel settles through fk->task), so tests that start many tasks take
 * them from here.  Reset before each test. */
#define TC_FAKES 512
static fake_t tc_fakes[TC_FAKES];
static int tc_nfakes;

static inline fake_t *tc_fake(void) {
  fake_t *fk;
  if (tc_nfakes >= TC_FAKES)
    abort();
  fk = &tc_fakes[tc_nfakes++];
  memset(fk, 0, sizeof(*fk));
  return fk;
}

/* L-2: descriptors open in this process (each test must give back every
 * descriptor it opened: the loop's, the registry's). */
static int tc_fds_at_setup;

static inline int tc_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static inline int tc_setup(void **state) {
  (void)state;
  tc_fds_at_setup = tc_count_fds();
  tc_nfakes = 0;
  tc_disarm();
  atomic_store(&tc_live, 0);
  return 0;
}

static inline int tc_teardown(void **state) {
  (void)state;
  tc_disarm();
  if (atomic_load(&tc_live) != 0) {
    print_error("library allocations still live after the test: %ld\n",
                (long)atomic_load(&tc_live));
    return -1;
  }
  if (tc_count_fds() != tc_fds_at_setup) {
    print_error("L-2: %d descriptors open after the test, %d before\n",
                tc_count_fds(), tc_fds_at_setup);
    return -1;
  }
  return 0;
}

#define TC_TEST(f) cmocka_unit_test_setup_teardown(f, tc_setup, tc_teardown)

/* ---------------------------------------------------------------------- */
/* Ordering: a global sequence number stamped by every recorder. */

static int tc_seq;

static inline int tc_next(void) {
  return ++tc_seq;
}

/* ---------------------------------------------------------------------- */
/* Snapshots */

static inline int tc_streq(const char *a, const char *b) {
  if (a == NULL || b == NULL)
    return a == b;
  return strcmp(a, b) == 0;
}

static inline int tc_snap_equal(const uvt_snapshot_t *a,
                                const uvt_snapshot_t *b) {
  return tc_streq(a->id, b->id) && tc_streq(a->kind, b->kind) &&
         tc_streq(a->label, b->label) &&
         tc_streq(a->owner_session, b->owner_session) &&
         a->status == b->status && tc_streq(a->detail, b->detail) &&
         a->started_at_ms == b->started_at_ms &&
         a->finished_at_ms == b->finished_at_ms && a->reported == b->reported &&
         tc_streq(a->kill_reason, b->kill_reason);
}

/* Get a snapshot and return one field for quick checks; asserts success. */
static inline uvt_status_t tc_status(uvt_registry_t *reg, const char *id,
                                     const uvt_agent_t *caller) {
  uvt_snapshot_t s;
  uvt_status_t st;
  assert_int_equal(uvt_get(reg, id, caller, &s), 0);
  st = s.status;
  uvt_snapshot_cleanup(&s);
  return st;
}

static inline int tc_reported(uvt_registry_t *reg, const char *id,
                              const uvt_agent_t *caller) {
  uvt_snapshot_t s;
  int r;
  assert_int_equal(uvt_get(reg, id, caller, &s), 0);
  r = s.reported;
  uvt_snapshot_cleanup(&s);
  return r;
}

/* ---------------------------------------------------------------------- */
/* Wait recorder */

typedef struct {
  uvt_wait_t req;
  int calls;
  int status;
  int had_snap;
  uvt_snapshot_t snap; /* owned copy of the last callback's snapshot */
  int seq;             /* tc_next() at the last call */
  uv_thread_t thread;  /* thread of the last call (L-3) */
  uint64_t now;        /* uv_now at the last call */
  uv_loop_t *loop;     /* optional, for `now` */
} wrec_t;

static inline void wrec_cb(uvt_wait_t *req, int status,
                           const uvt_snapshot_t *snap) {
  wrec_t *w = TC_CONTAINER(req, wrec_t, req);
  w->calls++;
  w->status = status;
  w->seq = tc_next();
  w->thread = uv_thread_self();
  if (w->loop != NULL)
    w->now = uv_now(w->loop);
  uvt_snapshot_cleanup(&w->snap);
  w->had_snap = snap != NULL;
  if (snap != NULL && uvt_snapshot_copy(&w->snap, snap) != 0)
    w->had_snap = -1;
}

static inline void wrec_init(wrec_t *w) {
  memset(w, 0, sizeof(*w));
  w->status = 12345;
}

static inline void wrec_cleanup(wrec_t *w) {
  uvt_snapshot_cleanup(&w->snap);
}

/* ---------------------------------------------------------------------- */
/* Listener recorder */

#define LREC_MAX 64

typedef struct lrec_s lrec_t;
typedef void (*lrec_hook)(lrec_t *r, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner);

struct lrec_s {
  uvt_listener_t l;
  int calls;
  int seq[LREC_MAX];
  uvt_snapshot_t snaps[LREC_MAX];
  uvt_agent_t *owners[LREC_MAX];
  int on_loop_thread; /* calls made on the loop thread (L-3) */
  uv_thread_t loop_thread;
  lrec_hook hook; /* optional extra behaviour, run after recording */
  void *hook_data;
};

static inline void lrec_cb(uvt_listener_t *l, const uvt_snapshot_t *snap,
                           uvt_agent_t *owner) {
  lrec_t *r = TC_CONTAINER(l, lrec_t, l);
  uv_thread_t self = uv_thread_self();
  if (r->calls < LREC_MAX) {
    r->seq[r->calls] = tc_next();
    r->owners[r->calls] = owner;
    if (uvt_snapshot_copy(&r->snaps[r->calls], snap) != 0)
      memset(&r->snaps[r->calls], 0, sizeof(r->snaps[r->calls]));
  }
  if (uv_thread_equal(&self, &r->loop_thread))
    r->on_loop_thread++;
  r->calls++;
  if (r->hook != NULL)
    r->hook(r, snap, owner);
}

static inline void lrec_init(lrec_t *r) {
  memset(r, 0, sizeof(*r));
  r->loop_thread = uv_thread_self();
}

static inline int lrec_start(uvt_registry_t *reg, lrec_t *r) {
  return uvt_listener_start(reg, &r->l, lrec_cb);
}

static inline void lrec_cleanup(lrec_t *r) {
  int i;
  for (i = 0; i < r->calls && i < LREC_MAX; i++)
    uvt_snapshot_cleanup(&r->snaps[i]);
}

/* Calls the listener got for task `id`. */
static inline int lrec_count(const lrec_t *r, const char *id) {
  int i, n = 0;
  for (i = 0; i < r->calls && i < LREC_MAX; i++)
    if (tc_streq(r->snaps[i].id, id))
      n++;
  return n;
}

static inline const uvt_snapshot_t *lrec_find(const lrec_t *r, const char *id) {
  int i;
  for (i = 0; i < r->calls && i < LREC_MAX; i++)
    if (tc_streq(r->snaps[i].id, id))
      return &r->snaps[i];
  return NULL;
}

/* Sequence number of the listener's call for task `id` (0 if none). */
static inline int lrec_seq_of(const lrec_t *r, const char *id) {
  int i;
  for (i = 0; i < r->calls && i < LREC_MAX; i++)
    if (tc_streq(r->snaps[i].id, id))
      return r->seq[i];
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Agent dispose recorder */

typedef struct {
  uvt_agent_t a;
  int disposed; /* dispose callback count */
  int seq;
  const char *id_at_cb; /* a->id seen in the callback (expected NULL) */
  const char *session_at_cb;
} arec_t;

static inline void arec_cb(uvt_agent_t *a) {
  arec_t *r = TC_CONTAINER(a, arec_t, a);
  r->disposed++;
  r->seq = tc_next();
  r->id_at_cb = a->id;
  r->session_at_cb = a->session;
}

static inline void arec_init(arec_t *r) {
  memset(r, 0, sizeof(*r));
}

/* ---------------------------------------------------------------------- */
/* Loop helpers */

typedef struct {
  int *counter;
  int target;
} tc_until_t;

static inline int tc_until_pred(void *arg) {
  tc_until_t *u = arg;
  return *u->counter >= u->target;
}

/* Run until *counter >= target (or the loop has nothing left to do).
 *
 * Not fixture_run_until(): it loops on UV_RUN_ONCE, and when the awaited
 * callback runs in the timers phase at the start of that turn, the turn
 * still blocks in poll; with the registry's async handle keeping the loop
 * alive (a live task) nothing ever wakes it.  Here an unreferenced prepare
 * handle checks the predicate before each poll and stops the loop, so the
 * poll does not block (uv_stop makes its timeout 0). */
typedef struct {
  uv_prepare_t prep;
  tc_until_t u;
  int closed;
} tc_runner_t;

static inline void tc_runner_closed(uv_handle_t *h) {
  tc_runner_t *r = TC_CONTAINER(h, tc_runner_t, prep);
  r->closed = 1;
}

static inline void tc_runner_check(uv_prepare_t *p) {
  tc_runner_t *r = TC_CONTAINER(p, tc_runner_t, prep);
  if (tc_until_pred(&r->u))
    uv_stop(p->loop);
}

static inline void tc_run_until(fixture_t *f, int *counter, int target) {
  tc_runner_t r;
  r.u.counter = counter;
  r.u.target = target;
  r.closed = 0;
  if (tc_until_pred(&r.u))
    return;
  assert_int_equal(uv_prepare_init(&f->loop, &r.prep), 0);
  assert_int_equal(uv_prepare_start(&r.prep, tc_runner_check), 0);
  uv_unref((uv_handle_t *)&r.prep);
  while (!tc_until_pred(&r.u))
    if (uv_run(&f->loop, UV_RUN_DEFAULT) == 0 && !tc_until_pred(&r.u))
      break;
  uv_close((uv_handle_t *)&r.prep, tc_runner_closed);
  /* Let the close complete before `r` goes out of scope. */
  while (!r.closed)
    uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* Run until the fake's settlement has been applied (settled hook ran). */
static inline void tc_run_settled(fixture_t *f, fake_t *fk) {
  tc_run_until(f, &fk->settled_hooks, 1);
}

/* A one-shot host timer calling fn(arg) after `ms`. */
typedef struct {
  uv_timer_t timer;
  void (*fn)(void *arg);
  void *arg;
  int fired;
} tc_timer_t;

static inline void tc_timer_fire(uv_timer_t *t) {
  tc_timer_t *tt = TC_CONTAINER(t, tc_timer_t, timer);
  tt->fired++;
  if (tt->fn != NULL)
    tt->fn(tt->arg);
  uv_close((uv_handle_t *)t, NULL);
}

static inline void tc_timer_start(uv_loop_t *loop, tc_timer_t *tt, uint64_t ms,
                                  void (*fn)(void *arg), void *arg) {
  memset(tt, 0, sizeof(*tt));
  tt->fn = fn;
  tt->arg = arg;
  assert_int_equal(uv_timer_init(loop, &tt->timer), 0);
  assert_int_equal(uv_timer_start(&tt->timer, tc_timer_fire, ms, 0), 0);
}

/* Count handles still known to the loop (closing ones included). */
static inline void tc_walk_count(uv_handle_t *h, void *arg) {
  (void)h;
  (*(int *)arg)++;
}

static inline int tc_handles(uv_loop_t *loop) {
  int n = 0;
  uv_walk(loop, tc_walk_count, &n);
  return n;
}

static inline int tc_contains(const char *hay, const char *needle) {
  return hay != NULL && strstr(hay, needle) != NULL;
}

/* The N of a teardown detail "did not stop within N ms of cancel; work may
 * be orphaned" (R-AGENT-4, R-TIME-1: N is what elapsed), or 0 if `detail`
 * is not one. */
static inline unsigned long long tc_grace_in(const char *detail) {
  static const char head[] = "did not stop within ";
  static const char tail[] = " ms of cancel; work may be orphaned";
  unsigned long long n = 0;
  const char *p;
  if (detail == NULL || strncmp(detail, head, sizeof(head) - 1) != 0)
    return 0;
  for (p = detail + sizeof(head) - 1; *p >= '0' && *p <= '9'; p++)
    n = n * 10 + (unsigned long long)(*p - '0');
  return strcmp(p, tail) == 0 ? n : 0;
}

#endif
