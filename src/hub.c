/* The settle hub: the part of the registry a producer's thread may touch
 * (a mutex-guarded queue of settled tasks and the registry's async
 * handle).  It outlives the registry while any task not yet freed refers
 * to it (R-DONE-2, C-17).  This file makes, counts and frees hubs and takes
 * a task off the queue; settle.c pushes onto it, drains it and closes it. */
#include "uvt-internal.h"

int uvt__hub_new(uvt_registry_t *reg, uvt__hub_t **out) {
  uvt__hub_t *hub = uvt__calloc(1, sizeof(*hub));
  if (hub == NULL)
    return UV_ENOMEM;
  if (uv_mutex_init(&hub->mutex) != 0) {
    uvt__free(hub);
    return UV_ENOMEM;
  }
  uvt__list_init(&hub->queue);
  hub->async = &reg->async;
  atomic_init(&hub->refs, 1);
  *out = hub;
  return 0;
}

/* The count is atomic rather than under hub->mutex: every start and every
 * record freed takes or drops a reference, and two lock round trips per
 * task showed in bench-core lifecycle.  Only a holder of a reference
 * touches the hub, so the holder that drops the last one is alone. */
void uvt__hub_ref(uvt__hub_t *hub) {
  atomic_fetch_add_explicit(&hub->refs, 1, memory_order_relaxed);
}

void uvt__hub_unref(uvt__hub_t *hub) {
  if (atomic_fetch_sub_explicit(&hub->refs, 1, memory_order_acq_rel) == 1) {
    uv_mutex_destroy(&hub->mutex);
    uvt__free(hub);
  }
}

/* run() failed after settling: forget the queued outcome. */
void uvt__hub_cancel(uvt_task_t *t) {
  uv_mutex_lock(&t->hub->mutex);
  if (t->queued) {
    uvt__list_remove(&t->queue_link);
    t->queued = 0;
  }
  uv_mutex_unlock(&t->hub->mutex);
}
