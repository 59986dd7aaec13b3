// N-11: bounded by default for every host shape.  Every ended task counts,
// whether or not anyone read it or heard of its end: while it holds output
// nobody has read, against maxUnreadBytes (its bytes, at least
// RECORD_BYTES); once nothing of it is left to read, against keepFinished.
// A host's own wait() reads nothing, so it never makes output forgettable.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { TaskRegistry } = require('..')
const { eventually, sessionMembers } = require('./helpers.js')

const codeOf = (code) => (e) => e.code === code

function registry(options) {
  const tasks = new TaskRegistry(options)
  tasks.attachSurface('t')
  test.after(() => tasks.close().catch(() => {}))
  return tasks
}

// The end of every task in `ids`, learnt the way a host that only listens
// learns it; then the turn after (the bound is applied after the dispatch).
function ends(tasks, n) {
  return new Promise((resolve) => {
    let seen = 0
    const off = tasks.onTaskDone(() => {
      if (++seen === n) {
        off()
        setImmediate(resolve)
      }
    })
  })
}

// `n` tasks of `command`, `batch` at a time, each one waited for (a
// host's own wait: the end reported, the output not read).
async function waited(tasks, n, command, batch = 25) {
  const ids = []
  for (let i = 0; i < n; i += batch) {
    const some = []
    for (let j = i; j < Math.min(n, i + batch); j++) some.push(tasks.spawn({ command }))
    for (const id of some) await tasks.wait(id)
    ids.push(...some)
  }
  await new Promise((r) => setImmediate(r))
  return ids
}

// The F1 probe, and its siblings: what the 101 later tasks were (no
// output, output waited for but not read, output read) must not matter.
for (const [what, command, read] of [
  ['no output', 'true', false],
  ['output waited for, never read', 'echo other-output', false],
  ['output read', 'echo other-output', true],
]) {
  test(`N-11 F1: wait() does not make unread output forgettable (101 later tasks: ${what})`, async () => {
    const tasks = registry()
    const bg = tasks.spawn({ command: 'echo important-output' })
    const snap = await tasks.wait(bg)
    assert.equal(snap.reported, true)
    for (let i = 0; i < 101; i++) {
      const id = tasks.spawn({ command })
      await tasks.wait(id)
      if (read) tasks.read(id)
    }
    await new Promise((r) => setImmediate(r))
    assert.equal(tasks.read(bg).text, 'important-output\n')
    // Read now: it is history, and counts against keepFinished.
    for (let i = 0; i < 101; i++) {
      const id = tasks.spawn({ command: 'true' })
      await tasks.wait(id)
    }
    await new Promise((r) => setImmediate(r))
    assert.throws(() => tasks.get(bg), codeOf('UVT_ENOTASK'))
  })
}

// F1's sibling: readProcess() is a read too, get() and list() are not.
test('N-11: get() and list() read nothing; readProcess() reads', async () => {
  const tasks = registry({ keepFinished: 2 })
  const looked = tasks.spawn({ command: 'echo looked-at' })
  const structured = tasks.spawn({ command: 'echo read-structured' })
  await tasks.wait(looked)
  await tasks.wait(structured)
  tasks.get(looked)
  tasks.list()
  assert.equal(tasks.readProcess(structured).stdout.toString(), 'read-structured\n')
  await waited(tasks, 3, 'true', 1)
  assert.equal(tasks.read(looked).text, 'looked-at\n')
  assert.throws(() => tasks.get(structured), codeOf('UVT_ENOTASK'))
})

// F2: hosts that never read, and hosts that only listen.
test('N-11 F2: a host that only listens stays bounded (1,000 tasks of 100 kB)', async () => {
  const tasks = registry()
  let done = 0
  tasks.onTaskDone(() => { done++ })
  for (let i = 0; i < 1000; i += 25) {
    const all = ends(tasks, 25)
    for (let j = 0; j < 25; j++) tasks.spawn({ command: 'head -c 100000 /dev/zero' })
    await all
  }
  assert.equal(done, 1000)
  const m = tasks.metrics()
  // 16 MiB of unread output: 167 tasks of 100 kB.
  assert.ok(m.records <= 168, `records ${m.records}`)
  assert.ok(m.records >= 150, `records ${m.records}: the newest are kept`)
  assert.equal(m.forgotten, 1000 - m.records)
})

test('N-11 F2: a host that never hears of the ends stays bounded too (keepFinished)', async () => {
  const tasks = registry({ keepFinished: 10 })
  const ids = []
  // Nobody waits, reads or listens: the registry's own view of the ends.
  // One task at a time (metrics() looks at no task), so they end in the
  // order they were spawned and "oldest first" can be checked by id.
  for (let i = 0; i < 60; i++) {
    ids.push(tasks.spawn({ command: 'true' }))
    await eventually(() => tasks.metrics().live === 0, 60000)
  }
  await new Promise((r) => setImmediate(r))
  assert.ok(tasks.metrics().records <= 10, `records ${tasks.metrics().records}`)
  // Oldest first (in the order they ended): none of the first half.
  const kept = new Set(tasks.list().map((s) => s.id))
  assert.ok(ids.slice(0, 30).every((id) => !kept.has(id)))
})

test('N-11: tasks with a little unread output each are bounded (RECORD_BYTES each)', async () => {
  // 64 KiB at 4 KiB a record: 16 records of unread output at most.
  const tasks = registry({ maxUnreadBytes: 64 * 1024 })
  const ids = await waited(tasks, 40, 'echo x', 1)
  const kept = tasks.list().map((s) => s.id)
  assert.equal(kept.length, 16)
  assert.deepEqual(kept, ids.slice(-16))
})

// How a host learns of a drop: watch()'s dropped change, metrics, and an
// error that says why the id is unknown.
test('N-11: a drop is seen in watch(), metrics() and the error of a later look', async () => {
  const tasks = registry({ keepFinished: 1, maxUnreadBytes: 100000 })
  const dropped = []
  tasks.watch((s, d) => { if (d) dropped.push(s.id) })
  const big = tasks.spawn({ command: 'head -c 80000 /dev/zero' })
  await tasks.wait(big)
  const big2 = tasks.spawn({ command: 'head -c 80000 /dev/zero' })
  await tasks.wait(big2)
  await new Promise((r) => setImmediate(r))
  // The record leaves lookups at once; the feed's dropped change follows
  // once the library let go of it (R-FORGET-2).
  assert.ok(await eventually(() => dropped.includes(big)))
  const m = tasks.metrics()
  assert.equal(m.forgotten, 1)
  assert.equal(m.forgottenUnread, 1)
  assert.equal(m.unreadBytesDropped, 80000)
  assert.throws(() => tasks.read(big), (e) => e.code === 'UVT_ENOTASK' &&
    /forgotten: maxUnreadBytes/.test(e.message) && /80000 bytes never read/.test(e.message) &&
    e.forgotten.bound === 'maxUnreadBytes' && e.forgotten.unreadBytes === 80000)
  // Read, then pushed out by the count: no output was lost.
  tasks.read(big2)
  await waited(tasks, 2, 'true', 1)
  assert.throws(() => tasks.get(big2), (e) => e.code === 'UVT_ENOTASK' &&
    /forgotten: keepFinished/.test(e.message) && e.forgotten.unreadBytes === 0)
  // An id never seen says nothing of the kind.
  assert.throws(() => tasks.get('bash-999999'), (e) => e.code === 'UVT_ENOTASK' &&
    e.forgotten === undefined)
})

// Leftovers kept (P-LEFT-1), whatever the bound, and counted once they end.
test('N-11: a task that left processes running is never forgotten; kill() lets it go', async () => {
  const tasks = registry({ keepFinished: 2 })
  const left = tasks.spawn({ command: 'sleep 60 >/dev/null 2>&1 & echo bye' })
  const { pid } = await tasks.spawned(left)
  assert.equal((await tasks.wait(left)).leftovers, 1)
  await waited(tasks, 6, 'true', 1)
  assert.equal(tasks.get(left).leftovers, 1)
  tasks.kill(left)
  await eventually(() => sessionMembers(pid).length === 0)
  assert.equal(tasks.read(left).text, 'bye\n')
  await waited(tasks, 6, 'true', 1)
  assert.throws(() => tasks.get(left), codeOf('UVT_ENOTASK'))
})

// onData hosts: the package was the reader, so nothing is unread.
test('N-11: onData tasks are history at their end (keepFinished)', async () => {
  const tasks = registry({ keepFinished: 3, maxUnreadBytes: 1 })
  let bytes = 0
  for (let i = 0; i < 8; i++) {
    const id = tasks.spawn({ command: 'head -c 50000 /dev/zero', onData: (c) => { bytes += c.length } })
    await tasks.wait(id)
  }
  await new Promise((r) => setImmediate(r))
  assert.equal(bytes, 8 * 50000)
  assert.equal(tasks.metrics().unreadBytesDropped, 0)
})

// JS producers are bounded the same way.
test('N-11: JS tasks count too; forget() and agent disposal take theirs out', async () => {
  const tasks = registry({ keepFinished: 3 })
  const agent = tasks.registerAgent('a', 's')
  const ids = []
  for (let i = 0; i < 6; i++) {
    ids.push(tasks.start({
      kind: 'js', label: 'x', owner: agent,
      run: () => ({ cancel() {}, done: Promise.resolve({ status: 'completed' }) }),
    }))
  }
  await eventually(() => tasks.metrics().live === 0)
  await new Promise((r) => setImmediate(r))
  assert.deepEqual(tasks.list(agent).map((s) => s.id), ids.slice(-3))
  tasks.forget(ids[5], agent)
  await agent.dispose()
  assert.equal(tasks.metrics().records, 0)
  // What was counted for them is gone with them: three new ones all stay.
  const more = await waited(tasks, 3, 'true', 1)
  assert.deepEqual(tasks.list().map((s) => s.id), more)
})
