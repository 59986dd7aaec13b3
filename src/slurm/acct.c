/* E-14, E-9: an ended job's record, read from Slurm's accounting once the
 * controller forgot the job (MinJobAge).
 *
 * Where the records are: a site with slurmdbd
 * (AccountingStorageType=accounting_storage/slurmdbd) keeps every job;
 * a site without a database can still keep a job completion log
 * (JobCompType=jobcomp/filetxt, read with `sacct -c`).  Either is read by
 * running sacct, not through libslurm's C API: slurmdb_jobcomp_jobs_get()
 * loads the jobcomp plugin into this process, and Debian 12's plugins
 * (22.05) need symbols that only Slurm's private libslurmfull exports
 * (dlopen of jobcomp_filetxt.so fails on jobcomp_destroy_job), which a
 * library must not link (no stable interface, and a second copy of
 * libslurm's state).  slurmdb_jobs_get() goes through the same plugin
 * layer.  sacct is Slurm's own reader for both sources and is installed
 * wherever the client commands are.
 *
 * sacct runs on the engine's thread, never the loop's, with the engine's
 * mutex dropped (as around an RPC), for at most ACCT_WAIT_MS; it is
 * reaped by its pid whatever happens (killed at the bound). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "slurm-internal.h"

extern char **environ;

/* sacct answers from a file or slurmdbd; a site's slurmdbd that does not
 * answer within this is taken as no record (the wrapper's files then). */
#define ACCT_WAIT_MS 10000
#define ACCT_OUT_MAX 16384

extern slurm_conf_t *slurm_conf_lock(void);
extern void slurm_conf_unlock(void);

int uvt__acct_kinds(void) {
  int kinds = 0;
  slurm_conf_t *c = slurm_conf_lock();
  if (c->accounting_storage_type != NULL &&
      strstr(c->accounting_storage_type, "slurmdbd") != NULL)
    kinds |= UVT__ACCT_DBD;
  if (c->job_comp_type != NULL && c->job_comp_type[0] != '\0' &&
      strcmp(c->job_comp_type, "jobcomp/none") != 0)
    kinds |= UVT__ACCT_JOBCOMP;
  slurm_conf_unlock();
  return kinds;
}

/* "COMPLETED", "CANCELLED by 0", ...: the ended base state, or 0 (a state
 * that is not an end: PENDING, RUNNING, REQUEUED, ...). */
static uint32_t ended_state(const char *text) {
  size_t len = strcspn(text, " +");
  uint32_t s;
  for (s = JOB_COMPLETE; s < JOB_END; s++) {
    const char *name = uvt__slurm_state_name(s);
    if (strlen(name) == len && strncmp(name, text, len) == 0)
      return s;
  }
  return 0;
}

/* The most records one job id has that are looked at (a reused id). */
#define ACCT_RECS 16

/* E-14, E-9: a forgotten job's record, from two sacct answers for `job`:
 * `plain` (JobID|UID|State|ExitCode: fields the controller writes, one
 * record a line) and `named` (JobID|JobName|UID|State|ExitCode).  A job
 * name is the submitter's text and may hold a line break, which in
 * `named` can make a line that looks like a record of ours; so the
 * state, the exit code and the user come from `plain`, and `named` only
 * says the name of each record, the two answers lined up record for
 * record.  Where they do not line up (a name spans lines), nothing in
 * them is believed: FOREIGN, never OURS. */
void uvt__acct_parse(const char *plain, const char *named, uint32_t job,
                     const char *key, uint32_t uid, uvt__acct_t *out) {
  char name[UVT__SLURM_KEY_MAX + 8], want_id[16];
  struct {
    unsigned uid;
    uint32_t state;
    unsigned ex, sig;
  } rec[ACCT_RECS];
  int name_ok[ACCT_RECS];
  char other[72] = "";
  unsigned other_uid = 0;
  size_t k = 0, m = 0, i;
  int broken = 0;
  const char *line;
  memset(out, 0, sizeof(*out));
  snprintf(name, sizeof(name), "uvt-%s", key);
  snprintf(want_id, sizeof(want_id), "%u", job);
  /* The records, in sacct's order. */
  for (line = plain; line != NULL && *line != '\0';) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char buf[128], id[16], st[64];
    unsigned u, ex = 0, sig = 0;
    int n = 0;
    if (len < sizeof(buf)) {
      memcpy(buf, line, len);
      buf[len] = '\0';
      if (sscanf(buf, "%15[^|]|%u|%63[^|]|%u:%u%n", id, &u, st, &ex, &sig,
                 &n) == 5 &&
          (size_t)n == len && strcmp(id, want_id) == 0) {
        if (k == ACCT_RECS) {
          broken = 1;
          break;
        }
        rec[k].uid = u;
        rec[k].state = ended_state(st);
        rec[k].ex = ex;
        rec[k].sig = sig;
        k++;
      }
    }
    line = end != NULL ? end + 1 : NULL;
  }
  if (k == 0)
    return; /* no record: the wrapper's files then */
  /* Their names, in the same order. */
  for (line = named; line != NULL && *line != '\0' && !broken;) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    size_t idlen = strlen(want_id);
    int for_us =
        len > idlen && strncmp(line, want_id, idlen) == 0 && line[idlen] == '|';
    char buf[512], *f[5], *p, *sep;
    int n;
    if (len >= sizeof(buf)) {
      /* Longer than a record of ours can be: N's, and not ours. */
      if (for_us) {
        if (m == k)
          broken = 1;
        else
          name_ok[m++] = 0;
      } else if (len == 0 || line[0] < '0' || line[0] > '9') {
        broken = 1;
      }
      line = end != NULL ? end + 1 : NULL;
      continue;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    line = end != NULL ? end + 1 : NULL;
    /* A line that does not start with a job id is the rest of a name. */
    if (len == 0 || buf[0] < '0' || buf[0] > '9') {
      broken = 1;
      break;
    }
    /* JobID from the left, UID, State and ExitCode from the right: a
     * job name may hold a '|' of its own. */
    if ((sep = strchr(buf, '|')) == NULL) {
      broken = broken || for_us;
      continue;
    }
    *sep = '\0';
    f[0] = buf;
    f[1] = sep + 1;
    for (n = 4; n >= 2; n--) {
      if ((p = strrchr(f[1], '|')) == NULL)
        break;
      *p = '\0';
      f[n] = p + 1;
    }
    if (strcmp(f[0], want_id) != 0)
      continue; /* a step, an array element, another job */
    if (n >= 2 || m == k) {
      broken = 1; /* cut short, or one line more than records */
      break;
    }
    name_ok[m] = strcmp(f[1], name) == 0;
    if (!name_ok[m] && other[0] == '\0')
      snprintf(other, sizeof(other), "%.64s", f[1]);
    m++;
  }
  if (broken || m != k) {
    out->found = UVT__ACCT_FOREIGN;
    snprintf(out->why, sizeof(out->why),
             "its accounting records for job %u do not line up (a job name "
             "with a line break in it): none is believed",
             job);
    return;
  }
  for (i = 0; i < k; i++) {
    if (rec[i].uid == uid && name_ok[i]) {
      if (rec[i].state == 0)
        continue; /* not ended: no outcome */
      out->found = UVT__ACCT_OURS;
      out->state = rec[i].state;
      /* As the controller gives it live: a wait status. */
      out->exit_code =
          rec[i].sig != 0 ? (rec[i].sig & 0x7f) : (rec[i].ex & 0xff) << 8;
    } else if (other_uid == 0 || !name_ok[i]) {
      other_uid = rec[i].uid;
    }
  }
  if (out->found == 0) {
    for (i = 0; i < k; i++)
      if (!(rec[i].uid == uid && name_ok[i]))
        break;
    if (i == k)
      return; /* ours, not ended */
    out->found = UVT__ACCT_FOREIGN;
    snprintf(out->why, sizeof(out->why),
             "its accounting record names \"%.64s\" of user %u, not \"%s\" "
             "of user %u",
             other[0] != '\0' ? other : name, rec[i].uid, name, uid);
  }
}

/* sacct's stdout into buf (at most size - 1 bytes; the rest is read and
 * dropped).  Returns 0, or -1 (no sacct, no answer in time). */
static int run_sacct(const char *conf, int jobcomp, uint32_t job,
                     const char *fields, char *buf, size_t size) {
  char jobarg[16], confvar[4200], fieldarg[64];
  char *argv[] = {"sacct", "-n", "-P",     "-X", "-j",
                  jobarg,  "-o", fieldarg, NULL, NULL};
  char **envp = NULL;
  size_t n = 0, i, k = 0, got = 0;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t none, dfl;
  int fds[2], rc = -1, status, spawned, over = 0;
  pid_t pid = -1;
  uint64_t deadline;

  snprintf(jobarg, sizeof(jobarg), "%u", job);
  snprintf(fieldarg, sizeof(fieldarg), "%s", fields);
  if (jobcomp)
    argv[8] = "-c";
  /* The engine's slurm.conf, when the host named one. */
  for (n = 0; environ[n] != NULL; n++)
    ;
  if ((envp = calloc(n + 2, sizeof(*envp))) == NULL)
    return -1;
  for (i = 0; i < n; i++)
    if (conf == NULL || strncmp(environ[i], "SLURM_CONF=", 11) != 0)
      envp[k++] = environ[i];
  if (conf != NULL) {
    snprintf(confvar, sizeof(confvar), "SLURM_CONF=%s", conf);
    envp[k++] = confvar;
  }
  if (pipe2(fds, O_CLOEXEC) != 0) {
    free(envp);
    return -1;
  }
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_init(&at);
  sigemptyset(&none);
  sigfillset(&dfl);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  spawned = posix_spawnp(&pid, "sacct", &fa, &at, argv, envp) == 0;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(envp);
  close(fds[1]);
  if (!spawned) {
    close(fds[0]);
    return -1;
  }
  deadline = uv_hrtime() / 1000000u + ACCT_WAIT_MS;
  for (;;) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    uint64_t now = uv_hrtime() / 1000000u;
    char chunk[4096];
    ssize_t r;
    if (now >= deadline) {
      kill(pid, SIGKILL);
      break;
    }
    r = poll(&pfd, 1, (int)(deadline - now));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      continue; /* the deadline is checked above */
    r = read(fds[0], chunk, sizeof(chunk));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      rc = 0; /* EOF */
      break;
    }
    if ((size_t)r > size - 1 - got)
      over = 1; /* cut: a record could be cut short, so none is read */
    if (got + 1 < size) {
      size_t take = (size_t)r < size - 1 - got ? (size_t)r : size - 1 - got;
      memcpy(buf + got, chunk, take);
      got += take;
    }
  }
  buf[got] = '\0';
  close(fds[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (rc == 0 && (over || !(WIFEXITED(status) && WEXITSTATUS(status) == 0)))
    rc = -1;
  return rc;
}

void uvt__acct_read(const char *conf, int kinds, uint32_t job, const char *key,
                    uint32_t uid, uvt__acct_t *out) {
  char *buf, *plain;
  int pass;
  memset(out, 0, sizeof(*out));
  if (kinds == 0 || (buf = malloc(2 * ACCT_OUT_MAX)) == NULL)
    return;
  plain = buf + ACCT_OUT_MAX;
  /* slurmdbd first (it keeps everything), then the completion log. */
  for (pass = 0; pass < 2 && out->found != UVT__ACCT_OURS; pass++) {
    uvt__acct_t got;
    int jobcomp = pass == 1;
    if (!(kinds & (jobcomp ? UVT__ACCT_JOBCOMP : UVT__ACCT_DBD)))
      continue;
    if (run_sacct(conf, jobcomp, job, "JobID,UID,State,ExitCode", plain,
                  ACCT_OUT_MAX) != 0 ||
        run_sacct(conf, jobcomp, job, "JobID,JobName,UID,State,ExitCode", buf,
                  ACCT_OUT_MAX) != 0)
      continue;
    uvt__acct_parse(plain, buf, job, key, uid, &got);
    if (got.found != 0)
      *out = got;
  }
  free(buf);
}
