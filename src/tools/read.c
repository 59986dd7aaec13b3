/* A read of a task as a tool result (M-TOOLS-1, M-TOOLS-7, M-TOOLS-8,
 * M-TOOLS-16): its new output shaped by output.c, then its status line;
 * and run_command's result once its wait ended (M-TOOLS-6: promoted at
 * its yield, or ended). */
#include "uvtasks/tools.h"

#include <string.h>

#include "tools-int.h"

/* The output part of a result for the read `r` of `id` (M-TOOLS-7,
 * M-TOOLS-8, M-TOOLS-16), or `empty_note` (may be NULL) when it shows
 * nothing. */
static void text_output(uvt_tools_call_t *req, const char *id,
                        const uvt_read_t *r, const char *empty_note,
                        uvt__text_t *t) {
  size_t before = t->len;
  uvt__shape_t sh;

  sh.max_bytes = req->max_bytes_;
  sh.max_lines = uvt__tools_max_lines(req->tools, req->max_bytes_);
  sh.head_lines = req->head_lines_;
  sh.tail_lines = req->tail_lines_;
  sh.match = req->match_;
  sh.caller = req->caller_;
  uvt__tools_output(req->tools, id, r, &sh, t);
  if (t->len == before && t->err == 0 && empty_note != NULL)
    uvt__text_str(t, empty_note);
}

/* The text of a read: new output (or a note), then the status line. */
static void text_read(uvt_tools_call_t *req, const char *id, uvt__text_t *t,
                      const uvt_read_t *r, uint64_t timed_out_ms) {
  text_output(req, id, r, "(no new output)\n", t);
  if (timed_out_ms > 0 && !uvt_status_is_terminal(r->snapshot.status))
    uvt__text_printf(t,
                     "(waited %llu ms; the task has not ended: wait again to "
                     "wait longer)\n",
                     (unsigned long long)timed_out_ms);
  uvt__tools_status(req->tools, req->caller_, t, &r->snapshot,
                    UVT__DETAIL_LIVE);
}

/* Read `id` for `req` and queue the result.  `fallback` (may be NULL) is
 * the terminal snapshot a wait delivered, shown if the record is gone. */
void uvt__tools_read_result(uvt_tools_call_t *req, const char *id,
                            uint64_t timed_out_ms,
                            const uvt_snapshot_t *fallback) {
  uvt_read_t r;
  uvt__text_t t;
  int err;

  uvt__text_init(&t);
  memset(&r, 0, sizeof(r));
  err = uvt_read(req->tools->registry, id, req->caller_, &r);
  if (err == 0) {
    text_read(req, id, &t, &r, timed_out_ms);
    uvt_read_cleanup(&r);
    uvt__tools_result(req, &t, 0);
    return;
  }
  if (fallback != NULL && (err == UVT_ENOTASK || err == UVT_ECLOSING)) {
    uvt__text_str(&t, "(its output is no longer available)\n");
    uvt__text_status(&t, fallback);
    uvt__tools_result(req, &t, 0);
    return;
  }
  uvt__tools_task_error(&t, "read", id, err);
  uvt__tools_result(req, &t, 1);
}

/* run_command's result once its wait ended with `status`: the output,
 * then the status line.  Only a command that completed (whatever its exit
 * code) is a success; so is one promoted at its yield (M-TOOLS-6), which
 * goes on as a background task and is not stopped. */
void uvt__tools_run_result(uvt_tools_call_t *req, int status,
                           const uvt_snapshot_t *snap) {
  uvt_registry_t *reg = req->tools->registry;
  uvt_read_t r;
  uvt__text_t t;
  uint64_t elapsed_ms;
  int promoted;
  int err;

  uvt__text_init(&t);
  if (status == UVT_EWAITTIMEOUT && !req->yields_) {
    /* The runtime limit should have ended it long ago; stop it now. */
    uvt_kill(reg, req->task_id_, req->caller_, "run_command wait ran out",
             NULL);
  } else if (status != 0 && status != UVT_EWAITTIMEOUT) {
    uvt__tools_task_error(&t, "wait for", req->task_id_, status);
    uvt__tools_result(req, &t, 1);
    return;
  }
  memset(&r, 0, sizeof(r));
  err = uvt_read(reg, req->task_id_, req->caller_, &r);
  if (err != 0) {
    if (snap == NULL || (err != UVT_ENOTASK && err != UVT_ECLOSING)) {
      uvt__tools_task_error(&t, "read", req->task_id_, err);
      uvt__tools_result(req, &t, 1);
      return;
    }
    uvt__text_str(&t, "(its output is no longer available)\n");
    uvt__text_status(&t, snap);
    uvt__tools_result(req, &t, snap->status != UVT_COMPLETED);
    return;
  }
  /* A command that ended just as its yield passed answers as ended (the
   * read reported its end). */
  promoted = status == UVT_EWAITTIMEOUT && req->yields_ &&
             !uvt_status_is_terminal(r.snapshot.status);
  text_output(req, req->task_id_, &r, promoted ? NULL : "(no output)\n", &t);
  if (promoted) {
    /* R-TIME-1: the time that really passed, not the yield asked for. */
    elapsed_ms = (uv_hrtime() - req->started_ns_) / 1000000;
    uvt__text_printf(&t,
                     "(still running after %llu ms; it goes on in the "
                     "background as %s: task_output reads more of its "
                     "output, task_kill stops it; its limit of %llu ms "
                     "still applies)\n",
                     (unsigned long long)elapsed_ms, req->task_id_,
                     (unsigned long long)req->runtime_ms_);
  } else if (status == UVT_EWAITTIMEOUT) {
    uvt__text_str(&t, "(the command did not end in time; it is being "
                      "stopped)\n");
  }
  uvt__tools_status(req->tools, req->caller_, &t, &r.snapshot,
                    UVT__DETAIL_LIVE);
  err = !promoted && r.snapshot.status != UVT_COMPLETED;
  uvt_read_cleanup(&r);
  uvt__tools_result(req, &t, err);
}
