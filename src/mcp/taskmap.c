/* uvtasks-mcp: the pure parts of MCP Tasks (see taskmap.h). */
#include "taskmap.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "uvtasks/tools.h"

const char *mcp_task_status(uvt_status_t status, int cancelled) {
  if (cancelled)
    return "cancelled";
  switch (status) {
  case UVT_RUNNING:
  case UVT_STOPPING:
    return "working";
  case UVT_COMPLETED:
    return "completed";
  case UVT_KILLED:
    return "cancelled";
  case UVT_FAILED:
  default:
    return "failed";
  }
}

int mcp_task_status_terminal(const char *status) {
  return status != NULL &&
         (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
          strcmp(status, "cancelled") == 0);
}

int mcp_iso8601(int64_t epoch_ms, char *buf, size_t size) {
  struct tm tm;
  time_t secs;
  int64_t ms;
  int n;

  if (buf == NULL || size == 0)
    return -1;
  buf[0] = '\0';
  if (epoch_ms < 0)
    return -1;
  secs = (time_t)(epoch_ms / 1000);
  ms = epoch_ms % 1000;
  if (gmtime_r(&secs, &tm) == NULL || tm.tm_year + 1900 > 9999)
    return -1;
  n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
               tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
               tm.tm_min, tm.tm_sec, (int)ms);
  if (n < 0 || (size_t)n >= size) {
    buf[0] = '\0';
    return -1;
  }
  return 0;
}

uint64_t mcp_task_ttl(int given, double requested_ms, uint64_t max_ms) {
  if (!given || !(requested_ms >= 0) || requested_ms >= (double)max_ms)
    return max_ms;
  return (uint64_t)requested_ms;
}

const char *mcp_tool_task_support(const char *tool) {
  /* The tools are the tool surface's (uvt_tools_has); of them only
   * run_command may run as a task. */
  if (tool == NULL || !uvt_tools_has(tool))
    return NULL;
  return strcmp(tool, UVT_TOOL_RUN_COMMAND) == 0 ? "optional" : "forbidden";
}

int mcp_tool_starts(const char *tool) {
  return tool != NULL && (strcmp(tool, UVT_TOOL_RUN_IN_BACKGROUND) == 0 ||
                          strcmp(tool, UVT_TOOL_RUN_COMMAND) == 0);
}

int mcp_version_has_tasks(const char *version) {
  return version != NULL && strcmp(version, MCP_TASKS_VERSION) == 0;
}

void mcp_cursor_make(uint64_t seq, char buf[MCP_CURSOR_MAX]) {
  snprintf(buf, MCP_CURSOR_MAX, "after-%llu", (unsigned long long)seq);
}

int mcp_cursor_parse(const char *cursor, uint64_t *seq) {
  const char *p;
  uint64_t v = 0;

  if (cursor == NULL || strncmp(cursor, "after-", 6) != 0)
    return -1;
  p = cursor + 6;
  if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
    return -1;
  for (; *p != '\0'; p++) {
    if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
      return -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  *seq = v;
  return 0;
}
