/* The model-facing tool surface (contract §5, M-TOOLS-1..6): attach and
 * detach, the dispatch of a call to the function that runs its tool, and
 * the tools over the registry's operations and the process producer
 * (run_in_background, run_command, task_output, task_list, task_kill).
 * Below them: results delivered through the loop (result.c), the shared
 * arguments (args.c), reads as results (read.c), waiting calls
 * (waiting.c), completion notices (notice.c); what a result shows of a
 * task's output is shaped in output.c (M-TOOLS-7, M-TOOLS-8).  The other
 * tools have files of their own: write_stdin write.c (M-TOOLS-5),
 * task_wait wait.c, task_screen taskscreen.c, task_kill's signals
 * signal.c. */
#define _XOPEN_SOURCE 700 /* realpath(3), also under -D_POSIX_C_SOURCE */
#include "uvtasks/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "leaf/opts.h"
#include "tools-int.h"
#include "uvtasks/process.h"

/* run_command waits this much longer than the command's runtime limit: the
 * limit's SIGTERM, the grace, SIGKILL and the pipes' drain all come first,
 * so the wait itself never decides the result. */
#define TOOLS_RUN_WAIT_SLACK_MS 60000

/* ---------------------------------------------------------------------- */
/* Options and arguments                                                   */

/* every field of this library's structs at its default. */
static void options_defaults(uvt_tools_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->size = sizeof(*o);
}

static void args_defaults(uvt_tools_args_t *a) {
  memset(a, 0, sizeof(*a));
  a->size = sizeof(*a);
  a->wait = -1;
  a->timeout_ms = -1;
  a->max_bytes = -1;
  a->yield_ms = -1;
  a->stdin_pipe = -1;
  a->tty = -1;
  a->chars_len = (size_t)-1;
  a->close_stdin = -1;
  a->merge_stderr = -1;
  a->stdin_text_len = (size_t)-1;
  a->memory_mb = -1;
  a->max_processes = -1;
  a->cpu_percent = -1;
  a->head_lines = -1;
  a->tail_lines = -1;
}

void uvt_tools_options_init_size(uvt_tools_options_t *o, size_t size) {
  uvt_tools_options_t d;
  options_defaults(&d);
  uvt__opts_init(o, size, &d, sizeof(d));
}

void uvt_tools_args_init_size(uvt_tools_args_t *a, size_t size) {
  uvt_tools_args_t d;
  args_defaults(&d);
  uvt__opts_init(a, size, &d, sizeof(d));
}

/* The exported symbols of the old names (the header's macros hide them). */
void(uvt_tools_options_init)(uvt_tools_options_t *o) {
  uvt_tools_options_init_size(o, sizeof(*o));
}

void(uvt_tools_args_init)(uvt_tools_args_t *a) {
  uvt_tools_args_init_size(a, sizeof(*a));
}

void uvt_tools_call_cleanup(uvt_tools_call_t *req) {
  if (req == NULL)
    return;
  uvt__tools_free(req->text);
  req->text = NULL;
  req->len = 0;
  req->is_error = 0;
  req->task_id_[0] = '\0';
}

const char *uvt_tools_call_task(const uvt_tools_call_t *req) {
  if (req == NULL || req->tool_ != TOOL_RUN_COMMAND || req->task_id_[0] == 0)
    return NULL;
  return req->task_id_;
}

static char *tools_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = uvt__tools_malloc(n);
  if (p != NULL)
    memcpy(p, s, n);
  return p;
}

/* ---------------------------------------------------------------------- */
/* Texts                                                                   */

/* S-5: the places a sandboxed command may write, for a refused cwd. */
static void text_workspace(uvt__text_t *t, const uvt_sandbox_t *sb) {
  const char *const *w;

  uvt__text_str(t, "the workspace ");
  uvt__text_oneline(t, sb->workspace, 1024);
  for (w = sb->writable; w != NULL && *w != NULL; w++) {
    uvt__text_str(t, w[1] != NULL ? ", " : " or ");
    uvt__text_oneline(t, *w, 1024);
  }
}

/* Why a command did not start (`limits`: those it was started with; `sb`:
 * the sandbox it was to run in, or NULL). */
static void text_start_error(uvt__text_t *t, int err, const char *cwd,
                             uvt_registry_t *registry,
                             const uvt_process_limits_t *limits,
                             const uvt_sandbox_t *sb) {
  char why[512];

  uvt__text_str(t, "Not started: ");
  if (err == UVT_ELIMIT) {
    uvt__text_str(t, "you already have the most running tasks allowed. "
                     "Wait for one to end or stop one with task_kill.");
  } else if (err == UVT_ECLOSING) {
    uvt__text_str(t, "the task service is shutting down.");
  } else if (err == UVT_ESTALE) {
    uvt__text_str(t, "the caller is not a registered agent.");
  } else if (err == UV_ENOENT && cwd != NULL) {
    uvt__text_str(t, "no such directory or no shell (cwd ");
    uvt__text_oneline(t, cwd, 1024);
    uvt__text_str(t, ").");
  } else if (err == UV_EPERM && sb != NULL && sb->workspace != NULL) {
    /* S-5: the workspace is the host's choice; a cwd outside it is not
     * a way to write elsewhere. */
    uvt__text_str(t, "the cwd ");
    uvt__text_oneline(t, cwd != NULL ? cwd : ".", 1024);
    uvt__text_str(t, " lies outside this server's sandbox: commands run "
                     "inside ");
    text_workspace(t, sb);
    uvt__text_str(t, ". Give a cwd inside it (or none), or cd inside the "
                     "command; nothing was run.");
  } else if (err == UV_E2BIG) {
    uvt__text_str(t, "the command is too long.");
  } else if (err == UV_ENOTSUP && limits != NULL &&
             uvt_process_limits_check(registry, limits, why, sizeof(why)) ==
                 UV_ENOTSUP) {
    /* L-LIM-1: never run without the limits asked for. */
    uvt__text_str(t, "the limits for this command cannot be enforced on "
                     "this machine, so nothing was run: ");
    uvt__text_oneline(t, why, sizeof(why));
    uvt__text_str(t, ".");
  } else if (err == UV_ENOTSUP) {
    /* S-3, S-4: never run without the sandbox the server was given;
     * M-TOOLS-18: and say why, here, not only in the server's log. */
    uvt__text_str(t, "the sandbox this server runs commands in cannot be "
                     "made on this machine, so nothing was run");
    if (uvt_process_sandbox_why(registry, why, sizeof(why)) == 0 &&
        why[0] != '\0') {
      uvt__text_str(t, ": ");
      uvt__text_oneline(t, why, sizeof(why));
    }
    uvt__text_str(t, ".");
  } else {
    uvt__text_printf(t, "%s (%s).", uvt_strerror(err), uvt_err_name(err));
  }
}

/* Process options for a command of `req` (run_in_background, run_command).
 * A relative cwd argument is relative to the tools' cwd (the directory
 * commands run in), not to the host process's own: `dir` holds the join
 * and must live until the start. */
static void tools_process_options(uvt_tools_call_t *req,
                                  const uvt_tools_args_t *args,
                                  uvt_process_options_t *po,
                                  char dir[PATH_MAX]) {
  uvt_tools_t *tools = req->tools;

  uvt_process_options_init(po);
  po->command = args->command;
  po->cwd = args->cwd != NULL ? args->cwd : tools->cwd_;
  if (args->cwd != NULL && args->cwd[0] != '/' && tools->cwd_ != NULL &&
      (size_t)snprintf(dir, PATH_MAX, "%s/%s", tools->cwd_, args->cwd) <
          PATH_MAX)
    po->cwd = dir;
  po->owner = req->caller_;
  po->env = tools->env_; /* M-MCP-14: what the host passes through */
  if (tools->output_cap_bytes_ > 0)
    po->output_cap_bytes = tools->output_cap_bytes_;
  if (tools->grace_ms_ > 0)
    po->grace_ms = tools->grace_ms_;
  po->sandbox = tools->sandbox_; /* S-4 */
  /* M-TOOLS-15: a result after the cap dropped bytes still shows the true
   * beginning. */
  po->keep_head_bytes = UVT_TOOLS_HEAD_BYTES;
  /* M-TOOLS-17: every byte is counted (line numbers, ranges), and kept
   * in the spill files when there is a directory. */
  po->on_tee = uvt__spill_tee_cb;
  po->on_tee_data = tools;
  /* M-TOOLS-12: stderr in stdout's stream, in the order written. */
  po->merge_stderr = args->merge_stderr == 1;
  po->limits = tools->limits_; /* L-LIM-3: the host's */
}

/* L-LIM-3: the call's own limits, each at most the host's (a limit is the
 * host's choice: the model can only lower it).  0, or -1 after answering
 * with a tool error naming the limit. */
static int tools_limits(uvt_tools_call_t *req, const uvt_tools_args_t *args,
                        uvt_process_options_t *po) {
  const uvt_process_limits_t *host = &req->tools->limits_;
  uvt__text_t t;

  uvt__text_init(&t);
  if (args->memory_mb == 0 || args->memory_mb < -1 ||
      args->max_processes == 0 || args->max_processes < -1 ||
      args->cpu_percent == 0 || args->cpu_percent < -1) {
    uvt__text_str(&t, "memory_mb, max_processes and cpu_percent must be "
                      "positive whole numbers.");
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  if (args->memory_mb > 0) {
    uint64_t mb = (uint64_t)args->memory_mb;
    if ((host->memory_bytes > 0 && mb > host->memory_bytes / (1024 * 1024)) ||
        mb > UINT64_MAX / (1024 * 1024)) {
      uvt__text_printf(&t,
                       "memory_mb %llu is above this server's memory limit "
                       "of %llu MiB; ask for at most that.",
                       (unsigned long long)mb,
                       (unsigned long long)(host->memory_bytes >> 20));
      uvt__tools_result(req, &t, 1);
      return -1;
    }
    po->limits.memory_bytes = mb * 1024 * 1024;
  }
  if (args->max_processes > 0) {
    if ((host->max_processes > 0 &&
         (uint64_t)args->max_processes > host->max_processes) ||
        args->max_processes > (int64_t)UINT32_MAX) {
      uvt__text_printf(&t,
                       "max_processes %lld is above this server's limit of "
                       "%u processes; ask for at most that.",
                       (long long)args->max_processes,
                       (unsigned)host->max_processes);
      uvt__tools_result(req, &t, 1);
      return -1;
    }
    po->limits.max_processes = (uint32_t)args->max_processes;
  }
  if (args->cpu_percent > 0) {
    if ((host->cpu_percent > 0 &&
         (uint64_t)args->cpu_percent > host->cpu_percent) ||
        args->cpu_percent > UVT_PROCESS_CPU_PERCENT_MAX) {
      uvt__text_printf(&t,
                       "cpu_percent %lld is above this server's CPU limit of "
                       "%u%% of a core; ask for at most that.",
                       (long long)args->cpu_percent,
                       host->cpu_percent > 0 ? (unsigned)host->cpu_percent
                                             : UVT_PROCESS_CPU_PERCENT_MAX);
      uvt__tools_result(req, &t, 1);
      return -1;
    }
    po->limits.cpu_percent = (uint32_t)args->cpu_percent;
  }
  return 0;
}

/* ---------------------------------------------------------------------- */
/* The tools                                                               */

void uvt__tool_run_in_background(uvt_tools_call_t *req,
                                 const uvt_tools_args_t *args) {
  uvt_process_options_t po;
  char cwd_dir[PATH_MAX];
  uvt__text_t t;
  char id[UVT_ID_MAX];
  int err;

  uvt__text_init(&t);
  if (args->command == NULL ||
      args->command[strspn(args->command, " \t\n\r")] == '\0') {
    uvt__text_str(&t, "run_in_background needs a command (a string with "
                      "more than white space).");
    uvt__tools_result(req, &t, 1);
    return;
  }
  tools_process_options(req, args, &po, cwd_dir);
  if (tools_limits(req, args, &po) != 0)
    return;
  po.label = args->label != NULL && args->label[0] != '\0' ? args->label : NULL;
  /* M-TOOLS-5: a terminal is also the stdin, so tty wins over stdin. */
  po.pty = args->tty == 1;
  po.stdin_pipe = args->stdin_pipe == 1 && !po.pty;
  /* D-7: outlives the server, unless on a terminal; its limits and
   * their cgroup go on with it (L-LIM-3). */
  po.durable = req->tools->durable_ && !po.pty;

  err = uvt_process_start(req->tools->registry, &po, id);
  if (err == 0)
    uvt__spill_owner(req->tools, id, req->caller_);
  if (err == 0) {
    /* M-TOOLS-11: a terminal's screen, kept from its first byte. */
    if (po.pty)
      uvt__screen_add(req->tools, id, UVT_PROCESS_PTY_ROWS,
                      UVT_PROCESS_PTY_COLS);
    uvt__text_printf(&t, "Started %s.", id);
    if (po.pty)
      uvt__text_str(&t, " It runs on a terminal: write_stdin types into it "
                        "(end a line with \"\\n\" or \"\\r\"; \"\\u0003\" is "
                        "Ctrl-C, \"\\u0004\" is Ctrl-D; close_stdin sends a "
                        "last Ctrl-D and ends the input for good).");
    else if (po.stdin_pipe)
      uvt__text_str(&t, " Its stdin is open: write_stdin sends it input "
                        "(close_stdin ends it).");
    if (req->tools->durable_ && !po.durable)
      uvt__text_str(&t, " It is on a terminal, so it ends with this "
                        "server.");
    uvt__text_str(&t, "\n[status: running]");
    uvt__tools_result(req, &t, 0);
    return;
  }
  text_start_error(&t, err, po.cwd, req->tools->registry, &po.limits,
                   po.sandbox);
  uvt__tools_result(req, &t, 1);
}

void uvt__tool_task_output(uvt_tools_call_t *req,
                           const uvt_tools_args_t *args) {
  uvt_tools_t *tools = req->tools;
  uvt__text_t t;
  uint64_t timeout_ms;
  int wait;
  int err;

  uvt__text_init(&t);
  if (uvt__tools_need_id(req, args, UVT_TOOL_TASK_OUTPUT) != 0)
    return;
  if (uvt__tools_max_bytes(req, args) != 0)
    return;
  if (uvt__tools_view(req, args) != 0)
    return;
  /* An explicit wait wins; otherwise a timeout_ms asks for a wait. */
  wait = args->wait >= 0 ? args->wait != 0 : args->timeout_ms >= 0;
  if (!wait) {
    uvt__tools_read_result(req, args->task_id, 0, NULL);
    return;
  }
  /* M-TOOLS-1: default 30 s, capped at 600 s. */
  if (uvt__tools_timeout(req, args, UVT_TOOLS_WAIT_DEFAULT_MS,
                         UVT_TOOLS_WAIT_MAX_MS, &timeout_ms) != 0)
    return;
  timeout_ms = uvt__tools_wait_yield(tools, timeout_ms);

  if (strlen(args->task_id) >= UVT_ID_MAX) {
    uvt__tools_task_error(&t, "wait for", args->task_id, UVT_ENOTASK);
    uvt__tools_result(req, &t, 1);
    return;
  }
  strcpy(req->task_id_, args->task_id);
  req->timeout_ms_ = timeout_ms;
  req->wait_.data = req;
  err = uvt_wait(tools->registry, &req->wait_, req->task_id_, timeout_ms,
                 req->caller_, uvt__tools_wait_cb);
  if (err != 0) {
    uvt__tools_task_error(&t, "wait for", req->task_id_, err);
    uvt__tools_result(req, &t, 1);
    return;
  }
  uvt__tools_link_waiting(req);
}

void uvt__tool_run_command(uvt_tools_call_t *req,
                           const uvt_tools_args_t *args) {
  uvt_tools_t *tools = req->tools;
  uvt_process_options_t po;
  char cwd_dir[PATH_MAX];
  uvt__text_t t;
  uint64_t runtime_ms;
  uint64_t grace_ms;
  uint64_t wait_ms;
  uint64_t yield_ms;
  int err;

  uvt__text_init(&t);
  if (args->command == NULL ||
      args->command[strspn(args->command, " \t\n\r")] == '\0') {
    uvt__text_str(&t, "run_command needs a command (a string with more than white "
                      "space).");
    uvt__tools_result(req, &t, 1);
    return;
  }
  if (uvt__tools_timeout(req, args, UVT_TOOLS_RUN_DEFAULT_MS,
                         UVT_TOOLS_RUN_MAX_MS, &runtime_ms) != 0)
    return;
  if (uvt__tools_max_bytes(req, args) != 0)
    return;
  if (uvt__tools_view(req, args) != 0)
    return;
  if (args->yield_ms < -1) {
    uvt__text_str(&t, "yield_ms must be 0 (wait for the end) or a positive "
                      "number of milliseconds.");
    uvt__tools_result(req, &t, 1);
    return;
  }
  yield_ms = args->yield_ms < 0 ? tools->yield_ms_ : (uint64_t)args->yield_ms;

  tools_process_options(req, args, &po, cwd_dir);
  if (tools_limits(req, args, &po) != 0)
    return;
  po.max_runtime_ms = runtime_ms;
  /* M-TOOLS-13: these bytes, then end of file. */
  if (args->stdin_text != NULL) {
    po.stdin_data = args->stdin_text;
    po.stdin_len = args->stdin_text_len == (size_t)-1 ? strlen(args->stdin_text)
                                                      : args->stdin_text_len;
  }
  req->runtime_ms_ = runtime_ms;
  req->started_ns_ = uv_hrtime();
  err = uvt_process_start(tools->registry, &po, req->task_id_);
  if (err == 0)
    uvt__spill_owner(tools, req->task_id_, req->caller_);
  if (err != 0) {
    req->task_id_[0] = '\0';
    text_start_error(&t, err, po.cwd, req->tools->registry, &po.limits,
                     po.sandbox);
    uvt__tools_result(req, &t, 1);
    return;
  }
  grace_ms = po.grace_ms > 0 ? po.grace_ms : UVT_PROCESS_GRACE_MS;
  wait_ms =
      runtime_ms + grace_ms + UVT_PROCESS_DRAIN_MS + TOOLS_RUN_WAIT_SLACK_MS;
  /* M-TOOLS-6: with a yield shorter than that, the wait is the yield. */
  req->yields_ = yield_ms > 0 && yield_ms < wait_ms;
  req->timeout_ms_ = req->yields_ ? yield_ms : wait_ms;
  req->wait_.data = req;
  err = uvt_wait(tools->registry, &req->wait_, req->task_id_, req->timeout_ms_,
                 req->caller_, uvt__tools_wait_cb);
  if (err != 0) {
    /* Nobody would wait for it: it must not run unattended. */
    uvt_kill(tools->registry, req->task_id_, req->caller_,
             "run_command could not wait", NULL);
    uvt__tools_task_error(&t, "wait for", req->task_id_, err);
    uvt__tools_result(req, &t, 1);
    return;
  }
  uvt__tools_link_waiting(req);
}

void uvt__tool_task_list(uvt_tools_call_t *req, const uvt_tools_args_t *args) {
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  size_t i;
  uvt__text_t t;
  int err;

  uvt__text_init(&t);
  err = uvt_list(req->tools->registry, req->caller_, &snaps, &n);
  if (err != 0) {
    uvt__text_printf(&t, "Could not list tasks: %s (%s).", uvt_strerror(err),
                     uvt_err_name(err));
    uvt__tools_result(req, &t, 1);
    return;
  }
  if (n == 0) {
    uvt__text_str(&t, "No background tasks.");
    uvt__tools_result(req, &t, 0);
    return;
  }
  uvt__text_printf(&t, "%zu task%s (id, kind, status, label):", n,
                   n == 1 ? "" : "s");
  for (i = 0; i < n; i++) {
    uvt__text_str(&t, "\n");
    uvt__text_oneline(&t, snaps[i].id, UVT_ID_MAX);
    uvt__text_str(&t, "  ");
    uvt__text_oneline(&t, snaps[i].kind, UVT_ID_MAX);
    uvt__text_str(&t, "  ");
    uvt__text_str(&t, uvt_status_name(snaps[i].status));
    if (snaps[i].detail != NULL && snaps[i].detail[0] != '\0') {
      uvt__text_str(&t, " (");
      uvt__tools_detail(req->tools, req->caller_, &t, &snaps[i],
                        UVT__DETAIL_LIVE, 200);
      uvt__text_str(&t, ")");
    }
    uvt__text_str(&t, "  ");
    uvt__text_oneline(&t, snaps[i].label, TOOLS_LABEL_MAX);
  }
  uvt_snapshots_free(snaps, n);
  uvt__tools_result(req, &t, 0);
}

void uvt__tool_task_kill(uvt_tools_call_t *req, const uvt_tools_args_t *args) {
  uvt_registry_t *reg = req->tools->registry;
  uvt_kill_result_t res = UVT_KILL_REQUESTED;
  uvt_snapshot_t snap;
  uvt__text_t t;
  int left = 0;
  int err;

  uvt__text_init(&t);
  if (uvt__tools_need_id(req, args, UVT_TOOL_TASK_KILL) != 0)
    return;
  if (args->signal != NULL) {
    uvt__tool_task_signal(req, args); /* M-TOOLS-14 */
    return;
  }
  /* P-KILL-6: a kill of an ended task stops what it left running; count
   * it first so the answer can say what the kill stops.  Only an ended
   * task is counted (a pass over /proc), and only a process task has a
   * count. */
  memset(&snap, 0, sizeof(snap));
  if (uvt_get(reg, args->task_id, req->caller_, &snap) == 0) {
    if (uvt_status_is_terminal(snap.status))
      left = uvt_process_leftovers(reg, args->task_id, req->caller_);
    uvt_snapshot_cleanup(&snap);
  }
  err = uvt_kill(reg, args->task_id, req->caller_,
                 args->reason != NULL && args->reason[0] != '\0' ? args->reason
                                                                 : NULL,
                 &res);
  if (err != 0) {
    uvt__tools_task_error(&t, "stop", args->task_id, err);
    uvt__tools_result(req, &t, 1);
    return;
  }
  if (res == UVT_KILL_REQUESTED)
    uvt__text_printf(&t,
                     "Stop of %s requested; task_output with wait shows "
                     "when it has ended.\n",
                     args->task_id);
  else if (left > 0)
    uvt__text_printf(&t,
                     "%s had already ended; stopping the %d process%s it "
                     "left running.\n",
                     args->task_id, left, left == 1 ? "" : "es");
  else
    uvt__text_printf(&t, "%s had already ended.\n", args->task_id);

  /* The status line comes from a get, so no output is consumed. */
  memset(&snap, 0, sizeof(snap));
  err = uvt_get(reg, args->task_id, req->caller_, &snap);
  if (err == 0) {
    uvt__tools_status(req->tools, req->caller_, &t, &snap,
                      UVT__DETAIL_WITHOUT_COUNT);
    uvt_snapshot_cleanup(&snap);
  } else {
    uvt__text_str(&t, res == UVT_KILL_REQUESTED ? "[status: stopping]"
                                                : "[status: unknown]");
  }
  uvt__tools_result(req, &t, 0);
}

/* ---------------------------------------------------------------------- */
/* Attach, detach, call                                                    */

/* Is the directory open at `dirfd` the directory `root`, or inside it?
 * Walked up by "..", compared by device and inode: no path is resolved
 * (links and bind mounts compare as what they are). */
static int dir_within(int dirfd, const char *root) {
  struct stat rs;
  struct stat cur;
  struct stat up;
  int fd;
  int next;
  int depth;
  int found = 0;

  if (stat(root, &rs) != 0)
    return 0;
  fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  for (depth = 0; fd >= 0 && depth < 4096; depth++) {
    if (fstat(fd, &cur) != 0)
      break;
    if (cur.st_dev == rs.st_dev && cur.st_ino == rs.st_ino) {
      found = 1;
      break;
    }
    next = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (next < 0 || fstat(next, &up) != 0 ||
        (up.st_dev == cur.st_dev && up.st_ino == cur.st_ino)) {
      if (next >= 0)
        close(next);
      break; /* the root */
    }
    close(fd);
    fd = next;
  }
  if (fd >= 0)
    close(fd);
  return found;
}

/* S-7: could a task of sandbox `sb` write the spill directory open at
 * `dirfd` (one of its writable places, or, in the workspace profile, its
 * workspace, is that directory or holds it, and no read-only path of it
 * does)?  Without a sandbox, no wall to keep: 0. */
static int tools_sandbox_writes(const uvt_sandbox_t *sb, const char *cwd,
                                int dirfd) {
  const char *const *p;

  if (sb == NULL || dirfd < 0)
    return 0;
  /* Read-only wins over a writable place around it (S-5's readonly[]):
   * uvtasks-mcp's default spill directory, in the workspace. */
  for (p = sb->readonly; p != NULL && *p != NULL; p++)
    if (dir_within(dirfd, *p))
      return 0;
  for (p = sb->writable; p != NULL && *p != NULL; p++)
    if (dir_within(dirfd, *p))
      return 1;
  return sb->fs == UVT_SANDBOX_FS_WORKSPACE &&
         dir_within(dirfd, sb->workspace != NULL ? sb->workspace
                           : cwd != NULL         ? cwd
                                                 : ".");
}

int uvt_tools_attach(uvt_registry_t *reg, uvt_tools_t *tools,
                     const uvt_tools_options_t *o) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_tools_options_t own;
  char why[UVT__OPTS_WHY];
  const char *name;
  int err;

  if (reg == NULL || tools == NULL)
    return UV_EINVAL;
  /* the caller's first o->size bytes over the defaults, once; from
   * here on only the copy is read. */
  options_defaults(&own);
  if (o != NULL &&
      uvt__opts_load(&own, sizeof(own), o,
                     UVT__OPTS_MIN(uvt_tools_options_t, notice_cb), why) != 0) {
    uvt_log(reg, UVT_LOG_ERROR,
            "uvt_tools_attach: options refused: %s; call "
            "uvt_tools_options_init()",
            why);
    return UV_EINVAL;
  }
  o = &own;
  void *data = tools->data; /* the host's, as libuv leaves `data` alone */
  memset(tools, 0, sizeof(*tools));
  tools->data = data;
  uvt__list_init(&tools->ready_);
  uvt__list_init(&tools->waiting_);
  uvt__list_init(&tools->carries_);
  uvt__list_init(&tools->spills_);
  uvt__list_init(&tools->screens_);
  tools->registry = reg;
  tools->notice_cb_ = o->notice_cb;
  tools->output_cap_bytes_ = o->output_cap_bytes;
  tools->grace_ms_ = o->grace_ms;
  tools->max_bytes_ =
      o->max_bytes == 0 ? UVT_TOOLS_MAX_BYTES_DEFAULT : o->max_bytes;
  if (tools->max_bytes_ < UVT_TOOLS_MAX_BYTES_MIN)
    tools->max_bytes_ = UVT_TOOLS_MAX_BYTES_MIN;
  tools->yield_ms_ = o->yield_ms;
  tools->sandbox_ = o->sandbox;
  tools->limits_ = o->limits; /* L-LIM-3 */
  if (o->sandbox != NULL && o->sandbox->workspace == NULL) {
    /* S-5: the workspace is the host's, fixed now; a call's cwd never
     * widens it. */
    char real[PATH_MAX];
    if (realpath(o->cwd != NULL ? o->cwd : ".", real) == NULL)
      return uv_translate_sys_error(errno);
    tools->workspace_ = tools_strdup(real);
    if (tools->workspace_ == NULL)
      return UV_ENOMEM;
    tools->sandbox_own_ = *o->sandbox;
    tools->sandbox_own_.workspace = tools->workspace_;
    tools->sandbox_ = &tools->sandbox_own_;
  }
  tools->durable_ = o->durable != 0; /* D-7 */
  tools->env_ = o->env;
  tools->max_lines_ =
      o->max_lines == 0 ? UVT_TOOLS_MAX_LINES_DEFAULT : o->max_lines;
  if (tools->max_lines_ < UVT_TOOLS_MAX_LINES_MIN)
    tools->max_lines_ = UVT_TOOLS_MAX_LINES_MIN;
  if (o->cwd != NULL) {
    tools->cwd_ = tools_strdup(o->cwd);
    if (tools->cwd_ == NULL) {
      err = UV_ENOMEM;
      goto fail;
    }
  }
  tools->spill_max_bytes_ = o->spill_max_bytes == 0
                                ? UVT_TOOLS_SPILL_MAX_BYTES_DEFAULT
                                : o->spill_max_bytes;
  tools->spill_max_total_ = o->spill_max_total == 0
                                ? UVT_TOOLS_SPILL_MAX_TOTAL_DEFAULT
                                : o->spill_max_total;
  tools->keep_spill_ = o->keep_spill != 0;
  tools->spill_fd_ = -1;
  if (o->spill_dir != NULL) {
    err = uvt__spill_open(tools, o->spill_dir);
    /* S-7: no file the server writes on a task's behalf may lie where a
     * sandboxed task can write. */
    if (err == 0 && tools_sandbox_writes(o->sandbox, o->cwd, tools->spill_fd_))
      err = UV_EACCES;
    if (err == 0) {
      tools->spill_dir_ = tools_strdup(o->spill_dir);
      if (tools->spill_dir_ == NULL)
        err = UV_ENOMEM;
    }
    if (err != 0)
      goto fail;
  }
  name = o->surface_name != NULL ? o->surface_name : UVT_TOOLS_SURFACE_NAME;
  err = uvt_surface_attach(reg, &tools->surface_, name);
  if (err != 0)
    goto fail;
  tools->listener_.data = tools;
  err = uvt_listener_start(reg, &tools->listener_, uvt__tools_done_cb);
  if (err != 0) {
    uvt_surface_detach(&tools->surface_);
    goto fail;
  }
  /* uv_idle_init cannot fail; it comes last so no failure above leaves a
   * handle to close. */
  err = uv_idle_init(uvt_registry_loop(reg), &tools->idle_);
  if (err != 0) {
    uvt_listener_stop(&tools->listener_);
    uvt_surface_detach(&tools->surface_);
    goto fail;
  }
  tools->idle_.data = tools;
  /* Cannot fail either. */
  uv_timer_init(uvt_registry_loop(reg), &tools->quiet_);
  tools->quiet_.data = tools;
  tools->state_ = TOOLS_ATTACHED;
  return 0;

fail:
  uvt__tools_free(tools->cwd_);
  tools->cwd_ = NULL;
  uvt__tools_free(tools->workspace_);
  tools->workspace_ = NULL;
  uvt__tools_free(tools->spill_dir_);
  tools->spill_dir_ = NULL;
  if (tools->spill_fd_ >= 0)
    close(tools->spill_fd_);
  tools->spill_fd_ = -1;
  tools->registry = NULL;
  return err;
}

/* Stop the wait (or, for task_wait, the waits) of a call. */
static void tools_wait_abort(uvt_tools_call_t *req) {
  if (req->tool_ == TOOL_TASK_WAIT)
    uvt__tool_task_wait_abort(req);
  else
    uvt_wait_abort(&req->wait_);
}

int uvt_tools_detach(uvt_tools_t *tools, uvt_tools_detach_cb cb) {
  uvt_tools_call_t *req;
  struct uvt__link *n, *next;

  if (tools == NULL)
    return UV_EINVAL;
  if (tools->state_ == TOOLS_DETACHING)
    return UVT_ECLOSING;
  if (tools->state_ != TOOLS_ATTACHED)
    return UV_EINVAL;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY(tools->registry);
  tools->state_ = TOOLS_DETACHING;
  tools->detach_cb_ = cb;
  uvt_listener_stop(&tools->listener_);
  uvt_surface_detach(&tools->surface_);
  /* No read comes after this: the kept filter states go. */
  uvt__tools_output_free(tools);
  /* Stop the waits; their callbacks come back through uvt__tools_wait_cb. */
  for (n = tools->waiting_.next; n != &tools->waiting_; n = next) {
    next = n->next;
    req = uvt__container_of(n, uvt_tools_call_t, link_);
    req->aborted_ = ABORT_DETACH;
    tools_wait_abort(req);
  }
  /* Nothing pending: close now; the close callback keeps us out of this
   * call.  Otherwise the last delivery closes. */
  uvt__tools_finish_detach(tools);
  return 0;
}

/* The dispatch: the function that runs each tool, by the name its row in
 * schema.c gives.  Here, not in the rows, so that the rows (names and
 * schemas) call nothing and the tools in other files (wait.c, write.c,
 * screen's taskscreen.c) need nothing of this file. */
typedef void (*tools_run_fn)(uvt_tools_call_t *req,
                             const uvt_tools_args_t *args);

static const struct {
  const char *name;
  tools_run_fn run;
} tools_runs[] = {
    {UVT_TOOL_RUN_IN_BACKGROUND, uvt__tool_run_in_background},
    {UVT_TOOL_RUN_COMMAND, uvt__tool_run_command},
    {UVT_TOOL_TASK_OUTPUT, uvt__tool_task_output},
    {UVT_TOOL_TASK_LIST, uvt__tool_task_list},
    {UVT_TOOL_TASK_KILL, uvt__tool_task_kill},
    {UVT_TOOL_WRITE_STDIN, uvt__tool_write_stdin},
    {UVT_TOOL_TASK_WAIT, uvt__tool_task_wait},
    {UVT_TOOL_TASK_SCREEN, uvt__tool_task_screen},
};

static tools_run_fn tools_run(const char *name) {
  size_t i;

  for (i = 0; i < sizeof(tools_runs) / sizeof(tools_runs[0]); i++)
    if (strcmp(name, tools_runs[i].name) == 0)
      return tools_runs[i].run;
  return NULL;
}

int uvt_tools_call(uvt_tools_t *tools, uvt_tools_call_t *req,
                   uvt_agent_t *caller, const char *name,
                   const uvt_tools_args_t *args, uvt_tools_call_cb cb) {
  const uvt__tool_def_t *def;
  tools_run_fn run;
  uvt_tools_args_t own;
  char why[UVT__OPTS_WHY];

  if (tools == NULL || req == NULL || name == NULL || cb == NULL)
    return UV_EINVAL;
  if (tools->state_ != TOOLS_ATTACHED)
    return tools->state_ == TOOLS_DETACHING ? UVT_ECLOSING : UV_EINVAL;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY(tools->registry);
  def = uvt__tool_find(name);
  run = def != NULL ? tools_run(def->name) : NULL;
  if (run == NULL)
    return UV_ENOENT;
  /* the caller's first args->size bytes over "nothing given", once;
   * from here on only the copy is read. */
  args_defaults(&own);
  if (args != NULL &&
      uvt__opts_load(&own, sizeof(own), args,
                     UVT__OPTS_MIN(uvt_tools_args_t, command), why) != 0) {
    uvt_log(tools->registry, UVT_LOG_ERROR,
            "uvt_tools_call: arguments refused: %s; call "
            "uvt_tools_args_init()",
            why);
    return UV_EINVAL;
  }
  args = &own;
  req->tools = tools;
  req->text = NULL;
  req->len = 0;
  req->is_error = 0;
  req->cb_ = cb;
  uvt__list_init(&req->link_);
  req->caller_ = caller;
  req->task_id_[0] = '\0';
  req->timeout_ms_ = 0;
  req->started_ns_ = 0;
  req->max_bytes_ = tools->max_bytes_;
  req->yields_ = 0;
  req->state_ = CALL_IDLE;
  req->status_ = 0;
  req->aborted_ = ABORT_NONE;
  req->tool_ = TOOL_OTHER;
  req->multi_ = NULL;
  req->head_lines_ = -1;
  req->tail_lines_ = -1;
  req->match_ = NULL;
  tools->pending_++;

  /* The tool's row (schema.c) says what kind of call it is; the
   * dispatch, which function runs it. */
  req->tool_ = def->kind;
  run(req, args);
  return 0;
}

int uvt_tools_call_abort(uvt_tools_call_t *req) {
  if (req == NULL)
    return UV_EINVAL;
  if (req->state_ == CALL_READY)
    return 0; /* the work is done; the result stands */
  if (req->state_ != CALL_WAITING)
    return UV_EINVAL;
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(req != NULL && req->tools != NULL ? req->tools->registry
                                                  : NULL);
  if (req->aborted_ == ABORT_NONE) {
    req->aborted_ = ABORT_CALLER;
    /* run_command runs in the foreground: a call given up stops it (the
     * kill marks it reported, so no notice follows). */
    if (req->tool_ == TOOL_RUN_COMMAND)
      uvt_kill(req->tools->registry, req->task_id_, req->caller_,
               "call cancelled", NULL);
    /* UV_EINVAL here means the wait's callback is already due; it will
     * see aborted_ and end the call as aborted. */
    tools_wait_abort(req);
  }
  return 0;
}
