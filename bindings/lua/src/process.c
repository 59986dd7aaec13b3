/* reg:spawn() and the process task calls (contract §3, §3b, §3c through
 * the Lua module, LU-1): read, write, close_stdin, resize, signal, pid;
 * and the on_data / on_output functions of a task (P-EVT-1, as the Node
 * package's onData, N-6 and N-12). */
#include <stdlib.h>
#include <string.h>

#include "uvtl.h"

/* N-12: on_data hands over at most this much at a time. */
#define CHUNK_BYTES (64 * 1024)

/* ---- on_data / on_output (P-EVT-1) -------------------------------------- */

/* The functions of one task.  The library calls on_output until the
 * task's terminal transition and never after, but says nothing when it
 * lets go of on_output_data; the module's own listener (uvtl_pumps_done)
 * releases them at that transition, registry close releases the rest.
 * `refs`: one while the task may still call it, one across each call (the
 * callback may end the task or close the registry). */
typedef struct {
  uvtl_link_t link;   /* r->pumps while held */
  uvtl_idnode_t node; /* r->pumps_by_id while held */
  uvtl_reg_t *r;
  int data_ref;             /* on_data(chunk, stream, id), or LUA_NOREF */
  int output_ref;           /* on_output(id), or LUA_NOREF */
  const uvt_agent_t *owner; /* reads as the task's owner (R-OWN-2) */
  uvtl_agent_t *owner_l;    /* counted while held */
  int held;
  int refs;
  char id[UVT_ID_MAX];
} pump_t;

static void pump_unref(pump_t *p) {
  if (--p->refs > 0)
    return;
  uvtl_reg_unref(p->r);
  free(p);
}

/* Lets go of the functions; returns 1 if they were held (the caller then
 * owes the hold's count). */
static int pump_unhold(pump_t *p) {
  if (!p->held)
    return 0;
  p->held = 0;
  uvtl_list_remove(&p->link);
  uvtl_idmap_remove(&p->r->pumps_by_id, &p->node);
  uvtl_unref(p->r, &p->data_ref);
  uvtl_unref(p->r, &p->output_ref);
  if (p->owner_l != NULL)
    uvtl_agent_unref(p->owner_l);
  p->owner_l = NULL;
  return 1;
}

static void pump_release(pump_t *p) {
  if (pump_unhold(p))
    pump_unref(p);
}

typedef struct {
  pump_t *p;
  const char *bytes;
  size_t len;
  const char *stream;
} chunk_arg_t;

static int build_chunk(lua_State *L, void *arg) {
  chunk_arg_t *c = arg;
  uvtl_push_ref(L, c->p->data_ref);
  lua_pushlstring(L, c->bytes, c->len);
  lua_pushstring(L, c->stream);
  lua_pushstring(L, c->p->id);
  return 3;
}

static int build_output(lua_State *L, void *arg) {
  pump_t *p = arg;
  uvtl_push_ref(L, p->output_ref);
  lua_pushstring(L, p->id);
  return 1;
}

/* Hand `len` bytes of `stream` to on_data, CHUNK_BYTES at a time, while
 * the function is still held. */
static void deliver(pump_t *p, const char *stream, const char *bytes,
                    size_t len) {
  chunk_arg_t c;
  size_t off = 0;
  c.p = p;
  c.stream = stream;
  while (off < len && p->held && p->data_ref != LUA_NOREF) {
    c.bytes = bytes + off;
    c.len = len - off > CHUNK_BYTES ? CHUNK_BYTES : len - off;
    off += c.len;
    uvtl_call_lua(p->r, "an on_data function", p->id, build_chunk, &c);
  }
}

/* Read what the task has and hand it to on_data (the host is the reader:
 * the read consumes it). */
static void pull(pump_t *p) {
  uvt_process_read_t rd;
  if (p->data_ref == LUA_NOREF || p->r->reg == NULL)
    return;
  memset(&rd, 0, sizeof(rd));
  if (uvt_process_read(p->r->reg, p->id, p->owner, &rd) != 0)
    return;
  deliver(p, "stdout", rd.out, rd.out_len);
  deliver(p, "stderr", rd.err, rd.err_len);
  uvt_process_read_cleanup(&rd);
}

static void on_output(const char *id, void *data) {
  pump_t *p = data;
  if (!p->held || p->r->reg == NULL)
    return;
  p->refs++;
  pull(p);
  if (p->held && p->output_ref != LUA_NOREF)
    uvtl_call_lua(p->r, "an on_output function", p->id, build_output, p);
  pump_unref(p);
}

/* N-6 for Lua: the module's own listener runs first at the terminal
 * transition, before any host listener and wait callback, so the bytes
 * still unread then (on_output is called no more) reach on_data before
 * anything says the task ended. */
int uvtl_pumps_done(uvtl_reg_t *r, const char *id) {
  uvtl_idnode_t *n = uvtl_idmap_get(&r->pumps_by_id, id);
  pump_t *p;
  int consumed;

  if (n == NULL)
    return 0;
  p = uvtl_container_of(n, pump_t, node);
  consumed = p->data_ref != LUA_NOREF;
  p->refs++;
  pull(p);
  p->refs -= pump_unhold(p); /* the call's count is still held */
  pump_unref(p);
  return consumed;
}

void uvtl_pumps_closed(uvtl_reg_t *r) {
  while (!uvtl_list_empty(&r->pumps))
    pump_release(uvtl_container_of(r->pumps.next, pump_t, link));
  uvtl_idmap_free(&r->pumps_by_id);
}

/* ---- spawn ------------------------------------------------------------- */

static const char *opt_string(lua_State *L, int idx, const char *name) {
  const char *s;
  size_t len;
  if (!uvtl_opt_field(L, idx, name))
    return NULL;
  if (lua_type(L, -1) != LUA_TSTRING)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a string", name));
  s = lua_tolstring(L, -1, &len);
  if (strlen(s) != len)
    uvtl_arg_error(L, lua_pushfstring(L, "%s holds a NUL", name));
  /* Anchored by the options table, which stays on the stack. */
  lua_pop(L, 1);
  return s;
}

static int opt_bool(lua_State *L, int idx, const char *name) {
  int v;
  if (!uvtl_opt_field(L, idx, name))
    return 0;
  if (lua_type(L, -1) != LUA_TBOOLEAN)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a boolean", name));
  v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static uint64_t opt_u64(lua_State *L, int idx, const char *name,
                        uint64_t dflt) {
  uint64_t v;
  if (!uvtl_opt_field(L, idx, name))
    return dflt;
  v = uvtl_check_u64(L, -1, name, 0);
  lua_pop(L, 1);
  return v;
}

static uint16_t opt_cells(lua_State *L, int idx, const char *name,
                          uint16_t dflt) {
  uint64_t v = opt_u64(L, idx, name, dflt);
  if (v > 65535)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be at most 65535", name));
  return (uint16_t)v;
}

static int opt_function(lua_State *L, int idx, const char *name) {
  if (!uvtl_opt_field(L, idx, name))
    return LUA_NOREF;
  if (!lua_isfunction(L, -1))
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a function", name));
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* A NULL-terminated array of C strings kept alive by the table at
 * `anchor` (its values), in memory the collector frees. */
static const char **string_array(lua_State *L, int count) {
  return lua_newuserdata(L, ((size_t)count + 1) * sizeof(char *));
}

/* argv: an array of strings. */
static const char *const *argv_opt(lua_State *L, int idx) {
  const char **v;
  int n, i;
  if (!uvtl_opt_field(L, idx, "argv"))
    return NULL;
  if (!lua_istable(L, -1))
    uvtl_arg_error(L, "argv must be an array of strings");
  n = (int)lua_objlen(L, -1);
  v = string_array(L, n); /* left on the stack: it lives with the call */
  for (i = 0; i < n; i++) {
    size_t len;
    lua_rawgeti(L, -2, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      uvtl_arg_error(L, "argv must be an array of strings");
    v[i] = lua_tolstring(L, -1, &len);
    if (strlen(v[i]) != len)
      uvtl_arg_error(L, "argv holds a NUL");
    lua_pop(L, 1);
  }
  v[n] = NULL;
  return v;
}

/* env: { NAME = value }, plus the guardian's mark (LU-3), last so that it
 * wins.  The "NAME=value" strings live in a table on the stack. */
static const char *const *env_opt(lua_State *L, int idx, const char *mark) {
  const char **v;
  int n = 0, i = 0, has = uvtl_opt_field(L, idx, "env");
  int tbl, strs;

  if (has && !lua_istable(L, -1))
    uvtl_arg_error(L, "env must be a table of NAME = value");
  if (!has && mark[0] == '\0')
    return NULL;
  if (!has)
    lua_newtable(L);
  tbl = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, tbl) != 0) {
    n++;
    lua_pop(L, 1);
  }
  lua_newtable(L);
  strs = lua_gettop(L);
  v = string_array(L, n + 1);
  lua_pushnil(L);
  while (lua_next(L, tbl) != 0) {
    const char *k, *val;
    size_t klen, vlen;
    if (lua_type(L, -2) != LUA_TSTRING ||
        (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER))
      uvtl_arg_error(L, "env must be a table of NAME = value strings");
    k = lua_tolstring(L, -2, &klen);
    lua_pushvalue(L, -1);
    val = lua_tolstring(L, -1, &vlen);
    if (klen == 0 || strchr(k, '=') != NULL || strlen(k) != klen ||
        strlen(val) != vlen)
      uvtl_arg_error(L, lua_pushfstring(L, "env: invalid entry '%s'", k));
    lua_pushfstring(L, "%s=%s", k, val);
    v[i] = lua_tostring(L, -1);
    lua_rawseti(L, strs, i + 1);
    lua_pop(L, 2);
    i++;
  }
  if (mark[0] != '\0')
    v[i++] = mark;
  v[i] = NULL;
  return v;
}

/* reg:spawn{ command | argv, cwd, env, tty, cols, rows, stdin, owner, kind,
 * label, timeout_ms, grace_ms, drain_ms, output_cap_bytes, stdin_cap_bytes,
 * output_backpressure, on_data, on_output } -> id */
static int l_spawn(lua_State *L) {
  uvtl_reg_t *r = uvtl_check_reg(L, 1, 0);
  uvt_process_options_t o;
  uvtl_agent_t *owner;
  pump_t *p = NULL;
  char id[UVT_ID_MAX];
  int data_ref, output_ref, err;

  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  uvt_process_options_init(&o);
  o.command = opt_string(L, 2, "command");
  o.argv = argv_opt(L, 2);
  o.env = env_opt(L, 2, r->guardian_mark);
  o.cwd = opt_string(L, 2, "cwd");
  o.kind = opt_string(L, 2, "kind");
  o.label = opt_string(L, 2, "label");
  owner = uvtl_opt_agent(L, 2, "owner");
  o.owner = owner != NULL ? &owner->agent : NULL;
  o.max_runtime_ms = opt_u64(L, 2, "timeout_ms", 0);
  o.grace_ms = opt_u64(L, 2, "grace_ms", o.grace_ms);
  o.drain_ms = opt_u64(L, 2, "drain_ms", o.drain_ms);
  o.output_cap_bytes =
      (size_t)opt_u64(L, 2, "output_cap_bytes", o.output_cap_bytes);
  o.stdin_cap_bytes =
      (size_t)opt_u64(L, 2, "stdin_cap_bytes", o.stdin_cap_bytes);
  o.pty = opt_bool(L, 2, "tty");
  o.pty_cols = opt_cells(L, 2, "cols", o.pty_cols);
  o.pty_rows = opt_cells(L, 2, "rows", o.pty_rows);
  o.output_backpressure = opt_bool(L, 2, "output_backpressure");
  if (uvtl_opt_field(L, 2, "stdin")) {
    size_t len;
    const char *s;
    if (lua_type(L, -1) != LUA_TSTRING)
      return uvtl_arg_error(L, "stdin must be 'null', 'pipe' or a string "
                               "of input");
    s = lua_tolstring(L, -1, &len);
    if (len == 4 && memcmp(s, "pipe", 4) == 0) {
      o.stdin_pipe = 1;
    } else if (!(len == 4 && memcmp(s, "null", 4) == 0)) {
      /* Input bytes, then end of file (any bytes, a NUL too). */
      o.stdin_data = s;
      o.stdin_len = len;
    }
    lua_pop(L, 1);
  }
  /* The references last: nothing may raise between them and the start. */
  data_ref = opt_function(L, 2, "on_data");
  output_ref = opt_function(L, 2, "on_output");
  if (data_ref != LUA_NOREF || output_ref != LUA_NOREF) {
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
      luaL_unref(L, LUA_REGISTRYINDEX, data_ref);
      luaL_unref(L, LUA_REGISTRYINDEX, output_ref);
      return uvtl_error(L, UV_ENOMEM, "spawn", NULL);
    }
    p->data_ref = data_ref;
    p->output_ref = output_ref;
    o.on_output = on_output;
    o.on_output_data = p;
    /* N-6: the host is the reader; nothing is dropped while it reads. */
    if (data_ref != LUA_NOREF)
      o.output_backpressure = 1;
  }
  err = uvt_process_start(r->reg, &o, id);
  if (err != 0) {
    if (p != NULL) {
      luaL_unref(L, LUA_REGISTRYINDEX, data_ref);
      luaL_unref(L, LUA_REGISTRYINDEX, output_ref);
      free(p);
    }
    return uvtl_error(L, err, "spawn",
                      o.command != NULL                     ? o.command
                      : o.argv != NULL && o.argv[0] != NULL ? o.argv[0]
                                                            : NULL);
  }
  if (p != NULL) {
    /* The task cannot have ended inside the call (its spawn runs on a
     * spawner thread, and the library calls back from the loop only). */
    p->r = r;
    r->refs++;
    memcpy(p->id, id, sizeof(p->id));
    p->owner = o.owner;
    p->owner_l = owner;
    if (owner != NULL)
      owner->refs++;
    p->held = 1;
    p->refs = 1;
    uvtl_list_insert(&r->pumps, &p->link);
    p->node.id = p->id;
    uvtl_idmap_put(&r->pumps_by_id, &p->node);
  }
  lua_pushstring(L, id);
  return 1;
}

/* ---- the process task calls ------------------------------------------ */

typedef struct {
  uvtl_reg_t *r;
  const char *id;
  const uvt_agent_t *caller;
} task_args_t;

static void task_args(lua_State *L, int opts, task_args_t *t) {
  uvtl_agent_t *a;
  size_t len;
  t->r = uvtl_check_reg(L, 1, 0);
  if (lua_type(L, 2) != LUA_TSTRING)
    uvtl_arg_error(L, "the task id must be a string");
  t->id = lua_tolstring(L, 2, &len);
  if (strlen(t->id) != len)
    uvtl_arg_error(L, "the task id holds a NUL");
  if (!lua_isnoneornil(L, opts) && !lua_istable(L, opts))
    uvtl_arg_error(L, "options must be a table");
  a = uvtl_opt_agent(L, opts, "caller");
  t->caller = a != NULL ? &a->agent : NULL;
}

/* reg:read(id, { caller }) -> { stdout, stderr, stdout_dropped,
 * stderr_dropped, status, detail, exit_code, signal, snapshot }: what is
 * new since the last read, consumed (R-READ-1, P-RES-1); a tty task's
 * one stream in stdout. */
static int l_read(lua_State *L) {
  task_args_t t;
  uvt_process_read_t rd;
  int err;

  task_args(L, 3, &t);
  lua_settop(L, 3);
  /* The table first: nothing may raise while the read is ours. */
  lua_createtable(L, 0, 9);
  memset(&rd, 0, sizeof(rd));
  err = uvt_process_read(t.r->reg, t.id, t.caller, &rd);
  if (err != 0)
    return uvtl_task_error(L, t.r, err, "read", t.id);
  lua_pushlstring(L, rd.out, rd.out_len);
  lua_setfield(L, -2, "stdout");
  lua_pushlstring(L, rd.err, rd.err_len);
  lua_setfield(L, -2, "stderr");
  lua_pushnumber(L, (lua_Number)rd.out_dropped);
  lua_setfield(L, -2, "stdout_dropped");
  lua_pushnumber(L, (lua_Number)rd.err_dropped);
  lua_setfield(L, -2, "stderr_dropped");
  lua_pushstring(L, uvt_status_name(rd.snapshot.status));
  lua_setfield(L, -2, "status");
  if (rd.snapshot.detail != NULL) {
    lua_pushstring(L, rd.snapshot.detail);
    lua_setfield(L, -2, "detail");
  }
  if (rd.exited && rd.exit_code >= 0) {
    lua_pushinteger(L, rd.exit_code);
    lua_setfield(L, -2, "exit_code");
  }
  if (rd.exited && rd.term_signal > 0) {
    const char *name = uvtl_signal_name(rd.term_signal);
    if (name != NULL)
      lua_pushstring(L, name);
    else
      lua_pushinteger(L, rd.term_signal);
    lua_setfield(L, -2, "signal");
  }
  uvtl_push_snapshot(L, t.r, &rd.snapshot, t.caller);
  lua_setfield(L, -2, "snapshot");
  /* N-11: a read of an ended task leaves nothing of it to read. */
  if (uvt_status_is_terminal(rd.snapshot.status))
    uvtl_retention_read(t.r, t.id);
  uvt_process_read_cleanup(&rd);
  return 1;
}

/* reg:write(id, data, { caller }) (P-IN-1) */
static int l_write(lua_State *L) {
  task_args_t t;
  const char *data;
  size_t len;
  int err;

  task_args(L, 4, &t);
  if (lua_type(L, 3) != LUA_TSTRING)
    return uvtl_arg_error(L, "data must be a string");
  data = lua_tolstring(L, 3, &len);
  err = uvt_process_write(t.r->reg, t.id, t.caller, data, len);
  if (err != 0)
    return uvtl_task_error(L, t.r, err, "write", t.id);
  return 0;
}

/* reg:close_stdin(id, { caller }) (P-IN-1) */
static int l_close_stdin(lua_State *L) {
  task_args_t t;
  int err;
  task_args(L, 3, &t);
  err = uvt_process_close_stdin(t.r->reg, t.id, t.caller);
  if (err != 0)
    return uvtl_task_error(L, t.r, err, "close_stdin", t.id);
  return 0;
}

/* reg:resize(id, cols, rows, { caller }) (P-PTY-1) */
static int l_resize(lua_State *L) {
  task_args_t t;
  uint64_t cols, rows;
  int err;
  task_args(L, 5, &t);
  cols = uvtl_check_u64(L, 3, "cols", 0);
  rows = uvtl_check_u64(L, 4, "rows", 0);
  if (cols > 65535 || rows > 65535)
    return uvtl_arg_error(L, "cols and rows must be at most 65535");
  err = uvt_process_resize(t.r->reg, t.id, t.caller, (uint16_t)cols,
                           (uint16_t)rows);
  if (err != 0)
    return uvtl_task_error(L, t.r, err, "resize", t.id);
  return 0;
}

/* reg:signal(id, 'SIGINT' | number, { caller }) (P-KILL-8) */
static int l_signal(lua_State *L) {
  task_args_t t;
  int signum = 0, err;
  task_args(L, 4, &t);
  if (lua_type(L, 3) == LUA_TNUMBER)
    signum = (int)lua_tointeger(L, 3);
  else if (lua_type(L, 3) == LUA_TSTRING)
    signum = uvtl_signal_number(lua_tostring(L, 3));
  else
    return uvtl_arg_error(L, "the signal must be a name ('SIGINT') or a "
                             "number");
  /* An unknown name is 0, which the library refuses with EINVAL. */
  err = uvt_process_signal(t.r->reg, t.id, t.caller, signum);
  if (err != 0)
    return uvtl_task_error(L, t.r, err, "signal", t.id);
  return 0;
}

/* reg:pid(id, { caller }) -> the leader's pid (its session and group id),
 * or nil while the spawn is still out (P-SPAWN-6). */
static int l_pid(lua_State *L) {
  task_args_t t;
  int pid;
  task_args(L, 3, &t);
  pid = uvt_process_pid(t.r->reg, t.id, t.caller);
  if (pid < 0)
    return uvtl_task_error(L, t.r, pid, "pid", t.id);
  if (pid == 0)
    lua_pushnil(L);
  else
    lua_pushinteger(L, pid);
  return 1;
}

void uvtl_process_register(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"spawn", l_spawn},   {"read", l_read},
      {"write", l_write},   {"close_stdin", l_close_stdin},
      {"resize", l_resize}, {"signal", l_signal},
      {"pid", l_pid},       {NULL, NULL},
  };
  uvtl_add_methods(L, UVTL_REG_MT, methods);
}
