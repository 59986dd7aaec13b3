/* uvtasks: a background task registry for programs built on a libuv loop.
 *
 * Producers start work (a shell command, a thread, a child agent) and report
 * how it ended; the registry gives each piece of work an id ("bash-1"),
 * fences it to its owner's session, lets the owner read its output, wait for
 * it with a deadline and kill it, tells listeners exactly once when it ends,
 * and on disposal stops everything and waits until it is quiet.
 *
 * The contract is docs/contract.md in the source tree (comments cite its
 * sections as "contract §N"); its clause ids (R-START-1, ...)
 * are cited beside the items that implement them.  Conventions, as in
 * libuv:
 *
 *  - Errors are 0 or a negative int.  Generic failures reuse libuv's codes
 *    (UV_EINVAL, UV_ENOMEM, ...); registry codes live in their own band
 *    (UVT_E*), see uvt_strerror().
 *  - Everything runs on the loop thread, except uvt_task_settle(), which any
 *    thread may call.  Every callback of ours runs on the loop thread.
 *  - A function that takes a callback never runs it on an error return;
 *    otherwise it runs it exactly once, and never inside the call itself.
 *  - Every public function may be called from inside every callback and
 *    every producer hook of ours (`run`, `cancel`, `read_output`,
 *    `settled`, `quiesce`, `release`; the log callback too), R-REENTER-1.
 *    The few calls that would have to enter a hook that is running are
 *    refused with UV_EBUSY instead: a kill of a task from inside its own
 *    cancel hook, a read of a task from inside its own read_output hook.
 *  - Handles the host embeds (uvt_agent_t, uvt_surface_t, uvt_listener_t,
 *    uvt_watch_t, uvt_wait_t) are caller-allocated with a public `data`
 *    field; the other fields are read-only or private.  They must not move
 *    while in use.  A handle is in use from a successful register, attach,
 *    start or wait until the library gives it back: detach, stop, the
 *    dispose callback, the wait callback, or registry close (which gives
 *    back every handle it detaches or stops).  Using a handle that is in
 *    use gives UV_EBUSY and changes nothing (R-BUSY-1).
 *  - Zero a handle before its first use (memset, `= {0}`, calloc); after
 *    that, reuse it as the library gave it back.  The library tells "in
 *    use" from a state field of its own that holds distinctive tags (not 0
 *    or 1) together with the registry the handle names, so a zeroed or
 *    given-back handle always reads as free, and it never trusts a flag
 *    that happens to be 1.  Memory that was never zeroed is not a handle.
 *  - Every struct the caller allocates (the handles, uvt_options_t,
 *    uvt_spec_t, uvt_outcome_t, uvt_snapshot_t, uvt_read_t, uvt_metrics_t)
 *    ends in `reserved_`, room for fields to come without changing its
 *    size before the ABI is fixed.  Zero such structs as a whole
 *    (designated initialisers or memset, not positional ones) so that a
 *    field added there later reads as zero.
 *  - Every snapshot handed to the host is its own copy (free it with
 *    uvt_snapshot_cleanup()); one handed to a callback is valid for that
 *    callback only (copy it with uvt_snapshot_copy() to keep it).
 *  - Each function's comment ends with the version that added it
 *    ("Since: 0.1.0", as libuv's versionadded); docs/api.md, generated
 *    from these headers by scripts/apiref.py, lists every function.
 *
 * Deviations from the contract's §1, and why:
 *  - uvt_hooks_t has two optional hooks more than the contract lists:
 *    `settled` (the producer's last step towards quiescence, run when its
 *    outcome is recorded: the thread producer joins its thread there,
 *    contract §4) and `quiesce` (a kill of an ended task, P-KILL-6, and
 *    disposal, P-KILL-4, ask a terminal task to stop what its work left
 *    behind; disposal waits for uvt_task_quiescent(), bounded by
 *    teardown_grace_ms).  The contract's three hooks alone cannot express
 *    a disposal that waits for a process group's survivors.
 *  - uvt_replace_allocator() lets tests fail the n-th allocation (R-START-3)
 *    and lets hosts route our memory through their allocator, as libuv's
 *    uv_replace_allocator() does.
 *  - A disposed agent's `id` and `session` become NULL; a caller whose
 *    session is NULL is treated as a NULL caller (sees unowned tasks only).
 *  - R-DONE-4 says a listener that closes the registry must not make the
 *    dispatch skip another listener; R-CLOSE-1 says no listener runs once
 *    close began.  The second wins: listeners after the one that closed
 *    are not called for that record (nor for any later one).
 *  - R-BUSY-1 replaced the v1 rule that starting a handle already in use
 *    was undefined "as for libuv handles": a pending uvt_wait_t submitted
 *    again made the loop spin (C-23).  Handles now carry state tags, and
 *    that costs hosts one thing libuv does not ask: zeroing before the
 *    first use.  A handle in use with another registry is refused too
 *    (UV_EBUSY): its links are in that registry's lists.
 */
#ifndef UVTASKS_H
#define UVTASKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "uvtasks/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define UVT_EXTERN __attribute__((visibility("default")))
#else
#define UVT_EXTERN
#endif

/* The version of the library the program runs against, packed as
 * UVT_VERSION_HEX is ((major << 16) | (minor << 8) | patch), like
 * uv_version().  Compare it with UVT_VERSION_HEX (uvtasks/version.h, the
 * version compiled against) to detect a mismatched shared library.
 * Thread: any.
 * Since: 0.2.0 */
UVT_EXTERN unsigned int uvt_version(void);

/* The same as "major.minor.patch".  Returns a static string.  Thread: any.
 * Since: 0.2.0 */
UVT_EXTERN const char *uvt_version_string(void);

/* Buffer size for a task id, NUL included: a kind of at most 64 bytes, '-',
 * and a decimal counter of at most 20 digits. */
#define UVT_ID_MAX 96

/* Longest kind accepted by uvt_start(), in bytes (R-START-1). */
#define UVT_KIND_MAX 64

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */

/* The registry's own codes, in a band below libuv's (whose codes end near
 * -4095 and whose getaddrinfo codes sit near -3000). */
#define UVT_ERRNO_MAP(XX)                                                      \
  XX(ENOTASK, -20001, "no task with that id")                                  \
  XX(EFOREIGN, -20002, "the task belongs to another session")                  \
  XX(ESTALE, -20003, "owner is not the live agent registered under its id")    \
  XX(ENOSURFACE, -20004, "no control surface is attached")                     \
  XX(ECLOSING, -20005, "the registry or the owner agent is being disposed")    \
  XX(ELIMIT, -20006, "the owner already has its maximum of live tasks")        \
  XX(EWAITTIMEOUT, -20007, "the wait's deadline passed")                       \
  XX(EABORTED, -20008, "the wait was aborted by its caller")                   \
  XX(ETHREAD, -20009, "called from a thread other than the loop's")

typedef enum {
#define UVT__ERRNO_ENUM(name, code, msg) UVT_##name = (code),
  UVT_ERRNO_MAP(UVT__ERRNO_ENUM)
#undef UVT__ERRNO_ENUM
      UVT_ERRNO_MAX = -20000
} uvt_errno_t;

/* Human-readable text for `err`.  Returns a static string; codes outside the
 * registry's band fall back to uv_strerror(). Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN const char *uvt_strerror(int err);

/* The code's name ("UVT_ENOTASK"; "EINVAL" style names for libuv's codes, as
 * uv_err_name() gives them).  Returns a static string.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN const char *uvt_err_name(int err);

/* ---------------------------------------------------------------------- */
/* Types                                                                   */

typedef struct uvt_registry_s uvt_registry_t;
typedef struct uvt_task_s uvt_task_t;
typedef struct uvt_agent_s uvt_agent_t;
typedef struct uvt_surface_s uvt_surface_t;
typedef struct uvt_listener_s uvt_listener_t;
typedef struct uvt_wait_s uvt_wait_t;
typedef struct uvt_snapshot_s uvt_snapshot_t;
typedef struct uvt_read_s uvt_read_t;
typedef struct uvt_buf_s uvt_buf_t;
typedef struct uvt_options_s uvt_options_t;
typedef struct uvt_metrics_s uvt_metrics_t;
typedef struct uvt_watch_s uvt_watch_t;

/* Status is a closed set: running -> (stopping once a kill was requested) ->
 * exactly one of completed, killed, failed. */
typedef enum {
  UVT_RUNNING = 0,
  UVT_STOPPING,
  UVT_COMPLETED,
  UVT_KILLED,
  UVT_FAILED
} uvt_status_t;

/* "running", "stopping", "completed", "killed", "failed"; "unknown" for a
 * value outside the set.  Returns a static string.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN const char *uvt_status_name(uvt_status_t status);

/* Whether `status` is terminal.  Returns 1 for completed, killed and
 * failed, else 0.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_status_is_terminal(uvt_status_t status);

typedef enum {
  UVT_KILL_REQUESTED = 1,       /* the task was live; it is now stopping */
  UVT_KILL_ALREADY_TERMINAL = 2 /* it had ended; nothing was cancelled */
} uvt_kill_result_t;

/* Log levels handed to uvt_options_t.log. */
enum {
  UVT_LOG_ERROR = 0,
  UVT_LOG_WARN = 1,
  UVT_LOG_INFO = 2,
  UVT_LOG_DEBUG = 3
};

/* Private: an intrusive doubly-linked list node. */
struct uvt__link {
  struct uvt__link *next;
  struct uvt__link *prev;
};

/* Private: an entry of a string-keyed hash index. */
struct uvt__hentry {
  struct uvt__hentry *next;
  const char *key;
  uint32_t hash;
};

/* Private: a node of the registry's deadline heap. */
struct uvt__deadline {
  struct uvt__deadline *child;
  struct uvt__deadline *sibling;
  struct uvt__deadline *prev; /* parent if first child, else left sibling */
  uint64_t due_ms;            /* loop time (uv_now) */
  int kind;
};

/* A point-in-time copy of a task record (contract §1). */
struct uvt_snapshot_s {
  const char *id;
  const char *kind;
  const char *label;
  const char *owner_session; /* NULL if unowned */
  uvt_status_t status;
  const char *detail;      /* NULL if none; "exit code: 3", "signal: SIGTERM" */
  int64_t started_at_ms;   /* epoch milliseconds */
  int64_t finished_at_ms;  /* epoch milliseconds; 0 while live */
  int reported;            /* 0 or 1 */
  const char *kill_reason; /* NULL unless a kill or teardown asked */
  /* private */
  void *mem_; /* one block holding the strings above; NULL if not owned */
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* The result of uvt_read(). `text` is NUL-terminated, `len` bytes long (the
 * bytes may include NULs), and owned by the struct. */
struct uvt_read_s {
  char *text;
  size_t len;
  uvt_snapshot_t snapshot;
  /* private */
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* Growable bytes handed to a producer's read_output hook.  Read-only fields;
 * append with uvt_buf_append(). */
struct uvt_buf_s {
  char *base;
  size_t len;
  /* private */
  size_t cap_;
};

/* How a task ended, handed to uvt_task_settle(); copied by it. */
typedef struct {
  uvt_status_t status; /* UVT_COMPLETED, UVT_KILLED or UVT_FAILED */
  const char *detail;  /* NULL = none; copied */
  const char *output;  /* final output (final kinds) or unread remainder
                          (stream kinds); NULL = none; copied */
  size_t output_len;
  /* private: zero it (designated initialisers, memset) */
  void *reserved_[4]; /* for fields to come without an ABI break */
} uvt_outcome_t;

/* A warning or a note of the registry (options.log): `level` one of
 * UVT_LOG_*, `message` one line without its newline (valid during the
 * call), `log_data` the options' log_data, last as in every callback of
 * this API that takes the host's pointer.  Changed in 0.3.0: 0.2.0 had
 * log_data first.  Thread: the loop thread, or the thread that made the
 * refused call (P-THREAD-1). */
typedef void (*uvt_log_cb)(int level, const char *message, void *log_data);

/* Option structs and the ABI (A-2, docs/contract.md §10h).
 *
 * Every option struct a host fills and passes in (uvt_options_t here;
 * uvt_process_options_t, uvt_thread_options_t, uvt_tools_options_t,
 * uvt_tools_args_t, uvt_slurm_engine_options_t, uvt_slurm_options_t)
 * starts with `size_t size`: the struct's size in the headers the host
 * was built against.  Its _init is a macro that passes the host's own
 * sizeof to the library:
 *
 *   uvt_options_t o;
 *   uvt_options_init(&o);   // uvt_options_init_size(&o, sizeof o)
 *
 * so a struct can grow at its end in a later release without breaking a
 * host built before it: _init_size writes only the host's `size` bytes
 * (the defaults of the fields it has), and a function that takes the
 * struct copies only those bytes over its own defaults; fields the host's
 * headers did not have keep their defaults.  A struct not made by its
 * _init (memset, `= {0}`) has size 0 and is refused with UV_EINVAL and a
 * log line that says to call the _init; a size below the struct's
 * smallest version too.  A size above the library's own (a host built
 * against newer headers) is taken when every byte the library does not
 * know is 0 (those fields left at their zero), else refused: a field
 * asked for is never dropped without a word.  New fields therefore go at
 * the end, and their zero means "as before".
 *
 * The old functions (uvt_options_init() and the others, declared before
 * their macros) stay exported for bindings and dlsym() users; they write
 * the whole struct of these headers, so they are only for a host built
 * against the same headers as the library. */

/* Registry options.  Initialise with uvt_options_init(). */
struct uvt_options_s {
  /* sizeof the struct in the host's headers; set by
   * uvt_options_init().  0 is refused. */
  size_t size;
  /* How long disposal waits, per task, for a cancelled producer to settle
   * (R-AGENT-4) and for a terminal task's leftover work to stop (P-KILL-4,
   * P-KILL-6), in milliseconds, counted from the disposal's cancel (or from
   * when it began to wait for the leftovers) even if the host's loop clock
   * was stale (R-TIME-1).  The force-fail detail "did not stop within N ms
   * of cancel" names what really elapsed, at least this.  Default 10000;
   * 0 = wait for ever. */
  uint64_t teardown_grace_ms;
  /* Live (running or stopping) tasks one owner may hold; unowned tasks share
   * one bucket.  Default 0 = no limit (R-LIMIT-1). */
  unsigned max_live_per_owner;
  /* Where warnings go; NULL = one line on stderr, prefixed "uvtasks: ". */
  uvt_log_cb log;
  void *log_data;
  /* private: uvt_options_init() zeroes it */
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* Counters since the registry was created (R-METRICS-1). */
struct uvt_metrics_s {
  uint64_t started;
  uint64_t completed;
  uint64_t killed;
  uint64_t failed;
  uint64_t kills;        /* uvt_kill() calls that returned 0 */
  uint64_t force_failed; /* records failed by teardown (R-AGENT-3/4) */
  uint64_t waits_timed_out;
  uint64_t waits_aborted;
  uint64_t live;    /* running + stopping now */
  uint64_t records; /* records held now, live or terminal */
  /* private */
  void *reserved_[4]; /* for fields to come without an ABI break */
};

typedef void (*uvt_close_cb)(void *data);
typedef void (*uvt_agent_cb)(uvt_agent_t *agent);
typedef void (*uvt_done_cb)(uvt_listener_t *listener,
                            const uvt_snapshot_t *snap, uvt_agent_t *owner);
typedef void (*uvt_wait_cb)(uvt_wait_t *req, int status,
                            const uvt_snapshot_t *snap);
typedef void (*uvt_change_cb)(uvt_watch_t *w, const uvt_snapshot_t *snap,
                              int dropped);

/* An agent: the owner of tasks, belonging to a session. */
struct uvt_agent_s {
  void *data;
  /* read-only */
  const char *id; /* copies, owned by the registry; NULL once disposed */
  const char *session;
  uvt_registry_t *registry;
  /* private */
  uv_loop_t *loop_;
  struct uvt__link link_;  /* registry's agent list */
  struct uvt__link tasks_; /* tasks owned by this agent */
  struct uvt__hentry hentry_;
  void *session_;
  void *mem_;
  uvt_agent_cb dispose_cb_;
  uv_idle_t *idle_; /* deferral after the registry closed */
  unsigned live_;
  unsigned starting_; /* uvt_start calls inside `run` for this owner */
  int state_;
  uv_thread_t thread_; /* the loop's thread, kept past a detach (P-THREAD-1) */
  void *reserved_[3];  /* for fields to come without an ABI break */
};

/* A control surface: anything able to read and stop tasks for a user. */
struct uvt_surface_s {
  void *data;
  /* read-only */
  const char *name; /* copy, owned by the registry while attached */
  uvt_registry_t *registry;
  /* private */
  struct uvt__link link_;
  int attached_;
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* A completion listener (R-DONE-3). */
struct uvt_listener_s {
  void *data;
  /* read-only */
  uvt_registry_t *registry;
  /* private */
  uvt_done_cb cb_;
  struct uvt__link link_;
  int active_;
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* A wait request (R-WAIT-*). */
struct uvt_wait_s {
  void *data;
  /* read-only */
  uvt_registry_t *registry;
  /* private */
  uvt_wait_cb cb_;
  uvt_task_t *task_;
  struct uvt__link link_; /* task's waits, or the registry's deferred list */
  struct uvt__deadline deadline_;
  int state_;
  int status_;
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* A change-feed watcher (R-FEED-1). */
struct uvt_watch_s {
  void *data;
  /* read-only */
  uvt_registry_t *registry;
  /* private */
  uvt_change_cb cb_;
  struct uvt__link link_;
  int active_;
  void *reserved_[4]; /* for fields to come without an ABI break */
};

/* ---------------------------------------------------------------------- */
/* Memory                                                                  */

typedef void *(*uvt_malloc_func)(size_t size);
typedef void *(*uvt_realloc_func)(void *ptr, size_t size);
typedef void *(*uvt_calloc_func)(size_t count, size_t size);
typedef void (*uvt_free_func)(void *ptr);

/* Route every allocation of the library through these functions.  Call it
 * before any other function of the library, or while no registry exists.
 * Returns 0, or UV_EINVAL if a function is NULL.  Thread: not thread-safe.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_replace_allocator(uvt_malloc_func malloc_func,
                                     uvt_realloc_func realloc_func,
                                     uvt_calloc_func calloc_func,
                                     uvt_free_func free_func);

/* ---------------------------------------------------------------------- */
/* Registry                                                                */

/* Fill the first `size` bytes of `o` with the defaults (teardown_grace_ms
 * 10000, no admission limit, log to stderr) and set o->size = size:
 * what the macro uvt_options_init(o) calls with the host's sizeof *o.
 * Writes nothing past `size` bytes; bytes past the library's own struct
 * are zeroed.  Accepts NULL.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_options_init_size(uvt_options_t *o, size_t size);

/* uvt_options_init_size(o, sizeof(uvt_options_t)) with this library's
 * sizeof: for a host (a binding, a dlsym() user) built against the same
 * headers as the library.  A C host gets the macro of this name instead,
 * which passes its own sizeof.  Accepts NULL.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_options_init(uvt_options_t *o);
#define uvt_options_init(o) uvt_options_init_size((o), sizeof *(o))

/* Create a registry on `loop`.  `o` may be NULL (defaults); it is copied
 * (its first o->size bytes, A-2).
 *
 * Returns 0, UV_EINVAL (NULL loop or out; `o` not made by
 * uvt_options_init(), size 0, or of a size this library refuses, A-2, with
 * a line on stderr), UV_ENOMEM (also when the settle
 * queue's mutex cannot be made), or the error of uv_async_init() (the
 * registry's timer cannot fail to initialise on Unix).  On error *out is
 * untouched and nothing is left on the loop.
 * Ownership: the library allocates the registry and frees it after the
 * uvt_registry_close() callback returns.
 * Thread: the loop thread.  The calling thread becomes the registry's loop
 * thread (P-THREAD-1): every function documented "Thread: the loop
 * thread" that takes this registry (or a record, agent, listener, watch,
 * wait or tool surface of it), here and in uvtasks/process.h, thread.h and
 * tools.h, refuses a call from any other thread with UVT_ETHREAD and a
 * log line, before it touches anything.  uvt_task_settle() and
 * uvt_process_stop_all_now() are for any thread.
 * Descriptors: the host keeps 0, 1 and 2 open for the registry's life (to
 * /dev/null if it has nothing else), as libuv itself needs: the handles
 * and pipes the registry makes would otherwise take those numbers, and
 * libuv neither closes a descriptor below 3 (a task's pipe would stay
 * open) nor survives closing its own there (an assertion at
 * uv_loop_close()).
 * Since: 0.1.0 */
UVT_EXTERN int uvt_registry_new(uv_loop_t *loop, const uvt_options_t *o,
                                uvt_registry_t **out);

/* Dispose of the registry (R-CLOSE-1): listeners stop first, starts and
 * waits are refused (UVT_ECLOSING), every live task is cancelled with reason
 * "tasks service disposed", settlement is awaited (bounded by
 * teardown_grace_ms), pending waits get their terminal snapshots, every
 * record is dropped, registered agents are detached, every libuv handle of
 * ours is closed; then `cb(data)` runs once.  A task force-failed at the
 * grace is still stopped before `cb`: a process task gets SIGKILL at the
 * force-fail and `cb` waits until its processes are gone (at most its
 * grace_ms + 10 s for SIGKILL to be answered, and its drain_ms), and a
 * spawn still held by a stopped spawn helper is waited for (P-SPAWN-7).
 *
 * Returns 0, UV_EINVAL (NULL reg), or UVT_ECLOSING if close was already
 * requested (`cb` will not run for this call).  `cb` may be NULL.
 * Callback: once, on the loop thread, never inside this call; after it the
 * host's uv_run() returns with nothing of ours active (R-CLOSE-2).
 * Ownership: `reg` is freed by the library right after `cb` returns.
 * Thread: the loop thread; may be called from any of our callbacks
 * (R-CLOSE-3).
 * Since: 0.1.0 */
UVT_EXTERN int uvt_registry_close(uvt_registry_t *reg, uvt_close_cb cb,
                                  void *data);

/* The loop the registry runs on.
 * Returns NULL for a NULL registry.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN uv_loop_t *uvt_registry_loop(const uvt_registry_t *reg);

/* Copy the counters into *m (R-METRICS-1); does nothing if either is NULL.
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_registry_metrics(const uvt_registry_t *reg,
                                     uvt_metrics_t *m);

/* Write a human-readable dump of tasks, agents, surfaces, listeners and
 * pending waits to `fp` (R-DUMP-1).  Returns 0, UV_EINVAL (NULL reg or fp)
 * or UV_EIO (writing failed).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_registry_print(const uvt_registry_t *reg, FILE *fp);

/* ---------------------------------------------------------------------- */
/* Surfaces (R-SURF-1)                                                     */

/* Declare that a control surface exists; uvt_start() refuses work while no
 * surface is attached.  Each attach counts on its own.
 * Returns 0, UV_EINVAL (NULL argument or empty name), UV_EBUSY (`s` is
 * attached, R-BUSY-1), UVT_ECLOSING, UV_ENOMEM.
 * Ownership: `name` is copied.  Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_surface_attach(uvt_registry_t *reg, uvt_surface_t *s,
                                  const char *name);

/* Detach; idempotent, accepts NULL; never touches tasks (R-DONE-5).  Safe
 * after the registry closed (close detaches every surface).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_surface_detach(uvt_surface_t *s);

/* ---------------------------------------------------------------------- */
/* Agents (R-OWN-*, R-AGENT-*)                                             */

/* Register `a` under `agent_id` in session `session_id`.
 * Returns 0, UV_EINVAL (NULL or empty argument), UV_EBUSY (`a` is in use:
 * registered, disposing, or its dispose callback has not run yet;
 * R-BUSY-1), UVT_ECLOSING, UV_EEXIST (an agent with that id is registered,
 * R-OWN-3), UV_ENOMEM.
 * Ownership: both strings are copied; a->id and a->session point at the
 * copies until disposal completes.  Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_agent_register(uvt_registry_t *reg, uvt_agent_t *a,
                                  const char *agent_id, const char *session_id);

/* Dispose of `a` (R-AGENT-1..4): refuse its new starts (UVT_ECLOSING), mark
 * its tasks reported, cancel the live ones with reason "owner disposed",
 * wait for each to settle (bounded by teardown_grace_ms), stop what their
 * work left behind (P-KILL-4), drop their records, unregister the agent, then
 * call `cb(a)`.  Only tasks owned by this exact agent object are drained
 * (R-AGENT-2).  After the registry closed, it only calls `cb`.
 *
 * Returns 0, UV_EINVAL (NULL, or not registered: never, or already
 * disposed), UVT_ECLOSING (dispose already requested and its callback not
 * run yet; `cb` will not run for this call), UV_ENOMEM (only after the
 * registry closed), UVT_ETHREAD (another thread than the loop's, even
 * after the registry closed: P-THREAD-1; the line goes to stderr then, as
 * no log hook is left).  `cb` may be NULL.
 * Callback: once, on the loop thread, never inside this call.  `a` may be
 * freed or registered again from `cb` on.
 * Thread: loop thread; allowed inside any of our callbacks (R-CLOSE-3).
 * Since: 0.1.0 */
UVT_EXTERN int uvt_agent_dispose(uvt_agent_t *a, uvt_agent_cb cb);

/* ---------------------------------------------------------------------- */
/* Listeners (R-DONE-3..5)                                                 */

/* Call `cb` once for every task record that becomes terminal from now on,
 * with its terminal snapshot and its owner (the exact agent, or NULL).
 * Returns 0, UV_EINVAL (NULL argument), UV_EBUSY (`l` is started,
 * R-BUSY-1), UVT_ECLOSING.
 * Callback: on the loop thread; listeners run in start order, after the
 * record is final and before wait callbacks; a listener started during a
 * dispatch is not called for it; none runs once registry close began.
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_listener_start(uvt_registry_t *reg, uvt_listener_t *l,
                                  uvt_done_cb cb);

/* Stop; idempotent, accepts NULL; never touches tasks.  Safe inside any
 * callback, including the listener's own, and after the registry closed
 * (close stops every listener).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_listener_stop(uvt_listener_t *l);

/* ---------------------------------------------------------------------- */
/* Change feed (R-FEED-1) and retention (R-FORGET-1)                       */

/* Call `cb` once per transition of every task from now on: registered
 * (running), kill requested (stopping), settled (terminal), record dropped
 * (`dropped` = 1, the record's last snapshot).  The feed is host-level: it
 * sees every session's tasks, so a surface that forwards it filters by
 * owner_session itself.
 * Returns 0, UV_EINVAL (NULL argument), UV_EBUSY (`w` is started,
 * R-BUSY-1), UVT_ECLOSING.
 * Callback: on the loop thread, in the order the transitions happened,
 * never inside the call that caused them; a terminal transition reaches
 * watchers after the listeners (R-DONE-3); containment as for listeners
 * (R-DONE-4); silent once registry close began.  The snapshot's status is
 * the one the transition produced; its other fields are current.
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_watch_start(uvt_registry_t *reg, uvt_watch_t *w,
                               uvt_change_cb cb);

/* Stop; idempotent, accepts NULL; never touches tasks; safe after the
 * registry closed.
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_watch_stop(uvt_watch_t *w);

/* Forget a terminal record (R-FORGET-1, R-FORGET-2): later lookups and
 * lists no longer see it (UVT_ENOTASK), from this call on.  The record
 * itself is dropped (the release hook runs, watchers get the dropped
 * transition, disposal stops waiting for it) as soon as nothing needs it:
 *  - at once, inside this call, when the dispatch of its end is over
 *    (called from a watch callback, a wait on a task that had already
 *    ended, or any later code);
 *  - right after that dispatch when called inside it: from the producer's
 *    settled hook, a listener told about its end, or a wait callback that
 *    reports its end.  The listeners and wait callbacks still to come in
 *    that dispatch get their terminal snapshot as usual (a lookup by id
 *    from them gives UVT_ENOTASK);
 *  - after what its work left behind stopped: the producer's quiesce hook
 *    runs first (P-KILL-4), or a quiesce already in progress (P-KILL-6) is
 *    awaited, bounded by teardown_grace_ms.
 * A record an agent or registry disposal already holds is dropped by that
 * disposal; forgetting it only hides it.  Long-lived hosts use this to
 * bound retention; the tool surface and the bindings call it from their
 * wait callbacks.
 * Returns 0, UV_EINVAL (NULL reg or id), UVT_ENOTASK, UVT_EFOREIGN (an
 * owned task and a caller of another session, or a NULL caller, R-OWN-2),
 * UV_EBUSY (the task is live: running or stopping, also while its outcome
 * waits in the settle queue).
 * Thread: loop thread; allowed inside any of our callbacks and hooks.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_forget(uvt_registry_t *reg, const char *id,
                          const uvt_agent_t *caller);

/* The bytes of output the record of `id` holds now: an ended task's final
 * output or unread remainder, kept until the record is dropped (reads do
 * not free it); 0 while the task runs (its producer holds that output).
 * Hosts that bound retention by memory (N-8) add these up.
 * Returns the count (>= 0), UV_EINVAL (NULL reg or id), UVT_ENOTASK,
 * UVT_EFOREIGN, UVT_ETHREAD (another thread, P-THREAD-1).
 * Thread: loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int64_t uvt_held_bytes(uvt_registry_t *reg, const char *id,
                                  const uvt_agent_t *caller);

/* ---------------------------------------------------------------------- */
/* Producers (R-START-*, R-DONE-*)                                         */

/* The producer's hooks, filled by spec->run. */
typedef struct {
  /* Required.  Ask the work to stop (R-KILL-1..3).  A repeated call means
   * "stop now".  Return 0 or a negative error (the kill then fails and the
   * task is untouched).  Loop thread. */
  int (*cancel)(uvt_task_t *t, const char *reason);
  /* Stream kinds: append what was produced since the last call to `out`
   * and consume it (R-READ-1).  NULL = a final-output kind (R-READ-2).
   * Return 0 or a negative error.  Loop thread. */
  int (*read_output)(uvt_task_t *t, uvt_buf_t *out);
  /* Optional.  Called once, on the loop thread, when the record is dropped;
   * no hook is called after it. */
  void (*release)(uvt_task_t *t);
  /* Optional.  Called once, on the loop thread, when the producer's outcome
   * is recorded, before any listener or wait sees it; the last step towards
   * quiescence (the thread producer joins its thread here). */
  void (*settled)(uvt_task_t *t);
  /* Optional.  Stop whatever the work left running after the task ended
   * (a process group's survivors).  Called on the loop thread, for a
   * terminal task whose producer settled: by a kill of the ended task
   * (P-KILL-6; the kill does not wait), and by a disposal (agent,
   * registry, uvt_forget) before it drops the record (P-KILL-4).  So it
   * may be called more than once.  Return 0 if nothing is left, or 1 if
   * something is being stopped: call uvt_task_quiescent(t) once it is
   * gone.  While a call's stop is in progress it is called again only by
   * another kill of the ended task, which means "stop now" (v4, S-9: as a
   * second cancel does, R-KILL-3); 0 then says nothing is left.  A
   * disposal that finds a quiesce in progress waits for it (bounded by
   * teardown_grace_ms) instead of calling the hook again; once it stops
   * waiting, the release hook comes next, and the producer must stop what
   * is left on its own. */
  int (*quiesce)(uvt_task_t *t);
  /* Optional, stream kinds only (P-OUT-6, v4).  Work can still write after
   * the task ended (a process task's leftovers keep its pipes): append
   * what arrived since the last call to `out` and consume it.  A read of
   * the ended task (uvt_read()) calls it after handing over the
   * remainder, every time, never before the outcome is recorded and never
   * after release.  On an error nothing may be consumed (what it appended
   * is taken back); the read then returns without those bytes, which stay
   * for the next read.  Loop thread. */
  int (*read_late)(uvt_task_t *t, uvt_buf_t *out);
} uvt_hooks_t;

/* What a producer declares before its work starts. */
typedef struct {
  const char *kind;   /* 1-64 bytes of printable ASCII, no space; id prefix */
  const char *label;  /* non-empty, human-readable */
  uvt_agent_t *owner; /* NULL = unowned */
  /* Start the work and fill *hooks_out.  Called exactly once, synchronously,
   * inside uvt_start().  On error return nothing is registered and the
   * producer must undo its own partial start (and must not have settled).
   * It may call the library (R-REENTER-1); see uvt_start() for a disposal
   * or a close begun in here. */
  int (*run)(uvt_task_t *t, void *arg, uvt_hooks_t *hooks_out);
  void *arg;
  /* R-START-6 (v3): NULL = the kind's next number.  A producer that
   * re-adopts work (the Slurm engine's adopt_all) names the id it had, of
   * its own kind: "<kind>-<n>", n a decimal from 1 with no leading zero.
   * Refused with UV_EEXIST while a record (live, or terminal and not yet
   * dropped) has it; once committed, the kind's counter never hands that
   * number out again. */
  const char *id;
  /* private: zero it (designated initialisers, memset) */
  void *reserved_[3]; /* for fields to come without an ABI break */
} uvt_spec_t;

/* Register and start a task (R-START-1..5).  Every check runs before `run`:
 * the surface fence, validation of kind and label, the owner check, the
 * admission limit and every allocation the commit needs; once `run` returns
 * 0 nothing can fail.  The id "<kind>-<n>" is written to `id_out` (may be
 * NULL) and the record exists when this returns.
 *
 * Re-entrancy (R-REENTER-1, C-24): `run` may call anything.  A start made
 * inside `run` counts the outer one as live for max_live_per_owner, and
 * commits first (it takes the lower id number).  If `run` disposed the
 * owner or closed the registry and then returns 0, the start still
 * succeeds and the new task is handed to that disposal at once: it is
 * marked reported and its cancel hook runs ("owner disposed", or "tasks
 * service disposed") before uvt_start returns.  The disposal waits for the
 * start to finish, so its callback comes after that task is dropped.
 *
 * Returns, in the order checked: UV_EINVAL (NULL reg or spec), UVT_ECLOSING
 * (the registry is being disposed), UVT_ENOSURFACE, UV_EINVAL (bad kind or
 * label, NULL run, a spec->id not of the form "<kind>-<n>"), UV_EEXIST
 * (spec->id names a record that exists, R-START-6), UVT_ECLOSING (the
 * owner is being disposed) or
 * UVT_ESTALE (owner not the live registered agent, R-OWN-1), UVT_ELIMIT
 * (R-LIMIT-1), UV_ENOMEM, the error `run` returned; else 0.  On error
 * nothing is registered and no id number is used.
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_start(uvt_registry_t *reg, const uvt_spec_t *spec,
                         char id_out[UVT_ID_MAX]);

/* The spec's `arg`.  Returns NULL for NULL.  Thread: any (the value never
 * changes).
 * Since: 0.1.0 */
UVT_EXTERN void *uvt_task_arg(const uvt_task_t *t);

/* The task's id; valid from the commit (after `run` returns) until the
 * record is dropped.  Thread: loop thread.
 * Returns NULL before the commit or for NULL.
 * Since: 0.1.0 */
UVT_EXTERN const char *uvt_task_id(const uvt_task_t *t);

/* The registry the task belongs to.  Thread: any.
 * Returns NULL for NULL.
 * Since: 0.1.0 */
UVT_EXTERN uvt_registry_t *uvt_task_registry(const uvt_task_t *t);

/* Report how the work ended, at quiescence (R-DONE-1..3).  The outcome is
 * copied and applied on the loop thread through the registry's async
 * handle.  The first outcome wins; later ones are ignored and logged.  After
 * the first settle no hook other than `settled` and `release` is called.
 * A settle after the record was force-failed or dropped, or after the
 * registry closed, is harmless.
 *
 * Returns 0, or UV_EINVAL (NULL t or outcome, or a status that is not
 * terminal).  If the copies cannot be allocated the status is still recorded,
 * with detail "outcome text lost: out of memory". Ownership: the task handle
 * stays valid until the producer settles; once the record is also dropped, it
 * is freed, so a producer must not use `t` after both its settle and its
 * release hook. Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_task_settle(uvt_task_t *t, const uvt_outcome_t *outcome);

/* Tell the registry that the leftover work a `quiesce` call is stopping is
 * gone.  Only after that call returned 1 (or from inside it), at most once
 * per such call, before `release`.  A disposal that waited for it drops
 * the record now; if none waits, the record stays.  Accepts NULL and a task
 * with no quiesce in progress (then it does nothing).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_task_quiescent(uvt_task_t *t);

/* Append `len` bytes to `b`.  Returns 0, UV_EINVAL (NULL b, or NULL bytes
 * with len > 0) or UV_ENOMEM (b unchanged).
 * Thread: the thread that owns `b` (the loop thread inside read_output).
 * Since: 0.1.0 */
UVT_EXTERN int uvt_buf_append(uvt_buf_t *b, const void *bytes, size_t len);

/* ---------------------------------------------------------------------- */
/* Operations (loop thread)                                                */

/* Snapshot one task without changing anything (R-GET-1).
 * Returns 0, UV_EINVAL (NULL reg, id or out), UVT_ENOTASK, UVT_EFOREIGN
 * (an owned task and a caller of another session, or a NULL caller,
 * R-OWN-2), UV_ENOMEM.  Ownership: *out is the caller's; free it with
 * uvt_snapshot_cleanup().
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_get(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, uvt_snapshot_t *out);

/* Snapshots of the caller's session's tasks plus unowned ones, in
 * registration order; a NULL caller sees unowned tasks only (R-LIST-1).
 * Cost grows with what is returned.
 * Returns 0, UV_EINVAL (NULL reg, out or count), UV_ENOMEM (*out NULL and
 * *count 0).  Ownership: *out (NULL when *count is 0)
 * is the caller's; free with uvt_snapshots_free(*out, *count).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_list(uvt_registry_t *reg, const uvt_agent_t *caller,
                        uvt_snapshot_t **out, size_t *count);

/* Read the task's output (R-READ-1..3): a stream kind returns what was
 * produced since the previous read and consumes it; a final kind returns
 * nothing while live and its whole output once terminal, on every read.  A
 * read that finds the task terminal marks it reported.  For a stream kind
 * with a read_late hook (the process producer, P-OUT-6), the reads of the
 * ended task also return what its work wrote after the end (a process
 * task's leftovers holding its pipes), after the remainder.
 * Returns 0, UV_EINVAL (NULL reg, id or out), UVT_ENOTASK, UVT_EFOREIGN
 * (the task is owned and `caller` is of another session or a disposed
 * agent, or `caller` is NULL: a read of an agent's task with no caller is
 * UVT_EFOREIGN, as a NULL caller reads unowned tasks only, R-OWN-2;
 * nothing is consumed), UV_EBUSY (from inside this task's own
 * read_output hook, R-REENTER-1), UV_ENOMEM, or the producer's
 * read_output error.  Ownership: *out is the caller's; free with
 * uvt_read_cleanup(). Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_read(uvt_registry_t *reg, const char *id,
                        const uvt_agent_t *caller, uvt_read_t *out);

/* Kill (R-KILL-1..4, P-KILL-6).  A live task's producer cancel(reason) runs
 * first; if it fails, that error is returned and the task is untouched.
 * Otherwise the task becomes stopping, is marked reported, keeps the first
 * reason, and *result is UVT_KILL_REQUESTED.  A terminal task is marked
 * reported and *result is UVT_KILL_ALREADY_TERMINAL; its outcome stays,
 * and the producer's quiesce hook (if any) is asked to stop what the work
 * left running, without waiting for it (P-KILL-6: `server &` left by a
 * finished command); asked again while that stop is in progress, it
 * stops what is left at once (v4, S-9: the process producer's SIGKILL
 * without the rest of grace_ms).
 * `reason` NULL = "killed"; `result` may be NULL.
 * Returns 0, UV_EINVAL (NULL reg or id), UVT_ENOTASK, UVT_EFOREIGN (an
 * owned task and a caller of another session, or a NULL caller, R-OWN-2),
 * UV_EBUSY (from inside this task's own cancel hook, R-REENTER-1),
 * UV_ENOMEM, or the producer's cancel error.  If the cancel hook itself
 * disposed the task's owner or closed the registry, that disposal's cancel
 * is this same call (the hook is not entered again), its reason is the one
 * kept, and a failing cancel force-fails the record as R-AGENT-3 says.
 * Thread: loop thread; the cancel hook runs inside this call.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_kill(uvt_registry_t *reg, const char *id,
                        const uvt_agent_t *caller, const char *reason,
                        uvt_kill_result_t *result);

/* Wait for a task to end, at most `timeout_ms` milliseconds from this call
 * (R-WAIT-1..7).  The timeout counts from the call even when the host
 * blocked its loop before calling (R-TIME-1): it never ends early, and at
 * most a millisecond late beyond what the loop's own delays add.
 * Returns 0, UV_EINVAL (NULL argument, timeout 0), UV_EBUSY (`req` is
 * pending: its callback has not run yet, C-23, R-BUSY-1), UVT_ENOTASK,
 * UVT_EFOREIGN (an owned task and a caller of another session, or a NULL
 * caller, R-OWN-2), UVT_ECLOSING; checked in that order, except that the
 * timeout is checked after the id (R-WAIT-1).
 * Callback: once, never inside this call, with
 *   status 0 and the terminal snapshot (marked reported), or
 *   UVT_EWAITTIMEOUT and the live snapshot (task and `reported` untouched),
 *   or UVT_EABORTED and NULL (see uvt_wait_abort()).
 * `req` may be reused or freed from the callback on.
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_wait(uvt_registry_t *reg, uvt_wait_t *req, const char *id,
                        uint64_t timeout_ms, const uvt_agent_t *caller,
                        uvt_wait_cb cb);

/* Abort a pending wait (R-WAIT-5): its callback gets UVT_EABORTED and NULL,
 * unless settlement already counted the waiter, in which case it still gets
 * status 0 and the terminal snapshot.  Either way the task is untouched.
 * Returns 0, or UV_EINVAL if `req` is NULL or not pending (never submitted,
 * its callback ran, or it is already due with UVT_EABORTED).
 * Thread: loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_wait_abort(uvt_wait_t *req);

/* Free a snapshot's memory and zero it; accepts NULL and snapshots that own
 * nothing (those handed to callbacks).
 * Thread: any (it touches only `s`).
 * Since: 0.1.0 */
UVT_EXTERN void uvt_snapshot_cleanup(uvt_snapshot_t *s);

/* Free an array from uvt_list(); accepts NULL.
 * Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_snapshots_free(uvt_snapshot_t *a, size_t n);

/* Free a read's text and snapshot and zero it; accepts NULL.
 * Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_read_cleanup(uvt_read_t *r);

/* Make *dst an owned copy of *src.  Returns 0,
 * UV_EINVAL (NULL dst or src) or UV_ENOMEM (*dst zeroed).
 * Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_snapshot_copy(uvt_snapshot_t *dst,
                                 const uvt_snapshot_t *src);

#ifdef __cplusplus
}
#endif

#endif /* UVTASKS_H */
