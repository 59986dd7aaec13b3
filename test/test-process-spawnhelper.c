/* The spawn helper (P-SPAWN-7): leaders made by the helper are the host's
 * own children with the same session, stdio and descriptors as the
 * spawner threads' (the whole process suites also run with the helper on:
 * meson's "process-helper" suite); and its faults: the helper killed in a
 * spawn storm, a full descriptor table on either side, a host that forks
 * or execs, a registry closed with spawns out. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process/process-internal.h"
#include "test-process-util.h"

/* ---- the helper ------------------------------------------------------- */

static uvt__procs_t *procs_of(fixture_t *f) {
  uvt__procs_t *ps = NULL;
  assert_int_equal(uvt__procs_get(f->reg, &ps), 0);
  return ps;
}

/* Where the helper cannot run (uvt_process_spawn_helper()'s UV_ENOTSUP). */
static int no_helper_here(void) {
#if defined(__SANITIZE_THREAD__)
  return 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return 1;
#endif
#endif
  return under_valgrind();
}

/* Turn the helper on; skip where it cannot run (valgrind, TSan). */
static uvt__helper_t *helper_on(fixture_t *f) {
  int rc = uvt_process_spawn_helper(f->reg, 1);
  if (rc == UV_ENOTSUP && no_helper_here()) {
    fixture_close(f);
    skip();
  }
  assert_int_equal(rc, 0);
  assert_non_null(procs_of(f)->helper);
  assert_true(uvt__helper_count(procs_of(f)->helper) > 0);
  assert_true(uvt__helper_pid(procs_of(f)->helper, 0) > 0);
  return procs_of(f)->helper;
}

/* The helpers' pids (one per spawner thread), 0-terminated. */
typedef struct {
  pid_t pid[5];
} hpids_t;

static void helper_pids(uvt__helper_t *h, hpids_t *out) {
  unsigned i;
  memset(out, 0, sizeof(*out));
  for (i = 0; i < uvt__helper_count(h) && i < 4; i++) {
    out->pid[i] = uvt__helper_pid(h, i);
    assert_true(out->pid[i] > 0);
  }
}

static void kill_all(const hpids_t *p, int sig) {
  int i;
  for (i = 0; p->pid[i] > 0; i++)
    assert_int_equal(kill(p->pid[i], sig), 0);
}

/* Process `pid` has exited (gone, or a zombie of someone else). */
static int exited(void *arg) {
  pid_t pid = *(pid_t *)arg;
  pstat_t st;
  return read_stat(pid, &st) != 0 || st.state == 'Z';
}

/* Gone altogether: reaped. */
static int reaped(void *arg) {
  pid_t pid = *(pid_t *)arg;
  char path[64];
  struct stat st;
  snprintf(path, sizeof(path), "/proc/%d", (int)pid);
  return stat(path, &st) != 0;
}

/* Every helper of `arg` (an hpids_t) reaped. */
static int all_reaped(void *arg) {
  hpids_t *p = arg;
  int i;
  for (i = 0; p->pid[i] > 0; i++)
    if (!reaped(&p->pid[i]))
      return 0;
  return 1;
}

/* Poll without a loop turn (the helper is not the loop's business). */
static int poll_until(int (*pred)(void *), void *arg, uint64_t max_ms) {
  uint64_t end = now_ms() + max_ms;
  while (!pred(arg)) {
    if (now_ms() > end)
      return 0;
    usleep(1000);
  }
  return 1;
}

/* ---- the tests -------------------------------------------------------- */

/* P-SPAWN-7: through the helper, a leader is the host's own child, in a
 * session of its own, with stdin /dev/null and no descriptor above 2; in
 * shell mode too; a start error only the exec sees settles the task
 * `failed`, "spawn failed: ENOEXEC", with the child reaped; and the
 * helper answered each (its count grows). */
static void test_helper_spawns(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  char cmd[2 * PATH_MAX + 64];
  char dir[64];
  char path[128];
  const char *av[2];
  waitres_t w;
  sbuf_t sb = {0};
  pstat_t st;
  unsigned served;
  int leak = open("/dev/null", O_RDONLY); /* not close-on-exec */
  int pid;
  FILE *fp;
  (void)state;

  assert_true(leak >= 0);
  fixture_init(&f, NULL);
  h = helper_on(&f);
  served = uvt__helper_served(h);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=wait-usr1", NULL, NULL, id), 0);
  read_until_has(&f, id, NULL, &sb, "ready");
  pid = task_pid(&f, id, NULL);
  assert_true(pid > 0);
  assert_int_equal(read_stat(pid, &st), 0);
  assert_int_equal(st.ppid, getpid());
  assert_int_equal(st.sid, pid);
  assert_int_equal(st.pgrp, pid);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  assert_int_equal(uvt__helper_served(h), served + 1);

  /* P-SPAWN-5 and P-SPAWN-1 through the helper. */
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=check-fds", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "fds: none\n");
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  snprintf(cmd, sizeof(cmd), "'%s' --helper=ids; '%s' --helper=check-fds",
           self_exe, self_exe);
  assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_non_null(strstr(sb.buf, "stdin=devnull"));
  assert_non_null(strstr(sb.buf, "fds: none\n"));
  wait_end(&w);
  sb_free(&sb);
  assert_int_equal(uvt__helper_served(h), served + 3);

  /* P-SPAWN-4: an exec error, as the spawner threads report it. */
  snprintf(dir, sizeof(dir), "/tmp/uvt-bin-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/noexec", dir);
  fp = fopen(path, "w");
  assert_non_null(fp);
  fputs("\x7f"
        "ELFgarbage",
        fp);
  assert_int_equal(fclose(fp), 0);
  assert_int_equal(chmod(path, 0755), 0);
  av[0] = path;
  av[1] = NULL;
  test_opts(&o);
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_FAILED, "spawn failed: ENOEXEC");
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), served + 4);
  /* The failed child was reaped: no child of ours is left. */
  assert_int_equal(waitpid(-1, NULL, WNOHANG), 0); /* the helper only */
  unlink(path);
  rmdir(dir);
  fixture_close(&f);
  close(leak);
}

/* P-SPAWN-7: a pty task through the helper (the child opens the terminal
 * by its path). */
static void test_helper_pty(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  unsigned served;
  (void)state;

  fixture_init(&f, NULL);
  h = helper_on(&f);
  served = uvt__helper_served(h);
  test_opts(&o);
  o.pty = 1;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=tty-info", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_non_null(strstr(sb.buf, "isatty=111"));
  assert_non_null(strstr(sb.buf, "ctty=1"));
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  assert_int_equal(uvt__helper_served(h), served + 1);
  fixture_close(&f);
}

typedef struct {
  fixture_t *f;
  char ids[64][UVT_ID_MAX];
  waitres_t w[64];
  int n;
} storm_t;

static int storm_done(void *arg) {
  storm_t *s = arg;
  int i;
  for (i = 0; i < s->n; i++)
    if (!s->w[i].done)
      return 0;
  return 1;
}

/* P-SPAWN-7, fault: the helper killed in the middle of a spawn storm
 * (`sig`).  The spawner threads take over: every task completes, nothing
 * hangs, the helper is reaped (no zombie), no descriptor is left, and
 * turning the helper on again says it is gone. */
static void helper_killed_storm(int sig) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  storm_t *s = calloc(1, sizeof(*s));
  hpids_t hp;
  unsigned k;
  int fds;
  int i;

  assert_non_null(s);
  fds = count_fds();
  fixture_init(&f, NULL);
  h = helper_on(&f);
  helper_pids(h, &hp);
  s->f = &f;
  s->n = 48;
  test_opts(&o);
  for (i = 0; i < s->n; i++) {
    assert_int_equal(
        start_helper(&f, NULL, &o, "--helper=exit", "0", NULL, s->ids[i]), 0);
    wait_begin(&f, &s->w[i], s->ids[i], 30000, NULL);
    if (i == s->n / 3) {
      /* Let some spawns through it first. */
      run_until(&f, never, NULL, 0);
      kill_all(&hp, sig);
    }
  }
  assert_true(run_until(&f, storm_done, s, 30000));
  for (i = 0; i < s->n; i++) {
    assert_int_equal(s->w[i].status, 0);
    assert_outcome(&s->w[i].snap, UVT_COMPLETED, "exit code: 0");
    wait_end(&s->w[i]);
  }
  /* Reaped by the registry (its keeper), not left a zombie. */
  assert_true(poll_until(all_reaped, &hp, 10000));
  for (k = 0; k < uvt__helper_count(h); k++)
    assert_int_equal(uvt__helper_pid(h, k), 0);
  assert_int_equal(uvt_process_spawn_helper(f.reg, 1), UV_ENOTSUP);
  fixture_close(&f);
  assert_int_equal(count_fds(), fds);
  free(s);
}

static void test_helper_killed_storm(void **state) {
  (void)state;
  helper_killed_storm(SIGKILL);
}

/* Sibling: the signals a helper can be sent that are not SIGKILL
 * (a host's process group getting SIGINT or SIGTERM, a SIGSEGV from
 * outside) are blocked in it: it keeps serving. */
static void test_helper_ignores_signals(void **state) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGCHLD};
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  waitres_t w;
  hpids_t hp;
  size_t i;
  unsigned k;
  (void)state;

  fixture_init(&f, NULL);
  h = helper_on(&f);
  helper_pids(h, &hp);
  for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    kill_all(&hp, sigs[i]);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "0", NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), 1);
  for (k = 0; k < uvt__helper_count(h); k++)
    assert_int_equal(uvt__helper_pid(h, k), hp.pid[k]);
  fixture_close(&f);
  assert_true(all_reaped(&hp));
}

/* P-SPAWN-7, fault: the helper killed with a spawn in hand (held at the
 * hook, the helper killed before the spawn is let go): the spawner thread
 * spawns it itself; the task completes. */
static void test_helper_killed_idle(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  waitres_t w;
  hpids_t hp;
  (void)state;

  fixture_init(&f, NULL);
  h = helper_on(&f);
  helper_pids(h, &hp);
  spawn_gate_close(1);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "3", NULL, id),
                   0);
  kill_all(&hp, SIGKILL);
  assert_true(poll_until(all_reaped, &hp, 10000));
  spawn_gate_open(1);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 3");
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), 0);
  spawn_gate_remove();
  fixture_close(&f);
}

/* P-SPAWN-7, fault: a full descriptor table.  On the helper's side (its
 * limit lowered so that no received descriptor fits: MSG_CTRUNC) the
 * spawner thread spawns the task itself; on the host's side (every
 * descriptor taken after the start, so the leader's pidfd cannot be
 * opened) the leader is watched through SIGCHLD.  Both complete. */
static void test_helper_emfile(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  waitres_t w;
  struct rlimit rl;
  struct rlimit old;
  unsigned served;
  hpids_t hp;
  int held[4096];
  int n = 0;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  h = helper_on(&f);
  helper_pids(h, &hp);
  served = uvt__helper_served(h);
  /* The helper's side: 0..3 are taken, nothing more fits. */
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  rl.rlim_cur = 4;
  rl.rlim_max = old.rlim_max;
  for (i = 0; hp.pid[i] > 0; i++)
    assert_int_equal(prlimit(hp.pid[i], RLIMIT_NOFILE, &rl, NULL), 0);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "4", NULL, id),
                   0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 4");
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), served);
  for (i = 0; hp.pid[i] > 0; i++)
    assert_int_equal(prlimit(hp.pid[i], RLIMIT_NOFILE, &old, NULL), 0);

  /* The host's side. */
  rl.rlim_cur = 256;
  rl.rlim_max = old.rlim_max;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
  spawn_gate_close(1);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "5", NULL, id),
                   0);
  for (;;) {
    int fd = dup(0);
    if (fd < 0)
      break;
    assert_true(n < 4096);
    held[n++] = fd;
  }
  assert_int_equal(errno, EMFILE);
  spawn_gate_open(1);
  /* Wait for the answer with the table still full. */
  while (procs_of(&f)->spawns_out > 0)
    run_until(&f, never, NULL, 5);
  for (i = 0; i < n; i++)
    close(held[i]);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 5");
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), served + 1);
  spawn_gate_remove();
  fixture_close(&f);
}

/* P-SPAWN-7, fault: a forked child of the host never talks to its
 * parent's helper (the request's address would mean nothing there): its
 * spawn is refused by the helper path (the caller spawns itself), and the
 * helper answered nothing for it. */
static void test_helper_host_fork(void **state) {
  fixture_t f;
  uvt__helper_t *h;
  unsigned served;
  int status;
  pid_t child;
  (void)state;

  fixture_init(&f, NULL);
  h = helper_on(&f);
  served = uvt__helper_served(h);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    uvt__spawn_t sp;
    pid_t pid = 0;
    char *argv[] = {(char *)"/bin/true", NULL};
    char *envp[] = {NULL};
    int r;
    memset(&sp, 0, sizeof(sp));
    sp.file = "/bin/true";
    sp.argv = argv;
    sp.envp = envp;
    sp.fd[0] = -1;
    sp.fd[1] = dup(2);
    sp.fd[2] = dup(2);
    r = uvt__helper_spawn(h, &sp, &pid);
    if (r == 0 && pid > 0)
      waitpid(pid, NULL, 0);
    _exit(r == UVT__HELPER_NO ? 0 : 1);
  }
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(uvt__helper_served(h), served);
  fixture_close(&f);
}

/* A fresh host (`--exec-host FD`, run by test_helper_host_exec): a
 * registry with the helper, one task, the helper's pid to FD, then exec
 * of a program that waits (without closing the registry). */
static int exec_host(int out) {
  uv_loop_t loop;
  uvt_registry_t *reg;
  uvt__procs_t *ps;
  uvt_process_options_t o;
  const char *av[] = {"/bin/true", NULL};
  char id[UVT_ID_MAX];
  hpids_t hp;
  unsigned k;
  int rc;

  uvt_surface_t surface;

  if (uv_loop_init(&loop) != 0 || uvt_registry_new(&loop, NULL, &reg) != 0 ||
      uvt_surface_attach(reg, &surface, "test") != 0)
    return 2;
  if (uvt_process_spawn_helper(reg, 1) != 0 || uvt__procs_get(reg, &ps) != 0)
    return 3;
  uvt_process_options_init(&o);
  o.argv = av;
  if ((rc = uvt_process_start(reg, &o, id)) != 0) {
    fprintf(stderr, "start: %s\n", uv_err_name(rc));
    return 4;
  }
  /* Settled: its leader reaped, so only the helper is left. */
  for (;;) {
    uvt_snapshot_t snap;
    int live;
    if (uvt_get(reg, id, NULL, &snap) != 0)
      return 8;
    live = snap.status == UVT_RUNNING;
    uvt_snapshot_cleanup(&snap);
    if (!live)
      break;
    uv_run(&loop, UV_RUN_ONCE);
  }
  memset(&hp, 0, sizeof(hp));
  for (k = 0; k < uvt__helper_count(ps->helper) && k < 4; k++)
    hp.pid[k] = uvt__helper_pid(ps->helper, k);
  if (hp.pid[0] <= 0 || uvt__helper_served(ps->helper) != 1)
    return 5;
  if (write(out, &hp, sizeof(hp)) != (ssize_t)sizeof(hp))
    return 6;
  execl(self_exe, self_exe, "--helper=sleep", "30000", (char *)NULL);
  return 7;
}

/* P-SPAWN-7, fault: a host that execs (without closing its registry):
 * the helper ends (end of file on its close-on-exec socket, and its
 * keeper thread's death) while the new program runs. */
static void test_helper_host_exec(void **state) {
  int p[2];
  pid_t child;
  hpids_t hp;
  int status;
  int i;
  (void)state;

  if (no_helper_here())
    skip();
  assert_int_equal(pipe(p), 0);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    char fd[16];
    close(p[0]);
    snprintf(fd, sizeof(fd), "%d", p[1]);
    execl(self_exe, self_exe, "--exec-host", fd, (char *)NULL);
    _exit(1);
  }
  close(p[1]);
  assert_int_equal(read(p[0], &hp, sizeof(hp)), (ssize_t)sizeof(hp));
  close(p[0]);
  assert_true(hp.pid[0] > 0);
  /* The exec'd program does not reap: a helper is a zombie once it has
   * exited. */
  for (i = 0; hp.pid[i] > 0; i++)
    assert_true(poll_until(exited, &hp.pid[i], 10000));
  assert_int_equal(waitpid(child, &status, WNOHANG), 0); /* still running */
  kill(child, SIGKILL);
  assert_int_equal(waitpid(child, &status, 0), child);
}

/* P-SPAWN-7, fault: a registry closed with spawns out (held at the hook)
 * closes once they are answered, and its helper is reaped. */
static void test_helper_close_in_flight(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  hpids_t hp;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  h = helper_on(&f);
  helper_pids(h, &hp);
  spawn_gate_close(1);
  test_opts(&o);
  for (i = 0; i < 4; i++)
    assert_int_equal(
        start_helper(&f, NULL, &o, "--helper=sleep", "20000", NULL, id), 0);
  spawn_gate_open(4);
  fixture_close(&f);
  spawn_gate_remove();
  assert_true(all_reaped(&hp));
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child at all */
  assert_int_equal(errno, ECHILD);
}

/* ---- a stopped helper and the registry's close ------------------------ */

static atomic_int decided; /* spawns past the hook's phase 1 */

static void count_decided(int phase) {
  if (phase == 1)
    atomic_fetch_add(&decided, 1);
}

/* Every helper of `arg` (an hpids_t) stopped (state T). */
static int all_stopped(void *arg) {
  hpids_t *p = arg;
  pstat_t st;
  int i;
  for (i = 0; p->pid[i] > 0; i++)
    if (read_stat(p->pid[i], &st) != 0 || st.state != 'T')
      return 0;
  return 1;
}

typedef struct {
  uv_loop_t *loop;
  int want;           /* spawns handed to the stopped helpers */
  waitres_t w[4];     /* a wait on each (pending waits get the end) */
  int closed;         /* close callbacks */
  int open_at_close;  /* handles not closing when the close callback ran */
} held_t;

static int held_decided(void *arg) {
  held_t *hd = arg;
  return atomic_load(&decided) >= hd->want;
}

static int held_ended_all(void *arg) {
  held_t *hd = arg;
  int i;
  for (i = 0; i < hd->want; i++)
    if (!hd->w[i].done)
      return 0;
  return 1;
}

static void held_closed(void *data) {
  held_t *hd = data;
  hd->closed++;
  hd->open_at_close = open_handles(hd->loop);
}

/* P-SPAWN-7 with R-CLOSE-2, fault: helpers stopped (SIGSTOP) with spawns
 * in hand past the teardown grace.  The tasks end at the grace, the close
 * waits while the helpers are stopped, and once they run again (and make
 * the children they were asked for) it stops and reaps those children
 * before its callback: when the callback runs no handle of the library
 * is left on the loop.  (It ran with a task's handles still open and its
 * kill timer then read the freed registry: found by a new user's host.) */
static void test_helper_stopped_close(void **state) {
  fixture_t f;
  uvt_options_t ro;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  held_t hd;
  hpids_t hp;
  uint64_t closed_at;
  int i;
  (void)state;

  uvt_options_init(&ro);
  ro.teardown_grace_ms = 100;
  fixture_init(&f, &ro);
  h = helper_on(&f);
  helper_pids(h, &hp);
  kill_all(&hp, SIGSTOP);
  assert_true(poll_until(all_stopped, &hp, 10000));
  memset(&hd, 0, sizeof(hd));
  hd.loop = &f.loop;
  hd.want = (int)uvt__helper_count(h);
  assert_true(hd.want >= 1 && hd.want <= 4);
  atomic_store(&decided, 0);
  uvt__process_spawn_hook = count_decided;
  test_opts(&o);
  o.grace_ms = 100;
  for (i = 0; i < hd.want; i++) {
    assert_int_equal(
        start_helper(&f, NULL, &o, "--helper=sleep", "20000", NULL, id), 0);
    wait_begin(&f, &hd.w[i], id, 600000, NULL);
  }
  /* Each spawner thread has handed its request to its stopped helper. */
  assert_true(poll_until(held_decided, &hd, 10000));
  uvt__process_spawn_hook = NULL;
  uvt__process_kill_give_up_ms = 50;
  closed_at = now_ms();
  assert_int_equal(uvt_registry_close(f.reg, held_closed, &hd), 0);
  f.reg = NULL;
  /* The teardown grace passes: each task ends, force-failed. */
  fixture_run_until(&f, held_ended_all, &hd);
  for (i = 0; i < hd.want; i++) {
    assert_int_equal(hd.w[i].snap.status, UVT_FAILED);
    wait_end(&hd.w[i]);
  }
  assert_int_equal(hd.closed, 0); /* the helpers hold their spawns */
  /* The condition of the fault is time itself: the kill's window (its
   * grace, then how long SIGKILL may go unanswered) has passed before the
   * children exist, as with helpers stopped for longer than that. */
  while (now_ms() - closed_at <= o.grace_ms + 50 + 50)
    usleep(10000);
  kill_all(&hp, SIGCONT);
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(hd.closed, 1);
  assert_int_equal(hd.open_at_close, 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_true(all_reaped(&hp));
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child at all */
  assert_int_equal(errno, ECHILD);
  uvt__process_kill_give_up_ms = 10000;
}

static int thread_rc;

static void call_from_thread(void *arg) {
  fixture_t *f = arg;
  thread_rc = uvt_process_spawn_helper(f->reg, 1);
}

/* P-SPAWN-7's option: errors, and P-THREAD-1 (another thread is refused
 * before anything is touched); off again means later starts spawn on the
 * threads, and on again needs no new helper. */
static void test_helper_option(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt__helper_t *h;
  char id[UVT_ID_MAX];
  waitres_t w;
  uv_thread_t t;
  unsigned served;
  (void)state;

  assert_int_equal(uvt_process_spawn_helper(NULL, 1), UV_EINVAL);
  fixture_init(&f, NULL);
  assert_int_equal(uv_thread_create(&t, call_from_thread, &f), 0);
  assert_int_equal(uv_thread_join(&t), 0);
  assert_int_equal(thread_rc, UVT_ETHREAD);
  h = helper_on(&f);
  served = uvt__helper_served(h);
  assert_int_equal(uvt_process_spawn_helper(f.reg, 0), 0);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "0", NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), served);
  assert_int_equal(uvt_process_spawn_helper(f.reg, 1), 0);
  assert_ptr_equal(procs_of(&f)->helper, h);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "0", NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  assert_int_equal(uvt__helper_served(h), served + 1);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--exec-host") == 0) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (n <= 0)
      return 1;
    self_exe[n] = '\0';
    return exec_host(atoi(argv[2]));
  }
  const struct CMUnitTest tests[] = {
      T(test_helper_spawns),          T(test_helper_pty),
      T(test_helper_killed_storm),    T(test_helper_ignores_signals),
      T(test_helper_killed_idle),     T(test_helper_emfile),
      T(test_helper_host_fork),       T(test_helper_host_exec),
      T(test_helper_close_in_flight), T(test_helper_stopped_close),
      T(test_helper_option),
  };
  return PROCESS_TESTS("process-spawnhelper", tests);
}
