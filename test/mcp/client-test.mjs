// uvtasks-mcp driven by the official MCP TypeScript SDK client over stdio
// (contract §5, M-MCP-1..4).  UVTASKS_MCP names the built server.
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node client-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { check, fail, finish, readUntil, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import(
  '@modelcontextprotocol/sdk/client/stdio.js');
const { LoggingMessageNotificationSchema } = await import(
  '@modelcontextprotocol/sdk/types.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (res) =>
  (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const idOf = (text) => (/Started (bash-\d+)\./.exec(text) || [])[1];
// Everything after the notices a result may begin with (M-MCP-2).
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');

function alive(pid) {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z /.test(st);
  } catch {
    return false;
  }
}

const logs = [];
const transport = new StdioClientTransport({
  command: server,
  args: ['--grace-ms', '300'],
  stderr: 'pipe',
});
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'uvtasks-client-test', version: '1.0.0' });
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  logs.push(n.params);
});

async function call(name, args, options) {
  return client.callTool({ name, arguments: args }, undefined, options);
}

try {
  await client.connect(transport);
  const serverPid = transport.pid;
  check('initialize: server info', client.getServerVersion()?.name === 'uvtasks-mcp',
    client.getServerVersion());
  const caps = client.getServerCapabilities();
  check('initialize: tools and logging capabilities', !!caps?.tools && !!caps?.logging, caps);

  // tools/list (M-TOOLS-3 through MCP).
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check('tools/list names the tools (M-TOOLS-9: task_wait, M-TOOLS-11: task_screen)',
    JSON.stringify(names) ===
      JSON.stringify(['run_command', 'run_in_background', 'task_kill', 'task_list', 'task_output',
        'task_screen', 'task_wait', 'write_stdin']),
    names);
  check('tools/list gives object input schemas',
    tools.every((t) => t.inputSchema?.type === 'object' && t.description), tools);

  await client.ping();
  check('ping', true);

  // run_in_background, then a wait that sees the end.
  let res = await call('run_in_background', { command: 'echo hi; sleep 0.3; echo bye' });
  const t1 = idOf(textOf(res));
  check('run_in_background returns the id', !res.isError && /^bash-\d+$/.test(t1 || ''),
    res);
  res = await call('task_output', { task_id: t1, wait: true, timeout_ms: 10000 });
  check('task_output wait: both lines, then the status line',
    !res.isError && bodyOf(textOf(res)) === 'hi\nbye\n[status: completed, exit code: 0]',
    res);
  res = await call('task_output', { task_id: t1 });
  check('task_output again: nothing new, same status',
    bodyOf(textOf(res)) === '(no new output)\n[status: completed, exit code: 0]', res);

  // task_list.
  res = await call('task_list', {});
  check('task_list shows the task, its status and label',
    !res.isError && textOf(res).includes(`${t1}  bash  completed (exit code: 0)  echo hi; sleep 0.3; echo bye`),
    res);

  // task_kill on a sleep.
  // Its pid line says the process runs: a kill any sooner may come while
  // the spawn is still out (P-SPAWN-6) and end it "killed before it
  // started", which is not the path this checks.
  res = await call('run_in_background', { command: 'echo $$; exec sleep 100', label: 'long sleep' });
  const t2 = idOf(textOf(res));
  await readUntil(call, t2, (out) => /^\d+\n/.test(out));
  res = await call('task_kill', { task_id: t2, reason: 'test' });
  check('task_kill: stop requested, status stopping',
    !res.isError && textOf(res).includes(`Stop of ${t2} requested`) &&
      textOf(res).endsWith('[status: stopping]'), res);
  res = await call('task_output', { task_id: t2, wait: true, timeout_ms: 10000 });
  check('the killed task ends killed by SIGTERM',
    textOf(res).endsWith('[status: killed, signal: SIGTERM]'), res);
  res = await call('task_kill', { task_id: t2 });
  check('task_kill on an ended task says so',
    textOf(res).includes(`${t2} had already ended.`) &&
      textOf(res).endsWith('[status: killed, signal: SIGTERM]'), res);

  // A wait that times out is a success showing running (M-TOOLS-1).
  res = await call('run_in_background', { command: 'echo $$; exec sleep 100' });
  const t3 = idOf(textOf(res));
  // Waits of 200 ms until the shell has printed its pid (however soon a
  // loaded machine runs it); each is a wait that times out.
  const r3 = await readUntil(call, t3, (out) => /^\d+\n/.test(out));
  res = r3.last;
  const pidMatch = /^(\d+)\n/.exec(r3.out);
  const sleepPid = pidMatch ? Number(pidMatch[1]) : 0;
  check('a timed-out wait is a success showing [status: running]',
    !res.isError && textOf(res).endsWith('[status: running]') && sleepPid > 0, res);

  // A cancelled call: the server aborts the wait (M-MCP-1).  The task ends
  // soon after; since the aborted wait no longer counts, nothing reads its
  // output and its end comes as a notice.
  // The task waits at a gate (a FIFO) until the cancel was seen, so it
  // cannot end before the call is cancelled, however slow the machine.
  const gateDir = mkdtempSync(join(tmpdir(), 'uvt-gate-'));
  const gate = join(gateDir, 'gate');
  execFileSync('mkfifo', [gate]);
  res = await call('run_in_background', { command: `echo marker; read x < '${gate}'`, label: 'cancel me' });
  const t4 = idOf(textOf(res));
  const ac = new AbortController();
  const pending = call('task_output', { task_id: t4, wait: true, timeout_ms: 60000 },
    { signal: ac.signal, timeout: 90000 });
  await sleep(300);
  ac.abort('test cancels');
  let cancelled = false;
  try {
    await pending;
  } catch (e) {
    cancelled = true;
  }
  check('a cancelled call rejects on the client', cancelled);
  res = await call('task_list', {});
  check('calls after a cancel still work', !res.isError && textOf(res).includes(t4), res);
  writeFileSync(gate, 'go\n'); // opens when the task has opened its end
  rmSync(gateDir, { recursive: true });
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && !logs.some((l) => String(l.data).includes(`Task ${t4} `)))
    await sleep(50);
  check('after the aborted wait the task ends with a log notice',
    logs.some((l) => l.level === 'notice' && String(l.data).startsWith(`Task ${t4} (bash: cancel me) ended`)),
    logs);
  res = await call('task_output', { task_id: t4 });
  check('the aborted wait consumed no output',
    bodyOf(textOf(res)) === 'marker\n[status: completed, exit code: 0]', res);
  // M-TOOLS-18: this very result shows the end; the notice would repeat it.
  check('the notice is not prepended to the task_output that shows the end (M-MCP-2, M-TOOLS-18)',
    !textOf(res).includes('[notice]'), res);

  // Bad arguments: a tool error (isError), not a protocol error.
  res = await call('task_output', { task_id: 5 });
  check('a task_id of the wrong type is a tool error',
    res.isError === true && textOf(res).includes('task_id must be a string'), res);
  res = await call('task_output', { task_id: 'bash-999' });
  check('an unknown task is a tool error',
    res.isError === true && textOf(res).includes('No task bash-999'), res);
  res = await call('run_in_background', { command: 'true', cwd: '/no/such/dir' });
  check('a missing cwd is a tool error', res.isError === true, res);

  // Unknown tool: a protocol error (-32602).
  let code = 0;
  try {
    await call('no_such_tool', {});
  } catch (e) {
    code = e.code;
  }
  check('an unknown tool is a JSON-RPC error -32602', code === -32602, code);

  // Invalid UTF-8 in the output becomes U+FFFD (M-MCP-3).
  res = await call('run_in_background', { command: "printf '\\xff\\xfeok'" });
  const t5 = idOf(textOf(res));
  res = await call('task_output', { task_id: t5, wait: true, timeout_ms: 10000 });
  check('invalid UTF-8 output arrives as valid text',
    bodyOf(textOf(res)) === '\uFFFD\uFFFDok\n[status: completed, exit code: 0]', res);

  // An unattended task: a log notice and a prefix on a later result.
  res = await call('run_in_background', { command: 'echo quick', label: 'unattended' });
  const t6 = idOf(textOf(res));
  const d2 = Date.now() + 5000;
  while (Date.now() < d2 && !logs.some((l) => String(l.data).includes(`Task ${t6} `)))
    await sleep(50);
  check('an unattended task sends a notifications/message',
    logs.some((l) => l.logger === 'uvtasks' &&
      l.data === `Task ${t6} (bash: unattended) ended; task_output shows its output. [status: completed, exit code: 0]`),
    logs);
  res = await call('task_list', {});
  check('and the next result begins with its notice',
    textOf(res).startsWith(`[notice] Task ${t6} (bash: unattended) ended`), res);
  res = await call('task_list', {});
  check('a notice is shown once', !textOf(res).startsWith('[notice]'), res);

  // Client close: the server exits and stops its tasks (M-MCP-4).
  check('the sleep is alive before close', alive(sleepPid), sleepPid);
  await client.close();
  const d3 = Date.now() + 8000;
  while (Date.now() < d3 && (alive(serverPid) || alive(sleepPid)))
    await sleep(50);
  check('client close stops the server', !alive(serverPid), serverPid);
  check('client close stops the task process', !alive(sleepPid), sleepPid);
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (stderr)
    console.log(`server stderr:\n${stderr}`);
  try { await client.close(); } catch { /* already closed */ }
}

finish();
