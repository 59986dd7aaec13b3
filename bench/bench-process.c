/* Process tasks per second (workload 1) and loop responsiveness during the
 * spawn storm (workload 2).
 *
 *   bench-process --impl uvtasks|uvspawn|posix_spawn|idle|adopt --mode argv|shell
 *                 [--count 2000] [--live 64] [--heap-mib 0] [--idle 0]
 *                 [--fds 0] [--probe] [--spawners 0] [--idle-ms 2000]
 *                 [--cgroups] [--limits] [--limits-cpu] [--sandbox]
 *                 [--helper] [--durable]
 *
 * Runs `count` short commands (`true`), at most `live` at once, each read to
 * the end of its output:
 *   uvtasks      uvt_process_start (argv, or the command "true" run by the
 *                producer's shell); every task is read once terminal and
 *                then forgotten, as a long-lived host would.
 *   uvspawn      a raw uv_spawn loop: stdout and stderr pipes, setsid,
 *                reading both to EOF and waiting for the exit callback.
 *   posix_spawn  the limit: posix_spawn + pipe + poll + waitpid, nothing
 *                else.
 *   idle         nothing but the probe, for --idle-ms: the floor of the
 *                loop's timer lateness on this machine now.
 *   adopt        D-3: `count` durable tasks left running by a registry,
 *                then one uvt_process_adopt_all() takes them back: adopt_ms
 *                (and kill_all_ms, their kill through it).
 * In shell mode the raw loops run `bash -c true` (uvtasks' shell).
 * --heap-mib touches that much heap first; --idle keeps that many
 * `sleep 3600` tasks alive during the run (uvtasks only; the clock starts
 * once each of them sleeps, and idle_settle_ms says how long that took);
 * --probe runs a 1 ms repeating uv_timer on the same loop and reports its
 * lateness, and paces the starts to one per loop turn; --fds N holds N more
 * (close-on-exec) descriptors open; --spawners N sets the registry's spawner
 * threads (0: the library's default, one per core); --cgroups gives every
 * uvtasks task a cgroup of its own (uvt_process_cgroups; the host's own
 * cgroup);
 * --limits gives every uvtasks task limits (L-LIM-1: 256 MiB of memory
 * and 64 processes: a group in each hierarchy that enforces them, two
 * v1 directories on this project's machines), --limits-cpu also 100% of
 * a core (a CFS bandwidth quota: a third);
 * --sandbox (S-1) runs every uvtasks task in a read-only sandbox without
 * network, and makes the posix_spawn loop run what such a task's leader
 * runs (env, bwrap, env, the command): bwrap's own cost, alone; --helper
 * turns the registry's spawn helper on (P-SPAWN-7,
 * uvt_process_spawn_helper) before anything starts; --durable makes
 * every uvtasks task durable (D-1: its keeper, its output files and
 * journal lines in a fresh state directory under /tmp).
 *
 * Results: rate (tasks/s); start_p50_us, start_p99_us (one start call:
 * uvt_process_start or uv_spawn, wall time), start_cpu_p99_us (the loop
 * thread's CPU time inside that call); loop_cpu_us (CPU time of the loop's
 * thread per task, user + system: what the host's loop pays, whatever the
 * neighbours do); with --probe lat_p50_us, lat_p99_us, lat_max_us, and
 * where the kernel keeps schedstat lat_wait_p99_us (the loop's thread
 * waiting for a CPU between two ticks) and lat_own_p99_us (a tick's
 * lateness beyond that wait: the loop's own work). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "uvtasks.h"
#include "uvtasks/process.h"

#include "bench-util.h"

extern char **environ;
/* The library's spawner threads per registry (0 = its default). */
extern unsigned uvt__process_spawners;

static struct {
  const char *impl;
  int shell;
  long count;
  long live_max;
  long idle;
  int probe;
  int cgroups;
  int limits;
  int sandbox;
  int helper;
  int durable;
} cfg;
static char state_dir[64];

static uv_loop_t loop;
static long started;
static long finished;
static long live;
static uint64_t t_start;
static uint64_t t_end;

static const char *const argv_true[] = {"true", NULL};

/* --sandbox: a read-only sandbox without network (S-1). */
static uvt_sandbox_t sandbox;

/* --sandbox with posix_spawn: the leader's argv of a sandboxed task
 * (src/process/sandbox.c), for bwrap's own cost. */
#define BWRAP_SIGS "HUP,INT,QUIT,PIPE,TERM,USR1,USR2"
static const char *const argv_bwrap[] = {"env",
                                         "--ignore-signal=" BWRAP_SIGS,
                                         "bwrap",
                                         "--ro-bind",
                                         "/",
                                         "/",
                                         "--dev",
                                         "/dev",
                                         "--proc",
                                         "/proc",
                                         "--tmpfs",
                                         "/tmp",
                                         "--unshare-pid",
                                         "--unshare-ipc",
                                         "--unshare-net",
                                         "--",
                                         "env",
                                         "--default-signal=" BWRAP_SIGS,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};
static const char *argv_sandboxed[sizeof(argv_bwrap) / sizeof(argv_bwrap[0])];

/* CPU time of the calling thread, in microseconds. */
static uint64_t thread_cpu_us(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0)
    return 0;
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
static const char *const argv_shell[] = {"bash", "-c", "true", NULL};

/* ---- The lateness probe: a 1 ms repeating timer on the same loop.
 * Beside each tick's lateness it keeps how long the loop's thread waited
 * for a CPU since the previous tick (the second field of
 * /proc/thread-self/schedstat: time runnable but not running), so a late
 * tick can be told apart: the machine's CPUs were busy (waiting), or the
 * loop was (the rest).  On a kernel without schedstat both stay 0. */

static uv_timer_t probe;
static uint64_t probe_last;
static uint64_t *lateness;
static uint64_t *waited; /* per tick: runqueue wait since the last one */
static uint64_t *own;    /* per tick: lateness beyond that wait */
static size_t lateness_n;
static size_t lateness_cap;
static int schedstat_fd = -1;
static uint64_t wait_last;

static uint64_t runqueue_wait_ns(void) {
  char buf[96];
  unsigned long long run, wait;
  ssize_t n;

  if (schedstat_fd < 0)
    return 0;
  n = pread(schedstat_fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  if (sscanf(buf, "%llu %llu", &run, &wait) != 2)
    return 0;
  return (uint64_t)wait;
}

static uint64_t *grow(uint64_t *a) {
  a = realloc(a, lateness_cap * sizeof(*a));
  if (a == NULL)
    abort();
  return a;
}

static void probe_cb(uv_timer_t *timer) {
  uint64_t now = bench_now_ns();
  uint64_t w = runqueue_wait_ns();
  (void)timer;
  if (probe_last != 0) {
    uint64_t due = probe_last + 1000000;
    uint64_t late = now > due ? now - due : 0;
    uint64_t dw = w - wait_last;
    if (lateness_n == lateness_cap) {
      lateness_cap = lateness_cap ? lateness_cap * 2 : 4096;
      lateness = grow(lateness);
      waited = grow(waited);
      own = grow(own);
    }
    waited[lateness_n] = dw;
    own[lateness_n] = late > dw ? late - dw : 0;
    lateness[lateness_n++] = late;
  }
  probe_last = now;
  wait_last = w;
}

static void probe_start(void) {
  if (!cfg.probe)
    return;
  schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  uv_timer_init(&loop, &probe);
  uv_timer_start(&probe, probe_cb, 1, 1);
}

static void probe_stop(void) {
  if (cfg.probe)
    uv_close((uv_handle_t *)&probe, NULL);
}

/* ---- Start-call durations and pacing.  With --probe the host starts at
 * most one task per loop turn (a uv_idle handle), as a host that cares
 * about its loop's latency would; otherwise every finished task is
 * replaced inside its completion callback. */

static uint64_t *start_ns;
static uint64_t *start_cpu_ns;
static size_t start_n;
static uv_idle_t pacer;
static void (*start_one)(void);

/* The thread's own CPU time, in nanoseconds. */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Each start call's wall time and the loop thread's CPU time in it: on a
 * busy machine the call can be preempted, so the wall time's tail is the
 * scheduler's as much as the call's; the CPU time is the call's own. */
static void timed_start(void (*fn)(void)) {
  uint64_t c0 = thread_cpu_ns();
  uint64_t t0 = bench_now_ns();
  uint64_t t1;
  fn();
  t1 = bench_now_ns();
  if (start_n < (size_t)cfg.count) {
    start_cpu_ns[start_n] = thread_cpu_ns() - c0;
    start_ns[start_n++] = t1 - t0;
  }
}

static void pacer_cb(uv_idle_t *h) {
  if (live < cfg.live_max && started < cfg.count)
    timed_start(start_one);
  if (live >= cfg.live_max || started >= cfg.count)
    uv_idle_stop(h);
}

static void refill(void) {
  if (cfg.probe) {
    if (live < cfg.live_max && started < cfg.count)
      uv_idle_start(&pacer, pacer_cb);
    return;
  }
  while (live < cfg.live_max && started < cfg.count)
    timed_start(start_one);
}

static void all_done(void) {
  t_end = bench_now_ns();
  probe_stop();
  uv_close((uv_handle_t *)&pacer, NULL);
}

/* ---- uvtasks */

static uvt_registry_t *reg;
static uvt_surface_t surface;
static uvt_listener_t listener;
static char forget_ids[256][UVT_ID_MAX];
static size_t forget_n;
static size_t bytes_read;

static void uvt_start_one(void) {
  uvt_process_options_t o;
  uvt_process_options_init(&o);
  if (cfg.shell)
    o.command = "true";
  else
    o.argv = argv_true;
  if (cfg.sandbox)
    o.sandbox = &sandbox;
  if (cfg.limits) {
    o.limits.memory_bytes = 256u << 20;
    o.limits.max_processes = 64;
    if (cfg.limits > 1)
      o.limits.cpu_percent = 100;
  }
  o.durable = cfg.durable;
  BENCH_CHECK(uvt_process_start(reg, &o, NULL));
  started++;
  live++;
}

static void forget_pending(void) {
  size_t i;
  /* Records whose dispatch finished may be dropped now (R-FORGET-1). */
  for (i = 0; i < forget_n; i++)
    BENCH_CHECK(uvt_forget(reg, forget_ids[i], NULL));
  forget_n = 0;
}

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  uvt_read_t r;
  (void)l;
  (void)owner;
  forget_pending();
  /* Each task is read to the end: what is left at settlement. */
  BENCH_CHECK(uvt_read(reg, snap->id, NULL, &r));
  bytes_read += r.len;
  uvt_read_cleanup(&r);
  if (snap->status != UVT_COMPLETED || snap->detail == NULL ||
      strcmp(snap->detail, "exit code: 0") != 0)
    fprintf(stderr, "bench: %s ended %s (%s)\n", snap->id,
            uvt_status_name(snap->status), snap->detail ? snap->detail : "");
  memcpy(forget_ids[forget_n++], snap->id, strlen(snap->id) + 1);
  live--;
  finished++;
  refill();
  if (finished == cfg.count) {
    all_done();
    uvt_listener_stop(&listener);
    BENCH_CHECK(uvt_registry_close(reg, NULL, NULL));
  }
}

static uv_timer_t settle_timer;
static char (*idle_ids)[UVT_ID_MAX];
static long idle_asleep; /* idle tasks seen asleep, in start order */
static uint64_t idle_t0;

static void begin_storm(void) {
  probe_start();
  t_start = bench_now_ns();
  refill();
}

/* An idle task is idle once its `sleep` sleeps: the kernel shows the
 * process waiting in nanosleep.  Until then it may still be exec'ing and
 * loading, which takes CPU the storm would lose. */
static int idle_task_asleep(const char *id) {
  char path[64];
  char wchan[64];
  ssize_t n;
  int pid = uvt_process_pid(reg, id, NULL);
  int fd;

  if (pid <= 0)
    return 0;
  snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = read(fd, wchan, sizeof(wchan) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  wchan[n] = '\0';
  return strstr(wchan, "nanosleep") != NULL;
}

/* Every 10 ms until all idle tasks sleep (or 120 s passed: then the storm
 * starts anyway and the time says so). */
static void idle_check(uv_timer_t *timer) {
  while (idle_asleep < cfg.idle && idle_task_asleep(idle_ids[idle_asleep]))
    idle_asleep++;
  if (idle_asleep < cfg.idle && bench_now_ns() - idle_t0 < 120000000000ull)
    return;
  printf("idle_settle_ms %.0f\n", (double)(bench_now_ns() - idle_t0) / 1e6);
  if (idle_asleep < cfg.idle)
    fprintf(stderr, "bench: %ld of %ld idle tasks asleep after 120 s\n",
            idle_asleep, cfg.idle);
  uv_close((uv_handle_t *)timer, NULL);
  begin_storm();
}

static void run_uvtasks(void) {
  static const char *const argv_idle[] = {"sleep", "3600", NULL};
  long i;
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &reg));
  BENCH_CHECK(uvt_surface_attach(reg, &surface, "bench"));
  BENCH_CHECK(uvt_listener_start(reg, &listener, on_done));
  if (cfg.cgroups)
    BENCH_CHECK(uvt_process_cgroups(reg, NULL));
  if (cfg.helper)
    BENCH_CHECK(uvt_process_spawn_helper(reg, 1));
  if (cfg.durable) {
    /* $UVT_BENCH_STATE_BASE: where the state directory goes (default
     * /tmp; a tmpfs such as /dev/shm to take the disk out). */
    const char *base = getenv("UVT_BENCH_STATE_BASE");
    snprintf(state_dir, sizeof(state_dir), "%s/uvt-bench-XXXXXX",
             base != NULL ? base : "/tmp");
    if (mkdtemp(state_dir) == NULL)
      abort();
    BENCH_CHECK(uvt_process_adopt_all(reg, state_dir, NULL));
  }
  if (cfg.idle > 0) {
    idle_ids = calloc((size_t)cfg.idle, sizeof(*idle_ids));
    if (idle_ids == NULL) {
      fprintf(stderr, "bench: out of memory\n");
      exit(1);
    }
  }
  idle_t0 = bench_now_ns();
  for (i = 0; i < cfg.idle; i++) {
    uvt_process_options_t o;
    uvt_process_options_init(&o);
    o.argv = argv_idle;
    o.kind = "idle";
    o.grace_ms = 100;
    BENCH_CHECK(uvt_process_start(reg, &o, idle_ids[i]));
  }
  start_one = uvt_start_one;
  if (cfg.idle > 0) {
    /* The idle tasks must be idle, not competing for the CPU, before the
     * clock starts. */
    uv_timer_init(&loop, &settle_timer);
    uv_timer_start(&settle_timer, idle_check, 10, 10);
  } else {
    begin_storm();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  free(idle_ids);
}

/* ---- raw uv_spawn */

typedef struct {
  uv_process_t proc;
  uv_pipe_t out;
  uv_pipe_t err;
  int pending; /* exit + two EOFs */
  int closes;
} raw_t;

static void raw_start_one(void);

static void raw_closed(uv_handle_t *h) {
  raw_t *r = h->data;
  if (--r->closes > 0)
    return;
  free(r);
  live--;
  finished++;
  refill();
  if (finished == cfg.count)
    all_done();
}

static void raw_step(raw_t *r) {
  if (--r->pending > 0)
    return;
  r->closes = 3;
  uv_close((uv_handle_t *)&r->proc, raw_closed);
  uv_close((uv_handle_t *)&r->out, raw_closed);
  uv_close((uv_handle_t *)&r->err, raw_closed);
}

static void raw_exit(uv_process_t *p, int64_t status, int sig) {
  (void)status;
  (void)sig;
  raw_step(p->data);
}

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
    bytes_read += (size_t)n;
  if (n < 0) {
    uv_read_stop(s);
    raw_step(s->data);
  }
}

static void raw_start_one(void) {
  raw_t *r = calloc(1, sizeof(*r));
  uv_process_options_t o;
  uv_stdio_container_t stdio[3];
  if (r == NULL)
    abort();
  uv_pipe_init(&loop, &r->out, 0);
  uv_pipe_init(&loop, &r->err, 0);
  r->proc.data = r->out.data = r->err.data = r;
  memset(&o, 0, sizeof(o));
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&r->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&r->err;
  o.stdio = stdio;
  o.stdio_count = 3;
  o.exit_cb = raw_exit;
  o.file = cfg.shell ? argv_shell[0] : argv_true[0];
  o.args = (char **)(cfg.shell ? argv_shell : argv_true);
  o.flags = UV_PROCESS_DETACHED; /* setsid, as uvtasks does */
  BENCH_CHECK(uv_spawn(&loop, &r->proc, &o));
  r->pending = 3;
  BENCH_CHECK(uv_read_start((uv_stream_t *)&r->out, raw_alloc, raw_read));
  BENCH_CHECK(uv_read_start((uv_stream_t *)&r->err, raw_alloc, raw_read));
  started++;
  live++;
}

static void run_uvspawn(void) {
  probe_start();
  start_one = raw_start_one;
  t_start = bench_now_ns();
  refill();
  uv_run(&loop, UV_RUN_DEFAULT);
}

/* ---- idle: the probe alone */

static uv_timer_t idle_end;

static void idle_done(uv_timer_t *t) {
  t_end = bench_now_ns();
  finished = cfg.count;
  probe_stop();
  uv_close((uv_handle_t *)t, NULL);
  uv_close((uv_handle_t *)&pacer, NULL);
}

static void run_idle(long ms) {
  cfg.probe = 1;
  probe_start();
  t_start = bench_now_ns();
  uv_timer_init(&loop, &idle_end);
  uv_timer_start(&idle_end, idle_done, (uint64_t)ms, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
}

/* ---- posix_spawn: the limit */

/* D-3: --impl adopt: `count` durable `sleep 600` tasks started and left
 * running by a registry that closes, then the time one
 * uvt_process_adopt_all() call takes to take them all back
 * (adopt_ms; nothing else runs in it), and the time until the last of
 * them is killed through the second registry. */
static uvt_registry_t *adopt_reg;
static long adopt_left;

static void adopt_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner) {
  (void)l;
  (void)snap;
  (void)owner;
  if (--adopt_left == 0)
    BENCH_CHECK(uvt_registry_close(adopt_reg, NULL, NULL));
}

static int run_adopt(void) {
  static const char *const argv_sleep[] = {"sleep", "600", NULL};
  static uvt_listener_t l;
  uvt_process_options_t o;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0, i;
  const char *base = getenv("UVT_BENCH_STATE_BASE");
  uint64_t t0;
  long k;
  int adopted;

  snprintf(state_dir, sizeof(state_dir), "%s/uvt-bench-XXXXXX",
           base != NULL ? base : "/tmp");
  if (mkdtemp(state_dir) == NULL)
    abort();
  BENCH_CHECK(uvt_registry_new(&loop, NULL, &adopt_reg));
  BENCH_CHECK(uvt_surface_attach(adopt_reg, &surface, "bench"));
  BENCH_CHECK(uvt_process_adopt_all(adopt_reg, state_dir, NULL));
  for (k = 0; k < cfg.count; k++) {
    uvt_process_options_init(&o);
    o.argv = argv_sleep;
    o.durable = 1;
    BENCH_CHECK(uvt_process_start(adopt_reg, &o, NULL));
  }
  /* Every keeper spawned, then the registry goes (they run on). */
  for (;;) {
    int spawning = 0;
    BENCH_CHECK(uvt_list(adopt_reg, NULL, &snaps, &n));
    for (i = 0; i < n; i++)
      spawning += uvt_process_pid(adopt_reg, snaps[i].id, NULL) == 0;
    uvt_snapshots_free(snaps, n);
    if (spawning == 0)
      break;
    uv_run(&loop, UV_RUN_ONCE);
  }
  BENCH_CHECK(uvt_registry_close(adopt_reg, NULL, NULL));
  uv_run(&loop, UV_RUN_DEFAULT);

  BENCH_CHECK(uvt_registry_new(&loop, NULL, &adopt_reg));
  BENCH_CHECK(uvt_surface_attach(adopt_reg, &surface, "bench"));
  BENCH_CHECK(uvt_listener_start(adopt_reg, &l, adopt_done));
  t0 = bench_now_ns();
  adopted = uvt_process_adopt_all(adopt_reg, state_dir, NULL);
  bench_result("adopt_ms", (double)(bench_now_ns() - t0) / 1e6);
  if (adopted != cfg.count) {
    fprintf(stderr, "bench-process: %d of %ld taken back\n", adopted,
            cfg.count);
    return 1;
  }
  t0 = bench_now_ns();
  adopt_left = cfg.count;
  BENCH_CHECK(uvt_list(adopt_reg, NULL, &snaps, &n));
  for (i = 0; i < n; i++)
    BENCH_CHECK(uvt_kill(adopt_reg, snaps[i].id, NULL, "done", NULL));
  uvt_snapshots_free(snaps, n);
  uv_run(&loop, UV_RUN_DEFAULT);
  bench_result("kill_all_ms", (double)(bench_now_ns() - t0) / 1e6);
  /* The keepers were our children: reap them. */
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
  finished = cfg.count;
  cfg.durable = 1; /* the directory goes at the end */
  return 0;
}

static void run_posix_spawn(void) {
  const char *const *args = cfg.shell ? argv_shell : argv_true;
  if (cfg.sandbox) {
    /* The command after the inner env; as root bwrap drops capabilities
     * too (--cap-drop ALL), as the library asks it to. */
    size_t k = 0, j;
    while (argv_bwrap[k] != NULL)
      k++;
    memcpy(argv_sandboxed, argv_bwrap, k * sizeof(*argv_sandboxed));
    if (geteuid() == 0) {
      memmove(argv_sandboxed + 17, argv_sandboxed + 15,
              (k - 15) * sizeof(*argv_sandboxed));
      argv_sandboxed[15] = "--cap-drop";
      argv_sandboxed[16] = "ALL";
      k += 2;
    }
    for (j = 0; args[j] != NULL; j++)
      argv_sandboxed[k++] = args[j];
    argv_sandboxed[k] = NULL;
    args = argv_sandboxed;
  }
  struct pollfd *fds = calloc((size_t)cfg.live_max, sizeof(*fds));
  pid_t *pids = calloc((size_t)cfg.live_max, sizeof(*pids));
  posix_spawnattr_t attr;
  char buf[65536];
  long i;

  if (fds == NULL || pids == NULL)
    abort();
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  for (i = 0; i < cfg.live_max; i++)
    fds[i].fd = -1;
  t_start = bench_now_ns();
  while (finished < cfg.count) {
    for (i = 0; i < cfg.live_max && started < cfg.count; i++) {
      posix_spawn_file_actions_t fa;
      int p[2];
      if (fds[i].fd >= 0)
        continue;
      if (pipe2(p, O_CLOEXEC) != 0)
        abort();
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
      posix_spawn_file_actions_adddup2(&fa, p[1], 1);
      posix_spawn_file_actions_adddup2(&fa, p[1], 2);
      if (posix_spawnp(&pids[i], args[0], &fa, &attr, (char **)args, environ) !=
          0)
        abort();
      posix_spawn_file_actions_destroy(&fa);
      close(p[1]);
      fds[i].fd = p[0];
      fds[i].events = POLLIN;
      started++;
    }
    if (poll(fds, (nfds_t)cfg.live_max, -1) < 0 && errno != EINTR)
      abort();
    for (i = 0; i < cfg.live_max; i++) {
      ssize_t n;
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        bytes_read += (size_t)n;
        continue;
      }
      close(fds[i].fd);
      fds[i].fd = -1;
      waitpid(pids[i], NULL, 0);
      finished++;
    }
  }
  t_end = bench_now_ns();
  posix_spawnattr_destroy(&attr);
  free(fds);
  free(pids);
}

int main(int argc, char **argv) {
  char *heap;
  uint64_t cpu0;
  cfg.impl = bench_sopt(argc, argv, "--impl", "uvtasks");
  cfg.shell = strcmp(bench_sopt(argc, argv, "--mode", "argv"), "shell") == 0;
  cfg.count = bench_lopt(argc, argv, "--count", 2000);
  cfg.live_max = bench_lopt(argc, argv, "--live", 64);
  cfg.idle = bench_lopt(argc, argv, "--idle", 0);
  cfg.probe = bench_flag(argc, argv, "--probe");
  cfg.cgroups = bench_flag(argc, argv, "--cgroups");
  cfg.limits = bench_flag(argc, argv, "--limits-cpu")
                   ? 2
                   : bench_flag(argc, argv, "--limits");
  cfg.sandbox = bench_flag(argc, argv, "--sandbox");
  cfg.helper = bench_flag(argc, argv, "--helper");
  cfg.durable = bench_flag(argc, argv, "--durable");
  uvt__process_spawners = (unsigned)bench_lopt(argc, argv, "--spawners", 0);
  heap = bench_touch_heap(bench_lopt(argc, argv, "--heap-mib", 0));
  {
    /* --fds N: hold N more descriptors, as N/3 live process tasks do, to
     * tell the kernel's per-spawn descriptor-table cost from the
     * registry's. */
    long i, nfds = bench_lopt(argc, argv, "--fds", 0);
    for (i = 0; i < nfds; i++)
      if (open("/dev/null", O_RDONLY | O_CLOEXEC) < 0)
        abort();
  }
  signal(SIGPIPE, SIG_IGN);
  cpu0 = thread_cpu_us();

  uv_loop_init(&loop);
  uv_idle_init(&loop, &pacer);
  start_ns = calloc((size_t)cfg.count + 1, sizeof(*start_ns));
  start_cpu_ns = calloc((size_t)cfg.count + 1, sizeof(*start_cpu_ns));
  if (start_ns == NULL || start_cpu_ns == NULL)
    abort();
  if (strcmp(cfg.impl, "uvtasks") == 0) {
    run_uvtasks();
  } else if (strcmp(cfg.impl, "uvspawn") == 0) {
    run_uvspawn();
  } else if (strcmp(cfg.impl, "adopt") == 0) {
    uv_close((uv_handle_t *)&pacer, NULL);
    if (run_adopt() != 0)
      return 1;
  } else if (strcmp(cfg.impl, "idle") == 0) {
    run_idle(bench_lopt(argc, argv, "--idle-ms", 2000));
  } else if (strcmp(cfg.impl, "posix_spawn") == 0) {
    uv_close((uv_handle_t *)&pacer, NULL);
    run_posix_spawn();
  } else {
    fprintf(stderr, "bench-process: unknown --impl %s\n", cfg.impl);
    return 2;
  }
  if (uv_run(&loop, UV_RUN_DEFAULT) != 0 || uv_loop_close(&loop) != 0) {
    fprintf(stderr, "bench-process: loop not clean at exit\n");
    return 1;
  }
  if (finished != cfg.count) {
    fprintf(stderr, "bench-process: %ld of %ld finished\n", finished,
            cfg.count);
    return 1;
  }
  if (strcmp(cfg.impl, "idle") != 0 && strcmp(cfg.impl, "adopt") != 0) {
    bench_result("rate", (double)cfg.count * 1e9 / (double)(t_end - t_start));
    bench_result("loop_cpu_us",
                 (double)(thread_cpu_us() - cpu0) / (double)cfg.count);
  }
  if (cfg.probe) {
    bench_result("lat_p50_us",
                 (double)bench_percentile(lateness, lateness_n, 50) / 1e3);
    bench_result("lat_p99_us",
                 (double)bench_percentile(lateness, lateness_n, 99) / 1e3);
    bench_result("lat_max_us",
                 (double)bench_percentile(lateness, lateness_n, 100) / 1e3);
    bench_result("probe_samples", (double)lateness_n);
    if (schedstat_fd >= 0) {
      bench_result("lat_wait_p99_us",
                   (double)bench_percentile(waited, lateness_n, 99) / 1e3);
      bench_result("lat_own_p99_us",
                   (double)bench_percentile(own, lateness_n, 99) / 1e3);
    }
  }
  if (start_n > 0) {
    bench_result("start_p50_us",
                 (double)bench_percentile(start_ns, start_n, 50) / 1e3);
    bench_result("start_p99_us",
                 (double)bench_percentile(start_ns, start_n, 99) / 1e3);
    bench_result("start_cpu_p99_us",
                 (double)bench_percentile(start_cpu_ns, start_n, 99) / 1e3);
  }
  free(start_ns);
  free(start_cpu_ns);
  free(lateness);
  free(waited);
  free(own);
  if (schedstat_fd >= 0)
    close(schedstat_fd);
  free(heap);
  if (cfg.durable) {
    /* Every task was forgotten: only the journal is left. */
    char path[128];
    snprintf(path, sizeof(path), "%s/journal", state_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/journal.lock", state_dir);
    unlink(path);
    rmdir(state_dir);
  }
  return 0;
}
