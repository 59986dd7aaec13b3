// C-32 with the official v1 SDK client, its default request timeout (60 s)
// and the server's default --yield-ms, both halves at once on one client:
//  - the yield half (M-TOOLS-6): run_command {"command": "sleep 70; echo
//    done"} with default request options answers before the client's
//    60 s timeout, with [status: running] and the line saying the command
//    goes on in the background as bash-N; its end is a notice, once, and
//    task_output then shows "done" and the end;
//  - the progress half (M-MCP-5): the same kind of command with
//    yield_ms 0 (run to the end), a progressToken and
//    resetTimeoutOnProgress: progress arrives at least every 5 s, so the
//    70 s call is not cancelled and ends with "done".
// Slow on purpose (the case asks for 70 s): suite 'mcp-slow'.  tools-test
// runs the yield half with a short --yield-ms.
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node long-call-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { check, fail, finish, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
const { LoggingMessageNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const transport = new StdioClientTransport({ command: server, args: [], stderr: 'pipe' });
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'uvtasks-long-call-test', version: '1.0.0' });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');
const results = [];
const kept = (res) => { results.push(textOf(res)); return res; };

try {
  await client.connect(transport);
  const stamps = [];
  const t0 = Date.now();
  /* C-32, M-TOOLS-6: the yield half, with the SDK's defaults. */
  const promoted = client.callTool({ name: 'run_command', arguments: { command: 'sleep 70; echo done' } })
    .then((res) => ({ res: kept(res), ms: Date.now() - t0 }), (err) => ({ err, ms: Date.now() - t0 }));
  /* C-32, M-MCP-5: the progress half, run to the end. */
  const whole = client.callTool(
    { name: 'run_command', arguments: { command: 'echo started; sleep 70; echo done', yield_ms: 0 } },
    undefined,
    { onprogress: (p) => stamps.push({ at: Date.now() - t0, ...p }), resetTimeoutOnProgress: true })
    .then((res) => kept(res), (err) => ({ err }));

  const y = await promoted;
  const body = bodyOf(textOf(y.res));
  const id = (/it goes on in the background as (bash-\d+): task_output reads more of its output, task_kill stops it; its limit of 600000 ms still applies\)\n\[status: running\]$/.exec(body) || [])[1];
  check(`C-32: the default-options call answers before the SDK's 60 s timeout (${y.ms} ms), not with an error`,
    !y.err && y.res && !y.res.isError, y.err || y.res);
  check('C-32: ... with [status: running] and the line naming the background task', !!id && /^\(still running after \d+ ms;/.test(body), y.res);

  const w = await whole;
  const gaps = stamps.map((s, i) => s.at - (i ? stamps[i - 1].at : 0));
  check('C-32: the 70 s command with yield_ms 0 and progress ends with its output, not a timeout',
    !w.err && bodyOf(textOf(w)).endsWith('started\ndone\n[status: completed, exit code: 0]'), w);
  check(`C-32: progress at least every 5 s (${stamps.length} notifications, longest gap ${Math.max(...gaps)} ms)`,
    stamps.length >= 14 && Math.max(...gaps) <= 5000, gaps);
  check('C-32: progress grows and shows the last line',
    stamps.every((s, i) => !i || s.progress > stamps[i - 1].progress) &&
      stamps.every((s) => s.message === 'started'), stamps.slice(0, 3));

  // The promoted command ends at about the same time: its notice.
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline && !logs.some((l) => String(l.data).startsWith(`Task ${id} `)))
    await sleep(100);
  check('C-32: the promoted command\'s end is a notice',
    logs.some((l) => l.data === `Task ${id} (bash: sleep 70; echo done) ended; task_output shows its output. [status: completed, exit code: 0]`),
    logs);
  const out = kept(await client.callTool({ name: 'task_output', arguments: { task_id: id } }));
  check('C-32: task_output shows "done" and the end', bodyOf(textOf(out)) === 'done\n[status: completed, exit code: 0]', out);
  kept(await client.callTool({ name: 'task_list', arguments: {} }));
  const logged = logs.filter((l) => String(l.data).startsWith(`Task ${id} `)).length;
  const prefixed = results.filter((t) => t.includes(`[notice] Task ${id} `)).length;
  // Once (M-MCP-2): one log message, and in front of at most one result,
  // the session's next one after the end; the yield_ms 0 call ends at
  // about the same time, so that is its result or none.  Never in front
  // of the task_output that shows the end itself (M-TOOLS-18: a notice
  // says only what the model does not know).
  check(`C-32: the notice arrives once (${logged} log message, ${prefixed} [notice] line)`,
    logged === 1 && prefixed <= 1 && !textOf(out).includes(`[notice] Task ${id} `), results);
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (stderr) console.log(`server stderr:\n${stderr}`);
}
try { await client.close(); } catch { /* closed */ }
finish();
