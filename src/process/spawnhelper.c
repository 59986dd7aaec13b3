/* The spawn helper (P-SPAWN-7): a second way for a spawner thread to
 * answer a spawn request, whose cost does not grow with the host.
 *
 * Why: posix_spawn in the host copies the host's descriptor table into
 * the child (and the child then closes every descriptor above stdio), so
 * a spawn costs more the more descriptors the host holds (500 idle tasks
 * are 1,500 pipe ends).  The helper is a process with a descriptor table
 * of four entries (0-2 on /dev/null and its socket); the leaders it
 * creates copy that one.
 *
 * The design, and what this machine's kernel (6.x) and glibc (2.36)
 * allow:
 *
 * - The helper is created by a keeper thread of the host with glibc's
 *   clone() and CLONE_VM | CLONE_PIDFD | SIGCHLD: it shares the host's
 *   address space (nothing is copied, so a host of 1 GiB costs nothing
 *   more, and no page of the host becomes copy-on-write) but has its own
 *   descriptor table (no CLONE_FILES), which it closes down to its socket
 *   and /dev/null on 0..2.  Sharing the memory, it reads the request
 *   itself (a pointer is all that travels) and writes the answer into it.
 *   It runs on its own stack and only calls syscall(2) (no errno-free
 *   libc calls, no locks, no allocator), because its thread-local storage
 *   is the keeper's; the keeper only waits for it (waitpid), so nothing
 *   else uses that storage.  A fork of the host (no exec) would copy the
 *   whole host for a helper; the keeper thread avoids it.
 * - The helper creates each leader with clone() and CLONE_VM |
 *   CLONE_VFORK | CLONE_PARENT | CLONE_PARENT_SETTID: vfork semantics
 *   (the helper waits until the child has exec'd), and the host as the
 *   leader's parent, so the leader is the host's own child: it is reaped,
 *   watched by pidfd or SIGCHLD (its exit signal is the helper's,
 *   SIGCHLD), killed and counted exactly as one posix_spawn made
 *   (P-REAP-1, P-REAP-2, P-KILL-*).  clone(2) refuses CLONE_PARENT only
 *   to a pid namespace's init (EINVAL), which the helper never is.  The
 *   kernel writes the leader's pid into the request (CLONE_PARENT_SETTID)
 *   before the child runs, so even a helper killed in the middle of a
 *   spawn leaves the host knowing its child.  glibc 2.36 has no clone3()
 *   wrapper, and a raw clone3 child on a stack of its own needs code in
 *   assembly; clone() gives the same flags.  CLONE_PIDFD is not used for
 *   leaders (clone() refuses it with CLONE_PARENT_SETTID, and a pidfd made
 *   in the helper would have to travel back by SCM_RIGHTS): the spawner
 *   thread opens the leader's pidfd with pidfd_open(), race-free for an
 *   unreaped child of its own, as the posix_spawn path does.
 * - A request travels over a SOCK_SEQPACKET socket pair (close-on-exec):
 *   the request's address, and the child's descriptors (stdin, stdout,
 *   stderr; none for a pty task, whose child opens the terminal by path)
 *   by SCM_RIGHTS; one byte comes back when the answer is in the request.
 *   One request at a time (the helper's mutex).
 *
 * Its end: the helper exits at end of file on its socket (the host's end
 * is close-on-exec: a host that execs ends it too) and gets SIGKILL when
 * the keeper thread dies (PR_SET_PDEATHSIG: a host that dies or execs).
 * The keeper reaps it (waitpid on its pid: libuv and reap.c wait only for
 * pids they know, so nobody else takes it), so it never stays a zombie.
 * A helper that died (killed, or its clone refused) is noticed by the
 * next request (or the one in flight: end of file), and the spawner
 * threads take over: the request is spawned with posix_spawn.  A host
 * that forked (getpid() differs) never talks to its parent's helper.
 *
 * Not through the helper (the spawner thread spawns as before): a task
 * with a cgroup of its own (the fork path of spawn.c), the forced fork
 * path of the tests, and builds with ThreadSanitizer (which cannot follow
 * a process sharing the host's memory); under valgrind, whose clone()
 * ends the whole program on CLONE_VM without CLONE_THREAD ("Unsupported
 * clone() flags"), uvt_process_spawn_helper() says UV_ENOTSUP: valgrind
 * is seen by its preload library in LD_PRELOAD, before anything is
 * cloned. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process-internal.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

#if defined(__SANITIZE_THREAD__)
#define HELPER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HELPER_TSAN 1
#endif
#endif

/* The helper and its children run on memory the sanitizers do not know
 * as a stack and with the keeper's thread state: keep them out. */
#if defined(__clang__) || defined(__GNUC__)
#define NO_SAN __attribute__((no_sanitize_address, no_sanitize_undefined))
#else
#define NO_SAN
#endif

/* The helper's stack, then its children's (one at a time: vfork). */
#define STACK_BYTES (64 * 1024)
#define GUARD_BYTES 4096

/* The helper's descriptor for its socket. */
#define HELPER_SOCK 3

int uvt__process_spawn_helper_default;

/* One helper process. */
typedef struct {
  uv_mutex_t mutex; /* one request at a time */
  int sock;         /* the host's end; -1 once closed */
  int peer;         /* the helper's end (closed in the host once the helper
                       has its copy; the number is read by the helper) */
  pid_t owner;      /* getpid() of the host that made it */
  pid_t pid;        /* the helper */
  int pidfd;        /* the helper's (CLONE_PIDFD), the host's */
  atomic_int dead;  /* it exited, or its clone was refused */
  atomic_uint served;
  uv_thread_t keeper;
  uv_sem_t ready;
  int start_err;
  char *map; /* guard, helper stack, guard, child stack */
  size_t map_bytes;
} one_t;

/* The registry's helpers: one per spawner thread, so that spawns overlap
 * as they do on the threads (each helper waits for its child's exec). */
#define HELPERS_MAX 4
struct uvt__helper_s {
  unsigned n;
  one_t *one[HELPERS_MAX];
};

/* A request on the socket: the request's address and how many
 * descriptors come with it (SCM_RIGHTS). */
typedef struct {
  uvt__spawn_t *sp;
  int nfd;
} helper_msg_t;

/* h_err's "not taken": the helper could not receive the descriptors (its
 * table was full): nothing was spawned, the spawner thread spawns. */
#define NOT_TAKEN (-1)

/* What the helper hands its child: the request and the descriptors it
 * received (numbers in the helper's table). */
typedef struct {
  uvt__spawn_t *sp;
  int fd[3];
  int err; /* written by the child when it fails before exec */
} helper_req_t;

/* ---- the helper's side (own descriptor table, the host's memory) ------- */

NO_SAN static long sys_ret_err(long r) {
  return r < 0 ? -(long)errno : r;
}

/* The leader, between clone and exec: only system calls.  Its memory is
 * the helper's (the host's); the helper is held until exec. */
NO_SAN static int leader_main(void *arg) {
  helper_req_t *r = arg;
  const uvt__spawn_t *sp = r->sp;
  sigset_t none;
  long fd;

  sigemptyset(&none);
  if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, _NSIG / 8) != 0)
    goto fail;
  if (syscall(SYS_setsid) < 0)
    goto fail;
  if (sp->tty != NULL) {
    /* P-PTY-1: a session leader without a terminal opening one gets it. */
    fd = syscall(SYS_openat, AT_FDCWD, sp->tty, O_RDWR, 0);
    if (fd < 0)
      goto fail;
    if (fd != 0 && (syscall(SYS_dup3, fd, 0, 0) < 0 || syscall(SYS_close, fd)))
      goto fail;
    if (syscall(SYS_ioctl, 0, TIOCSCTTY, 0) != 0 ||
        syscall(SYS_dup3, 0, 1, 0) < 0 || syscall(SYS_dup3, 0, 2, 0) < 0)
      goto fail;
  } else {
    /* The helper's 0..2 are /dev/null (0 read-only), every received
     * descriptor is above them. */
    if (r->fd[0] >= 0 && syscall(SYS_dup3, r->fd[0], 0, 0) < 0)
      goto fail;
    if (syscall(SYS_dup3, r->fd[1], 1, 0) < 0 ||
        syscall(SYS_dup3, r->fd[2], 2, 0) < 0)
      goto fail;
  }
  if (sp->cwd != NULL && syscall(SYS_chdir, sp->cwd) != 0)
    goto fail;
  /* P-SPAWN-5: nothing above stdio (this table is the helper's copy). */
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
    goto fail;
  syscall(SYS_execve, sp->file, sp->argv, sp->envp);
fail:
  r->err = errno;
  syscall(SYS_exit, 127);
  return 127;
}

/* Take one request: its address and descriptors.  1, or 0 at end of file
 * (or any failure of the socket: the helper ends). */
NO_SAN static int helper_recv(helper_req_t *r, int *taken) {
  union {
    char buf[CMSG_SPACE(3 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m;
  struct iovec iov;
  struct cmsghdr *c;
  helper_msg_t msg = {NULL, 0};
  int got[3] = {-1, -1, -1};
  int k = 0;
  long n;
  int i;

  iov.iov_base = &msg;
  iov.iov_len = sizeof(msg);
  m.msg_name = NULL;
  m.msg_namelen = 0;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = u.buf;
  m.msg_controllen = sizeof(u.buf);
  m.msg_flags = 0;
  do
    n = sys_ret_err(syscall(SYS_recvmsg, HELPER_SOCK, &m, MSG_CMSG_CLOEXEC));
  while (n == -EINTR);
  if (n != (long)sizeof(msg) || msg.sp == NULL || msg.nfd < 0 || msg.nfd > 3)
    return 0;
  r->sp = msg.sp;
  r->err = 0;
  for (i = 0; i < 3; i++)
    r->fd[i] = -1;
  c = CMSG_FIRSTHDR(&m);
  if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
    const unsigned char *p = CMSG_DATA(c);
    k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (i = 0; i < k && i < 3; i++)
      __builtin_memcpy(&got[i], p + i * sizeof(int), sizeof(int));
  }
  /* A full descriptor table cuts the descriptors (MSG_CTRUNC). */
  *taken = k == msg.nfd && !(m.msg_flags & MSG_CTRUNC);
  if (!*taken) {
    for (i = 0; i < k && i < 3; i++)
      syscall(SYS_close, got[i]);
    return 1;
  }
  /* Three: stdin, stdout, stderr; two: stdout, stderr (stdin from
   * /dev/null); none: a terminal. */
  if (k == 3) {
    r->fd[0] = got[0];
    r->fd[1] = got[1];
    r->fd[2] = got[2];
  } else if (k == 2) {
    r->fd[1] = got[0];
    r->fd[2] = got[1];
  }
  return 1;
}

NO_SAN static int helper_main(void *arg) {
  one_t *h = arg;
  char *child_stack = h->map + h->map_bytes;
  helper_req_t r;
  long pid;
  long fd;
  int taken;
  int i;
  char one = 1;

  /* Its end with the host's (PR_SET_PDEATHSIG follows the keeper thread,
   * which lives as long as the helper is wanted). */
  if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 ||
      syscall(SYS_getppid) != h->owner)
    syscall(SYS_exit, 1);
  /* Its descriptors: the socket at 3, /dev/null on 0..2, nothing else. */
  if (h->peer != HELPER_SOCK &&
      syscall(SYS_dup3, h->peer, HELPER_SOCK, O_CLOEXEC) < 0)
    syscall(SYS_exit, 1);
  syscall(SYS_close_range, 0U, 2U, 0U);
  syscall(SYS_close_range, HELPER_SOCK + 1U, ~0U, 0U);
  fd = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY, 0);
  if (fd != 0)
    syscall(SYS_exit, 1);
  fd = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_WRONLY, 0);
  if (fd != 1 || syscall(SYS_dup3, 1, 2, 0) != 2)
    syscall(SYS_exit, 1);
  /* Every signal handler is the host's, in the host's memory: the
   * helper's (and so each leader's) go back to the default; the keeper
   * blocked every signal before the clone, and the leader unblocks them. */
  for (i = 1; i < _NSIG; i++) {
    /* The kernel's struct sigaction: SIG_DFL is 0, and so is the rest. */
    struct {
      unsigned long handler;
      unsigned long flags;
      unsigned long restorer;
      unsigned long mask;
    } dfl = {0, 0, 0, 0};
    if (i != SIGKILL && i != SIGSTOP)
      syscall(SYS_rt_sigaction, i, &dfl, NULL, sizeof(dfl.mask));
  }
  while (helper_recv(&r, &taken)) {
    if (!taken) {
      r.sp->h_err = NOT_TAKEN;
      syscall(SYS_sendto, HELPER_SOCK, &one, 1, MSG_NOSIGNAL, NULL, 0);
      continue;
    }
    /* glibc's clone() runs the child on its own stack (the raw system
     * call would run it on ours). */
    pid = clone(leader_main, child_stack,
                CLONE_VM | CLONE_VFORK | CLONE_PARENT | CLONE_PARENT_SETTID, &r,
                &r.sp->h_pid);
    if (pid < 0)
      r.sp->h_err = errno;
    else if (r.err != 0)
      r.sp->h_err = r.err;
    for (i = 0; i < 3; i++)
      if (r.fd[i] >= 0)
        syscall(SYS_close, r.fd[i]);
    syscall(SYS_sendto, HELPER_SOCK, &one, 1, MSG_NOSIGNAL, NULL, 0);
  }
  syscall(SYS_exit, 0);
  return 0;
}

/* ---- the host's side -------------------------------------------------- */

/* The keeper thread: makes the helper, then waits for its end and reaps
 * it.  Between the two it touches nothing (its thread-local storage is
 * the helper's now). */
static void keeper_main(void *arg) {
  one_t *h = arg;
  sigset_t all;
  int status;
  long pid;
  pid_t r;

  /* The helper starts with every signal blocked (the host's handlers are
   * not its own); the keeper needs none either. */
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pid = clone(helper_main, h->map + GUARD_BYTES + STACK_BYTES,
              CLONE_VM | CLONE_PIDFD | SIGCHLD, h, &h->pidfd);
  if (pid < 0) {
    h->start_err = UVT__PERR(errno);
    atomic_store(&h->dead, 1);
    uv_sem_post(&h->ready);
    return;
  }
  h->pid = (pid_t)pid;
  uv_sem_post(&h->ready);
  do
    r = waitpid((pid_t)pid, &status, 0);
  while (r < 0 && errno == EINTR);
  atomic_store(&h->dead, 1);
}

/* The program runs under valgrind (its core preload is in LD_PRELOAD). */
static int under_valgrind(void) {
  const char *p = getenv("LD_PRELOAD");
  return p != NULL && strstr(p, "vgpreload") != NULL;
}

static int one_start(one_t **out) {
  one_t *h;
  int sv[2];
  int err;

  *out = NULL;
#if defined(HELPER_TSAN)
  return UV_ENOTSUP;
#endif
  if (under_valgrind())
    return UV_ENOTSUP;
  h = uvt__calloc(1, sizeof(*h));
  if (h == NULL)
    return UV_ENOMEM;
  h->pidfd = -1;
  h->owner = getpid();
  atomic_init(&h->dead, 0);
  atomic_init(&h->served, 0);
  h->map_bytes = 2 * (GUARD_BYTES + STACK_BYTES);
  h->map = mmap(NULL, h->map_bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (h->map == MAP_FAILED) {
    uvt__free(h);
    return UV_ENOMEM;
  }
  mprotect(h->map, GUARD_BYTES, PROT_NONE);
  mprotect(h->map + GUARD_BYTES + STACK_BYTES, GUARD_BYTES, PROT_NONE);
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    err = UVT__PERR(errno);
    goto fail_map;
  }
  h->sock = sv[0];
  h->peer = sv[1];
  err = uv_mutex_init(&h->mutex);
  if (err != 0)
    goto fail_sock;
  err = uv_sem_init(&h->ready, 0);
  if (err != 0)
    goto fail_mutex;
  err = uv_thread_create(&h->keeper, keeper_main, h);
  if (err != 0)
    goto fail_sem;
  uv_sem_wait(&h->ready);
  uv_sem_destroy(&h->ready);
  /* The helper has its copy of its end (made at the clone).  h->peer
   * keeps the number: the helper may not have read it yet. */
  close(h->peer);
  if (h->start_err != 0) {
    err = h->start_err;
    uv_thread_join(&h->keeper);
    /* valgrind, a seccomp filter: no helper here. */
    if (err == UV_EINVAL || err == UV_EPERM || err == UV_ENOSYS)
      err = UV_ENOTSUP;
    uv_mutex_destroy(&h->mutex);
    close(h->sock);
    munmap(h->map, h->map_bytes);
    uvt__free(h);
    return err;
  }
  *out = h;
  return 0;

fail_sem:
  uv_sem_destroy(&h->ready);
fail_mutex:
  uv_mutex_destroy(&h->mutex);
fail_sock:
  close(sv[0]);
  close(sv[1]);
fail_map:
  munmap(h->map, h->map_bytes);
  uvt__free(h);
  return err;
}

static void one_stop(one_t *h) {
  /* End of file for the helper even where a forked child of the host
   * still holds a copy of our end; SIGKILL (through its pidfd: no pid
   * reuse) for one that is stopped.  No request is out: the spawner
   * threads have left. */
  shutdown(h->sock, SHUT_RDWR);
  if (h->pidfd >= 0)
    syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
  uv_thread_join(&h->keeper);
  if (h->pidfd >= 0)
    close(h->pidfd);
  close(h->sock);
  uv_mutex_destroy(&h->mutex);
  munmap(h->map, h->map_bytes);
  uvt__free(h);
}

/* The helper is gone: say so (under the mutex). */
static void helper_lost(one_t *h) {
  atomic_store(&h->dead, 1);
}

/* Spawn through `h`, whose mutex the caller holds (released here). */
static int one_spawn(one_t *h, uvt__spawn_t *sp, pid_t *pid_out) {
  union {
    char buf[CMSG_SPACE(3 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m;
  struct iovec iov;
  struct cmsghdr *c;
  helper_msg_t msg;
  int fds[3];
  int nfd = 0;
  ssize_t n;
  char one;
  pid_t pid;
  int err;
  int status;

  if (sp->tty == NULL) {
    if (sp->fd[0] >= 0)
      fds[nfd++] = sp->fd[0];
    fds[nfd++] = sp->fd[1];
    fds[nfd++] = sp->fd[2];
  }
  if (atomic_load(&h->dead)) {
    uv_mutex_unlock(&h->mutex);
    return UVT__HELPER_NO;
  }
  __atomic_store_n(&sp->h_pid, 0, __ATOMIC_SEQ_CST);
  sp->h_err = 0;
  memset(&m, 0, sizeof(m));
  memset(&msg, 0, sizeof(msg));
  msg.sp = sp;
  msg.nfd = nfd;
  iov.iov_base = &msg;
  iov.iov_len = sizeof(msg);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (nfd > 0) {
    memset(&u, 0, sizeof(u));
    m.msg_control = u.buf;
    m.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
    c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
  }
  do
    n = sendmsg(h->sock, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof(msg)) {
    /* Nothing reached the helper: EPIPE or ECONNRESET (it died), or the
     * kernel's refusal to pass descriptors (ENOMEM, ETOOMANYREFS).  The
     * spawner thread spawns it itself. */
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      helper_lost(h);
    uv_mutex_unlock(&h->mutex);
    return UVT__HELPER_NO;
  }
  do
    n = recv(h->sock, &one, 1, 0);
  while (n < 0 && errno == EINTR);
  pid = __atomic_load_n(&sp->h_pid, __ATOMIC_SEQ_CST);
  if (n != 1) {
    /* It died with the request.  The kernel wrote the child's pid before
     * the child ran, and the helper's socket closes only once its clone
     * is over: no pid, no child, and the spawner threads take over; a pid
     * is our child (exec'd, or about to be: its exit is its outcome). */
    helper_lost(h);
    uv_mutex_unlock(&h->mutex);
    if (pid <= 0)
      return UVT__HELPER_NO;
    *pid_out = pid;
    return 0;
  }
  err = sp->h_err;
  uv_mutex_unlock(&h->mutex);
  if (err == NOT_TAKEN)
    return UVT__HELPER_NO; /* its table was full: spawned here */
  atomic_fetch_add(&h->served, 1);
  if (err == 0 && pid > 0) {
    *pid_out = pid;
    return 0;
  }
  if (pid > 0) {
    /* The child failed before exec and exited: it is ours to reap. */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    return UVT__PERR(err);
  }
  /* clone() refused: a refusal that will not change makes the helper
   * useless (the spawner threads spawn from now on); anything else
   * (EAGAIN, ENOMEM) is this spawn's error, as posix_spawn's would be. */
  if (err == EINVAL || err == EPERM || err == ENOSYS) {
    atomic_store(&h->dead, 1);
    return UVT__HELPER_NO;
  }
  return UVT__PERR(err != 0 ? err : EAGAIN);
}

int uvt__helper_start(unsigned n, uvt__helper_t **out) {
  uvt__helper_t *pool;
  int err = 0;

  *out = NULL;
  if (n == 0)
    n = 1;
  if (n > HELPERS_MAX)
    n = HELPERS_MAX;
  pool = uvt__calloc(1, sizeof(*pool));
  if (pool == NULL)
    return UV_ENOMEM;
  while (pool->n < n) {
    err = one_start(&pool->one[pool->n]);
    if (err != 0)
      break;
    pool->n++;
  }
  if (pool->n == 0) {
    uvt__free(pool);
    return err;
  }
  *out = pool; /* fewer than asked is fine */
  return 0;
}

void uvt__helper_stop(uvt__helper_t *pool) {
  unsigned i;
  if (pool == NULL)
    return;
  for (i = 0; i < pool->n; i++)
    one_stop(pool->one[i]);
  uvt__free(pool);
}

int uvt__helper_spawn(uvt__helper_t *pool, uvt__spawn_t *sp, pid_t *pid) {
  one_t *h;
  unsigned i;

  /* A forked host must not talk to its parent's helpers: the address it
   * would send means nothing in the parent's memory. */
  if (pool->n == 0 || getpid() != pool->one[0]->owner)
    return UVT__HELPER_NO;
  /* A free one (there is one per spawner thread), else wait for the
   * first one alive. */
  for (i = 0; i < pool->n; i++) {
    h = pool->one[i];
    if (!atomic_load(&h->dead) && uv_mutex_trylock(&h->mutex) == 0)
      return one_spawn(h, sp, pid);
  }
  for (i = 0; i < pool->n; i++) {
    h = pool->one[i];
    if (!atomic_load(&h->dead)) {
      uv_mutex_lock(&h->mutex);
      return one_spawn(h, sp, pid);
    }
  }
  return UVT__HELPER_NO;
}

int uvt__helper_alive(const uvt__helper_t *pool) {
  unsigned i;
  for (i = 0; pool != NULL && i < pool->n; i++)
    if (!atomic_load(&pool->one[i]->dead))
      return 1;
  return 0;
}

unsigned uvt__helper_count(const uvt__helper_t *pool) {
  return pool != NULL ? pool->n : 0;
}

pid_t uvt__helper_pid(const uvt__helper_t *pool, unsigned i) {
  one_t *h;
  if (pool == NULL || i >= pool->n)
    return 0;
  h = pool->one[i];
  return !atomic_load(&h->dead) ? h->pid : 0;
}

unsigned uvt__helper_served(const uvt__helper_t *pool) {
  unsigned i;
  unsigned n = 0;
  if (pool == NULL)
    return 0;
  for (i = 0; i < pool->n; i++)
    n += atomic_load(&pool->one[i]->served);
  return n;
}
