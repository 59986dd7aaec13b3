/* The process producer (docs/contract.md §3): one task per child process group,
 * built on the public producer API (uvt_start + hooks).
 *
 * Handles per task: two pipes (stdout, stderr), a poll handle on the
 * leader's pidfd (exit detection without SIGCHLD; where there are no
 * pidfds the registry's one SIGCHLD watch reaps it, reap.c), and three
 * timers (kill grace, drain, max runtime).  The task settles when the leader
 * was reaped, both pipes are closed and every handle's close callback has run
 * (P-END-1). The per-task state is freed once it has settled, its record was
 * released and no handle is open; disposal may reopen the kill timer to stop
 * group survivors (P-KILL-4) between settle and release. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "leaf/opts.h"
#include "process-internal.h"

/* Bytes read per system call (at most). */
#define READ_CHUNK (64 * 1024)
/* At drain time, read at most this much of what a pipe still holds. */
#define DRAIN_LIMIT (1024 * 1024)
/* The largest stdout pipe a host can ask for (stdout_pipe_bytes): the
 * system's own limit for unprivileged users by default
 * (fs.pipe-max-size); a root host is not let past it either. */
#define STDOUT_PIPE_MAX (1024 * 1024)
/* How often disposal checks whether a group is gone. */
#define QUIESCE_POLL_MS 10
/* How often a kill whose leader is gone (or whose grace passed) looks at
 * the session, and sends SIGKILL again after the grace (P-KILL-7). */
#define KILL_POLL_MS 10
/* How long SIGKILL may go unanswered before the task settles anyway: a
 * process in uninterruptible sleep (a hung network file system) cannot die
 * until its I/O returns, and must not hold the task open for ever.  Tests
 * shorten it (process-internal.h). */
int uvt__process_kill_give_up_ms = 10000;

/* L-LIM-1: does the task ask for any limit? */
static int limited(const uvt_process_limits_t *l) {
  return l->memory_bytes > 0 || l->max_processes > 0 || l->cpu_percent > 0;
}

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

/* The name of a libuv error, also for the errno values libuv 1.44 has no
 * name for (ENOEXEC). */
static const char *err_name(int err, char *buf, size_t size) {
  const char *name = uvt_err_name(err);
  if (strcmp(name, "UNKNOWN") != 0)
    return name;
  if (err == -ENOEXEC)
    return "ENOEXEC";
  snprintf(buf, size, "errno %d", -err);
  return buf;
}

/* ---- handles ---------------------------------------------------------- */

/* R-TIME-1: every duration counts from the call that sets it.  A host that
 * blocked its loop outside our callbacks leaves the loop's cached time
 * stale; refresh it (one clock read) before arming a timer. */
static void arm(uv_timer_t *timer, uv_timer_cb cb, uint64_t timeout_ms) {
  uv_update_time(timer->loop);
  uv_timer_start(timer, cb, timeout_ms, 0);
}

/* Whole milliseconds since t0_ns, rounded up: libuv's timers count whole
 * milliseconds of the loop's clock, so one may fire up to 1 ms before the
 * high-resolution clock says its full timeout passed. */
static uint64_t ms_since(uint64_t t0_ns) {
  return (uv_hrtime() - t0_ns + 999999u) / 1000000u;
}

/* SIGKILL to every process of the task's session now (P-KILL-1,
 * P-KILL-7), remembered in killed_now: a kill timer's later passes send it
 * again to what the session still holds. */
static int kill_now(uvt__proc_t *p) {
  p->killed_now = 1;
  return uvt__members_signal(p, SIGKILL);
}

static void proc_free(uvt__proc_t *p) {
  uvt__procs_t *ps = p->counted ? p->procs : NULL;

  /* D-6: a start that failed leaves no file behind. */
  if (p->procs != NULL)
    uvt__durable_release(p);
  if (p->out.file && p->out.fd >= 0)
    close(p->out.fd);
  if (p->err.file && p->err.fd >= 0)
    close(p->err.fd);
  uvt__reap_unwatch(p);
  uvt__notify_cancel(p);
  if (p->cg)
    uvt__cgroot_release(ps != NULL ? ps : p->procs, &p->cgroup);
  p->cg = 0;
  uvt__members_untrack(p);
  uvt__spawn_free(p->spawn); /* one that never left */
  /* S-9: the lifeline: a sandbox still running ends with its task. */
  if (p->sb_status_fd >= 0)
    close(p->sb_status_fd);
  uvt__outbuf_free(&p->out.buf);
  uvt__outbuf_free(&p->err.buf);
  uvt__free(p->scratch);
  uvt__free(p->esc);
  uvt__free(p);
  /* R-CLOSE-2: a closing context waits for the last of its tasks. */
  if (ps != NULL && --ps->procs_live == 0)
    uvt__procs_maybe_closed(ps);
}

static void maybe_free(uvt__proc_t *p) {
  if (p->closing != 0)
    return;
  if (p->run_failed || (p->settled && p->released))
    proc_free(p);
}

static void settle(uvt__proc_t *p);
static int quiesce_start(uvt__proc_t *p);

static void closed(uvt__proc_t *p, uv_handle_t *h) {
  if (h == (uv_handle_t *)&p->exit_poll && p->pidfd >= 0) {
    close(p->pidfd);
    p->pidfd = -1;
  }
  if (h == (uv_handle_t *)&p->in.poll)
    uvt__stdin_closed(p);
  if (h == (uv_handle_t *)&p->kill_timer)
    p->kill_timer_closing = 0;
  p->closing--;
  /* P-OUT-6: a stream that lingers does not hold the settle up. */
  if (p->closing == p->lingering && p->finishing && !p->settled)
    settle(p);
  maybe_free(p);
}

void uvt__proc_on_close(uv_handle_t *h) {
  /* Pipes carry their uvt__stream_t, everything else the task state. */
  if (h->type == UV_NAMED_PIPE)
    closed(((uvt__stream_t *)h->data)->proc, h);
  else
    closed(h->data, h);
}

/* The task's input (stdin.c) calls back through these: its poll
 * handle's close, and a durable task's FIFO ended by the host (D-5). */
static const uvt__stdin_cbs_t stdin_cbs = {uvt__proc_on_close,
                                           uvt__durable_stdin_closed};

/* A terminal's read handle: its descriptor is ours to close. */
static void on_tty_close(uv_handle_t *h) {
  uvt__stream_t *s = h->data;

  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  closed(s->proc, h);
}

static void close_handle(uvt__proc_t *p, unsigned bit, uv_handle_t *h) {
  if (!(p->live & bit))
    return;
  p->live &= ~bit;
  if (bit == UVT__H_KILL)
    p->kill_timer_closing = 1;
  uv_close(h, uvt__proc_on_close);
}

static void close_stream(uvt__stream_t *s) {
  if (!s->open)
    return;
  s->open = 0;
  s->closed = 1;
  if (s->linger) {
    s->linger = 0;
    s->proc->lingering--;
  }
  if (s->file) {
    /* D-2: a file in the state directory, maybe watched. */
    if (s->fd >= 0)
      close(s->fd);
    s->fd = -1;
    if (s->watching) {
      s->watching = 0;
      uv_close((uv_handle_t *)&s->change, uvt__proc_on_close);
    }
    return;
  }
  if (s->tty)
    uv_close((uv_handle_t *)&s->tty_poll, on_tty_close);
  else
    uv_close((uv_handle_t *)&s->pipe, uvt__proc_on_close);
}

/* P-KILL-7: a kill (or the runtime limit) was asked for and the task's
 * session (and cgroup) may still hold a process: the task may not settle
 * yet. */
static int kill_pending(uvt__proc_t *p) {
  return p->kill_requested && p->pid > 0 && !p->kill_gave_up &&
         !uvt__members_known_empty(p);
}

/* A stream the task waits for: open, and not lingering (P-OUT-6). */
static int holds_up(const uvt__stream_t *s) {
  return s->open && !s->linger;
}

/* Quiescence (P-END-1): leader reaped and both pipes closed (or lingering
 * past the drain, P-OUT-6); close what is left and settle when the last
 * close callback has run. */
static void maybe_finish(uvt__proc_t *p) {
  if (p->finishing || !p->reaped || holds_up(&p->out) || holds_up(&p->err))
    return;
  /* P-KILL-7: a kill ends with nothing of the task left; the kill timer
   * (or a pass finding the session empty) calls again. */
  if (kill_pending(p))
    return;
  p->finishing = 1;
  /* Input nobody will read any more is dropped (P-IN-1: later writes get
   * UV_EPIPE). */
  uvt__stdin_close(p);
  close_handle(p, UVT__H_POLL, (uv_handle_t *)&p->exit_poll);
  close_handle(p, UVT__H_KILL, (uv_handle_t *)&p->kill_timer);
  close_handle(p, UVT__H_DRAIN, (uv_handle_t *)&p->drain_timer);
  close_handle(p, UVT__H_RUNTIME, (uv_handle_t *)&p->runtime_timer);
  /* The settle itself waits for the last close callback (on_close), never
   * inside a hook. */
}

/* ---- output ----------------------------------------------------------- */

/* Where the next bytes of `s` go, so a read system call writes them in
 * place: the stream's ring (uvt__outbuf_space), also a new one when a
 * read took the last one over (its hint, uvt__output_take: the bytes then
 * go from the pipe to the next read's block with no copy).  Else, while
 * the stream never had a ring (a read of the end alone then allocates
 * nothing) or when the ring cannot take the read in place (full, with
 * on_drop: M-TOOLS-10), the context's landing block; else the scratch
 * buffer.  Bytes read to either of the last two go through
 * uvt__outbuf_push (store_bytes).  With output_backpressure no more than
 * the room below the cap is asked for, so nothing unread is ever
 * overwritten (P-OUT-4); 0 when there is no room. */
static size_t read_room(uvt__stream_t *s, char **at) {
  uvt__proc_t *p = s->proc;
  size_t want = READ_CHUNK;
  size_t n;

  if (p->backpressure && !s->drained)
    want = s->buf.len >= s->buf.cap         ? 0
           : s->buf.cap - s->buf.len < want ? s->buf.cap - s->buf.len
                                            : want;
  if (want == 0)
    return 0;
  n = s->buf.alloc == 0 && s->buf.hint == 0
          ? 0
          : uvt__outbuf_space(&s->buf, want, at);
  if (n > 0)
    return n;
  if (p->procs != NULL) {
    if (p->procs->landing == NULL)
      p->procs->landing = uvt__malloc(READ_CHUNK);
    if (p->procs->landing != NULL) {
      *at = p->procs->landing;
      return want;
    }
  }
  if (p->scratch == NULL)
    p->scratch = uvt__malloc(READ_CHUNK);
  *at = p->scratch;
  return p->scratch != NULL ? READ_CHUNK : 0;
}

/* P-OUT-4: a stream at its cap is not read until a read makes room. */
static void maybe_pause(uvt__stream_t *s) {
  if (!s->proc->backpressure || s->drained || !s->open || s->paused ||
      s->buf.len < s->buf.cap)
    return;
  if (s->file)
    ; /* D-2: simply not tailed while paused */
  else if (s->tty)
    uv_poll_stop(&s->tty_poll);
  else
    uv_read_stop((uv_stream_t *)&s->pipe);
  s->paused = 1;
}

/* `n` bytes were read to `at` (from read_room): into the ring, or copied
 * there now (the landing block is the next read's). */
static void store_bytes(uvt__stream_t *s, const char *at, size_t n) {
  uvt__proc_t *p = s->proc;

  /* M-TOOLS-17: every byte, once, before the cap may drop it. */
  if (p->on_tee != NULL)
    p->on_tee(p->id, s == &p->err, at, n, p->on_tee_data);
  if (at == p->scratch || (p->procs != NULL && at == p->procs->landing))
    uvt__outbuf_push(&s->buf, at, n);
  else
    uvt__outbuf_commit(&s->buf, n);
}

static void got_bytes(uvt__stream_t *s, const char *at, size_t n) {
  uvt__proc_t *p = s->proc;

  store_bytes(s, at, n);
  maybe_pause(s);
  uvt__notify_output(p);
}

size_t uvt__stream_room(uvt__stream_t *s, char **at) {
  return read_room(s, at);
}

void uvt__stream_got(uvt__stream_t *s, const char *at, size_t n) {
  got_bytes(s, at, n);
}

void uvt__stream_maybe_pause(uvt__stream_t *s) {
  maybe_pause(s);
}

void uvt__stream_at_end(uvt__stream_t *s) {
  close_stream(s);
  maybe_finish(s->proc);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  char *at = NULL;

  (void)suggested;
  buf->len = read_room(h->data, &at);
  buf->base = at;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  uvt__stream_t *s = stream->data;
  uvt__proc_t *p = s->proc;

  if (nread > 0) {
    got_bytes(s, buf->base, (size_t)nread);
    return;
  }
  if (nread == 0)
    return;
  if (nread == UV_ENOBUFS && p->backpressure && s->buf.len >= s->buf.cap) {
    maybe_pause(s); /* at the cap: not an end */
    return;
  }
  /* End of stream (or an error, or no memory to read into): this pipe is
   * done. */
  close_stream(s);
  maybe_finish(p);
}

/* A terminal's master side is read here, not by libuv's stream reader:
 * that one takes POLLHUP after a short read for the end of the stream,
 * which is right for a pipe but not for a terminal whose slave side
 * closed, where the kernel hands over what is still buffered a few KiB
 * per read.  So: read until EAGAIN (at most a few chunks per turn, as
 * libuv does), and only EIO (every slave descriptor closed and nothing
 * left) or end of file ends the stream (P-PTY-2). */
static void on_tty_io(uv_poll_t *h, int status, int events) {
  uvt__stream_t *s = h->data;
  uvt__proc_t *p = s->proc;
  char *at;
  size_t room;
  ssize_t n;
  int turns = 32;

  (void)status;
  (void)events;
  while (s->open && !s->paused && turns-- > 0) {
    room = read_room(s, &at);
    if (room == 0) {
      maybe_pause(s);
      return;
    }
    do
      n = read(s->fd, at, room);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
      got_bytes(s, at, (size_t)n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    close_stream(s);
    maybe_finish(p);
    return;
  }
}

static int start_reading(uvt__stream_t *s) {
  if (s->file) {
    uvt__durable_want_tail(s->proc);
    return 0;
  }
  if (s->tty)
    return uv_poll_start(&s->tty_poll, UV_READABLE, on_tty_io);
  return uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
}

static void resume_stream(uvt__stream_t *s) {
  if (!s->paused || !s->open || s->buf.len >= s->buf.cap)
    return;
  s->paused = 0;
  if (s->file) {
    uvt__durable_want_tail(s->proc);
    return;
  }
  if (start_reading(s) != 0) {
    close_stream(s);
    maybe_finish(s->proc);
  }
}

void uvt__proc_resume(uvt__proc_t *p) {
  /* D-3: what a read consumed, for a restart to resume from. */
  if (p->dur != NULL)
    uvt__durable_consumed(p);
  resume_stream(&p->out);
  resume_stream(&p->err);
}

/* Read what the pipe holds now, without waiting (at most DRAIN_LIMIT).
 * With output_backpressure the cap no longer holds here: what the pipe
 * holds is kept beyond it, so no byte that reached the pipe is lost
 * (P-OUT-4).  Returns 1 when the read found the end of file. */
static int drain_read(uvt__proc_t *p, uvt__stream_t *s) {
  uv_os_fd_t fd = s->fd;
  size_t total = 0;
  ssize_t n = -1;
  char *at;
  size_t room;

  if (p->backpressure) {
    s->drained = 1;
    s->buf.cap = s->buf.len + DRAIN_LIMIT;
  }
  if (s->tty || uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0) {
    while (total < DRAIN_LIMIT) {
      room = read_room(s, &at);
      if (room == 0)
        break;
      n = read(fd, at, room);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      store_bytes(s, at, (size_t)n);
      total += (size_t)n;
    }
  }
  if (total > 0)
    uvt__notify_output(p);
  /* A terminal whose every slave descriptor closed reads EIO. */
  return n == 0 || (n < 0 && errno == EIO);
}

/* Read what the pipe holds now, then close it; a writer still writing
 * after that gets EPIPE. */
static void drain_stream(uvt__proc_t *p, uvt__stream_t *s) {
  if (!s->open)
    return;
  if (s->file) {
    /* D-2: what the file holds now (the cap's rules apply as they read).
     * With backpressure (P-OUT-4) nothing is dropped: the file was the
     * buffer, so it is read as reads make room, and the stream ends
     * where a read finds its end (uvt__stream_at_end). */
    s->paused = 0;
    s->ending = p->backpressure;
    if (uvt__durable_tail(p, s, 0) > 0)
      uvt__notify_output(p);
    if (!p->backpressure)
      close_stream(s);
    return;
  }
  drain_read(p, s);
  close_stream(s);
}

/* P-OUT-6: may the task settle with its pipes still open?  Only a task
 * that ended on its own (no kill, no runtime limit, no stop asked for at
 * its settle) whose host is not taking it down: the pipes are then held by
 * what it left running, which must not get SIGPIPE from us. */
static int may_linger(uvt__proc_t *p) {
  return !p->kill_requested && !p->stop_at_settle && !p->released &&
         !p->not_started && p->pid > 0 && p->task != NULL &&
         !uvt_task_host_leaving(p->task) &&
         (p->procs == NULL || !p->procs->closing);
}

static void linger(uvt__proc_t *p, uvt__stream_t *s) {
  size_t cap = s->buf.cap;

  if (!s->open || s->linger)
    return;
  if (s->file) {
    /* D-2: a file has no holders to wait for: what it holds is read. */
    drain_stream(p, s);
    return;
  }
  if (p->backpressure) {
    /* P-OUT-4, as at a drain: what the pipe holds now is kept beyond the
     * cap.  Then the cap holds again: the holders wait in write until a
     * read makes room, and no byte is dropped. */
    if (drain_read(p, s)) {
      close_stream(s);
      return;
    }
    s->drained = 0;
    s->buf.cap = cap;
    maybe_pause(s);
  }
  s->linger = 1;
  p->lingering++;
}

/* P-OUT-6: the lingering streams' end (a kill of the ended task, its
 * disposal): what their pipes hold now is read, then they close. */
static void end_linger(uvt__proc_t *p) {
  if (p->out.linger)
    drain_stream(p, &p->out);
  if (p->err.linger)
    drain_stream(p, &p->err);
}

int uvt__proc_lingering(uvt__proc_t *p) {
  uvt__stream_t *ss[2] = {&p->out, &p->err};
  struct pollfd pfd;
  uv_os_fd_t fd;
  int i;

  for (i = 0; i < 2; i++) {
    if (!ss[i]->linger)
      continue;
    fd = ss[i]->fd;
    if (!ss[i]->tty && uv_fileno((uv_handle_t *)&ss[i]->pipe, &fd) != 0)
      continue;
    /* Every holder gone: the end of file is due, but the loop has not
     * read it yet.  Read what is left and close now, so that the answer
     * is true at once. */
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR)))
      drain_stream(p, ss[i]);
  }
  /* A kill of the ended task closes them once its processes are gone
   * (quiesce_done): from the kill on they are not "still read". */
  return p->settled && p->lingering > 0 && !p->quiescing;
}

static void on_drain_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  if (may_linger(p)) {
    /* P-OUT-6: what still holds a pipe (a `server &`) writes on; the pipe
     * is read as before, and the task settles without waiting for it. */
    linger(p, &p->out);
    linger(p, &p->err);
  } else {
    drain_stream(p, &p->out);
    drain_stream(p, &p->err);
  }
  maybe_finish(p);
}

/* ---- the leader ------------------------------------------------------- */

/* There is no leader any more (reaped, or never made): no kill or runtime
 * limit is due, and the pipes get the drain's time to end (P-OUT-3). */
static void on_kill_timer(uv_timer_t *timer);

/* There is no leader any more (reaped, or never made): no runtime limit is
 * due, and the pipes get the drain's time to end (P-OUT-3).  A kill in
 * progress goes on until the session is empty (P-KILL-7): its timer now
 * looks every KILL_POLL_MS (a pass over /proc, batched), sending SIGKILL
 * from the end of the grace on. */
static void no_leader(uvt__proc_t *p) {
  if (p->live & UVT__H_KILL) {
    if (kill_pending(p)) {
      uv_update_time(p->loop);
      uv_timer_start(&p->kill_timer, on_kill_timer, 0, KILL_POLL_MS);
    } else {
      uv_timer_stop(&p->kill_timer);
    }
  }
  if (p->live & UVT__H_RUNTIME)
    uv_timer_stop(&p->runtime_timer);
  if ((p->out.file || p->err.file) && (p->out.open || p->err.open) &&
      (p->pid <= 0 || uvt__members_known_empty(p))) {
    /* D-2: files have no end of stream; with nobody left in the session
     * to write them, what they hold now is all there is. */
    drain_stream(p, &p->out);
    drain_stream(p, &p->err);
  }
  if (p->out.open || p->err.open)
    arm(&p->drain_timer, on_drain_timer, p->drain_ms);
  maybe_finish(p);
}

static void leader_exited(uvt__proc_t *p, int status, int lost) {
  uvt__reap_unwatch(p);
  uvt__spawner_reaped(p->procs, p->pid);
  p->reaped = 1;
  /* S-2: a sandboxed command's own wait status, as uvtasks-sandbox passed
   * it out (bwrap's says 128 + N for a death by signal N). */
  if (p->sandboxed && !lost)
    uvt__sandbox_status(p, &status);
  p->status = status;
  p->status_lost = lost;
  /* P-KILL-3: nothing is signalled after this point (disposal aside). */
  close_handle(p, UVT__H_POLL, (uv_handle_t *)&p->exit_poll);
  no_leader(p);
}

int uvt__proc_check_leader(uvt__proc_t *p) {
  int status = 0;
  pid_t r;

  if (p->reaped)
    return 1;
  if (p->pid <= 0)
    return 0; /* the spawn is out: no leader yet */
  if (p->adopted) {
    /* D-3: a keeper taken back is (in general) not our child: its end is
     * seen through its pidfd and read from its status file. */
    int lost = 0;
    if (!uvt__durable_leader_status(p, &status, &lost))
      return 0;
    leader_exited(p, status, lost);
    return 1;
  }
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

  if (!uvt__proc_check_leader(p) && status < 0) {
    /* The pidfd cannot be watched any more; the leader is alive.  Keep
     * polling rather than lose its exit. */
    uv_poll_start(&p->exit_poll, UV_READABLE, on_exit_poll);
  }
}

/* P-KILL-7 (replacing P-KILL-1's "if the leader has not exited"): once
 * grace_ms has passed since the kill, every process still in the session
 * (and cgroup) gets SIGKILL, leader reaped or not, and again on every tick
 * until none is left, so that what a fork bomb forks between two passes is
 * stopped too.  Each pass checks membership as P-KILL-3 asks (members.c).
 * Before the grace has passed (the leader died of SIGTERM), the ticks only
 * look, so the task settles as soon as its session is empty. */
static void on_kill_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  uvt__proc_check_leader(p);
  if (p->finishing)
    return; /* the reap found nothing left: the timer is closing */
  if (!kill_pending(p)) {
    uv_timer_stop(timer);
    maybe_finish(p);
    return;
  }
  if (p->killed_now &&
      ms_since(p->kill_start_ns) >=
          p->grace_ms + (uint64_t)uvt__process_kill_give_up_ms) {
    p->kill_gave_up = 1;
    uvt_log(p->reg, UVT_LOG_WARN,
            "task %s: processes of its session outlived SIGKILL for %d ms "
            "(in uninterruptible sleep?); it ends without waiting for them",
            p->id, uvt__process_kill_give_up_ms);
    uv_timer_stop(timer);
    maybe_finish(p);
    return;
  }
  if (p->killed_now || ms_since(p->kill_start_ns) >= p->grace_ms) {
    kill_now(p);
  } else {
    uvt__members_check(p);
  }
  /* A pass run at once (the context is closing) may have finished. */
  if (p->finishing || !(p->live & UVT__H_KILL))
    return;
  if (uv_timer_get_repeat(timer) == 0) {
    uv_update_time(p->loop);
    uv_timer_start(timer, on_kill_timer, KILL_POLL_MS, KILL_POLL_MS);
  }
}

/* The first stop request: SIGTERM to the session now, SIGKILL after the
 * grace (P-KILL-1, P-KILL-5). */
static int request_stop(uvt__proc_t *p) {
  int err = uvt__members_signal(p, SIGTERM);
  if (err != 0)
    return err;
  p->kill_requested = 1;
  p->kill_start_ns = uv_hrtime();
  /* P-SPAWN-6: a kill before the child exists: it is never spawned (or,
   * if the spawner got there first, signalled when the answer comes). */
  if (p->spawning)
    atomic_store(&p->spawn->cancelled, 1);
  arm(&p->kill_timer, on_kill_timer, p->grace_ms);
  return 0;
}

static void on_runtime_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  /* P-LIMIT-1: stopped like a kill, unless a kill came first. */
  if (uvt__proc_check_leader(p) || p->kill_requested)
    return;
  if (request_stop(p) == 0) {
    p->timed_out = 1;
    p->timed_out_ms = ms_since(p->start_ns);
    if (p->dur != NULL)
      uvt__durable_killed(p, 't'); /* D-3: a restart keeps stopping it */
  }
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

/* "100 MiB", "2 GiB", "1536 KiB", or bytes. */
static void size_text(uint64_t n, char *buf, size_t size) {
  if (n >= (1ull << 30) && n % (1ull << 30) == 0)
    snprintf(buf, size, "%llu GiB", (unsigned long long)(n >> 30));
  else if (n >= (1ull << 20) && n % (1ull << 20) == 0)
    snprintf(buf, size, "%llu MiB", (unsigned long long)(n >> 20));
  else if (n % 1024 == 0)
    snprintf(buf, size, "%llu KiB", (unsigned long long)(n >> 10));
  else
    snprintf(buf, size, "%llu bytes", (unsigned long long)n);
}

/* L-LIM-2: what the task's limits did, said in its detail.  An end by the
 * OOM killer (the leader died of a signal, or the command failed after
 * one of its processes did) is `killed`, "out of memory (limit 100 MiB)";
 * never the words of a kill (P-END-2). */
static void limits_detail(uvt__proc_t *p, uvt_outcome_t *o, char *detail,
                          size_t size, int ended_badly) {
  uvt__cg_events_t ev;
  uint64_t ooms;
  uint64_t refused;
  char mem[32];
  size_t used;

  if (!p->cg || uvt__cg_events(&p->cgroup, &ev, 0) != 0)
    return;
  p->cgroup.oom_last = ev.oom_kills;
  p->cgroup.pids_last = ev.pids_max;
  ooms =
      ev.oom_kills > p->cgroup.oom_base ? ev.oom_kills - p->cgroup.oom_base : 0;
  refused =
      ev.pids_max > p->cgroup.pids_base ? ev.pids_max - p->cgroup.pids_base : 0;
  size_text(p->cgroup.limits.memory_bytes, mem, sizeof(mem));
  if (ooms > 0 && p->cgroup.limits.memory_bytes > 0) {
    if (ended_badly && !p->kill_requested) {
      o->status = UVT_KILLED;
      snprintf(detail, size, "out of memory (limit %s)", mem);
    } else {
      used = strlen(detail);
      snprintf(detail + used, size - used,
               "; out of memory (limit %s): %llu process%s killed", mem,
               (unsigned long long)ooms, ooms == 1 ? "" : "es");
    }
  }
  if (refused > 0 && p->cgroup.limits.max_processes > 0) {
    used = strlen(detail);
    snprintf(detail + used, size - used, "; process limit reached (%u)",
             (unsigned)p->cgroup.limits.max_processes);
  }
}

static void settle(uvt__proc_t *p) {
  uvt_outcome_t o;
  grow_t g;
  char detail[256];
  char sigbuf[32];
  int code = 0;
  int sig = 0;

  memset(&o, 0, sizeof(o));
  memset(&g, 0, sizeof(g));
  if (p->dur != NULL && p->not_started && !p->detached) {
    int e = p->spawn_err;
    if (e == 0 && p->pid > 0)
      e = uvt__durable_spawn_error(p);
    if (p->dur_err != 0 || (e == 0 && p->adopted && !p->kill_requested)) {
      /* D-2, D-3: nothing ran, and not because of a kill. */
      o.status = UVT_FAILED;
      if (p->dur_err != 0)
        snprintf(detail, sizeof(detail),
                 "not started: the state directory's journal could not "
                 "record it (%s)",
                 err_name(p->dur_err, sigbuf, sizeof(sigbuf)));
      else
        snprintf(detail, sizeof(detail),
                 "not started: its host stopped before the spawn");
      goto decided;
    }
    p->spawn_err = e;
  }
  if (p->detached) {
    /* D-1: the host leaves; the task runs on for the next one. */
    o.status = UVT_KILLED;
    snprintf(detail, sizeof(detail), "detached: keeps running as pid %d",
             (int)p->pid);
    goto decided;
  }
  if (p->dur != NULL && !p->not_started && !p->status_lost &&
      WIFEXITED(p->status) && WEXITSTATUS(p->status) == 127 &&
      (p->spawn_err = uvt__durable_spawn_error(p)) != 0)
    p->not_started = 1; /* the keeper could not run the command */
  if (p->not_started && p->spawn_err != 0) {
    /* P-SPAWN-4: what only the spawn could report. */
    o.status = UVT_FAILED;
    snprintf(detail, sizeof(detail), "spawn failed: %s",
             err_name(p->spawn_err, sigbuf, sizeof(sigbuf)));
  } else if (p->not_started) {
    /* P-SPAWN-6: stopped before the child existed; nothing ran. */
    o.status = UVT_KILLED;
    if (p->timed_out)
      snprintf(detail, sizeof(detail), "timed out after %llu ms",
               (unsigned long long)p->timed_out_ms);
    else
      snprintf(detail, sizeof(detail), "killed before it started");
  } else if (p->status_lost && p->dur != NULL) {
    o.status = UVT_FAILED;
    snprintf(detail, sizeof(detail),
             "exit status lost: its keeper (pid %d) ended without recording "
             "it",
             (int)p->pid);
  } else if (p->status_lost) {
    o.status = UVT_FAILED;
    snprintf(detail, sizeof(detail), "exit status lost: reaped elsewhere");
  } else {
    if (WIFSIGNALED(p->status))
      sig = WTERMSIG(p->status);
    else
      code = WEXITSTATUS(p->status);
    if (p->timed_out) {
      o.status = UVT_KILLED;
      /* What really elapsed from the start call to the SIGTERM: at least
       * max_runtime_ms, more when the loop ran late. */
      snprintf(detail, sizeof(detail), "timed out after %llu ms",
               (unsigned long long)p->timed_out_ms);
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
    limits_detail(p, &o, detail, sizeof(detail),
                  !p->timed_out && (sig != 0 || code != 0));
  }
decided:
  /* P-LEFT-1: what the task left running is named in the detail it settles
   * with (a kill leaves nothing, P-KILL-7). */
  if (!p->detached && !p->not_started && p->pid > 0 && !p->kill_requested &&
      !uvt__members_known_empty(p)) {
    int left = uvt__members_leftovers(p);
    size_t used = strlen(detail);
    if (left > 0)
      snprintf(detail + used, sizeof(detail) - used,
               "; %d process%s still running", left, left == 1 ? "" : "es");
  }
  /* A group with nothing left keeps these counts as its last (cgroup.c:
   * the pool hands them to the next task as its base). */
  if (p->cg && !p->not_started && uvt__members_known_empty(p))
    p->cgroup.final = 1;
  o.detail = detail;
  /* The unread remainder becomes the outcome's output; the registry serves
   * it to later reads, uvt_process_read() through the layout (P-RES-1).
   * P-OUT-6: while a stream lingers, what is unread stays in the streams
   * and every read of the ended task takes it from there (hook_late), so
   * the bytes written after the end follow in order. */
  if (p->lingering == 0 && uvt__output_collect(&p->out.buf, 1, &p->err.buf, 1,
                                               grow_sink, &g, &p->fin) == 0) {
    o.output = g.base;
    o.output_len = g.len;
    p->fin_ok = 1;
  }
  /* P-EVT-1: nothing is announced from the terminal transition on. */
  uvt__notify_cancel(p);
  /* Issue #12: what the task buffered goes back once the burst is over. */
  if (p->lingering == 0) {
    uvt__trim_note(p->procs, p->out.buf.alloc);
    uvt__trim_note(p->procs, p->err.buf.alloc);
    uvt__outbuf_free(&p->out.buf);
    uvt__outbuf_free(&p->err.buf);
    uvt__free(p->scratch);
    p->scratch = NULL;
  }
  uvt__trim_note(p->procs, g.cap);
  p->settled = 1;
  uvt_task_settle(p->task, &o);
  uvt__free(g.base);
  if (p->stop_at_settle) {
    p->stop_at_settle = 0;
    quiesce_start(p);
  }
}

/* ---- hooks ------------------------------------------------------------ */

/* D-1: the host leaves (registry close, the owner's disposal) and the
 * durable task runs on: nothing is signalled; every handle of ours
 * closes and the record settles `killed`, "detached: ...", to be dropped.
 * The journal keeps it for the next host. */
static void detach(uvt__proc_t *p) {
  if (p->spawning) {
    p->detach_pending = 1; /* done when the spawner answers */
    return;
  }
  p->detached = 1;
  /* S-11 with D-1: a subreaper host stops its strays at close; this
   * keeper is not one. */
  if (!p->adopted && p->procs != NULL && p->pid > 0 &&
      uvt__members_keep(p->procs, p->pid) != 0)
    uvt_log(p->reg, UVT_LOG_WARN,
            "task %s: out of memory: its keeper (pid %d) may be stopped "
            "at this host's end",
            p->id, (int)p->pid);
  uvt__durable_release(p); /* the entry stays, without its task */
  p->reaped = 1;           /* no wait of ours will see its end */
  close_handle(p, UVT__H_POLL, (uv_handle_t *)&p->exit_poll);
  close_stream(&p->out);
  close_stream(&p->err);
  uvt__reap_unwatch(p);
  maybe_finish(p);
}

static int hook_cancel(uvt_task_t *t, const char *reason) {
  uvt__proc_t *p = uvt_task_arg(t);

  if (p->dur != NULL && uvt_task_host_leaving(t) && !p->kill_requested &&
      !uvt__durable_stopping(p)) {
    if (!p->detached && !p->detach_pending && !uvt__proc_check_leader(p))
      detach(p);
    return 0;
  }

  /* P-KILL-2/3: a leader that already exited keeps its outcome and is not
   * signalled; but a kill in progress that is waiting for the rest of the
   * session, asked again, means "stop now" (R-KILL-3, P-KILL-7). */
  if (uvt__proc_check_leader(p)) {
    if (!p->finishing && kill_pending(p)) {
      kill_now(p);
    } else if (!p->kill_requested && !p->settled && p->pid > 0) {
      /* P-KILL-7: the leader ended on its own while its output drains;
       * the outcome stays its own (P-KILL-2), but what it left running is
       * stopped once it settled, as a kill of the ended task would. */
      p->stop_at_settle = 1;
    }
    return 0;
  }
  p->cancels++;
  if (!p->kill_requested) {
    int err = request_stop(p);
    if (err == 0 && p->dur != NULL)
      uvt__durable_killed(p, 'k'); /* D-3: a restart keeps stopping it */
    return err;
  }
  /* The runtime limit already sent SIGTERM: the owner's first kill lets
   * that grace run; a repeated cancel means "stop now" (R-KILL-3). */
  if (p->timed_out && p->cancels == 1)
    return 0;
  /* SIGKILL now, and again on every tick until nothing is left. */
  if (p->live & UVT__H_KILL) {
    uv_update_time(p->loop);
    uv_timer_start(&p->kill_timer, on_kill_timer, KILL_POLL_MS, KILL_POLL_MS);
  }
  return kill_now(p);
}

static int buf_sink(void *ctx, const void *bytes, size_t len) {
  return uvt_buf_append(ctx, bytes, len);
}

static int hook_read(uvt_task_t *t, uvt_buf_t *out) {
  uvt__proc_t *p = uvt_task_arg(t);
  char *text;
  size_t len;
  size_t size;

  int err;

  if (p->dur != NULL && !p->settled) {
    /* D-2: what the files hold now, not only what a change told of. */
    uvt__durable_tail(p, &p->out, 0);
    uvt__durable_tail(p, &p->err, 0);
  }
  if (out->base == NULL &&
      uvt__output_take(&p->out.buf, p->out.closed, &p->err.buf, p->err.closed,
                       &text, &len, &size)) {
    uvt_buf_adopt(out, text, len, size);
    uvt__trim_note(p->procs, size); /* the host frees it after its read */
    uvt__proc_resume(p);
    return 0;
  }
  err = uvt__output_collect(&p->out.buf, p->out.closed, &p->err.buf,
                            p->err.closed, buf_sink, out, NULL);
  if (err == 0) {
    uvt__trim_note(p->procs, out->len);
    uvt__proc_resume(p);
  }
  return err;
}

/* P-OUT-6: an ended task's reads after the remainder: what its lingering
 * streams got since (and what they held at the settle). */
static int hook_late(uvt_task_t *t, uvt_buf_t *out) {
  uvt__proc_t *p = uvt_task_arg(t);
  size_t before = out->len;
  int err;

  if (!p->settled)
    return 0;
  err = uvt__output_collect(&p->out.buf, p->out.closed, &p->err.buf,
                            p->err.closed, buf_sink, out, NULL);
  if (err != 0) {
    out->len = before;
    return err;
  }
  uvt__trim_note(p->procs, out->len - before);
  uvt__proc_resume(p);
  return 0;
}

/* ---- what an ended task left running (P-KILL-4, P-KILL-6) -------------- */

static void quiesce_done(uvt__proc_t *p) {
  p->quiescing = 0;
  p->quiesce_asked = 0;
  close_handle(p, UVT__H_KILL, (uv_handle_t *)&p->kill_timer);
  /* P-OUT-6: nothing of the task is left to write (one that left its
   * session on purpose is cut off here). */
  end_linger(p);
  uvt_task_quiescent(p->task);
}

void uvt__proc_swept(uvt__proc_t *p) {
  /* "Gone" means no live member and every zombie of ours reaped (the pass
   * reaps them, P-REAP-1). */
  if (p->quiescing && p->pass_live == 0)
    quiesce_done(p);
  /* P-KILL-7: a kill whose leader was reaped waits for this. */
  if (p->kill_requested && p->reaped && !p->settled)
    maybe_finish(p);
}

static void on_quiesce_timer(uv_timer_t *timer) {
  uvt__proc_t *p = timer->data;

  if (!p->killed_now && ms_since(p->quiesce_start_ns) >= p->grace_ms) {
    kill_now(p);
  } else {
    uvt__members_check(p);
  }
}

/* Stop every process the ended task left in its session: SIGTERM now,
 * SIGKILL after grace_ms, uvt_task_quiescent() once none is left.  Begun
 * by the registry (hook_quiesce) or by the task itself (a kill after its
 * leader's own end, stop_at_settle).  Returns 0 when the session is known
 * to be empty (members.c's cheap test: the common case, a task that left
 * nothing), else 1: whether members are left is then decided by the next
 * pass over /proc (one per loop turn for all tasks). */
static int quiesce_start(uvt__proc_t *p) {

  /* Only a settled task's handles are all closed; before that its own stop
   * path is still running.  A detached durable task is not ours to stop
   * (D-1). */
  if (!p->settled || p->detached)
    return 0;
  /* D-1: an undelivered durable task's end, and what it left running,
   * are the next host's. */
  if (p->dur != NULL && !p->dur->delivered && uvt_task_host_leaving(p->task) &&
      !uvt__durable_stopping(p))
    return 0;
  if (p->pid <= 0 || uvt__members_known_empty(p)) {
    end_linger(p); /* P-OUT-6: a holder outside the session */
    return 0;
  }
  /* A stop begun by the task itself (a kill that came while it drained,
   * P-KILL-7) is the one the registry waits for: it calls
   * uvt_task_quiescent() when it is over. */
  if (p->quiescing)
    return 1;
  if (p->kill_timer_closing) {
    /* A stop ends only when its pass found the session empty, which marks
     * it gone, so this should not happen; but the timer cannot be
     * initialised again before its close callback: stop what is there at
     * once instead. */
    uvt__members_count(p, SIGKILL);
    return 0;
  }
  if (uv_timer_init(p->loop, &p->kill_timer) != 0) {
    uvt__members_count(p, SIGKILL);
    return 0;
  }
  p->kill_timer.data = p;
  p->live |= UVT__H_KILL;
  p->closing++;
  p->quiescing = 1;
  p->killed_now = 0;
  p->quiesce_start_ns = uv_hrtime();
  uvt__members_signal(p, SIGTERM);
  uv_update_time(p->loop);
  uv_timer_start(&p->kill_timer, on_quiesce_timer, QUIESCE_POLL_MS,
                 QUIESCE_POLL_MS);
  return 1;
}

/* The registry's quiesce hook: by disposal (P-KILL-4) and by a kill of the
 * ended task (P-KILL-6) it begins the stop above.  Asked again while the
 * stop it began is under way (a second kill of the ended task: a shutdown
 * whose grace ran out, S-9), it means "now", as a second cancel does
 * (R-KILL-3): SIGKILL to what is left, without waiting for grace_ms. */
static int hook_quiesce(uvt_task_t *t) {
  uvt__proc_t *p = uvt_task_arg(t);
  int r;

  if (p->quiescing && p->quiesce_asked) {
    if (!p->killed_now)
      kill_now(p);
    return 1;
  }
  r = quiesce_start(p);
  if (r == 1)
    p->quiesce_asked = 1;
  return r;
}

/* D-3: the end is recorded as delivered before any listener hears it. */
static void hook_settled(uvt_task_t *t) {
  uvt__durable_settled(uvt_task_arg(t));
}

static void hook_release(uvt_task_t *t) {
  uvt__proc_t *p = uvt_task_arg(t);
  const char *text;
  size_t len;

  p->released = 1;
  /* P-OUT-6: nobody reads a dropped record. */
  if (p->out.linger)
    close_stream(&p->out);
  if (p->err.linger)
    close_stream(&p->err);
  uvt__durable_release(p); /* D-6: a delivered task's files go */
  /* The registry frees the outcome's text with the record. */
  (void)uvt_task_remainder_peek(t, &text, &len);
  uvt__trim_note(p->procs, len);
  if (p->quiescing) {
    /* Disposal stopped waiting: do not leave the survivors running. */
    p->quiescing = 0;
    uvt__members_count(p, SIGKILL);
    close_handle(p, UVT__H_KILL, (uv_handle_t *)&p->kill_timer);
  } else if (!p->settled && !p->run_failed && !p->killed_now && !p->detached &&
             !p->detach_pending && (p->live & UVT__H_KILL)) {
    /* Force-failed while it runs (R-AGENT-4): disposal stopped waiting,
     * and the registry's close waits for this state's handles
     * (context.c): SIGKILL now rather than after the grace. */
    if (!p->kill_requested)
      p->kill_start_ns = uv_hrtime();
    p->kill_requested = 1;
    if (p->spawning)
      atomic_store(&p->spawn->cancelled, 1);
    kill_now(p);
    arm(&p->kill_timer, on_kill_timer, 0);
  }
  maybe_free(p);
}

/* ---- start ------------------------------------------------------------ */

/* M-TOOLS-10: bytes the cap drops go to on_drop first. */
static void proc_spill(void *ctx, const char *bytes, size_t len) {
  uvt__proc_t *p = ctx;

  if (p->on_drop != NULL && len > 0)
    p->on_drop(p->id, bytes, len, p->on_drop_data);
}

static void proc_spill_init(uvt__proc_t *p, uvt__outbuf_t *b) {
  if (p->on_drop != NULL) {
    b->spill = proc_spill;
    b->spill_ctx = p;
  }
}

static int open_pipe(uvt__proc_t *p, uvt__stream_t *s, int fd) {
  int err;

  s->proc = p;
  uvt__outbuf_init(&s->buf, p->opts->output_cap_bytes);
  uvt__outbuf_keep_first(&s->buf, p->opts->keep_head_bytes); /* M-TOOLS-15 */
  proc_spill_init(p, &s->buf);
  err = uv_pipe_init(p->loop, &s->pipe, 0);
  if (err != 0)
    return err;
  s->pipe.data = s;
  s->open = 1;
  p->closing++;
  return uv_pipe_open(&s->pipe, fd);
}

/* D-2: a file of the state directory as the task's output (its
 * descriptor, set by uvt__durable_prepare, is read by durable.c). */
static void on_file_change(uv_fs_event_t *h, const char *name, int events,
                           int status) {
  (void)name;
  (void)events;
  (void)status;
  uvt__durable_want_tail(h->data);
}

static void open_file_stream(uvt__proc_t *p, uvt__stream_t *s) {
  char path[64];

  s->proc = p;
  uvt__outbuf_init(&s->buf, p->opts->output_cap_bytes);
  uvt__outbuf_keep_first(&s->buf, p->opts->keep_head_bytes); /* M-TOOLS-15 */
  proc_spill_init(p, &s->buf);
  s->file = 1;
  s->open = 1;
  if (p->on_output == NULL && p->on_drop == NULL)
    return; /* read when a read or look asks */
  /* P-EVT-1, M-TOOLS-10: told of every write (inotify on the file we hold
   * open, through /proc/self/fd). */
  snprintf(path, sizeof(path), "/proc/self/fd/%d", s->fd);
  if (uv_fs_event_init(p->loop, &s->change) != 0) {
    uvt__durable_poll(p);
    return;
  }
  s->change.data = p;
  s->watching = 1;
  p->closing++;
  if (uv_fs_event_start(&s->change, on_file_change, path, 0) != 0)
    uvt__durable_poll(p);
}

/* A terminal's master side as the task's output (read by on_tty_io); the
 * descriptor is taken over once this returns 0. */
static int open_tty(uvt__proc_t *p, uvt__stream_t *s, int fd) {
  int err;

  s->proc = p;
  uvt__outbuf_init(&s->buf, p->opts->output_cap_bytes);
  uvt__outbuf_keep_first(&s->buf, p->opts->keep_head_bytes); /* M-TOOLS-15 */
  proc_spill_init(p, &s->buf);
  err = uv_poll_init(p->loop, &s->tty_poll, fd);
  if (err != 0)
    return err;
  s->tty_poll.data = s;
  s->tty = 1;
  s->fd = fd;
  s->open = 1;
  p->closing++;
  return 0;
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

/* Close what a start opened (its record is not, or no longer, to be
 * committed): the request if it never left, the pipes, the timers.  The
 * state is freed by the last close callback. */
static void undo_start(uvt__proc_t *p) {
  p->run_failed = 1;
  uvt__spawn_free(p->spawn);
  p->spawn = NULL;
  p->spawning = 0;
  close_stream(&p->out);
  close_stream(&p->err);
  uvt__stdin_close(p);
  close_handle(p, UVT__H_KILL, (uv_handle_t *)&p->kill_timer);
  close_handle(p, UVT__H_DRAIN, (uv_handle_t *)&p->drain_timer);
  close_handle(p, UVT__H_RUNTIME, (uv_handle_t *)&p->runtime_timer);
}

/* Everything that can fail cheaply happens here, on the loop thread and
 * before the record exists (P-SPAWN-4): the descriptors (pipes, or the
 * terminal; the stdin socket), the checks and the request of spawn.c, the
 * handles and timers.  The spawn itself is handed to the spawner once
 * uvt_start has committed the record (P-SPAWN-6, uvt_process_start). */
static int proc_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  uvt__proc_t *p = arg;
  const uvt_process_options_t *o = p->opts;
  int outp[2] = {-1, -1};
  int errp[2] = {-1, -1};
  int in_fd = -1;   /* the child's stdin, when it is not /dev/null */
  int in_ours = -1; /* our end of its input (P-IN-1) */
  int master = -1;  /* a pty task's terminal (P-PTY-1) */
  char tty[64];
  int child[3];
  int xfd[2] = {-1, -1}; /* D-1: the keeper's status file and FIFO end */
  int err;

  p->task = t;
  err = uvt__procs_get(p->reg, &p->procs);
  if (err != 0)
    return err;
  p->counted = 1;
  p->procs->procs_live++;
  if (o->durable) {
    /* D-2: output to files in the state directory, the status file, and
     * a FIFO for stdin (durable.c). */
    err = uvt__durable_prepare(p, o, child, xfd, &in_ours);
    if (err != 0)
      goto fail_fds;
    in_fd = child[0];
    outp[1] = child[1];
    errp[1] = child[2];
    if (o->stdin_data != NULL) {
      in_fd = uvt__stdin_file(o->stdin_data, o->stdin_len);
      if (in_fd < 0) {
        err = in_fd;
        goto fail_fds;
      }
    }
    if ((outp[1] = uvt__fd_above_stdio(outp[1])) < 0 ||
        (errp[1] = uvt__fd_above_stdio(errp[1])) < 0 ||
        (in_fd = uvt__fd_above_stdio(in_fd)) < -1) {
      err = outp[1] < 0 ? outp[1] : errp[1] < 0 ? errp[1] : in_fd;
      goto fail_fds;
    }
  } else if (o->pty) {
    /* One terminal for the child's stdin, stdout and stderr: the slave
     * travels in the request (child[0]), the master is read here and a
     * copy of it written. */
    err = uvt__pty_open(o->pty_cols, o->pty_rows, &master, &in_fd, tty,
                        sizeof(tty));
    if (err != 0)
      goto fail_fds;
    in_ours = fcntl(master, F_DUPFD_CLOEXEC, 3);
    if (in_ours < 0) {
      err = UVT__PERR(errno);
      goto fail_fds;
    }
  } else {
    /* M-TOOLS-12: merged, stderr is a second descriptor of stdout's pipe,
     * so both land in one stream in the order written. */
    if (pipe2(outp, O_CLOEXEC) != 0 ||
        (o->merge_stderr ? (errp[1] = fcntl(outp[1], F_DUPFD_CLOEXEC, 3)) < 0
                         : pipe2(errp, O_CLOEXEC) != 0)) {
      err = UVT__PERR(errno);
      goto fail_fds;
    }
    /* N-12: at most STDOUT_PIPE_MAX; a size the system refuses keeps
     * the system's. */
    if (o->stdout_pipe_bytes > 0)
      (void)fcntl(outp[0], F_SETPIPE_SZ,
                  (int)(o->stdout_pipe_bytes < STDOUT_PIPE_MAX
                            ? o->stdout_pipe_bytes
                            : STDOUT_PIPE_MAX));
    if (o->stdin_data != NULL) {
      in_fd = uvt__stdin_file(o->stdin_data, o->stdin_len);
      if (in_fd < 0) {
        err = in_fd;
        goto fail_fds;
      }
    } else if (o->stdin_pipe) {
      err = uvt__stdin_socket(&in_ours, &in_fd);
      if (err != 0)
        goto fail_fds;
    }
    /* The child's ends above stdio, so its dup2s cannot clash. */
    if ((outp[1] = uvt__fd_above_stdio(outp[1])) < 0 ||
        (errp[1] = uvt__fd_above_stdio(errp[1])) < 0 ||
        (in_fd = uvt__fd_above_stdio(in_fd)) < -1) {
      err = outp[1] < 0 ? outp[1] : errp[1] < 0 ? errp[1] : in_fd;
      goto fail_fds;
    }
  }
  child[0] = in_fd;
  child[1] = outp[1];
  child[2] = errp[1];
  err = uvt__spawner_reserve(p->procs);
  if (err == 0 && limited(&o->limits)) {
    /* L-LIM-1: never an unlimited run; the reason is logged. */
    char why[512];
    err = uvt__cgroot_limits(p->procs, &o->limits, why, sizeof(why));
    if (err != 0)
      uvt_log(p->reg, UVT_LOG_ERROR, "%s", why);
  }
  if (err == 0 && o->sandbox != NULL) {
    err = uvt__sandbox_check(p->reg, &p->procs->envc, o->sandbox);
    p->sandboxed = 1;
  }
  if (err == 0)
    err = uvt__spawn_prepare(&p->procs->envc, o, child, o->pty ? tty : NULL,
                             &p->spawn);
  if (err != 0)
    goto fail_fds;
  /* The request owns the child's ends now. */
  in_fd = outp[1] = errp[1] = -1;
  /* S-2, S-9: the sandbox's status pipe stays with the task. */
  p->sb_status_fd = p->spawn->sb_status_fd;
  p->spawn->sb_status_fd = -1;
  p->spawn->cookie = p;
  p->spawning = 1;
  if (o->durable) {
    /* D-1: the keeper leads the task and runs the command. */
    p->spawn->xfd[0] = xfd[0];
    p->spawn->xfd[1] = xfd[1];
    xfd[0] = xfd[1] = -1;
    err = uvt__durable_wrap(p, p->spawn);
    if (err != 0)
      goto fail_fds;
  }
  if (p->procs->helper_on && !o->durable)
    p->spawn->helper = p->procs->helper; /* P-SPAWN-7 */
  /* P-KILL-5, L-LIM-1: a group of its own (checked above: where limits
   * are asked, one that can enforce them).  A durable task's is not in
   * the registry's directories, which go with it (D-1): one of its own
   * that outlives the host, recorded in its journal line (L-LIM-3); one
   * without limits has none. */
  if (!o->durable) {
    uvt__cgroot_assign(p->procs, &o->limits, &p->spawn->cg);
    p->spawn->cg_must = limited(&o->limits);
  } else if (limited(&o->limits)) {
    err = uvt__cgroot_durable(p->procs, &o->limits, p->dur->key, &p->spawn->cg);
    if (err == 0)
      err = uvt__durable_cgroup(p, &p->spawn->cg);
    if (err != 0)
      goto fail_fds;
    p->spawn->cg_must = 1;
  }

  if (o->durable) {
    open_file_stream(p, &p->out);
    if (p->err.fd >= 0) {
      open_file_stream(p, &p->err);
    } else {
      /* M-TOOLS-12: merged into stdout, stderr is never opened. */
      uvt__outbuf_init(&p->err.buf, o->output_cap_bytes);
      p->err.closed = 1;
    }
  } else if (o->pty) {
    err = open_tty(p, &p->out, master);
    if (err == 0)
      master = -1; /* the poll handle owns it now */
    /* The terminal is one stream: stderr is never opened (P-PTY-1). */
    uvt__outbuf_init(&p->err.buf, o->output_cap_bytes);
    p->err.closed = 1;
  } else {
    err = open_pipe(p, &p->out, outp[0]);
    if (err == 0)
      outp[0] = -1;
    if (err == 0 && errp[0] >= 0)
      err = open_pipe(p, &p->err, errp[0]);
    if (err == 0)
      errp[0] = -1;
    if (err == 0 && !p->err.open) {
      /* M-TOOLS-12: merged into stdout, stderr is never opened. */
      uvt__outbuf_init(&p->err.buf, o->output_cap_bytes);
      p->err.closed = 1;
    }
  }
  if (err == 0 && in_ours >= 0) {
    err = uvt__stdin_open(p, o->stdin_cap_bytes, in_ours, o->pty, &stdin_cbs);
    in_ours = -1;            /* taken, or closed on failure */
    p->in.fifo = o->durable; /* D-5: a FIFO in the state directory */
  }
  if (err == 0)
    err = init_timer(p, &p->kill_timer, UVT__H_KILL);
  if (err == 0)
    err = init_timer(p, &p->drain_timer, UVT__H_DRAIN);
  if (err == 0)
    err = init_timer(p, &p->runtime_timer, UVT__H_RUNTIME);
  if (err == 0)
    err = start_reading(&p->out);
  if (err == 0 && p->err.open)
    err = start_reading(&p->err);
  if (err != 0) {
    undo_start(p);
    goto fail_fds;
  }
  /* From the call, not from the spawn (R-TIME-1). */
  if (p->max_runtime_ms > 0)
    arm(&p->runtime_timer, on_runtime_timer, p->max_runtime_ms);

  hooks->cancel = hook_cancel;
  hooks->read_output = hook_read;
  hooks->read_late = hook_late;
  hooks->release = hook_release;
  hooks->quiesce = hook_quiesce;
  if (o->durable)
    hooks->settled = hook_settled;
  return 0;

fail_fds:
  p->run_failed = 1;
  close_fd(&xfd[0]);
  close_fd(&xfd[1]);
  close_fd(&outp[0]);
  close_fd(&outp[1]);
  close_fd(&errp[0]);
  close_fd(&errp[1]);
  close_fd(&in_fd);
  close_fd(&in_ours);
  close_fd(&master);
  return err;
}

/* Watch the leader's exit: its pidfd, or the registry's SIGCHLD watch. */
static int watch_leader(uvt__proc_t *p) {
  int err;

  if (p->pidfd >= 0) {
    err = uv_poll_init(p->loop, &p->exit_poll, p->pidfd);
    if (err == 0) {
      p->exit_poll.data = p;
      p->live |= UVT__H_POLL;
      p->closing++;
      err = uv_poll_start(&p->exit_poll, UV_READABLE, on_exit_poll);
      if (err == 0)
        return 0;
      close_handle(p, UVT__H_POLL, (uv_handle_t *)&p->exit_poll);
    } else {
      close_fd(&p->pidfd);
    }
  }
  p->pidfd = -1;
  if (p->procs == NULL)
    return UV_ECANCELED;
  return uvt__reap_watch(p->procs, p, uvt__proc_check_leader);
}

/* No child: the spawn failed, or was not made (a kill came first).  The
 * pipes' write ends are closed, so they end at once; the task settles as
 * usual at quiescence. */
static void not_started(uvt__proc_t *p, int err) {
  p->not_started = 1;
  p->spawn_err = err;
  p->reaped = 1;
  no_leader(p);
}

void uvt__proc_spawned(uvt__spawn_t *sp) {
  uvt__proc_t *p = sp->cookie;
  int err;

  p->spawn = NULL;
  p->spawning = 0;
  if (sp->skipped || sp->err != 0) {
    err = sp->skipped ? 0 : sp->err;
    uvt__spawn_free(sp);
    not_started(p, err);
    return;
  }
  p->pid = sp->pid;
  p->pidfd = sp->pidfd >= 0 ? sp->pidfd : -1;
  p->start_ticks = sp->start_ticks;
  if (sp->cg.mask != 0 && sp->cg_err == 0) {
    p->cg = 1;
    /* Its directories (a durable task's) and open files are the task's. */
    uvt__cg_move(&p->cgroup, &sp->cg);
  } else if (p->dur == NULL && p->procs != NULL && p->procs->cgroot.contain &&
             !p->procs->cgroot.warned) {
    p->procs->cgroot.warned = 1;
    uvt_log(p->reg, UVT_LOG_WARN,
            "task %s runs outside a cgroup of its own (%s); later tasks "
            "may too, this is said once",
            p->id, uvt_err_name(sp->cg_err));
  }
  uvt__spawn_free(sp);
  uvt__members_track(p);
  if (p->dur != NULL)
    uvt__durable_spawned(p); /* D-3: its keeper's pid */
  err = watch_leader(p);
  if (err != 0) {
    /* Neither a pidfd nor the SIGCHLD watch: the exit could not be seen.
     * P-SPAWN-4: no child, no zombie. */
    uvt__members_untrack(p);
    uvt__spawn_abort(p->pid);
    uvt__spawner_reaped(p->procs, p->pid);
    p->pid = 0;
    not_started(p, err);
    return;
  }
  if (p->detach_pending) {
    /* D-1: its host left while the spawn was out: it runs on. */
    p->detach_pending = 0;
    detach(p);
    return;
  }
  if (p->released || p->killed_now) {
    /* The record was dropped while the spawn was out (disposal gave up on
     * it: nobody wants this child), or the kill's grace passed: SIGKILL.
     * How long it may go unanswered counts from now, not from the kill
     * (a stopped helper may have held the spawn for longer than that). */
    p->kill_start_ns = uv_hrtime() - p->grace_ms * 1000000u;
    kill_now(p);
  } else if (p->kill_requested) {
    /* P-LIMIT-1, P-END-3: the runtime limit passed while the spawn was
     * out (a stalled loop runs its timers before it reads the answer),
     * and nothing has been signalled yet.  A leader that is gone already
     * ended on its own: its exit is its honest outcome, as when the
     * limit's timer finds it exited.  An owner's kill in that window
     * stays a request made before the exit was seen (P-KILL-2). */
    if (p->timed_out && uvt__proc_check_leader(p)) {
      p->timed_out = 0;
      p->kill_requested = p->cancels > 0;
      return;
    }
    /* A kill came while the spawn was out and too late to stop it; its
     * grace has been running since the kill call. */
    uvt__members_signal(p, SIGTERM);
  }
}

/* every field of this library's struct at its default. */
static void options_defaults(uvt_process_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->size = sizeof(*o);
  o->grace_ms = UVT_PROCESS_GRACE_MS;
  o->drain_ms = UVT_PROCESS_DRAIN_MS;
  o->output_cap_bytes = UVT_PROCESS_OUTPUT_CAP_BYTES;
  o->stdin_cap_bytes = UVT_PROCESS_STDIN_CAP_BYTES;
  o->pty_cols = UVT_PROCESS_PTY_COLS;
  o->pty_rows = UVT_PROCESS_PTY_ROWS;
}

void uvt_process_options_init_size(uvt_process_options_t *o, size_t size) {
  uvt_process_options_t d;
  options_defaults(&d);
  uvt__opts_init(o, size, &d, sizeof(d));
}

/* The exported symbol of the old name (the header's macro hides it). */
void(uvt_process_options_init)(uvt_process_options_t *o) {
  uvt_process_options_init_size(o, sizeof(*o));
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

/* Nothing but spaces, tabs and newlines: nothing to run, whatever the
 * label says. */
static int blank(const char *s) {
  for (; *s != '\0'; s++)
    if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
      return 0;
  return 1;
}

static int limits_valid(const uvt_process_limits_t *l) {
  return (l->memory_bytes == 0 || l->memory_bytes >= UVT_PROCESS_MEMORY_MIN) &&
         l->cpu_percent <= UVT_PROCESS_CPU_PERCENT_MAX;
}

int uvt_process_limits_check(uvt_registry_t *reg,
                             const uvt_process_limits_t *limits, char *why,
                             size_t size) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__procs_t *ps;
  int err;

  if (why != NULL && size > 0)
    why[0] = '\0';
  if (reg == NULL || limits == NULL)
    return UV_EINVAL;
  if (!limits_valid(limits)) {
    if (why != NULL && size > 0) {
      if (limits->cpu_percent > UVT_PROCESS_CPU_PERCENT_MAX)
        snprintf(why, size, "cpu_percent %u is above %u (1024 cores)",
                 limits->cpu_percent, UVT_PROCESS_CPU_PERCENT_MAX);
      else
        snprintf(why, size, "memory_bytes %llu is below the minimum, 1 MiB",
                 (unsigned long long)limits->memory_bytes);
    }
    return UV_EINVAL;
  }
  err = uvt__procs_get(reg, &ps);
  if (err != 0)
    return err;
  return uvt__cgroot_limits(ps, limits, why, size);
}

static int start_loaded(uvt_registry_t *reg, const uvt_process_options_t *o,
                        char id_out[UVT_ID_MAX]);

int uvt_process_start(uvt_registry_t *reg, const uvt_process_options_t *o,
                      char id_out[UVT_ID_MAX]) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_process_options_t own;
  char why[UVT__OPTS_WHY];

  if (reg == NULL || o == NULL)
    return UV_EINVAL;
  /* the caller's first o->size bytes over the defaults, once; from
   * here on only the copy is read. */
  options_defaults(&own);
  if (uvt__opts_load(&own, sizeof(own), o,
                     UVT__OPTS_MIN(uvt_process_options_t, command), why) != 0) {
    uvt_log(reg, UVT_LOG_ERROR,
            "uvt_process_start: options refused: %s; call "
            "uvt_process_options_init()",
            why);
    return UV_EINVAL;
  }
  return start_loaded(reg, &own, id_out);
}

static int start_loaded(uvt_registry_t *reg, const uvt_process_options_t *o,
                        char id_out[UVT_ID_MAX]) {
  uvt__proc_t *p;
  uvt_spec_t spec;
  char *joined = NULL;
  const char *const *e;
  int err;

  if (reg == NULL || o == NULL || (o->command == NULL) == (o->argv == NULL))
    return UV_EINVAL;
  if (o->argv != NULL && (o->argv[0] == NULL || o->argv[0][0] == '\0'))
    return UV_EINVAL;
  if (o->command != NULL && blank(o->command))
    return UV_EINVAL;
  if (o->output_cap_bytes < 4)
    return UV_EINVAL;
  /* docs/contract.md §3b: input is either fixed bytes or written later. */
  if (o->stdin_data != NULL && (o->stdin_pipe || o->pty))
    return UV_EINVAL;
  if ((o->stdin_pipe || o->pty) && o->stdin_cap_bytes == 0)
    return UV_EINVAL;
  if (o->pty && (o->pty_cols == 0 || o->pty_rows == 0))
    return UV_EINVAL;
  if (!limits_valid(&o->limits))
    return UV_EINVAL;
  for (e = o->env; e != NULL && *e != NULL; e++)
    if (strchr(*e, '=') == NULL || **e == '=')
      return UV_EINVAL;
  /* D-1: a terminal ends with its host; a sandbox's tree is not yet kept
   * by a keeper. */
  if (o->durable && o->pty)
    return UV_EINVAL;
  if (o->durable && o->sandbox != NULL)
    return UV_ENOTSUP;

  p = uvt__calloc(1, sizeof(*p));
  if (p == NULL)
    return UV_ENOMEM;
  p->start_ns = uv_hrtime();
  p->reg = reg;
  p->loop = uvt_registry_loop(reg);
  p->opts = o;
  p->pidfd = -1;
  p->swept = uvt__proc_swept;
  p->grace_ms = o->grace_ms;
  p->drain_ms = o->drain_ms;
  p->max_runtime_ms = o->max_runtime_ms;
  p->out.proc = p;
  p->err.proc = p;
  p->out.fd = -1;
  p->err.fd = -1;
  p->in.fd = -1;
  p->sb_status_fd = -1;
  p->pty = o->pty != 0;
  p->backpressure = o->output_backpressure != 0;
  p->on_output = o->on_output;
  p->on_output_data = o->on_output_data;
  p->on_drop = o->on_drop;
  p->on_drop_data = o->on_drop_data;
  p->on_tee = o->on_tee;
  p->on_tee_data = o->on_tee_data;
  uvt__list_init(&p->notify_link);
  uvt__list_init(&p->unreaped_link);
  uvt__list_init(&p->sweep_link);
  uvt__list_init(&p->pass_link);

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
  p->opts = NULL;
  if (err != 0) {
    uvt__free(joined);
    /* run() may have left closes in flight (or succeeded and the start was
     * then refused: undo it); the last close frees. */
    if (p->task != NULL && !p->run_failed)
      undo_start(p);
    p->run_failed = 1;
    maybe_free(p);
    return err;
  }
  if (id_out != NULL)
    memcpy(id_out, p->id, UVT_ID_MAX);
  if (o->durable && !p->settled && p->spawning) {
    /* D-3: journalled before its keeper runs; a journal that cannot take
     * it (a full disk) means it does not run. */
    err = uvt__durable_record(p, o, spec.kind,
                              spec.label != NULL ? spec.label : "");
    if (err != 0) {
      p->dur_err = err;
      atomic_store(&p->spawn->cancelled, 1);
    }
  }
  uvt__free(joined);
  /* P-SPAWN-6: the record exists; the spawn runs off the loop thread.  A
   * kill that came inside uvt_start (R-REENTER-1) already marked the
   * request cancelled: the spawner will not spawn it. */
  uvt__spawner_submit(p->procs, p->spawn, uvt__proc_spawned);
  return 0;
}

/* ---- adoption (D-3) ---------------------------------------------------- */

/* The run() of a task taken back: its files, its FIFO and its keeper
 * (through the pidfd durable.c checked), or, when it ended while no host
 * ran, its recorded end. */
static int proc_adopt_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  uvt__proc_t *p = arg;
  uvt__adopted_t *a = p->adopting;
  uvt__dentry_t *e = p->dur;
  int err = 0;
  int i;

  p->task = t;
  p->counted = 1;
  p->procs->procs_live++;
  for (i = 0; i < 2; i++) {
    uvt__stream_t *s = i == 0 ? &p->out : &p->err;
    s->proc = p;
    uvt__outbuf_init(&s->buf, (size_t)e->cap);
    s->fd = a->fd[i];
    a->fd[i] = -1;
    if (s->fd < 0) {
      s->closed = 1; /* merged, or its file is gone: empty */
      continue;
    }
    s->file = 1;
    s->open = 1;
    s->pos = e->off[i];
  }
  if (strchr(e->flags, 'i') != NULL) {
    if (a->in_fd >= 0) {
      err = uvt__stdin_open(p, UVT_PROCESS_STDIN_CAP_BYTES, a->in_fd, 0,
                            &stdin_cbs);
      a->in_fd = -1;
      p->in.fifo = 1;
      if (err != 0)
        goto fail;
    } else {
      /* D-5: no FIFO to write to (closed, or the command closed it). */
      p->in.enabled = 1;
      p->in.broken = 1;
    }
  }
  if ((err = init_timer(p, &p->kill_timer, UVT__H_KILL)) != 0 ||
      (err = init_timer(p, &p->drain_timer, UVT__H_DRAIN)) != 0 ||
      (err = init_timer(p, &p->runtime_timer, UVT__H_RUNTIME)) != 0)
    goto fail;
  p->pid = a->pid;
  p->start_ticks = a->start;
  /* L-LIM-3: its group, for its outcome, kills and leftovers. */
  uvt__durable_cgroup_open(p);
  if (a->live) {
    p->pidfd = a->pidfd;
    a->pidfd = -1;
    uvt__members_track(p);
    if ((err = watch_leader(p)) != 0)
      goto fail;
  } else {
    if (p->pid > 0)
      uvt__members_track(p); /* what it left running (P-LEFT-1) */
    p->reaped = 1;
    p->status = a->status;
    p->status_lost = a->lost;
    if (a->never || a->spawn_err != 0) {
      p->not_started = 1;
      p->spawn_err = a->spawn_err;
    }
    if (e->killed != 0) {
      /* Asked before the restart: its outcome says so, and what is left
       * of its session is stopped (P-KILL-7). */
      p->kill_requested = 1;
      p->cancels = 1;
      p->kill_start_ns = uv_hrtime();
      if (e->killed == 't') {
        p->timed_out = 1;
        p->timed_out_ms = e->killed_ms;
      }
    }
  }
  hooks->cancel = hook_cancel;
  hooks->read_output = hook_read;
  hooks->release = hook_release;
  hooks->quiesce = hook_quiesce;
  hooks->settled = hook_settled;
  return 0;
fail:
  undo_start(p);
  return err;
}

int uvt__proc_adopt(uvt__procs_t *ps, uvt__dentry_t *e, uvt__adopted_t *a,
                    uvt_agent_t *owner) {
  uvt__proc_t *p;
  uvt_spec_t spec;
  int64_t elapsed_ms;
  struct timespec now;
  int err;
  int i;

  p = uvt__calloc(1, sizeof(*p));
  if (p == NULL) {
    err = UV_ENOMEM;
    goto drop_fds;
  }
  clock_gettime(CLOCK_REALTIME, &now);
  elapsed_ms =
      (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - e->started_ms;
  if (elapsed_ms < 0)
    elapsed_ms = 0;
  /* Durations count from the task's own start, before the restart. */
  p->start_ns = uv_hrtime() - (uint64_t)elapsed_ms * 1000000u;
  p->reg = ps->reg;
  p->loop = ps->loop;
  p->procs = ps;
  p->pidfd = -1;
  p->swept = uvt__proc_swept;
  p->grace_ms = e->grace_ms;
  p->drain_ms = e->drain_ms;
  p->max_runtime_ms = e->max_runtime_ms;
  p->out.proc = p;
  p->err.proc = p;
  p->out.fd = -1;
  p->err.fd = -1;
  p->in.fd = -1;
  p->sb_status_fd = -1;
  p->backpressure = strchr(e->flags, 'b') != NULL;
  p->dur = e;
  p->adopted = 1;
  p->adopting = a;
  uvt__list_init(&p->notify_link);
  uvt__list_init(&p->unreaped_link);
  uvt__list_init(&p->sweep_link);
  uvt__list_init(&p->pass_link);

  memset(&spec, 0, sizeof(spec));
  spec.kind = e->kind;
  spec.label = e->label;
  spec.owner = owner;
  spec.run = proc_adopt_run;
  spec.arg = p;
  spec.id = e->id; /* R-START-6: the same id */
  err = uvt_start(ps->reg, &spec, p->id);
  p->adopting = NULL;
  if (err != 0) {
    p->dur = NULL; /* the entry stays the state directory's */
    if (p->cg)
      uvt__cg_close(&p->cgroup); /* and so does its group (L-LIM-3) */
    p->cg = 0;
    if (p->task != NULL && !p->run_failed)
      undo_start(p);
    p->run_failed = 1;
    maybe_free(p);
    goto drop_fds;
  }
  e->proc = p;
  if (a->live) {
    if (e->killed == 't') {
      /* D-3: the runtime limit's stop goes on. */
      if (request_stop(p) == 0) {
        p->timed_out = 1;
        p->timed_out_ms = e->killed_ms;
      }
    } else if (e->killed != 0) {
      (void)uvt_kill(ps->reg, p->id, owner, "kill asked before a restart",
                     NULL);
    } else if (p->max_runtime_ms > 0) {
      uint64_t used = (uint64_t)elapsed_ms;
      arm(&p->runtime_timer, on_runtime_timer,
          used >= p->max_runtime_ms ? 0 : p->max_runtime_ms - used);
    }
  } else {
    /* Ended while no host ran (D-3): read, and settle with its outcome. */
    no_leader(p);
  }
  return 0;

drop_fds:
  for (i = 0; i < 2; i++)
    if (a->fd[i] >= 0)
      close(a->fd[i]);
  if (a->in_fd >= 0)
    close(a->in_fd);
  if (a->pidfd >= 0)
    close(a->pidfd);
  a->fd[0] = a->fd[1] = a->in_fd = a->pidfd = -1;
  return err;
}

int uvt__proc_lookup(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uvt_task_t **t,
                     uvt__proc_t **out) {
  int err;

  if (reg == NULL || id == NULL)
    return UV_EINVAL;
  /* The registry's lookup applies the fence (R-OWN-2). */
  err = uvt_task_lookup(reg, id, caller, t);
  if (err != 0)
    return err;
  /* A dropped record (release called) is out of the registry's index,
   * so the lookup never finds one. */
  if (uvt_task_hooks(*t)->cancel != hook_cancel)
    return UV_EINVAL; /* another producer's task */
  *out = uvt_task_arg(*t);
  if ((*out)->dur != NULL && !(*out)->settled) {
    /* D-2: every look and read sees what the files hold now. */
    uvt__durable_tail(*out, &(*out)->out, 0);
    uvt__durable_tail(*out, &(*out)->err, 0);
  }
  return 0;
}

static int lookup_proc(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, uvt__proc_t **out) {
  uvt_task_t *t;
  return uvt__proc_lookup(reg, id, caller, &t, out);
}

int uvt__proc_ending(const uvt__proc_t *p) {
  return p->finishing || p->settled;
}

int uvt_process_resize(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, uint16_t cols,
                       uint16_t rows) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__proc_t *p;
  int err = lookup_proc(reg, id, caller, &p);
  if (err != 0)
    return err;
  if (!p->pty || cols == 0 || rows == 0)
    return UV_EINVAL;
  /* The copy of the master side lives until quiescence. */
  if (!p->in.open || p->in.fd < 0)
    return UV_EPIPE;
  return uvt__pty_resize(p->in.fd, cols, rows);
}

int uvt_process_pid(uvt_registry_t *reg, const char *id,
                    const uvt_agent_t *caller) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__proc_t *p;
  int err = lookup_proc(reg, id, caller, &p);
  if (err != 0)
    return err;
  if (p->spawning)
    return 0; /* not spawned yet */
  if (p->pid <= 0)
    return UV_ESRCH;
  return (int)p->pid;
}

int uvt_process_command_pid(uvt_registry_t *reg, const char *id,
                            const uvt_agent_t *caller) {
  uvt__proc_t *p;
  int err = lookup_proc(reg, id, caller, &p);
  if (err != 0)
    return err;
  if (p->spawning)
    return 0;
  if (p->pid <= 0)
    return UV_ESRCH;
  if (p->dur != NULL || p->adopted) {
    /* D-1: the keeper's child. */
    int pid = uvt__durable_command_pid(p);
    return pid > 0 ? pid : p->reaped ? UV_ESRCH : 0;
  }
  if (!p->sandboxed)
    return (int)p->pid;
  return uvt__sandbox_command_pid(p);
}

int uvt_process_leftovers(uvt_registry_t *reg, const char *id,
                          const uvt_agent_t *caller) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__proc_t *p;
  int err = lookup_proc(reg, id, caller, &p);
  if (err != 0)
    return err;
  if (p->pid <= 0 || uvt__members_known_empty(p))
    return 0;
  /* One pass over this session now (it also reaps our zombie members);
   * a sandbox's own bwrap processes are not the task's (S-2). */
  return uvt__members_leftovers(p);
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
  uvt__proc_t *p;
  size_t n;
  int err;

  if (buf == NULL || size == 0)
    return UV_EINVAL;
  buf[0] = '\0';
  err = lookup_proc(reg, id, caller, &p);
  if (err != 0)
    return err;
  /* stdout first; a command that only writes to stderr shows that. */
  n = last_line(&p->out.buf, buf, size);
  if (n == 0)
    n = last_line(&p->err.buf, buf, size);
  buf[n] = '\0';
  return 0;
}

/* ---- M-TOOLS-5: a peek at what is unread (for write_stdin) ------------ */

static void peek_stream(const uvt__outbuf_t *b, size_t *unread,
                        uint64_t *dropped, char *tail, size_t *tail_len) {
  size_t start;
  size_t i;

  *unread = b->len;
  *dropped = b->dropped;
  *tail_len = 0;
  if (b->len == 0 || b->alloc == 0)
    return;
  /* Back from the end to the last newline, at most UVT__PEEK_TAIL. */
  start = b->len;
  while (start > 0 && b->len - start < UVT__PEEK_TAIL &&
         b->ring[(b->head + start - 1) % b->alloc] != '\n')
    start--;
  for (i = start; i < b->len; i++)
    tail[i - start] = b->ring[(b->head + i) % b->alloc];
  *tail_len = b->len - start;
}

int uvt__process_peek(uvt_registry_t *reg, const char *id,
                      const uvt_agent_t *caller, uvt__peek_t *out) {
  uvt__proc_t *p;
  int err;

  if (out == NULL)
    return UV_EINVAL;
  memset(out, 0, sizeof(*out));
  err = lookup_proc(reg, id, caller, &p);
  if (err != 0)
    return err;
  peek_stream(&p->out.buf, &out->unread[0], &out->dropped[0], out->tail[0],
              &out->tail_len[0]);
  peek_stream(&p->err.buf, &out->unread[1], &out->dropped[1], out->tail[1],
              &out->tail_len[1]);
  return 0;
}

/* ---- L-LIM-1: what a task's cgroup says (tests, reports) -------------- */

int uvt__process_cgroup(uvt_registry_t *reg, const char *id,
                        uvt__cg_events_t *ev, int h, char *path, size_t size) {
  return uvt__process_cgroup_of(reg, id, NULL, ev, h, path, size);
}

int uvt__process_cgroup_of(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller, uvt__cg_events_t *ev,
                           int h, char *path, size_t size) {
  uvt__proc_t *p;
  int err = lookup_proc(reg, id, caller, &p);

  if (err != 0)
    return err;
  if (!p->cg)
    return UV_ENOENT;
  if (ev != NULL) {
    err = uvt__cg_events(&p->cgroup, ev, 1);
    if (err != 0)
      return err;
    ev->oom_kills -= ev->oom_kills >= p->cgroup.oom_base ? p->cgroup.oom_base
                                                         : ev->oom_kills;
    ev->pids_max -= ev->pids_max >= p->cgroup.pids_base ? p->cgroup.pids_base
                                                        : ev->pids_max;
  }
  if (path != NULL)
    return uvt__cg_path(&p->cgroup, h, path, size);
  return 0;
}
