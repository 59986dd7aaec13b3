/* Values between Lua and C: snapshots, options, numbers, signals. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "uvtl.h"

static const struct {
  const char *name;
  int num;
} signals[] = {
    {"SIGINT", SIGINT},     {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
    {"SIGUSR1", SIGUSR1},   {"SIGUSR2", SIGUSR2}, {"SIGTERM", SIGTERM},
    {"SIGKILL", SIGKILL},   {"SIGCONT", SIGCONT}, {"SIGSTOP", SIGSTOP},
    {"SIGWINCH", SIGWINCH}, {"SIGPIPE", SIGPIPE}, {"SIGALRM", SIGALRM},
    {"SIGSEGV", SIGSEGV},   {"SIGABRT", SIGABRT}, {"SIGBUS", SIGBUS},
    {"SIGFPE", SIGFPE},     {"SIGILL", SIGILL},   {"SIGTSTP", SIGTSTP},
    {"SIGTTIN", SIGTTIN},   {"SIGTTOU", SIGTTOU}, {"SIGXCPU", SIGXCPU},
    {"SIGXFSZ", SIGXFSZ},   {"SIGSYS", SIGSYS},   {"SIGTRAP", SIGTRAP},
};

const char *uvtl_signal_name(int signum) {
  size_t i;
  for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
    if (signals[i].num == signum)
      return signals[i].name;
  return NULL;
}

int uvtl_signal_number(const char *name) {
  size_t i;
  for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
    if (strcmp(signals[i].name, name) == 0)
      return signals[i].num;
  return 0;
}

static void set_str(lua_State *L, const char *name, const char *s) {
  if (s == NULL)
    return;
  lua_pushstring(L, s);
  lua_setfield(L, -2, name);
}

static void set_num(lua_State *L, const char *name, double d) {
  lua_pushnumber(L, d);
  lua_setfield(L, -2, name);
}

void uvtl_push_snapshot(lua_State *L, uvtl_reg_t *r, const uvt_snapshot_t *s,
                        const uvt_agent_t *caller) {
  int exited, code, sig, n;

  lua_createtable(L, 0, 14);
  set_str(L, "id", s->id);
  set_str(L, "kind", s->kind);
  set_str(L, "label", s->label);
  set_str(L, "owner_session", s->owner_session);
  set_str(L, "status", uvt_status_name(s->status));
  set_str(L, "detail", s->detail);
  set_num(L, "started_at", (double)s->started_at_ms);
  if (s->finished_at_ms != 0)
    set_num(L, "finished_at", (double)s->finished_at_ms);
  lua_pushboolean(L, s->reported != 0);
  lua_setfield(L, -2, "reported");
  set_str(L, "kill_reason", s->kill_reason);
  /* A process task's end without a read (as the Node snapshot's
   * exitCode, signal and leftovers, N-7): nothing is consumed. */
  if (r == NULL || r->reg == NULL ||
      uvt_process_status(r->reg, s->id, caller, &exited, &code, &sig) != 0)
    return;
  if (exited && code >= 0)
    set_num(L, "exit_code", code);
  if (exited && sig > 0) {
    const char *name = uvtl_signal_name(sig);
    if (name != NULL)
      set_str(L, "signal", name);
    else
      set_num(L, "signal", sig);
  }
  n = 0;
  /* P-LEFT-1: only an end whose detail named processes still running
   * can have any (one pass over /proc then). */
  if (exited && s->detail != NULL &&
      strstr(s->detail, " still running") != NULL)
    n = uvt_process_leftovers(r->reg, s->id, caller);
  set_num(L, "leftovers", n > 0 ? n : 0);
}

int uvtl_opt_field(lua_State *L, int idx, const char *name) {
  if (!lua_istable(L, idx))
    return 0;
  lua_getfield(L, idx, name);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

uvtl_agent_t *uvtl_to_agent(lua_State *L, int idx) {
  uvtl_agent_t **box;
  if (lua_isnoneornil(L, idx))
    return NULL;
  box = lua_touserdata(L, idx);
  if (box != NULL && lua_getmetatable(L, idx)) {
    luaL_getmetatable(L, UVTL_AGENT_MT);
    if (lua_rawequal(L, -1, -2)) {
      lua_pop(L, 2);
      return *box;
    }
    lua_pop(L, 2);
  }
  uvtl_arg_error(L, "the caller/owner must be an agent from "
                    "register_agent()");
  return NULL;
}

uvtl_agent_t *uvtl_opt_agent(lua_State *L, int idx, const char *field) {
  uvtl_agent_t *a;
  if (!uvtl_opt_field(L, idx, field))
    return NULL;
  a = uvtl_to_agent(L, -1);
  lua_pop(L, 1);
  return a;
}

uint64_t uvtl_check_u64(lua_State *L, int idx, const char *name, int huge_ok) {
  double v;
  if (lua_type(L, idx) != LUA_TNUMBER)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a number", name));
  v = lua_tonumber(L, idx);
  if (huge_ok && v == HUGE_VAL)
    return UINT64_MAX;
  if (!(v >= 0) || v == HUGE_VAL)
    uvtl_arg_error(L, lua_pushfstring(L, "%s must be a number >= 0", name));
  v = ceil(v);
  return v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
}
