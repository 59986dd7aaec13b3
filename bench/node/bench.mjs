// The Node binding against Node's own child_process, side by side in one
// Node process (issue #14): spawn rate (argv and shell) with the event
// loop's delay p99 during the storm, and output throughput.  Then the
// same argv storm in a host grown to 1 GiB of RSS (P-SPAWN-7: a fork
// copies the host's page tables; the registry's spawns should not care),
// with the registry's spawn helper off and on (`spawnHelper: true`).
//
//   node bench/node/bench.mjs [--quick] [--rounds N] [--host-mib N] [--ui-only]
//
// The UI rows (N-12): a host whose onData callback decodes what comes
// (UTF-8, split into lines, the last 500 kept, as a terminal view does)
// against the same callback on child_process's 'data' events: MiB/s and
// the loop's delay p99 while it runs.  --ui-only runs only those rows.
// child_process runs its child twice: in the host's session (its
// default) and with `detached: true`, in a session of its own as every
// uvtasks task is (the registry kills sessions).  Where the kernel groups
// the processes of a session for scheduling (autogroup: on when
// /proc/sys/kernel/sched_autogroup_enabled is 1 and the host is in the
// root cpu cgroup) and other work is running, a session of its own
// changes how the producer and the host share the CPUs: see
// docs/performance.md ("Output into a UI callback").
//
// Needs bindings/node built (npm install in bindings/node).  Rounds
// alternate the implementations so both see the same machine noise; the
// table gives medians and the goals: uvtasks spawn rate >= 2x
// child_process, loop delay p99 <= 0.5x, output >= 1.0x; in the big
// host, spawn rate >= 2x child_process and >= 0.9x the small host's, and
// the spawn helper >= 0.95x without it.
import { spawn } from 'node:child_process'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import os from 'node:os'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { TaskRegistry } = require('../../bindings/node')

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const ri = args.indexOf('--rounds')
const ROUNDS = ri >= 0 ? Number(args[ri + 1]) : quick ? 3 : 5
const COUNT = quick ? 300 : 1000
const CONCURRENCY = 16
const MIB = quick ? 64 : 256
const hi = args.indexOf('--host-mib')
const HOST_MIB = hi >= 0 ? Number(args[hi + 1]) : quick ? 256 : 1024
if (!Number.isInteger(HOST_MIB) || HOST_MIB < 1 || HOST_MIB > 4095) {
  console.error('bench-node: --host-mib takes a whole number of MiB, 1 to 4095')
  process.exit(2)
}
const HOST = `${HOST_MIB >= 1024 && HOST_MIB % 1024 === 0 ? `${HOST_MIB / 1024}GiB` : `${HOST_MIB}MiB`} host`
const HOST_COUNT = quick ? 100 : 300
const UI_ONLY = args.includes('--ui-only')

const tasks = new TaskRegistry()
tasks.attachSurface('bench')
const helped = new TaskRegistry({ spawnHelper: true })
helped.attachSurface('bench')

// Run `count` jobs, `CONCURRENCY` at a time; start(i) returns a promise.
async function storm(count, start) {
  let next = 0
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const t0 = process.hrtime.bigint()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < count) {
      next++
      await start()
    }
  }))
  const secs = Number(process.hrtime.bigint() - t0) / 1e9
  h.disable()
  return { rate: count / secs, p99: h.percentile(99) / 1e6 }
}

const argvStorm = (reg, count) => storm(count, async () => {
  const id = reg.spawn({ argv: ['true'] })
  await reg.wait(id, 60000)
  reg.forget(id) // inside the wait callback: R-FORGET-2
})
const cpStorm = (count) => storm(count, () => new Promise((resolve, reject) => {
  const c = spawn('true', [], { stdio: 'ignore' })
  c.on('error', reject)
  c.on('exit', resolve)
}))
const impls = {
  'uvtasks argv': () => argvStorm(tasks, COUNT),
  'uvtasks+helper argv': () => argvStorm(helped, COUNT),
  'child_process argv': () => cpStorm(COUNT),
  'uvtasks shell': () => storm(COUNT, async () => {
    const id = tasks.spawn({ command: 'true' })
    await tasks.wait(id, 60000)
    tasks.forget(id) // inside the wait callback: R-FORGET-2
  }),
  'child_process shell': () => storm(COUNT, () => new Promise((resolve, reject) => {
    const c = spawn('true', [], { stdio: 'ignore', shell: true })
    c.on('error', reject)
    c.on('exit', resolve)
  })),
}

const CMD = ['head', '-c', String(MIB * 1024 * 1024), '/dev/zero']
const output = {
  'uvtasks output': async () => {
    const t0 = process.hrtime.bigint()
    const id = tasks.spawn({ argv: CMD, outputCapBytes: 64 * 1024 * 1024 })
    let bytes = 0
    for (;;) {
      const r = tasks.read(id)
      bytes += r.text.length
      if (r.snapshot.status !== 'running') break
      await new Promise((res) => setImmediate(res))
    }
    await tasks.wait(id, 60000)
    bytes += tasks.read(id).text.length
    const secs = Number(process.hrtime.bigint() - t0) / 1e9
    if (bytes !== MIB * 1024 * 1024) throw new Error(`read ${bytes} bytes`)
    tasks.forget(id) // inside the wait callback: R-FORGET-2
    return { mibs: MIB / secs }
  },
  'child_process output': () => new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint()
    const c = spawn(CMD[0], CMD.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] })
    let bytes = 0
    c.stdout.on('data', (d) => { bytes += d.length })
    c.on('error', reject)
    c.on('close', () => {
      const secs = Number(process.hrtime.bigint() - t0) / 1e9
      if (bytes !== MIB * 1024 * 1024) reject(new Error(`read ${bytes} bytes`))
      resolve({ mibs: MIB / secs })
    })
  }),
}

// N-12: the decoding UI callback, the same for both.
const UI_MIB = quick ? 64 : 256
const LINE = 'the quick brown fox jumps over the lazy dog 0123456789 ' +
             '\u00e9\u00e8\u00ea\u00eb \u2713 tests passed'
const UI_CMD = ['sh', '-c', `yes '${LINE}' | head -c ${UI_MIB * 1024 * 1024}`]
function uiView() {
  const decoder = new TextDecoder('utf-8')
  const view = { lines: [], partial: '', bytes: 0 }
  view.onChunk = (chunk) => {
    view.bytes += chunk.length
    const parts = (view.partial + decoder.decode(chunk, { stream: true })).split('\n')
    view.partial = parts.pop()
    for (const l of parts) view.lines.push(l)
    if (view.lines.length > 1000) view.lines = view.lines.slice(-500)
  }
  return view
}
async function uiRun(start) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const view = uiView()
  const t0 = process.hrtime.bigint()
  await start(view.onChunk)
  const secs = Number(process.hrtime.bigint() - t0) / 1e9
  h.disable()
  if (view.bytes !== UI_MIB * 1024 * 1024) throw new Error(`ui: ${view.bytes} bytes`)
  return { mibs: UI_MIB / secs, p99: h.percentile(99) / 1e6 }
}
const ui = {
  'uvtasks ui': () => uiRun(async (onData) => {
    const id = tasks.spawn({ argv: UI_CMD, onData })
    await tasks.wait(id)
    tasks.forget(id)
  }),
  'child_process ui': () => cpUi(false),
  'child_process detached ui': () => cpUi(true),
}
function cpUi(detached) {
  return uiRun((onData) => new Promise((resolve, reject) => {
    const c = spawn(UI_CMD[0], UI_CMD.slice(1), { stdio: ['ignore', 'pipe', 'ignore'], detached })
    c.stdout.on('data', onData)
    c.on('error', reject)
    c.on('close', resolve)
  }))
}

const samples = {}
const add = (k, v) => { (samples[k] ||= []).push(v) }
for (let r = 0; r < ROUNDS; r++) {
  // Each round starts with the next one, so none always runs first.
  const order = Object.entries(ui)
  for (const [name, fn] of [...order.slice(r % order.length), ...order.slice(0, r % order.length)]) {
    const { mibs, p99 } = await fn()
    add(`${name} mibs`, mibs)
    add(`${name} p99`, p99)
  }
}
if (UI_ONLY) {
  await tasks.close()
  await helped.close()
  const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
  const row = (k, unit, cp = 'child_process') => {
    const [u, c] = [med(samples[`uvtasks ui ${k}`]), med(samples[`${cp} ui ${k}`])]
    const r = (a) => `${Math.min(...a).toFixed(1)}-${Math.max(...a).toFixed(1)}`
    console.log(`ui callback  uvtasks ${u.toFixed(1).padStart(7)} ${r(samples[`uvtasks ui ${k}`]).padStart(12)}  ` +
      `${cp} ${c.toFixed(1).padStart(7)} ${r(samples[`${cp} ui ${k}`]).padStart(12)}  ${unit}  ${(u / c).toFixed(2)}x`)
  }
  console.log(`bench-node --ui-only: Node ${process.versions.node}, ${ROUNDS} rounds of ${UI_MIB} MiB, ` +
    `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
  row('mibs', 'MiB/s')
  row('p99', 'ms loop delay p99')
  row('mibs', 'MiB/s', 'child_process detached')
  row('p99', 'ms loop delay p99', 'child_process detached')
  process.exit(0)
}
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, fn] of Object.entries(impls)) {
    const { rate, p99 } = await fn()
    add(`${name} rate`, rate)
    add(`${name} p99`, p99)
  }
  for (const [name, fn] of Object.entries(output)) add(name, (await fn()).mibs)
}

// The host grows: HOST_MIB of memory written (so every page is mapped),
// kept until the end.
const host = Buffer.allocUnsafe(HOST_MIB * 1024 * 1024)
host.fill(1)
const hostRss = process.memoryUsage().rss / (1024 * 1024)
const hostImpls = {
  'uvtasks argv host': () => argvStorm(tasks, HOST_COUNT),
  'uvtasks+helper argv host': () => argvStorm(helped, HOST_COUNT),
  'child_process argv host': () => cpStorm(HOST_COUNT),
}
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, fn] of Object.entries(hostImpls)) {
    const { rate, p99 } = await fn()
    add(`${name} rate`, rate)
    add(`${name} p99`, p99)
  }
}
host[0] = 0 // kept alive to here
await tasks.close()
await helped.close()

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
const m = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]))
const fmt = (v) => (v >= 100 ? v.toFixed(0) : v.toFixed(2))
const ratio = (r) => (r >= 0.1 ? r.toFixed(2) : r.toPrecision(2))
const range = (k) => `${fmt(Math.min(...samples[k]))}-${fmt(Math.max(...samples[k]))}`

console.log(`bench-node: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ` +
  `Node ${process.versions.node} (libuv ${process.versions.uv}), ${ROUNDS} rounds of ` +
  `${COUNT} tasks (${CONCURRENCY} at a time) and ${MIB} MiB; machine: ${os.cpus().length} cores, ` +
  `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}; ` +
  `host rows: ${HOST_COUNT} tasks per round at ${hostRss.toFixed(0)} MiB RSS`)
const rows = [
  ['spawn argv', 'uvtasks argv rate', 'child_process argv rate', 'tasks/s'],
  ['spawn argv', 'uvtasks argv p99', 'child_process argv p99', 'ms loop delay p99'],
  ['spawn argv', 'uvtasks+helper argv rate', 'child_process argv rate', 'tasks/s', 'uvtasks+helper'],
  ['spawn argv', 'uvtasks+helper argv p99', 'child_process argv p99', 'ms loop delay p99', 'uvtasks+helper'],
  [HOST, 'uvtasks argv host rate', 'child_process argv host rate', 'tasks/s'],
  [HOST, 'uvtasks argv host p99', 'child_process argv host p99', 'ms loop delay p99'],
  [HOST, 'uvtasks+helper argv host rate', 'child_process argv host rate', 'tasks/s', 'uvtasks+helper'],
  [HOST, 'uvtasks+helper argv host p99', 'child_process argv host p99', 'ms loop delay p99', 'uvtasks+helper'],
  ['spawn shell', 'uvtasks shell rate', 'child_process shell rate', 'tasks/s'],
  ['spawn shell', 'uvtasks shell p99', 'child_process shell p99', 'ms loop delay p99'],
  ['output', 'uvtasks output', 'child_process output', 'MiB/s'],
  ['ui callback', 'uvtasks ui mibs', 'child_process ui mibs', 'MiB/s'],
  ['ui callback', 'uvtasks ui p99', 'child_process ui p99', 'ms loop delay p99'],
  ['ui callback', 'uvtasks ui mibs', 'child_process detached ui mibs', 'MiB/s', 'uvtasks', 'child_process detached'],
  ['ui callback', 'uvtasks ui p99', 'child_process detached ui p99', 'ms loop delay p99', 'uvtasks', 'child_process detached'],
]
console.log('workload      impl             median        min-max  unit                ratio')
for (const [w, u, c, unit, who = 'uvtasks', cp = 'child_process'] of rows) {
  console.log(`${w.padEnd(13)} ${who.padEnd(14)}${fmt(m[u]).padStart(7)} ${range(u).padStart(14)}  ${unit.padEnd(18)}  ${ratio(m[u] / m[c])}x ${cp}`)
  // child_process once, after the plain row (the helper row follows it).
  if (who === 'uvtasks') console.log(`${w.padEnd(13)} ${cp.padEnd(13)}${fmt(m[c]).padStart(9)} ${range(c).padStart(14)}  ${unit}`)
}
const goals = [
  ['spawn argv rate >= 2x child_process', m['uvtasks argv rate'] / m['child_process argv rate'] >= 2],
  ['spawn shell rate >= 2x child_process', m['uvtasks shell rate'] / m['child_process shell rate'] >= 2],
  ['argv storm loop delay p99 <= 0.5x child_process', m['uvtasks argv p99'] / m['child_process argv p99'] <= 0.5],
  ['shell storm loop delay p99 <= 0.5x child_process', m['uvtasks shell p99'] / m['child_process shell p99'] <= 0.5],
  ['output >= 1.0x child_process', m['uvtasks output'] / m['child_process output'] >= 1],
  // N-12: a decoding UI callback: as fast, and the loop as responsive.
  ['ui callback MiB/s >= 1.0x child_process', m['uvtasks ui mibs'] / m['child_process ui mibs'] >= 1],
  ['ui callback loop delay p99 <= 1.0x child_process', m['uvtasks ui p99'] / m['child_process ui p99'] <= 1],
  // The same against a child in a session of its own, as a task is.
  ['ui callback MiB/s >= 1.0x child_process detached',
    m['uvtasks ui mibs'] / m['child_process detached ui mibs'] >= 1],
  ['ui callback loop delay p99 <= 1.0x child_process detached',
    m['uvtasks ui p99'] / m['child_process detached ui p99'] <= 1],
  // P-SPAWN-7: a big host does not slow the registry's spawns, and the
  // helper leaves that unchanged or better.
  [`${HOST_MIB} MiB host: spawn argv rate >= 2x child_process`,
    m['uvtasks argv host rate'] / m['child_process argv host rate'] >= 2],
  [`${HOST_MIB} MiB host: spawn argv rate >= 0.9x the small host's`,
    m['uvtasks argv host rate'] / m['uvtasks argv rate'] >= 0.9],
  [`${HOST_MIB} MiB host: spawn helper on >= 0.95x off`,
    m['uvtasks+helper argv host rate'] / m['uvtasks argv host rate'] >= 0.95],
]
let met = 0
for (const [g, ok] of goals) {
  console.log(`  ${ok ? 'met ' : 'MISS'}  ${g}`)
  if (ok) met++
}
console.log(`bench-node: ${met} goals met, ${goals.length - met} missed`)
