/* Input for running tasks (P-IN-1): stdin_pipe, uvt_process_write(),
 * uvt_process_close_stdin(), the pending-input cap, UV_EPIPE once nobody
 * reads, UV_EINVAL without a pipe, the fence, writes while the spawn is
 * out; and C-05 still holding without stdin_pipe.  Also run by the TSan
 * lane (writes race the spawner thread's hand-over of the child's end). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-process-util.h"

extern size_t uvt__process_stdin_pending(uvt_registry_t *reg, const char *id);

static int start_in(fixture_t *f, uvt_agent_t *owner, const char *cmd,
                    size_t cap, char id[UVT_ID_MAX]) {
  uvt_process_options_t o;
  test_opts(&o);
  o.command = cmd;
  o.owner = owner;
  o.stdin_pipe = 1;
  if (cap > 0)
    o.stdin_cap_bytes = cap;
  return uvt_process_start(f->reg, &o, id);
}

static int wr(fixture_t *f, const char *id, const char *s) {
  return uvt_process_write(f->reg, id, NULL, s, strlen(s));
}

/* P-IN-1, P-SPAWN-2: a task with stdin_pipe reads no rc file of the
 * user's.  Its stdin is a socket, and bash takes a socket on stdin for a
 * remote shell daemon's: with SHLVL unset (as in an MCP server started by
 * a client with a minimal environment) `bash -c` read ~/.bashrc first,
 * which may print, slow the start or change the environment.  The
 * wrapper's bash now runs with --norc.  Sibling: the same command without
 * stdin_pipe (its stdin is /dev/null) never read it. */
static void test_in_no_rc_file(void **state) {
  static const int pipes[] = {1, 0};
  fixture_t f;
  uvt_process_options_t o;
  char dir[] = "/tmp/uvt-rc-XXXXXX";
  char rc[64];
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char *shlvl = getenv("SHLVL") ? strdup(getenv("SHLVL")) : NULL;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  FILE *fp;
  size_t i;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(rc, sizeof(rc), "%s/.bashrc", dir);
  fp = fopen(rc, "w");
  assert_non_null(fp);
  fputs("echo read-the-rc-file\n", fp);
  fclose(fp);
  setenv("HOME", dir, 1);
  unsetenv("SHLVL");
  fixture_init(&f, NULL);
  for (i = 0; i < sizeof(pipes) / sizeof(pipes[0]); i++) {
    test_opts(&o);
    o.command = "echo ran";
    o.stdin_pipe = pipes[i];
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    wait_task(&f, &w, id, 10000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    wait_end(&w);
    sb.len = 0;
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, "ran\n");
  }
  fixture_close(&f);
  sb_free(&sb);
  if (home != NULL)
    setenv("HOME", home, 1);
  if (shlvl != NULL)
    setenv("SHLVL", shlvl, 1);
  free(home);
  free(shlvl);
  unlink(rc);
  rmdir(dir);
}

/* P-IN-1: writes arrive in order, also many in one loop turn right after
 * the start; close_stdin is the child's end of file. */
static void test_in_order_and_eof(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  char word[32];
  char want[4096];
  size_t n = 0;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_in(&f, NULL, "cat; echo after", 0, id), 0);
  for (i = 0; i < 200; i++) {
    snprintf(word, sizeof(word), "w%d\n", i);
    assert_int_equal(wr(&f, id, word), 0);
    memcpy(want + n, word, strlen(word));
    n += strlen(word);
  }
  memcpy(want + n, "after\n", 7);
  /* The child waits on its stdin: not ended while it is open. */
  read_until_has(&f, id, NULL, &sb, "w199\n");
  wait_begin(&f, &w, id, 300, NULL);
  fixture_run_until(&f, wait_done, &w);
  assert_int_equal(w.status, UVT_EWAITTIMEOUT);
  wait_end(&w);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, want);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-IN-1: end of file comes once the queue drained: 3 MiB written in one
 * call to a child that reads slowly, then close_stdin at once; the child
 * counts every byte before its end of file. */
static void test_in_eof_after_queue(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  size_t len = 3u << 20;
  char *big = malloc(len);
  (void)state;

  assert_non_null(big);
  memset(big, 'x', len);
  fixture_init(&f, NULL);
  assert_int_equal(
      start_in(&f, NULL, "sleep 0.2; wc -c | tr -d ' '", 4u << 20, id), 0);
  assert_int_equal(uvt_process_write(f.reg, id, NULL, big, len), 0);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  /* Ended for writes, whatever is still queued. */
  assert_int_equal(wr(&f, id, "late"), UV_EPIPE);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "3145728\n");
  wait_end(&w);
  sb_free(&sb);
  free(big);
  fixture_close(&f);
}

/* P-IN-1: at most stdin_cap_bytes pending: a write that reaches the cap
 * exactly is accepted; one byte more is UV_ENOBUFS with nothing of it
 * queued; the call never blocks on a child that does not read. */
static void test_in_cap(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  size_t cap = 256 * 1024;
  size_t pending;
  char *block = malloc(cap + 1);
  (void)state;

  assert_non_null(block);
  memset(block, 'y', cap + 1);
  fixture_init(&f, NULL);
  assert_int_equal(start_in(&f, NULL, "sleep 30", cap, id), 0);
  (void)task_pid(&f, id, NULL);
  /* One byte beyond the cap is refused even with nothing pending. */
  assert_int_equal(uvt_process_write(f.reg, id, NULL, block, cap + 1),
                   UV_ENOBUFS);
  assert_int_equal(uvt__process_stdin_pending(f.reg, id), 0);
  /* Fill the socket until something stays pending (sleep never reads). */
  while ((pending = uvt__process_stdin_pending(f.reg, id)) == 0)
    assert_int_equal(uvt_process_write(f.reg, id, NULL, block, 4096), 0);
  /* Exactly up to the cap: accepted. */
  assert_int_equal(uvt_process_write(f.reg, id, NULL, block, cap - pending), 0);
  assert_int_equal(uvt__process_stdin_pending(f.reg, id), cap);
  /* One more byte: refused whole, nothing queued. */
  assert_int_equal(uvt_process_write(f.reg, id, NULL, block, 1), UV_ENOBUFS);
  assert_int_equal(uvt__process_stdin_pending(f.reg, id), cap);
  /* An empty write is a check, not a write. */
  assert_int_equal(uvt_process_write(f.reg, id, NULL, block, 0), 0);
  wait_begin(&f, &w, id, 5000, NULL);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "test", NULL), 0);
  fixture_run_until(&f, wait_done, &w);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  /* What was queued is dropped with the task. */
  assert_int_equal(wr(&f, id, "z"), UV_EPIPE);
  wait_end(&w);
  free(block);
  fixture_close(&f);
}

/* P-IN-1: a write after the child closed its end is UV_EPIPE: a program
 * that closes stdin and goes on running, a shell that does, and `head -c
 * 1`, which exits after one byte.  (The spawner's copy of the child's end
 * is closed right after the spawn returns, before its answer reaches the
 * loop: once the pid is known, the child's are the only ones.) */
static void test_in_child_closed(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *head[] = {"head", "-c", "1", NULL};
  waitres_t w;
  sbuf_t sb = {0};
  int pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.stdin_pipe = 1;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=close-stdin", NULL, NULL, id), 0);
  assert_int_equal(wr(&f, id, "a"), 0);
  (void)task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "closed\n");
  assert_int_equal(wr(&f, id, "b"), UV_EPIPE);
  assert_int_equal(wr(&f, id, "c"), UV_EPIPE);
  /* The task itself runs on. */
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  wait_begin(&f, &w, id, 5000, NULL);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "test", NULL), 0);
  fixture_run_until(&f, wait_done, &w);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  wait_end(&w);
  sb_free(&sb);

  assert_int_equal(
      start_in(&f, NULL, "exec 0<&-; echo closed; sleep 30", 0, id), 0);
  (void)task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "closed\n");
  assert_int_equal(wr(&f, id, "x\n"), UV_EPIPE);
  wait_begin(&f, &w, id, 5000, NULL);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "test", NULL), 0);
  fixture_run_until(&f, wait_done, &w);
  wait_end(&w);
  sb_free(&sb);

  /* head -c 1 reads one byte and exits: once it is gone, nobody reads. */
  test_opts(&o);
  o.argv = head;
  o.stdin_pipe = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  pid = task_pid(&f, id, NULL);
  assert_int_equal(wr(&f, id, "ab"), 0);
  assert_true(run_until(&f, leader_gone, &pid, 5000));
  assert_int_equal(wr(&f, id, "c"), UV_EPIPE);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "a");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-IN-1: after close_stdin and after the task ended, writes are UV_EPIPE
 * and close_stdin does nothing (0). */
static void test_in_after_end(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_in(&f, NULL, "cat >/dev/null", 0, id), 0);
  assert_int_equal(wr(&f, id, "one\n"), 0);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  assert_int_equal(wr(&f, id, "two\n"), UV_EPIPE);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);

  assert_int_equal(start_in(&f, NULL, "true", 0, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(wr(&f, id, "late\n"), UV_EPIPE);
  assert_int_equal(uvt_process_write(f.reg, id, NULL, "", 0), UV_EPIPE);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  wait_end(&w);
  fixture_close(&f);
}

/* P-IN-1: UV_EINVAL for a task without stdin_pipe (and for bad
 * arguments); C-05 keeps holding there: stdin is /dev/null. */
static void test_in_einval_and_c05(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  fake_t fk;
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  /* C-05: `cat` gets end of file at once. */
  assert_int_equal(start_sh(&f, NULL, "cat; echo after", id), 0);
  assert_int_equal(wr(&f, id, "x"), UV_EINVAL);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), UV_EINVAL);
  assert_int_equal(uvt_process_resize(f.reg, id, NULL, 100, 30), UV_EINVAL);
  wait_task(&f, &w, id, 2000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "after\n");
  wait_end(&w);
  sb_free(&sb);

  /* stdin_data (bytes, then end of file) is not a pipe either. */
  test_opts(&o);
  o.command = "cat";
  o.stdin_data = "fixed\n";
  o.stdin_len = 6;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_int_equal(wr(&f, id, "x"), UV_EINVAL);
  wait_task(&f, &w, id, 2000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "fixed\n");
  wait_end(&w);
  sb_free(&sb);

  /* Options that cannot go together, or a cap of nothing. */
  o.stdin_pipe = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.stdin_data = NULL;
  o.stdin_len = 0;
  o.stdin_cap_bytes = 0;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);

  /* Arguments. */
  assert_int_equal(start_in(&f, NULL, "cat >/dev/null", 0, id), 0);
  assert_int_equal(uvt_process_write(f.reg, id, NULL, NULL, 1), UV_EINVAL);
  assert_int_equal(uvt_process_write(f.reg, id, NULL, NULL, 0), 0);
  assert_int_equal(uvt_process_write(NULL, id, NULL, "x", 1), UV_EINVAL);
  assert_int_equal(uvt_process_write(f.reg, NULL, NULL, "x", 1), UV_EINVAL);
  assert_int_equal(uvt_process_close_stdin(NULL, id, NULL), UV_EINVAL);
  assert_int_equal(uvt_process_write(f.reg, "bash-999", NULL, "x", 1),
                   UVT_ENOTASK);
  /* Another producer's task. */
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(f.reg, &fk, NULL, "fake", NULL, id), 0);
  assert_int_equal(wr(&f, id, "x"), UV_EINVAL);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), UV_EINVAL);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  fixture_close(&f);
}

/* P-IN-1: the session fence (R-OWN-2) applies to writes and to
 * close_stdin. */
static void test_in_fence(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_agent_t b;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "a", "s1");
  agent_setup(&f, &b, "b", "s2");
  assert_int_equal(start_in(&f, &a, "cat", 0, id), 0);
  assert_int_equal(uvt_process_write(f.reg, id, &b, "x", 1), UVT_EFOREIGN);
  assert_int_equal(uvt_process_write(f.reg, id, NULL, "x", 1), UVT_EFOREIGN);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, &b), UVT_EFOREIGN);
  assert_int_equal(uvt_process_write(f.reg, id, &a, "mine\n", 5), 0);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, &a), 0);
  wait_task(&f, &w, id, 5000, &a);
  read_into(&f, id, &a, &sb);
  assert_string_equal(sb.buf, "mine\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* ---- writes while the spawn is out (P-IN-1 with P-SPAWN-6) ------------ */

/* P-IN-1: bytes written before the child exists are read by it once it
 * does; a task killed before its spawn drops them (UV_EPIPE afterwards),
 * and no descriptor is left. */
static void test_in_before_spawn(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  char id2[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int fds;
  (void)state;

  fds = count_fds();
  fixture_init(&f, NULL);
  spawn_gate_close(1);
  assert_int_equal(start_in(&f, NULL, "cat", 0, id), 0);
  assert_int_equal(start_in(&f, NULL, "cat", 0, id2), 0);
  run_for(&f, 50);
  /* Neither has a child yet (the spawner is held). */
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), 0);
  assert_int_equal(uvt_process_pid(f.reg, id2, NULL), 0);
  assert_int_equal(wr(&f, id, "early\n"), 0);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  assert_int_equal(wr(&f, id2, "never read\n"), 0);
  assert_int_equal(uvt_kill(f.reg, id2, NULL, "test", NULL), 0);
  spawn_gate_open(2);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "early\n");
  wait_end(&w);
  sb_free(&sb);
  wait_task(&f, &w, id2, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_int_equal(wr(&f, id2, "x"), UV_EPIPE);
  wait_end(&w);
  spawn_gate_remove();
  fixture_close(&f);
  assert_int_equal(count_fds(), fds);
}

/* P-IN-1: a REPL on a pipe (python3 -i): a line in, its answer out, end
 * of input ends it. */
static void test_in_repl_pipe(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  const char *py[] = {"python3", "-q", "-i", NULL};
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.argv = py;
  o.stdin_pipe = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_int_equal(wr(&f, id, "print(6 * 7)\n"), 0);
  read_until_has(&f, id, NULL, &sb, "42\n");
  assert_int_equal(wr(&f, id, "x = 'a' * 3\nprint(x)\n"), 0);
  read_until_has(&f, id, NULL, &sb, "aaa\n");
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* L-2 for input: tasks ended with bytes still queued, closed early, or
 * killed leave no descriptor and no child. */
static void test_in_no_leak(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  char block[65536];
  int fds;
  int i;
  (void)state;

  memset(block, 'q', sizeof(block));
  fds = count_fds();
  fixture_init(&f, NULL);
  for (i = 0; i < 20; i++) {
    assert_int_equal(start_in(&f, NULL,
                              i % 2 ? "sleep 0.05" : "head -c 10 >/dev/null",
                              1u << 20, id),
                     0);
    while (uvt_process_write(f.reg, id, NULL, block, sizeof(block)) == 0 &&
           uvt__process_stdin_pending(f.reg, id) < 200000)
      ;
    if (i % 3 == 0)
      assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
    wait_task(&f, &w, id, 5000, NULL);
    assert_int_equal(w.snap.status, UVT_COMPLETED);
    wait_end(&w);
  }
  fixture_close(&f);
  assert_int_equal(count_fds(), fds);
}

/* ---- allocation failures -------------------------------------------- */

/* P-IN-1, P-PTY-1 with P-SPAWN-4: failing the n-th allocation of a start
 * with stdin_pipe, or on a terminal (with on_output and backpressure), for
 * every n, is a clean UV_ENOMEM with nothing left, or a success; a write
 * whose allocation fails is UV_ENOMEM with nothing of it written, and the
 * input goes on. */
static void test_in_failmalloc(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int variant;
  int n;
  int err;
  int fds;
  (void)state;

  fds = count_fds();
  assert_int_equal(
      uvt_replace_allocator(fm_malloc, fm_realloc, fm_calloc, free), 0);
  fixture_init(&f, NULL);
  for (variant = 0; variant < 2; variant++) {
    test_opts(&o);
    o.command = "read -r x; echo \"got $x\"";
    if (variant == 0) {
      o.stdin_pipe = 1;
    } else {
      o.pty = 1;
      o.output_backpressure = 1;
    }
    for (n = 1;; n++) {
      fm_arm(n);
      err = uvt_process_start(f.reg, &o, id);
      fm_armed = 0;
      if (err != 0) {
        assert_int_equal(err, UV_ENOMEM);
        assert_true(fm_failed);
        run_for(&f, 5);
        continue;
      }
      assert_int_equal(wr(&f, id, "in\n"), 0);
      wait_task(&f, &w, id, 5000, NULL);
      assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
      read_into(&f, id, NULL, &sb);
      assert_non_null(strstr(sb.buf, "got in"));
      sb_free(&sb);
      wait_end(&w);
      if (!fm_failed)
        break;
    }
    assert_true(n > 3);
  }

  assert_int_equal(start_in(&f, NULL, "cat", 0, id), 0);
  fm_arm(1);
  assert_int_equal(wr(&f, id, "lost\n"), UV_ENOMEM);
  fm_armed = 0;
  assert_true(fm_failed);
  assert_int_equal(wr(&f, id, "kept\n"), 0);
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "kept\n");
  sb_free(&sb);
  wait_end(&w);
  fixture_close(&f);
  assert_int_equal(uvt_replace_allocator(malloc, realloc, calloc, free), 0);
  assert_int_equal(count_fds(), fds);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_in_order_and_eof),   T(test_in_no_rc_file),
      T(test_in_eof_after_queue), T(test_in_cap),
      T(test_in_child_closed),    T(test_in_after_end),
      T(test_in_einval_and_c05),  T(test_in_fence),
      T(test_in_before_spawn),    T(test_in_repl_pipe),
      T(test_in_no_leak),         T(test_in_failmalloc),
  };
  signal(SIGPIPE, SIG_DFL); /* a write must never raise it (P-IN-1) */
  return PROCESS_TESTS("process-stdin", tests);
}
