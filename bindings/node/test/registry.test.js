// The origin's own scenarios (design/seed-task-registry.txt, ctx.tasks),
// run through the binding with JS producers: contract §2 must hold through it
// unchanged (N-4).  Each test closes its registry (L-1's analog: close()
// resolves, so every handle of ours is closed).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { TaskRegistry } = require('..')
const { fixture, controlled, busyWait, eventually } = require('./helpers')

const codeOf = (code) => (e) => e instanceof Error && e.code === code

// R-START-4: ids are <kind>-<n>, one counter per kind from 1; R-START-2: a
// run() that throws propagates with nothing registered and no number used.
test('ids: one counter per kind; a failed start uses no number (R-START-2, R-START-4)', async () => {
  const { tasks } = fixture()
  const a = controlled()
  const b = controlled()
  assert.equal(tasks.start({ kind: 'js', label: 'a', run: a.run }), 'js-1')
  assert.equal(tasks.start({ kind: 'other', label: 'b', run: b.run }), 'other-1')
  const boom = new Error('run failed')
  assert.throws(() => tasks.start({ kind: 'js', label: 'x', run() { throw boom } }),
    (e) => e === boom)
  assert.throws(() => tasks.start({ kind: 'js', label: 'x', run() { return {} } }),
    codeOf('ERR_INVALID_ARG_TYPE'))
  const c = controlled()
  assert.equal(tasks.start({ kind: 'js', label: 'c', run: c.run }), 'js-2')
  assert.equal(tasks.list().length, 3)
  // R-START-5: the record exists when start returns.
  assert.equal(tasks.get('js-2').status, 'running')
  a.end({ status: 'completed' })
  b.end({ status: 'completed' })
  c.end({ status: 'completed' })
  await tasks.close()
})

// R-START-1: validation happens before run; bad kinds and labels are EINVAL.
test('validation before run: bad kind or label is EINVAL, run never called (R-START-1, N-1)', async () => {
  const { tasks } = fixture()
  let runs = 0
  const run = () => { runs++; return controlled().run() }
  for (const kind of ['', 'has space', 'x'.repeat(65), 'tab\tkind']) {
    assert.throws(() => tasks.start({ kind, label: 'l', run }), codeOf('EINVAL'))
  }
  assert.throws(() => tasks.start({ kind: 'k', label: '', run }), codeOf('EINVAL'))
  assert.throws(() => tasks.start({ kind: 'k', label: 'nul\0inside', run }),
    codeOf('ERR_INVALID_ARG_VALUE'))
  assert.equal(runs, 0)
  await tasks.close()
})

// The control-surface fence (R-START-1, R-SURF-1): no surface, no start;
// each attach counts on its own; detach is idempotent.
test('fence: starts need a surface; attaches count separately (R-SURF-1, R-DONE-5)', async () => {
  const tasks = new TaskRegistry()
  const c = controlled()
  let runs = 0
  const run = () => { runs++; return c.run() }
  assert.throws(() => tasks.start({ kind: 'js', label: 'l', run }), (e) =>
    e instanceof Error && e.code === 'UVT_ENOSURFACE' && e.errno === -20004)
  const d1 = tasks.attachSurface('ui')
  const d2 = tasks.attachSurface('ui')
  const id = tasks.start({ kind: 'js', label: 'l', run })
  d1()
  d1()
  tasks.start({ kind: 'js', label: 'still one surface', run: controlled().run })
  d2()
  assert.throws(() => tasks.start({ kind: 'js', label: 'l', run }), codeOf('UVT_ENOSURFACE'))
  // Detaching never touches tasks.
  assert.equal(tasks.get(id).status, 'running')
  assert.equal(runs, 1)
  await tasks.close()
  d2() // harmless after close
})

// R-OWN-1: an owner must be the exact live agent; a stale object is refused
// with UVT_ESTALE and leaves nothing registered.  R-OWN-3: a live id is EEXIST.
test('stale owner: an agent object replaced under its id is refused (R-OWN-1, R-OWN-3)', async () => {
  const { tasks } = fixture()
  const old = tasks.registerAgent('agent-1', 'session-1')
  assert.throws(() => tasks.registerAgent('agent-1', 'session-2'), codeOf('EEXIST'))
  await old.dispose()
  const fresh = tasks.registerAgent('agent-1', 'session-1')
  let runs = 0
  const run = () => { runs++; return controlled().run() }
  assert.throws(() => tasks.start({ kind: 'js', label: 'l', owner: old, run }),
    codeOf('UVT_ESTALE'))
  assert.equal(runs, 0)
  assert.equal(tasks.start({ kind: 'js', label: 'l', owner: fresh, run }), 'js-1')
  assert.throws(() => tasks.start({ kind: 'js', label: 'l', owner: {}, run }),
    codeOf('ERR_INVALID_ARG_TYPE'))
  await tasks.close()
})

// R-OWN-2: the session fence on get/read/kill/wait/forget; unowned tasks are
// open to all; a missing caller never matches an owned task.
test('session fence: foreign callers get UVT_EFOREIGN, unknown ids UVT_ENOTASK (R-OWN-2, R-LIST-1, N-1)', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's1')
  const b = tasks.registerAgent('b', 's2')
  const a2 = tasks.registerAgent('a2', 's1')
  const owned = controlled()
  const open = controlled()
  const id = tasks.start({ kind: 'js', label: 'mine', owner: a, run: owned.run })
  const uid = tasks.start({ kind: 'js', label: 'open', run: open.run })
  for (const caller of [b, undefined]) {
    assert.throws(() => tasks.get(id, caller), codeOf('UVT_EFOREIGN'))
    assert.throws(() => tasks.read(id, caller), codeOf('UVT_EFOREIGN'))
    assert.throws(() => tasks.kill(id, caller), codeOf('UVT_EFOREIGN'))
    assert.throws(() => tasks.forget(id, caller), codeOf('UVT_EFOREIGN'))
    await assert.rejects(tasks.wait(id, 100, caller), codeOf('UVT_EFOREIGN'))
  }
  assert.equal(tasks.get(id, a2).label, 'mine') // same session, other agent
  assert.equal(tasks.get(uid, b).label, 'open')
  assert.throws(() => tasks.get('js-99', a), codeOf('UVT_ENOTASK'))
  assert.deepEqual(tasks.list(a).map((s) => s.id), [id, uid])
  assert.deepEqual(tasks.list(b).map((s) => s.id), [uid])
  assert.deepEqual(tasks.list().map((s) => s.id), [uid])
  assert.equal(owned.cancels.length, 0)
  await tasks.close()
})

// R-READ-1..3, R-GET-1: stream kinds consume one cursor; final kinds show
// their output once terminal, on every read; only a read that finds the
// task terminal marks it reported; get changes nothing.
test('consuming reads: stream and final kinds (R-READ-1, R-READ-2, R-READ-3, R-GET-1)', async () => {
  const { tasks } = fixture()
  const s = controlled({ stream: true })
  const f = controlled()
  const sid = tasks.start({ kind: 'stream', label: 's', run: s.run })
  const fid = tasks.start({ kind: 'final', label: 'f', run: f.run })
  s.output = 'one\n'
  assert.equal(tasks.read(sid).text, 'one\n')
  assert.equal(tasks.read(sid).text, '')
  s.output = 'two\n'
  assert.equal(tasks.get(sid).reported, false)
  const r = tasks.read(sid)
  assert.equal(r.text, 'two\n')
  assert.equal(r.snapshot.reported, false) // live: never marked
  assert.equal(tasks.read(fid).text, '')
  f.end({ status: 'completed', detail: 'done', output: 'the result' })
  s.end({ status: 'completed', output: 'tail\n' })
  await tasks.wait(fid, 5000)
  await tasks.wait(sid, 5000)
  assert.equal(tasks.read(fid).text, 'the result')
  assert.equal(tasks.read(fid).text, 'the result')
  assert.equal(tasks.read(sid).text, 'tail\n')
  assert.equal(tasks.read(sid).text, '')
  const g = tasks.get(fid)
  assert.equal(g.detail, 'done')
  assert.equal(typeof g.finishedAt, 'number')
  await tasks.close()
})

test('a read that finds the task terminal marks it reported; get does not (R-READ-3, R-GET-1)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const seen = []
  tasks.onTaskDone((snap) => seen.push(snap))
  c.end({ status: 'completed' })
  await new Promise((r) => tasks.onTaskDone(r))
  assert.equal(tasks.get(id).reported, false)
  assert.equal(tasks.get(id).reported, false)
  assert.equal(tasks.read(id).snapshot.reported, true)
  assert.equal(seen.length, 1)
  await tasks.close()
})

// R-KILL-1..4 and the order the origin gives: cancel first (a throw fails
// the kill loud and leaves the task untouched), then stopping + reported;
// a second kill cancels again; a kill of an ended task cancels nothing.
test('kill ordering: cancel first, then stopping; a throwing cancel leaves the task untouched (R-KILL-1..4, N-1)', async () => {
  const { tasks } = fixture()
  const bad = new Error('cannot stop')
  const c = controlled({ cancelThrows: bad })
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  assert.throws(() => tasks.kill(id, undefined, 'first'), (e) => e === bad)
  let snap = tasks.get(id)
  assert.equal(snap.status, 'running')
  assert.equal(snap.reported, false)
  assert.equal(snap.killReason, undefined)

  c.cancelThrows = null
  c.endOnCancel = false
  const order = []
  const unwatch = tasks.watch((s) => order.push(`${s.id}:${s.status}`))
  assert.equal(tasks.kill(id, undefined, 'second'), 'requested')
  snap = tasks.get(id)
  assert.equal(snap.status, 'stopping')
  assert.equal(snap.reported, true)
  assert.equal(snap.killReason, 'second')
  assert.equal(tasks.kill(id, undefined, 'third'), 'requested') // R-KILL-3
  assert.deepEqual(c.cancels, ['first', 'second', 'third'])
  c.end({ status: 'killed', detail: 'stopped' })
  const done = await tasks.wait(id, 5000)
  assert.equal(done.status, 'killed')
  assert.equal(done.killReason, 'second') // the first reason is kept
  assert.equal(tasks.kill(id), 'already-terminal') // R-KILL-4
  assert.equal(c.cancels.length, 3)
  // The feed is delivered after the listeners and waits of a settlement.
  await new Promise((r) => setImmediate(r))
  assert.deepEqual(order, [`${id}:stopping`, `${id}:killed`])
  unwatch()
  assert.equal(tasks.metrics().kills, 3)
  await tasks.close()
})

// R-WAIT-4 vs R-WAIT-5: the wait's own deadline resolves with the live
// snapshot and leaves the task alone; an abort rejects with UVT_EABORTED.
test('wait timeout resolves live; abort rejects UVT_EABORTED; the task is untouched (R-WAIT-1, R-WAIT-4, R-WAIT-5, R-WAIT-6)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const t0 = Date.now()
  const live = await tasks.wait(id, 60)
  assert.ok(Date.now() - t0 >= 55, `timed out after ${Date.now() - t0} ms`)
  assert.equal(live.status, 'running')
  assert.equal(live.reported, false)
  const ac = new AbortController()
  const p = tasks.wait(id, 60000, undefined, ac.signal)
  ac.abort(new Error('user went away'))
  await assert.rejects(p, (e) => e.code === 'UVT_EABORTED' && e.errno === -20008 &&
    e.cause.message === 'user went away')
  // Already aborted before the call: same.
  await assert.rejects(tasks.wait(id, 60000, undefined, AbortSignal.abort()),
    codeOf('UVT_EABORTED'))
  // R-WAIT-1: a zero timeout is EINVAL (after the id checks).
  await assert.rejects(tasks.wait(id, 0), codeOf('EINVAL'))
  await assert.rejects(tasks.wait('js-9', 0), codeOf('UVT_ENOTASK'))
  const snap = tasks.get(id)
  assert.equal(snap.status, 'running')
  assert.equal(snap.reported, false)
  const m = tasks.metrics()
  assert.equal(m.waitsTimedOut, 1)
  assert.equal(m.waitsAborted, 2)
  c.end({ status: 'completed' })
  await tasks.close()
})

// R-WAIT-5: once settlement counted the waiter, an abort still delivers the
// terminal snapshot (the notice was suppressed on its behalf).
test('abort after settlement: the wait still resolves with the terminal snapshot (R-WAIT-3, R-WAIT-5)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const ac = new AbortController()
  const p = tasks.wait(id, 60000, undefined, ac.signal)
  let reportedInListener = null
  tasks.onTaskDone((snap) => {
    reportedInListener = snap.reported // R-WAIT-3: marked before listeners
    ac.abort() // settlement has counted the waiter
  })
  c.end({ status: 'completed', detail: 'ok' })
  const snap = await p
  assert.equal(snap.status, 'completed')
  assert.equal(reportedInListener, true)
  // An abort after the wait resolved changes nothing.
  ac.abort()
  await tasks.close()
})

test('an abort in the same turn, before settlement, wins (R-WAIT-5)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const ac = new AbortController()
  const p = tasks.wait(id, 60000, undefined, ac.signal)
  c.end({ status: 'completed' }) // settles from a microtask, applied later
  ac.abort()
  await assert.rejects(p, codeOf('UVT_EABORTED'))
  await tasks.wait(id, 5000)
  await tasks.close()
})

// R-DONE-3/4: each terminal record reaches every listener exactly once; a
// listener may unsubscribe others or start one (not called for this record).
test('exactly-once listeners, contained (R-DONE-3, R-DONE-4, R-DONE-5)', async () => {
  const { tasks } = fixture()
  const calls = { a: [], b: [], c: [], late: [] }
  let unsubB
  const unsubA = tasks.onTaskDone((s) => {
    calls.a.push(s.id)
    if (s.id === 'js-1') {
      unsubB()
      tasks.onTaskDone((s2) => calls.late.push(s2.id))
    }
  })
  unsubB = tasks.onTaskDone((s) => calls.b.push(s.id))
  tasks.onTaskDone((s) => calls.c.push(s.id))
  const t1 = controlled()
  const t2 = controlled()
  tasks.start({ kind: 'js', label: '1', run: t1.run })
  tasks.start({ kind: 'js', label: '2', run: t2.run })
  t1.end({ status: 'completed' })
  await tasks.wait('js-1', 5000)
  t2.end({ status: 'failed', detail: 'x' })
  await tasks.wait('js-2', 5000)
  assert.deepEqual(calls.a, ['js-1', 'js-2'])
  assert.deepEqual(calls.b, []) // stopped before its turn
  assert.deepEqual(calls.c, ['js-1', 'js-2'])
  assert.deepEqual(calls.late, ['js-2'])
  unsubA()
  unsubA()
  // A later settle of an ended producer is ignored (R-DONE-2).
  t1.end({ status: 'failed' })
  await tasks.close()
})

// The owner handed to listeners is the exact agent object.
test('listeners get the owner agent object (R-DONE-3)', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's')
  const c = controlled()
  let owner = null
  tasks.onTaskDone((s, o) => { owner = o })
  tasks.start({ kind: 'js', label: 'l', owner: a, run: c.run })
  c.end({ status: 'completed' })
  await tasks.wait('js-1', 5000, a)
  assert.equal(owner, a)
  await tasks.close()
})

test('a rejected done settles failed with String(error); a bad outcome too (contract §8)', async () => {
  const { tasks } = fixture()
  const a = controlled()
  const b = controlled()
  tasks.start({ kind: 'js', label: 'a', run: a.run })
  tasks.start({ kind: 'js', label: 'b', run: b.run })
  a.fail(new Error('producer broke'))
  b.end({ status: 'running' })
  const sa = await tasks.wait('js-1', 5000)
  const sb = await tasks.wait('js-2', 5000)
  assert.equal(sa.status, 'failed')
  assert.equal(sa.detail, 'Error: producer broke')
  assert.equal(sb.status, 'failed')
  assert.match(sb.detail, /TypeError: done resolved with status running/)
  await tasks.close()
})

// R-AGENT-1/2: disposal cancels the agent's live tasks ("owner disposed"),
// waits for them, drops their records, and touches no other agent's tasks.
test('agent disposal drains only its own tasks (R-AGENT-1, R-AGENT-2)', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's')
  const b = tasks.registerAgent('b', 's') // same session
  const ta = controlled({ endOnCancel: false })
  const tb = controlled()
  const done = []
  tasks.onTaskDone((s) => done.push(s))
  const ida = tasks.start({ kind: 'js', label: 'a', owner: a, run: ta.run })
  const idb = tasks.start({ kind: 'js', label: 'b', owner: b, run: tb.run })
  let disposed = false
  const p = a.dispose().then(() => { disposed = true })
  assert.throws(() => tasks.start({ kind: 'js', label: 'x', owner: a, run: controlled().run }),
    codeOf('UVT_ECLOSING'))
  assert.deepEqual(ta.cancels, ['owner disposed'])
  await new Promise((r) => setTimeout(r, 30))
  assert.equal(disposed, false) // waits for the producer to settle
  ta.end({ status: 'killed', detail: 'stopped' })
  await p
  assert.throws(() => tasks.get(ida, b), codeOf('UVT_ENOTASK'))
  assert.equal(tasks.get(idb, b).status, 'running')
  assert.equal(tb.cancels.length, 0)
  assert.equal(done.length, 1)
  assert.equal(done[0].reported, true) // disposal marked it reported
  await assert.rejects(a.dispose(), codeOf('EINVAL'))
  await tasks.close()
  assert.deepEqual(tb.cancels, ['tasks service disposed'])
})

// R-AGENT-3: a cancel that throws during teardown force-fails the record,
// and disposal goes on.  R-AGENT-4: one that never settles is force-failed
// after teardownGraceMs, counted from the cancel even though JS blocked
// the loop just before (R-TIME-1).
test('force-fail on a cancel that throws, and on one that never settles (R-AGENT-3, R-AGENT-4, R-TIME-1)', async () => {
  const { tasks } = fixture({ teardownGraceMs: 100 })
  const a = tasks.registerAgent('a', 's')
  const thrower = controlled({ cancelThrows: new Error('no way') })
  const silent = controlled({ endOnCancel: false })
  const seen = []
  tasks.onTaskDone((s) => seen.push(s))
  tasks.start({ kind: 'js', label: 'thrower', owner: a, run: thrower.run })
  tasks.start({ kind: 'js', label: 'silent', owner: a, run: silent.run })
  await new Promise((r) => setImmediate(r))
  busyWait(150) // the loop's cached time is now 150 ms behind
  const t0 = performance.now()
  await a.dispose() // must not reject or hang; the library logs a warning
  const elapsed = performance.now() - t0
  assert.ok(elapsed >= 95, `disposal waited ${elapsed.toFixed(1)} ms for a 100 ms grace`)
  const byLabel = Object.fromEntries(seen.map((s) => [s.label, s]))
  assert.equal(byLabel.thrower.status, 'failed')
  assert.match(byLabel.thrower.detail, /^cancel failed during teardown; work may be orphaned/)
  assert.equal(byLabel.silent.status, 'failed')
  // R-TIME-1: the detail names what elapsed, at least the 100 ms grace.
  const waited = /did not stop within (\d+) ms of cancel/.exec(byLabel.silent.detail)
  assert.ok(waited && Number(waited[1]) >= 100, byLabel.silent.detail)
  assert.equal(tasks.metrics().forceFailed, 2)
  silent.end({ status: 'completed' }) // late: harmless (R-DONE-2)
  await tasks.close()
})

// R-CLOSE-1: close cancels every live task, waits, and refuses new work.
test('close: every live task cancelled, starts and waits refused, later calls ECLOSING (R-CLOSE-1, N-1)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const w = tasks.wait(id, 60000)
  const closed = tasks.close()
  assert.throws(() => tasks.start({ kind: 'js', label: 'l', run: controlled().run }),
    codeOf('UVT_ECLOSING'))
  await assert.rejects(tasks.close(), codeOf('UVT_ECLOSING'))
  const snap = await w // pending waits get their terminal snapshot
  assert.equal(snap.status, 'killed')
  assert.deepEqual(c.cancels, ['tasks service disposed'])
  await closed
  assert.throws(() => tasks.get(id), codeOf('UVT_ECLOSING'))
  assert.throws(() => tasks.attachSurface('late'), codeOf('UVT_ECLOSING'))
})

// R-BUSY-1: every JS call makes a C handle of its own, zeroed (calloc), so
// the reuse a C host can get wrong (a pending wait submitted again, a
// listener started twice) cannot be expressed in JS: one AbortSignal or
// one function given twice makes two handles.  What JS can repeat on one
// handle gets the library's own answers (N-4).
test("repeated calls on one JS handle get the library's answers (R-BUSY-1, R-AGENT-1, R-CLOSE-1, N-4)", async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const ac = new AbortController()
  const waits = [tasks.wait(id, 60000, undefined, ac.signal),
    tasks.wait(id, 60000, undefined, ac.signal)]
  ac.abort()
  ac.abort()
  for (const w of waits) await assert.rejects(w, codeOf('UVT_EABORTED'))
  assert.equal(tasks.metrics().waitsAborted, 2)
  const done = []
  const fn = (snap) => done.push(snap.id)
  const offs = [tasks.onTaskDone(fn), tasks.onTaskDone(fn)]
  c.end({ status: 'completed' })
  await tasks.wait(id, 5000)
  assert.deepEqual(done, [id, id])
  for (const off of [...offs, ...offs]) off()
  const detach = tasks.attachSurface('x')
  detach()
  detach()
  // An agent: a dispose while one is under way is UVT_ECLOSING, one after
  // it EINVAL; the id may then be registered again.
  const a = tasks.registerAgent('a', 's')
  const disposed = a.dispose()
  await assert.rejects(a.dispose(), codeOf('UVT_ECLOSING'))
  await disposed
  await assert.rejects(a.dispose(), codeOf('EINVAL'))
  const again = tasks.registerAgent('a', 's')
  await tasks.close()
  // Close gave the agent back: disposing it now only calls back (nothing
  // of it is left); once more is EINVAL.
  await again.dispose()
  await assert.rejects(again.dispose(), codeOf('EINVAL'))
  assert.deepEqual(done, [id, id])
})

// The package is the library's version (include/uvtasks/version.h):
// `version` is the one this addon was built from.
test('version: the library this addon was built from, and the package version', () => {
  const { version } = require('..')
  const h = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'include', 'uvtasks', 'version.h'), 'utf8')
  assert.equal(version, /#define UVT_VERSION_STRING "([^"]+)"/.exec(h)[1])
  assert.equal(require('../package.json').version, version)
})

// R-LIMIT-1
test('maxLivePerOwner refuses a start beyond it with UVT_ELIMIT (R-LIMIT-1, N-1)', async () => {
  const { tasks } = fixture({ maxLivePerOwner: 1 })
  const c = controlled()
  tasks.start({ kind: 'js', label: 'l', run: c.run })
  assert.throws(() => tasks.start({ kind: 'js', label: 'l', run: controlled().run }),
    codeOf('UVT_ELIMIT'))
  c.end({ status: 'completed' })
  await tasks.wait('js-1', 5000)
  tasks.start({ kind: 'js', label: 'l', run: controlled().run })
  await tasks.close()
})

// R-FEED-1 and R-FORGET-1: every transition in order; forget drops a
// terminal record (EBUSY while live) and the feed says so.
test('watch sees every transition; forget drops terminal records (R-FEED-1, R-FORGET-1)', async () => {
  const { tasks } = fixture()
  const feed = []
  tasks.watch((s, dropped) => feed.push(`${s.id}:${s.status}${dropped ? ':dropped' : ''}`))
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  assert.throws(() => tasks.forget(id), codeOf('EBUSY'))
  c.end({ status: 'completed' })
  await tasks.wait(id, 5000)
  await new Promise((r) => setImmediate(r))
  tasks.forget(id)
  assert.throws(() => tasks.get(id), codeOf('UVT_ENOTASK'))
  // The feed is delivered through the loop: wait for its third change.
  await eventually(() => feed.length >= 3)
  assert.deepEqual(feed, [`${id}:running`, `${id}:completed`, `${id}:completed:dropped`])
  await tasks.close()
})

// N-2: a callback from the loop runs in a callback scope, so the ticks and
// microtasks it queues (promise reactions) run as soon as it returns, before
// the next callback of ours.  With a handle scope alone they waited until
// after the last callback of that loop pass (L1, L2, tick1, micro1).
test('callbacks settle inside a callback scope: microtasks run at once (N-2)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const order = []
  tasks.onTaskDone(() => {
    order.push('L1')
    queueMicrotask(() => order.push('micro1'))
    process.nextTick(() => order.push('tick1'))
  })
  tasks.onTaskDone(() => order.push('L2'))
  const w = tasks.wait(id, 5000).then(() => order.push('wait resolved'))
  c.end({ status: 'completed' })
  await w
  assert.deepEqual(order, ['L1', 'tick1', 'micro1', 'L2', 'wait resolved'])
  await tasks.close()
})

// R-TIME-1 through Node: JS that blocked the loop before calling leaves the
// loop's clock stale; the deadline still counts from the call.
test('a wait deadline counts from the call after JS blocked the loop (R-TIME-1, R-WAIT-7)', async () => {
  const { tasks } = fixture()
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  await new Promise((r) => setImmediate(r))
  busyWait(150) // the loop's cached time is now 150 ms behind
  const t0 = performance.now()
  await tasks.wait(id, 100)
  const waited = performance.now() - t0
  assert.ok(waited >= 95, `the 100 ms wait ended after ${waited.toFixed(1)} ms`)
  c.end({ status: 'completed' })
  await tasks.close()
})

// N-1 for argument errors the binding itself checks.
test('bad arguments throw TypeErrors with a code (N-1)', async () => {
  const { tasks } = fixture()
  assert.throws(() => tasks.get(42), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.onTaskDone('nope'), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.start({ kind: 'js', label: 'l' }), codeOf('ERR_INVALID_ARG_TYPE'))
  const c = controlled()
  tasks.start({ kind: 'js', label: 'l', run: c.run })
  await assert.rejects(tasks.wait('js-1', -5), codeOf('EINVAL')) // N-9 (D5)
  await assert.rejects(tasks.wait('js-1', 10, undefined, {}), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => new TaskRegistry({ teardownGraceMs: 'x' }), codeOf('ERR_INVALID_ARG_TYPE'))
  c.end({ status: 'completed' })
  await tasks.close()
})

// R-FORGET-2: forget() from the wait callback that reports the end.  With
// N-2, `await tasks.wait(id)` continues inside that callback, so this is
// the common Node idiom: the record is hidden at once and dropped once the
// dispatch is over; a wait resolved later in that dispatch still gets its
// terminal snapshot.  The same from an onTaskDone listener.
test('forget() right after await wait(), and from onTaskDone (R-FORGET-2, N-2)', async () => {
  const { tasks } = fixture()
  const feed = []
  let bothDropped
  const dropped = new Promise((r) => { bothDropped = r })
  tasks.watch((s, d) => {
    feed.push(`${s.id}:${s.status}${d ? ':dropped' : ''}`)
    if (d && feed.filter((f) => f.endsWith(':dropped')).length === 2) bothDropped()
  })
  const c = controlled()
  const id = tasks.start({ kind: 'js', label: 'l', run: c.run })
  const first = (async () => {
    const snap = await tasks.wait(id, 5000)
    tasks.forget(id)
    assert.throws(() => tasks.get(id), codeOf('UVT_ENOTASK'))
    return snap
  })()
  const second = tasks.wait(id, 5000)
  c.end({ status: 'completed' })
  assert.equal((await first).status, 'completed')
  assert.equal((await second).status, 'completed')
  assert.throws(() => tasks.get(id), codeOf('UVT_ENOTASK'))

  const d = controlled()
  const id2 = tasks.start({ kind: 'js', label: 'l2', run: d.run })
  let forgot = null
  tasks.onTaskDone((s) => {
    tasks.forget(s.id)
    forgot = s.id
  })
  const waited = tasks.wait(id2, 5000)
  d.end({ status: 'failed', detail: 'x' })
  assert.equal((await waited).status, 'failed') // after the listener
  assert.equal(forgot, id2)
  assert.throws(() => tasks.get(id2), codeOf('UVT_ENOTASK'))
  await dropped
  assert.equal(tasks.metrics().records, 0)
  await tasks.close()
  // The feed comes a turn late; per task, in order.
  const of = (t) => feed.filter((f) => f.startsWith(`${t}:`))
  assert.deepEqual(of(id), [`${id}:running`, `${id}:completed`, `${id}:completed:dropped`])
  assert.deepEqual(of(id2), [`${id2}:running`, `${id2}:failed`, `${id2}:failed:dropped`])
})
