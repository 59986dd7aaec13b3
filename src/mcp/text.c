/* The server's own growable text, for the texts it builds around the tool
 * results (notices, the retention message), and its UTF-8 repair: every
 * string put into a message is valid UTF-8 (M-MCP-8).  The tool surface
 * has its own; the server links the public library only. */
#include "mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mcp_text_init(mcp_text_t *t) {
  memset(t, 0, sizeof(*t));
}

void mcp_text_free(mcp_text_t *t) {
  free(t->base);
  mcp_text_init(t);
}

/* Room for `more` bytes and the NUL: 0, or -1 (latched in t->err). */
static int text_grow(mcp_text_t *t, size_t more) {
  size_t cap;
  char *p;

  if (t->err)
    return -1;
  if (more >= SIZE_MAX / 2 - t->len) {
    t->err = 1;
    return -1;
  }
  if (t->len + more + 1 <= t->cap)
    return 0;
  cap = t->cap > 0 ? t->cap : 256;
  while (cap < t->len + more + 1)
    cap *= 2;
  p = realloc(t->base, cap);
  if (p == NULL) {
    t->err = 1;
    return -1;
  }
  t->base = p;
  t->cap = cap;
  return 0;
}

void mcp_text_raw(mcp_text_t *t, const char *bytes, size_t len) {
  if (text_grow(t, len) != 0)
    return;
  if (len > 0)
    memcpy(t->base + t->len, bytes, len);
  t->len += len;
  t->base[t->len] = '\0';
}

void mcp_text_str(mcp_text_t *t, const char *s) {
  mcp_text_raw(t, s, strlen(s));
}

void mcp_text_printf(mcp_text_t *t, const char *fmt, ...) {
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    t->err = 1;
    return;
  }
  if (text_grow(t, (size_t)n) != 0)
    return;
  va_start(ap, fmt);
  vsnprintf(t->base + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

/* How many bytes at `s` (n > 0 of them) form one well-formed UTF-8
 * character (1..4), or, negated, how long the maximal invalid subpart
 * there is (1..3): the lead byte and the continuation bytes that could
 * still have completed it.  U+0000 is well formed. */
static int utf8_char(const unsigned char *s, size_t n) {
  unsigned char min = 0x80; /* range of the byte after the lead */
  unsigned char max = 0xBF;
  size_t want;
  size_t k;

  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    want = 2;
  } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    want = 3;
    min = s[0] == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
    max = s[0] == 0xED ? 0x9F : 0xBF; /* no surrogates */
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    want = 4;
    min = s[0] == 0xF0 ? 0x90 : 0x80; /* no overlong forms */
    max = s[0] == 0xF4 ? 0x8F : 0xBF; /* nothing past U+10FFFF */
  } else {
    return -1;
  }
  for (k = 1; k < want; k++) {
    if (k >= n || s[k] < min || s[k] > max)
      return -(int)k;
    min = 0x80;
    max = 0xBF;
  }
  return (int)want;
}

void mcp_text_utf8(mcp_text_t *t, const char *bytes, size_t len) {
  const unsigned char *s = (const unsigned char *)bytes;
  size_t i = 0;
  size_t run = 0; /* start of the valid bytes not yet appended */

  while (i < len) {
    int c = utf8_char(s + i, len - i);

    if (c > 0) {
      i += (size_t)c;
      continue;
    }
    mcp_text_raw(t, bytes + run, i - run);
    mcp_text_str(t, "\xEF\xBF\xBD"); /* U+FFFD */
    i += (size_t)-c;
    run = i;
  }
  mcp_text_raw(t, bytes + run, len - run);
}
