/* The per-task states the tools keep between reads (M-TOOLS-7's filter
 * states, M-TOOLS-11's screens, M-TOOLS-17's spill records): each is kept
 * on its list of the tools with a callback of its owner's file, and one
 * watch on the registry, running only while some state is kept, tells
 * each state of its task's end and of its record's drop (then it goes).
 * The files that keep states call this one; it calls them back only
 * through their callbacks. */
#include "uvtasks/tools.h"

#include <string.h>

#include "tools-int.h"

/* Is any per-task state kept (the watch runs while one is)? */
static int states_kept(const uvt_tools_t *tools) {
  return !uvt__list_empty(&tools->carries_) ||
         !uvt__list_empty(&tools->screens_) ||
         !uvt__list_empty(&tools->spills_);
}

/* Tell the state of `id` on `list` (the first, as there is one per task). */
static void kept_tell(uvt_tools_t *tools, struct uvt__link *list,
                      const char *id, int dropped) {
  struct uvt__link *n;
  uvt__kept_t *k;

  for (n = list->next; n != list; n = n->next) {
    k = uvt__container_of(n, uvt__kept_t, link);
    if (strcmp(k->id, id) == 0) {
      k->cb(k, tools, dropped); /* may free k */
      return;
    }
  }
}

/* A dropped record will not be read again: its states go, and its spill
 * files with them (M-MCP-16); an ended task's files are not held open
 * (M-TOOLS-17).  The watch runs only while some state is kept. */
static void kept_watch_cb(uvt_watch_t *w, const uvt_snapshot_t *snap,
                          int dropped) {
  uvt_tools_t *tools = w->data;

  if (!dropped && !uvt_status_is_terminal(snap->status))
    return;
  kept_tell(tools, &tools->carries_, snap->id, dropped);
  kept_tell(tools, &tools->screens_, snap->id, dropped); /* M-TOOLS-11 */
  kept_tell(tools, &tools->spills_, snap->id, dropped);
  if (dropped && !states_kept(tools))
    uvt_watch_stop(&tools->watch_);
}

void uvt__tools_keep_state(uvt_tools_t *tools, struct uvt__link *list,
                           uvt__kept_t *k, const char *id, uvt__kept_cb cb) {
  k->id = id;
  k->cb = cb;
  if (!states_kept(tools)) {
    tools->watch_.data = tools;
    /* Without the watch (the registry is closing) the state is freed by
     * the task's last read or by detach. */
    uvt_watch_start(tools->registry, &tools->watch_, kept_watch_cb);
  }
  uvt__list_insert_tail(list, &k->link);
}

void uvt__tools_kept_gone(uvt_tools_t *tools) {
  if (!states_kept(tools))
    uvt_watch_stop(&tools->watch_);
}
