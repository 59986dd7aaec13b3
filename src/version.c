/* The version of the library a program runs against (the macros in
 * uvtasks/version.h give the one it was compiled with). */
#include "uvt-internal.h"

unsigned int uvt_version(void) {
  return UVT_VERSION_HEX;
}

const char *uvt_version_string(void) {
  return UVT_VERSION_STRING;
}
