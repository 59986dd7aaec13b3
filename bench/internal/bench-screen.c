/* M-TOOLS-11: what keeping a screen costs for a busy terminal task.  The
 * same terminal output (a full-screen redraw loop: cursor moves, colours,
 * 80-column rows, as top or a build's progress display writes it) goes in
 * 64 KiB chunks, as reads hand it over, through
 *   raw     a copy into the read's buffer (what a read costs at least)
 *   filter  the tools' text filter (M-TOOLS-7, run on every read anyway)
 *   screen  libvterm, as the tools feed a terminal task's screen
 * and each prints MB/s.
 *
 *   build/bench/bench-screen [--mib N]   (default 64) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <vterm.h>

#include "tools/tools-int.h"

#define CHUNK 65536

static double now_s(void) {
  return (double)uv_hrtime() / 1e9;
}

/* `size` bytes of redraws of a 80x24 screen. */
static char *make_output(size_t size) {
  char *buf = malloc(size);
  size_t n = 0;
  unsigned frame = 0;
  int row;
  int k;

  if (buf == NULL)
    return NULL;
  while (n < size) {
    char piece[256];
    for (row = 1; row <= 24 && n < size; row++) {
      k = snprintf(piece, sizeof(piece),
                   "\033[%d;1H\033[3%dm%5u %-20s\033[0m %8.2f%% "
                   "%-34s\033[K",
                   row, row % 8, frame, "process-name", (frame % 10000) / 100.0,
                   "/usr/bin/some-command --with args");
      if ((size_t)k > size - n)
        k = (int)(size - n);
      memcpy(buf + n, piece, (size_t)k);
      n += (size_t)k;
    }
    frame++;
  }
  return buf;
}

int main(int argc, char **argv) {
  size_t mib = 64;
  size_t size, off, len;
  char *out;
  char *dst;
  double t0, raw, filt, scr;
  uvt__term_t term;
  uvt__text_t text;
  VTerm *vt;
  VTermScreen *screen;
  int i;

  for (i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--mib") == 0)
      mib = (size_t)atoi(argv[++i]);
  size = mib << 20;
  out = make_output(size);
  dst = malloc(CHUNK);
  if (out == NULL || dst == NULL)
    return 1;

  t0 = now_s();
  for (off = 0; off < size; off += len) {
    len = size - off < CHUNK ? size - off : CHUNK;
    memcpy(dst, out + off, len);
  }
  raw = now_s() - t0;

  uvt__term_init(&term);
  t0 = now_s();
  for (off = 0; off < size; off += len) {
    len = size - off < CHUNK ? size - off : CHUNK;
    uvt__text_init(&text);
    uvt__term_feed(&term, out + off, len, &text);
    uvt__text_free(&text);
  }
  filt = now_s() - t0;
  uvt__term_free(&term);

  vt = vterm_new(24, 80);
  vterm_set_utf8(vt, 1);
  screen = vterm_obtain_screen(vt);
  vterm_screen_enable_altscreen(screen, 1);
  vterm_screen_reset(screen, 1);
  t0 = now_s();
  for (off = 0; off < size; off += len) {
    len = size - off < CHUNK ? size - off : CHUNK;
    vterm_input_write(vt, out + off, len);
  }
  scr = now_s() - t0;
  vterm_free(vt);

  printf("screen-bench: %zu MiB of 80x24 redraws in %d KiB reads\n", mib,
         CHUNK / 1024);
  printf("raw copy   %9.1f MB/s\n", (double)size / 1e6 / raw);
  printf("filter     %9.1f MB/s\n", (double)size / 1e6 / filt);
  printf("screen     %9.1f MB/s\n", (double)size / 1e6 / scr);
  free(out);
  free(dst);
  return 0;
}
