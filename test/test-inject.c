/* Failure injection beyond uvt_start (R-START-3 style): fail each
 * allocation in turn through uvt_replace_allocator() and check that every
 * operation either succeeds or returns its documented error with nothing
 * changed; operations documented without UV_ENOMEM (wait, dispose, close,
 * settle) must complete even when every allocation fails. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"
#include "uvtasks/thread.h"

long uvt__thread_live_contexts(void);

/* The injecting allocator ---------------------------------------------- */

enum { INJ_OFF, INJ_NTH, INJ_ALL };
static atomic_int inj_mode;
static atomic_long inj_count; /* allocations seen since armed */
static atomic_long inj_nth;
static atomic_long inj_failed;

static int inj_should_fail(void) {
  long n;
  switch (atomic_load(&inj_mode)) {
  case INJ_NTH:
    n = atomic_fetch_add(&inj_count, 1) + 1;
    if (n == atomic_load(&inj_nth)) {
      atomic_fetch_add(&inj_failed, 1);
      return 1;
    }
    return 0;
  case INJ_ALL:
    atomic_fetch_add(&inj_count, 1);
    atomic_fetch_add(&inj_failed, 1);
    return 1;
  default:
    return 0;
  }
}

static void *inj_malloc(size_t size) {
  return inj_should_fail() ? NULL : malloc(size);
}

static void *inj_realloc(void *p, size_t size) {
  return inj_should_fail() ? NULL : realloc(p, size);
}

static void *inj_calloc(size_t n, size_t size) {
  return inj_should_fail() ? NULL : calloc(n, size);
}

static void inj_arm_nth(long n) {
  atomic_store(&inj_count, 0);
  atomic_store(&inj_failed, 0);
  atomic_store(&inj_nth, n);
  atomic_store(&inj_mode, INJ_NTH);
}

static void inj_arm_all(void) {
  atomic_store(&inj_count, 0);
  atomic_store(&inj_failed, 0);
  atomic_store(&inj_mode, INJ_ALL);
}

/* Disarm; returns whether an allocation failed while armed. */
static int inj_off(void) {
  atomic_store(&inj_mode, INJ_OFF);
  return atomic_load(&inj_failed) > 0;
}

static int setup(void **state) {
  (void)state;
  return uvt_replace_allocator(inj_malloc, inj_realloc, inj_calloc, free);
}

/* Helpers -------------------------------------------------------------- */

static void snap_equal(const uvt_snapshot_t *a, const uvt_snapshot_t *b) {
  assert_string_equal(a->id, b->id);
  assert_int_equal(a->status, b->status);
  assert_int_equal(a->reported, b->reported);
  assert_int_equal(a->finished_at_ms, b->finished_at_ms);
  assert_true((a->detail == NULL) == (b->detail == NULL));
  if (a->detail != NULL)
    assert_string_equal(a->detail, b->detail);
  assert_true((a->kill_reason == NULL) == (b->kill_reason == NULL));
  if (a->kill_reason != NULL)
    assert_string_equal(a->kill_reason, b->kill_reason);
}

static void get_ok(fixture_t *f, const char *id, uvt_snapshot_t *s) {
  assert_int_equal(uvt_get(f->reg, id, NULL, s), 0);
}

typedef struct {
  int calls;
  int status;
  uvt_status_t snap_status;
  int snap_reported;
} wait_rec_t;

static void wait_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  wait_rec_t *w = req->data;
  w->calls++;
  w->status = status;
  if (snap != NULL) {
    w->snap_status = snap->status;
    w->snap_reported = snap->reported;
  }
}

static int wait_done(void *arg) {
  return ((wait_rec_t *)arg)->calls > 0;
}

/* Tests ---------------------------------------------------------------- */

/* R-GET-1, R-LIST-1 under injection: UV_ENOMEM or success, nothing
 * changed. */
static void test_inject_get_list(void **state) {
  fixture_t f;
  fake_t fk[3];
  char id[UVT_ID_MAX];
  long n;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  memset(fk, 0, sizeof(fk));
  for (i = 0; i < 3; i++)
    assert_int_equal(fake_start(f.reg, &fk[i], NULL, "lbl", NULL, id), 0);
  fake_settle(&fk[0], UVT_COMPLETED, "done", "out");
  uv_run(&f.loop, UV_RUN_NOWAIT);

  for (n = 1;; n++) {
    uvt_snapshot_t s, before, after;
    int err;
    get_ok(&f, "fake-1", &before);
    inj_arm_nth(n);
    err = uvt_get(f.reg, "fake-1", NULL, &s);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      uvt_snapshot_cleanup(&s);
      uvt_snapshot_cleanup(&before);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    get_ok(&f, "fake-1", &after);
    snap_equal(&before, &after);
    uvt_snapshot_cleanup(&before);
    uvt_snapshot_cleanup(&after);
  }
  for (n = 1;; n++) {
    uvt_snapshot_t *arr = NULL;
    size_t count = 99;
    int err;
    inj_arm_nth(n);
    err = uvt_list(f.reg, NULL, &arr, &count);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      assert_int_equal(count, 3);
      uvt_snapshots_free(arr, count);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
  }
  for (i = 1; i < 3; i++)
    fake_settle(&fk[i], UVT_COMPLETED, NULL, NULL);
  fixture_close(&f);
}

/* R-READ-1, R-READ-3 under injection: a failed read consumes nothing and
 * does not mark the task reported. */
static void test_inject_read(void **state) {
  fixture_t f;
  fake_t stream, final;
  char ids[UVT_ID_MAX], idf[UVT_ID_MAX];
  long n;
  (void)state;

  fixture_init(&f, NULL);
  memset(&stream, 0, sizeof(stream));
  memset(&final, 0, sizeof(final));
  stream.stream = 1;
  assert_int_equal(fake_start(f.reg, &stream, "s", "l", NULL, ids), 0);
  assert_int_equal(fake_start(f.reg, &final, "f", "l", NULL, idf), 0);
  fake_emit(&stream, "live bytes");
  fake_settle(&final, UVT_COMPLETED, "d", "the final output");
  uv_run(&f.loop, UV_RUN_NOWAIT);

  /* A live stream task. */
  for (n = 1;; n++) {
    uvt_read_t rd;
    uvt_snapshot_t before, after;
    int err;
    get_ok(&f, ids, &before);
    inj_arm_nth(n);
    err = uvt_read(f.reg, ids, NULL, &rd);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      assert_string_equal(rd.text, "live bytes");
      uvt_read_cleanup(&rd);
      uvt_snapshot_cleanup(&before);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(stream.pending_len, strlen("live bytes"));
    get_ok(&f, ids, &after);
    snap_equal(&before, &after);
    uvt_snapshot_cleanup(&before);
    uvt_snapshot_cleanup(&after);
  }
  /* A terminal final-output task: reported only by a successful read. */
  for (n = 1;; n++) {
    uvt_read_t rd;
    uvt_snapshot_t after;
    int err;
    inj_arm_nth(n);
    err = uvt_read(f.reg, idf, NULL, &rd);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      assert_string_equal(rd.text, "the final output");
      assert_int_equal(rd.snapshot.reported, 1);
      uvt_read_cleanup(&rd);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    get_ok(&f, idf, &after);
    assert_int_equal(after.reported, 0);
    uvt_snapshot_cleanup(&after);
  }
  /* A terminal stream task: its remainder is served once, and a failed
   * read does not lose it. */
  fake_emit(&stream, "+tail");
  fake_settle(&stream, UVT_COMPLETED, NULL, "remainder");
  uv_run(&f.loop, UV_RUN_NOWAIT);
  for (n = 1;; n++) {
    uvt_read_t rd;
    int err;
    inj_arm_nth(n);
    err = uvt_read(f.reg, ids, NULL, &rd);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      assert_string_equal(rd.text, "remainder");
      uvt_read_cleanup(&rd);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
  }
  fixture_close(&f);
}

/* R-KILL-1 under injection: a failed kill leaves the task untouched and
 * does not call cancel. */
static void test_inject_kill(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  long n;
  (void)state;

  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(f.reg, &fk, NULL, "l", NULL, id), 0);
  for (n = 1;; n++) {
    uvt_kill_result_t kr;
    uvt_snapshot_t s;
    int err, cancels = fk.cancels;
    inj_arm_nth(n);
    err = uvt_kill(f.reg, id, NULL, "why", &kr);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      assert_int_equal(kr, UVT_KILL_REQUESTED);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(fk.cancels, cancels);
    get_ok(&f, id, &s);
    assert_int_equal(s.status, UVT_RUNNING);
    assert_int_equal(s.reported, 0);
    assert_null(s.kill_reason);
    uvt_snapshot_cleanup(&s);
  }
  fake_settle(&fk, UVT_KILLED, NULL, NULL);
  fixture_close(&f);
}

/* R-WAIT-1..3, R-WAIT-5: uvt_wait and uvt_wait_abort document no UV_ENOMEM:
 * with every allocation failing they still work, and so does the
 * settlement that completes the wait (R-DONE-1: "outcome text lost"). */
static void test_inject_wait_and_settle(void **state) {
  fixture_t f;
  fake_t fk, done;
  uvt_wait_t w1 = {0}, w2 = {0}, w3 = {0};
  wait_rec_t r1, r2, r3;
  uvt_snapshot_t s;
  char id[UVT_ID_MAX], idd[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  memset(&done, 0, sizeof(done));
  memset(&r1, 0, sizeof(r1));
  memset(&r2, 0, sizeof(r2));
  memset(&r3, 0, sizeof(r3));
  w1.data = &r1;
  w2.data = &r2;
  w3.data = &r3;
  assert_int_equal(fake_start(f.reg, &fk, NULL, "l", NULL, id), 0);
  assert_int_equal(fake_start(f.reg, &done, NULL, "l", NULL, idd), 0);
  fake_settle(&done, UVT_COMPLETED, NULL, NULL);
  uv_run(&f.loop, UV_RUN_NOWAIT);

  inj_arm_all();
  assert_int_equal(uvt_wait(f.reg, &w1, id, 60000, NULL, wait_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w2, id, 60000, NULL, wait_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w3, idd, 60000, NULL, wait_cb), 0);
  assert_int_equal(uvt_wait_abort(&w2), 0);
  /* Settle with text that cannot be copied. */
  fake_settle(&fk, UVT_FAILED, "a detail", "an output");
  fixture_run_until(&f, wait_done, &r1);
  fixture_run_until(&f, wait_done, &r2);
  fixture_run_until(&f, wait_done, &r3);
  inj_off();

  assert_int_equal(r1.calls, 1);
  assert_int_equal(r1.status, 0);
  assert_int_equal(r1.snap_status, UVT_FAILED);
  assert_int_equal(r1.snap_reported, 1);
  assert_int_equal(r2.calls, 1);
  assert_int_equal(r2.status, UVT_EABORTED);
  assert_int_equal(r3.calls, 1);
  assert_int_equal(r3.status, 0);
  assert_int_equal(r3.snap_status, UVT_COMPLETED);
  get_ok(&f, id, &s);
  assert_int_equal(s.status, UVT_FAILED);
  assert_string_equal(s.detail, "outcome text lost: out of memory");
  uvt_snapshot_cleanup(&s);
  fixture_close(&f);
}

/* R-AGENT-1, R-AGENT-3: uvt_agent_dispose documents no UV_ENOMEM: with
 * every allocation failing, disposal still cancels, force-fails the task
 * whose cancel fails, drops the records and calls back once. */
static int dispose_calls;

static void dispose_cb(uvt_agent_t *a) {
  (void)a;
  dispose_calls++;
}

static int disposed(void *arg) {
  (void)arg;
  return dispose_calls > 0;
}

static void test_inject_agent_dispose(void **state) {
  fixture_t f;
  uvt_agent_t a = {0};
  fake_t coop, stuck, ended;
  uvt_snapshot_t s;
  char i1[UVT_ID_MAX], i2[UVT_ID_MAX], i3[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(uvt_agent_register(f.reg, &a, "agent", "session"), 0);
  memset(&coop, 0, sizeof(coop));
  memset(&stuck, 0, sizeof(stuck));
  memset(&ended, 0, sizeof(ended));
  coop.settle_on_cancel = 1;
  stuck.cancel_error = UV_EPERM;
  assert_int_equal(fake_start(f.reg, &coop, NULL, "l", &a, i1), 0);
  assert_int_equal(fake_start(f.reg, &stuck, NULL, "l", &a, i2), 0);
  assert_int_equal(fake_start(f.reg, &ended, NULL, "l", &a, i3), 0);
  fake_settle(&ended, UVT_COMPLETED, NULL, "x");
  uv_run(&f.loop, UV_RUN_NOWAIT);

  dispose_calls = 0;
  inj_arm_all();
  assert_int_equal(uvt_agent_dispose(&a, dispose_cb), 0);
  fixture_run_until(&f, disposed, NULL);
  inj_off();
  assert_int_equal(dispose_calls, 1);
  assert_int_equal(coop.releases + stuck.releases + ended.releases, 3);
  assert_int_equal(uvt_get(f.reg, i1, NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, i2, NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, i3, NULL, &s), UVT_ENOTASK);
  assert_true(f.warnings >= 1);
  /* The force-failed producer settles late: harmless (R-DONE-2). */
  fake_settle(&stuck, UVT_KILLED, NULL, NULL);
  fixture_close(&f);
}

/* R-CLOSE-1, R-CLOSE-2: uvt_registry_close documents no UV_ENOMEM: with
 * every allocation failing from the call to the end of the loop, it still
 * settles or force-fails every task, delivers pending waits and closes. */
static void test_inject_registry_close(void **state) {
  fixture_t f;
  fake_t coop, stuck;
  uvt_wait_t w1 = {0}, w2 = {0};
  wait_rec_t r1, r2;
  char i1[UVT_ID_MAX], i2[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  memset(&coop, 0, sizeof(coop));
  memset(&stuck, 0, sizeof(stuck));
  memset(&r1, 0, sizeof(r1));
  memset(&r2, 0, sizeof(r2));
  w1.data = &r1;
  w2.data = &r2;
  coop.settle_on_cancel = 1;
  stuck.cancel_error = UV_EIO;
  assert_int_equal(fake_start(f.reg, &coop, NULL, "l", NULL, i1), 0);
  assert_int_equal(fake_start(f.reg, &stuck, NULL, "l", NULL, i2), 0);
  assert_int_equal(uvt_wait(f.reg, &w1, i1, 60000, NULL, wait_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w2, i2, 60000, NULL, wait_cb), 0);

  inj_arm_all();
  fixture_close(&f);
  inj_off();
  assert_int_equal(r1.calls, 1);
  assert_int_equal(r1.status, 0);
  assert_int_equal(r1.snap_status, UVT_KILLED);
  assert_int_equal(r2.calls, 1);
  assert_int_equal(r2.status, 0);
  assert_int_equal(r2.snap_status, UVT_FAILED);
  assert_int_equal(coop.releases, 1);
  assert_int_equal(stuck.releases, 1);
  fake_settle(&stuck, UVT_KILLED, NULL, NULL);
}

static void noop_listener(uvt_listener_t *l, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner) {
  (void)l;
  (void)snap;
  (void)owner;
}

/* R-OWN-3, R-SURF-1 and R-DONE-3 setup calls under injection: UV_ENOMEM or
 * success, and a failed call leaves the handle reusable. */
static void test_inject_register_attach(void **state) {
  fixture_t f;
  uvt_agent_t a = {0};
  uvt_surface_t s = {0};
  uvt_listener_t l = {0};
  long n;
  (void)state;

  fixture_init(&f, NULL);
  for (n = 1;; n++) {
    int err;
    inj_arm_nth(n);
    err = uvt_agent_register(f.reg, &a, "agent-x", "session-x");
    if (!inj_off()) {
      assert_int_equal(err, 0);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
  }
  for (n = 1;; n++) {
    int err;
    inj_arm_nth(n);
    err = uvt_surface_attach(f.reg, &s, "second");
    if (!inj_off()) {
      assert_int_equal(err, 0);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
  }
  /* uvt_listener_start documents no UV_ENOMEM. */
  inj_arm_all();
  assert_int_equal(uvt_listener_start(f.reg, &l, noop_listener), 0);
  inj_off();
  uvt_listener_stop(&l);
  uvt_surface_detach(&s);
  fixture_close(&f);
}

/* §4 with R-START-3: uvt_thread_start under each failing allocation is
 * a clean UV_ENOMEM (no thread, no context left) or a success. */
static void quick_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  (void)ctx;
  (void)arg;
  out->status = UVT_COMPLETED;
}

static void test_inject_thread_start(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  long n;
  (void)state;

  fixture_init(&f, NULL);
  for (n = 1;; n++) {
    int err;
    inj_arm_nth(n);
    err = uvt_thread_start(f.reg, NULL, quick_fn, NULL, id);
    if (!inj_off()) {
      assert_int_equal(err, 0);
      assert_string_equal(id, "thread-1");
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(uvt__thread_live_contexts(), 0);
  }
  fixture_close(&f);
  assert_int_equal(uvt__thread_live_contexts(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inject_get_list),
      cmocka_unit_test(test_inject_read),
      cmocka_unit_test(test_inject_kill),
      cmocka_unit_test(test_inject_wait_and_settle),
      cmocka_unit_test(test_inject_agent_dispose),
      cmocka_unit_test(test_inject_registry_close),
      cmocka_unit_test(test_inject_register_attach),
      cmocka_unit_test(test_inject_thread_start),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
