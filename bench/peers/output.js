// Peer for workload 3: read a command's stdout through Node's
// child_process.spawn.   node output.js head|dd MIB
// Prints "mib_per_s <value>".
'use strict';
const { spawn } = require('child_process');
const cmd = process.argv[2] || 'head';
const mib = Number(process.argv[3] || 256);
const args = cmd === 'dd'
  ? ['if=/dev/zero', 'bs=64K', `count=${mib * 16}`, 'status=none']
  : ['-c', String(mib * 1048576), '/dev/zero'];
let bytes = 0;
const t0 = process.hrtime.bigint();
const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] });
c.stdout.on('data', (chunk) => { bytes += chunk.length; });
c.on('close', () => {
  const ns = Number(process.hrtime.bigint() - t0);
  if (bytes !== mib * 1048576) {
    process.stderr.write(`output.js: got ${bytes} bytes\n`);
    process.exit(1);
  }
  process.stdout.write(`mib_per_s ${(mib * 1e9) / ns}\n`);
});
