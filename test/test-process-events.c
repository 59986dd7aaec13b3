/* Host-facing output: on_output (P-EVT-1), output_backpressure (P-OUT-4)
 * and the structured read (P-RES-1). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-process-util.h"

/* ---- loop iterations -------------------------------------------------- */

typedef struct {
  uv_prepare_t h;
  uint64_t n;
} iters_t;

static void on_prepare(uv_prepare_t *h) {
  ((iters_t *)h->data)->n++;
}

static void iters_start(fixture_t *f, iters_t *it) {
  memset(it, 0, sizeof(*it));
  assert_int_equal(uv_prepare_init(&f->loop, &it->h), 0);
  it->h.data = it;
  uv_prepare_start(&it->h, on_prepare);
  uv_unref((uv_handle_t *)&it->h);
}

static void iters_stop(iters_t *it) {
  uv_close((uv_handle_t *)&it->h, close_noop);
}

/* ---- an on_output host ------------------------------------------------ */

typedef struct {
  fixture_t *f;
  iters_t *it;
  char id[UVT_ID_MAX];
  int calls;
  int same_iter;    /* a second call in one loop iteration */
  int wrong_id;     /* called with another task's id */
  int after_end;    /* called once the task had ended */
  int ended;        /* the listener saw its terminal transition */
  uint64_t last_it; /* iteration of the last call, + 1 */
  int read_in_cb;   /* read what is new from inside the callback */
  int kill_in_cb;   /* kill the task from inside the first call */
  int close_in_cb;  /* close the registry from inside the first call */
  sbuf_t sb;
} host_t;

static void on_output(const char *id, void *data) {
  host_t *h = data;

  h->calls++;
  if (strcmp(id, h->id) != 0)
    h->wrong_id++;
  if (h->ended)
    h->after_end++;
  if (h->last_it == h->it->n + 1)
    h->same_iter++;
  h->last_it = h->it->n + 1;
  if (h->read_in_cb) {
    uvt_read_t r;
    if (uvt_read(h->f->reg, id, NULL, &r) == 0) {
      sb_add(&h->sb, r.text, r.len);
      uvt_read_cleanup(&r);
    }
  }
  if (h->kill_in_cb && h->calls == 1)
    uvt_kill(h->f->reg, id, NULL, "from on_output", NULL);
  if (h->close_in_cb && h->calls == 1) {
    uvt_registry_close(h->f->reg, NULL, NULL);
    h->f->closed++;
  }
}

static int saw_output(void *arg) {
  return ((host_t *)arg)->calls > 0;
}

static host_t *hosts[8];
static int nhosts;

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  int i;
  (void)l;
  (void)owner;
  for (i = 0; i < nhosts; i++)
    if (strcmp(hosts[i]->id, snap->id) == 0)
      hosts[i]->ended = 1;
}

/* Start `cmd` with `h` as its on_output host; `lossless`: with
 * output_backpressure, so a host that reads only when told, however slow,
 * loses nothing. */
static int start_host(fixture_t *f, host_t *h, iters_t *it, const char *cmd,
                      int lossless) {
  uvt_process_options_t o;
  memset(h, 0, sizeof(*h));
  h->f = f;
  h->it = it;
  test_opts(&o);
  o.command = cmd;
  o.output_backpressure = lossless;
  o.on_output = on_output;
  o.on_output_data = h;
  hosts[nhosts++] = h;
  return uvt_process_start(f->reg, &o, h->id);
}

static void expect_seq(const sbuf_t *sb, long n) {
  char line[32];
  long i;
  size_t off = 0;
  for (i = 1; i <= n; i++) {
    size_t k = (size_t)snprintf(line, sizeof(line), "%ld\n", i);
    assert_true(off + k <= sb->len);
    if (memcmp(sb->buf + off, line, k) != 0)
      fail_msg("line %ld differs at offset %zu", i, off);
    off += k;
  }
  assert_int_equal(off, sb->len);
}

/* P-EVT-1: a host that reads only when told gets every byte (the last
 * ones, which may come with no call, at the end); calls come with the
 * task's id and data, at most one per loop iteration per task, and none
 * after the terminal transition.  Three tasks at once, one of them with
 * both streams. */
static void test_evt_read_when_told(void **state) {
  fixture_t f;
  iters_t it;
  host_t h[3];
  uvt_listener_t l;
  waitres_t w;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  iters_start(&f, &it);
  nhosts = 0;
  memset(&l, 0, sizeof(l));
  assert_int_equal(uvt_listener_start(f.reg, &l, on_done), 0);
  assert_int_equal(start_host(&f, &h[0], &it, "seq 1 200000", 1), 0);
  assert_int_equal(start_host(&f, &h[1], &it,
                              "seq 1 100000; sleep 0.1; seq 1 5 >&2; sleep 0.2",
                              1),
                   0);
  assert_int_equal(start_host(&f, &h[2], &it,
                              "for i in 1 2 3 4 5; do echo $i; sleep 0.02; "
                              "done",
                              1),
                   0);
  for (i = 0; i < 3; i++)
    h[i].read_in_cb = 1;
  for (i = 0; i < 3; i++) {
    wait_task(&f, &w, h[i].id, 10000, NULL);
    wait_end(&w);
  }
  run_for(&f, 50);
  for (i = 0; i < 3; i++) {
    read_into(&f, h[i].id, NULL, &h[i].sb);
    assert_true(h[i].calls >= 1);
    assert_int_equal(h[i].same_iter, 0);
    assert_int_equal(h[i].wrong_id, 0);
    assert_int_equal(h[i].after_end, 0);
    assert_int_equal(h[i].ended, 1);
  }
  expect_seq(&h[0].sb, 200000);
  assert_non_null(strstr(h[1].sb.buf, "100000\n[stderr]\n"));
  assert_string_equal(h[2].sb.buf, "1\n2\n3\n4\n5\n");
  /* One call per line at most: the sleeps separate them. */
  assert_true(h[2].calls >= 1 && h[2].calls <= 5);
  for (i = 0; i < 3; i++)
    sb_free(&h[i].sb);
  uvt_listener_stop(&l);
  iters_stop(&it);
  fixture_close(&f);
}

/* P-EVT-1: coalescing: a fast writer read many times per loop iteration
 * (libuv reads up to 32 chunks per turn) still gets at most one call per
 * iteration, even when the host does not read at all; a task without
 * on_output is unaffected. */
static void test_evt_coalesced(void **state) {
  fixture_t f;
  iters_t it;
  host_t h;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  iters_start(&f, &it);
  nhosts = 0;
  assert_int_equal(start_host(&f, &h, &it, "head -c 20000000 /dev/zero", 0), 0);
  wait_task(&f, &w, h.id, 20000, NULL);
  wait_end(&w);
  assert_true(h.calls >= 1);
  assert_true((uint64_t)h.calls <= it.n);
  assert_int_equal(h.same_iter, 0);
  iters_stop(&it);
  fixture_close(&f);
}

/* P-EVT-1: the callback may kill its task (no call after the end) or
 * close the registry (L-1 holds). */
static void test_evt_reentrant(void **state) {
  fixture_t f;
  iters_t it;
  host_t h;
  uvt_listener_t l;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  iters_start(&f, &it);
  nhosts = 0;
  memset(&l, 0, sizeof(l));
  assert_int_equal(uvt_listener_start(f.reg, &l, on_done), 0);
  assert_int_equal(start_host(&f, &h, &it, "while :; do echo y; done", 0), 0);
  h.kill_in_cb = 1;
  wait_task(&f, &w, h.id, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_KILLED);
  wait_end(&w);
  run_for(&f, 50);
  assert_int_equal(h.after_end, 0);
  assert_int_equal(h.same_iter, 0);
  uvt_listener_stop(&l);

  assert_int_equal(start_host(&f, &h, &it, "while :; do echo y; done", 0), 0);
  h.close_in_cb = 1;
  iters_stop(&it);
  /* The registry closes from inside the callback (the task may report
   * more output until its kill ends it). */
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_true(h.calls >= 1);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* P-EVT-1: no call after the terminal transition when a disposal
 * force-fails a task that outlives teardown_grace_ms (R-AGENT-4), while it
 * still writes. */
static void test_evt_force_failed(void **state) {
  fixture_t f;
  uvt_options_t ro;
  iters_t it;
  host_t h;
  uvt_listener_t l;
  uvt_agent_t a;
  dispose_t d;
  uvt_process_options_t o;
  (void)state;

  uvt_options_init(&ro);
  ro.teardown_grace_ms = 100;
  fixture_init(&f, &ro);
  iters_start(&f, &it);
  nhosts = 0;
  memset(&l, 0, sizeof(l));
  assert_int_equal(uvt_listener_start(f.reg, &l, on_done), 0);
  agent_setup(&f, &a, "a", "s");
  memset(&d, 0, sizeof(d));
  a.data = &d;
  memset(&h, 0, sizeof(h));
  h.f = &f;
  h.it = &it;
  hosts[nhosts++] = &h;
  test_opts(&o);
  o.command = "trap '' TERM; while :; do echo y; done";
  o.grace_ms = 2000;
  o.owner = &a;
  o.on_output = on_output;
  o.on_output_data = &h;
  assert_int_equal(uvt_process_start(f.reg, &o, h.id), 0);
  d.pgid = task_pid(&f, h.id, &a);
  assert_true(run_until(&f, saw_output, &h, 5000));
  assert_int_equal(uvt_agent_dispose(&a, on_disposed), 0);
  assert_true(run_until(&f, disposed, &d, 5000));
  run_for(&f, 100);
  assert_int_equal(h.ended, 1);
  assert_int_equal(h.after_end, 0);
  assert_int_equal(f.warnings > 0, 1); /* "work may be orphaned" */
  uvt_listener_stop(&l);
  iters_stop(&it);
  fixture_close(&f);
}

/* ---- backpressure (P-OUT-4) ------------------------------------------- */

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t sb;
  uint64_t dropped;
  int structured;
  int done;
  int reads;
  int closed;
  uv_timer_t timer;
} slow_t;

static void slow_read(uv_timer_t *t) {
  slow_t *s = t->data;
  s->reads++;
  if (s->structured) {
    uvt_process_read_t r;
    assert_int_equal(uvt_process_read(s->f->reg, s->id, NULL, &r), 0);
    sb_add(&s->sb, r.out, r.out_len);
    s->dropped += r.out_dropped + r.err_dropped;
    if (r.exited)
      s->done = 1;
    uvt_process_read_cleanup(&r);
  } else {
    uvt_read_t r;
    assert_int_equal(uvt_read(s->f->reg, s->id, NULL, &r), 0);
    sb_add(&s->sb, r.text, r.len);
    if (uvt_status_is_terminal(r.snapshot.status))
      s->done = 1;
    uvt_read_cleanup(&r);
  }
  if (s->done)
    uv_timer_stop(t);
}

static int slow_done(void *arg) {
  return ((slow_t *)arg)->done;
}

static int slow_closed(void *arg) {
  return ((slow_t *)arg)->closed;
}

static void on_slow_closed(uv_handle_t *h) {
  ((slow_t *)h->data)->closed = 1;
}

/* Read `id` every `every_ms` until it ended, into s->sb. */
static void read_slowly(fixture_t *f, slow_t *s, const char *id,
                        uint64_t every_ms, int structured) {
  memset(s, 0, sizeof(*s));
  s->f = f;
  s->id = id;
  s->structured = structured;
  assert_int_equal(uv_timer_init(&f->loop, &s->timer), 0);
  s->timer.data = s;
  uv_timer_start(&s->timer, slow_read, every_ms, every_ms);
  assert_true(run_until(f, slow_done, s, 120000));
  uv_close((uv_handle_t *)&s->timer, on_slow_closed);
  run_until(f, slow_closed, s, 1000);
}

/* P-OUT-4: `seq 1 2000000` (14.9 MB) read every 5 ms with the default
 * 1 MiB cap loses nothing with output_backpressure, through uvt_read
 * (no drop notice) and through the structured read (no dropped count);
 * also on a terminal, with a small cap. */
static void test_bp_seq_slow(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  slow_t s;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "seq 1 2000000";
  o.output_backpressure = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_slowly(&f, &s, id, 5, 0);
  expect_seq(&s.sb, 2000000);
  sb_free(&s.sb);

  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_slowly(&f, &s, id, 5, 1);
  assert_int_equal(s.dropped, 0);
  expect_seq(&s.sb, 2000000);
  sb_free(&s.sb);

  test_opts(&o);
  o.command = "seq 1 200000 | tr -d '\\r'";
  o.output_backpressure = 1;
  o.output_cap_bytes = 16384;
  o.pty = 1;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  read_slowly(&f, &s, id, 2, 1);
  assert_int_equal(s.dropped, 0);
  {
    /* The terminal turns each "\n" into "\r\n". */
    size_t i, k = 0;
    for (i = 0; i < s.sb.len; i++)
      if (s.sb.buf[i] != '\r')
        s.sb.buf[k++] = s.sb.buf[i];
    s.sb.len = k;
  }
  expect_seq(&s.sb, 200000);
  sb_free(&s.sb);
  fixture_close(&f);
}

static void pattern_check(const sbuf_t *sb, size_t from) {
  size_t i;
  for (i = 0; i < sb->len; i++)
    if (sb->buf[i] != (char)('0' + (from + i) % 10))
      fail_msg("byte %zu differs", from + i);
}

/* P-OUT-4: the child blocks in write while its unread bytes are at the
 * cap: nothing more is read (the unread bytes are exactly the cap, none
 * dropped) until a read makes room; then it goes on to the end. */
static void test_bp_child_blocks(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_process_read_t r;
  waitres_t w;
  sbuf_t sb = {0};
  pid_t pid;
  uint64_t dropped = 0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.output_backpressure = 1;
  o.output_cap_bytes = 100000;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=write-bytes", "5000000", NULL, id),
      0);
  pid = task_pid(&f, id, NULL);
  run_for(&f, 300);
  /* Still writing (blocked), not ended. */
  assert_int_equal(kill(pid, 0), 0);
  assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), 0);
  assert_int_equal(r.out_len, 100000);
  assert_int_equal(r.out_dropped, 0);
  assert_int_equal(r.exited, 0);
  sb_add(&sb, r.out, r.out_len);
  uvt_process_read_cleanup(&r);
  /* Read on, in turns, to the end. */
  for (;;) {
    run_for(&f, 1);
    assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), 0);
    sb_add(&sb, r.out, r.out_len);
    dropped += r.out_dropped;
    if (r.exited) {
      assert_int_equal(r.exit_code, 0);
      uvt_process_read_cleanup(&r);
      break;
    }
    uvt_process_read_cleanup(&r);
  }
  assert_int_equal(dropped, 0);
  assert_int_equal(sb.len, 5000000);
  pattern_check(&sb, 0);
  sb_free(&sb);
  wait_task(&f, &w, id, 1000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* P-OUT-4: the drain still bounds a task whose stream is stopped at its
 * cap: the leader exits with bytes left in the pipe and a background job
 * holding it (or not); the task ends drain_ms later without any read, and
 * what the pipe held is kept beyond the cap, not dropped. */
static void test_bp_drain(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  uvt_kill_result_t kr;
  pid_t sid;
  int holder;
  (void)state;

  fixture_init(&f, NULL);
  for (holder = 0; holder <= 1; holder++) {
    test_opts(&o);
    o.output_backpressure = 1;
    o.output_cap_bytes = 65536;
    o.command = holder ? "sleep 30 & head -c 95536 /dev/zero | tr '\\0' a"
                       : "head -c 95536 /dev/zero | tr '\\0' a";
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    sid = task_pid(&f, id, NULL);
    wait_task(&f, &w, id, 5000, NULL);
    /* P-LEFT-1: the holder is named. */
    assert_outcome(&w.snap, UVT_COMPLETED,
                   holder ? "exit code: 0; 1 process still running"
                          : "exit code: 0");
    wait_end(&w);
    assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), 0);
    assert_int_equal(r.out_len, 95536);
    assert_int_equal(r.out_dropped, 0);
    assert_int_equal(r.out[0], 'a');
    assert_int_equal(r.out[95535], 'a');
    uvt_process_read_cleanup(&r);
    if (holder) {
      assert_int_equal(uvt_kill(f.reg, id, NULL, "cleanup", &kr), 0);
      assert_true(session_gone(&f, sid, 3000));
    }
  }
  fixture_close(&f);
}

/* ---- structured reads (P-RES-1) --------------------------------------- */

static void pread_ok(fixture_t *f, const char *id, uvt_process_read_t *r) {
  assert_int_equal(uvt_process_read(f->reg, id, NULL, r), 0);
  assert_non_null(r->out);
  assert_non_null(r->err);
  assert_int_equal(r->out[r->out_len], '\0');
  assert_int_equal(r->err[r->err_len], '\0');
}

/* P-RES-1 (N-12): a read whose bytes are the whole of the stdout ring
 * hands that block over without a copy and the stream reads on into a new
 * one, so every block a read returned stays as it was while later reads
 * go on: 2,000,000 bytes of the pattern read at a 65536 cap (every block
 * but the last is a whole ring), each block kept until the end, then
 * checked, in order, NUL-terminated. */
static void test_res_blocks_kept(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_process_read_t r;
  waitres_t w;
  uvt_process_read_t *kept = NULL;
  size_t n = 0, cap = 0, i, at = 0;
  sbuf_t sb = {0};
  int exited = 0;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.output_backpressure = 1;
  o.output_cap_bytes = 65536;
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=write-bytes", "2000000", NULL, id),
      0);
  while (!exited) {
    run_for(&f, 1);
    pread_ok(&f, id, &r);
    exited = r.exited;
    if (r.out_len == 0) {
      uvt_process_read_cleanup(&r);
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      kept = realloc(kept, cap * sizeof(*kept));
      assert_non_null(kept);
    }
    kept[n++] = r;
  }
  for (i = 0; i < n; i++) {
    assert_int_equal(kept[i].out[kept[i].out_len], '\0');
    sb.len = 0;
    sb_add(&sb, kept[i].out, kept[i].out_len);
    pattern_check(&sb, at);
    at += kept[i].out_len;
    uvt_process_read_cleanup(&kept[i]);
  }
  assert_int_equal(at, 2000000);
  assert_true(n >= 2000000 / 65536);
  free(kept);
  sb_free(&sb);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* P-RES-1: stdout and stderr apart, no marker in the bytes (not even the
 * ones a command prints itself), the exit code once ended, the snapshot
 * (reported: R-READ-3). */
static void test_res_split(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL,
                            "echo '[stderr]'; echo '[... 5 bytes dropped ...]';"
                            " printf partial; echo oops >&2; exit 3",
                            id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  pread_ok(&f, id, &r);
  assert_string_equal(r.out, "[stderr]\n[... 5 bytes dropped ...]\npartial");
  assert_int_equal(r.out_len, strlen(r.out));
  assert_string_equal(r.err, "oops\n");
  assert_int_equal(r.out_dropped, 0);
  assert_int_equal(r.err_dropped, 0);
  assert_int_equal(r.exited, 1);
  assert_int_equal(r.exit_code, 3);
  assert_int_equal(r.term_signal, 0);
  assert_int_equal(r.snapshot.status, UVT_COMPLETED);
  assert_string_equal(r.snapshot.detail, "exit code: 3");
  assert_int_equal(r.snapshot.reported, 1);
  uvt_process_read_cleanup(&r);
  /* Consumed: both kinds of read now get nothing. */
  pread_ok(&f, id, &r);
  assert_int_equal(r.out_len + r.err_len, 0);
  assert_int_equal(r.exited, 1);
  assert_int_equal(r.exit_code, 3);
  uvt_process_read_cleanup(&r);
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, 0);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-RES-1: dropped bytes are numbers per stream, never markers. */
static void test_res_dropped(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  sbuf_t sb = {0};
  int fd;
  (void)state;

  fixture_init(&f, NULL);
  for (fd = 1; fd <= 2; fd++) {
    test_opts(&o);
    o.output_cap_bytes = 1000;
    assert_int_equal(start_helper(&f, NULL, &o, "--helper=write-bytes", "5000",
                                  fd == 1 ? "1" : "2", id),
                     0);
    wait_task(&f, &w, id, 5000, NULL);
    pread_ok(&f, id, &r);
    sb_add(&sb, fd == 1 ? r.out : r.err, fd == 1 ? r.out_len : r.err_len);
    assert_int_equal(sb.len, 1000);
    pattern_check(&sb, 4000);
    assert_int_equal(fd == 1 ? r.out_dropped : r.err_dropped, 4000);
    assert_int_equal(fd == 1 ? r.err_dropped : r.out_dropped, 0);
    assert_int_equal(fd == 1 ? r.err_len : r.out_len, 0);
    uvt_process_read_cleanup(&r);
    wait_end(&w);
    sb_free(&sb);
  }
  fixture_close(&f);
}

/* P-RES-1: the end as integers: exit codes (P-END-3: 130 is a code, not a
 * signal), the signal of a leader that died of one, and no status for a
 * spawn that failed; while live, zeros and a live snapshot that is not
 * marked reported. */
/* N-7: uvt_process_status() gives the exit status without reading: the
 * output stays for the next read; a signal, a live task and the errors. */
static void test_res_status(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  hargv_t h;
  int exited = -7, code = -7, sig = -7;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL, "echo kept; sleep 30", id), 0);
  (void)task_pid(&f, id, NULL);
  assert_int_equal(uvt_process_status(f.reg, id, NULL, &exited, &code, &sig),
                   0);
  assert_int_equal(exited, 0);
  assert_int_equal(code, 0);
  assert_int_equal(sig, 0);
  wait_begin(&f, &w, id, 5000, NULL);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "test", NULL), 0);
  fixture_run_until(&f, wait_done, &w);
  wait_end(&w);
  assert_int_equal(uvt_process_status(f.reg, id, NULL, &exited, &code, &sig),
                   0);
  assert_int_equal(exited, 1);
  assert_int_equal(code, -1);
  assert_int_equal(sig, SIGTERM);

  assert_int_equal(start_sh(&f, NULL, "echo kept; exit 7", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  assert_int_equal(uvt_process_status(f.reg, id, NULL, &exited, &code, &sig),
                   0);
  assert_int_equal(exited, 1);
  assert_int_equal(code, 7);
  assert_int_equal(sig, 0);
  /* Nothing consumed: the read still has the output. */
  pread_ok(&f, id, &r);
  assert_int_equal(r.out_len, 5);
  assert_memory_equal(r.out, "kept\n", 5);
  uvt_process_read_cleanup(&r);

  test_opts(&o);
  o.argv = hargv(&h, "--helper=raise", "9", NULL);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  assert_int_equal(uvt_process_status(f.reg, id, NULL, &exited, &code, &sig),
                   0);
  assert_int_equal(code, -1);
  assert_int_equal(sig, SIGKILL);

  assert_int_equal(
      uvt_process_status(f.reg, "bash-999", NULL, &exited, &code, &sig),
      UVT_ENOTASK);
  assert_int_equal(uvt_process_status(f.reg, id, NULL, NULL, &code, &sig),
                   UV_EINVAL);
  assert_int_equal(uvt_process_status(NULL, id, NULL, &exited, &code, &sig),
                   UV_EINVAL);
  fixture_close(&f);
}

static void test_res_exit(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char path[64];
  const char *argv_noexec[] = {path, NULL};
  waitres_t w;
  uvt_process_read_t r;
  hargv_t h;
  int fd;
  (void)state;

  fixture_init(&f, NULL);
  assert_int_equal(start_sh(&f, NULL, "exit 130", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  pread_ok(&f, id, &r);
  assert_int_equal(r.exit_code, 130);
  assert_int_equal(r.term_signal, 0);
  uvt_process_read_cleanup(&r);
  wait_end(&w);

  test_opts(&o);
  o.argv = hargv(&h, "--helper=raise", "9", NULL);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  pread_ok(&f, id, &r);
  assert_int_equal(r.exited, 1);
  assert_int_equal(r.exit_code, -1);
  assert_int_equal(r.term_signal, SIGKILL);
  assert_string_equal(r.snapshot.detail, "signal: SIGKILL");
  uvt_process_read_cleanup(&r);
  wait_end(&w);

  assert_int_equal(start_sh(&f, NULL, "echo up; sleep 30", id), 0);
  (void)task_pid(&f, id, NULL);
  pread_ok(&f, id, &r);
  assert_int_equal(r.exited, 0);
  assert_int_equal(r.exit_code, 0);
  assert_int_equal(r.term_signal, 0);
  assert_int_equal(r.snapshot.status, UVT_RUNNING);
  assert_int_equal(r.snapshot.reported, 0);
  uvt_process_read_cleanup(&r);
  wait_begin(&f, &w, id, 5000, NULL);
  assert_int_equal(uvt_kill(f.reg, id, NULL, "test", NULL), 0);
  fixture_run_until(&f, wait_done, &w);
  pread_ok(&f, id, &r);
  assert_int_equal(r.exit_code, -1);
  assert_int_equal(r.term_signal, SIGTERM);
  uvt_process_read_cleanup(&r);
  wait_end(&w);

  /* A file exec refuses (no format): only the spawn can tell.  (Under
   * valgrind posix_spawn cannot report an exec failure: the child exits
   * 127 instead, so this part is left out there.) */
  if (under_valgrind()) {
    fixture_close(&f);
    return;
  }
  snprintf(path, sizeof(path), "/tmp/uvt-noexec-%d", (int)getpid());
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  assert_true(fd >= 0);
  assert_int_equal(write(fd,
                         "\x7f"
                         "ELF-not-really",
                         15),
                   15);
  close(fd);
  test_opts(&o);
  o.argv = argv_noexec;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_int_equal(w.snap.status, UVT_FAILED);
  pread_ok(&f, id, &r);
  assert_int_equal(r.exited, 1);
  assert_int_equal(r.exit_code, -1);
  assert_int_equal(r.term_signal, 0);
  uvt_process_read_cleanup(&r);
  wait_end(&w);
  unlink(path);
  fixture_close(&f);
}

/* P-RES-1: one cursor with uvt_read: what one returned the other never
 * returns, while live and after the end, in both orders. */
static void test_res_shared_cursor(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  sbuf_t sb = {0};
  pid_t pid;
  int order;
  (void)state;

  fixture_init(&f, NULL);
  for (order = 0; order <= 1; order++) {
    test_opts(&o);
    assert_int_equal(
        start_helper(&f, NULL, &o, "--helper=wait-usr1", NULL, NULL, id), 0);
    pid = task_pid(&f, id, NULL);
    if (order == 0) {
      read_until_has(&f, id, NULL, &sb, "ready\n");
      pread_ok(&f, id, &r);
      assert_int_equal(r.out_len, 0);
      uvt_process_read_cleanup(&r);
    } else {
      do {
        run_for(&f, 5);
        pread_ok(&f, id, &r);
        sb_add(&sb, r.out, r.out_len);
        uvt_process_read_cleanup(&r);
      } while (sb.len == 0);
      assert_string_equal(sb.buf, "ready\n");
      sb_free(&sb);
      read_into(&f, id, NULL, &sb);
      assert_int_equal(sb.len, 0);
    }
    sb_free(&sb);
    assert_int_equal(kill(pid, SIGUSR1), 0);
    wait_task(&f, &w, id, 5000, NULL);
    wait_end(&w);
  }

  /* After the end: the first read of either kind takes the rest. */
  for (order = 0; order <= 1; order++) {
    assert_int_equal(start_sh(&f, NULL, "echo out; echo err >&2", id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    if (order == 0) {
      read_into(&f, id, NULL, &sb);
      assert_string_equal(sb.buf, "out\n[stderr]\nerr\n");
      pread_ok(&f, id, &r);
      assert_int_equal(r.out_len + r.err_len, 0);
      assert_int_equal(r.exited, 1);
    } else {
      pread_ok(&f, id, &r);
      assert_string_equal(r.out, "out\n");
      assert_string_equal(r.err, "err\n");
      read_into(&f, id, NULL, &sb);
      assert_int_equal(sb.len, 0);
    }
    uvt_process_read_cleanup(&r);
    sb_free(&sb);
    wait_end(&w);
  }
  fixture_close(&f);
}

/* P-RES-1 with P-OUT-3: each stream keeps an incomplete trailing UTF-8
 * sequence for later. */
static void test_res_utf8(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  sbuf_t sb = {0};
  pid_t pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=utf8-split", NULL, NULL, id), 0);
  pid = task_pid(&f, id, NULL);
  do {
    run_for(&f, 5);
    pread_ok(&f, id, &r);
    sb_add(&sb, r.out, r.out_len);
    uvt_process_read_cleanup(&r);
  } while (sb.len == 0);
  assert_string_equal(sb.buf, "a");
  sb_free(&sb);
  assert_int_equal(kill(pid, SIGUSR1), 0);
  wait_task(&f, &w, id, 5000, NULL);
  pread_ok(&f, id, &r);
  assert_string_equal(r.out, "\xe4\xbd\xa0"
                             "b\n");
  uvt_process_read_cleanup(&r);
  wait_end(&w);
  fixture_close(&f);
}

/* P-RES-1: errors: bad arguments, the fence, another producer's task;
 * the cleanup takes NULL and a zeroed struct. */
static void test_res_errors(void **state) {
  fixture_t f;
  uvt_agent_t a;
  uvt_agent_t b;
  char id[UVT_ID_MAX];
  uvt_process_read_t r;
  fake_t fk;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "a", "s1");
  agent_setup(&f, &b, "b", "s2");
  assert_int_equal(start_sh(&f, &a, "echo mine", id), 0);
  assert_int_equal(uvt_process_read(f.reg, id, &a, NULL), UV_EINVAL);
  assert_int_equal(uvt_process_read(NULL, id, &a, &r), UV_EINVAL);
  assert_int_equal(uvt_process_read(f.reg, NULL, &a, &r), UV_EINVAL);
  assert_int_equal(uvt_process_read(f.reg, id, &b, &r), UVT_EFOREIGN);
  assert_null(r.out);
  assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), UVT_EFOREIGN);
  assert_int_equal(uvt_process_read(f.reg, "bash-99", &a, &r), UVT_ENOTASK);
  wait_task(&f, &w, id, 5000, &a);
  assert_int_equal(uvt_process_read(f.reg, id, &a, &r), 0);
  assert_string_equal(r.out, "mine\n");
  uvt_process_read_cleanup(&r);
  uvt_process_read_cleanup(&r);
  uvt_process_read_cleanup(NULL);
  wait_end(&w);
  memset(&fk, 0, sizeof(fk));
  assert_int_equal(fake_start(f.reg, &fk, NULL, "fake", NULL, id), 0);
  assert_int_equal(uvt_process_read(f.reg, id, NULL, &r), UV_EINVAL);
  assert_int_equal(fake_settle(&fk, UVT_COMPLETED, NULL, NULL), 0);
  fixture_close(&f);
}

/* ---- allocation failures -------------------------------------------- */

/* Read `id` failing the n-th allocation, for n = 1, 2, ... until a read
 * succeeds: each failure is UV_ENOMEM with *r zeroed and nothing consumed
 * (so the successful read has everything). */
static void read_failing(fixture_t *f, const char *id, uvt_process_read_t *r) {
  int n;
  int err;
  for (n = 1;; n++) {
    fm_arm(n);
    err = uvt_process_read(f->reg, id, NULL, r);
    fm_armed = 0;
    if (err == 0)
      break;
    assert_int_equal(err, UV_ENOMEM);
    assert_true(fm_failed);
    assert_null(r->out);
    assert_null(r->err);
  }
  assert_true(n > 2);
}

/* P-RES-1: a structured read whose allocation fails consumes nothing, for
 * a live task and for one that ended. */
static void test_res_failmalloc(void **state) {
  fixture_t f;
  iters_t it;
  host_t h;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  uvt_process_read_t r;
  (void)state;

  assert_int_equal(
      uvt_replace_allocator(fm_malloc, fm_realloc, fm_calloc, free), 0);
  fixture_init(&f, NULL);
  iters_start(&f, &it);
  nhosts = 0;
  memset(&h, 0, sizeof(h));
  h.f = &f;
  h.it = &it;
  hosts[nhosts++] = &h;
  test_opts(&o);
  o.command = "printf abc; read -r x";
  o.stdin_pipe = 1;
  o.on_output = on_output;
  o.on_output_data = &h;
  assert_int_equal(uvt_process_start(f.reg, &o, h.id), 0);
  assert_true(run_until(&f, saw_output, &h, 5000));
  read_failing(&f, h.id, &r);
  assert_string_equal(r.out, "abc");
  assert_int_equal(r.exited, 0);
  uvt_process_read_cleanup(&r);
  assert_int_equal(uvt_process_close_stdin(f.reg, h.id, NULL), 0);
  wait_task(&f, &w, h.id, 5000, NULL);
  wait_end(&w);

  assert_int_equal(start_sh(&f, NULL, "printf abc; printf def >&2", id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_failing(&f, id, &r);
  assert_string_equal(r.out, "abc");
  assert_string_equal(r.err, "def");
  assert_int_equal(r.exited, 1);
  uvt_process_read_cleanup(&r);
  wait_end(&w);
  iters_stop(&it);
  fixture_close(&f);
  assert_int_equal(uvt_replace_allocator(malloc, realloc, calloc, free), 0);
}

/* ---- memory given back (issue #12) ----------------------------------- */

extern unsigned uvt__process_trims;

static int trimmed_since(void *arg) {
  return uvt__process_trims > *(unsigned *)arg;
}

/* Issue #12: after a burst of large outputs read and forgotten, the
 * producer asks the allocator to give free pages back once the burst is
 * over (coalesced, not once per task); small outputs never ask.  (What
 * that gives back is measured in bench-output's burst rows.) */
static void test_mem_trim_after_burst(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  char ids[20][UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  unsigned before;
  int i;
  (void)state;

  fixture_init(&f, NULL);
  for (i = 0; i < 50; i++) {
    assert_int_equal(start_sh(&f, NULL, "echo small", id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    wait_end(&w);
    read_into(&f, id, NULL, &sb);
    sb_free(&sb);
    assert_int_equal(uvt_forget(f.reg, id, NULL), 0);
  }
  before = uvt__process_trims;
  run_for(&f, 200);
  assert_int_equal(uvt__process_trims, before);

  for (i = 0; i < 20; i++)
    assert_int_equal(start_sh(&f, NULL, "seq 1 100000", ids[i]), 0);
  for (i = 0; i < 20; i++) {
    wait_task(&f, &w, ids[i], 10000, NULL);
    wait_end(&w);
    read_into(&f, ids[i], NULL, &sb);
    assert_int_equal(sb.len, 588895);
    sb_free(&sb);
    assert_int_equal(uvt_forget(f.reg, ids[i], NULL), 0);
  }
  assert_true(run_until(&f, trimmed_since, &before, 2000));
  assert_true(uvt__process_trims - before <= 10);
  fixture_close(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_evt_read_when_told),
      T(test_evt_coalesced),
      T(test_evt_reentrant),
      T(test_evt_force_failed),
      T(test_bp_seq_slow),
      T(test_bp_child_blocks),
      T(test_bp_drain),
      T(test_res_split),
      T(test_res_dropped),
      T(test_res_exit),
      T(test_res_status),
      T(test_res_shared_cursor),
      T(test_res_utf8),
      T(test_res_errors),
      T(test_res_blocks_kept),
      T(test_res_failmalloc),
      T(test_mem_trim_after_burst),
  };
  return PROCESS_TESTS("process-events", tests);
}
