// Durable tasks through the Node package (D-1, D-3, D-5; docs/durable.md):
// spawn({ durable: true }) outlives close(), the host process (a SIGKILL)
// and its guardian (N-10); adopt(stateDir, owner) takes it back under its
// id with its output from where reads stopped and its end told once.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { TaskRegistry } = require('..')

function stateDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'uvt-node-durable-'))
}

function alive(pid) {
  try {
    process.kill(pid, 0)
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
  } catch {
    return false
  }
}

// Read `id` until its text holds `needle`.
async function readUntil(tasks, id, caller, needle) {
  let text = ''
  for (let i = 0; i < 2000 && !text.includes(needle); i++) {
    text += tasks.read(id, caller).text
    if (!text.includes(needle)) await new Promise((r) => setTimeout(r, 5))
  }
  return text
}

test('D-1, D-3: close() leaves a durable task running; adopt() takes it back', async () => {
  const dir = stateDir()
  let tasks = new TaskRegistry()
  tasks.attachSurface('test')
  let agent = tasks.registerAgent('host', 's-1')
  assert.deepEqual(tasks.adopt(dir, agent), [])
  const id = tasks.spawn({
    command: 'echo one; read x; echo two; exit 4',
    stdin: 'pipe', durable: true, owner: agent, label: 'job',
  })
  assert.match(await readUntil(tasks, id, agent, 'one\n'), /one\n/)
  const { pid } = await tasks.spawned(id, agent)
  await tasks.close()
  assert.ok(alive(pid), 'D-1: the task outlives close()')

  tasks = new TaskRegistry()
  tasks.attachSurface('test')
  agent = tasks.registerAgent('host', 's-1')
  const ends = []
  tasks.onTaskDone((s) => ends.push(s))
  assert.deepEqual(tasks.adopt(dir, agent), [id])
  const snap = tasks.get(id, agent)
  assert.equal(snap.label, 'job')
  assert.equal(snap.status, 'running')
  tasks.write(id, 'go\n', agent) // D-5: stdin through the state directory
  const end = await tasks.wait(id, 20000, agent)
  assert.equal(end.status, 'completed')
  assert.equal(end.detail, 'exit code: 4')
  assert.equal(tasks.read(id, agent).text, 'two\n') // nothing read twice
  assert.equal(ends.length, 1)
  await tasks.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

test('D-1: a durable task outlives its host\'s SIGKILL and the guardian (N-10)', async () => {
  const dir = stateDir()
  const script = `
    const { TaskRegistry } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const tasks = new TaskRegistry({ guardian: true })
    tasks.attachSurface('host')
    tasks.adopt(${JSON.stringify(dir)})
    const id = tasks.spawn({ command: 'echo up; sleep 30', durable: true })
    const plain = tasks.spawn({ command: 'sleep 31' })
    Promise.all([tasks.spawned(id), tasks.spawned(plain)]).then(([a, b]) => {
      process.stdout.write(JSON.stringify({ durable: a.pid, plain: b.pid }) + '\\n')
    })`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  const pids = await new Promise((resolve) => {
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('\n')) resolve(JSON.parse(out))
    })
  })
  child.kill('SIGKILL')
  await new Promise((r) => child.on('exit', r))
  // The guardian stops the plain task; the durable one runs on.
  for (let i = 0; i < 400 && alive(pids.plain); i++) {
    await new Promise((r) => setTimeout(r, 10))
  }
  assert.ok(!alive(pids.plain), 'the guardian stopped the plain task')
  assert.ok(alive(pids.durable), 'D-1: the durable task runs on')

  const tasks = new TaskRegistry()
  tasks.attachSurface('test')
  const ids = tasks.adopt(dir)
  assert.equal(ids.length, 1)
  assert.match(await readUntil(tasks, ids[0], undefined, 'up\n'), /^up\n/)
  tasks.kill(ids[0])
  const end = await tasks.wait(ids[0], 20000)
  assert.equal(end.status, 'killed')
  assert.ok(!alive(pids.durable))
  await tasks.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

test('D-1: close({ stopDurable: true }) stops durable tasks; bad options throw', async () => {
  const dir = stateDir()
  const tasks = new TaskRegistry()
  tasks.attachSurface('test')
  assert.throws(() => tasks.spawn({ command: 'true', durable: true }),
                { code: 'EINVAL' }) // no state directory yet
  tasks.adopt(dir)
  assert.throws(() => tasks.spawn({ command: 'true', durable: 1 }),
                { code: 'ERR_INVALID_ARG_TYPE' })
  assert.throws(() => tasks.spawn({ command: 'true', durable: true, tty: true }),
                { code: 'EINVAL' })
  assert.throws(() => new TaskRegistry().adopt(dir), { code: 'EBUSY' })
  const id = tasks.spawn({ command: 'sleep 30', durable: true })
  const { pid } = await tasks.spawned(id)
  await tasks.close({ stopDurable: true })
  assert.ok(!alive(pid))
  fs.rmSync(dir, { recursive: true, force: true })
})
