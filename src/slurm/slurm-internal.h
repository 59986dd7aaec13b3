/* The Slurm engine's shared state (E-1..E-7).  The engine thread makes
 * every libslurm call; the loop thread runs the task hooks.  `mutex`
 * guards what both touch: the request and poll lists, each job's fields
 * marked (M), and the journal's writes. */
#ifndef UVT_SLURM_INTERNAL_H
#define UVT_SLURM_INTERNAL_H

#include "leaf/alloc.h"
#include "leaf/list.h"
#include "uvtasks/producer.h"
#include "uvtasks/slurm.h"

#define UVT__SLURM_KEY_MAX 64

typedef struct uvt__sjob_s uvt__sjob_t;

struct uvt_slurm_engine_s {
  uvt_registry_t *reg;
  uv_loop_t *loop;
  uv_async_t async;
  uv_thread_t thread;
  uv_mutex_t mutex;
  uv_cond_t cond;
  uvt_watch_t watch;
  char *out_dir;
  char *conf;
  char *partition;
  int journal_fd; /* -1 = none */
  uint64_t poll_ms;
  uint64_t heartbeat_ms;
  uint64_t lost_after_ms;
  int detach_on_close;
  /* (M) */
  struct uvt__link requests; /* jobs with a submit, find or kill to send */
  struct uvt__link polled;   /* jobs whose state the thread follows */
  struct uvt__link to_loop;  /* jobs with news for the loop thread */
  int stop;
  int ready; /* the thread's libslurm set-up is done */
  int thread_done;
  int journal_sync; /* the journal has lines to fsync before a submit */
  size_t jobs;      /* jobs not freed yet */
  int journal_err;  /* a journal write failed: logged on the loop */
  int closed;       /* the async handle closed: free at jobs == 0 */
  /* Loop thread only. */
  int closing;
  int thread_joined;
  void (*close_cb)(void *data);
  void *close_data;
};

struct uvt__sjob_s {
  uvt_slurm_engine_t *e;
  uvt_task_t *task;
  char id[UVT_ID_MAX];
  char key[UVT__SLURM_KEY_MAX]; /* file names under out_dir */
  char *command_script;         /* the batch script (until submitted) */
  char **env;                   /* copies for the job descriptor */
  size_t env_count;
  char *cwd;
  char *partition;
  uint32_t cpus;
  uint64_t mem_mb;
  uint32_t time_limit_min;
  size_t cap;
  /* (M) */
  int refs;           /* the registry's (until release) + the thread's */
  uint32_t job;       /* 0 until the submission returned */
  int want_submit;    /* a submission is queued */
  int want_find;      /* adopted without a job id: find it by name */
  int kills;          /* cancels asked, not yet sent */
  int kill_requested; /* a kill was asked at all (settles `killed`) */
  int settling;       /* the thread is settling: reads return nothing */
  int detached;       /* E-6: dropped, not cancelled */
  int released;       /* the release hook ran */
  uint64_t out_off;   /* bytes of stdout consumed by reads */
  uint64_t err_off;   /* the same for stderr */
  char *live_detail;  /* pending reason for the loop to show */
  int detail_dirty;
  int64_t hb_mtime;    /* E-7: the heartbeat file's time last seen */
  uint64_t hb_seen_ms; /* when it last changed (monotonic, host clock) */
  int in_requests, in_polled, in_to_loop;
  struct uvt__link request_link, poll_link, loop_link;
};

/* engine.c */
void uvt__sjob_unref_locked(uvt__sjob_t *j);  /* mutex held; may free */
void uvt__sjob_queue_request(uvt__sjob_t *j); /* mutex held */
void uvt__sjob_poll(uvt__sjob_t *j);          /* mutex held */
int uvt__slurm_register(uvt_slurm_engine_t *e, uvt__sjob_t *j,
                        uvt_agent_t *owner, const char *label,
                        const char *want_id, char id_out[UVT_ID_MAX]);
uvt__sjob_t *uvt__sjob_new(uvt_slurm_engine_t *e);
void uvt__sjob_free(uvt__sjob_t *j);

/* output.c: read the job's new output from the consumed offsets.  `final`:
 * the job ended (no byte is held back for an unfinished UTF-8 sequence,
 * and what is past the cap is named in a last line).  Advances the offsets.
 * Caller holds the mutex.  Returns 0 or UV_ENOMEM. */
int uvt__sjob_read(uvt__sjob_t *j, uvt_buf_t *out, int final);
void uvt__sjob_path(const uvt__sjob_t *j, const char *ext, char *buf,
                    size_t size);

/* journal.c: one line per event, appended with one write(2) each.
 *   T <id> <key>            the task exists; its job is being submitted
 *   J <id> <job>            the job id
 *   O <id> <out> <err>      offsets consumed by reads
 *   D <id>                  its end was delivered (never adopt again)
 * Mutex held (or before the thread starts). */
void uvt__journal_line(uvt_slurm_engine_t *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
typedef struct {
  char id[UVT_ID_MAX];
  char key[UVT__SLURM_KEY_MAX];
  uint32_t job;
  uint64_t out_off, err_off;
  int done;
} uvt__journal_entry_t;
/* Every task of the journal, in order of first appearance; free with
 * uvt__free.  Returns 0 or an error. */
int uvt__journal_load(uvt_slurm_engine_t *e, uvt__journal_entry_t **out,
                      size_t *count);

/* state.c: E-4, the outcome of a job that left Slurm's queue. */
typedef struct {
  uvt_status_t status;
  char detail[160];
} uvt__slurm_end_t;
void uvt__slurm_map_end(uint32_t state, uint32_t exit_code, uint32_t job,
                        int kill_requested, uvt__slurm_end_t *end);
/* The same from the wrapper's exit-code file, once Slurm forgot the job. */
void uvt__slurm_map_rc(int have_rc, int rc, uint32_t job, int kill_requested,
                       uvt__slurm_end_t *end);
const char *uvt__slurm_state_name(uint32_t state);

#endif
