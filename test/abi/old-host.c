/* a host built against an older release's headers, run on the built
 * library (test/abi-test.sh builds it against abi/include-X.Y.Z/ and
 * against a copy of today's headers with the last fields of some option
 * structs cut off, as an older release's would be).
 *
 * Every option struct it fills lies directly before 64 canary bytes; the
 * library must neither write them (in _init, which gets this host's
 * sizeof) nor take them as fields (at the entry points, which read only
 * this host's size).  It uses no field that is newer than its headers and
 * never names `size`, so the same source builds against headers of
 * releases that had no size field (and then shows the fault: their _init
 * wrote the library's sizeof).
 *
 * Prints one line per check, "ok ..." or "FAIL ..."; exits 0 when all
 * passed. */
#include <stdio.h>
#include <string.h>

#include <uvtasks.h>
#include <uvtasks/process.h>
#include <uvtasks/thread.h>
#include <uvtasks/tools.h>

#define CANARY 0x5A
#define WRAPPED(type)                                                          \
  struct {                                                                     \
    type o;                                                                    \
    unsigned char canary[64];                                                  \
  }

static int failed;

static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok)
    failed++;
}

static int intact(const unsigned char *c) {
  for (int i = 0; i < 64; i++)
    if (c[i] != CANARY)
      return 0;
  return 1;
}

static int ended(uvt_registry_t *reg, const char *id) {
  uvt_snapshot_t s;
  int done;
  if (uvt_get(reg, id, NULL, &s) != 0)
    return 1;
  done = s.status == UVT_COMPLETED || s.status == UVT_KILLED ||
         s.status == UVT_FAILED;
  uvt_snapshot_cleanup(&s);
  return done;
}

static void thread_fn(uvt_thread_ctx_t *ctx, void *arg, uvt_outcome_t *out) {
  (void)ctx;
  (void)arg;
  out->status = UVT_COMPLETED;
  out->output = "thread-ran";
  out->output_len = strlen("thread-ran");
}

static int called;
static char result[4096];

static void call_cb(uvt_tools_call_t *req, int status) {
  called = 1;
  snprintf(result, sizeof(result), "%d %d %s", status, req->is_error,
           req->text != NULL ? req->text : "");
  uvt_tools_call_cleanup(req);
}

static int detached;

static void detach_cb(uvt_tools_t *tools) {
  (void)tools;
  detached = 1;
}

static void closed_cb(void *data) {
  *(int *)data = 1;
}

int main(void) {
  uv_loop_t loop;
  uvt_registry_t *reg = NULL;
  uvt_surface_t surface;
  uvt_tools_t tools;
  uvt_tools_call_t req;
  uvt_agent_t agent;
  uvt_read_t r;
  char id[UVT_ID_MAX];
  int closed = 0;
  WRAPPED(uvt_options_t) ro;
  WRAPPED(uvt_process_options_t) po;
  WRAPPED(uvt_thread_options_t) th;
  WRAPPED(uvt_tools_options_t) to;
  WRAPPED(uvt_tools_args_t) ta;

  printf("host structs: options %zu, process %zu, thread %zu, tools %zu, "
         "args %zu bytes\n",
         sizeof(ro.o), sizeof(po.o), sizeof(th.o), sizeof(to.o), sizeof(ta.o));
  if (uv_loop_init(&loop) != 0)
    return 2;

  /* uvt_options_t */
  memset(&ro, CANARY, sizeof(ro));
  uvt_options_init(&ro.o);
  check(intact(ro.canary), "A-2: uvt_options_init writes only the host's "
                           "struct");
  ro.o.teardown_grace_ms = 2000;
  check(uvt_registry_new(&loop, &ro.o, &reg) == 0, "A-2: uvt_registry_new");
  if (reg == NULL)
    return 1;
  check(intact(ro.canary), "A-2: uvt_registry_new leaves the bytes after "
                           "the host's struct alone");
  memset(&surface, 0, sizeof(surface)); /* handles start zeroed */
  check(uvt_surface_attach(reg, &surface, "old-host") == 0, "a surface");

  /* uvt_process_options_t */
  memset(&po, CANARY, sizeof(po));
  uvt_process_options_init(&po.o);
  check(intact(po.canary), "A-2: uvt_process_options_init writes only the "
                           "host's struct");
  po.o.command = "echo old-host-process";
  check(uvt_process_start(reg, &po.o, id) == 0,
        "A-2: uvt_process_start with the host's struct");
  while (!ended(reg, id))
    uv_run(&loop, UV_RUN_ONCE);
  check(uvt_read(reg, id, NULL, &r) == 0 &&
            strstr(r.text, "old-host-process") != NULL &&
            r.snapshot.status == UVT_COMPLETED,
        "A-2: the process task ran as asked (fields past the host's struct "
        "at their defaults)");
  uvt_read_cleanup(&r);
  check(intact(po.canary), "A-2: uvt_process_start leaves the canary");

  /* uvt_thread_options_t */
  memset(&th, CANARY, sizeof(th));
  uvt_thread_options_init(&th.o);
  check(intact(th.canary), "A-2: uvt_thread_options_init writes only the "
                           "host's struct");
  th.o.label = "old-host-thread";
  check(uvt_thread_start(reg, &th.o, thread_fn, NULL, id) == 0,
        "A-2: uvt_thread_start with the host's struct");
  while (!ended(reg, id))
    uv_run(&loop, UV_RUN_ONCE);
  check(uvt_read(reg, id, NULL, &r) == 0 &&
            strstr(r.text, "thread-ran") != NULL &&
            strcmp(r.snapshot.label, "old-host-thread") == 0,
        "A-2: the thread task ran");
  uvt_read_cleanup(&r);

  /* uvt_tools_options_t, uvt_tools_args_t */
  memset(&agent, 0, sizeof(agent));
  check(uvt_agent_register(reg, &agent, "agent", "s1") == 0, "an agent");
  memset(&to, CANARY, sizeof(to));
  uvt_tools_options_init(&to.o);
  check(intact(to.canary), "A-2: uvt_tools_options_init writes only the "
                           "host's struct");
  memset(&tools, 0, sizeof(tools));
  check(uvt_tools_attach(reg, &tools, &to.o) == 0,
        "A-2: uvt_tools_attach with the host's struct");
  memset(&ta, CANARY, sizeof(ta));
  uvt_tools_args_init(&ta.o);
  check(intact(ta.canary), "A-2: uvt_tools_args_init writes only the "
                           "host's struct");
  ta.o.command = "echo old-host-tools";
  memset(&req, 0, sizeof(req)); /* a handle: zeroed before first use */
  check(uvt_tools_call(&tools, &req, &agent, "run_command", &ta.o, call_cb) ==
            0,
        "A-2: uvt_tools_call with the host's arguments");
  while (!called)
    uv_run(&loop, UV_RUN_ONCE);
  check(strncmp(result, "0 0 ", 4) == 0 &&
            strstr(result, "old-host-tools") != NULL,
        "A-2: run_command ran as asked");
  if (strncmp(result, "0 0 ", 4) != 0)
    printf("     got: %s\n", result);
  check(uvt_tools_detach(&tools, detach_cb) == 0, "detach");

  check(uvt_registry_close(reg, closed_cb, &closed) == 0, "close");
  uv_run(&loop, UV_RUN_DEFAULT);
  check(closed && detached && uv_loop_close(&loop) == 0,
        "closed, nothing left on the loop");
  return failed == 0 ? 0 : 1;
}
