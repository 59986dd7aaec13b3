/* Engine-backed tasks: Slurm batch jobs (E-1..E-7, docs/contract.md).
 *
 * A task of kind "slurm" (ids "slurm-N") is one batch job.  The registry
 * stays the control surface: the same ids, session fence, reads, waits,
 * kills and exactly-once notices as a local task; the work runs wherever
 * the cluster puts it, and with a journal it outlives the host.
 *
 *   uvt_slurm_start()     submits the job (on the engine's thread) and
 *                         registers the task at once (R-START-5)
 *   uvt_read()            returns and consumes what the job wrote to its
 *                         stdout/stderr files since the last read (E-2)
 *   uvt_kill()            cancels the whole job; the task settles `killed`
 *                         once Slurm holds it no longer COMPLETING (E-3)
 *   uvt_wait(), notices   as for any task; outcomes per E-4
 *   adopt_all             a restarted host takes its jobs back under the
 *                         same ids (E-5, R-START-6)
 *
 * Threads: every libslurm call (submit, load, kill) runs on one thread of
 * the engine's own, never on the loop thread nor on libuv's threadpool, so
 * a controller that hangs never blocks the host.  Results come back to the
 * loop through a uv_async_t.  The functions below are loop-thread only.
 *
 * libslurm keeps its configuration per process: the first engine's `conf`
 * (or SLURM_CONF, or the default path) holds until the last engine closes.
 * The output directory must be shared between the host and the nodes (the
 * jobs write their output, heartbeat and exit files there).
 */
#ifndef UVTASKS_SLURM_H
#define UVTASKS_SLURM_H

#include <stddef.h>
#include <stdint.h>

#include "../uvtasks.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uvt_slurm_engine_s uvt_slurm_engine_t;

/* E-12: what became of a submission, told to the host once the
 * controller answered (uvt_slurm_options_t.submitted). */
typedef enum {
  UVT_SLURM_ACCEPTED = 0, /* the controller took it: `job` is its id */
  UVT_SLURM_REFUSED = 1,  /* refused (`why`: Slurm's reason), or the
                             retries ran out; the task settles `failed` */
  UVT_SLURM_RETRYING = 2  /* the controller did not answer: the engine
                             tries again with backoff (`why` says until
                             when); ACCEPTED or REFUSED follows */
} uvt_slurm_submit_t;

/* Called on the loop thread: RETRYING at most once, then ACCEPTED or
 * REFUSED once (never after the engine was closed).  `id` and `why` are
 * valid during the call. */
typedef void (*uvt_slurm_submitted_cb)(void *data, const char *id,
                                       uvt_slurm_submit_t what, uint32_t job,
                                       const char *why);

/* Options of uvt_slurm_engine_new().  Initialise with
 * uvt_slurm_engine_options_init(); only its first `size` bytes are read
 * see "Option structs and the ABI" in uvtasks.h). */
typedef struct {
  /* sizeof the struct in the host's headers; set by
   * uvt_slurm_engine_options_init().  0 is refused. */
  size_t size;
  /* slurm.conf of the cluster; NULL = $SLURM_CONF or libslurm's default. */
  const char *conf;
  /* Required.  A directory shared with the nodes, created if missing:
   * each task's files, <key>.out, .err, .hb (heartbeat), .rc (exit code),
   * .sid (the job's session) and .t (a FIFO the wrapper waits on, removed
   * when the task ends); the job script itself goes to the controller.
   * The engine never removes the others (docs/slurm.md). */
  const char *out_dir;
  /* The journal file (E-5), or NULL for none (jobs then die with the
   * host's registry, or are left running with detach_on_close). */
  const char *journal;
  /* How often the engine asks the controller about its jobs, in ms
   * (default 250), and reads the jobs' output files for new bytes. */
  uint64_t poll_ms;
  /* Partition for tasks that name none; NULL = the cluster's default. */
  const char *partition;
  /* E-6: 1 = closing the registry (or disposing the tasks' owner) drops
   * the records of live jobs without cancelling them (they keep running;
   * a journal finds them again).  0 (default) = a close cancels them like
   * any task. */
  int detach_on_close;
  /* E-7: the job's wrapper touches its heartbeat file every
   * heartbeat_ms (default 1000, in whole seconds, at least 1 s); a running
   * job whose heartbeat is older than lost_after_ms (default 30000, 0 = no
   * check) is cancelled and settles `failed` "lost (no heartbeat for N s)". */
  uint64_t heartbeat_ms;
  uint64_t lost_after_ms;
  /* E-12 (v4): a submission the controller does not answer (down,
   * unreachable, busy) is tried again with backoff (1 s, doubling, at most
   * 30 s between tries; each try waits up to the cluster's MessageTimeout)
   * until this many ms passed since the first try (default 120000), then
   * the task fails "sbatch failed: ... (gave up after N tries in S s)". */
  uint64_t submit_retry_ms;
  /* E-13 (v4): the extra sbatch options a task may give in sbatch_args,
   * by name without dashes ("constraint", "exclusive", ...: the names
   * uvt_slurm_options_t.sbatch_args lists); NULL-terminated; NULL = none
   * (the default).  The host's choice, never the model's. */
  const char *const *sbatch_allow;
  /* private: zero it */
  void *reserved_[4];
} uvt_slurm_engine_options_t;

/* Fill the first `size` bytes of `o` with the defaults above (everything
 * else zero/NULL) and set o->size = size: what the macro
 * uvt_slurm_engine_options_init(o) calls with the host's sizeof *o.
 * Writes nothing past `size` bytes; bytes past the library's own struct
 * are zeroed.  Accepts NULL.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void
uvt_slurm_engine_options_init_size(uvt_slurm_engine_options_t *o,
                                   size_t size);

/* uvt_slurm_engine_options_init_size(o, sizeof *o) with this library's
 * sizeof: for a host built against the same headers as the library (a
 * binding, a dlsym() user).  A C host gets the macro of this name.  Accepts NULL.
 * Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_slurm_engine_options_init(uvt_slurm_engine_options_t *o);
#define uvt_slurm_engine_options_init(o)                                       \
  uvt_slurm_engine_options_init_size((o), sizeof *(o))

/* Start an engine for `reg` (its loop).  Creates out_dir (mode 0700 if
 * missing), opens (creates) the journal (E-5: the next new task's id is
 * above every id it ever named), starts the engine thread and
 * waits for its libslurm set-up (which reads slurm.conf and writes the
 * process environment, so no thread may read it meanwhile).  The
 * host closes the engine after the registry (see below).
 * Returns 0, UV_EINVAL (NULL reg, o, out, or out_dir; `o` not made by
 * uvt_slurm_engine_options_init(), size 0, or of a size this library
 * refuses, A-2, logged), UV_ENOENT or
 * UV_EACCES (no readable slurm.conf at `conf`, $SLURM_CONF or
 * /etc/slurm/slurm.conf: libslurm would end the process), UV_ENOMEM, or
 * the error of creating out_dir / opening the journal / starting the
 * thread (the journal: UV_ELOOP for a symlink at the file or its
 * directory, UV_EPERM for a file that is not a regular file of the
 * effective user, UV_EINVAL for a file name over 250 bytes: S-7), or
 * UV_EBUSY: the journal is another engine's, in this process or another
 * (E-5: one engine per journal; the engine holds an exclusive flock(2) on
 * "<journal>.lock" until it closes or its process ends; logged at
 * UVT_LOG_ERROR with the journal's path, nothing of it touched).
 * Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_engine_new(uvt_registry_t *reg,
                                    const uvt_slurm_engine_options_t *o,
                                    uvt_slurm_engine_t **out);

/* Two-phase close: stops the engine thread (a libslurm call in progress
 * ends first, bounded by Slurm's MessageTimeout), closes its handles and
 * the journal, frees the engine, then calls cb(data) on the loop thread.
 * Close the registry first (its close cancels or detaches the jobs through
 * the engine); tasks still live when the engine closes are settled
 * `failed` "slurm engine closed" and their jobs left running (a journal
 * keeps them).  Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_slurm_engine_close(uvt_slurm_engine_t *e,
                                       void (*cb)(void *data), void *data);

/* Options of uvt_slurm_start().  Initialise with uvt_slurm_options_init();
 * only its first `size` bytes are read (A-2: see "Option structs and the
 * ABI" in uvtasks.h). */
typedef struct {
  /* sizeof the struct in the host's headers; set by
   * uvt_slurm_options_init().  0 is refused. */
  size_t size;
  /* Exactly one of command (run by bash -c) and argv (NULL-terminated). */
  const char *command;
  const char *const *argv;
  const char *cwd; /* NULL = the host's working directory */
  /* E-10 (v4): the job's environment is a local task's (P-SPAWN-3,
   * P-SPAWN-3b, M-MCP-14): the host's minus every variable that looks
   * like a credential, plus the fixed additions, plus these "K=V"
   * entries (NULL-terminated), which win and pass the scrub.  (v3 used
   * the host's whole environment, or these entries alone.) */
  const char *const *env;
  uvt_agent_t *owner;      /* NULL = unowned */
  const char *label;       /* NULL = the command (or argv[0]) */
  uint32_t cpus;           /* 0 = 1 */
  uint64_t mem_mb;         /* 0 = the partition's default */
  uint32_t time_limit_min; /* 0 = the partition's limit */
  const char *partition;   /* NULL = the engine's */
  /* The most bytes one read returns per stream (default 1 MiB, at least
   * 4).  While the job runs the files keep the rest for the next read:
   * nothing is dropped.  The task's end takes the last read (up to this
   * much of each stream): what is past it then stays in the files only,
   * and that read ends with a line saying how many bytes and which files
   * (full paths). */
  size_t output_cap_bytes;
  /* E-13 (v4), as sbatch's options of the same names; NULL / 0 = the
   * cluster's default.  With ntasks or nodes, `cpus` is per task
   * (--cpus-per-task). */
  const char *account; /* --account */
  const char *qos;     /* --qos */
  const char *gres;    /* --gres, e.g. "gpu:1" or "gpu:a100:2" */
  uint32_t nodes;      /* --nodes (default 1) */
  uint32_t ntasks;     /* --ntasks (default 1); the job's srun uses them */
  /* --dependency with task ids for job ids: "afterok:slurm-2:slurm-3",
   * types after, afterany, afterok, afternotok, aftercorr, joined by ','
   * (all) or '?' (any), or "singleton".  Each id must be a Slurm task of
   * this engine the owner may see. */
  const char *dependency;
  /* --array, e.g. "0-9" or "1-100%10": one task for the whole array; its
   * detail counts the elements by state, a kill cancels them all, the
   * output shows each element's lines under "[element N]".  Adopting an
   * array after a restart reads each element's output from the start. */
  const char *array;
  /* --signal: "SIG@SECONDS" (SIG one of HUP, INT, QUIT, USR1, USR2,
   * ALRM, TERM, XCPU, in any case, with or without SIG, or its number):
   * the command's process group gets SIG about SECONDS (1 to 65535)
   * before the time limit (Slurm may send it up to a minute early). */
  const char *signal;
  /* Extra options "name=value" or "name" (no dashes), each allowed by the
   * engine's sbatch_allow; NULL-terminated.  Known names: constraint,
   * exclusive (no value), reservation, nodelist, exclude, mem-per-cpu
   * (MB), tmp (MB), comment (any text without control characters, up to
   * 1024 bytes; the others take no spaces, quotes or shell characters),
   * nice, licenses, time-min (minutes). */
  const char *const *sbatch_args;
  /* E-12: told once the controller accepted or refused the job (or while
   * it does not answer); NULL = not told (the snapshot's detail says). */
  uvt_slurm_submitted_cb submitted;
  void *submitted_data;
  /* private: zero it */
  void *reserved_[4];
} uvt_slurm_options_t;

/* Fill the first `size` bytes of `o` with the defaults above and set
 * o->size = size: what the macro uvt_slurm_options_init(o) calls
 * with the host's sizeof *o.  Writes nothing past `size` bytes; bytes past
 * the library's own struct are zeroed.  Accepts NULL.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_slurm_options_init_size(uvt_slurm_options_t *o,
                                            size_t size);

/* uvt_slurm_options_init_size(o, sizeof *o) with this library's sizeof:
 * for a host built against the same headers as the library (a binding, a
 * dlsym() user).  A C host gets the macro of this name.  Accepts NULL.
 * Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_slurm_options_init(uvt_slurm_options_t *o);
#define uvt_slurm_options_init(o) uvt_slurm_options_init_size((o), sizeof *(o))

/* Submit a batch job and register it as task "slurm-N" (E-1).  The task
 * exists when this returns; the submission itself happens on the engine
 * thread: a refusal settles the task `failed` "sbatch failed: REASON",
 * and o->submitted hears of the answer (E-12).  The snapshot's detail
 * says where the job is: "submitting", "pending: REASON (slurm job N)",
 * "slurm job N on NODES", for an array the elements by state.
 * With a journal, the task is written (and fsync'd) before the job is
 * submitted.  The job: requeue off, name "uvt-<key>" (key: "slurm-" and
 * 8 random hex digits), a wrapper script handed to Slurm that runs the
 * command and writes <out_dir>/<key>.hb (heartbeat) and <key>.rc (exit
 * code); output in <key>.out and <key>.err (docs/slurm.md lists every
 * file).  Until the job runs, the
 * snapshot's detail says why it is pending ("pending: Resources").
 * Returns uvt_start()'s errors, UV_EINVAL (NULL e or o; `o` not made by
 * uvt_slurm_options_init(), size 0, or of a size this library refuses,
 * A-2, logged; none or both of
 * command and argv, an empty command or argv, output_cap_bytes < 4, a
 * malformed array, signal or dependency, a dependency on an id that is
 * not a Slurm task of this engine, an sbatch_args entry the engine does
 * not allow or know; E-13), UVT_ENOTASK / UVT_EFOREIGN (a dependency's
 * id, behind the owner's fence),
 * UV_E2BIG (the command, or one argv string, of 128 KiB or more: the
 * kernel's limit for one argument, so it could not run on the node),
 * UVT_ECLOSING (the engine is closing), UVT_ETHREAD (another thread),
 * UV_ENOMEM, or the error of reading the working directory.  Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_start(uvt_slurm_engine_t *e,
                               const uvt_slurm_options_t *o,
                               char id_out[UVT_ID_MAX]);

/* E-5: register every job of the journal that has not been reported as
 * ended, under its old id (R-START-6), owned by `owner` (NULL =
 * unowned), labelled "slurm job N (adopted)".
 * E-9: a journal line must name this engine's cluster, its user and the
 * job name uvt-<key>, and the controller must confirm the user and the
 * name: the engine thread asks it (this call waits for that one answer,
 * bounded by the cluster's MessageTimeout).  A line that does not match
 * is dropped with a log line (UVT_LOG_WARN) and its job is neither
 * adopted nor cancelled.  If the controller does not answer, the jobs
 * are registered unconfirmed: nothing is sent to them (a kill waits) until
 * it answers, and one it then disowns settles `failed` "not adopted:
 * ..." untouched.  No new task takes a journalled id, before or after
 * this call: uvt_slurm_engine_new() moved the registry's id counter past
 * every id the journal ever named, delivered tasks' too, so an id is
 * never handed out again for another job.  Output resumes at the consumed
 * offsets; a job that ended while no host watched settles from what the
 * controller (or, once the controller forgot it, the job's exit-code file)
 * says.  A job whose end was already delivered to listeners is not registered
 * again.  Returns the number of tasks registered (>= 0), or UV_EINVAL
 * (NULL e, no journal), UVT_ETHREAD (another thread), or uvt_start()'s error for the first job that failed (jobs
 * after it are not adopted; those before it are).  Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_adopt_all(uvt_slurm_engine_t *e, uvt_agent_t *owner);

/* E-14: what the cluster offers the engine's user, as text for a person
 * or a model: each partition with its state, time limit, nodes (idle of
 * total), CPUs and memory per node and its gres; then the user's jobs in
 * the controller (id, name, state, time, nodes or pending reason).
 * Asked on the engine thread; cb(data, 0, text) on the loop thread, or
 * cb(data, error, message) when the controller did not answer.  `text`
 * is valid during the call.  Not called once the engine is closed.
 * Returns 0, UV_EINVAL (NULL e or cb), UVT_ECLOSING, UVT_ETHREAD,
 * UV_ENOMEM.
 * Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_cluster_info(uvt_slurm_engine_t *e,
                                      void (*cb)(void *data, int status,
                                                 const char *text),
                                      void *data);

/* The Slurm job id of task `id`, behind the fence (R-OWN-2).
 * Returns 0, UVT_ENOTASK, UVT_EFOREIGN, UV_EINVAL (NULL arguments, or a
 * task that is not a Slurm task) or UV_EAGAIN (not submitted yet).
 * Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_job_id(uvt_registry_t *reg, const char *id,
                                const uvt_agent_t *caller, uint32_t *job);

#ifdef __cplusplus
}
#endif
#endif /* UVTASKS_SLURM_H */
