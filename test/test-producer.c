/* The producers' interface (uvtasks/producer.h), from the outside: this
 * file includes public headers only, as a producer of a host would.
 * Clauses: R-READ-1 and R-READ-3 (the terminal remainder once, through
 * uvt_task_remainder_peek/_take), R-OWN-2 (the fenced lookup), P-THREAD-1
 * (uvt_off_loop), and the per-registry contexts. */
#include <stdlib.h>
#include <string.h>

#include "test-util.h"
#include "uvtasks.h"
#include "uvtasks/producer.h"

static int settled_applied(void *arg) {
  fake_t *fk = arg;
  return uvt_status_is_terminal(uvt_task_status(fk->task));
}

/* R-READ-1, R-READ-3: the remainder is there once; taking it marks the
 * task reported and the snapshot shows it; uvt_read then finds nothing. */
static void test_remainder_once(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  const char *text;
  size_t len;
  uvt_snapshot_t snap;
  uvt_read_t r;
  uvt_task_t *t;
  (void)state;

  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, "stream", NULL, id), 0);
  assert_int_equal(uvt_task_lookup(f.reg, id, NULL, &t), 0);
  assert_ptr_equal(t, fk.task);
  assert_true(uvt_task_is_live(t));
  /* Live: nothing recorded yet. */
  assert_int_equal(uvt_task_remainder_peek(t, &text, &len), 0);
  assert_null(text);
  assert_int_equal(len, 0);
  assert_int_equal(uvt_task_remainder_take(t, 1, &snap), UV_EINVAL);

  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, "abc"), 0);
  fixture_run_until(&f, settled_applied, &fk);
  assert_false(uvt_task_is_live(t));
  assert_int_equal(uvt_task_remainder_peek(t, &text, &len), 1);
  assert_int_equal(len, 3);
  assert_memory_equal(text, "abc", 3);

  assert_int_equal(uvt_task_remainder_take(t, 1, &snap), 0);
  assert_true(snap.reported);
  uvt_snapshot_cleanup(&snap);
  /* Consumed: the length stays, the text is gone. */
  assert_int_equal(uvt_task_remainder_peek(t, &text, &len), 0);
  assert_null(text);
  assert_int_equal(len, 3);
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  assert_int_equal(r.len, 0);
  uvt_read_cleanup(&r);
  fixture_close(&f);
}

/* R-READ-1: a take that does not consume leaves the remainder for the
 * next read, which gets it whole. */
static void test_remainder_kept(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_read_t r;
  (void)state;

  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  fk.stream = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, "stream", NULL, id), 0);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, "xyz"), 0);
  fixture_run_until(&f, settled_applied, &fk);
  assert_int_equal(uvt_task_remainder_take(fk.task, 0, NULL), 0);
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  assert_int_equal(r.len, 3);
  assert_string_equal(r.text, "xyz");
  assert_true(r.snapshot.reported);
  uvt_read_cleanup(&r);
  fixture_close(&f);
}

/* R-OWN-2: the producer's lookup is fenced like the host's; its own view
 * (uvt_task_find) is not.  The hooks tell its tasks from others'. */
static void test_lookup_fenced(void **state) {
  fixture_t f;
  fake_t fk;
  uvt_agent_t a;
  uvt_agent_t other;
  char id[UVT_ID_MAX];
  uvt_task_t *t = NULL;
  (void)state;

  fixture_init(&f, NULL);
  memset(&a, 0, sizeof(a));
  memset(&other, 0, sizeof(other));
  assert_int_equal(uvt_agent_register(f.reg, &a, "a", "s1"), 0);
  assert_int_equal(uvt_agent_register(f.reg, &other, "b", "s2"), 0);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1; /* the registry's close ends it */
  assert_int_equal(fake_start(f.reg, &fk, NULL, "owned", &a, id), 0);
  assert_int_equal(uvt_task_lookup(f.reg, id, NULL, &t), UVT_EFOREIGN);
  assert_int_equal(uvt_task_lookup(f.reg, id, &other, &t), UVT_EFOREIGN);
  assert_int_equal(uvt_task_lookup(f.reg, id, &a, &t), 0);
  assert_ptr_equal(t, fk.task);
  assert_int_equal(uvt_task_lookup(f.reg, "fake-999", &a, &t), UVT_ENOTASK);
  assert_null(t); /* *out is NULL in every error */
  assert_int_equal(uvt_task_lookup(NULL, id, &a, &t), UV_EINVAL);
  assert_ptr_equal(uvt_task_find(f.reg, id), fk.task);
  assert_null(uvt_task_find(f.reg, "fake-999"));
  assert_non_null(uvt_task_hooks(fk.task)->cancel);
  assert_int_equal(uvt_task_host_leaving(fk.task), 0);
  fixture_close(&f);
}

/* A live detail shows in snapshots; once the task ended it is refused
 * (freed) and the outcome's detail stays. */
static void test_live_detail(void **state) {
  fixture_t f;
  fake_t fk;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  char *d;
  (void)state;

  fixture_init(&f, NULL);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(f.reg, &fk, NULL, "detail", NULL, id), 0);
  d = malloc(8);
  assert_non_null(d);
  strcpy(d, "pending");
  uvt_task_set_detail(fk.task, d);
  assert_int_equal(uvt_task_snapshot(fk.task, &s), 0);
  assert_string_equal(s.detail, "pending");
  uvt_snapshot_cleanup(&s);
  assert_int_equal(fake_settle(&fk, UVT_FAILED, "boom", NULL), 0);
  fixture_run_until(&f, settled_applied, &fk);
  d = malloc(6);
  assert_non_null(d);
  strcpy(d, "later");
  uvt_task_set_detail(fk.task, d);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_string_equal(s.detail, "boom");
  uvt_snapshot_cleanup(&s);
  fixture_close(&f);
}

/* Per-registry contexts: found by key, closed once at registry close
 * after the records, refused once the registry is closing. */
typedef struct {
  uvt_context_t ctx;
  int closes;
  int done;
} my_ctx_t;

static int my_key;

static void my_close(uvt_context_t *ctx, uvt_context_done_cb done) {
  my_ctx_t *m = (my_ctx_t *)ctx;
  m->closes++;
  done(ctx);
  m->done++;
}

static void test_context(void **state) {
  fixture_t f;
  my_ctx_t m;
  my_ctx_t late;
  (void)state;

  fixture_init(&f, NULL);
  memset(&m, 0, sizeof(m));
  memset(&late, 0, sizeof(late));
  assert_null(uvt_context_find(f.reg, &my_key));
  m.ctx.key = &my_key;
  m.ctx.close = my_close;
  assert_int_equal(uvt_context_add(f.reg, &m.ctx), 0);
  assert_ptr_equal(uvt_context_find(f.reg, &my_key), &m.ctx);
  assert_ptr_equal(m.ctx.reg, f.reg);
  assert_int_equal(uvt_registry_close(f.reg, NULL, NULL), 0);
  late.ctx.key = &late;
  late.ctx.close = my_close;
  assert_int_equal(uvt_context_add(f.reg, &late.ctx), UVT_ECLOSING);
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(m.closes, 1);
  assert_int_equal(m.done, 1);
  assert_int_equal(late.closes, 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* P-THREAD-1: uvt_off_loop answers 1 (and logs) off the loop thread. */
typedef struct {
  fixture_t *f;
  int answer;
} off_arg_t;

static void off_thread(void *arg) {
  off_arg_t *o = arg;
  o->answer = uvt_off_loop(o->f->reg, "off_thread");
}

static void test_off_loop(void **state) {
  fixture_t f;
  uv_thread_t th;
  off_arg_t arg;
  (void)state;

  fixture_init(&f, NULL); /* its log counts warnings */
  assert_int_equal(uvt_off_loop(f.reg, "here"), 0);
  assert_int_equal(uvt_off_loop(NULL, "here"), 0);
  arg.f = &f;
  arg.answer = -1;
  assert_int_equal(uv_thread_create(&th, off_thread, &arg), 0);
  assert_int_equal(uv_thread_join(&th), 0);
  assert_int_equal(arg.answer, 1);
  assert_true(f.warnings >= 1);
  assert_non_null(strstr(f.last_warning, "off_thread"));
  fixture_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_remainder_once),
      cmocka_unit_test(test_remainder_kept),
      cmocka_unit_test(test_lookup_fenced),
      cmocka_unit_test(test_live_detail),
      cmocka_unit_test(test_context),
      cmocka_unit_test(test_off_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
