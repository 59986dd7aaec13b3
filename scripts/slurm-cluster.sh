#!/bin/bash
# A throwaway Slurm cluster on loopback for the slurm suite and bench:
# munged (as user munge, own key and socket), slurmctld, and two slurmd,
# every file under DIR.  Ports, node names and the controller's state
# directory are arguments, and nothing of another cluster is touched
# (E-15): the nodes' cgroups are named after this cluster's node names.
#
#   scripts/slurm-cluster.sh up DIR [OPTIONS]  start (idempotent); prints
#                                        the SLURM_CONF line to export
#   scripts/slurm-cluster.sh down DIR    cancel every job, stop every daemon
#                                        by its pid (idempotent)
#   scripts/slurm-cluster.sh status DIR  exit 0 if both nodes answer
#
# OPTIONS, read when DIR has no slurm.conf yet (later runs keep them):
#   --port P          slurmctld's port (default 6817); the two nodes listen
#                     on P+1 and P+2
#   --nodes A,B       the two node names (default n1,n2).  They also name
#                     the nodes' cgroups (slurm_A, slurm_B): two clusters
#                     on one machine need names of their own
#   --state-dir S     slurmctld's StateSaveLocation (default DIR/ctld)
#   --name N          ClusterName (default uvt)
#   --min-job-age S   MinJobAge, how long the controller keeps an ended
#                     job, in seconds (default 3600; the suite uses 2)
#   --message-timeout S  MessageTimeout: how long a client waits for the
#                     controller (default 10; the suite uses 5)
# Ended jobs are recorded without a database: the job completion log
# (JobCompType=jobcomp/filetxt) is S/jobcomp.txt, which `sacct -c` and the
# engine read once the controller forgot a job (E-14).
# Each node declares one fake GPU (gres gpu:1 on /dev/null), so that a
# job asking for --gres=gpu:1 can be shown and tested without a GPU.
#
# DIR should be short (the munge socket path must fit in 108 bytes).
# Needs root (slurmd) and the packages slurm-wlm, munge (scripts/setup.sh).
# No systemd, no init scripts, nothing under /etc is touched.
set -u

usage() {
  echo "usage: $0 up|down|status DIR [--port P] [--nodes A,B]" \
    "[--state-dir S] [--name N] [--min-job-age S] [--message-timeout S]" >&2
  exit 2
}

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  usage
fi
shift 2
port=6817
nodes=n1,n2
state=
name=uvt
min_job_age=3600
message_timeout=10
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case $1 in
  --port) port=$2 ;;
  --nodes) nodes=$2 ;;
  --state-dir) state=$2 ;;
  --name) name=$2 ;;
  --min-job-age) min_job_age=$2 ;;
  --message-timeout) message_timeout=$2 ;;
  *) usage ;;
  esac
  shift 2
done
case $port in '' | *[!0-9]*) usage ;; esac
case $min_job_age in '' | *[!0-9]*) usage ;; esac
case $message_timeout in '' | *[!0-9]*) usage ;; esac
case $nodes in [a-zA-Z]*,[a-zA-Z]*) ;; *) usage ;; esac
case $nodes in *[!a-zA-Z0-9,-]* | *,*,*) usage ;; esac
case $name in '' | *[!a-zA-Z0-9_-]*) usage ;; esac
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
export SLURM_CONF=$conf
# Once written, the cluster's own files say what it is.
if [ -s "$dir/nodes" ]; then
  nodes=$(cat "$dir/nodes")
fi
if [ -s "$dir/state-dir" ]; then
  state=$(cat "$dir/state-dir")
fi
[ -n "$state" ] || state=$dir/ctld
n1=${nodes%%,*}
n2=${nodes#*,}

log() { echo "slurm-cluster: $*" >&2; }

alive() { # pidfile
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

stop_pids() { # pidfile... : TERM to all at once, then wait (each takes
  # about 2 s to exit), SIGKILL what is left after 10 s.
  local f pid pids="" i left
  for f in "$@"; do
    if alive "$f"; then
      pid=$(cat "$f")
      kill -TERM "$pid" 2>/dev/null
      pids="$pids $pid"
    fi
  done
  for i in $(seq 1 200); do
    left=""
    for pid in $pids; do
      kill -0 "$pid" 2>/dev/null && left="$left $pid"
    done
    [ -z "$left" ] && break
    sleep 0.05
  done
  for pid in $left; do
    log "pid $pid ignored SIGTERM for 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null
  done
  rm -f "$@"
}

# proctrack/cgroup needs the cgroup v1 freezer controller (this Debian 12
# layout: v1 controllers under /sys/fs/cgroup plus an empty unified
# hierarchy) or a pure cgroup v2 tree; without either, process-group
# tracking is the fallback and setsid children may escape a cancel.
proctrack() {
  if [ -d /sys/fs/cgroup/freezer ] && [ -w /sys/fs/cgroup/freezer ]; then
    echo "proctrack/cgroup v1"
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] &&
    [ -w /sys/fs/cgroup/cgroup.subtree_control ]; then
    echo "proctrack/cgroup v2"
  else
    echo "proctrack/pgid none"
  fi
}

write_conf() {
  local pt plugin cg user
  pt=$(proctrack)
  plugin=${pt% *}
  cg=${pt#* }
  user=$(id -un)
  cat >"$conf" <<EOF
ClusterName=$name
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/sock
StateSaveLocation=$state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=$plugin
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/jobcomp.txt
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=2
MinJobAge=$min_job_age
JobRequeue=0
MessageTimeout=$message_timeout
SlurmdTimeout=300
InactiveLimit=0
Waittime=0
GresTypes=gpu
NodeName=$n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=32 RealMemory=8000 Gres=gpu:1 State=UNKNOWN
NodeName=$n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 2)) CPUs=32 RealMemory=8000 Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$n1,$n2 Default=YES MaxTime=INFINITE State=UP
EOF
  # A fake GPU: a device file every machine has.
  cat >"$dir/gres.conf" <<EOF
NodeName=$n1,$n2 Name=gpu File=/dev/null
EOF
  if [ "$cg" != none ]; then
    cat >"$dir/cgroup.conf" <<EOF
CgroupPlugin=cgroup/$cg
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
  else
    rm -f "$dir/cgroup.conf"
  fi
  echo "$pt" >"$dir/proctrack"
  echo "$n1,$n2" >"$dir/nodes"
  echo "$state" >"$dir/state-dir"
}

nodes_idle() {
  local out
  out=$(sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
  echo "$out" | grep -q "^$n1 idle" && echo "$out" | grep -q "^$n2 idle"
}

up() {
  local i n
  # munged (user munge) must reach its socket under DIR.
  chmod 0755 "$dir" || return 1
  [ -f "$conf" ] || write_conf
  mkdir -p "$dir/munge" "$state" "$dir/spool/$n1" "$dir/spool/$n2" \
    "$dir/log" || return 1
  # munged runs as its own user, with a key and a socket of this cluster.
  if ! alive "$dir/munge/pid"; then
    if [ ! -s "$dir/munge/key" ]; then
      dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 2>/dev/null
    fi
    chown -R munge: "$dir/munge"
    chmod 0755 "$dir/munge"
    chmod 0400 "$dir/munge/key"
    rm -f "$dir/munge/sock" "$dir/munge/sock.lock"
    runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/key" \
      --socket="$dir/munge/sock" --pid-file="$dir/munge/pid" \
      --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" ||
      {
        log "munged did not start (see $dir/munge/log)"
        return 1
      }
  fi
  if ! alive "$dir/slurmctld.pid"; then
    /usr/sbin/slurmctld -f "$conf" ||
      {
        log "slurmctld did not start (see $dir/log/slurmctld.log)"
        return 1
      }
  fi
  for n in "$n1" "$n2"; do
    if ! alive "$dir/slurmd-$n.pid"; then
      /usr/sbin/slurmd -f "$conf" -N "$n" ||
        {
          log "slurmd $n did not start (see $dir/log/slurmd-$n.log)"
          return 1
        }
    fi
  done
  for i in $(seq 1 300); do
    if nodes_idle; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    # A node that registered down from an earlier run comes back here.
    if [ $((i % 20)) -eq 0 ]; then
      scontrol update nodename="$n1,$n2" state=resume >/dev/null 2>&1
    fi
    sleep 0.1
  done
  log "the nodes did not become idle in 30 s:"
  sinfo -N >&2
  return 1
}

down() {
  local i
  # Jobs first, while the daemons can still end them (their whole process
  # trees, through proctrack), then every daemon by its pid.  SLURM_CONF
  # names this cluster's controller: no other cluster hears the cancel.
  if alive "$dir/slurmctld.pid"; then
    scancel --full -u "$(id -un)" >/dev/null 2>&1
    for i in $(seq 1 100); do
      [ -z "$(squeue -h -o %i -t PD,R,CG,S 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop_pids "$dir/slurmd-$n1.pid" "$dir/slurmd-$n2.pid" "$dir/slurmctld.pid" \
    "$dir/munge/pid"
  reap_jobs
  return 0
}

# What a test left behind when it failed half-way (a job frozen to play a
# lost node, a job whose slurmd was killed): thaw every job cgroup of this
# cluster's two nodes (slurm_<node>) and SIGKILL what is in it, slurmstepd
# included.  Another cluster's nodes have names of their own: their
# cgroups are never looked at.
reap_jobs() {
  local cg st pid
  [ -s "$dir/nodes" ] || return 0
  for cg in "/sys/fs/cgroup/freezer/slurm_$n1"/*/job_* \
    "/sys/fs/cgroup/freezer/slurm_$n2"/*/job_*; do
    [ -d "$cg" ] || continue
    for st in "$cg"/freezer.state "$cg"/*/freezer.state; do
      [ -f "$st" ] && echo THAWED >"$st" 2>/dev/null
    done
    for pid in $(cat "$cg"/tasks "$cg"/*/tasks 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null
    done
  done
  for pid in $(pgrep -x slurmstepd); do
    # Only the steps of this cluster's spool.
    if grep -qs "$dir" "/proc/$pid/environ" ||
      ls -l "/proc/$pid/cwd" 2>/dev/null | grep -q "$dir"; then
      kill -KILL "$pid" 2>/dev/null
    fi
  done
}

status() {
  alive "$dir/slurmctld.pid" || {
    echo "slurmctld: not running"
    return 1
  }
  nodes_idle || sinfo -h -N -o '%N %t' 2>/dev/null |
    grep -qE "^($n1|$n2) (idle|mix|alloc)" ||
    {
      echo "nodes not up"
      return 1
    }
  sinfo -N -h -o '%N %t'
  return 0
}

case $cmd in
up) up ;;
down) down ;;
status) status ;;
*) usage ;;
esac
