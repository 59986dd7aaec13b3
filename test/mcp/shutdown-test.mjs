// C-34 (first half) with the official v1 SDK client: a server started with
// --grace-ms 10000 holds 10 tasks that ignore SIGTERM; client.close() ends
// stdin, then sends SIGTERM at 2 s and SIGKILL at 4 s.  M-MCP-6: the
// shutdown ends on its own well before, and no task process is left.
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node shutdown-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { execFileSync } from 'node:child_process';
import { check, fail, finish, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const marker = `100.${process.pid}${Math.floor(Math.random() * 1000)}`;
function sleeps() {
  try {
    return execFileSync('pgrep', ['-f', `sleep ${marker}`]).toString().trim().split('\n').filter(Boolean).length;
  } catch {
    return 0; // pgrep exits 1 when nothing matches
  }
}
async function until(cond, ms) {
  const start = Date.now();
  while (Date.now() - start < ms && !cond()) await sleep(20);
  return Date.now() - start;
}

const transport = new StdioClientTransport({
  command: server, args: ['--grace-ms', '10000'], stderr: 'pipe',
});
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'uvtasks-shutdown-test', version: '1.0.0' });
try {
  await client.connect(transport);
  for (let i = 0; i < 10; i++) {
    const res = await client.callTool({
      name: 'run_in_background',
      arguments: { command: `trap '' TERM; sleep ${marker} & sleep ${marker}` },
    });
    if (res.isError) fail(`task ${i} did not start: ${JSON.stringify(res)}`);
  }
  await until(() => sleeps() === 20, 10000);
  check('C-34: 20 task processes run', sleeps() === 20, sleeps());
  const t0 = Date.now();
  await client.close();
  const closeMs = Date.now() - t0;
  const goneMs = await until(() => sleeps() === 0, 5000);
  /* C-34, M-MCP-6 */
  check(`C-34: no task process is left after close() (close took ${closeMs} ms, then ${goneMs} ms)`,
    sleeps() === 0, sleeps());
  check('C-34: the server escalated to SIGKILL by itself, not waiting out --grace-ms',
    /SIGKILL to every task/.test(stderr), stderr);
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (stderr) console.log(`server stderr:\n${stderr}`);
  try { await client.close(); } catch { /* closed */ }
} finally {
  try { execFileSync('pkill', ['-KILL', '-f', `sleep ${marker}`]); } catch { /* none */ }
}
finish();
