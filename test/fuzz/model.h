/* A reference model of the registry's observable behaviour, for the
 * model-based fuzzer (fuzz-registry.c).
 *
 * It is deliberately naive: fixed arrays, linear scans, no allocation, one
 * function per operation written straight from the contract and header.  It
 * also simulates the fuzzer's fake producers (their cancel behaviour, their
 * unread stream output), because the registry's behaviour depends on them.
 *
 * Readings of the contract the model fixes (where it leaves a choice):
 *  - after a producer called uvt_task_settle() (its outcome queued, not yet
 *    applied), a kill or teardown does not call cancel again;
 *  - a wait on a terminal task marks it reported at the call; aborting it
 *    before its callback still delivers status 0 (the waiter was counted);
 *  - agent disposal drops each of its tasks as soon as it is terminal and
 *    dispatched; registry close does not cancel a task a disposal already
 *    cancelled;
 *  - a force-failed record reaches listeners and waits like any other
 *    terminal record; the producer's `settled` hook is not called for it;
 *  - (v2) a teardown's cancel that begins inside the task's own cancel hook
 *    is that running call; the fuzzer's fakes act inside a hook at the
 *    same point as the model (run: before run_error is returned; cancel:
 *    before cancel_error or settling; read_output: after appending;
 *    settled, quiesce, release: first thing);
 *  - (v2) a start from inside a hook while another start is in progress is
 *    not tried (the fuzzer's fake slots are numbered by commit order).
 */
#ifndef UVTASKS_FUZZ_MODEL_H
#define UVTASKS_FUZZ_MODEL_H

#include <stddef.h>

#include "uvtasks.h"

#define M_AGENTS 4
#define M_SURFACES 2
#define M_LISTENERS 3
#define M_WAITS 8
#define M_TASKS 64
#define M_KINDS 3
#define M_WATCHERS 2

/* Change-feed transitions (R-FEED-1). */
enum { M_CH_REGISTERED = 0, M_CH_STOPPING, M_CH_TERMINAL, M_CH_DROPPED };
#define M_TEXT 512

/* A snapshot reduced to what is compared. */
typedef struct {
  char id[UVT_ID_MAX];
  char kind[UVT_KIND_MAX + 1];
  char label[64];
  int has_session;
  char session[16];
  uvt_status_t status;
  int has_detail;
  char detail[160];
  int finished; /* finished_at_ms != 0 */
  int started;  /* started_at_ms > 0 */
  int reported;
  int has_kill_reason;
  char kill_reason[64];
} m_snap_t;

/* DONE: disposal finished, its callback still to come (R-BUSY-1). */
enum { M_AG_FREE = 0, M_AG_REG, M_AG_DISPOSING, M_AG_DONE };

/* A listener's reaction to a call: nothing, read the task, kill it. */
enum {
  M_REACT_NONE = 0,
  M_REACT_READ,
  M_REACT_KILL,
  M_REACT_DISPOSE, /* dispose the task's owner agent */
  M_REACT_FORGET,  /* forget the task (R-FORGET-2) */
  M_REACTIONS
};

/* The hooks of a fake producer, and what it may do from inside one
 * (R-REENTER-1). */
enum {
  M_HOOK_RUN = 0,
  M_HOOK_CANCEL,
  M_HOOK_READ,
  M_HOOK_SETTLED,
  M_HOOK_QUIESCE,
  M_HOOK_RELEASE,
  M_HOOKS
};
enum {
  M_ACT_DISPOSE_OWNER = 0,
  M_ACT_START, /* an unowned task, kind "x": see model.h's top */
  M_ACT_KILL_SELF,
  M_ACT_FORGET_SELF,
  M_ACT_READ_SELF,
  M_ACT_KILL_OTHER,
  M_ACT_FORGET_OTHER,
  M_ACT_QUIESCENT, /* uvt_task_quiescent() from inside the quiesce hook */
  M_ACTS
};
/* A start from a hook while another start is in progress: not tried. */
#define M_ACT_SKIPPED 777

/* Where a call from inside our code was made, for m_aev_t. */
enum {
  M_WHERE_HOOK = 0,                              /* + M_HOOK_* */
  M_WHERE_LISTENER = M_WHERE_HOOK + M_HOOKS,     /* + listener slot */
  M_WHERE_WAIT = M_WHERE_LISTENER + M_LISTENERS, /* + wait slot */
  M_WHERE_WATCH = M_WHERE_WAIT + M_WAITS         /* + watcher slot */
};

/* A call made from inside a hook or a callback, and what it returned. */
typedef struct {
  int task;
  int where;
  int what;
  int err;
} m_aev_t;

typedef struct {
  int state;
  char id[16];
  char session[16];
} m_agent_t;

typedef struct {
  int used;
  char id[UVT_ID_MAX];
  char kind[UVT_KIND_MAX + 1];
  char label[64];
  int owner; /* agent slot, -1 = unowned */
  char session[16];
  int stream;
  int thread;     /* a uvt_thread_start() task: cancel only sets its flag */
  int hidden;     /* forgotten: out of lookups, dropped later (R-FORGET-2) */
  int dispatched; /* the dispatch of its end is over */
  /* Registry side. */
  uvt_status_t status;
  int has_detail;
  char detail[160];
  char output[M_TEXT]; /* final output, or unread remainder (stream) */
  size_t output_len;
  int reported;
  int has_kill_reason;
  char kill_reason[64];
  int teardown;     /* taken by a disposal (or a forget) */
  int on_sweep;     /* collected by a disposal's sweep, not torn down yet */
  int stopping_fed; /* a stopping change was queued */
  int force_failed;
  int dropped;
  int dispatch_due; /* force-failed, dispatch at the next drain */
  /* Producer side (the fake). */
  int cancel_error;
  int settle_on_cancel;
  char pending[M_TEXT]; /* stream output not read yet */
  size_t pending_len;
  int psettled; /* the producer called settle */
  int queued;   /* its first outcome waits in the settle queue */
  uvt_status_t q_status;
  int q_has_detail;
  char q_detail[160];
  char q_output[M_TEXT];
  size_t q_output_len;
  /* Quiesce hook (P-KILL-4, P-KILL-6): 0 none, 1 returns 0, 2 returns 1
   * (the fuzzer calls uvt_task_quiescent later). */
  int quiesce_mode;
  int qpending;
  int in_quiesce, in_cancel, cancel_deferred, in_read;
  /* What the fake does from inside one hook, once (R-REENTER-1). */
  int act_hook; /* M_HOOK_*, or -1 */
  int act;
  int act_other; /* KILL_OTHER / FORGET_OTHER's target, or -1 */
  int acted;
  /* Hook counts the model expects. */
  int cancels;
  int releases;
  int settled_hooks;
  int quiesces;
} m_task_t;

/* COUNTED: a force-fail recorded its end; the dispatch delivers status 0. */
enum { M_W_IDLE = 0, M_W_PENDING, M_W_COUNTED, M_W_DUE_ABORT, M_W_DUE_OK };

typedef struct {
  int state;
  int task;
  int caller;
  int forget; /* its callback forgets the task when it ended */
  int seq;    /* submission order: a task's waits are called in it */
} m_wait_t;

/* Expected callbacks, collected by m_drain() and the operations. */
typedef struct {
  int listener;
  int task;
  int owner;
  m_snap_t snap;
} m_lev_t;

typedef struct {
  int wait;
  int status;
  int has_snap;
  m_snap_t snap;
} m_wev_t;

typedef struct {
  int watcher;
  int task;
  int which;
  m_snap_t snap;
} m_fev_t;

typedef struct {
  int task;
  int which;
  uvt_status_t status;
} m_change_t;

typedef struct {
  int closing;
  int short_grace; /* teardown_grace_ms is tiny: stubborn producers fail */
  /* R-FEED-1: a kill or teardown of a task that is already stopping emits
   * no second "stopping" change, also when the first happened while nobody
   * watched.  1 = strict (the default); 0 = the v1 core's behaviour. */
  int strict_feed;
  unsigned max_live;
  int surfaces[M_SURFACES];
  int listeners[M_LISTENERS];
  /* Start order (listeners run in it) and what each does, from inside its
   * callback, to the task it is told about (R-DONE-4). */
  int lseq[M_LISTENERS];
  int lseq_next;
  int reaction[M_LISTENERS];
  int dispatching; /* task whose end is being dispatched, or -1 */
  int starting;    /* a uvt_start is in progress: hooks may not start */
  int wseq;        /* last wait submission number */
  int pinned;      /* its run hook is running: the owner is pinned */
  m_agent_t agents[M_AGENTS];
  m_task_t tasks[M_TASKS];
  int ntasks;
  unsigned kind_counter[M_KINDS];
  m_wait_t waits[M_WAITS];
  int queue[M_TASKS * 2]; /* settle queue, task indexes */
  int nqueue;
  int dq[M_TASKS * 2]; /* force-failed records awaiting dispatch, in order */
  int ndq;
  int wq[M_WAITS * 4]; /* waits due for delivery (wait slots), in order */
  int nwq;
  int starting_owner; /* owner of the start in progress (-1 unowned) */
  /* Expected events since the last m_events_clear(). */
  m_lev_t lev[M_TASKS * M_LISTENERS * 2];
  int nlev;
  m_wev_t wev[M_TASKS * 2 + M_WAITS * 4];
  int nwev;
  int dispose_cbs[M_AGENTS];
  /* Calls from inside hooks and callbacks, and their results. */
  m_aev_t aev[M_TASKS * 8];
  int naev;
  /* Change feed: watchers, transitions not yet delivered, and deliveries. */
  int watchers[M_WATCHERS];
  int watch_forget[M_WATCHERS]; /* forgets a task on its terminal change */
  int watch_seq[M_WATCHERS];    /* start order: they are called in it */
  m_change_t changes[M_TASKS * 4];
  int nchanges;
  m_fev_t fev[M_TASKS * 4 * M_WATCHERS];
  int nfev;
  /* Metrics. */
  uint64_t started, completed, killed, failed, kills, force_failed;
} model_t;

extern const char *const m_kinds[M_KINDS];

void m_init(model_t *m, unsigned max_live, int short_grace);
void m_events_clear(model_t *m);
int m_find(const model_t *m, const char *id);
void m_snap_of(const model_t *m, int ti, m_snap_t *out);

/* Caller: an agent slot, or -1 for NULL. */
int m_access(const model_t *m, const char *id, int caller, int *ti);

/* What a fake producer is, besides its kind, label and owner. */
typedef struct {
  int run_error, stream, cancel_error, settle_on_cancel;
  int quiesce_mode;
  int act_hook, act, act_other;
} m_fake_cfg_t;

int m_start(model_t *m, const char *kind, const char *label, int owner,
            const m_fake_cfg_t *cfg, int *ti);
int m_get(const model_t *m, const char *id, int caller, m_snap_t *out);
/* Returns the error; fills the indexes of the visible tasks in order. */
int m_list(const model_t *m, int caller, int *out, int *n);
int m_read(model_t *m, const char *id, int caller, char *text, size_t *len,
           m_snap_t *snap);
int m_kill(model_t *m, const char *id, int caller, const char *reason,
           uvt_kill_result_t *result);
int m_wait(model_t *m, int slot, const char *id, int caller, int timeout_zero,
           int forget);
int m_wait_abort(model_t *m, int slot);
/* A 1 ms wait run to its callback; returns the call's error, fills the
 * expected callback status and snapshot. */
int m_wait_short(model_t *m, const char *id, int caller, int *status,
                 m_snap_t *snap);

/* The producer settles (first call queues; later ones are ignored). */
void m_settle(model_t *m, int ti, uvt_status_t status, const char *detail,
              const char *output, size_t output_len);
void m_emit(model_t *m, int ti, const char *text);

int m_agent_register(model_t *m, int slot, const char *id, const char *session);
int m_agent_dispose(model_t *m, int slot);
int m_surface_attach(model_t *m, int slot);
void m_surface_detach(model_t *m, int slot);
int m_listener_start(model_t *m, int slot, int reaction);
int m_watch_start(model_t *m, int slot, int forget);
void m_watch_stop(model_t *m, int slot);
/* R-FORGET-1, R-FORGET-2 */
int m_forget(model_t *m, const char *id, int caller);
/* The producer says its quiesce is over (P-KILL-6). */
void m_quiescent(model_t *m, int ti);
void m_listener_stop(model_t *m, int slot);

/* Apply everything the loop would do when run until quiet. */
void m_drain(model_t *m);
/* Registry close and the loop run to the end; or in two halves, with the
 * quiesces the close started ended between them. */
void m_close(model_t *m);
void m_close_begin(model_t *m);
void m_close_end(model_t *m);

uint64_t m_live(const model_t *m);
uint64_t m_records(const model_t *m);

#endif
