// Shared helpers of the node --test suites.
'use strict'
const fs = require('node:fs')
const { threadId } = require('node:worker_threads')
const { TaskRegistry } = require('..')

// A registry with one surface attached, as most scenarios want.  A test
// that fails before its close() leaves live tasks, which would keep the
// file's process alive (N-3): an after() hook (of the test that called
// this, or of the file) closes the registry in any case.  Only tests call
// it: node:test is not loaded in the hosts and workers that use helpers.
function fixture(options = { teardownGraceMs: 2000 }) {
  const tasks = new TaskRegistry(options)
  const detach = tasks.attachSurface('test')
  require('node:test').after(() => tasks.close().catch(() => {}))
  return { tasks, detach }
}

// A JS producer whose test decides when it ends: `task.end(outcome)`;
// cancel() records its reason and, unless told otherwise, ends it killed.
function controlled(opts = {}) {
  const c = {
    cancels: [],
    output: '',
    end: null,
    cancelThrows: opts.cancelThrows || null,
    endOnCancel: opts.endOnCancel !== false,
  }
  c.run = () => {
    const done = new Promise((resolve, reject) => {
      c.end = resolve
      c.fail = reject
    })
    const hooks = {
      cancel(reason) {
        c.cancels.push(reason)
        if (c.cancelThrows) throw c.cancelThrows
        if (c.endOnCancel) c.end({ status: 'killed', detail: `cancelled: ${reason}` })
      },
      done,
    }
    if (opts.stream) {
      hooks.readOutput = () => {
        const s = c.output
        c.output = ''
        return s
      }
    }
    return hooks
  }
  return c
}

// Every process the tests start carries this mark in its environment: the
// tasks inherit it from the host (P-SPAWN-3), the exit-path hosts from the
// test that runs them (with "/<host>" appended, so that a test can also
// single out one host's processes).  A process counts as one of ours only
// with the mark, so a pid reused by someone else's process never reads as
// a leftover.
const MARK = 'UVTASKS_TEST_MARK'
if (!process.env[MARK]) process.env[MARK] = `${process.pid}-${Date.now()}`

// Does process `pid` carry `mark` (or a mark under it)?
function marked(pid, mark = process.env[MARK]) {
  let env
  try {
    env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1')
  } catch {
    return false
  }
  const entry = `${MARK}=${mark}`
  return env.split('\0').some((e) => e === entry || e.startsWith(`${entry}/`))
}

// /proc/PID/stat of every process: { pid, state, ppid, pgrp, sid }.  The
// command name may hold spaces and parentheses: fields start after the
// last ')'.
function processes() {
  const all = []
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8')
    } catch {
      continue
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    all.push({ pid: Number(d), state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]), sid: Number(f[3]) })
  }
  return all
}

// Our live members (zombies are dead) of session `sid`, which is a process
// task's pid: the task is its whole session, `set -m` jobs with groups of
// their own included (P-KILL-5).
function sessionMembers(sid) {
  return processes().filter((p) => p.sid === sid && p.state !== 'Z' && marked(p.pid))
    .map((p) => p.pid)
}

// The process groups of our live members of session `sid`.
function sessionGroups(sid) {
  return new Set(processes().filter((p) => p.sid === sid && p.state !== 'Z' &&
    marked(p.pid)).map((p) => p.pgrp))
}

// Every live process that carries `mark`, wherever it went: a leftover
// that left its session is found too.
function markedProcesses(mark = process.env[MARK]) {
  return processes().filter((p) => p.state !== 'Z' && p.pid !== process.pid &&
    marked(p.pid, mark)).map((p) => p.pid)
}

// Children of this process that are zombies (L-2).
function zombieChildren() {
  return processes().filter((p) => p.state === 'Z' && p.ppid === process.pid)
    .map((p) => p.pid)
}

// The pid of process task `id` once the spawner thread's answer reached the
// loop (P-SPAWN-6: pid() is undefined while the spawn is out).  It arrives
// on its own through the loop; this only looks for it every millisecond.
async function pidOf(tasks, id, caller, ms = 10000) {
  const end = Date.now() + ms
  for (;;) {
    const pid = tasks.pid(id, caller)
    if (pid !== undefined) return pid
    if (Date.now() > end) throw new Error(`${id}: no pid after ${ms} ms`)
    await new Promise((r) => setTimeout(r, 1))
  }
}

function openFds() {
  return fs.readdirSync('/proc/self/fd').length
}

// Poll `pred` every 10 ms until it is true or `ms` passed; returns its last
// value.  (For conditions outside our JS, such as a session emptying
// after its owner died; never to order our own callbacks.)
async function eventually(pred, ms = 5000) {
  const end = Date.now() + ms
  for (;;) {
    const v = pred()
    if (v || Date.now() > end) return v
    await new Promise((r) => setTimeout(r, 10))
  }
}

// An interactive task driven the way a host drives one (P-EVT-1): spawn()
// with an onOutput that reads what is new, plus a final read once the task
// ended (onOutput may stay silent for the last bytes before the end).
// `d.until(text)` resolves once the output so far (after what earlier
// until() calls matched) includes `text`; it rejects, naming what came,
// if the task ends or `ms` pass first.
function driver(tasks, options, caller) {
  const d = { text: '', from: 0, calls: 0, threads: new Set(), waiters: [], ended: false }
  const collect = () => {
    d.text += tasks.read(d.id, caller).text
    for (const w of [...d.waiters]) w.check()
  }
  d.id = tasks.spawn({
    ...options,
    owner: caller,
    onOutput(id) {
      d.calls++
      d.threads.add(threadId)
      if (id !== d.id) throw new Error(`onOutput(${id}) for ${d.id}`)
      collect()
    },
  })
  d.done = tasks.wait(d.id, 60000, caller).then((snap) => {
    d.ended = true
    collect()
    for (const w of [...d.waiters]) w.fail(`${d.id} ended (${snap.detail})`)
    return snap
  })
  d.until = (text, ms = 20000) => new Promise((resolve, reject) => {
    let timer = null
    const w = {
      check() {
        const at = d.text.indexOf(text, d.from)
        if (at < 0) return
        d.from = at + text.length
        clearTimeout(timer)
        d.waiters.splice(d.waiters.indexOf(w), 1)
        resolve(d.text)
      },
      fail(why) {
        clearTimeout(timer)
        d.waiters.splice(d.waiters.indexOf(w), 1)
        reject(new Error(`waiting for ${JSON.stringify(text)}: ${why}; output: ` +
          JSON.stringify(d.text.slice(-400))))
      },
    }
    d.waiters.push(w)
    w.check()
    if (!d.waiters.includes(w)) return
    if (d.ended) return w.fail('ended')
    timer = setTimeout(() => w.fail(`nothing after ${ms} ms`), ms)
  })
  return d
}

// Live members of session `sid` running `comm` (the kernel's 15-character
// command name).
function sessionRuns(sid, comm) {
  return processes().filter((p) => p.sid === sid && p.state !== 'Z' &&
    readComm(p.pid) === comm).length > 0
}

function readComm(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}

// Collect garbage now (the suites run without --expose-gc): for checks
// that the binding let go of a JS function (FinalizationRegistry).
let gcFn = null
function collectGarbage() {
  if (gcFn === null) {
    require('node:v8').setFlagsFromString('--expose-gc')
    gcFn = require('node:vm').runInNewContext('gc')
  }
  gcFn()
}

// Resolves once `registry` (a FinalizationRegistry whose callback counts
// into `counter.n`) has seen `n` objects collected, or after `ms`.
async function collected(counter, n, ms = 10000) {
  const end = Date.now() + ms
  while (counter.n < n && Date.now() < end) {
    collectGarbage()
    await new Promise((r) => setTimeout(r, 10))
  }
  return counter.n
}

function busyWait(ms) {
  const end = Date.now() + ms
  while (Date.now() < end);
}

module.exports = {
  fixture, controlled, sessionMembers, sessionGroups, markedProcesses, zombieChildren,
  pidOf, openFds, eventually, busyWait, driver, sessionRuns,
  collectGarbage, collected,
}
