/* The thread producer (contract §4): a final-output task whose work runs on a
 * thread of its own, settled from that thread and joined on the loop thread
 * when the outcome is recorded. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "leaf/alloc.h"
#include "leaf/opts.h"
#include "uvtasks/producer.h"
#include "uvtasks/thread.h"

struct uvt_thread_ctx_s {
  uvt_task_t *task;
  uvt_thread_fn fn;
  void *arg;
  size_t stack_size;
  uv_thread_t thread;
  uv_mutex_t mutex;
  uv_cond_t cond;
  atomic_int cancelled;
  /* Set by the thread just before it calls uvt_task_settle(). */
  atomic_int settle_called;
  /* Under `mutex`: the thread is past its settle and will touch the context
   * no more (unless abandoned); the loop gave the context up. */
  int finished;
  int abandoned;
  /* Loop thread only. */
  int joined;
  /* The function's copies (uvt_thread_set_detail/append_output). */
  char *detail;
  char *output;
  size_t output_len;
};

/* Contexts alive now; tests use it to see that an abandoned thread freed its
 * context (R-DONE-2). */
static atomic_long live_contexts;

long uvt__thread_live_contexts(void);

long uvt__thread_live_contexts(void) {
  return atomic_load(&live_contexts);
}

static void ctx_free(uvt_thread_ctx_t *ctx) {
  uv_cond_destroy(&ctx->cond);
  uv_mutex_destroy(&ctx->mutex);
  uvt__free(ctx->detail);
  uvt__free(ctx->output);
  uvt__free(ctx);
  atomic_fetch_sub(&live_contexts, 1);
}

/* every field of this library's struct at its default. */
static void options_defaults(uvt_thread_options_t *o) {
  memset(o, 0, sizeof(*o));
  o->size = sizeof(*o);
  o->kind = "thread";
  o->label = "thread";
}

void uvt_thread_options_init_size(uvt_thread_options_t *o, size_t size) {
  uvt_thread_options_t d;
  options_defaults(&d);
  uvt__opts_init(o, size, &d, sizeof(d));
}

/* The exported symbol of the old name (the header's macro hides it). */
void(uvt_thread_options_init)(uvt_thread_options_t *o) {
  uvt_thread_options_init_size(o, sizeof(*o));
}

int uvt_thread_cancelled(uvt_thread_ctx_t *ctx) {
  return atomic_load(&ctx->cancelled) != 0;
}

int uvt_thread_sleep(uvt_thread_ctx_t *ctx, uint64_t timeout_ms) {
  uint64_t now = uv_hrtime();
  uint64_t due = now + timeout_ms * 1000000u;
  int cancelled;

  uv_mutex_lock(&ctx->mutex);
  while (!(cancelled = atomic_load(&ctx->cancelled)) && now < due) {
    /* Spurious wakeups and early returns just go round again. */
    (void)uv_cond_timedwait(&ctx->cond, &ctx->mutex, due - now);
    now = uv_hrtime();
  }
  uv_mutex_unlock(&ctx->mutex);
  return cancelled != 0;
}

int uvt_thread_set_detail(uvt_thread_ctx_t *ctx, uvt_outcome_t *out,
                          const char *detail) {
  char *copy = NULL;
  if (detail != NULL) {
    copy = uvt__strdup(detail);
    if (copy == NULL)
      return UV_ENOMEM;
  }
  uvt__free(ctx->detail);
  ctx->detail = copy;
  out->detail = copy;
  return 0;
}

int uvt_thread_append_output(uvt_thread_ctx_t *ctx, uvt_outcome_t *out,
                             const void *bytes, size_t len) {
  char *grown;
  if (len == 0) {
    out->output = ctx->output;
    out->output_len = ctx->output_len;
    return 0;
  }
  if (len > SIZE_MAX - ctx->output_len - 1)
    return UV_ENOMEM;
  grown = uvt__realloc(ctx->output, ctx->output_len + len + 1);
  if (grown == NULL)
    return UV_ENOMEM;
  memcpy(grown + ctx->output_len, bytes, len);
  ctx->output = grown;
  ctx->output_len += len;
  grown[ctx->output_len] = '\0';
  out->output = grown;
  out->output_len = ctx->output_len;
  return 0;
}

static void thread_main(void *arg) {
  uvt_thread_ctx_t *ctx = arg;
  uvt_outcome_t out;
  int abandoned;

  memset(&out, 0, sizeof(out));
  out.status = UVT_COMPLETED;
  ctx->fn(ctx, ctx->arg, &out);

  atomic_store(&ctx->settle_called, 1);
  if (!uvt_status_is_terminal(out.status)) {
    out.status = UVT_FAILED;
    out.detail = "thread returned a non-terminal status";
  }
  /* The handle may be freed by this call (record already dropped): it is
   * not touched again. */
  (void)uvt_task_settle(ctx->task, &out);

  uv_mutex_lock(&ctx->mutex);
  ctx->finished = 1;
  abandoned = ctx->abandoned;
  uv_mutex_unlock(&ctx->mutex);

  if (abandoned) {
    /* The loop gave up on us (teardown force-failed the record): nobody will
     * join, so let the system reclaim the thread and free the context. */
    pthread_detach(pthread_self());
    ctx_free(ctx);
  }
}

static int thread_cancel(uvt_task_t *t, const char *reason) {
  uvt_thread_ctx_t *ctx = uvt_task_arg(t);
  (void)reason;
  uv_mutex_lock(&ctx->mutex);
  atomic_store(&ctx->cancelled, 1);
  uv_cond_broadcast(&ctx->cond);
  uv_mutex_unlock(&ctx->mutex);
  return 0;
}

/* The outcome is recorded: the thread has called settle and is about to
 * return, so the join is short.  Join here, before listeners and waits see
 * the task, so a terminal thread task is quiescent. */
static void thread_settled(uvt_task_t *t) {
  uvt_thread_ctx_t *ctx = uvt_task_arg(t);
  if (ctx->joined || !atomic_load(&ctx->settle_called))
    return;
  uv_thread_join(&ctx->thread);
  ctx->joined = 1;
}

static void thread_release(uvt_task_t *t) {
  uvt_thread_ctx_t *ctx = uvt_task_arg(t);
  int finished;

  if (ctx->joined) {
    ctx_free(ctx);
    return;
  }
  uv_mutex_lock(&ctx->mutex);
  finished = ctx->finished;
  if (!finished)
    ctx->abandoned = 1;
  uv_mutex_unlock(&ctx->mutex);

  /* A thread past its settle only has to return: joining cannot block.  One
   * still working may run for ever, so it is left to free itself. */
  if (finished) {
    uv_thread_join(&ctx->thread);
    ctx_free(ctx);
  }
}

static int thread_run(uvt_task_t *t, void *arg, uvt_hooks_t *hooks) {
  uvt_thread_ctx_t *ctx = arg;
  uv_thread_options_t topts;
  int err;

  ctx->task = t;
  memset(&topts, 0, sizeof(topts));
  if (ctx->stack_size > 0) {
    topts.flags = UV_THREAD_HAS_STACK_SIZE;
    topts.stack_size = ctx->stack_size;
  }
  err = uv_thread_create_ex(&ctx->thread, &topts, thread_main, ctx);
  if (err != 0)
    return err;
  hooks->cancel = thread_cancel;
  hooks->read_output = NULL;
  hooks->settled = thread_settled;
  hooks->release = thread_release;
  return 0;
}

int uvt_thread_start(uvt_registry_t *reg, const uvt_thread_options_t *o,
                     uvt_thread_fn fn, void *arg, char id_out[UVT_ID_MAX]) {
  /* P-THREAD-1: before anything is touched. */
  UVT_LOOP_ONLY(reg);
  uvt_thread_options_t own;
  char why[UVT__OPTS_WHY];
  uvt_thread_ctx_t *ctx;
  uvt_spec_t spec;
  int err;

  if (reg == NULL || fn == NULL)
    return UV_EINVAL;
  /* the caller's first o->size bytes over the defaults, once; from
   * here on only the copy is read. */
  options_defaults(&own);
  if (o != NULL &&
      uvt__opts_load(&own, sizeof(own), o,
                     UVT__OPTS_MIN(uvt_thread_options_t, kind), why) != 0) {
    uvt_log(reg, UVT_LOG_ERROR,
            "uvt_thread_start: options refused: %s; call "
            "uvt_thread_options_init()",
            why);
    return UV_EINVAL;
  }
  o = &own;

  ctx = uvt__calloc(1, sizeof(*ctx));
  if (ctx == NULL)
    return UV_ENOMEM;
  if (uv_mutex_init(&ctx->mutex) != 0) {
    uvt__free(ctx);
    return UV_ENOMEM;
  }
  if (uv_cond_init(&ctx->cond) != 0) {
    uv_mutex_destroy(&ctx->mutex);
    uvt__free(ctx);
    return UV_ENOMEM;
  }
  atomic_fetch_add(&live_contexts, 1);
  ctx->fn = fn;
  ctx->arg = arg;

  ctx->stack_size = o->stack_size;
  memset(&spec, 0, sizeof(spec));
  spec.kind = o->kind != NULL ? o->kind : "thread";
  spec.label = o->label != NULL ? o->label : "thread";
  spec.owner = o->owner;
  spec.run = thread_run;
  spec.arg = ctx;
  err = uvt_start(reg, &spec, id_out);
  if (err != 0) {
    /* No thread was created: run either was not called or failed to
     * create it. */
    ctx_free(ctx);
    return err;
  }
  return 0;
}
