// What a Node host author passes that the other suites do not: values a
// JS host hands over as a matter of course (SPEC §8 through N-4: the
// library's clauses hold; the binding only converts JS values to its
// arguments, the way node:child_process converts the same values).
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const { fixture } = require('./helpers')

// P-SPAWN-1, P-IN-1 (N-4): `stdin` as a string is that input, every
// character of it; only the texts 'pipe' and 'null' mean something else.
// A NUL in it is input like any other byte (write() takes it too), not a
// string to refuse.
test('stdin as a string may hold NUL characters (P-IN-1, N-4)', async () => {
  const { tasks } = fixture()
  const a = tasks.spawn({ command: 'cat', stdin: 'a\0b\0' })
  await tasks.wait(a, 10000)
  assert.deepEqual(tasks.readProcess(a).stdout, Buffer.from('a\0b\0'))
  const b = tasks.spawn({ command: 'cat', stdin: 'pipe\0' })
  await tasks.wait(b, 10000)
  assert.deepEqual(tasks.readProcess(b).stdout, Buffer.from('pipe\0'))
  const c = tasks.spawn({ command: 'cat', stdin: Buffer.from('pipe') })
  await tasks.wait(c, 10000)
  assert.deepEqual(tasks.readProcess(c).stdout, Buffer.from('pipe'))
  await tasks.close()
})

// P-SPAWN-3 (N-4): `env` gives extra variables.  A host builds it from
// its own options ({ DEBUG: opts.debug }); as node:child_process does, an
// entry whose value is undefined is no variable at all, not the text
// "undefined"; other values are their String().
test('env: an undefined value sets no variable; others are strings (P-SPAWN-3)', async () => {
  const { tasks } = fixture()
  const id = tasks.spawn({
    command: 'echo "${UVTN_A-unset}|${UVTN_B-unset}|${UVTN_C-unset}"',
    env: { UVTN_A: undefined, UVTN_B: 'b', UVTN_C: 42 },
  })
  await tasks.wait(id, 10000)
  assert.equal(tasks.readProcess(id).stdout.toString(), 'unset|b|42\n')
  await tasks.close()
})
