/* E-1: a Slurm task's job script (a wrapper that beats the heartbeat and
 * records the exit code) and its registration; E-5: adoption from the
 * journal under the old ids. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "slurm-internal.h"

extern char **environ;

static void put_quoted(FILE *fp, const char *s) {
  fputc('\'', fp);
  for (; *s != '\0'; s++) {
    if (*s == '\'')
      fputs("'\\''", fp);
    else
      fputc(*s, fp);
  }
  fputc('\'', fp);
}

/* The batch script (E-7, E-11).  Slurm sends a cancel's and a time
 * limit's SIGTERM (and a warning signal given as B:SIG) to the batch shell
 * alone, which is this wrapper, so it must not die of them: it passes each
 * signal on to the command's process group and waits for the command (the
 * controller's SIGKILL after KillWait ends what is still there), so a TERM
 * handler runs as under plain sbatch.  The command runs in a process group
 * of its own (set -m: it also keeps SIGINT and SIGQUIT, which a background
 * command without job control would ignore), and so does the heartbeat
 * loop, which goes with one kill of its group the moment the command ends:
 * nothing holds the job past its end.  The command's status goes to
 * <key>.rc with the signal Slurm sent and when (the controller forgets
 * ended jobs after MinJobAge: E-14), and a status from a signal is raised
 * again so Slurm sees the signal (E-4). */
static const char wrapper_head[] =
    "#!/bin/bash\n"
    "# uvtasks: a Slurm task's wrapper\n";

static const char wrapper_body[] =
    "uvt_me=$$\n"
    "uvt_t0=$SECONDS\n"
    "uvt_cmd=\n"
    "uvt_got=\n"
    "uvt_at=\n"
    "uvt_int=\n"
    "uvt_fwd() {\n"
    "  uvt_int=1\n"
    "  if [ \"$1\" = TERM ] || [ -z \"$uvt_got\" ]; then\n"
    "    uvt_got=$1\n"
    "    uvt_at=$((SECONDS - uvt_t0))\n"
    "  fi\n"
    "  [ -n \"$uvt_cmd\" ] && kill -s \"$1\" -- \"-$uvt_cmd\" 2>/dev/null\n"
    "}\n"
    "for uvt_s in HUP INT QUIT USR1 USR2 ALRM TERM XCPU; do\n"
    "  trap \"uvt_fwd $uvt_s\" \"$uvt_s\"\n"
    "done\n"
    "set -m\n"
    "(\n"
    "  trap - HUP INT QUIT USR1 USR2 ALRM TERM XCPU\n"
    "  while kill -0 \"$uvt_me\" 2>/dev/null; do\n"
    "    : >\"$uvt_hb\"\n"
    "    sleep \"$uvt_beat_s\"\n"
    "  done\n"
    ") </dev/null >/dev/null 2>&1 &\n"
    "uvt_beat=$!\n"
    "disown \"$uvt_beat\"\n";

static const char wrapper_tail[] =
    " </dev/null &\n"
    "uvt_cmd=$!\n"
    "set +m\n"
    "while :; do\n"
    "  uvt_int=\n"
    "  wait \"$uvt_cmd\" 2>/dev/null\n"
    "  uvt_status=$?\n"
    "  [ -n \"$uvt_int\" ] || break\n"
    "done\n"
    "kill -KILL -- \"-$uvt_beat\" 2>/dev/null\n"
    "printf '%s %s %s\\n' \"$uvt_status\" \"${uvt_got:--}\" "
    "\"${uvt_at:--}\" >\"$uvt_rc.tmp\" &&\n"
    "  mv -f \"$uvt_rc.tmp\" \"$uvt_rc\"\n"
    "if [ \"$uvt_status\" -gt 128 ] && [ \"$uvt_status\" -lt 193 ]; then\n"
    "  trap - \"$((uvt_status - 128))\" 2>/dev/null\n"
    "  kill -s \"$((uvt_status - 128))\" $$\n"
    "fi\n"
    "exit \"$uvt_status\"\n";

static char *make_script(const uvt_slurm_engine_t *e, const uvt__sjob_t *j,
                         const uvt_slurm_options_t *o) {
  char *text = NULL;
  size_t len = 0;
  char path[4096];
  FILE *fp = open_memstream(&text, &len);
  size_t i;
  if (fp == NULL)
    return NULL;
  fputs(wrapper_head, fp);
  fputs("uvt_hb=", fp);
  uvt__sjob_path(j, "hb", path, sizeof(path));
  put_quoted(fp, path);
  fputs("\nuvt_rc=", fp);
  uvt__sjob_path(j, "rc", path, sizeof(path));
  put_quoted(fp, path);
  fprintf(fp, "\nuvt_beat_s=%llu\n",
          (unsigned long long)((e->heartbeat_ms + 999) / 1000));
  fputs(wrapper_body, fp);
  if (o->command != NULL) {
    fputs("/bin/bash -c ", fp);
    put_quoted(fp, o->command);
  } else {
    for (i = 0; o->argv[i] != NULL; i++) {
      if (i > 0)
        fputc(' ', fp);
      put_quoted(fp, o->argv[i]);
    }
  }
  fputs(wrapper_tail, fp);
  if (fclose(fp) != 0) {
    free(text);
    return NULL;
  }
  /* open_memstream's buffer comes from malloc: copy into ours. */
  {
    char *c = uvt__strdup(text);
    free(text);
    return c;
  }
}

static int copy_env(uvt__sjob_t *j, const char *const *env) {
  size_t n = 0, i;
  if (env == NULL)
    env = (const char *const *)environ;
  while (env[n] != NULL)
    n++;
  if ((j->env = uvt__calloc(n + 1, sizeof(char *))) == NULL)
    return UV_ENOMEM;
  for (i = 0; i < n; i++) {
    if (strchr(env[i], '=') == NULL)
      return UV_EINVAL;
    if ((j->env[i] = uvt__strdup(env[i])) == NULL)
      return UV_ENOMEM;
    j->env_count = i + 1;
  }
  return 0;
}

static void make_key(uvt__sjob_t *j, const char *id) {
  unsigned char r[4] = {0, 0, 0, 0};
  if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    uint64_t t = uv_hrtime();
    memcpy(r, &t, sizeof(r));
  }
  snprintf(j->key, sizeof(j->key), "%s-%02x%02x%02x%02x", id, r[0], r[1], r[2],
           r[3]);
}

int uvt_slurm_start(uvt_slurm_engine_t *e, const uvt_slurm_options_t *o,
                    char id_out[UVT_ID_MAX]) {
  uvt__sjob_t *j;
  char cwd[4096];
  const char *label;
  int err;

  if (e == NULL || o == NULL)
    return UV_EINVAL;
  if ((o->command == NULL) == (o->argv == NULL))
    return UV_EINVAL;
  if (o->command != NULL && o->command[strspn(o->command, " \t\n")] == '\0')
    return UV_EINVAL;
  if (o->argv != NULL && (o->argv[0] == NULL || o->argv[0][0] == '\0'))
    return UV_EINVAL;
  if (o->output_cap_bytes != 0 && o->output_cap_bytes < 4)
    return UV_EINVAL;
  if (e->closing)
    return UVT_ECLOSING;
  label = o->label != NULL ? o->label
                           : (o->command != NULL ? o->command : o->argv[0]);

  uv_mutex_lock(&e->mutex);
  j = uvt__sjob_new(e);
  uv_mutex_unlock(&e->mutex);
  if (j == NULL)
    return UV_ENOMEM;
  j->cap = o->output_cap_bytes != 0 ? o->output_cap_bytes : (1u << 20);
  j->cpus = o->cpus > 0 ? o->cpus : 1;
  j->mem_mb = o->mem_mb;
  j->time_limit_min = o->time_limit_min;
  err = UV_ENOMEM;
  if (o->partition != NULL &&
      (j->partition = uvt__strdup(o->partition)) == NULL)
    goto fail;
  if (o->cwd == NULL && getcwd(cwd, sizeof(cwd)) == NULL) {
    err = uv_translate_sys_error(errno);
    goto fail;
  }
  if ((j->cwd = uvt__strdup(o->cwd != NULL ? o->cwd : cwd)) == NULL)
    goto fail;
  if ((err = copy_env(j, o->env)) != 0)
    goto fail;
  /* The key names the job's files and the job (uvt-<key>); the id is not
   * known before the commit, so the key uses a random part and the id the
   * kind's next number only as a hint for a person reading out_dir. */
  make_key(j, "slurm");
  err = UV_ENOMEM;
  if ((j->command_script = make_script(e, j, o)) == NULL)
    goto fail;
  if ((err = uvt__slurm_register(e, j, o->owner, label, NULL, id_out)) != 0)
    goto fail;
  /* Journalled first (the thread fsyncs it before submitting, E-5). */
  uv_mutex_lock(&e->mutex);
  uvt__journal_line(e, "T %s %s", j->id, j->key);
  if (!j->settling) {
    j->want_submit = 1;
    uvt__sjob_queue_request(j);
  }
  uv_mutex_unlock(&e->mutex);
  return 0;
fail:
  uv_mutex_lock(&e->mutex);
  uvt__sjob_free(j);
  uv_mutex_unlock(&e->mutex);
  return err;
}

int uvt_slurm_adopt_all(uvt_slurm_engine_t *e, uvt_agent_t *owner) {
  uvt__journal_entry_t *a;
  size_t n, i;
  int err, adopted = 0;

  if (e == NULL || e->journal_fd < 0)
    return UV_EINVAL;
  if (e->closing)
    return UVT_ECLOSING;
  uv_mutex_lock(&e->mutex);
  err = uvt__journal_load(e, &a, &n);
  uv_mutex_unlock(&e->mutex);
  if (err != 0)
    return err;
  for (i = 0; i < n; i++) {
    uvt__sjob_t *j;
    char label[UVT__SLURM_KEY_MAX + 32];
    if (a[i].done)
      continue;
    uv_mutex_lock(&e->mutex);
    j = uvt__sjob_new(e);
    uv_mutex_unlock(&e->mutex);
    if (j == NULL) {
      err = UV_ENOMEM;
      break;
    }
    snprintf(j->key, sizeof(j->key), "%s", a[i].key);
    j->job = a[i].job;
    j->want_find = a[i].job == 0;
    j->out_off = a[i].out_off;
    j->err_off = a[i].err_off;
    j->cap = 1u << 20;
    if (a[i].job != 0)
      snprintf(label, sizeof(label), "slurm job %u (adopted)", a[i].job);
    else
      snprintf(label, sizeof(label), "slurm job uvt-%s (adopted)", a[i].key);
    err = uvt__slurm_register(e, j, owner, label, a[i].id, NULL);
    if (err != 0) {
      uv_mutex_lock(&e->mutex);
      uvt__sjob_free(j);
      uv_mutex_unlock(&e->mutex);
      break;
    }
    adopted++;
  }
  uvt__free(a);
  return err != 0 ? err : adopted;
}
