#!/usr/bin/env bash
# Build warning-free and run every test: the unit, process, MCP, fuzz,
# docs, abi (the built library against the last release's ABI dump, A-1)
# and slurm (a 2-node cluster it starts and stops itself) suites, the
# portable build's (-Dportable=true), the Node binding's suites
# (bindings/node: npm install builds the addon, npm test runs node
# --test), then the address+undefined, thread-sanitizer and valgrind
# lanes.
# Works on a fresh Debian 12 machine as root (installs what it needs).
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the plain build's suites, the portable lane and
#                              the Node binding (x64, arm64 under qemu): no
#                              sanitizer lanes
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1

if [ "$quick" = 1 ]; then
  bash scripts/setup.sh
else
  bash scripts/setup.sh --lanes
fi

echo "== build: plain, -Dwerror=true"
bash scripts/lanes.sh plain

# The portable build: the core, the thread producer and the tool surface
# as POSIX C without the Linux-only files (docs/porting.md); about a
# minute.
echo "== build: portable, -Dportable=true"
bash scripts/lanes.sh portable

# The Node binding: built the way a user's `npm install` builds it, with
# warnings as errors, then its node --test suites.
echo "== node binding: npm install && npm test (bindings/node)"
(cd bindings/node &&
  UVTASKS_WERROR=1 npm install --no-audit --no-fund --loglevel=error &&
  npm test)
# N-14: the linux-arm64 addon, cross-compiled, and a subset of the suites
# in an arm64 Node under qemu-user (bindings/node/test/arm64/run.js).
echo "== node binding: linux-arm64 under qemu-user (a subset)"
(cd bindings/node && UVTASKS_WERROR=1 node test/arm64/run.js)

if [ "$quick" = 0 ]; then
  for lane in asan tsan valgrind; do
    echo "== lane: $lane"
    bash scripts/lanes.sh "$lane"
  done
fi
echo "tests: all suites passed"
