// N-11's measurements (issue #35): the host's RSS while tasks end that
// nobody reads (1,000 of 100 kB; 60 of 1 MB), each host shape learning of
// the ends only from onTaskDone; and the CPU one end costs in the
// package's own listener at 50 and at 5,000 records (keepFinished set so
// high that the registry holds that many, then each end drops one).
//
//   node bench/node/bounds.mjs
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { TaskRegistry } = require('../../bindings/node')
const mib = () => process.memoryUsage().rss / (1024 * 1024)

async function listenOnly(tasks, n, command, batch = 20) {
  for (let i = 0; i < n; i += batch) {
    const k = Math.min(batch, n - i)
    await new Promise((resolve) => {
      let seen = 0
      const off = tasks.onTaskDone(() => { if (++seen === k) { off(); setImmediate(resolve) } })
      for (let j = 0; j < k; j++) tasks.spawn({ command })
    })
  }
}

async function rssRow(n, bytes) {
  const tasks = new TaskRegistry()
  tasks.attachSurface('bench')
  const before = mib()
  const samples = []
  for (let done = 0; done < n; done += n / 4) {
    await listenOnly(tasks, n / 4, `head -c ${bytes} /dev/zero`)
    samples.push(mib().toFixed(0))
  }
  console.log(`${n} tasks of ${bytes} B never read: RSS ${before.toFixed(0)} -> ` +
    `${samples.join(' -> ')} MiB (each quarter), records ${tasks.metrics().records}`)
  await tasks.close()
}

// CPU per end: the process's CPU time over `n` ends, minus nothing (the
// spawns' cost is the same at both sizes), per end.
async function cpuRow(records) {
  const tasks = new TaskRegistry({ keepFinished: records, maxUnreadBytes: Infinity })
  tasks.attachSurface('bench')
  await listenOnly(tasks, records, 'true', 50) // fill
  const n = 1000
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await listenOnly(tasks, n, 'true', 50)
  const c = process.cpuUsage(c0)
  const wall = Number(process.hrtime.bigint() - t0) / 1e6
  console.log(`at ${records} records: ${((c.user + c.system) / 1000 / n).toFixed(3)} ms CPU per ` +
    `task (spawn + end + drop), ${(wall / n).toFixed(2)} ms wall; records ${tasks.metrics().records}`)
  await tasks.close()
}

console.log(`bench-bounds: Node ${process.versions.node}`)
await rssRow(1000, 100000)
await rssRow(60, 1000000)
await cpuRow(50)
await cpuRow(5000)
