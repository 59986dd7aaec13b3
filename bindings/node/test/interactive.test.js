// Interactive process tasks through the binding (contract §3b via §8, N-4):
// stdin pipes, terminals, onOutput, output backpressure and the
// structured read hold for tasks.spawn() as they do in C; their errors
// carry codes (N-1) and onOutput runs like any callback of ours (N-2).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const { executionAsyncId } = require('node:async_hooks')
const { setTimeout: sleep } = require('node:timers/promises')
const { features } = require('..')
const {
  fixture, controlled, pidOf, eventually, busyWait, driver, sessionRuns,
  zombieChildren,
} = require('./helpers')

const codeOf = (code) => (e) => e instanceof Error && e.code === code
const BASH = ['bash', '--norc', '--noprofile', '-i']

// The build has every part of contract §3b (the library on main has them).
test('features: this build has every interactive part (contract §3b)', () => {
  assert.deepEqual({ ...features },
    { stdinPipe: true, tty: true, outputBackpressure: true, onOutput: true, readProcess: true })
})

// P-IN-1: with stdin 'pipe', writes go out in order (strings and bytes
// alike) and closeStdin() is the end of file once they have gone.
test("stdin 'pipe': sort is fed in pieces and closed (P-IN-1)", async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({ argv: ['sort'], stdin: 'pipe' })
  tasks.write(id, 'pear\nfig\n') // accepted while the spawn is still out
  tasks.write(id, Buffer.from('apple\n'))
  tasks.write(id, new Uint8Array([0x6b, 0x69, 0x77, 0x69, 0x0a])) // "kiwi\n"
  tasks.write(id, '') // checks the task, queues nothing
  await pidOf(tasks, id)
  tasks.write(id, 'banana\n')
  assert.equal(tasks.get(id).status, 'running') // sort waits for the end
  tasks.closeStdin(id)
  tasks.closeStdin(id) // again: nothing to do
  const snap = await tasks.wait(id, 10000)
  assert.equal(snap.detail, 'exit code: 0')
  assert.equal(tasks.read(id).text, 'apple\nbanana\nfig\nkiwi\npear\n')
  await tasks.close()
})

// P-IN-1 and N-1: the input cap (ENOBUFS, nothing of that write queued),
// writes after the end of input or of the task (EPIPE), a task without a
// pipe (EINVAL); the fence and unknown ids as for every call.
test('write() errors carry codes: ENOBUFS, EPIPE, EINVAL, UVT_* (P-IN-1, N-1)', async () => {
  const { tasks } = fixture()
  const a = tasks.registerAgent('a', 's')
  const b = tasks.registerAgent('b', 's2')

  // Nobody reads: the socket takes what it can, the rest waits in the
  // queue until the cap; the write that would go beyond it is refused
  // whole, and a smaller one still fits.
  const held = tasks.spawn({ command: 'sleep 30', stdin: 'pipe', stdinCapBytes: 4096, owner: a, graceMs: 100 })
  await pidOf(tasks, held, a)
  assert.throws(() => tasks.write(held, Buffer.alloc(4097), a), (e) => e.code === 'ENOBUFS' && e.errno < 0)
  let accepted = 0
  let err = null
  for (let i = 0; i < 100000 && err === null; i++) {
    try {
      tasks.write(held, Buffer.alloc(1000, 'x'), a)
      accepted += 1000
    } catch (e) {
      err = e
    }
  }
  assert.ok(err !== null && err.code === 'ENOBUFS', String(err))
  assert.ok(accepted > 4096, `${accepted} bytes went into the socket and the queue`)
  assert.throws(() => tasks.write(held, 'x', b), codeOf('UVT_EFOREIGN'))
  assert.throws(() => tasks.closeStdin(held, b), codeOf('UVT_EFOREIGN'))
  assert.throws(() => tasks.write(held, 'x'), codeOf('UVT_EFOREIGN'))
  tasks.closeStdin(held, a)
  assert.throws(() => tasks.write(held, 'x', a), codeOf('EPIPE'))
  tasks.kill(held, a)
  await tasks.wait(held, 10000, a)

  // The default cap is 1 MiB.
  const cat = tasks.spawn({ argv: ['cat'], stdin: 'pipe' })
  assert.throws(() => tasks.write(cat, Buffer.alloc(1024 * 1024 + 1)), codeOf('ENOBUFS'))
  tasks.write(cat, 'still open\n')
  tasks.closeStdin(cat)
  await tasks.wait(cat, 10000)
  assert.equal(tasks.read(cat).text, 'still open\n')
  // After the task ended: EPIPE; closeStdin() does nothing.
  assert.throws(() => tasks.write(cat, 'late'), (e) => e.code === 'EPIPE' && /write 'bash-2'/.test(e.message))
  tasks.closeStdin(cat)

  // The child closed its end (`head -c 1` read one byte and exited).
  const head = tasks.spawn({ argv: ['head', '-c', '1'], stdin: 'pipe' })
  tasks.write(head, 'xy')
  await tasks.wait(head, 10000)
  assert.throws(() => tasks.write(head, 'z'), codeOf('EPIPE'))

  // No pipe: stdin is /dev/null (or bytes): EINVAL, also for a JS task.
  const plain = tasks.spawn({ command: 'sleep 30', graceMs: 100 })
  assert.throws(() => tasks.write(plain, 'x'), codeOf('EINVAL'))
  assert.throws(() => tasks.closeStdin(plain), codeOf('EINVAL'))
  assert.throws(() => tasks.resize(plain, 100, 30), codeOf('EINVAL'))
  const c = controlled()
  const js = tasks.start({ kind: 'js', label: 'l', run: c.run })
  assert.throws(() => tasks.write(js, 'x'), codeOf('EINVAL'))
  assert.throws(() => tasks.write('bash-99', 'x'), codeOf('UVT_ENOTASK'))
  assert.throws(() => tasks.closeStdin('bash-99'), codeOf('UVT_ENOTASK'))
  assert.throws(() => tasks.write(plain, 42), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.spawn({ command: 'cat', stdin: 42 }), codeOf('ERR_INVALID_ARG_TYPE'))
  // Input bytes together with a terminal: the library's EINVAL.
  assert.throws(() => tasks.spawn({ command: 'cat', stdin: 'text', tty: true }), codeOf('EINVAL'))
  assert.throws(() => tasks.spawn({ command: 'cat', stdin: 'pipe', stdinCapBytes: 0 }), codeOf('EINVAL'))
  tasks.kill(plain)
  c.end({ status: 'completed' })
  await tasks.close()
  assert.deepEqual(zombieChildren(), [])
})

// P-SPAWN-1, P-IN-1: stdin as a string or as bytes is that input, then the
// end of file; 'null' (the default) is /dev/null, so a command that reads
// gets the end of file at once and never hangs.  The literal text 'pipe'
// or 'null' goes as a Buffer.
test('stdin as a string or a Buffer: those bytes, then end of file (P-SPAWN-1, P-IN-1)', async () => {
  const { tasks } = fixture()
  const bytes = tasks.spawn({ argv: ['od', '-An', '-tx1', '-v'], stdin: Buffer.from([0, 1, 0xff, 0x80, 0x0a]) })
  const text = tasks.spawn({ argv: ['wc', '-c'], stdin: 'h\u00e9llo \u2603' })
  const literal = tasks.spawn({ argv: ['cat'], stdin: Buffer.from('pipe') })
  const empty = tasks.spawn({ argv: ['cat'], stdin: '' })
  const none = tasks.spawn({ command: 'read line; echo "got [$line] $?"' })
  const nul = tasks.spawn({ command: 'cat; echo', stdin: 'null' })
  for (const id of [bytes, text, literal, empty, none, nul]) {
    assert.equal((await tasks.wait(id, 10000)).detail, 'exit code: 0', id)
  }
  assert.equal(tasks.read(bytes).text.trim(), '00 01 ff 80 0a')
  assert.equal(tasks.read(text).text.trim(), '10')
  assert.equal(tasks.read(literal).text, 'pipe')
  assert.equal(tasks.read(empty).text, '')
  assert.equal(tasks.read(none).text, 'got [] 1\n')
  assert.equal(tasks.read(nul).text, '\n')
  await tasks.close()
})

// P-PTY-1: a REPL on a terminal: Enter is "\r", the terminal echoes and
// ends lines with "\r\n"; closeStdin() sends the end-of-file character,
// which ends the REPL.  Driven the way a host drives it: onOutput says
// there is output, read() takes it (P-EVT-1).
test('tty: python3 -i answers 1+1 and ends on closeStdin() (P-PTY-1, P-EVT-1, P-IN-1)', async () => {
  const { tasks } = fixture()
  const py = driver(tasks, { argv: ['python3', '-q', '-i'], tty: true })
  await py.until('>>> ')
  tasks.write(py.id, '1+1\r')
  // The echo of what was typed, then the answer on a "\r\n" line.
  await py.until('1+1')
  await py.until('\r\n2\r\n')
  await py.until('>>> ')
  tasks.write(py.id, Buffer.from('print("caf\u00e9")\r'))
  await py.until('caf\u00e9\r\n')
  await py.until('>>> ')
  tasks.closeStdin(py.id)
  assert.throws(() => tasks.write(py.id, '1\r'), codeOf('EPIPE'))
  assert.equal((await py.done).detail, 'exit code: 0')
  assert.ok(py.calls > 0)
  await tasks.close()
})

// P-PTY-1: "\x03" goes through the line discipline: in an interactive bash
// it interrupts the foreground job and bash goes on; in a command without
// job control it ends the task by SIGINT.
test('tty: "\\x03" interrupts sleep in bash -i; bash goes on (P-PTY-1)', async () => {
  const { tasks } = fixture()
  const sh = driver(tasks, { argv: BASH, tty: true, graceMs: 100 })
  const sid = await pidOf(tasks, sh.id)
  tasks.write(sh.id, 'sleep 100\r')
  assert.equal(await eventually(() => sessionRuns(sid, 'sleep')), true)
  tasks.write(sh.id, '\x03')
  assert.equal(await eventually(() => !sessionRuns(sid, 'sleep')), true)
  tasks.write(sh.id, 'echo after-$((40 + 2))\r')
  await sh.until('echo after-$((40 + 2))') // echoed
  await sh.until('after-42\r\n')
  assert.doesNotMatch(sh.text, /no job control/)
  tasks.write(sh.id, 'exit 7\r')
  assert.equal((await sh.done).detail, 'exit code: 7')

  const plain = driver(tasks, { command: 'echo ready; sleep 100', tty: true })
  await plain.until('ready')
  tasks.write(plain.id, '\x03')
  const snap = await plain.done
  assert.equal(snap.status, 'killed')
  assert.equal(snap.detail, 'signal: SIGINT')
  await tasks.close()
})

// P-PTY-1: cols/rows at the spawn, resize() later (the job gets SIGWINCH);
// its errors (N-1): 0 is the library's EINVAL, beyond 65535 a RangeError,
// a task without a terminal EINVAL, a task that ended EPIPE.
test('tty: cols/rows, and resize() seen by stty size (P-PTY-1, N-1)', async () => {
  const { tasks } = fixture()
  const t = driver(tasks, {
    command: "stty size; trap 'echo winch $(stty size)' WINCH; echo ready; " +
             'while :; do sleep 0.05; done',
    tty: true, cols: 100, rows: 30, graceMs: 100,
  })
  await t.until('30 100\r\nready\r\n')
  tasks.resize(t.id, 120, 40)
  await t.until('winch 40 120\r\n')
  assert.throws(() => tasks.resize(t.id, 0, 40), codeOf('EINVAL'))
  assert.throws(() => tasks.resize(t.id, 40, 0), codeOf('EINVAL'))
  assert.throws(() => tasks.resize(t.id, 65536, 40), codeOf('ERR_OUT_OF_RANGE'))
  assert.throws(() => tasks.resize(t.id, 80.5, 40), codeOf('ERR_OUT_OF_RANGE'))
  assert.throws(() => tasks.resize(t.id, '80', 40), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.spawn({ command: 'true', tty: true, cols: 70000 }), codeOf('ERR_OUT_OF_RANGE'))
  assert.throws(() => tasks.spawn({ command: 'true', tty: true, rows: 0 }), codeOf('EINVAL'))
  assert.throws(() => tasks.spawn({ command: 'true', tty: 'yes' }), codeOf('ERR_INVALID_ARG_TYPE'))
  tasks.kill(t.id)
  await t.done
  assert.throws(() => tasks.resize(t.id, 100, 30), codeOf('EPIPE'))
  await tasks.close()
})

// P-PTY-1: one merged stream (no [stderr] section; the structured read's
// stderr stays empty); the terminal is stdin, stdout and stderr; TERM is
// xterm-256color unless env gives one.
test('tty: one stream, a terminal on every stdio, TERM (P-PTY-1, P-RES-1)', async () => {
  const { tasks } = fixture()
  const cmd = 'echo "$TERM"; echo err >&2; test -t 0 && test -t 1 && test -t 2 && echo all-tty'
  const a = tasks.spawn({ command: cmd, tty: true })
  const b = tasks.spawn({ command: cmd, tty: true, env: { TERM: 'vt100' } })
  await tasks.wait(a, 10000)
  await tasks.wait(b, 10000)
  assert.equal(tasks.read(a).text, 'xterm-256color\r\nerr\r\nall-tty\r\n')
  const r = tasks.readProcess(b)
  assert.equal(r.stdout.toString(), 'vt100\r\nerr\r\nall-tty\r\n')
  assert.equal(r.stderr.length, 0)
  await tasks.close()
})

// P-RES-1: the structured read: stdout and stderr apart as bytes (not
// UTF-8 text), dropped byte counts as numbers with no marker in the bytes,
// and once the task ended its exit code or signal; the cursor is shared
// with read() (R-READ-1).
test('readProcess(): streams apart as Buffers, dropped counts, exit code or signal (P-RES-1, P-OUT-2, R-READ-1)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({
    command: "printf 'a\\377\\000b'; printf 'E%.0s' $(seq 1 100) >&2; echo ready; read x; exit 3",
    stdin: 'pipe', outputCapBytes: 16,
  })
  const live = tasks.readProcess(id) // maybe before any output
  assert.equal(live.exited, false)
  assert.equal(live.exitCode, null)
  assert.equal(live.signal, null)
  assert.equal(live.snapshot.status, 'running')
  // Each read consumes both streams (one cursor): keep all of each.
  let out = live.stdout
  let err = live.stderr
  let errDropped = live.stderrDropped
  let outDropped = live.stdoutDropped
  assert.equal(await eventually(() => {
    const p = tasks.readProcess(id)
    out = Buffer.concat([out, p.stdout])
    err = Buffer.concat([err, p.stderr])
    errDropped += p.stderrDropped
    outDropped += p.stdoutDropped
    return out.includes('ready')
  }), true)
  tasks.write(id, '\n')
  const snap = await tasks.wait(id, 10000)
  assert.equal(snap.detail, 'exit code: 3')
  const r = tasks.readProcess(id)
  assert.equal(r.exited, true)
  assert.equal(r.exitCode, 3)
  assert.equal(r.signal, null)
  assert.equal(r.snapshot.status, 'completed')
  assert.equal(r.snapshot.reported, true)
  assert.ok(Buffer.isBuffer(r.stdout) && Buffer.isBuffer(r.stderr))
  assert.deepEqual([...Buffer.concat([out, r.stdout])], [...Buffer.from('a\xff\x00bready\n', 'latin1')])
  // The cap (16) kept the last 16 of stderr's 100 bytes, with no marker.
  assert.equal(Buffer.concat([err, r.stderr]).toString(), 'E'.repeat(16))
  assert.equal(errDropped + r.stderrDropped, 84)
  assert.equal(outDropped + r.stdoutDropped, 0)
  const again = tasks.readProcess(id)
  assert.equal(again.stdout.length + again.stderr.length, 0)
  assert.equal(again.exitCode, 3)

  // Killed once its shell runs (it printed), with a grace far beyond the
  // TERM's effect: on a stalled loop (an arm64 Node under qemu beside busy
  // CPUs) a 3 s grace could run out before the loop read the exit.
  const kd = driver(tasks, { command: 'echo up; sleep 30; exit 0', graceMs: 60000 })
  await kd.until('up')
  const killed = kd.id
  tasks.kill(killed)
  await tasks.wait(killed, 10000)
  const k = tasks.readProcess(killed)
  assert.deepEqual([k.exited, k.exitCode, k.signal], [true, null, 'SIGTERM'])

  // A kill in the turn of spawn(): before the child existed there is no
  // status at all; but the spawner thread may already be spawning, and
  // then the kill reaches the child (P-SPAWN-6).  The detail says which.
  const early = tasks.spawn({ command: 'sleep 30' })
  tasks.kill(early)
  const es = await tasks.wait(early, 10000)
  const e = tasks.readProcess(early)
  if (es.detail === 'killed before it started') {
    assert.deepEqual([e.exited, e.exitCode, e.signal], [true, null, null])
  } else {
    // SIGTERM, or SIGKILL when the child had not yet taken the TERM when
    // the grace ran out (an arm64 Node under qemu-user starts a process
    // slowly, and qemu holds a signal until the guest is set up).
    const sig = es.detail.replace('signal: ', '')
    assert.ok(sig === 'SIGTERM' || sig === 'SIGKILL', es.detail)
    assert.deepEqual([e.exited, e.exitCode, e.signal], [true, null, sig])
  }

  const c = controlled()
  const js = tasks.start({ kind: 'js', label: 'l', run: c.run })
  assert.throws(() => tasks.readProcess(js), codeOf('EINVAL'))
  assert.throws(() => tasks.readProcess('bash-99'), codeOf('UVT_ENOTASK'))
  c.end({ status: 'completed' })
  await tasks.close()
})

// P-EVT-1 and N-2: onOutput gets the task's id on the loop thread inside
// a callback scope: the microtasks it queues run as soon as it returns
// (before an immediate it queued), with the registry's async context.
test('onOutput runs inside a callback scope (N-2, P-EVT-1)', async () => {
  const { tasks } = fixture()
  const seen = []
  let asyncId = -1
  let first
  const called = new Promise((r) => { first = r })
  const id = tasks.spawn({
    command: 'echo hello; sleep 30',
    graceMs: 100,
    onOutput(tid) {
      if (seen.length > 0) return
      seen.push(`call ${tid}`)
      asyncId = executionAsyncId()
      queueMicrotask(() => seen.push('microtask'))
      setImmediate(() => {
        seen.push('immediate')
        first()
      })
    },
  })
  await called
  assert.deepEqual(seen, [`call ${id}`, 'microtask', 'immediate'])
  assert.notEqual(asyncId, 0)
  tasks.kill(id)
  await tasks.wait(id, 10000)
  await tasks.close()
})

// P-EVT-1: at most one call per loop iteration per task, whatever came on
// stdout and stderr meanwhile (coalesced), and none once the task ended
// (its listeners have heard of the end).  A loop-iteration counter: one
// self-queuing immediate per iteration, which runs after our check.
test('onOutput: at most once per loop iteration, coalesced, never after the end (P-EVT-1)', async () => {
  const { tasks } = fixture()
  let iter = 0
  let counting = true
  const tick = () => {
    iter++
    if (counting) setImmediate(tick)
  }
  setImmediate(tick)
  const calls = new Map()
  const ended = new Set()
  const late = []
  tasks.onTaskDone((snap) => ended.add(snap.id))
  const onOutput = (id) => {
    if (ended.has(id)) late.push(id)
    if (!calls.has(id)) calls.set(id, [])
    calls.get(id).push(iter)
    tasks.read(id)
  }
  const ids = [
    tasks.spawn({ argv: ['seq', '1', '200000'], onOutput }),
    tasks.spawn({ command: 'seq 1 100000 | tee /dev/stderr', onOutput }),
    tasks.spawn({ argv: ['yes'], onOutput, graceMs: 100 }),
    tasks.spawn({ command: 'sleep 0.2; seq 1 50000; exit 4', onOutput }),
    tasks.spawn({ command: 'seq 1 20000', tty: true, onOutput }),
  ]
  assert.equal(await eventually(() => calls.has(ids[2])), true)
  tasks.kill(ids[2])
  for (const id of ids) await tasks.wait(id, 20000)
  // A few more iterations and a timer phase: still nothing.
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r))
  await sleep(50)
  counting = false
  assert.deepEqual(late, [])
  for (const id of ids) {
    const its = calls.get(id) || []
    assert.ok(its.length > 0, `${id} had onOutput calls`)
    for (let i = 1; i < its.length; i++) {
      assert.ok(its[i] > its[i - 1], `${id}: two calls in iteration ${its[i]}`)
    }
  }

  // Coalesced: the first call lets the child go on and blocks the loop
  // until the child has written everything on both streams (it then
  // becomes `sleep`); the next call is the only one for all of it.
  let n = 0
  let text = ''
  let pid = 0
  const id = tasks.spawn({
    argv: ['sh', '-c', 'echo first $$; read go; i=0; while [ $i -lt 300 ]; do ' +
                       'echo out$i; echo err$i >&2; i=$((i+1)); done; exec sleep 30'],
    stdin: 'pipe',
    graceMs: 100,
    onOutput(tid) {
      n++
      if (n === 1) {
        text += tasks.read(tid).text
        pid = Number(/^first (\d+)/.exec(text)[1])
        tasks.write(tid, 'go\n')
        const end = Date.now() + 10000
        let comm = ''
        while (comm !== 'sleep' && Date.now() < end) {
          try {
            comm = require('node:fs').readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
          } catch {}
          if (comm !== 'sleep') busyWait(1)
        }
        return
      }
      text += `<call ${n}>` + tasks.read(tid).text
    },
  })
  assert.equal(await eventually(() => text.includes('err299')), true)
  assert.equal(n, 2, text)
  assert.match(text, /<call 2>(.|\n)*out299\n\[stderr\]\n(.|\n)*err299\n$/)
  tasks.kill(id)
  await tasks.wait(id, 10000)
  await tasks.close()
})

// P-OUT-4: with outputBackpressure nothing is dropped, however slowly the
// host reads: the library stops reading the pipe at the cap and the child
// waits.  The same slow reader without it loses bytes, and says how many
// (P-OUT-2, P-RES-1).
test('outputBackpressure: seq 1 2000000 read slowly loses nothing (P-OUT-4, P-OUT-2, P-RES-1)', async () => {
  const { tasks } = fixture()
  const N = 2000000
  let expected = ''
  for (let i = 1; i <= N; i++) expected += `${i}\n`
  const want = Buffer.from(expected)
  expected = null

  async function slowRead(options, pauseMs) {
    let wake = null
    const id = tasks.spawn({
      argv: ['seq', '1', String(N)], outputCapBytes: 65536, ...options,
      onOutput() {
        if (wake !== null) wake()
      },
    })
    const done = tasks.wait(id, 120000).then(() => { if (wake !== null) wake() })
    const chunks = []
    let dropped = 0
    let reads = 0
    for (;;) {
      const r = tasks.readProcess(id)
      reads++
      chunks.push(r.stdout)
      dropped += r.stdoutDropped
      assert.equal(r.stderr.length, 0)
      if (r.exited) break
      if (r.stdout.length === 0) await new Promise((res) => { wake = res })
      wake = null
      await sleep(pauseMs)
    }
    await done
    return { got: Buffer.concat(chunks), dropped, reads }
  }

  const bp = await slowRead({ outputBackpressure: true }, 1)
  assert.equal(bp.dropped, 0)
  assert.equal(bp.got.length, want.length)
  assert.ok(bp.got.equals(want), 'every line, in order')
  assert.ok(bp.reads > want.length / (2 * 65536), `${bp.reads} reads`)
  const sum = (b) => crypto.createHash('sha256').update(b).digest('hex')
  assert.equal(sum(bp.got), sum(want))

  const lossy = await slowRead({}, 20)
  assert.ok(lossy.dropped > 0, 'without backpressure a slow reader loses bytes')
  assert.equal(lossy.got.length + lossy.dropped, want.length)
  await tasks.close()
})

// Bad option types are the binding's own TypeErrors (N-1).
test('interactive options are checked (N-1)', async () => {
  const { tasks } = fixture()
  assert.throws(() => tasks.spawn({ command: 'true', onOutput: 'x' }), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.spawn({ command: 'true', outputBackpressure: 1 }), codeOf('ERR_INVALID_ARG_TYPE'))
  assert.throws(() => tasks.spawn({ command: 'true', stdinCapBytes: -1 }), codeOf('ERR_OUT_OF_RANGE'))
  assert.equal(tasks.metrics().started, 0)
  await tasks.close()
})
