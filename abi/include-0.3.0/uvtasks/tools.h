/* uvtasks/tools.h: the model-facing control surface (contract §5, §5b, §5c).
 *
 * A uvt_tools_t attaches a control surface to a registry and offers its
 * tools to a host that talks to a model:
 *
 *   run_in_background  command, cwd?, label?, stdin?, tty?, merge_stderr?,
 *                      memory_mb?, max_processes?, cpu_percent?
 *                                               -> the new task id
 *   run_command        command, cwd?, timeout_ms?, yield_ms?, max_bytes?,
 *                      stdin (text)?, merge_stderr?, memory_mb?,
 *                      max_processes?, cpu_percent?
 *                                               -> its output, status line
 *   task_output        task_id, wait?, timeout_ms?, max_bytes?
 *                                               -> new output, status line
 *   task_list          (none)                   -> one line per visible task
 *   task_kill          task_id, reason?,        -> what happened, status line
 *                      signal?
 *   write_stdin        task_id, chars?, close_stdin?, yield_ms?, max_bytes?
 *                                               -> new output, status line
 *   task_wait          task_ids, mode?, timeout_ms?, max_bytes?
 *                                               -> per task: its status
 *                                                  line, output if it ended
 *   task_screen        task_id                  -> a terminal task's
 *                                                  screen, status line
 *
 * Every result is one text of valid UTF-8 (invalid sequences of command
 * output become U+FFFD).  The NUL bytes of command output are kept: a
 * result may hold NULs, so its length is uvt_tools_call_t.len, never
 * strlen() (M-MCP-8: uvtasks-mcp sends them in JSON as \u0000; a host
 * that wants C strings replaces them itself).  Texts that concern one
 * task end with its status line, `[status: S]` or `[status: S, DETAIL]`
 * ("[status: completed, exit code: 0]").
 *
 * Output is shown as text for a model (M-TOOLS-7): no terminal escape
 * sequences (colours, cursor moves, titles, hyperlinks) and no stray
 * control characters other than newline, tab and NUL (kept, above: it is
 * no formatting, and it tells that binary data went by); carriage
 * returns, backspaces, erase-in-line and horizontal cursor moves are
 * applied to the line they are on, so a progress bar shows its last
 * state, not every frame.  The filter keeps its state per task between
 * reads (a read may end inside an escape sequence or in a line being
 * redrawn): a line still being written when a read ends is shown as it is
 * then, and shown again, whole, by the next read if it changed.
 * A sequence that moves to another row ends the line being written (rows
 * are not kept: what is written on another row becomes a line of its
 * own), and a multi-line redraw shows each frame.  Within one read of a process
 * task, a stdout line cut off by stderr output counts as ended.  The raw bytes
 * are what uvt_read() returns; a host that reads a task itself bypasses the
 * filter (and the tools' state for that task no longer matches: mix the two
 * only with care).
 *
 * One result carries at most `max_bytes` bytes and `max_lines` lines of
 * output (M-TOOLS-8, M-TOOLS-15; the line budget is split the same way): a
 * larger read keeps its head (2/5) and its tail (3/5, where errors and
 * summaries are), cut at line boundaries where one is near, with one line
 * "[... N bytes (L lines) left out ...]" between them ("[... N bytes left
 * out within one line ...]" when no newline was left out: the head's last
 * line and the tail's first are then one line).  The read consumed
 * those bytes: the line counts them, nothing goes silently.  A command
 * the tools start keeps the first UVT_TOOLS_HEAD_BYTES of each stream
 * apart from the output cap's ring until its first read (M-TOOLS-15), so
 * a read after the cap dropped bytes begins with the true beginning; the
 * cut line then also names the bytes the cap dropped: "[... N bytes (L
 * lines) left out, and D bytes dropped at the output cap ...]" (a drop
 * notice of the read that falls in what is left out, summed there).  The status
 * line and the tools' own notes come on top of `max_bytes`.
 *
 * Tool calls are requests in the libuv style: the host allocates a
 * uvt_tools_call_t, starts it with uvt_tools_call(), and gets its callback
 * exactly once, never inside uvt_tools_call() itself.  Most tools do their
 * work inside uvt_tools_call() and only defer the callback; task_output with
 * `wait` waits first (uvt_wait()), which uvt_tools_call_abort() can cut
 * short, write_stdin writes inside uvt_tools_call() and then waits for
 * output (the same way), and run_command starts its task inside
 * uvt_tools_call() and waits for its end or its yield
 * (uvt_tools_call_task() names the task meanwhile).
 *
 * Completion notices (M-TOOLS-2): when a task that is owned and was not
 * reported settles, the host's notice callback gets the owner and one line
 * naming the task and its status line, so the host can tell the model.
 * Tasks whose end was already seen (a wait, a read, a kill) get none.
 */
#ifndef UVTASKS_TOOLS_H
#define UVTASKS_TOOLS_H

#include "../uvtasks.h"
#include "process.h" /* uvt_sandbox_t (S-4) */

#ifdef __cplusplus
extern "C" {
#endif

/* The tools' names (M-TOOLS-3), spelled here only: the tool surface's
 * rows (uvt_tools_schema_json(), uvt_tools_call()) and a host that reads
 * a call's arguments itself (uvtasks-mcp) use these.
 * Since: 0.3.0 */
#define UVT_TOOL_RUN_IN_BACKGROUND "run_in_background"
#define UVT_TOOL_RUN_COMMAND "run_command"
#define UVT_TOOL_TASK_OUTPUT "task_output"
#define UVT_TOOL_TASK_LIST "task_list"
#define UVT_TOOL_TASK_KILL "task_kill"
#define UVT_TOOL_WRITE_STDIN "write_stdin"
#define UVT_TOOL_TASK_WAIT "task_wait"
#define UVT_TOOL_TASK_SCREEN "task_screen"

/* M-TOOLS-1: the wait of task_output when timeout_ms is not given, and the
 * longest wait it accepts (longer ones are cut to this). */
#define UVT_TOOLS_WAIT_DEFAULT_MS 30000
#define UVT_TOOLS_WAIT_MAX_MS 600000

/* run_command: how long the command may run when timeout_ms is not given,
 * and the longest run it accepts (longer ones are cut to this).  A command
 * still running then is stopped like a kill (P-LIMIT-1). */
#define UVT_TOOLS_RUN_DEFAULT_MS 600000
#define UVT_TOOLS_RUN_MAX_MS 3600000

/* M-TOOLS-8: the most output bytes one result shows when neither the call
 * (max_bytes) nor the options say, and the least a call may ask for
 * (smaller ones are raised to it, so the head, the tail and the line
 * between them fit). */
#define UVT_TOOLS_MAX_BYTES_DEFAULT 10000
#define UVT_TOOLS_MAX_BYTES_MIN 256

/* M-TOOLS-15: the most output lines one result shows when the options do
 * not say, and the least the options may set.  With the byte default
 * above, a result survives every host's own cut (opencode keeps the first
 * 2,000 lines of a result, Codex about 12 KB cut in the middle), so the
 * status line at its end always reaches the model.  A call whose
 * max_bytes is N times the options' max_bytes may show N times the
 * lines. */
#define UVT_TOOLS_MAX_LINES_DEFAULT 1000
#define UVT_TOOLS_MAX_LINES_MIN 10

/* M-TOOLS-15: the first bytes of each stream of a command the tools start
 * are kept apart from the cap's ring until the first read
 * (uvt_process_options_t.keep_head_bytes), so a result after the cap
 * dropped bytes still begins with the output's true beginning. */
#define UVT_TOOLS_HEAD_BYTES 16384

/* M-TOOLS-5: write_stdin waits this long for output when the call gives
 * no yield_ms, and at most this long (longer ones are cut to it). */
#define UVT_TOOLS_WRITE_YIELD_DEFAULT_MS 250
#define UVT_TOOLS_WRITE_YIELD_MAX_MS 30000
/* M-TOOLS-5: write_stdin answers before its yield once the task printed
 * a prompt (output that stops inside a line) and then nothing for this
 * long: the output is looked at every this many milliseconds, and two
 * looks in a row that find the same unread output are a quiet spell.  See
 * uvt_tools_call(). */
#define UVT_TOOLS_WRITE_QUIET_MS 50

/* M-TOOLS-18: a write_stdin to a terminal task whose chars end with a lone
 * ESC waits at least this long (unless its yield_ms is 0): a terminal
 * program acts on a lone ESC only after waiting for the rest of a possible
 * escape sequence (vim's 'timeoutlen' is 1000 ms by default), and the
 * answer is to show what it did. */
#define UVT_TOOLS_WRITE_ESC_MS 1500

/* M-TOOLS-10: the bytes one task's spill file may hold by default. */
#define UVT_TOOLS_SPILL_MAX_BYTES_DEFAULT (64ull * 1024 * 1024)
/* M-MCP-16: the bytes all spill files may hold together by default. */
#define UVT_TOOLS_SPILL_MAX_TOTAL_DEFAULT (1024ull * 1024 * 1024)

/* M-TOOLS-9: the most tasks one task_wait call waits for. */
#define UVT_TOOLS_WAIT_IDS_MAX 32

/* The surface name attached when uvt_tools_options_t.surface_name is NULL. */
#define UVT_TOOLS_SURFACE_NAME "tools"

typedef struct uvt_tools_s uvt_tools_t;
typedef struct uvt_tools_call_s uvt_tools_call_t;

/* A completion notice: `owner` is the exact agent owning the task, `text`
 * one line of valid UTF-8 (a C string: no newline, no NUL inside), valid
 * for the callback only. */
typedef void (*uvt_tools_notice_cb)(uvt_tools_t *tools, uvt_agent_t *owner,
                                    const char *text);

/* A tool call ended: `status` is 0 with the result in req->text (see
 * uvt_tools_call_t), or, with req->text NULL, UVT_EABORTED
 * (uvt_tools_call_abort() stopped its wait), UVT_ECLOSING
 * (uvt_tools_detach() stopped it) or UV_ENOMEM (the result text could not
 * be allocated; the tool's effect, such as a started task, may have
 * happened). */
typedef void (*uvt_tools_call_cb)(uvt_tools_call_t *req, int status);

/* uvt_tools_detach() finished. */
typedef void (*uvt_tools_detach_cb)(uvt_tools_t *tools);

/* Options of uvt_tools_attach().  Initialise with uvt_tools_options_init();
 * only its first `size` bytes are read (A-2: see "Option structs and the
 * ABI" in uvtasks.h). */
typedef struct {
  /* sizeof the struct in the host's headers; set by
   * uvt_tools_options_init().  0 is refused. */
  size_t size;
  /* Completion notices go here; NULL = none are delivered. */
  uvt_tools_notice_cb notice_cb;
  /* Name of the surface attached to the registry; NULL = "tools".  Copied. */
  const char *surface_name;
  /* run_in_background: the directory commands run in when the call gives no
   * cwd; NULL = the host's.  Copied. */
  const char *cwd;
  /* run_in_background, run_command: extra "NAME=value" entries of every
   * command's environment, NULL-terminated (uvt_process_options_t's env:
   * they pass the credential scrub, P-SPAWN-3b, M-MCP-14); NULL = none.
   * Not copied: the array and its strings must outlive the attachment. */
  const char *const *env;
  /* run_in_background: unread bytes kept per stream (P-OUT-2); 0 = the
   * process producer's default. */
  size_t output_cap_bytes;
  /* run_in_background: TERM -> KILL grace of a kill (P-KILL-1), in
   * milliseconds; 0 = the process producer's default. */
  uint64_t grace_ms;
  /* M-TOOLS-8: the most output bytes one result shows when the call gives
   * no max_bytes; 0 = UVT_TOOLS_MAX_BYTES_DEFAULT.  Values below
   * UVT_TOOLS_MAX_BYTES_MIN are raised to it. */
  size_t max_bytes;
  /* M-TOOLS-6: run_command's yield, in milliseconds, when the call gives
   * no yield_ms: a command still running then goes on in the background
   * and the call answers (see uvt_tools_call()).  0 = no yield, run to the
   * end; uvt_tools_options_init() sets 0.  The library's default is "no
   * yield" because a promoted command outlives its call: the host must
   * deliver completion notices (notice_cb) and let the model reach
   * task_output and task_kill, or the command's end is lost; a host with
   * a request timeout (uvtasks-mcp: below the 60 s of the official SDK's
   * clients) sets one below it. */
  uint64_t yield_ms;
  /* S-4: the sandbox every command of run_in_background and run_command
   * runs in (uvtasks/process.h, uvt_sandbox_t); NULL = none.  Not copied:
   * it (and its lists) must stay valid while the tools are attached.  A
   * start that cannot make it answers with a tool error saying so.
   * S-5: its workspace, when it names none, is fixed at attach: `cwd`
   * above (else the host's cwd) resolved with symlinks followed, so a
   * call's `cwd` argument chooses where a command starts, never what it
   * may write; a call whose cwd lies outside the workspace and the
   * writable paths is a tool error naming them, and nothing runs. */
  const uvt_sandbox_t *sandbox;
  /* M-TOOLS-15: the most output lines one result shows (see
   * UVT_TOOLS_MAX_LINES_DEFAULT); 0 = that default.  Values below
   * UVT_TOOLS_MAX_LINES_MIN are raised to it. */
  size_t max_lines;
  /* M-TOOLS-10, M-TOOLS-17: NULL = off.  A directory that gets each
   * task's raw output, once, in the order written (uvt_process_options_t's
   * on_tee): DIR/<id>.log for stdout (or the one stream of a terminal or
   * of merge_stderr) and DIR/<id>.stderr.log for stderr, no marker of
   * ours, so line N of a file is line N of the stream.  A result that
   * leaves output out (its size, a view, the cap) ends with a line naming
   * the file and the byte and line ranges left out: "(the whole output
   * is in DIR/bash-3.log; this result left out its lines 401-9600, bytes
   * 2291-57790)".  S-7: the directory is opened once (O_DIRECTORY |
   * O_NOFOLLOW) and every file relative to it with O_NOFOLLOW and O_EXCL
   * (one planted at the name is removed first, and a file replaced under
   * us is not written again), so no rename, link or symlink a task makes
   * redirects a write.  The directory must be owned by the effective user
   * with no group or other permission bits (made 0700 if missing), else
   * uvt_tools_attach() fails with UV_EPERM; with a sandbox, one inside a
   * place the sandbox lets tasks write is refused with UV_EACCES.  The
   * tools' tasks call back into `tools` with their bytes: detach only once
   * they have ended (or the registry is being closed).  Copied. */
  const char *spill_dir;
  /* M-TOOLS-10: the most bytes one file holds; 0 = 64 MiB
   * (UVT_TOOLS_SPILL_MAX_BYTES_DEFAULT).  What would go beyond is not
   * kept, and the note says so. */
  uint64_t spill_max_bytes;
  /* L-LIM-3: the limits of every command of run_in_background and
   * run_command (uvtasks/process.h, uvt_process_limits_t): defaults when
   * the call names none, and ceilings: a call's memory_mb, max_processes
   * or cpu_percent may only lower them (above one is a tool error that
   * names it).  All 0 = none (a call may still set its own). */
  uvt_process_limits_t limits;
  /* ---- v4 (M-MCP-16) ---- */
  /* The most bytes all the files together hold; 0 = 1 GiB
   * (UVT_TOOLS_SPILL_MAX_TOTAL_DEFAULT).  Past it the files of the oldest
   * task go first (never those of the task being written), and a notice
   * (notice_cb, to that task's owner) names them. */
  uint64_t spill_max_total;
  /* 1: leave the files in place at detach and when a task is forgotten;
   * 0 (the default): a task's files are removed with its record, and the
   * rest at detach. */
  int keep_spill;
  /* D-7: 1 = run_in_background starts durable tasks (uvt_process_options_t's
   * `durable`: they outlive the host, which needs the registry's state
   * directory opened by uvt_process_adopt_all() first), except those on
   * a terminal (tty: a terminal dies with its host); run_command's
   * commands stay tied to their call.  0 (the default): none. */
  int durable;
} uvt_tools_options_t;

/* The tool surface.  Caller-allocated; must not move while attached. */
struct uvt_tools_s {
  void *data;
  /* read-only */
  uvt_registry_t *registry;
  /* private */
  uvt_surface_t surface_;
  uvt_listener_t listener_;
  uv_idle_t idle_;   /* delivers finished calls on the next turn */
  uv_timer_t quiet_; /* M-TOOLS-5: looks at the output of write_stdin
                        calls while they wait */
  uvt_tools_notice_cb notice_cb_;
  uvt_tools_detach_cb detach_cb_;
  char *cwd_;
  const char *const *env_;
  size_t output_cap_bytes_;
  uint64_t grace_ms_;
  size_t max_bytes_;
  uint64_t yield_ms_;
  const uvt_sandbox_t *sandbox_;
  size_t max_lines_;
  char *spill_dir_;          /* M-TOOLS-10 */
  uint64_t spill_max_bytes_;
  struct uvt__link spills_;  /* what is known of each task's output */
  struct uvt__link screens_; /* M-TOOLS-11: terminal tasks' screens */
  struct uvt__link ready_;   /* finished calls, in finishing order */
  struct uvt__link waiting_; /* calls inside a uvt_wait() */
  struct uvt__link carries_; /* per-task filter states kept between reads */
  uvt_watch_t watch_;        /* drops the state of a dropped record */
  size_t pending_;           /* calls whose callback has not run */
  size_t writers_;           /* write_stdin calls inside their wait */
  unsigned closing_;         /* handles whose close callback is due */
  int state_;
  uvt_process_limits_t limits_; /* L-LIM-3: defaults and ceilings */
  /* v4 (M-TOOLS-17, M-MCP-16) */
  int spill_fd_; /* the spill directory, opened once (S-7), or -1 */
  uint64_t spill_max_total_;
  uint64_t spill_total_; /* bytes in the files now */
  uint64_t spill_seq_;   /* tasks seen, for "the oldest first" */
  int keep_spill_;
  /* S-5: the options' sandbox with the workspace fixed at attach (the
   * options' cwd, or the host's, resolved) when it names none. */
  uvt_sandbox_t sandbox_own_;
  char *workspace_;
  int durable_; /* D-7 */
};

/* Arguments of a tool call.  Initialise with uvt_tools_args_init(); fields a
 * tool does not use are ignored.  Strings are read during uvt_tools_call()
 * only, and only the struct's first `size` bytes (A-2: see "Option structs
 * and the ABI" in uvtasks.h). */
typedef struct {
  size_t size; /* sizeof the struct in the host's headers; set by
                  uvt_tools_args_init().  0 is refused */
  const char *command; /* run_in_background, run_command: required */
  const char *cwd;     /* run_in_background, run_command: NULL = the tools'
                          default; relative: to it (v4, S-5), not to the
                          host process's own directory */
  const char *label;   /* run_in_background: NULL = the command */
  int stdin_pipe;      /* run_in_background (M-TOOLS-5, the `stdin`
                          argument; `stdin` itself is a macro of
                          <stdio.h>): 1 = keep the command's stdin open as
                          a pipe for write_stdin (P-IN-1); -1 = not given,
                          0 = no: stdin is /dev/null */
  int tty;             /* run_in_background (M-TOOLS-5): 1 = run on a
                          terminal (P-PTY-1), which is also its stdin, so
                          write_stdin works; -1 = not given, 0 = no */
  const char *task_id; /* task_output, task_kill, write_stdin: required */
  const char *reason;  /* task_kill: NULL = "killed" */
  int wait;            /* task_output: -1 = not given, 0 = no, 1 = yes */
  int64_t timeout_ms;  /* task_output: -1 = not given; implies wait.
                          run_command: -1 = UVT_TOOLS_RUN_DEFAULT_MS */
  int64_t max_bytes;   /* task_output, run_command (M-TOOLS-8): the most
                          output bytes the result shows; -1 = not given
                          (the options' max_bytes); 0 and other negative
                          values are a tool error; below
                          UVT_TOOLS_MAX_BYTES_MIN raised to it */
  int64_t yield_ms;    /* run_command (M-TOOLS-6), in milliseconds: -1 = not
                          given (the options' yield_ms), 0 = run to the end,
                          > 0 = answer once this much time passed with the
                          command still running; other negative values are
                          a tool error.
                          write_stdin (M-TOOLS-5): how long to wait for
                          output; -1 = UVT_TOOLS_WRITE_YIELD_DEFAULT_MS,
                          0 = answer at once, longer than
                          UVT_TOOLS_WRITE_YIELD_MAX_MS cut to it; other
                          negative values are a tool error */
  const char *chars;   /* write_stdin: the bytes to write; NULL = none (a
                          poll).  Any bytes: they are not checked */
  size_t chars_len;    /* write_stdin: bytes of chars; (size_t)-1 (what
                          uvt_tools_args_init() sets) = strlen(chars), so
                          chars may hold NUL bytes only with a length */
  int close_stdin;     /* write_stdin: 1 = end the task's input after chars
                          (uvt_process_close_stdin()); -1 = not given,
                          0 = no */
  const char *signal;  /* task_kill (M-TOOLS-14): NULL = stop the task;
                          else one signal of uvt_process_signal()'s list
                          by name ("SIGINT", or "INT"), sent to every
                          process of its session without stopping it */
  /* ---- v3 (M-TOOLS-9, M-TOOLS-12, M-TOOLS-13) ---- */
  const char *const *task_ids; /* task_wait: task_ids_len ids, 1 to
                                  UVT_TOOLS_WAIT_IDS_MAX, no id twice */
  size_t task_ids_len;
  const char *mode;    /* task_wait: "any" (NULL: the default) answers when
                          one task ended, "all" when every one did */
  int merge_stderr;    /* run_command, run_in_background (M-TOOLS-12): 1 =
                          stderr into stdout's stream, in the order written
                          (uvt_process_options_t.merge_stderr); -1 = not
                          given, 0 = no */
  const char *stdin_text; /* run_command (M-TOOLS-13, the `stdin` string
                          argument): these bytes, then end of file; NULL =
                          none (stdin is /dev/null) */
  size_t stdin_text_len; /* bytes of stdin_text; (size_t)-1 (what
                          uvt_tools_args_init() sets) = strlen(stdin_text) */
  /* ---- v4 (L-LIM-3) ---- */
  int64_t memory_mb;     /* run_command, run_in_background: the command's
                            memory limit in MiB (at least 1; at most the
                            options' limit); -1 = not given (the options') */
  int64_t max_processes; /* the same for processes alive at once; -1 */
  int64_t cpu_percent;   /* the same for CPU, percent of one core; -1 */
  /* ---- v4 (M-TOOLS-16): views in lines, task_output and run_command ---- */
  int64_t head_lines; /* the first this many lines of what is new; -1 =
                         not given (what uvt_tools_args_init() sets); 0
                         and other negative values are a tool error */
  int64_t tail_lines; /* the last this many lines; -1 = not given */
  const char *match;  /* a POSIX extended regular expression: only the
                         lines it matches, each after its line number;
                         NULL = all lines */
} uvt_tools_args_t;

/* A tool call.  Caller-allocated; must not move until its callback ran. */
struct uvt_tools_call_s {
  void *data;
  /* read-only, valid from the callback until uvt_tools_call_cleanup() */
  uvt_tools_t *tools;
  char *text;   /* the result: `len` bytes of valid UTF-8, then a NUL; it
                   may hold NUL bytes of command output (M-MCP-8), so use
                   `len`, not strlen() */
  size_t len;   /* bytes of text, without the terminating NUL */
  int is_error; /* 1 when the tool failed (unknown task, bad arguments...) */
  /* private */
  uvt_tools_call_cb cb_;
  struct uvt__link link_; /* on the tools' waiting or ready list */
  uvt_agent_t *caller_;
  uvt_wait_t wait_;
  char task_id_[UVT_ID_MAX];
  uint64_t timeout_ms_;
  uint64_t started_ns_; /* run_command: uv_hrtime() at the start */
  uint64_t runtime_ms_; /* run_command: the command's runtime limit */
  size_t max_bytes_;
  int yields_;        /* run_command: the wait is the yield, not the end */
  uint64_t seen_[4];  /* write_stdin: the unread output at the last look
                         (stdout bytes and drops, stderr bytes and drops) */
  uint64_t first_[4]; /* write_stdin: the same right after the write
                         (zero for a poll) */
  int state_;
  int status_;
  int aborted_;
  int tool_;
  void *multi_; /* task_wait: its waits, one per task */
  /* v4 (M-TOOLS-16): the call's view */
  int64_t head_lines_;
  int64_t tail_lines_;
  void *match_; /* its compiled expression, or NULL */
};

/* Fill the first `size` bytes of `o` with the defaults and set o->size =
 * size: what the macro uvt_tools_options_init(o) calls with the
 * host's sizeof *o.  The defaults: no notice callback, surface "tools",
 * the host's cwd, the process producer's cap and grace, results of at
 * most UVT_TOOLS_MAX_BYTES_DEFAULT output bytes, no yield.  Writes
 * nothing past `size` bytes; bytes past the library's own struct are
 * zeroed.  Accepts NULL.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_tools_options_init_size(uvt_tools_options_t *o,
                                            size_t size);

/* uvt_tools_options_init_size(o, sizeof(uvt_tools_options_t)) with this
 * library's sizeof: for a host built against the same headers as the
 * library (a binding, a dlsym() user).  A C host gets the macro of this name.
 * Accepts NULL.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_tools_options_init(uvt_tools_options_t *o);
#define uvt_tools_options_init(o) uvt_tools_options_init_size((o), sizeof *(o))

/* Fill the first `size` bytes of `a` with "nothing given" and set a->size
 * = size: what the macro uvt_tools_args_init(a) calls with the
 * host's sizeof *a.  "Nothing given": NULL strings, wait -1, timeout_ms
 * -1, max_bytes -1, yield_ms -1, stdin_pipe -1, tty -1, chars_len
 * (size_t)-1, close_stdin -1, and -1 for every later number.  Writes
 * nothing past `size` bytes; bytes past the library's own struct are
 * zeroed.  Accepts NULL.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_tools_args_init_size(uvt_tools_args_t *a, size_t size);

/* uvt_tools_args_init_size(a, sizeof(uvt_tools_args_t)) with this
 * library's sizeof: for a host built against the same headers as the
 * library (a binding, a dlsym() user).  A C host gets the macro of this name.
 * Accepts NULL.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_tools_args_init(uvt_tools_args_t *a);
#define uvt_tools_args_init(a) uvt_tools_args_init_size((a), sizeof *(a))

/* Attach the tool surface to `reg`: a control surface (so tasks may start),
 * a completion listener (M-TOOLS-2) and an idle handle on the registry's
 * loop that delivers call results.  `o` may be NULL (defaults); it is
 * copied (its first o->size bytes, A-2).
 *
 * Returns 0, UV_EINVAL (NULL reg or tools; `o` not made by
 * uvt_tools_options_init(), size 0, or of a size this library refuses,
 * A-2, logged), UV_ENOMEM, UVT_ECLOSING (the
 * registry is being disposed), or an error of uvt_surface_attach(),
 * uvt_listener_start() or uv_idle_init().  On error nothing is attached.
 * Ownership: `tools` is the caller's; keep it in place until the
 * uvt_tools_detach() callback ran.
 * Thread: the loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_tools_attach(uvt_registry_t *reg, uvt_tools_t *tools,
                                const uvt_tools_options_t *o);

/* Detach the tool surface: no notice is delivered from now on, new calls
 * are refused, the waits of pending calls are stopped (their callbacks get
 * UVT_ECLOSING), calls that already finished still deliver their results,
 * the surface is detached and the listener stopped (tasks are not touched,
 * R-DONE-5), the idle handle is closed, then `cb(tools)` runs once.
 * Detach before closing the registry.
 *
 * Returns 0, UV_EINVAL (never attached), or UVT_ECLOSING (detach already
 * requested; `cb` will not run for this call).  `cb` may be NULL.
 * Callback: once, on the loop thread, never inside this call, after every
 * pending call's callback.
 * Ownership: `tools` may be freed from `cb` on.
 * Thread: the loop thread; allowed inside any of our callbacks.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_tools_detach(uvt_tools_t *tools, uvt_tools_detach_cb cb);

/* Repair `len` bytes of text to valid UTF-8, as the tools' results are
 * (M-TOOLS-7) and as a JSON host must send them (M-MCP-8): each maximal
 * invalid subpart becomes U+FFFD (3 bytes); NUL bytes are valid (U+0000)
 * and kept.  Writes the result to `out` unless `out` is NULL, and returns
 * its length in bytes (at most 3 * len): a first call with NULL `out`
 * sizes the buffer for the second.
 * Ownership: `out` is the caller's, at least that long, not overlapping
 * `bytes`; nothing is NUL-terminated or allocated.
 * Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN size_t uvt_tools_utf8_repair(const char *bytes, size_t len,
                                        char *out);

/* Nonzero if `name` is one of the tools. Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_tools_has(const char *name);

/* The tool schemas as JSON (M-TOOLS-3): an array of objects with "name",
 * "description" and "inputSchema" (a JSON Schema object), the shape MCP's
 * tools/list uses; other model APIs take the same three fields under their
 * own names.  Returns a static NUL-terminated string.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN const char *uvt_tools_schema_json(void);

/* Call the tool `name` with `args` on behalf of `caller` (the agent whose
 * session the model speaks for; it owns the tasks it starts and sees only
 * its session's tasks and unowned ones).
 *
 *  - run_in_background starts `command` with the process producer
 *    (uvtasks/process.h) owned by `caller`.  With `stdin_pipe` its stdin
 *    stays open as a pipe for write_stdin (process.h's stdin_pipe); with
 *    `tty` it runs on a terminal of 80 x 24 (process.h's pty, TERM
 *    xterm-256color), which is its stdin (write_stdin types into it) and
 *    its stdout and stderr in one stream, with the terminal's "\r\n" line
 *    ends and the echo of what was typed; the results show that stream
 *    as text for a model (M-TOOLS-7), so it reads as a terminal
 *    transcript: "\r\n" is a line end, colours and cursor moves are gone,
 *    a line redrawn by a line editor shows its last state.  With both,
 *    `tty` wins (the terminal is the stdin).  The answer names the id
 *    and, for those two, how to write to it.
 *  - run_command starts `command` the same way, with `timeout_ms` as its
 *    runtime limit (default UVT_TOOLS_RUN_DEFAULT_MS, at most
 *    UVT_TOOLS_RUN_MAX_MS), waits for its end and returns its output and
 *    status line.  A command that ran and exited, whatever its exit code,
 *    is a success (is_error 0: the exit code is in the status line); a
 *    command that could not start, was killed (the runtime limit, a kill)
 *    or failed is is_error 1.  Until it ends or yields, aborting the call
 *    stops the command: it runs in the foreground.
 *    Promotion (M-TOOLS-6): with a yield (`yield_ms`, or the options'
 *    yield_ms when the call gives none; 0 = none) shorter than the wait for
 *    its end, a command still running when the yield passes is not
 *    stopped: the call answers with the output so far, a line
 *    "(still running after N ms; it goes on in the background as bash-4:
 *    ...; its limit of L ms still applies)" (N measured, not the yield
 *    asked for; L its runtime limit, timeout_ms) and `[status: running]`,
 *    is_error 0.  From then on the command is a background task like one
 *    of run_in_background: task_output, task_kill (and uvt_* calls) control
 *    it, aborting the answered call does nothing to it, its runtime limit
 *    still applies, and its end gives the usual notice if nobody saw it
 *    (M-TOOLS-2).  A command that ends as the yield passes answers as
 *    ended.  A host that needs the answer at the end whatever the options
 *    say (uvtasks-mcp's MCP Tasks, whose result is the command's end)
 *    passes yield_ms 0.
 *    With `merge_stderr` (either tool, M-TOOLS-12) stderr shares stdout's
 *    pipe (process.h's merge_stderr): one stream in the order written, no
 *    "[stderr]" part.  run_command's `stdin_text` (M-TOOLS-13) is what the
 *    command reads, then end of file (process.h's stdin_data).
 *  - task_output reads what is new (uvt_read()); with `wait` (or a
 *    timeout_ms) it first waits until the task ends or the wait's deadline
 *    passes (default UVT_TOOLS_WAIT_DEFAULT_MS, at most
 *    UVT_TOOLS_WAIT_MAX_MS, and at most the options' yield_ms when it is
 *    set: v4, M-TOOLS-6).  A wait that times out is a success showing
 *    the task's live status line (M-TOOLS-1) after "(waited T ms; the
 *    task has not ended: wait again to wait longer)".
 *  - task_list lists what uvt_list() shows the caller.
 *  - write_stdin (M-TOOLS-5) writes `chars` to the task's stdin pipe or
 *    terminal with uvt_process_write() (the bytes as given: no newline is
 *    added; on a terminal Enter is "\r", which programs reading lines take
 *    as "\n" too, and "\x03" is Ctrl-C), then with `close_stdin` ends its
 *    input (uvt_process_close_stdin(): end of file; on a terminal Ctrl-D,
 *    which a program reading lines takes as end of file at the start of a
 *    line), then waits up to `yield_ms` and answers with what the task
 *    printed since the last read and its status line, shaped as
 *    task_output's are.  Empty or NULL chars writes nothing: a poll.  A
 *    task may be polled whatever its input: closed, ended, or never
 *    opened (a command started without stdin or tty, a run_command
 *    promoted at its yield, a task of another producer); only chars or
 *    close_stdin for a task without input are refused.
 *    The wait ends early when the task ends (as the contract says) and, beyond
 *    the contract, when the program printed a prompt and waits for input: its
 *    unread output grew since the write (for a poll: there is unread
 *    output, even from before the call), did not change for
 *    UVT_TOOLS_WRITE_QUIET_MS, and a stream's unread bytes end inside a
 *    line that shows something once escape sequences, carriage returns
 *    and blanks are taken out (as M-TOOLS-7 shows it).  The tools look at
 *    the output for this (one pass over the task's buffers, nothing
 *    consumed) every UVT_TOOLS_WRITE_QUIET_MS, with one timer for all the
 *    write_stdin calls that wait, and only while one does.
 *    Why this rule.  The wait is for an answer, and an interactive program
 *    that has answered and wants more input stops inside a line (">>> ",
 *    "(Pdb) ", "Password: ", "? Project name: "), while one that is working
 *    stops after a line or keeps printing; so a pause after a line is no
 *    answer ("working on it", then a slow computation).  On a terminal the
 *    echo of the written line ends with a newline, so a REPL computing a
 *    slow result is not taken for one that answered; a line editor's
 *    invisible bytes after that newline (bash's "\x1b[?2004l\r", leaving
 *    bracketed-paste mode) show nothing and are no prompt either.  The
 *    cost of a wrong guess is small: a pause after a partial line that is
 *    no prompt ("Compiling... ") makes the answer come before the yield,
 *    with [status: running], and the next write_stdin (empty chars) reads
 *    on; a prompt that ends with a newline is waited for until the yield.
 *    Other signals were left out: "output went quiet" alone answers at the
 *    echo or the first pause; the read system call the program blocks in
 *    (/proc/PID/syscall, wchan) needs ptrace rights on many hosts and says
 *    nothing of a program whose reader is another process or thread.
 *    Its errors (is_error 1, with the task's status line where there is a
 *    task; nothing of `chars` written, nothing consumed): no such task, a
 *    foreign one, a task started without stdin or tty or not a process
 *    task (UV_EINVAL from uvt_process_write()), more input than the task
 *    has room for (UV_ENOBUFS: what it has not read yet and `chars` would
 *    exceed its stdin_cap_bytes, 1 MiB for the tasks the tools start), and
 *    input that is closed (UV_EPIPE: the task ended or is ending, its
 *    program closed its stdin, or an earlier close_stdin ended it); a bad
 *    yield_ms or max_bytes is found before anything is written.
 *  - task_wait (M-TOOLS-9) waits for the tasks `task_ids` (task_ids_len
 *    of them, 1 to UVT_TOOLS_WAIT_IDS_MAX, none twice) with one uvt_wait()
 *    each: mode "any" (or NULL) answers when one ended, "all" when every
 *    one did, either once `timeout_ms` passes (default
 *    UVT_TOOLS_WAIT_DEFAULT_MS, at most UVT_TOOLS_WAIT_MAX_MS and the
 *    options' yield_ms when set; a success).  The text: "N of M tasks
 *    ended." (with "(waited T ms for any|all: wait again to wait longer)"
 *    when the wait ran out), then per task, in the order given, a line
 *    "--- ID ---", for a task that has ended its new output (uvt_read(),
 *    shaped as task_output's, max_bytes shared equally between the tasks
 *    that ended) and its status line, for one still running only its
 *    status line (uvt_get(): its output stays unread).  An unknown or
 *    foreign id, an id given twice, a bad mode, timeout_ms or max_bytes is
 *    a tool error before anything waits.  uvt_tools_call_abort() and
 *    uvt_tools_detach() stop every wait, as for task_output.
 *  - task_screen (M-TOOLS-11) shows the screen of a task run_in_background
 *    started with `tty`: the tools feed every read of such a task to a
 *    terminal emulator of its size (libvterm), so this reads what is new
 *    (uvt_read(): it is consumed, it is on the screen) and answers
 *    "[screen 80x24, alternate|main screen, cursor at row R, column C;
 *    rows and columns count from 1]", the rows up to the last one that
 *    shows something (trailing blanks cut), then the status line.  While
 *    the program is on the alternate screen, task_output and write_stdin
 *    show this screen instead of the transcript (and task_screen is the
 *    same).  A task without a terminal (another tool's, or one started
 *    without tty) is a tool error and nothing of it is read.  The screen
 *    lives until the task's record is dropped or the tools detach; bytes
 *    the output cap dropped between reads never reach it.
 *  - task_kill kills (uvt_kill()) and shows the status line taken with
 *    uvt_get(), so no output is consumed.  Killing a process task that had
 *    ended also stops what it left running in its session (P-KILL-6); the
 *    text then says "bash-3 had already ended; stopping the 2 processes it
 *    left running." (counted with uvt_process_leftovers() before the kill)
 *    and the status line stays the task's own outcome.
 * The output task_output, write_stdin and run_command show is text for a
 * model (M-TOOLS-7) and at most `max_bytes` bytes (M-TOOLS-8; default the
 * options' max_bytes), as the top of this header says.
 * Whatever goes wrong with the task or the arguments (no such task, a
 * foreign one, a missing argument, a bad timeout_ms, max_bytes or
 * yield_ms, a command that cannot start, input a task cannot take) is a
 * result with is_error 1 and a text saying so, not an error return; bad
 * arguments are found before anything is started or read.
 *
 * Returns 0, UV_EINVAL (NULL tools, req, name or cb; NULL args is "nothing
 * given"; `args` not made by uvt_tools_args_init(), size 0, or of a size
 * this library refuses, A-2, logged), UV_ENOENT (`name` is not a tool), UVT_ECLOSING (the tools are
 * detaching).  On error `cb` never runs.
 * Callback: once, on the loop thread, never inside this call: status 0 and
 * the result in req->text / req->is_error, or UVT_EABORTED, UVT_ECLOSING or
 * UV_ENOMEM with req->text NULL (see uvt_tools_call_cb).
 * Ownership: the result text belongs to `req` until
 * uvt_tools_call_cleanup(); `req` may be reused (after cleanup) or freed
 * from the callback on.
 * Thread: the loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_tools_call(uvt_tools_t *tools, uvt_tools_call_t *req,
                              uvt_agent_t *caller, const char *name,
                              const uvt_tools_args_t *args,
                              uvt_tools_call_cb cb);

/* Abort a pending call.  A call inside its wait stops waiting and its
 * callback gets UVT_EABORTED; no output is consumed (what a write_stdin
 * call wrote stays written).  run_command's task is killed (reason "call
 * cancelled"), so its end is reported; a
 * run_command that already yielded (M-TOOLS-6) is a call whose work is
 * done, and its command goes on.  If the task settled in the same moment
 * and the wait had already been counted (so the task is marked reported on
 * the call's behalf, R-WAIT-5), the callback still gets UVT_EABORTED and
 * the tools deliver that task's completion notice to the caller instead,
 * so the end is not lost.  A call whose work is done keeps its result.
 *
 * Returns 0, or UV_EINVAL if `req` is not pending (its callback ran).
 * Thread: the loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_tools_call_abort(uvt_tools_call_t *req);

/* The id of the task `req` started: for a run_command call, from the
 * return of uvt_tools_call() on (also while it waits, and after a yield)
 * until uvt_tools_call_cleanup(), so a host can name the task before the
 * result comes (uvtasks-mcp's MCP Tasks do).
 * Returns the id, or NULL for NULL, other tools and a run_command whose
 * command did not start.
 * Ownership: the string is `req`'s; copy it to keep it.
 * Thread: the loop thread.
 * Since: 0.1.0 */
UVT_EXTERN const char *uvt_tools_call_task(const uvt_tools_call_t *req);

/* M-MCP-5: how a pending call is doing, for progress reports: the last
 * line of output of the task it is about (run_command's command, or the
 * task a task_output or write_stdin waits for) written to `line` as one
 * line of valid UTF-8, shown as text the way results show it (M-TOOLS-7:
 * no escape sequences; carriage returns, backspaces and erase-in-line
 * applied; other control characters become spaces), a NUL byte ends it;
 * cut at a character boundary and marked "..." beyond `size` - 1 bytes;
 * "" when there is none yet.
 * Nothing is consumed: the call's result and later reads still show it.
 * (The contract names no function for this; uvtasks-mcp needs it for
 * notifications/progress.)
 * Returns 0, or UV_EINVAL (NULL req or line, zero size, a call that is not
 * waiting on a process task; `line` then holds "" if size > 0).
 * Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_tools_call_progress(const uvt_tools_call_t *req, char *line,
                                       size_t size);

/* Free the result text of `req` and zero the result fields; accepts NULL
 * and requests without a result.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_tools_call_cleanup(uvt_tools_call_t *req);

#ifdef __cplusplus
}
#endif

#endif /* UVTASKS_TOOLS_H */
