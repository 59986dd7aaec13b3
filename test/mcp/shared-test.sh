#!/usr/bin/env bash
# uvtasks-mcp is a host of the public library like any other: it is linked
# against libuvtasks.so (not the static archive), its sources include the
# public headers only (no core-, producer- or tool-private header, no src/
# on the include path), and a whole MCP session runs through that build:
# initialize, run_command, task_output, end of input (exit 0).  And the
# tool surface under it reaches the core's private header through one
# include only (src/tools/tools-int.h), the process producer's not at all.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash shared-test.sh SOURCE_ROOT
set -u
. "$(dirname "$0")/lib.sh"

MCP=${UVTASKS_MCP:-}
ROOT=${1:-}
SRC=$ROOT/src/mcp
if [ -z "$MCP" ] || [ ! -x "$MCP" ] || [ ! -d "$SRC" ]; then
  echo "usage: UVTASKS_MCP=uvtasks-mcp $0 SOURCE_ROOT" >&2
  exit 77
fi

# 1. The shared library is what the server needs at run time.
needed=$(readelf -d "$MCP" 2>&1 | grep NEEDED)
case $needed in
  *'[libuvtasks.so.'*) ok "uvtasks-mcp needs libuvtasks.so" ;;
  *) bad "uvtasks-mcp needs libuvtasks.so" "$needed" ;;
esac
resolved=$(ldd "$MCP" 2>&1 | grep 'libuvtasks.so')
case $resolved in
  *'=> /'*) ok "libuvtasks.so resolves: ${resolved#*=> }" ;;
  *) bad "libuvtasks.so resolves" "$resolved" ;;
esac

# 2. Public headers only: every quoted include of the server's sources is
# one of its own files or under include/.
private=$(grep -n '^#include "' "$SRC"/*.c "$SRC"/*.h |
  grep -v -E '#include "(uvtasks\.h|uvtasks/[a-z]+\.h|mcp\.h|taskmap\.h)"')
if [ -z "$private" ]; then
  ok "the server's sources include public headers only"
else
  bad "the server's sources include public headers only" "$private"
fi

# The tool surface: one door to the core's private header, none to the
# process producer's.
private=$(grep -n '^#include "' "$ROOT"/src/tools/*.c "$ROOT"/src/tools/*.h |
  grep -E '#include "(uvt-internal\.h|process/|\.\./)' |
  grep -v '^[^:]*/tools-int\.h:[0-9]*:#include "uvt-internal\.h"$')
if [ -z "$private" ]; then
  ok "src/tools includes a core-private header in tools-int.h only"
else
  bad "src/tools includes a core-private header in tools-int.h only" "$private"
fi

# 3. A session through this build.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
coproc SRV { exec "$MCP" --grace-ms 200 --no-guardian 2>"$tmp/stderr"; }
SRV_IN=${SRV[1]}
SRV_OUT=${SRV[0]}
srv_pid=$SRV_PID
call() { # call ID TOOL ARGS PATTERN NAME
  send "$(tool_call "$1" "$2" "$3")"
  if expect_id "$1" && [[ $REPLY_LINE == *$4* ]]; then
    ok "$5"
  else
    bad "$5" "$REPLY_LINE"
  fi
}

send '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"shared-test","version":"1"}}}'
if expect_id 1 && [[ $REPLY_LINE == *'"serverInfo"'* ]]; then
  ok "initialize"
else
  bad "initialize" "$REPLY_LINE"
fi
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
call 2 run_command '{"command":"echo shared-$((6*7))"}' 'shared-42' \
  "run_command answers with the output"
call 3 run_in_background '{"command":"printf \"a\\nb\""}' 'bash-' \
  "run_in_background names its task"
call 4 task_output '{"task_id":"bash-2","wait":true}' 'exit code: 0' \
  "task_output waits for the end"
exec {SRV_IN}>&-
wait "$srv_pid"
rc=$?
if [ "$rc" -eq 0 ]; then
  ok "end of input: exit 0"
else
  bad "end of input: exit 0" "exit $rc; $(cat "$tmp/stderr")"
fi

summary
