/* A-2 (docs/contract.md §10h): option structs carry their size, and the
 * library reads and writes only the bytes the caller's size holds.
 *
 * For each option struct a host fills in:
 *  - "older host": the struct as a host built against headers that lacked
 *    its last fields sees it (size = offsetof a field), with garbage in
 *    the bytes past that size.  _init_size must leave the garbage alone
 *    and every entry point must give the missing fields their defaults:
 *    a garbage pointer read would crash, a garbage number would be
 *    refused or change what runs.
 *  - "exact allocation": the same smaller struct in a heap block of
 *    exactly `size` bytes, so that the asan lane reports any byte read or
 *    written past it (the canary: bytes past `size` in a larger block must
 *    be untouched after _init_size).
 *  - size 0 (a struct built by memset or `= {0}`), a size below the
 *    smallest version, and a size past the library's own struct with a
 *    byte set there are refused with UV_EINVAL and a log line that says
 *    which _init to call; a larger size whose extra bytes are all 0 is
 *    taken.
 *  - the old function symbols (bindings, dlsym) still fill the whole
 *    struct of these headers. */
#include <stdlib.h>
#include <string.h>

#include "../src/uvt-internal.h"
#include "test-util.h"
#include "uvtasks/process.h"
#include "uvtasks/thread.h"
#include "uvtasks/tools.h"
#if defined(UVT_TEST_SLURM)
#include "uvtasks/slurm.h"
#endif

#define GARBAGE 0xA5
#define CANARY 0x5A
#define CANARY_LEN 64

/* A block of `size` bytes followed by CANARY_LEN canary bytes, the first
 * `size` bytes garbage. */
static void *canary_block(size_t size) {
  unsigned char *p = malloc(size + CANARY_LEN);
  assert_non_null(p);
  memset(p, GARBAGE, size);
  memset(p + size, CANARY, CANARY_LEN);
  return p;
}

static void assert_canary(const void *block, size_t size) {
  const unsigned char *p = block;
  size_t i;
  for (i = 0; i < CANARY_LEN; i++)
    assert_int_equal(p[size + i], CANARY);
}

/* A block of exactly `size` bytes for a struct that is larger in these
 * headers: the size goes through a volatile so that the compiler does not
 * see a struct in a block too small for it (that is the point). */
static void *exact_block(size_t size) {
  volatile size_t n = size;
  void *p = malloc(n);
  assert_non_null(p);
  return p;
}

/* A struct of the library's size whose bytes from `size` on are garbage:
 * what an older host's struct is followed by in memory. */
static void *garbage_block(size_t full, size_t size,
                           void (*init_size)(void *o, size_t size)) {
  unsigned char *p = malloc(full);
  assert_non_null(p);
  memset(p, GARBAGE, full);
  init_size(p, size);
  for (size_t i = size; i < full; i++)
    assert_int_equal(p[i], GARBAGE);
  return p;
}

/* The registry's log lines, for the refusals (the fixture's log keeps
 * the last warning or error). */
static int refusal_logged(fixture_t *f, const char *init_name) {
  return strstr(f->last_warning, "options refused") != NULL ||
                 strstr(f->last_warning, "arguments refused") != NULL
             ? strstr(f->last_warning, init_name) != NULL
             : 0;
}

/* ---- _init_size writes nothing past the caller's size (all structs) --- */

#define INIT_SIZE_CANARY(type, fn, field)                                      \
  do {                                                                         \
    size_t sizes[] = {offsetof(type, field),                                   \
                      sizeof(type),                                            \
                      UVT__OPTS_MIN_T(type),                                   \
                      sizeof(size_t),                                          \
                      3,                                                       \
                      0};                                                      \
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {            \
      void *b = canary_block(sizes[k]);                                        \
      fn(b, sizes[k]);                                                         \
      assert_canary(b, sizes[k]);                                              \
      if (sizes[k] >= sizeof(size_t)) {                                        \
        size_t got;                                                            \
        memcpy(&got, b, sizeof(got));                                          \
        assert_int_equal(got, sizes[k]);                                       \
      }                                                                        \
      free(b);                                                                 \
    }                                                                          \
  } while (0)

/* The first field after `size` ends at most here in every struct. */
#define UVT__OPTS_MIN_T(type) (sizeof(size_t) + sizeof(uint64_t))

static void a2_init_size_canary(void **state) {
  (void)state;
  /* A-2 (c): each _init_size, at a size that ends before its last field,
   * at its full size, and at sizes too small for anything. */
  INIT_SIZE_CANARY(uvt_options_t, uvt_options_init_size, log);
  INIT_SIZE_CANARY(uvt_process_options_t, uvt_process_options_init_size,
                   durable);
  INIT_SIZE_CANARY(uvt_thread_options_t, uvt_thread_options_init_size,
                   stack_size);
  INIT_SIZE_CANARY(uvt_tools_options_t, uvt_tools_options_init_size, durable);
  INIT_SIZE_CANARY(uvt_tools_args_t, uvt_tools_args_init_size, match);
#if defined(UVT_TEST_SLURM)
  INIT_SIZE_CANARY(uvt_slurm_engine_options_t,
                   uvt_slurm_engine_options_init_size, sbatch_allow);
  INIT_SIZE_CANARY(uvt_slurm_options_t, uvt_slurm_options_init_size, submitted);
#endif
}

static void a2_init_size_defaults(void **state) {
  uvt_process_options_t po;
  uvt_tools_args_t a;
  unsigned char big[sizeof(uvt_options_t) + 16];
  uvt_options_t *o = (uvt_options_t *)(void *)big;
  (void)state;

  /* the macro passes the caller's sizeof; the fields inside get their
   * defaults. */
  memset(&po, GARBAGE, sizeof(po));
  uvt_process_options_init(&po);
  assert_int_equal(po.size, sizeof(po));
  assert_int_equal(po.grace_ms, UVT_PROCESS_GRACE_MS);
  assert_int_equal(po.pty_rows, UVT_PROCESS_PTY_ROWS);
  assert_null(po.command);
  assert_int_equal(po.durable, 0);
  memset(&a, GARBAGE, sizeof(a));
  uvt_tools_args_init(&a);
  assert_int_equal(a.size, sizeof(a));
  assert_int_equal(a.tail_lines, -1);
  assert_null(a.match);

  /* A host built against newer headers: the bytes this library does not
   * know are zeroed, within the host's size. */
  memset(big, GARBAGE, sizeof(big));
  uvt_options_init_size(o, sizeof(big) - 8);
  assert_int_equal(o->size, sizeof(big) - 8);
  assert_int_equal(o->teardown_grace_ms, 10000);
  for (size_t i = sizeof(uvt_options_t); i < sizeof(big) - 8; i++)
    assert_int_equal(big[i], 0);
  for (size_t i = sizeof(big) - 8; i < sizeof(big); i++)
    assert_int_equal(big[i], GARBAGE);

  /* The old symbols (bindings, dlsym users built against these headers)
   * fill the whole struct. */
  memset(&po, GARBAGE, sizeof(po));
  (uvt_process_options_init)(&po);
  assert_int_equal(po.size, sizeof(po));
  assert_int_equal(po.durable, 0);
  assert_int_equal(po.drain_ms, UVT_PROCESS_DRAIN_MS);
  memset(&a, GARBAGE, sizeof(a));
  (uvt_tools_args_init)(&a);
  assert_int_equal(a.size, sizeof(a));
  assert_null(a.match);
  /* NULL is accepted by the functions. */
  uvt_options_init_size(NULL, sizeof(uvt_options_t));
  (uvt_options_init)(NULL);
  (uvt_thread_options_init)(NULL);
  (uvt_tools_options_init)(NULL);
}

/* ---- uvt_options_t: uvt_registry_new ---------------------------------- */

static void close_cb(void *data) {
  (*(int *)data)++;
}

static void registry_close(uv_loop_t *loop, uvt_registry_t *reg) {
  int closed = 0;
  assert_int_equal(uvt_registry_close(reg, close_cb, &closed), 0);
  assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(closed, 1);
}

static void init_options_size(void *o, size_t size) {
  uvt_options_init_size(o, size);
}

static void a2_registry_sizes(void **state) {
  uv_loop_t loop;
  uvt_registry_t *reg = NULL;
  uvt_options_t *o;
  size_t small = offsetof(uvt_options_t, log);
  unsigned char *big;
  (void)state;

  assert_int_equal(uv_loop_init(&loop), 0);

  /* A-2 (a): an older host's struct ends before `log`; the garbage after
   * it (a wild log pointer) must never be read: the registry logs to
   * stderr, its default. */
  o = garbage_block(sizeof(*o), small, init_options_size);
  o->teardown_grace_ms = 1234;
  o->max_live_per_owner = 7;
  assert_int_equal(uvt_registry_new(&loop, o, &reg), 0);
  assert_int_equal(reg->options.teardown_grace_ms, 1234);
  assert_int_equal(reg->options.max_live_per_owner, 7);
  assert_null(reg->options.log);
  assert_null(reg->options.log_data);
  free(o);
  registry_close(&loop, reg);

  /* A-2 (c): the same in a block of exactly that size (asan sees a read
   * past it). */
  o = exact_block(small);
  uvt_options_init_size(o, small);
  o->max_live_per_owner = 3;
  assert_int_equal(uvt_registry_new(&loop, o, &reg), 0);
  assert_int_equal(reg->options.max_live_per_owner, 3);
  assert_int_equal(reg->options.teardown_grace_ms, 10000);
  free(o);
  registry_close(&loop, reg);

  /* A-2 (b): size 0 (memset), too small, larger with a byte set: refused,
   * and nothing is made. */
  o = malloc(sizeof(*o));
  assert_non_null(o);
  memset(o, 0, sizeof(*o));
  reg = NULL;
  assert_int_equal(uvt_registry_new(&loop, o, &reg), UV_EINVAL);
  assert_null(reg);
  uvt_options_init(o);
  o->size = sizeof(size_t);
  assert_int_equal(uvt_registry_new(&loop, o, &reg), UV_EINVAL);
  free(o);
  big = calloc(1, sizeof(uvt_options_t) + 32);
  assert_non_null(big);
  uvt_options_init_size((uvt_options_t *)(void *)big,
                        sizeof(uvt_options_t) + 32);
  big[sizeof(uvt_options_t) + 5] = 1;
  assert_int_equal(uvt_registry_new(&loop, (uvt_options_t *)(void *)big, &reg),
                   UV_EINVAL);
  assert_null(reg);
  /* Extra bytes all 0: a newer host that left its new fields alone. */
  big[sizeof(uvt_options_t) + 5] = 0;
  assert_int_equal(uvt_registry_new(&loop, (uvt_options_t *)(void *)big, &reg),
                   0);
  assert_int_equal(reg->options.teardown_grace_ms, 10000);
  free(big);
  registry_close(&loop, reg);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- uvt_process_options_t: uvt_process_start -------------------------- */

typedef struct {
  fixture_t *f;
  const char *id;
} done_t;

static int task_ended(void *arg) {
  done_t *d = arg;
  uvt_snapshot_t s;
  int ended;
  if (uvt_get(d->f->reg, d->id, NULL, &s) != 0)
    return 1;
  ended = s.status >= UVT_COMPLETED;
  uvt_snapshot_cleanup(&s);
  return ended;
}

/* Run `o` to its end; its output must be `want`. */
static void process_runs(fixture_t *f, const uvt_process_options_t *o,
                         const char *want) {
  char id[UVT_ID_MAX];
  done_t d = {f, id};
  uvt_snapshot_t s;
  uvt_read_t r;

  assert_int_equal(uvt_process_start(f->reg, o, id), 0);
  fixture_run_until(f, task_ended, &d);
  assert_int_equal(uvt_get(f->reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_read(f->reg, id, NULL, &r), 0);
  assert_non_null(strstr(r.text, want));
  uvt_read_cleanup(&r);
}

static void init_process_size(void *o, size_t size) {
  uvt_process_options_init_size(o, size);
}

static void a2_process_sizes(void **state) {
  fixture_t f;
  uvt_process_options_t *o;
  size_t small = offsetof(uvt_process_options_t, on_tee);
  char id[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  /* A-2 (a): a host whose struct ends before on_tee: garbage in on_tee
   * (called with every byte: a wild pointer), stdout_pipe_bytes and
   * durable (a durable task needs a state directory: refused) must not
   * be read. */
  o = garbage_block(sizeof(*o), small, init_process_size);
  o->command = "echo older-host";
  process_runs(&f, o, "older-host");
  free(o);

  /* A-2 (c): exactly that many bytes. */
  o = exact_block(small);
  uvt_process_options_init_size(o, small);
  o->command = "echo exact-block";
  process_runs(&f, o, "exact-block");
  free(o);

  /* The smallest version: size and command. */
  small = offsetof(uvt_process_options_t, argv);
  o = garbage_block(sizeof(*o), small, init_process_size);
  o->command = "echo smallest";
  process_runs(&f, o, "smallest");
  free(o);

  /* A-2 (b): size 0 (a struct made by memset), logged with the _init to
   * call; below the smallest version. */
  o = calloc(1, sizeof(*o));
  assert_non_null(o);
  o->command = "echo never";
  assert_int_equal(uvt_process_start(f.reg, o, id), UV_EINVAL);
  assert_true(refusal_logged(&f, "uvt_process_options_init()"));
  assert_non_null(strstr(f.last_warning, "size field is 0"));
  uvt_process_options_init(o);
  o->command = "echo never";
  o->size = offsetof(uvt_process_options_t, command) + 1;
  assert_int_equal(uvt_process_start(f.reg, o, id), UV_EINVAL);
  free(o);
  fixture_close(&f);
}

/* ---- uvt_thread_options_t: uvt_thread_start ---------------------------- */

static void thread_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  (void)ctx;
  (void)arg;
  out->status = UVT_COMPLETED;
}

static void init_thread_size(void *o, size_t size) {
  uvt_thread_options_init_size(o, size);
}

static void thread_runs(fixture_t *f, const uvt_thread_options_t *o,
                        const char *kind, const char *label) {
  char id[UVT_ID_MAX];
  done_t d = {f, id};
  uvt_snapshot_t s;

  assert_int_equal(uvt_thread_start(f->reg, o, thread_fn, NULL, id), 0);
  fixture_run_until(f, task_ended, &d);
  assert_int_equal(uvt_get(f->reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_COMPLETED);
  assert_string_equal(s.kind, kind);
  assert_string_equal(s.label, label);
  uvt_snapshot_cleanup(&s);
}

static void a2_thread_sizes(void **state) {
  fixture_t f;
  uvt_thread_options_t *o;
  char id[UVT_ID_MAX];
  (void)state;

  fixture_init(&f, NULL);
  /* A-2 (a): a host with only `kind`: label, owner and stack_size are
   * garbage (a wild label pointer, a stack of 0xA5A5... bytes) and must
   * take their defaults. */
  o = garbage_block(sizeof(*o), offsetof(uvt_thread_options_t, label),
                    init_thread_size);
  o->kind = "older";
  thread_runs(&f, o, "older", "thread");
  free(o);
  /* Without stack_size only. */
  o = garbage_block(sizeof(*o), offsetof(uvt_thread_options_t, stack_size),
                    init_thread_size);
  o->label = "no stack field";
  thread_runs(&f, o, "thread", "no stack field");
  free(o);
  /* A-2 (c): exactly that many bytes. */
  o = exact_block(offsetof(uvt_thread_options_t, stack_size));
  uvt_thread_options_init_size(o, offsetof(uvt_thread_options_t, stack_size));
  o->label = "exact";
  thread_runs(&f, o, "thread", "exact");
  free(o);
  /* A-2 (b). */
  o = calloc(1, sizeof(*o));
  assert_non_null(o);
  assert_int_equal(uvt_thread_start(f.reg, o, thread_fn, NULL, id), UV_EINVAL);
  assert_true(refusal_logged(&f, "uvt_thread_options_init()"));
  free(o);
  fixture_close(&f);
}

/* ---- uvt_tools_options_t and uvt_tools_args_t -------------------------- */

typedef struct {
  int calls;
  int status;
  int is_error;
  char text[4096];
} rec_t;

static void rec_cb(uvt_tools_call_t *req, int status) {
  rec_t *r = req->data;
  r->calls++;
  r->status = status;
  r->is_error = req->is_error;
  snprintf(r->text, sizeof(r->text), "%s", req->text ? req->text : "");
  uvt_tools_call_cleanup(req);
}

static int rec_done(void *arg) {
  return ((rec_t *)arg)->calls > 0;
}

static void detach_cb(uvt_tools_t *tools) {
  (*(int *)tools->data)++;
}

/* run_command `command` with `a`; its result must hold `want`. */
static void tools_runs(fixture_t *f, uvt_tools_t *tools, uvt_agent_t *agent,
                       const uvt_tools_args_t *a, const char *want) {
  uvt_tools_call_t req;
  rec_t r;
  memset(&r, 0, sizeof(r));
  memset(&req, 0, sizeof(req)); /* a handle: zeroed before first use */
  req.data = &r;
  assert_int_equal(uvt_tools_call(tools, &req, agent, "run_command", a, rec_cb),
                   0);
  fixture_run_until(f, rec_done, &r);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.is_error, 0);
  assert_non_null(strstr(r.text, want));
}

static void init_tools_size(void *o, size_t size) {
  uvt_tools_options_init_size(o, size);
}

static void init_args_size(void *o, size_t size) {
  uvt_tools_args_init_size(o, size);
}

static void a2_tools_sizes(void **state) {
  fixture_t f;
  uvt_tools_t tools;
  uvt_agent_t agent;
  uvt_tools_options_t *to;
  uvt_tools_args_t *a;
  uvt_tools_call_t req;
  size_t small = offsetof(uvt_tools_options_t, sandbox);
  int detached = 0;
  (void)state;

  fixture_init(&f, NULL);
  uvt_surface_detach(&f.surface);
  memset(&agent, 0, sizeof(agent));
  assert_int_equal(uvt_agent_register(f.reg, &agent, "agent-a", "s1"), 0);

  /* A-2 (b): options made by memset are refused, nothing attached. */
  to = calloc(1, sizeof(*to));
  assert_non_null(to);
  assert_int_equal(uvt_tools_attach(f.reg, &tools, to), UV_EINVAL);
  assert_true(refusal_logged(&f, "uvt_tools_options_init()"));
  free(to);

  /* A-2 (a): a host whose options end before `sandbox`: the garbage in
   * sandbox (a wild pointer), spill_dir, limits, durable... must not be
   * read. */
  to = garbage_block(sizeof(*to), small, init_tools_size);
  to->max_bytes = 5000;
  memset(&tools, 0, sizeof(tools));
  tools.data = &detached;
  assert_int_equal(uvt_tools_attach(f.reg, &tools, to), 0);
  free(to);
  assert_null(tools.sandbox_);
  assert_null(tools.spill_dir_);
  assert_int_equal(tools.limits_.memory_bytes, 0);
  assert_int_equal(tools.durable_, 0);
  assert_int_equal(tools.max_bytes_, 5000);

  /* A-2 (a): arguments of a host whose struct ends before memory_mb:
   * garbage in the limits, the line views and `match` (a wild regex
   * pointer) must not be read. */
  a = garbage_block(sizeof(*a), offsetof(uvt_tools_args_t, memory_mb),
                    init_args_size);
  a->command = "echo older-args";
  tools_runs(&f, &tools, &agent, a, "older-args");
  free(a);
  /* A-2 (c): exactly that many bytes. */
  a = exact_block(offsetof(uvt_tools_args_t, memory_mb));
  uvt_tools_args_init_size(a, offsetof(uvt_tools_args_t, memory_mb));
  a->command = "echo exact-args";
  tools_runs(&f, &tools, &agent, a, "exact-args");
  free(a);
  /* A-2 (b): arguments made by memset. */
  a = calloc(1, sizeof(*a));
  assert_non_null(a);
  a->command = "echo never";
  memset(&req, 0, sizeof(req));
  assert_int_equal(
      uvt_tools_call(&tools, &req, &agent, "run_command", a, rec_cb),
      UV_EINVAL);
  assert_true(refusal_logged(&f, "uvt_tools_args_init()"));
  free(a);

  assert_int_equal(uvt_tools_detach(&tools, detach_cb), 0);
  fixture_close(&f);
  assert_int_equal(detached, 1);
}

#if defined(UVT_TEST_SLURM)
/* ---- The Slurm engine's structs: what runs without a cluster ----------- */

static void a2_slurm_sizes(void **state) {
  fixture_t f;
  uvt_slurm_engine_options_t *eo;
  uvt_slurm_engine_t *e = NULL;
  (void)state;

  fixture_init(&f, NULL);
  /* A-2 (b): engine options made by memset: refused before anything is
   * looked at (no cluster needed). */
  eo = calloc(1, sizeof(*eo));
  assert_non_null(eo);
  eo->out_dir = "/nonexistent/a2";
  assert_int_equal(uvt_slurm_engine_new(f.reg, eo, &e), UV_EINVAL);
  assert_null(e);
  assert_true(refusal_logged(&f, "uvt_slurm_engine_options_init()"));
  free(eo);
  fixture_close(&f);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(a2_init_size_canary),
    cmocka_unit_test(a2_init_size_defaults),
    cmocka_unit_test(a2_registry_sizes),
    cmocka_unit_test(a2_process_sizes),
    cmocka_unit_test(a2_thread_sizes),
    cmocka_unit_test(a2_tools_sizes),
#if defined(UVT_TEST_SLURM)
    cmocka_unit_test(a2_slurm_sizes),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
