/* Growable bytes handed to a producer's read_output hook.  One spare byte
 * is always kept so the reader can NUL-terminate without allocating after
 * the producer consumed its output. */
#include <string.h>

#include "uvt-internal.h"

int uvt_buf_append(uvt_buf_t *b, const void *bytes, size_t len) {
  size_t need;
  if (b == NULL || (bytes == NULL && len > 0))
    return UV_EINVAL;
  if (len == 0)
    return 0;
  if (len > SIZE_MAX - b->len - 1)
    return UV_ENOMEM;
  need = b->len + len + 1;
  if (need > b->cap_) {
    size_t cap = b->cap_ > 0 ? b->cap_ : 256;
    char *p;
    while (cap < need)
      cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    p = uvt__realloc(b->base, cap);
    if (p == NULL)
      return UV_ENOMEM;
    b->base = p;
    b->cap_ = cap;
  }
  memcpy(b->base + b->len, bytes, len);
  b->len += len;
  b->base[b->len] = '\0';
  return 0;
}

void uvt_buf_adopt(uvt_buf_t *b, char *base, size_t len, size_t size) {
  b->base = base;
  b->len = len;
  b->cap_ = size;
  base[len] = '\0';
}
