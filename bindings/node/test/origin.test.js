// N-9: faithful to the origin, whose own tests these are (ported).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { fixture, controlled } = require('./helpers.js')

const codeOf = (code) => (e) => e.code === code

// N-9 D3: output a JS producer still holds when it settles is read once
// more and delivered, before the outcome's own output.
test('N-9 D3: output held at settlement is read once more and delivered', async () => {
  const { tasks } = fixture()
  const s = controlled({ stream: true })
  const id = tasks.start({ kind: 'stream', label: 's', run: s.run })
  s.output = 'first\n'
  assert.equal(tasks.read(id).text, 'first\n')
  s.output = 'held at the end\n'
  s.end({ status: 'completed', output: 'tail\n' })
  await tasks.wait(id, 5000)
  assert.equal(tasks.read(id).text, 'held at the end\ntail\n')
  assert.equal(tasks.read(id).text, '')
  await tasks.close()
})

test('N-9 D3: also on a rejected done, with Buffers, and with no outcome output', async () => {
  const { tasks } = fixture()
  const a = controlled({ stream: true })
  const b = controlled({ stream: true })
  const ia = tasks.start({ kind: 'stream', label: 'a', run: a.run })
  const ib = tasks.start({ kind: 'stream', label: 'b', run: b.run })
  a.output = 'before the failure\n'
  a.fail(new Error('boom'))
  b.output = Buffer.from('bytes \xff\n', 'latin1')
  b.end({ status: 'completed' })
  const sa = await tasks.wait(ia, 5000)
  assert.equal(sa.status, 'failed')
  assert.match(sa.detail, /boom/)
  assert.equal(tasks.read(ia).text, 'before the failure\n')
  await tasks.wait(ib, 5000)
  assert.match(tasks.read(ib).text, /^bytes .*\n$/)
  await tasks.close()
})

test('N-9 D3: a readOutput that throws at settlement still lets the task settle', async () => {
  const { tasks } = fixture()
  const errors = []
  const orig = console.error
  console.error = (...a) => errors.push(a.join(' '))
  try {
    const id = tasks.start({
      kind: 'stream', label: 's',
      run() {
        let end
        const done = new Promise((r) => { end = r })
        setImmediate(() => end({ status: 'completed', output: 'tail\n' }))
        return { cancel() {}, done, readOutput() { throw new Error('reader broke') } }
      },
    })
    const snap = await tasks.wait(id, 5000)
    assert.equal(snap.status, 'completed')
    assert.ok(errors.some((e) => /reader broke/.test(e)), errors.join('\n'))
  } finally {
    console.error = orig
  }
  await tasks.close()
})

// N-9 D4: a throwing onTaskDone listener is contained: logged, the other
// listeners run, the host does not crash.
test('N-9 D4: a throwing onTaskDone listener is logged and the others run', async () => {
  const { tasks } = fixture()
  const uncaught = []
  const onUncaught = (e) => uncaught.push(e)
  process.on('uncaughtException', onUncaught)
  const errors = []
  const orig = console.error
  console.error = (...a) => errors.push(a.map(String).join(' '))
  try {
    const seen = []
    tasks.onTaskDone(() => { throw new Error('listener one broke') })
    tasks.onTaskDone((s) => seen.push(['two', s.id]))
    tasks.onTaskDone(() => { throw 'a string, not an Error' }) // eslint-disable-line no-throw-literal
    tasks.onTaskDone((s) => seen.push(['four', s.id]))
    const c1 = controlled()
    const c2 = controlled()
    const id1 = tasks.start({ kind: 'js', label: 'a', run: c1.run })
    const id2 = tasks.start({ kind: 'js', label: 'b', run: c2.run })
    const all = new Promise((resolve) => tasks.onTaskDone((s) => { if (s.id === id2) resolve() }))
    c1.end({ status: 'completed' })
    c2.end({ status: 'failed', detail: 'x' })
    await all
    assert.deepEqual(seen, [['two', id1], ['four', id1], ['two', id2], ['four', id2]])
    assert.equal(errors.filter((e) => /listener one broke/.test(e)).length, 2, errors.join('\n'))
    assert.equal(errors.filter((e) => /a string, not an Error/.test(e)).length, 2, errors.join('\n'))
    // Let any deferred uncaught exception surface.
    await new Promise((r) => setImmediate(r))
    assert.deepEqual(uncaught, [])
  } finally {
    console.error = orig
    process.removeListener('uncaughtException', onUncaught)
  }
  await tasks.close()
})

// N-9 D5: wait refuses a zero, negative, NaN or infinite timeout with the
// same EINVAL (after the id checks, R-WAIT-1); no timeout waits for ever.
test('N-9 D5: wait refuses 0, negative, NaN and infinite timeouts with EINVAL', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  for (const t of [0, -1, -5, -0.5, NaN, Infinity, -Infinity]) {
    await assert.rejects(tasks.wait(id, t), codeOf('EINVAL'), `timeout ${t}`)
    await assert.rejects(tasks.wait('js-99', t), codeOf('UVT_ENOTASK'), `timeout ${t}`)
  }
  await assert.rejects(tasks.wait(id, '10'), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.equal(tasks.get(id).status, 'running')
  // No timeout at all: waits until the end, however long.
  const forever = tasks.wait(id)
  const alsoForever = tasks.wait(id, null)
  c.end({ status: 'completed' })
  assert.equal((await forever).status, 'completed')
  assert.equal((await alsoForever).status, 'completed')
  await tasks.close()
})
