/* Shared helpers of the process producer's suites (test-process*.c):
 * helper modes of the test binary, /proc scans for children and groups,
 * loop and wait helpers (L-1, L-2). */
#ifndef UVTASKS_TEST_PROCESS_UTIL_H
#define UVTASKS_TEST_PROCESS_UTIL_H

#include <limits.h>
#include <sys/types.h>

#include "test-util.h"
#include "uvtasks/process.h"

/* This binary's path (helper modes run it as a child). */
extern char self_exe[PATH_MAX];

/* The library's switch for its SIGCHLD fallback (no pidfd). */
extern int uvt__process_no_pidfd;
/* The library's switch for its fork spawn (no posix_spawn closefrom). */
extern int uvt__process_force_fork;
/* P-SPAWN-7: every registry starts with the spawn helper on (set from
 * UVT_SPAWN_HELPER=1 by process_test_main: the process suites' helper
 * runs, meson's "process-helper" suite). */
extern int uvt__process_spawn_helper_default;

typedef struct {
  pid_t pid;
  pid_t ppid;
  pid_t pgrp;
  pid_t sid;
  char state;
  unsigned long long start; /* clock ticks after boot */
} pstat_t;

typedef struct {
  uvt_wait_t req;
  int done;
  int status;
  uvt_snapshot_t snap;
  uint64_t at_ms;
} waitres_t;

typedef struct {
  char *buf;
  size_t len;
  size_t cap;
} sbuf_t;

typedef struct {
  const char *v[8];
} hargv_t;

typedef struct {
  fixture_t *f;
  const char *id;
  const uvt_agent_t *caller;
  sbuf_t *sb;
  const char *needle;
} read_wait_t;

typedef struct {
  int calls;
  pid_t pgid;
  int live_at_cb;
  uint64_t at_ms;
} dispose_t;

/* The helper modes: argv[1] is "--helper=MODE" (exit N, sleep MS, raise
 * SIG, out-err, write-bytes N [FD], ignore-term, hold-stdout,
 * hold-stdout-ignore-term, hold-stdout-ignore-hup, check-fds, ids, env
 * NAME..., pwd, cat, utf8-split [N], wait-usr1, close-stdin, tty-info,
 * open-tty). */
int helper(int argc, char **argv);

/* /proc/<pid>/stat: 0, or -1 when the process is gone. */
int read_stat(pid_t pid, pstat_t *st);
/* fn for every process; stops when fn returns nonzero. */
void each_process(int (*fn)(const pstat_t *st, void *arg), void *arg);
/* Live members of group `pgid` (zombies count as dead, C-02). */
int group_live(pid_t pgid);
/* Live processes of session `sid` (zombies count as dead), only those
 * whose argv joined by spaces is `argv_joined` unless it is NULL. */
int session_live(pid_t sid, const char *argv_joined);
/* Run the loop until session `sid` has no live process, at most max_ms;
 * returns whether it got there. */
int session_gone(fixture_t *f, pid_t sid, uint64_t max_ms);
/* Run the loop until session `sid` has at least n live processes running
 * `argv_joined` (a background job is forked before it execs), at most
 * 10 s; returns whether it got there. */
int session_has(fixture_t *f, pid_t sid, const char *argv_joined, int n);
/* Kill and reap every live child; returns how many there were. */
int kill_children(void);
/* L-2, after every test: no live child, no task leader left a zombie. */
int teardown_children(void **state);
/* Open descriptors of this process. */
int count_fds(void);
/* Processes whose argv (joined by spaces) contains `needle`. */
int cmdline_count(const char *needle);

uint64_t now_ms(void);
/* Run the loop until pred(arg) or max_ms passed (a 5 ms ticker keeps it
 * turning); returns pred's last value. */
int run_until(fixture_t *f, int (*pred)(void *), void *arg, uint64_t max_ms);
int never(void *arg);
void run_for(fixture_t *f, uint64_t ms);
void close_noop(uv_handle_t *h);
/* Block this thread (the loop's) for `ms`, as a host busy elsewhere does:
 * no loop turn, so the loop's cached time goes stale (R-TIME-1). */
void block_host(uint64_t ms);
/* The task's leader pid, once the spawner answered (asserted > 0). */
int task_pid(fixture_t *f, const char *id, const uvt_agent_t *caller);

/* Waits that record into a waitres_t. */
void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap);
int wait_done(void *arg);
void wait_begin(fixture_t *f, waitres_t *w, const char *id, uint64_t timeout_ms,
                const uvt_agent_t *caller);
/* Wait for `id` to end (asserting it did within timeout_ms). */
void wait_task(fixture_t *f, waitres_t *w, const char *id, uint64_t timeout_ms,
               const uvt_agent_t *caller);
void wait_end(waitres_t *w);

/* Handles on `loop` that are not closing (R-CLOSE-2: none of ours once
 * the registry's close callback runs). */
int open_handles(uv_loop_t *loop);

void sb_add(sbuf_t *sb, const char *s, size_t n);
void sb_free(sbuf_t *sb);
/* One read appended to sb; returns the snapshot's status. */
uvt_status_t read_into(fixture_t *f, const char *id, const uvt_agent_t *caller,
                       sbuf_t *sb);
/* Read until the accumulated output contains `needle`. */
void read_until_has(fixture_t *f, const char *id, const uvt_agent_t *caller,
                    sbuf_t *sb, const char *needle);

/* Defaults with test-sized grace (200 ms) and drain (100 ms). */
/* Nonzero under valgrind, which runs exec itself and cannot report a failed
 * exec to posix_spawn (the child exits 127 instead): tests of errors only
 * the exec reports skip themselves there. */
int under_valgrind(void);
void test_opts(uvt_process_options_t *o);
int start_sh(fixture_t *f, uvt_agent_t *owner, const char *cmd,
             char id[UVT_ID_MAX]);
/* argv for this binary in a helper mode; up to 2 extra words. */
const char *const *hargv(hargv_t *h, const char *mode, const char *a1,
                         const char *a2);
int start_helper(fixture_t *f, uvt_agent_t *owner, uvt_process_options_t *o,
                 const char *mode, const char *a1, const char *a2,
                 char id[UVT_ID_MAX]);
void agent_setup(fixture_t *f, uvt_agent_t *a, const char *id,
                 const char *session);
void assert_outcome(const uvt_snapshot_t *s, uvt_status_t status,
                    const char *detail);

/* `*(pid_t *)arg`'s group runs a `sleep`. */
int group_runs_sleep(void *arg);
/* `*(pid_t *)arg`'s group has no live member. */
int group_dead(void *arg);
/* Allow a member killed with the leader a moment to finish dying. */
int group_gone(fixture_t *f, pid_t pgid);
/* `*(pid_t *)arg` no longer exists (reaped). */
int leader_gone(void *arg);
/* Agent dispose callback recording into the dispose_t in a->data. */
void on_disposed(uvt_agent_t *a);
int disposed(void *arg);

/* An allocator for uvt_replace_allocator() that fails the fm_fail_at-th
 * allocation while fm_armed (the P-SPAWN-4 / R-START-3 tests); fm_failed
 * says it did.  fm_arm(n) counts from zero, fails the n-th and arms. */
extern int fm_armed;
extern int fm_failed;
void *fm_malloc(size_t n);
void *fm_realloc(void *p, size_t n);
void *fm_calloc(size_t c, size_t n);
void fm_arm(int n);

/* The main of every process suite: helper modes when argv[1] is
 * "--helper=...", else the tests, as a child subreaper. */
int process_test_main(int argc, char **argv, const char *name,
                      const struct CMUnitTest *tests, size_t count);
#define PROCESS_TESTS(name, tests)                                             \
  process_test_main(argc, argv, name, tests, sizeof(tests) / sizeof(tests[0]))
#define T(fn) cmocka_unit_test_teardown(fn, teardown_children)

#endif
