/* A reference model of the registry's observable behaviour, for the
 * model-based fuzzer (fuzz-registry.c).
 *
 * It is deliberately naive: fixed arrays, linear scans, no allocation, one
 * function per operation written straight from SPEC.md and the header.  It
 * also simulates the fuzzer's fake producers (their cancel behaviour, their
 * unread stream output), because the registry's behaviour depends on them.
 *
 * Readings of the contract the model fixes (where SPEC leaves a choice):
 *  - after a producer called uvt_task_settle() (its outcome queued, not yet
 *    applied), a kill or teardown does not call cancel again;
 *  - a wait on a terminal task marks it reported at the call; aborting it
 *    before its callback still delivers status 0 (the waiter was counted);
 *  - agent disposal drops each of its tasks as soon as it is terminal and
 *    dispatched; registry close does not cancel a task a disposal already
 *    cancelled;
 *  - a force-failed record reaches listeners and waits like any other
 *    terminal record; the producer's `settled` hook is not called for it.
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

enum { M_AG_FREE = 0, M_AG_REG, M_AG_DISPOSING };

/* A listener's reaction to a call: nothing, read the task, kill it. */
enum {
  M_REACT_NONE = 0,
  M_REACT_READ,
  M_REACT_KILL,
  M_REACT_DISPOSE, /* dispose the task's owner agent */
  M_REACTIONS
};

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
  int thread; /* a uvt_thread_start() task: cancel only sets its flag */
  /* Registry side. */
  uvt_status_t status;
  int has_detail;
  char detail[160];
  char output[M_TEXT]; /* final output, or unread remainder (stream) */
  size_t output_len;
  int reported;
  int has_kill_reason;
  char kill_reason[64];
  int teardown;     /* taken by a disposal */
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
  /* Hook counts the model expects. */
  int cancels;
  int releases;
  int settled_hooks;
} m_task_t;

enum { M_W_IDLE = 0, M_W_PENDING, M_W_DUE_ABORT, M_W_DUE_OK };

typedef struct {
  int state;
  int task;
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
  /* Known core divergence (reported): a kill or teardown of a task that is
   * already stopping emits a second "stopping" change when the first one
   * happened while nobody watched.  0 = expect it, 1 = strict R-FEED-1. */
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
  m_agent_t agents[M_AGENTS];
  m_task_t tasks[M_TASKS];
  int ntasks;
  unsigned kind_counter[M_KINDS];
  m_wait_t waits[M_WAITS];
  int queue[M_TASKS * 2]; /* settle queue, task indexes */
  int nqueue;
  /* Expected events since the last m_events_clear(). */
  m_lev_t lev[M_TASKS * M_LISTENERS * 2];
  int nlev;
  m_wev_t wev[M_TASKS * 2 + M_WAITS * 4];
  int nwev;
  int dispose_cbs[M_AGENTS];
  /* Change feed: watchers, transitions not yet delivered, and deliveries. */
  int watchers[M_WATCHERS];
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

int m_start(model_t *m, const char *kind, const char *label, int owner,
            int run_error, int stream, int cancel_error, int settle_on_cancel,
            int *ti);
int m_get(const model_t *m, const char *id, int caller, m_snap_t *out);
/* Returns the error; fills the indexes of the visible tasks in order. */
int m_list(const model_t *m, int caller, int *out, int *n);
int m_read(model_t *m, const char *id, int caller, char *text, size_t *len,
           m_snap_t *snap);
int m_kill(model_t *m, const char *id, int caller, const char *reason,
           uvt_kill_result_t *result);
int m_wait(model_t *m, int slot, const char *id, int caller, int timeout_zero);
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
int m_watch_start(model_t *m, int slot);
void m_watch_stop(model_t *m, int slot);
/* R-FORGET-1 */
int m_forget(model_t *m, const char *id, int caller);
void m_listener_stop(model_t *m, int slot);

/* Apply everything the loop would do when run until quiet. */
void m_drain(model_t *m);
/* Registry close and the loop run to the end. */
void m_close(model_t *m);

uint64_t m_live(const model_t *m);
uint64_t m_records(const model_t *m);

#endif
