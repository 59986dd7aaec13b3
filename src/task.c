/* The task record as producers see it (uvtasks/producer.h): the fenced
 * and the producer's own lookup, and the looks and the one write (a live
 * detail) a producer makes on a record of its own. */
#include <string.h>

#include "uvt-internal.h"

int uvt_task_lookup(uvt_registry_t *reg, const char *id,
                    const uvt_agent_t *caller, uvt_task_t **out) {
  if (out == NULL)
    return UV_EINVAL;
  return uvt__lookup(reg, id, caller, out);
}

uvt_task_t *uvt_task_find(uvt_registry_t *reg, const char *id) {
  struct uvt__hentry *e;
  if (reg == NULL || id == NULL)
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
  if (!uvt__task_live(t)) {
    uvt__free(detail);
    return;
  }
  if (!t->detail_static)
    uvt__free(t->detail);
  t->detail = detail;
  t->detail_static = 0;
}

int uvt_task_snapshot(const uvt_task_t *t, uvt_snapshot_t *snap) {
  return uvt__snapshot_take(t, snap);
}
