/* Seeing and reaping exits (P-REAP-*): the SIGCHLD path without pidfds. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-process-util.h"

/* P-END-1, P-END-2, P-KILL-1, C-01 without pidfds (kernels before 5.3,
 * seccomp filters, valgrind): the SIGCHLD fallback gives the same
 * outcomes. */
static void test_sigchld_fallback(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  uint64_t t0;
  int i;
  (void)state;

  uvt__process_no_pidfd = 1;
  fixture_init(&f, NULL);
  test_opts(&o);
  for (i = 0; i < 20; i++) {
    assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "3", NULL, id),
                     0);
    wait_task(&f, &w, id, 5000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 3");
    wait_end(&w);
  }
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=out-err", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "out1\n[stderr]\nerr1\n");
  wait_end(&w);
  sb_free(&sb);
  assert_int_equal(start_sh(&f, NULL, "sleep 100", id), 0);
  task_pid(&f, id, NULL); /* a kill after the spawn, not before it */
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  wait_end(&w);
  t0 = now_ms();
  assert_int_equal(start_sh(&f, NULL, "echo started; sleep 30 &", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  assert_true(w.at_ms - t0 < 1500);
  wait_end(&w);
  fixture_close(&f);
  uvt__process_no_pidfd = 0;
}

typedef struct {
  int calls;
  int completed;
} count_listener_t;

static void on_done_count(uvt_listener_t *l, const uvt_snapshot_t *s,
                          uvt_agent_t *owner) {
  count_listener_t *c = l->data;
  (void)owner;
  c->calls++;
  if (s->status == UVT_COMPLETED && s->detail != NULL &&
      strcmp(s->detail, "exit code: 0") == 0)
    c->completed++;
}

enum { C26_N = 250 };

static int c26_all_done(void *arg) {
  return ((count_listener_t *)arg)->calls == C26_N;
}

/* C-26, P-REAP-2: without pidfds, 250 tasks started in one loop turn all
 * settle: one SIGCHLD watch per registry, and each signal reaps every
 * leader that exited (signals coalesce).  `sleep 0.1` is the case;
 * `true` is its harder sibling: the leaders exit while the host is still
 * starting the others, which with one watch per task overflowed libuv's
 * signal pipe and stranded about half of them. */
static void test_c26_many_without_pidfd(void **state) {
  static const char *const cmds[] = {"sleep 0.1", "true"};
  fixture_t f;
  uvt_listener_t l;
  count_listener_t c;
  char id[UVT_ID_MAX];
  uint64_t t0;
  size_t k;
  int i;
  (void)state;

  uvt__process_no_pidfd = 1;
  for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
    fixture_init(&f, NULL);
    memset(&c, 0, sizeof(c));
    memset(&l, 0, sizeof(l));
    l.data = &c;
    assert_int_equal(uvt_listener_start(f.reg, &l, on_done_count), 0);
    t0 = now_ms();
    for (i = 0; i < C26_N; i++)
      assert_int_equal(start_sh(&f, NULL, cmds[k], id), 0);
    assert_true(run_until(&f, c26_all_done, &c, 30000));
    assert_int_equal(c.calls, C26_N);
    assert_int_equal(c.completed, C26_N);
    print_message("C-26: %d x '%s' settled in %llu ms\n", C26_N, cmds[k],
                  (unsigned long long)(now_ms() - t0));
    uvt_listener_stop(&l);
    fixture_close(&f);
  }
  uvt__process_no_pidfd = 0;
}

/* No child of this process at all, zombie or live (waitpid(-1) says
 * ECHILD). */
static int no_child_left(void) {
  return waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD;
}

/* C-25, P-REAP-1: a host that is a child subreaper (as every process suite
 * is, see test-process-util.c) gets no zombie from the library: members of
 * a task's session reparented to the host are reaped, after a natural end,
 * after a kill, with `set -m` jobs in groups of their own, and through
 * disposal of the owner or of the registry. */
static void test_c25_subreaper(void **state) {
  static const char *const cmds[] = {
      "sleep 0.2 & sleep 0.1 & echo hi",
      "set -m; sleep 0.2 & sleep 0.1 & echo hi",
      "sleep 0.3 & sleep 0.2 & echo hi; sleep 100",
  };
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  dispose_t d;
  size_t i;
  (void)state;

  for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    fixture_init(&f, NULL);
    agent_setup(&f, &a, "A", "S1");
    memset(&d, 0, sizeof(d));
    a.data = &d;
    test_opts(&o);
    o.owner = &a;
    o.command = cmds[i];
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    read_until_has(&f, id, &a, &sb, "hi\n");
    if (i == 2)
      assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
    wait_task(&f, &w, id, 5000, &a);
    assert_int_equal(w.snap.status, i == 2 ? UVT_KILLED : UVT_COMPLETED);
    wait_end(&w);
    sb_free(&sb);
    assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
    fixture_run_until(&f, disposed, &d);
    assert_int_equal(d.calls, 1);
    fixture_close(&f);
    assert_true(no_child_left());
  }

  /* Registry disposal alone, the sleeps still running. */
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "sleep 0.3 & sleep 0.2 & echo hi";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, NULL, &sb, "hi\n");
  sb_free(&sb);
  fixture_close(&f);
  assert_true(no_child_left());
}

static void sigchld_ignored(int sig) {
  (void)sig;
}

/* P-REAP-2: a SIGCHLD that never reaches the library (here: the host
 * replaced the handler for a while, as some hosts do by accident) cannot
 * leave a task unsettled: a slow re-check reaps the leader anyway. */
static void test_reap_missed_signal(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  struct sigaction mine, saved;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  uvt__process_no_pidfd = 1;
  fixture_init(&f, NULL);
  test_opts(&o);
  memset(&mine, 0, sizeof(mine));
  mine.sa_handler = sigchld_ignored;
  sigemptyset(&mine.sa_mask);
  mine.sa_flags = SA_RESTART;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=wait-usr1", NULL, NULL, id), 0);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  /* The library's watch is up; now the host takes SIGCHLD away. */
  assert_int_equal(sigaction(SIGCHLD, &mine, &saved), 0);
  assert_int_equal(kill(task_pid(&f, id, NULL), SIGUSR1), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_int_equal(sigaction(SIGCHLD, &saved, NULL), 0);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  uvt__process_no_pidfd = 0;
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_sigchld_fallback),
      T(test_c26_many_without_pidfd),
      T(test_reap_missed_signal),
      T(test_c25_subreaper),
  };
  return PROCESS_TESTS("process-reap", tests);
}
