/* Memory given back after bursts of output (issue #12).
 *
 * A task's output lives in rings that grow by doubling up to the cap, then
 * in the text a read hands over or in the outcome the registry keeps until
 * the record is dropped.  With glibc these blocks come from the heap once
 * the first large block was freed (its mmap threshold rises to the size of
 * what was freed, up to 32 MiB), and a heap gives memory back only from
 * its top: after 200 tasks of `seq 1 100000` were read and forgotten,
 * uvtasks-mcp held 260-290 MB of free heap, and the in-process burst of
 * bench-output held 20 times its idle size.
 *
 * Rings of our own (mmap for large sizes) would not have been enough: the
 * text of a read and the outcome are handed to the host and the registry,
 * which free them with the library's allocator, and taking the ring over as
 * the read's text (uvt__output_take) is what keeps reads cheap.  So the
 * producer counts the large blocks (64 KiB and more) that it frees or hands
 * over to be freed soon (rings at settle, read texts, the outcome when its
 * record is dropped), and once 4 MiB were counted it asks the allocator to
 * give free pages back (malloc_trim, which also releases pages inside the
 * heap) when the burst is over: 100 ms after the last such block, or at
 * most 1 s after the first while blocks keep coming, and at registry close.
 * The trim is one call on the loop thread (about 0.1 ms for a heap of a
 * few hundred MB of free blocks; bench-output measures the burst).  It
 * touches only free memory, so it is harmless to the host's own blocks.
 * Without glibc (musl gives large blocks back by itself) nothing is done. */
#include "process-internal.h"

#if defined(__GLIBC__)
#include <malloc.h>
#define HAVE_TRIM 1
#else
#define HAVE_TRIM 0
#endif

/* Blocks smaller than this are reused by the allocator as they are. */
#define TRIM_MIN_BLOCK (64 * 1024)
/* Trim once this much was counted... */
#define TRIM_AFTER_BYTES (4u << 20)
/* ...and no block came for this long, */
#define TRIM_QUIET_MS 100
/* or this long after the first one. */
#define TRIM_MAX_DELAY_MS 1000

unsigned uvt__process_trims;

static void trim_now(uvt__procs_t *ps) {
  ps->trim_bytes = 0;
  ps->trim_first_ns = 0;
#if HAVE_TRIM
  malloc_trim(0);
#endif
  uvt__process_trims++;
}

static void on_trim_timer(uv_timer_t *t) {
  trim_now(t->data);
}

void uvt__trim_note(uvt__procs_t *ps, size_t bytes) {
  uint64_t now;

  if (ps == NULL || ps->closing || bytes < TRIM_MIN_BLOCK)
    return;
  now = uv_hrtime();
  if (ps->trim_bytes == 0)
    ps->trim_first_ns = now;
  ps->trim_bytes += bytes;
  if (ps->trim_bytes < TRIM_AFTER_BYTES)
    return;
  if (!ps->trim_init) {
    if (uv_timer_init(ps->loop, &ps->trim_timer) != 0)
      return;
    ps->trim_timer.data = ps;
    uv_unref((uv_handle_t *)&ps->trim_timer);
    ps->trim_init = 1;
  }
  if (now - ps->trim_first_ns >= (uint64_t)TRIM_MAX_DELAY_MS * 1000000u) {
    uv_timer_stop(&ps->trim_timer);
    trim_now(ps);
    return;
  }
  /* A quiet period from now (R-TIME-1: from the call). */
  uv_update_time(ps->loop);
  uv_timer_start(&ps->trim_timer, on_trim_timer, TRIM_QUIET_MS, 0);
}

unsigned uvt__trim_close(uvt__procs_t *ps, uv_close_cb on_closed) {
  if (ps->trim_bytes >= TRIM_AFTER_BYTES)
    trim_now(ps);
  if (!ps->trim_init)
    return 0;
  ps->trim_init = 0;
  uv_close((uv_handle_t *)&ps->trim_timer, on_closed);
  return 1;
}
