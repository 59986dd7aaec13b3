// Issue 31's report list replayed as a model would, through the official
// v1 SDK client (and a host that decodes its pipe naively):
//   P-OUT-6     a `&` leftover writes on after its command returned and is
//               read from the ended task: stdout, stderr, a terminal, 10 MB
//               after the end, one that exits, one task_kill stops; a
//               Python http.server answering requests until task_kill
//   P-OUT-7     a run_command result past 64 KiB of 2-, 3- and 4-byte
//               characters in a host that decodes each 64 KiB piece alone
//   M-TOOLS-16  tail_lines and match on a build log
//   M-TOOLS-17  the spill file a result names is the output, line N = N
//   M-TOOLS-18  a Ctrl-C to an ended task says it ended
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node output-test.mjs
//
// Prints the `&` server's uptime after its command returned.  Exits 77
// (skip) when the SDK is not installed, 1 on any failed check.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { check, finish, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return !/^State:\s*Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
};

async function connect(args) {
  const transport = new StdioClientTransport({ command: server, args, stderr: 'pipe' });
  const client = new Client({ name: 'uvtasks-output-test', version: '1.0.0' });
  await client.connect(transport);
  return {
    call: async (name, a) => {
      const res = await client.callTool({ name, arguments: a }, undefined, { timeout: 120000 });
      return { text: bodyOf(textOf(res)), isError: !!res.isError };
    },
    close: () => client.close(),
  };
}

// Read task `id` (task_output, short waits) until `pred(all so far)` or
// `ms` pass; returns what was read, without status lines and notes.
async function readUntil(c, id, pred, ms = 20000, extra = {}) {
  const deadline = Date.now() + ms;
  let all = '';
  let last;
  for (;;) {
    last = await c.call('task_output', { task_id: id, timeout_ms: 200, ...extra });
    all += last.text.replace(/\n?\[status: [^\n]*\]$/, '')
      .replace(/\(waited \d+ ms; the task has not ended: wait again to wait longer\)\n?$/, '')
      .replace(/\(no new output\)\n?$/, '')
      .replace(/\(the whole output[^\n]*\)\n/g, '');
    if (pred(all, last.text) || Date.now() > deadline)
      return { all, last: last.text };
  }
}

const dir = mkdtempSync('/tmp/uvt-output-test-');
const c = await connect(['--grace-ms', '300', '--spill-dir', `${dir}/spill`]);
try {
  /* P-OUT-6: the command. */
  let r = await c.call('run_command', {
    command: '(while :; do echo tick; sleep 0.2; done) & echo pid=$!; sleep 0.5; echo fg-done',
  });
  const pid = Number((/pid=(\d+)/.exec(r.text) || [])[1]);
  const id = 'bash-1';
  check('P-OUT-6: run_command returns at once, the status line says the output is still read',
    r.text.includes('fg-done\n') &&
      /\[status: completed, exit code: 0; \d process(es)? still running \(their output is still read\); task_kill bash-1 stops (it|them)\]$/.test(r.text),
    r.text);
  let got = await readUntil(c, id, (all) => (all.match(/tick/g) || []).length >= 5);
  check('P-OUT-6: the loop writes on after the end (5 more ticks read from the ended task)',
    (got.all.match(/tick/g) || []).length >= 5 && alive(pid), got);
  r = await c.call('task_kill', { task_id: id });
  check('P-OUT-6: task_kill stops it', r.text.startsWith(`${id} had already ended; stopping the `), r.text);
  for (let i = 0; i < 200 && alive(pid); i++) await sleep(20);
  check('P-OUT-6: nothing lingers after the kill', !alive(pid), pid);
  r = await c.call('task_output', { task_id: id });
  check('P-OUT-6: the status line then says what it left has ended',
    /what it left running has ended/.test(r.text) && !r.text.includes('still read'), r.text);

  /* Siblings: stderr, a terminal, 10 MB after the end; each exits.  Each
   * leftover waits on a FIFO until the test, after run_command returned,
   * writes a line to it: its output comes after the task's end. */
  const mark = (n) => `${dir}/${n}`;
  const gate = (n) => {
    execFileSync('mkfifo', [mark(n)]);
    return mark(n);
  };
  const open = (n) => writeFileSync(mark(n), 'go\n'); // blocks until read
  r = await c.call('run_command', {
    command: `(read x < ${gate('g-err')}; for i in 1 2 3 4 5; do echo e$i >&2; done; touch ${mark('err-done')}) & echo up`,
  });
  open('g-err');
  got = await readUntil(c, 'bash-2', (all) => all.includes('e5'));
  for (let i = 0; i < 200 && !existsSync(mark('err-done')); i++) await sleep(20);
  check('P-OUT-6: a leftover writing to stderr is read and finishes (no SIGPIPE)',
    /\[stderr\]\n(.|\n)*e5/.test(got.all) && existsSync(mark('err-done')), got);
  got = await readUntil(c, 'bash-2', (all, last) => last.includes('has ended'), 10000);
  check('P-OUT-6: once it exited, the pipes are closed and the line says so',
    got.last.includes('what it left running has ended'), got.last);

  r = await c.call('run_in_background', {
    command: `trap '' HUP; (read x < ${gate('g-pty')}; for i in 1 2 3 4 5; do echo p$i; done; touch ${mark('pty-done')}) & echo up`,
    tty: true,
  });
  await readUntil(c, 'bash-3', (all, last) => last.includes('still read'));
  open('g-pty');
  got = await readUntil(c, 'bash-3', (all) => all.includes('p5'));
  check('P-OUT-6: a leftover on a terminal is read after the end',
    got.all.includes('p5') && (existsSync(mark('pty-done')) || (await sleep(500), existsSync(mark('pty-done')))), got);

  r = await c.call('run_command', {
    command: `(read x < ${gate('g-big')}; head -c 10000000 /dev/zero | tr '\\0' a; echo; echo end-marker; touch ${mark('big-done')}) & echo up`,
  });
  open('g-big');
  got = await readUntil(c, 'bash-4', (all) => all.includes('end-marker'), 60000, { tail_lines: 1 });
  check('P-OUT-6: 10 MB written after the end is read (bounded: the cap drops, the view says so)',
    got.all.includes('end-marker') && existsSync(mark('big-done')), got.all.slice(-300));
  const big = readFileSync(`${dir}/spill/bash-4.log`);
  check('P-OUT-6, M-TOOLS-17: the spill file has every byte written after the end',
    big.length === 3 + 10000000 + 1 + 11, big.length);

  /* The `&` server the users ask for: a Python http.server that logs each
   * request, started with run_command; it must answer until task_kill. */
  let port = 0;
  let srvPid = 0;
  let srvTask = '';
  let started = 0;
  for (let t = 0; t < 5 && !port; t++) {
    const p = 20000 + Math.floor(Math.random() * 30000);
    r = await c.call('run_command', {
      command: `python3 -m http.server ${p} --bind 127.0.0.1 & echo pid=$!; for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/${p}) 2>/dev/null && break; sleep 0.05; done; echo serving`,
    });
    const m = /task_kill (bash-\d+) stops/.exec(r.text);
    if (m && r.text.includes('serving')) {
      port = p;
      srvTask = m[1];
      srvPid = Number((/pid=(\d+)/.exec(r.text) || [])[1]);
      started = Date.now();
    }
  }
  let answered = 0;
  const asked = 6;
  for (let i = 0; port && i < asked; i++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(5000) });
      if (res.ok) answered++;
      await res.text();
    } catch {
      // not answered
    }
    await sleep(500);
  }
  const uptime = (Date.now() - started) / 1000;
  check(`P-OUT-6: the & http.server answered ${answered} of ${asked} requests over ${uptime.toFixed(1)} s after its command returned`,
    port !== 0 && answered === asked && alive(srvPid), { port, answered, srvPid, r: r.text.slice(-300) });
  got = port ? await readUntil(c, srvTask, (all) => (all.match(/"GET \/ HTTP/g) || []).length >= asked, 10000)
    : { all: '' };
  check('P-OUT-6: its request log is read from the ended task',
    (got.all.match(/"GET \/ HTTP/g) || []).length >= asked, got.all.slice(-400));
  r = await c.call('task_kill', { task_id: srvTask });
  for (let i = 0; i < 200 && alive(srvPid); i++) await sleep(20);
  const killedAt = (Date.now() - started) / 1000;
  check('P-OUT-6: task_kill ends the server', srvPid > 0 && !alive(srvPid), r.text);
  console.log(`note: the & server's uptime after its command returned: ${killedAt.toFixed(1)} s, until task_kill (${answered}/${asked} requests answered)`);

  /* M-TOOLS-16, M-TOOLS-17: a build log, its tail, its errors. */
  r = await c.call('run_command', {
    command: 'for i in $(seq 1 3000); do echo "cc -c file$i.c"; [ $i = 1234 ] && echo "file1234.c:7: error: boom"; done; echo "BUILD FAILED"',
    tail_lines: 3,
  });
  check('M-TOOLS-16: tail_lines 3 shows the end of a build',
    r.text.startsWith('[... 2999 lines left out ...]\ncc -c file2999.c\ncc -c file3000.c\nBUILD FAILED\n'), r.text.slice(0, 300));
  const spillName = (/\(the whole output is in ([^:]+):/.exec(r.text) || [])[1];
  check('M-TOOLS-17: the result names the file holding all of it',
    !!spillName && readFileSync(spillName, 'utf8').split('\n')[1234] === 'file1234.c:7: error: boom', spillName);
  r = await c.call('run_command', {
    command: 'for i in $(seq 1 3000); do echo "cc -c file$i.c"; [ $i = 1234 ] && echo "file1234.c:7: error: boom"; done; echo "BUILD FAILED"',
    match: 'error|FAILED',
  });
  check('M-TOOLS-16: match shows the error lines with their numbers',
    r.text.startsWith('1235: file1234.c:7: error: boom\n3002: BUILD FAILED\n[2 of 3002 lines match]\n'), r.text.slice(0, 300));

  /* M-TOOLS-18: Ctrl-C to an ended task. */
  r = await c.call('write_stdin', { task_id: 'bash-2', chars: '\u0003' });
  check('M-TOOLS-18: a Ctrl-C to an ended task says it ended (no restart advice)',
    r.isError && r.text.startsWith('Nothing was sent: bash-2 has ended, so it takes no more input and there is nothing to interrupt.') &&
      !r.text.includes('"stdin": true'), r.text);
} finally {
  await c.close();
}

/* P-OUT-6 with M-MCP-11: retention does not forget a task whose output a
 * process that left the session (setsid) still writes: forgetting it
 * would close the pipe, and the process would die of SIGPIPE. */
{
  const k = await connect(['--keep-finished', '1', '--no-spill']);
  let daemon = 0;
  try {
    let r = await k.call('run_command', {
      command: 'setsid sh -c \'while :; do echo d; sleep 0.2; done\' & echo pid=$!',
    });
    daemon = Number((/pid=(\d+)/.exec(r.text) || [])[1]);
    // With S-11 (cgroups by default, or descent) the setsid process is
    // still the task's, a leftover; without, it left: either way the task
    // says its output is still read.
    check('P-OUT-6: a holder that left the session: the task is still read',
      /(its output, which is still read; task_kill bash-1 closes it|\(their output is still read\); task_kill bash-1 stops (it|them))\]$/.test(r.text), r.text);
    for (let i = 0; i < 3; i++) await k.call('run_command', { command: 'echo other' });
    r = await k.call('task_list', {});
    const got = await readUntil(k, 'bash-1', (all) => (all.match(/d/g) || []).length >= 2, 5000);
    check('P-OUT-6: retention keeps it (--keep-finished 1), and its writer lives',
      r.text.includes('bash-1  bash  completed') && alive(daemon) && (got.all.match(/d/g) || []).length >= 2,
      { list: r.text, alive: alive(daemon), got });
  } finally {
    if (daemon > 0) process.kill(daemon, 'SIGKILL');
    await k.close();
  }
}

/* P-OUT-7: a host that decodes each piece of the pipe on its own (Node's
 * `data` events, buf += chunk) gets whole characters past 64 KiB. */
async function naive(ch) {
  const child = spawn(server, ['--no-spill'], { stdio: ['pipe', 'pipe', 'ignore'] });
  let buf = '';
  const waiting = new Map();
  child.stdout.on('data', (d) => {
    buf += d; // each Buffer decoded alone: what the reported host did
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const m = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (waiting.has(m.id)) waiting.get(m.id)(m);
    }
  });
  let n = 0;
  const req = (method, params) => new Promise((res) => {
    const id = ++n;
    waiting.set(id, res);
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  });
  await req('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'naive', version: '1' } });
  const m = await req('tools/call', {
    name: 'run_command',
    arguments: { command: `python3 -c "import sys; sys.stdout.write('${ch}'*30000)"`, max_bytes: 200000 },
  });
  child.stdin.end();
  const t = m.result.content[0].text;
  return { chars: [...t].filter((x) => x === ch).length, bad: [...t].filter((x) => x === '\ufffd').length };
}
for (const ch of ['é', '你', '😀']) {
  const got = await naive(ch);
  check(`P-OUT-7: ${Buffer.byteLength(ch)}-byte characters past 64 KiB reach a naive host whole`,
    got.chars === 30000 && got.bad === 0, got);
}
rmSync(dir, { recursive: true, force: true });
finish();
