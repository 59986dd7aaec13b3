/* L-LIM-3: `--limit-memory SIZE --limit-processes N --limit-cpu PCT`, the
 * limits of every command the server runs (defaults, and ceilings a call's
 * memory_mb, max_processes and cpu_percent may only lower), and the
 * sentence every command tool's description gets, so that a model knows
 * them before it runs anything. */
#include "mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "512M", "2G", "1048576", "1.5G": bytes; 0 on a bad size. */
static uint64_t parse_size(const char *s) {
  char *end;
  double v;
  double unit = 1;

  if (s == NULL || *s < '0' || *s > '9')
    return 0;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0)
    return 0;
  switch (*end) {
  case 'k':
  case 'K':
    unit = 1024.0;
    end++;
    break;
  case 'm':
  case 'M':
    unit = 1024.0 * 1024.0;
    end++;
    break;
  case 'g':
  case 'G':
    unit = 1024.0 * 1024.0 * 1024.0;
    end++;
    break;
  case 't':
  case 'T':
    unit = 1024.0 * 1024.0 * 1024.0 * 1024.0;
    end++;
    break;
  default:
    break;
  }
  if (unit > 1 && *end == 'i')
    end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || v * unit >= 18e18)
    return 0;
  return (uint64_t)(v * unit);
}

int mcp_limits_arg(mcp_config_t *c, const char *opt, const char *val) {
  char *end;
  unsigned long long v;

  if (strcmp(opt, "--limit-memory") == 0) {
    c->limits.memory_bytes = parse_size(val);
    return c->limits.memory_bytes >= UVT_PROCESS_MEMORY_MIN ? 2 : -1;
  }
  if (strcmp(opt, "--limit-processes") != 0 && strcmp(opt, "--limit-cpu") != 0)
    return 0;
  if (val == NULL || *val < '0' || *val > '9')
    return -1;
  errno = 0;
  v = strtoull(val, &end, 10);
  if (errno != 0 || *end != '\0' || v < 1)
    return -1;
  if (strcmp(opt, "--limit-processes") == 0) {
    if (v > 4194304)
      return -1;
    c->limits.max_processes = (uint32_t)v;
  } else {
    if (v > UVT_PROCESS_CPU_PERCENT_MAX)
      return -1;
    c->limits.cpu_percent = (uint32_t)v;
  }
  return 2;
}

int mcp_limits_slurm(const mcp_config_t *c, uint64_t *mem_mb, uint64_t *cpus,
                     char *why, size_t size) {
  const uvt_process_limits_t *l = &c->limits;
  uint64_t max;

  if (l->memory_bytes > 0) {
    max = (l->memory_bytes + (1u << 20) - 1) >> 20;
    if (*mem_mb == 0) {
      *mem_mb = max;
    } else if (*mem_mb > max) {
      snprintf(why, size,
               "submit_job: mem_mb %llu is above this server's memory limit "
               "of %llu MiB; ask for at most that.",
               (unsigned long long)*mem_mb, (unsigned long long)max);
      return -1;
    }
  }
  if (l->cpu_percent > 0) {
    max = ((uint64_t)l->cpu_percent + 99) / 100;
    if (*cpus == 0) {
      *cpus = max;
    } else if (*cpus > max) {
      snprintf(why, size,
               "submit_job: cpus %llu is above this server's CPU limit of "
               "%u%% of one core (%llu CPUs for a job); ask for at most "
               "that.",
               (unsigned long long)*cpus, (unsigned)l->cpu_percent,
               (unsigned long long)max);
      return -1;
    }
  }
  return 0;
}

/* "512 MiB", "1.5 GiB". */
static void size_text(uint64_t n, char *buf, size_t size) {
  if (n >= (1ull << 30) && n % (1ull << 30) == 0)
    snprintf(buf, size, "%llu GiB", (unsigned long long)(n >> 30));
  else if (n >= (1ull << 30))
    snprintf(buf, size, "%.1f GiB", (double)n / (double)(1ull << 30));
  else
    snprintf(buf, size, "%llu MiB", (unsigned long long)(n >> 20));
}

void mcp_limits_describe(const mcp_server_t *server, json_t *tools) {
  const uvt_process_limits_t *l = &server->config.limits;
  char text[1024];
  char mem[32];
  size_t n;
  json_t *tool;
  json_t *desc;
  const char *name;
  size_t i;

  if (l->memory_bytes == 0 && l->max_processes == 0 && l->cpu_percent == 0)
    return;
  n = (size_t)snprintf(text, sizeof(text),
                       " LIMITS: every command runs with at most");
  if (l->memory_bytes > 0) {
    size_text(l->memory_bytes, mem, sizeof(mem));
    n +=
        (size_t)snprintf(text + n, sizeof(text) - n, " %s of memory%s", mem,
                         l->max_processes > 0 || l->cpu_percent > 0 ? "," : "");
  }
  if (l->max_processes > 0 && n < sizeof(text))
    n += (size_t)snprintf(text + n, sizeof(text) - n, " %u processes%s",
                          (unsigned)l->max_processes,
                          l->cpu_percent > 0 ? "," : "");
  if (l->cpu_percent > 0 && n < sizeof(text))
    n += (size_t)snprintf(text + n, sizeof(text) - n, " %u%% of one CPU core",
                          (unsigned)l->cpu_percent);
  if (n < sizeof(text))
    snprintf(text + n, sizeof(text) - n,
             ", all its processes together. A command that needs more memory "
             "is ended and its status says \"out of memory (limit ...)\"; a "
             "fork past the process limit fails with \"Resource temporarily "
             "unavailable\" and the status says the limit was reached; the "
             "CPU limit only slows it down. Do not retry such a command "
             "unchanged: make it use less (smaller inputs, fewer parallel "
             "jobs). memory_mb, max_processes and cpu_percent can only lower "
             "these limits.");
  json_array_foreach(tools, i, tool) {
    name = json_string_value(json_object_get(tool, "name"));
    desc = json_object_get(tool, "description");
    if (name == NULL || !json_is_string(desc))
      continue;
    if (strcmp(name, "submit_job") == 0 &&
        (l->memory_bytes > 0 || l->cpu_percent > 0)) {
      /* L-LIM-3: a Slurm job's share (mcp_limits_slurm). */
      char job[512];
      size_t k = (size_t)snprintf(job, sizeof(job),
                                  " LIMITS: a job gets at most");
      if (l->memory_bytes > 0)
        k += (size_t)snprintf(
            job + k, sizeof(job) - k, " %llu MiB of memory (--mem)%s",
            (unsigned long long)((l->memory_bytes + (1u << 20) - 1) >> 20),
            l->cpu_percent > 0 ? " and" : "");
      if (l->cpu_percent > 0 && k < sizeof(job))
        k += (size_t)snprintf(
            job + k, sizeof(job) - k, " %llu CPUs (--cpus-per-task)",
            (unsigned long long)(((uint64_t)l->cpu_percent + 99) / 100));
      if (k < sizeof(job))
        snprintf(job + k, sizeof(job) - k,
                 ", also when mem_mb or cpus are not given; they can only "
                 "ask for less.");
      json_object_set_new(tool, "description",
                          json_sprintf("%s%s", json_string_value(desc), job));
      continue;
    }
    if (!mcp_tool_starts(name))
      continue;
    json_object_set_new(tool, "description",
                        json_sprintf("%s%s", json_string_value(desc), text));
  }
}
