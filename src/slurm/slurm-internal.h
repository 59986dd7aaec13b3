/* The Slurm engine's shared state (E-1..E-7).  The engine thread makes
 * every libslurm call; the loop thread runs the task hooks.  `mutex`
 * guards what both touch: the request and poll lists, each job's fields
 * marked (M), and the journal's writes. */
#ifndef UVT_SLURM_INTERNAL_H
#define UVT_SLURM_INTERNAL_H

#include <slurm/slurm.h>

#include "leaf/alloc.h"
#include "leaf/journal.h"
#include "leaf/list.h"
#include "uvtasks/producer.h"
#include "uvtasks/slurm.h"

#define UVT__SLURM_KEY_MAX 64
#define UVT__SLURM_CLUSTER_MAX 64
/* journal.c: bytes of one task's record (a divisor of 512). */
#define UVT__JOURNAL_REC 512

typedef struct uvt__sjob_s uvt__sjob_t;

/* acct.c (E-14): what the site's accounting keeps, and a job's record. */
enum { UVT__ACCT_DBD = 1, UVT__ACCT_JOBCOMP = 2 };
enum { UVT__ACCT_OURS = 1, UVT__ACCT_FOREIGN = 2 };
typedef struct {
  int found;          /* 0 no record, else UVT__ACCT_* */
  uint32_t state;     /* OURS: the ended base state (JOB_*) */
  uint32_t exit_code; /* OURS: a wait status, as job_info_t's exit_code */
  char why[200];      /* FOREIGN: whose record it is */
} uvt__acct_t;

/* E-3: the first gap between polls once a job's end is near (its wrapper
 * wrote the exit-code file: the controller's COMPLETED follows, within
 * milliseconds on a quiet machine, seconds on a loaded one); each poll
 * doubles it, up to poll_ms. */
#define UVT__SLURM_FAST_MS 10

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
  uvt__journal_t journal; /* fd -1 = none (src/leaf/journal.h) */
  uint32_t uid;           /* the submitting user (E-9) */
  uint64_t poll_ms;
  uint64_t submit_retry_ms; /* E-12: how long a down controller is retried */
  char **sbatch_allow;      /* E-13: the host's allowlist (NULL-terminated) */
  /* Set by the thread after slurm_init, before `ready` (read-only after). */
  char cluster[UVT__SLURM_CLUSTER_MAX]; /* ClusterName (E-9) */
  uint32_t kill_wait_s;                 /* KillWait (E-11) */
  int acct_kinds; /* E-14: UVT__ACCT_* the site keeps (acct.c) */
  /* journal.c (M): slots of the records (E-15) */
  int64_t slots;       /* records in the file, live or free */
  int64_t *free_slots; /* freed slots to use again */
  size_t free_slots_n, free_slots_cap;
  struct uvt__journal_entry_s *loaded; /* live entries found at open */
  size_t loaded_n;
  uint64_t id_high; /* E-5: the highest id number the journal named */
  uint64_t heartbeat_ms;
  uint64_t lost_after_ms;
  int detach_on_close;
  /* (M) */
  struct uvt__link requests;   /* jobs with a submit, find or kill to send */
  struct uvt__link polled;     /* jobs whose state the thread follows */
  struct uvt__link to_loop;    /* jobs with news for the loop thread */
  struct uvt__link infos;      /* E-14: cluster_info asked */
  struct uvt__link infos_done; /* ... and answered, for the loop */
  int stop;
  int ready; /* the thread's libslurm set-up is done */
  int thread_done;
  int journal_sync;         /* the journal has lines to fsync before a submit */
  uint64_t silent_at;       /* E-9: when the controller last did not answer */
  uint64_t fast_gap;        /* E-3: the next gap between polls (ms) since a
                               wrapper wrote its exit-code file, or 0 */
  unsigned long fast_polls; /* polls made for that (tests) */
  size_t jobs;              /* jobs not freed yet */
  int journal_err;          /* a journal write failed: logged on the loop */
  int closed;               /* the async handle closed: free at jobs == 0 */
  /* Loop thread only. */
  uv_fs_event_t rc_watch; /* E-3: out_dir, for the wrappers' .rc files */
  int rc_watching;        /* rc_watch is open (uv_close it at close) */
  int handles;            /* handles not closed yet (async, rc_watch) */
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
  uint32_t limit_s; /* the time limit in s (0 = the partition's) */
  size_t cap;
  /* E-13: what cluster users ask for (NULL / 0 = Slurm's default). */
  char *account, *qos, *gres, *array, *signal, *dependency;
  uint32_t nodes, ntasks;
  uvt__sjob_t **deps; /* the tasks `dependency` names (referenced) */
  size_t deps_n;
  char **extra; /* E-13: allowlisted sbatch options, "name=value" */
  size_t extra_n;
  /* E-12: the host hears of the submission once. */
  uvt_slurm_submitted_cb submitted;
  void *submitted_data;
  int64_t slot;       /* the journal record's slot, -1 none (M) */
  uint64_t *elem_off; /* E-13: an array's offsets, 2 per element */
  uint32_t elems;
  /* (M) */
  int refs;            /* the registry's (until release) + the thread's */
  uint32_t job;        /* 0 until the submission returned */
  int want_submit;     /* a submission is queued */
  int want_find;       /* adopted without a job id: find it by name */
  int kills;           /* cancels asked, not yet sent */
  int kill_requested;  /* a kill was asked at all (settles `killed`) */
  int settling;        /* the thread is settling: reads return nothing */
  int detached;        /* E-6: dropped, not cancelled */
  int released;        /* the release hook ran */
  int verified;        /* E-9: the controller confirmed the job is ours */
  int want_verify;     /* E-9: adopted: ask the controller first */
  int adopting;        /* E-9: adopt_all waits for the answer */
  int verify_answer;   /* E-9: 0 none yet, else a UVT__VERIFY_* */
  uint32_t seen_state; /* E-14: the last ended state seen, 0 none */
  uint32_t seen_exit;
  int acct_asked;     /* E-14: accounting was read once the job was gone */
  uvt__acct_t acct;   /* ... and what it said */
  uint64_t submit_t0; /* E-12: the first try (monotonic ms) */
  uint64_t next_try;  /* E-12: when to try again (0 = now) */
  uint32_t tries;
  int news;          /* E-12: UVT_SLURM_* to tell the loop, -1 none */
  int news_told;     /* ACCEPTED / REFUSED told (RETRYING once) */
  char why[256];     /* the controller's reason with the news */
  uint64_t out_off;  /* bytes of stdout consumed by reads */
  uint64_t err_off;  /* the same for stderr */
  char *live_detail; /* pending reason for the loop to show */
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
/* The Slurm task `id` of engine `e` as `caller` may see it, or NULL with
 * *err (uvt_task_lookup's, or UV_EINVAL: not a Slurm task of e). */
uvt__sjob_t *uvt__slurm_find(uvt_slurm_engine_t *e, const char *id,
                             const uvt_agent_t *caller, int *err);
/* array.c: elements in an array spec such as "0-9%2" or "1,4,7-8". */
uint32_t uvt__array_count(const char *spec);
/* The i-th element's index of the spec (i < count). */
uint32_t uvt__array_index(const char *spec, uint32_t i);
void uvt__sjob_free(uvt__sjob_t *j);

/* output.c: read the job's new output from the consumed offsets.  `final`:
 * the job ended (no byte is held back for an unfinished UTF-8 sequence,
 * and what is past the cap is named in a last line).  Advances the offsets.
 * Caller holds the mutex.  Returns 0 or UV_ENOMEM. */
int uvt__sjob_read(uvt__sjob_t *j, uvt_buf_t *out, int final);
void uvt__sjob_path(const uvt__sjob_t *j, const char *ext, char *buf,
                    size_t size);

/* journal.c (E-5, E-9, E-15): a record per task, written in place.
 * Open: read the journal (this form or v3's), write the live records to a
 * new file renamed over it, keep them in e->loaded for adoption.
 * Put: (re)write j's record in state T, J or D (D frees its slot).
 * Mutex held (or before the thread starts). */
typedef struct uvt__journal_entry_s {
  char id[UVT_ID_MAX];
  char key[UVT__SLURM_KEY_MAX];
  char cluster[UVT__SLURM_CLUSTER_MAX]; /* "" = not recorded (v3) */
  uint32_t job;
  uint32_t uid;
  int has_identity; /* uid and cluster were recorded (not v3) */
  uint32_t limit_s;
  int array;
  uint64_t out_off, err_off;
  int done;
  int64_t slot;
} uvt__journal_entry_t;
int uvt__sjournal_open(uvt_slurm_engine_t *e, const char *path);
void uvt__journal_put(uvt_slurm_engine_t *e, uvt__sjob_t *j, char state);
void uvt__sjournal_sync(uvt_slurm_engine_t *e);

/* E-9: what the controller says of an adopted job. */
enum {
  UVT__VERIFY_OURS = 1,    /* it holds the job: our user, our name */
  UVT__VERIFY_FOREIGN = 2, /* another user's or another name: drop */
  UVT__VERIFY_GONE = 3,    /* it no longer holds the job id */
  UVT__VERIFY_NOANSWER = 4 /* it did not answer: ask again later */
};

/* sbatch.c (E-13): the extra sbatch options a host may allow. */
int uvt__sbatch_known(const char *name);
/* "name=value" or "name": 0, or UV_EINVAL (unknown, a bad value). */
int uvt__sbatch_check(const char *arg);
void uvt__sbatch_apply(job_desc_msg_t *d, const char *arg);

/* submit.c (E-13): "SIG@SECONDS", SIG one of the signals the wrapper
 * passes on, by name in any case (SIG prefix or not) or by number; the
 * number in *num.  Returns 0 or UV_EINVAL. */
int uvt__slurm_signal_parse(const char *s, int *num, unsigned *secs);

/* The kernel's limit for one argument or environment string
 * (MAX_ARG_STRLEN, with its NUL): a command line runs as bash -c's one
 * argument, so a longer one could not run on the node. */
#define UVT__SLURM_ARG_MAX (32 * 4096)

/* E-10 (src/process/env.c): a local task's environment (the host's minus
 * credentials, the fixed additions, then `extra`) as a new array of new
 * strings (the library's allocator), NULL-terminated, count in *n.
 * Returns NULL (no memory). */
char **uvt__env_scrubbed_copy(const char *const *extra, size_t *n);

/* state.c: E-4, the outcome of a job that left Slurm's queue. */
typedef struct {
  uvt_status_t status;
  char detail[160];
} uvt__slurm_end_t;
void uvt__slurm_map_end(uint32_t state, uint32_t exit_code, uint32_t job,
                        int kill_requested, uvt__slurm_end_t *end);
/* E-7, E-11: the batch script that runs o's command or argv, its files
 * at `base` (<base>.hb, .rc, .sid), a heartbeat every beat_s seconds;
 * `array`: each element's files get its index.  Allocated (uvt__free),
 * or NULL (no memory). */
char *uvt__slurm_wrapper(const char *base, unsigned beat_s, int array,
                         const uvt_slurm_options_t *o);

/* E-14: the same from the wrapper's <key>.rc file, once Slurm forgot the
 * job: `text` is its contents (NULL: none), "STATUS [SIGNAL SECONDS]";
 * limit_s the job's time limit (0 unknown). */
void uvt__slurm_map_rc(const char *text, uint32_t job, int kill_requested,
                       uint32_t limit_s, uvt__slurm_end_t *end);
const char *uvt__slurm_state_name(uint32_t state);

/* acct.c (E-14, E-9): a forgotten job's record in Slurm's accounting.
 * Kinds: what slurm.conf says the site keeps (UVT__ACCT_DBD |
 * UVT__ACCT_JOBCOMP, 0 none). */
/* On the engine thread, after slurm_init. */
int uvt__acct_kinds(void);
/* `sacct -n -P -X -j job` with `-o JobID,UID,State,ExitCode` (plain) and
 * with `-o JobID,JobName,UID,State,ExitCode` (named): the record named
 * uvt-<key> of `uid` (OURS), its state and exit code from plain; else
 * FOREIGN when the job id has records and none is ours, or when the two
 * answers do not line up record for record (a name with a line break);
 * else nothing. */
void uvt__acct_parse(const char *plain, const char *named, uint32_t job,
                     const char *key, uint32_t uid, uvt__acct_t *out);
/* Runs sacct (slurmdbd's records, then the job completion log's, as
 * `kinds` says), SLURM_CONF=conf when conf is not NULL.  Without the
 * engine's mutex, on the engine's thread: waits up to 10 s.  No record,
 * no sacct, no answer: found 0. */
void uvt__acct_read(const char *conf, int kinds, uint32_t job, const char *key,
                    uint32_t uid, uvt__acct_t *out);

#endif
