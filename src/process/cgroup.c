/* A cgroup per task, where the host asks for it (P-KILL-5, optional).
 *
 * A session holds every process a task starts except those that leave it
 * on purpose (`setsid cmd &`, a daemon that double-forks into a session
 * of its own).  A cgroup v2 group holds those too: every process forked
 * by a member stays in it.  So where the host enables it
 * (uvt_process_cgroups()), each task's leader is moved into a group of its
 * own, and a kill, the runtime limit and disposal also reach every
 * process of that group: SIGTERM to each, SIGKILL through cgroup.kill.
 *
 * Why it is not on by default: placing a child costs a cgroup migration
 * (about 120 us of kernel time per spawn on this machine) and a fork
 * instead of posix_spawn (the host's page tables are copied: slow in a
 * host with a large heap); glibc 2.41 could create the child inside its
 * group (CLONE_INTO_CGROUP) without either, Debian 12 has 2.36.  And on a
 * systemd machine only a delegated subtree may be changed by anyone but
 * systemd: the host knows whether it owns one, the library does not
 * guess.
 *
 * Layout: the registry's directory `<parent>/uvtasks-<pid>-<n>` is made by
 * uvt_process_cgroups(); a spawner thread makes each task's group `<n>`
 * in it just before the spawn, and the child enters it before it execs:
 * such a spawn forks (spawn.c), since posix_spawn has no step for it and a
 * move after posix_spawn returns races the command's first forks (a
 * migration waits for an RCU grace period; bash forked first in tests).
 * A group is removed when its task is freed, and the registry's directory
 * at close, each only if empty: a group still populated then is stopped
 * with cgroup.kill first. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "process-internal.h"

/* Registries of this process that made a directory (its name's <n>). */
static atomic_uint cgroup_dirs;

/* The host's own cgroup v2 directory: the cgroup2 mount from
 * /proc/self/mountinfo joined with the "0::" line of /proc/self/cgroup. */
static int own_cgroup(char *buf, size_t size) {
  char line[4096];
  char mount[PATH_MAX] = "";
  char root[PATH_MAX] = "";
  char path[PATH_MAX] = "";
  const char *rel;
  FILE *f;

  f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL)
    return UVT__PERR(errno);
  while (fgets(line, sizeof(line), f) != NULL) {
    /* "id parent major:minor root mountpoint options ... - type src ..." */
    char r[PATH_MAX];
    char m[PATH_MAX];
    const char *dash = strstr(line, " - ");
    if (dash == NULL || strncmp(dash, " - cgroup2 ", 11) != 0)
      continue;
    if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) == 2) {
      snprintf(root, sizeof(root), "%s", r);
      snprintf(mount, sizeof(mount), "%s", m);
      break;
    }
  }
  fclose(f);
  if (mount[0] == '\0')
    return UV_ENOSYS;
  f = fopen("/proc/self/cgroup", "re");
  if (f == NULL)
    return UVT__PERR(errno);
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(path, sizeof(path), "%s", line + 3);
      break;
    }
  }
  fclose(f);
  if (path[0] == '\0')
    return UV_ENOSYS;
  /* The path is relative to the namespace's root, which the mount shows. */
  rel = path;
  if (strcmp(root, "/") != 0 && strncmp(path, root, strlen(root)) == 0)
    rel = path + strlen(root);
  if ((size_t)snprintf(buf, size, "%s%s", mount, rel) >= size)
    return UV_ENAMETOOLONG;
  return 0;
}

int uvt__cgroup_open(uvt__procs_t *ps, const char *parent_dir) {
  char parent[PATH_MAX];
  char dir[PATH_MAX];
  struct stat st;
  int fd;
  int err;

  if (ps->cg_dirfd >= 0)
    return UV_EALREADY;
  if (parent_dir != NULL) {
    if ((size_t)snprintf(parent, sizeof(parent), "%s", parent_dir) >=
        sizeof(parent))
      return UV_ENAMETOOLONG;
  } else {
    err = own_cgroup(parent, sizeof(parent));
    if (err != 0)
      return err;
  }
  /* A cgroup v2 directory has cgroup.procs; anything else is refused. */
  if ((size_t)snprintf(dir, sizeof(dir), "%s/cgroup.procs", parent) >=
      sizeof(dir))
    return UV_ENAMETOOLONG;
  if (stat(dir, &st) != 0)
    return errno == ENOENT ? UV_ENOSYS : UVT__PERR(errno);
  if ((size_t)snprintf(dir, sizeof(dir), "%s/uvtasks-%d-%u", parent,
                       (int)getpid(),
                       atomic_fetch_add(&cgroup_dirs, 1)) >= sizeof(dir))
    return UV_ENAMETOOLONG;
  if (mkdir(dir, 0755) != 0)
    return UVT__PERR(errno);
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    err = UVT__PERR(errno);
    rmdir(dir);
    return err;
  }
  ps->cg_path = uvt__strdup(dir);
  if (ps->cg_path == NULL) {
    close(fd);
    rmdir(dir);
    return UV_ENOMEM;
  }
  ps->cg_dirfd = fd;
  uv_mutex_lock(&ps->spawn_mutex);
  ps->cg_dirfd_shared = fd;
  uv_mutex_unlock(&ps->spawn_mutex);
  return 0;
}

/* ---- the spawner's side (any thread) ----------------------------------- */

int uvt__cgroup_make(int dirfd, const char *name) {
  if (mkdirat(dirfd, name, 0755) != 0 && errno != EEXIST)
    return UVT__PERR(errno);
  return 0;
}

int uvt__cgroup_enter(int dirfd, const char *name, pid_t pid) {
  char path[64];
  char num[24];
  int fd;
  int n;
  int err = 0;

  snprintf(path, sizeof(path), "%s/cgroup.procs", name);
  fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return UVT__PERR(errno);
  n = snprintf(num, sizeof(num), "%d", (int)pid);
  if (write(fd, num, (size_t)n) != n)
    err = UVT__PERR(errno);
  close(fd);
  return err;
}

/* ---- the loop's side --------------------------------------------------- */

static int cg_dirfd(const uvt__proc_t *p) {
  return p->cg && p->procs != NULL ? p->procs->cg_dirfd : -1;
}

/* Call fn for every pid in the task's cgroup.procs; returns how many, or
 * -1 if the group cannot be read. */
int uvt__cgroup_each(uvt__proc_t *p, void (*fn)(void *p, pid_t pid)) {
  char path[64];
  int dirfd = cg_dirfd(p);
  int count;
  int fd;

  if (dirfd < 0)
    return -1;
  snprintf(path, sizeof(path), "%s/cgroup.procs", p->cg_name);
  fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  count = uvt__read_pids(fd, fn, p);
  close(fd);
  return count;
}

/* cgroup.events says "populated 0": nothing alive in the group. */
int uvt__cgroup_empty(uvt__proc_t *p) {
  char path[64];
  char buf[256];
  int dirfd = cg_dirfd(p);
  ssize_t n;
  int fd;

  if (dirfd < 0)
    return 1;
  snprintf(path, sizeof(path), "%s/cgroup.events", p->cg_name);
  fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 1; /* gone */
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return strstr(buf, "populated 0") != NULL;
}

void uvt__cgroup_kill(uvt__proc_t *p) {
  char path[64];
  int dirfd = cg_dirfd(p);
  int fd;

  if (dirfd < 0)
    return;
  snprintf(path, sizeof(path), "%s/cgroup.kill", p->cg_name);
  fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return; /* a kernel before 5.14: the pids get SIGKILL one by one */
  if (write(fd, "1", 1) != 1) {
    /* Nothing more to do: the pass signals each pid too. */
  }
  close(fd);
}

void uvt__cgroup_remove(uvt__proc_t *p) {
  int dirfd = cg_dirfd(p);

  if (dirfd < 0)
    return;
  if (unlinkat(dirfd, p->cg_name, AT_REMOVEDIR) != 0 && errno == EBUSY) {
    /* Still populated as its task goes away: stop it, and leave the empty
     * directory to the registry's close. */
    uvt__cgroup_kill(p);
    unlinkat(dirfd, p->cg_name, AT_REMOVEDIR);
  }
  p->cg = 0;
}

int uvt__cgroup_had(uvt__procs_t *ps, pid_t pid) {
  char path[64];
  char line[PATH_MAX + 8];
  const char *base;
  FILE *f;
  int found = 0;

  if (ps->cg_path == NULL)
    return 0;
  base = strrchr(ps->cg_path, '/');
  base = base != NULL ? base + 1 : ps->cg_path;
  /* A zombie still names the group it died in. */
  snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
  f = fopen(path, "re");
  if (f == NULL)
    return 0;
  while (!found && fgets(line, sizeof(line), f) != NULL) {
    const char *at;
    if (strncmp(line, "0::", 3) != 0)
      continue;
    at = strstr(line, base);
    found = at != NULL && at > line && at[-1] == '/' && at[strlen(base)] == '/';
  }
  fclose(f);
  return found;
}

void uvt__cgroup_close(uvt__procs_t *ps) {
  if (ps->cg_dirfd < 0)
    return;
  uv_mutex_lock(&ps->spawn_mutex);
  ps->cg_dirfd_shared = -1;
  uv_mutex_unlock(&ps->spawn_mutex);
  close(ps->cg_dirfd);
  ps->cg_dirfd = -1;
  if (ps->cg_path != NULL && rmdir(ps->cg_path) != 0 && errno != ENOENT)
    uvt_log(ps->reg, UVT_LOG_WARN,
            "cgroup %s is left behind (%s): a task's group was not empty",
            ps->cg_path, uvt_err_name(UVT__PERR(errno)));
  uvt__free(ps->cg_path);
  ps->cg_path = NULL;
}
