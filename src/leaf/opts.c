/* the one copy of a caller's option struct (src/leaf/opts.h). */
#include "opts.h"

#include <stdio.h>
#include <string.h>

#include <uv.h>

int uvt__opts_load(void *dst, size_t dst_size, const void *src, size_t min_size,
                   char *why) {
  const unsigned char *p = src;
  size_t size;
  size_t i;

  memcpy(&size, src, sizeof(size));
  if (size == 0) {
    snprintf(why, UVT__OPTS_WHY,
             "its size field is 0: the struct was not made by its _init");
    return UV_EINVAL;
  }
  if (size < min_size) {
    snprintf(why, UVT__OPTS_WHY,
             "its size field is %zu, less than the smallest version (%zu "
             "bytes)",
             size, min_size);
    return UV_EINVAL;
  }
  if (size > dst_size) {
    for (i = dst_size; i < size; i++) {
      if (p[i] != 0) {
        snprintf(why, UVT__OPTS_WHY,
                 "its size field is %zu and this library's struct is %zu "
                 "bytes: byte %zu, a field this library does not have, is "
                 "set (built against newer headers?)",
                 size, dst_size, i);
        return UV_EINVAL;
      }
    }
    size = dst_size;
  }
  memcpy(dst, src, size);
  return 0;
}

void uvt__opts_init(void *o, size_t size, const void *defaults, size_t dsize) {
  if (o == NULL)
    return;
  if (size < sizeof(size)) {
    memset(o, 0, size);
    return;
  }
  memcpy(o, defaults, size < dsize ? size : dsize);
  if (size > dsize)
    memset((unsigned char *)o + dsize, 0, size - dsize);
  memcpy(o, &size, sizeof(size));
}
