/* The module: `require('uvtasks')` (LU-1), the registry object and its
 * close (R-CLOSE-1..3), calls into Lua from the loop (LU-2), errors with
 * the code first (LU-1), the end of a Neovim or of the Lua state (LU-3).
 * Only the Lua 5.1 C API is used (LuaJIT, as Neovim embeds, provides it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <luv/luv.h>

#include "uvtl.h"

/* Every registry of this copy of the module not yet closed, whatever its
 * Lua state (LU-3 closes those of the state that is ending). */
static uvtl_link_t open_regs = {&open_regs, &open_regs};

void uvtl_list_init(uvtl_link_t *h) {
  h->next = h;
  h->prev = h;
}

void uvtl_list_insert(uvtl_link_t *h, uvtl_link_t *n) {
  n->next = h;
  n->prev = h->prev;
  h->prev->next = n;
  h->prev = n;
}

void uvtl_list_remove(uvtl_link_t *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->next = n;
  n->prev = n;
}

int uvtl_list_empty(const uvtl_link_t *h) {
  return h->next == h;
}

/* ---- ids to records (FNV-1a, chained, doubled at two per bucket) ------ */

static uint32_t id_hash(const char *id) {
  uint32_t h = 2166136261u;
  for (; *id != '\0'; id++) {
    h ^= (unsigned char)*id;
    h *= 16777619u;
  }
  return h;
}

static void idmap_grow(uvtl_idmap_t *m) {
  size_t n = m->nbuckets * 2, i;
  uvtl_idnode_t **b = calloc(n, sizeof(*b));
  if (b == NULL)
    return; /* longer chains; still right */
  for (i = 0; i < m->nbuckets; i++) {
    uvtl_idnode_t *e = m->buckets[i], *next;
    for (; e != NULL; e = next) {
      next = e->next;
      e->next = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
    }
  }
  free(m->buckets);
  m->buckets = b;
  m->nbuckets = n;
}

int uvtl_idmap_init(uvtl_idmap_t *m) {
  m->count = 0;
  m->buckets = calloc(16, sizeof(*m->buckets));
  m->nbuckets = m->buckets != NULL ? 16 : 0;
  return m->buckets != NULL ? 0 : UV_ENOMEM;
}

void uvtl_idmap_put(uvtl_idmap_t *m, uvtl_idnode_t *n) {
  size_t i;
  if (m->count >= m->nbuckets * 2)
    idmap_grow(m);
  n->hash = id_hash(n->id);
  i = n->hash & (m->nbuckets - 1);
  n->next = m->buckets[i];
  m->buckets[i] = n;
  m->count++;
}

uvtl_idnode_t *uvtl_idmap_get(const uvtl_idmap_t *m, const char *id) {
  uint32_t h;
  uvtl_idnode_t *e;
  if (m->buckets == NULL)
    return NULL;
  h = id_hash(id);
  for (e = m->buckets[h & (m->nbuckets - 1)]; e != NULL; e = e->next)
    if (e->hash == h && strcmp(e->id, id) == 0)
      return e;
  return NULL;
}

void uvtl_idmap_remove(uvtl_idmap_t *m, uvtl_idnode_t *n) {
  uvtl_idnode_t **p;
  if (m->buckets == NULL)
    return;
  for (p = &m->buckets[n->hash & (m->nbuckets - 1)]; *p != NULL;
       p = &(*p)->next) {
    if (*p == n) {
      *p = n->next;
      n->next = NULL;
      m->count--;
      return;
    }
  }
}

void uvtl_idmap_free(uvtl_idmap_t *m) {
  free(m->buckets);
  m->buckets = NULL;
  m->nbuckets = 0;
  m->count = 0;
}

/* ---- errors (LU-1) ------------------------------------------------------ */

int uvtl_error(lua_State *L, int err, const char *what, const char *id) {
  const char *name = uvt_err_name(err);
  if (what != NULL && id != NULL)
    lua_pushfstring(L, "%s: %s, %s '%s'", name, uvt_strerror(err), what, id);
  else if (what != NULL)
    lua_pushfstring(L, "%s: %s, %s", name, uvt_strerror(err), what);
  else
    lua_pushfstring(L, "%s: %s", name, uvt_strerror(err));
  return lua_error(L);
}

int uvtl_task_error(lua_State *L, uvtl_reg_t *r, int err, const char *what,
                    const char *id) {
  char why[128];
  if (err != UVT_ENOTASK || id == NULL ||
      !uvtl_retention_why(r, id, why, sizeof(why)))
    return uvtl_error(L, err, what, id);
  lua_pushfstring(L, "%s: %s, %s '%s'%s", uvt_err_name(err), uvt_strerror(err),
                  what, id, why);
  return lua_error(L);
}

int uvtl_arg_error(lua_State *L, const char *msg) {
  lua_pushfstring(L, "EINVAL: %s", msg);
  return lua_error(L);
}

/* ---- references ---------------------------------------------------------- */

void uvtl_push_ref(lua_State *L, int ref) {
  if (ref == LUA_NOREF || ref == LUA_REFNIL)
    lua_pushnil(L);
  else
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
}

void uvtl_unref(uvtl_reg_t *r, int *ref) {
  if (*ref != LUA_NOREF && !r->lua_dead)
    luaL_unref(r->L, LUA_REGISTRYINDEX, *ref);
  *ref = LUA_NOREF;
}

/* ---- calling Lua from the loop (LU-2) ---------------------------------- */

typedef struct {
  uvtl_reg_t *r;
  const char *what;
  const char *id;
  uvtl_build_fn build;
  void *arg;
} call_t;

/* The message handler of guard(): the user's traceback, taken where the
 * error was raised (the host's handler only sees guard's frame). */
static int traceback(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING) {
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    lua_replace(L, 1);
  }
  lua_getglobal(L, "debug");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return 1;
  }
  lua_getfield(L, -1, "traceback");
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 2);
    return 1;
  }
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

/* guard(fn, ...): calls fn(...) and, if it throws, throws again with a
 * message that names uvtasks, the callback and the task (upvalue 1). */
static int guard(lua_State *L) {
  int nargs = lua_gettop(L) - 1;
  lua_pushcfunction(L, traceback);
  lua_insert(L, 1);
  if (lua_pcall(L, nargs, 0, 1) == 0)
    return 0;
  lua_pushfstring(L, "uvtasks: %s threw: %s",
                  lua_tostring(L, lua_upvalueindex(1)), lua_tostring(L, -1));
  return lua_error(L);
}

static int call_entry(lua_State *L) {
  call_t *c = lua_touserdata(L, 1);
  luv_ctx_t *ctx;
  int n;

  lua_settop(L, 0);
  if (c->id != NULL)
    lua_pushfstring(L, "%s (task %s)", c->what, c->id);
  else
    lua_pushstring(L, c->what);
  lua_pushcclosure(L, guard, 1);
  n = c->build(L, c->arg);
  if (n < 0)
    return 0;
  ctx = luv_context(L);
  /* The host's own protected caller (Neovim's marks the call fast and
   * reports errors as for any luv callback; luv's writes them to stderr),
   * told never to exit the process. */
  if (ctx != NULL && ctx->cb_pcall != NULL)
    ctx->cb_pcall(L, n + 1, 0, LUVF_CALLBACK_NOEXIT);
  else if (lua_pcall(L, n + 1, 0, 0) != 0)
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
  return 0;
}

void uvtl_call_lua(uvtl_reg_t *r, const char *what, const char *id,
                   uvtl_build_fn build, void *arg) {
  lua_State *L = r->L;
  call_t c;
  int top;

  if (r->lua_dead)
    return;
  c.r = r;
  c.what = what;
  c.id = id;
  c.build = build;
  c.arg = arg;
  top = lua_gettop(L);
  /* Protected: building the arguments may fail to allocate. */
  if (lua_cpcall(L, call_entry, &c) != 0)
    fprintf(stderr, "uvtasks: %s: %s\n", what,
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "error");
  lua_settop(L, top);
}

/* ---- the registry object -------------------------------------------- */

void uvtl_reg_unref(uvtl_reg_t *r) {
  if (--r->refs == 0)
    free(r);
}

uvtl_reg_t *uvtl_check_reg(lua_State *L, int idx, int need_open) {
  uvtl_reg_t **box = luaL_checkudata(L, idx, UVTL_REG_MT);
  uvtl_reg_t *r = *box;
  if (r == NULL)
    uvtl_arg_error(L, "not a registry");
  if (r->reg == NULL || (need_open && r->closing))
    uvtl_error(L, UVT_ECLOSING, NULL, NULL);
  return r;
}

/* The library's log lines (uvt_options_t.log): to the `log` function when
 * one was given and we are on the loop's thread, else to stderr. */
typedef struct {
  int ref;
  int level;
  const char *message;
} log_arg_t;

static int build_log(lua_State *L, void *arg) {
  log_arg_t *a = arg;
  static const char *const levels[] = {"error", "warn", "info", "debug"};
  uvtl_push_ref(L, a->ref);
  lua_pushstring(L, a->level >= 0 && a->level <= 3 ? levels[a->level] : "info");
  lua_pushstring(L, a->message);
  return 2;
}

typedef struct {
  uvtl_reg_t *r;
  int ref;
  uv_thread_t thread;
} logger_t;

static void on_log(int level, const char *message, void *data) {
  logger_t *lg = data;
  uv_thread_t self = uv_thread_self();
  log_arg_t a;

  if (lg->r == NULL || lg->ref == LUA_NOREF || lg->r->lua_dead ||
      !uv_thread_equal(&self, &lg->thread)) {
    fprintf(stderr, "uvtasks: %s\n", message);
    return;
  }
  a.ref = lg->ref;
  a.level = level;
  a.message = message;
  uvtl_call_lua(lg->r, "the log function", NULL, build_log, &a);
}

/* One logger per registry, kept beside it (the library holds its
 * pointer until the close callback). */
typedef struct {
  uvtl_reg_t r;
  logger_t log;
} reg_block_t;

static void reg_release(uvtl_reg_t *r) {
  reg_block_t *b = (reg_block_t *)r;
  uvtl_unref(r, &b->log.ref);
  uvtl_unref(r, &r->close_cb_ref);
  uvtl_unref(r, &r->self_ref);
  uvtl_list_remove(&r->link);
}

static int build_close_cb(lua_State *L, void *arg) {
  uvtl_push_ref(L, *(int *)arg);
  return 0;
}

static void on_closed(void *data) {
  uvtl_reg_t *r = data;
  int cb;

  /* The library detached, stopped or released everything of ours; the
   * module's own check handle is closed (retention) before this. */
  r->reg = NULL;
  uvtl_handles_closed(r);
  uvtl_pumps_closed(r);
  cb = r->close_cb_ref;
  r->close_cb_ref = LUA_NOREF;
  r->refs++; /* across the call: it may drop the last Lua reference */
  if (cb != LUA_NOREF) {
    uvtl_call_lua(r, "the close callback", NULL, build_close_cb, &cb);
    uvtl_unref(r, &cb);
  }
  reg_release(r);
  r->refs--; /* the open registry's count (the call's is still held) */
  uvtl_reg_unref(r);
}

/* Registry close, once the module's own handle is closed too. */
static void on_lib_closed(void *data) {
  uvtl_reg_t *r = data;
  uvtl_retention_closed(r); /* closes the check handle, then on_closed */
}

void uvtl_reg_fully_closed(uvtl_reg_t *r) {
  on_closed(r);
}

static int start_close(uvtl_reg_t *r) {
  int err = uvt_registry_close(r->reg, on_lib_closed, r);
  if (err == 0)
    r->closing = 1;
  return err;
}

/* reg:close([cb]): R-CLOSE-1; cb() once every task stopped and every
 * handle of ours is closed (R-CLOSE-2). */
static int l_close(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 1);
  int err;

  if (!lua_isnoneornil(L, 2))
    luaL_checktype(L, 2, LUA_TFUNCTION);
  err = start_close(r);
  if (err != 0)
    return uvtl_error(L, err, "close", NULL);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushvalue(L, 2);
    r->close_cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  return 0;
}

/* __gc: only a closed registry, or one whose Lua state is being closed
 * (lua_close(): every object is finalised, anchored or not).  The latter
 * is closed here and the loop run until it is quiet, before luv's own
 * finaliser (created earlier, so run later) closes the loop: luv would
 * take our handles for its own (its walk closes every handle with its
 * own callback, which reads the handle's data as luv's: a crash).
 *
 * lua_close() may come from inside uv.run() (os.exit(code, true) in a
 * callback).  The loop is run here all the same: luv's finaliser runs it
 * from there too, right after, and the frames below never resume (the
 * state is gone).  Every task's session gets SIGKILL first, so that no
 * grace is waited for inside a callback. */
static int l_gc(lua_State *L) {
  uvtl_reg_t **box = luaL_checkudata(L, 1, UVTL_REG_MT);
  uvtl_reg_t *r = *box;
  luv_ctx_t *ctx;

  if (r == NULL)
    return 0;
  *box = NULL;
  if (r->reg != NULL) {
    r->lua_dead = 1;
    if (!r->closing)
      start_close(r);
    ctx = luv_context(L);
    if (ctx != NULL && ctx->mode != -1)
      uvt_process_stop_all_now(); /* inside uv.run(): no grace */
    while (r->reg != NULL)
      uv_run(r->loop, UV_RUN_ONCE);
  }
  uvtl_reg_unref(r);
  return 0;
}

static int l_tostring(lua_State *L) {
  uvtl_reg_t **box = luaL_checkudata(L, 1, UVTL_REG_MT);
  lua_pushfstring(L, "uvtasks.registry (%s)",
                  *box == NULL || (*box)->reg == NULL ? "closed"
                  : (*box)->closing                   ? "closing"
                                                      : "open");
  return 1;
}

/* reg:metrics() -> counters (R-METRICS-1). */
static int l_metrics(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  uvt_metrics_t m;

  memset(&m, 0, sizeof(m));
  uvt_registry_metrics(r->reg, &m);
  lua_createtable(L, 0, 13);
#define SET(name, v)                                                           \
  lua_pushnumber(L, (lua_Number)(v));                                          \
  lua_setfield(L, -2, name)
  SET("started", m.started);
  SET("completed", m.completed);
  SET("killed", m.killed);
  SET("failed", m.failed);
  SET("kills", m.kills);
  SET("force_failed", m.force_failed);
  SET("waits_timed_out", m.waits_timed_out);
  SET("waits_aborted", m.waits_aborted);
  SET("live", m.live);
  SET("records", m.records);
#undef SET
  /* N-11's: ended tasks the bounds forgot, those of them that held
   * output nobody had read, and that output's bytes. */
  uvtl_retention_metrics(L, r);
  return 1;
}

/* A bound option: nil = the default, math.huge = none, else an integer
 * >= 0. */
static double bound_opt(lua_State *L, int idx, const char *name, double dflt) {
  double v;
  if (!uvtl_opt_field(L, idx, name))
    return dflt;
  if (lua_type(L, -1) != LUA_TNUMBER)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a number", name));
  v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  if (!(v >= 0) || (v != HUGE_VAL && v != floor(v)))
    uvtl_arg_error(L, lua_pushfstring(L,
                                      "%s must be an integer >= 0, or "
                                      "math.huge",
                                      name));
  return v;
}

static int bool_opt(lua_State *L, int idx, const char *name, int dflt) {
  int v;
  if (!uvtl_opt_field(L, idx, name))
    return dflt;
  if (lua_type(L, -1) != LUA_TBOOLEAN)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a boolean", name));
  v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static void the_listener(uvt_listener_t *l, const uvt_snapshot_t *snap,
                         uvt_agent_t *owner) {
  uvtl_reg_t *r = l->data;
  int consumed;
  /* First of all listeners: an on_data pump's last bytes, then the
   * retention bookkeeping (LU-1, as N-6 and N-11 order them). */
  consumed = uvtl_pumps_done(r, snap->id);
  uvtl_retention_ended(r, snap, owner, consumed);
}

/* Neovim (LU-3): one VimLeavePre autocommand per state closes every open
 * registry of the state and runs the loop (vim.wait) until they are
 * quiet; if that does not come within the bound, every task's session
 * gets SIGKILL at once.  Installed lazily, from the first uvt.new(): the
 * module may be required from a fast callback, where autocommands cannot
 * be made (then it is scheduled). */
static const char nvim_hook[] =
    "local uvt = ...\n"
    "local function install()\n"
    "  local g = vim.api.nvim_create_augroup('uvtasks', { clear = true })\n"
    "  vim.api.nvim_create_autocmd('VimLeavePre', { group = g, callback = "
    "function()\n"
    "    local bound = uvt._close_all()\n"
    "    if bound > 0 and not vim.wait(bound, function() return uvt._open() "
    "== 0 end, 5) then\n"
    "      uvt._stop_all_now()\n"
    "    end\n"
    "  end })\n"
    "end\n"
    "if not pcall(install) then vim.schedule(install) end\n";

static int nvim_hooked_key;
static int module_key; /* LUA_REGISTRYINDEX[&module_key] = the module */

static void maybe_hook_nvim(lua_State *L) {
  lua_pushlightuserdata(L, &nvim_hooked_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (!lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_getglobal(L, "vim");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "api");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 2);
  if (luaL_loadbuffer(L, nvim_hook, sizeof(nvim_hook) - 1, "=uvtasks.nvim") !=
      0)
    lua_error(L);
  lua_pushlightuserdata(L, &module_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_call(L, 1, 0);
  lua_pushlightuserdata(L, &nvim_hooked_key);
  lua_pushboolean(L, 1);
  lua_rawset(L, LUA_REGISTRYINDEX);
}

/* uvt.new{ teardown_grace_ms, max_live_per_owner, keep_finished,
 * max_unread_bytes, guardian, cgroups, spawn_helper, log, close_on_exit } ->
 * registry. */
static int l_new(lua_State *L) {
  uvt_options_t o;
  reg_block_t *b;
  uvtl_reg_t *r, **box;
  luv_ctx_t *ctx;
  double keep, max_bytes;
  int guardian, helper, on_exit, err, has_log, cgroups = 0;
  const char *cgroup_dir = NULL;
  uint64_t n;

  if (!lua_isnoneornil(L, 1))
    luaL_checktype(L, 1, LUA_TTABLE);
  else {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  lua_settop(L, 1);
  uvt_options_init(&o);
  if (uvtl_opt_field(L, 1, "teardown_grace_ms"))
    o.teardown_grace_ms = uvtl_check_u64(L, -1, "teardown_grace_ms", 0);
  if (uvtl_opt_field(L, 1, "max_live_per_owner")) {
    n = uvtl_check_u64(L, -1, "max_live_per_owner", 0);
    if (n > UINT32_MAX)
      return uvtl_arg_error(L, "max_live_per_owner is too large");
    o.max_live_per_owner = (unsigned)n;
  }
  lua_settop(L, 1);
  keep = bound_opt(L, 1, "keep_finished", 100);
  max_bytes = bound_opt(L, 1, "max_unread_bytes", 16.0 * 1024 * 1024);
  guardian = bool_opt(L, 1, "guardian", 0);
  helper = bool_opt(L, 1, "spawn_helper", 0);
  on_exit = bool_opt(L, 1, "close_on_exit", 1);
  if (uvtl_opt_field(L, 1, "cgroups")) {
    if (lua_type(L, -1) == LUA_TSTRING)
      cgroup_dir = lua_tostring(L, -1); /* anchored by the options */
    else if (lua_type(L, -1) != LUA_TBOOLEAN)
      return uvtl_arg_error(L, "cgroups must be a boolean or a directory");
    cgroups = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  has_log = uvtl_opt_field(L, 1, "log");
  if (has_log && !lua_isfunction(L, -1))
    return uvtl_arg_error(L, "log must be a function");
  /* Stack: 1 options, [2 log]. */

  ctx = luv_context(L);
  if (ctx == NULL || ctx->loop == NULL)
    return uvtl_arg_error(L, "no luv loop in this Lua state");

  /* Everything that may raise comes before the registry exists. */
  box = lua_newuserdata(L, sizeof(*box));
  *box = NULL;
  luaL_getmetatable(L, UVTL_REG_MT);
  lua_setmetatable(L, -2);
  b = calloc(1, sizeof(*b));
  if (b == NULL)
    return uvtl_error(L, UV_ENOMEM, "new", NULL);
  if (uvtl_idmap_init(&b->r.pumps_by_id) != 0) {
    free(b);
    return uvtl_error(L, UV_ENOMEM, "new", NULL);
  }
  r = &b->r;
  r->L = ctx->L != NULL ? ctx->L : L;
  r->loop = ctx->loop;
  r->self_ref = LUA_NOREF;
  r->close_cb_ref = LUA_NOREF;
  b->log.ref = LUA_NOREF;
  r->keep_finished = keep;
  r->max_unread_bytes = max_bytes;
  uvtl_list_init(&r->link);
  uvtl_list_init(&r->agents);
  uvtl_list_init(&r->surfaces);
  uvtl_list_init(&r->subs);
  uvtl_list_init(&r->waits);
  uvtl_list_init(&r->pumps);
  *box = r;
  r->refs = 1; /* the userdata */
  lua_pushvalue(L, -1);
  r->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (has_log) {
    lua_pushvalue(L, 2);
    b->log.ref = luaL_ref(L, LUA_REGISTRYINDEX);
    b->log.r = r;
    b->log.thread = uv_thread_self();
    o.log = on_log;
    o.log_data = &b->log;
  }
  if (guardian) {
    err = uvt_process_guardian(r->guardian_mark);
    if (err != 0)
      goto fail;
  }
  r->teardown_grace_ms = o.teardown_grace_ms;
  err = uvt_registry_new(r->loop, &o, &r->reg);
  if (err != 0)
    goto fail;
  r->refs++; /* the open registry */
  uvtl_list_insert(&open_regs, &r->link);
  err = uvtl_retention_init(r);
  if (err == 0 && cgroups) {
    /* P-KILL-5's cgroup per task: a setsid child dies with its task. */
    err = uvt_process_cgroups(r->reg, cgroup_dir);
  }
  if (err == 0 && helper) {
    err = uvt_process_spawn_helper(r->reg, 1);
    if (err == UV_ENOTSUP)
      err = 0; /* the spawner threads spawn, as once a helper died */
  }
  /* Cannot fail on a new registry; registry close stops it. */
  r->ended.data = r;
  if (err == 0)
    err = uvt_listener_start(r->reg, &r->ended, the_listener);
  if (err != 0) {
    /* Closed through the loop; the userdata stays closing. */
    start_close(r);
    return uvtl_error(L, err, "new", NULL);
  }
  if (on_exit)
    maybe_hook_nvim(L);
  return 1;

fail:
  uvtl_unref(r, &b->log.ref);
  uvtl_unref(r, &r->self_ref);
  *box = NULL;
  uvtl_idmap_free(&r->pumps_by_id);
  free(b);
  return uvtl_error(L, err, "new", NULL);
}

/* ---- the end of a Neovim (LU-3) and test helpers ---------------------- */

/* uvt._close_all() -> ms: starts the close of every open registry of
 * this state and returns how long to wait for them (the largest teardown
 * grace plus what a process task's grace and SIGKILL need), 0 if none. */
static int l_close_all(lua_State *L) {
  luv_ctx_t *ctx = luv_context(L);
  lua_State *main = ctx != NULL && ctx->L != NULL ? ctx->L : L;
  uvtl_link_t *n, *next;
  double bound = 0;

  for (n = open_regs.next; n != &open_regs; n = next) {
    uvtl_reg_t *r = uvtl_container_of(n, uvtl_reg_t, link);
    next = n->next;
    if (r->L != main || r->reg == NULL)
      continue;
    if (!r->closing)
      start_close(r);
    if (r->teardown_grace_ms == 0)
      bound = HUGE_VAL;
    else if ((double)r->teardown_grace_ms + 15000 > bound)
      bound = (double)r->teardown_grace_ms + 15000;
  }
  if (bound == HUGE_VAL)
    bound = 1e9;
  lua_pushnumber(L, bound);
  return 1;
}

/* uvt._open() -> registries of this state not yet quiet. */
static int l_open(lua_State *L) {
  luv_ctx_t *ctx = luv_context(L);
  lua_State *main = ctx != NULL && ctx->L != NULL ? ctx->L : L;
  uvtl_link_t *n;
  int count = 0;

  for (n = open_regs.next; n != &open_regs; n = n->next)
    if (uvtl_container_of(n, uvtl_reg_t, link)->L == main)
      count++;
  lua_pushinteger(L, count);
  return 1;
}

/* uvt._stop_all_now() -> sessions signalled (uvt_process_stop_all_now). */
static int l_stop_all_now(lua_State *L) {
  lua_pushinteger(L, uvt_process_stop_all_now());
  return 1;
}

static void count_handle(uv_handle_t *h, void *arg) {
  (*(int *)arg)++;
}

/* uvt._loop_handles() -> handles on the loop now, closing ones included
 * (loop hygiene in tests, R-CLOSE-2: luv's own walk cannot be used where
 * a host keeps handles of its own, as Neovim does). */
static int l_loop_handles(lua_State *L) {
  luv_ctx_t *ctx = luv_context(L);
  int count = 0;
  if (ctx != NULL && ctx->loop != NULL)
    uv_walk(ctx->loop, count_handle, &count);
  lua_pushinteger(L, count);
  return 1;
}

/* Make sure luv is loaded (it creates the loop in a plain Lua state;
 * Neovim loaded it before any plugin). */
static void need_luv(lua_State *L) {
  luv_ctx_t *ctx = luv_context(L);
  if (ctx != NULL && ctx->loop != NULL)
    return;
  lua_getglobal(L, "require");
  lua_pushstring(L, "luv");
  if (lua_pcall(L, 1, 0, 0) != 0) {
    lua_pushfstring(L,
                    "ENOENT: uvtasks needs luv (the Lua binding of "
                    "libuv): %s",
                    lua_tostring(L, -1));
    lua_error(L);
  }
}

/* The entry point `require('uvtasks')` looks for: the one symbol the
 * module exports (exports.map). */
__attribute__((visibility("default"))) int luaopen_uvtasks(lua_State *L);
int luaopen_uvtasks(lua_State *L) {
  static const luaL_Reg reg_methods[] = {
      {"close", l_close},
      {"metrics", l_metrics},
      {NULL, NULL},
  };
  static const luaL_Reg fns[] = {
      {"new", l_new},
      {"_close_all", l_close_all},
      {"_open", l_open},
      {"_stop_all_now", l_stop_all_now},
      {"_loop_handles", l_loop_handles},
      {NULL, NULL},
  };

  need_luv(L);
  luaL_newmetatable(L, UVTL_REG_MT);
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_newtable(L); /* __index: the methods */
  luaL_register(L, NULL, reg_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  uvtl_handles_register(L);
  uvtl_process_register(L);

  lua_newtable(L);
  luaL_register(L, NULL, fns);
  lua_pushstring(L, uvt_version_string());
  lua_setfield(L, -2, "version");
  lua_pushlightuserdata(L, &module_key);
  lua_pushvalue(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  return 1;
}

void uvtl_add_methods(lua_State *L, const char *mt, const luaL_Reg *methods) {
  luaL_getmetatable(L, mt);
  lua_getfield(L, -1, "__index");
  luaL_register(L, NULL, methods);
  lua_pop(L, 2);
}
