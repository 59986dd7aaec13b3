/* P-LEFT-1 in the tools' texts: an ended task whose session still has
 * processes says how many are running now, and how to stop them, in
 * every status line and task_list line.  The detail the task settled with
 * names the count at its end ("exit code: 0; 2 processes still running",
 * process.h); that part is replaced here by the count of this moment. */
#include <stdio.h>
#include <string.h>

#include "tools-int.h"
#include "uvtasks/process.h"

/* The length of `detail` without a trailing "; N process(es) still
 * running" (the count at the end), or strlen(detail) if it has none. */
static size_t without_count(const char *detail) {
  const char *p = strrchr(detail, ';');
  const char *q;

  if (p == NULL || p[1] != ' ')
    return strlen(detail);
  q = p + 2;
  if (*q < '0' || *q > '9')
    return strlen(detail);
  while (*q >= '0' && *q <= '9')
    q++;
  if (strcmp(q, " process still running") != 0 &&
      strcmp(q, " processes still running") != 0)
    return strlen(detail);
  return (size_t)(p - detail);
}

void uvt__tools_detail(uvt_tools_t *tools, const uvt_agent_t *caller,
                       uvt__text_t *t, const uvt_snapshot_t *snap, int mode,
                       size_t max_bytes) {
  char base[512];
  size_t len;
  int left = -1;
  int reading;

  if (snap->detail == NULL)
    return;
  len = without_count(snap->detail);
  if (mode == UVT__DETAIL_AS_IS || len == strlen(snap->detail) ||
      !uvt_status_is_terminal(snap->status)) {
    uvt__text_oneline(t, snap->detail, max_bytes);
    if (mode != UVT__DETAIL_LIVE || !uvt_status_is_terminal(snap->status))
      return;
  } else {
    if (len >= sizeof(base))
      len = sizeof(base) - 1;
    memcpy(base, snap->detail, len);
    base[len] = '\0';
    uvt__text_oneline(t, base, max_bytes);
    if (mode == UVT__DETAIL_WITHOUT_COUNT)
      return;
  }
  /* The count now (a pass over /proc unless the session is known empty;
   * an error, for a task that is not a process task, says nothing). */
  left = uvt_process_leftovers(tools->registry, snap->id, caller);
  /* P-OUT-6: their output is kept, and the model should know it. */
  reading =
      left >= 0 && uvt_process_reading(tools->registry, snap->id, caller) == 1;
  if (left > 0)
    uvt__text_printf(t, "; %d process%s still running%s; task_kill %s stops %s",
                     left, left == 1 ? "" : "es",
                     reading ? " (their output is still read)" : "", snap->id,
                     left == 1 ? "it" : "them");
  else if (reading)
    /* Held by a process that left the session (setsid, a daemon). */
    uvt__text_printf(t,
                     "; a process it started still holds its output, which "
                     "is still read; task_kill %s closes it",
                     snap->id);
  else if (left == 0 && len != strlen(snap->detail))
    /* Without cgroups the session is all that is seen: a member that
     * called setsid() is out of sight, not necessarily ended. */
    uvt__text_str(t, uvt_process_cgroup_dir(tools->registry) != NULL
                         ? "; what it left running has ended"
                         : "; what it left running has ended or left its "
                           "session");
}

void uvt__tools_status(uvt_tools_t *tools, const uvt_agent_t *caller,
                       uvt__text_t *t, const uvt_snapshot_t *snap, int mode) {
  uvt__text_str(t, "[status: ");
  uvt__text_str(t, uvt_status_name(snap->status));
  if (snap->detail != NULL && snap->detail[0] != '\0') {
    uvt__text_str(t, ", ");
    uvt__tools_detail(tools, caller, t, snap, mode, 400);
  }
  uvt__text_str(t, "]");
}
