/* The model-facing tool surface (contract §5: the tools table, M-TOOLS-1..3).
 * Fake producers where no process is needed; the process producer for
 * run_in_background. */
#include "test-util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "process/process-internal.h"
#include "tools/tools-int.h"
#include "uvtasks/process.h"
#include "uvtasks/tools.h"

/* A tools fixture: registry (no fixture surface, so the tools' surface is
 * the only one), agent A in session s1, agent B in session s2, and the
 * tools with a notice recorder. */
typedef struct {
  fixture_t f;
  uvt_tools_t tools;
  uvt_agent_t a;
  uvt_agent_t b;
  int notices;
  uvt_agent_t *notice_owner;
  char notice[1024];
  int detached;
} tfix_t;

/* One call's record.  The text is copied by its length (it may hold NUL
 * bytes, M-MCP-8), cut to fit and NUL-terminated. */
typedef struct {
  uvt_tools_call_t req;
  int calls;
  int status;
  int is_error;
  size_t len;
  char text[40000];
} rec_t;

static void notice_cb(uvt_tools_t *tools, uvt_agent_t *owner,
                      const char *text) {
  tfix_t *t = tools->data;
  t->notices++;
  t->notice_owner = owner;
  snprintf(t->notice, sizeof(t->notice), "%s", text);
}

static void detach_cb(uvt_tools_t *tools) {
  tfix_t *t = tools->data;
  t->detached++;
}

static void tfix_init_opts(tfix_t *t, const uvt_options_t *o,
                           const uvt_tools_options_t *to_in) {
  uvt_tools_options_t to;

  memset(t, 0, sizeof(*t));
  fixture_init(&t->f, o);
  uvt_surface_detach(&t->f.surface);
  if (to_in != NULL)
    to = *to_in;
  else
    uvt_tools_options_init(&to);
  to.notice_cb = notice_cb;
  assert_int_equal(uvt_tools_attach(t->f.reg, &t->tools, &to), 0);
  t->tools.data = t;
  assert_int_equal(uvt_agent_register(t->f.reg, &t->a, "agent-a", "s1"), 0);
  assert_int_equal(uvt_agent_register(t->f.reg, &t->b, "agent-b", "s2"), 0);
}

static void tfix_init(tfix_t *t) {
  tfix_init_opts(t, NULL, NULL);
}

static void tfix_close(tfix_t *t) {
  assert_int_equal(uvt_tools_detach(&t->tools, detach_cb), 0);
  fixture_close(&t->f);
  assert_int_equal(t->detached, 1);
}

static void rec_cb(uvt_tools_call_t *req, int status) {
  rec_t *r = req->data;
  r->calls++;
  r->status = status;
  r->is_error = req->is_error;
  r->len = 0;
  if (req->text != NULL) {
    /* The text is NUL-terminated, and len is its length. */
    r->len = req->text[req->len] == '\0' ? req->len : (size_t)-1;
    memcpy(r->text, req->text,
           req->len < sizeof(r->text) ? req->len : sizeof(r->text) - 1);
    r->text[req->len < sizeof(r->text) ? req->len : sizeof(r->text) - 1] = '\0';
  } else {
    r->text[0] = '\0';
  }
  uvt_tools_call_cleanup(req);
}

/* The spawner reported bash-1's pid to the loop.  Its output alone does
 * not say so: the child may print before the spawner's answer is in. */
static int bash1_spawned(void *arg) {
  tfix_t *t = arg;
  return uvt_process_pid(t->f.reg, "bash-1", &t->a) > 0;
}

static int rec_done(void *arg) {
  rec_t *r = arg;
  return r->calls > 0;
}

/* Start a call, check the callback did not run inside it. */
static void call_start(tfix_t *t, rec_t *r, uvt_agent_t *caller,
                       const char *name, const uvt_tools_args_t *args) {
  memset(r, 0, sizeof(*r));
  r->req.data = r;
  assert_int_equal(
      uvt_tools_call(&t->tools, &r->req, caller, name, args, rec_cb), 0);
  assert_int_equal(r->calls, 0);
}

/* Call and run the loop until the result arrives. */
static void call(tfix_t *t, rec_t *r, uvt_agent_t *caller, const char *name,
                 const uvt_tools_args_t *args) {
  call_start(t, r, caller, name, args);
  fixture_run_until(&t->f, rec_done, r);
  assert_int_equal(r->calls, 1);
}

static uvt_tools_args_t args_id(const char *id) {
  uvt_tools_args_t a;
  uvt_tools_args_init(&a);
  a.task_id = id;
  return a;
}

/* Run until the (unowned or any-session-visible via owner) task ends. */
static void run_until_settled(tfix_t *t, uvt_agent_t *owner, const char *id) {
  uvt_snapshot_t s;
  int idle_turns = 0;
  for (;;) {
    assert_int_equal(uvt_get(t->f.reg, id, owner, &s), 0);
    if (uvt_status_is_terminal(s.status)) {
      uvt_snapshot_cleanup(&s);
      return;
    }
    uvt_snapshot_cleanup(&s);
    /* A loop with nothing left to do gets one more look, then it fails. */
    if (uv_run(&t->f.loop, UV_RUN_ONCE) == 0)
      idle_turns++;
    assert_true(idle_turns < 2);
  }
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s);
  size_t m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---------------------------------------------------------------------- */

/* M-TOOLS-3: the schemas are one JSON array naming the tools (M-TOOLS-9:
 * task_wait), each with a description and an object input schema. */
static void test_schema_json(void **state) {
  const char *s = uvt_tools_schema_json();
  const char *names[] = {"run_in_background", "run_command", "task_output",
                         "task_list",         "task_kill",   "write_stdin",
                         "task_wait",         "task_screen"};
  char key[64];
  int depth = 0;
  int in_string = 0;
  size_t i;

  assert_non_null(s);
  assert_ptr_equal(s, uvt_tools_schema_json());
  assert_int_equal(s[0], '[');
  /* Brackets balance outside strings: the text is one JSON value. */
  for (i = 0; s[i] != '\0'; i++) {
    if (in_string) {
      if (s[i] == '\\')
        i++;
      else if (s[i] == '"')
        in_string = 0;
      continue;
    }
    if (s[i] == '"')
      in_string = 1;
    else if (s[i] == '[' || s[i] == '{')
      depth++;
    else if (s[i] == ']' || s[i] == '}')
      depth--;
    assert_true(depth >= 0);
    if (depth == 0)
      assert_int_equal(s[i + 1], '\0');
  }
  assert_int_equal(depth, 0);
  assert_int_equal(in_string, 0);
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    snprintf(key, sizeof(key), "{\"name\":\"%s\",\"description\":", names[i]);
    assert_non_null(strstr(s, key));
    assert_true(uvt_tools_has(names[i]));
  }
  assert_non_null(strstr(s, "\"inputSchema\":{\"type\":\"object\""));
  /* M-TOOLS-6, M-TOOLS-8: the new arguments, on the tools that take them
   * (run_command, then task_output). */
  {
    const char *rc = strstr(s, "{\"name\":\"run_command\"");
    const char *to = strstr(s, "{\"name\":\"task_output\"");
    const char *tl = strstr(s, "{\"name\":\"task_list\"");
    const char *y = strstr(s, "\"yield_ms\":{\"type\":\"integer\"");
    const char *m1 = strstr(s, "\"max_bytes\":{\"type\":\"integer\"");
    const char *m2 = m1 != NULL ? strstr(m1 + 1, "\"max_bytes\":{") : NULL;
    assert_true(rc != NULL && to != NULL && tl != NULL);
    assert_true(y > rc && y < to);
    assert_true(m1 > rc && m1 < to);
    const char *tk = strstr(s, "{\"name\":\"task_kill\"");
    const char *m3 = tl != NULL ? strstr(tl, "max_bytes") : NULL;
    assert_true(m2 > to && m2 < tl);
    /* task_list and task_kill take none (write_stdin, last, does). */
    assert_true(tk > tl);
    assert_true(m3 == NULL || m3 > tk);
  }
  /* M-TOOLS-5: run_in_background's stdin and tty, and write_stdin's
   * arguments. */
  {
    const char *rb = strstr(s, "{\"name\":\"run_in_background\"");
    const char *rc = strstr(s, "{\"name\":\"run_command\"");
    const char *ws = strstr(s, "{\"name\":\"write_stdin\"");
    const char *in = strstr(s, "\"stdin\":{\"type\":\"boolean\"");
    const char *tty = strstr(s, "\"tty\":{\"type\":\"boolean\"");
    assert_true(rb != NULL && rc != NULL && ws != NULL);
    assert_true(in > rb && in < rc);
    assert_true(tty > rb && tty < rc);
    assert_non_null(strstr(ws, "\"chars\":{\"type\":\"string\""));
    assert_non_null(strstr(ws, "\"close_stdin\":{\"type\":\"boolean\""));
    assert_non_null(strstr(ws, "\"yield_ms\":{\"type\":\"integer\""));
    assert_non_null(strstr(ws, "\"max_bytes\":{\"type\":\"integer\""));
    assert_non_null(strstr(ws, "\"required\":[\"task_id\"]"));
  }
  assert_false(uvt_tools_has("bash"));
  assert_false(uvt_tools_has(NULL));
}

/* §5 / STYLE: a call's callback runs once, never inside the call; errors
 * return without a callback. */
static void test_call_contract(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_call_t req;

  tfix_init(&t);
  memset(&req, 0, sizeof(req));
  assert_int_equal(
      uvt_tools_call(&t.tools, &req, &t.a, "no_such_tool", NULL, rec_cb),
      UV_ENOENT);
  assert_int_equal(uvt_tools_call(&t.tools, &req, &t.a, NULL, NULL, rec_cb),
                   UV_EINVAL);
  assert_int_equal(
      uvt_tools_call(&t.tools, &req, &t.a, "task_list", NULL, NULL), UV_EINVAL);
  assert_int_equal(uvt_tools_call_abort(&req), UV_EINVAL);

  call(&t, &r, &t.a, "task_list", NULL);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "No background tasks.");
  assert_int_equal(uvt_tools_call_abort(&r.req), UV_EINVAL);
  tfix_close(&t);
}

/* §5 task_output: what is new, then the status line, last. */
static void test_output_status_line(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, "fake", "job", &t.a, id), 0);
  a = args_id(id);

  fake_emit(&fk, "hello\n");
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "hello\n[status: running]");

  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "(no new output)\n[status: running]");

  /* Output without a final newline still leaves the status line alone. */
  fake_emit(&fk, "partial");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "partial\n[status: running]");

  /* M-TOOLS-7: the line goes on, so the next read shows it whole. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "tail\n"),
                   0);
  run_until_settled(&t, &t.a, id);
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "partialtail\n[status: completed, exit code: 0]");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "(no new output)\n[status: completed, exit code: 0]");
  /* It settled before anyone read its end: one notice (M-TOOLS-2). */
  assert_int_equal(t.notices, 1);
  tfix_close(&t);
}

/* M-TOOLS-1: a wait that sees the end returns the output and the terminal
 * status line; the waited task gets no notice (M-TOOLS-2).  C-14: the wait
 * is asked in the same loop turn as the start. */
static void test_wait_completes(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);
  a.wait = 1;
  call_start(&t, &r, &t.a, "task_output", &a);
  uv_run(&t.f.loop, UV_RUN_NOWAIT);
  assert_int_equal(r.calls, 0);
  fake_emit(&fk, "a\n");
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 3", "b\n"), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "b\n[status: completed, exit code: 3]");
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* M-TOOLS-1: a wait that times out is a success showing
 * [status: running]; the task keeps running and nothing is reported. */
static void test_wait_timeout_is_success(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;
  uvt_snapshot_t s;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1; /* teardown settles it */
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  fake_emit(&fk, "so far\n");
  a = args_id(id);
  a.timeout_ms = 50; /* implies wait */
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "so far\n(waited 50 ms; the task has not "
                              "ended: wait again to wait longer)\n"
                              "[status: running]");
  assert_int_equal(uvt_get(t.f.reg, id, &t.a, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);

  /* wait: false with a timeout does not wait. */
  a.wait = 0;
  a.timeout_ms = 100000;
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "(no new output)\n[status: running]");
  tfix_close(&t);
}

/* M-TOOLS-1: wait defaults to 30 s and is capped at 600 s; a timeout of 0
 * is a tool error. */
static void test_wait_default_and_cap(void **state) {
  tfix_t t;
  rec_t r1, r2, r3;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1; /* teardown settles it */
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);
  a.wait = 1;
  call_start(&t, &r1, &t.a, "task_output", &a);
  assert_int_equal(r1.req.timeout_ms_, UVT_TOOLS_WAIT_DEFAULT_MS);
  assert_int_equal(UVT_TOOLS_WAIT_DEFAULT_MS, 30000);
  a.timeout_ms = 1000000000;
  call_start(&t, &r2, &t.a, "task_output", &a);
  assert_int_equal(r2.req.timeout_ms_, UVT_TOOLS_WAIT_MAX_MS);
  assert_int_equal(UVT_TOOLS_WAIT_MAX_MS, 600000);
  a.timeout_ms = 0;
  call(&t, &r3, &t.a, "task_output", &a);
  assert_int_equal(r3.is_error, 1);
  assert_non_null(strstr(r3.text, "timeout_ms"));

  assert_int_equal(uvt_tools_call_abort(&r1.req), 0);
  assert_int_equal(uvt_tools_call_abort(&r2.req), 0);
  fixture_run_until(&t.f, rec_done, &r1);
  fixture_run_until(&t.f, rec_done, &r2);
  assert_int_equal(r1.status, UVT_EABORTED);
  assert_int_equal(r2.status, UVT_EABORTED);
  tfix_close(&t);
}

/* uvt_tools_call_abort: the wait stops with UVT_EABORTED, no output is
 * consumed and the task keeps running. */
static void test_abort_wait(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1; /* teardown settles it */
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  fake_emit(&fk, "kept\n");
  a = args_id(id);
  a.wait = 1;
  call_start(&t, &r, &t.a, "task_output", &a);
  uv_run(&t.f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_tools_call_abort(&r.req), 0);
  assert_int_equal(uvt_tools_call_abort(&r.req), 0); /* still pending */
  assert_int_equal(r.calls, 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, UVT_EABORTED);
  assert_string_equal(r.text, "");

  a.wait = -1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "kept\n[status: running]");
  tfix_close(&t);
}

/* R-WAIT-5 through the tools: the abort comes after settlement counted the
 * call's wait (from a listener), so the task is reported on the call's
 * behalf; the call ends aborted and the notice is delivered instead. */
typedef struct {
  uvt_listener_t l;
  rec_t *r;
  int aborts;
} abort_listener_t;

static void abort_in_listener(uvt_listener_t *l, const uvt_snapshot_t *snap,
                              uvt_agent_t *owner) {
  abort_listener_t *al = l->data;
  if (uvt_tools_call_abort(&al->r->req) == 0)
    al->aborts++;
}

static void test_abort_after_settlement_keeps_notice(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;
  abort_listener_t al;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  memset(&al, 0, sizeof(al)); /* handles start zeroed (R-BUSY-1) */
  al.r = &r;
  al.aborts = 0;
  al.l.data = &al;
  assert_int_equal(uvt_listener_start(t.f.reg, &al.l, abort_in_listener), 0);
  a = args_id(id);
  a.wait = 1;
  call_start(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", NULL), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(al.aborts, 1);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, UVT_EABORTED);
  assert_int_equal(t.notices, 1);
  assert_ptr_equal(t.notice_owner, &t.a);
  assert_true(ends_with(t.notice, "[status: completed, exit code: 0]"));
  uvt_listener_stop(&al.l);
  tfix_close(&t);
}

/* R-WAIT-5 through the tools, the other order: the abort comes first, in
 * the same turn as the settle, so the wait no longer counts and the task's
 * notice is not suppressed; the call ends aborted. */
static void test_abort_then_settle(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);
  a.wait = 1;
  call_start(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(uvt_tools_call_abort(&r.req), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", NULL), 0);
  fixture_run_until(&t.f, rec_done, &r);
  run_until_settled(&t, &t.a, id);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, UVT_EABORTED);
  assert_int_equal(t.notices, 1);
  assert_ptr_equal(t.notice_owner, &t.a);
  tfix_close(&t);
}

/* M-TOOLS-2: an owned task that settles unreported gives one notice to its
 * owner: one line naming id, kind, label, and the status line last. */
static void test_notice_unreported(void **state) {
  tfix_t t;
  fake_t fk;
  char id[UVT_ID_MAX];
  char expect[256];

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(
      fake_start(t.f.reg, &fk, "build", "make all\nand more", &t.a, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_FAILED, "exit code: 2", NULL), 0);
  run_until_settled(&t, &t.a, id);
  assert_int_equal(t.notices, 1);
  assert_ptr_equal(t.notice_owner, &t.a);
  snprintf(expect, sizeof(expect),
           "Task %s (build: make all and more) ended; task_output shows its "
           "output. [status: failed, exit code: 2]",
           id);
  assert_string_equal(t.notice, expect);
  assert_null(strchr(t.notice, '\n'));
  tfix_close(&t);
}

/* M-TOOLS-2: reported tasks (killed, waited for) and unowned tasks get no
 * notice.  C-15: five waited tasks, zero notices. */
static void test_no_notice_when_reported(void **state) {
  tfix_t t;
  fake_t fk[7];
  char id[7][UVT_ID_MAX];
  rec_t r[5];
  rec_t rk;
  uvt_tools_args_t a;
  int i;

  tfix_init(&t);
  memset(fk, 0, sizeof(fk));
  for (i = 0; i < 5; i++) {
    assert_int_equal(fake_start(t.f.reg, &fk[i], NULL, "n", &t.a, id[i]), 0);
    a = args_id(id[i]);
    a.wait = 1;
    call_start(&t, &r[i], &t.a, "task_output", &a);
  }
  for (i = 0; i < 5; i++)
    assert_int_equal(fake_settle(&fk[i], UVT_COMPLETED, "exit code: 0", "n\n"),
                     0);
  for (i = 0; i < 5; i++) {
    fixture_run_until(&t.f, rec_done, &r[i]);
    assert_int_equal(r[i].status, 0);
    assert_string_equal(r[i].text, "n\n[status: completed, exit code: 0]");
  }

  /* Killed through task_kill: reported by the kill. */
  fk[5].settle_on_cancel = 1;
  assert_int_equal(fake_start(t.f.reg, &fk[5], NULL, "k", &t.a, id[5]), 0);
  a = args_id(id[5]);
  call(&t, &rk, &t.a, "task_kill", &a);
  run_until_settled(&t, &t.a, id[5]);

  /* Unowned: nobody to tell. */
  assert_int_equal(fake_start(t.f.reg, &fk[6], NULL, "u", NULL, id[6]), 0);
  assert_int_equal(fake_settle(&fk[6], UVT_COMPLETED, NULL, NULL), 0);
  run_until_settled(&t, NULL, id[6]);

  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* §5 task_kill: requested or already ended, with the status line taken by
 * a get (no output consumed). */
static void test_kill(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  char expect[256];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  fake_emit(&fk, "unread\n");
  a = args_id(id);
  a.reason = "no longer needed";
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 0);
  snprintf(expect, sizeof(expect),
           "Stop of %s requested; task_output with wait shows when it has "
           "ended.\n[status: stopping]",
           id);
  assert_string_equal(r.text, expect);
  assert_int_equal(fk.cancels, 1);
  assert_string_equal(fk.last_reason, "no longer needed");

  /* The kill consumed no output. */
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "unread\n[status: stopping]");

  assert_int_equal(fake_settle(&fk, UVT_KILLED, "signal: SIGTERM", NULL), 0);
  run_until_settled(&t, &t.a, id);
  call(&t, &r, &t.a, "task_kill", &a);
  snprintf(expect, sizeof(expect),
           "%s had already ended.\n[status: killed, signal: SIGTERM]", id);
  assert_string_equal(r.text, expect);
  assert_int_equal(fk.cancels, 1);
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* §5, R-OWN-2 through the tools: unknown and foreign ids, missing
 * arguments are tool errors, not error returns. */
static void test_tool_errors(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  char expect[256];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.b, id), 0);

  a = args_id("nope-9");
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text,
                      "No task nope-9. task_list shows the tasks you can see.");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 1);
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 1);

  a = args_id(id);
  snprintf(expect, sizeof(expect), "Task %s belongs to another session.", id);
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, expect);
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, expect);
  assert_int_equal(fk.cancels, 0);

  uvt_tools_args_init(&a);
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "needs task_id"));
  call(&t, &r, &t.a, "task_kill", NULL);
  assert_int_equal(r.is_error, 1);
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "needs a command"));

  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  run_until_settled(&t, &t.b, id);
  tfix_close(&t);
}

/* §5 task_list, R-LIST-1: the caller's session and unowned tasks, in
 * registration order, one line each: id, kind, status, label. */
static void test_list(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk[3];
  char id[3][UVT_ID_MAX];
  char expect[512];

  tfix_init(&t);
  memset(fk, 0, sizeof(fk));
  assert_int_equal(
      fake_start(t.f.reg, &fk[0], "job", "first\tone", &t.a, id[0]), 0);
  assert_int_equal(fake_start(t.f.reg, &fk[1], "job", "theirs", &t.b, id[1]),
                   0);
  assert_int_equal(fake_start(t.f.reg, &fk[2], "other", "shared", NULL, id[2]),
                   0);
  assert_int_equal(fake_settle(&fk[0], UVT_COMPLETED, "exit code: 0", NULL), 0);
  run_until_settled(&t, &t.a, id[0]);

  call(&t, &r, &t.a, "task_list", NULL);
  assert_int_equal(r.is_error, 0);
  snprintf(expect, sizeof(expect),
           "2 tasks (id, kind, status, label):\n"
           "%s  job  completed (exit code: 0)  first one\n"
           "%s  other  running  shared",
           id[0], id[2]);
  assert_string_equal(r.text, expect);

  assert_int_equal(fake_settle(&fk[1], UVT_COMPLETED, NULL, NULL), 0);
  assert_int_equal(fake_settle(&fk[2], UVT_COMPLETED, NULL, NULL), 0);
  run_until_settled(&t, &t.b, id[1]);
  run_until_settled(&t, NULL, id[2]);
  tfix_close(&t);
}

/* §5, M-MCP-3: result texts are valid UTF-8: invalid sequences (each
 * maximal subpart) become U+FFFD; valid text passes through, NUL included
 * (M-MCP-8: it is valid UTF-8, and len counts it); a character cut by the
 * end of a read is completed by the next one. */
static void test_utf8_repair(void **state) {
  static const char bad[] =
      "\xff\xfeok\0z \xe4\xbd\xa0 \xed\xa0\x80 \xe4\xbd\n";
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);

  memcpy(fk.pending, bad, sizeof(bad) - 1);
  fk.pending_len = sizeof(bad) - 1;
  call(&t, &r, &t.a, "task_output", &a);
  {
    static const char want[] = "\xEF\xBF\xBD\xEF\xBF\xBDok\0z "
                               "\xe4\xbd\xa0 "
                               "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD "
                               "\xEF\xBF\xBD\n[status: running]";
    assert_int_equal(r.len, sizeof(want) - 1);
    assert_memory_equal(r.text, want, sizeof(want) - 1);
  }

  fake_emit(&fk, "caf\xc3\xa9 \xf0\x9f");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "caf\xc3\xa9 \n[status: running]");
  fake_emit(&fk, "\x8e\x89\n");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "caf\xc3\xa9 \xf0\x9f\x8e\x89\n[status: running]");

  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  run_until_settled(&t, &t.a, id);
  tfix_close(&t);
}

/* M-MCP-8, M-TOOLS-7: uvt_tools_utf8_repair() sizes with NULL, then
 * writes the same repair the results show: each maximal invalid subpart
 * becomes U+FFFD, NUL and valid characters are kept, a character cut by
 * the end is one subpart. */
static void test_utf8_repair_public(void **state) {
  static const char bad[] = "\xffok\0\xe4\xbd\xa0\xed\xa0\x80\xf0\x9f";
  static const char want[] = "\xEF\xBF\xBDok\0\xe4\xbd\xa0"
                             "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                             "\xEF\xBF\xBD";
  char out[sizeof(want) + 1];
  size_t n;

  (void)state;
  n = uvt_tools_utf8_repair(bad, sizeof(bad) - 1, NULL);
  assert_int_equal(n, sizeof(want) - 1);
  memset(out, 'x', sizeof(out));
  assert_int_equal(uvt_tools_utf8_repair(bad, sizeof(bad) - 1, out), n);
  assert_memory_equal(out, want, n);
  assert_int_equal(out[n], 'x'); /* nothing past the length */
  assert_int_equal(uvt_tools_utf8_repair("ok", 2, NULL), 2);
  assert_int_equal(uvt_tools_utf8_repair("", 0, NULL), 0);
}

/* Where `needle` first occurs in the `n` bytes at `hay`, or NULL (the
 * bytes may hold NULs). */
static const char *find_bytes(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  size_t i;

  for (i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0)
      return hay + i;
  return NULL;
}

/* M-MCP-8 (tools side): NUL bytes of output reach the result, counted by
 * req->len: in a line, in a line shown unfinished and again once it
 * changed, on stderr, in a cut result (max_bytes counts them and the cut
 * line counts those left out), and from a real command. */
static void test_nul_kept(void **state) {
  static const char want1[] = "x\0\n[status: running]";
  static const char want2[] = "x\0y\n[stderr]\n\0err\n[status: running]";
  static const char status[] = "[status: running]";
  char full[3000];
  size_t full_len = 0;
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;
  const char *mark, *mark_end;
  unsigned long long left, lines;
  size_t head, tail, out_len, i;
  int n;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);

  /* An unfinished line with a NUL, shown as it is... */
  memcpy(fk.pending, "x\0", 2);
  fk.pending_len = 2;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.len, sizeof(want1) - 1);
  assert_memory_equal(r.text, want1, sizeof(want1) - 1);
  /* ... then whole once it changed, and a NUL on stderr (the fake's
   * stream holds what a process read would: "[stderr]" starts stderr). */
  memcpy(fk.pending, "y\n[stderr]\n\0err\n", 16);
  fk.pending_len = 16;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.len, sizeof(want2) - 1);
  assert_memory_equal(r.text, want2, sizeof(want2) - 1);

  /* A cut result: NULs count as bytes, in what is shown and in the line
   * that counts what is left out. */
  for (i = 0; i < 60; i++) {
    n = snprintf(full + full_len, sizeof(full) - full_len, "line %02zu ", i);
    full_len += (size_t)n;
    memset(full + full_len, '\0', 30);
    full_len += 30;
    full[full_len++] = '\n';
  }
  assert_true(full_len < sizeof(fk.pending));
  memcpy(fk.pending, full, full_len);
  fk.pending_len = full_len;
  a.max_bytes = 300;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(r.len > strlen(status));
  assert_memory_equal(r.text + r.len - strlen(status), status, strlen(status));
  out_len = r.len - strlen(status);
  assert_true(out_len <= 300);
  mark = find_bytes(r.text, out_len, "[... ");
  assert_non_null(mark);
  assert_int_equal(
      sscanf(mark, "[... %llu bytes (%llu lines) left out ...]", &left, &lines),
      2);
  mark_end = memchr(mark, '\n', out_len - (size_t)(mark - r.text));
  assert_non_null(mark_end);
  head = (size_t)(mark - r.text);
  tail = out_len - (size_t)(mark_end + 1 - r.text);
  assert_true(head > 0 && tail > 0);
  assert_memory_equal(r.text, full, head);
  assert_memory_equal(mark_end + 1, full + full_len - tail, tail);
  assert_int_equal(head + left + tail, full_len);
  assert_int_equal(lines, 60 - (head + tail) / 39);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", NULL), 0);
  run_until_settled(&t, &t.a, id);

  /* A real command's NUL bytes (P-OUT-1 reads are bytes). */
  uvt_tools_args_init(&a);
  a.command = "printf 'a\\000b\\n\\000'";
  call(&t, &r, &t.a, "run_command", &a);
  {
    static const char want3[] = "a\0b\n\0\n[status: completed, exit code: 0]";
    assert_int_equal(r.is_error, 0);
    assert_int_equal(r.len, sizeof(want3) - 1);
    assert_memory_equal(r.text, want3, sizeof(want3) - 1);
  }
  tfix_close(&t);
}

/* uvt_tools_attach/detach: the tools are a surface (R-SURF-1); detach ends
 * pending waits with UVT_ECLOSING, refuses new calls, stops notices, never
 * touches tasks (R-DONE-5), and calls back once, after the calls. */
static void test_attach_detach(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  fake_t fk2;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;
  uvt_tools_call_t req;
  uvt_snapshot_t s;

  memset(&t, 0, sizeof(t));
  fixture_init(&t.f, NULL);
  uvt_surface_detach(&t.f.surface);
  memset(&fk, 0, sizeof(fk));
  memset(&fk2, 0, sizeof(fk2));
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", NULL, id),
                   UVT_ENOSURFACE);
  assert_int_equal(uvt_tools_attach(NULL, &t.tools, NULL), UV_EINVAL);
  assert_int_equal(uvt_tools_detach(&t.tools, detach_cb), UV_EINVAL);
  assert_int_equal(uvt_tools_attach(t.f.reg, &t.tools, NULL), 0);
  t.tools.data = &t;
  assert_int_equal(uvt_agent_register(t.f.reg, &t.a, "agent-a", "s1"), 0);
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);

  a = args_id(id);
  a.wait = 1;
  call_start(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(uvt_tools_detach(&t.tools, detach_cb), 0);
  assert_int_equal(uvt_tools_detach(&t.tools, detach_cb), UVT_ECLOSING);
  assert_int_equal(
      uvt_tools_call(&t.tools, &req, &t.a, "task_list", NULL, rec_cb),
      UVT_ECLOSING);
  assert_int_equal(r.calls, 0);
  assert_int_equal(t.detached, 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.status, UVT_ECLOSING);
  while (t.detached == 0)
    uv_run(&t.f.loop, UV_RUN_ONCE);
  assert_int_equal(t.detached, 1);

  /* The task is untouched and no surface is left. */
  assert_int_equal(uvt_get(t.f.reg, id, &t.a, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(fk.cancels, 0);
  assert_int_equal(fake_start(t.f.reg, &fk2, NULL, "job", NULL, NULL),
                   UVT_ENOSURFACE);
  /* No notice once detached. */
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  run_until_settled(&t, &t.a, id);
  assert_int_equal(t.notices, 0);
  fixture_close(&t.f);
}

/* §5 run_in_background with the process producer: the id, then the output
 * and the exit status through a wait. */
static void test_run_in_background(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  char id[UVT_ID_MAX];
  const char *p;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "echo hi; echo oops >&2; exit 3";
  a.label = "greeting";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "Started bash-1.\n[status: running]");
  p = r.text + strlen("Started ");
  snprintf(id, sizeof(id), "%.*s", (int)(strchr(p, '.') - p), p);

  a = args_id(id);
  a.timeout_ms = 10000;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text,
                      "hi\n[stderr]\noops\n[status: completed, exit code: 3]");
  /* No assertion on notices here: on a slow machine the command can end
   * before the wait is registered, and then a notice is right.  M-TOOLS-2
   * is checked deterministically with fake producers above. */

  call(&t, &r, &t.a, "task_list", NULL);
  assert_string_equal(r.text, "1 task (id, kind, status, label):\n"
                              "bash-1  bash  completed (exit code: 3)  "
                              "greeting");
  tfix_close(&t);
}

/* P-KILL-6, C-30 through the tool surface: task_kill of an ended task whose
 * background child still runs says it had ended, names what it stops, and
 * stops it; the outcome stays completed.  The sibling with nothing left
 * says only that it had ended. */
/* No live process is left in session `sid` (zombies do not count): the
 * condition a test of a kill waits for.  The leftover count alone is not
 * it: it treats a process with a fatal signal pending as gone, and such a
 * process reads as alive again for a moment once the signal is taken and
 * before it exits. */
static int session_empty(int sid) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  int live = 0;

  if (d == NULL)
    return 0;
  while (!live && (e = readdir(d)) != NULL) {
    char buf[512];
    const char *q;
    char state;
    int ppid, pgrp, session;
    int pid = atoi(e->d_name);
    if (pid <= 0 || proc_file(pid, "stat", buf, sizeof(buf)) <= 0)
      continue;
    q = strrchr(buf, ')');
    if (q != NULL &&
        sscanf(q + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) == 4 &&
        session == sid && state != 'Z' && state != 'X')
      live = 1;
  }
  closedir(d);
  return !live;
}

/* The task's leftovers are counted gone and its session is empty. */
static int bash1_left_gone(tfix_t *t) {
  int pid = uvt_process_pid(t->f.reg, "bash-1", &t->a);
  return uvt_process_leftovers(t->f.reg, "bash-1", &t->a) == 0 && pid > 0 &&
         session_empty(pid);
}

static int leftovers_gone(void *arg) {
  return bash1_left_gone(arg);
}

static void test_c30_kill_ended_leftovers(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "sleep 300 & echo started";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_string_equal(r.text, "Started bash-1.\n[status: running]");
  run_until_settled(&t, &t.a, "bash-1");
  assert_int_equal(uvt_process_leftovers(t.f.reg, "bash-1", &t.a), 1);

  a = args_id("bash-1");
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text,
                      "bash-1 had already ended; stopping the 1 process it "
                      "left running.\n[status: completed, exit code: 0]");
  fixture_run_until(&t.f, leftovers_gone, &t);
  assert_int_equal(uvt_process_leftovers(t.f.reg, "bash-1", &t.a), 0);

  /* Nothing left: the plain answer, and the kill is still honest. */
  call(&t, &r, &t.a, "task_kill", &a);
  assert_string_equal(r.text, "bash-1 had already ended.\n"
                              "[status: completed, exit code: 0]");
  tfix_close(&t);
}

/* §5 run_in_background: a command that cannot start is a tool error; the
 * tools' cwd default applies. */
static void test_run_in_background_errors(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;

  uvt_tools_options_init(&to);
  to.cwd = "/";
  tfix_init_opts(&t, NULL, &to);
  uvt_tools_args_init(&a);
  a.command = "pwd";
  a.cwd = "/nonexistent/dir/for/uvtasks";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "Not started"));

  a.cwd = NULL;
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "Started bash-1.\n[status: running]");
  a = args_id("bash-1");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "/\n[status: completed, exit code: 0]");
  tfix_close(&t);
}

/* S-5 through the tools: a sandbox that names no workspace gets the
 * tools' cwd, resolved at attach; a call's cwd outside it is a tool error
 * naming the workspace, and nothing runs; a call's cwd inside it runs
 * there.  Without bwrap (S-3) the start is refused anyway: skipped. */
static void test_s5_tools_workspace(void **state) {
  char ws[] = "/tmp/uvt-tools-ws-XXXXXX";
  char sub[64];
  char link[64];
  char real_ws[PATH_MAX];
  uvt_sandbox_t sb = {0};
  uvt_tools_options_t to;
  uvt_tools_args_t a;
  tfix_t t;
  rec_t r;
  (void)state;

  if (system("command -v bwrap >/dev/null 2>&1") != 0)
    skip();
  assert_non_null(mkdtemp(ws));
  snprintf(sub, sizeof(sub), "%s/sub", ws);
  assert_int_equal(mkdir(sub, 0755), 0);
  snprintf(link, sizeof(link), "%s/up", ws);
  assert_int_equal(symlink("/", link), 0);
  assert_non_null(realpath(ws, real_ws));
  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  uvt_tools_options_init(&to);
  to.cwd = ws;
  to.sandbox = &sb;
  tfix_init_opts(&t, NULL, &to);
  /* The host's struct is left as it was. */
  assert_null(sb.workspace);
  uvt_tools_args_init(&a);
  a.command = "echo x > f && echo wrote";
  a.cwd = "/";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "lies outside this server's sandbox"));
  assert_non_null(strstr(r.text, real_ws));
  assert_null(strstr(r.text, "wrote"));
  a.cwd = link;
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "lies outside"));
  a.cwd = sub;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "wrote"));
  /* S-5: a relative cwd is relative to the tools' cwd (the workspace
   * here), not to the host process's: "sub" runs in WS/sub, and "..",
   * relative to it, lies outside. */
  a.cwd = "sub";
  a.command = "pwd -P";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  {
    char want[PATH_MAX + 8];
    snprintf(want, sizeof(want), "%s/sub\n", real_ws);
    assert_non_null(strstr(r.text, want));
  }
  a.cwd = "..";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "lies outside"));
  a.command = "echo x > f && echo wrote";
  a.cwd = NULL;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "wrote"));
  tfix_close(&t);
  {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ws);
    assert_int_equal(system(cmd), 0);
  }
}

/* R-LIMIT-1 through the tools: a start beyond the limit is a tool error
 * saying what to do. */
static void test_run_in_background_limit(void **state) {
  tfix_t t;
  rec_t r;
  uvt_options_t o;
  uvt_tools_args_t a;
  fake_t fk;
  char id[UVT_ID_MAX];

  uvt_options_init(&o);
  o.max_live_per_owner = 1;
  tfix_init_opts(&t, &o, NULL);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  uvt_tools_args_init(&a);
  a.command = "true";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "task_kill"));
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  run_until_settled(&t, &t.a, id);
  tfix_close(&t);
}

/* M-TOOLS-4: run_command starts the command, names its task while it
 * waits, and returns the output and the status line once it ended; a
 * non-zero exit code is a success (the status line says it) and the waited
 * task gets no notice (M-TOOLS-2). */
static void test_run_command(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_snapshot_t s;
  const char *id;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "echo hi; echo oops >&2; exit 3";
  call_start(&t, &r, &t.a, "run_command", &a);
  id = uvt_tools_call_task(&r.req);
  assert_non_null(id);
  assert_string_equal(id, "bash-1");
  assert_int_equal(uvt_get(t.f.reg, id, &t.a, &s), 0);
  assert_string_equal(s.owner_session, "s1");
  uvt_snapshot_cleanup(&s);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text,
                      "hi\n[stderr]\noops\n[status: completed, exit code: 3]");
  assert_null(uvt_tools_call_task(&r.req)); /* cleaned up */

  a.command = "true";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "(no output)\n[status: completed, exit code: 0]");
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* M-TOOLS-4 with P-LIMIT-1: timeout_ms is the command's runtime limit; a
 * command stopped by it is a tool error showing why. */
static void test_run_command_timeout(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "echo started; exec sleep 29";
  a.timeout_ms = 150;
  call_start(&t, &r, &t.a, "run_command", &a);
  /* "started" is written once the command runs sleep, however slow its
   * start: no loop turn (so no runtime limit) before that.  (Running the
   * loop at once, a start slower than 150 ms stopped it before its
   * echo.) */
  assert_true(proc_reached("sleep 29", 0, (int)getpid(), 10000) > 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 1);
  {
    /* R-TIME-1: the detail names what really elapsed (at least 150). */
    unsigned long long ms = 0;
    assert_int_equal(
        sscanf(r.text, "started\n[status: killed, timed out after %llu ms]",
               &ms),
        1);
    assert_true(ms >= 150 && ms < 10000);
  }
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* M-TOOLS-4, M-MCP-1: aborting run_command stops its command (it runs in
 * the foreground); the kill reports the end, so no notice follows. */
static void test_run_command_abort(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_snapshot_t s;
  char id[UVT_ID_MAX];

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "exec sleep 30";
  call_start(&t, &r, &t.a, "run_command", &a);
  snprintf(id, sizeof(id), "%s", uvt_tools_call_task(&r.req));
  assert_int_equal(uvt_tools_call_abort(&r.req), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, UVT_EABORTED);
  run_until_settled(&t, &t.a, id);
  assert_int_equal(uvt_get(t.f.reg, id, &t.a, &s), 0);
  assert_int_equal(s.status, UVT_KILLED);
  assert_string_equal(s.kill_reason, "call cancelled");
  uvt_snapshot_cleanup(&s);
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* M-MCP-5 with M-TOOLS-7: a progress report's line is text for a person
 * or a model like a result's: no escape sequences (colours, erase-in-line,
 * a window title), carriage-return redraws applied.  Before the fix the
 * line was the raw bytes with ESC turned into a space (" [32mgreen..."). */
typedef struct {
  uvt_tools_call_t *req;
  char line[256];
} progress_look_t;

static int progress_seen(void *arg) {
  progress_look_t *p = arg;
  return uvt_tools_call_progress(p->req, p->line, sizeof(p->line)) == 0 &&
         strstr(p->line, "done") != NULL;
}

static void test_progress_line_plain(void **state) {
  static const struct {
    const char *command;
    const char *line;
  } cases[] = {
      /* colours around a redrawn progress line */
      {"printf '\\033[32m 5%%\\033[0m\\r\\033[32m 9%%\\033[0m done\\n'; "
       "exec sleep 30",
       " 9% done"},
      /* erase-in-line and a window title, on stderr only */
      {"printf 'x\\033[2K\\r\\033]0;title\\007all done' >&2; exec sleep 30",
       "all done"},
      /* a backspace redraw */
      {"printf 'dome\\bx\\b\\bne\\n'; exec sleep 30", "done"},
  };
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  progress_look_t look;
  size_t i;

  tfix_init(&t);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uvt_tools_args_init(&a);
    a.command = cases[i].command;
    call_start(&t, &r, &t.a, "run_command", &a);
    memset(&look, 0, sizeof(look));
    look.req = &r.req;
    fixture_run_until(&t.f, progress_seen, &look);
    assert_string_equal(look.line, cases[i].line);
    assert_int_equal(uvt_tools_call_abort(&r.req), 0);
    fixture_run_until(&t.f, rec_done, &r);
    assert_int_equal(r.status, UVT_EABORTED);
  }
  tfix_close(&t);
}

/* M-TOOLS-4: bad arguments and a command that cannot start are tool
 * errors; no task is named. */
static void test_run_command_errors(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  call_start(&t, &r, &t.a, "run_command", &a);
  assert_null(uvt_tools_call_task(&r.req));
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, "run_command needs a command (a string with "
                              "more than white space).");
  /* White space only is no command either (it read "invalid argument
   * (EINVAL)"), for both tools. */
  a.command = " \t\n ";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "needs a command"));
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "run_in_background needs a command"));
  a.command = "true";
  a.timeout_ms = 0;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "timeout_ms must be a positive"));
  a.timeout_ms = -1;
  a.cwd = "/nonexistent/dir/for/uvtasks";
  call_start(&t, &r, &t.a, "run_command", &a);
  assert_null(uvt_tools_call_task(&r.req));
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "Not started"));
  assert_null(uvt_tools_call_task(NULL));
  tfix_close(&t);
}

/* Allocation failures (as R-START-3 asks of the core): failing the n-th
 * allocation of a tool call, for every n, gives a clean tool error or a
 * UV_ENOMEM callback, never a crash, a lost callback or a leak. */
static int fail_at; /* 0 = never; else fail when the count reaches it */
static int alloc_count;
static int failed_once;

static int should_fail(void) {
  if (fail_at == 0)
    return 0;
  if (++alloc_count == fail_at) {
    failed_once = 1;
    return 1;
  }
  return 0;
}
static void *fail_malloc(size_t n) {
  return should_fail() ? NULL : malloc(n);
}
static void *fail_realloc(void *p, size_t n) {
  return should_fail() ? NULL : realloc(p, n);
}
static void *fail_calloc(size_t c, size_t n) {
  return should_fail() ? NULL : calloc(c, n);
}

static void test_allocation_failures(void **state) {
  /* The last one keeps a filter state between reads (M-TOOLS-7): without
   * memory for it the text is the same, only not kept. */
  const char *tools[] = {"task_output", "task_list", "task_kill",
                         "task_output"};
  const char *emit[] = {"hello\n", "hello\n", "hello\n", "hello\n\r 5%\033[1"};
  const char *expect[] = {"hello\n[status: running]",
                          NULL, /* checked by prefix below */
                          NULL, "hello\n 5%\n[status: running]"};
  size_t k;
  int n;

  assert_int_equal(
      uvt_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free), 0);
  for (k = 0; k < 4; k++) {
    for (n = 1; n < 200; n++) {
      tfix_t t;
      rec_t r;
      fake_t fk;
      char id[UVT_ID_MAX];
      uvt_tools_args_t a;

      tfix_init(&t);
      memset(&fk, 0, sizeof(fk));
      fk.stream = 1;
      fk.settle_on_cancel = 1;
      assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
      fake_emit(&fk, emit[k]);
      a = args_id(id);
      alloc_count = 0;
      failed_once = 0;
      fail_at = n;
      call(&t, &r, &t.a, tools[k], &a);
      fail_at = 0;
      if (r.status == 0 && !r.is_error) {
        if (expect[k] != NULL)
          assert_string_equal(r.text, expect[k]);
        else if (k == 1)
          assert_non_null(strstr(r.text, "1 task (id, kind, status, label)"));
        else
          assert_non_null(strstr(r.text, "[status: stopping]"));
      } else if (r.status == 0) {
        assert_non_null(strstr(r.text, "not enough memory"));
      } else {
        assert_int_equal(r.status, UV_ENOMEM);
        assert_string_equal(r.text, "");
      }
      if (k == 3) {
        /* The next read goes on where the first stopped (a first read
         * that failed may have consumed nothing). */
        int first_ok = r.status == 0 && !r.is_error;
        fake_emit(&fk, "m\r10%\n");
        call(&t, &r, &t.a, "task_output", &a);
        if (first_ok)
          assert_string_equal(r.text, "10%\n[status: running]");
        else
          assert_true(ends_with(r.text, "\n10%\n[status: running]") ||
                      strcmp(r.text, "10%\n[status: running]") == 0);
      }
      tfix_close(&t);
      if (!failed_once)
        break;
    }
    assert_true(n > 1);
  }
  assert_int_equal(uvt_replace_allocator(malloc, realloc, calloc, free), 0);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-7: text for a model                                             */

/* The part of a result before its status line. */
static size_t output_len(const char *text) {
  const char *st = strstr(text, "[status: ");
  return st != NULL ? (size_t)(st - text) : strlen(text);
}

/* C-36 (M-TOOLS-7): a 500-frame progress bar with colours in a
 * run_command result shows its last frame, no ESC byte and no "\r". */
static void test_c36_progress_bar(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "for i in $(seq 1 500); do printf '\\r[%3d%%] "
              "\\033[32mbuilding\\033[0m' $((i/5)); done; echo; echo built";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_null(strchr(r.text, '\033'));
  assert_null(strchr(r.text, '\r'));
  assert_string_equal(r.text,
                      "[100%] building\nbuilt\n[status: completed, exit code: "
                      "0]");
  tfix_close(&t);
}

/* C-36's siblings (M-TOOLS-7): the same bar on stderr redrawn with an
 * erase-in-line, a title (OSC), a hyperlink, a charset switch, stray
 * controls and "\r\n" line ends, through run_in_background and a wait. */
static void test_c36_siblings(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "printf '\\033]0;my title\\007\\033(Bstart\\r\\n'; "
              "for i in 10 9 8 7 6 5 4 3 2 1 0; do "
              "printf '\\r\\033[Kleft: %d\\a' $i >&2; done; echo >&2; "
              "printf '\\033]8;;https://example.com\\033\\\\link\\033]8;;"
              "\\033\\\\ ok\\x01\\x7f\\n'; "
              "printf 'typo\\b\\b\\bes!\\n'";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 0);
  a = args_id("bash-1");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "start\nlink ok\ntes!\n[stderr]\nleft: 0\n"
                              "[status: completed, exit code: 0]");
  tfix_close(&t);
}

/* M-TOOLS-7 across reads: a read ends inside an escape sequence, inside a
 * UTF-8 character and in a line being redrawn; the next read carries on
 * (the unfinished line shows as it was, then whole once it changed). */
static void test_c36_across_reads(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);

  fake_emit(&fk, "step 1\n\r[ 41%] \033[3");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "step 1\n[ 41%] \n[status: running]");

  fake_emit(&fk, "2mbuild\xc3");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "[ 41%] build\n[status: running]");

  fake_emit(&fk, "\xa9\033[0m\r[ 42%] ");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "[ 42%] build\xc3\xa9\n[status: running]");

  /* Nothing changed the line: nothing to show. */
  fake_emit(&fk, "\033[?25l");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "(no new output)\n[status: running]");

  /* The newline ends a line that was shown as it is: not repeated. */
  fake_emit(&fk, "\ncompiling...");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "compiling...\n[status: running]");
  fake_emit(&fk, " done\n\r[100%] building");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "compiling... done\n[100%] building\n[status: running]");

  /* The end flushes what is left (an unfinished sequence shows nothing). */
  assert_int_equal(
      fake_settle(&fk, UVT_COMPLETED, "exit code: 0", "\rbuilt\033[K\033["), 0);
  run_until_settled(&t, &t.a, id);
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "built\n[status: completed, exit code: 0]");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "(no new output)\n[status: completed, exit code: 0]");
  tfix_close(&t);
}

/* M-TOOLS-7: stdout and stderr of a process task keep their own
 * unfinished lines (a progress bar on stderr, lines on stdout). */
static void test_filter_per_stream(void **state) {
  tfix_t t;
  rec_t r;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;

  tfix_init(&t);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, id), 0);
  a = args_id(id);

  /* The process producer's format: stdout, then "[stderr]" and stderr. */
  fake_emit(&fk, "fetching\n[stderr]\n\r 40% ####");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "fetching\n[stderr]\n 40% ####\n[status: running]");
  fake_emit(&fk, "[stderr]\n\r 80% ########");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "[stderr]\n 80% ########\n[status: running]");
  fake_emit(&fk, "unpacking\n[stderr]\n\r100% ##########\n");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "unpacking\n[stderr]\n100% ##########\n"
                              "[status: running]");
  /* A drop notice breaks the line it interrupts. */
  fake_emit(&fk, "\r 10%");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, " 10%\n[status: running]");
  fake_emit(&fk, "[... 70 bytes dropped ...]\n\r 90%");
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "[... 70 bytes dropped ...]\n 90%\n[status: running]");
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, "exit code: 0", NULL), 0);
  run_until_settled(&t, &t.a, id);
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text,
                      "(no new output)\n[status: completed, exit code: 0]");
  tfix_close(&t);
}

/* M-TOOLS-7, the filter's table: input bytes, the text a model sees. */
typedef struct {
  const char *in;
  size_t in_len; /* 0 = strlen */
  const char *out;
  size_t out_len; /* 0 = strlen */
} term_case_t;

static const term_case_t term_cases[] = {
    {"plain\n", 0, "plain\n", 0},
    {"a\r\nb\n", 0, "a\nb\n", 0},
    {"\r[  0%] x\r[ 50%] x\r[100%] x\n", 0, "[100%] x\n", 0},
    {"\033[1;32mgreen\033[0m \033[38;5;196mred\033[m\n", 0, "green red\n", 0},
    {"\033[38:2:255:0:0mrgb\033[0m\n", 0, "rgb\n", 0},
    {"abc\bd\n", 0, "abd\n", 0},
    {"abc\b\b\b\bxy\n", 0, "xyc\n", 0},
    {"long line\rshort\n", 0, "shortline\n", 0},
    {"long line\r\033[Kshort\n", 0, "short\n", 0},
    {"long line\r\033[0Kshort\n", 0, "short\n", 0},
    {"abc\033[2K\rxy\n", 0, "xy\n", 0},
    {"abcdef\033[3G\033[1K\n", 0, "   def\n", 0},
    {"\033]0;title\007text\n", 0, "text\n", 0},
    {"\033]2;title\033\\text\n", 0, "text\n", 0},
    {"\033]8;;http://x\033\\link\033]8;;\033\\\n", 0, "link\n", 0},
    {"\033Pq#0;2;0;0;0#0~~\033\\after\n", 0, "after\n", 0},
    {"\033_apc\033\\\033^pm\033\\\033Xsos\033\\ok\n", 0, "ok\n", 0},
    {"\033(Bok\033)0\n", 0, "ok\n", 0},
    {"\0337saved\0338\033=\033>\033c\033M\n", 0, "saved\n", 0},
    {"a\001b\007c\177d\016e\017f\n", 0, "abcdef\n", 0},
    {"a\tb\n", 0, "a\tb\n", 0},
    /* M-MCP-8: NUL is kept, as a character of its line (see term.c). */
    {"a\0b\n", 4, "a\0b\n", 4},
    {"\0\0\n", 3, "\0\0\n", 3},
    {"ab\0\rX\n", 6, "Xb\0\n", 4},
    {"a\0\bZ\n", 5, "aZ\n", 0},
    {"\033[3\0"
     "1mx\0\n",
     9, "x\0\n", 3},
    {"\033]0;t\0itle\007y\n", 13, "y\n", 0},
    {"\0\xff\xc3\xa9\n", 5, "\0\xEF\xBF\xBD\xc3\xa9\n", 7},
    {"\xff\xfe!\n", 0, "\xEF\xBF\xBD\xEF\xBF\xBD!\n", 0},
    {"\xe4\xbd\n", 0, "\xEF\xBF\xBD\n", 0},
    {"\xed\xa0\x80\n", 0, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\n", 0},
    {"\033[?25lhidden\033[?25h\033[?2004h\n", 0, "hidden\n", 0},
    {"abcdef\033[3Gx\n", 0, "abxdef\n", 0},
    {"abcdef\033[G\033[`x\n", 0, "xbcdef\n", 0},
    {"ab\033[3Cc\n", 0, "ab   c\n", 0},
    {"ab\033[ac\n", 0, "ab c\n", 0},
    {"abcd\033[2Dx\n", 0, "abxd\n", 0},
    {"abcd\033[9Dx\n", 0, "xbcd\n", 0},
    {"\xc2\x9b"
     "31mred\xc2\x9b"
     "0m\n",
     0, "red\n", 0},
    {"\xc2\x9d"
     "0;t\xc2\x9cok\n",
     0, "ok\n", 0},
    {"a\xc2\x85"
     "b\xc2\x80\n",
     0, "a\nb\n", 0},
    {"a\033Eb\n", 0, "a\nb\n", 0},
    {"a\033[Eb\n", 0, "a\nb\n", 0},
    {"\033[31\030x\n", 0, "x\n", 0},
    {"\033]0;t\032y\n", 0, "y\n", 0},
    {"\033[3\n1mz\n", 0, "\nz\n", 0},
    {"\033\033[1mb\n", 0, "b\n", 0},
    {"\033]0;t\033[1mq\n", 0, "q\n", 0},
    {"abcdef\033[3D\033[P\n", 0, "abcef\n", 0},
    {"abcdef\033[6D\033[9P\n", 0, "\n", 0},
    {"abc\033[2D\033[2@\n", 0, "a  bc\n", 0},
    {"abcdef\033[4G\033[2X\n", 0, "abc  f\n", 0},
    {"h\xc3\xa9llo\rHE\n", 0, "HEllo\n", 0},
    {"\xe2\x96\x88\xe2\x96\x88\r\xe2\x96\x91\n", 0,
     "\xe2\x96\x91\xe2\x96\x88\n", 0},
    {"a\013b\014c\n", 0, "a\nb\nc\n", 0},
    {"partial", 0, "partial", 0},
    {"x\033[3", 0, "x", 0},
    {"x\033]0;never ends", 0, "x", 0},
    /* Moves to another row end the line; scrolling and clearing do not. */
    {"a\033[1Ab\033[2J\033[H\033[5;1Hc\033[1S\n", 0, "a\n b\nc\n", 0},
    {"\033[1;1Hline one\033[2;1Hline two\033[3;5Hx\n", 0,
     "line one\nline two\n    x\n", 0},
    {"? Pick\n\033[2K> a\033[1B\033[G\033[2K  b\033[1B\033[G\033[2K  c\n", 0,
     "? Pick\n> a\n  b\n  c\n", 0},
    {"ab\033[Fcd\n", 0, "ab\ncd\n", 0},
    {"ab\033[3dcd\033[2ee\n", 0, "ab\n  cd\n    e\n", 0},
    {"\n\033[2A\033[2Kbar 1\n\033[2Kbar 2\n", 0, "\nbar 1\nbar 2\n", 0},
    /* Leaving a row a move went to, with nothing written on it, says
     * nothing about that row: no blank line (tqdm's nested bars go down
     * with "\n" and back up with CSI A; docker's progress adds a row with
     * "\n" below the cursor-down it ended the last update with). */
    {"\router 0/3\n\rinner 0/2\033[A\n\rinner 1/2\033[A\router 1/3\n", 0,
     "outer 0/3\ninner 0/2\ninner 1/2\nouter 1/3\n", 0},
    {"a: 1\r\033[1B\n\033[1A\033[2K\rb: 1\r\033[1B\033[2A\033[2K\ra: 2\r"
     "\033[2B",
     0, "a: 1\nb: 1\na: 2\n", 0},
    {"x\033[1A\033[2K\n\ny\n", 0, "x\ny\n", 0},
    /* Restoring a saved cursor (ESC 7 / ESC 8, CSI s / CSI u) returns to
     * its column, and is a move to another row when one was made since
     * the save: apt's "Progress: [ 20%]" on the bottom row does not run
     * into the next line of its log. */
    {"ab\0337cd\0338X\n", 0, "abXd\n", 0},
    {"ab\033[scd\033[uX\n", 0, "abXd\n", 0},
    {"Setting up a\n\0337\033[24;0f\033[42mProgress: [ 20%]\033[49m\0338"
     "Setting up b\n",
     0, "Setting up a\nProgress: [ 20%]\nSetting up b\n", 0},
    {"a\033[s\033[5;1Hstatus\033[ub\n", 0, "a\nstatus\n b\n", 0},
    {"\0338x\033[uy\n", 0, "xy\n", 0},
    /* A row a move leaves shows no trailing blanks, as on a terminal (vim
     * pads each "~" row with spaces to the width, and blanks out its probe
     * with spaces); a line a newline ends keeps them. */
    {"\033[2;1H~     \033[3;1H~  \033[4;1H   \033[5;1Hx  \n", 0, "~\n~\nx  \n",
     0},
    {"ab\0337\ncd\0338X\n", 0, "ab\ncd\n  X\n", 0},
    {"ab\0337\nplain\n\0338X\n", 0, "ab\nplain\n  X\n", 0},
    {"abc\r\n", 0, "abc\n", 0},
    {"\r\r\n\n", 0, "\n\n", 0},
    {"\033[>c\033[1 q\033[5n\033[!p\n", 0, "\n", 0},
    {"\033[9999999999Gx\n", 0, NULL, 0}, /* checked below: at the line's end */
    {"", 0, "", 0},
};

static void term_run(const char *in, size_t len, size_t split1, size_t split2,
                     uvt__text_t *out) {
  uvt__term_t s;

  uvt__term_init(&s);
  uvt__term_feed(&s, in, split1, out);
  uvt__term_end(&s, UVT__TERM_HOLD, out);
  uvt__term_feed(&s, in + split1, split2 - split1, out);
  uvt__term_end(&s, UVT__TERM_HOLD, out);
  uvt__term_feed(&s, in + split2, len - split2, out);
  uvt__term_end(&s, UVT__TERM_FINAL, out);
  assert_false(uvt__term_carries(&s));
  uvt__term_free(&s);
}

static void test_term_table(void **state) {
  size_t k, i, j, len, out_len, n;
  uvt__text_t out;
  char *got;

  for (k = 0; k < sizeof(term_cases) / sizeof(term_cases[0]); k++) {
    const term_case_t *c = &term_cases[k];
    len = c->in_len > 0 ? c->in_len : strlen(c->in);
    if (c->out == NULL)
      continue;
    out_len = c->out_len > 0 ? c->out_len : strlen(c->out);
    /* Whole, and split in three at every pair of points: reads may end
     * anywhere, and the text must not depend on where. */
    for (i = 0; i <= len; i++) {
      for (j = i; j <= len; j++) {
        uvt__text_init(&out);
        term_run(c->in, len, i, j, &out);
        n = out.len;
        got = uvt__text_take(&out);
        assert_non_null(got);
        if (out_len != n || memcmp(got, c->out, out_len) != 0)
          print_error("case %zu split %zu/%zu: got \"%s\" (%zu bytes)\n", k, i,
                      j, got, n);
        assert_int_equal(n, out_len);
        assert_memory_equal(got, c->out, out_len);
        uvt__tools_free(got);
      }
    }
  }

  /* A cursor past the longest line we keep lands at its end. */
  uvt__text_init(&out);
  term_run("\033[9999999999Gx\n", 15, 0, 0, &out);
  assert_int_equal(out.len, UVT__TERM_LINE_MAX + 2);
  assert_int_equal(out.base[UVT__TERM_LINE_MAX], 'x');
  uvt__text_free(&out);
}

/* M-TOOLS-7: a line longer than the filter keeps goes out in segments; a
 * "\r" then rewrites the last segment only, and nothing is lost. */
static void test_term_long_line(void **state) {
  char in[3010];
  uvt__text_t out;
  size_t i;

  memset(in, 'x', 3000);
  memcpy(in + 3000, "\ry\n", 3);
  uvt__text_init(&out);
  term_run(in, 3003, 1500, 3001, &out);
  assert_int_equal(out.err, 0);
  assert_int_equal(out.len, 3001);
  for (i = 0; i < 3000; i++)
    assert_int_equal(out.base[i], i == 2 * UVT__TERM_LINE_MAX ? 'y' : 'x');
  assert_int_equal(out.base[3000], '\n');
  uvt__text_free(&out);

  /* A command string that never ends hides at most UVT__TERM_STRING_MAX
   * bytes. */
  {
    size_t n = UVT__TERM_STRING_MAX + 100;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'z', n);
    big[0] = '\033';
    big[1] = ']';
    uvt__text_init(&out);
    term_run(big, n, n / 3, n / 2, &out);
    assert_true(out.len > 0 && out.len < 100);
    uvt__text_free(&out);
    free(big);
  }
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-8: result size                                                  */

#define C35_LINE "test %d ok .......................................\n"

/* Check a cut result against the whole output `full`: a head and a tail of
 * it, exactly, with one line counting what is between; at most
 * `max_bytes` of output. */
static void check_cut(const char *text, const char *full, size_t max_bytes,
                      const char *status) {
  const char *mark = strstr(text, "[... ");
  const char *mark_end;
  unsigned long long bytes, lines, nl = 0;
  size_t head, tail, full_len = strlen(full), out_len = output_len(text);
  size_t i;

  assert_non_null(mark);
  assert_null(strstr(mark + 1, "[... "));
  assert_true(out_len <= max_bytes);
  assert_int_equal(sscanf(mark, "[... %llu bytes (%llu line", &bytes, &lines),
                   2);
  mark_end = strchr(mark, '\n');
  assert_non_null(mark_end);
  assert_true(ends_with(text, status));
  head = (size_t)(mark - text);
  tail = out_len - (size_t)(mark_end + 1 - text);
  /* The head and the tail are the output's own bytes; the count closes the
   * gap: nothing went unaccounted. */
  assert_memory_equal(text, full, head);
  assert_memory_equal(mark_end + 1, full + full_len - tail, tail);
  assert_int_equal(head + bytes + tail, full_len);
  for (i = head; i < full_len - tail; i++)
    nl += full[i] == '\n';
  assert_int_equal(lines, nl);
}

/* C-35 (M-TOOLS-8): a 6000-line test log read with one task_output: at
 * most 10 000 bytes (M-TOOLS-15) of output, the first lines and the last ones,
 * cut at line ends, and one line naming how many bytes were left out. */
static void test_c35_big_log(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  char *full;
  size_t n = 0;
  int i;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "for i in $(seq 1 6000); do echo \"test $i ok "
              ".......................................\"; done";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 0);
  a = args_id("bash-1");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 0);

  full = malloc(6000 * 64);
  assert_non_null(full);
  for (i = 1; i <= 6000; i++)
    n += (size_t)sprintf(full + n, C35_LINE, i);
  check_cut(r.text, full, UVT_TOOLS_MAX_BYTES_DEFAULT,
            "[status: completed, exit code: 0]");
  assert_int_equal(strncmp(r.text, "test 1 ok ...", 13), 0);
  assert_non_null(strstr(r.text, "\ntest 6000 ok ......................"
                                 ".................\n[status: completed"));
  /* Line boundaries: the marker is a line of its own between whole lines. */
  assert_non_null(strstr(r.text, " ok .......................................\n"
                                 "[... "));
  assert_non_null(strstr(r.text, " left out ...]\ntest "));
  assert_int_equal(UVT_TOOLS_MAX_BYTES_DEFAULT, 10000); /* M-TOOLS-15 */
  free(full);
  tfix_close(&t);
}

/* C-35's siblings (M-TOOLS-8): run_command is cut the same way; the
 * max_bytes argument and option; one huge line of multi-byte characters is
 * cut at character boundaries; stderr output; a zero max_bytes is a tool
 * error and a tiny one is raised to the minimum. */
static void test_c35_siblings(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  char full[8192];
  size_t n = 0;
  int i;

  uvt_tools_options_init(&to);
  to.max_bytes = 2000;
  tfix_init_opts(&t, NULL, &to);

  for (i = 1; i <= 100; i++)
    n += (size_t)sprintf(full + n, C35_LINE, i);
  uvt_tools_args_init(&a);
  a.command = "for i in $(seq 1 100); do echo \"test $i ok "
              ".......................................\"; done; exit 1";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  check_cut(r.text, full, 2000, "\n[status: completed, exit code: 1]");

  /* The call's max_bytes wins over the option; it fits now. */
  a.max_bytes = 100000;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(output_len(r.text), n);
  assert_memory_equal(r.text, full, n);

  /* One line of 3-byte characters on stderr, no newline at all. */
  a.command = "for i in $(seq 1 500); do printf '\\xe2\\x96\\x88' >&2; done";
  a.max_bytes = 300;
  call(&t, &r, &t.a, "run_command", &a);
  n = 0;
  memcpy(full, "[stderr]\n", 9);
  n = 9;
  for (i = 0; i < 500; i++) {
    memcpy(full + n, "\xe2\x96\x88", 3);
    n += 3;
  }
  full[n++] = '\n';
  full[n] = '\0';
  {
    /* The head ends with the newline added after its cut character. */
    const char *mark = strstr(r.text, "\n[... ");
    assert_non_null(mark);
    assert_int_equal(((size_t)(mark - r.text) - 9) % 3, 0);
    assert_int_equal(strncmp(r.text, "[stderr]\n\xe2\x96\x88", 12), 0);
    assert_true(ends_with(r.text, "\xe2\x96\x88\n[status: completed, exit "
                                  "code: 0]"));
    assert_true(output_len(r.text) <= 300);
  }

  /* Bad and tiny values. */
  a.command = "seq 1 1000";
  a.max_bytes = 0;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "max_bytes must be"));
  a.max_bytes = -5;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  a.max_bytes = 10;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(output_len(r.text) <= UVT_TOOLS_MAX_BYTES_MIN);
  assert_true(output_len(r.text) > UVT_TOOLS_MAX_BYTES_MIN / 2);
  assert_int_equal(strncmp(r.text, "1\n2\n", 4), 0);
  assert_non_null(strstr(r.text, "\n1000\n[status: completed"));
  a = args_id("bash-1");
  a.max_bytes = 0;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "max_bytes must be"));
  tfix_close(&t);
}

/* M-TOOLS-8: output that fits is not touched, exactly at the limit too. */
static void test_clip_fits(void **state) {
  uvt__text_t out;
  char buf[600];

  memset(buf, 'a', sizeof(buf));
  buf[299] = '\n';
  uvt__text_init(&out);
  uvt__text_clip(&out, buf, 300, 300);
  assert_int_equal(out.len, 300);
  assert_memory_equal(out.base, buf, 300);
  uvt__text_free(&out);
  /* A text without a final newline needs one more byte. */
  uvt__text_init(&out);
  uvt__text_clip(&out, buf, 298, 299);
  assert_int_equal(out.len, 299);
  assert_int_equal(out.base[298], '\n');
  uvt__text_free(&out);
  uvt__text_init(&out);
  uvt__text_clip(&out, buf, 299, 299);
  assert_true(out.len <= 299);
  assert_non_null(strstr(out.base, "[... "));
  assert_int_equal(out.base[out.len - 1], '\n');
  uvt__text_free(&out);
  uvt__text_init(&out);
  uvt__text_clip(&out, buf, 0, 300);
  assert_int_equal(out.len, 0);
  uvt__text_free(&out);
  /* A cut inside one line says so: the head's newline is the tools', and
   * "(0 lines)" would read as if no line had lost anything. */
  uvt__text_init(&out);
  uvt__text_clip(&out, buf, 299, 256);
  assert_true(out.len <= 256);
  assert_non_null(strstr(out.base, "a\n[... "));
  assert_non_null(strstr(out.base, " bytes left out within one line ...]\na"));
  assert_null(strstr(out.base, "lines)"));
  uvt__text_free(&out);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-6: promotion                                                    */

typedef struct {
  char dir[64];
  char fifo[96];
  char command[256];
} gate_t;

/* A command that prints "before", then blocks until the test opens the
 * gate, then prints "after go". */
static void gate_init(gate_t *g) {
  snprintf(g->dir, sizeof(g->dir), "/tmp/uvt-tools-XXXXXX");
  assert_non_null(mkdtemp(g->dir));
  snprintf(g->fifo, sizeof(g->fifo), "%s/gate", g->dir);
  assert_int_equal(mkfifo(g->fifo, 0600), 0);
  snprintf(g->command, sizeof(g->command),
           "echo before; read x < '%s'; echo \"after $x\"", g->fifo);
}

static void gate_open(gate_t *g) {
  /* Blocks until the command has opened its end, which it does. */
  int fd = open(g->fifo, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "go\n", 3), 3);
  close(fd);
}

static void gate_free(gate_t *g) {
  unlink(g->fifo);
  rmdir(g->dir);
}

static int notice_seen(void *arg) {
  tfix_t *t = arg;
  return t->notices > 0;
}

/* C-32, M-TOOLS-6: run_command with yield_ms answers while its command
 * still runs: the output so far, one line naming the task it goes on as,
 * [status: running].  The command is not stopped; cancelling the answered
 * call does nothing to it; its end gives the usual notice (M-TOOLS-2) and
 * task_output reads the rest. */
static void test_c32_yield_promotes(void **state) {
  tfix_t t;
  rec_t r;
  rec_t r2;
  uvt_tools_args_t a;
  uvt_snapshot_t s;
  gate_t g;
  char id[UVT_ID_MAX];
  char both[256];
  const char *line;

  gate_init(&g);
  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = g.command;
  a.yield_ms = 100;
  a.timeout_ms = 300000;
  call_start(&t, &r, &t.a, "run_command", &a);
  snprintf(id, sizeof(id), "%s", uvt_tools_call_task(&r.req));
  assert_string_equal(id, "bash-1");
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  /* The line names the runtime limit the call gave: it still applies. */
  assert_true(ends_with(r.text, " ms; it goes on in the background as "
                                "bash-1: task_output reads more of its "
                                "output, task_kill stops it; its limit "
                                "of 300000 ms still applies)\n"
                                "[status: running]"));
  line = strstr(r.text, "(still running after ");
  assert_non_null(line);
  assert_true(line == r.text || line[-1] == '\n');

  /* The call is over: cancelling it now is refused and stops nothing. */
  assert_int_equal(uvt_tools_call_abort(&r.req), UV_EINVAL);
  assert_int_equal(uvt_get(t.f.reg, id, &t.a, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  assert_int_equal(s.reported, 0);
  uvt_snapshot_cleanup(&s);

  gate_open(&g);
  fixture_run_until(&t.f, notice_seen, &t);
  assert_int_equal(t.notices, 1);
  assert_ptr_equal(t.notice_owner, &t.a);
  assert_non_null(strstr(t.notice, "Task bash-1 "));
  assert_true(ends_with(t.notice, "[status: completed, exit code: 0]"));

  a = args_id(id);
  call(&t, &r2, &t.a, "task_output", &a);
  assert_true(ends_with(r2.text, "after go\n[status: completed, exit code: "
                                 "0]"));
  /* "before" came in one of the two results, once. */
  {
    size_t head = (size_t)(line - r.text);
    size_t rest = strlen(r2.text);
    assert_true(head + rest < sizeof(both));
    memcpy(both, r.text, head);
    memcpy(both + head, r2.text, rest + 1);
  }
  assert_string_equal(both, "before\nafter go\n[status: completed, exit "
                            "code: 0]");
  tfix_close(&t);
  gate_free(&g);
}

/* M-TOOLS-6: before its yield a call still owns its command (cancelling
 * stops it); a command that ends before the yield answers as without one;
 * the options' yield applies when the call gives none, and yield_ms 0
 * runs to the end whatever the options say; a negative one is a tool
 * error. */
static void test_yield_siblings(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  uvt_snapshot_t s;
  char id[UVT_ID_MAX];

  uvt_tools_options_init(&to);
  assert_int_equal(to.yield_ms, 0);
  to.yield_ms = 100;
  tfix_init_opts(&t, NULL, &to);
  uvt_tools_args_init(&a);
  assert_int_equal(a.yield_ms, -1);
  assert_int_equal(a.max_bytes, -1);

  /* Cancelled before the yield: stopped, as without one. */
  a.command = "exec sleep 30";
  a.yield_ms = 60000;
  call_start(&t, &r, &t.a, "run_command", &a);
  snprintf(id, sizeof(id), "%s", uvt_tools_call_task(&r.req));
  assert_int_equal(uvt_tools_call_abort(&r.req), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.status, UVT_EABORTED);
  run_until_settled(&t, &t.a, id);
  assert_int_equal(uvt_get(t.f.reg, id, &t.a, &s), 0);
  assert_int_equal(s.status, UVT_KILLED);
  assert_string_equal(s.kill_reason, "call cancelled");
  uvt_snapshot_cleanup(&s);

  /* Ends before the yield: the usual result. */
  a.command = "echo hi";
  call(&t, &r, &t.a, "run_command", &a);
  assert_string_equal(r.text, "hi\n[status: completed, exit code: 0]");

  /* yield_ms 0 beats the options' 100 ms. */
  a.command = "sleep 0.3; echo done";
  a.yield_ms = 0;
  call(&t, &r, &t.a, "run_command", &a);
  assert_string_equal(r.text, "done\n[status: completed, exit code: 0]");

  /* The options' yield; then the promoted task is stopped with task_kill
   * (which reports it: no notice). */
  a.command = "exec sleep 30";
  a.yield_ms = -1;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "as bash-4: task_output reads more of its "
                                "output, task_kill stops it; its limit "
                                "of 600000 ms still applies)\n"
                                "[status: running]"));
  /* C-32's sibling: a wait that asks for more than the yield answers at
   * the yield (a client's 60 s request timeout never ends it), the task
   * still running, and says to wait again: task_output and task_wait. */
  a = args_id("bash-4");
  a.wait = 1;
  a.timeout_ms = 120000;
  call(&t, &r, &t.a, "task_output", &a);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "(waited 100 ms; the task has not ended: "
                                 "wait again to wait longer)\n"
                                 "[status: running]"));
  {
    const char *ids[] = {"bash-4"};
    uvt_tools_args_init(&a);
    a.task_ids = ids;
    a.task_ids_len = 1;
    a.timeout_ms = 120000;
    call(&t, &r, &t.a, "task_wait", &a);
    assert_int_equal(r.is_error, 0);
    assert_true(strncmp(r.text, "0 of 1 task ended (waited ", 26) == 0);
    assert_non_null(strstr(r.text, "wait again to wait longer"));
  }
  a = args_id("bash-4");
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 0);
  run_until_settled(&t, &t.a, "bash-4");

  uvt_tools_args_init(&a);
  a.command = "true";
  a.yield_ms = -2;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "yield_ms must be"));
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-5: write_stdin, and run_in_background's stdin and tty          */

enum { START_STDIN = 1, START_TTY = 2 };

/* Start `command` with run_in_background, its stdin open (START_STDIN) or
 * on a terminal (START_TTY); the id goes to `id`, the answer to `r`. */
static void start_interactive(tfix_t *t, rec_t *r, const char *command, int how,
                              char id[UVT_ID_MAX]) {
  uvt_tools_args_t a;
  const char *p;

  uvt_tools_args_init(&a);
  a.command = command;
  if (how == START_STDIN)
    a.stdin_pipe = 1;
  else
    a.tty = 1;
  call(t, r, &t->a, "run_in_background", &a);
  assert_int_equal(r->is_error, 0);
  assert_true(strncmp(r->text, "Started ", 8) == 0);
  p = r->text + 8;
  snprintf(id, UVT_ID_MAX, "%.*s", (int)strcspn(p, "."), p);
}

/* write_stdin `chars` (NULL: none) to `id`; yield_ms and close_stdin -1 =
 * not given. */
static void write_stdin(tfix_t *t, rec_t *r, const char *id, const char *chars,
                        int64_t yield_ms, int close_stdin) {
  uvt_tools_args_t a = args_id(id);

  a.chars = chars;
  a.yield_ms = yield_ms;
  a.close_stdin = close_stdin;
  call(t, r, &t->a, "write_stdin", &a);
}

/* The waits the tools made that ended early (aborted) and at their
 * deadline. */
static void waits_ended(tfix_t *t, uint64_t *aborted, uint64_t *timed_out) {
  uvt_metrics_t m;

  memset(&m, 0, sizeof(m));
  uvt_registry_metrics(t->f.reg, &m);
  *aborted = m.waits_aborted;
  *timed_out = m.waits_timed_out;
}

/* M-TOOLS-6 with M-TOOLS-5: write_stdin controls a promoted run_command
 * task: a poll reads it (it has no input, and that is no error), input
 * to it is refused, and a poll with a yield waits for its end. */
static void test_write_stdin_polls_promoted(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  gate_t g;

  gate_init(&g);
  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = g.command;
  a.yield_ms = 50;
  a.timeout_ms = 600000;
  call_start(&t, &r, &t.a, "run_command", &a);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "[status: running]"));

  write_stdin(&t, &r, "bash-1", NULL, 0, -1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "[status: running]"));
  write_stdin(&t, &r, "bash-1", "x\n", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "does not take input"));
  write_stdin(&t, &r, "bash-1", NULL, 0, 1);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "does not take input"));

  gate_open(&g);
  write_stdin(&t, &r, "bash-1", "", 30000, -1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "after go\n[status: completed, exit code: 0]"));
  tfix_close(&t);
  gate_free(&g);
}

/* M-TOOLS-5: run_in_background with stdin keeps the command's stdin open
 * and says how to write to it; write_stdin writes, waits, and answers as
 * soon as the program printed a prompt and went quiet: well before the
 * yield (its wait was aborted, it did not time out), and not at the first
 * pause after a complete line ("done a" comes 0.3 s after "working on a"
 * and is in the same answer).  A pause after a line ending in escape
 * sequences and a carriage return (bash's bracketed-paste mode after the
 * echo of a command line) is no prompt either.  A poll (no chars) waits
 * for the first prompt the same way. */
static void test_write_stdin_prompt(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];
  uint64_t aborted;
  uint64_t timed_out;

  tfix_init(&t);
  start_interactive(&t, &r,
                    "printf '> '; while IFS= read -r l; do "
                    "[ \"$l\" = q ] && exit 4; "
                    "echo \"working on $l\"; sleep 0.3; echo \"done $l\"; "
                    "printf '\\033[?2004l\\r'; sleep 0.3; "
                    "printf '\\033[?2004h> '; done",
                    START_STDIN, id);
  assert_string_equal(r.text, "Started bash-1. Its stdin is open: "
                              "write_stdin sends it input (close_stdin "
                              "ends it).\n[status: running]");

  write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "> \n[status: running]");

  write_stdin(&t, &r, id, "a\n", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "> working on a\ndone a\n> \n[status: running]");
  waits_ended(&t, &aborted, &timed_out);
  assert_int_equal(aborted, 2);
  assert_int_equal(timed_out, 0);

  /* The end of the task ends the wait too, with its status. */
  write_stdin(&t, &r, id, "q\n", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "(no new output)\n"
                              "[status: completed, exit code: 4]");
  waits_ended(&t, &aborted, &timed_out);
  assert_int_equal(aborted, 2);
  assert_int_equal(timed_out, 0);
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* Output of `id` waiting to be read: at least `want` bytes, stdout and
 * stderr together. */
typedef struct {
  tfix_t *t;
  const char *id;
  size_t want;
} unread_t;

static int has_unread(void *arg) {
  unread_t *u = arg;
  uvt__peek_t pk;

  assert_int_equal(uvt__process_peek(u->t->f.reg, u->id, &u->t->a, &pk), 0);
  return pk.unread[0] + pk.unread[1] >= u->want;
}

static void run_until_unread(tfix_t *t, const char *id, size_t want) {
  unread_t u = {t, id, want};
  fixture_run_until(&t->f, has_unread, &u);
}

/* The public looks (include/uvtasks/process.h) the tools and the server
 * use instead of the producer's records: uvt_process_peek() (M-TOOLS-5),
 * uvt_process_last_line() (M-MCP-5), uvt_process_unread_bytes()
 * (M-MCP-11) and uvt_process_cgroup_dir() (M-MCP-15).  They consume
 * nothing, keep the fence (R-OWN-2) and answer bad arguments with their
 * errors. */
static void test_public_looks(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];
  uvt_process_peek_t pk;
  char line[64];
  size_t bytes;
  int i;

  tfix_init(&t);
  start_interactive(&t, &r, "printf 'one\\ntwo\\r> '; read l; echo \"got$l\"",
                    START_STDIN, id);
  run_until_unread(&t, id, 10);
  for (i = 0; i < 2; i++) { /* the second look sees the same */
    assert_int_equal(uvt_process_peek(t.f.reg, id, &t.a, &pk), 0);
    assert_int_equal(pk.unread[0], 10);
    assert_int_equal(pk.unread[1], 0);
    assert_int_equal(pk.dropped[0], 0);
    assert_int_equal(pk.tail_len[0], 6);
    assert_memory_equal(pk.tail[0], "two\r> ", 6);
    assert_int_equal(pk.tail_len[1], 0);
    assert_int_equal(pk.stdin_pipe, 1);
    assert_int_equal(pk.tty, 0);
    assert_int_equal(
        uvt_process_last_line(t.f.reg, id, &t.a, line, sizeof(line)), 0);
    assert_string_equal(line, ">"); /* trailing blanks skipped */
    assert_int_equal(uvt_process_unread_bytes(t.f.reg, id, &t.a, &bytes), 0);
    assert_int_equal(bytes, 10);
  }
  /* The fence. */
  assert_int_equal(uvt_process_peek(t.f.reg, id, &t.b, &pk), UVT_EFOREIGN);
  assert_int_equal(uvt_process_last_line(t.f.reg, id, &t.b, line, sizeof(line)),
                   UVT_EFOREIGN);
  assert_int_equal(uvt_process_unread_bytes(t.f.reg, id, &t.b, &bytes),
                   UVT_EFOREIGN);
  assert_int_equal(bytes, 0);
  /* Bad arguments. */
  assert_int_equal(uvt_process_peek(NULL, id, &t.a, &pk), UV_EINVAL);
  assert_int_equal(uvt_process_peek(t.f.reg, NULL, &t.a, &pk), UV_EINVAL);
  assert_int_equal(uvt_process_peek(t.f.reg, id, &t.a, NULL), UV_EINVAL);
  assert_int_equal(uvt_process_peek(t.f.reg, "bash-99", &t.a, &pk),
                   UVT_ENOTASK);
  assert_int_equal(uvt_process_last_line(t.f.reg, id, &t.a, line, 0),
                   UV_EINVAL);
  assert_int_equal(uvt_process_last_line(t.f.reg, id, &t.a, NULL, 8),
                   UV_EINVAL);
  assert_int_equal(uvt_process_unread_bytes(t.f.reg, id, &t.a, NULL),
                   UV_EINVAL);
  assert_int_equal(uvt_process_unread_bytes(t.f.reg, "bash-99", &t.a, &bytes),
                   UVT_ENOTASK);
  /* No cgroups asked for. */
  assert_null(uvt_process_cgroup_dir(t.f.reg));
  assert_null(uvt_process_cgroup_dir(NULL));
  /* Ended, unread: what it holds is still counted. */
  assert_int_equal(uvt_process_close_stdin(t.f.reg, id, &t.a), 0);
  run_until_settled(&t, &t.a, id);
  assert_int_equal(uvt_process_unread_bytes(t.f.reg, id, &t.a, &bytes), 0);
  assert_int_equal(bytes, 14);
  tfix_close(&t);
}

/* M-TOOLS-5: a poll asks for what is there, so a prompt the program
 * printed before the call answers it early, on stdout, on stderr (where
 * python -i prints ">>> " without a terminal) and on a terminal.  A write
 * still needs an answer that came after it: a prompt left unread before
 * the write and nothing after it waits for the yield.  A complete line
 * left unread is no prompt for a poll either.  (The first version only
 * counted output that came after the call, poll or not: a poll made after
 * the prompt came waited its whole yield, which a slow machine hit.) */
static void test_write_stdin_poll_after_prompt(void **state) {
  static const struct {
    const char *command;
    int how;
    const char *text;
  } cases[] = {
      {"printf 'ready> '; exec sleep 60", START_STDIN,
       "ready> \n[status: running]"},
      {"printf 'err> ' >&2; exec sleep 60", START_STDIN,
       "[stderr]\nerr> \n[status: running]"},
      {"printf 'tty> '; exec sleep 60", START_TTY, "tty> \n[status: running]"},
  };
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];
  uint64_t aborted;
  uint64_t timed_out;
  size_t i;

  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tfix_init(&t);
    start_interactive(&t, &r, cases[i].command, cases[i].how, id);
    run_until_unread(&t, id, 5);
    write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
    assert_int_equal(r.is_error, 0);
    assert_string_equal(r.text, cases[i].text);
    waits_ended(&t, &aborted, &timed_out);
    assert_int_equal(aborted, 1);
    assert_int_equal(timed_out, 0);
    assert_int_equal(uvt_kill(t.f.reg, id, &t.a, NULL, NULL), 0);
    run_until_settled(&t, &t.a, id);
    tfix_close(&t);
  }

  /* A write: the old prompt is no answer to it. */
  tfix_init(&t);
  start_interactive(&t, &r, "printf 'p> '; read x; exec sleep 60", START_STDIN,
                    id);
  run_until_unread(&t, id, 3);
  write_stdin(&t, &r, id, "x\n", 300, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "p> \n[status: running]");
  waits_ended(&t, &aborted, &timed_out);
  assert_int_equal(aborted, 0);
  assert_int_equal(timed_out, 1);

  /* A poll of a complete line: no prompt, the yield ends it. */
  start_interactive(&t, &r, "echo 'working'; exec sleep 60", START_STDIN, id);
  run_until_unread(&t, id, 8);
  write_stdin(&t, &r, id, NULL, 300, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "working\n[status: running]");
  waits_ended(&t, &aborted, &timed_out);
  assert_int_equal(aborted, 0);
  assert_int_equal(timed_out, 2);
  assert_int_equal(uvt_kill(t.f.reg, "bash-1", &t.a, NULL, NULL), 0);
  assert_int_equal(uvt_kill(t.f.reg, "bash-2", &t.a, NULL, NULL), 0);
  run_until_settled(&t, &t.a, "bash-1");
  run_until_settled(&t, &t.a, "bash-2");
  tfix_close(&t);
}

/* M-TOOLS-5: without a prompt the answer comes at the yield, with what
 * arrived by then; yield_ms 0 answers at once; close_stdin ends the input
 * after chars (the program reads end of file and ends); a poll of a task
 * whose input is closed still reads. */
static void test_write_stdin_yield_close(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];
  uint64_t aborted;
  uint64_t timed_out;

  tfix_init(&t);
  start_interactive(&t, &r,
                    "while IFS= read -r l; do echo \"got $l\"; done; "
                    "echo eof; exit 3",
                    START_STDIN, id);
  write_stdin(&t, &r, id, "one\n", 200, -1);
  assert_int_equal(r.is_error, 0);
  waits_ended(&t, &aborted, &timed_out);
  assert_int_equal(aborted, 0);
  assert_int_equal(timed_out, 1);
  /* On a slow machine the line may come after the yield (the last call
   * then shows it). */
  assert_true(strcmp(r.text, "got one\n[status: running]") == 0 ||
              strcmp(r.text, "(no new output)\n[status: running]") == 0);

  write_stdin(&t, &r, id, "two\n", 0, -1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "[status: running]"));

  write_stdin(&t, &r, id, "three\n", UVT_TOOLS_WRITE_YIELD_MAX_MS, 1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "got three\neof\n"
                                "[status: completed, exit code: 3]"));
  /* Ended: a poll still reads (nothing is left), a write is refused. */
  write_stdin(&t, &r, id, "", -1, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text,
                      "(no new output)\n[status: completed, exit code: 3]");
  tfix_close(&t);
}

/* M-TOOLS-5: every way write_stdin can fail is a tool error with a text a
 * model can act on and the status line; nothing is written or consumed. */
static void test_write_stdin_errors(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  fake_t fk;
  char id[UVT_ID_MAX];
  char plain[UVT_ID_MAX];
  char fid[UVT_ID_MAX];
  char *big;
  size_t big_len = UVT_PROCESS_STDIN_CAP_BYTES + 1;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text,
                      "write_stdin needs task_id (a string such as bash-1).");
  write_stdin(&t, &r, "bash-9", "x", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text,
                      "No task bash-9. task_list shows the tasks you can see.");

  /* A task started without stdin: writes and closing its input are
   * refused; a poll reads it (M-TOOLS-5). */
  uvt_tools_args_init(&a);
  a.command = "echo plain; exec sleep 30";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_string_equal(r.text, "Started bash-1.\n[status: running]");
  snprintf(plain, sizeof(plain), "bash-1");
  write_stdin(&t, &r, plain, "x\n", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text,
                      "bash-1 does not take input: it was started without "
                      "stdin or tty. To write to a command, start it with "
                      "run_in_background and \"stdin\": true (or \"tty\": "
                      "true).\n[status: running]");
  write_stdin(&t, &r, plain, NULL, -1, 1);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "does not take input"));
  /* Nothing was consumed by the refusals. */
  a = args_id(plain);
  a.timeout_ms = 10000;
  call(&t, &r, &t.a, "task_output", &a);
  assert_true(strncmp(r.text, "plain\n", 6) == 0);
  write_stdin(&t, &r, plain, NULL, 0, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "(no new output)\n[status: running]");

  /* Not a process task. */
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(t.f.reg, &fk, NULL, "job", &t.a, fid), 0);
  write_stdin(&t, &r, fid, "x", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "does not take input"));
  write_stdin(&t, &r, fid, "", 0, -1);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "[status: running]"));

  /* Another session's task. */
  start_interactive(&t, &r, "cat", START_STDIN, id);
  {
    uvt_tools_args_t b = args_id(id);
    b.chars = "x\n";
    call(&t, &r, &t.b, "write_stdin", &b);
    assert_int_equal(r.is_error, 1);
    assert_string_equal(r.text, "Task bash-2 belongs to another session.");
  }

  /* Bad yield_ms and max_bytes: refused before anything is written. */
  a = args_id(id);
  a.chars = "not sent\n";
  a.yield_ms = -2;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, "yield_ms must be 0 (answer at once) or a "
                              "positive number of milliseconds (default "
                              "250, at most 30000).");
  a.yield_ms = -1;
  a.max_bytes = 0;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "max_bytes must be"));

  /* More input than the task has room for (UV_ENOBUFS): nothing of it is
   * sent, and a smaller write still goes. */
  big = malloc(big_len);
  assert_non_null(big);
  memset(big, 'y', big_len);
  a = args_id(id);
  a.chars = big;
  a.chars_len = big_len;
  call(&t, &r, &t.a, "write_stdin", &a);
  free(big);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text,
                      "Nothing was sent: bash-2 cannot take 1048577 bytes "
                      "more now (the input it has not read yet and these may "
                      "not go beyond its limit, 1 MiB for the tasks "
                      "run_in_background starts). Send less at a time, or "
                      "poll with empty chars until it has read more, then "
                      "send again.\n[status: running]");
  write_stdin(&t, &r, id, "small\n", UVT_TOOLS_WRITE_YIELD_MAX_MS, 1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "small\n[status: completed, exit code: 0]");

  /* Input closed by an earlier close_stdin, while the task runs on. */
  start_interactive(&t, &r, "cat; printf 'closed> '; exec sleep 30",
                    START_STDIN, id);
  write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, 1);
  assert_string_equal(r.text, "closed> \n[status: running]");
  write_stdin(&t, &r, id, "late\n", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text,
                      "Nothing was sent: the input of bash-3 is closed "
                      "(close_stdin ended it, or the program closed its "
                      "stdin or exited). task_output reads its output, "
                      "task_kill stops it.\n[status: running]");
  /* A poll is no write: it still reads. */
  write_stdin(&t, &r, id, NULL, 0, -1);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "(no new output)\n[status: running]");

  /* The program closed its stdin itself. */
  start_interactive(&t, &r, "exec 0<&-; printf 'shut> '; exec sleep 30",
                    START_STDIN, id);
  write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_string_equal(r.text, "shut> \n[status: running]");
  write_stdin(&t, &r, id, "anyone?\n", -1, -1);
  if (!r.is_error) {
    /* The first write may still fit in the socket's buffer before its
     * closing is seen: the next one cannot. */
    write_stdin(&t, &r, id, "anyone?\n", -1, -1);
  }
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "the input of bash-4 is closed"));

  /* An ended task: the write is refused, nothing was consumed. */
  start_interactive(&t, &r, "echo last words", START_STDIN, id);
  run_until_settled(&t, &t.a, id);
  write_stdin(&t, &r, id, "x\n", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, "Nothing was sent: bash-5 has ended, so it "
                              "takes no more input. task_output shows what "
                              "it printed last.\n"
                              "[status: completed, exit code: 0]");
  a = args_id(id);
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "last words\n[status: completed, exit code: 0]");

  uvt_kill(t.f.reg, plain, &t.a, NULL, NULL);
  uvt_kill(t.f.reg, "bash-3", &t.a, NULL, NULL);
  uvt_kill(t.f.reg, "bash-4", &t.a, NULL, NULL);
  uvt_kill(t.f.reg, fid, &t.a, NULL, NULL);
  run_until_settled(&t, &t.a, plain);
  run_until_settled(&t, &t.a, "bash-3");
  run_until_settled(&t, &t.a, "bash-4");
  tfix_close(&t);
}

/* M-TOOLS-5 on a terminal (tty): the answer reads as a transcript for a
 * model (M-TOOLS-7): the echo of what was typed, "\r\n" as plain line
 * ends, no colours; Enter may be "\r" or "\n"; "\x03" is Ctrl-C for the
 * foreground job (here the task's leader: a death by a signal nobody asked
 * for, P-END-2). */
static void test_write_stdin_tty(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];

  tfix_init(&t);
  start_interactive(&t, &r,
                    "printf '\\033[1mname?\\033[0m '; read n; "
                    "printf '\\033[32mhi %s\\033[0m\\n' \"$n\"; "
                    "printf 'age? '; read a; echo \"$a years\"; "
                    "printf 'wait? '; exec sleep 30",
                    START_TTY, id);
  assert_string_equal(r.text,
                      "Started bash-1. It runs on a terminal: write_stdin "
                      "types into it (end a line with \"\\n\" or \"\\r\"; "
                      "\"\\u0003\" is Ctrl-C, \"\\u0004\" is Ctrl-D; "
                      "close_stdin sends a last Ctrl-D and ends the input "
                      "for good).\n"
                      "[status: running]");
  write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_string_equal(r.text, "name? \n[status: running]");
  write_stdin(&t, &r, id, "bob\r", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_string_equal(r.text, "name? bob\nhi bob\nage? \n[status: running]");
  write_stdin(&t, &r, id, "42\n", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_string_equal(r.text, "age? 42\n42 years\nwait? \n[status: running]");
  write_stdin(&t, &r, id, "\x03", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "[status: killed, signal: SIGINT]"));
  assert_null(strchr(r.text, '\r'));
  assert_null(strchr(r.text, '\033'));
  tfix_close(&t);
}

/* Write `chars` to `id` and read on (polls) until the output shown ends
 * with `until` or the task ended: `out` gets the outputs of the results
 * joined (without "(no new output)"), then the last status line.  An
 * early answer is a guess (M-TOOLS-5): a program descheduled between two
 * of its writes, on a busy machine, can look like one that waits, and the
 * next poll then reads on; the joined text is the same either way. */
static void write_until(tfix_t *t, rec_t *r, const char *id, const char *chars,
                        const char *until, char *out, size_t size) {
  static const char none[] = "(no new output)\n";
  const char *st = NULL;
  size_t n = 0;
  size_t k;
  int i;

  out[0] = '\0';
  for (i = 0; i < 20; i++) {
    write_stdin(t, r, id, i == 0 ? chars : NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS,
                -1);
    assert_int_equal(r->is_error, 0);
    st = strstr(r->text, "[status: ");
    assert_non_null(st);
    k = (size_t)(st - r->text);
    if (k == sizeof(none) - 1 && strncmp(r->text, none, k) == 0)
      k = 0;
    assert_true(n + k < size);
    memcpy(out + n, r->text, k);
    n += k;
    out[n] = '\0';
    if (ends_with(out, until) || !ends_with(r->text, "[status: running]"))
      break;
  }
  assert_true(n + strlen(st) < size);
  strcpy(out + n, st);
}

/* M-TOOLS-5 on a terminal: "\x04" in chars is a Ctrl-D that ends one
 * program's input (cat inside a script) and leaves the terminal open for
 * what comes next, as run_in_background's text tells the model; a
 * close_stdin ends the input for good. */
static void test_write_stdin_tty_ctrl_d(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];

  tfix_init(&t);
  start_interactive(&t, &r,
                    "printf 'in> '; cat >/dev/null; printf 'next> '; read x; "
                    "echo \"got $x\"; printf 'last> '; exec sleep 30",
                    START_TTY, id);
  write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_string_equal(r.text, "in> \n[status: running]");
  write_stdin(&t, &r, id, "abc\r\x04", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "next> \n[status: running]"));
  write_stdin(&t, &r, id, "more\r", UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
  assert_string_equal(r.text,
                      "next> more\ngot more\nlast> \n[status: running]");
  write_stdin(&t, &r, id, NULL, 0, 1);
  assert_int_equal(r.is_error, 0);
  write_stdin(&t, &r, id, "again\r", 0, -1);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "is closed"));
  uvt_kill(t.f.reg, id, &t.a, NULL, NULL);
  run_until_settled(&t, &t.a, id);
  tfix_close(&t);
}

/* M-TOOLS-5: a Python REPL on a terminal, as a model drives it: wait for
 * the prompt, evaluate, evaluate something slow (the answer waits for it:
 * the echo of the line is no prompt), end it with close_stdin (Ctrl-D);
 * a write after the end is a tool error. */
/* Is task `pid` reading its terminal now?  Either the terminal is in raw
 * mode (ICANON and ECHO off: readline is waiting for a key), or, for a
 * program without readline, it is blocked in read(0) on a cooked
 * terminal.  Asked from outside: tcgetattr on its fd 0 (the terminal's
 * settings, shared by every fd of it) and /proc/<pid>/syscall. */
static int tty_reader_waiting(int pid) {
  struct termios tio;
  char path[64];
  char buf[128];
  int fd;
  long nr = -1;
  unsigned long arg0 = 1;
  ssize_t n;

  snprintf(path, sizeof(path), "/proc/%d/fd/0", pid);
  fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = tcgetattr(fd, &tio);
  close(fd);
  if (n != 0)
    return 0;
  if ((tio.c_lflag & (ICANON | ECHO)) == 0)
    return 1;
  snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  if (sscanf(buf, "%ld 0x%lx", &nr, &arg0) != 2)
    return 0;
  return nr == 0 /* read */ && arg0 == 0;
}

/* The CI flake of issue 19: the REPL's prompt is not enough, a line sent
 * before readline has the terminal in raw mode is echoed by the kernel
 * and drawn again by readline.  Wait (up to 20 s) for the reader itself. */
static void wait_tty_reader(tfix_t *t, const char *id) {
  struct timespec ts = {0, 5 * 1000 * 1000};
  int pid = uvt_process_pid(t->f.reg, id, &t->a);
  int i;

  assert_true(pid > 0);
  for (i = 0; i < 4000; i++) {
    if (tty_reader_waiting(pid))
      return;
    nanosleep(&ts, NULL);
  }
  fail_msg("task %s (pid %d) never waited for its terminal's input", id, pid);
}

static void test_write_stdin_python(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];
  char out[1024];

  tfix_init(&t);
  start_interactive(&t, &r, "python3 -q -i", START_TTY, id);
  write_until(&t, &r, id, NULL, ">>> \n", out, sizeof(out));
  assert_string_equal(out, ">>> \n[status: running]");
  wait_tty_reader(&t, id);
  write_until(&t, &r, id, "1+1\n", "\n>>> \n", out, sizeof(out));
  assert_string_equal(out, ">>> 1+1\n2\n>>> \n[status: running]");
  wait_tty_reader(&t, id);
  write_until(&t, &r, id, "import time; time.sleep(0.2); print(\"done\")\n",
              "\n>>> \n", out, sizeof(out));
  assert_string_equal(out, ">>> import time; time.sleep(0.2); "
                           "print(\"done\")\ndone\n>>> \n[status: running]");
  write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, 1);
  assert_int_equal(r.is_error, 0);
  assert_true(ends_with(r.text, "[status: completed, exit code: 0]"));
  write_stdin(&t, &r, id, "1+1\n", -1, -1);
  assert_int_equal(r.is_error, 1);
  assert_true(strncmp(r.text, "Nothing was sent: bash-1 has ended", 34) == 0);
  assert_int_equal(t.notices, 0);
  tfix_close(&t);
}

/* M-TOOLS-5: aborting a write_stdin call stops its wait (UVT_EABORTED)
 * and consumes nothing: what it wrote was written and its answer is read
 * later; detaching stops one with UVT_ECLOSING. */
static void test_write_stdin_abort_detach(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  char id[UVT_ID_MAX];

  tfix_init(&t);
  start_interactive(&t, &r, "cat", START_STDIN, id);
  a = args_id(id);
  a.chars = "kept\n";
  a.yield_ms = UVT_TOOLS_WRITE_YIELD_MAX_MS;
  call_start(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(uvt_tools_call_abort(&r.req), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.status, UVT_EABORTED);
  a = args_id(id);
  a.chars = NULL;
  a.yield_ms = 5000;
  a.close_stdin = 1;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_string_equal(r.text, "kept\n[status: completed, exit code: 0]");

  start_interactive(&t, &r, "cat", START_STDIN, id);
  a = args_id(id);
  a.chars = "x\n";
  a.yield_ms = UVT_TOOLS_WRITE_YIELD_MAX_MS;
  call_start(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(uvt_tools_detach(&t.tools, detach_cb), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.status, UVT_ECLOSING);
  assert_int_equal(t.detached, 1);
  /* The task is the registry's: its close stops it. */
  t.detached = 0;
  fixture_close(&t.f);
}

/* M-TOOLS-5 under allocation failures: failing the n-th allocation of a
 * write_stdin call (the write's queue, the looks at the output while it
 * waits, the read, the text), for every n, gives a result, a clean tool
 * error or a UV_ENOMEM callback, never a crash, a lost callback or a
 * leak. */
static void test_write_stdin_allocation_failures(void **state) {
  int n;

  assert_int_equal(
      uvt_replace_allocator(fail_malloc, fail_realloc, fail_calloc, free), 0);
  for (n = 1; n < 400; n++) {
    tfix_t t;
    rec_t r;
    uvt_tools_args_t a;
    char id[UVT_ID_MAX];

    tfix_init(&t);
    start_interactive(&t, &r, "printf '> '; exec cat", START_STDIN, id);
    write_stdin(&t, &r, id, NULL, UVT_TOOLS_WRITE_YIELD_MAX_MS, -1);
    assert_string_equal(r.text, "> \n[status: running]");
    a = args_id(id);
    /* No newline: cat writes "x" back, a line that shows something, so
     * the answer comes from a look at the output. */
    a.chars = "x";
    a.yield_ms = UVT_TOOLS_WRITE_YIELD_MAX_MS;
    alloc_count = 0;
    failed_once = 0;
    fail_at = n;
    call(&t, &r, &t.a, "write_stdin", &a);
    fail_at = 0;
    if (r.status == 0 && !r.is_error)
      assert_true(ends_with(r.text, "[status: running]"));
    else if (r.status == 0)
      assert_non_null(strstr(r.text, "not enough memory"));
    else
      assert_int_equal(r.status, UV_ENOMEM);
    assert_int_equal(uvt_kill(t.f.reg, id, &t.a, NULL, NULL), 0);
    run_until_settled(&t, &t.a, id);
    tfix_close(&t);
    if (!failed_once)
      break;
  }
  assert_true(n > 1);
  assert_int_equal(uvt_replace_allocator(malloc, realloc, calloc, free), 0);
}

/* P-LEFT-1 through the tool surface: an ended task whose session still
 * runs says so, with the count of this moment and how to stop it, in the
 * end notice, task_output, run_command's result and task_list; shapes:
 * a plain `&` job, a `set -m` job (a group of its own) and `nohup timeout`
 * (GNU timeout puts itself in a group of its own).  Once they are stopped
 * the lines say that what it left has ended (or left its session: without
 * cgroups, the session is all that is seen). */
static int left_gone(void *arg) {
  return bash1_left_gone(arg);
}

static void test_leftovers_in_texts(void **state) {
  /* The `timeout` shape waits until timeout has started its child, so the
   * count (2) is known. */
  /* P-OUT-6: a leftover that holds the task's output says so. */
  static const struct {
    const char *cmd;
    const char *left;
    const char *pronoun;
    const char *stopping;
  } cases[] = {
      {"sleep 300 & echo started",
       "1 process still running (their output is still read)", "it",
       "1 process"},
      {"set -m; sleep 300 & echo started",
       "1 process still running (their output is still read)", "it",
       "1 process"},
      {"nohup timeout 3600 sleep 999 >/dev/null 2>&1 & while [ -z \"$(cat "
       "/proc/$!/task/$!/children 2>/dev/null)\" ]; do sleep 0.01; done; "
       "echo started",
       "2 processes still running", "them", "2 processes"},
  };
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  char want[512];
  size_t i;
  (void)state;

  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tfix_init(&t);
    uvt_tools_args_init(&a);
    a.command = cases[i].cmd;
    call(&t, &r, &t.a, "run_in_background", &a);
    assert_string_equal(r.text, "Started bash-1.\n[status: running]");
    run_until_settled(&t, &t.a, "bash-1");
    fixture_run_until(&t.f, notice_seen, &t);
    assert_int_equal(t.notices, 1);
    snprintf(want, sizeof(want),
             "[status: completed, exit code: 0; %s; task_kill "
             "bash-1 stops %s]",
             cases[i].left, cases[i].pronoun);
    assert_true(ends_with(t.notice, want));
    a = args_id("bash-1");
    call(&t, &r, &t.a, "task_output", &a);
    assert_true(ends_with(r.text, want));
    assert_true(strncmp(r.text, "started\n[status:", 16) == 0);
    call(&t, &r, &t.a, "task_list", NULL);
    snprintf(want, sizeof(want),
             "bash-1  bash  completed (exit code: 0; %s; "
             "task_kill bash-1 stops %s)",
             cases[i].left, cases[i].pronoun);
    assert_non_null(strstr(r.text, want));
    /* run_command says it too. */
    uvt_tools_args_init(&a);
    a.command = "sleep 300 & echo two";
    call(&t, &r, &t.a, "run_command", &a);
    assert_string_equal(r.text, "two\n[status: completed, exit code: 0; 1 "
                                "process still running (their output is "
                                "still read); task_kill bash-2 stops it]");
    /* Stopped: the lines say what it left has ended. */
    a = args_id("bash-1");
    call(&t, &r, &t.a, "task_kill", &a);
    snprintf(want, sizeof(want),
             "bash-1 had already ended; stopping the %s it left running.\n"
             "[status: completed, exit code: 0]",
             cases[i].stopping);
    assert_string_equal(r.text, want);
    fixture_run_until(&t.f, left_gone, &t);
    call(&t, &r, &t.a, "task_output", &a);
    assert_string_equal(r.text,
                        "(no new output)\n[status: completed, exit code: 0; "
                        "what it left running has ended or left its "
                        "session]");
    tfix_close(&t);
  }
}

/* P-LEFT-1's sibling: what a task left running leaves its session
 * (`setsid`, a daemon's double fork) rather than ending.  Without cgroups
 * the session is all the registry sees, so the line must not claim that
 * the process ended: it says it ended or left the session. */
static void test_leftover_leaves_session(void **state) {
  char dir[] = "/tmp/uvt-left-XXXXXX";
  char cmd[512];
  char path[600];
  uvt_tools_args_t a;
  tfix_t t;
  rec_t r;
  FILE *f;
  int pid = 0;
  int fd;
  int i;
  const struct timespec tick = {0, 10 * 1000 * 1000};
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/go", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  /* The member waits in the session until the test opens the FIFO, then
   * writes its pid and becomes `sleep` in a session of its own. */
  snprintf(cmd, sizeof(cmd),
           "sh -c 'read x < %s/go; echo $$ > %s/pid.tmp; mv %s/pid.tmp "
           "%s/pid; exec setsid sleep 300 >/dev/null 2>&1' & echo started",
           dir, dir, dir, dir);
  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = cmd;
  call(&t, &r, &t.a, "run_in_background", &a);
  run_until_settled(&t, &t.a, "bash-1");
  a = args_id("bash-1");
  call(&t, &r, &t.a, "task_output", &a);
  assert_true(ends_with(r.text, "[status: completed, exit code: 0; 1 process "
                                "still running (their output is still "
                                "read); task_kill bash-1 stops it]"));
  fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "x\n", 2), 2);
  close(fd);
  snprintf(path, sizeof(path), "%s/pid", dir);
  /* The loop has nothing left to run (the task ended): the condition is
   * polled, bounded so that a fault fails rather than hangs. */
  for (i = 0; i < 3000 && uvt_process_leftovers(t.f.reg, "bash-1", &t.a) != 0;
       i++)
    nanosleep(&tick, NULL);
  assert_int_equal(uvt_process_leftovers(t.f.reg, "bash-1", &t.a), 0);
  /* Written before the setsid that made the count 0. */
  f = fopen(path, "r");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%d", &pid), 1);
  fclose(f);
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, "(no new output)\n[status: completed, exit code: "
                              "0; what it left running has ended or left its "
                              "session]");
  /* It did not end: it runs in a session of its own. */
  assert_true(pid > 0);
  assert_int_equal(kill(pid, SIGKILL), 0);
  tfix_close(&t);
  assert_int_equal(unlink(path), 0);
  snprintf(path, sizeof(path), "%s/go", dir);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* Read bash-1's output (task_output, 100 ms waits) until it holds
 * `needle`; the whole of what was read goes to `all`. */
static void read_until(tfix_t *t, const char *id, const char *needle, char *all,
                       size_t size) {
  uvt_tools_args_t a;
  rec_t r;
  int i;

  all[0] = '\0';
  for (i = 0; i < 200 && strstr(all, needle) == NULL; i++) {
    a = args_id(id);
    a.timeout_ms = 100;
    call(t, &r, &t->a, "task_output", &a);
    strncat(all, r.text, size - strlen(all) - 1);
  }
  assert_non_null(strstr(all, needle));
}

/* M-TOOLS-14, P-KILL-8: task_kill with signal sends that signal and does
 * not stop the task: SIGINT to a runner that prints its summary on SIGINT,
 * SIGUSR1 to a trap; a signal outside the list is refused; an ended task
 * gets nothing. */
static void test_task_kill_signal(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  static char all[20000];
  (void)state;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "trap 'echo usr1 seen' USR1; trap 'echo summary: 3 passed, "
              "interrupted; exit 3' INT; echo up; while :; do sleep 0.05; "
              "done";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_string_equal(r.text, "Started bash-1.\n[status: running]");
  read_until(&t, "bash-1", "up\n", all, sizeof(all));
  fixture_run_until(&t.f, bash1_spawned, &t);

  a = args_id("bash-1");
  a.signal = "SIGUSR1";
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text,
                      "Sent SIGUSR1 to every process of bash-1; the task "
                      "ends only if the signal ends it (task_kill without "
                      "signal stops it). task_output with wait shows what "
                      "it does.\n"
                      "[status: running]");
  read_until(&t, "bash-1", "usr1 seen\n", all, sizeof(all));

  a.signal = "SIGSEGV";
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "Unknown signal \"SIGSEGV\"; signal is one "
                                 "of SIGINT, SIGHUP,"));
  a.signal = ""; /* named in quotes, so that an empty name shows */
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 1);
  assert_true(strncmp(r.text, "Unknown signal \"\"; signal is one of ", 36) ==
              0);

  a.signal = "INT"; /* the short spelling */
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(strncmp(r.text, "Sent SIGINT to every process of bash-1;", 39) ==
              0);
  read_until(&t, "bash-1", "[status: completed, exit code: 3]", all,
             sizeof(all));
  assert_non_null(strstr(all, "summary: 3 passed, interrupted\n"));

  a.signal = "SIGINT";
  call(&t, &r, &t.a, "task_kill", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, "bash-1 has ended (or is ending); nothing was "
                              "sent.\n[status: completed, exit code: 3]");

  /* SIGKILL as a signal ends the task: the answer does not say that it
   * was not stopped, and the end names the signal. */
  uvt_tools_args_init(&a);
  a.command = "exec sleep 300";
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_string_equal(r.text, "Started bash-2.\n[status: running]");
  a = args_id("bash-2");
  a.signal = "SIGKILL";
  for (;;) { /* until the spawn is in (P-SPAWN-6) */
    call(&t, &r, &t.a, "task_kill", &a);
    if (strstr(r.text, "has not started its command yet") == NULL)
      break;
    uv_run(&t.f.loop, UV_RUN_ONCE);
  }
  assert_int_equal(r.is_error, 0);
  assert_true(strncmp(r.text, "Sent SIGKILL to every process of bash-2; the "
                              "task ends only if the signal ends it",
                      76) == 0);
  assert_null(strstr(r.text, "not stopped"));
  run_until_settled(&t, &t.a, "bash-2");
  a = args_id("bash-2");
  call(&t, &r, &t.a, "task_output", &a);
  assert_non_null(strstr(r.text, "SIGKILL"));
  tfix_close(&t);
}

/* M-TOOLS-14: write_stdin of exactly "\u0003" to a task whose stdin is a
 * pipe is SIGINT to its session (nothing is written); any other bytes,
 * and "\u0003" inside other bytes, are written. */
static void test_write_ctrl_c(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  static char all[20000];
  (void)state;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "trap 'echo interrupted; exit 4' INT; echo up; while read -r "
              "l; do echo \"got $l\"; done";
  a.stdin_pipe = 1;
  call(&t, &r, &t.a, "run_in_background", &a);
  read_until(&t, "bash-1", "up\n", all, sizeof(all));
  fixture_run_until(&t.f, bash1_spawned, &t);
  a = args_id("bash-1");
  a.chars = "a\x03b\n";
  a.yield_ms = 0;
  call(&t, &r, &t.a, "write_stdin", &a);
  read_until(&t, "bash-1", "got a\x03b\n", all, sizeof(all));
  a.chars = "\x03";
  a.yield_ms = 2000;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 0);
  read_until(&t, "bash-1", "[status: completed, exit code: 4]", all,
             sizeof(all));
  tfix_close(&t);
}

/* M-TOOLS-14: a "\u0003" that could not be sent as SIGINT (the spawn is
 * still out, P-SPAWN-6) is an error, as task_kill's signal is; it was
 * answered as a success while nothing was sent. */
static void test_write_ctrl_c_before_spawn(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  static char all[20000];
  (void)state;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "trap 'echo interrupted; exit 4' INT; echo up; cat";
  a.stdin_pipe = 1;
  /* The spawn is held until the Ctrl-C was answered: the loop turns that
   * deliver the answers cannot report a pid meanwhile. */
  spawn_gate_close(0);
  call(&t, &r, &t.a, "run_in_background", &a);
  a = args_id("bash-1");
  a.chars = "\x03";
  a.yield_ms = 0;
  call(&t, &r, &t.a, "write_stdin", &a);
  spawn_gate_open(1);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "bash-1 has not started its command yet; "
                                 "nothing was sent."));
  read_until(&t, "bash-1", "up\n", all, sizeof(all));
  fixture_run_until(&t.f, bash1_spawned, &t);
  spawn_gate_remove(); /* the spawn is out of the hook: it answered */
  a.yield_ms = 2000;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 0);
  read_until(&t, "bash-1", "[status: completed, exit code: 4]", all,
             sizeof(all));
  tfix_close(&t);
}

/* Live processes whose argv joined by spaces is `want`. */
static int count_cmdline(const char *want) {
  DIR *d = opendir("/proc");
  struct dirent *de;
  char buf[256];
  char state[512];
  int n = 0;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    int pid = atoi(de->d_name);
    if (pid <= 0 || proc_cmdline(pid, buf, sizeof(buf)) <= 0 ||
        strcmp(buf, want) != 0)
      continue;
    /* Zombies are gone. */
    if (proc_file(pid, "stat", state, sizeof(state)) > 0 &&
        strstr(state, ") Z ") != NULL)
      continue;
    n++;
  }
  closedir(d);
  return n;
}

/* P-KILL-7 through run_command's timeout_ms: the runtime limit stops a
 * member that ignores SIGTERM after the leader died of it; the result
 * comes only when nothing of the command runs. */
static void test_run_command_timeout_term_ignorer(void **state) {
  uvt_tools_options_t to;
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  char cmd[256];
  char marker[64];
  (void)state;

  uvt_tools_options_init(&to);
  to.grace_ms = 200;
  tfix_init_opts(&t, NULL, &to);
  snprintf(marker, sizeof(marker), "sleep 777.%d", (int)getpid());
  snprintf(cmd, sizeof(cmd), "bash -c \"trap '' TERM; exec %s\" & sleep 778",
           marker);
  uvt_tools_args_init(&a);
  a.command = cmd;
  a.timeout_ms = 500;
  a.yield_ms = 0;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "[status: killed, timed out after "));
  assert_int_equal(count_cmdline(marker), 0);
  tfix_close(&t);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-15: results that survive every host's own cut                   */

/* Output lines of a result: newlines before its status line. */
static size_t output_lines(const char *text) {
  size_t n = output_len(text), i, k = 0;
  for (i = 0; i < n; i++)
    k += text[i] == '\n';
  return k;
}

/* M-TOOLS-15: `seq 1 5000` (24 KB, 5000 lines) fits in 10 000 bytes only
 * cut, and in 1000 lines: the first lines, the cut line, the last ones and
 * the status line; with max_lines set, that many lines; a call asking for
 * more bytes gets proportionally more lines. */
static void test_m_tools_15_lines(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  char *full;
  size_t n = 0;
  int i;

  full = malloc(5000 * 6);
  assert_non_null(full);
  for (i = 1; i <= 5000; i++)
    n += (size_t)sprintf(full + n, "%d\n", i);

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "seq 1 5000";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  check_cut(r.text, full, UVT_TOOLS_MAX_BYTES_DEFAULT,
            "\n5000\n[status: completed, exit code: 0]");
  assert_int_equal(strncmp(r.text, "1\n2\n3\n", 6), 0);
  assert_true(output_lines(r.text) <= UVT_TOOLS_MAX_LINES_DEFAULT);
  assert_true(output_lines(r.text) > UVT_TOOLS_MAX_LINES_DEFAULT / 2);

  /* Twice the default bytes: up to twice the lines. */
  a.max_bytes = 2 * UVT_TOOLS_MAX_BYTES_DEFAULT;
  call(&t, &r, &t.a, "run_command", &a);
  check_cut(r.text, full, 2 * UVT_TOOLS_MAX_BYTES_DEFAULT,
            "\n5000\n[status: completed, exit code: 0]");
  assert_true(output_lines(r.text) > UVT_TOOLS_MAX_LINES_DEFAULT);
  assert_true(output_lines(r.text) <= 2 * UVT_TOOLS_MAX_LINES_DEFAULT);
  tfix_close(&t);

  /* The option: 100 lines; below the minimum raised to it. */
  uvt_tools_options_init(&to);
  to.max_lines = 100;
  tfix_init_opts(&t, NULL, &to);
  uvt_tools_args_init(&a);
  a.command = "seq 1 5000";
  call(&t, &r, &t.a, "run_command", &a);
  check_cut(r.text, full, UVT_TOOLS_MAX_BYTES_DEFAULT,
            "\n5000\n[status: completed, exit code: 0]");
  assert_int_equal(output_lines(r.text), 100);
  tfix_close(&t);
  to.max_lines = 1;
  tfix_init_opts(&t, NULL, &to);
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(output_lines(r.text), UVT_TOOLS_MAX_LINES_MIN);
  assert_int_equal(strncmp(r.text, "1\n2\n3\n", 6), 0);
  assert_true(ends_with(r.text, "\n5000\n[status: completed, exit code: 0]"));
  tfix_close(&t);
  free(full);
}

/* M-TOOLS-15: a run_command of 1.3 MB, 20 times a 64 KiB cap (the 15 MB
 * under the default 1 MiB cap is test/mcp/hosts-test.mjs's; this one stays
 * quick under valgrind), shows its true beginning (kept apart from the
 * ring), one cut line that tells the bytes it leaves out from the bytes
 * the cap dropped, and its end; the counts add up to the whole output.
 * Before the first bytes were kept, the "head" was the ring's first bytes:
 * a slice from the middle. */
static void test_m_tools_15_big(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  unsigned long long left, lines, dropped;
  const char *mark;
  const char *mark_end;
  size_t total = 0, head, tail;
  char num[16];
  int i;

  for (i = 1; i <= 200000; i++)
    total += (size_t)sprintf(num, "%d\n", i);
  uvt_tools_options_init(&to);
  to.output_cap_bytes = 65536;
  tfix_init_opts(&t, NULL, &to);
  uvt_tools_args_init(&a);
  a.command = "seq 1 200000";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_int_equal(strncmp(r.text, "1\n2\n3\n4\n5\n", 10), 0);
  assert_true(ends_with(r.text, "\n200000\n[status: completed, exit code: 0]"));
  assert_true(output_len(r.text) <= UVT_TOOLS_MAX_BYTES_DEFAULT);
  assert_true(output_lines(r.text) <= UVT_TOOLS_MAX_LINES_DEFAULT);
  /* One cut line, and no other marker. */
  mark = strstr(r.text, "\n[... ");
  assert_non_null(mark);
  mark++;
  assert_null(strstr(mark + 1, "[... "));
  assert_int_equal(sscanf(mark,
                          "[... %llu bytes (%llu lines) left out, and %llu "
                          "bytes dropped at the output cap ...]",
                          &left, &lines, &dropped),
                   3);
  assert_true(dropped > 1000 * 1000);
  mark_end = strchr(mark, '\n') + 1;
  head = (size_t)(mark - r.text);
  tail = output_len(r.text) - (size_t)(mark_end - r.text);
  assert_int_equal(head + left + dropped + tail, total);
  tfix_close(&t);
}

/* M-TOOLS-15 through the clip itself: a drop notice left out is counted
 * apart; one that is shown stays as it is. */
static void test_m_tools_15_clip_notice(void **state) {
  uvt__text_t out;
  char in[4096];
  size_t n = 0;
  int i;

  (void)state;
  for (i = 0; i < 20; i++)
    n += (size_t)sprintf(in + n, "first %d\n", i);
  n += (size_t)sprintf(in + n, "[... 123456 bytes dropped ...]\n");
  for (i = 0; i < 200; i++)
    n += (size_t)sprintf(in + n, "last %d\n", i);
  uvt__text_init(&out);
  uvt__text_clip_lines(&out, in, n, 100000, 30, NULL);
  assert_int_equal(out.err, 0);
  assert_non_null(strstr(out.base, "first 0\n"));
  assert_non_null(strstr(out.base, " left out, and 123456 bytes dropped at "
                                   "the output cap ...]\n"));
  assert_null(strstr(out.base, "[... 123456 bytes dropped"));
  assert_true(ends_with(out.base, "last 199\n"));
  uvt__text_free(&out);
  /* Room for all the bytes and 100 lines: the notice is shown. */
  uvt__text_init(&out);
  uvt__text_clip_lines(&out, in, n, 100000, 100, NULL);
  assert_non_null(strstr(out.base, "\n[... 123456 bytes dropped ...]\n"));
  uvt__text_free(&out);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-9: task_wait                                                     */

/* M-TOOLS-9: one fast and one slow task (it ends when its input does):
 * "any" answers at the fast one's end with its output and status line, and
 * the slow one's [status: running] (its output left unread); "all" with a
 * short timeout shows the slow one still running; once the slow one's
 * input is closed, "all" answers with its output. */
static void test_m_tools_9_task_wait(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  const char *ids[2] = {"bash-1", "bash-2"};
  const char *ids2[2] = {"bash-3", "bash-2"};
  int notices;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "echo fast";
  call(&t, &r, &t.a, "run_in_background", &a);
  uvt_tools_args_init(&a);
  a.command = "echo slow-start; cat >/dev/null; echo slow-end";
  a.stdin_pipe = 1;
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 0);

  /* On a slow machine bash-1 may end (and its end notice go out) while
   * bash-2 starts: only a notice after the wait showed the end is wrong. */
  notices = t.notices;
  uvt_tools_args_init(&a);
  a.task_ids = ids;
  a.task_ids_len = 2;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "1 of 2 tasks ended.\n"
                              "--- bash-1 ---\n"
                              "fast\n"
                              "[status: completed, exit code: 0]\n"
                              "--- bash-2 ---\n"
                              "[status: running]");
  /* Its end was shown: no notice for bash-1 after it. */
  assert_int_equal(t.notices, notices);

  uvt_tools_args_init(&a);
  a.command = "echo second";
  call(&t, &r, &t.a, "run_in_background", &a);
  /* Ended (not read) before the wait, so its short timeout decides
   * nothing about it. */
  run_until_settled(&t, &t.a, "bash-3");
  uvt_tools_args_init(&a);
  a.task_ids = ids2;
  a.task_ids_len = 2;
  a.mode = "all";
  a.timeout_ms = 300;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(strncmp(r.text, "1 of 2 tasks ended (waited ", 27) == 0);
  assert_non_null(strstr(
      r.text,
      " ms for all: wait again to wait longer).\n--- bash-3 ---\nsecond\n"
      "[status: completed, exit code: 0]\n"
      "--- bash-2 ---\n[status: running]"));

  /* The slow one's output was not consumed: it comes with its end. */
  a = args_id("bash-2");
  a.close_stdin = 1;
  a.yield_ms = 0;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 0);
  uvt_tools_args_init(&a);
  a.task_ids = ids2;
  a.task_ids_len = 2;
  a.mode = "all";
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(strncmp(r.text,
                      "2 of 2 tasks ended.\n--- bash-3 ---\n"
                      "(no new output)\n[status: completed",
                      54) == 0);
  assert_true(ends_with(r.text, "slow-end\n[status: completed, exit code: 0]"));
  tfix_close(&t);
}

/* M-TOOLS-9's errors (bad arguments found before any wait), the call's
 * abort and detach while it waits, and the output budget shared. */
static void test_m_tools_9_siblings(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  const char *ids[33];
  const char *dup[2] = {"bash-1", "bash-1"};
  const char *one[1] = {"bash-1"};
  const char *nope[2] = {"bash-1", "bash-99"};
  const char *two[2] = {"bash-2", "bash-3"};
  int i;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "cat";
  a.stdin_pipe = 1;
  call(&t, &r, &t.a, "run_in_background", &a);

  uvt_tools_args_init(&a);
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "needs task_ids: 1 to 32"));
  for (i = 0; i < 33; i++)
    ids[i] = "bash-1";
  a.task_ids = ids;
  a.task_ids_len = 33;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  a.task_ids = dup;
  a.task_ids_len = 2;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "names bash-1 twice"));
  a.task_ids = one;
  a.task_ids_len = 1;
  a.mode = "some";
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "mode must be"));
  a.mode = NULL;
  a.timeout_ms = 0;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  a.timeout_ms = -1;
  a.task_ids = nope;
  a.task_ids_len = 2;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, "No task bash-99. task_list shows the tasks "
                              "you can see.");
  /* Another session's task. */
  a.task_ids = one;
  a.task_ids_len = 1;
  call(&t, &r, &t.b, "task_wait", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "belongs to another session"));

  /* Aborted while it waits. */
  call_start(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(uvt_tools_call_abort(&r.req), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.status, UVT_EABORTED);

  /* Two tasks that ended share max_bytes: each shows its cut. */
  uvt_tools_args_init(&a);
  a.command = "seq 1 3000";
  call(&t, &r, &t.a, "run_in_background", &a);
  call(&t, &r, &t.a, "run_in_background", &a);
  uvt_tools_args_init(&a);
  a.task_ids = two;
  a.task_ids_len = 2;
  a.mode = "all";
  a.max_bytes = 2000;
  call(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(strlen(r.text) < 2400);
  assert_non_null(strstr(r.text, "--- bash-2 ---\n1\n2\n"));
  assert_non_null(strstr(r.text, "--- bash-3 ---\n1\n2\n"));
  assert_true(ends_with(r.text, "\n3000\n[status: completed, exit code: 0]"));

  /* Detached while it waits: UVT_ECLOSING. */
  a.task_ids = one;
  a.task_ids_len = 1;
  a.max_bytes = -1;
  call_start(&t, &r, &t.a, "task_wait", &a);
  assert_int_equal(uvt_tools_detach(&t.tools, detach_cb), 0);
  fixture_run_until(&t.f, rec_done, &r);
  assert_int_equal(r.status, UVT_ECLOSING);
  fixture_close(&t.f);
  assert_int_equal(t.detached, 1);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-12, M-TOOLS-13: merged streams, stdin text                      */

/* M-TOOLS-12: with merge_stderr, stdout and stderr lines come in the
 * order written, with no [stderr] part; without it they stay apart
 * (P-RES-1); run_in_background merges too. */
static void test_m_tools_12_merge_stderr(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  char want[8192];
  size_t n = 0;
  int i;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "echo out1; echo err1 >&2; echo out2; echo err2 >&2";
  call(&t, &r, &t.a, "run_command", &a);
  assert_string_equal(r.text, "out1\nout2\n[stderr]\nerr1\nerr2\n"
                              "[status: completed, exit code: 0]");
  a.merge_stderr = 1;
  call(&t, &r, &t.a, "run_command", &a);
  assert_string_equal(r.text, "out1\nerr1\nout2\nerr2\n"
                              "[status: completed, exit code: 0]");

  /* Many alternations, and a background task. */
  for (i = 1; i <= 200; i++)
    n += (size_t)sprintf(want + n, "o%d\ne%d\n", i, i);
  sprintf(want + n, "[status: completed, exit code: 0]");
  uvt_tools_args_init(&a);
  a.command = "for i in $(seq 1 200); do echo o$i; echo e$i >&2; done";
  a.merge_stderr = 1;
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 0);
  a = args_id("bash-3");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_string_equal(r.text, want);
  tfix_close(&t);
}

/* M-TOOLS-13: run_command's stdin text is read, then end of file (cat
 * ends); its length may hold NUL bytes; without it stdin is empty. */
static void test_m_tools_13_stdin(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "cat; echo END";
  a.stdin_text = "line one\nline two\n";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  assert_string_equal(r.text, "line one\nline two\nEND\n"
                              "[status: completed, exit code: 0]");
  a.stdin_text = "a\0b";
  a.stdin_text_len = 3;
  a.command = "wc -c";
  call(&t, &r, &t.a, "run_command", &a);
  assert_string_equal(r.text, "3\n[status: completed, exit code: 0]");
  uvt_tools_args_init(&a);
  a.command = "cat; echo END";
  call(&t, &r, &t.a, "run_command", &a);
  assert_string_equal(r.text, "END\n[status: completed, exit code: 0]");
  tfix_close(&t);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-10: output kept in a spill directory                            */

/* The whole file `path` into a new block (*len bytes). */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;

  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

/* M-TOOLS-17 (and M-TOOLS-10's bounds): the spill file is the task's raw
 * output, once, in order, per stream, with no marker of ours, so line N of
 * the file is line N of the output; a result that leaves lines out names
 * the file and the lines and bytes left out, and those bytes of the file
 * are exactly the lines; past the cap the file still holds every byte
 * (the issue: ~3,100 lines twice and out of order, a line cut in two, a
 * "dropped" marker for bytes that were there); a full file says so. */
static void test_m_tools_17_spill(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  char dir[] = "/tmp/uvt-spill-XXXXXX";
  char path[256];
  char *full;
  char *file;
  const char *mark;
  size_t n = 0, flen;
  unsigned long long l0, l1, b0, b1, d0, d1;
  struct stat st;
  int i;

  assert_non_null(mkdtemp(dir));
  full = malloc(200000 * 7 + 1);
  assert_non_null(full);
  for (i = 1; i <= 200000; i++)
    n += (size_t)sprintf(full + n, "%d\n", i);

  uvt_tools_options_init(&to);
  to.spill_dir = dir;
  tfix_init_opts(&t, NULL, &to);
  uvt_tools_args_init(&a);
  a.command = "seq 1 5000; echo err >&2";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  snprintf(path, sizeof(path), "%s/bash-1.log", dir);
  mark = strstr(r.text, "(the whole output is in ");
  assert_non_null(mark);
  assert_int_equal(strncmp(mark + 24, path, strlen(path)), 0);
  assert_int_equal(sscanf(mark + 24 + strlen(path),
                          ": this result left out its lines %llu-%llu, "
                          "bytes %llu-%llu)",
                          &l0, &l1, &b0, &b1),
                   4);
  /* The file is the raw stdout, once. */
  file = slurp(path, &flen);
  assert_int_equal(flen, 23894 - 1);
  assert_memory_equal(file, full, flen);
  /* Lines l0..l1 of the file are bytes b0..b1, and the result shows the
   * lines before and after them. */
  {
    char want[64];
    size_t off = 0;
    unsigned long long line = 1;
    while (line < l0)
      off += strlen(full + off) - strlen(strchr(full + off, '\n')) + 1, line++;
    assert_int_equal(off, b0);
    snprintf(want, sizeof(want), "\n%llu\n[... ", l0 - 1);
    assert_non_null(strstr(r.text, want));
    snprintf(want, sizeof(want), "...]\n%llu\n", l1 + 1);
    assert_non_null(strstr(r.text, want));
    assert_int_equal(file[b1], '\n');
  }
  free(file);
  /* stderr has a file of its own; 0600 in a 0700 directory. */
  snprintf(path, sizeof(path), "%s/bash-1.stderr.log", dir);
  file = slurp(path, &flen);
  assert_int_equal(flen, 4);
  assert_memory_equal(file, "err\n", 4);
  free(file);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);

  /* Past the 1 MiB cap: the file is still every byte, in order; the note
   * says which bytes the cap dropped (they are in the file). */
  a.command = "seq 1 200000"; /* 1.3 MB */
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  snprintf(path, sizeof(path), "%s/bash-2.log", dir);
  mark = strstr(r.text, "the output cap dropped its bytes ");
  assert_non_null(mark);
  assert_int_equal(
      sscanf(mark, "the output cap dropped its bytes %llu-%llu", &d0, &d1), 2);
  file = slurp(path, &flen);
  assert_int_equal(flen, n);
  assert_memory_equal(file, full, n);
  assert_true(d0 > 0 && d1 > d0 && d1 < n);
  free(file);

  /* M-TOOLS-16 on a spill: a view of output past the cap reads what the
   * cap dropped back from the file, so it sees every line. */
  a.command = "seq 1 200000";
  a.match = "^1234[0-9]$";
  call(&t, &r, &t.a, "run_command", &a);
  assert_non_null(strstr(r.text, "12340: 12340\n"));
  assert_non_null(strstr(r.text, "12349: 12349\n[10 of 200000 lines match]\n"));
  a.match = NULL;
  tfix_close(&t);
  /* M-MCP-16: the files go at detach (keep_spill: they stay). */
  assert_int_equal(stat(path, &st), -1);

  /* A bound: 1000 bytes, and the note says the file holds the beginning. */
  to.spill_max_bytes = 1000;
  to.keep_spill = 1;
  tfix_init_opts(&t, NULL, &to);
  a.command = "seq 1 5000";
  call(&t, &r, &t.a, "run_command", &a);
  assert_non_null(strstr(r.text, "; the file stopped at 1000 bytes (its "
                                 "bound), so it holds the output's "
                                 "beginning only)\n"));
  tfix_close(&t);
  snprintf(path, sizeof(path), "%s/bash-1.log", dir);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 1000);
  unlink(path);
  assert_int_equal(rmdir(dir), 0);
  free(full);
}

static int bash2_ended_cb(void *arg) {
  tfix_t *t = arg;
  uvt_snapshot_t snap;
  int done;

  assert_int_equal(uvt_get(t->f.reg, "bash-2", &t->a, &snap), 0);
  done = uvt_status_is_terminal(snap.status);
  uvt_snapshot_cleanup(&snap);
  return done;
}

static int file_made(void *arg) {
  struct stat st;
  return stat(arg, &st) == 0;
}

/* S-7: a task (the same user) plants a symlink and a hard link at the
 * names of its own spill files, and replaces the spill directory between
 * two appends: nothing it points at is written, every byte goes to the
 * file the tools made. */
static void test_spill_s7(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  char dir[] = "/tmp/uvt-s7-XXXXXX";
  char spill[300];
  char moved[300];
  char victim[300];
  char cmd[2048];
  char path[400];
  char *file;
  size_t flen;
  struct stat st;
  int fd;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(spill, sizeof(spill), "%s/spill", dir);
  snprintf(moved, sizeof(moved), "%s/moved", dir);
  snprintf(victim, sizeof(victim), "%s/victim", dir);
  fd = open(victim, O_WRONLY | O_CREAT, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "precious\n", 9), 9);
  close(fd);
  uvt_tools_options_init(&to);
  to.spill_dir = spill;
  to.keep_spill = 1;
  tfix_init_opts(&t, NULL, &to);
  /* Planted before the task's first byte: a symlink at bash-1.log and a
   * hard link at bash-1.stderr.log, both to the victim. */
  snprintf(path, sizeof(path), "%s/bash-1.log", spill);
  assert_int_equal(symlink(victim, path), 0);
  snprintf(path, sizeof(path), "%s/bash-1.stderr.log", spill);
  assert_int_equal(link(victim, path), 0);
  /* Between two appends the task moves the directory away and puts a
   * symlink to the victim's directory in its place, then a symlink at its
   * file's name there. */
  snprintf(cmd, sizeof(cmd),
           "echo one; echo e1 >&2; mv %s %s && ln -s %s %s && ln -sf %s "
           "%s/bash-1.log; echo two; echo e2 >&2",
           spill, moved, dir, spill, victim, dir);
  uvt_tools_args_init(&a);
  a.command = cmd;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 0);
  file = slurp(victim, &flen);
  assert_int_equal(flen, 9);
  assert_memory_equal(file, "precious\n", 9);
  free(file);
  assert_int_equal(lstat(victim, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  /* Every byte went to the files made, in the directory that was checked
   * (now under its new name). */
  snprintf(path, sizeof(path), "%s/bash-1.log", moved);
  file = slurp(path, &flen);
  assert_int_equal(flen, 8);
  assert_memory_equal(file, "one\ntwo\n", 8);
  free(file);
  snprintf(path, sizeof(path), "%s/bash-1.stderr.log", moved);
  file = slurp(path, &flen);
  assert_int_equal(flen, 6);
  assert_memory_equal(file, "e1\ne2\n", 6);
  free(file);

  /* After the end (P-OUT-6): a leftover writes once more, after its file
   * was replaced by a symlink to the victim; the reopen finds another
   * inode and writes nothing. */
  snprintf(path, sizeof(path), "%s/go", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  snprintf(cmd, sizeof(cmd),
           "(read x < %s/go; echo late; touch %s/done) & echo early", dir, dir);
  uvt_tools_args_init(&a);
  a.command = cmd;
  call(&t, &r, &t.a, "run_command", &a); /* bash-2 */
  fixture_run_until(&t.f, bash2_ended_cb, &t);
  snprintf(path, sizeof(path), "%s/bash-2.log", moved);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(symlink(victim, path), 0);
  snprintf(path, sizeof(path), "%s/go", dir);
  fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "x\n", 2), 2);
  close(fd);
  snprintf(path, sizeof(path), "%s/done", dir);
  fixture_run_until(&t.f, file_made, path);
  {
    uvt_tools_args_t o = args_id("bash-2");
    o.timeout_ms = 100;
    for (;;) {
      call(&t, &r, &t.a, "task_output", &o);
      if (strstr(r.text, "late") != NULL)
        break;
    }
  }
  file = slurp(victim, &flen);
  assert_int_equal(flen, 9);
  assert_memory_equal(file, "precious\n", 9);
  free(file);
  tfix_close(&t);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

static int file_gone(void *arg) {
  struct stat st;
  return stat(arg, &st) != 0;
}

/* M-MCP-16: all the files together stay within spill_max_total: the
 * oldest task's go first (never the one being written) and a notice to
 * its owner says so; a forgotten task's files go with it. */
static void test_spill_total(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  uvt_tools_options_t to;
  char dir[] = "/tmp/uvt-total-XXXXXX";
  char path[300];
  struct stat st;
  (void)state;

  assert_non_null(mkdtemp(dir));
  uvt_tools_options_init(&to);
  to.spill_dir = dir;
  to.spill_max_total = 100000;
  tfix_init_opts(&t, NULL, &to);
  uvt_tools_args_init(&a);
  a.command = "head -c 60000 /dev/zero | tr '\\0' a";
  call(&t, &r, &t.a, "run_command", &a);
  snprintf(path, sizeof(path), "%s/bash-1.log", dir);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 60000);
  call(&t, &r, &t.a, "run_command", &a);
  /* bash-1's file went to make room for bash-2's. */
  assert_int_equal(stat(path, &st), -1);
  assert_int_equal(t.notices, 1);
  assert_non_null(strstr(t.notice, "Removed the spill files of bash-1 (60000 "
                                   "bytes) to keep the spill directory "
                                   "within 100000 bytes"));
  snprintf(path, sizeof(path), "%s/bash-2.log", dir);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 60000);
  /* A forget takes the files with the record. */
  assert_int_equal(uvt_forget(t.f.reg, "bash-2", &t.a), 0);
  fixture_run_until(&t.f, file_gone, path);
  assert_int_equal(stat(path, &st), -1);
  tfix_close(&t);
  assert_int_equal(rmdir(dir), 0);
}

/* M-TOOLS-10: a directory others can enter, a link, or a file is refused
 * (UV_EPERM); a missing one is made 0700. */
static void test_m_tools_10_spill_dir(void **state) { /* and S-7 */
  fixture_t f;
  uvt_tools_t tools;
  uvt_tools_t t2; /* tools is still closing (two-phase): another struct, */
  uvt_tools_t t3; /* alive until fixture_close() has run the loop */
  uvt_tools_options_t to;
  char dir[] = "/tmp/uvt-spill-XXXXXX";
  char sub[300];
  char link_path[300];
  struct stat st;

  (void)state;
  assert_non_null(mkdtemp(dir));
  fixture_init(&f, NULL);
  uvt_surface_detach(&f.surface);
  uvt_tools_options_init(&to);
  to.spill_dir = sub;

  snprintf(sub, sizeof(sub), "%s/open", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(chmod(sub, 0755), 0);
  assert_int_equal(uvt_tools_attach(f.reg, &tools, &to), UV_EPERM);
  assert_int_equal(chmod(sub, 0710), 0);
  assert_int_equal(uvt_tools_attach(f.reg, &tools, &to), UV_EPERM);
  assert_int_equal(rmdir(sub), 0);

  snprintf(sub, sizeof(sub), "%s/file", dir);
  close(open(sub, O_CREAT | O_WRONLY, 0600));
  assert_int_equal(uvt_tools_attach(f.reg, &tools, &to), UV_EPERM);
  unlink(sub);

  snprintf(link_path, sizeof(link_path), "%s/link", dir);
  assert_int_equal(symlink(dir, link_path), 0);
  to.spill_dir = link_path;
  assert_int_equal(uvt_tools_attach(f.reg, &tools, &to), UV_EPERM);
  unlink(link_path);

  snprintf(sub, sizeof(sub), "%s/made", dir);
  to.spill_dir = sub;
  assert_int_equal(uvt_tools_attach(f.reg, &tools, &to), 0);
  assert_int_equal(stat(sub, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_int_equal(uvt_tools_detach(&tools, NULL), 0);

  /* S-7: in a sandbox's workspace the directory is refused (a task could
   * write it), unless one of the sandbox's readonly[] paths holds it
   * (uvtasks-mcp's default, <workspace>/.uvtasks/spill/<pid>, M-TOOLS-17).
   * The workspace is the sandbox's, not the tools' cwd. */
  {
    uvt_sandbox_t sb;
    char ro[300];
    const char *ros[] = {ro, NULL};
    memset(&sb, 0, sizeof(sb));
    sb.fs = UVT_SANDBOX_FS_WORKSPACE;
    sb.workspace = dir;
    to.sandbox = &sb;
    to.cwd = "/";
    assert_int_equal(uvt_tools_attach(f.reg, &t2, &to), UV_EACCES);
    snprintf(ro, sizeof(ro), "%s/made", dir);
    sb.readonly = ros;
    assert_int_equal(uvt_tools_attach(f.reg, &t2, &to), 0);
    assert_int_equal(uvt_tools_detach(&t2, NULL), 0);
    /* A read-only path elsewhere keeps nothing out. */
    snprintf(ro, sizeof(ro), "%s/other", dir);
    assert_int_equal(uvt_tools_attach(f.reg, &t3, &to), UV_EACCES);
    to.sandbox = NULL;
    to.cwd = NULL;
  }
  fixture_close(&f);
  assert_int_equal(rmdir(sub), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-11: the screen of a terminal task                               */

#define SCREEN_PROG                                                            \
  "printf '\\033[?1049h\\033[H\\033[2J'; printf '\\033[5;10HHELLO'; "          \
  "printf '\\033[10;1Hbottom line'; printf '\\033[3;4H'; read x; "             \
  "printf '\\033[?1049l'; echo left with $x"

/* M-TOOLS-11: a full-screen program (the alternate screen, cursor moves):
 * task_screen shows its rows with the text at its row and column, the
 * cursor and the flag; write_stdin and task_output show that screen, not
 * the transcript; once it leaves the alternate screen the transcript is
 * back.  A task without a terminal has no screen (a tool error, nothing
 * consumed). */
static void test_m_tools_11_screen(void **state) {
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  const char *row;
  int i;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = SCREEN_PROG;
  a.tty = 1;
  call(&t, &r, &t.a, "run_in_background", &a);
  assert_int_equal(r.is_error, 0);
  /* Wait (by polls that show what is new) for the program to draw. */
  for (i = 0; i < 200; i++) {
    a = args_id("bash-1");
    a.yield_ms = 100;
    call(&t, &r, &t.a, "write_stdin", &a);
    if (strstr(r.text, "bottom line") != NULL)
      break;
  }
  assert_non_null(strstr(r.text, "bottom line"));
  /* write_stdin showed the screen, no escape sequence. */
  assert_true(strncmp(r.text,
                      "[screen 80x24, alternate screen, cursor at "
                      "row 3, column 4;",
                      55) == 0);
  assert_null(strchr(r.text, '\033'));

  a = args_id("bash-1");
  call(&t, &r, &t.a, "task_screen", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(strncmp(r.text,
                      "[screen 80x24, alternate screen, cursor at "
                      "row 3, column 4; rows and columns count from "
                      "1]\n",
                      89) == 0);
  /* Row 5, column 10: HELLO; row 10, column 1: bottom line. */
  row = strchr(r.text, '\n') + 1;
  for (i = 1; i < 5; i++)
    row = strchr(row, '\n') + 1;
  assert_int_equal(strncmp(row, "         HELLO\n", 15), 0);
  for (i = 5; i < 10; i++)
    row = strchr(row, '\n') + 1;
  assert_int_equal(strncmp(row, "bottom line\n[status: running]", 29), 0);

  /* task_output shows the screen too, with nothing new. */
  a = args_id("bash-1");
  call(&t, &r, &t.a, "task_output", &a);
  assert_non_null(strstr(r.text, "alternate screen"));
  assert_non_null(strstr(r.text, "         HELLO\n"));

  /* The program leaves the alternate screen: the transcript is back. */
  a = args_id("bash-1");
  a.chars = "bye\r";
  a.yield_ms = 0;
  call(&t, &r, &t.a, "write_stdin", &a);
  a = args_id("bash-1");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_null(strstr(r.text, "[screen "));
  assert_non_null(strstr(r.text, "left with bye\n"));
  a = args_id("bash-1");
  call(&t, &r, &t.a, "task_screen", &a);
  assert_int_equal(r.is_error, 0);
  assert_true(strncmp(r.text, "[screen 80x24, main screen,", 27) == 0);

  /* No terminal, no screen; its output stays unread. */
  uvt_tools_args_init(&a);
  a.command = "echo plain";
  call(&t, &r, &t.a, "run_command", &a);
  a = args_id("bash-2");
  call(&t, &r, &t.a, "task_screen", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "does not run on a terminal"));
  a = args_id("bash-99");
  call(&t, &r, &t.a, "task_screen", &a);
  assert_int_equal(r.is_error, 1);
  tfix_close(&t);
}

/* S-8: a terminal task's bytes never crash or hang the tools.  The fault
 * (issue 30): a truecolor SGR with colon sub-parameters, 17 parameters in
 * all, crashed libvterm 0.1.4 (SEGV in vterm_input_write) on the next
 * task_output or task_screen, and everything with it.  Its siblings, each
 * a task of its own: 17 parameters with ';', 17 with ':', a parameter of
 * 30 digits, 40 parameters, the 8-bit CSI (U+009B) with 17 parameters, a
 * DECRQSS libvterm does not know (a crash too), REP before any character
 * (libvterm looped for ever), an OSC and a DCS of 100 000 bytes, a lone
 * ESC at the end.  Each is read by task_output (which feeds the screen)
 * and shown by task_screen; the text after it is on both.  Then the same
 * SGR typed through write_stdin into `cat` on a terminal, whose echo and
 * output come back in write_stdin's answer. */
static void test_s8_terminal_bombs(void **state) {
  static const char *const cases[] = {
      "\\e[38:2:59:66:97;48:2:36:40:59;58:2:224:175:104;4:3mcolour\\e[0m",
      "\\e[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17m",
      "\\e[38:2:1:2:3:4:5:6:7:8:9:10:11:12:13:14:15:16:17m",
      "\\e[123456789012345678901234567890H",
      "\\e[1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;"
      "1;1;1;1;1;1;1;1m",
      "\\xc2\\x9b1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17m",
      "\\eP$qO\\e\\\\",
      "\\e[5b",
      "\\e]0;$(printf '%100000s' | tr ' ' A)\\a",
      "\\eP1;2|$(printf '%100000s' | tr ' ' B)\\e\\\\",
  };
  char cmd[512];
  char want[32];
  char id[16];
  tfix_t t;
  rec_t r;
  uvt_tools_args_t a;
  size_t i;
  (void)state;

  tfix_init(&t);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    snprintf(cmd, sizeof(cmd), "printf \"%s\"; printf 'after-%zu\\n'",
             cases[i], i);
    snprintf(want, sizeof(want), "after-%zu", i);
    snprintf(id, sizeof(id), "bash-%zu", i + 1);
    uvt_tools_args_init(&a);
    a.command = cmd;
    a.tty = 1;
    call(&t, &r, &t.a, "run_in_background", &a);
    assert_int_equal(r.is_error, 0);
    a = args_id(id);
    a.wait = 1;
    call(&t, &r, &t.a, "task_output", &a);
    assert_int_equal(r.is_error, 0);
    assert_non_null(strstr(r.text, want));
    a = args_id(id);
    call(&t, &r, &t.a, "task_screen", &a);
    assert_int_equal(r.is_error, 0);
    assert_non_null(strstr(r.text, "[screen 80x24, main screen"));
    assert_non_null(strstr(r.text, want));
  }
  /* A lone ESC at the very end, then nothing: shown, no crash. */
  uvt_tools_args_init(&a);
  a.command = "printf 'last\\e'";
  a.tty = 1;
  call(&t, &r, &t.a, "run_in_background", &a);
  a = args_id("bash-11");
  a.wait = 1;
  call(&t, &r, &t.a, "task_output", &a);
  assert_non_null(strstr(r.text, "last"));
  a = args_id("bash-11");
  call(&t, &r, &t.a, "task_screen", &a);
  assert_non_null(strstr(r.text, "last"));

  /* Through write_stdin: typed into cat on a terminal. */
  uvt_tools_args_init(&a);
  a.command = "cat";
  a.tty = 1;
  call(&t, &r, &t.a, "run_in_background", &a);
  a = args_id("bash-12");
  a.chars = "\033[38:2:59:66:97;48:2:36:40:59;58:2:224:175:104;4:3mtyped\r";
  a.yield_ms = 2000;
  call(&t, &r, &t.a, "write_stdin", &a);
  assert_int_equal(r.is_error, 0);
  for (i = 0; i < 100 && strstr(r.text, "typed") == NULL; i++) {
    a = args_id("bash-12");
    a.yield_ms = 200;
    call(&t, &r, &t.a, "write_stdin", &a);
  }
  assert_non_null(strstr(r.text, "typed"));
  a = args_id("bash-12");
  call(&t, &r, &t.a, "task_screen", &a);
  assert_non_null(strstr(r.text, "typed"));
  a = args_id("bash-12");
  call(&t, &r, &t.a, "task_kill", &a);
  tfix_close(&t);
}

/* ---------------------------------------------------------------------- */
/* The process producer's side of M-TOOLS-10, -12, -15                     */

typedef struct {
  fixture_t *f;
  const char *id;
  char *got; /* what on_drop handed over, in order */
  size_t len;
  size_t cap;
} drops_t;

static void drop_rec(const char *id, const char *bytes, size_t len,
                     void *data) {
  drops_t *d = data;
  assert_string_equal(id, d->id);
  assert_true(d->len + len <= d->cap);
  memcpy(d->got + d->len, bytes, len);
  d->len += len;
}

/* What `seq 1 100000` prints (malloc'd; *len its length). */
static char *seq_text(size_t *len) {
  char *full = malloc(100000 * 7);
  int i;

  assert_non_null(full);
  *len = 0;
  for (i = 1; i <= 100000; i++)
    *len += (size_t)sprintf(full + *len, "%d\n", i);
  return full;
}

/* An on_drop record of up to `cap` bytes for tasks of `f`. */
static void drops_init(drops_t *d, fixture_t *f, size_t cap) {
  memset(d, 0, sizeof(*d));
  d->f = f;
  d->cap = cap;
  d->got = malloc(cap);
  assert_non_null(d->got);
}

static int task_ended(void *arg) {
  drops_t *d = arg;
  uvt_snapshot_t s;
  int done;
  assert_int_equal(uvt_get(d->f->reg, d->id, NULL, &s), 0);
  done = uvt_status_is_terminal(s.status);
  uvt_snapshot_cleanup(&s);
  return done;
}

/* M-TOOLS-15, M-TOOLS-10, M-TOOLS-12 in the process producer:
 * uvt_process_options_t's keep_head_bytes, on_drop and merge_stderr
 * directly: a 4 KiB cap and 100 000 lines; on_drop gets exactly the bytes
 * the read does not show, from the first on, in order; the read begins
 * with the kept first bytes (whole lines), then the notice counting what
 * is missing between them and the ring; merged, both streams are one. */
static void test_process_head_drop_merge(void **state) {
  fixture_t f;
  uvt_process_options_t po;
  uvt_read_t r;
  drops_t d;
  char id[UVT_ID_MAX];
  char *full;
  size_t n = 0;
  unsigned long long missing;
  const char *notice;

  (void)state;
  full = seq_text(&n);
  fixture_init(&f, NULL);
  drops_init(&d, &f, n);
  uvt_process_options_init(&po);
  po.command = "seq 1 100000";
  po.output_cap_bytes = 4096;
  po.keep_head_bytes = 100;
  po.on_drop = drop_rec;
  po.on_drop_data = &d;
  assert_int_equal(uvt_process_start(f.reg, &po, id), 0);
  d.id = id;
  fixture_run_until(&f, task_ended, &d);
  /* The dropped bytes are the output's own, from its first byte. */
  assert_true(d.len > n - 4096 - 4);
  assert_memory_equal(d.got, full, d.len);
  memset(&r, 0, sizeof(r));
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  /* The first 100 bytes up to their last newline, then the notice. */
  notice = strstr(r.text, "[... ");
  assert_non_null(notice);
  assert_true(notice > r.text && notice[-1] == '\n');
  assert_memory_equal(r.text, full, (size_t)(notice - r.text));
  assert_true(notice - r.text <= 100 && notice - r.text > 90);
  assert_int_equal(sscanf(notice, "[... %llu bytes dropped ...]", &missing), 1);
  /* First bytes + missing + the ring = the whole output. */
  assert_int_equal((size_t)(notice - r.text) + missing +
                       strlen(strchr(notice, '\n') + 1),
                   n);
  assert_true(ends_with(r.text, "\n100000\n"));
  uvt_read_cleanup(&r);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);

  /* merge_stderr: one stream in write order. */
  uvt_process_options_init(&po);
  po.command = "echo a; echo b >&2; echo c";
  po.merge_stderr = 1;
  assert_int_equal(uvt_process_start(f.reg, &po, id), 0);
  d.id = id;
  fixture_run_until(&f, task_ended, &d);
  memset(&r, 0, sizeof(r));
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  assert_string_equal(r.text, "a\nb\nc\n");
  uvt_read_cleanup(&r);
  fixture_close(&f);
  free(d.got);
  free(full);
}

/* M-TOOLS-10 with P-OUT-2: on_drop gets exactly the bytes that more
 * output pushed out, and a stream keeps output_cap_bytes.  A stream that
 * filled its ring and then only read its end (or nothing) lost its whole
 * ring to on_drop: `head -c 1000` at a 1000-byte cap read as empty.
 * Sizes around the cap and the read block (64 KiB), on stdout and on
 * stderr. */
/* Run `cmd` at a 1000-byte cap with on_drop recording into `d`, wait for
 * its end and read it: stream e's bytes, length and dropped count. */
static void drop_run(fixture_t *f, drops_t *d, const char *cmd, int e,
                     char id[UVT_ID_MAX], uvt_process_read_t *r,
                     const char **bytes, size_t *len, uint64_t *dropped) {
  uvt_process_options_t po;

  uvt_process_options_init(&po);
  po.command = cmd;
  po.output_cap_bytes = 1000;
  po.on_drop = drop_rec;
  po.on_drop_data = d;
  d->len = 0;
  assert_int_equal(uvt_process_start(f->reg, &po, id), 0);
  d->id = id;
  fixture_run_until(f, task_ended, d);
  assert_int_equal(uvt_process_read(f->reg, id, NULL, r), 0);
  *bytes = e == 0 ? r->out : r->err;
  *len = e == 0 ? r->out_len : r->err_len;
  *dropped = e == 0 ? r->out_dropped : r->err_dropped;
}

static void test_process_drop_exact(void **state) {
  static const size_t sizes[] = {999, 1000, 1001, 4096, 65536, 65539, 200000};
  static const char *const fmt[] = {"seq 1 100000 | head -c %zu",
                                    "seq 1 100000 | head -c %zu >&2"};
  fixture_t f;
  uvt_process_read_t r;
  drops_t d;
  char id[UVT_ID_MAX];
  char cmd[64];
  char *full;
  size_t n = 0;
  size_t i;
  int e;

  (void)state;
  full = seq_text(&n);
  fixture_init(&f, NULL);
  drops_init(&d, &f, n);
  for (e = 0; e < 2; e++) {
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      size_t want = sizes[i];
      size_t kept = want < 1000 ? want : 1000;
      const char *bytes;
      size_t len;
      uint64_t dropped;

      snprintf(cmd, sizeof(cmd), fmt[e], want);
      drop_run(&f, &d, cmd, e, id, &r, &bytes, &len, &dropped);
      assert_int_equal(len, kept);
      assert_memory_equal(bytes, full + want - kept, kept);
      assert_int_equal(dropped, want - kept);
      assert_int_equal(d.len, want - kept);
      assert_memory_equal(d.got, full, d.len);
      uvt_process_read_cleanup(&r);
      assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
    }
  }
  fixture_close(&f);
  free(d.got);
  free(full);
}

/* P-OUT-7 with M-TOOLS-10: when the cap's drop cuts a UTF-8 character,
 * the read skips the rest of it (P-OUT-3) and counts it as dropped; those
 * bytes reach on_drop too, so on_drop's bytes and the read's are the whole
 * output.  Every width (2, 3, 4 bytes) at a 1000-byte cap, which cuts a
 * character of each (1000 is no multiple of 3, and 1000 - 2 of 4: the
 * sizes below end where the cap's start falls inside one), on stdout and
 * stderr. */
static void test_process_drop_utf8(void **state) {
  static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac",
                                      "\xf0\x9f\x98\x80"};
  static const size_t count[] = {30001, 20000, 15001};
  fixture_t f;
  uvt_process_read_t r;
  drops_t d;
  char id[UVT_ID_MAX];
  char cmd[160];
  char *full;
  size_t w;
  size_t n;
  size_t i;
  int e;

  (void)state;
  fixture_init(&f, NULL);
  drops_init(&d, &f, 200000);
  full = malloc(200000);
  assert_non_null(full);
  for (e = 0; e < 2; e++) {
    for (w = 0; w < 3; w++) {
      const char *bytes;
      size_t len;
      uint64_t dropped;
      size_t cw = strlen(chars[w]);

      n = count[w] * cw;
      for (i = 0; i < count[w]; i++)
        memcpy(full + i * cw, chars[w], cw);
      /* The character is written with printf's octal escapes. */
      snprintf(cmd, sizeof(cmd),
               "c=$(printf '%s'); yes \"$c\" | tr -d '\\n' | head -c %zu%s",
               w == 0   ? "\\303\\251"
               : w == 1 ? "\\342\\202\\254"
                        : "\\360\\237\\230\\200",
               n, e ? " >&2" : "");
      drop_run(&f, &d, cmd, e, id, &r, &bytes, &len, &dropped);
      /* A whole number of characters, the last ones. */
      assert_true(len > 0 && len % cw == 0);
      assert_memory_equal(bytes, full + n - len, len);
      assert_int_equal(dropped, n - len);
      /* on_drop got every byte the read did not show, in order. */
      assert_int_equal(d.len, n - len);
      assert_memory_equal(d.got, full, d.len);
      uvt_process_read_cleanup(&r);
      assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
    }
  }
  fixture_close(&f);
  free(d.got);
  free(full);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-16: views in lines                                              */

static int utf8_whole(const char *s, size_t n);

static void run_view(tfix_t *t, rec_t *r, const char *cmd, int64_t head,
                     int64_t tail, const char *match) {
  uvt_tools_args_t a;

  uvt_tools_args_init(&a);
  a.command = cmd;
  a.head_lines = head;
  a.tail_lines = tail;
  a.match = match;
  call(t, r, &t->a, "run_command", &a);
}

/* head_lines, tail_lines (either, or both with one marker), match (the
 * matching lines with their numbers, per stream, and how many matched);
 * line numbers go on across reads; a view past the cap without a spill
 * file says the dropped bytes are not in it, and its numbers still count
 * them; bad views are tool errors before anything runs; a view's cuts and
 * the result's bounds keep whole characters (P-OUT-7). */
static void test_views(void **state) {
  static const char done[] = "[status: completed, exit code: 0]";
  uvt_tools_options_t to;
  uvt_tools_args_t a;
  char want[512];
  tfix_t t;
  rec_t r;
  (void)state;

  tfix_init(&t);
  run_view(&t, &r, "seq 1 20", 3, -1, NULL);
  snprintf(want, sizeof(want), "1\n2\n3\n[... 17 lines left out ...]\n%s",
           done);
  assert_string_equal(r.text, want);
  run_view(&t, &r, "seq 1 20", -1, 2, NULL);
  snprintf(want, sizeof(want), "[... 18 lines left out ...]\n19\n20\n%s", done);
  assert_string_equal(r.text, want);
  run_view(&t, &r, "seq 1 20", 3, 2, NULL);
  snprintf(want, sizeof(want),
           "1\n2\n3\n[... 15 lines left out ...]\n19\n20\n%s", done);
  assert_string_equal(r.text, want);
  run_view(&t, &r, "seq 1 4", 3, 2, NULL);
  snprintf(want, sizeof(want), "1\n2\n3\n4\n%s", done);
  assert_string_equal(r.text, want);
  run_view(&t, &r, "seq 1 20", -1, -1, "^1[5-9]$");
  snprintf(want, sizeof(want),
           "15: 15\n16: 16\n17: 17\n18: 18\n19: 19\n[5 of 20 lines "
           "match]\n%s",
           done);
  assert_string_equal(r.text, want);
  run_view(&t, &r, "seq 1 3; echo e2 >&2; echo x >&2", -1, -1, "2");
  snprintf(want, sizeof(want),
           "2: 2\n[stderr]\n1: e2\n[2 of 5 lines match]\n%s", done);
  assert_string_equal(r.text, want);
  run_view(&t, &r, "seq 1 20", 1, -1, "^2");
  snprintf(want, sizeof(want),
           "2: 2\n[... 1 line left out ...]\n[2 of 20 lines match]\n%s", done);
  assert_string_equal(r.text, want);

  /* Numbers go on across reads of a background task. */
  {
    char id[UVT_ID_MAX];
    start_interactive(&t, &r, "seq 1 5; read x; seq 6 10", START_STDIN, id);
    a = args_id(id);
    a.match = "^[38]$";
    a.timeout_ms = 100;
    for (;;) {
      call(&t, &r, &t.a, "task_output", &a);
      if (strstr(r.text, "3: 3") != NULL)
        break;
    }
    write_stdin(&t, &r, id, "\n", 0, -1);
    a.wait = 1;
    a.timeout_ms = 10000;
    call(&t, &r, &t.a, "task_output", &a);
    assert_true(strncmp(r.text, "8: 8\n[1 of 5 lines match]\n", 26) == 0);
  }

  /* Bad views. */
  uvt_tools_args_init(&a);
  a.command = "echo never";
  a.head_lines = 0;
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_string_equal(r.text, "head_lines must be a positive number of lines.");
  a.head_lines = -1;
  a.match = "(";
  call(&t, &r, &t.a, "run_command", &a);
  assert_int_equal(r.is_error, 1);
  assert_non_null(strstr(r.text, "not a valid POSIX extended regular "));
  /* S-8: a pattern that could stop the loop is refused before anything
   * runs (the back-reference one never answered, and no end of input
   * reached the server); its siblings too: another back-reference, nested
   * bounds, a long pattern.  What stays allowed: escapes, a backslash and
   * a digit inside brackets, plain bounds. */
  {
    static const char *const refused[] = {
        "(a*)*(a*)*(a*)*\\3\\2\\1b", "^(a|aa)*\\1b", "(x)\\9",
        "((a{255}){255}){255}", "(a{100}){100}", "a{5000}"};
    static const char *const allowed[] = {"\\.[0-9]+", "[\\1]x",
                                          "(ab){2,3}c", "x{3,}", "a{4096}"};
    char longpat[1100];
    size_t i;
    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
      a.match = refused[i];
      call(&t, &r, &t.a, "run_command", &a);
      assert_int_equal(r.is_error, 1);
      assert_non_null(strstr(r.text, "match is refused: "));
      assert_null(strstr(r.text, "never"));
    }
    memset(longpat, 'a', sizeof(longpat) - 1);
    longpat[sizeof(longpat) - 1] = '\0';
    a.match = longpat;
    call(&t, &r, &t.a, "run_command", &a);
    assert_non_null(strstr(r.text, "longer than 1024 bytes"));
    for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
      a.match = allowed[i];
      call(&t, &r, &t.a, "run_command", &a);
      assert_int_equal(r.is_error, 0);
    }
  }

  /* P-OUT-7: a view of lines of 4-byte characters cut by the result's
   * bounds keeps whole characters. */
  uvt_tools_args_init(&a);
  a.command = "for i in 1 2 3; do printf '\\360\\237\\230\\200%.0s' $(seq 1 "
              "300); echo; done";
  a.head_lines = 2;
  a.max_bytes = 256;
  call(&t, &r, &t.a, "run_command", &a);
  assert_true(utf8_whole(r.text, r.len));
  assert_non_null(strstr(r.text, "left out"));
  tfix_close(&t);

  /* Past the cap, without a spill file: what the cap dropped is not in the
   * view, which says so; the numbers still count it (line 19999 is 19999). */
  uvt_tools_options_init(&to);
  to.output_cap_bytes = 5000;
  tfix_init_opts(&t, NULL, &to);
  run_view(&t, &r, "seq 1 20000", -1, -1, "^(5|19999)$");
  assert_true(strncmp(r.text, "5: 5\n19999: 19999\n[2 of ",
                      strlen("5: 5\n19999: 19999\n[2 of ")) == 0);
  assert_non_null(strstr(r.text, "[the output cap dropped "));
  assert_non_null(strstr(r.text, " bytes of the output before this read; "
                                 "they are not in this view]\n"));
  tfix_close(&t);
}

/* ---------------------------------------------------------------------- */
/* M-TOOLS-18: errors that tell the truth                                  */

static int bash1_ended(void *arg) {
  tfix_t *t = arg;
  uvt_snapshot_t s;
  int done;

  assert_int_equal(uvt_get(t->f.reg, "bash-1", &t->a, &s), 0);
  done = uvt_status_is_terminal(s.status);
  uvt_snapshot_cleanup(&s);
  return done;
}

/* A write or a Ctrl-C to a task that ended says it ended, whatever the
 * task was started with: never that it should be restarted with stdin.  A
 * Ctrl-C to a live task started without stdin interrupts it (SIGINT), as
 * it does one with stdin (M-TOOLS-14). */
static void test_write_ended_truth(void **state) {
  static const char ended[] =
      "Nothing was sent: bash-%d has ended, so it takes no more input%s. "
      "task_output shows what it printed last.\n[status: completed, exit "
      "code: 0]";
  uvt_tools_args_t a;
  char want[300];
  char id[UVT_ID_MAX];
  tfix_t t;
  rec_t r;
  int i;
  (void)state;

  tfix_init(&t);
  uvt_tools_args_init(&a);
  a.command = "echo done";
  call(&t, &r, &t.a, "run_in_background", &a);
  fixture_run_until(&t.f, bash1_ended, &t);
  start_interactive(&t, &r, "exit 0", START_STDIN, id);
  run_until_settled(&t, &t.a, id);
  for (i = 1; i <= 2; i++) {
    char task[16];
    snprintf(task, sizeof(task), "bash-%d", i);
    write_stdin(&t, &r, task, "x\n", -1, -1);
    assert_int_equal(r.is_error, 1);
    snprintf(want, sizeof(want), ended, i, "");
    assert_string_equal(r.text, want);
    write_stdin(&t, &r, task, "\x03", -1, -1);
    assert_int_equal(r.is_error, 1);
    snprintf(want, sizeof(want), ended, i,
             " and there is nothing to interrupt");
    assert_string_equal(r.text, want);
    assert_null(strstr(r.text, "stdin"));
  }
  /* A live task without stdin: Ctrl-C is SIGINT. */
  uvt_tools_args_init(&a);
  a.command = "trap 'echo got-int; exit 3' INT; echo ready; sleep 30 & wait";
  call(&t, &r, &t.a, "run_in_background", &a);
  {
    char all[256] = "";
    size_t n = 0;
    while (strstr(all, "ready") == NULL) {
      uvt_tools_args_t o = args_id("bash-3");
      o.timeout_ms = 100;
      call(&t, &r, &t.a, "task_output", &o);
      n += (size_t)snprintf(all + n, sizeof(all) - n, "%s", r.text);
      assert_true(n < sizeof(all) - 1);
    }
  }
  write_stdin(&t, &r, "bash-3", "\x03", 10000, -1);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "got-int"));
  tfix_close(&t);
}

/* A write_stdin to a terminal program that ends with a lone ESC waits for
 * the program to act on it: a program that, like vim, waits a moment for
 * the rest of an escape sequence before it takes ESC alone (here 300 ms,
 * longer than write_stdin's default yield of 250 ms) has acted by the
 * time the answer comes. */
static void test_write_lone_esc(void **state) {
  tfix_t t;
  rec_t r;
  char id[UVT_ID_MAX];
  (void)state;

  tfix_init(&t);
  start_interactive(&t, &r,
                    "python3 -c 'import os, select, sys, tty\n"
                    "tty.setraw(0)\n"
                    "os.write(1, b\"mode: insert\\r\\n> \")\n"
                    "while True:\n"
                    "    if os.read(0, 1) == b\"\\x1b\" and not "
                    "select.select([0], [], [], 0.3)[0]:\n"
                    "        os.write(1, b\"mode: normal\\r\\n> \")\n'",
                    START_TTY, id);
  write_stdin(&t, &r, id, "", 10000, -1);
  assert_non_null(strstr(r.text, "mode: insert"));
  write_stdin(&t, &r, id, "\x1b", -1, -1);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, "mode: normal"));
  tfix_close(&t);
}

/* ---------------------------------------------------------------------- */
/* P-OUT-7: one UTF-8-safe path for every read and result size             */

/* A call's whole result text (rec_t keeps at most 40000 bytes). */
typedef struct {
  uvt_tools_call_t req;
  int calls;
  int is_error;
  char *text;
  size_t len;
} bigrec_t;

static void bigrec_cb(uvt_tools_call_t *req, int status) {
  bigrec_t *r = req->data;
  assert_int_equal(status, 0);
  r->calls++;
  r->is_error = req->is_error;
  r->text = malloc(req->len + 1);
  assert_non_null(r->text);
  memcpy(r->text, req->text, req->len);
  r->text[req->len] = '\0';
  r->len = req->len;
  uvt_tools_call_cleanup(req);
}

static int bigrec_done(void *arg) {
  return ((bigrec_t *)arg)->calls > 0;
}

static void call_big(tfix_t *t, bigrec_t *r, const char *name,
                     const uvt_tools_args_t *a) {
  memset(r, 0, sizeof(*r));
  r->req.data = r;
  assert_int_equal(
      uvt_tools_call(&t->tools, &r->req, &t->a, name, a, bigrec_cb), 0);
  fixture_run_until(&t->f, bigrec_done, r);
}

/* Valid UTF-8 without a U+FFFD: no character was split or replaced. */
static int utf8_whole(const char *s, size_t n) {
  size_t i;

  for (i = 0; i + 3 <= n; i++)
    if (memcmp(s + i, "\xef\xbf\xbd", 3) == 0)
      return 0;
  return uvt_tools_utf8_repair(s, n, NULL) == n;
}

/* A file of `p` bytes "x", then `count` copies of `ch`. */
static void utf8_file(const char *path, size_t p, const char *ch, size_t count,
                      char **bytes, size_t *len) {
  size_t cw = strlen(ch);
  size_t i;
  FILE *f;

  *len = p + count * cw;
  *bytes = malloc(*len + 1);
  assert_non_null(*bytes);
  memset(*bytes, 'x', p);
  for (i = 0; i < count; i++)
    memcpy(*bytes + p + i * cw, ch, cw);
  (*bytes)[*len] = '\0';
  f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(*bytes, 1, *len, f), *len);
  assert_int_equal(fclose(f), 0);
}

/* P-OUT-7: each width (2, 3 and 4 bytes) at every phase (a prefix of 0..3
 * ASCII bytes), so that characters straddle the ring's first size (4
 * KiB), the read chunk and landing block (64 KiB) and each doubling:
 *  - run_command's one read at the end, past 64 KiB with max_bytes big
 *    enough for all: the exact bytes;
 *  - task_output reads of a task written in 4097-byte blocks while it
 *    runs: together, the exact bytes;
 *  - an output cap of an odd size that cuts a character, and a max_bytes
 *    cut inside one long line: whole characters only. */
static void test_utf8_boundaries(void **state) {
  static const char *const chars[] = {"\xc3\xa9", "\xe4\xbd\xa0",
                                      "\xf0\x9f\x98\x80"};
  char dir[] = "/tmp/uvt-utf8-XXXXXX";
  char path[64];
  char cmd[128];
  uvt_tools_options_t to;
  uvt_tools_args_t a;
  bigrec_t r;
  tfix_t t;
  char *want;
  char *got;
  size_t len;
  size_t got_len;
  size_t w;
  size_t p;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/out", dir);
  tfix_init(&t);
  for (w = 0; w < 3; w++) {
    for (p = 0; p < 4; p++) {
      utf8_file(path, p, chars[w], 70000 / strlen(chars[w]), &want, &len);
      /* One read at the end. */
      snprintf(cmd, sizeof(cmd), "cat %s", path);
      uvt_tools_args_init(&a);
      a.command = cmd;
      a.max_bytes = 400000;
      call_big(&t, &r, "run_command", &a);
      assert_int_equal(r.is_error, 0);
      assert_true(r.len > len);
      assert_memory_equal(r.text, want, len);
      assert_string_equal(r.text + len, "\n[status: completed, exit code: 0]");
      free(r.text);
      /* Reads in pieces while it runs. */
      snprintf(cmd, sizeof(cmd), "dd if=%s bs=4097 2>/dev/null", path);
      uvt_tools_args_init(&a);
      a.command = cmd;
      call_big(&t, &r, "run_in_background", &a);
      free(r.text);
      got = malloc(4 * len + 64);
      assert_non_null(got);
      got_len = 0;
      for (;;) {
        const char *st;
        uvt_tools_args_t o;
        char id[32];
        int ended;

        snprintf(id, sizeof(id), "bash-%zu", 2 * (w * 4 + p) + 2);
        o = args_id(id);
        o.max_bytes = 400000;
        o.timeout_ms = 5;
        call_big(&t, &r, "task_output", &o);
        st = strstr(r.text, "[status: ");
        assert_non_null(st);
        ended = strncmp(st, "[status: completed", 18) == 0;
        assert_true(utf8_whole(r.text, r.len));
        if (strncmp(r.text, "(no new output)\n", 16) != 0 &&
            strncmp(r.text, "(waited", 7) != 0) {
          size_t n = (size_t)(st - r.text);
          const char *wt = strstr(r.text, "(waited ");
          if (wt != NULL && wt < st)
            n = (size_t)(wt - r.text);
          assert_true(got_len + n <= 4 * len + 64);
          memcpy(got + got_len, r.text, n);
          got_len += n;
        }
        free(r.text);
        if (ended)
          break;
      }
      /* A read that ends inside the line shows it as it is then, and the
       * next one shows it again from the terminal filter's segment start
       * (M-TOOLS-7): the reads hold the bytes, with repeats and line ends
       * of the filter's; each read is whole characters only. */
      assert_true(utf8_whole(got, got_len));
      assert_true(got_len >= len);
      free(got);
      free(want);
    }
  }
  tfix_close(&t);

  /* The cap and max_bytes cut inside a character: whole ones only. */
  uvt_tools_options_init(&to);
  to.output_cap_bytes = 50001;
  tfix_init_opts(&t, NULL, &to);
  for (w = 0; w < 3; w++) {
    utf8_file(path, 1, chars[w], 150000 / strlen(chars[w]), &want, &len);
    snprintf(cmd, sizeof(cmd), "cat %s", path);
    uvt_tools_args_init(&a);
    a.command = cmd;
    a.max_bytes = 400000;
    call_big(&t, &r, "run_command", &a);
    assert_true(utf8_whole(r.text, r.len));
    assert_non_null(strstr(r.text, " bytes dropped ...]"));
    free(r.text);
    a.max_bytes = 10001;
    call_big(&t, &r, "run_command", &a);
    assert_true(utf8_whole(r.text, r.len));
    assert_non_null(strstr(r.text, " left out"));
    free(r.text);
    free(want);
  }
  tfix_close(&t);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_json),
      cmocka_unit_test(test_call_contract),
      cmocka_unit_test(test_output_status_line),
      cmocka_unit_test(test_wait_completes),
      cmocka_unit_test(test_wait_timeout_is_success),
      cmocka_unit_test(test_wait_default_and_cap),
      cmocka_unit_test(test_abort_wait),
      cmocka_unit_test(test_abort_after_settlement_keeps_notice),
      cmocka_unit_test(test_abort_then_settle),
      cmocka_unit_test(test_notice_unreported),
      cmocka_unit_test(test_no_notice_when_reported),
      cmocka_unit_test(test_kill),
      cmocka_unit_test(test_tool_errors),
      cmocka_unit_test(test_list),
      cmocka_unit_test(test_utf8_repair),
      cmocka_unit_test(test_utf8_repair_public),
      cmocka_unit_test(test_nul_kept),
      cmocka_unit_test(test_attach_detach),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_run_in_background),
      cmocka_unit_test(test_c30_kill_ended_leftovers),
      cmocka_unit_test(test_leftovers_in_texts),
      cmocka_unit_test(test_leftover_leaves_session),
      cmocka_unit_test(test_task_kill_signal),
      cmocka_unit_test(test_write_ctrl_c),
      cmocka_unit_test(test_write_ctrl_c_before_spawn),
      cmocka_unit_test(test_run_command_timeout_term_ignorer),
      cmocka_unit_test(test_run_in_background_errors),
      cmocka_unit_test(test_s5_tools_workspace),
      cmocka_unit_test(test_s8_terminal_bombs),
      cmocka_unit_test(test_run_in_background_limit),
      cmocka_unit_test(test_run_command),
      cmocka_unit_test(test_run_command_timeout),
      cmocka_unit_test(test_run_command_abort),
      cmocka_unit_test(test_run_command_errors),
      cmocka_unit_test(test_progress_line_plain),
      cmocka_unit_test(test_c36_progress_bar),
      cmocka_unit_test(test_c36_siblings),
      cmocka_unit_test(test_c36_across_reads),
      cmocka_unit_test(test_filter_per_stream),
      cmocka_unit_test(test_term_table),
      cmocka_unit_test(test_term_long_line),
      cmocka_unit_test(test_c35_big_log),
      cmocka_unit_test(test_c35_siblings),
      cmocka_unit_test(test_clip_fits),
      cmocka_unit_test(test_c32_yield_promotes),
      cmocka_unit_test(test_write_stdin_polls_promoted),
      cmocka_unit_test(test_yield_siblings),
      cmocka_unit_test(test_write_stdin_prompt),
      cmocka_unit_test(test_public_looks),
      cmocka_unit_test(test_write_stdin_poll_after_prompt),
      cmocka_unit_test(test_write_stdin_yield_close),
      cmocka_unit_test(test_write_stdin_errors),
      cmocka_unit_test(test_write_stdin_tty),
      cmocka_unit_test(test_write_stdin_tty_ctrl_d),
      cmocka_unit_test(test_write_stdin_python),
      cmocka_unit_test(test_write_stdin_abort_detach),
      cmocka_unit_test(test_write_stdin_allocation_failures),
      cmocka_unit_test(test_m_tools_15_lines),
      cmocka_unit_test(test_m_tools_15_big),
      cmocka_unit_test(test_m_tools_15_clip_notice),
      cmocka_unit_test(test_m_tools_9_task_wait),
      cmocka_unit_test(test_m_tools_9_siblings),
      cmocka_unit_test(test_m_tools_12_merge_stderr),
      cmocka_unit_test(test_m_tools_13_stdin),
      cmocka_unit_test(test_m_tools_17_spill),
      cmocka_unit_test(test_spill_s7),
      cmocka_unit_test(test_spill_total),
      cmocka_unit_test(test_m_tools_10_spill_dir),
      cmocka_unit_test(test_m_tools_11_screen),
      cmocka_unit_test(test_process_head_drop_merge),
      cmocka_unit_test(test_process_drop_exact),
      cmocka_unit_test(test_process_drop_utf8),
      cmocka_unit_test(test_utf8_boundaries),
      cmocka_unit_test(test_write_ended_truth),
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_write_lone_esc),
  };
  if (getenv("UVT_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("UVT_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
