/* The process producer's output (P-OUT-1..3) and cases C-09..C-12. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-process-util.h"

/* ---------------------------------------------------------------------- */
/* Output                                                                  */

/* P-OUT-1: stdout, then "[stderr]" and stderr; reads consume. */
static void test_out_streams(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=out-err", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "out1\n[stderr]\nerr1\n");
  wait_end(&w);
  sb_free(&sb);

  /* A partial stdout line still leaves "[stderr]" on a line of its own. */
  assert_int_equal(start_sh(&f, NULL, "printf out; printf err >&2", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "out\n[stderr]\nerr");
  wait_end(&w);
  sb_free(&sb);

  /* Live reads consume what they return. */
  assert_int_equal(
      start_sh(&f, NULL, "echo one; echo two >&2; read x; echo three", id), 0);
  /* stdin is /dev/null: `read` returns at once; wait for the end. */
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "one\nthree\n[stderr]\ntwo\n");
  sb_free(&sb);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 0);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

static void pattern(char *buf, size_t from, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    buf[i] = (char)('0' + (from + i) % 10);
}

/* P-OUT-2: the oldest unread bytes are dropped beyond the cap and the next
 * read begins with a notice; per stream. */
static void test_out_cap(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  char want[2048];
  size_t n;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.output_cap_bytes = 1000;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=write-bytes", "5000", NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  n = (size_t)snprintf(want, sizeof(want), "[... 4000 bytes dropped ...]\n");
  pattern(want + n, 4000, 1000);
  assert_int_equal(sb.len, n + 1000);
  assert_memory_equal(sb.buf, want, n + 1000);
  wait_end(&w);
  sb_free(&sb);

  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=write-bytes", "5000", "2", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  n = (size_t)snprintf(want, sizeof(want),
                       "[stderr]\n[... 4000 bytes dropped ...]\n");
  pattern(want + n, 4000, 1000);
  assert_int_equal(sb.len, n + 1000);
  assert_memory_equal(sb.buf, want, n + 1000);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* N-12: stdout_pipe_bytes is the kernel buffer of the child's stdout
 * pipe: 256 KiB when asked for, the system's without (not 256 KiB),
 * larger than 1 MiB taken as 1 MiB; a terminal has no pipe to size. */
static int pipe_size_of(fixture_t *f, size_t bytes, int pty) {
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int n;

  test_opts(&o);
  o.stdout_pipe_bytes = bytes;
  o.pty = pty;
  assert_int_equal(
      start_helper(f, NULL, &o, "--helper=pipe-size", NULL, NULL, id), 0);
  wait_task(f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(f, id, NULL, &sb);
  wait_end(&w);
  assert_non_null(sb.buf);
  n = atoi(sb.buf);
  sb_free(&sb);
  return n;
}

static void test_out_pipe_bytes(void **state) {
  fixture_t f;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(pipe_size_of(&f, 256 * 1024, 0), 256 * 1024);
  assert_true(pipe_size_of(&f, 0, 0) > 0);
  assert_int_not_equal(pipe_size_of(&f, 0, 0), 256 * 1024);
  assert_int_equal(pipe_size_of(&f, (size_t)64 << 20, 0), 1024 * 1024);
  assert_int_equal(pipe_size_of(&f, 256 * 1024, 1), -1);
  fixture_close(&f);
}

static int read_nonempty(void *arg) {
  read_wait_t *rw = arg;
  read_into(rw->f, rw->id, rw->caller, rw->sb);
  return rw->sb->len > 0;
}

/* P-OUT-3: an incomplete trailing sequence waits for its last byte. */
static void test_out_utf8_hold(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  read_wait_t rw;
  int pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=utf8-split", NULL, NULL, id), 0);
  pid = task_pid(&f, id, NULL);
  rw.f = &f;
  rw.id = id;
  rw.caller = NULL;
  rw.sb = &sb;
  assert_true(run_until(&f, read_nonempty, &rw, 10000));
  /* "a" arrived together with two bytes of a three-byte character. */
  assert_int_equal(sb.len, 1);
  assert_string_equal(sb.buf, "a");
  sb_free(&sb);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "\xe4\xbd\xa0"
                              "b\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-OUT-3: the same with a read that fills most of the stream's first
 * ring (3000 of 4096 bytes): the held bytes survive the read and complete
 * the character later. */
static void test_out_utf8_hold_big(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  read_wait_t rw;
  int pid;
  size_t k;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=utf8-split", "3000", NULL, id), 0);
  pid = task_pid(&f, id, NULL);
  rw.f = &f;
  rw.id = id;
  rw.caller = NULL;
  rw.sb = &sb;
  assert_true(run_until(&f, read_nonempty, &rw, 10000));
  /* One write of at most PIPE_BUF bytes arrives whole. */
  assert_int_equal(sb.len, 3000);
  for (k = 0; k < sb.len; k++)
    if (sb.buf[k] != 'a')
      break;
  assert_int_equal(k, 3000);
  sb_free(&sb);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "\xe4\xbd\xa0"
                              "b\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-OUT-3: bytes that are not UTF-8 pass through; at end of stream an
 * incomplete sequence is delivered as it is. */
static void test_out_utf8_invalid(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL, "printf '\\377\\376x\\n\\300'", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 5);
  assert_memory_equal(sb.buf, "\xff\xfex\n\xc0", 5);
  wait_end(&w);
  sb_free(&sb);
  assert_int_equal(start_sh(&f, NULL, "printf 'z\\344\\275'", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 3);
  assert_memory_equal(sb.buf, "z\xe4\xbd", 3);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* Length of the valid UTF-8 prefix of s[0, n): n when all of it is valid. */
static size_t utf8_valid_prefix(const unsigned char *s, size_t n) {
  size_t i = 0;
  size_t k;
  size_t need;
  while (i < n) {
    if (s[i] < 0x80)
      need = 1;
    else if (s[i] >= 0xC2 && s[i] <= 0xDF)
      need = 2;
    else if (s[i] >= 0xE0 && s[i] <= 0xEF)
      need = 3;
    else if (s[i] >= 0xF0 && s[i] <= 0xF4)
      need = 4;
    else
      return i;
    if (i + need > n)
      return i;
    for (k = 1; k < need; k++)
      if ((s[i + k] & 0xC0) != 0x80)
        return i;
    i += need;
  }
  return n;
}

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t all; /* text without drop notices */
  int reads;
  int bad_reads;    /* reads that were not whole UTF-8 */
  uint64_t dropped; /* sum of the notices */
  int notices;
  uvt_status_t status;
} utf8_reader_t;

static void utf8_read_once(utf8_reader_t *r) {
  uvt_read_t rd;
  const char *text;
  size_t len;
  unsigned long long n;
  const char *end;

  assert_int_equal(uvt_read(r->f->reg, r->id, NULL, &rd), 0);
  r->status = rd.snapshot.status;
  text = rd.text;
  len = rd.len;
  r->reads++;
  if (len > 4 && memcmp(text, "[... ", 5) == 0) {
    assert_int_equal(sscanf(text, "[... %llu bytes dropped ...]", &n), 1);
    end = memchr(text, '\n', len);
    assert_non_null(end);
    r->dropped += n;
    r->notices++;
    len -= (size_t)(end + 1 - text);
    text = end + 1;
  }
  /* The text after a notice starts on a character boundary and no read
   * ends inside a character. */
  if (utf8_valid_prefix((const unsigned char *)text, len) != len)
    r->bad_reads++;
  sb_add(&r->all, text, len);
  uvt_read_cleanup(&rd);
}

static void utf8_tick(uv_timer_t *t) {
  utf8_reader_t *r = t->data;
  utf8_read_once(r);
  if (uvt_status_is_terminal(r->status))
    uv_timer_stop(t);
}

static void utf8_run(size_t cap, utf8_reader_t *r) {
  static const char cmd[] =
      "for i in $(seq 50000); do printf '\xe4\xbd\xa0'; done; "
      "for i in $(seq 20000); do printf '\xf0\x9f\x8e\x89'; done";
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uv_timer_t t;

  memset(r, 0, sizeof(*r));
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = cmd;
  o.output_cap_bytes = cap;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  r->f = &f;
  r->id = id;
  assert_int_equal(uv_timer_init(&f.loop, &t), 0);
  t.data = r;
  uv_timer_start(&t, utf8_tick, 10, 10);
  while (uv_is_active((uv_handle_t *)&t))
    uv_run(&f.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, close_noop);
  fixture_close(&f);
}

/* C-10, P-OUT-3: no read ends inside a character; the bytes are exact; with
 * a small cap the text after a notice starts on a boundary and every byte is
 * either read or counted as dropped. */
static void test_c10_utf8(void **state) {
  utf8_reader_t r;
  size_t i;
  (void)state;

  utf8_run(1024 * 1024, &r);
  assert_int_equal(r.bad_reads, 0);
  assert_int_equal(r.notices, 0);
  assert_int_equal(r.all.len, 50000 * 3 + 20000 * 4);
  for (i = 0; i < 50000; i++)
    assert_memory_equal(r.all.buf + i * 3, "\xe4\xbd\xa0", 3);
  for (i = 0; i < 20000; i++)
    assert_memory_equal(r.all.buf + 150000 + i * 4, "\xf0\x9f\x8e\x89", 4);
  sb_free(&r.all);

  utf8_run(1001, &r);
  assert_int_equal(r.bad_reads, 0);
  assert_true(r.notices > 0);
  assert_int_equal(r.all.len + r.dropped, 50000 * 3 + 20000 * 4);
  assert_int_equal(utf8_valid_prefix((unsigned char *)r.all.buf, r.all.len),
                   r.all.len);
  sb_free(&r.all);
}

/* C-09, P-OUT-2: `yes` with a 1 MiB cap: memory stays bounded, the read
 * begins with a notice and ends with "y\n". */
static void test_c09_yes(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  struct rusage ru0, ru1;
  unsigned long long n;
  uvt_kill_result_t kr;
  (void)state;

  assert_int_equal(getrusage(RUSAGE_SELF, &ru0), 0);
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "yes";
  o.output_cap_bytes = 1024 * 1024;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  run_for(&f, 2000);
  read_into(&f, id, NULL, &sb);
  assert_true(sb.len > 1024 * 1024);
  assert_true(sb.len < 1024 * 1024 + 64);
  assert_int_equal(sscanf(sb.buf, "[... %llu bytes dropped ...]", &n), 1);
  assert_true(n > 0);
  assert_memory_equal(sb.buf + sb.len - 2, "y\n", 2);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  assert_int_equal(getrusage(RUSAGE_SELF, &ru1), 0);
  /* ru_maxrss is in KiB: growth well under 64 MiB. */
  assert_true(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024);
}

/* C-11: exit is seen before all output; nothing is lost. */
static void test_c11_exact(void **state) {
  enum { N = 200, PAR = 4 };
  fixture_t f;
  char id[PAR][UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int i, j;
  size_t k;
  (void)state;

  fixture_init(&f, NULL);
  for (i = 0; i < N; i += PAR) {
    for (j = 0; j < PAR; j++)
      assert_int_equal(start_sh(&f, NULL, "head -c 1048576 /dev/zero", id[j]),
                       0);
    for (j = 0; j < PAR; j++) {
      wait_task(&f, &w, id[j], 10000, NULL);
      assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
      wait_end(&w);
      while (read_into(&f, id[j], NULL, &sb) != UVT_COMPLETED)
        ;
      assert_int_equal(sb.len, 1048576);
      for (k = 0; k < sb.len; k++)
        if (sb.buf[k] != 0)
          break;
      assert_int_equal(k, sb.len);
      sb_free(&sb);
    }
  }
  fixture_close(&f);
}

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t sb;
  uvt_status_t status;
} poll_reader_t;

static void poll_tick(uv_timer_t *t) {
  poll_reader_t *r = t->data;
  r->status = read_into(r->f, r->id, NULL, &r->sb);
  if (uvt_status_is_terminal(r->status))
    uv_timer_stop(t);
}

/* C-12: the tail is not lost when the pipes close at exit. */
static void test_c12_tail(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  poll_reader_t r;
  uv_timer_t t;
  char *last;
  int lines = 0;
  size_t k;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(
      start_sh(&f, NULL, "for i in $(seq 1 20000); do echo line$i; done", id),
      0);
  memset(&r, 0, sizeof(r));
  r.f = &f;
  r.id = id;
  assert_int_equal(uv_timer_init(&f.loop, &t), 0);
  t.data = &r;
  uv_timer_start(&t, poll_tick, 10, 10);
  while (uv_is_active((uv_handle_t *)&t))
    uv_run(&f.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, close_noop);
  assert_int_equal(r.status, UVT_COMPLETED);
  for (k = 0; k < r.sb.len; k++)
    lines += r.sb.buf[k] == '\n';
  assert_int_equal(lines, 20000);
  assert_true(r.sb.len > 10);
  r.sb.buf[r.sb.len - 1] = '\0';
  last = strrchr(r.sb.buf, '\n');
  assert_non_null(last);
  assert_string_equal(last + 1, "line20000");
  sb_free(&r.sb);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_out_streams),      T(test_out_cap),
      T(test_out_utf8_hold),    T(test_out_utf8_hold_big),
      T(test_out_utf8_invalid), T(test_c10_utf8),
      T(test_c09_yes),          T(test_c11_exact),
      T(test_c12_tail),         T(test_out_pipe_bytes),
  };
  return PROCESS_TESTS("process-output", tests);
}
