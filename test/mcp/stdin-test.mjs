// write_stdin and run_in_background's stdin and tty (M-TOOLS-5) through
// uvtasks-mcp, driven by both official clients: the v1 SDK client
// (protocol 2025) and the v2 client pinned to 2026-07-28.  Each drives a
// Python REPL as a model would: start `python3 -q -i` on a terminal (and,
// with the v1 client, with a stdin pipe), wait for the prompt, send
// `1+1\n` and see 2, send a slow line and see its answer, end it with
// close_stdin, and find that a write to the ended task is a tool error.
// Wrong argument types are tool errors in both eras (M-MCP-3).
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node stdin-test.mjs
//
// Exits 77 (skip) when the clients or python3 are missing, 1 on any failed
// check.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { check, fail, finish, server } from './harness.mjs';

if (!existsSync(new URL('./node_modules/@modelcontextprotocol/client', import.meta.url))) {
  console.log('SKIP: @modelcontextprotocol/client is missing; run `npm ci` in test/mcp');
  process.exit(77);
}
try {
  execFileSync('python3', ['-c', 'pass']);
} catch {
  console.log('SKIP: python3 is missing');
  process.exit(77);
}
const v1 = await import('@modelcontextprotocol/sdk/client/index.js');
const v1stdio = await import('@modelcontextprotocol/sdk/client/stdio.js');
const v2 = await import('@modelcontextprotocol/client');
const v2stdio = await import('@modelcontextprotocol/client/stdio');

const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
// Everything after the notices a result may begin with (M-MCP-2).
const bodyOf = (res) => textOf(res).replace(/^(\[notice\][^\n]*\n)+\n/, '');
const idOf = (res) => (/^Started (bash-\d+)\./.exec(bodyOf(res)) || [])[1];

// Write `chars` and read on (polls) until the output shown ends with
// `until` or the task ended; returns { isError, body }: the outputs joined
// (without "(no new output)"), then the last status line.  An early answer
// is a guess (M-TOOLS-5): a program descheduled between two of its writes
// on a busy machine can look like one that waits, and the next poll reads
// on; the joined text is the same either way.
async function answer(c, id, chars, until) {
  let out = '';
  let last;
  for (let i = 0; i < 20; i++) {
    last = await c.call('write_stdin', { task_id: id, chars: i === 0 ? chars : '', yield_ms: 20000 });
    const body = bodyOf(last);
    const at = body.lastIndexOf('[status: ');
    if (last.isError || at < 0)
      return { isError: last.isError, body, res: last };
    const part = body.slice(0, at);
    out += part === '(no new output)\n' ? '' : part;
    if (out.endsWith(until) || !body.endsWith('[status: running]'))
      return { isError: false, body: out + body.slice(at), res: last };
  }
  return { isError: last.isError, body: out, res: last };
}

async function connect(era) {
  const args = ['--grace-ms', '300'];
  let transport;
  let client;
  if (era === '2025') {
    transport = new v1stdio.StdioClientTransport({ command: server, args, stderr: 'pipe' });
    client = new v1.Client({ name: 'uvtasks-stdin-test', version: '1.0.0' });
  } else {
    transport = new v2stdio.StdioClientTransport({ command: server, args, stderr: 'pipe' });
    client = new v2.Client({ name: 'uvtasks-stdin-test', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  }
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  await client.connect(transport);
  // Default request options: a yield below the SDK's 60 s timeout.
  const call = (name, a) => client.callTool({ name, arguments: a });
  return { client, call, stderr: () => stderr };
}

/* M-TOOLS-5: a Python REPL on a terminal through write_stdin. */
async function replOnTerminal(c, era) {
  let res = await c.call('run_in_background', { command: 'python3 -q -i', tty: true, label: 'repl' });
  const id = idOf(res);
  check(`${era} tty: run_in_background starts it on a terminal and says how to type`,
    !res.isError && !!id && bodyOf(res) ===
      `Started ${id}. It runs on a terminal: write_stdin types into it (end a line with "\\n" or "\\r"; "\\u0003" is Ctrl-C, "\\u0004" is Ctrl-D; close_stdin sends a last Ctrl-D and ends the input for good).\n[status: running]`,
    res);
  // Wait for the prompt first (a poll), so typing does not race Python's
  // start-up (the terminal would echo early typing twice).
  let a = await answer(c, id, '', '>>> \n');
  check(`${era} tty: a poll returns at the prompt`, !a.isError && a.body === '>>> \n[status: running]', a);
  a = await answer(c, id, '1+1\n', '\n>>> \n');
  check(`${era} tty: 1+1 shows the echo, 2 and the next prompt, as plain lines`,
    !a.isError && a.body === '>>> 1+1\n2\n>>> \n[status: running]', a);
  a = await answer(c, id, 'import time; time.sleep(0.2); print("done")\n', '\n>>> \n');
  check(`${era} tty: a slow line is answered once it printed (the echo is no answer)`,
    !a.isError && a.body ===
      '>>> import time; time.sleep(0.2); print("done")\ndone\n>>> \n[status: running]', a);
  a = await answer(c, id, '\u0003', '\n>>> \n');
  check(`${era} tty: Ctrl-C interrupts the line, the REPL goes on`,
    !a.isError && /KeyboardInterrupt\n>>> \n\[status: running\]$/.test(a.body), a);
  res = await c.call('write_stdin', { task_id: id, close_stdin: true, yield_ms: 20000 });
  check(`${era} tty: close_stdin (Ctrl-D) ends it`,
    !res.isError && bodyOf(res).endsWith('[status: completed, exit code: 0]'), res);
  res = await c.call('write_stdin', { task_id: id, chars: '1+1\n' });
  check(`${era} tty: a write to the ended task is a tool error that says so`,
    res.isError === true && bodyOf(res) ===
      `Nothing was sent: ${id} has ended, so it takes no more input. task_output shows what it printed last.\n[status: completed, exit code: 0]`,
    res);
}

/* M-TOOLS-5: the same REPL with a stdin pipe (prompts go to stderr). */
async function replOnPipe(c, era) {
  let res = await c.call('run_in_background', { command: 'python3 -q -i', stdin: true });
  const id = idOf(res);
  check(`${era} stdin: run_in_background keeps stdin open and says so`,
    !res.isError && bodyOf(res) ===
      `Started ${id}. Its stdin is open: write_stdin sends it input (close_stdin ends it).\n[status: running]`, res);
  // Python writes its prompts to stderr (no newline) and results to
  // stdout: each answer is stdout, then the [stderr] part with the prompt
  // line, which grows by one prompt per answer (shown whole, M-TOOLS-7).
  let a = await answer(c, id, '', '>>> \n');
  check(`${era} stdin: a poll returns at the prompt (on stderr)`,
    a.body === '[stderr]\n>>> \n[status: running]', a);
  a = await answer(c, id, '1+1\n', '>>> \n');
  check(`${era} stdin: 1+1 answers 2`, !a.isError && a.body.startsWith('2\n[stderr]\n'), a);
  a = await answer(c, id, 'import time; time.sleep(0.2); print("done")\n', '>>> \n');
  check(`${era} stdin: the slow line answers done`, !a.isError && a.body.startsWith('done\n[stderr]\n'), a);
  // chars may hold U+0000: it is written as a byte.
  a = await answer(c, id, 'print(repr(__import__("sys").stdin.readline()))\na\u0000b\n', '>>> \n');
  check(`${era} stdin: a U+0000 in chars reaches the program as a NUL byte`,
    !a.isError && a.body.startsWith("'a\\x00b\\n'\n"), a);
  res = await c.call('write_stdin', { task_id: id, chars: '', close_stdin: true, yield_ms: 20000 });
  check(`${era} stdin: close_stdin (end of file) ends it`,
    !res.isError && bodyOf(res).endsWith('[status: completed, exit code: 0]'), res);
  res = await c.call('write_stdin', { task_id: id, chars: 'x\n' });
  check(`${era} stdin: a write to the ended task is a tool error`,
    res.isError === true && bodyOf(res).startsWith(`Nothing was sent: ${id} has ended`), res);
}

/* M-MCP-3 for the new arguments: wrong types are tool errors, found
 * before anything is started or written; null means not given. */
async function badArguments(c, era) {
  const before = bodyOf(await c.call('task_list', {}));
  for (const [k, v] of [['stdin', 'true'], ['tty', 1], ['stdin', {}]]) {
    const res = await c.call('run_in_background', { command: 'echo should not run', [k]: v });
    check(`${era}: run_in_background ${k} ${JSON.stringify(v)} is a tool error`,
      res.isError === true && bodyOf(res) === `run_in_background: ${k} must be true or false.`, res);
  }
  check(`${era}: nothing was started`, bodyOf(await c.call('task_list', {})) === before);

  let res = await c.call('run_in_background', { command: 'printf "> "; exec cat', stdin: true, tty: null });
  const id = idOf(res);
  check(`${era}: a null tty is not given`, !res.isError && !!id, res);
  res = await c.call('write_stdin', { task_id: id, yield_ms: 20000 });
  check(`${era}: write_stdin without chars polls`, bodyOf(res) === '> \n[status: running]', res);
  const bad = [
    [{ chars: 5 }, 'write_stdin: chars must be a string ("" to only read output).'],
    [{ chars: ['x'] }, 'write_stdin: chars must be a string ("" to only read output).'],
    [{ chars: 'x', close_stdin: 'yes' }, 'write_stdin: close_stdin must be true or false.'],
    [{ chars: 'x', yield_ms: -1 }, 'write_stdin: yield_ms must be a whole number of milliseconds, at least 0.'],
    [{ chars: 'x', yield_ms: '250' }, 'write_stdin: yield_ms must be a whole number of milliseconds, at least 0.'],
    [{ chars: 'x', yield_ms: 2.5 }, 'write_stdin: yield_ms must be a whole number of milliseconds, at least 0.'],
    [{ chars: 'x', max_bytes: 0 }, 'write_stdin: max_bytes must be a whole number of bytes, at least 1.'],
    [{ task_id: 7, chars: 'x' }, 'write_stdin: task_id must be a string.'],
    [{ task_id: null, chars: 'x' }, 'write_stdin needs task_id (a string such as bash-1).'],
  ];
  for (const [a, text] of bad) {
    res = await c.call('write_stdin', { task_id: id, ...a });
    check(`${era}: write_stdin ${JSON.stringify(a)} is a tool error`,
      res.isError === true && bodyOf(res) === text, res);
  }
  // Nothing was written: cat has echoed nothing.
  res = await c.call('write_stdin', { task_id: id, chars: 'only this\n', close_stdin: true, yield_ms: 20000, max_bytes: null });
  check(`${era}: the refused calls wrote nothing`,
    bodyOf(res) === '> only this\n[status: completed, exit code: 0]', res);

  res = await c.call('run_in_background', { command: 'exec sleep 30' });
  const plain = idOf(res);
  res = await c.call('write_stdin', { task_id: plain, chars: 'x\n' });
  check(`${era}: a task started without stdin is a tool error that says how to start one`,
    res.isError === true && bodyOf(res) ===
      `${plain} does not take input: it was started without stdin or tty. To write to a command, start it with run_in_background and "stdin": true (or "tty": true).\n[status: running]`,
    res);
  res = await c.call('write_stdin', { task_id: plain, chars: '', yield_ms: 0 });
  check(`${era}: a task started without stdin can still be polled (M-TOOLS-5, M-TOOLS-6)`,
    res.isError !== true && bodyOf(res).endsWith('[status: running]'), res);
  res = await c.call('write_stdin', { task_id: 'bash-999', chars: 'x\n' });
  check(`${era}: an unknown task is a tool error`,
    res.isError === true && bodyOf(res) === 'No task bash-999. task_list shows the tasks you can see.', res);
  await c.call('task_kill', { task_id: plain });
}

let c;
try {
  for (const era of ['2025', '2026']) {
    c = await connect(era);
    const { tools } = await c.client.listTools();
    const ws = tools.find((t) => t.name === 'write_stdin');
    const rb = tools.find((t) => t.name === 'run_in_background');
    check(`${era}: tools/list has write_stdin, and run_in_background's stdin and tty (M-TOOLS-3)`,
      JSON.stringify(Object.keys(ws?.inputSchema?.properties || {})) ===
        '["task_id","chars","close_stdin","yield_ms","max_bytes"]' &&
        rb?.inputSchema?.properties?.stdin?.type === 'boolean' &&
        rb?.inputSchema?.properties?.tty?.type === 'boolean', { ws, rb });
    await replOnTerminal(c, era);
    if (era === '2025')
      await replOnPipe(c, era);
    await badArguments(c, era);
    await c.client.close();
    c = undefined;
  }
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (c) {
    console.log(`server stderr:\n${c.stderr()}`);
    try { await c.client.close(); } catch { /* closed */ }
  }
}
finish();
