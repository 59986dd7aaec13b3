/* Durable tasks (D-1..D-7, docs/durable.md): process tasks that outlive
 * their host and are taken back by the next one under the same ids.
 *
 * The registry's state directory (uvt_process_adopt_all() opens it once,
 * O_DIRECTORY|O_NOFOLLOW, and every file in it is opened relative to that
 * descriptor with O_NOFOLLOW, S-7) holds:
 *
 *   journal, journal.lock   the tasks (src/leaf/journal.c: one line per
 *                           event, compacted to one line per task)
 *   <key>.out, <key>.err    the command's output: the command writes them
 *                           itself (O_APPEND), we read them from the
 *                           offsets reads consumed (D-2)
 *   <key>.rc                the keeper's identity and, once the command
 *                           ended, how (src/keeper/keeper.c)
 *   <key>.in                a stdin_pipe task's FIFO (D-5)
 *
 * The journal's lines (words apart by spaces; strings as
 * uvt__journal_enc() words, "-" for none):
 *
 *   T KEY ID FLAGS STARTED_MS CAP GRACE DRAIN MAXRT AGENT SESSION KIND
 *     LABEL COMMAND OFF_OUT OFF_ERR KILLED KILLED_MS STDIN_CLOSED PID START
 *                      a task (written before its keeper is spawned; a
 *                      compaction writes every task as such a line)
 *   P KEY PID START    its keeper was spawned
 *   K KEY k|t MS       a kill was asked (t: the runtime limit, after MS)
 *   O KEY OUT ERR      what reads consumed
 *   C KEY              close_stdin was asked
 *   D KEY              its end reached the listeners: never taken back
 *   F KEY              its record was dropped: its files are gone
 *   N HIGH KIND        ids: KIND-1..KIND-HIGH were handed out (a
 *                      compaction writes one per kind whose highest id
 *                      no task line it writes names)
 *
 * No id the journal ever named is handed out again (D-3): loading notes
 * the highest id number of each kind its T and N lines name, delivered
 * and dropped tasks' too, and the registry's counter of the kind moves
 * past it (uvt_reserve_ids) before anything is taken back; a task this
 * host starts is noted as well, so a compaction, which drops delivered
 * tasks' lines, keeps the number in an N line.  A journal written before
 * N lines existed holds every task's T line until its first compaction,
 * so the number is read from those.
 *
 * Output reaches the ring of each stream (output.c) as pipe bytes do, so
 * every read rule holds unchanged (caps, drops, UTF-8, structured reads,
 * peeks): every read and look of a task first reads what its files hold
 * now (beyond the cap, only their last cap bytes: P-OUT-2), and a task
 * whose host wants to hear of output as it comes (on_output, on_drop)
 * has its files watched (inotify) and read as they grow. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "leaf/ids.h"
#include "leaf/journal.h"
#include "process-internal.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

void (*uvt__durable_hook)(const char *step, const char *id);

/* The keeper's status file: its first line is padded to this length. */
#define RC_END_AT 64
/* Poll for output this often when inotify is not there (ms). */
#define TAIL_POLL_MS 50
/* Bytes one tail of one stream reads before it lets the loop turn. */
#define TAIL_LIMIT (4u << 20)
/* Compact when the journal holds this many lines more than tasks. */
#define COMPACT_LINES 4096
/* The table of entries by key (a power of two). */
#define TABLE_SIZE 256

struct uvt__dstate_s {
  uvt_registry_t *reg;
  uvt__procs_t *ps;
  int dirfd;
  dev_t dev;
  ino_t ino;
  char *path;
  uvt__journal_t journal;
  struct uvt__link entries; /* every entry, in journal order */
  size_t count;
  uvt__dentry_t *table[TABLE_SIZE];
  char keeper[PATH_MAX];
  int stop_durable; /* uvt_process_stop_durable() */
  uv_timer_t poll;  /* for watches the kernel refused */
  uv_idle_t idle;   /* tails the eager tasks' streams */
  int poll_init, idle_init;
  uvt__proc_t **tailq; /* procs to tail at the next idle */
  size_t tailq_n, tailq_cap;
  int journal_warned;
  unsigned failed_closes;      /* a failed open's handles still closing */
  struct uvt__idmark_s *marks; /* D-3: the highest id number per kind */
  size_t marks_n;
};

/* D-3: KIND-1..KIND-HIGH were handed out by some host of this journal. */
typedef struct uvt__idmark_s {
  char *kind;
  uint64_t high;
} uvt__idmark_t;

static void free_state(uvt__dstate_t *ds);

static void hook(const char *step, const char *id) {
  if (uvt__durable_hook != NULL)
    uvt__durable_hook(step, id);
}

static int64_t epoch_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int close_sig(void) {
  return SIGRTMIN + 1; /* the same in the keeper (src/keeper/keeper.c) */
}

/* ---- entries --------------------------------------------------------- */

static size_t key_hash(const char *key) {
  size_t h = 2166136261u;
  for (; *key != '\0'; key++)
    h = (h ^ (unsigned char)*key) * 16777619u;
  return h & (TABLE_SIZE - 1);
}

static uvt__dentry_t *find_key(uvt__dstate_t *ds, const char *key) {
  uvt__dentry_t *e;
  for (e = ds->table[key_hash(key)]; e != NULL; e = e->hnext)
    if (strcmp(e->key, key) == 0)
      return e;
  return NULL;
}

static void entry_free(uvt__dentry_t *e) {
  int h;
  if (e == NULL)
    return;
  for (h = 0; h < UVT__CG_N; h++)
    uvt__free(e->cg_path[h]);
  uvt__free(e->agent);
  uvt__free(e->session);
  uvt__free(e->kind);
  uvt__free(e->label);
  uvt__free(e->command);
  uvt__free(e);
}

static void entry_link(uvt__dstate_t *ds, uvt__dentry_t *e) {
  size_t b = key_hash(e->key);
  e->hnext = ds->table[b];
  ds->table[b] = e;
  uvt__list_insert_tail(&ds->entries, &e->link);
  ds->count++;
}

static void entry_unlink(uvt__dstate_t *ds, uvt__dentry_t *e) {
  uvt__dentry_t **pp;
  for (pp = &ds->table[key_hash(e->key)]; *pp != NULL; pp = &(*pp)->hnext)
    if (*pp == e) {
      *pp = e->hnext;
      break;
    }
  uvt__list_remove(&e->link);
  ds->count--;
}

/* A task's files; `flags` (NULL: all) says which it has. */
static void unlink_files(uvt__dstate_t *ds, const char *key,
                         const char *flags) {
  static const char *const ext[] = {"out", "err", "rc", "in"};
  char name[64];
  size_t i;
  for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
    if (flags != NULL && ((i == 1 && strchr(flags, 'm') != NULL) ||
                          (i == 3 && strchr(flags, 'i') == NULL)))
      continue;
    snprintf(name, sizeof(name), "%s.%s", key, ext[i]);
    (void)unlinkat(ds->dirfd, name, 0);
  }
}

/* ---- ids handed out (D-3) --------------------------------------------- */

static int note_high(uvt__dstate_t *ds, const char *kind, uint64_t high) {
  uvt__idmark_t *m;
  size_t i;
  if (high == 0)
    return 0;
  for (i = 0; i < ds->marks_n; i++)
    if (strcmp(ds->marks[i].kind, kind) == 0) {
      if (ds->marks[i].high < high)
        ds->marks[i].high = high;
      return 0;
    }
  m = uvt__realloc(ds->marks, (ds->marks_n + 1) * sizeof(*m));
  if (m == NULL)
    return UV_ENOMEM;
  ds->marks = m;
  if ((m[ds->marks_n].kind = uvt__strdup(kind)) == NULL)
    return UV_ENOMEM;
  m[ds->marks_n++].high = high;
  return 0;
}

static int note_id(uvt__dstate_t *ds, const char *kind, const char *id) {
  return note_high(ds, kind, uvt__id_number(kind, id));
}

/* ---- journal lines --------------------------------------------------- */

/* A string field as one word ("-" for NULL); returns a new block. */
static char *word(const char *s) {
  size_t need;
  char *w;
  if (s == NULL)
    return uvt__strdup("-");
  need = uvt__journal_enc(NULL, 0, s, strlen(s)) + 1;
  if ((w = uvt__malloc(need)) == NULL)
    return NULL;
  uvt__journal_enc(w, need, s, strlen(s));
  return w;
}

static int write_task_line(uvt__journal_t *j, const uvt__dentry_t *e) {
  char *w[5 + UVT__CG_N];
  int err = UV_ENOMEM;
  size_t i;

  w[0] = word(e->agent);
  w[1] = word(e->session);
  w[2] = word(e->kind);
  w[3] = word(e->label);
  w[4] = word(e->command);
  for (i = 0; i < UVT__CG_N; i++)
    w[5 + i] = word(e->cg_path[i]);
  for (i = 0; i < 5 + UVT__CG_N; i++)
    if (w[i] == NULL)
      goto done;
  err = uvt__journal_appendf(
      j,
      "T %s %s %s %lld %llu %llu %llu %llu %s %s %s %s %s %llu %llu %c %llu "
      "%d %ld %llu %llu %u %u %s %s %s %s",
      e->key, e->id, e->flags, (long long)e->started_ms,
      (unsigned long long)e->cap, (unsigned long long)e->grace_ms,
      (unsigned long long)e->drain_ms, (unsigned long long)e->max_runtime_ms,
      w[0], w[1], w[2], w[3], w[4], (unsigned long long)e->off[0],
      (unsigned long long)e->off[1], e->killed ? e->killed : '-',
      (unsigned long long)e->killed_ms, e->stdin_closed, (long)e->pid, e->start,
      (unsigned long long)e->limits.memory_bytes,
      (unsigned)e->limits.max_processes, (unsigned)e->limits.cpu_percent, w[5],
      w[6], w[7], w[8]);
done:
  for (i = 0; i < 5 + UVT__CG_N; i++)
    uvt__free(w[i]);
  return err;
}

/* D-3: a kind's highest id, unless a task line that stays names it. */
static int write_mark(uvt__journal_t *j, uvt__dstate_t *ds,
                      const uvt__idmark_t *m) {
  struct uvt__link *l;
  char *w;
  int err;
  for (l = ds->entries.next; l != &ds->entries; l = l->next) {
    uvt__dentry_t *e = uvt__container_of(l, uvt__dentry_t, link);
    if (!e->delivered && strcmp(e->kind, m->kind) == 0 &&
        uvt__id_number(e->kind, e->id) == m->high)
      return 0;
  }
  if ((w = word(m->kind)) == NULL)
    return UV_ENOMEM;
  err = uvt__journal_appendf(j, "N %llu %s", (unsigned long long)m->high, w);
  uvt__free(w);
  return err;
}

static int emit_all(void *arg, uvt__journal_t *out) {
  uvt__dstate_t *ds = arg;
  struct uvt__link *l;
  size_t i;
  int err;
  for (i = 0; i < ds->marks_n; i++)
    if ((err = write_mark(out, ds, &ds->marks[i])) != 0)
      return err;
  for (l = ds->entries.next; l != &ds->entries; l = l->next) {
    uvt__dentry_t *e = uvt__container_of(l, uvt__dentry_t, link);
    if (e->delivered)
      continue; /* F follows with the record's drop; nothing to keep */
    if ((err = write_task_line(out, e)) != 0)
      return err;
  }
  return 0;
}

static void journal_failed(uvt__dstate_t *ds, int err) {
  if (ds->journal_warned)
    return;
  ds->journal_warned = 1;
  uvt_log(ds->reg, UVT_LOG_WARN,
          "durable tasks: journal write in %s failed (%s): a restart may "
          "repeat or miss what this host did since",
          ds->path, uvt_err_name(err));
}

/* E-15's rule for both producers: a line per task, not per event. */
static void maybe_compact(uvt__dstate_t *ds) {
  int err;
  if (ds->journal.lines < COMPACT_LINES + 2 * ds->count)
    return;
  err = uvt__journal_compact(&ds->journal, emit_all, ds);
  if (err != 0)
    journal_failed(ds, err);
}

static void line(uvt__dstate_t *ds, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void line(uvt__dstate_t *ds, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  int n;
  int err;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(buf))
    return;
  err = uvt__journal_append(&ds->journal, buf, (size_t)n);
  if (err != 0)
    journal_failed(ds, err);
  else
    maybe_compact(ds);
}

/* ---- loading --------------------------------------------------------- */

static int dec_opt(char *w, char **out) {
  *out = NULL;
  if (strcmp(w, "-") == 0)
    return 0;
  if (uvt__journal_dec(w) < 0)
    return -1;
  if ((*out = uvt__strdup(w)) == NULL)
    return UV_ENOMEM;
  return 0;
}

static int load_line(void *arg, char *text, size_t len) {
  uvt__dstate_t *ds = arg;
  char *w[32];
  size_t n = uvt__journal_words(text, w, 32);
  uvt__dentry_t *e;
  (void)len;

  if (n < 2 || strlen(w[0]) != 1 || strlen(w[1]) >= sizeof(e->key))
    return 0; /* not ours: skipped */
  e = find_key(ds, w[1]);
  switch (w[0][0]) {
  case 'T': {
    uvt__dentry_t *x;
    char kill;
    int r = 0;
    if (n < 21 || strlen(w[2]) >= UVT_ID_MAX || strlen(w[3]) >= 8)
      return 0;
    if ((x = uvt__calloc(1, sizeof(*x))) == NULL)
      return UV_ENOMEM;
    snprintf(x->key, sizeof(x->key), "%s", w[1]);
    snprintf(x->id, sizeof(x->id), "%s", w[2]);
    snprintf(x->flags, sizeof(x->flags), "%s", w[3]);
    x->started_ms = strtoll(w[4], NULL, 10);
    x->cap = strtoull(w[5], NULL, 10);
    x->grace_ms = strtoull(w[6], NULL, 10);
    x->drain_ms = strtoull(w[7], NULL, 10);
    x->max_runtime_ms = strtoull(w[8], NULL, 10);
    if (dec_opt(w[9], &x->agent) || dec_opt(w[10], &x->session) ||
        dec_opt(w[11], &x->kind) || dec_opt(w[12], &x->label) ||
        dec_opt(w[13], &x->command))
      r = -1;
    x->off[0] = strtoull(w[14], NULL, 10);
    x->off[1] = strtoull(w[15], NULL, 10);
    kill = w[16][0];
    x->killed = kill == 'k' || kill == 't' ? kill : 0;
    x->killed_ms = strtoull(w[17], NULL, 10);
    x->stdin_closed = atoi(w[18]) != 0;
    x->pid = (pid_t)strtol(w[19], NULL, 10);
    x->start = strtoull(w[20], NULL, 10);
    if (n >= 28) {
      /* L-LIM-3: its limits and its group (a journal before them has
       * neither: the task had no limits). */
      int h;
      x->limits.memory_bytes = strtoull(w[21], NULL, 10);
      x->limits.max_processes = (unsigned)strtoul(w[22], NULL, 10);
      x->limits.cpu_percent = (unsigned)strtoul(w[23], NULL, 10);
      for (h = 0; h < UVT__CG_N && r == 0; h++)
        r = dec_opt(w[24 + h], &x->cg_path[h]);
    }
    if (r != 0 || x->kind == NULL || x->label == NULL || x->cap < 4) {
      entry_free(x);
      return r == UV_ENOMEM ? UV_ENOMEM : 0;
    }
    if (e != NULL) { /* written again by a compaction cut short */
      entry_unlink(ds, e);
      entry_free(e);
    }
    entry_link(ds, x);
    return note_id(ds, x->kind, x->id); /* D-3 */
  }
  case 'P':
    if (e != NULL && n >= 4) {
      e->pid = (pid_t)strtol(w[2], NULL, 10);
      e->start = strtoull(w[3], NULL, 10);
    }
    return 0;
  case 'K':
    if (e != NULL && n >= 4) {
      e->killed = w[2][0] == 't' ? 't' : 'k';
      e->killed_ms = strtoull(w[3], NULL, 10);
    }
    return 0;
  case 'O':
    if (e != NULL && n >= 4) {
      e->off[0] = strtoull(w[2], NULL, 10);
      e->off[1] = strtoull(w[3], NULL, 10);
    }
    return 0;
  case 'C':
    if (e != NULL)
      e->stdin_closed = 1;
    return 0;
  case 'D':
    if (e != NULL)
      e->delivered = 1;
    return 0;
  case 'F':
    if (e != NULL) {
      entry_unlink(ds, e);
      entry_free(e);
    }
    return 0;
  case 'N': { /* D-3 */
    char *kind = NULL, *end = NULL;
    uint64_t high;
    int r;
    if (n < 3 || w[1][0] < '1' || w[1][0] > '9')
      return 0;
    errno = 0;
    high = strtoull(w[1], &end, 10);
    if (errno != 0 || *end != '\0' || dec_opt(w[2], &kind) != 0 ||
        kind == NULL) {
      uvt__free(kind);
      return 0;
    }
    r = note_high(ds, kind, high);
    uvt__free(kind);
    return r;
  }
  default:
    return 0;
  }
}

/* D-6: files of ours (a key and one of our extensions) that no journalled
 * task owns: a start that died before its journal line, or a delivered
 * task whose record's drop was not journalled. */
static void remove_orphans(uvt__dstate_t *ds) {
  DIR *d;
  struct dirent *de;
  int fd = openat(ds->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || (d = fdopendir(fd)) == NULL) {
    if (fd >= 0)
      close(fd);
    return;
  }
  while ((de = readdir(d)) != NULL) {
    char key[32];
    const char *dot = strrchr(de->d_name, '.');
    size_t klen;
    uvt__dentry_t *e;
    if (de->d_name[0] != 'd' || dot == NULL)
      continue;
    klen = (size_t)(dot - de->d_name);
    if (klen != 17 || (strcmp(dot, ".out") != 0 && strcmp(dot, ".err") != 0 &&
                       strcmp(dot, ".rc") != 0 && strcmp(dot, ".in") != 0))
      continue;
    memcpy(key, de->d_name, klen);
    key[klen] = '\0';
    e = find_key(ds, key);
    if (e == NULL || e->delivered)
      (void)unlinkat(ds->dirfd, de->d_name, 0);
  }
  closedir(d);
}

/* ---- finding the keeper ---------------------------------------------- */

static int try_keeper(char *buf, size_t size, const char *dir,
                      const char *rel) {
  if ((size_t)snprintf(buf, size, "%s%s", dir, rel) >= size)
    return 0;
  return access(buf, X_OK) == 0;
}

/* $UVTASKS_KEEPER; else beside the library (the build tree, the Node
 * addon's folder), or in ../libexec from it; else where it was installed. */
static const char keeper_anchor = 'k'; /* an address in the library */

static int find_keeper(uvt__dstate_t *ds) {
  const char *env = getenv("UVTASKS_KEEPER");
  Dl_info info;
  char dir[PATH_MAX];

  if (env != NULL && env[0] != '\0') {
    if (try_keeper(ds->keeper, sizeof(ds->keeper), env, ""))
      return 0;
    uvt_log(ds->reg, UVT_LOG_ERROR,
            "durable tasks: UVTASKS_KEEPER=%s is not an executable", env);
    return UV_ENOENT;
  }
  if (dladdr(&keeper_anchor, &info) != 0 && info.dli_fname != NULL &&
      realpath(info.dli_fname, dir) != NULL) {
    char *slash = strrchr(dir, '/');
    if (slash != NULL) {
      slash[1] = '\0';
      if (try_keeper(ds->keeper, sizeof(ds->keeper), dir, "uvtasks-keeper") ||
          try_keeper(ds->keeper, sizeof(ds->keeper), dir,
                     "../libexec/uvtasks-keeper"))
        return 0;
    }
  }
#ifdef UVT_KEEPER_PATH
  if (try_keeper(ds->keeper, sizeof(ds->keeper), UVT_KEEPER_PATH, ""))
    return 0;
#endif
  uvt_log(ds->reg, UVT_LOG_ERROR,
          "durable tasks: no uvtasks-keeper found (set UVTASKS_KEEPER)");
  return UV_ENOENT;
}

/* ---- tailing --------------------------------------------------------- */

/* Output is read when it is asked for (a read, a look, the end), except
 * for a task whose host wants to hear of it as it comes (on_output,
 * P-EVT-1) or keep what its cap drops (on_drop, M-TOOLS-10): its streams
 * are watched (process.c: an inotify watch on each file) and read from
 * an idle handle.  A watch the kernel refuses (no inotify watch left)
 * falls back to a look every TAIL_POLL_MS. */
static int eager(const uvt__proc_t *p) {
  return p->on_output != NULL || p->on_drop != NULL;
}

/* P-OUT-2 without reading what the cap would drop: a stream whose file
 * holds more than the cap unread starts its next bytes at the last `cap`
 * of them, and everything before (the ring's unread bytes too) counts as
 * dropped.  Also what makes a restart skip what a keeper punched out. */
static void skip_to_cap(uvt__stream_t *s, uint64_t size) {
  uvt__outbuf_t *b = &s->buf;
  uint64_t skip = size - b->cap - s->pos;
  if (b->len > 0 && b->spill != NULL && b->alloc > 0) {
    size_t first = b->alloc - b->head;
    if (first > b->len)
      first = b->len;
    b->spill(b->spill_ctx, b->ring + b->head, first);
    if (b->len > first)
      b->spill(b->spill_ctx, b->ring, b->len - first);
  }
  b->dropped += b->len + skip;
  b->head = 0;
  b->len = 0;
  b->cut = 1;
  s->pos += skip;
}

size_t uvt__durable_tail(uvt__proc_t *p, uvt__stream_t *s, size_t limit) {
  size_t total = 0;
  struct stat st;

  if (!s->file || !s->open || s->fd < 0 || s->paused)
    return 0;
  if (!p->backpressure && fstat(s->fd, &st) == 0 &&
      (uint64_t)st.st_size > s->pos + s->buf.cap)
    skip_to_cap(s, (uint64_t)st.st_size);
  for (;;) {
    char *at;
    size_t room = uvt__stream_room(s, &at);
    ssize_t n;
    if (room == 0) {
      uvt__stream_maybe_pause(s);
      break;
    }
    if (limit > 0 && room > limit - total)
      room = limit - total;
    do
      n = pread(s->fd, at, room, (off_t)s->pos);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
      if (s->ending)
        uvt__stream_at_end(s); /* its writer left, and this is the end */
      break;
    }
    s->pos += (uint64_t)n;
    total += (size_t)n;
    uvt__stream_got(s, at, (size_t)n);
    if ((size_t)n < room) {
      if (s->ending)
        uvt__stream_at_end(s);
      break;
    }
    if ((limit > 0 && total >= limit) || s->paused)
      break;
  }
  return total;
}

static void tail_proc(uvt__proc_t *p, int *more) {
  if (uvt__durable_tail(p, &p->out, TAIL_LIMIT) >= TAIL_LIMIT)
    *more = 1;
  if (uvt__durable_tail(p, &p->err, TAIL_LIMIT) >= TAIL_LIMIT)
    *more = 1;
}

static void on_idle(uv_idle_t *h) {
  uvt__dstate_t *ds = h->data;
  size_t i;
  size_t n = ds->tailq_n;
  int more = 0;

  /* A proc may be freed by what a tail calls (on_output is deferred, so
   * nothing here frees one); the queue is taken as it is. */
  ds->tailq_n = 0;
  for (i = 0; i < n; i++) {
    uvt__proc_t *p = ds->tailq[i];
    tail_proc(p, &more);
    if (more && ds->tailq_n < ds->tailq_cap)
      ds->tailq[ds->tailq_n++] = p; /* the rest next turn */
    more = 0;
  }
  if (ds->tailq_n == 0)
    uv_idle_stop(h);
}

void uvt__durable_want_tail(uvt__proc_t *p) {
  uvt__dstate_t *ds = p->procs != NULL ? p->procs->dstate : NULL;
  size_t i;

  if (ds == NULL || !ds->idle_init || !eager(p))
    return; /* read when asked */
  for (i = 0; i < ds->tailq_n; i++)
    if (ds->tailq[i] == p)
      return;
  if (ds->tailq_n == ds->tailq_cap) {
    size_t cap = ds->tailq_cap ? ds->tailq_cap * 2 : 16;
    uvt__proc_t **g = uvt__realloc(ds->tailq, cap * sizeof(*g));
    if (g == NULL)
      return; /* the next change or read tails it */
    ds->tailq = g;
    ds->tailq_cap = cap;
  }
  ds->tailq[ds->tailq_n++] = p;
  uv_idle_start(&ds->idle, on_idle);
}

/* A proc going away leaves the queue. */
static void untail(uvt__proc_t *p) {
  uvt__dstate_t *ds = p->procs != NULL ? p->procs->dstate : NULL;
  size_t i;
  if (ds == NULL)
    return;
  for (i = 0; i < ds->tailq_n; i++)
    if (ds->tailq[i] == p) {
      ds->tailq[i] = ds->tailq[--ds->tailq_n];
      return;
    }
}

static void on_poll(uv_timer_t *h) {
  uvt__dstate_t *ds = h->data;
  struct uvt__link *l;
  for (l = ds->entries.next; l != &ds->entries; l = l->next) {
    uvt__dentry_t *e = uvt__container_of(l, uvt__dentry_t, link);
    if (e->proc != NULL && eager(e->proc))
      uvt__durable_want_tail(e->proc);
  }
}

void uvt__durable_poll(uvt__proc_t *p) {
  uvt__dstate_t *ds = p->procs != NULL ? p->procs->dstate : NULL;
  if (ds == NULL || ds->poll_init)
    return;
  if (uv_timer_init(ds->ps->loop, &ds->poll) != 0)
    return;
  ds->poll.data = ds;
  ds->poll_init = 1;
  uv_timer_start(&ds->poll, on_poll, TAIL_POLL_MS, TAIL_POLL_MS);
  uv_unref((uv_handle_t *)&ds->poll);
}

static int watch_start(uvt__dstate_t *ds) {
  int err;
  if ((err = uv_idle_init(ds->ps->loop, &ds->idle)) != 0)
    return err;
  ds->idle.data = ds;
  ds->idle_init = 1;
  return 0;
}

/* ---- a durable start ------------------------------------------------- */

static int open_file(uvt__dstate_t *ds, const char *key, const char *ext,
                     int flags) {
  char name[64];
  int fd;
  snprintf(name, sizeof(name), "%s.%s", key, ext);
  do
    fd = openat(ds->dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                0600);
  while (fd < 0 && errno == EINTR);
  return fd < 0 ? UVT__PERR(errno) : fd;
}

/* A descriptor at 10 or above: the spawn puts the keeper's two extra
 * descriptors at 3 and 4 after stdio, so theirs must not be 3 or 4. */
static int fd_high(int fd) {
  int moved;
  if (fd < 0 || fd >= 10)
    return fd;
  moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return moved < 0 ? UVT__PERR(errno) : moved;
}

static void make_key(char key[24]) {
  unsigned char r[8];
  size_t i;
  if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    uint64_t t = uv_hrtime() ^ ((uint64_t)getpid() << 32);
    memcpy(r, &t, sizeof(r));
  }
  key[0] = 'd';
  for (i = 0; i < sizeof(r); i++)
    snprintf(key + 1 + 2 * i, 3, "%02x", r[i]);
}

int uvt__durable_prepare(uvt__proc_t *p, const uvt_process_options_t *o,
                         int child[3], int xfd[2], int *in_ours) {
  uvt__dstate_t *ds = p->procs->dstate;
  uvt__dentry_t *e;
  int fd[4] = {-1, -1, -1, -1}; /* out w, out r, err w, err r */
  int rc = -1, fr = -1, fk = -1, fh = -1;
  int err;
  size_t nf = 0;

  if (ds == NULL)
    return UV_EINVAL;
  if ((e = uvt__calloc(1, sizeof(*e))) == NULL)
    return UV_ENOMEM;
  uvt__list_init(&e->link); /* not in the state's list until journalled */
  make_key(e->key);
  if (o->stdin_pipe)
    e->flags[nf++] = 'i';
  if (o->merge_stderr)
    e->flags[nf++] = 'm';
  if (o->output_backpressure)
    e->flags[nf++] = 'b';
  if (nf == 0)
    e->flags[nf++] = '-';
  e->cap = o->output_cap_bytes;
  e->grace_ms = o->grace_ms;
  e->drain_ms = o->drain_ms;
  e->max_runtime_ms = o->max_runtime_ms;

  /* One open per stream (creating an inode is what costs on a disk file
   * system): the command's end and ours are one description, read by us
   * with pread only, written by it with O_APPEND. */
  err = fd[0] =
      open_file(ds, e->key, "out", O_RDWR | O_CREAT | O_EXCL | O_APPEND);
  if (err >= 0 && (err = fd[1] = fcntl(fd[0], F_DUPFD_CLOEXEC, 3)) < 0)
    err = UVT__PERR(errno);
  if (err >= 0 && !o->merge_stderr) {
    err = fd[2] =
        open_file(ds, e->key, "err", O_RDWR | O_CREAT | O_EXCL | O_APPEND);
    if (err >= 0 && (err = fd[3] = fcntl(fd[2], F_DUPFD_CLOEXEC, 3)) < 0)
      err = UVT__PERR(errno);
  } else if (err >= 0) {
    err = fd[2] = fcntl(fd[0], F_DUPFD_CLOEXEC, 3);
    if (err < 0)
      err = UVT__PERR(errno);
  }
  if (err >= 0)
    err = rc = open_file(ds, e->key, "rc", O_RDWR | O_CREAT | O_EXCL);
  /* The keeper holds this lock while it lives: adoption tells a keeper
   * that has not written its identity yet from one that never ran. */
  if (err >= 0 && flock(rc, LOCK_EX | LOCK_NB) != 0)
    err = UVT__PERR(errno);
  if (err >= 0)
    err = rc = fd_high(rc);
  if (err >= 0 && o->stdin_pipe) {
    char name[64];
    snprintf(name, sizeof(name), "%s.in", e->key);
    if (mkfifoat(ds->dirfd, name, 0600) != 0)
      err = UVT__PERR(errno);
    /* The child's read end (blocking once open), the keeper's write end
     * (held: no end of file because a host went away) and ours. */
    if (err >= 0)
      err = fr = open_file(ds, e->key, "in", O_RDONLY | O_NONBLOCK);
    if (err >= 0 && fcntl(fr, F_SETFL, fcntl(fr, F_GETFL) & ~O_NONBLOCK) != 0)
      err = UVT__PERR(errno);
    if (err >= 0)
      err = fk = open_file(ds, e->key, "in", O_WRONLY | O_NONBLOCK);
    if (err >= 0)
      err = fk = fd_high(fk);
    if (err >= 0)
      err = fh = open_file(ds, e->key, "in", O_WRONLY | O_NONBLOCK);
  }
  if (err < 0)
    goto fail;
  child[0] = fr;
  child[1] = fd[0];
  child[2] = fd[2];
  xfd[0] = rc;
  xfd[1] = fk;
  *in_ours = fh;
  p->out.file = 1;
  p->out.fd = fd[1];
  p->err.file = 1;
  p->err.fd = fd[3];
  p->dur = e;
  return 0;
fail:
  for (nf = 0; nf < 4; nf++)
    if (fd[nf] >= 0)
      close(fd[nf]);
  if (rc >= 0)
    close(rc);
  if (fr >= 0)
    close(fr);
  if (fk >= 0)
    close(fk);
  if (fh >= 0)
    close(fh);
  unlink_files(ds, e->key, e->flags);
  entry_free(e);
  return err;
}

int uvt__durable_wrap(uvt__proc_t *p, uvt__spawn_t *sp) {
  uvt__dstate_t *ds = p->procs->dstate;
  size_t argc = 0;
  size_t i;
  char **v;
  char num[32];

  while (sp->argv[argc] != NULL)
    argc++;
  if ((v = uvt__calloc(argc + 6, sizeof(*v))) == NULL)
    return UV_ENOMEM;
  /* uvtasks-keeper CAP FLAGS SIG FILE ARG0... (src/keeper/keeper.c) */
  snprintf(num, sizeof(num), "%llu", (unsigned long long)p->dur->cap);
  v[0] = uvt__strdup(ds->keeper);
  v[1] = uvt__strdup(num);
  v[2] = uvt__strdup(p->dur->flags);
  snprintf(num, sizeof(num), "%d", close_sig());
  v[3] = uvt__strdup(num);
  v[4] = uvt__strdup(sp->file);
  for (i = 0; i < argc; i++)
    v[5 + i] = uvt__strdup(sp->argv[i]);
  for (i = 0; i < argc + 5; i++)
    if (v[i] == NULL) {
      uvt__sandbox_argv_free(v);
      return UV_ENOMEM;
    }
  sp->dur_argv = v;
  sp->file = v[0];
  sp->argv = v;
  sp->durable = 1;
  return 0;
}

int uvt__durable_record(uvt__proc_t *p, const uvt_process_options_t *o,
                        const char *kind, const char *label) {
  uvt__dstate_t *ds = p->procs->dstate;
  uvt__dentry_t *e = p->dur;
  int err;

  memcpy(e->id, p->id, sizeof(e->id));
  e->started_ms = epoch_ms();
  if (o->owner != NULL && o->owner->id != NULL) {
    e->agent = uvt__strdup(o->owner->id);
    e->session = uvt__strdup(o->owner->session);
    if (e->agent == NULL || e->session == NULL)
      return UV_ENOMEM;
  }
  if ((e->kind = uvt__strdup(kind)) == NULL ||
      (e->label = uvt__strdup(label)) == NULL ||
      (o->command != NULL && (e->command = uvt__strdup(o->command)) == NULL))
    return UV_ENOMEM;
  /* D-3: its id stays taken in the journal after its line goes. */
  if ((err = note_id(ds, kind, e->id)) != 0)
    return err;
  hook("record", e->id);
  /* Before the spawn: a keeper never runs unjournalled (D-3). */
  if ((err = write_task_line(&ds->journal, e)) != 0)
    return err;
  e->proc = p;
  entry_link(ds, e);
  maybe_compact(ds);
  return 0;
}

void uvt__durable_spawned(uvt__proc_t *p) {
  uvt__dstate_t *ds = p->procs->dstate;
  uvt__dentry_t *e = p->dur;
  hook("spawned", e->id);
  e->pid = p->pid;
  e->start = p->start_ticks;
  line(ds, "P %s %ld %llu", e->key, (long)e->pid, e->start);
}

void uvt__durable_killed(uvt__proc_t *p, char why) {
  uvt__dentry_t *e = p->dur;
  if (p->procs == NULL || p->procs->dstate == NULL || e->killed != 0 ||
      p->detached)
    return;
  e->killed = why;
  e->killed_ms = why == 't' ? p->timed_out_ms : 0;
  line(p->procs->dstate, "K %s %c %llu", e->key, why,
       (unsigned long long)e->killed_ms);
  hook("killed", e->id);
}

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif
/* Punch below `off` once at least PUNCH_STEP more was consumed. */
#define PUNCH_STEP (1u << 20)

static void punch_consumed(uvt__stream_t *s, uint64_t off) {
  uint64_t upto = off & ~(uint64_t)4095;
  if (s->fd < 0 || upto < s->punched + PUNCH_STEP)
    return;
  if (fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                (off_t)upto) == 0)
    s->punched = upto;
  else
    s->punched = UINT64_MAX / 2; /* not supported here: never again */
}

void uvt__durable_consumed(uvt__proc_t *p) {
  uvt__dentry_t *e = p->dur;
  uint64_t o0, o1;
  if (p->procs == NULL || p->procs->dstate == NULL || p->settled)
    return;
  o0 = p->out.file ? p->out.pos - p->out.buf.len : e->off[0];
  o1 = p->err.file && p->err.fd >= 0 ? p->err.pos - p->err.buf.len : e->off[1];
  if (o0 == e->off[0] && o1 == e->off[1])
    return;
  /* The bytes are consumed, and not yet told to the journal. */
  hook("read", e->id);
  e->off[0] = o0;
  e->off[1] = o1;
  line(p->procs->dstate, "O %s %llu %llu", e->key, (unsigned long long)o0,
       (unsigned long long)o1);
  /* D-6: what reads consumed (and the journal now says so) is never read
   * again: its blocks go back (the file keeps its size and offsets), so a
   * task read as it writes holds little on disk, and its pages are
   * reused by its writer. */
  punch_consumed(&p->out, o0);
  if (p->err.file)
    punch_consumed(&p->err, o1);
}

void uvt__durable_settled(uvt__proc_t *p) {
  uvt__dentry_t *e = p->dur;
  if (e == NULL || p->detached || p->dur_err != 0 || p->procs == NULL ||
      p->procs->dstate == NULL)
    return;
  /* Settled while its host leaves (no listener will hear of it): the
   * next host reports it (D-3). */
  if (uvt_task_host_leaving(p->task) && !uvt__durable_stopping(p))
    return;
  /* D before the listeners: an end is never reported twice (D-3). */
  hook("ended", e->id);
  e->delivered = 1;
  line(p->procs->dstate, "D %s", e->key);
  hook("delivered", e->id);
}

static int send_sig(uvt__proc_t *p, int sig) {
  if (p->pidfd < 0)
    return UV_ESRCH;
  return syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) == 0
             ? 0
             : UVT__PERR(errno);
}

void uvt__durable_stdin_closed(uvt__proc_t *p) {
  uvt__dentry_t *e = p->dur;
  if (e == NULL || e->stdin_closed || p->procs == NULL ||
      p->procs->dstate == NULL)
    return;
  e->stdin_closed = 1;
  line(p->procs->dstate, "C %s", e->key);
  /* The keeper's own write end goes: the command reads end of file. */
  if (!p->reaped)
    (void)send_sig(p, close_sig());
}

void uvt__durable_release(uvt__proc_t *p) {
  uvt__dentry_t *e = p->dur;
  uvt__dstate_t *ds = p->procs != NULL ? p->procs->dstate : NULL;

  untail(p);
  if (e == NULL)
    return;
  p->dur = NULL;
  if (ds == NULL || uvt__list_empty(&e->link)) {
    /* Never journalled (its start failed): its files go. */
    if (ds != NULL)
      unlink_files(ds, e->key, e->flags);
    entry_free(e);
    return;
  }
  e->proc = NULL;
  if (p->detached || !e->delivered) {
    /* D-1: it runs on; the next host takes it back, and its group with
     * it (L-LIM-3): closed here, not removed. */
    if (p->cg)
      uvt__cg_close(&p->cgroup);
    p->cg = 0;
    return;
  }
  /* D-6: delivered and dropped: nothing of it is needed any more. */
  line(ds, "F %s", e->key);
  unlink_files(ds, e->key, e->flags);
  entry_unlink(ds, e);
  entry_free(e);
}

/* ---- the task's cgroup (L-LIM-3) ------------------------------------- */

int uvt__durable_cgroup(uvt__proc_t *p, const uvt__cg_t *g) {
  uvt__dentry_t *e = p->dur;
  char path[PATH_MAX];
  int err;
  int h;

  e->limits = g->limits;
  for (h = 0; h < UVT__CG_N; h++) {
    err = uvt__cg_path(g, h, path, sizeof(path));
    if (err == UV_ENOENT)
      continue;
    if (err != 0)
      return err;
    if ((e->cg_path[h] = uvt__strdup(path)) == NULL)
      return UV_ENOMEM;
  }
  return 0;
}

void uvt__durable_cgroup_open(uvt__proc_t *p) {
  uvt__dentry_t *e = p->dur;
  const char *path[UVT__CG_N];
  const char *why = NULL;
  const char *shown = NULL;
  int any = 0;
  int err;
  int h;

  for (h = 0; h < UVT__CG_N; h++) {
    const char *base;
    size_t k = strlen(UVT__CG_DURABLE);
    path[h] = e->cg_path[h];
    if (path[h] == NULL)
      continue;
    if (!any)
      shown = path[h];
    any = 1;
    /* S-7: only the group made for this very task, `.../uvtasks-durable/
     * <key>`: a journal line naming another cgroup is refused, never
     * signalled or removed. */
    base = strrchr(path[h], '/');
    if (base == NULL || strcmp(base + 1, e->key) != 0 ||
        (size_t)(base - path[h]) < k + 1 ||
        strncmp(base - k - 1, "/" UVT__CG_DURABLE, k + 1) != 0)
      why = "not a durable task's group";
  }
  if (!any)
    return;
  err = why == NULL ? uvt__cg_open(&p->cgroup, path, &e->limits) : UV_EINVAL;
  if (err != 0) {
    uvt_log(p->reg, UVT_LOG_WARN,
            "task %s: its cgroup (%s) is not taken back (%s): its limits "
            "go on, but its outcome cannot name them",
            p->id, shown, why != NULL ? why : uvt_err_name(err));
    return;
  }
  p->cgroup.keeper = 1;
  p->cg = 1;
}

/* ---- the keeper's status file --------------------------------------- */

typedef struct {
  int run; /* the identity line is there */
  pid_t pid;
  unsigned long long start;
  pid_t sid;
  int end; /* 'x' exit, 's' signal, 'e' spawn error, 0 none */
  int value;
} rcinfo_t;

static void rc_parse(int fd, rcinfo_t *ri) {
  char buf[RC_END_AT + 64];
  ssize_t n;
  long pid, sid;
  unsigned long long start;
  int v;

  memset(ri, 0, sizeof(*ri));
  do
    n = pread(fd, buf, sizeof(buf) - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return;
  buf[n] = '\0';
  if (sscanf(buf, "uvtasks-keeper 1 run %ld %llu %ld", &pid, &start, &sid) ==
      3) {
    ri->run = 1;
    ri->pid = (pid_t)pid;
    ri->start = start;
    ri->sid = (pid_t)sid;
  }
  if (n <= RC_END_AT)
    return;
  if (sscanf(buf + RC_END_AT, "end exit %d", &v) == 1)
    ri->end = 'x';
  else if (sscanf(buf + RC_END_AT, "end signal %d", &v) == 1)
    ri->end = 's';
  else if (sscanf(buf + RC_END_AT, "end spawn %d", &v) == 1)
    ri->end = 'e';
  else
    return;
  ri->value = v;
}

static int rc_status(const rcinfo_t *ri) {
  if (ri->end == 's')
    return ri->value & 0x7f; /* a wait status of a death by that signal */
  return (ri->value & 0xff) << 8;
}

static void rc_read(uvt__proc_t *p, rcinfo_t *ri) {
  uvt__dstate_t *ds = p->procs != NULL ? p->procs->dstate : NULL;
  int fd;
  memset(ri, 0, sizeof(*ri));
  if (ds == NULL || p->dur == NULL)
    return;
  fd = open_file(ds, p->dur->key, "rc", O_RDONLY);
  if (fd < 0)
    return;
  rc_parse(fd, ri);
  close(fd);
}

int uvt__durable_leader_status(uvt__proc_t *p, int *status, int *lost) {
  struct pollfd pf;
  siginfo_t si;
  rcinfo_t ri;
  int have = 0;

  *status = 0;
  *lost = 0;
  if (p->pidfd >= 0) {
    pf.fd = p->pidfd;
    pf.events = POLLIN;
    pf.revents = 0;
    if (poll(&pf, 1, 0) == 0)
      return 0; /* it runs */
    /* Ours when this host is a subreaper it was reparented to: reaped
     * here, exactly that process (P_PIDFD). */
    memset(&si, 0, sizeof(si));
    if (waitid((idtype_t)P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG) ==
            0 &&
        si.si_pid != 0) {
      have = 1;
      *status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8
                                         : si.si_status & 0x7f;
    }
  }
  rc_read(p, &ri);
  if (ri.end == 'x' || ri.end == 's')
    *status = rc_status(&ri); /* what the keeper saw: exact */
  else if (ri.end == 'e')
    *status = 127 << 8;
  else if (!have)
    *lost = 1;
  return 1;
}

int uvt__durable_spawn_error(uvt__proc_t *p) {
  rcinfo_t ri;
  rc_read(p, &ri);
  return ri.end == 'e' && ri.value > 0 ? UVT__PERR(ri.value) : 0;
}

int uvt__durable_command_pid(uvt__proc_t *p) {
  char path[64];
  char buf[64];
  ssize_t n;
  int fd;
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)p->pid,
           (int)p->pid);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return 0;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return atoi(buf);
}

/* ---- adoption (D-3, D-4) --------------------------------------------- */

static int owner_matches(const uvt__dentry_t *e, const uvt_agent_t *owner) {
  if (owner == NULL)
    return e->agent == NULL;
  return e->agent != NULL && e->session != NULL && owner->id != NULL &&
         owner->session != NULL && strcmp(e->agent, owner->id) == 0 &&
         strcmp(e->session, owner->session) == 0;
}

/* D-4: the keeper the status file names, if it is still that process:
 * a pidfd first, then its start time and session read while the pidfd
 * holds it (a pid reused after the pidfd was opened would show another
 * start time).  Returns the pidfd, or -1. */
static int identify(const rcinfo_t *ri) {
  uvt__pstat_t st;
  int fd;
  if (!ri->run || ri->pid <= 0 || ri->sid != ri->pid)
    return -1;
  if ((fd = uvt__pidfd_open(ri->pid)) < 0)
    return fd == UV_ENOSYS ? UV_ENOSYS : -1;
  if (uvt__pstat_read(ri->pid, &st) != 0 || st.start != ri->start ||
      st.sid != ri->sid || st.state == 'Z' || st.state == 'X') {
    close(fd);
    return -1;
  }
  return fd;
}

static void nap_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static int adopt_one(uvt__procs_t *ps, uvt__dentry_t *e, uvt_agent_t *owner) {
  uvt__dstate_t *ds = ps->dstate;
  uvt__adopted_t a;
  rcinfo_t ri;
  int rc;
  int tries;
  int i;

  memset(&a, 0, sizeof(a));
  a.pidfd = -1;
  a.in_fd = -1;
  a.fd[0] = a.fd[1] = -1;
  rc = open_file(ds, e->key, "rc", O_RDWR);
  memset(&ri, 0, sizeof(ri));
  if (rc >= 0) {
    /* A keeper spawned just before its host died may not have written
     * its identity yet: its lock says it is there (bounded wait). */
    for (tries = 0;; tries++) {
      rc_parse(rc, &ri);
      if (ri.run || tries >= 2000)
        break;
      if (flock(rc, LOCK_EX | LOCK_NB) == 0)
        break; /* no keeper holds it: none ever ran */
      nap_ms(1);
    }
    close(rc);
  }
  a.pidfd = identify(&ri);
  if (a.pidfd == UV_ENOSYS && ri.end != 0)
    a.pidfd = -1; /* its end is recorded: known without the process */
  if (a.pidfd == UV_ENOSYS) {
    /* No pidfds here (Linux < 5.3, or valgrind): a keeper that may run
     * cannot be told apart from a reused pid.  Left in the journal for a
     * host that can; nothing is concluded about it. */
    return UV_ENOSYS;
  }
  if (a.pidfd >= 0) {
    a.live = 1;
    a.pid = ri.pid;
    a.start = ri.start;
  } else if (ri.run) {
    /* Ended: the keeper wrote how (or was killed before it could); a
     * number that now names another process is never used (D-4). */
    a.pid = ri.pid;
    a.start = ri.start;
    if (ri.end == 'x' || ri.end == 's')
      a.status = rc_status(&ri);
    else if (ri.end == 'e')
      a.spawn_err = UVT__PERR(ri.value);
    else
      a.lost = 1;
  } else {
    a.never = 1;
  }
  for (i = 0; i < 2; i++) {
    if (i == 1 && strchr(e->flags, 'm') != NULL)
      break;
    a.fd[i] = open_file(ds, e->key, i == 0 ? "out" : "err", O_RDONLY);
    if (a.fd[i] < 0)
      a.fd[i] = -1; /* gone: read as empty */
  }
  if (a.live && strchr(e->flags, 'i') != NULL && !e->stdin_closed) {
    struct stat st;
    int fd = open_file(ds, e->key, "in", O_WRONLY | O_NONBLOCK);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
        st.st_uid == geteuid())
      a.in_fd = fd;
    else if (fd >= 0)
      close(fd);
  }
  return uvt__proc_adopt(ps, e, &a, owner);
}

static int same_dir(uvt__dstate_t *ds, const char *dir) {
  struct stat st;
  return stat(dir, &st) == 0 && st.st_dev == ds->dev && st.st_ino == ds->ino;
}

static int state_open(uvt__procs_t *ps, const char *dir) {
  uvt__dstate_t *ds;
  struct stat st;
  int err;

  if ((ds = uvt__calloc(1, sizeof(*ds))) == NULL)
    return UV_ENOMEM;
  ds->reg = ps->reg;
  ds->ps = ps;
  ds->dirfd = -1;
  uvt__list_init(&ds->entries);
  uvt__journal_init(&ds->journal);
  if ((ds->path = uvt__strdup(dir)) == NULL) {
    uvt__free(ds);
    return UV_ENOMEM;
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    err = UVT__PERR(errno);
    goto fail;
  }
  ds->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ds->dirfd < 0) {
    err = UVT__PERR(errno);
    goto fail;
  }
  /* D-4, S-7: ours, and nobody else may write it (or plant files). */
  if (fstat(ds->dirfd, &st) != 0) {
    err = UVT__PERR(errno);
    goto fail;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    uvt_log(ps->reg, UVT_LOG_ERROR,
            "durable tasks: state directory %s must be yours and writable "
            "by you alone (it is mode %03o, owner %ld)",
            dir, (unsigned)(st.st_mode & 0777), (long)st.st_uid);
    err = UV_EPERM;
    goto fail;
  }
  ds->dev = st.st_dev;
  ds->ino = st.st_ino;
  if ((err = find_keeper(ds)) != 0)
    goto fail;
  /* One host at a time (D-3): a second is refused until the first ends. */
  if ((err = uvt__journal_open(&ds->journal, ds->dirfd, "journal", 1)) != 0)
    goto fail;
  if ((err = uvt__journal_read(&ds->journal, load_line, ds)) != 0)
    goto fail;
  remove_orphans(ds);
  /* Compacted at every start (D-6): a line per task. */
  if ((err = uvt__journal_compact(&ds->journal, emit_all, ds)) != 0)
    goto fail;
  /* D-3: no id the journal named is handed out again, taken back or not
   * (a kind uvt_start() refuses is never handed out anyway). */
  {
    size_t i;
    for (i = 0; i < ds->marks_n; i++) {
      err = uvt_reserve_ids(ds->reg, ds->marks[i].kind, ds->marks[i].high);
      if (err != 0 && err != UV_EINVAL)
        goto fail;
    }
    err = 0;
  }
  /* Delivered tasks are gone for good now. */
  {
    struct uvt__link *l, *next;
    for (l = ds->entries.next; l != &ds->entries; l = next) {
      uvt__dentry_t *e = uvt__container_of(l, uvt__dentry_t, link);
      next = l->next;
      if (e->delivered) {
        unlink_files(ds, e->key, e->flags);
        entry_unlink(ds, e);
        entry_free(e);
      }
    }
  }
  if ((err = watch_start(ds)) != 0)
    goto fail;
  ps->dstate = ds;
  ps->dstate_close = uvt__durable_close;
  ps->dstate_free = uvt__durable_free;
  return 0;
fail:
  /* Nothing was started: what opened closes, the state goes once its
   * handles' close callbacks ran. */
  ps->dstate = ds;
  ds->failed_closes = uvt__durable_close(ps, NULL);
  ps->dstate = NULL;
  if (ds->failed_closes == 0)
    free_state(ds);
  return err;
}

static void failed_closed(uv_handle_t *h) {
  uvt__dstate_t *ds = h->data;
  if (--ds->failed_closes == 0)
    free_state(ds);
}

/* `on_closed` NULL: a start that failed (failed_closed frees the state);
 * else the context's close, whose callback counts its holds (data: the
 * context). */
static void close_one(uvt__dstate_t *ds, uv_handle_t *h, int *init,
                      uv_close_cb on_closed, unsigned *n) {
  if (!*init)
    return;
  *init = 0;
  h->data = on_closed == NULL ? (void *)ds : (void *)ds->ps;
  uv_close(h, on_closed == NULL ? failed_closed : on_closed);
  (*n)++;
}

unsigned uvt__durable_close(uvt__procs_t *ps, uv_close_cb on_closed) {
  uvt__dstate_t *ds = ps->dstate;
  unsigned n = 0;
  if (ds == NULL)
    return 0;
  close_one(ds, (uv_handle_t *)&ds->idle, &ds->idle_init, on_closed, &n);
  close_one(ds, (uv_handle_t *)&ds->poll, &ds->poll_init, on_closed, &n);
  uvt__journal_close(&ds->journal);
  if (ds->dirfd >= 0)
    close(ds->dirfd);
  ds->dirfd = -1;
  return n;
}

static void free_state(uvt__dstate_t *ds) {
  struct uvt__link *l;
  while ((l = uvt__list_pop(&ds->entries)) != NULL) {
    uvt__dentry_t *e = uvt__container_of(l, uvt__dentry_t, link);
    if (e->proc != NULL)
      e->proc->dur = NULL;
    entry_free(e);
  }
  while (ds->marks_n > 0)
    uvt__free(ds->marks[--ds->marks_n].kind);
  uvt__free(ds->marks);
  uvt__free(ds->tailq);
  uvt__free(ds->path);
  uvt__free(ds);
}

void uvt__durable_free(uvt__procs_t *ps) {
  if (ps->dstate == NULL)
    return;
  free_state(ps->dstate);
  ps->dstate = NULL;
}

/* ---- public ---------------------------------------------------------- */

int uvt_process_adopt_all(uvt_registry_t *reg, const char *state_dir,
                          uvt_agent_t *owner) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__procs_t *ps;
  struct uvt__link *l, *next;
  int adopted = 0;
  int err;

  if (reg == NULL || state_dir == NULL || state_dir[0] == '\0')
    return UV_EINVAL;
  if ((err = uvt__procs_get(reg, &ps)) != 0)
    return err;
  if (ps->dstate == NULL) {
    if ((err = state_open(ps, state_dir)) != 0)
      return err;
  } else if (!same_dir(ps->dstate, state_dir)) {
    return UV_EINVAL; /* one state directory per registry */
  }
  for (l = ps->dstate->entries.next; l != &ps->dstate->entries; l = next) {
    uvt__dentry_t *e = uvt__container_of(l, uvt__dentry_t, link);
    next = l->next;
    if (e->proc != NULL || e->delivered || !owner_matches(e, owner))
      continue;
    err = adopt_one(ps, e, owner);
    if (err == 0) {
      adopted++;
    } else if (err == UVT_ECLOSING || err == UVT_ESTALE) {
      return err;
    } else {
      uvt_log(reg, UVT_LOG_WARN, "durable task %s (%s) not taken back: %s",
              e->id, e->label, uvt_err_name(err));
    }
  }
  return adopted;
}

int uvt_process_stop_durable(uvt_registry_t *reg, int on) {
  UVT_LOOP_ONLY(reg);
  uvt__procs_t *ps;
  int err;
  if (reg == NULL)
    return UV_EINVAL;
  if ((err = uvt__procs_get(reg, &ps)) != 0)
    return err;
  if (ps->dstate == NULL)
    return UV_EINVAL;
  ps->dstate->stop_durable = on != 0;
  return 0;
}

int uvt__durable_stopping(const uvt__proc_t *p) {
  return p->procs == NULL || p->procs->dstate == NULL ||
         p->procs->dstate->stop_durable;
}

int uvt_process_is_durable(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller) {
  UVT_LOOP_ONLY(reg);
  uvt_task_t *t;
  uvt__proc_t *p;
  int err = uvt__proc_lookup(reg, id, caller, &t, &p);
  if (err != 0)
    return err;
  return p->dur != NULL || p->adopted || p->detached;
}
