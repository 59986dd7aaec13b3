/* Chosen signals for a live task (P-KILL-8). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test-process-util.h"

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

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_sigint_summary),
      T(test_other_signals),
      T(test_refused),
  };
  return PROCESS_TESTS("process-signal", tests);
}
