/* Starting a task (R-START-1..5), looking one up behind the session fence
 * (R-OWN-1, R-OWN-2), and the record's lifetime. */
#include <string.h>

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

static uvt_task_t *task_alloc(uvt_registry_t *reg, const uvt_spec_t *spec) {
  size_t kind_len = strlen(spec->kind);
  size_t label_len = strlen(spec->label);
  size_t session_len =
      spec->owner != NULL ? strlen(spec->owner->session) + 1 : 0;
  /* One block: the record, "kind\0", "kind-<20 digits>\0", "label\0",
   * and the owner's session id. */
  size_t size = sizeof(uvt_task_t) + (kind_len + 1) + (kind_len + 22) +
                (label_len + 1) + session_len;
  uvt_task_t *t = uvt__calloc(1, size);
  char *p;
  if (t == NULL)
    return NULL;
  p = (char *)(t + 1);
  memcpy(p, spec->kind, kind_len + 1);
  p += kind_len + 1;
  t->id_prefix_len = (unsigned char)(kind_len + 1);
  /* uvt__task_id() and uvt__task_label() find these two from the kind's
   * length. */
  memcpy(p, spec->kind, kind_len);
  p[kind_len] = '-';
  p[kind_len + 1] = '\0';
  p += kind_len + 22;
  memcpy(p, spec->label, label_len + 1);
  p += label_len + 1;
  if (session_len > 0) {
    t->owner_session = p;
    memcpy(p, spec->owner->session, session_len);
  }

  t->reg = reg;
  t->hub = reg->hub;
  uvt__list_init(&t->all_link);
  uvt__list_init(&t->scope_link);
  uvt__list_init(&t->owner_link);
  uvt__list_init(&t->waits);
  uvt__list_init(&t->dispatch_link);
  uvt__list_init(&t->sweep_link);
  uvt__list_init(&t->apply_link);
  uvt__list_init(&t->queue_link);
  uvt__deadline_init(&t->teardown_deadline);
  atomic_init(&t->settle_called, 0);
  t->owner = spec->owner;
  t->arg = spec->arg;
  t->status = UVT_RUNNING;
  return t;
}

/* R-START-6: a requested id is "<kind>-<n>" with n from 1, no leading
 * zero, fitting 64 bits.  Returns n, or 0 if the id is not of that form. */
static uint64_t requested_number(const char *kind, const char *id) {
  size_t k = strlen(kind);
  const char *p;
  uint64_t n = 0;
  if (strncmp(id, kind, k) != 0 || id[k] != '-')
    return 0;
  p = id + k + 1;
  if (*p < '1' || *p > '9')
    return 0;
  for (; *p != '\0'; p++) {
    if (*p < '0' || *p > '9' || n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
      return 0;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  return n;
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

int uvt_start(uvt_registry_t *reg, const uvt_spec_t *spec,
              char id_out[UVT_ID_MAX]) {
  /* P-THREAD-1: before anything is touched. */
  UVT__LOOP_ONLY(reg);
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
    if ((wanted = requested_number(spec->kind, spec->id)) == 0)
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
  t = task_alloc(reg, spec);
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

void *uvt_task_arg(const uvt_task_t *t) {
  return t != NULL ? t->arg : NULL;
}

const char *uvt_task_id(const uvt_task_t *t) {
  return t != NULL && t->committed ? uvt__task_id(t) : NULL;
}

uvt_registry_t *uvt_task_registry(const uvt_task_t *t) {
  return t != NULL ? t->reg : NULL;
}

int uvt__task_live(const uvt_task_t *t) {
  return t->status == UVT_RUNNING || t->status == UVT_STOPPING;
}

int uvt__lookup(uvt_registry_t *reg, const char *id, const uvt_agent_t *caller,
                uvt_task_t **out) {
  struct uvt__hentry *e;
  uvt_task_t *t;
  if (reg == NULL || id == NULL)
    return UV_EINVAL;
  e = uvt__index_find(&reg->tasks_by_id, id);
  if (e == NULL)
    return UVT_ENOTASK;
  t = uvt__container_of(e, uvt_task_t, hentry);
  /* R-OWN-2: unowned tasks are open to every caller; an owned one only to
   * callers of the same session; a NULL caller never matches. */
  if (t->owner_session != NULL &&
      (caller == NULL || caller->session == NULL ||
       strcmp(caller->session, t->owner_session) != 0))
    return UVT_EFOREIGN;
  *out = t;
  return 0;
}

void uvt__task_record(uvt_task_t *t, uvt_status_t status, char *detail,
                      int detail_static) {
  uvt_registry_t *reg = t->reg;
  t->status = status;
  /* A producer may have shown a detail while live (the Slurm engine's
   * pending reason). */
  if (t->detail != NULL && !t->detail_static)
    uvt__free(t->detail);
  t->detail = detail;
  t->detail_static = detail_static ? 1 : 0;
  t->finished_at_ms = uvt__now_ms();
  reg->metrics.live--;
  if (t->owner != NULL)
    t->owner->live_--;
  else
    reg->unowned_live--;
  if (status == UVT_COMPLETED)
    reg->metrics.completed++;
  else if (status == UVT_KILLED)
    reg->metrics.killed++;
  else
    reg->metrics.failed++;
  uvt__deadline_remove(reg, &t->teardown_deadline);
  uvt__waits_count(t); /* R-DONE-3: reported before any listener runs */
  uvt__feed(t, UVT__CHANGE_TERMINAL);
}

/* A stream kind's unread remainder was read: the bytes are not needed any
 * more (R-READ-1 serves them once), so they go back now instead of when the
 * record is dropped; a host that keeps many ended tasks (uvtasks-mcp's
 * --keep-finished) then holds their records, not their output.  The length
 * stays, so "everything was read" is still told apart from "nothing was
 * kept". */
void uvt__task_output_consumed(uvt_task_t *t) {
  t->output_pos = t->output_len;
  uvt__free(t->output);
  t->output = NULL;
}

void uvt__task_pin(uvt_task_t *t) {
  t->pins++;
}

void uvt__task_unpin(uvt_task_t *t) {
  t->pins--;
  uvt__task_maybe_free(t);
}

/* A record is freed when it was dropped, the producer's outcome was taken,
 * no callback holds a view of it and no duplicate settle is queued. */
void uvt__task_maybe_free(uvt_task_t *t) {
  int queued;
  if (!t->dropped || !t->producer_done || t->pins > 0)
    return;
  uv_mutex_lock(&t->hub->mutex);
  queued = t->queued;
  uv_mutex_unlock(&t->hub->mutex);
  if (!queued)
    uvt__task_free(t);
}

void uvt__task_free(uvt_task_t *t) {
  uvt__hub_t *hub = t->hub;
  if (!t->detail_static)
    uvt__free(t->detail);
  if (t->kill_reason_owned)
    uvt__free((char *)t->kill_reason);
  uvt__free(t->output);
  uvt__free(t->o_detail);
  uvt__free(t->o_output);
  uvt__free(t);
  uvt__hub_unref(hub);
}
