// N-10: { guardian: true }: when the host is killed with SIGKILL or
// crashes, every task process is gone within 1 s (M-MCP-7 for Node hosts).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const readline = require('node:readline')
const { markedProcesses, eventually } = require('./helpers.js')

const MARK = 'UVTASKS_TEST_MARK'

// Starts the host with a mark of its own; resolves once its tasks run.
async function host(mode, name) {
  const mark = `${process.env[MARK]}/${name}`
  const child = spawn(process.execPath,
    [path.join(__dirname, 'fixtures', 'guard-host.js'), mode],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, [MARK]: mark } })
  const [line] = await once(readline.createInterface({ input: child.stdout }), 'line')
  return { child, mark, pids: JSON.parse(line).pids }
}

async function killedHost(mode, name, signal) {
  const h = await host(mode, name)
  // Every task and what it started: 4 leaders, 2 jobs/grandchildren, 1
  // escaped with setsid, plus subshells.
  assert.ok(markedProcesses(h.mark).length >= 7, String(markedProcesses(h.mark)))
  h.child.kill(signal)
  await once(h.child, 'exit')
  return { ...h, dead: Date.now() }
}

for (const signal of ['SIGKILL', 'SIGSEGV', 'SIGABRT']) {
  test(`N-10: a host ended by ${signal} leaves nothing running within 1 s`, async () => {
    const h = await killedHost('on', `guard-${signal}`, signal)
    const gone = await eventually(() => markedProcesses(h.mark).length === 0, 3000)
    const took = Date.now() - h.dead
    assert.ok(gone, `still running: ${markedProcesses(h.mark)}`)
    assert.ok(took <= 1000, `the last one went after ${took} ms`)
  })
}

// The fault the guardian fixes: without it, a SIGKILLed host leaves its
// tasks running.
test('N-10: without the guardian, a SIGKILLed host leaves its tasks running', async () => {
  const h = await killedHost('off', 'unguarded', 'SIGKILL')
  try {
    assert.ok(markedProcesses(h.mark).length >= 7)
  } finally {
    for (const pid of markedProcesses(h.mark)) {
      try { process.kill(pid, 'SIGKILL') } catch {}
    }
  }
})

test('N-10: the guardian keeps no host alive and ends with it', async () => {
  const fs = require('node:fs')
  const child = spawn(process.execPath, ['-e', `
    const { TaskRegistry } = require(${JSON.stringify(path.resolve(__dirname, '..'))})
    const tasks = new TaskRegistry({ guardian: true })
    tasks.attachSurface('h')
    const id = tasks.spawn({ command: 'echo hi' })
    tasks.wait(id).then(() => tasks.close())`], { stdio: 'inherit' })
  const [code] = await once(child, 'exit') // ends by itself (N-3)
  assert.equal(code, 0)
  const guardians = () => fs.readdirSync('/proc').filter((d) => {
    try {
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'latin1')
      return cmd.includes('guardian.js') && cmd.includes(`\0${child.pid}-`)
    } catch {
      return false
    }
  })
  assert.ok(await eventually(() => guardians().length === 0), 'the guardian exited')
  assert.throws(() => new (require('..').TaskRegistry)({ guardian: 'yes' }),
                (e) => e.code === 'ERR_INVALID_ARG_TYPE')
})
