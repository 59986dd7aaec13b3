#!/usr/bin/env bash
# A short, real session with uvtasks-mcp, printed as a readable transcript,
# ending with a model's side of driving a Python REPL through write_stdin
# shown as the exact JSON-RPC lines.  Needs bash, python3 and the built
# server; builds it first if it is missing, installing the build tools and
# python3 on a fresh Debian 12 machine (as root).
#
#   scripts/demo.sh            # uses ./build, or creates ./build-demo
#   UVTASKS_MCP=/path/to/uvtasks-mcp scripts/demo.sh
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
MCP=${UVTASKS_MCP:-}
if [ -z "$MCP" ]; then
  for b in "$root/build" "$root/build-demo"; do
    if [ -x "$b/src/mcp/uvtasks-mcp" ]; then
      MCP=$b/src/mcp/uvtasks-mcp
      break
    fi
  done
fi
if [ -z "$MCP" ]; then
  # On a fresh Debian 12 machine (as root) this installs the build tools.
  bash "$root/scripts/setup.sh" --build
  echo "Building uvtasks-mcp in build-demo/ ..."
  if [ ! -d "$root/build-demo" ]; then
    meson setup "$root/build-demo" "$root" -Dtests=false -Dmcp=enabled >/dev/null
  fi
  ninja -C "$root/build-demo" >/dev/null
  MCP=$root/build-demo/src/mcp/uvtasks-mcp
fi
if ! command -v python3 >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  bash "$root/scripts/setup.sh" --demo
fi

bold=$(printf '\033[1m') dim=$(printf '\033[2m') off=$(printf '\033[0m')
if [ ! -t 1 ] || [ -n "${NO_COLOR:-}" ]; then bold= dim= off=; fi

coproc SRV { exec "$MCP" --grace-ms 500 2>/dev/null; }
SRV_IN=${SRV[1]}
SRV_OUT=${SRV[0]}
srv_pid=$SRV_PID
next_id=0

# The value of a JSON string field ($1) in a one-line message ($2), with
# the escapes jansson writes turned back into text.
field() {
  local raw
  raw=$(printf '%s' "$2" | sed -n "s/.*\"$1\":\"\(\([^\"\\\\]\|\\\\.\)*\)\".*/\1/p")
  raw=${raw//\\\"/\"}
  printf '%b' "$raw"
}

indent() { sed "s/^/$1/"; }

# Show every notification that arrives in the next $1 seconds.
drain() {
  local line
  while IFS= read -r -t "$1" line <&"$SRV_OUT"; do show_notification "$line"; done
  return 0
}

show_notification() {
  case $1 in
    *'"notifications/message"'*)
      printf '%s  <- log notice: %s%s\n' "$dim" "$(field data "$1")" "$off" ;;
  esac
}

# rpc METHOD PARAMS-JSON: send a request, print the answer's text.
rpc() {
  local method=$1 params=$2 line
  next_id=$((next_id + 1))
  SENT_LINE=$(printf '{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}' \
    "$next_id" "$method" "$params")
  printf '%s\n' "$SENT_LINE" >&"$SRV_IN"
  while IFS= read -r -t 30 line <&"$SRV_OUT"; do
    case $line in
      *"\"id\":$next_id,"*) REPLY_LINE=$line; return 0 ;;
      *) show_notification "$line" ;;
    esac
  done
  echo "no answer to $method" >&2
  exit 1
}

# tool NAME ARGS-JSON: call a tool and print the call and its result.
tool() {
  printf '\n%s-> %s %s%s\n' "$bold" "$1" "$2" "$off"
  rpc tools/call "{\"name\":\"$1\",\"arguments\":$2}"
  case $REPLY_LINE in *'"isError":true'*) printf '   (tool error)\n' ;; esac
  field text "$REPLY_LINE" | indent '   '
  echo
}

# say LINE...: a comment of the transcript, one line per argument.
say() {
  local l
  printf '\n'
  for l in "$@"; do printf '%s# %s%s\n' "$dim" "$l" "$off"; done
}

echo "uvtasks-mcp demo: $MCP"
say "The client says hello; the server answers with its version and capabilities."
rpc initialize '{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo.sh","version":"1"}}'
printf '%s-> initialize%s\n   server %s, protocol %s\n' "$bold" "$off" \
  "$(printf '%s' "$REPLY_LINE" | sed -n 's/.*"serverInfo":{"name":"\([^"]*\)".*"version":"\([^"]*\)".*/\1 \2/p')" \
  "$(field protocolVersion "$REPLY_LINE")"
printf '{"jsonrpc":"2.0","method":"notifications/initialized"}\n' >&"$SRV_IN"
rpc tools/list '{}'
printf '%s-> tools/list%s\n   %s\n' "$bold" "$off" \
  "$(printf '%s' "$REPLY_LINE" | grep -o '"name":"[a-z_]*","description"' | sed 's/"name":"\([a-z_]*\)".*/\1/' | tr '\n' ' ')"

say "Start three real shell commands in the background."
tool run_in_background '{"command":"for i in 1 2 3; do echo step $i; sleep 0.4; done; echo built","label":"a slow build"}'
tool run_in_background '{"command":"echo serving on :8080; exec sleep 600","label":"a server"}'
tool run_in_background '{"command":"echo warning >&2; echo quick job done","label":"a quick job"}'

say "Nobody waits for the quick job: when it ends, a log notice arrives at once."
drain 0.5

say "Read what the build printed so far (each read returns only what is new)."
say "The quick job's notice is prepended to this result, so a model sees it too."
tool task_output '{"task_id":"bash-1"}'

say "Wait for the build to end."
tool task_output '{"task_id":"bash-1","wait":true,"timeout_ms":10000}'

say "The quick job's output: stdout, then its stderr after a [stderr] line."
tool task_output '{"task_id":"bash-3"}'

say "A wait with a short deadline: still a success, the task is still running."
tool task_output '{"task_id":"bash-2","timeout_ms":300}'

say "Everything this client can see."
tool task_list '{}'

say "Stop the server task: SIGTERM to its whole process group."
tool task_kill '{"task_id":"bash-2","reason":"demo is over"}'
tool task_output '{"task_id":"bash-2","wait":true}'

say "Mistakes are tool errors the model can read, not crashes."
tool task_output '{"task_id":"bash-42"}'

# wire NAME ARGS-JSON: call a tool and print the exact request line and the
# exact answer line, then the result's text as the model reads it.
wire() {
  rpc tools/call "{\"name\":\"$1\",\"arguments\":$2}"
  printf '\n%s-> %s%s\n' "$bold" "$SENT_LINE" "$off"
  printf '<- %s\n' "$REPLY_LINE"
  case $REPLY_LINE in *'"isError":true'*) printf '   (tool error)\n' ;; esac
  field text "$REPLY_LINE" | indent '   '
  echo
}

if command -v python3 >/dev/null 2>&1; then
  say "A model drives an interactive program: a Python REPL on a terminal," \
    "through write_stdin. Each call: the exact JSON-RPC request (->) and" \
    "answer (<-), then the answer's text as the model reads it (the echo," \
    "\\r\\n and colours turned into plain lines). A call answers as soon as" \
    "the REPL shows its prompt again or the task ends, not after yield_ms."
  wire run_in_background '{"command":"python3 -q -i","tty":true,"label":"python"}'
  say "Wait for the first prompt: empty chars only reads."
  wire write_stdin '{"task_id":"bash-4","chars":"","yield_ms":5000}'
  wire write_stdin '{"task_id":"bash-4","chars":"1+1\n","yield_ms":5000}'
  say "A slow line: its echo is no answer; the call waits for \"done\" and the prompt."
  wire write_stdin '{"task_id":"bash-4","chars":"import time; time.sleep(0.5); print(\"done\")\n","yield_ms":5000}'
  wire write_stdin '{"task_id":"bash-4","chars":"1/0\n","yield_ms":5000}'
  say "close_stdin sends Ctrl-D: Python exits, and the call returns at its end."
  wire write_stdin '{"task_id":"bash-4","chars":"","close_stdin":true,"yield_ms":5000}'
  say "A write to the ended task is a tool error that says why."
  wire write_stdin '{"task_id":"bash-4","chars":"1+1\n"}'
else
  say "(python3 is not installed: the REPL part is left out; as root this" \
    "script installs it)"
fi

# started: the id a run_in_background answer ($REPLY_LINE) names.
started() { field text "$REPLY_LINE" | sed -n 's/^Started \(bash-[0-9]*\)\..*/\1/p'; }

say "Wait for several tasks in one call (M-TOOLS-9) instead of polling each:" \
  "task_wait answers at the first end, with its output; the other stays unread."
tool run_in_background '{"command":"sleep 2; echo unit tests passed","label":"tests"}'
t1=$(started)
tool run_in_background '{"command":"sleep 30; echo lint clean","label":"lint"}'
t2=$(started)
tool task_wait "{\"task_ids\":[\"$t1\",\"$t2\"],\"mode\":\"any\"}"
tool task_kill "{\"task_id\":\"$t2\"}"

say "stderr in the order written (M-TOOLS-12), and text for a command's stdin (M-TOOLS-13)."
tool run_command '{"command":"echo compiling; echo \"warning: unused x\" >&2; echo linking","merge_stderr":true}'
tool run_command '{"command":"wc -l","stdin":"first line\nsecond line\n"}'

say "A big output keeps its true beginning and its end, within max_bytes (M-TOOLS-15)."
tool run_command '{"command":"seq 1 2000000 | sed \"s/^/line /\"","max_bytes":600}'

say "Closing stdin ends the session: every task's process group is stopped and the server exits 0."
exec {SRV_IN}>&-
rc=0
wait "$srv_pid" || rc=$?
printf '%s-> (stdin closed)%s\n   uvtasks-mcp exited with status %d\n' "$bold" "$off" "$rc"
exit "$rc"
