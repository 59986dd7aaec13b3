/* The process producer (SPEC.md §3) and the process cases C-01..C-13.
 *
 * Deterministic children are this binary in a helper mode (argv[1] is
 * "--helper=..."); /bin/sh commands appear where the case is about the
 * shell.  The test process is a child subreaper, so every grandchild a task
 * leaves behind is reparented to it; after every test no child of ours may
 * be alive and no task leader may be a zombie (L-2). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-util.h"
#include "uvtasks/process.h"

/* The library's switch for its SIGCHLD fallback (no pidfd). */
extern int uvt__process_no_pidfd;

static char self_exe[PATH_MAX];

/* ---------------------------------------------------------------------- */
/* Helper modes                                                            */

static void write_all(int fd, const char *s, size_t n) {
  ssize_t w;
  while (n > 0) {
    w = write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      _exit(99);
    }
    s += w;
    n -= (size_t)w;
  }
}

static void say(const char *s) {
  write_all(1, s, strlen(s));
}

static int helper(int argc, char **argv) {
  const char *mode = argv[1] + strlen("--helper=");
  char line[512];
  int i;

  if (strcmp(mode, "exit") == 0)
    return atoi(argv[2]);
  if (strcmp(mode, "sleep") == 0) {
    struct timespec ts;
    long ms = atol(argv[2]);
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    return 0;
  }
  if (strcmp(mode, "raise") == 0) {
    kill(getpid(), atoi(argv[2]));
    return 98;
  }
  if (strcmp(mode, "out-err") == 0) {
    say("out1\n");
    write_all(2, "err1\n", 5);
    return 0;
  }
  if (strcmp(mode, "write-bytes") == 0) {
    /* N bytes of "0123456789..." to fd (default 1). */
    long n = atol(argv[2]);
    int fd = argc > 3 ? atoi(argv[3]) : 1;
    char buf[4096];
    for (i = 0; i < (int)sizeof(buf); i++)
      buf[i] = (char)('0' + i % 10);
    for (long off = 0; off < n;) {
      /* Keep the pattern aligned to the absolute offset. */
      size_t chunk = (size_t)(n - off) < 4000 ? (size_t)(n - off) : 4000;
      write_all(fd, buf + off % 10, chunk);
      off += (long)chunk;
    }
    return 0;
  }
  if (strcmp(mode, "ignore-term") == 0) {
    signal(SIGTERM, SIG_IGN);
    say("ready\n");
    for (i = 0; i < 600; i++)
      usleep(100000);
    return 0;
  }
  if (strcmp(mode, "hold-stdout") == 0 ||
      strcmp(mode, "hold-stdout-ignore-term") == 0) {
    /* A grandchild in the group keeps stdout open after the leader exits;
     * the leader waits until the grandchild is set up. */
    int p[2];
    char c;
    pid_t pid;
    if (pipe(p) != 0)
      return 97;
    pid = fork();
    if (pid < 0)
      return 96;
    if (pid == 0) {
      close(p[0]);
      if (strcmp(mode, "hold-stdout-ignore-term") == 0)
        signal(SIGTERM, SIG_IGN);
      write_all(p[1], "x", 1);
      close(p[1]);
      for (i = 0; i < 300; i++)
        usleep(100000);
      _exit(0);
    }
    close(p[1]);
    if (read(p[0], &c, 1) != 1)
      return 95;
    snprintf(line, sizeof(line), "leader done, holder %d\n", (int)pid);
    say(line);
    return 0;
  }
  if (strcmp(mode, "check-fds") == 0) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int extra = 0;
    if (d == NULL)
      return 94;
    say("fds:");
    while ((de = readdir(d)) != NULL) {
      int fd;
      if (de->d_name[0] < '0' || de->d_name[0] > '9')
        continue;
      fd = atoi(de->d_name);
      if (fd <= 2 || fd == dirfd(d))
        continue;
      snprintf(line, sizeof(line), " %d", fd);
      say(line);
      extra++;
    }
    closedir(d);
    say(extra ? "\n" : " none\n");
    return extra;
  }
  if (strcmp(mode, "ids") == 0) {
    struct stat a, b;
    int devnull = fstat(0, &a) == 0 && stat("/dev/null", &b) == 0 &&
                  S_ISCHR(a.st_mode) && a.st_rdev == b.st_rdev;
    snprintf(line, sizeof(line), "pid=%d pgid=%d sid=%d stdin=%s\n",
             (int)getpid(), (int)getpgid(0), (int)getsid(0),
             devnull ? "devnull" : "other");
    say(line);
    return 0;
  }
  if (strcmp(mode, "env") == 0) {
    for (i = 2; i < argc; i++) {
      const char *v = getenv(argv[i]);
      if (v != NULL)
        snprintf(line, sizeof(line), "%s=%s\n", argv[i], v);
      else
        snprintf(line, sizeof(line), "%s unset\n", argv[i]);
      say(line);
    }
    return 0;
  }
  if (strcmp(mode, "pwd") == 0) {
    if (getcwd(line, sizeof(line) - 2) == NULL)
      return 93;
    strcat(line, "\n");
    say(line);
    return 0;
  }
  if (strcmp(mode, "cat") == 0) {
    ssize_t n;
    while ((n = read(0, line, sizeof(line))) > 0)
      write_all(1, line, (size_t)n);
    return 0;
  }
  if (strcmp(mode, "utf8-split") == 0) {
    /* N (default 1, at most 4000) times "a" and the first two bytes of
     * U+4F60 in one write, then the rest on SIGUSR1. */
    sigset_t set;
    int sig;
    char first[4002];
    long n = argc > 2 ? atol(argv[2]) : 1;
    if (n < 1 || n > 4000)
      return 92;
    memset(first, 'a', (size_t)n);
    memcpy(first + n, "\xe4\xbd", 2);
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    write_all(1, first, (size_t)n + 2);
    sigwait(&set, &sig);
    write_all(1,
              "\xa0"
              "b\n",
              3);
    return 0;
  }
  fprintf(stderr, "unknown helper %s\n", mode);
  return 127;
}

/* ---------------------------------------------------------------------- */
/* Children and descriptors (L-2)                                          */

typedef struct {
  pid_t pid;
  pid_t ppid;
  pid_t pgrp;
  char state;
} pstat_t;

static int read_stat(pid_t pid, pstat_t *st) {
  char path[64];
  char buf[1024];
  int fd;
  ssize_t n;
  char *p;
  int ppid;
  int pgrp;

  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  p = strrchr(buf, ')');
  if (p == NULL || sscanf(p + 1, " %c %d %d", &st->state, &ppid, &pgrp) != 3)
    return -1;
  st->pid = pid;
  st->ppid = ppid;
  st->pgrp = pgrp;
  return 0;
}

/* Calls fn for every process; stops when fn returns nonzero. */
static void each_process(int (*fn)(const pstat_t *st, void *arg), void *arg) {
  DIR *d = opendir("/proc");
  struct dirent *de;
  pstat_t st;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    if (read_stat(atoi(de->d_name), &st) == 0 && fn(&st, arg))
      break;
  }
  closedir(d);
}

typedef struct {
  pid_t pgid;
  int live;
  int zombies;
} group_count_t;

static int count_member(const pstat_t *st, void *arg) {
  group_count_t *g = arg;
  if (st->pgrp != g->pgid)
    return 0;
  if (st->state == 'Z' || st->state == 'X')
    g->zombies++;
  else
    g->live++;
  return 0;
}

/* Live members of group `pgid` (zombies count as dead, C-02). */
static int group_live(pid_t pgid) {
  group_count_t g = {pgid, 0, 0};
  if (kill(-pgid, 0) != 0 && errno == ESRCH)
    return 0;
  each_process(count_member, &g);
  return g.live;
}

typedef struct {
  pid_t self;
  int live;
  int leader_zombies;
  int kill_live; /* 1: SIGKILL live children (and count them) */
} child_scan_t;

static int scan_child(const pstat_t *st, void *arg) {
  child_scan_t *c = arg;
  if (st->ppid != c->self)
    return 0;
  if (st->state == 'Z' || st->state == 'X') {
    /* A reparented grandchild is ours to reap; a task leader (its own
     * group) must have been reaped by the library. */
    if (st->pgrp == st->pid)
      c->leader_zombies++;
    waitpid(st->pid, NULL, WNOHANG);
  } else {
    c->live++;
    if (c->kill_live) {
      kill(st->pid, SIGKILL);
      waitpid(st->pid, NULL, 0);
    }
  }
  return 0;
}

/* Kill and reap every live child; returns how many there were. */
static int kill_children(void) {
  child_scan_t c = {getpid(), 0, 0, 1};
  each_process(scan_child, &c);
  return c.live;
}

/* L-2, after every test. */
static int teardown_children(void **state) {
  child_scan_t c = {getpid(), 0, 0, 1};
  (void)state;
  each_process(scan_child, &c);
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
  assert_int_equal(c.live, 0);
  assert_int_equal(c.leader_zombies, 0);
  return 0;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *de;
  int n = 0;
  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
      n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

typedef struct {
  const char *needle;
  int found;
} cmdline_scan_t;

static int scan_cmdline(const pstat_t *st, void *arg) {
  cmdline_scan_t *c = arg;
  char path[64];
  char buf[8192];
  int fd;
  ssize_t n;
  ssize_t i;

  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)st->pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  for (i = 0; i < n; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  buf[n] = '\0';
  if (strstr(buf, c->needle) != NULL)
    c->found++;
  return 0;
}

/* Processes whose argv (joined by spaces) contains `needle`. */
static int cmdline_count(const char *needle) {
  cmdline_scan_t c = {needle, 0};
  each_process(scan_cmdline, &c);
  return c.found;
}

/* ---------------------------------------------------------------------- */
/* Loop helpers                                                            */

static uint64_t now_ms(void) {
  return uv_hrtime() / 1000000u;
}

typedef struct {
  uv_timer_t timer;
  int closed;
} ticker_t;

static void tick_cb(uv_timer_t *t) {
  (void)t;
}

static void ticker_closed(uv_handle_t *h) {
  ((ticker_t *)h->data)->closed = 1;
}

/* Run the loop until pred(arg) or max_ms passed; a 5 ms ticker keeps the
 * loop turning so that pred is re-checked.  Returns pred's last value. */
static int run_until(fixture_t *f, int (*pred)(void *), void *arg,
                     uint64_t max_ms) {
  ticker_t tk;
  uint64_t deadline = now_ms() + max_ms;
  int ok;

  assert_int_equal(uv_timer_init(&f->loop, &tk.timer), 0);
  tk.timer.data = &tk;
  tk.closed = 0;
  uv_timer_start(&tk.timer, tick_cb, 5, 5);
  while (!(ok = pred(arg)) && now_ms() < deadline)
    uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tk.timer, ticker_closed);
  while (!tk.closed)
    uv_run(&f->loop, UV_RUN_ONCE);
  return ok;
}

static int never(void *arg) {
  (void)arg;
  return 0;
}

static void run_for(fixture_t *f, uint64_t ms) {
  run_until(f, never, NULL, ms);
}

typedef struct {
  uvt_wait_t req;
  int done;
  int status;
  uvt_snapshot_t snap;
  uint64_t at_ms;
} waitres_t;

static void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  waitres_t *w = req->data;
  w->done++;
  w->status = status;
  w->at_ms = now_ms();
  if (snap != NULL)
    uvt_snapshot_copy(&w->snap, snap);
}

static int wait_done(void *arg) {
  return ((waitres_t *)arg)->done > 0;
}

static void wait_begin(fixture_t *f, waitres_t *w, const char *id,
                       uint64_t timeout_ms, const uvt_agent_t *caller) {
  memset(w, 0, sizeof(*w));
  w->req.data = w;
  assert_int_equal(uvt_wait(f->reg, &w->req, id, timeout_ms, caller, on_wait),
                   0);
}

/* Wait for `id` to end (asserting it did within timeout_ms). */
static void wait_task(fixture_t *f, waitres_t *w, const char *id,
                      uint64_t timeout_ms, const uvt_agent_t *caller) {
  wait_begin(f, w, id, timeout_ms, caller);
  fixture_run_until(f, wait_done, w);
  assert_int_equal(w->done, 1);
  assert_int_equal(w->status, 0);
}

static void wait_end(waitres_t *w) {
  uvt_snapshot_cleanup(&w->snap);
}

typedef struct {
  char *buf;
  size_t len;
  size_t cap;
} sbuf_t;

static void sb_add(sbuf_t *sb, const char *s, size_t n) {
  if (sb->len + n + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + n + 1)
      cap *= 2;
    sb->buf = realloc(sb->buf, cap);
    assert_non_null(sb->buf);
    sb->cap = cap;
  }
  memcpy(sb->buf + sb->len, s, n);
  sb->len += n;
  sb->buf[sb->len] = '\0';
}

static void sb_free(sbuf_t *sb) {
  free(sb->buf);
  memset(sb, 0, sizeof(*sb));
}

/* One read appended to sb; returns the snapshot's status. */
static uvt_status_t read_into(fixture_t *f, const char *id,
                              const uvt_agent_t *caller, sbuf_t *sb) {
  uvt_read_t r;
  uvt_status_t st;
  assert_int_equal(uvt_read(f->reg, id, caller, &r), 0);
  sb_add(sb, r.text, r.len);
  st = r.snapshot.status;
  uvt_read_cleanup(&r);
  return st;
}

typedef struct {
  fixture_t *f;
  const char *id;
  const uvt_agent_t *caller;
  sbuf_t *sb;
  const char *needle;
} read_wait_t;

static int read_has(void *arg) {
  read_wait_t *rw = arg;
  read_into(rw->f, rw->id, rw->caller, rw->sb);
  return rw->sb->len > 0 && strstr(rw->sb->buf, rw->needle) != NULL;
}

/* Read until the accumulated output contains `needle`. */
static void read_until_has(fixture_t *f, const char *id,
                           const uvt_agent_t *caller, sbuf_t *sb,
                           const char *needle) {
  read_wait_t rw = {f, id, caller, sb, needle};
  assert_true(run_until(f, read_has, &rw, 10000));
}

static void test_opts(uvt_process_options_t *o) {
  uvt_process_options_init(o);
  o->grace_ms = 200;
  o->drain_ms = 100;
}

static int start_sh(fixture_t *f, uvt_agent_t *owner, const char *cmd,
                    char id[UVT_ID_MAX]) {
  uvt_process_options_t o;
  test_opts(&o);
  o.command = cmd;
  o.owner = owner;
  return uvt_process_start(f->reg, &o, id);
}

/* argv for this binary in a helper mode; up to 4 extra words. */
typedef struct {
  const char *v[8];
} hargv_t;

static const char *const *hargv(hargv_t *h, const char *mode, const char *a1,
                                const char *a2) {
  memset(h, 0, sizeof(*h));
  h->v[0] = self_exe;
  h->v[1] = mode;
  h->v[2] = a1;
  h->v[3] = a1 ? a2 : NULL;
  return h->v;
}

static int start_helper(fixture_t *f, uvt_agent_t *owner,
                        uvt_process_options_t *o, const char *mode,
                        const char *a1, const char *a2, char id[UVT_ID_MAX]) {
  hargv_t h;
  o->argv = hargv(&h, mode, a1, a2);
  o->command = NULL;
  o->owner = owner;
  return uvt_process_start(f->reg, o, id);
}

static void agent_setup(fixture_t *f, uvt_agent_t *a, const char *id,
                        const char *session) {
  memset(a, 0, sizeof(*a));
  assert_int_equal(uvt_agent_register(f->reg, a, id, session), 0);
}

static void assert_outcome(const uvt_snapshot_t *s, uvt_status_t status,
                           const char *detail) {
  assert_int_equal(s->status, status);
  assert_non_null(s->detail);
  assert_string_equal(s->detail, detail);
}

/* ---------------------------------------------------------------------- */
/* Options, defaults, ids                                                  */

/* The defaults of SPEC §3 and one task run with them (drain 500, grace
 * 3000, cap 1 MiB). */
static void test_defaults(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  uvt_snapshot_t s;
  (void)state;

  uvt_process_options_init(&o);
  assert_null(o.command);
  assert_null(o.argv);
  assert_null(o.kind);
  assert_null(o.label);
  assert_null(o.cwd);
  assert_null(o.env);
  assert_null(o.stdin_data);
  assert_int_equal(o.grace_ms, 3000);
  assert_int_equal(o.drain_ms, 500);
  assert_int_equal(o.output_cap_bytes, 1024 * 1024);
  assert_int_equal(o.max_runtime_ms, 0);

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  o.command = "echo hi";
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  assert_int_equal(uvt_get(f.reg, id, &a, &s), 0);
  assert_string_equal(s.kind, "bash");
  assert_string_equal(s.label, "echo hi");
  assert_string_equal(s.owner_session, "S1");
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, &a, &sb);
  assert_string_equal(sb.buf, "hi\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* SPEC §3 kind and label: "bash" and the command unless given; argv mode
 * labels with its words. */
static void test_kind_label(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  waitres_t w;
  const char *const av[] = {"true", "x", NULL};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_string_equal(s.label, "true x");
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);

  o.kind = "shell";
  o.label = "my label";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "shell-1");
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_string_equal(s.label, "my label");
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* SPEC §3 options, R-START-1, R-START-2: bad options are refused before
 * anything starts; no id is used. */
static void test_invalid_options(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *const av[] = {"true", NULL};
  const char *const empty[] = {NULL};
  const char *const bad_env[] = {"NOEQUALS", NULL};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(uvt_process_start(NULL, &o, id), UV_EINVAL);
  assert_int_equal(uvt_process_start(f.reg, NULL, id), UV_EINVAL);
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.command = "true";
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.command = NULL;
  o.argv = empty;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.argv = av;
  o.env = bad_env;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.env = NULL;
  o.output_cap_bytes = 3;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.output_cap_bytes = 4;
  o.kind = "bad kind";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.kind = NULL;
  o.command = "";
  o.argv = NULL;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  /* No surface: refused by the registry before spawning. */
  uvt_surface_detach(&f.surface);
  o.command = "true";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UVT_ENOSURFACE);
  assert_int_equal(uvt_surface_attach(f.reg, &f.surface, "test"), 0);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* SPEC §3 uvt_process_pid, R-OWN-2: the leader's pid (= group and session
 * id), behind the session fence. */
static void test_pid(void **state) {
  fixture_t f;
  uvt_agent_t a, b;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char fid[UVT_ID_MAX];
  fake_t fk;
  int pid;
  uvt_kill_result_t kr;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  agent_setup(&f, &b, "B", "S2");
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, &a, &o, "--helper=sleep", "10000", NULL, id), 0);
  pid = uvt_process_pid(f.reg, id, &a);
  assert_true(pid > 0);
  assert_int_equal(getpgid(pid), pid);
  assert_int_equal(getsid(pid), pid);
  assert_int_equal(uvt_process_pid(f.reg, id, &b), UVT_EFOREIGN);
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), UVT_EFOREIGN);
  assert_int_equal(uvt_process_pid(f.reg, "bash-99", &a), UVT_ENOTASK);
  assert_int_equal(uvt_process_pid(NULL, id, &a), UV_EINVAL);
  assert_int_equal(uvt_process_pid(f.reg, NULL, &a), UV_EINVAL);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, NULL, NULL, fid), 0);
  assert_int_equal(uvt_process_pid(f.reg, fid, NULL), UV_EINVAL);
  assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  /* Still answered after the end, while the record exists. */
  assert_int_equal(uvt_process_pid(f.reg, id, &a), pid);
  wait_end(&w);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* Spawn                                                                   */

/* P-SPAWN-1: own session and group; stdin /dev/null. */
static void test_spawn_session(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char want[128];
  waitres_t w;
  sbuf_t sb = {0};
  int pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=ids", NULL, NULL, id),
                   0);
  pid = uvt_process_pid(f.reg, id, NULL);
  assert_true(pid > 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  snprintf(want, sizeof(want), "pid=%d pgid=%d sid=%d stdin=devnull\n", pid,
           pid, pid);
  assert_string_equal(sb.buf, want);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-SPAWN-1: input bytes are written, then end of file. */
static void test_spawn_stdin_data(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  static const char data[] = "hello\nworld\0bin";
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.stdin_data = data;
  o.stdin_len = sizeof(data) - 1;
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=cat", NULL, NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, sizeof(data) - 1);
  assert_memory_equal(sb.buf, data, sizeof(data) - 1);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

typedef struct {
  pid_t pgid;
} pgid_arg_t;

static int sleep_in_group(const pstat_t *st, void *arg) {
  pgid_arg_t *g = arg;
  char path[64];
  char buf[256];
  int fd;
  ssize_t n;
  if (st->pgrp != g->pgid)
    return 0;
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)st->pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n > 0 && strcmp(buf, "sleep") == 0) {
    g->pgid = 0; /* found */
    return 1;
  }
  return 0;
}

static int group_runs_sleep(void *arg) {
  pgid_arg_t g = {*(pid_t *)arg};
  each_process(sleep_in_group, &g);
  return g.pgid == 0;
}

static int group_dead(void *arg) {
  return group_live(*(pid_t *)arg) == 0;
}

/* A member killed with the leader may still be exiting when the task
 * settles (its pipes close before it becomes a zombie): allow it a moment
 * to finish dying. */
static int group_gone(fixture_t *f, pid_t pgid) {
  return run_until(f, group_dead, &pgid, 3000);
}

/* P-SPAWN-2: the command text is in no process's argv, and the wrapper's
 * variables do not reach the command or its children. */
static void test_spawn_argv_hidden(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  char cmd[PATH_MAX + 128];
  char marker[64];
  pid_t pid;
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  snprintf(marker, sizeof(marker), "UVTMARK%dX", (int)getpid());
  snprintf(cmd, sizeof(cmd), ": %s; sleep 30", marker);
  assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
  pid = uvt_process_pid(f.reg, id, NULL);
  assert_true(run_until(&f, group_runs_sleep, &pid, 10000));
  assert_int_equal(cmdline_count(marker), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);

  snprintf(cmd, sizeof(cmd),
           "echo \"cmd=[$UVTASKS_CMD] c=[$__uvt_c]\"; '%s' --helper=env "
           "UVTASKS_CMD",
           self_exe);
  assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "cmd=[] c=[]\nUVTASKS_CMD unset\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* C-04, P-SPAWN-2: `pkill -f` in one task matches the other task's command,
 * never its own wrapper shell.  The pattern carries our pid so that no
 * unrelated `sleep 999` on the machine is touched. */
static void test_c04_pkill(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id1[UVT_ID_MAX];
  char id2[UVT_ID_MAX];
  char cmd[256];
  pid_t pid1;
  waitres_t w1, w2;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  snprintf(cmd, sizeof(cmd), "sleep 999.%d", (int)getpid());
  assert_int_equal(start_sh(&f, &a, cmd, id1), 0);
  pid1 = uvt_process_pid(f.reg, id1, &a);
  assert_true(run_until(&f, group_runs_sleep, &pid1, 10000));
  snprintf(cmd, sizeof(cmd), "pkill -f 'sleep 999.%d'; echo rc=$?",
           (int)getpid());
  assert_int_equal(start_sh(&f, &a, cmd, id2), 0);
  wait_task(&f, &w2, id2, 5000, &a);
  assert_outcome(&w2.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id2, &a, &sb);
  assert_string_equal(sb.buf, "rc=0\n");
  /* t1's sleep got the signal; its shell reports it, or died with it. */
  wait_task(&f, &w1, id1, 5000, &a);
  if (w1.snap.status == UVT_COMPLETED)
    assert_string_equal(w1.snap.detail, "exit code: 143");
  else
    assert_outcome(&w1.snap, UVT_KILLED, "signal: SIGTERM");
  wait_end(&w1);
  wait_end(&w2);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-SPAWN-3: credentials filtered, fixed additions, options win. */
static void test_spawn_env(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  const char *const extra[] = {"UVT_EXTRA=1", "PAGER=more",
                               "UVT_MY_TOKEN=given", NULL};
  const char *av[16];
  int i = 0;
  (void)state;

  setenv("UVT_TEST_API_KEY", "k", 1);
  setenv("uvt_test_secret_x", "s", 1);
  setenv("UVT_GH_TOKEN", "t", 1);
  setenv("UVT_DB_Password", "p", 1);
  setenv("UVT_PLAIN", "ok", 1);
  setenv("PAGER", "less", 1);
  setenv("TERM", "xterm", 1);
  setenv("NO_COLOR", "0", 1);

  fixture_init(&f, NULL);
  test_opts(&o);
  o.env = extra;
  av[i++] = self_exe;
  av[i++] = "--helper=env";
  av[i++] = "UVT_TEST_API_KEY";
  av[i++] = "uvt_test_secret_x";
  av[i++] = "UVT_GH_TOKEN";
  av[i++] = "UVT_DB_Password";
  av[i++] = "UVT_PLAIN";
  av[i++] = "PAGER";
  av[i++] = "TERM";
  av[i++] = "NO_COLOR";
  av[i++] = "GIT_PAGER";
  av[i++] = "UVT_EXTRA";
  av[i++] = "UVT_MY_TOKEN";
  av[i] = NULL;
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "UVT_TEST_API_KEY unset\n"
                              "uvt_test_secret_x unset\n"
                              "UVT_GH_TOKEN unset\n"
                              "UVT_DB_Password unset\n"
                              "UVT_PLAIN=ok\n"
                              "PAGER=more\n"
                              "TERM=dumb\n"
                              "NO_COLOR=1\n"
                              "GIT_PAGER=cat\n"
                              "UVT_EXTRA=1\n"
                              "UVT_MY_TOKEN=given\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  unsetenv("UVT_TEST_API_KEY");
  unsetenv("uvt_test_secret_x");
  unsetenv("UVT_GH_TOKEN");
  unsetenv("UVT_DB_Password");
  unsetenv("UVT_PLAIN");
  unsetenv("NO_COLOR");
}

/* P-SPAWN-3: cwd as given (the host's otherwise). */
static void test_spawn_cwd(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char dir[] = "/tmp/uvt-cwd-XXXXXX";
  char want[PATH_MAX + 2];
  char real[PATH_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  assert_non_null(mkdtemp(dir));
  assert_non_null(realpath(dir, real));
  fixture_init(&f, NULL);
  test_opts(&o);
  o.cwd = dir;
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=pwd", NULL, NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  snprintf(want, sizeof(want), "%s\n", real);
  assert_string_equal(sb.buf, want);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  rmdir(dir);
}

/* P-SPAWN-4: a failed spawn is a clean error: no id used, every handle
 * closed (the loop closes), no descriptor and no zombie left. */
static void test_spawn_fail(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *const missing[] = {"/nonexistent/uvt-no-such-program", NULL};
  const char *const nopath[] = {"uvt-no-such-program-in-path", NULL};
  waitres_t w;
  int fds;
  (void)state;

  fixture_init(&f, NULL);
  fds = count_fds();
  test_opts(&o);
  o.command = "true";
  o.cwd = "/nonexistent/uvt-no-such-dir";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  o.cwd = NULL;
  o.command = NULL;
  o.argv = missing;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  o.argv = nopath;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  /* A command beyond the kernel's limit for one environment string. */
  {
    char *big = malloc(200 * 1024);
    assert_non_null(big);
    memset(big, ':', 200 * 1024 - 1);
    big[200 * 1024 - 1] = '\0';
    o.argv = NULL;
    o.command = big;
    assert_int_equal(uvt_process_start(f.reg, &o, id), UV_E2BIG);
    free(big);
  }
  run_for(&f, 20);
  assert_int_equal(count_fds(), fds);
  o.argv = NULL;
  o.command = "true";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* P-SPAWN-4: EMFILE. */
static void test_spawn_emfile(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  struct rlimit old, lim;
  int lowest;
  int fds;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  fds = count_fds();
  lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
  assert_true(lowest >= 0);
  close(lowest);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  lim = old;
  lim.rlim_cur = (rlim_t)lowest;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
  test_opts(&o);
  o.command = "true";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EMFILE);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  run_for(&f, 10);
  assert_int_equal(count_fds(), fds);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* P-SPAWN-5: descriptors the host opened without O_CLOEXEC stay home. */
static void test_spawn_fds(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int leak = open("/dev/null", O_RDONLY);
  int p[2];
  (void)state;

  assert_true(leak >= 0);
  assert_int_equal(pipe(p), 0);
  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=check-fds", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "fds: none\n");
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  /* Through the shell as well. */
  {
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "'%s' --helper=check-fds", self_exe);
    assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, "fds: none\n");
    wait_end(&w);
    sb_free(&sb);
  }
  fixture_close(&f);
  close(leak);
  close(p[0]);
  close(p[1]);
}

/* ---------------------------------------------------------------------- */
/* Output                                                                  */

/* P-OUT-1: stdout, then "[stderr]" and stderr; reads consume. */
static void test_out_streams(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=out-err", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "out1\n[stderr]\nerr1\n");
  wait_end(&w);
  sb_free(&sb);

  /* A partial stdout line still leaves "[stderr]" on a line of its own. */
  assert_int_equal(start_sh(&f, NULL, "printf out; printf err >&2", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "out\n[stderr]\nerr");
  wait_end(&w);
  sb_free(&sb);

  /* Live reads consume what they return. */
  assert_int_equal(
      start_sh(&f, NULL, "echo one; echo two >&2; read x; echo three", id), 0);
  /* stdin is /dev/null: `read` returns at once; wait for the end. */
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "one\nthree\n[stderr]\ntwo\n");
  sb_free(&sb);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 0);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

static void pattern(char *buf, size_t from, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    buf[i] = (char)('0' + (from + i) % 10);
}

/* P-OUT-2: the oldest unread bytes are dropped beyond the cap and the next
 * read begins with a notice; per stream. */
static void test_out_cap(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  char want[2048];
  size_t n;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
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

  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=write-bytes", "5000", "2", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  n = (size_t)snprintf(want, sizeof(want),
                       "[stderr]\n[... 4000 bytes dropped ...]\n");
  pattern(want + n, 4000, 1000);
  assert_int_equal(sb.len, n + 1000);
  assert_memory_equal(sb.buf, want, n + 1000);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

static int read_nonempty(void *arg) {
  read_wait_t *rw = arg;
  read_into(rw->f, rw->id, rw->caller, rw->sb);
  return rw->sb->len > 0;
}

/* P-OUT-3: an incomplete trailing sequence waits for its last byte. */
static void test_out_utf8_hold(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  read_wait_t rw;
  int pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=utf8-split", NULL, NULL, id), 0);
  pid = uvt_process_pid(f.reg, id, NULL);
  rw.f = &f;
  rw.id = id;
  rw.caller = NULL;
  rw.sb = &sb;
  assert_true(run_until(&f, read_nonempty, &rw, 10000));
  /* "a" arrived together with two bytes of a three-byte character. */
  assert_int_equal(sb.len, 1);
  assert_string_equal(sb.buf, "a");
  sb_free(&sb);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "\xe4\xbd\xa0"
                              "b\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-OUT-3: the same with a read that fills most of the stream's first
 * ring (3000 of 4096 bytes): the held bytes survive the read and complete
 * the character later. */
static void test_out_utf8_hold_big(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  read_wait_t rw;
  int pid;
  size_t k;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=utf8-split", "3000", NULL, id), 0);
  pid = uvt_process_pid(f.reg, id, NULL);
  rw.f = &f;
  rw.id = id;
  rw.caller = NULL;
  rw.sb = &sb;
  assert_true(run_until(&f, read_nonempty, &rw, 10000));
  /* One write of at most PIPE_BUF bytes arrives whole. */
  assert_int_equal(sb.len, 3000);
  for (k = 0; k < sb.len; k++)
    if (sb.buf[k] != 'a')
      break;
  assert_int_equal(k, 3000);
  sb_free(&sb);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "\xe4\xbd\xa0"
                              "b\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-OUT-3: bytes that are not UTF-8 pass through; at end of stream an
 * incomplete sequence is delivered as it is. */
static void test_out_utf8_invalid(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL, "printf '\\377\\376x\\n\\300'", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 5);
  assert_memory_equal(sb.buf, "\xff\xfex\n\xc0", 5);
  wait_end(&w);
  sb_free(&sb);
  assert_int_equal(start_sh(&f, NULL, "printf 'z\\344\\275'", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 3);
  assert_memory_equal(sb.buf, "z\xe4\xbd", 3);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* Length of the valid UTF-8 prefix of s[0, n): n when all of it is valid. */
static size_t utf8_valid_prefix(const unsigned char *s, size_t n) {
  size_t i = 0;
  size_t k;
  size_t need;
  while (i < n) {
    if (s[i] < 0x80)
      need = 1;
    else if (s[i] >= 0xC2 && s[i] <= 0xDF)
      need = 2;
    else if (s[i] >= 0xE0 && s[i] <= 0xEF)
      need = 3;
    else if (s[i] >= 0xF0 && s[i] <= 0xF4)
      need = 4;
    else
      return i;
    if (i + need > n)
      return i;
    for (k = 1; k < need; k++)
      if ((s[i + k] & 0xC0) != 0x80)
        return i;
    i += need;
  }
  return n;
}

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t all; /* text without drop notices */
  int reads;
  int bad_reads;    /* reads that were not whole UTF-8 */
  uint64_t dropped; /* sum of the notices */
  int notices;
  uvt_status_t status;
} utf8_reader_t;

static void utf8_read_once(utf8_reader_t *r) {
  uvt_read_t rd;
  const char *text;
  size_t len;
  unsigned long long n;
  const char *end;

  assert_int_equal(uvt_read(r->f->reg, r->id, NULL, &rd), 0);
  r->status = rd.snapshot.status;
  text = rd.text;
  len = rd.len;
  r->reads++;
  if (len > 4 && memcmp(text, "[... ", 5) == 0) {
    assert_int_equal(sscanf(text, "[... %llu bytes dropped ...]", &n), 1);
    end = memchr(text, '\n', len);
    assert_non_null(end);
    r->dropped += n;
    r->notices++;
    len -= (size_t)(end + 1 - text);
    text = end + 1;
  }
  /* The text after a notice starts on a character boundary and no read
   * ends inside a character. */
  if (utf8_valid_prefix((const unsigned char *)text, len) != len)
    r->bad_reads++;
  sb_add(&r->all, text, len);
  uvt_read_cleanup(&rd);
}

static void utf8_tick(uv_timer_t *t) {
  utf8_reader_t *r = t->data;
  utf8_read_once(r);
  if (uvt_status_is_terminal(r->status))
    uv_timer_stop(t);
}

static void close_noop(uv_handle_t *h) {
  (void)h;
}

static void utf8_run(size_t cap, utf8_reader_t *r) {
  static const char cmd[] =
      "for i in $(seq 50000); do printf '\xe4\xbd\xa0'; done; "
      "for i in $(seq 20000); do printf '\xf0\x9f\x8e\x89'; done";
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uv_timer_t t;

  memset(r, 0, sizeof(*r));
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = cmd;
  o.output_cap_bytes = cap;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  r->f = &f;
  r->id = id;
  assert_int_equal(uv_timer_init(&f.loop, &t), 0);
  t.data = r;
  uv_timer_start(&t, utf8_tick, 10, 10);
  while (uv_is_active((uv_handle_t *)&t))
    uv_run(&f.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, close_noop);
  fixture_close(&f);
}

/* C-10, P-OUT-3: no read ends inside a character; the bytes are exact; with
 * a small cap the text after a notice starts on a boundary and every byte is
 * either read or counted as dropped. */
static void test_c10_utf8(void **state) {
  utf8_reader_t r;
  size_t i;
  (void)state;

  utf8_run(1024 * 1024, &r);
  assert_int_equal(r.bad_reads, 0);
  assert_int_equal(r.notices, 0);
  assert_int_equal(r.all.len, 50000 * 3 + 20000 * 4);
  for (i = 0; i < 50000; i++)
    assert_memory_equal(r.all.buf + i * 3, "\xe4\xbd\xa0", 3);
  for (i = 0; i < 20000; i++)
    assert_memory_equal(r.all.buf + 150000 + i * 4, "\xf0\x9f\x8e\x89", 4);
  sb_free(&r.all);

  utf8_run(1001, &r);
  assert_int_equal(r.bad_reads, 0);
  assert_true(r.notices > 0);
  assert_int_equal(r.all.len + r.dropped, 50000 * 3 + 20000 * 4);
  assert_int_equal(utf8_valid_prefix((unsigned char *)r.all.buf, r.all.len),
                   r.all.len);
  sb_free(&r.all);
}

/* C-09, P-OUT-2: `yes` with a 1 MiB cap: memory stays bounded, the read
 * begins with a notice and ends with "y\n". */
static void test_c09_yes(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  struct rusage ru0, ru1;
  unsigned long long n;
  uvt_kill_result_t kr;
  (void)state;

  assert_int_equal(getrusage(RUSAGE_SELF, &ru0), 0);
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "yes";
  o.output_cap_bytes = 1024 * 1024;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  run_for(&f, 2000);
  read_into(&f, id, NULL, &sb);
  assert_true(sb.len > 1024 * 1024);
  assert_true(sb.len < 1024 * 1024 + 64);
  assert_int_equal(sscanf(sb.buf, "[... %llu bytes dropped ...]", &n), 1);
  assert_true(n > 0);
  assert_memory_equal(sb.buf + sb.len - 2, "y\n", 2);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  assert_int_equal(getrusage(RUSAGE_SELF, &ru1), 0);
  /* ru_maxrss is in KiB: growth well under 64 MiB. */
  assert_true(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024);
}

/* C-11: exit is seen before all output; nothing is lost. */
static void test_c11_exact(void **state) {
  enum { N = 200, PAR = 4 };
  fixture_t f;
  char id[PAR][UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int i, j;
  size_t k;
  (void)state;

  fixture_init(&f, NULL);
  for (i = 0; i < N; i += PAR) {
    for (j = 0; j < PAR; j++)
      assert_int_equal(start_sh(&f, NULL, "head -c 1048576 /dev/zero", id[j]),
                       0);
    for (j = 0; j < PAR; j++) {
      wait_task(&f, &w, id[j], 10000, NULL);
      assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
      wait_end(&w);
      while (read_into(&f, id[j], NULL, &sb) != UVT_COMPLETED)
        ;
      assert_int_equal(sb.len, 1048576);
      for (k = 0; k < sb.len; k++)
        if (sb.buf[k] != 0)
          break;
      assert_int_equal(k, sb.len);
      sb_free(&sb);
    }
  }
  fixture_close(&f);
}

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t sb;
  uvt_status_t status;
} poll_reader_t;

static void poll_tick(uv_timer_t *t) {
  poll_reader_t *r = t->data;
  r->status = read_into(r->f, r->id, NULL, &r->sb);
  if (uvt_status_is_terminal(r->status))
    uv_timer_stop(t);
}

/* C-12: the tail is not lost when the pipes close at exit. */
static void test_c12_tail(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  poll_reader_t r;
  uv_timer_t t;
  char *last;
  int lines = 0;
  size_t k;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(
      start_sh(&f, NULL, "for i in $(seq 1 20000); do echo line$i; done", id),
      0);
  memset(&r, 0, sizeof(r));
  r.f = &f;
  r.id = id;
  assert_int_equal(uv_timer_init(&f.loop, &t), 0);
  t.data = &r;
  uv_timer_start(&t, poll_tick, 10, 10);
  while (uv_is_active((uv_handle_t *)&t))
    uv_run(&f.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, close_noop);
  assert_int_equal(r.status, UVT_COMPLETED);
  for (k = 0; k < r.sb.len; k++)
    lines += r.sb.buf[k] == '\n';
  assert_int_equal(lines, 20000);
  assert_true(r.sb.len > 10);
  r.sb.buf[r.sb.len - 1] = '\0';
  last = strrchr(r.sb.buf, '\n');
  assert_non_null(last);
  assert_string_equal(last + 1, "line20000");
  sb_free(&r.sb);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* End                                                                     */

static int count_io_handles_n;

static void count_io_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (h->type == UV_NAMED_PIPE || h->type == UV_POLL)
    count_io_handles_n++;
}

typedef struct {
  int calls;
  int io_handles;
  uvt_snapshot_t snap;
} end_listener_t;

static void on_done_count_handles(uvt_listener_t *l, const uvt_snapshot_t *s,
                                  uvt_agent_t *owner) {
  end_listener_t *e = l->data;
  (void)owner;
  count_io_handles_n = 0;
  uv_walk(uvt_registry_loop(l->registry), count_io_handle, NULL);
  e->calls++;
  e->io_handles = count_io_handles_n;
  uvt_snapshot_copy(&e->snap, s);
}

/* P-END-1: at settle, every handle of the task is closed (close callbacks
 * ran: uv_walk still lists closing handles). */
static void test_end_handles_closed(void **state) {
  fixture_t f;
  uvt_listener_t l;
  end_listener_t e;
  char id[UVT_ID_MAX];
  waitres_t w;
  (void)state;

  memset(&e, 0, sizeof(e));
  fixture_init(&f, NULL);
  memset(&l, 0, sizeof(l));
  l.data = &e;
  assert_int_equal(uvt_listener_start(f.reg, &l, on_done_count_handles), 0);
  assert_int_equal(start_sh(&f, NULL, "echo x; echo y >&2", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(e.calls, 1);
  assert_int_equal(e.io_handles, 0);
  assert_outcome(&e.snap, UVT_COMPLETED, "exit code: 0");
  uvt_snapshot_cleanup(&e.snap);
  wait_end(&w);
  uvt_listener_stop(&l);
  fixture_close(&f);
}

/* C-01, P-END-1: a background grandchild holding the pipes cannot keep the
 * task open past leader exit + drain. */
static void test_c01_background(void **state) {
  static const char *const cmds[] = {"echo started; sleep 30 &",
                                     "echo started; setsid sleep 30 &"};
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  uint64_t t0;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  for (i = 0; i < 2; i++) {
    t0 = now_ms();
    assert_int_equal(start_sh(&f, &a, cmds[i], id), 0);
    wait_task(&f, &w, id, 5000, &a);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    /* Leader exit + 100 ms drain; generous for a loaded machine. */
    assert_true(w.at_ms - t0 < 1500);
    read_into(&f, id, &a, &sb);
    assert_string_equal(sb.buf, "started\n");
    sb_free(&sb);
    wait_end(&w);
  }
  /* Registry disposal stops the group's `sleep 30` (P-KILL-4). */
  fixture_close(&f);
  /* `setsid sleep 30` left the task's group on purpose: it is no member of
   * the task any more, so it is ours to clean up. */
  assert_int_equal(kill_children(), 1);
}

/* P-END-2: exit codes and unrequested signals. */
static void test_end_exit_codes(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char sig[16];
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "3", NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 3");
  assert_int_equal(w.snap.reported, 1);
  wait_end(&w);

  snprintf(sig, sizeof(sig), "%d", SIGUSR1);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=raise", sig, NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGUSR1");
  assert_null(w.snap.kill_reason);
  wait_end(&w);

  assert_int_equal(start_sh(&f, NULL, "kill -9 $$", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  wait_end(&w);

  assert_int_equal(start_sh(&f, NULL, "exit 42", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 42");
  wait_end(&w);

  /* The command, not the wrapper shell, dies of a signal nobody asked for
   * (an external kill, the OOM killer): still killed, not "exit code: 137".
   * An explicit exit with the same number stays an exit code. */
  assert_int_equal(start_sh(&f, NULL, "echo x; sh -c 'kill -9 $$'", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGKILL");
  wait_end(&w);

  assert_int_equal(start_sh(&f, NULL, "echo x; exit 137", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 137");
  wait_end(&w);
  fixture_close(&f);
}

/* P-END-2 (beyond it): a leader the host reaped itself cannot report its
 * exit; the task still settles, `failed`, and says why. */
static void test_end_reaped_elsewhere(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  pid_t pid;
  int status;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=sleep", "50", NULL, id),
                   0);
  pid = uvt_process_pid(f.reg, id, NULL);
  /* The loop is not running: the library cannot reap before we do. */
  assert_int_equal(waitpid(pid, &status, 0), pid);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_FAILED, "exit status lost: reaped elsewhere");
  wait_end(&w);
  fixture_close(&f);
}

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
  pgid = uvt_process_pid(f.reg, id, &a);
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
  pgid = uvt_process_pid(f.reg, id, NULL);
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
  pgid = uvt_process_pid(f.reg, id, NULL);
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

static int leader_gone(void *arg) {
  pid_t pid = *(pid_t *)arg;
  return kill(pid, 0) != 0 && errno == ESRCH;
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
  pid = uvt_process_pid(f.reg, id, NULL);
  /* The library reaps the leader; then the pid is gone. */
  assert_true(run_until(&f, leader_gone, &pid, 10000));
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  assert_int_equal(w.snap.reported, 1);
  assert_int_equal(group_live(pid), 1);
  wait_end(&w);
  /* Disposal stops the survivor (P-KILL-4). */
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
  pgid = uvt_process_pid(f.reg, id, &a);
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

typedef struct {
  int calls;
  pid_t pgid;
  int live_at_cb;
  uint64_t at_ms;
} dispose_t;

static void on_disposed(uvt_agent_t *a) {
  dispose_t *d = a->data;
  d->calls++;
  d->at_ms = now_ms();
  d->live_at_cb = group_live(d->pgid);
}

static int disposed(void *arg) {
  return ((dispose_t *)arg)->calls > 0;
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
  d.pgid = uvt_process_pid(f.reg, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
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
  d.pgid = uvt_process_pid(f.reg, id, &a);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
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
  pgid = uvt_process_pid(f.reg, id, NULL);
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
  pgid = uvt_process_pid(f.reg, id, NULL);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  assert_int_equal(group_live(pgid), 1);
  assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  /* TERM is ignored: SIGKILL follows after the grace. */
  assert_true(group_gone(&f, pgid));
  run_for(&f, 20);
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), UVT_ENOTASK);
  fixture_close(&f);
}

/* P-LIMIT-1: max_runtime_ms stops the task like a kill. */
static void test_limit_runtime(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uint64_t t0;
  uvt_kill_result_t kr;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.max_runtime_ms = 200;
  t0 = now_ms();
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=sleep", "20000", NULL, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "timed out after 200 ms");
  assert_true(w.at_ms - t0 >= 190);
  /* Nobody asked: the task is not reported by the timeout itself. */
  assert_null(w.snap.kill_reason);
  wait_end(&w);

  /* TERM ignored: SIGKILL after the grace, same outcome. */
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=ignore-term", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "timed out after 200 ms");
  wait_end(&w);

  /* The owner's first kill after the timeout's SIGTERM lets the grace
   * run; only a second one sends SIGKILL at once (P-KILL-1). */
  o.max_runtime_ms = 100;
  o.grace_ms = 400;
  t0 = now_ms();
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=ignore-term", NULL, NULL, id), 0);
  run_for(&f, 200);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "timed out after 100 ms");
  assert_true(w.at_ms - t0 >= 490);
  wait_end(&w);
  o.grace_ms = 20000;
  t0 = now_ms();
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=ignore-term", NULL, NULL, id), 0);
  run_for(&f, 200);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_KILLED, "timed out after 100 ms");
  assert_true(w.at_ms - t0 < 10000);
  wait_end(&w);
  o.grace_ms = 200;
  o.max_runtime_ms = 200;

  /* A task that ends in time keeps its outcome. */
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=exit", "0", NULL, id),
                   0);
  wait_task(&f, &w, id, 10000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  fixture_close(&f);
}

/* C-05: stdin is /dev/null; `cat` ends at once. */
static void test_c05_stdin(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  assert_int_equal(start_sh(&f, &a, "cat; echo after", id), 0);
  wait_task(&f, &w, id, 2000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, &a, &sb);
  assert_string_equal(sb.buf, "after\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* C-06: 300 tasks in a row: descriptors back to baseline, no zombie. */
static void test_c06_many(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  int fds;
  int i;
  (void)state;

  /* The baseline excludes the loop's own descriptors (libuv keeps one in
   * reserve per loop once a stream exists). */
  fds = count_fds();
  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  for (i = 0; i < 300; i++) {
    assert_int_equal(start_sh(&f, &a, "true", id), 0);
    wait_task(&f, &w, id, 5000, &a);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    wait_end(&w);
  }
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
  fixture_close(&f);
  assert_int_equal(count_fds(), fds);
}

/* C-08: kill races the natural exit. */
enum { C8_N = 500, C8_BATCH = 50 };

typedef struct {
  fixture_t *f;
  uvt_agent_t *a;
  char id[UVT_ID_MAX];
  uv_timer_t timer;
  waitres_t w;
  int kill_err;
  uvt_kill_result_t kr;
  int killed;
  int listener_calls;
  uvt_snapshot_t lsnap;
} c8_task_t;

static c8_task_t c8[C8_N];

static void c8_kill(uv_timer_t *t) {
  c8_task_t *c = t->data;
  c->kill_err = uvt_kill(c->f->reg, c->id, c->a, NULL, &c->kr);
  c->killed = 1;
  uv_close((uv_handle_t *)t, NULL);
}

static void c8_done(uvt_listener_t *l, const uvt_snapshot_t *s,
                    uvt_agent_t *owner) {
  int n = atoi(s->id + strlen("bash-"));
  (void)l;
  (void)owner;
  if (n >= 1 && n <= C8_N) {
    c8[n - 1].listener_calls++;
    uvt_snapshot_copy(&c8[n - 1].lsnap, s);
  }
}

typedef struct {
  int from, to;
} c8_range_t;

static int c8_batch_done(void *arg) {
  c8_range_t *r = arg;
  int i;
  for (i = r->from; i < r->to; i++)
    if (!c8[i].w.done || !c8[i].killed)
      return 0;
  return 1;
}

static void same_snapshot(const uvt_snapshot_t *a, const uvt_snapshot_t *b) {
  assert_string_equal(a->id, b->id);
  assert_int_equal(a->status, b->status);
  assert_string_equal(a->detail, b->detail);
  assert_int_equal(a->finished_at_ms, b->finished_at_ms);
  assert_int_equal(a->reported, b->reported);
  if (a->kill_reason == NULL)
    assert_null(b->kill_reason);
  else
    assert_string_equal(a->kill_reason, b->kill_reason);
}

static void test_c08_races(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_listener_t l;
  uvt_snapshot_t s;
  c8_range_t r;
  unsigned seed = (unsigned)getpid();
  int i;
  (void)state;

  memset(c8, 0, sizeof(c8));
  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  memset(&l, 0, sizeof(l));
  assert_int_equal(uvt_listener_start(f.reg, &l, c8_done), 0);
  for (r.from = 0; r.from < C8_N; r.from += C8_BATCH) {
    r.to = r.from + C8_BATCH;
    for (i = r.from; i < r.to; i++) {
      c8_task_t *c = &c8[i];
      c->f = &f;
      c->a = &a;
      assert_int_equal(start_sh(&f, &a, "sleep 0.05", c->id), 0);
      wait_begin(&f, &c->w, c->id, 10000, &a);
      assert_int_equal(uv_timer_init(&f.loop, &c->timer), 0);
      c->timer.data = c;
      uv_timer_start(&c->timer, c8_kill, 40 + (uint64_t)(rand_r(&seed) % 21),
                     0);
    }
    fixture_run_until(&f, c8_batch_done, &r);
  }
  for (i = 0; i < C8_N; i++) {
    c8_task_t *c = &c8[i];
    assert_int_equal(c->w.done, 1);
    assert_int_equal(c->w.status, 0);
    assert_int_equal(c->kill_err, 0);
    assert_int_equal(c->listener_calls, 1);
    assert_int_equal(uvt_get(f.reg, c->id, &a, &s), 0);
    same_snapshot(&c->w.snap, &c->lsnap);
    same_snapshot(&c->w.snap, &s);
    uvt_snapshot_cleanup(&s);
    assert_int_equal(c->w.snap.reported, 1);
    if (c->w.snap.status == UVT_COMPLETED) {
      assert_string_equal(c->w.snap.detail, "exit code: 0");
    } else {
      /* Killed only if the request came before the leader's exit. */
      assert_int_equal(c->kr, UVT_KILL_REQUESTED);
      assert_int_equal(c->w.snap.status, UVT_KILLED);
      if (strcmp(c->w.snap.detail, "signal: SIGTERM") != 0)
        assert_string_equal(c->w.snap.detail,
                            "exit code: 0 after kill request");
    }
    uvt_snapshot_cleanup(&c->lsnap);
    wait_end(&c->w);
  }
  uvt_listener_stop(&l);
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
  pa = uvt_process_pid(f.reg, ida, &a);
  pb = uvt_process_pid(f.reg, idb, &a);
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

static int fm_armed;
static int fm_count;
static int fm_fail_at;
static int fm_failed;

static int fm_should_fail(void) {
  if (!fm_armed)
    return 0;
  if (++fm_count == fm_fail_at) {
    fm_failed = 1;
    return 1;
  }
  return 0;
}
static void *fm_malloc(size_t n) {
  return fm_should_fail() ? NULL : malloc(n);
}
static void *fm_realloc(void *p, size_t n) {
  return fm_should_fail() ? NULL : realloc(p, n);
}
static void *fm_calloc(size_t c, size_t n) {
  return fm_should_fail() ? NULL : calloc(c, n);
}

/* P-SPAWN-4 (and R-START-3 for this producer): failing the n-th allocation
 * of a start, for every n, is a clean UV_ENOMEM with no id used, no child
 * and no handle left, or a success. */
static void test_start_failmalloc(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char want[UVT_ID_MAX];
  const char *const env[] = {"UVT_X=1", NULL};
  waitres_t w;
  int n;
  int err;
  int next = 1;
  int fds;
  (void)state;

  fds = count_fds();
  assert_int_equal(
      uvt_replace_allocator(fm_malloc, fm_realloc, fm_calloc, free), 0);
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "echo hi";
  o.env = env;
  o.stdin_data = "x";
  o.stdin_len = 1;
  for (n = 1;; n++) {
    fm_count = 0;
    fm_fail_at = n;
    fm_failed = 0;
    fm_armed = 1;
    err = uvt_process_start(f.reg, &o, id);
    fm_armed = 0;
    if (err != 0) {
      assert_int_equal(err, UV_ENOMEM);
      assert_true(fm_failed);
      run_for(&f, 5);
      continue;
    }
    snprintf(want, sizeof(want), "bash-%d", next++);
    assert_string_equal(id, want);
    wait_task(&f, &w, id, 5000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    wait_end(&w);
    if (!fm_failed)
      break;
  }
  assert_true(n > 3);
  fixture_close(&f);
  assert_int_equal(uvt_replace_allocator(malloc, realloc, calloc, free), 0);
  assert_int_equal(count_fds(), fds);
}

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

#define T(fn) cmocka_unit_test_teardown(fn, teardown_children)

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_defaults),
      T(test_kind_label),
      T(test_invalid_options),
      T(test_pid),
      T(test_spawn_session),
      T(test_spawn_stdin_data),
      T(test_spawn_argv_hidden),
      T(test_c04_pkill),
      T(test_spawn_env),
      T(test_spawn_cwd),
      T(test_spawn_fail),
      T(test_spawn_emfile),
      T(test_spawn_fds),
      T(test_out_streams),
      T(test_out_cap),
      T(test_out_utf8_hold),
      T(test_out_utf8_hold_big),
      T(test_out_utf8_invalid),
      T(test_c10_utf8),
      T(test_c09_yes),
      T(test_c11_exact),
      T(test_c12_tail),
      T(test_end_handles_closed),
      T(test_c01_background),
      T(test_end_exit_codes),
      T(test_end_reaped_elsewhere),
      T(test_c07_kill_term),
      T(test_c07_exit_after_kill),
      T(test_c03_kill_grace),
      T(test_kill_twice),
      T(test_kill_after_exit),
      T(test_c03_trap_cleanup),
      T(test_c02_dispose),
      T(test_quiesce_ignore_term),
      T(test_registry_close_live),
      T(test_forget_quiesce),
      T(test_limit_runtime),
      T(test_c05_stdin),
      T(test_c06_many),
      T(test_c08_races),
      T(test_c13_pipeline),
      T(test_sigchld_fallback),
      T(test_start_failmalloc),
  };
  ssize_t n;

  if (argc > 1 && strncmp(argv[1], "--helper=", 9) == 0)
    return helper(argc, argv);
  n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
  if (n <= 0)
    return 1;
  self_exe[n] = '\0';
  /* libuv creates process-wide descriptors with the first loop; make them
   * exist before any test takes a descriptor baseline. */
  {
    uv_loop_t warm;
    if (uv_loop_init(&warm) != 0 || uv_loop_close(&warm) != 0)
      return 1;
  }
  /* Grandchildren left by tasks are reparented to us (L-2, C-02). */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    return 1;
  if (getenv("UVT_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("UVT_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
