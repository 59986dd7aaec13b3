/* JS producers: tasks.start({ kind, label, owner, run }) (§8, R-START-*).
 *
 * The library calls `run` inside uvt_start(); the JS wrapper's run calls the
 * producer's run(), checks the hooks it returned and hooks `done` up to
 * settle(), which calls uvt_task_settle().  cancel(reason) and readOutput()
 * are called from the library's hooks.  A throw from run() propagates out of
 * start() with nothing registered (R-START-2); a throw from cancel() fails
 * the kill with that error (R-KILL-1), and during disposal force-fails the
 * record (R-AGENT-3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvtn.h"

typedef struct {
  uvtn_reg_t *r;
  uvt_task_t *t;
  napi_value run_fn; /* during uvt_start() only */
  napi_ref cancel;
  napi_ref read;
  int settled;
  int committed; /* start() succeeded: counted in js_unsettled until settled */
  int refs;      /* the External held by JS, the record, and start() itself */
} jstask_t;

static void jstask_unref(jstask_t *jt) {
  if (--jt->refs > 0)
    return;
  uvtn_reg_unref(jt->r);
  free(jt);
}

static int settle(jstask_t *jt, uvt_status_t status, const char *detail,
                  const char *output, size_t output_len);

/* JS let go of the task handle: its `done` reactions, which hold it, were
 * collected, so nothing can settle the task any more.  The library keeps
 * the task until its producer settles, even after a force-fail dropped
 * the record (R-AGENT-4), so settle it here: the record takes it (if it
 * was still waiting) or the library frees the handle. */
static void jstask_finalize(napi_env env, void *data, void *hint) {
  jstask_t *jt = data;
  if (jt->committed && !jt->settled)
    settle(jt, UVT_FAILED, "its done promise was collected unsettled", NULL, 0);
  jstask_unref(jt);
}

static void drop_hooks(jstask_t *jt) {
  napi_env env = jt->r->st->env;
  if (!jt->r->st->tearing_down) {
    if (jt->cancel != NULL)
      napi_delete_reference(env, jt->cancel);
    if (jt->read != NULL)
      napi_delete_reference(env, jt->read);
  }
  jt->cancel = NULL;
  jt->read = NULL;
}

static int settle(jstask_t *jt, uvt_status_t status, const char *detail,
                  const char *output, size_t output_len) {
  uvt_outcome_t o;
  if (jt->settled)
    return 0;
  jt->settled = 1;
  if (jt->committed)
    jt->r->st->js_unsettled--;
  memset(&o, 0, sizeof(o)); /* its reserved_ too */
  o.status = status;
  o.detail = detail;
  o.output = output;
  o.output_len = output_len;
  drop_hooks(jt);
  return uvt_task_settle(jt->t, &o);
}

/* The caller's exception, if one is pending: kept for a kill or a read,
 * which rethrow it; otherwise logged and cleared. */
static int hook_threw(jstask_t *jt, const char *hook, int keep) {
  napi_env env = jt->r->st->env;
  napi_value exc, str;
  bool pending = false;
  char msg[512] = "";
  size_t len;

  napi_is_exception_pending(env, &pending);
  if (!pending || keep)
    return UV_ECANCELED;
  napi_get_and_clear_last_exception(env, &exc);
  if (napi_coerce_to_string(env, exc, &str) == napi_ok)
    napi_get_value_string_utf8(env, str, msg, sizeof(msg), &len);
  fprintf(stderr, "uvtasks: task %s: %s() threw: %s\n",
          uvt_task_id(jt->t) != NULL ? uvt_task_id(jt->t) : "(starting)", hook,
          msg);
  return UV_ECANCELED;
}

static int js_cancel(uvt_task_t *t, const char *reason) {
  jstask_t *jt = uvt_task_arg(t);
  uvtn_env_t *st = jt->r->st;
  uvtn_scope_t s;
  napi_value f, recv, arg, ret;
  int err = 0;

  if (st->tearing_down) {
    /* The work of a JS producer lives in the environment that is going
     * away, and no JS can run to stop it: it ends with the environment. */
    settle(jt, UVT_KILLED, "JS environment torn down", NULL, 0);
    return 0;
  }
  if (jt->cancel == NULL)
    return UV_EINVAL;
  uvtn_scope_open(jt->r, &s);
  if (!s.ok)
    return UV_ECANCELED;
  napi_get_reference_value(st->env, jt->cancel, &f);
  napi_get_undefined(st->env, &recv);
  napi_create_string_utf8(st->env, reason != NULL ? reason : "",
                          NAPI_AUTO_LENGTH, &arg);
  if (napi_call_function(st->env, recv, f, 1, &arg, &ret) != napi_ok)
    err = hook_threw(jt, "cancel", st->in_kill && !s.has_cs);
  uvtn_scope_close(&s);
  return err;
}

static int js_read_output(uvt_task_t *t, uvt_buf_t *out) {
  jstask_t *jt = uvt_task_arg(t);
  uvtn_env_t *st = jt->r->st;
  uvtn_scope_t s;
  napi_value f, recv, ret;
  napi_valuetype type;
  char *bytes = NULL;
  size_t len = 0;
  int err = 0;

  if (jt->read == NULL)
    return 0;
  uvtn_scope_open(jt->r, &s);
  if (!s.ok)
    return UV_ECANCELED;
  napi_get_reference_value(st->env, jt->read, &f);
  napi_get_undefined(st->env, &recv);
  if (napi_call_function(st->env, recv, f, 0, NULL, &ret) != napi_ok) {
    err = hook_threw(jt, "readOutput", !s.has_cs);
    goto done;
  }
  napi_typeof(st->env, ret, &type);
  if (type == napi_undefined || type == napi_null)
    goto done;
  if (!uvtn_bytes(st->env, ret, "readOutput()'s result", &bytes, &len)) {
    err = hook_threw(jt, "readOutput", !s.has_cs);
    goto done;
  }
  err = uvt_buf_append(out, bytes, len);
  free(bytes);
done:
  uvtn_scope_close(&s);
  return err;
}

static void js_release(uvt_task_t *t) {
  jstask_t *jt = uvt_task_arg(t);
  drop_hooks(jt);
  jstask_unref(jt);
}

static int js_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  jstask_t *jt = arg;
  napi_env env = jt->r->st->env;
  napi_value ext, recv, ret, f;
  napi_valuetype type;

  jt->t = t;
  ext = uvtn_external(env, jt, jstask_finalize);
  if (ext == NULL)
    return UV_ENOMEM;
  jt->refs++;
  napi_get_undefined(env, &recv);
  if (napi_call_function(env, recv, jt->run_fn, 1, &ext, &ret) != napi_ok)
    return UV_ECANCELED; /* the exception stays pending for start() */
  /* The wrapper returns { cancel, readOutput } with cancel a function. */
  napi_get_named_property(env, ret, "cancel", &f);
  napi_create_reference(env, f, 1, &jt->cancel);
  napi_get_named_property(env, ret, "readOutput", &f);
  napi_typeof(env, f, &type);
  if (type == napi_function)
    napi_create_reference(env, f, 1, &jt->read);
  memset(hooks, 0, sizeof(*hooks));
  hooks->cancel = js_cancel;
  hooks->read_output = jt->read != NULL ? js_read_output : NULL;
  hooks->release = js_release;
  jt->refs++; /* the record, until release */
  return 0;
}

/* start(reg, kind, label, owner, run(taskHandle) -> { cancel, readOutput })
 * -> id */
napi_value uvtn_start(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  uvtn_env_t *st = uvtn_enter(env);
  napi_value result = NULL;
  uvtn_reg_t *r;
  uvtn_agent_t *owner;
  jstask_t *jt = NULL;
  uvt_spec_t spec;
  char *kind = NULL, *label = NULL;
  char id[UVT_ID_MAX];
  bool pending = false;
  int err;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  r = uvtn_reg_arg(env, argv[0], 0);
  if (r == NULL || !uvtn_string(env, argv[1], "kind", 0, &kind) ||
      !uvtn_string(env, argv[2], "label", 0, &label) ||
      !uvtn_caller_arg(env, argv[3], &owner))
    goto out;
  jt = calloc(1, sizeof(*jt));
  if (jt == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    goto out;
  }
  jt->r = r;
  r->refs++;
  jt->refs = 1; /* this call */
  jt->run_fn = argv[4];
  memset(&spec, 0, sizeof(spec));
  spec.kind = kind;
  spec.label = label;
  spec.owner = owner != NULL ? &owner->agent : NULL;
  spec.run = js_run;
  spec.arg = jt;
  err = uvt_start(r->reg, &spec, id);
  jt->run_fn = NULL;
  if (err != 0) {
    /* A run() that threw: its exception propagates unchanged. */
    napi_is_exception_pending(env, &pending);
    if (!pending)
      uvtn_throw(env, err, "start", kind);
    drop_hooks(jt);
    goto out;
  }
  jt->committed = 1;
  st->js_unsettled++;
  napi_create_string_utf8(env, id, NAPI_AUTO_LENGTH, &result);
out:
  if (jt != NULL)
    jstask_unref(jt);
  free(kind);
  free(label);
  uvtn_leave(st);
  return result;
}

/* settle(taskHandle, status, detail, output) -> true if it was the first */
napi_value uvtn_settle(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  uvtn_env_t *st = uvtn_enter(env);
  napi_value result = NULL;
  jstask_t *jt;
  char *status = NULL, *detail = NULL, *output = NULL;
  size_t output_len = 0;
  uvt_status_t s;
  napi_valuetype type;
  int first;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  jt = uvtn_external_value(env, argv[0]);
  if (jt == NULL || !uvtn_string(env, argv[1], "status", 0, &status) ||
      !uvtn_string(env, argv[2], "detail", 1, &detail))
    goto out;
  napi_typeof(env, argv[3], &type);
  if (type != napi_undefined && type != napi_null &&
      !uvtn_bytes(env, argv[3], "output", &output, &output_len))
    goto out;
  if (strcmp(status, "completed") == 0)
    s = UVT_COMPLETED;
  else if (strcmp(status, "killed") == 0)
    s = UVT_KILLED;
  else if (strcmp(status, "failed") == 0)
    s = UVT_FAILED;
  else {
    uvtn_throw(env, UV_EINVAL, "settle with a status that is not terminal",
               status);
    goto out;
  }
  first = !jt->settled;
  settle(jt, s, detail, output, output_len);
  napi_get_boolean(env, first, &result);
out:
  free(status);
  free(detail);
  free(output);
  uvtn_leave(st);
  return result;
}

/* jsUnsettled() -> how many JS tasks of this environment were started and
 * not yet settled: a test's view of the library's hold on their handles. */
napi_value uvtn_js_unsettled(napi_env env, napi_callback_info info) {
  uvtn_env_t *st = NULL;
  napi_value n;
  napi_get_instance_data(env, (void **)&st);
  napi_create_double(env, (double)st->js_unsettled, &n);
  return n;
}
