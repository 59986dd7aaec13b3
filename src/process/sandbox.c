/* Sandboxed tasks (S-1..S-4): the bwrap command line around a task's
 * command, the check that a sandbox can be made at all (S-3), and the
 * command's own pid.  The choices of bwrap options, and why, are in
 * uvtasks/process.h (uvt_sandbox_t); this file only builds them.
 *
 * The leader's argv for a sandboxed task:
 *
 *   env --ignore-signal=SIGS bwrap
 *       --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp
 *       --bind WS WS            (the workspace, S-5, else the cwd; --ro-bind
 *                                with UVT_SANDBOX_FS_READONLY)
 *       --bind W W ...          (writable[])
 *       --bind P P ... --ro-bind R R ...  (readonly[], S-6: each parent P
 *                                between its root and R pinned first)
 *       --tmpfs H --remount-ro H | --ro-bind /dev/null H ...   (hidden[])
 *       --unshare-pid --unshare-ipc [--unshare-net] [--cap-drop ALL]
 *       --chdir CWD
 *       -- env --default-signal=SIGS FILE ARGV[1..]
 *
 * where FILE ARGV is what the task runs without a sandbox (the wrapper
 * shell, or the resolved argv[0] and its arguments: argv[0] becomes the
 * resolved path).  `env` is coreutils' (8.31 or later for the signal
 * options): it is what makes bwrap ignore the signals a kill sends, and
 * gives the command its default dispositions back, without a helper
 * program of ours.  The probe (S-3) runs the same options without the
 * binds, with `true` as the command. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process-internal.h"

/* The signals bwrap's processes ignore (and the command gets back with
 * their default action): those a kill or uvt_process_signal() sends whose
 * default would end a process.  SIGKILL and SIGSTOP cannot be ignored;
 * SIGCONT and SIGWINCH do not end one. */
#define SIGS "HUP,INT,QUIT,PIPE,TERM,USR1,USR2"

extern char **environ;

static const char *const default_hidden[] = {
    "~/.ssh",   "~/.aws",   "~/.gnupg",  "~/.config/gh",
    "~/.netrc", "~/.npmrc", "~/.docker", NULL};

/* ---- a growing argv ---------------------------------------------------- */

typedef struct {
  char **v;
  size_t n;
  size_t cap;
  int err;
} argv_t;

static void push(argv_t *a, const char *s) {
  char **nv;
  char *copy;
  size_t len;

  if (a->err != 0)
    return;
  if (a->n + 2 > a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 48;
    nv = uvt__realloc(a->v, cap * sizeof(*nv));
    if (nv == NULL) {
      a->err = UV_ENOMEM;
      return;
    }
    a->v = nv;
    a->cap = cap;
  }
  len = strlen(s) + 1;
  copy = uvt__malloc(len);
  if (copy == NULL) {
    a->err = UV_ENOMEM;
    return;
  }
  memcpy(copy, s, len);
  a->v[a->n++] = copy;
  a->v[a->n] = NULL;
}

void uvt__sandbox_argv_free(char **v) {
  size_t i;
  if (v == NULL)
    return;
  for (i = 0; v[i] != NULL; i++)
    uvt__free(v[i]);
  uvt__free(v);
}

/* ---- the programs ------------------------------------------------------ */

static int is_exec(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static const char *env_path(void) {
  return is_exec("/usr/bin/env") ? "/usr/bin/env" : "/bin/env";
}

/* $UVTASKS_BWRAP, else `bwrap` in the host's PATH, into buf; 0, or
 * UV_ENOENT with buf holding what was looked for. */
static int find_bwrap(char buf[PATH_MAX]) {
  const char *set = getenv("UVTASKS_BWRAP");
  const char *path;
  const char *dir;
  const char *end;
  size_t dlen;

  if (set != NULL && set[0] != '\0') {
    if (strlen(set) >= PATH_MAX)
      return UV_ENAMETOOLONG;
    memcpy(buf, set, strlen(set) + 1);
    if (!is_exec(buf))
      return UV_ENOENT;
    /* Absolute: the leader runs it from the task's cwd. */
    if (set[0] != '/' && realpath(set, buf) == NULL) {
      memcpy(buf, set, strlen(set) + 1);
      return UV_ENOENT;
    }
    return 0;
  }
  path = getenv("PATH");
  if (path == NULL || path[0] == '\0')
    path = "/usr/bin:/bin";
  for (dir = path;; dir = end + 1) {
    end = strchr(dir, ':');
    dlen = end != NULL ? (size_t)(end - dir) : strlen(dir);
    if (dlen > 0 && dir[0] == '/' &&
        (size_t)snprintf(buf, PATH_MAX, "%.*s/bwrap", (int)dlen, dir) <
            PATH_MAX &&
        is_exec(buf))
      return 0;
    if (end == NULL)
      break;
  }
  snprintf(buf, PATH_MAX, "bwrap (not in PATH)");
  return UV_ENOENT;
}

/* S-2, S-9: uvtasks-sandbox, the program of ours that runs the command
 * inside (src/sandbox/uvtasks-sandbox.c): $UVTASKS_SANDBOX_HELPER when
 * set; else beside the library's own file (the Node addon ships it beside
 * uvtasks.node, as it does the keeper, D-1), in ../libexec from it, or in
 * src/sandbox/ from it (the build tree); else where it was installed.  0 with the path in buf; UV_ENOENT when the
 * variable names nothing runnable (buf says what); UV_ESRCH when there is
 * none at all (the sandbox then runs the command through `env`, as in
 * v3). */
static const char helper_anchor = 'h'; /* an address in the library */

static int helper_beside(char buf[PATH_MAX]) {
  /* Beside the library (the Node addon), ../libexec from it (a prefix's
   * lib/), and the build tree's own place (a server run from build/). */
  static const char *const rel[] = {"uvtasks-sandbox",
                                    "../libexec/uvtasks-sandbox",
                                    "src/sandbox/uvtasks-sandbox"};
  Dl_info info;
  char dir[PATH_MAX];
  char at[PATH_MAX];
  char *slash;
  size_t i;

  if (dladdr(&helper_anchor, &info) == 0 || info.dli_fname == NULL ||
      realpath(info.dli_fname, dir) == NULL ||
      (slash = strrchr(dir, '/')) == NULL)
    return 0;
  slash[1] = '\0';
  for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++)
    if ((size_t)snprintf(at, sizeof(at), "%s%s", dir, rel[i]) < sizeof(at) &&
        is_exec(at) && realpath(at, buf) != NULL)
      return 1;
  return 0;
}

static int find_helper(char buf[PATH_MAX]) {
  const char *set = getenv("UVTASKS_SANDBOX_HELPER");

  if (set != NULL && set[0] != '\0') {
    if (strlen(set) >= PATH_MAX)
      return UV_ENAMETOOLONG;
    if (realpath(set, buf) == NULL || !is_exec(buf)) {
      snprintf(buf, PATH_MAX, "%s", set);
      return UV_ENOENT;
    }
    return 0;
  }
  if (helper_beside(buf))
    return 0;
#ifdef UVT_SANDBOX_HELPER_PATH
  if (is_exec(UVT_SANDBOX_HELPER_PATH) &&
      realpath(UVT_SANDBOX_HELPER_PATH, buf) != NULL)
    return 0;
  snprintf(buf, PATH_MAX, "%s", UVT_SANDBOX_HELPER_PATH);
#else
  snprintf(buf, PATH_MAX, "(not installed with this build)");
#endif
  return UV_ESRCH;
}

/* Where the helper is bound inside: bwrap's own /dev, so it is there
 * whatever is hidden or private (a helper under /tmp), and its command
 * name is the one the library knows (procfs.c). */
#define HELPER_INSIDE "/dev/uvtasks-sandbox"

/* ---- the options ------------------------------------------------------- */

/* "~/x" with the host's $HOME, else the path itself; 0 when it cannot be
 * expanded (no $HOME). */
static int expand(const char *in, char out[PATH_MAX]) {
  const char *home;
  if (in[0] == '~' && in[1] == '/') {
    home = getenv("HOME");
    if (home == NULL || home[0] != '/')
      return 0;
    return (size_t)snprintf(out, PATH_MAX, "%s/%s", home, in + 2) < PATH_MAX;
  }
  return (size_t)snprintf(out, PATH_MAX, "%s", in) < PATH_MAX;
}

/* `path` reads as empty inside: a directory as an empty read-only one,
 * anything else (a file, a socket) as an empty file.  Skipped when it does
 * not exist. */
static void hide(argv_t *a, const char *path) {
  struct stat st;
  if (path == NULL || path[0] != '/' || stat(path, &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    push(a, "--tmpfs");
    push(a, path);
    push(a, "--remount-ro");
    push(a, path);
  } else {
    push(a, "--ro-bind");
    push(a, "/dev/null");
    push(a, path);
  }
}

static int longer_first(const void *x, const void *y) {
  size_t a = strlen(*(char *const *)x);
  size_t b = strlen(*(char *const *)y);
  return a < b ? 1 : a > b ? -1 : 0;
}

/* The hidden paths, and the Unix sockets that are a way out neither a
 * read-only mount nor a network namespace closes (connect(2) needs no
 * write permission on the mount): the session bus (`systemd-run --user`
 * runs anything outside), the ssh and gpg agents, Docker's socket; these
 * are hidden whatever `hidden` says.  Deeper paths first: bwrap cannot
 * make a mount point inside a directory already hidden (read-only), and
 * a directory hidden later covers what was mounted inside it. */
static void hide_all(argv_t *a, const uvt_sandbox_t *sb) {
  const char *const *list = sb->hidden != NULL ? sb->hidden : default_hidden;
  const char *sock[5];
  char path[PATH_MAX];
  char **paths;
  size_t cap = 5;
  size_t n = 0;
  size_t i;

  for (i = 0; list[i] != NULL; i++)
    cap++;
  paths = uvt__malloc(cap * sizeof(*paths));
  if (paths == NULL) {
    a->err = UV_ENOMEM;
    return;
  }
  sock[0] = getenv("XDG_RUNTIME_DIR");
  snprintf(path, sizeof(path), "/run/user/%u", (unsigned)geteuid());
  sock[1] = path;
  sock[2] = getenv("SSH_AUTH_SOCK");
  sock[3] = "/run/docker.sock";
  sock[4] = "/var/run/docker.sock";
  for (i = 0; i < cap && a->err == 0; i++) {
    const char *src = i < 5 ? sock[i] : path;
    if (i >= 5 && !expand(list[i - 5], path))
      continue;
    if (src == NULL || src[0] != '/')
      continue;
    paths[n] = uvt__malloc(strlen(src) + 1);
    if (paths[n] == NULL) {
      a->err = UV_ENOMEM;
      break;
    }
    memcpy(paths[n], src, strlen(src) + 1);
    n++;
  }
  qsort(paths, n, sizeof(paths[0]), longer_first);
  for (i = 0; i < n; i++) {
    hide(a, paths[i]);
    uvt__free(paths[i]);
  }
  uvt__free(paths);
}

/* ---- the writable places and what stays read-only in them (S-6) ------ */

/* A list of resolved paths, each its own allocation. */
typedef struct {
  char **v;
  size_t n;
  size_t cap;
} paths_t;

static void paths_free(paths_t *l) {
  size_t i;
  for (i = 0; i < l->n; i++)
    uvt__free(l->v[i]);
  uvt__free(l->v);
  memset(l, 0, sizeof(*l));
}

/* Append a copy of the first `len` bytes of `s`; the error in a->err. */
static void paths_add(argv_t *a, paths_t *l, const char *s, size_t len) {
  char **nv;
  char *copy;

  if (a->err != 0)
    return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    nv = uvt__realloc(l->v, cap * sizeof(*nv));
    if (nv == NULL) {
      a->err = UV_ENOMEM;
      return;
    }
    l->v = nv;
    l->cap = cap;
  }
  copy = uvt__malloc(len + 1);
  if (copy == NULL) {
    a->err = UV_ENOMEM;
    return;
  }
  memcpy(copy, s, len);
  copy[len] = '\0';
  l->v[l->n++] = copy;
}

/* Is `path` `dir` or inside it?  Both resolved. */
static int inside(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return 1;
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int has(const paths_t *l, const char *s) {
  size_t i;
  for (i = 0; i < l->n; i++)
    if (strcmp(l->v[i], s) == 0)
      return 1;
  return 0;
}

static int shorter_first(const void *x, const void *y) {
  size_t a = strlen(*(char *const *)x);
  size_t b = strlen(*(char *const *)y);
  return a < b ? -1 : a > b ? 1 : strcmp(*(char *const *)x, *(char *const *)y);
}

/* The innermost writable root holding `path`, or NULL. */
static const char *root_of(const paths_t *roots, const char *path) {
  const char *best = NULL;
  size_t i;
  for (i = 0; i < roots->n; i++)
    if (inside(path, roots->v[i]) &&
        (best == NULL || strlen(roots->v[i]) > strlen(best)))
      best = roots->v[i];
  return best;
}

/* S-6: bind each read-only path (resolved) read-only over the writable
 * binds, after every directory between its writable root and it is
 * bound onto itself: a mount point cannot be renamed, removed or
 * replaced from inside (EBUSY), so neither the path nor a parent of it
 * can be moved away and something else put in its place.  Paths outside
 * every root (read-only already) and paths inside another read-only
 * path are left out.  Shallow before deep: a later bind covers an
 * earlier one inside it. */
/* Keep the paths of `in` that lie in a writable root and not inside a
 * path of `in` or `also` (read-only already), in `out`. */
static void uncovered(argv_t *a, const paths_t *roots, const paths_t *in,
                      const paths_t *also, paths_t *out) {
  size_t i;
  size_t j;
  int covered;

  for (i = 0; i < in->n && a->err == 0; i++) {
    covered = root_of(roots, in->v[i]) == NULL;
    for (j = 0; j < in->n && !covered; j++)
      covered = j != i && inside(in->v[i], in->v[j]) &&
                (strcmp(in->v[i], in->v[j]) != 0 || j < i);
    for (j = 0; also != NULL && j < also->n && !covered; j++)
      covered = inside(in->v[i], also->v[j]);
    if (!covered)
      paths_add(a, out, in->v[i], strlen(in->v[i]));
  }
}

/* Each parent strictly between `path`'s writable root and it, in pins. */
static void pin_parents(argv_t *a, const paths_t *roots, char *path,
                        paths_t *pins) {
  const char *root = root_of(roots, path);
  size_t k;

  if (root == NULL || strlen(path) <= strlen(root))
    return; /* the root itself */
  for (k = strlen(root) + 1; path[k] != '\0'; k++) {
    if (path[k] != '/')
      continue;
    path[k] = '\0';
    if (!has(pins, path) && !has(roots, path))
      paths_add(a, pins, path, k);
    path[k] = '/';
  }
}

/* S-6: bind each read-only path `ro` (resolved, existing) read-only over
 * the writable binds, make each path of `empty` (missing, its parent
 * existing) an empty read-only directory and each of `nul` an empty
 * read-only file, after every directory between
 * a path's writable root and it is bound onto itself: a mount point
 * cannot be renamed, removed or replaced from inside (EBUSY), so neither
 * the path nor a parent of it can be moved away and something else put
 * in its place.  Paths outside every root (read-only already) and paths
 * inside another read-only path are left out.  Shallow before deep: a
 * later bind covers an earlier one inside it. */
static void protect(argv_t *a, const paths_t *roots, const paths_t *ro,
                    const paths_t *empty, const paths_t *nul) {
  paths_t keep = {0};
  paths_t keep_empty = {0};
  paths_t keep_nul = {0};
  paths_t pins = {0};
  size_t i;

  uncovered(a, roots, ro, NULL, &keep);
  uncovered(a, roots, empty, &keep, &keep_empty);
  uncovered(a, roots, nul, &keep, &keep_nul);
  for (i = 0; i < keep.n && a->err == 0; i++)
    pin_parents(a, roots, keep.v[i], &pins);
  for (i = 0; i < keep_empty.n && a->err == 0; i++)
    pin_parents(a, roots, keep_empty.v[i], &pins);
  for (i = 0; i < keep_nul.n && a->err == 0; i++)
    pin_parents(a, roots, keep_nul.v[i], &pins);
  if (a->err == 0) {
    /* qsort wants a base even for no elements (UBSan: a NULL one). */
    if (pins.n > 1)
      qsort(pins.v, pins.n, sizeof(pins.v[0]), shorter_first);
    if (keep.n > 1)
      qsort(keep.v, keep.n, sizeof(keep.v[0]), shorter_first);
  }
  for (i = 0; i < pins.n; i++) {
    push(a, "--bind");
    push(a, pins.v[i]);
    push(a, pins.v[i]);
  }
  for (i = 0; i < keep.n; i++) {
    push(a, "--ro-bind");
    push(a, keep.v[i]);
    push(a, keep.v[i]);
  }
  for (i = 0; i < keep_empty.n; i++) {
    push(a, "--tmpfs");
    push(a, keep_empty.v[i]);
    push(a, "--remount-ro");
    push(a, keep_empty.v[i]);
  }
  /* A missing file git would read: an empty one, read-only (bwrap makes
   * the mount point, an empty file that stays in the work tree). */
  for (i = 0; i < keep_nul.n; i++) {
    push(a, "--ro-bind");
    push(a, "/dev/null");
    push(a, keep_nul.v[i]);
  }
  paths_free(&pins);
  paths_free(&keep);
  paths_free(&keep_empty);
  paths_free(&keep_nul);
}

/* ---- S-6: what the host's git runs later ------------------------------- */

/* At most this many submodules of one repository are looked at. */
#define GIT_MODULES_MAX 64
/* At most this much of a config file is read for core.hooksPath. */
#define GIT_CONFIG_MAX (64 * 1024)

/* `dir`/`name` resolved into ro if it exists, into empty (`dir` resolved,
 * then `name`) if it does not and `make` says so. */
static void git_add(argv_t *a, const char *dir, const char *name, int make,
                    paths_t *ro, paths_t *empty) {
  char path[PATH_MAX];
  char real[PATH_MAX];
  struct stat st;
  int n;

  n = snprintf(path, sizeof(path), "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= sizeof(path))
    return;
  if (realpath(path, real) != NULL) {
    paths_add(a, ro, real, strlen(real));
  } else if (make && errno == ENOENT && lstat(path, &st) != 0 &&
             realpath(dir, real) != NULL) {
    n = snprintf(path, sizeof(path), "%s/%s", real, name);
    if (n > 0 && (size_t)n < sizeof(path))
      paths_add(a, empty, path, (size_t)n);
  }
}

/* Each `key = value` of the config file `file`, with its section's name
 * (the first word inside [...], lower case: "core", "include",
 * "includeif"): a plain reading of git's format, a key in any case, a
 * quoted value, a comment after it.  fn returns nonzero to stop. */
typedef int (*git_kv_fn)(void *arg, const char *section, const char *key,
                         const char *value);
static void git_config_each(const char *file, git_kv_fn fn, void *arg) {
  char section[32] = "";
  char *buf;
  char *line;
  char *next;
  char *v;
  ssize_t n;
  int fd;

  fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return;
  buf = uvt__malloc(GIT_CONFIG_MAX + 1);
  if (buf == NULL) {
    close(fd);
    return;
  }
  do
    n = read(fd, buf, GIT_CONFIG_MAX);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) {
    uvt__free(buf);
    return;
  }
  buf[n] = '\0';
  for (line = buf; line != NULL; line = next) {
    char *key;
    size_t klen;
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    while (*line == ' ' || *line == '\t')
      line++;
    if (*line == '[') {
      size_t j = 0;
      line++;
      while (*line == ' ' || *line == '\t')
        line++;
      while (j + 1 < sizeof(section) && line[j] != '\0' && line[j] != ']' &&
             line[j] != ' ' && line[j] != '\t' && line[j] != '"' &&
             line[j] != '.') {
        section[j] = (char)tolower((unsigned char)line[j]);
        j++;
      }
      section[j] = '\0';
      continue;
    }
    key = line;
    klen = strspn(key, "abcdefghijklmnopqrstuvwxyz"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-");
    if (klen == 0)
      continue;
    v = key + klen;
    while (*v == ' ' || *v == '\t')
      v++;
    if (*v++ != '=')
      continue;
    key[klen] = '\0';
    while (*v == ' ' || *v == '\t')
      v++;
    if (*v == '"') {
      char *end = strchr(++v, '"');
      if (end == NULL)
        continue;
      *end = '\0';
    } else {
      size_t len = strcspn(v, "#;");
      while (len > 0 &&
             (v[len - 1] == ' ' || v[len - 1] == '\t' || v[len - 1] == '\r'))
        len--;
      v[len] = '\0';
    }
    if (*v != '\0' && fn(arg, section, key, v) != 0)
      break;
  }
  uvt__free(buf);
}

/* core.hooksPath: the last one wins, as for git. */
static int git_hooks_kv(void *arg, const char *section, const char *key,
                        const char *value) {
  char *out = arg;
  if (strcmp(section, "core") == 0 && strcasecmp(key, "hookspath") == 0 &&
      strlen(value) < PATH_MAX)
    memcpy(out, value, strlen(value) + 1);
  return 0;
}

/* core.hooksPath of the config file `file`, into out (its value as
 * written), or 0 if it sets none. */
static int git_hooks_path(const char *file, char out[PATH_MAX]) {
  out[0] = '\0';
  git_config_each(file, git_hooks_kv, out);
  return out[0] != '\0';
}

/* S-6: the files a config file includes (include.path, includeIf.*.path):
 * git reads them as part of the config, so a task that can write one
 * sets core.fsmonitor or core.hooksPath for the host's git as surely as
 * by writing .git/config.  Each is kept read-only if it exists, and bound
 * to an empty read-only file if it does not (a task must not create it;
 * the empty file is left in the work tree); the files they include in
 * turn too, as git follows them (up to GIT_INCLUDE_DEPTH). */
#define GIT_INCLUDE_DEPTH 4
#define GIT_INCLUDES_MAX 32

typedef struct {
  argv_t *a;
  const char *dir; /* the including file's directory */
  int depth;
  paths_t *ro;
  paths_t *nul;
  int *count;
} git_inc_t;

static void git_includes(argv_t *a, const char *file, int depth, paths_t *ro,
                         paths_t *nul, int *count);

static int git_include_kv(void *arg, const char *section, const char *key,
                          const char *value) {
  git_inc_t *g = arg;
  char path[PATH_MAX];
  char real[PATH_MAX];
  int n;

  if ((strcmp(section, "include") != 0 && strcmp(section, "includeif") != 0) ||
      strcasecmp(key, "path") != 0)
    return 0;
  if (++*g->count > GIT_INCLUDES_MAX)
    return 1;
  if (value[0] == '/')
    n = snprintf(path, sizeof(path), "%s", value);
  else if (value[0] == '~' && value[1] == '/')
    n = expand(value, path) ? (int)strlen(path) : -1;
  else if (value[0] == '~')
    return 0; /* ~user/: another user's file */
  else
    n = snprintf(path, sizeof(path), "%s/%s", g->dir, value);
  if (n <= 0 || (size_t)n >= sizeof(path))
    return 0;
  if (realpath(path, real) != NULL) {
    struct stat st;
    if (stat(real, &st) == 0 && S_ISREG(st.st_mode)) {
      paths_add(g->a, g->ro, real, strlen(real));
      git_includes(g->a, real, g->depth + 1, g->ro, g->nul, g->count);
    }
  } else if (errno == ENOENT) {
    /* Missing: its directory resolved, then its name. */
    char dir[PATH_MAX];
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
      return 0;
    *slash = '\0';
    if (realpath(path, dir) != NULL &&
        (size_t)snprintf(real, sizeof(real), "%s/%s", dir, slash + 1) <
            sizeof(real))
      paths_add(g->a, g->nul, real, strlen(real));
  }
  return 0;
}

static void git_includes(argv_t *a, const char *file, int depth, paths_t *ro,
                         paths_t *nul, int *count) {
  char dir[PATH_MAX];
  char *slash;
  git_inc_t g;

  if (depth > GIT_INCLUDE_DEPTH || *count > GIT_INCLUDES_MAX ||
      strlen(file) >= sizeof(dir))
    return;
  memcpy(dir, file, strlen(file) + 1);
  slash = strrchr(dir, '/');
  if (slash == NULL)
    return;
  *slash = '\0';
  g.a = a;
  g.dir = dir[0] != '\0' ? dir : "/";
  g.depth = depth;
  g.ro = ro;
  g.nul = nul;
  g.count = count;
  git_config_each(file, git_include_kv, &g);
}

/* One git directory (a repository's .git, or a submodule's under
 * .git/modules): its hooks (made empty when missing), config,
 * config.worktree, what its config includes, and the directory its
 * core.hooksPath names (relative: to `top`, the work tree). */
static void git_dir(argv_t *a, const char *gitdir, const char *top, paths_t *ro,
                    paths_t *empty, paths_t *nul, int *includes) {
  char path[PATH_MAX];
  char hooks[PATH_MAX];
  int n;

  git_add(a, gitdir, "hooks", 1, ro, empty);
  git_add(a, gitdir, "config", 0, ro, empty);
  git_add(a, gitdir, "config.worktree", 0, ro, empty);
  n = snprintf(path, sizeof(path), "%s/config", gitdir);
  if (n <= 0 || (size_t)n >= sizeof(path))
    return;
  git_includes(a, path, 0, ro, nul, includes);
  n = snprintf(path, sizeof(path), "%s/config.worktree", gitdir);
  if (n > 0 && (size_t)n < sizeof(path))
    git_includes(a, path, 0, ro, nul, includes);
  n = snprintf(path, sizeof(path), "%s/config", gitdir);
  if (top != NULL && git_hooks_path(path, hooks)) {
    if (hooks[0] == '/')
      git_add(a, "/", hooks + 1, 0, ro, empty);
    else if (hooks[0] == '~' && hooks[1] == '/' && expand(hooks, path))
      git_add(a, "/", path + 1, 0, ro, empty);
    else if (hooks[0] != '~')
      git_add(a, top, hooks, 0, ro, empty);
  }
}

/* The submodules' git directories under `dir` (a .git/modules, or one
 * level of a submodule name with '/' in it, or a submodule's own
 * modules: nested submodules), each as git_dir, at most GIT_MODULES_MAX
 * in all and GIT_MODULES_DEPTH levels deep. */
#define GIT_MODULES_DEPTH 8
static void git_modules(argv_t *a, const char *dir, int depth, paths_t *ro,
                        paths_t *empty, paths_t *nul, int *count,
                        int *includes) {
  struct dirent *e;
  struct stat st;
  DIR *d;

  if (depth > GIT_MODULES_DEPTH || (d = opendir(dir)) == NULL)
    return;
  while ((e = readdir(d)) != NULL && *count < GIT_MODULES_MAX) {
    char mod[PATH_MAX];
    char head[PATH_MAX];
    int n;
    if (e->d_name[0] == '.')
      continue;
    n = snprintf(mod, sizeof(mod), "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof(mod) || lstat(mod, &st) != 0 ||
        !S_ISDIR(st.st_mode))
      continue;
    n = snprintf(head, sizeof(head), "%s/HEAD", mod);
    if (n > 0 && (size_t)n < sizeof(head) &&
        (lstat(head, &st) == 0 ||
         (snprintf(head, sizeof(head), "%s/config", mod) > 0 &&
          lstat(head, &st) == 0))) {
      /* A git directory: a submodule's (its hooksPath, relative to its
       * own work tree, is not known here: its config stays read-only). */
      (*count)++;
      git_dir(a, mod, NULL, ro, empty, nul, includes);
      n = snprintf(head, sizeof(head), "%s/modules", mod);
      if (n > 0 && (size_t)n < sizeof(head))
        git_modules(a, head, depth + 1, ro, empty, nul, count, includes);
    } else {
      /* A part of a submodule's name ("libs/json"). */
      git_modules(a, mod, depth + 1, ro, empty, nul, count, includes);
    }
  }
  closedir(d);
}

/* The user's own git config files (~/.gitconfig, $XDG_CONFIG_HOME/git/
 * config or ~/.config/git/config, /etc/gitconfig) lie outside the
 * writable places, but what they include may not. */
static void git_user_includes(argv_t *a, paths_t *ro, paths_t *nul,
                              int *includes) {
  const char *xdg = getenv("XDG_CONFIG_HOME");
  char path[PATH_MAX];

  if (expand("~/.gitconfig", path))
    git_includes(a, path, 0, ro, nul, includes);
  if (xdg != NULL && xdg[0] == '/' &&
      (size_t)snprintf(path, sizeof(path), "%s/git/config", xdg) < sizeof(path))
    git_includes(a, path, 0, ro, nul, includes);
  else if (expand("~/.config/git/config", path))
    git_includes(a, path, 0, ro, nul, includes);
  git_includes(a, "/etc/gitconfig", 0, ro, nul, includes);
}

/* The repository at writable root `root` (resolved): what its git runs
 * later, into ro (existing paths), empty (a missing hooks directory,
 * made empty and read-only) and nul (a missing included config file,
 * bound to an empty read-only file). */
static void git_root(argv_t *a, const char *root, paths_t *ro, paths_t *empty,
                     paths_t *nul, int *includes) {
  char gitdir[PATH_MAX];
  char path[PATH_MAX];
  struct stat st;
  int count = 0;
  int n;

  n = snprintf(gitdir, sizeof(gitdir), "%s/.git", root);
  if (n < 0 || (size_t)n >= sizeof(gitdir) || lstat(gitdir, &st) != 0)
    return;
  if (S_ISREG(st.st_mode)) {
    /* A link to the git directory ("gitdir: ..."): repointing it at one
     * the task made would hand the host's git the task's hooks. */
    paths_add(a, ro, gitdir, strlen(gitdir));
    return;
  }
  if (!S_ISDIR(st.st_mode))
    return;
  git_dir(a, gitdir, root, ro, empty, nul, includes);
  n = snprintf(path, sizeof(path), "%s/modules", gitdir);
  if (n > 0 && (size_t)n < sizeof(path))
    git_modules(a, path, 0, ro, empty, nul, &count, includes);
}

/* The writable binds (the workspace with FS_WORKSPACE, writable[]) and,
 * over them, what stays read-only (readonly[]). */
static void binds(argv_t *a, const uvt_sandbox_t *sb, const char *ws) {
  paths_t roots = {0};
  paths_t ro = {0};
  paths_t empty = {0};
  paths_t nul = {0};
  const char *const *w;
  char real[PATH_MAX];
  int includes = 0;
  size_t i;

  push(a, sb->fs == UVT_SANDBOX_FS_WORKSPACE ? "--bind" : "--ro-bind");
  push(a, ws);
  push(a, ws);
  if (sb->fs == UVT_SANDBOX_FS_WORKSPACE)
    paths_add(a, &roots, ws, strlen(ws));
  for (w = sb->writable; w != NULL && *w != NULL; w++) {
    if (realpath(*w, real) == NULL)
      continue; /* checked before: gone in between; bwrap would fail */
    push(a, "--bind");
    push(a, real);
    push(a, real);
    paths_add(a, &roots, real, strlen(real));
  }
  for (w = sb->readonly; w != NULL && *w != NULL; w++)
    if (realpath(*w, real) != NULL)
      paths_add(a, &ro, real, strlen(real));
  /* S-6: each writable root's repository (not deeper: see the header),
   * and what the user's own git config includes. */
  for (i = 0; !sb->writable_git && i < roots.n; i++)
    git_root(a, roots.v[i], &ro, &empty, &nul, &includes);
  if (!sb->writable_git && roots.n > 0)
    git_user_includes(a, &ro, &nul, &includes);
  if (roots.n > 0 && (ro.n > 0 || empty.n > 0 || nul.n > 0))
    protect(a, &roots, &ro, &empty, &nul);
  paths_free(&roots);
  paths_free(&ro);
  paths_free(&empty);
  paths_free(&nul);
}

/* Everything up to and including "--" and the inner `env`.  `cwd` NULL:
 * the probe (no binds, no chdir); else `ws` is the workspace (S-5), both
 * resolved. */
static void base(argv_t *a, const char *bwrap, const uvt_sandbox_t *sb,
                 const char *ws, const char *cwd, const char *helper) {
  push(a, env_path());
  push(a, "--ignore-signal=" SIGS);
  push(a, bwrap);
  push(a, "--ro-bind");
  push(a, "/");
  push(a, "/");
  push(a, "--dev");
  push(a, "/dev");
  if (helper != NULL) {
    push(a, "--ro-bind");
    push(a, helper);
    push(a, HELPER_INSIDE);
  }
  push(a, "--proc");
  push(a, "/proc");
  push(a, "--tmpfs");
  push(a, "/tmp");
  if (cwd != NULL) {
    binds(a, sb, ws);
    hide_all(a, sb);
  }
  push(a, "--unshare-pid");
  push(a, "--unshare-ipc");
  if (sb->network != UVT_SANDBOX_NET_HOST)
    push(a, "--unshare-net");
  if (geteuid() == 0) {
    push(a, "--cap-drop");
    push(a, "ALL");
  }
  if (cwd != NULL) {
    push(a, "--chdir");
    push(a, cwd);
  }
  push(a, "--");
  if (helper != NULL) {
    push(a, HELPER_INSIDE);
    return;
  }
  push(a, env_path());
  push(a, "--default-signal=" SIGS);
}

/* ---- S-3: can a sandbox be made here? --------------------------------- */

/* The probe's command exits with this status inside the sandbox. */
#define PROBE_STATUS 73
#define PROBE_STATUS_STR "73"

/* Run the probe; 0, or UV_ENOTSUP with the reason in why. */
static int probe(const char *bwrap, const uvt_sandbox_t *sb, char *why,
                 size_t size) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  argv_t a = {0};
  sigset_t all;
  sigset_t none;
  int errp[2];
  size_t got = 0;
  ssize_t n;
  pid_t pid;
  int status = 0;
  int rc;

  /* S-3: a command whose own status shows it ran inside: a program that
   * is not bwrap (/bin/true) would otherwise pass by exiting 0. */
  base(&a, bwrap, sb, NULL, NULL, NULL);
  push(&a, "sh");
  push(&a, "-c");
  push(&a, "exit " PROBE_STATUS_STR);
  if (a.err != 0) {
    uvt__sandbox_argv_free(a.v);
    return a.err;
  }
  if (pipe2(errp, O_CLOEXEC) != 0) {
    rc = UVT__PERR(errno);
    uvt__sandbox_argv_free(a.v);
    return rc;
  }
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
  rc = posix_spawn(&pid, a.v[0], &fa, &attr, a.v, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(errp[1]);
  uvt__sandbox_argv_free(a.v);
  if (rc != 0) {
    close(errp[0]);
    snprintf(why, size, "cannot run %s: %s", env_path(), strerror(rc));
    return UV_ENOTSUP;
  }
  why[0] = '\0';
  for (;;) {
    n = read(errp[0], why + got, size - 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
    if (got == size - 1) {
      char sink[256];
      while (read(errp[0], sink, sizeof(sink)) > 0)
        ; /* up to the end, so bwrap never blocks on a full pipe */
      break;
    }
  }
  why[got] = '\0';
  close(errp[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(status) && WEXITSTATUS(status) == PROBE_STATUS)
    return 0;
  while (got > 0 && (why[got - 1] == '\n' || why[got - 1] == '\r'))
    why[--got] = '\0';
  if (got == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    snprintf(why, size,
             "%s exited 0 and did not run the probe's command: not a bwrap",
             bwrap);
  else if (got == 0)
    snprintf(why, size, "%s exited with status %d", bwrap,
             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return UV_ENOTSUP;
}

/* M-TOOLS-18: `a`, `b` and `c` one after the other in `dst`, cut to fit
 * (the reason a refusal gives). */
static void why_set(char *dst, size_t size, const char *a, const char *b,
                    const char *c) {
  const char *parts[3] = {a, b, c};
  size_t used = 0;
  size_t n;
  int i;

  for (i = 0; i < 3; i++) {
    n = strlen(parts[i]);
    if (n > size - 1 - used)
      n = size - 1 - used;
    memcpy(dst + used, parts[i], n);
    used += n;
  }
  dst[used] = '\0';
}

/* S-2, S-9: the helper, looked for at each sandboxed start (one stat when
 * it is where it was): found, c->sb_helper; not installed, the v3 way
 * (`env`) and one log line saying what is lost; named by
 * $UVTASKS_SANDBOX_HELPER but not there, UV_ENOTSUP (S-3: never a weaker
 * sandbox than asked for without a word). */
static int helper_check(uvt_registry_t *reg, uvt__envcache_t *c) {
  char path[PATH_MAX];
  char *copy;
  int err;

  if (c->sb_helper != NULL && getenv("UVTASKS_SANDBOX_HELPER") == NULL &&
      is_exec(c->sb_helper))
    return 0;
  err = find_helper(path);
  if (err == UV_ENAMETOOLONG)
    return err;
  if (err == UV_ENOENT) {
    /* M-TOOLS-18: kept for the tool result, not only logged. */
    why_set(c->sb_why, sizeof(c->sb_why), "UVTASKS_SANDBOX_HELPER names ",
            path, ", which is not a program that can be run");
    uvt_log(reg, UVT_LOG_ERROR, "sandbox unavailable: %s", c->sb_why);
    return UV_ENOTSUP;
  }
  uvt__free(c->sb_helper);
  c->sb_helper = NULL;
  if (err != 0) {
    if (!c->sb_helper_warned)
      uvt_log(reg, UVT_LOG_WARN,
              "sandbox: no uvtasks-sandbox at %s (set UVTASKS_SANDBOX_HELPER): "
              "a sandboxed command's death by signal N reads as exit code "
              "128+N, and a sandbox outlives a host killed without a guardian",
              path);
    c->sb_helper_warned = 1;
    return 0;
  }
  copy = uvt__malloc(strlen(path) + 1);
  if (copy == NULL)
    return UV_ENOMEM;
  memcpy(copy, path, strlen(path) + 1);
  c->sb_helper = copy;
  return 0;
}

int uvt__sandbox_check(uvt_registry_t *reg, uvt__envcache_t *c,
                       const uvt_sandbox_t *sb) {
  const char *const *w;
  char bwrap[PATH_MAX];
  char why[512];
  struct stat st;
  int net;
  int err;

  if ((sb->fs != UVT_SANDBOX_FS_READONLY &&
       sb->fs != UVT_SANDBOX_FS_WORKSPACE) ||
      (sb->network != UVT_SANDBOX_NET_NONE &&
       sb->network != UVT_SANDBOX_NET_HOST))
    return UV_EINVAL;
  for (w = sb->writable; w != NULL && *w != NULL; w++) {
    if ((*w)[0] == '\0')
      return UV_EINVAL;
    if (strlen(*w) >= PATH_MAX)
      return UV_ENAMETOOLONG;
    if (stat(*w, &st) != 0)
      return UVT__PERR(errno);
  }
  if (sb->workspace != NULL) { /* S-5 */
    if (sb->workspace[0] == '\0')
      return UV_EINVAL;
    if (strlen(sb->workspace) >= PATH_MAX)
      return UV_ENAMETOOLONG;
    if (stat(sb->workspace, &st) != 0)
      return UVT__PERR(errno);
    if (!S_ISDIR(st.st_mode))
      return UV_ENOTDIR;
  }
  for (w = sb->readonly; w != NULL && *w != NULL; w++) { /* S-6 */
    if ((*w)[0] == '\0')
      return UV_EINVAL;
    if (strlen(*w) >= PATH_MAX)
      return UV_ENAMETOOLONG;
    if (stat(*w, &st) != 0)
      return UVT__PERR(errno);
  }
  /* The bwrap found last, while the variables that chose it are the same
   * strings and it is still there (one stat instead of a PATH search). */
  if (c->sb_bwrap != NULL && c->sb_state[sb->network == UVT_SANDBOX_NET_HOST] &&
      getenv("UVTASKS_BWRAP") == c->sb_env_seen &&
      getenv("PATH") == c->sb_path_seen && is_exec(c->sb_bwrap)) {
    if (c->sb_state[sb->network == UVT_SANDBOX_NET_HOST] < 0)
      return UV_ENOTSUP;
    return helper_check(reg, c);
  }
  err = find_bwrap(bwrap);
  if (err == UV_ENAMETOOLONG)
    return err;
  if (err != 0) {
    /* M-TOOLS-18: kept for the tool result, not only logged. */
    why_set(c->sb_why, sizeof(c->sb_why), "no bwrap at ", bwrap,
            " (install bubblewrap, or point UVTASKS_BWRAP at it)");
    uvt_log(reg, UVT_LOG_ERROR, "sandbox unavailable: %s", c->sb_why);
    return UV_ENOTSUP;
  }
  /* A different bwrap than the one probed: probe again. */
  if (c->sb_bwrap == NULL || strcmp(c->sb_bwrap, bwrap) != 0) {
    char *copy = uvt__malloc(strlen(bwrap) + 1);
    if (copy == NULL)
      return UV_ENOMEM;
    memcpy(copy, bwrap, strlen(bwrap) + 1);
    uvt__free(c->sb_bwrap);
    c->sb_bwrap = copy;
    c->sb_state[0] = c->sb_state[1] = 0;
  }
  c->sb_env_seen = getenv("UVTASKS_BWRAP");
  c->sb_path_seen = getenv("PATH");
  net = sb->network == UVT_SANDBOX_NET_HOST;
  err = helper_check(reg, c);
  if (err != 0)
    return err;
  if (c->sb_state[net] == 0) {
    err = probe(bwrap, sb, why, sizeof(why));
    if (err == UV_ENOMEM)
      return err;
    c->sb_state[net] = err == 0 ? 1 : -1;
    if (err != 0) {
      why_set(c->sb_why, sizeof(c->sb_why), why, "", "");
      uvt_log(reg, UVT_LOG_ERROR, "sandbox unavailable: %s", why);
    }
  }
  return c->sb_state[net] > 0 ? 0 : UV_ENOTSUP;
}

/* ---- the leader's argv ------------------------------------------------- */

/* S-5: is the resolved `cwd` inside the resolved workspace `ws` or one of
 * the writable paths? */
static int cwd_allowed(const uvt_sandbox_t *sb, const char *ws,
                       const char *cwd) {
  const char *const *w;
  char real[PATH_MAX];

  if (inside(cwd, ws))
    return 1;
  for (w = sb->writable; w != NULL && *w != NULL; w++)
    if (realpath(*w, real) != NULL && inside(cwd, real))
      return 1;
  return 0;
}

int uvt__sandbox_wrap(uvt__envcache_t *c, const uvt_sandbox_t *sb,
                      const char *cwd, const char *file, char *const *argv,
                      char ***out, int *status_rd, int *status_wr) {
  char real[PATH_MAX];
  char ws[PATH_MAX];
  argv_t a = {0};
  int fds[2];
  int moved;
  size_t i;

  *out = NULL;
  *status_rd = -1;
  *status_wr = -1;
  if (c->sb_bwrap == NULL)
    return UV_ENOTSUP; /* uvt__sandbox_check() first */
  if (realpath(cwd != NULL ? cwd : ".", real) == NULL)
    return UVT__PERR(errno);
  if (sb->workspace != NULL) {
    /* S-5: the workspace is the host's; the cwd only where the command
     * starts, and only inside what is writable anyway. */
    if (realpath(sb->workspace, ws) == NULL)
      return UVT__PERR(errno);
    if (!cwd_allowed(sb, ws, real))
      return UV_EPERM;
  } else {
    memcpy(ws, real, strlen(real) + 1);
  }
  base(&a, c->sb_bwrap, sb, ws, real, c->sb_helper);
  push(&a, file);
  for (i = 1; argv[0] != NULL && argv[i] != NULL; i++)
    push(&a, argv[i]);
  if (a.err != 0) {
    uvt__sandbox_argv_free(a.v);
    return a.err;
  }
  if (c->sb_helper != NULL) {
    /* S-2, S-9: the status pipe and lifeline; the child's end goes to
     * descriptor 3, so it is kept above it here. */
    if (pipe2(fds, O_CLOEXEC) != 0) {
      uvt__sandbox_argv_free(a.v);
      return UVT__PERR(errno);
    }
    moved = fcntl(fds[1], F_DUPFD_CLOEXEC, 4);
    if (moved < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
      int err = UVT__PERR(errno);
      if (moved >= 0)
        close(moved);
      close(fds[0]);
      close(fds[1]);
      uvt__sandbox_argv_free(a.v);
      return err;
    }
    close(fds[1]);
    *status_rd = fds[0];
    *status_wr = moved;
  }
  *out = a.v;
  return 0;
}

/* ---- the command's own status (S-2) ------------------------------------ */

void uvt__sandbox_status(uvt__proc_t *p, int *status) {
  char buf[256];
  size_t got = 0;
  ssize_t n;
  char *rec;
  char *end;
  long v;

  if (p->sb_status_fd < 0)
    return;
  /* Written before the front exited, so before the leader ended: all of
   * it is in the pipe.  The last whole record wins (see
   * uvtasks-sandbox.c). */
  for (;;) {
    n = read(p->sb_status_fd, buf + got, sizeof(buf) - 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
    if (got == sizeof(buf) - 1) {
      /* More than records: keep the tail. */
      memmove(buf, buf + got / 2, got - got / 2);
      got -= got / 2;
    }
  }
  buf[got] = '\0';
  for (rec = buf; (rec = strchr(rec, 'S')) != NULL; rec++) {
    v = strtol(rec + 1, &end, 10);
    if (end != rec + 1 && *end == '\n' && v >= 0 && v <= 0xFFFF)
      *status = (int)v;
  }
}

/* ---- the command's pid ------------------------------------------------- */

/* The first child of `pid` (its main thread's), or 0. */
static pid_t first_child(pid_t pid) {
  char path[64];
  char buf[64];
  ssize_t n;
  int fd;

  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  do
    n = read(fd, buf, sizeof(buf) - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return (pid_t)strtol(buf, NULL, 10);
}

int uvt__sandbox_command_pid(uvt__proc_t *p) {
  uvt__pstat_t st;
  pid_t cur;
  int depth;

  if (p->cmd_pid > 0)
    return (int)p->cmd_pid;
  if (p->reaped)
    return UV_ESRCH;
  /* Down from bwrap's monitor through bwrap's pid 1 and, with the helper,
   * its front and keeper (S-2): the first process that is none of the
   * sandbox's own is the command (`env`, without the helper, becomes the
   * command in place). */
  cur = p->pid;
  for (depth = 0; depth < 4; depth++) {
    cur = first_child(cur);
    if (cur <= 0 || uvt__pstat_read(cur, &st) != 0)
      return 0;
    if (!st.bwrap) {
      p->cmd_pid = cur;
      return (int)cur;
    }
  }
  return 0;
}
