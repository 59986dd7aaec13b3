/* P-THREAD-1: a call from a thread other than the registry's loop thread
 * is refused (UVT_ETHREAD, one log line) before it touches anything, so
 * it can never corrupt the heap, even while the loop is busy. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "test-util.h"
#include "uvtasks/process.h"
#include "uvtasks/producer.h"
#include "uvtasks/thread.h"
#include "uvtasks/tools.h"

/* A log that other threads may call: counts and keeps the last line. */
typedef struct {
  atomic_int warnings;
  uv_mutex_t mutex;
  char last[512];
} tlog_t;

static void tlog_cb(int level, const char *message, void *data) {
  tlog_t *l = data;
  if (level > UVT_LOG_WARN)
    return;
  atomic_fetch_add(&l->warnings, 1);
  uv_mutex_lock(&l->mutex);
  snprintf(l->last, sizeof(l->last), "%s", message);
  uv_mutex_unlock(&l->mutex);
}

typedef struct {
  uv_loop_t loop;
  uvt_registry_t *reg;
  tlog_t log;
  uvt_surface_t surface;
  int closed;
} tfix_t;

static void on_close(void *data) {
  ((tfix_t *)data)->closed++;
}

static void tfix_init(tfix_t *t) {
  uvt_options_t o;

  memset(t, 0, sizeof(*t));
  assert_int_equal(uv_mutex_init(&t->log.mutex), 0);
  uvt_options_init(&o);
  o.log = tlog_cb;
  o.log_data = &t->log;
  assert_int_equal(uv_loop_init(&t->loop), 0);
  assert_int_equal(uvt_registry_new(&t->loop, &o, &t->reg), 0);
  assert_int_equal(uvt_surface_attach(t->reg, &t->surface, "test"), 0);
}

static void tfix_close(tfix_t *t) {
  assert_int_equal(uvt_registry_close(t->reg, on_close, t), 0);
  assert_int_equal(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(t->closed, 1);
  assert_int_equal(uv_loop_close(&t->loop), 0);
  uv_mutex_destroy(&t->log.mutex);
}

/* What the other thread saw: each call's result, in order. */
typedef struct {
  tfix_t *t;
  int results[32];
  int n;
  int rounds; /* for the race: starts to try */
  int refused;
} offloop_t;

static void other_thread_calls(void *arg) {
  offloop_t *o = arg;
  uvt_registry_t *reg = o->t->reg;
  uvt_process_options_t po;
  uvt_snapshot_t snap;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  uvt_read_t rd;
  uvt_agent_t agent;
  uvt_listener_t listener;
  uvt_surface_t surface;
  uvt_wait_t wait;
  uvt_thread_options_t to;
  uvt_tools_t tools;
  char id[UVT_ID_MAX];

  uvt_process_options_init(&po);
  po.command = "echo never";
  memset(&agent, 0, sizeof(agent));
  memset(&listener, 0, sizeof(listener));
  memset(&surface, 0, sizeof(surface));
  memset(&wait, 0, sizeof(wait));
  memset(&tools, 0, sizeof(tools));
  memset(&rd, 0, sizeof(rd));
  uvt_thread_options_init(&to);
  o->results[o->n++] = uvt_process_start(reg, &po, id);
  o->results[o->n++] = uvt_get(reg, "bash-1", NULL, &snap);
  o->results[o->n++] = uvt_list(reg, NULL, &snaps, &n);
  o->results[o->n++] = uvt_read(reg, "bash-1", NULL, &rd);
  o->results[o->n++] = uvt_kill(reg, "bash-1", NULL, NULL, NULL);
  o->results[o->n++] = uvt_forget(reg, "bash-1", NULL);
  o->results[o->n++] = uvt_wait(reg, &wait, "bash-1", 10, NULL, NULL);
  o->results[o->n++] = uvt_agent_register(reg, &agent, "A", "S");
  o->results[o->n++] = uvt_surface_attach(reg, &surface, "s");
  o->results[o->n++] = uvt_listener_start(reg, &listener, NULL);
  o->results[o->n++] = uvt_process_pid(reg, "bash-1", NULL);
  o->results[o->n++] = uvt_process_leftovers(reg, "bash-1", NULL);
  o->results[o->n++] = uvt_process_signal(reg, "bash-1", NULL, 2);
  o->results[o->n++] = uvt_process_write(reg, "bash-1", NULL, "x", 1);
  o->results[o->n++] = uvt_process_close_stdin(reg, "bash-1", NULL);
  o->results[o->n++] = uvt_thread_start(reg, &to, NULL, NULL, id);
  o->results[o->n++] = uvt_tools_attach(reg, &tools, NULL);
  o->results[o->n++] = uvt_registry_close(reg, NULL, NULL);
}

/* The producers' interface (uvtasks/producer.h) and the looks the tools
 * use, called from another thread with a live task in the registry. */
typedef struct {
  tfix_t *t;
  uvt_task_t *task;
  int results[16];
  int n;
  void *pointers[2];
} looks_t;

static void ctx_close(uvt_context_t *ctx, uvt_context_done_cb done) {
  done(ctx);
}

static void other_thread_looks(void *arg) {
  looks_t *o = arg;
  uvt_registry_t *reg = o->t->reg;
  static const int key = 1;
  uvt_context_t ctx;
  uvt_task_t *found = o->task;
  uvt_snapshot_t snap;
  uvt_process_peek_t pk;
  const char *text = "x";
  size_t len = 1;
  size_t bytes;
  char line[64];

  memset(&ctx, 0, sizeof(ctx));
  ctx.key = &key;
  ctx.close = ctx_close;
  o->results[o->n++] = uvt_task_lookup(reg, "bash-1", NULL, &found);
  o->results[o->n++] = found == NULL ? UVT_ETHREAD : 0;
  o->results[o->n++] = uvt_task_snapshot(o->task, &snap);
  o->results[o->n++] = uvt_task_remainder_peek(o->task, &text, &len);
  o->results[o->n++] = text == NULL && len == 0 ? UVT_ETHREAD : 0;
  o->results[o->n++] = uvt_task_remainder_take(o->task, 0, NULL);
  o->results[o->n++] = uvt_context_add(reg, &ctx);
  o->results[o->n++] = (int)uvt_held_bytes(reg, "bash-1", NULL);
  o->results[o->n++] = uvt_process_peek(reg, "bash-1", NULL, &pk);
  o->results[o->n++] = uvt_process_last_line(reg, "bash-1", NULL, line,
                                             sizeof(line));
  o->results[o->n++] = uvt_process_unread_bytes(reg, "bash-1", NULL, &bytes);
  o->pointers[0] = uvt_task_find(reg, "bash-1");
  o->pointers[1] = uvt_context_find(reg, &key);
}

/* P-THREAD-1 for the producers' interface: every call that returns an
 * error is UVT_ETHREAD from another thread, every lookup that returns a
 * pointer gives NULL, each with its log line; nothing was added. */
static void test_producer_looks_off_loop(void **state) {
  tfix_t t;
  looks_t o;
  uv_thread_t th;
  uvt_process_options_t po;
  char id[UVT_ID_MAX];
  int i;
  (void)state;

  tfix_init(&t);
  memset(&o, 0, sizeof(o));
  o.t = &t;
  uvt_process_options_init(&po);
  po.command = "exec sleep 100";
  assert_int_equal(uvt_process_start(t.reg, &po, id), 0);
  assert_string_equal(id, "bash-1");
  assert_int_equal(uvt_task_lookup(t.reg, id, NULL, &o.task), 0);
  assert_int_equal(uv_thread_create(&th, other_thread_looks, &o), 0);
  assert_int_equal(uv_thread_join(&th), 0);
  assert_int_equal(o.n, 11);
  for (i = 0; i < o.n; i++)
    assert_int_equal(o.results[i], UVT_ETHREAD);
  assert_null(o.pointers[0]);
  assert_null(o.pointers[1]);
  /* One line per refused call: nine calls that return an error, two that
   * return a pointer (o.n also counts the two checks of what came back). */
  assert_int_equal(atomic_load(&t.log.warnings), 9 + 2);
  assert_non_null(strstr(t.log.last, "uvt_context_find"));
  /* The context was not added; on the loop thread it would be. */
  assert_null(uvt_context_find(t.reg, &o));
  assert_int_equal(uvt_kill(t.reg, id, NULL, NULL, NULL), 0);
  tfix_close(&t);
}

/* P-THREAD-1: every call from another thread is UVT_ETHREAD with a log
 * line naming the function, and the registry is untouched. */
static void test_refused_off_loop(void **state) {
  tfix_t t;
  offloop_t o;
  uv_thread_t th;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  int i;
  (void)state;

  tfix_init(&t);
  memset(&o, 0, sizeof(o));
  o.t = &t;
  assert_int_equal(uv_thread_create(&th, other_thread_calls, &o), 0);
  assert_int_equal(uv_thread_join(&th), 0);
  assert_int_equal(o.n, 18);
  for (i = 0; i < o.n; i++)
    assert_int_equal(o.results[i], UVT_ETHREAD);
  assert_int_equal(atomic_load(&t.log.warnings), o.n);
  assert_non_null(strstr(t.log.last, "uvt_registry_close"));
  assert_non_null(strstr(t.log.last, "thread other than the loop's"));
  assert_string_equal(uvt_err_name(UVT_ETHREAD), "UVT_ETHREAD");
  /* Nothing was started, registered or closed. */
  assert_int_equal(uvt_list(t.reg, NULL, &snaps, &n), 0);
  assert_int_equal(n, 0);
  uvt_snapshots_free(snaps, n);
  tfix_close(&t);
}

static void other_thread_starts(void *arg) {
  offloop_t *o = arg;
  uvt_process_options_t po;
  char id[UVT_ID_MAX];
  int i;

  uvt_process_options_init(&po);
  po.command = "echo never";
  for (i = 0; i < o->rounds; i++)
    if (uvt_process_start(o->t->reg, &po, id) == UVT_ETHREAD)
      o->refused++;
}

static void on_done(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  (void)status;
  (void)snap;
  (*(int *)req->data)++;
}

/* P-THREAD-1 under load: two threads try starts while the loop starts
 * and ends tasks of its own (the case that corrupted the heap before: a
 * double free in realloc under ASan).  Every foreign start is refused, the
 * loop's own tasks all end, and the sanitizer lanes see no race. */
static void test_race_with_loop(void **state) {
  tfix_t t;
  offloop_t o[2];
  uv_thread_t th[2];
  uvt_process_options_t po;
  uvt_wait_t waits[20];
  char id[UVT_ID_MAX];
  int done = 0;
  int i;
  (void)state;

  tfix_init(&t);
  for (i = 0; i < 2; i++) {
    memset(&o[i], 0, sizeof(o[i]));
    o[i].t = &t;
    o[i].rounds = 2000;
  }
  uvt_process_options_init(&po);
  po.command = "true";
  for (i = 0; i < 2; i++)
    assert_int_equal(uv_thread_create(&th[i], other_thread_starts, &o[i]), 0);
  for (i = 0; i < 20; i++) {
    assert_int_equal(uvt_process_start(t.reg, &po, id), 0);
    memset(&waits[i], 0, sizeof(waits[i]));
    waits[i].data = &done;
    assert_int_equal(uvt_wait(t.reg, &waits[i], id, 30000, NULL, on_done), 0);
    uv_run(&t.loop, UV_RUN_NOWAIT);
  }
  while (done < 20)
    uv_run(&t.loop, UV_RUN_ONCE);
  for (i = 0; i < 2; i++) {
    assert_int_equal(uv_thread_join(&th[i]), 0);
    assert_int_equal(o[i].refused, o[i].rounds);
  }
  assert_int_equal(atomic_load(&t.log.warnings), 4000);
  tfix_close(&t);
}

/* What a detached agent's disposal from another thread returned. */
typedef struct {
  uvt_agent_t *a;
  int result;
} detached_t;

static void other_thread_disposes(void *arg) {
  detached_t *d = arg;
  d->result = uvt_agent_dispose(d->a, NULL);
}

static void on_disposed(uvt_agent_t *a) {
  (*(int *)a->data)++;
}

/* P-THREAD-1 after R-CLOSE-1: an agent whose registry closed under it has
 * no registry to ask for the loop's thread, yet its disposal still
 * initialises a handle on the loop.  From another thread it is refused;
 * on the loop thread it completes. */
static void test_detached_agent_off_loop(void **state) {
  tfix_t t;
  uvt_agent_t a;
  detached_t d;
  uv_thread_t th;
  int disposed = 0;
  (void)state;

  tfix_init(&t);
  memset(&a, 0, sizeof(a)); /* never used: R-BUSY-1 reads its state */
  assert_int_equal(uvt_agent_register(t.reg, &a, "A", "s1"), 0);
  a.data = &disposed;
  assert_int_equal(uvt_registry_close(t.reg, on_close, &t), 0);
  assert_int_equal(uv_run(&t.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(t.closed, 1);
  assert_null(a.registry);
  d.a = &a;
  d.result = 0;
  assert_int_equal(uv_thread_create(&th, other_thread_disposes, &d), 0);
  assert_int_equal(uv_thread_join(&th), 0);
  assert_int_equal(d.result, UVT_ETHREAD);
  /* Nothing was put on the loop by the refused call. */
  assert_int_equal(uv_loop_alive(&t.loop), 0);
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  assert_int_equal(uv_run(&t.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(disposed, 1);
  assert_int_equal(uv_loop_close(&t.loop), 0);
  uv_mutex_destroy(&t.log.mutex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused_off_loop),
      cmocka_unit_test(test_race_with_loop),
      cmocka_unit_test(test_producer_looks_off_loop),
      cmocka_unit_test(test_detached_agent_off_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
