/* Deadlines: one uv_timer_t per registry, armed for the earliest entry of a
 * pairing heap of intrusive nodes.  Wait deadlines (R-WAIT-4, R-WAIT-7) and
 * teardown grace periods (R-AGENT-4, P-KILL-4) live here, so adding one
 * never allocates and no handle has to be closed before a wait's callback. */
#include "uvt-internal.h"

typedef struct uvt__deadline node_t;

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
  now = uv_now(reg->loop);
  wait_ms = reg->deadlines->due_ms > now ? reg->deadlines->due_ms - now : 0;
  uv_timer_start(&reg->timer, uvt__deadline_timer_cb, wait_ms, 0);
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

void uvt__deadline_add(uvt_registry_t *reg, node_t *d, int kind,
                       uint64_t timeout_ms) {
  uint64_t now;
  if (uvt__deadline_armed(d))
    heap_remove(reg, d);
  /* Measured from the call, not from the loop's cached time (R-WAIT-7). */
  uv_update_time(reg->loop);
  d->child = NULL;
  d->sibling = NULL;
  d->prev = NULL;
  d->kind = kind;
  now = uv_now(reg->loop);
  /* Saturate: a timeout near UINT64_MAX means "never", not "already". */
  d->due_ms = timeout_ms > UINT64_MAX - now ? UINT64_MAX : now + timeout_ms;
  reg->deadlines = meld(reg->deadlines, d);
  rearm(reg);
}

void uvt__deadline_remove(uvt_registry_t *reg, node_t *d) {
  if (!uvt__deadline_armed(d))
    return;
  heap_remove(reg, d);
  rearm(reg);
}

void uvt__deadline_timer_cb(uv_timer_t *timer) {
  uvt_registry_t *reg = uvt__container_of(timer, uvt_registry_t, timer);
  struct uvt__link expired;
  uint64_t now = uv_now(reg->loop);

  /* Collect every expired deadline first, then act: a callback that adds a
   * deadline of its own lands in the next sweep, never in this one. */
  uvt__list_init(&expired);
  while (reg->deadlines != NULL && reg->deadlines->due_ms <= now) {
    node_t *d = reg->deadlines;
    int kind = d->kind;
    heap_remove(reg, d);
    if (kind == UVT__DEADLINE_WAIT) {
      uvt_wait_t *req = uvt__container_of(d, uvt_wait_t, deadline_);
      uvt__wait_expired(req);
      uvt__list_insert_tail(&expired, &req->link_);
    } else {
      uvt_task_t *t = uvt__container_of(d, uvt_task_t, teardown_deadline);
      uvt__teardown_expired(t);
    }
  }
  uvt__waits_expire(&expired);
  rearm(reg);
}
