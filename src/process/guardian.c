/* The process guardian (uvt_process_guardian(), LU-3): when the host
 * process ends however it ends (SIGKILL, a crash, a normal exit), every
 * process that carries the host's mark in its environment gets SIGKILL,
 * until none is left.
 *
 * This is the Node package's guardian (N-10, bindings/node/guardian.js)
 * made a part of the library, so that any host can have it without a
 * runtime of its own: the same mark ("UVTASKS_GUARDIAN=<pid>-<random>",
 * put in each task's environment by the host), the same end-of-host
 * signal (the end of a stream whose only writer is the host), the same
 * sweep.  Why the environment and not each task's session (as the MCP
 * server's guardian, src/mcp/guardian.c, tracks them): it needs no
 * message per task, so no task is uncovered between its spawn and its
 * pid reaching the guardian, and it also finds what left the session
 * (`setsid cmd &`, a daemon).  A process that clears its environment
 * (`env -i`) is out of its reach.  Why not the server's fork: that one
 * is forked before the loop and its threads exist; a running host
 * (Neovim with its TUI thread, a Lua host with libuv's threadpool) may
 * not run allocating code in a forked child, and a fork of a large host
 * would keep every page it later writes.  So the guardian is a shell
 * script (POSIX sh, grep, sed, kill: present on every system the process
 * producer runs on) started with posix_spawn, which copies nothing.
 *
 * The stream is a Unix socket pair, not a pipe: a task of the same user
 * could open a pipe's write end through /proc/<host>/fd and hold the
 * guardian off; a socket cannot be opened that way (the reason
 * M-MCP-13 gives).  The host's end is close-on-exec, so no child that
 * execs holds it (the process producer also closes every descriptor
 * above stdio in its children, P-SPAWN-5).  The guardian runs in a
 * session of its own (the host's terminal and process group signals do
 * not reach it), ignores the shutdown signals, and is not the host's
 * child: the shell that posix_spawn starts puts it in the background and
 * exits at once (reaped here), so the host never has a zombie of it and
 * a host's waitpid(-1) never sees it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process-internal.h"

/* $1 is the mark.  The outer shell puts the guardian in the background
 * with the socket as its stdin (an explicit redirection: without one, an
 * asynchronous list's stdin would be /dev/null) and exits.  The guardian
 * reads until end of file (the host never writes), then sends SIGKILL to
 * every process whose environment holds the mark as one whole entry,
 * again until a pass finds none (a process that forked between the scan
 * and the kill is found by the next pass; at most 100 passes).  Zombies
 * have no environment left to read. */
static const char guardian_script[] =
    "trap '' HUP INT QUIT TERM PIPE USR1 USR2\n"
    "exec 3<&0\n"
    "(\n"
    "  while read -r _; do :; done\n"
    "  n=0\n"
    "  while [ $n -lt 100 ]; do\n"
    "    p=$(grep -lzxF -e \"$1\" /proc/[0-9]*/environ 2>/dev/null |"
    " sed -e 's|^/proc/||' -e 's|/environ$||')\n"
    "    [ -n \"$p\" ] || exit 0\n"
    "    kill -9 $p 2>/dev/null\n"
    "    n=$((n + 1))\n"
    "  done\n"
    ") <&3 >/dev/null 2>&1 &\n"
    "exit 0\n";

static uv_once_t once = UV_ONCE_INIT;
static uv_mutex_t guardian_mutex;
static pid_t guardian_owner; /* the process that started it */
static int guardian_fd = -1; /* our end of its socket */
static char guardian_mark[UVT_GUARDIAN_MARK_MAX];

static void init_once(void) {
  if (uv_mutex_init(&guardian_mutex) != 0)
    abort();
}

/* A mark no other host has: our pid and 64 random bits. */
static int make_mark(char *out, size_t size) {
  unsigned char r[8];
  ssize_t n;
  int fd;

  n = getrandom(r, sizeof(r), GRND_NONBLOCK);
  if (n != (ssize_t)sizeof(r)) {
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return -errno;
    n = read(fd, r, sizeof(r));
    close(fd);
    if (n != (ssize_t)sizeof(r))
      return UV_EIO;
  }
  snprintf(out, size, "UVTASKS_GUARDIAN=%ld-%02x%02x%02x%02x%02x%02x%02x%02x",
           (long)getpid(), r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
  return 0;
}

static int start_guardian(char *mark, size_t size) {
  static char *const envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, dflt;
  char *argv[6];
  int fds[2];
  int err, status;
  pid_t pid;

  err = make_mark(mark, size);
  if (err != 0)
    return err;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return -errno;
  /* The guardian only reads; we only hold our end (writing nothing). */
  shutdown(fds[0], SHUT_WR);
  shutdown(fds[1], SHUT_RD);
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  /* dup2 onto 0 clears close-on-exec there; our end stays close-on-exec. */
  posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  sigemptyset(&none);
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGCHLD);
  sigaddset(&dflt, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dflt);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  argv[0] = "/bin/sh";
  argv[1] = "-c";
  argv[2] = (char *)guardian_script;
  argv[3] = "uvtasks-guardian";
  argv[4] = mark;
  argv[5] = NULL;
  err = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[0]);
  if (err != 0) {
    close(fds[1]);
    return -err;
  }
  /* The outer shell exits as soon as the guardian is in the background:
   * a fork and an exit, a millisecond or two. */
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      /* Reaped by someone else (a host reaping every child): the
       * guardian may or may not run; assume it does. */
      status = 0;
      break;
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    close(fds[1]);
    return UV_ENOENT;
  }
  guardian_fd = fds[1];
  return 0;
}

int uvt_process_guardian(char mark[UVT_GUARDIAN_MARK_MAX]) {
  int err = 0;

  if (mark == NULL)
    return UV_EINVAL;
  uv_once(&once, init_once);
  uv_mutex_lock(&guardian_mutex);
  /* A forked child of the host shares its parent's guardian and socket,
   * but its own end is not what that guardian waits for: it gets its
   * own. */
  if (guardian_fd >= 0 && guardian_owner != getpid()) {
    close(guardian_fd);
    guardian_fd = -1;
  }
  if (guardian_fd < 0) {
    err = start_guardian(guardian_mark, sizeof(guardian_mark));
    if (err == 0)
      guardian_owner = getpid();
  }
  if (err == 0)
    memcpy(mark, guardian_mark, UVT_GUARDIAN_MARK_MAX);
  uv_mutex_unlock(&guardian_mutex);
  return err;
}
