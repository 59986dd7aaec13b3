/* The Slurm engine (E-1, E-3, E-4, E-6, E-7): one thread of its own makes
 * every libslurm call (submit, load, cancel) and follows the engine's jobs;
 * the loop thread hears from it through a uv_async_t.  Task hooks run on
 * the loop thread and only queue requests for the thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "slurm-internal.h"

/* libslurm's configuration is per process: the first engine's holds until
 * the last engine's thread ends. */
static uv_mutex_t lib_mutex;
static uv_once_t lib_once = UV_ONCE_INIT;
static int lib_users;

static void lib_mutex_init(void) {
  (void)uv_mutex_init(&lib_mutex);
}

static uint64_t mono_ms(void) {
  return uv_hrtime() / 1000000u;
}

/* ---- Jobs and their references ---------------------------------------- */

uvt__sjob_t *uvt__sjob_new(uvt_slurm_engine_t *e) {
  uvt__sjob_t *j = uvt__calloc(1, sizeof(*j));
  if (j == NULL)
    return NULL;
  j->e = e;
  e->jobs++; /* under the mutex or before the thread knows of it */
  uvt__list_init(&j->request_link);
  uvt__list_init(&j->poll_link);
  uvt__list_init(&j->loop_link);
  return j;
}

void uvt__sjob_free(uvt__sjob_t *j) {
  size_t i;
  if (j == NULL)
    return;
  for (i = 0; i < j->env_count; i++)
    uvt__free(j->env[i]);
  uvt__free(j->env);
  uvt__free(j->command_script);
  uvt__free(j->cwd);
  uvt__free(j->partition);
  uvt__free(j->live_detail);
  j->e->jobs--;
  uvt__free(j);
}

void uvt__sjob_unref_locked(uvt__sjob_t *j) {
  if (--j->refs > 0)
    return;
  uvt__list_remove(&j->request_link);
  uvt__list_remove(&j->poll_link);
  uvt__list_remove(&j->loop_link);
  uvt__sjob_free(j);
}

void uvt__sjob_queue_request(uvt__sjob_t *j) {
  if (!j->in_requests) {
    j->in_requests = 1;
    uvt__list_insert_tail(&j->e->requests, &j->request_link);
  }
  uv_cond_signal(&j->e->cond);
}

void uvt__sjob_poll(uvt__sjob_t *j) {
  if (!j->in_polled) {
    j->in_polled = 1;
    uvt__list_insert_tail(&j->e->polled, &j->poll_link);
  }
}

/* Mutex held.  News for the loop thread (a pending reason to show). */
static void to_loop(uvt__sjob_t *j) {
  if (!j->in_to_loop) {
    j->in_to_loop = 1;
    j->refs++;
    uvt__list_insert_tail(&j->e->to_loop, &j->loop_link);
  }
  uv_async_send(&j->e->async);
}

/* Mutex held.  The thread is done with `j`: drop it from the poll and
 * request lists and its reference. */
static void thread_drop(uvt__sjob_t *j) {
  if (j->in_requests) {
    j->in_requests = 0;
    uvt__list_remove(&j->request_link);
  }
  if (j->in_polled) {
    j->in_polled = 0;
    uvt__list_remove(&j->poll_link);
    uvt__sjob_unref_locked(j);
  }
}

/* Mutex held.  Settle the task with `end` and what output is left. */
static void finish(uvt__sjob_t *j, uvt_status_t status, const char *detail) {
  uvt_outcome_t o;
  uvt_buf_t b;
  memset(&b, 0, sizeof(b));
  j->settling = 1;
  (void)uvt__sjob_read(j, &b, 1);
  memset(&o, 0, sizeof(o));
  o.status = status;
  o.detail = detail;
  o.output = b.base;
  o.output_len = b.len;
  (void)uvt_task_settle(j->task, &o);
  uvt__free(b.base);
  thread_drop(j);
}

/* ---- The engine thread ------------------------------------------------- */

static int do_submit(uvt_slurm_engine_t *e, uvt__sjob_t *j, uint32_t *job,
                     char *why, size_t why_size) {
  job_desc_msg_t d;
  submit_response_msg_t *resp = NULL;
  char name[UVT__SLURM_KEY_MAX + 8], out[4096], err[4096];
  slurm_init_job_desc_msg(&d);
  snprintf(name, sizeof(name), "uvt-%s", j->key);
  uvt__sjob_path(j, "out", out, sizeof(out));
  uvt__sjob_path(j, "err", err, sizeof(err));
  d.name = name;
  d.script = j->command_script;
  d.std_out = out;
  d.std_err = err;
  d.work_dir = j->cwd;
  d.environment = j->env;
  d.env_size = (uint32_t)j->env_count;
  d.user_id = getuid();
  d.group_id = getgid();
  d.min_nodes = 1;
  d.max_nodes = 1;
  d.min_cpus = j->cpus;
  d.num_tasks = 1;
  if (j->mem_mb > 0)
    d.pn_min_memory = j->mem_mb;
  if (j->time_limit_min > 0)
    d.time_limit = j->time_limit_min;
  d.partition = j->partition != NULL ? j->partition : e->partition;
  d.requeue = 0; /* E-1 */
  if (slurm_submit_batch_job(&d, &resp) != 0) {
    snprintf(why, why_size, "%s", slurm_strerror(slurm_get_errno()));
    if (resp != NULL)
      slurm_free_submit_response_response_msg(resp);
    return -1;
  }
  *job = resp->job_id;
  slurm_free_submit_response_response_msg(resp);
  return 0;
}

/* Mutex held on entry and exit; dropped around libslurm calls. */
static void handle_requests(uvt_slurm_engine_t *e) {
  struct uvt__link *l;
  while ((l = uvt__list_pop(&e->requests)) != NULL) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, request_link);
    j->in_requests = 0;
    j->refs++; /* kept across the unlocked calls */
    if (j->want_submit) {
      char why[256];
      uint32_t job = 0;
      int sync = e->journal_sync, rc;
      e->journal_sync = 0;
      j->want_submit = 0;
      uv_mutex_unlock(&e->mutex);
      if (sync && e->journal_fd >= 0)
        (void)fdatasync(e->journal_fd); /* E-5: journalled before it runs */
      rc = do_submit(e, j, &job, why, sizeof(why));
      uv_mutex_lock(&e->mutex);
      if (rc == 0) {
        j->job = job;
        uvt__journal_line(e, "J %s %u", j->id, job);
      } else if (!j->settling) {
        char detail[300];
        snprintf(detail, sizeof(detail), "sbatch failed: %s", why);
        finish(j, UVT_FAILED, detail); /* E-1 */
      }
    }
    if (j->want_find && !j->settling) {
      job_info_msg_t *msg = NULL;
      char name[UVT__SLURM_KEY_MAX + 8];
      uint32_t i, found = 0;
      int rc;
      j->want_find = 0;
      snprintf(name, sizeof(name), "uvt-%s", j->key);
      uv_mutex_unlock(&e->mutex);
      rc = slurm_load_job_user(&msg, getuid(), SHOW_ALL);
      if (rc == 0) {
        for (i = 0; i < msg->record_count; i++)
          if (msg->job_array[i].name != NULL &&
              strcmp(msg->job_array[i].name, name) == 0)
            found = msg->job_array[i].job_id;
        slurm_free_job_info_msg(msg);
      }
      uv_mutex_lock(&e->mutex);
      if (rc != 0) {
        j->want_find = 1; /* the controller did not answer: later */
      } else if (found != 0) {
        j->job = found;
        uvt__journal_line(e, "J %s %u", j->id, found);
      } else if (!j->settling) {
        finish(j, UVT_FAILED,
               "slurm job never submitted (the host stopped first)");
      }
    }
    if (j->kills > 0 && j->job != 0) {
      uint32_t job = j->job;
      int rc;
      j->kills = 0;
      uv_mutex_unlock(&e->mutex);
      /* E-3: a cancel ends every process of the job (the controller sends
       * SIGTERM, then SIGKILL after KillWait). */
      rc = slurm_kill_job(job, SIGKILL, 0) != 0 &&
           slurm_get_errno() != ESLURM_ALREADY_DONE;
      uv_mutex_lock(&e->mutex);
      /* The controller did not take it (down, busy): the next poll sends
       * it again. */
      if (rc)
        j->kills++;
    }
    uvt__sjob_unref_locked(j);
  }
}

static void set_pending(uvt__sjob_t *j, const char *reason) {
  char buf[160];
  if (reason == NULL) {
    if (j->live_detail == NULL && !j->detail_dirty)
      return;
    uvt__free(j->live_detail);
    j->live_detail = NULL;
  } else {
    snprintf(buf, sizeof(buf), reason[0] ? "pending: %s" : "pending", reason);
    if (j->live_detail != NULL && strcmp(j->live_detail, buf) == 0)
      return;
    uvt__free(j->live_detail);
    j->live_detail = uvt__strdup(buf);
  }
  j->detail_dirty = 1;
  to_loop(j);
}

/* libslurm exports the reason names but its header does not declare it. */
extern char *slurm_job_reason_string(enum job_state_reason inx);

/* E-7: the heartbeat's file time changed since we last looked? */
static void check_heartbeat(uvt_slurm_engine_t *e, uvt__sjob_t *j, uint64_t now,
                            int *lost, uint64_t *silent_ms) {
  char path[4096];
  struct stat st;
  int64_t mtime = -1;
  *lost = 0;
  uvt__sjob_path(j, "hb", path, sizeof(path));
  if (stat(path, &st) == 0)
    mtime = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
  if (j->hb_seen_ms == 0 || mtime != j->hb_mtime) {
    j->hb_mtime = mtime;
    j->hb_seen_ms = now;
    return;
  }
  *silent_ms = now - j->hb_seen_ms;
  if (e->lost_after_ms > 0 && *silent_ms > e->lost_after_ms)
    *lost = 1;
}

static void read_rc(uvt__sjob_t *j, int *have, int *rc) {
  char path[4096];
  FILE *fp;
  *have = 0;
  uvt__sjob_path(j, "rc", path, sizeof(path));
  if ((fp = fopen(path, "re")) == NULL)
    return;
  if (fscanf(fp, "%d", rc) == 1)
    *have = 1;
  fclose(fp);
}

/* Mutex held on entry and exit.  One RPC for every job of ours. */
static void poll_jobs(uvt_slurm_engine_t *e) {
  job_info_msg_t *msg = NULL;
  struct uvt__link *l, *next;
  int any = 0, rc;
  uint64_t now;

  for (l = e->polled.next; l != &e->polled; l = l->next) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, poll_link);
    if (j->job != 0 || j->detached)
      any = 1;
  }
  if (!any)
    return;
  uv_mutex_unlock(&e->mutex);
  rc = slurm_load_job_user(&msg, getuid(), SHOW_ALL);
  uv_mutex_lock(&e->mutex);
  if (rc != 0)
    return; /* the controller did not answer: the next poll asks again */
  now = mono_ms();
  for (l = e->polled.next; l != &e->polled; l = next) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, poll_link);
    job_info_t *info = NULL;
    uvt__slurm_end_t end;
    uint32_t i, base;
    next = l->next;
    if (j->detached || j->settling) {
      if (!j->want_submit && !j->want_find)
        thread_drop(j);
      continue;
    }
    if (j->job == 0)
      continue;
    if (j->kills > 0 || j->want_find)
      uvt__sjob_queue_request(j); /* a cancel or a look-up to retry */
    for (i = 0; i < msg->record_count; i++)
      if (msg->job_array[i].job_id == j->job) {
        info = &msg->job_array[i];
        break;
      }
    if (info == NULL) {
      /* Past MinJobAge: the wrapper's exit-code file tells. */
      int have, code = 0;
      read_rc(j, &have, &code);
      uvt__slurm_map_rc(have, code, j->job, j->kill_requested, &end);
      finish(j, end.status, end.detail);
      continue;
    }
    base = info->job_state & JOB_STATE_BASE;
    if (base == JOB_PENDING) {
      const char *why = slurm_job_reason_string(info->state_reason);
      set_pending(j, why != NULL && strcmp(why, "None") != 0 ? why : "");
    } else if (base == JOB_SUSPENDED) {
      j->hb_seen_ms = 0; /* E-7: a suspended job does not beat */
    } else if (base == JOB_RUNNING) {
      int lost;
      uint64_t silent = 0;
      set_pending(j, NULL);
      check_heartbeat(e, j, now, &lost, &silent);
      if (lost) {
        char detail[96];
        uint32_t job = j->job;
        snprintf(detail, sizeof(detail), "lost (no heartbeat for %llu s)",
                 (unsigned long long)(silent / 1000));
        /* Only this thread drops jobs from the poll list: `j` and `next`
         * stay in it while the mutex is released. */
        uv_mutex_unlock(&e->mutex);
        (void)slurm_kill_job(job, SIGKILL, 0);
        uv_mutex_lock(&e->mutex);
        next = l->next;
        if (!j->settling)
          finish(j, UVT_FAILED, detail);
      }
    } else if (!(info->job_state & JOB_COMPLETING)) {
      /* E-3, E-4: ended, and no process of it is left. */
      uvt__slurm_map_end(info->job_state, info->exit_code, j->job,
                         j->kill_requested, &end);
      finish(j, end.status, end.detail);
    }
  }
  slurm_free_job_info_msg(msg);
}

static void engine_main(void *arg) {
  uvt_slurm_engine_t *e = arg;
  uint64_t next_poll = 0;
  struct uvt__link *l;

  uv_mutex_lock(&lib_mutex);
  if (lib_users++ == 0)
    slurm_init(e->conf);
  uv_mutex_unlock(&lib_mutex);

  uv_mutex_lock(&e->mutex);
  e->ready = 1; /* uvt_slurm_engine_new waits for this (see there) */
  uv_cond_broadcast(&e->cond);
  while (!e->stop) {
    uint64_t now;
    handle_requests(e);
    if (e->stop)
      break;
    now = mono_ms();
    if (now >= next_poll) {
      poll_jobs(e);
      now = mono_ms();
      next_poll = now + e->poll_ms;
    }
    if (!uvt__list_empty(&e->requests) || e->stop)
      continue;
    (void)uv_cond_timedwait(&e->cond, &e->mutex,
                            (next_poll > now ? next_poll - now : 1) * 1000000u);
  }
  /* Tasks still live are left to Slurm (a journal finds them again). */
  while ((l = uvt__list_pop(&e->polled)) != NULL) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, poll_link);
    j->in_polled = 0;
    if (!j->settling) {
      uvt_outcome_t o;
      memset(&o, 0, sizeof(o));
      o.status = UVT_FAILED;
      o.detail = "slurm engine closed";
      j->settling = 1;
      (void)uvt_task_settle(j->task, &o);
    }
    uvt__sjob_unref_locked(j);
  }
  while ((l = uvt__list_pop(&e->requests)) != NULL)
    uvt__container_of(l, uvt__sjob_t, request_link)->in_requests = 0;
  e->thread_done = 1;
  uv_async_send(&e->async);
  uv_mutex_unlock(&e->mutex);

  uv_mutex_lock(&lib_mutex);
  if (--lib_users == 0)
    slurm_fini();
  uv_mutex_unlock(&lib_mutex);
}

/* ---- The loop thread --------------------------------------------------- */

static void engine_free(uvt_slurm_engine_t *e) {
  uv_cond_destroy(&e->cond);
  uv_mutex_destroy(&e->mutex);
  uvt__free(e->out_dir);
  uvt__free(e->conf);
  uvt__free(e->partition);
  uvt__free(e);
}

/* The engine is freed once it is closed and the registry released every
 * task of it (a record may outlive the engine: its release comes later). */
static void engine_closed(uv_handle_t *h) {
  uvt_slurm_engine_t *e = h->data;
  void (*cb)(void *) = e->close_cb;
  void *data = e->close_data;
  int last;
  uv_mutex_lock(&e->mutex);
  if (e->journal_fd >= 0)
    close(e->journal_fd);
  e->journal_fd = -1;
  e->closed = 1;
  last = e->jobs == 0;
  uv_mutex_unlock(&e->mutex);
  if (last)
    engine_free(e);
  if (cb != NULL)
    cb(data);
}

static void engine_async(uv_async_t *h) {
  uvt_slurm_engine_t *e = h->data;
  struct uvt__link *l;
  int done, journal_err;
  uv_mutex_lock(&e->mutex);
  while ((l = uvt__list_pop(&e->to_loop)) != NULL) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, loop_link);
    j->in_to_loop = 0;
    if (j->detail_dirty) {
      char *d = j->live_detail != NULL ? uvt__strdup(j->live_detail) : NULL;
      j->detail_dirty = 0;
      if (!j->released && !j->settling)
        uvt_task_set_detail(j->task, d);
      else
        uvt__free(d);
    }
    uvt__sjob_unref_locked(j);
  }
  journal_err = e->journal_err;
  e->journal_err = 0;
  done = e->thread_done && e->closing && !e->thread_joined;
  uv_mutex_unlock(&e->mutex);
  if (journal_err != 0)
    uvt_log(e->reg, UVT_LOG_WARN,
            "slurm: journal write failed (%s): a restart may not find "
            "every job",
            uv_strerror(journal_err));
  if (done) {
    e->thread_joined = 1;
    uv_thread_join(&e->thread); /* it has returned: no wait */
    uv_close((uv_handle_t *)&e->async, engine_closed);
  }
}

/* E-5: the end of a task of ours reached every listener: never adopt it
 * again.  Watchers hear a settlement after the listeners (R-FEED-1). */
static int slurm_cancel(uvt_task_t *t, const char *reason);

static void engine_watch(uvt_watch_t *w, const uvt_snapshot_t *snap,
                         int dropped) {
  uvt_slurm_engine_t *e = w->data;
  uvt_task_t *t;
  uvt__sjob_t *j;
  if (dropped || !uvt_status_is_terminal(snap->status) ||
      strcmp(snap->kind, "slurm") != 0)
    return;
  t = uvt_task_find(e->reg, snap->id);
  if (t == NULL)
    return;
  if (uvt_task_hooks(t)->cancel != slurm_cancel)
    return;
  j = uvt_task_arg(t);
  if (j->e != e)
    return;
  uv_mutex_lock(&e->mutex);
  /* A detached job did not end: a later host adopts it (E-6). */
  if (!j->detached)
    uvt__journal_line(e, "D %s", j->id);
  uv_mutex_unlock(&e->mutex);
}

static int slurm_cancel(uvt_task_t *t, const char *reason) {
  uvt__sjob_t *j = uvt_task_arg(t);
  uvt_slurm_engine_t *e = j->e;
  (void)reason;
  uv_mutex_lock(&e->mutex);
  if (e->detach_on_close && !j->settling && uvt_task_host_leaving(t)) {
    /* E-6: the job keeps running; the record goes. */
    uvt_outcome_t o;
    char detail[96];
    snprintf(detail, sizeof(detail), "detached: slurm job %u keeps running",
             j->job);
    j->detached = 1;
    j->settling = 1;
    memset(&o, 0, sizeof(o));
    o.status = UVT_KILLED;
    o.detail = detail;
    (void)uvt_task_settle(t, &o);
    uv_cond_signal(&e->cond);
    uv_mutex_unlock(&e->mutex);
    return 0;
  }
  if (e->stop) {
    uv_mutex_unlock(&e->mutex);
    return UVT_ECLOSING;
  }
  j->kill_requested = 1;
  j->kills++; /* E-3: sent once the job id is known */
  uvt__sjob_queue_request(j);
  uv_mutex_unlock(&e->mutex);
  return 0;
}

static int slurm_read(uvt_task_t *t, uvt_buf_t *out) {
  uvt__sjob_t *j = uvt_task_arg(t);
  uvt_slurm_engine_t *e = j->e;
  uint64_t o, r;
  int err = 0;
  uv_mutex_lock(&e->mutex);
  if (!j->settling) {
    o = j->out_off;
    r = j->err_off;
    err = uvt__sjob_read(j, out, 0);
    if (o != j->out_off || r != j->err_off)
      uvt__journal_line(e, "O %s %llu %llu", j->id,
                        (unsigned long long)j->out_off,
                        (unsigned long long)j->err_off);
  }
  uv_mutex_unlock(&e->mutex);
  return err;
}

static void slurm_release(uvt_task_t *t) {
  uvt__sjob_t *j = uvt_task_arg(t);
  uvt_slurm_engine_t *e = j->e;
  int last;
  uv_mutex_lock(&e->mutex);
  j->released = 1;
  j->task = NULL;
  uvt__sjob_unref_locked(j);
  last = e->closed && e->jobs == 0;
  uv_mutex_unlock(&e->mutex);
  if (last)
    engine_free(e);
}

static int slurm_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  uvt__sjob_t *j = arg;
  j->task = t;
  j->refs = 2; /* the registry's and the thread's */
  hooks->cancel = slurm_cancel;
  hooks->read_output = slurm_read;
  hooks->release = slurm_release;
  return 0;
}

int uvt__slurm_register(uvt_slurm_engine_t *e, uvt__sjob_t *j,
                        uvt_agent_t *owner, const char *label,
                        const char *want_id, char id_out[UVT_ID_MAX]) {
  uvt_spec_t spec;
  int err;
  memset(&spec, 0, sizeof(spec));
  spec.kind = "slurm";
  spec.label = label;
  spec.owner = owner;
  spec.run = slurm_run;
  spec.arg = j;
  spec.id = want_id;
  /* The engine's mutex is not held: `run` may call anything. */
  err = uvt_start(e->reg, &spec, j->id);
  if (err != 0)
    return err;
  if (id_out != NULL)
    memcpy(id_out, j->id, sizeof(j->id));
  uv_mutex_lock(&e->mutex);
  uvt__sjob_poll(j);
  if (j->want_submit || j->want_find || j->kills > 0)
    uvt__sjob_queue_request(j);
  uv_cond_signal(&e->cond);
  uv_mutex_unlock(&e->mutex);
  return 0;
}

/* ---- Public ------------------------------------------------------------ */

void uvt_slurm_engine_options_init(uvt_slurm_engine_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->poll_ms = 250;
  o->heartbeat_ms = 1000;
  o->lost_after_ms = 30000;
}

void uvt_slurm_options_init(uvt_slurm_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->output_cap_bytes = 1u << 20;
}

static char *dup_or_null(const char *s, int *bad) {
  char *c;
  if (s == NULL)
    return NULL;
  if ((c = uvt__strdup(s)) == NULL)
    *bad = 1;
  return c;
}

int uvt_slurm_engine_new(uvt_registry_t *reg,
                         const uvt_slurm_engine_options_t *o,
                         uvt_slurm_engine_t **out) {
  uvt_slurm_engine_t *e;
  int err, bad = 0;

  if (reg == NULL || o == NULL || out == NULL || o->out_dir == NULL ||
      o->out_dir[0] == '\0')
    return UV_EINVAL;
  *out = NULL;
  /* libslurm ends the process when it cannot read its configuration:
   * check first that there is one to read. */
  {
    const char *conf = o->conf != NULL ? o->conf : getenv("SLURM_CONF");
    if (conf == NULL)
      conf = "/etc/slurm/slurm.conf";
    if (access(conf, R_OK) != 0)
      return uv_translate_sys_error(errno);
  }
  if (mkdir(o->out_dir, 0700) != 0 && errno != EEXIST)
    return uv_translate_sys_error(errno);
  uv_once(&lib_once, lib_mutex_init);
  if ((e = uvt__calloc(1, sizeof(*e))) == NULL)
    return UV_ENOMEM;
  e->reg = reg;
  e->loop = uvt_registry_loop(reg);
  e->journal_fd = -1;
  e->out_dir = dup_or_null(o->out_dir, &bad);
  e->conf = dup_or_null(o->conf, &bad);
  e->partition = dup_or_null(o->partition, &bad);
  e->poll_ms = o->poll_ms > 0 ? o->poll_ms : 250;
  e->heartbeat_ms = o->heartbeat_ms >= 1000 ? o->heartbeat_ms : 1000;
  e->lost_after_ms = o->lost_after_ms;
  e->detach_on_close = o->detach_on_close != 0;
  uvt__list_init(&e->requests);
  uvt__list_init(&e->polled);
  uvt__list_init(&e->to_loop);
  if (bad) {
    err = UV_ENOMEM;
    goto fail;
  }
  if (o->journal != NULL) {
    e->journal_fd =
        open(o->journal, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (e->journal_fd < 0) {
      err = uv_translate_sys_error(errno);
      goto fail;
    }
  }
  if ((err = uv_mutex_init(&e->mutex)) != 0)
    goto fail;
  if ((err = uv_cond_init(&e->cond)) != 0) {
    uv_mutex_destroy(&e->mutex);
    goto fail;
  }
  if ((err = uv_async_init(e->loop, &e->async, engine_async)) != 0) {
    uv_cond_destroy(&e->cond);
    uv_mutex_destroy(&e->mutex);
    goto fail;
  }
  e->async.data = e;
  e->watch.data = e;
  if ((err = uvt_watch_start(reg, &e->watch, engine_watch)) != 0 ||
      (err = uv_thread_create(&e->thread, engine_main, e)) != 0) {
    uvt_watch_stop(&e->watch);
    /* Not started: close the handle and free once it is closed. */
    e->close_cb = NULL;
    uv_close((uv_handle_t *)&e->async, engine_closed);
    return err;
  }
  /* libslurm's set-up writes the process environment (setenv), which no
   * other thread may read meanwhile: the host's thread waits for it here
   * (a local file is read; no controller is asked). */
  uv_mutex_lock(&e->mutex);
  while (!e->ready)
    uv_cond_wait(&e->cond, &e->mutex);
  uv_mutex_unlock(&e->mutex);
  *out = e;
  return 0;
fail:
  if (e->journal_fd >= 0)
    close(e->journal_fd);
  uvt__free(e->out_dir);
  uvt__free(e->conf);
  uvt__free(e->partition);
  uvt__free(e);
  return err;
}

void uvt_slurm_engine_close(uvt_slurm_engine_t *e, void (*cb)(void *),
                            void *data) {
  if (e == NULL || e->closing)
    return;
  e->closing = 1;
  e->close_cb = cb;
  e->close_data = data;
  uvt_watch_stop(&e->watch);
  uv_mutex_lock(&e->mutex);
  e->stop = 1;
  uv_cond_signal(&e->cond);
  if (e->thread_done)
    uv_async_send(&e->async);
  uv_mutex_unlock(&e->mutex);
}

int uvt_slurm_job_id(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uint32_t *job) {
  uvt_task_t *t;
  uvt__sjob_t *j;
  int err;
  if (reg == NULL || id == NULL || job == NULL)
    return UV_EINVAL;
  if ((err = uvt_task_lookup(reg, id, caller, &t)) != 0)
    return err;
  if (uvt_task_hooks(t)->cancel != slurm_cancel)
    return UV_EINVAL;
  j = uvt_task_arg(t);
  uv_mutex_lock(&j->e->mutex);
  *job = j->job;
  uv_mutex_unlock(&j->e->mutex);
  return *job != 0 ? 0 : UV_EAGAIN;
}
