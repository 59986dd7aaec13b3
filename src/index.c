/* A string-keyed hash index with chained, intrusive entries.  Lookups are
 * O(1) on average; insertion never allocates, so the commit after a
 * producer's run() cannot fail (R-START-3): callers reserve first. */
#include <string.h>

#include "uvt-internal.h"

/* FNV-1a, 32 bits. */
uint32_t uvt__hash(const char *key) {
  uint32_t h = 2166136261u;
  const unsigned char *p = (const unsigned char *)key;
  while (*p != '\0') {
    h ^= *p++;
    h *= 16777619u;
  }
  return h;
}

int uvt__index_reserve(uvt__index_t *ix, size_t count) {
  struct uvt__hentry **buckets;
  size_t n, i;
  /* Keep the load factor at or below one entry per bucket. */
  if (ix->buckets != NULL && count <= ix->mask + 1)
    return 0;
  n = ix->buckets != NULL ? (ix->mask + 1) * 2 : 16;
  while (n < count)
    n *= 2;
  buckets = uvt__calloc(n, sizeof(*buckets));
  if (buckets == NULL)
    return UV_ENOMEM;
  if (ix->buckets != NULL) {
    for (i = 0; i <= ix->mask; i++) {
      struct uvt__hentry *e = ix->buckets[i];
      while (e != NULL) {
        struct uvt__hentry *next = e->next;
        size_t b = e->hash & (n - 1);
        e->next = buckets[b];
        buckets[b] = e;
        e = next;
      }
    }
    uvt__free(ix->buckets);
  }
  ix->buckets = buckets;
  ix->mask = n - 1;
  return 0;
}

void uvt__index_insert(uvt__index_t *ix, struct uvt__hentry *e,
                       const char *key) {
  size_t b;
  e->key = key;
  e->hash = uvt__hash(key);
  b = e->hash & ix->mask;
  e->next = ix->buckets[b];
  ix->buckets[b] = e;
  ix->count++;
}

struct uvt__hentry *uvt__index_find(const uvt__index_t *ix, const char *key) {
  struct uvt__hentry *e;
  uint32_t h;
  if (ix->buckets == NULL)
    return NULL;
  h = uvt__hash(key);
  for (e = ix->buckets[h & ix->mask]; e != NULL; e = e->next)
    if (e->hash == h && strcmp(e->key, key) == 0)
      return e;
  return NULL;
}

void uvt__index_remove(uvt__index_t *ix, struct uvt__hentry *e) {
  struct uvt__hentry **pp = &ix->buckets[e->hash & ix->mask];
  while (*pp != NULL) {
    if (*pp == e) {
      *pp = e->next;
      e->next = NULL;
      ix->count--;
      return;
    }
    pp = &(*pp)->next;
  }
}

void uvt__index_free(uvt__index_t *ix) {
  uvt__free(ix->buckets);
  ix->buckets = NULL;
  ix->mask = 0;
  ix->count = 0;
}
