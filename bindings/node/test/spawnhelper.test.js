// P-SPAWN-7 through the package: `spawnHelper: true` sends spawns through
// the library's helper processes.  What a host can see of that: a child
// of its own that is no task and holds four descriptors, while the tasks
// are still its children with descriptors 0-2 only.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { TaskRegistry } = require('..')
const { fixture } = require('./helpers')

// The live children of this process, found by their parent in /proc
// (a helper is made by a spawner thread; its parent is this process).
function children() {
  const out = []
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue
    try {
      const st = fs.readFileSync(`/proc/${p}/status`, 'utf8')
      if (/^PPid:\s+(\d+)$/m.exec(st)[1] === String(process.pid) && !/^State:\s+Z/m.test(st)) {
        out.push(Number(p))
      }
    } catch {}
  }
  return out
}

function fdCount(pid) {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return -1
  }
}

const helpers = () => children().filter((p) => fdCount(p) === 4)

test('spawnHelper must be a boolean (P-SPAWN-7)', () => {
  assert.throws(() => new TaskRegistry({ spawnHelper: 1 }),
    { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: /options\.spawnHelper must be a boolean/ })
})

test('spawnHelper: tasks spawn through a helper process; close ends it (P-SPAWN-7)', async () => {
  assert.deepEqual(helpers(), [])
  const { tasks } = fixture({ teardownGraceMs: 2000, spawnHelper: true })
  const ids = []
  for (let i = 0; i < 8; i++) {
    ids.push(tasks.spawn({
      command: 'echo "$PPID"; ls /proc/self/fd | sort -n | tr "\\n" " "',
    }))
  }
  for (const id of ids) {
    await tasks.wait(id, 10000)
    const out = tasks.readProcess(id).stdout.toString().split('\n')
    // bash's $PPID: the leader is this process's own child.
    assert.equal(Number(out[0]), process.pid)
    // ls's own directory descriptor is the one past 0-2.
    assert.equal(out[1], '0 1 2 3 ')
  }
  const h = helpers()
  assert.ok(h.length >= 1, `no helper among the children ${children()}`)
  await tasks.close()
  for (const p of h) assert.equal(fs.existsSync(`/proc/${p}`), false, `helper ${p} left`)
})

test('without spawnHelper no helper process is made (P-SPAWN-7)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ command: 'true' })
  await tasks.wait(id, 10000)
  assert.deepEqual(helpers(), [])
  await tasks.close()
})
