/* Leaf helper: A-2 (docs/contract.md §10h), the one copy of a caller's
 * option struct made at each entry point that takes one (src/leaf/opts.c).
 *
 * Every public option struct starts with `size_t size`, which the
 * struct's _init macro sets to the caller's sizeof: the size of the struct
 * in the headers the caller was built against.  A library newer than
 * those headers has a larger struct; it must neither read nor write past
 * the caller's bytes.  So an entry point never reads the caller's struct
 * itself: it fills a private copy of its own size with the defaults, lays
 * the caller's first `size` bytes over it with uvt__opts_load(), and reads
 * only the copy from then on.  Fields the caller's headers did not have
 * keep their defaults.
 *
 * Any layer may include this header; it depends on the C library and on
 * uv.h's error codes only. */
#ifndef UVT_LEAF_OPTS_H
#define UVT_LEAF_OPTS_H

#include <stddef.h>

/* The smallest size accepted for `type`: through the end of `field`, the
 * first field after `size`.  Every version of a struct holds at least its
 * size and that field. */
#define UVT__OPTS_MIN(type, field)                                             \
  (offsetof(type, field) + sizeof(((type *)0)->field))

/* Room for uvt__opts_load()'s reason. */
#define UVT__OPTS_WHY 256

/* Lay the caller's struct `src` over `dst` (dst_size bytes, already filled
 * with the library's defaults): read src's leading size_t (its `size`),
 * then copy min(size, dst_size) bytes.  A size past dst_size (a host built
 * against newer headers) is taken when every byte past dst_size is 0,
 * that is when the host left every field this library does not know at
 * its zero, and refused otherwise: a field asked for must not be dropped
 * without a word.
 * Returns 0, or UV_EINVAL with a sentence in `why` (UVT__OPTS_WHY bytes)
 * naming the size found: 0 (the struct was not made by its _init), below
 * min_size, or past dst_size with bytes set there.  Reads no byte of src
 * past its size; writes dst only on success. */
int uvt__opts_load(void *dst, size_t dst_size, const void *src, size_t min_size,
                   char *why);

/* The body of every uvt_xxx_init_size(o, size): write the first `size`
 * bytes of `defaults` (a full struct of dsize bytes, the library's) to
 * `o`, zeros past dsize when size is larger (fields of newer headers that
 * this library does not know: their zero is their default), then `size`
 * into o's size field.  Writes no byte of `o` past `size`; a size smaller
 * than the size field gets zeros.  Accepts NULL `o`. */
void uvt__opts_init(void *o, size_t size, const void *defaults, size_t dsize);

#endif /* UVT_LEAF_OPTS_H */
