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

#include "leaf/opts.h"
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
 * command without job control would ignore).
 *
 * Waiting and the heartbeat (E-7: the wrapper touches <key>.hb at its
 * start and every beat), with no process of the wrapper's own where it
 * can.  The engine makes <key>.t, a FIFO, before it submits: the command
 * gets its write end as fd 8, the wrapper keeps the read end, so a read
 * sees end of file the moment the command and everything it started are
 * gone, and times out every 0.1 s otherwise (a beat when a beat's ticks
 * passed; a command whose children outlive it, holding fd 8, is seen
 * gone there; a tick costs the node about 60 us of CPU).  An end of file
 * while the command is not yet a zombie (the kernel closes its files
 * first) or because it closed fd 8: the wrapper holds a writer itself and
 * looks every 2 ms for a while, then on the ticks.  An array element (no
 * FIFO of its own) and a file system without FIFOs wait with one `sleep`
 * at a time: bash 5.1 patch 10 and later say which of the two ended
 * (wait -n -p; before that patch a trap that cut one short made every
 * later one return at once); 4.3 on wait for either (wait -n); older
 * bash waits for the sleep alone.  Whether the command ended is asked of
 * /proc (bash may report and drop a job at any command boundary), so in
 * every mode it is seen within a beat at worst.  When the command ends
 * the sleep gets SIGKILL (a child forked but not yet exec'd runs bash's
 * handlers, which would take a TERM and lose it) and is waited for:
 * nothing of the wrapper is left in the job when it exits, so nothing
 * holds the job past its end (Slurm's proctrack/cgroup looks again only
 * a second later).
 *
 * The command's status goes to <key>.rc with the signal Slurm sent and
 * when (the controller forgets ended jobs after MinJobAge: E-14), one
 * line in one write: a text without its newline is not yet a status
 * (uvt__slurm_map_rc).  A status from a signal is raised again so Slurm
 * sees the signal (E-4). */
static const char wrapper_head[] = "#!/bin/bash\n"
                                   "# uvtasks: a Slurm task's wrapper\n";

static const char wrapper_body[] =
    /* The host's environment may set bash's options (SHELLOPTS, BASH_ENV):
     * the wrapper's own logic runs without errexit and nounset, and calls
     * the builtins by name, past any exported function of that name. */
    "set +eu +o pipefail 2>/dev/null\n"
    /* The session and host sbatch records for a job submitted from in
     * here (AllocNode:Sid): a kill of this task cancels such jobs too. */
    "builtin read -r uvt_st </proc/$$/stat\n"
    "uvt_st=${uvt_st##*) }\n"
    "set -- $uvt_st\n"
    "builtin read -r uvt_host </proc/sys/kernel/hostname\n"
    "builtin printf '%s %s\\n' \"$4\" \"$uvt_host\" >\"$uvt_base.sid\"\n"
    "set --\n"
    "uvt_t0=$SECONDS\n"
    "uvt_cmd=\n"
    "uvt_got=\n"
    "uvt_at=\n"
    "uvt_int=\n"
    "uvt_done=\n"
    "uvt_sl=\n"
    "uvt_fwd() {\n"
    "  uvt_int=1\n"
    /* After the command's end a signal is nobody's: not its outcome. */
    "  [ -n \"$uvt_done\" ] && return\n"
    "  if [ \"$1\" = TERM ] || [ -z \"$uvt_got\" ]; then\n"
    "    uvt_got=$1\n"
    "    uvt_at=$((SECONDS - uvt_t0))\n"
    "  fi\n"
    "  [ -n \"$uvt_cmd\" ] && builtin kill -s \"$1\" -- \"-$uvt_cmd\" "
    "2>/dev/null\n"
    "}\n"
    /* Has the command ended?  Gone from /proc, a zombie bash has not
     * reaped yet, or its pid now another process's (its start time, field
     * 22, recorded by the first call).  Asked of /proc, not of bash's job
     * table: bash may report and drop a job at any command boundary. */
    "uvt_gone() {\n"
    "  local s=\n"
    "  builtin read -r s 2>/dev/null </proc/\"$uvt_cmd\"/stat\n"
    "  s=${s##*) }\n"
    "  case $s in ''|Z*|X*) return 0 ;; esac\n"
    "  set -- $s\n"
    "  [ -n \"$uvt_born\" ] || uvt_born=${20}\n"
    "  [ \"${20}\" != \"$uvt_born\" ]\n"
    "}\n"
    "for uvt_s in HUP INT QUIT USR1 USR2 ALRM TERM XCPU; do\n"
    "  trap \"uvt_fwd $uvt_s\" \"$uvt_s\"\n"
    "done\n"
    /* p: wait -n -p (from bash 5.1 patch 10: before it, a trap that cut a
     * wait -n -p short made every later one return at once); n: wait -n;
     * empty: wait for the sleep alone. */
    "uvt_wn=\n"
    "((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 403)) && uvt_wn=n\n"
    "((BASH_VERSINFO[0] * 10000 + BASH_VERSINFO[1] * 100 + "
    "BASH_VERSINFO[2] >= 50110)) && uvt_wn=p\n"
    ": >\"$uvt_hb\"\n"
    "uvt_fifo=\n"
    "if [ -p \"$uvt_base.t\" ] &&\n"
    "  { exec 8<>\"$uvt_base.t\" 9<\"$uvt_base.t\"; } 2>/dev/null; then\n"
    "  uvt_fifo=1\n"
    "else\n"
    "  exec 8>&- 9<&-\n"
    "fi\n"
    "set -m\n";

static const char wrapper_tail[] =
    " </dev/null 9<&- &\n"
    "uvt_cmd=$!\n"
    "set +m\n"
    /* A signal that came before the command's group existed. */
    "[ -n \"$uvt_got\" ] && builtin kill -s \"$uvt_got\" -- \"-$uvt_cmd\" "
    "2>/dev/null\n"
    "exec 8>&-\n"
    "uvt_born=\n"
    "uvt_gone\n"
    "uvt_ticks=0\n"
    "uvt_fast=0\n"
    "uvt_status=\n"
    /* One redirection for the two loops: kill and wait say nothing, nor
     * does bash's note of a command killed by a signal ("Killed /bin/bash
     * -c ..."), which it prints at the first command it runs after
     * reaping one: the outcome says it, not the job's stderr. */
    "{\n"
    "while :; do\n"
    "  uvt_int=\n"
    "  if [ -n \"$uvt_fifo\" ]; then\n"
    "    if [ \"$uvt_fast\" -gt 0 ]; then\n"
    "      uvt_fast=$((uvt_fast - 1))\n"
    "      builtin read -r -t 0.002 -n 1 -u 9 uvt_x\n"
    "      uvt_gone && break\n"
    "      continue\n"
    "    fi\n"
    "    builtin read -r -t 0.1 -n 1 -u 9 uvt_x\n"
    "    uvt_rd=$?\n"
    "    if [ \"$uvt_rd\" -gt 128 ]; then\n"
    /* A tick: kill -0 is cheap (a zombie counts as alive until bash
     * reaps it); the full look, and a beat, once a beat's ticks passed
     * (counted, not read from the wall clock, which may step). */
    "      uvt_ticks=$((uvt_ticks + 1))\n"
    "      if [ \"$uvt_ticks\" -lt \"$((uvt_beat_s * 10))\" ]; then\n"
    "        builtin kill -0 \"$uvt_cmd\" || break\n"
    "        continue\n"
    "      fi\n"
    "      uvt_gone && break\n"
    "      : >\"$uvt_hb\"\n"
    "      uvt_ticks=0\n"
    "      continue\n"
    "    fi\n"
    "    uvt_gone && break\n"
    "    if [ \"$uvt_rd\" -ne 0 ]; then\n"
    /* End of file with the command not yet a zombie: it is exiting (the
     * kernel closes its files first), or it closed fd 8.  Hold a writer
     * ourselves, so reads wait again, and look every 2 ms for a while,
     * then on the 0.1 s ticks.  The writer is opened through the read
     * end's descriptor, not the name: whatever is at <key>.t now is not
     * the wrapper's business (docs/security.md). */
    "      exec 8<>/proc/self/fd/9\n"
    "      uvt_fast=50\n"
    "    fi\n"
    "    continue\n"
    "  fi\n"
    "  if [ -z \"$uvt_sl\" ]; then\n"
    "    command -p sleep \"$uvt_beat_s\" </dev/null >/dev/null 2>&1 &\n"
    "    uvt_sl=$!\n"
    "  fi\n"
    "  uvt_who=\n"
    "  case $uvt_wn in\n"
    "  p) builtin wait -n -p uvt_who \"$uvt_cmd\" \"$uvt_sl\" ;;\n"
    "  n) builtin wait -n ;;\n"
    "  *) builtin wait \"$uvt_sl\" ;;\n"
    "  esac\n"
    "  uvt_rd=$?\n"
    "  if [ \"$uvt_who\" = \"$uvt_cmd\" ]; then\n"
    "    uvt_status=$uvt_rd\n"
    "    break\n"
    "  fi\n"
    "  uvt_gone && break\n"
    "  if [ \"$uvt_who\" = \"$uvt_sl\" ] || ! builtin kill -0 \"$uvt_sl\"; "
    "then\n"
    "    : >\"$uvt_hb\"\n"
    "    uvt_sl=\n"
    "  fi\n"
    "done\n"
    /* Its status, as bash kept it (a wait a signal cuts short asks
     * again); wait -n -p gave it already. */
    "while [ -z \"$uvt_status\" ]; do\n"
    "  uvt_int=\n"
    "  builtin wait \"$uvt_cmd\"\n"
    "  uvt_rd=$?\n"
    "  [ -n \"$uvt_int\" ] || uvt_status=$uvt_rd\n"
    "done\n"
    "} 2>/dev/null\n"
    "uvt_done=1\n"
    "exec 8>&- 9<&-\n"
    "if [ -n \"$uvt_sl\" ]; then\n"
    "  builtin kill -KILL \"$uvt_sl\" 2>/dev/null\n"
    "  while :; do\n"
    "    uvt_int=\n"
    "    builtin wait \"$uvt_sl\" 2>/dev/null\n"
    "    [ -n \"$uvt_int\" ] || break\n"
    "  done\n"
    "fi\n"
    "builtin printf '%s %s %s\\n' \"$uvt_status\" \"${uvt_got:--}\" "
    "\"${uvt_at:--}\" >\"$uvt_rc\"\n"
    /* Died of a signal: raised again so Slurm sees it (E-4), without a
     * core of the wrapper's own; not a signal that stops (147 to 150
     * would stop the wrapper for good). */
    "if [ \"$uvt_status\" -gt 128 ] && [ \"$uvt_status\" -lt 193 ]; then\n"
    "  case $((uvt_status - 128)) in\n"
    "  19|20|21|22) ;;\n"
    "  *)\n"
    "    ulimit -c 0 2>/dev/null\n"
    "    trap - \"$((uvt_status - 128))\" 2>/dev/null\n"
    "    builtin kill -s \"$((uvt_status - 128))\" $$\n"
    "    ;;\n"
    "  esac\n"
    "fi\n"
    "exit \"$uvt_status\"\n";

char *uvt__slurm_wrapper(const char *base, unsigned beat_s, int array,
                         const uvt_slurm_options_t *o) {
  char *text = NULL;
  size_t len = 0;
  FILE *fp = open_memstream(&text, &len);
  size_t i;
  if (fp == NULL)
    return NULL;
  fputs(wrapper_head, fp);
  /* An array's elements each write files of their own (<key>.<index>.*). */
  fputs("uvt_base=", fp);
  put_quoted(fp, base);
  fputs(array ? "\nuvt_base=\"$uvt_base.$SLURM_ARRAY_TASK_ID\"" : "", fp);
  fputs("\nuvt_hb=\"$uvt_base.hb\"\nuvt_rc=\"$uvt_base.rc\"", fp);
  fprintf(fp, "\nuvt_beat_s=%u\n", beat_s);
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

static char *make_script(const uvt_slurm_engine_t *e, const uvt__sjob_t *j,
                         const uvt_slurm_options_t *o) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", e->out_dir, j->key);
  return uvt__slurm_wrapper(path, (unsigned)((e->heartbeat_ms + 999) / 1000),
                            j->array != NULL, o);
}

/* E-10: a local task's environment: the host's minus credentials, the
 * fixed additions, then the options' entries.  The controller keeps a
 * job's environment in its state directory: nothing scrubbed is sent. */
static int copy_env(uvt__sjob_t *j, const char *const *env) {
  size_t i;
  for (i = 0; env != NULL && env[i] != NULL; i++)
    if (strchr(env[i], '=') == NULL || env[i][0] == '=')
      return UV_EINVAL;
  if ((j->env = uvt__env_scrubbed_copy(env, &j->env_count)) == NULL)
    return UV_ENOMEM;
  return 0;
}

/* E-13: the options' values, checked before anything is registered. */
static int plain_text(const char *s, const char *extra) {
  if (s == NULL)
    return 1;
  if (*s == '\0' || *s == '-')
    return 0;
  for (; *s != '\0'; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || strchr(extra, *s) != NULL))
      return 0;
  return 1;
}

static const char *const forwarded[] = {"HUP",  "INT",  "QUIT", "USR1",
                                        "USR2", "ALRM", "TERM", "XCPU"};

int uvt__slurm_signal_parse(const char *s, int *num, unsigned *secs) {
  char name[32];
  char tail;
  const char *n;
  size_t i;
  int k;
  if (sscanf(s, "%31[^@]@%u%c", name, secs, &tail) != 2 || *secs < 1 ||
      *secs > 65535)
    return UV_EINVAL;
  if (name[strspn(name, "0123456789")] == '\0') {
    /* A number, as sbatch takes it: one of the signals passed on. */
    k = atoi(name);
    n = k > 0 && k < 65 ? sigabbrev_np(k) : NULL;
    for (i = 0; n != NULL && i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
      if (strcmp(n, forwarded[i]) == 0)
        return *num = k, 0;
    return UV_EINVAL;
  }
  /* A name in any case, with or without SIG, as task_kill takes it. */
  n = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
  for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
    if (strcasecmp(n, forwarded[i]) == 0)
      for (k = 1; k < 65; k++)
        if (sigabbrev_np(k) != NULL &&
            strcmp(sigabbrev_np(k), forwarded[i]) == 0)
          return *num = k, 0;
  return UV_EINVAL;
}

static int signal_ok(const char *s) {
  int num;
  unsigned secs;
  return s == NULL || uvt__slurm_signal_parse(s, &num, &secs) == 0;
}

static const char *const dep_types[] = {"after", "afterany", "afterok",
                                        "afternotok", "aftercorr"};

/* E-13: "type:id[:id]..." parts joined by ',' or '?', or "singleton";
 * each id a Slurm task of this engine that `owner` may see (referenced
 * in j->deps, in order). */
static int parse_dependency(uvt_slurm_engine_t *e, uvt__sjob_t *j,
                            const char *spec, uvt_agent_t *owner) {
  const char *p = spec;
  char sep = 0;
  if (strcmp(spec, "singleton") == 0)
    return 0;
  if (*spec == '\0' || strlen(spec) > 900)
    return UV_EINVAL;
  while (*p != '\0') {
    size_t len = strcspn(p, ":,?"), t;
    int ok = 0, ids = 0;
    for (t = 0; t < sizeof(dep_types) / sizeof(dep_types[0]); t++)
      if (strlen(dep_types[t]) == len && strncmp(p, dep_types[t], len) == 0)
        ok = 1;
    if (!ok)
      return UV_EINVAL;
    p += len;
    while (*p == ':') {
      char id[UVT_ID_MAX];
      uvt__sjob_t *d, **g;
      int err;
      p++;
      len = strcspn(p, ":,?");
      if (len == 0 || len >= sizeof(id))
        return UV_EINVAL;
      memcpy(id, p, len);
      id[len] = '\0';
      if ((d = uvt__slurm_find(e, id, owner, &err)) == NULL)
        return err;
      g = uvt__realloc(j->deps, (j->deps_n + 1) * sizeof(*g));
      if (g == NULL)
        return UV_ENOMEM;
      j->deps = g;
      uv_mutex_lock(&e->mutex);
      d->refs++;
      uv_mutex_unlock(&e->mutex);
      j->deps[j->deps_n++] = d;
      p += len;
      ids++;
    }
    if (ids == 0)
      return UV_EINVAL;
    if (*p == ',' || *p == '?') {
      if (sep != 0 && sep != *p)
        return UV_EINVAL;
      sep = *p++;
      if (*p == '\0')
        return UV_EINVAL;
    }
  }
  return 0;
}

static int allowed(const uvt_slurm_engine_t *e, const char *arg) {
  size_t len = strcspn(arg, "="), i;
  for (i = 0; e->sbatch_allow != NULL && e->sbatch_allow[i] != NULL; i++)
    if (strlen(e->sbatch_allow[i]) == len &&
        strncmp(e->sbatch_allow[i], arg, len) == 0)
      return 1;
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

static int dup_opt(const char *s, char **out) {
  if (s == NULL)
    return 0;
  return (*out = uvt__strdup(s)) != NULL ? 0 : UV_ENOMEM;
}

int uvt_slurm_start(uvt_slurm_engine_t *e, const uvt_slurm_options_t *o_in,
                    char id_out[UVT_ID_MAX]) {
  uvt_slurm_options_t own;
  const uvt_slurm_options_t *o = &own;
  char why[UVT__OPTS_WHY];
  uvt__sjob_t *j;
  char cwd[4096];
  const char *label;
  size_t i;
  int err;

  if (e == NULL || o_in == NULL)
    return UV_EINVAL;
  UVT_LOOP_ONLY(e->reg);
  /* the caller's first o->size bytes over the defaults, once; from
   * here on only the copy is read. */
  uvt_slurm_options_init_size(&own, sizeof(own));
  if (uvt__opts_load(&own, sizeof(own), o_in,
                     UVT__OPTS_MIN(uvt_slurm_options_t, command), why) != 0) {
    uvt_log(e->reg, UVT_LOG_ERROR,
            "uvt_slurm_start: options refused: %s; call "
            "uvt_slurm_options_init()",
            why);
    return UV_EINVAL;
  }
  if ((o->command == NULL) == (o->argv == NULL))
    return UV_EINVAL;
  if (o->command != NULL && o->command[strspn(o->command, " \t\n")] == '\0')
    return UV_EINVAL;
  if (o->argv != NULL && (o->argv[0] == NULL || o->argv[0][0] == '\0'))
    return UV_EINVAL;
  if (o->command != NULL && strlen(o->command) >= UVT__SLURM_ARG_MAX)
    return UV_E2BIG;
  for (i = 0; o->argv != NULL && o->argv[i] != NULL; i++)
    if (strlen(o->argv[i]) >= UVT__SLURM_ARG_MAX)
      return UV_E2BIG;
  if (o->output_cap_bytes != 0 && o->output_cap_bytes < 4)
    return UV_EINVAL;
  /* E-13: every value is checked before anything is registered. */
  if (!plain_text(o->account, "_-.") || !plain_text(o->qos, "_-.") ||
      !plain_text(o->partition, "_-.,") || !plain_text(o->gres, "_-.:,") ||
      !plain_text(o->array, ",-:%") || !signal_ok(o->signal) ||
      (o->array != NULL &&
       (uvt__array_count(o->array) == 0 || uvt__array_count(o->array) > 10000)))
    return UV_EINVAL;
  for (i = 0; o->sbatch_args != NULL && o->sbatch_args[i] != NULL; i++)
    if (!allowed(e, o->sbatch_args[i]) ||
        uvt__sbatch_check(o->sbatch_args[i]) != 0)
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
  j->limit_s = o->time_limit_min * 60u;
  j->nodes = o->nodes;
  j->ntasks = o->ntasks;
  j->submitted = o->submitted;
  j->submitted_data = o->submitted_data;
  if ((err = dup_opt(o->partition, &j->partition)) != 0 ||
      (err = dup_opt(o->account, &j->account)) != 0 ||
      (err = dup_opt(o->qos, &j->qos)) != 0 ||
      (err = dup_opt(o->gres, &j->gres)) != 0 ||
      (err = dup_opt(o->array, &j->array)) != 0 ||
      (err = dup_opt(o->signal, &j->signal)) != 0 ||
      (err = dup_opt(o->dependency, &j->dependency)) != 0)
    goto fail;
  if (j->array != NULL) {
    j->elems = uvt__array_count(j->array);
    err = UV_ENOMEM;
    if ((j->elem_off = uvt__calloc(2 * (size_t)j->elems, sizeof(uint64_t))) ==
        NULL)
      goto fail;
  }
  if (o->dependency != NULL &&
      (err = parse_dependency(e, j, o->dependency, o->owner)) != 0)
    goto fail;
  for (i = 0; o->sbatch_args != NULL && o->sbatch_args[i] != NULL; i++)
    ;
  if (i > 0) {
    err = UV_ENOMEM;
    if ((j->extra = uvt__calloc(i, sizeof(char *))) == NULL)
      goto fail;
    for (j->extra_n = 0; j->extra_n < i; j->extra_n++)
      if ((j->extra[j->extra_n] = uvt__strdup(o->sbatch_args[j->extra_n])) ==
          NULL)
        goto fail;
  }
  err = UV_ENOMEM;
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
  /* E-12: until the controller answered. */
  uvt_task_set_detail(j->task, uvt__strdup("submitting"));
  /* Journalled first (the thread fsyncs it before submitting, E-5). */
  uv_mutex_lock(&e->mutex);
  j->verified = 1; /* ours: we submit it */
  uvt__journal_put(e, j, 'T');
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

/* E-9: a journal entry this engine may not even ask about (another
 * cluster's, another user's): why, or NULL. */
static const char *foreign_entry(const uvt_slurm_engine_t *e,
                                 const uvt__journal_entry_t *x, char *buf,
                                 size_t size) {
  if (!x->has_identity)
    return NULL; /* v3: the controller's answer decides */
  if (x->uid != e->uid) {
    snprintf(buf, size, "it names user %u, this engine runs as %u", x->uid,
             e->uid);
    return buf;
  }
  if (x->cluster[0] != '\0' && e->cluster[0] != '\0' &&
      strcmp(x->cluster, e->cluster) != 0) {
    snprintf(buf, size, "it names cluster %s, this engine's is %s", x->cluster,
             e->cluster);
    return buf;
  }
  return NULL;
}

static void drop_entry(uvt_slurm_engine_t *e, const uvt__journal_entry_t *x,
                       const char *why) {
  uvt__sjob_t tmp;
  uvt_log(e->reg, UVT_LOG_WARN,
          "slurm: journal line for %s (slurm job %u, uvt-%s) dropped: %s; "
          "the job is left alone",
          x->id, x->job, x->key, why);
  /* Its record goes (the slot is freed). */
  memset(&tmp, 0, sizeof(tmp));
  snprintf(tmp.id, sizeof(tmp.id), "%s", x->id);
  snprintf(tmp.key, sizeof(tmp.key), "%s", x->key);
  tmp.slot = x->slot;
  uv_mutex_lock(&e->mutex);
  uvt__journal_put(e, &tmp, 'D');
  uv_mutex_unlock(&e->mutex);
}

int uvt_slurm_adopt_all(uvt_slurm_engine_t *e, uvt_agent_t *owner) {
  uvt__journal_entry_t *a;
  uvt__sjob_t **jobs;
  size_t n, i;
  int err = 0, adopted = 0;
  char why[200];

  if (e == NULL || e->journal.fd < 0)
    return UV_EINVAL;
  UVT_LOOP_ONLY(e->reg);
  if (e->closing)
    return UVT_ECLOSING;
  uv_mutex_lock(&e->mutex);
  a = e->loaded;
  n = e->loaded_n;
  e->loaded = NULL;
  e->loaded_n = 0;
  uv_mutex_unlock(&e->mutex);
  if (n == 0) {
    uvt__free(a);
    return 0;
  }
  if ((jobs = uvt__calloc(n, sizeof(*jobs))) == NULL) {
    uvt__free(a);
    return UV_ENOMEM;
  }
  /* E-9: each job, one question to the controller on the engine thread;
   * this call waits for the answers. */
  for (i = 0; i < n; i++) {
    uvt__sjob_t *j;
    const char *bad = foreign_entry(e, &a[i], why, sizeof(why));
    if (bad != NULL) {
      drop_entry(e, &a[i], bad);
      continue;
    }
    uv_mutex_lock(&e->mutex);
    j = uvt__sjob_new(e);
    if (j != NULL) {
      snprintf(j->id, sizeof(j->id), "%s", a[i].id);
      snprintf(j->key, sizeof(j->key), "%s", a[i].key);
      j->job = a[i].job;
      j->slot = a[i].slot;
      j->limit_s = a[i].limit_s;
      j->out_off = a[i].out_off;
      j->err_off = a[i].err_off;
      j->cap = 1u << 20;
      j->refs = 1; /* ours until registered */
      if (a[i].array) {
        /* The elements' offsets are not journalled: they read again
         * from the start.  The spec is not known: the counts come from
         * the controller; the output of elements 0..N-1 is looked for. */
        j->array = uvt__strdup("0-999");
        j->elems = 1000;
        j->elem_off = uvt__calloc(2000, sizeof(uint64_t));
      }
      if (a[i].job != 0) {
        j->want_verify = 1;
        j->adopting = 1;
        uvt__sjob_queue_request(j);
      } else {
        j->want_find = 1; /* by name: user and name are checked there */
      }
    }
    uv_mutex_unlock(&e->mutex);
    if (j == NULL) {
      err = UV_ENOMEM;
      break;
    }
    jobs[i] = j;
  }
  uv_mutex_lock(&e->mutex);
  for (i = 0; i < n; i++) {
    while (jobs[i] != NULL && jobs[i]->want_verify && !e->stop)
      uv_cond_wait(&e->cond, &e->mutex);
    if (jobs[i] != NULL)
      jobs[i]->adopting = 0;
  }
  uv_mutex_unlock(&e->mutex);

  for (i = 0; i < n; i++) {
    uvt__sjob_t *j = jobs[i];
    char label[UVT__SLURM_KEY_MAX + 32];
    if (j == NULL)
      continue;
    if (err == 0 && j->verify_answer == UVT__VERIFY_FOREIGN) {
      snprintf(why, sizeof(why), "the controller says %.150s", j->why);
      drop_entry(e, &a[i], why);
      j->slot = -1;
    } else if (err == 0) {
      if (j->verify_answer == UVT__VERIFY_NOANSWER)
        uvt_log(e->reg, UVT_LOG_WARN,
                "slurm: the controller did not answer about job %u (%s): "
                "adopted unconfirmed; nothing is sent to it until it does",
                j->job, j->id);
      if (a[i].job != 0)
        snprintf(label, sizeof(label), "slurm job %u (adopted)", a[i].job);
      else
        snprintf(label, sizeof(label), "slurm job uvt-%s (adopted)", a[i].key);
      uv_mutex_lock(&e->mutex);
      j->refs--;
      uv_mutex_unlock(&e->mutex);
      err = uvt__slurm_register(e, j, owner, label, a[i].id, NULL);
      if (err == 0) {
        adopted++;
        continue;
      }
      uv_mutex_lock(&e->mutex);
      j->refs++;
      uv_mutex_unlock(&e->mutex);
    }
    /* Not registered: free it (off the thread's lists first). */
    uv_mutex_lock(&e->mutex);
    if (j->in_requests) {
      j->in_requests = 0;
      uvt__list_remove(&j->request_link);
    }
    j->want_find = 0;
    uvt__sjob_free(j);
    uv_mutex_unlock(&e->mutex);
  }
  uvt__free(jobs);
  uvt__free(a);
  return err != 0 ? err : adopted;
}
