// Nothing lost over many tasks (L-2 through the binding): no zombie, no
// process left in any task's session (nor anywhere else), no descriptor
// growth, no record kept after forget(), whether tasks end, are killed or
// are forgotten.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const {
  fixture, controlled, sessionMembers, markedProcesses, zombieChildren, pidOf, openFds,
  collected, collectGarbage,
} = require('./helpers')

// The addon itself (the same module instance index.js loaded): its
// outputRefs() counts the onOutput functions this thread's registries hold.
const native = require(path.join(__dirname, '..', 'build', 'uvtasks.node'))

// A promise that resolves once `n` records were dropped (R-FEED-1), so
// that a test waits for the drops themselves, not for a while.
function drops(tasks, n) {
  let seen = 0
  return new Promise((resolve) => {
    const unwatch = tasks.watch((snap, dropped) => {
      if (dropped && ++seen === n) {
        unwatch()
        resolve()
      }
    })
  })
}

test('1000 process tasks: no zombie, no leftover in any session, no fd growth (L-2, P-END-1, P-KILL-5, P-SPAWN-6, R-FORGET-1, R-FORGET-2)', async () => {
  const fdsBefore = openFds()
  const { tasks } = fixture()
  const sids = []
  const N = 1000
  const CONCURRENT = 16
  const dropped = drops(tasks, N)
  let next = 0
  let unspawned = 0
  async function lane() {
    while (next < N) {
      const i = next++
      // Every task runs a `set -m` job (a group of its own in the task's
      // session).  One in four is killed at once (usually before the
      // spawner got to it), one in four once it runs; the others end alone.
      const kill = i % 4 === 0 ? 'at once' : i % 4 === 2 ? 'running' : null
      const id = tasks.spawn({
        command: kill ? 'set -m; sleep 5 & sleep 5' : 'set -m; echo $$ & wait',
        graceMs: 100,
      })
      if (kill === 'at once') tasks.kill(id)
      if (kill === 'running') {
        await pidOf(tasks, id)
        tasks.kill(id)
      }
      const snap = await tasks.wait(id, 30000)
      assert.equal(snap.status, kill ? 'killed' : 'completed', snap.detail)
      // A terminal task had a process (its pid) or never had one (ESRCH).
      try {
        sids.push(tasks.pid(id))
      } catch (e) {
        assert.equal(e.code, 'ESRCH')
        assert.equal(snap.detail, 'killed before it started')
        unspawned++
      }
      tasks.read(id)
      // From the wait's own continuation, which runs inside the wait
      // callback (N-2): R-FORGET-2 drops the record after that dispatch.
      tasks.forget(id)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENT }, lane))
  assert.equal(sids.length + unspawned, N)
  assert.ok(sids.every((p) => Number.isInteger(p) && p > 0))
  const m = tasks.metrics()
  assert.equal(m.started, N)
  assert.equal(m.live, 0)
  await dropped
  assert.equal(tasks.metrics().records, 0)
  await tasks.close()
  assert.deepEqual(zombieChildren(), [])
  assert.deepEqual(sids.filter((sid) => sessionMembers(sid).length > 0), [])
  assert.deepEqual(markedProcesses(), [])
  assert.equal(openFds(), fdsBefore)
})

test('1000 JS tasks and 1000 expired waits retain nothing (R-WAIT-6, R-FORGET-1, R-FORGET-2)', async () => {
  const { tasks } = fixture()
  const live = controlled()
  const liveId = tasks.start({ kind: 'js', label: 'live', run: live.run })
  const dropped = drops(tasks, 1000)
  const waits = []
  for (let i = 0; i < 1000; i++) {
    const c = controlled()
    const id = tasks.start({ kind: 'js', label: `t${i}`, run: c.run })
    c.end({ status: 'completed', output: `out ${i}` })
    waits.push(tasks.wait(id, 10000).then(() => tasks.forget(id)))
    waits.push(tasks.wait(liveId, 1))
  }
  await Promise.all(waits)
  await dropped
  const m = tasks.metrics()
  assert.equal(m.records, 1)
  assert.equal(m.waitsTimedOut, 1000)
  live.end({ status: 'completed' })
  await tasks.close()
})

// Interactive tasks (contract §3b) leave nothing either: no descriptor (pipes,
// socket pairs, terminals), no zombie, no session; and the binding lets go
// of each onOutput function once its task ended (P-EVT-1: the library calls
// it no more), without waiting for the record's drop or registry close; a
// spawn that failed lets go of it at once.
test('300 interactive tasks: no fd, zombie or session left; onOutput released at the end (L-2, P-IN-1, P-PTY-2, P-EVT-1)', async () => {
  const fdsBefore = openFds()
  const { tasks } = fixture()
  const released = { n: 0 }
  const fin = new FinalizationRegistry(() => { released.n++ })
  const sids = []
  const N = 300
  const CONCURRENT = 8
  const dropped = drops(tasks, N)
  let next = 0
  let calls = 0

  // One task: a terminal or a stdin pipe, fed a line and closed, or killed.
  async function one(i) {
    let text = ''
    let wake = null
    const tty = i % 2 === 0
    const onOutput = (id) => {
      calls++
      text += tasks.read(id).text
      if (wake !== null && text.includes(`line ${i}`)) wake()
    }
    const id = tasks.spawn({
      argv: ['cat'], stdin: 'pipe', tty, onOutput, graceMs: 100,
      outputBackpressure: i % 3 === 0,
    })
    fin.register(onOutput, id)
    tasks.write(id, tty ? `line ${i}\r` : `line ${i}\n`)
    if (i % 5 === 4) {
      tasks.kill(id)
    } else {
      // Input on a terminal is taken once the program reads it: wait for
      // the echo before the end of file (a Ctrl-D).
      if (!text.includes(`line ${i}`)) await new Promise((r) => { wake = r })
      tasks.closeStdin(id)
    }
    const snap = await tasks.wait(id, 30000)
    assert.equal(snap.status, i % 5 === 4 ? 'killed' : 'completed', snap.detail)
    try {
      sids.push(tasks.pid(id))
    } catch (e) {
      assert.equal(e.code, 'ESRCH')
    }
    tasks.forget(id)
  }
  await Promise.all(Array.from({ length: CONCURRENT }, async () => {
    while (next < N) await one(next++)
  }))
  await dropped
  assert.equal(tasks.metrics().records, 0)
  assert.ok(calls > 0)
  // Every function is collectable while the registry is still open.
  assert.equal(await collected(released, N), N)

  // The functions below are made in a plain function: a local of this
  // async function would stay in its saved frame across the awaits.
  const withFn = (i, what) => {
    const f = () => {}
    fin.register(f, `${what}-${i}`)
    return f
  }
  // A spawn that throws keeps nothing.
  for (let i = 0; i < 20; i++) {
    assert.throws(() => tasks.spawn({ argv: ['cat'], cwd: '/no/such/dir', onOutput: withFn(i, 'bad') }),
      (e) => e.code === 'ENOENT')
  }
  assert.equal(await collected(released, N + 20), N + 20)

  // Tasks still live at close: released by the close.
  const live = []
  for (let i = 0; i < 10; i++) {
    live.push(tasks.spawn({ argv: ['cat'], tty: i % 2 === 0, stdin: 'pipe', onOutput: withFn(i, 'live') }))
  }
  for (const id of live) sids.push(await pidOf(tasks, id))
  await tasks.close()
  assert.equal(await collected(released, N + 30), N + 30)
  assert.deepEqual(zombieChildren(), [])
  assert.deepEqual(sids.filter((sid) => sessionMembers(sid).length > 0), [])
  assert.deepEqual(markedProcesses(), [])
  assert.equal(openFds(), fdsBefore)
})

// P-EVT-1 through the binding: the library calls a task's onOutput no more
// once the task ended, so the binding lets go of the function then: not at
// forget() (the records are still held here) and not at registry close.
// 1000 tasks whose onOutput closures each hold 256 KiB: kept, they would
// be 250 MiB; released, the heap stays where it was.
test("1000 tasks' onOutput closures are released when each task ends, records still held (P-EVT-1, L-2)", async () => {
  // Records kept (no N-8 bound), so only the closures can go.
  const { tasks } = fixture({ teardownGraceMs: 2000, keepFinished: Infinity, maxUnreadBytes: Infinity })
  const N = 1000
  const CONCURRENT = 16
  const released = { n: 0 }
  const fin = new FinalizationRegistry(() => { released.n++ })
  const refsBefore = native.outputRefs()
  collectGarbage()
  const heapBefore = process.memoryUsage().heapUsed
  let calls = 0
  let maxRefs = 0
  // Made in a plain function, so that no frame of ours keeps one.
  const spawnOne = (i) => {
    const ballast = `${i}:`.padEnd(256 * 1024, 'x')
    const onOutput = (id) => {
      calls++
      if (ballast.length > 0) tasks.read(id)
    }
    fin.register(onOutput, i)
    return tasks.spawn({ command: `echo ${i}`, onOutput })
  }
  const ids = []
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENT }, async () => {
    while (next < N) {
      const id = spawnOne(next++)
      ids.push(id)
      maxRefs = Math.max(maxRefs, native.outputRefs() - refsBefore)
      await tasks.wait(id, 30000)
    }
  }))
  assert.ok(calls > 0)
  assert.ok(maxRefs >= 1 && maxRefs <= CONCURRENT, `${maxRefs} held at most`)
  // Every task ended; none was forgotten, the registry is open.
  assert.equal(tasks.metrics().records, N)
  assert.equal(native.outputRefs(), refsBefore)
  assert.equal(await collected(released, N), N)
  collectGarbage()
  const grown = process.memoryUsage().heapUsed - heapBefore
  assert.ok(grown < 64 * 1024 * 1024, `heap grew by ${grown} bytes`)
  for (const id of ids) tasks.forget(id)
  await tasks.close()
  assert.equal(native.outputRefs(), refsBefore)
})
