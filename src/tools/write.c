/* write_stdin (M-TOOLS-5): input to a task's stdin pipe or terminal, then
 * a wait for its answer.  The wait is a registry wait (uvt_wait) that ends
 * at the yield or at the task's end, or earlier when the program printed a
 * prompt and went quiet: one timer of the tools looks at the output of
 * every write_stdin call that waits, and only while one does.  Why that
 * rule, and what it costs when it guesses wrong: include/uvtasks/tools.h,
 * uvt_tools_call(). */
#include "uvtasks/tools.h"

#include <string.h>

#include "tools-int.h"
#include "uvtasks/process.h"

/* The task's status line, taken with a get (nothing consumed), after a
 * newline; nothing if the task cannot be seen. */
static void text_status_of(uvt_tools_call_t *req, const char *id,
                           uvt__text_t *t) {
  uvt_snapshot_t snap;

  memset(&snap, 0, sizeof(snap));
  if (uvt_get(req->tools->registry, id, req->caller_, &snap) != 0)
    return;
  uvt__text_str(t, "\n");
  uvt__tools_status(req->tools, req->caller_, t, &snap, UVT__DETAIL_LIVE);
  uvt_snapshot_cleanup(&snap);
}

/* Why write_stdin could not write to `id` (uvt_process_write() said
 * `err`): a text a model can act on, then the status line. */
static void text_write_error(uvt_tools_call_t *req, const char *id, int err,
                             const char *chars, size_t len, uvt__text_t *t) {
  uvt_snapshot_t snap;
  int ended;

  if (err == UVT_ENOTASK || err == UVT_EFOREIGN || err == UVT_ECLOSING) {
    uvt__tools_task_error(t, "write to", id, err);
    return;
  }
  /* M-TOOLS-18: a task that ended takes nothing, whatever it was started
   * with: say that, not how to start one with stdin. */
  memset(&snap, 0, sizeof(snap));
  ended = uvt_get(req->tools->registry, id, req->caller_, &snap) == 0 &&
          uvt_status_is_terminal(snap.status);
  uvt_snapshot_cleanup(&snap);
  if (ended && (err == UV_EINVAL || err == UV_EPIPE)) {
    uvt__text_printf(t,
                     "Nothing was sent: %s has ended, so it takes no more "
                     "input%s. task_output shows what it printed last.",
                     id,
                     len == 1 && chars[0] == '\x03'
                         ? " and there is nothing to interrupt"
                         : "");
  } else if (err == UV_EINVAL) {
    uvt__text_oneline(t, id, UVT_ID_MAX);
    uvt__text_str(t, " does not take input: it was started without stdin or "
                     "tty. To write to a command, start it with "
                     "run_in_background and \"stdin\": true (or \"tty\": "
                     "true).");
  } else if (err == UV_ENOBUFS) {
    uvt__text_printf(t,
                     "Nothing was sent: %s cannot take %zu bytes more now "
                     "(the input it has not read yet and these may not go "
                     "beyond its limit, 1 MiB for the tasks "
                     "run_in_background starts). Send less at a time, or "
                     "poll with empty chars until it has read more, then "
                     "send again.",
                     id, len);
  } else if (err == UV_EAGAIN) {
    /* M-TOOLS-14: a Ctrl-C before the spawner reported the command. */
    uvt__text_oneline(t, id, UVT_ID_MAX);
    uvt__text_str(t, " has not started its command yet; nothing was sent. "
                     "Try again in a moment.");
  } else if (err == UV_EPIPE) {
    /* Only its input closed: it runs on. */
    uvt__text_printf(t,
                     "Nothing was sent: the input of %s is closed "
                     "(close_stdin ended it, or the program closed its "
                     "stdin or exited). task_output reads its output, "
                     "task_kill stops it.",
                     id);
  } else {
    uvt__text_str(t, "Nothing was sent to ");
    uvt__text_oneline(t, id, UVT_ID_MAX);
    uvt__text_printf(t, ": %s (%s).", uvt_strerror(err), uvt_err_name(err));
  }
  text_status_of(req, id, t);
}

/* The task's unread output, as write_stdin compares it between looks:
 * stdout bytes and drops, stderr bytes and drops.  0, or the peek's
 * error. */
static int tools_peek(uvt_tools_call_t *req, uint64_t seen[4],
                      uvt_process_peek_t *pk) {
  int err;

  err = uvt_process_peek(req->tools->registry, req->task_id_, req->caller_, pk);
  if (err != 0)
    return err;
  seen[0] = pk->unread[0];
  seen[1] = pk->dropped[0];
  seen[2] = pk->unread[1];
  seen[3] = pk->dropped[1];
  return 0;
}

/* Does the line being written, `tail`, show something?  As a model would
 * see it (M-TOOLS-7): escape sequences, carriage returns and blanks show
 * nothing, so bash's "\x1b[?2004l\r" after the echo of a command line is
 * no prompt, and ">>> " is one. */
static int tools_visible(const char *tail, size_t len) {
  uvt__text_t t;
  size_t i;
  int seen = 0;

  if (len == 0)
    return 0;
  uvt__text_init(&t);
  uvt__term_plain(tail, len, &t);
  /* Out of memory shows nothing: no early answer, the yield still ends
   * the wait. */
  for (i = 0; i < t.len && !seen; i++)
    seen = t.base[i] != ' ' && t.base[i] != '\t' && t.base[i] != '\n';
  uvt__text_free(&t);
  return seen;
}

/* M-TOOLS-5: has the program printed a prompt and gone quiet?  Its unread
 * output grew since the write (for a poll: is not empty), did not change since
 * the previous look (UVT_TOOLS_WRITE_QUIET_MS ago), and a stream's unread bytes
 * end inside a line that shows something.  See uvt_tools_call() for why this
 * rule. */
static int tools_prompted(uvt_tools_call_t *req) {
  uvt_process_peek_t pk;
  uint64_t now[4];
  int same;

  if (tools_peek(req, now, &pk) != 0)
    return 0; /* the wait reports what happened to the task */
  same = memcmp(now, req->seen_, sizeof(now)) == 0;
  memcpy(req->seen_, now, sizeof(now));
  if (!same || memcmp(now, req->first_, sizeof(now)) == 0)
    return 0;
  return tools_visible(pk.tail[0], pk.tail_len[0]) ||
         tools_visible(pk.tail[1], pk.tail_len[1]);
}

void uvt__tools_quiet_cb(uv_timer_t *timer) {
  uvt_tools_t *tools = timer->data;
  struct uvt__link *n;
  uvt_tools_call_t *req;

  /* The aborts are deferred (their callbacks come from the registry), so
   * the list does not change under this walk. */
  for (n = tools->waiting_.next; n != &tools->waiting_; n = n->next) {
    req = uvt__container_of(n, uvt_tools_call_t, link_);
    if (req->tool_ != TOOL_WRITE_STDIN || req->aborted_ != ABORT_NONE)
      continue;
    if (tools_prompted(req)) {
      req->aborted_ = ABORT_EARLY;
      /* UV_EINVAL: the wait's callback is already due; it reads then. */
      uvt_wait_abort(&req->wait_);
    }
  }
}

void uvt__tool_write_stdin(uvt_tools_call_t *req,
                           const uvt_tools_args_t *args) {
  uvt_tools_t *tools = req->tools;
  uvt_registry_t *reg = tools->registry;
  uvt__text_t t;
  const char *chars;
  uint64_t yield_ms;
  uvt_process_peek_t pk;
  size_t len;
  int err;

  uvt__text_init(&t);
  if (uvt__tools_need_id(req, args, UVT_TOOL_WRITE_STDIN) != 0)
    return;
  if (uvt__tools_max_bytes(req, args) != 0)
    return;
  if (args->yield_ms < -1) {
    uvt__text_printf(&t,
                     "yield_ms must be 0 (answer at once) or a positive "
                     "number of milliseconds (default %d, at most %d).",
                     UVT_TOOLS_WRITE_YIELD_DEFAULT_MS,
                     UVT_TOOLS_WRITE_YIELD_MAX_MS);
    uvt__tools_result(req, &t, 1);
    return;
  }
  if (args->yield_ms < 0)
    yield_ms = UVT_TOOLS_WRITE_YIELD_DEFAULT_MS;
  else if (args->yield_ms > UVT_TOOLS_WRITE_YIELD_MAX_MS)
    yield_ms = UVT_TOOLS_WRITE_YIELD_MAX_MS;
  else
    yield_ms = (uint64_t)args->yield_ms;
  if (strlen(args->task_id) >= UVT_ID_MAX) {
    uvt__tools_task_error(&t, "write to", args->task_id, UVT_ENOTASK);
    uvt__tools_result(req, &t, 1);
    return;
  }
  strcpy(req->task_id_, args->task_id);

  chars = args->chars != NULL ? args->chars : "";
  len = args->chars == NULL             ? 0
        : args->chars_len == (size_t)-1 ? strlen(chars)
                                        : args->chars_len;
  /* A write of nothing checks the task (it exists, the caller may see
   * it).  A poll reads any task: one whose input is closed or that ended
   * (UV_EPIPE), and one that never took input (UV_EINVAL), such as a
   * run_command promoted at its yield, which M-TOOLS-6 says write_stdin
   * controls.  Only closing an input the task never had is refused. */
  /* M-TOOLS-14: Ctrl-C to a pipe is SIGINT, as a terminal would send. */
  err = uvt__tools_ctrl_c(req, chars, len);
  if (err == 1)
    err = 0;
  else if (err == 0)
    err = uvt_process_write(reg, req->task_id_, req->caller_, chars, len);
  if (len == 0 &&
      (err == UV_EPIPE || (err == UV_EINVAL && args->close_stdin != 1)))
    err = 0;
  if (err != 0) {
    text_write_error(req, req->task_id_, err, chars, len, &t);
    uvt__tools_result(req, &t, 1);
    return;
  }
  if (args->close_stdin == 1) {
    /* Only out of memory can stop it now (a terminal's Ctrl-D is queued). */
    err = uvt_process_close_stdin(reg, req->task_id_, req->caller_);
    if (err != 0) {
      uvt__text_str(&t, "Could not end the input of ");
      uvt__text_oneline(&t, req->task_id_, UVT_ID_MAX);
      uvt__text_printf(&t, ": %s (%s); the %zu bytes of chars were sent.",
                       uvt_strerror(err), uvt_err_name(err), len);
      text_status_of(req, req->task_id_, &t);
      uvt__tools_result(req, &t, 1);
      return;
    }
  }
  if (yield_ms == 0) {
    uvt__tools_read_result(req, req->task_id_, 0, NULL);
    return;
  }
  /* M-TOOLS-18: the answer is the program's reaction to the write.  A
   * terminal program cannot act on a lone ESC at the end of its input
   * until it has waited to see whether more bytes of an escape sequence
   * follow (vim's 'timeoutlen', 1 s by default): the wait outlasts that,
   * so the answer shows vim out of insert mode, not "-- INSERT --". */
  if (len > 0 && chars[len - 1] == '\x1b' &&
      yield_ms < UVT_TOOLS_WRITE_ESC_MS &&
      uvt_process_peek(reg, req->task_id_, req->caller_, &pk) == 0 && pk.tty)
    yield_ms = UVT_TOOLS_WRITE_ESC_MS;
  /* A write's answer is what comes after it: output unread before the
   * write does not end the wait early.  A poll (no chars, input left
   * open) asks for what is there: a prompt printed before the call
   * answers it once two looks in a row find it unchanged. */
  memset(req->first_, 0, sizeof(req->first_));
  if (len > 0 || args->close_stdin == 1)
    tools_peek(req, req->first_, &pk);
  memcpy(req->seen_, req->first_, sizeof(req->seen_));
  req->timeout_ms_ = yield_ms;
  req->wait_.data = req;
  err = uvt_wait(reg, &req->wait_, req->task_id_, yield_ms, req->caller_,
                 uvt__tools_wait_cb);
  if (err != 0) {
    uvt__tools_task_error(&t, "wait for", req->task_id_, err);
    uvt__tools_result(req, &t, 1);
    return;
  }
  uvt__tools_link_waiting(req);
  /* M-TOOLS-5: one timer looks at the output of every waiting write_stdin
   * call; it runs only while there is one (uvt__tools_unlink_waiting
   * stops it after the last). */
  if (req->tools->writers_++ == 0) {
    uv_update_time(uvt_registry_loop(reg)); /* R-TIME-1 */
    uv_timer_start(&req->tools->quiet_, uvt__tools_quiet_cb,
                   UVT_TOOLS_WRITE_QUIET_MS, UVT_TOOLS_WRITE_QUIET_MS);
  }
}
