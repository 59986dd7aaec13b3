/* Values between JS and C: snapshots, strings, numbers, bytes, handles. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "uvtn.h"

napi_value uvtn_undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

static void set_str(napi_env env, napi_value obj, const char *name,
                    const char *s) {
  napi_value v;
  if (s == NULL)
    return;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, name, v);
}

static void set_num(napi_env env, napi_value obj, const char *name, double d) {
  napi_value v;
  napi_create_double(env, d, &v);
  napi_set_named_property(env, obj, name, v);
}

/* snapshot = { id, kind, label, ownerSession?, status, detail?, startedAt,
 * finishedAt?, reported, killReason? } (contract §8; killReason is the C
 * snapshot's kill_reason, R-KILL-2). */
napi_value uvtn_snapshot(napi_env env, const uvt_snapshot_t *s) {
  napi_value obj, b;
  napi_create_object(env, &obj);
  set_str(env, obj, "id", s->id);
  set_str(env, obj, "kind", s->kind);
  set_str(env, obj, "label", s->label);
  set_str(env, obj, "ownerSession", s->owner_session);
  set_str(env, obj, "status", uvt_status_name(s->status));
  set_str(env, obj, "detail", s->detail);
  set_num(env, obj, "startedAt", (double)s->started_at_ms);
  if (s->finished_at_ms != 0)
    set_num(env, obj, "finishedAt", (double)s->finished_at_ms);
  napi_get_boolean(env, s->reported != 0, &b);
  napi_set_named_property(env, obj, "reported", b);
  set_str(env, obj, "killReason", s->kill_reason);
  return obj;
}

static int is_nullish(napi_env env, napi_value v) {
  napi_valuetype t;
  if (v == NULL)
    return 1;
  napi_typeof(env, v, &t);
  return t == napi_undefined || t == napi_null;
}

int uvtn_string(napi_env env, napi_value v, const char *name, int optional,
                char **out) {
  napi_valuetype t;
  size_t len;
  char msg[128];

  *out = NULL;
  if (optional && is_nullish(env, v))
    return 1;
  napi_typeof(env, v, &t);
  if (t != napi_string) {
    snprintf(msg, sizeof(msg), "%s must be a string", name);
    uvtn_throw_type(env, msg);
    return 0;
  }
  napi_get_value_string_utf8(env, v, NULL, 0, &len);
  *out = malloc(len + 1);
  if (*out == NULL) {
    uvtn_throw(env, UV_ENOMEM, NULL, NULL);
    return 0;
  }
  napi_get_value_string_utf8(env, v, *out, len + 1, &len);
  /* A string with a NUL in it would be cut short in C: refuse it rather
   * than act on a different string than JS passed. */
  if (strlen(*out) != len) {
    free(*out);
    *out = NULL;
    snprintf(msg, sizeof(msg), "%s must not contain NUL characters", name);
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", msg);
    return 0;
  }
  return 1;
}

int uvtn_u64(napi_env env, napi_value v, const char *name, uint64_t *out) {
  napi_valuetype t;
  double d;
  char msg[128];

  if (is_nullish(env, v))
    return 1;
  napi_typeof(env, v, &t);
  if (t != napi_number) {
    snprintf(msg, sizeof(msg), "%s must be a number", name);
    uvtn_throw_type(env, msg);
    return 0;
  }
  napi_get_value_double(env, v, &d);
  if (!(d >= 0) || d > 9007199254740991.0 || d != floor(d)) {
    snprintf(msg, sizeof(msg), "%s must be an integer >= 0", name);
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
    return 0;
  }
  *out = (uint64_t)d;
  return 1;
}

int uvtn_bytes(napi_env env, napi_value v, const char *name, char **out,
               size_t *len) {
  napi_valuetype t;
  bool is_typed = false;
  char msg[128];

  *out = NULL;
  *len = 0;
  napi_typeof(env, v, &t);
  if (t == napi_string) {
    napi_get_value_string_utf8(env, v, NULL, 0, len);
    *out = malloc(*len + 1);
    if (*out == NULL) {
      uvtn_throw(env, UV_ENOMEM, NULL, NULL);
      return 0;
    }
    napi_get_value_string_utf8(env, v, *out, *len + 1, len);
    return 1;
  }
  napi_is_typedarray(env, v, &is_typed);
  if (is_typed) {
    napi_typedarray_type tt;
    size_t n, off;
    void *data;
    napi_value ab;
    napi_get_typedarray_info(env, v, &tt, &n, &data, &ab, &off);
    if (tt == napi_uint8_array) {
      *out = malloc(n + 1);
      if (*out == NULL) {
        uvtn_throw(env, UV_ENOMEM, NULL, NULL);
        return 0;
      }
      if (n > 0)
        memcpy(*out, data, n);
      (*out)[n] = '\0';
      *len = n;
      return 1;
    }
  }
  snprintf(msg, sizeof(msg), "%s must be a string, a Buffer or a Uint8Array",
           name);
  uvtn_throw_type(env, msg);
  return 0;
}

napi_value uvtn_external(napi_env env, void *p, napi_finalize fin) {
  napi_value v;
  if (napi_create_external(env, p, fin, NULL, &v) != napi_ok)
    return NULL;
  return v;
}

void *uvtn_external_value(napi_env env, napi_value v) {
  napi_valuetype t;
  void *p = NULL;
  if (v == NULL || napi_typeof(env, v, &t) != napi_ok || t != napi_external)
    return NULL;
  napi_get_value_external(env, v, &p);
  return p;
}
