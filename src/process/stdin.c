/* Input for a running task (P-IN-1): what uvt_process_write() and
 * uvt_process_close_stdin() (write.c) do once they found the task.  The
 * owner of a task's input (process.c) gives it its close callback and a
 * FIFO's end (D-5) in a uvt__stdin_cbs_t: this file calls nothing of
 * process.c or durable.c by name.
 *
 * A task with stdin_pipe gets a Unix socket pair as its stdin, not a pipe.
 * A write to a pipe whose reader has gone raises SIGPIPE, whose default
 * action ends the host, and a library cannot assume its host ignores it;
 * send(2) with MSG_NOSIGNAL reports EPIPE without a signal.  (libuv's
 * uv_spawn and so Node's child_process give children socket pairs for
 * their stdio too.)  Our end is shut for reading, so the socket carries
 * bytes one way: a child that writes to its stdin gets EPIPE instead of
 * filling a buffer nobody reads.  A pty task writes to its terminal's
 * master side (a copy of the descriptor the output is read from), where a
 * write never raises SIGPIPE.
 *
 * Writes never block the loop: a write goes out at once as far as the
 * socket (or terminal) takes it, and what is left is copied into the
 * task's queue, which a poll handle writes out in order as the descriptor
 * becomes writable.  The queue holds at most stdin_cap_bytes; a write
 * that would go beyond it is refused whole (UV_ENOBUFS), before any of it
 * is written, so a host can retry it as it is.  The child's end exists from
 * the start, held by the spawn request until the spawn is over, so bytes
 * written while the spawn is out wait in the socket (or terminal) for the
 * child; if no child ever comes the request's close ends the socket and
 * the next write reports EPIPE.
 *
 * End of input: a socket is closed once the queue drained (the child reads
 * end of file); a terminal gets its VEOF character queued behind the rest.
 * The poll handle is one of the task's handles: it is closed when the task
 * reaches quiescence (what is still queued is dropped then; nobody reads
 * it), and counts towards the task's settle like the others. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "process-internal.h"

int uvt__stdin_socket(int *ours, int *theirs) {
  int sv[2];

  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return UVT__PERR(errno);
  /* One way only: the child's writes to its stdin fail at once. */
  shutdown(sv[0], SHUT_RD);
  if (fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) != 0) {
    close(sv[0]);
    close(sv[1]);
    return UVT__PERR(errno);
  }
  *ours = sv[0];
  *theirs = sv[1];
  return 0;
}

int uvt__stdin_open(uvt__proc_t *p, size_t cap, int fd, int tty,
                    const uvt__stdin_cbs_t *cbs) {
  uvt__stdin_t *in = &p->in;
  int err;

  in->cbs = cbs;
  in->fd = -1;
  in->cap = cap;
  in->tty = tty;
  err = uv_poll_init(p->loop, &in->poll, fd);
  if (err != 0) {
    close(fd);
    return err;
  }
  in->poll.data = p;
  in->fd = fd;
  in->open = 1;
  in->enabled = 1;
  p->live |= UVT__H_STDIN;
  p->closing++;
  return 0;
}

static void drop_queue(uvt__stdin_t *in) {
  uvt__inchunk_t *c;

  while ((c = in->head) != NULL) {
    in->head = c->next;
    uvt__free(c);
  }
  in->tail = NULL;
  in->pending = 0;
}

void uvt__stdin_close(uvt__proc_t *p) {
  uvt__stdin_t *in = &p->in;

  in->broken = 1;
  drop_queue(in);
  if (!in->open)
    return;
  in->open = 0;
  in->polling = 0;
  p->live &= ~UVT__H_STDIN;
  uv_close((uv_handle_t *)&in->poll, in->cbs->closed);
}

void uvt__stdin_closed(uvt__proc_t *p) {
  if (p->in.fd >= 0)
    close(p->in.fd);
  p->in.fd = -1;
}

/* D-5: a durable task's FIFO (non-blocking).  A write to a FIFO nobody
 * reads raises SIGPIPE, which a library may not let reach its host: it
 * is held off for this thread around the write, and one it raised is
 * taken back before it is let through again (unless one was pending
 * before, which is the host's). */
static ssize_t put_fifo(uvt__stdin_t *in, const char *bytes, size_t len) {
  static const struct timespec zero = {0, 0};
  sigset_t pipe_set;
  sigset_t old;
  sigset_t pending;
  int had;
  ssize_t n;
  int e;

  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigpending(&pending);
  had = sigismember(&pending, SIGPIPE);
  do
    n = write(in->fd, bytes, len);
  while (n < 0 && errno == EINTR);
  e = errno;
  if (n < 0 && e == EPIPE && !had)
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
      ;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (n >= 0)
    return n;
  if (e == EAGAIN || e == EWOULDBLOCK)
    return UV_EAGAIN;
  return UVT__PERR(e);
}

/* One write system call: bytes written, or a libuv error (UV_EAGAIN when
 * the descriptor takes nothing now). */
static ssize_t put(uvt__stdin_t *in, const char *bytes, size_t len) {
  ssize_t n;

  if (in->fifo)
    return put_fifo(in, bytes, len);
  do {
    if (in->tty)
      n = write(in->fd, bytes, len);
    else
      n = send(in->fd, bytes, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n >= 0)
    return n;
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return UV_EAGAIN;
  return UVT__PERR(errno);
}

static void on_writable(uv_poll_t *h, int status, int events);

/* The child's end is gone (EPIPE, ECONNRESET; EIO from a terminal whose
 * slave side closed): nothing will be read any more. */
static void broken(uvt__proc_t *p) {
  uvt__stdin_t *in = &p->in;

  in->broken = 1;
  drop_queue(in);
  if (in->polling) {
    uv_poll_stop(&in->poll);
    in->polling = 0;
  }
}

/* After the queue drained: the end of input a host asked for. */
static void maybe_end(uvt__proc_t *p) {
  uvt__stdin_t *in = &p->in;

  if (in->head != NULL || !in->host_ended || in->tty || !in->open)
    return;
  /* The socket's last holder on our side: closing it is the child's end
   * of file.  A durable task's FIFO has a second writer, its keeper,
   * which is told to close its end too (D-5). */
  if (in->fifo)
    in->cbs->fifo_end(p);
  uvt__stdin_close(p);
}

/* Write what is queued, in order, until the descriptor takes no more. */
static void flush(uvt__proc_t *p) {
  uvt__stdin_t *in = &p->in;
  uvt__inchunk_t *c;
  ssize_t n;

  while ((c = in->head) != NULL) {
    n = put(in, c->bytes + c->off, c->len - c->off);
    if (n == UV_EAGAIN)
      break;
    if (n < 0) {
      broken(p);
      return;
    }
    c->off += (size_t)n;
    in->pending -= (size_t)n;
    if (c->off == c->len) {
      in->head = c->next;
      if (in->head == NULL)
        in->tail = NULL;
      uvt__free(c);
    }
  }
  if (in->head != NULL && !in->polling) {
    if (uv_poll_start(&in->poll, UV_WRITABLE, on_writable) == 0)
      in->polling = 1;
    else
      broken(p);
  } else if (in->head == NULL && in->polling) {
    uv_poll_stop(&in->poll);
    in->polling = 0;
  }
}

static void on_writable(uv_poll_t *h, int status, int events) {
  uvt__proc_t *p = h->data;

  (void)events;
  if (status < 0) {
    broken(p);
    return;
  }
  flush(p);
  maybe_end(p);
}

/* A chunk for up to `len` queued bytes (allocated before anything is
 * written, so that a failed allocation changes nothing). */
static uvt__inchunk_t *chunk_new(size_t len) {
  uvt__inchunk_t *c = uvt__malloc(sizeof(*c) + len);

  if (c != NULL) {
    c->next = NULL;
    c->len = 0;
    c->off = 0;
  }
  return c;
}

/* Queue bytes [0, len) behind what is queued, copied into `c`. */
static void enqueue(uvt__stdin_t *in, uvt__inchunk_t *c, const char *bytes,
                    size_t len) {
  c->len = len;
  memcpy(c->bytes, bytes, len);
  if (in->tail != NULL)
    in->tail->next = c;
  else
    in->head = c;
  in->tail = c;
  in->pending += len;
}

/* The body of uvt_process_write() once the task takes input (write.c):
 * whole or nothing. */
int uvt__stdin_write(uvt__proc_t *p, const char *bytes, size_t len) {
  uvt__stdin_t *in = &p->in;
  uvt__inchunk_t *c;
  ssize_t n = 0;

  /* Whole or nothing: checked, and the queue's room allocated, before a
   * byte goes out. */
  if (len > in->cap - in->pending)
    return UV_ENOBUFS;
  c = chunk_new(len);
  if (c == NULL)
    return UV_ENOMEM;
  if (in->head == NULL) {
    n = put(in, bytes, len);
    if (n == UV_EAGAIN) {
      n = 0;
    } else if (n < 0) {
      uvt__free(c);
      broken(p);
      return UV_EPIPE;
    }
    if ((size_t)n == len) {
      uvt__free(c);
      return 0;
    }
  }
  enqueue(in, c, bytes + n, len - (size_t)n);
  flush(p);
  return in->broken ? UV_EPIPE : 0;
}

/* The body of uvt_process_close_stdin() once the task takes input. */
int uvt__stdin_end(uvt__proc_t *p) {
  uvt__stdin_t *in = &p->in;
  uvt__inchunk_t *c;
  char veof;

  if (in->tty) {
    /* A terminal stays open (it is also the output): its end-of-file
     * character, behind what is queued, whatever the cap. */
    veof = uvt__pty_veof(in->fd);
    c = chunk_new(1);
    if (c == NULL)
      return UV_ENOMEM;
    enqueue(in, c, &veof, 1);
    in->host_ended = 1;
    flush(p);
    return 0;
  }
  in->host_ended = 1;
  maybe_end(p);
  return 0;
}
