/* The calls waiting on a task (task_output with wait, run_command,
 * write_stdin, task_wait): on the tools' waiting list while their wait
 * runs, and the wait's end made into the call's result. */
#include "uvtasks/tools.h"

#include "tools-int.h"

void uvt__tools_link_waiting(uvt_tools_call_t *req) {
  uvt_tools_t *tools = req->tools;

  req->state_ = CALL_WAITING;
  uvt__list_insert_tail(&tools->waiting_, &req->link_);
}

/* A write_stdin call counted in tools->writers_ (write.c started the
 * quiet timer for it) stops the timer when it is the last. */
void uvt__tools_unlink_waiting(uvt_tools_call_t *req) {
  uvt_tools_t *tools = req->tools;

  uvt__list_remove(&req->link_);
  if (req->tool_ == TOOL_WRITE_STDIN && --tools->writers_ == 0)
    uv_timer_stop(&tools->quiet_);
}

void uvt__tools_wait_cb(uvt_wait_t *w, int status, const uvt_snapshot_t *snap) {
  uvt_tools_call_t *req = w->data;
  uvt_tools_t *tools = req->tools;
  uvt__text_t t;

  uvt__tools_unlink_waiting(req);
  req->state_ = CALL_IDLE;

  if (req->aborted_ == ABORT_EARLY) {
    /* write_stdin saw a prompt (or the task ended meanwhile: status 0). */
    uvt__tools_read_result(req, req->task_id_, 0, status == 0 ? snap : NULL);
    return;
  }
  if (req->aborted_ != ABORT_NONE || status == UVT_EABORTED) {
    /* R-WAIT-5: the task settled and was marked reported on this call's
     * behalf; the call will not show it, so the notice must. */
    if (status == 0 && snap != NULL && snap->owner_session != NULL &&
        req->aborted_ == ABORT_CALLER && tools->state_ == TOOLS_ATTACHED)
      uvt__tools_notice(tools, snap, req->caller_);
    uvt__tools_ready(req, req->aborted_ == ABORT_DETACH ? UVT_ECLOSING
                                                        : UVT_EABORTED);
    return;
  }
  if (req->tool_ == TOOL_RUN_COMMAND) {
    uvt__tools_run_result(req, status, snap);
    return;
  }
  if (status == 0) {
    uvt__tools_read_result(req, req->task_id_, 0, snap);
    return;
  }
  if (status == UVT_EWAITTIMEOUT) {
    /* M-TOOLS-1: a wait that times out is a success showing the live
     * status line.  write_stdin's yield passing is its normal end: no note
     * about it. */
    uvt__tools_read_result(
        req, req->task_id_,
        req->tool_ == TOOL_WRITE_STDIN ? 0 : req->timeout_ms_, NULL);
    return;
  }
  uvt__text_init(&t);
  uvt__tools_task_error(&t, "wait for", req->task_id_, status);
  uvt__tools_result(req, &t, 1);
}
