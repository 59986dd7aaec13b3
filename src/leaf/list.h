/* Leaf helper: intrusive doubly-linked lists of struct uvt__link (declared
 * in uvtasks.h, since public handles embed links), container_of, and a
 * fan-out that survives its own callbacks.  Header-only; any layer may
 * include it. */
#ifndef UVT_LEAF_LIST_H
#define UVT_LEAF_LIST_H

#include <stddef.h>

#include "uvtasks.h"

#define uvt__container_of(ptr, type, member)                                   \
  ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- Intrusive lists.  A removed node points at itself, so "linked" is
 * a cheap test and a second removal is harmless. */
static inline void uvt__list_init(struct uvt__link *h) {
  h->next = h;
  h->prev = h;
}
static inline int uvt__list_empty(const struct uvt__link *h) {
  return h->next == h;
}
static inline void uvt__list_insert_tail(struct uvt__link *h,
                                         struct uvt__link *n) {
  n->next = h;
  n->prev = h->prev;
  h->prev->next = n;
  h->prev = n;
}
static inline void uvt__list_remove(struct uvt__link *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->next = n;
  n->prev = n;
}
static inline struct uvt__link *uvt__list_pop(struct uvt__link *h) {
  struct uvt__link *n;
  if (uvt__list_empty(h))
    return NULL;
  n = h->next;
  uvt__list_remove(n);
  return n;
}
/* Move every node of `from` to the end of `to`; `from` ends empty. */
static inline void uvt__list_splice(struct uvt__link *from,
                                    struct uvt__link *to) {
  if (uvt__list_empty(from))
    return;
  from->next->prev = to->prev;
  to->prev->next = from->next;
  from->prev->next = to;
  to->prev = from->prev;
  uvt__list_init(from);
}

/* A fan-out that survives its own callbacks (R-DONE-4): the live list is
 * moved aside, and each member is put back before it is called.  A member
 * stopped by a callback is simply on neither list; one started by a
 * callback lands on the live list only and is not called this round. */
static inline void uvt__fanout_begin(struct uvt__link *live,
                                     struct uvt__link *aside) {
  uvt__list_splice(live, aside);
}
static inline struct uvt__link *uvt__fanout_next(struct uvt__link *live,
                                                 struct uvt__link *aside) {
  struct uvt__link *n = uvt__list_pop(aside);
  if (n != NULL)
    uvt__list_insert_tail(live, n);
  return n;
}
static inline void uvt__fanout_end(struct uvt__link *live,
                                   struct uvt__link *aside) {
  uvt__list_splice(aside, live);
}

#endif /* UVT_LEAF_LIST_H */
