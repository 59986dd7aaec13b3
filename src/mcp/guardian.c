/* M-MCP-7: no orphans even when uvtasks-mcp itself dies (SIGKILL, a crash).
 *
 * Chosen: a guardian process, forked at start-up before the loop exists.
 * It holds the read end of a pipe whose only writer is the server; the
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
 * Limits: a task started in the instant before the server dies, before
 * its pid reached the guardian, is not covered; a process that left its
 * session (setsid, a daemon) is out of reach, as for disposal. */
#define _GNU_SOURCE
#include "mcp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "uvtasks/process.h"

/* After SIGTERM, how long the guardian waits before SIGKILL. */
#define GUARD_GRACE_MS 300

/* One message on the pipe: an operation and a pid. */
typedef struct {
  int32_t op; /* '+', '-', 'C' */
  int32_t pid;
} guard_msg_t;

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

static void guard_main(int rfd) {
  pid_t *sids = NULL;
  size_t n = 0;
  size_t cap = 0;
  guard_msg_t m;
  size_t got = 0;
  ssize_t r;
  size_t i;
  int fd;

  for (;;) {
    r = read(rfd, (char *)&m + got, sizeof(m) - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break; /* the server is gone */
    got += (size_t)r;
    if (got < sizeof(m))
      continue;
    got = 0;
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
    }
  }
  guard_stop_all(sids, n);
  free(sids);
  for (fd = 0; fd < 3; fd++)
    close(fd);
  _exit(0);
}

int mcp_guardian_start(mcp_server_t *server) {
  static const int ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE};
  int fds[2];
  pid_t pid;
  int fd;
  size_t i;

  server->guardian_fd = -1;
  if (pipe2(fds, O_CLOEXEC) != 0)
    return -errno;
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
    guard_main(3);
  }
  close(fds[0]);
  server->guardian_fd = fds[1];
  return 0;
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
  /* 8 bytes to a pipe: written whole or not at all. */
  do
    r = write(server->guardian_fd, &m, sizeof(m));
  while (r < 0 && errno == EINTR);
  if (r != (ssize_t)sizeof(m)) {
    fprintf(stderr,
            "uvtasks-mcp: the guardian is gone (%s); if the server "
            "is killed, its tasks will keep running\n",
            strerror(errno));
    close(server->guardian_fd);
    server->guardian_fd = -1;
  }
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
    if (pid > 0) {
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
  json_decref(server->guarded);
  json_decref(server->unguarded);
  server->guarded = NULL;
  server->unguarded = NULL;
}
