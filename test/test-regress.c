/* Regressions found by the model-based fuzzer (test/fuzz), each reduced to
 * the smallest sequence that shows it. */
#include <string.h>

#include "test-util.h"

typedef struct {
  fixture_t *f;
  uvt_status_t status;
  char detail[128];
  int calls;
  int dispose_err;
  int disposed;
  char ids[8][UVT_ID_MAX];
} regress_t;

static void on_disposed(uvt_agent_t *a) {
  regress_t *r = a->data;
  r->disposed++;
}

static void record_status(uvt_listener_t *l, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner) {
  regress_t *r = l->data;
  (void)owner;
  r->calls++;
  r->status = snap->status;
  snprintf(r->detail, sizeof(r->detail), "%s",
           snap->detail ? snap->detail : "");
}

/* Disposes the owner from its call for fake-1. */
static void dispose_owner(uvt_listener_t *l, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner) {
  regress_t *r = l->data;
  if (r->calls < 8)
    snprintf(r->ids[r->calls], UVT_ID_MAX, "%s", snap->id);
  r->calls++;
  if (owner != NULL && strcmp(snap->id, "fake-1") == 0)
    r->dispose_err = uvt_agent_dispose(owner, on_disposed);
}

/* R-DONE-4, R-DONE-2, R-CLOSE-3 (fuzz seed 75): a listener disposes the
 * owner agent while the settle drain still holds, further down its batch, a
 * terminal task of that agent whose producer settled a second time.  The
 * disposal drops that record; the drain must not touch it afterwards (it
 * did: heap-use-after-free in uvt__settle_drain, caught under ASan). */
static void
test_regress_dispose_in_listener_with_duplicate_queued(void **state) {
  fixture_t f;
  uvt_agent_t a = {0};
  uvt_listener_t l = {0};
  fake_t one, two;
  regress_t r;
  uvt_snapshot_t s;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  memset(&r, 0, sizeof(r));
  memset(&one, 0, sizeof(one));
  memset(&two, 0, sizeof(two));
  r.f = &f;
  a.data = &r;
  l.data = &r;
  assert_int_equal(uvt_agent_register(f.reg, &a, "agent", "session"), 0);
  assert_int_equal(uvt_listener_start(f.reg, &l, dispose_owner), 0);
  assert_int_equal(fake_start(f.reg, &one, NULL, "one", &a, id1), 0);
  assert_int_equal(fake_start(f.reg, &two, NULL, "two", &a, id2), 0);

  /* fake-2 ends and its end is dispatched. */
  assert_int_equal(fake_settle(&two, UVT_COMPLETED, NULL, NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(r.calls, 1);
  /* fake-1's outcome, then fake-2's duplicate, in one batch. */
  assert_int_equal(fake_settle(&one, UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(fake_settle(&two, UVT_FAILED, "again", NULL), 0);
  while (r.disposed == 0 && uv_run(&f.loop, UV_RUN_ONCE) != 0)
    ;

  assert_int_equal(r.calls, 2);
  assert_string_equal(r.ids[0], id2);
  assert_string_equal(r.ids[1], id1);
  assert_int_equal(r.dispose_err, 0);
  assert_int_equal(r.disposed, 1);
  assert_int_equal(one.releases, 1);
  assert_int_equal(two.releases, 1);
  assert_int_equal(uvt_get(f.reg, id1, NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, id2, NULL, &s), UVT_ENOTASK);
  fixture_close(&f);
}

/* R-AGENT-4, R-DONE-1 (fuzz seed 888 under TSan): a producer that settles
 * inside the cancel of a disposal has stopped in time, even when the loop
 * is busy for longer than teardown_grace_ms before it drains the settle
 * queue.  The grace timer (timers run before the async's poll phase) must
 * not force-fail a task whose outcome is already queued. */
static void test_regress_grace_expires_with_outcome_queued(void **state) {
  fixture_t f;
  uvt_options_t o;
  uvt_agent_t a = {0};
  uvt_listener_t l = {0};
  fake_t fk;
  regress_t r;
  char id[UVT_ID_MAX];
  (void)state;

  uvt_options_init(&o);
  o.teardown_grace_ms = 20;
  fixture_init(&f, &o);
  memset(&r, 0, sizeof(r));
  memset(&fk, 0, sizeof(fk));
  a.data = &r;
  l.data = &r;
  assert_int_equal(uvt_agent_register(f.reg, &a, "agent", "session"), 0);
  assert_int_equal(uvt_listener_start(f.reg, &l, record_status), 0);
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, "quick", &a, id), 0);

  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  /* The producer settled inside the cancel; the host is busy before its
   * loop runs again (this is the race, made certain, not hidden). */
  uv_sleep(60);
  while (r.disposed == 0 && uv_run(&f.loop, UV_RUN_ONCE) != 0)
    ;
  assert_int_equal(r.disposed, 1);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, UVT_KILLED);
  assert_string_equal(r.detail, "cancelled");
  assert_int_equal(f.warnings, 0);
  fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_regress_dispose_in_listener_with_duplicate_queued),
      cmocka_unit_test(test_regress_grace_expires_with_outcome_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
