/* Snapshots: views of a record for callbacks (no allocation, valid for the
 * callback only) and owned copies for everything handed to the host. */
#include <string.h>

#include "uvt-internal.h"

void uvt__snapshot_view(const uvt_task_t *t, uvt_snapshot_t *s) {
  s->id = uvt__task_id(t);
  s->kind = uvt__task_kind(t);
  s->label = uvt__task_label(t);
  s->owner_session = t->owner_session;
  s->status = t->status;
  s->detail = t->detail;
  s->started_at_ms = t->started_at_ms;
  s->finished_at_ms = t->finished_at_ms;
  s->reported = t->reported ? 1 : 0;
  s->kill_reason = t->kill_reason;
  s->mem_ = NULL;
  memset(s->reserved_, 0, sizeof(s->reserved_));
}

static size_t span(const char *s) {
  return s != NULL ? strlen(s) + 1 : 0;
}

static const char *put(char **cursor, const char *s) {
  size_t n;
  char *at;
  if (s == NULL)
    return NULL;
  n = strlen(s) + 1;
  at = *cursor;
  memcpy(at, s, n);
  *cursor += n;
  return at;
}

int uvt_snapshot_copy(uvt_snapshot_t *dst, const uvt_snapshot_t *src) {
  uvt_snapshot_t tmp;
  size_t n;
  char *mem, *cursor;
  if (dst == NULL || src == NULL)
    return UV_EINVAL;
  n = span(src->id) + span(src->kind) + span(src->label) +
      span(src->owner_session) + span(src->detail) + span(src->kill_reason);
  mem = uvt__malloc(n);
  if (mem == NULL) {
    memset(dst, 0, sizeof(*dst));
    return UV_ENOMEM;
  }
  /* Copy through a temporary so dst may alias src. */
  tmp = *src;
  cursor = mem;
  tmp.id = put(&cursor, src->id);
  tmp.kind = put(&cursor, src->kind);
  tmp.label = put(&cursor, src->label);
  tmp.owner_session = put(&cursor, src->owner_session);
  tmp.detail = put(&cursor, src->detail);
  tmp.kill_reason = put(&cursor, src->kill_reason);
  tmp.mem_ = mem;
  *dst = tmp;
  return 0;
}

int uvt__snapshot_take(const uvt_task_t *t, uvt_snapshot_t *s) {
  uvt_snapshot_t view;
  uvt__snapshot_view(t, &view);
  return uvt_snapshot_copy(s, &view);
}

void uvt_snapshot_cleanup(uvt_snapshot_t *s) {
  if (s == NULL)
    return;
  uvt__free(s->mem_);
  memset(s, 0, sizeof(*s));
}

void uvt_snapshots_free(uvt_snapshot_t *a, size_t n) {
  size_t i;
  if (a == NULL)
    return;
  for (i = 0; i < n; i++)
    uvt__free(a[i].mem_);
  uvt__free(a);
}
