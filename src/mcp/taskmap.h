/* uvtasks-mcp: the pure parts of MCP Tasks (2025-11-25) -- how a registry
 * status reads as a task status, timestamps, ttl grants, cursors and which
 * tools may run as tasks.  No I/O, no JSON: unit-tested on their own
 * (test/test-mcptasks.c). */
#ifndef UVTASKS_MCP_TASKMAP_H
#define UVTASKS_MCP_TASKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "uvtasks.h"

/* The protocol revision that has Tasks. */
#define MCP_TASKS_VERSION "2025-11-25"

/* The pollInterval hint of every task, in milliseconds. */
#define MCP_TASK_POLL_MS 1000

/* Default of --max-task-ttl-ms: the longest ttl granted (and the ttl of a
 * task whose request names none). */
#define MCP_TASK_TTL_MAX_DEFAULT_MS 3600000

/* Default of --tasks-page-size: tasks per tasks/list page. */
#define MCP_TASKS_PAGE_DEFAULT 50

/* Room for "2026-11-29T09:32:09.123Z" and its NUL. */
#define MCP_ISO8601_MAX 32

/* Room for a cursor and its NUL. */
#define MCP_CURSOR_MAX 32

/* The MCP task status of a registry task: running and stopping are
 * "working", completed "completed", failed "failed", killed "cancelled";
 * once a tasks/cancel was accepted (`cancelled` nonzero) it is "cancelled"
 * whatever the registry says, as the spec wants a cancelled task to stay
 * cancelled.  A value outside the set reads "failed". */
const char *mcp_task_status(uvt_status_t status, int cancelled);

/* Nonzero for "completed", "failed" and "cancelled". */
int mcp_task_status_terminal(const char *status);

/* `epoch_ms` as an ISO 8601 / RFC 3339 UTC timestamp with milliseconds,
 * "2026-11-29T09:32:09.123Z".  Returns 0, or -1 (buf holds "") if the time
 * cannot be shown or `size` is too small. */
int mcp_iso8601(int64_t epoch_ms, char *buf, size_t size);

/* The ttl granted, in milliseconds: the requested one (`given` nonzero;
 * `requested_ms` >= 0, fractions dropped) capped at `max_ms`, or `max_ms`
 * when none was requested. */
uint64_t mcp_task_ttl(int given, double requested_ms, uint64_t max_ms);

/* execution.taskSupport of a tool: "optional" for run_command, "forbidden"
 * for the other tools, NULL for a name that is no tool. */
const char *mcp_tool_task_support(const char *tool);
/* Nonzero if `tool` (a name of the tool surface) starts a task
 * (run_in_background, run_command): such a call is held against
 * --max-tasks (P-LEFT-1), and the sandbox's note and the limits go into
 * its description (S-4, L-LIM-3). */
int mcp_tool_starts(const char *tool);

/* Nonzero if the negotiated protocol revision `version` has Tasks. */
int mcp_version_has_tasks(const char *version);

/* The tasks/list cursor after the task numbered `seq`, and back.  Parse
 * returns 0, or -1 for a text that no page of ours produced. */
void mcp_cursor_make(uint64_t seq, char buf[MCP_CURSOR_MAX]);
int mcp_cursor_parse(const char *cursor, uint64_t *seq);

#endif
