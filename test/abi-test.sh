#!/usr/bin/env bash
# A-1: the soname says when the ABI changes, and the check that guards it
# fails on an unannounced change.
#
#  1. The built library's soname is libuvtasks.so.MAJOR.MINOR while the
#     version (include/uvtasks/version.h) is 0.x, libuvtasks.so.MAJOR from
#     1.0 on; the file is libuvtasks.so.X.Y.Z.
#  2. A host built through pkg-config (the build's uninstalled uvtasks.pc)
#     records that soname as NEEDED and runs on the built library.
#  3. scripts/abi-check.sh, against the 0.2.0 dump (which today's ABI
#     differs from): fails when the CHANGELOG names nothing, fails when
#     the soname did not change, passes when every change is named (a
#     struct uvt_foo_s by its typedef uvt_foo_t too).
#  4. The tree itself: scripts/abi-check.sh against the newest dump in
#     abi/ with the real CHANGELOG.md passes (the gate of .ci/run).
#  5. A-2: a host built against the last release's headers
#     (abi/include-X.Y.Z) runs on the built library, and so does one built
#     against headers whose option structs lack their last fields.
#
#   bash test/abi-test.sh BUILDDIR SOURCE_ROOT
set -u
build=${1:?usage: abi-test.sh BUILDDIR SOURCE_ROOT}
root=${2:?usage: abi-test.sh BUILDDIR SOURCE_ROOT}
check=$root/scripts/abi-check.sh

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; [ $# -gt 1 ] && echo "     got: ${2:0:1200}"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. The soname.
ver() { sed -n "s/^#define UVT_VERSION_$1 \\([0-9]*\\)\$/\\1/p" "$root/include/uvtasks/version.h"; }
major=$(ver MAJOR)
minor=$(ver MINOR)
patch=$(ver PATCH)
if [ "$major" = 0 ]; then
  want=libuvtasks.so.0.$minor
else
  want=libuvtasks.so.$major
fi
lib=$build/libuvtasks.so.$major.$minor.$patch
if [ -f "$lib" ]; then
  ok "the library is $(basename "$lib")"
else
  bad "the library is libuvtasks.so.$major.$minor.$patch" "$(ls "$build"/libuvtasks.so* 2>&1)"
fi
soname=$(readelf -d "$lib" 2>&1 | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" = "$want" ]; then
  ok "A-1: soname $soname (version $major.$minor.$patch)"
else
  bad "A-1: soname $want (version $major.$minor.$patch)" "$soname"
fi

# 2. A host through pkg-config.
cat >"$tmp/host.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <uvtasks.h>
int main(void) {
  printf("%s\n", uvt_version_string());
  return strcmp(uvt_version_string(), UVT_VERSION_STRING) != 0;
}
EOF
if flags=$(PKG_CONFIG_PATH=$build/meson-uninstalled pkg-config --cflags --libs uvtasks 2>&1) &&
   # shellcheck disable=SC2086
   cc -o "$tmp/host" "$tmp/host.c" $flags 2>"$tmp/cc.err"; then
  needed=$(readelf -d "$tmp/host" | sed -n 's/.*Shared library: \[\(libuvtasks[^]]*\)\]/\1/p')
  if [ "$needed" = "$want" ]; then
    ok "a host built with pkg-config needs $needed"
  else
    bad "a host built with pkg-config needs $want" "$needed"
  fi
  out=$(LD_LIBRARY_PATH=$build "$tmp/host" 2>&1)
  if [ "$out" = "$major.$minor.$patch" ]; then
    ok "the host runs on the built library ($out)"
  else
    bad "the host runs on the built library" "$out"
  fi
else
  bad "a host builds with pkg-config --cflags --libs uvtasks" "$flags $(cat "$tmp/cc.err")"
fi

# 3. The checker, against a dump that today's ABI differs from.
old=$root/abi/libuvtasks-0.2.0.abi
printf '# Changelog\n\n## Unreleased (test)\n\n### ABI and release\n\n- nothing\n\n## 0.2.0\n\n- `uvt_process_options_t` grew (an old section: not read)\n' >"$tmp/none.md"
out=$(bash "$check" "$build" --dump "$old" --changelog "$tmp/none.md" 2>&1)
rc=$?
if [ "$rc" = 1 ] && [[ $out == *'uvt_process_options_t   <- not in CHANGELOG'* ]] &&
   [[ $out == *'added function   uvt_process_peek   <- not in CHANGELOG'* ]]; then
  ok "A-1: a change the CHANGELOG does not name fails the check"
else
  bad "A-1: a change the CHANGELOG does not name fails the check (exit 1)" "exit $rc: $out"
fi

# Every name the checker listed, in backticks; struct *_s by their *_t.
names=$(printf '%s\n' "$out" | sed -n 's/^  [a-z ]* \(uvt_[a-z0-9_]*\)   <- not in CHANGELOG$/\1/p' |
  sed 's/_s$/_t/' | sed 's/.*/`&`/' | tr '\n' ' ')
if [ -z "$names" ]; then
  bad "the checker lists the changes it found" "$out"
fi
printf '# Changelog\n\n## Unreleased (test)\n\n### Other\n\n### ABI and release\n\n- %s\n\n### After\n' "$names" >"$tmp/all.md"
out=$(bash "$check" "$build" --dump "$old" --changelog "$tmp/all.md" 2>&1)
rc=$?
if [ "$rc" = 0 ] && [[ $out == *'every change is announced'* ]]; then
  ok "A-1: every change named and the soname changed: the check passes"
else
  bad "A-1: every change named and the soname changed: the check passes" "exit $rc: $out"
fi

# The same changes with the old soname kept.
sed "s/soname='libuvtasks.so.0'/soname='$want'/" "$old" >"$tmp/same-soname.abi"
out=$(bash "$check" "$build" --dump "$tmp/same-soname.abi" --changelog "$tmp/all.md" 2>&1)
rc=$?
if [ "$rc" = 1 ] && [[ $out == *"soname is still $want"* ]]; then
  ok "A-1: an incompatible change under the same soname fails the check"
else
  bad "A-1: an incompatible change under the same soname fails the check (exit 1)" "exit $rc: $out"
fi

# Nothing changed: the build against its own dump.
bash "$check" "$build" --write "$tmp/self.abi" >/dev/null 2>&1
out=$(bash "$check" "$build" --dump "$tmp/self.abi" --changelog "$tmp/none.md" 2>&1)
rc=$?
if [ "$rc" = 0 ] && [[ $out == *'nothing changed'* ]]; then
  ok "the library against its own dump: nothing changed"
else
  bad "the library against its own dump: nothing changed" "exit $rc: $out"
fi

# 4. The tree: the newest dump and the real CHANGELOG.md.
out=$(bash "$check" "$build" 2>&1)
rc=$?
if [ "$rc" = 0 ]; then
  ok "A-1: scripts/abi-check.sh: $(printf '%s\n' "$out" | tail -1)"
else
  bad "A-1: scripts/abi-check.sh passes on the tree (name each change under CHANGELOG.md's \"ABI and release\")" "exit $rc: $out"
fi

# 5. A-2: option structs grow without breaking old binaries.  A host
#    (test/abi/old-host.c) built against the last release's headers
#    (abi/include-X.Y.Z, the newest) runs on the built library; and,
#    since that snapshot may equal today's headers, the same host built
#    against a copy of today's headers with the last fields of three
#    option structs cut off (an older release's, as far as those structs
#    go): the library must write and read only the host's bytes (its
#    canaries stay) and give the missing fields their defaults.
host_src=$root/test/abi/old-host.c
old_inc=$(ls -d "$root"/abi/include-*/ 2>/dev/null | sort -V | tail -1)
uv_flags=$(pkg-config --cflags --libs libuv 2>/dev/null || echo -luv)
lib_flags=$(PKG_CONFIG_PATH=$build/meson-uninstalled pkg-config --libs uvtasks 2>/dev/null)
old_host() { # INCLUDE_DIR OUTPUT NAME
  # shellcheck disable=SC2086
  if cc -Wall -Werror -o "$2" "$host_src" -I"$1" $lib_flags $uv_flags 2>"$tmp/host-cc.err"; then
    out=$(LD_LIBRARY_PATH=$build "$2" 2>&1)
    rc=$?
    if [ "$rc" = 0 ]; then
      ok "A-2: $3: $(printf '%s\n' "$out" | grep -c '^ok ') checks ($(printf '%s\n' "$out" | head -1))"
    else
      bad "A-2: $3" "exit $rc: $out"
    fi
  else
    bad "A-2: $3 builds" "$(cat "$tmp/host-cc.err")"
  fi
}
if [ -z "$old_inc" ]; then
  bad "A-2: abi/include-X.Y.Z holds the last release's headers" "none"
else
  old_host "$old_inc" "$tmp/old-host" "a host built against $(basename "$old_inc")'s headers runs on the built library"
fi

# The grown library: today's headers with uvt_process_options_t's last
# field (durable), uvt_tools_options_t's last two (keep_spill, durable),
# uvt_tools_args_t's (match) and uvt_thread_options_t's (stack_size) cut
# off.
mkdir -p "$tmp/older/uvtasks"
cp "$root/include/uvtasks.h" "$tmp/older/"
cp "$root"/include/uvtasks/*.h "$tmp/older/uvtasks/"
python3 - "$tmp/older/uvtasks" <<'PY'
import re, sys
d = sys.argv[1]
def cut(name, pattern, count):
    path = d + '/' + name
    text = open(path).read()
    text, n = re.subn(pattern, '', text, flags=re.M)
    if n != count:
        sys.exit('%s: %d cuts of %r, expected %d' % (name, n, pattern, count))
    open(path, 'w').write(text)
cut('process.h', r'^  int durable;\n', 1)
cut('tools.h', r'^  int keep_spill;\n', 1)
cut('tools.h', r'^  int durable;\n', 1)
cut('tools.h', r'^  const char \*match; (?s:.*?)\*/\n', 1)
cut('thread.h', r'^  size_t stack_size; .*\n', 1)
PY
if [ $? = 0 ]; then
  old_host "$tmp/older" "$tmp/older-host" "the grown library: a host whose process, thread, tools options and arguments lack their last field runs on it"
  full=$(LD_LIBRARY_PATH=$build "$tmp/old-host" 2>/dev/null | head -1)
  cut=$(LD_LIBRARY_PATH=$build "$tmp/older-host" 2>/dev/null | head -1)
  if [ -n "$cut" ] && [ "$full" != "$cut" ]; then
    ok "A-2: the cut headers' structs are smaller ($cut)"
  else
    bad "A-2: the cut headers' structs are smaller" "$full / $cut"
  fi
else
  bad "A-2: the cut headers are made" "the fields to cut were not found"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
