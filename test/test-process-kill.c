/* Stopping process tasks (P-KILL-*) and cases C-02, C-03, C-07, C-13. */
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

#include "process/process-internal.h"
#include "test-process-util.h"

/* ---------------------------------------------------------------------- */
/* Kill                                                                    */

/* C-07 (first half), P-KILL-1, P-KILL-2: a killed sleep is `killed`,
 * "signal: SIGTERM", reported, and stopping in between. */
static void test_c07_kill_term(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  uvt_snapshot_t s;
  waitres_t w;
  pid_t pgid;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  assert_int_equal(start_sh(&f, &a, "sleep 100", id), 0);
  pgid = task_pid(&f, id, &a);
  assert_int_equal(uvt_kill(f.reg, id, &a, "enough", &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(uvt_get(f.reg, id, &a, &s), 0);
  assert_int_equal(s.status, UVT_STOPPING);
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  assert_int_equal(w.snap.reported, 1);
  assert_string_equal(w.snap.kill_reason, "enough");
  assert_true(group_gone(&f, pgid));
  wait_end(&w);
  fixture_close(&f);
}

/* C-07 (second half), P-KILL-2: a leader that exits by itself after the
 * request is `killed`, "exit code: 0 after kill request". */
static void test_c07_exit_after_kill(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  assert_int_equal(
      start_sh(&f, &a, "trap 'exit 0' TERM; echo ready; sleep 100 & wait", id),
      0);
  read_until_has(&f, id, &a, &sb, "ready\n");
  assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_KILLED, "exit code: 0 after kill request");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* C-03 (second half), P-KILL-1: TERM ignored, SIGKILL after the grace. */
static void test_c03_kill_grace(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  uint64_t t0;
  pid_t pgid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=ignore-term", NULL, NULL, id), 0);
  pgid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  assert_true(w.at_ms - t0 >= 190);
  assert_true(group_gone(&f, pgid));
  wait_end(&w);
  sb_free(&sb);

  /* The shell form of the case. */
  assert_int_equal(
      start_sh(&f, NULL, "trap '' TERM; echo ready; sleep 1000", id), 0);
  pgid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  assert_true(group_gone(&f, pgid));
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-KILL-1, R-KILL-3: a second cancel sends SIGKILL at once. */
static void test_kill_twice(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.grace_ms = 20000;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=ignore-term", NULL, NULL, id), 0);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(kr, UVT_KILL_REQUESTED);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  assert_true(w.at_ms - t0 < 10000);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* ---- a task that outlives the registry's close ------------------------ */

typedef struct {
  uv_loop_t *loop;
  pid_t sid;
  int closed;
  int open_at_close;  /* handles not closing when the callback ran */
  int session_at_close; /* 0: no process of the task's session left */
} close_seen_t;

static void close_seen(void *data) {
  close_seen_t *c = data;
  c->closed++;
  c->open_at_close = open_handles(c->loop);
  c->session_at_close = kill(-c->sid, 0) == 0 || errno != ESRCH;
}

/* R-CLOSE-2 with R-AGENT-4 and P-KILL-4: a task the registry's close
 * force-fails (it ignores SIGTERM and its grace, 20 s, is longer than
 * teardown_grace_ms) gets SIGKILL at the force-fail, and the close
 * callback runs once nothing of it is left: no handle of ours on the
 * loop, no process of its session (it ran with the task's timers still
 * armed, and they read the freed registry after it). */
static void test_close_force_failed(void **state) {
  fixture_t f;
  uvt_options_t ro;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  close_seen_t c;
  sbuf_t sb;
  (void)state;

  uvt_options_init(&ro);
  ro.teardown_grace_ms = 100;
  fixture_init(&f, &ro);
  test_opts(&o);
  o.command = "trap '' TERM; echo ready; while :; do sleep 1; done";
  o.grace_ms = 20000;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  memset(&c, 0, sizeof(c));
  c.loop = &f.loop;
  c.sid = task_pid(&f, id, NULL);
  memset(&sb, 0, sizeof(sb));
  read_until_has(&f, id, NULL, &sb, "ready"); /* the trap is set */
  sb_free(&sb);
  assert_int_equal(uvt_registry_close(f.reg, close_seen, &c), 0);
  f.reg = NULL;
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.closed, 1);
  assert_int_equal(c.open_at_close, 0);
  assert_int_equal(c.session_at_close, 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* P-KILL-2, P-KILL-3: a leader that already exited keeps its honest
 * outcome, and nothing is signalled after its reap: the grandchild holding
 * stdout is still alive after the kill and the settle. */
static void test_kill_after_exit(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  pid_t pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.drain_ms = 400;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=hold-stdout", NULL, NULL, id), 0);
  pid = task_pid(&f, id, NULL);
  /* The library reaps the leader; then the pid is gone. */
  assert_true(run_until(&f, leader_gone, &pid, 10000));
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: the holder is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  assert_int_equal(w.snap.reported, 1);
  wait_end(&w);
  /* P-KILL-7: the kill, which came after the leader's own exit, keeps
   * its outcome and stops what it left (TERM, KILL after the grace). */
  assert_true(group_gone(&f, pid));
  fixture_close(&f);
  assert_int_equal(group_live(pid), 0);
}

/* C-03 (first half): the script's EXIT trap runs on kill; nothing of its
 * group survives. */
static void test_c03_trap_cleanup(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  char file[] = "/tmp/uvt-trap-XXXXXX";
  char cmd[256];
  char got[64];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t pgid;
  int fd;
  ssize_t n;
  (void)state;

  fd = mkstemp(file);
  assert_true(fd >= 0);
  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  snprintf(cmd, sizeof(cmd),
           "trap 'echo cleanup >> %s' EXIT; echo ready; sleep 1000 & wait",
           file);
  assert_int_equal(start_sh(&f, &a, cmd, id), 0);
  pgid = task_pid(&f, id, &a);
  read_until_has(&f, id, &a, &sb, "ready\n");
  /* Killed between its fork and exec, the background child would run the
   * trap as well (bash); kill once `sleep` runs. */
  assert_true(run_until(&f, group_runs_sleep, &pgid, 10000));
  assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, &a);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_true(group_gone(&f, pgid));
  n = read(fd, got, sizeof(got) - 1);
  assert_true(n >= 0);
  got[n] = '\0';
  assert_string_equal(got, "cleanup\n");
  close(fd);
  unlink(file);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* C-02, P-KILL-4: background jobs do not outlive their owner. */
static void test_c02_dispose(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  dispose_t d;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  memset(&d, 0, sizeof(d));
  a.data = &d;
  assert_int_equal(
      start_sh(&f, &a, "for i in 1 2 3; do yes >/dev/null & done; sleep 0.2",
               id),
      0);
  d.pgid = task_pid(&f, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 3 processes still running");
  assert_true(group_live(d.pgid) >= 3);
  wait_end(&w);
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  fixture_run_until(&f, disposed, &d);
  assert_int_equal(d.calls, 1);
  assert_int_equal(d.live_at_cb, 0);
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), UVT_ENOTASK);
  fixture_close(&f);
}

/* P-KILL-4: survivors that ignore SIGTERM get SIGKILL after the grace;
 * disposal waits for the group to be gone. */
static void test_quiesce_ignore_term(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  dispose_t d;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  memset(&d, 0, sizeof(d));
  a.data = &d;
  test_opts(&o);
  assert_int_equal(start_helper(&f, &a, &o, "--helper=hold-stdout-ignore-term",
                                NULL, NULL, id),
                   0);
  d.pgid = task_pid(&f, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  assert_int_equal(group_live(d.pgid), 1);
  wait_end(&w);
  t0 = now_ms();
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  fixture_run_until(&f, disposed, &d);
  assert_int_equal(d.calls, 1);
  assert_int_equal(d.live_at_cb, 0);
  assert_true(d.at_ms - t0 >= 190);
  fixture_close(&f);
}

/* P-KILL-4: a live task at registry disposal: cancelled, settled, and its
 * group's survivors stopped before the close callback. */
static void test_registry_close_live(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  pid_t pgid;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(
      start_sh(&f, NULL, "trap '' TERM; sleep 1000 & echo ready; wait", id), 0);
  pgid = task_pid(&f, id, NULL);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  fixture_close(&f);
  assert_int_equal(group_live(pgid), 0);
  sb_free(&sb);
}

/* P-KILL-4 through R-FORGET-1: forgetting a finished task stops the group
 * members its leader left running. */
static void test_forget_quiesce(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  pid_t pgid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o,
                                "--helper=hold-stdout-ignore-term", NULL, NULL,
                                id),
                   0);
  pgid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  wait_end(&w);
  assert_int_equal(group_live(pgid), 1);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  /* TERM is ignored: SIGKILL follows after the grace. */
  assert_true(group_gone(&f, pgid));
  run_for(&f, 20);
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), UVT_ENOTASK);
  fixture_close(&f);
}

/* C-29, P-KILL-5: a task is every process of its session.  `set -m` gives
 * each background job a process group of its own; none of them escapes a
 * kill, the runtime limit, or disposal of a finished task. */
static void test_c29_set_m_jobs(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  dispose_t d;
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  test_opts(&o);
  o.owner = &a;

  /* The case: a kill. */
  o.command = "set -m; sleep 300 & sleep 300 & echo up; wait";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, &a);
  read_until_has(&f, id, &a, &sb, "up\n");
  assert_true(session_has(&f, sid, "sleep 300", 2));
  assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, &a);
  assert_int_equal(w.snap.status, UVT_KILLED);
  /* Within the grace (200 ms), with slack for a loaded machine. */
  assert_true(session_gone(&f, sid, 2000));
  wait_end(&w);
  sb_free(&sb);

  /* The runtime limit. */
  o.max_runtime_ms = 300;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_true(session_gone(&f, sid, 2000));
  wait_end(&w);
  o.max_runtime_ms = 0;

  /* Disposal of a task that ended and left its jobs behind. */
  o.command = "set -m; sleep 300 & sleep 300 & echo up";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 2 processes still running");
  assert_true(session_has(&f, sid, "sleep 300", 2));
  wait_end(&w);
  memset(&d, 0, sizeof(d));
  a.data = &d;
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  fixture_run_until(&f, disposed, &d);
  assert_int_equal(d.calls, 1);
  assert_int_equal(session_live(sid, NULL), 0);
  fixture_close(&f);
}

/* The registry's record and the producer's state of `id` (white box). */
static uvt__proc_t *proc_of(fixture_t *f, const char *id, uvt_task_t **t) {
  assert_int_equal(uvt_task_lookup(f->reg, id, NULL, t), 0);
  return uvt_task_arg(*t);
}

typedef struct {
  fixture_t *f;
  const char *id;
  const uvt_agent_t *caller;
  int n;
} leftovers_wait_t;

static int leftovers_at_most(void *arg) {
  leftovers_wait_t *w = arg;
  int r = uvt_process_leftovers(w->f->reg, w->id, w->caller);
  assert_true(r >= 0);
  return r <= w->n;
}

/* Interface 2 of P-KILL-6: uvt_process_leftovers counts the live processes
 * of a task's session, behind the fence. */
static void test_leftovers(void **state) {
  fixture_t f;
  uvt_agent_t a, b;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char fid[UVT_ID_MAX];
  fake_t fk;
  uvt_kill_result_t kr;
  waitres_t w;
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  agent_setup(&f, &b, "B", "S2");
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, &a, &o, "--helper=sleep", "10000", NULL, id), 0);
  /* Nothing while the spawn is out (P-SPAWN-6), the leader after. */
  task_pid(&f, id, &a);
  assert_int_equal(uvt_process_leftovers(f.reg, id, &a), 1);
  assert_int_equal(uvt_process_leftovers(f.reg, id, &b), UVT_EFOREIGN);
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), UVT_EFOREIGN);
  assert_int_equal(uvt_process_leftovers(f.reg, "bash-99", &a), UVT_ENOTASK);
  assert_int_equal(uvt_process_leftovers(NULL, id, &a), UV_EINVAL);
  assert_int_equal(uvt_process_leftovers(f.reg, NULL, &a), UV_EINVAL);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, NULL, NULL, fid), 0);
  assert_int_equal(uvt_process_leftovers(f.reg, fid, NULL), UV_EINVAL);
  assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, &a);
  assert_int_equal(uvt_process_leftovers(f.reg, id, &a), 0);
  wait_end(&w);

  /* An ended task that left two jobs, one in a group of its own. */
  o.command = "sleep 300 & set -m; sleep 300 & echo started";
  o.argv = NULL;
  o.owner = NULL;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, NULL);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 2 processes still running");
  wait_end(&w);
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 2);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  assert_true(session_gone(&f, sid, 3000));
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), UVT_ENOTASK);
  fixture_close(&f);
}

/* P-KILL-6, producer side (interface 1): the quiesce hook, called for a
 * task that already ended outside any disposal (as the registry does on a
 * kill of the ended task), stops what the task left in its session
 * (SIGTERM, SIGKILL after grace_ms) and leaves the outcome and the record
 * as they were; called again once that is done, it has nothing to do. */
static void test_quiesce_hook_after_end(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_task_t *t;
  uvt__proc_t *p;
  uvt_snapshot_t s;
  waitres_t w;
  leftovers_wait_t lw;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "sleep 300 & set -m; sleep 300 & echo started";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 2 processes still running");
  wait_end(&w);
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 2);
  p = proc_of(&f, id, &t);
  assert_int_equal(uvt_task_hooks(t)->quiesce(t), 1);
  memset(&lw, 0, sizeof(lw));
  lw.f = &f;
  lw.id = id;
  lw.n = 0;
  assert_true(run_until(&f, leftovers_at_most, &lw, 3000));
  run_for(&f, 30);
  assert_int_equal(p->quiescing, 0);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  /* P-LEFT-1: the detail it settled with stays as it was. */
  assert_outcome(&s, UVT_COMPLETED, "exit code: 0; 2 processes still running");
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_task_hooks(t)->quiesce(t), 0);

  /* A leftover that ignores SIGTERM gets SIGKILL after the grace. */
  o.command = NULL;
  assert_int_equal(start_helper(&f, NULL, &o,
                                "--helper=hold-stdout-ignore-term", NULL, NULL,
                                id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  wait_end(&w);
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 1);
  p = proc_of(&f, id, &t);
  t0 = now_ms();
  assert_int_equal(uvt_task_hooks(t)->quiesce(t), 1);
  assert_true(run_until(&f, leftovers_at_most, &lw, 3000));
  assert_true(now_ms() - t0 >= 190);
  run_for(&f, 30);
  assert_int_equal(p->quiescing, 0);
  fixture_close(&f);
}

/* C-30, P-KILL-6: a kill of a task that ended stops the dev server it left
 * behind (SIGTERM, then SIGKILL after the grace); the kill says the task
 * had ended, and its outcome and record stay. */
static void test_c30_kill_ended(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_task_t *t;
  uvt__proc_t *p;
  uvt_kill_result_t kr;
  uvt_snapshot_t s;
  waitres_t w;
  leftovers_wait_t lw;
  pid_t sid;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  test_opts(&o);
  o.owner = &a;
  o.command = "sleep 300 & echo started";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  sid = task_pid(&f, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  /* P-LEFT-1: what it left is named. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  wait_end(&w);
  assert_int_equal(uvt_process_leftovers(f.reg, id, &a), 1);
  assert_int_equal(uvt_task_lookup(f.reg, id, &a, &t), 0);
  p = uvt_task_arg(t);
  assert_int_equal(uvt_kill(f.reg, id, &a, "stop the server", &kr), 0);
  assert_int_equal(kr, UVT_KILL_ALREADY_TERMINAL);
  /* The registry called the quiesce hook (interface 1). */
  assert_int_equal(p->quiescing, 1);
  memset(&lw, 0, sizeof(lw));
  lw.f = &f;
  lw.id = id;
  lw.caller = &a;
  lw.n = 0;
  assert_true(run_until(&f, leftovers_at_most, &lw, 3000));
  /* The count leaves out a member already dying of the kill (P-LEFT-1),
   * which may still be in /proc on a busy machine: wait for it to go. */
  assert_true(session_gone(&f, sid, 3000));
  assert_int_equal(uvt_get(f.reg, id, &a, &s), 0);
  /* P-LEFT-1: the detail it settled with stays as it was. */
  assert_outcome(&s, UVT_COMPLETED, "exit code: 0; 1 process still running");
  uvt_snapshot_cleanup(&s);
  fixture_close(&f);
}

/* No directory of this process's registries left under `dir`. */
static int cgroup_dirs_left(const char *dir) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof(cmd), "ls -d '%s'/uvtasks-%d-* >/dev/null 2>&1", dir,
           (int)getpid());
  return system(cmd) == 0;
}

/* P-KILL-5 with uvt_process_cgroups(): a process that left the session on
 * purpose (`setsid`) is still the task's: a kill, disposal (here: forget)
 * and the SIGKILL after the grace reach it through the task's cgroup, and
 * uvt_process_leftovers counts it.  The groups and the registry's
 * directory are gone after close.  Skipped where this process cannot
 * create cgroups (not root, no cgroup v2). */
static void test_cgroup_setsid(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char marker[64];
  char cmd[160];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  leftovers_wait_t lw;
  uint64_t t0;
  int err;
  (void)state;

  fixture_init(&f, NULL);
  err = uvt_process_cgroups(f.reg, NULL);
  if (err != 0) {
    print_message("uvt_process_cgroups: %s; cgroup tests skipped\n",
                  uvt_err_name(err));
    fixture_close(&f);
    skip();
  }
  assert_int_equal(uvt_process_cgroups(f.reg, NULL), UV_EALREADY);
  test_opts(&o);
  memset(&lw, 0, sizeof(lw));
  lw.f = &f;
  lw.n = 0;

  /* A kill of a live task whose child left the session. */
  o.command = "setsid sleep 300 & echo up; sleep 300";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, NULL, &sb, "up\n");
  sb_free(&sb);
  lw.id = id;
  lw.n = 2;
  /* bash, its sleep and the setsid one: more than 2. */
  while (uvt_process_leftovers(f.reg, id, NULL) < 3)
    run_for(&f, 10);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  lw.n = 0;
  assert_true(run_until(&f, leftovers_at_most, &lw, 3000));

  /* A task that ended and left an escaped child that ignores SIGTERM:
   * forgetting it stops that too, with SIGKILL after the grace.  Its sleep
   * carries this process's pid, so no other test's sleep is counted. */
  snprintf(marker, sizeof(marker), "sleep 300.%d", (int)getpid());
  snprintf(cmd, sizeof(cmd), "setsid sh -c \"trap '' TERM; %s\" & sleep 0.2",
           marker);
  o.command = cmd;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  /* P-LEFT-1: its cgroup's members count too. */
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 2 processes still running");
  wait_end(&w);
  /* The escaped sleep ignores SIGTERM before the forget's SIGTERM comes,
   * however slow its start: the 0.2 s the leader waits are no promise. */
  assert_true(proc_reached(marker, SIGTERM, 0, 10000) > 0);
  assert_true(uvt_process_leftovers(f.reg, id, NULL) >= 1);
  t0 = now_ms();
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  {
    /* The record is hidden at once: watch the escaped sleep itself. */
    int k;
    for (k = 0; k < 300 && cmdline_count(marker) > 0; k++)
      run_for(&f, 10);
    assert_int_equal(cmdline_count(marker), 0);
  }
  assert_true(now_ms() - t0 >= 190);
  run_for(&f, 50);
  fixture_close(&f);
  /* P-REAP-1 also for what left the session: this process is a child
   * subreaper, and no zombie of it is left. */
  assert_true(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
  assert_false(cgroup_dirs_left("/sys/fs/cgroup/unified"));
  assert_false(cgroup_dirs_left("/sys/fs/cgroup"));
}

/* C-22, R-TIME-1, P-KILL-1: the kill's grace counts from the kill call
 * even when the host blocked its loop for longer than the grace before
 * calling: SIGKILL comes no sooner than grace_ms after the call. */
static void test_c22_kill_stale_clock(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.grace_ms = 500;
  o.command = "trap '' TERM; echo ready; sleep 30";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, NULL, &sb, "ready\n");
  uv_run(&f.loop, UV_RUN_NOWAIT);
  block_host(1000);
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  assert_true(w.at_ms - t0 >= 500);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* C-22, R-TIME-1, P-KILL-4: the same for the grace disposal gives what a
 * finished task left running. */
static void test_c22_quiesce_stale_clock(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  dispose_t d;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  memset(&d, 0, sizeof(d));
  a.data = &d;
  test_opts(&o);
  o.grace_ms = 500;
  assert_int_equal(start_helper(&f, &a, &o, "--helper=hold-stdout-ignore-term",
                                NULL, NULL, id),
                   0);
  d.pgid = task_pid(&f, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  assert_int_equal(group_live(d.pgid), 1);
  wait_end(&w);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  block_host(1000);
  t0 = now_ms();
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  fixture_run_until(&f, disposed, &d);
  assert_int_equal(d.calls, 1);
  assert_int_equal(d.live_at_cb, 0);
  assert_true(d.at_ms - t0 >= 500);
  fixture_close(&f);
}

/* C-13: a TERM-ignoring shell and a pipeline both stop within grace +
 * slack, and nothing of either group survives. */
static void test_c13_pipeline(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char ida[UVT_ID_MAX];
  char idb[UVT_ID_MAX];
  pid_t pa, pb;
  uvt_kill_result_t kr;
  waitres_t wa, wb;
  sbuf_t sb = {0};
  pid_t pbs;
  uint64_t t0;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  assert_int_equal(
      start_sh(&f, &a, "trap '' TERM; echo ready; sleep 1000", ida), 0);
  assert_int_equal(start_sh(&f, &a, "sleep 30 | sleep 30", idb), 0);
  pa = task_pid(&f, ida, &a);
  pb = task_pid(&f, idb, &a);
  read_until_has(&f, ida, &a, &sb, "ready\n");
  pbs = pb;
  assert_true(run_until(&f, group_runs_sleep, &pbs, 10000));
  t0 = now_ms();
  assert_int_equal(uvt_kill(f.reg, ida, &a, NULL, &kr), 0);
  assert_int_equal(uvt_kill(f.reg, idb, &a, NULL, &kr), 0);
  wait_begin(&f, &wa, ida, 5000, &a);
  wait_begin(&f, &wb, idb, 5000, &a);
  fixture_run_until(&f, wait_done, &wa);
  fixture_run_until(&f, wait_done, &wb);
  assert_int_equal(wa.status, 0);
  assert_int_equal(wb.status, 0);
  assert_outcome(&wa.snap, UVT_KILLED, "signal: SIGKILL");
  assert_outcome(&wb.snap, UVT_KILLED, "signal: SIGTERM");
  assert_true(wa.at_ms - t0 < 200 + 2000);
  assert_true(wb.at_ms - t0 < 200 + 2000);
  assert_true(group_gone(&f, pa));
  assert_true(group_gone(&f, pb));
  wait_end(&wa);
  wait_end(&wb);
  sb_free(&sb);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_c07_kill_term),
      T(test_c07_exit_after_kill),
      T(test_c03_kill_grace),
      T(test_kill_twice),
      T(test_kill_after_exit),
      T(test_close_force_failed),
      T(test_c03_trap_cleanup),
      T(test_c02_dispose),
      T(test_quiesce_ignore_term),
      T(test_registry_close_live),
      T(test_forget_quiesce),
      T(test_c13_pipeline),
      T(test_leftovers),
      T(test_quiesce_hook_after_end),
      T(test_c30_kill_ended),
      T(test_cgroup_setsid),
      T(test_c29_set_m_jobs),
      T(test_c22_kill_stale_clock),
      T(test_c22_quiesce_stale_clock),
  };
  return PROCESS_TESTS("process-kill", tests);
}
