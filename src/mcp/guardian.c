/* M-MCP-7: no orphans even when uvtasks-mcp itself dies (SIGKILL, a crash).
 *
 * Chosen: a guardian process, forked at start-up before the loop exists.
 * It holds one end of a socket pair whose other end only the server has
 * (M-MCP-13: a packet socket, each message carrying the kernel's word of
 * who sent it, and the guardian believes only the server's); the
 * server tells it each task's session ("+pid", the leader's pid is the
 * task's process group and session id) once the pid is known and takes it
 * back ("-pid") when the record is dropped or its group is empty.  When
 * the pipe reports end of file the server is gone, however it went: the
 * guardian sends SIGTERM to every recorded group and to every process of
 * a recorded session that left its group, gives them GUARD_GRACE_MS, then
 * SIGKILL, and exits.  A server that exits normally first tells it to
 * forget everything ("C"), since its own shutdown stopped the tasks.
 *
 * Why not a cgroup: creating one needs a delegated cgroup tree, which an
 * MCP client launching us as a plain user does not give.  Why not
 * PR_SET_PDEATHSIG in each task: it reaches only the direct child, not
 * what the command starts, and the spawn is the process producer's.
 *
 * The guardian runs in a session of its own with stdio on /dev/null, so
 * closing the terminal or the client's pipes does not touch it, and it
 * ignores the shutdown signals (it ends by itself when the server does).
 * With --cgroups (M-MCP-15) the server also tells it the registry's
 * cgroup directory ('G'), and the guardian stops every task's group
 * through cgroup.kill, daemons included.
 * Limits: a task started in the instant before the server dies, before
 * its pid reached the guardian, is not covered; without --cgroups a
 * process that left its session (setsid, a daemon) is out of reach, as
 * for disposal. */
#define _GNU_SOURCE
#include "mcp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uvtasks/process.h"

/* After SIGTERM, how long the guardian waits before SIGKILL. */
#define GUARD_GRACE_MS 300

/* One message on the socket: an operation and a pid; 'G' carries the
 * registry's cgroup directory (M-MCP-15) in `path` instead. */
typedef struct {
  int32_t op; /* '+', '-', 'C', 'G' */
  int32_t pid;
  char path[4096];
} guard_msg_t;

/* The fixed part of a message. */
#define GUARD_MSG_HEAD 8

/* ---------------------------------------------------------------------- */
/* The guardian process                                                    */

static void guard_sleep_ms(long ms) {
  struct timespec ts;

  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int guard_has(const pid_t *sids, size_t n, pid_t sid) {
  size_t i;

  for (i = 0; i < n; i++)
    if (sids[i] == sid)
      return 1;
  return 0;
}

/* Signal every recorded group, and every process whose session is a
 * recorded one (it may have left its group).  Returns how many processes
 * or groups were still there. */
static size_t guard_signal(const pid_t *sids, size_t n, int sig) {
  char path[64];
  char buf[512];
  size_t found = 0;
  struct dirent *e;
  DIR *d;
  char *p;
  size_t i;
  long pid;
  long sid;
  int fd;
  ssize_t len;

  for (i = 0; i < n; i++)
    if (kill(-sids[i], sig) == 0)
      found++;
  d = opendir("/proc");
  if (d == NULL)
    return found;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    pid = strtol(e->d_name, NULL, 10);
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
      continue;
    buf[len] = '\0';
    /* pid (comm) state ppid pgrp session ...; comm may hold anything. */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %ld", &sid) != 1)
      continue;
    if (p[2] == 'Z' || !guard_has(sids, n, (pid_t)sid))
      continue;
    if (kill((pid_t)pid, sig) == 0)
      found++;
  }
  closedir(d);
  return found;
}

static void guard_stop_all(const pid_t *sids, size_t n) {
  long waited = 0;

  if (n == 0)
    return;
  if (guard_signal(sids, n, SIGTERM) == 0)
    return;
  while (waited < GUARD_GRACE_MS) {
    guard_sleep_ms(20);
    waited += 20;
    if (guard_signal(sids, n, 0) == 0)
      return;
  }
  /* Twice: something may have forked between the scan and the kill. */
  guard_signal(sids, n, SIGKILL);
  guard_sleep_ms(20);
  guard_signal(sids, n, SIGKILL);
}

/* M-MCP-15: with --cgroups every task is a group under the registry's
 * directory: cgroup.kill there stops all of them, daemons included; then
 * the emptied groups are removed (each rmdir fails while populated). */
static void guard_stop_cgroup(const char *dir) {
  char path[4200];
  struct dirent *e;
  DIR *d;
  int fd;
  int tries;

  if (dir == NULL)
    return;
  snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
  fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (write(fd, "1", 1) < 0) {
      /* Nothing better to do: the sessions were signalled already. */
    }
    close(fd);
  }
  for (tries = 0; tries < 50; tries++) {
    d = opendir(dir);
    if (d == NULL)
      return;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      rmdir(path);
    }
    closedir(d);
    if (rmdir(dir) == 0 || errno == ENOENT)
      return;
    guard_sleep_ms(20);
  }
}

/* M-MCP-13: one message from the server, or 0 at its end.  The channel
 * is a packet socket with SO_PASSCRED: every message comes with its
 * sender's credentials (the kernel's, not the sender's word), and only
 * one sent by the server's own pid and uid counts; anything else
 * (a task that got hold of the socket) is ignored.  Returns 1 with `m`
 * filled, 0 at end of file or on an error, -1 for a message to ignore. */
static int guard_recv(int fd, pid_t server, guard_msg_t *m) {
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(struct ucred))];
  } control;
  struct iovec iov;
  struct msghdr msg;
  struct cmsghdr *c;
  struct ucred cred;
  int believed = 0;
  ssize_t r;

  memset(&msg, 0, sizeof(msg));
  iov.iov_base = m;
  iov.iov_len = sizeof(*m);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof(control.buf);
  do
    r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r <= 0)
    return 0; /* the server is gone */
  for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
        c->cmsg_len >= CMSG_LEN(sizeof(cred))) {
      memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      believed = cred.pid == server && cred.uid == getuid();
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      /* Descriptors nobody should send us: close them. */
      int *fds = (int *)(void *)CMSG_DATA(c);
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      while (k-- > 0)
        close(fds[k]);
    }
  }
  if (!believed || r < GUARD_MSG_HEAD || (msg.msg_flags & MSG_TRUNC))
    return -1;
  if (m->op == 'G') {
    if (r == GUARD_MSG_HEAD || r >= (ssize_t)sizeof(*m))
      return -1;
    m->path[r - GUARD_MSG_HEAD] = '\0';
  }
  return 1;
}

static void guard_main(int rfd, pid_t server) {
  char *cgroup = NULL;
  pid_t *sids = NULL;
  size_t n = 0;
  size_t cap = 0;
  guard_msg_t m;
  int r;
  size_t i;
  int fd;

  for (;;) {
    r = guard_recv(rfd, server, &m);
    if (r == 0)
      break; /* the server is gone */
    if (r < 0)
      continue;
    if (m.op == '+' && m.pid > 1) {
      if (n == cap) {
        pid_t *more = realloc(sids, (cap ? cap * 2 : 64) * sizeof(*sids));
        if (more == NULL)
          continue; /* cannot record it; nothing better to do */
        sids = more;
        cap = cap ? cap * 2 : 64;
      }
      sids[n++] = m.pid;
    } else if (m.op == '-') {
      for (i = 0; i < n; i++) {
        if (sids[i] == m.pid) {
          sids[i] = sids[--n];
          break;
        }
      }
    } else if (m.op == 'C') {
      n = 0;
      free(cgroup);
      cgroup = NULL;
    } else if (m.op == 'G') {
      free(cgroup);
      cgroup = strdup(m.path);
    }
  }
  guard_stop_all(sids, n);
  guard_stop_cgroup(cgroup);
  free(cgroup);
  free(sids);
  for (fd = 0; fd < 3; fd++)
    close(fd);
  _exit(0);
}

int mcp_guardian_start(mcp_server_t *server) {
  static const int ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE};
  pid_t parent = getpid();
  int fds[2];
  int on = 1;
  pid_t pid;
  int fd;
  size_t i;

  server->guardian_fd = -1;
  /* M-MCP-13: a packet socket pair, not a pipe: /proc/<pid>/fd cannot
   * open a socket, and each message carries its sender's credentials. */
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    return -errno;
  if (setsockopt(fds[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0 ||
      shutdown(fds[0], SHUT_WR) != 0 || shutdown(fds[1], SHUT_RD) != 0) {
    fd = -errno;
    close(fds[0]);
    close(fds[1]);
    return fd;
  }
  pid = fork();
  if (pid < 0) {
    fd = -errno;
    close(fds[0]);
    close(fds[1]);
    return fd;
  }
  if (pid == 0) {
    /* Nothing of the client's (its pipes, its terminal) stays with us. */
    setsid();
    for (i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
      signal(ignored[i], SIG_IGN);
    fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
      dup2(fd, 0);
      dup2(fd, 1);
      dup2(fd, 2);
      if (fd > 2)
        close(fd);
    }
    if (fds[0] != 3) {
      dup2(fds[0], 3);
      close(fds[0]);
    }
    /* Every other descriptor goes (an inherited one could hold a client's
     * pipe open). */
    for (fd = 4; fd < 1024; fd++)
      close(fd);
    guard_main(3, parent);
  }
  close(fds[0]);
  server->guardian_fd = fds[1];
  server->guardian_pid = (int)pid;
  return 0;
}

/* M-MCP-10: the guardian is never left a zombie.  Reap it if it has
 * ended, waiting up to `wait_ms` for that (it ends at once when its pipe
 * closes with nothing recorded). */
static void guard_reap(mcp_server_t *server, long wait_ms) {
  pid_t r;

  while (server->guardian_pid > 0) {
    r = waitpid((pid_t)server->guardian_pid, NULL, WNOHANG);
    if (r < 0 && errno == EINTR)
      continue;
    if (r != 0) {
      server->guardian_pid = 0; /* reaped, or not ours to wait for */
      return;
    }
    if (wait_ms <= 0)
      return;
    guard_sleep_ms(1);
    wait_ms--;
  }
}

/* SIGCHLD: the guardian may have died before the server (killed by
 * someone); reap it, and stop telling it anything. */
static void guard_sigchld_cb(uv_signal_t *sig, int signum) {
  mcp_server_t *server = sig->data;

  (void)signum;
  guard_reap(server, 0);
  if (server->guardian_pid == 0 && server->guardian_fd >= 0) {
    fprintf(stderr, "uvtasks-mcp: the guardian is gone; if the server is "
                    "killed, its tasks will keep running\n");
    close(server->guardian_fd);
    server->guardian_fd = -1;
  }
}

/* ---------------------------------------------------------------------- */
/* The server's side                                                       */

static void guard_send(mcp_server_t *server, int op, int pid) {
  guard_msg_t m;
  ssize_t r;

  if (server->guardian_fd < 0)
    return;
  m.op = op;
  m.pid = pid;
  /* One packet, whole or not at all; the kernel adds our credentials. */
  do
    r = send(server->guardian_fd, &m, GUARD_MSG_HEAD, MSG_NOSIGNAL);
  while (r < 0 && errno == EINTR);
  if (r != GUARD_MSG_HEAD) {
    fprintf(stderr,
            "uvtasks-mcp: the guardian is gone (%s); if the server "
            "is killed, its tasks will keep running\n",
            strerror(errno));
    close(server->guardian_fd);
    server->guardian_fd = -1;
  }
}

/* M-MCP-15: the registry's cgroup directory, for the guardian to stop
 * (cgroup.kill) if the server dies. */
void mcp_guardian_cgroup(mcp_server_t *server, const char *dir) {
  guard_msg_t m;
  size_t len = strlen(dir);
  ssize_t r;

  if (server->guardian_fd < 0 || len == 0 || len >= sizeof(m.path))
    return;
  m.op = 'G';
  m.pid = 0;
  memcpy(m.path, dir, len);
  do
    r = send(server->guardian_fd, &m, GUARD_MSG_HEAD + len, MSG_NOSIGNAL);
  while (r < 0 && errno == EINTR);
}

/* Tell the guardian of every queued task whose pid is known now. */
static void guard_flush(mcp_server_t *server) {
  json_t *id;
  size_t i;
  int pid;

  for (i = 0; i < json_array_size(server->unguarded);) {
    id = json_array_get(server->unguarded, i);
    pid = server->reg != NULL
              ? uvt_process_pid(server->reg, json_string_value(id),
                                &server->agent)
              : UVT_ENOTASK;
    if (pid == 0) {
      i++; /* not spawned yet */
      continue;
    }
    if (pid > 0 && uvt_process_is_durable(server->reg, json_string_value(id),
                                          &server->agent) == 1) {
      /* D-1: a durable task outlives the server: not the guardian's. */
    } else if (pid > 0) {
      guard_send(server, '+', pid);
      json_object_set_new(server->guarded, json_string_value(id),
                          json_integer(pid));
    }
    json_array_remove(server->unguarded, i);
  }
  if (server->guardian_check_open && json_array_size(server->unguarded) == 0)
    uv_check_stop(&server->guardian_check);
}

static void guard_check_cb(uv_check_t *check) {
  guard_flush(check->data);
}

static void guard_untrack(mcp_server_t *server, const char *id) {
  json_t *pid = json_object_get(server->guarded, id);

  if (pid == NULL)
    return;
  guard_send(server, '-', (int)json_integer_value(pid));
  json_object_del(server->guarded, id);
}

static void guard_feed_cb(uvt_watch_t *w, const uvt_snapshot_t *snap,
                          int dropped) {
  mcp_server_t *server = w->data;

  if (snap->owner_session == NULL ||
      strcmp(snap->owner_session, server->session) != 0)
    return;
  if (dropped) {
    guard_untrack(server, snap->id);
    return;
  }
  if (snap->status == UVT_RUNNING)
    mcp_guardian_task(server, snap->id);
  else if (uvt_status_is_terminal(snap->status))
    mcp_guardian_prune(server);
}

int mcp_guardian_init(mcp_server_t *server) {
  int err;

  server->guarded = json_object();
  server->unguarded = json_array();
  if (server->guarded == NULL || server->unguarded == NULL)
    return UV_ENOMEM;
  if (server->guardian_fd < 0)
    return 0;
  /* Unreferenced: it never keeps the loop alive by itself. */
  err = uv_signal_init(server->loop, &server->sigchld);
  if (err != 0)
    return err;
  server->sigchld.data = server;
  server->sigchld_open = 1;
  uv_unref((uv_handle_t *)&server->sigchld);
  err = uv_signal_start(&server->sigchld, guard_sigchld_cb, SIGCHLD);
  if (err != 0)
    return err;
  err = uv_check_init(server->loop, &server->guardian_check);
  if (err != 0)
    return err;
  server->guardian_check.data = server;
  server->guardian_check_open = 1;
  server->guardian_watch.data = server;
  err = uvt_watch_start(server->reg, &server->guardian_watch, guard_feed_cb);
  if (err != 0)
    return err;
  server->guardian_watching = 1;
  return 0;
}

void mcp_guardian_task(mcp_server_t *server, const char *id) {
  if (server->guardian_fd < 0 || server->unguarded == NULL)
    return;
  if (json_array_append_new(server->unguarded, json_string(id)) != 0)
    return;
  guard_flush(server);
  if (json_array_size(server->unguarded) > 0 && server->guardian_check_open)
    uv_check_start(&server->guardian_check, guard_check_cb);
}

void mcp_guardian_prune(mcp_server_t *server) {
  const char *id;
  json_t *pid;
  void *tmp;

  if (server->guardian_fd < 0 || server->reg == NULL)
    return;
  json_object_foreach_safe(server->guarded, tmp, id, pid) {
    /* Only a task that has ended can have an empty group. */
    uvt_snapshot_t s;
    memset(&s, 0, sizeof(s));
    if (uvt_get(server->reg, id, &server->agent, &s) == 0) {
      int ended = uvt_status_is_terminal(s.status);
      uvt_snapshot_cleanup(&s);
      if (!ended)
        continue;
    }
    if (kill(-(pid_t)json_integer_value(pid), 0) != 0 && errno == ESRCH)
      guard_untrack(server, id);
  }
}

/* The loop is about to end (M-MCP-10): stop listening for SIGCHLD and
 * wait for the guardian, which has been told to end. */
void mcp_guardian_close(mcp_server_t *server) {
  if (server->sigchld_open) {
    uv_close((uv_handle_t *)&server->sigchld, NULL);
    server->sigchld_open = 0;
  }
}

void mcp_guardian_wait(mcp_server_t *server) {
  guard_reap(server, 1000);
}

void mcp_guardian_stop(mcp_server_t *server) {
  if (server->guardian_watching) {
    uvt_watch_stop(&server->guardian_watch);
    server->guardian_watching = 0;
  }
  if (server->guardian_check_open) {
    uv_close((uv_handle_t *)&server->guardian_check, NULL);
    server->guardian_check_open = 0;
  }
}

/* Called when every task has been stopped by the orderly exit. */
void mcp_guardian_release(mcp_server_t *server) {
  guard_send(server, 'C', 0);
  if (server->guardian_fd >= 0)
    close(server->guardian_fd);
  server->guardian_fd = -1;
  /* It ends now: reap it here rather than leave a zombie while stdout
   * drains (M-MCP-10); SIGCHLD, or the exit, reaps a slower one. */
  guard_reap(server, 200);
  json_decref(server->guarded);
  json_decref(server->unguarded);
  server->guarded = NULL;
  server->unguarded = NULL;
}
