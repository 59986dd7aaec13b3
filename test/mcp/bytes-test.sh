#!/usr/bin/env bash
# S-8 through the server: a terminal task's bytes never crash it.  The
# fault: a truecolor SGR with colon sub-parameters (17 parameters) on a
# terminal task crashed uvtasks-mcp inside libvterm on the next
# task_output or task_screen, and every task with it.  Then its siblings
# (a DECRQSS libvterm does not know, REP before any character, 40
# parameters); after each the server still answers and shows the text
# after the sequence.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash bytes-test.sh
set -u

. "$(dirname "$0")/lib.sh"
require_mcp

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
coproc SRV { exec "$MCP" --no-guardian 2>"$tmp/stderr"; }
SRV_IN=${SRV[1]}
SRV_OUT=${SRV[0]}
SRV_PID_SAVED=$SRV_PID

check "initialize" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' 1 '"protocolVersion"'
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'

id=10
n=1
for seq in '\\e[38:2:59:66:97;48:2:36:40:59;58:2:224:175:104;4:3mcolour\\e[0m' \
           '\\eP$qO\\e\\\\' '\\e[5b' \
           "\\\\e[$(seq -s ';' 1 40)m"; do
  check "S-8: a terminal task prints $seq" \
    "$(tool_call $id run_in_background "{\"command\":\"printf '$seq'; printf ' after-$n\\\\n'\",\"tty\":true}")" $id \
    "Started bash-$n"
  id=$((id + 1))
  check "S-8: task_output reads it ($seq)" \
    "$(tool_call $id task_output "{\"task_id\":\"bash-$n\",\"wait\":true}")" $id "after-$n"
  id=$((id + 1))
  check "S-8: task_screen shows it ($seq)" \
    "$(tool_call $id task_screen "{\"task_id\":\"bash-$n\"}")" $id "after-$n" '[screen 80x24'
  id=$((id + 1))
  n=$((n + 1))
done
check "S-8: the server still answers" \
  "$(tool_call $id task_list '{}')" $id 'bash-1'
exec {SRV_IN}>&-
wait "$SRV_PID_SAVED"; rc=$?
[ $rc = 0 ] && ok "S-8: the server ends in order (exit 0)" || bad "S-8: the server ends in order" "exit $rc $(cat "$tmp/stderr")"
summary
