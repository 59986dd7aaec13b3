#!/usr/bin/env node
// `npm pack` / `npm publish` (prepack, after vendor.js): builds the addon
// from the repository's sources and puts it where the loader looks for a
// prebuilt one, prebuilds/<platform>-<arch>/node.napi.glibc.node (N-5).
// Only the machine's own platform: a prebuilt addon that was never loaded
// and tested is not shipped.  UVTASKS_WERROR=1 as for build.js.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const pkg = path.resolve(__dirname, '..')
const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')],
                    { stdio: 'inherit' })
if (r.status !== 0) process.exit(1)
const dir = path.join(pkg, 'prebuilds', `${process.platform}-${process.arch}`)
fs.rmSync(path.join(pkg, 'prebuilds'), { recursive: true, force: true })
fs.mkdirSync(dir, { recursive: true })
const dest = path.join(dir, 'node.napi.glibc.node')
fs.copyFileSync(path.join(pkg, 'build', 'uvtasks.node'), dest)
// Strip symbols the loader does not need (a third of the size), if strip
// is there.
spawnSync('strip', ['--strip-unneeded', dest], { stdio: 'ignore' })
// It must load here, or it is not shipped.
const check = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(dest)})`],
                        { stdio: 'inherit' })
if (check.status !== 0) {
  console.error(`uvtasks: ${dest} does not load; not packing it`)
  process.exit(1)
}
console.log(`uvtasks: prebuilt ${path.relative(pkg, dest)}`)
