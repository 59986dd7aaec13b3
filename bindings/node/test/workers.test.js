// Worker threads (contract §8, N-3): each environment has its own registry and
// ids on its own loop; a worker's end closes its registries, stopping every
// task's session, whether it ends by itself, by process.exit() inside it, or
// by worker.terminate().
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const {
  fixture, sessionMembers, sessionGroups, zombieChildren, eventually,
} = require('./helpers')

const pkg = path.resolve(__dirname, '..')
const helpers = path.join(__dirname, 'helpers')

function worker(body) {
  const w = new Worker(`
    const { parentPort } = require('node:worker_threads')
    const { TaskRegistry } = require(${JSON.stringify(pkg)})
    const { pidOf } = require(${JSON.stringify(helpers)})
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
test('every worker has its own registry and ids (contract §8, R-START-4)', async () => {
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
// closes the registry, so every session is stopped before the worker is
// gone, including one that ignores SIGTERM (grace, then SIGKILL), `set -m`
// jobs with groups of their own (P-KILL-5), and what an ended task left.
test('worker.terminate() closes the registry and stops every session (N-3, R-CLOSE-1, P-KILL-5)', async () => {
  const w = worker(`
    const tasks = new TaskRegistry({ teardownGraceMs: 5000 })
    tasks.attachSurface('w')
    const a = tasks.registerAgent('a', 's')
    const ids = [
      tasks.spawn({ command: 'sleep 30' }),
      tasks.spawn({ command: "set -m; trap '' TERM; sleep 30 & sleep 30; wait", graceMs: 200, owner: a }),
      tasks.spawn({ command: 'set -m; sleep 30 & exit 0' }),
    ]
    tasks.start({ kind: 'js', label: 'never ends', run: () => ({ cancel() {}, done: new Promise(() => {}) }) })
    const pids = [await pidOf(tasks, ids[0]), await pidOf(tasks, ids[1], a), await pidOf(tasks, ids[2])]
    await tasks.wait(ids[2], 10000)
    parentPort.postMessage({ pids })
  `)
  const { pids } = await w.next()
  assert.equal(await eventually(() => sessionGroups(pids[1]).size === 3 &&
    sessionMembers(pids[0]).length > 0 && sessionMembers(pids[2]).length > 0), true)
  await w.terminate()
  for (const sid of pids) assert.deepEqual(sessionMembers(sid), [], `session ${sid}`)
  assert.deepEqual(zombieChildren(), [])
})

test('process.exit() inside a worker closes its registry (N-3)', async () => {
  const w = worker(`
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    const id = tasks.spawn({ command: 'set -m; sleep 30 & sleep 30' })
    parentPort.once('message', () => process.exit(7))
    parentPort.postMessage({ pid: await pidOf(tasks, id) })
  `)
  const { pid } = await w.next()
  assert.equal(await eventually(() => sessionGroups(pid).size === 3), true)
  w.postMessage('exit')
  assert.equal(await w.exited, 7)
  assert.equal(await eventually(() => sessionMembers(pid).length === 0), true)
})

// contract §3b in a worker: a terminal, a stdin pipe, backpressure and the
// structured read work on the worker's loop, and onOutput runs on the
// worker's thread inside its callback scope (N-2, P-EVT-1).
test('interactive tasks in a worker: tty, stdin pipe, backpressure, onOutput on its thread (N-2, P-PTY-1, P-IN-1, P-OUT-4, P-EVT-1)', async () => {
  const w = worker(`
    const { threadId } = require('node:worker_threads')
    const { driver } = require(${JSON.stringify(helpers)})
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    const sh = driver(tasks, { argv: ['bash', '--norc', '--noprofile', '-i'], tty: true })
    tasks.write(sh.id, 'echo $((6 * 7))\\r')
    await sh.until('42\\r\\n')
    tasks.write(sh.id, 'exit 3\\r')
    const shDone = await sh.done
    const sort = tasks.spawn({ argv: ['sort'], stdin: 'pipe' })
    tasks.write(sort, 'b\\na\\n')
    tasks.write(sort, Buffer.from('c\\n'))
    tasks.closeStdin(sort)
    await tasks.wait(sort, 10000)
    let bytes = 0
    let dropped = 0
    const seq = tasks.spawn({
      argv: ['seq', '1', '200000'], outputBackpressure: true, outputCapBytes: 4096,
      onOutput(id) {
        const r = tasks.readProcess(id)
        bytes += r.stdout.length
        dropped += r.stdoutDropped
      },
    })
    await tasks.wait(seq, 30000)
    bytes += tasks.readProcess(seq).stdout.length
    parentPort.postMessage({
      threadId, threads: [...sh.threads], shDetail: shDone.detail,
      sorted: tasks.read(sort).text, bytes, dropped,
    })
    await tasks.close()
  `)
  const m = await w.next()
  assert.notEqual(m.threadId, 0)
  assert.deepEqual(m.threads, [m.threadId])
  assert.equal(m.shDetail, 'exit code: 3')
  assert.equal(m.sorted, 'a\nb\nc\n')
  assert.equal(m.dropped, 0)
  assert.equal(m.bytes, 1288895) // seq 1 200000 | wc -c
  assert.equal(await w.exited, 0)
})

// N-3 with interactive tasks: terminate() while a shell waits on its
// terminal, a pipe task has input queued and onOutput calls are due: the
// teardown closes the registry (no JS runs any more) and every session is
// stopped.
test('worker.terminate() with live interactive tasks stops them (N-3, P-PTY-2)', async () => {
  const w = worker(`
    const tasks = new TaskRegistry()
    tasks.attachSurface('w')
    const noop = () => {}
    const sh = tasks.spawn({ argv: ['bash', '--norc', '--noprofile', '-i'], tty: true, onOutput: noop })
    const cat = tasks.spawn({ command: 'sleep 30; cat', stdin: 'pipe', onOutput: noop })
    const loud = tasks.spawn({ argv: ['yes'], tty: true, outputBackpressure: true, onOutput: noop })
    tasks.write(sh, 'sleep 30\\r')
    tasks.write(cat, 'x'.repeat(500000))
    parentPort.postMessage({ pids: [await pidOf(tasks, sh), await pidOf(tasks, cat), await pidOf(tasks, loud)] })
  `)
  const { pids } = await w.next()
  assert.equal(await eventually(() => pids.every((p) => sessionMembers(p).length > 0)), true)
  await w.terminate()
  for (const sid of pids) assert.deepEqual(sessionMembers(sid), [], `session ${sid}`)
  assert.deepEqual(zombieChildren(), [])
})
