/* Output throughput (workload 3).
 *
 *   bench-output --impl uvtasks|rawpipe|shellpipe --cmd head|dd
 *                [--mib 256] [--cap-mib 1]
 *
 * Reads `mib` MiB of zeros from `head -c` or `dd bs=64K`:
 *   uvtasks    a process task (argv) read with uvt_read() after every loop
 *              iteration (a uv_check handle) until it is terminal;
 *              output_cap_bytes is --cap-mib (default the producer's 1 MiB).
 *              Bytes the cap dropped are reported as "dropped".
 *   rawpipe    the raw libuv reader: pipe2 + posix_spawn + uv_pipe_open +
 *              uv_read_start with a 64 KiB buffer, to EOF, then waitpid.
 *   shellpipe  the limit: `sh -c 'CMD | cat >/dev/null'`, waited for.
 *
 * Results: mib_per_s, and for uvtasks dropped (bytes). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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

static void run_uvtasks(long cap_mib) {
  uvt_process_options_t o;
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
  uvt_process_options_init(&o);
  o.argv = cmd_argv;
  if (cap_mib > 0)
    o.output_cap_bytes = (size_t)cap_mib << 20;
  uv_check_init(&loop, &check);
  uv_check_start(&check, check_cb);
  t_start = bench_now_ns();
  BENCH_CHECK(uvt_process_start(reg, &o, task_id));
  uv_run(&loop, UV_RUN_DEFAULT);
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

int main(int argc, char **argv) {
  const char *impl = bench_sopt(argc, argv, "--impl", "uvtasks");
  long mib = bench_lopt(argc, argv, "--mib", 256);
  uint64_t want = (uint64_t)mib << 20;

  make_command(bench_sopt(argc, argv, "--cmd", "head"), mib);
  signal(SIGPIPE, SIG_IGN);
  uv_loop_init(&loop);
  if (strcmp(impl, "uvtasks") == 0) {
    run_uvtasks(bench_lopt(argc, argv, "--cap-mib", 0));
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
  return 0;
}
