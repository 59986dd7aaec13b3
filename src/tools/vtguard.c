/* What reaches libvterm (S-8): a task's bytes, made into sequences the
 * terminal emulator is known to take.
 *
 * Why: the screen of a terminal task (screen.c) is libvterm's, and what a
 * task prints is an attacker's input.  Debian's libvterm 0.1.4 keeps a
 * control sequence's parameters in 16 slots and counts them without a
 * bound, so a 17th writes past them and the next call through its
 * callbacks crashes the process: a real truecolor SGR does it
 * (`\e[38:2:59:66:97;48:2:36:40:59;58:2:224:175:104;4:3m`, 17
 * parameters; neovim fixed the same crash in its own copy).  It also
 * crashes on a DECRQSS it does not know (`\eP$qO\e\\`: a bad pointer given
 * to vsnprintf) and loops for ever on REP before any character was
 * written (`\e[5b`).  The server and every task of it die with it.
 *
 * So nothing the task wrote goes to libvterm as it was written.  This
 * file parses it with the same VT500 state machine as the transcript's
 * filter (term.c), and hands libvterm only whole sequences it rebuilt:
 *
 *  - text as valid UTF-8 (an invalid sequence becomes U+FFFD), C0
 *    controls but ESC, CAN, SUB, NUL and DEL, which are the parser's;
 *  - a control sequence (CSI) only once its final byte came, rebuilt from
 *    what was parsed: at most one private marker (< = > ?), at most
 *    UVT__VTG_PARAMS parameters (libvterm's 16 slots; one more and the
 *    sequence is dropped whole, as a terminal ignores a sequence it
 *    cannot hold), each at most UVT__VTG_PARAM_MAX (leading zeros gone),
 *    with their ';' or ':' separators, at most two intermediate bytes; a
 *    malformed one (a parameter after an intermediate, a marker in the
 *    middle) is dropped;
 *  - REP (CSI Ps b) never: the last character written is repeated here,
 *    at most a row's width of times, and nothing before any character;
 *  - an escape sequence (ESC, at most two intermediates, a final) rebuilt
 *    the same way;
 *  - no command string at all (OSC, DCS, SOS, PM, APC): what they carry
 *    (a window title, a query) is nothing a screen's text shows.  One
 *    longer than UVT__TERM_STRING_MAX bytes is given up, as term.c does,
 *    so a stray ESC ] cannot hide the rest of the screen;
 *  - C1 controls written as UTF-8 (U+0080..U+009F) as their 7-bit
 *    forms, CSI and the string introducers included, as term.c reads
 *    them.
 *
 * Everything libvterm sees is then a complete unit whose every field is
 * within its bounds, whatever the task wrote, and libvterm's parser is
 * in its ground state between units.  The screen's size is bounded where
 * the screen is made (screen.c). */
#include <string.h>

#include "tools-int.h"

enum { G_GROUND = 0, G_ESC, G_ESC_INTER, G_CSI, G_STRING, G_STRING_ESC };

static void flush(uvt__vtguard_t *g) {
  if (g->out_len > 0)
    g->sink(g->sink_ctx, g->out, g->out_len);
  g->out_len = 0;
}

/* Append a unit; one that does not fit after what is buffered starts a
 * new buffer, so units are not split unless longer than the buffer. */
static void emit(uvt__vtguard_t *g, const char *b, size_t n) {
  size_t take;

  if (g->out_len + n > sizeof(g->out))
    flush(g);
  while (n > 0) {
    take = n < sizeof(g->out) - g->out_len ? n : sizeof(g->out) - g->out_len;
    memcpy(g->out + g->out_len, b, take);
    g->out_len += take;
    b += take;
    n -= take;
    if (g->out_len == sizeof(g->out))
      flush(g);
  }
}

static void emit_c(uvt__vtguard_t *g, char c) {
  emit(g, &c, 1);
}

/* ---- sequences ---------------------------------------------------------- */

static void csi_begin(uvt__vtguard_t *g) {
  g->state = G_CSI;
  g->leader = 0;
  g->ninter = 0;
  g->nparam = 0;
  g->bad = 0;
}

static void string_begin(uvt__vtguard_t *g) {
  g->state = G_STRING;
  g->string_len = 0;
}

/* REP: the last character written, `count` times, at most a row. */
static void repeat(uvt__vtguard_t *g) {
  unsigned count = g->nparam > 0 && g->has[0] ? g->param[0] : 1;
  unsigned i;

  if (g->last_len == 0)
    return; /* nothing to repeat (libvterm 0.1.4 would loop for ever) */
  if (count == 0)
    count = 1;
  if (count > g->cols)
    count = g->cols;
  for (i = 0; i < count; i++)
    emit(g, (const char *)g->last, g->last_len);
}

static void csi_dispatch(uvt__vtguard_t *g, unsigned char final) {
  char buf[8 + UVT__VTG_PARAMS * 7];
  size_t n = 0;
  unsigned i;

  g->state = G_GROUND;
  if (g->bad)
    return;
  if (final == 'b' && g->leader == 0 && g->ninter == 0) {
    repeat(g);
    return;
  }
  buf[n++] = 0x1B;
  buf[n++] = '[';
  if (g->leader != 0)
    buf[n++] = (char)g->leader;
  for (i = 0; i < g->nparam; i++) {
    if (g->has[i]) {
      char digits[8];
      unsigned v = g->param[i];
      size_t k = 0;
      do {
        digits[k++] = (char)('0' + v % 10);
        v /= 10;
      } while (v > 0);
      while (k > 0)
        buf[n++] = digits[--k];
    }
    if (i + 1 < g->nparam)
      buf[n++] = (char)g->sep[i];
  }
  for (i = 0; i < g->ninter; i++)
    buf[n++] = (char)g->inter[i];
  buf[n++] = (char) final;
  emit(g, buf, n);
}

static void esc_dispatch(uvt__vtguard_t *g, unsigned char final) {
  char buf[4];
  size_t n = 0;
  unsigned i;

  g->state = G_GROUND;
  if (g->bad || (final == '\\' && g->ninter == 0))
    return; /* too many intermediates; a lone ST */
  buf[n++] = 0x1B;
  for (i = 0; i < g->ninter; i++)
    buf[n++] = (char)g->inter[i];
  buf[n++] = (char) final;
  emit(g, buf, n);
}

/* ---- characters --------------------------------------------------------- */

static void guard_char(uvt__vtguard_t *g, uint32_t cp, const unsigned char *b,
                       size_t n);

/* A C0 control or DEL outside a string.  Returns 1 if it was one. */
static int guard_c0(uvt__vtguard_t *g, uint32_t cp) {
  if (cp >= 0x20 && cp != 0x7F)
    return 0;
  switch (cp) {
  case 0x1B:
    g->state = G_ESC;
    g->ninter = 0;
    g->bad = 0;
    break;
  case 0x18: /* CAN, SUB: cancel the sequence */
  case 0x1A:
    g->state = G_GROUND;
    break;
  case 0x00: /* libvterm ignores them */
  case 0x7F:
    break;
  default:
    /* Executed where it stands, inside a sequence too, as libvterm and
     * term.c do. */
    emit_c(g, (char)cp);
    break;
  }
  return 1;
}

/* C1 controls written as UTF-8, in the ground state. */
static void guard_c1(uvt__vtguard_t *g, uint32_t cp) {
  switch (cp) {
  case 0x9B:
    csi_begin(g);
    break;
  case 0x90: /* DCS, SOS, OSC, PM, APC */
  case 0x98:
  case 0x9D:
  case 0x9E:
  case 0x9F:
    string_begin(g);
    break;
  case 0x9C: /* ST with no string */
    break;
  default:
    g->ninter = 0;
    g->bad = 0;
    esc_dispatch(g, (unsigned char)(cp - 0x40));
    break;
  }
}

static void guard_ground(uvt__vtguard_t *g, uint32_t cp, const unsigned char *b,
                         size_t n) {
  if (guard_c0(g, cp))
    return;
  if (cp >= 0x80 && cp <= 0x9F) {
    guard_c1(g, cp);
    return;
  }
  emit(g, (const char *)b, n);
  memcpy(g->last, b, n);
  g->last_len = (unsigned char)n;
}

static void guard_esc(uvt__vtguard_t *g, uint32_t cp, const unsigned char *b,
                      size_t n) {
  if (cp >= 0x80) {
    /* Not a sequence after all. */
    g->state = G_GROUND;
    guard_ground(g, cp, b, n);
    return;
  }
  if (guard_c0(g, cp))
    return;
  if (cp >= 0x20 && cp <= 0x2F) {
    if (g->ninter < sizeof(g->inter))
      g->inter[g->ninter++] = (unsigned char)cp;
    else
      g->bad = 1;
    g->state = G_ESC_INTER;
    return;
  }
  if (g->state == G_ESC) {
    switch (cp) {
    case '[':
      csi_begin(g);
      return;
    case ']':
    case 'P':
    case 'X':
    case '^':
    case '_':
      string_begin(g);
      return;
    default:
      break;
    }
  }
  esc_dispatch(g, (unsigned char)cp);
}

static void guard_csi(uvt__vtguard_t *g, uint32_t cp) {
  unsigned i;

  if (cp >= 0x80) {
    g->state = G_GROUND; /* the character goes with the sequence */
    return;
  }
  if (guard_c0(g, cp))
    return;
  if (cp >= '0' && cp <= ';') { /* digits, ':' and ';' */
    if (g->ninter > 0)
      g->bad = 1; /* a parameter after an intermediate */
    if (g->nparam == 0) {
      g->nparam = 1;
      g->has[0] = 0;
      g->param[0] = 0;
    }
    i = g->nparam - 1u;
    if (cp <= '9') {
      if (i < UVT__VTG_PARAMS) {
        g->has[i] = 1;
        g->param[i] = g->param[i] * 10 + (cp - '0');
        if (g->param[i] > UVT__VTG_PARAM_MAX)
          g->param[i] = UVT__VTG_PARAM_MAX;
      }
    } else if (g->nparam >= UVT__VTG_PARAMS) {
      g->bad = 1; /* one parameter more than libvterm holds */
    } else {
      g->sep[i] = (unsigned char)cp;
      g->has[g->nparam] = 0;
      g->param[g->nparam] = 0;
      g->nparam++;
    }
    return;
  }
  if (cp >= 0x3C && cp <= 0x3F) {
    if (g->nparam == 0 && g->ninter == 0 && g->leader == 0)
      g->leader = (unsigned char)cp;
    else
      g->bad = 1;
    return;
  }
  if (cp >= 0x20 && cp <= 0x2F) {
    if (g->ninter < sizeof(g->inter))
      g->inter[g->ninter++] = (unsigned char)cp;
    else
      g->bad = 1;
    return;
  }
  csi_dispatch(g, (unsigned char)cp); /* 0x40..0x7E */
}

static void guard_string(uvt__vtguard_t *g, uint32_t cp, const unsigned char *b,
                         size_t n) {
  if (g->state == G_STRING_ESC) {
    if (cp == '\\') {
      g->state = G_GROUND;
      return;
    }
    /* The ESC began another sequence; this character belongs to it. */
    g->state = G_ESC;
    g->ninter = 0;
    g->bad = 0;
    guard_char(g, cp, b, n);
    return;
  }
  switch (cp) {
  case 0x07: /* BEL ends an OSC (xterm) */
  case 0x9C: /* ST */
  case 0x18:
  case 0x1A:
    g->state = G_GROUND;
    return;
  case 0x1B:
    g->state = G_STRING_ESC;
    return;
  default:
    break;
  }
  if (++g->string_len > UVT__TERM_STRING_MAX)
    g->state = G_GROUND;
}

static void guard_char(uvt__vtguard_t *g, uint32_t cp, const unsigned char *b,
                       size_t n) {
  switch (g->state) {
  case G_GROUND:
    guard_ground(g, cp, b, n);
    break;
  case G_ESC:
  case G_ESC_INTER:
    guard_esc(g, cp, b, n);
    break;
  case G_CSI:
    guard_csi(g, cp);
    break;
  default:
    guard_string(g, cp, b, n);
    break;
  }
}

/* ---- decoding ----------------------------------------------------------- */

static uint32_t decode(const unsigned char *p, int n) {
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

/* One unit at `p` (n > 0 bytes): a character, or an invalid subpart as
 * U+FFFD.  Returns the bytes used, or 0 for an incomplete character. */
static size_t guard_unit(uvt__vtguard_t *g, const unsigned char *p, size_t n) {
  static const unsigned char fffd[3] = {0xEF, 0xBF, 0xBD};
  int k;

  if (p[0] < 0x80) {
    guard_char(g, p[0], p, 1);
    return 1;
  }
  k = uvt__utf8_seq(p, n);
  if (k < 0 && (size_t)-k == n && p[0] >= 0xC2 && p[0] <= 0xF4)
    return 0; /* a well-formed start that needs more bytes */
  if (k < 0) {
    guard_char(g, 0xFFFD, fffd, sizeof(fffd));
    return (size_t)-k;
  }
  guard_char(g, decode(p, k), p, (size_t)k);
  return (size_t)k;
}

void uvt__vtguard_init(uvt__vtguard_t *g, unsigned cols,
                       void (*sink)(void *ctx, const char *bytes, size_t len),
                       void *sink_ctx) {
  memset(g, 0, sizeof(*g));
  g->cols = cols > 0 ? cols : 1;
  g->sink = sink;
  g->sink_ctx = sink_ctx;
}

void uvt__vtguard_feed(uvt__vtguard_t *g, const char *bytes, size_t len) {
  const unsigned char *p = (const unsigned char *)bytes;
  unsigned char buf[8];
  size_t i = 0;
  size_t have;
  size_t take;
  size_t used;

  /* A character cut by the previous feed: complete it first. */
  while (g->pend_len > 0 && i < len) {
    have = g->pend_len;
    take = len - i < 4 ? len - i : 4;
    memcpy(buf, g->pend, have);
    memcpy(buf + have, p + i, take);
    used = guard_unit(g, buf, have + take);
    if (used == 0) {
      memcpy(g->pend, buf, have + take);
      g->pend_len = (unsigned char)(have + take);
      flush(g);
      return;
    }
    g->pend_len = 0;
    if (used < have) {
      memmove(g->pend, buf + used, have - used);
      g->pend_len = (unsigned char)(have - used);
      continue;
    }
    i += used - have;
  }
  while (i < len) {
    used = guard_unit(g, p + i, len - i);
    if (used == 0) {
      memcpy(g->pend, p + i, len - i);
      g->pend_len = (unsigned char)(len - i);
      break;
    }
    i += used;
  }
  flush(g);
}
