/* The operating-system side of a spawn (P-SPAWN-1..5): what can fail
 * cheaply is checked and everything is prepared on the loop thread
 * (uvt__spawn_prepare), and the spawn itself (uvt__spawn_run) only reads
 * that immutable request, so it can run on any thread.  Everything that
 * would change for another spawn path lives in this file.
 *
 * The spawn uses posix_spawn (vfork semantics: no copy of the host's
 * memory) with POSIX_SPAWN_SETSID, every signal reset to its default and
 * unblocked, and posix_spawn_file_actions_addclosefrom_np(3) (glibc 2.34),
 * so no descriptor of the host reaches the child even if it was opened
 * without O_CLOEXEC.  Errors of chdir and exec come back from posix_spawn
 * itself, which also reaps the failed child.
 *
 * Where the build found no posix_spawn with all of POSIX_SPAWN_SETSID
 * (glibc 2.26), posix_spawn_file_actions_addchdir_np (2.29) and
 * posix_spawn_file_actions_addclosefrom_np (2.34), the spawn forks
 * instead: the child resets its signals, starts its session, places its
 * stdio, changes directory, marks every other descriptor close-on-exec
 * (close_range(2), or one by one where the kernel lacks it; closing them
 * there is not possible with posix_spawn, which is why the fallback is a
 * fork) and execs, reporting a failure through a close-on-exec pipe.  A
 * fork copies the host's page tables, so that path is slower in a host
 * with a large heap.  It is also the path of a task with a cgroup of its
 * own (cgroup.c): the child enters its group before it execs, which
 * posix_spawn cannot do (glibc 2.41's posix_spawnattr_setcgroup_np could). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process-internal.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The kernel's limit for one argument or environment string (32 pages). */
#define ONE_STRING_MAX (32 * 4096)

int uvt__process_force_fork;
int uvt__process_no_pidfd;
void (*uvt__process_spawn_hook)(int phase);

/* The fixed wrapper (P-SPAWN-2): the command travels in UVT__CMD_VAR, is
 * moved into a shell variable, unset from the environment, and evaluated;
 * the shell variable is unset by the evaluated text's first line, so the
 * command sees neither.  The shell exits with the evaluated text's status.
 *
 * P-END-3: nothing is guessed from that status.  A shell whose last
 * command died of signal N exits 128 + N, exactly as a program that chose
 * that status itself (python's sys.exit(130), a script's `exit 147`), so
 * the task reports "exit code: N" for both, and no status can make the
 * wrapper signal or stop itself.  `killed`, "signal: NAME" comes only from
 * the leader's own wait status: a kill's SIGTERM reaches the whole session
 * (P-KILL-5), the shell with it, so a killed command still ends killed
 * (C-07). */
static const char wrapper[] = "__uvt_c=$" UVT__CMD_VAR "; unset " UVT__CMD_VAR
                              "; eval \"unset __uvt_c\n$__uvt_c\"";

/* ---- checks on the loop thread ---------------------------------------- */

/* The working directory is checked here, before the spawn, as well as by
 * the child's chdir: a clear error does not then depend on how the C
 * library reports a child's failure before exec (under valgrind, for one,
 * posix_spawn cannot report it and the child would exit 127 instead). */
static int check_cwd(const char *cwd) {
  struct stat st;
  if (cwd == NULL)
    return 0;
  if (stat(cwd, &st) != 0)
    return UVT__PERR(errno);
  if (!S_ISDIR(st.st_mode))
    return UV_ENOTDIR;
  if (access(cwd, X_OK) != 0)
    return UVT__PERR(errno);
  return 0;
}

/* The shell: bash, else sh.  The last one found is kept and checked again
 * (one access(2)) at every start. */
static const char *find_shell(uvt__envcache_t *c) {
  static const char *const shells[] = {"/bin/bash", "/usr/bin/bash", "/bin/sh",
                                       "/usr/bin/sh"};
  size_t i;
  if (c->shell != NULL && access(c->shell, X_OK) == 0)
    return c->shell;
  c->shell = NULL;
  for (i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
    if (access(shells[i], X_OK) == 0)
      return c->shell = shells[i];
  return NULL;
}

/* Is the shell bash?  Then the wrapper runs with --norc: bash -c reads
 * ~/.bashrc when its stdin is a socket (it takes that for a remote shell
 * daemon's) and SHLVL is unset or 0, and a stdin_pipe task's stdin is a
 * socket (stdin.c).  A user's rc file may print, take seconds or change
 * the environment; the task must not depend on it (P-SPAWN-2). */
static int is_bash(const char *shell) {
  size_t n = strlen(shell);
  return n >= 5 && strcmp(shell + n - 5, "/bash") == 0;
}

/* An executable regular file?  0, or the error exec would give. */
static int executable(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return UVT__PERR(errno);
  if (!S_ISREG(st.st_mode))
    return UV_EACCES;
  if (access(path, X_OK) != 0)
    return UVT__PERR(errno);
  return 0;
}

/* argv[0] as exec will find it: itself if it has a '/', else the first
 * executable file of that name in PATH (the child's PATH: the options'
 * entry if they give one, else the host's), as execvp searches.  A
 * relative directory in PATH is taken from the child's working directory.
 * Returns 0 with the path in buf, or UV_ENOENT, UV_EACCES, UV_ENAMETOOLONG. */
static int resolve_path(const char *name, const char *path, const char *cwd,
                        char buf[PATH_MAX]) {
  const char *dir;
  const char *end;
  size_t nlen = strlen(name);
  size_t dlen;
  int saw_eacces = 0;
  int r;

  if (strchr(name, '/') != NULL) {
    if (nlen >= PATH_MAX)
      return UV_ENAMETOOLONG;
    memcpy(buf, name, nlen + 1);
    if (name[0] != '/' && cwd != NULL &&
        (size_t)snprintf(buf, PATH_MAX, "%s/%s", cwd, name) >= PATH_MAX)
      return UV_ENAMETOOLONG;
    r = executable(buf);
    if (r != 0)
      return r;
    memcpy(buf, name, nlen + 1); /* exec'd relative to the child's cwd */
    return 0;
  }
  for (dir = path;; dir = end + 1) {
    end = strchr(dir, ':');
    dlen = end != NULL ? (size_t)(end - dir) : strlen(dir);
    if (dlen == 0) {
      dir = ".";
      dlen = 1;
    }
    if (dir[0] != '/' && cwd != NULL) {
      if ((size_t)snprintf(buf, PATH_MAX, "%s/%.*s/%s", cwd, (int)dlen, dir,
                           name) >= PATH_MAX)
        goto next;
    } else if ((size_t)snprintf(buf, PATH_MAX, "%.*s/%s", (int)dlen, dir,
                                name) >= PATH_MAX) {
      goto next;
    }
    r = executable(buf);
    if (r == 0)
      return 0;
    if (r == UV_EACCES)
      saw_eacces = 1;
  next:
    if (end == NULL)
      break;
  }
  return saw_eacces ? UV_EACCES : UV_ENOENT;
}

/* resolve_path with the child's PATH, remembering the last answer: a
 * PATH of a dozen directories is a dozen stat calls, and a host tends to
 * start the same few programs.  The remembered path is used when the
 * name, the PATH and the cwd are the same and it is still an executable
 * file (one stat); a program put earlier in PATH meanwhile is found only
 * once the remembered one stops qualifying. */
static int resolve(uvt__envcache_t *c, const char *name, const char *const *env,
                   const char *cwd, char buf[PATH_MAX]) {
  const char *path = NULL;
  const char *const *e;
  const char *dir = cwd != NULL ? cwd : "";
  size_t nlen;
  size_t plen;
  size_t dlen;
  size_t blen;
  char *key;
  struct stat st;
  int err;

  if (strchr(name, '/') != NULL)
    return resolve_path(name, NULL, cwd, buf);
  for (e = env; e != NULL && *e != NULL; e++)
    if (strncmp(*e, "PATH=", 5) == 0)
      path = *e + 5;
  if (env == NULL || path == NULL)
    path = getenv("PATH");
  if (path == NULL)
    path = "/bin:/usr/bin";
  nlen = strlen(name) + 1;
  plen = strlen(path) + 1;
  dlen = strlen(dir) + 1;
  key = c->resolved;
  /* strcmp, never memcmp by the new lengths: the remembered key may be
   * shorter than them (each part stops at its own NUL). */
  if (key != NULL && strcmp(key, name) == 0 && strcmp(key + nlen, path) == 0 &&
      strcmp(key + nlen + plen, dir) == 0) {
    const char *found = key + nlen + plen + dlen;
    if (stat(found, &st) == 0 && S_ISREG(st.st_mode) &&
        (st.st_mode & 0111) != 0) {
      memcpy(buf, found, strlen(found) + 1);
      return 0;
    }
  }
  err = resolve_path(name, path, cwd, buf);
  if (err != 0)
    return err;
  blen = strlen(buf) + 1;
  key = uvt__malloc(nlen + plen + dlen + blen);
  if (key != NULL) {
    memcpy(key, name, nlen);
    memcpy(key + nlen, path, plen);
    memcpy(key + nlen + plen, dir, dlen);
    memcpy(key + nlen + plen + dlen, buf, blen);
    uvt__free(c->resolved);
    c->resolved = key;
  }
  return 0;
}

/* A pty task's environment entries: the options' own, behind
 * TERM=xterm-256color unless they give a TERM (P-PTY-1).  *out is NULL
 * when they need nothing added (use o->env), else an array to free. */
static int tty_env(const char *const *env, const char ***out) {
  static const char term[] = "TERM=xterm-256color";
  const char **v;
  size_t n = 0;

  *out = NULL;
  for (; env != NULL && env[n] != NULL; n++)
    if (strncmp(env[n], "TERM=", 5) == 0)
      return 0;
  v = uvt__malloc((n + 2) * sizeof(*v));
  if (v == NULL)
    return UV_ENOMEM;
  v[0] = term;
  if (n > 0)
    memcpy(v + 1, env, n * sizeof(*v));
  v[n + 1] = NULL;
  *out = v;
  return 0;
}

int uvt__spawn_prepare(uvt__envcache_t *envc, const uvt_process_options_t *o,
                       const int fd[3], const char *tty, uvt__spawn_t **out) {
  char path[PATH_MAX];
  const char *file;
  uvt__env_t *env;
  uvt__spawn_t *sp;
  size_t argc = 0;
  size_t bytes;
  size_t i;
  size_t clen = 0;
  char *w;
  char **argv;
  char **envp;
  int err;

  err = check_cwd(o->cwd);
  if (err != 0)
    return err;
  if (o->command != NULL) {
    clen = strlen(o->command);
    if (clen + sizeof(UVT__CMD_VAR "=") > ONE_STRING_MAX)
      return UV_E2BIG;
    file = find_shell(envc);
    if (file == NULL)
      return UV_ENOENT;
    argc = is_bash(file) ? 4 : 3;
  } else {
    err = resolve(envc, o->argv[0], o->env, o->cwd, path);
    if (err != 0)
      return err;
    file = path;
    while (o->argv[argc] != NULL)
      if (strlen(o->argv[argc++]) >= ONE_STRING_MAX)
        return UV_E2BIG;
  }
  if (tty != NULL) {
    const char **extra;
    err = tty_env(o->env, &extra);
    if (err != 0)
      return err;
    err = uvt__env_get(envc, extra != NULL ? extra : o->env, &env);
    uvt__free((void *)extra);
  } else {
    err = uvt__env_get(envc, o->env, &env);
  }
  if (err != 0)
    return err;

  /* One block: the request, argv, envp, then the strings. */
  bytes = sizeof(*sp) + (argc + 1 + env->n + 2) * sizeof(char *);
  bytes += strlen(file) + 1;
  if (o->command != NULL)
    bytes += sizeof(UVT__CMD_VAR "=") + clen;
  else
    for (i = 0; i < argc; i++)
      bytes += strlen(o->argv[i]) + 1;
  if (o->cwd != NULL)
    bytes += strlen(o->cwd) + 1;
  if (tty != NULL)
    bytes += strlen(tty) + 1;
  sp = uvt__malloc(bytes);
  if (sp == NULL) {
    uvt__env_unref(env);
    return UV_ENOMEM;
  }
  memset(sp, 0, sizeof(*sp));
  argv = (char **)(sp + 1);
  envp = argv + argc + 1;
  w = (char *)(envp + env->n + 2);
#define COPY(dst, s)                                                           \
  do {                                                                         \
    size_t len_ = strlen(s) + 1;                                               \
    memcpy(w, (s), len_);                                                      \
    (dst) = w;                                                                 \
    w += len_;                                                                 \
  } while (0)
  COPY(sp->file, file);
  if (o->command != NULL) {
    argv[0] = (char *)sp->file;
    if (argc == 4)
      argv[1] = (char *)"--norc";
    argv[argc - 2] = (char *)"-c";
    argv[argc - 1] = (char *)wrapper;
  } else {
    for (i = 0; i < argc; i++)
      COPY(argv[i], o->argv[i]);
  }
  argv[argc] = NULL;
  memcpy(envp, env->envp, env->n * sizeof(char *));
  i = env->n;
  if (o->command != NULL) {
    /* The wrapper's variable is ours in shell mode (env_build leaves the
     * host's and the options' out). */
    memcpy(w, UVT__CMD_VAR "=", sizeof(UVT__CMD_VAR "=") - 1);
    memcpy(w + sizeof(UVT__CMD_VAR "=") - 1, o->command, clen + 1);
    envp[i++] = w;
    w += sizeof(UVT__CMD_VAR "=") + clen;
  }
  envp[i] = NULL;
  if (o->cwd != NULL)
    COPY(sp->cwd, o->cwd);
  if (tty != NULL)
    COPY(sp->tty, tty);
#undef COPY
  sp->argv = argv;
  sp->envp = envp;
  sp->extra_fd = -1;
  sp->sb_status_fd = -1;
  if (o->sandbox != NULL) {
    /* S-1: bwrap is the leader; the command runs inside it. */
    err = uvt__sandbox_wrap(envc, o->sandbox, o->cwd, sp->file, argv,
                            &sp->sb_argv, &sp->sb_status_fd, &sp->extra_fd);
    if (err != 0) {
      uvt__env_unref(env);
      uvt__free(sp);
      return err;
    }
    sp->file = sp->sb_argv[0];
    sp->argv = sp->sb_argv;
  }
  sp->env = env;
  for (i = 0; i < 3; i++)
    sp->fd[i] = fd[i];
  sp->pid = -1;
  sp->pidfd = -1;
  sp->want_pidfd = !uvt__process_no_pidfd;
  sp->force_fork = uvt__process_force_fork;
  sp->hook = uvt__process_spawn_hook;
  uvt__cg_init(&sp->cg);
  sp->xfd[0] = sp->xfd[1] = -1;
  sp->clk_tck = sysconf(_SC_CLK_TCK);
  atomic_init(&sp->cancelled, 0);
  *out = sp;
  return 0;
}

void uvt__spawn_free(uvt__spawn_t *sp) {
  int i;
  if (sp == NULL)
    return;
  /* Descriptors the spawn did not get to (the request was dropped). */
  for (i = 0; i < 3; i++)
    if (sp->fd[i] >= 0)
      close(sp->fd[i]);
  if (sp->extra_fd >= 0)
    close(sp->extra_fd);
  if (sp->sb_status_fd >= 0)
    close(sp->sb_status_fd);
  for (i = 0; i < 2; i++)
    if (sp->xfd[i] >= 0)
      close(sp->xfd[i]);
  /* A group no task took (the spawn was dropped, or failed): removed,
   * with a pooled one's directories (its limits files no longer say what
   * the pool thinks); a durable task's directories closed. */
  uvt__cg_remove(&sp->cg);
  uvt__env_unref(sp->env);
  uvt__sandbox_argv_free(sp->sb_argv);
  uvt__sandbox_argv_free(sp->dur_argv);
  uvt__free(sp);
}

/* ---- the spawn (any thread; reads the request, writes the answer) ----- */

#if defined(UVT_HAVE_POSIX_SPAWN_ALL)
/* The first descriptor the child does not inherit: 3, or above a
 * sandbox's status pipe (3) or a keeper's status file and FIFO (3, 4). */
static int first_free_fd(const uvt__spawn_t *sp) {
  if (sp->xfd[1] >= 0)
    return 5;
  return sp->xfd[0] >= 0 || sp->extra_fd >= 0 ? 4 : 3;
}

static int spawn_posix(const uvt__spawn_t *sp, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t all;
  sigset_t none;
  int rc;

  rc = posix_spawn_file_actions_init(&fa);
  if (rc != 0)
    return UVT__PERR(rc);
  rc = posix_spawnattr_init(&attr);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return UVT__PERR(rc);
  }
  sigfillset(&all);
  sigemptyset(&none);
  rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID |
                                           POSIX_SPAWN_SETSIGDEF |
                                           POSIX_SPAWN_SETSIGMASK);
  if (rc == 0)
    rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (rc == 0)
    rc = posix_spawnattr_setsigmask(&attr, &none);
  if (rc == 0 && sp->tty != NULL) {
    /* P-PTY-1: the file actions run after POSIX_SPAWN_SETSID, so this
     * open (without O_NOCTTY) makes the terminal the new session's
     * controlling terminal. */
    rc = posix_spawn_file_actions_addopen(&fa, 0, sp->tty, O_RDWR, 0);
    if (rc == 0)
      rc = posix_spawn_file_actions_adddup2(&fa, 0, 1);
    if (rc == 0)
      rc = posix_spawn_file_actions_adddup2(&fa, 0, 2);
  } else if (rc == 0) {
    if (sp->fd[0] >= 0)
      rc = posix_spawn_file_actions_adddup2(&fa, sp->fd[0], 0);
    else
      rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
      rc = posix_spawn_file_actions_adddup2(&fa, sp->fd[1], 1);
    if (rc == 0)
      rc = posix_spawn_file_actions_adddup2(&fa, sp->fd[2], 2);
  }
  /* S-2, S-9: a sandbox's status pipe as descriptor 3. */
  if (rc == 0 && sp->extra_fd >= 0)
    rc = posix_spawn_file_actions_adddup2(&fa, sp->extra_fd, 3);
  /* D-1: a keeper's status file and FIFO end, as its 3 and 4 (never
   * with a sandbox: a durable task has none). */
  if (rc == 0 && sp->xfd[0] >= 0)
    rc = posix_spawn_file_actions_adddup2(&fa, sp->xfd[0], 3);
  if (rc == 0 && sp->xfd[1] >= 0)
    rc = posix_spawn_file_actions_adddup2(&fa, sp->xfd[1], 4);
  if (rc == 0 && sp->cwd != NULL)
    rc = posix_spawn_file_actions_addchdir_np(&fa, sp->cwd);
  /* P-SPAWN-5: whatever the host left without O_CLOEXEC stops here. */
  if (rc == 0)
    rc = posix_spawn_file_actions_addclosefrom_np(&fa, first_free_fd(sp));
  if (rc == 0)
    rc = posix_spawn(pid, sp->file, &fa, &attr, sp->argv, sp->envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  return rc != 0 ? UVT__PERR(rc) : 0;
}
#endif

/* The child runs on memory the sanitizers do not know as a stack (the
 * vfork path below): keep them out of it. */
#if defined(__clang__) || defined(__GNUC__)
#define NO_SAN __attribute__((no_sanitize_address, no_sanitize_undefined))
#else
#define NO_SAN
#endif

/* The fork path's child: only async-signal-safe calls from here to exec.
 * Any failure is written to `errfd` (and, on the vfork path, to *shared)
 * and the child exits 127.  With the vfork path it shares the spawner
 * thread's memory until exec: it writes nothing but its own stack, errno
 * (the suspended thread's) and *shared. */
NO_SAN static void fork_child(const uvt__spawn_t *sp, int errfd,
                              volatile int *shared) {
  struct sigaction dfl;
  sigset_t none;
  struct rlimit rl;
  int err;
  int fd;
  int sig;
  int first;

  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (sig = 1; sig < NSIG; sig++)
    sigaction(sig, &dfl, NULL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (sp->cg.mask != 0) {
    /* P-KILL-5, L-LIM-1: into the task's cgroup (each hierarchy) before
     * the command runs, so that nothing it starts is outside and its
     * limits hold from its first instruction; a group that cannot be
     * entered is a failed spawn, never a run outside it.  First, while
     * the group's kept descriptors (cgroup.c) are where they were: the
     * placing of stdio below may take their numbers. */
    err = uvt__cg_enter(&sp->cg);
    if (err != 0) {
      errno = -err;
      goto fail;
    }
  }
  if (setsid() < 0)
    goto fail;
  if (sp->tty != NULL) {
    /* P-PTY-1: a session leader without a controlling terminal that opens
     * one without O_NOCTTY gets it; TIOCSCTTY says so explicitly. */
    if ((fd = open(sp->tty, O_RDWR)) < 0)
      goto fail;
    if (fd != 0 && (dup2(fd, 0) < 0 || close(fd) != 0))
      goto fail;
    if (ioctl(0, TIOCSCTTY, 0) != 0 || dup2(0, 1) < 0 || dup2(0, 2) < 0)
      goto fail;
  } else {
    if (sp->fd[0] >= 0)
      fd = dup2(sp->fd[0], 0);
    else if ((fd = open("/dev/null", O_RDONLY)) >= 0 && fd != 0)
      fd = dup2(fd, 0);
    if (fd < 0 || dup2(sp->fd[1], 1) < 0 || dup2(sp->fd[2], 2) < 0)
      goto fail;
  }
  /* S-2, S-9: a sandbox's status pipe as descriptor 3 (above stdio and
   * above 3 itself: dup2 clears close-on-exec); D-1: a keeper's status
   * file and FIFO end as 3 and 4. */
  if ((sp->extra_fd >= 0 && dup2(sp->extra_fd, 3) < 0) ||
      (sp->xfd[0] >= 0 && dup2(sp->xfd[0], 3) < 0) ||
      (sp->xfd[1] >= 0 && dup2(sp->xfd[1], 4) < 0))
    goto fail;
  if (sp->cwd != NULL && chdir(sp->cwd) != 0)
    goto fail;
  /* P-SPAWN-5: every descriptor above stdio closes on exec (the error
   * pipe too, which is how the parent learns that exec succeeded). */
  first = sp->xfd[1] >= 0 ? 5 : sp->xfd[0] >= 0 || sp->extra_fd >= 0 ? 4 : 3;
  if (syscall(SYS_close_range, (unsigned)first, ~0U, CLOSE_RANGE_CLOEXEC) !=
      0) {
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
      rl.rlim_cur = 65536;
    for (fd = first; fd < (int)rl.rlim_cur; fd++)
      fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  execve(sp->file, sp->argv, sp->envp);
fail:
  err = errno;
  if (shared != NULL)
    *shared = err;
  while (write(errfd, &err, sizeof(err)) < 0 && errno == EINTR)
    ;
  _exit(127);
}

/* The vfork path: its child's argument, and its entry on its own stack. */
typedef struct {
  const uvt__spawn_t *sp;
  int errfd;
  int other;            /* the pipe's read end: closed in the child */
  volatile int started; /* set by the child: it shares our memory */
  volatile int err;     /* its errno, where it failed before exec */
} vfork_arg_t;

NO_SAN static int vfork_child(void *arg) {
  vfork_arg_t *a = arg;
  a->started = 1;
  close(a->other);
  fork_child(a->sp, a->errfd, &a->err);
  return 127;
}

/* The vfork path needs a stack the sanitizers and valgrind can follow:
 * not under ThreadSanitizer (which cannot follow a process sharing our
 * memory); valgrind runs such a clone as a fork. */
#if defined(__SANITIZE_THREAD__)
#define VFORK_OK 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VFORK_OK 0
#endif
#endif
#ifndef VFORK_OK
#define VFORK_OK 1
#endif

/* Spawn by fork (vfork_ok 0) or by a clone sharing our memory (1). */
static int spawn_fork(const uvt__spawn_t *sp, pid_t *pid_out, int vfork_ok) {
  char vfork_stack[32 * 1024] __attribute__((aligned(16)));
  int errp[2];
  int child_err = 0;
  ssize_t n;
  pid_t pid;
  int status;
  int err;

  if (pipe2(errp, O_CLOEXEC) != 0)
    return UVT__PERR(errno);
  /* Above stdio, or the child's dup2 onto 0..2 would overwrite it. */
  errp[0] = uvt__fd_above_stdio(errp[0]);
  errp[1] = uvt__fd_above_stdio(errp[1]);
  if (errp[0] < 0 || errp[1] < 0) {
    err = errp[0] < 0 ? errp[0] : errp[1];
    if (errp[0] >= 0)
      close(errp[0]);
    if (errp[1] >= 0)
      close(errp[1]);
    return err;
  }
  if (vfork_ok && !sp->force_fork) {
    /* A cgroup task (cgroup.c): as posix_spawn does inside glibc, a clone
     * that shares our memory (nothing is copied, whatever the host's
     * size) on a stack of its own, this thread suspended until the child
     * has exec'd or exited.  Every signal stays blocked until the child
     * has reset its handlers: the host's must never run in it. */
    vfork_arg_t a;
    sigset_t all;
    sigset_t old;
    a.sp = sp;
    a.errfd = errp[1];
    a.other = errp[0];
    a.started = 0;
    a.err = 0;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = clone(vfork_child, vfork_stack + sizeof(vfork_stack),
                CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    err = pid < 0 ? UVT__PERR(errno) : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* This thread runs again once the child has exec'd or exited, so
     * where the child shared our memory, what it left in `a` is final:
     * no read of the pipe, whose write end the kernel closes only after
     * it has resumed us (exec closes descriptors after it releases the
     * vfork parent, so that read would sleep, a context switch a task).
     * Where the clone ran as a fork (valgrind), the pipe says it. */
    if (pid > 0 && a.started) {
      close(errp[0]);
      close(errp[1]);
      child_err = a.err;
      goto read_done;
    }
  } else {
    pid = fork();
    err = pid < 0 ? UVT__PERR(errno) : 0;
    if (pid == 0) {
      close(errp[0]);
      fork_child(sp, errp[1], NULL);
    }
  }
  if (pid < 0) {
    close(errp[0]);
    close(errp[1]);
    return err;
  }
  close(errp[1]);
  do
    n = read(errp[0], &child_err, sizeof(child_err));
  while (n < 0 && errno == EINTR);
  close(errp[0]);
  if (n != (ssize_t)sizeof(child_err))
    child_err = 0;
read_done:
  if (child_err != 0) {
    /* The child failed before exec: reap it, report its errno. */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    return UVT__PERR(child_err);
  }
  *pid_out = pid;
  return 0;
}

/* The boot clock in the clock ticks of /proc/<pid>/stat's start time,
 * rounded down as the kernel rounds it: taken just before a spawn, it is
 * a lower bound of the child's start time, without reading /proc (which,
 * right after posix_spawn returns, waits for the child's exec to finish:
 * up to milliseconds on a busy machine). */
static unsigned long long boot_ticks(long hz) {
  struct timespec ts;
  if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
    return 0;
  return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
         (unsigned long long)ts.tv_nsec /
             (1000000000ull / (unsigned long long)hz);
}

void uvt__spawn_run(uvt__spawn_t *sp) {
  void (*hook)(int) = sp->hook;
  pid_t pid = -1;
  int in_cg;
  int i;

  if (hook != NULL)
    hook(0);
  sp->cg_err = UV_ENOENT;
  if (atomic_load(&sp->cancelled)) {
    sp->skipped = 1;
  } else {
    if (hook != NULL)
      hook(1);
    /* L-LIM-1: the group and its limits first; a task with limits never
     * runs without them, one that only wanted containment runs without
     * (process.c logs it). */
    if (sp->cg.mask != 0)
      sp->cg_err = uvt__cg_make(&sp->cg);
    if (sp->cg.mask != 0 && sp->cg_err != 0)
      uvt__cg_remove(&sp->cg); /* a pooled group's directories too */
    in_cg = sp->cg.mask != 0;
    sp->start_ticks = boot_ticks(sp->clk_tck);
    sp->err = UVT__HELPER_NO;
    if (sp->cg_must && !in_cg) {
      sp->err = sp->cg_err;
    } else {
      /* P-SPAWN-7: through the helper where it can take the request; the
       * rest (and all when it is gone) is spawned here. */
      /* Nor a sandbox's with its status pipe: the helper passes stdio
       * only. */
      if (sp->helper != NULL && !sp->force_fork && !in_cg && sp->extra_fd < 0)
        sp->err = uvt__helper_spawn(sp->helper, sp, &pid);
#if defined(UVT_HAVE_POSIX_SPAWN_ALL)
      /* With a cgroup, the child must enter it before it execs (a move
       * after posix_spawn returns races the command's first forks). */
      if (sp->err != UVT__HELPER_NO)
        ;
      else if (!sp->force_fork && !in_cg)
        sp->err = spawn_posix(sp, &pid);
      else
#else
      if (sp->err == UVT__HELPER_NO)
#endif
        sp->err = spawn_fork(sp, &pid, in_cg && VFORK_OK);
    }
    if (sp->err == 0) {
      sp->pid = pid;
      if (sp->want_pidfd)
        sp->pidfd = uvt__pidfd_open(pid);
    } else if (in_cg) {
      /* No child: the group is not the task's (not pooled: removed, with
       * the directories it has for other tasks). */
      uvt__cg_remove(&sp->cg);
      sp->cg_err = UV_ECANCELED;
    }
    if (in_cg && sp->err == 0)
      sp->cg_err = 0;
  }
  for (i = 0; i < 3; i++) {
    if (sp->fd[i] >= 0)
      close(sp->fd[i]);
    sp->fd[i] = -1;
  }
  if (sp->extra_fd >= 0)
    close(sp->extra_fd);
  sp->extra_fd = -1;
  for (i = 0; i < 2; i++) {
    if (sp->xfd[i] >= 0)
      close(sp->xfd[i]);
    sp->xfd[i] = -1;
  }
}

/* ---- odds and ends ---------------------------------------------------- */

int uvt__pidfd_open(pid_t pid) {
  long fd = syscall(SYS_pidfd_open, (long)pid, 0L);
  if (fd < 0)
    return UVT__PERR(errno);
  /* pidfds are close-on-exec from birth. */
  return (int)fd;
}

int uvt__stdin_file(const char *data, size_t len) {
  int fd = memfd_create("uvtasks-stdin", MFD_CLOEXEC);
  size_t off = 0;
  ssize_t n;
  int err;

  if (fd < 0)
    return UVT__PERR(errno);
  while (off < len) {
    n = write(fd, data + off, len - off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = UVT__PERR(errno);
      close(fd);
      return err;
    }
    off += (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) < 0) {
    err = UVT__PERR(errno);
    close(fd);
    return err;
  }
  return fd;
}

int uvt__fd_above_stdio(int fd) {
  int moved;
  if (fd < 0 || fd > 2)
    return fd;
  moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0)
    return UVT__PERR(errno);
  close(fd);
  return moved;
}

void uvt__spawn_abort(pid_t pid) {
  int status;

  kill(-pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
}
