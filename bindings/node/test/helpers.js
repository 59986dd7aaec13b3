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

// Members of process group `pgid` that are alive (zombies are dead).
function groupMembers(pgid) {
  const alive = []
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8')
    } catch {
      continue
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (Number(f[2]) === pgid && f[0] !== 'Z') alive.push(Number(d))
  }
  return alive
}

// Children of this process that are zombies (L-2).
function zombieChildren() {
  const z = []
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8')
    } catch {
      continue
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (f[0] === 'Z' && Number(f[1]) === process.pid) z.push(Number(d))
  }
  return z
}

function openFds() {
  return fs.readdirSync('/proc/self/fd').length
}

// Poll `pred` every 10 ms until it is true or `ms` passed; returns its last
// value.  (For conditions outside this process, such as a process group
// ending after its owner died; never to order our own callbacks.)
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
  fixture, controlled, groupMembers, zombieChildren, openFds, eventually, busyWait,
}
