#!/usr/bin/env bash
# M-MCP-13 from outside: a task, running as the same user as the server,
# cannot reach the server's channels:
#  - it cannot write into the client's stream (/proc/<server>/fd/1: a
#    forged notifications/message never reaches the client), nor open the
#    client's requests (/proc/<server>/fd/0), nor list the server's fds;
#  - it cannot tell the guardian anything: 8 bytes written into every fd
#    of the server and of the guardian it can name change nothing, and a
#    server killed with SIGKILL afterwards still has its task stopped;
#  - the tasks themselves stay ordinary (dumpable: a task reads its own
#    /proc/self/fd, and another task can read it).
# As root the test runs the server as `nobody` (setpriv), since root may
# read any process's fds whatever it says.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash channels-test.sh
set -u
. "$(dirname "$0")/lib.sh"
require_mcp
AS=()
if [ "$(id -u)" = 0 ]; then
  command -v setpriv >/dev/null || { echo "setpriv is needed as root" >&2; exit 77; }
  AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

tmp=$(mktemp -d)
chmod 755 "$tmp"
if [ ${#AS[@]} -gt 0 ]; then
  # The build may sit where `nobody` cannot reach (a clone under /root).
  cp "$MCP" "$tmp/uvtasks-mcp"
  chmod 755 "$tmp/uvtasks-mcp"
  MCP=$tmp/uvtasks-mcp
fi
srv=
marker=100.$$$RANDOM
trap server_cleanup EXIT

start() {
  rm -f "$tmp/in" "$tmp/out" "$tmp/log"
  # Open to the server's user as a client's own pipes would be.
  mkfifo -m 666 "$tmp/in" "$tmp/out"
  exec {W}<>"$tmp/in"
  SRV_IN=$W
  cat "$tmp/out" >"$tmp/log" {W}>&- &
  "${AS[@]}" "$MCP" --cwd /tmp "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" {W}>&- &
  srv=$!
  send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}'
  answer 0 >/dev/null
}

# run ID COMMAND: run_command, prints its answer.
run() {
  send "$(tool_call "$1" run_command "{\"command\":\"$(json_str "$2")\"}")"
  answer "$1"
}

start
# The guardian: the server's child in a session of its own.
guardian=$(cat "/proc/$srv/task/$srv/children" 2>/dev/null)
guardian=${guardian%% *}
[ -n "$guardian" ] || bad "the guardian runs"

out=$(run 1 "echo '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"error\",\"logger\":\"uvtasks\",\"data\":\"FORGED-$marker\"}}' > /proc/$srv/fd/1 && echo WROTE-1 || echo REFUSED-1")
if grep -q "FORGED-$marker\"}}" "$tmp/log" || [[ "$out" == *WROTE-1* ]]; then
  bad "M-MCP-13: a task cannot write into the client's stream" "$out"
else
  ok "M-MCP-13: a task cannot write into the client's stream (/proc/<server>/fd/1)"
fi

out=$(run 2 "exec 3</proc/$srv/fd/0 && echo OPENED-0 || echo REFUSED-0")
if [[ "$out" == *REFUSED-0* ]]; then
  ok "M-MCP-13: a task cannot open the client's requests (/proc/<server>/fd/0)"
else
  bad "M-MCP-13: a task cannot open the client's requests" "$out"
fi

out=$(run 3 "ls /proc/$srv/fd >/dev/null && echo LISTED || echo REFUSED-ls")
if [[ "$out" == *REFUSED-ls* ]]; then
  ok "M-MCP-13: a task cannot list the server's fds"
else
  bad "M-MCP-13: a task cannot list the server's fds" "$out"
fi

# A task to protect, then 8 bytes ("C" and a zero pid: "forget every
# task" in the old pipe protocol) into every fd of the server and of the
# guardian that a task can name.
send "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run_in_background\",\"arguments\":{\"command\":\"sleep $marker\"}}}"
answer 4 >/dev/null
out=$(run 5 "n=0; for p in $srv $guardian; do for f in 0 1 2 3 4 5 6 7 8 9 10 11 12; do printf 'C\\0\\0\\0\\0\\0\\0\\0' 2>/dev/null >/proc/\$p/fd/\$f && n=\$((n+1)); done; done; echo WRITES=\$n")
if [[ "$out" == *WRITES=0* ]]; then
  ok "M-MCP-13: a task can write into none of the server's or the guardian's fds"
else
  bad "M-MCP-13: a task can write into none of the server's or the guardian's fds" "$out"
fi

# M-MCP-13: the tasks stay ordinary: dumpable again after their exec.
out=$(run 6 "ls /proc/self/fd >/dev/null && grep -q . /proc/\$\$/environ && echo SELF-OK")
if [[ "$out" == *SELF-OK* ]]; then
  ok "M-MCP-13: a task reads its own /proc entries (tasks stay dumpable)"
else
  bad "M-MCP-13: a task reads its own /proc entries" "$out"
fi

for _ in $(seq 1 500); do
  pgrep -f "sleep $marker" >/dev/null && break
  sleep 0.01
done
out=$(run 7 "ls /proc/\$(pgrep -f 'sleep $marker' | head -1)/fd >/dev/null && echo OTHER-OK")
if [[ "$out" == *OTHER-OK* ]]; then
  ok "M-MCP-13: one task can still look at another's /proc entries"
else
  bad "M-MCP-13: one task can look at another's /proc entries" "$out"
fi

# The guardian still knows the task: SIGKILL the server.
kill -KILL "$srv"
wait "$srv" 2>/dev/null
srv=
for _ in $(seq 1 500); do
  pgrep -f "sleep $marker" >/dev/null || break
  sleep 0.01
done
if pgrep -f "sleep $marker" >/dev/null; then
  bad "M-MCP-13/M-MCP-7: after the writes, a SIGKILLed server still has its task stopped" "$(pgrep -af "sleep $marker")"
else
  ok "M-MCP-13/M-MCP-7: after the writes, a SIGKILLed server still has its task stopped"
fi
exec {W}>&-

summary
