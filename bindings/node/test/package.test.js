// N-5: the package installs and runs with no toolchain, from its prebuilt
// addon; with install scripts skipped it works from the prebuilt addon or
// fails at require with the fix in the message; a source build names every
// missing tool; and D1: a checkout builds the repository's sources, a
// packed tarball only the ones it was packed with.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { librarySources } = require('../scripts/sources.js')

const pkg = path.resolve(__dirname, '..')

function touch(file) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, '')
}

function fakeLibrary(dir) {
  touch(path.join(dir, 'include', 'uvtasks.h'))
  touch(path.join(dir, 'src', 'registry.c'))
}

function tmpdir(t) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'uvtasks-pkg-'))
  t.after(() => fs.rmSync(d, { recursive: true, force: true }))
  return d
}

// N-5 D1: what `npm pack` leaves in deps/ of a checkout is never built.
test('N-5 D1: a checkout builds its repository, not a stale deps/uvtasks', (t) => {
  const repo = tmpdir(t)
  fakeLibrary(repo)
  const p = path.join(repo, 'bindings', 'node')
  fakeLibrary(path.join(p, 'deps', 'uvtasks'))
  assert.deepEqual(librarySources(p), { root: repo, origin: 'checkout' })
})

test('N-5 D1: a packed package builds what it was packed with, wherever installed', (t) => {
  // Installed into a folder that itself holds uvtasks sources.
  const repo = tmpdir(t)
  fakeLibrary(repo)
  const p = path.join(repo, 'node_modules', 'uvtasks')
  fakeLibrary(path.join(p, 'deps', 'uvtasks'))
  assert.deepEqual(librarySources(p),
                   { root: path.join(p, 'deps', 'uvtasks'), origin: 'packed' })
  // A packed package without its sources says so, not builds others.
  fs.rmSync(path.join(p, 'deps'), { recursive: true })
  assert.throws(() => librarySources(p), /library sources are missing/)
})

// ---- the real tarball -------------------------------------------------------

// A PATH with node, npm and sh only: no meson, ninja or C compiler.
function barePath(dir) {
  const bin = path.join(dir, 'bin')
  fs.mkdirSync(bin)
  const which = (c) => spawnSync('sh', ['-c', `command -v ${c}`], { encoding: 'utf8' }).stdout.trim()
  for (const c of ['node', 'npm', 'sh']) {
    const where = c === 'node' ? process.execPath : which(c)
    assert.ok(where, `${c} on PATH`)
    fs.symlinkSync(where, path.join(bin, c))
  }
  for (const c of ['meson', 'ninja', 'cc', 'gcc', 'clang']) {
    assert.equal(spawnSync(c, ['--version'], { env: { PATH: bin } }).error?.code, 'ENOENT')
  }
  return bin
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts })
  return { ...r, all: `${r.stdout}\n${r.stderr}` }
}

// `npm pack` once per file, into a folder of its own.
const packDir = fs.mkdtempSync(path.join(os.tmpdir(), 'uvtasks-pack-'))
process.on('exit', () => fs.rmSync(packDir, { recursive: true, force: true }))
let tarball = null
function pack() {
  if (tarball !== null) return tarball
  const r = run('npm', ['pack', '--pack-destination', packDir, '--loglevel=error'], { cwd: pkg })
  assert.equal(r.status, 0, r.all)
  tarball = path.join(packDir, r.stdout.trim().split('\n').pop())
  return tarball
}

function project(dir, name, bin) {
  const proj = path.join(dir, name)
  fs.mkdirSync(proj)
  fs.writeFileSync(path.join(proj, 'package.json'),
                   JSON.stringify({ name, version: '1.0.0', private: true }))
  fs.copyFileSync(path.join(__dirname, 'fixtures', 'package-host.js'),
                  path.join(proj, 'host.js'))
  const env = { ...process.env, PATH: bin, npm_config_cache: path.join(dir, 'npm-cache') }
  delete env.CC
  delete env.UVTASKS_BUILD_FROM_SOURCE
  delete env.npm_config_build_from_source
  return { proj, env }
}

function install(proj, env, tgz, ...flags) {
  return run('npm', ['install', '--no-audit', '--no-fund', '--offline',
                     '--foreground-scripts', ...flags, tgz],
             { cwd: proj, env })
}

function runHost(proj, env) {
  return run('node', ['host.js'], { cwd: proj, env })
}

test('N-5: the packed tarball carries a prebuilt addon, README, LICENSE and its sources', (t) => {
  const dir = tmpdir(t)
  const tgz = pack()
  const r = run('tar', ['tzf', tgz])
  const files = r.stdout.split('\n')
  for (const f of ['package/README.md', 'package/LICENSE', 'package/loader.js',
                   'package/prebuilds/linux-x64/node.napi.glibc.node',
                   'package/prebuilds/linux-arm64/node.napi.glibc.node', // N-14
                   'package/prebuilds/linux-x64/uvtasks-keeper', // D-1
                   'package/prebuilds/linux-arm64/uvtasks-keeper',
                   'package/deps/uvtasks/include/uvtasks.h',
                   'package/deps/uvtasks/src/registry.c']) {
    if (f.includes('linux-x64') && `${process.platform}-${process.arch}` !== 'linux-x64') continue
    assert.ok(files.includes(f), `${f} in the tarball`)
  }
  assert.ok(!files.some((f) => f.startsWith('package/build/')), 'no build/ in the tarball')
  assert.ok(!files.some((f) => /^package\/(build-arm64|test)\//.test(f)), 'no build-arm64/, test/')
  // D1: packing leaves nothing behind in the checkout.
  assert.ok(!fs.existsSync(path.join(pkg, 'deps')), 'deps/ removed after pack')
  assert.ok(!fs.existsSync(path.join(pkg, 'prebuilds')), 'prebuilds/ removed after pack')
})

test('N-5: installs and runs with no meson, ninja or C compiler', (t) => {
  const dir = tmpdir(t)
  const { proj, env } = project(dir, 'host', barePath(dir))
  const r = install(proj, env, pack())
  assert.equal(r.status, 0, r.all)
  assert.match(r.all, /using the prebuilt addon prebuilds\/linux-x64\/node\.napi\.glibc\.node/)
  assert.ok(!fs.existsSync(path.join(proj, 'node_modules', 'uvtasks', 'build')))
  const h = runHost(proj, env)
  assert.equal(h.status, 0, h.all)
  assert.equal(h.stdout, `${require('..').version} completed 3 hello\n`)
})

test('N-5: with install scripts skipped it runs from the prebuilt addon', (t) => {
  const dir = tmpdir(t)
  const { proj, env } = project(dir, 'host', barePath(dir))
  const r = install(proj, env, pack(), '--ignore-scripts')
  assert.equal(r.status, 0, r.all)
  const h = runHost(proj, env)
  assert.equal(h.status, 0, h.all)
  assert.match(h.stdout, / completed 3 hello\n$/)

  // With no prebuilt addon for the machine, require names the fix.
  fs.rmSync(path.join(proj, 'node_modules', 'uvtasks', 'prebuilds'), { recursive: true })
  const f = runHost(proj, env)
  assert.notEqual(f.status, 0)
  assert.match(f.stderr, /no addon for linux-x64/)
  assert.match(f.stderr, /npm rebuild uvtasks/)
  assert.match(f.stderr, /UVT_ENOADDON/)

  // And the fallback build names every missing tool at once.
  const b = run('node', [path.join('node_modules', 'uvtasks', 'scripts', 'install.js')],
                { cwd: proj, env })
  assert.equal(b.status, 1, b.all)
  assert.match(b.all, /no prebuilt addon fits linux-x64; building from source/)
  assert.match(b.all, /meson, ninja, a C compiler \(cc, gcc or clang\) not found/)
})

test('N-5: with no prebuilt addon that fits, the install builds the packed sources', (t) => {
  const dir = tmpdir(t)
  const { proj, env } = project(dir, 'host', process.env.PATH)
  // The tarball, minus its prebuilt addon.
  const x = path.join(dir, 'x')
  fs.mkdirSync(x)
  assert.equal(run('tar', ['xzf', pack(), '-C', x]).status, 0)
  fs.rmSync(path.join(x, 'package', 'prebuilds'), { recursive: true })
  const tgz = path.join(dir, 'unprebuilt.tgz')
  assert.equal(run('tar', ['czf', tgz, '-C', x, 'package']).status, 0)
  const r = install(proj, env, tgz)
  assert.equal(r.status, 0, r.all)
  assert.match(r.all, /building the addon from the sources packed with it/)
  assert.match(r.all, new RegExp(`\\(${path.join(proj, 'node_modules', 'uvtasks', 'deps', 'uvtasks')}\\)`))
  const h = runHost(proj, env)
  assert.equal(h.status, 0, h.all)
  assert.match(h.stdout, / completed 3 hello\n$/)
})

// N-13: a forced source build without a toolchain says it was asked for,
// not that no prebuilt addon fits (one does).
test('N-13: --build-from-source without a toolchain says a source build was asked for', (t) => {
  const dir = tmpdir(t)
  const { proj, env } = project(dir, 'host', barePath(dir))
  assert.equal(install(proj, env, pack(), '--ignore-scripts').status, 0)
  const script = path.join('node_modules', 'uvtasks', 'scripts', 'install.js')
  for (const forced of [{ UVTASKS_BUILD_FROM_SOURCE: '1' }, { npm_config_build_from_source: 'true' }]) {
    const b = run('node', [script], { cwd: proj, env: { ...env, ...forced } })
    assert.equal(b.status, 1, b.all)
    assert.match(b.all, /meson, ninja, a C compiler \(cc, gcc or clang\) not found/)
    assert.match(b.all, /A build from source was asked for/)
    assert.doesNotMatch(b.all, /No prebuilt addon fits/)
  }
})

// N-14: a platform it does not run on fails at install, naming the ones it
// runs on: npm from package.json's os and cpu, the install script for
// installs that do not look (--force, other package managers).
test('N-14: unsupported platforms fail at install with the supported ones named', (t) => {
  const dir = tmpdir(t)
  const { proj, env } = project(dir, 'host', barePath(dir))
  assert.equal(install(proj, env, pack(), '--ignore-scripts').status, 0)
  const script = path.join('node_modules', 'uvtasks', 'scripts', 'install.js')
  const fake = path.join(dir, 'fake-platform.js')
  for (const [platform, arch] of [['darwin', 'arm64'], ['win32', 'x64'], ['linux', 'riscv64']]) {
    fs.writeFileSync(fake, `Object.defineProperty(process, 'platform', { value: '${platform}' })\n` +
                           `Object.defineProperty(process, 'arch', { value: '${arch}' })\n`)
    const b = run('node', ['--require', fake, script], { cwd: proj, env })
    assert.equal(b.status, 1, b.all)
    assert.match(b.stderr, new RegExp(`${platform}-${arch} is not supported`))
    assert.match(b.stderr, /linux-x64 and linux-arm64/)
  }
  const pj = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8'))
  assert.deepEqual(pj.os, ['linux'])
  assert.deepEqual(pj.cpu, ['x64', 'arm64'])
})

// N-14: the release command is clean: it packs both prebuilt addons (each
// loaded first, the arm64 one under qemu-user) and warns of nothing but
// the login a dry run does without.
test('N-14: npm publish --dry-run is clean and ships linux-x64 and linux-arm64', () => {
  const r = run('npm', ['publish', '--dry-run'], { cwd: pkg })
  assert.equal(r.status, 0, r.all)
  const warnings = r.all.split('\n').filter((l) => /^npm (warn|error)/i.test(l) &&
    !/requires you to be logged in/.test(l))
  assert.deepEqual(warnings, [])
  assert.match(r.all, /prebuilt prebuilds\/linux-arm64\/node\.napi\.glibc\.node \(cross-compiled, loaded under qemu-user\)/)
  assert.match(r.all, /npm notice [\d.]+k?B prebuilds\/linux-x64\/node\.napi\.glibc\.node/)
  assert.match(r.all, /npm notice [\d.]+k?B prebuilds\/linux-arm64\/node\.napi\.glibc\.node/)
  assert.doesNotMatch(r.all, /npm notice [\d.]+k?B test\//)
  assert.ok(!fs.existsSync(path.join(pkg, 'prebuilds')), 'prebuilds/ removed after the dry run')
})
