/* Shared helpers of the process suites; see test-process-util.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "test-process-util.h"

char self_exe[PATH_MAX];

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

/* A grandchild in the group keeps stdout open after the leader exits,
 * ignoring `ignore` (0: none; SIGTERM; SIGHUP, the hang-up its terminal's
 * session leader sends when it exits); the leader waits until the
 * grandchild is set up, says its pid and returns 0 (9x: setup failed). */
static int hold_stdout(int ignore) {
  char line[64];
  int p[2];
  char c;
  pid_t pid;
  int i;

  if (pipe(p) != 0)
    return 97;
  pid = fork();
  if (pid < 0)
    return 96;
  if (pid == 0) {
    close(p[0]);
    if (ignore != 0)
      signal(ignore, SIG_IGN);
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

int helper(int argc, char **argv) {
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
  if (strcmp(mode, "pipe-size") == 0) {
    /* N-12: the kernel buffer of fd 1 (-1: not a pipe). */
    snprintf(line, sizeof(line), "%d\n", fcntl(1, F_GETPIPE_SZ));
    say(line);
    return 0;
  }
  if (strcmp(mode, "ignore-term") == 0) {
    signal(SIGTERM, SIG_IGN);
    say("ready\n");
    for (i = 0; i < 600; i++)
      usleep(100000);
    return 0;
  }
  if (strcmp(mode, "hold-stdout") == 0)
    return hold_stdout(0);
  if (strcmp(mode, "hold-stdout-ignore-term") == 0)
    return hold_stdout(SIGTERM);
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
  if (strcmp(mode, "wait-usr1") == 0) {
    /* "ready", then exit 0 on SIGUSR1 (blocked first, so it cannot kill). */
    sigset_t set;
    int sig;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    say("ready\n");
    sigwait(&set, &sig);
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
  if (strcmp(mode, "close-stdin") == 0) {
    /* Read one byte, close stdin, say so, then wait to be stopped. */
    char c;
    if (read(0, &c, 1) != 1)
      return 91;
    close(0);
    say("closed\n");
    for (i = 0; i < 300; i++)
      usleep(100000);
    return 0;
  }
  if (strcmp(mode, "tty-info") == 0) {
    /* What a program sees of its terminal (P-PTY-1). */
    struct winsize ws;
    const char *term = getenv("TERM");
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
    int tty_errno = fd < 0 ? errno : 0;
    memset(&ws, 0, sizeof(ws));
    ioctl(1, TIOCGWINSZ, &ws);
    snprintf(line, sizeof(line),
             "isatty=%d%d%d devtty=%s ctty=%d fg=%d term=%s size=%dx%d\n",
             isatty(0), isatty(1), isatty(2),
             fd >= 0              ? "ok"
             : tty_errno == ENXIO ? "ENXIO"
                                  : strerror(tty_errno),
             tcgetsid(0) == getsid(0), tcgetpgrp(0) == getpgrp(),
             term != NULL ? term : "(unset)", ws.ws_col, ws.ws_row);
    say(line);
    if (fd >= 0)
      close(fd);
    return 0;
  }
  if (strcmp(mode, "open-tty") == 0) {
    /* Talk to the controlling terminal as a password prompt does. */
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      snprintf(line, sizeof(line), "open /dev/tty: %s\n",
               errno == ENXIO ? "ENXIO" : strerror(errno));
      write_all(2, line, strlen(line));
      return 3;
    }
    write_all(fd, "via-tty\n", 8);
    close(fd);
    return 0;
  }
  if (strcmp(mode, "hold-stdout-ignore-hup") == 0)
    return hold_stdout(SIGHUP);
  fprintf(stderr, "unknown helper %s\n", mode);
  return 127;
}

/* ---------------------------------------------------------------------- */
/* Children and descriptors (L-2)                                          */

int read_stat(pid_t pid, pstat_t *st) {
  char buf[1024];
  char *p;
  int ppid;
  int pgrp;
  int sid;

  if (proc_file((int)pid, "stat", buf, sizeof(buf)) <= 0)
    return -1;
  p = strrchr(buf, ')');
  if (p == NULL ||
      sscanf(p + 1,
             " %c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
             "%*d %*d %*d %llu",
             &st->state, &ppid, &pgrp, &sid, &st->start) != 5)
    return -1;
  st->pid = pid;
  st->ppid = ppid;
  st->pgrp = pgrp;
  st->sid = sid;
  return 0;
}

/* The leaders task_pid() saw, with their start times: pid numbers are
 * reused quickly on a machine with pid_max 32768, so a session number
 * counts as the task's only for processes started since its leader, and
 * not at all once another process has the leader's pid. */
static struct {
  pid_t pid;
  unsigned long long start;
} leaders[512];
static unsigned leaders_next;

static void leader_seen(pid_t pid) {
  pstat_t st;
  if (read_stat(pid, &st) != 0)
    return;
  leaders[leaders_next % 512].pid = pid;
  leaders[leaders_next % 512].start = st.start;
  leaders_next++;
}

/* The start time of leader `sid` as seen, or 0 if unknown. */
static unsigned long long leader_start(pid_t sid) {
  unsigned i;
  for (i = leaders_next; i > 0 && leaders_next - i < 512; i--)
    if (leaders[(i - 1) % 512].pid == sid)
      return leaders[(i - 1) % 512].start;
  return 0;
}

typedef struct {
  pid_t sid;
  int live;
  const char *comm_argv;    /* NULL = any */
  unsigned long long start; /* the leader's start time, or 0 */
} session_count_t;

static int cmdline_is(pid_t pid, const char *want) {
  char buf[256];
  return proc_cmdline((int)pid, buf, sizeof(buf)) > 0 && strcmp(buf, want) == 0;
}

static int count_session(const pstat_t *st, void *arg) {
  session_count_t *c = arg;
  if (st->sid != c->sid || st->state == 'Z' || st->state == 'X' ||
      st->start < c->start)
    return 0;
  if (c->comm_argv == NULL || cmdline_is(st->pid, c->comm_argv))
    c->live++;
  return 0;
}

int session_live(pid_t sid, const char *argv_joined) {
  session_count_t c = {sid, 0, argv_joined, leader_start(sid)};
  pstat_t st;
  /* Another process has the leader's pid: the number was reused, and
   * nothing of the task's session can be left. */
  if (c.start != 0 && read_stat(sid, &st) == 0 && st.start != c.start)
    return 0;
  each_process(count_session, &c);
  return c.live;
}

static int session_dead_pred(void *arg) {
  return session_live(*(pid_t *)arg, NULL) == 0;
}

int session_gone(fixture_t *f, pid_t sid, uint64_t max_ms) {
  return run_until(f, session_dead_pred, &sid, max_ms);
}

typedef struct {
  pid_t sid;
  const char *argv_joined;
  int n;
} session_wait_t;

static int session_has_pred(void *arg) {
  session_wait_t *w = arg;
  return session_live(w->sid, w->argv_joined) >= w->n;
}

int session_has(fixture_t *f, pid_t sid, const char *argv_joined, int n) {
  session_wait_t w = {sid, argv_joined, n};
  return run_until(f, session_has_pred, &w, 10000);
}

/* Calls fn for every process; stops when fn returns nonzero. */
void each_process(int (*fn)(const pstat_t *st, void *arg), void *arg) {
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
  unsigned long long start; /* the leader's start time, or 0 */
} group_count_t;

static int count_member(const pstat_t *st, void *arg) {
  group_count_t *g = arg;
  if (st->pgrp != g->pgid || st->start < g->start)
    return 0;
  if (st->state == 'Z' || st->state == 'X')
    g->zombies++;
  else
    g->live++;
  return 0;
}

/* Live members of group `pgid` (zombies count as dead, C-02). */
int group_live(pid_t pgid) {
  group_count_t g = {pgid, 0, 0, leader_start(pgid)};
  pstat_t st;
  if (kill(-pgid, 0) != 0 && errno == ESRCH)
    return 0;
  /* The number reused by another process: the task's group is gone. */
  if (g.start != 0 && read_stat(pgid, &st) == 0 && st.start != g.start)
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
int kill_children(void) {
  child_scan_t c = {getpid(), 0, 0, 1};
  each_process(scan_child, &c);
  return c.live;
}

/* L-2, after every test. */
int teardown_children(void **state) {
  child_scan_t c = {getpid(), 0, 0, 1};
  sigset_t chld;
  struct timespec zero = {0, 0};
  (void)state;
  /* A test that failed half-way left its loop open, with the library's
   * SIGCHLD watch still in libuv's process-wide list; the SIGCHLD that
   * killing its children raises must not reach that loop (on freed stack
   * memory).  Hold it, and drop it before letting signals through. */
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  each_process(scan_child, &c);
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
  while (sigtimedwait(&chld, NULL, &zero) == SIGCHLD)
    ;
  sigprocmask(SIG_UNBLOCK, &chld, NULL);
  assert_int_equal(c.live, 0);
  assert_int_equal(c.leader_zombies, 0);
  return 0;
}

int count_fds(void) {
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
  char buf[8192];

  if (proc_cmdline((int)st->pid, buf, sizeof(buf)) > 0 &&
      strstr(buf, c->needle) != NULL)
    c->found++;
  return 0;
}

/* Processes whose argv (joined by spaces) contains `needle`. */
int cmdline_count(const char *needle) {
  cmdline_scan_t c = {needle, 0};
  each_process(scan_cmdline, &c);
  return c.found;
}

/* ---------------------------------------------------------------------- */
/* Loop helpers                                                            */

uint64_t now_ms(void) {
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
int run_until(fixture_t *f, int (*pred)(void *), void *arg, uint64_t max_ms) {
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

int never(void *arg) {
  (void)arg;
  return 0;
}

void run_for(fixture_t *f, uint64_t ms) {
  run_until(f, never, NULL, ms);
}

void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  waitres_t *w = req->data;
  w->done++;
  w->status = status;
  w->at_ms = now_ms();
  if (snap != NULL)
    uvt_snapshot_copy(&w->snap, snap);
}

int wait_done(void *arg) {
  return ((waitres_t *)arg)->done > 0;
}

void wait_begin(fixture_t *f, waitres_t *w, const char *id, uint64_t timeout_ms,
                const uvt_agent_t *caller) {
  memset(w, 0, sizeof(*w));
  w->req.data = w;
  assert_int_equal(uvt_wait(f->reg, &w->req, id, timeout_ms, caller, on_wait),
                   0);
}

/* Wait for `id` to end (asserting it did within timeout_ms). */
void wait_task(fixture_t *f, waitres_t *w, const char *id, uint64_t timeout_ms,
               const uvt_agent_t *caller) {
  wait_begin(f, w, id, timeout_ms, caller);
  fixture_run_until(f, wait_done, w);
  assert_int_equal(w->done, 1);
  assert_int_equal(w->status, 0);
}

void wait_end(waitres_t *w) {
  uvt_snapshot_cleanup(&w->snap);
}

static void count_open(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h))
    (*(int *)arg)++;
}

int open_handles(uv_loop_t *loop) {
  int n = 0;
  uv_walk(loop, count_open, &n);
  return n;
}

void sb_add(sbuf_t *sb, const char *s, size_t n) {
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

void sb_free(sbuf_t *sb) {
  free(sb->buf);
  memset(sb, 0, sizeof(*sb));
}

/* One read appended to sb; returns the snapshot's status. */
uvt_status_t read_into(fixture_t *f, const char *id, const uvt_agent_t *caller,
                       sbuf_t *sb) {
  uvt_read_t r;
  uvt_status_t st;
  assert_int_equal(uvt_read(f->reg, id, caller, &r), 0);
  sb_add(sb, r.text, r.len);
  st = r.snapshot.status;
  uvt_read_cleanup(&r);
  return st;
}

static int read_has(void *arg) {
  read_wait_t *rw = arg;
  read_into(rw->f, rw->id, rw->caller, rw->sb);
  return rw->sb->len > 0 && strstr(rw->sb->buf, rw->needle) != NULL;
}

/* Read until the accumulated output contains `needle`. */
void read_until_has(fixture_t *f, const char *id, const uvt_agent_t *caller,
                    sbuf_t *sb, const char *needle) {
  read_wait_t rw = {f, id, caller, sb, needle};
  assert_true(run_until(f, read_has, &rw, 10000));
}

void test_opts(uvt_process_options_t *o) {
  uvt_process_options_init(o);
  o->grace_ms = 200;
  o->drain_ms = 100;
}

int start_sh(fixture_t *f, uvt_agent_t *owner, const char *cmd,
             char id[UVT_ID_MAX]) {
  uvt_process_options_t o;
  test_opts(&o);
  o.command = cmd;
  o.owner = owner;
  return uvt_process_start(f->reg, &o, id);
}

/* argv for this binary in a helper mode; up to 4 extra words. */

const char *const *hargv(hargv_t *h, const char *mode, const char *a1,
                         const char *a2) {
  memset(h, 0, sizeof(*h));
  h->v[0] = self_exe;
  h->v[1] = mode;
  h->v[2] = a1;
  h->v[3] = a1 ? a2 : NULL;
  return h->v;
}

int start_helper(fixture_t *f, uvt_agent_t *owner, uvt_process_options_t *o,
                 const char *mode, const char *a1, const char *a2,
                 char id[UVT_ID_MAX]) {
  hargv_t h;
  o->argv = hargv(&h, mode, a1, a2);
  o->command = NULL;
  o->owner = owner;
  return uvt_process_start(f->reg, o, id);
}

void agent_setup(fixture_t *f, uvt_agent_t *a, const char *id,
                 const char *session) {
  memset(a, 0, sizeof(*a));
  assert_int_equal(uvt_agent_register(f->reg, a, id, session), 0);
}

void assert_outcome(const uvt_snapshot_t *s, uvt_status_t status,
                    const char *detail) {
  assert_int_equal(s->status, status);
  assert_non_null(s->detail);
  assert_string_equal(s->detail, detail);
}

typedef struct {
  pid_t pgid;
} pgid_arg_t;

static int sleep_in_group(const pstat_t *st, void *arg) {
  pgid_arg_t *g = arg;
  char buf[256];
  if (st->pgrp != g->pgid)
    return 0;
  /* argv[0] only: the raw file stops at its first NUL. */
  if (proc_file((int)st->pid, "cmdline", buf, sizeof(buf)) > 0 &&
      strcmp(buf, "sleep") == 0) {
    g->pgid = 0; /* found */
    return 1;
  }
  return 0;
}

int group_runs_sleep(void *arg) {
  pgid_arg_t g = {*(pid_t *)arg};
  each_process(sleep_in_group, &g);
  return g.pgid == 0;
}

int group_dead(void *arg) {
  return group_live(*(pid_t *)arg) == 0;
}

/* A member killed with the leader may still be exiting when the task
 * settles (its pipes close before it becomes a zombie): allow it a moment
 * to finish dying. */
int group_gone(fixture_t *f, pid_t pgid) {
  return run_until(f, group_dead, &pgid, 3000);
}

int leader_gone(void *arg) {
  pid_t pid = *(pid_t *)arg;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

void on_disposed(uvt_agent_t *a) {
  dispose_t *d = a->data;
  d->calls++;
  d->at_ms = now_ms();
  d->live_at_cb = group_live(d->pgid);
}

int disposed(void *arg) {
  return ((dispose_t *)arg)->calls > 0;
}

void block_host(uint64_t ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

typedef struct {
  fixture_t *f;
  const char *id;
  const uvt_agent_t *caller;
  int pid;
} pid_wait_t;

static int pid_known(void *arg) {
  pid_wait_t *w = arg;
  w->pid = uvt_process_pid(w->f->reg, w->id, w->caller);
  return w->pid != 0;
}

int task_pid(fixture_t *f, const char *id, const uvt_agent_t *caller) {
  pid_wait_t w = {f, id, caller, 0};
  /* The spawn runs off the loop thread (P-SPAWN-6): until its answer the
   * pid is 0. */
  assert_true(run_until(f, pid_known, &w, 10000));
  assert_true(w.pid > 0);
  leader_seen(w.pid);
  return w.pid;
}

void close_noop(uv_handle_t *h) {
  (void)h;
}

int process_test_main(int argc, char **argv, const char *name,
                      const struct CMUnitTest *tests, size_t count) {
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
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    return 1;
  if (getenv("UVT_TEST_FILTER") != NULL)
    cmocka_set_test_filter(getenv("UVT_TEST_FILTER"));
  if (getenv("UVT_SPAWN_HELPER") != NULL &&
      strcmp(getenv("UVT_SPAWN_HELPER"), "1") == 0)
    uvt__process_spawn_helper_default = 1;
  return _cmocka_run_group_tests(name, tests, count, NULL, NULL);
}

int under_valgrind(void) {
  const char *p = getenv("LD_PRELOAD");
  return p != NULL && strstr(p, "vgpreload") != NULL;
}

/* ---- allocation failures -------------------------------------------- */

int fm_armed;
int fm_failed;
static int fm_count;
static int fm_fail_at;

static int fm_should_fail(void) {
  if (!fm_armed)
    return 0;
  if (++fm_count == fm_fail_at) {
    fm_failed = 1;
    return 1;
  }
  return 0;
}

void *fm_malloc(size_t n) {
  return fm_should_fail() ? NULL : malloc(n);
}

void *fm_realloc(void *p, size_t n) {
  return fm_should_fail() ? NULL : realloc(p, n);
}

void *fm_calloc(size_t c, size_t n) {
  return fm_should_fail() ? NULL : calloc(c, n);
}

void fm_arm(int n) {
  fm_count = 0;
  fm_fail_at = n;
  fm_failed = 0;
  fm_armed = 1;
}
