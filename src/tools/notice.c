/* Completion notices (M-TOOLS-2): a task of an agent ended without the
 * agent seeing it end (the tools' listener, a wait given up after the
 * task settled): one line naming it and its status, handed to the host's
 * notice callback. */
#include "uvtasks/tools.h"

#include "tools-int.h"

static void tools_notice(uvt_tools_t *tools, const uvt_snapshot_t *snap,
                         uvt_agent_t *owner) {
  uvt__text_t t;
  char *line;

  if (tools->notice_cb_ == NULL)
    return;
  uvt__text_init(&t);
  uvt__text_str(&t, "Task ");
  uvt__text_oneline(&t, snap->id, UVT_ID_MAX);
  uvt__text_str(&t, " (");
  uvt__text_oneline(&t, snap->kind, UVT_ID_MAX);
  uvt__text_str(&t, ": ");
  uvt__text_oneline(&t, snap->label, TOOLS_LABEL_MAX);
  uvt__text_str(&t, ") ended; task_output shows its output. ");
  uvt__tools_status(tools, owner, &t, snap, UVT__DETAIL_LIVE);
  line = uvt__text_take(&t);
  /* Out of memory: the notice cannot be built; there is nowhere to say so
   * but the host's notice, which needs the memory too. */
  if (line == NULL)
    return;
  tools->notice_cb_(tools, owner, line);
  uvt__tools_free(line);
}

void uvt__tools_done_cb(uvt_listener_t *l, const uvt_snapshot_t *snap,
                        uvt_agent_t *owner) {
  uvt_tools_t *tools = l->data;

  /* Unowned tasks have nobody to tell; reported ones were seen ending. */
  if (tools->state_ != TOOLS_ATTACHED || owner == NULL || snap->reported)
    return;
  tools_notice(tools, snap, owner);
}

void uvt__tools_notice(uvt_tools_t *tools, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner) {
  if (tools->state_ == TOOLS_ATTACHED)
    tools_notice(tools, snap, owner);
}
