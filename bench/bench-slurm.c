/* The Slurm engine against Slurm's own commands, same cluster, same run
 * (bench/slurm.sh brings the cluster up and down around it):
 *   first_line  start to the job's first line in the host's hands
 *   out_delay   a line's timestamp to the read that returns it (median)
 *   kill_quiet  kill to the job's last process gone (settled / squeue empty)
 *   hundred     100 jobs submitted at once to the last one ended
 *   end_known   the command's last instruction to the end in the host's
 *               hands (settled / `sbatch --wait` returned; E-11)
 *   list        the list of jobs (uvt_list / `squeue -u`)
 * uvtasks: uvt_slurm_start, uvt_read every 10 ms, uvt_kill, settlement.
 * direct: sbatch --wrap, the output file read every 10 ms, scancel,
 * squeue every 10 ms.  Rounds alternate the two sides.  Prints
 * "name.side value_ms" lines and medians. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "bench-util.h"
#include "uvtasks.h"
#include "uvtasks/slurm.h"

static uv_loop_t loop;
static uvt_registry_t *reg;
static uvt_surface_t surface;
static uvt_slurm_engine_t *engine;
static char out_dir[512];
static int seq;

static double ms_since(uint64_t t0) {
  return (double)(uv_hrtime() - t0) / 1e6;
}

static int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void stop_loop(uv_timer_t *t) {
  uv_stop(t->loop);
}

/* Run the loop for about 10 ms. */
static void tick(void) {
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  uv_timer_start(&t, stop_loop, 10, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_NOWAIT);
}

static void sleep10(void) {
  usleep(10000);
}

/* The next point of a 10 ms grid (*next 0: the grid starts now), slept
 * to on the monotonic clock: both sides of out_delay read at the same
 * spacing, whatever a read or a loop turn costs (the row measures how
 * old a line is when a read returns it, so the spacing must match). */
static void pace(uint64_t *next) {
  struct timespec ts;
  uint64_t now = uv_hrtime();
  if (*next == 0)
    *next = now;
  *next += 10000000;
  if (*next <= now)
    return;
  ts.tv_sec = (time_t)(*next / 1000000000);
  ts.tv_nsec = (long)(*next % 1000000000);
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static int start(const char *cmd, char id[UVT_ID_MAX]) {
  uvt_slurm_options_t o;
  uvt_slurm_options_init(&o);
  o.command = cmd;
  return uvt_slurm_start(engine, &o, id);
}

static int terminal(const char *id) {
  uvt_snapshot_t s;
  int t;
  if (uvt_get(reg, id, NULL, &s) != 0)
    return 1;
  t = uvt_status_is_terminal(s.status);
  uvt_snapshot_cleanup(&s);
  return t;
}

static size_t read_task(const char *id, char *acc, size_t size) {
  uvt_read_t r;
  size_t have = strlen(acc);
  if (uvt_read(reg, id, NULL, &r) != 0)
    return 0;
  if (have + r.len < size) {
    memcpy(acc + have, r.text, r.len);
    acc[have + r.len] = '\0';
  }
  uvt_read_cleanup(&r);
  return r.len;
}

static int run_cmd(const char *cmd, char *out, size_t size) {
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  if (p == NULL)
    return -1;
  if (out != NULL) {
    n = fread(out, 1, size - 1, p);
    out[n] = '\0';
  }
  return pclose(p);
}

static size_t read_file_from(const char *path, size_t off, char *acc,
                             size_t size) {
  FILE *fp = fopen(path, "r");
  size_t have = strlen(acc), n;
  if (fp == NULL)
    return 0;
  fseek(fp, (long)off, SEEK_SET);
  n = fread(acc + have, 1, size - have - 1, fp);
  acc[have + n] = '\0';
  fclose(fp);
  return n;
}

static uint32_t sbatch(const char *wrap, char *out_path, size_t size) {
  char cmd[1024], buf[64];
  snprintf(out_path, size, "%s/direct-%d.out", out_dir, ++seq);
  snprintf(cmd, sizeof(cmd), "sbatch --parsable -o %s --wrap '%s'", out_path,
           wrap);
  if (run_cmd(cmd, buf, sizeof(buf)) != 0)
    return 0;
  return (uint32_t)strtoul(buf, NULL, 10);
}

static int squeue_empty(const char *args) {
  char cmd[256], buf[4096];
  snprintf(cmd, sizeof(cmd), "squeue -h %s -o %%i 2>/dev/null", args);
  if (run_cmd(cmd, buf, sizeof(buf)) != 0)
    return 0;
  return buf[0] == '\0';
}

/* ---- Workloads: each returns ms ----------------------------------------- */

static double first_line_uvt(void) {
  char id[UVT_ID_MAX], acc[256] = "";
  uint64_t t0 = uv_hrtime();
  double ms;
  start("echo first", id);
  while (acc[0] == '\0')
    tick(), read_task(id, acc, sizeof(acc));
  ms = ms_since(t0);
  while (!terminal(id))
    tick();
  return ms;
}

static double first_line_direct(void) {
  char path[512], acc[256] = "";
  uint64_t t0 = uv_hrtime();
  uint32_t job = sbatch("echo first", path, sizeof(path));
  char args[64];
  double ms;
  while (acc[0] == '\0')
    sleep10(), read_file_from(path, 0, acc, sizeof(acc));
  ms = ms_since(t0);
  snprintf(args, sizeof(args), "-j %u", job);
  while (!squeue_empty(args))
    sleep10();
  return ms;
}

#define LINES 20
#define STAMPS "for i in $(seq 1 20); do date +%s%N; sleep 0.1; done"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Delay of each complete line newly in acc[*pos..]. */
static void stamp_delays(const char *acc, size_t *pos, double *d, int *n) {
  const char *p = acc + *pos, *nl;
  int64_t now = wall_ns();
  while ((nl = strchr(p, '\n')) != NULL) {
    if (*n < LINES)
      d[(*n)++] = (double)(now - strtoll(p, NULL, 10)) / 1e6;
    p = nl + 1;
  }
  *pos = (size_t)(p - acc);
}

static double out_delay_uvt(void) {
  char id[UVT_ID_MAX], acc[4096] = "";
  double d[LINES];
  int n = 0;
  size_t pos = 0;
  uint64_t next = 0;
  start(STAMPS, id);
  while (!terminal(id) || n < LINES) {
    pace(&next);
    uv_run(&loop, UV_RUN_NOWAIT);
    read_task(id, acc, sizeof(acc));
    stamp_delays(acc, &pos, d, &n);
    if (terminal(id) && n < LINES)
      break;
  }
  qsort(d, (size_t)n, sizeof(double), cmp_d);
  return n > 0 ? d[n / 2] : -1;
}

static double out_delay_direct(void) {
  char path[512], acc[4096] = "", args[64];
  double d[LINES];
  int n = 0;
  size_t pos = 0;
  uint32_t job = sbatch(STAMPS, path, sizeof(path));
  uint64_t next = 0;
  snprintf(args, sizeof(args), "-j %u", job);
  int polls = 0;
  while (n < LINES) {
    pace(&next);
    read_file_from(path, strlen(acc), acc, sizeof(acc));
    stamp_delays(acc, &pos, d, &n);
    /* squeue takes ~100 ms here: ask only now and then, so the reads
     * stay 10 ms apart. */
    if (n < LINES && ++polls % 100 == 0 && squeue_empty(args)) {
      read_file_from(path, strlen(acc), acc, sizeof(acc));
      stamp_delays(acc, &pos, d, &n);
      break;
    }
  }
  while (!squeue_empty(args))
    sleep10();
  qsort(d, (size_t)n, sizeof(double), cmp_d);
  return n > 0 ? d[n / 2] : -1;
}

#define TREE                                                                   \
  "sleep 300 & setsid sleep 300 & bash -c \"trap \\\"\\\" TERM; sleep 300\" "  \
  "& "                                                                         \
  "echo ready; wait"

static double kill_uvt(void) {
  char id[UVT_ID_MAX], acc[256] = "";
  uvt_kill_result_t kr;
  uint64_t t0;
  start(TREE, id);
  while (strstr(acc, "ready") == NULL)
    tick(), read_task(id, acc, sizeof(acc));
  t0 = uv_hrtime();
  uvt_kill(reg, id, NULL, "bench", &kr);
  while (!terminal(id))
    tick();
  return ms_since(t0);
}

static double kill_direct(void) {
  char path[512], acc[256] = "", cmd[64], args[64];
  uint32_t job = sbatch(TREE, path, sizeof(path));
  uint64_t t0;
  while (strstr(acc, "ready") == NULL)
    sleep10(), acc[0] = '\0', read_file_from(path, 0, acc, sizeof(acc));
  t0 = uv_hrtime();
  snprintf(cmd, sizeof(cmd), "scancel %u", job);
  run_cmd(cmd, NULL, 0);
  /* Quiet: the job left COMPLETING (every process of it gone), as the
   * engine's settlement waits for (E-3). */
  snprintf(cmd, sizeof(cmd), "squeue -h -t all -j %u -o %%T", job);
  for (;;) {
    char st[64];
    if (run_cmd(cmd, st, sizeof(st)) == 0 && strncmp(st, "CANCELLED", 9) == 0)
      break;
    sleep10();
  }
  (void)args;
  return ms_since(t0);
}

static double hundred_uvt(int n) {
  char ids[100][UVT_ID_MAX];
  uint64_t t0 = uv_hrtime();
  int i, left;
  for (i = 0; i < n; i++)
    start("true", ids[i]);
  do {
    tick();
    for (left = 0, i = 0; i < n; i++)
      left += !terminal(ids[i]);
  } while (left > 0);
  return ms_since(t0);
}

static double hundred_direct(int n) {
  char path[512], name[32], cmd[1024], args[64];
  uint64_t t0 = uv_hrtime();
  int i;
  snprintf(name, sizeof(name), "bench-%d", ++seq);
  for (i = 0; i < n; i++) {
    snprintf(path, sizeof(path), "%s/%s-%d.out", out_dir, name, i);
    snprintf(cmd, sizeof(cmd), "sbatch -Q -J %s -o %s --wrap true", name, path);
    run_cmd(cmd, NULL, 0);
  }
  snprintf(args, sizeof(args), "-n %s", name);
  while (!squeue_empty(args))
    sleep10();
  return ms_since(t0);
}

/* E-11: the command writes its end time last; the host knows it ended
 * when the task settled (uvtasks) or `sbatch --wait` returned (direct). */
#define ENDER "sleep 1; date +%s%N"

static double end_known_uvt(void) {
  char id[UVT_ID_MAX], acc[256] = "";
  int64_t known;
  start(ENDER, id);
  while (!terminal(id))
    tick();
  known = wall_ns();
  read_task(id, acc, sizeof(acc));
  return (double)(known - strtoll(acc, NULL, 10)) / 1e6;
}

static double end_known_direct(void) {
  char path[512], cmd[1024], acc[256] = "";
  int64_t known;
  snprintf(path, sizeof(path), "%s/direct-%d.out", out_dir, ++seq);
  snprintf(cmd, sizeof(cmd), "sbatch --wait -Q -o %s --wrap '%s'", path, ENDER);
  run_cmd(cmd, NULL, 0);
  known = wall_ns();
  read_file_from(path, 0, acc, sizeof(acc));
  return (double)(known - strtoll(acc, NULL, 10)) / 1e6;
}

/* The list of the jobs: with ten of them queued. */
static double list_uvt(void) {
  uvt_snapshot_t *snaps;
  size_t n;
  uint64_t t0 = uv_hrtime();
  double ms;
  uvt_list(reg, NULL, &snaps, &n);
  ms = ms_since(t0);
  uvt_snapshots_free(snaps, n);
  return ms;
}

static double list_direct(void) {
  char buf[8192];
  uint64_t t0 = uv_hrtime();
  run_cmd("squeue -h -u $(id -un)", buf, sizeof(buf));
  return ms_since(t0);
}

static void closed(void *d) {
  (*(int *)d)++;
}

int main(int argc, char **argv) {
  int rounds = (int)bench_lopt(argc, argv, "--rounds", 3);
  int jobs = (int)bench_lopt(argc, argv, "--jobs", 100);
  const char *dir = bench_sopt(argc, argv, "--out-dir", NULL);
  uvt_slurm_engine_options_t eo;
  double r[6][2][32];
  const char *names[6] = {"first_line", "out_delay", "kill_quiet",
                          "hundred",    "end_known", "list"};
  int k, i, done = 0;

  if (dir == NULL || getenv("SLURM_CONF") == NULL) {
    fprintf(stderr, "usage: SLURM_CONF=... bench-slurm --out-dir DIR "
                    "[--rounds N] [--jobs N]\n");
    return 2;
  }
  if (rounds > 32)
    rounds = 32;
  if (jobs > 100)
    jobs = 100;
  snprintf(out_dir, sizeof(out_dir), "%s", dir);
  mkdir(out_dir, 0700);
  uv_loop_init(&loop);
  uvt_registry_new(&loop, NULL, &reg);
  uvt_surface_attach(reg, &surface, "bench");
  uvt_slurm_engine_options_init(&eo);
  eo.out_dir = out_dir;
  eo.poll_ms = 100;
  if (uvt_slurm_engine_new(reg, &eo, &engine) != 0)
    return 1;
  for (i = 0; i < rounds; i++) {
    /* Alternate which side goes first. */
    int first = i % 2;
    for (k = 0; k < 2; k++) {
      int side = k ^ first;
      r[0][side][i] = side == 0 ? first_line_uvt() : first_line_direct();
      r[1][side][i] = side == 0 ? out_delay_uvt() : out_delay_direct();
      r[2][side][i] = side == 0 ? kill_uvt() : kill_direct();
      r[3][side][i] = side == 0 ? hundred_uvt(jobs) : hundred_direct(jobs);
      r[4][side][i] = side == 0 ? end_known_uvt() : end_known_direct();
    }
    {
      /* Ten jobs in the queue, listed by both sides. */
      char ids[10][UVT_ID_MAX], path[512];
      uint32_t direct[10];
      int q;
      for (q = 0; q < 10; q++) {
        start("sleep 30", ids[q]);
        direct[q] = sbatch("sleep 30", path, sizeof(path));
      }
      for (q = 0; q < 50; q++)
        tick();
      r[5][0][i] = list_uvt();
      r[5][1][i] = list_direct();
      for (q = 0; q < 10; q++) {
        char cmd[64];
        uvt_kill_result_t kr;
        uvt_kill(reg, ids[q], NULL, "bench", &kr);
        snprintf(cmd, sizeof(cmd), "scancel %u", direct[q]);
        run_cmd(cmd, NULL, 0);
      }
      for (q = 0; q < 10; q++)
        while (!terminal(ids[q]))
          tick();
    }
    for (k = 0; k < 6; k++)
      fprintf(stderr, "round %d %s uvtasks %.1f direct %.1f\n", i, names[k],
              r[k][0][i], r[k][1][i]);
  }
  for (k = 0; k < 6; k++) {
    double u[32], d[32];
    memcpy(u, r[k][0], sizeof(double) * (size_t)rounds);
    memcpy(d, r[k][1], sizeof(double) * (size_t)rounds);
    qsort(u, (size_t)rounds, sizeof(double), cmp_d);
    qsort(d, (size_t)rounds, sizeof(double), cmp_d);
    printf("slurm_%s.uvtasks_ms %.1f\nslurm_%s.direct_ms %.1f\n", names[k],
           u[rounds / 2], names[k], d[rounds / 2]);
  }
  uvt_registry_close(reg, closed, &done);
  while (!done)
    uv_run(&loop, UV_RUN_ONCE);
  uvt_slurm_engine_close(engine, closed, &done);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return 0;
}
