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

typedef struct {
  /* slurm.conf of the cluster; NULL = $SLURM_CONF or libslurm's default. */
  const char *conf;
  /* Required.  A directory shared with the nodes, created if missing: each
   * task's job script, stdout, stderr, heartbeat and exit-code files. */
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
  /* private: zero it */
  void *reserved_[4];
} uvt_slurm_engine_options_t;

/* Defaults as above, everything else zero/NULL.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_slurm_engine_options_init(uvt_slurm_engine_options_t *o);

/* Start an engine for `reg` (its loop).  Creates out_dir (mode 0700 if
 * missing), opens (creates) the journal, starts the engine thread and
 * waits for its libslurm set-up (which reads slurm.conf and writes the
 * process environment, so no thread may read it meanwhile).  The
 * host closes the engine after the registry (see below).
 * Returns 0, UV_EINVAL (NULL reg, o, out, or out_dir), UV_ENOENT or
 * UV_EACCES (no readable slurm.conf at `conf`, $SLURM_CONF or
 * /etc/slurm/slurm.conf: libslurm would end the process), UV_ENOMEM, or
 * the error of creating out_dir / opening the journal / starting the
 * thread.
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

typedef struct {
  /* Exactly one of command (run by bash -c) and argv (NULL-terminated). */
  const char *command;
  const char *const *argv;
  const char *cwd;         /* NULL = the host's working directory */
  const char *const *env;  /* "K=V" NULL-terminated; NULL = the host's */
  uvt_agent_t *owner;      /* NULL = unowned */
  const char *label;       /* NULL = the command (or argv[0]) */
  uint32_t cpus;           /* 0 = 1 */
  uint64_t mem_mb;         /* 0 = the partition's default */
  uint32_t time_limit_min; /* 0 = the partition's limit */
  const char *partition;   /* NULL = the engine's */
  /* The most bytes one read returns per stream (default 1 MiB, at least
   * 4).  The files keep the rest for the next read: nothing is dropped. */
  size_t output_cap_bytes;
  /* private: zero it */
  void *reserved_[4];
} uvt_slurm_options_t;

/* Defaults as above.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_slurm_options_init(uvt_slurm_options_t *o);

/* Submit a batch job and register it as task "slurm-N" (E-1).  The task
 * exists when this returns; the submission itself happens on the engine
 * thread: a refusal settles the task `failed` "sbatch failed: REASON".
 * With a journal, the task is written (and fsync'd) before the job is
 * submitted.  The job: requeue off, name "uvt-<key>" (key: "slurm-" and
 * 8 random hex digits), a wrapper script handed to Slurm that runs the
 * command and writes <out_dir>/<key>.hb (heartbeat) and <key>.rc (exit
 * code); output in <key>.out and <key>.err.  Until the job runs, the
 * snapshot's detail says why it is pending ("pending: Resources").
 * Returns uvt_start()'s errors, UV_EINVAL (NULL e or o, none or both of
 * command and argv, an empty command or argv, output_cap_bytes < 4),
 * UVT_ECLOSING (the engine is closing), UV_ENOMEM, or the error of
 * reading the working directory.  Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_start(uvt_slurm_engine_t *e,
                               const uvt_slurm_options_t *o,
                               char id_out[UVT_ID_MAX]);

/* E-5: register every job of the journal that has not been reported as
 * ended, under its old id (R-START-6), owned by `owner` (NULL =
 * unowned), labelled "slurm job N (adopted)".  Call it before starting
 * new tasks: a new task may otherwise take a journalled id first (then
 * that job's adoption fails with UV_EEXIST).  Output resumes at the consumed offsets; a job that ended
 * while no host watched settles from what the controller (or, once the
 * controller forgot it, the job's exit-code file) says.  A job whose end
 * was already delivered to listeners is not registered again.
 * Returns the number of tasks registered (>= 0), or UV_EINVAL (NULL e,
 * no journal), or uvt_start()'s error for the first job that failed (jobs
 * after it are not adopted; those before it are).  Thread: loop.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_slurm_adopt_all(uvt_slurm_engine_t *e, uvt_agent_t *owner);

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
