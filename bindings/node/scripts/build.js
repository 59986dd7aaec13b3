#!/usr/bin/env node
// Builds the addon (build/uvtasks.node) with meson against the headers of
// the Node that runs this script: `npm install` runs it.  Why meson and not
// node-gyp: see the README ("Use from Node", Build).
//
//   node scripts/build.js            configure (or reconfigure) and compile
//   --nodedir DIR / npm_config_nodedir   Node's prefix or header directory
//   UVTASKS_WERROR=1                 warnings are errors (the project's CI)
//   UVTASKS_BUILDTYPE=debug          an unoptimised build
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const pkg = path.resolve(__dirname, '..')
const build = path.join(pkg, 'build')

function fail(msg) {
  console.error(`uvtasks: ${msg}`)
  process.exit(1)
}

// A Node built with a shared libuv (Debian's own nodejs) keeps uv.h with
// that libuv (/usr/include), not beside node_api.h; its uv_* symbols then
// come from that libuv, and these are the headers that match it.
const sharedUv = process.config.variables.node_shared_libuv === true ||
                 process.config.variables.node_shared_libuv === 'true'

function hasHeaders(dir) {
  return fs.existsSync(path.join(dir, 'node_api.h')) &&
         (fs.existsSync(path.join(dir, 'uv.h')) ||
          (sharedUv && fs.existsSync('/usr/include/uv.h')))
}

// The directory with node_api.h and uv.h: a --nodedir (a prefix, a source
// tree or the header directory itself), else the prefix of this Node.
function nodeInclude() {
  const i = process.argv.indexOf('--nodedir')
  const given = i > 0 ? process.argv[i + 1] : process.env.npm_config_nodedir
  const prefix = path.resolve(process.execPath, '..', '..')
  const candidates = given
    ? [given, path.join(given, 'include', 'node'), path.join(given, 'src')]
    : [path.join(prefix, 'include', 'node'), '/usr/include/node',
       '/usr/include/nodejs']
  for (const c of candidates) {
    if (hasHeaders(c)) return path.resolve(c)
  }
  fail(`no Node headers (node_api.h and uv.h) in ${candidates.join(', ')}; ` +
       'install the ones of this Node (Debian: libnode-dev, or the nodejs ' +
       'package of the Node you run) or pass --nodedir')
}

// The library's sources: deps/uvtasks in a packed tarball, else the
// repository this folder sits in.
function uvtasksRoot() {
  for (const c of [path.join(pkg, 'deps', 'uvtasks'), path.join(pkg, '..', '..')]) {
    if (fs.existsSync(path.join(c, 'include', 'uvtasks.h')) &&
        fs.existsSync(path.join(c, 'src', 'registry.c'))) return path.resolve(c)
  }
  fail('the library sources (include/uvtasks.h, src/) are not beside this package')
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { stdio: 'inherit' })
  if (r.error && r.error.code === 'ENOENT') {
    fail(`${cmd} not found: building the addon needs meson, ninja and a C ` +
         'compiler (Debian: apt-get install meson ninja-build gcc)')
  }
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed`)
}

const include = nodeInclude()
const root = uvtasksRoot()
const versionFile = path.join(include, 'node_version.h')
if (fs.existsSync(versionFile)) {
  const m = /#define NODE_MAJOR_VERSION (\d+)/.exec(fs.readFileSync(versionFile, 'utf8'))
  const major = process.versions.node.split('.')[0]
  if (m && m[1] !== major) {
    console.warn(`uvtasks: headers in ${include} are Node ${m[1]}, this is Node ${major}`)
  }
}
const uvInclude = fs.existsSync(path.join(include, 'uv.h')) ? include : '/usr/include'
const opts = [
  `-Dnode_include=${include}`,
  `-Duv_include=${uvInclude}`,
  `-Duvtasks_root=${root}`,
  `-Dbuildtype=${process.env.UVTASKS_BUILDTYPE || 'release'}`,
  `-Dwerror=${process.env.UVTASKS_WERROR === '1'}`,
]
if (fs.existsSync(path.join(build, 'build.ninja'))) {
  // Reconfigure: picks up library files added since, and new options.
  run('meson', ['setup', '--reconfigure', build, pkg, ...opts])
} else {
  run('meson', ['setup', build, pkg, ...opts])
}
run('meson', ['compile', '-C', build])
