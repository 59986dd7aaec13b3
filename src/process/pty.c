/* A pseudo-terminal per pty task (P-PTY-1, P-PTY-2).
 *
 * The loop thread opens the terminal at start: the master side (ours,
 * close-on-exec, so it never reaches a child: P-SPAWN-5) and the slave
 * side, opened with O_NOCTTY so that it never becomes the host's
 * controlling terminal.  The slave descriptor goes into the spawn request
 * and is closed once the spawn is over; it only keeps the terminal from
 * hanging up before the child has it.  The child itself opens the slave by
 * its path after its setsid (posix_spawn runs POSIX_SPAWN_SETSID before
 * the file actions; the fork path calls setsid() first): a session leader
 * without a controlling terminal that opens a terminal without O_NOCTTY
 * gets it as its controlling terminal, with its own group in the
 * foreground.  So /dev/tty, job control, Ctrl-C and SIGWINCH work as in a
 * terminal emulator.
 *
 * Once every descriptor of the slave side is closed (the session's
 * processes exited or closed it), reads of the master fail with EIO after
 * the last buffered bytes: that is the terminal's end of stream, and the
 * producer treats it as a pipe's end of file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "process-internal.h"

int uvt__pty_open(uint16_t cols, uint16_t rows, int *master, int *slave,
                  char *path, size_t size) {
  struct termios tio;
  int m;
  int s;
  int err;

  *master = -1;
  *slave = -1;
  m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0)
    return UVT__PERR(errno);
  if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, path, size) != 0) {
    err = UVT__PERR(errno);
    close(m);
    return err;
  }
  s = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0) {
    err = UVT__PERR(errno);
    close(m);
    return err;
  }
  /* The kernel's defaults (canonical mode, echo, signals, CR-NL on
   * output), plus IUTF8 so that erasing a character erases all of its
   * bytes. */
  if (tcgetattr(s, &tio) == 0) {
    tio.c_iflag |= IUTF8;
    tcsetattr(s, TCSANOW, &tio);
  }
  err = uvt__pty_resize(m, cols, rows);
  if (err == 0 && fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK) != 0)
    err = UVT__PERR(errno);
  if (err == 0) {
    /* Both above stdio, so the child's dup2s onto 0..2 cannot clash. */
    m = uvt__fd_above_stdio(m);
    if (m < 0) {
      err = m;
      m = -1;
    }
  }
  if (err == 0) {
    s = uvt__fd_above_stdio(s);
    if (s < 0) {
      err = s;
      s = -1;
    }
  }
  if (err != 0) {
    if (m >= 0)
      close(m);
    if (s >= 0)
      close(s);
    return err;
  }
  *master = m;
  *slave = s;
  return 0;
}

int uvt__pty_resize(int fd, uint16_t cols, uint16_t rows) {
  struct winsize ws;

  memset(&ws, 0, sizeof(ws));
  ws.ws_col = cols;
  ws.ws_row = rows;
  /* The kernel sends SIGWINCH to the foreground group when it changed. */
  if (ioctl(fd, TIOCSWINSZ, &ws) != 0)
    return UVT__PERR(errno);
  return 0;
}

char uvt__pty_veof(int fd) {
  struct termios tio;

  if (tcgetattr(fd, &tio) == 0 && tio.c_cc[VEOF] != _POSIX_VDISABLE)
    return (char)tio.c_cc[VEOF];
  return '\004';
}
