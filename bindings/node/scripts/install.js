#!/usr/bin/env node
// `npm install` runs this (N-5).  A checkout builds the addon from the
// repository's sources; an installed package uses its prebuilt addon when
// one loads on this machine, and builds from the sources it was packed with
// only when none does (or when asked: npm_config_build_from_source /
// `npm install --build-from-source`, or UVTASKS_BUILD_FROM_SOURCE=1).
'use strict'
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { checkoutRoot } = require('./sources.js')

const pkg = path.resolve(__dirname, '..')
const forced = process.env.UVTASKS_BUILD_FROM_SOURCE === '1' ||
               process.env.npm_config_build_from_source === 'true'

function build(why) {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js'),
                                         ...process.argv.slice(2), '--why', why],
                      { stdio: 'inherit' })
  process.exit(r.status === null ? 1 : r.status)
}

// N-14: where the package runs at all, said at install, not at first use.
// npm refuses other platforms from package.json's os and cpu; this is for
// the installs that do not look (--force, other package managers).
const SUPPORTED = ['linux-x64', 'linux-arm64']
const platform = `${process.platform}-${process.arch}`
if (!SUPPORTED.includes(platform) && !forced) {
  console.error(`uvtasks: ${platform} is not supported. uvtasks runs on Linux: ` +
                'linux-x64 and linux-arm64 (prebuilt for glibc >= 2.34; musl ' +
                'builds from source). It needs Linux sessions, pidfds and /proc, ' +
                'so macOS and Windows cannot run it; another Linux CPU may try ' +
                'UVTASKS_BUILD_FROM_SOURCE=1 (untested).')
  process.exit(1)
}

if (checkoutRoot(pkg) !== null) build('checkout')
if (forced) build('forced')

// A prebuilt addon: loading it is the test that it fits (platform, libc,
// Node-API level).  In a child, so a crash cannot take the install down.
const probe = spawnSync(process.execPath, ['-e', `
  const { candidates } = require(${JSON.stringify(path.join(pkg, 'loader.js'))})
  for (const f of candidates().slice(1)) {
    try { require(f); console.log(f); process.exit(0) } catch (e) {
      console.error('uvtasks: ' + f + ' does not load: ' + e.message.split('\\n')[0])
    }
  }
  process.exit(1)`], { encoding: 'utf8' })
if (probe.status === 0) {
  console.log(`uvtasks: using the prebuilt addon ${path.relative(pkg, probe.stdout.trim())}`)
  process.exit(0)
}
if (probe.stderr) process.stderr.write(probe.stderr)
console.log(`uvtasks: no prebuilt addon fits ${process.platform}-${process.arch}; ` +
            'building from source')
build('fallback')
