/* Deadlines: one uv_timer_t per registry, armed for the earliest entry of a
 * pairing heap of intrusive nodes.  Wait deadlines (R-WAIT-4, R-WAIT-7) and
 * teardown grace periods (R-AGENT-4, P-KILL-4) live here, so adding one
 * never allocates and no handle has to be closed before a wait's callback.
 *
 * This file only keeps time: it knows nothing of waits or tasks.  When the
 * timer fires, the callback the registry handed over (reg->deadlines_due,
 * registry.c's) collects every deadline due into
 * a list (uvt__deadline_collect) and then acts on them one by one
 * (uvt__deadline_pop_expired).  A deadline removed while it waits on that
 * list (a wait counted by a force-fail earlier in the same sweep, a record
 * dropped by a callback) simply leaves the list; one added by a callback
 * goes into the heap and is seen by the next sweep.
 *
 * R-TIME-1: a duration counts from the call that sets it.  The loop's
 * cached time is refreshed before every computation that arms the timer,
 * since a host may call us after blocking its loop outside any callback;
 * and a deadline is due one millisecond after `timeout_ms` of loop time,
 * because the loop clock is truncated to milliseconds (so `now` may be up
 * to a millisecond before the call): it is never early, at most 1 ms
 * late. */
#include "uvt-internal.h"

typedef struct uvt__deadline node_t;

/* Set on a node while it sits on the registry's expired list. */
#define COLLECTED 0x100

void uvt__deadline_init(node_t *d) {
  d->child = NULL;
  d->sibling = NULL;
  d->prev = NULL;
  d->due_ms = 0;
  d->kind = 0;
}

int uvt__deadline_armed(const node_t *d) {
  return d->kind != 0;
}

static node_t *meld(node_t *a, node_t *b) {
  node_t *t;
  if (a == NULL)
    return b;
  if (b == NULL)
    return a;
  if (b->due_ms < a->due_ms) {
    t = a;
    a = b;
    b = t;
  }
  b->prev = a;
  b->sibling = a->child;
  if (a->child != NULL)
    a->child->prev = b;
  a->child = b;
  a->sibling = NULL;
  a->prev = NULL;
  return a;
}

/* The classic two-pass merge of a list of siblings. */
static node_t *merge_pairs(node_t *first) {
  node_t *list = NULL;
  node_t *root = NULL;
  while (first != NULL) {
    node_t *a = first;
    node_t *b = a->sibling;
    if (b != NULL) {
      first = b->sibling;
      a->sibling = NULL;
      a->prev = NULL;
      b->sibling = NULL;
      b->prev = NULL;
      a = meld(a, b);
    } else {
      first = NULL;
      a->sibling = NULL;
      a->prev = NULL;
    }
    a->sibling = list;
    list = a;
  }
  while (list != NULL) {
    node_t *next = list->sibling;
    list->sibling = NULL;
    root = meld(root, list);
    list = next;
  }
  return root;
}

static void rearm(uvt_registry_t *reg) {
  uint64_t now, wait_ms;
  if (reg->deadlines == NULL) {
    uv_timer_stop(&reg->timer);
    return;
  }
  uv_update_time(reg->loop); /* R-TIME-1 (interface: before every start) */
  now = uv_now(reg->loop);
  wait_ms = reg->deadlines->due_ms > now ? reg->deadlines->due_ms - now : 0;
  /* Never 0 (C-21): libuv before 1.48 runs a timer started from a timer
   * callback in the same pass when it is already due, so a wait re-armed
   * from its own callback on a slow machine (the clock moved on between
   * the deadline's computation and here) would fire twice in one loop turn
   * and starve I/O.  One millisecond puts it in the next turn. */
  if (wait_ms == 0)
    wait_ms = 1;
  uv_timer_start(&reg->timer, reg->deadlines_due, wait_ms, 0);
}

static void heap_remove(uvt_registry_t *reg, node_t *d) {
  if (d == reg->deadlines) {
    reg->deadlines = merge_pairs(d->child);
  } else {
    if (d->prev->child == d)
      d->prev->child = d->sibling;
    else
      d->prev->sibling = d->sibling;
    if (d->sibling != NULL)
      d->sibling->prev = d->prev;
    reg->deadlines = meld(reg->deadlines, merge_pairs(d->child));
  }
  d->child = NULL;
  d->sibling = NULL;
  d->prev = NULL;
  d->kind = 0;
}

/* The expired list is circular through `sibling` (next) and `prev`, with
 * reg->expired as its head. */
static void expired_unlink(node_t *d) {
  d->prev->sibling = d->sibling;
  d->sibling->prev = d->prev;
  d->sibling = NULL;
  d->prev = NULL;
  d->kind = 0;
}

static void unlink_any(uvt_registry_t *reg, node_t *d) {
  if (d->kind & COLLECTED)
    expired_unlink(d);
  else if (d->kind != 0)
    heap_remove(reg, d);
}

void uvt__deadline_add(uvt_registry_t *reg, node_t *d, int kind,
                       uint64_t timeout_ms) {
  uint64_t now;
  unlink_any(reg, d);
  /* Measured from the call, not from the loop's cached time (R-WAIT-7,
   * R-TIME-1). */
  uv_update_time(reg->loop);
  d->child = NULL;
  d->sibling = NULL;
  d->prev = NULL;
  d->kind = kind;
  now = uv_now(reg->loop);
  /* Saturate: a timeout near UINT64_MAX means "never", not "already". */
  d->due_ms =
      timeout_ms >= UINT64_MAX - now - 1 ? UINT64_MAX : now + timeout_ms + 1;
  reg->deadlines = meld(reg->deadlines, d);
  rearm(reg);
}

void uvt__deadline_remove(uvt_registry_t *reg, node_t *d) {
  if (d->kind & COLLECTED) {
    expired_unlink(d);
    return;
  }
  if (d->kind == 0)
    return;
  heap_remove(reg, d);
  rearm(reg);
}

void uvt__deadline_collect(uvt_registry_t *reg) {
  uint64_t now = uv_now(reg->loop);
  node_t *head = &reg->expired;
  while (reg->deadlines != NULL && reg->deadlines->due_ms <= now) {
    node_t *d = reg->deadlines;
    int kind = d->kind;
    heap_remove(reg, d);
    d->kind = kind | COLLECTED;
    d->prev = head->prev;
    d->sibling = head;
    head->prev->sibling = d;
    head->prev = d;
  }
  rearm(reg);
}

node_t *uvt__deadline_pop_expired(uvt_registry_t *reg, int *kind) {
  node_t *d = reg->expired.sibling;
  if (d == &reg->expired)
    return NULL;
  *kind = d->kind & ~COLLECTED;
  expired_unlink(d);
  return d;
}
