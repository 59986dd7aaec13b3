#!/usr/bin/env bash
# A-1: the built library against the ABI dump of the last release.
#
# Builds nothing: give it a build directory that holds libuvtasks.so (built
# with debug info, as the default debugoptimized build is).  It dumps the
# built library with abidw (Debian's abigail-tools) and compares that with
# the newest dump kept in abi/ (abi/libuvtasks-X.Y.Z.abi) through abidiff
# --leaf-changes-only.  Every change abidiff reports must be announced
# (docs/release.md, "What counts as announced"):
#
#   1. each changed, added or removed function and variable, and each
#      changed type, is named in backticks in the "ABI and release"
#      subsection of the first "## Unreleased" section of CHANGELOG.md (a
#      struct uvt_foo_s may be named as uvt_foo_s or uvt_foo_t);
#   2. if anything but additions is reported (a removed or changed
#      function or variable, a changed type), the built library's soname
#      differs from the dump's.
#
#   scripts/abi-check.sh [BUILDDIR]            check (default build/)
#   scripts/abi-check.sh BUILDDIR --dump FILE  against FILE, not the newest
#   scripts/abi-check.sh BUILDDIR --changelog FILE
#                                              announcements from FILE
#   scripts/abi-check.sh BUILDDIR --write FILE write the built library's
#                                              dump to FILE (a release's
#                                              step) and stop
#
# Exits 0 when nothing changed or every change is announced, 1 on an
# unannounced change, 2 when it cannot compare (no build, no abidw, a
# library without debug info).  A build without the Slurm engine leaves
# uvt_slurm_* out of the comparison (a dump made with it lists them).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

builddir=build
dump=
changelog=$top/CHANGELOG.md
write=
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  builddir=$1
  shift
fi
while [ $# -gt 0 ]; do
  case $1 in
    --dump) dump=$2; shift 2 ;;
    --changelog) changelog=$2; shift 2 ;;
    --write) write=$2; shift 2 ;;
    *) echo "usage: scripts/abi-check.sh [BUILDDIR] [--dump FILE] [--changelog FILE] [--write FILE]" >&2; exit 2 ;;
  esac
done

for tool in abidw abidiff readelf; do
  command -v "$tool" >/dev/null || {
    echo "abi-check: $tool not found (scripts/setup.sh installs abigail-tools and binutils)" >&2
    exit 2
  }
done

exec python3 - "$top" "$builddir" "$dump" "$changelog" "$write" <<'PY'
import json
import os
import re
import subprocess
import sys
import tempfile

top, builddir, dump, changelog, write = sys.argv[1:6]


def die(msg, code=2):
    print('abi-check: ' + msg, file=sys.stderr)
    sys.exit(code)


info = os.path.join(builddir, 'meson-info')
try:
    targets = json.load(open(os.path.join(info, 'intro-targets.json')))
    srcdir = json.load(open(os.path.join(info, 'meson-info.json')))['directories']['source']
except OSError:
    die('%s is not a configured meson build directory' % builddir)
lib = None
for t in targets:
    if t['name'] == 'uvtasks' and t['type'] == 'shared library':
        lib = t['filename'][0]
if lib is None or not os.path.isfile(lib):
    die('no built libuvtasks.so in %s: ninja -C %s' % (builddir, builddir))
sections = subprocess.run(['readelf', '-S', '-W', lib], capture_output=True,
                          text=True, check=True).stdout
if '.debug_info' not in sections:
    die('%s has no debug info: configure with -Dbuildtype=debugoptimized (the default) or debug' % lib)

# The options every dump is made with, the one in abi/ too: no paths of
# the machine that built it, no source locations, only the library's own
# symbols, only the types the public headers (SRCDIR/include) define, and
# type ids from hashes so that an unchanged type keeps its id.
ABIDW = ['abidw', '--no-corpus-path', '--no-comp-dir-path', '--no-show-locs',
         '--drop-undefined-syms', '--drop-private-types',
         '--headers-dir', os.path.join(srcdir, 'include'),
         '--type-id-style', 'hash']

if write:
    subprocess.run(ABIDW + ['--out-file', write, lib], check=True)
    print('abi-check: wrote the ABI of %s to %s' % (os.path.basename(lib), write))
    sys.exit(0)


def version_key(path):
    m = re.search(r'libuvtasks-(\d+)\.(\d+)\.(\d+)\.abi$', path)
    return tuple(int(x) for x in m.groups()) if m else (-1,)


if not dump:
    absdir = os.path.join(top, 'abi')
    dumps = sorted((os.path.join(absdir, f) for f in os.listdir(absdir)
                    if version_key(f) != (-1,)), key=version_key)
    if not dumps:
        die('no abi/libuvtasks-X.Y.Z.abi in the tree')
    dump = dumps[-1]


def soname_of(xml):
    m = re.search(r"<abi-corpus [^>]*soname='([^']*)'", xml)
    return m.group(1) if m else ''


with tempfile.TemporaryDirectory() as tmp:
    built = os.path.join(tmp, 'built.abi')
    subprocess.run(ABIDW + ['--out-file', built, lib], check=True)
    new_xml = open(built).read()
    old_xml = open(dump).read()
    cmd = ['abidiff', '--no-show-locs', '--leaf-changes-only']
    note = ''
    if "name='uvt_slurm_" in old_xml and "name='uvt_slurm_" not in new_xml:
        cmd += ['--drop-fn', '^uvt_slurm_']
        note = ' (this build has no Slurm engine: uvt_slurm_* left out)'
    r = subprocess.run(cmd + [dump, built], capture_output=True, text=True)
old_soname, new_soname = soname_of(old_xml), soname_of(new_xml)
# abidiff's status: bit 0 an error, bit 1 a usage error, bit 2 an ABI
# change, bit 3 an incompatible one.
if r.returncode & 3:
    die('abidiff failed (status %d): %s' % (r.returncode, r.stderr.strip() or r.stdout.strip()))
name = os.path.relpath(dump, top) if os.path.abspath(dump).startswith(top + os.sep) else dump
if r.returncode == 0:
    print('abi-check: %s (%s) has the ABI of %s%s: nothing changed' % (
        os.path.basename(lib), new_soname, name, note))
    sys.exit(0)

# The report's changes, as (kind, name).  Functions and variables:
#   [A] 'function int uvt_foo(...)'    {uvt_foo}
#   [C] 'function int uvt_foo(int)' has some sub-type changes:
# types, one block each:
#   'struct uvt_foo_s' changed:
changes = []
for line in r.stdout.splitlines():
    m = re.match(r"\s+\[([ADC])\] '(function|variable) (.*?)'(?:\s+\{(\w+)\}| has)", line)
    if m:
        sym = m.group(4)
        if not sym:
            n = re.search(r'(\w+)\s*\(' if m.group(2) == 'function' else r'(\w+)\s*$',
                          m.group(3))
            sym = n.group(1) if n else m.group(3)
        kind = {'A': 'added', 'D': 'removed', 'C': 'changed'}[m.group(1)]
        changes.append(('%s %s' % (kind, m.group(2)), sym))
        continue
    m = re.match(r"'(?:struct|union|enum|typedef|class) ([\w:]+)' changed:", line)
    if m:
        changes.append(('changed type', m.group(1)))


def announced_names(path):
    """The identifiers in backticks in the ABI and release subsection of
    the first Unreleased section."""
    text = open(path, encoding='utf-8').read()
    m = re.search(r'^## Unreleased.*?(?=^## |\Z)', text, re.M | re.S)
    if not m:
        return None
    s = re.search(r'^### ABI and release\s*$(.*?)(?=^### |\Z)', m.group(0), re.M | re.S)
    if not s:
        return None
    names = set()
    for span in re.findall(r'`([^`]*)`', s.group(1)):
        names.update(re.findall(r'[A-Za-z_][A-Za-z0-9_.]*', span))
    return names


names = announced_names(changelog)
if names is None:
    die('%s has no "### ABI and release" subsection under its first "## Unreleased"' % changelog, 1)


def spellings(n):
    out = {n}
    if n.endswith('_s'):
        out.add(n[:-2] + '_t')
    return out


missing = [(k, n) for k, n in changes if not (spellings(n) & names)]
breaking = [(k, n) for k, n in changes if not k.startswith('added')]
print('abi-check: %s (%s) against %s (%s)%s: %d changes, %d of them not additions' % (
    os.path.basename(lib), new_soname, name, old_soname, note, len(changes), len(breaking)))
for k, n in changes:
    print('  %-16s %s%s' % (k, n, '' if (k, n) not in missing else '   <- not in CHANGELOG'))
bad = False
if not changes:
    # abidiff said the ABI changed but the report named nothing: show it.
    print(r.stdout)
    print('abi-check: abidiff reports a change this script cannot name', file=sys.stderr)
    bad = True
if breaking and new_soname == old_soname:
    print('abi-check: the ABI changed incompatibly but the soname is still %s: '
          'raise the version (0.x: the minor) in meson.build' % new_soname, file=sys.stderr)
    bad = True
if missing:
    print('abi-check: %d changes not named in the "ABI and release" subsection of %s: %s'
          % (len(missing), os.path.relpath(changelog, top),
             ', '.join(n for _, n in missing)), file=sys.stderr)
    bad = True
if bad:
    sys.exit(1)
print('abi-check: every change is announced (soname %s -> %s, CHANGELOG.md)' % (old_soname, new_soname))
PY
