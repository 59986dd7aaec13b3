/* The append-only journal (journal.h): lines in a file held by
 * descriptor, torn-line tolerant, compacted by a rename. */
#define _GNU_SOURCE
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"

int (*uvt__journal_fault)(const char *name, int op);

static int fault(const uvt__journal_t *j, int op) {
  int e;
  if (uvt__journal_fault == NULL)
    return 0;
  e = uvt__journal_fault(j->name, op);
  return e > 0 ? -e : e;
}

void uvt__journal_init(uvt__journal_t *j) {
  memset(j, 0, sizeof(*j));
  j->dirfd = -1;
  j->fd = -1;
  j->lock_fd = -1;
}

/* A regular file owned by us (S-7: not a file someone else planted). */
static int check_file(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return -errno;
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
    return -EPERM;
  return 0;
}

static int open_in(int dirfd, const char *name, int flags) {
  int fd;
  do
    fd = openat(dirfd, name,
                flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return -errno;
  return fd;
}

int uvt__journal_open(uvt__journal_t *j, int dirfd, const char *name,
                      int lock) {
  char lockname[sizeof(j->name) + 8];
  int err;

  uvt__journal_init(j);
  if (name == NULL || name[0] == '\0' || strchr(name, '/') != NULL ||
      strlen(name) > sizeof(j->name) - 6)
    return -EINVAL;
  memcpy(j->name, name, strlen(name) + 1);
  j->dirfd = dirfd;
  if (lock) {
    snprintf(lockname, sizeof(lockname), "%s.lock", name);
    if ((j->lock_fd = open_in(dirfd, lockname, O_RDWR)) < 0) {
      err = j->lock_fd;
      j->lock_fd = -1;
      return err;
    }
    if ((err = check_file(j->lock_fd)) != 0)
      goto fail;
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0) {
      err = errno == EWOULDBLOCK ? -EBUSY : -errno;
      goto fail;
    }
  }
  if ((j->fd = open_in(dirfd, name, O_RDWR | O_APPEND)) < 0) {
    err = j->fd;
    j->fd = -1;
    goto fail;
  }
  if ((err = check_file(j->fd)) != 0)
    goto fail;
  return 0;
fail:
  if (j->fd >= 0)
    close(j->fd);
  if (j->lock_fd >= 0)
    close(j->lock_fd);
  j->fd = -1;
  j->lock_fd = -1;
  return err;
}

int uvt__journal_open_path(uvt__journal_t *j, const char *path, int lock) {
  const char *slash;
  char *dir;
  int dirfd;
  int err;

  uvt__journal_init(j);
  if (path == NULL || path[0] == '\0')
    return -EINVAL;
  slash = strrchr(path, '/');
  if (slash == NULL) {
    dir = uvt__strdup(".");
  } else {
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    dir = uvt__malloc(n + 1);
    if (dir != NULL) {
      memcpy(dir, path, n);
      dir[n] = '\0';
    }
  }
  if (dir == NULL)
    return -ENOMEM;
  dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  err = dirfd < 0 ? -errno : 0;
  uvt__free(dir);
  if (err != 0)
    return err;
  err = uvt__journal_open(j, dirfd, slash != NULL ? slash + 1 : path, lock);
  if (err != 0) {
    close(dirfd);
    return err;
  }
  j->owns_dir = 1;
  return 0;
}

void uvt__journal_close(uvt__journal_t *j) {
  if (j->fd >= 0)
    close(j->fd);
  if (j->lock_fd >= 0)
    close(j->lock_fd); /* drops the flock */
  if (j->owns_dir && j->dirfd >= 0)
    close(j->dirfd);
  j->fd = -1;
  j->lock_fd = -1;
  j->dirfd = -1;
  j->owns_dir = 0;
}

/* One write of the whole buffer; a short one is taken back. */
static int write_line(uvt__journal_t *j, const char *buf, size_t n) {
  ssize_t w;
  int err;

  if (j->fd < 0)
    return -EBADF;
  if ((err = fault(j, 'a')) != 0)
    return err;
  do
    w = write(j->fd, buf, n);
  while (w < 0 && errno == EINTR);
  if (w == (ssize_t)n) {
    j->lines++;
    return 0;
  }
  err = w < 0 ? -errno : -ENOSPC;
  if (w > 0) {
    /* A torn line would glue the next one to it: cut it off. */
    off_t end = lseek(j->fd, 0, SEEK_END);
    if (end < w || ftruncate(j->fd, end - w) != 0) {
      /* The file cannot be repaired: no more lines go into it. */
      close(j->fd);
      j->fd = -1;
    }
  }
  return err;
}

int uvt__journal_append(uvt__journal_t *j, const char *line, size_t len) {
  char small[512];
  char *buf = small;
  int err;

  if (len + 1 > sizeof(small) && (buf = uvt__malloc(len + 1)) == NULL)
    return -ENOMEM;
  memcpy(buf, line, len);
  buf[len] = '\n';
  err = write_line(j, buf, len + 1);
  if (buf != small)
    uvt__free(buf);
  return err;
}

int uvt__journal_appendf(uvt__journal_t *j, const char *fmt, ...) {
  char small[512];
  char *buf = small;
  va_list ap;
  int n;
  int err;

  va_start(ap, fmt);
  n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0 || n > 65536)
    return -EINVAL;
  if ((size_t)n >= sizeof(small)) {
    if ((buf = uvt__malloc((size_t)n + 1)) == NULL)
      return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  err = uvt__journal_append(j, buf, (size_t)n);
  if (buf != small)
    uvt__free(buf);
  return err;
}

int uvt__journal_slots(uvt__journal_t *j) {
  int fl;

  if (j->fd < 0)
    return -EBADF;
  fl = fcntl(j->fd, F_GETFL);
  if (fl < 0 || fcntl(j->fd, F_SETFL, fl & ~O_APPEND) != 0)
    return -errno;
  j->slots = 1;
  return 0;
}

int uvt__journal_write_at(uvt__journal_t *j, uint64_t off, const char *buf,
                          size_t len) {
  ssize_t w;
  int err;

  if (j->fd < 0)
    return -EBADF;
  if (!j->slots)
    return -EINVAL; /* O_APPEND would put it at the end */
  if ((err = fault(j, 'w')) != 0)
    return err;
  do
    w = pwrite(j->fd, buf, len, (off_t)off);
  while (w < 0 && errno == EINTR);
  if (w == (ssize_t)len)
    return 0;
  return w < 0 ? -errno : -EIO;
}

int uvt__journal_sync(uvt__journal_t *j) {
  if (j->fd < 0)
    return -EBADF;
  return fdatasync(j->fd) == 0 ? 0 : -errno;
}

int uvt__journal_read(uvt__journal_t *j, uvt__journal_line_fn fn, void *arg) {
  char *buf = NULL;
  size_t cap = 0;
  size_t len = 0;   /* bytes in buf */
  size_t start = 0; /* first byte of the line being gathered */
  off_t pos = 0;    /* file offset of buf[0] */
  ssize_t n;
  int err = 0;

  if (j->fd < 0)
    return -EBADF;
  j->lines = 0;
  for (;;) {
    char *nl;
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 65536;
      char *g;
      if (start > 0) {
        /* Keep only the line being gathered. */
        memmove(buf, buf + start, len - start);
        pos += (off_t)start;
        len -= start;
        start = 0;
        if (len < cap)
          goto read_more;
      }
      if ((g = uvt__realloc(buf, ncap)) == NULL) {
        err = -ENOMEM;
        break;
      }
      buf = g;
      cap = ncap;
    }
  read_more:
    do
      n = pread(j->fd, buf + len, cap - len, pos + (off_t)len);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      err = -errno;
      break;
    }
    if (n == 0) {
      if (len > start) {
        /* A last line without its newline: a writer died in its write.
         * Cut it off, so that the next line starts on a line of its own. */
        if (ftruncate(j->fd, pos + (off_t)start) != 0)
          err = -errno;
      }
      break;
    }
    len += (size_t)n;
    while ((nl = memchr(buf + start, '\n', len - start)) != NULL) {
      size_t l = (size_t)(nl - (buf + start));
      *nl = '\0';
      j->lines++;
      if (fn != NULL && (err = fn(arg, buf + start, l)) != 0)
        goto done;
      start += l + 1;
    }
  }
done:
  uvt__free(buf);
  return err;
}

int uvt__journal_compact(uvt__journal_t *j, uvt__journal_emit_fn emit,
                         void *arg) {
  char tmp[sizeof(j->name) + 8];
  uvt__journal_t out;
  int fd;
  int err;

  if (j->fd < 0)
    return -EBADF;
  snprintf(tmp, sizeof(tmp), "%s.tmp", j->name);
  uvt__journal_init(&out);
  memcpy(out.name, j->name, sizeof(out.name));
  out.dirfd = j->dirfd;
  if ((err = fault(j, 'c')) != 0)
    return err;
  (void)unlinkat(j->dirfd, tmp, 0);
  fd = open_in(j->dirfd, tmp, O_RDWR | O_APPEND | O_EXCL);
  if (fd < 0)
    return fd;
  out.fd = fd;
  err = emit(arg, &out);
  if (err == 0 && out.fd < 0)
    err = -EIO;
  if (err == 0 && fdatasync(fd) != 0)
    err = -errno;
  if (err == 0)
    err = fault(j, 'r');
  if (err == 0 && renameat(j->dirfd, tmp, j->dirfd, j->name) != 0)
    err = -errno;
  if (err != 0) {
    if (out.fd >= 0)
      close(out.fd);
    (void)unlinkat(j->dirfd, tmp, 0);
    return err;
  }
  /* The rename is in the directory: make it survive a power loss. */
  (void)fsync(j->dirfd);
  close(j->fd);
  j->fd = out.fd;
  if (j->slots) {
    /* Records in place from now on (uvt__journal_slots). */
    int fl = fcntl(j->fd, F_GETFL);
    if (fl < 0 || fcntl(j->fd, F_SETFL, fl & ~O_APPEND) != 0) {
      /* A write_at would land at the end: no more writes go in. */
      err = -errno;
      close(j->fd);
      j->fd = -1;
      return err;
    }
  }
  j->lines = out.lines;
  return 0;
}

size_t uvt__journal_enc(char *dst, size_t size, const char *src, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  size_t need = 1; /* the word's length so far */
  size_t put = 0;  /* bytes written to dst: whole units only */
  int full = 0;    /* a unit did not fit: write no more */
  size_t i;

  if (size > 1) {
    dst[0] = '=';
    put = 1;
  } else {
    full = 1;
  }
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)src[i];
    size_t unit = c <= 0x20 || c == '%' || c == 0x7f ? 3 : 1;
    if (!full && put + unit < size) {
      if (unit == 3) {
        dst[put] = '%';
        dst[put + 1] = hex[c >> 4];
        dst[put + 2] = hex[c & 15];
      } else {
        dst[put] = (char)c;
      }
      put += unit;
    } else {
      full = 1; /* a cut word ends on a whole unit, never half a %XX */
    }
    need += unit;
  }
  if (size > 0)
    dst[put] = '\0';
  return need;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

long uvt__journal_dec(char *word) {
  char *r;
  char *w;

  if (word == NULL || word[0] != '=')
    return -1;
  for (r = word + 1, w = word; *r != '\0'; r++) {
    if (*r == '%') {
      int hi = hexval(r[1]);
      int lo = hi < 0 ? -1 : hexval(r[2]);
      if (lo < 0)
        return -1;
      *w++ = (char)(hi * 16 + lo);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
  return (long)(w - word);
}

size_t uvt__journal_words(char *line, char **words, size_t max) {
  size_t n = 0;
  char *p = line;

  while (n < max && *p != '\0') {
    words[n++] = p;
    p = strchr(p, ' ');
    if (p == NULL)
      break;
    *p++ = '\0';
  }
  return n;
}
