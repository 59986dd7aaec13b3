/* uvt_forget from inside callbacks (R-FORGET-2): the record leaves lookups
 * at once and is dropped (release hook, the feed's dropped change) once
 * the dispatch of its end is over; from a callback that comes after that
 * dispatch, at once. */
#include <string.h>

#include "test-core.h"

typedef struct {
  uvt_registry_t *reg;
  fake_t *fk;
  char id[UVT_ID_MAX];
  int forget_err;
  int forget_again_err;
  int get_err;
  int releases_inside; /* the fake's releases right after the forget */
  int calls;
} forgetter_t;

static void forget_now(forgetter_t *g) {
  uvt_snapshot_t s;
  g->calls++;
  g->forget_err = uvt_forget(g->reg, g->id, NULL);
  g->releases_inside = g->fk->releases;
  g->get_err = uvt_get(g->reg, g->id, NULL, &s);
  if (g->get_err == 0)
    uvt_snapshot_cleanup(&s);
  g->forget_again_err = uvt_forget(g->reg, g->id, NULL);
}

/* A wait recorder that forgets first, then reads the snapshot it was
 * given (valgrind: the view stays valid for the whole callback). */
typedef struct {
  wrec_t w;
  forgetter_t g;
} fwait_t;

static void fwait_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  fwait_t *x = TC_CONTAINER(req, fwait_t, w.req);
  forget_now(&x->g);
  wrec_cb(req, status, snap);
}

static void forget_hook(lrec_t *r, const uvt_snapshot_t *snap,
                        uvt_agent_t *owner) {
  (void)snap;
  (void)owner;
  forget_now(r->hook_data);
}

/* Records, in a later listener or wait, what the record looks like. */
typedef struct {
  lrec_t r;
  uvt_registry_t *reg;
  fake_t *fk;
  int get_err;
  int releases;
} after_t;

static void after_hook(lrec_t *r, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner) {
  after_t *a = TC_CONTAINER(r, after_t, r);
  uvt_snapshot_t s;
  (void)owner;
  a->get_err = uvt_get(a->reg, snap->id, NULL, &s);
  if (a->get_err == 0)
    uvt_snapshot_cleanup(&s);
  a->releases = a->fk->releases;
}

/* R-FORGET-2 from the wait callback that reports the end (a counted wait,
 * delivered by the dispatch), with a second wait on the same task after
 * it: the second still gets status 0 and the terminal snapshot, the
 * record is out of lookups for it, and the drop comes after both. */
static void forget_from_wait_callback(void **state) {
  fixture_t f;
  fake_t fk;
  fwait_t first;
  wrec_t second;
  after_t l;
  char id[UVT_ID_MAX];
  uvt_metrics_t m;
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  memset(&first, 0, sizeof(first));
  memset(&l, 0, sizeof(l));
  wrec_init(&first.w);
  wrec_init(&second);
  lrec_init(&l.r);
  l.reg = f.reg;
  l.fk = &fk;
  assert_int_equal(fake_start(f.reg, &fk, "fw", NULL, NULL, id), 0);
  first.g.reg = f.reg;
  first.g.fk = &fk;
  memcpy(first.g.id, id, sizeof(first.g.id));
  assert_int_equal(uvt_wait(f.reg, &first.w.req, id, 60000, NULL, fwait_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &second.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(lrec_start(f.reg, &l.r), 0);
  l.r.hook = after_hook;
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "out"), 0);
  tc_run_until(&f, &second.calls, 1);

  assert_int_equal(l.r.calls, 1); /* listeners before waits (R-DONE-3) */
  assert_int_equal(l.get_err, 0);
  assert_int_equal(first.g.calls, 1);
  assert_int_equal(first.g.forget_err, 0);
  assert_int_equal(first.g.get_err, UVT_ENOTASK);
  assert_int_equal(first.g.forget_again_err, UVT_ENOTASK);
  assert_int_equal(first.g.releases_inside, 0); /* after the dispatch */
  assert_int_equal(first.w.status, 0);
  assert_string_equal(first.w.snap.id, id);
  assert_int_equal(first.w.snap.status, UVT_COMPLETED);
  assert_int_equal(second.calls, 1);
  assert_int_equal(second.status, 0);
  assert_string_equal(second.snap.detail, "exit code: 0");
  assert_int_equal(second.snap.reported, 1);
  assert_int_equal(fk.releases, 1);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.records, 0);
  fixture_close(&f);
  assert_int_equal(fk.releases, 1);
  wrec_cleanup(&first.w);
  wrec_cleanup(&second);
  lrec_cleanup(&l.r);
}

/* R-FORGET-2 from the listener told about the end: later listeners still
 * get the terminal snapshot (the record is out of lookups for them), the
 * pending wait still gets status 0, the drop comes after the dispatch. */
static void forget_from_listener(void **state) {
  fixture_t f;
  fake_t fk;
  lrec_t first;
  after_t later;
  forgetter_t g;
  wrec_t w;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  memset(&g, 0, sizeof(g));
  memset(&later, 0, sizeof(later));
  lrec_init(&first);
  lrec_init(&later.r);
  wrec_init(&w);
  assert_int_equal(fake_start(f.reg, &fk, "fl", NULL, NULL, id), 0);
  g.reg = f.reg;
  g.fk = &fk;
  memcpy(g.id, id, sizeof(g.id));
  first.hook = forget_hook;
  first.hook_data = &g;
  later.r.hook = after_hook;
  later.reg = f.reg;
  later.fk = &fk;
  assert_int_equal(lrec_start(f.reg, &first), 0);
  assert_int_equal(lrec_start(f.reg, &later.r), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(fake_settle(&fk, UVT_FAILED, "boom", NULL), 0);
  tc_run_until(&f, &w.calls, 1);

  assert_int_equal(g.forget_err, 0);
  assert_int_equal(g.get_err, UVT_ENOTASK);
  assert_int_equal(g.releases_inside, 0);
  assert_int_equal(later.r.calls, 1);
  assert_int_equal(later.get_err, UVT_ENOTASK);
  assert_int_equal(later.releases, 0);
  assert_string_equal(later.r.snaps[0].detail, "boom");
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_FAILED);
  assert_int_equal(fk.releases, 1);
  fixture_close(&f);
  lrec_cleanup(&first);
  lrec_cleanup(&later.r);
  wrec_cleanup(&w);
}

/* R-FORGET-2 from a watch callback (the terminal transition reaches
 * watchers after the dispatch) and from a wait on a task that had already
 * ended: the dispatch is over, so the record is dropped inside the call;
 * the watcher then gets the dropped transition. */

typedef struct {
  uvt_watch_t w;
  forgetter_t g;
  int terminal, dropped;
} fwatch_t;

static void fwatch_cb(uvt_watch_t *w, const uvt_snapshot_t *snap, int dropped) {
  fwatch_t *x = TC_CONTAINER(w, fwatch_t, w);
  if (dropped) {
    x->dropped++;
    return;
  }
  if (!uvt_status_is_terminal(snap->status))
    return;
  x->terminal++;
  forget_now(&x->g);
  /* The snapshot is still readable after the drop. */
  if (strcmp(snap->id, x->g.id) != 0)
    x->terminal = 100;
}

static void forget_from_watch_and_late_wait(void **state) {
  fixture_t f;
  fake_t fk, done;
  fwatch_t x;
  fwait_t late;
  char id[UVT_ID_MAX], did[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  memset(&done, 0, sizeof(done));
  memset(&x, 0, sizeof(x));
  memset(&late, 0, sizeof(late));
  wrec_init(&late.w);
  assert_int_equal(fake_start(f.reg, &fk, "fw", NULL, NULL, id), 0);
  assert_int_equal(fake_start(f.reg, &done, "fw", NULL, NULL, did), 0);
  x.g.reg = f.reg;
  x.g.fk = &fk;
  memcpy(x.g.id, id, sizeof(x.g.id));
  assert_int_equal(uvt_watch_start(f.reg, &x.w, fwatch_cb), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &x.dropped, 1);
  assert_int_equal(x.terminal, 1);
  assert_int_equal(x.g.forget_err, 0);
  assert_int_equal(x.g.releases_inside, 1);
  assert_int_equal(x.g.get_err, UVT_ENOTASK);

  assert_int_equal(fake_settle(&done, UVT_KILLED, NULL, NULL), 0);
  tc_run_settled(&f, &done);
  late.g.reg = f.reg;
  late.g.fk = &done;
  memcpy(late.g.id, did, sizeof(late.g.id));
  assert_int_equal(uvt_wait(f.reg, &late.w.req, did, 60000, NULL, fwait_cb), 0);
  tc_run_until(&f, &late.w.calls, 1);
  assert_int_equal(late.g.forget_err, 0);
  assert_int_equal(late.g.releases_inside, 1);
  assert_int_equal(late.w.status, 0);
  assert_string_equal(late.w.snap.id, did);
  assert_int_equal(late.w.snap.status, UVT_KILLED);
  fixture_close(&f);
  wrec_cleanup(&late.w);
}

/* R-FORGET-2 from the producer's settled hook (before the dispatch) and
 * while an agent disposal holds the record (waiting for its quiesce): 0,
 * out of lookups at once, dropped by whoever holds it. */

static void forget_inside(fake_t *fk, int hook) {
  forgetter_t *g = fk->inside_data;
  if (hook == FAKE_SETTLED)
    forget_now(g);
}

static void forget_from_settled_and_disposal(void **state) {
  fixture_t f;
  fake_t fk, held;
  forgetter_t g, h;
  lrec_t l;
  arec_t a;
  char id[UVT_ID_MAX], hid[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  memset(&held, 0, sizeof(held));
  memset(&g, 0, sizeof(g));
  memset(&h, 0, sizeof(h));
  lrec_init(&l);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  fk.inside = forget_inside;
  fk.inside_data = &g;
  assert_int_equal(fake_start(f.reg, &fk, "fs", NULL, NULL, id), 0);
  g.reg = f.reg;
  g.fk = &fk;
  memcpy(g.id, id, sizeof(g.id));
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(g.forget_err, 0);
  assert_int_equal(g.get_err, UVT_ENOTASK);
  assert_int_equal(g.releases_inside, 0);
  assert_int_equal(lrec_count(&l, id), 1);
  assert_int_equal(fk.releases, 1);

  /* Held by a disposal that waits for the quiesce. */
  held.has_quiesce = 1;
  held.quiesce_ret = 1;
  assert_int_equal(fake_start(f.reg, &held, "fs", NULL, &a.a, hid), 0);
  assert_int_equal(fake_settle(&held, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &held);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(held.quiesces, 1);
  h.reg = f.reg;
  h.fk = &held;
  memcpy(h.id, hid, sizeof(h.id));
  forget_now(&h); /* caller NULL: the task is owned; use the owner */
  assert_int_equal(h.forget_err, UVT_EFOREIGN);
  assert_int_equal(uvt_forget(f.reg, hid, &a.a), 0);
  assert_int_equal(uvt_forget(f.reg, hid, &a.a), UVT_ENOTASK);
  assert_int_equal(held.releases, 0);
  uvt_task_quiescent(held.task);
  assert_int_equal(held.releases, 1);
  assert_int_equal(held.quiesces, 1);
  tc_run_until(&f, &a.disposed, 1);
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* N-8: uvt_held_bytes() is 0 while a task runs, its output's size once
 * it ended (reads do not change it), and the lookup's errors. */
static void held_bytes(void **state) {
  fixture_t f;
  fake_t fk;
  uvt_read_t r;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(f.reg, &fk, "fw", NULL, NULL, id), 0);
  assert_int_equal(uvt_held_bytes(f.reg, id, NULL), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, "twelve bytes"), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(uvt_held_bytes(f.reg, id, NULL), 12);
  memset(&r, 0, sizeof(r));
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  uvt_read_cleanup(&r);
  assert_int_equal(uvt_held_bytes(f.reg, id, NULL), 12);
  assert_int_equal(uvt_held_bytes(f.reg, "fw-99", NULL), UVT_ENOTASK);
  assert_int_equal(uvt_held_bytes(NULL, id, NULL), UV_EINVAL);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  assert_int_equal(uvt_held_bytes(f.reg, id, NULL), UVT_ENOTASK);
  fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(forget_from_wait_callback),
      TC_TEST(forget_from_listener),
      TC_TEST(forget_from_watch_and_late_wait),
      TC_TEST(forget_from_settled_and_disposal),
      TC_TEST(held_bytes),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
