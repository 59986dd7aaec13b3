/* Surfaces, agents, listeners and waits: one C handle per Lua handle, so
 * the library's own rules apply to each (R-SURF-1, R-OWN-*, R-AGENT-*,
 * R-DONE-3..5, R-WAIT-*); and the operations on a task id (R-GET-1,
 * R-LIST-1, R-KILL-*, R-FORGET-1). */
#include <stdlib.h>
#include <string.h>

#include "uvtl.h"

/* The id argument (a string without NUL). */
static const char *check_id(lua_State *L, int idx) {
  size_t len;
  const char *id;
  if (lua_type(L, idx) != LUA_TSTRING)
    uvtl_arg_error(L, "the task id must be a string");
  id = lua_tolstring(L, idx, &len);
  if (strlen(id) != len)
    uvtl_arg_error(L, "the task id holds a NUL");
  return id;
}

/* The options table at `idx` (nil or a table). */
static void check_opts(lua_State *L, int idx) {
  if (!lua_isnoneornil(L, idx) && !lua_istable(L, idx))
    uvtl_arg_error(L, "options must be a table");
}

static const uvt_agent_t *opt_caller(lua_State *L, int idx) {
  uvtl_agent_t *a;
  check_opts(L, idx);
  a = uvtl_opt_agent(L, idx, "caller");
  return a != NULL ? &a->agent : NULL;
}

/* ---- surfaces (R-SURF-1) ----------------------------------------------- */

typedef struct {
  uvt_surface_t surface;
  uvtl_link_t link; /* r->surfaces while attached */
  unsigned serial;
} surface_t;

/* detach(): upvalue 1 the registry, 2 the surface's serial; idempotent and
 * harmless after close (R-SURF-1). */
static int l_detach(lua_State *L) {
  uvtl_reg_t **box = lua_touserdata(L, lua_upvalueindex(1));
  unsigned serial = (unsigned)lua_tonumber(L, lua_upvalueindex(2));
  uvtl_link_t *n;

  if (box == NULL || *box == NULL)
    return 0;
  for (n = (*box)->surfaces.next; n != &(*box)->surfaces; n = n->next) {
    surface_t *s = uvtl_container_of(n, surface_t, link);
    if (s->serial == serial) {
      uvtl_list_remove(&s->link);
      uvt_surface_detach(&s->surface);
      free(s);
      break;
    }
  }
  return 0;
}

/* reg:attach_surface(name) -> detach function */
static int l_attach_surface(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *name = luaL_checkstring(L, 2);
  surface_t *s;
  int err;

  lua_settop(L, 2);
  lua_pushvalue(L, 1);
  lua_pushnumber(L, ++r->next_serial);
  /* The closure first: nothing may raise once the surface is attached. */
  lua_pushcclosure(L, l_detach, 2);
  s = calloc(1, sizeof(*s));
  if (s == NULL)
    return uvtl_error(L, UV_ENOMEM, "attach_surface", name);
  err = uvt_surface_attach(r->reg, &s->surface, name);
  if (err != 0) {
    free(s);
    return uvtl_error(L, err, "attach_surface", name);
  }
  s->serial = r->next_serial;
  uvtl_list_insert(&r->surfaces, &s->link);
  return 1;
}

/* ---- agents (R-OWN-*, R-AGENT-*) ---------------------------------------- */

void uvtl_agent_unref(uvtl_agent_t *a) {
  if (--a->refs > 0)
    return;
  uvtl_reg_unref(a->r);
  free(a);
}

/* The library is done with the agent: disposal finished, or the registry
 * closed under it.  Returns 1 if it was registered: the caller then owes
 * the registration's count. */
static int agent_released(uvtl_agent_t *a) {
  if (!a->registered)
    return 0;
  a->registered = 0;
  uvtl_list_remove(&a->link);
  uvtl_unref(a->r, &a->obj_ref);
  return 1;
}

void uvtl_push_owner(lua_State *L, uvt_agent_t *owner) {
  uvtl_agent_t *a = (uvtl_agent_t *)owner;
  if (a == NULL)
    lua_pushnil(L);
  else
    uvtl_push_ref(L, a->obj_ref);
}

static uvtl_agent_t *check_agent(lua_State *L, int idx) {
  uvtl_agent_t **box = luaL_checkudata(L, idx, UVTL_AGENT_MT);
  return *box;
}

static int agent_gc(lua_State *L) {
  uvtl_agent_t **box = luaL_checkudata(L, 1, UVTL_AGENT_MT);
  if (*box != NULL)
    uvtl_agent_unref(*box);
  *box = NULL;
  return 0;
}

static int build_dispose_cb(lua_State *L, void *arg) {
  uvtl_agent_t *a = arg;
  uvtl_push_ref(L, a->dispose_ref);
  uvtl_push_ref(L, a->obj_ref);
  return 1;
}

static void agent_disposed(uvt_agent_t *agent) {
  uvtl_agent_t *a = (uvtl_agent_t *)agent;
  a->refs++; /* across the call */
  /* Its tasks were dropped with it: no longer counted (N-11). */
  uvtl_retention_agent_gone(a->r, a);
  if (a->dispose_ref != LUA_NOREF)
    uvtl_call_lua(a->r, "an agent's dispose callback", NULL, build_dispose_cb,
                  a);
  uvtl_unref(a->r, &a->dispose_ref);
  a->refs -= agent_released(a); /* the call's count is still held */
  uvtl_agent_unref(a);
}

/* agent:dispose([cb]): R-AGENT-1; cb(agent) once its tasks were stopped
 * and dropped. */
static int l_agent_dispose(lua_State *L) {
  uvtl_agent_t *a = check_agent(L, 1);
  int err;

  if (!lua_isnoneornil(L, 2))
    luaL_checktype(L, 2, LUA_TFUNCTION);
  if (a->dispose_ref != LUA_NOREF)
    return uvtl_error(L, UVT_ECLOSING, "dispose", NULL);
  /* Its reference first (nothing may raise after the library took it). */
  lua_settop(L, 2);
  lua_pushvalue(L, 2);
  a->dispose_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  err = uvt_agent_dispose(&a->agent, agent_disposed);
  if (err != 0) {
    uvtl_unref(a->r, &a->dispose_ref);
    return uvtl_error(L, err, "dispose", NULL);
  }
  return 0;
}

/* agent.id, agent.session, agent:dispose(). */
static int agent_index(lua_State *L) {
  uvtl_agent_t *a = check_agent(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "id") == 0) {
    lua_getfenv(L, 1);
    lua_getfield(L, -1, "id");
  } else if (strcmp(k, "session") == 0) {
    lua_getfenv(L, 1);
    lua_getfield(L, -1, "session");
  } else if (strcmp(k, "dispose") == 0) {
    lua_pushcfunction(L, l_agent_dispose);
  } else if (strcmp(k, "registered") == 0) {
    lua_pushboolean(L, a != NULL && a->registered);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int agent_tostring(lua_State *L) {
  lua_getfenv(L, 1);
  lua_getfield(L, -1, "id");
  lua_getfield(L, -2, "session");
  lua_pushfstring(L, "uvtasks.agent (%s in %s)", lua_tostring(L, -2),
                  lua_tostring(L, -1));
  return 1;
}

/* reg:register_agent(agent_id, session_id) -> agent */
static int l_register_agent(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *id = luaL_checkstring(L, 2);
  const char *session = luaL_checkstring(L, 3);
  uvtl_agent_t *a, **box;
  int err;

  lua_settop(L, 3);
  box = lua_newuserdata(L, sizeof(*box));
  *box = NULL;
  luaL_getmetatable(L, UVTL_AGENT_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 0, 2); /* the userdata's environment: id, session */
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "id");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "session");
  lua_setfenv(L, -2);
  a = calloc(1, sizeof(*a));
  if (a == NULL)
    return uvtl_error(L, UV_ENOMEM, "register_agent", id);
  a->obj_ref = LUA_NOREF;
  a->dispose_ref = LUA_NOREF;
  a->r = r;
  lua_pushvalue(L, -1);
  a->obj_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  err = uvt_agent_register(r->reg, &a->agent, id, session);
  if (err != 0) {
    luaL_unref(L, LUA_REGISTRYINDEX, a->obj_ref);
    free(a);
    return uvtl_error(L, err, "register_agent", id);
  }
  r->refs++;
  a->registered = 1;
  a->refs = 2; /* the userdata, and the registration */
  uvtl_list_insert(&r->agents, &a->link);
  *box = a;
  return 1;
}

/* ---- listeners (R-DONE-3..5, LU-2) --------------------------------------- */

typedef struct {
  uvt_listener_t listener;
  uvtl_reg_t *r;
  uvtl_link_t link; /* r->subs while active */
  int fn_ref;
  unsigned serial;
  int active;
  int refs; /* the subscription, and each call in progress */
} sub_t;

static void sub_unref(sub_t *s) {
  if (--s->refs > 0)
    return;
  uvtl_reg_unref(s->r);
  free(s);
}

static void sub_end(sub_t *s) {
  if (!s->active)
    return;
  s->active = 0;
  uvtl_list_remove(&s->link);
  if (s->r->reg != NULL)
    uvt_listener_stop(&s->listener);
  uvtl_unref(s->r, &s->fn_ref);
  sub_unref(s);
}

typedef struct {
  sub_t *s;
  const uvt_snapshot_t *snap;
  uvt_agent_t *owner;
} done_arg_t;

static int build_done(lua_State *L, void *arg) {
  done_arg_t *d = arg;
  uvtl_push_ref(L, d->s->fn_ref);
  uvtl_push_snapshot(L, d->s->r, d->snap, d->owner);
  uvtl_push_owner(L, d->owner);
  return 2;
}

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  sub_t *s = (sub_t *)l;
  done_arg_t d;
  if (!s->active)
    return;
  d.s = s;
  d.snap = snap;
  d.owner = owner;
  s->refs++; /* the listener may stop itself, or close the registry */
  uvtl_call_lua(s->r, "an on_task_done listener", snap->id, build_done, &d);
  sub_unref(s);
}

/* unsubscribe(): upvalue 1 the registry, 2 the listener's serial. */
static int l_unsubscribe(lua_State *L) {
  uvtl_reg_t **box = lua_touserdata(L, lua_upvalueindex(1));
  unsigned serial = (unsigned)lua_tonumber(L, lua_upvalueindex(2));
  uvtl_link_t *n;

  if (box == NULL || *box == NULL)
    return 0;
  for (n = (*box)->subs.next; n != &(*box)->subs; n = n->next) {
    sub_t *s = uvtl_container_of(n, sub_t, link);
    if (s->serial == serial) {
      sub_end(s);
      break;
    }
  }
  return 0;
}

/* reg:on_task_done(fn(snapshot, owner)) -> unsubscribe function.
 * Exactly once per task that ends from now on (R-DONE-3); a listener that
 * throws is logged and the others run (LU-2, R-DONE-4). */
static int l_on_task_done(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  sub_t *s;
  int err;

  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  lua_pushvalue(L, 1);
  lua_pushnumber(L, ++r->next_serial);
  lua_pushcclosure(L, l_unsubscribe, 2);
  s = calloc(1, sizeof(*s));
  if (s == NULL)
    return uvtl_error(L, UV_ENOMEM, "on_task_done", NULL);
  lua_pushvalue(L, 2);
  s->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  err = uvt_listener_start(r->reg, &s->listener, on_done);
  if (err != 0) {
    luaL_unref(L, LUA_REGISTRYINDEX, s->fn_ref);
    free(s);
    return uvtl_error(L, err, "on_task_done", NULL);
  }
  s->r = r;
  r->refs++;
  s->serial = r->next_serial;
  s->active = 1;
  s->refs = 1;
  uvtl_list_insert(&r->subs, &s->link);
  return 1;
}

/* ---- waits (R-WAIT-1..7, LU-1) ---------------------------------------- */

typedef struct {
  uvt_wait_t req;
  uvtl_reg_t *r;
  uvtl_link_t link; /* r->waits while pending */
  int fn_ref;       /* the callback, or LUA_NOREF */
  int co_ref;       /* await(): the coroutine to resume, or LUA_NOREF */
  int pending;
  int refs; /* the userdata (wait() only), and the pending request */
  const uvt_agent_t *caller;
  char id[UVT_ID_MAX];
} wait_t;

static void wait_unref(wait_t *w) {
  if (--w->refs > 0)
    return;
  uvtl_reg_unref(w->r);
  free(w);
}

static int wait_gc(lua_State *L) {
  wait_t **box = luaL_checkudata(L, 1, UVTL_WAIT_MT);
  if (*box != NULL)
    wait_unref(*box);
  *box = NULL;
  return 0;
}

typedef struct {
  wait_t *w;
  int status;
  const uvt_snapshot_t *snap;
} wait_arg_t;

static void push_wait_result(lua_State *L, wait_arg_t *a) {
  if (a->snap != NULL)
    uvtl_push_snapshot(L, a->w->r, a->snap, a->w->caller);
  else
    lua_pushnil(L);
  if (a->status == 0)
    lua_pushnil(L);
  else
    lua_pushfstring(L, "%s: %s, wait '%s'", uvt_err_name(a->status),
                    uvt_strerror(a->status), a->w->id);
}

static int build_wait_cb(lua_State *L, void *arg) {
  wait_arg_t *a = arg;
  uvtl_push_ref(L, a->w->fn_ref);
  /* cb(err, snapshot) */
  push_wait_result(L, a);
  lua_insert(L, -2);
  return 2;
}

/* resume(co, snapshot, err): the await() form; an error inside the
 * coroutine is raised again here (and so logged, LU-2). */
static int l_resume(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  int status;
  if (co == NULL || lua_status(co) != LUA_YIELD)
    return 0;
  lua_xmove(L, co, 2);
  status = lua_resume(co, 2);
  if (status == 0 || status == LUA_YIELD) {
    lua_settop(co, 0);
    return 0;
  }
  /* The coroutine is dead: its traceback, then the error. */
  lua_getglobal(L, "debug");
  lua_getfield(L, -1, "traceback");
  lua_pushthread(co);
  lua_xmove(co, L, 1);
  lua_xmove(co, L, 1); /* the error value */
  if (!lua_isstring(L, -1)) {
    lua_pop(L, 1);
    lua_pushstring(L, "(error object is not a string)");
  }
  lua_call(L, 2, 1);
  return lua_error(L);
}

static int build_resume(lua_State *L, void *arg) {
  wait_arg_t *a = arg;
  lua_pushcfunction(L, l_resume);
  uvtl_push_ref(L, a->w->co_ref);
  push_wait_result(L, a);
  return 3;
}

static void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  wait_t *w = (wait_t *)req;
  wait_arg_t a;

  w->pending = 0;
  uvtl_list_remove(&w->link);
  a.w = w;
  a.status = status;
  a.snap = snap;
  if (w->co_ref != LUA_NOREF)
    uvtl_call_lua(w->r, "a coroutine resumed by await", w->id, build_resume,
                  &a);
  else if (w->fn_ref != LUA_NOREF)
    uvtl_call_lua(w->r, "a wait callback", w->id, build_wait_cb, &a);
  uvtl_unref(w->r, &w->fn_ref);
  uvtl_unref(w->r, &w->co_ref);
  wait_unref(w);
}

/* The timeout argument: nil = no deadline; a number > 0 (ms, a fraction
 * rounded up; math.huge = none); 0, below 0 and NaN go to the library,
 * which answers EINVAL after its id checks (R-WAIT-1). */
static uint64_t check_timeout(lua_State *L, int idx) {
  double v;
  if (lua_isnoneornil(L, idx))
    return UINT64_MAX;
  if (lua_type(L, idx) != LUA_TNUMBER)
    uvtl_arg_error(L, "timeout_ms must be a number");
  v = lua_tonumber(L, idx);
  if (!(v > 0))
    return 0;
  return uvtl_check_u64(L, idx, "timeout_ms", 1);
}

/* Start a wait; its callback or coroutine is set by the caller. */
static wait_t *start_wait(lua_State *L, uvtl_reg_t *r, const char *id,
                          uint64_t timeout_ms, const uvt_agent_t *caller,
                          int fn_ref, int co_ref) {
  wait_t *w = calloc(1, sizeof(*w));
  int err;

  if (w == NULL) {
    if (fn_ref != LUA_NOREF)
      luaL_unref(L, LUA_REGISTRYINDEX, fn_ref);
    if (co_ref != LUA_NOREF)
      luaL_unref(L, LUA_REGISTRYINDEX, co_ref);
    uvtl_error(L, UV_ENOMEM, "wait", id);
  }
  w->fn_ref = fn_ref;
  w->co_ref = co_ref;
  w->caller = caller;
  w->r = r;
  strncpy(w->id, id, sizeof(w->id) - 1);
  err = uvt_wait(r->reg, &w->req, id, timeout_ms, caller, on_wait);
  if (err != 0) {
    if (fn_ref != LUA_NOREF)
      luaL_unref(L, LUA_REGISTRYINDEX, fn_ref);
    if (co_ref != LUA_NOREF)
      luaL_unref(L, LUA_REGISTRYINDEX, co_ref);
    free(w);
    uvtl_task_error(L, r, err, "wait", id);
  }
  r->refs++;
  w->pending = 1;
  w->refs = 1;
  uvtl_list_insert(&r->waits, &w->link);
  return w;
}

/* reg:wait(id, timeout_ms, cb(err, snapshot), { caller }) -> wait.
 * cb(nil, terminal snapshot); cb("UVT_EWAITTIMEOUT: ...", the running
 * snapshot) when the deadline passed (the task goes on, R-WAIT-4);
 * cb("UVT_EABORTED: ...", nil) after wait:abort() (R-WAIT-5). */
static int l_wait(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *id = check_id(L, 2);
  uint64_t timeout_ms = check_timeout(L, 3);
  const uvt_agent_t *caller;
  wait_t *w, **box;
  int fn_ref;

  luaL_checktype(L, 4, LUA_TFUNCTION);
  caller = opt_caller(L, 5);
  lua_settop(L, 5);
  box = lua_newuserdata(L, sizeof(*box));
  *box = NULL;
  luaL_getmetatable(L, UVTL_WAIT_MT);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, 4);
  fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  w = start_wait(L, r, id, timeout_ms, caller, fn_ref, LUA_NOREF);
  w->refs++; /* the userdata */
  *box = w;
  return 1;
}

/* wait:abort(): R-WAIT-5; returns true if the wait was pending. */
static int l_wait_abort(lua_State *L) {
  wait_t **box = luaL_checkudata(L, 1, UVTL_WAIT_MT);
  wait_t *w = *box;
  lua_pushboolean(L, w != NULL && w->pending && uvt_wait_abort(&w->req) == 0);
  return 1;
}

static int l_wait_pending(lua_State *L) {
  wait_t **box = luaL_checkudata(L, 1, UVTL_WAIT_MT);
  lua_pushboolean(L, *box != NULL && (*box)->pending);
  return 1;
}

/* reg:await(id, timeout_ms, { caller }) -> snapshot, err: the form for a
 * coroutine (LU-1): it yields, and the wait's end resumes it with what a
 * wait callback would get (err nil once the task ended; err
 * "UVT_EWAITTIMEOUT: ..." and the running snapshot at the deadline). */
static int l_await(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *id = check_id(L, 2);
  uint64_t timeout_ms = check_timeout(L, 3);
  const uvt_agent_t *caller = opt_caller(L, 4);
  int co_ref;

  if (lua_pushthread(L))
    return uvtl_arg_error(L, "await must be called from a coroutine "
                             "(use wait with a callback)");
  co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  start_wait(L, r, id, timeout_ms, caller, LUA_NOREF, co_ref);
  /* The callback never runs inside uvt_wait (R-WAIT-2): the yield comes
   * first, always. */
  return lua_yield(L, 0);
}

/* ---- operations on a task id ---------------------------------------- */

/* reg:get(id, { caller }) -> snapshot (R-GET-1) */
static int l_get(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *id = check_id(L, 2);
  const uvt_agent_t *caller = opt_caller(L, 3);
  uvt_snapshot_t snap;
  int err;

  memset(&snap, 0, sizeof(snap));
  err = uvt_get(r->reg, id, caller, &snap);
  if (err != 0)
    return uvtl_task_error(L, r, err, "get", id);
  /* The copy is ours: push it protected from a leak on a memory error. */
  lua_pushnil(L); /* room */
  uvtl_push_snapshot(L, r, &snap, caller);
  uvt_snapshot_cleanup(&snap);
  return 1;
}

/* reg:list({ caller }) -> { snapshot, ... } (R-LIST-1) */
static int l_list(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const uvt_agent_t *caller = opt_caller(L, 2);
  uvt_snapshot_t *arr = NULL;
  size_t n = 0, i;
  int err;

  lua_settop(L, 2);
  err = uvt_list(r->reg, caller, &arr, &n);
  if (err != 0)
    return uvtl_error(L, err, "list", NULL);
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    uvtl_push_snapshot(L, r, &arr[i], caller);
    lua_rawseti(L, -2, (int)i + 1);
  }
  uvt_snapshots_free(arr, n);
  return 1;
}

/* reg:kill(id, { reason, caller }) -> 'requested' | 'already-terminal'
 * (R-KILL-1..4, P-KILL-7) */
static int l_kill(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *id = check_id(L, 2);
  const uvt_agent_t *caller = opt_caller(L, 3);
  const char *reason = NULL;
  uvt_kill_result_t res;
  int err;

  if (uvtl_opt_field(L, 3, "reason"))
    reason = luaL_checkstring(L, -1);
  err = uvt_kill(r->reg, id, caller, reason, &res);
  if (err != 0)
    return uvtl_task_error(L, r, err, "kill", id);
  lua_pushstring(L,
                 res == UVT_KILL_REQUESTED ? "requested" : "already-terminal");
  return 1;
}

/* reg:forget(id, { caller }) (R-FORGET-1) */
static int l_forget(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  const char *id = check_id(L, 2);
  const uvt_agent_t *caller = opt_caller(L, 3);
  int err = uvt_forget(r->reg, id, caller);
  if (err != 0)
    return uvtl_task_error(L, r, err, "forget", id);
  uvtl_retention_forgot(r, id);
  return 0;
}

/* ---- registry close ---------------------------------------------------- */

void uvtl_handles_closed(uvtl_reg_t *r) {
  while (!uvtl_list_empty(&r->agents)) {
    uvtl_agent_t *a = uvtl_container_of(r->agents.next, uvtl_agent_t, link);
    if (agent_released(a))
      uvtl_agent_unref(a);
  }
  while (!uvtl_list_empty(&r->surfaces)) {
    surface_t *s = uvtl_container_of(r->surfaces.next, surface_t, link);
    uvtl_list_remove(&s->link);
    free(s);
  }
  while (!uvtl_list_empty(&r->subs))
    sub_end(uvtl_container_of(r->subs.next, sub_t, link));
}

void uvtl_handles_register(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"attach_surface", l_attach_surface},
      {"register_agent", l_register_agent},
      {"on_task_done", l_on_task_done},
      {"wait", l_wait},
      {"await", l_await},
      {"get", l_get},
      {"list", l_list},
      {"kill", l_kill},
      {"forget", l_forget},
      {NULL, NULL},
  };
  static const luaL_Reg wait_methods[] = {
      {"abort", l_wait_abort},
      {"pending", l_wait_pending},
      {NULL, NULL},
  };

  uvtl_add_methods(L, UVTL_REG_MT, methods);

  luaL_newmetatable(L, UVTL_AGENT_MT);
  lua_pushcfunction(L, agent_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, agent_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, agent_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);

  luaL_newmetatable(L, UVTL_WAIT_MT);
  lua_pushcfunction(L, wait_gc);
  lua_setfield(L, -2, "__gc");
  lua_newtable(L);
  luaL_register(L, NULL, wait_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}
