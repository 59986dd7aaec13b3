#!/usr/bin/env bash
# M-MCP-6 and M-MCP-7 from outside, with the built server and bash:
#  - C-33: client and server in one process group, three tasks of
#    "sleep & sleep", SIGHUP to the group: the server exits and no task
#    process is left; the same for SIGQUIT (its sibling).
#  - a second SIGTERM, with tasks that ignore SIGTERM and a long shutdown
#    grace, stops every group at once, also the groups `set -m` jobs get
#    inside a task's session.
#  - end of input with --grace-ms 10000 and TERM-ignoring tasks: the
#    shutdown does not wait out the grace (the time is printed, not
#    asserted: the machine may be loaded).
#  - C-34 (second half): the server killed with SIGKILL, and (its sibling)
#    crashing with SIGABRT: the guardian stops every task.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash signals-test.sh
set -u
. "$(dirname "$0")/lib.sh"
require_mcp

tmp=$(mktemp -d)
leader=
cleanup() {
  [ -n "$leader" ] && kill -KILL -- "-$leader" 2>/dev/null
  pkill -KILL -f "sleep $marker" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
# Each task sleeps for a number nothing else on the machine uses.
marker=100.$$$RANDOM

count_sleeps() { pgrep -f "sleep $marker" | wc -l; }

# Wait until `count_sleeps` is $1 (or 10 s); prints the ms it took.
wait_sleeps() {
  local want=$1 start=$(date +%s%N) n
  while :; do
    n=$(count_sleeps)
    [ "$n" = "$want" ] && break
    [ $(( ($(date +%s%N) - start) / 1000000 )) -gt 10000 ] && break
    sleep 0.02
  done
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}

# start GROUP-ARGS...: a "client" (a bash that holds the server's input
# open) and the server in a new process group of their own; $leader is the
# group, $srv the server, fd $W writes to the server's stdin.
start() {
  rm -f "$tmp/in" "$tmp/out"
  mkfifo "$tmp/in"
  setsid bash -c '"$1" "${@:4}" <"$0" >"$2" 2>"$3" & echo $! >"$2.pid"; wait' \
    "$tmp/in" "$MCP" "$tmp/out" "$tmp/err" "$@" &
  leader=$!
  disown "$leader"
  exec {W}>"$tmp/in"
  while [ ! -s "$tmp/out.pid" ]; do sleep 0.01; done
  srv=$(cat "$tmp/out.pid")
  rm -f "$tmp/out.pid"
  printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' >&"$W"
}

# tasks N COMMAND: N run_in_background calls; waits for their answers.
tasks() {
  local n=$1 cmd=$2 i
  for i in $(seq 1 "$n"); do
    printf '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"%s"}}}\n' \
      "$i" "$cmd" >&"$W"
  done
  for i in $(seq 1 100); do
    [ "$(grep -c 'Started bash-' "$tmp/out")" -ge "$n" ] && return 0
    sleep 0.05
  done
  return 1
}

gone() { ! kill -0 "$1" 2>/dev/null || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

wait_gone() {
  local i
  for i in $(seq 1 500); do
    gone "$1" && return 0
    sleep 0.02
  done
  return 1
}

# ------------------------------------------------------------------------
# C-33, then its sibling: SIGHUP (and SIGQUIT) to the group.
for sig in HUP QUIT; do
  start --grace-ms 10000
  tasks 3 "sleep $marker & sleep $marker" || bad "C-33 $sig: tasks started" "$(cat "$tmp/out")"
  n=$(wait_sleeps 6)
  [ "$(count_sleeps)" = 6 ] || bad "C-33 $sig: six sleeps run" "$(count_sleeps)"
  kill -"$sig" -- "-$leader"
  if wait_gone "$srv"; then ok "C-33: SIG$sig to the group ends the server"; else bad "C-33: SIG$sig ends the server"; fi
  ms=$(wait_sleeps 0)
  if [ "$(count_sleeps)" = 0 ]; then
    ok "C-33: after SIG$sig no task process is left (gone ${ms} ms after the server)"
  else
    bad "C-33: after SIG$sig no task process is left" "$(count_sleeps) left"
  fi
  exec {W}>&-
  kill -KILL -- "-$leader" 2>/dev/null
  leader=
done

# M-MCP-6: a second SIGTERM kills every group at once, whatever the grace.
start --grace-ms 60000 --shutdown-grace-ms 60000
tasks 2 "trap '' TERM; sleep $marker & sleep $marker" || bad "second signal: tasks started"
wait_sleeps 4 >/dev/null
kill -TERM "$srv"
sleep 0.3
if [ "$(count_sleeps)" = 4 ]; then ok "after one SIGTERM the TERM-ignoring tasks still run (the grace)"; else bad "one SIGTERM: the grace" "$(count_sleeps)"; fi
kill -TERM "$srv"
ms=$(wait_sleeps 0)
if [ "$(count_sleeps)" = 0 ] && wait_gone "$srv"; then
  ok "M-MCP-6: a second SIGTERM sends SIGKILL to every group (${ms} ms)"
else
  bad "M-MCP-6: a second SIGTERM" "$(count_sleeps) left"
fi
exec {W}>&-
kill -KILL -- "-$leader" 2>/dev/null
leader=

# Its sibling across process groups: `set -m` gives each background job a
# group of its own inside the task's session (P-KILL-5); the second signal
# still reaches every one of them.  Without the guardian, so that nothing
# but the server's own SIGKILL can stop them.
start --grace-ms 60000 --shutdown-grace-ms 60000 --no-guardian
tasks 2 "set -m; trap '' TERM; sleep $marker & sleep $marker & wait" || bad "second signal, set -m: tasks started"
wait_sleeps 4 >/dev/null
kill -TERM "$srv"
sleep 0.3
kill -TERM "$srv"
ms=$(wait_sleeps 0)
if [ "$(count_sleeps)" = 0 ] && wait_gone "$srv"; then
  ok "M-MCP-6, P-KILL-5: a second SIGTERM reaches every group of each session (${ms} ms)"
else
  bad "M-MCP-6, P-KILL-5: a second SIGTERM and set -m jobs" "$(count_sleeps) left"
fi
exec {W}>&-
kill -KILL -- "-$leader" 2>/dev/null
leader=

# M-MCP-6: end of input; --grace-ms 10000 does not stretch the shutdown.
start --grace-ms 10000
tasks 3 "trap '' TERM; sleep $marker & sleep $marker" || bad "end of input: tasks started"
wait_sleeps 6 >/dev/null
t0=$(date +%s%N)
exec {W}>&-
wait_gone "$srv"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "$(count_sleeps)" = 0 ] && gone "$srv"; then
  ok "M-MCP-6: end of input stops TERM-ignoring tasks without waiting out --grace-ms (server gone after ${ms} ms)"
else
  bad "M-MCP-6: end of input with TERM-ignoring tasks" "$(count_sleeps) left after ${ms} ms"
fi
if grep -q 'SIGKILL to every task' "$tmp/err"; then ok "the shutdown escalated to SIGKILL by itself"; else bad "escalation" "$(cat "$tmp/err")"; fi
kill -KILL -- "-$leader" 2>/dev/null
leader=

# C-34 (the server killed), and its sibling: the server crashes.
for sig in KILL ABRT; do
  start --grace-ms 10000
  tasks 3 "trap '' TERM; sleep $marker & sleep $marker" || bad "SIG$sig: tasks started"
  wait_sleeps 6 >/dev/null
  kill -"$sig" "$srv"
  wait_gone "$srv"
  ms=$(wait_sleeps 0)
  if [ "$(count_sleeps)" = 0 ]; then
    ok "C-34/M-MCP-7: after SIG$sig of the server the guardian stopped every task (${ms} ms)"
  else
    bad "C-34/M-MCP-7: after SIG$sig of the server" "$(count_sleeps) left"
  fi
  exec {W}>&-
  kill -KILL -- "-$leader" 2>/dev/null
  leader=
done

summary
