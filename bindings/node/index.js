// uvtasks for Node.js (contract §8): the background task registry on Node's own
// libuv loop.  This file gives the API its JS shape; every rule is the C
// library's (N-4): each call maps onto one library call, each callback onto
// one library callback.
'use strict'

const { constants: { signals } } = require('node:os')
const { isMainThread } = require('node:worker_threads')
const { Readable } = require('node:stream')

// build/uvtasks.node or a prebuilt addon (loader.js, N-5).
const native = require('./loader.js').load()
const { OutputPump, stdinWritable } = require('./streams.js')
const { Retention } = require('./retention.js')

const UVT_EWAITTIMEOUT = -20007
const UVT_EABORTED = -20008

// The C handle of each agent object (never exposed).
const agentHandles = new WeakMap()
// What its registry does once an agent's disposal is done (N-11).
const agentDisposed = new WeakMap()

function handleOf(caller, what = 'caller') {
  if (caller === undefined || caller === null) return undefined
  const h = agentHandles.get(caller)
  if (h === undefined) {
    throw codedTypeError(`${what} must be an agent from registerAgent()`)
  }
  return h
}

function codedTypeError(message) {
  const e = new TypeError(message)
  e.code = 'ERR_INVALID_ARG_TYPE'
  return e
}

function abortedError(signal) {
  const e = new Error('UVT_EABORTED: the wait was aborted by its caller', {
    cause: signal.reason,
  })
  e.code = 'UVT_EABORTED'
  e.errno = UVT_EABORTED
  return e
}

// 'SIGTERM' for 15, as child_process reports a signal.
function signalName(n) {
  for (const [name, num] of Object.entries(signals)) {
    if (num === n) return name
  }
  return `SIG${n}`
}

// N-12: the most bytes onData gets in one call, and what the library
// holds unread per stream before it stops reading the task's output.
const HIGH_WATER_MARK = 64 * 1024
// N-12: the kernel buffer of such a task's stdout pipe: how far the task
// can write ahead of the reads before it blocks (child_process's stdout
// socket holds about 208 KiB).  A task scheduled late then writes several
// chunks at once instead of one per wakeup (docs/performance.md, "Output
// into a UI callback").
const STDOUT_PIPE_BYTES = 256 * 1024

function highWaterMark(options) {
  const v = options.highWaterMark
  if (v === undefined || v === null) return HIGH_WATER_MARK
  if (options.onData === undefined && options.streams !== true) {
    const e = new TypeError('options.highWaterMark is the chunk size of onData or ' +
                            'streams: true; this task has neither')
    e.code = 'ERR_INVALID_ARG_VALUE'
    throw e
  }
  if (typeof v !== 'number') throw codedTypeError('options.highWaterMark must be a number')
  if (!Number.isInteger(v) || v < 1 || v > 2 ** 32) {
    const e = new RangeError('options.highWaterMark must be a whole number of bytes, 1 to 2^32')
    e.code = 'ERR_OUT_OF_RANGE'
    throw e
  }
  return v
}

// The signals P-KILL-8 allows (uvt_process_signal()).
const SIGNALLABLE = new Set(['SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2',
  'SIGTERM', 'SIGKILL', 'SIGCONT', 'SIGSTOP', 'SIGWINCH'].map((n) => signals[n]))

// N-13: an options object (kill's, wait's), not an agent, a number or null.
function isOptions(v) {
  return v !== null && typeof v === 'object' && !agentHandles.has(v) &&
    Object.getPrototypeOf(v) === Object.prototype
}

function checkKeys(o, keys, what) {
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) {
      const e = new TypeError(`${what}: unknown option ${JSON.stringify(k)} ` +
                              `(it takes ${keys.join(', ')})`)
      e.code = 'ERR_INVALID_ARG_VALUE'
      throw e
    }
  }
}

// kill()'s signal option: SIGTERM (15) or SIGKILL (9).
function killSignal(sig) {
  const n = typeof sig === 'string' ? signals[sig] : sig
  if (n === signals.SIGTERM || n === signals.SIGKILL) return n
  const e = new Error(`EINVAL: kill() sends SIGTERM, then SIGKILL after graceMs ` +
                      `(signal: 'SIGTERM', the default) or SIGKILL at once ` +
                      `(signal: 'SIGKILL'), not ${String(sig)}; signal(id, ` +
                      `${JSON.stringify(String(sig))}) sends one signal without a kill`)
  e.code = 'EINVAL'
  e.errno = -22
  throw e
}

function checkFunction(fn, what) {
  if (typeof fn !== 'function') throw codedTypeError(`${what} must be a function`)
}

// ---- ends that run no cleanup hook (N-3) --------------------------------
// On the main thread, process.exit() and an uncaught exception end the
// process from the 'exit' event, and a fatal signal without any JS: no
// registry gets to close.  While a registry is open, the 'exit' event sends
// SIGKILL at once to the whole session of every live process task of every
// thread (a spawn still in progress is waited for), and SIGINT/SIGTERM/
// SIGHUP, when nobody else listens for them, do the same and then end the
// process by that signal, as Node's default would.  Workers need none of
// it: their environment teardown closes their registries.
let openRegistries = 0
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP']

function onExit() {
  native.stopAllNow()
}

function onSignal(sig) {
  if (process.listenerCount(sig) > 1) return // the host handles it
  native.stopAllNow()
  for (const s of SIGNALS) process.removeListener(s, onSignal)
  process.kill(process.pid, sig)
}

function registryOpened() {
  if (!isMainThread || openRegistries++ > 0) return
  process.on('exit', onExit)
  for (const s of SIGNALS) process.on(s, onSignal)
}

function registryClosed() {
  if (!isMainThread || --openRegistries > 0) return
  process.removeListener('exit', onExit)
  for (const s of SIGNALS) process.removeListener(s, onSignal)
}

// ---- the guardian (N-10) ----------------------------------------------------
// One per host process, started for the first registry with
// { guardian: true } and shared by all of them: guardian.js.  Its stdin is
// a pipe only this process writes to; the pipe ends when the process
// does, however it ends, and the guardian then stops every process whose
// environment carries the token.
let guardianToken = null

function startGuardian() {
  if (guardianToken !== null) return guardianToken
  const { spawn } = require('node:child_process')
  const token = `${process.pid}-${require('node:crypto').randomBytes(8).toString('hex')}`
  const child = spawn(process.execPath,
    ['--max-old-space-size=16', require('node:path').join(__dirname, 'guardian.js'), token],
    { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env: {} })
  child.on('error', (err) => console.error('uvtasks: the guardian did not start:', err))
  // Neither it nor its pipe keeps the host alive.
  child.unref()
  child.stdin.on('error', () => {})
  if (typeof child.stdin.unref === 'function') child.stdin.unref()
  guardianToken = token
  return token
}

// ---- agents ---------------------------------------------------------------

class Agent {
  constructor(agentId, sessionId) {
    this.id = agentId
    this.session = sessionId
    Object.freeze(this)
  }

  // R-AGENT-1: resolves once every task of this agent was stopped and
  // dropped.
  dispose() {
    return new Promise((resolve) => {
      const h = agentHandles.get(this)
      native.disposeAgent(h, () => {
        agentDisposed.get(this)?.(h)
        resolve()
      })
    })
  }
}

// ---- the registry -----------------------------------------------------------

// Bytes or text of a producer as one Buffer or string.
function joinOutput(held, output) {
  if (held === undefined || held === null || held.length === 0) return output
  if (output === undefined || output === null || output.length === 0) return held
  if (typeof held === 'string' && typeof output === 'string') return held + output
  return Buffer.concat([Buffer.from(held), Buffer.from(output)])
}

// N-9 (D3): what a stream producer still holds when done settles is read
// once more, as the origin does, and delivered before the outcome's own
// output.  A readOutput that throws then is logged; the task settles.
function heldOutput(hooks) {
  if (hooks.readOutput === undefined) return undefined
  try {
    const held = hooks.readOutput()
    if (held === undefined || held === null || typeof held === 'string' ||
        held instanceof Uint8Array) return held
    throw new TypeError('readOutput() must return a string or a Buffer')
  } catch (err) {
    console.error('uvtasks: readOutput() threw at settlement:', err)
    return undefined
  }
}

function settleOutcome(task, outcome, held) {
  try {
    if (outcome === null || typeof outcome !== 'object') {
      throw new TypeError('done must resolve to { status, detail?, output? }')
    }
    const { status, detail, output } = outcome
    if (status !== 'completed' && status !== 'killed' && status !== 'failed') {
      throw new TypeError(`done resolved with status ${String(status)}, not ` +
                          "'completed', 'killed' or 'failed'")
    }
    if (detail !== undefined && detail !== null && typeof detail !== 'string') {
      throw new TypeError('outcome.detail must be a string')
    }
    native.settle(task, status, detail, joinOutput(held, output))
  } catch (err) {
    native.settle(task, 'failed', String(err), held)
  }
}

// P-LEFT-1: a task that left processes running says so in the detail it
// settled with ("exit code: 0; 2 processes still running"); one that did
// not has none, and a session that emptied gains no members, so only these
// need a look at /proc for the live count.
function leftAtEnd(snap) {
  return typeof snap.detail === 'string' && / still running$/.test(snap.detail)
}

// N-8: what a registry keeps of ended tasks by default: the server's count
// (uvtasks-mcp --keep-finished), and at most this much of their output.
const KEEP_FINISHED = 100
const MAX_UNREAD_BYTES = 16 * 1024 * 1024

function bound(v, name, dflt) {
  if (v === undefined || v === null) return dflt
  if (typeof v !== 'number') throw codedTypeError(`options.${name} must be a number`)
  if (!(v >= 0) || (v !== Infinity && !Number.isInteger(v))) {
    const e = new RangeError(`options.${name} must be an integer >= 0, or Infinity`)
    e.code = 'ERR_OUT_OF_RANGE'
    throw e
  }
  return v
}

class TaskRegistry {
  #r
  #closing = null
  #pumps = new Map() // id -> OutputPump of a live task with onData/streams (N-6)

  constructor(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw codedTypeError('options must be an object')
    }
    const { teardownGraceMs, maxLivePerOwner } = options
    if (options.guardian !== undefined && typeof options.guardian !== 'boolean') {
      throw codedTypeError('options.guardian must be a boolean')
    }
    if (options.spawnHelper !== undefined && typeof options.spawnHelper !== 'boolean') {
      throw codedTypeError('options.spawnHelper must be a boolean')
    }
    this.#guard = options.guardian === true ? startGuardian() : null
    const keep = bound(options.keepFinished, 'keepFinished', KEEP_FINISHED)
    const maxBytes = bound(options.maxUnreadBytes, 'maxUnreadBytes', MAX_UNREAD_BYTES)
    this.#r = native.create({ teardownGraceMs, maxLivePerOwner, spawnHelper: options.spawnHelper === true }, this)
    const r = this.#r
    this.#retention = new Retention({
      held: (id, h) => native.heldBytes(r, id, h),
      leftovers: (id, h) => native.procStatus(r, id, h, true)?.leftovers ?? 0,
      forget: (id, h) => native.forget(r, id, h),
      dropped: (id) => this.#gone(id),
    }, keep, maxBytes)
    registryOpened()
    // The package's own listener, first of all: per-task end hooks (N-7)
    // and retention (N-8).
    native.listen(this.#r, (snap, owner) => this.#ended(snap, owner))
  }

  #guard = null // the guardian's token (N-10), or null
  #endHooks = new Map() // id -> function run at the task's end (N-7)
  #clean = new Set() // ended process tasks with no leftovers: none will come
  #retention // what is kept of ended tasks (N-11, retention.js)
  #consumed = new Set() // ended tasks whose onData pump read the rest (N-11)
  #aborted = new Set() // tasks an AbortSignal killed (N-13)
  #sweepQueued = false

  // The handle to look at a task with: its caller's, else one of its
  // owner's session (R-OWN-2 fences a task off from other sessions).
  #as(snap, caller) {
    if (caller !== undefined || snap.ownerSession === undefined) return caller
    return this.#sessionAgents.get(snap.ownerSession)
  }

  #sessionAgents = new Map() // session -> the handle of its latest agent

  #ended(snap, owner) {
    const h = owner === undefined ? undefined : agentHandles.get(owner)
    const hook = this.#endHooks.get(snap.id)
    if (hook !== undefined) {
      this.#endHooks.delete(snap.id)
      hook()
    }
    const consumed = this.#consumed.delete(snap.id)
    this.#retention.ended(snap.id, h, leftAtEnd(snap), consumed)
    this.#queueSweep()
  }

  // Registry close: no listener runs from now on (so no task's end reaches
  // #ended): the streams get what is there and end, the abort listeners go.
  #letGo() {
    for (const pump of this.#pumps.values()) {
      try {
        pump.pull(true)
      } catch {}
    }
    this.#pumps.clear()
    for (const hook of this.#endHooks.values()) hook()
    this.#endHooks.clear()
    this.#retention.clear()
  }

  // The package's state of a task that is gone.
  #gone(id) {
    this.#clean.delete(id)
    this.#aborted.delete(id)
  }

  // After the dispatch that ended a task (its waits have reported it by
  // then), not inside it.
  #queueSweep() {
    if (this.#sweepQueued || !this.#retention.due()) return
    this.#sweepQueued = true
    setImmediate(() => {
      this.#sweepQueued = false
      this.#retention.sweep()
    })
  }

  // A read through the package of an ended task: nothing of it is left to
  // read (N-11).
  #wasRead(snap) {
    if (snap.status === 'completed' || snap.status === 'killed' ||
        snap.status === 'failed') {
      this.#retention.read(snap.id)
      this.#queueSweep()
    }
  }

  // N-11: a look at an id the bounds forgot says so (the code stays
  // UVT_ENOTASK: N-1).
  #explain(err, id) {
    if (err === null || typeof err !== 'object' || err.code !== 'UVT_ENOTASK') return err
    const why = this.#retention.why(id)
    if (why === undefined) return err
    err.message += why.unreadBytes > 0
      ? ` (forgotten: ${why.bound}: ${why.unreadBytes} bytes never read were dropped)`
      : ` (forgotten: ${why.bound}: nothing of it was left to read)`
    err.forgotten = { ...why }
    return err
  }

  #looked(id, fn) {
    try {
      return fn()
    } catch (err) {
      throw this.#explain(err, id)
    }
  }

  // N-7: a process task's snapshot also says how it ended, without a read:
  // exitCode (0..255) or signal ('SIGTERM') once it ended (both null while
  // it runs or when there is no status), and leftovers, the processes of
  // its session still running after its end (P-LEFT-1; 0 while it runs).
  #status(snap, caller) {
    if (snap === undefined || snap === null) return snap
    if (this.#aborted.has(snap.id)) snap.aborted = true
    const ended = snap.status === 'completed' || snap.status === 'killed' ||
                  snap.status === 'failed'
    if (ended && !leftAtEnd(snap)) this.#clean.add(snap.id)
    let st
    try {
      st = native.procStatus(this.#r, snap.id, this.#as(snap, caller),
                             ended && !this.#clean.has(snap.id))
    } catch {
      return snap // dropped meanwhile
    }
    if (st === undefined) return snap // not a process task
    snap.exitCode = st.exitCode ?? null
    snap.signal = st.termSignal === undefined || st.termSignal === null
      ? null : signalName(st.termSignal)
    if (st.leftovers === undefined) {
      snap.leftovers = 0
    } else {
      snap.leftovers = st.leftovers
      if (st.leftovers === 0) this.#clean.add(snap.id)
    }
    return snap
  }

  // R-SURF-1: a control surface; starts are refused while none is attached.
  attachSurface(name) {
    const s = native.attachSurface(this.#r, name)
    return () => native.detachSurface(s)
  }

  // R-OWN-1/3: an agent owns tasks and belongs to a session.
  registerAgent(agentId, sessionId) {
    // The C side keeps the object, to hand it to onTaskDone as the owner.
    const agent = new Agent(agentId, sessionId)
    const h = native.registerAgent(this.#r, agentId, sessionId, agent)
    agentHandles.set(agent, h)
    agentDisposed.set(agent, (handle) => this.#retention.agentGone(handle))
    this.#sessionAgents.set(sessionId, h)
    return agent
  }

  // A JS producer (R-START-*): run() -> { cancel(reason), done, readOutput? }.
  start(spec) {
    if (spec === null || typeof spec !== 'object') {
      throw codedTypeError('spec must be an object')
    }
    checkFunction(spec.run, 'spec.run')
    const owner = handleOf(spec.owner, 'spec.owner')
    return native.start(this.#r, spec.kind, spec.label, owner, (task) => {
      const hooks = spec.run()
      if (hooks === null || typeof hooks !== 'object') {
        throw codedTypeError('run() must return { cancel, done, readOutput? }')
      }
      checkFunction(hooks.cancel, 'the hooks\' cancel')
      if (hooks.done === null || typeof hooks.done !== 'object' ||
          typeof hooks.done.then !== 'function') {
        throw codedTypeError('the hooks\' done must be a Promise')
      }
      if (hooks.readOutput !== undefined) {
        checkFunction(hooks.readOutput, 'the hooks\' readOutput')
      }
      Promise.resolve(hooks.done).then(
        (outcome) => settleOutcome(task, outcome, heldOutput(hooks)),
        (err) => native.settle(task, 'failed', String(err), heldOutput(hooks)))
      return {
        cancel: (reason) => { hooks.cancel(reason) },
        readOutput: hooks.readOutput && (() => hooks.readOutput()),
      }
    })
  }

  get(id, caller) {
    const h = handleOf(caller)
    return this.#status(this.#looked(id, () => native.get(this.#r, id, h)), h)
  }

  list(caller) {
    const h = handleOf(caller)
    return native.list(this.#r, h).map((snap) => this.#status(snap, h))
  }

  read(id, caller) {
    const h = handleOf(caller)
    const r = this.#looked(id, () => native.read(this.#r, id, h))
    this.#status(r.snapshot, h)
    this.#wasRead(r.snapshot)
    return r
  }

  // R-KILL-*: kill(id, caller?, reason?) or, N-13, kill(id, { signal,
  // reason, caller }).  `signal`: 'SIGTERM' (the default: SIGTERM to the
  // whole session, graceMs, then SIGKILL) or 'SIGKILL' (the same kill,
  // with SIGKILL to every process of the session at once); any other is
  // EINVAL, since a kill always ends with SIGKILL: signal() sends one
  // signal without a kill.
  kill(id, caller, reason) {
    let sig = null
    if (isOptions(caller)) {
      const o = caller
      checkKeys(o, ['signal', 'reason', 'caller'], 'kill() options')
      caller = o.caller
      reason = o.reason
      if (o.signal !== undefined && o.signal !== null) sig = killSignal(o.signal)
    }
    const h = handleOf(caller)
    const res = this.#looked(id, () => native.kill(this.#r, id, h, reason))
    if (sig === signals.SIGKILL && res === 'requested') {
      try {
        native.signal(this.#r, id, h, sig)
      } catch (err) {
        // The spawn is still out: SIGKILL as soon as there is a pid (the
        // kill itself already stops it then, after graceMs).
        if (err.code === 'EAGAIN') this.#queueSignal(id, h, sig)
      }
    }
    return res
  }

  // R-WAIT-*: the terminal snapshot, or the live one when the timeout
  // passed; an abort rejects with UVT_EABORTED unless the task already
  // settled.  wait(id, timeoutMs?, caller?, signal?) or, N-13, wait(id,
  // { timeout, caller, signal }).
  //
  // N-9 (D5): a timeout that is not a positive number (0, negative, NaN,
  // +-Infinity) is the library's EINVAL, after its id checks; a fraction
  // is rounded up.  No timeout (undefined or null) waits until the end.
  wait(id, timeoutMs, caller, signal) {
    if (isOptions(timeoutMs)) {
      const o = timeoutMs
      checkKeys(o, ['timeout', 'caller', 'signal'], 'wait() options')
      timeoutMs = o.timeout
      caller = o.caller
      signal = o.signal
    }
    return new Promise((resolve, reject) => {
      if (timeoutMs === undefined || timeoutMs === null) {
        timeoutMs = Number.MAX_SAFE_INTEGER // the library saturates: never
      } else if (typeof timeoutMs === 'number') {
        timeoutMs = timeoutMs > 0 && timeoutMs !== Infinity
          ? Math.min(Math.ceil(timeoutMs), Number.MAX_SAFE_INTEGER) : 0
      }
      if (signal !== undefined && signal !== null &&
          (typeof signal.addEventListener !== 'function' ||
           typeof signal.aborted !== 'boolean')) {
        throw codedTypeError('signal must be an AbortSignal')
      }
      let onAbort = null
      const h = handleOf(caller)
      const w = this.#looked(id, () => native.wait(this.#r, id, timeoutMs, h,
        (status, snapshot) => {
          if (onAbort !== null) signal.removeEventListener('abort', onAbort)
          this.#queueSweep()
          if (status === 0 || status === UVT_EWAITTIMEOUT) resolve(this.#status(snapshot, h))
          else reject(abortedError(signal))
        }))
      if (signal !== undefined && signal !== null) {
        onAbort = () => native.waitAbort(w)
        if (signal.aborted) onAbort()
        else signal.addEventListener('abort', onAbort, { once: true })
      }
    })
  }

  // R-DONE-3: once per terminal task, with its owner agent (or undefined).
  // N-9 (D4): a listener that throws is contained, as in the origin: the
  // error is logged, the other listeners run, the host goes on.
  onTaskDone(listener) {
    checkFunction(listener, 'listener')
    const l = native.listen(this.#r, (snapshot, owner) => {
      try {
        listener(this.#status(snapshot, owner && agentHandles.get(owner)), owner)
      } catch (err) {
        console.error(`uvtasks: an onTaskDone listener threw (task ${snapshot.id}):`, err)
      }
    })
    return () => native.unlisten(l)
  }

  // R-FEED-1: every transition of every task.
  watch(callback) {
    checkFunction(callback, 'callback')
    const w = native.watch(this.#r, (snapshot, dropped) =>
      callback(dropped ? snapshot : this.#status(snapshot), dropped))
    return () => native.unwatch(w)
  }

  forget(id, caller) {
    const h = handleOf(caller)
    this.#looked(id, () => native.forget(this.#r, id, h))
    this.#retention.removed(id)
    this.#gone(id)
  }

  // The process producer (contract §3, §3b).
  spawn(options) {
    if (options === null || typeof options !== 'object') {
      throw codedTypeError('options must be an object')
    }
    const o = { ...options }
    o.owner = handleOf(options.owner, 'options.owner')
    if (options.env !== undefined && options.env !== null) {
      if (typeof options.env !== 'object') {
        throw codedTypeError('options.env must be an object of strings')
      }
      // As node:child_process does: an undefined value is no variable.
      o.env = Object.entries(options.env).filter(([, v]) => v !== undefined)
        .map(([k, v]) => {
          if (k === '' || k.includes('=')) {
            throw codedTypeError(`options.env: invalid name ${JSON.stringify(k)}`)
          }
          return `${k}=${String(v)}`
        })
    }
    if (options.durable !== undefined && typeof options.durable !== 'boolean') {
      throw codedTypeError('options.durable must be a boolean')
    }
    if (this.#guard !== null && options.durable !== true) {
      // N-10: the mark the guardian looks for; last, so it wins.  A
      // durable task outlives the host (D-1): the guardian leaves it.
      o.env = [...(o.env || []), `UVTASKS_GUARDIAN=${this.#guard}`]
    }
    if (options.stdin === 'null') o.stdin = undefined
    if (options.onOutput !== undefined) checkFunction(options.onOutput, 'options.onOutput')
    if (options.onData !== undefined) checkFunction(options.onData, 'options.onData')
    if (options.streams !== undefined && typeof options.streams !== 'boolean') {
      throw codedTypeError('options.streams must be a boolean')
    }
    // N-6: the host is the reader; backpressure instead of drops.
    let pump = null
    const hwm = highWaterMark(options)
    if (options.onData !== undefined || options.streams === true) {
      const r = this.#r
      const onOutput = options.onOutput
      const owner = o.owner
      pump = new OutputPump(() => native.readChunks(r, pump.id, owner),
                            options.onData, hwm)
      // N-12: the library holds at most a chunk per stream before it stops
      // reading the task's pipe, so each read hands over at most that (as
      // child_process's 64 KiB reads), one chunk per stream per loop turn.
      o.outputCapBytes = hwm
      o.stdoutPipeBytes = STDOUT_PIPE_BYTES
      o.outputBackpressure = true
      o.outputAtEnd = true
      o.onOutput = (id, atEnd) => {
        if (atEnd === true) {
          this.#pumps.delete(id)
          this.#consumed.add(id) // N-11: the package was its reader
          pump.pull(true)
        } else {
          pump.pull(false)
          if (onOutput !== undefined) onOutput(id)
        }
      }
    }
    const signal = options.signal
    if (signal !== undefined && signal !== null &&
        (typeof signal.addEventListener !== 'function' ||
         typeof signal.aborted !== 'boolean')) {
      throw codedTypeError('options.signal must be an AbortSignal')
    }
    delete o.onData
    delete o.streams
    delete o.highWaterMark
    delete o.signal
    const id = native.spawn(this.#r, o)
    if (pump !== null) {
      pump.id = id
      this.#pumps.set(id, pump)
    }
    if (signal !== undefined && signal !== null) this.#killOnAbort(id, o.owner, signal)
    return id
  }

  // N-7: an abort kills the task (as kill() does: its whole session,
  // grace, then SIGKILL), with the abort's reason as the kill's reason.
  #killOnAbort(id, owner, signal) {
    const onAbort = () => {
      this.#endHooks.delete(id)
      const reason = signal.reason instanceof Error ? signal.reason.message
        : signal.reason === undefined ? 'aborted' : String(signal.reason)
      try {
        // N-13: snapshots say aborted: true (a reason is only text).
        if (native.kill(this.#r, id, owner, `aborted: ${reason}`) === 'requested') {
          this.#aborted.add(id)
        }
      } catch {} // ended or forgotten meanwhile, or the registry closed
    }
    if (signal.aborted) {
      onAbort()
      return
    }
    signal.addEventListener('abort', onAbort, { once: true })
    this.#endHooks.set(id, () => signal.removeEventListener('abort', onAbort))
  }

  // N-7 / P-KILL-8: one signal ('SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1',
  // 'SIGUSR2', 'SIGTERM', 'SIGKILL', 'SIGCONT', 'SIGSTOP', 'SIGWINCH', or
  // its number) to every process of the live task's session; no
  // escalation: the task stays live unless the signal ends it.
  //
  // N-13: while the spawn is still out (no pid yet, P-SPAWN-6) the signal
  // is queued, in order with later ones, and sent once the process exists
  // (dropped if it never does, or ended first: there is nothing to
  // signal then).  Returns 'sent' or 'queued'.
  signal(id, sig, caller) {
    let n
    if (typeof sig === 'number') n = Number.isInteger(sig) ? sig : 0
    else if (typeof sig === 'string') n = signals[sig] ?? 0
    else throw codedTypeError('signal must be a name (\'SIGINT\') or a number')
    const h = handleOf(caller)
    const queued = this.#signalQueue.get(id)
    if (queued !== undefined && queued.h === h) {
      if (!SIGNALLABLE.has(n)) {
        this.#looked(id, () => native.signal(this.#r, id, h, n)) // its EINVAL
      }
      queued.sigs.push(n)
      return 'queued'
    }
    try {
      native.signal(this.#r, id, h, n)
      return 'sent'
    } catch (err) {
      if (err.code !== 'EAGAIN') throw this.#explain(err, id)
    }
    this.#queueSignal(id, h, n)
    return 'queued'
  }

  #signalQueue = new Map() // id -> { h, sigs } while its spawn is out (N-13)

  #queueSignal(id, h, n) {
    const q = this.#signalQueue.get(id)
    if (q !== undefined) {
      q.sigs.push(n)
      return
    }
    this.#signalQueue.set(id, { h, sigs: [n] })
    const send = () => {
      const { sigs } = this.#signalQueue.get(id)
      this.#signalQueue.delete(id)
      for (const s of sigs) {
        try {
          native.signal(this.#r, id, h, s)
        } catch {} // ended meanwhile (ESRCH), or the registry closed
      }
    }
    this.#spawnedAs(id, h).then(send, () => this.#signalQueue.delete(id))
  }

  // N-7: resolves with { pid } once the task's process exists, or rejects
  // with the error that kept it from existing (the spawn's, as 'ENOENT';
  // ESRCH when a kill came first).  The library has no event for it: the
  // pid is looked at once per loop turn, then every few ms.
  spawned(id, caller) {
    return this.#spawnedAs(id, handleOf(caller))
  }

  #spawnedAs(id, h) {
    return new Promise((resolve, reject) => {
      let turns = 0
      const again = () => {
        if (++turns < 20) setImmediate(check)
        else setTimeout(check, Math.min(turns - 18, 10))
      }
      const check = () => {
        let pid
        try {
          pid = native.pid(this.#r, id, h)
        } catch (err) {
          // A failed spawn is known before the task settles with its name.
          const e = this.#spawnError(id, h, err)
          if (e !== null) reject(e)
          else again()
          return
        }
        if (pid !== undefined) resolve({ pid })
        else again()
      }
      check()
    })
  }

  // The error for spawned() to reject with, or null: not known yet.
  #spawnError(id, h, err) {
    if (err.code !== 'ESRCH') return err
    let snap
    try {
      snap = native.get(this.#r, id, h)
    } catch (e) {
      return e
    }
    if (snap.status === 'running' || snap.status === 'stopping') return null
    const m = /^spawn failed: ([A-Z0-9_]+)/.exec(snap.detail || '')
    if (m === null) return err
    const e = new Error(`${m[1]}: spawn of ${id} failed`)
    e.code = m[1]
    e.syscall = 'spawn'
    return e
  }

  // N-6: the task's stdout / stderr as a Readable (one per task and
  // stream), for a task spawned with onData or streams: true.  Ends at the
  // task's end, after its last bytes.
  stdout(id, caller) {
    return this.#readable(id, caller, 'stdout')
  }

  stderr(id, caller) {
    return this.#readable(id, caller, 'stderr')
  }

  #readable(id, caller, stream) {
    const snap = native.get(this.#r, id, handleOf(caller)) // ENOTASK, EFOREIGN
    const pump = this.#pumps.get(id)
    if (pump !== undefined) return pump.readable(stream)
    if (snap.status === 'running' || snap.status === 'stopping') {
      const e = new Error(`EINVAL: ${id} was not spawned with onData or ` +
                          `streams: true, so its ${stream} is read with read()`)
      e.code = 'EINVAL'
      throw e
    }
    // Ended: an empty stream (its bytes went to onData or are read()'s).
    return Readable.from([])
  }

  // N-6: the task's stdin (stdin 'pipe' or tty) as a Writable with 'drain';
  // end() is closeStdin().
  stdin(id, caller) {
    const h = handleOf(caller)
    native.write(this.#r, id, h, '') // checks the task: EINVAL without stdin
    return stdinWritable((bytes) => native.write(this.#r, id, h, bytes),
                         () => native.closeStdin(this.#r, id, h))
  }

  // P-RES-1: what is new on stdout and stderr apart (Buffers), the bytes
  // each dropped since the previous read, and once the task ended its exit
  // code or the signal that ended it (both null when there is none: the
  // spawn failed or a kill came first).  Shares read()'s cursor.
  readProcess(id, caller) {
    const r = this.#looked(id, () => native.readProcess(this.#r, id, handleOf(caller)))
    this.#wasRead(r.snapshot)
    return {
      stdout: r.stdout,
      stderr: r.stderr,
      stdoutDropped: r.stdoutDropped,
      stderrDropped: r.stderrDropped,
      exited: r.exited,
      exitCode: r.exitCode,
      signal: r.termSignal === null ? null : signalName(r.termSignal),
      snapshot: this.#status(r.snapshot, handleOf(caller)),
    }
  }

  // P-IN-1: input for a task started with stdin 'pipe' or tty.
  write(id, data, caller) {
    native.write(this.#r, id, handleOf(caller), data)
  }

  // P-IN-1: end of file once what was written has gone (on a terminal the
  // end-of-file character, Ctrl-D).
  closeStdin(id, caller) {
    native.closeStdin(this.#r, id, handleOf(caller))
  }

  // P-PTY-1: the terminal's new size; the job gets SIGWINCH.
  resize(id, cols, rows, caller) {
    native.resize(this.#r, id, handleOf(caller), cols, rows)
  }

  // The leader's pid (= its session and group id), or undefined while the
  // spawn is still out on a spawner thread (P-SPAWN-6); ESRCH if the task
  // never had a process.
  pid(id, caller) {
    return native.pid(this.#r, id, handleOf(caller))
  }

  // R-METRICS-1, plus N-11's: forgotten (ended tasks the bounds
  // forgot), forgottenUnread (of which held output nobody had read) and
  // unreadBytesDropped (that output's bytes).
  metrics() {
    return { ...native.metrics(this.#r), ...this.#retention.counts }
  }

  // D-3: take back every durable task of `stateDir` recorded for `owner`
  // (an agent of the same id and session; none: the unowned ones) under
  // its id; the first call opens the directory for this registry (one
  // registry per directory: EBUSY).  Returns the ids taken back.
  adopt(stateDir, owner) {
    if (typeof stateDir !== 'string' || stateDir === '') {
      throw codedTypeError('stateDir must be a non-empty string')
    }
    const h = handleOf(owner, 'owner')
    const before = new Set(this.list(owner).map((s) => s.id))
    native.adopt(this.#r, stateDir, h)
    return this.list(owner).map((s) => s.id).filter((id) => !before.has(id))
  }

  // R-CLOSE-1: resolves once every task was stopped and every handle closed.
  // D-1: durable tasks are left running (detached) unless
  // { stopDurable: true }.
  close(options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw codedTypeError('options must be an object')
    }
    if (options !== undefined && options.stopDurable !== undefined &&
        typeof options.stopDurable !== 'boolean') {
      throw codedTypeError('options.stopDurable must be a boolean')
    }
    if (options !== undefined && options.stopDurable === true) {
      try {
        native.stopDurable(this.#r, true)
      } catch {} // closed already: the close below says so
    }
    return new Promise((resolve) => {
      this.#letGo()
      native.close(this.#r, () => {
        registryClosed()
        resolve()
      })
    })
  }
}

// What this package has of contract §3b, for code that must also run against
// a build of uvtasks from before it (0.1 had none of these): every part,
// always, since the library and the binding ship together.
const features = Object.freeze({
  stdinPipe: true, tty: true, outputBackpressure: true, onOutput: true, readProcess: true,
})

// The version of the library compiled into the addon, which is also the
// package's ("0.3.0").
const version = native.version

module.exports = { TaskRegistry, features, version }
