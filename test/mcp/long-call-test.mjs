// C-32 with the official v1 SDK client and its default request timeout
// (60 s): run_command {"command": "sleep 70; echo done"} with a
// progressToken and resetTimeoutOnProgress.  M-MCP-5: progress arrives at
// least every 5 s, so the 70 s call is not cancelled and ends with "done".
// Slow on purpose (the case asks for 70 s): suite 'mcp-slow'.
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node long-call-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { check, fail, finish, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');

const transport = new StdioClientTransport({ command: server, args: [], stderr: 'pipe' });
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'uvtasks-long-call-test', version: '1.0.0' });
const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
try {
  await client.connect(transport);
  const stamps = [];
  const t0 = Date.now();
  /* C-32, M-MCP-5: the SDK's default timeout (60 s), reset by progress. */
  const res = await client.callTool(
    { name: 'run_command', arguments: { command: 'echo started; sleep 70; echo done' } },
    undefined,
    { onprogress: (p) => stamps.push({ at: Date.now() - t0, ...p }), resetTimeoutOnProgress: true });
  const gaps = stamps.map((s, i) => s.at - (i ? stamps[i - 1].at : 0));
  check('C-32: the 70 s command ends with its output, not a timeout',
    textOf(res).endsWith('started\ndone\n[status: completed, exit code: 0]'), res);
  check(`C-32: progress at least every 5 s (${stamps.length} notifications, longest gap ${Math.max(...gaps)} ms)`,
    stamps.length >= 14 && Math.max(...gaps) <= 5000, gaps);
  check('C-32: progress grows and shows the last line',
    stamps.every((s, i) => !i || s.progress > stamps[i - 1].progress) &&
      stamps.every((s) => s.message === 'started'), stamps.slice(0, 3));
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (stderr) console.log(`server stderr:\n${stderr}`);
}
try { await client.close(); } catch { /* closed */ }
finish();
