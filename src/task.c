/* The task record's whole life: its one allocation (with its strings),
 * the terminal transition, hiding and dropping it, the pins that keep it
 * while a callback holds a view of it, and freeing it.  Also the lookups
 * (fenced, R-OWN-2, and the producer's own) and the looks and the one
 * write (a live detail) producers make through uvtasks/producer.h. */
#include <string.h>

#include "uvt-internal.h"

/* ---- Life */

uvt_task_t *uvt__task_alloc(uvt_registry_t *reg, const uvt_spec_t *spec) {
  size_t kind_len = strlen(spec->kind);
  size_t label_len = strlen(spec->label);
  size_t session_len =
      spec->owner != NULL ? strlen(spec->owner->session) + 1 : 0;
  /* One block: the record, "kind\0", "kind-<20 digits>\0", "label\0",
   * and the owner's session id. */
  size_t size = sizeof(uvt_task_t) + (kind_len + 1) + (kind_len + 22) +
                (label_len + 1) + session_len;
  uvt_task_t *t = uvt__calloc(1, size);
  char *p;
  if (t == NULL)
    return NULL;
  p = (char *)(t + 1);
  memcpy(p, spec->kind, kind_len + 1);
  p += kind_len + 1;
  t->id_prefix_len = (unsigned char)(kind_len + 1);
  /* uvt__task_id() and uvt__task_label() find these two from the kind's
   * length. */
  memcpy(p, spec->kind, kind_len);
  p[kind_len] = '-';
  p[kind_len + 1] = '\0';
  p += kind_len + 22;
  memcpy(p, spec->label, label_len + 1);
  p += label_len + 1;
  if (session_len > 0) {
    t->owner_session = p;
    memcpy(p, spec->owner->session, session_len);
  }

  t->reg = reg;
  t->hub = reg->hub;
  uvt__list_init(&t->all_link);
  uvt__list_init(&t->scope_link);
  uvt__list_init(&t->owner_link);
  uvt__list_init(&t->waits);
  uvt__list_init(&t->dispatch_link);
  uvt__list_init(&t->sweep_link);
  uvt__list_init(&t->apply_link);
  uvt__list_init(&t->queue_link);
  uvt__deadline_init(&t->teardown_deadline);
  atomic_init(&t->settle_called, 0);
  t->owner = spec->owner;
  t->arg = spec->arg;
  t->status = UVT_RUNNING;
  return t;
}

void *uvt_task_arg(const uvt_task_t *t) {
  return t != NULL ? t->arg : NULL;
}

const char *uvt_task_id(const uvt_task_t *t) {
  return t != NULL && t->committed ? uvt__task_id(t) : NULL;
}

uvt_registry_t *uvt_task_registry(const uvt_task_t *t) {
  return t != NULL ? t->reg : NULL;
}

int uvt__task_live(const uvt_task_t *t) {
  return t->status == UVT_RUNNING || t->status == UVT_STOPPING;
}

int uvt__lookup(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
                uvt_task_t **out) {
  struct uvt__hentry *e;
  uvt_task_t *t;
  if (reg == NULL || id == NULL)
    return UV_EINVAL;
  e = uvt__index_find(&reg->tasks_by_id, id);
  if (e == NULL)
    return UVT_ENOTASK;
  t = uvt__container_of(e, uvt_task_t, hentry);
  /* R-OWN-2: unowned tasks are open to every caller; an owned one only to
   * callers of the same session; a NULL caller never matches. */
  if (t->owner_session != NULL &&
      (caller == NULL || caller->session == NULL ||
       strcmp(caller->session, t->owner_session) != 0))
    return UVT_EFOREIGN;
  *out = t;
  return 0;
}

void uvt__task_record(uvt_task_t *t, uvt_status_t status, char *detail,
                      int detail_static) {
  uvt_registry_t *reg = t->reg;
  t->status = status;
  /* A producer may have shown a detail while live (the Slurm engine's
   * pending reason). */
  if (t->detail != NULL && !t->detail_static)
    uvt__free(t->detail);
  t->detail = detail;
  t->detail_static = detail_static ? 1 : 0;
  t->finished_at_ms = uvt__now_ms();
  reg->metrics.live--;
  if (t->owner != NULL)
    t->owner->live_--;
  else
    reg->unowned_live--;
  if (status == UVT_COMPLETED)
    reg->metrics.completed++;
  else if (status == UVT_KILLED)
    reg->metrics.killed++;
  else
    reg->metrics.failed++;
  uvt__deadline_remove(reg, &t->teardown_deadline);
  uvt__waits_count(t); /* R-DONE-3: reported before any listener runs */
  uvt__feed(t, UVT__CHANGE_TERMINAL);
}

/* A stream kind's unread remainder was read: the bytes are not needed any
 * more (R-READ-1 serves them once), so they go back now instead of when the
 * record is dropped; a host that keeps many ended tasks (uvtasks-mcp's
 * --keep-finished) then holds their records, not their output.  The length
 * stays, so "everything was read" is still told apart from "nothing was
 * kept". */
void uvt__task_output_consumed(uvt_task_t *t) {
  t->output_pos = t->output_len;
  uvt__free(t->output);
  t->output = NULL;
}

void uvt__task_pin(uvt_task_t *t) {
  t->pins++;
}

void uvt__task_unpin(uvt_task_t *t) {
  t->pins--;
  uvt__task_maybe_free(t);
}

/* A record is freed when it was dropped, the producer's outcome was taken,
 * no callback holds a view of it and no duplicate settle is queued. */
void uvt__task_maybe_free(uvt_task_t *t) {
  int queued;
  if (!t->dropped || !t->producer_done || t->pins > 0)
    return;
  uv_mutex_lock(&t->hub->mutex);
  queued = t->queued;
  uv_mutex_unlock(&t->hub->mutex);
  if (!queued)
    uvt__task_free(t);
}

void uvt__task_free(uvt_task_t *t) {
  uvt__hub_t *hub = t->hub;
  if (!t->detail_static)
    uvt__free(t->detail);
  if (t->kill_reason_owned)
    uvt__free((char *)t->kill_reason);
  uvt__free(t->output);
  uvt__free(t->o_detail);
  uvt__free(t->o_output);
  uvt__free(t);
  uvt__hub_unref(hub);
}

/* Take the record out of lookups and lists; it still counts as held (and
 * disposal still waits for it) until it is dropped. */
void uvt__hide(uvt_task_t *t) {
  uvt_registry_t *reg = t->reg;
  if (t->hidden)
    return;
  t->hidden = 1;
  uvt__index_remove(&reg->tasks_by_id, &t->hentry);
  uvt__list_remove(&t->scope_link);
  if (t->session != NULL)
    t->session->task_count--;
  else
    reg->unowned_count--;
}

void uvt__drop(uvt_task_t *t) {
  uvt_registry_t *reg = t->reg;
  uvt_agent_t *owner = t->owner;
  if (t->dropped)
    return;
  t->dropped = 1;
  uvt__hide(t);
  uvt__deadline_remove(reg, &t->teardown_deadline);
  uvt__list_remove(&t->all_link);
  uvt__list_remove(&t->owner_link);
  uvt__list_remove(&t->sweep_link);
  if (t->session != NULL) {
    uvt__session_unref(reg, t->session);
    t->session = NULL;
  }
  t->owner = NULL;
  reg->records--;
  uvt__feed(t, UVT__CHANGE_DROPPED);
  uvt__hook_release(t);
  if (owner != NULL)
    uvt__agent_maybe_done(owner);
  if (reg->closing)
    uvt__kick(reg);
  uvt__task_maybe_free(t);
}

/* ---- Producers' looks (uvtasks/producer.h) */

/* P-THREAD-1 holds for these as for the rest of the API: a call from
 * another thread is refused before anything is read. */
int uvt_task_lookup(uvt_registry_t *reg, const char *id,
                    const uvt_agent_t *caller, uvt_task_t **out) {
  if (out == NULL)
    return UV_EINVAL;
  *out = NULL;
  UVT_LOOP_ONLY(reg);
  return uvt__lookup(reg, id, caller, out);
}

uvt_task_t *uvt_task_find(uvt_registry_t *reg, const char *id) {
  struct uvt__hentry *e;
  if (reg == NULL || id == NULL || uvt__off_loop(reg, __func__))
    return NULL;
  e = uvt__index_find(&reg->tasks_by_id, id);
  return e != NULL ? uvt__container_of(e, uvt_task_t, hentry) : NULL;
}

uvt_status_t uvt_task_status(const uvt_task_t *t) {
  return t->status;
}

int uvt_task_is_live(const uvt_task_t *t) {
  return uvt__task_live(t);
}

const uvt_hooks_t *uvt_task_hooks(const uvt_task_t *t) {
  return &t->hooks;
}

int uvt_task_host_leaving(const uvt_task_t *t) {
  return t->reg->closing ||
         (t->owner != NULL && t->owner->state_ == UVT__AGENT_DISPOSING);
}

void uvt_task_set_detail(uvt_task_t *t, char *detail) {
  if (t == NULL || uvt__off_loop(t->reg, __func__) || !uvt__task_live(t)) {
    uvt__free(detail);
    return;
  }
  if (!t->detail_static)
    uvt__free(t->detail);
  t->detail = detail;
  t->detail_static = 0;
}

int uvt_task_snapshot(const uvt_task_t *t, uvt_snapshot_t *snap) {
  if (t == NULL || snap == NULL)
    return UV_EINVAL;
  UVT_LOOP_ONLY(t->reg);
  return uvt__snapshot_take(t, snap);
}
