/* The addon's module: per-environment state, the scopes callbacks run in
 * (N-2), errors (N-1), and the registry object with its cleanup hook (N-3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvtn.h"

void uvtn_list_init(uvtn_link_t *h) {
  h->next = h;
  h->prev = h;
}

void uvtn_list_insert(uvtn_link_t *h, uvtn_link_t *n) {
  n->next = h;
  n->prev = h->prev;
  h->prev->next = n;
  h->prev = n;
}

void uvtn_list_remove(uvtn_link_t *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->next = n;
  n->prev = n;
}

/* ---- entering from JS ------------------------------------------------- */

uvtn_env_t *uvtn_enter(napi_env env) {
  uvtn_env_t *st = NULL;
  napi_get_instance_data(env, (void **)&st);
  st->depth++;
  return st;
}

void uvtn_leave(uvtn_env_t *st) {
  st->depth--;
}

/* ---- calling JS from the loop (N-2) ----------------------------------- */

void uvtn_scope_open(uvtn_reg_t *r, uvtn_scope_t *s) {
  uvtn_env_t *st = r->st;
  napi_value resource;

  memset(s, 0, sizeof(*s));
  s->st = st;
  if (st->tearing_down)
    return;
  if (napi_open_handle_scope(st->env, &s->hs) != napi_ok)
    return;
  s->ok = 1;
  /* With JS on the stack (a hook called inside a native call) the caller's
   * scope is the right one.  From the loop, a callback scope makes closing
   * it run the microtasks and ticks that JS queued, as MakeCallback does:
   * with only a handle scope, promise reactions waited for some later
   * callback. */
  if (st->depth == 0 && r->resource != NULL &&
      napi_get_reference_value(st->env, r->resource, &resource) == napi_ok &&
      resource != NULL) {
    if (napi_open_callback_scope(st->env, resource, r->async_ctx, &s->cs) ==
        napi_ok)
      s->has_cs = 1;
  } else if (st->depth == 0) {
    /* The registry has closed (its resource is let go): the one callback
     * that may still come, an agent's dispose, gets a resource of its
     * own. */
    napi_value name;
    if (napi_create_object(st->env, &resource) == napi_ok &&
        napi_create_string_utf8(st->env, "uvtasks", NAPI_AUTO_LENGTH, &name) ==
            napi_ok &&
        napi_async_init(st->env, resource, name, &s->own_ctx) == napi_ok) {
      s->has_own_ctx = 1;
      if (napi_open_callback_scope(st->env, resource, s->own_ctx, &s->cs) ==
          napi_ok)
        s->has_cs = 1;
    }
  }
  st->depth++;
}

void uvtn_scope_close(uvtn_scope_t *s) {
  if (!s->ok)
    return;
  s->st->depth--;
  if (s->has_cs)
    napi_close_callback_scope(s->st->env, s->cs);
  if (s->has_own_ctx)
    napi_async_destroy(s->st->env, s->own_ctx);
  napi_close_handle_scope(s->st->env, s->hs);
}

int uvtn_call(uvtn_scope_t *s, napi_ref fn, size_t argc, napi_value *argv) {
  napi_env env = s->st->env;
  napi_value f, recv, result, exc;
  bool pending = false;

  if (!s->ok || fn == NULL)
    return -1;
  if (napi_get_reference_value(env, fn, &f) != napi_ok || f == NULL)
    return -1;
  napi_get_undefined(env, &recv);
  if (napi_call_function(env, recv, f, argc, argv, &result) == napi_ok)
    return 0;
  /* A throw from a listener is the host's uncaught exception, as for any
   * callback from the loop; the library's containment (R-DONE-4) lets the
   * other listeners run if the process survives it. */
  napi_is_exception_pending(env, &pending);
  if (pending && napi_get_and_clear_last_exception(env, &exc) == napi_ok)
    napi_fatal_exception(env, exc);
  return -1;
}

/* ---- errors (N-1) ----------------------------------------------------- */

void uvtn_throw(napi_env env, int err, const char *what, const char *id) {
  char msg[512];
  napi_value code, message, error, num;
  const char *name = uvt_err_name(err);

  if (what != NULL && id != NULL)
    snprintf(msg, sizeof(msg), "%s: %s, %s '%s'", name, uvt_strerror(err), what,
             id);
  else if (what != NULL)
    snprintf(msg, sizeof(msg), "%s: %s, %s", name, uvt_strerror(err), what);
  else
    snprintf(msg, sizeof(msg), "%s: %s", name, uvt_strerror(err));
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, err, &num);
  napi_set_named_property(env, error, "errno", num);
  napi_throw(env, error);
}

void uvtn_throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", msg);
}

/* ---- the library's log lines (N-13) ---------------------------------- */

void uvtn_log(int level, const char *message, void *data) {
  uvtn_reg_t *r = data;
  uv_thread_t self = uv_thread_self();
  size_t have, add;
  char *more;

  if (r->capturing && level == UVT_LOG_ERROR &&
      uv_thread_equal(&self, &r->loop_thread)) {
    have = r->captured != NULL ? strlen(r->captured) : 0;
    add = strlen(message);
    more = realloc(r->captured, have + add + 3);
    if (more != NULL) {
      if (have > 0)
        memcpy(more + have, "; ", 2), have += 2;
      memcpy(more + have, message, add + 1);
      r->captured = more;
      return;
    }
  }
  fprintf(stderr, "uvtasks: %s\n", message);
}

void uvtn_capture_begin(uvtn_reg_t *r) {
  r->capturing = 1;
  free(r->captured);
  r->captured = NULL;
}

char *uvtn_capture_end(uvtn_reg_t *r, int flush) {
  char *c = r->captured;
  r->capturing = 0;
  r->captured = NULL;
  if (flush && c != NULL) {
    fprintf(stderr, "uvtasks: %s\n", c);
    free(c);
    c = NULL;
  }
  return c;
}

/* ---- the registry object --------------------------------------------- */

static void reg_finalize(napi_env env, void *data, void *hint) {
  uvtn_reg_unref(data);
}

void uvtn_reg_unref(uvtn_reg_t *r) {
  if (--r->refs > 0)
    return;
  free(r->captured);
  free(r->sandbox_why[0]);
  free(r->sandbox_why[1]);
  free(r);
}

uvtn_reg_t *uvtn_reg_arg(napi_env env, napi_value v, int need_open) {
  uvtn_reg_t *r = uvtn_external_value(env, v);
  if (r == NULL) {
    uvtn_throw_type(env, "not a registry handle");
    return NULL;
  }
  if (need_open && (r->reg == NULL || r->closing)) {
    uvtn_throw(env, UVT_ECLOSING, NULL, NULL);
    return NULL;
  }
  if (r->reg == NULL) {
    uvtn_throw(env, UVT_ECLOSING, NULL, NULL);
    return NULL;
  }
  return r;
}

static void on_closed(void *data) {
  uvtn_reg_t *r = data;
  uvtn_env_t *st = r->st;
  napi_async_cleanup_hook_handle hook = r->cleanup;
  uvtn_scope_t s;

  /* The library detached, stopped or released everything of ours. */
  r->reg = NULL;
  uvtn_handles_closed(r);
  uvtn_outputs_closed(r);
  uvtn_list_remove(&r->link);
  if (!st->tearing_down) {
    if (r->close_cb != NULL) {
      uvtn_scope_open(r, &s);
      uvtn_call(&s, r->close_cb, 0, NULL);
      uvtn_scope_close(&s);
      napi_delete_reference(st->env, r->close_cb);
    }
    napi_async_destroy(st->env, r->async_ctx);
    napi_delete_reference(st->env, r->resource);
  }
  r->close_cb = NULL;
  r->resource = NULL;
  uvtn_reg_unref(r);
  /* Last: once the hook is gone, a tearing-down environment may be freed. */
  napi_remove_async_cleanup_hook(hook);
}

/* Environment teardown (worker.terminate(), the end of a worker, the main
 * thread's normal end): close the registry and let Node wait for it, so
 * every task's session is stopped and every handle of ours is closed before
 * the loop is (N-3).  JS cannot run any more: callbacks are skipped. */
static void on_env_cleanup(napi_async_cleanup_hook_handle handle, void *arg) {
  uvtn_reg_t *r = arg;
  r->st->tearing_down = 1;
  if (!r->closing) {
    r->closing = 1;
    uvt_registry_close(r->reg, on_closed, r);
  }
  /* else: close is under way, and on_closed removes the hook. */
}

/* A task reached its terminal transition: the library calls its
 * on_output no more (P-EVT-1), so its JS function can go.  Calls JS only
 * for an onData pump's last read (N-6, uvtn_outputs_done()). */
static void on_task_ended(uvt_listener_t *l, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner) {
  uvtn_outputs_done(l->data, snap->id);
}

/* A registry whose spawn helper could not start is closed before create()
 * throws: nothing of it reached JS. */
static void on_failed_closed(void *data) {
  free(data); /* the uvtn_reg_t, with no JS side yet */
}

/* create(options, resource) -> registry handle */
napi_value uvtn_create(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], v, result = NULL, name;
  uvtn_env_t *st = uvtn_enter(env);
  uvt_options_t o;
  uvtn_reg_t *r = NULL;
  uint64_t n;
  bool helper = false;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uvt_options_init(&o);
  o.log = uvtn_log; /* log_data: the registry, set below */
  /* spawnHelper (P-SPAWN-7): index.js has checked it is a boolean. */
  if (napi_get_named_property(env, argv[0], "spawnHelper", &v) == napi_ok)
    napi_get_value_bool(env, v, &helper);
  if (napi_get_named_property(env, argv[0], "teardownGraceMs", &v) == napi_ok &&
      !uvtn_u64(env, v, "teardownGraceMs", &o.teardown_grace_ms))
    goto out;
  n = 0;
  if (napi_get_named_property(env, argv[0], "maxLivePerOwner", &v) == napi_ok &&
      !uvtn_u64(env, v, "maxLivePerOwner", &n))
    goto out;
  if (n > UINT32_MAX) {
    uvtn_throw(env, UV_EINVAL, "maxLivePerOwner", NULL);
    goto out;
  }
  o.max_live_per_owner = (unsigned)n;

  r = calloc(1, sizeof(*r));
  if (r == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    goto out;
  }
  r->st = st;
  r->loop_thread = uv_thread_self();
  o.log_data = r;
  uvtn_list_init(&r->agents);
  uvtn_list_init(&r->surfaces);
  uvtn_list_init(&r->subs);
  uvtn_list_init(&r->outputs);
  err = uvt_registry_new(st->loop, &o, &r->reg);
  if (err != 0) {
    free(r);
    uvtn_throw(env, err, "new TaskRegistry", NULL);
    goto out;
  }
  /* UV_ENOTSUP (no helper possible here) is not an error: the spawner
   * threads spawn, as they do once a helper has died. */
  if (helper && (err = uvt_process_spawn_helper(r->reg, 1)) != 0 &&
      err != UV_ENOTSUP) {
    uvt_registry_close(r->reg, on_failed_closed, r);
    uvtn_throw(env, err, "new TaskRegistry: spawnHelper", NULL);
    goto out;
  }
  /* Cannot fail on a new registry (its arguments are valid and it is not
   * closing); registry close stops it. */
  r->ended.data = r;
  uvt_listener_start(r->reg, &r->ended, on_task_ended);
  napi_create_reference(env, argv[1], 1, &r->resource);
  napi_create_string_utf8(env, "uvtasks", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, argv[1], name, &r->async_ctx);
  napi_add_async_cleanup_hook(env, on_env_cleanup, r, &r->cleanup);
  uvtn_list_insert(&st->regs, &r->link);
  r->refs = 2; /* the External, and the open registry */
  result = uvtn_external(env, r, reg_finalize);
out:
  uvtn_leave(st);
  return result;
}

/* close(reg, cb): dispose (R-CLOSE-1); cb() once it is done. */
napi_value uvtn_close(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  r = uvtn_reg_arg(env, argv[0], 1);
  if (r == NULL)
    goto out;
  err = uvt_registry_close(r->reg, on_closed, r);
  if (err != 0) {
    uvtn_throw(env, err, "close", NULL);
    goto out;
  }
  r->closing = 1;
  napi_create_reference(env, argv[1], 1, &r->close_cb);
out:
  uvtn_leave(st);
  return NULL;
}

static void set_u64(napi_env env, napi_value obj, const char *name,
                    uint64_t v) {
  napi_value n;
  napi_create_double(env, (double)v, &n);
  napi_set_named_property(env, obj, name, n);
}

/* metrics(reg) -> counters (R-METRICS-1) */
napi_value uvtn_metrics(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], obj = NULL;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_metrics_t m;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL)
    goto out;
  memset(&m, 0, sizeof(m));
  uvt_registry_metrics(r->reg, &m);
  napi_create_object(env, &obj);
  set_u64(env, obj, "started", m.started);
  set_u64(env, obj, "completed", m.completed);
  set_u64(env, obj, "killed", m.killed);
  set_u64(env, obj, "failed", m.failed);
  set_u64(env, obj, "kills", m.kills);
  set_u64(env, obj, "forceFailed", m.force_failed);
  set_u64(env, obj, "waitsTimedOut", m.waits_timed_out);
  set_u64(env, obj, "waitsAborted", m.waits_aborted);
  set_u64(env, obj, "live", m.live);
  set_u64(env, obj, "records", m.records);
out:
  uvtn_leave(st);
  return obj;
}

/* heldBytes(reg, id) -> the output bytes the record holds (N-8,
 * uvt_held_bytes()); throws UVT_ENOTASK once it is gone. */
napi_value uvtn_held_bytes(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3] = {NULL, NULL, NULL}, result = NULL;
  uvtn_env_t *st = uvtn_enter(env);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  int64_t n;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto out;
  n = uvt_held_bytes(r->reg, id, caller);
  if (n < 0)
    uvtn_throw(env, (int)n, "heldBytes", id);
  else
    napi_create_double(env, (double)n, &result);
out:
  free(id);
  uvtn_leave(st);
  return result;
}

/* ---- module ----------------------------------------------------------- */

static void env_finalize(napi_env env, void *data, void *hint) {
  free(data);
}

/* The two entry points NAPI_MODULE_INIT defines, declared for
 * -Wmissing-prototypes. */
NAPI_MODULE_EXPORT int32_t node_api_module_get_api_version_v1(void);
NAPI_MODULE_EXPORT napi_value napi_register_module_v1(napi_env env,
                                                      napi_value exports);

NAPI_MODULE_INIT() {
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
      {"create", uvtn_create},
      {"close", uvtn_close},
      {"metrics", uvtn_metrics},
      {"attachSurface", uvtn_attach_surface},
      {"detachSurface", uvtn_detach_surface},
      {"registerAgent", uvtn_register_agent},
      {"disposeAgent", uvtn_dispose_agent},
      {"listen", uvtn_listen},
      {"unlisten", uvtn_unlisten},
      {"watch", uvtn_watch},
      {"unwatch", uvtn_unwatch},
      {"wait", uvtn_wait},
      {"waitAbort", uvtn_wait_abort},
      {"get", uvtn_get},
      {"list", uvtn_list},
      {"read", uvtn_read},
      {"kill", uvtn_kill},
      {"forget", uvtn_forget},
      {"start", uvtn_start},
      {"settle", uvtn_settle},
      {"spawn", uvtn_spawn},
      {"pid", uvtn_pid},
      {"write", uvtn_write},
      {"closeStdin", uvtn_close_stdin},
      {"resize", uvtn_resize},
      {"stopAllNow", uvtn_stop_all_now},
      {"readProcess", uvtn_read_process},
      {"readChunks", uvtn_read_chunks},
      {"procStatus", uvtn_proc_status},
      {"signal", uvtn_signal},
      {"heldBytes", uvtn_held_bytes},
      {"outputRefs", uvtn_output_refs},
      {"jsUnsettled", uvtn_js_unsettled},
      {"adopt", uvtn_adopt},
      {"stopDurable", uvtn_stop_durable},
  };
  uvtn_env_t *st;
  napi_value version;
  size_t i;

  st = calloc(1, sizeof(*st));
  if (st == NULL) {
    napi_throw_error(env, "ENOMEM", "uvtasks: out of memory");
    return NULL;
  }
  st->env = env;
  uvtn_list_init(&st->regs);
  if (napi_get_uv_event_loop(env, &st->loop) != napi_ok ||
      napi_set_instance_data(env, st, env_finalize, NULL) != napi_ok) {
    free(st);
    napi_throw_error(env, "EINVAL", "uvtasks: no event loop");
    return NULL;
  }
  for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL,
                         &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  /* The library compiled into this addon ("0.3.0"). */
  napi_create_string_utf8(env, uvt_version_string(), NAPI_AUTO_LENGTH,
                          &version);
  napi_set_named_property(env, exports, "version", version);
  return exports;
}
