/* Settlement (R-DONE-1, R-DONE-2): a producer's outcome, from any thread,
 * through one registry-wide uv_async_t and a mutex-guarded queue.  Sends
 * coalesce; the drain applies everything queued.  Pushing is O(1), so the
 * cost of a settle does not grow with the number of live tasks.
 *
 * The queue lives in a small "hub" that outlives the registry while any
 * unsettled task refers to it: a settle that arrives after the registry
 * closed finds the hub closed and frees the task instead of touching freed
 * memory (C-17). */
#include <string.h>

#include "uvt-internal.h"

/* The registry is about to close its async handle: from now on a settle
 * frees its task itself.  Outcomes still queued belong to dropped records
 * and are freed here. */
void uvt__hub_close(uvt__hub_t *hub) {
  struct uvt__link doomed;
  struct uvt__link *n;
  uvt__list_init(&doomed);
  uv_mutex_lock(&hub->mutex);
  hub->async = NULL;
  while ((n = uvt__list_pop(&hub->queue)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, queue_link);
    t->queued = 0;
    uvt__list_insert_tail(&doomed, &t->apply_link);
  }
  uv_mutex_unlock(&hub->mutex);
  while ((n = uvt__list_pop(&doomed)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, apply_link);
    t->producer_done = 1;
    uvt__task_maybe_free(t);
  }
}

/* Queue `t` for the loop; hub->mutex held, hub->async set.  Only a push
 * onto an empty queue sends: a non-empty queue means an earlier push sent
 * after the last drain took the queue, and the callback that send
 * guarantees takes this task too.  Settles from many threads then do not
 * all touch the async handle's cache line (bench-core xsettle). */
static void hub_push(uvt__hub_t *hub, uvt_task_t *t) {
  int was_empty = uvt__list_empty(&hub->queue);
  uvt__list_insert_tail(&hub->queue, &t->queue_link);
  t->queued = 1;
  /* Sent under the lock, so close cannot free the handle in between. */
  if (was_empty)
    uv_async_send(hub->async);
}

int uvt_task_settle(uvt_task_t *t, const uvt_outcome_t *o) {
  uvt__hub_t *hub;
  char *detail = NULL;
  char *output = NULL;
  int lost = 0;

  if (t == NULL || o == NULL || !uvt_status_is_terminal(o->status))
    return UV_EINVAL;
  if (o->detail != NULL && (detail = uvt__strdup(o->detail)) == NULL)
    lost = 1;
  if (o->output != NULL && o->output_len > 0) {
    output = uvt__malloc(o->output_len + 1);
    if (output != NULL) {
      memcpy(output, o->output, o->output_len);
      output[o->output_len] = '\0';
    } else {
      lost = 1;
    }
  }

  hub = t->hub;
  uv_mutex_lock(&hub->mutex);
  if (atomic_load(&t->settle_called)) {
    /* R-DONE-2: the first outcome wins; the drain logs the later ones. */
    t->dup_settles++;
    if (hub->async != NULL && !t->queued)
      hub_push(hub, t);
    uv_mutex_unlock(&hub->mutex);
    uvt__free(detail);
    uvt__free(output);
    return 0;
  }
  atomic_store(&t->settle_called, 1);
  t->o_status = o->status;
  t->o_detail = detail;
  t->o_output = output;
  t->o_output_len = output != NULL ? o->output_len : 0;
  t->o_lost = lost;
  if (hub->async == NULL) {
    /* The registry closed and dropped the record: release the handle. */
    uv_mutex_unlock(&hub->mutex);
    uvt__task_free(t);
    return 0;
  }
  hub_push(hub, t);
  uv_mutex_unlock(&hub->mutex);
  return 0;
}

static void apply(uvt_task_t *t) {
  uvt_registry_t *reg = t->reg;
  char *detail;
  int detail_static = 0;

  if (t->dups_seen > 0) {
    uvt__log(reg, UVT_LOG_WARN,
             "task %s: %u later outcome(s) ignored; the first outcome wins",
             uvt__task_id(t), t->dups_seen);
    t->dups_seen = 0;
  }
  if (t->producer_done || !atomic_load(&t->settle_called))
    return;
  t->producer_done = 1;
  if (t->dropped || uvt_status_is_terminal(t->status)) {
    /* Force-failed or dropped before the producer settled (R-DONE-2). */
    if (!t->dropped)
      uvt__log(reg, UVT_LOG_WARN,
               "task %s settled %s after it was force-failed; outcome ignored",
               uvt__task_id(t), uvt_status_name(t->o_status));
    uvt__free(t->o_detail);
    uvt__free(t->o_output);
    t->o_detail = NULL;
    t->o_output = NULL;
    return;
  }
  t->output = t->o_output;
  t->output_len = t->o_output_len;
  t->o_output = NULL;
  detail = t->o_detail;
  t->o_detail = NULL;
  if (detail == NULL && t->o_lost) {
    detail = (char *)"outcome text lost: out of memory";
    detail_static = 1;
  }
  uvt__task_record(t, t->o_status, detail, detail_static);
  uvt__hook_settled(t);
  uvt__dispatch(t);
}

void uvt__settle_drain(uvt_registry_t *reg) {
  uvt__hub_t *hub = reg->hub;
  struct uvt__link local;
  struct uvt__link *n;

  /* Take everything queued so far; settles that arrive while we apply
   * trigger another send and are handled in the next loop turn. */
  uvt__list_init(&local);
  uv_mutex_lock(&hub->mutex);
  while ((n = uvt__list_pop(&hub->queue)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, queue_link);
    t->queued = 0;
    t->dups_seen += t->dup_settles;
    t->dup_settles = 0;
    /* Pinned while on the local list: a callback run by an earlier entry
     * (a listener disposing the owner) may drop it. */
    uvt__task_pin(t);
    uvt__list_insert_tail(&local, &t->apply_link);
  }
  uv_mutex_unlock(&hub->mutex);

  while ((n = uvt__list_pop(&local)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, apply_link);
    apply(t);
    uvt__task_unpin(t);
  }
}
