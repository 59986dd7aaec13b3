// N-8: bounded by default: ended tasks without leftovers are forgotten,
// oldest first, past keepFinished or maxUnreadBytes (as N-11 has it since
// v4: reported or not; test/bounds.test.js has N-11's own cases).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { TaskRegistry } = require('..')
const { fixture, eventually, sessionMembers } = require('./helpers.js')

const codeOf = (code) => (e) => e.code === code


async function runMany(tasks, n, command, batch = 25) {
  const ids = []
  for (let i = 0; i < n; i += batch) {
    const some = []
    for (let j = i; j < Math.min(n, i + batch); j++) some.push(tasks.spawn({ command }))
    for (const id of some) await tasks.wait(id) // reported
    ids.push(...some)
  }
  // Let the sweep after the last dispatch run.
  await new Promise((r) => setImmediate(r))
  return ids
}

test('N-8: 1,000 ended tasks of 100 kB stay bounded by default', async () => {
  const { tasks } = fixture()
  const ids = await runMany(tasks, 1000, 'head -c 100000 /dev/zero')
  const m = tasks.metrics()
  // Waited for, never read (N-11): 16 MiB of unread output, 167 of these.
  assert.ok(m.records <= 168, `records ${m.records}`)
  assert.ok(m.records >= 150, `records ${m.records}: the newest are kept`)
  // The newest are the ones kept.
  const kept = new Set(tasks.list().map((s) => s.id))
  assert.ok(kept.has(ids[ids.length - 1]))
  assert.ok(!kept.has(ids[0]))
  assert.throws(() => tasks.get(ids[0]), codeOf('UVT_ENOTASK'))
  await tasks.close()
})

test('N-8: keepFinished and maxUnreadBytes bound; unreported tasks count (N-11), leftover ones stay', async () => {
  const tasks = new TaskRegistry({ keepFinished: 5, maxUnreadBytes: 250000 })
  tasks.attachSurface('t')
  // maxUnreadBytes: two tasks of 100 kB fit, a third does not.
  await runMany(tasks, 6, 'head -c 100000 /dev/zero', 1)
  assert.equal(tasks.metrics().records, 2)
  // Ended but never reported (nobody waited or read), with no output:
  // counted against keepFinished all the same (N-11).
  const unreported = []
  for (let i = 0; i < 8; i++) unreported.push(tasks.spawn({ command: 'true' }))
  await eventually(() => tasks.metrics().live === 0)
  // A task that left a process running in its session: kept.
  const left = tasks.spawn({ command: 'sleep 30 >/dev/null 2>&1 & echo bye' })
  const { pid } = await tasks.spawned(left)
  assert.equal((await tasks.wait(left)).leftovers, 1)
  await runMany(tasks, 10, 'echo small', 1)
  const ids = new Set(tasks.list().map((s) => s.id))
  assert.equal(unreported.filter((id) => ids.has(id)).length, 5, 'the newest five kept')
  assert.ok(ids.has(left), 'the task with leftovers is kept')
  // The ten small outputs nobody read are kept too (4 KiB each, N-11).
  assert.equal(tasks.metrics().records, 2 + 5 + 10 + 1)
  tasks.kill(left) // P-KILL-6: stops what it left
  await eventually(() => sessionMembers(pid).length === 0)
  await tasks.close()
})

test('N-8: Infinity keeps everything; forget stays; bad bounds throw', async () => {
  const tasks = new TaskRegistry({ keepFinished: Infinity, maxUnreadBytes: Infinity })
  tasks.attachSurface('t')
  const ids = await runMany(tasks, 120, 'true')
  assert.equal(tasks.metrics().records, 120)
  tasks.forget(ids[0])
  assert.equal(tasks.metrics().records, 119)
  await tasks.close()
  assert.throws(() => new TaskRegistry({ keepFinished: -1 }), codeOf('ERR_OUT_OF_RANGE'))
  assert.throws(() => new TaskRegistry({ maxUnreadBytes: 1.5 }), codeOf('ERR_OUT_OF_RANGE'))
  assert.throws(() => new TaskRegistry({ keepFinished: '10' }), codeOf('ERR_INVALID_ARG_TYPE'))
})

test('N-8: tasks agents own are bounded too; their snapshots carry the status (N-7)', async () => {
  const tasks = new TaskRegistry({ keepFinished: 3 })
  tasks.attachSurface('t')
  const a = tasks.registerAgent('a1', 's1')
  const b = tasks.registerAgent('b1', 's2')
  const done = []
  tasks.onTaskDone((s) => done.push(s))
  const changes = []
  tasks.watch((s, dropped) => { if (!dropped && s.status === 'completed') changes.push(s) })
  for (let i = 0; i < 10; i++) {
    const owner = i % 2 === 0 ? a : b
    const id = tasks.spawn({ command: 'exit 4', owner })
    await tasks.wait(id, null, owner)
  }
  await new Promise((r) => setImmediate(r))
  assert.ok(tasks.metrics().records <= 3, `records ${tasks.metrics().records}`)
  assert.ok(done.length === 10 && done.every((s) => s.exitCode === 4))
  assert.ok(changes.length === 10 && changes.every((s) => s.exitCode === 4))
  await tasks.close()
})
