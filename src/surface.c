/* Control surfaces (R-SURF-1, R-DONE-5): a start is refused while none is
 * attached, the loud guard against a deployment that can start background
 * work with no way to collect or stop it. */
#include "uvt-internal.h"

int uvt_surface_attach(uvt_registry_t *reg, uvt_surface_t *s,
                       const char *name) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  char *copy;
  if (reg == NULL || s == NULL || name == NULL || name[0] == '\0')
    return UV_EINVAL;
  if (s->attached_ == UVT__SURFACE_ATTACHED && s->registry != NULL)
    return UV_EBUSY; /* R-BUSY-1 */
  if (reg->closing)
    return UVT_ECLOSING;
  copy = uvt__strdup(name);
  if (copy == NULL)
    return UV_ENOMEM;
  s->name = copy;
  s->registry = reg;
  s->attached_ = UVT__SURFACE_ATTACHED;
  uvt__list_init(&s->link_);
  uvt__list_insert_tail(&reg->surfaces, &s->link_);
  reg->surface_count++;
  return 0;
}

void uvt_surface_detach(uvt_surface_t *s) {
  if (s == NULL || s->attached_ != UVT__SURFACE_ATTACHED || s->registry == NULL)
    return;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY_VOID(s->registry);
  uvt__list_remove(&s->link_);
  s->registry->surface_count--;
  uvt__free((char *)s->name);
  s->name = NULL;
  s->attached_ = UVT__SURFACE_DETACHED;
}
