/* tasks.spawn() and the process task calls (SPEC §3, §3b through §8).
 *
 * The interactive half of the process producer (stdin pipe, terminal,
 * output backpressure, on_output: SPEC §3b) is compiled in when the
 * library's uvt_process_options_t has those members (meson checks); until
 * then the calls that need it throw ENOTSUP, and features() says so. */
#include <stdlib.h>
#include <string.h>

#include "uvtn.h"

static int prop(napi_env env, napi_value obj, const char *name, napi_value *v) {
  napi_valuetype t;
  if (napi_get_named_property(env, obj, name, v) != napi_ok)
    return 0;
  napi_typeof(env, *v, &t);
  return t != napi_undefined && t != napi_null;
}

/* A JS array of strings as a NULL-terminated array (one allocation for the
 * pointers; each string its own). */
static int string_array(napi_env env, napi_value arr, const char *name,
                        char ***out) {
  bool is_array = false;
  uint32_t n, i;
  char **v;

  *out = NULL;
  napi_is_array(env, arr, &is_array);
  if (!is_array) {
    uvtn_throw_type(env, "argv/env must be arrays of strings");
    return 0;
  }
  napi_get_array_length(env, arr, &n);
  v = calloc((size_t)n + 1, sizeof(*v));
  if (v == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    return 0;
  }
  *out = v;
  for (i = 0; i < n; i++) {
    napi_value e;
    napi_get_element(env, arr, i, &e);
    if (!uvtn_string(env, e, name, 0, &v[i]))
      return 0;
  }
  return 1;
}

static void free_array(char **v) {
  size_t i;
  if (v == NULL)
    return;
  for (i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

static int bool_prop(napi_env env, napi_value obj, const char *name) {
  napi_value v;
  bool b = false;
  if (!prop(env, obj, name, &v))
    return 0;
  napi_coerce_to_bool(env, v, &v);
  napi_get_value_bool(env, v, &b);
  return b;
}

#ifdef UVTN_HAVE_ON_OUTPUT
/* onOutput(id): one per task, freed when the record is dropped or the
 * registry closes (the library calls it at most until the terminal
 * transition, P-EVT-1). */
typedef struct {
  uvtn_reg_t *r;
  napi_ref fn;
} output_sub_t;

static void on_output(const char *id, void *data) {
  output_sub_t *o = data;
  uvtn_scope_t s;
  napi_value arg;
  if (o->r->reg == NULL)
    return;
  uvtn_scope_open(o->r, &s);
  if (s.ok) {
    napi_create_string_utf8(s.st->env, id, NAPI_AUTO_LENGTH, &arg);
    uvtn_call(&s, o->fn, 1, &arg);
  }
  uvtn_scope_close(&s);
}
#endif

/* spawn(reg, options) -> id.  The JS wrapper has turned `env` into an array
 * of "NAME=value" strings and `stdin: 'null'` into undefined. */
napi_value uvtn_spawn(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], v, result = NULL;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvtn_agent_t *owner = NULL;
  uvt_process_options_t o;
  char *command = NULL, *kind = NULL, *label = NULL, *cwd = NULL;
  char *stdin_data = NULL;
  size_t stdin_len = 0;
  char **args = NULL, **envv = NULL;
  char id[UVT_ID_MAX];
  int err, stdin_pipe = 0;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL)
    goto out;
  uvt_process_options_init(&o);
  if ((prop(env, argv[1], "command", &v) &&
       !uvtn_string(env, v, "command", 0, &command)) ||
      (prop(env, argv[1], "argv", &v) &&
       !string_array(env, v, "argv", &args)) ||
      (prop(env, argv[1], "env", &v) && !string_array(env, v, "env", &envv)) ||
      (prop(env, argv[1], "kind", &v) &&
       !uvtn_string(env, v, "kind", 0, &kind)) ||
      (prop(env, argv[1], "label", &v) &&
       !uvtn_string(env, v, "label", 0, &label)) ||
      (prop(env, argv[1], "cwd", &v) && !uvtn_string(env, v, "cwd", 0, &cwd)) ||
      (prop(env, argv[1], "owner", &v) && !uvtn_caller_arg(env, v, &owner)))
    goto out;
  if ((prop(env, argv[1], "graceMs", &v) &&
       !uvtn_u64(env, v, "graceMs", &o.grace_ms)) ||
      (prop(env, argv[1], "drainMs", &v) &&
       !uvtn_u64(env, v, "drainMs", &o.drain_ms)) ||
      (prop(env, argv[1], "maxRuntimeMs", &v) &&
       !uvtn_u64(env, v, "maxRuntimeMs", &o.max_runtime_ms)))
    goto out;
  if (prop(env, argv[1], "outputCapBytes", &v)) {
    uint64_t cap = 0;
    if (!uvtn_u64(env, v, "outputCapBytes", &cap))
      goto out;
    o.output_cap_bytes = (size_t)cap;
  }
  if (prop(env, argv[1], "stdin", &v)) {
    napi_valuetype t;
    char *s = NULL;
    napi_typeof(env, v, &t);
    if (t == napi_string) {
      if (!uvtn_string(env, v, "stdin", 0, &s))
        goto out;
      stdin_pipe = strcmp(s, "pipe") == 0;
      free(s);
    }
    if (!stdin_pipe && !uvtn_bytes(env, v, "stdin", &stdin_data, &stdin_len))
      goto out;
  }
  if (stdin_pipe) {
#ifdef UVTN_HAVE_STDIN_PIPE
    o.stdin_pipe = 1;
#else
    uvtn_throw_notsup(env, "spawn({ stdin: 'pipe' })");
    goto out;
#endif
  }
  if (bool_prop(env, argv[1], "tty") || prop(env, argv[1], "cols", &v) ||
      prop(env, argv[1], "rows", &v)) {
#ifdef UVTN_HAVE_PTY
    uint64_t n = 0;
    o.pty = bool_prop(env, argv[1], "tty");
    if (prop(env, argv[1], "cols", &v)) {
      if (!uvtn_u64(env, v, "cols", &n))
        goto out;
      o.pty_cols = (uint16_t)(n > 65535 ? 65535 : n);
    }
    if (prop(env, argv[1], "rows", &v)) {
      if (!uvtn_u64(env, v, "rows", &n))
        goto out;
      o.pty_rows = (uint16_t)(n > 65535 ? 65535 : n);
    }
#else
    uvtn_throw_notsup(env, "spawn({ tty, cols, rows })");
    goto out;
#endif
  }
  if (bool_prop(env, argv[1], "outputBackpressure")) {
#ifdef UVTN_HAVE_OUTPUT_BACKPRESSURE
    o.output_backpressure = 1;
#else
    uvtn_throw_notsup(env, "spawn({ outputBackpressure })");
    goto out;
#endif
  }
  if (prop(env, argv[1], "onOutput", &v)) {
#ifdef UVTN_HAVE_ON_OUTPUT
    output_sub_t *sub = calloc(1, sizeof(*sub));
    if (sub == NULL) {
      uvtn_throw(env, UV_ENOMEM, NULL, NULL);
      goto out;
    }
    sub->r = r;
    napi_create_reference(env, v, 1, &sub->fn);
    o.on_output = on_output;
    o.on_output_data = sub;
    /* Kept for the registry's life: the library says when it stops calling
     * (never after the terminal transition), not when it lets go. */
#else
    uvtn_throw_notsup(env, "spawn({ onOutput })");
    goto out;
#endif
  }

  o.command = command;
  o.argv = (const char *const *)args;
  o.env = (const char *const *)envv;
  o.kind = kind;
  o.label = label;
  o.cwd = cwd;
  o.owner = owner != NULL ? &owner->agent : NULL;
  if (stdin_data != NULL) {
    o.stdin_data = stdin_data;
    o.stdin_len = stdin_len;
  }
  err = uvt_process_start(r->reg, &o, id);
  if (err != 0) {
    uvtn_throw(env, err, "spawn",
               command != NULL                   ? command
               : args != NULL && args[0] != NULL ? args[0]
                                                 : NULL);
    goto out;
  }
  napi_create_string_utf8(env, id, NAPI_AUTO_LENGTH, &result);
out:
  free(command);
  free(kind);
  free(label);
  free(cwd);
  free(stdin_data);
  free_array(args);
  free_array(envv);
  uvtn_leave(st);
  return result;
}

/* pid(reg, id, caller) -> number, or undefined while the spawn is out.
 *
 * P-SPAWN-6: the library answers 0 until the spawner thread's answer has
 * reached the loop (never within the JS turn that called spawn()), and
 * UV_ESRCH for a task that never had a process.  JS gets undefined for
 * the 0, not the number: process.kill(0, sig) and process.kill(-0, sig)
 * signal the host's own process group, while process.kill(undefined) and
 * process.kill(-undefined) throw. */
napi_value uvtn_pid(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3] = {NULL, NULL, NULL}, result = NULL;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  int pid;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  pid = uvt_process_pid(r->reg, id, caller);
  if (pid < 0) {
    uvtn_throw(env, pid, "pid", id);
    goto out;
  }
  if (pid == 0)
    result = uvtn_undefined(env);
  else
    napi_create_int32(env, pid, &result);
out:
  free(id);
  uvtn_leave(st);
  return result;
}

/* stopAllNow() -> the number of sessions signalled (N-3).
 *
 * For the ends that run no cleanup hook: on the main thread,
 * process.exit() and an uncaught exception end the process from the
 * 'exit' event without tearing the environment down, and a fatal signal
 * nobody handles ends it without any JS, so no registry gets to close.
 * index.js calls this from the 'exit' event and from its signal
 * listeners.  uvt_process_stop_all_now() sends SIGKILL to every session
 * of every live process task of every registry of this copy of the
 * library (the main thread's and every worker's), waits for a spawn in
 * progress and makes later spawns settle unspawned.  No loop runs any
 * more, so there is no grace period.  Any thread. */
napi_value uvtn_stop_all_now(napi_env env, napi_callback_info info) {
  napi_value result;
  napi_create_int32(env, uvt_process_stop_all_now(), &result);
  return result;
}

/* write(reg, id, caller, data) (P-IN-1) */
napi_value uvtn_write(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4] = {NULL, NULL, NULL, NULL};
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL, *data = NULL;
  size_t len = 0;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller) ||
      !uvtn_bytes(env, argv[3], "data", &data, &len))
    goto out;
#ifdef UVTN_HAVE_STDIN_PIPE
  {
    int err = uvt_process_write(r->reg, id, caller, data, len);
    if (err != 0)
      uvtn_throw(env, err, "write", id);
  }
#else
  uvtn_throw_notsup(env, "write()");
#endif
out:
  free(id);
  free(data);
  uvtn_leave(st);
  return NULL;
}

/* closeStdin(reg, id, caller) (P-IN-1) */
napi_value uvtn_close_stdin(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3] = {NULL, NULL, NULL};
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
#ifdef UVTN_HAVE_STDIN_PIPE
  {
    int err = uvt_process_close_stdin(r->reg, id, caller);
    if (err != 0)
      uvtn_throw(env, err, "closeStdin", id);
  }
#else
  uvtn_throw_notsup(env, "closeStdin()");
#endif
out:
  free(id);
  uvtn_leave(st);
  return NULL;
}

/* resize(reg, id, caller, cols, rows) (P-PTY-1) */
napi_value uvtn_resize(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5] = {NULL, NULL, NULL, NULL, NULL};
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  uint64_t cols = 0, rows = 0;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller) ||
      !uvtn_u64(env, argv[3], "cols", &cols) ||
      !uvtn_u64(env, argv[4], "rows", &rows))
    goto out;
#ifdef UVTN_HAVE_PTY
  {
    int err;
    if (cols == 0 || rows == 0 || cols > 65535 || rows > 65535) {
      uvtn_throw(env, UV_EINVAL, "resize", id);
      goto out;
    }
    err =
        uvt_process_resize(r->reg, id, caller, (uint16_t)cols, (uint16_t)rows);
    if (err != 0)
      uvtn_throw(env, err, "resize", id);
  }
#else
  uvtn_throw_notsup(env, "resize()");
#endif
out:
  free(id);
  uvtn_leave(st);
  return NULL;
}

/* features() -> which optional parts of the library this build has. */
napi_value uvtn_features(napi_env env, napi_callback_info info) {
  napi_value obj, b;
  napi_create_object(env, &obj);
#define FEATURE(name, on)                                                      \
  napi_get_boolean(env, (on), &b);                                             \
  napi_set_named_property(env, obj, name, b)
#ifdef UVTN_HAVE_STDIN_PIPE
  FEATURE("stdinPipe", 1);
#else
  FEATURE("stdinPipe", 0);
#endif
#ifdef UVTN_HAVE_PTY
  FEATURE("tty", 1);
#else
  FEATURE("tty", 0);
#endif
#ifdef UVTN_HAVE_OUTPUT_BACKPRESSURE
  FEATURE("outputBackpressure", 1);
#else
  FEATURE("outputBackpressure", 0);
#endif
#ifdef UVTN_HAVE_ON_OUTPUT
  FEATURE("onOutput", 1);
#else
  FEATURE("onOutput", 0);
#endif
#undef FEATURE
  return obj;
}
