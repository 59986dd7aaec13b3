# Helpers shared by the bash tests of uvtasks-mcp; each test sources it:
#   . "$(dirname "$0")/lib.sh"
# The counting (ok, bad, summary), the server under test (require_mcp),
# whether a process runs (alive, zombie), the EXIT trap (server_cleanup),
# and JSON-RPC with the server: through a coproc (send, expect_id, check:
# fds $SRV_IN and $SRV_OUT) or through FIFOs whose answers a `cat` copies
# to $tmp/log (send, answer: fd $SRV_IN), with requests built by tool_call
# and json_str.

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
# bad NAME [GOT]: GOT is shown cut to $GOT_MAX characters (default 400).
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ $# -gt 1 ] && echo "     got: ${2:0:${GOT_MAX:-400}}"; }
# The last line of a test: its exit status says whether anything failed.
summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}

# $MCP: the built server the test drives (UVTASKS_MCP); skips without it.
require_mcp() {
  MCP=${UVTASKS_MCP:-}
  if [ -z "$MCP" ] || [ ! -x "$MCP" ]; then
    echo "UVTASKS_MCP must name the built uvtasks-mcp" >&2
    exit 77
  fi
}

# An EXIT trap for a test whose server is $srv (empty: none) and whose
# tasks sleep for $marker seconds: they are killed, $tmp is removed.
server_cleanup() {
  [ -n "$srv" ] && kill -KILL "$srv" 2>/dev/null
  pkill -KILL -f "sleep $marker" 2>/dev/null
  rm -rf "$tmp"
}

# zombie PID: PID has ended and is not reaped yet; alive PID: it runs.
zombie() { grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
alive() { kill -0 "$1" 2>/dev/null && ! zombie "$1"; }

# send MESSAGE: one line to the server's stdin.
send() { printf '%s\n' "$1" >&"$SRV_IN"; }

# expect_id ID: read the server's lines until the response with id ID
# (notifications skipped; 30 s at most for each line).  Sets REPLY_LINE.
expect_id() {
  local want=$1 line
  REPLY_LINE=
  while IFS= read -r -t 30 line <&"$SRV_OUT"; do
    case $line in
      *'"method":"notifications/'*) continue ;;
      *"\"id\":$want,"* | *"\"id\":$want}"*) REPLY_LINE=$line; return 0 ;;
    esac
  done
  return 1
}

# check NAME REQUEST ID PATTERN...: send, read the answer (expect_id),
# match the patterns; a pattern starting with ! must be absent.
check() {
  local name=$1 req=$2 id=$3 p
  shift 3
  send "$req"
  if ! expect_id "$id"; then
    bad "$name (no answer with id $id)" "$REPLY_LINE"
    return
  fi
  for p in "$@"; do
    case $p in
      !*) case $REPLY_LINE in *"${p#!}"*) bad "$name (did not want ${p#!})" "$REPLY_LINE"; return ;; esac ;;
      *) case $REPLY_LINE in *"$p"*) ;; *) bad "$name (wanted $p)" "$REPLY_LINE"; return ;; esac ;;
    esac
  done
  ok "$name"
}

# answer ID: the lines of $tmp/log answering request ID (waits up to 20 s
# for one).
answer() {
  local i
  for i in $(seq 1 2000); do
    grep -q -F -e "\"id\":$1}" -e "\"id\":$1," "$tmp/log" 2>/dev/null && break
    sleep 0.01
  done
  grep -F -e "\"id\":$1}" -e "\"id\":$1," "$tmp/log"
}

# json_str TEXT: TEXT as the inside of a JSON string (backslashes and
# quotes escaped).
json_str() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }

# tool_call ID TOOL ARGS-JSON [EXTRA]: the text of a tools/call request;
# EXTRA (members of params, e.g. "task":{}) follows the arguments.
tool_call() {
  printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s%s}}' \
    "$1" "$2" "$3" "${4:+,$4}"
}
