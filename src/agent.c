/* Agents and sessions (R-OWN-1, R-OWN-3, R-AGENT-1..4). */
#include <stdio.h>
#include <string.h>

#include "uvt-internal.h"

/* thread_ took one of the reserved pointers: the struct keeps its size. */
_Static_assert(sizeof(uv_thread_t) <= sizeof(void *),
               "uv_thread_t fits a reserved slot of uvt_agent_t");

static uvt__session_t *session_get(uvt_registry_t *reg, const char *id) {
  struct uvt__hentry *e = uvt__index_find(&reg->sessions_by_id, id);
  uvt__session_t *s;
  size_t n;
  if (e != NULL)
    return uvt__container_of(e, uvt__session_t, hentry);
  if (uvt__index_reserve(&reg->sessions_by_id, reg->sessions_by_id.count + 1))
    return NULL;
  n = strlen(id);
  s = uvt__malloc(sizeof(*s) + n);
  if (s == NULL)
    return NULL;
  memcpy(s->id, id, n + 1);
  uvt__list_init(&s->tasks);
  s->task_count = 0;
  s->refs = 0;
  uvt__index_insert(&reg->sessions_by_id, &s->hentry, s->id);
  return s;
}

void uvt__session_unref(uvt_registry_t *reg, uvt__session_t *s) {
  if (--s->refs > 0)
    return;
  uvt__index_remove(&reg->sessions_by_id, &s->hentry);
  uvt__free(s);
}

int uvt_agent_register(uvt_registry_t *reg, uvt_agent_t *a,
                       const char *agent_id, const char *session_id) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt__session_t *s;
  size_t id_len, session_len;
  char *mem;

  if (reg == NULL || a == NULL || agent_id == NULL || session_id == NULL ||
      agent_id[0] == '\0' || session_id[0] == '\0')
    return UV_EINVAL;
  if (uvt__agent_in_use(a))
    return UV_EBUSY; /* R-BUSY-1: its links are in our lists */
  if (reg->closing)
    return UVT_ECLOSING;
  if (uvt__index_find(&reg->agents_by_id, agent_id) != NULL)
    return UV_EEXIST; /* R-OWN-3 */
  if (uvt__index_reserve(&reg->agents_by_id, reg->agents_by_id.count + 1))
    return UV_ENOMEM;
  s = session_get(reg, session_id);
  if (s == NULL)
    return UV_ENOMEM;
  id_len = strlen(agent_id) + 1;
  session_len = strlen(session_id) + 1;
  mem = uvt__malloc(id_len + session_len);
  if (mem == NULL) {
    s->refs++;
    uvt__session_unref(reg, s); /* frees a session made just now */
    return UV_ENOMEM;
  }
  memcpy(mem, agent_id, id_len);
  memcpy(mem + id_len, session_id, session_len);

  a->id = mem;
  a->session = mem + id_len;
  a->registry = reg;
  a->loop_ = reg->loop;
  a->thread_ = reg->loop_thread;
  a->mem_ = mem;
  a->session_ = s;
  a->dispose_cb_ = NULL;
  a->idle_ = NULL;
  a->live_ = 0;
  a->starting_ = 0;
  a->state_ = UVT__AGENT_REGISTERED;
  s->refs++;
  uvt__list_init(&a->tasks_);
  uvt__list_init(&a->link_);
  uvt__list_insert_tail(&reg->agents, &a->link_);
  uvt__index_insert(&reg->agents_by_id, &a->hentry_, a->id);
  return 0;
}

/* Take the agent out of the registry's books; the callback comes later. */
static void unregister(uvt_registry_t *reg, uvt_agent_t *a) {
  uvt__index_remove(&reg->agents_by_id, &a->hentry_);
  uvt__list_remove(&a->link_);
  uvt__session_unref(reg, a->session_);
  a->session_ = NULL;
  uvt__free(a->mem_);
  a->mem_ = NULL;
  a->id = NULL;
  a->session = NULL;
}

static void finish_dispose(uvt_agent_t *a) {
  uvt_registry_t *reg = a->registry;
  /* A start inside a `run` hook pins the agent and its session: the
   * commit after `run` still needs them (R-REENTER-1, C-24). */
  if (a->state_ != UVT__AGENT_DISPOSING || !uvt__list_empty(&a->tasks_) ||
      a->starting_ > 0)
    return;
  unregister(reg, a);
  /* Stale from now on (R-OWN-1), still in use until its callback ran. */
  a->state_ = UVT__AGENT_DONE;
  uvt__list_insert_tail(&reg->agents_done, &a->link_);
  uvt__kick(reg);
}

void uvt__agent_maybe_done(uvt_agent_t *a) {
  finish_dispose(a);
}

static void detached_closed(uv_handle_t *handle) {
  uvt_agent_t *a = handle->data;
  uvt_agent_cb cb = a->dispose_cb_;
  uvt__free(a->idle_);
  a->idle_ = NULL;
  a->state_ = UVT__AGENT_IDLE;
  a->registry = NULL;
  if (cb != NULL)
    cb(a);
}

int uvt_agent_dispose(uvt_agent_t *a, uvt_agent_cb cb) {
  uvt_registry_t *reg;
  struct uvt__link sweep;
  struct uvt__link *n;

  if (a == NULL)
    return UV_EINVAL;
  if (a->state_ == UVT__AGENT_DETACHED) {
    /* P-THREAD-1: no registry is left to ask, but the handle below goes
     * on the loop, so the thread the agent was registered on is asked. */
    uv_thread_t self = uv_thread_self();
    if (!uv_thread_equal(&self, &a->thread_)) {
      fprintf(stderr, "uvtasks: uvt_agent_dispose called from a thread other "
                      "than the loop's: refused (UVT_ETHREAD)\n");
      return UVT_ETHREAD;
    }
    /* The registry closed under this agent (R-CLOSE-1): nothing of it is
     * left; defer the callback through a handle of our own on the loop. */
    a->idle_ = uvt__malloc(sizeof(*a->idle_));
    if (a->idle_ == NULL)
      return UV_ENOMEM;
    uv_idle_init(a->loop_, a->idle_);
    a->idle_->data = a;
    a->dispose_cb_ = cb;
    a->state_ = UVT__AGENT_DETACHED_CB;
    uv_close((uv_handle_t *)a->idle_, detached_closed);
    return 0;
  }
  if (a->state_ == UVT__AGENT_DETACHED_CB)
    return UVT_ECLOSING;
  reg = a->registry;
  if (reg == NULL)
    return UV_EINVAL;
  /* P-THREAD-1: before anything is touched (the handle says its
   * registry is alive). */
  UVT_LOOP_ONLY(reg);
  /* Disposal requested already: disposing, or done with its callback to
   * come. */
  if (a->state_ == UVT__AGENT_DISPOSING || a->state_ == UVT__AGENT_DONE)
    return UVT_ECLOSING;
  if (a->state_ != UVT__AGENT_REGISTERED)
    return UV_EINVAL;

  a->state_ = UVT__AGENT_DISPOSING; /* refuses new starts (UVT_ECLOSING) */
  a->dispose_cb_ = cb;
  reg->disposing_agents++;
  /* R-AGENT-1, R-AGENT-2: this agent's tasks as of now, collected first.
   * A task already on another sweep (this call came from a hook that a
   * registry close's sweep ran) is left to that sweep. */
  uvt__list_init(&sweep);
  for (n = a->tasks_.next; n != &a->tasks_; n = n->next) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, owner_link);
    if (!t->in_teardown && uvt__list_empty(&t->sweep_link))
      uvt__list_insert_tail(&sweep, &t->sweep_link);
  }
  while ((n = uvt__list_pop(&sweep)) != NULL) {
    uvt_task_t *t = uvt__container_of(n, uvt_task_t, sweep_link);
    uvt__teardown_task(t, "owner disposed");
  }
  finish_dispose(a);
  return 0;
}

void uvt__agents_drain(uvt_registry_t *reg) {
  struct uvt__link local;
  struct uvt__link *n;
  uvt__list_init(&local);
  uvt__list_splice(&reg->agents_done, &local);
  while ((n = uvt__list_pop(&local)) != NULL) {
    uvt_agent_t *a = uvt__container_of(n, uvt_agent_t, link_);
    uvt_agent_cb cb = a->dispose_cb_;
    reg->disposing_agents--;
    a->registry = NULL;
    a->state_ = UVT__AGENT_IDLE; /* free from its callback on */
    if (cb != NULL)
      cb(a);
  }
}

void uvt__agents_detach_all(uvt_registry_t *reg) {
  struct uvt__link *n;
  while ((n = uvt__list_pop(&reg->agents)) != NULL) {
    uvt_agent_t *a = uvt__container_of(n, uvt_agent_t, link_);
    unregister(reg, a);
    a->state_ = UVT__AGENT_DETACHED;
    a->registry = NULL;
  }
}
