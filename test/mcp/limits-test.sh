#!/usr/bin/env bash
# M-MCP-12, M-MCP-14 and M-MCP-15 from outside, with the built server:
#  - a 10,000-element batch of tools/list (2025-03-26) is one -32600
#    "batch too large" error and the server's peak RSS stays small; 100
#    requests are still one batch with 100 answers; 101 are refused;
#  - the credential scrub drops the issue's 13 names and their siblings
#    (parts, fused names, passwords in URLs), keeps the plain ones, and
#    --pass-env passes a named one through;
#  - --cgroups: a setsid daemon is stopped by task_kill and by the
#    server's shutdown (this machine: cgroup v1 hierarchies plus a v2
#    "unified" mount).
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash limits-test.sh
set -u
. "$(dirname "$0")/lib.sh"
GOT_MAX=600
require_mcp

tmp=$(mktemp -d)
srv=
marker=100.$$$RANDOM
trap server_cleanup EXIT

# start VERSION ARGS...: the server on FIFOs; its answers go to $tmp/log.
start() {
  local version=$1
  shift
  rm -f "$tmp/in" "$tmp/out" "$tmp/log"
  mkfifo "$tmp/in" "$tmp/out"
  exec {W}<>"$tmp/in"
  SRV_IN=$W
  cat "$tmp/out" >"$tmp/log" {W}>&- &
  "$MCP" "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" {W}>&- &
  srv=$!
  send "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"$version\"}}"
  answer 0 >/dev/null
}

stop() {
  exec {W}>&-
  wait "$srv" 2>/dev/null
  srv=
}

# call ID TOOL ARGS-JSON: a tools/call; prints its answer.
call() {
  send "$(tool_call "$1" "$2" "$3")"
  answer "$1"
}

run() { call "$1" run_command "{\"command\":\"$(json_str "$2")\"}"; }

gone() {
  local i
  for i in $(seq 1 500); do
    pgrep -f "$1" >/dev/null || return 0
    sleep 0.01
  done
  return 1
}

# ------------------------------------------------------------------------
# M-MCP-12: batches.
start 2025-03-26
{
  printf '['
  for i in $(seq 1 10000); do
    [ "$i" -gt 1 ] && printf ','
    printf '{"jsonrpc":"2.0","id":%d,"method":"tools/list"}' $((i + 100))
  done
  printf ']\n'
} >"$tmp/big.json"
cat "$tmp/big.json" >&"$W"
send '{"jsonrpc":"2.0","id":1,"method":"ping"}'
answer 1 >/dev/null
errors=$(grep -c '"code":-32600' "$tmp/log")
if grep -q '"id":null,"error":{"code":-32600,"message":"Invalid Request: batch too large' "$tmp/log" &&
  [ "$errors" = 1 ] && ! grep -q '"id":101,' "$tmp/log"; then
  ok "M-MCP-12: a 10,000-element batch is one -32600 \"batch too large\" error"
else
  bad "M-MCP-12: a 10,000-element batch is one -32600 error" "$(head -c 600 "$tmp/log")"
fi
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$srv/status")
if [ "$hwm" -lt 65536 ]; then
  ok "M-MCP-12: the server's peak RSS stays small (${hwm} kB)"
else
  bad "M-MCP-12: the server's peak RSS stays small" "${hwm} kB"
fi
# 100 is still a batch; 101 is not.
for n in 100 101; do
  {
    printf '['
    for i in $(seq 1 "$n"); do
      [ "$i" -gt 1 ] && printf ','
      printf '{"jsonrpc":"2.0","id":%d,"method":"ping"}' $((n * 1000 + i))
    done
    printf ']\n'
  } >&"$W"
done
send '{"jsonrpc":"2.0","id":2,"method":"ping"}'
answer 2 >/dev/null
got=$(grep -o '"id":100[0-9][0-9][0-9],"result"' "$tmp/log" | wc -l)
if [ "$got" = 100 ] && ! grep -q '"id":101[0-9][0-9][0-9],' "$tmp/log" &&
  [ "$(grep -c 'batch too large (101 requests; at most 100)' "$tmp/log")" = 1 ]; then
  ok "M-MCP-12: 100 requests are one batch with 100 answers; 101 are refused"
else
  bad "M-MCP-12: the batch bound at 100" "$got answers; $(grep -o 'batch too large[^"]*' "$tmp/log")"
fi
# Its sibling: one message of 4 MiB holding a million small values (an
# argument array, not a batch) is refused before it is parsed.
{
  printf '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"task_list","arguments":{"x":['
  head -c 2000000 /dev/zero | tr '\0' 1 | sed 's/1/1,/g'
  printf '1]}}}\n'
} >&"$W"
send '{"jsonrpc":"2.0","id":4,"method":"ping"}'
answer 4 >/dev/null
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$srv/status")
if grep -q '"message":"Invalid Request: a message of more than 50000 JSON values"' "$tmp/log" &&
  [ "$hwm" -lt 65536 ]; then
  ok "M-MCP-12: a line of a million values is refused unparsed (peak RSS ${hwm} kB)"
else
  bad "M-MCP-12: a line of a million values" "peak ${hwm} kB; $(tail -c 300 "$tmp/log")"
fi
stop

# ------------------------------------------------------------------------
# M-MCP-14: the credential scrub and --pass-env.
dropped=(
  # The issue's 13.
  "DATABASE_URL=postgres://app:s3cret@db.example:5432/app"
  "REDIS_URL=redis://:s3cret@cache.example:6379/0"
  "https_proxy=http://me:s3cret@proxy.example:3128"
  "PGPASSWORD=s3cret" "MYSQL_PWD=s3cret" "SSHPASS=s3cret" "CI_JOB_JWT=ey.x.y"
  "COOKIE=session=abc" "AUTH_HEADER=Basic eDp5" "BEARER=abc"
  "SENTRY_DSN=https://k@o1.ingest.example/1"
  "SLACK_WEBHOOK_URL=https://hooks.example/T/B/x" "NPM_CONFIG__AUTH=eDp5"
  # Siblings: other shapes of the same.
  "HTTP_PROXY=http://me:s3cret@proxy.example:3128"
  "MONGO_URI=mongodb+srv://u:p@cluster.example/db"
  "AMQP_ADDR=amqps://u:p@mq.example"
  "UPSTREAMS=http://a.example,https://u:p@b.example"
  "mysql_pwd=s3cret" "REDISCLI_AUTH=s3cret" "GIT_ASKPASS=/usr/bin/helper"
  "CI_JOB_JWT_V2=ey.x.y" "SESSION_COOKIE=abc" "HTTP_AUTHORIZATION=Bearer x"
  "DISCORD_WEBHOOK=https://x" "LDAPBINDPASSWD=x" "VAULTTOKEN=x"
  "GPG_PASSPHRASE=x" "APPSECRET=x"
  # Credentials known by their value, whatever the name; git's config
  # family, whose value may be one (and which goes whole: a KEY dropped
  # with its VALUE passed broke every git command).
  "HEADER=Authorization: Bearer abc" "UPSTREAM_HDR=Bearer abc"
  "MY_CONN=Server=db;User Id=app;Password=hunter2;" "ODBC=Driver=x;pwd=hunter2"
  "STRIPE_SK=sk_live_abc" "GH=ghp_abc" "LAB=glpat-abc" "SLACK=xoxb-1-2"
  "AWSID=AKIAABCDEFGHIJKLMNOP" "ID_RSA=-----BEGIN OPENSSH PRIVATE KEY-----x"
  "SESSIONID=abc" "GIT_CONFIG_COUNT=1" "GIT_CONFIG_KEY_0=http.extraheader"
  "GIT_CONFIG_VALUE_0=AUTHORIZATION: basic c2VjcmV0"
  "GIT_CONFIG_PARAMETERS='http.extraheader'='AUTHORIZATION: basic c2VjcmV0'"
)
kept=(
  "KEYBOARD_LAYOUT=us" "MONKEY=banana" "PASSAGE=the" "COMPASS_DIR=/x"
  "BYPASS_CACHE=1" "TOKENIZERS_PARALLELISM=false" "AUTHOR_NAME=me"
  "SSH_AUTH_SOCK=/tmp/agent.sock" "REPO_URL=https://github.com/x/y"
  "GIT_REMOTE=ssh://git@github.com/x/y" "DSNAME=x" "HOOKS_DIR=/x"
  "DOCS=https://example.com/a:b@c"
  "GREETING=hello there" "XDG_SESSION_ID=3" "DB_HOST=db.example"
  "SEARCH_HINT=forgot password? reset it" "AKIA_DOC=AKIA is a prefix"
)
envs=("${dropped[@]}" "${kept[@]}" "GH_TOKEN=passed-through" "NPM_TOKEN=not-passed")
( export "${envs[@]}"; start 2025-11-25 --pass-env GH_TOKEN --pass-env NOT_SET_ANYWHERE
  out=$(run 1 "env")
  git_out=$(run 2 "git config --list >/dev/null && echo git-works")
  stop
  printf '%s' "$out" >"$tmp/env.out"
  printf '%s' "$git_out" >"$tmp/git.out"
  cp "$tmp/err" "$tmp/err.env"
  # --pass-env GIT_CONFIG_COUNT passes the family whole.
  start 2025-11-25 --pass-env GIT_CONFIG_COUNT
  run 3 "git config --get http.extraheader" >"$tmp/git2.out"
  stop )
env_out=$(sed 's/\\n/\n/g' "$tmp/env.out")
miss=
for e in "${dropped[@]}"; do
  grep -q "^${e%%=*}=" <<<"$env_out" && miss="$miss ${e%%=*}"
done
if [ -z "$miss" ]; then
  ok "M-MCP-14: the scrub drops all ${#dropped[@]} credential names (the issue's 13 and siblings)"
else
  bad "M-MCP-14: the scrub drops every credential" "reached the task:$miss"
fi
miss=
for e in "${kept[@]}"; do
  grep -q "^${e%%=*}=" <<<"$env_out" || miss="$miss ${e%%=*}"
done
if [ -z "$miss" ]; then
  ok "M-MCP-14: plain names stay (${#kept[@]}: KEYBOARD_LAYOUT, MONKEY, PASSAGE, SSH_AUTH_SOCK, URLs without a password ...)"
else
  bad "M-MCP-14: plain names stay" "dropped:$miss"
fi
if grep -q '^GH_TOKEN=passed-through$' <<<"$env_out" && ! grep -q '^NPM_TOKEN=' <<<"$env_out"; then
  ok "M-MCP-14: --pass-env GH_TOKEN passes it unchanged; NPM_TOKEN still goes"
else
  bad "M-MCP-14: --pass-env" "$(grep TOKEN <<<"$env_out")"
fi
if grep -q 'git-works' "$tmp/git.out"; then
  ok "M-MCP-14: git works in a task when the host's environment had git config (the family goes whole)"
else
  bad "M-MCP-14: git works in a task" "$(cat "$tmp/git.out")"
fi
if grep -q 'AUTHORIZATION: basic c2VjcmV0' "$tmp/git2.out"; then
  ok "M-MCP-14: --pass-env GIT_CONFIG_COUNT passes git's config family whole"
else
  bad "M-MCP-14: --pass-env GIT_CONFIG_COUNT" "$(cat "$tmp/git2.out")"
fi
if grep -q 'pass-env NOT_SET_ANYWHERE: not set' "$tmp/err.env"; then
  ok "M-MCP-14: --pass-env of an unset name is said on stderr"
else
  bad "M-MCP-14: --pass-env of an unset name" "$(cat "$tmp/err.env")"
fi

# ------------------------------------------------------------------------
# M-MCP-15: --cgroups and a setsid daemon.
if [ ! -w "$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)" ]; then
  echo "skip M-MCP-15: no writable cgroup v2 mount here"
else
  start 2025-11-25 --cgroups
  if grep -q 'no cgroup' "$tmp/err"; then bad "M-MCP-15: --cgroups works here" "$(cat "$tmp/err")"; fi
  call 1 run_in_background "{\"command\":\"setsid sleep ${marker}1 </dev/null >/dev/null 2>&1 & sleep ${marker}2\"}" >/dev/null
  for _ in $(seq 1 500); do pgrep -f "sleep ${marker}1" >/dev/null && break; sleep 0.01; done
  call 2 task_kill '{"task_id":"bash-1"}' >/dev/null
  if gone "sleep ${marker}1" && gone "sleep ${marker}2"; then
    ok "M-MCP-15: under --cgroups a setsid daemon is stopped by task_kill"
  else
    bad "M-MCP-15: a setsid daemon is stopped by task_kill" "$(pgrep -af "sleep $marker")"
  fi
  call 3 run_in_background "{\"command\":\"setsid sleep ${marker}3 </dev/null >/dev/null 2>&1 & sleep ${marker}4\"}" >/dev/null
  for _ in $(seq 1 500); do pgrep -f "sleep ${marker}3" >/dev/null && break; sleep 0.01; done
  stop
  if gone "sleep ${marker}3" && gone "sleep ${marker}4"; then
    ok "M-MCP-15: under --cgroups a setsid daemon is stopped by the server's shutdown"
  else
    bad "M-MCP-15: a setsid daemon is stopped by the shutdown" "$(pgrep -af "sleep $marker")"
  fi
  # The guardian: a SIGKILLed server still has the daemon stopped, and the
  # registry's cgroup directory removed.
  start 2025-11-25 --cgroups
  call 1 run_in_background "{\"command\":\"setsid sleep ${marker}7 </dev/null >/dev/null 2>&1 & sleep ${marker}8\"}" >/dev/null
  for _ in $(seq 1 500); do pgrep -f "sleep ${marker}7" >/dev/null && break; sleep 0.01; done
  cg=$(grep '^0::' "/proc/$(pgrep -f "sleep ${marker}7" | head -1)/cgroup")
  kill -KILL "$srv"
  wait "$srv" 2>/dev/null
  srv=
  exec {W}>&-
  dir=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)${cg#0::}
  dir=${dir%/*}
  for _ in $(seq 1 500); do [ -d "$dir" ] || break; sleep 0.01; done
  if gone "sleep ${marker}7" && gone "sleep ${marker}8" && [ ! -d "$dir" ]; then
    ok "M-MCP-15: a SIGKILLed server's guardian stops the setsid daemon through its cgroup (and removes $dir)"
  else
    bad "M-MCP-15: the guardian and the cgroup" "$(pgrep -af "sleep $marker"); dir $dir: $(ls "$dir" 2>&1 | head -3)"
  fi
  # S-11 changed its contrast: without cgroups (--no-cgroups) the daemon
  # is no longer out of reach: the server follows the task's descent and
  # stops what is left of its children at its end (resources-test.sh).
  start 2025-11-25 --no-cgroups
  call 1 run_in_background "{\"command\":\"setsid sleep ${marker}5 </dev/null >/dev/null 2>&1 & sleep ${marker}6\"}" >/dev/null
  for _ in $(seq 1 500); do pgrep -f "sleep ${marker}5" >/dev/null && break; sleep 0.01; done
  stop
  if gone "sleep ${marker}6" && gone "sleep ${marker}5"; then
    ok "S-11: with --no-cgroups the setsid daemon is stopped at the end too"
  else
    bad "S-11: with --no-cgroups" "$(pgrep -af "sleep $marker")"
  fi
  pkill -KILL -f "sleep ${marker}5"
fi
# A host without cgroup v2 (here: the mount hidden in a mount namespace):
# the server says so at start and serves on.
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  mnt=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
  out=$(echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' |
    unshare -m sh -c 'umount "$1" 2>/dev/null; exec "$2" --cgroups' sh "$mnt" "$MCP" 2>&1)
  if [[ "$out" == *"no cgroup per task on this host"* ]] && [[ "$out" == *'"id":1,"result":{}'* ]]; then
    ok "M-MCP-15: without cgroup v2 the server says so on stderr at start and serves"
  else
    bad "M-MCP-15: without cgroup v2" "$out"
  fi
fi
if "$MCP" --help | grep -q -- '--no-cgroups'; then ok "M-MCP-15, S-11: --help names --no-cgroups"; else bad "M-MCP-15, S-11: --help names --no-cgroups"; fi
# M-TOOLS-10: a --spill-dir the server refuses (a link, a directory
# others may enter, one that cannot be made) ends the start-up with status
# 1 and a sentence; the failed start-up crashed (SIGSEGV, status 139).
mkdir -p "$tmp/spill-real"
ln -s "$tmp/spill-real" "$tmp/spill-link"
mkdir -m 755 "$tmp/spill-wide"
for d in "$tmp/spill-link" "$tmp/spill-wide" /proc/no-such-dir; do
  out=$(echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' | "$MCP" --spill-dir "$d" 2>&1)
  rc=$?
  if [ "$rc" = 1 ] && [[ "$out" == *"start-up failed"* ]]; then
    ok "M-TOOLS-10: --spill-dir ${d##*/} refused: status 1"
  else
    bad "M-TOOLS-10: --spill-dir ${d##*/} refused: status 1" "status $rc: $out"
  fi
done
# M-TOOLS-9, M-TOOLS-11: --help names every tool the server offers (it
# named six of the eight).
help=$("$MCP" --help | tr -s ' \n' '  ')
missing=
for t in run_in_background run_command task_output task_list task_kill write_stdin task_wait task_screen; do
  [[ "$help" == *"$t"* ]] || missing="$missing $t"
done
if [ -z "$missing" ]; then ok "M-TOOLS-9, M-TOOLS-11: --help names every tool"; else bad "M-TOOLS-9, M-TOOLS-11: --help names every tool" "missing:$missing"; fi

# ------------------------------------------------------------------------
# M-MCP-11: the unread soak in small.  Twelve tasks of 300 KB that nobody
# reads, under --keep-finished 5 and --max-unread-bytes 1000000: once all
# have ended at most 3 (900 KB) are kept, the oldest went first, and a
# tool result's notice named what went and the bytes dropped.
start 2025-11-25 --keep-finished 5 --max-unread-bytes 1000000
for i in $(seq 1 12); do
  call "$i" run_in_background '{"command":"head -c 300000 /dev/zero | tr \\0 x"}' >/dev/null
done
for i in $(seq 100 2100); do
  out=$(call "$i" task_list '{}')
  [[ "$out" == *running* ]] || break
done
out=$(call 3000 task_list '{}')
kept=$(printf '%s' "$out" | grep -o 'bash-[0-9]*' | sort -u | tr '\n' ' ')
if [ "$(printf '%s' "$out" | grep -o 'bash-[0-9]*' | sort -u | wc -l)" -le 3 ] &&
  [[ "$out" == *bash-12* ]] && ! printf '%s' "$out" | grep -o 'bash-[0-9]*' | grep -qx bash-1; then
  ok "M-MCP-11: 12 unread ended tasks of 300 KB: the newest kept within 1,000,000 bytes ($kept)"
else
  bad "M-MCP-11: unread ended tasks are bounded by bytes" "$out"
fi
if grep -q 'Forgot [0-9]* ended tasks\{0,1\} to stay within --keep-finished 5 and --max-unread-bytes 1000000; [0-9]* unread bytes of output dropped: bash-1 (300000 unread bytes)' "$tmp/log"; then
  ok "M-MCP-11: a tool result's notice names the forgotten task and its bytes"
else
  bad "M-MCP-11: the notice names what went" "$(grep -o 'Forgot[^"]*' "$tmp/log" | head -3)"
fi
out=$(call 3001 task_output '{"task_id":"bash-1"}')
if [[ "$out" == *"No task"* ]] || [[ "$out" == *"no task"* ]]; then
  ok "M-MCP-11: a forgotten task's id is unknown"
else
  bad "M-MCP-11: a forgotten task's id is unknown" "$out"
fi
stop

# Its sibling: the count bound holds for unread tasks too (small output).
start 2025-11-25 --keep-finished 4
for i in $(seq 1 10); do
  call "$i" run_in_background '{"command":"echo unread"}' >/dev/null
done
for i in $(seq 100 2100); do
  out=$(call "$i" task_list '{}')
  [[ "$out" == *running* ]] || break
done
out=$(call 3000 task_list '{}')
n=$(printf '%s' "$out" | grep -o 'bash-[0-9]*' | sort -u | wc -l)
if [ "$n" -le 4 ] && [[ "$out" == *bash-10* ]]; then
  ok "M-MCP-11: --keep-finished 4 bounds ended tasks nobody read ($n kept)"
else
  bad "M-MCP-11: --keep-finished bounds unread tasks" "$out"
fi
stop

# M-TOOLS-17, M-MCP-16: the default spill directory is the server's own,
# in its workspace, <cwd>/.uvtasks/spill/<pid>, where the host's file
# tools read it (git ignores it); it goes at exit, and a server that
# starts removes those of servers that are gone (a SIGKILLed one), links
# planted in them removed, never followed.
ws=$tmp/ws
mkdir -p "$ws/.uvtasks/spill"
chmod 700 "$ws/.uvtasks/spill"
victim=$tmp/victim
echo precious >"$victim"
dead=$(sh -c 'echo $$')
mkdir -m 700 "$ws/.uvtasks/spill/$dead"
echo old >"$ws/.uvtasks/spill/$dead/bash-1.log"
ln -s "$victim" "$ws/.uvtasks/spill/$dead/bash-2.log"
start 2025-11-25 --cwd "$ws"
out=$(call 1 run_command '{"command":"seq 1 3000"}')
mine=$(printf '%s' "$out" | sed -n 's|.*the whole output is in \([^:]*\)/bash-1.log.*|\1|p')
if [ "$mine" = "$ws/.uvtasks/spill/$srv" ] && [ "$(sed -n 2999p "$mine/bash-1.log")" = 2999 ] &&
  [ "$(cat "$ws/.uvtasks/.gitignore")" = '*' ]; then
  ok "M-TOOLS-17: the default spill directory is in the workspace, <cwd>/.uvtasks/spill/<pid>, line N its line N"
else
  bad "M-TOOLS-17: the default spill directory is in the workspace" "$mine $out"
fi
if [ ! -e "$ws/.uvtasks/spill/$dead" ] && [ "$(cat "$victim")" = precious ]; then
  ok "M-MCP-16: a gone server's spill directory is swept at start (the link removed, not followed)"
else
  bad "M-MCP-16: a gone server's spill directory is swept" "$(ls -la "$ws/.uvtasks/spill" 2>&1) $(cat "$victim")"
fi
stop
if [ -n "$mine" ] && [ ! -e "$mine" ]; then
  ok "M-MCP-16: the server's own spill directory goes at exit"
else
  bad "M-MCP-16: the server's own spill directory goes at exit" "$(ls -la "$mine" 2>&1)"
fi

# S-7: a link planted at the workspace's .uvtasks (a task of an earlier
# server) is not followed: nothing is made where it points, and the
# spill directory is $TMPDIR/uvtasks-spill-<uid>/<pid> instead, said on
# stderr; that one is swept the same way.
ws2=$tmp/ws2
mkdir -p "$ws2" "$tmp/elsewhere" "$tmp/td"
ln -s "$tmp/elsewhere" "$ws2/.uvtasks"
top=$tmp/td/uvtasks-spill-$(id -u)
mkdir -m 700 "$top"
mkdir -m 700 "$top/$dead"
ln -s "$victim" "$top/$dead/bash-2.log"
TMPDIR=$tmp/td start 2025-11-25 --cwd "$ws2"
out=$(call 1 run_command '{"command":"seq 1 3000"}')
mine=$(printf '%s' "$out" | sed -n 's|.*the whole output is in \([^:]*\)/bash-1.log.*|\1|p')
if [ "$mine" = "$top/$srv" ] && [ -z "$(ls -A "$tmp/elsewhere")" ] &&
  grep -q "the spill directory is $top/$srv" "$tmp/err" &&
  [ ! -e "$top/$dead" ] && [ "$(cat "$victim")" = precious ]; then
  ok "S-7: a link at .uvtasks is not followed; the spill directory is under \$TMPDIR, said on stderr, the gone one swept"
else
  bad "S-7: a link at .uvtasks is not followed" "$mine $(ls -A "$tmp/elsewhere") $(cat "$tmp/err")"
fi
stop

# M-TOOLS-18: tasks whose output was read to the end lose nothing when
# they go: no "Forgot ... 0 unread bytes" notice on every call past
# --keep-finished (there was one per call).
start 2025-11-25 --keep-finished 2
for i in $(seq 1 6); do
  call "$i" run_command '{"command":"echo read"}' >/dev/null
done
out=$(call 100 task_list '{}')
n=$(printf '%s' "$out" | grep -o 'bash-[0-9]*' | sort -u | wc -l)
if [ "$n" -le 2 ] && ! grep -q 'Forgot' "$tmp/log"; then
  ok "M-TOOLS-18: read tasks go without a notice ($n kept)"
else
  bad "M-TOOLS-18: read tasks go without a notice" "$(grep -o 'Forgot[^"]*' "$tmp/log" | head -2) $out"
fi
stop

summary
