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

void uvt__acct_parse(const char *text, uint32_t job, const char *key,
                     uint32_t uid, uvt__acct_t *out) {
  char name[UVT__SLURM_KEY_MAX + 8], want_id[16];
  const char *line = text;
  int foreign = 0;
  memset(out, 0, sizeof(*out));
  snprintf(name, sizeof(name), "uvt-%s", key);
  snprintf(want_id, sizeof(want_id), "%u", job);
  /* One record a line: JobID|JobName|UID|State|ExitCode.  A reused job id
   * (a controller reset) leaves several: ours is the one with our name
   * and user, the last one when there are more. */
  while (line != NULL && *line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char buf[512], *f[5], *p, *sep;
    unsigned rec_uid, ex = 0, sig = 0;
    uint32_t state;
    int n = 0;
    if (len >= sizeof(buf)) {
      /* Longer than a record of ours can be: not ours, if it is N's. */
      if (strncmp(line, want_id, strlen(want_id)) == 0 &&
          line[strlen(want_id)] == '|') {
        foreign = 1;
        snprintf(out->why, sizeof(out->why),
                 "its accounting record names a job name too long to be "
                 "\"%s\"",
                 name);
      }
      line = end != NULL ? end + 1 : NULL;
      continue;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    line = end != NULL ? end + 1 : NULL;
    /* JobID from the left, UID, State and ExitCode from the right: a
     * job name may hold a '|' of its own. */
    if ((sep = strchr(buf, '|')) == NULL)
      continue;
    *sep = '\0';
    f[0] = buf;
    f[1] = sep + 1;
    for (n = 4; n >= 2; n--) {
      if ((p = strrchr(f[1], '|')) == NULL)
        break;
      *p = '\0';
      f[n] = p + 1;
    }
    if (n >= 2 || strcmp(f[0], want_id) != 0)
      continue; /* short, a step, an array element, another job */
    if (sscanf(f[2], "%u", &rec_uid) != 1)
      continue;
    if (rec_uid != uid || strcmp(f[1], name) != 0) {
      foreign = 1;
      snprintf(out->why, sizeof(out->why),
               "its accounting record names \"%.64s\" of user %u, not "
               "\"%s\" of user %u",
               f[1], rec_uid, name, uid);
      continue;
    }
    if ((state = ended_state(f[3])) == 0)
      continue;
    (void)sscanf(f[4], "%u:%u", &ex, &sig);
    out->found = UVT__ACCT_OURS;
    out->state = state;
    /* As the controller gives it live: a wait status. */
    out->exit_code = sig != 0 ? (sig & 0x7f) : (ex & 0xff) << 8;
  }
  if (out->found == 0 && foreign)
    out->found = UVT__ACCT_FOREIGN;
}

/* sacct's stdout into buf (at most size - 1 bytes; the rest is read and
 * dropped).  Returns 0, or -1 (no sacct, no answer in time). */
static int run_sacct(const char *conf, int jobcomp, uint32_t job, char *buf,
                     size_t size) {
  char jobarg[16], confvar[4200];
  char *argv[] = {"sacct", "-n",   "-P", "-X",
                  "-j",    jobarg, "-o", "JobID,JobName,UID,State,ExitCode",
                  NULL,    NULL};
  char **envp = NULL;
  size_t n = 0, i, k = 0, got = 0;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t none, dfl;
  int fds[2], rc = -1, status, spawned;
  pid_t pid = -1;
  uint64_t deadline;

  snprintf(jobarg, sizeof(jobarg), "%u", job);
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
  if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    rc = -1;
  return rc;
}

void uvt__acct_read(const char *conf, int kinds, uint32_t job, const char *key,
                    uint32_t uid, uvt__acct_t *out) {
  char *buf;
  int pass;
  memset(out, 0, sizeof(*out));
  if (kinds == 0 || (buf = malloc(ACCT_OUT_MAX)) == NULL)
    return;
  /* slurmdbd first (it keeps everything), then the completion log. */
  for (pass = 0; pass < 2 && out->found != UVT__ACCT_OURS; pass++) {
    uvt__acct_t got;
    int jobcomp = pass == 1;
    if (!(kinds & (jobcomp ? UVT__ACCT_JOBCOMP : UVT__ACCT_DBD)))
      continue;
    if (run_sacct(conf, jobcomp, job, buf, ACCT_OUT_MAX) != 0)
      continue;
    uvt__acct_parse(buf, job, key, uid, &got);
    if (got.found != 0)
      *out = got;
  }
  free(buf);
}
