/* Output throughput (workload 3) and memory given back (workload 6).
 *
 *   bench-output --impl uvtasks|rawpipe|shellpipe --cmd head|dd
 *                [--mib 256] [--cap-mib 1] [--backpressure]
 *                [--durable | --durable-restart]
 *   bench-output --impl burst [--rounds 25] [--tasks 200]
 *   bench-output --impl mcp-burst --mcp PATH [--rounds 25] [--tasks 200]
 *
 * Reads `mib` MiB of zeros from `head -c` or `dd bs=64K`:
 *   uvtasks    a process task (argv) read with uvt_read() after every loop
 *              iteration (a uv_check handle) until it is terminal;
 *              output_cap_bytes is --cap-mib (default the producer's 1 MiB).
 *              Bytes the cap dropped are reported as "dropped".  With
 *              --backpressure, output_backpressure is on (P-OUT-4): the
 *              child waits at the cap instead, and nothing is dropped.
 *              With --durable the task is durable (D-2): its output goes
 *              to a file in a state directory under /tmp and is read from
 *              there as it comes (with --backpressure: the file holds
 *              what the ring does not, and nothing is dropped).  With
 *              --durable-restart the command writes everything while its
 *              host is gone, and the clock runs while a second registry
 *              takes it back and reads it all from the state directory.
 *              ($UVT_BENCH_STATE_BASE: the directory's parent.)
 *   rawpipe    the raw libuv reader: pipe2 + posix_spawn + uv_pipe_open +
 *              uv_read_start with a 64 KiB buffer, to EOF, then waitpid.
 *   shellpipe  the limit: `sh -c 'CMD | cat >/dev/null'`, waited for.
 *
 *   burst      issue #12's burst in this process: `rounds` times, `tasks`
 *              tasks of `seq 1 100000` started together, each read when
 *              it ended and forgotten, then 300 ms of idle loop.
 *   mcp-burst  the same through uvtasks-mcp (--keep-finished 0, so every
 *              reported task is forgotten): run_in_background for each,
 *              then task_output with wait for each; the server's RSS.
 *
 * Results: mib_per_s, and for uvtasks dropped (bytes); for the bursts
 * rss_idle_kb (after one small task, before the burst), rss_after_kb (after
 * the last round's idle time), rss_peak_kb and after_ratio (after / idle).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "uvtasks.h"
#include "uvtasks/process.h"

#include "bench-util.h"

extern char **environ;

static uv_loop_t loop;
static uint64_t bytes;
static uint64_t dropped;
static uint64_t t_start;
static uint64_t t_end;
static char count_arg[64];
static char size_arg[64];
static const char *cmd_argv[8];
static char shell_line[256];

static void make_command(const char *cmd, long mib) {
  if (strcmp(cmd, "dd") == 0) {
    snprintf(count_arg, sizeof(count_arg), "count=%ld", mib * 16);
    cmd_argv[0] = "dd";
    cmd_argv[1] = "if=/dev/zero";
    cmd_argv[2] = "bs=64K";
    cmd_argv[3] = count_arg;
    cmd_argv[4] = "status=none";
    cmd_argv[5] = NULL;
    snprintf(shell_line, sizeof(shell_line),
             "dd if=/dev/zero bs=64K %s status=none | cat >/dev/null",
             count_arg);
  } else {
    snprintf(size_arg, sizeof(size_arg), "%ld", mib << 20);
    cmd_argv[0] = "head";
    cmd_argv[1] = "-c";
    cmd_argv[2] = size_arg;
    cmd_argv[3] = "/dev/zero";
    cmd_argv[4] = NULL;
    snprintf(shell_line, sizeof(shell_line),
             "head -c %s /dev/zero | cat >/dev/null", size_arg);
  }
}

/* ---- uvtasks */

static uvt_registry_t *reg;
static uvt_surface_t surface;
static uv_check_t check;
static char task_id[UVT_ID_MAX];

/* Count the bytes of a read, minus the producer's drop notice, which a
 * read begins with when bytes were dropped ("[... N bytes dropped ...]"). */
static void account(const uvt_read_t *r) {
  unsigned long long n;
  const char *nl;
  bytes += r->len;
  if (r->len > 4 && memcmp(r->text, "[... ", 5) == 0 &&
      sscanf(r->text, "[... %llu bytes dropped ...]", &n) == 1 &&
      (nl = memchr(r->text, '\n', r->len)) != NULL) {
    dropped += n;
    bytes -= (uint64_t)(nl + 1 - r->text);
  }
}

static void check_cb(uv_check_t *h) {
  uvt_read_t r;
  BENCH_CHECK(uvt_read(reg, task_id, NULL, &r));
  account(&r);
  if (uvt_status_is_terminal(r.snapshot.status)) {
    t_end = bench_now_ns();
    if (r.snapshot.status != UVT_COMPLETED)
      fprintf(stderr, "bench-output: task ended %s (%s)\n",
              uvt_status_name(r.snapshot.status),
              r.snapshot.detail ? r.snapshot.detail : "");
    uv_close((uv_handle_t *)h, NULL);
    BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  }
  uvt_read_cleanup(&r);
}

static char state_dir[64];

/* A durable task's output is read when asked, unless the host wants to
 * hear of it as it comes: this host does (its loop must wake up when
 * bytes arrive, as a pipe wakes it). */
static void on_output(const char *id, void *data) {
  (void)id;
  (void)data;
}

static void run_uvtasks(long cap_mib, int backpressure, int durable) {
  uvt_process_options_t o;
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
  uvt_process_options_init(&o);
  o.argv = cmd_argv;
  o.output_backpressure = backpressure;
  if (durable) {
    /* $UVT_BENCH_STATE_BASE: where the state directory goes (default
     * /tmp; a tmpfs such as /dev/shm to take the disk out). */
    const char *base = getenv("UVT_BENCH_STATE_BASE");
    snprintf(state_dir, sizeof(state_dir), "%s/uvt-bench-XXXXXX",
             base != NULL ? base : "/tmp");
    if (mkdtemp(state_dir) == NULL)
      abort();
    BENCH_CHECK(uvt_process_adopt_all(reg, state_dir, NULL));
    o.durable = 1;
    o.on_output = on_output;
  }
  if (cap_mib > 0)
    o.output_cap_bytes = (size_t)cap_mib << 20;
  uv_check_init(&loop, &check);
  uv_check_start(&check, check_cb);
  t_start = bench_now_ns();
  BENCH_CHECK(uvt_process_start(reg, &o, task_id));
  uv_run(&loop, UV_RUN_DEFAULT);
}

/* ---- D-2: read from the state directory after a restart */

static uv_idle_t spin;

static void spin_cb(uv_idle_t *h) {
  uvt_read_t r;
  BENCH_CHECK(uvt_read(reg, task_id, NULL, &r));
  account(&r);
  if (uvt_status_is_terminal(r.snapshot.status)) {
    t_end = bench_now_ns();
    if (r.snapshot.status != UVT_COMPLETED)
      fprintf(stderr, "bench-output: task ended %s (%s)\n",
              uvt_status_name(r.snapshot.status),
              r.snapshot.detail ? r.snapshot.detail : "");
    uv_close((uv_handle_t *)h, NULL);
    BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  }
  uvt_read_cleanup(&r);
}

/* The command writes everything while its first host is gone (a registry
 * that closed and left it running: D-1); then the clock starts, a second
 * registry takes it back (D-3) and reads it all from the files, as fast
 * as it can (an idle handle). */
static void run_durable_restart(long cap_mib) {
  uvt_process_options_t o;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  const char *base = getenv("UVT_BENCH_STATE_BASE");
  int pid;
  int st;

  snprintf(state_dir, sizeof(state_dir), "%s/uvt-bench-XXXXXX",
           base != NULL ? base : "/tmp");
  if (mkdtemp(state_dir) == NULL)
    abort();
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
  BENCH_CHECK(uvt_process_adopt_all(reg, state_dir, NULL));
  uvt_process_options_init(&o);
  o.argv = cmd_argv;
  o.durable = 1;
  o.output_backpressure = 1; /* the file keeps everything */
  if (cap_mib > 0)
    o.output_cap_bytes = (size_t)cap_mib << 20;
  BENCH_CHECK(uvt_process_start(reg, &o, task_id));
  while ((pid = uvt_process_pid(reg, task_id, NULL)) == 0)
    uv_run(&loop, UV_RUN_ONCE);
  BENCH_CHECK(pid < 0 ? pid : 0);
  BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  uv_run(&loop, UV_RUN_DEFAULT);
  /* Its keeper is still our child: the command wrote everything. */
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  t_start = bench_now_ns();
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
  BENCH_CHECK(uvt_process_adopt_all(reg, state_dir, NULL) == 1 ? 0 : -1);
  BENCH_CHECK(uvt_list(reg, NULL, &snaps, &n));
  snprintf(task_id, sizeof(task_id), "%s", snaps[0].id);
  uvt_snapshots_free(snaps, n);
  uv_idle_init(&loop, &spin);
  uv_idle_start(&spin, spin_cb);
}

/* ---- the raw libuv reader */

static uv_pipe_t pipe_h;
static char raw_buf[65536];

static void raw_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  (void)size;
  buf->base = raw_buf;
  buf->len = sizeof(raw_buf);
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  if (n > 0)
    bytes += (uint64_t)n;
  else if (n < 0)
    uv_close((uv_handle_t *)s, NULL);
}

static pid_t spawn_with_stdout(const char *const *args, int out_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  pid_t pid;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  if (posix_spawnp(&pid, args[0], &fa, &attr, (char **)args, environ) != 0) {
    perror("posix_spawnp");
    exit(2);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return pid;
}

static void run_rawpipe(void) {
  int p[2];
  pid_t pid;
  t_start = bench_now_ns();
  if (pipe2(p, O_CLOEXEC) != 0)
    abort();
  pid = spawn_with_stdout(cmd_argv, p[1]);
  close(p[1]);
  uv_pipe_init(&loop, &pipe_h, 0);
  BENCH_CHECK(uv_pipe_open(&pipe_h, p[0]));
  BENCH_CHECK(uv_read_start((uv_stream_t *)&pipe_h, raw_alloc, raw_read));
  uv_run(&loop, UV_RUN_DEFAULT);
  waitpid(pid, NULL, 0);
  t_end = bench_now_ns();
}

static void run_shellpipe(long mib) {
  const char *args[] = {"sh", "-c", shell_line, NULL};
  pid_t pid;
  t_start = bench_now_ns();
  pid = spawn_with_stdout(args, -1);
  waitpid(pid, NULL, 0);
  t_end = bench_now_ns();
  bytes = (uint64_t)mib << 20;
}

/* ---- memory given back after a burst (issue #12) */

/* VmRSS and VmHWM of `pid` (0: this process), in KiB. */
static long status_kb(pid_t pid, const char *field) {
  char path[64];
  char line[256];
  size_t n = strlen(field);
  long v = -1;
  FILE *f;
  if (pid == 0)
    snprintf(path, sizeof(path), "/proc/self/status");
  else
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, field, n) == 0 && line[n] == ':')
      v = atol(line + n + 1);
  fclose(f);
  return v;
}

static int burst_left;

static void burst_done(uvt_wait_t *w, int status, const uvt_snapshot_t *snap) {
  uvt_read_t r;
  char id[UVT_ID_MAX];
  (void)status;
  snprintf(id, sizeof(id), "%s", snap->id);
  BENCH_CHECK(uvt_read(reg, id, NULL, &r));
  uvt_read_cleanup(&r);
  BENCH_CHECK(uvt_forget(reg, id, NULL));
  free(w);
  burst_left--;
}

static void idle_timer_cb(uv_timer_t *t) {
  uv_close((uv_handle_t *)t, NULL);
}

/* Let the loop idle for `ms` (the producer's deferred work runs). */
static void idle_for(uint64_t ms) {
  static uv_timer_t t;
  uv_timer_init(&loop, &t);
  uv_timer_start(&t, idle_timer_cb, ms, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
}

static void burst_round(const char *cmd, long tasks) {
  long i;
  burst_left = (int)tasks;
  for (i = 0; i < tasks; i++) {
    uvt_process_options_t o;
    char id[UVT_ID_MAX];
    uvt_wait_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
      exit(2);
    uvt_process_options_init(&o);
    o.command = cmd;
    BENCH_CHECK(uvt_process_start(reg, &o, id));
    BENCH_CHECK(uvt_wait(reg, w, id, 600000, NULL, burst_done));
  }
  while (burst_left > 0)
    uv_run(&loop, UV_RUN_ONCE);
}

static void burst_results(long idle, long after, long peak) {
  bench_result("rss_idle_kb", (double)idle);
  bench_result("rss_after_kb", (double)after);
  bench_result("rss_peak_kb", (double)peak);
  bench_result("after_ratio", (double)after / (double)idle);
}

static int run_burst(long rounds, long tasks) {
  long idle;
  long r;
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
  burst_round("true", 1);
  idle_for(300);
  idle = status_kb(0, "VmRSS");
  for (r = 0; r < rounds; r++) {
    burst_round("seq 1 100000", tasks);
    idle_for(300);
  }
  burst_results(idle, status_kb(0, "VmRSS"), status_kb(0, "VmHWM"));
  BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  return 0;
}

/* One JSON-RPC line to the server. */
static void mcp_send(FILE *to, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void mcp_send(FILE *to, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(to, fmt, ap);
  va_end(ap);
  fputc('\n', to);
  fflush(to);
}

/* The next response (not a notification); its line in *line. */
static void mcp_answer(FILE *from, char **line, size_t *cap) {
  for (;;) {
    if (getline(line, cap, from) < 0) {
      fprintf(stderr, "bench-output: the server ended\n");
      exit(2);
    }
    if (strstr(*line, "\"method\"") == NULL)
      return;
  }
}

static int run_mcp_burst(const char *path, long rounds, long tasks) {
  const char *args[] = {path, "--keep-finished", "0", NULL};
  posix_spawn_file_actions_t fa;
  int in[2];
  int out[2];
  pid_t pid;
  FILE *to;
  FILE *from;
  char *line = NULL;
  size_t cap = 0;
  long *ids;
  long idle = 0;
  long peak = 0;
  long r;
  long i;
  long next = 1;
  int status;

  ids = calloc((size_t)tasks, sizeof(*ids));
  if (ids == NULL || pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    return 2;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (posix_spawn(&pid, path, &fa, NULL, (char **)args, environ) != 0) {
    perror("posix_spawn");
    return 2;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  to = fdopen(in[1], "w");
  from = fdopen(out[0], "r");
  mcp_send(to, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
               "\"params\":{\"protocolVersion\":\"2025-06-18\","
               "\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\","
               "\"version\":\"0\"}}}");
  mcp_answer(from, &line, &cap);
  mcp_send(to, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
               "initialized\"}");
  for (r = -1; r < rounds; r++) {
    /* Round -1: one small task, before the idle measurement. */
    long n = r < 0 ? 1 : tasks;
    for (i = 0; i < n; i++)
      mcp_send(to,
               "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\","
               "\"params\":{\"name\":\"run_in_background\",\"arguments\":"
               "{\"command\":\"%s\"}}}",
               next++, r < 0 ? "true" : "seq 1 100000");
    for (i = 0; i < n; i++) {
      const char *b;
      mcp_answer(from, &line, &cap);
      b = strstr(line, "bash-");
      if (b == NULL) {
        fprintf(stderr, "bench-output: no task id in %.200s\n", line);
        return 2;
      }
      ids[i] = atol(b + 5);
    }
    for (i = 0; i < n; i++)
      mcp_send(to,
               "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\","
               "\"params\":{\"name\":\"task_output\",\"arguments\":"
               "{\"task_id\":\"bash-%ld\",\"wait\":true,"
               "\"timeout_ms\":600000}}}",
               next++, ids[i]);
    for (i = 0; i < n; i++)
      mcp_answer(from, &line, &cap);
    usleep(300000);
    if (r < 0)
      idle = status_kb(pid, "VmRSS");
    else if (status_kb(pid, "VmHWM") > peak)
      peak = status_kb(pid, "VmHWM");
  }
  burst_results(idle, status_kb(pid, "VmRSS"), peak);
  fclose(to); /* end of input: the server exits (M-MCP-4) */
  while (getline(&line, &cap, from) >= 0)
    ;
  fclose(from);
  free(line);
  free(ids);
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench-output: %s did not exit cleanly\n", path);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *impl = bench_sopt(argc, argv, "--impl", "uvtasks");
  long mib = bench_lopt(argc, argv, "--mib", 256);
  uint64_t want = (uint64_t)mib << 20;

  make_command(bench_sopt(argc, argv, "--cmd", "head"), mib);
  signal(SIGPIPE, SIG_IGN);
  if (strcmp(impl, "mcp-burst") == 0)
    return run_mcp_burst(bench_sopt(argc, argv, "--mcp", "uvtasks-mcp"),
                         bench_lopt(argc, argv, "--rounds", 25),
                         bench_lopt(argc, argv, "--tasks", 200));
  uv_loop_init(&loop);
  if (strcmp(impl, "burst") == 0) {
    int rc = run_burst(bench_lopt(argc, argv, "--rounds", 25),
                       bench_lopt(argc, argv, "--tasks", 200));
    if (uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0) {
      fprintf(stderr, "bench-output: loop not clean at exit\n");
      return 1;
    }
    return rc;
  }
  if (strcmp(impl, "uvtasks") == 0 &&
      bench_flag(argc, argv, "--durable-restart")) {
    run_durable_restart(bench_lopt(argc, argv, "--cap-mib", 0));
  } else if (strcmp(impl, "uvtasks") == 0) {
    run_uvtasks(bench_lopt(argc, argv, "--cap-mib", 0),
                bench_flag(argc, argv, "--backpressure"),
                bench_flag(argc, argv, "--durable"));
  } else if (strcmp(impl, "rawpipe") == 0) {
    run_rawpipe();
  } else if (strcmp(impl, "shellpipe") == 0) {
    run_shellpipe(mib);
  } else {
    fprintf(stderr, "bench-output: unknown --impl %s\n", impl);
    return 2;
  }
  if (uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0) {
    fprintf(stderr, "bench-output: loop not clean at exit\n");
    return 1;
  }
  if (bytes + dropped != want) {
    fprintf(stderr, "bench-output: got %llu bytes (+%llu dropped), want %llu\n",
            (unsigned long long)bytes, (unsigned long long)dropped,
            (unsigned long long)want);
    return 1;
  }
  bench_result("mib_per_s",
               (double)want / 1048576.0 * 1e9 / (double)(t_end - t_start));
  if (strcmp(impl, "uvtasks") == 0)
    bench_result("dropped", (double)dropped);
  if (state_dir[0] != '\0') {
    /* The ended task's files went with its record (D-6). */
    char path[128];
    snprintf(path, sizeof(path), "%s/journal", state_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/journal.lock", state_dir);
    unlink(path);
    rmdir(state_dir);
  }
  return 0;
}
