/* uvt_wait and uvt_wait_abort (R-WAIT-1..7, C-15, C-21). */
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

/* ---------------------------------------------------------------------- */
/* R-WAIT-1: unknown/foreign id first, then the timeout (0 is UV_EINVAL);
 * an error return means the callback never runs. */

static void wait_checks(void **state) {
  fixture_t f;
  fake_t fk;
  arec_t a, c;
  wrec_t w;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&c);
  wrec_init(&w);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &c.a, "C", "s2"), 0);
  assert_int_equal(start_fake(&f, &fk, "w", &a.a, id), 0);

  assert_int_equal(uvt_wait(f.reg, &w.req, "w-9", 100, &a.a, wrec_cb),
                   UVT_ENOTASK);
  assert_int_equal(uvt_wait(f.reg, &w.req, "w-9", 0, &a.a, wrec_cb),
                   UVT_ENOTASK);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 100, &c.a, wrec_cb),
                   UVT_EFOREIGN);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 0, &c.a, wrec_cb), UVT_EFOREIGN);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 0, NULL, wrec_cb), UVT_EFOREIGN);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 0, &a.a, wrec_cb), UV_EINVAL);
  assert_int_equal(uvt_wait(NULL, &w.req, id, 10, &a.a, wrec_cb), UV_EINVAL);
  assert_int_equal(uvt_wait(f.reg, NULL, id, 10, &a.a, wrec_cb), UV_EINVAL);
  assert_int_equal(uvt_wait(f.reg, &w.req, NULL, 10, &a.a, wrec_cb), UV_EINVAL);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 10, &a.a, NULL), UV_EINVAL);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(w.calls, 0);

  assert_int_equal(uvt_wait(f.reg, &w.req, id, 5, &a.a, wrec_cb), 0);
  tc_run_until(&f, &w.calls, 1);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, UVT_EWAITTIMEOUT);
  /* Reusable after its callback. */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 5, &a.a, wrec_cb), 0);
  tc_run_until(&f, &w.calls, 2);
  assert_int_equal(w.calls, 2);

  /* UVT_ECLOSING once registry close began. */
  {
    wrec_t late;
    int err;
    wrec_init(&late);
    assert_int_equal(uvt_registry_close(f.reg, NULL, NULL), 0);
    err = uvt_wait(f.reg, &late.req, id, 100, &a.a, wrec_cb);
    f.reg = NULL;
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    assert_int_equal(err, UVT_ECLOSING);
    assert_int_equal(late.calls, 0);
  }
  wrec_cleanup(&w);
}

/* ---------------------------------------------------------------------- */
/* R-WAIT-2: exactly once, never inside uvt_wait, also for a terminal task
 * (status 0, terminal snapshot, task marked reported). */

static void wait_terminal_task(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w;
  char id[UVT_ID_MAX];
  int i;
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_FAILED, "exit code: 2", "out"), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1000, NULL, wrec_cb), 0);
  assert_int_equal(w.calls, 0);
  tc_run_until(&f, &w.calls, 1);
  for (i = 0; i < 3; i++)
    uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.had_snap, 1);
  assert_int_equal(w.snap.status, UVT_FAILED);
  assert_string_equal(w.snap.detail, "exit code: 2");
  assert_int_equal(w.snap.reported, 1);
  assert_int_equal(tc_reported(f.reg, id, NULL), 1);
  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  wrec_cleanup(&w);
}

/* R-WAIT-2: a wait on a live task: exactly once, not inside uvt_wait. */
static void wait_live_once(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 100000, NULL, wrec_cb), 0);
  assert_int_equal(w.calls, 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(w.calls, 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(w.calls, 0); /* never inside settle either */
  tc_run_until(&f, &w.calls, 1);
  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  wrec_cleanup(&w);
}

/* R-WAIT-4, R-WAIT-7: the largest timeout means "not before the task
 * ends", not an overflowed deadline that has already passed. */
static void wait_huge_timeout(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, UINT64_MAX, NULL, wrec_cb), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(w.calls, 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &w.calls, 1);
  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  wrec_cleanup(&w);
}

/* ---------------------------------------------------------------------- */
/* R-WAIT-3: settlement with the wait pending: status 0 and the terminal
 * snapshot; the task is marked reported before any listener runs. */

typedef struct {
  fixture_t *f;
  wrec_t *w[2];
  int wait_calls_seen;
  int reported_seen;
} seen_t;

static void seen_hook(lrec_t *r, const uvt_snapshot_t *snap,
                      uvt_agent_t *owner) {
  seen_t *s = r->hook_data;
  uvt_snapshot_t g;
  (void)owner;
  s->wait_calls_seen = s->w[0]->calls + s->w[1]->calls;
  s->reported_seen = -1;
  if (uvt_get(s->f->reg, snap->id, NULL, &g) == 0) {
    s->reported_seen = g.reported;
    uvt_snapshot_cleanup(&g);
  }
}

static void wait_settlement(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w1, w2;
  lrec_t l;
  seen_t seen;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w1);
  wrec_init(&w2);
  lrec_init(&l);
  memset(&seen, 0, sizeof(seen));
  seen.f = &f;
  seen.w[0] = &w1;
  seen.w[1] = &w2;
  seen.wait_calls_seen = -1;
  l.hook = seen_hook;
  l.hook_data = &seen;
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(uvt_wait(f.reg, &w1.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &w2.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "o"), 0);
  tc_run_until(&f, &w2.calls, 1);
  tc_run_until(&f, &w1.calls, 1);
  fixture_close(&f);
  assert_int_equal(l.calls, 1);
  assert_int_equal(l.snaps[0].reported, 1);
  assert_int_equal(seen.reported_seen, 1);
  assert_int_equal(seen.wait_calls_seen, 0); /* listeners before waits */
  assert_true(l.seq[0] < w1.seq);
  assert_true(l.seq[0] < w2.seq);
  assert_int_equal(w1.calls, 1);
  assert_int_equal(w2.calls, 1);
  assert_int_equal(w1.status, 0);
  assert_int_equal(w2.status, 0);
  assert_int_equal(w1.snap.status, UVT_COMPLETED);
  assert_string_equal(w1.snap.detail, "exit code: 0");
  assert_int_equal(w1.snap.reported, 1);
  assert_true(w1.snap.finished_at_ms > 0);
  assert_true(tc_snap_equal(&w1.snap, &w2.snap));
  assert_true(tc_snap_equal(&w1.snap, &l.snaps[0]));
  wrec_cleanup(&w1);
  wrec_cleanup(&w2);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-WAIT-4: the wait's own deadline: UVT_EWAITTIMEOUT with the live
 * snapshot; the task keeps running, `reported` unchanged.  A producer's own
 * timeout is never reported with this code. */

static void wait_timeout(void **state) {
  fixture_t f;
  fake_t fk, st, pt;
  wrec_t w, ws, wp;
  char id[UVT_ID_MAX], sid[UVT_ID_MAX], pid[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  wrec_init(&ws);
  wrec_init(&wp);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(start_fake(&f, &st, "w", NULL, sid), 0);
  assert_int_equal(start_fake(&f, &pt, "w", NULL, pid), 0);
  st.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, sid, NULL, "k", NULL), 0);

  assert_int_equal(uvt_wait(f.reg, &w.req, id, 20, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &ws.req, sid, 20, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &wp.req, pid, 5000, NULL, wrec_cb), 0);
  /* The producer reports its own timeout: a settlement, status 0. */
  assert_int_equal(fake_settle(&pt, UVT_FAILED, "timed out after 5 ms", NULL),
                   0);
  tc_run_until(&f, &w.calls, 1);
  tc_run_until(&f, &ws.calls, 1);
  tc_run_until(&f, &wp.calls, 1);

  assert_int_equal(w.status, UVT_EWAITTIMEOUT);
  assert_int_equal(w.had_snap, 1);
  assert_int_equal(w.snap.status, UVT_RUNNING);
  assert_int_equal(w.snap.reported, 0);
  assert_int_equal(w.snap.finished_at_ms, 0);
  assert_int_equal(fk.cancels, 0);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);

  assert_int_equal(ws.status, UVT_EWAITTIMEOUT);
  assert_int_equal(ws.snap.status, UVT_STOPPING);
  assert_int_equal(st.cancels, 1);

  assert_int_equal(wp.status, 0);
  assert_int_equal(wp.snap.status, UVT_FAILED);
  st.settle_on_cancel = 1;
  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  assert_int_equal(ws.calls, 1);
  wrec_cleanup(&w);
  wrec_cleanup(&ws);
  wrec_cleanup(&wp);
}

/* ---------------------------------------------------------------------- */
/* R-WAIT-5: abort a pending wait: UVT_EABORTED and NULL, later (not inside
 * abort), task untouched; UV_EINVAL when not pending. */

static void wait_abort_pending(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w, idle;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  wrec_init(&idle);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(uvt_wait_abort(&idle.req), UV_EINVAL); /* never started */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait_abort(&w.req), 0);
  assert_int_equal(w.calls, 0);
  assert_int_equal(uvt_wait_abort(&w.req), UV_EINVAL); /* already due */
  tc_run_until(&f, &w.calls, 1);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, UVT_EABORTED);
  assert_int_equal(w.had_snap, 0);
  assert_int_equal(uvt_wait_abort(&w.req), UV_EINVAL); /* callback ran */
  assert_int_equal(fk.cancels, 0);
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_RUNNING);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  /* Abort after the timeout fired: not pending. */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 1, NULL, wrec_cb), 0);
  tc_run_until(&f, &w.calls, 2);
  assert_int_equal(w.status, UVT_EWAITTIMEOUT);
  assert_int_equal(uvt_wait_abort(&w.req), UV_EINVAL);
  /* The settlement later does not count the aborted waiter. */
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait_abort(&w.req), 0);
  tc_run_until(&f, &w.calls, 3);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  fixture_close(&f);
  assert_int_equal(w.calls, 3);
  wrec_cleanup(&w);
  wrec_cleanup(&idle);
}

/* R-WAIT-5: settlement already counted the waiter (abort from a listener,
 * which runs after counting and before wait callbacks): status 0 and the
 * terminal snapshot; the notice stays suppressed (reported 1). */

typedef struct {
  wrec_t *w;
  int abort_err;
  int wait_calls;
} aborter_t;

static void abort_hook(lrec_t *r, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner) {
  aborter_t *ab = r->hook_data;
  (void)snap;
  (void)owner;
  ab->wait_calls = ab->w->calls;
  ab->abort_err = uvt_wait_abort(&ab->w->req);
}

static void wait_abort_after_counting(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w;
  lrec_t l;
  aborter_t ab;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  lrec_init(&l);
  memset(&ab, 0, sizeof(ab));
  ab.w = &w;
  ab.abort_err = 1;
  l.hook = abort_hook;
  l.hook_data = &ab;
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(fake_settle(&fk, UVT_KILLED, "signal: SIGKILL", NULL), 0);
  tc_run_until(&f, &w.calls, 1);
  fixture_close(&f);
  assert_int_equal(l.calls, 1);
  assert_int_equal(l.snaps[0].reported, 1);
  assert_int_equal(ab.wait_calls, 0);
  assert_int_equal(ab.abort_err, 0);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, 0);
  assert_int_equal(w.had_snap, 1);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_string_equal(w.snap.detail, "signal: SIGKILL");
  assert_int_equal(w.snap.reported, 1);
  wrec_cleanup(&w);
  lrec_cleanup(&l);
}

/* R-WAIT-5: an abort in the same loop turn as settlement, but before it
 * (the producer settled, the registry has not applied it yet) un-counts the
 * waiter: UVT_EABORTED, and the notice is not suppressed (reported 0). */
static void wait_abort_before_settlement(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w;
  lrec_t l;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(uvt_wait_abort(&w.req), 0);
  tc_run_until(&f, &w.calls, 1);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.status, UVT_EABORTED);
  assert_int_equal(w.had_snap, 0);
  assert_int_equal(l.calls, 1);
  assert_int_equal(l.snaps[0].reported, 0);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  fixture_close(&f);
  wrec_cleanup(&w);
  lrec_cleanup(&l);
}

/* R-WAIT-5 / R-WAIT-2: a wait on an already-terminal task can still be
 * aborted until its callback ran; the callback runs once either way. */
static void wait_abort_terminal(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk);
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait_abort(&w.req), 0);
  assert_int_equal(w.calls, 0);
  tc_run_until(&f, &w.calls, 1);
  fixture_close(&f);
  assert_int_equal(w.calls, 1);
  assert_true(w.status == 0 || w.status == UVT_EABORTED);
  if (w.status == 0)
    assert_int_equal(w.snap.status, UVT_COMPLETED);
  else
    assert_int_equal(w.had_snap, 0);
  wrec_cleanup(&w);
}

/* ---------------------------------------------------------------------- */
/* R-WAIT-6: timed-out and aborted waits are unlinked at once: any number of
 * them retain nothing.  Each req is freed (and poisoned) in its callback;
 * the later settlement must not touch them (valgrind) nor count them. */

typedef struct {
  int timeouts;
  int aborted;
  int other;
  int *done;
} hw_stats_t;

typedef struct {
  uvt_wait_t req;
  hw_stats_t *stats;
} heapwait_t;

static void heap_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  heapwait_t *h = TC_CONTAINER(req, heapwait_t, req);
  hw_stats_t *st = h->stats;
  (void)snap;
  if (status == UVT_EWAITTIMEOUT)
    st->timeouts++;
  else if (status == UVT_EABORTED)
    st->aborted++;
  else
    st->other++;
  (*st->done)++;
  memset(h, 0xA5, sizeof(*h));
  free(h);
}

static void wait_expired_retain_nothing(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t last;
  lrec_t l;
  hw_stats_t st;
  char id[UVT_ID_MAX];
  uvt_metrics_t m;
  long base;
  int i, done;
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&last);
  lrec_init(&l);
  memset(&st, 0, sizeof(st));
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  base = tc_live_now();
  for (i = 0; i < 1200; i++) {
    heapwait_t *h = calloc(1, sizeof(*h));
    assert_non_null(h);
    h->stats = &st;
    if (i < 1000) {
      assert_int_equal(
          uvt_wait(f.reg, &h->req, id, 1 + (uint64_t)(i % 3), NULL, heap_cb),
          0);
    } else {
      assert_int_equal(uvt_wait(f.reg, &h->req, id, 60000, NULL, heap_cb), 0);
      assert_int_equal(uvt_wait_abort(&h->req), 0);
    }
  }
  st.done = &done;
  done = 0;
  tc_run_until(&f, &done, 1200);
  assert_int_equal(st.timeouts, 1000);
  assert_int_equal(st.aborted, 200);
  assert_int_equal(st.other, 0);
  assert_int_equal(tc_live_now(), base); /* nothing retained */
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.waits_timed_out, 1000);
  assert_int_equal(m.waits_aborted, 200);

  /* Settlement finds no waiter: reported stays 0; one fresh wait works. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(l.snaps[0].reported, 0);
  assert_int_equal(tc_reported(f.reg, id, NULL), 0);
  assert_int_equal(uvt_wait(f.reg, &last.req, id, 1000, NULL, wrec_cb), 0);
  tc_run_until(&f, &last.calls, 1);
  assert_int_equal(last.status, 0);
  fixture_close(&f);
  assert_int_equal(l.calls, 1);
  wrec_cleanup(&last);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-WAIT-7: deadlines are measured from the call (even when the loop's
 * cached time is stale); a wait never blocks and never runs the loop. */

static void count_timer(void *arg) {
  (*(int *)arg)++;
}

static void wait_deadline_from_call(void **state) {
  fixture_t f;
  fake_t fk;
  wrec_t w, wl;
  char id[UVT_ID_MAX];
  uint64_t t0, t_cb, call_ns;
  tc_timer_t host;
  int host_fired = 0;
  (void)state;
  fixture_init(&f, NULL);
  wrec_init(&w);
  wrec_init(&wl);
  assert_int_equal(start_fake(&f, &fk, "w", NULL, id), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  /* Make the loop's cached time stale by 80 ms.  This sleep creates the
   * condition under test; it hides no race. */
  {
    struct timespec ts = {0, 80 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  /* A host timer already due must not run inside uvt_wait. */
  tc_timer_start(&f.loop, &host, 0, count_timer, &host_fired);
  t0 = uv_hrtime();
  assert_int_equal(uvt_wait(f.reg, &w.req, id, 50, NULL, wrec_cb), 0);
  assert_int_equal(uvt_wait(f.reg, &wl.req, id, 5000, NULL, wrec_cb), 0);
  call_ns = uv_hrtime() - t0;
  assert_int_equal(host_fired, 0);
  assert_int_equal(w.calls, 0);
  assert_true(call_ns < 1000u * 1000u * 1000u); /* never blocks */
  tc_run_until(&f, &w.calls, 1);
  t_cb = uv_hrtime();
  assert_int_equal(w.status, UVT_EWAITTIMEOUT);
  /* uv_now has millisecond granularity: allow 1 ms. */
  assert_true(t_cb - t0 >= 49u * 1000u * 1000u);
  assert_int_equal(wl.calls, 0);
  assert_int_equal(uvt_wait_abort(&wl.req), 0);
  tc_run_until(&f, &wl.calls, 1);
  fixture_close(&f);
  assert_int_equal(host_fired, 1);
  wrec_cleanup(&w);
  wrec_cleanup(&wl);
}

/* ---------------------------------------------------------------------- */
/* C-15 (with fake producers): five tasks owned by A, all waited on before
 * any settles: every waited snapshot and every listener call is reported. */

static void settle_all(void *arg) {
  fake_t *fk = arg;
  int i;
  for (i = 0; i < 5; i++)
    fake_settle(&fk[i], UVT_COMPLETED, "exit code: 0", "n\n");
}

static void wait_c15_no_duplicate_notice(void **state) {
  fixture_t f;
  fake_t fk[5];
  wrec_t w[5];
  arec_t a;
  lrec_t l;
  tc_timer_t t;
  char id[5][UVT_ID_MAX];
  int i;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  lrec_init(&l);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  for (i = 0; i < 5; i++) {
    wrec_init(&w[i]);
    assert_int_equal(start_fake(&f, &fk[i], "bash", &a.a, id[i]), 0);
  }
  for (i = 0; i < 5; i++)
    assert_int_equal(uvt_wait(f.reg, &w[i].req, id[i], 5000, &a.a, wrec_cb), 0);
  tc_timer_start(&f.loop, &t, 20, settle_all, fk);
  for (i = 0; i < 5; i++)
    tc_run_until(&f, &w[i].calls, 1);
  fixture_close(&f);
  assert_int_equal(l.calls, 5);
  for (i = 0; i < 5; i++) {
    assert_int_equal(w[i].calls, 1);
    assert_int_equal(w[i].status, 0);
    assert_int_equal(w[i].snap.reported, 1);
    assert_int_equal(w[i].snap.status, UVT_COMPLETED);
    assert_int_equal(lrec_count(&l, id[i]), 1);
    assert_int_equal(lrec_find(&l, id[i])->reported, 1);
    assert_ptr_equal(l.owners[i], &a.a);
    wrec_cleanup(&w[i]);
  }
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* C-21: from a wait callback, a 1 ms wait on the same running task again,
 * 1000 times, while the task writes output.  No callback runs twice in one
 * loop turn because of us; output keeps arriving between the waits. */

#define C21_N 1000

typedef struct {
  fixture_t *f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_wait_t req;
  int n;
  uint64_t now[C21_N];
  unsigned iter[C21_N];
  int bad_status;
  int rearm_err;
  int nonempty_reads;
  size_t bytes;
  uv_prepare_t prep;
  unsigned iteration;
  uv_timer_t emitter;
  int emits;
} c21_t;

static c21_t *g_c21;

static void c21_prepare(uv_prepare_t *p) {
  (void)p;
  g_c21->iteration++;
}

static void c21_emit(uv_timer_t *t) {
  (void)t;
  g_c21->emits++;
  if (g_c21->fk.pending_len < sizeof(g_c21->fk.pending) - 8)
    fake_emit(&g_c21->fk, "out\n");
}

static void c21_cb(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  c21_t *c = g_c21;
  uvt_read_t r;
  int err;
  (void)snap;
  if (c->n < C21_N) {
    c->now[c->n] = uv_now(&c->f->loop);
    c->iter[c->n] = c->iteration;
  }
  c->n++;
  if (status != UVT_EWAITTIMEOUT)
    c->bad_status++;
  if (uvt_read(c->f->reg, c->id, NULL, &r) == 0) {
    if (r.len > 0)
      c->nonempty_reads++;
    c->bytes += r.len;
    uvt_read_cleanup(&r);
  }
  if (c->n < C21_N) {
    err = uvt_wait(c->f->reg, req, c->id, 1, NULL, c21_cb);
    if (err != 0)
      c->rearm_err = err;
  } else {
    /* The host stops its own loop (the library never calls uv_stop). */
    uv_stop(&c->f->loop);
  }
}

static void wait_c21_rearm(void **state) {
  fixture_t f;
  c21_t *c;
  int i, same_iter = 0, same_now = 0;
  (void)state;
  c = calloc(1, sizeof(*c));
  assert_non_null(c);
  g_c21 = c;
  fixture_init(&f, NULL);
  c->f = &f;
  c->fk.stream = 1;
  c->fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &c->fk, "bash", NULL, NULL, c->id), 0);
  assert_int_equal(uv_prepare_init(&f.loop, &c->prep), 0);
  assert_int_equal(uv_prepare_start(&c->prep, c21_prepare), 0);
  assert_int_equal(uv_timer_init(&f.loop, &c->emitter), 0);
  assert_int_equal(uv_timer_start(&c->emitter, c21_emit, 1, 1), 0);
  assert_int_equal(uvt_wait(f.reg, &c->req, c->id, 1, NULL, c21_cb), 0);
  /* UV_RUN_DEFAULT: one timer pass per loop turn (UV_RUN_ONCE runs due
   * timers a second time at the end of its turn). */
  while (c->n < C21_N && c->rearm_err == 0)
    if (uv_run(&f.loop, UV_RUN_DEFAULT) == 0 && c->n < C21_N)
      break;
  uv_close((uv_handle_t *)&c->prep, NULL);
  uv_close((uv_handle_t *)&c->emitter, NULL);
  fixture_close(&f);
  assert_int_equal(c->n, C21_N);
  assert_int_equal(c->rearm_err, 0);
  assert_int_equal(c->bad_status, 0);
  for (i = 1; i < C21_N; i++) {
    if (c->iter[i] == c->iter[i - 1])
      print_message("same iter at %d: iter %u now %llu prev now %llu\n", i,
                    c->iter[i], (unsigned long long)c->now[i],
                    (unsigned long long)c->now[i - 1]);
    if (c->iter[i] == c->iter[i - 1])
      same_iter++;
    if (c->now[i] <= c->now[i - 1])
      same_now++;
  }
  assert_int_equal(same_iter, 0);
  assert_int_equal(same_now, 0);
  /* The emitter (host I/O stand-in) was not starved. */
  assert_true(c->emits >= C21_N / 4);
  assert_true(c->nonempty_reads >= C21_N / 4);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(wait_checks),
      TC_TEST(wait_terminal_task),
      TC_TEST(wait_live_once),
      TC_TEST(wait_huge_timeout),
      TC_TEST(wait_settlement),
      TC_TEST(wait_timeout),
      TC_TEST(wait_abort_pending),
      TC_TEST(wait_abort_after_counting),
      TC_TEST(wait_abort_before_settlement),
      TC_TEST(wait_abort_terminal),
      TC_TEST(wait_expired_retain_nothing),
      TC_TEST(wait_deadline_from_call),
      TC_TEST(wait_c15_no_duplicate_notice),
      TC_TEST(wait_c21_rearm),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
