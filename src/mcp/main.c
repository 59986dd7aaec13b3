/* uvtasks-mcp: options, start-up and the orderly exit (M-MCP-4). */
#include "mcp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uvtasks/process.h"

static const char usage[] =
    "Usage: uvtasks-mcp [OPTIONS]\n"
    "\n"
    "A Model Context Protocol server over stdio (JSON-RPC 2.0, one message\n"
    "per line) offering background shell tasks to a model: the tools\n"
    "run_in_background, run_command, task_output, task_list, task_kill,\n"
    "write_stdin, task_wait and task_screen (and submit_job and\n"
    "cluster_info with --slurm).\n"
    "With protocol revision 2025-11-25 a client may also run run_command as\n"
    "an MCP task (tools/call with params.task; tasks/get, tasks/result,\n"
    "tasks/list, tasks/cancel; notifications/tasks/status), and with\n"
    "2026-07-28 through the io.modelcontextprotocol/tasks extension.\n"
    "\n";
/* The options, apart: one string literal may hold at most 4095 bytes in
 * ISO C. */
static const char usage_options[] =
    "Options:\n"
    "  --cwd DIR            directory commands run in (default: the current)\n"
    "  --output-cap BYTES   unread output kept per stream of a task\n"
    "                       (default 1048576)\n"
    "  --max-tasks N        running tasks the client may hold at once\n"
    "                       (default 0 = no limit)\n"
    "  --grace-ms MS        SIGTERM -> SIGKILL delay when a task is stopped\n"
    "                       (default 3000)\n"
    "  --keep-finished N    ended tasks kept, read or not; older ones\n"
    "                       are forgotten (default 100)\n"
    "  --max-task-ttl-ms MS longest ttl granted to an MCP task, and the ttl\n"
    "                       of one whose request names none (default\n"
    "                       3600000); when it runs out the task is unknown,\n"
    "                       its command stopped if still running\n"
    "  --tasks-page-size N  MCP tasks per tasks/list page (default 50)\n"
    "  --shutdown-grace-ms MS  at shutdown, SIGTERM -> SIGKILL delay for\n"
    "                       every task (default 800)\n"
    "  --yield-ms MS        run_command's time in the foreground before it\n"
    "                       goes on in the background (default 45000, below\n"
    "                       the SDK's 60 s request timeout; 0 = to the end)\n"
    "  --max-bytes N        output bytes one tool result shows (default\n"
    "                       10000, at least 256)\n"
    "  --max-lines N        output lines one tool result shows (default\n"
    "                       1000, at least 10)\n"
    "  --spill-dir DIR      keep each task's whole output in DIR/<task>.log\n"
    "                       and DIR/<task>.stderr.log (DIR: yours, mode\n"
    "                       0700; made if missing); default: the\n"
    "                       workspace's .uvtasks/spill/<pid> (read-only\n"
    "                       to sandboxed tasks), else under $TMPDIR\n"
    "  --no-spill           keep no files of output\n"
    "  --spill-max-bytes N  the most bytes one file holds (default 67108864)\n"
    "  --spill-max-total N  the most bytes all files hold; past it the oldest\n"
    "                       task's go first (default 1073741824)\n"
    "  --keep-spill         leave the files when the server exits and when a\n"
    "                       task is forgotten\n"
    "  --no-guardian        do not fork the guardian that stops every task\n"
    "                       if the server itself is killed\n";
static const char usage_options2[] =
    "  --sandbox PROFILE    run every command in a bubblewrap sandbox:\n"
    "                       off (default), read-only (writes only to /tmp,\n"
    "                       private, and --writable DIRs) or workspace\n"
    "                       (also the workspace: --cwd, fixed at start; a\n"
    "                       tool's cwd must lie inside it or a --writable\n"
    "                       DIR); no network, hidden\n"
    "                       ~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh, ~/.netrc,\n"
    "                       ~/.npmrc, ~/.docker (S-1..S-4; UVTASKS_BWRAP\n"
    "                       names the bwrap to use)\n"
    "  --allow-net          with --sandbox: keep the host's network\n"
    "  --writable DIR       with --sandbox: DIR is writable too (repeatable)\n"
    "  --writable-git       with --sandbox: the hooks and config of the git\n"
    "                       repositories at the workspace and --writable\n"
    "                       DIRs writable too (read-only by default, S-6)\n"
    "  --pass-env NAME      pass the server's variable NAME to every task\n"
    "                       unchanged, even if the credential scrub would\n"
    "                       drop it (repeatable, at most 64)\n"
    "  --max-unread-bytes N unread output kept across all ended tasks;\n"
    "                       past it (or past --keep-finished ended tasks,\n"
    "                       read or not) the oldest ended task is forgotten\n"
    "                       and the next result says so (default 33554432)\n"
    "  --no-cgroups         no cgroup per task (S-11: by default every task\n"
    "                       gets a cgroup v2 group of its own where the\n"
    "                       host lets the server make one, so setsid and\n"
    "                       daemonised processes are stopped too; where it\n"
    "                       cannot, the server says so on stderr and stops\n"
    "                       what descends from a task instead)\n"
    "  --limit-memory SIZE  memory of every command, all its processes\n"
    "                       together (512M, 2G); past it the command is\n"
    "                       ended: \"out of memory (limit 512 MiB)\"\n"
    "  --limit-processes N  processes (and threads) of every command alive\n"
    "                       at once; a fork past it fails (EAGAIN)\n"
    "  --limit-cpu PCT      CPU of every command in percent of one core\n"
    "                       (150 = 1.5 cores); limits are defaults and\n"
    "                       ceilings a call may only lower (L-LIM-3), each\n"
    "                       enforced by a cgroup (v2, or a v1 hierarchy):\n"
    "                       where none can, the server does not start\n"
    "  --slurm              add the tools submit_job (Slurm batch jobs as\n"
    "                       tasks slurm-N; SLURM_CONF; output under\n"
    "                       $UVTASKS_SLURM_OUT, shared with the nodes)\n"
    "                       and cluster_info\n"
    "  --slurm-journal FILE with --slurm: keep the jobs in FILE; they\n"
    "                       outlive the server and a server started on the\n"
    "                       same FILE takes them back\n"
    "  --slurm-sbatch-allow NAME  with --slurm: let submit_job's sbatch_args\n"
    "                       give the sbatch option NAME (repeatable; none\n"
    "                       by default): constraint, exclusive,\n"
    "                       reservation, nodelist, exclude, mem-per-cpu,\n"
    "                       tmp, comment, nice, licenses, time-min\n";

static const char usage_options3[] =
    "  --state-dir DIR      run_in_background's tasks outlive the server\n"
    "                       (not with tty): their output, ends and a\n"
    "                       journal are kept in DIR (yours, mode 0700; made\n"
    "                       if missing), and a server started again on DIR\n"
    "                       takes them back under their ids; one server per\n"
    "                       DIR (with their --limit-* and cgroups); not\n"
    "                       with --sandbox\n"
    "  --help               show this text and exit\n"
    "  --version            show the version and exit\n"
    "\n"
    "End of input, SIGTERM, SIGINT, SIGHUP or SIGQUIT stops every task's\n"
    "process group (SIGTERM, then SIGKILL after --shutdown-grace-ms; a\n"
    "second signal, or SIGTERM after end of input, sends SIGKILL at once)\n"
    "and exits with status 0.  If the server is killed, a guardian process\n"
    "stops every task within a second.  Neither touches a --state-dir\n"
    "task: it outlives the server.  Protocol revisions 2024-10-07 to\n"
    "2025-11-25 (initialize) and 2026-07-28 (per-request _meta) are served.\n";

/* ---------------------------------------------------------------------- */
/* The orderly exit: tools, then the client's agent (its tasks stopped,
 * P-KILL-4), then the registry, then our own handles.                      */

static void on_shutdown_timer(uv_timer_t *timer);

static void on_registry_closed(void *data) {
  mcp_server_t *server = data;
  size_t i;

  server->registry_closed = 1;
  server->reg = NULL;
  /* Every task was stopped: the guardian has nothing left to do. */
  mcp_guardian_release(server);
  mcp_in_close(&server->in);
  if (server->signals_open) {
    for (i = 0; i < sizeof(server->signals) / sizeof(server->signals[0]); i++)
      uv_close((uv_handle_t *)&server->signals[i], NULL);
    server->signals_open = 0;
  }
#ifdef UVT_MCP_SLURM
  mcp_slurm_close(server); /* after the registry: E-6 */
#endif
  /* M-MCP-10: the hard limit stays armed until stdout is closed: a client
   * that holds it open and never reads would otherwise keep the pending
   * writes, and so the loop, alive for ever. */
  uv_update_time(server->loop); /* R-TIME-1 */
  server->drain_seen = server->out.drained;
  server->drain_until = uv_now(server->loop) + MCP_SHUTDOWN_DRAIN_MAX_MS;
  mcp_out_close(&server->out);
  if (!server->out.open)
    mcp_server_out_closed(server);
  else if (server->shutdown_timer_open &&
           !uv_is_active((uv_handle_t *)&server->shutdown_timer))
    uv_timer_start(&server->shutdown_timer, on_shutdown_timer,
                   MCP_SHUTDOWN_HARD_MS, 0);
}

void mcp_server_out_closed(mcp_server_t *server) {
  if (!server->registry_closed)
    return;
  if (server->shutdown_timer_open) {
    uv_close((uv_handle_t *)&server->shutdown_timer, NULL);
    server->shutdown_timer_open = 0;
  }
  mcp_guardian_close(server);
}

static void on_agent_disposed(uvt_agent_t *agent) {
  mcp_server_t *server = agent->data;

  if (uvt_registry_close(server->reg, on_registry_closed, server) != 0)
    on_registry_closed(server);
}

static void on_tools_detached(uvt_tools_t *tools) {
  mcp_server_t *server = tools->data;

  if (uvt_agent_dispose(&server->agent, on_agent_disposed) != 0)
    on_agent_disposed(&server->agent);
}

/* Kill every task of the session through the registry, which is what keeps
 * it safe (P-KILL-3: a reaped leader's pid may belong to someone else now):
 * a stopping task's second kill means "stop now", SIGKILL on its whole
 * session (R-KILL-3, P-KILL-5); an ended one has what it left running
 * stopped (P-KILL-6).  Collected first, then killed. */
static void kill_all_tasks(mcp_server_t *server) {
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  size_t i;

  if (server->reg == NULL ||
      uvt_list(server->reg, &server->agent, &snaps, &n) != 0)
    return;
  for (i = 0; i < n; i++) {
    /* E-8: journalled Slurm jobs outlive the server (E-6). */
    if (server->config.slurm_journal != NULL &&
        strcmp(snaps[i].kind, "slurm") == 0)
      continue;
    /* D-1: durable tasks outlive the server. */
    if (uvt_process_is_durable(server->reg, snaps[i].id, &server->agent) == 1)
      continue;
    uvt_kill(server->reg, snaps[i].id, &server->agent, "server shutting down",
             NULL);
  }
  uvt_snapshots_free(snaps, n);
}

void mcp_server_kill_all(mcp_server_t *server) {
  if (server->killed_all)
    return;
  server->killed_all = 1;
  fprintf(stderr, "uvtasks-mcp: SIGKILL to every task\n");
  /* Every live task's session, every group in it, spawns in flight too
   * (and, for this server's one registry, nothing else).  What ended
   * tasks left running is on its own grace (P-KILL-6); past the hard
   * limit below the server exits and the guardian stops it. */
  uvt_process_stop_all_now();
  /* A second kill of a stopping task means "stop now" (R-KILL-3). */
  kill_all_tasks(server);
}

static void on_shutdown_timer(uv_timer_t *timer) {
  mcp_server_t *server = timer->data;

  if (server->registry_closed) {
    /* M-MCP-10: every task is stopped, only answers are left.  A client
     * that reads them (slowly) gets more time, within a bound; one that
     * has read nothing since the last look loses them. */
    uv_update_time(server->loop); /* R-TIME-1 */
    if (server->out.drained != server->drain_seen &&
        uv_now(server->loop) < server->drain_until) {
      server->drain_seen = server->out.drained;
      uv_timer_start(timer, on_shutdown_timer, MCP_SHUTDOWN_HARD_MS, 0);
      return;
    }
    fprintf(stderr, "uvtasks-mcp: the client does not read; answers "
                    "dropped\n");
    if (mcp_out_abort(&server->out) != 0)
      _exit(0);
    return;
  }
  if (!server->killed_all) {
    /* M-MCP-6: the grace is over; nothing outlives the client's patience. */
    mcp_server_kill_all(server);
    uv_update_time(server->loop); /* R-TIME-1 */
    uv_timer_start(timer, on_shutdown_timer, MCP_SHUTDOWN_HARD_MS, 0);
    return;
  }
  /* Still not done long after every group got SIGKILL (a process stuck in
   * the kernel, a pipe held by something outside the session): leave now;
   * the guardian stops whatever is still recorded. */
  fprintf(stderr, "uvtasks-mcp: shutdown did not finish; exiting\n");
  _exit(0);
}

void mcp_server_shutdown(mcp_server_t *server, const char *why) {
  if (server->shutting_down)
    return;
  server->shutting_down = 1;
  fprintf(stderr, "uvtasks-mcp: %s; stopping every task\n", why);
  mcp_in_stop(&server->in);
  mcp_tasks_stop(server);
  mcp_progress_stop(server);
  mcp_guardian_stop(server);
  mcp_retention_stop(server);
  if (server->reg == NULL) {
    on_registry_closed(server);
    return;
  }
  /* M-MCP-6: whatever --grace-ms says for a single kill, the shutdown as a
   * whole is bounded: the disposal below sends SIGTERM to every session
   * (and stops what ended tasks left), and SIGKILL follows after the
   * shutdown grace. */
  if (server->shutdown_timer_open) {
    uv_update_time(server->loop); /* R-TIME-1 */
    uv_timer_start(&server->shutdown_timer, on_shutdown_timer,
                   server->config.shutdown_grace_ms, 0);
  }
  if (uvt_tools_detach(&server->tools, on_tools_detached) != 0)
    on_tools_detached(&server->tools);
}

/* ---------------------------------------------------------------------- */
/* stdin and stdout (stdio.c) call back here                               */

static void in_line(mcp_in_t *in, const char *line, size_t len) {
  mcp_rpc_line(in->data, line, len);
}

static void in_oversized(mcp_in_t *in, const char *head, size_t len) {
  mcp_rpc_oversized(in->data, head, len);
}

static void in_eof(mcp_in_t *in) {
  mcp_server_shutdown(in->data, "end of input");
}

static const mcp_in_cbs_t in_cbs = {in_line, in_oversized, in_eof};

static void out_failed(mcp_out_t *out) {
  mcp_server_out_failed(out->data);
}

static void out_closed(mcp_out_t *out) {
  mcp_server_out_closed(out->data);
}

/* M-MCP-8: a client behind on reading our answers is not read from. */
static void out_backlog(mcp_out_t *out, int full) {
  mcp_server_t *server = out->data;

  if (full)
    mcp_in_pause(&server->in);
  else
    mcp_in_resume(&server->in);
}

static const mcp_out_cbs_t out_cbs = {out_failed, out_closed, out_backlog};

static void on_out_failed(uv_timer_t *timer) {
  mcp_server_shutdown(timer->data, "output closed");
}

void mcp_server_out_failed(mcp_server_t *server) {
  if (server->shutting_down || server->out_failed)
    return;
  server->out_failed = 1;
  /* Nobody reads our answers: no request is taken from now on. */
  mcp_in_stop(&server->in);
  /* The write that failed may have been made inside any handler (a
   * request's, a tool call's callback, a watch, a timer), which goes on
   * after the write returns: the shutdown runs from the loop, after it. */
  if (server->shutdown_timer_open &&
      uv_timer_start(&server->shutdown_timer, on_out_failed, 0, 0) == 0)
    return;
  /* Before the loop runs (start-up): nothing is in a handler yet. */
  mcp_server_shutdown(server, "output closed");
}

static const char *signal_text(int signum) {
  switch (signum) {
  case SIGINT:
    return "SIGINT";
  case SIGHUP:
    return "SIGHUP";
  case SIGQUIT:
    return "SIGQUIT";
  default:
    return "SIGTERM";
  }
}

static void on_signal(uv_signal_t *sig, int signum) {
  mcp_server_t *server = sig->data;

  /* M-MCP-6: a second shutdown signal, or one after end of input (the
   * client's escalation), means now. */
  if (server->shutting_down) {
    if (!server->registry_closed)
      mcp_server_kill_all(server);
    return;
  }
  mcp_server_shutdown(server, signal_text(signum));
}

/* ---------------------------------------------------------------------- */
/* Options                                                                 */

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;

  if (s == NULL || *s < '0' || *s > '9')
    return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return -1;
  *out = (uint64_t)v;
  return 0;
}

/* Returns 0 to run, 1 to exit 0 (help, version), 2 on a usage error. */
static int parse_args(int argc, char **argv, mcp_config_t *c) {
  uint64_t v;
  int r;
  int i;

  i = 1;
  while (i < argc) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;

    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      fputs(usage_options, stdout);
      fputs(usage_options2, stdout);
      fputs(usage_options3, stdout);
      return 1;
    }
    if (strcmp(a, "--version") == 0) {
      printf("uvtasks-mcp %s\n", UVT_VERSION_STRING);
      return 1;
    }
    if (strcmp(a, "--cwd") == 0) {
      if (val == NULL)
        goto missing;
      c->cwd = val;
    } else if (strcmp(a, "--output-cap") == 0) {
      if (parse_u64(val, &v) != 0 || v < 4 || v > SIZE_MAX)
        goto bad;
      c->output_cap_bytes = (size_t)v;
    } else if (strcmp(a, "--max-tasks") == 0) {
      if (parse_u64(val, &v) != 0 || v > 1000000)
        goto bad;
      c->max_tasks = (unsigned)v;
    } else if (strcmp(a, "--keep-finished") == 0) {
      if (parse_u64(val, &v) != 0 || v > 1000000)
        goto bad;
      c->keep_finished = (size_t)v;
    } else if (strcmp(a, "--max-task-ttl-ms") == 0) {
      if (parse_u64(val, &v) != 0 || v < 1 || v > 31536000000ull)
        goto bad;
      c->max_task_ttl_ms = v;
    } else if (strcmp(a, "--tasks-page-size") == 0) {
      if (parse_u64(val, &v) != 0 || v < 1 || v > 100000)
        goto bad;
      c->tasks_page_size = (size_t)v;
    } else if (strcmp(a, "--shutdown-grace-ms") == 0) {
      if (parse_u64(val, &v) != 0 || v > 3600000)
        goto bad;
      c->shutdown_grace_ms = v;
    } else if (strcmp(a, "--yield-ms") == 0) {
      if (parse_u64(val, &v) != 0 || v > 3600000)
        goto bad;
      c->yield_ms = (int64_t)v;
    } else if (strcmp(a, "--max-bytes") == 0) {
      if (parse_u64(val, &v) != 0 || v < UVT_TOOLS_MAX_BYTES_MIN ||
          v > 100000000)
        goto bad;
      c->max_bytes = (size_t)v;
    } else if (strcmp(a, "--max-lines") == 0) { /* M-TOOLS-15 */
      /* Below the tools' floor it would be raised without a word. */
      if (parse_u64(val, &v) != 0 || v < UVT_TOOLS_MAX_LINES_MIN ||
          v > 100000000)
        goto bad;
      c->max_lines = (size_t)v;
    } else if (strcmp(a, "--spill-dir") == 0) { /* M-TOOLS-10 */
      if (val[0] == '\0')
        goto bad;
      c->spill_dir = val;
    } else if (strcmp(a, "--spill-max-bytes") == 0) {
      if (parse_u64(val, &v) != 0 || v < 1)
        goto bad;
      c->spill_max_bytes = v;
    } else if (strcmp(a, "--spill-max-total") == 0) { /* M-MCP-16 */
      if (parse_u64(val, &v) != 0 || v < 1)
        goto bad;
      c->spill_max_total = v;
    } else if (strcmp(a, "--keep-spill") == 0) {
      c->keep_spill = 1;
      i += 1;
      continue;
    } else if (strcmp(a, "--no-spill") == 0) {
      c->no_spill = 1;
      i += 1;
      continue;
    } else if (strcmp(a, "--slurm") == 0) {
      c->slurm = 1;
      i += 1;
      continue;
    } else if (strcmp(a, "--slurm-journal") == 0) {
      c->slurm_journal = val;
    } else if (strcmp(a, "--slurm-sbatch-allow") == 0) {
      /* E-13: the host's allowlist of extra sbatch options. */
      if (val == NULL || c->slurm_allow_n ==
                             sizeof(c->slurm_allow) / sizeof(c->slurm_allow[0]))
        goto bad;
      c->slurm_allow[c->slurm_allow_n++] = val;
    } else if (strcmp(a, "--state-dir") == 0) { /* D-7 */
      if (val == NULL)
        goto missing;
      if (val[0] == '\0')
        goto bad;
      c->state_dir = val;
    } else if (strcmp(a, "--no-guardian") == 0) {
      c->no_guardian = 1;
      i += 1;
      continue;
    } else if ((r = mcp_sandbox_arg(c, a, val)) != 0) {
      if (r < 0)
        goto bad;
      i += r;
      continue;
    } else if (strcmp(a, "--pass-env") == 0) {
      /* M-MCP-11, M-MCP-14, M-MCP-15: the server under attack. */
      if (val == NULL)
        goto missing;
      if (c->pass_env_n == sizeof(c->pass_env) / sizeof(c->pass_env[0]) ||
          strchr(val, '=') != NULL || val[0] == '\0')
        goto bad;
      c->pass_env[c->pass_env_n++] = val;
    } else if (strcmp(a, "--cgroups") == 0) {
      c->cgroups = 1; /* S-11: the default; kept for old command lines */
      c->no_cgroups = 0;
      i += 1;
      continue;
    } else if (strcmp(a, "--no-cgroups") == 0) {
      c->no_cgroups = 1;
      c->cgroups = 0;
      i += 1;
      continue;
    } else if ((r = mcp_limits_arg(c, a, val)) != 0) {
      if (r < 0)
        goto bad;
      i += r;
      continue;
    } else if (strcmp(a, "--max-unread-bytes") == 0) {
      if (parse_u64(val, &v) != 0 || v > SIZE_MAX)
        goto bad;
      c->max_unread_bytes = (size_t)v;
    } else if (strcmp(a, "--grace-ms") == 0) {
      if (parse_u64(val, &v) != 0 || v < 1 || v > 3600000)
        goto bad;
      c->grace_ms = v;
    } else {
      fprintf(stderr, "uvtasks-mcp: unknown option %s (see --help)\n", a);
      return 2;
    }
    i += 2; /* the other options take a value */
  }
  return 0;

missing:
  fprintf(stderr, "uvtasks-mcp: %s needs a value (see --help)\n", argv[i]);
  return 2;
bad:
  fprintf(stderr, "uvtasks-mcp: bad value for %s: %s (see --help)\n", argv[i],
          i + 1 < argc ? argv[i + 1] : "(none)");
  return 2;
}

/* M-MCP-15: the registry's cgroup directory, made by
 * uvt_process_cgroups(). */
static const char *mcp_cgroup_dir(uvt_registry_t *reg) {
  const char *dir = uvt_process_cgroup_dir(reg);

  return dir != NULL ? dir : "";
}

/* M-MCP-14: "NAME=value" for each --pass-env NAME the server has, for
 * every task's environment (they win over the scrub).  Static: it lives
 * as long as the server. */
static const char *const *mcp_pass_env(const mcp_config_t *c) {
  static const char *entries[65];
  static char *owned[64];
  size_t n = 0;
  size_t i;

  for (i = 0; i < c->pass_env_n; i++) {
    const char *v = getenv(c->pass_env[i]);
    size_t len;

    if (v == NULL) {
      fprintf(stderr, "uvtasks-mcp: --pass-env %s: not set; not passed\n",
              c->pass_env[i]);
      continue;
    }
    len = strlen(c->pass_env[i]) + strlen(v) + 2;
    owned[n] = malloc(len);
    if (owned[n] == NULL)
      continue;
    snprintf(owned[n], len, "%s=%s", c->pass_env[i], v);
    entries[n] = owned[n];
    n++;
  }
  entries[n] = NULL;
  return n > 0 ? entries : NULL;
}

/* M-MCP-16: the default directories of servers that are gone (killed, or
 * crashed, before their exit removed theirs): each `<pid>` in the
 * directory open at `topfd` (taken) whose process no longer exists goes,
 * with the files in it.  Everything is relative to descriptors and nothing
 * is followed: a name a task planted is removed, never its target.  A pid
 * that was reused keeps its directory until that process is gone too. */
static void spill_sweep(int topfd) {
  DIR *d;
  struct dirent *e;
  int fd;
  char *end;
  long pid;

  if (topfd < 0)
    return;
  d = fdopendir(topfd);
  if (d == NULL) {
    close(topfd);
    return;
  }
  while ((e = readdir(d)) != NULL) {
    pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || end == e->d_name ||
        (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
      continue;
    fd = openat(topfd, e->d_name,
                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      DIR *sub = fdopendir(fd);
      struct dirent *f;
      if (sub != NULL) {
        while ((f = readdir(sub)) != NULL)
          if (f->d_name[0] != '.')
            unlinkat(fd, f->d_name, 0);
        closedir(sub);
      } else {
        close(fd);
      }
    }
    unlinkat(topfd, e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
}

/* A directory `name` in `parentfd`, made 0700 when missing, opened without
 * following a link, and ours with no write bits for group or others (and,
 * with `closed`, no bits at all): its descriptor, or -1. */
static int spill_own_dir(int parentfd, const char *name, int closed) {
  struct stat st;
  int fd;

  if (parentfd < 0)
    return -1;
  if (mkdirat(parentfd, name, 0700) != 0 && errno != EEXIST)
    return -1;
  fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (closed ? 077 : 022)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* `<top>/<pid>` for this server, with `top` open at `topfd` (taken):
 * made, the gone servers' swept, c->spill_default set.  0 or -1. */
static int spill_take(mcp_config_t *c, const char *top, int topfd) {
  char pid[32];
  int fd;
  int n;

  snprintf(pid, sizeof(pid), "%ld", (long)getpid());
  fd = spill_own_dir(topfd, pid, 1);
  n = snprintf(c->spill_default, sizeof(c->spill_default), "%s/%s", top, pid);
  if (fd < 0 || n <= 0 || (size_t)n >= sizeof(c->spill_default)) {
    if (fd >= 0)
      close(fd);
    close(topfd);
    c->spill_default[0] = '\0';
    return -1;
  }
  close(fd);
  spill_sweep(topfd);
  c->spill_dir = c->spill_default;
  return 0;
}

/* M-TOOLS-17: the default spill directory, one per server, where the
 * host's own file tools can read it: `<workspace>/.uvtasks/spill/<pid>`
 * (the workspace: --cwd, else the server's cwd).  `.uvtasks` gets a
 * .gitignore of `*`, so git leaves it out.  Under --sandbox, `.uvtasks`
 * is bound read-only into every task's sandbox (S-5's readonly[]): a task
 * reads its spill files but cannot write, rename, remove or replace them
 * (S-7).  Every step is by descriptor with O_NOFOLLOW and each directory
 * must be ours, so a link or a directory someone else planted there (a
 * task of an earlier server) is refused, never followed; then, as when
 * the workspace cannot be written, the directory is made where v3 put it,
 * `$TMPDIR/uvtasks-spill-<uid>/<pid>` (or under /tmp), and the server says
 * why.  When neither can be made, it runs without one and says so. */
static int spill_in_workspace(mcp_config_t *c) {
  char ws[4096];
  char top[4096 + 32];
  int wfd;
  int ufd;
  int sfd;
  int gfd;

  if (c->sandbox_on)
    snprintf(ws, sizeof(ws), "%s", c->workspace);
  else if (realpath(c->cwd != NULL ? c->cwd : ".", ws) == NULL)
    return -1;
  wfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ufd = spill_own_dir(wfd, ".uvtasks", 0);
  if (wfd >= 0)
    close(wfd);
  if (ufd < 0)
    return -1;
  gfd = openat(ufd, ".gitignore",
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (gfd >= 0) {
    /* Best effort: a repository's status is the only thing it spares. */
    if (write(gfd, "*\n", 2) != 2)
      (void)unlinkat(ufd, ".gitignore", 0);
    close(gfd);
  }
  sfd = spill_own_dir(ufd, "spill", 1);
  close(ufd);
  if (sfd < 0)
    return -1;
  snprintf(c->spill_ro, sizeof(c->spill_ro), "%s/.uvtasks", ws);
  snprintf(top, sizeof(top), "%s/.uvtasks/spill", ws);
  if (spill_take(c, top, sfd) != 0) {
    c->spill_ro[0] = '\0';
    return -1;
  }
  if (c->sandbox_on) {
    /* S-7: read-only in every task's sandbox. */
    c->readonly[0] = c->spill_ro;
    c->readonly[1] = NULL;
    c->sandbox.readonly = c->readonly;
  }
  return 0;
}

static void spill_default(mcp_config_t *c) {
  const char *base = getenv("TMPDIR");
  char top[4096];
  int n;

  if (spill_in_workspace(c) == 0)
    return;
  if (base == NULL || base[0] != '/')
    base = "/tmp";
  n = snprintf(top, sizeof(top), "%s/uvtasks-spill-%lu", base,
               (unsigned long)geteuid());
  if (n > 0 && (size_t)n < sizeof(top) &&
      (mkdir(top, 0700) == 0 || errno == EEXIST)) {
    /* The top directory must be ours and closed: a link planted at its
     * name is refused. */
    int topfd = open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (topfd >= 0 && (fstat(topfd, &st) != 0 || st.st_uid != geteuid() ||
                       (st.st_mode & 077) != 0)) {
      close(topfd);
      topfd = -1;
    }
    if (topfd >= 0 && spill_take(c, top, topfd) == 0) {
      fprintf(stderr,
              "uvtasks-mcp: the spill directory is %s (the workspace's "
              ".uvtasks/spill could not be made, or is not a directory of "
              "yours: a link or another user's)\n",
              c->spill_default);
      return;
    }
  }
  c->spill_default[0] = '\0';
  c->no_spill = 1;
  fprintf(stderr,
          "uvtasks-mcp: no spill directory (neither the workspace's "
          ".uvtasks/spill nor %s/uvtasks-spill-%lu is a directory of yours "
          "with mode 0700): results that leave output out cannot name a "
          "file that holds it; --spill-dir DIR sets one\n",
          base, (unsigned long)geteuid());
}

/* A session id nobody else has: random, or pid and time if that fails. */
static void make_session(char *buf, size_t size) {
  unsigned char r[12];
  size_t i;
  size_t n;

  if (uv_random(NULL, NULL, r, sizeof(r), 0, NULL) == 0) {
    n = (size_t)snprintf(buf, size, "mcp-");
    for (i = 0; i < sizeof(r) && n + 3 <= size; i++)
      n += (size_t)snprintf(buf + n, size - n, "%02x", r[i]);
    return;
  }
  snprintf(buf, size, "mcp-%ld-%" PRIu64, (long)getpid(), uv_hrtime());
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv) {
  static mcp_server_t server;
  uvt_options_t ropts;
  uvt_tools_options_t topts;
  uv_loop_t loop;
  uv_fs_t stat_req;
  int tools_attached = 0;
  int err;

  server.config.keep_finished = MCP_KEEP_FINISHED;
  server.config.max_unread_bytes = MCP_MAX_UNREAD_DEFAULT;
  server.config.max_task_ttl_ms = MCP_TASK_TTL_MAX_DEFAULT_MS;
  server.config.tasks_page_size = MCP_TASKS_PAGE_DEFAULT;
  server.config.shutdown_grace_ms = MCP_SHUTDOWN_GRACE_MS;
  server.config.yield_ms = -1;
  server.guardian_fd = -1;
  err = parse_args(argc, argv, &server.config);
  if (err != 0)
    return err == 1 ? 0 : 2;
  if (!server.config.sandbox_on &&
      (server.config.writable_n > 0 ||
       server.config.sandbox.network == UVT_SANDBOX_NET_HOST ||
       server.config.sandbox.writable_git)) {
    fprintf(stderr, "uvtasks-mcp: --allow-net, --writable and --writable-git "
                    "need --sandbox read-only or workspace\n");
    return 2;
  }
  {
    /* S-4: a missing --writable path would fail every command with a bare
     * ENOENT; say which at start. */
    struct stat wst;
    size_t i;

    for (i = 0; i < server.config.writable_n; i++)
      if (stat(server.config.writable[i], &wst) != 0) {
        fprintf(stderr, "uvtasks-mcp: --writable %s: %s\n",
                server.config.writable[i], strerror(errno));
        return 2;
      }
  }
#ifndef UVT_MCP_SLURM
  if (server.config.slurm) {
    fprintf(stderr, "uvtasks-mcp: --slurm: built without libslurm\n");
    return 2;
  }
#endif
  if (server.config.state_dir != NULL && server.config.sandbox_on) {
    fprintf(stderr, "uvtasks-mcp: --state-dir cannot be used with --sandbox "
                    "yet (a sandboxed task cannot outlive the server)\n");
    return 2;
  }
  if (server.config.slurm_journal != NULL && !server.config.slurm) {
    fprintf(stderr, "uvtasks-mcp: --slurm-journal needs --slurm\n");
    return 2;
  }
  if (server.config.cwd != NULL) {
    err = uv_fs_stat(NULL, &stat_req, server.config.cwd, NULL);
    if (err == 0 && !S_ISDIR(stat_req.statbuf.st_mode))
      err = UV_ENOTDIR;
    uv_fs_req_cleanup(&stat_req);
    if (err != 0) {
      fprintf(stderr, "uvtasks-mcp: --cwd %s: %s\n", server.config.cwd,
              uv_strerror(err));
      return 2;
    }
  }
  if (mcp_sandbox_start(&server.config) != 0) /* S-5 */
    return 2;

  /* A client that goes away must not kill us with SIGPIPE before we have
   * stopped its tasks; libuv resets dispositions in the children. */
  signal(SIGPIPE, SIG_IGN);

  /* M-MCP-13: not dumpable, so a task running as the same user cannot
   * open /proc/<server>/fd (the client's stdin and stdout) nor attach to
   * it; the guardian inherits it through the fork.  Every task is
   * dumpable again: an exec resets the flag.  The server's own reads of
   * /proc/self are unaffected. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    fprintf(stderr, "uvtasks-mcp: prctl(PR_SET_DUMPABLE): %s\n",
            strerror(errno));

  /* M-MCP-7: before the loop and its threads exist, so the fork copies
   * nothing but this thread. */
  if (!server.config.no_guardian) {
    err = mcp_guardian_start(&server);
    if (err != 0)
      fprintf(stderr,
              "uvtasks-mcp: no guardian (%s): if the server is killed, its "
              "tasks keep running\n",
              uv_strerror(err));
  }

  err = uv_loop_init(&loop);
  if (err != 0) {
    fprintf(stderr, "uvtasks-mcp: %s\n", uv_strerror(err));
    return 1;
  }
  server.loop = &loop;
  server.on_message = mcp_rpc_message; /* wire.c -> rpc.c */
  server.log_level = 0;

  uvt_options_init(&ropts);
  ropts.max_live_per_owner = server.config.max_tasks;
  /* Disposal waits for TERM, the grace, KILL and the pipes' drain. */
  ropts.teardown_grace_ms =
      (server.config.grace_ms ? server.config.grace_ms : UVT_PROCESS_GRACE_MS) +
      UVT_PROCESS_DRAIN_MS + 2000;
  err = uvt_registry_new(&loop, &ropts, &server.reg);
  if (err != 0) {
    fprintf(stderr, "uvtasks-mcp: registry: %s\n", uvt_strerror(err));
    return 1;
  }

  /* S-11: the server is a child subreaper, so what a task's process leaves
   * behind when it dies is re-parented here, not to init: the library
   * follows it from the task (without a cgroup: by descent), reaps it,
   * and stops what is left at the end.  Its only other child is the
   * guardian, forked above. */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 ||
      uvt_process_orphans(server.reg) != 0)
    fprintf(stderr, "uvtasks-mcp: not a child subreaper (%s)\n",
            strerror(errno));
  if (!server.config.no_cgroups) {
    /* M-MCP-15, S-11: a cgroup per task wherever the host allows it. */
    err = uvt_process_cgroups(server.reg, NULL);
    if (err == 0)
      mcp_guardian_cgroup(&server, mcp_cgroup_dir(server.reg));
    else
      fprintf(stderr,
              "uvtasks-mcp: no cgroup per task on this host (%s): a setsid "
              "or daemonised process is stopped only while it descends "
              "from its task\n",
              uvt_strerror(err));
    err = 0;
  }
  {
    /* L-LIM-1, L-LIM-3: limits the host cannot enforce stop the start:
     * never an unlimited run. */
    const uvt_process_limits_t *l = &server.config.limits;
    char why[512];
    if ((l->memory_bytes > 0 || l->max_processes > 0 || l->cpu_percent > 0) &&
        uvt_process_limits_check(server.reg, l, why, sizeof(why)) != 0) {
      fprintf(stderr, "uvtasks-mcp: --limit-*: %s\n", why);
      uvt_registry_close(server.reg, NULL, NULL);
      uv_run(&loop, UV_RUN_DEFAULT);
      mcp_guardian_wait(&server);
      uv_loop_close(&loop);
      return 2;
    }
  }

  uvt_tools_options_init(&topts);
  topts.notice_cb = mcp_rpc_notice;
  topts.cwd = server.config.cwd;
  topts.output_cap_bytes = server.config.output_cap_bytes;
  topts.grace_ms = server.config.grace_ms;
  /* M-TOOLS-6: below the official SDK's 60 s request timeout by default. */
  topts.yield_ms = server.config.yield_ms >= 0
                       ? (uint64_t)server.config.yield_ms
                       : MCP_YIELD_DEFAULT_MS;
  topts.max_bytes = server.config.max_bytes; /* M-TOOLS-8; 0 = 10000 */
  topts.max_lines = server.config.max_lines; /* M-TOOLS-15; 0 = 1000 */
  /* M-TOOLS-17: a spill directory unless told otherwise. */
  if (server.config.spill_dir == NULL && !server.config.no_spill)
    spill_default(&server.config);
  topts.spill_dir = server.config.no_spill ? NULL : server.config.spill_dir;
  topts.spill_max_bytes = server.config.spill_max_bytes;
  topts.limits = server.config.limits;                   /* L-LIM-3 */
  topts.spill_max_total = server.config.spill_max_total; /* M-MCP-16 */
  topts.keep_spill = server.config.keep_spill;
  if (server.config.sandbox_on)
    topts.sandbox = &server.config.sandbox;        /* S-4 */
  topts.env = mcp_pass_env(&server.config);        /* M-MCP-14 */
  server.config.pass_env_entries = topts.env;      /* E-10: Slurm jobs too */
  topts.durable = server.config.state_dir != NULL; /* D-7 */
  err = uvt_tools_attach(server.reg, &server.tools, &topts);
  if (err != 0 && topts.spill_dir != NULL &&
      topts.spill_dir == server.config.spill_default) {
    /* The default directory, not one asked for: run without it. */
    fprintf(stderr, "uvtasks-mcp: no spill directory (%s: %s)\n",
            topts.spill_dir, uvt_strerror(err));
    rmdir(server.config.spill_default);
    server.config.spill_default[0] = '\0';
    topts.spill_dir = NULL;
    err = uvt_tools_attach(server.reg, &server.tools, &topts);
  }
  if (err == UV_EPERM && topts.spill_dir != NULL)
    fprintf(stderr,
            "uvtasks-mcp: --spill-dir %s must be a directory you own that "
            "only you can enter (mode 0700, not a link)\n",
            topts.spill_dir);
  else if (err == UV_EACCES && topts.spill_dir != NULL && topts.sandbox != NULL)
    /* S-7: a sandboxed task could replace the files the server writes. */
    fprintf(stderr,
            "uvtasks-mcp: --spill-dir %s lies where the sandbox lets tasks "
            "write (the workspace or a --writable directory); choose one "
            "outside them\n",
            topts.spill_dir);
  else if (topts.spill_dir != NULL &&
           (err == UV_ENOENT || err == UV_ENOTDIR || err == UV_EACCES ||
            err == UV_ELOOP || err == UV_ENAMETOOLONG))
    fprintf(stderr, "uvtasks-mcp: --spill-dir %s: %s\n", topts.spill_dir,
            uvt_strerror(err));
  if (err == 0) {
    tools_attached = 1;
    server.tools.data = &server;
    make_session(server.session, sizeof(server.session));
    /* D-5: with --state-dir, the session that owned the tasks before. */
    if (server.config.state_dir != NULL) {
      char fresh[sizeof(server.session)];
      memcpy(fresh, server.session, sizeof(fresh));
      if (mcp_durable_session(&server, fresh) != 0)
        err = UV_EINVAL;
    }
    server.agent.data = &server;
    if (err == 0)
      err = uvt_agent_register(server.reg, &server.agent, "mcp-client",
                               server.session);
  }
  if (err == 0 && server.config.state_dir != NULL)
    err = mcp_durable_init(&server); /* D-3, D-7 */
#ifdef UVT_MCP_SLURM
  if (err == 0 && server.config.slurm)
    err = mcp_slurm_init(&server);
#endif
  if (err == 0)
    err = mcp_tasks_init(&server);
  if (err == 0)
    err = mcp_progress_init(&server);
  if (err == 0)
    err = mcp_guardian_init(&server);
  if (err == 0)
    err = mcp_retention_init(&server); /* M-MCP-11 */
  if (err == 0)
    err = mcp_out_init(&server.out, &loop, &out_cbs, &server);
  if (err == 0) {
    static const int signums[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    size_t i;

    uv_timer_init(&loop, &server.shutdown_timer);
    server.shutdown_timer.data = &server;
    server.shutdown_timer_open = 1;
    for (i = 0; i < sizeof(signums) / sizeof(signums[0]); i++) {
      uv_signal_init(&loop, &server.signals[i]);
      server.signals[i].data = &server;
      uv_signal_start(&server.signals[i], on_signal, signums[i]);
    }
    server.signals_open = 1;
    err = mcp_in_start(&server.in, &loop, &in_cbs, &server);
    if (err != 0)
      mcp_server_shutdown(&server, "no input");
  } else {
    server.shutting_down = 1;
    mcp_tasks_stop(&server);
    mcp_progress_stop(&server);
    mcp_guardian_stop(&server);
    mcp_retention_stop(&server);
    if (tools_attached)
      uvt_tools_detach(&server.tools, NULL);
    uvt_registry_close(server.reg, on_registry_closed, &server);
  }
  if (err != 0)
    fprintf(stderr, "uvtasks-mcp: start-up failed: %s\n", uvt_strerror(err));

  uv_run(&loop, UV_RUN_DEFAULT);
  /* M-MCP-16: the tools removed the files at detach; the default
   * directory made for this server goes too. */
  if (server.config.spill_default[0] != '\0' && !server.config.keep_spill)
    rmdir(server.config.spill_default);
  mcp_guardian_wait(&server); /* M-MCP-10: not even a zombie at the end */
  mcp_rpc_free_notices(&server);
  mcp_tasks_free(&server);
  if (uv_loop_close(&loop) != 0)
    fprintf(stderr, "uvtasks-mcp: the loop did not close cleanly\n");
  return err != 0 ? 1 : 0;
}
