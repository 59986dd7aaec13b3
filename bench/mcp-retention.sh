#!/usr/bin/env bash
# M-MCP-11 workload: uvtasks-mcp's memory after 1,000 ended tasks of
# 300 KB of output each that nobody reads (a model that starts background
# work and forgets it).  Goal: the server's RSS at the end is at most the
# configured --max-unread-bytes plus 5 MB.  Prints the table row and a last
# line in the runner's form
#   bench: N goals met, M missed
#
#   bench/mcp-retention.sh [--build DIR] [--tasks N] [--max-unread-bytes B]
#
# DIR defaults to build/ (any build with the server).  Tasks run 20 at a
# time; between waves the driver polls task_list until none is running.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build
tasks=1000
bound=$((32 * 1024 * 1024))
while [ $# -gt 0 ]; do
  case "$1" in
  --build) build=$2; shift ;;
  --tasks) tasks=$2; shift ;;
  --max-unread-bytes) bound=$2; shift ;;
  *) echo "usage: bench/mcp-retention.sh [--build DIR] [--tasks N] [--max-unread-bytes B]" >&2
     exit 2 ;;
  esac
  shift
done
mcp=$build/src/mcp/uvtasks-mcp
[ -x "$mcp" ] || { echo "no $mcp: build first" >&2; exit 2; }

tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill -KILL "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
mkfifo "$tmp/in" "$tmp/out"
exec {W}<>"$tmp/in"
cat "$tmp/out" >"$tmp/log" {W}>&- &
"$mcp" --max-unread-bytes "$bound" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" {W}>&- &
srv=$!

id=0
send() { printf '%s\n' "$1" >&"$W"; }
# wait_id ID: until the answer to ID arrived; prints it.
wait_id() {
  while ! grep -q -F -e "\"id\":$1," -e "\"id\":$1}" "$tmp/log"; do sleep 0.01; done
  grep -F -e "\"id\":$1," -e "\"id\":$1}" "$tmp/log" | tail -1
}
call() {
  id=$((id + 1))
  send "{\"jsonrpc\":\"2.0\",\"id\":$id,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2}}"
}

send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}'
wait_id 0 >/dev/null
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$srv/status")
t0=$(date +%s%N)
started=0
while [ "$started" -lt "$tasks" ]; do
  for _ in $(seq 1 20); do
    [ "$started" -ge "$tasks" ] && break
    call run_in_background '{"command":"head -c 300000 /dev/zero | tr \\\\0 x"}'
    started=$((started + 1))
  done
  while :; do
    call task_list '{}'
    out=$(wait_id "$id")
    [[ "$out" == *running* ]] || break
    sleep 0.05
  done
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
rss=$(awk '/VmRSS/ {print $2}' "/proc/$srv/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$srv/status")
exec {W}>&-
wait "$srv"
srv=

goal_kb=$(( bound / 1024 + 5 * 1024 ))
printf 'workload\ttasks\tbound\tRSS start\tRSS end\tpeak RSS\ttime\n'
printf 'mcp-retention\t%d x 300 KB unread\t%d B\t%d kB\t%d kB\t%d kB\t%d ms\n' \
  "$tasks" "$bound" "$rss0" "$rss" "$hwm" "$ms"
if [ "$rss" -le "$goal_kb" ]; then
  echo "goal: RSS at the end <= bound + 5 MB ($goal_kb kB): met"
  echo "bench: 1 goals met, 0 missed"
else
  echo "goal: RSS at the end <= bound + 5 MB ($goal_kb kB): MISSED"
  echo "bench: 0 goals met, 1 missed"
fi
