/* P-OUT-6: a task that ended while what it left running holds its pipes
 * keeps them open and read.  The leftovers write on (no SIGPIPE of ours),
 * what they write is read from the ended task (uvt_read() and
 * uvt_process_read(), capped, drops counted), and the pipes close at the
 * last holder's exit, at a kill of the ended task, at a forget and at the
 * registry's close.  Siblings: stdout, stderr, a terminal, 10 MB after the
 * end, a holder that left the session, backpressure, and the tasks that
 * must not linger (a kill, a runtime limit).
 *
 * Each leftover is driven through FIFOs in a temporary directory: it waits
 * in `read` until the test writes a line, so every step follows the task's
 * end without a sleep, and it leaves a marker file after each write that
 * succeeded (a SIGPIPE would kill it before the marker). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-process-util.h"

typedef struct {
  char dir[64];
} tmpd_t;

static void tmpd_init(tmpd_t *d) {
  char path[128];
  strcpy(d->dir, "/tmp/uvt-late-XXXXXX");
  assert_non_null(mkdtemp(d->dir));
  snprintf(path, sizeof(path), "%s/go", d->dir);
  assert_int_equal(mkfifo(path, 0600), 0);
}

static void tmpd_free(tmpd_t *d) {
  char cmd[160];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
  assert_int_equal(system(cmd), 0);
}

static int marker(const tmpd_t *d, const char *name) {
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", d->dir, name);
  return access(path, F_OK) == 0;
}

typedef struct {
  fixture_t *f;
  const tmpd_t *d;
  const char *name;
} marker_wait_t;

static int marker_pred(void *arg) {
  marker_wait_t *m = arg;
  return marker(m->d, m->name);
}

/* Run the loop (so the pipes are read) until marker `name` exists. */
static int wait_marker(fixture_t *f, const tmpd_t *d, const char *name) {
  marker_wait_t m = {f, d, name};
  return run_until(f, marker_pred, &m, 20000);
}

typedef struct {
  const tmpd_t *d;
} go_t;

static int go_pred(void *arg) {
  go_t *g = arg;
  char path[128];
  int fd;

  snprintf(path, sizeof(path), "%s/go", g->d->dir);
  /* ENXIO until the leftover waits in its `read`. */
  fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return 0;
  assert_int_equal(write(fd, "x\n", 2), 2);
  close(fd);
  return 1;
}

/* Let the leftover take its next step (the loop runs meanwhile). */
static void go(fixture_t *f, const tmpd_t *d) {
  go_t g = {d};
  assert_true(run_until(f, go_pred, &g, 20000));
}

typedef struct {
  fixture_t *f;
  const char *id;
  int want;
} reading_wait_t;

static int reading_pred(void *arg) {
  reading_wait_t *r = arg;
  return uvt_process_reading(r->f->reg, r->id, NULL) == r->want;
}

static int wait_reading(fixture_t *f, const char *id, int want) {
  reading_wait_t r = {f, id, want};
  return run_until(f, reading_pred, &r, 20000);
}

/* The descriptors of the fixture once the registry's process context
 * exists (its first task makes it): a baseline for "no pipe is left". */
static int warm_fds(fixture_t *f) {
  char id[UVT_ID_MAX];
  waitres_t w;

  assert_int_equal(start_sh(f, NULL, "true", id), 0);
  wait_task(f, &w, id, 10000, NULL);
  wait_end(&w);
  return count_fds();
}

/* The leftover of most tests: waits, writes one line to `fd`, leaves a
 * marker; twice; then exits. */
static void leftover_cmd(char *cmd, size_t size, const tmpd_t *d,
                         const char *redir) {
  snprintf(cmd, size,
           "(read x < %s/go; echo late-1 %s; touch %s/ok1; read x < %s/go; "
           "echo late-2 %s; touch %s/ok2) & echo before",
           d->dir, redir, d->dir, d->dir, redir, d->dir);
}

/* P-OUT-6: stdout (`redir` "") or stderr (">&2") held by a leftover. */
static void late_stream(const char *redir, const char *late1,
                        const char *late2) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char cmd[512];
  tmpd_t d;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  int fds;

  tmpd_init(&d);
  fixture_init(&f, NULL);
  fds = warm_fds(&f);
  leftover_cmd(cmd, sizeof(cmd), &d, redir);
  test_opts(&o);
  o.command = cmd;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  wait_end(&w);
  /* Ended, and still read. */
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 1);
  assert_int_equal(read_into(&f, id, NULL, &sb), UVT_COMPLETED);
  assert_string_equal(sb.buf, "before\n");
  sb.len = 0;
  /* The leftover writes after the end: no SIGPIPE, and it is read. */
  go(&f, &d);
  assert_true(wait_marker(&f, &d, "ok1"));
  read_until_has(&f, id, NULL, &sb, "late-1");
  assert_string_equal(sb.buf, late1);
  sb.len = 0;
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 1);
  go(&f, &d);
  assert_true(wait_marker(&f, &d, "ok2"));
  /* Its exit closes the pipes: nothing lingers. */
  assert_true(session_gone(&f, sid, 10000));
  assert_true(wait_reading(&f, id, 0));
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, late2);
  sb.len = 0;
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 0);
  assert_int_equal(count_fds(), fds);
  sb_free(&sb);
  fixture_close(&f);
  tmpd_free(&d);
}

static void test_late_stdout(void **state) {
  (void)state;
  late_stream("", "late-1\n", "late-2\n");
}

static void test_late_stderr(void **state) {
  (void)state;
  late_stream(">&2", "[stderr]\nlate-1\n", "[stderr]\nlate-2\n");
}

/* P-OUT-6 on a terminal (P-PTY-2): the leftover ignores the hang-up its
 * session leader's exit sends and writes on through the terminal. */
static void test_late_pty(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char cmd[512];
  tmpd_t d;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  (void)state;

  tmpd_init(&d);
  fixture_init(&f, NULL);
  snprintf(cmd, sizeof(cmd),
           "trap '' HUP; (read x < %s/go; echo late-1; touch %s/ok1) & "
           "echo before",
           d.dir, d.dir);
  test_opts(&o);
  o.command = cmd;
  o.pty = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 10000, NULL);
  wait_end(&w);
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 1);
  read_until_has(&f, id, NULL, &sb, "before");
  go(&f, &d);
  assert_true(wait_marker(&f, &d, "ok1"));
  read_until_has(&f, id, NULL, &sb, "late-1\r\n");
  assert_true(session_gone(&f, sid, 10000));
  assert_true(wait_reading(&f, id, 0));
  sb_free(&sb);
  fixture_close(&f);
  tmpd_free(&d);
}

/* A leftover that waits for the test's go, writes `bytes` bytes of "a"
 * and leaves marker ok1; the task ends before it writes.  Then read in
 * turns (uvt_process_read) until the writer is done and the pipe closed,
 * and once more: *got and *dropped add up what the reads returned and
 * counted dropped; no read returns more than the cap. */
static void late_bulk(size_t bytes, int backpressure, uint64_t *got,
                      uint64_t *dropped) {
  fixture_t f;
  uvt_process_options_t o;
  uvt_process_read_t r;
  char id[UVT_ID_MAX];
  char cmd[512];
  tmpd_t d;
  waitres_t w;
  pid_t sid;
  int last = 0;

  tmpd_init(&d);
  fixture_init(&f, NULL);
  snprintf(cmd, sizeof(cmd),
           "(read x < %s/go; head -c %zu /dev/zero | tr '\\0' a; touch "
           "%s/ok1) & echo before",
           d.dir, bytes, d.dir);
  test_opts(&o);
  o.command = cmd;
  o.output_cap_bytes = 65536;
  o.output_backpressure = backpressure;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 10000, NULL);
  wait_end(&w);
  go(&f, &d);
  *got = 0;
  *dropped = 0;
  while (!last) {
    last = marker(&d, "ok1") && uvt_process_reading(f.reg, id, NULL) == 0;
    if (!last)
      run_for(&f, 2);
    assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), 0);
    assert_int_equal(r.exited, 1);
    assert_true(r.out_len <= 65536 + 7);
    *got += r.out_len;
    *dropped += r.out_dropped;
    uvt_process_read_cleanup(&r);
  }
  assert_true(session_gone(&f, sid, 10000));
  fixture_close(&f);
  tmpd_free(&d);
}

/* P-OUT-6 with P-OUT-2: 10 MB written after the end, read in turns with
 * a 64 KiB cap; what was read and what was dropped add up to every byte
 * written, and memory stays at the cap. */
static void test_late_10mb(void **state) {
  uint64_t got;
  uint64_t dropped;
  (void)state;

  late_bulk(10000000, 0, &got, &dropped);
  assert_int_equal(got + dropped, 7 + 10000000);
  assert_true(got >= 65536);
}

/* P-OUT-6 and P-KILL-6: a kill of the ended task stops the leftover and
 * closes the pipes (nothing lingers, no descriptor is left); a forget
 * does the same, and so does the registry's close. */
static void test_late_kill_forget_close(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt_kill_result_t kr;
  char id[UVT_ID_MAX];
  char cmd[512];
  tmpd_t d;
  waitres_t w;
  pid_t sid;
  int how;
  int fds;
  (void)state;

  for (how = 0; how < 3; how++) {
    tmpd_init(&d);
    fixture_init(&f, NULL);
    fds = warm_fds(&f);
    leftover_cmd(cmd, sizeof(cmd), &d, "");
    test_opts(&o);
    o.command = cmd;
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    sid = task_pid(&f, id, NULL);
    wait_task(&f, &w, id, 10000, NULL);
    wait_end(&w);
    assert_int_equal(uvt_process_reading(f.reg, id, NULL), 1);
    if (how == 0) {
      assert_int_equal(uvt_kill(f.reg, id, NULL, "done", &kr), 0);
      assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
      /* From the kill on, not "still read". */
      assert_int_equal(uvt_process_reading(f.reg, id, NULL), 0);
      assert_true(session_gone(&f, sid, 10000));
      run_for(&f, 1);
      assert_int_equal(count_fds(), fds);
    } else if (how == 1) {
      assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
      assert_true(session_gone(&f, sid, 10000));
      run_for(&f, 1);
      assert_int_equal(count_fds(), fds);
    }
    /* how == 2: the registry's close stops it (L-1, L-2). */
    fixture_close(&f);
    assert_int_equal(session_live(sid, NULL), 0);
    tmpd_free(&d);
  }
}

/* P-OUT-6's sibling: the holder left the session (setsid): it is no
 * leftover (P-LEFT-1 counts 0), yet it holds the pipe, which stays read;
 * a kill of the ended task closes it. */
static void test_late_setsid_holder(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt_kill_result_t kr;
  char id[UVT_ID_MAX];
  char cmd[512];
  char path[128];
  tmpd_t d;
  waitres_t w;
  sbuf_t sb = {0};
  FILE *pf;
  int pid = 0;
  (void)state;

  tmpd_init(&d);
  fixture_init(&f, NULL);
  snprintf(cmd, sizeof(cmd),
           "setsid sh -c 'echo $$ > %s/pid; read x < %s/go; echo late; touch "
           "%s/ok1; read x < %s/go' & while [ ! -s %s/pid ]; do :; done; "
           "echo before",
           d.dir, d.dir, d.dir, d.dir, d.dir);
  test_opts(&o);
  o.command = cmd;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  wait_end(&w);
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 0);
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 1);
  go(&f, &d);
  assert_true(wait_marker(&f, &d, "ok1"));
  read_until_has(&f, id, NULL, &sb, "late\n");
  assert_int_equal(uvt_kill(f.reg, id, NULL, "done", &kr), 0);
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 0);
  snprintf(path, sizeof(path), "%s/pid", d.dir);
  pf = fopen(path, "r");
  assert_non_null(pf);
  assert_int_equal(fscanf(pf, "%d", &pid), 1);
  fclose(pf);
  /* Out of the session: the registry does not stop it; the test (a
   * subreaper) reaps it. */
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(waitpid(pid, NULL, 0), pid);
  sb_free(&sb);
  fixture_close(&f);
  tmpd_free(&d);
}

/* P-OUT-6 with P-OUT-4: with output_backpressure nothing is dropped after
 * the end either: the holder waits in write until a read makes room. */
static void test_late_backpressure(void **state) {
  uint64_t got;
  uint64_t dropped;
  (void)state;

  late_bulk(3000000, 1, &got, &dropped);
  assert_int_equal(dropped, 0);
  assert_int_equal(got, 7 + 3000000);
}

/* What must not linger: a task stopped by a kill or by its runtime limit
 * closes its pipes at the drain as before (P-KILL-7: nothing of it is
 * left), and a task without leftovers is not "still read". */
static void test_late_not_after_kill(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "echo plain";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  wait_end(&w);
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 0);
  test_opts(&o);
  o.command = "sleep 300 & sleep 300";
  o.max_runtime_ms = 100;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  assert_int_equal(uvt_process_reading(f.reg, id, NULL), 0);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_late_stdout),
      T(test_late_stderr),
      T(test_late_pty),
      T(test_late_10mb),
      T(test_late_kill_forget_close),
      T(test_late_setsid_holder),
      T(test_late_backpressure),
      T(test_late_not_after_kill),
  };
  return PROCESS_TESTS("process-late", tests);
}
