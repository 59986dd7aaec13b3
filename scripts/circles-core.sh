#!/bin/sh
# Lists the import circles of the library: two source files are in one
# circle when each reaches the other by calling functions (or using data)
# the other defines.  Reads the built objects with nm, so run it after a
# build:  scripts/circles-core.sh [builddir]   (default: build)
# Prints one line per circle (its size, then its files), then a count.
# Exit status 0; the count of circles is the number to compare.
set -eu
cd "$(dirname "$0")/.."
builddir=${1:-build}
objdir=$(ls -d "$builddir"/libuvtasks.so*.p 2>/dev/null | head -n 1)
if [ -z "$objdir" ]; then
  echo "circles-core.sh: no $builddir/libuvtasks.so*.p: build first" >&2
  exit 2
fi
for o in "$objdir"/*.o; do
  f=$(basename "$o" .o)
  # --defined-only / --undefined-only, global uvt_/uvt__ names only.
  nm --defined-only -g "$o" | awk -v f="$f" '$3 ~ /^uvt_/ {print "D", f, $3}'
  nm --undefined-only -g "$o" | awk -v f="$f" '$2 ~ /^uvt_/ {print "U", f, $2}'
done | python3 -c '
import glob, sys
names = {p.replace("/", "_"): p for p in glob.glob("src/**/*.c", recursive=True)}
defs, uses = {}, []
for line in sys.stdin:
    k, f, s = line.split()
    # src_process_session.c -> src/process/session.c
    f = names.get(f, f)
    if k == "D":
        defs[s] = f
    else:
        uses.append((f, s))
edges = {}
for f, s in uses:
    if s in defs and defs[s] != f:
        edges.setdefault(f, set()).add(defs[s])
nodes = set(defs.values()) | set(edges)
# Tarjan, iterative.
index, low, on, stack, sccs, n = {}, {}, set(), [], [], [0]
def strong(v):
    work = [(v, iter(sorted(edges.get(v, ()))))]
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    while work:
        v, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = n[0]; n[0] += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(edges.get(w, ())))))
                break
            if w in on:
                low[v] = min(low[v], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                c = []
                while True:
                    w = stack.pop(); on.discard(w); c.append(w)
                    if w == v:
                        break
                if len(c) > 1:
                    sccs.append(sorted(c))
for v in sorted(nodes):
    if v not in index:
        strong(v)
for c in sorted(sccs, key=lambda c: (-len(c), c)):
    print(len(c), " ".join(c))
print("circles:", len(sccs), "files in them:", sum(len(c) for c in sccs))
'
