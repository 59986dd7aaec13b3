/* The registry: creation, the loop-side drain, and disposal (R-CLOSE-1..3).
 *
 * Handles of ours: one uv_async_t (settlement from any thread, and every
 * result deferred out of a host's call) and one uv_timer_t (deadlines).
 * The async handle is referenced only while something is pending (a live
 * task, a deferred result, a close in progress), so an idle registry does
 * not keep the host's uv_run() alive. */
#include <stdio.h>
#include <string.h>

#include "leaf/opts.h"
#include "uvt-internal.h"

/* every field of this library's struct at its default. */
static void options_defaults(uvt_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->size = sizeof(*o);
  o->teardown_grace_ms = 10000;
}

void uvt_options_init_size(uvt_options_t *o, size_t size) {
  uvt_options_t d;
  options_defaults(&d);
  uvt__opts_init(o, size, &d, sizeof(d));
}

/* The exported symbol of the old name (the header's macro hides it). */
void(uvt_options_init)(uvt_options_t *o) {
  uvt_options_init_size(o, sizeof(*o));
}

static void maybe_finish_close(uvt_registry_t *reg);

static void async_cb(uv_async_t *handle) {
  uvt_registry_t *reg = uvt__container_of(handle, uvt_registry_t, async);
  /* Order matters: outcomes first (listeners, then counted waits), then
   * records made terminal inside a host's call, then waits that were due
   * anyway, then finished agent disposals. */
  uvt__settle_drain(reg);
  uvt__dispatch_drain(reg);
  uvt__waits_drain(reg);
  uvt__agents_drain(reg);
  uvt__feed_drain(reg);
  maybe_finish_close(reg);
  uvt__update_ref(reg);
}

/* The deadline timer: collect every deadline due, then act on each (the
 * c-ares way: nothing is called back while the heap is being walked).
 * Acting may call back into the host, which may remove collected
 * deadlines (they leave the list) or add new ones (next sweep). */
static void deadlines_due(uv_timer_t *timer) {
  uvt_registry_t *reg = uvt__container_of(timer, uvt_registry_t, timer);
  struct uvt__deadline *d;
  int kind;
  uvt__deadline_collect(reg);
  while ((d = uvt__deadline_pop_expired(reg, &kind)) != NULL) {
    if (kind == UVT__DEADLINE_WAIT)
      uvt__wait_expired(uvt__container_of(d, uvt_wait_t, deadline_));
    else
      uvt__teardown_expired(
          uvt__container_of(d, uvt_task_t, teardown_deadline));
  }
}

int uvt_registry_new(uv_loop_t *loop, const uvt_options_t *o,
                     uvt_registry_t **out) {
  uvt_registry_t *reg;
  int err;

  uvt_options_t own;
  char why[UVT__OPTS_WHY];

  if (loop == NULL || out == NULL)
    return UV_EINVAL;
  /* the caller's first o->size bytes over the defaults, once; only
   * the copy is read from here on.  No registry yet, so no log hook: the
   * line goes to stderr as uvt__log() writes it without one. */
  options_defaults(&own);
  if (o != NULL &&
      uvt__opts_load(&own, sizeof(own), o,
                     UVT__OPTS_MIN(uvt_options_t, teardown_grace_ms),
                     why) != 0) {
    fprintf(stderr,
            "uvtasks: uvt_registry_new: options refused: %s; call "
            "uvt_options_init()\n",
            why);
    return UV_EINVAL;
  }
  reg = uvt__calloc(1, sizeof(*reg));
  if (reg == NULL)
    return UV_ENOMEM;
  reg->loop = loop;
  reg->loop_thread = uv_thread_self();
  reg->options = own;
  uvt__list_init(&reg->tasks);
  uvt__list_init(&reg->unowned);
  uvt__list_init(&reg->agents);
  uvt__list_init(&reg->surfaces);
  uvt__list_init(&reg->listeners);
  uvt__list_init(&reg->dispatching);
  uvt__list_init(&reg->dispatch);
  uvt__list_init(&reg->deferred);
  uvt__list_init(&reg->agents_done);
  uvt__list_init(&reg->watchers);
  uvt__list_init(&reg->watch_dispatching);
  uvt__deadline_init(&reg->expired);
  reg->expired.sibling = &reg->expired;
  reg->expired.prev = &reg->expired;
  reg->changes = NULL;
  reg->changes_tail = &reg->changes;

  err = uvt__hub_new(reg, &reg->hub);
  if (err != 0) {
    uvt__free(reg);
    return err;
  }
  err = uv_async_init(loop, &reg->async, async_cb);
  if (err != 0) {
    uvt__hub_unref(reg->hub);
    uvt__free(reg);
    return err;
  }
  /* On Unix uv_timer_init cannot fail. */
  uv_timer_init(loop, &reg->timer);
  reg->deadlines_due = deadlines_due;
  uv_unref((uv_handle_t *)&reg->async);
  *out = reg;
  return 0;
}

uv_loop_t *uvt_registry_loop(const uvt_registry_t *reg) {
  return reg != NULL ? reg->loop : NULL;
}

void uvt_registry_metrics(const uvt_registry_t *reg, uvt_metrics_t *m) {
  if (reg == NULL || m == NULL)
    return;
  *m = reg->metrics;
  m->records = reg->records;
}

int uvt_registry_close(uvt_registry_t *reg, uvt_close_cb cb, void *data) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  struct uvt__link sweep;
  struct uvt__link *n;

  if (reg == NULL)
    return UV_EINVAL;
  if (reg->closing)
    return UVT_ECLOSING;
  /* From here on no listener runs, and starts and waits are refused. */
  reg->closing = 1;
  reg->close_cb = cb;
  reg->close_data = data;

  /* Collect first, then tear down: a producer hook run by the teardown may
   * drop other records.  A task already on an agent disposal's sweep (this
   * call came from a hook that sweep ran) is left to it. */
  uvt__list_init(&sweep);
  for (n = reg->tasks.next; n != &reg->tasks; n = n->next) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, all_link);
    if (!t->in_teardown && uvt__list_empty(&t->sweep_link))
      uvt__list_insert_tail(&sweep, &t->sweep_link);
  }
  while ((n = uvt__list_pop(&sweep)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, sweep_link);
    uvt__teardown_task(t, "tasks service disposed");
  }
  uvt__kick(reg);
  return 0;
}

static void free_kinds(uvt_registry_t *reg) {
  size_t i;
  if (reg->kinds_by_name.buckets == NULL)
    return;
  for (i = 0; i <= reg->kinds_by_name.mask; i++) {
    struct uvt__hentry *e = reg->kinds_by_name.buckets[i];
    while (e != NULL) {
      struct uvt__hentry *next = e->next;
      uvt__free(uvt__container_of(e, uvt__kind_t, hentry));
      e = next;
    }
  }
  uvt__index_free(&reg->kinds_by_name);
}

static void handle_closed(uv_handle_t *handle) {
  uvt_registry_t *reg = handle->data;
  uvt_close_cb cb;
  void *data;
  if (--reg->handles_closing > 0)
    return;
  cb = reg->close_cb;
  data = reg->close_data;
  if (cb != NULL)
    cb(data);
  uvt__free(reg);
}

static void maybe_finish_close(uvt_registry_t *reg) {
  struct uvt__link *n;
  if (!reg->closing || reg->handles_closing > 0)
    return;
  if (reg->records > 0 || reg->disposing_agents > 0 ||
      !uvt__list_empty(&reg->deferred) || !uvt__list_empty(&reg->dispatch) ||
      !uvt__list_empty(&reg->agents_done) || reg->changes != NULL ||
      reg->deadlines != NULL)
    return;
  /* Producer contexts (their threads and handles) close before ours. */
  if (uvt__ext_close_all(reg, maybe_finish_close) != 0)
    return;

  uvt__agents_detach_all(reg);
  while ((n = uvt__list_pop(&reg->surfaces)) != NULL) {
    uvt_surface_t *s = uvt__container_of(n, uvt_surface_t, link_);
    uvt__list_insert_tail(&reg->surfaces, n);
    uvt_surface_detach(s);
  }
  while ((n = uvt__list_pop(&reg->listeners)) != NULL) {
    uvt_listener_t *l = uvt__container_of(n, uvt_listener_t, link_);
    l->active_ = UVT__LISTENER_STOPPED;
  }
  while ((n = uvt__list_pop(&reg->watchers)) != NULL) {
    uvt_watch_t *w = uvt__container_of(n, uvt_watch_t, link_);
    w->active_ = UVT__WATCH_STOPPED;
  }
  uvt__index_free(&reg->tasks_by_id);
  uvt__index_free(&reg->agents_by_id);
  uvt__index_free(&reg->sessions_by_id);
  free_kinds(reg);

  uvt__hub_close(reg->hub);
  uvt__hub_unref(reg->hub);
  reg->hub = NULL;

  reg->handles_closing = 2;
  reg->async.data = reg;
  reg->timer.data = reg;
  uv_close((uv_handle_t *)&reg->async, handle_closed);
  uv_close((uv_handle_t *)&reg->timer, handle_closed);
}
