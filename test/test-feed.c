/* The change feed (R-FEED-1) and uvt_forget (R-FORGET-1). */
#include <string.h>

#include "test-util.h"

#define MAX_EVENTS 64

typedef struct {
  char id[UVT_ID_MAX];
  uvt_status_t status;
  int dropped;
  int reported;
} event_t;

static event_t events[MAX_EVENTS];
static int nevents;
static int listener_calls;
static int listener_calls_at_terminal_event;

static void record_change(uvt_watch_t *w, const uvt_snapshot_t *snap,
                          int dropped) {
  if (nevents < MAX_EVENTS) {
    snprintf(events[nevents].id, UVT_ID_MAX, "%s", snap->id);
    events[nevents].status = snap->status;
    events[nevents].dropped = dropped;
    events[nevents].reported = snap->reported;
  }
  if (uvt_status_is_terminal(snap->status) && !dropped)
    listener_calls_at_terminal_event = listener_calls;
  nevents++;
}

static void count_listener(uvt_listener_t *l, const uvt_snapshot_t *snap,
                           uvt_agent_t *owner) {
  listener_calls++;
}

static void reset(void) {
  memset(events, 0, sizeof(events));
  nevents = 0;
  listener_calls = 0;
  listener_calls_at_terminal_event = -1;
}

/* R-FEED-1: registered, stopping, terminal and dropped, in order, each
 * once, never inside the call that caused them; terminal after listeners. */
static void test_feed_transitions_in_order(void **state) {
  fixture_t f;
  uvt_watch_t w = {0};
  uvt_listener_t l = {0};
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;

  reset();
  memset(&fk, 0, sizeof(fk));
  fixture_init(&f, NULL);
  assert_int_equal(uvt_watch_start(f.reg, &w, record_change), 0);
  assert_int_equal(uvt_listener_start(f.reg, &l, count_listener), 0);
  assert_int_equal(fake_start(f.reg, &fk, "feed", "one", NULL, id), 0);
  assert_int_equal(nevents, 0); /* not inside uvt_start */
  assert_int_equal(uvt_kill(f.reg, id, NULL, "enough", &kr), 0);
  assert_int_equal(nevents, 0); /* not inside uvt_kill */
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(nevents, 2);
  assert_int_equal(fake_settle(&fk, UVT_KILLED, "signal: SIGTERM", NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(nevents, 3);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  assert_int_equal(nevents, 3); /* not inside uvt_forget */
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(nevents, 4);

  assert_string_equal(events[0].id, id);
  assert_int_equal(events[0].status, UVT_RUNNING);
  assert_int_equal(events[1].status, UVT_STOPPING);
  assert_int_equal(events[2].status, UVT_KILLED);
  assert_int_equal(events[2].dropped, 0);
  assert_int_equal(events[3].status, UVT_KILLED);
  assert_int_equal(events[3].dropped, 1);
  /* The terminal transition reached the watcher after the listener. */
  assert_int_equal(listener_calls_at_terminal_event, 1);
  fixture_close(&f);
}

/* R-FEED-1: containment (a watcher stops itself and starts another, which
 * is not called for the transition in progress); silent once close began. */
static uvt_watch_t w_a, w_b, w_c;
static int a_calls, b_calls, c_calls;

static void watcher_c(uvt_watch_t *w, const uvt_snapshot_t *s, int dropped) {
  c_calls++;
}

static void watcher_a(uvt_watch_t *w, const uvt_snapshot_t *s, int dropped) {
  a_calls++;
  uvt_watch_stop(w);
  uvt_watch_stop(w); /* idempotent */
  uvt_watch_start(w->registry, &w_c, watcher_c);
}

static void watcher_b(uvt_watch_t *w, const uvt_snapshot_t *s, int dropped) {
  b_calls++;
}

static void test_feed_containment_and_close(void **state) {
  fixture_t f;
  fake_t fk1, fk2;
  char id[UVT_ID_MAX];

  memset(&fk1, 0, sizeof(fk1));
  memset(&fk2, 0, sizeof(fk2));
  a_calls = b_calls = c_calls = 0;
  fixture_init(&f, NULL);
  assert_int_equal(uvt_watch_start(f.reg, &w_a, watcher_a), 0);
  assert_int_equal(uvt_watch_start(f.reg, &w_b, watcher_b), 0);
  assert_int_equal(fake_start(f.reg, &fk1, NULL, "one", NULL, id), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a_calls, 1);
  assert_int_equal(b_calls, 1);
  assert_int_equal(c_calls, 0);
  assert_int_equal(fake_start(f.reg, &fk2, NULL, "two", NULL, id), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a_calls, 1);
  assert_int_equal(b_calls, 2);
  assert_int_equal(c_calls, 1);

  /* Close: the stopping, terminal and dropped transitions of the teardown
   * are not fed. */
  fk1.settle_on_cancel = 1;
  fk2.settle_on_cancel = 1;
  fixture_close(&f);
  assert_int_equal(b_calls, 2);
  assert_int_equal(c_calls, 1);
}

/* R-FORGET-1: fence, live refusal, release hook, ENOTASK afterwards. */
static void test_forget(void **state) {
  fixture_t f;
  uvt_agent_t a = {0}, other = {0};
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_snapshot_t snap;
  uvt_metrics_t m;

  memset(&fk, 0, sizeof(fk));
  fixture_init(&f, NULL);
  assert_int_equal(uvt_agent_register(f.reg, &a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &other, "B", "s2"), 0);
  assert_int_equal(fake_start(f.reg, &fk, NULL, "owned", &a, id), 0);
  assert_int_equal(uvt_forget(f.reg, id, &a), UV_EBUSY);
  assert_int_equal(uvt_forget(f.reg, id, &other), UVT_EFOREIGN);
  assert_int_equal(uvt_forget(f.reg, id, NULL), UVT_EFOREIGN);
  assert_int_equal(uvt_forget(f.reg, "fake-99", &a), UVT_ENOTASK);
  assert_int_equal(uvt_forget(f.reg, NULL, &a), UV_EINVAL);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "x"), 0);
  /* Settled but not yet applied: still live for the registry. */
  assert_int_equal(uvt_forget(f.reg, id, &a), UV_EBUSY);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_forget(f.reg, id, &other), UVT_EFOREIGN);
  assert_int_equal(fk.releases, 0);
  assert_int_equal(uvt_forget(f.reg, id, &a), 0);
  assert_int_equal(fk.releases, 1);
  assert_int_equal(uvt_get(f.reg, id, &a, &snap), UVT_ENOTASK);
  assert_int_equal(uvt_forget(f.reg, id, &a), UVT_ENOTASK);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.records, 0);
  assert_int_equal(m.completed, 1);
  fixture_close(&f);
  assert_int_equal(fk.releases, 1);
}

/* R-FEED-1: a second kill of a stopping task is not a transition, even
 * when the first one happened before anybody watched. */
static void test_feed_no_second_stopping(void **state) {
  fixture_t f;
  uvt_watch_t w = {0};
  fake_t fk;
  char id[UVT_ID_MAX];

  reset();
  memset(&fk, 0, sizeof(fk));
  fixture_init(&f, NULL);
  assert_int_equal(fake_start(f.reg, &fk, "feed", "one", NULL, id), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_watch_start(f.reg, &w, record_change), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, NULL), 0);
  assert_int_equal(fk.cancels, 2);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(nevents, 0);
  assert_int_equal(fake_settle(&fk, UVT_KILLED, "signal: SIGKILL", NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(nevents, 1);
  assert_int_equal(events[0].status, UVT_KILLED);
  fixture_close(&f);
}

/* A terminal task whose work left something behind (P-KILL-4). */
static uvt_task_t *lingering;
static int quiesce_calls, linger_releases;

static int linger_cancel(uvt_task_t *t, const char *reason) {
  return 0;
}
static int linger_quiesce(uvt_task_t *t) {
  quiesce_calls++;
  return 1;
}
static void linger_release(uvt_task_t *t) {
  linger_releases++;
}
static int linger_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  lingering = t;
  hooks->cancel = linger_cancel;
  hooks->quiesce = linger_quiesce;
  hooks->release = linger_release;
  return 0;
}

/* R-FORGET-1 with P-KILL-4: forgetting stops what the work left behind
 * before the record is dropped; lookups stop at once. */
static void test_forget_quiesces_first(void **state) {
  fixture_t f;
  uvt_spec_t spec;
  char id[UVT_ID_MAX];
  uvt_snapshot_t snap, *all;
  size_t n;
  uvt_metrics_t m;
  uvt_outcome_t o = {.status = UVT_COMPLETED, .detail = "exit code: 0"};

  quiesce_calls = linger_releases = 0;
  memset(&spec, 0, sizeof(spec));
  spec.kind = "linger";
  spec.label = "sleep 30 &";
  spec.run = linger_run;
  fixture_init(&f, NULL);
  assert_int_equal(uvt_start(f.reg, &spec, id), 0);
  assert_int_equal(uvt_task_settle(lingering, &o), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  assert_int_equal(quiesce_calls, 1);
  assert_int_equal(linger_releases, 0);
  assert_int_equal(uvt_get(f.reg, id, NULL, &snap), UVT_ENOTASK);
  assert_int_equal(uvt_list(f.reg, NULL, &all, &n), 0);
  assert_int_equal(n, 0);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.records, 1); /* held until quiescent */
  uvt_task_quiescent(lingering);
  assert_int_equal(linger_releases, 1);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.records, 0);
  fixture_close(&f);
  assert_int_equal(quiesce_calls, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_feed_transitions_in_order),
      cmocka_unit_test(test_feed_containment_and_close),
      cmocka_unit_test(test_feed_no_second_stopping),
      cmocka_unit_test(test_forget),
      cmocka_unit_test(test_forget_quiesces_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
