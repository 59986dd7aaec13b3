/* Leaf helper: the library's allocation wrappers (src/alloc.c).  Every
 * allocation of every layer goes through these, so uvt_replace_allocator()
 * reaches all of them.  Any layer may include this header; it depends on
 * nothing but the C library. */
#ifndef UVT_LEAF_ALLOC_H
#define UVT_LEAF_ALLOC_H

#include <stddef.h>

void *uvt__malloc(size_t size);
void *uvt__calloc(size_t count, size_t size);
void *uvt__realloc(void *ptr, size_t size);
void uvt__free(void *ptr);
char *uvt__strdup(const char *s);

#endif /* UVT_LEAF_ALLOC_H */
