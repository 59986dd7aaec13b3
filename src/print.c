/* A human-readable dump of the registry for debugging (R-DUMP-1). */
#include <inttypes.h>
#include <stdio.h>

#include "uvt-internal.h"

static int print_task(FILE *fp, const uvt_task_t *t) {
  const struct uvt__link *n;
  size_t waits = 0;
  for (n = t->waits.next; n != &t->waits; n = n->next)
    if (uvt__container_of(n, const uvt_wait_t, link_)->state_ ==
        UVT__WAIT_PENDING)
      waits++;
  return fprintf(fp,
                 "  task %s kind=%s status=%s reported=%d owner=%s "
                 "session=%s waits=%zu label=\"%s\"%s%s%s%s\n",
                 uvt__task_id(t), uvt__task_kind(t), uvt_status_name(t->status),
                 t->reported ? 1 : 0,
                 t->owner != NULL && t->owner->id ? t->owner->id : "-",
                 t->owner_session != NULL ? t->owner_session : "-", waits,
                 uvt__task_label(t), t->detail ? " detail=\"" : "",
                 t->detail ? t->detail : "", t->detail ? "\"" : "",
                 t->in_teardown ? " (tearing down)" : "");
}

int uvt_registry_print(const uvt_registry_t *reg, FILE *fp) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  const struct uvt__link *n;
  int bad = 0;
  size_t count;

  if (reg == NULL || fp == NULL)
    return UV_EINVAL;
  bad |= fprintf(fp,
                 "uvtasks registry %p%s: %zu records, %" PRIu64
                 " live, %" PRIu64 " started\n",
                 (const void *)reg, reg->closing ? " (closing)" : "",
                 reg->records, reg->metrics.live, reg->metrics.started) < 0;
  bad |= fprintf(fp, "tasks:\n") < 0;
  for (n = reg->tasks.next; n != &reg->tasks; n = n->next)
    bad |= print_task(fp, uvt__container_of(n, const uvt_task_t, all_link)) < 0;
  bad |= fprintf(fp, "agents:\n") < 0;
  for (n = reg->agents.next; n != &reg->agents; n = n->next) {
    const uvt_agent_t *a = uvt__container_of(n, const uvt_agent_t, link_);
    const struct uvt__link *m;
    count = 0;
    for (m = a->tasks_.next; m != &a->tasks_; m = m->next)
      count++;
    bad |= fprintf(fp, "  agent %s session=%s tasks=%zu live=%u%s\n", a->id,
                   a->session, count, a->live_,
                   a->state_ == UVT__AGENT_DISPOSING ? " (disposing)" : "") < 0;
  }
  bad |= fprintf(fp, "surfaces:\n") < 0;
  for (n = reg->surfaces.next; n != &reg->surfaces; n = n->next) {
    const uvt_surface_t *s = uvt__container_of(n, const uvt_surface_t, link_);
    bad |= fprintf(fp, "  surface %s\n", s->name) < 0;
  }
  count = 0;
  for (n = reg->listeners.next; n != &reg->listeners; n = n->next)
    count++;
  bad |= fprintf(fp, "listeners: %zu\n", count) < 0;
  bad |= fprintf(fp, "pending waits:\n") < 0;
  for (n = reg->tasks.next; n != &reg->tasks; n = n->next) {
    const uvt_task_t *t = uvt__container_of(n, const uvt_task_t, all_link);
    const struct uvt__link *m;
    for (m = t->waits.next; m != &t->waits; m = m->next) {
      const uvt_wait_t *w = uvt__container_of(m, const uvt_wait_t, link_);
      if (w->state_ != UVT__WAIT_PENDING)
        continue; /* counted at settlement; its callback is due */
      bad |= fprintf(fp, "  wait %p on %s due at loop time %" PRIu64 " ms\n",
                     (const void *)w, uvt__task_id(t), w->deadline_.due_ms) < 0;
    }
  }
  return bad || fflush(fp) != 0 ? UV_EIO : 0;
}
