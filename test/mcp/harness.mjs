// What the SDK-driven tests of uvtasks-mcp share: the skip rules (exit 77
// when the SDK is not installed or UVTASKS_MCP names no server), the
// check/fail counters and the closing "N passed, M failed" line.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, 'node_modules', '@modelcontextprotocol', 'sdk'))) {
  console.log('SKIP: node_modules is missing; run `npm ci` in test/mcp');
  process.exit(77);
}
export const server = process.env.UVTASKS_MCP;
if (!server || !existsSync(server)) {
  console.log('SKIP: UVTASKS_MCP must name the built uvtasks-mcp');
  process.exit(77);
}

let passed = 0;
let failed = 0;

// Errors print as their text, not as {}.
function show(v) {
  return JSON.stringify(v, (k, x) => (x instanceof Error ? String(x) : x));
}

export function check(name, cond, got) {
  if (cond) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}`);
    if (got !== undefined)
      console.log(`     got: ${show(got).slice(0, 800)}`);
  }
}

export function fail(message) {
  failed++;
  console.log(`FAIL ${message}`);
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

// Read task `id` with short waits (task_output, timeout_ms 200) until
// `pred(output so far)` holds or `ms` pass, so that a check of what a
// command printed does not depend on how soon a loaded machine runs it.
// `call(name, args)` calls a tool.  Returns { out: the output of every
// read, without notices, notes and status lines; last: the last result }.
// The output is consumed, as any read consumes it.
export async function readUntil(call, id, pred, ms = 20000) {
  const deadline = Date.now() + ms;
  let out = '';
  let last;
  for (;;) {
    last = await call('task_output', { task_id: id, timeout_ms: 200 });
    const text = (last.content || []).filter((c) => c.type === 'text')
      .map((c) => c.text).join('');
    out += text.replace(/^(\[notice\][^\n]*\n)+\n/, '')
      .replace(/\[status: [^\n]*\]$/, '')
      .replace(/\(waited \d+ ms; the task has not ended: wait again to wait longer\)\n$/, '')
      .replace(/^\(no new output\)\n$/, '');
    if (pred(out) || Date.now() > deadline)
      return { out, last };
  }
}
