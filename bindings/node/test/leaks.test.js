// Nothing lost over many tasks (L-2 through the binding): no zombie, no
// orphaned process group, no descriptor growth, no record kept after
// forget(), whether tasks end, are killed or are forgotten.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { fixture, controlled, zombieChildren, openFds } = require('./helpers')

// Process groups (pgrp) of every live process on the machine.
function liveGroups() {
  const groups = new Set()
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (f[0] !== 'Z') groups.add(Number(f[2]))
    } catch {}
  }
  return groups
}

test('1000 process tasks: no zombie, no orphan group, no fd growth (L-2, P-END-1, R-FORGET-1)', async () => {
  const fdsBefore = openFds()
  const { tasks } = fixture()
  const pids = []
  const N = 1000
  const CONCURRENT = 16
  let next = 0
  async function lane() {
    while (next < N) {
      const i = next++
      // Every fourth task is killed while it runs; the others end alone.
      const id = tasks.spawn({ command: i % 4 === 0 ? 'sleep 5' : 'echo $$', graceMs: 100 })
      pids.push(tasks.pid(id))
      if (i % 4 === 0) tasks.kill(id)
      const snap = await tasks.wait(id, 30000)
      assert.ok(['completed', 'killed'].includes(snap.status), snap.detail)
      tasks.read(id)
      // Not from the wait's own continuation, which runs inside the wait
      // callback (N-2) where forget() is EBUSY until R-FORGET-2 lands.
      await new Promise((r) => setImmediate(r))
      tasks.forget(id)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENT }, lane))
  const m = tasks.metrics()
  assert.equal(m.started, N)
  assert.equal(m.live, 0)
  await new Promise((r) => setTimeout(r, 50)) // forgets finish on the loop
  assert.equal(tasks.metrics().records, 0)
  await tasks.close()
  assert.deepEqual(zombieChildren(), [])
  const groups = liveGroups()
  assert.deepEqual(pids.filter((p) => groups.has(p)), [])
  assert.equal(openFds(), fdsBefore)
})

test('1000 JS tasks and 1000 expired waits retain nothing (R-WAIT-6, R-FORGET-1)', async () => {
  const { tasks } = fixture()
  const live = controlled()
  const liveId = tasks.start({ kind: 'js', label: 'live', run: live.run })
  const waits = []
  for (let i = 0; i < 1000; i++) {
    const c = controlled()
    const id = tasks.start({ kind: 'js', label: `t${i}`, run: c.run })
    c.end({ status: 'completed', output: `out ${i}` })
    waits.push(tasks.wait(id, 10000).then(() => new Promise((r) => setImmediate(r)))
      .then(() => tasks.forget(id)))
    waits.push(tasks.wait(liveId, 1))
  }
  await Promise.all(waits)
  await new Promise((r) => setTimeout(r, 50))
  const m = tasks.metrics()
  assert.equal(m.records, 1)
  assert.equal(m.waitsTimedOut, 1000)
  live.end({ status: 'completed' })
  await tasks.close()
})
