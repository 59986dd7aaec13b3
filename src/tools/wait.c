/* task_wait (M-TOOLS-9): one call waits for several tasks, "any" or "all"
 * of them, with one uvt_wait() per task; the answer has one section per
 * task, ending with its status line, and the new output of those that
 * ended (shaped as task_output shows it, the call's max_bytes shared
 * between them). */
#include <string.h>

#include "tools-int.h"

typedef struct multi_s multi_t;

typedef struct {
  uvt_wait_t w;
  multi_t *m;
  char id[UVT_ID_MAX];
  int done;   /* its callback ran */
  int status; /* what it said */
} one_t;

struct multi_s {
  uvt_tools_call_t *req;
  uint64_t started_ns;
  size_t n;
  size_t out;    /* waits whose callback has not run */
  int all;       /* mode "all" */
  int finishing; /* the answer is decided: the other waits are stopped */
  int aborting;  /* inside the loop that stops them */
  one_t one[];
};

static void multi_complete(multi_t *m);

/* Stop every wait that has not answered; the last callback completes. */
static void multi_stop(multi_t *m) {
  size_t i;

  m->finishing = 1;
  m->aborting = 1;
  for (i = 0; i < m->n; i++)
    if (!m->one[i].done)
      uvt_wait_abort(&m->one[i].w);
  m->aborting = 0;
  if (m->out == 0)
    multi_complete(m);
}

static void one_cb(uvt_wait_t *w, int status, const uvt_snapshot_t *snap) {
  one_t *o = w->data;
  multi_t *m = o->m;
  size_t ended = 0;
  size_t i;

  (void)snap;
  o->done = 1;
  o->status = status;
  m->out--;
  if (!m->finishing) {
    for (i = 0; i < m->n; i++)
      ended += m->one[i].done && m->one[i].status == 0;
    /* "any": the first end; "all": the last one; either: the deadline or
     * a wait that cannot go on (the task was forgotten). */
    if (status != 0 || !m->all || ended == m->n) {
      if (!m->aborting)
        multi_stop(m);
      return;
    }
  }
  if (m->out == 0 && !m->aborting)
    multi_complete(m);
}

/* The answer: a first line, then per task (in the order asked) its new
 * output if it ended, and its status line. */
static void multi_result(multi_t *m, uvt__text_t *t) {
  uvt_tools_call_t *req = m->req;
  uvt_registry_t *reg = req->tools->registry;
  uvt_snapshot_t snap;
  uvt_read_t r;
  size_t ended = 0;
  size_t per_bytes, per_lines;
  size_t i, before;
  int err;
  int *is_end = uvt__tools_malloc(m->n * sizeof(int));

  if (is_end == NULL) {
    t->err = UV_ENOMEM;
    return;
  }
  memset(is_end, 0, m->n * sizeof(int));
  /* Ended now, whatever the waits said: a task may end as the others are
   * stopped. */
  for (i = 0; i < m->n; i++) {
    memset(&snap, 0, sizeof(snap));
    if (uvt_get(reg, m->one[i].id, req->caller_, &snap) != 0 ||
        uvt_status_is_terminal(snap.status)) {
      is_end[i] = 1;
      ended++;
    }
    uvt_snapshot_cleanup(&snap);
  }
  uvt__text_printf(t, "%zu of %zu task%s ended", ended, m->n,
                   m->n == 1 ? "" : "s");
  if (ended == 0 || (m->all && ended < m->n))
    uvt__text_printf(
        t, " (waited %llu ms for %s: wait again to wait longer)",
        (unsigned long long)((uv_hrtime() - m->started_ns) / 1000000),
        m->all ? "all" : "any");
  uvt__text_str(t, ".\n");
  /* The output budget is shared by the tasks that show output. */
  per_bytes = req->max_bytes_ / (ended > 0 ? ended : 1);
  if (per_bytes < UVT_TOOLS_MAX_BYTES_MIN)
    per_bytes = UVT_TOOLS_MAX_BYTES_MIN;
  per_lines = uvt__tools_max_lines(req->tools, req->max_bytes_) /
              (ended > 0 ? ended : 1);
  for (i = 0; i < m->n; i++) {
    uvt__text_str(t, "--- ");
    uvt__text_oneline(t, m->one[i].id, UVT_ID_MAX);
    uvt__text_str(t, " ---\n");
    if (is_end[i]) {
      memset(&r, 0, sizeof(r));
      err = uvt_read(reg, m->one[i].id, req->caller_, &r);
      if (err != 0) {
        uvt__tools_task_error(t, "read", m->one[i].id, err);
        uvt__text_str(t, "\n");
        continue;
      }
      before = t->len;
      {
        uvt__shape_t sh = {per_bytes, per_lines, -1, -1, NULL, req->caller_};
        uvt__tools_output(req->tools, m->one[i].id, &r, &sh, t);
      }
      if (t->len == before && t->err == 0)
        uvt__text_str(t, "(no new output)\n");
      uvt__text_status(t, &r.snapshot);
      uvt_read_cleanup(&r);
    } else {
      /* Still running: only its status, no output consumed. */
      memset(&snap, 0, sizeof(snap));
      if (uvt_get(reg, m->one[i].id, req->caller_, &snap) == 0)
        uvt__text_status(t, &snap);
      else
        uvt__text_str(t, "[status: unknown]");
      uvt_snapshot_cleanup(&snap);
    }
    if (i + 1 < m->n)
      uvt__text_str(t, "\n");
  }
  uvt__tools_free(is_end);
}

static void multi_complete(multi_t *m) {
  uvt_tools_call_t *req = m->req;
  uvt_snapshot_t snap;
  uvt__text_t t;
  size_t i;

  uvt__tools_unlink_waiting(req);
  req->state_ = CALL_IDLE;
  req->multi_ = NULL;
  if (req->aborted_ != ABORT_NONE) {
    /* R-WAIT-5: a task whose end a wait counted is marked reported on
     * this call's behalf; the call shows nothing, so a notice must. */
    for (i = 0; i < m->n && req->aborted_ == ABORT_CALLER; i++) {
      memset(&snap, 0, sizeof(snap));
      if (m->one[i].status == 0 &&
          uvt_get(req->tools->registry, m->one[i].id, req->caller_, &snap) ==
              0 &&
          snap.owner_session != NULL)
        uvt__tools_notice(req->tools, &snap, req->caller_);
      uvt_snapshot_cleanup(&snap);
    }
    uvt__tools_free(m);
    uvt__tools_ready(req, req->aborted_ == ABORT_DETACH ? UVT_ECLOSING
                                                        : UVT_EABORTED);
    return;
  }
  uvt__text_init(&t);
  multi_result(m, &t);
  uvt__tools_free(m);
  uvt__tools_result(req, &t, 0);
}

void uvt__tool_task_wait_abort(uvt_tools_call_t *req) {
  multi_t *m = req->multi_;

  if (m != NULL && !m->aborting)
    multi_stop(m);
}

void uvt__tool_task_wait(uvt_tools_call_t *req, const uvt_tools_args_t *args) {
  uvt_tools_t *tools = req->tools;
  uvt_snapshot_t snap;
  uvt__text_t t;
  uint64_t timeout_ms;
  multi_t *m;
  size_t n = args->task_ids_len;
  size_t i, j;
  int err;

  uvt__text_init(&t);
  if (args->task_ids == NULL || n == 0 || n > UVT_TOOLS_WAIT_IDS_MAX) {
    uvt__text_printf(&t,
                     "task_wait needs task_ids: 1 to %d task ids (strings "
                     "such as bash-1).",
                     UVT_TOOLS_WAIT_IDS_MAX);
    uvt__tools_result(req, &t, 1);
    return;
  }
  if (args->mode != NULL && strcmp(args->mode, "any") != 0 &&
      strcmp(args->mode, "all") != 0) {
    uvt__text_str(&t, "task_wait: mode must be \"any\" (answer when one task "
                      "ended) or \"all\" (when every one did).");
    uvt__tools_result(req, &t, 1);
    return;
  }
  for (i = 0; i < n; i++) {
    if (args->task_ids[i] == NULL || args->task_ids[i][0] == '\0') {
      uvt__text_str(&t, "task_wait: every task id must be a non-empty "
                        "string.");
      uvt__tools_result(req, &t, 1);
      return;
    }
    for (j = 0; j < i; j++) {
      if (strcmp(args->task_ids[i], args->task_ids[j]) == 0) {
        uvt__text_str(&t, "task_wait: task_ids names ");
        uvt__text_oneline(&t, args->task_ids[i], UVT_ID_MAX);
        uvt__text_str(&t, " twice.");
        uvt__tools_result(req, &t, 1);
        return;
      }
    }
  }
  if (uvt__tools_timeout(req, args, UVT_TOOLS_WAIT_DEFAULT_MS,
                         UVT_TOOLS_WAIT_MAX_MS, &timeout_ms) != 0)
    return;
  timeout_ms = uvt__tools_wait_yield(tools, timeout_ms); /* M-TOOLS-6 */
  if (uvt__tools_max_bytes(req, args) != 0)
    return;
  /* Every task must be there and visible before anything waits. */
  for (i = 0; i < n; i++) {
    memset(&snap, 0, sizeof(snap));
    err =
        strlen(args->task_ids[i]) >= UVT_ID_MAX
            ? UVT_ENOTASK
            : uvt_get(tools->registry, args->task_ids[i], req->caller_, &snap);
    uvt_snapshot_cleanup(&snap);
    if (err != 0) {
      uvt__tools_task_error(&t, "wait for", args->task_ids[i], err);
      uvt__tools_result(req, &t, 1);
      return;
    }
  }

  m = uvt__tools_malloc(sizeof(*m) + n * sizeof(one_t));
  if (m == NULL) {
    uvt__tools_ready(req, UV_ENOMEM);
    return;
  }
  memset(m, 0, sizeof(*m) + n * sizeof(one_t));
  m->req = req;
  m->n = n;
  m->all = args->mode != NULL && strcmp(args->mode, "all") == 0;
  m->started_ns = uv_hrtime();
  req->multi_ = m;
  req->timeout_ms_ = timeout_ms;
  uvt__tools_link_waiting(req);
  /* Callbacks never run inside uvt_wait(); `aborting` still keeps a
   * failure below from completing the call in the middle of the loop. */
  m->aborting = 1;
  for (i = 0; i < n; i++) {
    one_t *o = &m->one[i];
    strcpy(o->id, args->task_ids[i]);
    o->m = m;
    o->w.data = o;
    err = uvt_wait(tools->registry, &o->w, o->id, timeout_ms, req->caller_,
                   one_cb);
    if (err != 0) {
      o->done = 1;
      o->status = err;
      m->finishing = 1;
    } else {
      m->out++;
    }
  }
  m->aborting = 0;
  if (m->finishing)
    multi_stop(m);
}
