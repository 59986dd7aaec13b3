/* Structured reads for hosts (P-RES-1): uvt_process_read().
 *
 * uvt_read() gives a model one text: stdout, a "[stderr]" line, stderr,
 * and notices of dropped bytes; a command can print those markers itself,
 * so a program cannot take the text apart again.  This read hands over the
 * two streams as separate byte blocks, the dropped counts as numbers and,
 * once the task ended, its exit status as integers.
 *
 * One cursor.  While the task runs, both reads consume the same rings.
 * When it settles, what nobody read becomes the outcome's text (the
 * registry serves uvt_read() from it), and settle() records where each
 * stream's bytes lie in that text (uvt__layout_t); the first read after
 * the end, of either kind, consumes all of it (uvt_task_remainder_take), so
 * this one slices the text by the layout instead of keeping a second copy of
 * the bytes. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "process-internal.h"

static char *copy_bytes(const char *from, size_t len) {
  char *b = uvt__malloc(len + 1);
  if (b == NULL)
    return NULL;
  if (len > 0)
    memcpy(b, from, len);
  b[len] = '\0';
  return b;
}

/* The exit status as integers (see uvt_process_read_t). */
static void status_of(const uvt__proc_t *p, uvt_process_read_t *out) {
  out->exited = 1;
  out->exit_code = -1;
  out->term_signal = 0;
  if (p->not_started || p->status_lost || !p->reaped)
    return;
  if (WIFSIGNALED(p->status))
    out->term_signal = WTERMSIG(p->status);
  else
    out->exit_code = WEXITSTATUS(p->status);
}

/* The task ended: the unread rest from the outcome's text, once. */
static int read_ended(uvt_task_t *t, uvt__proc_t *p, uvt_process_read_t *out) {
  const uvt__layout_t *l = &p->fin;
  const char *text;
  size_t len;
  int left = uvt_task_remainder_peek(t, &text, &len);
  /* Unread: no read consumed the text yet (or the registry could not keep
   * it, and nothing said so yet). */
  int unread = p->fin_ok && (left == 1 || (len == 0 && l->total > 0));
  int err;

  if (left < 0)
    return left;
  if (unread && left == 1 && len == l->total) {
    out->out = copy_bytes(text + l->off[0], l->len[0]);
    out->err = copy_bytes(text + l->off[1], l->len[1]);
    out->out_len = l->len[0];
    out->err_len = l->len[1];
    out->out_dropped = l->dropped[0];
    out->err_dropped = l->dropped[1];
  } else {
    out->out = copy_bytes("", 0);
    out->err = copy_bytes("", 0);
    if (unread) {
      /* The registry could not keep the text (no memory at settle): what
       * it held is lost, and said so. */
      out->out_dropped = l->dropped[0] + l->len[0];
      out->err_dropped = l->dropped[1] + l->len[1];
    }
  }
  if (out->out == NULL || out->err == NULL)
    return UV_ENOMEM;
  /* R-READ-3: a read that finds the task ended marks it reported, and its
   * snapshot shows that; the registry does both, and consumes the text
   * (R-READ-1), in uvt_task_remainder_take. */
  err = uvt_task_remainder_take(t, unread, &out->snapshot);
  if (err != 0)
    return err;
  if (unread)
    p->fin_ok = 0; /* consumed: later reads are empty */
  status_of(p, out);
  return 0;
}

/* Room for `n` more bytes and a NUL at the end of *block (*len bytes). */
static int reserve(char **block, size_t len, size_t n) {
  char *b = uvt__realloc(*block, len + n + 1);

  if (b == NULL)
    return UV_ENOMEM;
  *block = b;
  return 0;
}

static void append(char *block, size_t *len, const char *bytes, size_t n) {
  memcpy(block + *len, bytes, n);
  *len += n;
  block[*len] = '\0';
}

/* P-OUT-6: after the remainder, what the ended task's lingering streams
 * got since (uvt_process_reading()).  Nothing is consumed on error. */
static int read_late(uvt__proc_t *p, uvt_process_read_t *out) {
  uvt__split_t sp;
  int err;

  if (!p->settled || (p->out.buf.len == 0 && p->out.buf.dropped == 0 &&
                      p->err.buf.len == 0 && p->err.buf.dropped == 0))
    return 0;
  /* A read hands out at most what a stream holds: room first, so that
   * nothing can fail once the split consumed it. */
  if (reserve(&out->out, out->out_len, p->out.buf.len) != 0 ||
      reserve(&out->err, out->err_len, p->err.buf.len) != 0)
    return UV_ENOMEM;
  memset(&sp, 0, sizeof(sp));
  err = uvt__output_split(&p->out.buf, p->out.closed, &p->err.buf,
                          p->err.closed, &sp);
  if (err != 0)
    return err;
  append(out->out, &out->out_len, sp.bytes[0], sp.len[0]);
  append(out->err, &out->err_len, sp.bytes[1], sp.len[1]);
  out->out_dropped += sp.dropped[0];
  out->err_dropped += sp.dropped[1];
  uvt__free(sp.bytes[0]);
  uvt__free(sp.bytes[1]);
  uvt__proc_resume(p);
  return 0;
}

int uvt_process_read(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uvt_process_read_t *out) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__split_t sp;
  uvt__proc_t *p;
  uvt_task_t *t;
  char *text;
  size_t size;
  int err;

  if (out == NULL)
    return UV_EINVAL;
  memset(out, 0, sizeof(*out));
  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  if (uvt_status_is_terminal(uvt_task_status(t))) {
    err = read_ended(t, p, out);
    if (err == 0)
      err = read_late(p, out);
    if (err != 0)
      uvt_process_read_cleanup(out);
    return err;
  }
  /* Live: the snapshot first, so nothing fails once output was consumed;
   * a read of a live task never marks it reported. */
  err = uvt_task_snapshot(t, &out->snapshot);
  if (err != 0)
    return err;
  memset(&sp, 0, sizeof(sp));
  if (p->settled) {
    /* Settled but not yet recorded by the registry: as uvt_read(), nothing
     * until the terminal snapshot (the bytes are in the outcome). */
    out->out = copy_bytes("", 0);
    out->err = copy_bytes("", 0);
    err = out->out != NULL && out->err != NULL ? 0 : UV_ENOMEM;
  } else if ((out->err = copy_bytes("", 0)) == NULL) {
    err = UV_ENOMEM;
  } else if (uvt__output_take(&p->out.buf, p->out.closed, &p->err.buf,
                              p->err.closed, &text, &out->out_len, &size)) {
    /* Only stdout, from the start of its ring: the ring the pipe was
     * read into becomes the read's block, with no copy (N-12), and the
     * stream reads into a new one.  Its spare byte takes the NUL. */
    out->out = text;
    out->out[out->out_len] = '\0';
    uvt__trim_note(p->procs, size);
    uvt__proc_resume(p);
  } else {
    uvt__free(out->err);
    out->err = NULL;
    err = uvt__output_split(&p->out.buf, p->out.closed, &p->err.buf,
                            p->err.closed, &sp);
    if (err == 0) {
      out->out = sp.bytes[0];
      out->out_len = sp.len[0];
      out->err = sp.bytes[1];
      out->err_len = sp.len[1];
      out->out_dropped = sp.dropped[0];
      out->err_dropped = sp.dropped[1];
      uvt__trim_note(p->procs, sp.len[0]);
      uvt__trim_note(p->procs, sp.len[1]);
      uvt__proc_resume(p);
    }
  }
  if (err != 0)
    uvt_process_read_cleanup(out);
  return err;
}

int uvt_process_status(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, int *exited, int *exit_code,
                       int *term_signal) {
  uvt_process_read_t st;
  uvt__proc_t *p;
  uvt_task_t *t;
  int err;

  if (exited == NULL || exit_code == NULL || term_signal == NULL)
    return UV_EINVAL;
  *exited = 0;
  *exit_code = 0;
  *term_signal = 0;
  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  if (!uvt_status_is_terminal(uvt_task_status(t)))
    return 0;
  status_of(p, &st);
  *exited = 1;
  *exit_code = st.exit_code;
  *term_signal = st.term_signal;
  return 0;
}

void uvt_process_read_cleanup(uvt_process_read_t *r) {
  if (r == NULL)
    return;
  uvt__free(r->out);
  uvt__free(r->err);
  uvt_snapshot_cleanup(&r->snapshot);
  r->out = NULL;
  r->err = NULL;
  r->out_len = 0;
  r->err_len = 0;
  r->out_dropped = 0;
  r->err_dropped = 0;
  r->exited = 0;
  r->exit_code = 0;
  r->term_signal = 0;
}
