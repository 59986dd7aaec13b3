/* The leaf journal (src/leaf/journal.c) on its own: the file that D-3's
 * durable tasks and E-15's Slurm records are kept in.  Each test makes its
 * own directory under $TMPDIR and checks what is on disk with plain reads,
 * not with the module itself.
 *
 *  - S-7: opened by descriptor, never through a symlink or into a file
 *    another user owns; a name is one path component;
 *  - one writer: the lock refuses a second open (UV_EBUSY) until the first
 *    closes;
 *  - D-3: a whole line or nothing: a write the disk refuses leaves no
 *    bytes; a last line without its newline is skipped and cut off, so the
 *    next append starts a line of its own;
 *  - D-6: a compaction replaces the file whole, and a failed or aborted
 *    one leaves the old file as it was, with no temporary file behind;
 *  - E-15: slots mode writes records in place, also after a compaction;
 *    write_at outside it is refused;
 *  - the word codec: any bytes round-trip, and a cut word is a prefix of
 *    the whole one (NUL-terminated, no stray bytes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "leaf/journal.h"

typedef struct {
  char dir[256];
} jdir_t;

static void jdir_make(jdir_t *d) {
  const char *tmp = getenv("TMPDIR");
  snprintf(d->dir, sizeof(d->dir), "%s/uvt-journal-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  assert_non_null(mkdtemp(d->dir));
}

static void jdir_path(const jdir_t *d, const char *name, char *out,
                      size_t size) {
  snprintf(out, size, "%s/%s", d->dir, name);
}

static void jdir_remove(jdir_t *d) {
  static const char *names[] = {"j",         "j.lock", "j.tmp",
                                "elsewhere", "link",   "sub"};
  char path[512];
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    jdir_path(d, names[i], path, sizeof(path));
    if (unlink(path) != 0)
      (void)rmdir(path);
  }
  assert_int_equal(rmdir(d->dir), 0); /* nothing else was left behind */
}

/* The file's bytes, NUL-terminated (at most size - 1). */
static size_t slurp(const jdir_t *d, const char *name, char *buf, size_t size) {
  char path[512];
  ssize_t n;
  int fd;
  jdir_path(d, name, path, sizeof(path));
  fd = open(path, O_RDONLY);
  if (fd < 0)
    return (size_t)-1;
  n = read(fd, buf, size - 1);
  close(fd);
  assert_true(n >= 0);
  buf[n] = '\0';
  return (size_t)n;
}

static void spit(const jdir_t *d, const char *name, const char *bytes) {
  char path[512];
  int fd;
  jdir_path(d, name, path, sizeof(path));
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, bytes, strlen(bytes)), (ssize_t)strlen(bytes));
  close(fd);
}

static int exists(const jdir_t *d, const char *name) {
  char path[512];
  struct stat st;
  jdir_path(d, name, path, sizeof(path));
  return lstat(path, &st) == 0;
}

/* Lines gathered by uvt__journal_read, joined with '|'. */
typedef struct {
  char all[4096];
  int n;
  int stop_at; /* return 7 at this line (1-based); 0: never */
} seen_t;

static int gather(void *arg, char *line, size_t len) {
  seen_t *s = arg;
  assert_int_equal(strlen(line), len);
  s->n++;
  if (s->all[0] != '\0')
    strncat(s->all, "|", sizeof(s->all) - strlen(s->all) - 1);
  strncat(s->all, line, sizeof(s->all) - strlen(s->all) - 1);
  return s->stop_at == s->n ? 7 : 0;
}

static void read_all(uvt__journal_t *j, seen_t *s) {
  memset(s, 0, sizeof(*s));
  assert_int_equal(uvt__journal_read(j, gather, s), 0);
}

/* S-7: bad names, symlinks, files that are not ours or not regular. */
static void test_journal_open_refuses(void **state) {
  uvt__journal_t j;
  jdir_t d;
  char path[512];
  char target[512];
  int dirfd;
  (void)state;

  jdir_make(&d);
  dirfd = open(d.dir, O_RDONLY | O_DIRECTORY);
  assert_true(dirfd >= 0);
  assert_int_equal(uvt__journal_open(&j, dirfd, "", 0), UV_EINVAL);
  assert_int_equal(uvt__journal_open(&j, dirfd, NULL, 0), UV_EINVAL);
  assert_int_equal(uvt__journal_open(&j, dirfd, "sub/j", 0), UV_EINVAL);
  {
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(uvt__journal_open(&j, dirfd, longname, 0), UV_EINVAL);
  }
  /* A symlink planted where the journal goes: not followed, not made. */
  jdir_path(&d, "elsewhere", target, sizeof(target));
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(symlink(target, path), 0);
  assert_int_equal(uvt__journal_open(&j, dirfd, "j", 0), UV_ELOOP);
  assert_false(exists(&d, "elsewhere"));
  assert_int_equal(unlink(path), 0);
  /* ... nor in place of the lock file. */
  jdir_path(&d, "j.lock", path, sizeof(path));
  assert_int_equal(symlink(target, path), 0);
  assert_int_equal(uvt__journal_open(&j, dirfd, "j", 1), UV_ELOOP);
  assert_false(exists(&d, "elsewhere"));
  assert_false(exists(&d, "j"));
  assert_int_equal(unlink(path), 0);
  /* A FIFO where the journal goes is not a regular file (and the open
   * must not hang on it: O_RDWR never blocks on a FIFO). */
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(uvt__journal_open(&j, dirfd, "j", 0), UV_EPERM);
  assert_int_equal(unlink(path), 0);
  /* A file another user owns (as root: chown it away). */
  if (geteuid() == 0) {
    spit(&d, "j", "x\n");
    assert_int_equal(chown(path, 65534, 65534), 0);
    assert_int_equal(uvt__journal_open(&j, dirfd, "j", 0), UV_EPERM);
    assert_int_equal(unlink(path), 0);
  }
  /* open_path: a symlinked directory is refused too. */
  jdir_path(&d, "link", path, sizeof(path));
  assert_int_equal(symlink(d.dir, path), 0);
  strncat(path, "/j", sizeof(path) - strlen(path) - 1);
  /* O_DIRECTORY with O_NOFOLLOW on a symlink: ENOTDIR. */
  assert_int_equal(uvt__journal_open_path(&j, path, 0), UV_ENOTDIR);
  assert_int_equal(uvt__journal_open_path(&j, "", 0), UV_EINVAL);
  close(dirfd);
  jdir_remove(&d);
}

/* One writer: the second open fails with UV_EBUSY while the first holds
 * the lock (flock is per open file: the same process is refused too). */
static void test_journal_one_writer(void **state) {
  uvt__journal_t a;
  uvt__journal_t b;
  jdir_t d;
  char path[512];
  (void)state;

  jdir_make(&d);
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(uvt__journal_open_path(&a, path, 1), 0);
  assert_int_equal(uvt__journal_open_path(&b, path, 1), UV_EBUSY);
  assert_int_equal(b.fd, -1);
  /* A reader without the lock may look. */
  assert_int_equal(uvt__journal_open_path(&b, path, 0), 0);
  uvt__journal_close(&b);
  uvt__journal_close(&a);
  assert_int_equal(uvt__journal_open_path(&b, path, 1), 0);
  uvt__journal_close(&b);
  uvt__journal_close(&b); /* twice is harmless */
  jdir_remove(&d);
}

static int fail_with;
static int fail_op;
static int fail_once(const char *name, int op) {
  (void)name;
  if (op != fail_op)
    return 0;
  return fail_with;
}

/* D-3: lines appended, read back in order; a refused write leaves
 * nothing; a torn last line is skipped and cut off. */
static void test_journal_whole_lines(void **state) {
  uvt__journal_t j;
  jdir_t d;
  char path[512];
  char big[2000];
  seen_t s;
  (void)state;

  jdir_make(&d);
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  assert_int_equal(uvt__journal_append(&j, "one", 3), 0);
  assert_int_equal(uvt__journal_appendf(&j, "two %d", 2), 0);
  /* Longer than the small buffer: still one line. */
  memset(big, 'b', sizeof(big));
  assert_int_equal(uvt__journal_append(&j, big, sizeof(big)), 0);
  assert_int_equal(j.lines, 3);
  /* A full disk: the line is refused, and no byte of it is in the file. */
  fail_op = 'a';
  fail_with = ENOSPC;
  uvt__journal_fault = fail_once;
  assert_int_equal(uvt__journal_append(&j, "lost", 4), UV_ENOSPC);
  uvt__journal_fault = NULL;
  assert_int_equal(uvt__journal_append(&j, "three", 5), 0);
  read_all(&j, &s);
  assert_int_equal(s.n, 4);
  assert_int_equal(j.lines, 4);
  assert_null(strstr(s.all, "lost"));
  assert_true(strncmp(s.all, "one|two 2|bbbb", 14) == 0);
  assert_true(strcmp(s.all + strlen(s.all) - 6, "|three") == 0);
  uvt__journal_close(&j);
  assert_int_equal(uvt__journal_append(&j, "x", 1), UV_EBADF);
  assert_int_equal(uvt__journal_read(&j, gather, &s), UV_EBADF);

  uvt__journal_close(&j);
  jdir_remove(&d);
}

static void test_journal_torn_line(void **state) {
  uvt__journal_t j;
  jdir_t d;
  char path[512];
  char buf[256];
  seen_t s;
  (void)state;

  jdir_make(&d);
  jdir_path(&d, "j", path, sizeof(path));
  spit(&d, "j", "a 1\nb 2\nc 3-torn");
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  read_all(&j, &s);
  assert_string_equal(s.all, "a 1|b 2");
  assert_int_equal(j.lines, 2);
  /* Cut off on disk, so the next line is a line of its own. */
  assert_int_equal(slurp(&d, "j", buf, sizeof(buf)), 8);
  assert_int_equal(uvt__journal_append(&j, "d 4", 3), 0);
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf),
                      "a 1\nb 2\nd 4\n");
  /* fn's nonzero return stops the read and is returned. */
  memset(&s, 0, sizeof(s));
  s.stop_at = 2;
  assert_int_equal(uvt__journal_read(&j, gather, &s), 7);
  assert_string_equal(s.all, "a 1|b 2");
  /* A NULL fn only counts. */
  assert_int_equal(uvt__journal_read(&j, NULL, NULL), 0);
  assert_int_equal(j.lines, 3);
  uvt__journal_close(&j);
  jdir_remove(&d);
}

typedef struct {
  int next;
  int bad;
} order_t;

static int in_order(void *arg, char *line, size_t len) {
  order_t *o = arg;
  char want[200];
  int n = snprintf(want, sizeof(want), "line %d ", o->next);
  if (len != (size_t)n + (size_t)(o->next % 150) ||
      strncmp(line, want, (size_t)n) != 0 ||
      strspn(line + n, "x") != (size_t)(o->next % 150))
    o->bad++;
  o->next++;
  return 0;
}

/* A file larger than the read's first buffer (64 KiB), lines across its
 * edges: every line whole, in order. */
static void test_journal_read_large(void **state) {
  static const char xs[] =
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxxx";
  uvt__journal_t j;
  jdir_t d;
  char path[512];
  char line[200];
  order_t o = {0, 0};
  int i;
  (void)state;

  jdir_make(&d);
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  for (i = 0; i < 2000; i++) {
    int n = snprintf(line, sizeof(line), "line %d %.*s", i, i % 150, xs);
    assert_int_equal(uvt__journal_append(&j, line, (size_t)n), 0);
  }
  uvt__journal_close(&j);
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  assert_int_equal(uvt__journal_read(&j, in_order, &o), 0);
  assert_int_equal(o.next, 2000);
  assert_int_equal(o.bad, 0);
  assert_int_equal(j.lines, 2000);
  uvt__journal_close(&j);
  jdir_remove(&d);
}

typedef struct {
  const char *lines[4];
  int abort_with;
} emit_t;

static int emit_lines(void *arg, uvt__journal_t *out) {
  emit_t *e = arg;
  int i;
  for (i = 0; i < 4 && e->lines[i] != NULL; i++) {
    int err = uvt__journal_append(out, e->lines[i], strlen(e->lines[i]));
    if (err != 0)
      return err;
  }
  return e->abort_with;
}

/* D-6: a compaction replaces the journal whole; a failure at any step
 * (emit's own, the new file's write, the rename) leaves the old file as
 * it was and no temporary file; the journal still takes lines after. */
static void test_journal_compact(void **state) {
  static const int ops[] = {'c', 'a', 'r'};
  uvt__journal_t j;
  jdir_t d;
  char path[512];
  char buf[256];
  emit_t e = {{"new 1", "new 2", NULL, NULL}, 0};
  size_t i;
  (void)state;

  jdir_make(&d);
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  assert_int_equal(uvt__journal_append(&j, "old 1", 5), 0);
  assert_int_equal(uvt__journal_append(&j, "old 2", 5), 0);
  assert_int_equal(uvt__journal_append(&j, "old 3", 5), 0);
  /* emit aborts. */
  e.abort_with = UV_ECANCELED;
  assert_int_equal(uvt__journal_compact(&j, emit_lines, &e), UV_ECANCELED);
  e.abort_with = 0;
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf),
                      "old 1\nold 2\nold 3\n");
  assert_false(exists(&d, "j.tmp"));
  /* The disk fails at each step. */
  fail_with = ENOSPC;
  uvt__journal_fault = fail_once;
  for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    fail_op = ops[i];
    assert_int_equal(uvt__journal_compact(&j, emit_lines, &e), UV_ENOSPC);
    assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf),
                        "old 1\nold 2\nold 3\n");
    assert_false(exists(&d, "j.tmp"));
  }
  uvt__journal_fault = NULL;
  /* A stale temporary file from a host that died in a compaction. */
  spit(&d, "j.tmp", "stale\n");
  assert_int_equal(uvt__journal_compact(&j, emit_lines, &e), 0);
  assert_int_equal(j.lines, 2);
  assert_false(exists(&d, "j.tmp"));
  assert_int_equal(uvt__journal_append(&j, "after", 5), 0);
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf),
                      "new 1\nnew 2\nafter\n");
  /* The lock is kept across the compaction (the inode changed). */
  {
    uvt__journal_t other;
    assert_int_equal(uvt__journal_open_path(&other, path, 1), UV_EBUSY);
  }
  uvt__journal_close(&j);
  jdir_remove(&d);
}

/* E-15: slots mode writes records in place, before and after a
 * compaction (which must not put the new file back in append mode). */
static void test_journal_slots(void **state) {
  uvt__journal_t j;
  jdir_t d;
  char path[512];
  char buf[256];
  emit_t e = {{"AAAA", "BBBB", NULL, NULL}, 0};
  (void)state;

  jdir_make(&d);
  jdir_path(&d, "j", path, sizeof(path));
  assert_int_equal(uvt__journal_open_path(&j, path, 1), 0);
  /* Not in slots mode: write_at is refused (it would land at the end). */
  assert_int_equal(uvt__journal_write_at(&j, 0, "x", 1), UV_EINVAL);
  assert_int_equal(uvt__journal_append(&j, "0000", 4), 0);
  assert_int_equal(uvt__journal_append(&j, "1111", 4), 0);
  assert_int_equal(uvt__journal_slots(&j), 0);
  assert_int_equal(uvt__journal_write_at(&j, 5, "2222\n", 5), 0);
  assert_int_equal(uvt__journal_write_at(&j, 0, "3333\n", 5), 0);
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf), "3333\n2222\n");
  assert_int_equal(uvt__journal_sync(&j), 0);
  /* A write_at the disk refuses. */
  fail_op = 'w';
  fail_with = EIO;
  uvt__journal_fault = fail_once;
  assert_int_equal(uvt__journal_write_at(&j, 0, "9999\n", 5), UV_EIO);
  uvt__journal_fault = NULL;
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf), "3333\n2222\n");
  /* Compacted: still in place afterwards. */
  assert_int_equal(uvt__journal_compact(&j, emit_lines, &e), 0);
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf), "AAAA\nBBBB\n");
  assert_int_equal(uvt__journal_write_at(&j, 0, "CCCC\n", 5), 0);
  assert_string_equal((slurp(&d, "j", buf, sizeof(buf)), buf), "CCCC\nBBBB\n");
  uvt__journal_close(&j);
  assert_int_equal(uvt__journal_write_at(&j, 0, "x", 1), UV_EBADF);
  assert_int_equal(uvt__journal_sync(&j), UV_EBADF);
  assert_int_equal(uvt__journal_slots(&j), UV_EBADF);
  jdir_remove(&d);
}

/* Words: any bytes round-trip through enc/dec; a cut word is a prefix
 * of the whole one and NUL-terminated; bad words are refused. */
static void test_journal_words(void **state) {
  char all[256];
  char word[3 * 256 + 2];
  char cut[16];
  char line[64];
  char *w[4];
  size_t need;
  size_t i;
  long n;
  (void)state;

  for (i = 0; i < sizeof(all); i++)
    all[i] = (char)i;
  need = uvt__journal_enc(word, sizeof(word), all, sizeof(all));
  assert_true(need < sizeof(word));
  assert_int_equal(strlen(word), need);
  assert_null(strchr(word, ' '));
  assert_null(strchr(word, '\n'));
  n = uvt__journal_dec(word);
  assert_int_equal(n, (long)sizeof(all));
  assert_memory_equal(word, all, sizeof(all));

  /* Cut at every size: a prefix, ending on a whole unit, terminated. */
  need = uvt__journal_enc(word, sizeof(word), "a b%c", 5);
  assert_string_equal(word, "=a%20b%25c");
  for (i = 1; i <= sizeof(cut); i++) {
    size_t got;
    memset(cut, '#', sizeof(cut));
    assert_int_equal(uvt__journal_enc(cut, i, "a b%c", 5), need);
    got = strlen(cut);
    assert_true(got < i);
    assert_memory_equal(cut, word, got);
    /* Never half a %XX. */
    assert_true(got == 0 || got == 1 || got == 2 || got == 5 || got == 6 ||
                got == 9 || got == 10);
  }
  assert_int_equal(uvt__journal_enc(cut, 0, "abc", 3), 4);

  assert_int_equal(uvt__journal_dec(strcpy(cut, "abc")), -1);
  assert_int_equal(uvt__journal_dec(strcpy(cut, "=a%2")), -1);
  assert_int_equal(uvt__journal_dec(strcpy(cut, "=a%zz")), -1);
  assert_int_equal(uvt__journal_dec(strcpy(cut, "=")), 0);

  strcpy(line, "run =a%20b 7 x");
  assert_int_equal(uvt__journal_words(line, w, 4), 4);
  assert_string_equal(w[0], "run");
  assert_string_equal(w[1], "=a%20b");
  assert_string_equal(w[3], "x");
  strcpy(line, "a b c d e");
  assert_int_equal(uvt__journal_words(line, w, 2), 2);
  assert_string_equal(w[0], "a");
  assert_int_equal(uvt__journal_words(strcpy(line, ""), w, 2), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_journal_open_refuses),
      cmocka_unit_test(test_journal_one_writer),
      cmocka_unit_test(test_journal_whole_lines),
      cmocka_unit_test(test_journal_torn_line),
      cmocka_unit_test(test_journal_read_large),
      cmocka_unit_test(test_journal_compact),
      cmocka_unit_test(test_journal_slots),
      cmocka_unit_test(test_journal_words),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
