/* The process producer of the portable build (meson -Dportable=true,
 * docs/porting.md): every function of uvtasks/process.h, so that the tool
 * surface, the bindings and a host link unchanged, and none that can start
 * a process.  A port replaces this file with a producer for its platform
 * (the mechanisms each clause needs, per platform, are in docs/porting.md).
 *
 * Everything that would reach a process answers UV_ENOSYS, as libuv's own
 * functions do on a platform that lacks them; UV_ENOTSUP already means
 * "no sandbox can be made" (S-3) in this API, and the tools say so to the
 * model.  No process task can exist here, so there is no fence to check
 * and no task to look at: even a lookup of a thread task's id is ENOSYS.
 * The functions with nothing to refuse do their part: the options get
 * their defaults, a cleanup zeroes, the cgroup directory is NULL and
 * stopping every process task stops none. */
#include <stdio.h>
#include <string.h>

#include "leaf/opts.h"
#include "uvtasks/process.h"
#include "uvtasks/producer.h"

/* The spawner's test hook (src/process/spawn.c), which the shared test
 * helpers (test/test-util.c) set: nothing spawns here, so nothing calls
 * it. */
void (*uvt__process_spawn_hook)(int phase);

void uvt_process_options_init_size(uvt_process_options_t *o, size_t size) {
  uvt_process_options_t d;
  /* The same defaults as the Linux producer's (src/process/process.c),
   * written as far as the caller's size. */
  memset(&d, 0, sizeof(d));
  d.size = sizeof(d);
  d.grace_ms = UVT_PROCESS_GRACE_MS;
  d.drain_ms = UVT_PROCESS_DRAIN_MS;
  d.output_cap_bytes = UVT_PROCESS_OUTPUT_CAP_BYTES;
  d.stdin_cap_bytes = UVT_PROCESS_STDIN_CAP_BYTES;
  d.pty_cols = UVT_PROCESS_PTY_COLS;
  d.pty_rows = UVT_PROCESS_PTY_ROWS;
  uvt__opts_init(o, size, &d, sizeof(d));
}

void(uvt_process_options_init)(uvt_process_options_t *o) {
  uvt_process_options_init_size(o, sizeof(*o));
}

int uvt_process_start(uvt_registry_t *reg, const uvt_process_options_t *o,
                      char id_out[UVT_ID_MAX]) {
  uvt_process_options_t own;
  char why[UVT__OPTS_WHY];
  (void)id_out;
  if (reg == NULL || o == NULL)
    return UV_EINVAL;
  /* the options are checked as the Linux producer checks them. */
  uvt_process_options_init_size(&own, sizeof(own));
  if (uvt__opts_load(&own, sizeof(own), o,
                     UVT__OPTS_MIN(uvt_process_options_t, command), why) != 0) {
    uvt_log(reg, UVT_LOG_ERROR,
            "uvt_process_start: options refused: %s; call "
            "uvt_process_options_init()",
            why);
    return UV_EINVAL;
  }
  return UV_ENOSYS;
}

int uvt_process_pid(uvt_registry_t *reg, const char *id,
                    const uvt_agent_t *caller) {
  return UV_ENOSYS;
}

int uvt_process_command_pid(uvt_registry_t *reg, const char *id,
                            const uvt_agent_t *caller) {
  return UV_ENOSYS;
}

int uvt_process_cgroups(uvt_registry_t *reg, const char *parent_dir) {
  return UV_ENOSYS;
}

int uvt_process_spawn_helper(uvt_registry_t *reg, int on) {
  return UV_ENOSYS;
}

int uvt_process_leftovers(uvt_registry_t *reg, const char *id,
                          const uvt_agent_t *caller) {
  return UV_ENOSYS;
}

int uvt_process_reading(uvt_registry_t *reg, const char *id,
                        const uvt_agent_t *caller) {
  return UV_ENOSYS;
}

int uvt_process_sandbox_why(uvt_registry_t *reg, char *buf, size_t size) {
  if (buf != NULL && size > 0)
    buf[0] = '\0';
  return reg == NULL || buf == NULL || size == 0 ? UV_EINVAL : 0;
}

int uvt_process_signal(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, int signum) {
  return UV_ENOSYS;
}

int uvt_process_write(uvt_registry_t *reg, const char *id,
                      const uvt_agent_t *caller, const char *bytes,
                      size_t len) {
  return UV_ENOSYS;
}

int uvt_process_close_stdin(uvt_registry_t *reg, const char *id,
                            const uvt_agent_t *caller) {
  return UV_ENOSYS;
}

int uvt_process_resize(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, uint16_t cols,
                       uint16_t rows) {
  return UV_ENOSYS;
}

int uvt_process_read(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uvt_process_read_t *out) {
  return UV_ENOSYS;
}

int uvt_process_status(uvt_registry_t *reg, const char *id,
                       const uvt_agent_t *caller, int *exited, int *exit_code,
                       int *term_signal) {
  return UV_ENOSYS;
}

void uvt_process_read_cleanup(uvt_process_read_t *r) {
  if (r != NULL)
    memset(r, 0, sizeof(*r));
}

int uvt_process_peek(uvt_registry_t *reg, const char *id,
                     const uvt_agent_t *caller, uvt_process_peek_t *out) {
  return UV_ENOSYS;
}

int uvt_process_last_line(uvt_registry_t *reg, const char *id,
                          const uvt_agent_t *caller, char *buf, size_t size) {
  return UV_ENOSYS;
}

int uvt_process_unread_bytes(uvt_registry_t *reg, const char *id,
                             const uvt_agent_t *caller, size_t *bytes) {
  return UV_ENOSYS;
}

const char *uvt_process_cgroup_dir(uvt_registry_t *reg) {
  return NULL;
}

int uvt_process_stop_all_now(void) {
  return 0;
}

/* D-1..D-7: no durable task without processes. */
int uvt_process_adopt_all(uvt_registry_t *reg, const char *state_dir,
                          uvt_agent_t *owner) {
  (void)owner;
  return reg == NULL || state_dir == NULL ? UV_EINVAL : UV_ENOSYS;
}

int uvt_process_stop_durable(uvt_registry_t *reg, int on) {
  (void)on;
  return reg == NULL ? UV_EINVAL : UV_ENOSYS;
}

int uvt_process_is_durable(uvt_registry_t *reg, const char *id,
                           const uvt_agent_t *caller) {
  (void)caller;
  return reg == NULL || id == NULL ? UV_EINVAL : UV_ENOSYS;
}

/* No process task can carry the mark: there is nothing to guard. */
int uvt_process_guardian(char mark[UVT_GUARDIAN_MARK_MAX]) {
  return mark == NULL ? UV_EINVAL : UV_ENOSYS;
}

int uvt_process_limits_check(uvt_registry_t *reg,
                             const uvt_process_limits_t *limits, char *why,
                             size_t size) {
  /* L-LIM-1: no process, so no limit can be kept on one. */
  if (why != NULL && size > 0)
    snprintf(why, size, "no processes in this build (portable)");
  return reg == NULL || limits == NULL ? UV_EINVAL : UV_ENOSYS;
}

int uvt_process_orphans(uvt_registry_t *reg) {
  /* S-11: no process of ours can leave an orphan here. */
  return reg == NULL ? UV_EINVAL : UV_ENOSYS;
}
