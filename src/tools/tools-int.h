/* Internal helpers of the tool surface: result texts and UTF-8 repair. */
#ifndef UVTASKS_TOOLS_INT_H
#define UVTASKS_TOOLS_INT_H

#include <stddef.h>

#include "uvtasks.h"

/* A growable NUL-terminated text.  `err` latches the first allocation
 * failure so a sequence of appends can be checked once at the end. */
typedef struct {
  char *base;
  size_t len;
  size_t cap;
  int err;
} uvt__text_t;

void uvt__text_init(uvt__text_t *t);
void uvt__text_free(uvt__text_t *t);
/* Hand the text over: returns base (never NULL unless t->err) and resets
 * `t`. */
char *uvt__text_take(uvt__text_t *t);
void uvt__text_raw(uvt__text_t *t, const char *bytes, size_t len);
void uvt__text_str(uvt__text_t *t, const char *s);
void uvt__text_printf(uvt__text_t *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Append `len` bytes as valid UTF-8: each maximal invalid subpart and each
 * NUL becomes U+FFFD. */
void uvt__text_utf8(uvt__text_t *t, const char *bytes, size_t len);
/* Append `s` on one line: control characters become spaces, invalid UTF-8
 * becomes U+FFFD, and more than `max_bytes` bytes are cut at a character
 * boundary and marked with "...". */
void uvt__text_oneline(uvt__text_t *t, const char *s, size_t max_bytes);
/* Append the status line of `snap`: "[status: S]" or "[status: S, DETAIL]". */
void uvt__text_status(uvt__text_t *t, const uvt_snapshot_t *snap);

/* Length of the well-formed UTF-8 sequence at `s` (1-4), or, if it is not
 * well formed, minus the length of its maximal invalid subpart (-1..-3).
 * `n` > 0.  NUL counts as invalid. */
int uvt__utf8_seq(const unsigned char *s, size_t n);

/* Allocation for the tool surface, through the library's allocator; result
 * texts are freed by uvt_tools_call_cleanup(). */
void *uvt__tools_malloc(size_t size);
void *uvt__tools_realloc(void *ptr, size_t size);
void uvt__tools_free(void *ptr);

#endif
