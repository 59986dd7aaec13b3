/* A cgroup per task: containment (P-KILL-5, S-11) and limits (L-LIM-1..2).
 *
 * A session holds every process a task starts except those that leave it
 * on purpose (`setsid cmd &`, a daemon that double-forks).  A cgroup holds
 * those too: every process forked by a member stays in it.  And a cgroup
 * is where the kernel enforces a task's limits on memory, processes and
 * CPU for the whole task (every process of it, whatever its session).
 *
 * Hierarchies.  A task's group is one directory per hierarchy it needs:
 *  - cgroup v2 (the unified tree): always where it can be made (cgroup.kill,
 *    cgroup.events, cpu.stat's usage even without the cpu controller), and
 *    the limits whose controller the registry's v2 directory has enabled
 *    (memory.max, pids.max, cpu.max; events in memory.events and
 *    pids.events);
 *  - cgroup v1, per controller, where the host mounts a v1 hierarchy for it
 *    (memory: memory.limit_in_bytes and memory.oom_control's oom_kill;
 *    pids: pids.max and pids.events; cpu: cpu.cfs_quota_us /
 *    cpu.cfs_period_us).  A controller is bound to one hierarchy at a time,
 *    so a limit is enforced in v2 if the v2 directory has its controller,
 *    else in its v1 hierarchy, else not at all: the start fails with
 *    UV_ENOTSUP and the reason (uvt__cgroot_limits), never an unlimited run.
 * The registry's directory `uvtasks-<pid>-<n>` is made in the host's own
 * cgroup of each hierarchy it uses (from /proc/self/cgroup and
 * /proc/self/mountinfo), once, on the loop thread; a task's group is
 * `<k>` in it, made (or reused, below) by a spawner thread just before the
 * spawn, and the child writes "0" into each of its cgroup.procs before it
 * execs, so everything the command starts is inside from its first fork.
 *
 * Cost, and why groups are reused.  Measured on this project's 2-core
 * runner (Linux 6.18): the migration the child's write makes is cheap
 * (a few microseconds; the spawn itself is a vfork-like clone, spawn.c,
 * never a copy of the host); making and removing the directories is not
 * (about 110 us of kernel time a directory, four of them for a task with
 * every limit here: v2 plus three v1 hierarchies).  So an empty group is
 * not removed when its task goes: it goes back to the registry's pool and
 * the next task takes it, with its limits written anew and its event
 * counters read as the base that later counts are compared to.  The pool
 * is removed at registry close.  A group that still holds a process when
 * its task goes is stopped (cgroup.kill, or SIGKILL to each pid in v1) and
 * removed, never reused.  (clone3's CLONE_INTO_CGROUP would spare the
 * migration on v2, but it is the directory that costs, and glibc 2.36 has
 * no clone3 wrapper: measured, it did not win.)  A group also keeps its
 * files open while it lives and while it is pooled (uvt__cg_t.fd, within
 * a budget of descriptors): the child writes itself into cgroup.procs
 * through them and the loop reads the limits' events at the task's end
 * through them, so a task that takes a pooled group opens no file; and
 * the end reads only the counters its outcome's words need.
 *
 * Limits: where the registry's directory cannot be made (no cgroup v2 mount
 * and no v1 hierarchy, one we may not write, a systemd machine where only a
 * delegated subtree is ours), the library does not guess.  Tests point the
 * readers at a fake tree (uvt__cgroup_self, uvt__cgroup_mountinfo,
 * uvt__cgroup_mkdir_hook): the files a v2 kernel shows, in a temporary
 * directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "process-internal.h"

const char *uvt__cgroup_self = "/proc/self/cgroup";
const char *uvt__cgroup_mountinfo = "/proc/self/mountinfo";
int (*uvt__cgroup_mkdir_hook)(int dirfd, const char *name);

/* Registries of this process that made a directory (its name's <n>). */
static atomic_uint cgroup_dirs;

/* Descriptors groups keep open on their own files (uvt__cg_t.fd), for the
 * whole process: opening a cgroup file costs a path walk in kernfs (about
 * 10 us with its close), and a task with limits used five to seven of
 * them.  Held at most FD_CAP, and never more than an eighth of the soft
 * descriptor limit (128 of the usual 1024: about 25 groups of a task with
 * memory and process limits, 5 files each); a group past the budget opens
 * its files as needed, as every group did before. */
#define FD_CAP 1024
static atomic_int cg_fds_held;

int uvt__cgroup_fds_held(void) {
  return atomic_load(&cg_fds_held);
}

static const char *const ctl_name[UVT__CG_N] = {"", "memory", "pids", "cpu"};

/* ---- small file helpers (async-signal-safe where marked) -------------- */

/* Write `s` to `dir`/`name`/`file`; 0 or a negative errno. */
static int put(int dir, const char *name, const char *file, const char *s) {
  char path[96];
  size_t len = strlen(s);
  int fd;
  int err = 0;

  if ((size_t)snprintf(path, sizeof(path), "%s/%s", name, file) >= sizeof(path))
    return UV_ENAMETOOLONG;
  /* O_TRUNC as a shell's `echo v > file`: nothing to a cgroup file, and a
   * fake tree's plain files (tests) then read as written. */
  fd = openat(dir, path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0)
    return UVT__PERR(errno);
  if (write(fd, s, len) != (ssize_t)len)
    err = UVT__PERR(errno);
  close(fd);
  return err;
}

/* Read `dir`/`name`/`file` (NUL-terminated, cut to size - 1): its length,
 * or a negative errno. */
static ssize_t get(int dir, const char *name, const char *file, char *buf,
                   size_t size) {
  char path[96];
  ssize_t n;
  int fd;

  if ((size_t)snprintf(path, sizeof(path), "%s/%s", name, file) >= sizeof(path))
    return UV_ENAMETOOLONG;
  fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return UVT__PERR(errno);
  do
    n = read(fd, buf, size - 1);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    n = UVT__PERR(errno);
  else
    buf[n] = '\0';
  close(fd);
  return n;
}

/* The number after "key " on a line of `text`, or 0. */
static uint64_t field(const char *text, const char *key) {
  size_t k = strlen(key);
  const char *at = text;

  while ((at = strstr(at, key)) != NULL) {
    if ((at == text || at[-1] == '\n') && at[k] == ' ')
      return strtoull(at + k + 1, NULL, 10);
    at += k;
  }
  return 0;
}

/* Is `word` one of the blank-separated words of `list` (a leading '+'
 * ignored, as cgroup.subtree_control is written)? */
static int has_word(const char *list, const char *word) {
  size_t k = strlen(word);
  const char *at = list;

  while (*at != '\0') {
    size_t n;
    while (*at == ' ' || *at == '\n' || *at == '\t')
      at++;
    if (*at == '+')
      at++;
    n = strcspn(at, " \n\t");
    if (n == k && strncmp(at, word, k) == 0)
      return 1;
    at += n;
  }
  return 0;
}

/* ---- a task's group (any thread) -------------------------------------- */

void uvt__cg_init(uvt__cg_t *g) {
  int h;

  memset(g, 0, sizeof(*g));
  for (h = 0; h < UVT__CG_N; h++)
    g->dir[h] = -1;
  for (h = 0; h < UVT__CG_FDS; h++)
    g->fd[h] = -1;
}

/* Open g's file in hierarchy h into slot, if the budget lets it and the
 * slot is empty.  Best effort: a file left unopened is opened when it is
 * used, as before. */
static void keep_open(uvt__cg_t *g, int slot, int h, const char *file,
                      int flags) {
  char path[96];
  struct rlimit rl;
  int cap = FD_CAP;
  int fd;

  if (g->fd[slot] >= 0 || h < 0)
    return;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur / 8 < (rlim_t)cap)
    cap = (int)(rl.rlim_cur / 8);
  if (atomic_fetch_add(&cg_fds_held, 1) >= cap)
    goto refund;
  if ((size_t)snprintf(path, sizeof(path), "%s/%s", g->name, file) >=
      sizeof(path))
    goto refund;
  fd = openat(g->dir[h], path, flags | O_CLOEXEC);
  if (fd < 0)
    goto refund;
  g->fd[slot] = fd;
  return;

refund:
  atomic_fetch_sub(&cg_fds_held, 1);
}

/* Read g's file in hierarchy h, by its kept descriptor (from the start:
 * a cgroup file read at offset 0 is made anew) or else by name; as get(). */
static ssize_t get_kept(const uvt__cg_t *g, int slot, int h, const char *file,
                        char *buf, size_t size) {
  ssize_t n;

  if (g->fd[slot] < 0)
    return get(g->dir[h], g->name, file, buf, size);
  do
    n = pread(g->fd[slot], buf, size - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return UVT__PERR(errno);
  buf[n] = '\0';
  return n;
}

/* The file of its memory limit's events in hierarchy h. */
static const char *mem_events(int h) {
  return h == UVT__CG_V2 ? "memory.events" : "memory.oom_control";
}

/* Where each limit is enforced: the hierarchy for controller c. */
static int limit_home(const uvt__cg_t *g, int c) {
  if ((g->mask & UVT__CG_BIT(UVT__CG_V2)) && (g->v2_ctl & UVT__CG_BIT(c)))
    return UVT__CG_V2;
  if (g->mask & UVT__CG_BIT(c))
    return c;
  return -1;
}

static int write_limits(uvt__cg_t *g) {
  const uvt_process_limits_t *l = &g->limits;
  char v[48];
  int h;
  int err;

  h = limit_home(g, UVT__CG_MEMORY);
  if (h == UVT__CG_V2) {
    if (l->memory_bytes > 0)
      snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_bytes);
    else
      snprintf(v, sizeof(v), "max");
    if ((err = put(g->dir[h], g->name, "memory.max", v)) != 0)
      return err;
  } else if (h >= 0) {
    if (l->memory_bytes > 0)
      snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_bytes);
    else
      snprintf(v, sizeof(v), "-1");
    if ((err = put(g->dir[h], g->name, "memory.limit_in_bytes", v)) != 0)
      return err;
  }
  h = limit_home(g, UVT__CG_PIDS);
  if (h >= 0) {
    if (l->max_processes > 0)
      snprintf(v, sizeof(v), "%u",
               (unsigned)l->max_processes + (g->keeper ? 1u : 0u));
    else
      snprintf(v, sizeof(v), "max");
    if ((err = put(g->dir[h], g->name, "pids.max", v)) != 0)
      return err;
  }
  h = limit_home(g, UVT__CG_CPU);
  if (h == UVT__CG_V2) {
    if (l->cpu_percent > 0)
      snprintf(v, sizeof(v), "%llu %u",
               (unsigned long long)l->cpu_percent * UVT__CG_PERIOD_US / 100,
               UVT__CG_PERIOD_US);
    else
      snprintf(v, sizeof(v), "max %u", UVT__CG_PERIOD_US);
    if ((err = put(g->dir[h], g->name, "cpu.max", v)) != 0)
      return err;
  } else if (h >= 0) {
    snprintf(v, sizeof(v), "%u", UVT__CG_PERIOD_US);
    if ((err = put(g->dir[h], g->name, "cpu.cfs_period_us", v)) != 0)
      return err;
    if (l->cpu_percent > 0)
      snprintf(v, sizeof(v), "%llu",
               (unsigned long long)l->cpu_percent * UVT__CG_PERIOD_US / 100);
    else
      snprintf(v, sizeof(v), "-1");
    if ((err = put(g->dir[h], g->name, "cpu.cfs_quota_us", v)) != 0)
      return err;
  }
  return 0;
}

int uvt__cg_make(uvt__cg_t *g) {
  uvt__cg_events_t ev;
  unsigned made = 0;
  int h;
  int r;
  int err;

  for (h = 0; h < UVT__CG_N; h++) {
    if (!(g->mask & UVT__CG_BIT(h)) || (g->exists & UVT__CG_BIT(h)))
      continue;
    if (uvt__cgroup_mkdir_hook != NULL)
      r = uvt__cgroup_mkdir_hook(g->dir[h], g->name);
    else
      r = mkdirat(g->dir[h], g->name, 0755) != 0 ? UVT__PERR(errno) : 0;
    if (r == 0)
      made |= UVT__CG_BIT(h);
    else if (r != UV_EEXIST) {
      err = r;
      goto fail;
    }
  }
  /* A pooled group whose files hold these very limits is left as it is. */
  err = g->written && made == 0 ? 0 : write_limits(g);
  if (err != 0)
    goto fail;
  /* What the child writes and the loop reads, once for the group's life.
   * The files a task reads are above stdio, or the child's placing of
   * its stdio would close them (it enters the group first anyway). */
  for (h = 0; h < UVT__CG_N; h++)
    if (g->mask & UVT__CG_BIT(h))
      keep_open(g, h, h, "cgroup.procs", O_RDWR);
  if (g->mask & UVT__CG_BIT(UVT__CG_V2))
    keep_open(g, UVT__CG_FD_EVENTS, UVT__CG_V2, "cgroup.events", O_RDONLY);
  r = limit_home(g, UVT__CG_MEMORY);
  if (g->limits.memory_bytes > 0 && r >= 0)
    keep_open(g, UVT__CG_FD_MEM, r, mem_events(r), O_RDONLY);
  r = limit_home(g, UVT__CG_PIDS);
  if (g->limits.max_processes > 0 && r >= 0)
    keep_open(g, UVT__CG_FD_PIDS, r, "pids.events", O_RDONLY);
  /* Counters only grow: what they say now is the base of this task.  A
   * new group's are 0; a pooled one's came with it (its last task's final
   * counts); else they are read. */
  if (made == g->mask || g->based)
    return 0;
  g->oom_base = 0;
  g->pids_base = 0;
  if (uvt__cg_events(g, &ev, 0) == 0) {
    g->oom_base = ev.oom_kills;
    g->pids_base = ev.pids_max;
  }
  return 0;

fail:
  for (h = 0; h < UVT__CG_N; h++)
    if (made & UVT__CG_BIT(h))
      unlinkat(g->dir[h], g->name, AT_REMOVEDIR);
  return err;
}

/* Run in a child sharing the spawner's memory (spawn.c): no sanitizer
 * bookkeeping on its foreign stack. */
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize_address, no_sanitize_undefined))
#endif
int uvt__cg_enter(const uvt__cg_t *g) {
  char path[sizeof(g->name) + 16];
  size_t k = strlen(g->name);
  int h;
  int fd;

  for (h = 0; h < (int)k; h++)
    path[h] = g->name[h];
  for (h = 0; h < (int)sizeof("/cgroup.procs"); h++)
    path[k + (size_t)h] = "/cgroup.procs"[h];
  for (h = 0; h < UVT__CG_N; h++) {
    if (!(g->mask & UVT__CG_BIT(h)))
      continue;
    if (g->fd[h] >= 0) {
      /* At offset 0: a fake tree's plain file (tests) reads as written. */
      if (pwrite(g->fd[h], "0", 1, 0) != 1)
        return -errno;
      continue;
    }
    fd = openat(g->dir[h], path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return -errno;
    if (write(fd, "0", 1) != 1) {
      int e = errno;
      close(fd);
      return -e;
    }
    close(fd);
  }
  return 0;
}

/* The hierarchy whose cgroup.procs lists the group: v2 if it has it. */
static int procs_home(const uvt__cg_t *g) {
  int h;
  for (h = 0; h < UVT__CG_N; h++)
    if (g->mask & UVT__CG_BIT(h))
      return h;
  return -1;
}

int uvt__cg_each(const uvt__cg_t *g, void (*fn)(void *arg, pid_t pid),
                 void *arg) {
  char path[sizeof(g->name) + 16];
  int h = procs_home(g);
  int count;
  int fd;

  if (h < 0)
    return -1;
  snprintf(path, sizeof(path), "%s/cgroup.procs", g->name);
  fd = openat(g->dir[h], path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  count = uvt__read_pids(fd, fn, arg);
  close(fd);
  return count;
}

static void count_pid(void *arg, pid_t pid) {
  (void)arg;
  (void)pid;
}

int uvt__cg_populated(const uvt__cg_t *g) {
  char buf[256];
  int h = procs_home(g);

  if (h < 0)
    return 0;
  if (h == UVT__CG_V2) {
    if (get_kept(g, UVT__CG_FD_EVENTS, h, "cgroup.events", buf, sizeof(buf)) <=
        0)
      return 0; /* gone, or nothing to say */
    return strstr(buf, "populated 0") == NULL;
  }
  /* v1 has no cgroup.events: its list of processes (any pid at all). */
  if (g->fd[h] >= 0)
    return get_kept(g, h, h, "cgroup.procs", buf, sizeof(buf)) > 0 &&
           strpbrk(buf, "0123456789") != NULL;
  return uvt__cg_each(g, count_pid, NULL) > 0;
}

static void kill_pid(void *arg, pid_t pid) {
  (void)arg;
  kill(pid, SIGKILL);
}

void uvt__cg_kill(const uvt__cg_t *g) {
  int h = procs_home(g);

  if (h < 0)
    return;
  /* v2 (5.14 and later): the kernel kills every process, forks racing
   * with it included.  v1, or an older v2: SIGKILL to each listed pid;
   * the kill loop repeats it until the group is empty (P-KILL-7).  A pid
   * listed in our group is ours: the kernel moves it out only when it
   * exits (or someone with write access to another group moves it). */
  if (h == UVT__CG_V2 && put(g->dir[h], g->name, "cgroup.kill", "1") == 0)
    return;
  uvt__cg_each(g, kill_pid, NULL);
}

int uvt__cg_events(const uvt__cg_t *g, uvt__cg_events_t *ev, int full) {
  char buf[1024];
  int h;

  memset(ev, 0, sizeof(*ev));
  if (g->mask == 0)
    return UV_EINVAL;
  h = g->limits.memory_bytes > 0 ? limit_home(g, UVT__CG_MEMORY) : -1;
  if (h >= 0 &&
      get_kept(g, UVT__CG_FD_MEM, h, mem_events(h), buf, sizeof(buf)) > 0)
    ev->oom_kills = field(buf, "oom_kill");
  if (h == UVT__CG_V2) {
    if (full && get(g->dir[h], g->name, "memory.peak", buf, sizeof(buf)) > 0)
      ev->memory_peak = strtoull(buf, NULL, 10);
  } else if (h >= 0) {
    if (full && get(g->dir[h], g->name, "memory.max_usage_in_bytes", buf,
                    sizeof(buf)) > 0)
      ev->memory_peak = strtoull(buf, NULL, 10);
  }
  h = g->limits.max_processes > 0 ? limit_home(g, UVT__CG_PIDS) : -1;
  if (h >= 0 &&
      get_kept(g, UVT__CG_FD_PIDS, h, "pids.events", buf, sizeof(buf)) > 0)
    ev->pids_max = field(buf, "max");
  /* CPU time: v2's cpu.stat (there even without the cpu controller), or a
   * v1 cpu hierarchy with cpuacct mounted beside it. */
  ev->cpu_usec = UINT64_MAX;
  if (!full || g->limits.cpu_percent == 0)
    return 0;
  if ((g->mask & UVT__CG_BIT(UVT__CG_V2)) &&
      get(g->dir[UVT__CG_V2], g->name, "cpu.stat", buf, sizeof(buf)) > 0)
    ev->cpu_usec = field(buf, "usage_usec");
  else if ((g->mask & UVT__CG_BIT(UVT__CG_CPU)) &&
           get(g->dir[UVT__CG_CPU], g->name, "cpuacct.usage", buf,
               sizeof(buf)) > 0)
    ev->cpu_usec = strtoull(buf, NULL, 10) / 1000;
  return 0;
}

int uvt__cg_remove(uvt__cg_t *g) {
  int err = 0;
  int h;

  for (h = 0; h < UVT__CG_N; h++) {
    if (!((g->mask | g->spare) & UVT__CG_BIT(h)))
      continue;
    if (unlinkat(g->dir[h], g->name, AT_REMOVEDIR) != 0 && errno == EBUSY) {
      /* Still populated: stop it; what is left stays for the registry's
       * close to find. */
      uvt__cg_kill(g);
      if (unlinkat(g->dir[h], g->name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        err = UVT__PERR(errno);
    }
  }
  uvt__cg_close(g);
  return err;
}

void uvt__cg_close(uvt__cg_t *g) {
  int h;
  for (h = 0; h < UVT__CG_N; h++) {
    if ((g->own & UVT__CG_BIT(h)) && g->dir[h] >= 0)
      close(g->dir[h]);
    g->dir[h] = -1;
  }
  for (h = 0; h < UVT__CG_FDS; h++)
    if (g->fd[h] >= 0) {
      close(g->fd[h]);
      g->fd[h] = -1;
      atomic_fetch_sub(&cg_fds_held, 1);
    }
  g->own = 0;
  g->mask = 0;
  g->spare = 0;
}

void uvt__cg_move(uvt__cg_t *to, uvt__cg_t *from) {
  int i;
  *to = *from;
  from->own = 0;
  from->mask = 0;
  from->spare = 0;
  for (i = 0; i < UVT__CG_FDS; i++)
    from->fd[i] = -1;
}

int uvt__cg_open(uvt__cg_t *g, const char *const path[UVT__CG_N],
                 const uvt_process_limits_t *limits) {
  char dir[PATH_MAX];
  char buf[512];
  const char *base;
  struct statfs fs;
  struct stat st;
  int h;
  int fd;
  int err;

  uvt__cg_init(g);
  if (limits != NULL)
    g->limits = *limits;
  for (h = 0; h < UVT__CG_N; h++) {
    size_t len;
    if (path[h] == NULL)
      continue;
    base = strrchr(path[h], '/');
    if (base == NULL || base[1] == '\0' || strlen(base + 1) >= sizeof(g->name))
      goto inval;
    if (g->name[0] != '\0' && strcmp(g->name, base + 1) != 0)
      goto inval;
    snprintf(g->name, sizeof(g->name), "%s", base + 1);
    len = (size_t)(base - path[h]);
    if (len == 0 || len >= sizeof(dir))
      goto inval;
    memcpy(dir, path[h], len);
    dir[len] = '\0';
    /* S-7: by descriptor, no link followed, and only a cgroup file
     * system's directory (a path read from a journal is data; cgroupfs
     * has no symbolic links, so the group below it is a directory of the
     * same tree).  A fake tree (tests) is a plain directory. */
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      err = UVT__PERR(errno);
      uvt__cg_close(g);
      return err;
    }
    g->dir[h] = fd;
    g->own |= UVT__CG_BIT(h);
    if (uvt__cgroup_mkdir_hook == NULL &&
        (fstatfs(fd, &fs) != 0 || ((unsigned long)fs.f_type != 0x27e0ebul &&
                                   (unsigned long)fs.f_type != 0x63677270ul))) {
      uvt__cg_close(g);
      return UV_EINVAL; /* not a cgroup (v1 0x27e0eb, v2 0x63677270) */
    }
    if (fstatat(fd, base + 1, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      err = UVT__PERR(errno); /* UV_ENOENT: the group is gone */
      uvt__cg_close(g);
      return err;
    }
    if (!S_ISDIR(st.st_mode)) {
      uvt__cg_close(g);
      return UV_EINVAL;
    }
    g->mask |= UVT__CG_BIT(h);
  }
  if (g->mask == 0)
    goto inval;
  /* The v2 directory's controllers, as the registry's were found. */
  if ((g->mask & UVT__CG_BIT(UVT__CG_V2)) &&
      get(g->dir[UVT__CG_V2], g->name, "cgroup.controllers", buf,
          sizeof(buf)) >= 0) {
    for (h = UVT__CG_MEMORY; h < UVT__CG_N; h++)
      if (has_word(buf, ctl_name[h]))
        g->v2_ctl |= UVT__CG_BIT(h);
  }
  /* Events since the group was made count (the task was made in it). */
  g->oom_base = 0;
  g->pids_base = 0;
  return 0;

inval:
  uvt__cg_close(g);
  return UV_EINVAL;
}

int uvt__cg_path(const uvt__cg_t *g, int h, char *buf, size_t size) {
  char link[64];
  ssize_t n;

  if (h < 0 || h >= UVT__CG_N || !(g->mask & UVT__CG_BIT(h)))
    return UV_ENOENT;
  snprintf(link, sizeof(link), "/proc/self/fd/%d", g->dir[h]);
  n = readlink(link, buf, size);
  if (n < 0)
    return UVT__PERR(errno);
  if ((size_t)n + strlen(g->name) + 2 > size)
    return UV_ENAMETOOLONG;
  buf[n] = '/';
  memcpy(buf + n + 1, g->name, strlen(g->name) + 1);
  return 0;
}

/* ---- the registry's directories (loop thread) ------------------------- */

/* The host's own cgroup directory in hierarchy h: for v2 the cgroup2
 * mount joined with the "0::" line of /proc/self/cgroup; for v1 the
 * cgroup mount whose options name the controller, joined with the line
 * whose controller list names it. */
static int own_cgroup(int h, char *buf, size_t size) {
  char line[4096];
  char mount[PATH_MAX] = "";
  char root[PATH_MAX] = "";
  char path[PATH_MAX] = "";
  const char *rel;
  const char *ctl = ctl_name[h];
  FILE *f;

  f = fopen(uvt__cgroup_mountinfo, "re");
  if (f == NULL)
    return UVT__PERR(errno);
  while (fgets(line, sizeof(line), f) != NULL) {
    /* "id parent major:minor root mountpoint options ... - type src
     * superoptions" */
    char r[PATH_MAX];
    char m[PATH_MAX];
    const char *dash = strstr(line, " - ");
    if (dash == NULL)
      continue;
    if (h == UVT__CG_V2) {
      if (strncmp(dash, " - cgroup2 ", 11) != 0)
        continue;
    } else {
      /* The super options: a comma-separated list with the controller. */
      const char *opts;
      char *tok;
      char *save;
      char copy[1024];
      int has = 0;
      if (strncmp(dash, " - cgroup ", 10) != 0)
        continue;
      opts = strrchr(dash, ' ');
      if (opts == NULL)
        continue;
      snprintf(copy, sizeof(copy), "%s", opts + 1);
      copy[strcspn(copy, "\n")] = '\0';
      for (tok = strtok_r(copy, ",", &save); tok != NULL && !has;
           tok = strtok_r(NULL, ",", &save))
        has = strcmp(tok, ctl) == 0;
      if (!has)
        continue;
    }
    if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) == 2) {
      snprintf(root, sizeof(root), "%s", r);
      snprintf(mount, sizeof(mount), "%s", m);
      break;
    }
  }
  fclose(f);
  if (mount[0] == '\0')
    return UV_ENOSYS;
  f = fopen(uvt__cgroup_self, "re");
  if (f == NULL)
    return UVT__PERR(errno);
  while (fgets(line, sizeof(line), f) != NULL) {
    /* "N:ctl,ctl:/path" (v1) or "0::/path" (v2) */
    char *a = strchr(line, ':');
    char *b = a != NULL ? strchr(a + 1, ':') : NULL;
    int match = 0;
    if (b == NULL)
      continue;
    *a = '\0';
    *b = '\0';
    if (h == UVT__CG_V2) {
      match = strcmp(line, "0") == 0 && a + 1 == b;
    } else {
      char *tok;
      char *save;
      for (tok = strtok_r(a + 1, ",", &save); tok != NULL && !match;
           tok = strtok_r(NULL, ",", &save))
        match = strcmp(tok, ctl) == 0;
    }
    if (match) {
      b[1 + strcspn(b + 1, "\n")] = '\0';
      snprintf(path, sizeof(path), "%s", b + 1);
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
  if (strcmp(rel, "/") == 0)
    rel = "";
  if ((size_t)snprintf(buf, size, "%s%s", mount, rel) >= size)
    return UV_ENAMETOOLONG;
  return 0;
}

/* The limits v2 can enforce under the directory `fd`: the controllers its
 * parent hands down, enabled for the tasks' groups.  Returns the bits of
 * those enabled. */
static unsigned enable_controllers(int fd) {
  char buf[512];
  char plus[64] = "";
  unsigned on = 0;
  int c;

  if (get(fd, ".", "cgroup.controllers", buf, sizeof(buf)) >= 0)
    for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++)
      if (has_word(buf, ctl_name[c])) {
        size_t used = strlen(plus);
        snprintf(plus + used, sizeof(plus) - used, "%s+%s", used > 0 ? " " : "",
                 ctl_name[c]);
      }
  /* All at once; where the kernel refuses that, each alone (one it
   * refuses leaves the others). */
  if (plus[0] != '\0' && put(fd, ".", "cgroup.subtree_control", plus) != 0)
    for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++) {
      char one[16];
      snprintf(one, sizeof(one), "+%s", ctl_name[c]);
      if (strstr(plus, one) != NULL)
        put(fd, ".", "cgroup.subtree_control", one);
    }
  if (get(fd, ".", "cgroup.subtree_control", buf, sizeof(buf)) >= 0)
    for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++)
      if (has_word(buf, ctl_name[c]))
        on |= UVT__CG_BIT(c);
  return on;
}

/* Make the registry's directory in hierarchy h under `parent` (NULL: the
 * host's own cgroup there). */
static int root_open(uvt__procs_t *ps, int h, const char *parent_dir) {
  uvt__cgroot_t *r = &ps->cgroot;
  char parent[PATH_MAX];
  char dir[PATH_MAX];
  struct stat st;
  int fd;
  int err;

  if (r->dir[h] >= 0)
    return 0;
  if (parent_dir != NULL) {
    if ((size_t)snprintf(parent, sizeof(parent), "%s", parent_dir) >=
        sizeof(parent))
      return UV_ENAMETOOLONG;
  } else {
    err = own_cgroup(h, parent, sizeof(parent));
    if (err != 0)
      return err;
  }
  /* A cgroup directory has cgroup.procs; anything else is refused. */
  if ((size_t)snprintf(dir, sizeof(dir), "%s/cgroup.procs", parent) >=
      sizeof(dir))
    return UV_ENAMETOOLONG;
  if (stat(dir, &st) != 0)
    return errno == ENOENT ? UV_ENOSYS : UVT__PERR(errno);
  if (r->base == 0)
    r->base = atomic_fetch_add(&cgroup_dirs, 1) + 1;
  if ((size_t)snprintf(dir, sizeof(dir), "%s/uvtasks-%d-%u", parent,
                       (int)getpid(), r->base - 1) >= sizeof(dir))
    return UV_ENAMETOOLONG;
  if (uvt__cgroup_mkdir_hook != NULL) {
    err = uvt__cgroup_mkdir_hook(AT_FDCWD, dir);
    if (err != 0)
      return err;
  } else if (mkdir(dir, 0755) != 0) {
    return UVT__PERR(errno);
  }
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    err = UVT__PERR(errno);
    rmdir(dir);
    return err;
  }
  r->path[h] = uvt__strdup(dir);
  if (r->path[h] == NULL) {
    close(fd);
    rmdir(dir);
    return UV_ENOMEM;
  }
  r->dir[h] = fd;
  if (h == UVT__CG_V2)
    r->v2_ctl = enable_controllers(fd);
  uv_mutex_lock(&ps->spawn_mutex);
  r->shared[h] = fd;
  uv_mutex_unlock(&ps->spawn_mutex);
  return 0;
}

int uvt__cgroup_open(uvt__procs_t *ps, const char *parent_dir) {
  int err;

  if (ps->cgroot.contain)
    return UV_EALREADY;
  err = root_open(ps, UVT__CG_V2, parent_dir);
  if (err != 0)
    return err;
  ps->cgroot.contain = 1;
  ps->cgroot.v2_parent_given = parent_dir != NULL;
  return 0;
}

int uvt__cgroot_limits(uvt__procs_t *ps, const uvt_process_limits_t *l,
                       char *why, size_t size) {
  uvt__cgroot_t *r = &ps->cgroot;
  int c;
  int err;
  int v2_err = 0;

  if (why != NULL && size > 0)
    why[0] = '\0';
  if (l->memory_bytes == 0 && l->max_processes == 0 && l->cpu_percent == 0)
    return 0;
  /* v2 first, once: its directory also contains and counts the task. */
  if (r->dir[UVT__CG_V2] < 0 && !(r->tried & UVT__CG_BIT(UVT__CG_V2))) {
    r->tried |= UVT__CG_BIT(UVT__CG_V2);
    r->err[UVT__CG_V2] = root_open(ps, UVT__CG_V2, NULL);
  }
  v2_err = r->dir[UVT__CG_V2] >= 0 ? 0 : r->err[UVT__CG_V2];
  for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++) {
    int want = c == UVT__CG_MEMORY ? l->memory_bytes > 0
               : c == UVT__CG_PIDS ? l->max_processes > 0
                                   : l->cpu_percent > 0;
    if (!want || (r->dir[UVT__CG_V2] >= 0 && (r->v2_ctl & UVT__CG_BIT(c))))
      continue;
    /* A v2 directory given by the host is where the limits go: no v1
     * hierarchy of the host's own is mixed in. */
    if (!r->v2_parent_given && r->dir[c] < 0 && !(r->tried & UVT__CG_BIT(c))) {
      r->tried |= UVT__CG_BIT(c);
      r->err[c] = root_open(ps, c, NULL);
    }
    if (r->dir[c] >= 0)
      continue;
    err = r->v2_parent_given || r->err[c] == 0 ? UV_ENOSYS : r->err[c];
    if (why != NULL && size > 0) {
      if (r->dir[UVT__CG_V2] >= 0)
        snprintf(why, size,
                 "no %s limit can be enforced here: the %s controller is not "
                 "enabled for %s (cgroup.controllers) and %s",
                 ctl_name[c], ctl_name[c], r->path[UVT__CG_V2],
                 r->v2_parent_given ? "no cgroup v1 hierarchy is used with a "
                                      "cgroup v2 directory the host gave"
                 : err == UV_ENOSYS ? "no cgroup v1 hierarchy has it"
                                    : "its cgroup v1 hierarchy refused a "
                                      "directory");
      else
        snprintf(why, size,
                 "no %s limit can be enforced here: no cgroup v2 directory "
                 "could be made (%s) and %s",
                 ctl_name[c], uvt_err_name(v2_err),
                 err == UV_ENOSYS ? "no cgroup v1 hierarchy has the controller"
                                  : "its cgroup v1 hierarchy refused a "
                                    "directory");
      if (r->err[c] != 0 && r->err[c] != UV_ENOSYS) {
        size_t used = strlen(why);
        snprintf(why + used, size - used, " (%s)", uvt_err_name(r->err[c]));
      }
    }
    return UV_ENOTSUP;
  }
  return 0;
}

int uvt__cgroot_assign(uvt__procs_t *ps, const uvt_process_limits_t *l,
                       uvt__cg_t *g) {
  uvt__cgroot_t *r = &ps->cgroot;
  int limited =
      l->memory_bytes > 0 || l->max_processes > 0 || l->cpu_percent > 0;
  unsigned want = 0;
  int c;
  int h;

  uvt__cg_init(g);
  if (!r->contain && !limited)
    return 0;
  if (limited)
    for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++) {
      int on = c == UVT__CG_MEMORY ? l->memory_bytes > 0
               : c == UVT__CG_PIDS ? l->max_processes > 0
                                   : l->cpu_percent > 0;
      if (!on)
        continue;
      if (r->dir[UVT__CG_V2] >= 0 && (r->v2_ctl & UVT__CG_BIT(c)))
        want |= UVT__CG_BIT(UVT__CG_V2);
      else
        want |= UVT__CG_BIT(c);
    }
  /* v2 also where containment is on (cgroup.kill, cgroup.events): a task
   * with only v1 limits is held by its v1 groups, one directory less. */
  if (r->contain && r->dir[UVT__CG_V2] >= 0)
    want |= UVT__CG_BIT(UVT__CG_V2);
  if (want == 0)
    return 0;
  /* A pooled group that already exists in every hierarchy wanted; else a
   * new name.  uvt__cg_make() makes what is missing. */
  if (r->pool_n > 0) {
    size_t i;
    size_t pick = r->pool_n - 1;
    int same = 0;
    /* The last one released whose hierarchies and limits are these, else
     * one with these hierarchies, else the last one. */
    for (i = r->pool_n; i-- > 0 && !same;)
      if ((r->pool[i].mask & want) == want) {
        const uvt_process_limits_t *pl = &r->pool[i].limits;
        int eq = pl->memory_bytes == l->memory_bytes &&
                 pl->max_processes == l->max_processes &&
                 pl->cpu_percent == l->cpu_percent;
        if (eq || (r->pool[pick].mask & want) != want) {
          pick = i;
          same = eq;
        }
      }
    memcpy(g->name, r->pool[pick].name, sizeof(g->name));
    g->exists = r->pool[pick].mask & want;
    g->spare = r->pool[pick].mask & ~want;
    g->based = r->pool[pick].based && same;
    g->oom_base = r->pool[pick].oom;
    g->pids_base = r->pool[pick].pids;
    g->written = same && g->exists == want;
    memcpy(g->fd, r->pool[pick].fd, sizeof(g->fd));
    r->pool[pick] = r->pool[--r->pool_n];
  } else {
    snprintf(g->name, sizeof(g->name), "%u", r->seq++);
  }
  for (h = 0; h < UVT__CG_N; h++)
    if ((want | g->spare) & UVT__CG_BIT(h))
      g->dir[h] = r->dir[h];
  g->mask = want;
  g->v2_ctl = r->v2_ctl;
  g->limits = *l;
  return 0;
}

/* D-1 with L-LIM-3: the directory durable tasks' groups go in, in
 * hierarchy h: UVT__CG_DURABLE beside the registry's directory (the same
 * parent: the host's own cgroup, or the one the host gave), made once by
 * whichever host needs it first and never removed (other hosts' tasks may
 * be in it; an empty directory costs nothing).  A new descriptor, or a
 * libuv error. */
static int durable_parent(uvt__procs_t *ps, int h, unsigned *v2_ctl) {
  uvt__cgroot_t *r = &ps->cgroot;
  char dir[PATH_MAX];
  const char *slash;
  int fd;
  int err;

  if (r->path[h] == NULL || (slash = strrchr(r->path[h], '/')) == NULL)
    return UV_ENOENT;
  if ((size_t)snprintf(dir, sizeof(dir), "%.*s/%s", (int)(slash - r->path[h]),
                       r->path[h], UVT__CG_DURABLE) >= sizeof(dir))
    return UV_ENAMETOOLONG;
  if (uvt__cgroup_mkdir_hook != NULL)
    err = uvt__cgroup_mkdir_hook(AT_FDCWD, dir);
  else
    err = mkdir(dir, 0755) != 0 ? UVT__PERR(errno) : 0;
  if (err != 0 && err != UV_EEXIST)
    return err;
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return UVT__PERR(errno);
  if (h == UVT__CG_V2)
    *v2_ctl = enable_controllers(fd);
  return fd;
}

int uvt__cgroot_durable(uvt__procs_t *ps, const uvt_process_limits_t *l,
                        const char *name, uvt__cg_t *g) {
  uvt__cgroot_t *r = &ps->cgroot;
  unsigned want = 0;
  unsigned v2_ctl = 0;
  int c;
  int h;

  uvt__cg_init(g);
  if (strlen(name) >= sizeof(g->name))
    return UV_EINVAL;
  /* The hierarchies a plain task with these limits would be in. */
  for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++) {
    int on = c == UVT__CG_MEMORY ? l->memory_bytes > 0
             : c == UVT__CG_PIDS ? l->max_processes > 0
                                 : l->cpu_percent > 0;
    if (!on)
      continue;
    if (r->dir[UVT__CG_V2] >= 0 && (r->v2_ctl & UVT__CG_BIT(c)))
      want |= UVT__CG_BIT(UVT__CG_V2);
    else if (r->dir[c] >= 0)
      want |= UVT__CG_BIT(c);
    else
      return UV_ENOTSUP; /* uvt__cgroot_limits said why */
  }
  if (r->contain && r->dir[UVT__CG_V2] >= 0)
    want |= UVT__CG_BIT(UVT__CG_V2);
  for (h = 0; h < UVT__CG_N; h++) {
    int fd;
    if (!(want & UVT__CG_BIT(h)))
      continue;
    fd = durable_parent(ps, h, &v2_ctl);
    if (fd < 0) {
      uvt__cg_close(g);
      return fd;
    }
    g->dir[h] = fd;
    g->own |= UVT__CG_BIT(h);
    g->mask |= UVT__CG_BIT(h);
  }
  /* Its v2 limits need the same controllers enabled there. */
  for (c = UVT__CG_MEMORY; c < UVT__CG_N; c++)
    if ((want & UVT__CG_BIT(UVT__CG_V2)) && (r->v2_ctl & UVT__CG_BIT(c)) &&
        !(v2_ctl & UVT__CG_BIT(c)) &&
        (c == UVT__CG_MEMORY ? l->memory_bytes > 0
         : c == UVT__CG_PIDS ? l->max_processes > 0
                             : l->cpu_percent > 0)) {
      uvt__cg_close(g);
      return UV_ENOTSUP;
    }
  snprintf(g->name, sizeof(g->name), "%s", name);
  g->v2_ctl = v2_ctl;
  g->limits = *l;
  g->keeper = 1;
  return 0;
}

void uvt__cgroot_release(uvt__procs_t *ps, uvt__cg_t *g) {
  uvt__cgroot_t *r = ps != NULL ? &ps->cgroot : NULL;
  uvt__cgfree_t *nb;
  int h;

  if (g->mask == 0 && g->spare == 0)
    return;
  if (ps == NULL || g->own != 0 || ps->closing ||
      (!g->empty && uvt__cg_populated(g))) {
    uvt__cg_remove(g);
    return;
  }
  if (r->pool_n == r->pool_cap) {
    size_t cap = r->pool_cap ? r->pool_cap * 2 : 16;
    nb = uvt__realloc(r->pool, cap * sizeof(*nb));
    if (nb == NULL) {
      uvt__cg_remove(g);
      return;
    }
    r->pool = nb;
    r->pool_cap = cap;
  }
  memcpy(r->pool[r->pool_n].name, g->name, sizeof(g->name));
  r->pool[r->pool_n].mask = g->mask | g->spare;
  r->pool[r->pool_n].limits = g->limits;
  r->pool[r->pool_n].based = g->final;
  r->pool[r->pool_n].oom = g->oom_last;
  r->pool[r->pool_n].pids = g->pids_last;
  memcpy(r->pool[r->pool_n].fd, g->fd, sizeof(g->fd));
  for (h = 0; h < UVT__CG_FDS; h++)
    g->fd[h] = -1;
  r->pool_n++;
  uvt__cg_close(g);
}

int uvt__cgroup_had(uvt__procs_t *ps, pid_t pid) {
  char path[64];
  char line[PATH_MAX + 8];
  char base[48];
  FILE *f;
  int found = 0;

  if (ps->cgroot.base == 0)
    return 0;
  /* The same name in every hierarchy: ".../uvtasks-<pid>-<n>/<k>". */
  snprintf(base, sizeof(base), "/uvtasks-%d-%u/", (int)getpid(),
           ps->cgroot.base - 1);
  /* A zombie still names the group it died in. */
  snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
  f = fopen(path, "re");
  if (f == NULL)
    return 0;
  while (!found && fgets(line, sizeof(line), f) != NULL)
    found = strstr(line, base) != NULL;
  fclose(f);
  return found;
}

void uvt__cgroup_close(uvt__procs_t *ps) {
  uvt__cgroot_t *r = &ps->cgroot;
  size_t i;
  int h;

  uv_mutex_lock(&ps->spawn_mutex);
  for (h = 0; h < UVT__CG_N; h++)
    r->shared[h] = -1;
  uv_mutex_unlock(&ps->spawn_mutex);
  for (i = 0; i < r->pool_n; i++) {
    for (h = 0; h < UVT__CG_FDS; h++)
      if (r->pool[i].fd[h] >= 0) {
        close(r->pool[i].fd[h]);
        atomic_fetch_sub(&cg_fds_held, 1);
      }
    for (h = 0; h < UVT__CG_N; h++)
      if ((r->pool[i].mask & UVT__CG_BIT(h)) && r->dir[h] >= 0)
        unlinkat(r->dir[h], r->pool[i].name, AT_REMOVEDIR);
  }
  uvt__free(r->pool);
  r->pool = NULL;
  r->pool_n = r->pool_cap = 0;
  for (h = 0; h < UVT__CG_N; h++) {
    if (r->dir[h] < 0)
      continue;
    close(r->dir[h]);
    r->dir[h] = -1;
    if (r->path[h] != NULL && rmdir(r->path[h]) != 0 && errno != ENOENT)
      uvt_log(ps->reg, UVT_LOG_WARN,
              "cgroup %s is left behind (%s): a task's group was not empty",
              r->path[h], uvt_err_name(UVT__PERR(errno)));
    uvt__free(r->path[h]);
    r->path[h] = NULL;
  }
  r->contain = 0;
}
