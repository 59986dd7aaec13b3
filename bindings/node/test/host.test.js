// What a Node host author passes that the other suites do not: values a
// JS host hands over as a matter of course (contract §8 through N-4: the
// library's clauses hold; the binding only converts JS values to its
// arguments, the way node:child_process converts the same values).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { fixture } = require('./helpers')

// P-SPAWN-1, P-IN-1 (N-4): `stdin` as a string is that input, every
// character of it; only the texts 'pipe' and 'null' mean something else.
// A NUL in it is input like any other byte (write() takes it too), not a
// string to refuse.
test('stdin as a string may hold NUL characters (P-IN-1, N-4)', async () => {
  const { tasks } = fixture()
  const a = tasks.spawn({ command: 'cat', stdin: 'a\0b\0' })
  await tasks.wait(a, 10000)
  assert.deepEqual(tasks.readProcess(a).stdout, Buffer.from('a\0b\0'))
  const b = tasks.spawn({ command: 'cat', stdin: 'pipe\0' })
  await tasks.wait(b, 10000)
  assert.deepEqual(tasks.readProcess(b).stdout, Buffer.from('pipe\0'))
  const c = tasks.spawn({ command: 'cat', stdin: Buffer.from('pipe') })
  await tasks.wait(c, 10000)
  assert.deepEqual(tasks.readProcess(c).stdout, Buffer.from('pipe'))
  await tasks.close()
})

// P-SPAWN-3 (N-4): `env` gives extra variables.  A host builds it from
// its own options ({ DEBUG: opts.debug }); as node:child_process does, an
// entry whose value is undefined is no variable at all, not the text
// "undefined"; other values are their String().
test('env: an undefined value sets no variable; others are strings (P-SPAWN-3)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({
    command: 'echo "${UVTN_A-unset}|${UVTN_B-unset}|${UVTN_C-unset}"',
    env: { UVTN_A: undefined, UVTN_B: 'b', UVTN_C: 42 },
  })
  await tasks.wait(id, 10000)
  assert.equal(tasks.readProcess(id).stdout.toString(), 'unset|b|42\n')
  await tasks.close()
})

// N-1: a string the library takes as a C string (a command, an argv or
// env entry, a cwd, an id, a name, a reason) cannot hold a NUL: it would
// be cut there, so the call would act on another string than JS passed.
// A TypeError with code ERR_INVALID_ARG_VALUE, as node:child_process
// answers; nothing is registered.  Input bytes (stdin, write()) may.
test('a NUL in a C string argument is ERR_INVALID_ARG_VALUE, nothing started (N-1)', async () => {
  const { tasks } = fixture()
  const invalid = (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG_VALUE'
  assert.throws(() => tasks.spawn({ command: 'echo a\0b' }), invalid)
  assert.throws(() => tasks.spawn({ argv: ['echo', 'a\0b'] }), invalid)
  assert.throws(() => tasks.spawn({ command: 'true', env: { A: 'a\0b' } }), invalid)
  assert.throws(() => tasks.spawn({ command: 'true', cwd: '/tmp\0/x' }), invalid)
  assert.throws(() => tasks.get('bash-1\0'), invalid)
  assert.throws(() => tasks.registerAgent('a\0', 's'), invalid)
  assert.equal(tasks.metrics().started, 0)
  const id = tasks.spawn({ argv: ['cat'], stdin: 'pipe' })
  assert.throws(() => tasks.kill(id, undefined, 'why\0'), invalid)
  tasks.write(id, 'a\0b')
  tasks.closeStdin(id)
  await tasks.wait(id, 10000)
  assert.deepEqual(tasks.readProcess(id).stdout, Buffer.from('a\0b'))
  await tasks.close()
})

// R-CLOSE-1 through N-4: close() is the library's uvt_registry_close, and
// a second one is refused as it is there (UVT_ECLOSING, as a rejection),
// while the first still settles; every later call throws UVT_ECLOSING.
test('close() twice: the second rejects UVT_ECLOSING, the first resolves (R-CLOSE-1, N-1)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'sleep 30' })
  const first = tasks.close()
  await assert.rejects(tasks.close(), (e) => e.code === 'UVT_ECLOSING')
  await first
  await assert.rejects(tasks.close(), (e) => e.code === 'UVT_ECLOSING')
  assert.throws(() => tasks.get(id), (e) => e.code === 'UVT_ECLOSING')
  assert.throws(() => tasks.metrics(), (e) => e.code === 'UVT_ECLOSING')
})

// R-AGENT-4, R-DONE-1 through the binding: a JS producer whose `done`
// never settles is force-failed by disposal, and the library keeps its
// task handle until the producer settles (uvt_task_settle: "stays valid
// until the producer settles").  Once JS can no longer settle it (the
// promise and everything that could resolve it were collected), the
// binding settles it itself, so the handle is freed: 5000 such tasks
// must not stay held (about 1 KiB of native memory each, for ever).
// jsUnsettled() (test hook) counts the JS tasks the library still holds
// waiting for their settle.
test('force-failed JS tasks whose done can never settle are let go once collected (R-AGENT-4, L-2)', async () => {
  const path = require('node:path')
  const native = require(path.join(__dirname, '..', 'build', 'uvtasks.node'))
  const { collectGarbage } = require('./helpers')
  const before = native.jsUnsettled()
  const { tasks } = fixture({ teardownGraceMs: 1 })
  const N = 50
  const startOne = () => tasks.start({
    kind: 'js', label: 'never settles',
    run: () => ({ cancel() {}, done: new Promise(() => {}) }),
  })
  for (let i = 0; i < N; i++) startOne()
  assert.equal(native.jsUnsettled() - before, N)
  await tasks.close() // each one force-failed after teardownGraceMs
  // Nothing can settle them now; collecting their promises lets them go.
  for (let i = 0; i < 200 && native.jsUnsettled() > before; i++) {
    collectGarbage()
    await new Promise((resolve) => setImmediate(resolve))
  }
  assert.equal(native.jsUnsettled() - before, 0)
})

// The ESM entry point gives the same module by name and as its default
// export (import uvtasks from 'uvtasks'), one implementation either way.
test('the ESM entry point has named and default exports (N-1)', async () => {
  const esm = await import('../index.mjs')
  const cjs = require('..')
  assert.equal(esm.TaskRegistry, cjs.TaskRegistry)
  assert.equal(esm.default, cjs)
  assert.equal(esm.default.version, esm.version)
})
