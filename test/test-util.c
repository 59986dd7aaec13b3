#include "test-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The spawner's test hook (src/process/spawn.c). */
extern void (*uvt__process_spawn_hook)(int phase);

void fixture_log(int level, const char *message, void *log_data) {
  fixture_t *f = log_data;
  if (level <= UVT_LOG_WARN) {
    f->warnings++;
    snprintf(f->last_warning, sizeof(f->last_warning), "%s", message);
  }
}

ssize_t proc_file(int pid, const char *name, char *buf, size_t size) {
  char path[64];
  ssize_t n;
  int fd;

  snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return n;
}

ssize_t proc_cmdline(int pid, char *buf, size_t size) {
  ssize_t n = proc_file(pid, "cmdline", buf, size);
  ssize_t i;

  for (i = 0; i < n - 1; i++)
    if (buf[i] == '\0')
      buf[i] = ' ';
  return n;
}

/* Is `pid` a live child of `parent` (0: any) that runs `argv_joined` and
 * (sig > 0) ignores `sig`? */
static int proc_matches(int pid, const char *argv_joined, int sig, int parent) {
  char buf[2048];
  const char *p;
  int ppid;
  char state;

  if (proc_file(pid, "stat", buf, sizeof(buf)) <= 0 ||
      (p = strrchr(buf, ')')) == NULL ||
      sscanf(p + 1, " %c %d", &state, &ppid) != 2 ||
      (parent != 0 && ppid != parent) || state == 'Z' || state == 'X')
    return 0;
  if (proc_cmdline(pid, buf, sizeof(buf)) <= 0 || strcmp(buf, argv_joined) != 0)
    return 0;
  if (sig <= 0)
    return 1;
  if (proc_file(pid, "status", buf, sizeof(buf)) <= 0 ||
      (p = strstr(buf, "\nSigIgn:\t")) == NULL)
    return 0;
  return (strtoull(p + 9, NULL, 16) >> (sig - 1)) & 1;
}

int proc_reached(const char *argv_joined, int sig, int parent,
                 uint64_t max_ms) {
  uint64_t deadline = uv_hrtime() + max_ms * 1000000u;
  struct timespec ms;
  struct dirent *de;
  DIR *d;
  int pid;

  for (;;) {
    d = opendir("/proc");
    assert_non_null(d);
    pid = 0;
    while (pid == 0 && (de = readdir(d)) != NULL)
      if (de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
          proc_matches(atoi(de->d_name), argv_joined, sig, parent))
        pid = atoi(de->d_name);
    closedir(d);
    if (pid != 0 || uv_hrtime() >= deadline)
      return pid;
    ms.tv_sec = 0;
    ms.tv_nsec = 1000000L;
    while (nanosleep(&ms, &ms) != 0 && errno == EINTR)
      ;
  }
}

static uv_sem_t gate;
static int gate_phase;

static void gate_hook(int phase) {
  if (phase == gate_phase)
    uv_sem_wait(&gate);
}

void spawn_gate_close(int phase) {
  assert_int_equal(uv_sem_init(&gate, 0), 0);
  gate_phase = phase;
  uvt__process_spawn_hook = gate_hook;
}

void spawn_gate_open(int n) {
  while (n-- > 0)
    uv_sem_post(&gate);
}

void spawn_gate_remove(void) {
  uvt__process_spawn_hook = NULL;
  uv_sem_destroy(&gate);
}

void fixture_init(fixture_t *f, const uvt_options_t *o) {
  uvt_options_t opts;
  memset(f, 0, sizeof(*f));
  if (o != NULL)
    opts = *o;
  else
    uvt_options_init(&opts);
  if (opts.log == NULL) {
    opts.log = fixture_log;
    opts.log_data = f;
  }
  assert_int_equal(uv_loop_init(&f->loop), 0);
  assert_int_equal(uvt_registry_new(&f->loop, &opts, &f->reg), 0);
  assert_int_equal(uvt_surface_attach(f->reg, &f->surface, "test"), 0);
}

static void fixture_closed(void *data) {
  fixture_t *f = data;
  f->closed++;
}

void fixture_close(fixture_t *f) {
  if (f->reg != NULL) {
    assert_int_equal(uvt_registry_close(f->reg, fixture_closed, f), 0);
    f->reg = NULL;
  }
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(f->closed, 1);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

typedef struct {
  int (*pred)(void *arg);
  void *arg;
} until_t;

static void until_check(uv_prepare_t *h) {
  until_t *u = h->data;
  if (u->pred(u->arg))
    uv_stop(h->loop);
}

/* A prepare handle checks the predicate before every poll and stops the
 * loop once it holds, so the run never blocks in poll after the awaited
 * callback ran earlier in the same turn (a live task keeps the loop alive).
 * The handle is unreferenced: it never keeps the loop alive by itself. */
void fixture_run_until(fixture_t *f, int (*pred)(void *arg), void *arg) {
  uv_prepare_t prepare;
  until_t u;
  if (pred(arg))
    return;
  u.pred = pred;
  u.arg = arg;
  uv_prepare_init(&f->loop, &prepare);
  prepare.data = &u;
  uv_prepare_start(&prepare, until_check);
  uv_unref((uv_handle_t *)&prepare);
  while (!pred(arg)) {
    if (uv_run(&f->loop, UV_RUN_DEFAULT) == 0)
      break;
  }
  uv_close((uv_handle_t *)&prepare, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT); /* run the close callback */
}

static void fake_inside(fake_t *fk, int hook) {
  if (fk->inside != NULL)
    fk->inside(fk, hook);
}

static int fake_cancel(uvt_task_t *t, const char *reason) {
  fake_t *fk = uvt_task_arg(t);
  fk->cancels++;
  snprintf(fk->last_reason, sizeof(fk->last_reason), "%s",
           reason ? reason : "");
  fake_inside(fk, FAKE_CANCEL);
  if (fk->cancel_error)
    return fk->cancel_error;
  if (fk->settle_on_cancel)
    fake_settle(fk, UVT_KILLED, "cancelled", NULL);
  return 0;
}

static int fake_read(uvt_task_t *t, uvt_buf_t *out) {
  fake_t *fk = uvt_task_arg(t);
  int err = uvt_buf_append(out, fk->pending, fk->pending_len);
  if (err == 0)
    fk->pending_len = 0;
  fake_inside(fk, FAKE_READ);
  return err;
}

static void fake_release(uvt_task_t *t) {
  fake_t *fk = uvt_task_arg(t);
  fk->releases++;
  fake_inside(fk, FAKE_RELEASE);
}

static void fake_settled(uvt_task_t *t) {
  fake_t *fk = uvt_task_arg(t);
  fk->settled_hooks++;
  fake_inside(fk, FAKE_SETTLED);
}

static int fake_quiesce(uvt_task_t *t) {
  fake_t *fk = uvt_task_arg(t);
  fk->quiesces++;
  fake_inside(fk, FAKE_QUIESCE);
  return fk->quiesce_ret;
}

static int fake_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  fake_t *fk = arg;
  fk->runs++;
  fk->task = t;
  fake_inside(fk, FAKE_RUN);
  if (fk->run_error) {
    fk->task = NULL; /* the producer's undo: nothing of it is left */
    return fk->run_error;
  }
  hooks->cancel = fake_cancel;
  hooks->read_output = fk->stream ? fake_read : NULL;
  hooks->release = fake_release;
  hooks->settled = fake_settled;
  hooks->quiesce = fk->has_quiesce ? fake_quiesce : NULL;
  return 0;
}

int fake_start(uvt_registry_t *reg, fake_t *fk, const char *kind,
               const char *label, uvt_agent_t *owner, char id[UVT_ID_MAX]) {
  uvt_spec_t spec;
  memset(&spec, 0, sizeof(spec));
  spec.kind = kind ? kind : "fake";
  spec.label = label ? label : "a fake task";
  spec.owner = owner;
  spec.run = fake_run;
  spec.arg = fk;
  return uvt_start(reg, &spec, id);
}

int fake_start_id(uvt_registry_t *reg, fake_t *fk, const char *kind,
                  const char *id_wanted, char id[UVT_ID_MAX]) {
  uvt_spec_t spec;
  memset(&spec, 0, sizeof(spec));
  spec.kind = kind ? kind : "fake";
  spec.label = "an adopted fake task";
  spec.run = fake_run;
  spec.arg = fk;
  spec.id = id_wanted;
  return uvt_start(reg, &spec, id);
}

int fake_settle(fake_t *fk, uvt_status_t status, const char *detail,
                const char *output) {
  uvt_outcome_t o;
  memset(&o, 0, sizeof(o));
  o.status = status;
  o.detail = detail;
  o.output = output;
  o.output_len = output ? strlen(output) : 0;
  return uvt_task_settle(fk->task, &o);
}

void fake_emit(fake_t *fk, const char *text) {
  size_t n = strlen(text);
  if (n > sizeof(fk->pending) - fk->pending_len)
    n = sizeof(fk->pending) - fk->pending_len;
  memcpy(fk->pending + fk->pending_len, text, n);
  fk->pending_len += n;
}
