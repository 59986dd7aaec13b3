// A coding agent's shell service written twice (issue 21): on uvtasks, and
// on child_process + @lydell/node-pty the way such hosts do it (a pty per
// command, onData into the UI, a kill of the process group: SIGTERM, 200
// ms, SIGKILL).  Rounds interleave the two so both see the same machine.
//
//   cd bench/node && npm install && node shell-service.mjs [--quick] [--rounds N]
//
// Rows: spawn rate and event-loop delay p99 during a storm of `true`
// commands at host RSS of 50 MiB and 1 GiB; 200 MB through a UI callback;
// abort-to-quiet of a tree with a SIGTERM-deaf grandchild; host RSS per
// idle task with 200 of them.  Prints medians, with the goals.
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import fs from 'node:fs'

const require = createRequire(import.meta.url)
const { TaskRegistry } = require('../../bindings/node')
const pty = require('@lydell/node-pty')

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const ri = args.indexOf('--rounds')
const ROUNDS = ri >= 0 ? Number(args[ri + 1]) : quick ? 2 : 3
const STORM = quick ? 100 : 200
const CONCURRENCY = 16
const STREAM_MB = quick ? 50 : 200
const IDLE = 200
const GRACE_MS = 200

// Every command carries UVTASKS_BENCH=<mark> in its environment, so that
// what is left of one can be counted.
let runs = 0
const newMark = () => `${process.pid}-${++runs}`

// ---- the two services ------------------------------------------------------
// run(command, { onData, signal }) -> Promise<{ exitCode }>

function uvtasksService() {
  const tasks = new TaskRegistry({ keepFinished: 50 })
  tasks.attachSurface('bench')
  return {
    name: 'uvtasks',
    async run(command, { onData, signal, mark = newMark() } = {}) {
      const id = tasks.spawn({ command, env: { UVTASKS_BENCH: mark },
                               onData, signal, graceMs: GRACE_MS })
      const snap = await tasks.wait(id)
      tasks.forget(id)
      return { exitCode: snap.exitCode }
    },
    close: () => tasks.close(),
  }
}

function ptyService() {
  return {
    name: 'child_process+node-pty',
    run(command, { onData, signal, mark = newMark() } = {}) {
      return new Promise((resolve) => {
        const p = pty.spawn('bash', ['-c', command],
                            { cols: 120, rows: 30, env: { ...process.env, UVTASKS_BENCH: mark } })
        if (onData) p.onData((s) => onData(Buffer.from(s), 'stdout'))
        let killTimer = null
        const abort = () => {
          try { process.kill(-p.pid, 'SIGTERM') } catch {}
          killTimer = setTimeout(() => {
            try { process.kill(-p.pid, 'SIGKILL') } catch {}
          }, GRACE_MS)
        }
        if (signal) signal.addEventListener('abort', abort, { once: true })
        p.onExit(({ exitCode }) => {
          if (signal) signal.removeEventListener('abort', abort)
          if (killTimer) clearTimeout(killTimer)
          resolve({ exitCode })
        })
      })
    },
    close: async () => {},
  }
}

// ---- measurements --------------------------------------------------------------

function median(a) {
  const s = [...a].sort((x, y) => x - y)
  return s[Math.floor(s.length / 2)]
}

async function storm(svc) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  let next = 0
  const t0 = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < STORM) await svc.run('true')
  }))
  const secs = (performance.now() - t0) / 1000
  h.disable()
  return { rate: STORM / secs, p99: h.percentile(99) / 1e6 }
}

// 200 MB of text through a UI callback that decodes and keeps a bounded
// scrollback, as a terminal view does.
async function stream(svc) {
  const dec = new TextDecoder()
  let scroll = ''
  let bytes = 0
  const t0 = performance.now()
  await svc.run(`yes ${'x'.repeat(99)} | head -c ${STREAM_MB * 1000 * 1000}`, {
    onData(chunk) {
      bytes += chunk.length
      scroll = (scroll + dec.decode(chunk, { stream: true })).slice(-64 * 1024)
    },
  })
  const secs = (performance.now() - t0) / 1000
  return { mbs: bytes / 1e6 / secs, bytes }
}

function marked(mark) {
  const entry = `UVTASKS_BENCH=${mark}`
  let n = 0
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'latin1')
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue
      if (fs.readFileSync(`/proc/${d}/environ`, 'latin1').split('\0').includes(entry)) n++
    } catch {}
  }
  return n
}

// A tree with a job, a grandchild that ignores SIGTERM and a sleeper:
// abort once all run, then time until none of them is left.
async function abortToQuiet(svc) {
  const ac = new AbortController()
  const mark = newMark()
  const done = svc.run("sleep 100 & (trap '' TERM; sleep 100) & sleep 100 & wait",
                       { signal: ac.signal, mark })
  while (marked(mark) < 4) await new Promise((r) => setTimeout(r, 5))
  const t0 = performance.now()
  ac.abort()
  while (marked(mark) > 0) await new Promise((r) => setTimeout(r, 1))
  const ms = performance.now() - t0
  await done
  return { ms }
}

async function idleRss(svc) {
  global.gc?.()
  const before = process.memoryUsage().rss
  const acs = []
  const all = []
  const mark = newMark()
  for (let i = 0; i < IDLE; i++) {
    const ac = new AbortController()
    acs.push(ac)
    all.push(svc.run('sleep 1000', { signal: ac.signal, mark }))
  }
  while (marked(mark) < IDLE) await new Promise((r) => setTimeout(r, 20))
  global.gc?.()
  const kib = (process.memoryUsage().rss - before) / 1024 / IDLE
  for (const ac of acs) ac.abort()
  await Promise.all(all)
  while (marked(mark) > 0) await new Promise((r) => setTimeout(r, 20))
  return { kib }
}

// ---- rounds ----------------------------------------------------------------------

const services = [uvtasksService(), ptyService()]
const results = {}
const put = (svc, row, v) => {
  ((results[row] ??= {})[svc] ??= []).push(v)
}

let ballast = null
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? services : [...services].reverse()
  for (const rss of ['50 MiB', '1 GiB']) {
    ballast = rss === '1 GiB' ? Buffer.alloc(1024 * 1024 * 1024, 1) : null
    for (const svc of order) {
      const r = await storm(svc)
      put(svc.name, `spawn rate /s, RSS ${rss}`, r.rate)
      put(svc.name, `loop delay p99 ms, RSS ${rss}`, r.p99)
    }
    ballast = null
    global.gc?.()
  }
  for (const svc of order) put(svc.name, `stream MB/s (${STREAM_MB} MB, UI callback)`, (await stream(svc)).mbs)
  for (const svc of order) put(svc.name, 'abort-to-quiet ms', (await abortToQuiet(svc)).ms)
  for (const svc of order) put(svc.name, `RSS KiB per idle task (${IDLE})`, (await idleRss(svc)).kib)
  console.error(`round ${round + 1}/${ROUNDS} done`)
}
void ballast

const [u, b] = services.map((s) => s.name)
console.log(`| row (median of ${ROUNDS}) | ${u} | ${b} | ratio |`)
console.log('|---|---|---|---|')
for (const [row, by] of Object.entries(results)) {
  const x = median(by[u])
  const y = median(by[b])
  console.log(`| ${row} | ${x.toFixed(1)} | ${y.toFixed(1)} | ${(x / y).toFixed(2)}x |`)
}
for (const s of services) await s.close()
