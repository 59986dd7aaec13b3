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


/* The filter states of one task, kept while the next read depends on
 * them. */
typedef struct {
  struct uvt__link link; /* on the tools' carries_ */
  char id[UVT_ID_MAX];
  uvt__term_t term[2]; /* stdout, stderr */
} carry_t;

static const char stderr_line[] = "[stderr]\n";

static carry_t *carry_find(uvt_tools_t *tools, const char *id) {
  struct uvt__link *n;
  carry_t *c;

  for (n = tools->carries_.next; n != &tools->carries_; n = n->next) {
    c = uvt__container_of(n, carry_t, link);
    if (strcmp(c->id, id) == 0)
      return c;
  }
  return NULL;
}

static void carry_free(carry_t *c) {
  uvt__list_remove(&c->link);
  uvt__term_free(&c->term[0]);
  uvt__term_free(&c->term[1]);
  uvt__tools_free(c);
}

/* A dropped record will not be read again: its state goes.  The watch runs
 * only while some state is kept. */
static void carry_watch_cb(uvt_watch_t *w, const uvt_snapshot_t *snap,
                           int dropped) {
  uvt_tools_t *tools = w->data;
  carry_t *c;

  if (!dropped)
    return;
  c = carry_find(tools, snap->id);
  if (c != NULL)
    carry_free(c);
  uvt__screen_forget(tools, snap->id); /* M-TOOLS-11 */
  if (uvt__list_empty(&tools->carries_) && uvt__list_empty(&tools->screens_))
    uvt_watch_stop(&tools->watch_);
}

void uvt__tools_output_free(uvt_tools_t *tools) {
  struct uvt__link *n;

  while ((n = uvt__list_pop(&tools->carries_)) != NULL)
    carry_free(uvt__container_of(n, carry_t, link));
  uvt__screen_free_all(tools);
  uvt_watch_stop(&tools->watch_);
}

void uvt__tools_keep_state(uvt_tools_t *tools, struct uvt__link *list,
                           struct uvt__link *link) {
  if (uvt__list_empty(&tools->carries_) && uvt__list_empty(&tools->screens_)) {
    tools->watch_.data = tools;
    /* Without the watch (the registry is closing) the state is freed by
     * the task's last read or by detach. */
    uvt_watch_start(tools->registry, &tools->watch_, carry_watch_cb);
  }
  uvt__list_insert_tail(list, link);
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

/* Filter one stream's part of a read into `t`. */
static void filter_part(uvt__term_t *term, const char *s, size_t n, int final,
                        uvt__text_t *t) {
  size_t at = find_notice(s, n);
  size_t k = at < n ? uvt__drop_notice_len(s + at, n - at, NULL) : 0;

  if (k > 0) {
    /* The stream's kept first bytes (M-TOOLS-15), a line of their own. */
    uvt__term_feed(term, s, at, t);
    s += at;
    n -= at;
    /* Bytes were lost before these: the unfinished line cannot go on. */
    uvt__term_end(term, UVT__TERM_FINAL, t);
    if (t->len > 0 && t->base[t->len - 1] != '\n')
      uvt__text_raw(t, "\n", 1);
    uvt__text_raw(t, s, k);
    s += k;
    n -= k;
  }
  uvt__term_feed(term, s, n, t);
  uvt__term_end(term, final ? UVT__TERM_FINAL : UVT__TERM_SHOW, t);
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

void uvt__tools_output(uvt_tools_t *tools, const char *id, const uvt_read_t *r,
                       size_t max_bytes, size_t max_lines, uvt__text_t *t) {
  int final = uvt_status_is_terminal(r->snapshot.status);
  carry_t *c = carry_find(tools, id);
  uvt__term_t local[2];
  uvt__term_t *term;
  uvt__screen_t *scr;
  uvt__text_t all;
  size_t split;
  size_t mark;

  if (c != NULL) {
    term = c->term;
  } else {
    uvt__term_init(&local[0]);
    uvt__term_init(&local[1]);
    term = local;
  }
  uvt__text_init(&all);
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
  filter_part(&term[0], r->text, split, final, &all);
  if (split < r->len) {
    /* The "[stderr]" line only if stderr shows something. */
    mark = all.len;
    if (all.len > 0 && all.base[all.len - 1] != '\n')
      uvt__text_raw(&all, "\n", 1);
    uvt__text_raw(&all, stderr_line, sizeof(stderr_line) - 1);
    split += sizeof(stderr_line) - 1;
    {
      size_t before = all.len;
      filter_part(&term[1], r->text + split, r->len - split, final, &all);
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
      if (uvt__list_empty(&tools->carries_) &&
          uvt__list_empty(&tools->screens_))
        uvt_watch_stop(&tools->watch_);
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
      uvt__tools_keep_state(tools, &tools->carries_, &c->link);
    }
  }

  /* M-TOOLS-11: on the alternate screen the screen is what a model needs,
   * not the transcript of its redraws. */
  if (scr != NULL && uvt__screen_alt(scr) && all.err == 0) {
    all.len = 0;
    uvt__screen_render(scr, &all);
  }
  if (all.err != 0) {
    t->err = all.err;
  } else {
    size_t cut[2];
    uvt__text_clip_lines(t, all.base, all.len, max_bytes, max_lines, cut);
    net_note(tools, all.base, all.len, t);
    /* M-TOOLS-10: what was left out (and what the cap dropped) is kept. */
    uvt__spill_result(tools, id, all.base + cut[0], cut[1] - cut[0], t);
  }
  uvt__text_free(&all);
}
