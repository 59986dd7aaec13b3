/* M-TOOLS-14: task_kill with `signal` sends one signal to a task without
 * stopping it (P-KILL-8), and write_stdin of exactly "\u0003" to a task
 * whose stdin is a pipe is SIGINT to its session, as a terminal's Ctrl-C
 * would be. */
#include <signal.h>
#include <string.h>
#include <strings.h>

#include "tools-int.h"
#include "uvtasks/process.h"

static const struct {
  const char *name;
  int signum;
} signals[] = {
    {"SIGINT", SIGINT},     {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
    {"SIGUSR1", SIGUSR1},   {"SIGUSR2", SIGUSR2}, {"SIGTERM", SIGTERM},
    {"SIGKILL", SIGKILL},   {"SIGCONT", SIGCONT}, {"SIGSTOP", SIGSTOP},
    {"SIGWINCH", SIGWINCH},
};

/* "SIGINT", "sigint", "INT" or "int": its number, or 0.  Models spell
 * signals every way; the Node binding takes only Node's names. */
static int signal_number(const char *name) {
  size_t i;

  for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
    if (strcasecmp(name, signals[i].name) == 0 ||
        strcasecmp(name, signals[i].name + 3) == 0)
      return signals[i].signum;
  return 0;
}

void uvt__tool_task_signal(uvt_tools_call_t *req,
                           const uvt_tools_args_t *args) {
  uvt_registry_t *reg = req->tools->registry;
  uvt_snapshot_t snap;
  uvt__text_t t;
  int signum = signal_number(args->signal);
  size_t i;
  int err;

  uvt__text_init(&t);
  if (signum == 0) {
    uvt__text_str(&t, "Unknown signal \"");
    uvt__text_oneline(&t, args->signal, 32);
    uvt__text_str(&t, "\"; signal is one of");
    for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
      uvt__text_printf(&t, "%s %s", i == 0 ? "" : ",", signals[i].name);
    uvt__text_str(&t, ". Without signal, task_kill stops the task.");
    uvt__tools_result(req, &t, 1);
    return;
  }
  err = uvt_process_signal(reg, args->task_id, req->caller_, signum);
  if (err == UV_ESRCH) {
    uvt__text_oneline(&t, args->task_id, UVT_ID_MAX);
    uvt__text_str(&t, " has ended (or is ending); nothing was sent.\n");
  } else if (err == UV_EAGAIN) {
    uvt__text_oneline(&t, args->task_id, UVT_ID_MAX);
    uvt__text_str(&t, " has not started its command yet; nothing was sent. "
                      "Try again in a moment.\n");
  } else if (err == UV_EINVAL) {
    uvt__text_oneline(&t, args->task_id, UVT_ID_MAX);
    uvt__text_str(&t, " is not a command; it takes no signal.");
    uvt__tools_result(req, &t, 1);
    return;
  } else if (err != 0) {
    uvt__tools_task_error(&t, "signal", args->task_id, err);
    uvt__tools_result(req, &t, 1);
    return;
  } else {
    /* The name as listed, whatever spelling the call used. */
    for (i = 0; signals[i].signum != signum; i++)
      ;
    /* Not "it was not stopped": SIGKILL, SIGTERM and others end it. */
    uvt__text_printf(&t, "Sent %s to every process of ", signals[i].name);
    uvt__text_oneline(&t, args->task_id, UVT_ID_MAX);
    uvt__text_str(&t, "; the task ends only if the signal ends it "
                      "(task_kill without signal stops it). task_output "
                      "with wait shows what it does.\n");
  }
  memset(&snap, 0, sizeof(snap));
  if (uvt_get(reg, args->task_id, req->caller_, &snap) == 0) {
    uvt__tools_status(req->tools, req->caller_, &t, &snap, UVT__DETAIL_LIVE);
    uvt_snapshot_cleanup(&snap);
  }
  uvt__tools_result(req, &t, err != 0);
}

int uvt__tools_ctrl_c(uvt_tools_call_t *req, const char *chars, size_t len) {
  uvt_process_peek_t pk;

  if (len != 1 || chars[0] != '\x03')
    return 0;
  /* A terminal's line discipline turns the byte into SIGINT itself
   * (P-PTY-1).  Any other process task gets SIGINT, with a stdin pipe or
   * without (M-TOOLS-18: a Ctrl-C is an interrupt, not input a task
   * without stdin should be restarted for); another producer's task gets
   * the write's error. */
  if (uvt_process_peek(req->tools->registry, req->task_id_, req->caller_,
                       &pk) != 0 ||
      pk.tty)
    return 0;
  /* M-TOOLS-14: a SIGINT that was not sent is not a success: a spawn
   * still out answers as task_kill's signal does, an ending task as a
   * write to an ended one. */
  switch (uvt_process_signal(req->tools->registry, req->task_id_, req->caller_,
                             SIGINT)) {
  case 0:
    return 1;
  case UV_EAGAIN:
    return UV_EAGAIN;
  default:
    return UV_EPIPE;
  }
}
