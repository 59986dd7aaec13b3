/* Surfaces, agents, listeners, watchers and waits: one C handle per JS
 * handle, so the library's own rules apply to each (R-SURF-1, R-OWN-*,
 * R-AGENT-*, R-DONE-3..5, R-FEED-1, R-WAIT-*); and the operations that take
 * a task id (R-GET-1, R-LIST-1, R-READ-*, R-KILL-*, R-FORGET-1). */
#include <stdlib.h>
#include <string.h>

#include "uvtn.h"

/* Arguments of a native call: up to 6. */
#define ARGS(n)                                                                \
  size_t argc = (n);                                                           \
  napi_value argv[6] = {NULL, NULL, NULL, NULL, NULL, NULL};                   \
  uvtn_env_t *st = uvtn_enter(env);                                            \
  napi_value result = NULL;                                                    \
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL)

#define RETURN                                                                 \
  out:                                                                         \
  uvtn_leave(st);                                                              \
  return result

/* ---- surfaces (R-SURF-1) ---------------------------------------------- */

typedef struct {
  uvt_surface_t surface;
  uvtn_reg_t *r;
  uvtn_link_t link; /* r->surfaces while attached */
  int attached;
  int refs; /* the External, and the attachment */
} surface_t;

static void surface_unref(surface_t *s) {
  if (--s->refs > 0)
    return;
  uvtn_reg_unref(s->r);
  free(s);
}

/* Dropped by JS without a detach: it stays attached for the registry's life,
 * as the C handle would (the registry detaches it at close). */
static void surface_finalize(napi_env env, void *data, void *hint) {
  surface_unref(data);
}

static void surface_end(surface_t *s) {
  if (!s->attached)
    return;
  s->attached = 0;
  uvtn_list_remove(&s->link);
  if (s->r->reg != NULL)
    uvt_surface_detach(&s->surface);
  surface_unref(s);
}

/* attachSurface(reg, name) -> surface handle */
napi_value uvtn_attach_surface(napi_env env, napi_callback_info info) {
  ARGS(2);
  uvtn_reg_t *r;
  surface_t *s;
  char *name = NULL;
  int err;

  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL || !uvtn_string(env, argv[1], "name", 0, &name))
    goto done;
  s = calloc(1, sizeof(*s));
  if (s == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    goto done;
  }
  err = uvt_surface_attach(r->reg, &s->surface, name);
  if (err != 0) {
    free(s);
    uvtn_throw(env, err, "attachSurface", name);
    goto done;
  }
  s->r = r;
  r->refs++;
  s->attached = 1;
  s->refs = 2;
  uvtn_list_insert(&r->surfaces, &s->link);
  result = uvtn_external(env, s, surface_finalize);
done:
  free(name);
  goto out;
  RETURN;
}

/* detachSurface(surface): idempotent, and harmless after close. */
napi_value uvtn_detach_surface(napi_env env, napi_callback_info info) {
  ARGS(1);
  surface_t *s = uvtn_external_value(env, argv[0]);
  if (s != NULL)
    surface_end(s);
  goto out;
  RETURN;
}

/* ---- agents (R-OWN-*, R-AGENT-*) -------------------------------------- */

static void agent_unref(uvtn_agent_t *a) {
  if (--a->refs > 0)
    return;
  uvtn_reg_unref(a->r);
  free(a);
}

static void agent_finalize(napi_env env, void *data, void *hint) {
  agent_unref(data);
}

/* The library is done with the agent: disposal finished, or the registry
 * closed under it. */
static void agent_released(uvtn_agent_t *a) {
  napi_env env = a->r->st->env;
  if (!a->registered)
    return;
  a->registered = 0;
  uvtn_list_remove(&a->link);
  if (!a->r->st->tearing_down && a->obj != NULL)
    napi_delete_reference(env, a->obj);
  a->obj = NULL;
  agent_unref(a);
}

int uvtn_caller_arg(napi_env env, napi_value v, uvtn_agent_t **out) {
  napi_valuetype t;
  *out = NULL;
  if (v == NULL)
    return 1;
  napi_typeof(env, v, &t);
  if (t == napi_undefined || t == napi_null)
    return 1;
  *out = uvtn_external_value(env, v);
  if (*out == NULL) {
    uvtn_throw_type(env, "the caller/owner must be an agent from "
                         "registerAgent()");
    return 0;
  }
  return 1;
}

napi_value uvtn_owner_value(napi_env env, uvt_agent_t *owner) {
  uvtn_agent_t *a = (uvtn_agent_t *)owner;
  napi_value v;
  if (a == NULL || a->obj == NULL ||
      napi_get_reference_value(env, a->obj, &v) != napi_ok || v == NULL)
    return uvtn_undefined(env);
  return v;
}

/* registerAgent(reg, agentId, sessionId, agentObject) -> agent handle */
napi_value uvtn_register_agent(napi_env env, napi_callback_info info) {
  ARGS(4);
  uvtn_reg_t *r;
  uvtn_agent_t *a;
  char *id = NULL, *session = NULL;
  int err;

  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL || !uvtn_string(env, argv[1], "agentId", 0, &id) ||
      !uvtn_string(env, argv[2], "sessionId", 0, &session))
    goto done;
  a = calloc(1, sizeof(*a));
  if (a == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    goto done;
  }
  err = uvt_agent_register(r->reg, &a->agent, id, session);
  if (err != 0) {
    free(a);
    uvtn_throw(env, err, "registerAgent", id);
    goto done;
  }
  a->r = r;
  r->refs++;
  a->registered = 1;
  uvtn_list_insert(&r->agents, &a->link);
  napi_create_reference(env, argv[3], 1, &a->obj);
  a->refs = 2; /* the External, and the registration */
  result = uvtn_external(env, a, agent_finalize);
done:
  free(id);
  free(session);
  goto out;
  RETURN;
}

static void agent_disposed(uvt_agent_t *agent) {
  uvtn_agent_t *a = (uvtn_agent_t *)agent;
  uvtn_reg_t *r = a->r;
  napi_ref cb = a->dispose_cb;
  uvtn_scope_t s;

  a->dispose_cb = NULL;
  a->refs++; /* across the JS call */
  agent_released(a);
  if (cb != NULL && !r->st->tearing_down) {
    uvtn_scope_open(r, &s);
    uvtn_call(&s, cb, 0, NULL);
    uvtn_scope_close(&s);
    napi_delete_reference(r->st->env, cb);
  }
  agent_unref(a);
}

/* disposeAgent(agent, cb): R-AGENT-1; cb() once done. */
napi_value uvtn_dispose_agent(napi_env env, napi_callback_info info) {
  ARGS(2);
  uvtn_agent_t *a = uvtn_external_value(env, argv[0]);
  int err;

  if (a == NULL) {
    uvtn_throw_type(env, "not an agent");
    goto out;
  }
  /* The library answers every repeat (N-4, R-BUSY-1): UVT_ECLOSING while
   * a dispose is under way, UV_EINVAL once it is done; an agent that
   * registry close gave back is disposed at once (only the callback
   * comes).  It never calls back inside the call, so the callback is
   * kept only once the call succeeded. */
  err = uvt_agent_dispose(&a->agent, agent_disposed);
  if (err != 0) {
    uvtn_throw(env, err, "dispose", a->agent.id);
    goto out;
  }
  napi_create_reference(env, argv[1], 1, &a->dispose_cb);
  RETURN;
}

/* ---- listeners (R-DONE-3..5) and watchers (R-FEED-1) ------------------ */

typedef struct {
  union {
    uvt_listener_t listener;
    uvt_watch_t watch;
  } u;
  uvtn_reg_t *r;
  uvtn_link_t link; /* r->subs while active */
  napi_ref fn;
  int is_watch;
  int active;
  int refs; /* the External, and the subscription */
} sub_t;

static void sub_unref(sub_t *s) {
  if (--s->refs > 0)
    return;
  uvtn_reg_unref(s->r);
  free(s);
}

static void sub_finalize(napi_env env, void *data, void *hint) {
  sub_unref(data);
}

static void sub_end(sub_t *s) {
  if (!s->active)
    return;
  s->active = 0;
  uvtn_list_remove(&s->link);
  if (s->r->reg != NULL) {
    if (s->is_watch)
      uvt_watch_stop(&s->u.watch);
    else
      uvt_listener_stop(&s->u.listener);
  }
  if (!s->r->st->tearing_down && s->fn != NULL)
    napi_delete_reference(s->r->st->env, s->fn);
  s->fn = NULL;
  sub_unref(s);
}

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  sub_t *s = (sub_t *)l;
  uvtn_scope_t sc;
  napi_value args[2];

  uvtn_scope_open(s->r, &sc);
  if (sc.ok) {
    args[0] = uvtn_snapshot(sc.st->env, snap);
    args[1] = uvtn_owner_value(sc.st->env, owner);
    s->refs++; /* the listener may stop itself */
    uvtn_call(&sc, s->fn, 2, args);
    sub_unref(s);
  }
  uvtn_scope_close(&sc);
}

static void on_change(uvt_watch_t *w, const uvt_snapshot_t *snap, int dropped) {
  sub_t *s = (sub_t *)w;
  uvtn_scope_t sc;
  napi_value args[2];

  uvtn_scope_open(s->r, &sc);
  if (sc.ok) {
    args[0] = uvtn_snapshot(sc.st->env, snap);
    napi_get_boolean(sc.st->env, dropped != 0, &args[1]);
    s->refs++;
    uvtn_call(&sc, s->fn, 2, args);
    sub_unref(s);
  }
  uvtn_scope_close(&sc);
}

static napi_value subscribe(napi_env env, napi_value *argv, int is_watch) {
  uvtn_reg_t *r;
  sub_t *s;
  int err;

  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL)
    return NULL;
  s = calloc(1, sizeof(*s));
  if (s == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    return NULL;
  }
  err = is_watch ? uvt_watch_start(r->reg, &s->u.watch, on_change)
                 : uvt_listener_start(r->reg, &s->u.listener, on_done);
  if (err != 0) {
    free(s);
    uvtn_throw(env, err, is_watch ? "watch" : "onTaskDone", NULL);
    return NULL;
  }
  s->r = r;
  r->refs++;
  s->is_watch = is_watch;
  s->active = 1;
  s->refs = 2;
  uvtn_list_insert(&r->subs, &s->link);
  napi_create_reference(env, argv[1], 1, &s->fn);
  return uvtn_external(env, s, sub_finalize);
}

napi_value uvtn_listen(napi_env env, napi_callback_info info) {
  ARGS(2);
  result = subscribe(env, argv, 0);
  goto out;
  RETURN;
}

napi_value uvtn_watch(napi_env env, napi_callback_info info) {
  ARGS(2);
  result = subscribe(env, argv, 1);
  goto out;
  RETURN;
}

napi_value uvtn_unlisten(napi_env env, napi_callback_info info) {
  ARGS(1);
  sub_t *s = uvtn_external_value(env, argv[0]);
  if (s != NULL)
    sub_end(s);
  goto out;
  RETURN;
}

napi_value uvtn_unwatch(napi_env env, napi_callback_info info) {
  ARGS(1);
  sub_t *s = uvtn_external_value(env, argv[0]);
  if (s != NULL)
    sub_end(s);
  goto out;
  RETURN;
}

/* ---- waits (R-WAIT-1..7) ---------------------------------------------- */

typedef struct {
  uvt_wait_t req;
  uvtn_reg_t *r;
  napi_ref fn;
  int pending;
  int refs;
} wait_t;

static void wait_unref(wait_t *w) {
  if (--w->refs > 0)
    return;
  uvtn_reg_unref(w->r);
  free(w);
}

static void wait_finalize(napi_env env, void *data, void *hint) {
  wait_unref(data);
}

static void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  wait_t *w = (wait_t *)req;
  uvtn_scope_t sc;
  napi_value args[2];

  w->pending = 0;
  uvtn_scope_open(w->r, &sc);
  if (sc.ok) {
    napi_create_int32(sc.st->env, status, &args[0]);
    args[1] = snap != NULL ? uvtn_snapshot(sc.st->env, snap)
                           : uvtn_undefined(sc.st->env);
    uvtn_call(&sc, w->fn, 2, args);
    napi_delete_reference(sc.st->env, w->fn);
  }
  w->fn = NULL;
  uvtn_scope_close(&sc);
  wait_unref(w);
}

/* wait(reg, id, timeoutMs, caller, cb(status, snapshot)) -> wait handle */
napi_value uvtn_wait(napi_env env, napi_callback_info info) {
  ARGS(5);
  uvtn_reg_t *r;
  uvtn_agent_t *caller;
  wait_t *w;
  char *id = NULL;
  uint64_t timeout_ms = 0;
  int err;

  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL || !uvtn_string(env, argv[1], "id", 0, &id) ||
      !uvtn_u64(env, argv[2], "timeoutMs", &timeout_ms) ||
      !uvtn_caller_arg(env, argv[3], &caller))
    goto done;
  w = calloc(1, sizeof(*w));
  if (w == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    goto done;
  }
  err = uvt_wait(r->reg, &w->req, id, timeout_ms,
                 caller != NULL ? &caller->agent : NULL, on_wait);
  if (err != 0) {
    free(w);
    uvtn_throw(env, err, "wait", id);
    goto done;
  }
  w->r = r;
  r->refs++;
  w->pending = 1;
  w->refs = 2; /* the External, and the pending request */
  napi_create_reference(env, argv[4], 1, &w->fn);
  result = uvtn_external(env, w, wait_finalize);
done:
  free(id);
  goto out;
  RETURN;
}

/* waitAbort(wait): R-WAIT-5; a no-op once the callback ran. */
napi_value uvtn_wait_abort(napi_env env, napi_callback_info info) {
  ARGS(1);
  wait_t *w = uvtn_external_value(env, argv[0]);
  if (w != NULL && w->pending)
    uvt_wait_abort(&w->req);
  goto out;
  RETURN;
}

/* ---- operations on a task id ------------------------------------------ */

int uvtn_task_args(napi_env env, napi_value *argv, uvtn_reg_t **r, char **id,
                   uvt_agent_t **caller) {
  uvtn_agent_t *a;
  *id = NULL;
  *r = uvtn_reg_arg(env, argv[0], 0);
  if (*r == NULL || !uvtn_string(env, argv[1], "id", 0, id) ||
      !uvtn_caller_arg(env, argv[2], &a))
    return 0;
  *caller = a != NULL ? &a->agent : NULL;
  return 1;
}

/* get(reg, id, caller) -> snapshot (R-GET-1) */
napi_value uvtn_get(napi_env env, napi_callback_info info) {
  ARGS(3);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  uvt_snapshot_t snap;
  char *id = NULL;
  int err;

  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto done;
  memset(&snap, 0, sizeof(snap));
  err = uvt_get(r->reg, id, caller, &snap);
  if (err != 0) {
    uvtn_throw(env, err, "get", id);
    goto done;
  }
  result = uvtn_snapshot(env, &snap);
  uvt_snapshot_cleanup(&snap);
done:
  free(id);
  goto out;
  RETURN;
}

/* list(reg, caller) -> snapshot[] (R-LIST-1) */
napi_value uvtn_list(napi_env env, napi_callback_info info) {
  ARGS(2);
  uvtn_reg_t *r;
  uvtn_agent_t *caller;
  uvt_snapshot_t *arr = NULL;
  size_t n = 0, i;
  int err;

  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL || !uvtn_caller_arg(env, argv[1], &caller))
    goto out;
  err = uvt_list(r->reg, caller != NULL ? &caller->agent : NULL, &arr, &n);
  if (err != 0) {
    uvtn_throw(env, err, "list", NULL);
    goto out;
  }
  napi_create_array_with_length(env, n, &result);
  for (i = 0; i < n; i++)
    napi_set_element(env, result, (uint32_t)i, uvtn_snapshot(env, &arr[i]));
  uvt_snapshots_free(arr, n);
  RETURN;
}

/* read(reg, id, caller) -> { text, snapshot } (R-READ-1..3) */
napi_value uvtn_read(napi_env env, napi_callback_info info) {
  ARGS(3);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  uvt_read_t rd;
  char *id = NULL;
  napi_value text;
  int err;

  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto done;
  memset(&rd, 0, sizeof(rd));
  err = uvt_read(r->reg, id, caller, &rd);
  if (err != 0) {
    bool pending = false;
    /* A JS readOutput that threw: its exception is already pending. */
    napi_is_exception_pending(env, &pending);
    if (!pending)
      uvtn_throw(env, err, "read", id);
    goto done;
  }
  napi_create_object(env, &result);
  napi_create_string_utf8(env, rd.text, rd.len, &text);
  napi_set_named_property(env, result, "text", text);
  napi_set_named_property(env, result, "snapshot",
                          uvtn_snapshot(env, &rd.snapshot));
  uvt_read_cleanup(&rd);
done:
  free(id);
  goto out;
  RETURN;
}

/* kill(reg, id, caller, reason) -> 'requested' | 'already-terminal' */
napi_value uvtn_kill(napi_env env, napi_callback_info info) {
  ARGS(4);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  uvt_kill_result_t res;
  char *id = NULL, *reason = NULL;
  int err, saved;

  if (!uvtn_task_args(env, argv, &r, &id, &caller) ||
      !uvtn_string(env, argv[3], "reason", 1, &reason))
    goto done;
  saved = st->in_kill;
  st->in_kill = 1;
  err = uvt_kill(r->reg, id, caller, reason, &res);
  st->in_kill = saved;
  if (err != 0) {
    bool pending = false;
    /* R-KILL-1: a JS cancel that threw fails the kill with its own error. */
    napi_is_exception_pending(env, &pending);
    if (!pending)
      uvtn_throw(env, err, "kill", id);
    goto done;
  }
  napi_create_string_utf8(
      env, res == UVT_KILL_REQUESTED ? "requested" : "already-terminal",
      NAPI_AUTO_LENGTH, &result);
done:
  free(id);
  free(reason);
  goto out;
  RETURN;
}

/* forget(reg, id, caller) (R-FORGET-1) */
napi_value uvtn_forget(napi_env env, napi_callback_info info) {
  ARGS(3);
  uvtn_reg_t *r;
  uvt_agent_t *caller;
  char *id = NULL;
  int err;

  if (!uvtn_task_args(env, argv, &r, &id, &caller))
    goto done;
  err = uvt_forget(r->reg, id, caller);
  if (err != 0)
    uvtn_throw(env, err, "forget", id);
done:
  free(id);
  goto out;
  RETURN;
}

/* ---- registry close --------------------------------------------------- */

void uvtn_handles_closed(uvtn_reg_t *r) {
  while (r->agents.next != &r->agents)
    agent_released(uvtn_container_of(r->agents.next, uvtn_agent_t, link));
  while (r->surfaces.next != &r->surfaces)
    surface_end(uvtn_container_of(r->surfaces.next, surface_t, link));
  while (r->subs.next != &r->subs)
    sub_end(uvtn_container_of(r->subs.next, sub_t, link));
}
