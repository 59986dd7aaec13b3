/* The Lua module's internal header (docs/contract.md §10g, LU-1..LU-3).
 *
 * One registry per `uvt.new{}`, on the luv loop of the Lua state that
 * loaded the module (luv_loop(L): in Neovim `vim.uv` / `vim.loop`, in any
 * other luv host the loop of `require('luv')`).  Everything here runs on
 * that loop's thread.  Each Lua call maps onto one library call and each
 * library callback onto one Lua call, adding no semantics of its own, as
 * the Node binding does (N-4).
 *
 * Calling Lua from the loop (LU-2).  A library callback runs inside the
 * host's uv_run(), under libuv's frames: a Lua error must never unwind
 * through them.  So every entry into Lua from a callback is made by
 * uvtl_call_lua(): lua_cpcall() runs a C function in protected mode (the
 * values it builds may fail to allocate), and that function hands the
 * user's function to the host's own protected caller, luv's cb_pcall with
 * LUVF_CALLBACK_NOEXIT.  In Neovim that is the one luv callbacks use: it
 * marks the call "fast" (vim.api then needs vim.schedule) and reports an
 * error as "Error executing luv callback"; in a plain luv host it writes
 * the error and its traceback to stderr and goes on.  Either way a
 * throwing callback is logged and contained.
 *
 * Lifetimes.  A registry's userdata holds a pointer to a C struct
 * (uvtl_reg_t) that outlives it if need be: the struct is reference
 * counted (the userdata, the open registry, each C object that points at
 * it).  While the registry is open its userdata is anchored in the Lua
 * registry (LUA_REGISTRYINDEX), so dropping the last Lua reference to an
 * open registry never closes it behind the host's back, nor runs its
 * close from inside a garbage collection step (which may happen inside a
 * libuv callback, where the loop cannot be run).  Close (reg:close(), the
 * end of Neovim, lua_close() of the state) lets go of the anchor and of
 * every function reference the registry held.  Every Lua function the
 * library may call back is held by a reference in LUA_REGISTRYINDEX,
 * released by the last callback for it or by registry close. */
#ifndef UVTL_H
#define UVTL_H

#include <stddef.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include <uvtasks.h>
#include <uvtasks/process.h>

/* Metatable names. */
#define UVTL_REG_MT "uvtasks.registry"
#define UVTL_AGENT_MT "uvtasks.agent"
#define UVTL_WAIT_MT "uvtasks.wait"

typedef struct uvtl_reg_s uvtl_reg_t;
typedef struct uvtl_agent_s uvtl_agent_t;

/* A small intrusive list (the library's own is internal to it). */
typedef struct uvtl_link_s {
  struct uvtl_link_s *next;
  struct uvtl_link_s *prev;
} uvtl_link_t;

void uvtl_list_init(uvtl_link_t *h);
void uvtl_list_insert(uvtl_link_t *h, uvtl_link_t *n);
void uvtl_list_remove(uvtl_link_t *n);
int uvtl_list_empty(const uvtl_link_t *h);

#define uvtl_container_of(ptr, type, member)                                   \
  ((type *)((char *)(ptr)-offsetof(type, member)))

/* Task ids to the module's own records of them, O(1) per look, put and
 * removal (LU-1: a task's end costs the same whatever the number of
 * records, as N-11 asks).  Intrusive: a node lives in the record it
 * finds; `id` points into that record. */
typedef struct uvtl_idnode_s {
  struct uvtl_idnode_s *next;
  uint32_t hash;
  const char *id;
} uvtl_idnode_t;

typedef struct {
  uvtl_idnode_t **buckets; /* NULL before init and after free */
  size_t nbuckets;         /* a power of two */
  size_t count;
} uvtl_idmap_t;

/* Returns 0 or UV_ENOMEM. */
int uvtl_idmap_init(uvtl_idmap_t *m);
/* Adds `n` (its id set; ids are unique).  Cannot fail: a map that cannot
 * grow keeps working with longer chains. */
void uvtl_idmap_put(uvtl_idmap_t *m, uvtl_idnode_t *n);
uvtl_idnode_t *uvtl_idmap_get(const uvtl_idmap_t *m, const char *id);
void uvtl_idmap_remove(uvtl_idmap_t *m, uvtl_idnode_t *n);
/* Frees the buckets (not the nodes). */
void uvtl_idmap_free(uvtl_idmap_t *m);

/* One registry. */
struct uvtl_reg_s {
  lua_State *L;        /* the state's main thread: callbacks run on it */
  uv_loop_t *loop;     /* luv's loop */
  uvt_registry_t *reg; /* NULL once its close callback ran */
  uvtl_link_t link;    /* the module's open registries */
  int self_ref;        /* anchor of the userdata while open, or LUA_NOREF */
  int close_cb_ref;    /* reg:close(cb)'s cb, or LUA_NOREF */
  int closing;         /* close requested */
  int lua_dead;        /* the state is being closed: no Lua call any more */
  int refs;            /* userdata + open registry + C objects */
  uint64_t teardown_grace_ms;
  uvt_listener_t ended; /* the module's own listener, started first */
  uvtl_link_t agents;   /* agents registered */
  uvtl_link_t surfaces; /* surfaces attached */
  uvtl_link_t subs;     /* on_task_done listeners started */
  uvtl_link_t waits;    /* waits pending */
  uvtl_link_t pumps;    /* on_data / on_output of tasks not yet ended */
  uvtl_idmap_t pumps_by_id;
  unsigned next_serial; /* names surfaces and listeners for their closures */
  /* Retention (LU-1 keep_finished, max_unread_bytes: N-11's rule). */
  double keep_finished;    /* spent records kept; HUGE_VAL = no bound */
  double max_unread_bytes; /* bytes ended records may count; HUGE_VAL = none */
  struct uvtl_retention_s *ret; /* retention.c's state, NULL until init */
  /* LU-3: "UVTASKS_GUARDIAN=<token>" added to every task's environment,
   * or "" without the guardian. */
  char guardian_mark[UVT_GUARDIAN_MARK_MAX];
};

/* One agent (R-OWN-*, R-AGENT-*). */
struct uvtl_agent_s {
  uvt_agent_t agent; /* first: the library hands it back to us */
  uvtl_reg_t *r;
  uvtl_link_t link; /* r->agents while registered */
  int obj_ref;      /* the agent's userdata, held while registered */
  int dispose_ref;  /* agent:dispose(cb)'s cb */
  int registered;   /* the library holds it (until dispose's cb or close) */
  int refs;         /* userdata + registration + retention entries */
};

/* ---- module.c: the registry, calls into Lua, errors. */

/* Raise a Lua error whose message starts with the code's name (LU-1):
 * "UVT_EFOREIGN: the task belongs to another session (read 'bash-1')".
 * `what` and `id` may be NULL.  Does not return. */
int uvtl_error(lua_State *L, int err, const char *what, const char *id);
/* uvtl_error() for a call on task `id` of `r`: a UVT_ENOTASK for an id
 * that the bounds forgot says so (N-11's words, in LU-1's names):
 * "UVT_ENOTASK: ..., read 'bash-1' (forgotten: max_unread_bytes: 80000
 * bytes never read were dropped)".  Does not return. */
int uvtl_task_error(lua_State *L, uvtl_reg_t *r, int err, const char *what,
                    const char *id);
/* "EINVAL: <msg>" for an argument of the wrong type.  Does not return. */
int uvtl_arg_error(lua_State *L, const char *msg);

/* The registry of argument 1 (a registry userdata), open or not; raises
 * UVT_ECLOSING when `need_open` and it is closing or closed. */
uvtl_reg_t *uvtl_check_reg(lua_State *L, int idx, int need_open);
void uvtl_reg_unref(uvtl_reg_t *r);

/* Push the value held by `ref` (LUA_NOREF pushes nil). */
void uvtl_push_ref(lua_State *L, int ref);
/* Release `*ref` and set it to LUA_NOREF; harmless on LUA_NOREF and once
 * the state is being closed. */
void uvtl_unref(uvtl_reg_t *r, int *ref);

/* Call into Lua from a library callback (LU-2).  `build` runs in
 * protected mode on the main thread with `arg`; it pushes a function and
 * its arguments and returns the number of arguments (or -1 to call
 * nothing).  The function runs through the host's protected caller;
 * what it throws is logged as "uvtasks: <what> threw (task <id>): ...".
 * Nothing happens once the state is being closed. */
typedef int (*uvtl_build_fn)(lua_State *L, void *arg);
void uvtl_call_lua(uvtl_reg_t *r, const char *what, const char *id,
                   uvtl_build_fn build, void *arg);

/* ---- convert.c: values between Lua and C. */

/* Push a snapshot table: id, kind, label, owner_session, status, detail,
 * started_at, finished_at, reported, kill_reason; for a process task also
 * exit_code, signal and leftovers (consuming nothing). */
void uvtl_push_snapshot(lua_State *L, uvtl_reg_t *r, const uvt_snapshot_t *s,
                        const uvt_agent_t *caller);
/* The caller (or owner) in field `field` of the options table at `idx`
 * (absent or nil: NULL).  Raises for a value that is not an agent. */
uvtl_agent_t *uvtl_opt_agent(lua_State *L, int idx, const char *field);
/* An agent userdata at `idx`, or NULL for nil/none. */
uvtl_agent_t *uvtl_to_agent(lua_State *L, int idx);
/* A non-negative integer of milliseconds or bytes at `idx`: raises
 * EINVAL for a negative, fractional, NaN or non-number value.  HUGE_VAL
 * (math.huge) gives UINT64_MAX when `huge_ok`. */
uint64_t uvtl_check_u64(lua_State *L, int idx, const char *name, int huge_ok);
/* Field `name` of the table at `idx`, pushed; returns 0 (and pushes
 * nothing) when it is nil. */
int uvtl_opt_field(lua_State *L, int idx, const char *name);
/* The name of a signal number ("SIGTERM"), or NULL. */
const char *uvtl_signal_name(int signum);
/* The number of a signal name, or 0. */
int uvtl_signal_number(const char *name);

/* ---- handles.c: surfaces, agents, listeners, waits, task operations. */
void uvtl_handles_register(lua_State *L);
/* Registry close: the library gave back every agent, surface and
 * listener; drop our hold on each. */
void uvtl_handles_closed(uvtl_reg_t *r);
/* The module's own listener saw a task end (retention and pumps first). */
void uvtl_push_owner(lua_State *L, uvt_agent_t *owner);

/* ---- process.c: spawn and the process task calls. */
void uvtl_process_register(lua_State *L);
/* The task reached its terminal transition: hand an on_data pump its last
 * bytes and let go of its functions (P-EVT-1: never called after).
 * Returns 1 if an on_data function read the task's output (nothing of it
 * is left unread, N-11), else 0. */
int uvtl_pumps_done(uvtl_reg_t *r, const char *id);
void uvtl_pumps_closed(uvtl_reg_t *r);

/* ---- retention.c (LU-1 keep_finished / max_unread_bytes, N-11's rule).
 * Every call costs O(1) whatever the number of records, but agent_gone
 * (one pass over them, at a disposal) and the sweep's drops (each record
 * is dropped once). */
int uvtl_retention_init(uvtl_reg_t *r);
/* The module's own listener saw `snap` end; `consumed`: an on_data
 * function read its output. */
void uvtl_retention_ended(uvtl_reg_t *r, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner, int consumed);
/* reg:read() of an ended task: nothing of it is left to read. */
void uvtl_retention_read(uvtl_reg_t *r, const char *id);
/* reg:forget() of a task: stop counting it. */
void uvtl_retention_forgot(uvtl_reg_t *r, const char *id);
/* An agent's disposal finished: its ended tasks went with it. */
void uvtl_retention_agent_gone(uvtl_reg_t *r, uvtl_agent_t *a);
/* Why `id` is unknown, if the bounds forgot it lately: writes "
 * (forgotten: <bound>: ...)" to buf and returns 1; else 0. */
int uvtl_retention_why(uvtl_reg_t *r, const char *id, char *buf, size_t size);
/* Sets forgotten, forgotten_unread and unread_bytes_dropped in the table
 * on top of the stack (reg:metrics()). */
void uvtl_retention_metrics(lua_State *L, uvtl_reg_t *r);
/* Registry close: close the module's check handle, then call
 * uvtl_reg_fully_closed(). */
void uvtl_retention_closed(uvtl_reg_t *r);
/* module.c: the last step of a registry's close. */
void uvtl_reg_fully_closed(uvtl_reg_t *r);
/* Add `methods` to the registry's (or, with `mt`, another metatable's)
 * __index table. */
void uvtl_add_methods(lua_State *L, const char *mt, const luaL_Reg *methods);

void uvtl_agent_unref(uvtl_agent_t *a);

#endif /* UVTL_H */
