#!/usr/bin/env bash
# The build lanes: plain, the sanitizers and valgrind.
#
#   bash scripts/lanes.sh plain     # the plain build (-Dwerror=true), every suite
#   bash scripts/lanes.sh asan      # ASan + UBSan, every suite but the
#                                   # process suites rerun with the spawn
#                                   # helper on (its own tests do run)
#   bash scripts/lanes.sh tsan      # TSan, the cross-thread tests
#   bash scripts/lanes.sh valgrind  # memcheck over the unit suite and every
#                                   # process suite
#   bash scripts/lanes.sh all       # the three in turn
#   bash scripts/lanes.sh portable  # -Dportable=true: the core, the thread
#                                   # producer and the tool surface as
#                                   # POSIX C without the Linux-only files,
#                                   # and the suites that apply
#                                   # (docs/porting.md)
#
# Each lane builds in its own directory (build, build-asan, build-tsan,
# build-valgrind, build-portable) and exits non-zero on any failing test or any sanitizer /
# valgrind report.  Extra arguments after the lane name go to `meson test`.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

# Configure `dir` with the given options, or reconfigure it if it exists.
setup() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
  ninja -C "$dir"
}

# `meson test -C dir ARGS...`; when it fails, also the failing checks
# from the whole log: --print-errorlogs shows only a log's last 100 lines,
# and a crash in a later test of the same suite can fill them.
run_tests() {
  local dir=$1
  shift
  if meson test -C "$dir" "$@"; then
    return 0
  fi
  echo "== failing checks in $dir (meson-logs):" >&2
  grep -h -B1 -A3 -E '^\[ +(ERROR|FAILED|LINE) +\]|Assertion .* failed|^==[0-9]+== (Invalid|Conditional|Syscall param)' \
    "$dir"/meson-logs/testlog*.txt | head -120 >&2 || true
  return 1
}

# The names among $@ that `meson test --list` knows in `dir`.
existing_tests() {
  local dir=$1
  shift
  local listed
  listed=$(meson test -C "$dir" --list 2>/dev/null | sed 's/^.*\/ //')
  for t in "$@"; do
    if printf '%s\n' "$listed" | grep -qx "$t"; then
      printf '%s ' "$t"
    fi
  done
}

lane_plain() {
  setup build -Dwerror=true
  run_tests build --print-errorlogs --num-processes 2 "$@"
}

lane_asan() {
  setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
    -Dwerror=true -Dbuildtype=debugoptimized
  # Every report is fatal: leaks at exit, UBSan at the first finding.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_tests build-asan --print-errorlogs --timeout-multiplier 3 \
    --no-suite process-helper "$@"
}

lane_tsan() {
  setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dwerror=true \
    -Dbuildtype=debugoptimized
  local tests
  # Leading test names replace the cross-thread set; from the first option
  # on, the words go to meson test.
  local names=()
  while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do
    names+=("$1")
    shift
  done
  if [ ${#names[@]} -gt 0 ]; then
    tests=$(existing_tests build-tsan "${names[@]}")
  else
    tests=$(existing_tests build-tsan thread loopthread listener fuzz-registry process-spawner \
      process-stdin process-pty process-events slurm)
  fi
  if [ -z "$tests" ]; then
    echo "lanes.sh tsan: none of the cross-thread tests is built" >&2
    exit 1
  fi
  # exitcode: a report fails the test even if it would otherwise pass.
  # Debian's libuv is not instrumented; test/tsan.supp lists the narrow
  # suppressions that follows from that, each with its reason.
  # shellcheck disable=SC2086
  TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$top/test/tsan.supp" \
    run_tests build-tsan --print-errorlogs --timeout-multiplier 4 $tests "$@"
}

lane_valgrind() {
  local wrap='valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 --quiet --max-threads=2048'
  setup build-valgrind -Db_sanitize=none -Dwerror=true -Dbuildtype=debug
  run_tests build-valgrind --suite unit --print-errorlogs \
    --timeout-multiplier 10 --wrap="$wrap" "$@"
  # The process producer's suites (spawning, output, ends, kills, reaping,
  # stdin, terminals, output events, structured reads): their buffers,
  # handles and spawner threads, under memcheck.  The two tests of errors
  # only an exec reports skip themselves there (valgrind runs the exec).
  local tests
  tests=$(existing_tests build-valgrind process process-spawner process-end \
    process-kill process-reap process-output process-stdin process-pty \
    process-events process-limits process-durable)
  if [ -n "$tests" ]; then
    # shellcheck disable=SC2086
    run_tests build-valgrind --print-errorlogs --timeout-multiplier 10 \
      --wrap="$wrap" $tests "$@"
  fi
}

lane_portable() {
  setup build-portable -Dportable=true -Dwerror=true
  run_tests build-portable --print-errorlogs --num-processes 2 "$@"
}

lane=${1:-}
[ $# -gt 0 ] && shift
case "$lane" in
  plain) lane_plain "$@" ;;
  asan) lane_asan "$@" ;;
  tsan) lane_tsan "$@" ;;
  valgrind) lane_valgrind "$@" ;;
  portable) lane_portable "$@" ;;
  all)
    lane_asan "$@"
    lane_tsan "$@"
    lane_valgrind "$@"
    ;;
  *)
    echo "usage: bash scripts/lanes.sh plain|asan|tsan|valgrind|portable|all [meson test args]" >&2
    exit 2
    ;;
esac
