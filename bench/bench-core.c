/* The registry without processes (workloads 4-7).
 *
 *   bench-core lifecycle [--tasks 1000000] [--live 0] [--window 512]
 *       start -> settle (from a worker thread fed by a queue) -> listener
 *       -> get, then forget; `window` tasks in flight, `live` extra tasks
 *       alive (never settled) during the run.  Results: ns_per_task,
 *       settle_ns (the worker's time inside uvt_task_settle, per task).
 *   bench-core flat [--tasks 200000] [--low 10] [--high 100000]
 *                   [--chunks 10]
 *       the same lifecycle on two registries of one loop, one holding `low`
 *       live tasks and one `high`, in chunks alternating between them.
 *       Results: ns_low, ns_high (per task), flat_ratio (high / low).
 *   bench-core xsettle [--tasks 400000] [--threads 4]
 *       `tasks` running tasks settled by `threads` threads at once.
 *       Results: settles_per_s (calls, until the last thread is done),
 *       applied_per_s (until the last listener call on the loop).
 *   bench-core memory [--records 100000]
 *       peak RSS growth (getrusage) for `records` live records.  Results:
 *       rss_per_record (bytes), string_bytes (per record, in the record's
 *       block), record_struct (sizeof the record).
 *   bench-core list [--mine 10] [--foreign 100000] [--iters 20000]
 *       uvt_list for a session with `mine` tasks spread among `foreign`
 *       tasks of another session.  Result: ns_per_list.
 *   bench-core mcp-rss PATH
 *       peak RSS of PATH (uvtasks-mcp) after an initialize exchange, idle
 *       for 300 ms, then end of input.  Result: rss_kb. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "uvtasks.h"

#include "bench-util.h"

extern char **environ;

static uv_loop_t loop;
static uvt_registry_t *reg;
static uvt_surface_t surface;
static uvt_listener_t listener;

static void registry_open(void) {
  BENCH_CHECK(uv_loop_init(&loop));
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
}

static int registry_finish(void) {
  if (uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0) {
    fprintf(stderr, "bench-core: loop not clean at exit\n");
    return 1;
  }
  return 0;
}

/* ---- A trivial producer.  A cancel (only registry close sends one here)
 * settles at once, from the loop thread. */

static int cancel_settle(uvt_task_t *t, const char *reason) {
  uvt_outcome_t o = {.status = UVT_KILLED};
  (void)reason;
  return uvt_task_settle(t, &o);
}

static int run_idle(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  (void)t;
  (void)arg;
  hooks->cancel = cancel_settle;
  return 0;
}

/* ---- The worker thread that settles what the loop hands it. */

typedef struct {
  uv_mutex_t mutex;
  uv_cond_t cond;
  uvt_task_t **items;
  size_t n;
  size_t cap;
  int stop;
  uint64_t settle_ns;
} workq_t;

static workq_t wq;
static uvt_task_t **batch;
static size_t batch_n;

static void worker(void *arg) {
  uvt_task_t **mine = NULL;
  size_t cap = 0;
  (void)arg;
  for (;;) {
    size_t n, i;
    uint64_t t0;
    uv_mutex_lock(&wq.mutex);
    while (wq.n == 0 && !wq.stop)
      uv_cond_wait(&wq.cond, &wq.mutex);
    if (wq.n == 0 && wq.stop) {
      uv_mutex_unlock(&wq.mutex);
      break;
    }
    if (cap < wq.n) {
      cap = wq.cap;
      mine = realloc(mine, cap * sizeof(*mine));
      if (mine == NULL)
        abort();
    }
    n = wq.n;
    memcpy(mine, wq.items, n * sizeof(*mine));
    wq.n = 0;
    uv_mutex_unlock(&wq.mutex);
    t0 = bench_now_ns();
    for (i = 0; i < n; i++) {
      uvt_outcome_t o = {.status = UVT_COMPLETED};
      uvt_task_settle(mine[i], &o);
    }
    wq.settle_ns += bench_now_ns() - t0; /* only this thread writes it */
  }
  free(mine);
}

static void batch_flush(void) {
  if (batch_n == 0)
    return;
  uv_mutex_lock(&wq.mutex);
  if (wq.n + batch_n > wq.cap) {
    wq.cap = (wq.n + batch_n) * 2;
    wq.items = realloc(wq.items, wq.cap * sizeof(*wq.items));
    if (wq.items == NULL)
      abort();
  }
  memcpy(wq.items + wq.n, batch, batch_n * sizeof(*batch));
  wq.n += batch_n;
  uv_cond_signal(&wq.cond);
  uv_mutex_unlock(&wq.mutex);
  batch_n = 0;
}

static int run_queued(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  (void)arg;
  hooks->cancel = cancel_settle;
  batch[batch_n++] = t;
  return 0;
}

/* ---- lifecycle */

static struct {
  long tasks;
  long window;
  long started;
  long done;
  long inflight;
  uint64_t t0;
  uint64_t t1;
} lc;
static char (*forget_ids)[UVT_ID_MAX];
static size_t forget_n;

static void (*lc_finish)(void);

static void lc_start_more(void) {
  uvt_spec_t spec = {.kind = "bench", .label = "task", .run = run_queued};
  while (lc.inflight < lc.window && lc.started < lc.tasks) {
    BENCH_CHECK(uvt_start(reg, &spec, NULL));
    lc.started++;
    lc.inflight++;
  }
  batch_flush();
}

static void lc_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  uvt_snapshot_t s;
  size_t i;
  (void)l;
  (void)owner;
  /* Records whose dispatch finished may be forgotten (R-FORGET-1). */
  for (i = 0; i < forget_n; i++)
    BENCH_CHECK(uvt_forget(reg, forget_ids[i], NULL));
  forget_n = 0;
  BENCH_CHECK(uvt_get(reg, snap->id, NULL, &s));
  if (s.status != UVT_COMPLETED)
    abort();
  memcpy(forget_ids[forget_n++], s.id, strlen(s.id) + 1);
  uvt_snapshot_cleanup(&s);
  lc.done++;
  lc.inflight--;
  if (lc.inflight <= lc.window / 2)
    lc_start_more();
  if (lc.done == lc.tasks) {
    lc.t1 = bench_now_ns();
    lc_finish();
  }
}

static void lc_close(void) {
  uvt_listener_stop(&listener);
  BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
}

static int cmd_lifecycle(int argc, char **argv) {
  uvt_spec_t idle = {.kind = "idle", .label = "idle task", .run = run_idle};
  long extra = bench_lopt(argc, argv, "--live", 0);
  uv_thread_t tid;
  long i;

  lc.tasks = bench_lopt(argc, argv, "--tasks", 1000000);
  lc.window = bench_lopt(argc, argv, "--window", 512);
  batch = calloc((size_t)lc.window, sizeof(*batch));
  forget_ids = calloc((size_t)lc.window + 1, sizeof(*forget_ids));
  if (batch == NULL || forget_ids == NULL)
    abort();
  uv_mutex_init(&wq.mutex);
  uv_cond_init(&wq.cond);
  registry_open();
  BENCH_CHECK(uvt_listener_start(reg, &listener, lc_done));
  for (i = 0; i < extra; i++)
    BENCH_CHECK(uvt_start(reg, &idle, NULL));
  uv_thread_create(&tid, worker, NULL);

  lc_finish = lc_close;
  lc.t0 = bench_now_ns();
  lc_start_more();
  if (registry_finish() != 0)
    return 1;
  uv_mutex_lock(&wq.mutex);
  wq.stop = 1;
  uv_cond_signal(&wq.cond);
  uv_mutex_unlock(&wq.mutex);
  uv_thread_join(&tid);
  if (lc.done != lc.tasks) {
    fprintf(stderr, "bench-core: %ld of %ld tasks done\n", lc.done, lc.tasks);
    return 1;
  }
  bench_result("ns_per_task", (double)(lc.t1 - lc.t0) / (double)lc.tasks);
  bench_result("settle_ns", (double)wq.settle_ns / (double)lc.tasks);
  free(wq.items);
  free(batch);
  free(forget_ids);
  return 0;
}

/* ---- flat: settle cost against the number of live tasks, A/B in one
 * process.  Two registries on the same loop, one holding `low` live tasks
 * and one `high`; the lifecycle runs in chunks alternating between them,
 * so both see the same machine noise. */

static struct {
  uvt_registry_t *regs[2];
  uvt_surface_t surfaces[2];
  uvt_listener_t listeners[2];
  int cur;
  long chunks_left;
  uint64_t elapsed[2];
} fl;

static void fl_switch(void) {
  int i;
  fl.elapsed[fl.cur] += lc.t1 - lc.t0;
  /* The last record of the chunk is still being dispatched; it stays. */
  forget_n = 0;
  if (--fl.chunks_left == 0) {
    for (i = 0; i < 2; i++) {
      uvt_listener_stop(&fl.listeners[i]);
      BENCH_CHECK(uvt_registry_close(fl.regs[i], NULL, NULL));
    }
    return;
  }
  fl.cur = 1 - fl.cur;
  reg = fl.regs[fl.cur];
  lc.started = 0;
  lc.done = 0;
  lc.inflight = 0;
  lc.t0 = bench_now_ns();
  lc_start_more();
}

static int cmd_flat(int argc, char **argv) {
  uvt_spec_t idle = {.kind = "idle", .label = "idle task", .run = run_idle};
  long live[2];
  long tasks = bench_lopt(argc, argv, "--tasks", 200000);
  long chunks = bench_lopt(argc, argv, "--chunks", 10);
  uv_thread_t tid;
  long i;
  int r;

  live[0] = bench_lopt(argc, argv, "--low", 10);
  live[1] = bench_lopt(argc, argv, "--high", 100000);
  lc.window = bench_lopt(argc, argv, "--window", 512);
  lc.tasks = tasks / chunks;
  batch = calloc((size_t)lc.window, sizeof(*batch));
  forget_ids = calloc((size_t)lc.window + 1, sizeof(*forget_ids));
  if (batch == NULL || forget_ids == NULL)
    abort();
  uv_mutex_init(&wq.mutex);
  uv_cond_init(&wq.cond);
  BENCH_CHECK(uv_loop_init(&loop));
  for (r = 0; r < 2; r++) {
    BENCH_CHECK(uvt_registry_new(&loop, NULL, &fl.regs[r]));
    BENCH_CHECK(uvt_surface_attach(fl.regs[r], &fl.surfaces[r], "bench"));
    BENCH_CHECK(uvt_listener_start(fl.regs[r], &fl.listeners[r], lc_done));
    for (i = 0; i < live[r]; i++)
      BENCH_CHECK(uvt_start(fl.regs[r], &idle, NULL));
  }
  uv_thread_create(&tid, worker, NULL);

  lc_finish = fl_switch;
  fl.chunks_left = 2 * chunks;
  fl.cur = 0;
  reg = fl.regs[0];
  lc.t0 = bench_now_ns();
  lc_start_more();
  if (registry_finish() != 0)
    return 1;
  uv_mutex_lock(&wq.mutex);
  wq.stop = 1;
  uv_cond_signal(&wq.cond);
  uv_mutex_unlock(&wq.mutex);
  uv_thread_join(&tid);
  if (fl.chunks_left != 0) {
    fprintf(stderr, "bench-core: %ld chunks left\n", fl.chunks_left);
    return 1;
  }
  bench_result("ns_low", (double)fl.elapsed[0] / (double)(lc.tasks * chunks));
  bench_result("ns_high", (double)fl.elapsed[1] / (double)(lc.tasks * chunks));
  bench_result("flat_ratio", (double)fl.elapsed[1] / (double)fl.elapsed[0]);
  free(wq.items);
  free(batch);
  free(forget_ids);
  return 0;
}

/* ---- xsettle: cross-thread settles */

static struct {
  uvt_task_t **tasks;
  long n;
  long threads;
  long applied;
  uv_barrier_t barrier;
  uint64_t t0;
  uint64_t t_applied;
  uint64_t *t_thread;
} xs;

typedef struct {
  long index;
} xs_arg_t;

static int run_collect(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  (void)arg;
  hooks->cancel = cancel_settle;
  xs.tasks[xs.n++] = t;
  return 0;
}

static void xs_thread(void *arg) {
  long k = ((xs_arg_t *)arg)->index;
  long i;
  uv_barrier_wait(&xs.barrier);
  for (i = k; i < xs.n; i += xs.threads) {
    uvt_outcome_t o = {.status = UVT_COMPLETED};
    uvt_task_settle(xs.tasks[i], &o);
  }
  xs.t_thread[k] = bench_now_ns();
}

static void xs_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  (void)l;
  (void)snap;
  (void)owner;
  if (++xs.applied == xs.n) {
    xs.t_applied = bench_now_ns();
    uvt_listener_stop(&listener);
    BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  }
}

static int cmd_xsettle(int argc, char **argv) {
  long want = bench_lopt(argc, argv, "--tasks", 400000);
  uvt_spec_t spec = {.kind = "bench", .label = "task", .run = run_collect};
  uv_thread_t *tids;
  xs_arg_t *args;
  uint64_t t_last = 0;
  long i;

  xs.threads = bench_lopt(argc, argv, "--threads", 4);
  xs.tasks = calloc((size_t)want, sizeof(*xs.tasks));
  xs.t_thread = calloc((size_t)xs.threads, sizeof(*xs.t_thread));
  tids = calloc((size_t)xs.threads, sizeof(*tids));
  args = calloc((size_t)xs.threads, sizeof(*args));
  if (xs.tasks == NULL || xs.t_thread == NULL || tids == NULL || args == NULL)
    abort();
  registry_open();
  BENCH_CHECK(uvt_listener_start(reg, &listener, xs_done));
  for (i = 0; i < want; i++)
    BENCH_CHECK(uvt_start(reg, &spec, NULL));
  /* The threads and the loop start together. */
  uv_barrier_init(&xs.barrier, (unsigned)xs.threads + 1);
  for (i = 0; i < xs.threads; i++) {
    args[i].index = i;
    uv_thread_create(&tids[i], xs_thread, &args[i]);
  }
  uv_barrier_wait(&xs.barrier);
  xs.t0 = bench_now_ns();
  if (registry_finish() != 0)
    return 1;
  for (i = 0; i < xs.threads; i++) {
    uv_thread_join(&tids[i]);
    if (xs.t_thread[i] > t_last)
      t_last = xs.t_thread[i];
  }
  uv_barrier_destroy(&xs.barrier);
  if (xs.applied != xs.n) {
    fprintf(stderr, "bench-core: %ld of %ld applied\n", xs.applied, xs.n);
    return 1;
  }
  bench_result("settles_per_s", (double)xs.n * 1e9 / (double)(t_last - xs.t0));
  bench_result("applied_per_s",
               (double)xs.n * 1e9 / (double)(xs.t_applied - xs.t0));
  free(xs.tasks);
  free(xs.t_thread);
  free(tids);
  free(args);
  return 0;
}

/* ---- memory */

/* sizeof the record, from the outside: the library allocates a record and
 * its strings in one calloc(1, size) block, the largest single-object
 * calloc a start makes once its kind and index exist. */
static int watching;
static size_t largest_calloc;

static void *watch_calloc(size_t count, size_t size) {
  if (watching && count == 1 && size > largest_calloc)
    largest_calloc = size;
  return calloc(count, size);
}

static size_t record_block(const uvt_spec_t *spec) {
  BENCH_CHECK(uvt_replace_allocator(malloc, realloc, watch_calloc, free));
  registry_open();
  BENCH_CHECK(uvt_start(reg, spec, NULL)); /* the kind and the index */
  watching = 1;
  BENCH_CHECK(uvt_start(reg, spec, NULL));
  watching = 0;
  BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  if (registry_finish() != 0)
    exit(1);
  return largest_calloc;
}

static int cmd_memory(int argc, char **argv) {
  long n = bench_lopt(argc, argv, "--records", 100000);
  uvt_spec_t spec = {.kind = "bench", .label = "task", .run = run_idle};
  size_t kind_len = strlen(spec.kind);
  size_t strings;
  long before, after;
  long i;

  registry_open();
  /* Warm the allocator and the loop so the baseline is the plateau. */
  before = bench_maxrss_kb();
  for (i = 0; i < n; i++)
    BENCH_CHECK(uvt_start(reg, &spec, NULL));
  after = bench_maxrss_kb();
  BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  if (registry_finish() != 0)
    return 1;
  bench_result("rss_per_record", (double)(after - before) * 1024.0 / (double)n);
  /* The strings the record's block carries: kind, id (with room for 20
   * digits) and label. */
  strings = (kind_len + 1) + (kind_len + 22) + (strlen(spec.label) + 1);
  bench_result("string_bytes", (double)strings);
  bench_result("record_struct", (double)(record_block(&spec) - strings));
  return 0;
}

/* ---- list */

static int cmd_list(int argc, char **argv) {
  long mine = bench_lopt(argc, argv, "--mine", 10);
  long foreign = bench_lopt(argc, argv, "--foreign", 100000);
  long iters = bench_lopt(argc, argv, "--iters", 20000);
  uvt_agent_t a = {0}, b = {0}; /* handles start zeroed (R-BUSY-1) */
  uvt_spec_t spec_a = {
      .kind = "bench", .label = "mine", .owner = &a, .run = run_idle};
  uvt_spec_t spec_b = {
      .kind = "bench", .label = "foreign", .owner = &b, .run = run_idle};
  long total = mine + foreign;
  long every = mine > 0 ? total / mine : total + 1;
  uint64_t t0, t1;
  long i, got = 0;

  registry_open();
  BENCH_CHECK(uvt_agent_register(reg, &a, "agent-a", "session-a"));
  BENCH_CHECK(uvt_agent_register(reg, &b, "agent-b", "session-b"));
  /* The caller's tasks are spread evenly among the foreign ones. */
  for (i = 0; i < total; i++) {
    if (i % every == 0 && got < mine) {
      BENCH_CHECK(uvt_start(reg, &spec_a, NULL));
      got++;
    } else {
      BENCH_CHECK(uvt_start(reg, &spec_b, NULL));
    }
  }
  t0 = bench_now_ns();
  for (i = 0; i < iters; i++) {
    uvt_snapshot_t *arr;
    size_t count;
    BENCH_CHECK(uvt_list(reg, &a, &arr, &count));
    if ((long)count != mine)
      abort();
    uvt_snapshots_free(arr, count);
  }
  t1 = bench_now_ns();
  BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  if (registry_finish() != 0)
    return 1;
  bench_result("ns_per_list", (double)(t1 - t0) / (double)iters);
  return 0;
}

/* ---- mcp-rss */

static int cmd_mcp_rss(const char *path) {
  static const char hello[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
      "\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},"
      "\"clientInfo\":{\"name\":\"bench\",\"version\":\"0\"}}}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
  const char *args[] = {path, NULL};
  posix_spawn_file_actions_t fa;
  struct rusage ru;
  int in[2];
  int status;
  pid_t pid;

  if (pipe2(in, O_CLOEXEC) != 0)
    return 2;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (posix_spawn(&pid, path, &fa, NULL, (char **)args, environ) != 0) {
    perror("posix_spawn");
    return 2;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  if (write(in[1], hello, sizeof(hello) - 1) != (ssize_t)sizeof(hello) - 1)
    return 2;
  usleep(300000);
  close(in[1]); /* end of input: the server disposes and exits (M-MCP-4) */
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench-core: %s did not exit cleanly\n", path);
    return 1;
  }
  bench_result("rss_kb", (double)ru.ru_maxrss);
  return 0;
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "";
  signal(SIGPIPE, SIG_IGN);
  if (strcmp(cmd, "lifecycle") == 0)
    return cmd_lifecycle(argc, argv);
  if (strcmp(cmd, "flat") == 0)
    return cmd_flat(argc, argv);
  if (strcmp(cmd, "xsettle") == 0)
    return cmd_xsettle(argc, argv);
  if (strcmp(cmd, "memory") == 0)
    return cmd_memory(argc, argv);
  if (strcmp(cmd, "list") == 0)
    return cmd_list(argc, argv);
  if (strcmp(cmd, "mcp-rss") == 0 && argc > 2)
    return cmd_mcp_rss(argv[2]);
  fprintf(stderr, "usage: bench-core lifecycle|flat|xsettle|memory|list|"
                  "mcp-rss PATH [options]\n");
  return 2;
}
