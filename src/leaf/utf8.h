/* Leaf helper: where output bytes may be cut without splitting a UTF-8
 * character (P-OUT-3, P-OUT-7).  One rule for every reader, whatever its
 * byte source: the process producer's rings, a result's text, a spill or
 * state file read back.  Bytes that are not UTF-8 pass through: only a
 * lead byte that announces more bytes than the source has makes a read
 * wait, and only continuation bytes count as the rest of a cut character.
 * Any layer may include this header; it depends on nothing. */
#ifndef UVT_LEAF_UTF8_H
#define UVT_LEAF_UTF8_H

#include <stddef.h>

/* A continuation byte (10xxxxxx). */
static inline int uvt__utf8_is_cont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

/* How many bytes the sequence a lead byte starts has (2..4), or 1 for
 * ASCII, a continuation byte and bytes that never start a sequence. */
static inline size_t uvt__utf8_seq_len(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF)
    return 2;
  if (c >= 0xE0 && c <= 0xEF)
    return 3;
  if (c >= 0xF0 && c <= 0xF4)
    return 4;
  return 1;
}

/* How many of the last bytes of a source form the start of a sequence
 * that more bytes could complete (0..3): what a read that is not the last
 * keeps for later.  `last` holds the source's final `n` bytes, n at most 3
 * (fewer when the source is shorter), in order. */
static inline size_t uvt__utf8_incomplete(const unsigned char *last,
                                          size_t n) {
  size_t i;

  for (i = 1; i <= n; i++) {
    if (uvt__utf8_is_cont(last[n - i]))
      continue;
    return uvt__utf8_seq_len(last[n - i]) > i ? i : 0;
  }
  return 0;
}

/* How many bytes at the start of `s` (n bytes) are continuation bytes, at
 * most 3: what a cut (a drop at the cap, a view's start) left of the
 * character before it. */
static inline size_t uvt__utf8_cont_prefix(const unsigned char *s, size_t n) {
  size_t k = 0;

  while (k < 3 && k < n && uvt__utf8_is_cont(s[k]))
    k++;
  return k;
}

/* The character boundary at or before `at` in s[0..len) (a cut that
 * keeps what comes before it). */
static inline size_t uvt__utf8_floor(const unsigned char *s, size_t len,
                                     size_t at) {
  size_t k = 0;

  if (at >= len)
    return len;
  while (at > 0 && k < 3 && uvt__utf8_is_cont(s[at])) {
    at--;
    k++;
  }
  return at;
}

/* The character boundary at or after `at` in s[0..len) (a cut that keeps
 * what comes after it). */
static inline size_t uvt__utf8_ceil(const unsigned char *s, size_t len,
                                    size_t at) {
  return at + uvt__utf8_cont_prefix(s + at, at < len ? len - at : 0);
}

#endif /* UVT_LEAF_UTF8_H */
