// N-10: the guardian of a Node host's tasks (M-MCP-7 for Node hosts).
//
// index.js starts this once per host process, for the first registry
// created with { guardian: true }: `node guardian.js TOKEN`, detached (a
// session of its own, so the host's terminal and process group signals do
// not reach it), with stdin a pipe whose only writer is the host, and
// every task of such a registry carries UVTASKS_GUARDIAN=TOKEN in its
// environment.  When the pipe ends, the host is gone, however it went
// (SIGKILL, a crash, a normal exit): the guardian sends SIGKILL to every
// process that carries the token, again until none is left (a fork bomb
// is stopped too), and exits.
//
// Why the environment and not each task's session: it needs no message
// per task (no window between a spawn and its pid reaching the guardian),
// and it also finds what left the session (setsid, daemons).  A process
// that clears its environment (env -i) is out of its reach.  Why not the
// server's guardian (src/mcp/guardian.c): it is forked by uvtasks-mcp
// before its loop exists and tracks sessions through messages; forking a
// running Node process is not safe, and a separate program is what a
// Node host can start.
'use strict'
const fs = require('node:fs')

const token = process.argv[2]
const entry = `UVTASKS_GUARDIAN=${token}`

function carriesToken(pid) {
  let env
  try {
    env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1')
  } catch {
    return false
  }
  return env.split('\0').includes(entry)
}

// SIGKILL to every live process with the token; returns how many.
function sweep() {
  let n = 0
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue
    if (!carriesToken(d)) continue
    try {
      process.kill(Number(d), 'SIGKILL')
      n++
    } catch {}
  }
  return n
}

function hostGone() {
  // Until a pass finds none (zombies have no environment left to read).
  for (let i = 0; i < 50 && sweep() > 0; i++);
  process.exit(0)
}

for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {})
process.stdin.on('data', () => {})
process.stdin.on('end', hostGone)
process.stdin.on('error', hostGone)
process.stdin.on('close', hostGone)
