/* The error table, uvt_strerror/uvt_err_name (with their fallback to
 * libuv's codes), uvt_status_name and uvt_status_is_terminal (contract §1). */
#include <stdio.h>
#include <string.h>

#include "test-core.h"

typedef struct {
  int code;
  const char *name;
  const char *msg;
} err_row_t;

#define ROW(name, code, msg) {UVT_##name, "UVT_" #name, msg},
static const err_row_t rows[] = {UVT_ERRNO_MAP(ROW)};
#undef ROW

#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Contract §1 Errors: the eight registry codes exist, with the names it
 * gives them, and P-THREAD-1's UVT_ETHREAD. */
static void errors_table_complete(void **state) {
  (void)state;
  assert_int_equal(NROWS, 9);
  assert_true(UVT_ETHREAD < 0);
  assert_true(UVT_ENOTASK < 0);
  assert_true(UVT_EFOREIGN < 0);
  assert_true(UVT_ESTALE < 0);
  assert_true(UVT_ENOSURFACE < 0);
  assert_true(UVT_ECLOSING < 0);
  assert_true(UVT_ELIMIT < 0);
  assert_true(UVT_EWAITTIMEOUT < 0);
  assert_true(UVT_EABORTED < 0);
}

/* contract §1 Errors: a negative band of its own, away from errno and libuv's
 * ranges; codes distinct; never UV_ETIMEDOUT for the wait deadline. */
static void errors_band_distinct(void **state) {
  size_t i, j;
  (void)state;
  for (i = 0; i < NROWS; i++) {
    assert_true(rows[i].code < 0);
    assert_true(rows[i].code < UV_ERRNO_MAX); /* below all of libuv's codes */
    assert_true(rows[i].code < UVT_ERRNO_MAX);
    assert_true(rows[i].code != UV_ETIMEDOUT);
    assert_true(rows[i].code != UV_ECANCELED);
    for (j = i + 1; j < NROWS; j++)
      assert_int_not_equal(rows[i].code, rows[j].code);
  }
  assert_int_not_equal(UVT_EWAITTIMEOUT, UV_ETIMEDOUT);
  assert_int_not_equal(UVT_EABORTED, UV_ECANCELED);
}

/* contract §1 Errors: uvt_err_name gives "UVT_E..." and uvt_strerror the
 * table's text for every registry code. */
static void errors_names_and_messages(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < NROWS; i++) {
    const char *name = uvt_err_name(rows[i].code);
    const char *msg = uvt_strerror(rows[i].code);
    assert_non_null(name);
    assert_non_null(msg);
    assert_string_equal(name, rows[i].name);
    assert_string_equal(msg, rows[i].msg);
    /* Static strings: the same pointer every time. */
    assert_ptr_equal(uvt_err_name(rows[i].code), name);
    assert_ptr_equal(uvt_strerror(rows[i].code), msg);
  }
  assert_string_equal(uvt_err_name(UVT_ENOTASK), "UVT_ENOTASK");
  assert_string_equal(uvt_err_name(UVT_EFOREIGN), "UVT_EFOREIGN");
  assert_string_equal(uvt_err_name(UVT_ESTALE), "UVT_ESTALE");
  assert_string_equal(uvt_err_name(UVT_ENOSURFACE), "UVT_ENOSURFACE");
  assert_string_equal(uvt_err_name(UVT_ECLOSING), "UVT_ECLOSING");
  assert_string_equal(uvt_err_name(UVT_ELIMIT), "UVT_ELIMIT");
  assert_string_equal(uvt_err_name(UVT_EWAITTIMEOUT), "UVT_EWAITTIMEOUT");
  assert_string_equal(uvt_err_name(UVT_EABORTED), "UVT_EABORTED");
}

/* contract §1 Errors: codes outside the band fall back to libuv's strings. */
static void errors_fallback_to_libuv(void **state) {
  static const int codes[] = {
      UV_EINVAL, UV_ENOMEM, UV_EEXIST,     UV_EBUSY,     UV_EPERM,    UV_EIO,
      UV_ENOENT, UV_EOF,    UV_EAI_NONAME, UV_ETIMEDOUT, UV_ECANCELED};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
    assert_string_equal(uvt_err_name(codes[i]), uv_err_name(codes[i]));
    assert_string_equal(uvt_strerror(codes[i]), uv_strerror(codes[i]));
  }
  assert_string_equal(uvt_err_name(UV_EINVAL), "EINVAL");
  assert_string_equal(uvt_err_name(UV_ENOMEM), "ENOMEM");
  assert_string_equal(uvt_err_name(UV_EPERM), "EPERM");
}

/* contract §1 Errors: 0 and codes nobody defines get static text (libuv would
 * format them into memory it never frees). */
static void errors_unknown_codes(void **state) {
  (void)state;
  assert_string_equal(uvt_err_name(0), "OK");
  assert_string_equal(uvt_strerror(0), "success");
  assert_string_equal(uvt_err_name(12345), "UNKNOWN");
  assert_string_equal(uvt_strerror(-19999), "unknown error");
  assert_string_equal(uvt_err_name(-20010), "UNKNOWN");
}

/* contract §1 Types: status names, "unknown" outside the set. */
static void errors_status_names(void **state) {
  (void)state;
  assert_string_equal(uvt_status_name(UVT_RUNNING), "running");
  assert_string_equal(uvt_status_name(UVT_STOPPING), "stopping");
  assert_string_equal(uvt_status_name(UVT_COMPLETED), "completed");
  assert_string_equal(uvt_status_name(UVT_KILLED), "killed");
  assert_string_equal(uvt_status_name(UVT_FAILED), "failed");
  assert_string_equal(uvt_status_name((uvt_status_t)99), "unknown");
  assert_string_equal(uvt_status_name((uvt_status_t)-1), "unknown");
}

/* contract §1 Types: completed, killed and failed are the terminal states. */
static void errors_status_terminal(void **state) {
  (void)state;
  assert_false(uvt_status_is_terminal(UVT_RUNNING));
  assert_false(uvt_status_is_terminal(UVT_STOPPING));
  assert_true(uvt_status_is_terminal(UVT_COMPLETED));
  assert_true(uvt_status_is_terminal(UVT_KILLED));
  assert_true(uvt_status_is_terminal(UVT_FAILED));
  assert_false(uvt_status_is_terminal((uvt_status_t)99));
}

/* Thread: any — the tables are usable from another thread. */
static void errors_thread_fn(void *arg) {
  int *ok = arg;
  *ok = strcmp(uvt_err_name(UVT_ELIMIT), "UVT_ELIMIT") == 0 &&
        strcmp(uvt_status_name(UVT_KILLED), "killed") == 0 &&
        strcmp(uvt_strerror(UV_EINVAL), uv_strerror(UV_EINVAL)) == 0;
}

static void errors_any_thread(void **state) {
  uv_thread_t th;
  int ok = 0;
  (void)state;
  assert_int_equal(uv_thread_create(&th, errors_thread_fn, &ok), 0);
  assert_int_equal(uv_thread_join(&th), 0);
  assert_true(ok);
}

/* Memory: uvt_replace_allocator refuses NULL functions. */
static void errors_replace_allocator_einval(void **state) {
  (void)state;
  assert_int_equal(uvt_replace_allocator(NULL, tc_realloc, tc_calloc, tc_free),
                   UV_EINVAL);
  assert_int_equal(uvt_replace_allocator(tc_malloc, NULL, tc_calloc, tc_free),
                   UV_EINVAL);
  assert_int_equal(uvt_replace_allocator(tc_malloc, tc_realloc, NULL, tc_free),
                   UV_EINVAL);
  assert_int_equal(
      uvt_replace_allocator(tc_malloc, tc_realloc, tc_calloc, NULL), UV_EINVAL);
  /* The counting allocator stays installed. */
  assert_int_equal(
      uvt_replace_allocator(tc_malloc, tc_realloc, tc_calloc, tc_free), 0);
}

/* The version: uvtasks/version.h is generated from the project version,
 * and the library reports the same numbers (packed like uv_version()). */
static void version_matches_header(void **state) {
  char expect[32];
  (void)state;
  assert_int_equal(uvt_version(), UVT_VERSION_HEX);
  assert_int_equal(UVT_VERSION_HEX, (UVT_VERSION_MAJOR << 16) |
                                        (UVT_VERSION_MINOR << 8) |
                                        UVT_VERSION_PATCH);
  snprintf(expect, sizeof(expect), "%d.%d.%d", UVT_VERSION_MAJOR,
           UVT_VERSION_MINOR, UVT_VERSION_PATCH);
  assert_string_equal(uvt_version_string(), expect);
  assert_string_equal(UVT_VERSION_STRING, expect);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TC_TEST(errors_table_complete),
      TC_TEST(errors_band_distinct),
      TC_TEST(errors_names_and_messages),
      TC_TEST(errors_fallback_to_libuv),
      TC_TEST(errors_unknown_codes),
      TC_TEST(errors_status_names),
      TC_TEST(errors_status_terminal),
      TC_TEST(errors_any_thread),
      TC_TEST(errors_replace_allocator_einval),
      TC_TEST(version_matches_header),
  };
  tc_install_allocator();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
