/* stdin and stdout of uvtasks-mcp through libuv: a pipe, a socket or a tty
 * as a stream, anything else (a regular file, /dev/null) through uv_fs.
 * Input is cut into lines of at most MCP_LINE_MAX bytes without buffering
 * more than that (M-MCP-3); output is written completely and in order.
 * What they have to say to the server (a line, the end, a failed write,
 * a backlog) goes through the callbacks their owner gave (mcp_in_cbs_t,
 * mcp_out_cbs_t), each receiving its own handle: this file calls nothing
 * of the server by name. */
#include "mcp.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* Input                                                                   */

static void in_eof(mcp_in_t *in) {
  /* A last message without its newline still counts. */
  if (in->len > 0 && !in->discarding)
    in->cbs->line(in, in->line, in->len);
  in->len = 0;
  in->cbs->eof(in);
}

/* Feed `n` bytes of input. */
static void in_feed(mcp_in_t *in, const char *p, size_t n) {
  const char *nl;
  size_t piece;
  size_t len;

  while (n > 0 && !in->stopped) {
    nl = memchr(p, '\n', n);
    piece = nl != NULL ? (size_t)(nl - p) : n;

    if (in->discarding) {
      if (nl != NULL)
        in->discarding = 0;
    } else if (in->len + piece > MCP_LINE_MAX) {
      /* Too long: say so once (with the line's first bytes, for its id),
       * drop what was kept, skip to the newline. */
      const char *head = in->len > 0 ? in->line : p;
      size_t hlen = in->len > 0 ? in->len : piece;
      in->cbs->oversized(in, head, hlen < MCP_HEAD_MAX ? hlen : MCP_HEAD_MAX);
      in->len = 0;
      if (in->cap > sizeof(in->chunk)) {
        free(in->line);
        in->line = NULL;
        in->cap = 0;
      }
      in->discarding = nl == NULL;
    } else if (nl != NULL && in->len == 0) {
      /* The whole line is in this chunk: no copy. */
      len = piece;
      if (len > 0 && p[len - 1] == '\r')
        len--;
      in->cbs->line(in, p, len);
    } else {
      if (in->len + piece > in->cap) {
        size_t cap = in->cap ? in->cap : 4096;
        char *line;
        while (cap < in->len + piece)
          cap *= 2;
        if (cap > MCP_LINE_MAX)
          cap = MCP_LINE_MAX;
        line = realloc(in->line, cap);
        if (line == NULL) {
          /* Treat it like an oversized line: answer and resync. */
          in->len = 0;
          in->discarding = nl == NULL;
          in->cbs->oversized(in, NULL, 0);
          goto next;
        }
        in->line = line;
        in->cap = cap;
      }
      memcpy(in->line + in->len, p, piece);
      in->len += piece;
      if (nl != NULL) {
        len = in->len;
        if (len > 0 && in->line[len - 1] == '\r')
          len--;
        in->len = 0;
        in->cbs->line(in, in->line, len);
      }
    }
  next:
    if (nl == NULL)
      break;
    n -= piece + 1;
    p = nl + 1;
  }
}

static void in_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  mcp_in_t *in = h->data;
  /* Each chunk is consumed inside the read callback, so one buffer does. */
  *buf = uv_buf_init(in->chunk, sizeof(in->chunk));
}

static void in_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  mcp_in_t *in = s->data;

  if (nread > 0) {
    in_feed(in, buf->base, (size_t)nread);
    return;
  }
  if (nread == 0)
    return;
  /* UV_EOF or a read error: either way the client is gone. */
  uv_read_stop(s);
  in->stopped = 1;
  in_eof(in);
}

static void in_fs_read(mcp_in_t *in);

static void in_fs_cb(uv_fs_t *req) {
  mcp_in_t *in = req->data;
  ssize_t n = req->result;

  uv_fs_req_cleanup(req);
  in->fs_busy = 0;
  if (in->stopped)
    return;
  if (n > 0) {
    in_feed(in, in->chunk, (size_t)n);
    if (!in->stopped && !in->paused)
      in_fs_read(in);
    return;
  }
  in->stopped = 1;
  in_eof(in);
}

static void in_fs_read(mcp_in_t *in) {
  uv_buf_t buf = uv_buf_init(in->chunk, sizeof(in->chunk));
  int err;

  in->fs.data = in;
  err = uv_fs_read(in->loop, &in->fs, 0, &buf, 1, -1, in_fs_cb);
  if (err != 0) {
    in->stopped = 1;
    in_eof(in);
    return;
  }
  in->fs_busy = 1;
}

int mcp_in_start(mcp_in_t *in, uv_loop_t *loop, const mcp_in_cbs_t *cbs,
                 void *data) {
  uv_handle_type type = uv_guess_handle(0);
  int err;

  memset(in, 0, sizeof(*in));
  in->loop = loop;
  in->cbs = cbs;
  in->data = data;
  in->hup_fd = -1;
  if (type == UV_TTY) {
    err = uv_tty_init(loop, &in->h.tty, 0, 1);
  } else if (type == UV_NAMED_PIPE) {
    err = uv_pipe_init(loop, &in->h.pipe, 0);
    if (err == 0) {
      in->open = 1;
      in->h.handle.data = in;
      err = uv_pipe_open(&in->h.pipe, 0);
    }
  } else {
    in->kind = MCP_IO_FILE;
    in_fs_read(in);
    return 0;
  }
  if (err == 0 || in->open) {
    in->open = 1;
    in->h.handle.data = in;
  }
  if (err != 0)
    return err;
  in->kind = MCP_IO_STREAM;
  return uv_read_start(&in->h.stream, in_alloc_cb, in_read_cb);
}

/* M-MCP-10: the client hung up while reading was paused (a pipe with no
 * writer left, a socket shut for writing, or an error on it).  What is
 * still in the kernel's buffer is all that can come, so it is read to its
 * end without pausing again: the requests in it are served in order and
 * the end of input starts the shutdown as it always does. */
static void in_hup_cb(uv_poll_t *h, int status, int events) {
  mcp_in_t *in = h->data;

  if (status == 0 && !(events & UV_DISCONNECT))
    return;
  uv_poll_stop(h);
  in->draining = 1;
  mcp_in_resume(in);
}

static void in_hup_closed(uv_handle_t *h) {
  mcp_in_t *in = h->data;

  if (in->hup_fd >= 0)
    close(in->hup_fd);
  in->hup_fd = -1;
}

/* Watch for the hang-up while paused.  Without the watch (no descriptor
 * left for the duplicate) the pause still holds; only the end of input
 * is then seen late, once the client reads again. */
static void in_hup_watch(mcp_in_t *in) {
  uv_os_fd_t fd;

  if (!in->hup_open) {
    in->hup_fd = -1;
    if (uv_fileno(&in->h.handle, &fd) != 0)
      return;
    in->hup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (in->hup_fd < 0)
      return;
    if (uv_poll_init(in->loop, &in->hup, in->hup_fd) != 0) {
      close(in->hup_fd);
      in->hup_fd = -1;
      return;
    }
    in->hup.data = in;
    in->hup_open = 1;
  }
  uv_poll_start(&in->hup, UV_DISCONNECT, in_hup_cb);
}

static void in_hup_close(mcp_in_t *in) {
  if (!in->hup_open)
    return;
  in->hup_open = 0;
  uv_close((uv_handle_t *)&in->hup, in_hup_closed);
}

void mcp_in_stop(mcp_in_t *in) {
  if (in->hup_open)
    uv_poll_stop(&in->hup);
  if (in->stopped)
    return;
  in->stopped = 1;
  if (in->kind == MCP_IO_STREAM && in->open)
    uv_read_stop(&in->h.stream);
  else if (in->kind == MCP_IO_FILE && in->fs_busy)
    uv_cancel((uv_req_t *)&in->fs); /* may fail if running; then it ends */
}

void mcp_in_pause(mcp_in_t *in) {
  if (in->paused || in->stopped || in->draining)
    return;
  in->paused = 1;
  if (in->kind == MCP_IO_STREAM && in->open) {
    uv_read_stop(&in->h.stream);
    in_hup_watch(in);
  }
  /* File mode: the read in flight finishes; the next is not started. */
}

void mcp_in_resume(mcp_in_t *in) {
  if (!in->paused)
    return;
  in->paused = 0;
  if (in->hup_open)
    uv_poll_stop(&in->hup);
  if (in->stopped)
    return;
  if (in->kind == MCP_IO_STREAM && in->open) {
    if (uv_read_start(&in->h.stream, in_alloc_cb, in_read_cb) != 0) {
      in->stopped = 1;
      in_eof(in);
    }
  } else if (in->kind == MCP_IO_FILE && !in->fs_busy) {
    in_fs_read(in);
  }
}

void mcp_in_close(mcp_in_t *in) {
  mcp_in_stop(in);
  in_hup_close(in);
  if (in->open && !uv_is_closing(&in->h.handle))
    uv_close(&in->h.handle, NULL);
  in->open = 0;
  free(in->line);
  in->line = NULL;
  in->cap = 0;
  in->len = 0;
}

/* ---------------------------------------------------------------------- */
/* Output                                                                  */

struct mcp_out_chunk_s {
  uv_write_t w;
  mcp_out_t *out;
  mcp_out_chunk_t *next;
  size_t len;
  size_t done;
  char bytes[1];
};

static void out_finish_close(mcp_out_t *out) {
  if (!out->closing || out->writes != 0 || out->fs_busy)
    return;
  if (out->open && !uv_is_closing(&out->h.handle))
    uv_close(&out->h.handle, NULL);
  out->open = 0;
  /* A start-up that failed before mcp_out_init() closes an output that
   * never had an owner: the caller ends the shutdown itself. */
  if (out->cbs != NULL)
    out->cbs->closed(out);
}

static void out_failed(mcp_out_t *out) {
  if (out->broken)
    return;
  out->broken = 1;
  out->cbs->failed(out);
}

/* `n` bytes were written (or dropped): below half the high-water mark the
 * server reads stdin again. */
static void out_drained(mcp_out_t *out, size_t n) {
  out->queued -= n;
  out->drained += n;
  if (out->queued <= MCP_OUT_HIGH_WATER / 2)
    out->cbs->backlog(out, 0);
}

static void out_write_cb(uv_write_t *w, int status) {
  mcp_out_chunk_t *c = w->data;
  mcp_out_t *out = c->out;

  out_drained(out, c->len);
  free(c);
  out->writes--;
  if (status != 0)
    out_failed(out);
  out_finish_close(out);
}

static void out_fs_pump(mcp_out_t *out);

static void out_fs_cb(uv_fs_t *req) {
  mcp_out_t *out = req->data;
  mcp_out_chunk_t *c = out->head;
  ssize_t n = req->result;

  uv_fs_req_cleanup(req);
  out->fs_busy = 0;
  if (n < 0) {
    out_failed(out);
    /* Drop everything queued: nobody can read it. */
    while (out->head != NULL) {
      c = out->head;
      out->head = c->next;
      out_drained(out, c->len);
      free(c);
    }
    out->tail = NULL;
    out_finish_close(out);
    return;
  }
  c->done += (size_t)n;
  if (c->done == c->len) {
    out->head = c->next;
    if (out->head == NULL)
      out->tail = NULL;
    out_drained(out, c->len);
    free(c);
  }
  out_fs_pump(out);
  out_finish_close(out);
}

static void out_fs_pump(mcp_out_t *out) {
  mcp_out_chunk_t *c = out->head;
  uv_buf_t buf;

  if (out->fs_busy || c == NULL)
    return;
  buf = uv_buf_init(c->bytes + c->done, (unsigned)(c->len - c->done));
  out->fs.data = out;
  if (uv_fs_write(out->loop, &out->fs, 1, &buf, 1, -1, out_fs_cb) != 0) {
    out_failed(out);
    return;
  }
  out->fs_busy = 1;
}

int mcp_out_init(mcp_out_t *out, uv_loop_t *loop, const mcp_out_cbs_t *cbs,
                 void *data) {
  uv_handle_type type = uv_guess_handle(1);
  int err;

  memset(out, 0, sizeof(*out));
  out->loop = loop;
  out->cbs = cbs;
  out->data = data;
  /* For the tests of a failed write (test/mcp/write-fail-test.sh): the
   * Nth write fails as a write that cannot be queued (out of memory)
   * does, inside whatever handler makes it. */
  if (getenv("UVTASKS_MCP_FAIL_WRITE") != NULL)
    out->fail_at = strtoul(getenv("UVTASKS_MCP_FAIL_WRITE"), NULL, 10);
  if (type == UV_TTY) {
    err = uv_tty_init(loop, &out->h.tty, 1, 0);
  } else if (type == UV_NAMED_PIPE) {
    err = uv_pipe_init(loop, &out->h.pipe, 0);
    if (err == 0) {
      out->open = 1;
      err = uv_pipe_open(&out->h.pipe, 1);
    }
  } else {
    out->kind = MCP_IO_FILE;
    return 0;
  }
  if (err == 0)
    out->open = 1;
  if (out->open)
    out->h.handle.data = out;
  out->kind = MCP_IO_STREAM;
  return err;
}

void mcp_out_write(mcp_out_t *out, const char *bytes, size_t len) {
  mcp_out_chunk_t *c;
  uv_buf_t buf;

  if (out->broken || out->closing || len == 0)
    return;
  /* The test seam (UVTASKS_MCP_FAIL_WRITE): this write fails at once. */
  c = out->fail_at > 0 && --out->fail_at == 0 ? NULL : malloc(sizeof(*c) + len);
  if (c == NULL) {
    /* A lost message would desynchronise the client: stop serving. */
    out_failed(out);
    return;
  }
  c->out = out;
  c->next = NULL;
  c->len = len;
  c->done = 0;
  memcpy(c->bytes, bytes, len);
  /* M-MCP-8: a client that does not read its answers must not make us
   * queue without bound: stop reading its requests until it catches up. */
  out->queued += len;
  if (out->queued > MCP_OUT_HIGH_WATER)
    out->cbs->backlog(out, 1);
  if (out->kind == MCP_IO_FILE) {
    if (out->tail != NULL)
      out->tail->next = c;
    else
      out->head = c;
    out->tail = c;
    out_fs_pump(out);
    return;
  }
  c->w.data = c;
  buf = uv_buf_init(c->bytes, (unsigned)len);
  /* uv_write queues behind earlier writes and finishes partial ones. */
  if (uv_write(&c->w, &out->h.stream, &buf, 1, out_write_cb) != 0) {
    out->queued -= len;
    free(c);
    out_failed(out);
    return;
  }
  out->writes++;
}

void mcp_out_close(mcp_out_t *out) {
  out->closing = 1;
  out_finish_close(out);
}

/* M-MCP-10: the client does not read and the hard limit ran out.  Closing
 * a stream cancels its pending writes (their callbacks see UV_ECANCELED),
 * so nothing of ours keeps the loop alive.  Returns nonzero if a file
 * write is still running, which cannot be cancelled. */
int mcp_out_abort(mcp_out_t *out) {
  out->closing = 1;
  out->broken = 1;
  if (out->kind == MCP_IO_FILE && out->fs_busy)
    return 1;
  if (out->open && !uv_is_closing(&out->h.handle))
    uv_close(&out->h.handle, NULL);
  out->open = 0;
  out->cbs->closed(out);
  return 0;
}
