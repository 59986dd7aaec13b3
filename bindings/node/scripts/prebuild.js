#!/usr/bin/env node
// `npm pack` / `npm publish` (prepack, after vendor.js): builds the addons
// the package ships and puts them where the loader looks for prebuilt
// ones, prebuilds/<platform>-<arch>/node.napi.glibc.node (N-5, N-14):
//
//   linux-x64    built from the repository's sources (build.js) and
//                loaded by this Node;
//   linux-arm64  cross-compiled (scripts/cross.js) and loaded by an arm64
//                Node under qemu-user.
//
// A prebuilt addon that was never loaded is not shipped: a machine without
// the cross tools fails here and names them, unless UVTASKS_PREBUILD=native
// (this machine's platform only: a developer's pack, never a release).
// UVTASKS_WERROR=1 as for build.js.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { librarySources } = require('./sources.js')
const cross = require('./cross.js')

const pkg = path.resolve(__dirname, '..')
const native = `${process.platform}-${process.arch}`

function fail(msg) {
  console.error(`uvtasks: ${msg}`)
  process.exit(1)
}

const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')],
                    { stdio: 'inherit' })
if (r.status !== 0) process.exit(1)
fs.rmSync(path.join(pkg, 'prebuilds'), { recursive: true, force: true })
const dest = path.join(pkg, 'prebuilds', native, 'node.napi.glibc.node')
fs.mkdirSync(path.dirname(dest), { recursive: true })
fs.copyFileSync(path.join(pkg, 'build', 'uvtasks.node'), dest)
// D-1: durable tasks' keeper, where the library looks for it: beside the
// addon it is linked into.
cross.installKeeper(path.join(pkg, 'build', 'uvtasks-keeper'), path.dirname(dest))
// Strip symbols the loader does not need (a third of the size), if strip
// is there.
spawnSync('strip', ['--strip-unneeded', dest], { stdio: 'ignore' })
// It must load here, or it is not shipped.
const check = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(dest)})`],
                        { stdio: 'inherit' })
if (check.status !== 0) fail(`${dest} does not load; not packing it`)
console.log(`uvtasks: prebuilt ${path.relative(pkg, dest)}`)

if (native === 'linux-x64' && process.env.UVTASKS_PREBUILD !== 'native') {
  const arm = path.join(pkg, 'prebuilds', 'linux-arm64', 'node.napi.glibc.node')
  try {
    cross.installArm64(cross.buildArm64(librarySources(pkg).root), arm)
  } catch (err) {
    fs.rmSync(path.dirname(arm), { recursive: true, force: true })
    fail(`${err.message}. The package ships linux-arm64 only as an addon ` +
         'built and loaded here; UVTASKS_PREBUILD=native packs linux-x64 alone.')
  }
  console.log(`uvtasks: prebuilt ${path.relative(pkg, arm)} (cross-compiled, loaded under qemu-user)`)
}
