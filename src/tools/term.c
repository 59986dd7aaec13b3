/* Terminal output as text for a model (M-TOOLS-7).
 *
 * Commands write for a terminal: colours, cursor moves, window titles,
 * hyperlinks, and progress bars that redraw one line with "\r" hundreds of
 * times.  A model reads text, so a tool result shows what a terminal would
 * show on that line once the writing stopped: escape sequences are taken
 * out, "\r" and "\b" move the cursor and later characters overwrite earlier
 * ones, erase-in-line and the horizontal cursor moves are applied, and stray
 * control characters are dropped.  Invalid UTF-8 becomes U+FFFD, as
 * everywhere in the tool surface.  NUL is the exception among the controls:
 * a terminal shows nothing for it, but it is no formatting a model needs
 * erased, it says binary data went by, and M-MCP-8 has uvtasks-mcp send
 * it as \u0000; so outside escape sequences a NUL is kept as a character
 * of its line (a result may hold NUL bytes; its length is what counts).
 * Inside a sequence it is ignored, as a terminal does, like the sequence.
 *
 * Why a small filter and not libvterm: libvterm is a screen model (a grid
 * of rows and columns with scrollback).  It is the right tool for
 * full-screen programs (an editor, top), but the tool surface reads output
 * in consuming chunks and shows each line once: with a screen model every
 * read would have to decide which rows are final, a row still on screen can
 * change after it was shown, and pipe output (no window size, lines longer
 * than any width) would be wrapped at an invented width.  What commands run
 * by a model print is line-oriented (build logs, test runners, package
 * managers, REPLs), and the only rewriting they do is within the current
 * line.  So this file keeps one line (at most UVT__TERM_LINE_MAX cells) and
 * the escape parser's state, nothing more, and is checked by a table in
 * test/test-tools.c.  A sequence that moves the cursor to another row
 * (cursor up or down, to a row, to a row and column) ends the line being
 * written, if it holds anything, and the next characters start a new one
 * at the cursor's column: rows are not known, so what a program writes on
 * another row comes out on a line of its own instead of being run into
 * (or erased from) the current one, as a full-screen program's rows or a
 * prompt that redraws its choices with cursor-down would be; a newline
 * that leaves such a row with nothing written on it adds no blank line
 * (what the row holds is not known: tqdm's nested bars go back down to a
 * bar's row with "\n").  Restoring a saved cursor (ESC 8, CSI u) goes back
 * to its column, and is such a move when the cursor left the saved row
 * since, by a move or a newline (apt's progress line on the bottom row).
 * A row a move leaves is shown without trailing blanks, as a terminal
 * shows it; a line a newline ends keeps them (pipe output is left as it
 * was written).
 * Documented limits: scrolling and clearing the screen are dropped, and a
 * multi-line redraw (several progress bars at once, a full-screen program)
 * shows each of its frames; a character is one cell whatever its display width;
 * a tab is kept as a tab.
 *
 * Streaming: the state survives between reads, so a read that ends inside
 * an escape sequence, inside a UTF-8 character or in the middle of a line
 * being overwritten is continued right by the next read (see uvt__term_end
 * for how the unfinished line is shown meanwhile).
 *
 * The parser follows the usual VT500 state machine: ESC, CSI (ESC [ or
 * U+009B) with parameter, intermediate and final bytes, other escape
 * sequences (ESC with intermediates and a final byte), and command strings
 * (OSC, DCS, SOS, PM, APC) ended by BEL or ST.  C0 controls inside a
 * sequence act as they would outside it; CAN and SUB cancel a sequence.
 * A command string longer than UVT__TERM_STRING_MAX bytes is given up, so
 * a stray ESC ] cannot hide the rest of a task's output. */
#include "tools-int.h"

#include <string.h>


enum {
  T_GROUND = 0,
  T_ESC,       /* after ESC */
  T_ESC_INTER, /* ESC and intermediate bytes: waiting for the final byte */
  T_CSI,       /* control sequence: parameters, intermediates, final */
  T_STRING,    /* OSC, DCS, SOS, PM, APC: until BEL or ST */
  T_STRING_ESC /* ESC inside a string: ST if a backslash follows */
};

/* Flags of a control sequence that make it one we do not act on. */
#define CSI_PRIVATE 1 /* a private marker: < = > ? */
#define CSI_INTER 2   /* intermediate bytes */
#define CSI_BAD 4     /* a parameter byte after an intermediate one */

#define PARAM_MAX 65535u

/* U+FFFD, packed as a cell (see cell_pack). */
#define CELL_REPLACEMENT 0xBDBFEFu
#define CELL_SPACE 0x20u

/* ---------------------------------------------------------------------- */
/* Cells: one character's UTF-8 bytes, the first in the low byte.          */

static uint32_t cell_pack(const unsigned char *s, int n) {
  uint32_t c = 0;
  int i;

  for (i = n - 1; i >= 0; i--)
    c = (c << 8) | s[i];
  return c;
}

static size_t cell_bytes(uint32_t c, char out[4]) {
  unsigned char lead = (unsigned char)(c & 0xFF);
  size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  size_t i;

  for (i = 0; i < n; i++)
    out[i] = (char)((c >> (8 * i)) & 0xFF);
  return n;
}

/* Append cells [0, n) of the line to `out`, in runs. */
static void line_emit(const uvt__term_t *s, size_t n, uvt__text_t *out) {
  char buf[256];
  size_t used = 0;
  size_t i;

  for (i = 0; i < n; i++) {
    if (used + 4 > sizeof(buf)) {
      uvt__text_raw(out, buf, used);
      used = 0;
    }
    used += cell_bytes(s->line[i], buf + used);
  }
  uvt__text_raw(out, buf, used);
}

/* ---------------------------------------------------------------------- */
/* The line                                                                */

void uvt__term_init(uvt__term_t *s) {
  memset(s, 0, sizeof(*s));
}

void uvt__term_free(uvt__term_t *s) {
  if (s == NULL)
    return;
  uvt__tools_free(s->line);
  uvt__term_init(s);
}

void uvt__term_plain(const char *bytes, size_t len, uvt__text_t *out) {
  uvt__term_t s;

  uvt__term_init(&s);
  uvt__term_feed(&s, bytes, len, out);
  uvt__term_end(&s, UVT__TERM_FINAL, out);
  uvt__term_free(&s);
}

int uvt__term_carries(const uvt__term_t *s) {
  return s->len > 0 || s->cursor > 0 || s->state != T_GROUND ||
         s->pend_len > 0 || s->moved || s->saved;
}

/* Hand the line out as finished text (no newline) and start an empty one
 * at column 0.  A line an earlier read showed unchanged is not repeated. */
static void line_flush(uvt__term_t *s, uvt__text_t *out) {
  if (!s->shown)
    line_emit(s, s->len, out);
  s->len = 0;
  s->cursor = 0;
  s->shown = 0;
}

/* Room for `cells` cells.  Returns 0, or -1 when no memory could be had:
 * the caller then flushes, so output is never lost, only its rewriting. */
static int line_reserve(uvt__term_t *s, size_t cells) {
  size_t cap;
  uint32_t *p;

  if (cells <= s->cap)
    return 0;
  cap = s->cap > 0 ? s->cap : 64;
  while (cap < cells)
    cap *= 2;
  if (cap > UVT__TERM_LINE_MAX)
    cap = UVT__TERM_LINE_MAX;
  p = uvt__tools_realloc(s->line, cap * sizeof(*p));
  if (p == NULL)
    return -1;
  s->line = p;
  s->cap = cap;
  return 0;
}

/* Write one character at the cursor, as a terminal would. */
static void line_put(uvt__term_t *s, uint32_t cell, uvt__text_t *out) {
  char buf[4];

  /* A line longer than we keep goes out as it is; the rest of it is a new
   * segment (a "\r" then returns to the segment's start). */
  if (s->cursor >= UVT__TERM_LINE_MAX) {
    while (s->len < s->cursor && line_reserve(s, s->len + 1) == 0)
      s->line[s->len++] = CELL_SPACE;
    line_flush(s, out);
  }
  if (line_reserve(s, s->cursor + 1) != 0) {
    line_flush(s, out);
    if (line_reserve(s, 1) != 0) {
      uvt__text_raw(out, buf, cell_bytes(cell, buf));
      return;
    }
  }
  while (s->len < s->cursor)
    s->line[s->len++] = CELL_SPACE;
  s->line[s->cursor] = cell;
  if (s->cursor == s->len)
    s->len++;
  s->cursor++;
  s->shown = 0;
  s->moved = 0;
}

/* End the line.  A line an earlier read showed, unchanged since, was
 * already ended there (the tools end every result with a newline).  A row
 * a move went to and nothing was written on is left without a blank line:
 * what that row holds is not known (see the file comment). */
static void line_newline(uvt__term_t *s, uvt__text_t *out) {
  int shown = s->shown;

  if (s->saved != 0)
    s->saved = 2; /* the saved cursor's row is left */
  if (s->moved && s->len == 0) {
    s->cursor = 0;
    return;
  }

  line_flush(s, out);
  if (!shown)
    uvt__text_raw(out, "\n", 1);
}

static size_t param_or(const uvt__term_t *s, unsigned i, size_t dflt) {
  if (i >= s->nparam || s->param[i] == 0)
    return dflt;
  return s->param[i];
}

static void cursor_set(uvt__term_t *s, size_t col) {
  s->cursor = col > UVT__TERM_LINE_MAX ? UVT__TERM_LINE_MAX : col;
}

/* The cursor goes to another row, at column `col`: the line written so far
 * ends there (see the file comment). */
static void row_move(uvt__term_t *s, size_t col, uvt__text_t *out) {
  /* The row as a terminal shows it: no trailing blanks (a full-screen
   * program pads its rows with spaces to the width).  A line shown
   * unfinished by an earlier read is left as it was shown. */
  while (!s->shown && s->len > 0 && s->line[s->len - 1] == CELL_SPACE)
    s->len--;
  if (s->len > 0)
    line_newline(s, out);
  cursor_set(s, col);
  s->moved = 1;
  if (s->saved != 0)
    s->saved = 2;
}

/* ESC 7, CSI s: save the cursor.  Only its column is known; what matters
 * of its row is whether the cursor leaves it before the restore. */
static void cursor_save(uvt__term_t *s) {
  s->saved_col = s->cursor;
  s->saved = 1;
}

/* ESC 8, CSI u: back to the saved column, on the saved row: a move to
 * another row if the cursor left that row since the save (a move to
 * another row or a newline).  Nothing was saved: the
 * cursor stays (a terminal would go home, a row not known). */
static void cursor_restore(uvt__term_t *s, uvt__text_t *out) {
  if (s->saved == 2)
    row_move(s, s->saved_col, out);
  else if (s->saved == 1)
    cursor_set(s, s->saved_col);
  if (s->saved != 0)
    s->saved = 1;
}

/* The control sequences that act within one line, and those that move to
 * another row; all others are dropped (see the file comment). */
static void csi_dispatch(uvt__term_t *s, unsigned final, uvt__text_t *out) {
  size_t n;
  size_t i;
  size_t end;

  if (s->flags != 0)
    return;
  switch (final) {
  case 'K': /* erase in line */
    n = param_or(s, 0, 0);
    if (n == 0) {
      if (s->cursor < s->len)
        s->len = s->cursor;
    } else if (n == 1) {
      end = s->cursor < s->len ? s->cursor + 1 : s->len;
      for (i = 0; i < end; i++)
        s->line[i] = CELL_SPACE;
    } else if (n == 2) {
      s->len = 0;
    } else {
      return;
    }
    s->shown = 0;
    break;
  case 'G': /* cursor horizontal absolute */
  case '`':
    cursor_set(s, param_or(s, 0, 1) - 1);
    break;
  case 'C': /* cursor forward */
  case 'a':
    cursor_set(s, s->cursor + param_or(s, 0, 1));
    break;
  case 'D': /* cursor back */
    n = param_or(s, 0, 1);
    s->cursor = n < s->cursor ? s->cursor - n : 0;
    break;
  case 'E': /* cursor next line */
    line_newline(s, out);
    break;
  case 'A': /* cursor up */
  case 'B': /* cursor down */
  case 'd': /* line position absolute */
  case 'e': /* line position forward */
    row_move(s, s->cursor, out);
    break;
  case 'F': /* cursor previous line */
    row_move(s, 0, out);
    break;
  case 'H': /* cursor position: row;column */
  case 'f':
    row_move(s, param_or(s, 1, 1) - 1, out);
    break;
  case 's': /* save cursor (SCOSC; with parameters it sets margins) */
    if (s->nparam == 0)
      cursor_save(s);
    break;
  case 'u': /* restore cursor (SCORC) */
    cursor_restore(s, out);
    break;
  case 'X': /* erase characters */
    n = param_or(s, 0, 1);
    for (i = s->cursor; i < s->len && i - s->cursor < n; i++)
      s->line[i] = CELL_SPACE;
    s->shown = 0;
    break;
  case 'P': /* delete characters */
    if (s->cursor >= s->len)
      break;
    n = param_or(s, 0, 1);
    if (n > s->len - s->cursor)
      n = s->len - s->cursor;
    memmove(s->line + s->cursor, s->line + s->cursor + n,
            (s->len - s->cursor - n) * sizeof(*s->line));
    s->len -= n;
    s->shown = 0;
    break;
  case '@': /* insert blank characters */
    if (s->cursor >= s->len)
      break;
    n = param_or(s, 0, 1);
    if (n > UVT__TERM_LINE_MAX - s->cursor)
      n = UVT__TERM_LINE_MAX - s->cursor;
    end = s->len + n > UVT__TERM_LINE_MAX ? UVT__TERM_LINE_MAX : s->len + n;
    if (line_reserve(s, end) != 0)
      break;
    memmove(s->line + s->cursor + n, s->line + s->cursor,
            (end - s->cursor - n) * sizeof(*s->line));
    for (i = 0; i < n; i++)
      s->line[s->cursor + i] = CELL_SPACE;
    s->len = end;
    s->shown = 0;
    break;
  default:
    break;
  }
}

/* ---------------------------------------------------------------------- */
/* The parser                                                              */

static void term_char(uvt__term_t *s, uint32_t cp, uint32_t cell,
                      uvt__text_t *out);

/* A C0 control (or DEL) in any state but a string.  Returns 1 if it was
 * one. */
static int term_c0(uvt__term_t *s, uint32_t cp, uvt__text_t *out) {
  if (cp >= 0x20 && cp != 0x7F)
    return 0;
  switch (cp) {
  case '\n':
  case 0x0B: /* VT and FF feed a line, as LF does */
  case 0x0C:
    line_newline(s, out);
    break;
  case '\r':
    s->cursor = 0;
    break;
  case '\b':
    if (s->cursor > 0)
      s->cursor--;
    break;
  case '\t':
    line_put(s, '\t', out);
    break;
  case 0x1B:
    s->state = T_ESC;
    break;
  case 0x18: /* CAN, SUB: cancel a sequence */
  case 0x1A:
    s->state = T_GROUND;
    break;
  default:
    /* BEL, DEL, shifts, NUL inside a sequence and the rest: a terminal
     * shows nothing. */
    break;
  }
  return 1;
}

static void csi_begin(uvt__term_t *s) {
  s->state = T_CSI;
  s->nparam = 0;
  s->param[0] = 0;
  s->param[1] = 0;
  s->flags = 0;
}

static void string_begin(uvt__term_t *s) {
  s->state = T_STRING;
  s->string_len = 0;
}

/* C1 controls (U+0080..U+009F) in the ground state. */
static void term_c1(uvt__term_t *s, uint32_t cp, uvt__text_t *out) {
  switch (cp) {
  case 0x9B: /* CSI */
    csi_begin(s);
    break;
  case 0x90: /* DCS, SOS, OSC, PM, APC */
  case 0x98:
  case 0x9D:
  case 0x9E:
  case 0x9F:
    string_begin(s);
    break;
  case 0x85: /* NEL */
    line_newline(s, out);
    break;
  default:
    break;
  }
}

static void term_ground(uvt__term_t *s, uint32_t cp, uint32_t cell,
                        uvt__text_t *out) {
  if (cp == 0) {
    /* Kept, as a character (see the file comment): a model should see that
     * binary data went by, and the host decides how to show it. */
    line_put(s, 0, out);
    return;
  }
  if (term_c0(s, cp, out))
    return;
  if (cp >= 0x80 && cp <= 0x9F) {
    term_c1(s, cp, out);
    return;
  }
  line_put(s, cell, out);
}

static void term_esc(uvt__term_t *s, uint32_t cp, uint32_t cell,
                     uvt__text_t *out) {
  if (cp >= 0x80) {
    /* Not a sequence after all. */
    s->state = T_GROUND;
    term_ground(s, cp, cell, out);
    return;
  }
  if (term_c0(s, cp, out))
    return;
  if (cp >= 0x20 && cp <= 0x2F) {
    s->state = T_ESC_INTER;
    return;
  }
  switch (cp) {
  case '[':
    csi_begin(s);
    return;
  case ']':
  case 'P':
  case 'X':
  case '^':
  case '_':
    string_begin(s);
    return;
  case 'E': /* NEL */
    s->state = T_GROUND;
    line_newline(s, out);
    return;
  case '7': /* DECSC, DECRC: save and restore the cursor */
    s->state = T_GROUND;
    cursor_save(s);
    return;
  case '8':
    s->state = T_GROUND;
    cursor_restore(s, out);
    return;
  default:
    /* ST without a string, keypad modes, reset...:
     * nothing a line of text shows. */
    s->state = T_GROUND;
    return;
  }
}

static void term_csi(uvt__term_t *s, uint32_t cp, uvt__text_t *out) {
  if (cp >= 0x80) {
    s->state = T_GROUND;
    return;
  }
  if (term_c0(s, cp, out))
    return;
  if (cp >= '0' && cp <= '9') {
    if (s->flags & CSI_INTER)
      s->flags |= CSI_BAD;
    if (s->nparam == 0)
      s->nparam = 1;
    if (s->nparam <= 2) {
      unsigned *p = &s->param[s->nparam - 1];
      *p = *p * 10 + (unsigned)(cp - '0');
      if (*p > PARAM_MAX)
        *p = PARAM_MAX;
    }
  } else if (cp == ';' || cp == ':') {
    if (s->flags & CSI_INTER)
      s->flags |= CSI_BAD;
    if (s->nparam == 0)
      s->nparam = 1;
    if (s->nparam < 255)
      s->nparam++;
    if (s->nparam == 2)
      s->param[1] = 0;
  } else if (cp >= 0x3C && cp <= 0x3F) {
    s->flags |= CSI_PRIVATE;
  } else if (cp >= 0x20 && cp <= 0x2F) {
    s->flags |= CSI_INTER;
  } else {
    /* 0x40..0x7E: the final byte. */
    s->state = T_GROUND;
    csi_dispatch(s, cp, out);
  }
}

static void term_string(uvt__term_t *s, uint32_t cp, uint32_t cell,
                        uvt__text_t *out) {
  if (s->state == T_STRING_ESC) {
    if (cp == '\\') {
      s->state = T_GROUND;
      return;
    }
    /* The ESC began another sequence; this character belongs to it. */
    s->state = T_ESC;
    term_char(s, cp, cell, out);
    return;
  }
  switch (cp) {
  case 0x07: /* BEL ends an OSC (xterm) */
  case 0x9C: /* ST */
  case 0x18:
  case 0x1A:
    s->state = T_GROUND;
    return;
  case 0x1B:
    s->state = T_STRING_ESC;
    return;
  default:
    break;
  }
  if (++s->string_len > UVT__TERM_STRING_MAX)
    s->state = T_GROUND;
}

static void term_char(uvt__term_t *s, uint32_t cp, uint32_t cell,
                      uvt__text_t *out) {
  switch (s->state) {
  case T_GROUND:
    term_ground(s, cp, cell, out);
    break;
  case T_ESC:
    term_esc(s, cp, cell, out);
    break;
  case T_ESC_INTER:
    if (cp >= 0x80) {
      s->state = T_GROUND;
      term_ground(s, cp, cell, out);
    } else if (!term_c0(s, cp, out) && cp >= 0x30) {
      s->state = T_GROUND;
    }
    break;
  case T_CSI:
    term_csi(s, cp, out);
    break;
  default:
    term_string(s, cp, cell, out);
    break;
  }
}

/* ---------------------------------------------------------------------- */
/* Decoding                                                                */

/* Like uvt__utf8_seq, but 0 when `n` bytes are a well-formed start of a
 * sequence that needs more bytes. */
static int term_utf8(const unsigned char *p, size_t n) {
  int k = uvt__utf8_seq(p, n);

  if (k < 0 && (size_t)-k == n && p[0] >= 0xC2 && p[0] <= 0xF4)
    return 0;
  return k;
}

static uint32_t utf8_decode(const unsigned char *p, int n) {
  switch (n) {
  case 1:
    return p[0];
  case 2:
    return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  case 3:
    return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) |
           (p[2] & 0x3F);
  default:
    return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
           ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
}

/* One decoded unit at `p` (n > 0 bytes): a character, or an invalid
 * subpart shown as U+FFFD.  Returns the bytes used, or 0 if the bytes are
 * an incomplete character. */
static size_t term_unit(uvt__term_t *s, const unsigned char *p, size_t n,
                        uvt__text_t *out) {
  int k;

  if (p[0] < 0x80) {
    term_char(s, p[0], p[0], out);
    return 1;
  }
  k = term_utf8(p, n);
  if (k == 0)
    return 0;
  if (k < 0) {
    term_char(s, 0xFFFD, CELL_REPLACEMENT, out);
    return (size_t)-k;
  }
  term_char(s, utf8_decode(p, k), cell_pack(p, k), out);
  return (size_t)k;
}

void uvt__term_feed(uvt__term_t *s, const char *bytes, size_t len,
                    uvt__text_t *out) {
  const unsigned char *p = (const unsigned char *)bytes;
  unsigned char buf[8];
  size_t i = 0;
  size_t take;
  size_t used;
  size_t have;

  /* A character cut by the previous read: complete it first. */
  while (s->pend_len > 0 && i < len) {
    have = s->pend_len;
    take = len - i < 4 ? len - i : 4;
    memcpy(buf, s->pend, have);
    memcpy(buf + have, p + i, take);
    used = term_unit(s, buf, have + take, out);
    if (used == 0) {
      /* Still incomplete: everything given so far is pending. */
      memcpy(s->pend, buf, have + take);
      s->pend_len = (unsigned char)(have + take);
      return;
    }
    s->pend_len = 0;
    /* The unit may end inside the pending bytes (they were an invalid
     * subpart after all); the rest of them are decoded again. */
    if (used < have) {
      memmove(s->pend, buf + used, have - used);
      s->pend_len = (unsigned char)(have - used);
      continue;
    }
    i += used - have;
  }
  while (i < len) {
    /* Most output is whole lines of plain ASCII: a line that starts empty
     * and ends before any control or escape byte goes out as it is. */
    if (s->state == T_GROUND && s->len == 0 && s->cursor == 0 && !s->moved) {
      size_t j = i;
      while (j < len && p[j] >= 0x20 && p[j] < 0x7F)
        j++;
      if (j < len && p[j] == '\n') {
        uvt__text_raw(out, bytes + i, j + 1 - i);
        if (s->saved != 0)
          s->saved = 2;
        i = j + 1;
        continue;
      }
    }
    used = term_unit(s, p + i, len - i, out);
    if (used == 0) {
      memcpy(s->pend, p + i, len - i);
      s->pend_len = (unsigned char)(len - i);
      return;
    }
    i += used;
  }
}

void uvt__term_end(uvt__term_t *s, int how, uvt__text_t *out) {
  if (how == UVT__TERM_FINAL) {
    if (s->pend_len > 0) {
      /* An incomplete character at the very end is invalid. */
      s->pend_len = 0;
      term_char(s, 0xFFFD, CELL_REPLACEMENT, out);
    }
    line_flush(s, out);
    s->state = T_GROUND;
    s->moved = 0;
    s->saved = 0;
    return;
  }
  if (how == UVT__TERM_SHOW && s->len > 0 && !s->shown) {
    line_emit(s, s->len, out);
    s->shown = 1;
  }
}
