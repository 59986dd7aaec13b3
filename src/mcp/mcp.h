/* uvtasks-mcp: a Model Context Protocol server over stdio (SPEC §5,
 * M-MCP-1..4).  Internal header of the executable. */
#ifndef UVTASKS_MCP_H
#define UVTASKS_MCP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "uvtasks.h"
#include "uvtasks/tools.h"

/* Longest message line accepted, in bytes (M-MCP-3). */
#define MCP_LINE_MAX (4u * 1024u * 1024u)

/* Finished tasks whose end the client has seen, kept by default. */
#define MCP_KEEP_FINISHED 100

/* The protocol version answered when the client's is not one we speak. */
#define MCP_PROTOCOL_LATEST "2025-11-25"

typedef struct mcp_server_s mcp_server_t;

/* ---------------------------------------------------------------------- */
/* stdin: one message per line                                             */

typedef struct {
  mcp_server_t *server;
  int kind; /* MCP_IO_STREAM or MCP_IO_FILE */
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
} mcp_in_t;

/* ---------------------------------------------------------------------- */
/* stdout: messages written in order, completely                           */

typedef struct mcp_out_chunk_s mcp_out_chunk_t;

typedef struct {
  mcp_server_t *server;
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
  size_t writes; /* writes in flight */
  int open;
  int broken; /* a write failed; later messages are dropped */
  int closing;
} mcp_out_t;

enum { MCP_IO_STREAM = 1, MCP_IO_FILE = 2 };

/* A tools/call in progress. */
typedef struct mcp_call_s {
  uvt_tools_call_t req;
  mcp_server_t *server;
  json_t *id;
  int cancelled;
  struct mcp_call_s *next;
  struct mcp_call_s *prev;
} mcp_call_t;

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
  size_t keep_finished; /* finished, seen tasks kept before forgetting */
} mcp_config_t;

struct mcp_server_s {
  uv_loop_t *loop;
  mcp_config_t config;
  uvt_registry_t *reg;
  uvt_tools_t tools;
  uvt_agent_t agent;
  char session[64];
  mcp_in_t in;
  mcp_out_t out;
  uv_signal_t sigterm;
  uv_signal_t sigint;
  int signals_open;
  mcp_call_t *calls;
  mcp_notice_t *notices;
  mcp_notice_t *notices_tail;
  int log_level; /* index into the syslog level names; below it is quiet */
  int initialized;
  int shutting_down;
  int registry_closed;
};

/* stdio.c */
int mcp_in_start(mcp_in_t *in, mcp_server_t *server);
void mcp_in_stop(mcp_in_t *in);
void mcp_in_close(mcp_in_t *in);
int mcp_out_init(mcp_out_t *out, mcp_server_t *server);
/* Write `len` bytes (a message and its newline) after every earlier one. */
void mcp_out_write(mcp_out_t *out, const char *bytes, size_t len);
/* Close once every queued write has finished. */
void mcp_out_close(mcp_out_t *out);

/* rpc.c */
/* One complete line from stdin (without its newline). */
void mcp_rpc_line(mcp_server_t *server, const char *line, size_t len);
/* A line longer than MCP_LINE_MAX was skipped. */
void mcp_rpc_oversized(mcp_server_t *server);
/* The tools' notice callback. */
void mcp_rpc_notice(uvt_tools_t *tools, uvt_agent_t *owner, const char *text);
void mcp_rpc_free_notices(mcp_server_t *server);

/* main.c */
/* Begin the orderly exit (M-MCP-4); idempotent. */
void mcp_server_shutdown(mcp_server_t *server, const char *why);

#endif
