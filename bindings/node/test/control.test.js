// N-7: Node-shaped control: spawn({ signal }), snapshots that say how a
// task ended without a read, tasks.spawned(id).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fixture, sessionMembers, eventually } = require('./helpers.js')

const codeOf = (code) => (e) => e.code === code

test('N-7: an aborted spawn signal kills the whole task (P-KILL-7)', async () => {
  const { tasks } = fixture()
  const ac = new AbortController()
  // A grandchild that ignores SIGTERM: the kill's SIGKILL ends it too.
  const id = tasks.spawn({ command: "(trap '' TERM; sleep 30) & sleep 30",
                           graceMs: 200, signal: ac.signal })
  const { pid } = await tasks.spawned(id)
  await eventually(() => sessionMembers(pid).length === 3)
  assert.equal(getEventListeners(ac.signal, 'abort').length, 1)
  ac.abort(new Error('user left'))
  const snap = await tasks.wait(id, 10000)
  assert.equal(snap.status, 'killed')
  assert.equal(snap.killReason, 'aborted: user left')
  assert.deepEqual(sessionMembers(pid), [])
  await tasks.close()
})

test('N-7: an already aborted signal kills at once; an ended task lets go of its signal', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'sleep 30', signal: AbortSignal.abort('no') })
  const snap = await tasks.wait(id, 10000)
  assert.equal(snap.status, 'killed')
  assert.equal(snap.killReason, 'aborted: no')

  const ac = new AbortController()
  const done = tasks.spawn({ command: 'true', signal: ac.signal })
  assert.equal(getEventListeners(ac.signal, 'abort').length, 1)
  assert.equal((await tasks.wait(done, 10000)).status, 'completed')
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0)
  ac.abort() // nothing to kill: no throw
  assert.equal(tasks.get(done).status, 'completed')
  assert.throws(() => tasks.spawn({ command: 'true', signal: {} }), codeOf('ERR_INVALID_ARG_TYPE'))
  await tasks.close()
})

test('N-7: snapshots carry exitCode, signal and leftovers without consuming output', async () => {
  const { tasks } = fixture()
  const seen = new Map()
  tasks.onTaskDone((s) => seen.set(s.id, s))
  const a = tasks.spawn({ command: 'echo hi; exit 3' })
  const live = tasks.get(a)
  assert.equal(live.exitCode, null)
  assert.equal(live.signal, null)
  assert.equal(live.leftovers, 0)
  const snap = await tasks.wait(a, 10000)
  assert.equal(snap.exitCode, 3)
  assert.equal(snap.signal, null)
  assert.equal(snap.leftovers, 0)
  assert.equal(seen.get(a).exitCode, 3)
  assert.equal(tasks.get(a).exitCode, 3)
  assert.equal(tasks.list().find((s) => s.id === a).exitCode, 3)
  // Nothing was consumed.
  assert.equal(tasks.readProcess(a).stdout.toString(), 'hi\n')

  const b = tasks.spawn({ command: 'sleep 30', graceMs: 5000 })
  await tasks.spawned(b)
  tasks.kill(b)
  const kb = await tasks.wait(b, 10000)
  assert.equal(kb.exitCode, null)
  assert.equal(kb.signal, 'SIGTERM')
  assert.equal(seen.get(b).signal, 'SIGTERM')

  // P-LEFT-1: what a task left running in its session.
  const c = tasks.spawn({ command: 'sleep 30 >/dev/null 2>&1 & sleep 30 >/dev/null 2>&1 & echo started' })
  const { pid } = await tasks.spawned(c)
  const ended = await tasks.wait(c, 10000)
  assert.equal(ended.exitCode, 0)
  assert.equal(ended.leftovers, 2)
  assert.equal(tasks.get(c).leftovers, 2)
  tasks.kill(c) // P-KILL-6: stops them
  await eventually(() => sessionMembers(pid).length === 0)
  assert.equal(tasks.get(c).leftovers, 0)
  await tasks.close()
})

test('N-7: spawned(id) resolves { pid } once the process exists, rejects with the spawn error', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'sleep 30' })
  assert.equal(tasks.pid(id), undefined)
  const { pid } = await tasks.spawned(id)
  assert.equal(pid, tasks.pid(id))
  process.kill(pid, 0) // exists
  assert.deepEqual(await tasks.spawned(id), { pid }) // later calls too
  tasks.kill(id)

  // A file exec refuses: only the spawn itself says so (P-SPAWN-4).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'uvtasks-'))
  const file = path.join(dir, 'not-a-program')
  fs.writeFileSync(file, '\x01\x02 not a program\n', { mode: 0o755 })
  const bad = tasks.spawn({ argv: [file] })
  await assert.rejects(tasks.spawned(bad), (e) => e.code === 'ENOEXEC' && e.syscall === 'spawn')
  fs.rmSync(dir, { recursive: true })
  const early = tasks.spawn({ command: 'sleep 30' })
  tasks.kill(early)
  // Killed before the child existed (ESRCH), or while its spawn was out
  // (the child existed and got the kill): either way it settles.
  const r = await tasks.spawned(early).then((v) => v, (e) => e)
  assert.ok(r.pid > 0 || r.code === 'ESRCH', String(r))
  await assert.rejects(tasks.spawned('bash-99'), codeOf('UVT_ENOTASK'))
  await tasks.close()
})

test('N-7: signal(id, name) sends one signal to the whole session, no escalation (P-KILL-8)', async () => {
  const { tasks } = fixture()
  // The leader and a set -m job (a group of its own) both trap SIGUSR1
  // and SIGINT and report them; SIGINT is not a kill: the task lives on.
  const id = tasks.spawn({
    command: "set -m; (trap 'echo job-usr1' USR1; trap 'echo job-int' INT; " +
             "while :; do sleep 0.05; done) & trap 'echo leader-usr1' USR1; " +
             "trap 'echo leader-int' INT; while :; do sleep 0.05; done",
    streams: true, graceMs: 200,
  })
  const { pid } = await tasks.spawned(id)
  await eventually(() => sessionMembers(pid).length >= 2)
  let out = ''
  tasks.stdout(id).on('data', (c) => { out += c })
  tasks.signal(id, 'SIGUSR1')
  await eventually(() => /leader-usr1/.test(out) && /job-usr1/.test(out))
  tasks.signal(id, 2) // SIGINT by number
  await eventually(() => /leader-int/.test(out) && /job-int/.test(out))
  assert.equal(tasks.get(id).status, 'running')
  assert.throws(() => tasks.signal(id, 'SIGSEGV'), codeOf('EINVAL'))
  assert.throws(() => tasks.signal(id, 'SIGNOPE'), codeOf('EINVAL'))
  assert.throws(() => tasks.signal(id, {}), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.signal('bash-99', 'SIGINT'), codeOf('UVT_ENOTASK'))
  // A signal that ends it: a death by that signal, not a kill.
  const t = tasks.spawn({ command: 'sleep 30' })
  await tasks.spawned(t)
  tasks.signal(t, 'SIGHUP')
  const snap = await tasks.wait(t, 10000)
  assert.equal(snap.signal, 'SIGHUP')
  assert.throws(() => tasks.signal(t, 'SIGINT'), codeOf('ESRCH'))
  tasks.kill(id)
  await tasks.close()
})
