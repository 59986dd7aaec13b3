/* The reference model: see model.h.  Every function is a direct reading of
 * a clause; the clause is named beside the code. */
#include "model.h"

#include <stdio.h>
#include <string.h>

const char *const m_kinds[M_KINDS] = {"fake", "job", "x"};

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap)
    n = cap - 1;
  memmove(dst, src, n);
  dst[n] = '\0';
}

void m_init(model_t *m, unsigned max_live, int short_grace) {
  memset(m, 0, sizeof(*m));
  m->dispatching = -1;
  m->max_live = max_live;
  m->short_grace = short_grace;
}

void m_events_clear(model_t *m) {
  m->nfev = 0;
  m->nlev = 0;
  m->nwev = 0;
  m->naev = 0;
  memset(m->dispose_cbs, 0, sizeof(m->dispose_cbs));
}

static int live(const m_task_t *t) {
  return t->status == UVT_RUNNING || t->status == UVT_STOPPING;
}

/* R-FEED-1: a transition is queued when it happens (if anyone watches and
 * close has not begun) and delivered by the next drain. */
static void transition(model_t *m, int ti, int which) {
  int w, any = 0;
  if (m->closing)
    return;
  for (w = 0; w < M_WATCHERS; w++)
    any |= m->watchers[w];
  if (!any)
    return;
  if (which == M_CH_STOPPING)
    m->tasks[ti].stopping_fed = 1;
  m->changes[m->nchanges].task = ti;
  m->changes[m->nchanges].which = which;
  m->changes[m->nchanges].status = m->tasks[ti].status;
  m->nchanges++;
}

/* running -> stopping (R-KILL-2, R-AGENT-1, R-CLOSE-1). */
static void stopping(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  int was_running = t->status == UVT_RUNNING;
  t->status = UVT_STOPPING;
  if (was_running || (!m->strict_feed && !t->stopping_fed))
    transition(m, ti, M_CH_STOPPING);
}

/* Lookups see neither dropped nor forgotten records (R-FORGET-2). */
int m_find(const model_t *m, const char *id) {
  int i;
  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].dropped && !m->tasks[i].hidden &&
        strcmp(m->tasks[i].id, id) == 0)
      return i;
  return -1;
}

/* A caller's session: registered (or disposing) agents have one; a NULL
 * caller, one never registered or one disposed has none. */
static const char *caller_session(const model_t *m, int caller) {
  if (caller < 0)
    return NULL;
  if (m->agents[caller].state == M_AG_FREE ||
      m->agents[caller].state == M_AG_DONE)
    return NULL;
  return m->agents[caller].session;
}

void m_snap_of(const model_t *m, int ti, m_snap_t *s) {
  const m_task_t *t = &m->tasks[ti];
  memset(s, 0, sizeof(*s));
  copy_str(s->id, sizeof(s->id), t->id);
  copy_str(s->kind, sizeof(s->kind), t->kind);
  copy_str(s->label, sizeof(s->label), t->label);
  s->has_session = t->owner >= 0;
  if (s->has_session)
    copy_str(s->session, sizeof(s->session), t->session);
  s->status = t->status;
  s->has_detail = t->has_detail;
  if (t->has_detail)
    copy_str(s->detail, sizeof(s->detail), t->detail);
  s->finished = !live(t);
  s->started = 1;
  s->reported = t->reported;
  s->has_kill_reason = t->has_kill_reason;
  if (t->has_kill_reason)
    copy_str(s->kill_reason, sizeof(s->kill_reason), t->kill_reason);
}

/* R-OWN-2: unknown ids first, then the session fence. */
int m_access(const model_t *m, const char *id, int caller, int *ti) {
  const char *session;
  int i = m_find(m, id);
  if (i < 0)
    return UVT_ENOTASK;
  if (m->tasks[i].owner >= 0) {
    session = caller_session(m, caller);
    if (session == NULL || strcmp(session, m->tasks[i].session) != 0)
      return UVT_EFOREIGN;
  }
  *ti = i;
  return 0;
}

static int valid_kind(const char *kind) {
  size_t n = strlen(kind), i;
  if (n < 1 || n > UVT_KIND_MAX)
    return 0;
  for (i = 0; i < n; i++)
    if (kind[i] <= ' ' || kind[i] > '~')
      return 0;
  return 1;
}

static int kind_index(const char *kind) {
  int k;
  for (k = 0; k < M_KINDS; k++)
    if (strcmp(m_kinds[k], kind) == 0)
      return k;
  return -1;
}

static unsigned live_in_bucket(const model_t *m, int owner) {
  unsigned n = 0;
  int i;
  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].dropped && m->tasks[i].owner == owner &&
        live(&m->tasks[i]))
      n++;
  return n;
}

static void record_aev(model_t *m, int ti, int where, int what, int err) {
  m_aev_t *e;
  if (m->naev >= (int)(sizeof(m->aev) / sizeof(m->aev[0])))
    return; /* the real side overflows at the same count and says so */
  e = &m->aev[m->naev++];
  e->task = ti;
  e->where = where;
  e->what = what;
  e->err = err;
}

/* ---- Agents: disposal completes once none of its tasks is left and no
 * start for it is in progress (R-AGENT-1, R-REENTER-1). */
static void agent_maybe_done(model_t *m, int slot) {
  int i;
  if (slot < 0 || m->agents[slot].state != M_AG_DISPOSING)
    return;
  if (m->pinned && m->starting_owner == slot)
    return;
  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].dropped && m->tasks[i].owner == slot)
      return;
  m->agents[slot].state = M_AG_DONE;
}

static void hook_act(model_t *m, int ti, int hook);
static void teardown_task(model_t *m, int ti, const char *reason);

static void drop(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  if (t->dropped)
    return;
  t->dropped = 1;
  t->on_sweep = 0;
  transition(m, ti, M_CH_DROPPED);
  t->releases++;
  hook_act(m, ti, M_HOOK_RELEASE);
  agent_maybe_done(m, t->owner);
}

/* ---- Quiescence (P-KILL-4, P-KILL-6). */

static int quiesce_call(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  if (t->qpending)
    return 1;
  if (t->force_failed || t->quiesce_mode == 0 || t->dropped)
    return 0;
  t->quiesces++;
  t->qpending = 1;
  t->in_quiesce = 1;
  hook_act(m, ti, M_HOOK_QUIESCE);
  t->in_quiesce = 0;
  if (t->quiesce_mode != 2)
    t->qpending = 0;
  return t->qpending;
}

static void quiesce_done(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  if (t->teardown && t->dispatched && !t->dropped)
    drop(m, ti);
}

/* S-9: a kill of an ended task while its quiesce is in progress asks the
 * hook again ("now"); not from inside the hook itself. */
static void quiesce_again(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  if (t->force_failed || t->quiesce_mode == 0 || t->dropped || t->in_quiesce)
    return;
  t->quiesces++;
  t->in_quiesce = 1;
  hook_act(m, ti, M_HOOK_QUIESCE);
  t->in_quiesce = 0;
  if (t->quiesce_mode != 2 || !t->qpending) {
    t->qpending = 0;
    quiesce_done(m, ti);
  }
}

static void after_terminal(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  if (!t->teardown || t->dropped || !t->dispatched)
    return;
  if (t->qpending || quiesce_call(m, ti))
    return; /* waits for m_quiescent() */
  drop(m, ti);
}

void m_quiescent(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  if (!t->qpending)
    return;
  t->qpending = 0;
  if (t->in_quiesce)
    return;
  quiesce_done(m, ti);
}

/* ---- Start (R-START-1, R-START-2, R-START-4, R-OWN-1, R-LIMIT-1,
 * R-REENTER-1). */

/* What a start from a hook starts (fuzz-registry.c's start_from_hook). */
static const m_fake_cfg_t plain_fake = {0, 0, 0, 1, 0, -1, 0, -1};
static int do_act(model_t *m, int ti, int act, int other, int owner,
                  const char *self);

static int start(model_t *m, const char *kind, const char *label, int owner,
                 const m_fake_cfg_t *cfg, int *ti) {
  m_task_t *t;
  int k, i, err;

  if (m->closing)
    return UVT_ECLOSING;
  if (!m->surfaces[0] && !m->surfaces[1])
    return UVT_ENOSURFACE;
  if (!valid_kind(kind) || label[0] == '\0')
    return UV_EINVAL;
  if (owner >= 0) {
    if (m->agents[owner].state == M_AG_FREE ||
        m->agents[owner].state == M_AG_DONE)
      return UVT_ESTALE;
    if (m->agents[owner].state == M_AG_DISPOSING)
      return UVT_ECLOSING;
  }
  if (m->max_live > 0 && live_in_bucket(m, owner) >= m->max_live)
    return UVT_ELIMIT;

  /* run: the fake acts first (the owner is pinned meanwhile), then fails
   * if told to. */
  if (cfg->act_hook == M_HOOK_RUN) {
    m->pinned = 1;
    m->starting_owner = owner;
    err = do_act(m, m->ntasks, cfg->act, cfg->act_other, owner, NULL);
    record_aev(m, m->ntasks, M_WHERE_HOOK + M_HOOK_RUN, cfg->act, err);
    m->pinned = 0;
  }
  if (cfg->run_error != 0) {
    agent_maybe_done(m, owner);
    return cfg->run_error;
  }

  k = kind_index(kind);
  if (k < 0)
    return UV_EINVAL; /* the fuzzer only starts the kinds in m_kinds */
  i = m->ntasks++;
  t = &m->tasks[i];
  memset(t, 0, sizeof(*t));
  t->used = 1;
  snprintf(t->id, sizeof(t->id), "%s-%u", kind, ++m->kind_counter[k]);
  copy_str(t->kind, sizeof(t->kind), kind);
  copy_str(t->label, sizeof(t->label), label);
  t->owner = owner;
  if (owner >= 0)
    copy_str(t->session, sizeof(t->session), m->agents[owner].session);
  t->stream = cfg->stream;
  t->status = UVT_RUNNING;
  t->cancel_error = cfg->cancel_error;
  t->settle_on_cancel = cfg->settle_on_cancel;
  t->quiesce_mode = cfg->quiesce_mode;
  t->act_hook = cfg->act_hook;
  t->act = cfg->act;
  t->act_other = cfg->act_other;
  t->acted = cfg->act_hook == M_HOOK_RUN;
  m->started++;
  transition(m, i, M_CH_REGISTERED);
  *ti = i;
  /* A disposal begun inside run gets the new task at once. */
  if (owner >= 0 && m->agents[owner].state == M_AG_DISPOSING)
    teardown_task(m, i, "owner disposed");
  return 0;
}

int m_start(model_t *m, const char *kind, const char *label, int owner,
            const m_fake_cfg_t *cfg, int *ti) {
  int was = m->starting, err;
  m->starting = 1;
  err = start(m, kind, label, owner, cfg, ti);
  m->starting = was;
  return err;
}

/* R-GET-1 */
int m_get(const model_t *m, const char *id, int caller, m_snap_t *out) {
  int ti, err = m_access(m, id, caller, &ti);
  if (err == 0)
    m_snap_of(m, ti, out);
  return err;
}

/* R-LIST-1 */
int m_list(const model_t *m, int caller, int *out, int *n) {
  const char *session = caller_session(m, caller);
  int i;
  *n = 0;
  for (i = 0; i < m->ntasks; i++) {
    const m_task_t *t = &m->tasks[i];
    if (t->dropped || t->hidden)
      continue;
    if (t->owner < 0 || (session != NULL && strcmp(session, t->session) == 0))
      out[(*n)++] = i;
  }
  return 0;
}

/* R-READ-1..3; R-REENTER-1: UV_EBUSY inside its own read_output. */
int m_read(model_t *m, const char *id, int caller, char *text, size_t *len,
           m_snap_t *snap) {
  m_task_t *t;
  int ti, err = m_access(m, id, caller, &ti);
  if (err != 0)
    return err;
  t = &m->tasks[ti];
  if (t->in_read)
    return UV_EBUSY;
  *len = 0;
  if (live(t)) {
    m_snap_of(m, ti, snap); /* taken before the producer's hook runs */
    if (t->stream && !t->psettled) {
      memcpy(text, t->pending, t->pending_len);
      *len = t->pending_len;
      t->pending_len = 0;
      t->in_read = 1;
      hook_act(m, ti, M_HOOK_READ);
      t->in_read = 0;
    }
  } else {
    t->reported = 1;
    memcpy(text, t->output, t->output_len);
    *len = t->output_len;
    if (t->stream)
      t->output_len = 0;
    m_snap_of(m, ti, snap);
  }
  return 0;
}

static void queue_outcome(model_t *m, int ti, uvt_status_t status,
                          const char *detail, const char *output,
                          size_t output_len) {
  m_task_t *t = &m->tasks[ti];
  t->psettled = 1;
  if (t->stream)
    t->pending_len = 0; /* emptied into the outcome */
  if (t->dropped)
    return; /* a late settle: harmless (R-DONE-2) */
  t->queued = 1;
  t->q_status = status;
  t->q_has_detail = detail != NULL;
  if (detail != NULL)
    copy_str(t->q_detail, sizeof(t->q_detail), detail);
  if (output_len > sizeof(t->q_output))
    output_len = sizeof(t->q_output);
  if (output_len > 0)
    memcpy(t->q_output, output, output_len);
  t->q_output_len = output_len;
  m->queue[m->nqueue++] = ti;
}

void m_settle(model_t *m, int ti, uvt_status_t status, const char *detail,
              const char *output, size_t output_len) {
  if (m->tasks[ti].psettled)
    return; /* R-DONE-2: the first outcome wins */
  queue_outcome(m, ti, status, detail, output, output_len);
}

void m_emit(model_t *m, int ti, const char *text) {
  m_task_t *t = &m->tasks[ti];
  size_t n = strlen(text);
  if (n > sizeof(t->pending) - t->pending_len)
    n = sizeof(t->pending) - t->pending_len;
  memcpy(t->pending + t->pending_len, text, n);
  t->pending_len += n;
}

/* The fake producer's cancel hook, as fuzz-registry.c implements it. */
static int fake_cancel(model_t *m, int ti, const char *reason) {
  m_task_t *t = &m->tasks[ti];
  t->cancels++;
  if (t->thread)
    return 0; /* sets the flag the function reads; never settles here */
  hook_act(m, ti, M_HOOK_CANCEL);
  if (t->cancel_error != 0)
    return t->cancel_error;
  if (!t->psettled &&
      (t->settle_on_cancel || (m->closing && !m->short_grace) ||
       (m->short_grace && strcmp(reason, "owner disposed") == 0)))
    queue_outcome(m, ti, UVT_KILLED, "cancelled", NULL, 0);
  return 0;
}

static void force_fail(model_t *m, int ti, const char *detail) {
  m_task_t *t = &m->tasks[ti];
  int w;
  t->status = UVT_FAILED;
  t->has_detail = 1;
  copy_str(t->detail, sizeof(t->detail), detail);
  t->output_len = 0;
  t->force_failed = 1;
  t->dispatch_due = 1;
  m->dq[m->ndq++] = ti;
  /* R-DONE-3: the pending waits are counted as the end is recorded. */
  for (w = 0; w < M_WAITS; w++)
    if (m->waits[w].state == M_W_PENDING && m->waits[w].task == ti) {
      m->waits[w].state = M_W_COUNTED;
      t->reported = 1;
    }
  transition(m, ti, M_CH_TERMINAL);
  m->force_failed++;
  m->failed++;
}

/* R-AGENT-3 */
static void cancel_failed(model_t *m, int ti, int err) {
  char detail[160];
  if (!live(&m->tasks[ti]))
    return;
  snprintf(detail, sizeof(detail),
           "cancel failed during teardown; work may be orphaned: %s",
           uvt_err_name(err));
  force_fail(m, ti, detail);
}

/* R-REENTER-1: one cancel hook call at a time per task; a teardown begun
 * inside it joins the running call. */
static int task_cancel(model_t *m, int ti, const char *reason) {
  m_task_t *t = &m->tasks[ti];
  int err;
  if (t->in_cancel) {
    t->cancel_deferred = 1;
    return 0;
  }
  t->in_cancel = 1;
  err = fake_cancel(m, ti, reason);
  t->in_cancel = 0;
  if (t->cancel_deferred) {
    t->cancel_deferred = 0;
    if (err != 0)
      cancel_failed(m, ti, err);
  }
  return err;
}

/* R-KILL-1..4, P-KILL-6 */
int m_kill(model_t *m, const char *id, int caller, const char *reason,
           uvt_kill_result_t *result) {
  m_task_t *t;
  int ti, err = m_access(m, id, caller, &ti);
  if (err != 0)
    return err;
  t = &m->tasks[ti];
  if (t->in_cancel)
    return UV_EBUSY;
  if (reason == NULL)
    reason = "killed";
  if (!live(t)) {
    t->reported = 1;
    m->kills++; /* metrics.kills: "uvt_kill() calls that returned 0" */
    *result = UVT_KILL_ALREADY_TERMINAL;
    if (t->qpending)
      quiesce_again(m, ti);
    else if (!quiesce_call(m, ti))
      quiesce_done(m, ti);
    return 0;
  }
  if (!t->psettled) {
    err = task_cancel(m, ti, reason);
    if (err != 0)
      return err; /* R-KILL-1: untouched */
  }
  if (live(t))
    stopping(m, ti);
  t->reported = 1;
  if (!t->has_kill_reason) {
    t->has_kill_reason = 1;
    copy_str(t->kill_reason, sizeof(t->kill_reason), reason);
  }
  m->kills++;
  *result = UVT_KILL_REQUESTED;
  return 0;
}

/* R-WAIT-1, R-WAIT-2, R-BUSY-1 */
int m_wait(model_t *m, int slot, const char *id, int caller, int timeout_zero,
           int forget) {
  m_task_t *t;
  int ti, err;
  if (m->waits[slot].state != M_W_IDLE)
    return UV_EBUSY;
  err = m_access(m, id, caller, &ti);
  if (err != 0)
    return err;
  if (timeout_zero)
    return UV_EINVAL;
  if (m->closing)
    return UVT_ECLOSING;
  t = &m->tasks[ti];
  m->waits[slot].task = ti;
  m->waits[slot].seq = ++m->wseq;
  m->waits[slot].caller = caller;
  m->waits[slot].forget = forget;
  if (live(t)) {
    m->waits[slot].state = M_W_PENDING;
  } else {
    t->reported = 1;
    m->waits[slot].state = M_W_DUE_OK;
    m->wq[m->nwq++] = slot;
  }
  return 0;
}

/* R-WAIT-5 */
int m_wait_abort(model_t *m, int slot) {
  m_wait_t *w = &m->waits[slot];
  switch (w->state) {
  case M_W_PENDING:
    w->state = M_W_DUE_ABORT;
    m->wq[m->nwq++] = slot;
    return 0;
  case M_W_COUNTED:
  case M_W_DUE_OK:
    return 0;
  default:
    return UV_EINVAL;
  }
}

/* R-WAIT-4 */
int m_wait_short(model_t *m, const char *id, int caller, int *status,
                 m_snap_t *snap) {
  int ti, err = m_access(m, id, caller, &ti);
  if (err != 0)
    return err;
  if (live(&m->tasks[ti])) {
    *status = UVT_EWAITTIMEOUT;
  } else {
    m->tasks[ti].reported = 1;
    *status = 0;
  }
  m_snap_of(m, ti, snap);
  return 0;
}

/* R-OWN-3, R-BUSY-1 */
int m_agent_register(model_t *m, int slot, const char *id,
                     const char *session) {
  int i;
  if (m->agents[slot].state != M_AG_FREE)
    return UV_EBUSY;
  if (m->closing)
    return UVT_ECLOSING;
  for (i = 0; i < M_AGENTS; i++)
    if (m->agents[i].state != M_AG_FREE && m->agents[i].state != M_AG_DONE &&
        strcmp(m->agents[i].id, id) == 0)
      return UV_EEXIST;
  m->agents[slot].state = M_AG_REG;
  copy_str(m->agents[slot].id, sizeof(m->agents[slot].id), id);
  copy_str(m->agents[slot].session, sizeof(m->agents[slot].session), session);
  return 0;
}

/* Cancel a live task for a teardown (a failing cancel force-fails it,
 * R-AGENT-3); a terminal one is dropped once dispatched and quiet. */
static void teardown_task(model_t *m, int ti, const char *reason) {
  m_task_t *t = &m->tasks[ti];
  int err;
  if (t->teardown || t->dropped)
    return;
  t->teardown = 1;
  t->reported = 1;
  if (!live(t)) {
    after_terminal(m, ti);
    return;
  }
  if (!t->has_kill_reason) {
    t->has_kill_reason = 1;
    copy_str(t->kill_reason, sizeof(t->kill_reason), reason);
  }
  stopping(m, ti);
  if (t->psettled)
    return;
  err = task_cancel(m, ti, reason);
  if (err != 0)
    cancel_failed(m, ti, err);
}

/* Collect first (tasks on another sweep are left to it), then tear down. */
static void sweep(model_t *m, int owner, const char *reason) {
  int list[M_TASKS], n = 0, i;
  for (i = 0; i < m->ntasks; i++) {
    m_task_t *t = &m->tasks[i];
    if (t->dropped || t->teardown || t->on_sweep)
      continue;
    if (owner >= 0 && t->owner != owner)
      continue;
    t->on_sweep = 1;
    list[n++] = i;
  }
  for (i = 0; i < n; i++) {
    m_task_t *t = &m->tasks[list[i]];
    if (!t->on_sweep)
      continue; /* dropped meanwhile */
    t->on_sweep = 0;
    teardown_task(m, list[i], reason);
  }
}

/* R-AGENT-1..3 */
int m_agent_dispose(model_t *m, int slot) {
  if (m->agents[slot].state == M_AG_FREE)
    return UV_EINVAL;
  if (m->agents[slot].state != M_AG_REG)
    return UVT_ECLOSING;
  m->agents[slot].state = M_AG_DISPOSING;
  sweep(m, slot, "owner disposed");
  agent_maybe_done(m, slot);
  return 0;
}

int m_surface_attach(model_t *m, int slot) {
  if (m->surfaces[slot])
    return UV_EBUSY; /* R-BUSY-1 */
  if (m->closing)
    return UVT_ECLOSING;
  m->surfaces[slot] = 1;
  return 0;
}

void m_surface_detach(model_t *m, int slot) {
  m->surfaces[slot] = 0;
}

int m_listener_start(model_t *m, int slot, int reaction) {
  if (m->listeners[slot])
    return UV_EBUSY; /* R-BUSY-1 */
  if (m->closing)
    return UVT_ECLOSING;
  m->listeners[slot] = 1;
  m->lseq[slot] = ++m->lseq_next;
  m->reaction[slot] = reaction;
  return 0;
}

void m_listener_stop(model_t *m, int slot) {
  m->listeners[slot] = 0;
}

int m_watch_start(model_t *m, int slot, int forget) {
  if (m->watchers[slot])
    return UV_EBUSY; /* R-BUSY-1 */
  if (m->closing)
    return UVT_ECLOSING;
  m->watchers[slot] = 1;
  m->watch_forget[slot] = forget;
  m->watch_seq[slot] = ++m->lseq_next;
  return 0;
}

void m_watch_stop(model_t *m, int slot) {
  m->watchers[slot] = 0;
}

/* R-FORGET-1, R-FORGET-2: out of lookups now; dropped once dispatched and
 * quiet, by whichever teardown holds it. */
int m_forget(model_t *m, const char *id, int caller) {
  m_task_t *t;
  int ti, err = m_access(m, id, caller, &ti);
  if (err != 0)
    return err;
  t = &m->tasks[ti];
  if (live(t))
    return UV_EBUSY;
  t->hidden = 1;
  if (!t->teardown) {
    t->teardown = 1;
    after_terminal(m, ti);
  }
  return 0;
}

/* What a fake does from inside a hook (fuzz-registry.c's do_act mirrors
 * it).  `self` is NULL before the task has an id. */
static int do_act(model_t *m, int ti, int act, int other, int owner,
                  const char *self) {
  uvt_kill_result_t kr;
  char text[M_TEXT];
  size_t len;
  m_snap_t snap;
  int nti;
  switch (act) {
  case M_ACT_DISPOSE_OWNER:
    return owner >= 0 ? m_agent_dispose(m, owner) : 0;
  case M_ACT_START:
    if (m->starting || m->ntasks >= M_TASKS)
      return M_ACT_SKIPPED;
    return m_start(m, "x", "L", -1, &plain_fake, &nti);
  case M_ACT_KILL_SELF:
    return self == NULL ? UV_EINVAL
                        : m_kill(m, self, owner, "from a hook", &kr);
  case M_ACT_FORGET_SELF:
    return self == NULL ? UV_EINVAL : m_forget(m, self, owner);
  case M_ACT_READ_SELF:
    return self == NULL ? UV_EINVAL : m_read(m, self, owner, text, &len, &snap);
  case M_ACT_KILL_OTHER:
    return other < 0 ? 0
                     : m_kill(m, m->tasks[other].id, m->tasks[other].owner,
                              "from a hook", &kr);
  case M_ACT_FORGET_OTHER:
    return other < 0 ? 0
                     : m_forget(m, m->tasks[other].id, m->tasks[other].owner);
  case M_ACT_QUIESCENT:
    m_quiescent(m, ti);
    return 0;
  }
  return 0;
}

static void hook_act(model_t *m, int ti, int hook) {
  m_task_t *t = &m->tasks[ti];
  int err;
  if (t->thread || t->act_hook != hook || t->acted)
    return;
  t->acted = 1;
  err = do_act(m, ti, t->act, t->act_other, t->owner, t->id);
  record_aev(m, ti, M_WHERE_HOOK + hook, t->act, err);
}

/* Deliver the transitions queued when this round began: the snapshot shows
 * the transition's status, its other fields as they are now.  A watcher
 * told about an end may forget the task (R-FORGET-2). */
static void deliver_changes(model_t *m) {
  int n = m->nchanges, c, i, w;
  int order[M_WATCHERS];
  for (i = 0; i < M_WATCHERS; i++)
    order[i] = i;
  for (i = 1; i < M_WATCHERS; i++)
    for (c = i; c > 0 && m->watch_seq[order[c]] < m->watch_seq[order[c - 1]];
         c--) {
      int x = order[c];
      order[c] = order[c - 1];
      order[c - 1] = x;
    }
  for (c = 0; c < n; c++) {
    for (i = 0; i < M_WATCHERS; i++) {
      m_fev_t *e;
      int ti = m->changes[c].task;
      w = order[i];
      if (!m->watchers[w] || m->closing)
        continue;
      e = &m->fev[m->nfev++];
      e->watcher = w;
      e->task = ti;
      e->which = m->changes[c].which;
      m_snap_of(m, ti, &e->snap);
      e->snap.status = m->changes[c].status;
      if (m->watch_forget[w] && e->which == M_CH_TERMINAL)
        record_aev(m, ti, M_WHERE_WATCH + w, 0,
                   m_forget(m, m->tasks[ti].id, m->tasks[ti].owner));
    }
  }
  memmove(m->changes, m->changes + n,
          (size_t)(m->nchanges - n) * sizeof(m->changes[0]));
  m->nchanges -= n;
}

static void wait_event(model_t *m, int slot, int status, int ti) {
  m_wev_t *e = &m->wev[m->nwev++];
  memset(e, 0, sizeof(*e));
  e->wait = slot;
  e->status = status;
  e->has_snap = ti >= 0;
  if (ti >= 0)
    m_snap_of(m, ti, &e->snap);
  m->waits[slot].state = M_W_IDLE;
  if (status == 0 && m->waits[slot].forget)
    record_aev(m, ti, M_WHERE_WAIT + slot, 0,
               m_forget(m, m->tasks[ti].id, m->waits[slot].caller));
}

/* R-DONE-3: reported if a wait is counted, then listeners, then waits. */
static void dispatch(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  int w, l;
  t->dispatch_due = 0;
  m->dispatching = ti;
  for (w = 0; w < M_WAITS; w++)
    if (m->waits[w].state == M_W_PENDING && m->waits[w].task == ti) {
      m->waits[w].state = M_W_COUNTED;
      t->reported = 1;
    }
  if (!m->closing) {
    int order[M_LISTENERS], n = 0, i, j;
    /* Listeners run in start order. */
    for (l = 0; l < M_LISTENERS; l++)
      if (m->listeners[l])
        order[n++] = l;
    for (i = 1; i < n; i++)
      for (j = i; j > 0 && m->lseq[order[j]] < m->lseq[order[j - 1]]; j--) {
        int x = order[j];
        order[j] = order[j - 1];
        order[j - 1] = x;
      }
    for (i = 0; i < n; i++) {
      m_lev_t *e = &m->lev[m->nlev++];
      int err = 0;
      l = order[i];
      e->listener = l;
      e->task = ti;
      e->owner = t->owner;
      m_snap_of(m, ti, &e->snap);
      if (m->reaction[l] == M_REACT_READ) {
        char text[M_TEXT];
        size_t len;
        m_snap_t s;
        err = m_read(m, t->id, t->owner, text, &len, &s);
      } else if (m->reaction[l] == M_REACT_KILL) {
        uvt_kill_result_t kr;
        err = m_kill(m, t->id, t->owner, "from a listener", &kr);
      } else if (m->reaction[l] == M_REACT_DISPOSE) {
        if (t->owner >= 0)
          err = m_agent_dispose(m, t->owner); /* R-CLOSE-3 */
      } else if (m->reaction[l] == M_REACT_FORGET) {
        err = m_forget(m, t->id, t->owner); /* R-FORGET-2 */
      }
      if (m->reaction[l] != M_REACT_NONE)
        record_aev(m, ti, M_WHERE_LISTENER + l, m->reaction[l], err);
    }
  }
  /* Counted waits, in the order they were submitted. */
  for (;;) {
    int next = -1;
    for (w = 0; w < M_WAITS; w++)
      if (m->waits[w].state == M_W_COUNTED && m->waits[w].task == ti &&
          (next < 0 || m->waits[w].seq < m->waits[next].seq))
        next = w;
    if (next < 0)
      break;
    wait_event(m, next, 0, ti);
  }
  m->dispatching = -1;
  t->dispatched = 1;
  after_terminal(m, ti);
}

static void apply(model_t *m, int ti) {
  m_task_t *t = &m->tasks[ti];
  int w;
  t->queued = 0;
  if (t->dropped || !live(t))
    return; /* force-failed first: the outcome is ignored (R-DONE-2) */
  t->status = t->q_status;
  t->has_detail = t->q_has_detail;
  copy_str(t->detail, sizeof(t->detail), t->q_detail);
  memcpy(t->output, t->q_output, t->q_output_len);
  t->output_len = t->q_output_len;
  for (w = 0; w < M_WAITS; w++)
    if (m->waits[w].state == M_W_PENDING && m->waits[w].task == ti) {
      m->waits[w].state = M_W_COUNTED;
      t->reported = 1;
    }
  transition(m, ti, M_CH_TERMINAL);
  if (t->status == UVT_COMPLETED)
    m->completed++;
  else if (t->status == UVT_KILLED)
    m->killed++;
  else
    m->failed++;
  t->settled_hooks++;
  hook_act(m, ti, M_HOOK_SETTLED);
  dispatch(m, ti);
}

/* The loop, run until quiet, as rounds of the registry's async callback:
 * outcomes queued when the round began (listeners, then counted waits),
 * then records made terminal inside a call (force-fails), then waits that
 * were due anyway, then finished disposals, then the change feed.  What
 * one of these steps queues for a step already taken waits for the next
 * round, each queue in the order things were queued. */
void m_drain(model_t *m) {
  int a, q, n;

  do {
    n = m->nqueue;
    for (q = 0; q < n; q++)
      apply(m, m->queue[q]);
    memmove(m->queue, m->queue + n, (size_t)(m->nqueue - n) * sizeof(int));
    m->nqueue -= n;
    n = m->ndq;
    for (q = 0; q < n; q++)
      if (m->tasks[m->dq[q]].dispatch_due && !m->tasks[m->dq[q]].dropped)
        dispatch(m, m->dq[q]);
    memmove(m->dq, m->dq + n, (size_t)(m->ndq - n) * sizeof(int));
    m->ndq -= n;
    n = m->nwq;
    for (q = 0; q < n; q++) {
      int w = m->wq[q];
      if (m->waits[w].state == M_W_DUE_ABORT)
        wait_event(m, w, UVT_EABORTED, -1);
      else if (m->waits[w].state == M_W_DUE_OK)
        wait_event(m, w, 0, m->waits[w].task);
    }
    memmove(m->wq, m->wq + n, (size_t)(m->nwq - n) * sizeof(int));
    m->nwq -= n;
    /* R-AGENT-1: the callback once every task of the agent is dropped. */
    for (a = 0; a < M_AGENTS; a++) {
      if (m->agents[a].state != M_AG_DONE)
        continue;
      memset(&m->agents[a], 0, sizeof(m->agents[a]));
      m->dispose_cbs[a]++;
    }
    deliver_changes(m);
  } while (m->nqueue > 0 || m->ndq > 0 || m->nwq > 0 || m->nchanges > 0);
}

/* R-CLOSE-1: listeners first (none runs from now on), cancel every live task
 * not already cancelled by a disposal, settle or force-fail, deliver
 * pending waits, drop every record once quiet.  Between the two halves
 * the fuzzer ends the quiesces the close started (m_quiescent). */
void m_close_begin(model_t *m) {
  char detail[160];
  int list[M_TASKS], n = 0, i;
  m->closing = 1;
  for (i = 0; i < m->ntasks; i++) {
    m_task_t *t = &m->tasks[i];
    if (t->dropped || t->teardown || t->on_sweep)
      continue;
    t->on_sweep = 1;
    list[n++] = i;
  }
  for (i = 0; i < n; i++) {
    m_task_t *t = &m->tasks[list[i]];
    int stubborn;
    if (!t->on_sweep)
      continue;
    t->on_sweep = 0;
    stubborn = live(t) && !t->psettled && t->cancel_error == 0 &&
               !t->settle_on_cancel && m->short_grace;
    teardown_task(m, list[i], "tasks service disposed");
    if (stubborn && live(t) && !t->psettled) {
      snprintf(detail, sizeof(detail),
               "did not stop within %u ms of cancel; work may be orphaned",
               (unsigned)m->short_grace);
      force_fail(m, list[i], detail);
    }
  }
  m_drain(m);
}

void m_close_end(model_t *m) {
  int i;
  m_drain(m);
  for (i = 0; i < m->ntasks; i++)
    drop(m, i);
}

void m_close(model_t *m) {
  m_close_begin(m);
  m_close_end(m);
}

uint64_t m_live(const model_t *m) {
  uint64_t n = 0;
  int i;
  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].dropped && live(&m->tasks[i]))
      n++;
  return n;
}

uint64_t m_records(const model_t *m) {
  uint64_t n = 0;
  int i;
  for (i = 0; i < m->ntasks; i++)
    if (!m->tasks[i].dropped)
      n++;
  return n;
}
