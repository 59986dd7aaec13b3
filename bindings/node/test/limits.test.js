// Limits per task through the binding (L-LIM-1..3: spawn({ limits })): a
// memory limit ends a task with "out of memory (limit 100 MiB)", forks
// past maxProcesses get EAGAIN and the detail says the limit was reached,
// bad limits are errors before anything runs.  Skipped where this machine
// cannot make the cgroups (not root, no writable hierarchy).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { fixture } = require('./helpers')

const codeOf = (code) => (e) => e instanceof Error && e.code === code

// Can a cgroup with a memory limit be made here?  A short task tells.
async function limitsHere(tasks) {
  try {
    const id = tasks.spawn({ command: 'true', limits: { memoryBytes: 64 << 20 } })
    await tasks.wait(id, 20000)
    return true
  } catch (e) {
    if (e.code === 'ENOTSUP') return false
    throw e
  }
}

test('limits: 300 MB under a 100 MiB limit is killed, out of memory (L-LIM-1, L-LIM-2)', async (t) => {
  const { tasks } = fixture()
  if (!(await limitsHere(tasks))) return t.skip('no cgroup can enforce a memory limit here')
  const id = tasks.spawn({
    command: 'dd if=/dev/zero of=/dev/null bs=300M count=1',
    limits: { memoryBytes: 100 * 1024 * 1024 },
  })
  const snap = await tasks.wait(id, 60000)
  assert.equal(snap.status, 'killed')
  assert.equal(snap.detail, 'out of memory (limit 100 MiB)')
  // The same command without a limit completes (the test can fail).
  const free = tasks.spawn({ command: 'dd if=/dev/zero of=/dev/null bs=300M count=1' })
  assert.equal((await tasks.wait(free, 60000)).detail, 'exit code: 0')
})

test('limits: forks past maxProcesses fail and the detail says so (L-LIM-2)', async (t) => {
  const { tasks } = fixture()
  if (!(await limitsHere(tasks))) return t.skip('no cgroup can enforce limits here')
  const id = tasks.spawn({
    // bash says "fork: retry" and tries again once a sleep has ended.
    command: 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.3 & done; wait; echo done',
    limits: { maxProcesses: 6 },
  })
  const snap = await tasks.wait(id, 60000)
  assert.match(snap.detail, /process limit reached \(6\)/)
  const text = tasks.read(id).text
  assert.match(text, /fork: retry: Resource temporarily unavailable/)
  assert.match(text, /done/)
})

test('limits: bad limits are errors before anything runs (L-LIM-1)', async () => {
  const { tasks } = fixture()
  const marker = `/tmp/uvt-node-limits-${process.pid}`
  assert.throws(() => tasks.spawn({ command: `touch ${marker}`, limits: 'lots' }),
                (e) => e instanceof TypeError)
  assert.throws(() => tasks.spawn({ command: `touch ${marker}`, limits: { memoryBytes: 4096 } }),
                codeOf('EINVAL'))
  assert.throws(() => tasks.spawn({ command: `touch ${marker}`, limits: { cpuPercent: -1 } }),
                (e) => e instanceof TypeError || e instanceof RangeError)
  assert.ok(!fs.existsSync(marker))
})
