/* What a registry keeps of ended tasks (LU-1: keep_finished and
 * max_unread_bytes, the Node package's N-8 and N-11 bounds): past either
 * bound the oldest ended records are forgotten (R-FORGET-1), whether or
 * not anyone read them or heard of their end, except those whose session
 * still has processes (P-LEFT-1), which stay until they are gone.  A
 * task's end costs O(1): it joins a list in end order; the sweep runs
 * from a check handle, after the dispatch that ended the task (its
 * listeners and waits see the record whole). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "uvtl.h"

typedef struct {
  uvtl_link_t link;    /* r->finished */
  uvtl_agent_t *owner; /* counted: forget needs the owner's session */
  double bytes;
  int left_at_end; /* its detail said processes were still running */
  char id[UVT_ID_MAX];
} entry_t;

static void entry_drop(uvtl_reg_t *r, entry_t *e) {
  uvtl_list_remove(&e->link);
  r->finished_count--;
  r->finished_bytes -= e->bytes;
  if (e->owner != NULL)
    uvtl_agent_unref(e->owner);
  free(e);
}

static int over(const uvtl_reg_t *r) {
  return (double)r->finished_count > r->keep_finished ||
         r->finished_bytes > r->max_unread_bytes;
}

static const uvt_agent_t *as(const entry_t *e) {
  return e->owner != NULL && e->owner->registered ? &e->owner->agent : NULL;
}

static void sweep(uvtl_reg_t *r) {
  uvtl_link_t *n, *next;
  for (n = r->finished.next; n != &r->finished && over(r); n = next) {
    entry_t *e = uvtl_container_of(n, entry_t, link);
    int err;
    next = n->next;
    /* P-LEFT-1: a session with processes still running stays. */
    if (e->left_at_end && uvt_process_leftovers(r->reg, e->id, as(e)) > 0)
      continue;
    err = uvt_forget(r->reg, e->id, as(e));
    if (err == UV_EBUSY)
      continue;
    entry_drop(r, e); /* forgotten, or gone some other way */
  }
}

static void on_check(uv_check_t *c) {
  uvtl_reg_t *r = c->data;
  uv_check_stop(c);
  if (r->reg != NULL && !r->closing)
    sweep(r);
}

int uvtl_retention_init(uvtl_reg_t *r) {
  int err = uv_check_init(r->loop, &r->sweep_check);
  if (err != 0)
    return err;
  r->sweep_check.data = r;
  r->sweep_open = 1;
  uv_unref((uv_handle_t *)&r->sweep_check);
  return 0;
}

void uvtl_retention_ended(uvtl_reg_t *r, const uvt_snapshot_t *snap,
                          uvt_agent_t *owner) {
  entry_t *e;
  int64_t held;

  if (r->keep_finished == HUGE_VAL && r->max_unread_bytes == HUGE_VAL)
    return;
  e = calloc(1, sizeof(*e));
  if (e == NULL)
    return; /* not bounded then; nothing is lost */
  memcpy(e->id, snap->id, strlen(snap->id) + 1);
  if (owner != NULL) {
    e->owner = (uvtl_agent_t *)owner;
    e->owner->refs++;
  }
  held = uvt_held_bytes(r->reg, snap->id, owner);
  e->bytes = held > 0 ? (double)held : 0;
  e->left_at_end =
      snap->detail != NULL && strstr(snap->detail, " still running") != NULL;
  uvtl_list_insert(&r->finished, &e->link);
  r->finished_count++;
  r->finished_bytes += e->bytes;
  if (over(r) && r->sweep_open)
    uv_check_start(&r->sweep_check, on_check);
}

/* reg:forget() of a task the list holds. */
void uvtl_retention_forgot(uvtl_reg_t *r, const char *id) {
  uvtl_link_t *n;
  for (n = r->finished.next; n != &r->finished; n = n->next) {
    entry_t *e = uvtl_container_of(n, entry_t, link);
    if (strcmp(e->id, id) == 0) {
      entry_drop(r, e);
      return;
    }
  }
}

static void on_check_closed(uv_handle_t *h) {
  uvtl_reg_fully_closed(h->data);
}

void uvtl_retention_closed(uvtl_reg_t *r) {
  while (!uvtl_list_empty(&r->finished))
    entry_drop(r, uvtl_container_of(r->finished.next, entry_t, link));
  if (r->sweep_open) {
    r->sweep_open = 0;
    uv_close((uv_handle_t *)&r->sweep_check, on_check_closed);
  } else {
    uvtl_reg_fully_closed(r);
  }
}
