/* uvtasks-sandbox: the library's own program inside a task's sandbox
 * (S-2, S-9).  bwrap runs it as the sandbox's first command:
 *
 *   uvtasks-sandbox FILE ARGV...      (descriptor 3: the status pipe)
 *
 * Why.  bwrap's monitor exits with the command's exit status, or with
 * 128 + N when the command died of signal N, so a sandboxed command killed
 * by SIGTERM read "exit code: 143 after kill request" where an unsandboxed
 * one reads "signal: SIGTERM", and a command that exits 143 by itself
 * could not be told from one killed.  And a sandbox ended only when bwrap's
 * pid 1 got SIGKILL: from the task's kill, the host's disposal or the MCP
 * server's guardian; a host killed with no guardian left it running.
 *
 * What it does.  Two processes of ours, in the task's session:
 *
 *   front   bwrap's command (the process whose end bwrap's monitor, the
 *           task's leader, reports).  It forks the keeper and waits for
 *           the command's status from it, then exits with what bwrap
 *           would have said (the code, or 128 + N), so the leader still
 *           ends exactly when the command does.
 *   keeper  a child subreaper (PR_SET_CHILD_SUBREAPER): it runs the
 *           command as its child, with every signal back at its default
 *           (bwrap's and ours ignore the kill's signals), and every
 *           process the command leaves behind is reparented to it.  When
 *           the command ends it writes the raw wait status on descriptor 3
 *           ("S<status>\n"), before the front hears of it, so the host
 *           reads it at the leader's end; then it reaps what the command
 *           left until nothing is left, and exits, which ends the sandbox.
 *           Descriptor 3 is also a lifeline: the host holds the pipe's
 *           only read end, so when the host is gone (killed, crashed, or
 *           done with the task: its record dropped) the pipe reports an
 *           error and the keeper sends SIGKILL to every process of the
 *           sandbox (kill(-1) in its own pid namespace), so none outlives
 *           the host, guardian or not.
 *
 * Both ignore the signals a kill sends (inherited from bwrap's `env
 * --ignore-signal`), so a kill's SIGTERM ends the command only; SIGKILL
 * ends them with everything else.  Neither is a leftover (the library
 * knows their name, as it knows bwrap's).  A command that kills its own
 * keeper ends its task at once (what it started is then counted as left
 * running), loses the honest status (bwrap's 128 + N is read then) and
 * the lifeline: what the library and the server's guardian stop still
 * stops.  A process of the task can also open descriptor 3 through /proc
 * (same user) and write a record of its own: the host takes the last
 * one, so a task can make its own outcome say what it likes, which it
 * could by dying of that signal anyway; nothing else reads it.  One that
 * fills the pipe loses the record (the keeper does not wait for room), so
 * the outcome is bwrap's reading then, and the task still ends.  Exec
 * failures read as a shell's: 126 (found, not runnable), 127 (not
 * found). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define STATUS_FD 3

static void put_err(const char *a, const char *b) {
  char line[512];
  int n = snprintf(line, sizeof(line), "uvtasks-sandbox: %s%s%s\n", a,
                   b != NULL ? ": " : "", b != NULL ? b : "");
  if (n > 0 && write(2, line, (size_t)n < sizeof(line) ? (size_t)n : 0) < 0) {
    /* nowhere else to say it */
  }
}

static int write_all(int fd, const char *b, size_t n) {
  ssize_t w;

  while (n > 0) {
    w = write(fd, b, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The command, in the keeper's child: every signal at its default and
 * unblocked, nothing of ours open. */
static void exec_command(char **argv, int sigfd, int tell) {
  struct sigaction dfl;
  sigset_t none;
  int sig;

  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (sig = 1; sig < NSIG; sig++)
    sigaction(sig, &dfl, NULL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  close(sigfd);
  close(tell);
  close(STATUS_FD);
  execv(argv[0], argv);
  sig = errno;
  put_err(argv[0], strerror(sig));
  _exit(sig == ENOENT || sig == ENOTDIR ? 127 : 126);
}

/* The keeper: the command's parent, and the subreaper of what it leaves. */
static void keeper(char **argv, int tell) {
  struct pollfd pf[2];
  sigset_t chld;
  char rec[32];
  pid_t cmd;
  pid_t pid;
  int sigfd;
  int status;
  int cmd_done = 0;
  int n;

  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    put_err("PR_SET_CHILD_SUBREAPER", strerror(errno));
  /* A process of the task can fill the pipe through /proc (see above):
   * the record is then lost, never waited for (a full pipe must not keep
   * the task from ending). */
  fcntl(STATUS_FD, F_SETFL, fcntl(STATUS_FD, F_GETFL) | O_NONBLOCK);
  fcntl(tell, F_SETFL, fcntl(tell, F_GETFL) | O_NONBLOCK);
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    put_err("signalfd", strerror(errno));
    _exit(125);
  }
  cmd = fork();
  if (cmd < 0) {
    put_err("fork", strerror(errno));
    _exit(125);
  }
  if (cmd == 0)
    exec_command(argv, sigfd, tell);
  pf[0].fd = sigfd;
  pf[0].events = POLLIN;
  pf[1].fd = STATUS_FD;
  pf[1].events = 0; /* POLLERR: the host closed its end */
  for (;;) {
    for (;;) {
      pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR)
        continue;
      if (pid <= 0)
        break;
      if (pid == cmd && !cmd_done) {
        /* The host first (it reads this at the leader's end), then the
         * front, whose exit ends the leader. */
        cmd_done = 1;
        n = snprintf(rec, sizeof(rec), "S%d\n", status);
        (void)write_all(STATUS_FD, rec, (size_t)n);
        (void)write_all(tell, rec, (size_t)n);
        close(tell);
      }
    }
    if (pid < 0 && errno == ECHILD)
      _exit(0); /* nothing of the task is left: the sandbox may end */
    n = poll(pf, 2, -1);
    if (n < 0 && errno != EINTR)
      break;
    if (n > 0 && (pf[1].revents & (POLLERR | POLLHUP | POLLNVAL))) {
      /* The host is gone: nothing of its task outlives it. */
      kill(-1, SIGKILL);
      _exit(0);
    }
    if (n > 0 && (pf[0].revents & POLLIN)) {
      struct signalfd_siginfo si;
      while (read(sigfd, &si, sizeof(si)) > 0) {
      }
    }
  }
  kill(-1, SIGKILL);
  _exit(125);
}

int main(int argc, char **argv) {
  char rec[32];
  size_t got = 0;
  ssize_t r;
  int status;
  int tell[2];
  pid_t pid;

  if (argc < 2) {
    put_err("usage: uvtasks-sandbox FILE ARGV... (status on descriptor 3)",
            NULL);
    return 125;
  }
  if (fcntl(STATUS_FD, F_GETFD) < 0) {
    put_err("descriptor 3 (the status pipe) is not open", NULL);
    return 125;
  }
  if (pipe2(tell, O_CLOEXEC) != 0) {
    put_err("pipe", strerror(errno));
    return 125;
  }
  pid = fork();
  if (pid < 0) {
    put_err("fork", strerror(errno));
    return 125;
  }
  if (pid == 0) {
    close(tell[0]);
    keeper(argv + 1, tell[1]);
  }
  close(tell[1]);
  close(STATUS_FD);
  for (;;) {
    r = read(tell[0], rec + got, sizeof(rec) - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
    if (got == sizeof(rec) - 1)
      break;
  }
  rec[got] = '\0';
  if (got < 3 || rec[0] != 'S' || sscanf(rec + 1, "%d", &status) != 1)
    return 125; /* the keeper died before the command ended */
  /* What bwrap would say of the command: its exit code, or 128 + N. */
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
