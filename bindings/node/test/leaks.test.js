// Nothing lost over many tasks (L-2 through the binding): no zombie, no
// process left in any task's session (nor anywhere else), no descriptor
// growth, no record kept after forget(), whether tasks end, are killed or
// are forgotten.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const {
  fixture, controlled, sessionMembers, markedProcesses, zombieChildren, pidOf, openFds,
} = require('./helpers')

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
