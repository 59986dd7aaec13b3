/* Kills that end with nothing of the task left (P-KILL-7): a member that
 * ignores SIGTERM and outlives its leader, a fork bomb, and many kills
 * right after the start, through a kill, the runtime limit and
 * disposal. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-process-util.h"

/* A session to stop by force whatever happens to the test (the fork
 * bomb's), 0 when none. */
static pid_t doomed_sid;

typedef struct {
  pid_t sid;
  int n;
} sid_kill_t;

static int kill_member(const pstat_t *st, void *arg) {
  sid_kill_t *k = arg;
  if (st->sid == k->sid && st->state != 'Z' && st->state != 'X') {
    kill(st->pid, SIGKILL);
    k->n++;
  }
  return 0;
}

/* SIGKILL every process of session `sid` until none is left (the test's
 * own safety net, not the library's work). */
static void session_kill_all(pid_t sid) {
  sid_kill_t k;
  int rounds;

  for (rounds = 0; rounds < 1000; rounds++) {
    k.sid = sid;
    k.n = 0;
    each_process(kill_member, &k);
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    if (k.n == 0)
      return;
    usleep(1000);
  }
}

static int teardown_doomed(void **state) {
  if (doomed_sid > 0)
    session_kill_all(doomed_sid);
  doomed_sid = 0;
  return teardown_children(state);
}

/* The case of the issue: a background member that ignores SIGTERM, and a
 * foreground `sleep` that dies with the leader. */
#define TERM_IGNORER                                                           \
  "bash -c \"trap '' TERM; echo ready; exec sleep 777\" & sleep 778"

/* P-KILL-7: a kill whose leader dies of SIGTERM still SIGKILLs what is
 * left of the session after the grace, and settles `killed` only once
 * nothing is left (seen failing before the fix: the task settled at once
 * with `sleep 777` running). */
static void test_kill_term_ignorer(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL, TERM_IGNORER, id), 0);
  sid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  assert_true(session_has(&f, sid, "sleep 777", 1));
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  wait_task(&f, &w, id, 10000, NULL);
  /* Nothing is left when the task settles, not some time later. */
  assert_int_equal(session_live(sid, NULL), 0);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  /* Not before the grace (the ignorer needed SIGKILL). */
  assert_true(w.at_ms - t0 >= 190);
  print_message("kill: TERM ignorer quiet %llu ms after the kill (grace "
                "200 ms)\n",
                (unsigned long long)(w.at_ms - t0));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-KILL-7, P-LIMIT-1: the same through the runtime limit. */
static void test_runtime_term_ignorer(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = TERM_IGNORER;
  o.max_runtime_ms = 400;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 10000, NULL);
  assert_int_equal(session_live(sid, NULL), 0);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_non_null(strstr(w.snap.detail, "timed out after"));
  wait_end(&w);
  fixture_close(&f);
}

/* P-KILL-7, P-KILL-4: disposal of the owner of a live task, and registry
 * close: nothing of the session is left when the callback runs. */
static void test_dispose_term_ignorer(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  dispose_t d;
  sbuf_t sb = {0};
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  memset(&d, 0, sizeof(d));
  a.data = &d;
  assert_int_equal(start_sh(&f, &a, TERM_IGNORER, id), 0);
  sid = task_pid(&f, id, &a);
  d.pgid = sid;
  read_until_has(&f, id, &a, &sb, "ready\n");
  assert_true(session_has(&f, sid, "sleep 777", 1));
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  fixture_run_until(&f, disposed, &d);
  assert_int_equal(d.calls, 1);
  assert_int_equal(session_live(sid, NULL), 0);
  sb_free(&sb);

  /* Registry close. */
  assert_int_equal(start_sh(&f, NULL, TERM_IGNORER, id), 0);
  sid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  assert_true(session_has(&f, sid, "sleep 777", 1));
  fixture_close(&f);
  assert_int_equal(session_live(sid, NULL), 0);
  sb_free(&sb);
}

/* P-KILL-7, R-KILL-3: a second kill while the first waits for a member
 * that ignores SIGTERM (its leader already gone) sends SIGKILL at once. */
static void test_second_kill_now(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.grace_ms = 60000;
  o.command = TERM_IGNORER;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  assert_true(session_has(&f, sid, "sleep 777", 1));
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  /* The leader dies of SIGTERM; the ignorer stays, the task with it. */
  assert_true(run_until(&f, leader_gone, &sid, 10000));
  assert_int_equal(session_live(sid, "sleep 777"), 1);
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_true(w.at_ms - t0 < 30000);
  assert_int_equal(session_live(sid, NULL), 0);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-KILL-7: a fork bomb is stopped by one kill.  The bomb runs as an
 * unprivileged user under an nproc limit of 250 (root's processes are not
 * held to RLIMIT_NPROC), and its depth is bounded as well, so it cannot
 * grow past a few hundred processes whatever happens; the test's teardown
 * SIGKILLs what is left of its session even when an assertion failed. */
static void test_fork_bomb(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  pid_t sid;
  uint64_t t0;
  int before;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.grace_ms = 500;
  o.cwd = "/";
  if (getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0)
    o.command = "ulimit -u 250; exec setpriv --reuid=nobody --regid=nogroup "
                "--clear-groups bash -c 'b(){ [ ${#1} -lt 8 ] && "
                "{ b x$1 | b x$1 & }; sleep 30; }; b' 2>/dev/null";
  else
    o.command = "ulimit -u 250 2>/dev/null; b(){ [ ${#1} -lt 6 ] && "
                "{ b x$1 | b x$1 & }; sleep 30; }; b 2>/dev/null";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  doomed_sid = sid;
  assert_true(session_has(&f, sid, NULL, 100));
  before = session_live(sid, NULL);
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 20000, NULL);
  print_message("fork bomb: %d processes at the kill, %d left when it "
                "settled %llu ms later (grace 500 ms)\n",
                before, session_live(sid, NULL),
                (unsigned long long)(w.at_ms - t0));
  assert_int_equal(session_live(sid, NULL), 0);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  fixture_close(&f);
}

/* The number of kills of test_kill_loop (more with UVT_KILL_LOOP_N). */
static int kill_loop_n(void) {
  const char *s = getenv("UVT_KILL_LOOP_N");
  return s != NULL && atoi(s) > 0 ? atoi(s) : 200;
}

/* P-KILL-7: many tasks `sleep N & sleep N` killed right after their start
 * (ten at a time, each as soon as its pid is known) leave no process. */
static void test_kill_loop(void **state) {
  fixture_t f;
  char id[10][UVT_ID_MAX];
  pid_t sid[10];
  uvt_kill_result_t kr;
  waitres_t w;
  int total = kill_loop_n();
  int survivors = 0;
  int i, k;
  (void)state;

  fixture_init(&f, NULL);
  for (i = 0; i < total; i += 10) {
    for (k = 0; k < 10; k++)
      assert_int_equal(start_sh(&f, NULL, "sleep 300 & sleep 300", id[k]), 0);
    for (k = 0; k < 10; k++) {
      sid[k] = task_pid(&f, id[k], NULL);
      assert_int_equal(uvt_kill(f.reg, id[k], NULL, NULL, &kr), 0);
    }
    for (k = 0; k < 10; k++) {
      wait_task(&f, &w, id[k], 10000, NULL);
      assert_int_equal(w.snap.status, UVT_KILLED);
      survivors += session_live(sid[k], NULL);
      wait_end(&w);
      assert_int_equal(uvt_forget(f.reg, id[k], NULL), 0);
    }
  }
  print_message("kill loop: %d kills, %d survivors\n", total, survivors);
  assert_int_equal(survivors, 0);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_kill_term_ignorer),
      T(test_runtime_term_ignorer),
      T(test_dispose_term_ignorer),
      T(test_second_kill_now),
      cmocka_unit_test_teardown(test_fork_bomb, teardown_doomed),
      T(test_kill_loop),
  };
  return PROCESS_TESTS("process-kill-all", tests);
}
