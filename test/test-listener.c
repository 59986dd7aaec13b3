/* Settlement and listeners (R-DONE-1..5, R-CLOSE-3, C-16, C-17, L-3). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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
/* R-DONE-3: each terminal record reaches every listener exactly once, in
 * start order, with the exact owner (or NULL). */

typedef struct {
  uvt_task_t *task;
  uv_thread_t th;
} one_thread_t;

static void settle_from_thread(void *arg) {
  one_thread_t *o = arg;
  uvt_outcome_t out;
  memset(&out, 0, sizeof(out));
  out.status = UVT_COMPLETED;
  out.detail = "thread";
  uvt_task_settle(o->task, &out);
}

static void listener_every_record_once(void **state) {
  fixture_t f;
  fake_t fk[5];
  arec_t a;
  lrec_t l[3];
  char id[5][UVT_ID_MAX];
  one_thread_t ot;
  fake_t more[2];
  char mid[UVT_ID_MAX];
  int i, j;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  for (i = 0; i < 3; i++) {
    lrec_init(&l[i]);
    assert_int_equal(lrec_start(f.reg, &l[i]), 0);
  }
  assert_int_equal(uvt_listener_start(f.reg, NULL, lrec_cb), UV_EINVAL);
  assert_int_equal(uvt_listener_start(NULL, &l[0].l, lrec_cb), UV_EINVAL);
  {
    uvt_listener_t nocb;
    memset(&nocb, 0, sizeof(nocb));
    assert_int_equal(uvt_listener_start(f.reg, &nocb, NULL), UV_EINVAL);
  }
  assert_ptr_equal(l[0].l.registry, f.reg);

  for (i = 0; i < 5; i++)
    assert_int_equal(start_fake(&f, &fk[i], "d", i % 2 ? &a.a : NULL, id[i]),
                     0);
  assert_int_equal(fake_settle(&fk[0], UVT_COMPLETED, "exit code: 0", NULL), 0);
  assert_int_equal(uvt_kill(f.reg, id[1], &a.a, "k", NULL), 0);
  assert_int_equal(fake_settle(&fk[2], UVT_FAILED, "boom", NULL), 0);
  assert_int_equal(fake_settle(&fk[3], UVT_KILLED, "signal: SIGINT", NULL), 0);
  ot.task = fk[4].task;
  assert_int_equal(uv_thread_create(&ot.th, settle_from_thread, &ot), 0);
  assert_int_equal(uv_thread_join(&ot.th), 0);
  tc_run_until(&f, &l[2].calls, 5);
  for (i = 0; i < 3; i++)
    uv_run(&f.loop, UV_RUN_NOWAIT);

  for (j = 0; j < 3; j++) {
    assert_int_equal(l[j].calls, 5);
    assert_int_equal(l[j].on_loop_thread, 5); /* L-3 */
    for (i = 0; i < 5; i++) {
      const uvt_snapshot_t *s = lrec_find(&l[j], id[i]);
      uvt_snapshot_t g;
      assert_int_equal(lrec_count(&l[j], id[i]), 1);
      assert_non_null(s);
      assert_true(uvt_status_is_terminal(s->status));
      assert_true(s->finished_at_ms > 0);
      /* The listener's snapshot is the record as it stands. */
      assert_int_equal(uvt_get(f.reg, id[i], &a.a, &g), 0);
      assert_true(tc_snap_equal(s, &g));
      uvt_snapshot_cleanup(&g);
    }
    for (i = 0; i < 5; i++)
      assert_ptr_equal(l[j].owners[i],
                       l[j].snaps[i].owner_session != NULL ? &a.a : NULL);
  }
  /* Start order for every settlement. */
  for (i = 0; i < 5; i++) {
    assert_true(l[0].seq[i] < l[1].seq[i]);
    assert_true(l[1].seq[i] < l[2].seq[i]);
  }
  assert_int_equal(lrec_find(&l[0], id[1])->status, UVT_KILLED);
  assert_int_equal(lrec_find(&l[0], id[2])->status, UVT_FAILED);
  assert_string_equal(lrec_find(&l[0], id[4])->detail, "thread");

  /* Stop is idempotent; a stopped listener hears nothing; restart works. */
  uvt_listener_stop(&l[1].l);
  uvt_listener_stop(&l[1].l);
  uvt_listener_stop(NULL);
  assert_int_equal(start_fake(&f, &more[0], "d", NULL, mid), 0);
  assert_int_equal(fake_settle(&more[0], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &l[0].calls, 6);
  assert_int_equal(l[1].calls, 5);
  assert_int_equal(l[2].calls, 6);
  assert_int_equal(lrec_start(f.reg, &l[1]), 0);
  assert_int_equal(start_fake(&f, &more[1], "d", NULL, mid), 0);
  assert_int_equal(fake_settle(&more[1], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &l[1].calls, 6);
  assert_int_equal(l[0].calls, 7);
  assert_int_equal(l[1].calls, 6);
  assert_true(l[2].seq[6] < l[1].seq[5]); /* restarted: now last */
  fixture_close(&f);
  for (j = 0; j < 3; j++)
    lrec_cleanup(&l[j]);
}

/* ---------------------------------------------------------------------- */
/* R-DONE-3: record -> reported (if a wait is counted) -> listeners ->
 * waits.  Inside the listener the record is final and marked reported, the
 * settled hook ran, the wait callback has not. */

typedef struct {
  fixture_t *f;
  fake_t *fk;
  wrec_t *w;
  int wait_calls;
  int settled_hooks;
  uvt_snapshot_t got;
  int get_err;
} order_t;

static void order_hook(lrec_t *r, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner) {
  order_t *o = r->hook_data;
  (void)owner;
  o->wait_calls = o->w != NULL ? o->w->calls : 0;
  o->settled_hooks = o->fk->settled_hooks;
  uvt_snapshot_cleanup(&o->got);
  o->get_err = uvt_get(o->f->reg, snap->id, NULL, &o->got);
}

static void listener_order(void **state) {
  int round;
  (void)state;
  for (round = 0; round < 2; round++) {
    fixture_t f;
    fake_t fk;
    wrec_t w;
    lrec_t l;
    order_t o;
    char id[UVT_ID_MAX];
    fixture_init(&f, NULL);
    wrec_init(&w);
    lrec_init(&l);
    memset(&o, 0, sizeof(o));
    o.f = &f;
    o.fk = &fk;
    o.w = round == 0 ? &w : NULL;
    o.wait_calls = -1;
    l.hook = order_hook;
    l.hook_data = &o;
    assert_int_equal(lrec_start(f.reg, &l), 0);
    assert_int_equal(start_fake(&f, &fk, "o", NULL, id), 0);
    if (round == 0)
      assert_int_equal(uvt_wait(f.reg, &w.req, id, 60000, NULL, wrec_cb), 0);
    assert_int_equal(fake_settle(&fk, UVT_FAILED, "exit code: 7", "final"), 0);
    assert_int_equal(l.calls, 0); /* applied on the loop, never inside */
    tc_run_until(&f, &l.calls, 1);
    if (round == 0)
      tc_run_until(&f, &w.calls, 1);
    fixture_close(&f);
    assert_int_equal(l.calls, 1);
    assert_int_equal(o.get_err, 0);
    assert_int_equal(o.got.status, UVT_FAILED);
    assert_string_equal(o.got.detail, "exit code: 7");
    assert_true(o.got.finished_at_ms > 0);
    assert_int_equal(o.settled_hooks, 1);
    assert_int_equal(fk.settled_hooks, 1);
    if (round == 0) {
      assert_int_equal(o.got.reported, 1);
      assert_int_equal(l.snaps[0].reported, 1);
      assert_int_equal(o.wait_calls, 0);
      assert_int_equal(w.calls, 1);
      assert_true(l.seq[0] < w.seq);
    } else {
      assert_int_equal(o.got.reported, 0);
      assert_int_equal(l.snaps[0].reported, 0);
    }
    uvt_snapshot_cleanup(&o.got);
    wrec_cleanup(&w);
    lrec_cleanup(&l);
  }
}

/* ---------------------------------------------------------------------- */
/* R-DONE-1: settle validates, copies the outcome and never calls back
 * inside itself. */

static void listener_settle_copies(void **state) {
  fixture_t f;
  fake_t fk;
  lrec_t l;
  uvt_outcome_t o;
  char detail[32], output[32];
  char id[UVT_ID_MAX];
  uvt_read_t r;
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "c", NULL, id), 0);
  memset(&o, 0, sizeof(o));
  o.status = UVT_RUNNING;
  assert_int_equal(uvt_task_settle(fk.task, &o), UV_EINVAL);
  o.status = UVT_STOPPING;
  assert_int_equal(uvt_task_settle(fk.task, &o), UV_EINVAL);
  o.status = (uvt_status_t)42;
  assert_int_equal(uvt_task_settle(fk.task, &o), UV_EINVAL);
  assert_int_equal(uvt_task_settle(fk.task, NULL), UV_EINVAL);
  assert_int_equal(uvt_task_settle(NULL, &o), UV_EINVAL);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(tc_status(f.reg, id, NULL), UVT_RUNNING);
  assert_int_equal(l.calls, 0);

  snprintf(detail, sizeof(detail), "exit code: 0");
  memcpy(output, "a\0b", 3);
  o.status = UVT_COMPLETED;
  o.detail = detail;
  o.output = output;
  o.output_len = 3;
  assert_int_equal(uvt_task_settle(fk.task, &o), 0);
  assert_int_equal(l.calls, 0);
  memset(detail, 'X', sizeof(detail) - 1);
  memset(output, 'Y', sizeof(output));
  tc_run_until(&f, &l.calls, 1);
  assert_string_equal(l.snaps[0].detail, "exit code: 0");
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  assert_int_equal(r.len, 3);
  assert_memory_equal(r.text, "a\0b", 3);
  uvt_read_cleanup(&r);
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* R-DONE-1 (header, uvt_task_settle): if the copies cannot be allocated the
 * status is still recorded, with detail "outcome text lost: out of memory". */
static void listener_settle_oom(void **state) {
  fixture_t f;
  fake_t fk;
  lrec_t l;
  char id[UVT_ID_MAX];
  int err;
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "oom", NULL, id), 0);
  tc_arm(1, 1);
  err = fake_settle(&fk, UVT_KILLED, "signal: SIGTERM", "some output");
  tc_disarm();
  assert_int_equal(err, 0);
  tc_run_until(&f, &l.calls, 1);
  assert_int_equal(l.calls, 1);
  assert_int_equal(l.snaps[0].status, UVT_KILLED);
  assert_string_equal(l.snaps[0].detail, "outcome text lost: out of memory");
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-DONE-2: the first outcome wins; later ones are ignored and logged. */

static void listener_second_outcome(void **state) {
  fixture_t f;
  fake_t fk, fk2;
  lrec_t l;
  char id[UVT_ID_MAX], id2[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(start_fake(&f, &fk, "two", NULL, id), 0);
  assert_int_equal(start_fake(&f, &fk2, "two", NULL, id2), 0);
  /* Same turn: both queued before the registry applies either. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "first", NULL), 0);
  assert_int_equal(fake_settle(&fk, UVT_FAILED, "second", NULL), 0);
  tc_run_until(&f, &l.calls, 1);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(l.calls, 1);
  assert_int_equal(fk.settled_hooks, 1);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  assert_string_equal(s.detail, "first");
  uvt_snapshot_cleanup(&s);
  assert_int_equal(f.warnings, 1);
  /* After the first was applied. */
  assert_int_equal(fake_settle(&fk2, UVT_KILLED, "first", NULL), 0);
  tc_run_until(&f, &l.calls, 2);
  assert_int_equal(fake_settle(&fk2, UVT_COMPLETED, "late", NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(l.calls, 2);
  assert_int_equal(fk2.settled_hooks, 1);
  assert_int_equal(tc_status(f.reg, id2, NULL), UVT_KILLED);
  /* The late outcome is logged when the registry drains it; with no live
   * task the registry need not keep the loop alive, so look after the
   * loop has run to the end. */
  fixture_close(&f);
  assert_int_equal(f.warnings, 2);
  assert_int_equal(l.calls, 2);
  lrec_cleanup(&l);
}

/* R-DONE-2: a settle after the record was force-failed and dropped (agent
 * disposal with a failing cancel; R-AGENT-4 timeout), or after the registry
 * closed, is harmless: no crash, no second notice, the handle is freed by
 * that settle (checked by the allocation count and valgrind). */

static void listener_late_settles(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t ff, slow, closing;
  arec_t a, b;
  lrec_t l;
  char fid[UVT_ID_MAX], sid[UVT_ID_MAX], cid[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  uvt_options_init(&o);
  o.teardown_grace_ms = 50;
  fixture_init(&f, &o);
  arec_init(&a);
  arec_init(&b);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "s1"), 0);
  assert_int_equal(start_fake(&f, &ff, "late", &a.a, fid), 0);
  ff.cancel_error = UV_EPERM;
  assert_int_equal(start_fake(&f, &slow, "late", &b.a, sid), 0);
  slow.settle_on_cancel = 0;
  assert_int_equal(start_fake(&f, &closing, "late", NULL, cid), 0);
  closing.cancel_error = UV_EIO;

  /* Force-failed by a failing cancel, dropped. */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(ff.releases, 1);
  assert_int_equal(uvt_get(f.reg, fid, NULL, &s), UVT_ENOTASK);
  assert_int_equal(fake_settle(&ff, UVT_COMPLETED, "too late", NULL), 0);
  /* Force-failed by the grace bound, dropped. */
  assert_int_equal(uvt_agent_dispose(&b.a, arec_cb), 0);
  tc_run_until(&f, &b.disposed, 1);
  assert_int_equal(slow.releases, 1);
  assert_int_equal(fake_settle(&slow, UVT_KILLED, "too late", NULL), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(l.calls, 2); /* the two force-failures, nothing more */
  assert_int_equal(lrec_count(&l, fid), 1);
  assert_int_equal(lrec_count(&l, sid), 1);
  assert_int_equal(lrec_find(&l, fid)->status, UVT_FAILED);
  assert_int_equal(lrec_find(&l, sid)->status, UVT_FAILED);
  assert_int_equal(ff.settled_hooks, 0); /* no hook after release */
  assert_int_equal(slow.settled_hooks, 0);

  /* Force-failed by registry close; settles after the registry is gone. */
  fixture_close(&f);
  assert_int_equal(closing.releases, 1);
  assert_int_equal(fake_settle(&closing, UVT_COMPLETED, "after close", NULL),
                   0);
  assert_int_equal(closing.settled_hooks, 0);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-DONE-4: containment. */

/* A listener that stops itself, and one that stops another listener not
 * yet called for this dispatch. */

typedef struct {
  lrec_t *victim;
  int only_first;
} stopper_t;

static void stop_self_hook(lrec_t *r, const uvt_snapshot_t *snap,
                           uvt_agent_t *owner) {
  (void)snap;
  (void)owner;
  uvt_listener_stop(&r->l);
}

static void stop_other_hook(lrec_t *r, const uvt_snapshot_t *snap,
                            uvt_agent_t *owner) {
  stopper_t *st = r->hook_data;
  (void)snap;
  (void)owner;
  if (st->victim != NULL)
    uvt_listener_stop(&st->victim->l);
}

static void listener_stop_inside(void **state) {
  fixture_t f;
  fake_t fk[2];
  lrec_t self, stopper, victim, after, early;
  stopper_t st, st_early;
  char id[2][UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&early);
  lrec_init(&self);
  lrec_init(&stopper);
  lrec_init(&victim);
  lrec_init(&after);
  st.victim = &victim;
  st_early.victim = &early; /* already called when stopped */
  early.hook = NULL;
  self.hook = stop_self_hook;
  stopper.hook = stop_other_hook;
  stopper.hook_data = &st;
  after.hook = stop_other_hook;
  after.hook_data = &st_early;
  /* Start order: early, self, stopper, victim, after. */
  assert_int_equal(lrec_start(f.reg, &early), 0);
  assert_int_equal(lrec_start(f.reg, &self), 0);
  assert_int_equal(lrec_start(f.reg, &stopper), 0);
  assert_int_equal(lrec_start(f.reg, &victim), 0);
  assert_int_equal(lrec_start(f.reg, &after), 0);
  assert_int_equal(start_fake(&f, &fk[0], "s", NULL, id[0]), 0);
  assert_int_equal(start_fake(&f, &fk[1], "s", NULL, id[1]), 0);
  /* Two settlements in one drain. */
  assert_int_equal(fake_settle(&fk[0], UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(fake_settle(&fk[1], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &after.calls, 2);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  fixture_close(&f);
  assert_int_equal(early.calls, 1); /* stopped by `after` after its call */
  assert_int_equal(self.calls, 1);  /* stopped itself */
  assert_int_equal(stopper.calls, 2);
  assert_int_equal(victim.calls, 0); /* stopped before its turn */
  assert_int_equal(after.calls, 2);  /* never skipped */
  lrec_cleanup(&early);
  lrec_cleanup(&self);
  lrec_cleanup(&stopper);
  lrec_cleanup(&victim);
  lrec_cleanup(&after);
}

/* A listener started during a dispatch is not called for the settlement in
 * progress, but for the next one. */

typedef struct {
  fixture_t *f;
  lrec_t *newcomer;
  int start_err;
  int done;
} starter_t;

static void start_other_hook(lrec_t *r, const uvt_snapshot_t *snap,
                             uvt_agent_t *owner) {
  starter_t *s = r->hook_data;
  (void)snap;
  (void)owner;
  if (!s->done) {
    s->done = 1;
    s->start_err = lrec_start(s->f->reg, s->newcomer);
  }
}

static void listener_start_inside(void **state) {
  fixture_t f;
  fake_t fk[2];
  lrec_t first, later, newcomer;
  starter_t s;
  char id[2][UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&first);
  lrec_init(&later);
  lrec_init(&newcomer);
  memset(&s, 0, sizeof(s));
  s.f = &f;
  s.newcomer = &newcomer;
  s.start_err = 1;
  first.hook = start_other_hook;
  first.hook_data = &s;
  assert_int_equal(lrec_start(f.reg, &first), 0);
  assert_int_equal(lrec_start(f.reg, &later), 0);
  assert_int_equal(start_fake(&f, &fk[0], "n", NULL, id[0]), 0);
  assert_int_equal(start_fake(&f, &fk[1], "n", NULL, id[1]), 0);
  assert_int_equal(fake_settle(&fk[0], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &later.calls, 1);
  assert_int_equal(s.start_err, 0);
  assert_int_equal(newcomer.calls, 0);
  assert_int_equal(fake_settle(&fk[1], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &later.calls, 2);
  fixture_close(&f);
  assert_int_equal(first.calls, 2);
  assert_int_equal(later.calls, 2);
  assert_int_equal(newcomer.calls, 1);
  assert_int_equal(lrec_count(&newcomer, id[1]), 1);
  lrec_cleanup(&first);
  lrec_cleanup(&later);
  lrec_cleanup(&newcomer);
}

/* A listener that starts, reads, waits on and kills tasks, and disposes
 * agents; the dispatch is not corrupted and no listener is skipped. */

typedef struct {
  fixture_t *f;
  arec_t *owner_agent; /* disposed from inside the listener */
  arec_t *idle_agent;
  fake_t *victim; /* killed from inside */
  char victim_id[UVT_ID_MAX];
  fake_t *spawned;
  char spawned_id[UVT_ID_MAX];
  wrec_t *w_victim;
  wrec_t *w_self;
  int done;
  int errs;
  uvt_kill_result_t kr;
  char read_text[32];
} busy_t;

static void busy_hook(lrec_t *r, const uvt_snapshot_t *snap,
                      uvt_agent_t *owner) {
  busy_t *b = r->hook_data;
  uvt_read_t rd;
  uvt_snapshot_t g;
  (void)owner;
  if (b->done)
    return;
  b->done = 1;
  /* start */
  if (start_fake(b->f, b->spawned, "spawned", NULL, b->spawned_id) != 0)
    b->errs++;
  /* read the settling task (marks it reported) */
  if (uvt_read(b->f->reg, snap->id, &b->owner_agent->a, &rd) == 0) {
    snprintf(b->read_text, sizeof(b->read_text), "%s", rd.text);
    uvt_read_cleanup(&rd);
  } else {
    b->errs++;
  }
  /* get, wait and kill another task */
  if (uvt_get(b->f->reg, b->victim_id, NULL, &g) == 0)
    uvt_snapshot_cleanup(&g);
  else
    b->errs++;
  if (uvt_wait(b->f->reg, &b->w_victim->req, b->victim_id, 60000, NULL,
               wrec_cb) != 0)
    b->errs++;
  if (uvt_wait(b->f->reg, &b->w_self->req, snap->id, 60000, &b->owner_agent->a,
               wrec_cb) != 0)
    b->errs++;
  if (uvt_kill(b->f->reg, b->victim_id, NULL, "from listener", &b->kr) != 0)
    b->errs++;
  /* dispose agents: the settling task's owner and an idle one */
  if (uvt_agent_dispose(&b->owner_agent->a, arec_cb) != 0)
    b->errs++;
  if (uvt_agent_dispose(&b->idle_agent->a, arec_cb) != 0)
    b->errs++;
}

static void listener_busy_inside(void **state) {
  fixture_t f;
  fake_t settling, sibling, victim, spawned;
  arec_t a, idle;
  lrec_t busy, other;
  wrec_t wv, ws;
  busy_t b;
  char sid[UVT_ID_MAX], sibid[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  arec_init(&idle);
  lrec_init(&busy);
  lrec_init(&other);
  wrec_init(&wv);
  wrec_init(&ws);
  memset(&b, 0, sizeof(b));
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &idle.a, "I", "s1"), 0);
  b.f = &f;
  b.owner_agent = &a;
  b.idle_agent = &idle;
  b.victim = &victim;
  b.spawned = &spawned;
  b.w_victim = &wv;
  b.w_self = &ws;
  busy.hook = busy_hook;
  busy.hook_data = &b;
  assert_int_equal(lrec_start(f.reg, &busy), 0);
  assert_int_equal(lrec_start(f.reg, &other), 0);
  assert_int_equal(start_fake(&f, &settling, "b", &a.a, sid), 0);
  assert_int_equal(start_fake(&f, &sibling, "b", &a.a, sibid), 0);
  assert_int_equal(start_fake(&f, &victim, "b", NULL, b.victim_id), 0);
  assert_int_equal(fake_settle(&settling, UVT_COMPLETED, NULL, "result"), 0);
  tc_run_until(&f, &a.disposed, 1);
  tc_run_until(&f, &idle.disposed, 1);
  tc_run_until(&f, &wv.calls, 1);
  tc_run_until(&f, &ws.calls, 1);

  assert_int_equal(b.errs, 0);
  assert_string_equal(b.read_text, "result");
  assert_int_equal(b.kr, UVT_KILL_REQUESTED);
  assert_int_equal(victim.cancels, 1);
  /* The spawned task lives on. */
  assert_int_equal(tc_status(f.reg, b.spawned_id, NULL), UVT_RUNNING);
  /* Every record reached both listeners exactly once: settling, sibling
   * (cancelled by A's disposal), victim (killed). */
  assert_int_equal(lrec_count(&busy, sid), 1);
  assert_int_equal(lrec_count(&other, sid), 1);
  assert_int_equal(lrec_count(&busy, sibid), 1);
  assert_int_equal(lrec_count(&other, sibid), 1);
  assert_int_equal(lrec_count(&busy, b.victim_id), 1);
  assert_int_equal(lrec_count(&other, b.victim_id), 1);
  assert_int_equal(busy.calls, 3);
  assert_int_equal(other.calls, 3);
  assert_string_equal(lrec_find(&other, sibid)->kill_reason, "owner disposed");
  assert_int_equal(lrec_find(&other, sibid)->reported, 1);
  assert_int_equal(wv.status, 0);
  assert_int_equal(wv.snap.status, UVT_KILLED);
  assert_int_equal(ws.status, 0);
  assert_int_equal(ws.snap.status, UVT_COMPLETED);
  /* A's records were dropped by its disposal. */
  assert_int_equal(uvt_get(f.reg, sid, NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, sibid, NULL, &s), UVT_ENOTASK);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(idle.disposed, 1);
  fixture_close(&f);
  assert_int_equal(spawned.cancels, 1);
  wrec_cleanup(&wv);
  wrec_cleanup(&ws);
  lrec_cleanup(&busy);
  lrec_cleanup(&other);
}

/* R-DONE-4, R-CLOSE-3: a listener closes the registry inside the dispatch. */

typedef struct {
  uvt_registry_t *reg;
  int close_err;
  int closed;
} lcloser_t;

static void lcloser_done(void *data) {
  lcloser_t *c = data;
  c->closed++;
}

static void close_hook(lrec_t *r, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner) {
  lcloser_t *c = r->hook_data;
  (void)snap;
  (void)owner;
  if (c->close_err == 1)
    c->close_err = uvt_registry_close(c->reg, lcloser_done, c);
}

static void listener_close_inside(void **state) {
  fixture_t f;
  fake_t fk[3];
  lrec_t closer, next;
  lcloser_t c;
  char id[3][UVT_ID_MAX];
  int i;
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&closer);
  lrec_init(&next);
  memset(&c, 0, sizeof(c));
  c.reg = f.reg;
  c.close_err = 1;
  closer.hook = close_hook;
  closer.hook_data = &c;
  assert_int_equal(lrec_start(f.reg, &closer), 0);
  assert_int_equal(lrec_start(f.reg, &next), 0);
  for (i = 0; i < 3; i++)
    assert_int_equal(start_fake(&f, &fk[i], "x", NULL, id[i]), 0);
  /* Two settlements queued together; the third task is live at close. */
  assert_int_equal(fake_settle(&fk[0], UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(fake_settle(&fk[1], UVT_COMPLETED, NULL, NULL), 0);
  f.reg = NULL;
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(c.close_err, 0);
  assert_int_equal(c.closed, 1);
  assert_int_equal(closer.calls, 1); /* none runs once close began */
  /* Header: "none runs once registry close began" -- also the listeners
   * after the closer in this dispatch (R-DONE-4 says close must not
   * "skip another listener"; the header settles it this way). */
  assert_int_equal(next.calls, 0);
  assert_int_equal(fk[2].cancels, 1);
  assert_string_equal(fk[2].last_reason, "tasks service disposed");
  for (i = 0; i < 3; i++)
    assert_int_equal(fk[i].releases, 1);
  lrec_cleanup(&closer);
  lrec_cleanup(&next);
}

/* ---------------------------------------------------------------------- */
/* R-DONE-5: stopping a listener or detaching a surface never touches
 * tasks. */

static void listener_stop_detach_untouched(void **state) {
  fixture_t f;
  fake_t fk;
  lrec_t l, keep;
  uvt_snapshot_t before, after;
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  lrec_init(&l);
  lrec_init(&keep);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(lrec_start(f.reg, &keep), 0);
  assert_int_equal(start_fake(&f, &fk, "u", NULL, id), 0);
  fk.stream = 0;
  assert_int_equal(uvt_get(f.reg, id, NULL, &before), 0);
  uvt_listener_stop(&l.l);
  uvt_surface_detach(&f.surface); /* the last surface */
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_get(f.reg, id, NULL, &after), 0);
  assert_true(tc_snap_equal(&before, &after));
  assert_int_equal(after.status, UVT_RUNNING);
  assert_int_equal(fk.cancels, 0);
  uvt_snapshot_cleanup(&before);
  uvt_snapshot_cleanup(&after);
  /* The task still settles and is still announced. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &keep.calls, 1);
  assert_int_equal(l.calls, 0);
  assert_int_equal(fk.releases, 0);
  fixture_close(&f);
  lrec_cleanup(&l);
  lrec_cleanup(&keep);
}

/* ---------------------------------------------------------------------- */
/* Thread producers for C-16 and C-17. */

typedef struct {
  uvt_task_t *task;
  uv_thread_t th;
  pthread_barrier_t *barrier;
  unsigned delay_us;
  atomic_int settled_hooks;
  atomic_int releases;
  atomic_int cancels;
  int settle_rc;
  int index;
} tp_t;

static void tp_main(void *arg) {
  tp_t *p = arg;
  uvt_outcome_t o;
  if (p->barrier != NULL)
    pthread_barrier_wait(p->barrier);
  if (p->delay_us > 0) {
    struct timespec ts;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)p->delay_us * 1000;
    nanosleep(&ts, NULL);
  }
  memset(&o, 0, sizeof(o));
  o.status = UVT_COMPLETED;
  o.detail = "thread done";
  p->settle_rc = uvt_task_settle(p->task, &o);
}

static int tp_cancel(uvt_task_t *t, const char *reason) {
  tp_t *p = uvt_task_arg(t);
  (void)reason;
  atomic_fetch_add(&p->cancels, 1);
  return 0; /* the thread settles by itself */
}

static void tp_settled(uvt_task_t *t) {
  tp_t *p = uvt_task_arg(t);
  atomic_fetch_add(&p->settled_hooks, 1);
}

static void tp_release(uvt_task_t *t) {
  tp_t *p = uvt_task_arg(t);
  atomic_fetch_add(&p->releases, 1);
}

static int tp_run(uvt_task_t *t, void *arg, uvt_hooks_t *h) {
  tp_t *p = arg;
  p->task = t;
  h->cancel = tp_cancel;
  h->settled = tp_settled;
  h->release = tp_release;
  return uv_thread_create(&p->th, tp_main, p);
}

static int tp_start(uvt_registry_t *reg, tp_t *p, char id[UVT_ID_MAX]) {
  uvt_spec_t spec;
  memset(&spec, 0, sizeof(spec));
  spec.kind = "thr";
  spec.label = "thread task";
  spec.run = tp_run;
  spec.arg = p;
  return uvt_start(reg, &spec, id);
}

/* Counting listener keyed by the id's number. */
typedef struct {
  uvt_listener_t l;
  int *per_task;
  int ntasks;
  int calls;
  int bad;
  int off_thread;
  uv_thread_t loop_thread;
} countl_t;

static void countl_cb(uvt_listener_t *l, const uvt_snapshot_t *snap,
                      uvt_agent_t *owner) {
  countl_t *c = TC_CONTAINER(l, countl_t, l);
  uv_thread_t self = uv_thread_self();
  const char *dash = strrchr(snap->id, '-');
  int n = dash != NULL ? atoi(dash + 1) : 0;
  (void)owner;
  c->calls++;
  if (!uv_thread_equal(&self, &c->loop_thread))
    c->off_thread++;
  if (n >= 1 && n <= c->ntasks)
    c->per_task[n - 1]++;
  else
    c->bad++;
  if (!uvt_status_is_terminal(snap->status))
    c->bad++;
}

/* C-16: 200 thread-settled tasks released together by a barrier: all 200
 * terminal, the listener called 200 times (sends coalesce; R-DONE-1). */

#define C16_N 200

static void listener_c16_barrier(void **state) {
  fixture_t f;
  tp_t *p;
  countl_t c;
  pthread_barrier_t barrier;
  char id[UVT_ID_MAX];
  uvt_snapshot_t *list;
  size_t n, k;
  int i;
  (void)state;
  p = calloc(C16_N, sizeof(*p));
  assert_non_null(p);
  memset(&c, 0, sizeof(c));
  c.per_task = calloc(C16_N, sizeof(int));
  c.ntasks = C16_N;
  c.loop_thread = uv_thread_self();
  assert_int_equal(pthread_barrier_init(&barrier, NULL, C16_N + 1), 0);
  fixture_init(&f, NULL);
  assert_int_equal(uvt_listener_start(f.reg, &c.l, countl_cb), 0);
  for (i = 0; i < C16_N; i++) {
    p[i].barrier = &barrier;
    p[i].index = i;
    assert_int_equal(tp_start(f.reg, &p[i], id), 0);
  }
  pthread_barrier_wait(&barrier); /* release all 200 together */
  tc_run_until(&f, &c.calls, C16_N);
  for (i = 0; i < C16_N; i++)
    assert_int_equal(uv_thread_join(&p[i].th), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(c.calls, C16_N);
  assert_int_equal(c.bad, 0);
  assert_int_equal(c.off_thread, 0);
  for (i = 0; i < C16_N; i++) {
    assert_int_equal(c.per_task[i], 1);
    assert_int_equal(p[i].settle_rc, 0);
    assert_int_equal(atomic_load(&p[i].settled_hooks), 1);
  }
  assert_int_equal(uvt_list(f.reg, NULL, &list, &n), 0);
  assert_int_equal(n, C16_N);
  for (k = 0; k < n; k++)
    assert_int_equal(list[k].status, UVT_COMPLETED);
  uvt_snapshots_free(list, n);
  fixture_close(&f);
  for (i = 0; i < C16_N; i++)
    assert_int_equal(atomic_load(&p[i].releases), 1);
  pthread_barrier_destroy(&barrier);
  free(c.per_task);
  free(p);
}

/* C-17: 500 tasks whose threads settle after a random 0-2 ms while the loop
 * kills them after 1 ms, then closes the registry: every task terminal
 * exactly once, nothing touched after it is freed (run under valgrind). */

#define C17_N 500

typedef struct {
  uvt_registry_t *reg;
  tp_t *p;
  char (*ids)[UVT_ID_MAX];
  int kill_err;
  int requested;
  int already;
  int close_err;
  int closed;
} c17_t;

static void c17_closed(void *data) {
  c17_t *c = data;
  c->closed++;
}

static void c17_kill_all(void *arg) {
  c17_t *c = arg;
  int i, err;
  for (i = 0; i < C17_N; i++) {
    uvt_kill_result_t kr = 0;
    err = uvt_kill(c->reg, c->ids[i], NULL, "race", &kr);
    if (err != 0)
      c->kill_err++;
    else if (kr == UVT_KILL_REQUESTED)
      c->requested++;
    else if (kr == UVT_KILL_ALREADY_TERMINAL)
      c->already++;
  }
  c->close_err = uvt_registry_close(c->reg, c17_closed, c);
}

static void listener_c17_kill_race(void **state) {
  fixture_t f;
  c17_t c;
  countl_t cl;
  tc_timer_t t;
  pthread_barrier_t gate;
  unsigned seed = (unsigned)uv_hrtime();
  int i;
  (void)state;
  memset(&c, 0, sizeof(c));
  memset(&cl, 0, sizeof(cl));
  c.p = calloc(C17_N, sizeof(*c.p));
  c.ids = calloc(C17_N, sizeof(*c.ids));
  cl.per_task = calloc(C17_N, sizeof(int));
  cl.ntasks = C17_N;
  cl.loop_thread = uv_thread_self();
  assert_non_null(c.p);
  assert_non_null(c.ids);
  fixture_init(&f, NULL);
  c.reg = f.reg;
  assert_int_equal(uvt_listener_start(f.reg, &cl.l, countl_cb), 0);
  assert_int_equal(pthread_barrier_init(&gate, NULL, C17_N + 1), 0);
  for (i = 0; i < C17_N; i++) {
    seed = seed * 1103515245u + 12345u;
    c.p[i].delay_us = (seed >> 8) % 2001u;
    c.p[i].barrier = &gate;
    assert_int_equal(tp_start(f.reg, &c.p[i], c.ids[i]), 0);
  }
  /* All threads start their 0-2 ms together; the kill comes 1 ms later. */
  pthread_barrier_wait(&gate);
  uv_update_time(&f.loop);
  tc_timer_start(&f.loop, &t, 1, c17_kill_all, &c);
  f.reg = NULL;
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  for (i = 0; i < C17_N; i++)
    assert_int_equal(uv_thread_join(&c.p[i].th), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(c.kill_err, 0);
  assert_int_equal(c.requested + c.already, C17_N);
  assert_int_equal(c.close_err, 0);
  assert_int_equal(c.closed, 1);
  assert_int_equal(cl.bad, 0);
  assert_int_equal(cl.off_thread, 0);
  for (i = 0; i < C17_N; i++) {
    assert_int_equal(c.p[i].settle_rc, 0);
    assert_int_equal(atomic_load(&c.p[i].settled_hooks), 1);
    assert_int_equal(atomic_load(&c.p[i].releases), 1);
    assert_true(cl.per_task[i] <= 1); /* listeners stop at close */
  }
  pthread_barrier_destroy(&gate);
  print_message("C-17: %d kills requested, %d already terminal, %d "
                "notices before close\n",
                c.requested, c.already, cl.calls);
  free(cl.per_task);
  free(c.ids);
  free(c.p);
}

/* ---------------------------------------------------------------------- */
/* R-FEED-1 (beyond test-feed.c): every transition of owned and
 * unowned tasks in order; the terminal one after the listeners; records
 * dropped by agent disposal give a last `dropped` snapshot; a watcher may
 * close the registry from its callback (R-CLOSE-3) and the feed is silent
 * from then on; uvt_watch_stop is safe after the registry closed. */

#define FEED_MAX 32

typedef struct {
  uvt_watch_t w;
  int n;
  char ids[FEED_MAX][UVT_ID_MAX];
  uvt_status_t st[FEED_MAX];
  int dropped[FEED_MAX];
  int seq[FEED_MAX];
  uvt_registry_t *close_on_drop; /* close the registry on the first drop */
  int close_err;
  int after_close; /* events after the close request */
  int closing;
} feed_t;

static void feed_cb(uvt_watch_t *w, const uvt_snapshot_t *snap, int dropped) {
  feed_t *fd = TC_CONTAINER(w, feed_t, w);
  if (fd->closing)
    fd->after_close++;
  if (fd->n < FEED_MAX) {
    snprintf(fd->ids[fd->n], UVT_ID_MAX, "%s", snap->id);
    fd->st[fd->n] = snap->status;
    fd->dropped[fd->n] = dropped;
    fd->seq[fd->n] = tc_next();
  }
  fd->n++;
  if (dropped && fd->close_on_drop != NULL && !fd->closing) {
    fd->closing = 1;
    fd->close_err = uvt_registry_close(fd->close_on_drop, NULL, NULL);
  }
}

static int feed_index(const feed_t *fd, const char *id, uvt_status_t st,
                      int dropped) {
  int i;
  for (i = 0; i < fd->n && i < FEED_MAX; i++)
    if (tc_streq(fd->ids[i], id) && fd->st[i] == st &&
        fd->dropped[i] == dropped)
      return i;
  return -1;
}

static void listener_feed(void **state) {
  fixture_t f;
  feed_t fd;
  lrec_t l;
  arec_t a;
  fake_t t1, t2, t3;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX], id3[UVT_ID_MAX];
  int i;
  (void)state;
  fixture_init(&f, NULL);
  memset(&fd, 0, sizeof(fd));
  lrec_init(&l);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_watch_start(f.reg, &fd.w, feed_cb), 0);
  assert_int_equal(start_fake(&f, &t1, "fd", &a.a, id1), 0);
  assert_int_equal(start_fake(&f, &t2, "fd", NULL, id2), 0);
  assert_int_equal(start_fake(&f, &t3, "fd", NULL, id3), 0);
  assert_int_equal(fd.n, 0);
  t1.settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, id1, &a.a, "k", NULL), 0);
  assert_int_equal(fd.n, 0); /* never inside the call */
  assert_int_equal(fake_settle(&t1, UVT_KILLED, NULL, NULL), 0);
  assert_int_equal(fake_settle(&t2, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_until(&f, &l.calls, 2);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  /* A's disposal drops fd-1; a watcher closes the registry on that drop. */
  fd.close_on_drop = f.reg;
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  f.reg = NULL;
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  uvt_watch_stop(&fd.w); /* safe after close */
  uvt_watch_stop(&fd.w);

  assert_int_equal(fd.close_err, 0);
  assert_int_equal(fd.after_close, 0); /* silent once close began */
  assert_int_equal(a.disposed, 1);
  /* fd-1: running, stopping, killed, dropped, in that order. */
  {
    int r = feed_index(&fd, id1, UVT_RUNNING, 0);
    int s1 = feed_index(&fd, id1, UVT_STOPPING, 0);
    int k = feed_index(&fd, id1, UVT_KILLED, 0);
    int d = feed_index(&fd, id1, UVT_KILLED, 1);
    assert_true(r >= 0 && s1 > r && k > s1 && d > k);
    /* The terminal transition reaches watchers after the listeners. */
    assert_true(fd.seq[k] > lrec_seq_of(&l, id1));
  }
  /* fd-2: running, completed (no stopping, no drop before close). */
  assert_true(feed_index(&fd, id2, UVT_RUNNING, 0) >= 0);
  assert_true(feed_index(&fd, id2, UVT_COMPLETED, 0) >
              feed_index(&fd, id2, UVT_RUNNING, 0));
  assert_true(feed_index(&fd, id2, UVT_STOPPING, 0) < 0);
  assert_true(fd.seq[feed_index(&fd, id2, UVT_COMPLETED, 0)] >
              lrec_seq_of(&l, id2));
  /* fd-3: running only; its teardown at close is silent. */
  assert_true(feed_index(&fd, id3, UVT_RUNNING, 0) >= 0);
  for (i = 0; i < fd.n && i < FEED_MAX; i++)
    if (tc_streq(fd.ids[i], id3))
      assert_int_equal(fd.st[i], UVT_RUNNING);
  assert_int_equal(t3.cancels, 1);
  lrec_cleanup(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(listener_every_record_once),     TC_TEST(listener_order),
      TC_TEST(listener_settle_copies),         TC_TEST(listener_settle_oom),
      TC_TEST(listener_second_outcome),        TC_TEST(listener_late_settles),
      TC_TEST(listener_stop_inside),           TC_TEST(listener_start_inside),
      TC_TEST(listener_busy_inside),           TC_TEST(listener_close_inside),
      TC_TEST(listener_stop_detach_untouched), TC_TEST(listener_feed),
      TC_TEST(listener_c16_barrier),           TC_TEST(listener_c17_kill_race),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
