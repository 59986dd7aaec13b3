/* E-8: `uvtasks-mcp --slurm [--slurm-journal FILE]`: the tool submit_job
 * starts a Slurm batch job as task slurm-N, owned by the client's agent,
 * so task_output, task_wait, task_kill and task_list work on it as on any
 * task.  With a journal the engine leaves the jobs running when the
 * server stops, and a server started again on the same journal takes
 * them back under their ids (E-5, E-6). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "uvtasks/slurm.h"

static const char schema[] =
    "{\"name\":\"submit_job\",\"title\":\"Submit a Slurm batch job\","
    "\"description\":\"Run a shell command as a Slurm batch job on the "
    "cluster. Returns its task id (slurm-N) at once; read its output with "
    "task_output, stop it with task_kill (cancels the whole job). The job "
    "has no stdin and no terminal.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"bash command\"},"
    "\"cpus\":{\"type\":\"integer\",\"minimum\":1},"
    "\"mem_mb\":{\"type\":\"integer\",\"minimum\":1},"
    "\"time_limit_min\":{\"type\":\"integer\",\"minimum\":1},"
    "\"partition\":{\"type\":\"string\"},"
    "\"label\":{\"type\":\"string\"}},"
    "\"required\":[\"command\"],\"additionalProperties\":false}}";

json_t *mcp_slurm_schema(void) {
  return json_loads(schema, 0, NULL);
}

int mcp_slurm_init(mcp_server_t *server) {
  uvt_slurm_engine_options_t eo;
  uvt_slurm_engine_t *e = NULL;
  char dir[4096];
  const char *base = getenv("UVTASKS_SLURM_OUT");
  int err;

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
  eo.out_dir = base;
  eo.journal = server->config.slurm_journal;
  eo.detach_on_close = server->config.slurm_journal != NULL;
  err = uvt_slurm_engine_new(server->reg, &eo, &e);
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
  if (!json_is_string(v))
    return -1;
  *out = json_string_value(v);
  return 0;
}

/* Fills buf with the tool's answer; returns 1 for an error result. */
int mcp_slurm_submit(mcp_server_t *server, json_t *args, char *buf,
                     size_t size) {
  uvt_slurm_options_t o;
  uint64_t cpus = 0, mem = 0, limit = 0;
  char id[UVT_ID_MAX];
  uint32_t job = 0;
  int err;

  uvt_slurm_options_init(&o);
  if (!json_is_object(args) || text(args, "command", &o.command) != 0 ||
      o.command == NULL) {
    snprintf(buf, size, "submit_job: \"command\" (a string) is required.");
    return 1;
  }
  if (text(args, "partition", &o.partition) != 0 ||
      text(args, "label", &o.label) != 0 || whole(args, "cpus", &cpus) != 0 ||
      whole(args, "mem_mb", &mem) != 0 ||
      whole(args, "time_limit_min", &limit) != 0) {
    snprintf(buf, size,
             "submit_job: partition and label are strings; cpus, mem_mb and "
             "time_limit_min are whole numbers from 1.");
    return 1;
  }
  o.cpus = (uint32_t)cpus;
  o.mem_mb = mem;
  o.time_limit_min = (uint32_t)limit;
  o.owner = &server->agent;
  o.cwd = server->config.cwd;
  o.output_cap_bytes = server->config.output_cap_bytes;
  err = uvt_slurm_start(server->slurm, &o, id);
  if (err != 0) {
    snprintf(buf, size, "submit_job: %s", uvt_strerror(err));
    return 1;
  }
  (void)uvt_slurm_job_id(server->reg, id, &server->agent, &job);
  snprintf(buf, size,
           "Submitted as task %s. Read its output with task_output, stop it "
           "with task_kill.",
           id);
  return 0;
}
