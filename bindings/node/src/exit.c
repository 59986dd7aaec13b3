/* Ends that run no cleanup hook (N-3).  On the main thread, process.exit()
 * and an uncaught exception end the process from the 'exit' event without
 * tearing the environment down, and a fatal signal ends it without any JS:
 * no registry gets to close.  So every live process task of every registry
 * in the process (main thread and workers) is kept in one table, and
 * stopAllNow() sends SIGKILL to each one's process group at once, from the
 * thread that is ending the process.  There is no loop left to wait for a
 * grace period.
 *
 * An entry is added when spawn() returns and removed when the task's end
 * reaches the registry's listeners (the leader was reaped and its pipes
 * closed, P-END-1) or when the registry closes.  What a task left running
 * after its leader exited (P-KILL-4) is stopped by close, not by this
 * table. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "uvtn.h"

typedef struct entry_s {
  struct entry_s *next;
  uvtn_reg_t *r;
  int pid;
  char id[UVT_ID_MAX];
} entry_t;

static uv_once_t once = UV_ONCE_INIT;
static uv_mutex_t mutex;
static entry_t *entries;

static void init_mutex(void) {
  uv_mutex_init(&mutex);
}

void uvtn_exit_add(uvtn_reg_t *r, const char *id, int pid) {
  entry_t *e = calloc(1, sizeof(*e));
  if (e == NULL)
    return; /* the task still closes with its registry */
  uv_once(&once, init_mutex);
  e->r = r;
  e->pid = pid;
  snprintf(e->id, sizeof(e->id), "%s", id);
  uv_mutex_lock(&mutex);
  e->next = entries;
  entries = e;
  uv_mutex_unlock(&mutex);
}

static void remove_where(uvtn_reg_t *r, const char *id) {
  entry_t **p, *e;
  uv_once(&once, init_mutex);
  uv_mutex_lock(&mutex);
  p = &entries;
  while ((e = *p) != NULL) {
    if (e->r == r && (id == NULL || strcmp(e->id, id) == 0)) {
      *p = e->next;
      free(e);
      if (id != NULL)
        break;
    } else {
      p = &e->next;
    }
  }
  uv_mutex_unlock(&mutex);
}

void uvtn_exit_remove(uvtn_reg_t *r, const char *id) {
  remove_where(r, id);
}

void uvtn_exit_remove_all(uvtn_reg_t *r) {
  remove_where(r, NULL);
}

void uvtn_exit_listener_cb(uvt_listener_t *l, const uvt_snapshot_t *s,
                           uvt_agent_t *owner) {
  uvtn_exit_remove(l->data, s->id);
}

/* stopAllNow() -> number of groups signalled.  Any thread. */
napi_value uvtn_stop_all_now(napi_env env, napi_callback_info info) {
  napi_value result;
  entry_t *e;
  int n = 0;

  uv_once(&once, init_mutex);
  uv_mutex_lock(&mutex);
  for (e = entries; e != NULL; e = e->next)
    if (kill(-e->pid, SIGKILL) == 0)
      n++;
  uv_mutex_unlock(&mutex);
  napi_create_int32(env, n, &result);
  return result;
}
