/* The Node.js binding's internal header (contract §8).
 *
 * One registry per `new TaskRegistry()`, on the libuv loop of the Node
 * environment (main thread or worker) that created it.  Everything here runs
 * on that loop's thread.  The JS wrapper (index.js) owns the API's shape;
 * this layer maps each JS call onto one library call and each library
 * callback onto one JS call, adding no semantics (N-4):
 *
 *  - every handle the host embeds in C (surface, agent, listener, watch,
 *    wait) is one C object per JS object, so the library's own rules
 *    (containment, exactly-once, R-BUSY-1) are the ones JS sees;
 *  - errors become thrown Errors whose `code` is uvt_err_name() (N-1);
 *  - a callback from the loop runs inside a callback scope, so promises it
 *    resolves run their reactions before the loop goes on (N-2);
 *  - each registry adds an async cleanup hook that closes it when the
 *    environment is torn down, and removes the hook from its close callback
 *    (N-3).
 *
 * Lifetimes: each C object that JS can name is reference counted: one count
 * for the JS value that holds it (a napi External, released by its
 * finalizer) and one while the library holds it (released by the library's
 * last callback for it, or by registry close).  It is freed at zero, so a
 * late JS call (detach after close) finds a live object in a final state. */
#ifndef UVTN_H
#define UVTN_H

#include <stddef.h>
#include <stdint.h>

#include <node_api.h>

#include <uvtasks.h>
#include <uvtasks/process.h>

typedef struct uvtn_env_s uvtn_env_t;
typedef struct uvtn_reg_s uvtn_reg_t;

/* A small intrusive list (the library's own is internal to it). */
typedef struct uvtn_link_s {
  struct uvtn_link_s *next;
  struct uvtn_link_s *prev;
} uvtn_link_t;

void uvtn_list_init(uvtn_link_t *h);
void uvtn_list_insert(uvtn_link_t *h, uvtn_link_t *n);
void uvtn_list_remove(uvtn_link_t *n);

#define uvtn_container_of(ptr, type, member)                                   \
  ((type *)((char *)(ptr)-offsetof(type, member)))

/* Per Node environment (napi_set_instance_data). */
struct uvtn_env_s {
  napi_env env;
  uv_loop_t *loop;
  int depth;         /* native calls from JS in progress, plus open scopes */
  int tearing_down;  /* an environment cleanup hook ran: no JS from now on */
  int in_kill;       /* inside uvt_kill() called by kill(): a JS cancel's
                        exception propagates to the caller (R-KILL-1) */
  uvtn_link_t regs;  /* registries not yet closed */
  long output_refs;  /* onOutput functions held (outputRefs(), tests) */
  long js_unsettled; /* JS tasks started and not yet settled (jsUnsettled(),
                        tests) */
};

/* One TaskRegistry. */
struct uvtn_reg_s {
  uvtn_env_t *st;
  uvt_registry_t *reg; /* NULL once its close callback ran */
  uvtn_link_t link;    /* st->regs */
  napi_ref resource;   /* the TaskRegistry object (strong) */
  napi_async_context async_ctx;
  napi_async_cleanup_hook_handle cleanup;
  napi_ref close_cb;    /* JS close() callback, or NULL */
  uvtn_link_t agents;   /* agents registered, for close */
  uvtn_link_t surfaces; /* surfaces attached, for close */
  uvtn_link_t subs;     /* listeners and watchers started */
  uvtn_link_t outputs;  /* onOutput functions of tasks not yet ended */
  uvt_listener_t ended; /* releases a task's onOutput at its end */
  int closing;
  int refs; /* JS External + open registry */
  /* N-13: the library's error lines logged during a spawn() call, kept
   * for the error it throws (NULL: none).  Only the loop thread's. */
  int capturing;
  char *captured;
  uv_thread_t loop_thread;
  /* The reason of the last sandbox that could not be made, per network
   * setting: the library logs it once and then answers ENOTSUP alone. */
  char *sandbox_why[2];
};

/* N-13: the registry's log hook: one line on stderr ("uvtasks: ..."), as
 * the library's default, except the error lines of a spawn() call in
 * progress, which its error carries instead (uvtn_capture_end()). */
void uvtn_log(int level, const char *message, void *data);
void uvtn_capture_begin(uvtn_reg_t *r);
/* The captured lines (the caller frees them), or NULL; with `flush` they
 * go to stderr instead and NULL is returned. */
char *uvtn_capture_end(uvtn_reg_t *r, int flush);

/* ---- addon.c: environment, scopes, errors, the registry object. */

/* Enter/leave a native call made from JS (counts depth, so that a callback
 * from inside the call runs in the caller's scope).
 *
 * Node calls in from JS with the loop's clock as of the start of the loop
 * turn, however long JS ran since.  The library refreshes the clock
 * itself wherever a duration starts (R-TIME-1: before every timer it
 * arms, and it measures elapsed time with uv_hrtime), so the binding does
 * not: refreshing it at every entry would also move the clock that Node's
 * own timers read, in calls (get, list, read) that start no duration. */
uvtn_env_t *uvtn_enter(napi_env env);
void uvtn_leave(uvtn_env_t *st);

/* Where a callback of the library calls JS: a handle scope, plus a callback
 * scope when no JS is on the stack (N-2).  `ok` is 0 when JS cannot run
 * (the environment is being torn down). */
typedef struct {
  uvtn_env_t *st;
  napi_handle_scope hs;
  napi_callback_scope cs;
  napi_async_context own_ctx; /* after registry close */
  int has_cs;
  int has_own_ctx;
  int ok;
} uvtn_scope_t;

void uvtn_scope_open(uvtn_reg_t *r, uvtn_scope_t *s);
void uvtn_scope_close(uvtn_scope_t *s);
/* Call `fn` with `argc` values; an exception it throws is reported as
 * uncaught (process 'uncaughtException'), as for any callback from the loop.
 * Returns 0, or -1 if the call did not return normally. */
int uvtn_call(uvtn_scope_t *s, napi_ref fn, size_t argc, napi_value *argv);

/* Throw an Error for library code `err` with `code` = uvt_err_name(err)
 * and `errno` = err (N-1); `what` (may be NULL) names the operation. */
void uvtn_throw(napi_env env, int err, const char *what, const char *id);
/* Throw a TypeError with code ERR_INVALID_ARG_TYPE style `code`. */
void uvtn_throw_type(napi_env env, const char *msg);

/* The registry behind a JS handle, or NULL after throwing (closed: ECLOSING).
 */
uvtn_reg_t *uvtn_reg_arg(napi_env env, napi_value v, int need_open);
void uvtn_reg_unref(uvtn_reg_t *r);

/* ---- convert.c */
napi_value uvtn_snapshot(napi_env env, const uvt_snapshot_t *s);
/* A string argument copied into malloc'd memory (NULL after throwing);
 * `optional`: undefined/null give *out NULL and return 1. */
int uvtn_string(napi_env env, napi_value v, const char *name, int optional,
                char **out);
/* A number argument as uint64 milliseconds/bytes (>= 0, finite).
 * Returns 1, or 0 after throwing; undefined leaves *out unchanged. */
int uvtn_u64(napi_env env, napi_value v, const char *name, uint64_t *out);
/* Bytes of a string or Buffer/Uint8Array argument (malloc'd copy). */
int uvtn_bytes(napi_env env, napi_value v, const char *name, char **out,
               size_t *len);
napi_value uvtn_undefined(napi_env env);
/* A new External pointing at `p`; `fin` runs when JS lets go of it. */
napi_value uvtn_external(napi_env env, void *p, napi_finalize fin);
void *uvtn_external_value(napi_env env, napi_value v);

/* ---- handles.c: agents (the caller/owner argument lives here). */
typedef struct {
  uvt_agent_t agent; /* first: the library hands it back to us */
  uvtn_reg_t *r;
  uvtn_link_t link; /* r->agents while registered */
  napi_ref obj;     /* the JS agent object (strong while registered) */
  napi_ref dispose_cb;
  int registered; /* the library holds it (until dispose's cb or close) */
  int refs;
} uvtn_agent_t;

/* The caller argument: undefined/null -> NULL; an agent handle -> its
 * uvt_agent_t.  Returns 1, or 0 after throwing. */
int uvtn_caller_arg(napi_env env, napi_value v, uvtn_agent_t **out);
/* The JS agent object of an owner handed to a callback (NULL: undefined). */
napi_value uvtn_owner_value(napi_env env, uvt_agent_t *owner);
/* Registry close: the library detached every agent and surface and stopped
 * every listener and watcher; drop our hold on each. */
void uvtn_handles_closed(uvtn_reg_t *r);

/* ---- handles.c: the registry, id and caller of a call on one task. */
int uvtn_task_args(napi_env env, napi_value *argv, uvtn_reg_t **r, char **id,
                   uvt_agent_t **caller);

/* ---- process.c: onOutput functions (P-EVT-1).  A task's function is
 * released at its terminal transition (after which the library never calls
 * it), found by id; registry close releases the rest. */
void uvtn_outputs_done(uvtn_reg_t *r, const char *id);
void uvtn_outputs_closed(uvtn_reg_t *r);

/* ---- native functions, one file per concept. */
napi_value uvtn_create(napi_env env, napi_callback_info info);
napi_value uvtn_close(napi_env env, napi_callback_info info);
napi_value uvtn_metrics(napi_env env, napi_callback_info info);
napi_value uvtn_attach_surface(napi_env env, napi_callback_info info);
napi_value uvtn_detach_surface(napi_env env, napi_callback_info info);
napi_value uvtn_register_agent(napi_env env, napi_callback_info info);
napi_value uvtn_dispose_agent(napi_env env, napi_callback_info info);
napi_value uvtn_listen(napi_env env, napi_callback_info info);
napi_value uvtn_unlisten(napi_env env, napi_callback_info info);
napi_value uvtn_watch(napi_env env, napi_callback_info info);
napi_value uvtn_unwatch(napi_env env, napi_callback_info info);
napi_value uvtn_wait(napi_env env, napi_callback_info info);
napi_value uvtn_wait_abort(napi_env env, napi_callback_info info);
napi_value uvtn_get(napi_env env, napi_callback_info info);
napi_value uvtn_list(napi_env env, napi_callback_info info);
napi_value uvtn_read(napi_env env, napi_callback_info info);
napi_value uvtn_kill(napi_env env, napi_callback_info info);
napi_value uvtn_forget(napi_env env, napi_callback_info info);
napi_value uvtn_start(napi_env env, napi_callback_info info);
napi_value uvtn_settle(napi_env env, napi_callback_info info);
napi_value uvtn_spawn(napi_env env, napi_callback_info info);
napi_value uvtn_pid(napi_env env, napi_callback_info info);
napi_value uvtn_write(napi_env env, napi_callback_info info);
napi_value uvtn_close_stdin(napi_env env, napi_callback_info info);
napi_value uvtn_resize(napi_env env, napi_callback_info info);
napi_value uvtn_stop_all_now(napi_env env, napi_callback_info info);
napi_value uvtn_read_process(napi_env env, napi_callback_info info);
napi_value uvtn_read_chunks(napi_env env, napi_callback_info info);
napi_value uvtn_proc_status(napi_env env, napi_callback_info info);
napi_value uvtn_signal(napi_env env, napi_callback_info info);
napi_value uvtn_held_bytes(napi_env env, napi_callback_info info);
napi_value uvtn_output_refs(napi_env env, napi_callback_info info);
napi_value uvtn_js_unsettled(napi_env env, napi_callback_info info);
/* D-3: adopt(reg, stateDir, owner) -> count; stopDurable(reg, on). */
napi_value uvtn_adopt(napi_env env, napi_callback_info info);
napi_value uvtn_stop_durable(napi_env env, napi_callback_info info);

#endif /* UVTN_H */
