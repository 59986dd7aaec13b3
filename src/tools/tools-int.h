/* Internal helpers of the tool surface: result texts, UTF-8 repair, the
 * terminal filter and the shaping of a read's output. */
#ifndef UVTASKS_TOOLS_INT_H
#define UVTASKS_TOOLS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "uvtasks.h"
#include "uvtasks/process.h"
#include "uvtasks/tools.h"
/* The tool surface is a layer above the core: besides the public headers
 * above it uses the producers' published header (the loop-thread check,
 * UVT_LOOP_ONLY) and the leaf helpers (the intrusive list,
 * uvt__container_of, the allocator); never src/uvt-internal.h. */
#include "uvtasks/producer.h"
#include "leaf/alloc.h"
#include "leaf/list.h"

/* A growable text, kept NUL-terminated; it may hold NUL bytes of its own
 * (command output), so `len` is its length, not strlen().  `err` latches
 * the first allocation failure so a sequence of appends can be checked
 * once at the end. */
typedef struct {
  char *base;
  size_t len;
  size_t cap;
  int err;
} uvt__text_t;

void uvt__text_init(uvt__text_t *t);
void uvt__text_free(uvt__text_t *t);
/* Hand the text over: returns base (never NULL unless t->err) and resets
 * `t`. */
char *uvt__text_take(uvt__text_t *t);
void uvt__text_raw(uvt__text_t *t, const char *bytes, size_t len);
void uvt__text_str(uvt__text_t *t, const char *s);
void uvt__text_printf(uvt__text_t *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Append `len` bytes as valid UTF-8: each maximal invalid subpart becomes
 * U+FFFD; NUL bytes are valid (U+0000) and kept. */
void uvt__text_utf8(uvt__text_t *t, const char *bytes, size_t len);
/* Append the C string `s` on one line: control characters become spaces,
 * invalid UTF-8 becomes U+FFFD, and more than `max_bytes` bytes are cut at
 * a character boundary and marked with "...". */
void uvt__text_oneline(uvt__text_t *t, const char *s, size_t max_bytes);
/* Append the status line of `snap`: "[status: S]" or "[status: S, DETAIL]". */
void uvt__text_status(uvt__text_t *t, const uvt_snapshot_t *snap);

/* P-LEFT-1 (leftovers.c): the status line of `snap` as uvt__text_status
 * gives it, and the detail alone (cut to max_bytes), with what an ended
 * process task left running as `mode` asks: UVT__DETAIL_LIVE replaces the
 * count at its end by the count now and how to stop them ("exit code: 0;
 * 2 processes still running; task_kill bash-3 stops them"),
 * UVT__DETAIL_WITHOUT_COUNT drops it (a kill of the ended task says what
 * it stops in its own words), UVT__DETAIL_AS_IS keeps the detail.  `caller`
 * is the fence of the count.  Loop thread. */
enum { UVT__DETAIL_LIVE, UVT__DETAIL_WITHOUT_COUNT, UVT__DETAIL_AS_IS };
void uvt__tools_status(uvt_tools_t *tools, const uvt_agent_t *caller,
                       uvt__text_t *t, const uvt_snapshot_t *snap, int mode);
void uvt__tools_detail(uvt_tools_t *tools, const uvt_agent_t *caller,
                       uvt__text_t *t, const uvt_snapshot_t *snap, int mode,
                       size_t max_bytes);

/* Length of the well-formed UTF-8 sequence at `s` (1-4), or, if it is not
 * well formed, minus the length of its maximal invalid subpart (-1..-3).
 * `n` > 0.  NUL is a well-formed sequence of 1. */
int uvt__utf8_seq(const unsigned char *s, size_t n);

/* Append `len` bytes of output so that at most `max_bytes` bytes are
 * appended, ending with a newline (one is added if the text lacks it):
 * all of it if it fits, else the head and the tail, cut at line
 * boundaries where one is near (else at a character boundary), with a line
 * "[... N bytes (L lines) left out ...]" between them, or "[... N bytes
 * left out within one line ...]" when no newline is (M-TOOLS-8).
 * `bytes` is valid UTF-8; `max_bytes` is at least UVT_TOOLS_MAX_BYTES_MIN.
 * Nothing is appended for len 0. */
void uvt__text_clip(uvt__text_t *t, const char *bytes, size_t len,
                    size_t max_bytes);
/* The same with at most `max_lines` lines of output (M-TOOLS-15; at least
 * UVT_TOOLS_MAX_LINES_MIN is used): the head gets 2/5 and the tail 3/5 of
 * the lines too.  The process producer's drop notices ("[... N bytes
 * dropped ...]" lines) among what is left out are summed in the cut line
 * ("..., and N bytes dropped at the output cap ...]"), not counted as left
 * out.  `cut` (NULL = not wanted) gets where what was left out begins and
 * ends in `bytes` (both 0 when nothing was). */
void uvt__text_clip_lines(uvt__text_t *t, const char *bytes, size_t len,
                          size_t max_bytes, size_t max_lines, size_t *cut);
/* Length of the drop notice "[... N bytes dropped ...]\n" (P-OUT-2) at the
 * start of `s` (n bytes), with N in *dropped (may be NULL), or 0. */
size_t uvt__drop_notice_len(const char *s, size_t n, uint64_t *dropped);

/* ---- term.c: terminal output as text for a model (M-TOOLS-7). */

/* Cells of the one line the filter keeps; a longer line goes out in
 * segments of this size. */
#define UVT__TERM_LINE_MAX 1024
/* Longest command string (OSC, DCS, ...) followed before it is given up. */
#define UVT__TERM_STRING_MAX 65536

/* The filter's state for one output stream: the unfinished line and the
 * escape parser.  Zeroed is a fresh state (uvt__term_init). */
typedef struct {
  uint32_t *line; /* one character's UTF-8 bytes per cell */
  size_t len;     /* cells in use */
  size_t cap;     /* cells allocated */
  size_t cursor;  /* column, 0-based; may be past len */
  size_t string_len;
  unsigned param[2];
  unsigned char nparam;
  unsigned char flags;
  unsigned char state;
  unsigned char shown; /* the line, as it is now, ended an earlier read */
  unsigned char moved; /* a move to another row, nothing written since */
  unsigned char saved; /* 1: a cursor was saved at saved_col; 2: and
                        * its row was left since */
  size_t saved_col;
  unsigned char pend_len;
  unsigned char pend[4]; /* a character cut by the end of a read */
} uvt__term_t;

void uvt__term_init(uvt__term_t *s);
/* Free the line; `s` is a fresh state after.  Accepts NULL. */
void uvt__term_free(uvt__term_t *s);
/* Filter `len` bytes; every line they end goes to `out` with its newline. */
void uvt__term_feed(uvt__term_t *s, const char *bytes, size_t len,
                    uvt__text_t *out);

enum {
  /* The read ends: keep the unfinished line for the next one. */
  UVT__TERM_HOLD = 0,
  /* The read ends: also append the unfinished line (no newline) as it is
   * now, unless that was done already; a later newline then adds nothing,
   * and a later change shows the whole line again. */
  UVT__TERM_SHOW,
  /* The stream ended: append the unfinished line; the state is fresh. */
  UVT__TERM_FINAL
};
void uvt__term_end(uvt__term_t *s, int how, uvt__text_t *out);
/* Nonzero if the next read depends on `s`. */
int uvt__term_carries(const uvt__term_t *s);
/* `len` bytes that stand alone (a progress line, the tail of a prompt)
 * appended to `out` as a terminal shows them: a fresh state, fed, ended
 * UVT__TERM_FINAL and freed.  Out of memory sets out->err. */
void uvt__term_plain(const char *bytes, size_t len, uvt__text_t *out);

/* ---- output.c: one read's output as a tool result shows it. */

#include <regex.h>

/* How a result shows a read: its bounds (M-TOOLS-8, M-TOOLS-15), a view
 * in lines (M-TOOLS-16: head_lines and tail_lines, -1 = not given; match,
 * NULL = none) and the caller (the fence of the looks it makes). */
typedef struct {
  size_t max_bytes;
  size_t max_lines;
  int64_t head_lines;
  int64_t tail_lines;
  const regex_t *match;
  const uvt_agent_t *caller;
} uvt__shape_t;

/* Append the output of the read `r` of task `id` (M-TOOLS-7, M-TOOLS-8),
 * shaped by `sh`, ending with a newline; nothing if it shows nothing; then
 * the notes on it (M-TOOLS-17: the spill file and what was left out;
 * M-TOOLS-18: a sandbox without network).  Keeps the filter's state of a
 * task that has not ended for its next read.  Allocation failures latch
 * in `t`. */
void uvt__tools_output(uvt_tools_t *tools, const char *id, const uvt_read_t *r,
                       const uvt__shape_t *sh, uvt__text_t *t);
/* Forget every kept state (detach). */
void uvt__tools_output_free(uvt_tools_t *tools);

/* ---- The state of a call and of the tools (tools.c, result.c). */

enum { CALL_IDLE = 0, CALL_WAITING, CALL_READY };

/* ABORT_EARLY: write_stdin stops its own wait to answer at a prompt. */
enum { ABORT_NONE = 0, ABORT_CALLER, ABORT_DETACH, ABORT_EARLY };

enum { TOOL_OTHER = 0, TOOL_RUN_COMMAND, TOOL_WRITE_STDIN, TOOL_TASK_WAIT };

/* tools->state_ */
enum { TOOLS_DETACHED = 0, TOOLS_ATTACHED, TOOLS_DETACHING };

/* The tools are attached (not detaching or detached). */
static inline int uvt__tools_attached(const uvt_tools_t *tools) {
  return tools->state_ == TOOLS_ATTACHED;
}

/* Longest label shown in a notice or a task_list line, in bytes. */
#define TOOLS_LABEL_MAX 120

/* ---- schema.c: the tools, one row each (M-TOOLS-3): names and schemas
 * only; which function runs each is the dispatch's (tools.c). */

typedef struct {
  const char *name;
  int kind;           /* TOOL_* */
  const char *schema; /* its JSON object's members after "name" */
} uvt__tool_def_t;
extern const uvt__tool_def_t uvt__tool_defs[];
extern const size_t uvt__tool_defs_n;
/* The row of tool `name`, or NULL. */
const uvt__tool_def_t *uvt__tool_find(const char *name);

/* The tools of tools.c. */
void uvt__tool_run_in_background(uvt_tools_call_t *req,
                                 const uvt_tools_args_t *args);
void uvt__tool_run_command(uvt_tools_call_t *req, const uvt_tools_args_t *args);
void uvt__tool_task_output(uvt_tools_call_t *req, const uvt_tools_args_t *args);
void uvt__tool_task_list(uvt_tools_call_t *req, const uvt_tools_args_t *args);
void uvt__tool_task_kill(uvt_tools_call_t *req, const uvt_tools_args_t *args);

/* ---- result.c: a call's result, delivered from the loop. */

/* Put the built text into `req` and queue it for its callback. */
void uvt__tools_result(uvt_tools_call_t *req, uvt__text_t *t, int is_error);
/* Queue `req` for delivery with `status` (its text, if any, in place). */
void uvt__tools_ready(uvt_tools_call_t *req, int status);
/* The error text for an operation (`verb`) on `id` that returned `err`. */
void uvt__tools_task_error(uvt__text_t *t, const char *verb, const char *id,
                           int err);
/* A detach ends once no result is pending: the handles close, then the
 * tools' state is freed and the detach callback runs. */
void uvt__tools_finish_detach(uvt_tools_t *tools);

/* ---- args.c: the arguments the tools share, checked into the call; a
 * -1 return means the tool error is already answered. */

/* The call's task_id: 0, or -1 after answering that `tool` needs one. */
int uvt__tools_need_id(uvt_tools_call_t *req, const uvt_tools_args_t *args,
                       const char *tool);
/* The most output lines a result of at most `max_bytes` shows
 * (M-TOOLS-15): the tools' max_lines, raised in proportion for a call that
 * asks for more bytes than the tools' default. */
size_t uvt__tools_max_lines(const uvt_tools_t *tools, size_t max_bytes);
/* Take the call's view (M-TOOLS-16): 0, or -1 after answering. */
int uvt__tools_view(uvt_tools_call_t *req, const uvt_tools_args_t *args);
/* Take the call's max_bytes (M-TOOLS-8): 0, or -1 after answering. */
int uvt__tools_max_bytes(uvt_tools_call_t *req, const uvt_tools_args_t *args);
/* The call's timeout_ms: `default_ms` when not given, capped at `max_ms`;
 * 0, or -1 after answering with a tool error. */
int uvt__tools_timeout(uvt_tools_call_t *req, const uvt_tools_args_t *args,
                       uint64_t default_ms, uint64_t max_ms, uint64_t *out);
/* M-TOOLS-6: a wait's timeout, at most the tools' yield. */
uint64_t uvt__tools_wait_yield(const uvt_tools_t *tools, uint64_t timeout_ms);

/* ---- read.c: a read of a task as a result. */

/* Read `id` and answer with its output and status line; `fallback` (a
 * snapshot a wait delivered, or NULL) is shown if the read finds the task
 * gone; timed_out_ms > 0 notes a wait that timed out. */
void uvt__tools_read_result(uvt_tools_call_t *req, const char *id,
                            uint64_t timed_out_ms,
                            const uvt_snapshot_t *fallback);
/* run_command's result once its wait ended with `status` (`snap`: what
 * the wait delivered, or NULL). */
void uvt__tools_run_result(uvt_tools_call_t *req, int status,
                           const uvt_snapshot_t *snap);

/* ---- waiting.c: the calls waiting on a task. */

/* The call waits (req->wait_ is armed): on the tools' waiting list. */
void uvt__tools_link_waiting(uvt_tools_call_t *req);
/* The call no longer waits: off the tools' waiting list. */
void uvt__tools_unlink_waiting(uvt_tools_call_t *req);
/* The callback of every wait a call makes. */
void uvt__tools_wait_cb(uvt_wait_t *w, int status, const uvt_snapshot_t *snap);

/* ---- notice.c: completion notices (M-TOOLS-2). */

/* A completion notice for `snap` to `owner` (while attached). */
void uvt__tools_notice(uvt_tools_t *tools, const uvt_snapshot_t *snap,
                       uvt_agent_t *owner);
/* The tools' listener: a notice for each task that ended unseen. */
void uvt__tools_done_cb(uvt_listener_t *l, const uvt_snapshot_t *snap,
                        uvt_agent_t *owner);

/* ---- kept.c: per-task states kept between reads. */

typedef struct uvt__kept_s uvt__kept_t;
/* The task of the state ended (`dropped` 0) or its record was dropped
 * (1: the callback frees the state, which is off its list after). */
typedef void (*uvt__kept_cb)(uvt__kept_t *k, uvt_tools_t *tools, int dropped);
/* The head of every kept state (the filter states of output.c, the
 * screens, the spill records). */
struct uvt__kept_s {
  struct uvt__link link; /* on one of the tools' lists */
  const char *id;        /* the task's id, in the state itself */
  uvt__kept_cb cb;
};
/* Keep state `k` of task `id` on `list` (one of the tools' carries_,
 * screens_, spills_); the registry's watch runs while any is kept. */
void uvt__tools_keep_state(uvt_tools_t *tools, struct uvt__link *list,
                           uvt__kept_t *k, const char *id, uvt__kept_cb cb);
/* A kept state was freed by its owner (a task's last read): the watch
 * stops with the last one. */
void uvt__tools_kept_gone(uvt_tools_t *tools);

/* ---- spill.c: each task's raw output, counted and kept (M-TOOLS-17). */

/* What the tools know of one task's output, per stream (0: stdout or the
 * one stream, 1: stderr): the bytes and newlines seen (every byte comes
 * through uvt__spill_tee_cb), where reads have got to, and its files. */
typedef struct {
  uvt__kept_t kept; /* on the tools' spills_ */
  char id[UVT_ID_MAX];
  uvt_agent_t *owner;   /* whom a notice about its files goes to */
  uint64_t seq;         /* the order tasks were seen in (oldest first) */
  uint64_t seen[2];     /* bytes of the stream */
  uint64_t nl[2];       /* newlines among them */
  uint64_t read_end[2]; /* where the next read begins in the stream */
  uint64_t read_nl[2];  /* newlines before read_end */
  uint64_t size[2];     /* bytes in its file */
  int fd[2];            /* the file, open while the task runs; or -1 */
  dev_t dev[2];         /* the file made (S-7) */
  ino_t ino[2];
  int made[2];
  int full[2]; /* the file stopped growing (a bound, an error) */
  int gone;    /* its files were removed (spill_max_total) */
  int ended;   /* the task ended: no descriptor is held */
} uvt__spill_t;

/* The spill directory is the user's own and closed to others (made 0700
 * if missing): 0, UV_EPERM, or an error of mkdir()/lstat(). */
int uvt__spill_check_dir(const char *dir);
/* That check, then the directory opened once (S-7) into
 * tools->spill_fd_: 0, UV_EPERM, or an error of the system. */
int uvt__spill_open(uvt_tools_t *tools, const char *dir);
/* The record of `id`; made (counts zero) when `make` and missing.  NULL
 * when there is none (or no memory). */
uvt__spill_t *uvt__spill_find(uvt_tools_t *tools, const char *id, int make);
/* The path of stream k's file: 0, or -1 when it does not fit. */
int uvt__spill_path(const uvt_tools_t *tools, const uvt__spill_t *s, int k,
                    char *path, size_t size);
/* Stream k's file for reading (M-TOOLS-16's views read dropped bytes
 * back): opened without following links and only if it is the file made
 * (S-7); -1 otherwise.  The caller closes it. */
int uvt__spill_read_fd(uvt_tools_t *tools, uvt__spill_t *s, int k);
/* The process producer's on_tee for the tools' tasks. */
void uvt__spill_tee_cb(const char *id, int stream, const char *bytes,
                       size_t len, void *data);
/* Task `id` was started for `owner` (notices about its files go there). */
void uvt__spill_owner(uvt_tools_t *tools, const char *id, uvt_agent_t *owner);
/* (Its task's end closes its files; its record's drop removes them,
 * unless keep_spill: through kept.c.) */
/* Detach: every record; the files go unless keep_spill; the directory's
 * descriptor is closed. */
void uvt__spill_free(uvt_tools_t *tools);

/* ---- vtguard.c: what reaches libvterm (S-8). */

/* Parameters of a control sequence libvterm holds (its CSI_ARGS_MAX). */
#define UVT__VTG_PARAMS 16
/* A parameter's largest value; larger ones are cut to it. */
#define UVT__VTG_PARAM_MAX 65535u

/* The guard's state for one screen.  Initialise with uvt__vtguard_init. */
typedef struct {
  void (*sink)(void *ctx, const char *bytes, size_t len);
  void *sink_ctx;
  unsigned cols; /* REP repeats at most this many characters */
  size_t string_len;
  unsigned param[UVT__VTG_PARAMS];
  unsigned char has[UVT__VTG_PARAMS]; /* parameter i has digits */
  unsigned char sep[UVT__VTG_PARAMS]; /* ';' or ':' after parameter i */
  unsigned char nparam;
  unsigned char leader;
  unsigned char inter[2];
  unsigned char ninter;
  unsigned char bad;
  unsigned char state;
  unsigned char last[4]; /* the last character written, for REP */
  unsigned char last_len;
  unsigned char pend[4]; /* a character cut by the end of a feed */
  unsigned char pend_len;
  size_t out_len;
  char out[4096];
} uvt__vtguard_t;

/* A fresh guard whose rebuilt units go to `sink` (libvterm's input). */
void uvt__vtguard_init(uvt__vtguard_t *g, unsigned cols,
                       void (*sink)(void *ctx, const char *bytes, size_t len),
                       void *sink_ctx);
/* Parse `len` bytes of a task's output; whole units go to the sink before
 * this returns (a sequence or character cut by the end waits for the next
 * feed). */
void uvt__vtguard_feed(uvt__vtguard_t *g, const char *bytes, size_t len);

/* ---- screen.c: the screen of a terminal task (M-TOOLS-11). */

/* A screen's rows and columns are at most this many, and it has at least
 * two columns (S-8: libvterm 0.1.4 crashes on a wide character in a
 * screen of one column); a screen outside is not made, and the task's
 * results stay a transcript. */
#define UVT__SCREEN_MAX 1000
#define UVT__SCREEN_MIN_COLS 2

typedef struct uvt__screen_s uvt__screen_t;
/* A screen of rows x cols for task `id` (started with tty); none when
 * memory runs out (its results then stay a transcript). */
void uvt__screen_add(uvt_tools_t *tools, const char *id, int rows, int cols);
uvt__screen_t *uvt__screen_find(uvt_tools_t *tools, const char *id);
void uvt__screen_feed(uvt__screen_t *s, const char *bytes, size_t len);
/* Nonzero while the program is on the alternate screen. */
int uvt__screen_alt(const uvt__screen_t *s);
/* A line "[screen COLSxROWS, alternate|main screen, cursor at row R,
 * column C; ...]", then the rows up to the last that shows something,
 * trailing blanks cut. */
void uvt__screen_render(uvt__screen_t *s, uvt__text_t *t);
/* The screen of `id` goes (kept.c does it when the record is dropped). */
void uvt__screen_forget(uvt_tools_t *tools, const char *id);
void uvt__screen_free_all(uvt_tools_t *tools);
/* taskscreen.c: the task_screen tool. */
void uvt__tool_task_screen(uvt_tools_call_t *req, const uvt_tools_args_t *args);

/* ---- wait.c: task_wait (M-TOOLS-9). */

void uvt__tool_task_wait(uvt_tools_call_t *req, const uvt_tools_args_t *args);
void uvt__tool_task_wait_abort(uvt_tools_call_t *req);

/* ---- write.c: write_stdin (M-TOOLS-5). */

void uvt__tool_write_stdin(uvt_tools_call_t *req, const uvt_tools_args_t *args);
/* M-TOOLS-14 (signal.c): task_kill with `signal`; and write_stdin's
 * "\u0003" to a stdin-pipe task: 1 when it was sent as SIGINT to the
 * session of req->task_id_ (nothing is to be written then); UV_EAGAIN
 * when its spawn is still out and UV_EPIPE when it is ending (nothing was
 * sent: the write's error); else 0 (not a Ctrl-C to a pipe: write it). */
void uvt__tool_task_signal(uvt_tools_call_t *req, const uvt_tools_args_t *args);
int uvt__tools_ctrl_c(uvt_tools_call_t *req, const char *chars, size_t len);
/* The tools' quiet_ timer: answers the waiting write_stdin calls whose
 * program printed a prompt and went quiet. */
void uvt__tools_quiet_cb(uv_timer_t *timer);

/* Allocation for the tool surface, through the library's allocator; result
 * texts are freed by uvt_tools_call_cleanup(). */
void *uvt__tools_malloc(size_t size);
void *uvt__tools_realloc(void *ptr, size_t size);
void uvt__tools_free(void *ptr);

#endif
