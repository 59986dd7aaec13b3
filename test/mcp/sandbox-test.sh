#!/usr/bin/env bash
# S-4 with nothing but bash and the built server: `--sandbox workspace`
# and `--sandbox read-only` put every command in the sandbox; the tool
# descriptions name the profile; a refused write and a refused connection
# read as such in run_command's result; --allow-net gives the network
# back; a sandbox that cannot be made (UVTASKS_BWRAP pointing nowhere,
# S-3) is a tool error and nothing runs; `--writable` without `--sandbox`
# is refused.  Skips (77) without bwrap.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash sandbox-test.sh
set -u

. "$(dirname "$0")/lib.sh"
GOT_MAX=600
require_mcp
command -v bwrap >/dev/null 2>&1 || { echo "no bwrap: skipped"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipped"; exit 77; }

tmp=$(mktemp -d /tmp/uvt-mcp-sbx-XXXXXX)
outside=$(mktemp -d /var/tmp/uvt-mcp-sbx-out-XXXXXX)
chmod 777 "$outside"
LPID=
cleanup() {
  [ -n "$LPID" ] && kill "$LPID" 2>/dev/null
  rm -rf "$tmp" "$outside"
}
trap cleanup EXIT

# A server on 127.0.0.1 that accepts and holds connections.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' >"$tmp/port" &
LPID=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
PORT=$(cat "$tmp/port")

start_server() {
  coproc SRV { exec "$MCP" --grace-ms 200 --no-guardian "$@" 2>"$tmp/stderr"; }
  SRV_IN=${SRV[1]}
  SRV_OUT=${SRV[0]}
  SRV_PID=$SRV_PID
}
init() {
  check "initialize" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' 1 '"protocolVersion"'
  send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
}
stop_server() {
  exec {SRV_IN}>&-
  wait "$SRV_PID" 2>/dev/null
}
run() { # run ID COMMAND (JSON-escaped)
  tool_call "$1" run_command "{\"command\":\"$2\"}"
}

# ---- workspace, no network ---------------------------------------------
start_server --sandbox workspace --cwd "$tmp"
init
check "S-4, S-5: the descriptions name the workspace profile and the workspace" \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2 \
  'SANDBOX: every command runs in a sandbox (profile workspace)' \
  "the workspace $tmp" 'a cwd argument must lie inside it' 'There is no network at all'
check "S-4: a write in the workspace works" "$(run 3 'echo hi > in.txt && cat in.txt')" 3 \
  'hi' 'exit code: 0'
[ -f "$tmp/in.txt" ] && ok "S-4: the file is there" || bad "S-4: the file is there"
check "S-4: a refused write reads as such" "$(run 4 "echo x > $outside/escaped.txt")" 4 \
  'Read-only file system' 'exit code: 1'
[ ! -e "$outside/escaped.txt" ] && ok "S-4: nothing was written outside" || bad "S-4: nothing was written outside"
check "S-4: a refused connection reads as such" \
  "$(run 5 "exec 3<>/dev/tcp/127.0.0.1/$PORT && echo connected")" 5 \
  'Connection refused' '!connected' \
  'this command runs in a sandbox without network'
check "M-TOOLS-18: a failed name lookup says the network is off" \
  "$(run 6 "python3 -c 'import socket; socket.getaddrinfo(\\\"example.com\\\", 80)'")" 6 \
  'this command runs in a sandbox without network'
check "M-TOOLS-18: output without a failed connection has no such note" \
  "$(run 7 "echo fine")" 7 '!without network'
stop_server

# ---- S-5: the workspace is the server's, not the model's ---------------
# A tool's cwd chooses where a command starts, never what it may write:
# outside the workspace and the --writable paths it is a tool error that
# names them, and nothing runs (the fault: it became the writable bind).
wsx=$(mktemp -d /var/tmp/uvt-mcp-sbx-wsx-XXXXXX)
mkdir -p "$wsx/w" "$tmp/sub"
ln -s "$outside" "$tmp/out-link"
ln -s out-link "$tmp/chain1"
ln -s sub "$tmp/in-link"
start_server --sandbox workspace --cwd "$tmp" --writable "$wsx/w"
init
cwd_call() { # cwd_call ID CWD COMMAND
  tool_call "$1" run_command "{\"command\":\"$3\",\"cwd\":\"$2\"}"
}
n=10
for cwd in "$outside" / .. "$tmp/.." "$tmp/out-link" "$tmp/chain1" "$wsx" "$wsx/w/.."; do
  check "S-5: cwd $cwd is refused, naming the workspace" \
    "$(cwd_call $n "$cwd" 'echo x > f-$$ && echo wrote')" $n \
    '"isError":true' 'lies outside this server' "the workspace $tmp" "$wsx/w" 'nothing was run' '!wrote'
  n=$((n + 1))
done
[ -z "$(ls -A "$outside")" ] && ! ls "$wsx"/f-* /f-* >/dev/null 2>&1 &&
  ok "S-5: nothing was written outside" || bad "S-5: nothing was written outside" "$(ls -A "$outside" "$wsx")"
check "S-5: a cwd that does not exist" "$(cwd_call 30 "$tmp/nope" 'echo x')" 30 \
  '"isError":true' 'no such directory'
check "S-5: a cwd inside the workspace runs there" \
  "$(cwd_call 31 "$tmp/sub" 'echo x > in-sub && echo x > ../from-sub && echo wrote')" 31 'wrote' 'exit code: 0'
check "S-5: a link in the workspace to a directory of it" \
  "$(cwd_call 32 "$tmp/in-link" 'pwd; echo x > via-link && echo wrote')" 32 'wrote' "$tmp/sub"
check "S-5: a --writable directory is a cwd too" \
  "$(cwd_call 33 "$wsx/w" 'echo x > in-w && echo wrote')" 33 'wrote'
[ -e "$tmp/sub/in-sub" ] && [ -e "$tmp/from-sub" ] && [ -e "$tmp/sub/via-link" ] && [ -e "$wsx/w/in-w" ] &&
  ok "S-5: the writes inside landed" || bad "S-5: the writes inside landed"
check "S-5: run_in_background refuses the same" \
  "$(tool_call 34 run_in_background "{\"command\":\"echo x > f\",\"cwd\":\"/\"}")" 34 \
  '"isError":true' 'lies outside this server'
stop_server
rm -rf "$wsx" "$tmp/sub" "$tmp/out-link" "$tmp/chain1" "$tmp/in-link" "$tmp/from-sub"

# ---- S-6: what the host's git runs later stays read-only -----------------
git init -q "$tmp" 2>/dev/null
start_server --sandbox workspace --cwd "$tmp"
init
check "S-6: the descriptions say the hooks and config are read-only" \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2 '.git/hooks, .git/config'
check "S-6: a hook cannot be planted, the config not changed" \
  "$(run 3 'echo evil > .git/hooks/pre-commit || echo refused-hook; git config core.fsmonitor evil || echo refused-config')" 3 \
  'refused-hook' 'refused-config'
[ ! -e "$tmp/.git/hooks/pre-commit" ] && ! git -C "$tmp" config core.fsmonitor >/dev/null &&
  ok "S-6: nothing planted" || bad "S-6: nothing planted"
stop_server
start_server --sandbox workspace --cwd "$tmp" --writable-git
init
check "S-6: --writable-git lifts it" \
  "$(run 3 'echo evil > .git/hooks/pre-commit && echo planted')" 3 'planted' '!refused'
check "S-6: --writable-git: the descriptions say nothing of it" \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2 '!.git/hooks'
stop_server
rm -rf "$tmp/.git"
"$MCP" --writable-git </dev/null >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q 'need --sandbox' "$tmp/err" && ok "S-6: --writable-git needs --sandbox" ||
  bad "S-6: --writable-git needs --sandbox" "$rc $(cat "$tmp/err")"

# ---- read-only, network allowed, one writable directory -----------------
mkdir -p "$tmp/w"
start_server --sandbox read-only --allow-net --writable "$tmp/w" --cwd "$tmp"
init
check "S-4: the descriptions name the read-only profile" \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2 \
  '(profile read-only, network allowed)' "$tmp/w" 'The network is available.' '!the workspace'
check "S-4: read-only: the cwd refuses" "$(run 3 'echo x > ro.txt')" 3 'Read-only file system'
check "S-4: read-only: --writable takes writes" "$(run 4 'echo x > w/ok.txt && echo wrote')" 4 'wrote' 'exit code: 0'
check "S-4: --allow-net: the connection works" \
  "$(run 5 "exec 3<>/dev/tcp/127.0.0.1/$PORT && echo connected")" 5 'connected' '!refused'
stop_server

# ---- S-3 through the server: no bwrap, nothing runs ---------------------
UVTASKS_BWRAP=/nonexistent/bwrap start_server --sandbox workspace --cwd "$tmp"
init
check "S-3: no bwrap is a tool error" "$(run 3 'echo ran > ran.txt')" 3 \
  '"isError":true' 'cannot be made on this machine'
check "M-TOOLS-18: the tool result says why" "$(run 4 'echo ran > ran.txt')" 4 \
  '"isError":true' 'no bwrap at /nonexistent/bwrap'
[ ! -e "$tmp/ran.txt" ] && ok "S-3: nothing ran" || bad "S-3: nothing ran"
stop_server
grep -q 'no bwrap at /nonexistent/bwrap' "$tmp/stderr" && ok "S-3: the log says why" ||
  bad "S-3: the log says why" "$(cat "$tmp/stderr")"

# ---- S-2: the guardian stops sandboxed tasks of a killed server ---------
# (M-MCP-7 inside the sandbox: bwrap ignores SIGTERM, so the guardian's
# SIGKILL, which reaches bwrap's pid 1 and with it the whole sandbox, is
# what ends a task that ignores SIGTERM and one that left the session.)
marker=$((RANDOM + 70000))
coproc GSRV { exec "$MCP" --grace-ms 200 --sandbox workspace --cwd "$tmp" 2>"$tmp/gstderr"; }
SRV_IN=${GSRV[1]}
SRV_OUT=${GSRV[0]}
init
check "S-2: a sandboxed background task starts" \
  "$(printf '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_in_background","arguments":{"command":"trap \\"\\" TERM; setsid sleep %s & sleep %s & echo up; wait"}}}' "$marker" "$((marker + 1))")" \
  3 'Started bash-1'
for _ in $(seq 200); do [ "$(pgrep -fc "sleep $marker|sleep $((marker + 1))")" = 2 ] && break; sleep 0.05; done
[ "$(pgrep -fc "sleep $marker|sleep $((marker + 1))")" = 2 ] && ok "S-2: both sleeps run" || bad "S-2: both sleeps run"
kill -KILL "$GSRV_PID"
gone=0
for _ in $(seq 200); do
  if [ "$(pgrep -fc "sleep $marker|sleep $((marker + 1))")" = 0 ]; then gone=1; break; fi
  sleep 0.05
done
[ $gone = 1 ] && ok "S-2, M-MCP-7: the guardian stopped the sandbox (a TERM-ignorer and a setsid child)" ||
  bad "S-2, M-MCP-7: the guardian stopped the sandbox" "$(pgrep -fa "sleep $marker|sleep $((marker + 1))")"
pkill -KILL -f "sleep $marker|sleep $((marker + 1))" 2>/dev/null

# ---- S-7: a spill directory a sandboxed task could write is refused -----
mkdir -p "$tmp/w"
for args in "--sandbox workspace --cwd $tmp --spill-dir $tmp/spill" \
  "--sandbox read-only --writable $tmp/w --cwd $tmp --spill-dir $tmp/w/spill"; do
  # shellcheck disable=SC2086
  "$MCP" $args </dev/null >/dev/null 2>"$tmp/err"; rc=$?
  if [ $rc != 0 ] && grep -q 'lies where the sandbox lets tasks write' "$tmp/err"; then
    ok "S-7: refused at start: ${args%% --cwd*} ... ${args##* }"
  else
    bad "S-7: refused at start: $args" "$rc $(cat "$tmp/err")"
  fi
done
# M-TOOLS-17, S-7: the default spill directory is in the workspace
# (<ws>/.uvtasks/spill/<pid>), where the host's file tools read it, and
# .uvtasks is read-only inside every task's sandbox: a task reads its
# spill file but cannot write it, plant a link, or rename or remove the
# directory (a mount point there); the server's next file is still made.
start_server --sandbox workspace --cwd "$tmp"
init
out=$(tool_call 3 run_command '{"command":"seq 1 3000"}')
check "M-TOOLS-17: the default spill directory is in the workspace under a sandbox" "$out" 3 \
  "the whole output is in $tmp/.uvtasks/spill/"
# shellcheck disable=SC2016
out=$(tool_call 4 run_command '{"command":"f=$(ls .uvtasks/spill/*/bash-1.log); sed -n 2999p $f; echo x >$f; ln -s /etc .uvtasks/spill/z; mv .uvtasks moved; rm -rf .uvtasks; ls -d .uvtasks/spill/*/bash-1.log && echo still-there"}')
check "S-7: a sandboxed task reads its spill file and cannot write, link, move or remove it" "$out" 4 \
  '2999\n' 'still-there' 'bash-1.log: Read-only file system' "ln: failed to create symbolic link '.uvtasks/spill/z': Read-only file system" \
  "mv: cannot move '.uvtasks' to 'moved': Device or resource busy"
out=$(tool_call 5 run_command '{"command":"seq 1 3000"}')
check "S-7: the server's next spill file is made after the attempts" "$out" 5 \
  "the whole output is in $tmp/.uvtasks/spill/" 'bash-3.log'
stop_server

# S-2: a server run from the build tree, UVTASKS_SANDBOX_HELPER unset,
# finds the build's own uvtasks-sandbox beside its library (it looked
# only in the install prefix, and a signal death read "exit code: 143").
if [ -n "${UVTASKS_SANDBOX_HELPER:-}" ]; then
  saved_helper=$UVTASKS_SANDBOX_HELPER
  unset UVTASKS_SANDBOX_HELPER
  start_server --sandbox workspace --cwd "$tmp"
  init
  check "S-2: without UVTASKS_SANDBOX_HELPER the build's helper is found (honest status)" \
    "$(tool_call 3 run_command '{"command":"kill -TERM $$"}')" 3 'signal: SIGTERM'
  stop_server
  export UVTASKS_SANDBOX_HELPER=$saved_helper
fi

# ---- S-9: no sandboxed process outlives the server, guardian or not -----
# An ended task whose leftovers hold the sandbox (a setsid child, a
# TERM-ignorer; bwrap's pid 1 ignores TERM too): at end of input they get
# SIGKILL at --shutdown-grace-ms, not at the task's --grace-ms, and the
# server ends in order ("shutdown did not finish" was the fault, and with
# --no-guardian they survived it).  Then the server SIGKILLed with
# --no-guardian: the sandbox ends with it (its status pipe was the
# server's).
m1=$((RANDOM + 80000)); m2=$((m1 + 1)); m3=$((m1 + 2)); m4=$((m1 + 3))
count_sleeps() { pgrep -fc "sleep ($1|$2)\$" 2>/dev/null || true; }
wait_sleeps() { # wait_sleeps N A B: until N of them run (10 s at most)
  for _ in $(seq 200); do [ "$(count_sleeps "$2" "$3")" = "$1" ] && return 0; sleep 0.05; done
  return 1
}
coproc SSRV { exec "$MCP" --no-guardian --grace-ms 5000 --shutdown-grace-ms 300 \
  --sandbox workspace --cwd "$tmp" 2>"$tmp/sstderr"; }
SRV_IN=${SSRV[1]}
SRV_OUT=${SSRV[0]}
SSRV_PID_SAVED=$SSRV_PID
init
check "S-9: a sandboxed task leaves a setsid child and a TERM-ignorer" \
  "$(run 3 "(trap '' TERM; exec sleep $m1) & setsid sleep $m2 & echo left")" 3 \
  'left' 'exit code: 0; 2 processes still running'
wait_sleeps 2 $m1 $m2 && ok "S-9: both run" || bad "S-9: both run" "$(count_sleeps $m1 $m2)"
exec {SRV_IN}>&-
wait "$SSRV_PID_SAVED" 2>/dev/null
if wait_sleeps 0 $m1 $m2; then ok "S-9: end of input: nothing of the sandbox outlives the server (--no-guardian)"
else bad "S-9: end of input: nothing of the sandbox outlives the server (--no-guardian)" "$(pgrep -fa "sleep ($m1|$m2)")"; fi
! grep -q 'did not finish' "$tmp/sstderr" && ok "S-9: the shutdown finished in order" ||
  bad "S-9: the shutdown finished in order" "$(cat "$tmp/sstderr")"
pkill -KILL -f "sleep ($m1|$m2)\$" 2>/dev/null

coproc KSRV { exec "$MCP" --no-guardian --sandbox workspace --cwd "$tmp" 2>"$tmp/kstderr"; }
SRV_IN=${KSRV[1]}
SRV_OUT=${KSRV[0]}
KSRV_PID_SAVED=$KSRV_PID
init
check "S-9: a running sandboxed task with a setsid child and a TERM-ignorer" \
  "$(tool_call 3 run_in_background "{\"command\":\"(trap '' TERM; exec sleep $m3) & setsid sleep $m4 & echo up; wait\"}")" 3 \
  'Started bash-1'
wait_sleeps 2 $m3 $m4 && ok "S-9: both run" || bad "S-9: both run" "$(count_sleeps $m3 $m4)"
kill -KILL "$KSRV_PID_SAVED"
wait "$KSRV_PID_SAVED" 2>/dev/null
if wait_sleeps 0 $m3 $m4; then ok "S-9: the server SIGKILLed without a guardian: the sandbox ends with it"
else bad "S-9: the server SIGKILLed without a guardian: the sandbox ends with it" "$(pgrep -fa "sleep ($m3|$m4)")"; fi
pkill -KILL -f "sleep ($m3|$m4)\$" 2>/dev/null

# ---- no sandbox: the descriptions say nothing of one; bad options -------
start_server --cwd "$tmp"
init
check "S-4: off: no sandbox in the descriptions" \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2 '"run_command"' '!SANDBOX'
stop_server
"$MCP" --writable /tmp </dev/null >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q 'need --sandbox' "$tmp/err" && ok "S-4: --writable needs --sandbox" ||
  bad "S-4: --writable needs --sandbox" "$rc $(cat "$tmp/err")"
"$MCP" --sandbox bogus </dev/null >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && ok "S-4: a bad profile is refused" || bad "S-4: a bad profile is refused" "$rc"
# S-4: a --writable DIR that does not exist is refused at start, naming
# it; the server started and every command then failed with a bare "no
# such file or directory (ENOENT)" that named nothing.
"$MCP" --sandbox read-only --writable "$tmp/no-such-dir" </dev/null >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "no-such-dir" "$tmp/err" && ok "S-4: a missing --writable DIR is refused at start" ||
  bad "S-4: a missing --writable DIR is refused at start" "$rc $(cat "$tmp/err")"

summary
