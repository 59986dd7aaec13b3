// Peer for workload 1: Node's child_process.spawn.
//   node spawn.js COUNT LIVE argv|shell
// Runs COUNT `true`, at most LIVE at once, each read to the end ('close'
// fires after exit and the end of both pipes).  Prints "rate <tasks/s>".
'use strict';
const { spawn } = require('child_process');
const count = Number(process.argv[2] || 2000);
const live = Number(process.argv[3] || 64);
const shell = process.argv[4] === 'shell';
let started = 0;
let finished = 0;
let running = 0;
const t0 = process.hrtime.bigint();

function one() {
  started++;
  running++;
  const opts = { stdio: ['ignore', 'pipe', 'pipe'], shell };
  const c = spawn('true', [], opts);
  c.stdout.on('data', () => {});
  c.stderr.on('data', () => {});
  c.on('close', () => {
    running--;
    finished++;
    if (finished === count) {
      const ns = Number(process.hrtime.bigint() - t0);
      process.stdout.write(`rate ${(count * 1e9) / ns}\n`);
      return;
    }
    while (running < live && started < count) one();
  });
}
while (running < live && started < count) one();
