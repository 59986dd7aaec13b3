/* Shared helpers for the cmocka suites: loops, registries, a controllable
 * producer, and child accounting (L-1, L-2). */
#ifndef UVTASKS_TEST_UTIL_H
#define UVTASKS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <uv.h>

#include "uvtasks.h"

/* A registry on a fresh loop with one surface attached and a quiet log that
 * records warnings. */
typedef struct {
  uv_loop_t loop;
  uvt_registry_t *reg;
  uvt_surface_t surface;
  int closed;   /* close callback count */
  int warnings; /* log lines at UVT_LOG_WARN or worse */
  char last_warning[512];
} fixture_t;

/* Init loop + registry (options may be NULL) + attach one surface. */
void fixture_init(fixture_t *f, const uvt_options_t *o);
/* Close the registry, run the loop to the end, assert the close callback ran
 * once, uv_run returned 0 and uv_loop_close returned 0 (L-1). */
void fixture_close(fixture_t *f);
/* Run the loop until pred(arg) is true or the loop has nothing left to do. */
void fixture_run_until(fixture_t *f, int (*pred)(void *arg), void *arg);
/* Log callback counting warnings into a fixture_t (log_data). */
void fixture_log(int level, const char *message, void *log_data);
/* /proc/<pid>/<name> into buf, NUL-terminated; its length, or -1. */
ssize_t proc_file(int pid, const char *name, char *buf, size_t size);
/* /proc/<pid>/cmdline into buf with its arguments joined by spaces (the
 * last NUL ends the string); its length with that NUL, or -1. */
ssize_t proc_cmdline(int pid, char *buf, size_t size);
/* Wait, without a loop turn (so no timer of the library fires meanwhile),
 * until a live process runs `argv_joined` (its argv joined by spaces),
 * is a child of `parent` (0: of anyone) and, when sig > 0, ignores signal
 * `sig`: a task's program that got that far, however slow its start.
 * Polls /proc each millisecond for up to max_ms; returns its pid, or 0. */
int proc_reached(const char *argv_joined, int sig, int parent, uint64_t max_ms);

/* Holding the process producer's spawner (its test hook,
 * uvt__process_spawn_hook): after spawn_gate_close(phase), every spawn
 * waits at `phase` (0: before it looks at the request's `cancelled`; 1:
 * once it decided to spawn) until spawn_gate_open() lets it go, one spawn
 * per count.  A test that needs "the spawn is still out" holds it there
 * instead of hoping no loop turn reported it.  spawn_gate_remove() takes
 * the hook away; every held spawn must have been let go by then. */
void spawn_gate_close(int phase);
void spawn_gate_open(int n);
void spawn_gate_remove(void);

/* Which hook of the fake a re-entrant call runs from (R-REENTER-1). */
enum {
  FAKE_RUN = 0,
  FAKE_CANCEL,
  FAKE_READ,
  FAKE_SETTLED,
  FAKE_QUIESCE,
  FAKE_RELEASE
};

/* A controllable producer ("fake"): the test decides when it settles and
 * what cancel returns. */
typedef struct fake_s fake_t;
struct fake_s {
  uvt_task_t *task;
  int runs;
  int run_error; /* returned by run when nonzero */
  int cancels;
  int cancel_error;     /* returned by cancel when nonzero */
  int settle_on_cancel; /* cancel settles killed at once */
  int stream;           /* 1: read_output hook present */
  char pending[4096];   /* stream output not yet read */
  size_t pending_len;
  int releases;
  int settled_hooks;
  char last_reason[128];
  /* Optional quiesce hook (P-KILL-4, P-KILL-6): installed when has_quiesce;
   * returns quiesce_ret (1: the test calls uvt_task_quiescent later). */
  int has_quiesce;
  int quiesce_ret;
  int quiesces;
  /* Optional: called from inside each hook, after the hook counted itself
   * and before it returns (run: before run_error is returned), so a test
   * can call the library from there (R-REENTER-1). */
  void (*inside)(fake_t *fk, int hook);
  void *inside_data;
};

/* Start a fake task; returns uvt_start's result.  kind NULL = "fake". */
int fake_start(uvt_registry_t *reg, fake_t *fk, const char *kind,
               const char *label, uvt_agent_t *owner, char id[UVT_ID_MAX]);
/* The same, asking for a given id (R-START-6); label "an adopted fake
 * task", unowned. */
int fake_start_id(uvt_registry_t *reg, fake_t *fk, const char *kind,
                  const char *id_wanted, char id[UVT_ID_MAX]);
/* Settle a fake task with `status` and `detail`/`output` (may be NULL). */
int fake_settle(fake_t *fk, uvt_status_t status, const char *detail,
                const char *output);
/* Append stream output to a fake task. */
void fake_emit(fake_t *fk, const char *text);

#endif
