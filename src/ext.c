/* Per-registry producer contexts (uvt_context_t of uvtasks/producer.h).
 *
 * A producer that needs state of its own per registry (threads, a signal
 * watch, a cache) embeds a uvt_context_t, looks it up by its key and adds it
 * once.  Registry close shuts every context down after the last record
 * was dropped and before the registry's own handles close, so whatever a
 * context holds (handles, threads) counts towards quiescence (L-1). */
#include "uvt-internal.h"

uvt_context_t *uvt_context_find(const uvt_registry_t *reg, const void *key) {
  if (reg == NULL || uvt__off_loop(reg, __func__)) /* P-THREAD-1 */
    return NULL;
  uvt_context_t *e;
  for (e = reg->exts; e != NULL; e = e->next_)
    if (e->key == key)
      return e;
  return NULL;
}

int uvt_context_add(uvt_registry_t *reg, uvt_context_t *ext) {
  if (reg == NULL || ext == NULL || ext->key == NULL || ext->close == NULL)
    return UV_EINVAL;
  UVT_LOOP_ONLY(reg); /* P-THREAD-1 */
  if (reg->closing || reg->ext_state != UVT__EXT_OPEN)
    return UVT_ECLOSING;
  ext->reg = reg;
  ext->next_ = reg->exts;
  reg->exts = ext;
  return 0;
}

static void ext_done(uvt_context_t *ext) {
  uvt_registry_t *reg = ext->reg;
  /* `ext` may be freed by its producer once this returns; not touched
   * again. */
  if (--reg->exts_closing > 0)
    return;
  reg->ext_state = UVT__EXT_CLOSED;
  reg->exts_closed(reg);
}

int uvt__ext_close_all(uvt_registry_t *reg,
                       void (*closed)(uvt_registry_t *reg)) {
  uvt_context_t *e;
  uvt_context_t *next;

  if (reg->ext_state == UVT__EXT_CLOSED)
    return 0;
  if (reg->ext_state == UVT__EXT_CLOSING)
    return 1;
  reg->ext_state = UVT__EXT_CLOSING;
  reg->exts_closed = closed;
  /* Held by this sweep, so a context that finishes at once (inside its
   * close) cannot end the close early. */
  reg->exts_closing = 1;
  e = reg->exts;
  reg->exts = NULL;
  for (; e != NULL; e = next) {
    next = e->next_;
    reg->exts_closing++;
    e->close(e, ext_done);
  }
  if (--reg->exts_closing > 0)
    return 1;
  reg->ext_state = UVT__EXT_CLOSED;
  return 0;
}
