// Finds and loads the compiled addon (N-5).  In order:
//
//   build/uvtasks.node                        a source build (a checkout,
//                                             or the fallback of an install)
//   prebuilds/<platform>-<arch>/*.node        the prebuilt addons shipped
//                                             in the package
//
// The prebuilds follow node-gyp-build's layout and names (node.napi.glibc.node:
// Node-API, so one file serves every Node with Node-API 8 and libuv >= 1.44,
// that is Node >= 18), so that tool
// could load them too; this package has its own loader of a few lines rather
// than a dependency, since it has no other and needs none of node-gyp-build's
// tag matching: a file that does not fit the machine fails to load and the
// next one is tried.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const pkg = __dirname
const platformDir = `${process.platform}-${process.arch}`

// Every file to try, best first.
function candidates() {
  const list = [path.join(pkg, 'build', 'uvtasks.node')]
  const dir = path.join(pkg, 'prebuilds', platformDir)
  let names = []
  try {
    names = fs.readdirSync(dir).filter((f) => f.endsWith('.node')).sort()
  } catch {}
  for (const n of names) list.push(path.join(dir, n))
  return list
}

function load() {
  const tried = []
  for (const file of candidates()) {
    if (!fs.existsSync(file)) continue
    try {
      return require(file)
    } catch (err) {
      tried.push(`${path.relative(pkg, file)}: ${err.message.split('\n')[0]}`)
    }
  }
  const e = new Error(
    `uvtasks: no addon for ${platformDir} (Node ${process.versions.node}) in ` +
    `${pkg}: ` +
    (tried.length > 0 ? `none would load (${tried.join('; ')}). `
                      : 'no prebuilt one ships for this platform, and it was ' +
                        'not built here (install scripts skipped, or the build failed). ') +
    'Fix: run `npm rebuild uvtasks` (pnpm: `pnpm rebuild uvtasks`, or allow ' +
    'its build script) on a machine with meson, ninja, a C compiler and the ' +
    'Node headers (Debian: apt-get install meson ninja-build gcc libnode-dev).')
  e.code = 'UVT_ENOADDON'
  throw e
}

module.exports = { load, candidates, platformDir }
