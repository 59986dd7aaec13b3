/* Leaf helper: the number of a task id (R-START-4, R-START-6).  An id the
 * registry hands out is "<kind>-<n>", n from 1 without a leading zero,
 * fitting 64 bits; a requested id must have that form, and the journals
 * that take tasks back (durable tasks D-3, Slurm E-5) read it to keep the
 * registry's counter past every id they ever named.  One parser for all.
 * Any layer may include this header; it depends on the C library only. */
#ifndef UVT_LEAF_IDS_H
#define UVT_LEAF_IDS_H

#include <stdint.h>
#include <string.h>

/* n if `id` is "<kind>-<n>", else 0. */
static inline uint64_t uvt__id_number(const char *kind, const char *id) {
  size_t k = strlen(kind);
  const char *p;
  uint64_t n = 0;
  if (strncmp(id, kind, k) != 0 || id[k] != '-')
    return 0;
  p = id + k + 1;
  if (*p < '1' || *p > '9')
    return 0;
  for (; *p != '\0'; p++) {
    if (*p < '0' || *p > '9' || n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
      return 0;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  return n;
}

#endif /* UVT_LEAF_IDS_H */
