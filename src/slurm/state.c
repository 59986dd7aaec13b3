/* E-4: how a job that left Slurm's queue maps to a task outcome. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <slurm/slurm.h>

#include "slurm-internal.h"

const char *uvt__slurm_state_name(uint32_t state) {
  switch (state & JOB_STATE_BASE) {
  case JOB_PENDING:
    return "PENDING";
  case JOB_RUNNING:
    return "RUNNING";
  case JOB_SUSPENDED:
    return "SUSPENDED";
  case JOB_COMPLETE:
    return "COMPLETED";
  case JOB_CANCELLED:
    return "CANCELLED";
  case JOB_FAILED:
    return "FAILED";
  case JOB_TIMEOUT:
    return "TIMEOUT";
  case JOB_NODE_FAIL:
    return "NODE_FAIL";
  case JOB_PREEMPTED:
    return "PREEMPTED";
  case JOB_BOOT_FAIL:
    return "BOOT_FAIL";
  case JOB_DEADLINE:
    return "DEADLINE";
  case JOB_OOM:
    return "OUT_OF_MEMORY";
  default:
    return "UNKNOWN";
  }
}

static void signal_detail(int sig, char *buf, size_t size) {
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev != NULL)
    snprintf(buf, size, "signal: SIG%s", abbrev);
  else
    snprintf(buf, size, "signal: %d", sig);
}

void uvt__slurm_map_end(uint32_t state, uint32_t exit_code, uint32_t job,
                        int kill_requested, uvt__slurm_end_t *end) {
  uint32_t base = state & JOB_STATE_BASE;
  int status = (int)exit_code;
  memset(end, 0, sizeof(*end));
  switch (base) {
  case JOB_COMPLETE:
  case JOB_FAILED:
    if (WIFSIGNALED(status)) {
      end->status = UVT_KILLED;
      signal_detail(WTERMSIG(status), end->detail, sizeof(end->detail));
    } else {
      end->status = UVT_COMPLETED;
      snprintf(end->detail, sizeof(end->detail), "exit code: %d",
               WEXITSTATUS(status));
    }
    return;
  case JOB_CANCELLED:
    end->status = UVT_KILLED;
    snprintf(end->detail, sizeof(end->detail), "slurm CANCELLED (job %u)%s",
             job, kill_requested ? "" : " by someone else");
    return;
  default:
    /* TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE. */
    end->status = UVT_FAILED;
    snprintf(end->detail, sizeof(end->detail), "slurm %s (job %u)",
             uvt__slurm_state_name(base), job);
    return;
  }
}

void uvt__slurm_map_rc(const char *text, uint32_t job, int kill_requested,
                       uint32_t limit_s, uvt__slurm_end_t *end) {
  int rc = 0, n;
  char sig[16] = "-";
  unsigned at = 0;
  memset(end, 0, sizeof(*end));
  /* The wrapper writes its one line with one write: a text without the
   * newline is a file still being written (or cut short), not a status. */
  if (text != NULL && strchr(text, '\n') == NULL)
    text = NULL;
  n = text != NULL ? sscanf(text, "%d %15s %u", &rc, sig, &at) : 0;
  if (n < 1) {
    end->status = kill_requested ? UVT_KILLED : UVT_FAILED;
    snprintf(end->detail, sizeof(end->detail),
             "slurm forgot job %u and it left no exit code", job);
    return;
  }
  /* E-11, E-14: the wrapper passed on Slurm's SIGTERM: a cancel, the time
   * limit or a preemption, told apart by what we know. */
  if (n >= 2 && strcmp(sig, "TERM") == 0) {
    if (kill_requested) {
      end->status = UVT_KILLED;
      snprintf(end->detail, sizeof(end->detail), "slurm CANCELLED (job %u)",
               job);
    } else if (n == 3 && limit_s > 0 && at + 1 >= limit_s) {
      end->status = UVT_FAILED;
      snprintf(end->detail, sizeof(end->detail), "slurm TIMEOUT (job %u)", job);
    } else {
      end->status = UVT_KILLED;
      snprintf(end->detail, sizeof(end->detail),
               "slurm ended job %u with SIGTERM (cancelled or preempted; "
               "the controller forgot which)",
               job);
    }
    return;
  }
  /* The wrapper writes the command's status as a shell gives it. */
  if (rc > 128 && rc < 128 + 65) {
    end->status = UVT_KILLED;
    signal_detail(rc - 128, end->detail, sizeof(end->detail));
    return;
  }
  end->status = UVT_COMPLETED;
  snprintf(end->detail, sizeof(end->detail), "exit code: %d", rc);
}
