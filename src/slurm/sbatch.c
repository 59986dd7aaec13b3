/* E-13: the extra sbatch options a host may allow a task to give
 * (uvt_slurm_engine_options_t.sbatch_allow, uvt_slurm_options_t.
 * sbatch_args).  libslurm takes a job descriptor, not a command line: each
 * option known here sets its field of the descriptor.  Values are checked
 * where the task is started, so a refusal names the option. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "slurm-internal.h"

enum { TEXT, PROSE, FLAG, NUMBER, MEGABYTES, SIGNED };

static const struct {
  const char *name;
  int kind;
} known[] = {
    {"constraint", TEXT}, {"exclusive", FLAG},  {"reservation", TEXT},
    {"nodelist", TEXT},   {"exclude", TEXT},    {"mem-per-cpu", MEGABYTES},
    {"tmp", MEGABYTES},   {"comment", PROSE},   {"nice", SIGNED},
    {"licenses", TEXT},   {"time-min", NUMBER},
};
#define KNOWN_N (sizeof(known) / sizeof(known[0]))

static int find(const char *name, size_t len) {
  size_t i;
  for (i = 0; i < KNOWN_N; i++)
    if (strlen(known[i].name) == len && memcmp(known[i].name, name, len) == 0)
      return (int)i;
  return -1;
}

int uvt__sbatch_known(const char *name) {
  return name != NULL && find(name, strlen(name)) >= 0;
}

/* A value a person would type: printable, no shell or option syntax. */
static int plain(const char *v) {
  if (*v == '\0' || *v == '-')
    return 0;
  for (; *v != '\0'; v++)
    if ((unsigned char)*v < 0x21 || *v == 0x7f || strchr("'\"`$;|&<>\\", *v))
      return 0;
  return 1;
}

/* Words a person writes (a comment): spaces and quotes too, never a
 * control character.  It reaches the job's record, never a shell. */
static int prose(const char *v) {
  size_t n = 0;
  for (; *v != '\0'; v++, n++)
    if ((unsigned char)*v < 0x20 || *v == 0x7f)
      return 0;
  return n > 0 && n <= 1024;
}

static int number(const char *v, int sign, long long *out) {
  char *end;
  long long n;
  if (*v == '\0')
    return 0;
  n = strtoll(v, &end, 10);
  if (*end != '\0' || (!sign && n < 0) || n > 1000000000LL || n < -1000000000LL)
    return 0;
  *out = n;
  return 1;
}

int uvt__sbatch_check(const char *arg) {
  const char *eq = strchr(arg, '=');
  size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
  int k = find(arg, len);
  long long n;
  if (k < 0)
    return UV_EINVAL;
  if (known[k].kind == FLAG)
    return eq == NULL ? 0 : UV_EINVAL;
  if (eq == NULL)
    return UV_EINVAL;
  switch (known[k].kind) {
  case TEXT:
    return plain(eq + 1) ? 0 : UV_EINVAL;
  case PROSE:
    return prose(eq + 1) ? 0 : UV_EINVAL;
  case NUMBER:
  case MEGABYTES:
    return number(eq + 1, 0, &n) ? 0 : UV_EINVAL;
  default:
    return number(eq + 1, 1, &n) ? 0 : UV_EINVAL;
  }
}

void uvt__sbatch_apply(job_desc_msg_t *d, const char *arg) {
  const char *eq = strchr(arg, '=');
  const char *v = eq != NULL ? eq + 1 : "";
  size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
  int k = find(arg, len);
  long long n = 0;
  if (k < 0)
    return;
  if (known[k].kind != TEXT && known[k].kind != PROSE && known[k].kind != FLAG)
    (void)number(v, known[k].kind == SIGNED, &n);
  /* The strings stay the job's (arg) until the submission returned. */
  if (strcmp(known[k].name, "constraint") == 0)
    d->features = (char *)v;
  else if (strcmp(known[k].name, "exclusive") == 0)
    d->shared = 0; /* whole nodes */
  else if (strcmp(known[k].name, "reservation") == 0)
    d->reservation = (char *)v;
  else if (strcmp(known[k].name, "nodelist") == 0)
    d->req_nodes = (char *)v;
  else if (strcmp(known[k].name, "exclude") == 0)
    d->exc_nodes = (char *)v;
  else if (strcmp(known[k].name, "mem-per-cpu") == 0)
    d->pn_min_memory = (uint64_t)n | MEM_PER_CPU;
  else if (strcmp(known[k].name, "tmp") == 0)
    d->pn_min_tmp_disk = (uint32_t)n;
  else if (strcmp(known[k].name, "comment") == 0)
    d->comment = (char *)v;
  else if (strcmp(known[k].name, "nice") == 0)
    d->nice = (uint32_t)(NICE_OFFSET + n);
  else if (strcmp(known[k].name, "licenses") == 0)
    d->licenses = (char *)v;
  else if (strcmp(known[k].name, "time-min") == 0)
    d->time_min = (uint32_t)n;
}
