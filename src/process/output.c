/* Captured output of a process task: capped rings per stream (P-OUT-2) and
 * the read format that never splits a UTF-8 sequence (P-OUT-1, P-OUT-3). */
#include <stdio.h>
#include <string.h>

#include "leaf/utf8.h"
#include "process-internal.h"

/* First allocation of a ring; it doubles from here up to the cap. */
#define RING_START 4096

void uvt__outbuf_init(uvt__outbuf_t *b, size_t cap) {
  memset(b, 0, sizeof(*b));
  b->cap = cap;
}

void uvt__outbuf_keep_first(uvt__outbuf_t *b, size_t n) {
  b->first_cap = n;
}

/* The kept first bytes are of no use once a read consumed some. */
static void first_free(uvt__outbuf_t *b) {
  uvt__free(b->first);
  b->first = NULL;
  b->first_len = 0;
  b->first_cap = 0;
}

/* M-TOOLS-15: copy what of `n` new bytes at `data` belongs to the stream's
 * first bytes.  Out of memory: they are not kept. */
static void keep_first(uvt__outbuf_t *b, const char *data, size_t n) {
  size_t k;

  if (b->first_len >= b->first_cap || b->was_read || n == 0)
    return;
  if (b->first == NULL) {
    b->first = uvt__malloc(b->first_cap);
    if (b->first == NULL) {
      b->first_cap = 0;
      return;
    }
  }
  k = b->first_cap - b->first_len;
  if (k > n)
    k = n;
  memcpy(b->first + b->first_len, data, k);
  b->first_len += k;
}

void uvt__outbuf_free(uvt__outbuf_t *b) {
  first_free(b);
  uvt__free(b->ring);
  b->ring = NULL;
  b->alloc = 0;
  b->head = 0;
  b->len = 0;
  b->hint = 0;
}

static unsigned char byte_at(const uvt__outbuf_t *b, size_t i) {
  return (unsigned char)b->ring[(b->head + i) % b->alloc];
}

static void drop_oldest(uvt__outbuf_t *b, size_t n) {
  size_t first;

  if (n == 0)
    return;
  if (n > b->len)
    n = b->len;
  if (b->spill != NULL && n > 0) {
    /* M-TOOLS-10: in order, the ring's two parts. */
    first = b->alloc - b->head;
    if (first > n)
      first = n;
    b->spill(b->spill_ctx, b->ring + b->head, first);
    if (n > first)
      b->spill(b->spill_ctx, b->ring, n - first);
  }
  b->head = b->alloc ? (b->head + n) % b->alloc : 0;
  b->len -= n;
  b->dropped += n;
  b->cut = 1;
}

/* Make room for `want` unread bytes, keeping the ring contiguous in logical
 * order.  Returns the capacity actually available (the old one when memory
 * runs out). */
static size_t grow(uvt__outbuf_t *b, size_t want) {
  size_t n;
  char *ring;
  size_t first;

  if (want <= b->alloc)
    return b->alloc;
  n = b->alloc ? b->alloc : b->hint > RING_START ? b->hint : RING_START;
  while (n < want && n < b->cap)
    n = n > b->cap / 2 ? b->cap : n * 2;
  if (n > b->cap)
    n = b->cap;
  /* One spare byte: a ring handed over as a read's text (uvt__output_take)
   * is NUL-terminated there. */
  ring = uvt__malloc(n + 1);
  if (ring == NULL)
    return b->alloc;
  /* Copy the unread bytes to the start of the new ring, in order. */
  if (b->len > 0) {
    first = b->alloc - b->head;
    if (first > b->len)
      first = b->len;
    memcpy(ring, b->ring + b->head, first);
    memcpy(ring + first, b->ring, b->len - first);
  }
  uvt__free(b->ring);
  b->ring = ring;
  b->alloc = n;
  b->head = 0;
  return n;
}

void uvt__outbuf_push(uvt__outbuf_t *b, const char *data, size_t n) {
  size_t room;
  size_t tail;
  size_t first;

  if (n == 0)
    return;
  keep_first(b, data, n);
  /* Bytes beyond the cap in this very chunk never enter the ring. */
  if (n > b->cap) {
    drop_oldest(b, b->len);
    if (b->spill != NULL)
      b->spill(b->spill_ctx, data, n - b->cap);
    b->dropped += n - b->cap;
    b->cut = 1;
    data += n - b->cap;
    n = b->cap;
  }
  room = grow(b, b->len + n > b->cap ? b->cap : b->len + n);
  if (room == 0) {
    if (b->spill != NULL)
      b->spill(b->spill_ctx, data, n);
    b->dropped += n;
    b->cut = 1;
    return;
  }
  if (n > room) {
    /* Out of memory below the cap: keep the newest bytes that fit. */
    drop_oldest(b, b->len);
    if (b->spill != NULL)
      b->spill(b->spill_ctx, data, n - room);
    b->dropped += n - room;
    data += n - room;
    n = room;
  }
  if (b->len + n > room)
    drop_oldest(b, b->len + n - room);
  tail = (b->head + b->len) % b->alloc;
  first = b->alloc - tail;
  if (first > n)
    first = n;
  memcpy(b->ring + tail, data, first);
  memcpy(b->ring, data + first, n - first);
  b->len += n;
}

size_t uvt__outbuf_space(uvt__outbuf_t *b, size_t want, char **at) {
  size_t tail;
  size_t span;
  size_t free_bytes;

  *at = NULL;
  if (want == 0)
    return 0;
  if (b->len == 0)
    b->head = 0;
  /* Below the cap, double once the free space is smaller than a chunk (or
   * than half the ring, while it is small): a read seldom gets less than a
   * chunk, and the ring stays within four times what was unread. */
  free_bytes = b->alloc - b->len;
  if (b->alloc == 0)
    grow(b, b->hint > RING_START ? b->hint : RING_START);
  else if (b->alloc < b->cap &&
           free_bytes < (b->alloc / 2 < want ? b->alloc / 2 : want))
    grow(b, b->alloc + 1);
  if (b->alloc == 0)
    return 0;
  /* M-TOOLS-10: bytes a read would overwrite in place must be handed on
   * first, but only those that more bytes actually push out (a read that
   * finds the end, or nothing, drops nothing): the caller reads elsewhere
   * and pushes (uvt__outbuf_push spills exactly what arrived beyond the
   * cap). */
  if (b->len == b->alloc && b->spill != NULL)
    return 0;
  if (b->len == b->alloc) {
    /* Full (at the cap, or out of memory below it): the bytes overwrite the
     * oldest ones, which the commit counts as dropped (P-OUT-2). */
    tail = b->head;
    span = b->alloc - b->head;
  } else {
    tail = (b->head + b->len) % b->alloc;
    span = tail >= b->head ? b->alloc - tail : b->head - tail;
  }
  *at = b->ring + tail;
  return span < want ? span : want;
}

void uvt__outbuf_commit(uvt__outbuf_t *b, size_t n) {
  if (n == 0)
    return;
  /* Where uvt__outbuf_space put them: at the oldest byte when full. */
  if (b->first_len < b->first_cap && !b->was_read)
    keep_first(b,
               b->ring + (b->len == b->alloc ? b->head
                                             : (b->head + b->len) % b->alloc),
               n);
  if (b->len + n > b->alloc)
    drop_oldest(b, b->len + n - b->alloc);
  b->len += n;
}

/* How many trailing bytes of [from, len) form an incomplete sequence that
 * more bytes could complete (P-OUT-3: the one rule of leaf/utf8.h, on the
 * ring's last bytes). */
static size_t incomplete_tail(const uvt__outbuf_t *b, size_t from) {
  unsigned char last[3];
  size_t avail = b->len - from;
  size_t n = avail < 3 ? avail : 3;
  size_t i;

  for (i = 0; i < n; i++)
    last[i] = byte_at(b, b->len - n + i);
  return uvt__utf8_incomplete(last, n);
}

typedef struct {
  size_t skip; /* continuation bytes of a character cut by a drop */
  size_t emit; /* bytes handed out now */
  uint64_t dropped;
} plan_t;

static void plan_stream(const uvt__outbuf_t *b, int final, plan_t *p) {
  p->skip = 0;
  if (b->cut)
    while (p->skip < 3 && p->skip < b->len &&
           uvt__utf8_is_cont(byte_at(b, p->skip)))
      p->skip++;
  p->emit = b->len - p->skip;
  if (!final)
    p->emit -= incomplete_tail(b, p->skip);
  p->dropped = b->dropped + p->skip;
}

static int emit_bytes(const uvt__outbuf_t *b, const plan_t *p,
                      uvt__sink_fn sink, void *ctx) {
  size_t start;
  size_t first;
  int err;

  if (p->emit == 0)
    return 0;
  start = (b->head + p->skip) % b->alloc;
  first = b->alloc - start;
  if (first > p->emit)
    first = p->emit;
  err = sink(ctx, b->ring + start, first);
  if (err == 0 && p->emit > first)
    err = sink(ctx, b->ring, p->emit - first);
  return err;
}

static int emit_notice(uint64_t dropped, uvt__sink_fn sink, void *ctx) {
  char line[64];
  int n;

  if (dropped == 0)
    return 0;
  n = snprintf(line, sizeof(line), "[... %llu bytes dropped ...]\n",
               (unsigned long long)dropped);
  return sink(ctx, line, (size_t)n);
}

/* M-TOOLS-15: a stream that dropped bytes before its first read begins
 * with its kept first bytes (up to their last newline, else no character
 * cut at their end), then a newline if they lack one and the notice of what is
 * still missing between them and the ring.  Without kept bytes just the notice.
 */
static int emit_first(const uvt__outbuf_t *b, const plan_t *p,
                      uvt__sink_fn sink, void *ctx) {
  size_t shown = 0;
  size_t i;
  int err;

  if (!b->was_read && b->first_len > 0 && p->dropped > 0) {
    shown = b->first_len < p->dropped ? b->first_len : (size_t)p->dropped;
    /* A character cut at the end waits for nothing: it goes. */
    i = shown < 3 ? shown : 3;
    shown -=
        uvt__utf8_incomplete((const unsigned char *)b->first + shown - i, i);
  }
  /* Whole lines where there is one: the rest counts as dropped, so no
   * newline is added to the stream's own bytes. */
  if (shown < p->dropped)
    for (i = shown; i > 0; i--)
      if (b->first[i - 1] == '\n') {
        shown = i;
        break;
      }
  if (shown == 0)
    return emit_notice(p->dropped, sink, ctx);
  err = sink(ctx, b->first, shown);
  if (err == 0 && p->dropped > shown && b->first[shown - 1] != '\n')
    err = sink(ctx, "\n", 1);
  if (err == 0)
    err = emit_notice(p->dropped - shown, sink, ctx);
  return err;
}

static void consume(uvt__outbuf_t *b, const plan_t *p) {
  size_t n = p->skip + p->emit;
  char cut[3];
  size_t i;

  /* P-OUT-7: the rest of a character a drop cut is counted as dropped
   * (plan_stream); with on_drop it is handed on like the rest of the drop
   * (M-TOOLS-10), so nothing of the output is lost. */
  if (p->skip > 0 && b->spill != NULL) {
    for (i = 0; i < p->skip; i++)
      cut[i] = (char)byte_at(b, i);
    b->spill(b->spill_ctx, cut, p->skip);
  }

  if (n > 0 || p->dropped > 0) {
    b->was_read = 1;
    first_free(b);
  }
  if (n > 0)
    b->head = (b->head + n) % b->alloc;
  b->len -= n;
  b->dropped = 0;
  b->cut = 0;
  if (b->len == 0)
    b->head = 0;
}

int uvt__output_take(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                     int err_final, char **text, size_t *len, size_t *size) {
  plan_t po;
  plan_t pe;
  char *ring;
  size_t keep;

  plan_stream(out, out_final, &po);
  plan_stream(err, err_final, &pe);
  /* Only stdout, no notice, starting at the start of the block; and at least
   * half of the ring, so the text wastes no more than the doubling of
   * uvt_buf_append would. */
  if (pe.emit > 0 || pe.dropped > 0 || po.dropped > 0 || po.skip > 0 ||
      out->head != 0 || po.emit == 0 || po.emit < out->alloc / 2)
    return 0;
  /* At most 3 bytes of an incomplete character stay for later; head is 0,
   * so the unread bytes do not wrap. */
  keep = out->len - po.emit;
  ring = NULL;
  if (keep > 0) {
    /* The replacement has the same size: that is what this stream needs
     * between reads. */
    ring = uvt__malloc(out->alloc + 1);
    if (ring == NULL)
      return 0;
    memcpy(ring, out->ring + po.emit, keep);
  }
  *text = out->ring;
  *len = po.emit;
  *size = out->alloc + 1;
  /* Without held bytes the next ring (of the same size) is allocated at the
   * next read from the pipe: by then the reader has often freed this text,
   * and the allocator hands the same, cache-warm memory back. */
  out->hint = out->alloc;
  out->was_read = 1;
  first_free(out);
  out->ring = ring;
  if (ring == NULL)
    out->alloc = 0;
  out->len = keep;
  return 1;
}

/* A sink that counts what passes through it, so the layout of a read can
 * be told without knowing the notices' lengths in advance. */
typedef struct {
  uvt__sink_fn sink;
  void *ctx;
  size_t pos;
} counting_t;

static int count_sink(void *ctx, const void *bytes, size_t len) {
  counting_t *c = ctx;
  int rc = c->sink(c->ctx, bytes, len);
  if (rc == 0)
    c->pos += len;
  return rc;
}

int uvt__output_collect(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                        int err_final, uvt__sink_fn sink, void *ctx,
                        uvt__layout_t *layout) {
  plan_t po;
  plan_t pe;
  counting_t c;
  uvt__layout_t l;
  int rc;
  int out_nl = 1; /* the stdout part is empty or ends with a newline */

  plan_stream(out, out_final, &po);
  plan_stream(err, err_final, &pe);
  c.sink = sink;
  c.ctx = ctx;
  c.pos = 0;
  memset(&l, 0, sizeof(l));
  l.dropped[0] = po.dropped;
  l.dropped[1] = pe.dropped;

  rc = emit_first(out, &po, count_sink, &c);
  l.off[0] = c.pos;
  l.len[0] = po.emit;
  if (rc == 0)
    rc = emit_bytes(out, &po, count_sink, &c);
  if (po.emit > 0)
    out_nl = byte_at(out, po.skip + po.emit - 1) == '\n';
  l.off[1] = c.pos;
  if (rc == 0 && (pe.emit > 0 || pe.dropped > 0)) {
    /* "[stderr]" is a line of its own even after a partial stdout line. */
    if (!out_nl)
      rc = count_sink(&c, "\n", 1);
    if (rc == 0)
      rc = count_sink(&c, "[stderr]\n", 9);
    if (rc == 0)
      rc = emit_first(err, &pe, count_sink, &c);
    l.off[1] = c.pos;
    l.len[1] = pe.emit;
    if (rc == 0)
      rc = emit_bytes(err, &pe, count_sink, &c);
  }
  if (rc != 0)
    return rc;
  l.total = c.pos;
  if (layout != NULL)
    *layout = l;
  consume(out, &po);
  consume(err, &pe);
  return 0;
}

/* One stream's bytes of a plan, copied to a new NUL-terminated block. */
static char *copy_plan(const uvt__outbuf_t *b, const plan_t *pl) {
  size_t start;
  size_t first;
  char *text = uvt__malloc(pl->emit + 1);

  if (text == NULL)
    return NULL;
  if (pl->emit > 0) {
    start = (b->head + pl->skip) % b->alloc;
    first = b->alloc - start;
    if (first > pl->emit)
      first = pl->emit;
    memcpy(text, b->ring + start, first);
    memcpy(text + first, b->ring, pl->emit - first);
  }
  text[pl->emit] = '\0';
  return text;
}

int uvt__output_split(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                      int err_final, uvt__split_t *res) {
  plan_t po;
  plan_t pe;

  plan_stream(out, out_final, &po);
  plan_stream(err, err_final, &pe);
  res->bytes[0] = copy_plan(out, &po);
  res->bytes[1] = copy_plan(err, &pe);
  if (res->bytes[0] == NULL || res->bytes[1] == NULL) {
    uvt__free(res->bytes[0]);
    uvt__free(res->bytes[1]);
    res->bytes[0] = res->bytes[1] = NULL;
    return UV_ENOMEM;
  }
  res->len[0] = po.emit;
  res->len[1] = pe.emit;
  res->dropped[0] = po.dropped;
  res->dropped[1] = pe.dropped;
  consume(out, &po);
  consume(err, &pe);
  return 0;
}
