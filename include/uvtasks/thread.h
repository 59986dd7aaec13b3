/* uvtasks thread producer (contract §4): run a function on a thread of its own
 * as a final-output task.
 *
 * The function runs on a thread created for it (never on libuv's fs/dns
 * threadpool, so a long task cannot starve the host's file I/O).  It fills in
 * an outcome that is settled from that thread with uvt_task_settle(); the
 * registry joins the thread on the loop thread when it records the outcome,
 * before any listener or wait sees it, so a terminal thread task is
 * quiescent.
 *
 * Lifecycle of the thread's context:
 *  - normal end: the function returns, the thread settles, the loop joins
 *    the thread (settled hook) and frees the context when the record is
 *    dropped (release hook);
 *  - the record is dropped before the thread settled (teardown force-failed
 *    it, R-AGENT-3/4): the loop never joins (that could block the loop); the
 *    context is marked abandoned and the thread detaches itself and frees the
 *    context when the function returns.  Its late settle is harmless
 *    (R-DONE-2).
 */
#ifndef UVTASKS_THREAD_H
#define UVTASKS_THREAD_H

#include "../uvtasks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The context handed to a thread task's function.  Opaque; owned by the
 * library. */
typedef struct uvt_thread_ctx_s uvt_thread_ctx_t;

/* The work of a thread task.  Runs once, on the task's own thread.
 *
 * On entry *out is {UVT_COMPLETED, NULL, NULL, 0}.  Set out->status to
 * UVT_COMPLETED, UVT_KILLED or UVT_FAILED (anything else is settled as
 * failed, "thread returned a non-terminal status"), and optionally
 * out->detail and out->output/out->output_len.
 *
 * Ownership: the strings out points at must stay valid after the function
 * returns, until the thread has settled: use static strings, memory that
 * outlives the task, or the context's own copies made with
 * uvt_thread_set_detail() and uvt_thread_append_output() (freed with the
 * context).  The settle copies them.
 * Thread: the task's thread.  Call no registry function other than the
 * uvt_thread_* functions on `ctx`. */
typedef void (*uvt_thread_fn)(uvt_thread_ctx_t *ctx, void *arg,
                              uvt_outcome_t *out);

/* Options of uvt_thread_start().  Initialise with
 * uvt_thread_options_init(); only its first `size` bytes are read (A-2:
 * see "Option structs and the ABI" in uvtasks.h). */
typedef struct {
  /* sizeof the struct in the host's headers; set by
   * uvt_thread_options_init().  0 is refused. */
  size_t size;
  const char *kind;   /* NULL = "thread"; the id prefix (R-START-1) */
  const char *label;  /* NULL = "thread" */
  uvt_agent_t *owner; /* NULL = unowned */
  size_t stack_size;  /* bytes; 0 = the system default */
} uvt_thread_options_t;

/* Fill the first `size` bytes of `o` with the defaults (kind and label
 * "thread", no owner, the system stack size) and set o->size = size
 * what the macro uvt_thread_options_init(o) calls with the host's
 * sizeof *o.  Writes nothing past `size` bytes; bytes past the library's
 * own struct are zeroed.  Accepts NULL.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_thread_options_init_size(uvt_thread_options_t *o,
                                             size_t size);

/* uvt_thread_options_init_size(o, sizeof(uvt_thread_options_t)) with this
 * library's sizeof: for a host built against the same headers as the
 * library (a binding, a dlsym() user).  A C host gets the macro of this name.
 * Accepts NULL.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_thread_options_init(uvt_thread_options_t *o);
#define uvt_thread_options_init(o)                                             \
  uvt_thread_options_init_size((o), sizeof *(o))

/* Start `fn(ctx, arg, out)` on a new thread as a task (§4).  `o` may be
 * NULL (defaults).  The id is written to `id_out` (may be NULL).  Every
 * check of uvt_start() runs before the thread is created; no thread exists
 * after an error return.
 *
 * Returns 0, UV_EINVAL (NULL reg or fn; `o` not made by
 * uvt_thread_options_init(), size 0, or of a size this library refuses,
 * A-2, logged), UV_ENOMEM, the errors of
 * uvt_start() (UVT_ENOSURFACE, UV_EINVAL, UVT_ESTALE, UVT_ECLOSING,
 * UVT_ELIMIT), or the error of uv_thread_create_ex() (e.g. UV_EAGAIN).
 * Cancel (uvt_kill, disposal) sets the flag read by uvt_thread_cancelled()
 * and wakes uvt_thread_sleep(); it never fails and never interrupts `fn`.
 * Ownership: `arg` stays the caller's; it must stay valid until `fn`
 * returns.  The context is the library's (see the lifecycle above).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_thread_start(uvt_registry_t *reg,
                                const uvt_thread_options_t *o, uvt_thread_fn fn,
                                void *arg, char id_out[UVT_ID_MAX]);

/* Nonzero once the task was cancelled (a kill, or disposal of its owner or
 * the registry).  Thread: any; an atomic read.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_thread_cancelled(uvt_thread_ctx_t *ctx);

/* Sleep up to `timeout_ms` milliseconds, waking early when the task is
 * cancelled.  Returns 1 if the task is cancelled (at once if it already
 * was), 0 if the time passed.  Thread: the task's thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_thread_sleep(uvt_thread_ctx_t *ctx, uint64_t timeout_ms);

/* Set the outcome's detail to a copy of `detail` (NULL clears it) and point
 * out->detail at the copy.  Returns 0, or UV_ENOMEM (out unchanged).
 * Ownership: the copy belongs to the context.  Thread: the task's thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_thread_set_detail(uvt_thread_ctx_t *ctx, uvt_outcome_t *out,
                                     const char *detail);

/* Append `len` bytes to the context's output and point out->output and
 * out->output_len at it.  Returns 0, or UV_ENOMEM (out unchanged).
 * Ownership: the copy belongs to the context.  Thread: the task's thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_thread_append_output(uvt_thread_ctx_t *ctx,
                                        uvt_outcome_t *out, const void *bytes,
                                        size_t len);

#ifdef __cplusplus
}
#endif

#endif /* UVTASKS_THREAD_H */
