/* uvtasks-keeper: the process that owns a durable task's command (D-1,
 * D-2; docs/durable.md).  One per durable task, and the only process the
 * library adds to it.  The library spawns it as the task's leader (its
 * session and process group are the task's, so kills, signals and
 * leftover counts work as for any task), and it runs the command as its
 * child in that session and group, waits for it, writes how it ended into
 * the task's status file and exits the same way, so that whatever waits
 * for the keeper (the host, if one runs) reads the command's own status.
 * It uses nothing but the C library: it must start fast and hold little,
 * since it lives as long as the task, host or no host.
 *
 *   uvtasks-keeper CAP FLAGS FILE ARG0 [ARG...]
 *
 * Descriptors: 0 the command's stdin, 1 and 2 its output files in the
 * state directory (the same file twice with merged streams), 3 the status
 * file, locked by the host with flock(2) before the spawn (the lock goes
 * with the descriptor: while the keeper lives, the file is locked), and 4
 * with FLAGS 'i' the write end of the stdin FIFO, held so that the
 * command never reads end of file because a host went away; the
 * uvtasks_keeper_close_sig() signal closes it (the host's close_stdin).
 * Neither 3 nor 4 reaches the command.  FLAGS is '-' or letters: 'i' (fd
 * 4 is there), 'b' (output backpressure: never punch unread bytes).
 *
 * The status file, written with pwrite at fixed places:
 *   "uvtasks-keeper 1 run PID START SID\n"   at start (START: clock ticks
 *                                            after boot, /proc/self/stat's
 *                                            field 22: the identity, D-4)
 *   "end exit N\n" | "end signal N\n"        when the command ended
 *   "end spawn ERRNO\n"                      when it could not be run
 *
 * Signals: every signal is blocked, so a kill's SIGTERM, a Ctrl-C or a
 * chosen signal (P-KILL-8) reaches the command and its session but never
 * ends the keeper before the command; SIGKILL ends it (the host then
 * reads that from its wait, as for any leader).  A command that died of
 * signal N makes the keeper die of N too (no core: RLIMIT_CORE 0).
 *
 * Disk (D-6): every second (every 100 ms while output grows fast) the
 * keeper punches a hole in each output file below its last CAP bytes plus
 * a margin (fallocate PUNCH_HOLE, size kept): bytes that far back are
 * dropped by the next read anyway (P-OUT-2), so a task writing while no
 * host reads holds at most about CAP + max(CAP, 1 MiB) blocks per stream.
 * Not with 'b' (backpressure: the file is the buffer, nothing is
 * dropped). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

extern char **environ;

#define STATUS_FD 3
#define FIFO_FD 4
/* The status file's second line starts here (the first is padded). */
#define END_AT 64

static unsigned long long punched[3]; /* per output fd: holes up to here */

static int close_sig(void) {
  return SIGRTMIN + 1; /* the same in the library (durable.c) */
}

static unsigned long long start_ticks(void) {
  char buf[1024];
  ssize_t n;
  char *p;
  unsigned long long v = 0;
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  int field;

  if (fd < 0)
    return 0;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* pid (comm) state ...: comm may hold anything, so from its last ')'. */
  p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  /* Field 3 (state) follows; the start time is field 22. */
  for (field = 2; field < 22 && p != NULL; field++)
    p = strchr(p + 1, ' ');
  if (p != NULL)
    v = strtoull(p + 1, NULL, 10);
  return v;
}

static void put_at(const char *text, off_t at) {
  size_t len = strlen(text);
  ssize_t w;
  do
    w = pwrite(STATUS_FD, text, len, at);
  while (w < 0 && errno == EINTR);
}

static void punch(int fd, unsigned long long cap, int *grew) {
  struct stat st;
  unsigned long long margin = cap > (1u << 20) ? cap : (1u << 20);
  unsigned long long upto;

  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return;
  if ((unsigned long long)st.st_size <= cap + margin)
    return;
  upto = ((unsigned long long)st.st_size - cap) & ~4095ull;
  if (upto <= punched[fd] + margin)
    return;
  if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                (off_t)upto) == 0) {
    if (upto - punched[fd] > 4 * cap)
      *grew = 1;
    punched[fd] = upto;
  }
}

int main(int argc, char **argv) {
  char line[128];
  sigset_t all;
  sigset_t wake;
  sigset_t none;
  posix_spawnattr_t attr;
  struct timespec ts;
  unsigned long long cap;
  const char *flags;
  int have_fifo;
  int backpressure;
  int merged;
  pid_t child;
  int status = 0;
  int rc;
  int grew = 0;
  struct stat st1, st2;

  if (argc < 5) {
    fprintf(stderr, "uvtasks-keeper: started by the uvtasks library for a "
                    "durable task; not a command of its own\n");
    return 2;
  }
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
  cap = strtoull(argv[1], NULL, 10);
  flags = argv[2];
  have_fifo = strchr(flags, 'i') != NULL;
  backpressure = strchr(flags, 'b') != NULL;
  /* Neither descriptor reaches the command. */
  fcntl(STATUS_FD, F_SETFD, FD_CLOEXEC);
  if (have_fifo)
    fcntl(FIFO_FD, F_SETFD, FD_CLOEXEC);
  merged = fstat(1, &st1) == 0 && fstat(2, &st2) == 0 &&
           st1.st_ino == st2.st_ino && st1.st_dev == st2.st_dev;

  /* The identity (D-4), padded so the end line has a fixed place. */
  snprintf(line, sizeof(line), "uvtasks-keeper 1 run %ld %llu %ld",
           (long)getpid(), start_ticks(), (long)getsid(0));
  {
    size_t n = strlen(line);
    while (n < END_AT - 1)
      line[n++] = ' ';
    line[END_AT - 1] = '\n';
    line[END_AT] = '\0';
  }
  put_at(line, 0);

  /* The command: same session and group, every signal at its default
   * and none blocked (the keeper's own mask is not for it). */
  sigemptyset(&none);
  rc = posix_spawnattr_init(&attr);
  if (rc == 0)
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                             POSIX_SPAWN_SETSIGDEF);
  if (rc == 0)
    rc = posix_spawnattr_setsigmask(&attr, &none);
  if (rc == 0)
    rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (rc == 0)
    rc = posix_spawn(&child, argv[3], NULL, &attr, argv + 4, environ);
  if (rc != 0) {
    snprintf(line, sizeof(line), "end spawn %d\n", rc);
    put_at(line, END_AT);
    fprintf(stderr, "uvtasks-keeper: %s: %s\n", argv[3], strerror(rc));
    return 127;
  }
  posix_spawnattr_destroy(&attr);

  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, close_sig());
  for (;;) {
    siginfo_t si;
    int s;
    ts.tv_sec = grew ? 0 : 1;
    ts.tv_nsec = grew ? 100000000L : 0;
    s = sigtimedwait(&wake, &si, &ts);
    if (s == close_sig() && have_fifo) {
      /* The host's close_stdin: the command reads end of file once every
       * other writer is gone too. */
      close(FIFO_FD);
      have_fifo = 0;
      continue;
    }
    if (s < 0 && errno == EAGAIN && !backpressure && cap > 0) {
      grew = 0;
      punch(1, cap, &grew);
      if (!merged)
        punch(2, cap, &grew);
    }
    do
      rc = waitpid(child, &status, WNOHANG);
    while (rc < 0 && errno == EINTR);
    if (rc == child)
      break;
    if (rc < 0 && errno == ECHILD) {
      status = 127 << 8; /* cannot happen: it is our child */
      break;
    }
  }

  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    struct rlimit none_core = {0, 0};
    sigset_t one;
    snprintf(line, sizeof(line), "end signal %d\n", sig);
    put_at(line, END_AT);
    /* Die of the same signal, without a core file of ours. */
    setrlimit(RLIMIT_CORE, &none_core);
    signal(sig, SIG_DFL);
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    _exit(128 + sig);
  }
  snprintf(line, sizeof(line), "end exit %d\n", WEXITSTATUS(status));
  put_at(line, END_AT);
  return WEXITSTATUS(status);
}
