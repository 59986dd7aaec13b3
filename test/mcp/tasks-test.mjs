// MCP Tasks (protocol revision 2025-11-25) of uvtasks-mcp, driven by the
// official MCP TypeScript SDK client and its experimental tasks API
// (client.experimental.tasks): a task-augmented run_command, its status
// notifications, tasks/result, tasks/list with pagination, tasks/cancel,
// ttl expiry, the fences, and a 2025-06-18 client that sees no Tasks.
//
//   cd test/mcp && npm ci && UVTASKS_MCP=../../build/src/mcp/uvtasks-mcp node tasks-test.mjs
//
// Exits 77 (skip) when the SDK is not installed, 1 on any failed check.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { check, fail, finish, server } from './harness.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import(
  '@modelcontextprotocol/sdk/client/stdio.js');
const {
  CallToolResultSchema, CreateTaskResultSchema, TaskStatusNotificationSchema,
  LoggingMessageNotificationSchema, RELATED_TASK_META_KEY,
} = await import('@modelcontextprotocol/sdk/types.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (res) =>
  (res?.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
// Everything after the notices a result may begin with (M-MCP-2).
const bodyOf = (text) => text.replace(/^(\[notice\][^\n]*\n)+\n/, '');
const isoRe = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function errorCode(promise) {
  try {
    await promise;
    return 0;
  } catch (e) {
    return e.code;
  }
}

// Whether `cond()` (which may return a promise) held within `ms`.
async function until(cond, ms = 8000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond())
      return true;
    if (Date.now() >= deadline)
      return false;
    await sleep(25);
  }
}

// A client; `version` rewrites the initialize request's protocolVersion
// (the SDK always asks for its latest).
async function connect(args, version) {
  const transport = new StdioClientTransport({ command: server, args, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  if (version) {
    const send = transport.send.bind(transport);
    transport.send = (msg, opts) => {
      if (msg.method === 'initialize')
        msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
      return send(msg, opts);
    };
  }
  const client = new Client({ name: 'uvtasks-tasks-test', version: '1.0.0' });
  const statuses = [];
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
    statuses.push(n.params);
  });
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logs.push(n.params);
  });
  await client.connect(transport);
  return { client, statuses, logs, stderr: () => stderr };
}

// Every task tasks/list shows, page after page (cursors stay opaque).
async function listAll(tasks) {
  const out = [];
  let cursor;
  do {
    const page = await tasks.listTasks(cursor);
    out.push(...page.tasks);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

// A task-augmented tools/call through the SDK's request (CreateTaskResult).
function callAsTask(client, name, args, task = {}) {
  return client.request(
    { method: 'tools/call', params: { name, arguments: args, task } },
    CreateTaskResultSchema);
}

let c1;
try {
  // ------------------------------------------------------------------
  c1 = await connect(['--grace-ms', '300', '--tasks-page-size', '2', '--max-task-ttl-ms', '120000']);
  const { client, statuses } = c1;
  const tasks = client.experimental.tasks;

  const caps = client.getServerCapabilities();
  check('2025-11-25: tasks capability with list, cancel and tools.call',
    JSON.stringify(caps?.tasks) ===
      JSON.stringify({ list: {}, cancel: {}, requests: { tools: { call: {} } } }), caps);

  const { tools } = await client.listTools();
  const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
  check('tools/list: run_command optional, the others forbidden',
    support.run_command === 'optional' && support.run_in_background === 'forbidden' &&
      support.task_output === 'forbidden' && support.task_list === 'forbidden' &&
      support.task_kill === 'forbidden' && support.write_stdin === 'forbidden' &&
      support.task_wait === 'forbidden' && support.task_screen === 'forbidden', support);

  // A task-augmented run_command through callToolStream: created, polled,
  // result.  A non-zero exit is a completed task with isError false.
  const seen = [];
  for await (const m of tasks.callToolStream(
    { name: 'run_command', arguments: { command: 'echo hi; sleep 0.3; echo bye; exit 3' } },
    CallToolResultSchema, { task: { ttl: 60000 } }))
    seen.push(m);
  const created = seen.find((m) => m.type === 'taskCreated')?.task;
  const result = seen.find((m) => m.type === 'result')?.result;
  const t1 = created?.taskId;
  check('callToolStream: CreateTaskResult working, granted ttl, ISO times, pollInterval',
    created && /^bash-\d+$/.test(t1) && created.status === 'working' && created.ttl === 60000 &&
      isoRe.test(created.createdAt) && isoRe.test(created.lastUpdatedAt) &&
      created.pollInterval > 0, seen);
  check('callToolStream: polled to completed',
    seen.filter((m) => m.type === 'taskStatus').at(-1)?.task.status === 'completed', seen);
  check('tasks/result: the CallToolResult, isError false for exit code 3',
    result && textOf(result) === 'hi\nbye\n[status: completed, exit code: 3]' &&
      result.isError === false, result);
  check('tasks/result: related-task _meta',
    result?._meta?.[RELATED_TASK_META_KEY]?.taskId === t1, result);
  await until(() => statuses.some((s) => s.taskId === t1 && s.status === 'completed'));
  const s1 = statuses.filter((s) => s.taskId === t1);
  check('notifications/tasks/status: one, completed, with statusMessage',
    s1.length === 1 && s1[0].status === 'completed' && s1[0].statusMessage === 'exit code: 3' &&
      s1[0].ttl === 60000 && isoRe.test(s1[0].lastUpdatedAt), statuses);
  let got = await tasks.getTask(t1);
  check('tasks/get: completed, flat Task, no related-task _meta',
    got.taskId === t1 && got.status === 'completed' && got.statusMessage === 'exit code: 3' &&
      got._meta === undefined, got);
  const again = await tasks.getTaskResult(t1, CallToolResultSchema);
  check('tasks/result again gives the same result', textOf(again) === textOf(result), again);

  // tasks/result blocks until the end without blocking other requests.
  const cr = await callAsTask(client, 'run_command', { command: 'sleep 0.6; echo late' });
  const t2 = cr.task.taskId;
  const start = Date.now();
  let resolved = false;
  const pending = tasks.getTaskResult(t2, CallToolResultSchema).then((r) => { resolved = true; return r; });
  await client.ping();
  got = await tasks.getTask(t2);
  check('while tasks/result waits, ping and tasks/get are answered',
    !resolved && got.status === 'working' && Date.now() - start < 500, { resolved, got });
  const late = await pending;
  check('tasks/result waited for the end',
    textOf(late) === 'late\n[status: completed, exit code: 0]' && Date.now() - start >= 500, late);

  // tasks/list with pages of two.
  // The command marks that it runs, so the cancel below reaches a process
  // (sooner it may come while the spawn is out, P-SPAWN-6, and the task
  // ends "killed before it started", which is not what this checks).
  const mark = join(mkdtempSync(join(tmpdir(), 'uvt-tasks-')), 'up');
  const cr3 = await callAsTask(client, 'run_command', { command: `touch '${mark}'; exec sleep 30` });
  const t3 = cr3.task.taskId;
  const page1 = await tasks.listTasks();
  const page2 = await tasks.listTasks(page1.nextCursor);
  check('tasks/list: two per page, a nextCursor, then the rest without one',
    page1.tasks.map((t) => t.taskId).join() === [t1, t2].join() && typeof page1.nextCursor === 'string' &&
      page2.tasks.map((t) => t.taskId).join() === t3 && page2.nextCursor === undefined,
    { page1, page2 });
  check('tasks/list: statuses', page1.tasks[0].status === 'completed' && page2.tasks[0].status === 'working',
    { page1, page2 });
  check('tasks/list with a made-up cursor is -32602',
    await errorCode(tasks.listTasks('not-a-cursor')) === -32602);

  // tasks/cancel stops the command; the task stays cancelled.
  check('the command runs before it is cancelled', await until(() => existsSync(mark)), mark);
  const cancelled = await tasks.cancelTask(t3);
  rmSync(dirname(mark), { recursive: true, force: true });
  check('tasks/cancel answers cancelled', cancelled.taskId === t3 && cancelled.status === 'cancelled',
    cancelled);
  const r3 = await tasks.getTaskResult(t3, CallToolResultSchema);
  check('the cancelled task ends killed by SIGTERM; its result says so',
    r3.isError === true && textOf(r3).endsWith('[status: killed, signal: SIGTERM]'), r3);
  got = await tasks.getTask(t3);
  check('tasks/get: cancelled', got.status === 'cancelled' && got.statusMessage === 'signal: SIGTERM', got);
  await until(() => statuses.some((s) => s.taskId === t3 && s.statusMessage === 'signal: SIGTERM'));
  check('status notifications for the cancelled task are cancelled',
    statuses.filter((s) => s.taskId === t3).length >= 1 &&
      statuses.filter((s) => s.taskId === t3).every((s) => s.status === 'cancelled'), statuses);
  check('tasks/cancel of a terminal task is -32602', await errorCode(tasks.cancelTask(t3)) === -32602);
  check('tasks/cancel of a completed task is -32602', await errorCode(tasks.cancelTask(t1)) === -32602);

  // ttl: a short one is granted as asked; once it ran out the task is
  // unknown (and its record forgotten).  The ttl counts from the task's
  // creation: 3 s for `echo` to end in, and the test waits for its end
  // rather than for a fixed time (0.4 s and 0.6 s were too short for a
  // busy machine: "Task has expired" before the result).
  const cr4 = await callAsTask(client, 'run_command', { command: 'echo short' }, { ttl: 3000 });
  const t4 = cr4.task.taskId;
  check('a requested ttl is granted', cr4.task.ttl === 3000, cr4);
  const cr5 = await callAsTask(client, 'run_command', { command: 'true' }, { ttl: 99999999 });
  check('a ttl above --max-task-ttl-ms is capped', cr5.task.ttl === 120000, cr5);
  const r4 = await tasks.getTaskResult(t4, CallToolResultSchema);
  check('the short-lived task has its result', textOf(r4) === 'short\n[status: completed, exit code: 0]', r4);
  check('after its ttl, tasks/get is -32602',
    await until(async () => await errorCode(tasks.getTask(t4)) === -32602, 15000));
  check('after its ttl, tasks/result is -32602',
    await errorCode(tasks.getTaskResult(t4, CallToolResultSchema)) === -32602);
  const all = await listAll(tasks);
  check('after its ttl, tasks/list does not show it', !all.some((t) => t.taskId === t4), all);
  let res = await client.callTool({ name: 'task_list', arguments: {} });
  check('after its ttl, the registry record is forgotten', !textOf(res).includes(`${t4} `), res);

  // A ttl that runs out while the command runs: unknown at once, the
  // command stopped, the record forgotten once it has ended.
  const cr6 = await callAsTask(client, 'run_command', { command: 'exec sleep 30' }, { ttl: 300 });
  const t6 = cr6.task.taskId;
  check('a running task whose ttl ran out is unknown',
    await until(async () => await errorCode(tasks.getTask(t6)) === -32602, 10000));
  let gone = false;
  const d6 = Date.now() + 8000;
  while (!gone && Date.now() < d6) {
    res = await client.callTool({ name: 'task_list', arguments: {} });
    gone = !textOf(res).includes(`${t6} `);
    if (!gone)
      await sleep(100);
  }
  check('its command is stopped and its record forgotten', gone, res);

  // Fences: a background task is no MCP task; the model's tools leave MCP
  // tasks alone; forbidden tools do not run as tasks.
  res = await client.callTool({ name: 'run_in_background', arguments: { command: 'true' } });
  const bg = /Started (bash-\d+)\./.exec(textOf(res))?.[1];
  check('a background task is unknown to tasks/get (-32602)', await errorCode(tasks.getTask(bg)) === -32602);
  check('and to tasks/cancel (-32602)', await errorCode(tasks.cancelTask(bg)) === -32602);
  check('an unknown task id is -32602', await errorCode(tasks.getTask('bash-9999')) === -32602);
  res = await client.callTool({ name: 'task_output', arguments: { task_id: t1 } });
  check('task_output on an MCP task is a tool error', res.isError === true &&
    textOf(res).includes('is an MCP task'), res);
  check('run_in_background as a task is -32601',
    await errorCode(callAsTask(client, 'run_in_background', { command: 'true' })) === -32601);
  check('a ttl of the wrong type is -32602',
    await errorCode(callAsTask(client, 'run_command', { command: 'true' }, { ttl: 'soon' })) === -32602);
  check('a command that cannot start, asked as a task, is -32602',
    await errorCode(callAsTask(client, 'run_command', { command: 'true', cwd: '/no/such/dir' })) === -32602);

  // A plain run_command still answers synchronously on 2025-11-25.
  res = await client.callTool({ name: 'run_command', arguments: { command: 'echo sync' } });
  check('run_command without a task is a plain tool call',
    bodyOf(textOf(res)) === 'sync\n[status: completed, exit code: 0]' && !res.isError, res);
  // An MCP task's end is reported by its result: no completion notice.
  const mcpIds = [t1, t2, t3, t4, cr5.task.taskId, t6];
  check('no notifications/message notice names an MCP task',
    !c1.logs.some((l) => mcpIds.some((id) => String(l.data).includes(`Task ${id} `))), c1.logs);
  await until(() => c1.logs.some((l) => String(l.data).startsWith(`Task ${bg} `)));
  check('the background task did get its notice',
    c1.logs.some((l) => String(l.data).startsWith(`Task ${bg} `)), c1.logs);

  // Cancelling a plain run_command call stops its command (foreground).
  const ac = new AbortController();
  const pendingCall = client.callTool({ name: 'run_command', arguments: { command: 'exec sleep 30' } },
    undefined, { signal: ac.signal });
  await sleep(300);
  ac.abort('test cancels');
  check('a cancelled run_command call rejects', await errorCode(pendingCall) !== 0);
  const killedRe = /bash-\d+  bash  killed \(signal: SIGTERM\)  exec sleep 30/;
  let listed = '';
  const d7 = Date.now() + 8000;
  while (!killedRe.test(listed) && Date.now() < d7) {
    listed = textOf(await client.callTool({ name: 'task_list', arguments: {} }));
    if (!killedRe.test(listed))
      await sleep(100);
  }
  check('its command is stopped', killedRe.test(listed), listed);

  await client.close();
  c1 = undefined;

  // ------------------------------------------------------------------
  // A 2025-06-18 client: no Tasks anywhere, the tools still work.
  const c2 = await connect(['--grace-ms', '300'], '2025-06-18');
  const old = c2.client;
  check('2025-06-18: no tasks capability', old.getServerCapabilities()?.tasks === undefined,
    old.getServerCapabilities());
  const oldTools = (await old.listTools()).tools;
  check('2025-06-18: no execution fields', oldTools.length === 8 &&
    oldTools.every((t) => t.execution === undefined), oldTools);
  res = await old.callTool({ name: 'run_command', arguments: { command: 'echo old; exit 1' } });
  check('2025-06-18: run_command runs synchronously',
    textOf(res) === 'old\n[status: completed, exit code: 1]' && res.isError === false, res);
  res = await old.request({ method: 'tools/call', params: { name: 'run_command', arguments: { command: 'echo ignored' }, task: {} } },
    CallToolResultSchema);
  check('2025-06-18: a task field is ignored; the call answers normally',
    textOf(res) === 'ignored\n[status: completed, exit code: 0]', res);
  check('2025-06-18: tasks/get is -32601',
    await errorCode(old.experimental.tasks.getTask('bash-1')) === -32601);
  check('2025-06-18: no status notifications', c2.statuses.length === 0, c2.statuses);
  await old.close();

  // ------------------------------------------------------------------
  // M-TOOLS-6: a task's result is the command's end, whatever --yield-ms
  // says: a task-augmented run_command never yields (the task is what goes
  // on in the background).
  c1 = await connect(['--grace-ms', '300', '--yield-ms', '200']);
  const y = c1.client;
  const ySeen = [];
  for await (const m of y.experimental.tasks.callToolStream(
    { name: 'run_command', arguments: { command: 'echo early; sleep 1.2; echo late' } },
    CallToolResultSchema, { task: {} }))
    ySeen.push(m);
  const yResult = ySeen.find((m) => m.type === 'result')?.result;
  check('--yield-ms 200: a task-augmented run_command\'s result is the command\'s end',
    textOf(yResult) === 'early\nlate\n[status: completed, exit code: 0]' && yResult.isError === false &&
      ySeen.filter((m) => m.type === 'taskStatus').at(-1)?.task.status === 'completed', ySeen);
  const yc = await callAsTask(y, 'run_command', { command: 'sleep 0.8; echo given', yield_ms: 100 });
  const yr = await y.experimental.tasks.getTaskResult(yc.task.taskId, CallToolResultSchema);
  check('a yield_ms given to a task-augmented run_command does not cut its result',
    textOf(yr) === 'given\n[status: completed, exit code: 0]', yr);
  /* M-MCP-8: a task's result keeps the NUL bytes of the output. */
  const nc = await callAsTask(y, 'run_command', { command: "printf 'n\\000l\\n'" });
  const nr = await y.experimental.tasks.getTaskResult(nc.task.taskId, CallToolResultSchema);
  check('M-MCP-8: tasks/result carries a NUL of the output',
    textOf(nr) === 'n\u0000l\n[status: completed, exit code: 0]', nr);
  check('a bad yield_ms in a task-augmented run_command is -32602',
    await errorCode(callAsTask(y, 'run_command', { command: 'true', yield_ms: 'soon' })) === -32602);
  check('a bad max_bytes in a task-augmented run_command is -32602',
    await errorCode(callAsTask(y, 'run_command', { command: 'true', max_bytes: 0 })) === -32602);
  res = await y.callTool({ name: 'run_command', arguments: { command: 'exec sleep 30' } });
  check('the same server\'s plain run_command does yield',
    /it goes on in the background as bash-\d+/.test(textOf(res)) && textOf(res).endsWith('[status: running]'), res);
  await y.close();
  c1 = undefined;
} catch (e) {
  fail(`unexpected error: ${e?.stack || e}`);
  if (c1)
    console.log(`server stderr:\n${c1.stderr()}`);
  try { await c1?.client.close(); } catch { /* already closed */ }
}

finish();
