/* P-THREAD-1: the registry is the loop thread's alone.  Every public
 * function that touches it refuses a call from any other thread before
 * touching anything, with UVT_ETHREAD and a log line, rather than racing
 * the loop over the heap.  One comparison of thread ids per call. */
#include "uvt-internal.h"

int uvt__off_loop(const uvt_registry_t *reg, const char *fn) {
  uv_thread_t self;

  if (reg == NULL)
    return 0;
  self = uv_thread_self();
  if (uv_thread_equal(&self, &reg->loop_thread))
    return 0;
  uvt__log(reg, UVT_LOG_WARN,
           "%s called from a thread other than the loop's: refused "
           "(UVT_ETHREAD)",
           fn);
  return 1;
}

int uvt_off_loop(const uvt_registry_t *reg, const char *fn) {
  return uvt__off_loop(reg, fn);
}
