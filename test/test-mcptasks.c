/* The pure parts of uvtasks-mcp's MCP Tasks (src/mcp/taskmap.c): how a
 * registry status reads as an MCP task status, timestamps, ttl grants,
 * cursors, which tools run as tasks and which revision has Tasks.  No
 * registry is involved, so there is nothing to close. */
#include "test-util.h"

#include <string.h>

#include "mcp/taskmap.h"

/* M-TASKS-1: running and stopping are working, completed completed, failed
 * failed, killed cancelled; an accepted tasks/cancel is cancelled whatever
 * the registry says next. */
static void test_status_mapping(void **state) {
  (void)state;
  assert_string_equal(mcp_task_status(UVT_RUNNING, 0), "working");
  assert_string_equal(mcp_task_status(UVT_STOPPING, 0), "working");
  assert_string_equal(mcp_task_status(UVT_COMPLETED, 0), "completed");
  assert_string_equal(mcp_task_status(UVT_FAILED, 0), "failed");
  assert_string_equal(mcp_task_status(UVT_KILLED, 0), "cancelled");
  assert_string_equal(mcp_task_status((uvt_status_t)42, 0), "failed");
  assert_string_equal(mcp_task_status(UVT_RUNNING, 1), "cancelled");
  assert_string_equal(mcp_task_status(UVT_STOPPING, 1), "cancelled");
  assert_string_equal(mcp_task_status(UVT_COMPLETED, 1), "cancelled");
  assert_string_equal(mcp_task_status(UVT_FAILED, 1), "cancelled");

  assert_false(mcp_task_status_terminal("working"));
  assert_false(mcp_task_status_terminal("input_required"));
  assert_false(mcp_task_status_terminal(NULL));
  assert_true(mcp_task_status_terminal("completed"));
  assert_true(mcp_task_status_terminal("failed"));
  assert_true(mcp_task_status_terminal("cancelled"));
}

/* M-TASKS-1: createdAt and lastUpdatedAt are ISO 8601 UTC with
 * milliseconds. */
static void test_iso8601(void **state) {
  char buf[MCP_ISO8601_MAX];
  char small[10];

  (void)state;
  assert_int_equal(mcp_iso8601(0, buf, sizeof(buf)), 0);
  assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
  assert_int_equal(mcp_iso8601(1764063000123LL, buf, sizeof(buf)), 0);
  assert_string_equal(buf, "2025-11-25T09:30:00.123Z");
  assert_int_equal(mcp_iso8601(-1, buf, sizeof(buf)), -1);
  assert_string_equal(buf, "");
  assert_int_equal(mcp_iso8601(0, small, sizeof(small)), -1);
  assert_string_equal(small, "");
  assert_int_equal(mcp_iso8601(0, NULL, 0), -1);
}

/* M-TASKS-2: the requested ttl is granted up to the server's maximum; no
 * request gets the maximum. */
static void test_ttl_grant(void **state) {
  (void)state;
  assert_int_equal(mcp_task_ttl(0, 0, 3600000), 3600000);
  assert_int_equal(mcp_task_ttl(1, 500, 3600000), 500);
  assert_int_equal(mcp_task_ttl(1, 500.9, 3600000), 500);
  assert_int_equal(mcp_task_ttl(1, 0, 3600000), 0);
  assert_int_equal(mcp_task_ttl(1, 3600000, 3600000), 3600000);
  assert_int_equal(mcp_task_ttl(1, 1e300, 3600000), 3600000);
  assert_int_equal(mcp_task_ttl(1, -5, 1000), 1000);
}

/* M-TASKS-3: run_command may run as a task, the other tools may not; only
 * 2025-11-25 has Tasks. */
static void test_task_support(void **state) {
  (void)state;
  assert_string_equal(mcp_tool_task_support("run_command"), "optional");
  assert_string_equal(mcp_tool_task_support("run_in_background"), "forbidden");
  assert_string_equal(mcp_tool_task_support("task_output"), "forbidden");
  assert_string_equal(mcp_tool_task_support("task_list"), "forbidden");
  assert_string_equal(mcp_tool_task_support("task_kill"), "forbidden");
  assert_string_equal(mcp_tool_task_support("write_stdin"), "forbidden");
  assert_null(mcp_tool_task_support("bash"));
  assert_null(mcp_tool_task_support(NULL));

  /* P-LEFT-1, S-4: the tools that start a task (held against --max-tasks,
   * described with the sandbox and the limits). */
  assert_true(mcp_tool_starts("run_in_background"));
  assert_true(mcp_tool_starts("run_command"));
  assert_false(mcp_tool_starts("task_output"));
  assert_false(mcp_tool_starts("write_stdin"));
  assert_false(mcp_tool_starts("submit_job"));
  assert_false(mcp_tool_starts(NULL));

  assert_true(mcp_version_has_tasks("2025-11-25"));
  assert_false(mcp_version_has_tasks("2025-06-18"));
  assert_false(mcp_version_has_tasks("2025-03-26"));
  assert_false(mcp_version_has_tasks("2024-11-05"));
  assert_false(mcp_version_has_tasks(NULL));
}

/* M-TASKS-4: tasks/list cursors round-trip; anything else is refused. */
static void test_cursor(void **state) {
  char buf[MCP_CURSOR_MAX];
  uint64_t seq = 0;

  (void)state;
  mcp_cursor_make(7, buf);
  assert_int_equal(mcp_cursor_parse(buf, &seq), 0);
  assert_int_equal(seq, 7);
  mcp_cursor_make(UINT64_MAX, buf);
  assert_int_equal(mcp_cursor_parse(buf, &seq), 0);
  assert_true(seq == UINT64_MAX);
  assert_int_equal(mcp_cursor_parse("after-0", &seq), 0);
  assert_int_equal(seq, 0);
  assert_int_equal(mcp_cursor_parse("", &seq), -1);
  assert_int_equal(mcp_cursor_parse("after-", &seq), -1);
  assert_int_equal(mcp_cursor_parse("after-01", &seq), -1);
  assert_int_equal(mcp_cursor_parse("after-1x", &seq), -1);
  assert_int_equal(mcp_cursor_parse("after--1", &seq), -1);
  assert_int_equal(mcp_cursor_parse("after-99999999999999999999", &seq), -1);
  assert_int_equal(mcp_cursor_parse("bogus", &seq), -1);
  assert_int_equal(mcp_cursor_parse(NULL, &seq), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_mapping),
      cmocka_unit_test(test_iso8601),
      cmocka_unit_test(test_ttl_grant),
      cmocka_unit_test(test_task_support),
      cmocka_unit_test(test_cursor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
