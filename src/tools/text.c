/* Result texts of the tool surface: a small string builder, UTF-8 repair
 * and the status line (contract §5). */
#include "tools-int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Through the library's allocator (uvt_replace_allocator()). */
void *uvt__tools_malloc(size_t size) {
  return uvt__malloc(size);
}

void *uvt__tools_realloc(void *ptr, size_t size) {
  return uvt__realloc(ptr, size);
}

void uvt__tools_free(void *ptr) {
  uvt__free(ptr);
}

void uvt__text_init(uvt__text_t *t) {
  memset(t, 0, sizeof(*t));
}

void uvt__text_free(uvt__text_t *t) {
  uvt__tools_free(t->base);
  uvt__text_init(t);
}

static int text_reserve(uvt__text_t *t, size_t more) {
  size_t want;
  size_t cap;
  char *p;

  if (t->err != 0)
    return t->err;
  if (more > SIZE_MAX - t->len - 1) {
    t->err = UV_ENOMEM;
    return t->err;
  }
  want = t->len + more + 1;
  if (want <= t->cap)
    return 0;
  cap = t->cap ? t->cap : 128;
  while (cap < want)
    cap = cap > SIZE_MAX / 2 ? want : cap * 2;
  p = uvt__tools_realloc(t->base, cap);
  if (p == NULL) {
    t->err = UV_ENOMEM;
    return t->err;
  }
  t->base = p;
  t->cap = cap;
  return 0;
}

char *uvt__text_take(uvt__text_t *t) {
  char *p;

  /* An empty text still hands out a NUL-terminated string. */
  if (t->err == 0 && text_reserve(t, 0) == 0)
    t->base[t->len] = '\0';
  if (t->err != 0) {
    uvt__text_free(t);
    return NULL;
  }
  p = t->base;
  uvt__text_init(t);
  return p;
}

void uvt__text_raw(uvt__text_t *t, const char *bytes, size_t len) {
  if (len == 0 || text_reserve(t, len) != 0)
    return;
  memcpy(t->base + t->len, bytes, len);
  t->len += len;
  t->base[t->len] = '\0';
}

void uvt__text_str(uvt__text_t *t, const char *s) {
  uvt__text_raw(t, s, strlen(s));
}

void uvt__text_printf(uvt__text_t *t, const char *fmt, ...) {
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    t->err = UV_EINVAL;
    return;
  }
  if (text_reserve(t, (size_t)n) != 0)
    return;
  va_start(ap, fmt);
  vsnprintf(t->base + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

int uvt__utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  int need;
  int i;

  /* ASCII, NUL included: U+0000 is valid UTF-8, and the tool surface keeps
   * the NUL bytes of output (M-MCP-8: a JSON host sends them as \u0000). */
  if (c < 0x80)
    return 1;
  if (c < 0xC2 || c > 0xF4)
    return -1;
  if (c < 0xE0) {
    need = 2;
  } else if (c < 0xF0) {
    need = 3;
    if (c == 0xE0)
      lo = 0xA0; /* overlong */
    else if (c == 0xED)
      hi = 0x9F; /* surrogates */
  } else {
    need = 4;
    if (c == 0xF0)
      lo = 0x90; /* overlong */
    else if (c == 0xF4)
      hi = 0x8F; /* beyond U+10FFFF */
  }
  /* The maximal subpart: the lead byte plus every continuation byte that
   * could still have been part of a well-formed sequence. */
  for (i = 1; i < need; i++) {
    if ((size_t)i >= n || s[i] < lo || s[i] > hi)
      return -i;
    lo = 0x80;
    hi = 0xBF;
  }
  return need;
}

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Writes `n` bytes at `at` of `out` (unless `out` is NULL, when only
 * counting); returns the offset after them. */
static size_t put(char *out, size_t at, const char *bytes, size_t n) {
  if (out != NULL && n > 0)
    memcpy(out + at, bytes, n);
  return at + n;
}

size_t uvt_tools_utf8_repair(const char *bytes, size_t len, char *out) {
  const unsigned char *s = (const unsigned char *)bytes;
  size_t i = 0;
  size_t run = 0; /* start of the current run of good bytes */
  size_t n = 0;
  int k;

  while (i < len) {
    k = uvt__utf8_seq(s + i, len - i);
    if (k > 0) {
      i += (size_t)k;
      continue;
    }
    n = put(out, n, bytes + run, i - run);
    n = put(out, n, replacement, 3);
    i += (size_t)-k;
    run = i;
  }
  return put(out, n, bytes + run, len - run);
}

void uvt__text_utf8(uvt__text_t *t, const char *bytes, size_t len) {
  size_t n = uvt_tools_utf8_repair(bytes, len, NULL);

  if (n == 0 || text_reserve(t, n) != 0)
    return;
  uvt_tools_utf8_repair(bytes, len, t->base + t->len);
  t->len += n;
  t->base[t->len] = '\0';
}

void uvt__text_oneline(uvt__text_t *t, const char *s, size_t max_bytes) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  size_t i = 0;
  size_t out = 0;
  int k;

  while (i < n) {
    k = uvt__utf8_seq(p + i, n - i);
    if (k <= 0) {
      if (out + 3 > max_bytes)
        break;
      uvt__text_raw(t, replacement, 3);
      out += 3;
      i += (size_t)-k;
      continue;
    }
    if (out + (size_t)k > max_bytes)
      break;
    if (k == 1 && (p[i] < 0x20 || p[i] == 0x7F))
      uvt__text_raw(t, " ", 1);
    else
      uvt__text_raw(t, s + i, (size_t)k);
    out += (size_t)k;
    i += (size_t)k;
  }
  if (i < n)
    uvt__text_str(t, "...");
}

void uvt__text_status(uvt__text_t *t, const uvt_snapshot_t *snap) {
  uvt__text_str(t, "[status: ");
  uvt__text_str(t, uvt_status_name(snap->status));
  if (snap->detail != NULL && snap->detail[0] != '\0') {
    uvt__text_str(t, ", ");
    uvt__text_oneline(t, snap->detail, 400);
  }
  uvt__text_str(t, "]");
}

/* ---------------------------------------------------------------------- */
/* Result size (M-TOOLS-8)                                                 */

/* Room kept for the line between the head and the tail: "[... " and
 * " bytes (" and " lines) left out, and " " bytes dropped at the output
 * cap ...]\n" with three 20-digit numbers is 125 bytes, plus the newline
 * that ends a head cut inside a line. */
#define CLIP_MARK_ROOM 130

static int is_cont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

size_t uvt__drop_notice_len(const char *s, size_t n, uint64_t *dropped) {
  static const char pre[] = "[... ";
  static const char post[] = " bytes dropped ...]\n";
  size_t i = sizeof(pre) - 1;
  size_t digits;
  uint64_t v = 0;

  if (n < i || memcmp(s, pre, i) != 0)
    return 0;
  for (digits = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    digits++;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (digits == 0 || digits > 19 || n - i < sizeof(post) - 1 ||
      memcmp(s + i, post, sizeof(post) - 1) != 0)
    return 0;
  if (dropped != NULL)
    *dropped = v;
  return i + sizeof(post) - 1;
}

void uvt__text_clip(uvt__text_t *t, const char *bytes, size_t len,
                    size_t max_bytes) {
  uvt__text_clip_lines(t, bytes, len, max_bytes, SIZE_MAX, NULL);
}

void uvt__text_clip_lines(uvt__text_t *t, const char *bytes, size_t len,
                          size_t max_bytes, size_t max_lines, size_t *cut) {
  const unsigned char *s = (const unsigned char *)bytes;
  int add_nl = len > 0 && bytes[len - 1] != '\n';
  size_t avail, head_max, tail_max, head_lines, tail_lines;
  size_t head, tail, i, nl, k, lines, left;
  uint64_t dropped, d;

  if (cut != NULL)
    cut[0] = cut[1] = 0;
  if (len == 0)
    return;
  if (max_lines < UVT_TOOLS_MAX_LINES_MIN)
    max_lines = UVT_TOOLS_MAX_LINES_MIN;
  lines = (size_t)add_nl;
  if (len + (size_t)add_nl <= max_bytes)
    for (i = 0; i < len && lines <= max_lines; i++)
      lines += s[i] == '\n';
  if (len + (size_t)add_nl <= max_bytes && lines <= max_lines) {
    uvt__text_raw(t, bytes, len);
    if (add_nl)
      uvt__text_raw(t, "\n", 1);
    return;
  }
  if (max_bytes < UVT_TOOLS_MAX_BYTES_MIN)
    max_bytes = UVT_TOOLS_MAX_BYTES_MIN;
  /* The head gets 2/5 and the tail 3/5 of what the line leaves, in bytes
   * and in lines (M-TOOLS-15): the end of a log (the failure, the
   * summary) usually matters more. */
  avail = max_bytes - CLIP_MARK_ROOM - (size_t)add_nl;
  head_max = avail * 2 / 5;
  tail_max = avail - head_max;
  head_lines = (max_lines - 1) * 2 / 5;
  tail_lines = max_lines - 1 - head_lines;
  if (head_max > len)
    head_max = len;
  if (tail_max > len)
    tail_max = len;

  /* The head ends after a newline in its second half, else at the last
   * character boundary that fits. */
  head = head_max;
  while (head > 0 && head < len && is_cont(s[head]))
    head--;
  for (i = head; i > head_max / 2; i--) {
    if (s[i - 1] == '\n') {
      head = i;
      break;
    }
  }
  /* ... and after its head_lines-th line at the latest. */
  for (i = 0, k = 0; i < head; i++) {
    if (s[i] == '\n' && ++k == head_lines) {
      head = i + 1;
      break;
    }
  }
  /* The tail starts after a newline in its first half, else at the first
   * character boundary that fits. */
  tail = len - tail_max;
  while (tail < len && is_cont(s[tail]))
    tail++;
  for (i = tail; i < len - tail_max / 2; i++) {
    if (i > 0 && s[i - 1] == '\n') {
      tail = i;
      break;
    }
  }
  /* ... and holds tail_lines lines at most. */
  for (i = add_nl ? len : len - 1, k = 0; i > tail; i--) {
    if (s[i - 1] == '\n' && ++k == tail_lines) {
      tail = i;
      break;
    }
  }
  if (tail < head)
    tail = head;
  /* What is left out: its lines, and the drop notices of the process
   * producer among them (M-TOOLS-15: bytes the cap dropped are told apart
   * from bytes this result leaves out). */
  nl = 0;
  dropped = 0;
  left = tail - head;
  for (i = head; i < tail; i++) {
    if ((i == 0 || s[i - 1] == '\n') && s[i] == '[' &&
        (k = uvt__drop_notice_len(bytes + i, tail - i, &d)) > 0) {
      dropped += d;
      left -= k;
      i += k - 1;
      continue;
    }
    nl += s[i] == '\n';
  }

  if (cut != NULL) {
    cut[0] = head;
    cut[1] = tail;
  }
  uvt__text_raw(t, bytes, head);
  if (head > 0 && s[head - 1] != '\n')
    uvt__text_raw(t, "\n", 1);
  if (nl == 0) /* the head and the tail are one line: "(0 lines)" misleads */
    uvt__text_printf(t, "[... %zu bytes left out within one line", left);
  else
    uvt__text_printf(t, "[... %zu bytes (%zu line%s) left out", left, nl,
                     nl == 1 ? "" : "s");
  if (dropped > 0)
    uvt__text_printf(t, ", and %llu bytes dropped at the output cap",
                     (unsigned long long)dropped);
  uvt__text_str(t, " ...]\n");
  uvt__text_raw(t, bytes + tail, len - tail);
  if (add_nl)
    uvt__text_raw(t, "\n", 1);
}
