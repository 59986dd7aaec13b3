/* uvtasks/producer.h: the interface for producer authors.
 *
 * A producer is code that starts work and reports how it ended: the
 * process producer (uvtasks/process.h), the thread producer
 * (uvtasks/thread.h) and the Slurm engine (uvtasks/slurm.h) are all built
 * on this header and on uvtasks.h, and on nothing private of the registry.
 * Hosts do not need it (as libgit2 keeps git2/sys/ apart from git2.h).
 *
 * What a producer uses, and where it is declared:
 *   - starting a task:      uvt_spec_t, uvt_hooks_t, uvt_start()   (uvtasks.h)
 *   - reporting its end:    uvt_task_settle(), uvt_task_quiescent() (uvtasks.h)
 *   - handing out output:   uvt_buf_append() (uvtasks.h), uvt_buf_adopt()
 *   - finding its tasks:    uvt_task_lookup() (fenced), uvt_task_find()
 *   - looking at a task:    uvt_task_status(), uvt_task_hooks(), ...
 *   - the end of a stream:  uvt_task_remainder_peek(), _take() (R-READ-1/3)
 *   - state per registry:   uvt_context_t, uvt_context_find(), _add()
 *   - logging:              uvt_log(), UVT_LOOP_ONLY()
 *
 * Threads.  Everything here is for the loop thread (the thread that called
 * uvt_registry_new) unless a function says otherwise; uvt_task_settle() is
 * the one call a producer's own threads make.
 *
 * Clause ids (R-*, P-*) refer to docs/contract.md. */
#ifndef UVTASKS_PRODUCER_H
#define UVTASKS_PRODUCER_H

#include <stddef.h>

#include "../uvtasks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* The loop thread (P-THREAD-1)                                           */

/* 1, after logging a line naming `fn` through the registry's log hook,
 * when the calling thread is not `reg`'s loop thread; 0 when it is, and
 * for a NULL reg (the caller's own argument check answers that).
 * Thread: any; reads only the loop thread's id and the log hook.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_off_loop(const uvt_registry_t *reg, const char *fn);

/* First statement of a producer's public function that returns an int:
 * refuse a call from another thread with UVT_ETHREAD before touching
 * anything (P-THREAD-1). */
#define UVT_LOOP_ONLY(reg)                                                     \
  do {                                                                         \
    if (uvt_off_loop((reg), __func__))                                         \
      return UVT_ETHREAD;                                                      \
  } while (0)

/* The same for a function without a result. */
#define UVT_LOOP_ONLY_VOID(reg)                                                \
  do {                                                                         \
    if (uvt_off_loop((reg), __func__))                                         \
      return;                                                                  \
  } while (0)

/* ---------------------------------------------------------------------- */
/* Logging                                                                */

/* Format a line (printf-style; at most 1023 bytes are kept) and hand it to
 * the registry's log hook (uvt_options_t.log) at `level` (UVT_LOG_ERROR ..
 * UVT_LOG_DEBUG); with no hook it goes to stderr as "uvtasks: <line>".
 * `reg` must not be NULL.  Thread: the loop thread, or any thread when the
 * host's log hook is thread-safe (stderr is).
 * Since: 0.3.0 */
UVT_EXTERN void uvt_log(const uvt_registry_t *reg, int level, const char *fmt,
                        ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---------------------------------------------------------------------- */
/* Finding and looking at a producer's tasks                              */

/* The fenced lookup of the public API (R-OWN-2): the record `id` names, as
 * `caller` may see it.  An unowned task is open to every caller; an owned
 * one only to a caller of the same session, and never to a NULL caller.
 * Producers use it for their own public functions (uvt_process_read,
 * uvt_slurm_cancel...), then check uvt_task_hooks(*out) to know the task
 * is theirs.
 * Returns 0 (*out set; the record stays until dropped: use it within this
 * call), UV_EINVAL (NULL reg or id), UVT_ENOTASK (no record with that id,
 * or it was hidden by a disposal), UVT_EFOREIGN (owned by another session),
 * UVT_ETHREAD (another thread, P-THREAD-1; *out NULL in every error).
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_task_lookup(uvt_registry_t *reg, const char *id,
                               const uvt_agent_t *caller, uvt_task_t **out);

/* The record `id` names, whoever owns it: a producer's own view (the
 * Slurm engine finds the task a change-feed entry speaks of).  Returns
 * NULL when there is none, for a NULL argument, or from another thread
 * (refused and logged, P-THREAD-1).  Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN uvt_task_t *uvt_task_find(uvt_registry_t *reg, const char *id);

/* The task's status as the registry recorded it (UVT_RUNNING until the
 * outcome is applied on the loop, whatever the producer settled).
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN uvt_status_t uvt_task_status(const uvt_task_t *t);

/* 1 while the task is running or stopping, else 0. Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_task_is_live(const uvt_task_t *t);

/* The hooks `run` filled in.  A producer compares a hook with its own to
 * tell its tasks from others' (the same id space holds every kind).
 * Valid until the record is dropped.  Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN const uvt_hooks_t *uvt_task_hooks(const uvt_task_t *t);

/* R-START-4, R-START-6: the id counter of `kind` moves to at least
 * `upto`, so the registry never hands out "<kind>-1".."<kind>-<upto>" by
 * itself afterwards (a requested id, R-START-6, may still name one: that
 * is how work taken back keeps its id).  A producer that takes work back
 * from a journal calls it with the highest number the journal ever
 * named, taken back or not, so an id once given to one piece of work is
 * never given to another (the Slurm engine does, E-5).  The counter
 * never moves down; upto 0 changes nothing.
 * Returns 0, UV_EINVAL (NULL reg, a kind uvt_start() would refuse),
 * UV_ENOMEM, or UVT_ETHREAD (another thread).
 * Ownership: `kind` is copied; the caller keeps it.  Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_reserve_ids(uvt_registry_t *reg, const char *kind,
                               uint64_t upto);

/* 1 while the task is being taken down because its registry is closing
 * or its owner agent is being disposed (R-CLOSE-1, R-OWN-4), else 0; a
 * cancel hook uses it to tell a host's leaving from a kill (the Slurm
 * engine's detach on close, E-6).  Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_task_host_leaving(const uvt_task_t *t);

/* Show `detail` (NUL-terminated, allocated with the library's allocator,
 * see uvt_replace_allocator) as the live task's detail in snapshots (the
 * Slurm engine's pending reason).  Ownership: taken over in every case;
 * freed at once when the task is no longer live, else replaced by the
 * next call or by the outcome's detail; a call from another thread is
 * refused (logged, P-THREAD-1) and frees `detail`.  Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_task_set_detail(uvt_task_t *t, char *detail);

/* A snapshot of the task as uvt_get() gives it (R-SNAP-1).
 * Returns 0, UV_EINVAL (NULL argument), UVT_ETHREAD (another thread,
 * P-THREAD-1) or UV_ENOMEM (in every error *snap holds nothing to clean
 * up).  Ownership: the caller frees *snap with uvt_snapshot_cleanup().
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_task_snapshot(const uvt_task_t *t, uvt_snapshot_t *snap);

/* ---------------------------------------------------------------------- */
/* The terminal remainder of a stream kind, once (R-READ-1, R-READ-3)     */

/* A stream kind (one with a read_output hook) hands its unread output over
 * in the outcome; the registry serves it to the first read after the end,
 * and never again.  A producer with a read function of its own (the
 * process producer's uvt_process_read, P-RES-1) serves the same remainder
 * through these two calls, so both reads share one cursor.
 *
 * Peek: *text gets the outcome's whole output text (borrowed: valid
 * until uvt_task_remainder_take() consumes it or the record is dropped)
 * and *len its length in bytes.  The length stays after the text was
 * consumed, so "everything was read" (*len > 0) is told apart from
 * "nothing was kept" (*len 0: the outcome had no text, or the registry
 * had no memory for it).  Returns 1 when no read consumed the text yet
 * (*text non-NULL), 0 when one did or there is none (*text NULL; also
 * before the outcome is recorded, with *len 0), UV_EINVAL (NULL argument),
 * UVT_ETHREAD (another thread, P-THREAD-1; *text NULL, *len 0).
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_task_remainder_peek(const uvt_task_t *t, const char **text,
                                       size_t *len);

/* A read found the task ended: mark it reported (R-READ-3) and fill
 * `snap` (may be NULL) with a snapshot that shows it; then, when
 * `consume` is nonzero, free the remainder (R-READ-1: later peeks
 * return 0).  All or nothing: on error the task is as before.
 * Returns 0, UV_EINVAL (NULL t, or not terminal), UVT_ETHREAD (another
 * thread, P-THREAD-1), UV_ENOMEM.
 * Ownership: the caller frees *snap with uvt_snapshot_cleanup().
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_task_remainder_take(uvt_task_t *t, int consume,
                                       uvt_snapshot_t *snap);

/* ---------------------------------------------------------------------- */
/* Handing over output                                                    */

/* Make an empty `b` (base NULL) take `base` as its contents without a
 * copy: `len` bytes of text in a block of `size` > len bytes allocated with
 * the library's allocator (uvt_replace_allocator's, else malloc).
 * Ownership: `base` passes to `b`.  Thread: the thread that owns `b` (the
 * loop thread inside read_output).
 * Since: 0.3.0 */
UVT_EXTERN void uvt_buf_adopt(uvt_buf_t *b, char *base, size_t len,
                              size_t size);

/* ---------------------------------------------------------------------- */
/* Per-registry producer contexts                                         */

/* A producer that needs state of its own per registry (threads, a signal
 * watch, a cache) embeds a uvt_context_t in it, finds it by `key` (the
 * address of something of its own, so keys never collide) and adds it
 * once.  Registry close calls `close` once, after the last record was
 * dropped and before the registry's own handles close: the context stops
 * what it runs (joins its threads, closes its handles) and then calls
 * `done(ctx)` exactly once, at once or from a later callback on the loop
 * thread.  `done` is the last time the registry touches `ctx`, so the
 * producer may free it after `done` returns. */
typedef struct uvt_context_s uvt_context_t;
typedef void (*uvt_context_done_cb)(uvt_context_t *ctx);
struct uvt_context_s {
  /* public: set before uvt_context_add */
  const void *key;
  void (*close)(uvt_context_t *ctx, uvt_context_done_cb done);
  /* read-only: set by uvt_context_add */
  uvt_registry_t *reg;
  /* private */
  uvt_context_t *next_;
};

/* The context added under `key`, or NULL (none, NULL reg, or a call
 * from another thread: refused and logged, P-THREAD-1).
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN uvt_context_t *uvt_context_find(const uvt_registry_t *reg,
                                           const void *key);

/* Add `ctx` (key and close set) to `reg`.  Returns 0, UV_EINVAL (NULL
 * reg or ctx, or key or close unset), UVT_ETHREAD (another thread,
 * P-THREAD-1), or UVT_ECLOSING once the registry is closing (in every
 * error ctx is not added: free it yourself).
 * Ownership: `ctx` stays the producer's; it must live until `done`.
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_context_add(uvt_registry_t *reg, uvt_context_t *ctx);

#ifdef __cplusplus
}
#endif

#endif /* UVTASKS_PRODUCER_H */
