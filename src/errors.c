/* Error codes, their names and texts: one table (UVT_ERRNO_MAP) generates
 * all three. */
#include "uvt-internal.h"

const char *uvt_strerror(int err) {
  switch (err) {
#define UVT__STRERROR_CASE(name, code, msg)                                    \
  case UVT_##name:                                                             \
    return msg;
    UVT_ERRNO_MAP(UVT__STRERROR_CASE)
#undef UVT__STRERROR_CASE
  default:
    return uv_strerror(err);
  }
}

const char *uvt_err_name(int err) {
  switch (err) {
#define UVT__ERRNAME_CASE(name, code, msg)                                     \
  case UVT_##name:                                                             \
    return "UVT_" #name;
    UVT_ERRNO_MAP(UVT__ERRNAME_CASE)
#undef UVT__ERRNAME_CASE
  default:
    return uv_err_name(err);
  }
}

const char *uvt_status_name(uvt_status_t status) {
  switch (status) {
  case UVT_RUNNING:
    return "running";
  case UVT_STOPPING:
    return "stopping";
  case UVT_COMPLETED:
    return "completed";
  case UVT_KILLED:
    return "killed";
  case UVT_FAILED:
    return "failed";
  }
  return "unknown";
}

int uvt_status_is_terminal(uvt_status_t status) {
  return status == UVT_COMPLETED || status == UVT_KILLED ||
         status == UVT_FAILED;
}
