/* The registry side of P-KILL-6: uvt_kill of a task that already ended
 * calls the producer's quiesce hook (stop what the work left running, a
 * dev server left by `server &`), answers UVT_KILL_ALREADY_TERMINAL and
 * does not wait; the outcome stays.  A disposal or forget that finds that
 * quiesce in progress waits for uvt_task_quiescent() (bounded by
 * teardown_grace_ms) instead of calling the hook again. */
#include <string.h>

#include "test-core.h"

static int start_lingering(fixture_t *f, fake_t *fk, uvt_agent_t *owner,
                           int quiesce_ret, char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1;
  fk->has_quiesce = 1;
  fk->quiesce_ret = quiesce_ret;
  return fake_start(f->reg, fk, "linger", NULL, owner, id);
}

static void count_closed(void *data) {
  ((fixture_t *)data)->closed++;
}

static void settle_completed(fixture_t *f, fake_t *fk) {
  assert_int_equal(fake_settle(fk, UVT_COMPLETED, "exit code: 0", "out"), 0);
  tc_run_settled(f, fk);
}

/* P-KILL-6: the kill calls quiesce, says the task had ended, keeps the
 * outcome, marks it reported and returns without waiting.  A second kill
 * while the quiesce is in progress does not call the hook again; once the
 * producer said it is quiescent, a later kill asks again. */
static void quiesce_kill_terminal(void **state) {
  fixture_t f;
  fake_t fk, none, zero;
  char id[UVT_ID_MAX], nid[UVT_ID_MAX], zid[UVT_ID_MAX];
  uvt_kill_result_t kr = 0;
  uvt_snapshot_t s;
  uvt_metrics_t m;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_lingering(&f, &fk, NULL, 1, id), 0);
  settle_completed(&f, &fk);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);

  assert_int_equal(uvt_kill(f.reg, id, NULL, "stop it", &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  assert_int_equal(fk.quiesces, 1);
  assert_int_equal(fk.cancels, 0);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  assert_string_equal(s.detail, "exit code: 0");
  assert_int_equal(s.reported, 1);
  assert_null(s.kill_reason);
  uvt_snapshot_cleanup(&s);

  /* S-9: a second kill while the stop is in progress asks the hook
   * again, which means "now" (R-KILL-3's second cancel). */
  kr = 0;
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  assert_int_equal(fk.quiesces, 2);

  uvt_task_quiescent(fk.task);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(fk.releases, 0); /* nobody waited: the record stays */
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_COMPLETED);
  fk.quiesce_ret = 0;
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, NULL), 0);
  assert_int_equal(fk.quiesces, 3);

  /* A producer without the hook, and one with nothing left. */
  memset(&none, 0, sizeof(none));
  assert_int_equal(fake_start(f.reg, &none, "plain", NULL, NULL, nid), 0);
  settle_completed(&f, &none);
  assert_int_equal(uvt_kill(f.reg, nid, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  assert_int_equal(start_lingering(&f, &zero, NULL, 0, zid), 0);
  settle_completed(&f, &zero);
  assert_int_equal(uvt_kill(f.reg, zid, NULL, NULL, &kr), 0);
  assert_int_equal(zero.quiesces, 1);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.kills, 5);
  assert_int_equal(m.records, 3);

  fixture_close(&f);
  /* Disposal asks each again (none is quiescing now) and drops them. */
  assert_int_equal(fk.quiesces, 4);
  assert_int_equal(zero.quiesces, 2);
  assert_int_equal(fk.releases, 1);
  assert_int_equal(none.releases, 1);
  assert_int_equal(zero.releases, 1);
}

/* P-KILL-6 with P-KILL-4: agent disposal, uvt_forget and registry close
 * each find the kill's quiesce in progress and wait for it, without a
 * second call, until the producer is quiescent. */
static void quiesce_disposal_waits_for_kill(void **state) {
  int how;
  (void)state;
  for (how = 0; how < 3; how++) {
    fixture_t f;
    fake_t fk;
    arec_t a;
    char id[UVT_ID_MAX];
    uvt_metrics_t m;
    fixture_init(&f, NULL);
    arec_init(&a);
    assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
    assert_int_equal(start_lingering(&f, &fk, &a.a, 1, id), 0);
    settle_completed(&f, &fk);
    assert_int_equal(uvt_kill(f.reg, id, &a.a, NULL, NULL), 0);
    assert_int_equal(fk.quiesces, 1);

    if (how == 0) {
      assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
    } else if (how == 1) {
      uvt_snapshot_t s;
      assert_int_equal(uvt_forget(f.reg, id, &a.a), 0);
      assert_int_equal(uvt_get(f.reg, id, &a.a, &s), UVT_ENOTASK);
    } else {
      assert_int_equal(uvt_registry_close(f.reg, count_closed, &f), 0);
    }
    uv_run(&f.loop, UV_RUN_NOWAIT);
    uv_run(&f.loop, UV_RUN_NOWAIT);
    assert_int_equal(fk.quiesces, 1); /* waits: no second call */
    assert_int_equal(fk.releases, 0);
    assert_int_equal(a.disposed, 0);
    if (how < 2) {
      uvt_registry_metrics(f.reg, &m);
      assert_int_equal(m.records, 1);
    }
    uvt_task_quiescent(fk.task);
    assert_int_equal(fk.releases, 1);
    if (how == 0) {
      tc_run_until(&f, &a.disposed, 1);
      assert_int_equal(a.disposed, 1);
    }
    if (how == 2)
      f.reg = NULL; /* closing already */
    fixture_close(&f);
    assert_int_equal(fk.quiesces, 1);
  }
}

/* P-KILL-6 with R-AGENT-4: the wait for a kill's quiesce is bounded by
 * teardown_grace_ms; then the record is dropped with a warning, and the
 * release hook tells the producer that nobody waits any more. */
static void quiesce_kill_wait_bounded(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t fk;
  arec_t a;
  char id[UVT_ID_MAX];
  uint64_t t0, t1;
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 60;
  fixture_init(&f, &o);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_lingering(&f, &fk, &a.a, 1, id), 0);
  settle_completed(&f, &fk);
  assert_int_equal(uvt_kill(f.reg, id, &a.a, NULL, NULL), 0);
  assert_int_equal(fk.quiesces, 1);
  t0 = uv_hrtime();
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  t1 = uv_hrtime();
  assert_true(t1 - t0 >= 60 * 1000000ull);
  assert_int_equal(fk.quiesces, 1);
  assert_int_equal(fk.releases, 1);
  assert_int_equal(f.warnings, 1);
  assert_true(tc_contains(f.last_warning, id));
  assert_true(tc_contains(f.last_warning, "did not stop"));
  fixture_close(&f);
}

/* P-KILL-6: a force-failed record's producer never settled; it is still
 * on its own way to quiescence, so a kill does not ask it to quiesce. */
static void quiesce_not_for_force_failed(void **state) {
  fixture_t f;
  fake_t fk;
  arec_t a;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr = 0;
  lrec_t l;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  lrec_init(&l);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_lingering(&f, &fk, &a.a, 1, id), 0);
  fk.cancel_error = UV_EIO;
  fk.settle_on_cancel = 0;
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(tc_status(f.reg, id, &a.a), UVT_FAILED);
  assert_int_equal(uvt_kill(f.reg, id, &a.a, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  assert_int_equal(fk.quiesces, 0);
  tc_run_until(&f, &a.disposed, 1);
  fixture_close(&f);
  assert_int_equal(fk.quiesces, 0);
  assert_int_equal(fake_settle(&fk, UVT_KILLED, NULL, NULL), 0); /* late */
  lrec_cleanup(&l);
}

/* P-KILL-6 inside the dispatch of the end: a listener that kills the task
 * it is told about (before the record is dispatched) starts the quiesce;
 * a forget from a later listener waits for it. */
typedef struct {
  lrec_t r;
  uvt_registry_t *reg;
  fake_t *fk;
  int kill_err, forget_err, quiesces_after_kill;
  uvt_kill_result_t kr;
} kl_t;

static void kill_then_forget(lrec_t *r, const uvt_snapshot_t *snap,
                             uvt_agent_t *owner) {
  kl_t *k = TC_CONTAINER(r, kl_t, r);
  (void)owner;
  k->kill_err = uvt_kill(k->reg, snap->id, NULL, NULL, &k->kr);
  k->quiesces_after_kill = k->fk->quiesces;
  k->forget_err = uvt_forget(k->reg, snap->id, NULL);
}

static void quiesce_kill_in_listener(void **state) {
  fixture_t f;
  fake_t fk;
  kl_t k;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  memset(&k, 0, sizeof(k));
  lrec_init(&k.r);
  k.reg = f.reg;
  k.r.hook = kill_then_forget;
  k.fk = &fk;
  assert_int_equal(lrec_start(f.reg, &k.r), 0);
  assert_int_equal(start_lingering(&f, &fk, NULL, 1, id), 0);
  settle_completed(&f, &fk);
  assert_int_equal(k.kill_err, 0);
  assert_int_equal(k.kr, UVT_KILL_ALREADY_TERMINAL);
  assert_int_equal(k.forget_err, 0);
  assert_int_equal(k.quiesces_after_kill, 1);
  assert_int_equal(fk.quiesces, 1);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(fk.releases, 0);
  uvt_task_quiescent(fk.task);
  assert_int_equal(fk.releases, 1);
  assert_int_equal(fk.quiesces, 1);
  fixture_close(&f);
  lrec_cleanup(&k.r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(quiesce_kill_terminal),
      TC_TEST(quiesce_disposal_waits_for_kill),
      TC_TEST(quiesce_kill_wait_bounded),
      TC_TEST(quiesce_not_for_force_failed),
      TC_TEST(quiesce_kill_in_listener),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
