// N-12: onData chunks are at most 64 KiB by default (what child_process
// hands over), so a UI callback that decodes each one keeps the loop
// responsive; `highWaterMark` chooses another size.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const path = require('node:path')
const { fixture } = require('./helpers.js')
const { sha256 } = require('./fixtures/pattern.js')

const pattern = path.join(__dirname, 'fixtures', 'pattern.js')
const KiB = 1024

// Every chunk of `total` bytes from the pattern program, per stream.
async function chunksOf(tasks, options, total) {
  const sizes = { stdout: [], stderr: [] }
  const h = crypto.createHash('sha256')
  const id = tasks.spawn({
    argv: [process.execPath, pattern, String(total)],
    ...options,
    onData(chunk, stream) {
      sizes[stream].push(chunk.length)
      if (stream === 'stdout') h.update(chunk)
    },
  })
  const snap = await tasks.wait(id)
  assert.equal(snap.status, 'completed', snap.detail)
  assert.equal(sizes.stdout.reduce((a, b) => a + b, 0), total)
  assert.equal(h.digest('hex'), sha256(total))
  return sizes
}

test('N-12: onData chunks are at most 64 KiB by default (8 MiB of stdout)', async () => {
  const { tasks } = fixture()
  const { stdout } = await chunksOf(tasks, {}, 8 * 1024 * KiB)
  const max = Math.max(...stdout)
  assert.ok(max <= 64 * KiB, `largest chunk ${max}`)
})

test('N-12: outputCapBytes does not make onData chunks larger', async () => {
  const { tasks } = fixture()
  const { stdout } = await chunksOf(tasks, { outputCapBytes: 4 * 1024 * KiB }, 8 * 1024 * KiB)
  assert.ok(Math.max(...stdout) <= 64 * KiB, `largest chunk ${Math.max(...stdout)}`)
})

test('N-12: highWaterMark chooses the chunk size (4 KiB, 1 MiB)', async () => {
  const { tasks } = fixture()
  const small = await chunksOf(tasks, { highWaterMark: 4 * KiB }, 2 * 1024 * KiB)
  assert.ok(Math.max(...small.stdout) <= 4 * KiB, `largest chunk ${Math.max(...small.stdout)}`)
  const big = await chunksOf(tasks, { highWaterMark: 1024 * KiB }, 8 * 1024 * KiB)
  assert.ok(Math.max(...big.stdout) <= 1024 * KiB)
})

// The Buffers onData gets wrap the blocks the library read the pipe into
// (no copy): each must stay as it was while later output is read into new
// ones.  Every chunk is kept and only checked once the task ended.
test('N-12: the Buffers onData got stay as they were while later output is read', async () => {
  const { tasks } = fixture()
  for (const stream of ['stdout', 'stderr']) {
    const kept = []
    const total = 6 * 1024 * KiB
    const id = tasks.spawn({
      argv: [process.execPath, pattern, String(total), stream],
      onData(chunk, s) { if (s === stream) kept.push(chunk) },
    })
    const snap = await tasks.wait(id)
    assert.equal(snap.status, 'completed', snap.detail)
    assert.ok(kept.length >= total / (64 * KiB), `${kept.length} chunks`)
    const all = Buffer.concat(kept)
    assert.equal(all.length, total)
    assert.equal(crypto.createHash('sha256').update(all).digest('hex'), sha256(total), stream)
  }
})

// The task may write ahead of the reads by its stdout pipe's kernel
// buffer: 256 KiB for onData and streams (as child_process's socket
// holds about 208 KiB), the system's for a task the host reads itself.
test('N-12: the stdout pipe of an onData task holds 256 KiB', async () => {
  const { tasks } = fixture()
  const argv = ['python3', '-c', 'import fcntl; print(fcntl.fcntl(1, 1032))'] // F_GETPIPE_SZ
  let text = ''
  const id = tasks.spawn({ argv, onData(chunk) { text += chunk } })
  let snap = await tasks.wait(id)
  assert.equal(snap.status, 'completed', snap.detail)
  assert.equal(Number(text), 256 * KiB)
  const plain = tasks.spawn({ argv })
  snap = await tasks.wait(plain)
  assert.equal(snap.status, 'completed', snap.detail)
  const n = Number(tasks.read(plain).text)
  assert.ok(n > 0 && n !== 256 * KiB, `without onData: ${n}`)
})

// Siblings: stderr, a terminal's one stream, the Readable streams.
test('N-12: stderr and a tty task are chunked the same way', async () => {
  const { tasks } = fixture()
  const err = []
  const id = tasks.spawn({
    command: 'head -c 3000000 /dev/zero >&2',
    onData(chunk, stream) { if (stream === 'stderr') err.push(chunk.length) },
  })
  await tasks.wait(id)
  assert.equal(err.reduce((a, b) => a + b, 0), 3000000)
  assert.ok(Math.max(...err) <= 64 * KiB, `largest stderr chunk ${Math.max(...err)}`)
  const tty = []
  const t = tasks.spawn({
    command: 'head -c 3000000 /dev/zero | tr "\\0" x',
    tty: true,
    onData(chunk) { tty.push(chunk.length) },
  })
  await tasks.wait(t)
  assert.ok(tty.reduce((a, b) => a + b, 0) >= 3000000)
  assert.ok(Math.max(...tty) <= 64 * KiB, `largest tty chunk ${Math.max(...tty)}`)
})

test('N-12: stdout(id) hands over chunks of at most highWaterMark', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'head -c 4000000 /dev/zero', streams: true, highWaterMark: 16 * KiB })
  const sizes = []
  for await (const chunk of tasks.stdout(id)) sizes.push(chunk.length)
  assert.equal(sizes.reduce((a, b) => a + b, 0), 4000000)
  assert.ok(Math.max(...sizes) <= 16 * KiB, `largest chunk ${Math.max(...sizes)}`)
})

test('N-12: a highWaterMark that is not a whole number of bytes >= 1 is refused', () => {
  const { tasks } = fixture()
  for (const bad of [0, -1, 1.5, NaN, Infinity]) {
    assert.throws(() => tasks.spawn({ command: 'true', onData() {}, highWaterMark: bad }),
      (e) => e instanceof RangeError && e.code === 'ERR_OUT_OF_RANGE', String(bad))
  }
  assert.throws(() => tasks.spawn({ command: 'true', onData() {}, highWaterMark: '64k' }),
    (e) => e.code === 'ERR_INVALID_ARG_TYPE')
  assert.throws(() => tasks.spawn({ command: 'true', highWaterMark: 1024 }),
    (e) => e.code === 'ERR_INVALID_ARG_VALUE' && /onData or streams/.test(e.message))
  assert.equal(tasks.metrics().started, 0)
})
