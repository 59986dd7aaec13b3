/* E-8, E-10, E-12..E-14: `uvtasks-mcp --slurm [--slurm-journal FILE]`:
 * the tool submit_job starts a Slurm batch job as task slurm-N, owned by
 * the client's agent, so task_output, task_wait, task_kill and task_list
 * work on it as on any task; cluster_info says what the cluster offers.
 * submit_job answers once the controller accepted the job (with its job
 * id) or refused it (with Slurm's reason), or, while the controller does
 * not answer, says so and for how long the engine keeps trying.  With a
 * journal the engine leaves the jobs running when the server stops, and
 * a server started again on the same journal takes them back under their
 * ids (E-5, E-6). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "uvtasks/slurm.h"

static const char schema[] =
    "{\"name\":\"submit_job\",\"title\":\"Submit a Slurm batch job\","
    "\"description\":\"Run a shell command as a Slurm batch job on the "
    "cluster. Answers once the controller accepted it (with its task id "
    "slurm-N and Slurm job id) or refused it (with Slurm's reason); read "
    "its output with task_output, stop it with task_kill (cancels the "
    "whole job; the command gets SIGTERM first, as under sbatch). The job "
    "has no stdin and no terminal, and the server's environment without "
    "its credentials. cluster_info lists partitions, their limits and "
    "free nodes.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"bash command\"},"
    "\"cpus\":{\"type\":\"integer\",\"minimum\":1,"
    "\"description\":\"CPUs (per task with ntasks)\"},"
    "\"mem_mb\":{\"type\":\"integer\",\"minimum\":1,"
    "\"description\":\"memory per node in MB (--mem)\"},"
    "\"memory_mb\":{\"type\":\"integer\",\"minimum\":1,"
    "\"description\":\"the same as mem_mb\"},"
    "\"time_limit_min\":{\"type\":\"integer\",\"minimum\":1},"
    "\"partition\":{\"type\":\"string\"},"
    "\"account\":{\"type\":\"string\"},"
    "\"qos\":{\"type\":\"string\"},"
    "\"gres\":{\"type\":\"string\",\"description\":\"e.g. gpu:1\"},"
    "\"nodes\":{\"type\":\"integer\",\"minimum\":1},"
    "\"ntasks\":{\"type\":\"integer\",\"minimum\":1,"
    "\"description\":\"tasks for srun/MPI inside the job\"},"
    "\"dependency\":{\"type\":\"string\",\"description\":"
    "\"e.g. afterok:slurm-2:slurm-3 (task ids)\"},"
    "\"array\":{\"type\":\"string\",\"description\":\"e.g. 0-9 or 1-100%%10: "
    "one task for the whole array; $SLURM_ARRAY_TASK_ID in the command\"},"
    "\"signal\":{\"type\":\"string\",\"description\":\"e.g. USR1@60: every "
    "process of the command gets USR1 about 60 s before its time limit "
    "(give them a handler)\"},"
    "\"sbatch_args\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
    "\"description\":\"extra options name=value the server allows: %s\"},"
    "\"label\":{\"type\":\"string\"}},"
    "\"required\":[\"command\"],\"additionalProperties\":false}}";

static const char info_schema[] =
    "{\"name\":\"cluster_info\",\"title\":\"What the Slurm cluster "
    "offers\",\"description\":\"The cluster's partitions (state, time "
    "limit, idle of total nodes, CPUs, memory and GPUs per node) and your "
    "jobs in its queue.\",\"inputSchema\":{\"type\":\"object\","
    "\"properties\":{},\"additionalProperties\":false}}";

static mcp_server_t *the_server;

json_t *mcp_slurm_schema(void) {
  char allow[600] = "", text[sizeof(schema) + 600];
  size_t i, n = 0;
  const mcp_config_t *c = the_server != NULL ? &the_server->config : NULL;
  for (i = 0; c != NULL && i < c->slurm_allow_n && n < sizeof(allow) - 40; i++)
    n += (size_t)snprintf(allow + n, sizeof(allow) - n, "%s%s",
                          i > 0 ? ", " : "", c->slurm_allow[i]);
  snprintf(text, sizeof(text), schema, n > 0 ? allow : "none");
  return json_loads(text, 0, NULL);
}

json_t *mcp_slurm_info_schema(void) {
  return json_loads(info_schema, 0, NULL);
}

/* A call answered later, in its own era and batch. */
typedef struct pending_s {
  struct pending_s *next, *prev;
  mcp_server_t *server;
  json_t *id;
  int era;
  mcp_batch_t *batch;
  char task[UVT_ID_MAX];
} pending_t;

static pending_t *pendings;

static pending_t *pending_new(mcp_server_t *server, json_t *id) {
  pending_t *p = calloc(1, sizeof(*p));
  if (p == NULL)
    return NULL;
  p->server = server;
  p->id = json_incref(id);
  p->era = server->era;
  if (server->batch != NULL) {
    p->batch = server->batch;
    p->batch->pending++;
  }
  p->next = pendings;
  if (pendings != NULL)
    pendings->prev = p;
  pendings = p;
  return p;
}

static void pending_free(pending_t *p) {
  if (p->prev != NULL)
    p->prev->next = p->next;
  else
    pendings = p->next;
  if (p->next != NULL)
    p->next->prev = p->prev;
  json_decref(p->id);
  free(p);
}

/* Answer the call; `keep`: the engine will still call back with this
 * record (a RETRYING answer): it stays, answered, until then. */
static void pending_answer(pending_t *p, const char *text, int is_error,
                           int keep) {
  mcp_server_t *server = p->server;
  int era = server->era;
  mcp_batch_t *batch = server->batch;
  json_t *result;
  if (p->id == NULL) {
    pending_free(p);
    return;
  }
  server->era = p->era;
  server->batch = p->batch;
  result = mcp_rpc_tool_result(server, text, strlen(text), is_error, 1);
  if (result == NULL)
    mcp_rpc_error(server, p->id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
  else
    mcp_rpc_result(server, p->id, result);
  server->batch = batch;
  server->era = era;
  if (p->batch != NULL)
    mcp_rpc_batch_release(server, p->batch);
  p->batch = NULL;
  json_decref(p->id);
  p->id = NULL;
  if (!keep)
    pending_free(p);
}

int mcp_slurm_init(mcp_server_t *server) {
  uvt_slurm_engine_options_t eo;
  uvt_slurm_engine_t *e = NULL;
  char dir[4096];
  const char *base = getenv("UVTASKS_SLURM_OUT");
  const char *allow[33];
  size_t i;
  int err;

  the_server = server;
  uvt_slurm_engine_options_init(&eo);
  if (base == NULL) {
    /* Beside the journal, or in the working directory: both are expected
     * to be on a file system the nodes share. */
    if (server->config.slurm_journal != NULL)
      snprintf(dir, sizeof(dir), "%s.out", server->config.slurm_journal);
    else
      snprintf(dir, sizeof(dir), "%s/uvtasks-slurm-out",
               server->config.cwd != NULL ? server->config.cwd : ".");
    base = dir;
  }
  for (i = 0; i < server->config.slurm_allow_n; i++)
    allow[i] = server->config.slurm_allow[i];
  allow[i] = NULL;
  eo.out_dir = base;
  eo.journal = server->config.slurm_journal;
  eo.detach_on_close = server->config.slurm_journal != NULL;
  eo.sbatch_allow = i > 0 ? allow : NULL;
  err = uvt_slurm_engine_new(server->reg, &eo, &e);
  if (err == UV_EINVAL && i > 0)
    fprintf(stderr,
            "uvtasks-mcp: --slurm-sbatch-allow: an option the engine does "
            "not know\n");
  else if (err == UV_EBUSY && eo.journal != NULL)
    fprintf(stderr,
            "uvtasks-mcp: --slurm-journal %s is in use by another server\n",
            eo.journal);
  else if (err != 0) {
    /* Say which of the files it was: the journal, its output directory
     * or the cluster's configuration. */
    const char *conf = getenv("SLURM_CONF");
    fprintf(stderr,
            "uvtasks-mcp: --slurm: %s (journal %s, output directory %s, "
            "slurm.conf %s)\n",
            uvt_strerror(err), eo.journal != NULL ? eo.journal : "none",
            eo.out_dir,
            conf != NULL ? conf : "libslurm's default (no SLURM_CONF)");
  }
  if (err != 0)
    return err;
  server->slurm = e;
  if (server->config.slurm_journal != NULL) {
    err = uvt_slurm_adopt_all(e, &server->agent);
    if (err < 0)
      fprintf(stderr, "uvtasks-mcp: --slurm-journal: adopting: %s\n",
              uvt_strerror(err));
    else if (err > 0)
      fprintf(stderr, "uvtasks-mcp: %d Slurm job(s) adopted from %s\n", err,
              server->config.slurm_journal);
  }
  return 0;
}

void mcp_slurm_close(mcp_server_t *server) {
  /* Calls still waiting for the controller hear that the server goes
   * (the engine calls back no more once closed). */
  while (pendings != NULL) {
    char text[256];
    snprintf(text, sizeof(text),
             "%s%s: the server is shutting down before the controller "
             "answered.",
             pendings->task[0] ? "Task " : "cluster_info",
             pendings->task[0] ? pendings->task : "");
    pending_answer(pendings, text, 1, 0);
  }
  if (server->slurm != NULL)
    uvt_slurm_engine_close(server->slurm, NULL, NULL);
  server->slurm = NULL;
}

static int whole(json_t *args, const char *key, uint64_t *out) {
  json_t *v = json_object_get(args, key);
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 1 ||
      json_integer_value(v) > 100000000)
    return -1;
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

static int text(json_t *args, const char *key, const char **out) {
  json_t *v = json_object_get(args, key);
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v) ||
      strlen(json_string_value(v)) != json_string_length(v))
    return -1;
  *out = json_string_value(v);
  return 0;
}

/* E-12: the controller's answer. */
static void submitted(void *data, const char *id, uvt_slurm_submit_t what,
                      uint32_t job, const char *why) {
  pending_t *p = data;
  char buf[700];
  if (p == NULL)
    return;
  switch (what) {
  case UVT_SLURM_ACCEPTED:
    snprintf(buf, sizeof(buf),
             "Submitted as task %s (Slurm job %u). Read its output with "
             "task_output, stop it with task_kill.",
             id, job);
    pending_answer(p, buf, 0, 0);
    break;
  case UVT_SLURM_REFUSED:
    snprintf(buf, sizeof(buf),
             "submit_job: Slurm refused the job (task %s): %s", id, why);
    pending_answer(p, buf, 1, 0);
    break;
  default:
    snprintf(buf, sizeof(buf),
             "Task %s is not submitted yet: %s. The engine keeps trying; "
             "task_output or task_list shows when the controller accepts "
             "it (or the task fails when the engine gives up).",
             id, why);
    pending_answer(p, buf, 0, 1);
    break;
  }
}

static void info_done(void *data, int status, const char *t) {
  pending_t *p = data;
  char buf[300];
  if (status != 0) {
    snprintf(buf, sizeof(buf), "cluster_info: %.250s", t);
    pending_answer(p, buf, 1, 0);
  } else {
    pending_answer(p, t, 0, 0);
  }
}

static void answer_now(mcp_server_t *server, json_t *id, const char *t,
                       int is_error) {
  json_t *result = mcp_rpc_tool_result(server, t, strlen(t), is_error, 1);
  if (result == NULL)
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
  else
    mcp_rpc_result(server, id, result);
}

static int submit(mcp_server_t *server, json_t *id, json_t *args) {
  uvt_slurm_options_t o;
  uint64_t cpus = 0, mem = 0, memory = 0, limit = 0, nodes = 0, ntasks = 0;
  const char *extra[33];
  char id_out[UVT_ID_MAX], buf[512];
  json_t *sargs;
  pending_t *p;
  size_t i;
  int err;

  uvt_slurm_options_init(&o);
  if (!json_is_object(args) || text(args, "command", &o.command) != 0 ||
      o.command == NULL) {
    answer_now(server, id, "submit_job: \"command\" (a string) is required.",
               1);
    return 0;
  }
  if (text(args, "partition", &o.partition) != 0 ||
      text(args, "label", &o.label) != 0 ||
      text(args, "account", &o.account) != 0 ||
      text(args, "qos", &o.qos) != 0 || text(args, "gres", &o.gres) != 0 ||
      text(args, "dependency", &o.dependency) != 0 ||
      text(args, "array", &o.array) != 0 ||
      text(args, "signal", &o.signal) != 0 || whole(args, "cpus", &cpus) != 0 ||
      whole(args, "mem_mb", &mem) != 0 ||
      whole(args, "memory_mb", &memory) != 0 ||
      whole(args, "time_limit_min", &limit) != 0 ||
      whole(args, "nodes", &nodes) != 0 ||
      whole(args, "ntasks", &ntasks) != 0) {
    answer_now(server, id,
               "submit_job: partition, account, qos, gres, dependency, "
               "array, signal and label are strings; cpus, mem_mb, "
               "memory_mb, time_limit_min, nodes and ntasks are whole "
               "numbers from 1.",
               1);
    return 0;
  }
  {
    /* M-TOOLS-16: an argument the tool does not take is an error. */
    static const char *const known[] = {
        "command",        "cpus",      "mem_mb",      "memory_mb",
        "time_limit_min", "partition", "account",     "qos",
        "gres",           "nodes",     "ntasks",      "dependency",
        "array",          "signal",    "sbatch_args", "label"};
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
      size_t k;
      for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
        if (strcmp(key, known[k]) == 0)
          break;
      if (k == sizeof(known) / sizeof(known[0])) {
        snprintf(buf, sizeof(buf), "submit_job: no argument \"%.100s\".", key);
        answer_now(server, id, buf, 1);
        return 0;
      }
    }
  }
  sargs = json_object_get(args, "sbatch_args");
  i = 0;
  if (sargs != NULL && !json_is_null(sargs)) {
    if (!json_is_array(sargs) || json_array_size(sargs) > 32) {
      answer_now(server, id,
                 "submit_job: sbatch_args is a list of at most 32 strings.", 1);
      return 0;
    }
    for (i = 0; i < json_array_size(sargs); i++) {
      json_t *v = json_array_get(sargs, i);
      if (!json_is_string(v)) {
        answer_now(server, id, "submit_job: sbatch_args holds strings.", 1);
        return 0;
      }
      extra[i] = json_string_value(v);
    }
  }
  extra[i] = NULL;
  if (i > 0)
    o.sbatch_args = extra;
  /* L-LIM-3: a task's memory limit is the job's --mem, its CPU limit the
   * job's CPUs; the server's limits are their defaults and ceilings. */
  mem = mem > 0 ? mem : memory;
  if (mcp_limits_slurm(&server->config, &mem, &cpus, buf, sizeof(buf)) != 0) {
    answer_now(server, id, buf, 1);
    return 0;
  }
  o.cpus = (uint32_t)cpus;
  o.mem_mb = mem;
  o.time_limit_min = (uint32_t)limit;
  o.nodes = (uint32_t)nodes;
  o.ntasks = (uint32_t)ntasks;
  o.owner = &server->agent;
  o.cwd = server->config.cwd;
  o.output_cap_bytes = server->config.output_cap_bytes;
  o.env = server->config.pass_env_entries; /* E-10 */
  if ((p = pending_new(server, id)) == NULL) {
    mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return 0;
  }
  o.submitted = submitted;
  o.submitted_data = p;
  err = uvt_slurm_start(server->slurm, &o, id_out);
  if (err != 0) {
    if (err == UV_EINVAL)
      snprintf(buf, sizeof(buf),
               "submit_job: not submitted: an argument is not valid (a "
               "command that is not empty; array like 0-9 or 1-100%%10; "
               "signal like USR1@60 with HUP, INT, QUIT, USR1, USR2, ALRM, "
               "TERM or XCPU, or its number; dependency like "
               "afterok:slurm-2 on your own Slurm tasks; sbatch_args only "
               "the options the server allows, as name=value).");
    else if (err == UV_E2BIG)
      snprintf(buf, sizeof(buf),
               "submit_job: not submitted: the command is 128 KiB or more, "
               "the most one argument may be on Linux (it runs as bash -c's "
               "argument); put it in a script file and run that.");
    else if (err == UVT_ENOTASK || err == UVT_EFOREIGN)
      snprintf(buf, sizeof(buf),
               "submit_job: not submitted: a dependency names a task that "
               "is not one of your Slurm tasks.");
    else
      snprintf(buf, sizeof(buf), "submit_job: %s", uvt_strerror(err));
    pending_answer(p, buf, 1, 0);
    return 0;
  }
  snprintf(p->task, sizeof(p->task), "%s", id_out);
  return 0;
}

int mcp_slurm_call(mcp_server_t *server, const char *name, json_t *id,
                   json_t *args) {
  if (strcmp(name, "submit_job") == 0)
    return submit(server, id, args);
  if (strcmp(name, "cluster_info") == 0) {
    pending_t *p;
    int err;
    if (args != NULL && !json_is_null(args) &&
        (!json_is_object(args) || json_object_size(args) > 0)) {
      answer_now(server, id, "cluster_info takes no arguments.", 1);
      return 0;
    }
    if ((p = pending_new(server, id)) == NULL) {
      mcp_rpc_error(server, id, RPC_INTERNAL_ERROR,
                    "Internal error: out of memory");
      return 0;
    }
    err = uvt_slurm_cluster_info(server->slurm, info_done, p);
    if (err != 0) {
      char buf[128];
      snprintf(buf, sizeof(buf), "cluster_info: %s", uvt_strerror(err));
      pending_answer(p, buf, 1, 0);
    }
    return 0;
  }
  return -1;
}
