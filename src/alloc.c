/* The allocator every part of the library uses; replaceable so tests can
 * fail the n-th allocation (R-START-3) and hosts can account for memory. */
#include <stdlib.h>
#include <string.h>

#include "uvt-internal.h"

static struct {
  uvt_malloc_func malloc_func;
  uvt_realloc_func realloc_func;
  uvt_calloc_func calloc_func;
  uvt_free_func free_func;
} allocator = {malloc, realloc, calloc, free};

int uvt_replace_allocator(uvt_malloc_func malloc_func,
                          uvt_realloc_func realloc_func,
                          uvt_calloc_func calloc_func,
                          uvt_free_func free_func) {
  if (malloc_func == NULL || realloc_func == NULL || calloc_func == NULL ||
      free_func == NULL)
    return UV_EINVAL;
  allocator.malloc_func = malloc_func;
  allocator.realloc_func = realloc_func;
  allocator.calloc_func = calloc_func;
  allocator.free_func = free_func;
  return 0;
}

void *uvt__malloc(size_t size) {
  return allocator.malloc_func(size > 0 ? size : 1);
}

void *uvt__calloc(size_t count, size_t size) {
  return allocator.calloc_func(count > 0 ? count : 1, size > 0 ? size : 1);
}

void *uvt__realloc(void *ptr, size_t size) {
  return allocator.realloc_func(ptr, size > 0 ? size : 1);
}

void uvt__free(void *ptr) {
  if (ptr != NULL)
    allocator.free_func(ptr);
}

char *uvt__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = uvt__malloc(n);
  if (d != NULL)
    memcpy(d, s, n);
  return d;
}
