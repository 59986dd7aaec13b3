#!/usr/bin/env bash
# M-MCP-1, M-MCP-3, M-MCP-4 with nothing but bash and the built server:
# garbage, oversized lines, wrong types, unknown methods and tools go
# straight to stdin; each gets its error and the server keeps serving.
# Then end of input and SIGTERM each stop the server (exit 0) and its
# tasks' processes.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash malformed-test.sh
set -u

. "$(dirname "$0")/lib.sh"
require_mcp

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start_server() {
  coproc SRV { exec "$MCP" --grace-ms 200 --no-spill "$@" 2>"$tmp/stderr"; }
  SRV_IN=${SRV[1]}
  SRV_OUT=${SRV[0]}
}

status_seen=0
# Read lines until the response with id $1 ("null" for an unknown id);
# notifications in between are skipped, tasks/status ones counted.  Sets
# REPLY_LINE.  Stricter than lib.sh's (which it replaces, for check too):
# another answer first is a failure, and each line comes within 20 s.
expect_id() {
  local want=$1 line
  REPLY_LINE=
  while IFS= read -r -t 20 line <&"$SRV_OUT"; do
    case $line in
      *'"method":"notifications/tasks/status"'*)
        status_seen=$((status_seen + 1))
        continue
        ;;
      *'"method":"notifications/'*) continue ;;
      *"\"id\":$want,"* | *"\"id\":$want}"*)
        REPLY_LINE=$line
        return 0
        ;;
      *)
        REPLY_LINE=$line
        return 1
        ;;
    esac
  done
  return 1
}

# task_pid TASK ID NAME: read TASK's output (task_output, 300 ms waits,
# request id ID) until its first line, the `echo $$` of its shell, came;
# sets pid.  The check NAME passes once it came while the task runs.
# (One read of 300 ms was no promise on a busy machine: pid stayed empty.)
task_pid() {
  local task=$1 id=$2 name=$3 i
  pid=
  for i in $(seq 1 60); do
    send '{"jsonrpc":"2.0","id":'"$id"',"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"'"$task"'","timeout_ms":300}}}'
    if ! expect_id "$id"; then
      bad "$name (no answer with id $id)" "$REPLY_LINE"
      return
    fi
    pid=$(printf '%s' "$REPLY_LINE" | sed -n 's/.*"text":"\([0-9][0-9]*\)\\n.*/\1/p')
    [ -n "$pid" ] && break
  done
  if [ -n "$pid" ] && [[ $REPLY_LINE == *'[status: running]'* ]]; then
    ok "$name"
  else
    bad "$name" "$REPLY_LINE"
  fi
}

# while_working TASK ID: 2026 tasks/get of TASK (request id ID) every
# 0.1 s while it answers "working", at most 10 s; REPLY_LINE is the last
# answer.  (A fixed wait was too short on a busy machine.)
while_working() {
  local i
  for i in $(seq 1 100); do
    send '{"jsonrpc":"2.0","id":'"$2"',"method":"tasks/get","params":{"taskId":"'"$1"'",'"$TMETA"'}}'
    expect_id "$2" || break
    [[ $REPLY_LINE == *'"status":"working"'* ]] || break
    sleep 0.1
  done
}

# ------------------------------------------------------------------------
start_server

# M-MCP-8, C-37: before initialize only ping is served; the rest is an error.
check "C-37: tools/call before initialize is an error" '{"jsonrpc":"2.0","id":90,"method":"tools/call","params":{"name":"task_list"}}' 90 '"code":-32600' 'not initialized'
check "M-MCP-8: tools/list before initialize is an error" '{"jsonrpc":"2.0","id":91,"method":"tools/list"}' 91 '"code":-32600'
check "M-MCP-8: ping before initialize is served" '{"jsonrpc":"2.0","id":92,"method":"ping"}' 92 '"result":{}'
check "M-MCP-8: a batch before initialize is refused" '[{"jsonrpc":"2.0","id":93,"method":"ping"}]' null '"code":-32600' 'batches are accepted only under protocol revision 2025-03-26'
check "initialize answers the client's version" \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
  1 '"protocolVersion":"2025-06-18"' '"tools":{' '"logging":{}' '"serverInfo":{"name":"uvtasks-mcp"'
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
# M-MCP-8, C-37: a second initialize cannot switch versions.
check "C-37: a second initialize is refused" \
  '{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' \
  2 '"code":-32600' 'already initialized (protocol version 2025-06-18)'
check "M-MCP-8: a batch under 2025-06-18 is refused" '[{"jsonrpc":"2.0","id":94,"method":"ping"},{"jsonrpc":"2.0","id":95,"method":"ping"}]' null '"code":-32600' 'batches are accepted only under protocol revision 2025-03-26 (this session: 2025-06-18)'

# initialize_once VERSION PATTERN: a fresh server's answer to initialize.
initialize_once() {
  printf '{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"%s"}}\n' "$1" |
    "$MCP" 2>/dev/null
}
out=$(initialize_once 1999-01-01)
case $out in *'"protocolVersion":"2025-11-25"'*) ok "initialize with an unknown version gets the latest" ;; *) bad "initialize with an unknown version gets the latest" "$out" ;; esac
for v in 2025-03-26 2024-11-05 2025-11-25 2024-10-07; do
  out=$(initialize_once "$v")
  case $out in *"\"protocolVersion\":\"$v\""*) ok "initialize speaks $v" ;; *) bad "initialize speaks $v" "$out" ;; esac
done
check "not JSON is a parse error" 'this is not json' null '"code":-32700'
check "truncated JSON is a parse error" '{"jsonrpc":"2.0","id":4,"method":' null '"code":-32700'
check "a bare number is an invalid request" '42' null '"code":-32600'
check "jsonrpc 1.0 is an invalid request" '{"jsonrpc":"1.0","id":6,"method":"ping"}' 6 '"code":-32600'
check "an object id is an invalid request" '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}' null '"code":-32600'
check "a numeric method is an invalid request" '{"jsonrpc":"2.0","id":7,"method":5}' 7 '"code":-32600'
check "an unknown method" '{"jsonrpc":"2.0","id":8,"method":"resources/frobnicate"}' 8 '"code":-32601' 'resources/frobnicate'
check "params that are not an object" '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":[1,2]}' 9 '"code":-32602'
check "a tool name that is not a string" '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":5}}' 10 '"code":-32602'
check "an unknown tool" '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}' 11 '"code":-32602' 'Unknown tool: rm_rf'
check "a task_id that is a number" '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":7}}}' 12 '"isError":true' 'task_id must be a string'
check "wait that is a string" '{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-1","wait":"yes"}}}' 13 '"isError":true' 'wait must be true or false'
check "a negative timeout_ms" '{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-1","timeout_ms":-5}}}' 14 '"isError":true' 'timeout_ms'
check "arguments that are a string" '{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"task_list","arguments":"all"}}' 15 '"isError":true' 'arguments must be an object'
check "a missing command" '{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"run_in_background","arguments":{}}}' 16 '"isError":true' 'needs a command'
check "an unknown task" '{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"task_kill","arguments":{"task_id":"bash-99"}}}' 17 '"isError":true' 'No task bash-99'
check "a command with a NUL" '{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"a\u0000b"}}}' 18 '"isError":true' 'NUL'

# Invalid UTF-8 inside a request line: jansson refuses it; the answer is
# still valid UTF-8.
printf '{"jsonrpc":"2.0","id":19,"method":"\xff\xfe"}\n' >&"$SRV_IN"
if expect_id null && [[ $REPLY_LINE == *'"code":-32700'* ]] &&
  printf '%s' "$REPLY_LINE" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1; then
  ok "invalid UTF-8 in a request is a parse error in valid UTF-8"
else
  bad "invalid UTF-8 in a request" "$REPLY_LINE"
fi

# Oversized lines: answered once, skipped to the newline, nothing else.
big=$(head -c 5242880 /dev/zero | tr '\0' 'x')
printf '%s\n' "$big" >&"$SRV_IN"
check "a 5 MiB line is refused" '{"jsonrpc":"2.0","id":20,"method":"ping"}' null '"code":-32600' 'longer than 4194304'
if expect_id 20; then ok "the server resynchronises after a 5 MiB line"; else bad "resync after a 5 MiB line" "$REPLY_LINE"; fi
# M-MCP-3: a request too long to keep is answered under its own id when its
# first bytes name one (the client would otherwise wait for its timeout):
# a number, a string; an id that comes after the cut is null.
printf '{"jsonrpc":"2.0","id":21,"method":"ping","pad":"%s"}\n' "$big" >&"$SRV_IN"
if expect_id 21 && [[ $REPLY_LINE == *'"code":-32600'* ]]; then
  ok "a 5 MiB request is refused under its own id (21), not served"
else
  bad "a 5 MiB request is refused under its own id" "$REPLY_LINE"
fi
printf '{"method":"tools/call","params":{"id":9,"x":1}, "id" : "big-one","pad":"%s"}\n' "$big" >&"$SRV_IN"
if expect_id '"big-one"' && [[ $REPLY_LINE == *'"code":-32600'* ]]; then
  ok "... a string id too, past a nested \"id\" that is not the request's"
else
  bad "a 5 MiB request with a string id" "$REPLY_LINE"
fi
printf '{"jsonrpc":"2.0","method":"ping","pad":"%s","id":23}\n' "$big" >&"$SRV_IN"
check "... and one whose id comes after the cut is answered with a null id" '{"jsonrpc":"2.0","id":22,"method":"ping"}' null '"code":-32600'
if expect_id 22; then ok "the request after it is served"; else bad "the request after a 5 MiB request" "$REPLY_LINE"; fi
unset big

# Notifications are never answered: the next answer is the ping's.
send '{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}'
send ''
send '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}'
check "unknown notifications and blank lines get no answer" '{"jsonrpc":"2.0","id":23,"method":"ping"}' 23 '"result":{}'
check "logging/setLevel" '{"jsonrpc":"2.0","id":24,"method":"logging/setLevel","params":{"level":"debug"}}' 24 '"result":{}'
check "logging/setLevel with a bad level" '{"jsonrpc":"2.0","id":25,"method":"logging/setLevel","params":{"level":"loud"}}' 25 '"code":-32602'
check "tools/list" '{"jsonrpc":"2.0","id":26,"method":"tools/list"}' 26 '"name":"run_in_background"' '"name":"task_output"' '"name":"task_list"' '"name":"task_kill"' '"inputSchema"'

# Invalid UTF-8 in command output becomes U+FFFD in valid UTF-8 text (on
# the wire as \ufffd: P-OUT-7 keeps every line ASCII).
check "run_in_background" '{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"printf '"'"'\\xff\\xfeok'"'"'"}}}' 27 'Started bash-1.'
check "invalid UTF-8 output is repaired" '{"jsonrpc":"2.0","id":28,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-1","wait":true,"timeout_ms":10000}}}' \
  28 '\uFFFD\uFFFDok\n[status: completed, exit code: 0]'
if printf '%s' "$REPLY_LINE" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1; then
  ok "the answer is valid UTF-8"
else
  bad "the answer is valid UTF-8" "$REPLY_LINE"
fi

# M-MCP-4: end of input stops the server (exit 0) and every process group.
check "a long task" '{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo $$; exec sleep 100"}}}' 29 'Started bash-2.'
task_pid bash-2 30 "its pid"
# A call still waiting when the input ends is dropped, not waited out.
send '{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-2","wait":true,"timeout_ms":600000}}}'
srv=$SRV_PID
exec {SRV_IN}>&-
rc=0
wait "$srv" || rc=$?
if [ "$rc" = 0 ]; then ok "end of input: exit status 0"; else bad "end of input: exit status $rc"; fi
if [ -n "$pid" ] && ! alive "$pid"; then
  ok "end of input: the task's process $pid is gone"
else
  bad "end of input: the task's process '$pid' is gone"
fi

# SIGTERM does the same.
start_server
check "initialize again" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' 1 '"result"'
check "a long task again" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo $$; exec sleep 100"}}}' 2 'Started bash-1.'
task_pid bash-1 3 "its pid again"
srv=$SRV_PID
kill -TERM "$srv"
rc=0
wait "$srv" || rc=$?
if [ "$rc" = 0 ]; then ok "SIGTERM: exit status 0"; else bad "SIGTERM: exit status $rc"; fi
if [ -n "$pid" ] && ! alive "$pid"; then
  ok "SIGTERM: the task's process $pid is gone"
else
  bad "SIGTERM: the task's process '$pid' is gone"
fi

# SIGINT too.
start_server
check "initialize for SIGINT" '{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' 9 '"result"'
check "a long task for SIGINT" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo $$; exec sleep 100"}}}' 1 'Started bash-1.'
task_pid bash-1 2 "its pid for SIGINT"
srv=$SRV_PID
kill -INT "$srv"
rc=0
wait "$srv" || rc=$?
if [ "$rc" = 0 ]; then ok "SIGINT: exit status 0"; else bad "SIGINT: exit status $rc"; fi
if [ -n "$pid" ] && ! alive "$pid"; then
  ok "SIGINT: the task's process $pid is gone"
else
  bad "SIGINT: the task's process '$pid' is gone"
fi

# MCP Tasks (2025-11-25): bad input to tasks/* and to task-augmented calls
# gets the protocol's error and the server keeps serving.
start_server
check "tasks: initialize 2025-11-25 declares tasks" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' \
  1 '"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}'
check "tasks: a background task" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"true"}}}' 2 'Started bash-1.'
check "tasks: a task-augmented run_command" '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo t"},"task":{"ttl":60000}}}' \
  3 '"result":{"task":{"taskId":"bash-2","status":"working","ttl":60000,'
check "tasks: its result" '{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"bash-2"}}' \
  4 '"text":"t\n[status: completed, exit code: 0]"' '"isError":false' '"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"bash-2"}}'
check "tasks/get without taskId" '{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{}}' 5 '"code":-32602' 'taskId must be a string'
check "tasks/get without params" '{"jsonrpc":"2.0","id":6,"method":"tasks/get"}' 6 '"code":-32602'
check "tasks/get with a numeric taskId" '{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":2}}' 7 '"code":-32602'
check "tasks/get of an unknown task" '{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"bash-99"}}' 8 '"code":-32602' 'Task not found'
check "tasks/get of a background task (not an MCP task)" '{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"bash-1"}}' 9 '"code":-32602' 'Task not found'
check "tasks/result of a background task" '{"jsonrpc":"2.0","id":10,"method":"tasks/result","params":{"taskId":"bash-1"}}' 10 '"code":-32602'
check "tasks/cancel of a background task" '{"jsonrpc":"2.0","id":11,"method":"tasks/cancel","params":{"taskId":"bash-1"}}' 11 '"code":-32602'
check "tasks/cancel of a completed task" '{"jsonrpc":"2.0","id":12,"method":"tasks/cancel","params":{"taskId":"bash-2"}}' 12 '"code":-32602' "already in terminal status 'completed'"
check "tasks/list with a numeric cursor" '{"jsonrpc":"2.0","id":13,"method":"tasks/list","params":{"cursor":5}}' 13 '"code":-32602'
check "tasks/list with a made-up cursor" '{"jsonrpc":"2.0","id":14,"method":"tasks/list","params":{"cursor":"bogus"}}' 14 '"code":-32602' 'invalid cursor'
check "tasks/list shows only the MCP task" '{"jsonrpc":"2.0","id":15,"method":"tasks/list"}' 15 '"result":{"tasks":[{"taskId":"bash-2","status":"completed",'
check "a forbidden tool as a task" '{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"task_list","task":{}}}' 16 '"code":-32601' 'taskSupport is forbidden'
check "run_in_background as a task" '{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"true"},"task":{}}}' 17 '"code":-32601'
check "a task that is not an object" '{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"},"task":"yes"}}' 18 '"code":-32602' 'task must be an object'
check "a ttl that is a string" '{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"},"task":{"ttl":"soon"}}}' 19 '"code":-32602' 'task.ttl must be a number'
check "a negative ttl" '{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"},"task":{"ttl":-1}}}' 20 '"code":-32602'
check "a null ttl" '{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"},"task":{"ttl":null}}}' 21 '"code":-32602'
check "a task without a command" '{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"run_command","arguments":{},"task":{}}}' 22 '"code":-32602' 'needs a command'
check "a task with a wrong argument type" '{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"run_command","arguments":{"command":7},"task":{}}}' 23 '"code":-32602' 'command must be a string'
check "a task whose cwd does not exist" '{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true","cwd":"/no/such/dir"},"task":{}}}' 24 '"code":-32602' 'Not started'
check "run_command with a bad timeout_ms" '{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true","timeout_ms":0}}}' 25 '"isError":true' 'timeout_ms'
check "task_kill on an MCP task is a tool error" '{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"task_kill","arguments":{"task_id":"bash-2"}}}' 26 '"isError":true' 'is an MCP task'
check "an unknown tasks/ method" '{"jsonrpc":"2.0","id":27,"method":"tasks/delete","params":{"taskId":"bash-2"}}' 27 '"code":-32601'
# A tasks/result given up with notifications/cancelled is never answered;
# the task goes on and can be cancelled.
check "tasks: a long task" '{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"exec sleep 30"},"task":{}}}' 40 '"taskId":"bash-3","status":"working"'
send '{"jsonrpc":"2.0","id":41,"method":"tasks/result","params":{"taskId":"bash-3"}}'
send '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41}}'
check "tasks: cancel it" '{"jsonrpc":"2.0","id":42,"method":"tasks/cancel","params":{"taskId":"bash-3"}}' 42 '"status":"cancelled"'
# Killed either way: by SIGTERM, or, when the cancel beat the spawner
# thread (P-SPAWN-6, a loaded machine), "killed before it started".
check "tasks: its result, asked again" '{"jsonrpc":"2.0","id":43,"method":"tasks/result","params":{"taskId":"bash-3"}}' 43 '[status: killed, ' '"isError":true'
check "tasks: the given-up tasks/result got no answer" '{"jsonrpc":"2.0","id":28,"method":"ping"}' 28 '"result":{}'
srv=$SRV_PID
exec {SRV_IN}>&-
rc=0
wait "$srv" || rc=$?
if [ "$rc" = 0 ]; then ok "tasks: end of input, exit status 0"; else bad "tasks: end of input, exit status $rc"; fi

start_server
check "tasks: initialize 2025-06-18 has no tasks" '{"jsonrpc":"2.0","id":29,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' 29 '"capabilities":{"tools":{"listChanged":false},"logging":{}}'
check "tasks: without Tasks, tasks/get does not exist" '{"jsonrpc":"2.0","id":30,"method":"tasks/get","params":{"taskId":"bash-2"}}' 30 '"code":-32601'
check "tasks: without Tasks, a task field is ignored" '{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo plain"},"task":"anything"}}' 31 '"text":"plain\n[status: completed, exit code: 0]"'
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true

# --keep-finished: finished tasks whose end was seen are forgotten beyond
# the count (R-FORGET-1), the oldest first.
start_server --keep-finished 1
check "keep-finished: initialize" '{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' 99 '"result"'
check "keep-finished: a first task" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo a"}}}' 1 'Started bash-1.'
check "keep-finished: its end is seen" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-1","wait":true}}}' 2 'a\n[status: completed, exit code: 0]'
check "keep-finished: a second task" '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo b"}}}' 3 'Started bash-2.'
check "keep-finished: its end is seen" '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-2","wait":true}}}' 4 'b\n[status: completed, exit code: 0]'
check "keep-finished: the older one is forgotten" '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"task_list"}}' 5 '1 task (id, kind, status, label):\nbash-2  bash  completed (exit code: 0)  echo b"'
check "keep-finished: lookups say so" '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-1"}}}' 6 '"isError":true' 'No task bash-1.'
# A finished task whose group still has a member is kept, so that the end
# of the session still stops that member (P-KILL-4).
check "keep-finished: a task leaving a survivor" '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"sleep 30 & echo $!"}}}' 7 'Started bash-3.'
check "keep-finished: its end is seen" '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-3","wait":true}}}' 8 '[status: completed, exit code: 0; 1 process still running (their output is still read); task_kill bash-3 stops it]'
# (After any notices: the result may begin with them, M-MCP-11.)
pid=$(printf '%s' "$REPLY_LINE" | grep -o '[0-9][0-9]*\\n\[status' | sed 's/\\.*//')
check "keep-finished: one more task" '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo c"}}}' 9 'Started bash-4.'
check "keep-finished: its end is seen" '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-4","wait":true}}}' 10 'c\n[status: completed, exit code: 0]'
check "keep-finished: the task with a survivor stays" '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"task_list"}}' 11 'bash-3  bash  completed' 'bash-4  bash  completed'
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true
if [ -n "$pid" ] && ! alive "$pid"; then
  ok "keep-finished: end of input stops the survivor $pid"
else
  bad "keep-finished: end of input stops the survivor '$pid'"
fi

# P-LEFT-1: retention keeps a task whose SESSION still has members, even
# when they are in a process group of their own (`set -m` jobs, GNU
# timeout), and every look shows them.
start_server --keep-finished 1
check "left: initialize" '{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' 99 '"result"'
check "left: a set -m job" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"set -m; sleep 300 & echo $!"}}}' 1 'Started bash-1.'
check "left: its end names the job" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-1","wait":true}}}' 2 '[status: completed, exit code: 0; 1 process still running (their output is still read); task_kill bash-1 stops it]'
pid1=$(printf '%s' "$REPLY_LINE" | sed -n 's/.*"text":"\([0-9][0-9]*\)\\n.*/\1/p')
check "left: nohup timeout" '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"nohup timeout 3600 sleep 999 >/dev/null 2>&1 & p=$!; while [ -z \"$(cat /proc/$p/task/$p/children 2>/dev/null)\" ]; do sleep 0.01; done; echo $p"}}}' 3 'Started bash-2.'
check "left: its end names timeout and its child" '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-2","wait":true}}}' 4 '[status: completed, exit code: 0; 2 processes still running; task_kill bash-2 stops them]'
pid2=$(printf '%s' "$REPLY_LINE" | sed -n 's/.*"text":"\([0-9][0-9]*\)\\n.*/\1/p')
for i in 5 7 9; do
  check "left: another task" '{"jsonrpc":"2.0","id":'"$i"',"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo x'"$i"'"}}}' "$i" 'x'"$i"'\n[status: completed, exit code: 0]'
  check "left: and another" '{"jsonrpc":"2.0","id":'"$((i + 1))"',"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"}}}' "$((i + 1))" '[status: completed, exit code: 0]'
done
check "left: both are kept and listed with their count" '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"task_list"}}' 11 'bash-1  bash  completed (exit code: 0; 1 process still running (their output is still read); task_kill bash-1 stops it)' 'bash-2  bash  completed (exit code: 0; 2 processes still running; task_kill bash-2 stops them)'
if [ -n "$pid1" ] && alive "$pid1" && [ -n "$pid2" ] && alive "$pid2"; then
  ok "left: the set -m job $pid1 and timeout $pid2 still run"
else
  bad "left: the set -m job '$pid1' and timeout '$pid2' still run"
fi
check "left: task_kill stops them and says so" '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"task_kill","arguments":{"task_id":"bash-2"}}}' 12 'bash-2 had already ended; stopping the 2 processes it left running.'
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true
if [ -n "$pid1" ] && ! alive "$pid1" && [ -n "$pid2" ] && ! alive "$pid2"; then
  ok "left: end of input stops what the tasks left"
else
  bad "left: end of input stops what the tasks left ('$pid1' '$pid2')"
fi

# P-LEFT-1: processes left by ended tasks count toward --max-tasks.
start_server --max-tasks 2
check "max-tasks: initialize" '{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' 99 '"result"'
check "max-tasks: a task that leaves a job" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 300 & echo a"}}}' 1 'a\n[status: completed, exit code: 0; 1 process still running (their output is still read); task_kill bash-1 stops it]'
check "max-tasks: another" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 300 & echo b"}}}' 2 'b\n[status: completed, exit code: 0; 1 process still running (their output is still read); task_kill bash-2 stops it]'
check "max-tasks: the third start is refused" '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"echo c"}}}' 3 '"isError":true' 'Not started: you already have the most running tasks allowed (2, counting ended tasks whose processes still run)'
check "max-tasks: a kill of the first stops its job" '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"task_kill","arguments":{"task_id":"bash-1"}}}' 4 'stopping the 1 process it left running'
started=0
for i in $(seq 5 60); do
  send '{"jsonrpc":"2.0","id":'"$i"',"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo d"}}}'
  expect_id "$i" || break
  case $REPLY_LINE in *'d\n[status: completed, exit code: 0]'*) started=1; break ;; esac
  sleep 0.1
done
if [ "$started" = 1 ]; then ok "max-tasks: then a start is taken"; else bad "max-tasks: then a start is taken" "$REPLY_LINE"; fi
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true

# M-MCP-8, C-37: a batch under 2025-03-26 gets one array of answers; the
# sibling with a tools/call in it waits for the call.
start_server
check "C-37: initialize 2025-03-26" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}' 1 '"protocolVersion":"2025-03-26"'
send '[{"jsonrpc":"2.0","id":40,"method":"ping"},{"jsonrpc":"2.0","id":41,"method":"ping"}]'
IFS= read -r -t 20 line <&"$SRV_OUT"
if [ "$line" = '[{"jsonrpc":"2.0","id":40,"result":{}},{"jsonrpc":"2.0","id":41,"result":{}}]' ]; then ok "C-37: a batch of two pings gets an array of two results"; else bad "C-37: a batch of two pings" "$line"; fi
send '[{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 0.2; echo late"}}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":43,"method":"nope"},7]'
IFS= read -r -t 20 line <&"$SRV_OUT"
case $line in
  '[{"jsonrpc":"2.0","id":43,"error":{"code":-32601'*'{"jsonrpc":"2.0","id":null,"error":{"code":-32600'*'"id":42,"result":{"content":[{"type":"text","text":"late\n[status: completed, exit code: 0]"}]'*) ok "M-MCP-8: a batch's answers wait for its tool call and come as one array" ;;
  *) bad "M-MCP-8: a batch with a tool call" "$line" ;;
esac
send '[]'
if expect_id null && [[ $REPLY_LINE == *'"code":-32600'* ]]; then ok "an empty batch is an invalid request"; else bad "an empty batch" "$REPLY_LINE"; fi
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true

# M-MCP-9: the 2026-07-28 era on the same kind of pipe, request by request.
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
TMETA='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'
start_server
check "2026: server/discover without _meta is -32602" '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}' 1 '"code":-32602'
check "2026: _meta without the client capabilities is -32602" '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}' 2 '"code":-32602' 'clientCapabilities'
check "2026: _meta without the protocol version is -32602" '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}' 3 '"code":-32602' 'protocolVersion'
check "2026: another version is -32022 with requested and supported" '{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}' 4 '"code":-32022' '"data":{"requested":"2025-11-25","supported":["2026-07-28"]}'
check "2026: server/discover" '{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{'"$META"'}}' 5 '"supportedVersions":["2026-07-28"]' '"extensions":{"io.modelcontextprotocol/tasks":{}}' '"ttlMs":' '"cacheScope":"public"' '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"uvtasks-mcp"' '"resultType":"complete"'
check "2026: tools/list has cache hints, resultType, no execution" '{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{'"$META"'}}' 6 '"ttlMs":3600000' '"cacheScope":"public"' '"resultType":"complete"'
[[ $REPLY_LINE == *'"execution"'* ]] && bad "2026: tools/list has no execution" "$REPLY_LINE" || ok "2026: tools/list has no execution"
for m in initialize ping logging/setLevel tasks/result tasks/list resources/list; do
  check "2026: $m is -32601" '{"jsonrpc":"2.0","id":7,"method":"'"$m"'","params":{'"$META"'}}' 7 '"code":-32601'
done
check "2026: a plain tools/call result has resultType" '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo plain"},'"$META"'}}' 8 '"text":"plain\n[status: completed, exit code: 0]"' '"resultType":"complete"'
check "2026: without the extension run_command stays plain (a legacy task field means nothing)" '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo p2"},"task":{"ttl":5},'"$META"'}}' 9 '"resultType":"complete"' 'p2'
check "2026: tasks/get without the extension is -32021" '{"jsonrpc":"2.0","id":10,"method":"tasks/get","params":{"taskId":"bash-1",'"$META"'}}' 10 '"code":-32021' '"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}'
check "2026: run_command with the extension is a flat task" '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo tasked; exit 4"},'"$TMETA"'}}' 11 '"result":{"taskId":"bash-3","status":"working","ttlMs":3600000,' '"pollIntervalMs":1000' '"resultType":"task"'
[[ $REPLY_LINE == *'"task":'* || $REPLY_LINE == *'"ttl":'* ]] && bad "2026: no nested task, no ttl" "$REPLY_LINE" || ok "2026: no nested task, no v1 ttl"
while_working bash-3 12
check "2026: tasks/get carries the result once completed" '{"jsonrpc":"2.0","id":12,"method":"tasks/get","params":{"taskId":"bash-3",'"$TMETA"'}}' 12 '"status":"completed"' '"result":{"content":[{"type":"text","text":"tasked\n[status: completed, exit code: 4]"}],"isError":false,"resultType":"complete"}'
[[ $REPLY_LINE == *'related-task'* ]] && bad "2026: no related-task _meta" "$REPLY_LINE" || ok "2026: the inlined result has no related-task _meta"
check "2026: tasks/cancel of a finished task is acknowledged" '{"jsonrpc":"2.0","id":13,"method":"tasks/cancel","params":{"taskId":"bash-3",'"$TMETA"'}}' 13 '"result":{"resultType":"complete"}'
check "2026: tasks/get of an unknown task is -32602" '{"jsonrpc":"2.0","id":14,"method":"tasks/get","params":{"taskId":"bash-99",'"$TMETA"'}}' 14 '"code":-32602'
check "2026: tasks/update of a known task is acknowledged" '{"jsonrpc":"2.0","id":15,"method":"tasks/update","params":{"taskId":"bash-3","inputResponses":{},'"$TMETA"'}}' 15 '"result":{"resultType":"complete"}'
check "2026: task_output on a 2026 MCP task names the era's methods" '{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-3"},'"$TMETA"'}}' 30 '"isError":true' 'is an MCP task; use tasks/get (its result comes with it) or tasks/cancel.'
[[ $REPLY_LINE == *'tasks/result'* ]] && bad "2026: no tasks/result in the hint (the era has none)" "$REPLY_LINE" || ok "2026: no tasks/result in the hint (the era has none)"
check "2026: a long task" '{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"exec sleep 30"},'"$TMETA"'}}' 16 '"taskId":"bash-4"'
check "2026: tasks/cancel stops it" '{"jsonrpc":"2.0","id":17,"method":"tasks/cancel","params":{"taskId":"bash-4",'"$TMETA"'}}' 17 '"result":{"resultType":"complete"}'
check "2026: and it reads cancelled" '{"jsonrpc":"2.0","id":18,"method":"tasks/get","params":{"taskId":"bash-4",'"$TMETA"'}}' 18 '"status":"cancelled"'
check "2026: a 2026 task is not a 2025 session's" '{"jsonrpc":"2.0","id":19,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' 19 '"tasks":{'
check "2026: ... so 2025 tasks/get does not see it" '{"jsonrpc":"2.0","id":20,"method":"tasks/get","params":{"taskId":"bash-3"}}' 20 '"code":-32602'
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true

# M-MCP-8: one notifications/tasks/status per transition: a tasks/cancel
# gives one "cancelled", not one for stopping and one for the end.
start_server
status_seen=0
check "status: initialize 2025-11-25" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' 1 '"tasks":{'
check "status: a task" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"exec sleep 30"},"task":{}}}' 2 '"taskId":"bash-1"'
check "status: tasks/cancel" '{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"bash-1"}}' 3 '"status":"cancelled"'
# Killed by SIGTERM or before it started (P-SPAWN-6), as above.
check "status: its result" '{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"bash-1"}}' 4 '[status: killed, '
check "status: a ping after it" '{"jsonrpc":"2.0","id":5,"method":"ping"}' 5 '"result":{}'
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true
if [ "$status_seen" = 1 ]; then ok "M-MCP-8: one status notification for the cancel"; else bad "M-MCP-8: one status notification for the cancel, got $status_seen"; fi

# M-TOOLS-6: a task's result is the command's end: a run_command of the
# 2026 Tasks extension never yields, whatever --yield-ms says.  M-MCP-8:
# NUL bytes of output travel as \u0000 on the wire.  M-MCP-3: per-call
# yield_ms and max_bytes as JSON numbers (integers, and reals without a
# fraction) on the wire; anything else is a tool error.  The max_bytes
# checks pass yield_ms 0: they want the whole output, and `seq` need not
# end within the server's 200 ms yield on a slow machine.
start_server --yield-ms 200
check "yield: a 2026 task-augmented run_command" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo early; sleep 1; echo late"},'"$TMETA"'}}' 1 '"taskId":"bash-1"' '"resultType":"task"'
while_working bash-1 2
case $REPLY_LINE in
  *'"status":"completed"'*'"text":"early\nlate\n[status: completed, exit code: 0]"'*) ok "yield: the 2026 task's result is the command's end, not its yield" ;;
  *) bad "yield: the 2026 task's result is the command's end, not its yield" "$REPLY_LINE" ;;
esac
check "M-MCP-8: a 2026 task's result carries NULs as \\u0000" '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"printf '"'"'t\\000k\\n'"'"'"},'"$TMETA"'}}' 10 '"taskId":"bash-2"'
for _ in $(seq 1 100); do
  send '{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"bash-2",'"$TMETA"'}}'
  expect_id 11 || break
  [[ $REPLY_LINE == *'"status":"working"'* ]] || break
  sleep 0.1
done
case $REPLY_LINE in
  *'"text":"t\u0000k\n[status: completed, exit code: 0]"'*) ok "M-MCP-8: ... in tasks/get" ;;
  *) bad "M-MCP-8: ... in tasks/get" "$REPLY_LINE" ;;
esac
check "M-MCP-8: a NUL in output is \\u0000 in the JSON" '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"printf '"'"'a\\000b\\n'"'"'","yield_ms":0},'"$META"'}}' \
  12 '"text":"a\u0000b\n[status: completed, exit code: 0]"'
check "yield: a plain 2026 run_command yields" '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"exec sleep 30"},'"$META"'}}' 3 'it goes on in the background as bash-4' '[status: running]"' '"isError":false'
check "yield_ms 0.0 runs to the end" '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 0.5; echo whole","yield_ms":0.0},'"$META"'}}' 4 '"text":"whole\n[status: completed, exit code: 0]"'
check "yield_ms 1e30 is a yield longer than any run" '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 0.5; echo long","yield_ms":1e30},'"$META"'}}' 5 '"text":"long\n[status: completed, exit code: 0]"'
check "yield_ms -0.5 is a tool error" '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true","yield_ms":-0.5},'"$META"'}}' 6 '"isError":true' 'yield_ms must be a whole number of milliseconds, at least 0.'
check "max_bytes 3e2 is 300" '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"seq 1 2000","max_bytes":3e2,"yield_ms":0},'"$META"'}}' 7 '"text":"1\n2\n' 'lines) left out ...]\n' '\n2000\n[status: completed, exit code: 0]"'
check "max_bytes 1e30 shows everything" '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"seq 1 2000","max_bytes":1e30,"yield_ms":0},'"$META"'}}' 8 '\n1000\n1001\n'
# M-MCP-3: JavaScript writes numbers from 2^63 up to 1e21 as integer
# literals (JSON.stringify(1e20) is "100000000000000000000"), beyond what
# a JSON parser takes as an integer: such a request is answered like 1e30,
# with its own id, not dropped as a parse error with id null.
check "yield_ms 100000000000000000000 (JavaScript's 1e20) is answered" '{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 0.5; echo big","yield_ms":100000000000000000000},'"$META"'}}' 13 '"text":"big\n[status: completed, exit code: 0]"'
check "max_bytes 18446744073709551616 is answered" '{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"seq 1 2000","max_bytes":18446744073709551616,"yield_ms":0},'"$META"'}}' 14 '\n1000\n1001\n'
check "timeout_ms -100000000000000000000 is a tool error" '{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-4","timeout_ms":-100000000000000000000},'"$META"'}}' 15 '"isError":true' 'timeout_ms must be a whole number'
check "max_bytes 0.5 is a tool error" '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-4","max_bytes":0.5},'"$META"'}}' 9 '"isError":true' 'task_output: max_bytes must be a whole number of bytes, at least 1.'
# M-TOOLS-16: an argument a tool does not take is an error that names
# what it takes (tail_lines was ignored, and the whole output came back);
# the ones hosts add to every call (wait_for_previous) are let through;
# head_lines, tail_lines and match are whole numbers and a string.
check "M-TOOLS-16: an unknown argument is a tool error" '{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo never","tail_line":5},'"$META"'}}' 16 '"isError":true' 'run_command does not take the argument \"tail_line\"; it takes command, cwd,' '!never'
check "M-TOOLS-16: wait_for_previous is let through" '{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"task_list","arguments":{"wait_for_previous":true},'"$META"'}}' 17 '"isError":false'
check "M-TOOLS-16: tail_lines through the server" '{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"seq 1 100","tail_lines":2,"yield_ms":0},'"$META"'}}' 18 '"text":"[... 98 lines left out ...]\n99\n100\n[status: completed, exit code: 0]"'
check "M-TOOLS-16: head_lines 1.5 is a tool error" '{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true","head_lines":1.5},'"$META"'}}' 19 '"isError":true' 'head_lines must be a whole number of lines, at least 1.'
check "M-TOOLS-16: match must be a string" '{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"bash-4","match":5},'"$META"'}}' 20 '"isError":true' 'match must be a string'
srv=$SRV_PID
exec {SRV_IN}>&-
wait "$srv" || true

# M-MCP-8: a client that stops reading: the server stops reading its
# requests (the writer blocks) instead of queueing answers without bound;
# once the client reads again, every answer arrives.
mkfifo "$tmp/qin" "$tmp/qout"
exec {QO}<>"$tmp/qout" # held open, not read
"$MCP" <"$tmp/qin" >"$tmp/qout" 2>/dev/null &
qsrv=$!
{ printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}'
  yes '{"jsonrpc":"2.0","id":1,"method":"ping"}' | head -n 300000; } >"$tmp/qin" &
qwriter=$!
sleep 2
if kill -0 "$qwriter" 2>/dev/null; then ok "M-MCP-8: with nobody reading, the server stops reading requests"; else bad "M-MCP-8: the server read every request with nobody reading its answers"; fi
rss=$(awk '/VmRSS/ {print $2}' "/proc/$qsrv/status")
n=$(head -n 300001 <&"$QO" | wc -l)
if [ "$n" = 300001 ]; then ok "M-MCP-8: once read, all 300001 answers arrive (server RSS while blocked: ${rss} kB)"; else bad "M-MCP-8: answers after the client reads again" "$n"; fi
wait "$qwriter"
wait "$qsrv" || true
exec {QO}<&-

# stdin and stdout may be regular files; a last line without its newline
# still counts.
printf '%s\n%s\n%s' '{"jsonrpc":"2.0","id":1,"method":"ping"}' \
  '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_list"}}' >"$tmp/in.jsonl"
rc=0
"$MCP" <"$tmp/in.jsonl" >"$tmp/out.jsonl" 2>/dev/null || rc=$?
if [ "$rc" = 0 ] && grep -q '"id":1,"result":{}' "$tmp/out.jsonl" &&
  grep -q '"id":2,"result":{"content":\[{"type":"text","text":"No background tasks."}\]' "$tmp/out.jsonl"; then
  ok "files as stdin and stdout"
else
  bad "files as stdin and stdout (exit $rc)" "$(cat "$tmp/out.jsonl")"
fi

# Bad option values: exit 2 with a line naming the option, never a value
# quietly changed (--max-lines under its floor of 10 was raised to 10,
# --max-bytes under 256 to 256).
for opt in "--max-lines 5" "--max-lines 0" "--max-lines x" "--grace-ms -1" \
  "--max-bytes 1e3" "--max-bytes 255" "--sandbox foo" "--max-tasks" ; do
  # shellcheck disable=SC2086
  "$MCP" $opt </dev/null >/dev/null 2>"$tmp/opt.err"
  rc=$?
  if [ "$rc" = 2 ] && grep -q "bad value for ${opt%% *}" "$tmp/opt.err"; then
    ok "option $opt: exit 2, named"
  else
    bad "option $opt: exit 2, named" "exit $rc: $(head -c 300 "$tmp/opt.err")"
  fi
done
# A spill directory that cannot be used: the line names the option.
for d in /proc/nope "$tmp/opt.err"; do
  "$MCP" --spill-dir "$d" </dev/null >/dev/null 2>"$tmp/spill.err"
  rc=$?
  if [ "$rc" != 0 ] && grep -q -- "--spill-dir $d" "$tmp/spill.err"; then
    ok "option --spill-dir $d: refused, named"
  else
    bad "option --spill-dir $d: refused, named" "exit $rc: $(head -c 300 "$tmp/spill.err")"
  fi
done
"$MCP" --max-lines 10 --max-bytes 256 </dev/null >/dev/null 2>"$tmp/opt.err"
rc=$?
if [ "$rc" = 0 ]; then
  ok "options --max-lines 10 --max-bytes 256 (the floors) are taken"
else
  bad "options --max-lines 10 --max-bytes 256 (the floors) are taken" "exit $rc: $(head -c 300 "$tmp/opt.err")"
fi

summary
