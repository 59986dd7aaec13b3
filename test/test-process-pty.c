/* Tasks on a pseudo-terminal (P-PTY-1, P-PTY-2): the terminal is the
 * session's controlling terminal and its stdio, one merged stream, writes
 * through the line discipline (Ctrl-C, end of file), resize and SIGWINCH,
 * TERM, /dev/tty with and without a terminal; and everything of §3 in pty
 * mode: session kill, caps, UTF-8-safe reads, the drain after the
 * leader's exit, EIO at hang-up as end of stream, no descriptor leak, both
 * spawn paths (posix_spawn and the fork fallback). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-process-util.h"

static int start_pty(fixture_t *f, uvt_agent_t *owner, const char *cmd,
                     char id[UVT_ID_MAX]) {
  uvt_process_options_t o;
  test_opts(&o);
  o.command = cmd;
  o.owner = owner;
  o.pty = 1;
  return uvt_process_start(f->reg, &o, id);
}

static int wr(fixture_t *f, const char *id, const char *s) {
  return uvt_process_write(f->reg, id, NULL, s, strlen(s));
}

static void kill_and_wait(fixture_t *f, const char *id, waitres_t *w) {
  wait_begin(f, w, id, 5000, NULL);
  assert_int_equal(uvt_kill(f->reg, id, NULL, "test", NULL), 0);
  fixture_run_until(f, wait_done, w);
  assert_int_equal(w->done, 1);
  assert_int_equal(w->status, 0);
}

/* One run of the tty-info helper; its line in `out`. */
static void tty_info(fixture_t *f, uvt_process_options_t *o, sbuf_t *out) {
  char id[UVT_ID_MAX];
  waitres_t w;
  assert_int_equal(
      start_helper(f, NULL, o, "--helper=tty-info", NULL, NULL, id), 0);
  wait_task(f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(f, id, NULL, out);
  wait_end(&w);
}

/* P-PTY-1: the terminal is stdin, stdout and stderr and the session's
 * controlling terminal with the leader's group in the foreground; TERM is
 * xterm-256color unless env gives one; the size is the options'.  Both
 * spawn paths.  Without pty: no terminal at all. */
static void test_pty_terminal(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  const char *env[] = {"TERM=vt100", NULL};
  sbuf_t sb = {0};
  int fork_path;
  (void)state;

  fixture_init(&f, NULL);
  for (fork_path = 0; fork_path <= 1; fork_path++) {
    uvt__process_force_fork = fork_path;
    test_opts(&o);
    o.pty = 1;
    tty_info(&f, &o, &sb);
    assert_string_equal(sb.buf, "isatty=111 devtty=ok ctty=1 fg=1 "
                                "term=xterm-256color size=80x24\r\n");
    sb_free(&sb);
    o.pty_cols = 132;
    o.pty_rows = 50;
    o.env = env;
    tty_info(&f, &o, &sb);
    assert_string_equal(sb.buf, "isatty=111 devtty=ok ctty=1 fg=1 "
                                "term=vt100 size=132x50\r\n");
    sb_free(&sb);
    test_opts(&o);
    tty_info(&f, &o, &sb);
    assert_string_equal(sb.buf, "isatty=000 devtty=ENXIO ctty=0 fg=0 "
                                "term=dumb size=0x0\n");
    sb_free(&sb);
  }
  uvt__process_force_fork = 0;
  /* Bad sizes, and fixed input bytes, do not go with a terminal. */
  test_opts(&o);
  o.command = "true";
  o.pty = 1;
  o.pty_cols = 0;
  assert_int_equal(uvt_process_start(f.reg, &o, NULL), UV_EINVAL);
  o.pty_cols = 80;
  o.pty_rows = 0;
  assert_int_equal(uvt_process_start(f.reg, &o, NULL), UV_EINVAL);
  o.pty_rows = 24;
  o.stdin_data = "x";
  o.stdin_len = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, NULL), UV_EINVAL);
  fixture_close(&f);
}

/* P-PTY-1: one merged stream, in the order written, with no "[stderr]"
 * section; the structured read has it all in `out`. */
static void test_pty_merged(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(
      start_pty(&f, NULL, "echo one; echo two >&2; echo three", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), 0);
  assert_string_equal(r.out, "one\r\ntwo\r\nthree\r\n");
  assert_int_equal(r.err_len, 0);
  assert_string_equal(r.err, "");
  assert_int_equal(r.exited, 1);
  assert_int_equal(r.exit_code, 0);
  uvt_process_read_cleanup(&r);
  wait_end(&w);
  fixture_close(&f);
}

/* P-PTY-1: a program that opens /dev/tty (a password prompt) talks to the
 * task's terminal; without pty it gets an error at once (ENXIO) instead
 * of hanging.  The helper and a shell's `read </dev/tty`. */
static void test_pty_dev_tty(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.pty = 1;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=open-tty", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "via-tty\r\n");
  wait_end(&w);
  sb_free(&sb);

  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=open-tty", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 3");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "[stderr]\nopen /dev/tty: ENXIO\n");
  wait_end(&w);
  sb_free(&sb);

  assert_int_equal(
      start_pty(&f, NULL, "read -r line </dev/tty && echo \"got:$line\"", id),
      0);
  assert_int_equal(wr(&f, id, "secret\n"), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_non_null(strstr(sb.buf, "got:secret\r\n"));
  wait_end(&w);
  sb_free(&sb);

  assert_int_equal(
      start_sh(&f, NULL, "read -r line </dev/tty; echo \"rc=$?\"", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_non_null(strstr(sb.buf, "rc=1\n"));
  assert_non_null(strstr(sb.buf, "/dev/tty"));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

typedef struct {
  pid_t sid;
} sid_arg_t;

static int no_sleep100(void *arg) {
  return session_live(((sid_arg_t *)arg)->sid, "sleep 100") == 0;
}

/* P-PTY-1: "\x03" goes through the line discipline: in an interactive
 * bash it interrupts the foreground job (`sleep 100`) and bash goes on;
 * in a non-interactive command it ends the task with SIGINT. */
static void test_pty_ctrl_c(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  const char *bash[] = {"bash", "--norc", "--noprofile", "-i", NULL};
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  sid_arg_t sa;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.argv = bash;
  o.pty = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sa.sid = task_pid(&f, id, NULL);
  assert_int_equal(wr(&f, id, "sleep 100\n"), 0);
  assert_true(session_has(&f, sa.sid, "sleep 100", 1));
  assert_int_equal(wr(&f, id, "\x03"), 0);
  assert_true(run_until(&f, no_sleep100, &sa, 5000));
  assert_int_equal(wr(&f, id, "echo after-$((40 + 2))\n"), 0);
  read_until_has(&f, id, NULL, &sb, "after-42\r\n");
  /* Job control worked: bash had its terminal. */
  assert_null(strstr(sb.buf, "no job control"));
  assert_int_equal(wr(&f, id, "exit 7\n"), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 7");
  wait_end(&w);
  sb_free(&sb);

  /* Without job control the Ctrl-C ends the task by SIGINT.  The shell
   * and its `sleep` die of the same SIGINT; a `sleep` still exiting when
   * the shell's reap is seen is not left running (P-LEFT-1). */
  assert_int_equal(start_pty(&f, NULL, "echo ready; sleep 100", id), 0);
  sa.sid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready");
  assert_true(session_has(&f, sa.sid, "sleep 100", 1));
  assert_int_equal(wr(&f, id, "\x03"), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGINT");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-PTY-1: uvt_process_resize() sets the window size and the foreground
 * job gets SIGWINCH (seen through a WINCH trap, `stty size` and `tput
 * cols`). */
static void test_pty_resize(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_pty(&f, NULL,
                             "stty size; tput cols; "
                             "trap 'echo winch $(stty size) $(tput cols)' "
                             "WINCH; echo ready; "
                             "while :; do sleep 0.05; done",
                             id),
                   0);
  read_until_has(&f, id, NULL, &sb, "ready");
  assert_non_null(strstr(sb.buf, "24 80\r\n80\r\nready"));
  assert_int_equal(uvt_process_resize(f.reg, id, NULL, 120, 40), 0);
  read_until_has(&f, id, NULL, &sb, "winch 40 120 120\r\n");
  assert_int_equal(uvt_process_resize(f.reg, id, NULL, 0, 40), UV_EINVAL);
  assert_int_equal(uvt_process_resize(f.reg, id, NULL, 40, 0), UV_EINVAL);
  kill_and_wait(&f, id, &w);
  assert_int_equal(uvt_process_resize(f.reg, id, NULL, 100, 30), UV_EPIPE);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-PTY-1: a REPL on a terminal (python3 -i: prompts, readline, echo);
 * close_stdin sends the terminal's end-of-file character, which ends it. */
static void test_pty_repl(void **state) {
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
  o.pty = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, NULL, &sb, ">>> ");
  assert_int_equal(wr(&f, id, "print(6 * 7)\r"), 0);
  read_until_has(&f, id, NULL, &sb, "42\r\n");
  read_until_has(&f, id, NULL, &sb, "42\r\n>>> ");
  assert_int_equal(uvt_process_close_stdin(f.reg, id, NULL), 0);
  assert_int_equal(wr(&f, id, "print(1)\n"), UV_EPIPE);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-PTY-1: what a full-screen program writes (alternate screen, cursor
 * moves, a title) reaches the host byte for byte; tput with the default
 * TERM gives xterm's sequences. */
static void test_pty_fullscreen(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  static const char want[] = "\033[?1049h\033[H\033[2J\033]0;title\007"
                             "\033[6;11HX\033[?1049l"
                             "\033[6;11H";
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(
      start_pty(&f, NULL,
                "printf '\\033[?1049h\\033[H\\033[2J\\033]0;title\\007"
                "\\033[6;11HX\\033[?1049l'; tput cup 5 10",
                id),
      0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, sizeof(want) - 1);
  assert_memory_equal(sb.buf, want, sizeof(want) - 1);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-PTY-2: a kill stops the whole session on a terminal too (background
 * jobs, `set -m` jobs, a TERM-ignoring program after the grace). */
static void test_pty_kill(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(
      start_pty(&f, NULL, "set -m; sleep 300 & sleep 300 & echo up; wait", id),
      0);
  sid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "up");
  assert_true(session_has(&f, sid, "sleep 300", 2));
  kill_and_wait(&f, id, &w);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_true(session_gone(&f, sid, 3000));
  wait_end(&w);
  sb_free(&sb);

  test_opts(&o);
  o.pty = 1;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=ignore-term", NULL, NULL, id), 0);
  sid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready");
  kill_and_wait(&f, id, &w);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  assert_true(session_gone(&f, sid, 3000));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

static void pattern(char *buf, size_t from, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    buf[i] = (char)('0' + (from + i) % 10);
}

/* P-PTY-2: the cap and its notice, and a read that never splits a UTF-8
 * sequence, on a terminal. */
static void test_pty_cap_utf8(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  char want[2048];
  size_t n;
  int pid;
  uvt_read_t r;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.pty = 1;
  o.output_cap_bytes = 1000;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=write-bytes", "5000", NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  n = (size_t)snprintf(want, sizeof(want), "[... 4000 bytes dropped ...]\n");
  pattern(want + n, 4000, 1000);
  assert_int_equal(sb.len, n + 1000);
  assert_memory_equal(sb.buf, want, n + 1000);
  wait_end(&w);
  sb_free(&sb);

  test_opts(&o);
  o.pty = 1;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=utf8-split", NULL, NULL, id), 0);
  pid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "a");
  run_for(&f, 50);
  assert_int_equal(uvt_read(f.reg, id, NULL, &r), 0);
  /* The two bytes of the three-byte character wait for the third. */
  assert_int_equal(r.len, 0);
  uvt_read_cleanup(&r);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "a\xe4\xbd\xa0"
                              "b\r\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-PTY-2: the end of a terminal's stream is EIO once every slave
 * descriptor closed; the bytes before it all arrive (C-12 on a terminal,
 * several times), and the task completes. */
static void test_pty_eio_tail(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  uvt_process_options_t o;
  int i;
  size_t lines;
  char *p;
  (void)state;

  fixture_init(&f, NULL);
  for (i = 0; i < 5; i++) {
    test_opts(&o);
    o.command = "seq 1 20000";
    o.pty = 1;
    o.output_cap_bytes = 1u << 20;
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    wait_task(&f, &w, id, 10000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    read_into(&f, id, NULL, &sb);
    lines = 0;
    for (p = sb.buf; (p = strstr(p, "\r\n")) != NULL; p += 2)
      lines++;
    assert_int_equal(lines, 20000);
    assert_int_equal(sb.len, 108894 + 20000); /* seq's bytes, plus a CR each */
    assert_memory_equal(sb.buf + sb.len - 7, "20000\r\n", 7);
    wait_end(&w);
    sb_free(&sb);
  }
  fixture_close(&f);
}

/* P-PTY-2: a background job that holds the terminal after the leader
 * exited (immune to the hang-up) keeps the task open for drain_ms only;
 * a kill of the ended task then stops it (P-KILL-6). */
static void test_pty_drain(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  uvt_kill_result_t kr;
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.pty = 1;
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=hold-stdout-ignore-hup",
                                NULL, NULL, id),
                   0);
  sid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: the holder is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  read_into(&f, id, NULL, &sb);
  assert_non_null(strstr(sb.buf, "leader done, holder "));
  /* The holder is still there: the drain, not its end, closed the task. */
  assert_true(session_live(sid, NULL) >= 1);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "cleanup", &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  assert_true(session_gone(&f, sid, 3000));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-PTY-2, P-SPAWN-5: the master side never reaches a child (of this task
 * or another, through either spawn path), and nothing is left open after
 * pty tasks of every ending. */
static void test_pty_no_leak(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char held[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int fds;
  int fork_path;
  uvt_agent_t a;
  dispose_t d;
  (void)state;

  fds = count_fds();
  fixture_init(&f, NULL);
  assert_int_equal(start_pty(&f, NULL, "sleep 30", held), 0);
  (void)task_pid(&f, held, NULL);
  for (fork_path = 0; fork_path <= 1; fork_path++) {
    uvt__process_force_fork = fork_path;
    test_opts(&o);
    assert_int_equal(
        start_helper(&f, NULL, &o, "--helper=check-fds", NULL, NULL, id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, "fds: none\n");
    wait_end(&w);
    sb_free(&sb);
    test_opts(&o);
    o.pty = 1;
    assert_int_equal(
        start_helper(&f, NULL, &o, "--helper=check-fds", NULL, NULL, id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, "fds: none\r\n");
    wait_end(&w);
    sb_free(&sb);
  }
  uvt__process_force_fork = 0;
  kill_and_wait(&f, held, &w);
  wait_end(&w);
  /* Disposal with pty tasks live (P-KILL-4). */
  agent_setup(&f, &a, "a", "s");
  memset(&d, 0, sizeof(d));
  a.data = &d;
  assert_int_equal(start_pty(&f, &a, "sleep 30 & sleep 30", id), 0);
  d.pgid = task_pid(&f, id, &a);
  assert_int_equal(start_pty(&f, &a, "echo x", id), 0);
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  assert_true(run_until(&f, disposed, &d, 10000));
  assert_int_equal(d.live_at_cb, 0);
  /* Registry close with a pty task live. */
  assert_int_equal(start_pty(&f, NULL, "sleep 30", id), 0);
  fixture_close(&f);
  assert_int_equal(count_fds(), fds);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_pty_terminal),   T(test_pty_merged), T(test_pty_dev_tty),
      T(test_pty_ctrl_c),     T(test_pty_resize), T(test_pty_repl),
      T(test_pty_fullscreen), T(test_pty_kill),   T(test_pty_cap_utf8),
      T(test_pty_eio_tail),   T(test_pty_drain),  T(test_pty_no_leak),
  };
  return PROCESS_TESTS("process-pty", tests);
}
