/* The Slurm engine (E-1, E-3, E-4, E-6, E-7, E-9, E-11, E-12, E-14): one
 * thread of its own makes every libslurm call (submit, load, cancel) and
 * follows the engine's jobs; the loop thread hears from it through a
 * uv_async_t.  Task hooks run on the loop thread and only queue requests
 * for the thread. */
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

#include "leaf/opts.h"
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
  j->slot = -1;
  j->news = -1;
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
  uvt__free(j->account);
  uvt__free(j->qos);
  uvt__free(j->gres);
  uvt__free(j->array);
  uvt__free(j->signal);
  uvt__free(j->dependency);
  uvt__free(j->elem_off);
  for (i = 0; i < j->extra_n; i++)
    uvt__free(j->extra[i]);
  uvt__free(j->extra);
  for (i = 0; i < j->deps_n; i++)
    uvt__sjob_unref_locked(j->deps[i]);
  uvt__free(j->deps);
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

/* Mutex held.  E-12: tell the host what became of the submission. */
static void tell(uvt__sjob_t *j, uvt_slurm_submit_t what, const char *why) {
  if (j->submitted == NULL || j->news_told)
    return;
  if (what == UVT_SLURM_RETRYING && j->news == UVT_SLURM_RETRYING)
    return;
  j->news = (int)what;
  snprintf(j->why, sizeof(j->why), "%.250s", why != NULL ? why : "");
  to_loop(j);
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
  if (j->array == NULL) {
    /* E-7: the wrapper's FIFO has served (a reader of out_dir's files
     * would block on it). */
    char fifo[4096];
    uvt__sjob_path(j, "t", fifo, sizeof(fifo));
    (void)unlink(fifo);
  }
  thread_drop(j);
}

/* ---- The engine thread ------------------------------------------------- */

/* libslurm exports these but its header does not declare them. */
extern char *slurm_job_reason_string(enum job_state_reason inx);
extern slurm_conf_t *slurm_conf_lock(void);
extern void slurm_conf_unlock(void);

/* E-13: --dependency with each task id replaced by its job id.  Returns
 * 0, or -1 with `why` set (a task whose job was never submitted). */
static int dependency_text(const uvt__sjob_t *j, char *buf, size_t size,
                           char *why, size_t why_size) {
  const char *p = j->dependency;
  size_t n = 0, k = 0;
  while (*p != '\0') {
    size_t len = strcspn(p, ":,?");
    int is_id = len > 6 && strncmp(p, "slurm-", 6) == 0;
    if (is_id) {
      uvt__sjob_t *d = k < j->deps_n ? j->deps[k++] : NULL;
      if (d == NULL || d->job == 0) {
        snprintf(why, why_size, "dependency %.*s has no Slurm job", (int)len,
                 p);
        return -1;
      }
      n += (size_t)snprintf(buf + n, size - n, "%u", d->job);
    } else {
      n += (size_t)snprintf(buf + n, size - n, "%.*s", (int)len, p);
    }
    if (n >= size) {
      snprintf(why, why_size, "dependency too long");
      return -1;
    }
    p += len;
    if (*p != '\0') {
      buf[n++] = *p++;
      buf[n] = '\0';
    }
  }
  return 0;
}

static int is_retryable(int err) {
  switch (err) {
  case SLURM_COMMUNICATIONS_CONNECTION_ERROR:
  case SLURM_COMMUNICATIONS_SEND_ERROR:
  case SLURM_COMMUNICATIONS_RECEIVE_ERROR:
  case SLURM_COMMUNICATIONS_SHUTDOWN_ERROR:
  case SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR:
  case SLURMCTLD_COMMUNICATIONS_SEND_ERROR:
  case SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR:
  case SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR:
  case SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT:
  case ESLURM_ERROR_ON_DESC_TO_RECORD_COPY: /* "temporarily unable" */
  case ESLURM_IN_STANDBY_MODE:
    return 1;
  default:
    return 0;
  }
}

/* Returns 0 (job set), 1 (the controller did not answer: retry), -1
 * (refused: why set). */
static int do_submit(uvt_slurm_engine_t *e, uvt__sjob_t *j, uint32_t *job,
                     char *why, size_t why_size) {
  job_desc_msg_t d;
  submit_response_msg_t *resp = NULL;
  char name[UVT__SLURM_KEY_MAX + 8], out[4096], err[4096], dep[1024];
  char tres[512];
  int rc;
  size_t i;
  slurm_init_job_desc_msg(&d);
  snprintf(name, sizeof(name), "uvt-%s", j->key);
  snprintf(out, sizeof(out), "%s/%s%s.out", e->out_dir, j->key,
           j->array != NULL ? ".%a" : "");
  snprintf(err, sizeof(err), "%s/%s%s.err", e->out_dir, j->key,
           j->array != NULL ? ".%a" : "");
  d.name = name;
  d.script = j->command_script;
  d.std_out = out;
  d.std_err = err;
  d.work_dir = j->cwd;
  d.environment = j->env;
  d.env_size = (uint32_t)j->env_count;
  d.user_id = e->uid;
  d.group_id = getgid();
  d.min_nodes = j->nodes > 0 ? j->nodes : 1;
  d.max_nodes = d.min_nodes;
  d.num_tasks = j->ntasks > 0 ? j->ntasks : 1;
  if (j->ntasks > 0 || j->nodes > 1) {
    d.cpus_per_task = (uint16_t)j->cpus;
    d.min_cpus = j->cpus * d.num_tasks;
  } else {
    d.min_cpus = j->cpus;
  }
  if (j->mem_mb > 0)
    d.pn_min_memory = j->mem_mb;
  if (j->time_limit_min > 0)
    d.time_limit = j->time_limit_min;
  d.partition = j->partition != NULL ? j->partition : e->partition;
  d.account = j->account;
  d.qos = j->qos;
  if (j->gres != NULL) {
    /* As sbatch --gres: "gres:" before each element. */
    const char *p = j->gres;
    size_t n = 0;
    while (*p != '\0' && n < sizeof(tres)) {
      size_t len = strcspn(p, ",");
      n += (size_t)snprintf(tres + n, sizeof(tres) - n, "%sgres:%.*s",
                            n > 0 ? "," : "", (int)len, p);
      p += len + (p[len] == ',');
    }
    d.tres_per_node = tres;
  }
  d.array_inx = j->array;
  if (j->signal != NULL) {
    /* E-11: B: the batch shell (the wrapper), which passes it on. */
    int num;
    unsigned secs;
    if (uvt__slurm_signal_parse(j->signal, &num, &secs) == 0) {
      d.warn_signal = (uint16_t)num;
      d.warn_time = (uint16_t)secs;
      d.warn_flags = KILL_JOB_BATCH;
    }
  }
  if (j->dependency != NULL) {
    if (dependency_text(j, dep, sizeof(dep), why, why_size) != 0)
      return -1;
    d.dependency = dep;
  }
  for (i = 0; i < j->extra_n; i++)
    uvt__sbatch_apply(&d, j->extra[i]);
  d.requeue = 0; /* E-1 */
  if (j->array == NULL && j->tries == 1) {
    /* E-7: the wrapper waits on this FIFO (submit.c); without it (an
     * array's elements, a file system without FIFOs) it waits with a
     * sleep, so a failure here changes nothing else. */
    char fifo[4096];
    uvt__sjob_path(j, "t", fifo, sizeof(fifo));
    (void)mkfifo(fifo, 0600);
  }
  if (slurm_submit_batch_job(&d, &resp) != 0) {
    rc = slurm_get_errno();
    snprintf(why, why_size, "%s", slurm_strerror(rc));
    if (resp != NULL)
      slurm_free_submit_response_response_msg(resp);
    return is_retryable(rc) ? 1 : -1;
  }
  *job = resp->job_id;
  slurm_free_submit_response_response_msg(resp);
  return 0;
}

/* Mutex held on entry and exit (dropped around the libslurm call).
 * E-12: one try; a controller that does not answer is tried again with
 * backoff until submit_retry_ms passed since the first try. */
static void submit_one(uvt_slurm_engine_t *e, uvt__sjob_t *j) {
  char why[256], detail[400];
  uint32_t job = 0;
  uint64_t now = mono_ms();
  int sync = e->journal_sync, rc;
  j->want_submit = 0;
  if (j->submit_t0 == 0)
    j->submit_t0 = now;
  j->tries++;
  e->journal_sync = 0;
  uv_mutex_unlock(&e->mutex);
  if (sync)
    uvt__sjournal_sync(e); /* E-5: journalled before it runs */
  rc = do_submit(e, j, &job, why, sizeof(why));
  uv_mutex_lock(&e->mutex);
  now = mono_ms();
  if (rc == 0) {
    j->job = job;
    j->verified = 1;
    uvt__journal_put(e, j, 'J');
    /* E-12: on disk before the host hears "accepted". */
    e->journal_sync = 0;
    uv_mutex_unlock(&e->mutex);
    uvt__sjournal_sync(e);
    uv_mutex_lock(&e->mutex);
    snprintf(detail, sizeof(detail), "pending (slurm job %u)", job);
    uvt__free(j->live_detail);
    j->live_detail = uvt__strdup(detail);
    j->detail_dirty = 1;
    to_loop(j);
    snprintf(detail, sizeof(detail), "%u", job);
    tell(j, UVT_SLURM_ACCEPTED, detail);
    return;
  }
  if (j->settling)
    return;
  if (rc > 0 && now - j->submit_t0 < e->submit_retry_ms) {
    uint64_t wait = 1000;
    uint32_t k;
    for (k = 1; k < j->tries && wait < 30000; k++)
      wait *= 2;
    if (wait > 30000)
      wait = 30000;
    j->next_try = now + wait;
    j->want_submit = 1;
    snprintf(detail, sizeof(detail),
             "submitting: the controller does not answer (%s); try %u, "
             "trying again with backoff for up to %llu s",
             why, j->tries, (unsigned long long)(e->submit_retry_ms / 1000));
    uvt__free(j->live_detail);
    j->live_detail = uvt__strdup(detail);
    j->detail_dirty = 1;
    to_loop(j);
    tell(j, UVT_SLURM_RETRYING, detail + 12);
    return;
  }
  if (rc > 0)
    snprintf(detail, sizeof(detail),
             "sbatch failed: %s (gave up after %u tries in %llu s)", why,
             j->tries, (unsigned long long)((now - j->submit_t0) / 1000));
  else
    snprintf(detail, sizeof(detail), "sbatch failed: %s", why);
  tell(j, UVT_SLURM_REFUSED, detail + 15);
  finish(j, UVT_FAILED, detail); /* E-1 */
}

/* E-9: is the job the controller holds under `info` ours? */
static int job_is_ours(const uvt_slurm_engine_t *e, const uvt__sjob_t *j,
                       const job_info_t *info, char *why, size_t size) {
  char name[UVT__SLURM_KEY_MAX + 8];
  snprintf(name, sizeof(name), "uvt-%s", j->key);
  if (info->user_id != e->uid) {
    snprintf(why, size, "it is user %u's, not %u's", info->user_id, e->uid);
    return 0;
  }
  if (info->name == NULL || strcmp(info->name, name) != 0) {
    snprintf(why, size, "it is named \"%.64s\", not \"%s\"",
             info->name != NULL ? info->name : "", name);
    return 0;
  }
  if (info->cluster != NULL && info->cluster[0] != '\0' &&
      e->cluster[0] != '\0' && strcmp(info->cluster, e->cluster) != 0) {
    snprintf(why, size, "it runs on cluster %.64s, not %s", info->cluster,
             e->cluster);
    return 0;
  }
  return 1;
}

/* Mutex held on entry and exit.  E-9: ask the controller about an adopted
 * job: UVT__VERIFY_*, with `why` for a foreign one. */
static int verify_one(uvt_slurm_engine_t *e, uvt__sjob_t *j, char *why,
                      size_t size) {
  job_info_msg_t *msg = NULL;
  uint32_t job = j->job, i;
  int rc, err, answer;
  uv_mutex_unlock(&e->mutex);
  rc = slurm_load_job(&msg, job, SHOW_ALL);
  err = rc != 0 ? slurm_get_errno() : 0;
  if (rc != 0) {
    answer =
        err == ESLURM_INVALID_JOB_ID ? UVT__VERIFY_GONE : UVT__VERIFY_NOANSWER;
  } else {
    answer = UVT__VERIFY_GONE;
    for (i = 0; i < msg->record_count; i++) {
      job_info_t *info = &msg->job_array[i];
      if (info->job_id != job && info->array_job_id != job)
        continue;
      answer = job_is_ours(e, j, info, why, size) ? UVT__VERIFY_OURS
                                                  : UVT__VERIFY_FOREIGN;
      break;
    }
    slurm_free_job_info_msg(msg);
  }
  uv_mutex_lock(&e->mutex);
  return answer;
}

/* Mutex held on entry and exit; dropped around sacct.  E-14, E-9: what
 * the site's accounting says of a job the controller no longer holds
 * (asked once a job; nothing to ask without accounting).  `j` stays
 * referenced meanwhile (by the caller or the poll list). */
static void acct_look(uvt_slurm_engine_t *e, uvt__sjob_t *j) {
  uvt__acct_t a;
  if (j->acct_asked || e->acct_kinds == 0 || j->job == 0)
    return;
  j->acct_asked = 1;
  uv_mutex_unlock(&e->mutex);
  uvt__acct_read(e->conf, e->acct_kinds, j->job, j->key, e->uid, &a);
  uv_mutex_lock(&e->mutex);
  j->acct = a;
}

/* Without the mutex.  E-13: jobs the task's command submitted itself
 * (sbatch records the session and host it ran in: the wrapper wrote
 * them to <key>.sid) are cancelled with it, arrays included. */
static void kill_inner(uvt_slurm_engine_t *e, const char *sid_path,
                       uint32_t job) {
  job_info_msg_t *msg = NULL;
  node_info_msg_t *node = NULL;
  char host[256] = "", *names[4];
  unsigned sid = 0;
  uint32_t i;
  size_t k, n = 0;
  time_t started = 0;
  const char *batch = NULL;
  FILE *fp = fopen(sid_path, "re");
  if (fp == NULL)
    return;
  if (fscanf(fp, "%u %255s", &sid, host) != 2 || sid == 0) {
    fclose(fp);
    return;
  }
  fclose(fp);
  if (slurm_load_job_user(&msg, e->uid, SHOW_ALL) != 0)
    return;
  /* The task's own job: where its batch script ran, and since when. */
  for (i = 0; i < msg->record_count; i++)
    if (msg->job_array[i].job_id == job) {
      batch = msg->job_array[i].batch_host;
      started = msg->job_array[i].submit_time;
    }
  /* The controller names the submitting host as it resolved its
   * address: the node's own name, its NodeHostname or NodeAddr. */
  names[n++] = host;
  if (batch != NULL && batch[0] != '\0') {
    names[n++] = (char *)batch;
    if (slurm_load_node_single(&node, (char *)batch, SHOW_ALL) == 0 &&
        node->record_count > 0) {
      if (node->node_array[0].node_hostname != NULL)
        names[n++] = node->node_array[0].node_hostname;
      if (node->node_array[0].node_addr != NULL)
        names[n++] = node->node_array[0].node_addr;
    }
  }
  for (i = 0; i < msg->record_count; i++) {
    job_info_t *in = &msg->job_array[i];
    uint32_t base = in->job_state & JOB_STATE_BASE;
    uint32_t id = in->array_job_id != 0 ? in->array_job_id : in->job_id;
    size_t len;
    int same = 0;
    if (id == job || in->alloc_sid != sid || in->alloc_node == NULL ||
        in->submit_time < started ||
        (base != JOB_PENDING && base != JOB_RUNNING && base != JOB_SUSPENDED))
      continue;
    len = strcspn(in->alloc_node, ".");
    for (k = 0; k < n && !same; k++)
      same = strcspn(names[k], ".") == len &&
             strncmp(names[k], in->alloc_node, len) == 0;
    if (same)
      (void)slurm_kill_job(id, SIGKILL, 0);
  }
  slurm_free_job_info_msg(msg);
  if (node != NULL)
    slurm_free_node_info_msg(node);
}

/* Mutex held on entry and exit; dropped around libslurm calls. */
static void handle_requests(uvt_slurm_engine_t *e) {
  struct uvt__link *l;
  while ((l = uvt__list_pop(&e->requests)) != NULL) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, request_link);
    j->in_requests = 0;
    j->refs++; /* kept across the unlocked calls */
    if (j->want_verify && j->job != 0) {
      char why[160] = "";
      /* A controller silent a moment ago is not asked again at once: an
       * adoption of many jobs waits for one timeout, not one each. */
      int ask = e->silent_at == 0 || mono_ms() - e->silent_at >= 5000;
      int answer =
          ask ? verify_one(e, j, why, sizeof(why)) : UVT__VERIFY_NOANSWER;
      if (ask)
        e->silent_at = answer == UVT__VERIFY_NOANSWER ? mono_ms() : 0;
      if (answer == UVT__VERIFY_GONE && j->array == NULL) {
        /* E-9, E-14: forgotten by the controller; accounting may still
         * name the job, and a record of another name or user is not
         * ours: dropped, its outcome never reported as ours. */
        acct_look(e, j);
        if (j->acct.found == UVT__ACCT_FOREIGN) {
          answer = UVT__VERIFY_FOREIGN;
          snprintf(why, sizeof(why), "it no longer holds the job, and %.125s",
                   j->acct.why);
        }
      }
      j->want_verify = 0;
      j->verify_answer = answer;
      if (answer == UVT__VERIFY_OURS || answer == UVT__VERIFY_GONE)
        j->verified = 1;
      else if (answer == UVT__VERIFY_FOREIGN)
        snprintf(j->why, sizeof(j->why), "%s", why);
      if (answer == UVT__VERIFY_FOREIGN && !j->adopting && !j->settling) {
        /* Registered unconfirmed (the controller was silent then): it
         * ends here, its job untouched. */
        char detail[300];
        snprintf(detail, sizeof(detail),
                 "not adopted: the controller says slurm job %u is not this "
                 "host's (%.200s); it was left alone",
                 j->job, why);
        finish(j, UVT_FAILED, detail);
      }
      uv_cond_broadcast(&e->cond); /* adopt_all may be waiting */
    }
    if (j->want_submit && !j->settling && mono_ms() >= j->next_try)
      submit_one(e, j);
    if (j->want_find && !j->settling) {
      job_info_msg_t *msg = NULL;
      char name[UVT__SLURM_KEY_MAX + 8];
      uint32_t i, found = 0;
      int rc;
      j->want_find = 0;
      snprintf(name, sizeof(name), "uvt-%s", j->key);
      uv_mutex_unlock(&e->mutex);
      /* E-9: our user's jobs on this cluster, by their name. */
      rc = slurm_load_job_user(&msg, e->uid, SHOW_ALL);
      if (rc == 0) {
        for (i = 0; i < msg->record_count; i++)
          if (msg->job_array[i].name != NULL &&
              strcmp(msg->job_array[i].name, name) == 0 &&
              msg->job_array[i].user_id == e->uid)
            found = msg->job_array[i].array_job_id != 0
                        ? msg->job_array[i].array_job_id
                        : msg->job_array[i].job_id;
        slurm_free_job_info_msg(msg);
      }
      uv_mutex_lock(&e->mutex);
      if (rc != 0) {
        j->want_find = 1; /* the controller did not answer: later */
      } else if (found != 0) {
        j->job = found;
        j->verified = 1;
        uvt__journal_put(e, j, 'J');
      } else if (!j->settling) {
        j->verified = 1;
        finish(j, UVT_FAILED,
               "slurm job never submitted (the host stopped first)");
      }
      uv_cond_broadcast(&e->cond);
    }
    /* E-9: nothing is sent to a job not confirmed ours. */
    if (j->kills > 0 && j->job != 0 && j->verified) {
      uint32_t job = j->job;
      char sid[4096];
      int rc;
      j->kills = 0;
      uvt__sjob_path(j, "sid", sid, sizeof(sid));
      uv_mutex_unlock(&e->mutex);
      /* E-3: a cancel ends every process of the job (the controller sends
       * SIGTERM to the batch shell, which passes it on (E-11), then
       * SIGKILL to all after KillWait). */
      rc = slurm_kill_job(job, SIGKILL, 0) != 0 &&
           slurm_get_errno() != ESLURM_ALREADY_DONE;
      if (j->array == NULL)
        kill_inner(e, sid, job);
      uv_mutex_lock(&e->mutex);
      /* The controller did not take it (down, busy): the next poll sends
       * it again. */
      if (rc)
        j->kills++;
    }
    uvt__sjob_unref_locked(j);
  }
}

static void set_detail(uvt__sjob_t *j, const char *text) {
  if (text == NULL) {
    if (j->live_detail == NULL && !j->detail_dirty)
      return;
    uvt__free(j->live_detail);
    j->live_detail = NULL;
  } else {
    if (j->live_detail != NULL && strcmp(j->live_detail, text) == 0)
      return;
    uvt__free(j->live_detail);
    j->live_detail = uvt__strdup(text);
  }
  j->detail_dirty = 1;
  to_loop(j);
}

static void set_pending(uvt__sjob_t *j, const char *reason) {
  char buf[200];
  if (reason != NULL && reason[0] != '\0')
    snprintf(buf, sizeof(buf), "pending: %s (slurm job %u)", reason, j->job);
  else
    snprintf(buf, sizeof(buf), "pending (slurm job %u)", j->job);
  set_detail(j, buf);
}

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

/* E-14: the wrapper's <key>.rc (NULL: none). */
static int read_rc(uvt__sjob_t *j, char *buf, size_t size) {
  char path[4096];
  FILE *fp;
  size_t n;
  uvt__sjob_path(j, "rc", path, sizeof(path));
  if ((fp = fopen(path, "re")) == NULL)
    return 0;
  n = fread(buf, 1, size - 1, fp);
  buf[n] = '\0';
  fclose(fp);
  return n > 0;
}

/* Mutex held.  E-14: the job left the controller's records.  Its
 * outcome, best first: the ended state seen while it was COMPLETING; the
 * site's accounting record (acct_look() asked already), mapped as a live
 * state is; the wrapper's exit-code file. */
static void finish_forgotten(uvt__sjob_t *j) {
  uvt__slurm_end_t end;
  char rc[128];
  if (j->seen_state != 0) {
    /* Seen ended (COMPLETING) before it went: that is its outcome. */
    uvt__slurm_map_end(j->seen_state, j->seen_exit, j->job, j->kill_requested,
                       &end);
  } else if (j->acct.found == UVT__ACCT_OURS) {
    uvt__slurm_map_end(j->acct.state, j->acct.exit_code, j->job,
                       j->kill_requested, &end);
  } else {
    /* No record, or one of another name or user (E-9: never ours). */
    uvt__slurm_map_rc(read_rc(j, rc, sizeof(rc)) ? rc : NULL, j->job,
                      j->kill_requested, j->limit_s, &end);
  }
  finish(j, end.status, end.detail);
}

/* E-13: an array's elements by state, and whether all have ended. */
typedef struct {
  uint32_t pending, running, completed, failed, cancelled, other;
  uint32_t ended_bad_exit;
  int completing;
} uvt__counts_t;

static void count_array(const job_info_msg_t *msg, uint32_t job,
                        uvt__counts_t *c, int *found) {
  uint32_t i;
  memset(c, 0, sizeof(*c));
  *found = 0;
  for (i = 0; i < msg->record_count; i++) {
    const job_info_t *info = &msg->job_array[i];
    uint32_t base, n;
    if (info->array_job_id != job && info->job_id != job)
      continue;
    *found = 1;
    base = info->job_state & JOB_STATE_BASE;
    /* A record may stand for several indices in any state: the elements
     * not started yet share one ("2-5%2"), pending, then cancelled or
     * failed with it. */
    n = info->array_task_str != NULL ? uvt__array_count(info->array_task_str)
                                     : 1;
    if (n == 0)
      n = 1;
    if (info->job_state & JOB_COMPLETING)
      c->completing = 1;
    switch (base) {
    case JOB_PENDING:
      c->pending += n;
      break;
    case JOB_RUNNING:
    case JOB_SUSPENDED:
      c->running += n;
      break;
    case JOB_COMPLETE:
      c->completed += n;
      break;
    case JOB_CANCELLED:
      c->cancelled += n;
      break;
    case JOB_FAILED:
      c->failed += n;
      break;
    default:
      c->other += n;
      break;
    }
  }
}

static void counts_text(const uvt__counts_t *c, char *buf, size_t size) {
  snprintf(buf, size,
           "%u pending, %u running, %u completed, %u failed, %u cancelled, "
           "%u other",
           c->pending, c->running, c->completed, c->failed, c->cancelled,
           c->other);
}

/* Mutex held.  E-13: one array task; returns 1 when it settled. */
static int poll_array(uvt__sjob_t *j, const job_info_msg_t *msg) {
  uvt__counts_t c;
  int found;
  char text[200], detail[300];
  count_array(msg, j->job, &c, &found);
  if (!found) {
    /* Forgotten: what the last look said. */
    if (j->live_detail != NULL && strncmp(j->live_detail, "array", 5) == 0)
      snprintf(detail, sizeof(detail), "slurm %s (forgotten since)",
               j->live_detail);
    else
      snprintf(detail, sizeof(detail),
               "slurm forgot array job %u before its end was seen", j->job);
    finish(j, j->kill_requested ? UVT_KILLED : UVT_FAILED, detail);
    return 1;
  }
  counts_text(&c, text, sizeof(text));
  if (c.pending + c.running > 0 || c.completing) {
    snprintf(detail, sizeof(detail), "array job %u: %s", j->job, text);
    set_detail(j, detail);
    return 0;
  }
  snprintf(detail, sizeof(detail), "array job %u: %s", j->job, text);
  if (c.failed + c.cancelled + c.other == 0)
    finish(j, UVT_COMPLETED, detail);
  else if (j->kill_requested || c.cancelled > 0)
    finish(j, UVT_KILLED, detail);
  else
    finish(j, UVT_FAILED, detail);
  return 1;
}

/* Mutex held on entry and exit.  One RPC for every job of ours. */
static void poll_jobs(uvt_slurm_engine_t *e) {
  job_info_msg_t *msg = NULL;
  struct uvt__link *l, *next;
  int any = 0, rc;
  uint64_t now = mono_ms();

  for (l = e->polled.next; l != &e->polled; l = l->next) {
    uvt__sjob_t *j = uvt__container_of(l, uvt__sjob_t, poll_link);
    if (j->job != 0 || j->detached)
      any = 1;
    /* E-12: a submission waiting out its backoff. */
    if (j->want_submit && !j->in_requests && now >= j->next_try)
      uvt__sjob_queue_request(j);
    /* E-9: an adopted job the controller has not confirmed yet. */
    if (!j->verified && j->job != 0 && !j->in_requests && !j->settling) {
      j->want_verify = 1;
      uvt__sjob_queue_request(j);
    }
  }
  if (!any)
    return;
  uv_mutex_unlock(&e->mutex);
  rc = slurm_load_job_user(&msg, e->uid, SHOW_ALL);
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
    if (j->job == 0 || !j->verified)
      continue;
    if (j->kills > 0 || j->want_find)
      uvt__sjob_queue_request(j); /* a cancel or a look-up to retry */
    if (j->array != NULL) {
      (void)poll_array(j, msg);
      continue;
    }
    for (i = 0; i < msg->record_count; i++)
      if (msg->job_array[i].job_id == j->job) {
        info = &msg->job_array[i];
        break;
      }
    if (info == NULL) {
      /* Past MinJobAge (E-14).  `j` and `next` stay in the poll list
       * while accounting is read (only this thread drops jobs from it). */
      if (j->seen_state == 0) {
        acct_look(e, j);
        next = l->next;
        if (j->settling)
          continue;
      }
      finish_forgotten(j);
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
      char detail[160];
      snprintf(detail, sizeof(detail), "slurm job %u on %.100s", j->job,
               info->nodes != NULL ? info->nodes : "?");
      set_detail(j, detail);
      check_heartbeat(e, j, now, &lost, &silent);
      if (lost) {
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
    } else if (info->job_state & JOB_COMPLETING) {
      /* E-14: ended; its processes are going.  Kept in case the
       * controller forgets it before the next look. */
      j->seen_state = info->job_state & JOB_STATE_BASE;
      j->seen_exit = info->exit_code;
    } else {
      /* E-3, E-4: ended, and no process of it is left. */
      if (j->kill_requested) {
        /* What the command submitted while it saved its checkpoint. */
        char sid[4096];
        uint32_t job = j->job;
        uvt__sjob_path(j, "sid", sid, sizeof(sid));
        uv_mutex_unlock(&e->mutex);
        kill_inner(e, sid, job);
        uv_mutex_lock(&e->mutex);
        next = l->next;
        if (j->settling)
          continue;
      }
      uvt__slurm_map_end(info->job_state, info->exit_code, j->job,
                         j->kill_requested, &end);
      finish(j, end.status, end.detail);
    }
  }
  slurm_free_job_info_msg(msg);
}

/* ---- E-14: cluster_info ------------------------------------------------- */

typedef struct uvt__info_s {
  struct uvt__link link;
  void (*cb)(void *data, int status, const char *text);
  void *data;
  int status;
  char *text;
} uvt__info_t;

static const char *minutes_text(uint32_t m, char *buf, size_t size) {
  if (m == INFINITE)
    return "unlimited";
  if (m == NO_VAL)
    return "default";
  if (m >= 60 * 24)
    snprintf(buf, size, "%u-%02u:%02u:00", m / 1440, m % 1440 / 60, m % 60);
  else
    snprintf(buf, size, "%u:%02u:00", m / 60, m % 60);
  return buf;
}

/* On the engine thread, without the mutex. */
static void cluster_info(uvt_slurm_engine_t *e, uvt__info_t *r) {
  partition_info_msg_t *parts = NULL;
  node_info_msg_t *nodes = NULL;
  job_info_msg_t *jobs = NULL;
  char *text = NULL, tbuf[32];
  size_t len = 0;
  FILE *fp;
  uint32_t i, k;

  if (slurm_load_partitions(0, &parts, SHOW_ALL) != 0 ||
      slurm_load_node(0, &nodes, SHOW_ALL) != 0 ||
      slurm_load_job_user(&jobs, e->uid, SHOW_ALL) != 0) {
    char buf[256];
    r->status = UV_EAGAIN;
    snprintf(buf, sizeof(buf), "the controller did not answer: %s",
             slurm_strerror(slurm_get_errno()));
    r->text = uvt__strdup(buf);
    goto out;
  }
  if ((fp = open_memstream(&text, &len)) == NULL) {
    r->status = UV_ENOMEM;
    goto out;
  }
  fprintf(fp,
          "Cluster %s, partitions (name, state, time limit, nodes idle "
          "of total, CPUs and memory per node, gres):\n",
          e->cluster[0] ? e->cluster : "?");
  for (i = 0; i < parts->record_count; i++) {
    partition_info_t *p = &parts->partition_array[i];
    uint32_t idle = 0, total = 0, cpus = 0;
    uint64_t mem = 0;
    char gres[128] = "";
    hostlist_t hl = slurm_hostlist_create(p->nodes != NULL ? p->nodes : "");
    for (k = 0; hl != NULL && k < nodes->record_count; k++) {
      node_info_t *n = &nodes->node_array[k];
      if (n->name == NULL || slurm_hostlist_find(hl, n->name) < 0)
        continue;
      total++;
      if ((n->node_state & NODE_STATE_BASE) == NODE_STATE_IDLE &&
          !(n->node_state & NODE_STATE_DRAIN))
        idle++;
      if (n->cpus > cpus)
        cpus = n->cpus;
      if (n->real_memory > mem)
        mem = n->real_memory;
      if (gres[0] == '\0' && n->gres != NULL)
        snprintf(gres, sizeof(gres), "%s", n->gres);
    }
    if (hl != NULL)
      slurm_hostlist_destroy(hl);
    fprintf(fp,
            "- %s%s: %s, time limit %s, %u of %u nodes idle, %u CPUs, "
            "%llu MB, gres %s\n",
            p->name, (p->flags & PART_FLAG_DEFAULT) ? " (default)" : "",
            (p->state_up & PARTITION_UP) ? "up" : "down",
            minutes_text(p->max_time, tbuf, sizeof(tbuf)), idle, total, cpus,
            (unsigned long long)mem, gres[0] ? gres : "none");
  }
  fprintf(fp, "Your jobs in the controller (%u):\n", jobs->record_count);
  for (i = 0; i < jobs->record_count; i++) {
    job_info_t *j = &jobs->job_array[i];
    uint32_t base = j->job_state & JOB_STATE_BASE;
    if (j->array_task_str != NULL)
      fprintf(fp, "- %u_[%s]", j->array_job_id, j->array_task_str);
    else if (j->array_job_id != 0)
      fprintf(fp, "- %u_%u", j->array_job_id, j->array_task_id);
    else
      fprintf(fp, "- %u", j->job_id);
    fprintf(fp, " %s: %s", j->name != NULL ? j->name : "",
            uvt__slurm_state_name(base));
    if (base == JOB_PENDING) {
      const char *why = slurm_job_reason_string(j->state_reason);
      fprintf(fp, " (%s)", why != NULL ? why : "?");
    } else if (j->nodes != NULL) {
      fprintf(fp, " on %s", j->nodes);
    }
    fprintf(fp, ", partition %s\n", j->partition != NULL ? j->partition : "?");
  }
  if (fclose(fp) != 0) {
    free(text);
    r->status = UV_ENOMEM;
    goto out;
  }
  r->text = uvt__strdup(text);
  free(text);
  r->status = r->text != NULL ? 0 : UV_ENOMEM;
out:
  if (parts != NULL)
    slurm_free_partition_info_msg(parts);
  if (nodes != NULL)
    slurm_free_node_info_msg(nodes);
  if (jobs != NULL)
    slurm_free_job_info_msg(jobs);
}

/* Mutex held.  When the next poll is due: at next_poll, or sooner while
 * a job's end is near (E-3: a wrapper wrote its exit-code file, rc_event;
 * look again after 10 ms, 20, 40, ... up to poll_ms, since a loaded
 * controller may take seconds to say the job ended). */
static uint64_t poll_due(const uvt_slurm_engine_t *e, uint64_t next_poll,
                         uint64_t last_poll) {
  if (e->fast_gap > 0 && next_poll > last_poll + e->fast_gap)
    return last_poll + e->fast_gap;
  return next_poll;
}

static void engine_main(void *arg) {
  uvt_slurm_engine_t *e = arg;
  uint64_t next_poll = 0;
  uint64_t last_poll = 0;
  struct uvt__link *l;

  uv_mutex_lock(&lib_mutex);
  if (lib_users++ == 0)
    slurm_init(e->conf);
  {
    slurm_conf_t *c = slurm_conf_lock();
    if (c->cluster_name != NULL)
      snprintf(e->cluster, sizeof(e->cluster), "%s", c->cluster_name);
    e->kill_wait_s = c->kill_wait;
    slurm_conf_unlock();
  }
  e->acct_kinds = uvt__acct_kinds(); /* E-14 */
  uv_mutex_unlock(&lib_mutex);

  uv_mutex_lock(&e->mutex);
  e->ready = 1; /* uvt_slurm_engine_new waits for this (see there) */
  uv_cond_broadcast(&e->cond);
  while (!e->stop) {
    uint64_t now, wake;
    handle_requests(e);
    while (!e->stop && (l = uvt__list_pop(&e->infos)) != NULL) {
      uvt__info_t *r = uvt__container_of(l, uvt__info_t, link);
      uv_mutex_unlock(&e->mutex);
      cluster_info(e, r);
      uv_mutex_lock(&e->mutex);
      uvt__list_insert_tail(&e->infos_done, &r->link);
      uv_async_send(&e->async);
    }
    if (e->stop)
      break;
    now = mono_ms();
    next_poll = poll_due(e, next_poll, last_poll);
    if (now >= next_poll) {
      int fast = e->fast_gap > 0;
      if (fast)
        e->fast_polls++;
      poll_jobs(e);
      now = mono_ms();
      last_poll = now;
      next_poll = now + e->poll_ms;
      if (fast && e->fast_gap > 0 && (e->fast_gap *= 2) >= e->poll_ms)
        e->fast_gap = 0;
    }
    if (!uvt__list_empty(&e->requests) || !uvt__list_empty(&e->infos) ||
        e->stop)
      continue;
    next_poll = poll_due(e, next_poll, last_poll);
    wake = next_poll > now ? next_poll - now : 1;
    (void)uv_cond_timedwait(&e->cond, &e->mutex, wake * 1000000u);
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

static void free_strv(char **v) {
  size_t i;
  for (i = 0; v != NULL && v[i] != NULL; i++)
    uvt__free(v[i]);
  uvt__free(v);
}

static void engine_free(uvt_slurm_engine_t *e) {
  uv_cond_destroy(&e->cond);
  uv_mutex_destroy(&e->mutex);
  uvt__free(e->out_dir);
  uvt__free(e->conf);
  uvt__free(e->partition);
  uvt__free(e->free_slots);
  uvt__free(e->loaded);
  free_strv(e->sbatch_allow);
  uvt__free(e);
}

/* The engine is freed once it is closed and the registry released every
 * task of it (a record may outlive the engine: its release comes later). */
static void engine_closed(uv_handle_t *h) {
  uvt_slurm_engine_t *e = h->data;
  void (*cb)(void *) = e->close_cb;
  void *data = e->close_data;
  int last;
  if (--e->handles > 0)
    return; /* the other handle's close callback finishes */
  uv_mutex_lock(&e->mutex);
  uvt__journal_close(&e->journal);
  e->closed = 1;
  last = e->jobs == 0;
  uv_mutex_unlock(&e->mutex);
  if (last)
    engine_free(e);
  if (cb != NULL)
    cb(data);
}

/* E-3: a file changed in out_dir; a wrapper's exit-code file (<key>.rc
 * or <key>.<index>.rc, written as the command ends) means a job is
 * ending. */
static void rc_event(uv_fs_event_t *h, const char *filename, int events,
                     int status) {
  uvt_slurm_engine_t *e = h->data;
  size_t n = filename != NULL ? strlen(filename) : 0;
  (void)events;
  if (status < 0 || n < 4 || strcmp(filename + n - 3, ".rc") != 0)
    return;
  uv_mutex_lock(&e->mutex);
  e->fast_gap = UVT__SLURM_FAST_MS;
  uv_cond_signal(&e->cond);
  uv_mutex_unlock(&e->mutex);
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
    /* E-12: the host hears of the submission (its callback may call
     * into the engine: the mutex is not held). */
    if (j->news >= 0 && !j->news_told && j->submitted != NULL && !e->closing) {
      uvt_slurm_submit_t what = (uvt_slurm_submit_t)j->news;
      char id[UVT_ID_MAX], why[256];
      uint32_t job = j->job;
      uvt_slurm_submitted_cb cb = j->submitted;
      void *data = j->submitted_data;
      memcpy(id, j->id, sizeof(id));
      memcpy(why, j->why, sizeof(why));
      j->news = -1;
      if (what != UVT_SLURM_RETRYING)
        j->news_told = 1;
      j->refs++;
      uv_mutex_unlock(&e->mutex);
      cb(data, id, what, what == UVT_SLURM_ACCEPTED ? job : 0,
         what == UVT_SLURM_ACCEPTED ? "" : why);
      uv_mutex_lock(&e->mutex);
      uvt__sjob_unref_locked(j);
    }
    uvt__sjob_unref_locked(j);
  }
  while ((l = uvt__list_pop(&e->infos_done)) != NULL) {
    uvt__info_t *r = uvt__container_of(l, uvt__info_t, link);
    uv_mutex_unlock(&e->mutex);
    if (!e->closing)
      r->cb(r->data, r->status, r->text != NULL ? r->text : "out of memory");
    uvt__free(r->text);
    uvt__free(r);
    uv_mutex_lock(&e->mutex);
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
    uvt__journal_put(e, j, 'D');
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
    /* E-15: the task's record is written again in place. */
    if (o != j->out_off || r != j->err_off)
      uvt__journal_put(e, j, j->job != 0 ? 'J' : 'T');
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

void uvt_slurm_engine_options_init_size(uvt_slurm_engine_options_t *o,
                                        size_t size) {
  uvt_slurm_engine_options_t d;
  memset(&d, 0, sizeof(d));
  d.size = sizeof(d);
  d.poll_ms = 250;
  d.heartbeat_ms = 1000;
  d.lost_after_ms = 30000;
  d.submit_retry_ms = 120000;
  uvt__opts_init(o, size, &d, sizeof(d));
}

void uvt_slurm_options_init_size(uvt_slurm_options_t *o, size_t size) {
  uvt_slurm_options_t d;
  memset(&d, 0, sizeof(d));
  d.size = sizeof(d);
  d.output_cap_bytes = 1u << 20;
  uvt__opts_init(o, size, &d, sizeof(d));
}

/* The exported symbols of the old names (the header's macros hide them). */
void(uvt_slurm_engine_options_init)(uvt_slurm_engine_options_t *o) {
  uvt_slurm_engine_options_init_size(o, sizeof(*o));
}

void(uvt_slurm_options_init)(uvt_slurm_options_t *o) {
  uvt_slurm_options_init_size(o, sizeof(*o));
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
                         const uvt_slurm_engine_options_t *o_in,
                         uvt_slurm_engine_t **out) {
  uvt_slurm_engine_options_t own;
  const uvt_slurm_engine_options_t *o = &own;
  char why[UVT__OPTS_WHY];
  uvt_slurm_engine_t *e;
  int err, bad = 0;

  if (reg == NULL || o_in == NULL || out == NULL)
    return UV_EINVAL;
  /* the caller's first o->size bytes over the defaults, once; from
   * here on only the copy is read. */
  uvt_slurm_engine_options_init_size(&own, sizeof(own));
  if (uvt__opts_load(&own, sizeof(own), o_in,
                     UVT__OPTS_MIN(uvt_slurm_engine_options_t, conf),
                     why) != 0) {
    uvt_log(reg, UVT_LOG_ERROR,
            "uvt_slurm_engine_new: options refused: %s; call "
            "uvt_slurm_engine_options_init()",
            why);
    return UV_EINVAL;
  }
  if (o->out_dir == NULL || o->out_dir[0] == '\0')
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
  uvt__journal_init(&e->journal);
  e->out_dir = dup_or_null(o->out_dir, &bad);
  e->conf = dup_or_null(o->conf, &bad);
  e->partition = dup_or_null(o->partition, &bad);
  e->poll_ms = o->poll_ms > 0 ? o->poll_ms : 250;
  e->heartbeat_ms = o->heartbeat_ms >= 1000 ? o->heartbeat_ms : 1000;
  e->lost_after_ms = o->lost_after_ms;
  e->detach_on_close = o->detach_on_close != 0;
  e->uid = (uint32_t)getuid();
  e->submit_retry_ms = o->submit_retry_ms > 0 ? o->submit_retry_ms : 120000;
  uvt__list_init(&e->requests);
  uvt__list_init(&e->polled);
  uvt__list_init(&e->to_loop);
  uvt__list_init(&e->infos);
  uvt__list_init(&e->infos_done);
  if (o->sbatch_allow != NULL) {
    size_t n = 0, i;
    while (o->sbatch_allow[n] != NULL)
      n++;
    if ((e->sbatch_allow = uvt__calloc(n + 1, sizeof(char *))) == NULL)
      bad = 1;
    for (i = 0; !bad && i < n; i++) {
      if (!uvt__sbatch_known(o->sbatch_allow[i])) {
        err = UV_EINVAL;
        goto fail;
      }
      e->sbatch_allow[i] = dup_or_null(o->sbatch_allow[i], &bad);
    }
  }
  if (bad) {
    err = UV_ENOMEM;
    goto fail;
  }
  if (o->journal != NULL && (err = uvt__sjournal_open(e, o->journal)) != 0) {
    if (err == UV_EBUSY)
      uvt_log(reg, UVT_LOG_ERROR,
              "slurm: journal %s is in use by another engine (this process "
              "or another): not opened",
              o->journal);
    goto fail;
  }
  /* E-5: no id the journal ever named is handed out again, adopted or
   * not (its delivered tasks are not adopted at all). */
  if (e->id_high > 0 && (err = uvt_reserve_ids(reg, "slurm", e->id_high)) != 0)
    goto fail;
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
  e->handles = 1;
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
  /* E-3: the wrappers' exit-code files, so an end is seen at once, not
   * at the next poll.  Without it (a file system inotify cannot watch)
   * the polls alone find ends, as before. */
  if (uv_fs_event_init(e->loop, &e->rc_watch) == 0) {
    e->rc_watch.data = e;
    e->handles++;
    e->rc_watching = 1;
    if (uv_fs_event_start(&e->rc_watch, rc_event, e->out_dir, 0) != 0) {
      e->rc_watching = 0;
      uv_close((uv_handle_t *)&e->rc_watch, engine_closed);
    }
  }
  *out = e;
  return 0;
fail:
  uvt__journal_close(&e->journal);
  uvt__free(e->out_dir);
  uvt__free(e->conf);
  uvt__free(e->partition);
  uvt__free(e->loaded);
  free_strv(e->sbatch_allow);
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
  if (e->rc_watching) {
    e->rc_watching = 0;
    uv_close((uv_handle_t *)&e->rc_watch, engine_closed);
  }
  uv_mutex_lock(&e->mutex);
  e->stop = 1;
  uv_cond_signal(&e->cond);
  if (e->thread_done)
    uv_async_send(&e->async);
  uv_mutex_unlock(&e->mutex);
}

int uvt_slurm_cluster_info(uvt_slurm_engine_t *e,
                           void (*cb)(void *data, int status, const char *text),
                           void *data) {
  uvt__info_t *r;
  if (e == NULL || cb == NULL)
    return UV_EINVAL;
  UVT_LOOP_ONLY(e->reg);
  if (e->closing)
    return UVT_ECLOSING;
  if ((r = uvt__calloc(1, sizeof(*r))) == NULL)
    return UV_ENOMEM;
  r->cb = cb;
  r->data = data;
  uv_mutex_lock(&e->mutex);
  uvt__list_insert_tail(&e->infos, &r->link);
  uv_cond_signal(&e->cond);
  uv_mutex_unlock(&e->mutex);
  return 0;
}

uvt__sjob_t *uvt__slurm_find(uvt_slurm_engine_t *e, const char *id,
                             const uvt_agent_t *caller, int *err) {
  uvt_task_t *t;
  uvt__sjob_t *j;
  if ((*err = uvt_task_lookup(e->reg, id, caller, &t)) != 0)
    return NULL;
  if (uvt_task_hooks(t)->cancel != slurm_cancel ||
      (j = uvt_task_arg(t))->e != e) {
    *err = UV_EINVAL;
    return NULL;
  }
  return j;
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
