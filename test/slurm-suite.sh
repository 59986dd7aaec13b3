#!/bin/bash
# The slurm suite: bring a 2-node cluster up (scripts/slurm-cluster.sh),
# run the test binary against it, and stop every daemon by its pid whatever
# happened.  Exit 77 (skipped) without root or without Slurm installed.
#   test/slurm-suite.sh SOURCE_ROOT TEST_BINARY [UVTASKS_MCP]
# With UVTASKS_MCP, test/slurm-mcp-test.py runs too (E-8).
# UVT_SLURM_PORT picks the controller's port (default 6817; the nodes take
# the next two): the cluster's node names come from it, so two suites on
# different ports never share a port, a node name or a cgroup (E-15).
# The controller forgets an ended job after 2 s (MinJobAge): every outcome
# is checked against a controller that forgets fast (E-14).  A client
# waits 5 s for a silent controller (MessageTimeout; the tests that stop
# it wait that long per try).
set -u
root=$1
bin=$2
mcp=${3:-}
if [ "$(id -u)" -ne 0 ] || ! command -v slurmctld >/dev/null ||
  ! command -v munged >/dev/null; then
  echo "slurm suite: needs root and the packages slurm-wlm, munge (scripts/setup.sh)"
  exit 77
fi
port=${UVT_SLURM_PORT:-6817}
# One cluster per port on this machine.
exec 9>"/tmp/uvtasks-slurm-$port.lock"
flock 9
dir=$(mktemp -d /tmp/uvs.XXXXXX)
trap '"$root/scripts/slurm-cluster.sh" down "$dir"; rm -rf "$dir"' EXIT
"$root/scripts/slurm-cluster.sh" up "$dir" --port "$port" \
  --nodes "u${port}a,u${port}b" --min-job-age 2 --message-timeout 5 \
  >/dev/null || exit 1
export SLURM_CONF=$dir/slurm.conf UVT_SLURM_DIR=$dir UVT_SOURCE_ROOT=$root
"$bin" || exit 1
if [ -n "$mcp" ]; then
  python3 "$root/test/slurm-mcp-test.py" "$mcp" || exit 1
fi
