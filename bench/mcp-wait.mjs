// M-TOOLS-9: what waiting for 32 tasks costs a client, by way of waiting.
// 32 tasks end one after another (task i sleeps i * STEP ms, then prints a
// line); each way below learns every task's end and output, over raw
// JSON-RPC lines, and we count the requests sent and the bytes of the
// answers the client had to read:
//   task_wait all     one task_wait {task_ids: all 32, mode: "all"}
//   task_wait any     task_wait {mode: "any"} on those not seen ended yet,
//                     again until every one was seen (a model acting on
//                     each end as it comes)
//   task_output wait  32 task_output {wait: true} calls, one per task
//   task_output poll  task_output without wait on every unfinished task,
//                     every 250 ms (what hosts add "STOP POLLING" hints
//                     against)
//
//   node bench/mcp-wait.mjs build/src/mcp/uvtasks-mcp [STEP_MS]
import { spawn } from 'node:child_process';

const server = process.argv[2];
const step = Number(process.argv[3] || 50);
const N = 32;
if (!server) {
  console.error('usage: node bench/mcp-wait.mjs PATH/uvtasks-mcp [STEP_MS]');
  process.exit(2);
}

function connect() {
  const child = spawn(server, [], { stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map();
  let buf = '';
  const stats = { requests: 0, bytes: 0 };
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      stats.bytes += Buffer.byteLength(line) + 1;
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
    stats.requests++;
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  });
  const call = async (name, args) => {
    const msg = await request('tools/call', { name, arguments: args });
    return msg.result.content.map((c) => c.text).join('');
  };
  const close = () => new Promise((resolve) => { child.on('exit', resolve); child.stdin.end(); });
  return { request, call, stats, close };
}

async function start(c) {
  await c.request('initialize', {
    protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'bench', version: '1' },
  });
  const ids = [];
  for (let i = 1; i <= N; i++) {
    const t = await c.call('run_in_background',
      { command: `sleep ${(i * step / 1000).toFixed(3)}; echo task ${i} done` });
    ids.push(/Started (bash-\d+)/.exec(t)[1]);
  }
  // Only the waiting is counted.
  c.stats.requests = 0;
  c.stats.bytes = 0;
  return ids;
}

const ended = (text) => !/\[status: running\]$/.test(text);

const ways = {
  async 'task_wait all'(c, ids) {
    const t = await c.call('task_wait', { task_ids: ids, mode: 'all', timeout_ms: 600000 });
    return (t.match(/ done\n/g) || []).length;
  },
  async 'task_wait any'(c, ids) {
    let left = ids.slice();
    let seen = 0;
    while (left.length > 0) {
      const t = await c.call('task_wait', { task_ids: left, mode: 'any', timeout_ms: 600000 });
      const sections = t.split(/^--- /m).slice(1);
      const still = [];
      for (const s of sections) {
        const id = s.slice(0, s.indexOf(' '));
        if (/\[status: running\]\s*$/.test(s)) still.push(id);
        else seen += / done\n/.test(s) ? 1 : 0;
      }
      left = still;
    }
    return seen;
  },
  async 'task_output wait'(c, ids) {
    let seen = 0;
    for (const id of ids) {
      const t = await c.call('task_output', { task_id: id, wait: true, timeout_ms: 600000 });
      seen += / done\n/.test(t) ? 1 : 0;
    }
    return seen;
  },
  async 'task_output poll'(c, ids) {
    let left = ids.slice();
    let seen = 0;
    while (left.length > 0) {
      const still = [];
      for (const id of left) {
        const t = await c.call('task_output', { task_id: id });
        seen += / done\n/.test(t) ? 1 : 0;
        if (!ended(t)) still.push(id);
      }
      left = still;
      if (left.length > 0) await new Promise((r) => setTimeout(r, 250));
    }
    return seen;
  },
};

console.log(`# ${N} tasks ending ${step} ms apart (the last after ${N * step} ms)`);
console.log('way                requests  bytes to client  ms     outputs seen');
for (const [name, run] of Object.entries(ways)) {
  const c = connect();
  const ids = await start(c);
  const t0 = Date.now();
  const seen = await run(c, ids);
  const ms = Date.now() - t0;
  console.log(`${name.padEnd(18)} ${String(c.stats.requests).padStart(8)}  ` +
    `${String(c.stats.bytes).padStart(15)}  ${String(ms).padStart(5)}  ${seen}/${N}`);
  await c.close();
}
