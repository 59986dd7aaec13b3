/* Internal declarations of the process producer (docs/contract.md §3). */
#ifndef UVTASKS_PROCESS_INTERNAL_H
#define UVTASKS_PROCESS_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "leaf/alloc.h"
#include "leaf/list.h"
#include "uvtasks.h"
#include "uvtasks/process.h"
#include "uvtasks/producer.h"

/* libuv's error for an errno value (unix). */
#define UVT__PERR(e) (-(e))

/* ---- output.c: capped per-stream buffers and the read format ---------- */

/* Unread bytes of one stream: a ring that grows by doubling up to `cap`
 * bytes; beyond it the oldest bytes are dropped and counted (P-OUT-2). */
typedef struct {
  char *ring;
  size_t alloc; /* bytes allocated for `ring` (<= cap) */
  size_t head;  /* offset of the oldest unread byte */
  size_t len;   /* unread bytes */
  size_t cap;
  uint64_t dropped; /* bytes dropped since the last read */
  int cut;          /* a drop moved `head`; it may sit inside a character */
  size_t hint;      /* size for the next ring after uvt__output_take */
  /* M-TOOLS-15: the stream's first bytes, kept apart from the ring until
   * the first read (keep_head_bytes), so a read after a drop still shows
   * the true beginning. */
  char *first;
  size_t first_len;
  size_t first_cap; /* 0: not kept */
  int was_read;     /* a read consumed bytes of this stream */
  /* M-TOOLS-10: bytes about to be dropped go here first (NULL = none). */
  void (*spill)(void *ctx, const char *bytes, size_t len);
  void *spill_ctx;
} uvt__outbuf_t;

/* Where collected output goes: 0 or a negative error. */
typedef int (*uvt__sink_fn)(void *ctx, const void *bytes, size_t len);

void uvt__outbuf_init(uvt__outbuf_t *b, size_t cap);
/* M-TOOLS-15: keep the first `n` bytes of the stream apart from the ring
 * until the first read (0 = none); call after uvt__outbuf_init. */
void uvt__outbuf_keep_first(uvt__outbuf_t *b, size_t n);
/* Append `n` bytes, dropping the oldest unread ones beyond the cap.  Never
 * fails: when memory runs out the bytes that do not fit are dropped. */
void uvt__outbuf_push(uvt__outbuf_t *b, const char *data, size_t n);
void uvt__outbuf_free(uvt__outbuf_t *b);
/* Where the next bytes of the stream go, so a read system call writes them
 * in place: sets *at and returns a contiguous span of up to `want` bytes
 * (growing the ring towards the cap first when it is short of room), or 0
 * when there is no memory for a ring, or when the ring is full and its
 * dropped bytes are handed on (spill): then read elsewhere and push, so
 * that only bytes that arrive drop old ones.  With the ring full at the
 * cap and no spill the span is the oldest unread bytes, which the bytes
 * written there replace.  Nothing may touch `b` before the matching
 * commit. */
size_t uvt__outbuf_space(uvt__outbuf_t *b, size_t want, char **at);
/* `n` bytes (at most the span) were written at the span: append them,
 * counting the unread bytes they replaced as dropped. */
void uvt__outbuf_commit(uvt__outbuf_t *b, size_t n);

/* Where the parts of a collected read landed in the text (offsets and
 * lengths of each stream's bytes, without notices or markers), and how
 * many bytes each stream dropped: what uvt_process_read() needs to serve
 * a task's last read from the outcome's text (P-RES-1). */
typedef struct {
  size_t off[2];
  size_t len[2];
  uint64_t dropped[2];
  size_t total;
} uvt__layout_t;

/* Hand what is unread to `sink` in the read format of P-OUT-1..3 and
 * consume it; a stream not `*_final` keeps an incomplete trailing UTF-8
 * sequence for later.  Nothing is consumed if `sink` fails (its error is
 * returned).  `layout` (NULL = not wanted) says where each part went. */
int uvt__output_collect(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                        int err_final, uvt__sink_fn sink, void *ctx,
                        uvt__layout_t *layout);

/* The new bytes of both streams for a structured read (P-RES-1), each
 * in a block of its own (from uvt__malloc, NUL-terminated after its
 * length), with the dropped counts, consumed; the UTF-8 rule of P-OUT-3
 * as for uvt__output_collect.  0, or UV_ENOMEM with nothing consumed. */
typedef struct {
  char *bytes[2];
  size_t len[2];
  uint64_t dropped[2];
} uvt__split_t;
int uvt__output_split(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                      int err_final, uvt__split_t *res);

/* The read of uvt__output_collect without a copy, when it would be exactly
 * a prefix of the stdout ring starting at its block (no notice, no stderr)
 * and fills at least half of it: the ring becomes the text (*text, *len;
 * *size bytes allocated, more than *len) and the stream gets a new ring of
 * the same size (now if it holds bytes of an incomplete character, else at
 * the next uvt__outbuf_space).  Returns 1 then, or 0 with nothing changed (use
 * uvt__output_collect). */
int uvt__output_take(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                     int err_final, char **text, size_t *len, size_t *size);

/* ---- process.c: one task ---------------------------------------------- */

/* M-MCP-5: the last unread line of task `id`'s output (stdout, else
 * stderr; after its last carriage return), cut to `size` - 1 bytes and
 * NUL-terminated in `buf` ("" when there is none), without consuming
 * anything.  The bytes are as the command wrote them (not UTF-8-checked).
 * Returns 0, UV_EINVAL (NULL or zero-sized buf, another producer's task),
 * or UVT_ENOTASK (none, or dropped) / UVT_EFOREIGN.  Loop thread. */
int uvt__process_last_line(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller, char *buf, size_t size);

/* M-TOOLS-5: what task `id` holds unread, without consuming it, for the
 * tool surface's write_stdin to tell that output arrived and whether it
 * stopped inside a line (a prompt).  Per stream (0 stdout, or a pty task's
 * terminal; 1 stderr): the unread bytes, the bytes dropped since the last
 * read (P-OUT-2), and the unread bytes after the last newline (the line
 * being written; its last UVT__PEEK_TAIL bytes if longer; empty when the
 * unread bytes end with a newline).  Returns 0, UV_EINVAL (NULL out, another
 * producer's task), or UVT_ENOTASK (none, or dropped) / UVT_EFOREIGN.  Loop
 * thread. */
#define UVT__PEEK_TAIL 256
typedef struct {
  size_t unread[2];
  uint64_t dropped[2];
  size_t tail_len[2];
  char tail[2][UVT__PEEK_TAIL];
} uvt__peek_t;
int uvt__process_peek(uvt_registry_t *reg, const char *id,
                      const uvt_agent_t *caller, uvt__peek_t *out);

typedef struct uvt__proc_s uvt__proc_t;
typedef struct uvt__procs_s uvt__procs_t;
typedef struct uvt__dstate_s uvt__dstate_t;
typedef struct uvt__dentry_s uvt__dentry_t;
typedef struct uvt__adopted_s uvt__adopted_t;
typedef struct uvt__spawn_s uvt__spawn_t;
typedef struct uvt__helper_s uvt__helper_t;

/* ---- cgroup.c's types (the functions are below) --------------------- */

/* The hierarchies a group can have a directory in. */
enum { UVT__CG_V2, UVT__CG_MEMORY, UVT__CG_PIDS, UVT__CG_CPU, UVT__CG_N };
#define UVT__CG_BIT(h) (1u << (h))
/* cpu.max's and cpu.cfs_period_us's period. */
#define UVT__CG_PERIOD_US 100000u

/* Descriptors a group keeps open on its own files (uvt__cg_t.fd): its
 * cgroup.procs in each hierarchy (slots 0..UVT__CG_N-1, read and write),
 * v2's cgroup.events, and the events file of its memory and pids limits.
 * Opened when the group is made, kept while it is pooled, so a task that
 * takes a pooled group opens nothing (cgroup.c: at most a few hundred for
 * the whole process). */
enum {
  UVT__CG_FD_EVENTS = UVT__CG_N,
  UVT__CG_FD_MEM,
  UVT__CG_FD_PIDS,
  UVT__CG_FDS
};

typedef struct {
  int dir[UVT__CG_N]; /* the directory holding the group, per hierarchy
                         (the registry's, borrowed; or opened, see own) */
  unsigned own;       /* bits: dir[h] was opened by uvt__cg_open */
  unsigned mask;      /* bits: hierarchies the group is in */
  unsigned v2_ctl;    /* bits (MEMORY, PIDS, CPU): v2 has the controller */
  char name[24];      /* the group's directory name in each dir[h] */
  uvt_process_limits_t limits;
  uint64_t oom_base; /* the counters when the task got the group */
  uint64_t pids_base;
  int written; /* a pooled group whose files hold these limits */
  int based;   /* oom_base and pids_base came with it from the pool */
  int final;   /* the task settled with nothing left in the group: the
                  counters below are the group's last */
  uint64_t oom_last;
  uint64_t pids_last;
  unsigned exists; /* bits: hierarchies a pooled group is known in */
  unsigned spare;  /* bits: hierarchies a pooled group has a directory in
                      that this task does not use (kept for the pool) */
  int empty;       /* seen empty with nothing left to enter it: final */
  int keeper;      /* a durable task's: its keeper is in it too, and
                      pids.max is one above limits.max_processes (D-1) */
  int fd[UVT__CG_FDS]; /* its files, opened once, or -1 (owned: closed by
                          uvt__cg_close, handed on by uvt__cg_move and the
                          pool) */
} uvt__cg_t;

/* What a group's limits did (uvt__cg_events): counters since the group
 * was made (compare with oom_base and pids_base), its peak memory (bytes,
 * 0 if unknown) and CPU time (microseconds, UINT64_MAX if unknown).  Only
 * what the group limits is read (a file read each): oom_kills with a
 * memory limit, pids_max with a process limit, and where asked for
 * (`full`: reports, not a task's end) memory_peak with a memory limit and
 * cpu_usec with a CPU limit; the rest stays 0 (cpu_usec UINT64_MAX). */
typedef struct {
  uint64_t oom_kills; /* processes the OOM killer ended in it */
  uint64_t pids_max;  /* forks refused at pids.max */
  uint64_t memory_peak;
  uint64_t cpu_usec;
} uvt__cg_events_t;

/* A pooled group: its name and the hierarchies it exists in. */
typedef struct {
  char name[24];
  unsigned mask;
  uvt_process_limits_t limits; /* what its files hold */
  int based;                   /* its counters are known: */
  uint64_t oom, pids;
  int fd[UVT__CG_FDS]; /* its open files (uvt__cg_t.fd), owned */
} uvt__cgfree_t;

/* The registry's directories (in uvt__procs_t). */
typedef struct {
  int dir[UVT__CG_N];    /* uvtasks-<pid>-<n> per hierarchy, or -1 */
  char *path[UVT__CG_N]; /* their paths */
  int shared[UVT__CG_N]; /* dir, for stopall.c (under spawn_mutex) */
  int err[UVT__CG_N];    /* why a hierarchy could not be used */
  unsigned tried;        /* bits: hierarchies looked for */
  unsigned v2_ctl;       /* controllers enabled in dir[UVT__CG_V2] */
  unsigned base;         /* <n> + 1 once a directory was made, else 0 */
  unsigned seq;          /* names of new groups */
  int contain;           /* uvt_process_cgroups(): every task gets one */
  int v2_parent_given;   /* its parent directory came from the host */
  int warned;            /* a failed placement was logged */
  uvt__cgfree_t *pool;   /* empty groups for reuse */
  size_t pool_n, pool_cap;
} uvt__cgroot_t;

/* A live leader as uvt_process_stop_all_now() sees it. */
typedef struct {
  pid_t pid;
  char cg_name[24]; /* its cgroup in the registry's directories, or "" */
  unsigned cg_mask; /* the hierarchies it is in */
} uvt__leader_t;

/* S-11: a process of a task outside its session (members.c). */
typedef struct {
  pid_t pid;
  unsigned long long start; /* its start time (clock ticks after boot) */
  int seen;                 /* a pass saw it, or a member of its session */
} uvt__esc_t;
/* The most a task remembers. */
#define UVT__ESC_MAX 64

/* Groups of one session a pass remembers having signalled. */
#define UVT__PASS_GROUPS 32

typedef struct {
  uv_pipe_t pipe;     /* a pipe, read by libuv */
  uv_poll_t tty_poll; /* or a terminal's master side, read by us */
  int fd;             /* that terminal's descriptor; -1 for a pipe */
  int tty;
  uvt__outbuf_t buf;
  uvt__proc_t *proc;
  int open;    /* handle initialised and uv_close not yet called */
  int closed;  /* uv_close called: no more bytes will arrive */
  int paused;  /* P-OUT-4: not read while its unread bytes are at the cap */
  int drained; /* the drain read it: its cap no longer applies */
  /* P-OUT-6: still open when the drain time passed (what the task left
   * running holds it): it does not hold the task up, and is read on past
   * the settle until its end of file, a kill, or the record's release. */
  int linger;
  /* D-2: a durable task's stream is a file in the state directory, read
   * by us (fd) from `pos` (durable.c); no handle. */
  int file;
  uint64_t pos;
  uv_fs_event_t change; /* its file, watched for a host that wants to
                           hear of output as it comes (durable.c) */
  int watching;
  int ending;       /* its writer is gone: ends where a read finds the end */
  uint64_t punched; /* blocks below this went back (D-6) */
} uvt__stream_t;

/* Input bytes waiting for the pipe or terminal (stdin.c). */
typedef struct uvt__inchunk_s uvt__inchunk_t;
struct uvt__inchunk_s {
  uvt__inchunk_t *next;
  size_t len;
  size_t off; /* bytes already written */
  char bytes[];
};

/* What a task's input tells its owner (process.c), given at
 * uvt__stdin_open: its poll handle's close callback (the handle's data is
 * the task), and, for a durable task's FIFO, the host's end of input,
 * which the FIFO's other writer must hear of too (D-5). */
typedef struct {
  uv_close_cb closed;
  void (*fifo_end)(uvt__proc_t *p);
} uvt__stdin_cbs_t;

/* The task's input (stdin.c, P-IN-1): our end of its stdin socket, or a
 * copy of its terminal's master side, written from a poll handle. */
typedef struct {
  const uvt__stdin_cbs_t *cbs; /* the owner's */
  uv_poll_t poll;
  int fd;         /* -1 when there is none (any more) */
  int enabled;    /* the task takes writes: stdin_pipe or pty */
  int tty;        /* fd is a pty master: write(2), VEOF for end of file */
  int open;       /* the poll handle is initialised, uv_close not called */
  int polling;    /* waiting for the descriptor to take more */
  int host_ended; /* uvt_process_close_stdin() was called */
  int broken;     /* the child closed its end, or the task is ending */
  int fifo;       /* fd is a durable task's FIFO (D-5): write(2), with
                     SIGPIPE held off */
  size_t cap;     /* stdin_cap_bytes */
  size_t pending; /* accepted bytes not yet written */
  uvt__inchunk_t *head;
  uvt__inchunk_t *tail;
} uvt__stdin_t;

/* The handles of a task, as bits of uvt__proc_t.live. */
enum {
  UVT__H_POLL = 1 << 0,
  UVT__H_KILL = 1 << 1,
  UVT__H_DRAIN = 1 << 2,
  UVT__H_RUNTIME = 1 << 3,
  UVT__H_STDIN = 1 << 4
};

struct uvt__proc_s {
  uvt_task_t *task;
  uvt_registry_t *reg;
  uv_loop_t *loop;
  uvt__procs_t *procs;               /* the registry's context, which
                                        outlives every task it counted */
  int counted;                       /* in procs->procs_live */
  const uvt_process_options_t *opts; /* valid during run() only */

  char id[UVT_ID_MAX];

  pid_t pid; /* 0 until the spawner answered, and if nothing started */
  int pidfd;
  uvt__spawn_t *spawn; /* the request, from run() until the answer */
  int spawning;        /* the request is prepared or out */
  int not_started;     /* answered: no child (spawn_err, or cancelled) */
  int spawn_err;
  uv_poll_t exit_poll; /* on the pidfd; without one the context's SIGCHLD
                          watch reaps the leader (reap.c) */
  uv_timer_t kill_timer;
  uv_timer_t drain_timer;
  uv_timer_t runtime_timer;
  uvt__stream_t out;
  uvt__stream_t err; /* never opened for a pty task */
  char *scratch;

  /* docs/contract.md §3b. */
  uvt__stdin_t in;
  int pty;          /* out is the terminal's master side */
  int backpressure; /* output_backpressure (P-OUT-4) */
  uvt_output_cb on_output;
  void *on_output_data;
  uvt_drop_cb on_drop; /* M-TOOLS-10 */
  void *on_drop_data;
  uvt_tee_cb on_tee; /* M-TOOLS-17 */
  void *on_tee_data;
  struct uvt__link notify_link; /* on the context's list for on_output */
  /* Where the outcome's text holds each stream (settle), for the last
   * structured read; fin_ok once it was recorded. */
  uvt__layout_t fin;
  int fin_ok;

  /* Links of the context's lists (reap.c, members.c). */
  struct uvt__link unreaped_link; /* leader watched through SIGCHLD */
  struct uvt__link sweep_link;    /* waiting for the next batched pass */
  struct uvt__link pass_link;     /* on the list of a pass being run */
  uvt__proc_t *sid_next;          /* the context's table of sessions */

  /* The session (members.c). */
  unsigned long long start_ticks; /* the leader's start time */
  int tracked;                    /* in the context's table */
  int session_gone;               /* no member can be left: final */
  int want_sig;                   /* for the next batched pass */
  int want_lead;                  /* want_sig already hit the leader's group */
  int pass_sig;                   /* for the pass being run */
  int pass_lead;                  /* pass_sig already hit the leader's group */
  unsigned pass_live;             /* live members the last pass found */
  unsigned pass_sandbox;          /* of them, bwrap's own (S-2) */
  unsigned pass_dying;            /* of them, exiting or SIGKILLed */
  /* process.c's, handed to members.c: a pass over p's members ran and
   * pass_live is fresh (a quiesce or a kill may be over).  On the proc,
   * not the context: a proc may outlive its context. */
  void (*swept)(uvt__proc_t *p);
  int cg;               /* the task has a cgroup (cgroup.c) */
  uvt__cg_t cgroup;     /* it (L-LIM-1) */
  unsigned pass_groups; /* groups it signalled */
  pid_t pass_group[UVT__PASS_GROUPS];
  /* S-11 without a cgroup: processes that left the session, found by
   * descent (members.c); each also stands for its own session. */
  uvt__esc_t *esc;
  unsigned esc_n;

  uint64_t grace_ms;
  uint64_t drain_ms;
  uint64_t max_runtime_ms;

  unsigned lingering; /* streams open with `linger` set (P-OUT-6) */
  unsigned live;      /* UVT__H_* handles initialised, uv_close not called */
  unsigned closing;   /* handles whose close callback has not run */

  int status;         /* waitpid status of the leader */
  int reaped;         /* the leader's exit was seen and reaped */
  int status_lost;    /* someone else reaped the leader */
  int kill_requested; /* cancel (or the runtime limit) before the reap */
  int killed_now;     /* SIGKILL was sent */
  int timed_out;
  unsigned cancels; /* calls of the cancel hook */
  int finishing;    /* closing the last handles towards settle */
  int run_failed;   /* run() returned an error: free after the closes */
  int settled;
  int released;
  int quiescing;          /* the quiesce hook is waiting for the group */
  int quiesce_asked;      /* the registry began that stop (S-9: asked
                             again, it means now) */
  int kill_timer_closing; /* its close callback has not run yet */
  uint64_t quiesce_start_ns;
  uint64_t kill_start_ns; /* uv_hrtime() of the first stop request */
  int kill_gave_up;       /* SIGKILL went unanswered too long (P-KILL-7) */
  int stop_at_settle;     /* a kill came after the leader's own exit */
  uint64_t start_ns;      /* uv_hrtime() of the uvt_process_start call */
  int sandboxed;          /* the leader is bwrap (S-1, sandbox.c) */
  pid_t cmd_pid;          /* the sandboxed command, once seen */
  int sb_status_fd;       /* S-2, S-9: the read end of the sandbox's
                             status pipe and lifeline, or -1 */
  uint64_t timed_out_ms;  /* from the start call to the runtime's SIGTERM */

  /* D-1..D-7 (durable.c): the task's entry in the state directory's
   * journal, or NULL for a task that ends with its host. */
  uvt__dentry_t *dur;
  int adopted;        /* taken back by uvt_process_adopt_all() (D-3) */
  int detached;       /* its host left: the record goes, the task runs on */
  int detach_pending; /* the host left while its spawn was out */
  int dur_err;        /* the journal could not record it: not started */
  uvt__adopted_t *adopting; /* what adoption found, during run() only */
};

/* Reap the leader if it has exited (waitpid on its pid, WNOHANG).
 * Returns 1 if it is (now) reaped. */
int uvt__proc_check_leader(uvt__proc_t *p);
/* A pass over p's members ran (members.c calls it through p->swept):
 * pass_live is fresh. */
void uvt__proc_swept(uvt__proc_t *p);
/* The spawner answered the task's request (sp->cookie). */
void uvt__proc_spawned(uvt__spawn_t *sp);
/* The process task behind `id`, through the registry's fence: 0 and *out
 * (and *t), or UVT_ENOTASK, UVT_EFOREIGN, UV_EINVAL (not a process task). */
int uvt__proc_lookup(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uvt_task_t **t,
                     uvt__proc_t **out);
/* A read consumed output: streams stopped at their cap are read again
 * (P-OUT-4). */
void uvt__proc_resume(uvt__proc_t *p);
/* Has the task reached quiescence (it is closing its last handles, or
 * settled)?  Then it takes no more input. */
int uvt__proc_ending(const uvt__proc_t *p);
/* P-OUT-6: 1 while the ended task's output is still read (a stream
 * lingers) and no kill of it is stopping what holds it; a lingering
 * stream whose every holder is gone is read to its end and closed
 * first. */
int uvt__proc_lingering(uvt__proc_t *p);
/* The close callback of every handle of a task. */
void uvt__proc_on_close(uv_handle_t *h);

/* ---- stdin.c: input for a running task (P-IN-1) ----------------------- */

/* A socket pair for a stdin_pipe task: *ours (non-blocking, shut for
 * reading) and *theirs (the child's stdin, blocking), both close-on-exec.
 * 0 or a libuv error. */
int uvt__stdin_socket(int *ours, int *theirs);
/* Make `fd` (our end of the socket, or a copy of the pty master when
 * `tty`) the task's input, holding up to `cap` pending bytes; `cbs`
 * (static) is the owner's.  The descriptor is taken over (closed on
 * failure).  0 or a libuv error. */
int uvt__stdin_open(uvt__proc_t *p, size_t cap, int fd, int tty,
                    const uvt__stdin_cbs_t *cbs);
/* uvt_process_write() and uvt_process_close_stdin() (write.c) once the
 * task was found and takes input: 0 or their errors (P-IN-1). */
int uvt__stdin_write(uvt__proc_t *p, const char *bytes, size_t len);
int uvt__stdin_end(uvt__proc_t *p);
/* Close the handle and drop what is queued (the task is ending, or its
 * start is undone); its close callback is uvt__proc_on_close. */
void uvt__stdin_close(uvt__proc_t *p);
/* Called from the task's on_close for the stdin handle: close the fd. */
void uvt__stdin_closed(uvt__proc_t *p);

/* Tests only: the pending input bytes of unowned task `id` (0 if none). */
size_t uvt__process_stdin_pending(uvt_registry_t *reg, const char *id);

/* ---- pty.c: a pseudo-terminal per task (P-PTY-1) ---------------------- */

/* Open a terminal of cols x rows: its master side (close-on-exec,
 * non-blocking), its slave side opened without becoming anybody's
 * controlling terminal (close-on-exec, held for the child until its spawn),
 * and the slave's path for the child to open.  0 or a libuv error. */
int uvt__pty_open(uint16_t cols, uint16_t rows, int *master, int *slave,
                  char *path, size_t size);
/* TIOCSWINSZ: 0 or a libuv error. */
int uvt__pty_resize(int fd, uint16_t cols, uint16_t rows);
/* The terminal's end-of-file character (Ctrl-D unless changed). */
char uvt__pty_veof(int fd);

/* ---- trim.c: memory given back after bursts (issue #12) --------------- */

/* A block of `bytes` was freed, or handed to the host or the registry to be
 * freed soon: count it; the allocator is asked to give free pages back
 * once the burst is over.  `ps` may be NULL. */
void uvt__trim_note(uvt__procs_t *ps, size_t bytes);
/* At context close: a last trim if one is due; close the timer; returns
 * how many handles were closed (on_closed runs for each). */
unsigned uvt__trim_close(uvt__procs_t *ps, uv_close_cb on_closed);
/* Tests: how many trims ran. */
extern unsigned uvt__process_trims;

/* ---- notify.c: on_output (P-EVT-1) ------------------------------------ */

/* New output of p became readable: p's on_output runs from the context's
 * check handle in this loop iteration (once, however many reads). */
void uvt__notify_output(uvt__proc_t *p);
/* p ends or goes away: no call for it from now on. */
void uvt__notify_cancel(uvt__proc_t *p);
/* At context close: close the check handle; returns how many handles
 * were closed (on_closed runs for each). */
unsigned uvt__notify_close(uvt__procs_t *ps, uv_close_cb on_closed);

/* ---- env.c: the child's environment, cached per registry -------------- */

/* The name of the variable that carries the command to the wrapper. */
#define UVT__CMD_VAR "UVTASKS_CMD"

/* An immutable environment block: `n` entries, NULL-terminated, strings in
 * the same allocation.  Reference-counted on the loop thread. */
typedef struct {
  size_t refs;
  size_t n;
  char **envp;
} uvt__env_t;

/* The context's cache: the block built from the host's environment alone,
 * and the one built with the last options' entries. */
typedef struct {
  uvt__env_t *base;
  uvt__env_t *with_extra;
  char **environ_array; /* `environ` when base was built */
  char **environ_seen;  /* its pointers then */
  size_t environ_n;
  char **extra; /* copies of the entries with_extra was built from */
  size_t extra_n;
  const char *shell;        /* the shell found last (spawn.c) */
  char *resolved;           /* the last argv[0] found in PATH (spawn.c) */
  char *sb_bwrap;           /* the bwrap probed (sandbox.c), or NULL */
  const char *sb_env_seen;  /* getenv("UVTASKS_BWRAP") when it was found */
  const char *sb_path_seen; /* getenv("PATH") then */
  int sb_state[2];          /* its probe per network setting: 0 not run, 1 ok,
                               -1 refused (S-3) */
  char sb_why[256];         /* why the last refusal (M-TOOLS-18), or "" */
  char *sb_helper;          /* S-2, S-9: uvtasks-sandbox found, or NULL */
  int sb_helper_warned;     /* its absence was logged once */
} uvt__envcache_t;

/* The block for a start with option entries `extra` (NULL or empty: none),
 * referenced for the caller: 0 and *out, or UV_ENOMEM. */
int uvt__env_get(uvt__envcache_t *c, const char *const *extra,
                 uvt__env_t **out);
void uvt__env_unref(uvt__env_t *env);
void uvt__env_cache_free(uvt__envcache_t *c);
/* E-10: the same environment as a copy for the Slurm engine's jobs
 * (declared for it in src/slurm/slurm-internal.h). */
char **uvt__env_scrubbed_copy(const char *const *extra, size_t *n);

/* ---- context.c: the producer's per-registry context -------------------- */

struct uvt__procs_s {
  uvt_context_t ext;
  uv_loop_t *loop;
  uvt_registry_t *reg;
  /* context.c's, handed to the helpers (reap.c, spawner.c): something the
   * context's close waited for has finished; see if it can go on. */
  void (*check_closed)(uvt__procs_t *ps);

  /* reap.c */
  uv_signal_t sigchld;
  uv_timer_t recheck;
  int watching;  /* sigchld and recheck are initialised */
  int subreaper; /* the host is a child subreaper or pid 1 */
  int subreaper_checked;
  uint64_t subreaper_asked;  /* uv_now() of the last check */
  struct uvt__link unreaped; /* procs whose leader waits for SIGCHLD */
  /* Handed over by uvt__reap_watch: look whether p's leader exited (and
   * reap it); nonzero once it was reaped. */
  int (*check_leader)(uvt__proc_t *p);

  /* members.c */
  uvt__proc_t **sessions; /* tracked sessions by leader pid (chained) */
  size_t sessions_size;   /* buckets, a power of two */
  size_t sessions_count;
  struct uvt__link sweeping; /* procs waiting for the next pass */
  int owner_fd;              /* for the F_SETOWN test, or -1 */
  /* S-11, uvt_process_orphans(): every child of the host but these is a
   * task's (reaped as a stray when it exits, stopped at close). */
  int strays;
  pid_t *strays_not;
  size_t strays_not_n;
  unsigned strays_left;
  pid_t *kept; /* D-1: detached durable tasks' keepers (not strays) */
  size_t kept_n;

  /* cgroup.c */
  uvt__cgroot_t cgroot;
  uv_idle_t sweeper;
  int sweeper_init;

  /* env.c */
  uvt__envcache_t envc;

  /* process.c: where a stream's read lands while the stream has no ring,
   * so a stream that reads nothing but its end (a command with no output
   * on it) allocates nothing; its bytes, if any, are pushed into a ring
   * right after the read.  READ_CHUNK bytes from the first such read to
   * the context's end; loop thread. */
  char *landing;

  /* notify.c */
  uv_check_t notify_check;
  int notify_init;
  struct uvt__link notifying; /* procs with new output to announce */

  /* trim.c */
  uv_timer_t trim_timer;
  int trim_init;
  size_t trim_bytes;      /* large blocks freed since the last trim */
  uint64_t trim_first_ns; /* uv_hrtime() of the first of them */

  /* spawner.c */
  uv_mutex_t spawn_mutex; /* guards the queues, spawners_left, leaders,
                             spawning_now, spawn_frozen, cgroot.shared */
  uv_cond_t spawn_idle;   /* spawning_now went to 0 */
  uvt__leader_t *leaders; /* live leaders (stopall.c) */
  size_t leaders_n;
  size_t leaders_cap;    /* grown by the loop before a start commits */
  unsigned spawning_now; /* spawns running on a thread right now */
  int spawn_frozen;      /* uvt_process_stop_all_now(): spawn nothing */
  uvt__procs_t *stopall_next;
  uv_cond_t spawn_cond;
  struct uvt__link spawn_queue; /* requests for the threads */
  struct uvt__link spawn_done;  /* answers for the loop */
  uv_async_t spawn_async;
  uv_thread_t spawner[4];
  unsigned spawners;      /* threads started */
  unsigned spawners_left; /* threads that have left (under the mutex) */
  unsigned spawns_out;    /* requests submitted and not answered */
  int spawner_init;       /* mutex, cond and async initialised */
  int spawners_tried;     /* the threads were started (or tried) */
  int spawn_stop;         /* close: threads leave (under the mutex) */
  int spawners_joined;

  /* spawnhelper.c (P-SPAWN-7) */
  uvt__helper_t *helper; /* started, or NULL */
  int helper_on;         /* new requests go through it */

  /* durable.c (D-1..D-7): the registry's state directory, or NULL */
  uvt__dstate_t *dstate;
  /* Its close and free, set with it by durable.c (uvt__durable_close,
   * uvt__durable_free), so that the context's close (context.c) calls
   * nothing of durable.c by name; NULL while there was none. */
  unsigned (*dstate_close)(uvt__procs_t *ps, uv_close_cb on_closed);
  void (*dstate_free)(uvt__procs_t *ps);

  /* Shutdown (context.c). */
  int closing;
  int close_checking; /* in uvt__procs_maybe_closed() */
  unsigned handles_closing;
  unsigned procs_live; /* tasks' states not yet freed (R-CLOSE-2) */
  uvt_context_done_cb done;
};

/* The registry's context, created on first use.  Returns 0 and *out, or
 * UV_ENOMEM, UVT_ECLOSING. */
int uvt__procs_get(uvt_registry_t *reg, uvt__procs_t **out);
/* Called by reap.c when a list it waits on at close became empty, by the
 * spawner's answers and by the last task state's free. */
void uvt__procs_maybe_closed(uvt__procs_t *ps);

/* ---- members.c: the task's session (P-KILL-5, P-KILL-3, P-REAP-1) ------ */

typedef struct {
  pid_t pid;
  pid_t ppid;
  pid_t pgrp;
  pid_t sid;
  char state;
  char bwrap;               /* its command name is "bwrap" or
                               "uvtasks-sandbox" (S-2, S-9): the
                               sandbox's own */
  unsigned flags;           /* the kernel's per-task flags (PF_*) */
  unsigned long long start; /* clock ticks after boot */
} uvt__pstat_t;

/* ---- procfs.c: the /proc readers ------------------------------------- */
/* /proc/<pid>/stat: 0, or -1 (gone, or no /proc). */
int uvt__pstat_read(pid_t pid, uvt__pstat_t *st);
/* 1 when the process `st` was read of is exiting or has a fatal signal
 * pending (P-LEFT-1); reads /proc/<pid>/status. */
int uvt__pstat_dying(const uvt__pstat_t *st);
/* Call fn(arg, pid) for each decimal number in what is left of `fd` (a
 * /proc children list, a cgroup.procs file: numbers apart by any other
 * byte); returns how many.  Reads to the end; leaves fd open. */
int uvt__read_pids(int fd, void (*fn)(void *arg, pid_t pid), void *arg);

/* ---- members.c ------------------------------------------------------- */
/* The context's table of sessions: UV_ENOMEM or 0. */
int uvt__members_init(uvt__procs_t *ps);
/* Track p's session (after the spawn, with p->start_ticks set); untrack
 * it (p goes away).  Loop thread. */
void uvt__members_track(uvt__proc_t *p);
void uvt__members_untrack(uvt__proc_t *p);
/* Send `sig` to every group of p's session: the leader's group at once
 * while the leader is unreaped, the others from the next batched pass
 * (which calls uvt__proc_swept).  0, or the error of the leader's group
 * (EPERM). */
int uvt__members_signal(uvt__proc_t *p, int sig);
/* P-KILL-8: a chosen signal to every group of p's session now (one pass
 * over /proc), each process once and after any signal sent before it.  A
 * SIGTERM, here as from uvt__members_signal, is followed by SIGCONT.  0,
 * or the error of the leader's group. */
int uvt__members_signal_now(uvt__proc_t *p, int sig);
/* Ask for a batched pass (liveness only); uvt__proc_swept follows. */
void uvt__members_check(uvt__proc_t *p);
/* 1 if p's session is known to have no process left (not even a zombie):
 * marked gone, or its leader reaped and its number no longer allocated
 * (two fcntl calls); 0 if a pass must tell. */
int uvt__members_known_empty(uvt__proc_t *p);
/* A pass over p's session now, sending `sig` (0: none) to its groups;
 * returns its live members.  Reaps our zombie members on the way. */
int uvt__members_count(uvt__proc_t *p, int sig);
/* S-2: what the task left running, as reported (P-LEFT-1): a pass's live
 * members without a sandboxed task's own bwrap processes (its pid 1 may
 * outlive the command by a moment, or hold the sandbox for a child that
 * left the session; it is still signalled and waited for as a member). */
int uvt__members_leftovers(uvt__proc_t *p);
/* SIGCHLD on a subreaper host: reap zombie children of tracked sessions. */
void uvt__members_reap_orphans(uvt__procs_t *ps);
/* S-11 (uvt_process_orphans): the host's children now are not the
 * tasks'; 0 or UV_ENOMEM.  At close: SIGKILL to the strays left. */
int uvt__members_strays_on(uvt__procs_t *ps);
void uvt__members_strays_stop(uvt__procs_t *ps);
/* D-1: a detached durable task's keeper, a child of this host, is never
 * stopped as a stray (reaped as one when it ends); 0 or UV_ENOMEM. */
int uvt__members_keep(uvt__procs_t *ps, pid_t pid);
/* At context close: detach procs still tracked, close the idle handle;
 * returns the number of handles closed (on_closed runs for each). */
unsigned uvt__members_close(uvt__procs_t *ps, uv_close_cb on_closed);

/* ---- spawner.c: spawning off the loop thread (P-SPAWN-6) -------------- */

/* Spawner threads per registry; 0 = as many as cores, at most 4.  Read
 * when a registry starts its threads (tests and the benchmark set it). */
extern unsigned uvt__process_spawners;
/* How many threads a registry starts (what the above gives here). */
unsigned uvt__spawner_count(void);

/* The context's queues, mutex and async handle: 0 or a libuv error. */
int uvt__spawner_init(uvt__procs_t *ps);
/* Hand a request over (starting the threads with the first one), as
 * libuv's uv_queue_work: the spawn runs on a spawner thread and
 * `done(sp)` is called with the answer on the loop thread (from the
 * context's async, or at once when the context stops). */
void uvt__spawner_submit(uvt__procs_t *ps, uvt__spawn_t *sp,
                         void (*done)(uvt__spawn_t *sp));
/* Room in the live-leader set for one more start (before it commits):
 * 0 or UV_ENOMEM.  A reaped leader leaves the set. */
int uvt__spawner_reserve(uvt__procs_t *ps);
void uvt__spawner_reaped(uvt__procs_t *ps, pid_t pid);
/* stopall.c: the process-wide list of contexts. */
void uvt__stopall_add(uvt__procs_t *ps);
void uvt__stopall_remove(uvt__procs_t *ps);
/* At context close: stop the threads (answering queued requests "not
 * spawned" at once); 0 once they are joined and every answer delivered,
 * else -1 (ps->check_closed is called again then). */
int uvt__spawner_stop(uvt__procs_t *ps);
/* Then: close the async handle; returns how many handles were closed. */
unsigned uvt__spawner_close(uvt__procs_t *ps, uv_close_cb on_closed);

/* ---- cgroup.c: a cgroup per task (P-KILL-5, S-11, L-LIM-1..2) ---------- */

/* The interface other parts use (the process producer; durable tasks,
 * which find and limit a task's group again after a restart):
 *
 *   uvt__cg_t          one task's group: a directory per hierarchy
 *   uvt__cg_make       make it (or take a pooled one) and write its limits
 *   uvt__cg_open       an existing group, by the paths uvt__cg_path gave
 *   uvt__cg_enter      the child's step before exec (async-signal-safe)
 *   uvt__cg_kill       SIGKILL to all of it (cgroup.kill, or each pid)
 *   uvt__cg_each       its pids; uvt__cg_populated: anything alive?
 *   uvt__cg_events     what its limits did: OOM kills, fork refusals, CPU
 *   uvt__cg_remove     kill what is left and remove it; uvt__cg_close
 *                      closes what uvt__cg_open opened and the group's
 *                      files, removing nothing; uvt__cg_move hands a
 *                      group (its descriptors too) to another owner
 *
 * Every function of a group is safe on any thread (no allocation, no
 * shared state); the registry's side (uvt__cgroot_*) is the loop's. */

/* A group with no directory (mask 0, every dir -1). */
void uvt__cg_init(uvt__cg_t *g);
/* Make g's directories where missing (EEXIST is fine: a reused group),
 * write g->limits (what is 0 is written as no limit), open the files its
 * task will use where it has none yet (g->fd, within the process's
 * budget) and read the event bases.  0 or a libuv error; on error what it
 * made is removed. */
int uvt__cg_make(uvt__cg_t *g);
/* An existing group, by its path per hierarchy (NULL: not in it; all
 * with one directory name), with the limits it was made with (NULL:
 * none recorded).  The bases are 0: every event of the group counts.
 * 0, UV_EINVAL (no path, names differ), or the error of opening. */
int uvt__cg_open(uvt__cg_t *g, const char *const path[UVT__CG_N],
                 const uvt_process_limits_t *limits);
/* g's path in hierarchy h, for a journal: 0, UV_ENOENT (not in it),
 * UV_ENAMETOOLONG, or the error of readlink. */
int uvt__cg_path(const uvt__cg_t *g, int h, char *buf, size_t size);
/* The calling process moves itself into g in each hierarchy (in the child,
 * before exec: only system calls).  0 or a negative errno. */
int uvt__cg_enter(const uvt__cg_t *g);
/* fn(arg, pid) for each pid of g (v2's list, else the first v1 one);
 * how many, or -1 if it cannot be read. */
int uvt__cg_each(const uvt__cg_t *g, void (*fn)(void *arg, pid_t pid),
                 void *arg);
/* 1 if a process is alive in g, else 0 (also when g cannot be read). */
int uvt__cg_populated(const uvt__cg_t *g);
/* SIGKILL to every process of g: cgroup.kill, else each pid (v1; the
 * caller repeats until uvt__cg_populated says 0). */
void uvt__cg_kill(const uvt__cg_t *g);
/* 0 and *ev, or UV_EINVAL (g has no directory).  `full`: also the peak
 * memory and the CPU time (two more file reads). */
int uvt__cg_events(const uvt__cg_t *g, uvt__cg_events_t *ev, int full);
/* Remove g's directories (a populated one is killed first), then
 * uvt__cg_close.  0, or the error of a directory that stayed. */
int uvt__cg_remove(uvt__cg_t *g);
void uvt__cg_close(uvt__cg_t *g);
/* *to = *from, and from no longer owns anything (its descriptors and the
 * directories uvt__cg_open opened are to's now). */
void uvt__cg_move(uvt__cg_t *to, uvt__cg_t *from);
/* Tests: how many descriptors groups keep open now (the whole process). */
int uvt__cgroup_fds_held(void);

/* Tests: where the readers look (a fake tree), and a mkdir that makes the
 * files a kernel would (dirfd AT_FDCWD with an absolute name for a
 * registry's directory).  0 or a libuv error. */
extern const char *uvt__cgroup_self;      /* "/proc/self/cgroup" */
extern const char *uvt__cgroup_mountinfo; /* "/proc/self/mountinfo" */
extern int (*uvt__cgroup_mkdir_hook)(int dirfd, const char *name);

/* uvt_process_cgroups() for the context `ps`: make the registry's v2
 * directory under `parent_dir` (NULL: the host's own cgroup).  Returns
 * what uvt_process_cgroups documents.  Loop thread. */
int uvt__cgroup_open(uvt__procs_t *ps, const char *parent_dir);
/* Can the registry enforce `l`?  Opens the hierarchies it needs (once).
 * 0, or UV_ENOTSUP with the reason in `why` (NULL: not wanted).  Loop
 * thread. */
int uvt__cgroot_limits(uvt__procs_t *ps, const uvt_process_limits_t *l,
                       char *why, size_t size);
/* The group for a new task with limits `l` (all 0: containment only), in
 * *g: a pooled one or a new name; mask 0 when the task gets none.  Call
 * uvt__cgroot_limits first.  0.  Loop thread. */
int uvt__cgroot_assign(uvt__procs_t *ps, const uvt_process_limits_t *l,
                       uvt__cg_t *g);
/* D-1 with L-LIM-3: the group of a durable task with limits `l`, named
 * `name` (its key), in *g: not in the registry's directories (removed at
 * its close) but in UVT__CG_DURABLE beside them, made where missing and
 * left in place; the group's directories are its own descriptors (g->own),
 * so uvt__cgroot_release() removes the group and uvt__cg_close() leaves
 * it for the next host.  Call uvt__cgroot_limits first.  0, UV_ENOTSUP
 * (a controller the durable directory lacks), or the error of making or
 * opening it.  Loop thread. */
#define UVT__CG_DURABLE "uvtasks-durable"
int uvt__cgroot_durable(uvt__procs_t *ps, const uvt_process_limits_t *l,
                        const char *name, uvt__cg_t *g);
/* A task is done with its group: back to the pool if empty, else killed
 * and removed (ps NULL: removed).  Loop thread. */
void uvt__cgroot_release(uvt__procs_t *ps, uvt__cg_t *g);
/* Did process `pid` (a zombie) die in a group of the registry's
 * directories?  (P-REAP-1 for the processes that left their session.) */
int uvt__cgroup_had(uvt__procs_t *ps, pid_t pid);
/* At context close: remove the pool and the registry's directories. */
void uvt__cgroup_close(uvt__procs_t *ps);
/* process.c, for tests and reports: unowned task `id`'s group: its events
 * counted from the task's start (ev, NULL: not wanted) and its path in
 * hierarchy h (path, NULL: not wanted).  0, UV_ENOENT (no group, or not
 * in h), or the lookup's errors.  Loop thread. */
int uvt__process_cgroup(uvt_registry_t *reg, const char *id,
                        uvt__cg_events_t *ev, int h, char *path, size_t size);
/* The same for a task of `caller` (R-OWN-2's fence applies). */
int uvt__process_cgroup_of(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller, uvt__cg_events_t *ev,
                           int h, char *path, size_t size);

/* ---- reap.c: seeing leaders exit without pidfds (P-REAP-2) ------------- */

/* Start the context's SIGCHLD watch (once); 0 or a libuv error. */
int uvt__reap_start(uvt__procs_t *ps);
/* Watch p's leader through the context's one SIGCHLD watch (started on
 * first use), and look once now for an exit that came before: the watch
 * calls `check(p)` (the same function for every task of the context)
 * whenever a leader may have exited.  0 or a libuv error (the watch could
 * not start). */
int uvt__reap_watch(uvt__procs_t *ps, uvt__proc_t *p,
                    int (*check)(uvt__proc_t *p));
/* p's leader was reaped, or p goes away: stop watching it. */
void uvt__reap_unwatch(uvt__proc_t *p);
/* At context close: -1 while a leader still waits on the watch (its group
 * was sent SIGKILL; call again when the list empties, which
 * ps->check_closed does), else close the watch's handles and return
 * how many were closed (on_closed runs for each, data = ps). */
int uvt__reap_close(uvt__procs_t *ps, uv_close_cb on_closed);

/* ---- spawn.c: everything that talks to the operating system ----------- */

/* Nonzero: spawn through fork even where posix_spawn has everything (for
 * tests of the fallback).  Loop thread; set between tasks. */
extern int uvt__process_force_fork;
/* How long SIGKILL may go unanswered before a task settles anyway (ms,
 * default 10000; process.c).  Tests shorten it.  Loop thread; set between
 * tasks. */
extern int uvt__process_kill_give_up_ms;
/* Tests only: called by the thread that runs a spawn, with 0 before it
 * looks at the request's `cancelled` and 1 once it decided to spawn, so a
 * test can hold the spawner at either point.  Read when a request is
 * built; NULL otherwise. */
extern void (*uvt__process_spawn_hook)(int phase);
/* Nonzero: detect the leader's exit through SIGCHLD as if pidfds were not
 * available (for tests of that path; spawn.c's).  Loop thread; set
 * between tasks. */
extern int uvt__process_no_pidfd;

/* A spawn request: built on the loop thread, then only read by the spawn,
 * which writes the answer; one allocation with everything it points to. */
struct uvt__spawn_s {
  struct uvt__link link; /* a queue of whoever holds the request */
  /* Handed over by uvt__spawner_submit: the answer, on the loop thread. */
  void (*done)(uvt__spawn_t *sp);
  /* Set before the spawn, read-only after. */
  const char *file; /* what to exec (a resolved path, or the shell) */
  char *const *argv;
  char *const *envp;
  const char *cwd; /* NULL = inherit */
  const char *tty; /* a pty's slave path: the child opens it as its
                      controlling terminal and stdio; NULL = none */
  int fd[3];       /* the child's stdin (-1 = /dev/null), stdout, stderr,
                      all above 2, or -1 each; with a tty, fd[0] is the
                      slave held open until the spawn; the spawn closes
                      them */
  int want_pidfd;
  int force_fork;
  uvt__cg_t cg; /* the task's cgroup (mask 0: none), L-LIM-1 */
  long clk_tck; /* sysconf(_SC_CLK_TCK) */
  void (*hook)(int phase);
  uvt__env_t *env;      /* loop side: released with the request */
  void *cookie;         /* loop side: the task it is for */
  atomic_int cancelled; /* set by the loop: do not spawn */
  /* The answer. */
  int skipped; /* cancelled: nothing was spawned */
  int err;     /* 0 or the libuv error of the spawn */
  pid_t pid;   /* 0 until the spawner answered, and if nothing started */
  int pidfd;
  uvt__spawn_t *spawn; /* the request, from run() until the answer */
  int spawning;        /* the request is prepared or out */
  int not_started;     /* answered: no child (spawn_err, or cancelled) */
  int spawn_err;       /* or a libuv error (then: the SIGCHLD watch) */
  unsigned long long start_ticks; /* at most the leader's start time */
  int cg_err;     /* 0: the child is in its group; else why not */
  int cg_must;    /* limits: no spawn outside the group (L-LIM-1) */
  char **sb_argv; /* a sandboxed task's argv (argv points here), or NULL */
  /* S-2, S-9: the status pipe of a sandbox run by uvtasks-sandbox: the
   * write end goes to the child as descriptor 3 (above stdio, the spawn
   * closes it; -1 = none), the read end to the task (loop side). */
  int extra_fd;
  int sb_status_fd;
  /* P-SPAWN-7: the registry's spawn helper, or NULL (spawn here). */
  uvt__helper_t *helper;
  pid_t h_pid; /* written by the kernel for the helper's clone */
  int h_err;   /* the errno of the helper's clone or of its child */
  /* D-1: a durable task's keeper (durable.c) gets two descriptors more,
   * as its 3 and 4 (-1: none; the spawn closes them), and is never one
   * of the live leaders uvt_process_stop_all_now() kills. */
  int xfd[2];
  int durable;
  char **dur_argv; /* the keeper's argv (argv points here), or NULL */
};

/* Check what can be checked before the spawn (cwd, the shell or argv[0]
 * in PATH, the size of the command) and build the request, taking over
 * the three descriptors only on success.  `tty`: the pty slave's path for
 * a pty task (then TERM=xterm-256color unless o->env gives a TERM), or
 * NULL.  0 and *out, or a libuv error
 * (UV_ENOENT, UV_ENOTDIR, UV_EACCES, UV_E2BIG, UV_ENAMETOOLONG,
 * UV_ENOMEM).  Loop thread. */
int uvt__spawn_prepare(uvt__envcache_t *envc, const uvt_process_options_t *o,
                       const int fd[3], const char *tty, uvt__spawn_t **out);
/* Spawn the child in its own session with stdio from the request and no
 * other descriptor (P-SPAWN-1..5), unless the request was cancelled; then
 * close the request's descriptors.  Any thread; allocates nothing of ours. */
void uvt__spawn_run(uvt__spawn_t *sp);
/* Loop thread; accepts NULL. */
void uvt__spawn_free(uvt__spawn_t *sp);

/* ---- spawnhelper.c: the spawn helper process (P-SPAWN-7) ------------- */

/* uvt__helper_spawn()'s "not through the helper": spawn here instead. */
#define UVT__HELPER_NO 1

/* Nonzero: every registry's process context starts with the helper on
 * (the test harness sets it for the process suites' helper runs).  Read
 * when a context is created. */
extern int uvt__process_spawn_helper_default;

/* Start `n` helpers (one per spawner thread; at most 4): 0 and *out
 * (fewer than asked if some could not start), or the first one's error:
 * UV_ENOTSUP (not possible here: valgrind, ThreadSanitizer, a seccomp
 * filter), UV_ENOMEM, or a libuv error.  Loop thread (it waits for the
 * helpers' clones). */
int uvt__helper_start(unsigned n, uvt__helper_t **out);
/* Spawn sp's leader through a free helper (any thread): 0 and *pid (the
 * host's child, exec'd), a libuv error of the spawn itself (the failed
 * child is reaped), or UVT__HELPER_NO when no helper can take it (all
 * dead, a forked host, descriptors not passed): nothing was spawned, and
 * sp's descriptors are still the caller's. */
int uvt__helper_spawn(uvt__helper_t *h, uvt__spawn_t *sp, pid_t *pid);
/* End the helpers and reap them, then free `h` (accepts NULL).  No spawn
 * may be out.  Loop thread. */
void uvt__helper_stop(uvt__helper_t *h);
/* 1 while at least one helper of `h` is not known dead (0 for NULL). */
int uvt__helper_alive(const uvt__helper_t *h);
/* Tests: how many helpers, helper i's pid (0 once it is known dead), and
 * how many requests they answered. */
unsigned uvt__helper_count(const uvt__helper_t *h);
pid_t uvt__helper_pid(const uvt__helper_t *h, unsigned i);
unsigned uvt__helper_served(const uvt__helper_t *h);

/* ---- sandbox.c: sandboxed tasks (S-1..S-4) ---------------------------- */

/* Check a sandbox's options (UV_EINVAL, UV_ENOENT for a missing writable
 * path, UV_ENAMETOOLONG) and that bwrap can make one here (S-3: probed
 * once per bwrap and network setting, remembered in `c`; UV_ENOTSUP, the
 * reason logged on `reg`).  Loop thread. */
int uvt__sandbox_check(uvt_registry_t *reg, uvt__envcache_t *c,
                       const uvt_sandbox_t *sb);
/* The leader's argv (NULL-terminated, every string allocated; free with
 * uvt__sandbox_argv_free) that runs `file` with argv[1..] inside the
 * sandbox, in `cwd` (NULL: the host's).  With uvtasks-sandbox found (S-2,
 * S-9), *status_rd and *status_wr get the status pipe's ends (the write
 * end above 3, both close-on-exec, the read end non-blocking), else -1.
 * 0, UV_ENOMEM, UV_ENOTSUP (not checked), UV_EPERM (S-5: the cwd outside
 * the workspace and the writable paths), or the error of realpath() or
 * pipe2(). */
int uvt__sandbox_wrap(uvt__envcache_t *c, const uvt_sandbox_t *sb,
                      const char *cwd, const char *file, char *const *argv,
                      char ***out, int *status_rd, int *status_wr);
void uvt__sandbox_argv_free(char **v);
/* S-2: at the leader's end, the command's own wait status from the
 * sandbox's status pipe into *status (left as it is without one). */
void uvt__sandbox_status(uvt__proc_t *p, int *status);
/* The sandboxed command's pid (see uvt_process_command_pid()). */
int uvt__sandbox_command_pid(uvt__proc_t *p);

/* A pidfd for `pid` (close-on-exec), or a libuv error. */
int uvt__pidfd_open(pid_t pid);

/* A memfd (close-on-exec) holding `len` bytes, positioned at 0, or a
 * libuv error. */
int uvt__stdin_file(const char *data, size_t len);

/* `fd` itself, or a close-on-exec copy above 2 (closing `fd`) so that the
 * child's dup2 onto 0..2 cannot overwrite it; or a libuv error. */
int uvt__fd_above_stdio(int fd);

/* Kill the group with SIGKILL and reap the leader (blocking): the undo of a
 * start that failed after the spawn. */
void uvt__spawn_abort(pid_t pid);

/* ---- durable.c: tasks that outlive the host (D-1..D-7) ---------------- */

/* One task of the state directory's journal, as the journal's lines
 * made it (loaded at adoption, or recorded by a start of this host). */
struct uvt__dentry_s {
  char id[UVT_ID_MAX];
  char key[24];       /* names its files: <key>.out, .err, .rc, .in */
  char flags[8];      /* "-", or: i (a stdin FIFO), m (merged streams),
                         b (output backpressure) */
  int64_t started_ms; /* epoch ms of its start */
  uint64_t cap;       /* output_cap_bytes */
  uint64_t grace_ms;
  uint64_t drain_ms;
  uint64_t max_runtime_ms;
  char *agent;   /* the owner agent's id, or NULL (unowned) */
  char *session; /* the owner's session, or NULL */
  char *kind;
  char *label;
  char *command;      /* the shell command, or NULL for an argv task */
  uint64_t off[2];    /* bytes of stdout and stderr consumed by reads */
  char killed;        /* 0, 'k' (a kill was asked) or 't' (runtime limit) */
  uint64_t killed_ms; /* with 't': ms from the start to the SIGTERM */
  int stdin_closed;   /* close_stdin was asked */
  pid_t pid;          /* the keeper, once spawned */
  unsigned long long start; /* its start time (a lower bound) */
  uvt_process_limits_t limits; /* L-LIM-3: what its group enforces */
  char *cg_path[UVT__CG_N];    /* its group per hierarchy, or NULL */
  int delivered;            /* D: its end reached the listeners */
  uvt__proc_t *proc;        /* its task in this registry, or NULL */
  uvt__dentry_t *hnext;     /* the state's table by key */
  struct uvt__link link;    /* the state's list, in journal order */
};

/* What adoption found of a journalled task (durable.c -> process.c). */
struct uvt__adopted_s {
  int live;                 /* its keeper runs: pidfd holds it */
  pid_t pid;                /* the keeper */
  int pidfd;                /* its pidfd (live), else -1 */
  unsigned long long start; /* its exact start time */
  int status;               /* ended: a wait status (exit or signal) */
  int lost;                 /* ended, and how is not known */
  int spawn_err; /* ended: the command could not be run (libuv code) */
  int never;     /* never started: the host stopped before the spawn */
  int fd[2];     /* the output files, read-only (taken over) */
  int in_fd;     /* the stdin FIFO's write end, or -1 (taken over) */
};

/* Tests only: called at each step of a durable task's life with the
 * step's name and the task's id, on the loop thread; a test's host stops
 * itself there (SIGKILL) to try every restart.  Steps: "record" (before
 * the journal line of a start), "spawned" (between the keeper's spawn
 * and its journal line), "read" (output consumed, offsets not yet
 * journalled), "ended" (the end seen, not yet journalled as delivered),
 * "delivered" (journalled, listeners not yet told), "killed" (a kill
 * journalled, its grace running). */
extern void (*uvt__durable_hook)(const char *step, const char *id);

/* uvt_process_start() with `durable`: check what needs the registry's
 * state directory (UV_EINVAL without one) and make the task's files: the
 * key, the output files (read ends for us in p->out/p->err, write ends
 * for the child in child[1], child[2]), the status file (locked: xfd[0])
 * and, for a stdin_pipe task, the FIFO (child's read end in child[0],
 * the keeper's write end in xfd[1], ours in *in_ours).  0 or an error,
 * with nothing left open or on disk. */
int uvt__durable_prepare(uvt__proc_t *p, const uvt_process_options_t *o,
                         int child[3], int xfd[2], int *in_ours);
/* L-LIM-3: the task's group `g` (made at the spawn) is recorded with its
 * limits in the task's journal line, for the next host.  0 or an error
 * (UV_ENOMEM, or the group's path could not be read). */
int uvt__durable_cgroup(uvt__proc_t *p, const uvt__cg_t *g);
/* L-LIM-3 at adoption: the group the journal names, opened again (S-7:
 * by descriptor, without following links, only a cgroup file system's
 * UVT__CG_DURABLE/<key>), into p->cgroup (p->cg set).  A group that
 * cannot be found is logged; the task is taken back without it. */
void uvt__durable_cgroup_open(uvt__proc_t *p);
/* Make the spawn run the keeper with the command: 0 or UV_ENOMEM. */
int uvt__durable_wrap(uvt__proc_t *p, uvt__spawn_t *sp);
/* After the commit, before the spawn: journal the task (D-3).  0 or the
 * journal's error (the task then must not start). */
int uvt__durable_record(uvt__proc_t *p, const uvt_process_options_t *o,
                        const char *kind, const char *label);
/* Journal lines of the task's life: its keeper's pid; a kill asked
 * (`why`: 'k' a kill, 't' the runtime limit); what reads consumed (only
 * when it moved); the end delivered; close_stdin (and the keeper told). */
void uvt__durable_spawned(uvt__proc_t *p);
void uvt__durable_killed(uvt__proc_t *p, char why);
void uvt__durable_consumed(uvt__proc_t *p);
void uvt__durable_settled(uvt__proc_t *p);
void uvt__durable_stdin_closed(uvt__proc_t *p);
/* The record goes: a delivered task's files and entry go too (D-6); a
 * detached one stays for the next host. */
void uvt__durable_release(uvt__proc_t *p);
/* Read what stream `s` has new in its file into its ring (at most
 * `limit` bytes; 0 = to the end).  Returns the bytes read. */
size_t uvt__durable_tail(uvt__proc_t *p, uvt__stream_t *s, size_t limit);
/* Tail p's streams from the loop soon (a change, a resume), if its host
 * wants output as it comes (on_output, on_drop); else reads do it. */
void uvt__durable_want_tail(uvt__proc_t *p);
/* A watch of p's file could not be made: look every 50 ms instead. */
void uvt__durable_poll(uvt__proc_t *p);
/* An adopted task's keeper: 0 while it runs; 1 once it ended, with
 * *status (a wait status) and *lost (nothing recorded). */
int uvt__durable_leader_status(uvt__proc_t *p, int *status, int *lost);
/* The libuv error of a command the keeper could not run, else 0. */
int uvt__durable_spawn_error(uvt__proc_t *p);
/* The command's pid (the keeper's child), 0 if none is seen. */
int uvt__durable_command_pid(uvt__proc_t *p);
/* 1 when the host's leaving stops durable task p (no state directory,
 * or uvt_process_stop_durable()), 0 when it runs on (D-1). */
int uvt__durable_stopping(const uvt__proc_t *p);
/* At context close: close the state directory's handles (how many;
 * on_closed runs for each); uvt__durable_free after they closed. */
unsigned uvt__durable_close(uvt__procs_t *ps, uv_close_cb on_closed);
void uvt__durable_free(uvt__procs_t *ps);

/* process.c: register an adopted task under its journalled id (D-3). */
int uvt__proc_adopt(uvt__procs_t *ps, uvt__dentry_t *e, uvt__adopted_t *a,
                    uvt_agent_t *owner);
/* process.c, for durable.c's tail: where the next bytes of s go, and
 * that n bytes went there (read_room, got_bytes). */
size_t uvt__stream_room(uvt__stream_t *s, char **at);
void uvt__stream_got(uvt__stream_t *s, const char *at, size_t n);
/* process.c: a stream stopped at its cap (P-OUT-4); a file stream whose
 * end a read found after its writer left (closed; the task may end). */
void uvt__stream_maybe_pause(uvt__stream_t *s);
void uvt__stream_at_end(uvt__stream_t *s);

#endif
