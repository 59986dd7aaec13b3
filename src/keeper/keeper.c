/* uvtasks-keeper: the process that owns a durable task's command (D-1,
 * D-2; docs/durable.md).  One per durable task, and the only process the
 * library adds to it.  The library spawns it as the task's leader (its
 * session and process group are the task's, so kills, signals and
 * leftover counts work as for any task), and it runs the command as its
 * child in that session and group, waits for it, writes how it ended into
 * the task's status file and exits the same way, so that whatever waits
 * for the keeper (the host, if one runs) reads the command's own status.
 *
 *   uvtasks-keeper CAP FLAGS SIG FILE ARG0 [ARG...]
 *
 * Descriptors: 0 the command's stdin, 1 and 2 its output files in the
 * state directory (the same file twice with merged streams, FLAGS 'm'),
 * 3 the status file, locked by the host with flock(2) before the spawn
 * (the lock goes with the descriptor: while the keeper lives, the file is
 * locked), and 4 with FLAGS 'i' the write end of the stdin FIFO, held so
 * that the command never reads end of file because a host went away;
 * signal SIG closes it (the host's close_stdin).  Neither 3 nor 4 reaches
 * the command.  FLAGS is '-' or letters: 'i', 'm', and 'b' (output
 * backpressure: never punch unread bytes).
 *
 * The status file, written with pwrite at fixed places:
 *   "uvtasks-keeper 1 run PID START SID"     at start, padded to 64 bytes
 *                                            (START: clock ticks after boot,
 *                                            /proc/self/stat's field 22:
 *                                            the identity, D-4)
 *   "end exit N\n" | "end signal N\n"        at 64, when the command ended
 *   "end spawn ERRNO\n"                      at 64, when it could not run
 * Both lines fit the file's first block, taken by the first: the end is
 * recorded even on a full disk.
 *
 * Signals: every signal is blocked (and every disposition is the default
 * one: the library's spawn resets them), so a kill's SIGTERM, a Ctrl-C or
 * a chosen signal (P-KILL-8) reaches the command and its session but
 * never ends the keeper before the command; SIGKILL ends it (the host
 * then reads that from its wait, as for any leader).  A command that died
 * of signal N makes the keeper die of N too (no core: RLIMIT_CORE 0).
 *
 * Disk (D-6): every second (every 100 ms while output grows fast) the
 * keeper punches a hole in each output file below its last CAP bytes plus
 * a margin (fallocate PUNCH_HOLE, size kept): bytes that far back are
 * dropped by the next read anyway (P-OUT-2), so a task writing while no
 * host reads holds at most about CAP + max(CAP, 1 MiB) blocks per stream.
 * Not with 'b' (backpressure: the file is the buffer, nothing is dropped).
 *
 * Cost: a keeper lives as long as its task, and its start is what a
 * durable start costs on top of a plain one.  On x86-64 and AArch64 it is
 * built without the C library (UVT_KEEPER_NOLIBC: a static program of a
 * few pages calling the kernel directly, here below): a dynamic program's
 * start (the loader, and the C library's CPU feature probes, which trap
 * to the hypervisor on a virtual machine) cost more than the command
 * `true` itself, measured.  Elsewhere, and in sanitizer builds, the same
 * code runs on the C library. */

/* ---- The system layer ------------------------------------------------- */

#ifdef UVT_KEEPER_NOLIBC

typedef long k_long;
typedef unsigned long k_size;
typedef long k_ssize;

#if defined(__x86_64__)
#define NR_read 0
#define NR_write 1
#define NR_close 3
#define NR_rt_sigprocmask 14
#define NR_pipe2 293
#define NR_getpid 39
#define NR_clone 56
#define NR_execve 59
#define NR_exit 60
#define NR_wait4 61
#define NR_kill 62
#define NR_fcntl 72
#define NR_getsid 124
#define NR_rt_sigtimedwait 128
#define NR_openat 257
#define NR_fallocate 285
#define NR_pwrite64 18
#define NR_lseek 8
#define NR_prlimit64 302
#define NR_exit_group 231

static inline k_long sys6(k_long n, k_long a, k_long b, k_long c, k_long d,
                          k_long e, k_long f) {
  register k_long r10 __asm__("r10") = d;
  register k_long r8 __asm__("r8") = e;
  register k_long r9 __asm__("r9") = f;
  k_long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  xor %rbp, %rbp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call keeper_start\n"
        "  hlt\n");

#elif defined(__aarch64__)
#define NR_read 63
#define NR_write 64
#define NR_close 57
#define NR_rt_sigprocmask 135
#define NR_pipe2 59
#define NR_getpid 172
#define NR_clone 220
#define NR_execve 221
#define NR_exit 93
#define NR_wait4 260
#define NR_kill 129
#define NR_fcntl 25
#define NR_getsid 156
#define NR_rt_sigtimedwait 137
#define NR_openat 56
#define NR_fallocate 47
#define NR_pwrite64 68
#define NR_lseek 62
#define NR_prlimit64 261
#define NR_exit_group 94

static inline k_long sys6(k_long n, k_long a, k_long b, k_long c, k_long d,
                          k_long e, k_long f) {
  register k_long x8 __asm__("x8") = n;
  register k_long x0 __asm__("x0") = a;
  register k_long x1 __asm__("x1") = b;
  register k_long x2 __asm__("x2") = c;
  register k_long x3 __asm__("x3") = d;
  register k_long x4 __asm__("x4") = e;
  register k_long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}

__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  mov x29, #0\n"
        "  mov x30, #0\n"
        "  mov x0, sp\n"
        "  and sp, x0, #-16\n"
        "  bl keeper_start\n"
        "  brk #0\n");
#else
#error "UVT_KEEPER_NOLIBC: x86-64 and AArch64 only"
#endif

#define K_O_RDONLY 0
#define K_O_CLOEXEC 02000000
#define K_AT_FDCWD (-100)
#define K_F_SETFD 2
#define K_FD_CLOEXEC 1
#define K_SIG_BLOCK 0
#define K_SIG_UNBLOCK 1
#define K_SIG_SETMASK 2
#define K_SIGCHLD 17
#define K_WNOHANG 1
#define K_SEEK_END 2
#define K_RLIMIT_CORE 4
#define K_EINTR 4
#define K_EAGAIN 11
#define K_ECHILD 10

typedef unsigned long k_sigset; /* the kernel's 64 signals */

struct k_timespec {
  long tv_sec;
  long tv_nsec;
};
struct k_rlimit {
  unsigned long cur, max;
};
/* siginfo: 128 bytes; si_signo first. */
typedef struct {
  int signo;
  int pad[31];
} k_siginfo;

#define sys0(n) sys6((n), 0, 0, 0, 0, 0, 0)
#define sys1(n, a) sys6((n), (k_long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6((n), (k_long)(a), (k_long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c)                                                       \
  sys6((n), (k_long)(a), (k_long)(b), (k_long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d)                                                    \
  sys6((n), (k_long)(a), (k_long)(b), (k_long)(c), (k_long)(d), 0, 0)

/* The compiler may call these even in freestanding code. */
void *memset(void *d, int c, k_size n);
void *memset(void *d, int c, k_size n) {
  unsigned char *p = d;
  while (n-- > 0)
    *p++ = (unsigned char)c;
  return d;
}
void *memcpy(void *d, const void *s, k_size n);
void *memcpy(void *d, const void *s, k_size n) {
  unsigned char *p = d;
  const unsigned char *q = s;
  while (n-- > 0)
    *p++ = *q++;
  return d;
}

static k_ssize k_read(int fd, void *b, k_size n) {
  return sys3(NR_read, fd, b, n);
}
static k_ssize k_pwrite(int fd, const void *b, k_size n, long off) {
  return sys4(NR_pwrite64, fd, b, n, off);
}
static k_ssize k_write(int fd, const void *b, k_size n) {
  return sys3(NR_write, fd, b, n);
}
static int k_open_ro(const char *path) {
  return (int)sys4(NR_openat, K_AT_FDCWD, path, K_O_RDONLY | K_O_CLOEXEC, 0);
}
static void k_close(int fd) {
  sys1(NR_close, fd);
}
static void k_cloexec(int fd) {
  sys3(NR_fcntl, fd, K_F_SETFD, K_FD_CLOEXEC);
}
static long k_getpid(void) {
  return sys0(NR_getpid);
}
static long k_getsid(void) {
  return sys1(NR_getsid, 0);
}
static long k_size_of(int fd) {
  return sys3(NR_lseek, fd, 0, K_SEEK_END);
}
static void k_sigmask(int how, const k_sigset *set, k_sigset *old) {
  sys4(NR_rt_sigprocmask, how, set, old, sizeof(k_sigset));
}
/* A signal of `set` (0 and *err = EAGAIN after `ms`). */
static int k_sigwait(const k_sigset *set, long ms, int *err) {
  struct k_timespec ts;
  k_siginfo si;
  long r;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  r = sys4(NR_rt_sigtimedwait, set, &si, &ts, sizeof(k_sigset));
  *err = r < 0 ? (int)-r : 0;
  return r < 0 ? -1 : (int)r;
}
static long k_wait(long pid, int *status) {
  return sys4(NR_wait4, pid, status, K_WNOHANG, 0);
}
static int k_punch(int fd, long len) {
  /* FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE */
  return (int)sys4(NR_fallocate, fd, 0x03, 0, len);
}
static void k_no_core(void) {
  struct k_rlimit r = {0, 0};
  sys4(NR_prlimit64, 0, K_RLIMIT_CORE, &r, 0);
}
static void k_kill_self(int sig) {
  sys2(NR_kill, k_getpid(), sig);
}
static void k_exit(int code) {
  for (;;)
    sys1(NR_exit_group, code);
}
static k_sigset k_sigbit(int sig) {
  return 1ul << (sig - 1);
}

/* Run argv[0]=file in a child (a fork: the keeper is a few pages), with
 * no signal blocked; its exec error through a close-on-exec pipe.
 * Returns the pid, or -errno (nothing runs). */
static long k_spawn(const char *file, char **argv, char **envp) {
  int p[2];
  int err = 0;
  long pid;
  k_ssize n;
  if (sys2(NR_pipe2, p, K_O_CLOEXEC) < 0)
    return -K_EAGAIN;
  pid = sys6(NR_clone, K_SIGCHLD, 0, 0, 0, 0, 0);
  if (pid == 0) {
    k_sigset none = 0;
    long r;
    k_close(p[0]);
    k_sigmask(K_SIG_SETMASK, &none, 0);
    r = sys3(NR_execve, file, argv, envp);
    err = (int)-r;
    k_write(p[1], &err, sizeof(err));
    for (;;)
      sys1(NR_exit, 127);
  }
  k_close(p[1]);
  if (pid < 0) {
    k_close(p[0]);
    return pid;
  }
  do
    n = k_read(p[0], &err, sizeof(err));
  while (n == -K_EINTR);
  k_close(p[0]);
  if (n == (k_ssize)sizeof(err)) {
    int st;
    while (k_wait(pid, &st) == 0)
      ; /* it exits at once */
    return -err;
  }
  return pid;
}

#else /* the C library */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef sigset_t k_sigset;
typedef ssize_t k_ssize;
#define K_SIG_BLOCK SIG_BLOCK
#define K_SIG_UNBLOCK SIG_UNBLOCK
#define K_SIGCHLD SIGCHLD
#define K_EAGAIN EAGAIN
#define K_ECHILD ECHILD

static k_ssize k_read(int fd, void *b, size_t n) {
  return read(fd, b, n);
}
static k_ssize k_write(int fd, const void *b, size_t n) {
  return write(fd, b, n);
}
static k_ssize k_pwrite(int fd, const void *b, size_t n, long off) {
  return pwrite(fd, b, n, off);
}
static int k_open_ro(const char *path) {
  return open(path, O_RDONLY | O_CLOEXEC);
}
static void k_close(int fd) {
  close(fd);
}
static void k_cloexec(int fd) {
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}
static long k_getpid(void) {
  return getpid();
}
static long k_getsid(void) {
  return getsid(0);
}
static long k_size_of(int fd) {
  return lseek(fd, 0, SEEK_END);
}
static void k_sigmask(int how, const k_sigset *set, k_sigset *old) {
  sigprocmask(how, set, old);
}
static int k_sigwait(const k_sigset *set, long ms, int *err) {
  struct timespec ts;
  int r;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  r = sigtimedwait(set, NULL, &ts);
  *err = r < 0 ? errno : 0;
  return r;
}
static long k_wait(long pid, int *status) {
  long r = waitpid((pid_t)pid, status, WNOHANG);
  return r < 0 ? -errno : r;
}
static int k_punch(int fd, long len) {
  return fallocate(fd, 0x03, 0, len);
}
static void k_no_core(void) {
  struct rlimit r = {0, 0};
  setrlimit(RLIMIT_CORE, &r);
}
static void k_kill_self(int sig) {
  kill(getpid(), sig);
}
static void k_exit(int code) {
  _exit(code);
}
static long k_spawn(const char *file, char **argv, char **envp) {
  posix_spawnattr_t attr;
  sigset_t none;
  pid_t pid;
  int rc;
  sigemptyset(&none);
  rc = posix_spawnattr_init(&attr);
  if (rc == 0)
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  if (rc == 0)
    rc = posix_spawnattr_setsigmask(&attr, &none);
  if (rc == 0)
    rc = posix_spawn(&pid, file, NULL, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  return rc != 0 ? -rc : pid;
}
#endif

/* ---- The keeper ------------------------------------------------------- */

#define STATUS_FD 3
#define FIFO_FD 4
/* The status file's second line starts here (the first is padded). */
#define END_AT 64
#define MIB (1ul << 20)

static unsigned long punched[3]; /* per output fd: holes up to here */

static int has(const char *s, char c) {
  for (; *s != '\0'; s++)
    if (*s == c)
      return 1;
  return 0;
}

static unsigned long to_ul(const char *s) {
  unsigned long v = 0;
  while (*s >= '0' && *s <= '9')
    v = v * 10 + (unsigned long)(*s++ - '0');
  return v;
}

/* Append the decimal digits of v at p; returns the new end. */
static char *put_ul(char *p, unsigned long v) {
  char tmp[24];
  int n = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  while (n > 0)
    *p++ = tmp[--n];
  return p;
}

static char *put_s(char *p, const char *s) {
  while (*s != '\0')
    *p++ = *s++;
  return p;
}

/* One pwrite: a regular file's write is not interrupted. */
static void put_at(const char *text, char *end, long at) {
  (void)k_pwrite(STATUS_FD, text, (unsigned long)(end - text), at);
}

/* /proc/self/stat's field 22: the start time in clock ticks after boot. */
static unsigned long start_ticks(void) {
  char buf[1024];
  k_ssize n;
  char *p = 0;
  int fd = k_open_ro("/proc/self/stat");
  int field;
  k_ssize i;

  if (fd < 0)
    return 0;
  n = k_read(fd, buf, sizeof(buf) - 1);
  k_close(fd);
  if (n <= 0)
    return 0;
  /* "pid (comm) state ...": comm may hold anything; from its last ')'. */
  for (i = 0; i < n; i++)
    if (buf[i] == ')')
      p = buf + i;
  if (p == 0)
    return 0;
  buf[n] = '\0';
  for (field = 2; field < 22 && *p != '\0'; p++)
    if (*p == ' ')
      field++;
  return to_ul(p);
}

static void punch(int fd, unsigned long cap, int *grew) {
  unsigned long margin = cap > MIB ? cap : MIB;
  long size = k_size_of(fd);
  unsigned long upto;

  if (size < 0 || (unsigned long)size <= cap + margin)
    return;
  upto = ((unsigned long)size - cap) & ~4095ul;
  if (upto <= punched[fd] + margin)
    return;
  if (k_punch(fd, (long)upto) == 0) {
    if (upto - punched[fd] > 4 * cap)
      *grew = 1;
    punched[fd] = upto;
  }
}

static int keeper(int argc, char **argv, char **envp) {
  char line[128];
  char *p;
  k_sigset all;
  k_sigset wake;
  unsigned long cap;
  const char *flags;
  int have_fifo, backpressure, merged;
  int close_sig;
  long child;
  int status = 0;
  int grew = 0;

  if (argc < 6) {
    static const char usage[] =
        "uvtasks-keeper: started by the uvtasks library for a durable "
        "task; not a command of its own\n";
    (void)k_write(2, usage, sizeof(usage) - 1);
    return 2;
  }
#ifdef UVT_KEEPER_NOLIBC
  all = ~0ul;
#else
  sigfillset(&all);
#endif
  k_sigmask(K_SIG_BLOCK, &all, 0);
  cap = to_ul(argv[1]);
  flags = argv[2];
  close_sig = (int)to_ul(argv[3]);
  have_fifo = has(flags, 'i');
  backpressure = has(flags, 'b');
  merged = has(flags, 'm');
  /* Neither descriptor reaches the command. */
  k_cloexec(STATUS_FD);
  if (have_fifo)
    k_cloexec(FIFO_FD);

  /* The identity (D-4), padded so the end line has a fixed place. */
  p = put_s(line, "uvtasks-keeper 1 run ");
  p = put_ul(p, (unsigned long)k_getpid());
  *p++ = ' ';
  p = put_ul(p, start_ticks());
  *p++ = ' ';
  p = put_ul(p, (unsigned long)k_getsid());
  while (p < line + END_AT - 1)
    *p++ = ' ';
  *p++ = '\n';
  put_at(line, p, 0);

  child = k_spawn(argv[4], argv + 5, envp);
  if (child < 0) {
    p = put_s(line, "end spawn ");
    p = put_ul(p, (unsigned long)-child);
    *p++ = '\n';
    put_at(line, p, END_AT);
    return 127;
  }

#ifdef UVT_KEEPER_NOLIBC
  wake = (1ul << (K_SIGCHLD - 1)) | (1ul << (close_sig - 1));
#else
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, close_sig);
#endif
  for (;;) {
    int err = 0;
    int s = k_sigwait(&wake, grew ? 100 : 1000, &err);
    long r;
    if (s == close_sig && have_fifo) {
      /* The host's close_stdin: the command reads end of file once every
       * other writer is gone too. */
      k_close(FIFO_FD);
      have_fifo = 0;
      continue;
    }
    if (s < 0 && err == K_EAGAIN && !backpressure && cap > 0) {
      grew = 0;
      punch(1, cap, &grew);
      if (!merged)
        punch(2, cap, &grew);
    }
    do
      r = k_wait(child, &status);
    while (r == -4);
    if (r == child)
      break;
    if (r == -K_ECHILD) {
      status = 127 << 8; /* cannot happen: it is our child */
      break;
    }
  }

  if ((status & 0x7f) != 0 && (status & 0x7f) != 0x7f) {
    int sig = status & 0x7f;
#ifdef UVT_KEEPER_NOLIBC
    k_sigset one = k_sigbit(sig);
#else
    k_sigset one;
    sigemptyset(&one);
    sigaddset(&one, sig);
#endif
    p = put_s(line, "end signal ");
    p = put_ul(p, (unsigned long)sig);
    *p++ = '\n';
    put_at(line, p, END_AT);
    /* Die of the same signal (its default action: the library's spawn
     * reset every disposition), without a core file of ours. */
    k_no_core();
    k_kill_self(sig);
    k_sigmask(K_SIG_UNBLOCK, &one, 0);
    k_exit(128 + sig);
  }
  p = put_s(line, "end exit ");
  p = put_ul(p, (unsigned long)((status >> 8) & 0xff));
  *p++ = '\n';
  put_at(line, p, END_AT);
  return (status >> 8) & 0xff;
}

#ifdef UVT_KEEPER_NOLIBC
/* The stack at _start: argc, argv[], NULL, envp[], NULL, auxv. */
void keeper_start(long *sp);
void keeper_start(long *sp) {
  int argc = (int)sp[0];
  char **argv = (char **)(sp + 1);
  char **envp = argv + argc + 1;
  k_exit(keeper(argc, argv, envp));
}
#else
int main(int argc, char **argv) {
  return keeper(argc, argv, environ);
}
#endif
