#!/usr/bin/env bash
# The benchmark runner: every workload for uvtasks and its peers, run
# alternately (round after round) in one run, then a table of medians,
# min-max and ratios, the goals, and a last line
#   bench: N goals met, M missed
#
#   bench/run.sh                 full run (about 10 minutes on 2 cores)
#   bench/run.sh --quick         smaller sizes, fewer rounds (under 2 min)
#   bench/run.sh --rounds N      rounds per workload (default 5, quick 3)
#   bench/run.sh --build DIR     use an existing build (configured with
#                                -Dbench=true); default: build-bench/,
#                                configured and compiled here (release)
#   bench/run.sh --raw FILE      also keep every sample (tab-separated)
#
# Needs bash, awk, timeout and a C toolchain with meson/ninja.  Every peer
# (node, python3, nvim, valgrind) is probed first, with a timeout and a
# version check; one that is absent, too old or hangs is skipped with a
# note.  Times come from the programs themselves (uv_hrtime), memory from
# getrusage, instructions from valgrind --tool=callgrind.
#
# Ratio goals are judged on the median of per-round ratios (each round
# runs the two sides back to back, so both see the same neighbours), and
# the table prints that ratio with its min-max over the rounds.  The load
# average is printed at the start and at the end: on a shared machine the
# absolute numbers move with it.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
rounds=""
build=""
raw_out=""
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) quick=1 ;;
  --rounds) rounds=$2; shift ;;
  --build) build=$2; shift ;;
  --raw) raw_out=$2; shift ;;
  *) echo "usage: bench/run.sh [--quick] [--rounds N] [--build DIR] [--raw FILE]" >&2
     exit 2 ;;
  esac
  shift
done

if [ -z "$build" ]; then
  build=$root/build-bench
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Dbench=true -Dtests=false -Dbuildtype=release \
      >/dev/null || exit 2
  else
    # Layers (src/mcp, ...) are picked up at configure time.
    meson setup --reconfigure "$build" >/dev/null || exit 2
  fi
  meson compile -C "$build" >/dev/null || exit 2
fi
B=$build/bench
# D-1: the keeper of durable tasks, from the same build (the benchmarks
# link the library statically, so it is not found beside a libuvtasks.so).
export UVTASKS_KEEPER=$build/uvtasks-keeper
# Durable tasks' state directory: on a tmpfs (/dev/shm) where there is one,
# as docs/durable.md advises (the tasks die with the machine anyway);
# "uvtasks+durable-disk" runs it on /tmp's file system too, for the cost
# of creating the task's three files there.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export UVT_BENCH_STATE_BASE=/dev/shm
fi
for p in bench-core bench-output bench-process; do
  if [ ! -x "$B/$p" ]; then
    echo "bench: $B/$p is missing (configure with -Dbench=true)" >&2
    exit 2
  fi
done

if [ "$quick" = 1 ]; then
  : "${rounds:=3}"
  COUNT=500 MIB=64 LC_TASKS=200000 FLAT_TASKS=50000 XS_TASKS=100000
  CG_TASKS=5000 IDLE_MS=1000 BURST_ROUNDS=5 BURST_TASKS=100
else
  : "${rounds:=5}"
  COUNT=2000 MIB=256 LC_TASKS=1000000 FLAT_TASKS=200000 XS_TASKS=400000
  CG_TASKS=20000 IDLE_MS=2000 BURST_ROUNDS=25 BURST_TASKS=200
fi
LIVE=64
IDLE=500
RECORDS=100000

# 500 idle tasks hold about 1500 descriptors; a fresh machine's soft limit
# may be 1024.
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results
notes=$tmp/notes
: >"$results"
: >"$notes"

note() { echo "$*" >>"$notes"; }

# run WORKLOAD IMPL COMMAND...: run once, keep its "metric value" lines,
# tagged with the round ($round).
round=0
run() {
  local wl=$1 impl=$2 out
  shift 2
  if out=$(timeout 300 "$@" 2>"$tmp/stderr"); then
    printf '%s\n' "$out" | awk -v wl="$wl" -v impl="$impl" -v r="$round" \
      'NF == 2 { print wl "\t" impl "\t" $1 "\t" $2 "\t" r }' >>"$results"
  else
    note "$wl / $impl: run failed: $(tail -n 2 "$tmp/stderr" | tr '\n' ' ')"
  fi
}

have() { command -v "$1" >/dev/null 2>&1; }
# The major.minor of the first "vX.Y" or "X.Y" in a version line.
version_of() { sed -n 's/^[^0-9]*\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1; }
# version_at_least HAVE WANT (both "major.minor").
version_at_least() {
  awk -v h="$1" -v w="$2" 'BEGIN { split(h, a, "."); split(w, b, ".");
    exit !(a[1] + 0 > b[1] + 0 || (a[1] + 0 == b[1] + 0 && a[2] + 0 >= b[2] + 0)) }'
}
# probe NAME WANT COMMAND...: the command prints a version within 10 s, at
# least WANT; else the peer is skipped with a note saying why.
probe() {
  local name=$1 want=$2 out v
  shift 2
  if ! have "$1"; then
    note "peer $name skipped: $1 not installed"
    return 1
  fi
  if ! out=$(timeout 10 "$@" </dev/null 2>&1); then
    note "peer $name skipped: '$*' failed or hung (10 s)"
    return 1
  fi
  v=$(printf '%s\n' "$out" | version_of)
  if [ -z "$v" ] || ! version_at_least "$v" "$want"; then
    note "peer $name skipped: version ${v:-unknown}, needs $want or later"
    return 1
  fi
  return 0
}
has_node=0 has_py=0 has_nvim=0 has_vg=0
probe Node 16.0 node --version && has_node=1
if probe Python 3.7 python3 --version; then
  if timeout 10 python3 -c 'import asyncio' </dev/null >/dev/null 2>&1; then
    has_py=1
  else
    note "peer Python skipped: python3 has no asyncio"
  fi
fi
# Neovim: -l needs 0.9; Debian 12's 0.7.2 waits on its terminal for ever
# when given -l, so the version is checked first and the run is bounded.
if probe Neovim 0.9 nvim --version; then
  if timeout 10 nvim --headless -u NONE -l /dev/null </dev/null >/dev/null 2>&1; then
    has_nvim=1
  else
    note "peer Neovim skipped: 'nvim --headless -u NONE -l' failed or hung (10 s)"
  fi
fi
# Cgroups per task: only where this process may create them.
has_cgroups=0
if timeout 60 "$B/bench-process" --impl uvtasks --count 2 --live 1 --cgroups >/dev/null 2>&1; then
  has_cgroups=1
else
  note "uvtasks+cgroup skipped: no cgroup v2 group can be created here"
fi
# Limits per task (L-LIM-1): only where a cgroup can enforce them.
has_limits=0
if timeout 60 "$B/bench-process" --impl uvtasks --count 2 --live 1 --limits-cpu >/dev/null 2>&1; then
  has_limits=1
else
  note "uvtasks+limits skipped: no cgroup can enforce memory, process and CPU limits here"
fi
# Sandboxed tasks (S-1): only where bwrap can make a sandbox.
has_bwrap=0
if timeout 60 "$B/bench-process" --impl uvtasks --count 2 --live 1 --sandbox >/dev/null 2>&1; then
  has_bwrap=1
else
  note "uvtasks+sandbox skipped: no bwrap, or it cannot make a sandbox here"
fi
if probe valgrind 3.0 valgrind --version; then
  has_vg=1
else
  note "instructions per task skipped (no usable valgrind)"
fi

echo "bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $rounds rounds$([ "$quick" = 1 ] && echo ", quick sizes"); machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"

for r in $(seq 1 "$rounds"); do
  round=$r
  echo "bench: round $r of $rounds" >&2
  # 1. Process tasks/s, argv and shell, against the peers.
  for mode in argv shell; do
    wl="1 process $mode"
    run "$wl" uvtasks "$B/bench-process" --impl uvtasks --mode $mode --count $COUNT --live $LIVE
    # D-1: durable tasks (a keeper each, files in a state directory).
    run "$wl" "uvtasks+durable" "$B/bench-process" --impl uvtasks --mode $mode --count $COUNT --live $LIVE --durable
    [ $mode = argv ] && run "$wl" "uvtasks+durable-disk" env UVT_BENCH_STATE_BASE=/tmp "$B/bench-process" --impl uvtasks --mode $mode --count $((COUNT / 4)) --live $LIVE --durable
    run "$wl" "uvtasks/1spawner" "$B/bench-process" --impl uvtasks --mode $mode --count $COUNT --live $LIVE --spawners 1
    # P-SPAWN-7: the same with the registry's spawn helper on.
    run "$wl" "uvtasks+helper" "$B/bench-process" --impl uvtasks --mode $mode --count $COUNT --live $LIVE --helper
    run "$wl" posix_spawn "$B/bench-process" --impl posix_spawn --mode $mode --count $COUNT --live $LIVE
    run "$wl" uv_spawn "$B/bench-process" --impl uvspawn --mode $mode --count $COUNT --live $LIVE
    [ $has_node = 1 ] && run "$wl" node node bench/peers/spawn.js $COUNT $LIVE $mode
    [ $has_py = 1 ] && run "$wl" python python3 bench/peers/spawn.py $COUNT $LIVE $mode
    [ $has_nvim = 1 ] && run "$wl" nvim nvim --headless -u NONE -l bench/peers/spawn.lua $COUNT $LIVE $mode
  done
  # 1b. The same with a 256 MiB host and with 500 idle tasks alive.
  run "1 process argv" "uvtasks+256MiB" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --heap-mib 256
  # (uv_spawn forks: with a 256 MiB host it is slow, so fewer tasks.)
  run "1 process argv" "uv_spawn+256MiB" "$B/bench-process" --impl uvspawn --count $((COUNT / 4)) --live $LIVE --heap-mib 256
  run "1 process argv" "uvtasks+500idle" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --idle $IDLE
  run "1 process argv" "uvtasks+256MiB+helper" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --heap-mib 256 --helper
  run "1 process argv" "uvtasks+500idle+helper" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --idle $IDLE --helper
  # A cgroup per task (opt-in), where this machine lets us make them.
  [ $has_cgroups = 1 ] && run "1 process argv" "uvtasks+cgroup" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --cgroups
  # L-LIM-1: every task with memory, process and CPU limits, against plain
  # tasks of the same round (the goal: at least 0.8x).
  [ $has_limits = 1 ] && run "1 process argv" "uvtasks+limits" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --limits
  [ $has_limits = 1 ] && run "1 process argv" "uvtasks+limits+cpu" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --limits-cpu
  # S-1: every task in a sandbox (read-only, no network), and bwrap's own
  # cost alone (the same command line from a raw posix_spawn loop); a
  # sandbox costs milliseconds, so an eighth of the tasks.
  if [ $has_bwrap = 1 ]; then
    run "1s sandbox argv" uvtasks "$B/bench-process" --impl uvtasks --count $((COUNT / 8)) --live $LIVE
    run "1s sandbox argv" "uvtasks+sandbox" "$B/bench-process" --impl uvtasks --count $((COUNT / 8)) --live $LIVE --sandbox
    run "1s sandbox argv" "posix_spawn+bwrap" "$B/bench-process" --impl posix_spawn --count $((COUNT / 8)) --live $LIVE --sandbox
  fi
  # The limit with the descriptors 500 idle tasks hold (3 each).
  run "1 process argv" "posix_spawn+1500fd" "$B/bench-process" --impl posix_spawn --count $COUNT --live $LIVE --fds $((IDLE * 3))
  # The same descriptors held by uvtasks' host, without the idle tasks:
  # what the 500 idle tasks cost beyond the descriptors they hold.
  run "1 process argv" "uvtasks+1500fd" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --fds $((IDLE * 3))
  # 2. Loop responsiveness: the idle loop's timer lateness (the floor on
  #    this machine now), then during the storm.
  run "2 lateness" idle "$B/bench-process" --impl idle --idle-ms $IDLE_MS
  run "2 lateness" uvtasks "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --probe
  run "2 lateness" "uvtasks+helper" "$B/bench-process" --impl uvtasks --count $COUNT --live $LIVE --probe --helper
  run "2 lateness" uv_spawn "$B/bench-process" --impl uvspawn --count $COUNT --live $LIVE --probe
  # 3. Output throughput.
  for cmd in head dd; do
    wl="3 output $cmd"
    run "$wl" uvtasks "$B/bench-output" --impl uvtasks --cmd $cmd --mib $MIB --cap-mib 4
    run "$wl" "uvtasks+backpressure" "$B/bench-output" --impl uvtasks --cmd $cmd --mib $MIB --cap-mib 4 --backpressure
    # D-2: the same bytes through the state directory's file: read as they
    # come, and read after a restart (written while no host ran).
    run "$wl" "uvtasks+durable" "$B/bench-output" --impl uvtasks --cmd $cmd --mib $MIB --cap-mib 4 --backpressure --durable
    run "$wl" "uvtasks+durable-restart" "$B/bench-output" --impl uvtasks --cmd $cmd --mib $MIB --cap-mib 4 --durable-restart
    run "$wl" rawpipe "$B/bench-output" --impl rawpipe --cmd $cmd --mib $MIB
    run "$wl" "$cmd|cat" "$B/bench-output" --impl shellpipe --cmd $cmd --mib $MIB
    [ $has_node = 1 ] && run "$wl" node node bench/peers/output.js $cmd $MIB
    [ $has_py = 1 ] && run "$wl" python python3 bench/peers/output.py $cmd $MIB
  done
  # 4. In-process lifecycle, and settle cost against the number of live
  #    tasks.
  run "4 lifecycle" uvtasks "$B/bench-core" lifecycle --tasks $LC_TASKS
  #    (Both registries in one process, chunks alternating: same noise.)
  run "4 flat" "10 vs 100000" "$B/bench-core" flat --tasks $FLAT_TASKS --low 10 --high 100000
  # 5. Cross-thread settles.
  run "5 xsettle" "4 threads" "$B/bench-core" xsettle --tasks $XS_TASKS --threads 4
  # 7. list(caller) among foreign tasks.
  run "7 list" "100000 foreign" "$B/bench-core" list --mine 10 --foreign 100000
  run "7 list" "no foreign" "$B/bench-core" list --mine 10 --foreign 0
  # 8. D-3: one uvt_process_adopt_all() taking back 100 durable tasks.
  run "8 adoption" "100 tasks" "$B/bench-process" --impl adopt --count 100
done

# 6. Memory: deterministic enough for one run each.
run "6 memory" records "$B/bench-core" memory --records $RECORDS
mcp=$build/src/mcp/uvtasks-mcp
# Issue #12: rounds of `seq 1 100000` tasks read and forgotten; the RSS
# after the burst against the idle RSS (memory given back).
run "6 memory" "burst" "$B/bench-output" --impl burst --rounds $BURST_ROUNDS --tasks $BURST_TASKS
if [ -x "$mcp" ]; then
  run "6 memory" uvtasks-mcp "$B/bench-core" mcp-rss "$mcp"
  run "6 memory" "uvtasks-mcp burst" "$B/bench-output" --impl mcp-burst --mcp "$mcp" --rounds $BURST_ROUNDS --tasks $BURST_TASKS
else
  note "uvtasks-mcp idle RSS skipped: $mcp not built (it lives on branch mcp)"
fi

# 4. Instructions per task from callgrind: the difference of two runs, so
#    the setup cost cancels out.
if [ $has_vg = 1 ]; then
  ir() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      "$B/bench-core" lifecycle --tasks "$1" 2>&1 >/dev/null |
      awk '/Collected :/ { print $NF }'
  }
  a=$(ir $CG_TASKS) b=$(ir $((CG_TASKS * 2)))
  if [ -n "$a" ] && [ -n "$b" ]; then
    printf '4 lifecycle\tuvtasks\tinstr_per_task\t%s\n' \
      "$(awk -v a="$a" -v b="$b" -v n=$CG_TASKS 'BEGIN { printf "%.0f", (b - a) / n }')" >>"$results"
  else
    note "callgrind run failed"
  fi
fi

[ -n "$raw_out" ] && cp "$results" "$raw_out"

# ---- Summary: medians, min-max, ratios, goals.
awk -F'\t' -v notes="$notes" -v BURST="$BURST_ROUNDS x $BURST_TASKS" -v load_end="$(cut -d' ' -f1-3 /proc/loadavg)" '
function sortv(v, n,   i, j, t) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
    if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
}
function median(key,   n, v) {
  n = split(vals[key], v, " ")
  sortv(v, n)
  lo[key] = v[1]; hi[key] = v[n]; cnt[key] = n
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function fmt(x) {
  if (x == "") return "-"
  if (x >= 100) return sprintf("%.0f", x)
  if (x >= 10) return sprintf("%.1f", x)
  return sprintf("%.2f", x)
}
function m(wl, impl, metric,   k) {
  k = wl SUBSEP impl SUBSEP metric
  return (k in med) ? med[k] : ""
}
# The median over rounds of a/b, each round the two sides of that round;
# sets rlo, rhi, rn (its min, max, count).  "" when no round has both.
function rmed(wa, ia, ma, wb, ib, mb,   r, n, v, x, y, ka, kb) {
  n = 0
  for (r = 0; r <= maxround; r++) {
    ka = wa SUBSEP ia SUBSEP ma SUBSEP r; kb = wb SUBSEP ib SUBSEP mb SUBSEP r
    if (!(ka in byround) || !(kb in byround) || byround[kb] + 0 <= 0) continue
    v[++n] = byround[ka] / byround[kb]
  }
  rn = n
  if (n == 0) return ""
  sortv(v, n)
  rlo = v[1]; rhi = v[n]
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function spread() { return sprintf("%.2f-%.2f over %d rounds", rlo, rhi, rn) }
function goal(text, ok, have) {
  if (!have) { printf "  skip  %s (no data)\n", text; return }
  printf "  %s  %s\n", ok ? "met " : "MISS", text
  if (ok) met++; else missed++
}
# A goal on the median of per-round ratios: a/b <= (le = 1) or >= x.
function rgoal(text, wa, ia, ma, wb, ib, mb, x, le,   q) {
  q = rmed(wa, ia, ma, wb, ib, mb)
  if (q == "") { goal(text, 0, 0); return }
  goal(sprintf("%s: %.2fx (%s) %s %.2fx", text, q, spread(), le ? "<=" : ">=", x),
    le ? q <= x : q >= x, 1)
}
{
  k = $1 SUBSEP $2 SUBSEP $3
  if (!(k in vals)) order[++nk] = k
  vals[k] = vals[k] " " $4
  byround[k SUBSEP $5] = $4
  if ($5 + 0 > maxround) maxround = $5 + 0
}
END {
  for (i = 1; i <= nk; i++) med[order[i]] = median(order[i])

  # What to show per metric: unit, and the reference for the ratio.
  unit["rate"] = "tasks/s"; unit["mib_per_s"] = "MiB/s"
  unit["lat_p99_us"] = "us p99"; unit["lat_p50_us"] = "us p50"
  unit["lat_max_us"] = "us max"; unit["start_p50_us"] = "us/start p50"
  unit["start_p99_us"] = "us/start p99"; unit["start_cpu_p99_us"] = "us CPU/start p99"; unit["loop_cpu_us"] = "us loop CPU/task"
  unit["ns_per_task"] = "ns/task"; unit["settle_ns"] = "ns/settle call"
  unit["instr_per_task"] = "instr/task (callgrind)"
  unit["settles_per_s"] = "settle calls/s"; unit["applied_per_s"] = "applied/s"
  unit["rss_per_record"] = "B/record (RSS)"; unit["string_bytes"] = "B strings/record"
  unit["record_struct"] = "B sizeof record"; unit["rss_kb"] = "KiB peak RSS"
  unit["ns_per_list"] = "ns/list"
  unit["rss_idle_kb"] = "KiB RSS idle"; unit["rss_after_kb"] = "KiB RSS after burst"
  unit["rss_peak_kb"] = "KiB peak RSS (burst)"; unit["after_ratio"] = "x idle RSS after burst"
  unit["ns_low"] = "ns/task at 10 live"; unit["ns_high"] = "ns/task at 100000 live"
  unit["flat_ratio"] = "x (100000 / 10 live)"
  unit["lat_wait_p99_us"] = "us p99 waiting for CPU"; unit["lat_own_p99_us"] = "us p99 beyond the wait"
  unit["idle_settle_ms"] = "ms to idle (no clock)"
  ref["1 process argv"] = "posix_spawn"; ref["1 process shell"] = "posix_spawn"
  ref["3 output head"] = "rawpipe"; ref["3 output dd"] = "rawpipe"
  ref["2 lateness"] = "uv_spawn"
  ref["7 list"] = "no foreign"

  printf "%-17s %-16s %12s %21s  %-22s %s\n", "workload", "impl", "median", "min-max", "unit", "ratio (median of per-round ratios, min-max)"
  for (i = 1; i <= nk; i++) {
    split(order[i], f, SUBSEP)
    if (!(f[3] in unit)) continue
    if (f[3] == "lat_p50_us" && f[1] != "2 lateness") continue
    if (f[3] ~ /^start_/ && (f[1] !~ /^1 process/ || (f[2] != "uvtasks" && f[2] != "uvtasks+helper" && f[2] != "uv_spawn" && f[2] != "posix_spawn"))) continue
    if (f[3] ~ /^loop_cpu/ && (f[1] !~ /^1 process/ || (f[2] !~ /^uvtasks/ && f[2] != "uv_spawn" && f[2] != "posix_spawn"))) continue
    if (f[3] ~ /^start_/ && f[2] == "posix_spawn") continue
    r = ""
    if ((f[1] in ref) && f[2] != ref[f[1]] && f[3] !~ /^start_|^loop_cpu|^lat_wait|^lat_own/) {
      q = rmed(f[1], f[2], f[3], f[1], ref[f[1]], f[3])
      if (q != "") r = sprintf("%.2fx %s (%.2f-%.2f)", q, ref[f[1]], rlo, rhi)
    }
    printf "%-17s %-16s %12s %21s  %-22s %s\n", f[1], f[2], fmt(med[order[i]]),
      fmt(lo[order[i]]) "-" fmt(hi[order[i]]) " (" cnt[order[i]] ")", unit[f[3]], r
  }

  print ""
  print "goals (ratios: median of per-round ratios, min-max over the rounds):"
  met = 0; missed = 0
  for (mi = 1; mi <= 2; mi++) {
    mode = mi == 1 ? "argv" : "shell"; wl = "1 process " mode
    rgoal(sprintf("1 %s: uvtasks tasks/s vs raw posix_spawn loop", mode),
      wl, "uvtasks", "rate", wl, "posix_spawn", "rate", 1.0, 0)
    best = ""; who = ""
    split("uv_spawn node python nvim", peers, " ")
    for (p = 1; p <= 4; p++) {
      v = m(wl, peers[p], "rate")
      if (v != "" && (best == "" || v + 0 > best + 0)) { best = v; who = peers[p] }
    }
    if (who != "")
      rgoal(sprintf("1 %s: uvtasks tasks/s vs the fastest peer (%s)", mode, who),
        wl, "uvtasks", "rate", wl, who, "rate", 1.0, 0)
    else
      goal(sprintf("1 %s: uvtasks vs the fastest peer", mode), 0, 0)
  }
  rgoal("1 argv with a 256 MiB heap vs plain", "1 process argv", "uvtasks+256MiB", "rate",
    "1 process argv", "uvtasks", "rate", 0.95, 0)
  rgoal("1 argv with 500 idle tasks vs plain", "1 process argv", "uvtasks+500idle", "rate",
    "1 process argv", "uvtasks", "rate", 0.95, 0)
  # D-1, D-2: durable tasks against plain ones, in the same run.
  for (mi = 1; mi <= 2; mi++) {
    mode = mi == 1 ? "argv" : "shell"; wl = "1 process " mode
    rgoal(sprintf("1 %s: durable tasks/s vs plain (D-1)", mode),
      wl, "uvtasks+durable", "rate", wl, "uvtasks", "rate", 0.5, 0)
  }
  for (ci = 1; ci <= 2; ci++) {
    c = ci == 1 ? "head" : "dd"; wl = "3 output " c
    rgoal(sprintf("3 %s: output MiB/s read from the state directory after a restart vs the pipe path (D-2)", c),
      wl, "uvtasks+durable-restart", "mib_per_s", wl, "uvtasks", "mib_per_s", 0.9, 0)
    rgoal(sprintf("3 %s: durable output MiB/s as it comes (the writer fills page cache) vs the pipe path (D-2)", c),
      wl, "uvtasks+durable", "mib_per_s", wl, "uvtasks", "mib_per_s", 0.9, 0)
  }
  # P-SPAWN-7: the spawn helper (off by default) on against off, and the
  # same host-size goals with it on.
  for (mi = 1; mi <= 2; mi++) {
    mode = mi == 1 ? "argv" : "shell"; wl = "1 process " mode
    rgoal(sprintf("1 %s: spawn helper on vs off (P-SPAWN-7)", mode),
      wl, "uvtasks+helper", "rate", wl, "uvtasks", "rate", 1.0, 0)
  }
  rgoal("1 argv with a 256 MiB heap vs plain, spawn helper on", "1 process argv",
    "uvtasks+256MiB+helper", "rate", "1 process argv", "uvtasks+helper", "rate", 0.95, 0)
  rgoal("1 argv with 500 idle tasks vs plain, spawn helper on", "1 process argv",
    "uvtasks+500idle+helper", "rate", "1 process argv", "uvtasks+helper", "rate", 0.95, 0)
  rgoal("2 timer lateness p99 during the storm vs the idle loop, spawn helper on",
    "2 lateness", "uvtasks+helper", "lat_p99_us", "2 lateness", "idle", "lat_p99_us", 1.5, 1)
  if (m("1 process argv", "uvtasks+limits", "rate") != "") {
    # L-LIM-1: limited tasks against plain tasks of the same run.
    rgoal("1 argv with limits (memory, processes) vs plain (L-LIM-1)", "1 process argv",
      "uvtasks+limits", "rate", "1 process argv", "uvtasks", "rate", 0.8, 0)
    rgoal("1 argv with limits (memory, processes, CPU) vs plain (L-LIM-1)", "1 process argv",
      "uvtasks+limits+cpu", "rate", "1 process argv", "uvtasks", "rate", 0.8, 0)
    rgoal("1 argv with a cgroup per task vs plain (S-11)", "1 process argv",
      "uvtasks+cgroup", "rate", "1 process argv", "uvtasks", "rate", 0.9, 0)
  }
  if (m("1s sandbox argv", "uvtasks+sandbox", "rate") != "") {
    rgoal("1s argv in a sandbox vs without (S-2)", "1s sandbox argv", "uvtasks+sandbox", "rate",
      "1s sandbox argv", "uvtasks", "rate", 0.5, 0)
    rgoal("1s argv in a sandbox vs bwrap alone (raw posix_spawn loop)", "1s sandbox argv", "uvtasks+sandbox", "rate",
      "1s sandbox argv", "posix_spawn+bwrap", "rate", 0.9, 0)
  }
  v = m("1 process argv", "uvtasks", "start_p99_us")
  goal(sprintf("1 uvt_process_start call: p99 %s us <= 50 us (median over rounds)", fmt(v)),
    v <= 50, v != "")
  v = m("1 process argv", "uvtasks+helper", "start_p99_us")
  goal(sprintf("1 uvt_process_start call, spawn helper on: p99 %s us <= 50 us (median over rounds)", fmt(v)),
    v <= 50, v != "")
  rgoal("1 argv, spawn helper on: tasks/s vs raw posix_spawn loop", "1 process argv", "uvtasks+helper", "rate",
    "1 process argv", "posix_spawn", "rate", 1.0, 0)
  rgoal("1 shell, spawn helper on: tasks/s vs raw posix_spawn loop", "1 process shell", "uvtasks+helper", "rate",
    "1 process shell", "posix_spawn", "rate", 1.0, 0)
  rgoal("2 timer lateness p99 during the storm vs the idle loop", "2 lateness", "uvtasks",
    "lat_p99_us", "2 lateness", "idle", "lat_p99_us", 1.5, 1)
  rgoal("2 timer lateness p99 during the storm vs raw uv_spawn", "2 lateness", "uvtasks",
    "lat_p99_us", "2 lateness", "uv_spawn", "lat_p99_us", 0.3, 1)
  v = m("2 lateness", "uvtasks", "lat_p99_us")
  goal(sprintf("2 timer lateness during the storm: p99 %s us <= 1000 us", fmt(v)),
    v <= 1000, v != "")
  for (ci = 1; ci <= 2; ci++) {
    c = ci == 1 ? "head" : "dd"; wl = "3 output " c
    rgoal(sprintf("3 %s: uvtasks MiB/s vs the raw pipe reader", c),
      wl, "uvtasks", "mib_per_s", wl, "rawpipe", "mib_per_s", 0.9, 0)
    rgoal(sprintf("3 %s: uvtasks with output_backpressure MiB/s vs the raw pipe reader", c),
      wl, "uvtasks+backpressure", "mib_per_s", wl, "rawpipe", "mib_per_s", 0.9, 0)
  }
  v = m("4 lifecycle", "uvtasks", "ns_per_task")
  goal(sprintf("4 lifecycle: %s ns/task <= 1000 ns", fmt(v)), v <= 1000, v != "")
  v = m("4 flat", "10 vs 100000", "flat_ratio")
  goal(sprintf("4 settle cost flat: %.2fx at 100000 live vs 10 live <= 1.2x (median of per-run ratios)", v),
    v <= 1.2, v != "")
  v = m("5 xsettle", "4 threads", "applied_per_s")
  goal(sprintf("5 cross-thread settles (4 threads, settle to listener): %.2f M/s >= 2 M/s", v / 1e6),
    v >= 2e6, v != "")
  v = m("6 memory", "records", "rss_per_record"); s = m("6 memory", "records", "string_bytes")
  goal(sprintf("6 RSS per record at 100000: %s B - %s B strings <= 512 B", fmt(v), fmt(s)),
    v - s <= 512, v != "")
  v = m("6 memory", "uvtasks-mcp", "rss_kb")
  if (v != "")
    goal(sprintf("6 uvtasks-mcp idle peak RSS: %s KiB <= 5 MB (4883 KiB)", fmt(v)), v <= 5e6 / 1024, 1)
  v = m("6 memory", "burst", "after_ratio")
  goal(sprintf("6 RSS after a burst of seq tasks read and forgotten: %s x idle <= 2x", fmt(v)),
    v <= 2, v != "")
  v = m("6 memory", "uvtasks-mcp burst", "after_ratio")
  if (v != "")
    goal(sprintf("6 uvtasks-mcp RSS after that burst through the tools: %s x idle <= 2x", fmt(v)), v <= 2, 1)
  rgoal("7 list of 10 among 100000 foreign vs alone", "7 list", "100000 foreign", "ns_per_list",
    "7 list", "no foreign", "ns_per_list", 2.0, 1)

  while ((getline line < notes) > 0) print "note: " line
  print "note: 6 burst: " BURST " rounds of `seq 1 100000` tasks started together, each read when it ended and forgotten (uvtasks-mcp: --keep-finished 0), then 300 ms idle; idle RSS taken after one small task"
  print "note: uvtasks output reads use output_cap_bytes 4 MiB; with the default 1 MiB a host reading once per loop turn loses bytes (libuv reads up to 32 x 64 KiB per turn)"
  print "note: uv_spawn+256MiB runs a quarter of the tasks (libuv 1.44 forks, which copies the page tables)"
  print "note: shell mode runs the command through each tool'"'"'s own shell: bash for uvtasks (contract §3) and the raw loops, /bin/sh for Node and Python"
  print "note: uvtasks spawns on spawner threads (one per core); uvtasks/1spawner is the same with one"
  print "note: 1s: uvtasks+sandbox runs each task in bwrap (read-only, no network); posix_spawn+bwrap runs the same bwrap command line without the library: what bwrap itself costs. The first sandboxed start of a registry also runs bwrap once to check it works (S-3)"
  print "note: uvtasks+cgroup: a cgroup per task (uvt_process_cgroups, off by default in the C and Node APIs, on in uvtasks-mcp): the child enters its group before exec, from a clone that shares the memory of the spawner thread (no fork)"
  print "note: uvtasks+limits: 256 MiB and 64 processes per task (L-LIM-1): a group in each hierarchy that enforces them (two v1 here), pooled and reused; +cpu adds 100% of a core, a CFS bandwidth quota whose scheduling cost is the kernel (docs/performance.md)"
  print "note: 2 lateness: \"waiting for CPU\" is how long the loop'"'"'s thread was runnable but not running between two ticks (/proc/thread-self/schedstat); \"beyond the wait\" is a tick'"'"'s lateness minus that: the loop'"'"'s own work"
  print "note: load average at the end: " load_end
  printf "bench: %d goals met, %d missed\n", met, missed
}' "$results"
