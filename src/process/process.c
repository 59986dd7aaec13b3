/* The process producer (SPEC.md §3): one task per child process group,
 * built on the public producer API (uvt_start + hooks).
 *
 * Handles per task: two pipes (stdout, stderr), a poll handle on the
 * leader's pidfd (exit detection without SIGCHLD; a SIGCHLD watcher where
 * there are no pidfds), and three timers (kill
 * grace, drain, max runtime).  The task settles when the leader was reaped,
 * both pipes are closed and every handle's close callback has run (P-END-1).
 * The per-task state is freed once it has settled, its record was released
 * and no handle is open; disposal may reopen the kill timer to stop group
 * survivors (P-KILL-4) between settle and release. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process-internal.h"

/* Bytes read per system call (at most). */
#define READ_CHUNK (64 * 1024)
/* At drain time, read at most this much of what a pipe still holds. */
#define DRAIN_LIMIT (1024 * 1024)
/* How often disposal checks whether a group is gone. */
#define QUIESCE_POLL_MS 10

typedef struct uvt__proc_s uvt__proc_t;

typedef struct {
  uv_pipe_t pipe;
  uvt__outbuf_t buf;
  uvt__proc_t *proc;
  int open;   /* handle initialised and uv_close not yet called */
  int closed; /* uv_close called: no more bytes will arrive */
} stream_t;

enum {
  H_POLL = 1 << 0,
  H_KILL = 1 << 1,
  H_DRAIN = 1 << 2,
  H_RUNTIME = 1 << 3,
  H_SIGNAL = 1 << 4
};

int uvt__process_no_pidfd;

struct uvt__proc_s {
  uvt_task_t *task;
  uvt_registry_t *reg;
  uv_loop_t *loop;
  const uvt_process_options_t *opts; /* valid during run() only */

  char id[UVT_ID_MAX];

  pid_t pid;
  int pidfd;
  uv_poll_t exit_poll;     /* on the pidfd, or: */
  uv_signal_t exit_signal; /* SIGCHLD, where pidfds are not available */
  uv_timer_t kill_timer;
  uv_timer_t drain_timer;
  uv_timer_t runtime_timer;
  stream_t out;
  stream_t err;
  char *scratch;

  uint64_t grace_ms;
  uint64_t drain_ms;
  uint64_t max_runtime_ms;

  unsigned live;    /* H_* handles initialised, uv_close not yet called */
  unsigned closing; /* handles whose close callback has not run */

  int status;         /* waitpid status of the leader */
  int reaped;         /* the leader's exit was seen and reaped */
  int status_lost;    /* someone else reaped the leader */
  int kill_requested; /* cancel (or the runtime limit) before the reap */
  int killed_now;     /* SIGKILL was sent */
  int timed_out;
  unsigned cancels; /* calls of the cancel hook */
  int finishing;    /* closing the last handles towards settle */
  int run_failed;   /* run() returned an error: free after the closes */
  int settled;
  int released;
  int quiescing; /* the quiesce hook is waiting for the group */
  uint64_t quiesce_start;
};

/* ---- names ------------------------------------------------------------ */

static const char *signal_name(int sig, char *buf, size_t size) {
  static const struct {
    int sig;
    const char *name;
  } names[] = {
      {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
      {SIGILL, "SIGILL"},       {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
      {SIGBUS, "SIGBUS"},       {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
      {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
      {SIGCHLD, "SIGCHLD"},     {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},
      {SIGTSTP, "SIGTSTP"},     {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},
      {SIGURG, "SIGURG"},       {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
      {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
      {SIGIO, "SIGIO"},         {SIGSYS, "SIGSYS"},
#ifdef SIGPWR
      {SIGPWR, "SIGPWR"},
#endif
#ifdef SIGSTKFLT
      {SIGSTKFLT, "SIGSTKFLT"},
#endif
  };
  size_t i;

  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (names[i].sig == sig)
      return names[i].name;
#ifdef SIGRTMIN
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
    snprintf(buf, size, "SIGRTMIN+%d", sig - SIGRTMIN);
    return buf;
  }
#endif
  snprintf(buf, size, "SIG%d", sig);
  return buf;
}

/* ---- handles ---------------------------------------------------------- */

static void proc_free(uvt__proc_t *p) {
  uvt__outbuf_free(&p->out.buf);
  uvt__outbuf_free(&p->err.buf);
  uvt__free(p->scratch);
  uvt__free(p);
}

static void maybe_free(uvt__proc_t *p) {
  if (p->closing != 0)
    return;
  if (p->run_failed || (p->settled && p->released))
    proc_free(p);
}

static void settle(uvt__proc_t *p);

static void on_close(uv_handle_t *h) {
  uvt__proc_t *p;

  /* Pipes carry their stream_t, everything else the task state. */
  if (h->type == UV_NAMED_PIPE)
    p = ((stream_t *)h->data)->proc;
  else
    p = h->data;

  if (h == (uv_handle_t *)&p->exit_poll && p->pidfd >= 0) {
    close(p->pidfd);
    p->pidfd = -1;
  }
  p->closing--;
  if (p->closing == 0 && p->finishing && !p->settled)
    settle(p);
  maybe_free(p);
}

static void close_handle(uvt__proc_t *p, unsigned bit, uv_handle_t *h) {
  if (!(p->live & bit))
    return;
  p->live &= ~bit;
  uv_close(h, on_close);
}

static void close_stream(stream_t *s) {
  if (!s->open)
    return;
  s->open = 0;
  s->closed = 1;
  uv_close((uv_handle_t *)&s->pipe, on_close);
}

/* Quiescence (P-END-1): leader reaped and both pipes closed; close what is
 * left and settle when the last close callback has run. */
static void maybe_finish(uvt__proc_t *p) {
  if (p->finishing || !p->reaped || p->out.open || p->err.open)
    return;
  p->finishing = 1;
  close_handle(p, H_POLL, (uv_handle_t *)&p->exit_poll);
  close_handle(p, H_SIGNAL, (uv_handle_t *)&p->exit_signal);
  close_handle(p, H_KILL, (uv_handle_t *)&p->kill_timer);
  close_handle(p, H_DRAIN, (uv_handle_t *)&p->drain_timer);
  close_handle(p, H_RUNTIME, (uv_handle_t *)&p->runtime_timer);
  /* The settle itself waits for the last close callback (on_close), never
   * inside a hook. */
}

/* ---- output ----------------------------------------------------------- */

/* libuv reads straight into the stream's ring (uvt__outbuf_space); the
 * scratch buffer is only the fallback when no ring could be allocated, and
 * what lands there goes through uvt__outbuf_push (which drops it). */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  stream_t *s = h->data;
  uvt__proc_t *p = s->proc;
  char *at;
  size_t n;

  (void)suggested;
  n = uvt__outbuf_space(&s->buf, READ_CHUNK, &at);
  if (n > 0) {
    buf->base = at;
    buf->len = n;
    return;
  }
  if (p->scratch == NULL)
    p->scratch = uvt__malloc(READ_CHUNK);
  buf->base = p->scratch;
  buf->len = p->scratch != NULL ? READ_CHUNK : 0;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  stream_t *s = stream->data;
  uvt__proc_t *p = s->proc;

  if (nread > 0) {
    if (buf->base != NULL && buf->base == p->scratch)
      uvt__outbuf_push(&s->buf, buf->base, (size_t)nread);
    else
      uvt__outbuf_commit(&s->buf, (size_t)nread);
    return;
  }
  if (nread == 0)
    return;
  /* End of stream (or an error, or no memory to read into): this pipe is
   * done. */
  close_stream(s);
  maybe_finish(p);
}

/* Read what the pipe holds now, without waiting, then close it. */
static void drain_stream(uvt__proc_t *p, stream_t *s) {
  uv_os_fd_t fd;
  size_t total = 0;
  ssize_t n;
  char *at;
  size_t room;

  if (!s->open)
    return;
  if (uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0) {
    while (total < DRAIN_LIMIT) {
      room = uvt__outbuf_space(&s->buf, READ_CHUNK, &at);
      if (room == 0) {
        /* No ring: read into the scratch buffer and count it dropped. */
        if (p->scratch == NULL)
          p->scratch = uvt__malloc(READ_CHUNK);
        if (p->scratch == NULL)
          break;
        at = p->scratch;
        room = READ_CHUNK;
      }
      n = read(fd, at, room);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      if (at == p->scratch)
        uvt__outbuf_push(&s->buf, at, (size_t)n);
      else
        uvt__outbuf_commit(&s->buf, (size_t)n);
      total += (size_t)n;
    }
  }
  close_stream(s);
}

static void on_drain_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  drain_stream(p, &p->out);
  drain_stream(p, &p->err);
  maybe_finish(p);
}

/* ---- the leader ------------------------------------------------------- */

static void leader_exited(uvt__proc_t *p, int status, int lost) {
  p->reaped = 1;
  p->status = status;
  p->status_lost = lost;
  /* P-KILL-3: nothing is signalled after this point (disposal aside). */
  close_handle(p, H_POLL, (uv_handle_t *)&p->exit_poll);
  close_handle(p, H_SIGNAL, (uv_handle_t *)&p->exit_signal);
  if (p->live & H_KILL)
    uv_timer_stop(&p->kill_timer);
  if (p->live & H_RUNTIME)
    uv_timer_stop(&p->runtime_timer);
  if (p->out.open || p->err.open)
    uv_timer_start(&p->drain_timer, on_drain_timer, p->drain_ms, 0);
  maybe_finish(p);
}

/* Reap the leader if it has exited.  Returns 1 if it is (now) reaped. */
static int check_leader(uvt__proc_t *p) {
  int status = 0;
  pid_t r;

  if (p->reaped)
    return 1;
  do
    r = waitpid(p->pid, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0)
    return 0;
  leader_exited(p, status, r < 0);
  return 1;
}

static void on_exit_poll(uv_poll_t *poll, int status, int events) {
  uvt__proc_t *p = poll->data;

  if (!check_leader(p) && status < 0) {
    /* The pidfd cannot be watched any more; the leader is alive.  Keep
     * polling rather than lose its exit. */
    uv_poll_start(&p->exit_poll, UV_READABLE, on_exit_poll);
  }
}

static void on_sigchld(uv_signal_t *handle, int signum) {
  check_leader(handle->data);
}

static int signal_group(uvt__proc_t *p, int sig) {
  if (kill(-p->pid, sig) == 0 || errno == ESRCH)
    return 0;
  return UVT__PERR(errno);
}

static void on_kill_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  /* P-KILL-1: the leader outlived the grace. */
  if (!check_leader(p) && !p->killed_now) {
    p->killed_now = 1;
    signal_group(p, SIGKILL);
  }
}

/* The first stop request: SIGTERM now, SIGKILL after the grace. */
static int request_stop(uvt__proc_t *p) {
  int err = signal_group(p, SIGTERM);
  if (err != 0)
    return err;
  p->kill_requested = 1;
  uv_timer_start(&p->kill_timer, on_kill_timer, p->grace_ms, 0);
  return 0;
}

static void on_runtime_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  /* P-LIMIT-1: stopped like a kill, unless a kill came first. */
  if (check_leader(p) || p->kill_requested)
    return;
  if (request_stop(p) == 0)
    p->timed_out = 1;
}

/* ---- settle ----------------------------------------------------------- */

typedef struct {
  char *base;
  size_t len;
  size_t cap;
  int failed;
} grow_t;

static int grow_sink(void *ctx, const void *bytes, size_t len) {
  grow_t *g = ctx;
  size_t cap;
  char *nb;

  if (g->len + len > g->cap) {
    cap = g->cap ? g->cap : 256;
    while (cap < g->len + len)
      cap *= 2;
    nb = uvt__realloc(g->base, cap);
    if (nb == NULL) {
      g->failed = 1;
      return UV_ENOMEM;
    }
    g->base = nb;
    g->cap = cap;
  }
  memcpy(g->base + g->len, bytes, len);
  g->len += len;
  return 0;
}

static void settle(uvt__proc_t *p) {
  uvt_outcome_t o;
  grow_t g;
  char detail[128];
  char sigbuf[32];
  int code = 0;
  int sig = 0;

  memset(&o, 0, sizeof(o));
  memset(&g, 0, sizeof(g));
  if (p->status_lost) {
    o.status = UVT_FAILED;
    snprintf(detail, sizeof(detail), "exit status lost: reaped elsewhere");
  } else {
    if (WIFSIGNALED(p->status))
      sig = WTERMSIG(p->status);
    else
      code = WEXITSTATUS(p->status);
    if (p->timed_out) {
      o.status = UVT_KILLED;
      snprintf(detail, sizeof(detail), "timed out after %llu ms",
               (unsigned long long)p->max_runtime_ms);
    } else if (sig != 0) {
      /* P-END-2, P-KILL-2: a signal is a kill, asked for or not. */
      o.status = UVT_KILLED;
      snprintf(detail, sizeof(detail), "signal: %s",
               signal_name(sig, sigbuf, sizeof(sigbuf)));
    } else if (p->kill_requested) {
      o.status = UVT_KILLED;
      snprintf(detail, sizeof(detail), "exit code: %d after kill request",
               code);
    } else {
      o.status = UVT_COMPLETED;
      snprintf(detail, sizeof(detail), "exit code: %d", code);
    }
  }
  o.detail = detail;
  /* The unread remainder becomes the outcome's output; the registry serves
   * it to later reads. */
  if (uvt__output_collect(&p->out.buf, 1, &p->err.buf, 1, grow_sink, &g) == 0) {
    o.output = g.base;
    o.output_len = g.len;
  }
  uvt__outbuf_free(&p->out.buf);
  uvt__outbuf_free(&p->err.buf);
  uvt__free(p->scratch);
  p->scratch = NULL;
  p->settled = 1;
  uvt_task_settle(p->task, &o);
  uvt__free(g.base);
}

/* ---- hooks ------------------------------------------------------------ */

static int hook_cancel(uvt_task_t *t, const char *reason) {
  uvt__proc_t *p = uvt_task_arg(t);

  /* P-KILL-2/3: a leader that already exited keeps its outcome and is not
   * signalled. */
  if (check_leader(p))
    return 0;
  p->cancels++;
  if (!p->kill_requested)
    return request_stop(p);
  /* The runtime limit already sent SIGTERM: the owner's first kill lets
   * that grace run; a repeated cancel means "stop now" (R-KILL-3). */
  if (p->timed_out && p->cancels == 1)
    return 0;
  if (p->live & H_KILL)
    uv_timer_stop(&p->kill_timer);
  p->killed_now = 1;
  return signal_group(p, SIGKILL);
}

static int buf_sink(void *ctx, const void *bytes, size_t len) {
  return uvt_buf_append(ctx, bytes, len);
}

static int hook_read(uvt_task_t *t, uvt_buf_t *out) {
  uvt__proc_t *p = uvt_task_arg(t);
  char *text;
  size_t len;
  size_t size;

  if (out->base == NULL &&
      uvt__output_take(&p->out.buf, p->out.closed, &p->err.buf, p->err.closed,
                       &text, &len, &size)) {
    uvt__buf_adopt(out, text, len, size);
    return 0;
  }
  return uvt__output_collect(&p->out.buf, p->out.closed, &p->err.buf,
                             p->err.closed, buf_sink, out);
}

static void on_quiesce_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  if (!uvt__group_alive(p->pid)) {
    p->quiescing = 0;
    close_handle(p, H_KILL, (uv_handle_t *)&p->kill_timer);
    uvt_task_quiescent(p->task);
    return;
  }
  if (!p->killed_now && uv_now(p->loop) - p->quiesce_start >= p->grace_ms) {
    p->killed_now = 1;
    kill(-p->pid, SIGKILL);
  }
}

/* P-KILL-4: stop what the leader left running in its group. */
static int hook_quiesce(uvt_task_t *t) {
  uvt__proc_t *p = uvt_task_arg(t);

  /* Only a settled task's handles are all closed; before that its own stop
   * path is still running. */
  if (!p->settled || p->quiescing || p->pid <= 0 || !uvt__group_alive(p->pid))
    return 0;
  if (uv_timer_init(p->loop, &p->kill_timer) != 0) {
    kill(-p->pid, SIGKILL);
    return 0;
  }
  p->kill_timer.data = p;
  p->live |= H_KILL;
  p->closing++;
  p->quiescing = 1;
  p->killed_now = 0;
  p->quiesce_start = uv_now(p->loop);
  kill(-p->pid, SIGTERM);
  uv_timer_start(&p->kill_timer, on_quiesce_timer, QUIESCE_POLL_MS,
                 QUIESCE_POLL_MS);
  return 1;
}

static void hook_release(uvt_task_t *t) {
  uvt__proc_t *p = uvt_task_arg(t);

  p->released = 1;
  if (p->quiescing) {
    /* Disposal stopped waiting: do not leave the survivors running. */
    p->quiescing = 0;
    if (uvt__group_alive(p->pid))
      kill(-p->pid, SIGKILL);
    close_handle(p, H_KILL, (uv_handle_t *)&p->kill_timer);
  }
  maybe_free(p);
}

/* ---- start ------------------------------------------------------------ */

static int open_pipe(uvt__proc_t *p, stream_t *s, int fd) {
  int err;

  s->proc = p;
  uvt__outbuf_init(&s->buf, p->opts->output_cap_bytes);
  err = uv_pipe_init(p->loop, &s->pipe, 0);
  if (err != 0)
    return err;
  s->pipe.data = s;
  s->open = 1;
  p->closing++;
  return uv_pipe_open(&s->pipe, fd);
}

static int init_timer(uvt__proc_t *p, uv_timer_t *timer, unsigned bit) {
  int err = uv_timer_init(p->loop, timer);
  if (err != 0)
    return err;
  timer->data = p;
  p->live |= bit;
  p->closing++;
  return 0;
}

static void close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

static int proc_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  uvt__proc_t *p = arg;
  const uvt_process_options_t *o = p->opts;
  uvt__spawn_req_t req;
  int outp[2] = {-1, -1};
  int errp[2] = {-1, -1};
  int in_fd = -1;
  int err;

  p->task = t;
  if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
    err = UVT__PERR(errno);
    goto fail_fds;
  }
  if (o->stdin_data != NULL) {
    in_fd = uvt__stdin_file(o->stdin_data, o->stdin_len);
    if (in_fd < 0) {
      err = in_fd;
      goto fail_fds;
    }
  }

  memset(&req, 0, sizeof(req));
  req.command = o->command;
  req.argv = o->argv;
  req.cwd = o->cwd;
  req.env = o->env;
  req.stdin_fd = in_fd;
  req.stdout_fd = outp[1];
  req.stderr_fd = errp[1];
  err = uvt__spawn(&req, &p->pid);
  close_fd(&outp[1]);
  close_fd(&errp[1]);
  close_fd(&in_fd);
  if (err != 0)
    goto fail_fds;

  /* From here a child exists: any failure kills and reaps it. */
  p->pidfd = uvt__process_no_pidfd ? UV_ENOSYS : uvt__pidfd_open(p->pid);
  if (p->pidfd < 0) {
    err = p->pidfd;
    p->pidfd = -1;
    /* Out of descriptors is an error; no pidfds at all (kernel before 5.3,
     * a seccomp filter, valgrind) means the SIGCHLD fallback. */
    if (err == UV_EMFILE || err == UV_ENFILE || err == UV_ENOMEM)
      goto fail_child;
    err = 0;
  }
  err = open_pipe(p, &p->out, outp[0]);
  if (err == 0)
    outp[0] = -1; /* the pipe handle owns it now */
  if (err == 0)
    err = open_pipe(p, &p->err, errp[0]);
  if (err == 0)
    errp[0] = -1;
  if (err == 0)
    err = init_timer(p, &p->kill_timer, H_KILL);
  if (err == 0)
    err = init_timer(p, &p->drain_timer, H_DRAIN);
  if (err == 0)
    err = init_timer(p, &p->runtime_timer, H_RUNTIME);
  if (err == 0 && p->pidfd >= 0) {
    err = uv_poll_init(p->loop, &p->exit_poll, p->pidfd);
    if (err == 0) {
      p->exit_poll.data = p;
      p->live |= H_POLL;
      p->closing++;
    }
  } else if (err == 0) {
    err = uv_signal_init(p->loop, &p->exit_signal);
    if (err == 0) {
      p->exit_signal.data = p;
      p->live |= H_SIGNAL;
      p->closing++;
    }
  }
  if (err == 0)
    err = uv_read_start((uv_stream_t *)&p->out.pipe, on_alloc, on_read);
  if (err == 0)
    err = uv_read_start((uv_stream_t *)&p->err.pipe, on_alloc, on_read);
  if (err == 0 && (p->live & H_POLL))
    err = uv_poll_start(&p->exit_poll, UV_READABLE, on_exit_poll);
  if (err == 0 && (p->live & H_SIGNAL))
    err = uv_signal_start(&p->exit_signal, on_sigchld, SIGCHLD);
  if (err != 0)
    goto fail_child;
  /* A SIGCHLD from before the watcher started is lost: look once now. */
  if (p->live & H_SIGNAL)
    check_leader(p);
  if (p->max_runtime_ms > 0)
    uv_timer_start(&p->runtime_timer, on_runtime_timer, p->max_runtime_ms, 0);

  hooks->cancel = hook_cancel;
  hooks->read_output = hook_read;
  hooks->release = hook_release;
  hooks->quiesce = hook_quiesce;
  return 0;

fail_child:
  /* P-SPAWN-4: no child, no zombie, every handle closed. */
  uvt__spawn_abort(p->pid);
  p->run_failed = 1;
  close_stream(&p->out);
  close_stream(&p->err);
  close_handle(p, H_KILL, (uv_handle_t *)&p->kill_timer);
  close_handle(p, H_DRAIN, (uv_handle_t *)&p->drain_timer);
  close_handle(p, H_RUNTIME, (uv_handle_t *)&p->runtime_timer);
  close_handle(p, H_SIGNAL, (uv_handle_t *)&p->exit_signal);
  if (p->live & H_POLL)
    close_handle(p, H_POLL, (uv_handle_t *)&p->exit_poll);
  else
    close_fd(&p->pidfd);
fail_fds:
  p->run_failed = 1;
  close_fd(&outp[0]);
  close_fd(&outp[1]);
  close_fd(&errp[0]);
  close_fd(&errp[1]);
  close_fd(&in_fd);
  return err;
}

void uvt_process_options_init(uvt_process_options_t *o) {
  if (o == NULL)
    return;
  memset(o, 0, sizeof(*o));
  o->grace_ms = UVT_PROCESS_GRACE_MS;
  o->drain_ms = UVT_PROCESS_DRAIN_MS;
  o->output_cap_bytes = UVT_PROCESS_OUTPUT_CAP_BYTES;
}

/* The default label of an argv task: its words joined by spaces. */
static char *join_argv(const char *const *argv) {
  size_t n = 0;
  size_t i;
  char *s;
  char *w;

  for (i = 0; argv[i] != NULL; i++)
    n += strlen(argv[i]) + 1;
  s = uvt__malloc(n);
  if (s == NULL)
    return NULL;
  w = s;
  for (i = 0; argv[i] != NULL; i++) {
    if (i > 0)
      *w++ = ' ';
    memcpy(w, argv[i], strlen(argv[i]));
    w += strlen(argv[i]);
  }
  *w = '\0';
  return s;
}

int uvt_process_start(uvt_registry_t *reg, const uvt_process_options_t *o,
                      char id_out[UVT_ID_MAX]) {
  uvt__proc_t *p;
  uvt_spec_t spec;
  char *joined = NULL;
  const char *const *e;
  int err;

  if (reg == NULL || o == NULL || (o->command == NULL) == (o->argv == NULL))
    return UV_EINVAL;
  if (o->argv != NULL && o->argv[0] == NULL)
    return UV_EINVAL;
  if (o->output_cap_bytes < 4)
    return UV_EINVAL;
  for (e = o->env; e != NULL && *e != NULL; e++)
    if (strchr(*e, '=') == NULL || **e == '=')
      return UV_EINVAL;

  p = uvt__calloc(1, sizeof(*p));
  if (p == NULL)
    return UV_ENOMEM;
  p->reg = reg;
  p->loop = uvt_registry_loop(reg);
  p->opts = o;
  p->pidfd = -1;
  p->grace_ms = o->grace_ms;
  p->drain_ms = o->drain_ms;
  p->max_runtime_ms = o->max_runtime_ms;
  p->out.proc = p;
  p->err.proc = p;

  memset(&spec, 0, sizeof(spec));
  spec.kind = o->kind != NULL ? o->kind : "bash";
  spec.label = o->label;
  if (spec.label == NULL && o->command != NULL)
    spec.label = o->command;
  if (spec.label == NULL) {
    joined = join_argv(o->argv);
    if (joined == NULL) {
      uvt__free(p);
      return UV_ENOMEM;
    }
    spec.label = joined;
  }
  spec.owner = o->owner;
  spec.run = proc_run;
  spec.arg = p;

  err = uvt_start(reg, &spec, p->id);
  uvt__free(joined);
  p->opts = NULL;
  if (err != 0) {
    /* run() may have left closes in flight; the last one frees. */
    p->run_failed = 1;
    maybe_free(p);
    return err;
  }
  if (id_out != NULL)
    memcpy(id_out, p->id, UVT_ID_MAX);
  return 0;
}

int uvt_process_pid(uvt_registry_t *reg, const char *id,
                    const uvt_agent_t *caller) {
  uvt_task_t *t;
  uvt__proc_t *p;
  int err;

  /* The registry's lookup applies the fence (R-OWN-2). */
  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  if (t->dropped || t->release_called)
    return UVT_ENOTASK;
  if (t->hooks.cancel != hook_cancel)
    return UV_EINVAL; /* another producer's task */
  p = t->arg;
  return (int)p->pid;
}

/* ---- M-MCP-5: a peek at the last unread line (for progress) ----------- */

/* Copy the last line of `b` that has something besides white space (after
 * its last carriage return: a progress bar's latest state) into `buf`,
 * cut to `size` - 1 bytes; 0 bytes if there is none.  Nothing is consumed. */
static size_t last_line(const uvt__outbuf_t *b, char *buf, size_t size) {
  size_t end = b->len;
  size_t start;
  size_t n;
  size_t i;
  char c;

  if (b->len == 0 || b->alloc == 0)
    return 0;
  for (;;) {
    /* Skip line ends and blanks at the end of what is left. */
    while (end > 0) {
      c = b->ring[(b->head + end - 1) % b->alloc];
      if (c != '\n' && c != '\r' && c != ' ' && c != '\t')
        break;
      end--;
    }
    if (end == 0)
      return 0;
    start = end;
    while (start > 0) {
      c = b->ring[(b->head + start - 1) % b->alloc];
      if (c == '\n' || c == '\r')
        break;
      start--;
    }
    if (end > start)
      break;
  }
  n = end - start < size - 1 ? end - start : size - 1;
  for (i = 0; i < n; i++)
    buf[i] = b->ring[(b->head + start + i) % b->alloc];
  return n;
}

int uvt__process_last_line(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller, char *buf, size_t size) {
  uvt_task_t *t;
  uvt__proc_t *p;
  size_t n;
  int err;

  if (buf == NULL || size == 0)
    return UV_EINVAL;
  buf[0] = '\0';
  err = uvt__lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  if (t->dropped || t->release_called || t->hooks.cancel != hook_cancel)
    return UV_EINVAL;
  p = t->arg;
  /* stdout first; a command that only writes to stderr shows that. */
  n = last_line(&p->out.buf, buf, size);
  if (n == 0)
    n = last_line(&p->err.buf, buf, size);
  buf[n] = '\0';
  return 0;
}
