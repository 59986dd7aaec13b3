/* Calls into the library from inside producer hooks (R-REENTER-1, C-24):
 * run, cancel, read_output, settled, quiesce and release may call any
 * public function.  Each case ends in a consistent state: no crash, no
 * hang, no leak, every callback once, and the loop closes (L-1). */
#include <stdio.h>
#include <string.h>

#include "test-core.h"

static void count_closed(void *data) {
  ((fixture_t *)data)->closed++;
}

/* What a hook does from inside (one action per test case). */
enum {
  A_DISPOSE_OWNER = 0,
  A_CLOSE,
  A_START,       /* a new unowned task */
  A_START_OWNED, /* a new task of the same owner */
  A_KILL_SELF,
  A_FORGET_SELF,
  A_READ_SELF,
  A_WAIT_SELF,
  A_FORGET_OTHER, /* a terminal task of the same owner */
  A_KILL_OTHER,   /* a live task of the same owner */
  A_COUNT
};

static const char *const action_names[] = {
    "dispose owner", "close registry", "start",     "start owned",
    "kill self",     "forget self",    "read self", "wait self",
    "forget other",  "kill other"};

/* How the hook under test is reached. */
enum {
  T_RUN = 0,         /* uvt_start */
  T_CANCEL_KILL,     /* uvt_kill of the live task */
  T_CANCEL_DISPOSE,  /* agent disposal's teardown */
  T_CANCEL_CLOSE,    /* registry close's teardown */
  T_READ,            /* uvt_read of the live stream task */
  T_SETTLED,         /* its outcome is applied */
  T_QUIESCE_KILL,    /* uvt_kill of the ended task (P-KILL-6) */
  T_QUIESCE_FORGET,  /* uvt_forget of the ended task */
  T_QUIESCE_DISPOSE, /* agent disposal of the ended task */
  T_RELEASE,         /* uvt_forget drops the record */
  T_COUNT
};

static const char *const trigger_names[] = {"run",
                                            "cancel (kill)",
                                            "cancel (dispose)",
                                            "cancel (close)",
                                            "read_output",
                                            "settled",
                                            "quiesce (kill)",
                                            "quiesce (forget)",
                                            "quiesce (dispose)",
                                            "release"};

static const int trigger_hook[] = {
    FAKE_RUN,     FAKE_CANCEL,  FAKE_CANCEL,  FAKE_CANCEL,  FAKE_READ,
    FAKE_SETTLED, FAKE_QUIESCE, FAKE_QUIESCE, FAKE_QUIESCE, FAKE_RELEASE};

typedef struct {
  fixture_t f;
  arec_t owner;
  fake_t fk;    /* the task whose hook acts */
  fake_t other; /* FORGET_OTHER / KILL_OTHER's target */
  fake_t extra; /* started by A_START / A_START_OWNED */
  wrec_t w;     /* A_WAIT_SELF */
  char id[UVT_ID_MAX];
  char other_id[UVT_ID_MAX];
  char extra_id[UVT_ID_MAX];
  int hook;
  int action;
  int acted;
  int err;
  uvt_kill_result_t kr;
  int closing;
} re_t;

static void act(fake_t *fk, int hook) {
  re_t *re = fk->inside_data;
  uvt_registry_t *reg = re->f.reg;
  const char *self = re->id[0] != '\0' ? re->id : NULL;
  uvt_read_t rd;

  if (hook != re->hook || re->acted)
    return;
  re->acted = 1;
  switch (re->action) {
  case A_DISPOSE_OWNER:
    re->err = uvt_agent_dispose(&re->owner.a, arec_cb);
    break;
  case A_CLOSE:
    re->err = uvt_registry_close(reg, count_closed, &re->f);
    if (re->err == 0)
      re->closing = 1;
    break;
  case A_START:
  case A_START_OWNED:
    memset(&re->extra, 0, sizeof(re->extra));
    re->extra.settle_on_cancel = 1;
    re->err = fake_start(reg, &re->extra, "extra", NULL,
                         re->action == A_START_OWNED ? &re->owner.a : NULL,
                         re->extra_id);
    break;
  case A_KILL_SELF:
    re->err = uvt_kill(reg, self, &re->owner.a, "again", &re->kr);
    break;
  case A_FORGET_SELF:
    re->err = uvt_forget(reg, self, &re->owner.a);
    break;
  case A_READ_SELF:
    re->err = uvt_read(reg, self, &re->owner.a, &rd);
    if (re->err == 0)
      uvt_read_cleanup(&rd);
    break;
  case A_WAIT_SELF:
    re->err = uvt_wait(reg, &re->w.req, self, 60000, &re->owner.a, wrec_cb);
    break;
  case A_FORGET_OTHER:
    re->err = uvt_forget(reg, re->other_id, &re->owner.a);
    break;
  case A_KILL_OTHER:
    re->err = uvt_kill(reg, re->other_id, &re->owner.a, "from a hook", NULL);
    break;
  }
}

/* What the call from inside the hook returns.  -1: any of 0 and the
 * listed alternatives is fine (the order of events decides). */
static int expected(int trigger, int action) {
  int before_commit = trigger == T_RUN;
  int live = trigger == T_CANCEL_KILL || trigger == T_CANCEL_DISPOSE ||
             trigger == T_CANCEL_CLOSE || trigger == T_READ;
  /* Out of lookups: dropped, or forgotten (its quiesce still running). */
  int dropped = trigger == T_RELEASE || trigger == T_QUIESCE_FORGET;
  /* The other task's teardown came first in the sweep and dropped it. */
  int other_gone = trigger == T_CANCEL_DISPOSE || trigger == T_CANCEL_CLOSE ||
                   trigger == T_QUIESCE_DISPOSE;
  int disposing = trigger == T_CANCEL_DISPOSE || trigger == T_QUIESCE_DISPOSE;
  int closing = trigger == T_CANCEL_CLOSE;

  switch (action) {
  case A_DISPOSE_OWNER:
    return disposing ? UVT_ECLOSING : 0;
  case A_CLOSE:
    return closing ? UVT_ECLOSING : 0;
  case A_START:
    return closing ? UVT_ECLOSING : 0;
  case A_START_OWNED:
    return closing || disposing ? UVT_ECLOSING : 0;
  case A_KILL_SELF:
    if (before_commit)
      return UV_EINVAL; /* no id yet */
    if (dropped)
      return UVT_ENOTASK;
    /* A kill of a task whose cancel hook is running is refused. */
    if (trigger == T_CANCEL_KILL || trigger == T_CANCEL_DISPOSE ||
        trigger == T_CANCEL_CLOSE)
      return UV_EBUSY;
    return 0;
  case A_FORGET_SELF:
    if (before_commit)
      return UV_EINVAL;
    if (dropped)
      return UVT_ENOTASK;
    return live ? UV_EBUSY : 0; /* R-FORGET-2: from any hook once ended */
  case A_READ_SELF:
    if (before_commit)
      return UV_EINVAL;
    if (dropped)
      return UVT_ENOTASK;
    return trigger == T_READ ? UV_EBUSY : 0;
  case A_WAIT_SELF:
    if (before_commit)
      return UV_EINVAL;
    if (dropped)
      return UVT_ENOTASK;
    return closing ? UVT_ECLOSING : 0;
  case A_FORGET_OTHER:
    return other_gone ? UVT_ENOTASK : 0;
  case A_KILL_OTHER:
    return 0;
  }
  return 0;
}

/* One case: start, reach the hook, then dispose the owner and close the
 * registry (unless the hook did), run the loop to the end. */
static void run_case(int trigger, int action) {
  re_t *re = calloc(1, sizeof(*re));
  uvt_options_t o;
  uvt_read_t rd;
  int err, want;
  char what[128];

  assert_non_null(re);
  snprintf(what, sizeof(what), "%s from %s", action_names[action],
           trigger_names[trigger]);
  tc_nfakes = 0;
  uvt_options_init(&o);
  o.teardown_grace_ms = 2000;
  fixture_init(&re->f, &o);
  arec_init(&re->owner);
  wrec_init(&re->w);
  re->hook = trigger_hook[trigger];
  re->action = action;
  re->err = 12345;
  assert_int_equal(uvt_agent_register(re->f.reg, &re->owner.a, "A", "s1"), 0);

  /* The other task: terminal for forget, live for kill. */
  re->other.settle_on_cancel = 1;
  assert_int_equal(fake_start(re->f.reg, &re->other, "other", NULL,
                              &re->owner.a, re->other_id),
                   0);
  if (action == A_FORGET_OTHER) {
    assert_int_equal(fake_settle(&re->other, UVT_COMPLETED, NULL, NULL), 0);
    tc_run_settled(&re->f, &re->other);
  }

  re->fk.stream = 1;
  re->fk.settle_on_cancel = 1;
  re->fk.has_quiesce = 1;
  re->fk.inside = act;
  re->fk.inside_data = re;
  err = fake_start(re->f.reg, &re->fk, "self", NULL, &re->owner.a, re->id);
  if (err != 0)
    fail_msg("%s: start returned %s", what, uvt_err_name(err));

  switch (trigger) {
  case T_RUN:
    break;
  case T_CANCEL_KILL:
    assert_int_equal(uvt_kill(re->f.reg, re->id, &re->owner.a, NULL, NULL), 0);
    break;
  case T_CANCEL_DISPOSE:
    assert_int_equal(uvt_agent_dispose(&re->owner.a, arec_cb), 0);
    break;
  case T_CANCEL_CLOSE:
    assert_int_equal(uvt_registry_close(re->f.reg, count_closed, &re->f), 0);
    re->closing = 1;
    break;
  case T_READ:
    fake_emit(&re->fk, "text");
    assert_int_equal(uvt_read(re->f.reg, re->id, &re->owner.a, &rd), 0);
    assert_int_equal(rd.len, 4);
    uvt_read_cleanup(&rd);
    break;
  default:
    assert_int_equal(fake_settle(&re->fk, UVT_COMPLETED, NULL, NULL), 0);
    tc_run_settled(&re->f, &re->fk);
    if (trigger == T_QUIESCE_KILL)
      err = uvt_kill(re->f.reg, re->id, &re->owner.a, NULL, &re->kr);
    else if (trigger == T_QUIESCE_FORGET || trigger == T_RELEASE)
      err = uvt_forget(re->f.reg, re->id, &re->owner.a);
    else if (trigger == T_QUIESCE_DISPOSE)
      err = uvt_agent_dispose(&re->owner.a, arec_cb);
    else
      err = 0;
    if (err != 0)
      fail_msg("%s: trigger returned %s", what, uvt_err_name(err));
    break;
  }
  if (!re->acted)
    fail_msg("%s: the hook never ran", what);
  want = expected(trigger, action);
  if (re->err != want)
    fail_msg("%s: expected %s, got %s", what, uvt_err_name(want),
             uvt_err_name(re->err));

  /* The end: the owner's disposal and the registry's close, unless the
   * hook already asked for them (then they say so). */
  err = uvt_agent_dispose(&re->owner.a, arec_cb);
  if (err != 0 && err != UVT_ECLOSING && err != UV_EINVAL)
    fail_msg("%s: final dispose returned %s", what, uvt_err_name(err));
  if (!re->closing) {
    assert_int_equal(uvt_registry_close(re->f.reg, count_closed, &re->f), 0);
    re->closing = 1;
  }
  re->f.reg = NULL;
  fixture_close(&re->f); /* L-1, the close callback once */
  if (re->owner.disposed != 1)
    fail_msg("%s: dispose callbacks: %d", what, re->owner.disposed);
  if (re->fk.runs != 1 || re->fk.releases != 1)
    fail_msg("%s: runs %d, releases %d", what, re->fk.runs, re->fk.releases);
  if (re->other.releases != 1)
    fail_msg("%s: other task's releases: %d", what, re->other.releases);
  if (re->extra.runs > 0 && re->extra.releases != 1)
    fail_msg("%s: started task's releases: %d", what, re->extra.releases);
  if (action == A_WAIT_SELF && re->err == 0 && re->w.calls != 1)
    fail_msg("%s: wait callbacks: %d", what, re->w.calls);
  /* A cancel hook that is running is never entered again. */
  if (re->fk.cancels > 2)
    fail_msg("%s: cancels %d", what, re->fk.cancels);
  wrec_cleanup(&re->w);
  free(re);
}

/* R-REENTER-1: every action from every hook. */
static void reenter_every_hook(void **state) {
  int trigger, action;
  (void)state;
  for (trigger = 0; trigger < T_COUNT; trigger++)
    for (action = 0; action < A_COUNT; action++) {
      run_case(trigger, action);
      /* Each case gives back everything it took. */
      assert_int_equal(tc_live_now(), 0);
    }
}

/* ---------------------------------------------------------------------- */
/* C-24: the owner disposed from inside `run`.  The start succeeds, the
 * task is registered and then cancelled by the disposal ("owner
 * disposed"), the dispose callback runs once, the loop closes.  A second
 * start for the disposing owner from inside the same run is UVT_ECLOSING. */

typedef struct {
  fixture_t *f;
  arec_t *owner;
  int dispose_err;
  int nested_err;
  fake_t nested;
  char nested_id[UVT_ID_MAX];
  int disposed_during_run;
} c24_t;

static void c24_inside(fake_t *fk, int hook) {
  c24_t *c = fk->inside_data;
  if (hook != FAKE_RUN)
    return;
  c->dispose_err = uvt_agent_dispose(&c->owner->a, arec_cb);
  c->disposed_during_run = c->owner->disposed;
  c->nested.settle_on_cancel = 1;
  c->nested_err = fake_start(c->f->reg, &c->nested, "c24", NULL, &c->owner->a,
                             c->nested_id);
}

static void reenter_c24_dispose_owner_in_run(void **state) {
  fixture_t f;
  arec_t a;
  fake_t fk;
  c24_t c;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  uvt_metrics_t m;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  memset(&c, 0, sizeof(c));
  memset(&fk, 0, sizeof(fk));
  c.f = &f;
  c.owner = &a;
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  fk.settle_on_cancel = 1;
  fk.inside = c24_inside;
  fk.inside_data = &c;
  assert_int_equal(fake_start(f.reg, &fk, "c24", NULL, &a.a, id), 0);
  assert_string_equal(id, "c24-1");
  assert_int_equal(c.dispose_err, 0);
  assert_int_equal(c.disposed_during_run, 0);
  assert_int_equal(c.nested_err, UVT_ECLOSING);
  assert_int_equal(c.nested.runs, 0);
  /* Registered, then cancelled by the disposal at once. */
  assert_int_equal(fk.cancels, 1);
  assert_string_equal(fk.last_reason, "owner disposed");
  assert_int_equal(uvt_get(f.reg, id, &a.a, &s), 0);
  assert_int_equal(s.status, UVT_STOPPING);
  assert_int_equal(s.reported, 1);
  assert_string_equal(s.kill_reason, "owner disposed");
  uvt_snapshot_cleanup(&s);
  assert_int_equal(a.disposed, 0); /* never inside the call */
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), UVT_ENOTASK);
  assert_int_equal(fk.releases, 1);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 1);
  assert_int_equal(m.records, 0);
  fixture_close(&f);
  assert_int_equal(a.disposed, 1);
}

/* C-24 sibling: the owner disposed inside a `run` that then fails.  The
 * start returns run's error with nothing registered, and the disposal,
 * which waited for the start to finish, completes. */
static void reenter_c24_dispose_then_run_fails(void **state) {
  fixture_t f;
  arec_t a;
  fake_t fk;
  c24_t c;
  char id[UVT_ID_MAX];
  uvt_metrics_t m;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  memset(&c, 0, sizeof(c));
  memset(&fk, 0, sizeof(fk));
  c.f = &f;
  c.owner = &a;
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  fk.run_error = UV_EIO;
  fk.inside = c24_inside;
  fk.inside_data = &c;
  assert_int_equal(fake_start(f.reg, &fk, "c24", NULL, &a.a, id), UV_EIO);
  assert_int_equal(c.dispose_err, 0);
  assert_int_equal(fk.cancels, 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(a.disposed, 1);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 0);
  assert_int_equal(m.records, 0);
  /* Stale from now on (R-OWN-1). */
  assert_int_equal(fake_start(f.reg, &c.nested, "c24", NULL, &a.a, id),
                   UVT_ESTALE);
  fixture_close(&f);
}

/* R-REENTER-1: the registry closed from inside `run` (owned and unowned
 * tasks).  The task is registered and cancelled by the close ("tasks
 * service disposed"); uv_run returns (before: the record was committed
 * after the close collected its tasks, and uv_run never returned). */

typedef struct {
  fixture_t *f;
  int close_err;
  int nested_err;
  fake_t nested;
} inrun_close_t;

static void close_inside(fake_t *fk, int hook) {
  inrun_close_t *c = fk->inside_data;
  char id[UVT_ID_MAX];
  if (hook != FAKE_RUN)
    return;
  c->close_err = uvt_registry_close(c->f->reg, count_closed, c->f);
  c->nested_err = fake_start(c->f->reg, &c->nested, "n", NULL, NULL, id);
}

static void reenter_close_in_run(void **state) {
  int owned, fails;
  (void)state;
  for (owned = 0; owned < 2; owned++)
    for (fails = 0; fails < 2; fails++) {
      fixture_t f;
      arec_t a;
      fake_t fk;
      inrun_close_t c;
      char id[UVT_ID_MAX];
      int err;
      fixture_init(&f, NULL);
      arec_init(&a);
      memset(&c, 0, sizeof(c));
      memset(&fk, 0, sizeof(fk));
      c.f = &f;
      assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
      fk.settle_on_cancel = 1;
      fk.run_error = fails ? UV_EIO : 0;
      fk.inside = close_inside;
      fk.inside_data = &c;
      err = fake_start(f.reg, &fk, "c", NULL, owned ? &a.a : NULL, id);
      assert_int_equal(err, fails ? UV_EIO : 0);
      assert_int_equal(c.close_err, 0);
      assert_int_equal(c.nested_err, UVT_ECLOSING);
      assert_int_equal(fk.cancels, fails ? 0 : 1);
      if (!fails)
        assert_string_equal(fk.last_reason, "tasks service disposed");
      assert_int_equal(f.closed, 0);
      f.reg = NULL;
      fixture_close(&f);
      assert_int_equal(fk.releases, fails ? 0 : 1);
    }
}

/* R-REENTER-1 with R-LIMIT-1: a start from inside another start's `run`
 * sees the outer start as live (max_live_per_owner), and ids are taken in
 * commit order: the inner task commits first. */

typedef struct {
  fixture_t *f;
  uvt_agent_t *owner;
  fake_t inner;
  char inner_id[UVT_ID_MAX];
  int err;
} nest_t;

static void nest_inside(fake_t *fk, int hook) {
  nest_t *n = fk->inside_data;
  if (hook != FAKE_RUN)
    return;
  n->inner.settle_on_cancel = 1;
  n->err = fake_start(n->f->reg, &n->inner, "n", NULL, n->owner, n->inner_id);
}

static void reenter_start_in_run(void **state) {
  int limited, owned;
  (void)state;
  for (limited = 0; limited < 2; limited++)
    for (owned = 0; owned < 2; owned++) {
      fixture_t f;
      uvt_options_t o;
      arec_t a;
      fake_t fk;
      nest_t n;
      char id[UVT_ID_MAX];
      uvt_metrics_t m;
      uvt_options_init(&o);
      o.max_live_per_owner = limited ? 1 : 0;
      fixture_init(&f, &o);
      arec_init(&a);
      memset(&n, 0, sizeof(n));
      memset(&fk, 0, sizeof(fk));
      n.f = &f;
      n.owner = owned ? &a.a : NULL;
      assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
      fk.settle_on_cancel = 1;
      fk.inside = nest_inside;
      fk.inside_data = &n;
      assert_int_equal(fake_start(f.reg, &fk, "n", NULL, n.owner, id), 0);
      uvt_registry_metrics(f.reg, &m);
      if (limited) {
        assert_int_equal(n.err, UVT_ELIMIT);
        assert_int_equal(n.inner.runs, 0);
        assert_string_equal(id, "n-1");
        assert_int_equal(m.live, 1);
      } else {
        assert_int_equal(n.err, 0);
        assert_string_equal(n.inner_id, "n-1");
        assert_string_equal(id, "n-2");
        assert_int_equal(m.live, 2);
      }
      fixture_close(&f);
    }
}

/* ---------------------------------------------------------------------- */
/* R-REENTER-1, cancel: a cancel hook that kills its own task is refused
 * (UV_EBUSY) instead of recursing; one that disposes the owner (from
 * uvt_kill) is not entered again by the disposal's teardown.  A cancel
 * that then fails gives the kill its error and the disposal force-fails
 * the record (R-AGENT-3). */

typedef struct {
  fixture_t *f;
  arec_t *owner;
  char id[UVT_ID_MAX];
  int kill_err;
  int dispose_err;
  int do_dispose;
  int depth, max_depth;
} cancel_re_t;

static void cancel_inside(fake_t *fk, int hook) {
  cancel_re_t *c = fk->inside_data;
  if (hook != FAKE_CANCEL)
    return;
  if (++c->depth > c->max_depth)
    c->max_depth = c->depth;
  if (c->do_dispose)
    c->dispose_err = uvt_agent_dispose(&c->owner->a, arec_cb);
  else
    c->kill_err = uvt_kill(c->f->reg, c->id, &c->owner->a, "again", NULL);
  c->depth--;
}

static void reenter_cancel_hook(void **state) {
  int round;
  (void)state;
  for (round = 0; round < 3; round++) {
    fixture_t f;
    arec_t a;
    fake_t fk;
    cancel_re_t c;
    uvt_kill_result_t kr = 0;
    uvt_snapshot_t s;
    int err;
    fixture_init(&f, NULL);
    arec_init(&a);
    memset(&c, 0, sizeof(c));
    memset(&fk, 0, sizeof(fk));
    c.f = &f;
    c.owner = &a;
    c.kill_err = c.dispose_err = 12345;
    c.do_dispose = round > 0;
    fk.settle_on_cancel = round < 2;
    fk.cancel_error = round == 2 ? UV_EPERM : 0;
    fk.inside = cancel_inside;
    fk.inside_data = &c;
    assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
    assert_int_equal(fake_start(f.reg, &fk, "k", NULL, &a.a, c.id), 0);
    err = uvt_kill(f.reg, c.id, &a.a, "first", &kr);
    assert_int_equal(fk.cancels, 1);
    assert_int_equal(c.max_depth, 1);
    if (round == 0) {
      assert_int_equal(err, 0);
      assert_int_equal(kr, UVT_KILL_REQUESTED);
      assert_int_equal(c.kill_err, UV_EBUSY);
      assert_int_equal(uvt_get(f.reg, c.id, &a.a, &s), 0);
      assert_string_equal(s.kill_reason, "first");
      uvt_snapshot_cleanup(&s);
    } else if (round == 1) {
      assert_int_equal(err, 0);
      assert_int_equal(kr, UVT_KILL_REQUESTED);
      assert_int_equal(c.dispose_err, 0);
      assert_int_equal(uvt_get(f.reg, c.id, &a.a, &s), 0);
      assert_int_equal(s.status, UVT_STOPPING);
      uvt_snapshot_cleanup(&s);
      tc_run_until(&f, &a.disposed, 1);
    } else {
      /* The kill fails with the producer's error; the disposal, whose
       * cancel was that same call, force-fails the record. */
      assert_int_equal(err, UV_EPERM);
      assert_int_equal(c.dispose_err, 0);
      assert_int_equal(uvt_get(f.reg, c.id, &a.a, &s), 0);
      assert_int_equal(s.status, UVT_FAILED);
      assert_true(tc_contains(s.detail, "cancel failed during teardown"));
      uvt_snapshot_cleanup(&s);
      assert_int_equal(f.warnings, 1);
      tc_run_until(&f, &a.disposed, 1);
    }
    fixture_close(&f);
    assert_int_equal(fk.releases, 1);
    assert_int_equal(a.disposed, round > 0 ? 1 : 0);
    if (round == 2) /* it never settled: its late settle frees the handle */
      assert_int_equal(fake_settle(&fk, UVT_KILLED, NULL, NULL), 0);
  }
}

/* ---------------------------------------------------------------------- */
/* R-REENTER-1 with the close callback: inside it the registry still
 * answers (everything is gone, so lookups give UVT_ENOTASK and new work
 * UVT_ECLOSING) and is freed only after it returns. */

typedef struct {
  uvt_registry_t *reg;
  int calls;
  int start_err, get_err, close_err, wait_err, register_err, list_err;
  size_t listed;
} in_close_t;

static void close_cb_calls(void *data) {
  in_close_t *c = data;
  fake_t fk;
  uvt_snapshot_t s;
  uvt_snapshot_t *arr;
  uvt_wait_t w;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  memset(&fk, 0, sizeof(fk));
  memset(&w, 0, sizeof(w));
  memset(&a, 0, sizeof(a));
  c->calls++;
  c->start_err = fake_start(c->reg, &fk, "x", NULL, NULL, id);
  c->get_err = uvt_get(c->reg, "x-1", NULL, &s);
  c->wait_err = uvt_wait(c->reg, &w, "x-1", 10, NULL, wrec_cb);
  c->register_err = uvt_agent_register(c->reg, &a, "A", "s");
  c->list_err = uvt_list(c->reg, NULL, &arr, &c->listed);
  c->close_err = uvt_registry_close(c->reg, close_cb_calls, c);
}

static void reenter_close_callback(void **state) {
  uv_loop_t loop;
  uvt_surface_t s = {0};
  fake_t fk;
  char id[UVT_ID_MAX];
  in_close_t c;
  (void)state;
  memset(&c, 0, sizeof(c));
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(uvt_registry_new(&loop, NULL, &c.reg), 0);
  assert_int_equal(uvt_surface_attach(c.reg, &s, "ui"), 0);
  assert_int_equal(fake_start(c.reg, &fk, "x", NULL, NULL, id), 0);
  assert_int_equal(uvt_registry_close(c.reg, close_cb_calls, &c), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(c.calls, 1);
  assert_int_equal(c.start_err, UVT_ECLOSING);
  assert_int_equal(c.get_err, UVT_ENOTASK);
  assert_int_equal(c.wait_err, UVT_ENOTASK);
  assert_int_equal(c.register_err, UVT_ECLOSING);
  assert_int_equal(c.list_err, 0);
  assert_int_equal(c.listed, 0);
  assert_int_equal(c.close_err, UVT_ECLOSING);
}

/* R-REENTER-1 with the log callback: a host that closes the registry when
 * it is told that a cancel failed during teardown (R-AGENT-3). */

typedef struct {
  fixture_t f;
  int logs;
  int close_err;
} log_re_t;

static void log_and_close(int level, const char *message, void *data) {
  log_re_t *l = data;
  (void)level;
  (void)message;
  if (l->logs++ == 0)
    l->close_err = uvt_registry_close(l->f.reg, count_closed, &l->f);
}

static void reenter_log_callback(void **state) {
  log_re_t l;
  uvt_options_t o;
  arec_t a;
  fake_t stuck, fine;
  char id1[UVT_ID_MAX], id2[UVT_ID_MAX];
  (void)state;
  memset(&l, 0, sizeof(l));
  memset(&stuck, 0, sizeof(stuck));
  memset(&fine, 0, sizeof(fine));
  uvt_options_init(&o);
  o.log = log_and_close;
  o.log_data = &l;
  fixture_init(&l.f, &o);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(l.f.reg, &a.a, "A", "s1"), 0);
  stuck.cancel_error = UV_EIO;
  fine.settle_on_cancel = 1;
  assert_int_equal(fake_start(l.f.reg, &stuck, "l", NULL, &a.a, id1), 0);
  assert_int_equal(fake_start(l.f.reg, &fine, "l", NULL, &a.a, id2), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(l.logs, 1);
  assert_int_equal(l.close_err, 0);
  l.f.reg = NULL;
  fixture_close(&l.f);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(stuck.releases, 1);
  assert_int_equal(fine.releases, 1);
  assert_int_equal(fake_settle(&stuck, UVT_KILLED, NULL, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(reenter_c24_dispose_owner_in_run),
      TC_TEST(reenter_c24_dispose_then_run_fails),
      TC_TEST(reenter_close_in_run),
      TC_TEST(reenter_start_in_run),
      TC_TEST(reenter_cancel_hook),
      TC_TEST(reenter_close_callback),
      TC_TEST(reenter_log_callback),
      TC_TEST(reenter_every_hook),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
