// The tool surface's v2 behaviour through uvtasks-mcp, driven by the
// official v1 SDK client with its default request options: promotion at
// the yield (M-TOOLS-6, C-32 with a short --yield-ms), text for a model
// (M-TOOLS-7, C-36), the result size (M-TOOLS-8, C-35), the per-call
// yield_ms and max_bytes arguments (M-MCP-3: bad values are tool errors),
// and NUL bytes in output (M-MCP-8: they travel as \u0000).
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node tools-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { check, fail, finish, readUntil, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
const { LoggingMessageNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
// Everything after the notices a result may begin with (M-MCP-2).
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');
const idOf = (text) => (/Started (bash-\d+)\./.exec(text) || [])[1];
const goesOnRe = /\(still running after \d+ ms; it goes on in the background as (bash-\d+): task_output reads more of its output, task_kill stops it; its limit of \d+ ms still applies\)\n\[status: running\]$/;
const cutRe = /^\[\.\.\. (\d+) bytes \((\d+) lines?\) left out \.\.\.\]$/;
const bytes = (s) => Buffer.byteLength(s, 'utf8');

async function until(cond, ms = 10000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !cond())
    await sleep(25);
  return cond();
}

// A client of a server started with `args`; every tool result is kept, so
// a notice can be counted wherever it was prepended.
async function connect(args) {
  const transport = new StdioClientTransport({ command: server, args, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'uvtasks-tools-test', version: '1.0.0' });
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  await client.connect(transport);
  const results = [];
  // Default request options on purpose: the SDK's 60 s timeout.
  const call = async (name, args2) => {
    const res = await client.callTool({ name, arguments: args2 });
    results.push(textOf(res));
    return res;
  };
  const noticesOf = (id) => ({
    logs: logs.filter((l) => String(l.data).startsWith(`Task ${id} `)).length,
    prefixed: results.filter((t) => t.includes(`[notice] Task ${id} `)).length,
  });
  return { client, call, logs, noticesOf, stderr: () => stderr };
}

// The output part of a result body (before its status line), split at the
// one "[... N bytes (L lines) left out ...]" line it must hold; checks it
// against the whole output `full`.
function checkCut(name, body, full, maxBytes, status) {
  const ok = body.endsWith(status);
  const out = body.slice(0, body.length - status.length);
  const lines = out.split('\n');
  const marks = lines.map((l, i) => [i, cutRe.exec(l)]).filter(([, m]) => m);
  if (!ok || marks.length !== 1) {
    check(`${name}: one cut line, then the status line`, false, body.slice(-300));
    return;
  }
  const [i, m] = marks[0];
  const head = lines.slice(0, i).join('\n') + '\n';
  const tail = lines.slice(i + 1).join('\n');
  let nl = 0;
  for (const c of full.slice(head.length, full.length - tail.length)) nl += c === '\n';
  check(`${name}: at most ${maxBytes} bytes of output (${bytes(out)})`, bytes(out) <= maxBytes, bytes(out));
  check(`${name}: the head is the output's beginning, the tail its end`,
    full.startsWith(head) && full.endsWith(tail) && tail.length > 0, { head: head.slice(0, 80), tail: tail.slice(-80) });
  check(`${name}: the cut line counts every byte and line left out`,
    head.length + Number(m[1]) + tail.length === full.length && Number(m[2]) === nl,
    { counted: m[0], head: head.length, tail: tail.length, full: full.length, nl });
}

let a;
let b;
try {
  // ------------------------------------------------------------------
  // A server with a short yield: C-32's promotion without waiting 45 s.
  a = await connect(['--grace-ms', '300', '--yield-ms', '600', '--no-spill']);

  /* C-32, M-TOOLS-6: a default-options client; the command outlives the
   * server's yield, so the call answers with the output so far and the
   * command goes on as a background task; its end is a notice, once, and
   * task_output then shows the rest. */
  let res = await a.call('run_command', { command: 'echo started; sleep 3; echo done' });
  let body = bodyOf(textOf(res));
  const p1 = (goesOnRe.exec(body) || [])[1];
  // "started" is in the answer, or (on a machine slower than the 600 ms
  // yield to run the command's echo) in task_output's below.
  const started = body.startsWith('started\n') ? 'started\n' : '';
  check('C-32: run_command answers at the yield: output so far, the "goes on as bash-N" line, [status: running]',
    !res.isError && !!p1 && (started !== '' || /^\(still running/.test(body)), res);
  check('C-32: the command goes on (task_list shows it running)',
    (await a.call('task_list', {})).content[0].text.includes(`${p1}  bash  running`), a.logs);
  check('C-32: its end produces a notice',
    await until(() => a.noticesOf(p1).logs > 0, 15000) &&
      a.logs.some((l) => l.data === `Task ${p1} (bash: echo started; sleep 3; echo done) ended; task_output shows its output. [status: completed, exit code: 0]`),
    a.logs);
  res = await a.call('task_output', { task_id: p1 });
  check('C-32: task_output then shows "done" and the end',
    started + bodyOf(textOf(res)) === 'started\ndone\n[status: completed, exit code: 0]', res);
  res = await a.call('task_list', {});
  // M-TOOLS-18: not as a [notice] line of the task_output that showed the
  // end itself.
  check('C-32: the notice arrives once (one log message, no [notice] line on the read of its end)',
    JSON.stringify(a.noticesOf(p1)) === '{"logs":1,"prefixed":0}', a.noticesOf(p1));

  /* C-32's siblings: a promoted command that fails, and one whose
   * timeout_ms (its runtime limit) ends it after the yield. */
  res = await a.call('run_command', { command: 'sleep 1.5; echo oops >&2; exit 7' });
  const p2 = (goesOnRe.exec(bodyOf(textOf(res))) || [])[1];
  check('C-32 sibling: a failing command is promoted too (no output yet)', !!p2 && !res.isError &&
    /^\(still running/.test(bodyOf(textOf(res))), res);
  res = await a.call('run_command', { command: 'exec sleep 30', timeout_ms: 1500 });
  const p3 = (goesOnRe.exec(bodyOf(textOf(res))) || [])[1];
  check('C-32 sibling: a command with a runtime limit is promoted', !!p3, res);
  await until(() => a.noticesOf(p2).logs > 0 && a.noticesOf(p3).logs > 0, 15000);
  check('C-32 sibling: the failing command\'s notice names its exit code',
    a.logs.some((l) => String(l.data).startsWith(`Task ${p2} `) && String(l.data).endsWith('[status: completed, exit code: 7]')),
    a.logs);
  check('C-32 sibling: its timeout_ms still stops the promoted command',
    a.logs.some((l) => String(l.data).startsWith(`Task ${p3} `) && /\[status: killed, timed out after \d+ ms\]$/.test(String(l.data))),
    a.logs);
  res = await a.call('task_output', { task_id: p2 });
  check('C-32 sibling: task_output shows its stderr and the end',
    bodyOf(textOf(res)) === '[stderr]\noops\n[status: completed, exit code: 7]', res);
  // A promoted command stopped with task_kill: its end was seen, no notice.
  res = await a.call('run_command', { command: 'exec sleep 30' });
  const p4 = (goesOnRe.exec(bodyOf(textOf(res))) || [])[1];
  res = await a.call('task_kill', { task_id: p4 });
  check('C-32 sibling: task_kill stops a promoted command', !!p4 && textOf(res).includes(`Stop of ${p4} requested`), res);
  res = await a.call('task_output', { task_id: p4, wait: true, timeout_ms: 10000 });
  check('C-32 sibling: it ends killed, and no notice comes for it',
    bodyOf(textOf(res)).endsWith('[status: killed, signal: SIGTERM]') && a.noticesOf(p4).logs === 0, res);

  /* M-TOOLS-6 through MCP: a per-call yield_ms of 0 runs to the end
   * whatever --yield-ms says. */
  res = await a.call('run_command', { command: 'sleep 1.2; echo end', yield_ms: 0 });
  check('yield_ms 0: the call answers at the end despite --yield-ms 600',
    bodyOf(textOf(res)) === 'end\n[status: completed, exit code: 0]' && !res.isError, res);

  /* M-MCP-3: bad yield_ms and max_bytes values are tool errors, found
   * before anything starts or is read. */
  const before = textOf(await a.call('task_list', {}));
  for (const [v, what] of [[-1, 'negative'], ['300', 'a string'], [1.5, 'a fraction'], [true, 'a boolean'], [{}, 'an object']]) {
    res = await a.call('run_command', { command: 'echo should not run', yield_ms: v });
    check(`yield_ms ${what} is a tool error`, res.isError === true &&
      textOf(res).includes('run_command: yield_ms must be a whole number of milliseconds, at least 0.'), res);
  }
  for (const [v, what] of [[0, 'zero'], [-5, 'negative'], ['many', 'a string'], [2.5, 'a fraction'], [false, 'a boolean']]) {
    res = await a.call('run_command', { command: 'echo should not run', max_bytes: v });
    check(`run_command max_bytes ${what} is a tool error`, res.isError === true &&
      textOf(res).includes('run_command: max_bytes must be a whole number of bytes, at least 1.'), res);
  }
  res = await a.call('task_list', {});
  check('bad arguments started nothing', bodyOf(textOf(res)) === bodyOf(before), { before, after: textOf(res) });
  res = await a.call('run_in_background', { command: 'echo kept; echo too' });
  const k1 = idOf(textOf(res));
  await until(() => a.noticesOf(k1).logs > 0);
  for (const v of [0, 'x', -1]) {
    res = await a.call('task_output', { task_id: k1, max_bytes: v });
    check(`task_output max_bytes ${JSON.stringify(v)} is a tool error`, res.isError === true &&
      textOf(res).includes('task_output: max_bytes must be a whole number of bytes, at least 1.'), res);
  }
  res = await a.call('task_output', { task_id: k1 });
  check('a refused task_output consumed nothing',
    bodyOf(textOf(res)) === 'kept\ntoo\n[status: completed, exit code: 0]', res);
  // The default yield (600 ms here) either sees the end or promotes the
  // command (a busy machine); task_output then reads the rest.
  res = await a.call('run_command', { command: 'echo null args', yield_ms: null, max_bytes: null });
  let nullArgs = bodyOf(textOf(res));
  const pn = (goesOnRe.exec(nullArgs) || [])[1];
  if (pn) {
    const rest = bodyOf(textOf(await a.call('task_output', { task_id: pn, wait: true, timeout_ms: 20000 })));
    nullArgs = nullArgs.replace(goesOnRe, '') + rest.replace(/^\(no new output\)\n/, '');
  }
  check('null yield_ms and max_bytes mean "not given"',
    !res.isError && nullArgs === 'null args\n[status: completed, exit code: 0]', { res, nullArgs });

  /* M-TOOLS-8 through MCP: per-call max_bytes, on run_command and on
   * task_output; 1 is raised to the least the tools use (256).  The
   * run_command ones pass yield_ms 0: they want the whole output, which
   * the 600 ms yield need not see on a busy machine. */
  let full = '';
  for (let i = 1; i <= 2000; i++) full += `${i}\n`;
  res = await a.call('run_command', { command: 'seq 1 2000', max_bytes: 1000, yield_ms: 0 });
  checkCut('run_command max_bytes 1000', bodyOf(textOf(res)), full, 1000, '[status: completed, exit code: 0]');
  res = await a.call('run_command', { command: 'seq 1 2000', max_bytes: 1, yield_ms: 0 });
  checkCut('run_command max_bytes 1 (raised to 256)', bodyOf(textOf(res)), full, 256, '[status: completed, exit code: 0]');
  res = await a.call('run_in_background', { command: 'seq 1 2000' });
  const s1 = idOf(textOf(res));
  res = await a.call('task_output', { task_id: s1, wait: true, timeout_ms: 20000, max_bytes: 3000 });
  checkCut('task_output max_bytes 3000', bodyOf(textOf(res)), full, 3000, '[status: completed, exit code: 0]');
  res = await a.call('run_command', { command: 'seq 1 2000', max_bytes: 100000, yield_ms: 0 });
  check('a max_bytes above the output shows all of it',
    bodyOf(textOf(res)) === `${full}[status: completed, exit code: 0]`, textOf(res).slice(-200));

  /* C-35 (M-TOOLS-8): a 6000-line test log read with task_output and wait:
   * at most 30 000 bytes of output (the default), the first lines, the
   * last ones, and one line naming the bytes left out. */
  const c35line = 'ok .......................................';
  let log = '';
  for (let i = 1; i <= 6000; i++) log += `test ${i} ${c35line}\n`;
  res = await a.call('run_in_background', {
    command: `for i in $(seq 1 6000); do echo "test $i ${c35line}"; done`,
  });
  const l1 = idOf(textOf(res));
  res = await a.call('task_output', { task_id: l1, wait: true });
  body = bodyOf(textOf(res));
  check('C-35: the result starts with the first lines', body.startsWith(`test 1 ${c35line}\ntest 2 ${c35line}\n`), body.slice(0, 200));
  check('C-35: and ends with the last ones, then the status line',
    body.endsWith(`test 5999 ${c35line}\ntest 6000 ${c35line}\n[status: completed, exit code: 0]`), body.slice(-200));
  checkCut('C-35', body, log, 30000, '[status: completed, exit code: 0]');
  // Sibling: the same log through run_command.
  res = await a.call('run_command', {
    command: `for i in $(seq 1 6000); do echo "test $i ${c35line}"; done`, yield_ms: 0,
  });
  checkCut('C-35 through run_command', bodyOf(textOf(res)), log, 30000, '[status: completed, exit code: 0]');

  /* C-36 (M-TOOLS-7): a 500-frame progress bar through run_command: no
   * ESC, no carriage return, its last state and what follows. */
  const c36 = "for i in $(seq 1 500); do printf '\\r[%3d%%] \\033[32mbuilding\\033[0m' $((i/5)); done; echo; echo built";
  res = await a.call('run_command', { command: c36, yield_ms: 0 });
  let text = textOf(res);
  check('C-36: no ESC byte and no \\r in the result', !text.includes('\x1b') && !text.includes('\r'), text.slice(0, 300));
  check('C-36: the bar\'s last state, then "built"',
    bodyOf(text) === '[100%] building\nbuilt\n[status: completed, exit code: 0]', text.slice(0, 300));
  // Siblings: the bar on stderr, and a bar read from a background task
  // while it is drawn (the filter's state carries between reads).
  res = await a.call('run_command', { command: `(${c36}) >&2`, yield_ms: 0 });
  text = textOf(res);
  check('C-36 sibling: a bar on stderr is filtered the same way',
    bodyOf(text) === '[stderr]\n[100%] building\nbuilt\n[status: completed, exit code: 0]', text.slice(0, 300));
  res = await a.call('run_in_background', {
    command: "for i in 1 2 3 4 5 6; do printf '\\r\\033[1m%d/6\\033[0m' $i; sleep 0.2; done; echo; echo built",
  });
  const b1 = idOf(textOf(res));
  const parts = [];
  for (let i = 0; i < 50; i++) {
    res = await a.call('task_output', { task_id: b1, timeout_ms: 150 });
    parts.push(bodyOf(textOf(res)));
    if (textOf(res).endsWith('[status: completed, exit code: 0]'))
      break;
  }
  check('C-36 sibling: reads during the redraw show no ESC or \\r, and the end shows 6/6 and built',
    // "built" may come with the read before the one that sees the end (the
    // leader exited, its pipes' end not yet taken): the reads together.
    parts.every((p) => !p.includes('\x1b') && !p.includes('\r')) &&
      parts.at(-1).endsWith('[status: completed, exit code: 0]') &&
      /built\n(\(waited \d+ ms; the task has not ended: wait again to wait longer\)\n\[status: running\](\(no new output\)\n)?)?(\(no new output\)\n)?\[status: completed, exit code: 0\]$/.test(parts.join('')) &&
      parts.join('').includes('6/6'), parts);

  /* M-MCP-8: NUL bytes in output travel as \u0000 (the SDK parses them
   * into the text), through run_command, task_output (stdout and stderr),
   * the terminal filter and a cut result. */
  res = await a.call('run_command', { command: "printf 'a\\000b\\n'", yield_ms: 0 });
  check('M-MCP-8: a NUL in run_command output arrives as U+0000',
    bodyOf(textOf(res)) === 'a\u0000b\n[status: completed, exit code: 0]', res);
  res = await a.call('run_command', { command: "printf '\\033[31mred\\000\\033[0m\\n'", yield_ms: 0 });
  check('M-MCP-8: a NUL among escape sequences is kept, the sequences go',
    bodyOf(textOf(res)) === 'red\u0000\n[status: completed, exit code: 0]', res);
  res = await a.call('run_in_background', { command: "printf 'bin\\000ary\\n'; printf '\\000\\000' >&2" });
  const n1 = idOf(textOf(res));
  res = await a.call('task_output', { task_id: n1, wait: true, timeout_ms: 10000 });
  check('M-MCP-8: NULs on stdout and stderr through task_output',
    bodyOf(textOf(res)) === 'bin\u0000ary\n[stderr]\n\u0000\u0000\n[status: completed, exit code: 0]', res);
  let rows = '';
  for (let i = 1; i <= 300; i++) rows += `row ${i} \u0000\u0000\n`;
  res = await a.call('run_command', {
    command: "for i in $(seq 1 300); do printf 'row %d \\000\\000\\n' $i; done", max_bytes: 500, yield_ms: 0,
  });
  checkCut('M-MCP-8: NULs in a cut result', bodyOf(textOf(res)), rows, 500, '[status: completed, exit code: 0]');

  await a.client.close();
  a = undefined;

  // ------------------------------------------------------------------
  // A server that never yields by default: a per-call yield_ms promotes.
  b = await connect(['--grace-ms', '300', '--yield-ms', '0', '--max-bytes', '2000', '--no-spill']);
  res = await b.call('run_command', { command: 'echo early; exec sleep 30', yield_ms: 300 });
  body = bodyOf(textOf(res));
  const y1 = (goesOnRe.exec(body) || [])[1];
  // "early" is in the answer, or (on a machine slow to run the command)
  // in the next reads.
  const early = body.startsWith('early\n') ||
    (!!y1 && (await readUntil(b.call, y1, (out) => out.length > 0)).out.startsWith('early\n'));
  check('M-TOOLS-6: a per-call yield_ms promotes under --yield-ms 0',
    !res.isError && early && !!y1, res);
  res = await b.call('task_kill', { task_id: y1 });
  check('and the promoted command is a task task_kill stops', textOf(res).includes(`Stop of ${y1} requested`), res);
  /* M-TOOLS-8: --max-bytes sets the default a call may override. */
  res = await b.call('run_command', { command: 'seq 1 2000' });
  checkCut('--max-bytes 2000', bodyOf(textOf(res)), full, 2000, '[status: completed, exit code: 0]');
  res = await b.call('run_command', { command: 'seq 1 2000', max_bytes: 9000 });
  check('a per-call max_bytes overrides --max-bytes',
    bodyOf(textOf(res)) === `${full}[status: completed, exit code: 0]`, textOf(res).slice(-200));
  await b.client.close();
  b = undefined;
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  for (const c of [a, b])
    if (c) {
      console.log(`server stderr:\n${c.stderr()}`);
      try { await c.client.close(); } catch { /* closed */ }
    }
}
finish();
