// Process tasks through the binding (contract §3 via §8, N-4): the process
// producer's clauses hold for tasks.spawn() as they do in C.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const {
  fixture, sessionMembers, sessionGroups, zombieChildren, pidOf, eventually, busyWait,
} = require('./helpers')

const codeOf = (code) => (e) => e instanceof Error && e.code === code

// P-OUT-1, P-END-2, R-READ-1: stdout then [stderr]; exit code in detail.
test('a command runs, its output is read once, its exit code is the detail (P-OUT-1, P-END-2, R-READ-1)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'echo out; echo err >&2; exit 3' })
  assert.equal(id, 'bash-1')
  const snap = await tasks.wait(id, 10000)
  assert.equal(snap.status, 'completed')
  assert.equal(snap.detail, 'exit code: 3')
  assert.equal(tasks.read(id).text, 'out\n[stderr]\nerr\n')
  assert.equal(tasks.read(id).text, '')
  await tasks.close()
})

// P-SPAWN-1, P-SPAWN-3: own session and group; env, cwd, stdin bytes.
test('argv, env, cwd and stdin bytes; each task is its own session (P-SPAWN-1, P-SPAWN-3)', async () => {
  const { tasks } = fixture()
  const a = tasks.spawn({
    argv: ['sh', '-c', 'echo "$GREETING $(pwd)"; cat; ps -o sid= -p $$'],
    env: { GREETING: 'hello' },
    cwd: os.tmpdir(),
    stdin: Buffer.from('from stdin\n'),
    kind: 'sh',
    label: 'greeter',
  })
  assert.equal(a, 'sh-1')
  await tasks.wait(a, 10000)
  const pid = tasks.pid(a) // kept after the leader was reaped
  const lines = tasks.read(a).text.trim().split('\n')
  assert.equal(lines[0], `hello ${os.tmpdir()}`)
  assert.equal(lines[1], 'from stdin')
  assert.equal(Number(lines[2]), pid) // the leader leads its own session
  const b = tasks.spawn({ command: 'cat', stdin: 'text input' })
  await tasks.wait(b, 10000)
  assert.equal(tasks.read(b).text, 'text input')
  const c = tasks.spawn({ command: 'cat', stdin: 'null' })
  assert.equal((await tasks.wait(c, 10000)).detail, 'exit code: 0')
  await tasks.close()
})

// P-KILL-1, P-KILL-2, P-KILL-5: a kill stops the whole session, `set -m`
// jobs (process groups of their own) included; the outcome names the
// signal.
test('kill stops the whole session (P-KILL-1, P-KILL-2, P-KILL-5, R-KILL-2)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'set -m; sleep 30 & sleep 30 & wait', graceMs: 200 })
  const sid = await pidOf(tasks, id)
  assert.equal(await eventually(() => sessionGroups(sid).size === 3), true)
  assert.equal(tasks.kill(id, undefined, 'test'), 'requested')
  const snap = await tasks.wait(id, 10000)
  assert.equal(snap.status, 'killed')
  assert.equal(snap.detail, 'signal: SIGTERM')
  assert.equal(snap.killReason, 'test')
  assert.equal(await eventually(() => sessionMembers(sid).length === 0), true)
  await tasks.close()
})

// P-SPAWN-6: the spawn runs on a spawner thread; pid() says undefined until
// its answer reached the loop (never in the JS turn of spawn()), then the
// leader's pid, which leads its own session and stays after the leader was
// reaped; a task that never had a process throws ESRCH (N-1).
test('pid(): undefined while the spawn is out, then the session leader; ESRCH without a process (P-SPAWN-6, P-SPAWN-1, N-1)', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's')
  const id = tasks.spawn({ command: 'sleep 30', owner: a, graceMs: 100 })
  assert.equal(tasks.pid(id, a), undefined)
  assert.equal(tasks.get(id, a).status, 'running') // a task like any other
  assert.throws(() => tasks.pid(id), codeOf('UVT_EFOREIGN'))
  const pid = await pidOf(tasks, id, a)
  assert.ok(Number.isInteger(pid) && pid > 0, String(pid))
  assert.ok(sessionMembers(pid).includes(pid), 'the leader leads its session')
  assert.deepEqual([...sessionGroups(pid)], [pid]) // and its group
  tasks.kill(id, a)
  await tasks.wait(id, 10000, a)
  assert.equal(tasks.pid(id, a), pid)

  // A file exec refuses: the spawn fails on the spawner thread, so the task
  // is registered, then settles failed with no process (P-SPAWN-4, amended).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'uvtasks-'))
  const file = path.join(dir, 'not-a-program')
  fs.writeFileSync(file, '\x01\x02 not a program\n', { mode: 0o755 })
  const bad = tasks.spawn({ argv: [file] })
  assert.equal(tasks.pid(bad), undefined)
  const snap = await tasks.wait(bad, 10000)
  assert.equal(snap.status, 'failed')
  assert.equal(snap.detail, 'spawn failed: ENOEXEC')
  assert.throws(() => tasks.pid(bad), (e) => e.code === 'ESRCH' && e.errno === -3)
  fs.rmSync(dir, { recursive: true })

  const js = tasks.start({ kind: 'js', label: 'l', run: () => ({ cancel() {}, done: Promise.resolve({ status: 'completed' }) }) })
  assert.throws(() => tasks.pid(js), codeOf('EINVAL'))
  await tasks.close()
})

// P-LIMIT-1 and R-TIME-1: the runtime limit counts from the call, even
// when JS blocked the loop just before it (the loop's clock was stale).
test('maxRuntimeMs counts from the call after JS blocked the loop (P-LIMIT-1, R-TIME-1)', async () => {
  const { tasks } = fixture()
  await new Promise((r) => setImmediate(r))
  busyWait(300)
  const t0 = performance.now()
  const id = tasks.spawn({ command: 'sleep 30', maxRuntimeMs: 200, graceMs: 100 })
  const snap = await tasks.wait(id, 10000)
  const elapsed = performance.now() - t0
  assert.equal(snap.status, 'killed')
  assert.match(snap.detail, /^timed out after \d+ ms$/)
  assert.ok(elapsed >= 195, `stopped ${elapsed.toFixed(1)} ms after the call`)
  await tasks.close()
})

// P-KILL-1 and R-TIME-1: a kill's grace counts from the kill, even when JS
// blocked the loop just before it.
test('the grace before SIGKILL counts from the kill after JS blocked the loop (P-KILL-1, R-TIME-1)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: "trap '' TERM; echo ready; sleep 30", graceMs: 200 })
  let out = ''
  assert.equal(await eventually(() => (out += tasks.read(id).text).includes('ready')), true)
  await new Promise((r) => setImmediate(r))
  busyWait(300)
  const t0 = performance.now()
  tasks.kill(id)
  const snap = await tasks.wait(id, 10000)
  const elapsed = performance.now() - t0
  assert.equal(snap.detail, 'signal: SIGKILL')
  assert.ok(elapsed >= 195, `SIGKILL ${elapsed.toFixed(1)} ms after the kill`)
  await tasks.close()
})

// P-SPAWN-4: a spawn failure is a synchronous error with nothing registered
// and no id used (N-1: libuv's code names).
test('spawn failures throw libuv codes with nothing registered (P-SPAWN-4, N-1)', async () => {
  const { tasks } = fixture()
  assert.throws(() => tasks.spawn({ command: 'true', cwd: '/no/such/dir' }), codeOf('ENOENT'))
  assert.throws(() => tasks.spawn({ argv: ['/no/such/program'] }), codeOf('ENOENT'))
  assert.throws(() => tasks.spawn({}), codeOf('EINVAL'))
  assert.throws(() => tasks.spawn({ command: 'true', argv: ['true'] }), codeOf('EINVAL'))
  assert.throws(() => tasks.spawn({ command: 'true', env: { 'A=B': 'x' } }),
    codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.pid('bash-1'), codeOf('UVT_ENOTASK'))
  assert.equal(tasks.spawn({ command: 'true' }), 'bash-1')
  await tasks.wait('bash-1', 10000)
  assert.equal(tasks.metrics().started, 1)
  await tasks.close()
  assert.deepEqual(zombieChildren(), [])
})

// R-AGENT-1 with processes: disposal stops the agent's sessions and waits;
// close stops what an ended task left running (P-KILL-4), a job with a
// group of its own included (P-KILL-5).
test('agent disposal and close stop their sessions (R-AGENT-1, R-CLOSE-1, P-KILL-4, P-KILL-5)', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's')
  const owned = tasks.spawn({ command: 'set -m; sleep 30 & sleep 30', owner: a, graceMs: 100 })
  const left = tasks.spawn({ command: 'set -m; sleep 30 & echo started', graceMs: 100 })
  const pOwned = await pidOf(tasks, owned, a)
  assert.equal(await eventually(() => sessionGroups(pOwned).size === 3), true)
  await a.dispose()
  assert.deepEqual(sessionMembers(pOwned), [])
  assert.throws(() => tasks.get(owned, a), codeOf('UVT_ENOTASK'))
  // The leader of `left` exits at once; its background sleep, in a group
  // of its own, stays in the session until close stops it (P-KILL-4).
  assert.equal((await tasks.wait(left, 10000)).status, 'completed')
  const pLeft = tasks.pid(left)
  const [job] = sessionMembers(pLeft)
  assert.ok(job !== undefined && job !== pLeft, 'the job outlived its leader')
  assert.deepEqual([...sessionGroups(pLeft)], [job])
  await tasks.close()
  assert.deepEqual(sessionMembers(pLeft), [])
  assert.deepEqual(zombieChildren(), [])
})
