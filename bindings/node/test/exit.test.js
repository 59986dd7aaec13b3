// How a Node host ends, and what that does to its tasks (N-3): an idle
// registry never keeps the process alive and a live task does; the natural
// end tears the environment down and closes every registry; process.exit(),
// an uncaught exception and a fatal signal nobody handles stop every
// process group before the process is gone, on every thread.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { groupMembers, eventually } = require('./helpers')

const host = path.join(__dirname, 'fixtures', 'host.js')

// Run the host in `mode`; resolves once it printed its pids, with a promise
// of how it ended.
function runHost(mode) {
  const child = spawn(process.execPath, [host, mode], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stderr.on('data', (d) => { err += d })
  const ended = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal, out, err }))
  })
  const started = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d
      const nl = out.indexOf('\n')
      if (nl >= 0 && !child.reported) {
        child.reported = true
        resolve(JSON.parse(out.slice(0, nl)).pids)
      }
    })
    ended.then((e) => { if (!child.reported) reject(new Error(`host ended early: ${JSON.stringify(e)}`)) })
  })
  return { child, started, ended, t0: Date.now() }
}

const gone = (pids) => eventually(() => pids.every((p) => groupMembers(p).length === 0), 3000)

test('an idle registry does not keep the process alive (N-3)', async () => {
  const h = runHost('idle')
  await h.started
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
})

test('a live task keeps the process alive until it ends (N-3)', async () => {
  const h = runHost('live')
  const pids = await h.started
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
  assert.ok(Date.now() - h.t0 >= 490, `ended after ${Date.now() - h.t0} ms`)
  assert.equal(await gone(pids), true)
})

test('the natural end closes the registry: what a task left running is stopped (N-3, P-KILL-4)', async () => {
  const h = runHost('leftover')
  const pids = await h.started
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
  assert.equal(await gone(pids), true)
})

test('process.exit() stops every group, even one that ignores SIGTERM (N-3)', async () => {
  const h = runHost('exit')
  const pids = await h.started
  for (const p of pids) assert.ok(groupMembers(p).length > 0)
  const e = await h.ended
  assert.equal(e.code, 3, e.err)
  assert.equal(await gone(pids), true)
})

test('an uncaught exception stops every group (N-3)', async () => {
  const h = runHost('uncaught')
  const pids = await h.started
  const e = await h.ended
  assert.equal(e.code, 1)
  assert.match(e.err, /boom/)
  assert.equal(await gone(pids), true)
})

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  test(`${sig} with no handler of the host's stops every group and ends by ${sig} (N-3)`, async () => {
    const h = runHost('signal')
    const pids = await h.started
    h.child.kill(sig)
    const e = await h.ended
    assert.equal(e.signal, sig, e.err)
    assert.equal(await gone(pids), true)
  })
}

test("a host's own SIGINT handler decides; its process.exit() then stops every group (N-3)", async () => {
  const h = runHost('signal-handled')
  const pids = await h.started
  h.child.kill('SIGINT')
  await eventually(() => h.child.exitCode !== null || /handled/.test(h.child.out || ''), 100)
  // The host handles the signal: its task is still running meanwhile.
  assert.ok(groupMembers(pids[0]).length > 0)
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
  assert.equal(await gone(pids), true)
})

test("process.exit() on the main thread stops a worker's groups too (N-3)", async () => {
  const h = runHost('worker-exit')
  const pids = await h.started
  const e = await h.ended
  assert.equal(e.code, 4, e.err)
  assert.equal(await gone(pids), true)
})
