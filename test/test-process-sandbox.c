/* Sandboxed tasks (S-1, S-2, S-3): what a task inside bwrap can write,
 * read and reach, and that every guarantee of a task holds inside.  The
 * suite runs as whoever starts it; meson also runs it as `nobody`
 * (sandbox-as-nobody.sh) when the build runs as root. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-process-util.h"

/* A directory of the test's own under /tmp, removed by rm_rf(). */
static void make_dir(char buf[256], const char *tag) {
  snprintf(buf, 256, "/tmp/uvt-sbx-%s-XXXXXX", tag);
  assert_non_null(mkdtemp(buf));
}

static void rm_rf(const char *dir) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[PATH_MAX + 64];
  FILE *fp;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
}

static int exists(const char *dir, const char *name) {
  char path[PATH_MAX + 64];
  struct stat st;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return stat(path, &st) == 0;
}

static void mkdir_in(const char *dir, const char *name) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  assert_int_equal(mkdir(path, 0755), 0);
}

/* Entries of `dir` (files or directories), "." and ".." not counted. */
static int count_files(const char *dir) {
  char cmd[PATH_MAX + 64];
  FILE *fp;
  int n = -1;
  snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
  fp = popen(cmd, "r");
  assert_non_null(fp);
  assert_int_equal(fscanf(fp, "%d", &n), 1);
  pclose(fp);
  return n;
}

/* "sleep 444N<our pid>": a sleep no other run of the suite (the same
 * suite runs as root and as nobody at once) has; up to 8 at a time. */
static const char *sl(int n) {
  static char names[8][48];
  snprintf(names[n], sizeof(names[n]), "sleep 444%d%d", n, (int)getpid());
  return names[n];
}

/* Start `cmd` in sandbox `sb` with cwd `cwd`; wait for its end; the
 * output (all of it) in *sb_out, the snapshot in w. */
static void run_sandboxed(fixture_t *f, const uvt_sandbox_t *sb,
                          const char *cwd, const char *cmd, sbuf_t *out,
                          waitres_t *w) {
  uvt_process_options_t o;
  char id[UVT_ID_MAX];

  test_opts(&o);
  o.command = cmd;
  o.cwd = cwd;
  o.sandbox = sb;
  assert_int_equal(uvt_process_start(f->reg, &o, id), 0);
  wait_task(f, w, id, 20000, NULL);
  read_into(f, id, NULL, out);
}

/* ---------------------------------------------------------------------- */
/* S-1: the file system                                                    */

/* S-1: with FS_WORKSPACE the cwd is writable and nothing else is but a
 * private /tmp; with FS_READONLY the cwd is not, a writable path is. */
static void test_s1_writes(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char work[256];
  char extra[256];
  char outside[PATH_MAX];
  char cmd[4 * PATH_MAX];
  const char *writable[2];
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  make_dir(work, "work");
  make_dir(extra, "extra");
  /* Outside the workspace and not under /tmp (which is private inside):
   * the suite's own directory. */
  assert_non_null(getcwd(outside, sizeof(outside) - 32));
  strcat(outside, "/sbx-outside-XXXXXX");
  if (mkdtemp(outside) == NULL) {
    /* Not ours to write (run as nobody from root's build dir): /var/tmp
     * then, which is on the host's file system too. */
    snprintf(outside, sizeof(outside), "/var/tmp/uvt-sbx-out-XXXXXX");
    assert_non_null(mkdtemp(outside));
  }
  chmod(outside, 0777);
  fixture_init(&f, NULL);

  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  snprintf(cmd, sizeof(cmd),
           "echo in > inside.txt && echo wrote-inside; "
           "echo out > '%s/escaped.txt' || echo refused-outside; "
           "echo t > /tmp/uvt-sbx-private && echo wrote-tmp; "
           "echo h > \"$HOME/uvt-sbx-home\" || echo refused-home",
           outside);
  run_sandboxed(&f, &sb, work, cmd, &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_non_null(strstr(out.buf, "wrote-inside"));
  assert_non_null(strstr(out.buf, "refused-outside"));
  assert_non_null(strstr(out.buf, "wrote-tmp"));
  assert_true(strstr(out.buf, "Read-only file system") != NULL ||
              strstr(out.buf, "Permission denied") != NULL);
  assert_true(exists(work, "inside.txt"));
  assert_false(exists(outside, "escaped.txt"));
  assert_false(exists("/tmp", "uvt-sbx-private")); /* /tmp was its own */
  wait_end(&w);
  sb_free(&out);

  /* Read-only: the cwd refuses, the writable path takes the write. */
  writable[0] = extra;
  writable[1] = NULL;
  sb.fs = UVT_SANDBOX_FS_READONLY;
  sb.writable = writable;
  snprintf(cmd, sizeof(cmd),
           "echo in > ro.txt || echo refused-cwd; "
           "echo x > '%s/extra.txt' && echo wrote-extra",
           extra);
  run_sandboxed(&f, &sb, work, cmd, &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_non_null(strstr(out.buf, "refused-cwd"));
  assert_non_null(strstr(out.buf, "wrote-extra"));
  assert_false(exists(work, "ro.txt"));
  assert_true(exists(extra, "extra.txt"));
  wait_end(&w);
  sb_free(&out);

  /* The same command without a sandbox does write outside (the check
   * above can fail). */
  snprintf(cmd, sizeof(cmd), "echo out > '%s/escaped.txt'", outside);
  run_sandboxed(&f, NULL, work, cmd, &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_true(exists(outside, "escaped.txt"));
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
  rm_rf(work);
  rm_rf(extra);
  rm_rf(outside);
}

/* S-1: the hidden paths (by default ~/.ssh, ~/.netrc, ...) read as empty;
 * with an empty list they do not. */
static void test_s1_hidden(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char home[256];
  char ssh[PATH_MAX];
  const char *none[1] = {NULL};
  const char *cmd = "cat \"$HOME/.ssh/id_rsa\"; ls -A \"$HOME/.ssh\"; "
                    "cat \"$HOME/.netrc\" \"$HOME/.aws/credentials\"; "
                    "echo end";
  char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  make_dir(home, "home");
  snprintf(ssh, sizeof(ssh), "%s/.ssh", home);
  assert_int_equal(mkdir(ssh, 0700), 0);
  write_file(ssh, "id_rsa", "FAKE-PRIVATE-KEY\n");
  write_file(home, ".netrc", "machine x password FAKE-NETRC\n");
  /* ~/.aws as a symlink to a directory elsewhere: hidden where it points. */
  snprintf(ssh, sizeof(ssh), "%s/real-aws", home);
  assert_int_equal(mkdir(ssh, 0700), 0);
  write_file(ssh, "credentials", "FAKE-AWS\n");
  snprintf(ssh, sizeof(ssh), "%s/.aws", home);
  assert_int_equal(symlink("real-aws", ssh), 0);
  setenv("HOME", home, 1);
  fixture_init(&f, NULL);

  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  run_sandboxed(&f, &sb, home, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "end"));
  assert_null(strstr(out.buf, "FAKE-PRIVATE-KEY"));
  assert_null(strstr(out.buf, "FAKE-NETRC"));
  assert_null(strstr(out.buf, "FAKE-AWS"));
  assert_null(strstr(out.buf, "id_rsa\n")); /* the directory is empty */
  wait_end(&w);
  sb_free(&out);

  /* Nothing hidden: the same reads see the files. */
  sb.hidden = none;
  run_sandboxed(&f, &sb, home, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "FAKE-PRIVATE-KEY"));
  assert_non_null(strstr(out.buf, "FAKE-NETRC"));
  assert_non_null(strstr(out.buf, "FAKE-AWS"));
  wait_end(&w);
  sb_free(&out);

  fixture_close(&f);
  if (old_home != NULL)
    setenv("HOME", old_home, 1);
  else
    unsetenv("HOME");
  free(old_home);
  rm_rf(home);
}

/* S-1: the host's processes are out of sight and reach (the pid
 * namespace), and nothing read-only can be made writable again (as root:
 * every capability dropped). */
static void test_s1_host_processes(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char cmd[512];
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  snprintf(cmd, sizeof(cmd),
           "kill -0 %d 2>/dev/null && echo host-signalled || echo no-host; "
           "[ -e /proc/%d ] && echo host-visible || echo host-hidden; "
           "mount -o remount,rw / 2>/dev/null && echo remounted || "
           "echo no-remount",
           (int)getpid(), (int)getpid());
  fixture_init(&f, NULL);
  run_sandboxed(&f, &sb, NULL, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "no-host"));
  assert_non_null(strstr(out.buf, "no-remount"));
  /* Our pid may exist inside by chance (the sandbox numbers from 1): only
   * what kill -0 says is asserted; the line shows the rest. */
  wait_end(&w);
  sb_free(&out);
  /* Without a sandbox the same command reaches us (the check can fail). */
  run_sandboxed(&f, NULL, NULL, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "host-signalled"));
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* S-1: the network                                                        */

/* S-1: a server of the test's on 127.0.0.1 cannot be reached with
 * NET_NONE (the host's loopback included) and can with NET_HOST. */
static void test_s1_network(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  char cmd[256];
  sbuf_t out = {0};
  waitres_t w;
  int fd;
  (void)state;

  /* The kernel completes connections into the backlog: no accept needed. */
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 16), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  snprintf(cmd, sizeof(cmd),
           "if exec 3<>/dev/tcp/127.0.0.1/%d; then echo connected; "
           "else echo no-connection; fi",
           ntohs(sa.sin_port));
  fixture_init(&f, NULL);

  sb.network = UVT_SANDBOX_NET_NONE;
  run_sandboxed(&f, &sb, NULL, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "no-connection"));
  assert_non_null(strstr(out.buf, "Connection refused"));
  assert_null(strstr(out.buf, "\nconnected"));
  wait_end(&w);
  sb_free(&out);

  sb.network = UVT_SANDBOX_NET_HOST;
  run_sandboxed(&f, &sb, NULL, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "connected"));
  assert_null(strstr(out.buf, "no-connection"));
  wait_end(&w);
  sb_free(&out);

  fixture_close(&f);
  close(fd);
}

/* A listening Unix socket at `path`; its descriptor. */
static int unix_listener(const char *path) {
  struct sockaddr_un sa;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  assert_true(strlen(path) < sizeof(sa.sun_path));
  memcpy(sa.sun_path, path, strlen(path) + 1);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fd, 4), 0);
  return fd;
}

/* S-1: the Unix sockets a network namespace does not close (connect(2) on
 * a read-only mount works) are hidden too, whatever `hidden` says: the
 * ssh agent's ($SSH_AUTH_SOCK) and the user's runtime directory
 * ($XDG_RUNTIME_DIR: the session bus, through which `systemd-run --user`
 * would run anything outside). */
static void test_s1_sockets(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  const char *none[1] = {NULL};
  char dir[64];
  char agent[128];
  char rt[128];
  char bus[160];
  char cmd[1024];
  char *old_ssh =
      getenv("SSH_AUTH_SOCK") ? strdup(getenv("SSH_AUTH_SOCK")) : NULL;
  char *old_rt =
      getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;
  sbuf_t out = {0};
  waitres_t w;
  int fa;
  int fb;
  (void)state;

  /* Not under /tmp, which is private inside anyway. */
  snprintf(dir, sizeof(dir), "/var/tmp/uvt-sbx-sock-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(agent, sizeof(agent), "%s/agent.sock", dir);
  snprintf(rt, sizeof(rt), "%s/run", dir);
  assert_int_equal(mkdir(rt, 0700), 0);
  snprintf(bus, sizeof(bus), "%s/bus", rt);
  fa = unix_listener(agent);
  fb = unix_listener(bus);
  setenv("SSH_AUTH_SOCK", agent, 1);
  setenv("XDG_RUNTIME_DIR", rt, 1);
  snprintf(cmd, sizeof(cmd),
           "python3 -c 'import socket\n"
           "for p in (\"%s\", \"%s\"):\n"
           "  s = socket.socket(socket.AF_UNIX)\n"
           "  try:\n"
           "    s.connect(p); print(\"reached\", p)\n"
           "  except OSError as e:\n"
           "    print(\"refused\", p, e.strerror)\n'",
           agent, bus);
  fixture_init(&f, NULL);
  sb.hidden = none; /* hidden whatever the list says */
  sb.network = UVT_SANDBOX_NET_HOST;
  run_sandboxed(&f, &sb, NULL, cmd, &out, &w);
  assert_non_null(strstr(out.buf, "refused"));
  assert_null(strstr(out.buf, "reached"));
  wait_end(&w);
  sb_free(&out);
  /* Without a sandbox both are reached (the check can fail). */
  run_sandboxed(&f, NULL, NULL, cmd, &out, &w);
  assert_null(strstr(out.buf, "refused"));
  assert_non_null(strstr(out.buf, "reached"));
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
  close(fa);
  close(fb);
  if (old_ssh != NULL)
    setenv("SSH_AUTH_SOCK", old_ssh, 1);
  else
    unsetenv("SSH_AUTH_SOCK");
  if (old_rt != NULL)
    setenv("XDG_RUNTIME_DIR", old_rt, 1);
  else
    unsetenv("XDG_RUNTIME_DIR");
  free(old_ssh);
  free(old_rt);
  rm_rf(dir);
}

/* ---------------------------------------------------------------------- */
/* S-2: everything else holds inside                                       */

/* S-2, P-END-2: exit codes pass through; stdin_data reaches the command;
 * a death by a signal nobody sent reads as bwrap reports it (128 + N). */
static void test_s2_exit_codes_and_stdin(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  run_sandboxed(&f, &sb, NULL, "echo before; exit 3", &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 3");
  assert_string_equal(out.buf, "before\n");
  wait_end(&w);
  sb_free(&out);

  /* P-END-3: an exit status above 128 chosen by the command itself. */
  run_sandboxed(&f, &sb, NULL, "exit 130", &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 130");
  wait_end(&w);
  sb_free(&out);

  /* S-2: a death by SIGSEGV that nobody sent reads as one (bwrap alone
   * would say 128 + 11: "exit code: 139"). */
  run_sandboxed(&f, &sb, NULL, "kill -SEGV $$", &out, &w);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGSEGV");
  wait_end(&w);
  sb_free(&out);

  /* P-SPAWN-5 inside: stdio only (3 is ls's own directory). */
  run_sandboxed(&f, &sb, NULL, "ls /proc/self/fd | tr '\\n' ' '", &out, &w);
  assert_string_equal(out.buf, "0 1 2 3 ");
  wait_end(&w);
  sb_free(&out);

  /* argv mode, stdin bytes. */
  test_opts(&o);
  {
    static const char *const argv[] = {"cat", NULL};
    o.argv = argv;
  }
  o.stdin_data = "through the sandbox\n";
  o.stdin_len = strlen(o.stdin_data);
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 20000, NULL);
  read_into(&f, id, NULL, &out);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_string_equal(out.buf, "through the sandbox\n");
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* S-2: a sandboxed command's outcome reads exactly as the same command's
 * outside: exits (3, 130, 143, 137, 255: real exits above 128 are exits),
 * deaths by signals nobody sent (TERM, INT, HUP, USR1, SEGV, ABRT, KILL),
 * a shell whose last command died of a signal (bash's 128 + N, an exit),
 * a command that is not there (127); and a kill: a command that dies of
 * the kill's SIGTERM, one that exits 143 from its own trap, one that
 * ignores SIGTERM and gets SIGKILL; on a terminal too.  bwrap alone gave
 * "exit code: 128+N" for every death by signal (the fault). */
typedef struct {
  const char *cmd;
  int kill; /* 1: uvt_kill() once "ready" was printed */
  uvt_status_t status;
  const char *detail;
} honest_t;

static void honest_run(fixture_t *f, const uvt_sandbox_t *sb, const honest_t *c,
                       int pty, uvt_snapshot_t *out) {
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  sbuf_t text = {0};
  waitres_t w;

  test_opts(&o);
  o.command = c->cmd;
  o.sandbox = sb;
  o.pty = pty;
  o.grace_ms = 300;
  assert_int_equal(uvt_process_start(f->reg, &o, id), 0);
  if (c->kill) {
    read_until_has(f, id, NULL, &text, "ready");
    assert_int_equal(uvt_kill(f->reg, id, NULL, NULL, &kr), 0);
  }
  wait_task(f, &w, id, 20000, NULL);
  out->status = w.snap.status;
  out->detail = strdup(w.snap.detail);
  wait_end(&w);
  sb_free(&text);
}

static void test_s2_honest_status(void **state) {
  static const honest_t cases[] = {
      {"exit 0", 0, UVT_COMPLETED, "exit code: 0"},
      {"exit 3", 0, UVT_COMPLETED, "exit code: 3"},
      {"exit 130", 0, UVT_COMPLETED, "exit code: 130"},
      {"exit 143", 0, UVT_COMPLETED, "exit code: 143"},
      {"exit 137", 0, UVT_COMPLETED, "exit code: 137"},
      {"exit 255", 0, UVT_COMPLETED, "exit code: 255"},
      {"kill -TERM $$", 0, UVT_KILLED, "signal: SIGTERM"},
      {"kill -INT $$", 0, UVT_KILLED, "signal: SIGINT"},
      {"kill -HUP $$", 0, UVT_KILLED, "signal: SIGHUP"},
      {"kill -USR1 $$", 0, UVT_KILLED, "signal: SIGUSR1"},
      {"kill -SEGV $$", 0, UVT_KILLED, "signal: SIGSEGV"},
      {"ulimit -c 0; kill -ABRT $$", 0, UVT_KILLED, "signal: SIGABRT"},
      {"kill -KILL $$", 0, UVT_KILLED, "signal: SIGKILL"},
      {"sleep 5 & kill -TERM $!; wait $!", 0, UVT_COMPLETED, "exit code: 143"},
      {"no-such-command-uvt-s2", 0, UVT_COMPLETED, "exit code: 127"},
      {"echo ready; exec sleep 30", 1, UVT_KILLED, "signal: SIGTERM"},
      {"trap 'exit 143' TERM; echo ready; sleep 30 & wait", 1, UVT_KILLED,
       "exit code: 143 after kill request"},
      {"trap '' TERM; echo ready; sleep 30", 1, UVT_KILLED, "signal: SIGKILL"},
  };
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_snapshot_t in;
  uvt_snapshot_t out;
  size_t i;
  (void)state;

  fixture_init(&f, NULL);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int pty = i == 6 || i == 15; /* on a terminal too */
    honest_run(&f, NULL, &cases[i], pty, &out);
    honest_run(&f, &sb, &cases[i], pty, &in);
    if (in.status != cases[i].status ||
        strcmp(in.detail, cases[i].detail) != 0 || in.status != out.status ||
        strcmp(in.detail, out.detail) != 0)
      fail_msg("S-2: \"%s\": sandboxed \"%s\", outside \"%s\", wanted \"%s\"",
               cases[i].cmd, in.detail, out.detail, cases[i].detail);
    free((char *)in.detail);
    free((char *)out.detail);
  }
  fixture_close(&f);
}

/* S-2: a command that fills the status pipe itself (it is its keeper's
 * descriptor 3, open to the same user through /proc: $PPID is the keeper)
 * cannot make its task hang: the keeper's record is lost (the pipe is
 * full), the task still ends when the command does, with bwrap's reading
 * of the status; what the command wrote is not a record. */
static void test_s2_status_pipe_filled(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  run_sandboxed(&f, &sb, NULL,
                "head -c 65536 /dev/zero > /proc/$PPID/fd/3 && echo filled; "
                "exit 7",
                &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 7");
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* S-2: the pids.  uvt_process_pid() is bwrap's (the session and group
 * id), uvt_process_command_pid() the command's, a host pid of a process
 * in that session whose argv is the command's. */
static void test_s2_pids(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char argv0[PATH_MAX];
  uvt_kill_result_t kr;
  pstat_t st;
  waitres_t w;
  int pid;
  int cmd = 0;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  {
    static const char *const argv[] = {"sleep", "77", NULL};
    o.argv = argv;
  }
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  pid = task_pid(&f, id, NULL);
  t0 = now_ms();
  while ((cmd = uvt_process_command_pid(f.reg, id, NULL)) == 0 &&
         now_ms() - t0 < 10000)
    run_for(&f, 5);
  assert_true(cmd > 0);
  assert_int_not_equal(cmd, pid);
  assert_int_equal(read_stat(cmd, &st), 0);
  assert_int_equal(st.sid, pid);
  /* Until env has exec'd the command (the pid stays the same). */
  t0 = now_ms();
  while (!(proc_cmdline(cmd, argv0, sizeof(argv0)) > 0 &&
           strstr(argv0, "sleep 77") != NULL) &&
         now_ms() - t0 < 10000)
    run_for(&f, 5);
  assert_non_null(strstr(argv0, "sleep 77"));
  assert_int_equal(uvt_process_command_pid(f.reg, id, NULL), cmd);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  fixture_close(&f);
}

static int no_cmdline(void *arg) {
  return cmdline_count(arg) == 0;
}

typedef struct {
  fixture_t *f;
  const char *id;
} left_t;

/* Members still dying (the pid namespace's teardown) count until gone. */
static int no_leftovers(void *arg) {
  left_t *l = arg;
  return uvt_process_leftovers(l->f->reg, l->id, NULL) == 0;
}

/* The bomb's size: enough processes to need more than one signal pass,
 * few enough to start in time on a busy machine under a sanitizer. */
#define BOMB 100

static int has_bomb(void *arg) {
  (void)arg;
  return cmdline_count(sl(2)) >= BOMB;
}

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t *sb;
  const char *needle;
} until_t;

static int output_has(void *arg) {
  until_t *u = arg;
  read_into(u->f, u->id, NULL, u->sb);
  return u->sb->buf != NULL && strstr(u->sb->buf, u->needle) != NULL;
}

static int has_setsid(void *arg) {
  (void)arg;
  return cmdline_count(sl(1)) == 1;
}

/* S-2, P-KILL-5, P-KILL-7: one kill stops a sandboxed fork bomb (bounded:
 * BOMB sleeps, all ignoring SIGTERM), a child that left the session with
 * setsid, and the TERM-ignoring shell itself; nothing is left. */
static void test_s2_kill_all(void **state) {
  char cmd[256];
  until_t ut;
  fixture_t f;
  left_t lw;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  snprintf(cmd, sizeof(cmd),
           "trap '' TERM; setsid %s & i=0; "
           "while [ $i -lt %d ]; do %s & i=$((i+1)); done; "
           "echo ready; wait",
           sl(1), BOMB, sl(2));
  o.command = cmd;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  /* A long bound: forking the bomb takes seconds on a loaded machine. */
  ut.f = &f;
  ut.id = id;
  ut.sb = &out;
  ut.needle = "ready\n";
  assert_true(run_until(&f, output_has, &ut, 60000));
  assert_true(run_until(&f, has_bomb, NULL, 60000));
  assert_true(run_until(&f, has_setsid, NULL, 10000));
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  wait_task(&f, &w, id, 20000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  /* The pid namespace goes with its pid 1: the setsid child too. */
  assert_true(run_until(&f, no_cmdline, (void *)sl(2), 10000));
  assert_true(run_until(&f, no_cmdline, (void *)sl(1), 10000));
  lw.f = &f;
  lw.id = id;
  assert_true(run_until(&f, no_leftovers, &lw, 10000));
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* S-2, P-LEFT-1, P-KILL-6: a background job outlives its command and is
 * counted exactly (bwrap's pid 1, which holds the sandbox meanwhile, is
 * not the task's); a kill of the ended task stops it. */
static void test_s2_leftovers(void **state) {
  char cmd[64];
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char id[UVT_ID_MAX];
  uvt_process_options_t o;
  uvt_kill_result_t kr;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  snprintf(cmd, sizeof(cmd), "%s & exit 0", sl(3));
  o.command = cmd;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 1);
  assert_int_equal(cmdline_count(sl(3)), 1);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_true(run_until(&f, no_cmdline, (void *)sl(3), 10000));
  wait_end(&w);
  fixture_close(&f);
}

/* S-9: the leftover count of a sandboxed task counts what runs inside its
 * sandbox, also what left its session there (`setsid`); a kill of the
 * ended task stops both.  (The count missed the setsid child: the
 * session held only bwrap's pid 1, which is the sandbox's own.) */
static void test_s9_leftovers_inside(void **state) {
  char cmd[128];
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char id[UVT_ID_MAX];
  uvt_process_options_t o;
  uvt_kill_result_t kr;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  snprintf(cmd, sizeof(cmd), "%s & setsid %s & exit 0", sl(3), sl(4));
  o.command = cmd;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_true(proc_reached(sl(3), 0, 0, 10000) > 0);
  assert_true(proc_reached(sl(4), 0, 0, 10000) > 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 2 processes still running");
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 2);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_true(run_until(&f, no_cmdline, (void *)sl(3), 10000));
  assert_true(run_until(&f, no_cmdline, (void *)sl(4), 10000));
  wait_end(&w);
  fixture_close(&f);
}

/* S-9, P-KILL-6: a second kill of an ended task whose leftovers are being
 * stopped means "now", as a second kill of a running task does
 * (R-KILL-3): what ignores SIGTERM gets SIGKILL without waiting out the
 * task's grace (a minute here).  A shutdown stops ended tasks' leftovers
 * on its own clock so.  Sandboxed (bwrap's pid 1 ignores SIGTERM: the
 * normal case there) and not. */
static void test_s9_second_kill_now(void **state) {
  char cmd[128];
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char id[UVT_ID_MAX];
  uvt_process_options_t o;
  uvt_kill_result_t kr;
  waitres_t w;
  int round;
  (void)state;

  fixture_init(&f, NULL);
  for (round = 0; round < 2; round++) {
    test_opts(&o);
    snprintf(cmd, sizeof(cmd), "(trap '' TERM; exec %s) & exit 0", sl(5));
    o.command = cmd;
    o.grace_ms = 60000;
    o.sandbox = round == 0 ? &sb : NULL;
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    assert_true(proc_reached(sl(5), SIGTERM, 0, 10000) > 0);
    wait_task(&f, &w, id, 20000, NULL);
    assert_int_equal(w.snap.status, UVT_COMPLETED);
    /* The first kill: SIGTERM, ignored; the grace is a minute. */
    assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
    assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
    run_for(&f, 50);
    assert_int_equal(cmdline_count(sl(5)), 1);
    /* The second: now. */
    assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
    assert_true(run_until(&f, no_cmdline, (void *)sl(5), 10000));
    wait_end(&w);
  }
  fixture_close(&f);
}

/* S-9: a host killed without a guardian leaves no sandbox behind: the
 * status pipe's read end was the host's, so the sandbox's keeper sees it
 * go and sends SIGKILL to everything inside, a child that ignores
 * SIGTERM and one that left the session included.  The host is a child
 * of the test, SIGKILLed once both run. */
static void test_s9_host_killed(void **state) {
  int ready[2];
  char n6[48];
  char n7[48];
  char c;
  pid_t host;
  int status;
  uint64_t t0;
  (void)state;

  /* The names are the test's (sl() names them by the caller's pid). */
  snprintf(n6, sizeof(n6), "%s", sl(6));
  snprintf(n7, sizeof(n7), "%s", sl(7));
  assert_int_equal(pipe(ready), 0);
  host = fork();
  assert_true(host >= 0);
  if (host == 0) {
    fixture_t f;
    uvt_sandbox_t sb = {0};
    uvt_process_options_t o;
    char id[UVT_ID_MAX];
    char cmd[160];

    close(ready[0]);
    fixture_init(&f, NULL);
    test_opts(&o);
    snprintf(cmd, sizeof(cmd), "(trap '' TERM; exec %s) & setsid %s & wait", n6,
             n7);
    o.command = cmd;
    o.sandbox = &sb;
    if (uvt_process_start(f.reg, &o, id) != 0)
      _exit(1);
    if (proc_reached(n6, SIGTERM, 0, 10000) <= 0 ||
        proc_reached(n7, 0, 0, 10000) <= 0)
      _exit(1);
    if (write(ready[1], "r", 1) != 1)
      _exit(1);
    for (;;)
      pause();
  }
  close(ready[1]);
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  assert_int_equal(cmdline_count(n6), 1);
  assert_int_equal(cmdline_count(n7), 1);
  kill(host, SIGKILL);
  assert_int_equal(waitpid(host, &status, 0), host);
  t0 = now_ms();
  while ((cmdline_count(n6) > 0 || cmdline_count(n7) > 0) &&
         now_ms() - t0 < 10000)
    usleep(1000);
  assert_int_equal(cmdline_count(n6), 0);
  assert_int_equal(cmdline_count(n7), 0);
  /* The host's task leader (bwrap's monitor) was reparented to the test,
   * a subreaper: it ends with the sandbox; reap it. */
  while (waitpid(-1, &status, 0) > 0 || errno == EINTR)
    ;
}

/* S-2, P-KILL-7: the shell dies of the kill's SIGTERM at once, its job
 * ignores SIGTERM and outlives it (and so does bwrap's pid 1, which
 * ignores it too): after the grace both get SIGKILL, the task settles
 * once nothing is left, with the command's own answer to SIGTERM. */
static void test_s2_kill_term_ignorer_outlives(void **state) {
  char cmd[256];
  fixture_t f;
  left_t lw;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  snprintf(cmd, sizeof(cmd),
           "(trap '' TERM; exec %s) & setsid %s & echo ready; wait", sl(6),
           sl(7));
  o.command = cmd;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, NULL, &out, "ready\n");
  assert_true(proc_reached(sl(6), SIGTERM, 0, 10000) > 0);
  assert_true(proc_reached(sl(7), 0, 0, 10000) > 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 20000, NULL);
  /* S-2: the shell's death by the kill's SIGTERM, as outside (bwrap alone
   * said "exit code: 143 after kill request"). */
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  assert_int_equal(cmdline_count(sl(6)), 0);
  /* The setsid child went with the sandbox's pid 1. */
  assert_true(run_until(&f, no_cmdline, (void *)sl(7), 10000));
  lw.f = &f;
  lw.id = id;
  assert_true(run_until(&f, no_leftovers, &lw, 10000));
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* S-2, P-KILL-8: a chosen signal reaches the command, not the sandbox:
 * SIGUSR1 to a task whose shell traps it leaves the task running; SIGINT
 * ends a plain sleep, and the task with it. */
static void test_s2_signal(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "trap 'echo got-usr1' USR1; echo ready; "
              "while :; do sleep 0.05; done";
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, NULL, &out, "ready\n");
  task_pid(&f, id, NULL); /* its output may come before the pid does */
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGUSR1), 0);
  read_until_has(&f, id, NULL, &out, "got-usr1");
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_int_equal(s.status, UVT_RUNNING);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_process_signal(f.reg, id, NULL, SIGINT), 0);
  wait_task(&f, &w, id, 20000, NULL);
  /* S-2: the shell died of SIGINT, and reads so (bwrap alone: 130). */
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_string_equal(w.snap.detail, "signal: SIGINT");
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* S-2, P-LIMIT-1: the runtime limit stops a sandboxed task. */
static void test_s2_runtime_limit(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = sl(4);
  o.max_runtime_ms = 300;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_non_null(strstr(w.snap.detail, "timed out after"));
  assert_true(run_until(&f, no_cmdline, (void *)sl(4), 10000));
  wait_end(&w);
  fixture_close(&f);
}

/* S-2, P-PTY-1: a REPL on a terminal works inside; ^C interrupts the
 * command in the foreground, not the sandbox. */
static void test_s2_tty_repl(void **state) {
  char line[64];
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  sbuf_t out = {0};
  waitres_t w;
  const char *in;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "exec bash --norc --noprofile -i";
  o.pty = 1;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  in = "PS1='$ '; [ -t 0 ] && echo is-a-tty-$((6*7))\n";
  assert_int_equal(uvt_process_write(f.reg, id, NULL, in, strlen(in)), 0);
  read_until_has(&f, id, NULL, &out, "is-a-tty-42");
  snprintf(line, sizeof(line), "%s\n", sl(5));
  assert_int_equal(uvt_process_write(f.reg, id, NULL, line, strlen(line)), 0);
  assert_true(proc_reached(sl(5), 0, 0, 10000) > 0);
  assert_int_equal(uvt_process_write(f.reg, id, NULL, "\x03", 1), 0);
  assert_true(run_until(&f, no_cmdline, (void *)sl(5), 10000));
  in = "echo still-$((7*6))\n";
  assert_int_equal(uvt_process_write(f.reg, id, NULL, in, strlen(in)), 0);
  read_until_has(&f, id, NULL, &out, "still-42");
  in = "exit 5\n";
  assert_int_equal(uvt_process_write(f.reg, id, NULL, in, strlen(in)), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 5");
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* S-3: no sandbox, no run                                                 */

static void s3_refused(const char *bwrap, const char *reason) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char dir[256];
  size_t count = 99;
  uvt_snapshot_t *snaps = NULL;

  make_dir(dir, "s3");
  setenv("UVTASKS_BWRAP", bwrap, 1);
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "echo ran > ran.txt";
  o.cwd = dir;
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOTSUP);
  assert_true(f.warnings > 0);
  assert_non_null(strstr(f.last_warning, reason));
  /* Again: the answer is remembered, still refused. */
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOTSUP);
  assert_int_equal(uvt_list(f.reg, NULL, &snaps, &count), 0);
  assert_int_equal(count, 0);
  uvt_snapshots_free(snaps, count);
  run_for(&f, 50);
  assert_false(exists(dir, "ran.txt"));
  /* The same start without a sandbox runs (the check can fail). */
  o.sandbox = NULL;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  {
    waitres_t w;
    wait_task(&f, &w, id, 20000, NULL);
    wait_end(&w);
  }
  assert_true(exists(dir, "ran.txt"));
  fixture_close(&f);
  unsetenv("UVTASKS_BWRAP");
  rm_rf(dir);
}

/* S-3: no bwrap at all. */
static void test_s3_no_bwrap(void **state) {
  (void)state;
  s3_refused("/nonexistent/bwrap", "no bwrap at /nonexistent/bwrap");
}

/* S-3: a bwrap that cannot make the namespaces (as one does where user
 * namespaces are refused): its message is the reason. */
static void test_s3_bwrap_fails(void **state) {
  char dir[256];
  char path[PATH_MAX];
  (void)state;

  make_dir(dir, "fakebwrap");
  write_file(dir, "bwrap",
             "#!/bin/sh\necho 'bwrap: No permissions to creating new "
             "namespace, likely because the kernel does not allow "
             "non-privileged user namespaces.' >&2\nexit 1\n");
  snprintf(path, sizeof(path), "%s/bwrap", dir);
  assert_int_equal(chmod(path, 0755), 0);
  s3_refused(path, "No permissions to creating new namespace");
  rm_rf(dir);
}

/* S-3: UVTASKS_BWRAP naming something that is not a bwrap and exits 0
 * (/bin/true) must not pass the probe: every command then "completed"
 * with exit code 0 without having run. */
static void test_s3_not_a_bwrap(void **state) {
  (void)state;
  s3_refused("/bin/true", "did not run the probe's command");
}

/* ---------------------------------------------------------------------- */
/* S-5: the workspace is the host's                                        */

/* Start `cmd` in cwd `cwd` (NULL: the host's); the start's error. */
static int start_in(fixture_t *f, const uvt_sandbox_t *sb, const char *cwd,
                    const char *cmd) {
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  int err;

  test_opts(&o);
  o.command = cmd;
  o.cwd = cwd;
  o.sandbox = sb;
  err = uvt_process_start(f->reg, &o, id);
  if (err == 0) {
    wait_task(f, &w, id, 20000, NULL);
    wait_end(&w);
  }
  return err;
}

/* A directory outside /tmp (which is private inside) that the sandbox
 * must not be able to write: the suite's own, else /var/tmp. */
static void outside_dir(char buf[PATH_MAX], const char *tag) {
  assert_non_null(getcwd(buf, PATH_MAX - 64));
  snprintf(buf + strlen(buf), 64, "/sbx-%s-XXXXXX", tag);
  if (mkdtemp(buf) == NULL) {
    snprintf(buf, PATH_MAX, "/var/tmp/uvt-sbx-%s-XXXXXX", tag);
    assert_non_null(mkdtemp(buf));
  }
  chmod(buf, 0777);
}

/* S-5: with a workspace the cwd chooses nothing writable.  A cwd inside
 * the workspace or a writable path runs (its writes go where the binds
 * say); a cwd outside them is refused with UV_EPERM before anything runs,
 * however it is spelled: another directory, "/", "..", a link in the
 * workspace naming a directory outside, a chain of links ending outside,
 * a writable path's parent, the host's cwd when none is given.  A cwd
 * that does not exist is UV_ENOENT; a workspace that does not exist or
 * is no directory is UV_ENOENT or UV_ENOTDIR.  Without a workspace
 * (v3's behaviour, the fault: the model's cwd became the writable bind)
 * the same cwd outside is written. */
static void test_s5_workspace(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char ws[256];
  char extra[256];
  char out_dir[PATH_MAX];
  char path[PATH_MAX];
  char path2[PATH_MAX];
  char cmd[2 * PATH_MAX];
  const char *writable[2];
  (void)state;

  make_dir(ws, "ws");
  make_dir(extra, "ws-extra");
  outside_dir(out_dir, "ws-out");
  mkdir_in(ws, "sub");
  snprintf(path, sizeof(path), "%s/out-link", ws);
  assert_int_equal(symlink(out_dir, path), 0);
  snprintf(path, sizeof(path), "%s/chain1", ws);
  assert_int_equal(symlink("chain2", path), 0);
  snprintf(path, sizeof(path), "%s/chain2", ws);
  assert_int_equal(symlink("out-link", path), 0);
  snprintf(path, sizeof(path), "%s/in1", ws);
  assert_int_equal(symlink("in2", path), 0);
  snprintf(path, sizeof(path), "%s/in2", ws);
  assert_int_equal(symlink("sub", path), 0);
  writable[0] = extra;
  writable[1] = NULL;
  fixture_init(&f, NULL);
  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  sb.workspace = ws;
  sb.writable = writable;
  snprintf(cmd, sizeof(cmd), "echo x > here-$$; echo x > '%s/escaped-$$'",
           out_dir);

  /* Inside: the workspace, a directory of it, a chain of links that stays
   * in it, a writable path. */
  assert_int_equal(start_in(&f, &sb, ws, "echo x > at-root"), 0);
  assert_true(exists(ws, "at-root"));
  snprintf(path, sizeof(path), "%s/sub", ws);
  assert_int_equal(start_in(&f, &sb, path,
                            "echo x > in-sub && echo x > "
                            "../from-sub"),
                   0);
  assert_true(exists(ws, "sub/in-sub"));
  assert_true(exists(ws, "from-sub"));
  snprintf(path, sizeof(path), "%s/in1", ws);
  assert_int_equal(start_in(&f, &sb, path, "echo x > via-chain"), 0);
  assert_true(exists(ws, "sub/via-chain"));
  assert_int_equal(start_in(&f, &sb, extra, "echo x > in-extra"), 0);
  assert_true(exists(extra, "in-extra"));
  /* From inside, the outside is still read-only. */
  assert_int_equal(start_in(&f, &sb, ws, cmd), 0);
  assert_int_equal(count_files(out_dir), 0);

  /* Outside, however spelled: refused before anything runs. */
  assert_int_equal(start_in(&f, &sb, out_dir, cmd), UV_EPERM);
  assert_int_equal(start_in(&f, &sb, "/", cmd), UV_EPERM);
  snprintf(path, sizeof(path), "%s/..", ws);
  assert_int_equal(start_in(&f, &sb, path, cmd), UV_EPERM);
  snprintf(path, sizeof(path), "%s/sub/../..", ws);
  assert_int_equal(start_in(&f, &sb, path, cmd), UV_EPERM);
  snprintf(path, sizeof(path), "%s/out-link", ws);
  assert_int_equal(start_in(&f, &sb, path, cmd), UV_EPERM);
  snprintf(path, sizeof(path), "%s/chain1", ws);
  assert_int_equal(start_in(&f, &sb, path, cmd), UV_EPERM);
  snprintf(path, sizeof(path), "%s/..", extra);
  assert_int_equal(start_in(&f, &sb, path, cmd), UV_EPERM);
  assert_int_equal(start_in(&f, &sb, NULL, cmd), UV_EPERM);
  snprintf(path, sizeof(path), "%s/no-such-dir", ws);
  assert_int_equal(start_in(&f, &sb, path, cmd), UV_ENOENT);
  assert_int_equal(count_files(out_dir), 0);

  /* A workspace that is missing, or a file. */
  snprintf(path2, sizeof(path2), "%s/no-such-ws", ws);
  sb.workspace = path2;
  assert_int_equal(start_in(&f, &sb, ws, "true"), UV_ENOENT);
  write_file(ws, "a-file", "x\n");
  snprintf(path2, sizeof(path2), "%s/a-file", ws);
  assert_int_equal(start_in(&f, &sb, ws, "true"), UV_ENOTDIR);

  /* Without a workspace the cwd is the writable bind: the same start
   * writes outside (the checks above can fail). */
  sb.workspace = NULL;
  assert_int_equal(start_in(&f, &sb, out_dir, cmd), 0);
  assert_true(count_files(out_dir) > 0);
  fixture_close(&f);
  rm_rf(ws);
  rm_rf(extra);
  rm_rf(out_dir);
}

/* ---------------------------------------------------------------------- */
/* S-6: what stays read-only inside the writable places                    */

/* S-6: a readonly[] directory and file inside the workspace refuse every
 * write, removal and rename from inside, and so does a rename of the
 * directory's parent (which would move it out of its place); the rest
 * of the workspace stays writable.  Siblings: a symlink in the workspace
 * naming a directory of it (its target is what stays read-only), a path
 * outside every writable place (read-only already: nothing changes), a
 * writable path inside a read-only one (read-only wins), a missing path
 * (UV_ENOENT). */
static void test_s6_readonly(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char ws[256];
  char extra[256];
  char p1[PATH_MAX];
  char p2[PATH_MAX];
  char p3[PATH_MAX];
  char p4[PATH_MAX];
  char p5[PATH_MAX];
  char cmd[4 * PATH_MAX];
  const char *ro[6];
  const char *writable[2];
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  make_dir(ws, "ro");
  make_dir(extra, "ro-extra");
  mkdir_in(ws, "keep");
  mkdir_in(ws, "keep/sub");
  write_file(ws, "keep/sub/file", "orig\n");
  write_file(ws, "keep2", "orig\n");
  mkdir_in(ws, "real");
  write_file(ws, "real/x", "orig\n");
  snprintf(p1, sizeof(p1), "%s/link", ws);
  assert_int_equal(symlink("real", p1), 0);
  mkdir_in(ws, "outer");
  mkdir_in(ws, "outer/inner");
  snprintf(p1, sizeof(p1), "%s/keep/sub", ws);
  snprintf(p2, sizeof(p2), "%s/keep2", ws);
  snprintf(p3, sizeof(p3), "%s/link", ws);
  snprintf(p4, sizeof(p4), "/etc");
  snprintf(p5, sizeof(p5), "%s/outer", ws);
  ro[0] = p1;
  ro[1] = p2;
  ro[2] = p3;
  ro[3] = p4;
  ro[4] = p5;
  ro[5] = NULL;
  {
    static char inner[PATH_MAX];
    snprintf(inner, sizeof(inner), "%s/outer/inner", ws);
    writable[0] = inner;
    writable[1] = NULL;
  }
  fixture_init(&f, NULL);
  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  sb.readonly = ro;
  sb.writable = writable;
  snprintf(cmd, sizeof(cmd),
           "echo x > keep/sub/new || echo refused-new; "
           "echo x >> keep/sub/file || echo refused-append; "
           "echo x > keep2 || echo refused-file; "
           "rm -rf keep/sub 2>/dev/null; [ -d keep/sub ] && echo still-there; "
           "mv keep/sub keep/moved 2>/dev/null || echo refused-rename; "
           "mv keep keep-moved 2>/dev/null || echo refused-parent; "
           "ln -sfn /tmp keep/sub 2>/dev/null; [ -d keep/sub ] && "
           "[ ! -L keep/sub ] && echo not-replaced; "
           "echo x > link/y || echo refused-through-link; "
           "echo x > real/z || echo refused-target; "
           "echo x > outer/inner/w || echo refused-inner; "
           "echo ok > keep/beside && echo wrote-beside; "
           "echo ok > free && echo wrote-free");
  run_sandboxed(&f, &sb, ws, cmd, &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_non_null(strstr(out.buf, "refused-new"));
  assert_non_null(strstr(out.buf, "refused-append"));
  assert_non_null(strstr(out.buf, "refused-file"));
  assert_non_null(strstr(out.buf, "still-there"));
  assert_non_null(strstr(out.buf, "refused-rename"));
  assert_non_null(strstr(out.buf, "refused-parent"));
  assert_non_null(strstr(out.buf, "not-replaced"));
  assert_non_null(strstr(out.buf, "refused-through-link"));
  assert_non_null(strstr(out.buf, "refused-target"));
  assert_non_null(strstr(out.buf, "refused-inner"));
  assert_non_null(strstr(out.buf, "wrote-beside"));
  assert_non_null(strstr(out.buf, "wrote-free"));
  assert_false(exists(ws, "keep/sub/new"));
  assert_false(exists(ws, "keep-moved"));
  assert_false(exists(ws, "real/z"));
  assert_false(exists(ws, "outer/inner/w"));
  assert_true(exists(ws, "keep/sub/file"));
  assert_true(exists(ws, "keep/beside"));
  wait_end(&w);
  sb_free(&out);

  /* The same command without readonly[] writes everywhere (the checks
   * above can fail). */
  sb.readonly = NULL;
  run_sandboxed(&f, &sb, ws,
                "echo x > keep/sub/new && echo x > real/z && "
                "echo x > outer/inner/w && echo wrote-all",
                &out, &w);
  assert_non_null(strstr(out.buf, "wrote-all"));
  assert_true(exists(ws, "keep/sub/new"));
  wait_end(&w);
  sb_free(&out);

  /* A missing path is an error at the start. */
  {
    uvt_process_options_t o;
    char id[UVT_ID_MAX];
    const char *missing[] = {"/nonexistent/ro", NULL};
    test_opts(&o);
    o.command = "true";
    o.cwd = ws;
    sb.readonly = missing;
    o.sandbox = &sb;
    assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  }
  fixture_close(&f);
  rm_rf(ws);
  rm_rf(extra);
}

static void sh_ok(const char *fmt, const char *a1, const char *a2) {
  char cmd[4 * PATH_MAX];
  snprintf(cmd, sizeof(cmd), fmt, a1, a2);
  assert_int_equal(system(cmd), 0);
}

/* S-6: what the host's own git runs later stays read-only in a writable
 * root's repository: its hooks, its config (so core.fsmonitor,
 * core.hooksPath, an alias cannot be set), the directory core.hooksPath
 * names (.husky), a direct submodule's hooks, a hooks directory that was
 * missing (made empty), a .git that is a file; .git cannot be moved away.
 * Siblings: the workspace and a writable path are both roots; objects and
 * refs stay writable (a commit works inside); writable_git = 1 lifts it
 * (the checks can fail). */
static void test_s6_git(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char ws[256];
  char w2[256];
  char w3[256];
  char w4[256];
  char cmd[8 * PATH_MAX];
  const char *writable[4];
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  if (system("command -v git >/dev/null 2>&1") != 0)
    skip();
  make_dir(ws, "git");
  make_dir(w2, "git2");
  make_dir(w3, "git3");
  make_dir(w4, "git4");
  sh_ok("cd '%s' && git init -q && git config core.hooksPath .husky && "
        "mkdir -p .husky .git/modules/sub/hooks && "
        "git config -f .git/modules/sub/config core.bare false%s",
        ws, "");
  sh_ok("cd '%s' && git init -q%s", w2, "");
  /* A repository without a hooks directory. */
  sh_ok("cd '%s' && git init -q && rm -rf .git/hooks%s", w3, "");
  /* A work tree whose .git is a link to its git directory. */
  sh_ok("printf 'gitdir: %s/.git\\n' > '%s/.git'", w2, w4);
  writable[0] = w2;
  writable[1] = w3;
  writable[2] = w4;
  writable[3] = NULL;
  fixture_init(&f, NULL);
  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  sb.workspace = ws;
  sb.writable = writable;
  snprintf(
      cmd, sizeof(cmd),
      "echo evil > .git/hooks/pre-commit || echo refused-hook; "
      "echo x >> .git/config || echo refused-config; "
      "git config core.fsmonitor evil 2>/dev/null || echo refused-git-config; "
      "mv .git .git-old 2>/dev/null || echo refused-move; "
      "echo evil > .husky/pre-commit || echo refused-husky; "
      "echo evil > .git/modules/sub/hooks/post-checkout || echo refused-sub; "
      "echo x >> .git/modules/sub/config || echo refused-sub-config; "
      "echo evil > '%s/.git/hooks/pre-commit' || echo refused-w2; "
      "echo evil > '%s/.git/hooks/pre-commit' || echo refused-made; "
      "echo 'gitdir: /tmp/x' > '%s/.git' || echo refused-gitfile; "
      "echo y > file && git add file && git -c user.email=a@b -c user.name=n "
      "commit -qm m && echo committed",
      w2, w3, w4);
  run_sandboxed(&f, &sb, ws, cmd, &out, &w);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_non_null(strstr(out.buf, "refused-hook"));
  assert_non_null(strstr(out.buf, "refused-config"));
  assert_non_null(strstr(out.buf, "refused-git-config"));
  assert_non_null(strstr(out.buf, "refused-move"));
  assert_non_null(strstr(out.buf, "refused-husky"));
  assert_non_null(strstr(out.buf, "refused-sub\n"));
  assert_non_null(strstr(out.buf, "refused-sub-config"));
  assert_non_null(strstr(out.buf, "refused-w2"));
  assert_non_null(strstr(out.buf, "refused-made"));
  assert_non_null(strstr(out.buf, "refused-gitfile"));
  assert_non_null(strstr(out.buf, "committed"));
  assert_false(exists(ws, ".git/hooks/pre-commit"));
  assert_false(exists(ws, ".husky/pre-commit"));
  assert_false(exists(w2, ".git/hooks/pre-commit"));
  assert_true(exists(w3, ".git/hooks")); /* made, empty */
  assert_false(exists(w3, ".git/hooks/pre-commit"));
  sh_ok("cd '%s' && ! git config core.fsmonitor%s", ws, "");
  sh_ok("grep -q 'gitdir: %s/.git' '%s/.git'", w2, w4);
  wait_end(&w);
  sb_free(&out);

  /* writable_git: the same writes go through. */
  sb.writable_git = 1;
  run_sandboxed(&f, &sb, ws,
                "echo evil > .git/hooks/pre-commit && echo x >> .git/config "
                "&& echo evil > .husky/pre-commit && echo wrote-all",
                &out, &w);
  assert_non_null(strstr(out.buf, "wrote-all"));
  assert_true(exists(ws, ".git/hooks/pre-commit"));
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
  rm_rf(ws);
  rm_rf(w2);
  rm_rf(w3);
  rm_rf(w4);
}

/* S-6, siblings found by an attack on v4: what the host's git reads also
 * lies in a nested submodule's git directory
 * (.git/modules/mid/modules/leaf), in a submodule whose name has a '/'
 * (.git/modules/libs/json), and in the files a config includes
 * (include.path, includeIf.<cond>.path: relative to the including file,
 * included again from an included file, or from the user's own
 * ~/.gitconfig); an include that names a missing file must not be made
 * by the task (it is made empty and read-only).  The workspace itself
 * stays writable. */
static void test_s6_git_siblings(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  char ws[256];
  char home[256];
  char cmd[4 * PATH_MAX];
  char *old_home = getenv("HOME") != NULL ? strdup(getenv("HOME")) : NULL;
  sbuf_t out = {0};
  waitres_t w;
  (void)state;

  if (system("command -v git >/dev/null 2>&1") != 0)
    skip();
  make_dir(ws, "gitsib");
  make_dir(home, "githome");
  sh_ok(
      "cd '%s' && git init -q && "
      "mkdir -p .git/modules/mid/hooks .git/modules/mid/modules/leaf/hooks "
      ".git/modules/libs/json/hooks && "
      "for d in mid mid/modules/leaf libs/json; do "
      "echo 'ref: refs/heads/main' > .git/modules/$d/HEAD && "
      "git config -f .git/modules/$d/config core.bare false; done && "
      "printf '[include]\\n\\tpath = inner.gitconfig\\n' > shared.gitconfig && "
      "touch inner.gitconfig home-included.gitconfig && "
      "git config include.path ../shared.gitconfig && "
      "git config 'includeIf.gitdir:/.path' ../missing.gitconfig%s",
      ws, "");
  snprintf(cmd, sizeof(cmd),
           "printf '[include]\\n\\tpath = %s/home-included.gitconfig\\n' > "
           "'%s/.gitconfig'",
           ws, home);
  assert_int_equal(system(cmd), 0);
  setenv("HOME", home, 1);
  fixture_init(&f, NULL);
  sb.fs = UVT_SANDBOX_FS_WORKSPACE;
  sb.workspace = ws;
  run_sandboxed(
      &f, &sb, ws,
      "echo x >> .git/modules/mid/modules/leaf/config || echo refused-nested; "
      "echo e > .git/modules/mid/modules/leaf/hooks/post-checkout || "
      "echo refused-nested-hook; "
      "echo x >> .git/modules/libs/json/config || echo refused-slash; "
      "echo x >> shared.gitconfig || echo refused-include; "
      "echo x >> inner.gitconfig || echo refused-inner; "
      "echo x > missing.gitconfig || echo refused-missing; "
      "echo x >> home-included.gitconfig || echo refused-home; "
      "echo y > other.txt && echo wrote-other",
      &out, &w);
  if (old_home != NULL)
    setenv("HOME", old_home, 1);
  free(old_home);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_non_null(strstr(out.buf, "refused-nested\n"));
  assert_non_null(strstr(out.buf, "refused-nested-hook"));
  assert_non_null(strstr(out.buf, "refused-slash"));
  assert_non_null(strstr(out.buf, "refused-include"));
  assert_non_null(strstr(out.buf, "refused-inner"));
  assert_non_null(strstr(out.buf, "refused-missing"));
  assert_non_null(strstr(out.buf, "refused-home"));
  assert_non_null(strstr(out.buf, "wrote-other"));
  assert_false(exists(ws, ".git/modules/mid/modules/leaf/hooks/post-checkout"));
  /* The missing include is there now, empty: nothing of the task's. */
  sh_ok("test -f '%s/missing.gitconfig' && ! test -s '%s/missing.gitconfig'",
        ws, ws);
  sh_ok("cd '%s' && git status >/dev/null%s", ws, "");
  wait_end(&w);
  sb_free(&out);
  fixture_close(&f);
  rm_rf(ws);
  rm_rf(home);
}

/* S-3 for the library's program inside the sandbox (S-2, S-9):
 * UVTASKS_SANDBOX_HELPER naming nothing runnable refuses the start, with
 * the reason logged, rather than a sandbox without an honest status and a
 * lifeline. */
static void test_s3_no_helper(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char *old = getenv("UVTASKS_SANDBOX_HELPER")
                  ? strdup(getenv("UVTASKS_SANDBOX_HELPER"))
                  : NULL;
  (void)state;

  setenv("UVTASKS_SANDBOX_HELPER", "/nonexistent/uvtasks-sandbox", 1);
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "true";
  o.sandbox = &sb;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOTSUP);
  assert_non_null(strstr(f.last_warning, "/nonexistent/uvtasks-sandbox"));
  fixture_close(&f);
  if (old != NULL)
    setenv("UVTASKS_SANDBOX_HELPER", old, 1);
  else
    unsetenv("UVTASKS_SANDBOX_HELPER");
  free(old);
}

/* S-1: bad options. */
static void test_s1_bad_options(void **state) {
  fixture_t f;
  uvt_sandbox_t sb = {0};
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *missing[] = {"/nonexistent/dir", NULL};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "true";
  o.sandbox = &sb;
  sb.fs = 7;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  sb.fs = 0;
  sb.network = 9;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  sb.network = 0;
  sb.writable = missing;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_s1_writes),
      T(test_s1_hidden),
      T(test_s1_network),
      T(test_s1_host_processes),
      T(test_s1_sockets),
      T(test_s1_bad_options),
      T(test_s5_workspace),
      T(test_s6_readonly),
      T(test_s6_git),
      T(test_s6_git_siblings),
      T(test_s2_exit_codes_and_stdin),
      T(test_s2_honest_status),
      T(test_s2_status_pipe_filled),
      T(test_s2_pids),
      T(test_s2_kill_all),
      T(test_s2_leftovers),
      T(test_s9_leftovers_inside),
      T(test_s9_second_kill_now),
      T(test_s9_host_killed),
      T(test_s2_kill_term_ignorer_outlives),
      T(test_s2_signal),
      T(test_s2_runtime_limit),
      T(test_s2_tty_repl),
      T(test_s3_no_bwrap),
      T(test_s3_bwrap_fails),
      T(test_s3_not_a_bwrap),
      T(test_s3_no_helper),
  };
  return PROCESS_TESTS("process-sandbox", tests);
}
