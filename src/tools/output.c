/* One read's output as a tool result shows it (M-TOOLS-7, M-TOOLS-8): the
 * read's text through the terminal filter (term.c), stdout and stderr each
 * with a state of their own kept between reads, then cut to the result's
 * size (uvt__text_clip).
 *
 * A process task's read is stdout, then a line "[stderr]" and stderr
 * (P-OUT-1), and either part may begin with a drop notice
 * "[... N bytes dropped ...]" (P-OUT-2).  The parts are found again here by
 * that format: the first "[stderr]" line starts stderr.  A command that
 * prints such a line itself only moves where its unfinished lines are
 * kept, never what the text says.  (Once the process producer offers a
 * structured read, P-RES-1, the streams can come apart without this.) */
#include "tools-int.h"

#include <string.h>
#include <unistd.h>

/* The filter states of one task, kept while the next read depends on
 * them. */
typedef struct {
  uvt__kept_t kept; /* on the tools' carries_ */
  char id[UVT_ID_MAX];
  uvt__term_t term[2]; /* stdout, stderr */
} carry_t;

static const char stderr_line[] = "[stderr]\n";

static carry_t *carry_find(uvt_tools_t *tools, const char *id) {
  struct uvt__link *n;
  carry_t *c;

  for (n = tools->carries_.next; n != &tools->carries_; n = n->next) {
    c = uvt__container_of(n, carry_t, kept.link);
    if (strcmp(c->id, id) == 0)
      return c;
  }
  return NULL;
}

static void carry_free(carry_t *c) {
  uvt__list_remove(&c->kept.link);
  uvt__term_free(&c->term[0]);
  uvt__term_free(&c->term[1]);
  uvt__tools_free(c);
}

/* kept.c: a dropped task's filter states go with its record. */
static void carry_kept_cb(uvt__kept_t *k, uvt_tools_t *tools, int dropped) {
  (void)tools;
  if (dropped)
    carry_free(uvt__container_of(k, carry_t, kept));
}

void uvt__tools_output_free(uvt_tools_t *tools) {
  struct uvt__link *n;

  while ((n = uvt__list_pop(&tools->carries_)) != NULL)
    carry_free(uvt__container_of(n, carry_t, kept.link));
  uvt__screen_free_all(tools);
  uvt_watch_stop(&tools->watch_);
}

/* Where the first drop notice at a line start lies in `s`, or `n`: a
 * stream begins with it (P-OUT-2) or, with its first bytes kept
 * (M-TOOLS-15), has it after them. */
static size_t find_notice(const char *s, size_t n) {
  const char *nl;
  size_t i = 0;

  while (i < n) {
    if (s[i] == '[' && uvt__drop_notice_len(s + i, n - i, NULL) > 0)
      return i;
    nl = memchr(s + i, '\n', n - i);
    if (nl == NULL)
      break;
    i = (size_t)(nl - s) + 1;
  }
  return n;
}

/* Where stderr's part begins (the "[stderr]" line), or `n`. */
static size_t find_stderr(const char *s, size_t n) {
  size_t k = sizeof(stderr_line) - 1;
  size_t i;

  for (i = 0; i + k <= n; i++) {
    if ((i == 0 || s[i - 1] == '\n') && s[i] == '[' &&
        memcmp(s + i, stderr_line, k) == 0)
      return i;
    /* Only line starts can match: skip to the next one. */
    {
      const char *nl = memchr(s + i, '\n', n - i);
      if (nl == NULL)
        break;
      i = (size_t)(nl - s);
    }
  }
  return n;
}

/* ---- segments: where each part of a read lies in its stream ---------- */

/* One run of one stream's bytes in a read (M-TOOLS-16, M-TOOLS-17): its
 * text as shown, [f0, f1) of the filtered text; where its raw bytes begin
 * in the stream (raw0: an offset in the spill file) and end (raw1); the
 * number of its first line (line0, from 1: line N of the spill file);
 * and, when wanted, one point per raw newline: the filtered offset and
 * the raw offset right after it, so that a cut in the shown text is a
 * byte range of the file.  Lines are counted as the stream has them: the
 * filter keeps one line per line, except the rows a cursor move starts
 * and the 1024-cell pieces of an endless line (M-TOOLS-7), which share
 * their raw line's number. */
typedef struct {
  int k; /* 0 stdout (or the one stream), 1 stderr */
  size_t f0;
  size_t f1;
  uint64_t raw0;
  uint64_t raw1;
  uint64_t line0;
  size_t n;
  size_t cap;
  size_t *mf;
  uint64_t *mr;
} seg_t;

/* A read has at most two segments per stream: the kept first bytes, and
 * the ring's (M-TOOLS-15). */
#define SEGS_MAX 4

typedef struct {
  seg_t seg[SEGS_MAX];
  size_t n;
  int mapped;        /* keep the points */
  int known;         /* raw offsets and line numbers come from the stream's
                        counts (a task the tools started); else from this read */
  uint64_t drop0[2]; /* the raw range a drop notice stood for, per stream */
  uint64_t drop1[2];
  int filled[2]; /* that range was read back from the spill file */
  /* M-TOOLS-16: a view reads what the cap dropped back from the spill file,
   * so it covers the whole new output (NULL: it does not). */
  uvt_tools_t *fill;
} segs_t;

static void segs_free(segs_t *ss) {
  size_t i;

  for (i = 0; i < ss->n; i++) {
    uvt__tools_free(ss->seg[i].mf);
    uvt__tools_free(ss->seg[i].mr);
  }
  ss->n = 0;
}

static seg_t *seg_new(segs_t *ss, int k, size_t f0, uint64_t raw0,
                      uint64_t line0) {
  seg_t *g;

  if (ss->n == SEGS_MAX)
    return NULL;
  g = &ss->seg[ss->n++];
  memset(g, 0, sizeof(*g));
  g->k = k;
  g->f0 = g->f1 = f0;
  g->raw0 = g->raw1 = raw0;
  g->line0 = line0;
  return g;
}

/* Out of memory the points stop: ranges then come out coarser. */
static void seg_point(seg_t *g, size_t f, uint64_t r) {
  size_t cap;
  size_t *mf;
  uint64_t *mr;

  if (g->n == g->cap) {
    cap = g->cap ? g->cap * 2 : 64;
    mf = uvt__tools_realloc(g->mf, cap * sizeof(*mf));
    if (mf == NULL)
      return;
    g->mf = mf;
    mr = uvt__tools_realloc(g->mr, cap * sizeof(*mr));
    if (mr == NULL)
      return;
    g->mr = mr;
    g->cap = cap;
  }
  g->mf[g->n] = f;
  g->mr[g->n] = r;
  g->n++;
}

/* Filter `n` raw bytes into `all` as segment `g` (NULL: none), one raw
 * line at a time when points are kept. */
static void seg_feed(const segs_t *ss, seg_t *g, uvt__term_t *term,
                     const char *s, size_t n, uvt__text_t *all) {
  const char *nl;
  size_t i = 0;
  size_t e;

  if (g == NULL || !ss->mapped) {
    uvt__term_feed(term, s, n, all);
  } else {
    while (i < n) {
      nl = memchr(s + i, '\n', n - i);
      e = nl != NULL ? (size_t)(nl - s) + 1 : n;
      uvt__term_feed(term, s + i, e - i, all);
      if (nl != NULL)
        seg_point(g, all->len, g->raw0 + e);
      i = e;
    }
  }
  if (g != NULL)
    g->raw1 = g->raw0 + n;
}

static uint64_t count_nl(const char *s, size_t n) {
  uint64_t c = 0;
  const char *end = s + n;

  while ((s = memchr(s, '\n', (size_t)(end - s))) != NULL) {
    c++;
    s++;
  }
  return c;
}

/* Where the shown text's offset `f` (in g) lies in the stream: the raw
 * offset of the line start at or before it, and that line's number. */
static void seg_at(const seg_t *g, size_t f, uint64_t *raw, uint64_t *line) {
  size_t lo = 0;
  size_t hi = g->n;
  size_t mid;

  /* The number of points at or before f. */
  while (lo < hi) {
    mid = lo + (hi - lo) / 2;
    if (g->mf[mid] <= f)
      lo = mid + 1;
    else
      hi = mid;
  }
  *raw = lo == 0 ? g->raw0 : g->mr[lo - 1];
  *line = g->line0 + lo;
}

/* M-TOOLS-16: for a view, the part's kept first bytes (`at` of them at
 * `s`) and then the bytes the cap dropped, [d0, d1) of stream k, read back
 * from its spill file, as two segments of the stream, one after the other.
 * 0 (nothing done) when the file does not hold that whole range. */
static int fill_dropped(segs_t *ss, uvt__term_t *term, const char *s, size_t at,
                        int k, uvt__spill_t *sp, uint64_t first0,
                        uint64_t first_line0, uint64_t d0, uint64_t d1,
                        uvt__text_t *t) {
  char path[4096];
  char buf[65536];
  uint64_t pos = d0;
  ssize_t got;
  seg_t *g;
  int fd;

  if (!sp->made[k] || sp->gone || sp->size[k] < d1 || d1 <= d0 ||
      first0 + at != d0 || uvt__spill_path(ss->fill, sp, k, path, sizeof(path)))
    return 0;
  /* The file is ours, made by the spill's descriptor (S-7): opened by name
   * without following a link, and only if it is the same inode. */
  fd = uvt__spill_read_fd(ss->fill, sp, k);
  if (fd < 0)
    return 0;
  g = at > 0 ? seg_new(ss, k, t->len, first0, first_line0) : NULL;
  seg_feed(ss, g, term, s, at, t);
  if (g != NULL)
    g->f1 = t->len;
  g = seg_new(ss, k, t->len, d0, first_line0 + count_nl(s, at));
  while (pos < d1) {
    size_t want = d1 - pos < sizeof(buf) ? (size_t)(d1 - pos) : sizeof(buf);
    got = pread(fd, buf, want, (off_t)pos);
    if (got <= 0)
      break;
    if (g != NULL) {
      uint64_t base = g->raw0;
      /* seg_feed places points from raw0: feed at the running offset. */
      g->raw0 = pos;
      seg_feed(ss, g, term, buf, (size_t)got, t);
      g->raw0 = base;
    } else {
      seg_feed(ss, NULL, term, buf, (size_t)got, t);
    }
    pos += (uint64_t)got;
  }
  close(fd);
  if (g != NULL) {
    g->raw1 = pos;
    g->f1 = t->len;
  }
  ss->filled[k] = pos == d1;
  return 1;
}

/* Filter one stream's part of a read (`s`, `n` bytes of stream k) into
 * `all`: its kept first bytes and a drop notice when it has them
 * (M-TOOLS-15, P-OUT-2), then the ring's bytes; with the stream's counts
 * in `sp` (NULL: none), each becomes a segment placed in the stream. */
static void filter_part(uvt__term_t *term, const char *s, size_t n, int final,
                        int k, uvt__spill_t *sp, uint64_t held, segs_t *ss,
                        uvt__text_t *t) {
  size_t at = find_notice(s, n);
  uint64_t dropped = 0;
  size_t kn = at < n ? uvt__drop_notice_len(s + at, n - at, &dropped) : 0;
  size_t ring_off = kn > 0 ? at + kn : 0;
  size_t ring_len = n - ring_off;
  uint64_t end = 0;
  uint64_t ring0 = 0;
  uint64_t ring_line0 = 1;
  uint64_t first0 = 0;
  uint64_t first_line0 = 1;
  seg_t *g;

  if (sp != NULL && ss->known) {
    /* The stream's bytes so far, less what the read left for later (a
     * character's first bytes): where this read ends in the stream. */
    end = sp->seen[k] >= held ? sp->seen[k] - held : 0;
    ring0 = end >= ring_len ? end - ring_len : 0;
    ring_line0 = sp->nl[k] - count_nl(s + ring_off, ring_len) + 1;
    first0 = sp->read_end[k];
    first_line0 = sp->read_nl[k] + 1;
    sp->read_end[k] = end;
    sp->read_nl[k] = sp->nl[k];
  }
  if (kn > 0 && ss->fill != NULL && sp != NULL && ss->known &&
      fill_dropped(ss, term, s, at, k, sp, first0, first_line0,
                   ring0 >= dropped ? ring0 - dropped : 0, ring0, t)) {
    /* M-TOOLS-16: the view covers the bytes the cap dropped, read back
     * from the spill file, in place of the notice. */
  } else if (kn > 0) {
    /* The stream's kept first bytes (M-TOOLS-15), a line of their own. */
    g = at > 0 ? seg_new(ss, k, t->len, first0, first_line0) : NULL;
    seg_feed(ss, g, term, s, at, t);
    /* Bytes were lost before these: the unfinished line cannot go on. */
    uvt__term_end(term, UVT__TERM_FINAL, t);
    if (g != NULL)
      g->f1 = t->len;
    if (t->len > 0 && t->base[t->len - 1] != '\n')
      uvt__text_raw(t, "\n", 1);
    uvt__text_raw(t, s + at, kn);
    ss->drop0[k] = ring0 >= dropped ? ring0 - dropped : 0;
    ss->drop1[k] = ring0;
    if (at == 0 && sp != NULL && ss->known)
      ring_line0 = ring_line0 > 0 ? ring_line0 : 1;
  } else if (sp == NULL || !ss->known) {
    ring_line0 = 1;
  }
  g = seg_new(ss, k, t->len, ring0, ring_line0);
  seg_feed(ss, g, term, s + ring_off, ring_len, t);
  uvt__term_end(term, final ? UVT__TERM_FINAL : UVT__TERM_SHOW, t);
  if (g != NULL)
    g->f1 = t->len;
}
/* M-TOOLS-18: what programs print when a connection or a name lookup
 * failed (curl, wget, git, pip, npm, Python, Node, ssh, the shell's
 * /dev/tcp), matched without case. */
static const char *const net_failures[] = {
    "connection refused",
    "network is unreachable",
    "could not resolve",
    "couldn't resolve",
    "temporary failure in name resolution",
    "name or service not known",
    "no address associated with hostname",
    "failed to establish a new connection",
    "getaddrinfo",
    "enotfound",
    "eai_again",
    "unable to resolve host",
    "network unreachable",
};

static int has_word(const char *s, size_t n, const char *w) {
  size_t k = strlen(w);
  size_t i;
  size_t j;

  for (i = 0; i + k <= n; i++) {
    for (j = 0; j < k; j++) {
      char c = s[i + j];
      if (c >= 'A' && c <= 'Z')
        c = (char)(c - 'A' + 'a');
      if (c != w[j])
        break;
    }
    if (j == k)
      return 1;
  }
  return 0;
}

/* M-TOOLS-18: a command in a sandbox without network whose output says a
 * connection failed gets a line saying why. */
static void net_note(uvt_tools_t *tools, const char *s, size_t n,
                     uvt__text_t *t) {
  size_t i;

  if (tools->sandbox_ == NULL ||
      tools->sandbox_->network != UVT_SANDBOX_NET_NONE)
    return;
  for (i = 0; i < sizeof(net_failures) / sizeof(net_failures[0]); i++) {
    if (has_word(s, n, net_failures[i])) {
      uvt__text_str(t, "(this command runs in a sandbox without network: "
                       "every connection, loopback included, fails; the "
                       "server needs --allow-net to give it the network)\n");
      return;
    }
  }
}

/* ---- M-TOOLS-16: views in lines ---------------------------------------- */

typedef struct {
  const char *s; /* in the filtered text */
  size_t len;    /* without its newline */
  uint64_t num;  /* its number in its stream */
  int k;
} vline_t;

/* The lines of the segments, in order (the "[stderr]" line and the drop
 * notices are no lines of the output).  NULL and *n 0 when there are none
 * or no memory. */
static vline_t *view_lines(const segs_t *ss, const uvt__text_t *all,
                           size_t *n) {
  vline_t *v = NULL;
  size_t cap = 0;
  size_t i;
  size_t f;
  size_t e;
  const char *nl;
  vline_t *nv;

  *n = 0;
  for (i = 0; i < ss->n; i++) {
    const seg_t *g = &ss->seg[i];
    uint64_t num = g->line0;
    for (f = g->f0; f < g->f1; f = e + 1) {
      nl = memchr(all->base + f, '\n', g->f1 - f);
      e = nl != NULL ? (size_t)(nl - all->base) : g->f1;
      if (*n == cap) {
        cap = cap ? cap * 2 : 256;
        nv = uvt__tools_realloc(v, cap * sizeof(*v));
        if (nv == NULL) {
          uvt__tools_free(v);
          *n = 0;
          return NULL;
        }
        v = nv;
      }
      v[*n].s = all->base + f;
      v[*n].len = e - f;
      v[*n].num = num++;
      v[*n].k = g->k;
      (*n)++;
    }
  }
  return v;
}

static void view_line(uvt__text_t *out, const vline_t *l, int numbered,
                      int *k) {
  if (l->k != *k && l->k == 1)
    uvt__text_str(out, "[stderr]\n");
  *k = l->k;
  if (numbered)
    uvt__text_printf(out, "%llu: ", (unsigned long long)l->num);
  uvt__text_raw(out, l->s, l->len);
  uvt__text_raw(out, "\n", 1);
}

/* The view `sh` asks for of the read's lines, into `out`: the matching
 * lines (numbered) and how many matched, the first and/or last lines with
 * one line saying how many were left out between.  Returns 1 when lines
 * were left out. */
static int view(const uvt__shape_t *sh, const segs_t *ss,
                const uvt__text_t *all, uvt__text_t *out) {
  vline_t *v;
  size_t n;
  size_t m = 0;
  size_t i;
  size_t head;
  size_t tail;
  char *line = NULL;
  size_t line_cap = 0;
  int k = 0;
  int left = 0;

  v = view_lines(ss, all, &n);
  if (v == NULL && n == 0 && all->len > 0 && ss->n > 0) {
    out->err = UV_ENOMEM;
    return 0;
  }
  if (sh->match != NULL) {
    /* regexec wants a C string: each line copied once. */
    for (i = 0; i < n; i++) {
      if (v[i].len + 1 > line_cap) {
        char *nl = uvt__tools_realloc(line, v[i].len + 1);
        if (nl == NULL) {
          out->err = UV_ENOMEM;
          break;
        }
        line = nl;
        line_cap = v[i].len + 1;
      }
      memcpy(line, v[i].s, v[i].len);
      line[v[i].len] = '\0';
      if (regexec(sh->match, line, 0, NULL, 0) == 0)
        v[m++] = v[i];
    }
    uvt__tools_free(line);
    left = m < n;
  } else {
    m = n;
  }
  head = sh->head_lines >= 0 ? (size_t)sh->head_lines : 0;
  tail = sh->tail_lines >= 0 ? (size_t)sh->tail_lines : 0;
  if ((sh->head_lines < 0 && sh->tail_lines < 0) || head + tail >= m) {
    for (i = 0; i < m; i++)
      view_line(out, &v[i], sh->match != NULL, &k);
  } else {
    left = 1;
    for (i = 0; i < head; i++)
      view_line(out, &v[i], sh->match != NULL, &k);
    uvt__text_printf(out, "[... %zu line%s left out ...]\n", m - head - tail,
                     m - head - tail == 1 ? "" : "s");
    for (i = m - tail; i < m; i++)
      view_line(out, &v[i], sh->match != NULL, &k);
  }
  if (sh->match != NULL)
    uvt__text_printf(out, "[%zu of %zu line%s match%s]\n", m, n,
                     n == 1 ? "" : "s", m == 1 && n == 1 ? "es" : "");
  for (i = 0; i < 2; i++)
    if (ss->drop1[i] > ss->drop0[i] && !ss->filled[i]) {
      uvt__text_printf(out,
                       "[the output cap dropped %llu bytes of %s before this "
                       "read; they are not in this view]\n",
                       (unsigned long long)(ss->drop1[i] - ss->drop0[i]),
                       i == 0 ? "the output" : "stderr");
      left = 1;
    }
  uvt__tools_free(v);
  return left;
}

/* ---- M-TOOLS-17: naming the file and what a result left out ----------- */

/* The note for stream k of a result whose shown text left out [c0, c1)
 * of `all` (c0 == c1: nothing by size), or, for a view, `view_left`. */
static void spill_note(uvt_tools_t *tools, uvt__spill_t *sp, const segs_t *ss,
                       size_t c0, size_t c1, int view_left, uvt__text_t *t) {
  char path[4096];
  uint64_t r0;
  uint64_t r1;
  uint64_t l0;
  uint64_t l1;
  size_t i;
  int k;
  int said;
  int any;

  if (sp == NULL || tools->spill_fd_ < 0 || sp->gone)
    return;
  for (k = 0; k < 2; k++) {
    int dropped = ss->drop1[k] > ss->drop0[k];
    int cut = 0;
    uint64_t from = 0;
    uint64_t to = 0;
    uint64_t lfrom = 0;
    uint64_t lto = 0;
    uint64_t rd0 = UINT64_MAX;
    uint64_t rd1 = 0;

    any = 0;
    for (i = 0; i < ss->n; i++) {
      const seg_t *g = &ss->seg[i];
      size_t a = c0 > g->f0 ? c0 : g->f0;
      size_t b = c1 < g->f1 ? c1 : g->f1;
      if (g->k != k)
        continue;
      any = 1;
      if (g->raw0 < rd0)
        rd0 = g->raw0;
      if (g->raw1 > rd1)
        rd1 = g->raw1;
      if (a >= b || !ss->mapped)
        continue;
      seg_at(g, a, &r0, &l0);
      seg_at(g, b, &r1, &l1);
      if (b == g->f1) {
        r1 = g->raw1;
        l1 = g->line0 + g->n + 1;
      }
      if (!cut) {
        from = r0;
        lfrom = l0;
      }
      to = r1;
      lto = l1;
      cut = 1;
    }
    if (!any || (!cut && !dropped && !view_left) || !sp->made[k] ||
        uvt__spill_path(tools, sp, k, path, sizeof(path)) != 0)
      continue;
    uvt__text_str(t, "(the whole output");
    if (k == 1)
      uvt__text_str(t, " of stderr");
    uvt__text_str(t, " is in ");
    uvt__text_oneline(t, path, sizeof(path));
    said = 0;
    if (cut && to > from) {
      uvt__text_printf(t,
                       ": this result left out its lines %llu-%llu, bytes "
                       "%llu-%llu",
                       (unsigned long long)lfrom,
                       (unsigned long long)(lto > lfrom ? lto - 1 : lfrom),
                       (unsigned long long)from, (unsigned long long)to - 1);
      said = 1;
    } else if (view_left && rd1 > rd0) {
      uvt__text_printf(t, ": this read is its bytes %llu-%llu",
                       (unsigned long long)rd0, (unsigned long long)rd1 - 1);
      said = 1;
    }
    if (dropped)
      uvt__text_printf(t, "%s the output cap dropped its bytes %llu-%llu",
                       said ? ";" : ":", (unsigned long long)ss->drop0[k],
                       (unsigned long long)ss->drop1[k] - 1);
    if (sp->full[k])
      uvt__text_printf(t,
                       "; the file stopped at %llu bytes (its bound), so "
                       "it holds the output's beginning only",
                       (unsigned long long)sp->size[k]);
    uvt__text_str(t, ")\n");
  }
}

void uvt__tools_output(uvt_tools_t *tools, const char *id, const uvt_read_t *r,
                       const uvt__shape_t *sh, uvt__text_t *t) {
  int final = uvt_status_is_terminal(r->snapshot.status);
  carry_t *c = carry_find(tools, id);
  uvt__term_t local[2];
  uvt__term_t *term;
  uvt__screen_t *scr;
  uvt__spill_t *sp;
  uvt_process_peek_t pk;
  uvt__text_t all;
  uvt__text_t vt;
  segs_t ss;
  size_t split;
  size_t mark;
  int viewing = sh->head_lines >= 0 || sh->tail_lines >= 0 || sh->match != NULL;
  int view_left = 0;

  if (c != NULL) {
    term = c->term;
  } else {
    uvt__term_init(&local[0]);
    uvt__term_init(&local[1]);
    term = local;
  }
  uvt__text_init(&all);
  memset(&ss, 0, sizeof(ss));
  /* M-TOOLS-17: where the read lies in its streams (the tools' tasks). */
  sp = uvt__spill_find(tools, id, 0);
  memset(&pk, 0, sizeof(pk));
  ss.known =
      sp != NULL && uvt_process_peek(tools->registry, id, sh->caller, &pk) == 0;
  ss.mapped = ss.known && (tools->spill_fd_ >= 0 || viewing);
  ss.fill = viewing && tools->spill_fd_ >= 0 ? tools : NULL;
  /* M-TOOLS-11: a terminal task's screen sees every byte read (a drop
   * notice is no output of the terminal). */
  scr = uvt__screen_find(tools, id);
  if (scr != NULL) {
    size_t at = find_notice(r->text, r->len);
    size_t k =
        at < r->len ? uvt__drop_notice_len(r->text + at, r->len - at, NULL) : 0;
    uvt__screen_feed(scr, r->text, at);
    uvt__screen_feed(scr, r->text + at + k, r->len - at - k);
  }
  split = find_stderr(r->text, r->len);
  filter_part(&term[0], r->text, split, final, 0, sp, pk.unread[0], &ss, &all);
  if (split < r->len) {
    /* The "[stderr]" line only if stderr shows something. */
    mark = all.len;
    if (all.len > 0 && all.base[all.len - 1] != '\n')
      uvt__text_raw(&all, "\n", 1);
    uvt__text_raw(&all, stderr_line, sizeof(stderr_line) - 1);
    split += sizeof(stderr_line) - 1;
    {
      size_t before = all.len;
      filter_part(&term[1], r->text + split, r->len - split, final, 1, sp,
                  pk.unread[1], &ss, &all);
      if (all.len == before && all.err == 0) {
        all.len = mark;
        all.base[mark] = '\0';
      }
    }
  }

  /* Keep what the next read needs, and only that. */
  if (final || (!uvt__term_carries(&term[0]) && !uvt__term_carries(&term[1]))) {
    if (c != NULL) {
      carry_free(c);
      uvt__tools_kept_gone(tools);
    } else {
      uvt__term_free(&local[0]);
      uvt__term_free(&local[1]);
    }
  } else if (c == NULL) {
    c = strlen(id) < UVT_ID_MAX ? uvt__tools_malloc(sizeof(*c)) : NULL;
    if (c == NULL) {
      /* Not kept: the next read starts afresh, which only loses the
       * rewriting of a line across the two reads. */
      uvt__term_free(&local[0]);
      uvt__term_free(&local[1]);
    } else {
      strcpy(c->id, id);
      c->term[0] = local[0];
      c->term[1] = local[1];
      uvt__tools_keep_state(tools, &tools->carries_, &c->kept, c->id,
                            carry_kept_cb);
    }
  }

  /* M-TOOLS-11: on the alternate screen the screen is what a model needs,
   * not the transcript of its redraws. */
  if (scr != NULL && uvt__screen_alt(scr) && all.err == 0) {
    all.len = 0;
    uvt__screen_render(scr, &all);
    segs_free(&ss);
    viewing = 0;
  }
  if (all.err != 0) {
    t->err = all.err;
  } else if (viewing) {
    /* M-TOOLS-16: the view, then the result's bounds (M-TOOLS-15). */
    uvt__text_init(&vt);
    view_left = view(sh, &ss, &all, &vt);
    if (vt.err != 0)
      t->err = vt.err;
    else
      uvt__text_clip_lines(t, vt.base, vt.len, sh->max_bytes, sh->max_lines,
                           NULL);
    uvt__text_free(&vt);
    spill_note(tools, sp, &ss, 0, 0, view_left, t);
    net_note(tools, all.base, all.len, t);
  } else {
    size_t cut[2];
    uvt__text_clip_lines(t, all.base, all.len, sh->max_bytes, sh->max_lines,
                         cut);
    /* M-TOOLS-17: what was left out (and what the cap dropped) is in the
     * task's file. */
    spill_note(tools, sp, &ss, cut[0], cut[1], 0, t);
    net_note(tools, all.base, all.len, t);
  }
  segs_free(&ss);
  uvt__text_free(&all);
}
