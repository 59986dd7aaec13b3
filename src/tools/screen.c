/* The screen of a terminal task (M-TOOLS-11), kept by libvterm: every read
 * of a task the tools started with `tty` is also fed to a terminal
 * emulator of the terminal's size, so task_screen can show its current
 * rows of text, the cursor and whether the alternate screen is on; while a
 * program is on the alternate screen (top, vim, less), the results of
 * task_output and write_stdin show that screen instead of the transcript
 * of its redraws (output.c).  S-8: libvterm gets only what vtguard.c
 * rebuilt from the task's bytes, never the bytes themselves (Debian's
 * libvterm 0.1.4 crashes on a 17-parameter SGR), and a screen is at most
 * UVT__SCREEN_MAX rows and columns, at least UVT__SCREEN_MIN_COLS
 * columns (one column and a wide character crash it too). */
#include <string.h>
#include <vterm.h>

#include "tools-int.h"

/* Bytes of one row's text: up to 4 bytes per cell and per combining
 * character libvterm keeps. */
#define ROW_TEXT_MAX(cols) ((size_t)(cols)*4 * VTERM_MAX_CHARS_PER_CELL + 1)

struct uvt__screen_s {
  uvt__kept_t kept; /* on the tools' screens_ */
  char id[UVT_ID_MAX];
  uvt__vtguard_t guard; /* S-8: all libvterm gets comes through it */
  VTerm *vt;
  VTermScreen *screen;
  int rows;
  int cols;
  int alt; /* the alternate screen is on */
};

static int on_termprop(VTermProp prop, VTermValue *val, void *user) {
  uvt__screen_t *s = user;

  if (prop == VTERM_PROP_ALTSCREEN)
    s->alt = val->boolean != 0;
  return 1;
}

static const VTermScreenCallbacks screen_cbs = {
    .settermprop = on_termprop,
};

/* S-8: what the guard rebuilt, into libvterm. */
static void guard_sink(void *ctx, const char *bytes, size_t len) {
  uvt__screen_t *s = ctx;

  vterm_input_write(s->vt, bytes, len);
}

/* What a task asks of its terminal (a cursor report, a device's
 * attributes) goes nowhere: the task's terminal is its pty, and this
 * screen only looks. */
static void discard_output(const char *bytes, size_t len, void *user) {
  (void)bytes;
  (void)len;
  (void)user;
}

uvt__screen_t *uvt__screen_find(uvt_tools_t *tools, const char *id) {
  struct uvt__link *n;
  uvt__screen_t *s;

  for (n = tools->screens_.next; n != &tools->screens_; n = n->next) {
    s = uvt__container_of(n, uvt__screen_t, kept.link);
    if (strcmp(s->id, id) == 0)
      return s;
  }
  return NULL;
}

static void screen_free(uvt__screen_t *s);
static void screen_kept_cb(uvt__kept_t *k, uvt_tools_t *tools, int dropped);

void uvt__screen_add(uvt_tools_t *tools, const char *id, int rows, int cols) {
  uvt__screen_t *s;

  if (strlen(id) >= UVT_ID_MAX || rows < 1 || cols < UVT__SCREEN_MIN_COLS ||
      rows > UVT__SCREEN_MAX || cols > UVT__SCREEN_MAX)
    return; /* S-8: no screen (its results stay a transcript) */
  s = uvt__tools_malloc(sizeof(*s));
  if (s == NULL)
    return; /* no screen: its results stay a transcript */
  memset(s, 0, sizeof(*s));
  s->vt = vterm_new(rows, cols);
  if (s->vt == NULL) {
    uvt__tools_free(s);
    return;
  }
  strcpy(s->id, id);
  s->rows = rows;
  s->cols = cols;
  vterm_set_utf8(s->vt, 1);
  vterm_output_set_callback(s->vt, discard_output, NULL);
  uvt__vtguard_init(&s->guard, (unsigned)cols, guard_sink, s);
  s->screen = vterm_obtain_screen(s->vt);
  vterm_screen_set_callbacks(s->screen, &screen_cbs, s);
  vterm_screen_enable_altscreen(s->screen, 1);
  vterm_screen_reset(s->screen, 1);
  uvt__tools_keep_state(tools, &tools->screens_, &s->kept, s->id,
                        screen_kept_cb);
}

static void screen_free(uvt__screen_t *s) {
  uvt__list_remove(&s->kept.link);
  vterm_free(s->vt);
  uvt__tools_free(s);
}

void uvt__screen_forget(uvt_tools_t *tools, const char *id) {
  uvt__screen_t *s = uvt__screen_find(tools, id);

  if (s != NULL)
    screen_free(s);
}

/* kept.c: a dropped task's screen goes with its record. */
static void screen_kept_cb(uvt__kept_t *k, uvt_tools_t *tools, int dropped) {
  (void)tools;
  if (dropped)
    screen_free(uvt__container_of(k, uvt__screen_t, kept));
}

void uvt__screen_free_all(uvt_tools_t *tools) {
  struct uvt__link *n;

  while ((n = uvt__list_pop(&tools->screens_)) != NULL) {
    uvt__list_init(n);
    screen_free(uvt__container_of(n, uvt__screen_t, kept.link));
  }
}

void uvt__screen_feed(uvt__screen_t *s, const char *bytes, size_t len) {
  if (len > 0)
    uvt__vtguard_feed(&s->guard, bytes, len); /* S-8 */
}

int uvt__screen_alt(const uvt__screen_t *s) {
  return s->alt;
}

void uvt__screen_render(uvt__screen_t *s, uvt__text_t *t) {
  VTermState *state = vterm_obtain_state(s->vt);
  VTermPos cursor;
  VTermRect rect;
  size_t cap = ROW_TEXT_MAX(s->cols);
  size_t n;
  char *buf;
  int last = -1;
  int r;

  vterm_state_get_cursorpos(state, &cursor);
  uvt__text_printf(t,
                   "[screen %dx%d, %s screen, cursor at row %d, column %d; "
                   "rows and columns count from 1]\n",
                   s->cols, s->rows, s->alt ? "alternate" : "main",
                   cursor.row + 1, cursor.col + 1);
  buf = uvt__tools_malloc(cap);
  if (buf == NULL) {
    t->err = UV_ENOMEM;
    return;
  }
  /* Rows up to the last one that shows something. */
  for (r = 0; r < s->rows; r++) {
    rect.start_row = r;
    rect.end_row = r + 1;
    rect.start_col = 0;
    rect.end_col = s->cols;
    if (vterm_screen_get_text(s->screen, buf, cap - 1, rect) > 0)
      last = r;
  }
  for (r = 0; r <= last; r++) {
    rect.start_row = r;
    rect.end_row = r + 1;
    rect.start_col = 0;
    rect.end_col = s->cols;
    n = vterm_screen_get_text(s->screen, buf, cap - 1, rect);
    if (n > cap - 1)
      n = cap - 1;
    /* The row's own trailing blanks go. */
    while (n > 0 && buf[n - 1] == ' ')
      n--;
    uvt__text_utf8(t, buf, n);
    uvt__text_raw(t, "\n", 1);
  }
  uvt__tools_free(buf);
}
