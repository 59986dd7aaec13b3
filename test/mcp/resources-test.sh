#!/usr/bin/env bash
# S-11 and L-LIM-3 from outside, with the built server:
#  - S-11: by default (no flag) every task has a cgroup where the host lets
#    the server make one: a `setsid` daemon is stopped by task_kill and by
#    the server's end; with --no-cgroups it is still stopped while it
#    descends from its task (found by descent; the server is a child
#    subreaper);
#  - L-LIM-3: --limit-memory / --limit-processes / --limit-cpu are every
#    command's limits, stated in the tool descriptions; a call's
#    memory_mb / max_processes / cpu_percent may lower them, never raise
#    them; the results name the limit ("out of memory (limit 100 MiB)",
#    "process limit reached (8)"); inside the sandbox too; a host without
#    the controllers (here: the cgroup mounts hidden in a mount namespace)
#    gets a clear error at start, never an unlimited run.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash resources-test.sh
set -u
. "$(dirname "$0")/lib.sh"
GOT_MAX=800
require_mcp

tmp=$(mktemp -d)
srv=
marker=109.$$$RANDOM
trap server_cleanup EXIT

start() {
  local version=$1
  shift
  rm -f "$tmp/in" "$tmp/out" "$tmp/log"
  mkfifo "$tmp/in" "$tmp/out"
  exec {W}<>"$tmp/in"
  SRV_IN=$W
  cat "$tmp/out" >"$tmp/log" {W}>&- &
  "$MCP" "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" {W}>&- &
  srv=$!
  send "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"$version\"}}"
  answer 0 >/dev/null
}

stop() {
  exec {W}>&-
  wait "$srv" 2>/dev/null
  srv=
}

call() {
  send "$(tool_call "$1" "$2" "$3")"
  answer "$1"
}

gone() {
  local i
  for i in $(seq 1 500); do
    pgrep -f "$1" >/dev/null || return 0
    sleep 0.01
  done
  return 1
}

running() {
  local i
  for i in $(seq 1 500); do
    pgrep -f "$1" >/dev/null && return 0
    sleep 0.01
  done
  return 1
}

daemon() { echo "setsid sleep ${marker}$1 </dev/null >/dev/null 2>&1 & sleep ${marker}$2"; }

# ------------------------------------------------------------------------
# S-11: the default and --no-cgroups, each against task_kill and the end.
for mode in default no-cgroups; do
  args=()
  [ $mode = no-cgroups ] && args=(--no-cgroups)
  start 2025-11-25 "${args[@]}"
  call 1 run_in_background "{\"command\":\"$(daemon 1 2)\"}" >/dev/null
  running "sleep ${marker}1"
  running "sleep ${marker}2"
  call 2 task_kill '{"task_id":"bash-1"}' >/dev/null
  if gone "sleep ${marker}1" && gone "sleep ${marker}2"; then
    ok "S-11 ($mode): task_kill stops a setsid daemon of the task"
  else
    bad "S-11 ($mode): task_kill stops a setsid daemon" "$(pgrep -af "sleep $marker") $(cat "$tmp/err")"
  fi
  pkill -KILL -f "sleep ${marker}1"
  call 3 run_in_background "{\"command\":\"$(daemon 3 4)\"}" >/dev/null
  running "sleep ${marker}3"
  running "sleep ${marker}4"
  stop
  if gone "sleep ${marker}3" && gone "sleep ${marker}4"; then
    ok "S-11 ($mode): the server's end stops a setsid daemon of a task"
  else
    bad "S-11 ($mode): the end stops a setsid daemon" "$(pgrep -af "sleep $marker")"
  fi
  pkill -KILL -f "sleep ${marker}3"
done
# The default really is a cgroup here (this machine lets root make one).
start 2025-11-25
if grep -q 'no cgroup per task' "$tmp/err"; then
  bad "S-11: cgroups are on by default" "$(cat "$tmp/err")"
else
  call 1 run_in_background "{\"command\":\"sleep ${marker}5\"}" >/dev/null
  running "sleep ${marker}5"
  if grep -q '/uvtasks-' "/proc/$(pgrep -f "sleep ${marker}5" | head -1)/cgroup"; then
    ok "S-11: by default a task is in a cgroup of its own"
  else
    bad "S-11: by default a task is in a cgroup" "$(cat /proc/"$(pgrep -f "sleep ${marker}5" | head -1)"/cgroup)"
  fi
fi
stop
start 2025-11-25 --no-cgroups
call 1 run_in_background "{\"command\":\"sleep ${marker}6\"}" >/dev/null
running "sleep ${marker}6"
if grep -q '/uvtasks-' "/proc/$(pgrep -f "sleep ${marker}6" | head -1)/cgroup"; then
  bad "S-11: --no-cgroups opts out" "$(cat /proc/"$(pgrep -f "sleep ${marker}6" | head -1)"/cgroup)"
else
  ok "S-11: --no-cgroups opts out"
fi
stop
# Without cgroups, a daemon that outlived its leader: once a look of the
# task (here a signal, P-KILL-8) has seen it, it stays the task's after
# its parent died and it was re-parented to the server: a task_kill of
# the ended task stops it.
start 2025-11-25 --no-cgroups
call 1 run_in_background "{\"command\":\"setsid sleep ${marker}7 </dev/null >/dev/null 2>&1 & echo up; read x\",\"stdin\":true}" >/dev/null
running "sleep ${marker}7"
# A look that follows the task's descent (a signal to it: P-KILL-8).
# (Until it is sent: before the spawn's answer there is no process yet.)
for i in $(seq 20 60); do
  out=$(call "$i" task_kill '{"task_id":"bash-1","signal":"SIGCONT"}')
  [[ "$out" == *"Sent SIGCONT"* ]] && break
  sleep 0.05
done
call 3 write_stdin '{"task_id":"bash-1","chars":"go\n"}' >/dev/null
for _ in $(seq 1 500); do
  out=$(call 4 task_list '{}')
  [[ "$out" == *running\ \(* || "$out" == *still\ running* || "$out" != *"running"* ]] && break
  sleep 0.01
done
ppid=$(ps -o ppid= -p "$(pgrep -f "sleep ${marker}7" | head -1)" 2>/dev/null | tr -d ' ')
call 5 task_kill '{"task_id":"bash-1"}' >/dev/null
if gone "sleep ${marker}7"; then
  ok "S-11 (no-cgroups): a daemon seen once stays the task's after re-parenting (to $ppid, the server $srv)"
else
  bad "S-11 (no-cgroups): a re-parented daemon" "$(pgrep -af "sleep $marker"); $out"
fi
stop

# ------------------------------------------------------------------------
# L-LIM-3: the server's limits.
start 2025-11-25 --limit-memory 100M --limit-processes 8 --limit-cpu 50

send '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
out=$(answer 2)
if [[ "$out" == *"LIMITS: every command runs with at most 100 MiB of memory, 8 processes, 50% of one CPU core"* ]] &&
  [[ "$out" == *'"memory_mb"'* ]] && [[ "$out" == *'"cpu_percent"'* ]]; then
  ok "L-LIM-3: the tool descriptions state the limits"
else
  bad "L-LIM-3: the descriptions state the limits" "$out"
fi
out=$(call 3 run_command '{"command":"dd if=/dev/zero of=/dev/null bs=300M count=1"}')
if [[ "$out" == *"[status: killed, out of memory (limit 100 MiB)]"* ]]; then
  ok "L-LIM-2, L-LIM-3: 300 MB under --limit-memory 100M: killed, out of memory (limit 100 MiB)"
else
  bad "L-LIM-2: the memory limit's outcome" "$out"
fi
out=$(call 4 run_command '{"command":"dd if=/dev/zero of=/dev/null bs=60M count=1","memory_mb":50}')
if [[ "$out" == *"out of memory (limit 50 MiB)"* ]]; then
  ok "L-LIM-3: memory_mb lowers the server's limit"
else
  bad "L-LIM-3: memory_mb lowers the limit" "$out"
fi
out=$(call 5 run_command '{"command":"echo never","memory_mb":200}')
if [[ "$out" == *'"isError":true'* ]] && [[ "$out" == *"memory_mb 200 is above this server's memory limit of 100 MiB"* ]] &&
  [[ "$out" != *never\\n* ]]; then
  ok "L-LIM-3: memory_mb above the server's limit is a tool error (the host's choice)"
else
  bad "L-LIM-3: memory_mb above the limit" "$out"
fi
out=$(call 6 run_command '{"command":"echo never","max_processes":9}')
out2=$(call 7 run_command '{"command":"echo never","cpu_percent":51}')
if [[ "$out" == *"max_processes 9 is above this server's limit of 8 processes"* ]] &&
  [[ "$out2" == *"cpu_percent 51 is above this server's CPU limit of 50% of a core"* ]]; then
  ok "L-LIM-3: max_processes and cpu_percent above the server's are tool errors"
else
  bad "L-LIM-3: max_processes / cpu_percent above the limit" "$out $out2"
fi
out=$(call 8 run_command '{"command":"for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 2 & done 2>&1 | head -3; wait; echo end","timeout_ms":60000}')
if [[ "$out" == *"process limit reached (8)"* ]]; then
  ok "L-LIM-2, L-LIM-3: forks past --limit-processes 8: the result says the limit was reached"
else
  bad "L-LIM-2: the process limit's result" "$out"
fi
stop

# Limits inside the sandbox.
if command -v bwrap >/dev/null; then
  start 2025-11-25 --sandbox read-only --limit-memory 100M
  out=$(call 1 run_command '{"command":"dd if=/dev/zero of=/dev/null bs=300M count=1"}')
  if [[ "$out" == *"out of memory (limit 100 MiB)"* ]]; then
    ok "L-LIM-3, S-1: limits hold inside the sandbox"
  elif [[ "$out" == *"sandbox"*"cannot be made"* ]]; then
    echo "skip L-LIM-3 in the sandbox: no sandbox here"
  else
    bad "L-LIM-3 inside the sandbox" "$out"
  fi
  stop
fi

# A host without the controllers: every cgroup mount hidden in a mount
# namespace.  The server refuses to start with the reason: never an
# unlimited run.
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  out=$(echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' |
    unshare -m sh -c 'for m in $(awk '"'"'$9 == "cgroup" || $9 == "cgroup2" {print $5}'"'"' /proc/self/mountinfo | sort -r); do umount "$m" 2>/dev/null; done; exec "$1" --limit-memory 100M' sh "$MCP" 2>&1)
  st=$?
  if [[ "$out" == *"--limit-*: no memory limit can be enforced here"* ]] && [[ "$out" != *'"result"'* ]]; then
    ok "L-LIM-1: without the controllers the server says why and does not start"
  else
    bad "L-LIM-1: a host without the controllers" "$st $out"
  fi
  out=$(echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' |
    unshare -m sh -c 'for m in $(awk '"'"'$9 == "cgroup" || $9 == "cgroup2" {print $5}'"'"' /proc/self/mountinfo | sort -r); do umount "$m" 2>/dev/null; done; exec "$1"' sh "$MCP" 2>&1)
  if [[ "$out" == *"no cgroup per task on this host"* ]] && [[ "$out" == *'"id":1,"result":{}'* ]]; then
    ok "S-11: without cgroups the server says so and serves"
  else
    bad "S-11: without cgroups" "$out"
  fi
fi
if "$MCP" --help | grep -q -- '--limit-memory' && "$MCP" --help | grep -q -- '--no-cgroups'; then
  ok "L-LIM-3, S-11: --help names --limit-memory and --no-cgroups"
else
  bad "--help names the new options"
fi
if "$MCP" --limit-memory 12 </dev/null 2>&1 | grep -q 'bad value for --limit-memory'; then
  ok "L-LIM-3: a memory limit below 1 MiB is refused"
else
  bad "L-LIM-3: --limit-memory 12"
fi

summary
