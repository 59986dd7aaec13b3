/* Handles and requests already in use (R-BUSY-1, C-23): a caller-allocated
 * uvt_wait_t, uvt_listener_t, uvt_watch_t, uvt_agent_t or uvt_surface_t
 * that is in use is refused with UV_EBUSY and left as it was; a zeroed
 * handle, or one the library gave back (stop, detach, its callback), is
 * free. */
#include <string.h>

#include "test-core.h"

static int start_fake(fixture_t *f, fake_t *fk, uvt_agent_t *owner,
                      char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1;
  return fake_start(f->reg, fk, "busy", NULL, owner, id);
}

/* Counts loop iterations, unreferenced, so a loop that spins shows. */
typedef struct {
  uv_check_t check;
  unsigned long turns;
} spin_t;

static void spin_count(uv_check_t *c) {
  TC_CONTAINER(c, spin_t, check)->turns++;
}

static void spin_start(uv_loop_t *loop, spin_t *s) {
  s->turns = 0;
  assert_int_equal(uv_check_init(loop, &s->check), 0);
  assert_int_equal(uv_check_start(&s->check, spin_count), 0);
  uv_unref((uv_handle_t *)&s->check);
}

static void spin_stop(spin_t *s) {
  uv_close((uv_handle_t *)&s->check, NULL);
}

/* ---------------------------------------------------------------------- */
/* C-23: the same pending wait request submitted twice.  The second call is
 * UV_EBUSY; the first completes normally when the task ends; the loop does
 * not spin. */

static void busy_c23_wait_submitted_twice(void **state) {
  fixture_t f;
  fake_t fk;
  arec_t a;
  wrec_t w;
  spin_t spin;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  wrec_init(&w);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &fk, &a.a, id), 0);

  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, &a.a, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, &a.a, wrec_cb), UV_EBUSY);
  /* Refused before anything else: a shorter timeout or another id too. */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1, &a.a, wrec_cb), UV_EBUSY);
  assert_int_equal(uvt_wait(f.reg, &w.req, "busy-99", 1, &a.a, wrec_cb),
                   UV_EBUSY);
  spin_start(&f.loop, &spin);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(w.calls, 0);

  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "out"), 0);
  tc_run_until(&f, &w.calls, 1);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_COMPLETED);
  assert_int_equal(w.snap.reported, 1);
  /* Free again from its callback on. */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, &a.a, wrec_cb), 0);
  tc_run_until(&f, &w.calls, 2);
  assert_int_equal(w.status, 0);
  spin_stop(&spin);
  fixture_close(&f);
  /* A handful of turns, not thousands: nothing of ours kept the loop
   * spinning after the task ended. */
  assert_true(spin.turns < 50);
  assert_int_equal(w.calls, 2);
  wrec_cleanup(&w);
}

/* C-23 siblings: a wait in every in-use state is refused and then still
 * delivered exactly once: counted by settlement (status 0 pending), due
 * after an abort, due on a task that had already ended, expired (its
 * deadline passed, callback running next). */

typedef struct {
  wrec_t w;
  wrec_t other; /* resubmitted from w's callback while still in use */
  fixture_t *f;
  char id[UVT_ID_MAX];
  int err_self;  /* w resubmitted from its own callback */
  int err_other; /* `other` resubmitted from w's callback */
} resub_t;

static void resub_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  resub_t *r = TC_CONTAINER(req, resub_t, w.req);
  wrec_cb(req, status, snap);
  if (r->w.calls != 1)
    return;
  r->err_other = uvt_wait(r->f->reg, &r->other.req, r->id, 1000, NULL, wrec_cb);
  r->err_self = uvt_wait(r->f->reg, &r->w.req, r->id, 1000, NULL, resub_cb);
}

static void busy_wait_every_state(void **state) {
  fixture_t f;
  fake_t fk, done;
  wrec_t w;
  resub_t r;
  char id[UVT_ID_MAX], did[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_fake(&f, &fk, NULL, id), 0);
  assert_int_equal(start_fake(&f, &done, NULL, did), 0);
  assert_int_equal(fake_settle(&done, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &done);

  /* Due on a terminal task (delivered from the loop). */
  wrec_init(&w);
  assert_int_equal(uvt_wait(f.reg, &w.req, did, 1000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, did, 1000, NULL, wrec_cb), UV_EBUSY);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, NULL, wrec_cb), UV_EBUSY);
  tc_run_until(&f, &w.calls, 1);
  assert_int_equal(w.status, 0);

  /* Due after an abort. */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait_abort(&w.req), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, NULL, wrec_cb), UV_EBUSY);
  tc_run_until(&f, &w.calls, 2);
  assert_int_equal(w.status, UVT_EABORTED);

  /* Expired: resubmitted from its own callback is fine; another request
   * still in use is refused there too. */
  memset(&r, 0, sizeof(r));
  wrec_init(&r.w);
  wrec_init(&r.other);
  r.f = &f;
  memcpy(r.id, id, sizeof(r.id));
  assert_int_equal(uvt_wait(f.reg, &r.other.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &r.w.req, id, 1, NULL, resub_cb), 0);
  tc_run_until(&f, &r.w.calls, 1);
  assert_int_equal(r.w.status, UVT_EWAITTIMEOUT);
  assert_int_equal(r.err_self, 0);
  assert_int_equal(r.err_other, UV_EBUSY);

  /* Counted by settlement: both waits get status 0 once. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &r.w.calls, 2);
  tc_run_until(&f, &r.other.calls, 1);
  assert_int_equal(r.w.status, 0);
  assert_int_equal(r.other.status, 0);
  fixture_close(&f);
  assert_int_equal(w.calls, 2);
  assert_int_equal(r.w.calls, 2);
  assert_int_equal(r.other.calls, 1);
  wrec_cleanup(&w);
  wrec_cleanup(&r.w);
  wrec_cleanup(&r.other);
}

/* ---------------------------------------------------------------------- */
/* R-BUSY-1: listeners and watchers.  Started twice: UV_EBUSY, and the
 * listener is still called once per record (its link was not reset).
 * Started again from inside its own callback: UV_EBUSY while started, 0
 * after stopping itself there. */

typedef struct {
  lrec_t r;
  int restart_err;
  int stop_first;
} relisten_t;

static void relisten_hook(lrec_t *r, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner) {
  relisten_t *x = TC_CONTAINER(r, relisten_t, r);
  (void)snap;
  (void)owner;
  if (x->stop_first)
    uvt_listener_stop(&r->l);
  x->restart_err = uvt_listener_start(r->l.registry, &r->l, lrec_cb);
}

static int changes;
static void count_change(uvt_watch_t *w, const uvt_snapshot_t *s, int dropped) {
  (void)w;
  (void)s;
  (void)dropped;
  changes++;
}

static void busy_listener_and_watch(void **state) {
  fixture_t f;
  fake_t f1, f2, f3;
  relisten_t a, b;
  uvt_watch_t w;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX], id3[UVT_ID_MAX];
  (void)state;
  changes = 0;
  fixture_init(&f, NULL);
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(&w, 0, sizeof(w));
  lrec_init(&a.r);
  lrec_init(&b.r);
  a.r.hook = relisten_hook;
  b.r.hook = relisten_hook;
  b.stop_first = 1;
  a.restart_err = b.restart_err = 1;

  assert_int_equal(lrec_start(f.reg, &a.r), 0);
  assert_int_equal(lrec_start(f.reg, &a.r), UV_EBUSY);
  assert_int_equal(lrec_start(f.reg, &b.r), 0);
  assert_int_equal(uvt_watch_start(f.reg, &w, count_change), 0);
  assert_int_equal(uvt_watch_start(f.reg, &w, count_change), UV_EBUSY);

  assert_int_equal(start_fake(&f, &f1, NULL, id1), 0);
  assert_int_equal(start_fake(&f, &f2, NULL, id2), 0);
  assert_int_equal(fake_settle(&f1, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &a.r.calls, 1);
  assert_int_equal(a.restart_err, UV_EBUSY);
  assert_int_equal(b.restart_err, 0);
  assert_int_equal(fake_settle(&f2, UVT_FAILED, NULL, NULL), 0);
  tc_run_until(&f, &a.r.calls, 2);
  tc_run_until(&f, &b.r.calls, 2);
  /* Exactly one call each per record: no double link, no lost one. */
  assert_int_equal(lrec_count(&a.r, id1), 1);
  assert_int_equal(lrec_count(&a.r, id2), 1);
  assert_int_equal(lrec_count(&b.r, id1), 1);
  assert_int_equal(lrec_count(&b.r, id2), 1);

  /* Stopped, then free again. */
  uvt_listener_stop(&a.r.l);
  uvt_watch_stop(&w);
  a.r.hook = NULL;
  assert_int_equal(lrec_start(f.reg, &a.r), 0);
  assert_int_equal(uvt_watch_start(f.reg, &w, count_change), 0);
  assert_int_equal(start_fake(&f, &f3, NULL, id3), 0);
  assert_int_equal(fake_settle(&f3, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &a.r.calls, 3);
  assert_int_equal(lrec_count(&a.r, id3), 1);
  fixture_close(&f);
  /* registered+terminal for two tasks before the stop, then registered,
   * terminal for the third (dropped ones are silent once close began). */
  assert_int_equal(changes, 6);
  lrec_cleanup(&a.r);
  lrec_cleanup(&b.r);
}

/* ---------------------------------------------------------------------- */
/* R-BUSY-1: agents.  Registered (under any id), disposing, or with its
 * dispose callback still to come: UV_EBUSY, and the agent keeps its
 * registration.  Free from its dispose callback on: registering it again
 * there works. */

typedef struct {
  arec_t r;
  uvt_registry_t *reg;
  const char *again_id;
  int reregister_err;
} rereg_t;

static void rereg_cb(uvt_agent_t *a) {
  rereg_t *x = TC_CONTAINER(a, rereg_t, r.a);
  arec_cb(a);
  x->reregister_err = uvt_agent_register(x->reg, a, x->again_id, "s1");
}

static void busy_agent(void **state) {
  fixture_t f;
  rereg_t x, y;
  fake_t fk;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&x, 0, sizeof(x));
  memset(&y, 0, sizeof(y));
  x.reg = y.reg = f.reg;
  x.again_id = "A";
  y.again_id = "Y";
  x.reregister_err = y.reregister_err = 1;

  assert_int_equal(uvt_agent_register(f.reg, &x.r.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &x.r.a, "A", "s1"), UV_EBUSY);
  assert_int_equal(uvt_agent_register(f.reg, &x.r.a, "other", "s2"), UV_EBUSY);
  assert_string_equal(x.r.a.id, "A");
  assert_string_equal(x.r.a.session, "s1");
  assert_int_equal(start_fake(&f, &fk, &x.r.a, id), 0);
  fk.settle_on_cancel = 0;

  /* Disposing: busy; the task is still drained, the agent still owns it. */
  assert_int_equal(uvt_agent_dispose(&x.r.a, rereg_cb), 0);
  assert_int_equal(uvt_agent_register(f.reg, &x.r.a, "B", "s1"), UV_EBUSY);
  assert_int_equal(uvt_agent_dispose(&x.r.a, rereg_cb), UVT_ECLOSING);
  assert_int_equal(fake_settle(&fk, UVT_KILLED, NULL, NULL), 0);
  tc_run_until(&f, &x.r.disposed, 1);
  assert_int_equal(fk.releases, 1);
  assert_int_equal(x.reregister_err, 0);
  assert_string_equal(x.r.a.id, "A");

  /* An agent without tasks finishes its disposal inside the call; until
   * its callback has run it is still in use. */
  assert_int_equal(uvt_agent_register(f.reg, &y.r.a, "Y", "s1"), 0);
  assert_int_equal(uvt_agent_dispose(&y.r.a, rereg_cb), 0);
  assert_null(y.r.a.id);
  assert_int_equal(uvt_agent_register(f.reg, &y.r.a, "Y", "s1"), UV_EBUSY);
  assert_int_equal(uvt_agent_dispose(&y.r.a, rereg_cb), UVT_ECLOSING);
  tc_run_until(&f, &y.r.disposed, 1);
  assert_int_equal(y.reregister_err, 0);
  assert_string_equal(y.r.a.id, "Y");

  assert_int_equal(uvt_agent_dispose(&x.r.a, NULL), 0);
  assert_int_equal(uvt_agent_dispose(&y.r.a, NULL), 0);
  fixture_close(&f);
  assert_int_equal(x.r.disposed, 1);
  assert_int_equal(y.r.disposed, 1);
}

/* R-BUSY-1 with R-CLOSE-1: an agent the registry detached at close is
 * free (it may join a new registry), unless its after-close dispose
 * callback is still to come. */

static void count_closed(void *data) {
  (*(int *)data)++;
}

static void busy_agent_after_close(void **state) {
  uv_loop_t loop;
  uvt_registry_t *reg, *reg2;
  arec_t a, b;
  int closed = 0;
  (void)state;
  arec_init(&a);
  arec_init(&b);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uvt_registry_new(&loop, NULL, &reg), 0);
  assert_int_equal(uvt_registry_new(&loop, NULL, &reg2), 0);
  assert_int_equal(uvt_agent_register(reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(reg, &b.a, "B", "s1"), 0);
  /* In use in another registry: refused there too. */
  assert_int_equal(uvt_agent_register(reg2, &a.a, "A", "s1"), UV_EBUSY);
  assert_int_equal(uvt_registry_close(reg, count_closed, &closed), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed, 1);

  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(uvt_agent_register(reg2, &a.a, "A", "s1"), UV_EBUSY);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), UVT_ECLOSING);
  assert_int_equal(uvt_agent_register(reg2, &b.a, "B", "s2"), 0);
  assert_string_equal(b.a.session, "s2");
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(uvt_agent_register(reg2, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_registry_close(reg2, count_closed, &closed), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed, 2);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---------------------------------------------------------------------- */
/* R-BUSY-1: surfaces.  Attached twice: UV_EBUSY, and the count is still
 * one (a detach makes starts fail again); free after its detach. */

static void busy_surface(void **state) {
  fixture_t f;
  uvt_surface_t s;
  fake_t fk;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  uvt_surface_detach(&f.surface);
  memset(&s, 0, sizeof(s));
  assert_int_equal(uvt_surface_attach(f.reg, &s, "ui"), 0);
  assert_int_equal(uvt_surface_attach(f.reg, &s, "ui"), UV_EBUSY);
  assert_int_equal(uvt_surface_attach(f.reg, &s, "other"), UV_EBUSY);
  assert_string_equal(s.name, "ui");
  uvt_surface_detach(&s);
  assert_int_equal(start_fake(&f, &fk, NULL, id), UVT_ENOSURFACE);
  assert_int_equal(uvt_surface_attach(f.reg, &s, "ui"), 0);
  assert_int_equal(start_fake(&f, &fk, NULL, id), 0);
  fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(busy_c23_wait_submitted_twice), TC_TEST(busy_wait_every_state),
      TC_TEST(busy_listener_and_watch),       TC_TEST(busy_agent),
      TC_TEST(busy_agent_after_close),        TC_TEST(busy_surface),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
