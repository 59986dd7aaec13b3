// What models ask for, through uvtasks-mcp, the same checks three ways:
// the official v1 SDK client (2025 era), the v2 client pinned to
// 2026-07-28, and raw JSON-RPC lines (2025-03-26 through initialize).
//   M-TOOLS-15  results that survive every host's own cut, the true
//               beginning past the cap, unknown host arguments ignored
//   M-TOOLS-9   task_wait any/all with one fast and one slow task
//   M-TOOLS-12  merge_stderr: both streams in the order written
//   M-TOOLS-13  run_command's stdin text, then end of file
//   M-TOOLS-17  --spill-dir: the raw output once, per stream; the ranges
//               a result names; a view past the cap (M-TOOLS-16)
//   M-TOOLS-11  task_screen of a full-screen program, and its screen in
//               write_stdin's and task_output's results
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node hosts-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { check, fail, finish, server } from './harness.mjs';

const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');
const bytes = (s) => Buffer.byteLength(s, 'utf8');
const statusRe = /\n\[status: [^\n]*\]$/;

// A client: { name, call(tool, args) -> { text, isError }, close() }.
async function v1Client(args) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const transport = new StdioClientTransport({ command: server, args, stderr: 'pipe' });
  const client = new Client({ name: 'uvtasks-hosts-v1', version: '1.0.0' });
  await client.connect(transport);
  return {
    name: 'v1',
    call: async (name, a) => {
      const res = await client.callTool({ name, arguments: a }, undefined, { timeout: 120000 });
      return { text: bodyOf(textOf(res)), isError: !!res.isError };
    },
    close: () => client.close(),
  };
}

async function v2Client(args) {
  if (!existsSync(new URL('./node_modules/@modelcontextprotocol/client', import.meta.url)))
    return null;
  const { Client } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const transport = new StdioClientTransport({ command: server, args, stderr: 'pipe' });
  const client = new Client({ name: 'uvtasks-hosts-v2', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(transport);
  return {
    name: 'v2',
    call: async (name, a) => {
      const res = await client.callTool({ name, arguments: a }, { timeout: 120000 });
      return { text: bodyOf(textOf(res)), isError: !!res.isError };
    },
    close: () => client.close(),
  };
}

// Raw JSON-RPC, one message per line, the 2025-03-26 revision.
async function rawClient(args) {
  const child = spawn(server, args, { stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map();
  let buf = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      const msg = JSON.parse(line);
      if (msg.id !== undefined && waiting.has(msg.id)) {
        waiting.get(msg.id)(msg);
        waiting.delete(msg.id);
      }
    }
  });
  let next = 1;
  const request = (method, params) => new Promise((resolve) => {
    const id = next++;
    waiting.set(id, resolve);
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  });
  const init = await request('initialize', {
    protocolVersion: '2025-03-26', capabilities: {},
    clientInfo: { name: 'uvtasks-hosts-raw', version: '1.0.0' },
  });
  if (init.result?.protocolVersion !== '2025-03-26')
    fail(`raw: initialize answered ${JSON.stringify(init)}`);
  child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  return {
    name: 'raw',
    request,
    call: async (name, a) => {
      const msg = await request('tools/call', { name, arguments: a });
      if (msg.error)
        return { text: `JSON-RPC error ${JSON.stringify(msg.error)}`, isError: true };
      return { text: bodyOf(textOf(msg.result)), isError: !!msg.result.isError };
    },
    close: () => new Promise((resolve) => { child.on('exit', resolve); child.stdin.end(); }),
  };
}

// The output of a result (before its status line) and its line count.
function split(text) {
  const m = statusRe.exec(text);
  const out = m ? text.slice(0, m.index + 1) : text;
  return { out, status: m ? m[0].slice(1) : null, lines: out.split('\n').length - 1 };
}

function seqText(n) {
  let s = '';
  for (let i = 1; i <= n; i++) s += `${i}\n`;
  return s;
}

/* M-TOOLS-15 */
async function resultsFitHosts(c) {
  const n = c.name;
  // opencode keeps 2,000 lines, Codex about 12 KB: 5,000 lines of seq.
  let r = await c.call('run_command', { command: 'seq 1 5000' });
  let s = split(r.text);
  check(`${n} M-TOOLS-15: seq 1 5000 keeps its status line`,
    !r.isError && s.status === '[status: completed, exit code: 0]', r.text.slice(-200));
  check(`${n} M-TOOLS-15: at most 10000 bytes and 1000 lines (${bytes(s.out)} bytes, ${s.lines} lines)`,
    bytes(s.out) <= 10000 && s.lines <= 1000, s.lines);
  check(`${n} M-TOOLS-15: its beginning, one cut line, its end`,
    s.out.startsWith('1\n2\n3\n') && s.out.endsWith('\n4999\n5000\n') &&
      (s.out.match(/^\[\.\.\. \d+ bytes \(\d+ lines\) left out \.\.\.\]$/mg) || []).length === 1,
    s.out.slice(0, 100));
  // The whole text a host gets: status line within its first 2,000 lines
  // and 12 KB.
  check(`${n} M-TOOLS-15: the whole result fits opencode's and Codex's cuts`,
    r.text.split('\n').length < 2000 && bytes(r.text) < 12000, bytes(r.text));

  // About 15 MB: far past the 1 MiB cap.
  const total = bytes(seqText(2000000));
  r = await c.call('run_command', { command: 'seq 1 2000000', wait_for_previous: true });
  s = split(r.text);
  const m = /^\[\.\.\. (\d+) bytes \((\d+) lines\) left out, and (\d+) bytes dropped at the output cap \.\.\.\]$/m.exec(s.out);
  check(`${n} M-TOOLS-15: a 15 MB run_command keeps its status line`,
    !r.isError && s.status === '[status: completed, exit code: 0]', r.text.slice(-200));
  check(`${n} M-TOOLS-15: its true beginning and its end`,
    s.out.startsWith('1\n2\n3\n4\n5\n') && s.out.endsWith('\n1999999\n2000000\n'), s.out.slice(0, 60));
  if (m) {
    const head = bytes(s.out.slice(0, m.index));
    const tail = bytes(s.out.slice(m.index + m[0].length + 1));
    check(`${n} M-TOOLS-15: shown + left out + dropped = the whole ${total} bytes`,
      head + Number(m[1]) + Number(m[3]) + tail === total, { head, m: m[0], tail });
  } else {
    fail(`${n} M-TOOLS-15: one cut line naming the dropped bytes: ${s.out.slice(0, 400)}`);
  }
  // Gemini CLI's extra argument (above) is ignored on every tool.
  r = await c.call('task_list', { wait_for_previous: true });
  check(`${n} M-TOOLS-15: task_list with wait_for_previous works`, !r.isError, r.text);
}

const idOf = (text) => (/Started (bash-\d+)\./.exec(text) || [])[1];

/* M-TOOLS-9 */
async function taskWait(c) {
  const n = c.name;
  const fast = idOf((await c.call('run_in_background', { command: 'echo fast-done' })).text);
  const slow = idOf((await c.call('run_in_background',
    { command: 'echo slow-start; cat >/dev/null; echo slow-done', stdin: true })).text);
  let r = await c.call('task_wait', { task_ids: [fast, slow], mode: 'any' });
  check(`${n} M-TOOLS-9: any answers at the fast task's end, the slow one running`,
    !r.isError && r.text === `1 of 2 tasks ended.\n--- ${fast} ---\nfast-done\n` +
      `[status: completed, exit code: 0]\n--- ${slow} ---\n[status: running]`, r.text);
  r = await c.call('task_wait', { task_ids: [slow], mode: 'all', timeout_ms: 200 });
  check(`${n} M-TOOLS-9: a wait that runs out is no error and shows the status`,
    !r.isError && /^0 of 1 task ended \(waited \d+ ms for all: wait again to wait longer\)\.\n/.test(r.text) &&
      r.text.endsWith('[status: running]'), r.text);
  // write_stdin reads what is new (slow-start, if printed by now).
  const w = await c.call('write_stdin', { task_id: slow, close_stdin: true, yield_ms: 0 });
  r = await c.call('task_wait', { task_ids: [fast, slow], mode: 'all' });
  check(`${n} M-TOOLS-9: all answers at the slow task's end with its unread output`,
    !r.isError && r.text.startsWith('2 of 2 tasks ended.\n') &&
      r.text.endsWith(`slow-done\n[status: completed, exit code: 0]`) &&
      (w.text + r.text).includes('slow-start\n'), r.text);
  r = await c.call('task_wait', { task_ids: [] });
  check(`${n} M-TOOLS-9: an empty task_ids is a tool error`, r.isError, r.text);
  r = await c.call('task_wait', { task_ids: [fast, 'bash-999'] });
  check(`${n} M-TOOLS-9: an unknown id is a tool error`, r.isError && /No task bash-999/.test(r.text), r.text);
}

/* M-TOOLS-12, M-TOOLS-13 */
async function streamsAndStdin(c) {
  const n = c.name;
  let want = '';
  for (let i = 1; i <= 100; i++) want += `o${i}\ne${i}\n`;
  const cmd = 'for i in $(seq 1 100); do echo o$i; echo e$i >&2; done';
  let r = await c.call('run_command', { command: cmd, merge_stderr: true });
  check(`${n} M-TOOLS-12: run_command merge_stderr keeps the order written`,
    !r.isError && r.text === want + '[status: completed, exit code: 0]', r.text.slice(0, 200));
  r = await c.call('run_command', { command: 'echo a; echo b >&2; echo c' });
  check(`${n} M-TOOLS-12: without it the streams stay apart`,
    r.text === 'a\nc\n[stderr]\nb\n[status: completed, exit code: 0]', r.text);
  const id = idOf((await c.call('run_in_background', { command: cmd, merge_stderr: true })).text);
  r = await c.call('task_output', { task_id: id, wait: true });
  check(`${n} M-TOOLS-12: run_in_background merge_stderr too`,
    r.text === want + '[status: completed, exit code: 0]', r.text.slice(0, 200));
  r = await c.call('run_command', { command: 'merge_stderr', merge_stderr: 'yes' });
  check(`${n} M-TOOLS-12: a merge_stderr that is no boolean is a tool error`, r.isError, r.text);

  r = await c.call('run_command', { command: 'cat; echo END', stdin: 'Title\n\nBody ünïcode\n' });
  check(`${n} M-TOOLS-13: stdin text, then end of file`,
    !r.isError && r.text === 'Title\n\nBody ünïcode\nEND\n[status: completed, exit code: 0]', r.text);
  r = await c.call('run_command', { command: 'wc -c', stdin: 'a\u0000b' });
  check(`${n} M-TOOLS-13: NUL bytes in stdin arrive`, r.text === '3\n[status: completed, exit code: 0]', r.text);
  r = await c.call('run_command', { command: 'cat', stdin: 5 });
  check(`${n} M-TOOLS-13: a stdin that is no string is a tool error`, r.isError, r.text);
}

/* M-TOOLS-11 */
async function screen(c) {
  const n = c.name;
  const prog = "printf '\\033[?1049h\\033[H\\033[2J'; printf '\\033[5;10HHELLO'; " +
    "printf '\\033[10;1Hbottom line'; printf '\\033[3;4H'; read x; " +
    "printf '\\033[?1049l'; echo left with $x";
  const id = idOf((await c.call('run_in_background', { command: prog, tty: true })).text);
  let r;
  for (let i = 0; i < 200; i++) {
    r = await c.call('write_stdin', { task_id: id, yield_ms: 100 });
    if (r.text.includes('bottom line')) break;
  }
  check(`${n} M-TOOLS-11: write_stdin shows the alternate screen, not the transcript`,
    r.text.startsWith('[screen 80x24, alternate screen, cursor at row 3, column 4;') &&
      !r.text.includes('\u001b'), r.text);
  r = await c.call('task_screen', { task_id: id });
  const rows = r.text.split('\n').slice(1);
  check(`${n} M-TOOLS-11: task_screen: HELLO at row 5, column 10; the cursor; the flag`,
    !r.isError && r.text.startsWith('[screen 80x24, alternate screen, cursor at row 3, column 4;') &&
      rows[4] === '         HELLO' && rows[9] === 'bottom line' && rows[10] === '[status: running]', r.text);
  r = await c.call('task_output', { task_id: id });
  check(`${n} M-TOOLS-11: task_output shows the screen too`, r.text.includes('\n         HELLO\n'), r.text);
  await c.call('write_stdin', { task_id: id, chars: 'bye\r', yield_ms: 0 });
  r = await c.call('task_output', { task_id: id, wait: true });
  check(`${n} M-TOOLS-11: after the alternate screen, the transcript`,
    !r.text.includes('[screen ') && r.text.includes('left with bye\n'), r.text);
  const plain = idOf((await c.call('run_in_background', { command: 'echo plain' })).text);
  r = await c.call('task_screen', { task_id: plain });
  check(`${n} M-TOOLS-11: a task without a terminal has no screen`,
    r.isError && r.text.includes('does not run on a terminal'), r.text);
}

/* M-TOOLS-17 (M-TOOLS-10's file, as B4-05 asked): the file is the raw
 * output once, in order, line N = line N; the result names it and the
 * lines and bytes left out, which are exactly those lines; past the cap
 * (15 MB through a 1 MiB cap) the file is still every byte. */
async function spill(make, name) {
  const dir = mkdtempSync('/tmp/uvt-hosts-spill-');
  const c = await make(['--spill-dir', dir]);
  try {
    let r = await c.call('run_command', { command: 'seq 1 5000' });
    const m = /^\(the whole output is in (.*): this result left out its lines (\d+)-(\d+), bytes (\d+)-(\d+)\)$/m.exec(r.text);
    check(`${name} M-TOOLS-17: the result names the file, the lines and the bytes left out`,
      !!m && m[1] === `${dir}/bash-1.log` && r.text.endsWith('\n[status: completed, exit code: 0]'), r.text.slice(-300));
    const full = seqText(5000);
    if (m) {
      const st = statSync(m[1]);
      check(`${name} M-TOOLS-10: the file is 0600 in a 0700 directory`,
        (st.mode & 0o777) === 0o600 && (statSync(dir).mode & 0o777) === 0o700, st.mode.toString(8));
      const file = readFileSync(m[1], 'utf8');
      const lines = file.split('\n');
      check(`${name} M-TOOLS-17: the file is the output, once (line N is line N)`,
        file === full && lines[Number(m[2]) - 1] === m[2], file.slice(0, 40));
      check(`${name} M-TOOLS-17: the bytes left out are those lines`,
        file.slice(Number(m[4]), Number(m[5]) + 1) === lines.slice(Number(m[2]) - 1, Number(m[3])).join('\n') + '\n' &&
          r.text.includes(`\n${Number(m[2]) - 1}\n[... `) && r.text.includes(` ...]\n${Number(m[3]) + 1}\n`),
        [m[2], m[3], m[4], m[5]]);
    }
    r = await c.call('run_command', { command: 'seq 1 2000000' });
    const big = readFileSync(`${dir}/bash-2.log`);
    check(`${name} M-TOOLS-17: past the cap the file is every byte, in order (14,888,896)`,
      big.length === 14888896 && big.toString('latin1', 0, 10) === '1\n2\n3\n4\n5\n' &&
        big.toString('latin1', big.length - 8) === '2000000\n' && /the output cap dropped its bytes \d+-\d+/.test(r.text),
      [big.length, r.text.slice(-300)]);
    /* M-TOOLS-16 on it: a view reads the dropped bytes back. */
    r = await c.call('run_command', { command: 'seq 1 2000000', match: '^1234567$' });
    check(`${name} M-TOOLS-16: match sees a line the cap dropped, with its line number`,
      r.text.startsWith('1234567: 1234567\n[1 of 2000000 lines match]\n'), r.text.slice(0, 300));
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const clients = [];
try {
  // Without spill files: these results are checked byte for byte.
  clients.push(await v1Client(['--no-spill']));
  const v2 = await v2Client(['--no-spill']);
  if (v2) clients.push(v2);
  else console.log('note: the v2 client is not installed; its checks are skipped');
  clients.push(await rawClient(['--no-spill']));
  for (const c of clients) {
    await resultsFitHosts(c);
    await taskWait(c);
    await streamsAndStdin(c);
    await screen(c);
  }
  await spill(v1Client, 'v1');
  if (clients.some((c) => c.name === 'v2')) await spill(v2Client, 'v2');
  await spill(rawClient, 'raw');
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
} finally {
  for (const c of clients)
    await c.close();
}
finish();
