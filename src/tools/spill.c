/* What the tools keep of each task's raw output (M-TOOLS-17, M-TOOLS-10,
 * M-MCP-16, S-7).
 *
 * Every task the tools start hands each byte it reads to
 * uvt__spill_tee_cb() (the process producer's on_tee), per stream and in
 * order.  The tools count the bytes and lines of each stream there (a
 * result's line numbers and byte ranges come from these counts), and with
 * a spill directory they append the bytes to one file per stream:
 * DIR/<id>.log (stdout, or the one stream of a terminal or of
 * merge_stderr) and DIR/<id>.stderr.log.  A file is the stream's raw
 * bytes, once, in order, with no marker of ours: line N of the file is
 * line N of the output.
 *
 * S-7: a task may write the directory (it runs as the same user), so no
 * name in it is trusted.  The directory is opened once at attach
 * (O_DIRECTORY | O_NOFOLLOW); each file is created relative to that
 * descriptor with O_CREAT | O_EXCL | O_NOFOLLOW (whatever a task planted at
 * the name, a symlink or a hard link to one of the user's files, is
 * unlinked first, never opened), and its device and inode are kept: while
 * the task runs the descriptor stays open, and a later append (what a
 * task's leftovers write after its end, P-OUT-6) reopens the name with
 * O_NOFOLLOW only to find the same inode, else the stream is not written
 * again.  Renaming the directory or replacing it by a symlink changes
 * nothing: the descriptor is the directory that was checked.
 *
 * Bounds: spill_max_bytes per file (past it the file stops growing and
 * results say so), spill_max_total for all of them (past it the oldest
 * task's files are removed, never the one being written, and a notice to
 * its owner says so).  A task's files go with its record (forget,
 * retention) and all of them at detach, unless keep_spill.  Writes are
 * plain write(2) calls on the loop thread, in the chunks the output
 * arrives in. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools-int.h"

static const char *const suffix[2] = {".log", ".stderr.log"};

int uvt__spill_check_dir(const char *dir) {
  struct stat st;

  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return -errno;
  if (lstat(dir, &st) != 0)
    return -errno;
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
    return UV_EPERM;
  return 0;
}

/* S-7: the directory once, as checked: not a link, ours, closed to
 * others; the descriptor is what every file is made in. */
int uvt__spill_open(uvt_tools_t *tools, const char *dir) {
  struct stat st;
  int err = uvt__spill_check_dir(dir);
  int fd;

  if (err != 0)
    return err;
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ELOOP || errno == ENOTDIR ? UV_EPERM : -errno;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    close(fd);
    return UV_EPERM;
  }
  tools->spill_fd_ = fd;
  return 0;
}

static void spill_kept_cb(uvt__kept_t *k, uvt_tools_t *tools, int dropped);

uvt__spill_t *uvt__spill_find(uvt_tools_t *tools, const char *id, int make) {
  struct uvt__link *n;
  uvt__spill_t *s;

  for (n = tools->spills_.next; n != &tools->spills_; n = n->next) {
    s = uvt__container_of(n, uvt__spill_t, kept.link);
    if (strcmp(s->id, id) == 0)
      return s;
  }
  if (!make || strlen(id) >= UVT_ID_MAX)
    return NULL;
  s = uvt__tools_malloc(sizeof(*s));
  if (s == NULL)
    return NULL;
  memset(s, 0, sizeof(*s));
  strcpy(s->id, id);
  s->fd[0] = s->fd[1] = -1;
  s->seq = ++tools->spill_seq_;
  uvt__tools_keep_state(tools, &tools->spills_, &s->kept, s->id, spill_kept_cb);
  return s;
}

/* The file of stream `k` of `s` into `name`: 0, or -1 if it does not fit. */
static int spill_name(const uvt__spill_t *s, int k, char *name, size_t size) {
  int n = snprintf(name, size, "%s%s", s->id, suffix[k]);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

int uvt__spill_path(const uvt_tools_t *tools, const uvt__spill_t *s, int k,
                    char *path, size_t size) {
  int n = snprintf(path, size, "%s/%s%s", tools->spill_dir_, s->id, suffix[k]);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

static void close_fd(uvt__spill_t *s, int k) {
  if (s->fd[k] >= 0)
    close(s->fd[k]);
  s->fd[k] = -1;
}

/* Remove the files of `s` (they go, its counts stay). */
static void spill_remove(uvt_tools_t *tools, uvt__spill_t *s) {
  char name[UVT_ID_MAX + 16];
  struct stat st;
  int k;

  for (k = 0; k < 2; k++) {
    close_fd(s, k);
    if (!s->made[k] || tools->spill_fd_ < 0)
      continue;
    /* Only the file we made: a name a task replaced is its own. */
    if (spill_name(s, k, name, sizeof(name)) == 0 &&
        fstatat(tools->spill_fd_, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode) && st.st_dev == s->dev[k] && st.st_ino == s->ino[k])
      unlinkat(tools->spill_fd_, name, 0);
    s->made[k] = 0;
    tools->spill_total_ -=
        s->size[k] <= tools->spill_total_ ? s->size[k] : tools->spill_total_;
  }
  s->gone = 1;
}

/* S-7: make the file of stream k: whatever is at its name goes first
 * (never followed, never opened), then O_EXCL.  0, or -1 (not kept). */
static int spill_make(uvt_tools_t *tools, uvt__spill_t *s, int k) {
  char name[UVT_ID_MAX + 16];
  struct stat st;
  int tries;
  int fd = -1;

  if (spill_name(s, k, name, sizeof(name)) != 0)
    return -1;
  for (tries = 0; tries < 3 && fd < 0; tries++) {
    fd = openat(tools->spill_fd_, name,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
                0600);
    if (fd < 0 && errno == EEXIST)
      unlinkat(tools->spill_fd_, name, 0);
    else if (fd < 0)
      return -1;
  }
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  s->fd[k] = fd;
  s->dev[k] = st.st_dev;
  s->ino[k] = st.st_ino;
  s->made[k] = 1;
  return 0;
}

/* Our file of stream k, open: the descriptor kept, or the name reopened
 * without following links and checked to be the same inode. */
static int spill_fd(uvt_tools_t *tools, uvt__spill_t *s, int k) {
  char name[UVT_ID_MAX + 16];
  struct stat st;
  int fd;

  if (s->fd[k] >= 0)
    return s->fd[k];
  if (!s->made[k])
    return spill_make(tools, s, k) == 0 ? s->fd[k] : -1;
  if (spill_name(s, k, name, sizeof(name)) != 0)
    return -1;
  fd = openat(tools->spill_fd_, name,
              O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != s->dev[k] ||
      st.st_ino != s->ino[k]) {
    close(fd);
    return -1;
  }
  s->fd[k] = fd;
  return fd;
}

/* M-MCP-16: make room for `len` more bytes in all the files, removing the
 * oldest tasks' files (not `keep`'s).  Returns how many may be written. */
static size_t spill_room(uvt_tools_t *tools, uvt__spill_t *keep, size_t len) {
  struct uvt__link *n;
  uvt__spill_t *old;
  uvt__text_t t;
  char *line;
  uint64_t freed;

  while (tools->spill_total_ + len > tools->spill_max_total_) {
    old = NULL;
    for (n = tools->spills_.next; n != &tools->spills_; n = n->next) {
      uvt__spill_t *s = uvt__container_of(n, uvt__spill_t, kept.link);
      if (s != keep && !s->gone && (s->made[0] || s->made[1]) &&
          (old == NULL || s->seq < old->seq))
        old = s;
    }
    if (old == NULL)
      break;
    freed = old->size[0] + old->size[1];
    spill_remove(tools, old);
    if (tools->notice_cb_ != NULL && old->owner != NULL) {
      uvt__text_init(&t);
      uvt__text_printf(&t,
                       "Removed the spill files of %s (%llu bytes) to keep "
                       "the spill directory within %llu bytes; its output "
                       "is no longer on disk.",
                       old->id, (unsigned long long)freed,
                       (unsigned long long)tools->spill_max_total_);
      line = uvt__text_take(&t);
      if (line != NULL) {
        tools->notice_cb_(tools, old->owner, line);
        uvt__tools_free(line);
      }
    }
  }
  if (tools->spill_total_ >= tools->spill_max_total_)
    return 0;
  return tools->spill_max_total_ - tools->spill_total_ < len
             ? (size_t)(tools->spill_max_total_ - tools->spill_total_)
             : len;
}

static void spill_write(uvt_tools_t *tools, uvt__spill_t *s, int k,
                        const char *bytes, size_t len) {
  size_t room;
  ssize_t w;
  int fd;

  if (s->full[k] || s->gone || len == 0)
    return;
  if (s->size[k] + len > tools->spill_max_bytes_) {
    s->full[k] = 1;
    if (s->size[k] >= tools->spill_max_bytes_)
      return;
    len = (size_t)(tools->spill_max_bytes_ - s->size[k]);
  }
  room = spill_room(tools, s, len);
  if (room < len)
    s->full[k] = 1;
  len = room;
  fd = len > 0 ? spill_fd(tools, s, k) : -1;
  if (fd < 0) {
    s->full[k] = 1;
    return;
  }
  while (len > 0) {
    w = write(fd, bytes, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      s->full[k] = 1;
      break;
    }
    s->size[k] += (uint64_t)w;
    tools->spill_total_ += (uint64_t)w;
    bytes += w;
    len -= (size_t)w;
  }
  /* After the task's end (P-OUT-6: its leftovers write on), the name is
   * reopened for each chunk rather than held. */
  if (s->ended)
    close_fd(s, k);
}

int uvt__spill_read_fd(uvt_tools_t *tools, uvt__spill_t *s, int k) {
  char name[UVT_ID_MAX + 16];
  struct stat st;
  int fd;

  if (tools->spill_fd_ < 0 || !s->made[k] ||
      spill_name(s, k, name, sizeof(name)))
    return -1;
  fd = openat(tools->spill_fd_, name,
              O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != s->dev[k] ||
      st.st_ino != s->ino[k]) {
    close(fd);
    return -1;
  }
  return fd;
}

void uvt__spill_tee_cb(const char *id, int stream, const char *bytes,
                       size_t len, void *data) {
  uvt_tools_t *tools = data;
  uvt__spill_t *s;
  const char *p;
  const char *end = bytes + len;
  int k = stream ? 1 : 0;

  /* A task still writing after detach: nobody reads it. */
  if (!uvt__tools_attached(tools))
    return;
  s = uvt__spill_find(tools, id, 1);
  if (s == NULL)
    return;
  /* The counts every result's line numbers and ranges come from. */
  s->seen[k] += len;
  for (p = bytes; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
    s->nl[k]++;
  if (tools->spill_fd_ >= 0)
    spill_write(tools, s, k, bytes, len);
}

void uvt__spill_owner(uvt_tools_t *tools, const char *id, uvt_agent_t *owner) {
  uvt__spill_t *s = uvt__spill_find(tools, id, 1);

  if (s != NULL)
    s->owner = owner;
}

static void spill_ended(uvt_tools_t *tools, uvt__spill_t *s) {
  (void)tools;
  s->ended = 1;
  close_fd(s, 0);
  close_fd(s, 1);
}

static void spill_forget(uvt_tools_t *tools, uvt__spill_t *s) {
  if (tools->keep_spill_) {
    close_fd(s, 0);
    close_fd(s, 1);
  } else {
    spill_remove(tools, s);
  }

  uvt__list_remove(&s->kept.link);
  uvt__tools_free(s);
}

/* kept.c: the task ended (its files are not held open, M-TOOLS-17) or
 * its record was dropped (the files go, M-MCP-16). */
static void spill_kept_cb(uvt__kept_t *k, uvt_tools_t *tools, int dropped) {
  uvt__spill_t *s = uvt__container_of(k, uvt__spill_t, kept);

  if (dropped)
    spill_forget(tools, s);
  else
    spill_ended(tools, s);
}

void uvt__spill_free(uvt_tools_t *tools) {
  struct uvt__link *n;
  uvt__spill_t *s;

  while ((n = uvt__list_pop(&tools->spills_)) != NULL) {
    s = uvt__container_of(n, uvt__spill_t, kept.link);
    if (tools->keep_spill_) {
      close_fd(s, 0);
      close_fd(s, 1);
    } else {
      spill_remove(tools, s);
    }
    uvt__tools_free(s);
  }
  if (tools->spill_fd_ >= 0)
    close(tools->spill_fd_);
  tools->spill_fd_ = -1;
}
