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
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  wait_end(&w);
  t0 = now_ms();
  assert_int_equal(start_sh(&f, NULL, "echo started; sleep 30 &", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_true(w.at_ms - t0 < 1500);
  wait_end(&w);
  fixture_close(&f);
  uvt__process_no_pidfd = 0;
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_sigchld_fallback),
  };
  return PROCESS_TESTS("process-reap", tests);
}
