/* Output kept where a model can read it (M-TOOLS-10): with a spill
 * directory, what a result leaves out (M-TOOLS-8) and what the output cap
 * drops (the process producer's on_drop) are appended to one file per
 * task, DIR/<id>.log, and the result names the file and byte ranges.
 *
 * The directory must be the user's own and closed to everyone else (a
 * directory, not a link, owned by the effective user, no group or other
 * permission bits); it is made 0700 if it does not exist.  Files are 0600,
 * opened without following links, emptied at a task's first spill, and
 * never grow past spill_max_bytes (what would is not kept, and the note
 * says so).  Writes are plain write(2) calls on the loop thread: a local
 * file, appended in the chunks the output arrives in. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools-int.h"

/* What the tools know of one task's file. */
typedef struct {
  struct uvt__link link; /* on the tools' spills_ */
  char id[UVT_ID_MAX];
  uint64_t size;  /* bytes in the file */
  uint64_t shown; /* the file's size when the last result named it */
  int full;       /* something was not kept: spill_max_bytes */
} spill_t;

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

static spill_t *spill_find(uvt_tools_t *tools, const char *id, int make) {
  struct uvt__link *n;
  spill_t *s;

  for (n = tools->spills_.next; n != &tools->spills_; n = n->next) {
    s = uvt__container_of(n, spill_t, link);
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
  uvt__list_insert_tail(&tools->spills_, &s->link);
  return s;
}

void uvt__spill_free(uvt_tools_t *tools) {
  struct uvt__link *n;

  while ((n = uvt__list_pop(&tools->spills_)) != NULL)
    uvt__tools_free(uvt__container_of(n, spill_t, link));
}

/* The file's path into `path`: 0, or -1 if it does not fit. */
static int spill_path(const uvt_tools_t *tools, const char *id, char *path,
                      size_t size) {
  int n = snprintf(path, size, "%s/%s.log", tools->spill_dir_, id);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Append `len` bytes to the task's file, as much as the bound allows. */
static void spill_append(uvt_tools_t *tools, spill_t *s, const char *bytes,
                         size_t len) {
  char path[4096];
  ssize_t w;
  int fd;
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC;

  if (len == 0)
    return;
  if (s->size + len > tools->spill_max_bytes_) {
    s->full = 1;
    if (s->size >= tools->spill_max_bytes_)
      return;
    len = (size_t)(tools->spill_max_bytes_ - s->size);
  }
  if (spill_path(tools, s->id, path, sizeof(path)) != 0) {
    s->full = 1;
    return;
  }
  /* A task's first spill starts the file afresh (a file of an earlier
   * server with the same ids). */
  if (s->size == 0)
    flags |= O_TRUNC;
  fd = open(path, flags, 0600);
  if (fd < 0) {
    s->full = 1;
    return;
  }
  while (len > 0) {
    w = write(fd, bytes, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      s->full = 1;
      break;
    }
    s->size += (uint64_t)w;
    bytes += w;
    len -= (size_t)w;
  }
  close(fd);
}

void uvt__spill_drop_cb(const char *id, const char *bytes, size_t len,
                        void *data) {
  uvt_tools_t *tools = data;
  spill_t *s;

  if (tools->spill_dir_ == NULL)
    return;
  s = spill_find(tools, id, 1);
  if (s != NULL)
    spill_append(tools, s, bytes, len);
}

void uvt__spill_result(uvt_tools_t *tools, const char *id, const char *left,
                       size_t left_len, uvt__text_t *t) {
  spill_t *s;
  uint64_t dropped_at, left_at;
  char path[4096];

  if (tools->spill_dir_ == NULL)
    return;
  s = spill_find(tools, id, left_len > 0);
  if (s == NULL)
    return;
  dropped_at = s->shown;
  left_at = s->size;
  spill_append(tools, s, left, left_len);
  if (s->size == s->shown)
    return;
  if (spill_path(tools, id, path, sizeof(path)) != 0)
    return;
  uvt__text_str(t, "(kept in ");
  uvt__text_oneline(t, path, sizeof(path));
  uvt__text_str(t, ":");
  if (left_at > dropped_at)
    uvt__text_printf(t, " bytes %llu-%llu as the output cap dropped them",
                     (unsigned long long)dropped_at,
                     (unsigned long long)left_at - 1);
  if (s->size > left_at)
    uvt__text_printf(t, "%s bytes %llu-%llu that this result left out",
                     left_at > dropped_at ? ";" : "",
                     (unsigned long long)left_at,
                     (unsigned long long)s->size - 1);
  if (s->full)
    uvt__text_printf(t,
                     "; the file is full at %llu bytes, so some is not "
                     "kept",
                     (unsigned long long)tools->spill_max_bytes_);
  uvt__text_str(t, ")\n");
  s->shown = s->size;
}
