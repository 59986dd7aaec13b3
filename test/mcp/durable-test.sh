#!/usr/bin/env bash
# D-1, D-3, D-5, D-7 through uvtasks-mcp --state-dir, from outside:
#  - the tool description says run_in_background's tasks outlive the
#    server;
#  - a task's server killed with SIGKILL (its guardian runs): the task
#    goes on; a server started again on the directory takes it back as
#    bash-1, its first result names it, task_output goes on with every
#    line once, and the end is told once;
#  - a server that ends in order (end of input) leaves its durable tasks
#    running, and the next one's task_kill stops them, session and all;
#  - run_command stays tied to its call (it is not durable);
#  - a task a call gives limits is durable with them (L-LIM-3): the
#    server's --limit-memory is taken with --state-dir, and the limit
#    names the task's end after a restart;
#  - a second server on the same directory is refused;
#  - a restarted server never hands out an id again (a delivered
#    task's bash-1 is not the next task's id).
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash durable-test.sh
set -u
. "$(dirname "$0")/lib.sh"
GOT_MAX=800
require_mcp

tmp=$(mktemp -d)
state=$tmp/state
srv=
marker=100.$$$RANDOM
# Every keeper the state directory names, and its session, go at exit.
durable_cleanup() {
  local rc pid
  for rc in "$state"/*.rc; do
    [ -e "$rc" ] || continue
    pid=$(awk '{print $4; exit}' "$rc")
    [ -n "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null
  done
  server_cleanup
}
trap durable_cleanup EXIT

# start ARGS...: a server on FIFOs ($W its input, answers in $tmp/log).
start() {
  rm -f "$tmp/in" "$tmp/out" "$tmp/log"
  mkfifo "$tmp/in" "$tmp/out"
  exec {W}<>"$tmp/in"
  SRV_IN=$W
  cat "$tmp/out" >"$tmp/log" {W}>&- &
  "$MCP" --state-dir "$state" "$@" <"$tmp/in" >"$tmp/out" 2>>"$tmp/err" {W}>&- &
  srv=$!
  send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}'
  answer 0 >/dev/null
  send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
}

# text ID: the text of the tool result answering request ID.
text() { answer "$1" | jq -r '.result.content[0].text // .error.message'; }

# gone PID: wait (10 s at most) until PID no longer runs.
gone() {
  local i
  for i in $(seq 1 1000); do alive "$1" || return 0; sleep 0.01; done
  return 1
}

id=1
call() { # call TOOL ARGS: sets $id to the request's id
  id=$((id + 1))
  send "$(tool_call "$id" "$1" "$2")"
}

# ---- D-7: the description ------------------------------------------------
start
send '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
desc=$(answer 1 | jq -r '.result.tools[] | select(.name=="run_in_background") | .description')
case $desc in
  *DURABLE*outlive*) ok "D-7: run_in_background says its tasks outlive the server" ;;
  *) bad "D-7: description" "$desc" ;;
esac

# ---- D-1, D-3: a server killed, its task taken back ----------------------
call run_in_background '{"command":"for i in $(seq 1 40); do echo line-$i; sleep 0.05; done; exit 6","label":"counter"}'
t=$(text $id)
case $t in *"Started bash-1"*) ok "started bash-1" ;; *) bad "start" "$t" ;; esac
seen=
# Read until at least line-5 came.
for n in $(seq 1 200); do
  call task_output '{"task_id":"bash-1"}'
  t=$(text $id)
  seen="$seen$t"$'\n'
  case $seen in *line-5*) break ;; esac
  sleep 0.02
done
guardian=$(pgrep -P "$srv" uvtasks-mcp | head -1)
kill -KILL "$srv"
wait "$srv" 2>/dev/null
srv=
exec {W}>&-
keeper=$(awk '{print $4; exit}' "$state"/*.rc)
# The guardian ends with its server; it must leave the task alone.
[ -n "$guardian" ] && gone "$guardian"
if alive "$keeper"; then
  ok "D-1: the task runs on after its server's SIGKILL (and its guardian)"
else
  bad "D-1: the task died with its server" "keeper $keeper"
fi

start
call task_list '{}'
t=$(text $id)
case $t in
  *"taken back"*bash-1*counter*) ok "D-7: the first result names the task taken back" ;;
  *) bad "D-7: first result" "$t" ;;
esac
case $t in
  *bash-1*running*counter*) ok "D-3: task_list shows bash-1 running" ;;
  *) bad "D-3: task_list" "$t" ;;
esac
notices=0
for n in $(seq 1 400); do
  call task_output '{"task_id":"bash-1"}'
  t=$(text $id)
  case $t in *"[notice]"*bash-1*completed*) notices=$((notices + 1)) ;; esac
  seen="$seen$t"$'\n'
  case $t in *"[status: completed, exit code: 6]"*) break ;; esac
  sleep 0.05
done
# One more look: no notice now (the result that showed the end told it,
# so its notice was left out there, M-TOOLS-18; or the notice came once).
call task_list '{}'
t=$(text $id)
late=0
case $t in *"[notice]"*bash-1*) late=1 ;; esac
lost=0
repeated=0
for i in $(seq 1 40); do
  c=$(printf '%s' "$seen" | grep -c -x "line-$i")
  [ "$c" = 0 ] && lost=$((lost + 1))
  [ "$c" -gt 1 ] && repeated=$((repeated + c - 1))
done
if [ "$lost" = 0 ] && [ "$repeated" = 0 ]; then
  ok "D-3: 40 lines across the restart, none lost or repeated"
else
  bad "D-3: lines lost $lost, repeated $repeated" "$seen"
fi
case $seen in
  *"[status: completed, exit code: 6]"*) ok "D-3: its end, exact" ;;
  *) bad "D-3: its end" "$seen" ;;
esac
if [ "$notices" -le 1 ] && [ "$late" = 0 ]; then
  ok "D-3: its end told once ($notices notice beside the result that showed it, none later)"
else
  bad "D-3: $notices notices, then $late more" "$(printf '%s' "$seen" | tail -c 600)"
fi

# ---- D-1: an orderly end leaves durable tasks; run_command is not durable
call run_in_background "{\"command\":\"sleep $marker & sleep $marker\",\"label\":\"sleeper\"}"
t=$(text $id)
case $t in *"Started bash-2"*) ok "started bash-2" ;; *) bad "start 2" "$t" ;; esac
call run_command "{\"command\":\"echo tied\",\"timeout_ms\":20000}"
t=$(text $id)
case $t in *tied*"exit code: 0"*) ok "run_command runs to its end" ;; *) bad "run_command" "$t" ;; esac
for n in $(seq 1 500); do [ "$(pgrep -f "sleep $marker" | wc -l)" = 2 ] && break; sleep 0.01; done
exec {W}>&- # end of input: the server stops in order
wait "$srv"
srv=
if [ "$(pgrep -f "sleep $marker" | wc -l)" = 2 ]; then
  ok "D-1: end of input leaves the durable task running"
else
  bad "D-1: the task stopped with the server's shutdown"
fi

start
# ---- D-3: one server per directory ------------------------------------------
"$MCP" --state-dir "$state" </dev/null >/dev/null 2>"$tmp/err2"
rc=$?
if [ "$rc" != 0 ] && grep -q "in use" "$tmp/err2"; then
  ok "D-3: a second server on the directory is refused ($rc)"
else
  bad "D-3: second server ($rc)" "$(cat "$tmp/err2")"
fi
call task_kill '{"task_id":"bash-2"}'
t=$(text $id)
case $t in *"bash-2"*) ok "task_kill of a task taken back" ;; *) bad "task_kill" "$t" ;; esac
for n in $(seq 1 1000); do [ "$(pgrep -f "sleep $marker" | wc -l)" = 0 ] && break; sleep 0.01; done
if [ "$(pgrep -f "sleep $marker" | wc -l)" = 0 ]; then
  ok "D-5: the kill stopped its whole session"
else
  bad "D-5: processes left after the kill"
fi
# ---- L-LIM-3 with D-5: a task's limits outlive the server too -----------
# A call with memory_mb gets a durable task; it waits for a line on a FIFO
# before it allocates 300 MB, so the allocation comes after the restart;
# the next server (started with --limit-memory, which --state-dir takes)
# takes it back and its end names the limit.
limited=101.$$$RANDOM
mkfifo "$tmp/go.$limited"
call run_in_background "{\"command\":\"read x < $tmp/go.$limited; exec dd if=/dev/zero of=/dev/null bs=300M count=1\",\"memory_mb\":128,\"label\":\"hog\"}"
t=$(text $id)
lim_id=$(printf '%s' "$t" | sed -n 's/.*Started \(bash-[0-9]*\)\..*/\1/p' | head -1)
case $t in
  *"ends with this server"*) bad "L-LIM-3: a call with limits is not durable" "$t" ;;
  *"[status: running]"*) ok "L-LIM-3: a call with limits gets a durable task ($lim_id)" ;;
  *) lim_id=; echo "skip L-LIM-3 with --state-dir (not enforceable here): $t" ;;
esac
exec {W}>&-
wait "$srv"
srv=
if [ -n "$lim_id" ]; then
  # Its command is in its environment, not its argv: its keeper, named
  # in its status file, is what shows it runs.
  live=0
  for rc in "$state"/*.rc; do
    [ -e "$rc" ] || continue
    pid=$(awk '{print $4; exit}' "$rc")
    [ -n "$pid" ] && alive "$pid" && live=$((live + 1))
  done
  if [ "$live" -ge 1 ]; then
    ok "L-LIM-3: the limited task runs on without its server"
  else
    bad "L-LIM-3: the limited task ended with its server"
  fi
  start --limit-memory 512M
  call task_list '{}'
  t=$(text $id)
  case $t in
    *"$lim_id"*running*hog*) ok "L-LIM-3: --state-dir with --limit-memory starts, and takes $lim_id back" ;;
    *) bad "L-LIM-3: restart with --limit-memory" "$t$(cat "$tmp/err")" ;;
  esac
  echo go >"$tmp/go.$limited"
  call task_output "{\"task_id\":\"$lim_id\",\"wait\":true,\"timeout_ms\":60000}"
  t=$(text $id)
  case $t in
    *"[status: killed, out of memory (limit 128 MiB)]"*) ok "L-LIM-3: after the restart its end names its limit" ;;
    *) bad "L-LIM-3: the limit across the restart" "$t" ;;
  esac
  exec {W}>&-
  wait "$srv"
  srv=
fi
# ---- D-3: an id is never handed out again after a restart ---------------
# A task whose end was delivered is not taken back; the next server must
# not give its id to another command (a model that remembers bash-1 would
# read another command's output under it).
state=$tmp/state-ids
start --no-guardian
call run_in_background '{"command":"echo one"}'
t=$(text $id)
case $t in *"Started bash-1"*) ok "ids: started bash-1" ;; *) bad "ids: start" "$t" ;; esac
call task_output '{"task_id":"bash-1","wait":true,"timeout_ms":20000}'
t=$(text $id)
case $t in *one*"exit code: 0"*) ok "ids: bash-1 ended, its end delivered" ;; *) bad "ids: bash-1's end" "$t" ;; esac
exec {W}>&-
wait "$srv"
srv=
start --no-guardian
call run_in_background '{"command":"echo two"}'
t=$(text $id)
case $t in
  *"Started bash-2"*) ok "D-3: after a restart the next task is bash-2, not bash-1 again" ;;
  *) bad "D-3: an id handed out again after a restart" "$t" ;;
esac
exec {W}>&-
wait "$srv"
srv=
summary
