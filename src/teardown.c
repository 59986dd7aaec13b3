/* Teardown: what agent disposal (R-AGENT-1..4) and registry disposal
 * (R-CLOSE-1) do to each task, bounded by options.teardown_grace_ms.
 *
 * Per task: mark it reported; if live, cancel it and start its grace
 * period; a cancel that fails, or a grace period that runs out, force-fails
 * the record.  Once terminal and dispatched, ask the producer to stop what
 * the work left behind (quiesce, P-KILL-4), then drop the record. */
#include <stdio.h>
#include <string.h>

#include "uvt-internal.h"

static char *cancel_failed_detail(int err) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "cancel failed during teardown; work may be orphaned: %s",
           uvt_err_name(err));
  return uvt__strdup(buf);
}

static char *grace_detail(unsigned long long elapsed_ms) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "did not stop within %llu ms of cancel; work may be orphaned",
           elapsed_ms);
  return uvt__strdup(buf);
}

/* R-TIME-1: what really elapsed since the teardown began to wait (at least
 * the grace, more when the loop was busy when it ran out). */
static unsigned long long waited_ms(const uvt_task_t *t) {
  return (unsigned long long)((uv_hrtime() - t->teardown_ns) / 1000000);
}

void uvt__force_fail(uvt_task_t *t, char *detail, const char *fallback) {
  t->force_failed = 1;
  t->reg->metrics.force_failed++;
  if (detail != NULL)
    uvt__task_record(t, UVT_FAILED, detail, 0);
  else
    uvt__task_record(t, UVT_FAILED, (char *)fallback, 1);
  uvt__dispatch_later(t);
}

/* R-AGENT-3: never deadlock disposal on a producer that cannot stop. */
void uvt__teardown_cancel_failed(uvt_task_t *t, int err) {
  uvt__log(t->reg, UVT_LOG_WARN,
           "task %s (kind %s, label \"%s\"): cancel failed during "
           "teardown (%s); its work may be orphaned",
           uvt__task_id(t), uvt__task_kind(t), uvt__task_label(t),
           uvt_err_name(err));
  if (!uvt__task_live(t))
    return; /* the log callback ended it some other way */
  uvt__force_fail(t, cancel_failed_detail(err),
                  "cancel failed during teardown; work may be orphaned");
}

/* Every cancel of ours goes through here, and the hook is called by
 * producer.c, never twice at once for one task (R-REENTER-1).  A teardown that
 * begins inside the hook (the hook disposed its owner, or closed the
 * registry) does not call it again: that running call is the teardown's
 * cancel too, and if it fails the teardown's rule applies (R-AGENT-3) once
 * it has returned.  A kill of the task from inside the hook is refused in
 * uvt_kill. */
int uvt__task_cancel(uvt_task_t *t, const char *reason) {
  int joined;
  int err = uvt__hook_cancel(t, reason, &joined);
  if (joined && err != 0 && uvt__task_live(t))
    uvt__teardown_cancel_failed(t, err);
  return err;
}

void uvt__teardown_task(uvt_task_t *t, const char *reason) {
  uvt_registry_t *reg = t->reg;
  int err;

  if (t->in_teardown || t->dropped)
    return;
  t->in_teardown = 1;
  t->reported = 1;
  if (!uvt__task_live(t)) {
    uvt__teardown_after_terminal(t);
    return;
  }
  if (t->kill_reason == NULL)
    t->kill_reason = reason; /* static text, not owned */
  if (t->status == UVT_RUNNING) {
    t->status = UVT_STOPPING;
    uvt__feed(t, UVT__CHANGE_STOPPING);
  }
  t->teardown_ns = uv_hrtime(); /* the grace counts from the cancel */
  if (!atomic_load(&t->settle_called)) {
    err = uvt__task_cancel(t, reason);
    if (err != 0) {
      uvt__teardown_cancel_failed(t, err);
      return;
    }
  }
  if (uvt__task_live(t) && reg->options.teardown_grace_ms > 0)
    uvt__deadline_add(reg, &t->teardown_deadline, UVT__DEADLINE_TEARDOWN,
                      reg->options.teardown_grace_ms);
}

/* ---- Quiescence of a terminal task (P-KILL-4, P-KILL-6).  The producer's
 * quiesce hook stops what the work left behind; 1 means "stopping, I will
 * call uvt_task_quiescent()".  A kill of the ended task starts it and does
 * not wait; a teardown (agent or registry disposal, forget) waits for a
 * quiesce in progress, bounded by teardown_grace_ms, instead of calling
 * the hook again. */

/* Call the hook unless a quiesce is in progress; returns 1 while one is. */
static int quiesce_call(uvt_task_t *t) {
  int r;
  if (t->quiesce_pending)
    return 1;
  /* A force-failed producer has not settled: it is still on its own path
   * to quiescence, and asking it to quiesce would race that. */
  if (t->force_failed || t->hooks.quiesce == NULL || t->release_called ||
      t->dropped)
    return 0;
  t->quiesce_pending = 1;
  r = uvt__hook_quiesce(t);
  if (r != 1)
    t->quiesce_pending = 0; /* 0, or uvt_task_quiescent() inside the hook */
  return t->quiesce_pending;
}

/* A teardown waits for the quiesce in progress: bound the wait. */
static void quiesce_wait(uvt_task_t *t) {
  uvt_registry_t *reg = t->reg;
  if (!uvt__deadline_armed(&t->teardown_deadline) &&
      reg->options.teardown_grace_ms > 0) {
    t->teardown_ns = uv_hrtime();
    uvt__deadline_add(reg, &t->teardown_deadline, UVT__DEADLINE_TEARDOWN,
                      reg->options.teardown_grace_ms);
  }
}

/* No quiesce in progress any more: a teardown that waited drops now. */
static void quiesce_done(uvt_task_t *t) {
  if (t->in_teardown && t->dispatched && !t->dropped)
    uvt__drop(t);
}

void uvt__teardown_after_terminal(uvt_task_t *t) {
  if (!t->in_teardown || t->dropped || !t->dispatched)
    return;
  if (t->quiesce_pending || quiesce_call(t)) {
    quiesce_wait(t);
    return;
  }
  uvt__drop(t);
}

/* P-KILL-6: a kill of the ended task asks the producer to stop what its
 * work left running; the kill does not wait.  With a stop already under
 * way, the hook is asked again, which means "now" (R-KILL-3's second
 * cancel, for what an ended task left: S-9, a shutdown's clock). */
void uvt__quiesce_on_kill(uvt_task_t *t) {
  if (t->quiesce_pending) {
    if (!t->force_failed && t->hooks.quiesce != NULL && !t->release_called &&
        !t->dropped) {
      uvt__task_pin(t);
      if (uvt__hook_quiesce(t) == 0 && t->quiesce_pending) {
        uvt_task_quiescent(t); /* nothing was left after all */
      } else if (!t->quiesce_pending) {
        /* uvt_task_quiescent() from inside the hook. */
        uvt__deadline_remove(t->reg, &t->teardown_deadline);
        quiesce_done(t);
      }
      uvt__task_unpin(t);
    }
    return;
  }
  uvt__task_pin(t);
  if (quiesce_call(t)) {
    if (t->in_teardown && t->dispatched)
      quiesce_wait(t); /* a teardown began inside the hook */
  } else {
    quiesce_done(t);
  }
  uvt__task_unpin(t);
}

void uvt_task_quiescent(uvt_task_t *t) {
  if (t == NULL || !t->quiesce_pending)
    return;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY_VOID(t->reg);
  t->quiesce_pending = 0;
  if (uvt__in_hook(t, UVT__HOOK_QUIESCE))
    return; /* the hook's caller goes on from here */
  uvt__deadline_remove(t->reg, &t->teardown_deadline);
  quiesce_done(t);
}

void uvt__teardown_expired(uvt_task_t *t) {
  uvt_registry_t *reg = t->reg;
  unsigned long long waited = waited_ms(t);
  if (uvt__task_live(t) && atomic_load(&t->settle_called)) {
    /* The producer stopped in time: its outcome waits in the settle queue
     * for the loop to drain it, which ends the teardown as usual. */
  } else if (uvt__task_live(t)) {
    /* R-AGENT-4 */
    uvt__log(reg, UVT_LOG_WARN,
             "task %s (kind %s, label \"%s\") did not stop within %llu ms of "
             "cancel; its work may be orphaned",
             uvt__task_id(t), uvt__task_kind(t), uvt__task_label(t), waited);
    if (uvt__task_live(t))
      uvt__force_fail(t, grace_detail(waited),
                      "did not stop in time after cancel; work may be "
                      "orphaned");
  } else if (t->quiesce_pending) {
    uvt__log(reg, UVT_LOG_WARN,
             "task %s (kind %s, label \"%s\"): what its work left behind did "
             "not stop within %llu ms; it may be orphaned",
             uvt__task_id(t), uvt__task_kind(t), uvt__task_label(t), waited);
    t->quiesce_pending = 0;
    if (!t->dropped)
      uvt__drop(t);
  }
}
