/* The portable build (meson -Dportable=true, docs/porting.md): the core,
 * the thread producer and the tool surface without the Linux-only files.
 * The process producer there is src/portable/no-process.c: every function
 * of uvtasks/process.h links, none starts a process (UV_ENOSYS), and the
 * tool surface over it answers process tools with an error result while
 * it lists, reads, waits for and kills the tasks other producers start. */
#include "test-util.h"

#include <stdio.h>
#include <string.h>

#include "uvtasks/process.h"
#include "uvtasks/thread.h"
#include "uvtasks/tools.h"

/* Thread bodies ------------------------------------------------------- */

static void say_hello(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  (void)arg;
  uvt_thread_append_output(ctx, out, "hello from a thread\n", 20);
  out->status = UVT_COMPLETED;
}

/* Runs until it is cancelled (a kill). */
static void run_until_killed(uvt_thread_ctx_t *ctx, void *arg,
                             uvt_outcome_t *out) {
  (void)arg;
  while (!uvt_thread_sleep(ctx, 60000))
    ;
  out->status = UVT_KILLED;
}

/* Tool calls ---------------------------------------------------------- */

typedef struct {
  uvt_tools_call_t req;
  int calls;
  int status;
  int is_error;
  char text[8192];
} rec_t;

static void rec_cb(uvt_tools_call_t *req, int status) {
  rec_t *r = req->data;
  size_t n = 0;
  r->calls++;
  r->status = status;
  r->is_error = req->is_error;
  if (req->text != NULL) {
    n = req->len < sizeof(r->text) - 1 ? req->len : sizeof(r->text) - 1;
    memcpy(r->text, req->text, n);
  }
  r->text[n] = '\0';
  uvt_tools_call_cleanup(req);
}

static int rec_done(void *arg) {
  return ((rec_t *)arg)->calls > 0;
}

static void call(fixture_t *f, uvt_tools_t *tools, rec_t *r,
                 uvt_agent_t *caller, const char *name,
                 const uvt_tools_args_t *args) {
  memset(r, 0, sizeof(*r));
  r->req.data = r;
  assert_int_equal(uvt_tools_call(tools, &r->req, caller, name, args, rec_cb),
                   0);
  assert_int_equal(r->calls, 0);
  fixture_run_until(f, rec_done, r);
  assert_int_equal(r->calls, 1);
  assert_int_equal(r->status, 0);
}

/* Tests --------------------------------------------------------------- */

/* Every function of uvtasks/process.h is there and none starts anything:
 * UV_ENOSYS, no record, no id used. */
static void test_process_producer_enosys(void **state) {
  fixture_t f;
  uvt_process_options_t po;
  uvt_process_read_t pr;
  uvt_process_peek_t pk;
  uvt_snapshot_t *list = NULL;
  uvt_metrics_t m;
  size_t n = 99, bytes = 0;
  int a, b, c;
  char id[UVT_ID_MAX] = "untouched";
  char line[64];
  (void)state;

  fixture_init(&f, NULL);
  memset(&po, 0xff, sizeof(po));
  uvt_process_options_init(&po);
  assert_int_equal(po.grace_ms, UVT_PROCESS_GRACE_MS);
  assert_int_equal(po.drain_ms, UVT_PROCESS_DRAIN_MS);
  assert_int_equal(po.output_cap_bytes, UVT_PROCESS_OUTPUT_CAP_BYTES);
  assert_null(po.command);
  assert_null(po.owner);
  assert_int_equal(po.size, sizeof(po)); /* */
  /* NULL: the functions take it (the macro needs a typed pointer). */
  uvt_process_options_init_size(NULL, sizeof(po));
  (uvt_process_options_init)(NULL);
  /* a struct not made by its _init is refused before ENOSYS. */
  {
    uvt_process_options_t bare;
    memset(&bare, 0, sizeof(bare));
    bare.command = "echo hi";
    assert_int_equal(uvt_process_start(f.reg, &bare, id), UV_EINVAL);
  }

  po.command = "echo hi";
  assert_int_equal(uvt_process_start(f.reg, &po, id), UV_ENOSYS);
  assert_string_equal(id, "untouched");
  assert_int_equal(uvt_process_start(NULL, &po, id), UV_EINVAL);
  assert_int_equal(uvt_process_start(f.reg, NULL, id), UV_EINVAL);
  assert_int_equal(uvt_list(f.reg, NULL, &list, &n), 0);
  assert_int_equal(n, 0);
  uvt_registry_metrics(f.reg, &m);
  assert_int_equal(m.started, 0);

  assert_int_equal(uvt_process_pid(f.reg, "bash-1", NULL), UV_ENOSYS);
  assert_int_equal(uvt_process_command_pid(f.reg, "bash-1", NULL), UV_ENOSYS);
  assert_int_equal(uvt_process_cgroups(f.reg, NULL), UV_ENOSYS);
  assert_int_equal(uvt_process_spawn_helper(f.reg, 1), UV_ENOSYS);
  assert_int_equal(uvt_process_leftovers(f.reg, "bash-1", NULL), UV_ENOSYS);
  assert_int_equal(uvt_process_signal(f.reg, "bash-1", NULL, 2), UV_ENOSYS);
  assert_int_equal(uvt_process_write(f.reg, "bash-1", NULL, "x", 1), UV_ENOSYS);
  assert_int_equal(uvt_process_close_stdin(f.reg, "bash-1", NULL), UV_ENOSYS);
  assert_int_equal(uvt_process_resize(f.reg, "bash-1", NULL, 80, 24),
                   UV_ENOSYS);
  assert_int_equal(uvt_process_read(f.reg, "bash-1", NULL, &pr), UV_ENOSYS);
  assert_int_equal(uvt_process_status(f.reg, "bash-1", NULL, &a, &b, &c),
                   UV_ENOSYS);
  assert_int_equal(uvt_process_peek(f.reg, "bash-1", NULL, &pk), UV_ENOSYS);
  assert_int_equal(
      uvt_process_last_line(f.reg, "bash-1", NULL, line, sizeof(line)),
      UV_ENOSYS);
  assert_int_equal(uvt_process_unread_bytes(f.reg, "bash-1", NULL, &bytes),
                   UV_ENOSYS);
  assert_null(uvt_process_cgroup_dir(f.reg));
  assert_int_equal(uvt_process_stop_all_now(), 0);
  memset(&pr, 0xff, sizeof(pr));
  uvt_process_read_cleanup(&pr);
  assert_null(pr.out);
  assert_int_equal(pr.out_len, 0);
  uvt_process_read_cleanup(NULL);
  fixture_close(&f);
}

static void detach_cb(uvt_tools_t *tools) {
  (*(int *)tools->data)++;
}

/* The tool surface over that producer: run_command and run_in_background
 * are tool errors that name ENOSYS; a thread task is listed, read, waited
 * for and killed through the tools as on Linux. */
static void test_tools_without_processes(void **state) {
  fixture_t f;
  uvt_tools_t tools;
  uvt_tools_options_t to;
  uvt_tools_args_t args;
  uvt_thread_options_t th;
  uvt_agent_t agent;
  rec_t r;
  char hello[UVT_ID_MAX], loop_id[UVT_ID_MAX];
  const char *ids[1];
  int detached = 0;
  (void)state;

  fixture_init(&f, NULL);
  memset(&tools, 0, sizeof(tools));
  memset(&agent, 0, sizeof(agent));
  uvt_tools_options_init(&to);
  assert_int_equal(uvt_tools_attach(f.reg, &tools, &to), 0);
  tools.data = &detached;
  assert_int_equal(uvt_agent_register(f.reg, &agent, "agent-a", "s1"), 0);
  assert_non_null(strstr(uvt_tools_schema_json(), "\"run_command\""));

  uvt_tools_args_init(&args);
  args.command = "echo hi";
  call(&f, &tools, &r, &agent, "run_command", &args);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "Not started"));
  assert_non_null(strstr(r.text, "ENOSYS"));
  call(&f, &tools, &r, &agent, "run_in_background", &args);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "ENOSYS"));

  uvt_thread_options_init(&th);
  th.owner = &agent;
  th.label = "greeting";
  assert_int_equal(uvt_thread_start(f.reg, &th, say_hello, NULL, hello), 0);
  th.label = "loop";
  assert_int_equal(
      uvt_thread_start(f.reg, &th, run_until_killed, NULL, loop_id), 0);

  uvt_tools_args_init(&args);
  call(&f, &tools, &r, &agent, "task_list", &args);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, hello));
  assert_non_null(strstr(r.text, loop_id));
  assert_non_null(strstr(r.text, "greeting"));

  uvt_tools_args_init(&args);
  args.task_id = hello;
  args.wait = 1;
  args.timeout_ms = 600000;
  call(&f, &tools, &r, &agent, "task_output", &args);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "hello from a thread"));
  assert_non_null(strstr(r.text, "[status: completed"));

  uvt_tools_args_init(&args);
  args.task_id = loop_id;
  call(&f, &tools, &r, &agent, "task_kill", &args);
  assert_int_equal(r.is_error, 0);
  uvt_tools_args_init(&args);
  ids[0] = loop_id;
  args.task_ids = ids;
  args.task_ids_len = 1;
  args.timeout_ms = 600000;
  call(&f, &tools, &r, &agent, "task_wait", &args);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "[status: killed"));

  /* Another session's task stays fenced (R-OWN-2). */
  uvt_tools_args_init(&args);
  args.task_id = hello;
  call(&f, &tools, &r, NULL, "task_output", &args);
  assert_int_equal(r.is_error, 1);

  assert_int_equal(uvt_tools_detach(&tools, detach_cb), 0);
  fixture_close(&f);
  assert_int_equal(detached, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_process_producer_enosys),
      cmocka_unit_test(test_tools_without_processes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
