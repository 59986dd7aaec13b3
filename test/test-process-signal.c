/* Chosen signals for a live task (P-KILL-8). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "test-process-util.h"

/* ---- marker files a task's traps append to ---------------------------- */

typedef struct {
  char dir[64];
  char file[96];
} marker_t;

static void marker_init(marker_t *m) {
  snprintf(m->dir, sizeof(m->dir), "/tmp/uvt-sig-XXXXXX");
  assert_non_null(mkdtemp(m->dir));
  snprintf(m->file, sizeof(m->file), "%s/m", m->dir);
}

static void marker_cleanup(marker_t *m) {
  unlink(m->file);
  rmdir(m->dir);
}

/* Lines of the marker file equal to `word`. */
static int marker_count(const marker_t *m, const char *word) {
  char line[128];
  size_t n = strlen(word);
  int count = 0;
  FILE *fp = fopen(m->file, "r");

  if (fp == NULL)
    return 0;
  while (fgets(line, sizeof(line), fp) != NULL)
    if (strncmp(line, word, n) == 0 && line[n] == '\n')
      count++;
  fclose(fp);
  return count;
}

typedef struct {
  const marker_t *m;
  const char *word;
  int n;
} marker_wait_t;

static int marker_has(void *arg) {
  marker_wait_t *w = arg;
  return marker_count(w->m, w->word) >= w->n;
}

/* Run the loop until `word` is in the marker file n times (at most 20 s). */
static int marker_wait(fixture_t *f, const marker_t *m, const char *word,
                       int n) {
  marker_wait_t w = {m, word, n};
  return run_until(f, marker_has, &w, 20000);
}

/* The same without turning the loop: nothing the library deferred to a
 * later loop turn (its batched sweep) happens meanwhile. */
static int marker_wait_no_loop(const marker_t *m, const char *word, int n) {
  uint64_t end = now_ms() + 20000;
  struct timespec ts = {0, 1000000};

  while (marker_count(m, word) < n) {
    if (now_ms() > end)
      return 0;
    nanosleep(&ts, NULL);
  }
  return 1;
}

/* ---- trap scripts ----------------------------------------------------- */

/* Start the shell script `fmt` (printf-style: the marker file goes in
 * with %s) with test_opts() and, unless grace_ms is 0, that grace; return
 * its session id.  With `sb`, also wait until the script printed "up"
 * (read into sb): its traps are set by then. */
static pid_t start_trap(fixture_t *f, uint64_t grace_ms, sbuf_t *sb,
                        char id[UVT_ID_MAX], const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static pid_t start_trap(fixture_t *f, uint64_t grace_ms, sbuf_t *sb,
                        char id[UVT_ID_MAX], const char *fmt, ...) {
  uvt_process_options_t o;
  char cmd[512];
  va_list ap;
  pid_t sid;

  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  test_opts(&o);
  if (grace_ms > 0)
    o.grace_ms = grace_ms;
  o.command = cmd;
  assert_int_equal(uvt_process_start(f->reg, &o, id), 0);
  sid = task_pid(f, id, NULL);
  if (sb != NULL)
    read_until_has(f, id, NULL, sb, "up\n");
  return sid;
}

/* ---- process states --------------------------------------------------- */

typedef struct {
  pid_t sid;
  int live;
  int stopped;
} stopped_count_t;

static int count_stopped(const pstat_t *st, void *arg) {
  stopped_count_t *c = arg;
  if (st->sid != c->sid || st->state == 'Z' || st->state == 'X')
    return 0;
  c->live++;
  c->stopped += st->state == 'T';
  return 0;
}

/* Members of session sid stopped by a signal (state T). */
static int session_stopped(pid_t sid) {
  stopped_count_t c = {sid, 0, 0};
  each_process(count_stopped, &c);
  return c.stopped;
}

static int stopped_in_group(const pstat_t *st, void *arg) {
  return st->pgrp == *(pid_t *)arg && st->state == 'T';
}

/* Group `*(pid_t *)arg` has a stopped member.  Not always its first: a
 * shell stopped while it vforks waits in the kernel (state D) for its
 * child, which the stop signal reached before its exec. */
static int group_stopped(void *arg) {
  int found = 0;
  pid_t pgrp = *(pid_t *)arg;
  DIR *d = opendir("/proc");
  struct dirent *de;
  pstat_t st;

  assert_non_null(d);
  while (!found && (de = readdir(d)) != NULL)
    if (de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
        read_stat(atoi(de->d_name), &st) == 0)
      found = stopped_in_group(&st, &pgrp);
  closedir(d);
  return found;
}

/* P-KILL-8: SIGINT reaches a test runner that prints a summary on SIGINT
 * and exits; the task ends by its own exit, not by an escalation. */
static void test_sigint_summary(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  assert_int_equal(start_sh(&f, &a,
                            "trap 'echo summary: 3 passed, interrupted; "
                            "exit 3' INT; echo running; "
                            "while :; do sleep 0.05; done",
                            id),
                   0);
  sid = task_pid(&f, id, &a);
  read_until_has(&f, id, &a, &sb, "running\n");
  assert_int_equal(uvt_process_signal(f.reg, id, &a, SIGINT), 0);
  read_until_has(&f, id, &a, &sb, "summary: 3 passed, interrupted\n");
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 3");
  assert_null(w.snap.kill_reason);
  assert_true(session_gone(&f, sid, 3000));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-KILL-8: SIGUSR1 and SIGHUP are delivered and handled; the task stays
 * live after each (no escalation), a later kill still stops it. */
static void test_other_signals(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  uvt_snapshot_t s;
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL,
                            "trap 'echo got usr1' USR1; trap 'echo got hup' "
                            "HUP; echo up; while :; do sleep 0.05; done",
                            id),
                   0);
  task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "up\n");
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR1), 0);
  read_until_has(&f, id, NULL, &sb, "got usr1\n");
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGHUP), 0);
  read_until_has(&f, id, NULL, &sb, "got hup\n");
  /* Stopped and continued: still running. */
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGSTOP), 0);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGCONT), 0);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGWINCH), 0);
  run_for(&f, 50);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  /* An ended task is not signalled (P-KILL-3). */
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGINT), UV_ESRCH);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-KILL-8: a signal outside the list, the fence, and the usual errors. */
static void test_refused(void **state) {
  fixture_t f;
  uvt_agent_t a, b;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char fid[UVT_ID_MAX];
  fake_t fk;
  uvt_snapshot_t s;
  static const int refused[] = {SIGSEGV, SIGALRM, SIGPIPE, SIGCHLD, SIGABRT,
                                SIGTSTP, 0,       -1,      999};
  size_t i;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  agent_setup(&f, &b, "B", "S2");
  test_opts(&o);
  o.owner = &a;
  assert_int_equal(
      start_helper(&f, &a, &o, "--helper=sleep", "10000", NULL, id), 0);
  task_pid(&f, id, &a);
  for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
    assert_int_equal(uvt_process_signal(f.reg, id, &a, refused[i]), UV_EINVAL);
#ifdef SIGRTMIN
  assert_int_equal(uvt_process_signal(f.reg, id, &a, SIGRTMIN), UV_EINVAL);
#endif
  assert_int_equal(uvt_process_signal(f.reg, id, &b, SIGINT), UVT_EFOREIGN);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGINT), UVT_EFOREIGN);
  assert_int_equal(uvt_process_signal(f.reg, "bash-99", &a, SIGINT),
                   UVT_ENOTASK);
  assert_int_equal(uvt_process_signal(NULL, id, &a, SIGINT), UV_EINVAL);
  assert_int_equal(uvt_process_signal(f.reg, NULL, &a, SIGINT), UV_EINVAL);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, NULL, NULL, fid), 0);
  assert_int_equal(uvt_process_signal(f.reg, fid, NULL, SIGINT), UV_EINVAL);
  /* Nothing refused reached the task. */
  assert_int_equal(uvt_get(f.reg, id, &a, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  uvt_snapshot_cleanup(&s);
  fixture_close(&f);
}

/* P-KILL-8: one chosen signal reaches each process once.  The call
 * signalled the leader's group at once, then the batched sweep of the
 * session signalled the same group again: one SIGUSR1 ran the trap twice.
 * The trap's run is awaited without turning the loop, so that a second
 * delivery cannot fold into the first; a SIGUSR2 afterwards closes each
 * round.  Three rounds, three runs. */
static void test_signal_once(void **state) {
  fixture_t f;
  marker_t m;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  int i;
  (void)state;

  marker_init(&m);
  fixture_init(&f, NULL);
  start_trap(&f, 0, &sb, id,
             "trap 'echo usr1 >> %s' USR1; trap 'echo usr2 >> %s' USR2; "
             "echo up; while :; do sleep 0.05; done",
             m.file, m.file);
  for (i = 1; i <= 3; i++) {
    assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR1), 0);
    assert_true(marker_wait_no_loop(&m, "usr1", i));
    uv_run(&f.loop, UV_RUN_NOWAIT); /* the turn a batched sweep runs in */
    assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR2), 0);
    assert_true(marker_wait(&f, &m, "usr2", i));
    assert_int_equal(marker_count(&m, "usr1"), i);
    assert_int_equal(marker_count(&m, "usr2"), i);
  }
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 20000, NULL);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  marker_cleanup(&m);
}

typedef struct {
  pid_t sid;
  pid_t job; /* a group of the session other than the leader's */
} job_find_t;

static int find_job(const pstat_t *st, void *arg) {
  job_find_t *j = arg;
  if (st->sid == j->sid && st->pgrp != j->sid && st->state != 'Z') {
    j->job = st->pgrp;
    return 1;
  }
  return 0;
}

static int job_found(void *arg) {
  job_find_t *j = arg;
  each_process(find_job, j);
  return j->job > 0;
}

static int none_stopped(void *arg) {
  return session_stopped(*(pid_t *)arg) == 0;
}

/* P-KILL-8: SIGSTOP then SIGCONT in the same loop turn leave every
 * process running, the leader's group and a job in a group of its own
 * (made by perl's setpgrp) alike: a second request while one was waiting
 * for the sweep was folded into the first, so the sweep sent SIGSTOP after the
 * SIGCONT and the task stayed stopped.  A SIGUSR2 trap proves the leader runs.
 */
static void test_stop_cont_back_to_back(void **state) {
  fixture_t f;
  marker_t m;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  job_find_t job;
  (void)state;

  marker_init(&m);
  fixture_init(&f, NULL);
  sid = start_trap(&f, 0, &sb, id,
                   "trap 'echo usr2 >> %s' USR2; "
                   "perl -e 'setpgrp(0, 0); exec @ARGV' sleep 1000 & "
                   "echo up; while :; do sleep 0.05; done",
                   m.file);
  assert_true(session_has(&f, sid, "sleep 1000", 1));
  job.sid = sid;
  job.job = 0;
  assert_true(job_found(&job)); /* the sleep, in a group of its own */
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGSTOP), 0);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGCONT), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR2), 0);
  assert_true(marker_wait(&f, &m, "usr2", 1));
  assert_true(run_until(&f, none_stopped, &sid, 10000));
  /* Stopped for good, then continued: running again. */
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGSTOP), 0);
  assert_true(run_until(&f, group_stopped, &sid, 10000));
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGCONT), 0);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR2), 0);
  assert_true(marker_wait(&f, &m, "usr2", 2));
  assert_true(run_until(&f, none_stopped, &sid, 10000));
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_true(session_gone(&f, sid, 10000));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  marker_cleanup(&m);
}

/* P-KILL-1, P-KILL-8: a kill's SIGTERM reaches each process once too (the
 * sweep sent the leader's group a second one): a TERM trap that does not
 * exit runs once; a SIGUSR2 after the sweep's turn closes the count, and
 * the grace's SIGKILL ends the task. */
static void test_kill_term_once(void **state) {
  fixture_t f;
  marker_t m;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  (void)state;

  marker_init(&m);
  fixture_init(&f, NULL);
  sid = start_trap(&f, 60000, &sb, id,
                   "trap 'echo term >> %s' TERM; trap 'echo usr2 >> %s' USR2; "
                   "echo up; while :; do sleep 0.05; done",
                   m.file, m.file);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_true(marker_wait_no_loop(&m, "term", 1));
  uv_run(&f.loop, UV_RUN_NOWAIT);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR2), 0);
  assert_true(marker_wait(&f, &m, "usr2", 1));
  assert_int_equal(marker_count(&m, "term"), 1);
  /* "Stop now": SIGKILL without waiting for the grace. */
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_true(session_gone(&f, sid, 10000));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  marker_cleanup(&m);
}

/* How the task is stopped before its kill. */
enum { BY_SIGSTOP, BY_SIGSTOP_NO_WAIT, JOB_BY_SIGTSTP, JOB_BY_SIGTTIN };

/* P-KILL-1, P-KILL-8: a kill of a stopped task lets it act on SIGTERM at
 * once (SIGCONT follows the SIGTERM): its trap runs and it exits long
 * before the grace, instead of sitting stopped until SIGKILL.  The
 * leader's group is stopped by a chosen SIGSTOP (waited for, or killed in
 * the same loop turn); SIGTSTP and SIGTTIN stop only a job in a group of
 * its own (the kernel drops them for the leader's group, orphaned), which
 * the batched sweep reaches; the leader waits for the job on SIGTERM (a
 * job whose group its death orphans would get SIGHUP from the kernel). */
static void kill_stopped(int how) {
  fixture_t f;
  marker_t m;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  pid_t stopped;
  job_find_t job;
  int in_job = how == JOB_BY_SIGTSTP || how == JOB_BY_SIGTTIN;

  marker_init(&m);
  fixture_init(&f, NULL);
  /* The grace: far beyond the waits below. */
  if (in_job)
    sid = start_trap(
        &f, 60000, &sb, id,
        "perl -e 'setpgrp(0, 0); exec @ARGV' sh -c 'trap \"echo term >> "
        "%s; exit 7\" TERM; "
        "echo up; while :; do sleep 0.05; done' & job=$!; "
        "trap 'wait $job; exit 3' TERM; while :; do sleep 0.05; done",
        m.file);
  else
    sid = start_trap(&f, 60000, &sb, id,
                     "trap 'echo term >> %s; exit 7' TERM; echo up; "
                     "while :; do sleep 0.05; done",
                     m.file);
  stopped = sid;
  if (in_job) {
    job.sid = sid;
    job.job = 0;
    assert_true(run_until(&f, job_found, &job, 10000));
    stopped = job.job;
    assert_int_equal(kill(-job.job, how == JOB_BY_SIGTSTP ? SIGTSTP : SIGTTIN),
                     0);
  } else {
    assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGSTOP), 0);
  }
  if (how != BY_SIGSTOP_NO_WAIT)
    assert_true(run_until(&f, group_stopped, &stopped, 10000));
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_true(marker_wait(&f, &m, "term", 1));
  wait_task(&f, &w, id, 20000, NULL);
  if (in_job)
    assert_int_equal(w.snap.status, UVT_KILLED);
  else
    assert_outcome(&w.snap, UVT_KILLED, "exit code: 7 after kill request");
  assert_true(session_gone(&f, sid, 10000));
  assert_int_equal(marker_count(&m, "term"), 1);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  marker_cleanup(&m);
}

static void test_kill_stopped(void **state) {
  (void)state;
  kill_stopped(BY_SIGSTOP);
}

static void test_kill_right_after_stop(void **state) {
  (void)state;
  kill_stopped(BY_SIGSTOP_NO_WAIT);
}

static void test_kill_tstp_stopped(void **state) {
  (void)state;
  kill_stopped(JOB_BY_SIGTSTP);
}

static void test_kill_ttin_stopped(void **state) {
  (void)state;
  kill_stopped(JOB_BY_SIGTTIN);
}

/* P-KILL-8: a chosen SIGTERM to a stopped task is acted on as well: the
 * trap runs and the task ends by its own exit, no kill involved. */
static void test_sigterm_stopped(void **state) {
  fixture_t f;
  marker_t m;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  (void)state;

  marker_init(&m);
  fixture_init(&f, NULL);
  sid = start_trap(&f, 0, &sb, id,
                   "trap 'echo term >> %s; exit 7' TERM; echo up; "
                   "while :; do sleep 0.05; done",
                   m.file);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGSTOP), 0);
  assert_true(run_until(&f, group_stopped, &sid, 10000));
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGTERM), 0);
  assert_true(marker_wait(&f, &m, "term", 1));
  wait_task(&f, &w, id, 20000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 7");
  assert_true(session_gone(&f, sid, 10000));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  marker_cleanup(&m);
}

static int one_stopped(void *arg) {
  return session_stopped(*(pid_t *)arg) == 1;
}

/* P-KILL-6, P-KILL-8: a process the ended task left stopped (its leader
 * reaped) runs its SIGTERM trap when the ended task is killed, instead of
 * waiting stopped for the grace's SIGKILL: the sweep that reaches it sends
 * SIGCONT after SIGTERM too. */
static void test_kill_stopped_leftover(void **state) {
  fixture_t f;
  marker_t m;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  pid_t sid;
  (void)state;

  marker_init(&m);
  fixture_init(&f, NULL);
  sid =
      start_trap(&f, 60000, NULL, id,
                 "sh -c 'trap \"echo term >> %s; exit 0\" TERM; kill -STOP $$; "
                 "while :; do sleep 0.05; done' & echo started",
                 m.file);
  wait_task(&f, &w, id, 20000, NULL);
  assert_int_equal(w.snap.status, UVT_COMPLETED);
  wait_end(&w);
  assert_true(run_until(&f, one_stopped, &sid, 10000));
  /* Its leader reaped, the task takes no chosen signal (P-KILL-3): the
   * number may be reused; only a kill reaches what it left. */
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGCONT), UV_ESRCH);
  assert_int_equal(session_stopped(sid), 1);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_true(marker_wait(&f, &m, "term", 1));
  assert_true(session_gone(&f, sid, 10000));
  fixture_close(&f);
  marker_cleanup(&m);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_sigint_summary),
      T(test_other_signals),
      T(test_refused),
      T(test_signal_once),
      T(test_stop_cont_back_to_back),
      T(test_kill_term_once),
      T(test_kill_stopped),
      T(test_kill_right_after_stop),
      T(test_kill_tstp_stopped),
      T(test_kill_ttin_stopped),
      T(test_sigterm_stopped),
      T(test_kill_stopped_leftover),
  };
  return PROCESS_TESTS("process-signal", tests);
}
