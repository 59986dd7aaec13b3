#!/bin/sh
# S-1..S-3 as an unprivileged user: the sandbox suite ($1) run again as
# `nobody` (uid and gid 65534, no groups, no capabilities), from a copy in
# a directory of its own so that nothing of the build tree needs to be
# readable by it; $2, the sandbox's own program (uvtasks-sandbox, S-2,
# S-9), is copied there too.  Skipped (77) unless run as root with setpriv.
set -u
[ "$(id -u)" = 0 ] || exit 77
command -v setpriv >/dev/null 2>&1 || exit 77
dir=$(mktemp -d /tmp/uvt-sbx-nobody-XXXXXX) || exit 1
cp "$1" "$dir/suite" && chmod 755 "$dir" "$dir/suite" || exit 1
if [ $# -ge 2 ]; then
  cp "$2" "$dir/uvtasks-sandbox" && chmod 755 "$dir/uvtasks-sandbox" || exit 1
  UVTASKS_SANDBOX_HELPER=$dir/uvtasks-sandbox
  export UVTASKS_SANDBOX_HELPER
fi
cd "$dir" || exit 1
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
  "$dir/suite"
rc=$?
cd / && rm -rf "$dir"
exit $rc
