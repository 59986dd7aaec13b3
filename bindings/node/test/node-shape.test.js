// N-13: Node-shaped errors and options: errors that name their cause,
// kill() and wait() options objects beside the positional forms,
// `aborted: true` for an AbortSignal's kill, signal() before the pid is
// known queued (never EAGAIN).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fixture } = require('./helpers.js')

const codeOf = (code) => (e) => e.code === code

// ---- errors that name the cause ---------------------------------------------

function tmpdir(t) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'uvtasks-n13-'))
  t.after(() => fs.rmSync(d, { recursive: true, force: true }))
  return d
}

// An environment variable set for one test (the library reads the host's
// environment at the spawn).
function setEnv(t, name, value) {
  const had = Object.prototype.hasOwnProperty.call(process.env, name)
  const old = process.env[name]
  if (value === undefined) delete process.env[name]
  else process.env[name] = value
  t.after(() => {
    if (had) process.env[name] = old
    else delete process.env[name]
  })
}

test('N-13: no bwrap: the error says so, not "operation not supported on socket"', (t) => {
  const { tasks } = fixture()
  setEnv(t, 'UVTASKS_BWRAP', '/nonexistent/bwrap')
  assert.throws(() => tasks.spawn({ command: 'true', sandbox: {} }), (e) =>
    e.code === 'ENOTSUP' && !/socket/.test(e.message) &&
    /sandbox/.test(e.message) && /no bwrap at \/nonexistent\/bwrap/.test(e.message) &&
    /spawn 'true'/.test(e.message))
  // Not in PATH either.
  setEnv(t, 'UVTASKS_BWRAP', undefined)
  const bin = tmpdir(t)
  setEnv(t, 'PATH', bin)
  assert.throws(() => tasks.spawn({ argv: ['/bin/true'], sandbox: {} }), (e) =>
    e.code === 'ENOTSUP' && /bwrap \(not in PATH\)/.test(e.message) &&
    /install bubblewrap/.test(e.message))
  assert.equal(tasks.metrics().started, 0)
})

test('N-13: user namespaces refused: the error carries bwrap\'s own reason', (t) => {
  const { tasks } = fixture()
  const dir = tmpdir(t)
  // A bwrap that answers as bwrap does where the kernel refuses user
  // namespaces to unprivileged users.
  const fake = path.join(dir, 'bwrap')
  fs.writeFileSync(fake, '#!/bin/sh\necho "bwrap: No permissions to create a new namespace, ' +
    'likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n')
  fs.chmodSync(fake, 0o755)
  setEnv(t, 'UVTASKS_BWRAP', fake)
  for (const network of ['none', 'host']) {
    assert.throws(() => tasks.spawn({ command: 'echo hi', sandbox: { network } }), (e) =>
      e.code === 'ENOTSUP' && /non-privileged user namespaces/.test(e.message) &&
      !/socket/.test(e.message), network)
    // And again (the library remembers the answer): the same reason.
    assert.throws(() => tasks.spawn({ command: 'echo hi', sandbox: { network } }), (e) =>
      /non-privileged user namespaces/.test(e.message), `${network} again`)
  }
})

test('N-13: a path that does not exist is named (sandbox.writable, cwd, the program)', (t) => {
  const { tasks } = fixture()
  const dir = tmpdir(t)
  const missing = path.join(dir, 'no-such-dir')
  assert.throws(() => tasks.spawn({ command: 'true', sandbox: { writable: [dir, missing] } }), (e) =>
    e.code === 'ENOENT' && e.path === missing &&
    e.message.includes(`sandbox.writable '${missing}'`))
  assert.throws(() => tasks.spawn({ command: 'true', cwd: missing }), (e) =>
    e.code === 'ENOENT' && e.path === missing && e.message.includes(`cwd '${missing}'`))
  const file = path.join(dir, 'a-file')
  fs.writeFileSync(file, '')
  assert.throws(() => tasks.spawn({ command: 'true', cwd: file }), (e) =>
    e.code === 'ENOTDIR' && e.message.includes(`cwd '${file}'`))
  assert.throws(() => tasks.spawn({ argv: ['no-such-program-n13'] }), (e) =>
    e.code === 'ENOENT' && e.path === 'no-such-program-n13' &&
    e.message.includes("spawn 'no-such-program-n13'"))
  assert.equal(tasks.metrics().started, 0)
})

// ---- kill(id, options), wait(id, options) -------------------------------

test('N-13: kill(id, { reason, caller }) and wait(id, { timeout, caller }) beside the positional forms', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's1')
  const b = tasks.registerAgent('b', 's2')
  const id = tasks.spawn({ command: 'sleep 30', owner: a })
  const live = await tasks.wait(id, { timeout: 20, caller: a })
  assert.equal(live.status, 'running')
  await assert.rejects(tasks.wait(id, { timeout: 20, caller: b }), codeOf('UVT_EFOREIGN'))
  await assert.rejects(tasks.wait(id, { timeout: 0, caller: a }), codeOf('EINVAL'))
  assert.throws(() => tasks.kill(id, { caller: b }), codeOf('UVT_EFOREIGN'))
  assert.equal(tasks.kill(id, { reason: 'user pressed stop', caller: a }), 'requested')
  const snap = await tasks.wait(id, { caller: a })
  assert.equal(snap.status, 'killed')
  assert.equal(snap.killReason, 'user pressed stop')
  assert.equal(tasks.kill(id, { caller: a }), 'already-terminal')
  // The positional forms are unchanged.
  const p = tasks.spawn({ command: 'sleep 30' })
  assert.equal(tasks.kill(p, undefined, 'positional'), 'requested')
  assert.equal((await tasks.wait(p, 30000)).killReason, 'positional')
  // An AbortSignal in wait's options.
  const q = tasks.spawn({ command: 'sleep 30' })
  const ac = new AbortController()
  const w = tasks.wait(q, { signal: ac.signal })
  ac.abort()
  await assert.rejects(w, codeOf('UVT_EABORTED'))
  tasks.kill(q)
  // A mistyped option is refused, not ignored.
  assert.throws(() => tasks.kill(q, { reasn: 'x' }), codeOf('ERR_INVALID_ARG_VALUE'))
  assert.throws(() => tasks.wait(q, { timeoutMs: 5 }), codeOf('ERR_INVALID_ARG_VALUE'))
})

// A task whose pid is known and whose shell has printed "up": a signal
// sent now goes at once (the pid is known) and reaches the program, not
// the moment of its exec.  qemu-user (the arm64 lane) keeps a signal that
// arrives while it emulates the child's execve in its own memory, which
// the exec replaces: the arm64 lane read a sleep's whole 30 s and no
// signal at all.  The output may come before the spawn's answer reaches
// the loop, so both are waited for.
async function spawnUp (tasks, options) {
  let up
  const printed = new Promise((resolve) => { up = resolve })
  const id = tasks.spawn({
    ...options,
    command: 'echo up; sleep 30',
    onData: (chunk) => { if (/up/.test(chunk)) up() },
  })
  await Promise.all([printed, tasks.spawned(id)])
  return id
}

test('N-13: kill(id, { signal: \'SIGKILL\' }) skips the grace; other signals are EINVAL', async () => {
  const { tasks } = fixture()
  // Deaf to SIGTERM, with an hour of grace: only SIGKILL ends it soon.
  let ready
  const deaf = new Promise((resolve) => { ready = resolve })
  const id = tasks.spawn({
    command: "trap '' TERM; echo ready; while :; do sleep 0.05; done",
    graceMs: 3600000,
    onData: (chunk) => { if (/ready/.test(chunk)) ready() },
  })
  await deaf // the trap is set
  assert.throws(() => tasks.kill(id, { signal: 'SIGINT' }), (e) =>
    e.code === 'EINVAL' && /signal\(id, "SIGINT"\)/.test(e.message))
  assert.equal(tasks.get(id).status, 'running')
  assert.equal(tasks.kill(id, { signal: 'SIGKILL', reason: 'now' }), 'requested')
  const snap = await tasks.wait(id) // an hour if SIGKILL waited for the grace
  assert.equal(snap.status, 'killed')
  assert.equal(snap.signal, 'SIGKILL')
  // 'SIGTERM' and 15 are the ordinary kill.
  // A grace far beyond the TERM's effect: on a stalled loop (an arm64 Node
  // under qemu beside busy CPUs) a 3 s grace could run out before the
  // loop read the exit, and the escalation would be what the test saw.
  const t = await spawnUp(tasks, { graceMs: 60000 })
  assert.equal(tasks.kill(t, { signal: 15 }), 'requested')
  assert.equal((await tasks.wait(t)).signal, 'SIGTERM')
})

// ---- aborted: true ---------------------------------------------------------

test('N-13: an AbortSignal\'s kill says aborted: true in every snapshot; a reason alone does not', async () => {
  const { tasks } = fixture()
  const heard = new Map()
  tasks.onTaskDone((s) => heard.set(s.id, s))
  const ac = new AbortController()
  const id = tasks.spawn({ command: 'sleep 30', signal: ac.signal })
  ac.abort(new Error('user left'))
  const snap = await tasks.wait(id)
  assert.equal(snap.status, 'killed')
  assert.equal(snap.aborted, true)
  assert.equal(snap.killReason, 'aborted: user left')
  assert.equal(tasks.get(id).aborted, true)
  assert.equal(heard.get(id).aborted, true)
  // An already aborted signal.
  const pre = tasks.spawn({ command: 'sleep 30', signal: AbortSignal.abort() })
  assert.equal((await tasks.wait(pre)).aborted, true)
  // A kill whose reason happens to read "aborted: ...": not an abort.
  const k = tasks.spawn({ command: 'sleep 30' })
  tasks.kill(k, { reason: 'aborted: by hand' })
  const ks = await tasks.wait(k)
  assert.equal(ks.aborted, undefined)
  assert.equal(heard.get(k).aborted, undefined)
  // An abort after the end changes nothing.
  const late = new AbortController()
  const e = tasks.spawn({ command: 'true', signal: late.signal })
  await tasks.wait(e)
  late.abort()
  assert.equal(tasks.get(e).aborted, undefined)
})

// ---- signal() before the pid is known --------------------------------------

test('N-13: signal() before the pid is known is queued and sent once it is, in order', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'sleep 30' })
  // P-SPAWN-6: the pid is never known in the turn that called spawn().
  assert.equal(tasks.pid(id), undefined)
  assert.equal(tasks.signal(id, 'SIGSTOP'), 'queued')
  assert.equal(tasks.signal(id, 'SIGCONT'), 'queued')
  assert.equal(tasks.signal(id, 'SIGTERM'), 'queued')
  assert.throws(() => tasks.signal(id, 'SIGSEGV'), codeOf('EINVAL'))
  const snap = await tasks.wait(id)
  // SIGSTOP, SIGCONT, then SIGTERM: a death by SIGTERM, not a kill (a
  // SIGTERM before the SIGCONT would have left it stopped).
  assert.equal(snap.signal, 'SIGTERM')
  assert.equal(snap.killReason, undefined)
  // Once the pid is known, it is sent at once.
  const t = await spawnUp(tasks, {})
  assert.equal(tasks.signal(t, 'SIGHUP'), 'sent')
  assert.equal((await tasks.wait(t)).signal, 'SIGHUP')
  // Queued for a task killed before its process existed: dropped, no throw.
  const k = tasks.spawn({ command: 'sleep 30' })
  assert.equal(tasks.signal(k, 'SIGINT'), 'queued')
  tasks.kill(k)
  assert.equal((await tasks.wait(k)).status, 'killed')
})
