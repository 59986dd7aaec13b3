#!/bin/bash
# The slurm suite: bring a 2-node cluster up (scripts/slurm-cluster.sh),
# run the test binary against it, and stop every daemon by its pid whatever
# happened.  Exit 77 (skipped) without root or without Slurm installed.
#   test/slurm-suite.sh SOURCE_ROOT TEST_BINARY [UVTASKS_MCP]
# With UVTASKS_MCP, test/slurm-mcp-test.py runs too (E-8).
set -u
root=$1
bin=$2
mcp=${3:-}
if [ "$(id -u)" -ne 0 ] || ! command -v slurmctld >/dev/null ||
  ! command -v munged >/dev/null; then
  echo "slurm suite: needs root and the packages slurm-wlm, munge (scripts/setup.sh)"
  exit 77
fi
# One cluster at a time on this machine (fixed ports 6817-6819).
exec 9>/tmp/uvtasks-slurm.lock
flock 9
dir=$(mktemp -d /tmp/uvs.XXXXXX)
trap '"$root/scripts/slurm-cluster.sh" down "$dir"; rm -rf "$dir"' EXIT
"$root/scripts/slurm-cluster.sh" up "$dir" >/dev/null || exit 1
export SLURM_CONF=$dir/slurm.conf UVT_SLURM_DIR=$dir UVT_SOURCE_ROOT=$root
"$bin" || exit 1
if [ -n "$mcp" ]; then
  python3 "$root/test/slurm-mcp-test.py" "$mcp" || exit 1
fi
