/* S-8: a task's bytes never crash or hang the tools.  Random and mutated
 * escape sequences and UTF-8 go through what a terminal task's output
 * goes through:
 *
 *  1. in-process, many inputs: the screen (screen.c: vtguard.c, then
 *     libvterm, then the rendered rows) and the transcript's filter
 *     (term.c), each input fed in random chunks so that every sequence
 *     and character is also cut between reads;
 *  2. end to end, fewer inputs: a terminal task (`cat FILE; exec cat`)
 *     prints an input, and task_output, task_screen and write_stdin (with
 *     random bytes typed, which the terminal echoes and cat prints back)
 *     answer about it.
 *
 * What must hold: nothing crashes (ASan and UBSan in the asan lane), no
 * input takes longer than WATCHDOG_S seconds to go through (a watchdog:
 * the input is printed and the run fails), every answer and rendered
 * screen is valid UTF-8 without an ESC byte in it.
 *
 * Inputs: a grammar of what terminals are sent (text in ASCII and UTF-8:
 * wide, combining, invalid, overlong, surrogates; C0 and C1 controls;
 * control sequences with 0..40 parameters of up to 30 digits, ':' and
 * ';', private markers, intermediates, every final byte, REP; escape
 * sequences; OSC, DCS, SOS, PM and APC strings up to 70 000 bytes, ended
 * by BEL, ST, ESC \ or nothing; DECRQSS; the alternate screen; the
 * issue's truecolor SGR), and mutations of a corpus of real output (vim,
 * top, a progress bar, git's colours, that SGR): bit flips, bytes
 * replaced by the parser's own (ESC, [, ;, :, U+009B), chunks inserted,
 * repeated, removed and spliced.
 *
 *   fuzz-terminal [--seed N] [--inputs M] [--tasks K]
 *
 * Prints the seed, the inputs and the time each part took; on a failure
 * prints the input (hex) and exits 1. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "tools/tools-int.h"
#include "uvtasks.h"
#include "uvtasks/process.h"
#include "uvtasks/tools.h"

#define WATCHDOG_S 20
#define INPUT_MAX (160 * 1024)

static uint64_t rng;

static uint64_t next(void) {
  /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

static size_t pick(size_t n) {
  return n == 0 ? 0 : (size_t)(next() % n);
}

/* ---- the input being built -------------------------------------------- */

static unsigned char in[INPUT_MAX];
static size_t in_len;

static void put(const void *b, size_t n) {
  size_t room = in_len < sizeof(in) ? sizeof(in) - in_len : 0;

  if (n > room)
    n = room;
  if (n > 0)
    memcpy(&in[in_len], b, n);
  in_len += n;
}

static void putc_(int c) {
  if (in_len < sizeof(in))
    in[in_len++] = (unsigned char)c;
}

static void puts_(const char *s) {
  put(s, strlen(s));
}

static void put_number(void) {
  char buf[40];
  size_t n;
  size_t i;

  switch (pick(6)) {
  case 0:
    return; /* empty */
  case 1:
    snprintf(buf, sizeof(buf), "%zu", pick(10));
    break;
  case 2:
    snprintf(buf, sizeof(buf), "%zu", pick(300));
    break;
  case 3:
    snprintf(buf, sizeof(buf), "%zu", pick(70000));
    break;
  case 4:
    n = 1 + pick(30); /* up to 30 digits: past every integer type */
    for (i = 0; i < n; i++)
      buf[i] = (char)('0' + pick(10));
    buf[n] = '\0';
    break;
  default:
    snprintf(buf, sizeof(buf), "%zu", 4294967290u + pick(10));
    break;
  }
  puts_(buf);
}

static void gen_csi(void) {
  static const char finals[] =
      "@ABCDEFGHIJKLMPSTXZ`abcdefghijklmnpqrstuxyz{|}~";
  size_t np;
  size_t i;

  putc_(0x1B);
  putc_('[');
  if (pick(4) == 0)
    putc_("<=>?"[pick(4)]);
  np = pick(6) == 0 ? pick(41) : pick(18);
  for (i = 0; i < np; i++) {
    if (i > 0)
      putc_(pick(3) == 0 ? ':' : ';');
    put_number();
  }
  for (i = pick(8) == 0 ? 1 + pick(3) : 0; i > 0; i--)
    putc_(0x20 + (int)pick(16));
  if (pick(10) == 0)
    putc_(0x30 + (int)pick(16)); /* a parameter byte after them */
  putc_(pick(20) == 0 ? 0x40 + (int)pick(63)
                      : finals[pick(sizeof(finals) - 1)]);
}

static void gen_string(void) {
  static const char intro[] = "]PX^_";
  size_t n = pick(8) == 0 ? pick(70000) : pick(64);
  size_t i;

  if (pick(5) == 0) {
    puts_(pick(2) ? "\xc2\x9d" : "\xc2\x90"); /* OSC, DCS as U+009x */
  } else {
    putc_(0x1B);
    putc_(intro[pick(5)]);
  }
  if (pick(3) == 0)
    puts_(pick(2) ? "$q" : "0;");
  for (i = 0; i < n && in_len < sizeof(in) - 8; i++)
    putc_(pick(10) == 0 ? (int)pick(256) : 0x20 + (int)pick(95));
  switch (pick(5)) {
  case 0:
    putc_(0x07);
    break;
  case 1:
    puts_("\x1b\\");
    break;
  case 2:
    puts_("\xc2\x9c");
    break;
  case 3:
    break; /* unterminated */
  default:
    puts_("\x1b\\");
    break;
  }
}

static void gen_text(void) {
  static const char *const utf8[] = {
      "\xc3\xa9",
      "\xe2\x82\xac",
      "\xf0\x9f\x98\x80",
      "\xcc\x81",
      "\xe2\x80\x8b",
      "\xef\xbc\xa1",
      "\xe4\xb8\xad",
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",
      "\xff",
      "\xc0\xaf",
      "\xed\xa0\x80",
      "\xf4\x90\x80\x80",
      "\xe2\x82",
      "\x80\x80",
      "\xc2\x85",
      "\xc2\x9b",
      "\xf8\x88\x80\x80\x80"};
  size_t n = 1 + pick(40);
  size_t i;

  for (i = 0; i < n; i++) {
    if (pick(4) == 0)
      puts_(utf8[pick(sizeof(utf8) / sizeof(utf8[0]))]);
    else
      putc_(0x20 + (int)pick(95));
  }
}

static void gen_grammar(void) {
  size_t n = 1 + pick(300);
  size_t i;

  for (i = 0; i < n && in_len < sizeof(in) - 128; i++) {
    switch (pick(16)) {
    case 0:
    case 1:
    case 2:
      gen_csi();
      break;
    case 3:
      gen_string();
      break;
    case 4:
      putc_(0x1B);
      if (pick(3) == 0)
        putc_(0x20 + (int)pick(16));
      putc_(0x30 + (int)pick(0x4F));
      break;
    case 5:
      putc_((int)pick(32));
      break;
    case 6:
      putc_(0x80 + (int)pick(64));
      break;
    case 7:
      puts_(pick(2) ? "\x1b[?1049h" : "\x1b[?1049l");
      break;
    case 8:
      puts_("\x1b[38:2:59:66:97;48:2:36:40:59;58:2:224:175:104;4:3m");
      break;
    case 9:
      puts_(pick(2) ? "\x1bP$qO\x1b\\" : "\x1b[5b");
      break;
    case 10:
      puts_(pick(2) ? "\r\n" : "\r");
      break;
    default:
      gen_text();
      break;
    }
  }
}

/* Real output, for the mutations. */
static const char *const corpus[] = {
    "\x1b[?1049h\x1b[22;0;0t\x1b[1;24r\x1b(B\x1b[m\x1b[4l\x1b[?7h\x1b[39;49m"
    "\x1b[?1h\x1b=\x1b[H\x1b[2J\x1b[?25l~\r\n~\r\n~\r\n\x1b[24;1H\"f\" 0L, 0B"
    "\x1b[1;1H\x1b[?25h",
    "\x1b[H\x1b[2Jtop - 10:00:00 up 1 day,  1 user,  load average: 0.00\x1b[K"
    "\r\n\x1b[7m  PID USER      PR  NI    VIRT    RES\x1b[m\x1b[K\r\n"
    "\x1b[1m    1 root      20   0  167000  11000\x1b[m\x1b[K",
    " 42%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8c      | 42/100 "
    "[00:01<00:02, 30.1it/s]\r 43%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2"
    "\x96\x88      | 43/100\r",
    "\x1b[33mcommit 0123abcd\x1b[m\r\nAuthor: A <a@b>\r\n\r\n    \x1b[1;31m"
    "fix\x1b[m\r\n\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\r\n",
    "\x1b[38:2:59:66:97;48:2:36:40:59;58:2:224:175:104;4:3mcolour\x1b[0m\n",
    "\x1b]0;user@host: "
    "~\x07\x1b[01;32muser@host\x1b[00m:\x1b[01;34m~\x1b[00m$ ",
};

static void gen_mutated(void) {
  static const unsigned char special[] = {0x1B, '[',  ';',  ':',  0x9B, 0xC2,
                                          '0',  '9',  0x07, 0x18, ']',  'P',
                                          'b',  '\\', 0xE2, 0x80};
  const char *seed = corpus[pick(sizeof(corpus) / sizeof(corpus[0]))];
  size_t k;
  size_t m;

  put(seed, strlen(seed));
  for (m = 1 + pick(10); m > 0 && in_len > 0; m--) {
    size_t at = pick(in_len);
    size_t len = 1 + pick(in_len - at);
    switch (pick(6)) {
    case 0:
      in[at] ^= (unsigned char)(1u << pick(8));
      break;
    case 1:
      in[at] = special[pick(sizeof(special))];
      break;
    case 2: /* a chunk repeated */
      for (k = 1 + pick(20); k > 0 && in_len + len <= sizeof(in); k--) {
        memmove(in + at + len, in + at, in_len - at);
        in_len += len;
      }
      break;
    case 3: /* removed */
      memmove(in + at, in + at + len, in_len - at - len);
      in_len -= len;
      break;
    case 4: { /* another seed spliced in */
      const char *o = corpus[pick(sizeof(corpus) / sizeof(corpus[0]))];
      size_t olen = strlen(o);
      if (in_len + olen <= sizeof(in)) {
        memmove(in + at + olen, in + at, in_len - at);
        memcpy(in + at, o, olen);
        in_len += olen;
      }
      break;
    }
    default: { /* grammar inserted */
      unsigned char save[INPUT_MAX / 4];
      size_t tail = in_len - at;
      if (tail > sizeof(save))
        break;
      memcpy(save, in + at, tail);
      in_len = at;
      gen_csi();
      put(save, tail);
      break;
    }
    }
  }
}

static void gen(void) {
  in_len = 0;
  if (pick(2) == 0)
    gen_grammar();
  else
    gen_mutated();
}

/* ---- checks ------------------------------------------------------------ */

static void dump_and_fail(const char *what) {
  size_t i;

  fprintf(stderr, "fuzz-terminal: %s; the input (%zu bytes):\n", what, in_len);
  for (i = 0; i < in_len; i++)
    fprintf(stderr, "%02x%s", in[i], i % 32 == 31 ? "\n" : "");
  fprintf(stderr, "\n");
  exit(1);
}

/* A crash without a sanitizer: the input is what is needed to replay it
 * (with ASan, its report comes first, then this). */
static void on_crash(int sig) {
  static const char hex[] = "0123456789abcdef";
  static const char msg[] = "fuzz-terminal: crashed; the input:\n";
  char line[65];
  size_t i;
  size_t k = 0;

  if (write(2, msg, sizeof(msg) - 1) < 0) {
  }
  for (i = 0; i < in_len; i++) {
    line[k++] = hex[in[i] >> 4];
    line[k++] = hex[in[i] & 15];
    if (k == 64 || i + 1 == in_len) {
      line[k++] = '\n';
      if (write(2, line, k) < 0) {
      }
      k = 0;
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void on_alarm(int sig) {
  static const char msg[] = "fuzz-terminal: an input took longer than the "
                            "watchdog (a hang)\n";
  (void)sig;
  if (write(2, msg, sizeof(msg) - 1) < 0) {
  }
  dump_and_fail("hang");
}

/* Valid UTF-8 (NUL allowed: the tools keep it) and no ESC. */
static void check_text(const char *what, const char *s, size_t n) {
  size_t i = 0;
  int k;

  while (i < n) {
    if ((unsigned char)s[i] == 0x1B)
      dump_and_fail(what);
    k = uvt__utf8_seq((const unsigned char *)s + i, n - i);
    if (k < 0)
      dump_and_fail(what);
    i += (size_t)k;
  }
}

/* ---- part 1: in-process ------------------------------------------------ */

typedef struct {
  uv_loop_t loop;
  uvt_registry_t *reg;
  uvt_tools_t tools;
  uvt_agent_t agent;
} host_t;

static void host_init(host_t *h) {
  uvt_tools_options_t to;

  memset(h, 0, sizeof(*h));
  if (uv_loop_init(&h->loop) != 0 ||
      uvt_registry_new(&h->loop, NULL, &h->reg) != 0)
    abort();
  uvt_tools_options_init(&to);
  if (uvt_tools_attach(h->reg, &h->tools, &to) != 0 ||
      uvt_agent_register(h->reg, &h->agent, "fuzz", "s1") != 0)
    abort();
}

static int closed;
static void on_closed(void *data) {
  (void)data;
  closed = 1;
}
static void on_detached(uvt_tools_t *tools) {
  (void)tools;
}

static void host_close(host_t *h) {
  uvt_tools_detach(&h->tools, on_detached);
  closed = 0;
  uvt_registry_close(h->reg, on_closed, NULL);
  while (!closed)
    uv_run(&h->loop, UV_RUN_ONCE);
  uv_run(&h->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&h->loop) != 0)
    abort();
}

static void part_in_process(host_t *h, size_t inputs) {
  static const int sizes[][2] = {{24, 80}, {1, 2}, {5, 3}, {50, 200}};
  uvt__screen_t *scr;
  uvt__term_t term;
  uvt__text_t out;
  size_t i;
  size_t at;
  size_t n;

  for (i = 0; i < inputs; i++) {
    const int *sz = sizes[i % 4 == 3 ? pick(4) : 0];
    gen();
    alarm(WATCHDOG_S);
    uvt__screen_add(&h->tools, "fuzz-1", sz[0], sz[1]);
    scr = uvt__screen_find(&h->tools, "fuzz-1");
    if (scr == NULL)
      abort();
    /* S-8: a screen outside the bounds is not made. */
    uvt__screen_add(&h->tools, "fuzz-2", 1, 1);
    uvt__screen_add(&h->tools, "fuzz-3", UVT__SCREEN_MAX + 1, 80);
    if (uvt__screen_find(&h->tools, "fuzz-2") != NULL ||
        uvt__screen_find(&h->tools, "fuzz-3") != NULL)
      dump_and_fail("a screen outside the bounds was made");
    uvt__term_init(&term);
    uvt__text_init(&out);
    for (at = 0; at < in_len; at += n) {
      n = pick(4) == 0 ? 1 + pick(8) : 1 + pick(in_len - at);
      if (n > in_len - at)
        n = in_len - at;
      uvt__screen_feed(scr, (const char *)in + at, n);
      uvt__term_feed(&term, (const char *)in + at, n, &out);
      if (pick(8) == 0)
        uvt__term_end(&term, UVT__TERM_SHOW, &out);
    }
    uvt__term_end(&term, UVT__TERM_FINAL, &out);
    check_text("the transcript", out.base != NULL ? out.base : "", out.len);
    uvt__text_free(&out);
    uvt__text_init(&out);
    uvt__screen_render(scr, &out);
    check_text("the screen", out.base != NULL ? out.base : "", out.len);
    uvt__text_free(&out);
    uvt__term_free(&term);
    uvt__screen_forget(&h->tools, "fuzz-1");
    alarm(0);
  }
}

/* ---- part 2: through the tools ----------------------------------------- */

typedef struct {
  uvt_tools_call_t req;
  int done;
  int is_error;
} call_t;

static void on_call(uvt_tools_call_t *req, int status) {
  call_t *c = req->data;

  if (status == 0 && req->text != NULL)
    check_text("a tool's answer", req->text, req->len);
  c->is_error = req->is_error;
  c->done = 1;
  uvt_tools_call_cleanup(req);
}

static void tool(host_t *h, const char *name, const uvt_tools_args_t *a) {
  call_t c;

  memset(&c, 0, sizeof(c));
  c.req.data = &c;
  if (uvt_tools_call(&h->tools, &c.req, &h->agent, name, a, on_call) != 0)
    abort();
  alarm(WATCHDOG_S);
  while (!c.done)
    uv_run(&h->loop, UV_RUN_ONCE);
  alarm(0);
}

static void part_tools(host_t *h, size_t tasks) {
  char file[] = "/tmp/uvt-fuzz-term-XXXXXX";
  char cmd[128];
  char id[UVT_ID_MAX];
  uvt_tools_args_t a;
  size_t i;
  size_t k;
  FILE *fp;
  int fd;

  fd = mkstemp(file);
  if (fd < 0)
    abort();
  close(fd);
  for (i = 0; i < tasks; i++) {
    gen();
    fp = fopen(file, "wb");
    if (fp == NULL || fwrite(in, 1, in_len, fp) != in_len || fclose(fp) != 0)
      abort();
    snprintf(cmd, sizeof(cmd), "cat '%s'; exec cat", file);
    snprintf(id, sizeof(id), "bash-%zu", i + 1);
    uvt_tools_args_init(&a);
    a.command = cmd;
    a.tty = 1;
    tool(h, "run_in_background", &a);
    for (k = 0; k < 4; k++) {
      uvt_tools_args_init(&a);
      a.task_id = id;
      switch (k) {
      case 0:
        a.timeout_ms = 300;
        tool(h, "task_output", &a);
        break;
      case 1:
        tool(h, "task_screen", &a);
        break;
      case 2: {
        /* Random bytes typed: echoed by the terminal, printed by cat. */
        char typed[256];
        size_t n = 1 + pick(sizeof(typed) - 2);
        size_t j;
        for (j = 0; j < n; j++) {
          typed[j] = (char)(1 + pick(255));
          if (typed[j] == 0x03 || typed[j] == 0x04 || typed[j] == 0x1A ||
              typed[j] == 0x1C)
            typed[j] = 0x1B; /* keep cat running and in the foreground */
        }
        typed[n] = '\0';
        a.chars = typed;
        a.yield_ms = 300;
        tool(h, "write_stdin", &a);
        break;
      }
      default:
        tool(h, "task_screen", &a);
        break;
      }
    }
    uvt_tools_args_init(&a);
    a.task_id = id;
    tool(h, "task_kill", &a);
    a.wait = 1;
    tool(h, "task_output", &a);
  }
  unlink(file);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  uint64_t seed = (uint64_t)time(NULL);
  size_t inputs = 3000;
  size_t tasks = 12;
  double t0;
  double t1;
  double t2;
  host_t h;
  int i;

  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--seed") == 0)
      seed = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--inputs") == 0)
      inputs = (size_t)strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--tasks") == 0)
      tasks = (size_t)strtoull(argv[i + 1], NULL, 10);
  }
  rng = seed != 0 ? seed : 1;
  signal(SIGALRM, on_alarm);
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGABRT, on_crash);
  printf("fuzz-terminal: seed %" PRIu64 ", %zu inputs in process, %zu "
         "through the tools\n",
         seed, inputs, tasks);
  fflush(stdout);
  host_init(&h);
  t0 = now_s();
  part_in_process(&h, inputs);
  t1 = now_s();
  part_tools(&h, tasks);
  t2 = now_s();
  host_close(&h);
  printf("fuzz-terminal: in process %.1f s, through the tools %.1f s\n",
         t1 - t0, t2 - t1);
  return 0;
}
