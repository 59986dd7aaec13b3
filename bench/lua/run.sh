#!/usr/bin/env bash
# uvtasks against jobstart in headless Neovim (issue 36, docs/lua.md):
# a small Neovim, then one holding 600 MiB of Lua data; then the bounds
# (bounds.lua: RSS of a host that never reads, CPU per end at 5,000
# records) in luajit and in Neovim.
#   bash bench/lua/run.sh [build-dir]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
export LUA_CPATH="$PWD/$build/bindings/lua/?.so;;"
for mib in 0 600; do
  UVTL_BENCH_MIB=$mib nvim --headless -u NONE -i NONE -n \
    -c "luafile bench/lua/bench.lua"
done
luajit bench/lua/bounds.lua
nvim --headless -u NONE -i NONE -n -c "luafile bench/lua/bounds.lua"
