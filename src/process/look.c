/* Public looks at a process task that consume nothing (include/uvtasks/
 * process.h): the surfaces over the library (the tool surface, the MCP
 * server) see what a task holds and how it was started through these,
 * not through the producer's records.  Each is a thin wrapper over the
 * producer's own look, behind the loop-thread check and the registry's
 * fence (R-OWN-2). */
#include <stdio.h>
#include <string.h>

#include "process-internal.h"

int uvt_process_peek(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uvt_process_peek_t *out) {
  uvt__peek_t pk;
  uvt_task_t *t;
  uvt__proc_t *p;
  int err;
  int i;

  if (out != NULL)
    memset(out, 0, sizeof(*out));
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || id == NULL || out == NULL)
    return UV_EINVAL;
  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err == 0)
    err = uvt__process_peek(reg, id, caller, &pk);
  if (err != 0)
    return err;
  for (i = 0; i < 2; i++) {
    out->unread[i] = pk.unread[i];
    out->dropped[i] = pk.dropped[i];
    out->tail_len[i] = pk.tail_len[i];
    memcpy(out->tail[i], pk.tail[i], pk.tail_len[i]);
  }
  out->tty = p->pty ? 1 : 0;
  out->stdin_pipe = !p->pty && p->in.enabled ? 1 : 0;
  return 0;
}

int uvt_process_last_line(uvt_registry_t *reg, const char *id,
                          const uvt_agent_t *caller, char *buf, size_t size) {
  if (buf != NULL && size > 0)
    buf[0] = '\0';
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || id == NULL)
    return UV_EINVAL;
  return uvt__process_last_line(reg, id, caller, buf, size);
}

int uvt_process_unread_bytes(uvt_registry_t *reg, const char *id,
                             const uvt_agent_t *caller, size_t *bytes) {
  uvt__peek_t pk;
  uvt_task_t *t;
  const char *text;
  size_t len;
  size_t n = 0;
  int err;

  if (bytes != NULL)
    *bytes = 0;
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || id == NULL || bytes == NULL)
    return UV_EINVAL;
  err = uvt_task_lookup(reg, id, caller, &t);
  if (err != 0)
    return err;
  /* What the record kept at the task's end and no read took yet (any
   * producer's task). */
  if (uvt_task_remainder_peek(t, &text, &len) == 1)
    n += len;
  /* And, for a process task, what its streams still hold. */
  if (uvt__process_peek(reg, id, caller, &pk) == 0)
    n += pk.unread[0] + pk.unread[1];
  *bytes = n;
  return 0;
}

int uvt_process_reading(uvt_registry_t *reg, const char *id,
                        const uvt_agent_t *caller) {
  uvt_task_t *t;
  uvt__proc_t *p;
  int err;

  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || id == NULL)
    return UV_EINVAL;
  err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  return uvt__proc_lingering(p);
}

int uvt_process_sandbox_why(uvt_registry_t *reg, char *buf, size_t size) {
  uvt__procs_t *ps;

  if (buf != NULL && size > 0)
    buf[0] = '\0';
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  if (reg == NULL || buf == NULL || size == 0)
    return UV_EINVAL;
  if (uvt__procs_get(reg, &ps) == 0)
    snprintf(buf, size, "%s", ps->envc.sb_why);
  return 0;
}

const char *uvt_process_cgroup_dir(uvt_registry_t *reg) {
  uvt__procs_t *ps;

  if (reg == NULL || uvt__procs_get(reg, &ps) != 0)
    return NULL;
  return ps->cgroot.contain ? ps->cgroot.path[UVT__CG_V2] : NULL;
}
