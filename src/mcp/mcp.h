/* uvtasks-mcp: a Model Context Protocol server over stdio (contract §5,
 * M-MCP-1..4).  Internal header of the executable. */
#ifndef UVTASKS_MCP_H
#define UVTASKS_MCP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "taskmap.h"
#include "uvtasks.h"
#include "uvtasks/tools.h"

/* Longest message line accepted, in bytes (M-MCP-3). */
#define MCP_LINE_MAX (4u * 1024u * 1024u)

/* Ended tasks kept by default, read or not (M-MCP-11). */
#define MCP_KEEP_FINISHED 100

/* M-MCP-11: unread output bytes kept across all ended tasks by default:
 * with the per-task cap and the count above, a day-long session stays
 * well under 64 MiB. */
#define MCP_MAX_UNREAD_DEFAULT (32u * 1024u * 1024u)

/* The protocol version answered when the client's is not one we speak. */
#define MCP_PROTOCOL_LATEST "2025-11-25"

/* The stateless revision (M-MCP-9): requests recognised by their _meta. */
#define MCP_PROTOCOL_2026 "2026-07-28"

/* The revision that has JSON-RPC batches (M-MCP-8). */
#define MCP_PROTOCOL_BATCHES "2025-03-26"
/* M-MCP-12: requests in one batch; a larger one is refused whole. */
#define MCP_BATCH_MAX 100
/* M-MCP-12: JSON values (arrays, objects, members and elements) one line
 * may hold; parsed, each costs jansson some tens of bytes. */
#define MCP_LINE_VALUES_MAX 50000

/* Keys of a 2026-era request's _meta, of a result's _meta, and the Tasks
 * extension's name. */
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define MCP_TASKS_EXTENSION "io.modelcontextprotocol/tasks"

/* tools/list and server/discover of the 2026 era: how long a client may
 * cache them (the tools never change while the server runs). */
#define MCP_LIST_TTL_MS 3600000

/* M-TOOLS-6: default of --yield-ms, below the official SDK's 60 s. */
#define MCP_YIELD_DEFAULT_MS 45000

/* M-MCP-5: a call carrying a progressToken hears from us this often. */
#define MCP_PROGRESS_INTERVAL_MS 2000

/* M-MCP-6: at shutdown, SIGTERM to every group, then SIGKILL to every group
 * still alive after this (default of --shutdown-grace-ms), so the whole
 * shutdown ends well within 1.5 s of end of input. */
#define MCP_SHUTDOWN_GRACE_MS 800
/* And if the registry has still not closed this long after the SIGKILL,
 * the server exits anyway (the guardian stops what is left). */
#define MCP_SHUTDOWN_HARD_MS 600
/* M-MCP-10: once every task is stopped, answers still queued to a client
 * that reads them go on draining while it makes progress, up to this long;
 * a client that does not read at all loses them after MCP_SHUTDOWN_HARD_MS
 * (or what is left of the shutdown grace). */
#define MCP_SHUTDOWN_DRAIN_MAX_MS 10000

/* M-MCP-8: bytes of answers queued to stdout beyond which the server stops
 * reading stdin until the client has read them. */
#define MCP_OUT_HIGH_WATER (4u * 1024u * 1024u)

/* Which protocol era a request belongs to. */
enum { MCP_ERA_2025 = 0, MCP_ERA_2026 = 1 };

typedef struct mcp_server_s mcp_server_t;

/* ---------------------------------------------------------------------- */
/* stdin: one message per line                                             */

typedef struct mcp_in_s mcp_in_t;

/* What the input tells its owner (stdio.c calls nothing of the server by
 * name): each callback receives the input, the owner's pointer in
 * in->data. */
typedef struct {
  /* One complete line, without its newline (and its \r). */
  void (*line)(mcp_in_t *in, const char *line, size_t len);
  /* A line longer than MCP_LINE_MAX was skipped (or could not be kept);
   * `head` is its first `len` bytes (at most MCP_HEAD_MAX), where the
   * request's id usually is. */
  void (*oversized)(mcp_in_t *in, const char *head, size_t len);
  /* The end of input (or a read error): the client is gone. */
  void (*eof)(mcp_in_t *in);
} mcp_in_cbs_t;

struct mcp_in_s {
  uv_loop_t *loop;
  const mcp_in_cbs_t *cbs;
  void *data; /* the owner's */
  int kind;   /* MCP_IO_STREAM or MCP_IO_FILE */
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  uv_fs_t fs;
  int fs_busy;
  char chunk[65536];
  char *line; /* the line being assembled (only when it spans chunks) */
  size_t len;
  size_t cap;
  int discarding; /* an oversized line is being skipped up to its newline */
  int open;       /* the handle needs a uv_close */
  int stopped;
  int paused; /* M-MCP-8: the client is behind on reading our answers */
  /* M-MCP-10: while paused, a watch on a duplicate of fd 0 for the
   * client's hang-up, so that the end of input is seen even when it lies
   * behind requests not read yet. */
  uv_poll_t hup;
  int hup_fd;   /* the duplicate, -1 when none */
  int hup_open; /* the poll handle needs a uv_close */
  int draining; /* the client hung up: read to the end, pause no more */
};

/* ---------------------------------------------------------------------- */
/* stdout: messages written in order, completely                           */

typedef struct mcp_out_chunk_s mcp_out_chunk_t;
typedef struct mcp_out_s mcp_out_t;

/* What the output tells its owner, each callback receiving the output
 * (the owner's pointer in out->data). */
typedef struct {
  /* A write failed (or could not be queued): later ones are dropped. */
  void (*failed)(mcp_out_t *out);
  /* The output is closed (mcp_out_close once drained, or mcp_out_abort). */
  void (*closed)(mcp_out_t *out);
  /* M-MCP-8: more than MCP_OUT_HIGH_WATER bytes are queued (`full` 1), or
   * the queue drained to half of that (`full` 0; said after every write
   * that ends below it). */
  void (*backlog)(mcp_out_t *out, int full);
} mcp_out_cbs_t;

struct mcp_out_s {
  uv_loop_t *loop;
  const mcp_out_cbs_t *cbs; /* NULL before mcp_out_init */
  void *data;               /* the owner's */
  int kind;
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  uv_fs_t fs;
  int fs_busy;
  mcp_out_chunk_t *head; /* file mode: chunks not yet written */
  mcp_out_chunk_t *tail;
  size_t writes;    /* writes in flight */
  size_t queued;    /* bytes handed to uv_write or queued, not yet written */
  uint64_t drained; /* bytes written (or dropped) so far (M-MCP-10) */
  int open;
  int broken;            /* a write failed; later messages are dropped */
  unsigned long fail_at; /* tests: writes until one fails (0: none) */
  int closing;
};

enum { MCP_IO_STREAM = 1, MCP_IO_FILE = 2 };

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603
#define RPC_MISSING_CAPABILITY -32021
#define RPC_UNSUPPORTED_VERSION -32022

/* A JSON-RPC batch (2025-03-26 only) whose answers are being collected:
 * sent as one array once every request in it has been answered. */
typedef struct {
  json_t *answers;
  size_t pending; /* requests not yet answered, plus one while parsing */
} mcp_batch_t;

typedef struct mcp_task_s mcp_task_t;

/* A tools/call in progress. */
typedef struct mcp_call_s {
  uvt_tools_call_t req;
  mcp_server_t *server;
  json_t *id;
  int cancelled;
  /* Task-augmented (MCP Tasks): the request was answered with a
   * CreateTaskResult; the result goes to `task`.  `task_errors`: asked as
   * a task but no task started; the tool's failure is a JSON-RPC error. */
  mcp_task_t *task;
  int task_errors;
  int era;              /* of the request */
  int log_level;        /* 2026: the request's logLevel (index), or -1 */
  mcp_batch_t *batch;   /* the batch the request came in, or NULL */
  json_t *progress;     /* _meta.progressToken, or NULL (M-MCP-5) */
  uint64_t started_ms;  /* loop time of the request */
  uint64_t progress_ms; /* loop time of the last progress notification */
  /* M-TOOLS-18: the task the call reads (task_output, write_stdin), so
   * that its result does not also carry a notice of that task's end. */
  char task_id[UVT_ID_MAX];
  struct mcp_call_s *next;
  struct mcp_call_s *prev;
} mcp_call_t;

/* An MCP task (Tasks, 2025-11-25): a task-augmented tools/call, backed by
 * the registry task its run_command started.  Only these ids are known to
 * tasks/get, tasks/result, tasks/list and tasks/cancel. */
struct mcp_task_s {
  mcp_task_t *next; /* creation order */
  mcp_task_t *prev;
  mcp_call_t *call; /* the run_command call while it waits */
  char id[UVT_ID_MAX];
  uint64_t seq;        /* creation number; tasks/list cursors name it */
  int64_t created_ms;  /* epoch ms: the registry task's start */
  int64_t updated_ms;  /* epoch ms: the last status change seen */
  uint64_t ttl_ms;     /* granted */
  uint64_t expires_at; /* loop time (uv_now) */
  uvt_status_t status; /* last registry status seen */
  char *detail;        /* its detail, or NULL */
  int cancelled;       /* tasks/cancel accepted: stays "cancelled" */
  int expired;         /* the ttl ran out: unknown from now on */
  json_t *result;      /* the CallToolResult, once the call ended */
  json_t *error;       /* or the JSON-RPC error object it ended with */
  json_t *waiters;     /* ids of tasks/result requests waiting (array) */
  int era;             /* created by a 2025 or a 2026 request */
  char notified[16];   /* the status last sent in notifications/tasks/status */
};

/* A completion notice not yet shown in a tool result (M-MCP-2). */
typedef struct mcp_notice_s {
  struct mcp_notice_s *next;
  char text[1];
} mcp_notice_t;

typedef struct {
  const char *cwd;
  size_t output_cap_bytes;
  unsigned max_tasks;
  uint64_t grace_ms;
  size_t keep_finished;       /* finished, seen tasks kept before forgetting */
  uint64_t max_task_ttl_ms;   /* MCP Tasks: the longest ttl granted */
  size_t tasks_page_size;     /* MCP Tasks: tasks per tasks/list page */
  uint64_t shutdown_grace_ms; /* M-MCP-6: TERM -> KILL at shutdown */
  int64_t yield_ms;           /* M-TOOLS-6: run_command's yield; -1 default */
  size_t max_bytes;           /* M-TOOLS-8: output per result; 0 default */
  size_t max_lines;           /* M-TOOLS-15: lines per result; 0 default */
  const char *spill_dir;      /* M-TOOLS-10: NULL = the default one */
  uint64_t spill_max_bytes;   /* M-TOOLS-10: per task file; 0 default */
  uint64_t spill_max_total;   /* M-MCP-16: all files; 0 default */
  int keep_spill;             /* M-MCP-16: leave the files at exit */
  int no_spill;               /* M-TOOLS-17: no spill directory at all */
  char spill_default[4096];   /* the default directory made, or "" */
  char spill_ro[4096 + 16];   /* its workspace's .uvtasks, or "" (S-7) */
  const char *readonly[2];    /* the sandbox's readonly[]: spill_ro */
  int no_guardian;            /* M-MCP-7 off (tests of the bare server) */
  /* S-4 (sandbox.c): --sandbox, --allow-net, --writable. */
  int sandbox_on;
  uvt_sandbox_t sandbox;
  const char *writable[65];
  unsigned writable_n;
  char workspace[4096];     /* S-5: --cwd resolved at start */
  const char *pass_env[64]; /* M-MCP-14: --pass-env names */
  size_t pass_env_n;
  int cgroups;                 /* M-MCP-15: --cgroups (S-11: the default) */
  int no_cgroups;              /* S-11: --no-cgroups */
  uvt_process_limits_t limits; /* L-LIM-3: --limit-memory, -processes,
                                  -cpu */
  size_t max_unread_bytes;     /* M-MCP-11: unread bytes of ended tasks */
  int slurm;                   /* E-8: --slurm */
  const char *slurm_journal;   /* E-8: --slurm-journal FILE */
  /* E-13: --slurm-sbatch-allow NAME (repeatable): sbatch_args allowed. */
  const char *slurm_allow[32];
  size_t slurm_allow_n;
  /* E-10: the --pass-env entries, for the Slurm jobs too. */
  const char *const *pass_env_entries;
  const char *state_dir; /* D-7: --state-dir DIR, or NULL */
} mcp_config_t;

struct mcp_server_s {
  uv_loop_t *loop;
  mcp_config_t config;
  uvt_registry_t *reg;
  uvt_tools_t tools;
  uvt_agent_t agent;
  void *slurm; /* E-8: the Slurm engine (uvt_slurm_engine_t), or NULL */
  char session[64];
  mcp_in_t in;
  mcp_out_t out;
  uv_signal_t signals[4]; /* TERM, INT, HUP, QUIT (M-MCP-6) */
  int signals_open;
  uv_timer_t shutdown_timer; /* TERM -> KILL of every group at shutdown */
  int shutdown_timer_open;
  int input_ended;           /* end of stdin seen */
  int killed_all;            /* SIGKILL went to every group */
  uint64_t drain_seen;       /* M-MCP-10: out.drained at the last look */
  uint64_t drain_until;      /* loop time the answers' drain must end by */
  uv_timer_t progress_timer; /* M-MCP-5 */
  int progress_timer_open;
  int guardian_fd;     /* M-MCP-7: the pipe to the guardian, or -1 */
  int guardian_pid;    /* the guardian, until reaped (M-MCP-10) */
  uv_signal_t sigchld; /* reaps the guardian when it ends */
  int sigchld_open;
  uv_check_t guardian_check; /* tells the guardian of new groups */
  int guardian_check_open;
  uvt_watch_t guardian_watch;
  uvt_watch_t retention_watch; /* M-MCP-11: ends of the session's tasks */
  int retention_watching;
  int guardian_watching;
  json_t *guarded;     /* task ids whose session the guardian knows: id->pid */
  json_t *unguarded;   /* task ids whose pid is not known yet (array) */
  const char *version; /* 2025 era: the version initialize agreed on */
  /* wire.c hands each parsed message (an object, or an element of a batch)
   * here; set by main.c to rpc.c's dispatch, so that the wire calls no
   * method by name. */
  void (*on_message)(mcp_server_t *server, json_t *msg);
  mcp_batch_t *batch; /* the batch whose requests are being dispatched */
  int era;            /* era of the request being answered */
  int req_tasks;      /* 2026: the request opted into the Tasks extension */
  int req_log_level;  /* 2026: the request's logLevel, or -1 */
  mcp_call_t *calls;
  mcp_notice_t *notices;
  mcp_notice_t *notices_tail;
  /* M-TOOLS-18: while a result is built, the call whose result it is: its
   * own text shows the end of the tasks it read, so their end notices
   * stay out of it (and are spent). */
  const mcp_call_t *result_call;
  int log_level;     /* index into the syslog level names; below it is quiet */
  int tasks_enabled; /* the negotiated revision has Tasks */
  int parsing_task_call; /* argument errors are JSON-RPC errors */
  mcp_task_t *tasks;     /* MCP tasks, oldest first */
  mcp_task_t *tasks_tail;
  uint64_t task_seq;
  uv_timer_t ttl_timer;
  int ttl_timer_open;
  uvt_watch_t watch;
  int watching;
  int initialized;
  int shutting_down;
  int out_failed; /* a write failed: the exit is on its way */
  int registry_closed;
};

/* stdio.c: calls its owner only through the callbacks given at start. */
/* Start reading stdin; `cbs` (static) and `data` are the owner's. */
int mcp_in_start(mcp_in_t *in, uv_loop_t *loop, const mcp_in_cbs_t *cbs,
                 void *data);
void mcp_in_stop(mcp_in_t *in);
/* Pause and resume reading (M-MCP-8: a client that does not read). */
void mcp_in_pause(mcp_in_t *in);
void mcp_in_resume(mcp_in_t *in);
void mcp_in_close(mcp_in_t *in);
int mcp_out_init(mcp_out_t *out, uv_loop_t *loop, const mcp_out_cbs_t *cbs,
                 void *data);
/* Write `len` bytes (a message and its newline) after every earlier one. */
void mcp_out_write(mcp_out_t *out, const char *bytes, size_t len);
/* Close once every queued write has finished. */
void mcp_out_close(mcp_out_t *out);
/* Close now, cancelling queued writes (M-MCP-10).  Returns nonzero if a
 * file write is still running (it cannot be cancelled). */
int mcp_out_abort(mcp_out_t *out);

/* wire.c: JSON-RPC messages in and out. */
/* Send `msg` as one line and release it (into the batch being answered,
 * if any). */
void mcp_rpc_send(mcp_server_t *server, json_t *msg);
/* Answer `id` with `result` (released). */
void mcp_rpc_result(mcp_server_t *server, json_t *id, json_t *result);
/* Answer with an error; `id` NULL means null. */
void mcp_rpc_error(mcp_server_t *server, json_t *id, int code,
                   const char *message);
/* The same with a message of `len` bytes (a tool's text may hold NULs). */
void mcp_rpc_error_len(mcp_server_t *server, json_t *id, int code,
                       const char *message, size_t len);
/* The same with `data` (released). */
void mcp_rpc_error_data(mcp_server_t *server, json_t *id, int code,
                        const char *message, json_t *data);
/* The same with the message printf(fmt, arg). */
void mcp_rpc_errorf(mcp_server_t *server, json_t *id, int code, const char *fmt,
                    const char *arg);
/* A JSON string of `len` bytes, repaired to valid UTF-8 if needed; NUL
 * bytes are kept (sent as \u0000, M-MCP-8). */
json_t *mcp_rpc_string(const char *s, size_t len);
/* One answer fewer owed to batch `b` (NULL: none); the last one sends
 * the batch's array. */
void mcp_rpc_batch_release(mcp_server_t *server, mcp_batch_t *b);
/* One complete line from stdin (without its newline). */
void mcp_rpc_line(mcp_server_t *server, const char *line, size_t len);
/* A line longer than MCP_LINE_MAX was skipped. */
/* M-MCP-3: the error for a skipped line; its id, when `head` (the line's
 * first bytes) names one at the top level, else null. */
#define MCP_HEAD_MAX 4096
void mcp_rpc_oversized(mcp_server_t *server, const char *head, size_t len);

/* rpc.c: the methods of both protocol eras. */
/* One parsed message (an object, or an element of a batch). */
void mcp_rpc_message(mcp_server_t *server, json_t *msg);

/* notice.c (M-MCP-2): the tools' notice callback; the notices kept for
 * the next tool result freed (shown, or at exit). */
void mcp_rpc_notice(uvt_tools_t *tools, uvt_agent_t *owner, const char *text);
void mcp_rpc_free_notices(mcp_server_t *server);
/* The log level (an index into RFC 5424's names, lowest first) of
 * "notice": a client at it or below hears notices at once. */
#define MCP_LOG_LEVEL_NOTICE 2

/* call.c: tools/call. */
void mcp_rpc_tools_call(mcp_server_t *server, json_t *id, json_t *params);
void mcp_rpc_call_free(mcp_call_t *call);

/* result.c: a CallToolResult of one text block of `len` bytes (a tool's
 * text may hold NULs); `notices` nonzero puts the pending notices first
 * (and spends them), less those about a task whose end the text shows
 * while server->result_call is set (M-TOOLS-18). */
json_t *mcp_rpc_tool_result(mcp_server_t *server, const char *text, size_t len,
                            int is_error, int notices);

/* submit.c (E-8), built with the Slurm engine (UVT_MCP_SLURM). */
int mcp_slurm_init(mcp_server_t *server);
void mcp_slurm_close(mcp_server_t *server);
json_t *mcp_slurm_schema(void);
/* E-12, E-14: tools/call of submit_job or cluster_info; answers `id` now
 * (a refusal) or once the engine answered.  Returns 0 if `name` was one
 * of them, -1 if not (nothing answered). */
int mcp_slurm_call(mcp_server_t *server, const char *name, json_t *id,
                   json_t *args);
json_t *mcp_slurm_info_schema(void);

/* retention.c (M-MCP-11) */
/* Forget the oldest ended tasks past --keep-finished or
 * --max-unread-bytes that may go (no MCP task holds them, nothing they
 * started still runs or reads their output); the next tool result's
 * notice names them. */
void mcp_retention_bound(mcp_server_t *server);
/* P-LEFT-1: does ended task `id` still have processes running in its
 * session (counted against --max-tasks, never forgotten)? */
int mcp_retention_leftovers(mcp_server_t *server, const char *id);
/* Look at the bounds whenever a task of the session ends. */
int mcp_retention_init(mcp_server_t *server);
void mcp_retention_stop(mcp_server_t *server);

/* tasks.c: MCP Tasks */
int mcp_tasks_init(mcp_server_t *server);
/* Stop the change feed and the ttl timer (shutdown). */
void mcp_tasks_stop(mcp_server_t *server);
/* Free every task record (after the loop ended). */
void mcp_tasks_free(mcp_server_t *server);
/* The task with id `id` a client may see, or NULL. */
mcp_task_t *mcp_task_find(mcp_server_t *server, const char *id);
/* A task-augmented tools/call whose run_command started: make the task and
 * answer `id` with the CreateTaskResult.  Returns 0 or UV_ENOMEM (nothing
 * answered). */
int mcp_task_create(mcp_server_t *server, mcp_call_t *call, json_t *id,
                    double ttl_ms, int ttl_given);
/* The call of `task` ended: keep its result, answer tasks/result waiters. */
void mcp_task_call_done(mcp_task_t *task, int status);
/* notifications/cancelled for `request_id`: drop a waiting tasks/result.
 * Returns 1 if one was dropped. */
int mcp_tasks_cancel_request(mcp_server_t *server, json_t *request_id);
/* Add "execution" to each tool of a tools/list answer. */
void mcp_tasks_tools_list(mcp_server_t *server, json_t *tools);

/* S-4 (sandbox.c): one of the sandbox options at argv[i] (`val` the next
 * word, or NULL): 0 = not one of them, 1 or 2 = the words it took, -1 =
 * a bad or missing value. */
int mcp_sandbox_arg(mcp_config_t *c, const char *opt, const char *val);
/* S-5: fix the workspace (--cwd, else the current directory, resolved
 * with symlinks followed).  0, or -1 with a message on stderr. */
int mcp_sandbox_start(mcp_config_t *c);

/* durable.c (D-7): --state-dir.  The session kept in the directory (or
 * `fresh`, kept there from now on): 0 or -1 (said on stderr); the tasks
 * taken back and the notice naming them; the tool description. */
int mcp_durable_session(mcp_server_t *server, const char *fresh);
int mcp_durable_init(mcp_server_t *server);
void mcp_durable_describe(const mcp_server_t *server, json_t *tools);
/* Add the sandbox's profile to the command tools' descriptions. */
void mcp_sandbox_describe(const mcp_server_t *server, json_t *tools);
/* L-LIM-3 (limits.c): --limit-memory SIZE, --limit-processes N,
 * --limit-cpu PCT: how many words it took (2), 0 (not a limit option) or
 * -1 (a bad value).  The tools' descriptions then state the limits. */
int mcp_limits_arg(mcp_config_t *c, const char *opt, const char *val);
void mcp_limits_describe(const mcp_server_t *server, json_t *tools);
/* L-LIM-3: a Slurm job's share of the server's limits: --mem is the
 * memory limit in MiB (rounded up), --cpus-per-task the CPU limit in whole
 * CPUs (rounded up: Slurm hands out whole CPUs); a call's mem_mb and cpus
 * (0: not given) may ask for less, never more.  The process limit has no
 * per-job counterpart in Slurm and is not passed.  0 with *mem_mb and
 * *cpus set, or -1 with `why` (a tool error's text) written. */
int mcp_limits_slurm(const mcp_config_t *c, uint64_t *mem_mb, uint64_t *cpus,
                     char *why, size_t size);
/* The "tasks" server capability. */
json_t *mcp_tasks_capability(void);
/* tasks/get, tasks/result, tasks/list, tasks/cancel. */
void mcp_tasks_request(mcp_server_t *server, const char *method, json_t *id,
                       json_t *params);

/* Nonzero if `t` is an MCP task that `era`'s tasks methods may see. */
int mcp_task_visible(const mcp_task_t *t, int era);
/* 2026 era: tasks/get, tasks/update, tasks/cancel. */
void mcp_tasks_request_2026(mcp_server_t *server, const char *method,
                            json_t *id, json_t *params);
/* The 2026 flat CreateTaskResult for a run_command call (cf.
 * mcp_task_create). */
int mcp_task_create_2026(mcp_server_t *server, mcp_call_t *call, json_t *id);

/* progress.c (M-MCP-5) */
int mcp_progress_init(mcp_server_t *server);
/* A call with a progressToken started or ended: arm or stop the timer. */
void mcp_progress_update(mcp_server_t *server);
void mcp_progress_stop(mcp_server_t *server);

/* guardian.c (M-MCP-7) */
/* Fork the guardian; returns 0 or a libuv error (then there is none). */
int mcp_guardian_start(mcp_server_t *server);
int mcp_guardian_init(mcp_server_t *server);
/* A task was registered: tell the guardian its session once known. */
void mcp_guardian_task(mcp_server_t *server, const char *id);
/* Forget sessions that have no process left. */
void mcp_guardian_prune(mcp_server_t *server);
void mcp_guardian_stop(mcp_server_t *server);
/* M-MCP-15: the registry's cgroup directory (--cgroups). */
void mcp_guardian_cgroup(mcp_server_t *server, const char *dir);
/* Every task was stopped: the guardian forgets them; close the pipe. */
void mcp_guardian_release(mcp_server_t *server);
/* M-MCP-10: close the SIGCHLD handle (the loop ends); after the loop,
 * reap the guardian. */
void mcp_guardian_close(mcp_server_t *server);
void mcp_guardian_wait(mcp_server_t *server);

/* main.c */
/* Begin the orderly exit (M-MCP-4, M-MCP-6); idempotent. */
void mcp_server_shutdown(mcp_server_t *server, const char *why);
/* SIGKILL to every task's group now (M-MCP-6). */
void mcp_server_kill_all(mcp_server_t *server);
/* A write to stdout failed: input stops now and the orderly exit begins
 * from the loop, never inside the handler that wrote. */
void mcp_server_out_failed(mcp_server_t *server);
/* stdout was closed (M-MCP-10: the hard limit ends there). */
void mcp_server_out_closed(mcp_server_t *server);

#endif
