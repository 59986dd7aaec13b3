#!/usr/bin/env bash
# The layering check: every #include of the library, the server, the Node
# binding's C, the examples and the benchmarks, against the layers'
# rules (docs/design.md, "Layers").
#
#   - The core is src/*.c (the top level of src/); its private header,
#     src/uvt-internal.h, is included only by the core.
#   - A folder's private header (src/process/process-internal.h,
#     src/slurm/slurm-internal.h, src/tools/tools-int.h, src/mcp/*.h) is
#     included only by the files of that folder.
#   - src/leaf/ holds the leaf helpers (the intrusive list, the allocator
#     wrappers): they call nothing of the library, so any file of src/ may
#     include them.
#   - examples/ and bench/ include only the public headers (include/) and
#     their own; bench/internal/ measures one private piece (the tools'
#     terminal filter) and may include that piece's header, as tests do.
#   - Tests (test/, bindings/node/test/) are exempt: they may look inside.
#
# A quoted include is resolved as the compiler does: beside the including
# file first, then include/ and src/ (the build's include path).  Each
# violation is printed as "file:line: includes PATH (rule)".
#
#   scripts/layers.sh     prints the violations; exits 1 if there is one
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - "$@" <<'PY'
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def sources():
    for top in ('src', 'bindings/node/src', 'examples', 'bench'):
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x != 'node_modules')
            for f in sorted(files):
                if f.endswith(('.c', '.h')):
                    yield os.path.normpath(os.path.join(d, f))


def resolve(includer, quote, name):
    """The repository file an include names, or None (a system header)."""
    here = os.path.dirname(includer)
    tries = ([os.path.join(here, name)] if quote == '"' else []) + [
        os.path.join('include', name), os.path.join('src', name)]
    for t in tries:
        if os.path.isfile(t):
            return os.path.normpath(t)
    return None


def folder(path):
    """The layer a file of src/ belongs to: 'core' for src/*, else its
    folder (src/process, src/tools, ...)."""
    parts = path.split(os.sep)
    if parts[0] != 'src':
        return None
    return 'core' if len(parts) == 2 else os.sep.join(parts[:2])


def check(includer, target):
    if target.startswith('include' + os.sep):
        return None  # the published API
    if includer.startswith(os.path.join('bench', 'internal') + os.sep):
        return None  # a white-box benchmark, exempt as tests are
    if target.startswith(os.path.join('src', 'leaf') + os.sep):
        if includer.startswith('src' + os.sep):
            return None  # leaf helpers: any layer of the library
        return 'the leaf helpers are the library\'s own'
    if includer.startswith(('examples' + os.sep, 'bench' + os.sep)):
        top = includer.split(os.sep)[0]
        if not target.startswith(top + os.sep):
            return 'examples and bench include only public headers and their own'
        return None
    t = folder(target)
    if t is None:
        return None
    if t == 'core':
        if target == os.path.join('src', 'uvt-internal.h') and folder(includer) != 'core':
            return 'the core-private header, outside the core'
        return None
    if os.path.dirname(includer) != t:
        return 'a private header of %s, outside its folder' % t
    return None


bad = 0
for f in sources():
    with open(f, encoding='utf-8', errors='replace') as fh:
        for n, line in enumerate(fh, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = resolve(f, m.group(1), m.group(2))
            if target is None:
                continue
            why = check(f, target)
            if why:
                print('%s:%d: includes %s (%s)' % (f, n, target, why))
                bad += 1
if bad:
    print('layers: %d includes cross a layer through a private header' % bad)
    sys.exit(1)
print('layers: every include goes through a published header or stays in its folder')
PY
