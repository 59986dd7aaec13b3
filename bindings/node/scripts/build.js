#!/usr/bin/env node
// Builds the addon (build/uvtasks.node) with meson against the headers of
// the Node that runs this script: `npm install` runs it.  Why meson and not
// node-gyp: see docs/node.md ("Build").
//
//   node scripts/build.js            configure (or reconfigure) and compile
//   --nodedir DIR / npm_config_nodedir   Node's prefix or header directory
//   UVTASKS_WERROR=1                 warnings are errors (the project's CI)
//   UVTASKS_BUILDTYPE=debug          an unoptimised build
//   --why checkout|forced|fallback   why install.js builds (N-13: a
//                                    missing tool's message says which)
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { librarySources } = require('./sources.js')

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

// The library's sources (scripts/sources.js): a checkout builds its own
// repository, a packed package the copy it was packed with (D1).
function uvtasksRoot() {
  try {
    const { root, origin } = librarySources(pkg)
    console.log(`uvtasks: building the addon from ${origin === 'checkout'
      ? 'the repository' : 'the sources packed with it'} (${root})`)
    return root
  } catch (err) {
    fail(err.message)
  }
}

function onPath(cmd) {
  if (cmd.includes('/')) return fs.existsSync(cmd)
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir !== '' && fs.existsSync(path.join(dir, cmd))) return true
  }
  return false
}

// Every tool the build needs, named at once rather than one failure at a
// time.
function checkTools() {
  const cc = process.env.CC ? process.env.CC.split(' ')[0] : null
  const missing = []
  if (!onPath('meson')) missing.push('meson')
  if (!onPath('ninja') && !onPath('samu')) missing.push('ninja')
  if (cc ? !onPath(cc) : !['cc', 'gcc', 'clang'].some(onPath)) {
    missing.push(cc ? `the C compiler ${cc} (CC)` : 'a C compiler (cc, gcc or clang)')
  }
  if (missing.length > 0) {
    fail(`cannot build the addon from source: ${missing.join(', ')} not found ` +
         'on PATH (Debian: apt-get install meson ninja-build gcc; the Node ' +
         `headers: libnode-dev). ${WHY[why()] ?? WHY.direct}`)
  }
}

// N-13: why this build runs, for the message of a missing tool.
const platform = `${process.platform}-${process.arch}`
const WHY = {
  checkout: 'A checkout builds its own addon from the repository.',
  forced: 'A build from source was asked for (npm install --build-from-source, ' +
          'npm_config_build_from_source or UVTASKS_BUILD_FROM_SOURCE=1); without ' +
          'that, the install uses the prebuilt addon where one fits ' +
          '(linux-x64, linux-arm64 with glibc).',
  fallback: `No prebuilt addon fits this machine (${platform}), so a source ` +
            'build is the only way.',
  direct: 'scripts/build.js builds the addon from source.',
}

function why() {
  const i = process.argv.indexOf('--why')
  return i > 0 ? process.argv[i + 1] : 'direct'
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { stdio: 'inherit' })
  if (r.error && r.error.code === 'ENOENT') {
    fail(`${cmd} not found: building the addon needs meson, ninja and a C ` +
         'compiler (Debian: apt-get install meson ninja-build gcc)')
  }
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed`)
}

checkTools()
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
]
// A reconfigure keeps the build type and warning setting it had unless
// they are given again (a pack's prebuild reuses the tested build as is).
const configured = fs.existsSync(path.join(build, 'build.ninja'))
if (!configured || process.env.UVTASKS_BUILDTYPE !== undefined) {
  opts.push(`-Dbuildtype=${process.env.UVTASKS_BUILDTYPE || 'release'}`)
}
if (!configured || process.env.UVTASKS_WERROR !== undefined) {
  opts.push(`-Dwerror=${process.env.UVTASKS_WERROR === '1'}`)
}
if (configured) {
  // Reconfigure: picks up library files added since, and new options.
  run('meson', ['setup', '--reconfigure', build, pkg, ...opts])
} else {
  run('meson', ['setup', build, pkg, ...opts])
}
run('meson', ['compile', '-C', build])
