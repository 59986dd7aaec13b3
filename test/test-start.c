/* uvt_start: the surface fence, validation, the owner check, admission,
 * allocation failures, ids and the same-turn record (R-START-1..5, R-LIMIT-1,
 * R-OWN-1, R-SURF-1, C-14). */
#include <stdio.h>
#include <string.h>

#include "test-core.h"
#include "uvtasks/producer.h"

/* A start with the fake producer, asserting nothing. */
static int start_kind(fixture_t *f, fake_t *fk, const char *kind,
                      const char *label, uvt_agent_t *owner,
                      char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1; /* so that registry close never waits */
  return fake_start(f->reg, fk, kind, label, owner, id);
}

static uint64_t records(uvt_registry_t *reg) {
  uvt_metrics_t m;
  uvt_registry_metrics(reg, &m);
  return m.records;
}

/* ---------------------------------------------------------------------- */
/* R-SURF-1, R-START-1: the surface fence comes first. */

static void start_no_surface(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  fake_t *fkp = NULL;
  (void)state;
  fixture_init(&f, NULL);
  uvt_surface_detach(&f.surface);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), NULL, NULL, NULL, id),
                   UVT_ENOSURFACE);
  assert_int_equal(fkp->runs, 0);
  assert_int_equal(records(f.reg), 0);
  fixture_close(&f);
}

/* R-SURF-1: each attach counts on its own (same name twice is two); detach
 * is idempotent; when the last surface detaches starts fail again. */
static void start_surface_counting(void **state) {
  fixture_t f;
  uvt_surface_t s2 = {0}, s3 = {0};
  char id[UVT_ID_MAX];
  fake_t *fkp = NULL;
  (void)state;
  fixture_init(&f, NULL);
  memset(&s2, 0, sizeof(s2));
  memset(&s3, 0, sizeof(s3));
  /* Same name as the fixture's surface: a second, separate attach. */
  assert_int_equal(uvt_surface_attach(f.reg, &s2, "test"), 0);
  assert_int_equal(uvt_surface_attach(f.reg, &s3, ""), UV_EINVAL);
  assert_int_equal(uvt_surface_attach(f.reg, &s3, NULL), UV_EINVAL);
  assert_int_equal(uvt_surface_attach(f.reg, NULL, "x"), UV_EINVAL);
  assert_int_equal(uvt_surface_attach(NULL, &s3, "x"), UV_EINVAL);

  uvt_surface_detach(&f.surface);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), NULL, NULL, NULL, id), 0);
  assert_string_equal(id, "fake-1");
  uvt_surface_detach(&f.surface); /* idempotent: s2 still counts */
  uvt_surface_detach(NULL);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), NULL, NULL, NULL, id), 0);
  assert_string_equal(id, "fake-2");

  uvt_surface_detach(&s2);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), NULL, NULL, NULL, id),
                   UVT_ENOSURFACE);
  assert_int_equal(fkp->runs, 0);
  uvt_surface_detach(&s2);

  /* A detached surface can attach again. */
  assert_int_equal(uvt_surface_attach(f.reg, &s2, "again"), 0);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), NULL, NULL, NULL, id), 0);
  assert_string_equal(id, "fake-3");
  uvt_surface_detach(&s2);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-START-1 validation: kind 1-64 bytes of printable ASCII without space;
 * label non-empty.  Refusals use no id number and never call run. */

static void start_validation(void **state) {
  static const char *bad_kinds[] = {
      "",      " ",    "a b",         "tab\there", "nl\n",  "\x01",
      "a\x7f", "\x1f", "caf\xc3\xa9", "\xff",      " lead", "trail ",
  };
  static const char *good_kinds[] = {"a", "Z9", "a-b_c.d:e/f", "~!@#$%^&*()",
                                     "bash"};
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  char kind64[UVT_KIND_MAX + 1];
  char kind65[UVT_KIND_MAX + 2];
  char expect[UVT_ID_MAX];
  char *longlabel;
  uvt_spec_t spec;
  size_t i;
  fake_t *fkp = NULL;
  (void)state;
  fixture_init(&f, NULL);

  for (i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
    assert_int_equal(
        start_kind(&f, (fkp = tc_fake()), bad_kinds[i], "l", NULL, id),
        UV_EINVAL);
    assert_int_equal(fkp->runs, 0);
  }

  /* 64 bytes is the longest kind; 65 is refused. */
  memset(kind64, 'k', UVT_KIND_MAX);
  kind64[UVT_KIND_MAX] = '\0';
  memset(kind65, 'k', UVT_KIND_MAX + 1);
  kind65[UVT_KIND_MAX + 1] = '\0';
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), kind65, "l", NULL, id),
                   UV_EINVAL);
  assert_int_equal(fkp->runs, 0);
  memset(id, 'X', sizeof(id));
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), kind64, "l", NULL, id), 0);
  assert_int_equal(fkp->runs, 1);
  snprintf(expect, sizeof(expect), "%s-1", kind64);
  assert_string_equal(id, expect);

  /* Labels: empty and NULL refused; anything else non-empty accepted. */
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "lab", "", NULL, id),
                   UV_EINVAL);
  assert_int_equal(fkp->runs, 0);
  memset(&spec, 0, sizeof(spec));
  fkp->runs = 0;
  spec.kind = "lab";
  spec.label = NULL;
  spec.run = NULL;
  spec.arg = &fk;
  assert_int_equal(uvt_start(f.reg, &spec, id), UV_EINVAL);
  spec.label = "has a run? no";
  assert_int_equal(uvt_start(f.reg, &spec, id), UV_EINVAL);
  spec.kind = NULL;
  assert_int_equal(uvt_start(f.reg, &spec, id), UV_EINVAL);
  assert_int_equal(uvt_start(f.reg, NULL, id), UV_EINVAL);
  assert_int_equal(records(f.reg), 1);

  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "lab",
                              " spaces\tand\nnewlines ", NULL, id),
                   0);
  assert_string_equal(id, "lab-1"); /* refusals used no number */
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "lab",
                              "caf\xc3\xa9 \xf0\x9f\x8e\x89", NULL, id),
                   0);
  assert_string_equal(id, "lab-2");
  longlabel = malloc(10001);
  assert_non_null(longlabel);
  memset(longlabel, 'L', 10000);
  longlabel[10000] = '\0';
  assert_int_equal(
      start_kind(&f, (fkp = tc_fake()), "lab", longlabel, NULL, id), 0);
  assert_string_equal(id, "lab-3");
  {
    uvt_snapshot_t s;
    assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
    assert_string_equal(s.label, longlabel);
    assert_string_equal(s.kind, "lab");
    uvt_snapshot_cleanup(&s);
  }
  free(longlabel);

  for (i = 0; i < sizeof(good_kinds) / sizeof(good_kinds[0]); i++) {
    assert_int_equal(
        start_kind(&f, (fkp = tc_fake()), good_kinds[i], "l", NULL, id), 0);
    snprintf(expect, sizeof(expect), "%s-1", good_kinds[i]);
    assert_string_equal(id, expect);
  }

  /* id_out may be NULL. */
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "noid", "l", NULL, NULL),
                   0);
  {
    uvt_snapshot_t s;
    assert_int_equal(uvt_get(f.reg, "noid-1", NULL, &s), 0);
    uvt_snapshot_cleanup(&s);
  }
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-START-1 order of checks: surface fence, validation, owner check,
 * admission limit, allocations.  Each later failure is present in every
 * case, so the code returned names the earliest check. */

/* Start with a throw-away fake that must be refused with `err` before run. */
static void expect_refused(fixture_t *f, const char *kind, const char *label,
                           uvt_agent_t *owner, int err) {
  fake_t fk;
  char id[UVT_ID_MAX];
  int got;
  memset(&fk, 0, sizeof(fk));
  got = fake_start(f->reg, &fk, kind, label, owner, id);
  tc_disarm(); /* assertions below may allocate nothing of ours, but be safe */
  assert_int_equal(got, err);
  assert_int_equal(fk.runs, 0);
}

static void start_check_order(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t held, ah;
  arec_t a;
  uvt_agent_t never = {0};
  uvt_metrics_t m;
  char id[UVT_ID_MAX];
  fake_t *fkp = NULL;
  (void)state;
  uvt_options_init(&o);
  o.max_live_per_owner = 1;
  fixture_init(&f, &o);
  arec_init(&a);
  memset(&never, 0, sizeof(never));
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);

  /* Fill the unowned bucket and A's bucket. */
  assert_int_equal(start_kind(&f, &held, NULL, NULL, NULL, id), 0);
  memset(&ah, 0, sizeof(ah)); /* cancel does not settle: dispose waits */
  assert_int_equal(fake_start(f.reg, &ah, "own", "l", &a.a, id), 0);
  assert_string_equal(id, "own-1");

  /* Limit before allocations: every allocation would fail. */
  tc_arm(1, 1);
  expect_refused(&f, "k", "l", NULL, UVT_ELIMIT);
  tc_arm(1, 1);
  expect_refused(&f, "k", "l", &a.a, UVT_ELIMIT);
  /* Owner check before the limit and allocations. */
  tc_arm(1, 1);
  expect_refused(&f, "k", "l", &never, UVT_ESTALE);
  /* Validation before the owner check. */
  tc_arm(1, 1);
  expect_refused(&f, "bad kind", "l", &never, UV_EINVAL);
  tc_arm(1, 1);
  expect_refused(&f, "k", "", &never, UV_EINVAL);

  /* Surface fence before validation. */
  uvt_surface_detach(&f.surface);
  tc_arm(1, 1);
  expect_refused(&f, "bad kind", "", &never, UVT_ENOSURFACE);
  assert_int_equal(uvt_surface_attach(f.reg, &f.surface, "test"), 0);

  /* An owner being disposed (UVT_ECLOSING) is refused by the owner check:
   * before the limit, which A has reached, after validation. */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  expect_refused(&f, "k", "l", &a.a, UVT_ECLOSING);
  expect_refused(&f, "bad kind", "l", &a.a, UV_EINVAL);

  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.live, 2);
  assert_int_equal(m.records, 2);

  /* Allocations come last: a start that passes every check. */
  assert_int_equal(fake_settle(&held, UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &held);
  tc_arm(1, 1);
  expect_refused(&f, "k", "l", NULL, UV_ENOMEM);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "k", "l", NULL, id), 0);
  assert_string_equal(id, "k-1");

  assert_int_equal(fake_settle(&ah, UVT_KILLED, "bye", NULL), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(ah.releases, 1);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-START-2: run is called once, synchronously; its error is returned,
 * nothing is registered and no id number is used. */

static void start_run_error(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t fk;
  arec_t a;
  char id[UVT_ID_MAX];
  size_t n;
  uvt_snapshot_t *list;
  uvt_snapshot_t s;
  uvt_metrics_t m;
  lrec_t l;
  fake_t *fkp = NULL;
  (void)state;
  uvt_options_init(&o);
  o.max_live_per_owner = 1;
  fixture_init(&f, &o);
  arec_init(&a);
  lrec_init(&l);
  assert_int_equal(lrec_start(f.reg, &l), 0);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);

  memset(&fk, 0, sizeof(fk));
  fk.run_error = UV_EMFILE;
  assert_int_equal(fake_start(f.reg, &fk, "r", "l", NULL, id), UV_EMFILE);
  assert_int_equal(fk.runs, 1); /* synchronously, exactly once */
  memset(&fk, 0, sizeof(fk));
  fk.run_error = UV_EPERM;
  assert_int_equal(fake_start(f.reg, &fk, "r", "l", &a.a, id), UV_EPERM);
  assert_int_equal(fk.runs, 1);

  assert_int_equal(uvt_get(f.reg, "r-1", NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, "r-1", &a.a, &s), UVT_ENOTASK);
  assert_int_equal(uvt_list(f.reg, &a.a, &list, &n), 0);
  assert_int_equal(n, 0);
  uvt_snapshots_free(list, n);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 0);
  assert_int_equal(m.live, 0);
  assert_int_equal(m.records, 0);

  /* No id number used, no admission slot held, owner still usable. */
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "r", "l", &a.a, id), 0);
  assert_int_equal(fkp->runs, 1);
  assert_string_equal(id, "r-1");
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(l.calls, 0); /* a failed run is never a notice */
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-START-3: fail the n-th allocation for every n.  Each failure is a clean
 * UV_ENOMEM with run not called and every allocation given back; once run
 * returns 0 the commit allocates nothing. */

typedef struct {
  uvt_task_t *task;
  int runs;
  long calls_at_run;
  int fail_all_in_run; /* arm "every allocation fails" inside run */
  int releases;
} ap_t;

static int ap_cancel(uvt_task_t *t, const char *reason) {
  uvt_outcome_t o;
  (void)reason;
  memset(&o, 0, sizeof(o));
  o.status = UVT_KILLED;
  return uvt_task_settle(t, &o);
}

static void ap_release(uvt_task_t *t) {
  ap_t *ap = uvt_task_arg(t);
  ap->releases++;
}

static int ap_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  ap_t *ap = arg;
  ap->runs++;
  ap->task = t;
  ap->calls_at_run = atomic_load(&tc_calls);
  hooks->cancel = ap_cancel;
  hooks->release = ap_release;
  if (ap->fail_all_in_run)
    tc_arm(1, 1);
  return 0;
}

/* Run the injection loop for one spec; returns how many allocations a
 * successful start made before run. */
static long inject_start(fixture_t *f, const char *kind, uvt_agent_t *owner,
                         int from, int *next_n, ap_t *ap) {
  char id[UVT_ID_MAX];
  char expect[UVT_ID_MAX];
  uvt_spec_t spec;
  long n;
  int err;
  memset(&spec, 0, sizeof(spec));
  spec.kind = kind;
  spec.label = "injected";
  spec.owner = owner;
  spec.run = ap_run;
  spec.arg = ap;
  long base0 = tc_live_now();
  for (n = 1; n < 10000; n++) {
    uint64_t recs = records(f->reg);
    long failed;
    memset(ap, 0, sizeof(*ap));
    tc_arm(n, from);
    err = uvt_start(f->reg, &spec, id);
    failed = atomic_load(&tc_failed);
    tc_disarm();
    if (err == 0) {
      /* The commit after run allocated nothing. */
      assert_int_equal(atomic_load(&tc_calls), ap->calls_at_run);
      assert_int_equal(ap->runs, 1);
      snprintf(expect, sizeof(expect), "%s-%d", kind, *next_n);
      assert_string_equal(id, expect);
      (*next_n)++;
      if (failed == 0)
        return ap->calls_at_run;
      base0 = tc_live_now();
      continue; /* tolerated a refused allocation; keep going */
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_true(failed >= 1);
    assert_int_equal(ap->runs, 0);
    /* Nothing leaks per attempt.  A registry may keep what it made before
     * the failure (a per-kind counter, index capacity: the core keeps 3),
     * but that is bounded; whatever is kept is freed by registry close
     * (checked by the suite's teardown). */
    if (tc_live_now() > base0 + 4)
      print_message("start failed at allocation %ld (%s): %ld allocations "
                    "retained\n",
                    n, from ? "and later" : "only", tc_live_now() - base0);
    assert_true(tc_live_now() <= base0 + 4);
    assert_int_equal(records(f->reg), recs);
  }
  fail_msg("uvt_start never succeeded");
  return -1;
}

static void start_alloc_failures(void **state) {
  fixture_t f;
  arec_t a;
  ap_t ap[6];
  int next_alloc = 1, next_other = 1;
  int from;
  long used;
  (void)state;
  for (from = 0; from <= 1; from++) {
    fixture_init(&f, NULL);
    arec_init(&a);
    next_alloc = next_other = 1;
    assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
    /* First task of a kind, unowned. */
    used = inject_start(&f, "alloc", NULL, from, &next_alloc, &ap[0]);
    assert_true(used >= 0);
    /* Second of the kind: the counter exists. */
    inject_start(&f, "alloc", NULL, from, &next_alloc, &ap[1]);
    /* Owned, new kind. */
    inject_start(&f, "other", &a.a, from, &next_other, &ap[2]);
    /* Owned, known kind. */
    inject_start(&f, "alloc", &a.a, from, &next_alloc, &ap[3]);
    /* Every allocation after run fails: the start still succeeds. */
    {
      char id[UVT_ID_MAX];
      uvt_spec_t spec;
      memset(&spec, 0, sizeof(spec));
      memset(&ap[4], 0, sizeof(ap[4]));
      ap[4].fail_all_in_run = 1;
      spec.kind = "late";
      spec.label = "fails after run";
      spec.owner = &a.a;
      spec.run = ap_run;
      spec.arg = &ap[4];
      assert_int_equal(uvt_start(f.reg, &spec, id), 0);
      tc_disarm();
      assert_string_equal(id, "late-1");
      assert_int_equal(tc_status(f.reg, "late-1", &a.a), UVT_RUNNING);
    }
    /* The registered tasks work normally. */
    assert_int_equal(tc_status(f.reg, "alloc-1", NULL), UVT_RUNNING);
    assert_int_equal(tc_status(f.reg, "other-1", &a.a), UVT_RUNNING);
    fixture_close(&f);
    assert_true(ap[0].releases >= 1);
    assert_int_equal(ap[4].releases, 1);
    assert_int_equal(tc_live_now(), 0);
  }
}

/* R-START-3 (and the clean-error rule for every allocating call): other
 * calls given failing allocations fail cleanly with UV_ENOMEM and give back
 * every allocation, or succeed. */

static void start_alloc_failures_other_calls(void **state) {
  uv_loop_t loop;
  uvt_registry_t *reg;
  fixture_t f;
  fake_t fk, st;
  arec_t a;
  lrec_t l;
  uvt_surface_t s = {0};
  char id[UVT_ID_MAX], sid[UVT_ID_MAX];
  long n, base;
  int err;
  (void)state;

  /* uvt_registry_new: *out untouched; handles closed on the next run. */
  assert_int_equal(uv_loop_init(&loop), 0);
  for (n = 1; n < 1000; n++) {
    base = tc_live_now();
    reg = (uvt_registry_t *)&loop; /* sentinel */
    tc_arm(n, 0);
    err = uvt_registry_new(&loop, NULL, &reg);
    tc_disarm();
    if (err == 0)
      break;
    assert_int_equal(err, UV_ENOMEM);
    assert_ptr_equal(reg, (uvt_registry_t *)&loop);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(tc_live_now(), base);
  }
  assert_int_equal(uvt_registry_close(reg, NULL, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(tc_live_now(), 0);

  fixture_init(&f, NULL);
  /* uvt_surface_attach */
  memset(&s, 0, sizeof(s));
  for (n = 1; n < 1000; n++) {
    base = tc_live_now();
    tc_arm(n, 0);
    err = uvt_surface_attach(f.reg, &s, "extra");
    tc_disarm();
    if (err == 0)
      break;
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(tc_live_now(), base);
  }
  uvt_surface_detach(&s);
  /* uvt_agent_register */
  arec_init(&a);
  for (n = 1; n < 1000; n++) {
    base = tc_live_now();
    tc_arm(n, 0);
    err = uvt_agent_register(f.reg, &a.a, "A", "s1");
    tc_disarm();
    if (err == 0)
      break;
    assert_int_equal(err, UV_ENOMEM);
    assert_true(tc_live_now() <= base + 2); /* index capacity may stay */
  }
  assert_string_equal(a.a.id, "A");
  /* uvt_listener_start */
  lrec_init(&l);
  for (n = 1; n < 1000; n++) {
    base = tc_live_now();
    tc_arm(n, 0);
    err = lrec_start(f.reg, &l);
    tc_disarm();
    if (err == 0)
      break;
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(tc_live_now(), base);
  }

  assert_int_equal(start_kind(&f, &fk, "final", "l", &a.a, id), 0);
  assert_int_equal(start_kind(&f, &st, "stream", "l", &a.a, sid), 0);

  /* uvt_get, uvt_list */
  for (n = 1; n < 1000; n++) {
    uvt_snapshot_t snap;
    base = tc_live_now();
    tc_arm(n, 0);
    err = uvt_get(f.reg, id, &a.a, &snap);
    tc_disarm();
    if (err == 0) {
      uvt_snapshot_cleanup(&snap);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(tc_live_now(), base);
  }
  for (n = 1; n < 1000; n++) {
    uvt_snapshot_t *arr;
    size_t cnt;
    base = tc_live_now();
    tc_arm(n, 0);
    err = uvt_list(f.reg, &a.a, &arr, &cnt);
    tc_disarm();
    if (err == 0) {
      assert_int_equal(cnt, 2);
      uvt_snapshots_free(arr, cnt);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(tc_live_now(), base);
  }
  /* uvt_read of a final kind */
  for (n = 1; n < 1000; n++) {
    uvt_read_t r;
    base = tc_live_now();
    tc_arm(n, 0);
    err = uvt_read(f.reg, id, &a.a, &r);
    tc_disarm();
    if (err == 0) {
      uvt_read_cleanup(&r);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(tc_live_now(), base);
  }
  /* uvt_wait never allocates (its contract has no UV_ENOMEM). */
  {
    wrec_t w;
    wrec_init(&w);
    tc_arm(1, 1);
    err = uvt_wait(f.reg, &w.req, id, 10, &a.a, wrec_cb);
    tc_disarm();
    assert_int_equal(err, 0);
    tc_run_until(&f, &w.calls, 1);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.status, UVT_EWAITTIMEOUT);
    wrec_cleanup(&w);
  }
  /* uvt_kill: a refused kill leaves the task untouched, cancel not run.
   * The fake settles later, not inside cancel, so that only the kill's own
   * allocations are failed. */
  st.settle_on_cancel = 0;
  for (n = 1; n < 1000; n++) {
    uvt_kill_result_t kr = 0;
    base = tc_live_now();
    tc_arm(n, 0);
    err = uvt_kill(f.reg, sid, &a.a, "a reason to copy", &kr);
    tc_disarm();
    if (err == 0) {
      assert_int_equal(kr, UVT_KILL_REQUESTED);
      assert_int_equal(st.cancels, 1);
      break;
    }
    assert_int_equal(err, UV_ENOMEM);
    assert_int_equal(st.cancels, 0);
    assert_int_equal(tc_live_now(), base);
    assert_int_equal(tc_status(f.reg, sid, &a.a), UVT_RUNNING);
    assert_int_equal(tc_reported(f.reg, sid, &a.a), 0);
  }
  st.settle_on_cancel = 1;
  fixture_close(&f);
  lrec_cleanup(&l);
}

/* ---------------------------------------------------------------------- */
/* R-START-4: "<kind>-<n>", one counter per kind from 1, never reused. */

static void start_ids_per_kind(void **state) {
  fixture_t f;
  fake_t fk[8];
  arec_t a;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(start_kind(&f, &fk[0], "a", "l", &a.a, id), 0);
  assert_string_equal(id, "a-1");
  assert_int_equal(start_kind(&f, &fk[1], "b", "l", NULL, id), 0);
  assert_string_equal(id, "b-1");
  assert_int_equal(start_kind(&f, &fk[2], "a", "l", NULL, id), 0);
  assert_string_equal(id, "a-2");
  assert_int_equal(start_kind(&f, &fk[3], "a-1", "l", NULL, id), 0);
  assert_string_equal(id, "a-1-1");
  assert_int_equal(start_kind(&f, &fk[4], "b", "l", &a.a, id), 0);
  assert_string_equal(id, "b-2");
  assert_int_equal(uvt_get(f.reg, "a-1", &a.a, &s), 0);
  assert_string_equal(s.id, "a-1");
  assert_string_equal(s.kind, "a");
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_get(f.reg, "a-1-1", NULL, &s), 0);
  assert_string_equal(s.kind, "a-1");
  uvt_snapshot_cleanup(&s);

  /* Drop a-1 and b-2 (agent disposal drops its records): numbers are not
   * reused. */
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(uvt_get(f.reg, "a-1", NULL, &s), UVT_ENOTASK);
  assert_int_equal(uvt_get(f.reg, "b-2", NULL, &s), UVT_ENOTASK);
  assert_int_equal(start_kind(&f, &fk[5], "a", "l", NULL, id), 0);
  assert_string_equal(id, "a-3");
  assert_int_equal(start_kind(&f, &fk[6], "b", "l", NULL, id), 0);
  assert_string_equal(id, "b-3");
  /* Settled tasks keep their numbers too. */
  assert_int_equal(fake_settle(&fk[6], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[6]);
  assert_int_equal(start_kind(&f, &fk[7], "b", "l", NULL, id), 0);
  assert_string_equal(id, "b-4");
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-START-6: a producer may ask for a given id of its own kind; refused with
 * UV_EEXIST while a record has it; the counter never hands it out again. */

static int start_with_id(fixture_t *f, fake_t *fk, const char *kind,
                         const char *want, char id[UVT_ID_MAX]) {
  memset(fk, 0, sizeof(*fk));
  fk->settle_on_cancel = 1;
  return fake_start_id(f->reg, fk, kind, want, id);
}

static void start_given_id(void **state) {
  fixture_t f;
  fake_t fk[8];
  fake_t bad;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  uint64_t before;
  const char *malformed[] = {"slurm-0",
                             "slurm-07",
                             "slurm-",
                             "slurm-1x",
                             "other-3",
                             "slurm3",
                             "slurm-99999999999999999999",
                             "slurm--1"};
  size_t i;
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(start_kind(&f, &fk[0], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-1");
  /* A number above the counter: taken as asked. */
  assert_int_equal(start_with_id(&f, &fk[1], "slurm", "slurm-7", id), 0);
  assert_string_equal(id, "slurm-7");
  assert_int_equal(uvt_get(f.reg, "slurm-7", NULL, &s), 0);
  assert_string_equal(s.kind, "slurm");
  assert_string_equal(s.label, "an adopted fake task");
  uvt_snapshot_cleanup(&s);
  /* Live: refused before run, nothing registered. */
  before = records(f.reg);
  assert_int_equal(start_with_id(&f, &bad, "slurm", "slurm-7", id), UV_EEXIST);
  assert_int_equal(bad.runs, 0);
  assert_int_equal(start_with_id(&f, &bad, "slurm", "slurm-1", id), UV_EEXIST);
  assert_int_equal(bad.runs, 0);
  assert_int_equal(records(f.reg), before);
  /* Malformed or of another kind: UV_EINVAL before run. */
  for (i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
    assert_int_equal(start_with_id(&f, &bad, "slurm", malformed[i], id),
                     UV_EINVAL);
    assert_int_equal(bad.runs, 0);
  }
  assert_int_equal(records(f.reg), before);
  /* The counter went past 7: the next plain start is slurm-8. */
  assert_int_equal(start_kind(&f, &fk[2], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-8");
  /* A number below the counter that no record has: taken, and the counter
   * does not move back. */
  assert_int_equal(start_with_id(&f, &fk[3], "slurm", "slurm-4", id), 0);
  assert_string_equal(id, "slurm-4");
  assert_int_equal(start_kind(&f, &fk[4], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-9");
  /* A terminal record still holds its id until it is dropped. */
  assert_int_equal(fake_settle(&fk[3], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[3]);
  assert_int_equal(start_with_id(&f, &bad, "slurm", "slurm-4", id), UV_EEXIST);
  assert_int_equal(uvt_forget(f.reg, "slurm-4", NULL), 0);
  assert_int_equal(start_with_id(&f, &fk[5], "slurm", "slurm-4", id), 0);
  assert_string_equal(id, "slurm-4");
  /* A run that fails uses no number: the counter stays at 9. */
  memset(&bad, 0, sizeof(bad));
  bad.run_error = UV_EIO;
  assert_int_equal(fake_start_id(f.reg, &bad, "slurm", "slurm-50", id), UV_EIO);
  assert_int_equal(start_kind(&f, &fk[6], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-10");
  fixture_close(&f);
}

/* R-START-4, R-START-6, E-5: uvt_reserve_ids moves a kind's counter past
 * a journal's ids (a kind not seen yet too); never down; requested ids
 * still work below it. */
static void start_reserve_ids(void **state) {
  fixture_t f;
  fake_t fk[4];
  char id[UVT_ID_MAX];
  (void)state;
  fixture_init(&f, NULL);
  assert_int_equal(uvt_reserve_ids(f.reg, "slurm", 6), 0); /* new kind */
  assert_int_equal(start_kind(&f, &fk[0], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-7");
  assert_int_equal(uvt_reserve_ids(f.reg, "slurm", 3), 0); /* not down */
  assert_int_equal(uvt_reserve_ids(f.reg, "slurm", 0), 0);
  assert_int_equal(start_kind(&f, &fk[1], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-8");
  assert_int_equal(uvt_reserve_ids(f.reg, "slurm", 20), 0);
  assert_int_equal(start_kind(&f, &fk[2], "slurm", "l", NULL, id), 0);
  assert_string_equal(id, "slurm-21");
  /* Only that kind's counter moves. */
  assert_int_equal(start_kind(&f, &fk[3], "other", "l", NULL, id), 0);
  assert_string_equal(id, "other-1");
  assert_int_equal(uvt_reserve_ids(NULL, "slurm", 1), UV_EINVAL);
  assert_int_equal(uvt_reserve_ids(f.reg, NULL, 1), UV_EINVAL);
  assert_int_equal(uvt_reserve_ids(f.reg, "", 1), UV_EINVAL);
  assert_int_equal(uvt_reserve_ids(f.reg, "a b", 1), UV_EINVAL);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-START-5, C-14: the record exists when uvt_start returns; get, read,
 * wait and kill work in the same loop turn (before the first uv_run, and
 * inside a callback). */

typedef struct {
  fixture_t *f;
  fake_t fk;
  wrec_t w;
  char id[UVT_ID_MAX];
  int start_err, get_err, read_err, wait_err, kill_err;
  uvt_status_t get_status;
  char read_text[64];
  uvt_kill_result_t kr;
  int cancels_after_kill;
} sameturn_t;

static void sameturn_do(void *arg) {
  sameturn_t *st = arg;
  uvt_snapshot_t s;
  uvt_read_t r;
  memset(&st->fk, 0, sizeof(st->fk));
  st->fk.stream = 1;
  st->fk.settle_on_cancel = 1;
  fake_emit(&st->fk, "early");
  wrec_init(&st->w);
  st->start_err = fake_start(st->f->reg, &st->fk, "turn", "l", NULL, st->id);
  st->get_err = uvt_get(st->f->reg, st->id, NULL, &s);
  if (st->get_err == 0) {
    st->get_status = s.status;
    uvt_snapshot_cleanup(&s);
  }
  st->read_err = uvt_read(st->f->reg, st->id, NULL, &r);
  if (st->read_err == 0) {
    snprintf(st->read_text, sizeof(st->read_text), "%s", r.text);
    uvt_read_cleanup(&r);
  }
  st->wait_err = uvt_wait(st->f->reg, &st->w.req, st->id, 5000, NULL, wrec_cb);
  st->kill_err = uvt_kill(st->f->reg, st->id, NULL, "same turn", &st->kr);
  st->cancels_after_kill = st->fk.cancels;
}

static void check_sameturn(sameturn_t *st, const char *expect_id) {
  assert_int_equal(st->start_err, 0);
  assert_string_equal(st->id, expect_id);
  assert_int_equal(st->get_err, 0);
  assert_int_equal(st->get_status, UVT_RUNNING);
  assert_int_equal(st->read_err, 0);
  assert_string_equal(st->read_text, "early");
  assert_int_equal(st->wait_err, 0);
  assert_int_equal(st->kill_err, 0);
  assert_int_equal(st->kr, UVT_KILL_REQUESTED);
  assert_int_equal(st->cancels_after_kill, 1);
  assert_int_equal(st->w.calls, 1);
  assert_int_equal(st->w.status, 0);
  assert_int_equal(st->w.had_snap, 1);
  assert_int_equal(st->w.snap.status, UVT_KILLED);
  assert_int_equal(st->w.snap.reported, 1);
  assert_string_equal(st->w.snap.kill_reason, "same turn");
}

static void start_same_turn(void **state) {
  fixture_t f;
  sameturn_t a, b;
  tc_timer_t t;
  (void)state;
  fixture_init(&f, NULL);
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  a.f = &f;
  b.f = &f;
  sameturn_do(&a);                /* before the host's first uv_run */
  assert_int_equal(a.w.calls, 0); /* never inside the call */
  tc_timer_start(&f.loop, &t, 5, sameturn_do, &b); /* inside a callback */
  tc_run_until(&f, &a.w.calls, 1);
  tc_run_until(&f, &b.w.calls, 1);
  fixture_close(&f);
  check_sameturn(&a, "turn-1");
  check_sameturn(&b, "turn-2");
  assert_int_equal(t.fired, 1);
  wrec_cleanup(&a.w);
  wrec_cleanup(&b.w);
}

/* ---------------------------------------------------------------------- */
/* R-LIMIT-1: max_live_per_owner; running and stopping count; unowned tasks
 * share one bucket; refused before run; per owner agent. */

static void start_limit(void **state) {
  fixture_t f;
  uvt_options_t o;
  fake_t fk[12];
  arec_t a, b, c;
  char id[UVT_ID_MAX], a1[UVT_ID_MAX];
  uvt_kill_result_t kr;
  uvt_metrics_t m;
  (void)state;
  uvt_options_init(&o);
  o.max_live_per_owner = 2;
  fixture_init(&f, &o);
  arec_init(&a);
  arec_init(&b);
  arec_init(&c);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &b.a, "B", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &c.a, "C", "s2"), 0);

  assert_int_equal(start_kind(&f, &fk[0], "k", "l", &a.a, a1), 0);
  assert_int_equal(start_kind(&f, &fk[1], "k", "l", &a.a, id), 0);
  assert_int_equal(start_kind(&f, &fk[2], "k", "l", &a.a, id), UVT_ELIMIT);
  assert_int_equal(fk[2].runs, 0);
  /* Another agent, same session: its own bucket. */
  assert_int_equal(start_kind(&f, &fk[3], "k", "l", &b.a, id), 0);
  assert_int_equal(start_kind(&f, &fk[4], "k", "l", &c.a, id), 0);
  /* Unowned share one bucket. */
  assert_int_equal(start_kind(&f, &fk[5], "k", "l", NULL, id), 0);
  assert_int_equal(start_kind(&f, &fk[6], "k", "l", NULL, id), 0);
  assert_int_equal(start_kind(&f, &fk[7], "k", "l", NULL, id), UVT_ELIMIT);
  assert_int_equal(fk[7].runs, 0);

  /* Stopping still counts. */
  fk[0].settle_on_cancel = 0;
  assert_int_equal(uvt_kill(f.reg, a1, &a.a, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(tc_status(f.reg, a1, &a.a), UVT_STOPPING);
  assert_int_equal(start_kind(&f, &fk[8], "k", "l", &a.a, id), UVT_ELIMIT);
  assert_int_equal(fk[8].runs, 0);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.live, 6);

  /* Terminal frees the slot. */
  assert_int_equal(fake_settle(&fk[0], UVT_KILLED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[0]);
  assert_int_equal(start_kind(&f, &fk[9], "k", "l", &a.a, id), 0);
  assert_string_equal(id, "k-7"); /* refusals used no number */
  assert_int_equal(start_kind(&f, &fk[10], "k", "l", &a.a, id), UVT_ELIMIT);
  /* And for the unowned bucket. */
  assert_int_equal(fake_settle(&fk[5], UVT_COMPLETED, NULL, NULL), 0);
  tc_run_settled(&f, &fk[5]);
  assert_int_equal(start_kind(&f, &fk[11], "k", "l", NULL, id), 0);
  assert_string_equal(id, "k-8");
  fixture_close(&f);
}

/* R-LIMIT-1: 0 means no limit. */
static void start_limit_zero(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  uvt_options_t o;
  int i;
  fake_t *fkp = NULL;
  (void)state;
  uvt_options_init(&o);
  assert_int_equal(o.max_live_per_owner, 0);
  fixture_init(&f, &o);
  for (i = 0; i < 300; i++)
    assert_int_equal(start_kind(&f, (fkp = tc_fake()), "many", "l", NULL, id),
                     0);
  assert_string_equal(id, "many-300");
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* R-OWN-1: the owner must be the exact live agent registered under its id:
 * never registered, disposed, or replaced are UVT_ESTALE before run; a
 * refused start leaves the agent usable. */

static void start_stale_owner(void **state) {
  fixture_t f;
  fake_t fk;
  arec_t a1, a2, never;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  fake_t *fkp = NULL;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a1);
  arec_init(&a2);
  arec_init(&never);

  /* Never registered (zeroed struct). */
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &never.a, id),
                   UVT_ESTALE);
  assert_int_equal(fkp->runs, 0);
  /* (A byte copy of a registered agent is not tested: like a libuv handle,
   * an agent must not move or be copied while registered, and the core
   * checks the object's own state, so a copy passes as the original.) */
  assert_int_equal(uvt_agent_register(f.reg, &a1.a, "A", "s1"), 0);

  /* Refused starts leave a1 usable. */
  assert_int_equal(
      start_kind(&f, (fkp = tc_fake()), "bad kind", "l", &a1.a, id), UV_EINVAL);
  memset(&fk, 0, sizeof(fk));
  fk.run_error = UV_EAGAIN;
  assert_int_equal(fake_start(f.reg, &fk, "o", "l", &a1.a, id), UV_EAGAIN);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a1.a, id), 0);
  assert_string_equal(id, "o-1");
  assert_int_equal(uvt_get(f.reg, id, &a1.a, &s), 0);
  assert_string_equal(s.owner_session, "s1");
  uvt_snapshot_cleanup(&s);

  /* Disposed. */
  assert_int_equal(uvt_agent_dispose(&a1.a, arec_cb), 0);
  tc_run_until(&f, &a1.disposed, 1);
  assert_int_equal(a1.disposed, 1);
  assert_null(a1.a.id);
  assert_null(a1.a.session);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a1.a, id),
                   UVT_ESTALE);
  assert_int_equal(fkp->runs, 0);

  /* Replaced: another agent registers the same id; the old object is
   * stale, the new one works. */
  assert_int_equal(uvt_agent_register(f.reg, &a2.a, "A", "s1"), 0);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a1.a, id),
                   UVT_ESTALE);
  assert_int_equal(fkp->runs, 0);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a2.a, id), 0);
  assert_string_equal(id, "o-2");

  /* The old object registered again (under a new id) is live again. */
  assert_int_equal(uvt_agent_register(f.reg, &a1.a, "A2", "s9"), 0);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a1.a, id), 0);
  assert_string_equal(id, "o-3");
  assert_int_equal(uvt_get(f.reg, id, &a1.a, &s), 0);
  assert_string_equal(s.owner_session, "s9");
  uvt_snapshot_cleanup(&s);
  fixture_close(&f);
}

/* R-OWN-1 / R-AGENT-1: an owner whose dispose is in progress is refused with
 * UVT_ECLOSING; after its callback, UVT_ESTALE. */
static void start_owner_disposing(void **state) {
  fixture_t f;
  fake_t held;
  arec_t a;
  char id[UVT_ID_MAX];
  fake_t *fkp = NULL;
  (void)state;
  fixture_init(&f, NULL);
  arec_init(&a);
  assert_int_equal(uvt_agent_register(f.reg, &a.a, "A", "s1"), 0);
  memset(&held, 0, sizeof(held));
  assert_int_equal(fake_start(f.reg, &held, "h", "l", &a.a, id), 0);
  assert_int_equal(uvt_agent_dispose(&a.a, arec_cb), 0);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a.a, id),
                   UVT_ECLOSING);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(a.disposed, 0); /* waits for held */
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a.a, id),
                   UVT_ECLOSING);
  assert_int_equal(fkp->runs, 0);
  assert_int_equal(held.cancels, 1);
  assert_string_equal(held.last_reason, "owner disposed");
  assert_int_equal(fake_settle(&held, UVT_KILLED, NULL, NULL), 0);
  tc_run_until(&f, &a.disposed, 1);
  assert_int_equal(a.disposed, 1);
  assert_int_equal(start_kind(&f, (fkp = tc_fake()), "o", "l", &a.a, id),
                   UVT_ESTALE);
  assert_int_equal(fkp->runs, 0);
  fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(start_no_surface),
      TC_TEST(start_surface_counting),
      TC_TEST(start_validation),
      TC_TEST(start_check_order),
      TC_TEST(start_run_error),
      TC_TEST(start_alloc_failures),
      TC_TEST(start_alloc_failures_other_calls),
      TC_TEST(start_ids_per_kind),
      TC_TEST(start_given_id),
      TC_TEST(start_reserve_ids),
      TC_TEST(start_same_turn),
      TC_TEST(start_limit),
      TC_TEST(start_limit_zero),
      TC_TEST(start_stale_owner),
      TC_TEST(start_owner_disposing),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
