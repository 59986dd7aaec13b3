/* Durations count from the call that sets them, also when the host blocked
 * its loop before calling from outside any callback (R-TIME-1): the loop's
 * cached time is then stale.  The registry's durations are a wait's
 * timeout and the teardown grace; a detail that names a duration names
 * what really elapsed.  Times are measured here with uv_hrtime(); only
 * lower bounds are asserted (a loaded machine only makes things later). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test-core.h"

#define MS 1000000ull

/* Block the thread without running the loop (the host's own work). */
static void block_ms(uint64_t ms) {
  uint64_t until = uv_hrtime() + ms * MS;
  struct timespec ts;
  while (uv_hrtime() < until) {
    ts.tv_sec = 0;
    ts.tv_nsec = 1000000;
    nanosleep(&ts, NULL);
  }
}

/* A fixture whose loop ran once, so its cached time is set, and then went
 * stale: the host blocked for `ms` outside any callback. */
static void stale_loop(fixture_t *f, uint64_t ms) {
  uv_run(&f->loop, UV_RUN_NOWAIT);
  block_ms(ms);
}

typedef struct {
  wrec_t w;
  uint64_t at;
} twait_t;

static void twait_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  twait_t *t = TC_CONTAINER(req, twait_t, w.req);
  t->at = uv_hrtime();
  wrec_cb(req, status, snap);
}

/* R-TIME-1: a wait's timeout counts from the call, not from the loop's
 * stale time (before deadline.c refreshed the time, the 100 ms wait fired
 * at once after a 300 ms block). */
static void time_wait_stale_clock(void **state) {
  fixture_t f;
  fake_t fk;
  twait_t t;
  char id[UVT_ID_MAX];
  uint64_t t0;
  (void)state;
  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  memset(&t, 0, sizeof(t));
  wrec_init(&t.w);
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, "t", NULL, NULL, id), 0);
  stale_loop(&f, 300);
  t0 = uv_hrtime();
  assert_int_equal(uvt_wait(f.reg, &t.w.req, id, 100, NULL, twait_cb), 0);
  tc_run_until(&f, &t.w.calls, 1);
  assert_int_equal(t.w.status, UVT_EWAITTIMEOUT);
  assert_true(t.at - t0 >= 100 * MS);
  fixture_close(&f);
  wrec_cleanup(&t.w);
}

/* The N of the warning "... did not stop within N ms of cancel; ...". */
static unsigned long long warned_ms(const char *warning) {
  unsigned long long n = 0;
  const char *p = warning != NULL ? strstr(warning, "within ") : NULL;
  if (p == NULL || sscanf(p, "within %llu ms", &n) != 1)
    return 0;
  return n;
}

typedef struct {
  lrec_t r;
  uint64_t at;
} tlisten_t;

static void tlisten_hook(lrec_t *r, const uvt_snapshot_t *snap,
                         uvt_agent_t *owner) {
  (void)snap;
  (void)owner;
  TC_CONTAINER(r, tlisten_t, r)->at = uv_hrtime();
}

/* R-TIME-1 with R-AGENT-4: the teardown grace counts from the disposal's
 * cancel even on a stale loop clock, for agent disposal and registry
 * close alike, and the force-fail detail names what elapsed. */
static void time_teardown_grace_stale_clock(void **state) {
  int how;
  (void)state;
  for (how = 0; how < 2; how++) {
    fixture_t f;
    uvt_options_t o;
    fake_t fk;
    arec_t a;
    tlisten_t l;
    char id[UVT_ID_MAX];
    uint64_t t0, elapsed;
    unsigned long long n;
    uvt_options_init(&o);
    o.teardown_grace_ms = 100;
    fixture_init(&f, &o);
    arec_init(&a);
    memset(&fk, 0, sizeof(fk));
    memset(&l, 0, sizeof(l));
    lrec_init(&l.r);
    l.r.hook = tlisten_hook;
    assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
    assert_int_equal(fake_start(f.reg, &fk, "t", NULL, &a.a, id), 0);
    assert_int_equal(lrec_start(f.reg, &l.r), 0);
    stale_loop(&f, 300);
    t0 = uv_hrtime();
    if (how == 0) {
      assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
      tc_run_until(&f, &l.r.calls, 1);
      elapsed = l.at - t0;
      assert_int_equal(l.r.snaps[0].status, UVT_FAILED);
      n = tc_grace_in(l.r.snaps[0].detail);
      tc_run_until(&f, &a.disposed, 1);
      fixture_close(&f);
    } else {
      uvt_registry_close(f.reg, NULL, NULL);
      f.reg = NULL;
      assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
      elapsed = uv_hrtime() - t0;
      assert_int_equal(uv_loop_close(&f.loop), 0);
      assert_int_equal(l.r.calls, 0); /* silent once close began */
      n = warned_ms(f.last_warning);
    }
    assert_int_equal(fk.cancels, 1);
    assert_true(elapsed >= 100 * MS);
    assert_true(n >= 100);
    assert_true(n * MS <= elapsed + MS);
    assert_int_equal(fake_settle(&fk, UVT_KILLED, NULL, NULL), 0); /* late */
    lrec_cleanup(&l.r);
  }
}

/* R-TIME-1: when the expiry itself comes late (a host callback blocked the
 * loop past the grace), the detail says how long it really was, not the
 * configured grace. */

static void block_300(void *arg) {
  (void)arg;
  block_ms(300);
}

static void time_grace_detail_names_elapsed(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t fk;
  arec_t a;
  tlisten_t l;
  tc_timer_t blocker;
  char id[UVT_ID_MAX];
  uint64_t t0;
  unsigned long long n;
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 50;
  fixture_init(&f, &o);
  arec_init(&a);
  memset(&fk, 0, sizeof(fk));
  memset(&l, 0, sizeof(l));
  lrec_init(&l.r);
  l.r.hook = tlisten_hook;
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(fake_start(f.reg, &fk, "t", NULL, &a.a, id), 0);
  assert_int_equal(lrec_start(f.reg, &l.r), 0);
  t0 = uv_hrtime();
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_timer_start(&f.loop, &blocker, 1, block_300, NULL);
  tc_run_until(&f, &l.r.calls, 1);
  n = tc_grace_in(l.r.snaps[0].detail);
  assert_int_equal(blocker.fired, 1);
  assert_true(n >= 300);
  assert_true(n * MS <= l.at - t0 + MS);
  assert_true(tc_contains(f.last_warning, "within"));
  assert_int_equal(warned_ms(f.last_warning), n);
  tc_run_until(&f, &a.disposed, 1);
  fixture_close(&f);
  assert_int_equal(fake_settle(&fk, UVT_KILLED, NULL, NULL), 0); /* late */
  lrec_cleanup(&l.r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(time_wait_stale_clock),
      TC_TEST(time_teardown_grace_stale_clock),
      TC_TEST(time_grace_detail_names_elapsed),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
