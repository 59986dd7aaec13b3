/* The operating-system side of the process producer: the environment, the
 * spawn itself (P-SPAWN-1..5), the pidfd that reports the leader's exit and
 * the group liveness probe (P-KILL-3, P-KILL-4).  Everything that would
 * change for another spawn path lives in this file.
 *
 * The spawn uses posix_spawn (vfork semantics: no copy of the host's
 * memory) with POSIX_SPAWN_SETSID, every signal reset to its default and
 * unblocked, and posix_spawn_file_actions_addclosefrom_np(3), so no
 * descriptor of the host reaches the child even if it was opened without
 * O_CLOEXEC.  Errors of chdir and exec come back from posix_spawn itself,
 * which also reaps the failed child. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process-internal.h"

#if !defined(POSIX_SPAWN_SETSID)
#error "uvtasks needs posix_spawn with POSIX_SPAWN_SETSID (glibc 2.26+)"
#endif

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

extern char **environ;

/* The name of the variable that carries the command to the wrapper. */
#define CMD_VAR "UVTASKS_CMD"

/* The fixed wrapper (P-SPAWN-2): the command travels in CMD_VAR, is moved
 * into a shell variable, unset from the environment, and evaluated; the
 * shell variable is unset by the evaluated text's first line, so the
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
static const char wrapper[] =
    "__uvt_c=$" CMD_VAR "; unset " CMD_VAR "; eval \"unset __uvt_c\n$__uvt_c\"";

/* Fixed additions to every child's environment (P-SPAWN-3, P-SPAWN-3b).
 * The editors are `true`: what a person does who closes the editor without
 * a change, so every program either goes on with its own default (git
 * rebase -i, git merge, git revert) or refuses with its own message where
 * it needs a person's text (git commit: "Aborting commit due to empty
 * commit message"), and nothing waits for a terminal that is not there.
 * `false` would make git abort some operations half-way (a revert left in
 * progress), which is harder for a model to recover from. */
static const char *const fixed_env[] = {"NO_COLOR=1",
                                        "TERM=dumb",
                                        "PAGER=cat",
                                        "GIT_PAGER=cat",
                                        "EDITOR=true",
                                        "VISUAL=true",
                                        "GIT_EDITOR=true",
                                        "GIT_SEQUENCE_EDITOR=true",
                                        "GIT_TERMINAL_PROMPT=0",
                                        "PYTHONUNBUFFERED=1"};
#define FIXED_ENV_N (sizeof(fixed_env) / sizeof(fixed_env[0]))

/* Name parts that mark a credential (P-SPAWN-3b), upper case.  A name is
 * split at every character that is not a letter or a digit ('_' in
 * practice) and matches when one of its parts equals one of these, in any
 * case: AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, DB_PASSWORD, GITHUB_PAT,
 * OPENAI_API_KEY; but KEYBOARD_LAYOUT, MONKEY, TOKENIZERS_PARALLELISM and
 * PATH stay. */
static const char *const credential_parts[] = {
    "KEY",        "KEYS",        "APIKEY",   "ACCESSKEY",  "SECRETKEY",
    "PRIVATEKEY", "SECRET",      "SECRETS",  "TOKEN",      "TOKENS",
    "AUTHTOKEN",  "ACCESSTOKEN", "PASSWORD", "PASSWORDS",  "PASSWD",
    "PASS",       "PASSPHRASE",  "PAT",      "CREDENTIAL", "CREDENTIALS",
    "CREDS"};

static size_t name_len(const char *entry) {
  const char *eq = strchr(entry, '=');
  return eq ? (size_t)(eq - entry) : strlen(entry);
}

static int same_name(const char *a, const char *b) {
  size_t n = name_len(a);
  return n == name_len(b) && memcmp(a, b, n) == 0;
}

static int upper(int c) {
  return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

static int alnum(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* Case-insensitive: is part[0, n) one of credential_parts? */
static int credential_part(const char *part, size_t n) {
  size_t i;
  size_t j;
  const char *w;

  for (i = 0; i < sizeof(credential_parts) / sizeof(credential_parts[0]); i++) {
    w = credential_parts[i];
    for (j = 0; j < n && w[j] != '\0'; j++)
      if (upper((unsigned char)part[j]) != w[j])
        break;
    if (j == n && w[j] == '\0')
      return 1;
  }
  return 0;
}

static int looks_like_credential(const char *entry) {
  size_t n = name_len(entry);
  size_t i = 0;
  size_t start;

  while (i < n) {
    while (i < n && !alnum((unsigned char)entry[i]))
      i++;
    start = i;
    while (i < n && alnum((unsigned char)entry[i]))
      i++;
    if (i > start && credential_part(entry + start, i - start))
      return 1;
  }
  return 0;
}

static int in_list(const char *entry, const char *const *list) {
  if (list == NULL)
    return 0;
  for (; *list != NULL; list++)
    if (same_name(entry, *list))
      return 1;
  return 0;
}

static int in_fixed(const char *entry) {
  size_t i;
  for (i = 0; i < FIXED_ENV_N; i++)
    if (same_name(entry, fixed_env[i]))
      return 1;
  return 0;
}

/* Build the child's environment: inherited minus credentials, the fixed
 * additions, the caller's entries (which win), and the command variable.
 * The array points into the existing strings except *cmd_entry, which the
 * caller frees with the array. */
static int build_env(const uvt__spawn_req_t *req, char ***envp_out,
                     char **cmd_entry) {
  size_t n = 0;
  size_t k = 0;
  size_t i;
  char **envp;
  char **e;
  const char *const *x;
  size_t clen;

  *cmd_entry = NULL;
  for (e = environ; e != NULL && *e != NULL; e++)
    n++;
  for (x = req->env; x != NULL && *x != NULL; x++)
    n++;
  n += FIXED_ENV_N + 2;
  envp = uvt__calloc(n, sizeof(*envp));
  if (envp == NULL)
    return UV_ENOMEM;

  for (e = environ; e != NULL && *e != NULL; e++) {
    if (strchr(*e, '=') == NULL || looks_like_credential(*e) || in_fixed(*e) ||
        in_list(*e, req->env) || same_name(*e, CMD_VAR "="))
      continue;
    envp[k++] = *e;
  }
  for (i = 0; i < FIXED_ENV_N; i++)
    if (!in_list(fixed_env[i], req->env))
      envp[k++] = (char *)fixed_env[i];
  for (x = req->env; x != NULL && *x != NULL; x++) {
    /* The wrapper's variable cannot be overridden in shell mode. */
    if (req->command != NULL && same_name(*x, CMD_VAR "="))
      continue;
    envp[k++] = (char *)*x;
  }
  if (req->command != NULL) {
    clen = strlen(req->command);
    *cmd_entry = uvt__malloc(sizeof(CMD_VAR "=") + clen);
    if (*cmd_entry == NULL) {
      uvt__free(envp);
      return UV_ENOMEM;
    }
    memcpy(*cmd_entry, CMD_VAR "=", sizeof(CMD_VAR "=") - 1);
    memcpy(*cmd_entry + sizeof(CMD_VAR "=") - 1, req->command, clen + 1);
    envp[k++] = *cmd_entry;
  }
  envp[k] = NULL;
  *envp_out = envp;
  return 0;
}

static const char *find_shell(void) {
  static const char *const shells[] = {"/bin/bash", "/usr/bin/bash", "/bin/sh",
                                       "/usr/bin/sh"};
  size_t i;
  for (i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
    if (access(shells[i], X_OK) == 0)
      return shells[i];
  return NULL;
}

/* Keep a descriptor that the child gets as stdio out of 0..2 so that the
 * dup2 actions cannot overwrite one another. */
static int above_stdio(int fd, int *tmp) {
  *tmp = -1;
  if (fd < 0 || fd > 2)
    return fd;
  *tmp = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  return *tmp;
}

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

int uvt__spawn(const uvt__spawn_req_t *req, pid_t *pid_out) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t all;
  sigset_t none;
  char **envp = NULL;
  char *cmd_entry = NULL;
  const char *shell_argv[4];
  const char *file;
  char *const *argv;
  int tmp[3] = {-1, -1, -1};
  int fds[3];
  int rc;
  int err;
  int i;
  pid_t pid;

  err = check_cwd(req->cwd);
  if (err != 0)
    return err;
  if (req->command != NULL) {
    file = find_shell();
    if (file == NULL)
      return UV_ENOENT;
    shell_argv[0] = file;
    shell_argv[1] = "-c";
    shell_argv[2] = wrapper;
    shell_argv[3] = NULL;
    argv = (char *const *)shell_argv;
  } else {
    file = req->argv[0];
    argv = (char *const *)req->argv;
  }

  err = build_env(req, &envp, &cmd_entry);
  if (err != 0)
    return err;

  fds[0] = above_stdio(req->stdin_fd, &tmp[0]);
  fds[1] = above_stdio(req->stdout_fd, &tmp[1]);
  fds[2] = above_stdio(req->stderr_fd, &tmp[2]);
  if ((req->stdin_fd >= 0 && fds[0] < 0) || fds[1] < 0 || fds[2] < 0) {
    err = UVT__PERR(errno);
    goto out;
  }

  rc = posix_spawn_file_actions_init(&fa);
  if (rc != 0) {
    err = UVT__PERR(rc);
    goto out;
  }
  rc = posix_spawnattr_init(&attr);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&fa);
    err = UVT__PERR(rc);
    goto out;
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
  if (rc == 0) {
    if (fds[0] >= 0)
      rc = posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    else
      rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  }
  if (rc == 0)
    rc = posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  if (rc == 0)
    rc = posix_spawn_file_actions_adddup2(&fa, fds[2], 2);
  if (rc == 0 && req->cwd != NULL)
    rc = posix_spawn_file_actions_addchdir_np(&fa, req->cwd);
  /* P-SPAWN-5: whatever the host left without O_CLOEXEC stops here. */
  if (rc == 0)
    rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  if (rc == 0) {
    if (req->command != NULL)
      rc = posix_spawn(&pid, file, &fa, &attr, argv, envp);
    else
      rc = posix_spawnp(&pid, file, &fa, &attr, argv, envp);
  }
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    err = UVT__PERR(rc);
    goto out;
  }
  *pid_out = pid;
  err = 0;

out:
  for (i = 0; i < 3; i++)
    if (tmp[i] >= 0)
      close(tmp[i]);
  uvt__free(cmd_entry);
  uvt__free(envp);
  return err;
}

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

/* Is /proc/<pid> a member of `pgid` and not a zombie?  -1 if unknown. */
static int live_member(const char *pid, pid_t pgid) {
  char path[64];
  char buf[512];
  int fd;
  ssize_t n;
  char *p;
  char state;
  long ppid;
  long pgrp;

  if (strlen(pid) > 20)
    return 0;
  strcpy(path, "/proc/");
  strcat(path, pid);
  strcat(path, "/stat");
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0; /* gone */
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* "pid (comm) S ppid pgrp ...": comm may hold anything, so parse after
   * the last ')'. */
  p = strrchr(buf, ')');
  if (p == NULL)
    return -1;
  if (sscanf(p + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3)
    return -1;
  return pgrp == (long)pgid && state != 'Z' && state != 'X';
}

int uvt__group_alive(pid_t pgid) {
  DIR *d;
  struct dirent *de;
  int alive = 0;
  int r;

  if (pgid <= 0)
    return 0;
  if (kill(-pgid, 0) != 0)
    return errno == EPERM;
  /* Something is in the group; zombies count as dead (their parent may be
   * init or a subreaper that reaps later), so look for a live member. */
  d = opendir("/proc");
  if (d == NULL)
    return 1;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    r = live_member(de->d_name, pgid);
    if (r != 0) {
      alive = 1;
      break;
    }
  }
  closedir(d);
  return alive;
}

void uvt__spawn_abort(pid_t pid) {
  int status;

  kill(-pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
}
