/* Helpers shared by the benchmark programs: option parsing, the clock,
 * memory, percentiles and the result lines the runner (bench/run.sh)
 * parses.  Every program prints its results as "name value" lines on
 * stdout; anything else goes to stderr. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <uv.h>

/* The value of "--name value" (or "--name=value"), or `def`. */
static inline const char *bench_sopt(int argc, char **argv, const char *name,
                                     const char *def) {
  size_t n = strlen(name);
  int i;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], name) == 0 && i + 1 < argc)
      return argv[i + 1];
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=')
      return argv[i] + n + 1;
  }
  return def;
}

static inline long bench_lopt(int argc, char **argv, const char *name,
                              long def) {
  const char *s = bench_sopt(argc, argv, name, NULL);
  return s != NULL ? strtol(s, NULL, 10) : def;
}

static inline int bench_flag(int argc, char **argv, const char *name) {
  int i;
  for (i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return 1;
  return 0;
}

/* Monotonic nanoseconds (libuv's high-resolution clock). */
static inline uint64_t bench_now_ns(void) {
  return uv_hrtime();
}

/* Peak resident set size of this process, in KiB (getrusage). */
static inline long bench_maxrss_kb(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return -1;
  return ru.ru_maxrss;
}

/* Allocate `mib` MiB and write every page, so the host really holds it. */
static inline char *bench_touch_heap(long mib) {
  size_t n = (size_t)mib << 20;
  size_t i;
  char *p;
  if (mib <= 0)
    return NULL;
  p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "bench: cannot allocate %ld MiB\n", mib);
    exit(2);
  }
  for (i = 0; i < n; i += 4096)
    p[i] = (char)i;
  return p;
}

static inline int bench_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a;
  uint64_t y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The p-th percentile (0..100) of v[0, n), sorting v in place. */
static inline uint64_t bench_percentile(uint64_t *v, size_t n, double p) {
  size_t i;
  if (n == 0)
    return 0;
  qsort(v, n, sizeof(*v), bench_cmp_u64);
  i = (size_t)((p / 100.0) * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

/* One result line for the runner. */
static inline void bench_result(const char *name, double value) {
  printf("%s %.6g\n", name, value);
  fflush(stdout);
}

#define BENCH_CHECK(expr)                                                      \
  do {                                                                         \
    int bench_err_ = (expr);                                                   \
    if (bench_err_ < 0) {                                                      \
      fprintf(stderr, "bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #expr,     \
              uvt_strerror(bench_err_));                                       \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

#endif /* BENCH_UTIL_H */
