/* The Slurm engine (E-1..E-7, R-START-6) against a live 2-node cluster:
 * test/slurm-suite.sh brings it up (scripts/slurm-cluster.sh), exports
 * SLURM_CONF and UVT_SLURM_DIR, runs this, and stops it.  Without them
 * every test is skipped. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-util.h"
#include "uvtasks/slurm.h"

#include <slurm/slurm.h>

#include "../src/slurm/slurm-internal.h"

#ifndef UVT__JOURNAL_REC
#define UVT__JOURNAL_REC 512
#endif

static const char *cluster_dir;
static char out_dir[4096];
static int case_no;

/* ---- Harness ------------------------------------------------------------ */

typedef struct {
  fixture_t f;
  uvt_slurm_engine_t *e;
  int engine_closed;
  uvt_listener_t l;
  int notices; /* ends not reported (a host's completion notices) */
  int ends;    /* every end a listener heard of */
  char last_notice[UVT_ID_MAX];
} env_t;

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  env_t *v = l->data;
  (void)owner;
  /* A host tells its user of an end nobody saw: reported == 0. */
  v->ends++;
  if (!snap->reported)
    v->notices++;
  snprintf(v->last_notice, sizeof(v->last_notice), "%s", snap->id);
}

/* An engine polling every poll_ms (the tests' 100 ms when 0). */
static void env_open_poll(env_t *v, const char *journal, int detach,
                          uint64_t lost_after_ms, uint64_t poll_ms) {
  uvt_slurm_engine_options_t eo;
  memset(v, 0, sizeof(*v));
  fixture_init(&v->f, NULL);
  uvt_slurm_engine_options_init(&eo);
  eo.out_dir = out_dir;
  eo.journal = journal;
  eo.poll_ms = poll_ms > 0 ? poll_ms : 100;
  eo.detach_on_close = detach;
  eo.lost_after_ms = lost_after_ms;
  assert_int_equal(uvt_slurm_engine_new(v->f.reg, &eo, &v->e), 0);
  v->l.data = v;
  assert_int_equal(uvt_listener_start(v->f.reg, &v->l, on_done), 0);
}

static void env_open(env_t *v, const char *journal, int detach,
                     uint64_t lost_after_ms) {
  env_open_poll(v, journal, detach, lost_after_ms, 0);
}

static void engine_closed(void *data) {
  (*(int *)data)++;
}

static void registry_closed(void *data) {
  (*(int *)data)++;
}

/* The registry first (it cancels or detaches the jobs, through the
 * engine), then the engine; then nothing of ours is left on the loop. */
static void env_close(env_t *v) {
  int closed = 0;
  uvt_listener_stop(&v->l);
  assert_int_equal(uvt_registry_close(v->f.reg, registry_closed, &closed), 0);
  v->f.reg = NULL;
  while (closed == 0)
    uv_run(&v->f.loop, UV_RUN_ONCE);
  uvt_slurm_engine_close(v->e, engine_closed, &v->engine_closed);
  assert_int_equal(uv_run(&v->f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(v->engine_closed, 1);
  assert_int_equal(uv_loop_close(&v->f.loop), 0);
}

typedef struct {
  env_t *v;
  int (*pred)(void *arg);
  void *arg;
} poll_t;

static void poll_tick(uv_timer_t *h) {
  poll_t *p = h->data;
  if (p->pred(p->arg))
    uv_stop(h->loop);
}

/* Run the loop until pred holds (checked every 20 ms); fail after
 * max_ms, a bound far beyond what the condition needs. */
static void run_until(env_t *v, int (*pred)(void *), void *arg,
                      uint64_t max_ms) {
  uv_timer_t timer;
  poll_t p = {v, pred, arg};
  uint64_t start = uv_hrtime();
  uv_timer_init(&v->f.loop, &timer);
  timer.data = &p;
  uv_timer_start(&timer, poll_tick, 20, 20);
  while (!pred(arg)) {
    assert_true((uv_hrtime() - start) / 1000000u < max_ms);
    uv_run(&v->f.loop, UV_RUN_ONCE);
  }
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(&v->f.loop, UV_RUN_NOWAIT);
}

typedef struct {
  env_t *v;
  const char *id;
} idarg_t;

static int is_terminal(void *arg) {
  idarg_t *a = arg;
  uvt_snapshot_t s;
  int t;
  if (uvt_get(a->v->f.reg, a->id, NULL, &s) != 0)
    return 0;
  t = uvt_status_is_terminal(s.status);
  uvt_snapshot_cleanup(&s);
  return t;
}

static void wait_end(env_t *v, const char *id, uint64_t max_ms) {
  idarg_t a = {v, id};
  run_until(v, is_terminal, &a, max_ms);
}

static uvt_status_t status_of(env_t *v, const char *id, char *detail,
                              size_t size) {
  uvt_snapshot_t s;
  uvt_status_t st;
  assert_int_equal(uvt_get(v->f.reg, id, NULL, &s), 0);
  st = s.status;
  if (detail != NULL)
    snprintf(detail, size, "%s", s.detail != NULL ? s.detail : "");
  uvt_snapshot_cleanup(&s);
  return st;
}

/* Append everything a read returns to `acc`. */
static void read_into(env_t *v, const char *id, char *acc, size_t size) {
  uvt_read_t r;
  size_t have = strlen(acc);
  assert_int_equal(uvt_read(v->f.reg, id, NULL, &r), 0);
  assert_true(have + r.len < size);
  memcpy(acc + have, r.text, r.len);
  acc[have + r.len] = '\0';
  uvt_read_cleanup(&r);
}

static int start_cmd(env_t *v, const char *cmd, char id[UVT_ID_MAX]) {
  uvt_slurm_options_t o;
  uvt_slurm_options_init(&o);
  o.command = cmd;
  return uvt_slurm_start(v->e, &o, id);
}

static int file_lines(const char *path) {
  FILE *fp = fopen(path, "r");
  int c, n = 0;
  if (fp == NULL)
    return 0;
  while ((c = fgetc(fp)) != EOF)
    n += c == '\n';
  fclose(fp);
  return n;
}

typedef struct {
  const char *path;
  int lines;
} lines_t;

static int has_lines(void *arg) {
  lines_t *l = arg;
  return file_lines(l->path) >= l->lines;
}

static void case_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/case%d-%s", out_dir, case_no, name);
}

/* The three tests that wait on Slurm's own clocks (the controller's
 * time-limit check, its MessageTimeout: about 45 s together) run in the
 * plain and the TSan builds (their retries and checks cross threads);
 * the ASan lane runs the same engine code through the other tests and
 * skips them (UVT_SLURM_SLOW=1 runs them anyway). */
static void slow_test(void) {
#if defined(__SANITIZE_ADDRESS__)
  if (getenv("UVT_SLURM_SLOW") == NULL) {
    print_message("waits on Slurm's clocks: plain build only\n");
    skip();
  }
#endif
}

static int setup(void **state) {
  (void)state;
  if (cluster_dir == NULL)
    skip();
  case_no++;
  return 0;
}

/* ---- E-1, E-2: start, outcome, stdout and stderr apart ----------------- */

static void slurm_start_and_output(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[4096] = "", detail[160];
  uint32_t job = 0;
  uvt_snapshot_t s;
  (void)state;
  env_open(&v, NULL, 0, 0);
  /* E-1 */
  assert_int_equal(start_cmd(&v, "echo out-1; echo err-1 >&2; exit 3", id), 0);
  assert_string_equal(id, "slurm-1");
  assert_int_equal(uvt_get(v.f.reg, id, NULL, &s), 0);
  assert_string_equal(s.kind, "slurm");
  assert_int_equal(s.status, UVT_RUNNING);
  uvt_snapshot_cleanup(&s);
  wait_end(&v, id, 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_true(job > 0);
  /* E-4: exit N -> completed "exit code: N" */
  assert_int_equal(status_of(&v, id, detail, sizeof(detail)), UVT_COMPLETED);
  assert_string_equal(detail, "exit code: 3");
  /* E-2, P-OUT-1's shape */
  read_into(&v, id, acc, sizeof(acc));
  assert_string_equal(acc, "out-1\n[stderr]\nerr-1\n");
  assert_int_equal(v.notices, 1);
  env_close(&v);
}

/* E-2: reads while the job runs return what is new, consumed once. */
static void slurm_stream(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[8192] = "", cmd[1024], gate[4096], marks[4096];
  lines_t lw;
  int i;
  (void)state;
  case_path(gate, sizeof(gate), "gate");
  case_path(marks, sizeof(marks), "marks");
  env_open(&v, NULL, 0, 0);
  /* The gate exists, empty, before the job reads it: a failed `<` would
   * print to the job's stderr (the shell reports it before any 2>). */
  {
    FILE *g = fopen(gate, "w");
    assert_non_null(g);
    fclose(g);
  }
  /* Line i, then wait for gate line i before the next. */
  snprintf(cmd, sizeof(cmd),
           "for i in 1 2 3 4 5; do echo line-$i; echo $i >> %s; "
           "while [ $(wc -l < %s 2>/dev/null || echo 0) -lt $i ]; do "
           "sleep 0.05; done; done",
           marks, gate);
  assert_int_equal(start_cmd(&v, cmd, id), 0);
  for (i = 1; i <= 5; i++) {
    char want[64];
    FILE *fp;
    lw.path = marks;
    lw.lines = i;
    run_until(&v, has_lines, &lw, 60000);
    read_into(&v, id, acc, sizeof(acc));
    snprintf(want, sizeof(want), "line-%d\n", i);
    assert_non_null(strstr(acc, want));
    /* Nothing new until the gate opens: a second read is empty. */
    {
      size_t before = strlen(acc);
      read_into(&v, id, acc, sizeof(acc));
      assert_int_equal(strlen(acc), before);
    }
    fp = fopen(gate, "a");
    assert_non_null(fp);
    fprintf(fp, "%d\n", i);
    fclose(fp);
  }
  wait_end(&v, id, 60000);
  read_into(&v, id, acc, sizeof(acc));
  assert_string_equal(acc, "line-1\nline-2\nline-3\nline-4\nline-5\n");
  env_close(&v);
}

/* E-2: one read takes at most output_cap_bytes of each stream; the file
 * keeps the rest for the next read, nothing is dropped. */
typedef struct {
  env_t *v;
  const char *id;
  size_t total, max_read;
  int reads;
} capread_t;

static int cap_read_all(void *arg) {
  capread_t *c = arg;
  uvt_read_t r;
  assert_int_equal(uvt_read(c->v->f.reg, c->id, NULL, &r), 0);
  c->total += r.len;
  c->reads += r.len > 0;
  if (r.len > c->max_read)
    c->max_read = r.len;
  uvt_read_cleanup(&r);
  return c->total >= 10000;
}

static void slurm_output_cap(void **state) {
  env_t v;
  char id[UVT_ID_MAX], cmd[1024], gate[4096];
  uvt_slurm_options_t o;
  capread_t c;
  FILE *fp;
  (void)state;
  case_path(gate, sizeof(gate), "gate");
  env_open(&v, NULL, 0, 0);
  uvt_slurm_options_init(&o);
  snprintf(cmd, sizeof(cmd),
           "head -c 10000 /dev/zero | tr '\\0' x; "
           "while [ ! -e %s ]; do sleep 0.05; done",
           gate);
  o.command = cmd;
  o.output_cap_bytes = 4096;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  memset(&c, 0, sizeof(c));
  c.v = &v;
  c.id = id;
  run_until(&v, cap_read_all, &c, 60000);
  assert_int_equal(c.total, 10000);
  assert_true(c.max_read <= 4096);
  assert_true(c.reads >= 3);
  fp = fopen(gate, "w");
  assert_non_null(fp);
  fclose(fp);
  wait_end(&v, id, 60000);
  assert_int_equal(cap_read_all(&c), 1);
  assert_int_equal(c.total, 10000); /* nothing more, nothing twice */
  /* Ended before any read: the end's read is the last, up to the cap, and
   * says what it left and where, whole paths (a new user found only the
   * file's name). */
  o.command = "head -c 10000 /dev/zero | tr '\\0' y";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  wait_end(&v, id, 60000);
  {
    uvt_read_t r;
    char want[4200];
    assert_int_equal(uvt_read(v.f.reg, id, NULL, &r), 0);
    assert_true(r.len > 4096);
    assert_int_equal(memchr(r.text, 'y', r.len) != NULL, 1);
    snprintf(want, sizeof(want),
             "[... not read: 5904 bytes more of stdout, 0 of stderr, in %s/",
             out_dir);
    assert_non_null(memmem(r.text, r.len, want, strlen(want)));
    uvt_read_cleanup(&r);
  }
  env_close(&v);
}

/* E-1: what uvt_slurm_start refuses before anything is registered. */
static void slurm_start_refused(void **state) {
  env_t v;
  char id[UVT_ID_MAX];
  uvt_slurm_options_t o;
  const char *argv[] = {"true", NULL};
  const char *empty[] = {NULL};
  uvt_metrics_t m;
  (void)state;
  env_open(&v, NULL, 0, 0);
  uvt_slurm_options_init(&o);
  assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_EINVAL); /* neither */
  o.command = "true";
  o.argv = argv;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_EINVAL); /* both */
  o.argv = NULL;
  o.command = "  ";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_EINVAL);
  o.command = NULL;
  o.argv = empty;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_EINVAL);
  o.argv = argv;
  o.output_cap_bytes = 3;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_EINVAL);
  assert_int_equal(uvt_slurm_start(NULL, &o, id), UV_EINVAL);
  o.output_cap_bytes = 0;
  /* A command line runs as bash -c's one argument: 128 KiB or more could
   * not run on the node (it was accepted, then failed there, exit 126).
   * Siblings: one argv string; just below the limit is taken. */
  {
    size_t big = 128 * 1024;
    char *text = malloc(big + 1);
    const char *av[] = {"echo", NULL, NULL};
    assert_non_null(text);
    memset(text, 'x', big);
    text[big] = '\0';
    o.argv = NULL;
    o.command = text;
    assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_E2BIG);
    o.command = NULL;
    av[1] = text;
    o.argv = av;
    assert_int_equal(uvt_slurm_start(v.e, &o, id), UV_E2BIG);
    o.argv = argv;
    free(text);
  }
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), UV_EINVAL); /* no journal */
  uvt_registry_metrics(v.f.reg, &m);
  assert_int_equal(m.started, 0);
  /* argv runs as given. */
  o.output_cap_bytes = 0;
  {
    const char *echo[] = {"echo", "it's", "one arg", NULL};
    char acc[256] = "";
    o.argv = echo;
    assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
    wait_end(&v, id, 60000);
    read_into(&v, id, acc, sizeof(acc));
    assert_string_equal(acc, "it's one arg\n");
  }
  env_close(&v);
}

/* ---- E-3: a kill ends every process of the job ------------------------- */

/* A process that still runs: a zombie (dead, waiting for this machine's
 * init to reap it, which under load takes a while) does not count. */
static int running(int pid) {
  char path[64], buf[512], *p;
  FILE *fp;
  size_t n;
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  if ((fp = fopen(path, "r")) == NULL)
    return 0;
  n = fread(buf, 1, sizeof(buf) - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static int pids_gone(const char *path) {
  FILE *fp = fopen(path, "r");
  int pid, alive = 0;
  assert_non_null(fp);
  while (fscanf(fp, "%d", &pid) == 1)
    alive += running(pid);
  fclose(fp);
  return alive;
}

static int job_state_is(uint32_t job, const char *states);

static void slurm_kill_all(void **state) {
  env_t v;
  char id[UVT_ID_MAX], pids[4096], cmd[2048], detail[160];
  uvt_kill_result_t kr;
  uint32_t job = 0;
  lines_t lw;
  (void)state;
  case_path(pids, sizeof(pids), "pids");
  env_open(&v, NULL, 0, 0);
  /* A TERM-ignorer and a setsid child, each writing its pid. */
  snprintf(cmd, sizeof(cmd),
           "bash -c 'trap \"\" TERM; echo $$ >> %s; while :; do sleep 0.2; "
           "done' & setsid bash -c 'echo $$ >> %s; exec sleep 300' & "
           "wait",
           pids, pids);
  assert_int_equal(start_cmd(&v, cmd, id), 0);
  lw.path = pids;
  lw.lines = 2;
  run_until(&v, has_lines, &lw, 60000);
  assert_int_equal(pids_gone(pids), 2);
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "test", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(status_of(&v, id, NULL, 0), UVT_STOPPING);
  wait_end(&v, id, 60000);
  /* Settled only once Slurm no longer holds it COMPLETING: nothing left. */
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_true(job_state_is(job, "gone CA"));
  assert_int_equal(pids_gone(pids), 0);
  assert_int_equal(status_of(&v, id, detail, sizeof(detail)), UVT_KILLED);
  assert_non_null(strstr(detail, "CANCELLED"));
  env_close(&v);
}

/* E-3: a kill before the job id is known is sent when it arrives. */
static void slurm_kill_early(void **state) {
  env_t v;
  char id[UVT_ID_MAX], detail[160];
  uvt_kill_result_t kr;
  uint32_t job = 0;
  (void)state;
  env_open(&v, NULL, 0, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "early", &kr), 0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, detail, sizeof(detail)), UVT_KILLED);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_true(job > 0);
  env_close(&v);
}

/* ---- E-4: the outcomes this cluster can cause -------------------------- */

static int has_job(void *arg) {
  idarg_t *a = arg;
  uint32_t job;
  return uvt_slurm_job_id(a->v->f.reg, a->id, NULL, &job) == 0;
}

static int hb_exists(void *arg) {
  const char *key = arg;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s.hb", out_dir, key);
  return access(path, F_OK) == 0;
}

static const char *key_of(env_t *v, const char *id) {
  uvt_task_t *t;
  assert_int_equal(uvt_task_lookup(v->f.reg, id, NULL, &t), 0);
  return ((uvt__sjob_t *)uvt_task_arg(t))->key;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  return system(cmd);
}

static void slurm_outcomes(void **state) {
  env_t v;
  char id[UVT_ID_MAX], d[160], full[UVT_ID_MAX * 3];
  uvt_slurm_options_t o;
  idarg_t a;
  uint32_t job;
  int i;
  (void)state;
  env_open(&v, NULL, 0, 0);
  /* exit 0 */
  assert_int_equal(start_cmd(&v, "true", id), 0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_COMPLETED);
  assert_string_equal(d, "exit code: 0");
  /* a signal -> killed "signal: SIGKILL" */
  assert_int_equal(start_cmd(&v, "kill -KILL $$", id), 0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  assert_string_equal(d, "signal: SIGKILL");
  /* CANCELLED by someone else (scancel) -> killed */
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  a.v = &v;
  a.id = id;
  run_until(&v, has_job, &a, 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_int_equal(sh("scancel %u", job), 0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  snprintf(full, sizeof(full), "slurm CANCELLED (job %u) by someone else", job);
  assert_string_equal(d, full);
  /* E-1: a refused submission settles failed "sbatch failed: REASON" */
  uvt_slurm_options_init(&o);
  o.command = "true";
  o.partition = "no-such-partition";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_FAILED);
  assert_true(strncmp(d, "sbatch failed: ", 15) == 0);
  assert_non_null(strstr(d, "partition"));
  /* PENDING shows its reason: two jobs take every CPU of both nodes, a
   * third waits. */
  {
    char big[3][UVT_ID_MAX];
    uvt_kill_result_t kr;
    uvt_slurm_options_init(&o);
    o.command = "sleep 300";
    o.cpus = 32;
    for (i = 0; i < 3; i++)
      assert_int_equal(uvt_slurm_start(v.e, &o, big[i]), 0);
    for (;;) {
      int pending = -1;
      for (i = 0; i < 3; i++) {
        status_of(&v, big[i], d, sizeof(d));
        if (strncmp(d, "pending: ", 9) == 0 && strcmp(d, "pending: None") != 0)
          pending = i;
      }
      if (pending >= 0)
        break;
      uv_run(&v.f.loop, UV_RUN_ONCE);
    }
    assert_true(strstr(d, "Resources") != NULL ||
                strstr(d, "Priority") != NULL);
    for (i = 0; i < 3; i++)
      assert_int_equal(uvt_kill(v.f.reg, big[i], NULL, "t", &kr), 0);
    for (i = 0; i < 3; i++)
      wait_end(&v, big[i], 60000);
  }
  /* NODE_FAIL: the node goes down under a running job. */
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  run_until(&v, hb_exists, (void *)key_of(&v, id), 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_int_equal(
      sh("n=$(squeue -h -j %u -o %%N); scontrol update nodename=$n "
         "state=down reason=uvt-test && echo $n > %s/downed",
         job, out_dir),
      0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_FAILED);
  snprintf(full, sizeof(full), "slurm NODE_FAIL (job %u)", job);
  assert_string_equal(d, full);
  /* Back to idle (ReturnToService may have done it already). */
  assert_int_equal(sh("scontrol update nodename=$(cat %s/downed) "
                      "state=resume 2>/dev/null; %s/scripts/slurm-cluster.sh "
                      "up %s >/dev/null",
                      out_dir, getenv("UVT_SOURCE_ROOT"), cluster_dir),
                   0);
  env_close(&v);
}

/* E-4: the states this cluster cannot cause, through the mapping itself. */
static void slurm_outcome_map(void **state) {
  uvt__slurm_end_t end;
  static const struct {
    uint32_t state;
    const char *name;
  } failed[] = {{JOB_TIMEOUT, "TIMEOUT"},     {JOB_NODE_FAIL, "NODE_FAIL"},
                {JOB_PREEMPTED, "PREEMPTED"}, {JOB_OOM, "OUT_OF_MEMORY"},
                {JOB_BOOT_FAIL, "BOOT_FAIL"}, {JOB_DEADLINE, "DEADLINE"}};
  size_t i;
  char want[96];
  (void)state;
  for (i = 0; i < sizeof(failed) / sizeof(failed[0]); i++) {
    uvt__slurm_map_end(failed[i].state, 0, 42, 0, &end);
    assert_int_equal(end.status, UVT_FAILED);
    snprintf(want, sizeof(want), "slurm %s (job 42)", failed[i].name);
    assert_string_equal(end.detail, want);
  }
  uvt__slurm_map_end(JOB_FAILED, 7 << 8, 42, 0, &end);
  assert_int_equal(end.status, UVT_COMPLETED);
  assert_string_equal(end.detail, "exit code: 7");
  uvt__slurm_map_end(JOB_FAILED, SIGTERM, 42, 0, &end);
  assert_int_equal(end.status, UVT_KILLED);
  assert_string_equal(end.detail, "signal: SIGTERM");
  uvt__slurm_map_end(JOB_CANCELLED, 0, 42, 1, &end);
  assert_int_equal(end.status, UVT_KILLED);
  assert_string_equal(end.detail, "slurm CANCELLED (job 42)");
  /* Forgotten by the controller: the wrapper's exit-code file. */
  uvt__slurm_map_rc("5\n", 42, 0, 0, &end);
  assert_string_equal(end.detail, "exit code: 5");
  uvt__slurm_map_rc("130 - -\n", 42, 0, 0, &end);
  assert_int_equal(end.status, UVT_KILLED);
  assert_string_equal(end.detail, "signal: SIGINT");
  uvt__slurm_map_rc(NULL, 42, 0, 0, &end);
  assert_int_equal(end.status, UVT_FAILED);
  /* A line still being written (no newline yet) is not a status: "1" of
   * "143 TERM 12" would read as exit code 1. */
  uvt__slurm_map_rc("1", 42, 0, 0, &end);
  assert_int_equal(end.status, UVT_FAILED);
  assert_non_null(strstr(end.detail, "left no exit code"));
  uvt__slurm_map_rc("", 42, 1, 0, &end);
  assert_int_equal(end.status, UVT_KILLED);
  assert_non_null(strstr(end.detail, "left no exit code"));
  /* E-14: the wrapper passed Slurm's TERM on: a kill of ours, the time
   * limit (the TERM came at it), or someone else's cancel. */
  uvt__slurm_map_rc("0 TERM 12\n", 42, 1, 60, &end);
  assert_int_equal(end.status, UVT_KILLED);
  assert_string_equal(end.detail, "slurm CANCELLED (job 42)");
  uvt__slurm_map_rc("0 TERM 60\n", 42, 0, 60, &end);
  assert_int_equal(end.status, UVT_FAILED);
  assert_string_equal(end.detail, "slurm TIMEOUT (job 42)");
  uvt__slurm_map_rc("143 TERM 12\n", 42, 0, 60, &end);
  assert_int_equal(end.status, UVT_KILLED);
  assert_non_null(strstr(end.detail, "SIGTERM"));
}

/* E-14: what sacct's plain answer (JobID|UID|State|ExitCode) is when
 * the named one is `named` and no name holds a line break: each complete
 * line without its name. */
static void acct1(const char *named, uvt__acct_t *a) {
  char plain[2048] = "", buf[1024];
  const char *line = named;
  while (line != NULL && *line != '\0') {
    const char *cur = line;
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char *f[5], *p, *sep;
    int n;
    line = end != NULL ? end + 1 : NULL;
    if (len >= sizeof(buf))
      continue;
    memcpy(buf, cur, len);
    buf[len] = '\0';
    if ((sep = strchr(buf, '|')) == NULL)
      continue;
    *sep = '\0';
    f[0] = buf;
    f[1] = sep + 1;
    for (n = 4; n >= 2; n--) {
      if ((p = strrchr(f[1], '|')) == NULL)
        break;
      *p = '\0';
      f[n] = p + 1;
    }
    if (n >= 2)
      continue;
    snprintf(plain + strlen(plain), sizeof(plain) - strlen(plain),
             "%s|%s|%s|%s\n", f[0], f[2], f[3], f[4]);
  }
  uvt__acct_parse(plain, named, 42, "k", 7, a);
}

/* E-14, E-9: a forgotten job's accounting record (sacct -P lines:
 * JobID|JobName|UID|State|ExitCode), mapped as a live state is; the
 * states this cluster cannot cause are fed here. */
static void slurm_acct_map(void **state) {
  uvt__acct_t a;
  uvt__slurm_end_t end;
  static const struct {
    const char *line;
    int kill_requested;
    uvt_status_t status;
    const char *detail;
  } rows[] = {
      {"42|uvt-k|7|COMPLETED|0:0\n", 0, UVT_COMPLETED, "exit code: 0"},
      {"42|uvt-k|7|FAILED|3:0\n", 0, UVT_COMPLETED, "exit code: 3"},
      {"42|uvt-k|7|FAILED|0:9\n", 0, UVT_KILLED, "signal: SIGKILL"},
      {"42|uvt-k|7|CANCELLED by 0|0:15\n", 0, UVT_KILLED,
       "slurm CANCELLED (job 42) by someone else"},
      {"42|uvt-k|7|CANCELLED|0:0\n", 1, UVT_KILLED, "slurm CANCELLED (job 42)"},
      {"42|uvt-k|7|TIMEOUT|0:0\n", 0, UVT_FAILED, "slurm TIMEOUT (job 42)"},
      {"42|uvt-k|7|NODE_FAIL|0:0\n", 0, UVT_FAILED, "slurm NODE_FAIL (job 42)"},
      {"42|uvt-k|7|OUT_OF_MEMORY|0:125\n", 0, UVT_FAILED,
       "slurm OUT_OF_MEMORY (job 42)"},
      {"42|uvt-k|7|PREEMPTED|0:0\n", 0, UVT_FAILED, "slurm PREEMPTED (job 42)"},
      /* Steps and other ids are not the job's line. */
      {"42.batch|batch|7|FAILED|9:0\n42|uvt-k|7|COMPLETED|0:0\n", 0,
       UVT_COMPLETED, "exit code: 0"},
      /* A reused id: the record of our name and user counts. */
      {"42|uvt-k|7|COMPLETED|0:0\n42|other|7|FAILED|1:0\n", 0, UVT_COMPLETED,
       "exit code: 0"},
  };
  size_t i;
  char long_line[700];
  (void)state;
  for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    acct1(rows[i].line, &a);
    assert_int_equal(a.found, UVT__ACCT_OURS);
    uvt__slurm_map_end(a.state, a.exit_code, 42, rows[i].kill_requested, &end);
    assert_int_equal(end.status, rows[i].status);
    assert_string_equal(end.detail, rows[i].detail);
  }
  /* E-9: another name, another user, a name with a '|' in it, a name
   * longer than a line of ours: not ours. */
  acct1("42|someone-elses|7|COMPLETED|0:0\n", &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  assert_non_null(strstr(a.why, "someone-elses"));
  acct1("42|uvt-k|8|COMPLETED|0:0\n", &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  assert_non_null(strstr(a.why, "user 8"));
  acct1("42|uvt-k|7|x|7|COMPLETED|0:0\n", &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  memset(long_line, 'a', sizeof(long_line) - 1);
  long_line[sizeof(long_line) - 1] = '\0';
  memcpy(long_line, "42|", 3);
  memcpy(long_line + sizeof(long_line) - 17, "|7|COMPLETED|0:0", 16);
  acct1(long_line, &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  /* A name with a line break that makes a line like ours (another
   * user's job on a reused id): the plain answer has one record, of user
   * 8; the named one two lines for job 42.  Never ours. */
  uvt__acct_parse("42|8|FAILED|1:0\n",
                  "42|a\n42|uvt-k|7|COMPLETED|0:0\nb|8|FAILED|1:0\n", 42, "k",
                  7, &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  uvt__acct_parse("42|8|FAILED|1:0\n",
                  "42|a|7|COMPLETED|0:0\n42|uvt-k|7|COMPLETED|0:0\n42|z|8|"
                  "FAILED|1:0\n",
                  42, "k", 7, &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  /* Our record beside one whose name breaks: nothing believed. */
  uvt__acct_parse("42|7|COMPLETED|0:0\n42|8|FAILED|1:0\n",
                  "42|uvt-k|7|COMPLETED|0:0\n42|x\ny|8|FAILED|1:0\n", 42, "k",
                  7, &a);
  assert_int_equal(a.found, UVT__ACCT_FOREIGN);
  /* No record, a record still running, nonsense: nothing (the wrapper's
   * files then). */
  acct1("", &a);
  assert_int_equal(a.found, 0);
  acct1("42|uvt-k|7|RUNNING|0:0\n", &a);
  assert_int_equal(a.found, 0);
  acct1("4|uvt-k|7|COMPLETED|0:0\n421|uvt-k|7|FAILED|1:0\n||\n|", &a);
  assert_int_equal(a.found, 0);
}

/* ---- Many at once ------------------------------------------------------- */

static void slurm_fifty(void **state) {
  env_t v;
  char ids[50][UVT_ID_MAX], cmd[64], acc[256], want[64];
  int i;
  (void)state;
  env_open(&v, NULL, 0, 0);
  for (i = 0; i < 50; i++) {
    snprintf(cmd, sizeof(cmd), "echo job-%d", i);
    assert_int_equal(start_cmd(&v, cmd, ids[i]), 0);
  }
  for (i = 0; i < 50; i++)
    wait_end(&v, ids[i], 120000);
  for (i = 0; i < 50; i++) {
    acc[0] = '\0';
    assert_int_equal(status_of(&v, ids[i], NULL, 0), UVT_COMPLETED);
    read_into(&v, ids[i], acc, sizeof(acc));
    snprintf(want, sizeof(want), "job-%d\n", i);
    assert_string_equal(acc, want);
  }
  assert_int_equal(v.notices, 50);
  env_close(&v);
}

/* ---- E-6: registry close ------------------------------------------------ */

static int job_state_is(uint32_t job, const char *states) {
  char cmd[256], buf[64] = "";
  FILE *p;
  snprintf(cmd, sizeof(cmd), "squeue -h -j %u -o %%t 2>/dev/null", job);
  p = popen(cmd, "r");
  if (p == NULL)
    return 0;
  if (fgets(buf, sizeof(buf), p) == NULL)
    buf[0] = '\0';
  pclose(p);
  buf[strcspn(buf, "\n")] = '\0';
  return strstr(states, buf[0] ? buf : "gone") != NULL;
}

static void slurm_close_cancels(void **state) {
  env_t v;
  char id[UVT_ID_MAX];
  idarg_t a;
  uint32_t job;
  (void)state;
  env_open(&v, NULL, 0, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  a.v = &v;
  a.id = id;
  run_until(&v, has_job, &a, 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  env_close(&v); /* waits for the settlement: the job is gone */
  assert_true(job_state_is(job, "gone CA"));
}

static void agent_disposed(uvt_agent_t *a) {
  (*(int *)a->data)++;
}

typedef struct {
  env_t *v;
  uvt_agent_t *owner;
  const char *id;
} ownedarg_t;

static int owned_has_hb(void *arg) {
  ownedarg_t *o = arg;
  uvt_task_t *t;
  char path[4096];
  if (uvt_task_lookup(o->v->f.reg, o->id, o->owner, &t) != 0)
    return 0;
  snprintf(path, sizeof(path), "%s/%s.hb", out_dir,
           ((uvt__sjob_t *)uvt_task_arg(t))->key);
  return access(path, F_OK) == 0;
}

static void run_until_owned(env_t *v, uvt_agent_t *owner, const char *id) {
  ownedarg_t o = {v, owner, id};
  run_until(v, owned_has_hb, &o, 60000);
}

/* E-6 */
static void slurm_close_detached(void **state) {
  env_t v;
  char id[UVT_ID_MAX], id2[UVT_ID_MAX], journal[4096], d[160];
  idarg_t a;
  uvt_agent_t owner;
  uint32_t job, job2, job3 = 0;
  uvt_kill_result_t kr;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  env_open(&v, journal, 1, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  a.v = &v;
  a.id = id;
  run_until(&v, has_job, &a, 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  /* A task of an agent that is disposed is detached too. */
  {
    uvt_slurm_options_t o;
    idarg_t a2;
    int disposed = 0;
    uvt_snapshot_t s;
    uvt_slurm_options_init(&o);
    o.command = "sleep 300";
    o.owner = &owner;
    memset(&owner, 0, sizeof(owner));
    assert_int_equal(uvt_agent_register(v.f.reg, &owner, "A", "s1"), 0);
    owner.data = &disposed;
    assert_int_equal(uvt_slurm_start(v.e, &o, id2), 0);
    a2.v = &v;
    a2.id = id2;
    run_until_owned(&v, &owner, id2);
    assert_int_equal(uvt_slurm_job_id(v.f.reg, id2, &owner, &job3), 0);
    assert_int_equal(uvt_agent_dispose(&owner, agent_disposed), 0);
    while (!disposed)
      uv_run(&v.f.loop, UV_RUN_ONCE);
    assert_int_equal(uvt_get(v.f.reg, id2, NULL, &s), UVT_ENOTASK);
    assert_true(job_state_is(job3, "R PD"));
    (void)a2;
  }
  env_close(&v);
  assert_int_equal(v.notices, 0);
  assert_true(job_state_is(job, "R PD"));
  /* E-5: a new host on the same journal gets both back under their ids. */
  env_open(&v, journal, 0, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 2);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job2), 0);
  assert_int_equal(job2, job);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id2, NULL, &job2), 0);
  assert_int_equal(job2, job3);
  /* A second adoption finds nothing left to take. */
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0);
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  assert_int_equal(uvt_kill(v.f.reg, id2, NULL, "t", &kr), 0);
  wait_end(&v, id, 60000);
  wait_end(&v, id2, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  assert_int_equal(v.ends, 2);
  assert_int_equal(v.notices, 0); /* the kills reported them */
  env_close(&v);
}

/* ---- E-5: a host that dies mid-output; another takes over ------------- */

static void slurm_readopt(void **state) {
  char journal[4096], gate[4096], marks[4096], cmd[1024];
  int fds[2];
  pid_t pid;
  char got_child[8192] = "", acc[8192] = "", id[UVT_ID_MAX] = "",
       done_id[UVT_ID_MAX] = "";
  env_t v;
  int status, i;
  ssize_t n;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  case_path(gate, sizeof(gate), "gate");
  case_path(marks, sizeof(marks), "marks");
  snprintf(cmd, sizeof(cmd),
           "for i in $(seq 1 40); do echo line-$i; echo $i >> %s; "
           "if [ $i = 20 ]; then while [ ! -e %s ]; do sleep 0.05; done; fi; "
           "done",
           marks, gate);
  assert_int_equal(pipe(fds), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The first host: one job that ends and is reported, one that runs;
     * it reads part of the running one's output and dies without any
     * cleanup. */
    env_t c;
    char jid[UVT_ID_MAX], did[UVT_ID_MAX], part[8192] = "";
    lines_t lw;
    close(fds[0]);
    env_open(&c, journal, 0, 0);
    if (start_cmd(&c, "echo finished", did) != 0)
      _exit(2);
    wait_end(&c, did, 60000);
    if (c.notices != 1)
      _exit(3);
    if (start_cmd(&c, cmd, jid) != 0)
      _exit(4);
    lw.path = marks;
    lw.lines = 10;
    run_until(&c, has_lines, &lw, 60000);
    read_into(&c, jid, part, sizeof(part));
    dprintf(fds[1], "%s %s\n%s", did, jid, part);
    _exit(0);
  }
  close(fds[1]);
  while ((n = read(fds[0], got_child + strlen(got_child),
                   sizeof(got_child) - strlen(got_child) - 1)) > 0)
    got_child[strlen(got_child) + (size_t)n] = '\0';
  close(fds[0]);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(sscanf(got_child, "%64s %64s", done_id, id), 2);
  /* The second host adopts: the running job only (the ended one's end was
   * delivered, it is not reported again). */
  env_open(&v, journal, 0, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 1);
  {
    uvt_snapshot_t s;
    assert_int_equal(uvt_get(v.f.reg, done_id, NULL, &s), UVT_ENOTASK);
    assert_int_equal(uvt_get(v.f.reg, id, NULL, &s), 0);
    uvt_snapshot_cleanup(&s);
  }
  /* The counter moved past the adopted number (R-START-6). */
  {
    char nid[UVT_ID_MAX];
    unsigned a, b;
    assert_int_equal(start_cmd(&v, "true", nid), 0);
    sscanf(id, "slurm-%u", &a);
    sscanf(nid, "slurm-%u", &b);
    assert_true(b > a);
    wait_end(&v, nid, 60000);
  }
  {
    FILE *fp = fopen(gate, "w");
    assert_non_null(fp);
    fclose(fp);
  }
  wait_end(&v, id, 60000);
  read_into(&v, id, acc, sizeof(acc));
  /* What the first host read, then what the second read: every line once,
   * in order. */
  {
    char whole[16384], want[16384] = "";
    const char *part = strchr(got_child, '\n') + 1;
    snprintf(whole, sizeof(whole), "%s%s", part, acc);
    for (i = 1; i <= 40; i++)
      snprintf(want + strlen(want), sizeof(want) - strlen(want), "line-%d\n",
               i);
    assert_string_equal(whole, want);
  }
  /* One notice for the adopted job, none for the one reported before. */
  assert_int_equal(v.notices, 2);
  env_close(&v);
}

/* ---- E-11: a kill reaches the command's TERM handler ------------------ */

typedef struct {
  env_t *v;
  const char *id;
  char acc[8192];
  const char *want;
} outarg_t;

/* Read into acc until it holds `want`. */
static int output_has(void *arg) {
  outarg_t *o = arg;
  read_into(o->v, o->id, o->acc, sizeof(o->acc));
  return strstr(o->acc, o->want) != NULL;
}

static void wait_output(env_t *v, const char *id, char *acc, size_t size,
                        const char *want) {
  outarg_t o;
  memset(&o, 0, sizeof(o));
  o.v = v;
  o.id = id;
  o.want = want;
  snprintf(o.acc, sizeof(o.acc), "%s", acc);
  run_until(v, output_has, &o, 120000);
  snprintf(acc, size, "%s", o.acc);
}

/* The user's command as a cluster user writes it: a TERM handler that
 * saves a checkpoint (it takes a while), a loop of foreground children. */
#define CHECKPOINTER                                                           \
  "trap 'sleep 0.3; echo checkpoint-saved; exit 0' TERM; "                     \
  "trap 'echo warned-$((++w))' USR1; echo ready; "                             \
  "while :; do sleep 0.1; done"

static void slurm_kill_checkpoint(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[8192] = "", d[160], want[96];
  uvt_kill_result_t kr;
  uint32_t job;
  (void)state;
  env_open(&v, NULL, 0, 0);
  assert_int_equal(start_cmd(&v, CHECKPOINTER, id), 0);
  wait_output(&v, id, acc, sizeof(acc), "ready\n");
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "test", &kr), 0);
  wait_end(&v, id, 60000);
  read_into(&v, id, acc, sizeof(acc));
  /* E-11: the handler ran, as under plain sbatch + scancel. */
  assert_non_null(strstr(acc, "checkpoint-saved\n"));
  /* E-14: the real outcome, though the controller forgets the job 2 s
   * after its end (MinJobAge). */
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  snprintf(want, sizeof(want), "slurm CANCELLED (job %u)", job);
  assert_string_equal(d, want);
  env_close(&v);
}

/* ---- E-11: the time limit and the warning signal ------------------------ */

/* Two jobs with a limit of 1 minute (the shortest Slurm has), side by
 * side: one with a warning signal 50 s before its limit.  Once they run,
 * their end time is moved to now (scontrol update EndTime), so the
 * controller's next time-limit check (every 30 s at most) ends them as
 * it ends a job out of time.  Both save a checkpoint at the limit's
 * TERM, and the warned one heard USR1 first. */
static void slurm_timeout_checkpoint(void **state) {
  env_t v;
  char id[2][UVT_ID_MAX], acc[2][8192], d[160], want[96];
  uvt_slurm_options_t o;
  uint32_t job;
  int i;
  (void)state;
  slow_test();
  memset(acc, 0, sizeof(acc));
  env_open(&v, NULL, 0, 0);
  for (i = 0; i < 2; i++) {
    uvt_slurm_options_init(&o);
    o.command = CHECKPOINTER;
    o.time_limit_min = 1;
    o.signal = i == 1 ? "USR1@50" : NULL; /* E-13 */
    assert_int_equal(uvt_slurm_start(v.e, &o, id[i]), 0);
  }
  for (i = 0; i < 2; i++) {
    wait_output(&v, id[i], acc[i], sizeof(acc[i]), "ready\n");
    assert_int_equal(uvt_slurm_job_id(v.f.reg, id[i], NULL, &job), 0);
    assert_int_equal(
        sh("scontrol update jobid=%u EndTime=$(date +%%Y-%%m-%%dT%%H:%%M:%%S)",
           job),
        0);
  }
  for (i = 0; i < 2; i++) {
    wait_end(&v, id[i], 240000);
    read_into(&v, id[i], acc[i], sizeof(acc[i]));
    assert_non_null(strstr(acc[i], "checkpoint-saved\n"));
    assert_int_equal(uvt_slurm_job_id(v.f.reg, id[i], NULL, &job), 0);
    assert_int_equal(status_of(&v, id[i], d, sizeof(d)), UVT_FAILED);
    snprintf(want, sizeof(want), "slurm TIMEOUT (job %u)", job);
    assert_string_equal(d, want);
  }
  assert_null(strstr(acc[0], "warned-"));
  assert_non_null(strstr(acc[1], "warned-1\n"));
  env_close(&v);
}

/* ---- E-9: a journal names a job that is not ours ------------------------- */

static uint32_t sbatch_sleep(const char *name) {
  char cmd[512], buf[64] = "";
  FILE *p;
  snprintf(cmd, sizeof(cmd),
           "sbatch --parsable -J %s -o /dev/null --wrap 'sleep 300'", name);
  p = popen(cmd, "r");
  assert_non_null(p);
  if (fgets(buf, sizeof(buf), p) == NULL)
    buf[0] = '\0';
  pclose(p);
  return (uint32_t)strtoul(buf, NULL, 10);
}

static void slurm_journal_foreign(void **state) {
  env_t v;
  char journal[4096], d[160];
  uvt_snapshot_t s;
  uint32_t foreign;
  FILE *fp;
  int warnings;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  /* Someone's job of the same user, running. */
  foreign = sbatch_sleep("someone-elses");
  assert_true(foreign > 0);
  /* A journal (v3's form, as a reset controller or another cluster's
   * journal leaves it) that names that job under a key of ours. */
  fp = fopen(journal, "w");
  assert_non_null(fp);
  fprintf(fp, "T slurm-7 slurm-0badc0de\nJ slurm-7 %u\n", foreign);
  fclose(fp);
  env_open(&v, journal, 0, 3000);
  warnings = v.f.warnings;
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0); /* E-9 */
  assert_int_equal(uvt_get(v.f.reg, "slurm-7", NULL, &s), UVT_ENOTASK);
  assert_true(v.f.warnings > warnings);
  assert_non_null(strstr(v.f.last_warning, "dropped"));
  assert_non_null(strstr(v.f.last_warning, "someone-elses"));
  env_close(&v);
  /* Neither adopted nor cancelled; and the line is gone. */
  assert_true(job_state_is(foreign, "R PD"));
  env_open(&v, journal, 0, 3000);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0);
  env_close(&v);
  /* Lines of another cluster or another user are dropped unasked. */
  fp = fopen(journal, "w");
  assert_non_null(fp);
  fprintf(fp,
          "U1 J id=slurm-8 key=slurm-0badc0df job=%u out=0 err=0 uid=%u "
          "cluster=elsewhere limit=0 array=0\n"
          "U1 J id=slurm-9 key=slurm-0badc0e0 job=%u out=0 err=0 uid=%u "
          "cluster=- limit=0 array=0\n",
          foreign, (unsigned)getuid(), foreign, (unsigned)getuid() + 1);
  fclose(fp);
  env_open(&v, journal, 0, 3000);
  warnings = v.f.warnings;
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0);
  assert_int_equal(v.f.warnings, warnings + 2);
  assert_non_null(strstr(v.f.last_warning, "user"));
  env_close(&v);
  assert_true(job_state_is(foreign, "R PD"));
  assert_int_equal(sh("scancel %u", foreign), 0);
  (void)d;
}

/* E-9: adopted while the controller is silent: registered unconfirmed,
 * nothing sent to the job (a kill waits) until the controller answers. */
static void slurm_adopt_silent(void **state) {
  env_t v;
  char journal[4096], id[UVT_ID_MAX], d[200];
  uvt_kill_result_t kr;
  uint32_t job;
  idarg_t a;
  int warnings;
  (void)state;
  slow_test();
  case_path(journal, sizeof(journal), "journal");
  env_open(&v, journal, 1, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  a.v = &v;
  a.id = id;
  run_until(&v, has_job, &a, 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  env_close(&v); /* detached: the job runs on */
  assert_int_equal(sh("kill $(cat %s/slurmctld.pid); while kill -0 $(cat "
                      "%s/slurmctld.pid) 2>/dev/null; do sleep 0.1; done",
                      cluster_dir, cluster_dir),
                   0);
  env_open(&v, journal, 0, 0);
  warnings = v.f.warnings;
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 1);
  assert_true(v.f.warnings > warnings);
  assert_non_null(strstr(v.f.last_warning, "did not answer"));
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  assert_int_equal(sh("/usr/sbin/slurmctld -f %s/slurm.conf", cluster_dir), 0);
  wait_end(&v, id, 180000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  assert_true(job_state_is(job, "gone CA"));
  env_close(&v);
}

/* ---- E-15: a record per task, not per read ------------------------------ */

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* E-5, R-START-6: an id is never handed out again for a journal's tasks.
 * After a restart the next new task's id is above every id the journal
 * named, delivered or live, adopted or not (yet), through compactions
 * (a journal whose tasks were all delivered, a host that started
 * nothing) and in v3's form.  A model that remembers slurm-2 must never
 * read another job's output under that id. */
static void start_ended(env_t *v, const char *want) {
  char id[UVT_ID_MAX];
  assert_int_equal(start_cmd(v, "true", id), 0);
  assert_string_equal(id, want);
  wait_end(v, id, 60000);
}

static void slurm_ids_fresh(void **state) {
  env_t v;
  char journal[4096], live[UVT_ID_MAX], done[UVT_ID_MAX];
  uvt_kill_result_t kr;
  FILE *fp;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  /* Host 1: slurm-1 runs on (detached at close); slurm-2's end was
   * delivered. */
  env_open(&v, journal, 1, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", live), 0);
  assert_string_equal(live, "slurm-1");
  assert_int_equal(start_cmd(&v, "true", done), 0);
  wait_end(&v, done, 60000);
  assert_int_equal(v.notices, 1);
  env_close(&v);
  /* Host 2: the adopted task keeps its id; the next one is not slurm-2. */
  env_open(&v, journal, 1, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 1);
  start_ended(&v, "slurm-3");
  env_close(&v);
  /* Host 3: a start before the adoption takes no id of the journal's. */
  env_open(&v, journal, 0, 0);
  start_ended(&v, "slurm-4");
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 1);
  assert_int_equal(uvt_kill(v.f.reg, live, NULL, "t", &kr), 0);
  wait_end(&v, live, 60000);
  env_close(&v);
  /* Host 4: every end was delivered (nothing to adopt); host 5 starts
   * nothing; host 6 still goes on from there. */
  env_open(&v, journal, 0, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0);
  start_ended(&v, "slurm-5");
  env_close(&v);
  env_open(&v, journal, 0, 0);
  env_close(&v);
  env_open(&v, journal, 0, 0);
  start_ended(&v, "slurm-6");
  env_close(&v);
  /* v3's journal (a line per event) names slurm-41, delivered. */
  fp = fopen(journal, "w");
  assert_non_null(fp);
  fprintf(fp, "T slurm-41 slurm-0badc0de\nD slurm-41\n");
  fclose(fp);
  env_open(&v, journal, 0, 0);
  start_ended(&v, "slurm-42");
  env_close(&v);
}

/* E-5: a journal is one engine's at a time.  A second engine on it, in
 * this process or another, fails with UV_EBUSY and a log line naming the
 * journal, and touches nothing of it (it would adopt the first's live
 * jobs and report their ends twice); once the first closed (or its
 * process died), the next one opens it and adopts. */
static void slurm_journal_exclusive(void **state) {
  env_t v, w;
  char journal[4096], id[UVT_ID_MAX];
  uvt_slurm_engine_options_t eo;
  uvt_slurm_engine_t *e2 = NULL;
  uvt_kill_result_t kr;
  int warnings, status;
  pid_t pid;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  env_open(&v, journal, 1, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  {
    idarg_t a = {&v, id};
    run_until(&v, has_job, &a, 60000);
  }
  /* The same registry. */
  uvt_slurm_engine_options_init(&eo);
  eo.out_dir = out_dir;
  eo.journal = journal;
  warnings = v.f.warnings;
  assert_int_equal(uvt_slurm_engine_new(v.f.reg, &eo, &e2), UV_EBUSY);
  assert_null(e2);
  assert_int_equal(v.f.warnings, warnings + 1);
  assert_non_null(strstr(v.f.last_warning, journal));
  assert_non_null(strstr(v.f.last_warning, "in use"));
  /* Another registry of this process, and another process. */
  fixture_init(&w.f, NULL);
  assert_int_equal(uvt_slurm_engine_new(w.f.reg, &eo, &e2), UV_EBUSY);
  fixture_close(&w.f);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fixture_t f;
    int err;
    fixture_init(&f, NULL);
    err = uvt_slurm_engine_new(f.reg, &eo, &e2);
    _exit(err == UV_EBUSY ? 0 : 1);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* Untouched: the first engine's job runs on, its record kept. */
  assert_int_equal(status_of(&v, id, NULL, 0), UVT_RUNNING);
  env_close(&v); /* detached: the job runs on */
  env_open(&v, journal, 0, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 1);
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  wait_end(&v, id, 60000);
  env_close(&v);
}

static void slurm_journal_compact(void **state) {
  env_t v;
  char journal[4096], id[UVT_ID_MAX], acc[8192] = "", cmd[512], gate[4096];
  long size;
  int i;
  FILE *fp;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  case_path(gate, sizeof(gate), "gate");
  env_open(&v, journal, 0, 0);
  snprintf(cmd, sizeof(cmd),
           "for i in $(seq 1 20); do echo line-$i; sleep 0.05; done; "
           "while [ ! -e %s ]; do sleep 0.05; done; echo last",
           gate);
  assert_int_equal(start_cmd(&v, cmd, id), 0);
  wait_output(&v, id, acc, sizeof(acc), "line-20\n");
  size = file_size(journal);
  /* Reads that each consume output rewrite the one record. */
  for (i = 0; i < 20; i++)
    read_into(&v, id, acc, sizeof(acc));
  assert_int_equal(file_size(journal), size);
  assert_int_equal(size, UVT__JOURNAL_REC);
  fp = fopen(gate, "w");
  assert_non_null(fp);
  fclose(fp);
  wait_end(&v, id, 60000);
  env_close(&v);
  /* At the next open the delivered task's record is only the mark of
   * the highest id handed out (E-5, slurm_ids_fresh): one record, and
   * opens that add nothing do not make it grow. */
  for (i = 0; i < 2; i++) {
    char rec[64] = "";
    env_open(&v, journal, 0, 0);
    assert_int_equal(file_size(journal), UVT__JOURNAL_REC);
    fp = fopen(journal, "r");
    assert_non_null(fp);
    assert_non_null(fgets(rec, sizeof(rec), fp));
    fclose(fp);
    assert_true(strncmp(rec, "U1 D id=slurm-1 ", 16) == 0);
    env_close(&v);
  }
}

/* ---- E-10: the job's environment is scrubbed ---------------------------- */

static void slurm_env_scrubbed(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[65536] = "", ctld[4096];
  uvt_slurm_options_t o;
  const char *pass[] = {"UVT_PASSED_TOKEN=passed-on-purpose", NULL};
  (void)state;
  setenv("AWS_SECRET_ACCESS_KEY", "fake-aws-secret-4711", 1);
  setenv("GITHUB_TOKEN", "fake-github-token-4711", 1);
  env_open(&v, NULL, 0, 0);
  /* The host's environment, as a local task gets it. */
  assert_int_equal(start_cmd(&v, "env", id), 0);
  wait_end(&v, id, 60000);
  read_into(&v, id, acc, sizeof(acc));
  assert_null(strstr(acc, "fake-aws-secret"));
  assert_null(strstr(acc, "fake-github-token"));
  assert_non_null(strstr(acc, "PAGER=cat"));   /* a local task's additions */
  assert_non_null(strstr(acc, "SLURM_CONF=")); /* the rest is there */
  /* An entry passed on purpose (--pass-env) goes through. */
  acc[0] = '\0';
  uvt_slurm_options_init(&o);
  o.command = "env";
  o.env = pass;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  wait_end(&v, id, 60000);
  read_into(&v, id, acc, sizeof(acc));
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("GITHUB_TOKEN");
  assert_null(strstr(acc, "fake-aws-secret"));
  assert_non_null(strstr(acc, "UVT_PASSED_TOKEN=passed-on-purpose"));
  /* Nothing scrubbed reached the controller's saved state. */
  snprintf(ctld, sizeof(ctld), "%s/ctld", cluster_dir);
  assert_int_not_equal(
      sh("grep -rqs -e fake-aws-secret -e fake-github-token %s", ctld), 0);
  env_close(&v);
}

/* ---- E-12: honest submissions ------------------------------------------- */

typedef struct {
  int told;
  uvt_slurm_submit_t what[4];
  uint32_t job;
  char why[256];
} told_t;

static void on_submitted(void *data, const char *id, uvt_slurm_submit_t what,
                         uint32_t job, const char *why) {
  told_t *t = data;
  (void)id;
  assert_true(t->told < 4);
  t->what[t->told++] = what;
  if (getenv("UVT_SLURM_DEBUG"))
    fprintf(stderr, "submitted %d job %u why %s at %llu\n", (int)what, job, why,
            (unsigned long long)(uv_hrtime() / 1000000u));
  t->job = job;
  snprintf(t->why, sizeof(t->why), "%s", why);
}

static int told_final(void *arg) {
  told_t *t = arg;
  return t->told > 0 && t->what[t->told - 1] != UVT_SLURM_RETRYING;
}

static int told_any(void *arg) {
  return ((told_t *)arg)->told > 0;
}

static void slurm_submit_answers(void **state) {
  env_t v;
  char id[UVT_ID_MAX], d[200];
  uvt_slurm_options_t o;
  told_t t;
  uint32_t job;
  (void)state;
  env_open(&v, NULL, 0, 0);
  /* Accepted: the job id, in the answer and the detail. */
  memset(&t, 0, sizeof(t));
  uvt_slurm_options_init(&o);
  o.command = "sleep 1";
  o.submitted = on_submitted;
  o.submitted_data = &t;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  status_of(&v, id, d, sizeof(d));
  assert_string_equal(d, "submitting");
  run_until(&v, told_final, &t, 60000);
  assert_int_equal(t.told, 1);
  assert_int_equal(t.what[0], UVT_SLURM_ACCEPTED);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_int_equal(t.job, job);
  status_of(&v, id, d, sizeof(d));
  {
    char want[64];
    snprintf(want, sizeof(want), "slurm job %u", job);
    assert_non_null(strstr(d, want));
  }
  wait_end(&v, id, 60000);
  /* Refused, with Slurm's reason. */
  memset(&t, 0, sizeof(t));
  o.partition = "no-such-partition";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  run_until(&v, told_final, &t, 60000);
  assert_int_equal(t.what[0], UVT_SLURM_REFUSED);
  assert_non_null(strstr(t.why, "partition"));
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_FAILED);
  env_close(&v);
}

static void slurm_controller_down(void **state) {
  env_t v;
  char id[UVT_ID_MAX], d[400], acc[256] = "";
  uvt_slurm_options_t o;
  told_t t;
  (void)state;
  slow_test();
  env_open(&v, NULL, 0, 0);
  /* The controller goes away. */
  assert_int_equal(sh("kill $(cat %s/slurmctld.pid); while kill -0 $(cat "
                      "%s/slurmctld.pid) 2>/dev/null; do sleep 0.1; done",
                      cluster_dir, cluster_dir),
                   0);
  memset(&t, 0, sizeof(t));
  uvt_slurm_options_init(&o);
  o.command = "echo made-it";
  o.submitted = on_submitted;
  o.submitted_data = &t;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  run_until(&v, told_any, &t, 120000);
  assert_int_equal(t.what[0], UVT_SLURM_RETRYING);
  assert_non_null(strstr(t.why, "120 s")); /* the limit, stated */
  status_of(&v, id, d, sizeof(d));
  assert_true(strncmp(d, "submitting: the controller does not answer", 42) ==
              0);
  /* ... and comes back: the job is accepted and runs. */
  assert_int_equal(sh("/usr/sbin/slurmctld -f %s/slurm.conf", cluster_dir), 0);
  run_until(&v, told_final, &t, 180000);
  assert_int_equal(t.what[t.told - 1], UVT_SLURM_ACCEPTED);
  wait_end(&v, id, 60000);
  read_into(&v, id, acc, sizeof(acc));
  assert_string_equal(acc, "made-it\n");
  assert_int_equal(status_of(&v, id, NULL, 0), UVT_COMPLETED);
  env_close(&v);
}

/* ---- E-13: arrays and dependencies -------------------------------------- */

static void slurm_array(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[4096] = "", d[300];
  uvt_slurm_options_t o;
  uvt_kill_result_t kr;
  uint32_t job;
  int i;
  (void)state;
  env_open(&v, NULL, 0, 0);
  uvt_slurm_options_init(&o);
  o.command = "echo element-$SLURM_ARRAY_TASK_ID";
  o.array = "0-3";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  wait_end(&v, id, 120000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_COMPLETED);
  assert_non_null(strstr(d, "4 completed"));
  read_into(&v, id, acc, sizeof(acc));
  for (i = 0; i < 4; i++) {
    char want[64];
    snprintf(want, sizeof(want), "[element %d]\nelement-%d\n", i, i);
    assert_non_null(strstr(acc, want));
  }
  /* Killed as one. */
  o.command = "sleep 300";
  o.array = "0-5%3";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  {
    idarg_t a = {&v, id};
    run_until(&v, has_job, &a, 60000);
  }
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  wait_end(&v, id, 120000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  assert_true(job_state_is(job, "gone CA"));
  assert_int_equal(
      sh("test -z \"$(squeue -h -j %u -t PD,R,CG 2>/dev/null)\"", job), 0);
  env_close(&v);
}

typedef struct {
  env_t *v;
  const char *id;
  const char *want;
} detailarg_t;

static int detail_has(void *arg) {
  detailarg_t *a = arg;
  char d[300];
  uvt_snapshot_t s;
  if (uvt_get(a->v->f.reg, a->id, NULL, &s) != 0)
    return 0;
  snprintf(d, sizeof(d), "%s", s.detail != NULL ? s.detail : "");
  uvt_snapshot_cleanup(&s);
  return strstr(d, a->want) != NULL;
}

/* E-13: every index a controller record stands for is counted, in every
 * state: the elements a throttle ("%2") keeps back share one record
 * ("2-5%2") that is pending, then cancelled by the kill; an array held
 * back whole (a dependency not met) is one record of all six. */
static void slurm_array_counts(void **state) {
  env_t v;
  char id[UVT_ID_MAX], gate[UVT_ID_MAX], dep[64], d[300];
  uvt_slurm_options_t o;
  uvt_kill_result_t kr;
  (void)state;
  env_open(&v, NULL, 0, 0);
  uvt_slurm_options_init(&o);
  o.command = "sleep 100";
  o.array = "0-5%2";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  {
    detailarg_t a = {&v, id, "4 pending, 2 running"};
    run_until(&v, detail_has, &a, 60000);
  }
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  wait_end(&v, id, 120000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  assert_non_null(strstr(d, "0 pending, 0 running, 0 completed, 0 failed, "
                            "6 cancelled"));
  /* Held back whole: all six pending in one record, then all cancelled. */
  assert_int_equal(start_cmd(&v, "sleep 300", gate), 0);
  snprintf(dep, sizeof(dep), "afterok:%s", gate);
  o.dependency = dep;
  o.array = "0-5";
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  {
    detailarg_t a = {&v, id, "6 pending, 0 running"};
    run_until(&v, detail_has, &a, 60000);
  }
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  wait_end(&v, id, 120000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_KILLED);
  assert_non_null(strstr(d, "0 pending, 0 running, 0 completed, 0 failed, "
                            "6 cancelled"));
  assert_int_equal(uvt_kill(v.f.reg, gate, NULL, "t", &kr), 0);
  wait_end(&v, gate, 120000);
  env_close(&v);
}

static void slurm_dependency(void **state) {
  env_t v;
  char a[UVT_ID_MAX], b[UVT_ID_MAX], c[UVT_ID_MAX], dep[128], file[4096],
      cmd[4200], acc[256] = "", d[200];
  uvt_slurm_options_t o;
  (void)state;
  case_path(file, sizeof(file), "chain");
  env_open(&v, NULL, 0, 0);
  uvt_slurm_options_init(&o);
  snprintf(cmd, sizeof(cmd), "sleep 1; echo a > %s", file);
  o.command = cmd;
  assert_int_equal(uvt_slurm_start(v.e, &o, a), 0);
  snprintf(dep, sizeof(dep), "afterok:%s", a);
  snprintf(cmd, sizeof(cmd), "echo b >> %s", file);
  o.dependency = dep;
  assert_int_equal(uvt_slurm_start(v.e, &o, b), 0);
  snprintf(dep, sizeof(dep), "afterok:%s:%s", a, b);
  snprintf(cmd, sizeof(cmd), "cat %s", file);
  assert_int_equal(uvt_slurm_start(v.e, &o, c), 0);
  wait_end(&v, c, 120000);
  read_into(&v, c, acc, sizeof(acc));
  assert_string_equal(acc, "a\nb\n");
  /* What is refused before anything is registered. */
  o.dependency = "afterok:slurm-999";
  assert_int_equal(uvt_slurm_start(v.e, &o, c), UVT_ENOTASK);
  o.dependency = "sometime:slurm-1";
  assert_int_equal(uvt_slurm_start(v.e, &o, c), UV_EINVAL);
  o.dependency = NULL;
  o.signal = "KILL@60"; /* only signals the wrapper passes on */
  assert_int_equal(uvt_slurm_start(v.e, &o, c), UV_EINVAL);
  o.signal = NULL;
  o.array = "1-2;rm";
  assert_int_equal(uvt_slurm_start(v.e, &o, c), UV_EINVAL);
  o.array = NULL;
  {
    const char *args[] = {"constraint=x", NULL};
    o.sbatch_args = args; /* none allowed by default */
    assert_int_equal(uvt_slurm_start(v.e, &o, c), UV_EINVAL);
  }
  (void)d;
  env_close(&v);
}

/* E-13: a GPU (the test cluster's fake gres) on two nodes. */
static void slurm_gres_nodes(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[1024] = "", d[200];
  uvt_slurm_options_t o;
  (void)state;
  env_open(&v, NULL, 0, 0);
  uvt_slurm_options_init(&o);
  o.command = "echo nodes=$SLURM_JOB_NUM_NODES tasks=$SLURM_NTASKS "
              "gpus=$SLURM_JOB_GPUS";
  o.gres = "gpu:1";
  o.nodes = 2;
  o.ntasks = 2;
  assert_int_equal(uvt_slurm_start(v.e, &o, id), 0);
  wait_end(&v, id, 120000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_COMPLETED);
  read_into(&v, id, acc, sizeof(acc));
  assert_non_null(strstr(acc, "nodes=2 tasks=2 gpus=0"));
  env_close(&v);
}

static int queue_empty(void *arg) {
  return sh("test -z \"$(squeue -h -j %u -t PD,R,S,CG 2>/dev/null)\"",
            *(unsigned *)arg) == 0;
}

/* An array a job starts dies with the job's kill. */
static void slurm_inner_array(void **state) {
  env_t v;
  char id[UVT_ID_MAX], acc[1024] = "", inner_path[4096], cmd[4300];
  uvt_kill_result_t kr;
  unsigned inner = 0;
  FILE *fp;
  (void)state;
  case_path(inner_path, sizeof(inner_path), "inner");
  env_open(&v, NULL, 0, 0);
  snprintf(cmd, sizeof(cmd),
           "sbatch --parsable --array=0-2 -o /dev/null --wrap 'sleep 300' "
           "> %s; echo ready; sleep 300",
           inner_path);
  assert_int_equal(start_cmd(&v, cmd, id), 0);
  wait_output(&v, id, acc, sizeof(acc), "ready\n");
  fp = fopen(inner_path, "r");
  assert_non_null(fp);
  assert_int_equal(fscanf(fp, "%u", &inner), 1);
  fclose(fp);
  assert_int_equal(uvt_kill(v.f.reg, id, NULL, "t", &kr), 0);
  wait_end(&v, id, 60000);
  /* Cancelled with it: its elements leave the queue (an array left alone
   * would run for 300 s). */
  run_until(&v, queue_empty, &inner, 60000);
  env_close(&v);
}

/* ---- E-14: outcomes from accounting once the controller forgot ------- */

/* The controller no longer holds `job` in any state (MinJobAge passed;
 * squeue's default view leaves ended jobs out, scontrol does not). */
static int job_forgotten(void *arg) {
  return sh("scontrol -o show job %u 2>&1 | grep -q 'Invalid job id'",
            *(uint32_t *)arg) == 0;
}

static int gone_all(void *arg) {
  uint32_t *jobs = arg;
  int i;
  for (i = 0; jobs[i] != 0; i++)
    if (!job_forgotten(&jobs[i]))
      return 0;
  return 1;
}

/* E-14: three jobs end while no server runs (the journal kept, the
 * engine detached): one cancelled by someone else (scancel), one that
 * exits 7 and one killed by a signal, both with the wrapper's exit-code
 * file gone.  The next server adopts them after the controller forgot
 * them: the job completion log (jobcomp/filetxt, read with sacct) gives
 * each its real outcome, mapped as a live state is. */
static void slurm_forgotten_acct(void **state) {
  env_t v;
  char journal[4096], gate[4096], cmd[4300], d[200], want[160];
  char ids[3][UVT_ID_MAX], keys[3][UVT__SLURM_KEY_MAX];
  uint32_t jobs[4] = {0, 0, 0, 0};
  idarg_t a;
  int i;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  case_path(gate, sizeof(gate), "gate");
  env_open(&v, journal, 1, 0);
  assert_int_equal(start_cmd(&v, "sleep 300", ids[0]), 0);
  snprintf(cmd, sizeof(cmd), "while [ ! -e %s ]; do sleep 0.05; done; exit 7",
           gate);
  assert_int_equal(start_cmd(&v, cmd, ids[1]), 0);
  snprintf(cmd, sizeof(cmd),
           "while [ ! -e %s ]; do sleep 0.05; done; kill -KILL $$", gate);
  assert_int_equal(start_cmd(&v, cmd, ids[2]), 0);
  for (i = 0; i < 3; i++) {
    a.v = &v;
    a.id = ids[i];
    run_until(&v, has_job, &a, 60000);
    assert_int_equal(uvt_slurm_job_id(v.f.reg, ids[i], NULL, &jobs[i]), 0);
    snprintf(keys[i], sizeof(keys[i]), "%s", key_of(&v, ids[i]));
  }
  /* The running job's wrapper is up (it writes the heartbeat). */
  run_until(&v, hb_exists, keys[0], 60000);
  env_close(&v); /* detached: the jobs run on, the journal keeps them */
  assert_int_equal(sh("scancel %u && touch %s", jobs[0], gate), 0);
  env_open(&v, NULL, 0, 0); /* a loop to wait on, no journal */
  run_until(&v, gone_all, jobs, 120000);
  env_close(&v);
  assert_int_equal(
      sh("rm -f %s/%s.rc %s/%s.rc", out_dir, keys[1], out_dir, keys[2]), 0);
  env_open(&v, journal, 0, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 3);
  for (i = 0; i < 3; i++) {
    wait_end(&v, ids[i], 60000);
    status_of(&v, ids[i], d, sizeof(d));
    print_message("%s (job %u): %s\n", ids[i], jobs[i], d);
  }
  assert_int_equal(status_of(&v, ids[0], d, sizeof(d)), UVT_KILLED);
  snprintf(want, sizeof(want), "slurm CANCELLED (job %u) by someone else",
           jobs[0]);
  assert_string_equal(d, want);
  assert_int_equal(status_of(&v, ids[1], d, sizeof(d)), UVT_COMPLETED);
  assert_string_equal(d, "exit code: 7");
  assert_int_equal(status_of(&v, ids[2], d, sizeof(d)), UVT_KILLED);
  assert_string_equal(d, "signal: SIGKILL");
  env_close(&v);
}

/* E-9, E-14: a journal names a job the controller forgot, and the
 * accounting record of that job id carries another name: not ours.  It
 * is dropped with a log line, neither adopted nor given that outcome. */
static void slurm_forgotten_foreign(void **state) {
  env_t v;
  char journal[4096], cmd[256], buf[64] = "";
  uvt_snapshot_t s;
  uint32_t foreign;
  FILE *fp;
  int warnings;
  (void)state;
  case_path(journal, sizeof(journal), "journal");
  snprintf(cmd, sizeof(cmd),
           "sbatch --parsable -J someone-elses -o /dev/null --wrap 'exit 3'");
  fp = popen(cmd, "r");
  assert_non_null(fp);
  if (fgets(buf, sizeof(buf), fp) == NULL)
    buf[0] = '\0';
  pclose(fp);
  foreign = (uint32_t)strtoul(buf, NULL, 10);
  assert_true(foreign > 0);
  env_open(&v, NULL, 0, 0);
  run_until(&v, job_forgotten, &foreign, 120000);
  env_close(&v);
  fp = fopen(journal, "w");
  assert_non_null(fp);
  fprintf(fp,
          "U1 J id=slurm-11 key=slurm-0badc0e1 job=%u out=0 err=0 uid=%u "
          "cluster=- limit=0 array=0\n",
          foreign, (unsigned)getuid());
  fclose(fp);
  env_open(&v, journal, 0, 0);
  warnings = v.f.warnings;
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0);
  assert_int_equal(uvt_get(v.f.reg, "slurm-11", NULL, &s), UVT_ENOTASK);
  assert_int_equal(v.f.warnings, warnings + 1);
  assert_non_null(strstr(v.f.last_warning, "dropped"));
  assert_non_null(strstr(v.f.last_warning, "someone-elses"));
  env_close(&v);
  /* The line is gone. */
  env_open(&v, journal, 0, 0);
  assert_int_equal(uvt_slurm_adopt_all(v.e, NULL), 0);
  env_close(&v);
}

/* ---- E-7: a node lost under a running job ------------------------------ */

static void slurm_lost_node(void **state) {
  env_t v;
  char id[UVT_ID_MAX], d[160];
  uint32_t job;
  (void)state;
  /* The "dead node" is played by freezing the job's cgroup v1 freezer. */
  if (access("/sys/fs/cgroup/freezer", W_OK) != 0) {
    print_message("no cgroup v1 freezer here: the lost node is not played\n");
    skip();
  }
  env_open(&v, NULL, 0, 3000);
  assert_int_equal(start_cmd(&v, "sleep 300", id), 0);
  run_until(&v, hb_exists, (void *)key_of(&v, id), 60000);
  assert_int_equal(uvt_slurm_job_id(v.f.reg, id, NULL, &job), 0);
  /* The node "dies": its slurmd is killed and the job's processes stop
   * (frozen: a machine that is gone runs nothing), so the controller still
   * holds the job RUNNING. */
  assert_int_equal(
      sh("n=$(squeue -h -j %u -o %%N); echo $n > %s/lost; "
         "kill -KILL $(cat %s/slurmd-$n.pid) && "
         "echo FROZEN > /sys/fs/cgroup/freezer/slurm_$n/uid_$(id -u)/"
         "job_%u/freezer.state",
         job, out_dir, cluster_dir, job),
      0);
  wait_end(&v, id, 60000);
  assert_int_equal(status_of(&v, id, d, sizeof(d)), UVT_FAILED);
  assert_true(strncmp(d, "lost (no heartbeat for ", 23) == 0);
  /* Bring the node back: thaw, restart its slurmd. */
  assert_int_equal(sh("n=$(cat %s/lost); echo THAWED > /sys/fs/cgroup/freezer/"
                      "slurm_$n/uid_$(id -u)/job_%u/freezer.state; "
                      "%s/scripts/slurm-cluster.sh up %s >/dev/null",
                      out_dir, job, getenv("UVT_SOURCE_ROOT"), cluster_dir),
                   0);
  env_close(&v);
}

/* E-3: a job's end is seen when its wrapper writes the exit-code file,
 * not at the engine's next poll: with a poll every ten minutes, a job
 * that runs `true` settles at once, through the polls the file's
 * appearance asks for.  Siblings: an exit code, an argv. */
static void slurm_end_seen_at_once(void **state) {
  env_t v;
  const char *const av[] = {"/bin/false", NULL};
  char ids[3][UVT_ID_MAX], detail[160], fifo[4096];
  uvt_slurm_options_t o;
  int k;
  (void)state;

  env_open_poll(&v, NULL, 0, 0, 600000);
  /* The engine made the FIFO the wrapper waits on, and the command holds
   * its write end (E-7, submit.c). */
  assert_int_equal(start_cmd(&v, "test -p /proc/$$/fd/8", ids[0]), 0);
  {
    int err;
    uvt__sjob_t *j = uvt__slurm_find(v.e, ids[0], NULL, &err);
    assert_non_null(j);
    snprintf(fifo, sizeof(fifo), "%s/%s.t", out_dir, j->key);
  }
  assert_int_equal(start_cmd(&v, "exit 4", ids[1]), 0);
  uvt_slurm_options_init(&o);
  o.argv = av;
  assert_int_equal(uvt_slurm_start(v.e, &o, ids[2]), 0);
  for (k = 0; k < 3; k++)
    wait_end(&v, ids[k], 60000);
  assert_int_equal(status_of(&v, ids[0], detail, sizeof(detail)),
                   UVT_COMPLETED);
  assert_string_equal(detail, "exit code: 0");
  /* Its end removed the FIFO (a reader of out_dir would block on it). */
  assert_int_equal(access(fifo, F_OK), -1);
  assert_int_equal(status_of(&v, ids[1], detail, sizeof(detail)),
                   UVT_COMPLETED);
  assert_string_equal(detail, "exit code: 4");
  assert_int_equal(status_of(&v, ids[2], detail, sizeof(detail)),
                   UVT_COMPLETED);
  assert_string_equal(detail, "exit code: 1");
  uv_mutex_lock(&v.e->mutex);
  assert_true(v.e->fast_polls > 0);
  uv_mutex_unlock(&v.e->mutex);
  env_close(&v);
}

/* E-13: option values checked before anything is registered.  A
 * warning signal by name in any case, with or without SIG, or by number
 * (as sbatch and task_kill take them); only signals the wrapper passes
 * on.  A comment is prose; the other sbatch_args values are plain. */
static void slurm_option_values(void **state) {
  static const char *const good[] = {"USR1@60",       "usr1@60", "SIGUSR2@1",
                                     "sigterm@65535", "10@60",   "15@5",
                                     "xcpu@30"};
  static const char *const bad[] = {
      "KILL@60", "9@60",       "0@60",     "65@60", "USR1",
      "USR1@0",  "USR1@65536", "USR1@60x", "@60",   "USR1@-1"};
  size_t i;
  int num;
  unsigned secs;
  (void)state;
  for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    if (uvt__slurm_signal_parse(good[i], &num, &secs) != 0)
      print_message("refused: %s\n", good[i]);
    assert_int_equal(uvt__slurm_signal_parse(good[i], &num, &secs), 0);
  }
  assert_int_equal(uvt__slurm_signal_parse("usr1@60", &num, &secs), 0);
  assert_int_equal(num, SIGUSR1);
  assert_int_equal(secs, 60);
  assert_int_equal(uvt__slurm_signal_parse("15@5", &num, &secs), 0);
  assert_int_equal(num, SIGTERM);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (uvt__slurm_signal_parse(bad[i], &num, &secs) != UV_EINVAL)
      print_message("taken: %s\n", bad[i]);
    assert_int_equal(uvt__slurm_signal_parse(bad[i], &num, &secs), UV_EINVAL);
  }
  assert_int_equal(uvt__sbatch_check("comment=hello world"), 0);
  assert_int_equal(uvt__sbatch_check("comment=it's \"quoted\" $x"), 0);
  assert_int_equal(uvt__sbatch_check("comment=line\nbreak"), UV_EINVAL);
  assert_int_equal(uvt__sbatch_check("comment="), UV_EINVAL);
  assert_int_equal(uvt__sbatch_check("constraint=a b"), UV_EINVAL);
  assert_int_equal(uvt__sbatch_check("constraint=a;b"), UV_EINVAL);
  assert_int_equal(uvt__sbatch_check("constraint=avx2"), 0);
  assert_int_equal(uvt__sbatch_check("nice=-5"), 0);
  assert_int_equal(uvt__sbatch_check("exclusive"), 0);
  assert_int_equal(uvt__sbatch_check("exclusive=1"), UV_EINVAL);
  assert_int_equal(uvt__sbatch_check("unknown=1"), UV_EINVAL);
}

/* The wrapper's script for `cmd` (an argv when NULL) written to
 * <dir>/wrapper.sh, its files under <dir>/job, waiting as it would with
 * `mode`: 'f' (the engine's FIFO <dir>/job.t is there), or without it as
 * bash 'p' (5.1 and later: wait -n -p), 'n' (4.3 to 5.0: wait -n) or ' '
 * (older: the beat's sleep alone). */
static void write_wrapper(const char *dir, const char *cmd, char mode) {
  const char *const av[] = {"/bin/true", NULL};
  uvt_slurm_options_t o;
  char base[128], script[128], fifo[128], *text, *n, *p;
  FILE *fp;
  snprintf(base, sizeof(base), "%s/job", dir);
  snprintf(script, sizeof(script), "%s/wrapper.sh", dir);
  snprintf(fifo, sizeof(fifo), "%s/job.t", dir);
  uvt_slurm_options_init(&o);
  if (cmd != NULL)
    o.command = cmd;
  else
    o.argv = av;
  text = uvt__slurm_wrapper(base, 1, 0, &o);
  assert_non_null(text);
  n = strstr(text, "&& uvt_wn=n\n");
  p = strstr(text, "&& uvt_wn=p\n");
  assert_non_null(n);
  assert_non_null(p);
  unlink(fifo);
  if (mode == 'f') {
    assert_int_equal(mkfifo(fifo, 0600), 0);
  } else {
    n[10] = mode == 'p' ? 'n' : mode;
    p[10] = mode;
  }
  fp = fopen(script, "w");
  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
  uvt__free(text);
}

#define WAIT_MODES 4
static const char wait_modes[WAIT_MODES] = {'f', 'p', 'n', ' '};

static const char *mode_name(char mode) {
  return mode == 'f'   ? "FIFO"
         : mode == 'p' ? "wait -n -p"
         : mode == 'n' ? "wait -n"
                       : "sleep only";
}

static pid_t spawn_wrapper(const char *dir) {
  char script[128], err[128];
  pid_t pid;
  snprintf(script, sizeof(script), "%s/wrapper.sh", dir);
  snprintf(err, sizeof(err), "%s/job.err", dir);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The job's stderr, as Slurm gives it: a file of its own. */
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0)
      _exit(126);
    close(fd);
    execl("/bin/bash", "bash", script, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Under this process as a subreaper: nothing the wrapper started is left,
 * alive or dead. */
static void assert_nothing_left(const char *what) {
  int status;
  pid_t left = waitpid(-1, &status, WNOHANG);
  if (left != -1)
    print_message("the wrapper left process %d behind (%s)\n", (int)left, what);
  assert_int_equal(left, -1);
  assert_int_equal(errno, ECHILD);
}

/* Wait until `path` exists (what the test waits for; 60 s is a fault). */
static void wait_file(const char *path) {
  uint64_t t0 = uv_hrtime();
  while (access(path, F_OK) != 0) {
    assert_true(uv_hrtime() - t0 < 60 * (uint64_t)1000000000);
    usleep(10000);
  }
}

static void wrapper_dir_remove_files(const char *dir) {
  static const char *const names[] = {
      "wrapper.sh", "job.hb", "job.sid", "job.rc", "job.t",
      "ready",      "saved",  "usr1",    "left",   "job.err"};
  char f[160];
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    snprintf(f, sizeof(f), "%s/%s", dir, names[i]);
    unlink(f);
  }
}

static void wrapper_dir_remove(const char *dir) {
  wrapper_dir_remove_files(dir);
  assert_int_equal(rmdir(dir), 0);
}

/* The first line of <dir>/job.rc, the wrapper's exit-code file. */
static void rc_line(const char *dir, char *line, size_t size) {
  char path[128];
  FILE *fp;
  snprintf(path, sizeof(path), "%s/job.rc", dir);
  fp = fopen(path, "r");
  assert_non_null(fp);
  assert_non_null(fgets(line, (int)size, fp));
  fclose(fp);
}

/* E-11: when the wrapper ends, nothing it started is left in the job:
 * its heartbeat's sleep has exited and been reaped.  Slurm ends a batch
 * step when its cgroup is empty and, with proctrack/cgroup, looks again
 * only a second later, so a heartbeat killed but not waited for held jobs
 * a second past their end.  The wrapper runs here under this process as
 * a subreaper: anything it left behind is re-parented to us.  And it
 * writes nothing of its own to the job's stderr (bash's "Killed
 * /bin/bash -c ..." note of a command killed by a signal reached the
 * user's .err, a fresh user's finding).  Siblings: a command that exits
 * 0, one that exits 3, ones that die of TERM, KILL (at once, and after a
 * moment) and SEGV (the wrapper raises each again), an argv; in each wait
 * mode. */
static void slurm_wrapper_leaves_nothing(void **state) {
  static const struct {
    const char *cmd; /* NULL: an argv */
    int code;        /* exit code, or -signal */
  } runs[] = {{"true", 0},
              {"exit 3", 3},
              {"kill -TERM $$", -SIGTERM},
              {"kill -KILL $$", -SIGKILL},
              {"sleep 0.2; kill -KILL $$", -SIGKILL},
              {"sleep 0.1; kill -SEGV $$", -SIGSEGV},
              /* 128 + SIGTSTP and + SIGTTOU: exit codes, not signals to
               * raise (raised, they stopped the wrapper for good). */
              {"exit 148", 148},
              {"exit 150", 150},
              {NULL, 0}};
  char dir[] = "/tmp/uvt-wrap-XXXXXX";
  char rc[96], err[96], line[64], what[96];
  size_t k;
  int m;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(rc, sizeof(rc), "%s/job.rc", dir);
  snprintf(err, sizeof(err), "%s/job.err", dir);
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  for (m = 0; m < WAIT_MODES; m++) {
    for (k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
      pid_t pid;
      int status, code = runs[k].code;
      struct stat st;
      if (runs[k].cmd == NULL)
        snprintf(what, sizeof(what), "argv, %s", mode_name(wait_modes[m]));
      else
        snprintf(what, sizeof(what), "%s, %s", runs[k].cmd,
                 mode_name(wait_modes[m]));
      write_wrapper(dir, runs[k].cmd, wait_modes[m]);
      pid = spawn_wrapper(dir);
      assert_int_equal(waitpid(pid, &status, 0), pid);
      if (code >= 0)
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == code);
      else
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == -code);
      /* It wrote its status, one whole line (E-14). */
      rc_line(dir, line, sizeof(line));
      assert_int_equal(atoi(line), code >= 0 ? code : 128 - code);
      assert_non_null(strchr(line, '\n'));
      assert_int_equal(stat(err, &st), 0);
      if (st.st_size != 0)
        print_message("the wrapper wrote to stderr (%s)\n", what);
      assert_int_equal(st.st_size, 0);
      assert_nothing_left(what);
      unlink(rc);
    }
  }
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  wrapper_dir_remove(dir);
}

/* E-11: the host's environment cannot break the wrapper: bash options
 * (SHELLOPTS errexit and nounset), exported functions named like the
 * builtins it uses (kill, wait, read, printf), a PATH without sleep.  The
 * command still gets its status recorded, nothing is left, in each wait
 * mode (a fresh attack on the wrapper: errexit ended it at once with the
 * command still running; a `kill` function stopped its forwarding). */
static void slurm_wrapper_hostile_env(void **state) {
  char *const env[] = {"PATH=/nonexistent",
                       "SHELLOPTS=errexit:nounset",
                       "BASH_FUNC_kill%%=() { :; }",
                       "BASH_FUNC_wait%%=() { return 0; }",
                       "BASH_FUNC_read%%=() { return 1; }",
                       "BASH_FUNC_printf%%=() { :; }",
                       NULL};
  char dir[] = "/tmp/uvt-wrap-XXXXXX";
  char script[128], rc[128], line[64];
  int m;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(script, sizeof(script), "%s/wrapper.sh", dir);
  snprintf(rc, sizeof(rc), "%s/job.rc", dir);
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  for (m = 0; m < WAIT_MODES; m++) {
    pid_t pid;
    int status;
    write_wrapper(dir, "/bin/sleep 0.3; exit 4", wait_modes[m]);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      execle("/bin/bash", "bash", script, (char *)NULL, env);
      _exit(127);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 4))
      print_message("status %#x (%s)\n", status, mode_name(wait_modes[m]));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 4);
    rc_line(dir, line, sizeof(line));
    assert_string_equal(line, "4 - -\n");
    assert_nothing_left(mode_name(wait_modes[m]));
    unlink(rc);
  }
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  wrapper_dir_remove(dir);
}

/* E-7, S-10: the command (any process of the host's user) may replace
 * <key>.t once the wrapper holds it.  Here it puts a link to a file that
 * does not exist in its place, then closes fd 8: the wrapper goes on
 * through the descriptor it holds and never opens the name again, so the
 * link's target is not made (the wrapper re-opened <key>.t by name, and
 * `<>` made the file). */
static void slurm_wrapper_fifo_swapped(void **state) {
  char dir[] = "/tmp/uvt-wrap-XXXXXX";
  char cmd[512], victim[128];
  pid_t pid;
  int status;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(victim, sizeof(victim), "%s/victim", dir);
  snprintf(cmd, sizeof(cmd),
           "rm -f %s/job.t; ln -s %s %s/job.t; exec 8>&-; /bin/sleep 0.3", dir,
           victim, dir);
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  write_wrapper(dir, cmd, 'f');
  pid = spawn_wrapper(dir);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(access(victim, F_OK), -1);
  assert_nothing_left("FIFO swapped");
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  unlink(victim);
  wrapper_dir_remove(dir);
}

/* E-7: while the command runs, the wrapper touches <key>.hb every beat
 * (1 s here), in every wait mode, and in FIFO mode also when the command
 * closes the FIFO's write end (fd 8) at once, so the wrapper goes on with
 * its ticks.  The command itself waits until it has seen the file's time
 * change twice, and exits 1 if that takes 30 s. */
static void slurm_wrapper_beats(void **state) {
  char dir[] = "/tmp/uvt-wrap-XXXXXX";
  char cmd[512];
  int m;
  (void)state;

  assert_non_null(mkdtemp(dir));
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  for (m = 0; m <= WAIT_MODES; m++) {
    char mode = m < WAIT_MODES ? wait_modes[m] : 'f';
    pid_t pid;
    int status;
    snprintf(cmd, sizeof(cmd),
             "%sh=%s/job.hb; a=$(stat -c %%y \"$h\"); n=0; "
             "for i in $(seq 300); do b=$(stat -c %%y \"$h\"); "
             "[ \"$b\" != \"$a\" ] && n=$((n + 1)) && a=$b; "
             "[ $n -ge 2 ] && exit 0; sleep 0.1; done; exit 1",
             m < WAIT_MODES ? "" : "exec 8>&-; ", dir);
    write_wrapper(dir, cmd, mode);
    pid = spawn_wrapper(dir);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      print_message("no two beats seen (%s%s)\n", mode_name(mode),
                    m < WAIT_MODES ? "" : ", fd 8 closed");
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_nothing_left(mode_name(mode));
  }
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  wrapper_dir_remove(dir);
}

/* E-11: a command that leaves a child running (which holds the FIFO's
 * write end in FIFO mode, and which Slurm kills when the batch shell
 * ends) does not hold the wrapper: it ends with the command, the child
 * still alive.  In FIFO mode the command checks that it got fd 8, the
 * FIFO (exit 3 if not). */
static void slurm_wrapper_leftover(void **state) {
  char dir[] = "/tmp/uvt-wrap-XXXXXX";
  char cmd[512], path[128];
  int m;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/left", dir);
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  for (m = 0; m < WAIT_MODES; m++) {
    pid_t pid, left;
    int status;
    FILE *fp;
    snprintf(cmd, sizeof(cmd),
             "%ssleep 600 </dev/null >/dev/null 2>&1 & echo $! >%s; exit 0",
             wait_modes[m] == 'f' ? "[ -p /proc/$$/fd/8 ] || exit 3; " : "",
             path);
    write_wrapper(dir, cmd, wait_modes[m]);
    pid = spawn_wrapper(dir);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_int_equal(fscanf(fp, "%d", &left), 1);
    fclose(fp);
    /* Still running when the wrapper ended: nobody waited for it. */
    assert_int_equal(kill(left, 0), 0);
    assert_int_equal(kill(left, SIGKILL), 0);
    assert_int_equal(waitpid(left, &status, 0), left);
    assert_nothing_left(mode_name(wait_modes[m]));
    unlink(path);
  }
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  wrapper_dir_remove(dir);
}

/* E-11: signals Slurm sends the batch shell reach the command's process
 * group, and only TERM (or the first) is the outcome: a USR1 (a warning
 * signal) runs the command's handler and the wrapper goes on waiting; a
 * TERM runs its checkpoint handler, which exits 0; the exit-code file
 * says "0 TERM <s>".  In each wait mode. */
static void slurm_wrapper_signals(void **state) {
  char dir[] = "/tmp/uvt-wrap-XXXXXX";
  char cmd[512], path[128], line[64];
  int m;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(cmd, sizeof(cmd),
           "d=%s; trap 'echo saved >$d/saved; exit 0' TERM; "
           "trap 'echo usr1 >$d/usr1' USR1; : >$d/ready; "
           "while :; do sleep 0.05; done",
           dir);
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  for (m = 0; m < WAIT_MODES; m++) {
    pid_t pid;
    int status;
    write_wrapper(dir, cmd, wait_modes[m]);
    pid = spawn_wrapper(dir);
    snprintf(path, sizeof(path), "%s/ready", dir);
    wait_file(path);
    assert_int_equal(kill(pid, SIGUSR1), 0);
    snprintf(path, sizeof(path), "%s/usr1", dir);
    wait_file(path);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(path, sizeof(path), "%s/saved", dir);
    assert_int_equal(access(path, F_OK), 0);
    rc_line(dir, line, sizeof(line));
    assert_true(strncmp(line, "0 TERM ", 7) == 0);
    assert_nothing_left(mode_name(wait_modes[m]));
    wrapper_dir_remove_files(dir);
  }
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  wrapper_dir_remove(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(slurm_start_and_output, setup),
      cmocka_unit_test_setup(slurm_stream, setup),
      cmocka_unit_test_setup(slurm_output_cap, setup),
      cmocka_unit_test_setup(slurm_start_refused, setup),
      cmocka_unit_test_setup(slurm_kill_all, setup),
      cmocka_unit_test_setup(slurm_kill_early, setup),
      cmocka_unit_test(slurm_outcome_map),
      cmocka_unit_test(slurm_acct_map),
      cmocka_unit_test(slurm_option_values),
      cmocka_unit_test(slurm_wrapper_leaves_nothing),
      cmocka_unit_test(slurm_wrapper_beats),
      cmocka_unit_test(slurm_wrapper_leftover),
      cmocka_unit_test(slurm_wrapper_hostile_env),
      cmocka_unit_test(slurm_wrapper_fifo_swapped),
      cmocka_unit_test(slurm_wrapper_signals),
      cmocka_unit_test_setup(slurm_outcomes, setup),
      cmocka_unit_test_setup(slurm_fifty, setup),
      cmocka_unit_test_setup(slurm_close_cancels, setup),
      cmocka_unit_test_setup(slurm_close_detached, setup),
      cmocka_unit_test_setup(slurm_readopt, setup),
      cmocka_unit_test_setup(slurm_lost_node, setup),
      cmocka_unit_test_setup(slurm_kill_checkpoint, setup),
      cmocka_unit_test_setup(slurm_journal_foreign, setup),
      cmocka_unit_test_setup(slurm_journal_compact, setup),
      cmocka_unit_test_setup(slurm_ids_fresh, setup),
      cmocka_unit_test_setup(slurm_journal_exclusive, setup),
      cmocka_unit_test_setup(slurm_env_scrubbed, setup),
      cmocka_unit_test_setup(slurm_submit_answers, setup),
      cmocka_unit_test_setup(slurm_array, setup),
      cmocka_unit_test_setup(slurm_array_counts, setup),
      cmocka_unit_test_setup(slurm_dependency, setup),
      cmocka_unit_test_setup(slurm_gres_nodes, setup),
      cmocka_unit_test_setup(slurm_inner_array, setup),
      cmocka_unit_test_setup(slurm_timeout_checkpoint, setup),
      cmocka_unit_test_setup(slurm_controller_down, setup),
      cmocka_unit_test_setup(slurm_adopt_silent, setup),
      cmocka_unit_test_setup(slurm_forgotten_acct, setup),
      cmocka_unit_test_setup(slurm_forgotten_foreign, setup),
      cmocka_unit_test_setup(slurm_end_seen_at_once, setup),
  };
  cluster_dir = getenv("UVT_SLURM_DIR");
  if (cluster_dir != NULL && getenv("SLURM_CONF") != NULL) {
    snprintf(out_dir, sizeof(out_dir), "%s/out-%d", cluster_dir, (int)getpid());
    mkdir(out_dir, 0700);
  } else {
    cluster_dir = NULL;
  }
  /* UVT_SLURM_ONLY=pattern runs only the matching tests. */
  if (getenv("UVT_SLURM_ONLY") != NULL)
    cmocka_set_test_filter(getenv("UVT_SLURM_ONLY"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
