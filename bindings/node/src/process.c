/* tasks.spawn() and the process task calls (contract §3, §3b through §8):
 * pid, write, closeStdin, resize, readProcess, and onOutput's lifetime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* A boolean option: undefined/null -> 0; anything but a boolean throws
 * (N-1: `tty: 'yes'` is a mistake, not a yes).  Returns 1, or 0 after
 * throwing. */
static int bool_opt(napi_env env, napi_value obj, const char *name, int *out) {
  napi_value v;
  napi_valuetype t;
  bool b = false;
  char msg[128];

  *out = 0;
  if (!prop(env, obj, name, &v))
    return 1;
  napi_typeof(env, v, &t);
  if (t != napi_boolean) {
    snprintf(msg, sizeof(msg), "%s must be a boolean", name);
    uvtn_throw_type(env, msg);
    return 0;
  }
  napi_get_value_bool(env, v, &b);
  *out = b;
  return 1;
}

/* A terminal dimension: an integer 0..65535 (0 is the library's EINVAL,
 * beyond 65535 a RangeError: it does not fit the C type).  Returns 1, or 0
 * after throwing; undefined/null leave *out unchanged. */
static int cells_arg(napi_env env, napi_value v, const char *name,
                     uint16_t *out) {
  uint64_t n = *out;
  char msg[128];
  if (!uvtn_u64(env, v, name, &n))
    return 0;
  if (n > 65535) {
    snprintf(msg, sizeof(msg), "%s must be at most 65535", name);
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
    return 0;
  }
  *out = (uint16_t)n;
  return 1;
}

/* onOutput(id) of one task (P-EVT-1).  The library calls it until the
 * task's terminal transition and never after, but says nothing when it
 * lets go of on_output_data; so the registry's own listener (see
 * uvtn_outputs_done()) releases the JS function at that transition, and
 * registry close releases what is left.  `refs`: one while the task may
 * still call it, one across each call (the callback may end the task). */
typedef struct {
  uvtn_link_t link; /* r->outputs while held */
  uvtn_reg_t *r;
  napi_ref fn;
  char id[UVT_ID_MAX];
  int held;
  int at_end; /* called once more, with (id, true), at the task's end */
  int refs;
} output_sub_t;

static void output_unref(output_sub_t *o) {
  if (--o->refs > 0)
    return;
  uvtn_reg_unref(o->r);
  free(o);
}

/* Lets go of the JS function; returns 1 if it was held (the caller then
 * owes the hold's count), else 0. */
static int output_unhold(output_sub_t *o) {
  if (!o->held)
    return 0;
  o->held = 0;
  uvtn_list_remove(&o->link);
  if (!o->r->st->tearing_down && o->fn != NULL)
    napi_delete_reference(o->r->st->env, o->fn);
  o->fn = NULL;
  o->r->st->output_refs--;
  return 1;
}

static void output_release(output_sub_t *o) {
  if (output_unhold(o))
    output_unref(o);
}

static void call_output(output_sub_t *o, const char *id, int at_end) {
  uvtn_scope_t s;
  napi_value args[2];
  if (!o->held || o->r->reg == NULL)
    return;
  o->refs++;
  uvtn_scope_open(o->r, &s);
  if (s.ok) {
    napi_create_string_utf8(s.st->env, id, NAPI_AUTO_LENGTH, &args[0]);
    napi_get_boolean(s.st->env, at_end != 0, &args[1]);
    uvtn_call(&s, o->fn, at_end ? 2 : 1, args);
  }
  uvtn_scope_close(&s);
  output_unref(o);
}

static void on_output(const char *id, void *data) {
  call_output(data, id, 0);
}

/* N-6: a function spawned with `outputAtEnd` (index.js's onData pump) is
 * called once more from the registry's own listener, which runs first at
 * the terminal transition, before any host listener and wait callback: the
 * bytes still unread then (the library calls on_output no more) reach the
 * host before anything says the task ended. */
void uvtn_outputs_done(uvtn_reg_t *r, const char *id) {
  uvtn_link_t *n;
  for (n = r->outputs.next; n != &r->outputs; n = n->next) {
    output_sub_t *o = uvtn_container_of(n, output_sub_t, link);
    if (strcmp(o->id, id) == 0) {
      if (o->at_end) {
        /* The call may close the registry, which releases the function. */
        o->refs++;
        call_output(o, id, 1);
        if (output_unhold(o))
          o->refs--;
        output_unref(o);
      } else {
        output_release(o);
      }
      return;
    }
  }
}

void uvtn_outputs_closed(uvtn_reg_t *r) {
  while (r->outputs.next != &r->outputs)
    output_release(uvtn_container_of(r->outputs.next, output_sub_t, link));
}

/* L-LIM-3: options.limits = { memoryBytes, maxProcesses, cpuPercent },
 * each a whole number (0 or absent: no limit on it). */
static int limits_arg(napi_env env, napi_value obj, uvt_process_limits_t *l) {
  napi_valuetype t;
  napi_value v;
  uint64_t n;

  napi_typeof(env, obj, &t);
  if (t == napi_undefined || t == napi_null)
    return 1;
  if (t != napi_object) {
    uvtn_throw_type(env, "limits must be an object");
    return 0;
  }
  if (prop(env, obj, "memoryBytes", &v)) {
    if (!uvtn_u64(env, v, "limits.memoryBytes", &n))
      return 0;
    l->memory_bytes = n;
  }
  if (prop(env, obj, "maxProcesses", &v)) {
    if (!uvtn_u64(env, v, "limits.maxProcesses", &n))
      return 0;
    if (n > UINT32_MAX) {
      uvtn_throw_type(env, "limits.maxProcesses is too large");
      return 0;
    }
    l->max_processes = (uint32_t)n;
  }
  if (prop(env, obj, "cpuPercent", &v)) {
    if (!uvtn_u64(env, v, "limits.cpuPercent", &n))
      return 0;
    if (n > UINT32_MAX) {
      uvtn_throw_type(env, "limits.cpuPercent is too large");
      return 0;
    }
    l->cpu_percent = (uint32_t)n;
  }
  return 1;
}

/* S-4: options.sandbox = { fs: 'read-only' | 'workspace', writable:
 * string[], hidden: string[], network: 'none' | 'host', workspace: string
 * (S-5) } into *sb (every field optional: read-only, no extra writable
 * path, the default hidden list, no network, the cwd as the workspace).
 * The arrays are the caller's to free_array(), *workspace to free(). */
static int sandbox_arg(napi_env env, napi_value obj, uvt_sandbox_t *sb,
                       char ***writable, char ***hidden, char **workspace) {
  napi_valuetype t;
  napi_value v;
  char *s = NULL;
  int ok = 1;

  memset(sb, 0, sizeof(*sb));
  napi_typeof(env, obj, &t);
  if (t != napi_object) {
    uvtn_throw_type(env, "sandbox must be an object");
    return 0;
  }
  if (prop(env, obj, "fs", &v)) {
    if (!uvtn_string(env, v, "sandbox.fs", 0, &s))
      return 0;
    if (strcmp(s, "workspace") == 0)
      sb->fs = UVT_SANDBOX_FS_WORKSPACE;
    else if (strcmp(s, "read-only") != 0)
      ok = 0;
    free(s);
    s = NULL;
  }
  if (ok && prop(env, obj, "network", &v)) {
    if (!uvtn_string(env, v, "sandbox.network", 0, &s))
      return 0;
    if (strcmp(s, "host") == 0)
      sb->network = UVT_SANDBOX_NET_HOST;
    else if (strcmp(s, "none") != 0)
      ok = 0;
    free(s);
  }
  if (!ok) {
    uvtn_throw_type(env, "sandbox.fs must be 'read-only' or 'workspace', "
                         "sandbox.network 'none' or 'host'");
    return 0;
  }
  if ((prop(env, obj, "writable", &v) &&
       !string_array(env, v, "sandbox.writable", writable)) ||
      (prop(env, obj, "hidden", &v) &&
       !string_array(env, v, "sandbox.hidden", hidden)))
    return 0;
  sb->writable = (const char *const *)*writable;
  sb->hidden = (const char *const *)*hidden;
  /* S-5: the host's workspace, apart from the command's cwd. */
  if (prop(env, obj, "workspace", &v)) {
    if (!uvtn_string(env, v, "sandbox.workspace", 0, workspace))
      return 0;
    sb->workspace = *workspace;
  }
  return 1;
}

/* N-13: the error of a spawn() the library refused, naming its cause:
 * the library's own error lines of the call (a sandbox that cannot be
 * made: no bwrap, user namespaces refused, bwrap's message), else for an
 * error about a path the path that is at fault (a sandbox.writable path,
 * the cwd, the program), else the library's text.  Always `code` (the
 * error's name, N-1), `errno`, `syscall` 'spawn', and `path` when one is
 * named. */
static void spawn_error(napi_env env, int err, const char *prog,
                        const char *cwd, char *const *writable,
                        const char *captured) {
  char msg[2048];
  napi_value code, message, error, v;
  const char *name = uvt_err_name(err);
  const char *path = NULL, *what = NULL;
  struct stat st;
  char *const *w;

  if (prog == NULL)
    prog = "";
  if (captured != NULL) {
    snprintf(msg, sizeof(msg), "%s: %s, spawn '%s'", name, captured, prog);
  } else if (err == UV_ENOENT || err == UV_ENOTDIR || err == UV_EACCES ||
             err == UV_ELOOP || err == UV_ENAMETOOLONG) {
    for (w = writable; w != NULL && *w != NULL && path == NULL; w++)
      if (stat(*w, &st) != 0) {
        path = *w;
        what = "sandbox.writable";
      }
    if (path == NULL && cwd != NULL &&
        (stat(cwd, &st) != 0 || !S_ISDIR(st.st_mode))) {
      path = cwd;
      what = "cwd";
    }
    if (path == NULL)
      path = prog;
    if (what != NULL)
      snprintf(msg, sizeof(msg), "%s: %s: %s '%s', spawn '%s'", name,
               uvt_strerror(err), what, path, prog);
    else
      snprintf(msg, sizeof(msg), "%s: %s, spawn '%s'", name, uvt_strerror(err),
               prog);
  } else {
    snprintf(msg, sizeof(msg), "%s: %s, spawn '%s'", name, uvt_strerror(err),
             prog);
  }
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, err, &v);
  napi_set_named_property(env, error, "errno", v);
  napi_create_string_utf8(env, "spawn", NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, error, "syscall", v);
  if (path != NULL) {
    napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, error, "path", v);
  }
  napi_throw(env, error);
}

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
  output_sub_t *sub = NULL;
  napi_value v_output = NULL;
  uint64_t stdin_cap = UINT64_MAX;
  uvt_sandbox_t sandbox;
  char **sb_writable = NULL, **sb_hidden = NULL;
  char *captured = NULL;
  char *sb_workspace = NULL;
  int err, stdin_pipe = 0, at_end = 0;

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
    uint64_t n = 0;
    if (!uvtn_u64(env, v, "outputCapBytes", &n))
      goto out;
    o.output_cap_bytes = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
  }
  if (prop(env, argv[1], "stdin", &v)) {
    /* 'pipe', or input bytes: a string is input like a Buffer, so a NUL
     * in it is a byte to send, not a reason to refuse it. */
    if (!uvtn_bytes(env, v, "stdin", &stdin_data, &stdin_len))
      goto out;
    stdin_pipe = stdin_len == 4 && memcmp(stdin_data, "pipe", 4) == 0;
    if (stdin_pipe) {
      napi_valuetype t;
      napi_typeof(env, v, &t);
      stdin_pipe = t == napi_string; /* Buffer.from('pipe') is input */
    }
    if (stdin_pipe) {
      free(stdin_data);
      stdin_data = NULL;
      stdin_len = 0;
    }
  }
  o.stdin_pipe = stdin_pipe;
  if ((prop(env, argv[1], "stdinCapBytes", &v) &&
       !uvtn_u64(env, v, "stdinCapBytes", &stdin_cap)) ||
      !bool_opt(env, argv[1], "tty", &o.pty) ||
      (prop(env, argv[1], "cols", &v) &&
       !cells_arg(env, v, "cols", &o.pty_cols)) ||
      (prop(env, argv[1], "rows", &v) &&
       !cells_arg(env, v, "rows", &o.pty_rows)) ||
      !bool_opt(env, argv[1], "outputBackpressure", &o.output_backpressure) ||
      !bool_opt(env, argv[1], "outputAtEnd", &at_end) ||
      !bool_opt(env, argv[1], "durable", &o.durable)) /* D-1 */
    goto out;
  if (stdin_cap != UINT64_MAX)
    o.stdin_cap_bytes = stdin_cap > SIZE_MAX ? SIZE_MAX : (size_t)stdin_cap;
  if (prop(env, argv[1], "stdoutPipeBytes", &v)) {
    /* N-12: index.js sets it for onData and streams: true. */
    uint64_t n = 0;
    if (!uvtn_u64(env, v, "stdoutPipeBytes", &n))
      goto out;
    o.stdout_pipe_bytes = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
  }
  if (prop(env, argv[1], "sandbox", &v)) {
    if (!sandbox_arg(env, v, &sandbox, &sb_writable, &sb_hidden, &sb_workspace))
      goto out;
    o.sandbox = &sandbox;
  }
  if (prop(env, argv[1], "limits", &v) && !limits_arg(env, v, &o.limits))
    goto out;
  if (prop(env, argv[1], "onOutput", &v)) {
    napi_valuetype t;
    napi_typeof(env, v, &t);
    if (t != napi_function) {
      uvtn_throw_type(env, "onOutput must be a function");
      goto out;
    }
    sub = calloc(1, sizeof(*sub));
    if (sub == NULL) {
      uvtn_throw(env, UV_ENOMEM, NULL, NULL);
      goto out;
    }
    v_output = v;
    o.on_output = on_output;
    o.on_output_data = sub;
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
  uvtn_capture_begin(r);
  err = uvt_process_start(r->reg, &o, id);
  captured = uvtn_capture_end(r, err == 0);
  if (err == UV_ENOTSUP &&
      (o.limits.memory_bytes > 0 || o.limits.max_processes > 0 ||
       o.limits.cpu_percent > 0)) {
    /* L-LIM-1: never an unlimited run; the error says why. */
    char why[512];
    if (uvt_process_limits_check(r->reg, &o.limits, why, sizeof(why)) ==
        UV_ENOTSUP) {
      free(captured);
      captured = strdup(why);
      o.sandbox = NULL; /* the sandbox was not what failed */
    }
  }
  if (err == UV_ENOTSUP && o.sandbox != NULL) {
    /* The library says why once per registry and network setting. */
    char **why = &r->sandbox_why[o.sandbox->network != 0];
    if (captured != NULL) {
      free(*why);
      *why = strdup(captured);
    } else if (*why != NULL) {
      captured = strdup(*why);
    }
  }
  if (err != 0) {
    spawn_error(env, err,
                command != NULL                   ? command
                : args != NULL && args[0] != NULL ? args[0]
                                                  : NULL,
                cwd, sb_writable, captured);
    goto out;
  }
  if (sub != NULL) {
    /* The task cannot have ended inside the call (its spawn runs on a
     * spawner thread and the library calls back from the loop only). */
    sub->r = r;
    r->refs++;
    memcpy(sub->id, id, sizeof(sub->id));
    napi_create_reference(env, v_output, 1, &sub->fn);
    sub->held = 1;
    sub->at_end = at_end;
    sub->refs = 1;
    uvtn_list_insert(&r->outputs, &sub->link);
    st->output_refs++;
    sub = NULL;
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
  free_array(sb_writable);
  free_array(sb_hidden);
  free(captured);
  free(sb_workspace);
  free(sub); /* unused: the spawn threw */
  uvtn_leave(st);
  return result;
}

/* adopt(reg, stateDir, owner) -> the number of tasks taken back (D-3,
 * uvt_process_adopt_all). */
napi_value uvtn_adopt(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3] = {NULL, NULL, NULL}, result = NULL;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvtn_agent_t *owner = NULL;
  char *dir = NULL;
  int n;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  r = uvtn_reg_arg(env, argv[0], 1);
  if (r == NULL || !uvtn_string(env, argv[1], "stateDir", 0, &dir) ||
      !uvtn_caller_arg(env, argv[2], &owner))
    goto out;
  n = uvt_process_adopt_all(r->reg, dir, owner != NULL ? &owner->agent : NULL);
  if (n < 0) {
    uvtn_throw(env, n, "adopt", dir);
    goto out;
  }
  napi_create_int32(env, n, &result);
out:
  free(dir);
  uvtn_leave(st);
  return result;
}

/* stopDurable(reg, on): a close stops durable tasks too (D-1). */
napi_value uvtn_stop_durable(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2] = {NULL, NULL};
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  bool on = false;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  r = uvtn_reg_arg(env, argv[0], 1);
  if (r == NULL)
    goto out;
  napi_get_value_bool(env, argv[1], &on);
  err = uvt_process_stop_durable(r->reg, on);
  if (err != 0 && err != UV_EINVAL) /* EINVAL: no state directory */
    uvtn_throw(env, err, "close", NULL);
out:
  uvtn_leave(st);
  return NULL;
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
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller) ||
      !uvtn_bytes(env, argv[3], "data", &data, &len))
    goto out;
  err = uvt_process_write(r->reg, id, caller, data, len);
  if (err != 0)
    uvtn_throw(env, err, "write", id);
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
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  err = uvt_process_close_stdin(r->reg, id, caller);
  if (err != 0)
    uvtn_throw(env, err, "closeStdin", id);
out:
  free(id);
  uvtn_leave(st);
  return NULL;
}

/* resize(reg, id, caller, cols, rows) (P-PTY-1).  0 goes to the library,
 * which answers EINVAL; beyond 65535 does not fit its type. */
napi_value uvtn_resize(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5] = {NULL, NULL, NULL, NULL, NULL};
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  uint16_t cols = 0, rows = 0;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller) ||
      !cells_arg(env, argv[3], "cols", &cols) ||
      !cells_arg(env, argv[4], "rows", &rows))
    goto out;
  err = uvt_process_resize(r->reg, id, caller, cols, rows);
  if (err != 0)
    uvtn_throw(env, err, "resize", id);
out:
  free(id);
  uvtn_leave(st);
  return NULL;
}

static void set_number(napi_env env, napi_value obj, const char *name,
                       double d) {
  napi_value n;
  napi_create_double(env, d, &n);
  napi_set_named_property(env, obj, name, n);
}

/* readProcess(reg, id, caller) -> { stdout, stderr, stdoutDropped,
 * stderrDropped, exited, exitCode, termSignal, snapshot } (P-RES-1): the
 * streams as Buffers (any bytes), the counts as numbers; exitCode and
 * termSignal are null where the library says -1 / 0 (no exit status, no
 * signal).  index.js turns termSignal into the signal's name. */
napi_value uvtn_read_process(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3] = {NULL, NULL, NULL}, result = NULL, v;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  uvt_process_read_t rd;
  char *id = NULL;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  memset(&rd, 0, sizeof(rd));
  err = uvt_process_read(r->reg, id, caller, &rd);
  if (err != 0) {
    uvtn_throw(env, err, "readProcess", id);
    goto out;
  }
  napi_create_object(env, &result);
  napi_create_buffer_copy(env, rd.out_len, rd.out, NULL, &v);
  napi_set_named_property(env, result, "stdout", v);
  napi_create_buffer_copy(env, rd.err_len, rd.err, NULL, &v);
  napi_set_named_property(env, result, "stderr", v);
  set_number(env, result, "stdoutDropped", (double)rd.out_dropped);
  set_number(env, result, "stderrDropped", (double)rd.err_dropped);
  napi_get_boolean(env, rd.exited != 0, &v);
  napi_set_named_property(env, result, "exited", v);
  if (rd.exited && rd.exit_code >= 0)
    set_number(env, result, "exitCode", rd.exit_code);
  else {
    napi_get_null(env, &v);
    napi_set_named_property(env, result, "exitCode", v);
  }
  if (rd.exited && rd.term_signal > 0)
    set_number(env, result, "termSignal", rd.term_signal);
  else {
    napi_get_null(env, &v);
    napi_set_named_property(env, result, "termSignal", v);
  }
  napi_set_named_property(env, result, "snapshot",
                          uvtn_snapshot(env, &rd.snapshot));
  uvt_process_read_cleanup(&rd);
out:
  free(id);
  uvtn_leave(st);
  return result;
}

/* N-12: a block the library returned from a read, handed to JS without a
 * copy.  Its finalizer gives the block back through the library's own
 * cleanup, so it is freed with the allocator that made it. */
static void free_block(napi_env env, void *data, void *hint) {
  uvt_process_read_t rd;

  (void)env;
  (void)hint;
  memset(&rd, 0, sizeof(rd));
  rd.out = data;
  uvt_process_read_cleanup(&rd);
}

/* One stream's new bytes as a Buffer over the library's block (`*bytes`
 * is then the Buffer's, and set to NULL), or null when there are none.
 * Where a runtime allows no external buffers (a V8 sandbox), a copy. */
static napi_value chunk_value(napi_env env, char **bytes, size_t len) {
  napi_value v = NULL;

  if (len == 0) {
    napi_get_null(env, &v);
    return v;
  }
  if (napi_create_external_buffer(env, len, *bytes, free_block, NULL, &v) ==
      napi_ok) {
    *bytes = NULL;
    return v;
  }
  napi_create_buffer_copy(env, len, *bytes, NULL, &v);
  return v;
}

/* readChunks(reg, id, caller) -> [stdout, stderr] (each a Buffer, or null
 * when it has no new bytes), or undefined when neither has any: the
 * onData pump's read (N-6, N-12).  The same consuming read as
 * readProcess() (P-RES-1), without what the pump does not use: no
 * snapshot object, no counts, and the bytes are not copied again (the
 * Buffers wrap the blocks the library returned).  With
 * output_backpressure nothing is dropped, so there are no counts to
 * lose. */
napi_value uvtn_read_chunks(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3] = {NULL, NULL, NULL}, result = NULL;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  uvt_process_read_t rd;
  char *id = NULL;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  memset(&rd, 0, sizeof(rd));
  err = uvt_process_read(r->reg, id, caller, &rd);
  if (err != 0) {
    uvtn_throw(env, err, "readProcess", id);
    goto out;
  }
  if (rd.out_len == 0 && rd.err_len == 0) {
    result = uvtn_undefined(env);
  } else {
    napi_create_array_with_length(env, 2, &result);
    napi_set_element(env, result, 0, chunk_value(env, &rd.out, rd.out_len));
    napi_set_element(env, result, 1, chunk_value(env, &rd.err, rd.err_len));
  }
  uvt_process_read_cleanup(&rd);
out:
  free(id);
  uvtn_leave(st);
  return result;
}

/* outputRefs() -> how many onOutput functions this environment's
 * registries hold now: a test's view of their release (P-EVT-1). */
napi_value uvtn_output_refs(napi_env env, napi_callback_info info) {
  uvtn_env_t *st = NULL;
  napi_value n;
  napi_get_instance_data(env, (void **)&st);
  napi_create_double(env, (double)st->output_refs, &n);
  return n;
}

/* procStatus(reg, id, caller, leftovers) -> { exitCode, termSignal,
 * leftovers? } of an ended process task, {} of a live one, undefined for a
 * task of another producer (N-7).  Reads nothing (uvt_process_status());
 * `leftovers` true adds P-LEFT-1's live count (one pass over /proc). */
napi_value uvtn_proc_status(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4] = {NULL, NULL, NULL, NULL}, result = NULL, v;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  bool want_left = false;
  int err, exited, code, sig;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  napi_get_value_bool(env, argv[3], &want_left);
  err = uvt_process_status(r->reg, id, caller, &exited, &code, &sig);
  if (err == UV_EINVAL) {
    result = uvtn_undefined(env);
    goto out;
  }
  if (err != 0) {
    uvtn_throw(env, err, "status", id);
    goto out;
  }
  napi_create_object(env, &result);
  if (!exited)
    goto out;
  if (code >= 0)
    set_number(env, result, "exitCode", code);
  else {
    napi_get_null(env, &v);
    napi_set_named_property(env, result, "exitCode", v);
  }
  if (sig > 0)
    set_number(env, result, "termSignal", sig);
  else {
    napi_get_null(env, &v);
    napi_set_named_property(env, result, "termSignal", v);
  }
  if (want_left) {
    int n = uvt_process_leftovers(r->reg, id, caller);
    set_number(env, result, "leftovers", n > 0 ? n : 0);
  }
out:
  free(id);
  uvtn_leave(st);
  return result;
}

/* signal(reg, id, caller, signum) (P-KILL-8, N-7): one signal to every
 * process of the live task's session, no escalation.  index.js turns a
 * name into its number (an unknown name into 0, which the library
 * refuses with EINVAL). */
napi_value uvtn_signal(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4] = {NULL, NULL, NULL, NULL};
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  int32_t signum = 0;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  napi_get_value_int32(env, argv[3], &signum);
  err = uvt_process_signal(r->reg, id, caller, signum);
  if (err != 0)
    uvtn_throw(env, err, "signal", id);
out:
  free(id);
  uvtn_leave(st);
  return NULL;
}
