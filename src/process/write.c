/* A host's input to a running task (P-IN-1): uvt_process_write() and
 * uvt_process_close_stdin() find the task, check that it takes input
 * (enabled, not ended, not ending) and hand the bytes or the end to its
 * input (stdin.c).  The socket pair, the queue and the poll handle are
 * stdin.c's. */
#include "process-internal.h"

/* Can the task take input now?  0 or the error of P-IN-1. */
static int writable(const uvt__proc_t *p) {
  const uvt__stdin_t *in = &p->in;

  if (!in->enabled)
    return UV_EINVAL;
  if (in->broken || in->host_ended || !in->open || uvt__proc_ending(p))
    return UV_EPIPE;
  return 0;
}

int uvt_process_write(uvt_registry_t *reg, const char *id,
                      const uvt_agent_t *caller, const char *bytes,
                      size_t len) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__proc_t *p;
  uvt_task_t *t;
  int err;

  if (bytes == NULL && len > 0)
    return UV_EINVAL;
  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  err = writable(p);
  if (err != 0 || len == 0)
    return err;
  return uvt__stdin_write(p, bytes, len);
}

int uvt_process_close_stdin(uvt_registry_t *reg, const char *id,
                            const uvt_agent_t *caller) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__proc_t *p;
  uvt_task_t *t;
  int err;

  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  err = writable(p);
  if (err == UV_EINVAL)
    return err;
  if (err != 0)
    return 0; /* already over: nothing to end */
  return uvt__stdin_end(p);
}

size_t uvt__process_stdin_pending(uvt_registry_t *reg, const char *id) {
  uvt__proc_t *p;
  uvt_task_t *t;

  if (uvt__proc_lookup(reg, id, NULL, &t, &p) != 0)
    return 0;
  return p->in.pending;
}
