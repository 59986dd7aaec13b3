/* E-5: the engine's journal, one text line per event, appended with one
 * write(2) each (O_APPEND), so a host that dies between two events leaves
 * whole lines.  Submissions are fsync'd by the engine thread before the
 * job goes to the controller: a job never runs unjournalled.  Lines:
 *   T <id> <key>          the task exists; its job is being submitted
 *   J <id> <job>          the job id
 *   O <id> <out> <err>    offsets consumed by reads
 *   D <id>                its end was delivered to listeners
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slurm-internal.h"

void uvt__journal_line(uvt_slurm_engine_t *e, const char *fmt, ...) {
  char line[256];
  va_list ap;
  int n;
  ssize_t w;
  if (e->journal_fd < 0)
    return;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(line) - 1)
    return;
  line[n++] = '\n';
  do
    w = write(e->journal_fd, line, (size_t)n);
  while (w < 0 && errno == EINTR);
  if (w != n) {
    /* Told on the loop thread (engine.c), whichever thread wrote. */
    e->journal_err = w < 0 ? uv_translate_sys_error(errno) : UV_EIO;
    uv_async_send(&e->async);
  }
  e->journal_sync = 1;
}

static uvt__journal_entry_t *find(uvt__journal_entry_t *a, size_t n,
                                  const char *id) {
  size_t i;
  for (i = 0; i < n; i++)
    if (strcmp(a[i].id, id) == 0)
      return &a[i];
  return NULL;
}

int uvt__journal_load(uvt_slurm_engine_t *e, uvt__journal_entry_t **out,
                      size_t *count) {
  FILE *fp;
  char line[512], id[UVT_ID_MAX], key[UVT__SLURM_KEY_MAX];
  uvt__journal_entry_t *a = NULL, *x;
  size_t n = 0, cap = 0;
  int fd;

  *out = NULL;
  *count = 0;
  if ((fd = dup(e->journal_fd)) < 0)
    return uv_translate_sys_error(errno);
  if ((fp = fdopen(fd, "r")) == NULL) {
    close(fd);
    return UV_ENOMEM;
  }
  rewind(fp);
  while (fgets(line, sizeof(line), fp) != NULL) {
    unsigned long long a1, a2;
    unsigned job;
    if (strchr(line, '\n') == NULL)
      break; /* a torn last line */
    if (sscanf(line, "T %64s %63s", id, key) == 2) {
      /* An id used again by a later host (its earlier job ended): the
       * later task replaces it. */
      if ((x = find(a, n, id)) != NULL) {
        memset(x, 0, sizeof(*x));
        snprintf(x->id, sizeof(x->id), "%s", id);
        snprintf(x->key, sizeof(x->key), "%s", key);
        continue;
      }
      if (n == cap) {
        size_t ncap = cap ? cap * 2 : 16;
        uvt__journal_entry_t *g = uvt__realloc(a, ncap * sizeof(*a));
        if (g == NULL) {
          uvt__free(a);
          fclose(fp);
          return UV_ENOMEM;
        }
        a = g;
        cap = ncap;
      }
      x = &a[n++];
      memset(x, 0, sizeof(*x));
      snprintf(x->id, sizeof(x->id), "%s", id);
      snprintf(x->key, sizeof(x->key), "%s", key);
    } else if (sscanf(line, "J %64s %u", id, &job) == 2) {
      if ((x = find(a, n, id)) != NULL)
        x->job = job;
    } else if (sscanf(line, "O %64s %llu %llu", id, &a1, &a2) == 3) {
      if ((x = find(a, n, id)) != NULL) {
        x->out_off = a1;
        x->err_off = a2;
      }
    } else if (sscanf(line, "D %64s", id) == 1) {
      if ((x = find(a, n, id)) != NULL)
        x->done = 1;
    }
  }
  fclose(fp);
  *out = a;
  *count = n;
  return 0;
}
