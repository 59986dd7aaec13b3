/* Agent disposal (R-AGENT-1..4, R-OWN-3, R-CLOSE-1 detach, R-CLOSE-3,
 * C-19). */
#include <stdio.h>
#include <string.h>

#include "test-core.h"

static int start_fake(fixture_t *f, fake_t *fk, const char *kind,
                      const char *label, uvt_agent_t *owner,
                      char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1;
  return fake_start(f->reg, fk, kind, label, owner, id);
}

typedef struct {
  fake_t *fk;
  int seq;
} late_settle_t;

static void late_settle(void *arg) {
  late_settle_t *ls = arg;
  ls->seq = tc_next();
  fake_settle(ls->fk, UVT_KILLED, "signal: SIGTERM", NULL);
}

/* ---------------------------------------------------------------------- */
/* R-AGENT-1: refuse new starts; take the agent's tasks; mark them reported;
 * cancel live ones with "owner disposed"; wait for each to settle; drop the
 * records; unregister; then the callback, once. */

static void agent_dispose_drains(void **state) {
  fixture_t f;
  fake_t t1, t2, t3, no;
  arec_t a;
  lrec_t l;
  wrec_t w;
  late_settle_t ls;
  tc_timer_t timer;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX], id3[UVT_ID_MAX], nid[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  lrec_init(&l);
  wrec_init(&w);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &t1, "ag", NULL, &a.a, id1), 0);
  assert_int_equal(start_fake(&f, &t2, "ag", NULL, &a.a, id2), 0);
  t2.settle_on_cancel = 0; /* settles 30 ms later */
  assert_int_equal(start_fake(&f, &t3, "ag", NULL, &a.a, id3), 0);
  assert_int_equal(fake_settle(&t3, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &t3);
  assert_int_equal(l.calls, 1);
  assert_int_equal(lrec_find(&l, id3)->reported, 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id2, 60000, &a.a, wrec_cb), 0);

  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(a.disposed, 0); /* never inside the call */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), UVT_ECLOSING);
  assert_int_equal(start_fake(&f, &no, "ag", NULL, &a.a, nid), UVT_ECLOSING);
  assert_int_equal(no.runs, 0);

  memset(&ls, 0, sizeof(ls));
  ls.fk = &t2;
  tc_timer_start(&f.loop, &timer, 30, late_settle, &ls);
  tc_run_until(&f, &a.disposed, 1);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a.disposed, 1);
  assert_true(ls.seq > 0 && ls.seq < a.seq); /* waited for t2 */
  assert_null(a.id_at_cb);
  assert_null(a.session_at_cb);
  assert_null(a.a.id);
  assert_null(a.a.session);

  assert_int_equal(t1.cancels, 1);
  assert_string_equal(t1.last_reason, "owner disposed");
  assert_int_equal(t2.cancels, 1);
  assert_string_equal(t2.last_reason, "owner disposed");
  assert_int_equal(t3.cancels, 0);
  assert_int_equal(t1.releases, 1);
  assert_int_equal(t2.releases, 1);
  assert_int_equal(t3.releases, 1);
  assert_int_equal(uvt_get(f.reg, id1, NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, id2, NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, id3, NULL, &s), UVT_ENOTASK);

  /* Every record reached the listener once, marked reported. */
  assert_int_equal(l.calls, 3);
  assert_int_equal(lrec_find(&l, id1)->reported, 1);
  assert_string_equal(lrec_find(&l, id1)->kill_reason, "owner disposed");
  assert_int_equal(lrec_find(&l, id2)->reported, 1);
  assert_int_equal(lrec_find(&l, id2)->status, UVT_KILLED);
  assert_true(lrec_seq_of(&l, id2) < a.seq);
  /* The pending wait got the terminal snapshot before the callback. */
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_true(w.seq < a.seq);
  assert_int_equal(f.warnings, 0);

  /* Unregistered: the id is free, the same object may register again. */
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s2"), 0);
  assert_int_equal(start_fake(&f, &no, "ag", NULL, &a.a, nid), 0);
  assert_string_equal(nid, "ag-4");
  fixture_close(&f);
  wrec_cleanup(&w);
  lrec_cleanup(&l);
}

/* R-AGENT-1: an agent without tasks: the callback runs once, later. */
static void agent_dispose_empty(void **state) {
  fixture_t f;
  arec_t a, never;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&never);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(a.disposed, 0);
  tc_run_until(&f, &a.disposed, 1);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a.disposed, 1);
  /* NULL callback is allowed. */
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a.disposed, 1);
  fixture_close(&f);
  assert_int_equal(never.disposed, 0);
}

/* ---------------------------------------------------------------------- */
/* R-AGENT-2: only tasks owned by this exact agent object are drained. */

static void agent_dispose_exact_owner(void **state) {
  fixture_t f;
  fake_t ta, tb, tu;
  arec_t a, b;
  char ida[UVT_ID_MAX], idb[UVT_ID_MAX], idu[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&b);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "shared"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "shared"), 0);
  assert_int_equal(start_fake(&f, &ta, "x", NULL, &a.a, ida), 0);
  assert_int_equal(start_fake(&f, &tb, "x", NULL, &b.a, idb), 0);
  assert_int_equal(start_fake(&f, &tu, "x", NULL, NULL, idu), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(ta.cancels, 1);
  assert_int_equal(uvt_get(f.reg, ida, &b.a, &s), UVT_ENOTASK);
  assert_int_equal(tb.cancels, 0);
  assert_int_equal(tu.cancels, 0);
  assert_int_equal(uvt_get(f.reg, idb, &b.a, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_get(f.reg, idu, NULL, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);
  /* B still starts tasks. */
  assert_int_equal(start_fake(&f, &ta, "x", NULL, &b.a, ida), 0);
  fixture_close(&f);
}

/* R-OWN-3 across disposal: the id is taken until disposal completes. */
static void agent_register_while_disposing(void **state) {
  fixture_t f;
  fake_t t;
  arec_t a, a2;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&a2);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &a2.a, "A", "s1"), UV_EEXIST);
  assert_int_equal(start_fake(&f, &t, "x", NULL, &a.a, id), 0);
  t.settle_on_cancel = 0;
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a.disposed, 0);
  assert_int_equal(fake_settle(&t, UVT_KILLED, NULL, NULL), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(uvt_agent_register(f.reg, &a2.a, "A", "s1"), 0);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-AGENT-3: a cancel that fails during teardown force-fails the record,
 * logs a warning naming the task, and disposal goes on without it. */

static void agent_cancel_fails(void **state) {
  fixture_t f;
  fake_t bad, good;
  arec_t a;
  lrec_t l;
  char bid[UVT_ID_MAX], gid[UVT_ID_MAX];
  uvt_metrics_t m;
  const uvt_snapshot_t *s;
  char expect[256];
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &bad, "stuck", "cannot stop", &a.a, bid), 0);
  bad.cancel_error = UV_EPERM;
  assert_int_equal(start_fake(&f, &good, "fine", NULL, &a.a, gid), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(bad.cancels, 1);
  assert_int_equal(bad.releases, 1);
  assert_int_equal(good.releases, 1);

  s = lrec_find(&l, bid);
  assert_non_null(s);
  assert_int_equal(lrec_count(&l, bid), 1);
  assert_int_equal(s->status, UVT_FAILED);
  snprintf(expect, sizeof(expect),
           "cancel failed during teardown; work may be orphaned: %s",
           uvt_err_name(UV_EPERM));
  assert_string_equal(s->detail, expect);
  assert_int_equal(s->reported, 1);
  assert_string_equal(s->kill_reason, "owner disposed");
  assert_int_equal(lrec_find(&l, gid)->status, UVT_KILLED);

  assert_int_equal(f.warnings, 1);
  assert_true(tc_contains(f.last_warning, bid));
  assert_true(tc_contains(f.last_warning, "orphaned"));
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.force_failed, 1);

  /* The producer settles late: harmless, no second notice. */
  assert_int_equal(fake_settle(&bad, UVT_KILLED, NULL, NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(lrec_count(&l, bid), 1);
  assert_int_equal(bad.settled_hooks, 0);
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-AGENT-4: a cancelled task that does not settle within
 * teardown_grace_ms is force-failed, logged with id, kind and label, and
 * disposal completes; a late settle is harmless. */

static void agent_grace_bound(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t hang, ok;
  arec_t a;
  lrec_t l;
  char hid[UVT_ID_MAX], oid[UVT_ID_MAX];
  uint64_t t0, elapsed_ms;
  uvt_metrics_t m;
  const uvt_snapshot_t *s;
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 100;
  fixture_init(&f, &o);
  arec_init(&a);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &hang, "hangkind", "hang label", &a.a, hid),
                   0);
  hang.settle_on_cancel = 0;
  assert_int_equal(start_fake(&f, &ok, "okkind", NULL, &a.a, oid), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  t0 = uv_hrtime();
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  elapsed_ms = (uv_hrtime() - t0) / 1000000u;
  assert_int_equal(a.disposed, 1);
  assert_true(elapsed_ms >= 100); /* R-TIME-1: never early */
  assert_int_equal(hang.cancels, 1);
  assert_int_equal(hang.releases, 1);

  s = lrec_find(&l, hid);
  assert_non_null(s);
  assert_int_equal(s->status, UVT_FAILED);
  /* R-TIME-1: the detail names what elapsed, at least the grace. */
  assert_true(tc_grace_in(s->detail) >= 100);
  assert_true(tc_grace_in(s->detail) <= elapsed_ms);
  assert_int_equal(f.warnings, 1);
  assert_true(tc_contains(f.last_warning, hid));
  assert_true(tc_contains(f.last_warning, "hangkind"));
  assert_true(tc_contains(f.last_warning, "hang label"));
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.force_failed, 1);

  assert_int_equal(fake_settle(&hang, UVT_KILLED, NULL, NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(lrec_count(&l, hid), 1);
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* R-AGENT-4: teardown_grace_ms 0 waits for ever. */
typedef struct {
  arec_t *a;
  int disposed_at_timer;
  fake_t *fk;
} forever_t;

static void forever_check(void *arg) {
  forever_t *fv = arg;
  fv->disposed_at_timer = fv->a->disposed;
  fake_settle(fv->fk, UVT_KILLED, NULL, NULL);
}

static void agent_grace_zero_waits(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t hang;
  arec_t a;
  forever_t fv;
  tc_timer_t t;
  char id[UVT_ID_MAX];
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 0;
  fixture_init(&f, &o);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &hang, "x", NULL, &a.a, id), 0);
  hang.settle_on_cancel = 0;
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  fv.a = &a;
  fv.fk = &hang;
  fv.disposed_at_timer = -1;
  tc_timer_start(&f.loop, &t, 150, forever_check, &fv);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(fv.disposed_at_timer, 0);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(f.warnings, 0);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* Quiesce (header, P-KILL-4 support): disposal asks a terminal task to stop
 * what its work left behind and waits for uvt_task_quiescent(). */

typedef struct {
  uvt_task_t *task;
  int quiesces;
  int quiesce_ret;
  int releases;
  int seq_quiescent;
} qp_t;

static int qp_cancel(uvt_task_t *t, const char *r) {
  (void)t;
  (void)r;
  return 0;
}
static int qp_quiesce(uvt_task_t *t) {
  qp_t *q = uvt_task_arg(t);
  q->quiesces++;
  return q->quiesce_ret;
}
static void qp_release(uvt_task_t *t) {
  qp_t *q = uvt_task_arg(t);
  q->releases++;
}
static int qp_run(uvt_task_t *t, void *arg, uvt_hooks_t *h) {
  qp_t *q = arg;
  q->task = t;
  h->cancel = qp_cancel;
  h->quiesce = qp_quiesce;
  h->release = qp_release;
  return 0;
}

static void qp_now_quiet(void *arg) {
  qp_t *q = arg;
  q->seq_quiescent = tc_next();
  uvt_task_quiescent(q->task);
}

static void agent_quiesce(void **state) {
  fixture_t f;
  qp_t q0, q1;
  arec_t a;
  uvt_spec_t spec;
  uvt_outcome_t o;
  tc_timer_t t;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  memset(&q0, 0, sizeof(q0));
  memset(&q1, 0, sizeof(q1));
  q1.quiesce_ret = 1;
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  memset(&spec, 0, sizeof(spec));
  spec.kind = "q";
  spec.label = "quiesce";
  spec.owner = &a.a;
  spec.run = qp_run;
  spec.arg = &q0;
  assert_int_equal(uvt_start(f.reg, &spec, id), 0);
  spec.arg = &q1;
  assert_int_equal(uvt_start(f.reg, &spec, id), 0);
  memset(&o, 0, sizeof(o));
  o.status = UVT_COMPLETED;
  assert_int_equal(uvt_task_settle(q0.task, &o), 0);
  assert_int_equal(uvt_task_settle(q1.task, &o), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_timer_start(&f.loop, &t, 30, qp_now_quiet, &q1);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(q0.quiesces, 1);
  assert_int_equal(q1.quiesces, 1);
  assert_true(q1.seq_quiescent > 0 && q1.seq_quiescent < a.seq);
  assert_int_equal(q0.releases, 1);
  assert_int_equal(q1.releases, 1);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-CLOSE-1: the registry detaches from agents still registered; a later
 * uvt_agent_dispose on them calls its callback and touches nothing freed
 * (valgrind); an agent never disposed leaks nothing. */

static void closed_cb(void *data) {
  (*(int *)data)++;
}

static void agent_dispose_after_registry_close(void **state) {
  uv_loop_t loop;
  uvt_registry_t *reg;
  uvt_surface_t s = {0};
  arec_t a, b;
  lrec_t l;
  fake_t t;
  char id[UVT_ID_MAX];
  int closed = 0;
  (void)state;
  lrec_init(&l);
  arec_init(&a);
  arec_init(&b);
  memset(&s, 0, sizeof(s));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uvt_registry_new(&loop, NULL, &reg), 0);
  assert_int_equal(uvt_surface_attach(reg, &s, "ui"), 0);
  assert_int_equal(lrec_start(reg, &l), 0);
  assert_int_equal(uvt_agent_register(reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(reg, &b.a, "B", "s1"), 0);
  memset(&t, 0, sizeof(t));
  t.settle_on_cancel = 1;
  assert_int_equal(fake_start(reg, &t, "x", NULL, &a.a, id), 0);
  assert_int_equal(uvt_registry_close(reg, closed_cb, &closed), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed, 1);
  assert_int_equal(t.cancels, 1);
  assert_string_equal(t.last_reason, "tasks service disposed");
  assert_int_equal(t.releases, 1);

  /* The registry is gone; dispose only calls back, later. */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(a.disposed, 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(a.disposed, 1);
  assert_null(a.a.id);
  assert_null(a.a.session);
  /* B is never disposed: nothing of it may leak (checked by teardown).
   * The surface and listener left attached: detach/stop are safe after
   * the registry closed (header). */
  uvt_surface_detach(&s);
  uvt_listener_stop(&l.l);
  uvt_surface_detach(&s);
  assert_int_equal(l.calls, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  lrec_cleanup(&l);
}

/* Dispose in progress when the registry closes: both callbacks once, the
 * stuck producer bounded by the grace, a late settle harmless. */
static void agent_dispose_then_registry_close(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t hang;
  arec_t a;
  char id[UVT_ID_MAX];
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 100;
  fixture_init(&f, &o);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &hang, "x", NULL, &a.a, id), 0);
  hang.settle_on_cancel = 0;
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  fixture_close(&f);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(hang.releases, 1);
  assert_true(f.warnings >= 1);
  assert_int_equal(fake_settle(&hang, UVT_KILLED, NULL, NULL), 0);
}

/* ---------------------------------------------------------------------- */
/* R-CLOSE-3: dispose requested from inside our callbacks: a dispose
 * callback disposes another agent, whose callback closes the registry; a
 * wait callback disposes an agent. */

typedef struct {
  arec_t rec;
  arec_t *next;        /* dispose this one from our callback */
  uvt_registry_t *reg; /* or close this registry */
  int err;
  int close_calls;
} chain_t;

static void chain_closed(void *data) {
  chain_t *c = data;
  c->close_calls++;
}

static void chain_cb(uvt_agent_t *a) {
  chain_t *c = TC_CONTAINER(TC_CONTAINER(a, arec_t, a), chain_t, rec);
  arec_cb(a);
  if (c->next != NULL)
    c->err = uvt_agent_dispose(&c->next->a, arec_cb);
  else if (c->reg != NULL)
    c->err = uvt_registry_close(c->reg, chain_closed, c);
}

typedef struct {
  wrec_t w;
  chain_t *target;
  int err;
} wdisp_t;

static void wdisp_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *s) {
  wdisp_t *wd = TC_CONTAINER(TC_CONTAINER(req, wrec_t, req), wdisp_t, w);
  wrec_cb(req, status, s);
  wd->err = uvt_agent_dispose(&wd->target->rec.a, chain_cb);
}

static void agent_dispose_inside_callbacks(void **state) {
  fixture_t f;
  fake_t t1, t2;
  chain_t first, last;
  arec_t middle;
  wdisp_t wd;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&first, 0, sizeof(first));
  memset(&last, 0, sizeof(last));
  memset(&wd, 0, sizeof(wd));
  arec_init(&middle);
  wrec_init(&wd.w);
  assert_int_equal(uvt_agent_register(f.reg, &first.rec.a, "F", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &middle.a, "M", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &last.rec.a, "L", "s1"), 0);
  assert_int_equal(start_fake(&f, &t1, "x", NULL, &first.rec.a, id1), 0);
  assert_int_equal(start_fake(&f, &t2, "x", NULL, &last.rec.a, id2), 0);
  /* wait cb -> dispose F; F's cb -> dispose M; ... L disposed directly and
   * its cb closes the registry once F's chain has run. */
  first.next = &middle;
  last.reg = f.reg;
  wd.target = &first;
  assert_int_equal(uvt_wait(f.reg, &wd.w.req, id1, 5, &first.rec.a, wdisp_cb),
                   0);
  tc_run_until(&f, &middle.disposed, 1);
  assert_int_equal(wd.err, 0);
  assert_int_equal(first.err, 0);
  assert_int_equal(first.rec.disposed, 1);
  assert_int_equal(middle.disposed, 1);
  assert_int_equal(t1.cancels, 1);
  assert_int_equal(uvt_agent_dispose(&last.rec.a, chain_cb), 0);
  f.reg = NULL;
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(last.rec.disposed, 1);
  assert_int_equal(last.err, 0);
  assert_int_equal(last.close_calls, 1);
  assert_int_equal(t2.releases, 1);
  wrec_cleanup(&wd.w);
}

/* ---------------------------------------------------------------------- */
/* C-19: a producer whose cancel returns 0 but never settles; registry close
 * with teardown_grace_ms 300: the close callback runs after about 300 ms,
 * the record was force-failed "work may be orphaned", a warning names the
 * task; the orphan settles later, harmlessly, without a leak. */

typedef struct {
  int calls;
  uint64_t at;
} c19_close_t;

static void c19_closed(void *data) {
  c19_close_t *c = data;
  c->calls++;
  c->at = uv_hrtime();
}

static void agent_c19_orphan(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t hang;
  arec_t a;
  wrec_t w;
  c19_close_t c;
  char id[UVT_ID_MAX];
  uint64_t t0;
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 300;
  fixture_init(&f, &o);
  arec_init(&a);
  wrec_init(&w);
  memset(&c, 0, sizeof(c));
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_fake(&f, &hang, "stuck", "never stops", &a.a, id), 0);
  hang.settle_on_cancel = 0;
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, &a.a, wrec_cb), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  t0 = uv_hrtime();
  assert_int_equal(uvt_registry_close(f.reg, c19_closed, &c), 0);
  f.reg = NULL;
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(c.calls, 1);
  assert_true(c.at - t0 >= 300u * 1000000u); /* R-TIME-1: never early */
  assert_int_equal(hang.cancels, 1);
  assert_string_equal(hang.last_reason, "tasks service disposed");
  assert_int_equal(hang.releases, 1);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.snap.status, UVT_FAILED);
  assert_true(tc_grace_in(w.snap.detail) >= 300);
  assert_true(tc_grace_in(w.snap.detail) * 1000000u <= c.at - t0);
  assert_true(f.warnings >= 1);
  assert_true(tc_contains(f.last_warning, id));
  assert_true(tc_contains(f.last_warning, "orphaned"));
  /* The orphan settles after the registry is gone. */
  assert_int_equal(fake_settle(&hang, UVT_KILLED, NULL, NULL), 0);
  wrec_cleanup(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(agent_dispose_drains),
      TC_TEST(agent_dispose_empty),
      TC_TEST(agent_dispose_exact_owner),
      TC_TEST(agent_register_while_disposing),
      TC_TEST(agent_cancel_fails),
      TC_TEST(agent_grace_bound),
      TC_TEST(agent_grace_zero_waits),
      TC_TEST(agent_quiesce),
      TC_TEST(agent_dispose_after_registry_close),
      TC_TEST(agent_dispose_then_registry_close),
      TC_TEST(agent_dispose_inside_callbacks),
      TC_TEST(agent_c19_orphan),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
