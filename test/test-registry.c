/* Snapshots, lists, reads, the session fence, kill, metrics, the dump and
 * registry disposal (R-GET-1, R-LIST-1, R-READ-1..3, R-OWN-2, R-OWN-3,
 * R-KILL-1..4, R-METRICS-1, R-DUMP-1, R-CLOSE-1..3, C-18, C-20, L-1, L-3). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test-core.h"

static int start_fake(fixture_t *f, fake_t *fk, const char *kind,
                      uvt_agent_t *owner, char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1;
  return fake_start(f->reg, fk, kind, NULL, owner, id);
}

static int start_stream(fixture_t *f, fake_t *fk, const char *kind,
                        uvt_agent_t *owner, char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1;
  fk->stream = 1;
  return fake_start(f->reg, fk, kind, NULL, owner, id);
}

static void never_close_cb(void *data) {
  int *n = data;
  (*n)++;
}

static int64_t epoch_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------- */
/* L-1, R-CLOSE-2: an empty registry closes cleanly, also before any run. */

static void registry_new_close_empty(void **state) {
  uv_loop_t loop;
  uvt_registry_t *reg = NULL;
  uvt_options_t o;
  (void)state;
  uvt_options_init(&o);
  assert_int_equal(o.teardown_grace_ms, 10000);
  assert_int_equal(o.max_live_per_owner, 0);
  assert_null(o.log);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uvt_registry_new(NULL, &o, &reg), UV_EINVAL);
  assert_int_equal(uvt_registry_new(&loop, &o, NULL), UV_EINVAL);
  assert_null(reg);
  assert_int_equal(uvt_registry_new(&loop, NULL, &reg), 0);
  assert_non_null(reg);
  assert_ptr_equal(uvt_registry_loop(reg), &loop);
  assert_int_equal(uvt_registry_close(reg, NULL, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);

  /* And after the loop ran once with the registry idle. */
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uvt_registry_new(&loop, NULL, &reg), 0);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_registry_close(reg, NULL, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---------------------------------------------------------------------- */
/* R-GET-1: get changes nothing; the snapshot's fields. */

static void registry_get(void **state) {
  fixture_t f;
  fake_t fk;
  arec_t a;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s, s2;
  uvt_read_t r;
  int64_t before, after;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "sess-1"), 0);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  fk.settle_on_cancel = 1;
  before = epoch_ms();
  assert_int_equal(fake_start(f.reg, &fk, "getk", "get label", &a.a, id), 0);
  after = epoch_ms();
  fake_emit(&fk, "unread");

  assert_int_equal(uvt_get(NULL, id, &a.a, &s), UV_EINVAL);
  assert_int_equal(uvt_get(f.reg, NULL, &a.a, &s), UV_EINVAL);
  assert_int_equal(uvt_get(f.reg, id, &a.a, NULL), UV_EINVAL);

  assert_int_equal(uvt_get(f.reg, id, &a.a, &s), 0);
  assert_string_equal(s.id, "getk-1");
  assert_string_equal(s.kind, "getk");
  assert_string_equal(s.label, "get label");
  assert_string_equal(s.owner_session, "sess-1");
  assert_int_equal(s.status, UVT_RUNNING);
  assert_null(s.detail);
  assert_true(s.started_at_ms >= before - 1000 &&
              s.started_at_ms <= after + 1000);
  assert_int_equal(s.finished_at_ms, 0);
  assert_int_equal(s.reported, 0);
  assert_null(s.kill_reason);
  /* The snapshot is the caller's own copy: a second get is equal. */
  assert_int_equal(uvt_get(f.reg, id, &a.a, &s2), 0);
  assert_true(tc_snap_equal(&s, &s2));
  assert_true(s.id != s2.id);
  uvt_snapshot_cleanup(&s2);
  /* No cursor moved: the read still gets everything; no hook ran. */
  assert_int_equal(fk.pending_len, 6);
  assert_int_equal(uvt_read(f.reg, id, &a.a, &r), 0);
  assert_int_equal(r.len, 6);
  assert_string_equal(r.text, "unread");
  uvt_read_cleanup(&r);

  /* Terminal: get leaves reported alone, however often. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", NULL), 0);
  tc_run_settled(&f, &fk);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_get(f.reg, id, &a.a, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  assert_string_equal(s.detail, "exit code: 0");
  assert_true(s.finished_at_ms >= s.started_at_ms);
  assert_true(s.finished_at_ms <= epoch_ms() + 1000);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(tc_reported(f.reg, id, &a.a), 0);
  assert_int_equal(tc_reported(f.reg, id, &a.a), 0);
  /* Cleanup zeroes and accepts NULL / zeroed snapshots. */
  uvt_snapshot_cleanup(&s);
  uvt_snapshot_cleanup(NULL);
  uvt_snapshots_free(NULL, 0);
  uvt_read_cleanup(NULL);
  fixture_close(&f);
}

/* uvt_snapshot_copy makes an owned, equal copy. */
static void registry_snapshot_copy(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s, c;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, "cp", NULL, id), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "why", NULL), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(uvt_snapshot_copy(&c, &s), 0);
  assert_true(tc_snap_equal(&s, &c));
  uvt_snapshot_cleanup(&s);
  assert_string_equal(c.id, "cp-1");
  assert_string_equal(c.kill_reason, "why");
  assert_string_equal(c.detail, "cancelled");
  assert_int_equal(c.status, UVT_KILLED);
  uvt_snapshot_cleanup(&c);
  assert_int_equal(uvt_snapshot_copy(NULL, &c), UV_EINVAL);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-LIST-1: caller's session plus unowned, registration order; NULL caller
 * sees unowned only; terminal tasks stay listed until dropped. */

static void expect_list(uvt_registry_t *reg, const uvt_agent_t *caller,
                        const char *const *ids, size_t n) {
  uvt_snapshot_t *arr = (uvt_snapshot_t *)1;
  size_t count = 99, i;
  assert_int_equal(uvt_list(reg, caller, &arr, &count), 0);
  assert_int_equal(count, n);
  if (n == 0)
    assert_null(arr);
  for (i = 0; i < n; i++)
    assert_string_equal(arr[i].id, ids[i]);
  uvt_snapshots_free(arr, count);
}

static void registry_list(void **state) {
  fixture_t f;
  fake_t fk[8];
  arec_t a, b, c, d;
  uvt_agent_t never = {0};
  char id[UVT_ID_MAX];
  static const char *const for_s1[] = {"l-1", "l-2", "l-4", "l-5", "l-6"};
  static const char *const for_s2[] = {"l-1", "l-3", "l-5", "l-6"};
  static const char *const for_none[] = {"l-1", "l-5", "l-6"};
  static const char *const after_a[] = {"l-1", "l-4", "l-5", "l-6"};
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&b);
  arec_init(&c);
  arec_init(&d);
  memset(&never, 0, sizeof(never));

  /* Nothing yet. */
  expect_list(f.reg, NULL, NULL, 0);
  assert_int_equal(uvt_list(f.reg, NULL, NULL, NULL), UV_EINVAL);

  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &c.a, "C", "s2"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &d.a, "D", "s3"), 0);
  expect_list(f.reg, &a.a, NULL, 0);

  assert_int_equal(start_fake(&f, &fk[0], "l", NULL, id), 0); /* l-1 */
  assert_int_equal(start_fake(&f, &fk[1], "l", &a.a, id), 0); /* l-2 */
  assert_int_equal(start_fake(&f, &fk[2], "l", &c.a, id), 0); /* l-3 */
  assert_int_equal(start_fake(&f, &fk[3], "l", &b.a, id), 0); /* l-4 */
  assert_int_equal(start_fake(&f, &fk[4], "l", NULL, id), 0); /* l-5 */
  assert_int_equal(start_fake(&f, &fk[5], "l", NULL, id), 0); /* l-6 */
  /* Terminal tasks stay listed, in their place. */
  assert_int_equal(fake_settle(&fk[4], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[4]);
  assert_int_equal(fake_settle(&fk[1], UVT_FAILED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[1]);

  expect_list(f.reg, &a.a, for_s1, 5);
  expect_list(f.reg, &b.a, for_s1, 5);
  expect_list(f.reg, &c.a, for_s2, 4);
  expect_list(f.reg, NULL, for_none, 3);
  expect_list(f.reg, &d.a, for_none, 3);
  expect_list(f.reg, &never, for_none, 3); /* session NULL = NULL caller */

  /* Listing changes nothing. */
  assert_int_equal(tc_reported(f.reg, "l-5", NULL), 0);

  /* A's records are dropped by its disposal; a disposed caller (session
   * NULL) sees unowned tasks only. */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  expect_list(f.reg, &b.a, after_a, 4);
  expect_list(f.reg, &a.a, for_none, 3);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-READ-1, R-READ-3: stream kinds. */

static void expect_read(uvt_registry_t *reg, const char *id,
                        const uvt_agent_t *caller, const char *bytes,
                        size_t len, uvt_status_t status, int reported) {
  uvt_read_t r;
  assert_int_equal(uvt_read(reg, id, caller, &r), 0);
  assert_non_null(r.text);
  assert_int_equal(r.len, len);
  assert_memory_equal(r.text, bytes, len);
  assert_int_equal(r.text[len], '\0');
  assert_int_equal(r.snapshot.status, status);
  assert_int_equal(r.snapshot.reported, reported);
  assert_string_equal(r.snapshot.id, id);
  uvt_read_cleanup(&r);
  assert_null(r.text);
}

static void registry_read_stream(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_read_t r;
  uvt_kill_result_t kr;
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(f.reg, &fk, "st", NULL, NULL, id), 0);

  assert_int_equal(uvt_read(f.reg, id, NULL, NULL), UV_EINVAL);
  assert_int_equal(uvt_read(f.reg, NULL, NULL, &r), UV_EINVAL);
  expect_read(f.reg, id, NULL, "", 0, UVT_RUNNING, 0);
  fake_emit(&fk, "abc");
  expect_read(f.reg, id, NULL, "abc", 3, UVT_RUNNING, 0);
  expect_read(f.reg, id, NULL, "", 0, UVT_RUNNING, 0);
  fake_emit(&fk, "de");
  fake_emit(&fk, "f\n");
  expect_read(f.reg, id, NULL, "def\n", 4, UVT_RUNNING, 0);
  /* Any bytes, NULs included. */
  memcpy(fk.pending, "x\0y\xff", 4);
  fk.pending_len = 4;
  expect_read(f.reg, id, NULL, "x\0y\xff", 4, UVT_RUNNING, 0);
  /* A read of a stopping task does not mark it reported by itself (it is
   * reported already, by the kill: R-KILL-2). */
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  fake_emit(&fk, "bye");
  expect_read(f.reg, id, NULL, "bye", 3, UVT_STOPPING, 1);

  /* Settle with the unread remainder; later reads serve it once, and the
   * registry never asks the producer again. */
  fake_emit(&fk, "never read");
  assert_int_equal(fake_settle(&fk, UVT_KILLED, "signal: SIGTERM", "tail"), 0);
  tc_run_settled(&f, &fk);
  {
    /* The remainder's bytes go back once read, not at the drop: one
     * allocation fewer while the record stays (R-READ-1). */
    long before = tc_live_now();
    expect_read(f.reg, id, NULL, "tail", 4, UVT_KILLED, 1);
    assert_int_equal(tc_live_now(), before - 1);
  }
  expect_read(f.reg, id, NULL, "", 0, UVT_KILLED, 1);
  fixture_close(&f);
}

/* R-READ-3: a read that finds the task terminal marks it reported; reads of
 * a live task never do. */
static void registry_read_marks_reported(void **state) {
  fixture_t f;
  fake_t fk, fin;
  char id[UVT_ID_MAX], fid[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_stream(&f, &fk, "rs", NULL, id), 0);
  assert_int_equal(start_fake(&f, &fin, "rf", NULL, fid), 0);
  {
    int i;
    for (i = 0; i < 5; i++) {
      expect_read(f.reg, id, NULL, "", 0, UVT_RUNNING, 0);
      expect_read(f.reg, fid, NULL, "", 0, UVT_RUNNING, 0);
    }
  }
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  /* The read's own snapshot already says reported. */
  expect_read(f.reg, id, NULL, "", 0, UVT_COMPLETED, 1);
  assert_int_equal(tc_reported(f.reg, id, NULL), 1);
  fixture_close(&f);
}

/* R-READ-2: final-output kinds: empty while live; once terminal the
 * outcome's output (or empty) on every read, not consumed. */
static void registry_read_final(void **state) {
  fixture_t f;
  fake_t fk, none;
  char id[UVT_ID_MAX], nid[UVT_ID_MAX];
  uvt_kill_result_t kr;
  int i;
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(f.reg, &fk, "fin", NULL, NULL, id), 0);
  assert_int_equal(start_fake(&f, &none, "fin", NULL, nid), 0);
  expect_read(f.reg, id, NULL, "", 0, UVT_RUNNING, 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "r", &kr), 0);
  expect_read(f.reg, id, NULL, "", 0, UVT_STOPPING, 1);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, "the result\n"), 0);
  assert_int_equal(fake_settle(&none, UVT_FAILED, "boom", NULL), 0);
  tc_run_settled(&f, &fk);
  tc_run_settled(&f, &none);
  for (i = 0; i < 3; i++) {
    expect_read(f.reg, id, NULL, "the result\n", 11, UVT_COMPLETED, 1);
    expect_read(f.reg, nid, NULL, "", 0, UVT_FAILED, 1);
  }
  fixture_close(&f);
}

/* The producer's read_output error is returned (header: uvt_read). */
static int rerr_cancel(uvt_task_t *t, const char *reason) {
  uvt_outcome_t o;
  (void)reason;
  memset(&o, 0, sizeof(o));
  o.status = UVT_KILLED;
  return uvt_task_settle(t, &o);
}

static int rerr_read(uvt_task_t *t, uvt_buf_t *out) {
  (void)t;
  (void)out;
  return UV_EIO;
}

static int rerr_run(uvt_task_t *t, void *arg, uvt_hooks_t *h) {
  (void)t;
  (void)arg;
  h->cancel = rerr_cancel;
  h->read_output = rerr_read;
  return 0;
}

static void registry_read_producer_error(void **state) {
  fixture_t f;
  uvt_spec_t spec;
  uvt_read_t r;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&spec, 0, sizeof(spec));
  spec.kind = "rerr";
  spec.label = "read fails";
  spec.run = rerr_run;
  assert_int_equal(uvt_start(f.reg, &spec, id), 0);
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), UV_EIO);
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_RUNNING);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-OWN-2: the fence for get/read/kill/wait and every caller shape. */

/* Try get, read, wait and (last) kill; each must give `expect`.  On a
 * refusal nothing may change (no cancel, nothing consumed, no callback). */
static void fence_all(fixture_t *f, fake_t *fk, const char *id,
                      const uvt_agent_t *caller, int expect) {
  uvt_snapshot_t s;
  uvt_read_t r;
  wrec_t w;
  uvt_kill_result_t kr;
  int cancels = fk != NULL ? fk->cancels : 0;
  size_t pending = fk != NULL ? fk->pending_len : 0;
  wrec_init(&w);
  assert_int_equal(uvt_get(f->reg, id, caller, &s), expect);
  if (expect == 0)
    uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_read(f->reg, id, caller, &r), expect);
  if (expect == 0) {
    uvt_read_cleanup(&r);
  } else if (fk != NULL) {
    assert_int_equal(fk->pending_len, pending); /* nothing consumed */
  }
  assert_int_equal(uvt_wait(f->reg, &w.req, id, 1, caller, wrec_cb), expect);
  assert_int_equal(uvt_kill(f->reg, id, caller, "fence", &kr), expect);
  if (expect != 0 && fk != NULL)
    assert_int_equal(fk->cancels, cancels);
  if (expect == 0)
    tc_run_until(f, &w.calls, 1);
  else
    uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(w.calls, expect == 0 ? 1 : 0);
  wrec_cleanup(&w);
}

static void registry_fence(void **state) {
  fixture_t f;
  fake_t owned[3], open[6];
  arec_t a, b, c, d;
  uvt_agent_t never = {0};
  char oid[3][UVT_ID_MAX], uid[6][UVT_ID_MAX];
  int i;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&b);
  arec_init(&c);
  arec_init(&d);
  memset(&never, 0, sizeof(never));
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &c.a, "C", "s2"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &d.a, "D", "s1"), 0);
  assert_int_equal(uvt_agent_dispose(&d.a, arec_cb), 0);
  tc_run_until(&f, &d.disposed, 1); /* D: disposed, session NULL */
  assert_null(d.a.session);

  for (i = 0; i < 3; i++) {
    assert_int_equal(start_stream(&f, &owned[i], "own", &a.a, oid[i]), 0);
    fake_emit(&owned[i], "secret");
  }
  for (i = 0; i < 6; i++) {
    assert_int_equal(start_stream(&f, &open[i], "open", NULL, uid[i]), 0);
    fake_emit(&open[i], "public");
  }

  /* Owned by A (s1): refused for NULL, another session, a never-registered
   * caller and a disposed caller; allowed for the same session. */
  fence_all(&f, &owned[0], oid[0], NULL, UVT_EFOREIGN);
  fence_all(&f, &owned[0], oid[0], &c.a, UVT_EFOREIGN);
  fence_all(&f, &owned[0], oid[0], &never, UVT_EFOREIGN);
  fence_all(&f, &owned[0], oid[0], &d.a, UVT_EFOREIGN);
  assert_int_equal(tc_reported(f.reg, oid[0], &a.a), 0);
  assert_int_equal(tc_status(f.reg, oid[0], &a.a), UVT_RUNNING);
  fence_all(&f, &owned[1], oid[1], &b.a, 0); /* same session, other agent */
  fence_all(&f, &owned[2], oid[2], &a.a, 0);

  /* Unowned: open to every caller. */
  fence_all(&f, &open[0], uid[0], NULL, 0);
  fence_all(&f, &open[1], uid[1], &a.a, 0);
  fence_all(&f, &open[2], uid[2], &c.a, 0);
  fence_all(&f, &open[3], uid[3], &never, 0);
  fence_all(&f, &open[4], uid[4], &d.a, 0);

  /* Unknown ids: UVT_ENOTASK for every caller. */
  fence_all(&f, NULL, "own-99", &a.a, UVT_ENOTASK);
  fence_all(&f, NULL, "own-99", NULL, UVT_ENOTASK);
  fence_all(&f, NULL, "", &c.a, UVT_ENOTASK);
  fence_all(&f, NULL, "nonsense", NULL, UVT_ENOTASK);
  fence_all(&f, NULL, "own-1x", &a.a, UVT_ENOTASK);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-OWN-3: registering a live agent id gives UV_EEXIST. */

static void registry_register_agents(void **state) {
  fixture_t f;
  arec_t a, b, c;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&b);
  arec_init(&c);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, NULL, "s"), UV_EINVAL);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", NULL), UV_EINVAL);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "", "s"), UV_EINVAL);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", ""), UV_EINVAL);
  assert_int_equal(uvt_agent_register(f.reg, NULL, "A", "s"), UV_EINVAL);
  assert_int_equal(uvt_agent_register(NULL, &a.a, "A", "s"), UV_EINVAL);

  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_string_equal(a.a.id, "A");
  assert_string_equal(a.a.session, "s1");
  assert_ptr_equal(a.a.registry, f.reg);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "A", "s1"), UV_EEXIST);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "A", "s2"), UV_EEXIST);
  /* Same session, different id: fine. */
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "s1"), 0);
  /* After disposal the id is free again. */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(uvt_agent_register(f.reg, &c.a, "A", "s3"), 0);
  assert_string_equal(c.a.session, "s3");
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-KILL-1: a failing cancel is returned and the task is untouched. */

static void registry_kill_cancel_error(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_snapshot_t before, after;
  uvt_kill_result_t kr = 0;
  uvt_metrics_t m;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, "kc", NULL, id), 0);
  fk.cancel_error = UV_EPERM;
  assert_int_equal(uvt_get(f.reg, id, NULL, &before), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "please", &kr), UV_EPERM);
  assert_int_equal(fk.cancels, 1);
  assert_int_equal(uvt_get(f.reg, id, NULL, &after), 0);
  assert_true(tc_snap_equal(&before, &after));
  assert_int_equal(after.status, UVT_RUNNING);
  assert_int_equal(after.reported, 0);
  assert_null(after.kill_reason);
  uvt_snapshot_cleanup(&before);
  uvt_snapshot_cleanup(&after);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.kills, 0);

  /* The next kill, with a working cancel, goes through. */
  fk.cancel_error = 0;
  fk.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, id, NULL, "again", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_STOPPING);
  fk.settle_on_cancel = 1;
  fixture_close(&f);
}

/* R-KILL-2: live -> stopping, reported, reason kept (the first one), result
 * UVT_KILL_REQUESTED; the task settles later through the producer. */
static void registry_kill_live(void **state) {
  fixture_t f;
  fake_t fk, nr;
  char id[UVT_ID_MAX], nid[UVT_ID_MAX];
  uvt_snapshot_t s;
  uvt_kill_result_t kr = 0;
  lrec_t l;
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "kl", NULL, id), 0);
  fk.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(NULL, id, NULL, NULL, &kr), UV_EINVAL);
  assert_int_equal(uvt_kill(f.reg, NULL, NULL, NULL, &kr), UV_EINVAL);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "stop it", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(fk.cancels, 1);
  assert_string_equal(fk.last_reason, "stop it");
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_STOPPING);
  assert_int_equal(s.reported, 1);
  assert_string_equal(s.kill_reason, "stop it");
  assert_int_equal(s.finished_at_ms, 0);
  uvt_snapshot_cleanup(&s);
  /* A second kill keeps the first reason (result may be NULL). */
  assert_int_equal(uvt_kill(f.reg, id, NULL, "second", NULL), 0);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_string_equal(s.kill_reason, "stop it");
  uvt_snapshot_cleanup(&s);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(l.calls, 0); /* not terminal until the producer settles */
  assert_int_equal(fake_settle(&fk, UVT_KILLED, "signal: SIGTERM", NULL), 0);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_KILLED);
  assert_string_equal(s.detail, "signal: SIGTERM");
  assert_string_equal(s.kill_reason, "stop it");
  assert_int_equal(s.reported, 1);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(l.snaps[0].reported, 1);

  /* NULL reason records "killed". */
  assert_int_equal(start_fake(&f, &nr, "kl", NULL, nid), 0);
  nr.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, nid, NULL, NULL, &kr), 0);
  assert_int_equal(uvt_get(f.reg, nid, NULL, &s), 0);
  assert_string_equal(s.kill_reason, "killed");
  uvt_snapshot_cleanup(&s);
  nr.settle_on_cancel = 1;
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* R-KILL-3: a kill of a stopping task calls cancel again. */
static void registry_kill_stopping(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr = 0;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, "ks", NULL, id), 0);
  fk.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, id, NULL, "one", &kr), 0);
  assert_int_equal(fk.cancels, 1);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "two", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(fk.cancels, 2);
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_STOPPING);
  /* A failing repeated cancel is returned; the task stays stopping. */
  fk.cancel_error = UV_ESRCH;
  assert_int_equal(uvt_kill(f.reg, id, NULL, "three", &kr), UV_ESRCH);
  assert_int_equal(fk.cancels, 3);
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_STOPPING);
  fk.cancel_error = 0;
  assert_int_equal(fake_settle(&fk, UVT_KILLED, NULL, NULL), 0);
  tc_run_settled(&f, &fk);
  fixture_close(&f);
}

/* R-KILL-4: a terminal task is marked reported, cancel is not called. */
static void registry_kill_terminal(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  uvt_kill_result_t kr = 0;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, "kt", NULL, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", NULL), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "late", &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  assert_int_equal(fk.cancels, 0);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  assert_int_equal(s.reported, 1);
  assert_string_equal(s.detail, "exit code: 0");
  uvt_snapshot_cleanup(&s);
  fixture_close(&f);
}

/* Kill after the producer settled but before the registry applied it:
 * cancel is not called, result UVT_KILL_REQUESTED (lead's decision), and the
 * producer's outcome is the one recorded. */
static void registry_kill_settle_pending(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  uvt_kill_result_t kr = 0;
  lrec_t l;
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "kp", NULL, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "out"), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "racing", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(fk.cancels, 0);
  assert_int_equal(tc_reported(f.reg, id, NULL), 1);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(l.calls, 1);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  assert_string_equal(s.detail, "exit code: 0");
  assert_int_equal(s.reported, 1);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(l.snaps[0].reported, 1);
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-METRICS-1 */

static void registry_metrics(void **state) {
  fixture_t f;
  fake_t fk[6];
  arec_t a;
  char id[6][UVT_ID_MAX];
  wrec_t wt, wa;
  uvt_metrics_t m;
  uvt_kill_result_t kr;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  wrec_init(&wt);
  wrec_init(&wa);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 0);
  assert_int_equal(m.live, 0);
  assert_int_equal(m.records, 0);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);

  assert_int_equal(start_fake(&f, &fk[0], "m", NULL, id[0]), 0);
  assert_int_equal(start_fake(&f, &fk[1], "m", NULL, id[1]), 0);
  assert_int_equal(start_fake(&f, &fk[2], "m", NULL, id[2]), 0);
  assert_int_equal(start_fake(&f, &fk[3], "m", NULL, id[3]), 0);
  memset(&fk[5], 0, sizeof(fk[5]));
  fk[5].run_error = UV_EIO;
  assert_int_equal(fake_start(f.reg, &fk[5], "m", NULL, NULL, id[5]), UV_EIO);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 4);
  assert_int_equal(m.live, 4);
  assert_int_equal(m.records, 4);

  assert_int_equal(fake_settle(&fk[0], UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(uvt_kill(f.reg, id[1], NULL, NULL, &kr), 0); /* settles */
  assert_int_equal(fake_settle(&fk[2], UVT_FAILED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[0]);
  tc_run_settled(&f, &fk[1]);
  tc_run_settled(&f, &fk[2]);
  fk[3].cancel_error = UV_EPERM;
  assert_int_equal(uvt_kill(f.reg, id[3], NULL, NULL, &kr), UV_EPERM);
  fk[3].cancel_error = 0;

  assert_int_equal(uvt_wait(f.reg, &wt.req, id[3], 5, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &wa.req, id[3], 5000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait_abort(&wa.req), 0);
  tc_run_until(&f, &wt.calls, 1);
  tc_run_until(&f, &wa.calls, 1);
  assert_int_equal(wt.status, UVT_EWAITTIMEOUT);
  assert_int_equal(wa.status, UVT_EABORTED);

  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 4);
  assert_int_equal(m.completed, 1);
  assert_int_equal(m.killed, 1);
  assert_int_equal(m.failed, 1);
  assert_int_equal(m.kills, 1); /* calls that returned 0 */
  assert_int_equal(m.force_failed, 0);
  assert_int_equal(m.waits_timed_out, 1);
  assert_int_equal(m.waits_aborted, 1);
  assert_int_equal(m.live, 1);
  assert_int_equal(m.records, 4);

  /* A force-failed record (R-AGENT-3) counts; dropped records leave. */
  memset(&fk[4], 0, sizeof(fk[4]));
  assert_int_equal(fake_start(f.reg, &fk[4], "m", NULL, &a.a, id[4]), 0);
  fk[4].cancel_error = UV_EPERM;
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 5);
  assert_int_equal(m.force_failed, 1);
  assert_int_equal(m.live, 1);
  assert_int_equal(m.records, 4);
  /* The producer settles late and frees its handle (R-DONE-2). */
  assert_int_equal(fake_settle(&fk[4], UVT_KILLED, NULL, NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.killed, 1);
  assert_int_equal(m.records, 4);
  fixture_close(&f);
  wrec_cleanup(&wt);
  wrec_cleanup(&wa);
}

/* R-METRICS-1, header: `kills` counts "uvt_kill() calls that returned 0";
 * a kill of a terminal task returns 0 (R-KILL-4). */
static void registry_metrics_kill_terminal(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr = 0;
  uvt_metrics_t m;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, "mk", NULL, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.kills, 1);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-DUMP-1 */

static void lower(char *s) {
  for (; *s; s++)
    *s = (char)tolower((unsigned char)*s);
}

static void registry_print(void **state) {
  fixture_t f;
  fake_t fk, fk2;
  arec_t a;
  uvt_surface_t s2 = {0};
  lrec_t l;
  wrec_t w;
  char id[UVT_ID_MAX], id2[UVT_ID_MAX];
  char *buf = NULL;
  size_t len = 0;
  FILE *fp;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  lrec_init(&l);
  wrec_init(&w);
  memset(&s2, 0, sizeof(s2));
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "agent-alpha", "sess-x"), 0);
  assert_int_equal(uvt_surface_attach(f.reg, &s2, "panel-ui"), 0);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, "dumpk", "dump label", &a.a, id), 0);
  assert_int_equal(start_fake(&f, &fk2, "otherk", NULL, id2), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, &a.a, wrec_cb), 0);

  fp = open_memstream(&buf, &len);
  assert_non_null(fp);
  assert_int_equal(uvt_registry_print(f.reg, fp), 0);
  assert_int_equal(fclose(fp), 0);
  assert_non_null(buf);
  assert_true(tc_contains(buf, "dumpk-1"));
  assert_true(tc_contains(buf, "otherk-1"));
  assert_true(tc_contains(buf, "dump label"));
  assert_true(tc_contains(buf, "agent-alpha"));
  assert_true(tc_contains(buf, "sess-x"));
  assert_true(tc_contains(buf, "panel-ui"));
  assert_true(tc_contains(buf, "running"));
  lower(buf);
  assert_true(tc_contains(buf, "listener"));
  assert_true(tc_contains(buf, "wait"));
  assert_true(tc_contains(buf, "surface"));
  assert_true(tc_contains(buf, "agent"));
  free(buf);

  /* A stream that cannot be written: UV_EIO. */
  fp = fopen("/dev/null", "r");
  assert_non_null(fp);
  assert_int_equal(uvt_registry_print(f.reg, fp), UV_EIO);
  fclose(fp);

  uvt_surface_detach(&s2);
  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  wrec_cleanup(&w);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-CLOSE-1, R-CLOSE-2, C-18: close disposes everything, in order. */

typedef struct {
  int calls;
  int handles_at_cb;  /* uv_walk count inside the callback */
  int releases_at_cb; /* release hooks run before the callback */
  int waits_at_cb;    /* wait callbacks run before the callback */
  uv_loop_t *loop;
  fake_t *fks;
  int nfks;
  wrec_t *ws;
  int nws;
  uv_thread_t thread;
} closerec_t;

static void closerec_cb(void *data) {
  closerec_t *c = data;
  int i;
  c->calls++;
  c->thread = uv_thread_self();
  c->handles_at_cb = tc_handles(c->loop);
  c->releases_at_cb = 0;
  for (i = 0; i < c->nfks; i++)
    c->releases_at_cb += c->fks[i].releases;
  c->waits_at_cb = 0;
  for (i = 0; i < c->nws; i++)
    c->waits_at_cb += c->ws[i].calls;
}

static void registry_close_disposes(void **state) {
  fixture_t f;
  fake_t fk[4];
  arec_t a, a2;
  lrec_t l, l2;
  wrec_t w[3], late;
  closerec_t c;
  uvt_surface_t s2 = {0};
  char id[4][UVT_ID_MAX], nid[UVT_ID_MAX];
  int i, never = 0;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&a2);
  lrec_init(&l);
  lrec_init(&l2);
  wrec_init(&late);
  memset(&s2, 0, sizeof(s2));
  memset(&c, 0, sizeof(c));
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk[0], "c", NULL, id[0]), 0);
  assert_int_equal(start_fake(&f, &fk[1], "c", &a.a, id[1]), 0);
  assert_int_equal(start_fake(&f, &fk[2], "c", NULL, id[2]), 0);
  assert_int_equal(start_fake(&f, &fk[3], "c", &a.a, id[3]), 0);
  assert_int_equal(fake_settle(&fk[2], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[2]);
  assert_int_equal(l.calls, 1);
  for (i = 0; i < 3; i++)
    wrec_init(&w[i]);
  assert_int_equal(uvt_wait(f.reg, &w[0].req, id[0], 60000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w[1].req, id[1], 60000, &a.a, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w[2].req, id[3], 60000, &a.a, wrec_cb), 0);

  c.loop = &f.loop;
  c.fks = fk;
  c.nfks = 4;
  c.ws = w;
  c.nws = 3;
  assert_int_equal(uvt_registry_close(f.reg, closerec_cb, &c), 0);
  assert_int_equal(c.calls, 0); /* never inside the call */
  /* A second close is refused and its callback never runs. */
  assert_int_equal(uvt_registry_close(f.reg, never_close_cb, &never),
                   UVT_ECLOSING);
  /* Starts, waits, registrations are refused while closing. */
  {
    fake_t no;
    assert_int_equal(start_fake(&f, &no, "c", NULL, nid), UVT_ECLOSING);
    assert_int_equal(no.runs, 0);
  }
  assert_int_equal(uvt_wait(f.reg, &late.req, id[0], 100, NULL, wrec_cb),
                   UVT_ECLOSING);
  assert_int_equal(uvt_agent_register(f.reg, &a2.a, "A2", "s1"), UVT_ECLOSING);
  assert_int_equal(uvt_listener_start(f.reg, &l2.l, lrec_cb), UVT_ECLOSING);
  assert_int_equal(uvt_surface_attach(f.reg, &s2, "late"), UVT_ECLOSING);

  f.reg = NULL; /* freed by the library after the callback */
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.calls, 1);
  assert_int_equal(never, 0);
  assert_int_equal(c.handles_at_cb, 0);  /* C-18: nothing of ours open */
  assert_int_equal(c.releases_at_cb, 4); /* every record dropped first */
  assert_int_equal(c.waits_at_cb, 3);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(f.warnings, 0);

  /* Listeners are closed first: no listener ran for the teardown. */
  assert_int_equal(l.calls, 1);
  assert_int_equal(l2.calls, 0);
  assert_int_equal(late.calls, 0);
  /* Live tasks were cancelled with the disposal reason. */
  for (i = 0; i < 4; i++) {
    if (i == 2) {
      assert_int_equal(fk[i].cancels, 0);
      continue;
    }
    assert_int_equal(fk[i].cancels, 1);
    assert_string_equal(fk[i].last_reason, "tasks service disposed");
  }
  /* Pending waits got their terminal snapshots. */
  for (i = 0; i < 3; i++) {
    assert_int_equal(w[i].calls, 1);
    assert_int_equal(w[i].status, 0);
    assert_int_equal(w[i].had_snap, 1);
    assert_int_equal(w[i].snap.status, UVT_KILLED);
    assert_int_equal(w[i].snap.reported, 1);
    assert_string_equal(w[i].snap.kill_reason, "tasks service disposed");
    wrec_cleanup(&w[i]);
  }
  lrec_cleanup(&l);
}

/* R-CLOSE-1: "cancel every live task" includes a stopping one. */
static void registry_close_cancels_stopping(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, "cs", NULL, id), 0);
  fk.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, id, NULL, "first", NULL), 0);
  fk.settle_on_cancel = 1;
  fixture_close(&f);
  assert_int_equal(fk.cancels, 2);
  assert_string_equal(fk.last_reason, "tasks service disposed");
  assert_int_equal(fk.releases, 1);
}

/* C-18: start 3 tasks, kill all, close; in the close callback nothing of
 * ours is open, and the loop closes without extra runs by the host. */
static void registry_c18_loop_closes(void **state) {
  fixture_t f;
  fake_t fk[3];
  char id[UVT_ID_MAX];
  closerec_t c;
  int i;
  uvt_kill_result_t kr;
  (void)state;
  fixture_init(&f, NULL);
  memset(&c, 0, sizeof(c));
  c.loop = &f.loop;
  c.fks = fk;
  c.nfks = 3;
  for (i = 0; i < 3; i++) {
    assert_int_equal(start_fake(&f, &fk[i], "c18", NULL, id), 0);
    assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
    assert_int_equal(kr, UVT_KILL_REQUESTED);
  }
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_registry_close(f.reg, closerec_cb, &c), 0);
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.calls, 1);
  assert_int_equal(c.handles_at_cb, 0);
  assert_int_equal(c.releases_at_cb, 3);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* C-20, R-CLOSE-2: start, kill, wait and close before the host's first
 * uv_run; the run is not cut short, every callback fires, uv_run returns 0. */
static void c20_timer(void *arg) {
  (void)arg;
}

static void registry_c20_before_first_run(void **state) {
  fixture_t f;
  fake_t fk, other;
  char id[UVT_ID_MAX], oid[UVT_ID_MAX];
  wrec_t w, wo;
  uvt_kill_result_t kr;
  closerec_t c;
  tc_timer_t host;
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  wrec_init(&wo);
  memset(&c, 0, sizeof(c));
  c.loop = &f.loop;
  tc_timer_start(&f.loop, &host, 30, c20_timer, NULL);
  assert_int_equal(start_fake(&f, &fk, "c20", NULL, id), 0);
  assert_int_equal(start_fake(&f, &other, "c20", NULL, oid), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &wo.req, oid, 1000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_registry_close(f.reg, closerec_cb, &c), 0);
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(host.fired, 1);
  assert_int_equal(c.calls, 1);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_int_equal(wo.calls, 1);
  assert_int_equal(wo.status, 0);
  assert_string_equal(wo.snap.kill_reason, "tasks service disposed");
  assert_int_equal(uv_loop_close(&f.loop), 0);
  wrec_cleanup(&w);
  wrec_cleanup(&wo);
}

/* ---------------------------------------------------------------------- */
/* R-CLOSE-3: close requested from inside our callbacks (wait, agent
 * dispose, a host timer); the listener case is in test-listener. */

typedef struct {
  fixture_t *f;
  uvt_registry_t *reg;
  int close_err;
  int second_err;
  int calls;
} closer_t;

static closer_t g_closer;

static void close_from_wait(uvt_wait_t *req, int status,
                            const uvt_snapshot_t *snap) {
  (void)req;
  (void)status;
  (void)snap;
  g_closer.calls++;
  g_closer.close_err = uvt_registry_close(g_closer.reg, NULL, NULL);
  g_closer.second_err = uvt_registry_close(g_closer.reg, NULL, NULL);
}

static void close_from_dispose(uvt_agent_t *a) {
  (void)a;
  g_closer.calls++;
  g_closer.close_err = uvt_registry_close(g_closer.reg, NULL, NULL);
  g_closer.second_err = uvt_registry_close(g_closer.reg, NULL, NULL);
}

static void registry_close_from_callbacks(void **state) {
  int round;
  (void)state;
  for (round = 0; round < 2; round++) {
    fixture_t f;
    fake_t fk, other;
    arec_t a;
    uvt_wait_t w;
    char id[UVT_ID_MAX], oid[UVT_ID_MAX];
    fixture_init(&f, NULL);
    arec_init(&a);
    memset(&g_closer, 0, sizeof(g_closer));
    g_closer.f = &f;
    g_closer.reg = f.reg;
    g_closer.close_err = 1;
    g_closer.second_err = 1;
    memset(&w, 0, sizeof(w));
    assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
    assert_int_equal(start_fake(&f, &fk, "cc", &a.a, id), 0);
    assert_int_equal(start_fake(&f, &other, "cc", NULL, oid), 0);
    if (round == 0) {
      assert_int_equal(uvt_wait(f.reg, &w, id, 5, &a.a, close_from_wait), 0);
    } else {
      assert_int_equal(uvt_agent_dispose(&a.a, close_from_dispose), 0);
    }
    f.reg = NULL; /* closed from the callback; freed by the library */
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(g_closer.close_err, 0);
    assert_int_equal(g_closer.second_err, UVT_ECLOSING);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    assert_int_equal(g_closer.calls, 1);
    assert_int_equal(f.closed, 0);
    assert_int_equal(other.cancels, 1);
    assert_int_equal(other.releases, 1);
  }
}

/* ---------------------------------------------------------------------- */
/* L-3: every callback and hook runs on the loop thread, also when the
 * producer settles from another thread. */

typedef struct {
  uv_thread_t loop_thread;
  uv_thread_t worker;
  uvt_task_t *task;
  int worker_started;
  int bad_thread; /* hooks called off the loop thread */
  int hooks;
} thr_t;

static void thr_check(thr_t *p) {
  uv_thread_t self = uv_thread_self();
  p->hooks++;
  if (!uv_thread_equal(&self, &p->loop_thread))
    p->bad_thread++;
}

static void thr_main(void *arg) {
  thr_t *p = arg;
  uvt_outcome_t o;
  memset(&o, 0, sizeof(o));
  o.status = UVT_COMPLETED;
  o.detail = "from a thread";
  o.output = "thread output";
  o.output_len = strlen(o.output);
  uvt_task_settle(p->task, &o);
}

static int thr_cancel(uvt_task_t *t, const char *r) {
  (void)r;
  thr_check(uvt_task_arg(t));
  return 0;
}
static void thr_release(uvt_task_t *t) {
  thr_check(uvt_task_arg(t));
}
static void thr_settled(uvt_task_t *t) {
  thr_check(uvt_task_arg(t));
}

static int thr_run(uvt_task_t *t, void *arg, uvt_hooks_t *h) {
  thr_t *p = arg;
  thr_check(p);
  p->task = t;
  h->cancel = thr_cancel;
  h->release = thr_release;
  h->settled = thr_settled;
  if (uv_thread_create(&p->worker, thr_main, p) != 0)
    return UV_EAGAIN;
  p->worker_started = 1;
  return 0;
}

static void registry_loop_thread(void **state) {
  fixture_t f;
  thr_t p;
  lrec_t l;
  wrec_t w;
  closerec_t c;
  uvt_spec_t spec;
  char id[UVT_ID_MAX];
  uv_thread_t self = uv_thread_self();
  (void)state;
  fixture_init(&f, NULL);
  memset(&p, 0, sizeof(p));
  memset(&c, 0, sizeof(c));
  c.loop = &f.loop;
  p.loop_thread = self;
  lrec_init(&l);
  wrec_init(&w);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  memset(&spec, 0, sizeof(spec));
  spec.kind = "thr";
  spec.label = "thread";
  spec.run = thr_run;
  spec.arg = &p;
  assert_int_equal(uvt_start(f.reg, &spec, id), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 10000, NULL, wrec_cb), 0);
  tc_run_until(&f, &w.calls, 1);
  assert_int_equal(uv_thread_join(&p.worker), 0);
  assert_int_equal(uvt_registry_close(f.reg, closerec_cb, &c), 0);
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(c.calls, 1);
  assert_true(uv_thread_equal(&c.thread, &self));
  assert_int_equal(w.calls, 1);
  assert_true(uv_thread_equal(&w.thread, &self));
  assert_int_equal(w.status, 0);
  assert_string_equal(w.snap.detail, "from a thread");
  assert_int_equal(l.calls, 1);
  assert_int_equal(l.on_loop_thread, 1);
  assert_int_equal(p.hooks, 3); /* run, settled, release */
  assert_int_equal(p.bad_thread, 0);
  wrec_cleanup(&w);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-FORGET-1 (beyond test-feed.c): same-session callers may
 * forget; a stopping task is UV_EBUSY; forgetting inside the dispatch of
 * the task's own end, or while agent disposal holds it, works (R-FORGET-2,
 * test-forget.c has the details); forgotten numbers are not reused
 * (R-START-4). */

typedef struct {
  uvt_registry_t *reg;
  int err;
  int calls;
} forgetter_t;

static void forget_hook(lrec_t *r, const uvt_snapshot_t *snap,
                        uvt_agent_t *owner) {
  forgetter_t *fg = r->hook_data;
  (void)owner;
  fg->calls++;
  fg->err = uvt_forget(fg->reg, snap->id, owner);
}

static void registry_forget(void **state) {
  fixture_t f;
  fake_t t1, t2, t3, held, t5;
  char id5[UVT_ID_MAX];
  arec_t a, b, d;
  lrec_t l;
  forgetter_t fg;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX], id3[UVT_ID_MAX], hid[UVT_ID_MAX];
  uvt_snapshot_t s;
  uvt_snapshot_t *arr;
  size_t n;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&b);
  arec_init(&d);
  lrec_init(&l);
  memset(&fg, 0, sizeof(fg));
  fg.reg = f.reg;
  fg.err = 1;
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &d.a, "D", "s2"), 0);
  assert_int_equal(start_fake(&f, &t1, "fg", &a.a, id1), 0);
  assert_int_equal(start_fake(&f, &t2, "fg", &a.a, id2), 0);
  assert_int_equal(start_fake(&f, &t3, "fg", NULL, id3), 0);

  /* Same session, other agent: allowed once terminal. */
  assert_int_equal(fake_settle(&t1, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &t1);
  assert_int_equal(uvt_forget(f.reg, id1, &b.a), 0);
  assert_int_equal(t1.releases, 1);
  assert_int_equal(uvt_get(f.reg, id1, &a.a, &s), UVT_ENOTASK);
  assert_int_equal(uvt_list(f.reg, &a.a, &arr, &n), 0);
  assert_int_equal(n, 2); /* fg-2, fg-3 */
  uvt_snapshots_free(arr, n);

  /* Stopping is live: UV_EBUSY. */
  t2.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, id2, &a.a, NULL, NULL), 0);
  assert_int_equal(uvt_forget(f.reg, id2, &a.a), UV_EBUSY);
  t2.settle_on_cancel = 1;

  /* Inside the listener dispatch of its own end (unowned: anyone may). */
  l.hook = forget_hook;
  l.hook_data = &fg;
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(fake_settle(&t3, UVT_FAILED, NULL, NULL), 0);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(fg.calls, 1);
  assert_int_equal(fg.err, 0);
  assert_int_equal(uvt_get(f.reg, id3, NULL, &s), UVT_ENOTASK);
  assert_int_equal(t3.releases, 1);
  uvt_listener_stop(&l.l);
  assert_int_equal(uvt_forget(f.reg, id3, &d.a), UVT_ENOTASK);

  /* Held by agent disposal: the fence still applies; the owner's session
   * may forget it (it is going anyway). */
  assert_int_equal(start_fake(&f, &held, "fg", &d.a, hid), 0);
  held.settle_on_cancel = 0;
  assert_int_equal(uvt_agent_dispose(&d.a, arec_cb), 0);
  assert_int_equal(uvt_forget(f.reg, hid, NULL), UVT_EFOREIGN);
  assert_int_equal(uvt_forget(f.reg, hid, &d.a), UV_EBUSY); /* stopping */
  assert_int_equal(fake_settle(&held, UVT_KILLED, NULL, NULL), 0);
  tc_run_until(&f, &d.disposed, 1);
  assert_int_equal(held.releases, 1);

  /* Numbers are not reused after forget.  t5 lives until the close, which
   * cancels it. */
  assert_int_equal(start_fake(&f, &t5, "fg", NULL, id5), 0);
  assert_string_equal(id5, "fg-5");
  fixture_close(&f);
  lrec_cleanup(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(registry_new_close_empty),
      TC_TEST(registry_get),
      TC_TEST(registry_snapshot_copy),
      TC_TEST(registry_list),
      TC_TEST(registry_read_stream),
      TC_TEST(registry_read_marks_reported),
      TC_TEST(registry_read_final),
      TC_TEST(registry_read_producer_error),
      TC_TEST(registry_fence),
      TC_TEST(registry_register_agents),
      TC_TEST(registry_kill_cancel_error),
      TC_TEST(registry_kill_live),
      TC_TEST(registry_kill_stopping),
      TC_TEST(registry_kill_terminal),
      TC_TEST(registry_kill_settle_pending),
      TC_TEST(registry_metrics),
      TC_TEST(registry_metrics_kill_terminal),
      TC_TEST(registry_print),
      TC_TEST(registry_close_disposes),
      TC_TEST(registry_close_cancels_stopping),
      TC_TEST(registry_c18_loop_closes),
      TC_TEST(registry_c20_before_first_run),
      TC_TEST(registry_close_from_callbacks),
      TC_TEST(registry_loop_thread),
      TC_TEST(registry_forget),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
