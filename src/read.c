/* Non-consuming snapshots (R-GET-1, R-LIST-1) and consuming reads
 * (R-READ-1..3). */
#include <string.h>

#include "uvt-internal.h"

int uvt_get(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
            uvt_snapshot_t *out) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  int err;
  if (out == NULL)
    return UV_EINVAL;
  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  return uvt__snapshot_take(t, out);
}

static uvt__session_t *caller_session(uvt_registry_t *reg,
                                      const uvt_agent_t *caller) {
  struct uvt__hentry *e;
  if (caller == NULL || caller->session == NULL)
    return NULL;
  if (caller->registry == reg && caller->session_ != NULL)
    return caller->session_;
  e = uvt__index_find(&reg->sessions_by_id, caller->session);
  return e != NULL ? uvt__container_of(e, uvt__session_t, hentry) : NULL;
}

int uvt_list(uvt_registry_t *reg, const uvt_agent_t *caller,
             uvt_snapshot_t **out, size_t *count) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__session_t *s;
  struct uvt__link *a, *a_end, *b, *b_end;
  uvt_snapshot_t *arr;
  size_t n, i = 0;

  if (reg == NULL || out == NULL || count == NULL)
    return UV_EINVAL;
  *out = NULL;
  *count = 0;
  s = caller_session(reg, caller);
  /* Only the caller's session and the unowned list are walked, merged by
   * registration order: the cost follows what is returned (R-LIST-1). */
  a_end = &reg->unowned;
  a = a_end->next;
  n = reg->unowned_count;
  if (s != NULL) {
    b_end = &s->tasks;
    n += s->task_count;
  } else {
    b_end = NULL;
  }
  b = b_end != NULL ? b_end->next : NULL;
  if (n == 0)
    return 0;
  arr = uvt__calloc(n, sizeof(*arr));
  if (arr == NULL)
    return UV_ENOMEM;
  while (i < n) {
    uvt_task_t *ta =
        a != a_end ? uvt__container_of(a, uvt_task_t, scope_link) : NULL;
    uvt_task_t *tb = b != NULL && b != b_end
                         ? uvt__container_of(b, uvt_task_t, scope_link)
                         : NULL;
    uvt_task_t *t;
    if (ta != NULL && (tb == NULL || ta->seq < tb->seq)) {
      t = ta;
      a = a->next;
    } else {
      t = tb;
      b = b->next;
    }
    if (uvt__snapshot_take(t, &arr[i]) != 0) {
      uvt_snapshots_free(arr, i);
      return UV_ENOMEM;
    }
    i++;
  }
  *out = arr;
  *count = n;
  return 0;
}

int uvt_read(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
             uvt_read_t *out) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  uvt_buf_t buf;
  int err;

  if (out == NULL)
    return UV_EINVAL;
  memset(out, 0, sizeof(*out));
  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  /* From inside the task's own read_output hook: that read is consuming
   * the output right now (R-REENTER-1). */
  if (uvt__in_hook(t, UVT__HOOK_READ))
    return UV_EBUSY;
  memset(&buf, 0, sizeof(buf));

  if (uvt_status_is_terminal(t->status)) {
    /* Stream kinds: the unread remainder handed over at settlement, then
     * nothing (R-READ-1).  Final kinds: the whole output, every time
     * (R-READ-2). */
    size_t from = t->hooks.read_output != NULL ? t->output_pos : 0;
    size_t len = t->output_len - from;
    size_t before;
    if (len > 0)
      err = uvt_buf_append(&buf, t->output + from, len);
    else
      err = uvt_buf_append(&buf, "", 1); /* the block, and its NUL */
    if (err != 0) {
      uvt__free(buf.base);
      return err;
    }
    buf.len = len;
    err = uvt_task_remainder_take(t, t->hooks.read_output != NULL,
                                  &out->snapshot);
    if (err != 0) {
      uvt__free(buf.base);
      return err;
    }
    /* P-OUT-6: then what the work wrote after its end (a process task's
     * leftovers).  A failed late read takes back what it appended: those
     * bytes stay for the next read, the remainder is this read's. */
    before = buf.len;
    if (t->hooks.read_output != NULL && uvt__hook_read_late(t, &buf) != 0)
      buf.len = before;
    buf.base[buf.len] = '\0';
    out->text = buf.base;
    out->len = buf.len;
    return 0;
  }

  /* Live: the snapshot first, so nothing can fail after the producer has
   * consumed its output.  A read of a live task never marks it reported. */
  err = uvt__snapshot_take(t, &out->snapshot);
  if (err != 0)
    return err;
  if (t->hooks.read_output != NULL && !atomic_load(&t->settle_called)) {
    err = uvt__hook_read(t, &buf);
    if (err != 0) {
      uvt__free(buf.base);
      uvt_snapshot_cleanup(&out->snapshot);
      return err;
    }
  }
  if (buf.base == NULL) {
    buf.base = uvt__malloc(1);
    if (buf.base == NULL) {
      uvt_snapshot_cleanup(&out->snapshot);
      return UV_ENOMEM;
    }
    buf.base[0] = '\0';
  }
  /* uvt_buf_append keeps a spare byte, so this never allocates. */
  buf.base[buf.len] = '\0';
  out->text = buf.base;
  out->len = buf.len;
  return 0;
}

void uvt_read_cleanup(uvt_read_t *r) {
  if (r == NULL)
    return;
  uvt__free(r->text);
  uvt_snapshot_cleanup(&r->snapshot);
  r->text = NULL;
  r->len = 0;
}

/* R-READ-1: a stream kind's remainder is there until a read consumed it
 * (uvt__task_output_consumed frees it and moves output_pos to the end). */
int uvt_task_remainder_peek(const uvt_task_t *t, const char **text,
                            size_t *len) {
  if (t == NULL || text == NULL || len == NULL)
    return UV_EINVAL;
  *text = NULL;
  *len = 0;
  UVT_LOOP_ONLY(t->reg); /* P-THREAD-1 */
  *len = t->output_len;  /* 0 until the outcome is recorded */
  if (t->output == NULL || t->output_pos >= t->output_len) {
    *text = NULL;
    return 0;
  }
  *text = t->output;
  return 1;
}

/* The one place a read of an ended task marks it reported: the snapshot
 * shows the read's own effect (R-READ-3), and nothing changes if it cannot
 * be taken. */
int uvt_task_remainder_take(uvt_task_t *t, int consume, uvt_snapshot_t *snap) {
  unsigned was;
  int err;
  if (t == NULL)
    return UV_EINVAL;
  UVT_LOOP_ONLY(t->reg); /* P-THREAD-1 */
  if (!uvt_status_is_terminal(t->status))
    return UV_EINVAL;
  was = t->reported;
  t->reported = 1;
  if (snap != NULL) {
    err = uvt__snapshot_take(t, snap);
    if (err != 0) {
      t->reported = was;
      return err;
    }
  }
  if (consume)
    uvt__task_output_consumed(t);
  return 0;
}
