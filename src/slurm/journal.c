/* E-5, E-9, E-15: the engine's journal, one record per task.
 *
 * Each task has one fixed-size record (UVT__JOURNAL_REC bytes, a line of
 * text padded with spaces), written in place with one pwrite(2) at its
 * slot: a read that moves the offsets rewrites the task's record, it does
 * not add a line (E-15).  A record never crosses a 512-byte boundary, so a
 * host that dies mid-write leaves the old record or the new one.  A task
 * whose end was delivered frees its slot for the next task; when the
 * engine opens the journal it writes the live records to a new file and
 * renames it over the old one, so the file holds the live tasks only.
 *
 *   U1 <state> id=<id> key=<key> job=<job> out=<off> err=<off>
 *      uid=<uid> cluster=<name> limit=<s> array=<0|1>
 *
 * state: T (submitting: no job id yet), J (the job id is known), D (its
 * end was delivered; the slot is free).  uid, cluster and the job name
 * uvt-<key> are what adoption checks with the controller (E-9).
 *
 * Ids are never handed out again for a journal's tasks (E-5): the open
 * notes the highest id number any record names, delivered ones too
 * (e->id_high; the engine raises the registry's counter past it), and
 * the compaction keeps that number in the file: a D record of it when no
 * live record has it (its slot free, so the next task, whose id is
 * higher, writes over it).  A new task's id is above every earlier one,
 * so the file's highest id stays the highest ever handed out.
 *
 * The v3 journal (a line per event: "T id key", "J id job",
 * "O id out err", "D id") is read too and rewritten in this form.
 *
 * One engine at a time: the open takes an exclusive flock(2) on
 * "<journal>.lock" beside it (the journal's own inode changes at each
 * compaction), held until the engine closes or its process ends; a
 * second engine on the journal, in any process, fails with UV_EBUSY.
 *
 * The file itself is src/leaf/journal.h's, shared with the durable tasks
 * of the process producer (D-3): opened relative to its directory's
 * descriptor (O_DIRECTORY|O_NOFOLLOW, then O_NOFOLLOW, a regular file of
 * the effective user: S-7), read with a torn last record cut off, and
 * rewritten by a compaction (a new file fsync'd, renamed over the old
 * one, the directory fsync'd), in slots mode: records in place.
 * Callers hold the engine's mutex (or the thread has not started). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leaf/ids.h"
#include "slurm-internal.h"

#define REC UVT__JOURNAL_REC

static void journal_failed(uvt_slurm_engine_t *e, int err) {
  /* Told on the loop thread (engine.c), whichever thread wrote. */
  e->journal_err = err;
  uv_async_send(&e->async);
}

/* Format one record (exactly REC bytes, the last a newline). */
static int format_rec(char state, const char *id, const char *key, uint32_t job,
                      uint64_t out, uint64_t err, unsigned uid,
                      const char *cluster, uint32_t limit_s, int array,
                      char rec[REC]) {
  int n = snprintf(
      rec, REC,
      "U1 %c id=%s key=%s job=%u out=%llu err=%llu uid=%u "
      "cluster=%s limit=%u array=%d",
      state, id, key, job, (unsigned long long)out, (unsigned long long)err,
      uid, cluster != NULL && cluster[0] ? cluster : "-", limit_s, array);
  if (n < 0 || n >= REC - 1)
    return UV_E2BIG;
  memset(rec + n, ' ', (size_t)(REC - 1 - n));
  rec[REC - 1] = '\n';
  return 0;
}

/* A slot for a new record: a freed one, else the next at the end. */
static int64_t take_slot(uvt_slurm_engine_t *e) {
  if (e->free_slots_n > 0)
    return e->free_slots[--e->free_slots_n];
  return e->slots++;
}

static void free_slot(uvt_slurm_engine_t *e, int64_t slot) {
  if (e->free_slots_n == e->free_slots_cap) {
    size_t cap = e->free_slots_cap ? e->free_slots_cap * 2 : 16;
    int64_t *g = uvt__realloc(e->free_slots, cap * sizeof(*g));
    if (g == NULL)
      return; /* the slot is lost until the next compaction */
    e->free_slots = g;
    e->free_slots_cap = cap;
  }
  e->free_slots[e->free_slots_n++] = slot;
}

void uvt__journal_put(uvt_slurm_engine_t *e, uvt__sjob_t *j, char state) {
  char rec[REC];
  int err;
  if (e->journal.fd < 0)
    return;
  if (j->slot < 0) {
    if (state == 'D')
      return;
    j->slot = take_slot(e);
  }
  err = format_rec(state, j->id, j->key, j->job, j->out_off, j->err_off, e->uid,
                   e->cluster, j->limit_s, j->array != NULL, rec);
  if (err == 0)
    err = uvt__journal_write_at(&e->journal, (uint64_t)j->slot * REC, rec, REC);
  if (err != 0)
    journal_failed(e, err);
  if (state == 'D') {
    free_slot(e, j->slot);
    j->slot = -1;
  }
  e->journal_sync = 1;
}

void uvt__sjournal_sync(uvt_slurm_engine_t *e) {
  (void)uvt__journal_sync(&e->journal);
}

/* ---- Reading ------------------------------------------------------------ */

static uvt__journal_entry_t *find(uvt__journal_entry_t *a, size_t n,
                                  const char *id) {
  size_t i;
  for (i = 0; i < n; i++)
    if (strcmp(a[i].id, id) == 0)
      return &a[i];
  return NULL;
}

static uvt__journal_entry_t *add(uvt__journal_entry_t **a, size_t *n,
                                 size_t *cap) {
  uvt__journal_entry_t *x;
  if (*n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 16;
    uvt__journal_entry_t *g = uvt__realloc(*a, ncap * sizeof(**a));
    if (g == NULL)
      return NULL;
    *a = g;
    *cap = ncap;
  }
  x = &(*a)[(*n)++];
  memset(x, 0, sizeof(*x));
  return x;
}

/* One "name=value" field of a record into buf; 0 or -1. */
static int field(const char *rec, const char *name, char *buf, size_t size) {
  size_t len = strlen(name);
  const char *p = rec;
  while ((p = strstr(p, name)) != NULL) {
    if ((p == rec || p[-1] == ' ') && p[len] == '=') {
      size_t n = strcspn(p + len + 1, " \n");
      if (n == 0 || n >= size)
        return -1;
      memcpy(buf, p + len + 1, n);
      buf[n] = '\0';
      return 0;
    }
    p += len;
  }
  return -1;
}

static int field_u64(const char *rec, const char *name, uint64_t *v) {
  char buf[32], *end;
  if (field(rec, name, buf, sizeof(buf)) != 0)
    return -1;
  errno = 0;
  *v = strtoull(buf, &end, 10);
  return errno != 0 || *end != '\0' ? -1 : 0;
}

/* A record of the current form; 0, or -1 for one that does not parse
 * (skipped: a record never written whole). */
static int parse_rec(const char *line, uvt__journal_entry_t *x) {
  uint64_t job, out, err, uid, limit, array;
  char state;
  if (strncmp(line, "U1 ", 3) != 0 || line[3] == '\0' || line[4] != ' ')
    return -1;
  state = line[3];
  if ((state != 'T' && state != 'J' && state != 'D') ||
      field(line, "id", x->id, sizeof(x->id)) != 0 ||
      field(line, "key", x->key, sizeof(x->key)) != 0 ||
      field(line, "cluster", x->cluster, sizeof(x->cluster)) != 0 ||
      field_u64(line, "job", &job) != 0 || field_u64(line, "out", &out) != 0 ||
      field_u64(line, "err", &err) != 0 || field_u64(line, "uid", &uid) != 0 ||
      field_u64(line, "limit", &limit) != 0 ||
      field_u64(line, "array", &array) != 0 || job > UINT32_MAX ||
      uid > UINT32_MAX || limit > UINT32_MAX)
    return -1;
  if (strcmp(x->cluster, "-") == 0)
    x->cluster[0] = '\0';
  x->job = (uint32_t)job;
  x->out_off = out;
  x->err_off = err;
  x->uid = (uint32_t)uid;
  x->has_identity = 1;
  x->limit_s = (uint32_t)limit;
  x->array = array != 0;
  x->done = state == 'D';
  return 0;
}

/* The v3 form: a line per event. */
static int parse_v3(const char *line, uvt__journal_entry_t **a, size_t *n,
                    size_t *cap) {
  char id[UVT_ID_MAX], key[UVT__SLURM_KEY_MAX];
  unsigned long long a1, a2;
  unsigned job;
  uvt__journal_entry_t *x;
  if (sscanf(line, "T %63s %63s", id, key) == 2) {
    /* An id used again by a later host (its earlier job ended): the
     * later task replaces it. */
    if ((x = find(*a, *n, id)) == NULL && (x = add(a, n, cap)) == NULL)
      return UV_ENOMEM;
    memset(x, 0, sizeof(*x));
    snprintf(x->id, sizeof(x->id), "%s", id);
    snprintf(x->key, sizeof(x->key), "%s", key);
  } else if (sscanf(line, "J %63s %u", id, &job) == 2) {
    if ((x = find(*a, *n, id)) != NULL)
      x->job = job;
  } else if (sscanf(line, "O %63s %llu %llu", id, &a1, &a2) == 3) {
    if ((x = find(*a, *n, id)) != NULL) {
      x->out_off = a1;
      x->err_off = a2;
    }
  } else if (sscanf(line, "D %63s", id) == 1) {
    if ((x = find(*a, *n, id)) != NULL)
      x->done = 1;
  }
  return 0;
}

/* What the journal holds, as uvt__journal_read hands it over line by
 * line (a torn last line is cut off there). */
typedef struct {
  uvt__journal_entry_t *a;
  size_t n, cap;
  uint64_t high;            /* the highest id number named (E-5) */
  char high_id[UVT_ID_MAX]; /* ... that id */
} load_t;

static void note_id(load_t *l, const char *id) {
  uint64_t n = uvt__id_number("slurm", id);
  if (n > l->high) {
    l->high = n;
    snprintf(l->high_id, sizeof(l->high_id), "%s", id);
  }
}

static int load_line(void *arg, char *line, size_t len) {
  load_t *l = arg;
  uvt__journal_entry_t r, *x;
  (void)len;
  if (strncmp(line, "U1 ", 3) != 0) {
    char id[UVT_ID_MAX];
    if (sscanf(line, "%*1[TJOD] %63s", id) == 1)
      note_id(l, id);
    return parse_v3(line, &l->a, &l->n, &l->cap);
  }
  memset(&r, 0, sizeof(r));
  if (parse_rec(line, &r) != 0)
    return 0;
  note_id(l, r.id); /* delivered ones too (E-5) */
  if (r.done)
    return 0;
  /* One record per id: a later slot is a later task. */
  if ((x = find(l->a, l->n, r.id)) == NULL &&
      (x = add(&l->a, &l->n, &l->cap)) == NULL)
    return UV_ENOMEM;
  *x = r;
  return 0;
}

/* The live entries, one record each in slot order, into the compaction's
 * new file (E-15). */
typedef struct {
  uvt_slurm_engine_t *e;
  uvt__journal_entry_t *a;
  size_t n;
  int64_t slots;
  const char *high_id; /* E-5: the highest id, kept as D when not live */
  int64_t high_slot;   /* ... its slot, or -1 */
} emit_t;

static int emit_live(void *arg, uvt__journal_t *out) {
  emit_t *m = arg;
  char rec[REC];
  size_t i;
  int err = 0;
  for (i = 0; i < m->n && err == 0; i++) {
    uvt__journal_entry_t *x = &m->a[i];
    if (x->done)
      continue;
    err = format_rec(x->job != 0 ? 'J' : 'T', x->id, x->key, x->job, x->out_off,
                     x->err_off, x->uid, x->cluster, x->limit_s, x->array, rec);
    /* The record's newline is the one the append adds. */
    if (err == 0)
      err = uvt__journal_append(out, rec, REC - 1);
    x->slot = m->slots++;
  }
  if (err == 0 && m->high_id[0] != '\0') {
    for (i = 0; i < m->n; i++)
      if (!m->a[i].done && strcmp(m->a[i].id, m->high_id) == 0)
        return 0; /* a live record keeps it */
    err = format_rec('D', m->high_id, "-", 0, 0, 0, m->e->uid, m->e->cluster, 0,
                     0, rec);
    if (err == 0)
      err = uvt__journal_append(out, rec, REC - 1);
    m->high_slot = m->slots++;
  }
  return err;
}

int uvt__sjournal_open(uvt_slurm_engine_t *e, const char *path) {
  load_t l;
  emit_t m;
  size_t i, k;
  int err;

  memset(&l, 0, sizeof(l));
  /* One engine at a time (E-5): the lock on <journal>.lock is held while
   * the engine lives, as a durable tasks' directory's journal.lock is. */
  if ((err = uvt__journal_open_path(&e->journal, path, 1)) != 0)
    return err;
  if ((err = uvt__journal_slots(&e->journal)) != 0 ||
      (err = uvt__journal_read(&e->journal, load_line, &l)) != 0)
    goto fail;
  /* E-15: the file is written again with the live tasks only (v3's
   * entries too: they carry no user or cluster, so the controller's
   * answer is all adoption checks for them, E-9). */
  m.e = e;
  m.a = l.a;
  m.n = l.n;
  m.slots = 0;
  m.high_id = l.high_id;
  m.high_slot = -1;
  if ((err = uvt__journal_compact(&e->journal, emit_live, &m)) != 0)
    goto fail;
  e->slots = m.slots;
  e->id_high = l.high;
  if (m.high_slot >= 0)
    free_slot(e, m.high_slot); /* the next task writes a higher id there */
  /* Only the live ones are kept for adoption. */
  for (i = 0, k = 0; i < l.n; i++)
    if (!l.a[i].done)
      l.a[k++] = l.a[i];
  e->loaded = l.a;
  e->loaded_n = k;
  return 0;
fail:
  uvt__free(l.a);
  uvt__journal_close(&e->journal);
  return err;
}
