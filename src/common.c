/* The bottom of the core: wake-ups (uvt__kick, uvt__update_ref), the
 * clock (uvt__now_ms) and logging (uvt__log, and uvt_log for producers).
 * Every file of the core may call these; this file calls nothing of the
 * core, so it ties no file to the registry's top (registry.c). */
#include <stdarg.h>
#include <stdio.h>

#include "uvt-internal.h"

int64_t uvt__now_ms(void) {
  uv_timeval64_t tv;
  if (uv_gettimeofday(&tv) != 0)
    return 0;
  return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void vlog(const uvt_registry_t *reg, int level, const char *fmt,
                 va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  if (reg->options.log != NULL)
    reg->options.log(level, buf, reg->options.log_data);
  else
    fprintf(stderr, "uvtasks: %s\n", buf);
}

void uvt__log(const uvt_registry_t *reg, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(reg, level, fmt, ap);
  va_end(ap);
}

/* The producers' door to the same hook (uvtasks/producer.h). */
void uvt_log(const uvt_registry_t *reg, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(reg, level, fmt, ap);
  va_end(ap);
}

void uvt__update_ref(uvt_registry_t *reg) {
  int pending;
  if (reg->handles_closing)
    return;
  pending = reg->metrics.live > 0 || reg->closing ||
            !uvt__list_empty(&reg->deferred) ||
            !uvt__list_empty(&reg->dispatch) ||
            !uvt__list_empty(&reg->agents_done) || reg->changes != NULL;
  if (pending)
    uv_ref((uv_handle_t *)&reg->async);
  else
    uv_unref((uv_handle_t *)&reg->async);
}

void uvt__kick(uvt_registry_t *reg) {
  if (reg->handles_closing)
    return;
  uv_ref((uv_handle_t *)&reg->async);
  uv_async_send(&reg->async);
}
