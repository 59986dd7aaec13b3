/* A tool call's result (M-TOOLS-1): the text built for it put into the
 * call and queued, then delivered from the loop through one idle handle,
 * never inside uvt_tools_call(); the error texts every tool shares; and
 * the end of a detach, once the last result is delivered (the idle and
 * quiet handles closed, the tools' state freed, the host called back). */
#include "uvtasks/tools.h"

#include <stdlib.h>

#include "tools-int.h"

static void tools_idle_cb(uv_idle_t *idle) {
  uvt_tools_t *tools = idle->data;
  struct uvt__link list;
  struct uvt__link *n;
  uvt_tools_call_t *req;

  /* Collect first: calls finished by these callbacks wait for the next
   * turn, so no callback runs twice in one turn because of us. */
  uvt__list_init(&list);
  uvt__list_splice(&tools->ready_, &list);
  uv_idle_stop(&tools->idle_);

  while ((n = uvt__list_pop(&list)) != NULL) {
    req = uvt__container_of(n, uvt_tools_call_t, link_);
    req->state_ = CALL_IDLE;
    tools->pending_--;
    req->cb_(req, req->status_);
  }
  if (tools->state_ == TOOLS_DETACHING)
    uvt__tools_finish_detach(tools);
}

/* Queue `req` for delivery with `status` (its text is already in place). */
static void tools_ready(uvt_tools_call_t *req, int status) {
  uvt_tools_t *tools = req->tools;

  /* The view's expression served the text (M-TOOLS-16). */
  if (req->match_ != NULL) {
    regfree(req->match_);
    uvt__tools_free(req->match_);
    req->match_ = NULL;
  }
  req->status_ = status;
  req->state_ = CALL_READY;
  uvt__list_remove(&req->link_);
  uvt__list_insert_tail(&tools->ready_, &req->link_);
  uv_idle_start(&tools->idle_, tools_idle_cb);
}

/* Put the built text into `req` and queue it. */
void uvt__tools_result(uvt_tools_call_t *req, uvt__text_t *t, int is_error) {
  req->len = t->len;
  req->text = uvt__text_take(t);
  if (req->text == NULL) {
    req->len = 0;
    tools_ready(req, UV_ENOMEM);
    return;
  }
  req->is_error = is_error;
  tools_ready(req, 0);
}

/* The error text for an operation on `id` that returned `err`. */
void uvt__tools_task_error(uvt__text_t *t, const char *verb, const char *id,
                           int err) {
  if (err == UVT_ENOTASK) {
    uvt__text_str(t, "No task ");
    uvt__text_oneline(t, id, UVT_ID_MAX);
    uvt__text_str(t, ". task_list shows the tasks you can see.");
  } else if (err == UVT_EFOREIGN) {
    uvt__text_str(t, "Task ");
    uvt__text_oneline(t, id, UVT_ID_MAX);
    uvt__text_str(t, " belongs to another session.");
  } else if (err == UVT_ECLOSING) {
    uvt__text_str(t, "The task service is shutting down.");
  } else {
    uvt__text_printf(t, "Could not %s ", verb);
    uvt__text_oneline(t, id, UVT_ID_MAX);
    uvt__text_printf(t, ": %s (%s).", uvt_strerror(err), uvt_err_name(err));
  }
}

static void tools_handle_closed(uv_handle_t *h) {
  uvt_tools_t *tools = h->data;
  uvt_tools_detach_cb cb = tools->detach_cb_;

  if (--tools->closing_ > 0)
    return;
  uvt__tools_free(tools->cwd_);
  tools->cwd_ = NULL;
  uvt__tools_free(tools->workspace_);
  tools->workspace_ = NULL;
  uvt__tools_free(tools->spill_dir_);
  tools->spill_dir_ = NULL;
  uvt__spill_free(tools);
  uvt__tools_output_free(tools);
  tools->state_ = TOOLS_DETACHED;
  tools->registry = NULL;
  if (cb != NULL)
    cb(tools);
}

void uvt__tools_finish_detach(uvt_tools_t *tools) {
  if (tools->pending_ != 0 || uv_is_closing((uv_handle_t *)&tools->idle_))
    return;
  tools->closing_ = 2;
  uv_close((uv_handle_t *)&tools->idle_, tools_handle_closed);
  uv_close((uv_handle_t *)&tools->quiet_, tools_handle_closed);
}

void uvt__tools_ready(uvt_tools_call_t *req, int status) {
  tools_ready(req, status);
}
