/* Error codes, their names and texts: one table (UVT_ERRNO_MAP) generates
 * all three. */
#include "uvt-internal.h"

/* libuv formats codes it does not know into a buffer it never frees; ask
 * it only about the codes its own table (UV_ERRNO_MAP) names. */
static int uv_knows(int err) {
  switch (err) {
#define UVT__UV_CASE(name, msg) case UV_##name:
    UV_ERRNO_MAP(UVT__UV_CASE)
#undef UVT__UV_CASE
    return 1;
  default:
    return 0;
  }
}

const char *uvt_strerror(int err) {
  switch (err) {
#define UVT__STRERROR_CASE(name, code, msg)                                    \
  case UVT_##name:                                                             \
    return msg;
    UVT_ERRNO_MAP(UVT__STRERROR_CASE)
#undef UVT__STRERROR_CASE
  case 0:
    return "success";
  default:
    return uv_knows(err) ? uv_strerror(err) : "unknown error";
  }
}

const char *uvt_err_name(int err) {
  switch (err) {
#define UVT__ERRNAME_CASE(name, code, msg)                                     \
  case UVT_##name:                                                             \
    return "UVT_" #name;
    UVT_ERRNO_MAP(UVT__ERRNAME_CASE)
#undef UVT__ERRNAME_CASE
  case 0:
    return "OK";
  default:
    return uv_knows(err) ? uv_err_name(err) : "UNKNOWN";
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
