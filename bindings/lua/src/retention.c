/* What a registry keeps of ended tasks (LU-1: keep_finished and
 * max_unread_bytes are the Node package's bounds, with its defaults and
 * its rule, N-11; bindings/node/retention.js is the same rule in JS).
 * Every ended task counts, whether or not anyone read it or heard of its
 * end:
 *
 *   unread    it holds output nobody has read (no reg:read() since its
 *             end, no on_data): counts against max_unread_bytes, its
 *             bytes and at least RECORD_BYTES (what a record costs), so
 *             small outputs cannot pile up without a bound either;
 *   spent     nothing of it is left to read (read since its end, an
 *             on_data task, or it had no output): counts against
 *             keep_finished, and its bytes (a read does not free them,
 *             uvt_held_bytes()) against max_unread_bytes;
 *   lingering its session still has processes (P-LEFT-1): never
 *             forgotten here, looked at again (one per sweep) until they
 *             are gone.
 *
 * Past keep_finished the oldest spent task goes; past max_unread_bytes
 * the oldest spent task that holds bytes, else the oldest unread one (its
 * output is then lost: metrics and the error of a later look say so).
 * "Oldest": in the order they ended, or were read for the spent ones.  A
 * host's wait, await or listener reads nothing, so it makes nothing spent
 * (issue 35's F1).
 *
 * Each end costs O(1) whatever the number of records (F2): a lookup in a
 * hash of ids, a list insertion, one uvt_held_bytes(); the sweep runs
 * from a check handle after the dispatch that ended the task (its
 * listeners and waits see the record whole), looks at one lingering task
 * and makes the drops the bounds ask for (each record is dropped once). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvtl.h"

#define RECORD_BYTES 4096.0
/* Forgotten ids remembered for the error of a later look. */
#define FORGOTTEN_REMEMBERED 1024

enum { IN_NONE, IN_LIGHT, IN_HEAVY, IN_UNREAD, IN_LINGERING };

typedef struct {
  uvtl_idnode_t node;  /* ret->by_id; node.id is `id` below */
  uvtl_link_t link;    /* the list `where` names */
  uvtl_agent_t *owner; /* counted: forget needs the owner's session */
  uint64_t seq;        /* when it was placed: the order of "oldest" */
  double bytes;        /* uvt_held_bytes() when placed */
  double cost;         /* what it counts against max_unread_bytes */
  int where;
  int read; /* nothing of it is left to read */
  char id[];
} entry_t;

typedef struct {
  char *id;          /* NULL: free slot */
  const char *bound; /* "keep_finished" or "max_unread_bytes" */
  double unread_bytes;
} forgotten_t;

struct uvtl_retention_s {
  uvtl_reg_t *r;
  uv_check_t check;      /* the sweep, after the dispatch of an end */
  int off;               /* both bounds math.huge: nothing is tracked */
  uvtl_link_t light;     /* spent, holding no bytes */
  uvtl_link_t heavy;     /* spent, holding bytes */
  uvtl_link_t unread;    /* holding output nobody has read */
  uvtl_link_t lingering; /* their sessions still have processes */
  size_t spent;          /* in light and heavy */
  double bytes;          /* what unread and spent tasks count */
  uint64_t seq;
  uvtl_idmap_t by_id;
  forgotten_t *ring; /* FORGOTTEN_REMEMBERED slots, made at the first drop */
  size_t ring_next;
  /* reg:metrics() */
  double forgotten, forgotten_unread, unread_bytes_dropped;
};

typedef struct uvtl_retention_s ret_t;

static entry_t *entry_of(uvtl_link_t *n) {
  return uvtl_container_of(n, entry_t, link);
}

static entry_t *first(uvtl_link_t *h) {
  return uvtl_list_empty(h) ? NULL : entry_of(h->next);
}

static entry_t *lookup(ret_t *ret, const char *id) {
  uvtl_idnode_t *n = uvtl_idmap_get(&ret->by_id, id);
  return n == NULL ? NULL : uvtl_container_of(n, entry_t, node);
}

static const uvt_agent_t *as(const entry_t *e) {
  return e->owner != NULL && e->owner->registered ? &e->owner->agent : NULL;
}

static void place(ret_t *ret, entry_t *e) {
  uvtl_link_t *h;
  e->seq = ++ret->seq;
  if (e->read || e->bytes == 0) {
    e->where = e->bytes == 0 ? IN_LIGHT : IN_HEAVY;
    h = e->bytes == 0 ? &ret->light : &ret->heavy;
    e->cost = e->bytes;
    ret->spent++;
  } else {
    e->where = IN_UNREAD;
    h = &ret->unread;
    e->cost = e->bytes > RECORD_BYTES ? e->bytes : RECORD_BYTES;
  }
  uvtl_list_insert(h, &e->link);
  ret->bytes += e->cost;
}

/* Out of its list (a lingering one too); no longer counted. */
static void unplace(ret_t *ret, entry_t *e) {
  uvtl_list_remove(&e->link);
  if (e->where == IN_LIGHT || e->where == IN_HEAVY)
    ret->spent--;
  ret->bytes -= e->cost;
  e->cost = 0;
  e->where = IN_NONE;
}

static void entry_free(ret_t *ret, entry_t *e) {
  if (e->where != IN_NONE)
    unplace(ret, e);
  uvtl_idmap_remove(&ret->by_id, &e->node);
  if (e->owner != NULL)
    uvtl_agent_unref(e->owner);
  free(e);
}

static int over(const ret_t *ret) {
  return (double)ret->spent > ret->r->keep_finished ||
         ret->bytes > ret->r->max_unread_bytes;
}

static int due(const ret_t *ret) {
  return !ret->off && (!uvtl_list_empty(&ret->lingering) || over(ret));
}

static void on_check(uv_check_t *c);

static void queue_sweep(ret_t *ret) {
  if (due(ret) && !ret->r->closing)
    uv_check_start(&ret->check, on_check);
}

static void remember(ret_t *ret, const char *id, const char *bound,
                     double unread_bytes) {
  forgotten_t *f;
  if (ret->ring == NULL) {
    ret->ring = calloc(FORGOTTEN_REMEMBERED, sizeof(*ret->ring));
    if (ret->ring == NULL)
      return; /* the error of a later look says less; nothing else */
  }
  f = &ret->ring[ret->ring_next];
  ret->ring_next = (ret->ring_next + 1) % FORGOTTEN_REMEMBERED;
  free(f->id);
  f->id = strdup(id);
  f->bound = bound;
  f->unread_bytes = unread_bytes;
}

static void drop(ret_t *ret, entry_t *e, const char *bound) {
  int unread = e->where == IN_UNREAD;
  double bytes = e->bytes;
  int err;

  unplace(ret, e);
  err = uvt_forget(ret->r->reg, e->id, as(e));
  if (err == 0) {
    ret->forgotten++;
    if (unread) {
      ret->forgotten_unread++;
      ret->unread_bytes_dropped += bytes;
    }
    remember(ret, e->id, bound, unread ? bytes : 0);
  }
  /* Else gone already: nothing was dropped here. */
  entry_free(ret, e);
}

/* The oldest lingering task: to the back if its session still has
 * processes, else counted as any ended task. */
static void look_at_lingering(ret_t *ret) {
  entry_t *e = first(&ret->lingering);
  int64_t held;
  if (e == NULL)
    return;
  uvtl_list_remove(&e->link);
  if (uvt_process_leftovers(ret->r->reg, e->id, as(e)) > 0) {
    uvtl_list_insert(&ret->lingering, &e->link);
    return;
  }
  e->where = IN_NONE;
  held = uvt_held_bytes(ret->r->reg, e->id, as(e));
  if (held < 0) {
    entry_free(ret, e); /* gone */
    return;
  }
  e->bytes = (double)held;
  place(ret, e);
}

static void sweep(ret_t *ret) {
  look_at_lingering(ret);
  while (over(ret)) {
    entry_t *e;
    const char *bound;
    if ((double)ret->spent > ret->r->keep_finished) {
      entry_t *a = first(&ret->light), *b = first(&ret->heavy);
      e = a == NULL || (b != NULL && b->seq < a->seq) ? b : a;
      bound = "keep_finished";
    } else {
      e = first(&ret->heavy);
      if (e == NULL)
        e = first(&ret->unread);
      bound = "max_unread_bytes";
    }
    if (e == NULL)
      return; /* only lingering tasks are left */
    drop(ret, e, bound);
  }
}

static void on_check(uv_check_t *c) {
  ret_t *ret = c->data;
  uv_check_stop(c);
  if (ret->r->reg != NULL && !ret->r->closing)
    sweep(ret);
}

int uvtl_retention_init(uvtl_reg_t *r) {
  ret_t *ret = calloc(1, sizeof(*ret));
  int err;
  if (ret == NULL)
    return UV_ENOMEM;
  err = uvtl_idmap_init(&ret->by_id);
  if (err == 0)
    err = uv_check_init(r->loop, &ret->check);
  if (err != 0) {
    uvtl_idmap_free(&ret->by_id);
    free(ret);
    return err;
  }
  ret->r = r;
  ret->check.data = ret;
  uv_unref((uv_handle_t *)&ret->check);
  ret->off = r->keep_finished == HUGE_VAL && r->max_unread_bytes == HUGE_VAL;
  uvtl_list_init(&ret->light);
  uvtl_list_init(&ret->heavy);
  uvtl_list_init(&ret->unread);
  uvtl_list_init(&ret->lingering);
  r->ret = ret;
  return 0;
}

void uvtl_retention_ended(uvtl_reg_t *r, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner, int consumed) {
  ret_t *ret = r->ret;
  size_t len = strlen(snap->id);
  entry_t *e;
  int64_t held = 0;
  int lingering;

  if (ret == NULL || ret->off)
    return;
  lingering =
      snap->detail != NULL && strstr(snap->detail, " still running") != NULL;
  if (!lingering) {
    held = uvt_held_bytes(r->reg, snap->id, owner);
    if (held < 0)
      return; /* dropped meanwhile */
  }
  e = calloc(1, sizeof(*e) + len + 1);
  if (e == NULL)
    return; /* not bounded then; nothing is lost */
  memcpy(e->id, snap->id, len + 1);
  e->node.id = e->id;
  uvtl_idmap_put(&ret->by_id, &e->node);
  if (owner != NULL) {
    e->owner = (uvtl_agent_t *)owner;
    e->owner->refs++;
  }
  e->read = consumed;
  if (lingering) {
    e->where = IN_LINGERING;
    uvtl_list_insert(&ret->lingering, &e->link);
  } else {
    e->bytes = (double)held;
    place(ret, e);
  }
  queue_sweep(ret);
}

void uvtl_retention_read(uvtl_reg_t *r, const char *id) {
  entry_t *e;
  if (r->ret == NULL || (e = lookup(r->ret, id)) == NULL || e->read)
    return;
  e->read = 1;
  if (e->where == IN_UNREAD) {
    unplace(r->ret, e);
    place(r->ret, e);
  }
  queue_sweep(r->ret);
}

void uvtl_retention_forgot(uvtl_reg_t *r, const char *id) {
  entry_t *e;
  if (r->ret != NULL && (e = lookup(r->ret, id)) != NULL)
    entry_free(r->ret, e);
}

void uvtl_retention_agent_gone(uvtl_reg_t *r, uvtl_agent_t *a) {
  uvtl_link_t *lists[4], *n, *next;
  size_t i;
  if (r->ret == NULL)
    return;
  lists[0] = &r->ret->light;
  lists[1] = &r->ret->heavy;
  lists[2] = &r->ret->unread;
  lists[3] = &r->ret->lingering;
  for (i = 0; i < 4; i++) {
    for (n = lists[i]->next; n != lists[i]; n = next) {
      next = n->next;
      if (entry_of(n)->owner == a)
        entry_free(r->ret, entry_of(n));
    }
  }
}

int uvtl_retention_why(uvtl_reg_t *r, const char *id, char *buf, size_t size) {
  ret_t *ret = r->ret;
  size_t i;
  if (ret == NULL || ret->ring == NULL)
    return 0;
  for (i = 0; i < FORGOTTEN_REMEMBERED; i++) {
    const forgotten_t *f = &ret->ring[i];
    if (f->id == NULL || strcmp(f->id, id) != 0)
      continue;
    if (f->unread_bytes > 0)
      snprintf(buf, size,
               " (forgotten: %s: %.0f bytes never read were dropped)", f->bound,
               f->unread_bytes);
    else
      snprintf(buf, size, " (forgotten: %s: nothing of it was left to read)",
               f->bound);
    return 1;
  }
  return 0;
}

void uvtl_retention_metrics(lua_State *L, uvtl_reg_t *r) {
  ret_t *ret = r->ret;
  lua_pushnumber(L, ret != NULL ? ret->forgotten : 0);
  lua_setfield(L, -2, "forgotten");
  lua_pushnumber(L, ret != NULL ? ret->forgotten_unread : 0);
  lua_setfield(L, -2, "forgotten_unread");
  lua_pushnumber(L, ret != NULL ? ret->unread_bytes_dropped : 0);
  lua_setfield(L, -2, "unread_bytes_dropped");
}

static void on_check_closed(uv_handle_t *h) {
  ret_t *ret = h->data;
  uvtl_reg_t *r = ret->r;
  size_t i;

  r->ret = NULL;
  if (ret->ring != NULL) {
    for (i = 0; i < FORGOTTEN_REMEMBERED; i++)
      free(ret->ring[i].id);
    free(ret->ring);
  }
  free(ret);
  uvtl_reg_fully_closed(r);
}

void uvtl_retention_closed(uvtl_reg_t *r) {
  ret_t *ret = r->ret;
  uvtl_link_t *lists[4];
  size_t i;

  if (ret == NULL) {
    uvtl_reg_fully_closed(r);
    return;
  }
  /* The library let go of every record: so do we (the counts stay for
   * metrics until the handle is closed). */
  ret->off = 1;
  lists[0] = &ret->light;
  lists[1] = &ret->heavy;
  lists[2] = &ret->unread;
  lists[3] = &ret->lingering;
  for (i = 0; i < 4; i++)
    while (!uvtl_list_empty(lists[i]))
      entry_free(ret, entry_of(lists[i]->next));
  uvtl_idmap_free(&ret->by_id);
  uv_close((uv_handle_t *)&ret->check, on_check_closed);
}
