/* Starting a task (R-START-1..6): the checks, the commit, and a disposal
 * begun inside `run`.  The record itself is task.c's. */
#include <string.h>

#include "leaf/ids.h"
#include "uvt-internal.h"

static int valid_kind(const char *kind) {
  size_t n = 0;
  const unsigned char *p;
  for (p = (const unsigned char *)kind; *p != '\0'; p++, n++)
    if (*p <= 0x20 || *p >= 0x7f)
      return 0;
  return n >= 1 && n <= UVT_KIND_MAX;
}

/* R-OWN-1: the owner must be the exact live object registered under its
 * id.  Registration refuses a live id (R-OWN-3), so "this object is
 * registered here right now" is the same test. */
static int check_owner(uvt_registry_t *reg, const uvt_agent_t *owner) {
  if (owner->registry == reg && owner->state_ == UVT__AGENT_DISPOSING)
    return UVT_ECLOSING;
  if (owner->registry != reg || owner->state_ != UVT__AGENT_REGISTERED)
    return UVT_ESTALE;
  return 0;
}

static uvt__kind_t *kind_find_or_add(uvt_registry_t *reg, const char *kind) {
  struct uvt__hentry *e = uvt__index_find(&reg->kinds_by_name, kind);
  uvt__kind_t *k;
  size_t n;
  if (e != NULL)
    return uvt__container_of(e, uvt__kind_t, hentry);
  if (uvt__index_reserve(&reg->kinds_by_name, reg->kinds_by_name.count + 1))
    return NULL;
  n = strlen(kind);
  k = uvt__malloc(sizeof(*k) + n);
  if (k == NULL)
    return NULL;
  memcpy(k->name, kind, n + 1);
  k->counter = 0;
  uvt__index_insert(&reg->kinds_by_name, &k->hentry, k->name);
  return k;
}

static void write_id_number(uvt_task_t *t, uint64_t n) {
  char digits[21];
  int len = 0;
  char *p = uvt__task_id(t) + t->id_prefix_len;
  do {
    digits[len++] = (char)('0' + n % 10);
    n /= 10;
  } while (n > 0);
  while (len > 0)
    *p++ = digits[--len];
  *p = '\0';
}

/* R-START-4: the counter moves up only (producer.h). */
int uvt_reserve_ids(uvt_registry_t *reg, const char *kind, uint64_t n) {
  UVT_LOOP_ONLY(reg);
  uvt__kind_t *k;
  if (reg == NULL || kind == NULL || !valid_kind(kind))
    return UV_EINVAL;
  if (n == 0)
    return 0;
  if ((k = kind_find_or_add(reg, kind)) == NULL)
    return UV_ENOMEM;
  if (k->counter < n)
    k->counter = n;
  return 0;
}

int uvt_start(uvt_registry_t *reg, const uvt_spec_t *spec,
              char id_out[UVT_ID_MAX]) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__kind_t *kind;
  uvt_task_t *t;
  uvt_agent_t *owner;
  unsigned live;
  uint64_t wanted = 0;
  int err;

  if (reg == NULL || spec == NULL)
    return UV_EINVAL;
  if (reg->closing)
    return UVT_ECLOSING;
  /* R-START-1, in order: fence, validation, owner, limit, allocations. */
  if (reg->surface_count == 0)
    return UVT_ENOSURFACE;
  if (spec->kind == NULL || !valid_kind(spec->kind) || spec->label == NULL ||
      spec->label[0] == '\0' || spec->run == NULL)
    return UV_EINVAL;
  if (spec->id != NULL) {
    if ((wanted = uvt__id_number(spec->kind, spec->id)) == 0)
      return UV_EINVAL;
    if (uvt__index_find(&reg->tasks_by_id, spec->id) != NULL)
      return UV_EEXIST;
  }
  owner = spec->owner;
  if (owner != NULL && (err = check_owner(reg, owner)) != 0)
    return err;
  /* Starts still inside their `run` count as live: a start made from
   * inside another start's `run` must not pass the limit (R-REENTER-1). */
  live = owner != NULL ? owner->live_ + owner->starting_
                       : reg->unowned_live + reg->unowned_starting;
  if (reg->options.max_live_per_owner > 0 &&
      live >= reg->options.max_live_per_owner)
    return UVT_ELIMIT;

  /* Everything the commit needs, before the work starts (R-START-3). */
  kind = kind_find_or_add(reg, spec->kind);
  if (kind == NULL)
    return UV_ENOMEM;
  if (uvt__index_reserve(&reg->tasks_by_id, reg->records + 1))
    return UV_ENOMEM;
  t = uvt__task_alloc(reg, spec);
  if (t == NULL)
    return UV_ENOMEM;
  uvt__hub_ref(reg->hub);

  /* R-START-2.  `run` may call anything (R-REENTER-1): the owner is pinned
   * so that a disposal begun inside `run` waits for this start to finish
   * (the commit needs the owner and its session, C-24). */
  if (owner != NULL)
    owner->starting_++;
  else
    reg->unowned_starting++;
  err = spec->run(t, spec->arg, &t->hooks);
  if (owner != NULL)
    owner->starting_--;
  else
    reg->unowned_starting--;
  if (err != 0) {
    uvt__hub_cancel(t);
    uvt__task_free(t);
    if (owner != NULL)
      uvt__agent_maybe_done(owner);
    return err;
  }

  /* The commit: nothing below allocates or fails (R-START-3, R-START-4). */
  if (wanted != 0) {
    /* R-START-6: the counter never hands this number out afterwards. */
    write_id_number(t, wanted);
    if (kind->counter < wanted)
      kind->counter = wanted;
  } else {
    write_id_number(t, ++kind->counter);
  }
  uvt__index_insert(&reg->tasks_by_id, &t->hentry, uvt__task_id(t));
  t->seq = ++reg->next_seq;
  t->started_at_ms = uvt__now_ms();
  t->committed = 1;
  uvt__list_insert_tail(&reg->tasks, &t->all_link);
  if (owner != NULL) {
    t->session = owner->session_;
    t->session->refs++;
    t->session->task_count++;
    uvt__list_insert_tail(&t->session->tasks, &t->scope_link);
    uvt__list_insert_tail(&owner->tasks_, &t->owner_link);
    owner->live_++;
  } else {
    uvt__list_insert_tail(&reg->unowned, &t->scope_link);
    reg->unowned_count++;
    reg->unowned_live++;
  }
  reg->records++;
  reg->metrics.started++;
  reg->metrics.live++;
  uvt__feed(t, UVT__CHANGE_REGISTERED);
  uvt__update_ref(reg);
  if (id_out != NULL)
    memcpy(id_out, uvt__task_id(t), strlen(uvt__task_id(t)) + 1);
  /* A disposal or a registry close that began inside `run` collected its
   * tasks before this one existed: hand it over now, as if it had been
   * there (R-REENTER-1).  The start still succeeds: the producer's work
   * runs, and its cancel hook is called from here. */
  if (owner != NULL && owner->state_ == UVT__AGENT_DISPOSING)
    uvt__teardown_task(t, "owner disposed");
  else if (reg->closing)
    uvt__teardown_task(t, "tasks service disposed");
  return 0; /* R-START-5: the record exists now. */
}
