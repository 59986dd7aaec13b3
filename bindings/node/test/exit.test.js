// How a Node host ends, and what that does to its tasks (N-3): an idle
// registry never keeps the process alive and a live task does; the natural
// end tears the environment down and closes every registry; process.exit(),
// an uncaught exception and a fatal signal nobody handles stop every
// task's whole session (P-KILL-5: the hosts' tasks run `set -m` jobs, which
// have process groups of their own) before the process is gone, on every
// thread.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { sessionMembers, sessionGroups, markedProcesses, eventually } = require('./helpers')

const host = path.join(__dirname, 'fixtures', 'host.js')
let hosts = 0

// Run the host in `mode`; resolves once it printed its pids, with a promise
// of how it ended.  go() lets a host that waits for it end.
function runHost(mode) {
  const mark = `${process.env.UVTASKS_TEST_MARK}/${mode}-${++hosts}`
  const child = spawn(process.execPath, [host, mode], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, UVTASKS_TEST_MARK: mark },
  })
  const h = { child, mark, out: '', err: '', t0: Date.now() }
  child.stderr.on('data', (d) => { h.err += d })
  h.ended = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal, out: h.out, err: h.err }))
  })
  h.lines = []
  h.waiters = []
  child.stdout.on('data', (d) => {
    h.out += d
    const lines = h.out.split('\n')
    h.lines = lines.slice(0, -1)
    while (h.waiters.length > 0 && h.waiters[0].pred()) h.waiters.shift().resolve()
  })
  // Resolves once the host printed a line that `pred` accepts (or ended).
  h.line = (pred) => new Promise((resolve) => {
    const w = { pred: () => h.lines.some(pred), resolve }
    if (w.pred()) resolve()
    else h.waiters.push(w)
    h.ended.then(resolve)
  })
  h.started = h.line((l) => l.startsWith('{')).then(() => {
    const l = h.lines.find((x) => x.startsWith('{'))
    if (l === undefined) throw new Error(`host ended early: ${h.err}`)
    return JSON.parse(l).pids
  })
  h.go = () => child.stdin.write('go\n')
  return h
}

const gone = (pids) => eventually(() => pids.every((p) => sessionMembers(p).length === 0), 3000)

// Every session of `pids` is running, and the first has its three groups.
function assertRunning(pids) {
  for (const p of pids) assert.ok(sessionMembers(p).length > 0, `session ${p} is running`)
  assert.ok(sessionGroups(pids[0]).size >= 3, `session ${pids[0]} has its jobs' groups`)
}

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

test('the natural end closes the registry: what a task left running is stopped (N-3, P-KILL-4, P-KILL-5)', async () => {
  const h = runHost('leftover')
  const pids = await h.started
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

test('process.exit() stops every session, even one that ignores SIGTERM (N-3, P-KILL-5)', async () => {
  const h = runHost('exit')
  const pids = await h.started
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 3, e.err)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

test('process.exit() stops interactive tasks: a shell on a terminal, a stdin pipe (N-3, P-PTY-2, P-KILL-5)', async () => {
  const h = runHost('exit-interactive')
  const pids = await h.started
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 8, e.err)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

test('process.exit() in the turn of spawn(), with the spawns still out, leaves nothing running (N-3, P-SPAWN-6)', async () => {
  const h = runHost('exit-at-once')
  await h.started
  h.go()
  const e = await h.ended
  assert.equal(e.code, 5, e.err)
  assert.equal(await eventually(() => markedProcesses(h.mark).length === 0, 3000), true)
})

test('an uncaught exception stops every session (N-3, P-KILL-5)', async () => {
  const h = runHost('uncaught')
  const pids = await h.started
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 1)
  assert.match(e.err, /boom/)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

test('an exception thrown by onOutput is uncaught, as from any callback: a handler sees it and the host goes on (N-2, P-EVT-1)', async () => {
  const h = runHost('output-throws-handled')
  await h.started
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
  const r = JSON.parse(h.lines.find((l) => l.startsWith('{"caught"')))
  assert.deepEqual(r.caught, ['boom in bash-1'])
  assert.ok(r.calls >= 2, `${r.calls} calls`)
  assert.equal(r.detail, 'exit code: 0')
})

test('an exception thrown by onOutput with no handler ends the host (code 1) and stops every session (N-2, N-3, P-KILL-5)', async () => {
  const h = runHost('output-throws')
  const pids = await h.started
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 1)
  assert.match(e.err, /boom from onOutput/)
  assert.doesNotMatch(e.err, /FATAL|Abort|core dumped/i)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  test(`${sig} with no handler of the host's stops every session and ends by ${sig} (N-3, P-KILL-5)`, async () => {
    const h = runHost('signal')
    const pids = await h.started
    assertRunning(pids)
    h.child.kill(sig)
    const e = await h.ended
    assert.equal(e.signal, sig, e.err)
    assert.equal(await gone(pids), true)
    assert.deepEqual(markedProcesses(h.mark), [])
  })
}

test("a host's own SIGINT handler decides; its process.exit() then stops every session (N-3)", async () => {
  const h = runHost('signal-handled')
  const pids = await h.started
  h.child.kill('SIGINT')
  await h.line((l) => l === 'handled')
  // The host handled the signal and has not exited: its task still runs.
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 0, e.err)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

test("process.exit() on the main thread stops a worker's sessions too (N-3)", async () => {
  const h = runHost('worker-exit')
  const pids = await h.started
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 4, e.err)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})

test('process.exit() with registries in a worker only: its teardown stops them (N-3)', async () => {
  const h = runHost('worker-only-exit')
  const pids = await h.started
  assertRunning(pids)
  h.go()
  const e = await h.ended
  assert.equal(e.code, 6, e.err)
  assert.equal(await gone(pids), true)
  assert.deepEqual(markedProcesses(h.mark), [])
})
