/* The /proc readers of the process producer: a process's stat line
 * (uvt__pstat_read), whether a process is on its way out
 * (uvt__pstat_dying, P-LEFT-1), and a list of pids in a /proc or cgroup
 * file (uvt__read_pids).  They read files and call nothing else. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "process-internal.h"

int uvt__pstat_read(pid_t pid, uvt__pstat_t *st) {
  char path[64];
  char buf[1024];
  char *p;
  int fd;
  ssize_t n;
  int ppid;
  int pgrp;
  int sid;
  unsigned long long start;

  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  do
    n = read(fd, buf, sizeof(buf) - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  /* "pid (comm) S ppid pgrp session tty tpgid flags minflt cminflt majflt
   * cmajflt utime stime cutime cstime priority nice threads itrealvalue
   * starttime ...": comm may hold anything, so parse after the last ')'. */
  p = strrchr(buf, ')');
  {
    const char *l = strchr(buf, '(');
    st->bwrap = l != NULL && p != NULL &&
                ((p - l == 6 && memcmp(l + 1, "bwrap", 5) == 0) ||
                 (p - l == 16 && memcmp(l + 1, "uvtasks-sandbox", 15) == 0));
  }
  if (p == NULL ||
      sscanf(p + 1,
             " %c %d %d %d %*d %*d %u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
             "%*d %*d %*d %llu",
             &st->state, &ppid, &pgrp, &sid, &st->flags, &start) != 6)
    return -1;
  st->pid = pid;
  st->ppid = ppid;
  st->pgrp = pgrp;
  st->sid = sid;
  st->start = start;
  return 0;
}

/* ---- is a member on its way out? (P-LEFT-1) --------------------------- */

/* PF_EXITING (include/linux/sched.h): do_exit() has begun. */
#define PF_EXITING_ 0x00000004u

/* A member that dies of the same signal as its leader (a Ctrl-C to the
 * foreground group, `kill 0`) may still be in /proc when the leader's reap
 * is seen: freeing a large address space takes tens of milliseconds, and
 * on a busy machine a signalled process may wait longer still for a CPU.
 * Such a member is not left running.  It is dying when do_exit() has
 * begun (PF_EXITING in the stat flags), or when a fatal signal was
 * delivered and it has not run since: the kernel then marks every thread
 * of the group with a pending SIGKILL (complete_signal()), seen in SigPnd
 * or ShdPnd of /proc/<pid>/status.  A caught, ignored or blocked signal
 * sets no such mark, so a member that survives is never taken for dying.
 * It still counts as live for quiescence (P-KILL-7): only the leftover
 * count skips it. */
int uvt__pstat_dying(const uvt__pstat_t *st) {
  char path[64];
  char buf[2048];
  const char *keys[] = {"\nSigPnd:", "\nShdPnd:"};
  const char *q;
  unsigned long long mask;
  ssize_t n;
  int fd;
  size_t i;

  if (st->flags & PF_EXITING_)
    return 1;
  snprintf(path, sizeof(path), "/proc/%d/status", (int)st->pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 1; /* gone since its stat was read */
  do
    n = read(fd, buf, sizeof(buf) - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    q = strstr(buf, keys[i]);
    if (q != NULL && sscanf(q + strlen(keys[i]), " %llx", &mask) == 1 &&
        (mask & (1ull << (SIGKILL - 1))) != 0)
      return 1;
  }
  return 0;
}

/* ---- lists of pids ---------------------------------------------------- */

int uvt__read_pids(int fd, void (*fn)(void *arg, pid_t pid), void *arg) {
  char buf[4096];
  char num[16];
  size_t k = 0;
  ssize_t n;
  ssize_t i;
  int count = 0;

  do {
    do
      n = read(fd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    /* The end of the file ends the last number too. */
    for (i = 0; i <= n; i++) {
      if (i < n && buf[i] >= '0' && buf[i] <= '9') {
        if (k < sizeof(num) - 1)
          num[k++] = buf[i];
        continue;
      }
      if (i == n && n > 0)
        break; /* a number may go on in the next read */
      if (k > 0) {
        num[k] = '\0';
        fn(arg, (pid_t)strtol(num, NULL, 10));
        count++;
      }
      k = 0;
    }
  } while (n > 0);
  return count;
}
