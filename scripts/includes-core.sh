#!/bin/sh
# Lists the files that include a header private to another layer:
#   - src/uvt-internal.h (the core's) outside the core (src/*.c, src/*.h);
#   - src/process/process-internal.h outside src/process/;
#   - src/slurm/slurm-internal.h outside src/slurm/.
# Tests are white-box and are not checked.  Prints "file: header" lines
# and exits 1 when there is any, else prints nothing and exits 0.
#   scripts/includes-core.sh
set -eu
cd "$(dirname "$0")/.."
found=0
check() {
  header=$1
  allowed=$2
  for f in $(grep -rlE "#include \"([a-z./]*/)?$header\"" src bench examples \
    bindings/node/src 2>/dev/null | grep -vE "$allowed" || true); do
    echo "$f: $header"
    found=1
  done
}
check uvt-internal.h '^src/[^/]+\.[ch]$'
check process-internal.h '^src/process/'
check slurm-internal.h '^src/slurm/'
exit $found
