// Worker threads (SPEC §8, N-3): each environment has its own registry and
// ids on its own loop; a worker's end closes its registries, stopping every
// process group, whether it ends by itself, by process.exit() inside it, or
// by worker.terminate().
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { fixture, groupMembers, zombieChildren, eventually } = require('./helpers')

const pkg = path.resolve(__dirname, '..')

function worker(body) {
  const w = new Worker(`
    const { parentPort } = require('node:worker_threads')
    const { TaskRegistry } = require(${JSON.stringify(pkg)})
    ;(async () => { ${body} })().catch((e) => parentPort.postMessage({ error: String(e) }))
  `, { eval: true })
  const messages = []
  const waiters = []
  w.on('message', (m) => {
    messages.push(m)
    while (waiters.length > 0) waiters.shift()()
  })
  w.next = async () => {
    while (messages.length === 0) await new Promise((r) => waiters.push(r))
    const m = messages.shift()
    if (m.error) throw new Error(`worker: ${m.error}`)
    return m
  }
  w.exited = new Promise((r) => w.on('exit', r))
  return w
}

// Per-environment state: ids start at 1 in every worker and in the main
// thread, side by side.
test('every worker has its own registry and ids (SPEC 8, R-START-4)', async () => {
  const { tasks } = fixture()
  const mainId = tasks.spawn({ command: 'true' })
  const ws = [0, 1, 2].map(() => worker(`
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    const id = tasks.spawn({ command: 'echo from-worker' })
    const snap = await tasks.wait(id, 10000)
    parentPort.postMessage({ id, status: snap.status, text: tasks.read(id).text })
    await tasks.close()
  `))
  for (const w of ws) {
    const m = await w.next()
    assert.deepEqual(m, { id: 'bash-1', status: 'completed', text: 'from-worker\n' })
    assert.equal(await w.exited, 0)
  }
  assert.equal(mainId, 'bash-1')
  await tasks.wait(mainId, 10000)
  await tasks.close()
})

// N-3: an idle registry does not keep a worker alive; a live task does.
test('an idle registry lets a worker end; a live task keeps it alive (N-3)', async () => {
  const idle = worker(`
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    tasks.registerAgent('a', 's')
    tasks.onTaskDone(() => {})
    await tasks.wait(tasks.spawn({ command: 'true' }), 10000)
    parentPort.postMessage({ ready: true })
  `)
  await idle.next()
  assert.equal(await idle.exited, 0)

  const t0 = Date.now()
  const busy = worker(`
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    tasks.spawn({ command: 'sleep 0.4' })
    parentPort.postMessage({ ready: true })
  `)
  await busy.next()
  assert.equal(await busy.exited, 0)
  assert.ok(Date.now() - t0 >= 390, `the worker ended after ${Date.now() - t0} ms`)
})

// N-3: terminate() tears the environment down; the async cleanup hook
// closes the registry, so every group is stopped before the worker is gone,
// including one that ignores SIGTERM (grace, then SIGKILL).
test('worker.terminate() closes the registry and stops every group (N-3, R-CLOSE-1)', async () => {
  const w = worker(`
    const tasks = new TaskRegistry({ teardownGraceMs: 5000 })
    tasks.attachSurface('w')
    const a = tasks.registerAgent('a', 's')
    const ids = [
      tasks.spawn({ command: 'sleep 30' }),
      tasks.spawn({ command: "trap '' TERM; sleep 30 & sleep 30; wait", graceMs: 200, owner: a }),
      tasks.spawn({ command: 'sleep 30 & exit 0' }),
    ]
    tasks.start({ kind: 'js', label: 'never ends', run: () => ({ cancel() {}, done: new Promise(() => {}) }) })
    await new Promise((r) => setTimeout(r, 100))
    parentPort.postMessage({ pids: [tasks.pid(ids[0]), tasks.pid(ids[1], a), tasks.pid(ids[2])] })
  `)
  const { pids } = await w.next()
  for (const pgid of pids) assert.ok(groupMembers(pgid).length >= 1)
  await w.terminate()
  for (const pgid of pids) assert.deepEqual(groupMembers(pgid), [], `group ${pgid}`)
  assert.deepEqual(zombieChildren(), [])
})

test('process.exit() inside a worker closes its registry (N-3)', async () => {
  const w = worker(`
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    const id = tasks.spawn({ command: 'sleep 30' })
    parentPort.postMessage({ pid: tasks.pid(id) })
    setTimeout(() => process.exit(7), 50)
  `)
  const { pid } = await w.next()
  assert.equal(await w.exited, 7)
  assert.deepEqual(await eventually(() => groupMembers(pid).length === 0), true)
})
