// Shared helpers of the node --test suites.
'use strict'
const fs = require('node:fs')
const { TaskRegistry } = require('..')

// A registry with one surface attached, as most scenarios want.
function fixture(options = { teardownGraceMs: 2000 }) {
  const tasks = new TaskRegistry(options)
  const detach = tasks.attachSurface('test')
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

function busyWait(ms) {
  const end = Date.now() + ms
  while (Date.now() < end);
}

module.exports = {
  fixture, controlled, sessionMembers, sessionGroups, markedProcesses, zombieChildren,
  pidOf, openFds, eventually, busyWait,
}
