/* A job array's spec (E-13), as sbatch --array and Slurm's
 * array_task_str write it ("3-9%2", "1,4,7-8", "0-15:4"): how many
 * elements it names, and the i-th of them.  Called by the submission
 * (submit.c), the engine's state reads (engine.c) and the output files'
 * names (output.c); calls nothing of the engine. */
#include <stdint.h>
#include <stdlib.h>

#include "slurm-internal.h"

/* Elements in an array_task_str such as "3-9%2" or "1,4,7-8". */
uint32_t uvt__array_count(const char *s) {
  uint32_t n = 0;
  while (s != NULL && *s != '\0') {
    unsigned long a, b, step = 1;
    char *end;
    a = strtoul(s, &end, 10);
    if (end == s)
      break;
    b = a;
    s = end;
    if (*s == '-') {
      b = strtoul(s + 1, &end, 10);
      s = end;
      if (*s == ':') {
        step = strtoul(s + 1, &end, 10);
        s = end;
      }
    }
    if (b >= a && step > 0)
      n += (uint32_t)((b - a) / step + 1);
    if (*s == '%')
      break;
    if (*s == ',')
      s++;
  }
  return n;
}

uint32_t uvt__array_index(const char *s, uint32_t want) {
  uint32_t n = 0;
  while (s != NULL && *s != '\0') {
    unsigned long a, b, step = 1;
    char *end;
    a = strtoul(s, &end, 10);
    if (end == s)
      break;
    b = a;
    s = end;
    if (*s == '-') {
      b = strtoul(s + 1, &end, 10);
      s = end;
      if (*s == ':') {
        step = strtoul(s + 1, &end, 10);
        s = end;
      }
    }
    if (b >= a && step > 0) {
      uint32_t k = (uint32_t)((b - a) / step + 1);
      if (want < n + k)
        return (uint32_t)(a + (want - n) * step);
      n += k;
    }
    if (*s == '%')
      break;
    if (*s == ',')
      s++;
  }
  return 0;
}
