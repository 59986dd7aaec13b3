/* Internal declarations of the process producer (SPEC.md §3). */
#ifndef UVTASKS_PROCESS_INTERNAL_H
#define UVTASKS_PROCESS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "uvt-internal.h"
#include "uvtasks.h"
#include "uvtasks/process.h"

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
} uvt__outbuf_t;

/* Where collected output goes: 0 or a negative error. */
typedef int (*uvt__sink_fn)(void *ctx, const void *bytes, size_t len);

void uvt__outbuf_init(uvt__outbuf_t *b, size_t cap);
/* Append `n` bytes, dropping the oldest unread ones beyond the cap.  Never
 * fails: when memory runs out the bytes that do not fit are dropped. */
void uvt__outbuf_push(uvt__outbuf_t *b, const char *data, size_t n);
void uvt__outbuf_free(uvt__outbuf_t *b);
/* Where the next bytes of the stream go, so a read system call writes them
 * in place: sets *at and returns a contiguous span of up to `want` bytes
 * (growing the ring towards the cap first when it is short of room), or 0
 * when there is no memory for a ring.  With the ring full at the cap the
 * span is the oldest unread bytes, which the bytes written there replace.
 * Nothing may touch `b` before the matching commit. */
size_t uvt__outbuf_space(uvt__outbuf_t *b, size_t want, char **at);
/* `n` bytes (at most the span) were written at the span: append them,
 * counting the unread bytes they replaced as dropped. */
void uvt__outbuf_commit(uvt__outbuf_t *b, size_t n);

/* Hand what is unread to `sink` in the read format of P-OUT-1..3 and
 * consume it; a stream not `*_final` keeps an incomplete trailing UTF-8
 * sequence for later.  Nothing is consumed if `sink` fails (its error is
 * returned). */
int uvt__output_collect(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                        int err_final, uvt__sink_fn sink, void *ctx);

/* The read of uvt__output_collect without a copy, when it would be exactly
 * a prefix of the stdout ring starting at its block (no notice, no stderr)
 * and fills at least half of it: the ring becomes the text (*text, *len;
 * *size bytes allocated, more than *len) and the stream gets a new ring of
 * the same size (now if it holds bytes of an incomplete character, else at
 * the next uvt__outbuf_space).  Returns 1 then, or 0 with nothing changed (use
 * uvt__output_collect). */
int uvt__output_take(uvt__outbuf_t *out, int out_final, uvt__outbuf_t *err,
                     int err_final, char **text, size_t *len, size_t *size);

/* ---- process.c -------------------------------------------------------- */

/* Nonzero: detect the leader's exit through SIGCHLD as if pidfds were not
 * available (for tests of that path).  Loop thread; set between tasks. */
extern int uvt__process_no_pidfd;

/* M-MCP-5: the last unread line of task `id`'s output (stdout, else
 * stderr; after its last carriage return), cut to `size` - 1 bytes and
 * NUL-terminated in `buf` ("" when there is none), without consuming
 * anything.  The bytes are as the command wrote them (not UTF-8-checked).
 * Returns 0, UV_EINVAL (NULL or zero-sized buf, not a live process task),
 * or the lookup's UVT_ENOTASK / UVT_EFOREIGN.  Loop thread. */
int uvt__process_last_line(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller, char *buf, size_t size);

/* ---- spawn.c: everything that talks to the operating system ----------- */

typedef struct {
  const char *command;     /* shell mode, or NULL */
  const char *const *argv; /* argv mode (PATH lookup), or NULL */
  const char *cwd;         /* NULL = inherit */
  const char *const *env;  /* extra entries, or NULL */
  int stdin_fd;            /* -1 = /dev/null */
  int stdout_fd;
  int stderr_fd;
} uvt__spawn_req_t;

/* Spawn the child in its own session with stdio from `req` and no other
 * descriptor (P-SPAWN-1..5).  Returns 0 and *pid_out, or a libuv error with
 * no child left behind. */
int uvt__spawn(const uvt__spawn_req_t *req, pid_t *pid_out);

/* A pidfd for `pid` (close-on-exec), or a libuv error. */
int uvt__pidfd_open(pid_t pid);

/* A memfd (close-on-exec) holding `len` bytes, positioned at 0, or a
 * libuv error. */
int uvt__stdin_file(const char *data, size_t len);

/* 1 if some member of process group `pgid` is alive (a zombie is dead),
 * else 0. */
int uvt__group_alive(pid_t pgid);

/* Kill the group with SIGKILL and reap the leader (blocking): the undo of a
 * start that failed after the spawn. */
void uvt__spawn_abort(pid_t pid);

#endif
