/* Durable tasks (D-1..D-7): tasks that outlive their host and are taken
 * back by the next one under the same ids, with nothing read twice or
 * lost and every end reported once.
 *
 * Hosts that die are real processes: this binary in host mode
 * (--durable-host), which stops itself with SIGKILL at a chosen step of a
 * task's life (the library's test hook, uvt__durable_hook), never after a
 * time.  It writes what it sees on its stdout, framed ("A n" adopted, "S
 * id" started, "R id len" and the bytes of a read, "N id status detail" a
 * listener's notice), and the test puts every host's records together. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "leaf/journal.h"
#include "process/process-internal.h"
#include "test-process-util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

extern void (*uvt__durable_hook)(const char *step, const char *id);

/* ---------------------------------------------------------------------- */
/* State directories                                                       */

static void rm_rf(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char path[PATH_MAX];
  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static void state_dir(char *buf, size_t size) {
  snprintf(buf, size, "/tmp/uvt-durable-XXXXXX");
  assert_non_null(mkdtemp(buf));
}

/* Files of ours (d<16 hex>.ext) in `dir`. */
static int task_files(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  int n = 0;
  if (d == NULL)
    return -1;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] == 'd' && strlen(de->d_name) > 18 &&
        de->d_name[17] == '.')
      n++;
  closedir(d);
  return n;
}

static int journal_lines(const char *dir) {
  char path[PATH_MAX];
  FILE *fp;
  int c, n = 0;
  snprintf(path, sizeof(path), "%s/journal", dir);
  if ((fp = fopen(path, "r")) == NULL)
    return -1;
  while ((c = fgetc(fp)) != EOF)
    n += c == '\n';
  fclose(fp);
  return n;
}

static void durable_opts(uvt_process_options_t *o, const char *cmd) {
  test_opts(o);
  o->command = cmd;
  o->durable = 1;
}

/* The only agent the tests' durable tasks have: the same id and session
 * in every host, as a restarted server keeps its session (D-5). */
static void owner_setup(fixture_t *f, uvt_agent_t *a) {
  agent_setup(f, a, "host", "s-1");
}

/* Taking a running task back needs pidfds (D-4): valgrind 3.19 has no
 * pidfd_open (nor a kernel before 5.3); the tests that do skip there. */
static int need_pidfd(void) {
  long fd = syscall(SYS_pidfd_open, (long)getpid(), 0L);
  if (fd >= 0) {
    close((int)fd);
    return 1;
  }
  print_message("# no pidfd_open here (valgrind?): a running durable task "
                "cannot be taken back; skipped\n");
  return 0;
}

/* Reap keepers that ended as our children (this binary is a subreaper:
 * a dead host's keeper is reparented here). */
static void reap_keepers(void) {
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
}

/* ---------------------------------------------------------------------- */
/* The host process                                                        */

static const char *kill_step;
static int kill_at;
static int kill_hits;

static void out_write(const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(3);
    p += w;
    n -= (size_t)w;
  }
}

static void out_printf(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  out_write(buf, (size_t)n);
}

static void host_hook(const char *step, const char *id) {
  (void)id;
  if (kill_step != NULL && strcmp(step, kill_step) == 0 &&
      ++kill_hits == kill_at)
    raise(SIGKILL);
}

typedef struct {
  fixture_t *f;
  uvt_agent_t *owner;
  uv_timer_t timer;
  int started;
  int done;
  int kill; /* kill each task once it read "up" */
} host_t;

static void host_done(uvt_listener_t *l, const uvt_snapshot_t *s,
                      uvt_agent_t *owner) {
  (void)l;
  (void)owner;
  out_printf("N %s %s %s\n", s->id, uvt_status_name(s->status),
             s->detail != NULL ? s->detail : "-");
}

/* Read every task of the owner; done once all are ended and read. */
static void host_tick(uv_timer_t *t) {
  host_t *h = t->data;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0, i;
  int live = 0;

  if (uvt_list(h->f->reg, h->owner, &snaps, &n) != 0)
    return;
  for (i = 0; i < n; i++) {
    uvt_read_t r;
    memset(&r, 0, sizeof(r));
    if (uvt_read(h->f->reg, snaps[i].id, h->owner, &r) != 0)
      continue;
    if (r.len > 0) {
      out_printf("R %s %zu\n", snaps[i].id, r.len);
      out_write(r.text, r.len);
      if (h->kill && memmem(r.text, r.len, "up\n", 3) != NULL)
        uvt_kill(h->f->reg, snaps[i].id, h->owner, "host kill", NULL);
    }
    if (!uvt_status_is_terminal(r.snapshot.status))
      live++;
    uvt_read_cleanup(&r);
  }
  uvt_snapshots_free(snaps, n);
  if (live == 0 && h->started) {
    h->done = 1;
    uv_timer_stop(t);
  }
}

static int host_is_done(void *arg) {
  return ((host_t *)arg)->done;
}

/* argv: --durable-host DIR STEP AT COMMAND|- [kill]
 * STEP "-": no kill.  COMMAND "-": adopt only.  "kill": kill each task
 * once its output has "up". */
static int durable_host(int argc, char **argv) {
  fixture_t f;
  uvt_agent_t a;
  uvt_listener_t l;
  host_t h;
  int n;

  if (argc < 6)
    return 2;
  kill_step = strcmp(argv[3], "-") == 0 ? NULL : argv[3];
  kill_at = atoi(argv[4]);
  uvt__durable_hook = host_hook;
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  memset(&l, 0, sizeof(l));
  uvt_listener_start(f.reg, &l, host_done);
  n = uvt_process_adopt_all(f.reg, argv[2], &a);
  out_printf("A %d\n", n);
  if (n < 0)
    return 4;
  memset(&h, 0, sizeof(h));
  h.f = &f;
  h.owner = &a;
  h.kill = argc > 6 && strcmp(argv[6], "kill") == 0;
  h.started = n > 0;
  h.done = n == 0 && strcmp(argv[5], "-") == 0; /* nothing to do */
  if (strcmp(argv[5], "-") != 0) {
    uvt_process_options_t o;
    char id[UVT_ID_MAX];
    durable_opts(&o, argv[5]);
    o.owner = &a;
    if (argc > 6 && strcmp(argv[6], "cap64k") == 0)
      o.output_cap_bytes = 65536;
    if (argc > 6 && strcmp(argv[6], "pids8") == 0)
      o.limits.max_processes = 8; /* L-LIM-3 */
    o.label = "restart test";
    if (uvt_process_start(f.reg, &o, id) != 0)
      return 5;
    out_printf("S %s\n", id);
    h.started = 1;
  }
  uv_timer_init(&f.loop, &h.timer);
  h.timer.data = &h;
  uv_timer_start(&h.timer, host_tick, 5, 5);
  fixture_run_until(&f, host_is_done, &h);
  uv_close((uv_handle_t *)&h.timer, NULL);
  uvt_listener_stop(&l);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  out_printf("E\n");
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Running hosts and reading their records                                 */

typedef struct {
  char *buf; /* every host's stdout, appended */
  size_t len, cap;
  int killed; /* hosts that died of SIGKILL */
} hosts_t;

/* Run one host to its end; its stdout is appended to hs. */
static int run_host(hosts_t *hs, const char *dir, const char *step, int at,
                    const char *cmd, const char *extra) {
  int pfd[2];
  pid_t pid;
  int status;
  char at_s[16];

  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  snprintf(at_s, sizeof(at_s), "%d", at);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(pfd[1], 1);
    execl(self_exe, self_exe, "--durable-host", dir, step, at_s, cmd, extra,
          (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  for (;;) {
    ssize_t r;
    if (hs->cap - hs->len < 65536) {
      hs->cap = hs->cap ? hs->cap * 2 : 1 << 20;
      hs->buf = realloc(hs->buf, hs->cap);
      assert_non_null(hs->buf);
    }
    r = read(pfd[0], hs->buf + hs->len, hs->cap - hs->len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    hs->len += (size_t)r;
  }
  close(pfd[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
    hs->killed++;
  return status;
}

typedef struct {
  char *out; /* every R record's bytes, in order */
  size_t out_len;
  int notices;
  char notice[256]; /* the last */
  int adopted;      /* sum of A */
  char id[UVT_ID_MAX];
} records_t;

static void parse_records(const hosts_t *hs, records_t *rec) {
  size_t i = 0;
  memset(rec, 0, sizeof(*rec));
  rec->out = malloc(hs->len + 1);
  assert_non_null(rec->out);
  while (i < hs->len) {
    const char *nl = memchr(hs->buf + i, '\n', hs->len - i);
    size_t l;
    if (nl == NULL)
      break;
    l = (size_t)(nl - (hs->buf + i));
    if (hs->buf[i] == 'R') {
      char id[UVT_ID_MAX];
      size_t n;
      char head[128];
      memcpy(head, hs->buf + i, l < 127 ? l : 127);
      head[l < 127 ? l : 127] = '\0';
      assert_int_equal(sscanf(head, "R %63s %zu", id, &n), 2);
      i += l + 1;
      if (i + n > hs->len)
        n = hs->len - i; /* a host killed mid-record */
      memcpy(rec->out + rec->out_len, hs->buf + i, n);
      rec->out_len += n;
      i += n;
      continue;
    }
    if (hs->buf[i] == 'N') {
      rec->notices++;
      snprintf(rec->notice, sizeof(rec->notice), "%.*s", (int)l, hs->buf + i);
    } else if (hs->buf[i] == 'A') {
      rec->adopted += atoi(hs->buf + i + 2);
    } else if (hs->buf[i] == 'S') {
      snprintf(rec->id, sizeof(rec->id), "%.*s", (int)(l - 2), hs->buf + i + 2);
    }
    i += l + 1;
  }
  rec->out[rec->out_len] = '\0';
}

/* "line-1\n" .. "line-N\n", each once and in order?  Returns the count of
 * lines lost plus repeated (0 is right). */
static int lines_wrong(const char *out, int n_lines, int *lost, int *repeated) {
  int *seen = calloc((size_t)n_lines + 1, sizeof(int));
  const char *p = out;
  int i, bad = 0;
  assert_non_null(seen);
  *lost = *repeated = 0;
  while ((p = strstr(p, "line-")) != NULL) {
    int k = atoi(p + 5);
    if (k >= 1 && k <= n_lines)
      seen[k]++;
    p += 5;
  }
  for (i = 1; i <= n_lines; i++) {
    if (seen[i] == 0)
      (*lost)++;
    else if (seen[i] > 1)
      *repeated += seen[i] - 1;
  }
  bad = *lost + *repeated;
  free(seen);
  return bad;
}

/* ---------------------------------------------------------------------- */
/* D-1, D-2: a durable task, one host                                      */

/* D-1, D-2: output through the state directory, exact outcome, files gone
 * once the ended task is forgotten (D-6). */
static void test_durable_basic(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 0);
  durable_opts(&o, "echo out-1; echo err-1 >&2; echo out-2; exit 7");
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_int_equal(uvt_process_is_durable(f.reg, id, &a), 1);
  assert_int_equal(task_files(dir), 3); /* out, err, rc */
  wait_task(&f, &w, id, 10000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 7");
  read_into(&f, id, &a, &sb);
  assert_non_null(strstr(sb.buf, "out-1\nout-2\n"));
  assert_non_null(strstr(sb.buf, "[stderr]\nerr-1\n"));
  wait_end(&w);
  assert_int_equal(uvt_forget(f.reg, id, &a), 0);
  assert_int_equal(task_files(dir), 0); /* D-6 */
  sb_free(&sb);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  rm_rf(dir);
}

/* D-1: a durable task's keeper is the task's leader and runs the command
 * in its session; no descriptor of the host reaches the command
 * (P-SPAWN-5), and the command's text is in no argv (P-SPAWN-2). */
static void test_durable_keeper_shape(void **state) {
  fixture_t f;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  hargv_t hv;
  waitres_t w;
  sbuf_t sb = {0};
  char cmdline[512];
  int pid;
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  /* A shell task: the keeper's argv holds the wrapper, not the text. */
  durable_opts(&o, "sleep 30 # secret-words-xyz");
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  pid = task_pid(&f, id, NULL);
  /* The exec may still be filling in its arguments when the spawn
   * returns: wait for them. */
  {
    uint64_t t0 = now_ms();
    while (proc_cmdline(pid, cmdline, sizeof(cmdline)) <= 0 &&
           now_ms() - t0 < 5000)
      ;
  }
  assert_non_null(strstr(cmdline, "uvtasks-keeper"));
  assert_int_equal(cmdline_count("secret-words-xyz"), 0);
  {
    /* The keeper is the program the host's UVTASKS_KEEPER names (the
     * host's choice; no option of a task names one). */
    const char *k = getenv("UVTASKS_KEEPER");
    char exe[PATH_MAX], want[PATH_MAX], link[64];
    ssize_t n;
    if (k != NULL && realpath(k, want) != NULL) {
      snprintf(link, sizeof(link), "/proc/%d/exe", pid);
      n = readlink(link, exe, sizeof(exe) - 1);
      assert_true(n > 0);
      exe[n] = '\0';
      assert_string_equal(exe, want);
    }
  }
  assert_true(uvt_process_command_pid(f.reg, id, NULL) > 0 ||
              uvt_process_command_pid(f.reg, id, NULL) == 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "done", NULL), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  wait_end(&w);
  /* P-SPAWN-5 through the keeper. */
  test_opts(&o);
  o.durable = 1;
  o.argv = hargv(&hv, "--helper=check-fds", NULL, NULL);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_string_equal(sb.buf, "fds: none\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  rm_rf(dir);
}

/* D-1: a registry close leaves a durable task running (it is detached,
 * not killed), and D-3 a new registry takes it back under the same id
 * with its label, output from where reads stopped, and its end once. */
static void test_durable_close_and_adopt(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_listener_t l;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  waitres_t w;
  sbuf_t sb = {0};
  uvt_snapshot_t s;
  int pid;
  (void)state;
  if (!need_pidfd())
    skip();

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 0);
  durable_opts(&o, "echo first; read x < /dev/stdin; echo second; exit 4");
  o.stdin_pipe = 1;
  o.owner = &a;
  o.label = "a long job";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_until_has(&f, id, &a, &sb, "first\n");
  pid = task_pid(&f, id, &a);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  /* D-1: still running after its registry closed. */
  assert_int_equal(kill(pid, 0), 0);
  assert_true(session_live(pid, NULL) >= 2);

  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  memset(&l, 0, sizeof(l));
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  memset(&s, 0, sizeof(s));
  assert_int_equal(uvt_get(f.reg, id, &a, &s), 0);
  assert_string_equal(s.label, "a long job");
  assert_int_equal(s.status, UVT_RUNNING);
  uvt_snapshot_cleanup(&s);
  assert_int_equal(uvt_process_pid(f.reg, id, &a), pid);
  /* D-5: stdin through the FIFO the state directory keeps. */
  assert_int_equal(uvt_process_write(f.reg, id, &a, "go\n", 3), 0);
  wait_task(&f, &w, id, 10000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 4");
  sb.len = 0;
  read_into(&f, id, &a, &sb);
  assert_string_equal(sb.buf, "second\n"); /* nothing read twice */
  wait_end(&w);
  sb_free(&sb);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  reap_keepers();
  assert_int_equal(task_files(dir), 0);
  rm_rf(dir);
}

/* D-6: the journal is compacted: a line per task at every adoption,
 * however many reads were journalled before; a torn last line (a host
 * killed in its write) is cut off, not glued to the next. */
static void test_durable_journal_compacted(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], id[UVT_ID_MAX], path[PATH_MAX];
  uvt_process_options_t o;
  sbuf_t sb = {0};
  int i, fd;
  (void)state;
  if (!need_pidfd())
    skip();

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 0);
  durable_opts(&o, "i=0; while read x; do i=$((i+1)); echo got-$i; done");
  o.stdin_pipe = 1;
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  for (i = 1; i <= 50; i++) {
    char want[32];
    assert_int_equal(uvt_process_write(f.reg, id, &a, "x\n", 2), 0);
    snprintf(want, sizeof(want), "got-%d\n", i);
    read_until_has(&f, id, &a, &sb, want);
  }
  assert_true(journal_lines(dir) >= 50); /* an offset line per read */
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  /* A host killed in the middle of a line. */
  snprintf(path, sizeof(path), "%s/journal", dir);
  fd = open(path, O_WRONLY | O_APPEND);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "O dtorn 1", 9), 9);
  close(fd);

  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  assert_int_equal(journal_lines(dir), 1); /* one task, one line */
  assert_int_equal(uvt_process_write(f.reg, id, &a, "x\n", 2), 0);
  read_until_has(&f, id, &a, &sb, "got-51\n");
  assert_int_equal(uvt_kill(f.reg, id, &a, "done", NULL), 0);
  {
    waitres_t w;
    wait_task(&f, &w, id, 10000, &a);
    wait_end(&w);
  }
  sb_free(&sb);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  reap_keepers();
  rm_rf(dir);
}

/* ---------------------------------------------------------------------- */
/* D-2, D-3: ends while no host runs                                       */

/* The keeper's pid, from its status file in `dir` (the only task). */
static pid_t keeper_of(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char path[PATH_MAX];
  long pid = 0;
  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    FILE *fp;
    if (n < 3 || strcmp(de->d_name + n - 3, ".rc") != 0)
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    fp = fopen(path, "r");
    if (fp != NULL) {
      if (fscanf(fp, "uvtasks-keeper 1 run %ld", &pid) != 1)
        pid = 0;
      fclose(fp);
    }
  }
  closedir(d);
  return (pid_t)pid;
}

/* A host that starts `cmd` (with `extra`, durable_host's last word) and
 * dies once its keeper is spawned (before it journals it): the task goes
 * on with no host at all. */
static pid_t start_and_die_x(const char *dir, const char *cmd,
                             const char *extra) {
  hosts_t hs;
  pid_t pid;
  memset(&hs, 0, sizeof(hs));
  run_host(&hs, dir, "spawned", 1, cmd, extra);
  free(hs.buf);
  assert_int_equal(hs.killed, 1);
  /* The keeper records itself first thing; it may not have yet. */
  {
    uint64_t t0 = now_ms();
    while ((pid = keeper_of(dir)) <= 0 && now_ms() - t0 < 10000)
      ;
  }
  assert_true(pid > 0);
  return pid;
}

static pid_t start_and_die(const char *dir, const char *cmd) {
  return start_and_die_x(dir, cmd, NULL);
}

/* Wait for the task's keeper, now our child (a subreaper's), to end;
 * returns its wait status. */
static int keeper_end(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  return st;
}

typedef struct {
  int calls;
  uvt_snapshot_t snap;
} done_rec_t;

static void on_done_rec(uvt_listener_t *l, const uvt_snapshot_t *s,
                        uvt_agent_t *owner) {
  done_rec_t *d = l->data;
  (void)owner;
  if (d->calls++ == 0)
    uvt_snapshot_copy(&d->snap, s);
}

/* Adopt in this process; wait for the one task to settle. */
static void adopt_ended(const char *dir, const char *status_detail,
                        uvt_status_t status, const char *want_out) {
  fixture_t f;
  uvt_agent_t a;
  uvt_listener_t l;
  done_rec_t d;
  waitres_t w;
  sbuf_t sb = {0};
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;

  memset(&d, 0, sizeof(d));
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  memset(&l, 0, sizeof(l));
  l.data = &d;
  assert_int_equal(uvt_listener_start(f.reg, &l, on_done_rec), 0);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
  assert_int_equal(n, 1);
  wait_task(&f, &w, snaps[0].id, 10000, &a);
  assert_outcome(&w.snap, status, status_detail);
  if (want_out != NULL) {
    read_into(&f, snaps[0].id, &a, &sb);
    assert_string_equal(sb.buf, want_out);
  }
  /* D-3: reported once, with its real outcome. */
  assert_int_equal(d.calls, 1);
  assert_outcome(&d.snap, status, status_detail);
  uvt_snapshot_cleanup(&d.snap);
  wait_end(&w);
  uvt_snapshots_free(snaps, n);
  sb_free(&sb);
  uvt_listener_stop(&l);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
}

/* D-2, D-3: an end while no host runs is known exactly: an exit code, a
 * signal (P-END-3: only a real one reads as a signal), a command that
 * could not run. */
static void test_durable_end_without_host(void **state) {
  char dir[64];
  pid_t k;
  int st;
  (void)state;

  state_dir(dir, sizeof(dir));
  k = start_and_die(dir, "echo bye; exit 5");
  st = keeper_end(k);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 5);
  adopt_ended(dir, "exit code: 5", UVT_COMPLETED, "bye\n");
  assert_int_equal(task_files(dir), 0);
  rm_rf(dir);

  state_dir(dir, sizeof(dir));
  k = start_and_die(dir, "echo bye; kill -USR1 $$; sleep 30");
  st = keeper_end(k);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1);
  adopt_ended(dir, "signal: SIGUSR1", UVT_KILLED, "bye\n");
  rm_rf(dir);

  /* A status above 128 that the command chose is an exit code. */
  state_dir(dir, sizeof(dir));
  k = start_and_die(dir, "exit 137");
  keeper_end(k);
  adopt_ended(dir, "exit code: 137", UVT_COMPLETED, NULL);
  rm_rf(dir);
  reap_keepers();
}

/* D-3: what a task left running (P-LEFT-1) is named when it is taken
 * back ended, and a kill of the ended task stops it (P-KILL-6). */
static void test_durable_leftovers_adopted(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64];
  pid_t k;
  waitres_t w;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  (void)state;

  state_dir(dir, sizeof(dir));
  k = start_and_die(dir, "sleep 30 & echo left");
  keeper_end(k);
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
  wait_task(&f, &w, snaps[0].id, 10000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED,
                 "exit code: 0; 1 process still running");
  assert_int_equal(uvt_process_leftovers(f.reg, snaps[0].id, &a), 1);
  assert_int_equal(uvt_kill(f.reg, snaps[0].id, &a, "stop it", NULL), 0);
  assert_true(session_gone(&f, k, 10000));
  wait_end(&w);
  uvt_snapshots_free(snaps, n);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  reap_keepers();
  rm_rf(dir);
}

/* ---------------------------------------------------------------------- */
/* D-5: taken back, a task keeps every guarantee                           */

/* Start a durable task in a registry that then closes (the task runs
 * on); returns its id and keeper. */
static pid_t start_detached(const char *dir, const char *cmd,
                            uvt_process_options_t *extra, char id[UVT_ID_MAX]) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  pid_t pid;

  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_true(uvt_process_adopt_all(f.reg, dir, &a) >= 0);
  if (extra != NULL)
    o = *extra;
  else
    test_opts(&o);
  o.command = cmd;
  o.durable = 1;
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  pid = task_pid(&f, id, &a);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  assert_int_equal(kill(pid, 0), 0); /* D-1 */
  return pid;
}

/* D-5: the fence by the recorded owner (R-OWN-2): another session does
 * not see a task taken back; a kill of it stops its whole session
 * (P-KILL-7, `set -m` jobs too); a signal reaches it (P-KILL-8). */
static void test_durable_adopted_guarantees(void **state) {
  fixture_t f;
  uvt_agent_t a, other;
  char dir[64], id[UVT_ID_MAX];
  pid_t pid;
  waitres_t w;
  sbuf_t sb = {0};
  uvt_snapshot_t s;
  (void)state;
  if (!need_pidfd())
    skip();

  state_dir(dir, sizeof(dir));
  pid = start_detached(dir,
                       "trap 'echo got-usr1' USR1; set -m; "
                       "(trap '' USR1 TERM; echo job-a; exec sleep 30) & "
                       "(trap '' USR1 TERM; echo job-b; exec sleep 31) & "
                       "echo ready; while :; do sleep 0.05; done",
                       NULL, id);
  fixture_init(&f, NULL);
  agent_setup(&f, &other, "intruder", "s-2");
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &other), 0);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  memset(&s, 0, sizeof(s));
  assert_int_equal(uvt_get(f.reg, id, &other, &s), UVT_EFOREIGN);
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), UVT_EFOREIGN);
  read_until_has(&f, id, &a, &sb, "ready\n");
  read_until_has(&f, id, &a, &sb, "job-a\n");
  read_until_has(&f, id, &a, &sb, "job-b\n");
  assert_true(session_live(pid, NULL) >= 4); /* keeper, bash, two jobs */
  assert_int_equal(uvt_process_signal(f.reg, id, &a, SIGUSR1), 0);
  read_until_has(&f, id, &a, &sb, "got-usr1\n");
  /* The jobs ignore SIGUSR1 and SIGTERM: the kill's SIGKILL ends them. */
  assert_true(session_live(pid, NULL) >= 4);
  assert_int_equal(uvt_kill(f.reg, id, &a, "stop", NULL), 0);
  wait_task(&f, &w, id, 10000, &a);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_int_equal(session_live(pid, NULL), 0);
  wait_end(&w);
  sb_free(&sb);
  uvt_agent_dispose(&other, NULL);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  reap_keepers();
  rm_rf(dir);
}

/* D-1: an explicit close with stop_durable stops durable tasks as any
 * (P-KILL-7). */
static void test_durable_stop_durable(void **state) {
  fixture_t f;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  int pid;
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_stop_durable(f.reg, 1), UV_EINVAL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  durable_opts(&o, "sleep 30 & sleep 31");
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  pid = task_pid(&f, id, NULL);
  assert_int_equal(uvt_process_stop_durable(f.reg, 1), 0);
  fixture_close(&f);
  assert_int_equal(session_live(pid, NULL), 0);
  assert_int_equal(task_files(dir), 0);
  rm_rf(dir);
}

/* D-3: a runtime limit counts from the task's own start, across a
 * restart; a kill asked before the restart goes on after it. */
static void test_durable_limits_across_restart(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  waitres_t w;
  pid_t pid;
  (void)state;
  if (!need_pidfd())
    skip();

  state_dir(dir, sizeof(dir));
  test_opts(&o);
  o.max_runtime_ms = 1500;
  start_detached(dir, "sleep 30", &o, id);
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  wait_task(&f, &w, id, 20000, &a);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_non_null(strstr(w.snap.detail, "timed out after"));
  assert_true(strtoull(w.snap.detail + strlen("timed out after "), NULL, 10) >=
              1500);
  wait_end(&w);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);

  /* A kill whose grace outlived its host (killed just after the kill was
   * journalled): the next host ends it. */
  {
    hosts_t hs;
    memset(&hs, 0, sizeof(hs));
    run_host(&hs, dir, "killed", 1, "trap '' TERM; echo up; sleep 30", "kill");
    free(hs.buf);
    assert_int_equal(hs.killed, 1);
  }
  {
    uint64_t t0 = now_ms();
    while ((pid = keeper_of(dir)) <= 0 && now_ms() - t0 < 10000)
      ;
  }
  assert_true(session_live(pid, NULL) > 0);
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  {
    uvt_snapshot_t *snaps = NULL;
    size_t n = 0;
    assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(snaps[0].status, UVT_STOPPING);
    wait_task(&f, &w, snaps[0].id, 20000, &a);
    uvt_snapshots_free(snaps, n);
  }
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  assert_int_equal(session_live(pid, NULL), 0);
  wait_end(&w);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  reap_keepers();
  rm_rf(dir);
}

/* ---------------------------------------------------------------------- */
/* L-LIM-3: limits across a durable task's adoption                        */

/* Skip unless limits `l` can be enforced here (the reason said). */
static int durable_need_limits(const uvt_process_limits_t *l) {
  fixture_t f;
  char why[512];
  int err;
  fixture_init(&f, NULL);
  err = uvt_process_limits_check(f.reg, l, why, sizeof(why));
  fixture_close(&f);
  if (err == UV_ENOTSUP) {
    print_message("# limits not enforceable here: %s; skipped\n", why);
    return 0;
  }
  assert_int_equal(err, 0);
  return 1;
}

/* The task's group directory in hierarchy `first`, else in v2. */
static void group_path(fixture_t *f, const char *id, const uvt_agent_t *a,
                       int first, char *buf, size_t size) {
  if (uvt__process_cgroup_of(f->reg, id, a, NULL, first, buf, size) != 0)
    assert_int_equal(
        uvt__process_cgroup_of(f->reg, id, a, NULL, UVT__CG_V2, buf, size), 0);
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Open the FIFO `go` and write a line: the task waiting on it goes on. */
static void fifo_go(const char *go) {
  int fd = open(go, O_WRONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "go\n", 3), 3);
  close(fd);
}

/* L-LIM-3, D-3: a durable task with a 100 MiB memory limit, its host
 * closed: the task and its cgroup run on without it (not in the
 * registry's directory, which went with the host), it allocates 300 MB
 * while no host runs and the OOM killer ends it inside its group; the
 * next host finds the group again from the journal and the outcome names
 * the limit, "out of memory (limit 100 MiB)", not "signal: SIGKILL"
 * (L-LIM-2); its end removes the group. */
static void test_durable_limit_memory(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char dir[64], id[UVT_ID_MAX], go[128], cmd[256], cg[PATH_MAX];
  pid_t k;
  int st;
  (void)state;

  test_opts(&o);
  o.limits.memory_bytes = 100 * 1024 * 1024;
  if (!durable_need_limits(&o.limits))
    skip();
  state_dir(dir, sizeof(dir));
  snprintf(go, sizeof(go), "%s/go", dir);
  assert_int_equal(mkfifo(go, 0600), 0);
  /* It waits for a line before it allocates: the allocation comes once
   * its host is gone. */
  snprintf(cmd, sizeof(cmd),
           "read x < %s; exec dd if=/dev/zero of=/dev/null bs=300M count=1",
           go);
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 0);
  o.command = cmd;
  o.durable = 1;
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  k = task_pid(&f, id, &a);
  group_path(&f, id, &a, UVT__CG_MEMORY, cg, sizeof(cg));
  assert_non_null(strstr(cg, "/uvtasks-durable/d"));
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  /* D-1: the task and its group outlive the host. */
  assert_int_equal(kill(k, 0), 0);
  assert_true(is_dir(cg));
  fifo_go(go);
  st = keeper_end(k);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  adopt_ended(dir, "out of memory (limit 100 MiB)", UVT_KILLED, NULL);
  /* Its end took its group with it. */
  assert_false(is_dir(cg));
  assert_int_equal(task_files(dir), 0);
  unlink(go);
  rm_rf(dir);
  reap_keepers();
}

/* A host killed with SIGKILL leaves its registry's (empty) cgroup
 * directory, uvtasks-<pid>-<n>, beside the durable one: remove those
 * of processes that are gone (`cg` is a durable task's group). */
static void remove_dead_hosts_groups(const char *cg) {
  char parent[PATH_MAX];
  char path[PATH_MAX + 300];
  char *slash;
  DIR *d;
  struct dirent *de;
  snprintf(parent, sizeof(parent), "%s", cg);
  for (int i = 0; i < 2; i++)
    if ((slash = strrchr(parent, '/')) != NULL)
      *slash = '\0';
  if ((d = opendir(parent)) == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    long pid;
    if (sscanf(de->d_name, "uvtasks-%ld-", &pid) != 1 || pid <= 0 ||
        kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    snprintf(path, sizeof(path), "%s/%s", parent, de->d_name);
    (void)rmdir(path);
  }
  closedir(d);
}

typedef struct {
  fixture_t *f;
  const char *id;
  uvt_agent_t *a;
  char procs[PATH_MAX + 16];
  int max_seen;
} dbomb_t;

/* The fork bomb was refused a fork; count what is alive meanwhile. */
static int dbomb_refused(void *arg) {
  dbomb_t *b = arg;
  uvt__cg_events_t ev;
  FILE *fp;
  int n = 0, c, in_num = 0;
  assert_int_equal(
      uvt__process_cgroup_of(b->f->reg, b->id, b->a, &ev, 0, NULL, 0), 0);
  if ((fp = fopen(b->procs, "re")) != NULL) {
    while ((c = fgetc(fp)) != EOF) {
      if (c >= '0' && c <= '9')
        in_num = 1;
      else if (in_num) {
        n++;
        in_num = 0;
      }
    }
    fclose(fp);
    n += in_num;
  }
  if (n > b->max_seen)
    b->max_seen = n;
  return ev.pids_max > 0;
}

/* L-LIM-3, D-5: a durable task with max_processes 8 whose host was
 * SIGKILLed between its keeper's spawn and the keeper's journal line; the
 * next host takes it back with its group (pids.max: 8, and one for the
 * keeper), the task forks past the limit after the adoption and never
 * has more alive, the outcome says the limit was reached, and a kill
 * leaves no process and no cgroup directory behind (P-KILL-7). */
static void test_durable_limit_processes(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_limits_t l;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  char dir[64], go[128], cmd[256], cg[PATH_MAX], file[PATH_MAX + 16];
  char buf[32] = "";
  dbomb_t b;
  waitres_t w;
  pid_t k;
  FILE *fp;
  int i;
  (void)state;
  if (!need_pidfd())
    skip();

  memset(&l, 0, sizeof(l));
  l.max_processes = 8;
  if (!durable_need_limits(&l))
    skip();
  state_dir(dir, sizeof(dir));
  snprintf(go, sizeof(go), "%s/go", dir);
  assert_int_equal(mkfifo(go, 0600), 0);
  /* It waits for a line before it forks: a group without the limit (a
   * broken build) never runs a fork bomb on the machine. */
  snprintf(cmd, sizeof(cmd), "read x < %s; b() { b | b & }; b; exec sleep 600",
           go);
  k = start_and_die_x(dir, cmd, "pids8");
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
  assert_int_equal(n, 1);
  group_path(&f, snaps[0].id, &a, UVT__CG_PIDS, cg, sizeof(cg));
  assert_non_null(strstr(cg, "/uvtasks-durable/d"));
  snprintf(file, sizeof(file), "%s/pids.max", cg);
  fp = fopen(file, "re");
  assert_non_null(fp);
  assert_non_null(fgets(buf, sizeof(buf), fp));
  fclose(fp);
  assert_string_equal(buf, "9\n");
  fifo_go(go);
  memset(&b, 0, sizeof(b));
  b.f = &f;
  b.id = snaps[0].id;
  b.a = &a;
  snprintf(b.procs, sizeof(b.procs), "%s/cgroup.procs", cg);
  assert_true(run_until(&f, dbomb_refused, &b, 60000));
  for (i = 0; i < 20; i++) {
    dbomb_refused(&b);
    run_for(&f, 5);
  }
  print_message("# durable fork bomb: at most %d processes in its group "
                "(limit 8, and its keeper)\n",
                b.max_seen);
  assert_true(b.max_seen <= 9);
  assert_true(b.max_seen >= 3);
  assert_int_equal(uvt_kill(f.reg, snaps[0].id, &a, "stop", NULL), 0);
  wait_task(&f, &w, snaps[0].id, 30000, &a);
  print_message("# durable fork bomb: %s\n", w.snap.detail);
  assert_int_equal(w.snap.status, UVT_KILLED);
  assert_non_null(strstr(w.snap.detail, "; process limit reached (8)"));
  wait_end(&w);
  assert_int_equal(session_live(k, NULL), 0);
  uvt_snapshots_free(snaps, n);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  /* Nothing left: no process in its group, and no group. */
  assert_false(is_dir(cg));
  remove_dead_hosts_groups(cg);
  unlink(go);
  rm_rf(dir);
  reap_keepers();
}

/* Replace every `from` in the journal of `dir` with `to`. */
static void journal_replace(const char *dir, const char *from, const char *to) {
  char path[PATH_MAX];
  char *buf, *out, *at, *w;
  size_t n = 0, cap = 1 << 20;
  FILE *fp;
  snprintf(path, sizeof(path), "%s/journal", dir);
  buf = calloc(1, cap);
  out = calloc(1, 2 * cap);
  assert_non_null(buf);
  assert_non_null(out);
  assert_non_null(fp = fopen(path, "r"));
  n = fread(buf, 1, cap - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  assert_non_null(strstr(buf, from));
  for (at = buf, w = out; *at != '\0';) {
    if (strncmp(at, from, strlen(from)) == 0) {
      memcpy(w, to, strlen(to));
      w += strlen(to);
      at += strlen(from);
    } else {
      *w++ = *at++;
    }
  }
  assert_non_null(fp = fopen(path, "w"));
  assert_int_equal(fwrite(out, 1, (size_t)(w - out), fp), (size_t)(w - out));
  fclose(fp);
  free(buf);
  free(out);
}

/* L-LIM-3, S-7: the group's path in the journal is data.  A journal line
 * that names another directory (a plain one with the right names, not a
 * cgroup; or a cgroup that is not uvtasks-durable/<key>) is refused: the
 * task comes back without a group, the directory is neither signalled
 * nor removed, and a kill still ends the task through its session. */
static void test_durable_limit_forged_path(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  char dir[64], id[UVT_ID_MAX], cg[PATH_MAX], p[PATH_MAX];
  char decoy[2 * PATH_MAX + 64], tmp[PATH_MAX];
  char from[PATH_MAX + 2], to[sizeof(decoy) + 2];
  const char *key;
  waitres_t w;
  pid_t k;
  int round;
  (void)state;
  if (!need_pidfd())
    skip();

  test_opts(&o);
  o.limits.memory_bytes = 100 * 1024 * 1024;
  if (!durable_need_limits(&o.limits))
    skip();
  for (round = 0; round < 2; round++) {
    state_dir(dir, sizeof(dir));
    fixture_init(&f, NULL);
    owner_setup(&f, &a);
    assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 0);
    o.command = "exec sleep 600";
    o.durable = 1;
    o.owner = &a;
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    k = task_pid(&f, id, &a);
    group_path(&f, id, &a, UVT__CG_MEMORY, cg, sizeof(cg));
    uvt_agent_dispose(&a, NULL);
    fixture_close(&f);
    key = strrchr(cg, '/') + 1;
    if (round == 0) {
      /* A plain directory with the names a group has. */
      snprintf(p, sizeof(p), "%s/fake", dir);
      assert_int_equal(mkdir(p, 0700), 0);
      snprintf(p, sizeof(p), "%s/fake/uvtasks-durable", dir);
      assert_int_equal(mkdir(p, 0700), 0);
      snprintf(decoy, sizeof(decoy), "%s/%s", p, key);
    } else {
      /* A cgroup beside the group's directory, not uvtasks-durable/. */
      snprintf(tmp, sizeof(tmp), "%s", cg);
      *strrchr(tmp, '/') = '\0';
      *strrchr(tmp, '/') = '\0';
      snprintf(decoy, sizeof(decoy), "%s/uvt-decoy-%d", tmp, (int)getpid());
    }
    assert_int_equal(mkdir(decoy, 0700), 0);
    snprintf(from, sizeof(from), "=%s", cg);
    snprintf(to, sizeof(to), "=%s", decoy);
    journal_replace(dir, from, to);

    fixture_init(&f, NULL);
    owner_setup(&f, &a);
    assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
    assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(uvt__process_cgroup_of(f.reg, snaps[0].id, &a, NULL,
                                            UVT__CG_MEMORY, p, sizeof(p)),
                     UV_ENOENT);
    assert_int_equal(uvt_kill(f.reg, snaps[0].id, &a, "stop", NULL), 0);
    wait_task(&f, &w, snaps[0].id, 30000, &a);
    assert_int_equal(w.snap.status, UVT_KILLED);
    wait_end(&w);
    assert_int_equal(session_live(k, NULL), 0);
    uvt_snapshots_free(snaps, n);
    snaps = NULL;
    uvt_agent_dispose(&a, NULL);
    fixture_close(&f);
    /* Neither the decoy nor the real group was touched by the host. */
    assert_true(is_dir(decoy));
    assert_true(is_dir(cg));
    assert_int_equal(rmdir(decoy), 0);
    assert_int_equal(rmdir(cg), 0);
    if (round == 0) {
      snprintf(p, sizeof(p), "%s/fake/uvtasks-durable", dir);
      rmdir(p);
      snprintf(p, sizeof(p), "%s/fake", dir);
      rmdir(p);
    }
    rm_rf(dir);
    reap_keepers();
  }
}

/* ---------------------------------------------------------------------- */
/* D-4: identity; a state directory nobody else can write                  */

#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* clone3(2)'s arguments (linux/sched.h, written out: that header clashes
 * with the C library's). */
typedef struct {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
      tls, set_tid, set_tid_size, cgroup;
} clone_args_t;

/* A `sleep 30` whose pid is exactly `want` (a number just freed): pid
 * reuse, staged.  clone3 with set_tid (CAP_SYS_ADMIN); 0 if it cannot. */
static pid_t spawn_with_pid(pid_t want) {
  clone_args_t ca;
  pid_t tid = want;
  long r;
  memset(&ca, 0, sizeof(ca));
  ca.exit_signal = SIGCHLD;
  ca.set_tid = (uint64_t)(uintptr_t)&tid;
  ca.set_tid_size = 1;
  r = syscall(SYS_clone3, &ca, sizeof(ca));
  if (r == 0) {
    execl("/bin/sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  return r > 0 ? (pid_t)r : 0;
}

/* D-4: a keeper that died without recording its end, whose pid then
 * went to another process (staged: the same number, given on purpose),
 * is neither adopted nor signalled: the task settles "exit status
 * lost", and a kill of it (and its leftovers' stop) leaves that process
 * alone. */
static void test_durable_pid_reused(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64];
  pid_t k, other;
  waitres_t w;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  char detail[128];
  pstat_t st;
  (void)state;

  state_dir(dir, sizeof(dir));
  k = start_and_die(dir, "echo started; sleep 30");
  /* Its keeper killed before it could record the end, and the session
   * gone: the number is free. */
  kill(-k, SIGKILL);
  keeper_end(k);
  {
    uint64_t t0 = now_ms();
    do
      reap_keepers();
    while (session_live(k, NULL) > 0 && now_ms() - t0 < 10000);
  }
  assert_int_equal(session_live(k, NULL), 0);
  reap_keepers();
  other = spawn_with_pid(k);
  if (other == 0) {
    print_message("# no clone3 set_tid here (%s): pid reuse not staged\n",
                  strerror(errno));
    rm_rf(dir);
    skip();
  }
  assert_int_equal(other, k);
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
  wait_task(&f, &w, snaps[0].id, 10000, &a);
  snprintf(detail, sizeof(detail),
           "exit status lost: its keeper (pid %d) ended without recording it",
           (int)k);
  assert_outcome(&w.snap, UVT_FAILED, detail);
  assert_int_equal(uvt_process_leftovers(f.reg, snaps[0].id, &a), 0);
  assert_int_equal(uvt_kill(f.reg, snaps[0].id, &a, "stop", NULL), 0);
  run_for(&f, 300);
  /* The process that has the number now was never signalled. */
  assert_int_equal(read_stat(other, &st), 0);
  assert_true(st.state != 'Z');
  wait_end(&w);
  uvt_snapshots_free(snaps, n);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  kill(other, SIGKILL);
  waitpid(other, NULL, 0);
  rm_rf(dir);
}

/* D-4, S-7: a state directory that another user (or group) may write, a
 * symlink, a file: refused.  A symlink planted as a task's file is not
 * followed. */
static void test_durable_state_dir_refused(void **state) {
  fixture_t f;
  char dir[64], link[80], path[PATH_MAX], id[UVT_ID_MAX];
  uvt_process_options_t o;
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  assert_int_equal(chmod(dir, 0777), 0);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), UV_EPERM);
  assert_int_equal(chmod(dir, 0720), 0);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), UV_EPERM);
  assert_int_equal(chmod(dir, 0700), 0);
  snprintf(link, sizeof(link), "%s-link", dir);
  assert_int_equal(symlink(dir, link), 0);
  {
    int err = uvt_process_adopt_all(f.reg, link, NULL);
    assert_true(err == UV_ELOOP || err == UV_ENOTDIR);
  }
  unlink(link);
  snprintf(path, sizeof(path), "%s/plain", dir);
  close(open(path, O_CREAT | O_WRONLY, 0600));
  assert_int_equal(uvt_process_adopt_all(f.reg, path, NULL), UV_ENOTDIR);
  unlink(path);
  /* Not started without a state directory. */
  durable_opts(&o, "true");
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  /* No terminal, no sandbox (D-1). */
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  o.pty = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.pty = 0;
  {
    uvt_sandbox_t sb;
    memset(&sb, 0, sizeof(sb));
    o.sandbox = &sb;
    assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOTSUP);
    o.sandbox = NULL;
  }
  /* Another directory for the same registry: refused. */
  assert_int_equal(uvt_process_adopt_all(f.reg, "/tmp", NULL), UV_EINVAL);
  fixture_close(&f);
  rm_rf(dir);
}

/* S-7: a task that plants a symlink where its host will read (a task
 * may write the state directory only if it runs as the same user: the
 * host's own files are still opened without following links). */
static void test_durable_planted_link(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], path[PATH_MAX], secret[64], id[UVT_ID_MAX];
  pid_t k;
  waitres_t w;
  sbuf_t sb = {0};
  DIR *d;
  struct dirent *de;
  int fd;
  (void)state;

  snprintf(secret, sizeof(secret), "/tmp/uvt-secret-XXXXXX");
  fd = mkstemp(secret);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "SECRET\n", 7), 7);
  close(fd);
  state_dir(dir, sizeof(dir));
  k = start_and_die(dir, "echo mine; exit 0");
  keeper_end(k);
  /* Replace the task's output file by a link to another file. */
  d = opendir(dir);
  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n > 4 && strcmp(de->d_name + n - 4, ".out") == 0) {
      snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
      unlink(path);
      assert_int_equal(symlink(secret, path), 0);
    }
  }
  closedir(d);
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  {
    uvt_snapshot_t *snaps = NULL;
    size_t n = 0;
    assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
    snprintf(id, sizeof(id), "%s", snaps[0].id);
    uvt_snapshots_free(snaps, n);
  }
  wait_task(&f, &w, id, 10000, &a);
  read_into(&f, id, &a, &sb);
  assert_null(strstr(sb.buf != NULL ? sb.buf : "", "SECRET"));
  wait_end(&w);
  sb_free(&sb);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  unlink(secret);
  rm_rf(dir);
}

/* D-3: two hosts on one state directory: the second is refused while the
 * first holds it (in this process or another), and adopts once it is
 * gone; never both. */
static void test_durable_two_hosts(void **state) {
  fixture_t f, g;
  char dir[64];
  int to[2], from[2];
  pid_t pid;
  char c;
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  fixture_init(&g, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  assert_int_equal(uvt_process_adopt_all(g.reg, dir, NULL), UV_EBUSY);
  fixture_close(&f);
  assert_int_equal(uvt_process_adopt_all(g.reg, dir, NULL), 0);
  fixture_close(&g);

  /* Another process holds it. */
  assert_int_equal(pipe(to), 0);
  assert_int_equal(pipe(from), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fixture_t h;
    close(to[1]);
    close(from[0]);
    fixture_init(&h, NULL);
    c = uvt_process_adopt_all(h.reg, dir, NULL) == 0 ? 'y' : 'n';
    if (write(from[1], &c, 1) != 1 || read(to[0], &c, 1) < 0)
      _exit(2);
    _exit(0); /* without a close: as a host that dies */
  }
  close(to[0]);
  close(from[1]);
  assert_int_equal(read(from[0], &c, 1), 1);
  assert_int_equal(c, 'y');
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), UV_EBUSY);
  close(to[1]);
  waitpid(pid, NULL, 0);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  fixture_close(&f);
  close(from[0]);
  rm_rf(dir);
}

static int fail_appends;
static int journal_fault(const char *name, int op) {
  (void)name;
  return fail_appends && op == 'a' ? ENOSPC : 0;
}

/* A full disk: a start the journal cannot record does not run (nothing
 * spawned, no file left), and says why; what a full disk does to a
 * running task's output is the command's own error, and its end is still
 * known exactly (the keeper's end line fits the block its first line
 * took). */
static void test_durable_full_disk(void **state) {
  fixture_t f;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  waitres_t w;
  int mounted;
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  uvt__journal_fault = journal_fault;
  fail_appends = 1;
  durable_opts(&o, "echo should-not-run > /tmp/uvt-durable-ran");
  unlink("/tmp/uvt-durable-ran");
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_FAILED,
                 "not started: the state directory's journal could not "
                 "record it (ENOSPC)");
  wait_end(&w);
  fail_appends = 0;
  uvt__journal_fault = NULL;
  assert_int_equal(access("/tmp/uvt-durable-ran", F_OK), -1);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  assert_int_equal(task_files(dir), 0);
  fixture_close(&f);
  rm_rf(dir);

  /* A real full file system: a 256 KiB tmpfs (as root). */
  state_dir(dir, sizeof(dir));
  mounted = mount("uvt-full", dir, "tmpfs", 0, "size=256k,mode=0700") == 0;
  if (!mounted) {
    print_message("# no tmpfs (%s): only the fault hook ran\n",
                  strerror(errno));
    rm_rf(dir);
    return;
  }
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  durable_opts(&o, "head -c 1000000 /dev/zero; echo status $?; exit 9");
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 20000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 9");
  wait_end(&w);
  fixture_close(&f);
  assert_int_equal(umount(dir), 0);
  rm_rf(dir);
}

/* D-6: a task that writes far more than its cap while no host reads
 * holds about its cap on disk: its keeper punches out what any read
 * would drop (P-OUT-2), and the next host's read says how much. */
static void test_durable_disk_bounded(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], path[PATH_MAX];
  uvt_process_options_t o;
  pid_t k;
  struct stat st;
  uint64_t t0;
  uvt_process_read_t r;
  uvt_snapshot_t *snaps = NULL;
  size_t n = 0;
  DIR *d;
  struct dirent *de;
  (void)state;
  if (!need_pidfd())
    skip();

  (void)o;
  state_dir(dir, sizeof(dir));
  /* 20 MB, 64 KiB cap (the host's default cap is set at start). */
  {
    hosts_t hs;
    memset(&hs, 0, sizeof(hs));
    run_host(&hs, dir, "spawned", 1,
             "yes 0123456789 | head -c 20000000; echo end-of-it; sleep 30",
             "cap64k");
    free(hs.buf);
  }
  t0 = now_ms();
  while ((k = keeper_of(dir)) <= 0 && now_ms() - t0 < 10000)
    ;
  d = opendir(dir);
  assert_non_null(d);
  path[0] = '\0';
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (l > 4 && strcmp(de->d_name + l - 4, ".out") == 0)
      snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
  }
  closedir(d);
  /* The whole output written, and punched down to about the cap plus
   * the keeper's margin (1 MiB). */
  t0 = now_ms();
  for (;;) {
    assert_int_equal(stat(path, &st), 0);
    if (st.st_size >= 20000000 && (uint64_t)st.st_blocks * 512 < (2u << 20))
      break;
    assert_true(now_ms() - t0 < 30000);
  }
  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 1);
  assert_int_equal(uvt_list(f.reg, &a, &snaps, &n), 0);
  assert_int_equal(uvt_process_read(f.reg, snaps[0].id, &a, &r), 0);
  assert_true(r.out_dropped >= 20000000 - 65536);
  assert_true(r.out_len <= 65536);
  assert_non_null(strstr(r.out, "end-of-it\n"));
  assert_null(memchr(r.out, '\0', r.out_len)); /* no punched zeros */
  uvt_process_read_cleanup(&r);
  assert_int_equal(uvt_kill(f.reg, snaps[0].id, &a, "done", NULL), 0);
  {
    waitres_t w;
    wait_task(&f, &w, snaps[0].id, 10000, &a);
    wait_end(&w);
  }
  uvt_snapshots_free(snaps, n);
  uvt_agent_dispose(&a, NULL);
  fixture_close(&f);
  reap_keepers();
  (void)k;
  rm_rf(dir);
}

/* ---------------------------------------------------------------------- */
/* D-3: hosts SIGKILLed at every step                                      */

#define RESTART_LINES 60
static const char restart_cmd[] =
    "for i in $(seq 1 60); do echo line-$i; sleep 0.005; done; exit 3";

/* Busy processes for the "under load" runs (UVT_DURABLE_LOAD=n). */
static pid_t load_pids[8];
static int load_n;

static void load_start(void) {
  const char *v = getenv("UVT_DURABLE_LOAD");
  int i;
  load_n = v != NULL ? atoi(v) : 0;
  if (load_n > 8)
    load_n = 8;
  for (i = 0; i < load_n; i++) {
    load_pids[i] = fork();
    if (load_pids[i] == 0) {
      volatile unsigned long x = 0;
      for (;;)
        x++;
    }
  }
}

static void load_stop(void) {
  int i;
  for (i = 0; i < load_n; i++) {
    kill(load_pids[i], SIGKILL);
    waitpid(load_pids[i], NULL, 0);
  }
  load_n = 0;
}

static int restarts(void) {
  const char *v = getenv("UVT_DURABLE_RESTARTS");
  int n = v != NULL ? atoi(v) : 2;
  return n > 0 ? n : 1;
}

/* Keepers still running among our children (a dead host's keeper is
 * reparented here: this binary is a subreaper).  Not every keeper of the
 * machine: another host's durable tasks may run beside these tests. */
typedef struct {
  pid_t self;
  int n;
} keepers_t;

static int keeper_scan(const pstat_t *st, void *arg) {
  keepers_t *k = arg;
  char comm[64];
  if (st->ppid != k->self || st->state == 'Z' ||
      proc_file(st->pid, "comm", comm, sizeof(comm)) <= 0)
    return 0;
  if (strncmp(comm, "uvtasks-keeper", 14) == 0)
    k->n++;
  return 0;
}

static int live_keepers(void) {
  keepers_t k = {getpid(), 0};
  each_process(keeper_scan, &k);
  return k.n;
}

/* One run: host 1 dies at the at-th `step`; host 2 (if `step2`) dies at
 * its at2-th `step2`; the last host takes what is left to the end. */
static void restart_run(const char *step, int at, const char *step2, int at2,
                        records_t *rec, int *killed) {
  char dir[64];
  hosts_t hs;
  memset(&hs, 0, sizeof(hs));
  state_dir(dir, sizeof(dir));
  run_host(&hs, dir, step, at, restart_cmd, NULL);
  if (step2 != NULL)
    run_host(&hs, dir, step2, at2, "-", NULL);
  run_host(&hs, dir, "-", 0, "-", NULL);
  parse_records(&hs, rec);
  *killed = hs.killed;
  free(hs.buf);
  reap_keepers();
  /* Nothing of the task is left, and nothing of it in the directory. */
  assert_int_equal(live_keepers(), 0);
  assert_int_equal(task_files(dir), 0);
  rm_rf(dir);
}

/* D-3: a host killed (SIGKILL) before the journal line, between the
 * keeper's spawn and its record, in the middle of reads (after the bytes
 * were consumed, before the offsets were journalled), and while the end
 * is being recorded: the next host takes the task back with every line
 * once and its end reported once.  A host killed before the journal line
 * started nothing: no line, no notice, no process. */
static void test_durable_restart_steps(void **state) {
  static const char *const steps[] = {"record", "spawned", "read", "ended"};
  size_t i;
  int r, n = restarts();
  (void)state;

  load_start();
  for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    for (r = 1; r <= n; r++) {
      records_t rec;
      int killed, lost, repeated;
      /* The read step dies at a later read each time. */
      restart_run(steps[i], strcmp(steps[i], "read") == 0 ? r + 1 : 1, NULL, 0,
                  &rec, &killed);
      assert_int_equal(killed, 1);
      if (strcmp(steps[i], "record") == 0) {
        assert_int_equal(rec.out_len, 0);
        assert_int_equal(rec.notices, 0);
        assert_int_equal(rec.adopted, 0);
      } else {
        lines_wrong(rec.out, RESTART_LINES, &lost, &repeated);
        assert_int_equal(lost, 0);
        assert_int_equal(repeated, 0);
        assert_int_equal(rec.notices, 1);
        assert_int_equal(rec.adopted, 1);
        assert_non_null(strstr(rec.notice, "completed exit code: 3"));
        printf("# %s #%d: 0 lines lost, 0 repeated, 1 notice\n", steps[i], r);
      }
      free(rec.out);
    }
  }
  load_stop();
}

/* D-3: any number of restarts: two hosts die one after the other, each
 * in the middle of its reads. */
static void test_durable_restart_twice(void **state) {
  records_t rec;
  int killed, lost, repeated;
  (void)state;

  load_start();
  restart_run("read", 2, "read", 2, &rec, &killed);
  load_stop();
  assert_int_equal(killed, 2);
  lines_wrong(rec.out, RESTART_LINES, &lost, &repeated);
  assert_int_equal(lost, 0);
  assert_int_equal(repeated, 0);
  assert_int_equal(rec.notices, 1);
  assert_int_equal(rec.adopted, 2);
  free(rec.out);
}

/* ---------------------------------------------------------------------- */
/* D-2: the read rules through files                                       */

static int outputs;
static void count_output(const char *id, void *data) {
  (void)id;
  (void)data;
  outputs++;
}

/* D-2, P-OUT-4: with backpressure nothing is dropped, however far the
 * command writes ahead (the file is the buffer), and the task ends once
 * reads found the end; P-EVT-1: on_output tells of output as it comes;
 * M-TOOLS-12: merged streams. */
static void test_durable_read_rules(void **state) {
  fixture_t f;
  char dir[64], id[UVT_ID_MAX];
  uvt_process_options_t o;
  uvt_process_read_t r;
  uint64_t total = 0;
  int terminal = 0;
  char last[10] = {0};
  (void)state;

  state_dir(dir, sizeof(dir));
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  durable_opts(&o, "head -c 3000000 /dev/zero; echo; echo tail-line");
  o.output_backpressure = 1;
  o.output_cap_bytes = 65536;
  o.on_output = count_output;
  outputs = 0;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  while (!terminal) {
    uv_run(&f.loop, UV_RUN_ONCE);
    memset(&r, 0, sizeof(r));
    assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), 0);
    assert_int_equal(r.out_dropped, 0);
    assert_true(r.out_len <= 65536 + 4);
    total += r.out_len;
    /* The stream's last 10 bytes (it begins with NUL bytes: no strlen). */
    if (r.out_len >= sizeof(last)) {
      memcpy(last, r.out + r.out_len - sizeof(last), sizeof(last));
    } else if (r.out_len > 0) {
      memmove(last, last + r.out_len, sizeof(last) - r.out_len);
      memcpy(last + sizeof(last) - r.out_len, r.out, r.out_len);
    }
    terminal = uvt_status_is_terminal(r.snapshot.status);
    uvt_process_read_cleanup(&r);
  }
  assert_int_equal(total, 3000000 + 11); /* every byte, once */
  assert_memory_equal(last, "tail-line\n", sizeof(last));
  assert_true(outputs > 0);

  /* Merged streams: one file, in the order written. */
  {
    waitres_t w;
    sbuf_t sb = {0};
    durable_opts(&o, "echo a; echo b >&2; echo c");
    o.merge_stderr = 1;
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    wait_task(&f, &w, id, 10000, NULL);
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, "a\nb\nc\n");
    wait_end(&w);
    sb_free(&sb);
  }
  fixture_close(&f);
  rm_rf(dir);
}

/* P-SPAWN-4 through the keeper: a command exec refuses settles
 * "spawn failed: NAME", not "exit code: 127". */
static void test_durable_spawn_error(void **state) {
  fixture_t f;
  char dir[64], id[UVT_ID_MAX], path[PATH_MAX];
  uvt_process_options_t o;
  const char *argv[2];
  waitres_t w;
  int fd;
  (void)state;

  state_dir(dir, sizeof(dir));
  snprintf(path, sizeof(path), "%s/not-a-program", dir);
  fd = open(path, O_CREAT | O_WRONLY, 0700);
  assert_true(fd >= 0);
  assert_int_equal(write(fd,
                         "\x7f"
                         "ELF garbage",
                         12),
                   12);
  close(fd);
  fixture_init(&f, NULL);
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, NULL), 0);
  test_opts(&o);
  o.durable = 1;
  argv[0] = path;
  argv[1] = NULL;
  o.argv = argv;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_FAILED, "spawn failed: ENOEXEC");
  wait_end(&w);
  fixture_close(&f);
  rm_rf(dir);
}

/* The one window left (docs/durable.md): a host killed after the end was
 * journalled as delivered and before its listeners ran.  The end is not
 * reported again (never twice), no line read before is repeated; what
 * the host had not read of it yet, and the notice, are what it loses. */
static void test_durable_restart_delivered(void **state) {
  records_t rec;
  int killed, lost, repeated;
  (void)state;

  restart_run("delivered", 1, NULL, 0, &rec, &killed);
  assert_int_equal(killed, 1);
  lines_wrong(rec.out, RESTART_LINES, &lost, &repeated);
  assert_int_equal(repeated, 0);
  assert_int_equal(rec.notices, 0);
  print_message("# delivered: %d lines of the unread end lost, 0 repeated, "
                "0 notices (the window)\n",
                lost);
  free(rec.out);
}

/* ---------------------------------------------------------------------- */
/* D-3: no id the journal ever named is handed out again                   */

/* Start a durable task of `kind` in `f`, wait for its end (delivered:
 * D-3) and, with `drop`, forget it (its record dropped).  The id goes to
 * `id`. */
static void run_ended(fixture_t *f, uvt_agent_t *a, const char *kind, int drop,
                      char id[UVT_ID_MAX]) {
  uvt_process_options_t o;
  waitres_t w;
  durable_opts(&o, "echo one");
  o.owner = a;
  o.kind = kind;
  assert_int_equal(uvt_process_start(f->reg, &o, id), 0);
  wait_task(f, &w, id, 10000, a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  if (drop)
    assert_int_equal(uvt_forget(f->reg, id, a), 0);
}

/* A new (durable) task of `kind` must get `want`. */
static void expect_new(fixture_t *f, uvt_agent_t *a, const char *kind,
                       const char *want) {
  char id[UVT_ID_MAX];
  run_ended(f, a, kind, 1, id);
  assert_string_equal(id, want);
}

static int journal_has(const char *dir, const char *text) {
  char path[PATH_MAX], buf[8192];
  FILE *fp;
  size_t n;
  snprintf(path, sizeof(path), "%s/journal", dir);
  if ((fp = fopen(path, "r")) == NULL)
    return -1;
  n = fread(buf, 1, sizeof(buf) - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  return strstr(buf, text) != NULL;
}

static void append_journal(const char *dir, const char *text) {
  char path[PATH_MAX];
  int fd;
  snprintf(path, sizeof(path), "%s/journal", dir);
  fd = open(path, O_WRONLY | O_APPEND);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

/* A host of the state directory `dir` starts and takes back `adopted`
 * tasks; host_down() is its end. */
static void host_up(fixture_t *f, uvt_agent_t *a, const char *dir,
                    int adopted) {
  fixture_init(f, NULL);
  owner_setup(f, a);
  assert_int_equal(uvt_process_adopt_all(f->reg, dir, a), adopted);
}

static void host_down(fixture_t *f, uvt_agent_t *a) {
  uvt_agent_dispose(a, NULL);
  fixture_close(f);
}

/* D-3 (a user's finding): tasks whose ends were delivered and whose
 * records were dropped are not taken back, and their ids were handed out
 * again after a restart (bash-1 was one command's output, then another's
 * for a model that remembered it).  Siblings: several kinds, one kind
 * untouched, a delivered record not dropped, a restart that starts
 * nothing (the journal compacted to marks alone), the journal of a
 * version without mark lines (task lines only), marks that are wrong. */
static void test_durable_ids_fresh(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], id[UVT_ID_MAX];
  (void)state;

  state_dir(dir, sizeof(dir));
  host_up(&f, &a, dir, 0);
  run_ended(&f, &a, "bash", 1, id);
  assert_string_equal(id, "bash-1");
  run_ended(&f, &a, "bash", 1, id);
  assert_string_equal(id, "bash-2");
  run_ended(&f, &a, "job", 0, id); /* delivered, never dropped */
  assert_string_equal(id, "job-1");
  host_down(&f, &a);
  /* No compaction ran: task lines only, as an older version left them. */
  assert_int_equal(journal_has(dir, "\nN "), 0);
  assert_true(journal_has(dir, "T ") == 1);

  /* A restart that starts nothing: its compaction keeps the marks. */
  host_up(&f, &a, dir, 0);
  assert_int_equal(journal_lines(dir), 2);
  assert_int_equal(journal_has(dir, "N 2 =bash\n"), 1);
  assert_int_equal(journal_has(dir, "N 1 =job\n"), 1);
  host_down(&f, &a);

  /* Marks alone, and some that are wrong (ignored, nothing else lost). */
  append_journal(dir, "N 0 =bash\nN x =bash\nN 9\nN 99999999999999999999999 "
                      "=bash\nN 7 -\nN 8 bash\nN 3 =bad%kind\n");
  host_up(&f, &a, dir, 0);
  expect_new(&f, &a, "bash", "bash-3");
  expect_new(&f, &a, "job", "job-2");
  expect_new(&f, &a, "other", "other-1"); /* a kind never journalled */
  host_down(&f, &a);
  reap_keepers();
  rm_rf(dir);
}

/* D-3: a task taken back keeps its id; the delivered ones beside it, of
 * its kind, higher and lower, are not handed out again either. */
static void test_durable_ids_fresh_adopted(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], id[UVT_ID_MAX], live[UVT_ID_MAX];
  uvt_process_options_t o;
  waitres_t w;
  (void)state;
  if (!need_pidfd())
    skip();

  state_dir(dir, sizeof(dir));
  host_up(&f, &a, dir, 0);
  run_ended(&f, &a, "bash", 1, id); /* bash-1 */
  durable_opts(&o, "read x < /dev/stdin; echo late");
  o.stdin_pipe = 1;
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, live), 0);
  assert_string_equal(live, "bash-2");
  run_ended(&f, &a, "bash", 1, id);
  assert_string_equal(id, "bash-3");
  host_down(&f, &a);

  host_up(&f, &a, dir, 1);
  expect_new(&f, &a, "bash", "bash-4");
  /* bash-2 taken back keeps its line; bash-3 was kept as a mark. */
  assert_int_equal(journal_has(dir, "N 3 =bash\n"), 1);
  assert_int_equal(uvt_process_write(f.reg, live, &a, "go\n", 3), 0);
  wait_task(&f, &w, live, 10000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  host_down(&f, &a);
  reap_keepers();
  rm_rf(dir);
}

/* D-3: a host that starts a task before uvt_process_adopt_all() (the
 * registry cannot know the journal yet) gets the counter's next id; from
 * the adoption on, every new id is above the journal's, and no two tasks
 * of the registry ever share one. */
static void test_durable_ids_start_first(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char dir[64], id[UVT_ID_MAX], first[UVT_ID_MAX];
  uvt_process_options_t o;
  waitres_t w;
  (void)state;

  state_dir(dir, sizeof(dir));
  host_up(&f, &a, dir, 0);
  run_ended(&f, &a, "bash", 1, id);
  run_ended(&f, &a, "bash", 1, id);
  run_ended(&f, &a, "bash", 1, id);
  assert_string_equal(id, "bash-3");
  host_down(&f, &a);

  fixture_init(&f, NULL);
  owner_setup(&f, &a);
  test_opts(&o); /* not durable: no state directory yet */
  o.command = "echo early";
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, first), 0);
  assert_string_equal(first, "bash-1");
  assert_int_equal(uvt_process_adopt_all(f.reg, dir, &a), 0);
  run_ended(&f, &a, "bash", 1, id);
  assert_string_equal(id, "bash-4");
  wait_task(&f, &w, first, 10000, &a);
  wait_end(&w);
  host_down(&f, &a);
  reap_keepers();
  rm_rf(dir);
}

/* ---------------------------------------------------------------------- */

/* The shared journal (src/leaf/journal.h) on its own, as both producers
 * use it: lines appended whole, a torn last line cut off, words encoded,
 * one writer (the lock), a compaction that keeps the lines it is given;
 * and the Slurm engine's slots mode (E-15 over D-6's module): records
 * rewritten in place, before and after a compaction (whose new file would
 * otherwise append a record at its end). */
static int count_line(void *arg, char *line, size_t len) {
  int *n = arg;
  (void)line;
  (void)len;
  (*n)++;
  return 0;
}

static int emit_two(void *arg, uvt__journal_t *out) {
  (void)arg;
  if (uvt__journal_append(out, "AAAA", 4) != 0 ||
      uvt__journal_append(out, "BBBB", 4) != 0)
    return UV_EIO;
  return 0;
}

static int fail_writes_at(const char *name, int op) {
  (void)name;
  return op == 'w' ? ENOSPC : 0;
}

static void test_durable_journal_leaf(void **state) {
  char dir[64], path[PATH_MAX], buf[64], word[64];
  uvt__journal_t j, k;
  int fd, n;
  (void)state;

  state_dir(dir, sizeof(dir));
  snprintf(path, sizeof(path), "%s/j", dir);
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  /* One writer: a second open with the lock is refused. */
  assert_int_equal(uvt__journal_open_path(&k, path, 1), UV_EBUSY);
  assert_int_equal(uvt__journal_append(&j, "one", 3), 0);
  assert_int_equal(uvt__journal_appendf(&j, "two %d", 2), 0);
  /* A writer killed mid-line leaves a line without its newline. */
  fd = open(path, O_WRONLY | O_APPEND);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "tor", 3), 3);
  close(fd);
  n = 0;
  assert_int_equal(uvt__journal_read(&j, count_line, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(uvt__journal_append(&j, "three", 5), 0);
  fd = open(path, O_RDONLY);
  assert_int_equal(read(fd, buf, sizeof(buf)), 16);
  close(fd);
  assert_memory_equal(buf, "one\ntwo 2\nthree\n", 16);
  /* Words of any bytes. */
  assert_int_equal(uvt__journal_enc(word, sizeof(word), "a b%\n", 5), 12);
  assert_string_equal(word, "=a%20b%25%0A");
  assert_int_equal(uvt__journal_dec(word), 5);
  assert_memory_equal(word, "a b%\n", 5);
  /* A compaction keeps what it is given, nothing else. */
  assert_int_equal(uvt__journal_compact(&j, emit_two, NULL), 0);
  n = 0;
  assert_int_equal(uvt__journal_read(&j, count_line, &n), 0);
  assert_int_equal(n, 2);
  uvt__journal_close(&j);

  /* Slots: a write_at replaces the record where it is. */
  assert_int_equal(uvt__journal_open_path(&j, path, 0), 0);
  assert_int_equal(uvt__journal_write_at(&j, 0, "CCCC\n", 5), UV_EINVAL);
  assert_int_equal(uvt__journal_slots(&j), 0);
  assert_int_equal(uvt__journal_write_at(&j, 5, "DDDD\n", 5), 0);
  assert_int_equal(uvt__journal_compact(&j, emit_two, NULL), 0);
  assert_int_equal(uvt__journal_write_at(&j, 0, "EEEE\n", 5), 0);
  uvt__journal_fault = fail_writes_at;
  assert_int_equal(uvt__journal_write_at(&j, 5, "FFFF\n", 5), UV_ENOSPC);
  uvt__journal_fault = NULL;
  fd = open(path, O_RDONLY);
  n = (int)read(fd, buf, sizeof(buf));
  close(fd);
  assert_int_equal(n, 10);
  assert_memory_equal(buf, "EEEE\nBBBB\n", 10);
  uvt__journal_close(&j);
  rm_rf(dir);
}

int main(int argc, char **argv) {
  /* clang-format off */
  const struct CMUnitTest tests[] = {
      T(test_durable_basic),
      T(test_durable_keeper_shape),
      T(test_durable_close_and_adopt),
      T(test_durable_journal_compacted),
      T(test_durable_restart_steps),
      T(test_durable_restart_twice),
      T(test_durable_end_without_host),
      T(test_durable_leftovers_adopted),
      T(test_durable_adopted_guarantees),
      T(test_durable_stop_durable),
      T(test_durable_limits_across_restart),
      T(test_durable_limit_memory),
      T(test_durable_limit_processes),
      T(test_durable_limit_forged_path),
      T(test_durable_pid_reused),
      T(test_durable_state_dir_refused),
      T(test_durable_planted_link),
      T(test_durable_two_hosts),
      T(test_durable_full_disk),
      T(test_durable_disk_bounded),
      T(test_durable_read_rules),
      T(test_durable_spawn_error),
      T(test_durable_restart_delivered),
      T(test_durable_journal_leaf),
      T(test_durable_ids_fresh),
      T(test_durable_ids_fresh_adopted),
      T(test_durable_ids_start_first),
  };
  /* clang-format on */
  if (argc > 1 && strcmp(argv[1], "--durable-host") == 0)
    return durable_host(argc, argv);
  return PROCESS_TESTS("process-durable", tests);
}
