// N-6: output handed over as bytes (onData) and as Readable streams, input
// as a Writable with 'drain'; nothing dropped while the host is attached.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const path = require('node:path')
const { Writable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const { fixture, busyWait } = require('./helpers.js')
const { sha256 } = require('./fixtures/pattern.js')

const pattern = path.join(__dirname, 'fixtures', 'pattern.js')
const codeOf = (code) => (e) => e.code === code

test('N-6: 50 MB through onData with a slow consumer, byte-exact, none dropped', async () => {
  const { tasks } = fixture()
  const total = 50 * 1024 * 1024
  const h = crypto.createHash('sha256')
  let bytes = 0
  let calls = 0
  const streams = new Set()
  const id = tasks.spawn({
    argv: [process.execPath, pattern, String(total)],
    outputCapBytes: 256 * 1024,
    onData(chunk, stream, tid) {
      assert.ok(Buffer.isBuffer(chunk))
      streams.add(`${stream} ${tid}`)
      h.update(chunk)
      bytes += chunk.length
      calls++
      if (calls % 4 === 0) busyWait(2) // UI work: the reader falls behind
    },
  })
  const snap = await tasks.wait(id)
  assert.equal(snap.status, 'completed', snap.detail)
  assert.equal(bytes, total)
  assert.equal(h.digest('hex'), sha256(total))
  assert.deepEqual([...streams], [`stdout ${id}`])
  // Consumed: nothing is left for a read.
  const r = tasks.readProcess(id)
  assert.equal(r.stdout.length + r.stderr.length, 0)
  assert.equal(r.stdoutDropped, 0)
  assert.equal(r.exitCode, 0)
  await tasks.close()
})

test('N-6: stdout and stderr apart; the last bytes come before the end is known', async () => {
  const { tasks } = fixture()
  const ids = []
  const got = new Map()
  const seenAtDone = new Map()
  tasks.onTaskDone((s) => seenAtDone.set(s.id, got.get(s.id)))
  for (let i = 0; i < 20; i++) {
    const id = tasks.spawn({
      command: `printf 'out ${i}\\n'; printf 'err ${i}' >&2; printf tail`,
      onData(chunk, stream, tid) {
        const g = got.get(tid) || { stdout: '', stderr: '' }
        g[stream] += chunk.toString()
        got.set(tid, g)
      },
    })
    ids.push(id)
  }
  for (const [i, id] of ids.entries()) {
    await tasks.wait(id, 10000)
    const want = { stdout: `out ${i}\ntail`, stderr: `err ${i}` }
    assert.deepEqual(got.get(id), want)
    assert.deepEqual(seenAtDone.get(id), want, 'all of it before onTaskDone')
  }
  await tasks.close()
})

// A Writable that takes `delay` ms per chunk.
function slowSink(h, delay) {
  return new Writable({
    highWaterMark: 1024,
    write(chunk, enc, cb) {
      h.update(chunk)
      h.bytes = (h.bytes || 0) + chunk.length
      setTimeout(cb, delay)
    },
  })
}

test('N-6: tasks.stdout(id) / tasks.stderr(id) are Readables with backpressure', async () => {
  const { tasks } = fixture()
  const total = 8 * 1024 * 1024
  const out = tasks.spawn({ argv: [process.execPath, pattern, String(total)],
                            streams: true, outputCapBytes: 64 * 1024 })
  const err = tasks.spawn({ argv: [process.execPath, pattern, String(total), 'stderr'],
                            streams: true, outputCapBytes: 64 * 1024 })
  const ho = crypto.createHash('sha256')
  const he = crypto.createHash('sha256')
  const stdoutOfErr = []
  assert.equal(tasks.stdout(out), tasks.stdout(out), 'one stream per task')
  tasks.stdout(err).on('data', (c) => stdoutOfErr.push(c))
  await Promise.all([
    pipeline(tasks.stdout(out), slowSink(ho, 1)),
    pipeline(tasks.stderr(err), slowSink(he, 1)),
  ])
  assert.equal(ho.bytes, total)
  assert.equal(he.bytes, total)
  assert.equal(ho.digest('hex'), sha256(total))
  assert.equal(he.digest('hex'), sha256(total))
  assert.equal(Buffer.concat(stdoutOfErr).length, 0)
  assert.equal((await tasks.wait(out, 10000)).status, 'completed')
  assert.equal((await tasks.wait(err, 10000)).status, 'completed')
  await tasks.close()
})

test('N-6: tasks.stdin(id) is a Writable with drain; end() closes stdin', async () => {
  const { tasks } = fixture()
  const total = 4 * 1024 * 1024
  const id = tasks.spawn({ argv: ['cat'], stdin: 'pipe', stdinCapBytes: 4096,
                           streams: true })
  const h = crypto.createHash('sha256')
  const done = pipeline(tasks.stdout(id), slowSink(h, 0))
  const w = tasks.stdin(id)
  const { chunk } = require('./fixtures/pattern.js')
  let drains = 0
  w.on('drain', () => drains++)
  for (let off = 0; off < total; off += 100000) {
    if (!w.write(chunk(off, Math.min(100000, total - off)))) {
      await new Promise((r) => w.once('drain', r))
    }
  }
  w.end()
  await done
  assert.ok(drains > 0, 'write() returned false and drain came')
  assert.equal(h.bytes, total)
  assert.equal(h.digest('hex'), sha256(total))
  assert.equal((await tasks.wait(id, 10000)).detail, 'exit code: 0')
  await tasks.close()
})

test('N-6: streams of a task spawned without onData/streams, and stdin without a pipe, are EINVAL', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'sleep 10' })
  assert.throws(() => tasks.stdout(id), codeOf('EINVAL'))
  assert.throws(() => tasks.stdin(id), codeOf('EINVAL'))
  assert.throws(() => tasks.stdout('bash-99'), codeOf('UVT_ENOTASK'))
  assert.throws(() => tasks.spawn({ command: 'true', onData: 1 }), codeOf('ERR_INVALID_ARG_TYPE'))
  tasks.kill(id)
  await tasks.close()
})

test('N-6: onData of a task an agent owns', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a1', 's1')
  let got = ''
  const id = tasks.spawn({ command: 'echo owned; echo err >&2', owner: a,
                           onData: (c) => { got += c } })
  const snap = await tasks.wait(id, null, a)
  assert.equal(got, 'owned\nerr\n')
  assert.equal(snap.exitCode, 0)
  await a.dispose()
  await tasks.close()
})

test('N-6: registry close ends the streams of tasks still running', { timeout: 60000 }, async () => {
  const { TaskRegistry } = require('..')
  const tasks = new TaskRegistry({ teardownGraceMs: 2000 })
  tasks.attachSurface('t')
  const id = tasks.spawn({ command: 'echo first; exec sleep 30', streams: true })
  const out = tasks.stdout(id)
  let got = ''
  out.on('data', (c) => { got += c })
  await tasks.spawned(id)
  const ended = new Promise((resolve) => out.on('end', resolve))
  assert.ok(await require('./helpers.js').eventually(() => got === 'first\n'))
  await tasks.close()
  await ended
  assert.equal(got, 'first\n')
})
