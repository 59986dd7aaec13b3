/* A small libuv host embedding uvtasks: it starts three real shell
 * commands as background tasks owned by one agent, reads one while it
 * runs, waits on one with a deadline, kills one, prints every snapshot a
 * listener receives, then disposes of the agent and the registry.
 *
 *   build/examples/uvtasks-host
 */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "uvtasks.h"
#include "uvtasks/process.h"

static uvt_registry_t *reg;
static uvt_agent_t agent;
static char slow_id[UVT_ID_MAX];

static void print_snapshot(const char *why, const uvt_snapshot_t *s) {
  printf("%-9s %-8s %-10s reported=%d %s%s%s  \"%s\"\n", why, s->id,
         uvt_status_name(s->status), s->reported, s->detail ? "(" : "",
         s->detail ? s->detail : "", s->detail ? ")" : "", s->label);
}

static void on_done(uvt_listener_t *l, const uvt_snapshot_t *snap,
                    uvt_agent_t *owner) {
  print_snapshot("listener", snap);
}

static void on_closed(void *data) {
  printf("registry closed; nothing of ours is left on the loop\n");
}

static void on_disposed(uvt_agent_t *a) {
  printf("agent disposed; its process groups are gone\n");
  uvt_registry_close(reg, on_closed, NULL);
}

static void on_wait(uvt_wait_t *req, int status, const uvt_snapshot_t *snap) {
  uvt_read_t r;
  const char *id = req->data;
  uvt_kill_result_t kr;
  if (status == UVT_EWAITTIMEOUT) {
    /* The deadline was the wait's own; the task is untouched.  Stop it. */
    print_snapshot("timed out", snap);
    if (uvt_kill(reg, id, &agent, "not needed", &kr) == 0)
      printf("kill %s: %s\n", id,
             kr == UVT_KILL_REQUESTED ? "requested" : "already ended");
    return;
  }
  print_snapshot("waited", snap);
  if (uvt_read(reg, id, &agent, &r) == 0) {
    printf("output of %s:\n%s", id, r.text);
    uvt_read_cleanup(&r);
  }
  if (strcmp(id, slow_id) != 0)
    return;
  uvt_agent_dispose(&agent, on_disposed);
}

int main(void) {
  uv_loop_t *loop = uv_default_loop();
  /* Handles start zeroed: the library reads their state (R-BUSY-1). */
  uvt_surface_t surface = {0};
  uvt_listener_t listener = {0};
  uvt_process_options_t po;
  static uvt_wait_t w1, w2, w3;
  static char quick_id[UVT_ID_MAX], sleeper_id[UVT_ID_MAX];
  int err;

  if ((err = uvt_registry_new(loop, NULL, &reg)) != 0 ||
      (err = uvt_surface_attach(reg, &surface, "example")) != 0 ||
      (err = uvt_agent_register(reg, &agent, "agent-1", "session-1")) != 0 ||
      (err = uvt_listener_start(reg, &listener, on_done)) != 0) {
    fprintf(stderr, "setup: %s\n", uvt_strerror(err));
    return 1;
  }

  uvt_process_options_init(&po);
  po.owner = &agent;
  po.command = "echo hello; sleep 0.2; echo world";
  err = uvt_process_start(reg, &po, quick_id);
  po.command = "for i in 1 2 3; do echo tick $i; sleep 0.3; done";
  if (err == 0)
    err = uvt_process_start(reg, &po, slow_id);
  po.command = "sleep 30";
  if (err == 0)
    err = uvt_process_start(reg, &po, sleeper_id);
  if (err != 0) {
    fprintf(stderr, "start: %s\n", uvt_strerror(err));
    return 1;
  }
  printf("started %s, %s, %s\n", quick_id, slow_id, sleeper_id);

  w1.data = quick_id;
  w2.data = slow_id;
  w3.data = sleeper_id;
  uvt_wait(reg, &w1, quick_id, 5000, &agent, on_wait);
  uvt_wait(reg, &w2, slow_id, 5000, &agent, on_wait);
  uvt_wait(reg, &w3, sleeper_id, 100, &agent, on_wait);

  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop) == 0 ? 0 : 1;
}
