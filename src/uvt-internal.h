/* Internal layer of the registry: the record, the registry, and the helpers
 * every file of src/ shares.  Nothing here is public. */
#ifndef UVT_INTERNAL_H
#define UVT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "uvtasks.h"
#include "uvtasks/producer.h"

/* Leaf helpers every layer shares: allocation, lists, container_of. */
#include "leaf/alloc.h"
#include "leaf/list.h"

/* ---- index.c: a string-keyed hash table of intrusive entries.  Insertion
 * never allocates; uvt__index_reserve() grows it ahead of time. */
typedef struct {
  struct uvt__hentry **buckets;
  size_t mask; /* bucket count - 1; bucket count is a power of two */
  size_t count;
} uvt__index_t;

uint32_t uvt__hash(const char *key);
int uvt__index_reserve(uvt__index_t *ix, size_t count);
void uvt__index_insert(uvt__index_t *ix, struct uvt__hentry *e,
                       const char *key);
struct uvt__hentry *uvt__index_find(const uvt__index_t *ix, const char *key);
void uvt__index_remove(uvt__index_t *ix, struct uvt__hentry *e);
void uvt__index_free(uvt__index_t *ix);

/* ---- deadline.c: one uv_timer per registry drives a pairing heap of
 * deadlines (wait deadlines, teardown grace periods).  It keeps time only;
 * the timer runs reg->deadlines_due (registry.c's), which collects what is
 * due and acts on it. */
enum { UVT__DEADLINE_WAIT = 1, UVT__DEADLINE_TEARDOWN = 2 };

void uvt__deadline_add(uvt_registry_t *reg, struct uvt__deadline *d, int kind,
                       uint64_t timeout_ms);
/* Disarm; also takes a collected deadline off the expired list. */
void uvt__deadline_remove(uvt_registry_t *reg, struct uvt__deadline *d);
/* Nonzero while in the heap or on the expired list. */
int uvt__deadline_armed(const struct uvt__deadline *d);
void uvt__deadline_init(struct uvt__deadline *d);
/* Move every deadline due now, earliest first, to the expired list. */
void uvt__deadline_collect(uvt_registry_t *reg);
/* Take the first deadline off the expired list (NULL when empty). */
struct uvt__deadline *uvt__deadline_pop_expired(uvt_registry_t *reg, int *kind);

/* ---- The settle hub: the part of the registry a producer's thread may
 * touch.  It outlives the registry while a task that has not settled still
 * refers to it, so a late settle finds a closed hub instead of freed memory
 * (R-DONE-2). */
typedef struct {
  uv_mutex_t mutex;
  struct uvt__link queue; /* tasks whose outcome (or a duplicate) arrived */
  uv_async_t *async;      /* NULL once the registry closed */
  atomic_size_t refs;     /* the registry + every task not yet freed */
} uvt__hub_t;

/* ---- Sessions: the per-session index behind uvt_list (R-LIST-1). */
typedef struct {
  struct uvt__hentry hentry;
  struct uvt__link tasks; /* tasks owned by agents of this session */
  size_t task_count;
  size_t refs; /* agents registered in it + tasks owned in it */
  char id[1];  /* flexible */
} uvt__session_t;

/* ---- Kinds: one id counter per kind (R-START-4). */
typedef struct {
  struct uvt__hentry hentry;
  uint64_t counter;
  char name[1]; /* flexible */
} uvt__kind_t;

/* ---- A queued change-feed transition (R-FEED-1); four per record, one
 * for each transition, so the feed never allocates. */
enum {
  UVT__CHANGE_REGISTERED = 0,
  UVT__CHANGE_STOPPING,
  UVT__CHANGE_TERMINAL,
  UVT__CHANGE_DROPPED,
  UVT__CHANGE_COUNT
};
/* The queue is a singly-linked FIFO (nodes leave only from its head), and
 * a node finds its record from its own index, so each node costs 16 bytes
 * of the record instead of 32. */
struct uvt__change {
  struct uvt__change *next;
  unsigned char which;  /* index in the record's changes[] */
  unsigned char status; /* uvt_status_t the transition produced */
  unsigned char fed;    /* queued once: each transition happens once */
};

/* ---- The record.  Fields are ordered by when they are touched: what
 * settlement reads and writes first (the hub-guarded outcome, then the
 * loop-side state a settle drain applies), then the views, then what only
 * starts, lookups and teardown use.  A drain of many settles from other
 * threads reaches records that are no longer in cache; keeping its fields
 * in the first cache lines is what bench-core xsettle measures. */
struct uvt_task_s {
  /* Guarded by hub->mutex (separate memory locations from the loop-side
   * fields below). */
  struct uvt__link queue_link;
  atomic_int settle_called;
  unsigned dup_settles;
  uvt_status_t o_status;
  unsigned char queued;
  unsigned char o_lost;
  char *o_detail;
  char *o_output;
  size_t o_output_len;

  /* Loop side from here on. */
  struct uvt__link apply_link; /* a settle drain in progress */
  uvt_registry_t *reg;
  uvt__hub_t *hub;
  /* Small fields, packed: the record's size is what a host holding many
   * tasks pays (bench-core memory). */
  uvt_status_t status;
  unsigned pins; /* callbacks in flight that hold a view of the record */
  unsigned reported : 1;
  unsigned committed : 1;
  unsigned dropped : 1;
  unsigned dispatched : 1;
  unsigned in_teardown : 1;
  unsigned force_failed : 1;
  unsigned quiesce_pending : 1;
  unsigned release_called : 1;
  unsigned detail_static : 1;
  unsigned kill_reason_owned : 1;
  unsigned producer_done : 1;   /* the outcome was taken off the hub */
  unsigned hidden : 1;          /* out of the id index and the list views */
  unsigned in_hook : 5;         /* UVT__HOOK_* bits: hooks running */
  unsigned cancel_deferred : 1; /* a teardown's cancel joined that call */
  unsigned char id_prefix_len;  /* strlen("<kind>-"), at most 65 */
  unsigned dups_seen;           /* taken from dup_settles by the drain */
  uvt_agent_t *owner;
  struct uvt__link waits; /* pending waits; once terminal, counted ones */
  uvt_hooks_t hooks;
  char *detail;
  char *output;
  size_t output_len;
  size_t output_pos;   /* stream kinds: what reads consumed of `output` */
  char *owner_session; /* copy, so views never depend on the session */
  const char *kill_reason;
  int64_t started_at_ms;
  int64_t finished_at_ms;
  void *arg;
  uint64_t seq;
  uvt__session_t *session;
  struct uvt__hentry hentry;      /* registry's id index */
  struct uvt__link all_link;      /* registry's tasks, registration order */
  struct uvt__link scope_link;    /* session's tasks, or the unowned list */
  struct uvt__link owner_link;    /* owner agent's tasks */
  struct uvt__link dispatch_link; /* registry's dispatch list */
  struct uvt__link sweep_link;    /* a teardown sweep being collected */
  struct uvt__deadline teardown_deadline;
  uint64_t teardown_ns; /* uv_hrtime() when that deadline's wait began */
  struct uvt__change changes[UVT__CHANGE_COUNT];
};

/* The record's strings follow it in one block (see task.c): "kind\0",
 * then the id ("kind-" written at the start, its digits at commit; 21
 * bytes left for them), then "label\0".  So their places follow from the
 * kind's length (id_prefix_len - 1) and need no pointers in the record. */
static inline const char *uvt__task_kind(const uvt_task_t *t) {
  return (const char *)(t + 1);
}
static inline char *uvt__task_id(const uvt_task_t *t) {
  return (char *)(t + 1) + t->id_prefix_len;
}
static inline const char *uvt__task_label(const uvt_task_t *t) {
  return (const char *)(t + 1) + 2 * (size_t)t->id_prefix_len + 21;
}

/* ---- State tags of the caller-allocated handles (R-BUSY-1).  A handle
 * is in use when its state field holds one of the in-use tags below and it
 * names a registry; a zeroed handle (state 0) or one we gave back (a
 * "free" tag) is free.  The values are distinctive so that a field of
 * memory we never wrote is unlikely to read as "in use" by chance; hosts
 * still must zero handles before their first use (the header says so). */
#define UVT__TAG(n) ((int)(0x75740000 + (n))) /* "ut" and a number */

enum {
  UVT__AGENT_IDLE = UVT__TAG(0x10), /* free: disposed, callback done */
  UVT__AGENT_REGISTERED = UVT__TAG(0x11),
  UVT__AGENT_DISPOSING = UVT__TAG(0x12),
  UVT__AGENT_DONE = UVT__TAG(0x13),       /* disposed, callback to come */
  UVT__AGENT_DETACHED = UVT__TAG(0x14),   /* the registry closed under it */
  UVT__AGENT_DETACHED_CB = UVT__TAG(0x15) /* disposed after that: cb due */
};

enum {
  UVT__WAIT_IDLE = UVT__TAG(0x20),    /* free */
  UVT__WAIT_PENDING = UVT__TAG(0x21), /* on task->waits with a deadline */
  UVT__WAIT_COUNTED = UVT__TAG(0x22), /* on task->waits: status 0 due */
  UVT__WAIT_DUE = UVT__TAG(0x23)      /* on reg->deferred: next drain */
};

/* ---- ext.c: per-registry producer contexts (uvt_context_t of
 * uvtasks/producer.h). */
enum { UVT__EXT_OPEN = 0, UVT__EXT_CLOSING, UVT__EXT_CLOSED };

/* For registry close: starts shutting every context down on the first
 * call; returns 0 once all are done, else 1, and then `closed(reg)` is
 * called when the last one is (the registry's close goes on from there). */
int uvt__ext_close_all(uvt_registry_t *reg,
                       void (*closed)(uvt_registry_t *reg));
enum {
  UVT__SURFACE_DETACHED = UVT__TAG(0x30),
  UVT__SURFACE_ATTACHED = UVT__TAG(0x31),
  UVT__LISTENER_STOPPED = UVT__TAG(0x40),
  UVT__LISTENER_ACTIVE = UVT__TAG(0x41),
  UVT__WATCH_STOPPED = UVT__TAG(0x50),
  UVT__WATCH_ACTIVE = UVT__TAG(0x51)
};

static inline int uvt__agent_in_use(const uvt_agent_t *a) {
  if (a->state_ == UVT__AGENT_DETACHED_CB)
    return 1; /* its registry is gone; our idle handle still holds it */
  return a->registry != NULL &&
         (a->state_ == UVT__AGENT_REGISTERED ||
          a->state_ == UVT__AGENT_DISPOSING || a->state_ == UVT__AGENT_DONE);
}

static inline int uvt__wait_in_use(const uvt_wait_t *req) {
  return req->registry != NULL &&
         (req->state_ == UVT__WAIT_PENDING ||
          req->state_ == UVT__WAIT_COUNTED || req->state_ == UVT__WAIT_DUE);
}

struct uvt_registry_s {
  uv_loop_t *loop;
  uv_thread_t loop_thread; /* the thread of uvt_registry_new (P-THREAD-1) */
  uvt_options_t options;
  uvt__hub_t *hub;
  uv_async_t async;
  uv_timer_t timer;
  struct uvt__deadline *deadlines; /* pairing heap root */
  struct uvt__deadline expired;    /* list head: collected, not acted on */
  uv_timer_cb deadlines_due;       /* registry.c's: the timer fired */

  uvt__index_t tasks_by_id;
  uvt__index_t agents_by_id;
  uvt__index_t sessions_by_id;
  uvt__index_t kinds_by_name;

  struct uvt__link tasks;   /* every record, registration order */
  struct uvt__link unowned; /* unowned records, registration order */
  struct uvt__link agents;  /* registered agents */
  struct uvt__link surfaces;
  struct uvt__link listeners;
  struct uvt__link dispatching; /* listeners not yet called this dispatch */
  struct uvt__link dispatch;    /* terminal records awaiting dispatch */
  struct uvt__link deferred;    /* waits due for delivery */
  struct uvt__link agents_done; /* agents whose dispose finished */
  struct uvt__link watchers;
  struct uvt__link watch_dispatching;
  struct uvt__change *changes; /* queued change-feed transitions (FIFO) */
  struct uvt__change **changes_tail;

  size_t records;
  size_t unowned_count;
  size_t surface_count;
  size_t disposing_agents;
  unsigned unowned_live;
  unsigned unowned_starting; /* unowned uvt_start calls inside `run` */
  uint64_t next_seq;
  uvt_metrics_t metrics;

  uvt_close_cb close_cb;
  void *close_data;
  int closing;         /* close requested */
  int handles_closing; /* count of uv_close callbacks outstanding */

  uvt_context_t *exts;   /* producer contexts (ext.c) */
  unsigned exts_closing; /* contexts whose close has not called done */
  void (*exts_closed)(uvt_registry_t *reg); /* the last one did */
  unsigned char ext_state;
};

/* ---- common.c: the bottom of the core (wake-ups, clock, log) */
void uvt__kick(uvt_registry_t *reg);
/* P-THREAD-1 (loopthread.c): 1, after a log line naming `fn`, when the calling
 * thread is not `reg`'s loop thread (the thread that called
 * uvt_registry_new); 0 otherwise, and for a NULL reg (the caller's own
 * argument check answers that).  Any thread; touches nothing of reg but
 * the loop thread's id and the log callback. */
int uvt__off_loop(const uvt_registry_t *reg, const char *fn);
/* A public function refuses a call off the loop thread with producer.h's
 * UVT_LOOP_ONLY(reg) / UVT_LOOP_ONLY_VOID(reg). */

void uvt__log(const uvt_registry_t *reg, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int64_t uvt__now_ms(void);
void uvt__update_ref(uvt_registry_t *reg);

/* ---- snapshot.c */
void uvt__snapshot_view(const uvt_task_t *t, uvt_snapshot_t *s);
int uvt__snapshot_take(const uvt_task_t *t, uvt_snapshot_t *s);

/* ---- task.c: the record's life */
/* One block: the record and its strings; NULL when out of memory. */
uvt_task_t *uvt__task_alloc(uvt_registry_t *reg, const uvt_spec_t *spec);
/* Out of lookups and lists; still held (disposal waits for it). */
void uvt__hide(uvt_task_t *t);
/* Hidden, unlinked, the release hook called; freed once unpinned and the
 * producer's outcome was taken. */
void uvt__drop(uvt_task_t *t);
int uvt__lookup(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
                uvt_task_t **out);
int uvt__task_live(const uvt_task_t *t);
/* A stream kind's remainder was read whole: free its bytes (read.c). */
void uvt__task_output_consumed(uvt_task_t *t);
void uvt__task_pin(uvt_task_t *t);
void uvt__task_unpin(uvt_task_t *t);
void uvt__task_maybe_free(uvt_task_t *t);
void uvt__task_free(uvt_task_t *t);
/* Record a terminal state: status, detail, finished time, live counts,
 * counted waits (R-DONE-3 steps 1-2).  `detail` is taken over. */
void uvt__task_record(uvt_task_t *t, uvt_status_t status, char *detail,
                      int detail_static);

/* ---- hub.c */
int uvt__hub_new(uvt_registry_t *reg, uvt__hub_t **out);
void uvt__hub_ref(uvt__hub_t *hub);
void uvt__hub_unref(uvt__hub_t *hub);
/* run() failed after settling: forget the queued outcome. */
void uvt__hub_cancel(uvt_task_t *t);

/* ---- settle.c */
void uvt__hub_close(uvt__hub_t *hub);
void uvt__settle_drain(uvt_registry_t *reg);

/* ---- listener.c */
void uvt__dispatch(uvt_task_t *t);
void uvt__dispatch_later(uvt_task_t *t);
void uvt__dispatch_drain(uvt_registry_t *reg);

/* ---- wait.c */
void uvt__waits_count(uvt_task_t *t);
void uvt__waits_deliver_counted(uvt_task_t *t);
void uvt__waits_drain(uvt_registry_t *reg);
void uvt__wait_expired(uvt_wait_t *req);

/* ---- producer.c: every hook call, behind one re-entry guard */
enum {
  UVT__HOOK_CANCEL = 1,
  UVT__HOOK_READ = 2,
  UVT__HOOK_QUIESCE = 4,
  UVT__HOOK_SETTLED = 8,
  UVT__HOOK_RELEASE = 16
};
/* 1 while `hook` (a UVT__HOOK_* bit) of `t` is running. */
static inline int uvt__in_hook(const uvt_task_t *t, unsigned hook) {
  return (t->in_hook & hook) != 0;
}
/* The cancel hook; UV_ENOTSUP without one.  A call made while it runs does
 * not enter it again: it returns 0 and the running call's *joined is set,
 * so its caller applies a failure to both. */
int uvt__hook_cancel(uvt_task_t *t, const char *reason, int *joined);
/* The read_output hook (non-NULL); UV_EBUSY while it runs. */
int uvt__hook_read(uvt_task_t *t, uvt_buf_t *out);
/* P-OUT-6: the read_late hook, if any (0 without one). */
int uvt__hook_read_late(uvt_task_t *t, uvt_buf_t *out);
/* The quiesce hook (non-NULL); 1 ("in progress") while it runs. */
int uvt__hook_quiesce(uvt_task_t *t);
/* The settled hook, if any, unless released. */
void uvt__hook_settled(uvt_task_t *t);
/* The release hook, if any, once. */
void uvt__hook_release(uvt_task_t *t);

/* ---- teardown.c */
/* Cancel `t` through its hook, never twice at once for one task
 * (R-REENTER-1); a teardown's cancel that joined a failing kill gets the
 * teardown's failure rule (R-AGENT-3).  See teardown.c. */
int uvt__task_cancel(uvt_task_t *t, const char *reason);
void uvt__teardown_task(uvt_task_t *t, const char *reason);
void uvt__teardown_cancel_failed(uvt_task_t *t, int err);
void uvt__quiesce_on_kill(uvt_task_t *t);
void uvt__teardown_after_terminal(uvt_task_t *t);
void uvt__teardown_expired(uvt_task_t *t);
void uvt__force_fail(uvt_task_t *t, char *detail, const char *fallback);

/* ---- watch.c */
void uvt__feed(uvt_task_t *t, int which);
void uvt__feed_drain(uvt_registry_t *reg);

/* ---- agent.c */
/* A task of `a` was dropped, or a start for it finished: a disposal that
 * waited for that may complete. */
void uvt__agent_maybe_done(uvt_agent_t *a);
void uvt__agents_drain(uvt_registry_t *reg);
void uvt__agents_detach_all(uvt_registry_t *reg);
void uvt__session_unref(uvt_registry_t *reg, uvt__session_t *s);

#endif /* UVT_INTERNAL_H */
