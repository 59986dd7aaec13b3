/* Model-based fuzzer for the registry.
 *
 * Applies random sequences of operations to the real registry and to the
 * reference model (model.c), and compares everything observable after
 * every step: return codes, snapshots, reads, lists, listener and wait
 * callbacks, dispose and close callbacks, producer hook counts, metrics and
 * the session fence (R-OWN-2: every operation on a foreign task, for every
 * caller shape, gives UVT_EFOREIGN and changes nothing).
 *
 * Operations: start (fake producers, stream or final, whose cancel fails or
 * settles at once as told, with or without a quiesce hook, some acting
 * from inside one of their hooks; and thread-producer tasks), settle (from
 * the loop, from a joined thread, or from a thread racing the loop), emit,
 * kill (of an ended task too: P-KILL-6), get, list, read, wait, abort, a
 * 1 ms wait run to its deadline, forget, quiescent, agent register/dispose,
 * surface attach/detach, listener start/stop (some listeners read, kill,
 * forget or dispose from inside the callback), watcher start/stop (some
 * forget tasks as they end), and at the end of an episode registry close
 * (directly, or from inside a listener, wait or feed callback), late
 * settles, and agent disposals after close.  One real call in ten runs with
 * the n-th allocation failing: UV_ENOMEM is accepted only where documented,
 * and then nothing may have changed.
 *
 * v2 rules the model knows: re-entrant calls from every producer hook
 * (R-REENTER-1: dispose the owner, start, kill/forget/read the task itself
 * or another, quiescent from inside quiesce; each call's result is
 * compared), handles in use (R-BUSY-1: a pending wait submitted again, a
 * started listener or watcher started again, a registered or disposing
 * agent registered again, an attached surface attached again: UV_EBUSY),
 * forget from listeners, wait callbacks and watchers (R-FORGET-2), and the
 * quiesce a kill of an ended task starts, which disposals then wait for
 * (P-KILL-6).
 *
 * Determinism: producers settle only when told; waits use long deadlines,
 * except the short wait, which runs the loop until its own deadline fires
 * with nothing else pending; between steps the loop runs with UV_RUN_NOWAIT
 * until quiet; a thread racing the loop is joined before comparing.
 *
 *   fuzz-registry [--seed N] [--ops M] [--verbose] [--strict-feed]
 *
 * --strict-feed: expect no second "stopping" change for a task already
 * stopping (see model.h, strict_feed).  On by default since the core
 * feeds "stopping" only on the running -> stopping transition.
 *
 * Prints the seed; on a divergence prints the episode's operations, the
 * failing step and what differed, and exits 1.  Built with -DUVT_LIBFUZZER
 * it is a libFuzzer target instead: the input bytes choose the operations.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "model.h"
#include "uvtasks.h"
#include "uvtasks/thread.h"

/* Thread contexts alive (src/thread/thread.c). */
long uvt__thread_live_contexts(void);

/* Allocation failure injection: during some real calls the n-th allocation
 * fails.  An operation documented with UV_ENOMEM that returns it must have
 * changed nothing (the model is not advanced and the state comparison
 * checks it); one documented without it must not return it. ----------- */

static atomic_int inj_armed;
static atomic_long inj_left;
static atomic_int inj_failed;

static int inj_fail_now(void) {
  if (!atomic_load(&inj_armed))
    return 0;
  if (atomic_fetch_sub(&inj_left, 1) == 1) {
    atomic_store(&inj_failed, 1);
    return 1;
  }
  return 0;
}

static void *inj_malloc(size_t n) {
  return inj_fail_now() ? NULL : malloc(n);
}

static void *inj_realloc(void *p, size_t n) {
  return inj_fail_now() ? NULL : realloc(p, n);
}

static void *inj_calloc(size_t c, size_t n) {
  return inj_fail_now() ? NULL : calloc(c, n);
}

/* Randomness: a seeded generator, or the fuzzer's input bytes. ---------- */

typedef struct {
  uint64_t s;
  const uint8_t *data;
  size_t len, pos;
  int bytes_mode;
  int exhausted;
} rng_t;

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A value in [0, n). */
static unsigned rnd(rng_t *r, unsigned n) {
  if (n <= 1)
    return 0;
  if (r->bytes_mode) {
    unsigned v;
    if (r->pos >= r->len) {
      r->exhausted = 1;
      return 0;
    }
    v = r->data[r->pos++];
    if (n > 256 && r->pos < r->len)
      v = (v << 8) | r->data[r->pos++];
    return v % n;
  }
  return (unsigned)(splitmix(&r->s) % n);
}

static int chance(rng_t *r, unsigned percent) {
  return rnd(r, 100) < percent;
}

/* Arm for the next real call, one time in ten. */
static void inj_maybe_arm(rng_t *r) {
  atomic_store(&inj_failed, 0);
  if (chance(r, 10)) {
    atomic_store(&inj_left, 1 + (long)rnd(r, 6));
    atomic_store(&inj_armed, 1);
  }
}

/* Disarm; nonzero if an allocation failed while armed. */
static int inj_disarm(void) {
  atomic_store(&inj_armed, 0);
  return atomic_load(&inj_failed);
}

/* The episode: one registry on one loop, with the model beside it. ----- */

#define MAX_OPS_LOG 400

typedef struct episode_s episode_t;

typedef struct {
  episode_t *ep;
  int ti;
  uvt_task_t *task;
  int run_error;
  int stream;
  int cancel_error;
  int settle_on_cancel;
  char pending[M_TEXT];
  size_t pending_len;
  int settles;
  int released;
  int cancels;
  int settled_hooks;
  /* Quiesce hook (P-KILL-6): 0 none, 1 returns 0, 2 returns 1. */
  int quiesce_mode;
  int qpending; /* returned 1; the fuzzer calls uvt_task_quiescent */
  int quiesces;
  /* What it does from inside one hook, once (R-REENTER-1, model.h). */
  int act_hook, act, act_other, acted;
  int owner;
  char id[UVT_ID_MAX];
} fake_t;

/* A thread-producer task: its function waits until the fuzzer posts `go`,
 * then ends with the outcome set here ("+c" appended if it saw a cancel). */
typedef struct {
  uv_sem_t go;
  int used;
  int posted;
  uvt_status_t status;
  const char *detail;
  char output[64];
} job_t;

struct episode_s {
  uv_loop_t loop;
  job_t jobs[M_TASKS];
  uvt_registry_t *reg;
  uvt_surface_t surfaces[M_SURFACES];
  uvt_listener_t listeners[M_LISTENERS];
  uvt_watch_t watchers[M_WATCHERS];
  int reaction[M_LISTENERS];
  int reaction_errors;
  int close_trigger;        /* 1 listener, 2 wait, 3 feed: close from it */
  int wait_forget[M_WAITS]; /* the callback forgets the ended task */
  int wait_caller[M_WAITS];
  int watch_forget[M_WATCHERS]; /* forgets a task on its end */
  int nstarted;                 /* fake and job slots used, in commit order */
  int starting;                 /* inside uvt_start (hooks may not start) */
  m_aev_t aev[M_TASKS * 8];
  int naev;
  int close_began;
  int after_close_calls;
  uvt_agent_t agents[M_AGENTS];
  uvt_wait_t waits[M_WAITS];
  uvt_wait_t short_wait;
  fake_t fakes[M_TASKS];
  fake_t scratch;
  model_t m;
  int closing;
  int ever_registered[M_AGENTS];
  /* Real callbacks since the last comparison. */
  m_lev_t lev[M_TASKS * M_LISTENERS * 2];
  int nlev;
  m_wev_t wev[M_TASKS * 2 + M_WAITS * 4];
  int nwev;
  m_fev_t fev[M_TASKS * 4 * M_WATCHERS * 2];
  int nfev;
  int dispose_cbs[M_AGENTS];
  int close_cbs;
  int short_calls;
  int short_status;
  int short_has_snap;
  m_snap_t short_snap;
  long events;
  int overflow;
  uv_timer_t watchdog;
  int watchdog_fired;
  /* Reporting. */
  char ops[MAX_OPS_LOG][160];
  int nops;
  long step;
};

static uint64_t g_seed;
static long g_episode;
static int g_verbose;
static int g_strict_feed = 1;

/* What the run exercised, printed at the end. */
static struct {
  long starts, start_errors, settles, thread_settles, kills, kill_errors;
  long foreign, notask, listener_calls, wait_ok, wait_timeout, wait_aborted;
  long disposals, reads, lists, force_failed, feed, forgets;
  long thread_tasks, job_settles, closes_from_cb, enomem, reentrant, busy;
} g_stats;

static void count_err(int err) {
  if (err == UV_EBUSY)
    g_stats.busy++;
  else if (err == UVT_EFOREIGN)
    g_stats.foreign++;
  else if (err == UVT_ENOTASK)
    g_stats.notask++;
}

#ifdef UVT_LIBFUZZER
#define DIVERGED() abort()
#else
#define DIVERGED() exit(1)
#endif

static void fail(episode_t *ep, const char *fmt, ...) {
  va_list ap;
  int i;
  fprintf(stderr, "\nDIVERGENCE seed=%" PRIu64 " episode=%ld step=%ld\n",
          g_seed, g_episode, ep->step);
  fprintf(stderr, "operations of this episode:\n");
  for (i = 0; i < ep->nops; i++)
    fprintf(stderr, "  %3d %s\n", i, ep->ops[i]);
  fprintf(stderr, "model tasks:\n");
  for (i = 0; i < ep->m.ntasks; i++) {
    const m_task_t *t = &ep->m.tasks[i];
    fprintf(stderr,
            "  %-8s owner=%d %-9s%s%s%s%s reported=%d cancels=%d "
            "real: settles=%d released=%d cancels=%d\n",
            t->id, t->owner, uvt_status_name(t->status),
            t->thread ? " thread" : "", t->teardown ? " teardown" : "",
            t->psettled ? " psettled" : "", t->dropped ? " dropped" : "",
            t->reported, t->cancels, ep->fakes[i].settles,
            ep->fakes[i].released, ep->fakes[i].cancels);
  }
  fprintf(stderr, "what differed: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  DIVERGED();
}

static void op_log(episode_t *ep, const char *fmt, ...) {
  va_list ap;
  if (ep->nops >= MAX_OPS_LOG)
    return;
  va_start(ap, fmt);
  vsnprintf(ep->ops[ep->nops++], sizeof(ep->ops[0]), fmt, ap);
  va_end(ap);
  if (g_verbose)
    fprintf(stderr, "%s\n", ep->ops[ep->nops - 1]);
}

static void quiet_log(int level, const char *message, void *data) {
  (void)data;
  (void)level;
  (void)message;
}

/* Snapshots ------------------------------------------------------------ */

static void snap_from(const uvt_snapshot_t *s, m_snap_t *o) {
  memset(o, 0, sizeof(*o));
  snprintf(o->id, sizeof(o->id), "%s", s->id ? s->id : "(null)");
  snprintf(o->kind, sizeof(o->kind), "%s", s->kind ? s->kind : "(null)");
  snprintf(o->label, sizeof(o->label), "%s", s->label ? s->label : "(null)");
  o->has_session = s->owner_session != NULL;
  if (s->owner_session)
    snprintf(o->session, sizeof(o->session), "%s", s->owner_session);
  o->status = s->status;
  o->has_detail = s->detail != NULL;
  if (s->detail)
    snprintf(o->detail, sizeof(o->detail), "%s", s->detail);
  o->finished = s->finished_at_ms != 0;
  o->started = s->started_at_ms > 0;
  o->reported = s->reported;
  o->has_kill_reason = s->kill_reason != NULL;
  if (s->kill_reason)
    snprintf(o->kill_reason, sizeof(o->kill_reason), "%s", s->kill_reason);
}

static void snap_fmt(const m_snap_t *s, char *buf, size_t cap) {
  snprintf(buf, cap,
           "{id=%s kind=%s label=%s session=%s status=%s detail=%s "
           "finished=%d started=%d reported=%d kill_reason=%s}",
           s->id, s->kind, s->label, s->has_session ? s->session : "NULL",
           uvt_status_name(s->status), s->has_detail ? s->detail : "NULL",
           s->finished, s->started, s->reported,
           s->has_kill_reason ? s->kill_reason : "NULL");
}

/* The N of "did not stop within N ms of cancel; work may be orphaned". */
static unsigned long long grace_in(const char *detail) {
  static const char head[] = "did not stop within ";
  static const char tail[] = " ms of cancel; work may be orphaned";
  unsigned long long n = 0;
  const char *p;
  if (strncmp(detail, head, sizeof(head) - 1) != 0)
    return 0;
  for (p = detail + sizeof(head) - 1; *p >= '0' && *p <= '9'; p++)
    n = n * 10 + (unsigned long long)(*p - '0');
  return strcmp(p, tail) == 0 ? n : 0;
}

/* Details are equal, except that a teardown detail names what elapsed
 * (R-TIME-1): the model knows the grace, the real one at least that. */
static int detail_match(const char *want, const char *got) {
  unsigned long long w;
  if (strcmp(want, got) == 0)
    return 1;
  w = grace_in(want);
  return w > 0 && grace_in(got) >= w;
}

static void snap_check(episode_t *ep, const char *what, const m_snap_t *want,
                       const m_snap_t *got) {
  char a[1024], b[1024];
  if (strcmp(want->id, got->id) == 0 && strcmp(want->kind, got->kind) == 0 &&
      strcmp(want->label, got->label) == 0 &&
      want->has_session == got->has_session &&
      strcmp(want->session, got->session) == 0 && want->status == got->status &&
      want->has_detail == got->has_detail &&
      detail_match(want->detail, got->detail) &&
      want->finished == got->finished && want->started == got->started &&
      want->reported == got->reported &&
      want->has_kill_reason == got->has_kill_reason &&
      strcmp(want->kill_reason, got->kill_reason) == 0)
    return;
  snap_fmt(want, a, sizeof(a));
  snap_fmt(got, b, sizeof(b));
  fail(ep, "%s: snapshot\n  expected %s\n  got      %s", what, a, b);
}

static void err_check(episode_t *ep, const char *what, int want, int got) {
  if (strncmp(what, "state check", 11) != 0)
    count_err(got);
  if (want != got)
    fail(ep, "%s: expected %s (%d), got %s (%d)", what, uvt_err_name(want),
         want, uvt_err_name(got), got);
}

/* Any task of the episode by id, as the real side numbers them (the model
 * may not have caught up with starts made inside this drain). */
static int real_task(const episode_t *ep, const char *id) {
  int i;
  for (i = 0; i < ep->nstarted; i++)
    if (strcmp(ep->fakes[i].id, id) == 0)
      return i;
  return -1;
}

static int agent_slot(episode_t *ep, const uvt_agent_t *a) {
  if (a == NULL)
    return -1;
  return (int)(a - ep->agents);
}

static const uvt_agent_t *caller_ptr(episode_t *ep, int caller) {
  return caller < 0 ? NULL : &ep->agents[caller];
}

/* Callbacks (record only) ---------------------------------------------- */

static void on_closed(void *data);
static void on_disposed(uvt_agent_t *a);

/* A call made from inside a hook or callback, and its result (compared
 * with the model's, m_aev_t). */
static void record_aev(episode_t *ep, int ti, int where, int what, int err) {
  m_aev_t *e;
  if (ep->naev >= (int)(sizeof(ep->aev) / sizeof(ep->aev[0]))) {
    ep->overflow++;
    return;
  }
  e = &ep->aev[ep->naev++];
  e->task = ti;
  e->where = where;
  e->what = what;
  e->err = err;
}

/* R-CLOSE-3: close from inside this callback if it is the trigger. */
static void maybe_close_here(episode_t *ep, int which) {
  if (ep->close_trigger != which || ep->close_began)
    return;
  ep->close_began = 1;
  ep->closing = 1;
  if (uvt_registry_close(ep->reg, on_closed, ep) != 0)
    ep->reaction_errors++;
}

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  episode_t *ep = l->data;
  m_lev_t *e;
  ep->events++;
  if (ep->close_began)
    ep->after_close_calls++;
  if (ep->nlev >= (int)(sizeof(ep->lev) / sizeof(ep->lev[0]))) {
    ep->overflow++;
    return;
  }
  e = &ep->lev[ep->nlev++];
  e->listener = (int)(l - ep->listeners);
  e->task = real_task(ep, snap->id);
  e->owner = agent_slot(ep, owner);
  snap_from(snap, &e->snap);
  if (ep->close_began)
    return;
  maybe_close_here(ep, 1);
  if (ep->close_began)
    return;
  /* R-DONE-4: act on the task from inside the callback; what each call
   * returns is compared with the model (an earlier listener may have
   * forgotten the task, R-FORGET-2). */
  {
    int reaction = ep->reaction[e->listener];
    int err = 0;
    if (reaction == M_REACT_READ) {
      uvt_read_t rd;
      err = uvt_read(ep->reg, snap->id, owner, &rd);
      if (err == 0)
        uvt_read_cleanup(&rd);
    } else if (reaction == M_REACT_DISPOSE) {
      /* R-CLOSE-3: 0, or UVT_ECLOSING when its disposal already began. */
      if (owner != NULL) {
        err = uvt_agent_dispose(owner, on_disposed);
        /* (uv_err_name(0) allocates: name only errors.) */
        op_log(ep, "  (listener %d, called for %s, disposes agent %d: %s)",
               e->listener, snap->id, e->owner,
               err == 0 ? "0" : uvt_err_name(err));
      }
    } else if (reaction == M_REACT_KILL) {
      uvt_kill_result_t kr = 0;
      err = uvt_kill(ep->reg, snap->id, owner, "from a listener", &kr);
      if (err == 0 && kr != UVT_KILL_ALREADY_TERMINAL)
        ep->reaction_errors++;
    } else if (reaction == M_REACT_FORGET) {
      err = uvt_forget(ep->reg, snap->id, owner);
    }
    if (reaction != M_REACT_NONE)
      record_aev(ep, e->task, M_WHERE_LISTENER + e->listener, reaction, err);
  }
}

static void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  episode_t *ep = req->data;
  m_wev_t *e;
  ep->events++;
  if (req == &ep->short_wait) {
    /* The deadline fires in the timer phase; without a stop, the same
     * UV_RUN_ONCE turn would go on to block in the poll phase. */
    uv_stop(&ep->loop);
    ep->short_calls++;
    ep->short_status = status;
    ep->short_has_snap = snap != NULL;
    if (snap != NULL)
      snap_from(snap, &ep->short_snap);
    return;
  }
  if (ep->nwev >= (int)(sizeof(ep->wev) / sizeof(ep->wev[0]))) {
    ep->overflow++;
    return;
  }
  e = &ep->wev[ep->nwev++];
  memset(e, 0, sizeof(*e));
  e->wait = (int)(req - ep->waits);
  e->status = status;
  e->has_snap = snap != NULL;
  if (snap != NULL)
    snap_from(snap, &e->snap);
  maybe_close_here(ep, 2);
  /* R-FORGET-2: the callback that reports the end forgets the task. */
  if (status == 0 && ep->wait_forget[e->wait] && !ep->close_began)
    record_aev(ep, real_task(ep, snap->id), M_WHERE_WAIT + e->wait, 0,
               uvt_forget(ep->reg, snap->id,
                          caller_ptr(ep, ep->wait_caller[e->wait])));
}

static void on_change(uvt_watch_t *w, const uvt_snapshot_t *snap, int dropped) {
  episode_t *ep = w->data;
  m_fev_t *e;
  ep->events++;
  if (ep->close_began)
    ep->after_close_calls++;
  maybe_close_here(ep, 3);
  if (ep->nfev >= (int)(sizeof(ep->fev) / sizeof(ep->fev[0]))) {
    ep->overflow++;
    return;
  }
  e = &ep->fev[ep->nfev++];
  e->watcher = (int)(w - ep->watchers);
  e->task = real_task(ep, snap->id);
  snap_from(snap, &e->snap);
  /* The transition, from what the callback is told. */
  if (dropped)
    e->which = M_CH_DROPPED;
  else if (snap->status == UVT_RUNNING)
    e->which = M_CH_REGISTERED;
  else if (snap->status == UVT_STOPPING)
    e->which = M_CH_STOPPING;
  else
    e->which = M_CH_TERMINAL;
  /* R-FORGET-2: forget a task from the feed that tells of its end. */
  if (e->which == M_CH_TERMINAL && ep->watch_forget[e->watcher] &&
      !ep->close_began && e->task >= 0)
    record_aev(ep, e->task, M_WHERE_WATCH + e->watcher, 0,
               uvt_forget(ep->reg, snap->id,
                          caller_ptr(ep, ep->fakes[e->task].owner)));
}

static void on_disposed(uvt_agent_t *a) {
  episode_t *ep = a->data;
  ep->events++;
  ep->dispose_cbs[a - ep->agents]++;
}

static void on_closed(void *data) {
  episode_t *ep = data;
  ep->events++;
  ep->close_cbs++;
}

/* The fake producer ---------------------------------------------------- */

static void fake_settle(fake_t *fk, uvt_status_t status, const char *detail,
                        const char *output, size_t output_len) {
  uvt_outcome_t o;
  memset(&o, 0, sizeof(o));
  o.status = status;
  o.detail = detail;
  o.output = output;
  o.output_len = output_len;
  if (uvt_task_settle(fk->task, &o) != 0)
    fail(fk->ep, "uvt_task_settle refused a valid outcome");
  fk->settles++;
  if (fk->stream)
    fk->pending_len = 0;
}

/* On the loop thread, after a settle: once released too, the handle is
 * freed (the settling thread must not look: the loop may be releasing). */
static void fake_forget_handle(fake_t *fk) {
  if (fk->settles > 0 && fk->released)
    fk->task = NULL;
}

static int fake_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks);
static void fake_act(fake_t *fk, int hook);

/* A plain unowned task started from inside a hook (M_ACT_START). */
static int start_from_hook(episode_t *ep) {
  fake_t *fk;
  uvt_spec_t spec;
  char id[UVT_ID_MAX];
  int err;
  if (ep->starting || ep->nstarted >= M_TASKS)
    return M_ACT_SKIPPED; /* slots are numbered in commit order */
  fk = &ep->fakes[ep->nstarted];
  memset(fk, 0, sizeof(*fk));
  fk->ep = ep;
  fk->ti = ep->nstarted;
  fk->settle_on_cancel = 1;
  fk->owner = -1;
  fk->act_hook = -1;
  memset(&spec, 0, sizeof(spec));
  spec.kind = "x";
  spec.label = "L";
  spec.run = fake_run;
  spec.arg = fk;
  ep->starting = 1;
  err = uvt_start(ep->reg, &spec, id);
  ep->starting = 0;
  if (err == 0) {
    snprintf(fk->id, sizeof(fk->id), "%s", id);
    ep->nstarted++;
    op_log(ep, "  (%s started from a hook)", id);
  } else {
    memset(fk, 0, sizeof(*fk));
  }
  return err;
}

/* Mirrors model.c's do_act. */
static int do_act(fake_t *fk) {
  episode_t *ep = fk->ep;
  uvt_registry_t *reg = ep->reg;
  const char *self = fk->task != NULL ? uvt_task_id(fk->task) : NULL;
  const uvt_agent_t *caller = caller_ptr(ep, fk->owner);
  const fake_t *other = fk->act_other >= 0 ? &ep->fakes[fk->act_other] : NULL;
  uvt_kill_result_t kr;
  uvt_read_t rd;
  int err;
  switch (fk->act) {
  case M_ACT_DISPOSE_OWNER:
    return fk->owner >= 0
               ? uvt_agent_dispose(&ep->agents[fk->owner], on_disposed)
               : 0;
  case M_ACT_START:
    return start_from_hook(ep);
  case M_ACT_KILL_SELF:
    return self == NULL ? UV_EINVAL
                        : uvt_kill(reg, self, caller, "from a hook", &kr);
  case M_ACT_FORGET_SELF:
    return self == NULL ? UV_EINVAL : uvt_forget(reg, self, caller);
  case M_ACT_READ_SELF:
    if (self == NULL)
      return UV_EINVAL;
    err = uvt_read(reg, self, caller, &rd);
    if (err == 0)
      uvt_read_cleanup(&rd);
    return err;
  case M_ACT_KILL_OTHER:
    return other == NULL
               ? 0
               : uvt_kill(reg, other->id, caller_ptr(ep, other->owner),
                          "from a hook", &kr);
  case M_ACT_FORGET_OTHER:
    return other == NULL
               ? 0
               : uvt_forget(reg, other->id, caller_ptr(ep, other->owner));
  case M_ACT_QUIESCENT:
    uvt_task_quiescent(fk->task);
    fk->qpending = 0;
    return 0;
  }
  return 0;
}

/* R-REENTER-1: act from inside `hook`, once, with allocation failures
 * off (acts test re-entrancy, not UV_ENOMEM). */
static void fake_act(fake_t *fk, int hook) {
  int armed, err;
  if (fk->act_hook != hook || fk->acted || fk->ep->close_began)
    return;
  fk->acted = 1;
  armed = atomic_exchange(&inj_armed, 0);
  err = do_act(fk);
  atomic_store(&inj_armed, armed);
  record_aev(fk->ep, fk->ti, M_WHERE_HOOK + hook, fk->act, err);
}

/* Mirrors model.c's fake_cancel. */
static int fake_cancel(uvt_task_t *t, const char *reason) {
  fake_t *fk = uvt_task_arg(t);
  episode_t *ep = fk->ep;
  fk->cancels++;
  fake_act(fk, M_HOOK_CANCEL);
  if (fk->cancel_error != 0)
    return fk->cancel_error;
  if (fk->settles == 0 &&
      (fk->settle_on_cancel || (ep->closing && !ep->m.short_grace) ||
       (ep->m.short_grace && strcmp(reason, "owner disposed") == 0))) {
    /* The producer's own settle is not under test here. */
    int armed = atomic_exchange(&inj_armed, 0);
    fake_settle(fk, UVT_KILLED, "cancelled", NULL, 0);
    atomic_store(&inj_armed, armed);
  }
  return 0;
}

static int fake_read(uvt_task_t *t, uvt_buf_t *out) {
  fake_t *fk = uvt_task_arg(t);
  int err = uvt_buf_append(out, fk->pending, fk->pending_len);
  if (err == 0)
    fk->pending_len = 0;
  fake_act(fk, M_HOOK_READ);
  return err;
}

static void fake_release(uvt_task_t *t) {
  fake_t *fk = uvt_task_arg(t);
  fk->released++;
  fk->qpending = 0; /* nobody waits any more: stop the rest alone */
  fake_act(fk, M_HOOK_RELEASE);
}

static void fake_settled(uvt_task_t *t) {
  fake_t *fk = uvt_task_arg(t);
  fk->settled_hooks++;
  fake_act(fk, M_HOOK_SETTLED);
}

static int fake_quiesce(uvt_task_t *t) {
  fake_t *fk = uvt_task_arg(t);
  fk->quiesces++;
  fk->qpending = fk->quiesce_mode == 2;
  fake_act(fk, M_HOOK_QUIESCE);
  return fk->quiesce_mode == 2 ? 1 : 0;
}

static int fake_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  fake_t *fk = arg;
  fk->task = t;
  fake_act(fk, M_HOOK_RUN);
  if (fk->run_error) {
    fk->task = NULL;
    return fk->run_error;
  }
  hooks->cancel = fake_cancel;
  hooks->read_output = fk->stream ? fake_read : NULL;
  hooks->release = fake_release;
  hooks->settled = fake_settled;
  hooks->quiesce = fk->quiesce_mode != 0 ? fake_quiesce : NULL;
  return 0;
}

typedef struct {
  fake_t *fk;
  uvt_status_t status;
  const char *detail;
  const char *output;
  size_t output_len;
} thread_settle_t;

static void settle_thread(void *arg) {
  thread_settle_t *ts = arg;
  fake_settle(ts->fk, ts->status, ts->detail, ts->output, ts->output_len);
}

static void job_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  job_t *j = arg;
  uv_sem_wait(&j->go);
  out->status = j->status;
  out->detail = j->detail;
  uvt_thread_append_output(ctx, out, j->output, strlen(j->output));
  if (uvt_thread_cancelled(ctx))
    uvt_thread_append_output(ctx, out, "+c", 2);
}

/* Loop ----------------------------------------------------------------- */

/* Run the loop without blocking until nothing happens for a few turns. */
static void drain(episode_t *ep) {
  int quiet = 0, guard = 0;
  while (quiet < 3 && guard++ < 1000) {
    long before = ep->events;
    uv_run(&ep->loop, UV_RUN_NOWAIT);
    quiet = ep->events == before ? quiet + 1 : 0;
  }
  m_drain(&ep->m);
}

/* Comparison after every step ------------------------------------------ */

static int cmp_lev(const void *a, const void *b) {
  const m_lev_t *x = a, *y = b;
  if (x->listener != y->listener)
    return x->listener - y->listener;
  return x->task - y->task;
}

static int cmp_fev(const void *a, const void *b) {
  const m_fev_t *x = a, *y = b;
  if (x->watcher != y->watcher)
    return x->watcher - y->watcher;
  if (x->task != y->task)
    return x->task - y->task;
  return x->which - y->which;
}

static int cmp_wev(const void *a, const void *b) {
  const m_wev_t *x = a, *y = b;
  return x->wait - y->wait;
}

static int cmp_aev(const void *a, const void *b) {
  const m_aev_t *x = a, *y = b;
  if (x->task != y->task)
    return x->task - y->task;
  if (x->where != y->where)
    return x->where - y->where;
  if (x->what != y->what)
    return x->what - y->what;
  return x->err - y->err;
}

static const char *aev_name(const model_t *m, int ti) {
  return ti >= 0 && ti < m->ntasks ? m->tasks[ti].id : "(a start that failed)";
}

static void compare_events(episode_t *ep) {
  model_t *m = &ep->m;
  char what[128];
  int i;

  if (ep->overflow)
    fail(ep, "event log overflow");
  if (ep->reaction_errors)
    fail(ep, "%d reactions inside listener callbacks failed",
         ep->reaction_errors);
  if (ep->nlev != m->nlev)
    fail(ep, "listener calls: expected %d, got %d", m->nlev, ep->nlev);
  qsort(ep->lev, (size_t)ep->nlev, sizeof(ep->lev[0]), cmp_lev);
  qsort(m->lev, (size_t)m->nlev, sizeof(m->lev[0]), cmp_lev);
  for (i = 0; i < ep->nlev; i++) {
    if (ep->lev[i].listener != m->lev[i].listener ||
        ep->lev[i].task != m->lev[i].task)
      fail(ep,
           "listener call %d: expected listener %d task %s, got "
           "listener %d task %s",
           i, m->lev[i].listener, m->tasks[m->lev[i].task].id,
           ep->lev[i].listener,
           ep->lev[i].task >= 0 ? m->tasks[ep->lev[i].task].id : "?");
    if (ep->lev[i].owner != m->lev[i].owner)
      fail(ep, "listener call for %s: owner expected %d, got %d",
           m->tasks[m->lev[i].task].id, m->lev[i].owner, ep->lev[i].owner);
    snprintf(what, sizeof(what), "listener %d call for %s", m->lev[i].listener,
             m->tasks[m->lev[i].task].id);
    snap_check(ep, what, &m->lev[i].snap, &ep->lev[i].snap);
  }

  if (ep->nwev != m->nwev)
    fail(ep, "wait callbacks: expected %d, got %d", m->nwev, ep->nwev);
  qsort(ep->wev, (size_t)ep->nwev, sizeof(ep->wev[0]), cmp_wev);
  qsort(m->wev, (size_t)m->nwev, sizeof(m->wev[0]), cmp_wev);
  for (i = 0; i < ep->nwev; i++) {
    if (ep->wev[i].wait != m->wev[i].wait)
      fail(ep, "wait callback %d: expected wait %d, got wait %d", i,
           m->wev[i].wait, ep->wev[i].wait);
    snprintf(what, sizeof(what), "wait %d callback", m->wev[i].wait);
    err_check(ep, what, m->wev[i].status, ep->wev[i].status);
    if (ep->wev[i].has_snap != m->wev[i].has_snap)
      fail(ep, "%s: snapshot expected %s, got %s", what,
           m->wev[i].has_snap ? "one" : "NULL",
           ep->wev[i].has_snap ? "one" : "NULL");
    if (m->wev[i].has_snap)
      snap_check(ep, what, &m->wev[i].snap, &ep->wev[i].snap);
  }

  /* The feed: per watcher and task, the transitions in order. */
  qsort(ep->fev, (size_t)ep->nfev, sizeof(ep->fev[0]), cmp_fev);
  qsort(m->fev, (size_t)m->nfev, sizeof(m->fev[0]), cmp_fev);
  for (i = 0; i < ep->nfev || i < m->nfev; i++) {
    static const char *const names[] = {"registered", "stopping", "terminal",
                                        "dropped"};
    if (i >= ep->nfev || i >= m->nfev ||
        ep->fev[i].watcher != m->fev[i].watcher ||
        ep->fev[i].task != m->fev[i].task ||
        ep->fev[i].which != m->fev[i].which) {
      if (i < m->nfev)
        fail(ep,
             "feed: %d changes expected, %d got; at %d expected watcher %d "
             "%s %s, got %s",
             m->nfev, ep->nfev, i, m->fev[i].watcher,
             m->tasks[m->fev[i].task].id, names[m->fev[i].which],
             i < ep->nfev ? names[ep->fev[i].which] : "nothing");
      fail(ep, "feed: %d changes expected, %d got; unexpected watcher %d %s %s",
           m->nfev, ep->nfev, ep->fev[i].watcher,
           ep->fev[i].task >= 0 ? m->tasks[ep->fev[i].task].id : "?",
           names[ep->fev[i].which]);
    }
    snprintf(what, sizeof(what), "feed watcher %d %s %s", m->fev[i].watcher,
             m->tasks[m->fev[i].task].id, names[m->fev[i].which]);
    snap_check(ep, what, &m->fev[i].snap, &ep->fev[i].snap);
  }
  g_stats.feed += ep->nfev;
  ep->nfev = 0;

  for (i = 0; i < M_AGENTS; i++)
    if (ep->dispose_cbs[i] != m->dispose_cbs[i])
      fail(ep, "agent %d dispose callbacks: expected %d, got %d", i,
           m->dispose_cbs[i], ep->dispose_cbs[i]);

  /* Calls from inside hooks and callbacks (R-REENTER-1, R-FORGET-2,
   * R-BUSY-1): the same calls, with the same results. */
  qsort(ep->aev, (size_t)ep->naev, sizeof(ep->aev[0]), cmp_aev);
  qsort(m->aev, (size_t)m->naev, sizeof(m->aev[0]), cmp_aev);
  for (i = 0; i < ep->naev || i < m->naev; i++) {
    if (i >= ep->naev || i >= m->naev ||
        cmp_aev(&ep->aev[i], &m->aev[i]) != 0) {
      int k;
      const m_aev_t *w = i < m->naev ? &m->aev[i] : NULL;
      for (k = 0; k < m->naev; k++)
        fprintf(stderr, "  model: %s where=%d what=%d -> %s\n",
                aev_name(m, m->aev[k].task), m->aev[k].where, m->aev[k].what,
                uvt_err_name(m->aev[k].err));
      for (k = 0; k < ep->naev; k++)
        fprintf(stderr, "  real:  %s where=%d what=%d -> %s\n",
                aev_name(m, ep->aev[k].task), ep->aev[k].where, ep->aev[k].what,
                uvt_err_name(ep->aev[k].err));
      const m_aev_t *g = i < ep->naev ? &ep->aev[i] : NULL;
      fail(ep,
           "calls from hooks/callbacks: %d expected, %d made; at %d expected "
           "%s where=%d what=%d -> %s, got %s where=%d what=%d -> %s",
           m->naev, ep->naev, i, w ? aev_name(m, w->task) : "-",
           w ? w->where : -1, w ? w->what : -1, w ? uvt_err_name(w->err) : "-",
           g ? aev_name(m, g->task) : "-", g ? g->where : -1, g ? g->what : -1,
           g ? uvt_err_name(g->err) : "-");
    }
  }
  g_stats.reentrant += ep->naev;
  ep->naev = 0;

  g_stats.listener_calls += ep->nlev;
  for (i = 0; i < ep->nwev; i++) {
    if (ep->wev[i].status == 0)
      g_stats.wait_ok++;
    else if (ep->wev[i].status == UVT_EABORTED)
      g_stats.wait_aborted++;
  }
  for (i = 0; i < M_AGENTS; i++)
    g_stats.disposals += ep->dispose_cbs[i];
  ep->nlev = 0;
  ep->nwev = 0;
  memset(ep->dispose_cbs, 0, sizeof(ep->dispose_cbs));
  m_events_clear(m);
}

static void compare_state(episode_t *ep) {
  model_t *m = &ep->m;
  uvt_metrics_t mt;
  char what[160];
  int i;

  compare_events(ep);
  if (ep->nstarted != m->ntasks)
    fail(ep, "%d tasks started for real, %d in the model", ep->nstarted,
         m->ntasks);
  for (i = 0; i < m->ntasks; i++) {
    m_task_t *t = &m->tasks[i];
    fake_t *fk = &ep->fakes[i];
    uvt_snapshot_t s;
    int err;
    if (t->thread)
      goto snapshot; /* its hooks are the library's own */
    if (fk->cancels != t->cancels)
      fail(ep, "%s: cancel hook calls expected %d, got %d", t->id, t->cancels,
           fk->cancels);
    if (fk->released != t->releases)
      fail(ep, "%s: release hook calls expected %d, got %d", t->id, t->releases,
           fk->released);
    if (fk->settled_hooks != t->settled_hooks)
      fail(ep, "%s: settled hook calls expected %d, got %d", t->id,
           t->settled_hooks, fk->settled_hooks);
    if (fk->quiesces != t->quiesces || fk->qpending != t->qpending)
      fail(ep, "%s: quiesce hook calls expected %d (pending %d), got %d (%d)",
           t->id, t->quiesces, t->qpending, fk->quiesces, fk->qpending);
    if (t->stream && fk->pending_len != t->pending_len)
      fail(ep, "%s: unread stream bytes expected %zu, got %zu", t->id,
           t->pending_len, fk->pending_len);
  snapshot:
    err =
        uvt_get(ep->reg, t->id, caller_ptr(ep, t->dropped ? -1 : t->owner), &s);
    snprintf(what, sizeof(what), "state check: get %s", t->id);
    if (t->dropped || t->hidden) {
      err_check(ep, what, UVT_ENOTASK, err);
    } else {
      m_snap_t want, got;
      err_check(ep, what, 0, err);
      m_snap_of(m, i, &want);
      snap_from(&s, &got);
      uvt_snapshot_cleanup(&s);
      snap_check(ep, what, &want, &got);
    }
  }
  for (i = 0; i < M_AGENTS; i++) {
    const uvt_agent_t *a = &ep->agents[i];
    const m_agent_t *ma = &m->agents[i];
    if (ma->state == M_AG_FREE || ma->state == M_AG_DONE) {
      if (a->id != NULL || a->session != NULL)
        fail(ep,
             "agent %d: disposed (or never registered) but id/session "
             "are not NULL",
             i);
    } else if (a->id == NULL || a->session == NULL ||
               strcmp(a->id, ma->id) != 0 ||
               strcmp(a->session, ma->session) != 0) {
      fail(ep, "agent %d: id/session expected %s/%s, got %s/%s", i, ma->id,
           ma->session, a->id ? a->id : "NULL",
           a->session ? a->session : "NULL");
    }
  }

  uvt_registry_metrics(ep->reg, &mt);
#define METRIC(field, want)                                                    \
  if (mt.field != (want))                                                      \
    fail(ep, "metrics." #field ": expected %" PRIu64 ", got %" PRIu64,         \
         (uint64_t)(want), (uint64_t)mt.field);
  METRIC(started, m->started)
  METRIC(completed, m->completed)
  METRIC(killed, m->killed)
  METRIC(failed, m->failed)
  METRIC(kills, m->kills)
  METRIC(force_failed, m->force_failed)
  METRIC(live, m_live(m))
  METRIC(records, m_records(m))
#undef METRIC
}

/* Operations ----------------------------------------------------------- */

/* After a real call made with injection armed: if it failed for want of
 * memory, and may (R-START-3 and the header's Returns lines), the model is
 * not advanced; the step's state comparison then checks nothing changed. */
static int enomem_nothing_changed(episode_t *ep, int got) {
  if (!inj_disarm() || got != UV_ENOMEM)
    return 0;
  op_log(ep, "  (an allocation failed: UV_ENOMEM)");
  g_stats.enomem++;
  return 1;
}

static const char *const g_bad_kinds[] = {
    "bad kind", "", "tab\tkind",
    "k1234567890123456789012345678901234567890123456789012345678901234"};

/* A task id to aim at: mostly the episode's, sometimes unknown. */
static const char *pick_id(episode_t *ep, rng_t *r, int *ti) {
  *ti = -1;
  if (ep->m.ntasks == 0 || chance(r, 8))
    return chance(r, 50) ? "nope-1" : "fake-999";
  *ti = (int)rnd(r, (unsigned)ep->m.ntasks);
  return ep->m.tasks[*ti].id;
}

/* A caller: the task's owner half the time, otherwise any shape (NULL,
 * another session, the same session through another agent, a disposed or
 * never registered agent). */
static int pick_caller(episode_t *ep, rng_t *r, int ti) {
  if (ti >= 0 && chance(r, 50) && !ep->m.tasks[ti].dropped)
    return ep->m.tasks[ti].owner;
  return (int)rnd(r, M_AGENTS + 1) - 1;
}

/* Which acts make sense from which hook (R-REENTER-1). */
static int act_fits(int hook, int act, int stream) {
  if (hook == M_HOOK_READ && !stream)
    return 0; /* a final kind has no read_output hook */
  if (act == M_ACT_QUIESCENT)
    return hook == M_HOOK_QUIESCE;
  if (act == M_ACT_START)
    return hook != M_HOOK_RUN; /* see model.h */
  return 1;
}

static void op_start(episode_t *ep, rng_t *r) {
  model_t *m = &ep->m;
  fake_t *fk;
  uvt_spec_t spec;
  m_fake_cfg_t cfg;
  char id[UVT_ID_MAX];
  const char *kind, *label;
  int owner, want, got, ti = -1;
  static const char *const labels[] = {"a label", "L", "multi word label", ""};
  static const char *const hooks[] = {"run",     "cancel",  "read_output",
                                      "settled", "quiesce", "release"};
  static const char *const acts[] = {"dispose owner", "start",     "kill self",
                                     "forget self",   "read self", "kill other",
                                     "forget other",  "quiescent"};

  if (m->ntasks >= M_TASKS)
    return;
  if (ep->nstarted != m->ntasks)
    fail(ep, "start: %d tasks started for real, %d in the model", ep->nstarted,
         m->ntasks);
  kind = chance(r, 88) ? m_kinds[rnd(r, M_KINDS)] : g_bad_kinds[rnd(r, 4)];
  label = chance(r, 95) ? labels[rnd(r, 3)] : labels[3];
  owner = (int)rnd(r, M_AGENTS + 1) - 1;
  if (owner >= 0 && m->agents[owner].state != M_AG_REG && chance(r, 75)) {
    /* Mostly aim at a registered agent, so starts get through. */
    int a;
    for (a = 0; a < M_AGENTS; a++)
      if (m->agents[(owner + a) % M_AGENTS].state == M_AG_REG) {
        owner = (owner + a) % M_AGENTS;
        break;
      }
  }
  memset(&cfg, 0, sizeof(cfg));
  cfg.run_error = chance(r, 5) ? UV_EIO : 0;
  cfg.stream = chance(r, 50);
  cfg.cancel_error = chance(r, 10) ? UV_EPERM : 0;
  cfg.settle_on_cancel = chance(r, 40);
  /* P-KILL-6: a quiesce hook, sometimes one that keeps the teardown
   * waiting (not with a short grace: its expiry would race the drains). */
  cfg.quiesce_mode = (int)rnd(r, m->short_grace ? 2 : 3);
  cfg.act_hook = -1;
  cfg.act_other = -1;
  if (chance(r, 30)) {
    int hook = (int)rnd(r, M_HOOKS), act = (int)rnd(r, M_ACTS);
    if (act_fits(hook, act, cfg.stream)) {
      cfg.act_hook = hook;
      cfg.act = act;
      if (m->ntasks > 0 && chance(r, 80))
        cfg.act_other = (int)rnd(r, (unsigned)m->ntasks);
    }
  }
  op_log(ep,
         "start kind=\"%s\" label=\"%s\" owner=%d run_error=%d stream=%d "
         "cancel_error=%d settle_on_cancel=%d quiesce=%d",
         kind, label, owner, cfg.run_error, cfg.stream, cfg.cancel_error,
         cfg.settle_on_cancel, cfg.quiesce_mode);
  if (cfg.act_hook >= 0)
    op_log(ep, "  (from its %s hook: %s, other=%d)", hooks[cfg.act_hook],
           acts[cfg.act], cfg.act_other);

  /* Some starts are thread-producer tasks (unowned when the grace is
   * short, so that only registry close can force-fail them). */
  if (chance(r, 15) && (!m->short_grace || owner < 0)) {
    job_t *j = &ep->jobs[m->ntasks];
    uvt_thread_options_t to;
    m_fake_cfg_t plain;
    op_log(ep, "  (as a thread task)");
    uvt_thread_options_init(&to);
    to.kind = kind;
    to.label = label;
    to.owner = owner < 0 ? NULL : &ep->agents[owner];
    to.stack_size = 64 * 1024;
    memset(&ep->fakes[m->ntasks], 0, sizeof(ep->fakes[0]));
    memset(j, 0, sizeof(*j));
    if (uv_sem_init(&j->go, 0) != 0)
      abort();
    inj_maybe_arm(r);
    ep->starting = 1;
    got = uvt_thread_start(ep->reg, &to, job_fn, j, id);
    ep->starting = 0;
    if (enomem_nothing_changed(ep, got)) {
      uv_sem_destroy(&j->go);
      memset(j, 0, sizeof(*j));
      return;
    }
    memset(&plain, 0, sizeof(plain));
    plain.act_hook = -1;
    plain.act_other = -1;
    want = m_start(m, kind, label, owner, &plain, &ti);
    err_check(ep, "thread start", want, got);
    if (got != 0) {
      uv_sem_destroy(&j->go);
      memset(j, 0, sizeof(*j));
      g_stats.start_errors++;
      return;
    }
    j->used = 1;
    m->tasks[ti].thread = 1;
    snprintf(ep->fakes[ti].id, sizeof(ep->fakes[ti].id), "%s", id);
    ep->fakes[ti].owner = owner;
    ep->fakes[ti].act_hook = -1;
    ep->nstarted++;
    g_stats.starts++;
    g_stats.thread_tasks++;
    if (strcmp(id, m->tasks[ti].id) != 0)
      fail(ep, "thread start: id expected %s, got %s", m->tasks[ti].id, id);
    return;
  }

  fk = &ep->fakes[m->ntasks];
  memset(fk, 0, sizeof(*fk));
  fk->ep = ep;
  fk->ti = m->ntasks;
  fk->run_error = cfg.run_error;
  fk->stream = cfg.stream;
  fk->cancel_error = cfg.cancel_error;
  fk->settle_on_cancel = cfg.settle_on_cancel;
  fk->quiesce_mode = cfg.quiesce_mode;
  fk->act_hook = cfg.act_hook;
  fk->act = cfg.act;
  fk->act_other = cfg.act_other;
  fk->owner = owner;

  memset(&spec, 0, sizeof(spec));
  spec.kind = kind;
  spec.label = label;
  spec.owner = owner < 0 ? NULL : &ep->agents[owner];
  spec.run = fake_run;
  spec.arg = fk;
  if (cfg.act_hook < 0)
    inj_maybe_arm(r);
  ep->starting = 1;
  got = uvt_start(ep->reg, &spec, id);
  ep->starting = 0;
  if (enomem_nothing_changed(ep, got)) {
    memset(fk, 0, sizeof(*fk));
    return;
  }
  want = m_start(m, kind, label, owner, &cfg, &ti);
  err_check(ep, "start", want, got);
  if (got == 0) {
    g_stats.starts++;
    snprintf(fk->id, sizeof(fk->id), "%s", id);
    ep->nstarted++;
  } else {
    g_stats.start_errors++;
  }
  if (got == 0 && strcmp(id, m->tasks[ti].id) != 0)
    fail(ep, "start: id expected %s, got %s", m->tasks[ti].id, id);
  if (got != 0) {
    /* Its run hook's act happened all the same: keep what it recorded. */
    memset(fk, 0, sizeof(*fk));
  }
}

static void on_watchdog(uv_timer_t *t);

static int settled_count(episode_t *ep) {
  uvt_metrics_t mt;
  uvt_registry_metrics(ep->reg, &mt);
  return (int)(mt.completed + mt.killed + mt.failed - mt.force_failed);
}

/* Let a thread task's function end, and (unless its record is gone) run the
 * loop until its settlement is applied. */
static void settle_job(episode_t *ep, int ti, uvt_status_t status,
                       const char *detail, const char *output) {
  model_t *m = &ep->m;
  job_t *j = &ep->jobs[ti];
  char out[80];
  int before, guard = 0;

  drain(ep);
  compare_events(ep);
  op_log(ep, "settle thread task %s status=%s detail=%s output=%s%s",
         m->tasks[ti].id, uvt_status_name(status), detail ? detail : "NULL",
         output, m->tasks[ti].dropped ? " (late)" : "");
  j->status = status;
  j->detail = detail;
  snprintf(j->output, sizeof(j->output), "%s", output);
  snprintf(out, sizeof(out), "%s%s", output,
           m->tasks[ti].cancels > 0 ? "+c" : "");
  m_settle(m, ti, status, detail, out, strlen(out));
  j->posted = 1;
  g_stats.job_settles++;
  if (m->tasks[ti].dropped) {
    uv_sem_post(&j->go); /* its late settle is invisible (R-DONE-2) */
    return;
  }
  before = ep->reg != NULL ? settled_count(ep) : 0;
  uv_timer_init(&ep->loop, &ep->watchdog);
  ep->watchdog_fired = 0;
  ep->watchdog.data = ep;
  uv_timer_start(&ep->watchdog, on_watchdog, 5000, 0);
  uv_sem_post(&j->go);
  while (settled_count(ep) == before && !ep->watchdog_fired && guard++ < 100000)
    uv_run(&ep->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&ep->watchdog, NULL);
  if (ep->watchdog_fired)
    fail(ep, "thread task %s: no settlement 5 s after its function ended",
         m->tasks[ti].id);
  drain(ep);
}

static void op_settle(episode_t *ep, rng_t *r) {
  model_t *m = &ep->m;
  static const char *const details[] = {NULL, "d", "exit code: 3"};
  static const char *const outputs[] = {NULL, "out", "final output text"};
  char out[M_TEXT];
  size_t out_len = 0;
  const char *detail;
  uvt_status_t status;
  fake_t *fk;
  m_task_t *t;
  int ti, from_thread, concurrent;

  if (m->ntasks == 0)
    return;
  ti = (int)rnd(r, (unsigned)m->ntasks);
  t = &m->tasks[ti];
  fk = &ep->fakes[ti];
  if (t->thread) {
    if (!ep->jobs[ti].posted)
      settle_job(ep, ti, (uvt_status_t)(UVT_COMPLETED + rnd(r, 3)),
                 details[rnd(r, 3)], chance(r, 50) ? "result" : "");
    return;
  }
  /* Never touch the handle after both a settle and the release. */
  if (fk->settles > 0 && fk->released)
    return;
  status = (uvt_status_t)(UVT_COMPLETED + rnd(r, 3));
  detail = details[rnd(r, 3)];
  if (t->stream) {
    memcpy(out, fk->pending, fk->pending_len);
    out_len = fk->pending_len;
    if (chance(r, 50) && out_len + 5 <= sizeof(out)) {
      memcpy(out + out_len, "tail\n", 5);
      out_len += 5;
    }
  } else {
    const char *o = outputs[rnd(r, 3)];
    if (o != NULL) {
      out_len = strlen(o);
      memcpy(out, o, out_len);
    }
  }
  from_thread = chance(r, 25);
  op_log(ep, "settle %s status=%s detail=%s output_len=%zu from_%s%s", t->id,
         uvt_status_name(status), detail ? detail : "NULL", out_len,
         from_thread ? "thread" : "loop",
         fk->settles    ? " (again)"
         : fk->released ? " (late)"
                        : "");

  concurrent = from_thread && chance(r, 50);
  if (concurrent) {
    /* Nothing else may be pending while the loop races the thread: what
     * the loop delivers must not depend on when it runs. */
    drain(ep);
    compare_events(ep);
    if (fk->settles > 0 && fk->released) {
      /* The drain applied the first settle and dropped the record: the
       * handle is gone. */
      op_log(ep, "  (skipped: the handle was freed by the drain)");
      return;
    }
  }
  m_settle(m, ti, status, detail, out, out_len);
  g_stats.settles++;
  g_stats.thread_settles += from_thread;
  if (from_thread) {
    thread_settle_t ts;
    uv_thread_t th;
    ts.fk = fk;
    ts.status = status;
    ts.detail = detail;
    ts.output = out_len ? out : NULL;
    ts.output_len = out_len;
    if (uv_thread_create(&th, settle_thread, &ts) != 0) {
      settle_thread(&ts);
    } else {
      /* Half the time the loop runs while the thread settles: the async
       * send races the drain (for the thread sanitizer lane).  The result
       * after the join and a drain is the same either way. */
      if (concurrent) {
        int k;
        for (k = 0; k < 3; k++)
          uv_run(&ep->loop, UV_RUN_NOWAIT);
        uv_thread_join(&th);
        drain(ep);
      } else {
        uv_thread_join(&th);
      }
    }
  } else {
    fake_settle(fk, status, detail, out_len ? out : NULL, out_len);
  }
  fake_forget_handle(fk);
}

static void op_kill(episode_t *ep, rng_t *r) {
  static const char *const reasons[] = {NULL, "stop", "enough"};
  uvt_kill_result_t want_r = 0, got_r = 0;
  const char *id, *reason;
  int ti, caller, want, got;
  id = pick_id(ep, r, &ti);
  caller = pick_caller(ep, r, ti);
  reason = reasons[rnd(r, 3)];
  op_log(ep, "kill %s caller=%d reason=%s", id, caller,
         reason ? reason : "NULL");
  /* A cancel hook that acts (disposing its owner, say) may leave a
   * teardown to finish after it returns: no injection there. */
  if (ti < 0 || ep->fakes[ti].act_hook != M_HOOK_CANCEL)
    inj_maybe_arm(r);
  got = uvt_kill(ep->reg, id, caller_ptr(ep, caller), reason, &got_r);
  if (enomem_nothing_changed(ep, got))
    return;
  want = m_kill(&ep->m, id, caller, reason, &want_r);
  err_check(ep, "kill", want, got);
  if (got == 0)
    g_stats.kills++;
  else
    g_stats.kill_errors++;
  if (got == 0 && want_r != got_r)
    fail(ep, "kill: result expected %d, got %d", want_r, got_r);
}

static void op_get(episode_t *ep, rng_t *r) {
  uvt_snapshot_t s;
  m_snap_t want, got;
  const char *id;
  int ti, caller, werr, gerr;
  id = pick_id(ep, r, &ti);
  caller = pick_caller(ep, r, ti);
  op_log(ep, "get %s caller=%d", id, caller);
  inj_maybe_arm(r);
  gerr = uvt_get(ep->reg, id, caller_ptr(ep, caller), &s);
  if (enomem_nothing_changed(ep, gerr))
    return;
  werr = m_get(&ep->m, id, caller, &want);
  err_check(ep, "get", werr, gerr);
  if (gerr == 0) {
    snap_from(&s, &got);
    uvt_snapshot_cleanup(&s);
    snap_check(ep, "get", &want, &got);
  }
}

static void op_list(episode_t *ep, rng_t *r) {
  uvt_snapshot_t *arr;
  size_t count, i;
  int idx[M_TASKS], n, caller, err;
  caller = (int)rnd(r, M_AGENTS + 1) - 1;
  op_log(ep, "list caller=%d", caller);
  inj_maybe_arm(r);
  err = uvt_list(ep->reg, caller_ptr(ep, caller), &arr, &count);
  if (enomem_nothing_changed(ep, err))
    return;
  err_check(ep, "list", 0, err);
  m_list(&ep->m, caller, idx, &n);
  if ((size_t)n != count)
    fail(ep, "list: expected %d tasks, got %zu", n, count);
  if (count == 0 && arr != NULL)
    fail(ep, "list: empty result with a non-NULL array");
  for (i = 0; i < count; i++) {
    m_snap_t want, got;
    char what[64];
    m_snap_of(&ep->m, idx[i], &want);
    snap_from(&arr[i], &got);
    snprintf(what, sizeof(what), "list[%zu]", i);
    snap_check(ep, what, &want, &got);
  }
  g_stats.lists += count > 0;
  uvt_snapshots_free(arr, count);
}

static void op_read(episode_t *ep, rng_t *r) {
  uvt_read_t rd;
  m_snap_t want, got;
  char text[M_TEXT];
  size_t len = 0;
  const char *id;
  int ti, caller, werr, gerr;
  id = pick_id(ep, r, &ti);
  caller = pick_caller(ep, r, ti);
  op_log(ep, "read %s caller=%d", id, caller);
  memset(&rd, 0, sizeof(rd));
  /* A read_output hook that acts has acted even if the read then fails for
   * want of memory: no injection there. */
  if (ti < 0 || ep->fakes[ti].act_hook != M_HOOK_READ)
    inj_maybe_arm(r);
  gerr = uvt_read(ep->reg, id, caller_ptr(ep, caller), &rd);
  if (enomem_nothing_changed(ep, gerr))
    return;
  werr = m_read(&ep->m, id, caller, text, &len, &want);
  err_check(ep, "read", werr, gerr);
  if (gerr != 0)
    return;
  g_stats.reads++;
  if (rd.len != len || (len > 0 && memcmp(rd.text, text, len) != 0) ||
      rd.text == NULL || rd.text[rd.len] != '\0')
    fail(ep, "read: text expected %zu bytes \"%.*s\", got %zu bytes \"%.*s\"",
         len, (int)len, text, rd.len, (int)rd.len, rd.text ? rd.text : "");
  snap_from(&rd.snapshot, &got);
  uvt_read_cleanup(&rd);
  snap_check(ep, "read", &want, &got);
}

static void op_wait(episode_t *ep, rng_t *r) {
  const char *id;
  int slot, ti, caller, zero, forget, want, got;
  slot = (int)rnd(r, M_WAITS);
  /* R-BUSY-1, C-23: a request still in use is refused (mostly try a free
   * one). */
  if (ep->m.waits[slot].state != M_W_IDLE && chance(r, 70))
    return;
  id = pick_id(ep, r, &ti);
  caller = pick_caller(ep, r, ti);
  zero = chance(r, 5);
  forget = chance(r, 25);
  op_log(ep, "wait slot=%d %s caller=%d timeout=%s%s", slot, id, caller,
         zero ? "0" : "1h", forget ? " (forgets it at the end)" : "");
  if (ep->m.waits[slot].state == M_W_IDLE) {
    ep->waits[slot].data = ep;
    ep->wait_forget[slot] = forget;
    ep->wait_caller[slot] = caller;
  }
  inj_maybe_arm(r);
  got = uvt_wait(ep->reg, &ep->waits[slot], id, zero ? 0 : 3600 * 1000,
                 caller_ptr(ep, caller), on_wait);
  inj_disarm(); /* no UV_ENOMEM documented: the model must hold anyway */
  want = m_wait(&ep->m, slot, id, caller, zero, forget);
  err_check(ep, "wait", want, got);
}

static void op_abort(episode_t *ep, rng_t *r) {
  int slot = (int)rnd(r, M_WAITS), want, got;
  op_log(ep, "abort slot=%d", slot);
  got = uvt_wait_abort(&ep->waits[slot]);
  want = m_wait_abort(&ep->m, slot);
  err_check(ep, "abort", want, got);
}

static void on_watchdog(uv_timer_t *t);

static void op_wait_short(episode_t *ep, rng_t *r) {
  m_snap_t want;
  const char *id;
  int ti, caller, werr, gerr, wstatus = 0, guard = 0;
  drain(ep);
  compare_events(ep);
  id = pick_id(ep, r, &ti);
  caller = pick_caller(ep, r, ti);
  op_log(ep, "wait_short %s caller=%d timeout=1ms", id, caller);
  ep->short_wait.data = ep;
  ep->short_calls = 0;
  gerr = uvt_wait(ep->reg, &ep->short_wait, id, 1, caller_ptr(ep, caller),
                  on_wait);
  werr = m_wait_short(&ep->m, id, caller, &wstatus, &want);
  err_check(ep, "wait_short", werr, gerr);
  if (gerr != 0)
    return;
  if (ep->short_calls != 0)
    fail(ep, "wait_short: callback ran inside uvt_wait");
  /* A watchdog of our own: the 1 ms deadline must fire well before it. */
  uv_timer_init(&ep->loop, &ep->watchdog);
  ep->watchdog_fired = 0;
  ep->watchdog.data = ep;
  uv_timer_start(&ep->watchdog, on_watchdog, 5000, 0);
  while (ep->short_calls == 0 && !ep->watchdog_fired && guard++ < 10000)
    if (uv_run(&ep->loop, UV_RUN_ONCE) == 0 && ep->short_calls == 0)
      fail(ep, "wait_short: the loop ran out before the callback");
  uv_close((uv_handle_t *)&ep->watchdog, NULL);
  if (ep->watchdog_fired)
    fail(ep, "wait_short: no callback 5 s after a 1 ms deadline (R-WAIT-4)");
  if (ep->short_calls != 1)
    fail(ep, "wait_short: %d callbacks", ep->short_calls);
  err_check(ep, "wait_short callback", wstatus, ep->short_status);
  if (ep->short_status == UVT_EWAITTIMEOUT)
    g_stats.wait_timeout++;
  if (!ep->short_has_snap)
    fail(ep, "wait_short: callback without a snapshot");
  snap_check(ep, "wait_short callback", &want, &ep->short_snap);
}

static void on_watchdog(uv_timer_t *t) {
  episode_t *ep = t->data;
  ep->watchdog_fired = 1;
}

static void op_emit(episode_t *ep, rng_t *r) {
  char text[32];
  fake_t *fk;
  int ti;
  if (ep->m.ntasks == 0)
    return;
  ti = (int)rnd(r, (unsigned)ep->m.ntasks);
  fk = &ep->fakes[ti];
  if (ep->m.tasks[ti].thread || !fk->stream || fk->settles > 0 || fk->released)
    return;
  snprintf(text, sizeof(text), "e%u\n", rnd(r, 1000));
  op_log(ep, "emit %s \"%s\"", ep->m.tasks[ti].id, text);
  if (fk->pending_len + strlen(text) <= sizeof(fk->pending)) {
    memcpy(fk->pending + fk->pending_len, text, strlen(text));
    fk->pending_len += strlen(text);
    m_emit(&ep->m, ti, text);
  }
}

static void op_toggle_cancel(episode_t *ep, rng_t *r) {
  int ti;
  if (ep->m.ntasks == 0)
    return;
  ti = (int)rnd(r, (unsigned)ep->m.ntasks);
  if (ep->m.tasks[ti].thread)
    return;
  ep->fakes[ti].cancel_error = ep->fakes[ti].cancel_error ? 0 : UV_EPERM;
  ep->m.tasks[ti].cancel_error = ep->fakes[ti].cancel_error;
  op_log(ep, "producer %s: cancel_error=%d", ep->m.tasks[ti].id,
         ep->fakes[ti].cancel_error);
}

static void op_agent(episode_t *ep, rng_t *r) {
  static const char *const ids[] = {"a0", "a1", "a2"};
  static const char *const sessions[] = {"s0", "s1"};
  int slot = (int)rnd(r, M_AGENTS), want, got;
  int state = ep->m.agents[slot].state;
  /* Mostly register free agents and dispose registered ones; sometimes
   * the other way round: a registered (or disposing) agent registered
   * again is UV_EBUSY (R-BUSY-1), a free one disposed is UV_EINVAL. */
  if (state == M_AG_FREE ? chance(r, 80) : chance(r, 10)) {
    const char *id = ids[rnd(r, 3)];
    const char *session = sessions[rnd(r, 2)];
    op_log(ep, "agent_register slot=%d id=%s session=%s", slot, id, session);
    if (state == M_AG_FREE)
      ep->agents[slot].data = ep;
    inj_maybe_arm(r);
    got = uvt_agent_register(ep->reg, &ep->agents[slot], id, session);
    if (enomem_nothing_changed(ep, got))
      return;
    want = m_agent_register(&ep->m, slot, id, session);
    err_check(ep, "agent_register", want, got);
    if (got == 0)
      ep->ever_registered[slot] = 1;
  } else {
    int settle_first = chance(r, 50);
    if (settle_first) {
      drain(ep);
      compare_events(ep);
    }
    op_log(ep, "agent_dispose slot=%d", slot);
    /* Not under injection: a force-fail's detail then falls back to a
     * shorter text (test-inject.c checks disposal without memory). */
    got = uvt_agent_dispose(&ep->agents[slot], on_disposed);
    want = m_agent_dispose(&ep->m, slot);
    err_check(ep, "agent_dispose", want, got);
    if (ep->dispose_cbs[slot] != 0)
      fail(ep, "agent_dispose: callback ran inside the call");
    if (settle_first)
      drain(ep);
  }
}

static void op_surface(episode_t *ep, rng_t *r) {
  int slot = (int)rnd(r, M_SURFACES), want, got;
  if (ep->m.surfaces[slot] && chance(r, 85)) {
    op_log(ep, "surface_detach slot=%d", slot);
    uvt_surface_detach(&ep->surfaces[slot]);
    m_surface_detach(&ep->m, slot);
    if (chance(r, 30)) {
      op_log(ep, "surface_detach slot=%d (again)", slot);
      uvt_surface_detach(&ep->surfaces[slot]);
    }
  } else {
    /* An attached surface attached again: UV_EBUSY (R-BUSY-1). */
    op_log(ep, "surface_attach slot=%d", slot);
    inj_maybe_arm(r);
    got = uvt_surface_attach(ep->reg, &ep->surfaces[slot], "surface");
    if (enomem_nothing_changed(ep, got))
      return;
    want = m_surface_attach(&ep->m, slot);
    err_check(ep, "surface_attach", want, got);
  }
}

static void op_listener(episode_t *ep, rng_t *r) {
  int slot = (int)rnd(r, M_LISTENERS), want, got;
  if (ep->m.listeners[slot] && chance(r, 85)) {
    op_log(ep, "listener_stop slot=%d", slot);
    uvt_listener_stop(&ep->listeners[slot]);
    m_listener_stop(&ep->m, slot);
  } else {
    /* A started listener started again: UV_EBUSY, and it keeps its
     * reaction (R-BUSY-1). */
    int reaction = (int)rnd(r, M_REACTIONS);
    static const char *const names[] = {"none", "read", "kill", "dispose",
                                        "forget"};
    op_log(ep, "listener_start slot=%d reaction=%s", slot, names[reaction]);
    if (!ep->m.listeners[slot]) {
      ep->listeners[slot].data = ep;
      ep->reaction[slot] = reaction;
    }
    got = uvt_listener_start(ep->reg, &ep->listeners[slot], on_done);
    want = m_listener_start(&ep->m, slot, reaction);
    err_check(ep, "listener_start", want, got);
  }
}

/* Watchers start and stop only between drains, so every transition is
 * delivered to the watchers that were there when it happened. */
static void op_watch(episode_t *ep, rng_t *r) {
  int slot = (int)rnd(r, M_WATCHERS);
  drain(ep);
  compare_events(ep);
  if (ep->m.watchers[slot] && chance(r, 85)) {
    op_log(ep, "watch_stop slot=%d", slot);
    uvt_watch_stop(&ep->watchers[slot]);
    m_watch_stop(&ep->m, slot);
  } else {
    int forget = chance(r, 30);
    op_log(ep, "watch_start slot=%d%s", slot,
           forget ? " (forgets tasks as they end)" : "");
    if (!ep->m.watchers[slot]) {
      ep->watchers[slot].data = ep;
      ep->watch_forget[slot] = forget;
    }
    err_check(ep, "watch_start", m_watch_start(&ep->m, slot, forget),
              uvt_watch_start(ep->reg, &ep->watchers[slot], on_change));
  }
}

/* P-KILL-6: a producer whose quiesce is in progress says it is over. */
static void op_quiescent(episode_t *ep, rng_t *r) {
  int ti, k;
  if (ep->m.ntasks == 0)
    return;
  ti = (int)rnd(r, (unsigned)ep->m.ntasks);
  for (k = 0; k < ep->m.ntasks; k++, ti = (ti + 1) % ep->m.ntasks)
    if (!ep->m.tasks[ti].thread && ep->fakes[ti].qpending)
      break;
  if (k == ep->m.ntasks)
    return;
  op_log(ep, "quiescent %s", ep->m.tasks[ti].id);
  ep->fakes[ti].qpending = 0;
  uvt_task_quiescent(ep->fakes[ti].task);
  m_quiescent(&ep->m, ti);
}

static void op_forget(episode_t *ep, rng_t *r) {
  const char *id;
  int ti, caller, want, got;
  id = pick_id(ep, r, &ti);
  caller = pick_caller(ep, r, ti);
  op_log(ep, "forget %s caller=%d", id, caller);
  inj_maybe_arm(r);
  got = uvt_forget(ep->reg, id, caller_ptr(ep, caller));
  inj_disarm(); /* no UV_ENOMEM documented */
  want = m_forget(&ep->m, id, caller);
  err_check(ep, "forget", want, got);
  g_stats.forgets += got == 0;
}

/* End every quiesce in progress (P-KILL-6), as a producer would once what
 * its work left is gone; the model follows when `with_model`.  Returns how
 * many. */
static int resolve_quiesces(episode_t *ep, int with_model) {
  int i, n = 0;
  for (i = 0; i < ep->nstarted; i++) {
    fake_t *fk = &ep->fakes[i];
    if (ep->m.tasks[i].thread || !fk->qpending)
      continue;
    op_log(ep, "quiescent %s (before or during close)", fk->id);
    fk->qpending = 0;
    uvt_task_quiescent(fk->task);
    if (with_model)
      m_quiescent(&ep->m, i);
    n++;
  }
  return n;
}

/* R-CLOSE-3, R-DONE-4: close the registry from inside one of our callbacks
 * (the next listener, wait, feed or dispose callback), provoked by settling
 * a live task.  The model cannot say where inside the dispatch the close
 * lands, so this ending checks invariants instead: the close callback runs
 * once, no listener or watcher runs once close began, every wait pending at
 * the trigger gets exactly one callback (status 0 with a terminal snapshot,
 * or UVT_EABORTED), every record is released once, the loop ends.
 * Returns 0 if nothing could provoke a callback (close directly then). */
static int close_from_callback(episode_t *ep, rng_t *r) {
  model_t *m = &ep->m;
  static const char *const where[] = {"", "listener", "wait", "feed"};
  int pending[M_WAITS], calls[M_WAITS];
  int i, target = -1, guard = 0;

  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].dropped && !m->tasks[i].thread &&
        m->tasks[i].status == UVT_RUNNING && !m->tasks[i].psettled)
      target = i;
  if (target < 0)
    return 0;
  ep->close_trigger = 1 + (int)rnd(r, 3);
  if ((ep->close_trigger == 1 && !m->listeners[0] && !m->listeners[1] &&
       !m->listeners[2]) ||
      (ep->close_trigger == 3 && !m->watchers[0] && !m->watchers[1])) {
    ep->close_trigger = 0;
    return 0;
  }
  if (ep->close_trigger == 2) {
    /* A wait of our own on the target, so the trigger surely fires. */
    int slot = -1;
    for (i = 0; i < M_WAITS; i++)
      if (m->waits[i].state == M_W_IDLE)
        slot = i;
    if (slot < 0) {
      ep->close_trigger = 0;
      return 0;
    }
    ep->waits[slot].data = ep;
    ep->wait_forget[slot] = 0;
    err_check(
        ep, "wait (close trigger)",
        m_wait(m, slot, m->tasks[target].id, m->tasks[target].owner, 0, 0),
        uvt_wait(ep->reg, &ep->waits[slot], m->tasks[target].id, 3600 * 1000,
                 caller_ptr(ep, m->tasks[target].owner), on_wait));
  }
  for (i = 0; i < M_WAITS; i++) {
    pending[i] = m->waits[i].state != M_W_IDLE;
    calls[i] = 0;
  }
  op_log(ep,
         "registry_close from the next %s callback, provoked by "
         "settling %s",
         where[ep->close_trigger], m->tasks[target].id);
  ep->nwev = 0;
  ep->nlev = 0;
  ep->nfev = 0;
  /* From here producers settle when cancelled, also when a listener
   * disposes their owner before the close. */
  ep->closing = 1;
  fake_settle(&ep->fakes[target], UVT_COMPLETED, "trigger", NULL, 0);
  fake_forget_handle(&ep->fakes[target]);
  while (ep->close_cbs == 0 && guard++ < 100000) {
    resolve_quiesces(ep, 0);
    uv_run(&ep->loop, UV_RUN_ONCE);
  }
  if (uv_run(&ep->loop, UV_RUN_DEFAULT) != 0)
    fail(ep, "uv_run after a close from a callback returned nonzero");
  if (!ep->close_began)
    fail(ep, "the %s callback never ran", where[ep->close_trigger]);
  if (ep->close_cbs != 1)
    fail(ep, "close from a callback: %d close callbacks", ep->close_cbs);
  if (ep->after_close_calls != 0)
    fail(ep, "%d listener/feed calls after close began (R-CLOSE-1)",
         ep->after_close_calls);
  for (i = 0; i < ep->nwev; i++) {
    m_wev_t *e = &ep->wev[i];
    calls[e->wait]++;
    if (e->status == 0 ? !e->has_snap || !e->snap.finished
                       : e->status != UVT_EABORTED || e->has_snap)
      fail(ep, "wait %d after a close from a callback: status %s", e->wait,
           uvt_err_name(e->status));
  }
  for (i = 0; i < M_WAITS; i++)
    if (calls[i] != pending[i])
      fail(ep, "wait %d: %d callbacks, expected %d", i, calls[i], pending[i]);
  ep->reg = NULL;
  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].thread && ep->fakes[i].released != 1)
      fail(ep, "%s: release hook calls after close: %d", m->tasks[i].id,
           ep->fakes[i].released);
  /* What the model says about settled hooks and agents no longer holds
   * exactly; the shared tail checks the agents left registered. */
  for (i = 0; i < m->ntasks; i++)
    m->tasks[i].settled_hooks = ep->fakes[i].settled_hooks;
  for (i = 0; i < M_AGENTS; i++) {
    /* An agent a listener disposed during the trigger: disposed once.
     * (After close every agent's id is NULL: the copies were the
     * registry's.) */
    if (ep->dispose_cbs[i] > 1 ||
        (ep->dispose_cbs[i] == 1 && m->agents[i].state == M_AG_FREE))
      fail(ep,
           "agent %d: %d dispose callbacks during a close from a "
           "callback",
           i, ep->dispose_cbs[i]);
    if (ep->dispose_cbs[i] == 0)
      continue;
    m->agents[i].state = M_AG_FREE;
    ep->dispose_cbs[i] = 0;
  }
  g_stats.closes_from_cb++;
  return 1;
}

/* The end of an episode: close the registry and run the loop to the end
 * (R-CLOSE-1, R-CLOSE-2), then late settles (R-DONE-2). */
static void episode_close(episode_t *ep, rng_t *r) {
  model_t *m = &ep->m;
  int i, again, guard = 0;

  drain(ep);
  compare_state(ep);
  /* Registry close does not cancel again what a disposal already
   * cancelled: settle those producers now so the close is not bounded by
   * the (long) grace.  Settling can make a listener dispose an agent, so go
   * round until nothing is left. */
  do {
    again = 0;
    for (i = 0; i < m->ntasks; i++) {
      m_task_t *t = &m->tasks[i];
      /* A thread task does not settle on cancel: unless the grace is short
       * (then close force-fails it), let it end now. */
      if (t->thread) {
        if (!t->dropped && !t->psettled && !m->short_grace) {
          settle_job(ep, i, UVT_COMPLETED, NULL, "before close");
          again = 1;
        }
        continue;
      }
      if (t->teardown && !t->dropped && !t->psettled) {
        op_log(ep, "settle %s (before close) status=killed", t->id);
        m_settle(m, i, UVT_KILLED, "late", NULL, 0);
        fake_settle(&ep->fakes[i], UVT_KILLED, "late", NULL, 0);
        again = 1;
      }
    }
    if (resolve_quiesces(ep, 1) > 0)
      again = 1;
    drain(ep);
  } while (again);
  drain(ep);
  compare_state(ep);

  if (chance(r, 25) && close_from_callback(ep, r))
    goto closed;

  op_log(ep, "registry_close");
  ep->closing = 1;
  err_check(ep, "registry_close", 0,
            uvt_registry_close(ep->reg, on_closed, ep));
  err_check(ep, "registry_close (again)", UVT_ECLOSING,
            uvt_registry_close(ep->reg, on_closed, ep));
  if (ep->close_cbs != 0)
    fail(ep, "registry_close: callback ran inside the call");
  m_close_begin(m);
  while (ep->close_cbs == 0 && guard++ < 100000) {
    resolve_quiesces(ep, 1);
    m_drain(m);
    uv_run(&ep->loop, UV_RUN_ONCE);
  }
  m_close_end(m);
  /* Calls from hooks during the close are made (and must not crash or
   * leak), but the model drops what is left in its own order at the end,
   * so their results are not compared. */
  ep->naev = 0;
  m->naev = 0;
  if (uv_run(&ep->loop, UV_RUN_DEFAULT) != 0)
    fail(ep, "uv_run after close returned nonzero (R-CLOSE-2)");
  if (ep->close_cbs != 1)
    fail(ep, "close callbacks: %d", ep->close_cbs);
  ep->reg = NULL;
  compare_events(ep);
closed:
  for (i = 0; i < m->ntasks; i++) {
    m_task_t *t = &m->tasks[i];
    fake_t *fk = &ep->fakes[i];
    if (t->thread)
      continue;
    if (fk->released != 1)
      fail(ep, "%s: release hook calls after close: %d", t->id, fk->released);
    if (fk->settled_hooks != t->settled_hooks)
      fail(ep, "%s: settled hook calls after close expected %d, got %d", t->id,
           t->settled_hooks, fk->settled_hooks);
  }

  /* Agents still registered: a dispose after close only calls back. */
  for (i = 0; i < M_AGENTS; i++) {
    if (m->agents[i].state == M_AG_REG) {
      op_log(ep, "agent_dispose slot=%d (after close)", i);
      err_check(ep, "agent_dispose after close", 0,
                uvt_agent_dispose(&ep->agents[i], on_disposed));
    } else if (m->agents[i].state == M_AG_DISPOSING) {
      fail(ep, "agent %d still disposing after close", i);
    }
  }
  if (uv_run(&ep->loop, UV_RUN_DEFAULT) != 0)
    fail(ep, "uv_run after the late disposals returned nonzero");
  for (i = 0; i < M_AGENTS; i++) {
    int want = m->agents[i].state == M_AG_REG ? 1 : 0;
    if (ep->dispose_cbs[i] != want)
      fail(ep, "agent %d dispose callbacks after close: expected %d, got %d", i,
           want, ep->dispose_cbs[i]);
  }
  if (uv_loop_close(&ep->loop) != 0)
    fail(ep, "uv_loop_close != 0 (L-1)");

  /* Producers that never settled settle now, after the registry is gone;
   * this frees their handles (R-DONE-2). */
  for (i = 0; i < m->ntasks; i++) {
    fake_t *fk = &ep->fakes[i];
    if (m->tasks[i].thread) {
      if (!ep->jobs[i].posted) {
        op_log(ep, "settle thread task %s (after close)", m->tasks[i].id);
        ep->jobs[i].status = UVT_COMPLETED;
        ep->jobs[i].posted = 1;
        uv_sem_post(&ep->jobs[i].go);
      }
      continue;
    }
    if (fk->settles == 0) {
      op_log(ep, "settle %s (after close)", m->tasks[i].id);
      fake_settle(fk, chance(r, 50) ? UVT_COMPLETED : UVT_FAILED, "late", NULL,
                  0);
    }
  }
}

/* One episode of at most `max_ops` operations; returns how many ran. */
static long run_episode(rng_t *r, long max_ops) {
  episode_t *ep = calloc(1, sizeof(*ep));
  uvt_options_t o;
  long n;
  int short_grace, k;

  if (ep == NULL)
    abort();
  short_grace = chance(r, 3) ? 5 : 0;
  uvt_options_init(&o);
  o.log = quiet_log;
  o.teardown_grace_ms = short_grace ? (uint64_t)short_grace : 10000;
  o.max_live_per_owner = chance(r, 30) ? 1 + rnd(r, 3) : 0;
  m_init(&ep->m, o.max_live_per_owner, short_grace);
  ep->m.strict_feed = g_strict_feed;
  if (uv_loop_init(&ep->loop) != 0)
    abort();
  if (uvt_registry_new(&ep->loop, &o, &ep->reg) != 0)
    abort();
  op_log(ep, "registry_new max_live_per_owner=%u teardown_grace_ms=%" PRIu64,
         o.max_live_per_owner, o.teardown_grace_ms);
  /* Usually start with a surface so starts get through. */
  if (chance(r, 85)) {
    op_log(ep, "surface_attach slot=0");
    err_check(ep, "surface_attach", m_surface_attach(&ep->m, 0),
              uvt_surface_attach(ep->reg, &ep->surfaces[0], "surface"));
  }

  /* Usually begin with two agents in different sessions. */
  if (chance(r, 80)) {
    op_log(ep, "agent_register slot=0 id=a0 session=s0");
    ep->agents[0].data = ep;
    err_check(ep, "agent_register", m_agent_register(&ep->m, 0, "a0", "s0"),
              uvt_agent_register(ep->reg, &ep->agents[0], "a0", "s0"));
    ep->ever_registered[0] = 1;
    op_log(ep, "agent_register slot=1 id=a1 session=s1");
    ep->agents[1].data = ep;
    err_check(ep, "agent_register", m_agent_register(&ep->m, 1, "a1", "s1"),
              uvt_agent_register(ep->reg, &ep->agents[1], "a1", "s1"));
    ep->ever_registered[1] = 1;
  }

  for (n = 0; n < max_ops && !r->exhausted; n++) {
    unsigned w = rnd(r, 100);
    ep->step = n;
    if (w < 20)
      op_start(ep, r);
    else if (w < 32)
      op_settle(ep, r);
    else if (w < 42)
      op_kill(ep, r);
    else if (w < 48)
      op_get(ep, r);
    else if (w < 53)
      op_list(ep, r);
    else if (w < 61)
      op_read(ep, r);
    else if (w < 69)
      op_wait(ep, r);
    else if (w < 74)
      op_abort(ep, r);
    else if (w < 76)
      op_wait_short(ep, r);
    else if (w < 80)
      op_emit(ep, r);
    else if (w < 82)
      op_toggle_cancel(ep, r);
    else if (w < 89)
      op_agent(ep, r);
    else if (w < 92)
      op_surface(ep, r);
    else if (w < 94)
      op_listener(ep, r);
    else if (w < 95)
      op_watch(ep, r);
    else if (w < 97)
      op_forget(ep, r);
    else if (w < 98)
      op_quiescent(ep, r);
    else {
      op_log(ep, "run loop");
      drain(ep);
    }
    if (chance(r, 50))
      drain(ep);
    compare_state(ep);
  }
  ep->step = n;
  episode_close(ep, r);
  /* Abandoned threads free their own context once their late settle is
   * done; wait for them before the jobs they read go away. */
  for (k = 0; k < 5000 && uvt__thread_live_contexts() != 0; k++)
    uv_sleep(1);
  if (uvt__thread_live_contexts() != 0)
    fail(ep, "%ld thread contexts still alive after close and late settles",
         uvt__thread_live_contexts());
  for (k = 0; k < M_TASKS; k++)
    if (ep->jobs[k].used)
      uv_sem_destroy(&ep->jobs[k].go);
  g_stats.force_failed += (long)ep->m.force_failed;
  free(ep);
  return n + 1;
}

#ifdef UVT_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rng_t r;
  uvt_replace_allocator(inj_malloc, inj_realloc, inj_calloc, free);
  memset(&r, 0, sizeof(r));
  r.bytes_mode = 1;
  r.data = data;
  r.len = size;
  run_episode(&r, 300);
  return 0;
}

#else

static long g_total_ops;

int main(int argc, char **argv) {
  uint64_t seed = 0;
  long ops = 200000;
  int have_seed = 0, i;
  rng_t r;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
      have_seed = 1;
    } else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) {
      ops = strtol(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--verbose") == 0) {
      g_verbose = 1;
    } else if (strcmp(argv[i], "--strict-feed") == 0) {
      g_strict_feed = 1;
    } else {
      fprintf(stderr,
              "usage: %s [--seed N] [--ops M] [--verbose] [--strict-feed]\n",
              argv[0]);
      return 2;
    }
  }
  if (!have_seed)
    seed = uv_hrtime() ^ ((uint64_t)uv_os_getpid() << 32);
  g_seed = seed;
  printf("fuzz-registry: seed=%" PRIu64 " ops=%ld\n", seed, ops);
  fflush(stdout);

  uvt_replace_allocator(inj_malloc, inj_realloc, inj_calloc, free);
  memset(&r, 0, sizeof(r));
  r.s = seed;
  while (g_total_ops < ops) {
    long left = ops - g_total_ops;
    long len = 20 + (long)rnd(&r, 120);
    g_episode++;
    long before = g_total_ops;
    g_total_ops += run_episode(&r, len < left ? len : left);
    if (g_total_ops / 1000000 != before / 1000000) {
      printf("fuzz-registry: %ld operations, no divergence so far\n",
             g_total_ops);
      fflush(stdout);
    }
  }
  printf("fuzz-registry: %ld operations in %ld episodes, no divergence\n",
         g_total_ops, g_episode);
  printf("  starts %ld (refused %ld), settles %ld (%ld from threads), "
         "kills %ld (failed %ld), reads %ld, non-empty lists %ld\n"
         "  refused foreign %ld, unknown id %ld, listener calls %ld, waits "
         "ok %ld / timed out %ld / aborted %ld, disposals %ld, "
         "force-failed %ld, feed changes %ld, forgets %ld\n"
         "  thread-producer tasks %ld (settled %ld), closes from a callback "
         "%ld, UV_ENOMEM with nothing changed %ld\n"
         "  calls from hooks and callbacks %ld, UV_EBUSY (handle in use) %ld\n",
         g_stats.starts, g_stats.start_errors, g_stats.settles,
         g_stats.thread_settles, g_stats.kills, g_stats.kill_errors,
         g_stats.reads, g_stats.lists, g_stats.foreign, g_stats.notask,
         g_stats.listener_calls, g_stats.wait_ok, g_stats.wait_timeout,
         g_stats.wait_aborted, g_stats.disposals, g_stats.force_failed,
         g_stats.feed, g_stats.forgets, g_stats.thread_tasks,
         g_stats.job_settles, g_stats.closes_from_cb, g_stats.enomem,
         g_stats.reentrant, g_stats.busy);
  return 0;
}

#endif
