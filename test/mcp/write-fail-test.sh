#!/usr/bin/env bash
# M-MCP-6, M-MCP-10: a write to stdout that fails ends the server in order
# (exit 0, every task stopped, nothing left running), whichever handler
# made the write: the answer to a request, a tool call's later answer, a
# batch's answer, a progress notification (M-MCP-5), a Tasks status
# notification; and a client that closes its read end in the middle of a
# call.  The shutdown runs from the loop after the handler returns, never
# inside it (the sanitizer lanes run this with ASan).
#
# UVTASKS_MCP_FAIL_WRITE=N makes the server's Nth write fail at once, as
# a write that cannot be queued does (each message is two writes: its
# text, then its newline; initialize's answer is writes 1 and 2).
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash write-fail-test.sh
set -u

. "$(dirname "$0")/lib.sh"
GOT_MAX=600
require_mcp

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
marker="7.$$$RANDOM"
left() { pgrep -f "sleep $marker" | wc -l; }

INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"PV","capabilities":{},"clientInfo":{"name":"write-fail-test","version":"1"}}}'
INITED='{"jsonrpc":"2.0","method":"notifications/initialized"}'

# scenario NAME N PROTOCOL MESSAGE...: the server with its Nth write
# failing gets initialize and the messages, then its input stays open
# (the failure alone must end it); it must exit 0 within the bound, say
# why, have delivered initialize's answer, and leave nothing running.
scenario() {
  local name=$1 n=$2 pv=$3
  shift 3
  local rc=0 i
  coproc SRV { UVTASKS_MCP_FAIL_WRITE=$n exec "$MCP" --no-guardian --grace-ms 200 \
    >"$tmp/out" 2>"$tmp/err"; }
  local pid=$SRV_PID in=${SRV[1]}
  printf '%s\n%s\n' "${INIT/PV/$pv}" "$INITED" >&"$in"
  for m in "$@"; do printf '%s\n' "$m" >&"$in"; done
  # The server ends by itself (its input is still open): wait for it,
  # bounded, then look.
  for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then
    bad "$name: the server ends by itself" "$(cat "$tmp/err")"
    kill -KILL "$pid" 2>/dev/null
  fi
  exec {in}>&-
  wait "$pid" || rc=$?
  if [ "$rc" -eq 0 ] && grep -q 'output closed; stopping every task' "$tmp/err" &&
     ! grep -q -E 'ERROR|runtime error|Assertion|did not close' "$tmp/err"; then
    ok "$name: exit 0 in order"
  else
    bad "$name: exit 0 in order" "exit $rc; $(cat "$tmp/err")"
  fi
  # Writes 1 .. N-1 went out, nothing after: (N-1)/2 whole lines.
  local lines
  lines=$(tr -cd '\n' <"$tmp/out" | wc -c)
  if grep -q '"id":1,"result"' "$tmp/out" && [ "$lines" -eq $(((n - 1) / 2)) ]; then
    ok "$name: what came before the failure was sent, nothing after"
  else
    bad "$name: what came before the failure was sent, nothing after" \
      "$lines lines: $(cat "$tmp/out")"
  fi
  for i in $(seq 1 100); do [ "$(left)" -eq 0 ] && break; sleep 0.05; done
  if [ "$(left)" -eq 0 ]; then
    ok "$name: no task process left"
  else
    bad "$name: no task process left" "$(left) left"
    pkill -KILL -f "sleep $marker"
  fi
}

bg="{\"command\":\"sleep $marker\"}"
# The answer to a request, inside its handler (tools/list); the call
# behind it in the same read is not taken.
scenario "a request's answer" 3 2025-06-18 \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
  "$(tool_call 3 run_in_background "$bg")"
# A tool call's answer, from the tools' callback; a second call waits.
scenario "a tool call's answer" 5 2025-06-18 \
  "$(tool_call 2 run_in_background "$bg")" \
  "$(tool_call 3 task_output '{"task_id":"bash-1","wait":true,"timeout_ms":60000}')" \
  "$(tool_call 4 run_command '{"command":"echo answered"}')"
# The newline after a message's text.
scenario "a message's newline" 4 2025-06-18 \
  "$(tool_call 2 run_in_background "$bg")" \
  "$(tool_call 3 run_command '{"command":"echo answered"}')"
# A batch's answer (2025-03-26), sent when its last call ends.
scenario "a batch's answer" 3 2025-03-26 \
  "[$(tool_call 2 run_in_background "$bg"),$(tool_call 3 run_command '{"command":"echo b"}')]"
# A progress notification, from the progress timer, two calls waiting.
scenario "a progress notification" 3 2025-06-18 \
  "$(tool_call 2 run_command "{\"command\":\"sleep $marker\"}" '"_meta":{"progressToken":"p2"}')" \
  "$(tool_call 3 run_command "{\"command\":\"sleep $marker\"}" '"_meta":{"progressToken":"p3"}')"
# A Tasks status notification, from the registry's change feed, with a
# tasks/result waiting for the task (the fourth message: the answers to
# the two calls come first).
scenario "a tasks/status notification" 7 2025-11-25 \
  "$(tool_call 2 run_in_background "$bg")" \
  "$(tool_call 3 run_command '{"command":"sleep 0.3; echo t"}' '"task":{"ttl":60000}')" \
  '{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"bash-2"}}'

# The client closes its read end while a call runs: the call's answer
# meets a closed pipe.
coproc SRV { exec "$MCP" --no-guardian --grace-ms 200 2>"$tmp/err"; }
pid=$SRV_PID
in=${SRV[1]}
out=${SRV[0]}
printf '%s\n%s\n' "${INIT/PV/2025-06-18}" "$INITED" >&"$in"
IFS= read -r -t 30 line <&"$out"
printf '%s\n' "$(tool_call 2 run_in_background "$bg")" >&"$in"
IFS= read -r -t 30 line <&"$out"
printf '%s\n' "$(tool_call 3 run_command '{"command":"sleep 0.3; echo late"}')" >&"$in"
exec {out}<&-
for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$pid" 2>/dev/null; then
  bad "closed read end: the server ends by itself" "$(cat "$tmp/err")"
  kill -KILL "$pid" 2>/dev/null
fi
exec {in}>&-
rc=0
wait "$pid" || rc=$?
if [ "$rc" -eq 0 ] && grep -q 'output closed; stopping every task' "$tmp/err"; then
  ok "closed read end: exit 0 in order"
else
  bad "closed read end: exit 0 in order" "exit $rc; $(cat "$tmp/err")"
fi
for i in $(seq 1 100); do [ "$(left)" -eq 0 ] && break; sleep 0.05; done
if [ "$(left)" -eq 0 ]; then
  ok "closed read end: no task process left"
else
  bad "closed read end: no task process left" "$(left) left"
  pkill -KILL -f "sleep $marker"
fi

summary
