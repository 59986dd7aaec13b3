/* uvtasks version, generated from version.h.in and the project version in
 * the top-level meson.build (include/uvtasks/meson.build checks that the
 * copy in the source tree matches; do not edit it by hand).
 *
 * UVT_VERSION_HEX packs the three numbers as libuv's UV_VERSION_HEX does:
 * (major << 16) | (minor << 8) | patch.  uvt_version() and
 * uvt_version_string() in uvtasks.h give the version of the library a
 * program runs against; these macros give the one it was compiled with. */
#ifndef UVTASKS_VERSION_H
#define UVTASKS_VERSION_H

#define UVT_VERSION_MAJOR 0
#define UVT_VERSION_MINOR 3
#define UVT_VERSION_PATCH 0
#define UVT_VERSION_STRING "0.3.0"
#define UVT_VERSION_HEX                                                        \
  ((UVT_VERSION_MAJOR << 16) | (UVT_VERSION_MINOR << 8) | UVT_VERSION_PATCH)

#endif /* UVTASKS_VERSION_H */
