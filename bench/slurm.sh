#!/usr/bin/env bash
# The Slurm bench: a 2-node cluster on loopback (scripts/slurm-cluster.sh),
# bench-slurm against it (uvtasks and sbatch/squeue/scancel in the same
# run, rounds alternating), and the cluster down again whatever happened.
#   bench/slurm.sh BUILD_DIR [--rounds N] [--jobs N]
# BUILD_DIR configured with -Dbench=true on a machine with Slurm (root).
# UVT_SLURM_PORT picks the controller's port (default 6817).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$1
shift
port=${UVT_SLURM_PORT:-6817}
exec 9>"/tmp/uvtasks-slurm-$port.lock"
flock 9
dir=$(mktemp -d /tmp/uvb.XXXXXX)
trap '"$root/scripts/slurm-cluster.sh" down "$dir" >/dev/null; rm -rf "$dir"' EXIT
"$root/scripts/slurm-cluster.sh" up "$dir" --port "$port" \
  --nodes "u${port}a,u${port}b" >/dev/null || exit 1
export SLURM_CONF=$dir/slurm.conf
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$build/bench/bench-slurm" --out-dir "$dir/out" "$@"
