/* Leaf helper: an append-only journal of text lines in a file held by
 * descriptor (S-7), shared by the producers that take work back after a
 * restart: the process producer's durable tasks (D-3, src/process/
 * durable.c) and the Slurm engine (E-5).  It knows nothing of what the
 * lines mean.
 *
 * The file is opened relative to a directory descriptor with O_NOFOLLOW,
 * so no rename or symlink another process makes in that directory can
 * redirect it; its owner must be the effective user.  Each line is
 * appended with one write(2) (O_APPEND), so a writer killed between two
 * lines leaves whole lines; a write cut short (a full disk) is taken back
 * with ftruncate, so no later line is glued to a torn one; and a load
 * ignores (and cuts away) a last line that has no newline.  Lines are not
 * fsync'd one by one (uvt__journal_sync() does it when a caller needs it:
 * work that outlives the machine, as a Slurm job does); a compaction's
 * new file is fsync'd before it is renamed over the old one, and the
 * directory after, so a power loss leaves the old journal or the new one,
 * never an empty file.
 *
 * One writer at a time: with `lock`, the open takes an exclusive flock(2)
 * on "<name>.lock" beside it (kept across compactions, which replace the
 * journal's inode) and a second open fails with UV_EBUSY, in this process
 * or another, until the first closes or its process ends.
 *
 * Fields: a line is words apart by one space; uvt__journal_enc() writes
 * a string as one word ("=" then the bytes, with space, '%', control
 * bytes and DEL as %XX), so labels and commands of any bytes fit.
 *
 * Errors are negative errno values (libuv's codes on Unix).  Not
 * thread-safe: callers serialise (the Slurm engine holds its mutex). */
#ifndef UVT_LEAF_JOURNAL_H
#define UVT_LEAF_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int dirfd;      /* the directory (owned only after _open_path) */
  int owns_dir;   /* dirfd is ours to close */
  int fd;         /* the journal, O_APPEND; -1 once broken or closed */
  int lock_fd;    /* "<name>.lock" with our flock, or -1 */
  char name[256]; /* the journal's file name in dirfd */
  size_t lines;   /* whole lines in the file (loaded and appended) */
  int slots;      /* records are rewritten in place (uvt__journal_slots) */
} uvt__journal_t;

/* Open (creating, mode 0600) `name` in `dirfd`; `lock`: take the writer's
 * lock first.  `name` is one path component (no '/'), at most 250 bytes.
 * Returns 0, UV_EBUSY (another writer holds the lock), UV_EINVAL (a bad
 * name), UV_EPERM (the file is not a regular file owned by the effective
 * user), or the error of openat/flock (UV_ELOOP for a symlink). */
int uvt__journal_open(uvt__journal_t *j, int dirfd, const char *name, int lock);
/* The same for a path: its directory is opened (O_DIRECTORY|O_NOFOLLOW on
 * the last component) and kept until uvt__journal_close(). */
int uvt__journal_open_path(uvt__journal_t *j, const char *path, int lock);
/* Close everything; accepts a closed or zeroed journal (fd -1 or 0 with
 * lines 0 is not told apart: zero it with uvt__journal_init first). */
void uvt__journal_init(uvt__journal_t *j);
void uvt__journal_close(uvt__journal_t *j);

/* Append `len` bytes and a newline in one write(2); `line` must hold no
 * newline.  Returns 0, UV_EBADF (closed or broken), or the write's error
 * (UV_ENOSPC, UV_EDQUOT, UV_EIO...): then nothing of the line stays. */
int uvt__journal_append(uvt__journal_t *j, const char *line, size_t len);
/* printf into a line and append it (at most 64 KiB). */
int uvt__journal_appendf(uvt__journal_t *j, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Records in place (the Slurm engine's fixed-size records, E-15): the
 * journal, and every file a compaction makes for it, is written with
 * uvt__journal_write_at() at an offset the caller chooses, not appended
 * to.  A record that never crosses a 512-byte boundary is written whole
 * or not at all by a host that dies (sector writes are atomic); appends
 * stay possible only inside a compaction's emit.  0 or fcntl's error. */
int uvt__journal_slots(uvt__journal_t *j);
/* One pwrite(2) of `len` bytes at `off` (after uvt__journal_slots()).
 * Returns 0, UV_EBADF, UV_EINVAL (not in slots mode), UV_EIO (a short
 * write), or the write's error (UV_ENOSPC...). */
int uvt__journal_write_at(uvt__journal_t *j, uint64_t off, const char *buf,
                          size_t len);
/* fdatasync the journal: 0 or an error. */
int uvt__journal_sync(uvt__journal_t *j);

/* Call `fn(arg, line, len)` for every whole line from the start (line is
 * NUL-terminated in place of its newline and may be changed by fn); a
 * last line without a newline (a writer killed in its write) is skipped
 * and cut off the file.  A nonzero return of fn stops the load and is
 * returned.  Returns 0, UV_ENOMEM, or the error of reading. */
typedef int (*uvt__journal_line_fn)(void *arg, char *line, size_t len);
int uvt__journal_read(uvt__journal_t *j, uvt__journal_line_fn fn, void *arg);

/* Replace the journal with the lines `emit` appends to the journal it is
 * handed (a new file "<name>.tmp", written, fsync'd, renamed over the
 * journal, the directory fsync'd).  A failure before the rename leaves the
 * old journal as it was (the temporary file is removed); emit's nonzero
 * return aborts the same way.  Returns 0 or the error. */
typedef int (*uvt__journal_emit_fn)(void *arg, uvt__journal_t *out);
int uvt__journal_compact(uvt__journal_t *j, uvt__journal_emit_fn emit,
                         void *arg);

/* A string as one word: "=" and the bytes, %XX for space, '%', bytes
 * below 0x21 and 0x7f.  Writes at most `size` bytes (NUL included) and
 * returns the length the whole word needs (as snprintf: a result >= size
 * means it was cut, and then dst holds the longest prefix of whole units:
 * never half a %XX).  At most 3 * len + 2 bytes are needed. */
size_t uvt__journal_enc(char *dst, size_t size, const char *src, size_t len);
/* Decode a word made by uvt__journal_enc in place (NUL-terminated);
 * returns its length, or -1 when it is not such a word. */
long uvt__journal_dec(char *word);
/* Split `line` in place into at most `max` words (apart by single
 * spaces); returns how many. */
size_t uvt__journal_words(char *line, char **words, size_t max);

/* Tests only: when set, consulted before each write (op 'a' an append,
 * 'c' a compaction's file, 'r' its rename); a nonzero return is taken as
 * that errno (ENOSPC for a full disk); 'w' a write_at.  NULL otherwise. */
extern int (*uvt__journal_fault)(const char *name, int op);

#endif /* UVT_LEAF_JOURNAL_H */
