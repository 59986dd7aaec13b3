// uvtasks-mcp driven by the official v2 TypeScript client
// (@modelcontextprotocol/client 2.x) pinned to protocol revision 2026-07-28
// (M-MCP-9): stateless requests with per-request _meta, server/discover,
// every tool, progress (M-MCP-5), and no unsolicited log notifications.
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node v2-client-test.mjs
//
// Exits 77 (skip) when the clients are not installed, 1 on any failed check.
import { existsSync, readFileSync } from 'node:fs';
import { check, fail, finish, readUntil, server } from './harness.mjs';

if (!existsSync(new URL('./node_modules/@modelcontextprotocol/client', import.meta.url))) {
  console.log('SKIP: @modelcontextprotocol/client is missing; run `npm ci` in test/mcp');
  process.exit(77);
}
const { Client } = await import('@modelcontextprotocol/client');
const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');

const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const idOf = (text) => (/Started (bash-\d+)\./.exec(text) || [])[1];
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function alive(pid) {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

const transport = new StdioClientTransport({
  command: server, args: ['--grace-ms', '300', '--no-spill'], stderr: 'pipe',
});
const sent = [];
const send = transport.send.bind(transport);
transport.send = (msg, opts) => { sent.push(msg); return send(msg, opts); };
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'uvtasks-v2-test', version: '1.0.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } });
const unsolicited = [];
client.fallbackNotificationHandler = async (n) => { unsolicited.push(n); };
const call = (name, args, opts) => client.callTool({ name, arguments: args }, opts);

try {
  await client.connect(transport);
  const serverPid = transport.pid;
  /* M-MCP-9 */
  const version = client.getNegotiatedProtocolVersion?.() ?? client.protocolVersion;
  check('the pinned client speaks 2026-07-28 with the server', version === '2026-07-28', version);
  const disc = await client.discover();
  check('server/discover: versions, tools, the Tasks extension, cache hints',
    JSON.stringify(disc.supportedVersions) === '["2026-07-28"]' && !!disc.capabilities?.tools &&
      !!disc.capabilities?.extensions?.['io.modelcontextprotocol/tasks'] &&
      Number.isInteger(disc.ttlMs) && disc.cacheScope === 'public', disc);

  const { tools } = await client.listTools();
  check('tools/list: the tools (M-TOOLS-9, M-TOOLS-11), no execution field',
    tools.map((t) => t.name).sort().join(',') ===
      'run_command,run_in_background,task_kill,task_list,task_output,task_screen,task_wait,' +
      'write_stdin' &&
      tools.every((t) => t.execution === undefined), tools);

  let res = await call('run_in_background', { command: 'echo one; sleep 0.3; echo two', label: 'v2 job' });
  const t1 = idOf(textOf(res));
  check('run_in_background returns an id', !res.isError && /^bash-\d+$/.test(t1 || ''), res);
  res = await call('task_output', { task_id: t1, wait: true, timeout_ms: 10000 });
  check('task_output waits for the end',
    bodyOf(textOf(res)) === 'one\ntwo\n[status: completed, exit code: 0]', res);
  res = await call('task_list', {});
  check('task_list names the task', textOf(res).includes(`${t1}  bash  completed (exit code: 0)  v2 job`), res);

  res = await call('run_in_background', { command: 'echo $$; exec sleep 100' });
  const t2 = idOf(textOf(res));
  const r2 = await readUntil(call, t2, (out) => /^\d+\n/.test(out));
  const sleepPid = Number((/^(\d+)\n/.exec(r2.out) || [])[1] || 0);
  res = await call('task_kill', { task_id: t2, reason: 'v2 test' });
  check('task_kill requests the stop', textOf(res).includes(`Stop of ${t2} requested`), res);
  res = await call('task_output', { task_id: t2, wait: true, timeout_ms: 10000 });
  check('the killed task ends by SIGTERM',
    textOf(res).endsWith('[status: killed, signal: SIGTERM]') && sleepPid > 0 && !alive(sleepPid), res);

  res = await call('run_command', { command: 'echo fg; exit 3' });
  check('run_command answers with the output and the exit code',
    !res.isError && bodyOf(textOf(res)) === 'fg\n[status: completed, exit code: 3]', res);

  // M-MCP-5: progress on a call that carries a progressToken.
  const progress = [];
  res = await call('run_command', { command: 'for i in 1 2 3 4 5; do echo tick $i; sleep 1; done' },
    { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true, timeout: 30000 });
  check('M-MCP-5: progress arrives while run_command runs, growing, with the last line',
    progress.length >= 1 && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress) &&
      progress.every((p) => /^tick \d$/.test(p.message || '')), progress);
  check('and the result follows', bodyOf(textOf(res)).endsWith('tick 5\n[status: completed, exit code: 0]'), res);

  // A task that ends unattended: its notice comes in the next result, and
  // no notifications/message arrives (no logLevel was named).  The test
  // lists until the task is seen ended (not a fixed 0.5 s: a busy machine can
  // take longer to run `true`): the first result that shows it ended is
  // the one that carries the notice.
  res = await call('run_in_background', { command: 'true', label: 'quiet' });
  const t3 = idOf(textOf(res));
  const quiet = new RegExp(`^${t3}  bash  running  quiet$`, 'm');
  const d3 = Date.now() + 10000;
  for (;;) {
    res = await call('task_list', {});
    if (!quiet.test(textOf(res)) || Date.now() > d3)
      break;
    await sleep(50);
  }
  check('the notice is prepended to the next result',
    textOf(res).startsWith(`[notice] Task ${t3} (bash: quiet) ended`), res);
  check('M-MCP-9: no unsolicited log notifications',
    !unsolicited.some((n) => n.method === 'notifications/message'), unsolicited);

  check('on the wire: no initialize, every request carries the 2026 _meta',
    !sent.some((m) => m.method === 'initialize') &&
      sent.filter((m) => m.id !== undefined && m.method).every((m) =>
        m.params?._meta?.['io.modelcontextprotocol/protocolVersion'] === '2026-07-28'),
    sent.map((m) => m.method));

  res = await call('task_output', { task_id: 'bash-999' });
  check('an unknown task is a tool error', res.isError === true, res);
  let code = 0;
  try { await call('no_such_tool', {}); } catch (e) { code = e.code; }
  check('an unknown tool is -32602', code === -32602, code);

  // M-TOOLS-6..8 for a 2026 client: per-call yield_ms and max_bytes, and
  // text for a model (C-36).
  res = await call('run_command', { command: 'echo early; exec sleep 30', yield_ms: 300 });
  const y1 = (/it goes on in the background as (bash-\d+): /.exec(textOf(res)) || [])[1];
  // "early" is in the answer, or (on a machine slow to run the command)
  // in the next reads.
  const early = bodyOf(textOf(res)).startsWith('early\n') ||
    (!!y1 && (await readUntil(call, y1, (out) => out.length > 0)).out.startsWith('early\n'));
  check('M-TOOLS-6: a per-call yield_ms promotes the command',
    !res.isError && early && !!y1 && textOf(res).endsWith('[status: running]'), res);
  res = await call('task_kill', { task_id: y1 });
  check('and task_kill stops it', textOf(res).includes(`Stop of ${y1} requested`), res);
  res = await call('run_command', { command: 'seq 1 2000', max_bytes: 500 });
  const cut = /\n\[\.\.\. (\d+) bytes \((\d+) lines\) left out \.\.\.\]\n/.exec(textOf(res));
  check('M-TOOLS-8: a per-call max_bytes cuts the result to its head and tail',
    bodyOf(textOf(res)).startsWith('1\n2\n') && !!cut && textOf(res).endsWith('\n2000\n[status: completed, exit code: 0]') &&
      Buffer.byteLength(bodyOf(textOf(res))) <= 500 + '[status: completed, exit code: 0]'.length, res);
  res = await call('run_command', { command: 'true', yield_ms: 'soon' });
  check('M-MCP-3: a yield_ms of the wrong type is a tool error',
    res.isError === true && textOf(res).includes('yield_ms must be a whole number'), res);
  res = await call('run_command', { command: 'true', max_bytes: -1 });
  check('M-MCP-3: a negative max_bytes is a tool error',
    res.isError === true && textOf(res).includes('max_bytes must be a whole number'), res);
  res = await call('run_command', {
    command: "for i in $(seq 1 500); do printf '\\r[%3d%%] \\033[32mbuilding\\033[0m' $((i/5)); done; echo; echo built",
  });
  check('C-36: the progress bar arrives as its last state, no ESC, no \\r',
    bodyOf(textOf(res)) === '[100%] building\nbuilt\n[status: completed, exit code: 0]', res);
  res = await call('run_command', { command: "printf 'a\\000b\\n'" });
  check('M-MCP-8: a NUL of the output arrives as U+0000',
    bodyOf(textOf(res)) === 'a\u0000b\n[status: completed, exit code: 0]', res);

  await client.close();
  const d = Date.now() + 8000;
  while (Date.now() < d && alive(serverPid)) await sleep(50);
  check('client close ends the server', !alive(serverPid), serverPid);
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (stderr) console.log(`server stderr:\n${stderr}`);
  try { await client.close(); } catch { /* closed */ }
}
finish();
