#!/usr/bin/env bash
# The circles between the library's files (and uvtasks-mcp's), from the
# built objects: each object's undefined symbols (nm: uvt_*, uvt__*, the
# server's mcp_*) are matched with the object of ours that defines them
# (libuv's, jansson's and libc's are left out), and every strongly connected
# component of that graph with more than one file is printed as
#   N files: a.c b.c ...
# (paths under src/), largest first.  The rule (docs/design.md, "Layers"):
# a circle of any size may stay inside the core (src/*.c); outside it, a
# circle of two files at most (two files that are one concept split in
# two), never more.
#
#   scripts/circles.sh [BUILDDIR]    default build/; build it first
#                                    (ninja -C BUILDDIR)
# Exits 1 when a circle outside the core has more than two files (each is
# named on stderr), 2 when it cannot look, else 0.  The docs suite runs it
# (meson test circles).
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
if [ ! -f "$builddir/compile_commands.json" ]; then
  echo "circles: no $builddir/compile_commands.json: meson setup $builddir && ninja -C $builddir" >&2
  exit 2
fi
command -v nm >/dev/null || { echo "circles: nm not found (binutils)" >&2; exit 2; }

python3 - "$builddir" <<'PY'
import json
import os
import subprocess
import sys

builddir = sys.argv[1]
srcroot = os.path.abspath('src')
objs = {}  # source file (under src/) -> object path
for e in json.load(open(os.path.join(builddir, 'compile_commands.json'))):
    src = os.path.normpath(os.path.join(e['directory'], e['file']))
    out = os.path.join(e['directory'], e['output'])
    rel = os.path.relpath(out, os.path.abspath(builddir))
    # The library's objects and the server's; not a test's or a bench's
    # own copy of a source.
    if not src.startswith(srcroot + os.sep):
        continue
    if not (rel.startswith('libuvtasks.') or rel.startswith(os.path.join('src', 'mcp', 'uvtasks-mcp.p'))):
        continue
    if os.path.exists(out):
        objs.setdefault(os.path.relpath(src, srcroot), out)

if not objs:
    sys.exit('circles: no objects of the library in %s: build it first' % builddir)


def nm(args, obj):
    r = subprocess.run(['nm', '-P'] + args + [obj], capture_output=True, text=True, check=True)
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            yield parts[0], parts[1]


defs = {}
undef = {}
for f, o in objs.items():
    for sym, kind in nm(['--defined-only'], o):
        if kind.isupper():
            defs.setdefault(sym, set()).add(f)
    undef[f] = {sym for sym, _ in nm(['-u'], o)}

edges = {f: set() for f in objs}
for f, syms in undef.items():
    for s in syms:
        for g in defs.get(s, ()):
            if g != f:
                edges[f].add(g)

# Tarjan's strongly connected components, iteratively.
index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
for root in sorted(edges):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = counter[0]; counter[0] += 1
    stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1
                stack.append(w); on.add(w)
                work.append((w, iter(sorted(edges[w]))))
                break
            if w in on:
                low[v] = min(low[v], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))

circles = sorted((c for c in comps if len(c) > 1), key=lambda c: (-len(c), c))
for c in circles:
    print('%d files: %s' % (len(c), ' '.join(c)))
print('circles: %d among %d files (%d files in circles)' % (
    len(circles), len(objs), sum(len(c) for c in circles)))

# Outside the core (a file in a folder of src/), at most two files.
bad = [c for c in circles if len(c) > 2 and any('/' in f for f in c)]
for c in bad:
    print('circles: %d files outside the core (at most 2): %s' %
          (len(c), ' '.join(c)), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
