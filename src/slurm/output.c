/* E-2: a Slurm task's output is what its job wrote to <key>.out and
 * <key>.err under out_dir, read from the offsets reads consumed.  A read
 * takes at most `cap` bytes of each stream; the files keep the rest for
 * the next read, so nothing is dropped.  The shape is the process
 * producer's (P-OUT-1): stdout, then "[stderr]\n" and stderr's bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slurm-internal.h"

void uvt__sjob_path(const uvt__sjob_t *j, const char *ext, char *buf,
                    size_t size) {
  snprintf(buf, size, "%s/%s.%s", j->e->out_dir, j->key, ext);
}

/* Bytes of an unfinished UTF-8 sequence at the end of buf[0..len). */
static size_t utf8_tail(const unsigned char *buf, size_t len) {
  size_t back;
  for (back = 1; back <= 3 && back <= len; back++) {
    unsigned char c = buf[len - back];
    size_t need;
    if ((c & 0xc0) == 0x80)
      continue; /* a continuation byte: look further back */
    if ((c & 0xe0) == 0xc0)
      need = 2;
    else if ((c & 0xf0) == 0xe0)
      need = 3;
    else if ((c & 0xf8) == 0xf0)
      need = 4;
    else
      return 0;
    return need > back ? back : 0;
  }
  return 0;
}

/* Read up to `cap` bytes of `ext` from *off into a new buffer. */
static int read_stream(const uvt__sjob_t *j, const char *ext, uint64_t off,
                       size_t cap, int final, char **out, size_t *len,
                       uint64_t *left) {
  char path[4096];
  struct stat st;
  char *buf;
  ssize_t n;
  size_t got = 0, want;
  int fd;

  *out = NULL;
  *len = 0;
  *left = 0;
  uvt__sjob_path(j, ext, path, sizeof(path));
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0; /* not written yet */
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size <= off) {
    close(fd);
    return 0;
  }
  want = (uint64_t)st.st_size - off > cap ? cap : (size_t)(st.st_size - off);
  buf = uvt__malloc(want + 1);
  if (buf == NULL) {
    close(fd);
    return UV_ENOMEM;
  }
  while (got < want) {
    n = pread(fd, buf + got, want - got, (off_t)(off + got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  if (!final)
    got -= utf8_tail((unsigned char *)buf, got);
  *left = (uint64_t)st.st_size - off - got;
  if (got == 0) {
    uvt__free(buf);
    return 0;
  }
  *out = buf;
  *len = got;
  return 0;
}

/* E-13: an array's elements, each from its own files and offsets, under
 * "[element N]" when it has new bytes. */
static int read_array(uvt__sjob_t *j, uvt_buf_t *b, int final) {
  char ext[48], head[48];
  uint32_t i;
  int err = 0;
  for (i = 0; i < j->elems && err == 0; i++) {
    uint32_t idx = uvt__array_index(j->array, i);
    char *o = NULL, *e = NULL;
    size_t olen = 0, elen = 0;
    uint64_t oleft, eleft;
    snprintf(ext, sizeof(ext), "%u.out", idx);
    err = read_stream(j, ext, j->elem_off[2 * i], j->cap, final, &o, &olen,
                      &oleft);
    snprintf(ext, sizeof(ext), "%u.err", idx);
    if (err == 0)
      err = read_stream(j, ext, j->elem_off[2 * i + 1], j->cap, final, &e,
                        &elen, &eleft);
    if (err == 0 && olen + elen > 0) {
      int n = snprintf(head, sizeof(head), "[element %u]\n", idx);
      err = uvt_buf_append(b, head, (size_t)n);
      if (err == 0 && olen > 0)
        err = uvt_buf_append(b, o, olen);
      if (err == 0 && olen > 0 && o[olen - 1] != '\n')
        err = uvt_buf_append(b, "\n", 1);
      if (err == 0 && elen > 0)
        err = uvt_buf_append(b, "[stderr]\n", 9);
      if (err == 0 && elen > 0)
        err = uvt_buf_append(b, e, elen);
      if (err == 0 && elen > 0 && e[elen - 1] != '\n')
        err = uvt_buf_append(b, "\n", 1);
      if (err == 0) {
        j->elem_off[2 * i] += olen;
        j->elem_off[2 * i + 1] += elen;
      }
    }
    uvt__free(o);
    uvt__free(e);
  }
  return err;
}

int uvt__sjob_read(uvt__sjob_t *j, uvt_buf_t *b, int final) {
  char *o = NULL, *e = NULL;
  size_t olen, elen;
  uint64_t oleft, eleft;
  char note[4400];
  int err;

  if (j->array != NULL && j->elem_off != NULL)
    return read_array(j, b, final);
  if ((err = read_stream(j, "out", j->out_off, j->cap, final, &o, &olen,
                         &oleft)) != 0)
    return err;
  if ((err = read_stream(j, "err", j->err_off, j->cap, final, &e, &elen,
                         &eleft)) != 0) {
    uvt__free(o);
    return err;
  }
  if (olen > 0 && (err = uvt_buf_append(b, o, olen)) != 0)
    goto done;
  if (elen > 0) {
    if (olen > 0 && o[olen - 1] != '\n' && (err = uvt_buf_append(b, "\n", 1)))
      goto done;
    if ((err = uvt_buf_append(b, "[stderr]\n", 9)) != 0 ||
        (err = uvt_buf_append(b, e, elen)) != 0)
      goto done;
  }
  if (final && (oleft > 0 || eleft > 0)) {
    /* The end's read is the last: say where the rest is, whole paths. */
    snprintf(note, sizeof(note),
             "\n[... not read: %llu bytes more of stdout, %llu of "
             "stderr, in %s/%s.out and .err ...]\n",
             (unsigned long long)oleft, (unsigned long long)eleft,
             j->e->out_dir, j->key);
    if ((err = uvt_buf_append(b, note, strlen(note))) != 0)
      goto done;
  }
  j->out_off += olen;
  j->err_off += elen;
done:
  uvt__free(o);
  uvt__free(e);
  return err;
}
