#!/usr/bin/env bash
# M-MCP-10 from outside: a client that holds the server's stdout open and
# never reads it (a FIFO opened, not read).  Once the pipe is full and
# answers wait in the server's queue:
#  - end of input stops the tasks and the server exits within its hard
#    limit (the pending writes are cancelled), and its guardian is never a
#    zombie, neither while the server shuts down nor after;
#  - the same when so many answers wait that the server stopped reading
#    its input (the end of input is then seen by a watch for the hang-up);
#  - the same for SIGTERM, SIGINT and SIGHUP with stdin still open.
# The bound asserted is 8 s: the server's own is 1.5 s, by its timers,
# but a sanitizer build on a loaded machine takes longer to get there and
# to exit; the time taken is printed.  Without the fix the server never
# exits.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash blocked-test.sh
set -u
. "$(dirname "$0")/lib.sh"
require_mcp
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }

tmp=$(mktemp -d)
srv=
marker=100.$$$RANDOM
trap server_cleanup EXIT

# Wait (up to 10 s) until the pipe behind FIFO `$1` is full; prints the
# bytes in it and its size.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
pipe_full() {
  "$PY" -S - "$1" <<'EOF'
import fcntl, os, struct, sys, termios, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
size = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
end = time.monotonic() + 10
while True:
    n = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    if n >= size - 16384 or time.monotonic() > end:
        break
    time.sleep(0.01)
print(n, size)
EOF
}

# start: the server with stdin and stdout on FIFOs the test holds open
# (fd $W writes its input; fd $R holds its output and is never read).
start() {
  rm -f "$tmp/in" "$tmp/out"
  mkfifo "$tmp/in" "$tmp/out"
  exec {W}<>"$tmp/in"
  exec {R}<>"$tmp/out"
  "$MCP" "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" {W}>&- {R}>&- &
  srv=$!
  # The guardian is the server's only child before any task starts.
  guardian=
  case "$*" in *--no-guardian*) ;; *) for _ in $(seq 1 500); do
    guardian=$(cat "/proc/$srv/task/$srv/children" 2>/dev/null)
    guardian=${guardian%% *}
    [ -n "$guardian" ] && break
    sleep 0.01
  done ;; esac
  printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' >&"$W"
  printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"sleep %s"}}}\n' "$marker" >&"$W"
  # Answers enough to fill the pipe and leave some queued in the server.
  for i in $(seq 2 "${lists:-60}"); do
    printf '{"jsonrpc":"2.0","id":%d,"method":"tools/list"}\n' "$i" >&"$W"
  done
  # Wait for the condition: the pipe is full (the server's writes wait).
  read -r n size < <(pipe_full "$tmp/out")
  # (Full up to its last pages: one answer does not fit into what is left.)
  [ "$n" -ge $((size - 16384)) ] || bad "the client's pipe fills" "$n of $size"
  for _ in $(seq 1 500); do
    pgrep -f "sleep $marker" >/dev/null && break
    sleep 0.01
  done
}

# finish WHAT: wait up to 12 s for the server to end, checking its guardian
# on the way; asserts the 8 s bound.
finish() {
  local what=$1 t0=$2 zomb=0 ms
  while alive "$srv"; do
    # A child is a zombie for an instant when it ends, until its parent
    # reaps it: a zombie seen twice, 50 ms apart, is one left unreaped.
    if zombie "$guardian"; then
      sleep 0.05
      zombie "$guardian" && alive "$srv" && zomb=1
    fi
    [ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 12000 ] && break
    sleep 0.01
  done
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if ! alive "$srv" && [ "$ms" -le 8000 ]; then
    ok "M-MCP-10: $what with stdout not read: the server exits (${ms} ms)"
  else
    bad "M-MCP-10: $what with stdout not read: the server exits" "still there after ${ms} ms: $(tail -c 300 "$tmp/err")"
  fi
  if [ "$zomb" = 0 ]; then
    ok "M-MCP-10: $what: the guardian is never a zombie while the server runs"
  else
    bad "M-MCP-10: $what: the guardian was a zombie while the server ran"
  fi
  kill -KILL "$srv" 2>/dev/null
  wait "$srv" 2>/dev/null
  srv=
  if pgrep -f "sleep $marker" >/dev/null; then
    bad "M-MCP-10: $what: the task is stopped" "$(pgrep -af "sleep $marker")"
  else
    ok "M-MCP-10: $what: the task is stopped"
  fi
  exec {W}>&- {R}>&- 2>/dev/null
}

start
[ -n "$guardian" ] || bad "the guardian runs"
t0=$(date +%s%N)
exec {W}>&-
finish "end of input" "$t0"

for sig in TERM INT HUP; do
  start
  t0=$(date +%s%N)
  kill -"$sig" "$srv"
  finish "SIG$sig" "$t0"
done

# Its sibling with more answers queued than the high-water mark (4 MiB:
# 600 tools/list answers of about 11 KB): the server has stopped reading
# its input, so the end of input lies unread behind the requests it has
# not taken yet.  It must still see it (it hung here before).
lists=600 start
t0=$(date +%s%N)
exec {W}>&-
finish "end of input behind paused reading" "$t0"

# The same with stdin a socket the client shuts for writing (a socket
# reports the hang-up differently from a pipe: EPOLLRDHUP, not EPOLLHUP).
sock_eof() {
  "$PY" -S - "$MCP" "$tmp/sock-out" "$marker" <<'EOF'
import json, os, socket, subprocess, sys, time
mcp, out, marker = sys.argv[1:4]
os.mkfifo(out)
hold = os.open(out, os.O_RDWR)  # held open, never read
a, b = socket.socketpair()
p = subprocess.Popen([mcp], stdin=b, stdout=hold, stderr=subprocess.DEVNULL)
b.close()
w = lambda o: a.sendall((json.dumps(o) + "\n").encode())
w({"jsonrpc": "2.0", "id": 0, "method": "initialize",
   "params": {"protocolVersion": "2025-11-25"}})
w({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
   "name": "run_in_background", "arguments": {"command": "sleep " + marker}}})
for i in range(2, 600):
    w({"jsonrpc": "2.0", "id": i, "method": "tools/list"})
a.shutdown(socket.SHUT_WR)
t0 = time.monotonic()
try:
    p.wait(8)
    print("exited %d" % int((time.monotonic() - t0) * 1000))
except subprocess.TimeoutExpired:
    p.kill()
    p.wait()
    print("hung")
EOF
}
res=$(sock_eof)
case "$res" in
exited*) ok "M-MCP-10: a socket shut for writing behind paused reading: the server exits (${res#exited } ms)" ;;
*) bad "M-MCP-10: a socket shut for writing behind paused reading: the server exits" "$res" ;;
esac
if pgrep -f "sleep $marker" >/dev/null; then
  bad "M-MCP-10: a socket shut for writing: the task is stopped" "$(pgrep -af "sleep $marker")"
else
  ok "M-MCP-10: a socket shut for writing: the task is stopped"
fi

# Its sibling without the guardian: the same bound.
start --no-guardian
t0=$(date +%s%N)
exec {W}>&-
finish "end of input, no guardian" "$t0"

summary
