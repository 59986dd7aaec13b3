// Sandboxed tasks through the binding (S-4: spawn({ sandbox })): the file
// system and network policy of S-1 hold for tasks.spawn() as in C, and a
// sandbox that cannot be made throws ENOTSUP (S-3).  Skipped without bwrap.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { fixture } = require('./helpers')

const haveBwrap = process.env.PATH.split(':').some((d) => {
  try { fs.accessSync(path.join(d, 'bwrap'), fs.constants.X_OK); return true } catch { return false }
})
const opts = { skip: haveBwrap ? false : 'no bwrap' }
const codeOf = (code) => (e) => e instanceof Error && e.code === code

// S-1, S-4: workspace writes land, writes outside are refused.
test('sandbox: the workspace is writable, the rest read-only (S-1, S-4)', opts, async () => {
  const { tasks } = fixture()
  const work = fs.mkdtempSync('/tmp/uvt-node-sbx-')
  const outside = fs.mkdtempSync('/var/tmp/uvt-node-sbx-out-')
  try {
    const id = tasks.spawn({
      command: `echo in > in.txt && echo wrote; echo x > ${outside}/escaped.txt || echo refused`,
      cwd: work,
      sandbox: { fs: 'workspace' },
    })
    const snap = await tasks.wait(id, 20000)
    assert.equal(snap.detail, 'exit code: 0')
    const text = tasks.read(id).text
    assert.match(text, /wrote/)
    assert.match(text, /refused/)
    assert.match(text, /Read-only file system/)
    assert.ok(fs.existsSync(path.join(work, 'in.txt')))
    assert.ok(!fs.existsSync(path.join(outside, 'escaped.txt')))
    // fs 'read-only' (the default) refuses the cwd too.
    const ro = tasks.spawn({ command: 'echo x > ro.txt', cwd: work, sandbox: {} })
    assert.equal((await tasks.wait(ro, 20000)).detail, 'exit code: 1')
    assert.ok(!fs.existsSync(path.join(work, 'ro.txt')))
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
    fs.rmSync(outside, { recursive: true, force: true })
  }
  await tasks.close()
})

// S-5: the workspace is the host's, apart from the cwd: a cwd outside it
// (another directory, "/", a link in the workspace pointing out) throws
// EPERM and nothing runs; a cwd inside it runs there and writes the
// workspace.
test('sandbox: workspace apart from the cwd (S-5)', opts, async () => {
  const { tasks } = fixture()
  const work = fs.mkdtempSync('/tmp/uvt-node-sbx-ws-')
  const outside = fs.mkdtempSync('/var/tmp/uvt-node-sbx-ws-out-')
  try {
    fs.mkdirSync(path.join(work, 'sub'))
    fs.symlinkSync(outside, path.join(work, 'out'))
    const sandbox = { fs: 'workspace', workspace: work }
    for (const cwd of [outside, '/', path.join(work, 'out'), path.join(work, '..')]) {
      assert.throws(() => tasks.spawn({ command: 'echo x > f', cwd, sandbox }), codeOf('EPERM'))
    }
    assert.deepEqual(fs.readdirSync(outside), [])
    const id = tasks.spawn({
      command: 'echo x > in-sub && echo x > ../at-root && echo wrote',
      cwd: path.join(work, 'sub'),
      sandbox,
    })
    assert.equal((await tasks.wait(id, 20000)).detail, 'exit code: 0')
    assert.ok(fs.existsSync(path.join(work, 'sub', 'in-sub')))
    assert.ok(fs.existsSync(path.join(work, 'at-root')))
    assert.throws(() => tasks.spawn({ command: 'true', cwd: work, sandbox: { workspace: 7 } }),
      TypeError)
    assert.throws(() => tasks.spawn({
      command: 'true', cwd: work, sandbox: { workspace: path.join(work, 'nope') },
    }), codeOf('ENOENT'))
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
    fs.rmSync(outside, { recursive: true, force: true })
  }
  await tasks.close()
})

// S-1, S-4: no network by default; network 'host' reaches a local server.
test('sandbox: network none and host (S-1, S-4)', opts, async () => {
  const { tasks } = fixture()
  const server = net.createServer((c) => c.end())
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  const cmd = `exec 3<>/dev/tcp/127.0.0.1/${server.address().port} && echo connected`
  try {
    const none = tasks.spawn({ command: cmd, sandbox: { network: 'none' } })
    await tasks.wait(none, 20000)
    assert.match(tasks.read(none).text, /Connection refused/)
    const host = tasks.spawn({ command: cmd, sandbox: { network: 'host' } })
    assert.equal((await tasks.wait(host, 20000)).detail, 'exit code: 0')
    assert.match(tasks.read(host).text, /connected/)
  } finally {
    server.close()
  }
  await tasks.close()
})

// S-3, S-4: bad options are TypeErrors; no bwrap is ENOTSUP, nothing runs.
test('sandbox: bad options throw; no bwrap throws ENOTSUP (S-3, S-4)', opts, async () => {
  const { tasks } = fixture()
  assert.throws(() => tasks.spawn({ command: 'true', sandbox: { fs: 'rw' } }), TypeError)
  assert.throws(() => tasks.spawn({ command: 'true', sandbox: { network: 'all' } }), TypeError)
  assert.throws(() => tasks.spawn({ command: 'true', sandbox: 'yes' }), TypeError)
  assert.throws(() => tasks.spawn({ command: 'true', sandbox: { writable: ['/nonexistent/x'] } }),
    codeOf('ENOENT'))
  await tasks.close()
  const again = fixture().tasks
  process.env.UVTASKS_BWRAP = '/nonexistent/bwrap'
  try {
    assert.throws(() => again.spawn({ command: 'true', sandbox: {} }), codeOf('ENOTSUP'))
  } finally {
    delete process.env.UVTASKS_BWRAP
  }
  await again.close()
})

// S-2, S-9: the package ships uvtasks-sandbox beside the addon and the
// library finds it there with no variable set: a sandboxed command's death
// by a signal nobody sent reads as that signal, as outside a sandbox, not
// as "exit code: 128+N" (what bwrap alone reports), and the sandbox's
// lifeline is the helper's.
test('sandbox: the shipped helper gives honest outcomes (S-2)', opts, async () => {
  assert.equal(process.env.UVTASKS_SANDBOX_HELPER, undefined)
  const { tasks } = fixture()
  const work = fs.mkdtempSync('/tmp/uvt-node-sbx-')
  try {
    for (const [sig, name] of [['TERM', 'SIGTERM'], ['KILL', 'SIGKILL'], ['SEGV', 'SIGSEGV']]) {
      const id = tasks.spawn({ command: `kill -${sig} $$`, cwd: work, sandbox: { fs: 'workspace' } })
      const snap = await tasks.wait(id, 20000)
      assert.equal(snap.detail, `signal: ${name}`, `kill -${sig}`)
    }
    const ok = tasks.spawn({ command: 'exit 3', cwd: work, sandbox: { fs: 'workspace' } })
    assert.equal((await tasks.wait(ok, 20000)).detail, 'exit code: 3')
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
  await tasks.close()
})
