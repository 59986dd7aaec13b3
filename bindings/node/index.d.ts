// Type declarations for uvtasks (§8 of docs/contract.md).
/// <reference types="node" />

/** A task's status: running -> (stopping) -> one of the three terminal ones. */
export type TaskStatus = 'running' | 'stopping' | 'completed' | 'killed' | 'failed'

/** A point-in-time copy of a task record; times are epoch milliseconds. */
export interface TaskSnapshot {
  id: string
  kind: string
  label: string
  /** Absent for unowned tasks. */
  ownerSession?: string
  status: TaskStatus
  /** "exit code: 3", "signal: SIGTERM", ... */
  detail?: string
  startedAt: number
  /** Absent while the task is live. */
  finishedAt?: number
  reported: boolean
  /** The first kill's (or teardown's) reason (R-KILL-2). */
  killReason?: string
  /**
   * N-7, process tasks only (no read needed, nothing consumed): the
   * leader's exit code once the task ended, else null (running, killed by
   * a signal, or no status).
   */
  exitCode?: number | null
  /** N-7: the signal that ended the leader ('SIGTERM'), else null. */
  signal?: NodeJS.Signals | null
  /**
   * N-7 / P-LEFT-1: processes of the task's session still running after it
   * ended (0 while it runs); kill() of the ended task stops them.
   */
  leftovers?: number
  /** N-13: true when the task was killed by its spawn() AbortSignal. */
  aborted?: boolean
}

export interface TaskRead {
  /** What is new (stream kinds, consumed: R-READ-1), or the final output. */
  text: string
  snapshot: TaskSnapshot
}

/** How a JS producer's work ended; `done` resolves with it. */
export interface TaskOutcome {
  status: 'completed' | 'killed' | 'failed'
  detail?: string
  output?: string | Uint8Array
}

/** What a JS producer's run() returns. */
export interface TaskHooks {
  /** Ask the work to stop; a throw fails the kill (R-KILL-1). */
  cancel(reason: string): void
  /** Settles at quiescence; a rejection settles `failed` with String(error). */
  done: PromiseLike<TaskOutcome>
  /**
   * Stream kinds: what was produced since the last call (R-READ-1).  N-9:
   * called once more when done settles; what it returns comes out before
   * the outcome's output.
   */
  readOutput?(): string | Uint8Array | undefined | null
}

export interface Agent {
  readonly id: string
  readonly session: string
  /** R-AGENT-1: stop and drop this agent's tasks, then resolve. */
  dispose(): Promise<void>
}

export interface TaskSpec {
  /** 1-64 bytes of printable ASCII without spaces; the id prefix. */
  kind: string
  label: string
  owner?: Agent
  /** Called once, synchronously, inside start(); a throw propagates. */
  run(): TaskHooks
}

/** L-LIM-1: see SpawnOptions.limits; 0 or absent = no limit on that. */
export interface ProcessLimits {
  /** Memory of the task, bytes (at least 1 MiB). */
  memoryBytes?: number
  /** Processes and threads alive at once. */
  maxProcesses?: number
  /** CPU time per wall time, percent of one core (150 = 1.5 cores). */
  cpuPercent?: number
}

/**
 * S-1..S-4: a bubblewrap sandbox for one task (uvtasks/process.h,
 * uvt_sandbox_t).  The host's file system is read-only inside except /tmp
 * (private), `writable` and, with fs 'workspace', the workspace (S-5:
 * `workspace`, else the task's cwd); the
 * `hidden` paths read as empty; network 'none' (the default) is no network
 * at all, loopback included.  A machine without bwrap, or without user
 * namespaces, makes spawn() throw ENOTSUP (S-3): never a run without it.
 */
export interface SandboxOptions {
  /** Default 'read-only'. */
  fs?: 'read-only' | 'workspace'
  /** Extra writable paths; each must exist (else ENOENT). */
  writable?: string[]
  /**
   * Paths that read as empty ("~/" is $HOME).  Default: ~/.ssh, ~/.aws,
   * ~/.gnupg, ~/.config/gh, ~/.netrc, ~/.npmrc, ~/.docker; [] = none.
   */
  hidden?: string[]
  /** Default 'none'. */
  network?: 'none' | 'host'
  /**
   * S-5: the directory fs 'workspace' makes writable, chosen apart from the
   * command's cwd (default: the cwd).  With one, the cwd must lie inside it
   * or a `writable` path once symlinks are followed, else spawn() throws
   * EPERM; a cwd chosen by someone else (a model) then widens nothing.
   * Must exist and be a directory (else ENOENT, ENOTDIR).
   */
  workspace?: string
}

export interface SpawnOptions {
  /** Run by bash (sh if there is no bash); or give `argv`. */
  command?: string
  /** argv[0] is looked up in PATH and run directly. */
  argv?: string[]
  owner?: Agent
  cwd?: string
  /**
   * Extra variables; they win over the inherited ones (P-SPAWN-3).  As in
   * node:child_process, an undefined value sets no variable.
   */
  env?: Record<string, string | undefined>
  /** Default 'bash'. */
  kind?: string
  /** Default: the command. */
  label?: string
  /** SIGTERM -> SIGKILL delay, default 3000 (P-KILL-1). */
  graceMs?: number
  /** How long pipes may stay open after the leader exited, default 500. */
  drainMs?: number
  /** Unread bytes kept per stream, default 1 MiB (P-OUT-2). */
  outputCapBytes?: number
  /** Stopped like a kill after this long; 0 = never (P-LIMIT-1). */
  maxRuntimeMs?: number
  /**
   * 'null' (default): /dev/null, so a command that reads gets end of file
   * at once; a string or bytes: that input, then end of file; 'pipe': kept
   * open for write() and closeStdin() (P-IN-1).  Not a string or bytes
   * together with `tty` (EINVAL).  The text 'pipe' or 'null' as input:
   * pass it as a Buffer.
   */
  stdin?: 'null' | 'pipe' | string | Uint8Array
  /**
   * Input bytes written and not yet taken by the child that a task may
   * have pending, default 1 MiB; a write() beyond it throws ENOBUFS and
   * queues nothing of it (P-IN-1).  0 with stdin 'pipe' or tty: EINVAL.
   */
  stdinCapBytes?: number
  /**
   * Run on a pseudo-terminal (P-PTY-1): the session's controlling terminal
   * and its stdin, stdout and stderr; one merged output stream; write()
   * goes through the line discipline (Enter is "\r", "\x03" interrupts the
   * foreground job), output has "\r\n" line ends and echoes input; TERM is
   * xterm-256color unless `env` gives one.  Always writable (`stdin` 'pipe'
   * is implied).
   */
  tty?: boolean
  /** S-4: run inside a bubblewrap sandbox (see SandboxOptions). */
  sandbox?: SandboxOptions
  /**
   * L-LIM-1..3: limits for the whole task, every process of it together,
   * enforced by a cgroup of its own (v2 where the controller is delegated,
   * else a v1 hierarchy of it).  Where no cgroup can enforce one, spawn()
   * throws ENOTSUP with the reason (never an unlimited run).  A task ended
   * by its memory limit is `killed`, "out of memory (limit 100 MiB)"; one
   * held at maxProcesses gets EAGAIN on fork and its detail says "process
   * limit reached (16)".
   */
  limits?: ProcessLimits
  /** The terminal's size in cells, default 80 x 24; 1..65535 (0: EINVAL). */
  cols?: number
  rows?: number
  /**
   * Never drop output (P-OUT-4): a stream at outputCapBytes is not read
   * until a read consumes some, so the child waits in write.
   */
  outputBackpressure?: boolean
  /**
   * "There is new output to read" (P-EVT-1): called with the task's id on
   * this thread inside a callback scope (N-2), at most once per loop
   * iteration, never after the task ended (its last bytes may come with no
   * call: read once more after wait()).  It carries no bytes; a call may
   * find them already read.  A throw is an uncaught exception, as for any
   * callback.  The binding holds the function until the task ends (or the
   * registry closes), not longer.
   */
  onOutput?: (id: string) => void
  /**
   * N-6: the output itself, as it is read: `chunk` (a Buffer, any bytes) of
   * `stream`, in order per stream.  The host is the reader: the package
   * reads (consumes) the output for it, with outputBackpressure, so
   * nothing is dropped; a slow callback slows the task instead.  The last
   * bytes are handed over before onTaskDone and wait hear of the end (that
   * read marks the task reported, R-READ-3).  A throw is an uncaught
   * exception, as for onOutput.  N-12: each chunk is the host's to keep
   * (a Buffer over the library's block, not copied again: for stdout
   * usually the memory the pipe was read into); the task's stdout pipe
   * holds 256 KiB.
   */
  onData?: (chunk: Buffer, stream: 'stdout' | 'stderr', id: string) => void
  /**
   * D-1: a durable task: it outlives this process (its end, SIGKILL, a
   * crash, process.exit(), the guardian) and close(), which leaves it
   * running; a later registry (this process's or another's) takes it back
   * with adopt().  Needs adopt(stateDir) called first on this registry
   * (the state directory holds its output, its end and a journal).  Not
   * with tty (EINVAL) nor sandbox (ENOTSUP).  kill(), maxRuntimeMs and
   * signal() act as for any task.
   */
  durable?: boolean
  /** N-6: make stdout(id)/stderr(id) available (implied by onData). */
  streams?: boolean
  /**
   * N-12: the most bytes onData (and the streams) get in one chunk, and
   * what the library holds unread per stream before it stops reading the
   * task (outputCapBytes has no effect with onData); default 65536 (as
   * child_process).  1..2^32; refused without onData or streams.
   */
  highWaterMark?: number
  /**
   * N-7: aborting it kills the task (kill(): the whole session, graceMs,
   * then SIGKILL), with killReason "aborted: <the abort's reason>".  An
   * already aborted signal kills it at once.
   */
  signal?: AbortSignal
}

/** What readProcess() returns (P-RES-1). */
export interface ProcessRead {
  /** New stdout bytes (a tty task: its one stream); no marker ever added. */
  stdout: Buffer
  /** New stderr bytes (always empty for a tty task). */
  stderr: Buffer
  /** Bytes of each stream lost to the cap since the previous read (P-OUT-2). */
  stdoutDropped: number
  stderrDropped: number
  /** true once the task ended (the snapshot is terminal). */
  exited: boolean
  /** The leader's exit status once it exited normally; else null. */
  exitCode: number | null
  /** The signal that ended the leader ('SIGTERM'); else null.  Both are
   * null for an ended task that never had a status (spawn failed, or a
   * kill came before the child existed). */
  signal: string | null
  snapshot: TaskSnapshot
}

export interface RegistryOptions {
  /** Per task, how long disposal waits for a cancelled producer; default 10000, 0 = for ever. */
  teardownGraceMs?: number
  /** Live tasks one owner may hold; default 0 = no limit (R-LIMIT-1). */
  maxLivePerOwner?: number
  /**
   * N-8/N-11: ended tasks kept with nothing left to read (read since
   * their end, onData's, or no output), reported or not; past it the
   * oldest is forgotten (never one that left processes running,
   * P-LEFT-1).  Default 100; Infinity keeps all.
   */
  keepFinished?: number
  /**
   * N-8/N-11: output bytes the ended tasks' records may hold, a task
   * with unread output counting at least 4 KiB; past it the oldest read
   * task holding bytes, else the oldest unread one, is forgotten (its
   * output lost: metrics() and a later UVT_ENOTASK say so).  A wait()
   * reads nothing.  Default 16 MiB; Infinity for no bound.
   */
  maxUnreadBytes?: number
  /**
   * N-10: start (once per host process) a guardian process that, when this
   * process ends in any way, SIGKILL included, stops every process of this
   * registry's tasks (those that kept UVTASKS_GUARDIAN in their
   * environment) within a second.  Costs one small Node process.
   */
  guardian?: boolean
  /**
   * P-SPAWN-7: spawn through small helper processes (one per spawner
   * thread) whose descriptor table and memory map do not grow with this
   * process, instead of from the spawner threads themselves.  Every
   * other behaviour is unchanged.  Default false (on the project's
   * runner no row won in every run; docs/performance.md).  Where no helper
   * can run, the spawner threads spawn as without it.  Throws the
   * system's error (EMFILE, ENOMEM) if a helper could not be made.
   */
  spawnHelper?: boolean
}

export interface RegistryMetrics {
  started: number
  completed: number
  killed: number
  failed: number
  kills: number
  forceFailed: number
  waitsTimedOut: number
  waitsAborted: number
  live: number
  records: number
  /** N-11: ended tasks the bounds forgot. */
  forgotten: number
  /** N-11: of those, the ones whose output nobody had read. */
  forgottenUnread: number
  /** N-11: that output's bytes. */
  unreadBytesDropped: number
}

/** N-13: kill() options. */
export interface KillOptions {
  /** 'SIGTERM' (default: graceMs, then SIGKILL) or 'SIGKILL' (at once). */
  signal?: 'SIGTERM' | 'SIGKILL' | 15 | 9
  reason?: string
  caller?: Agent
}

/** N-13: wait() options. */
export interface WaitOptions {
  /** Milliseconds; none = until the end (0, NaN, +-Infinity: EINVAL). */
  timeout?: number | null
  caller?: Agent
  signal?: AbortSignal
}

/**
 * Errors thrown (or rejected) by the registry: `code` is the registry's
 * name ('UVT_ENOTASK', 'UVT_EFOREIGN', 'UVT_ESTALE', 'UVT_ENOSURFACE',
 * 'UVT_ECLOSING', 'UVT_ELIMIT', 'UVT_EABORTED') or libuv's ('EINVAL',
 * 'ENOENT', 'EPIPE', 'ENOBUFS', ...); `errno` the library's negative code
 * (N-1).  A wrong argument type is a TypeError, code 'ERR_INVALID_ARG_TYPE';
 * a number out of its range a RangeError, 'ERR_OUT_OF_RANGE'; a NUL in a
 * string the library takes as a C string (command, argv, env, cwd, an id,
 * a name, a reason; not stdin or write() bytes) a TypeError,
 * 'ERR_INVALID_ARG_VALUE' (Node's own codes).
 */
export interface TaskError extends Error {
  code: string
  errno?: number
}

export class TaskRegistry {
  constructor(options?: RegistryOptions)
  /** R-SURF-1: returns detach() (idempotent). */
  attachSurface(name: string): () => void
  registerAgent(agentId: string, sessionId: string): Agent
  /** Returns the new id ('<kind>-<n>'). */
  start(spec: TaskSpec): string
  get(id: string, caller?: Agent): TaskSnapshot
  list(caller?: Agent): TaskSnapshot[]
  read(id: string, caller?: Agent): TaskRead
  kill(id: string, caller?: Agent, reason?: string): 'requested' | 'already-terminal'
  /** N-13: the options form; unknown keys throw ERR_INVALID_ARG_VALUE. */
  kill(id: string, options: KillOptions): 'requested' | 'already-terminal'
  /**
   * The terminal snapshot, or the live one once timeoutMs passed (R-WAIT-4).
   * An abort rejects with code 'UVT_EABORTED' unless the task already
   * settled (R-WAIT-5).  N-9: a timeout of 0, below 0, NaN or
   * +-Infinity rejects with EINVAL; undefined or null waits with no
   * deadline (until the task ends, the abort, or close()).
   */
  wait(id: string, timeoutMs?: number | null, caller?: Agent, signal?: AbortSignal): Promise<TaskSnapshot>
  /** N-13: the options form. */
  wait(id: string, options: WaitOptions): Promise<TaskSnapshot>
  /**
   * R-DONE-3: exactly once per terminal task; returns unsubscribe().
   * N-9: a listener that throws is logged to stderr; the others still run.
   */
  onTaskDone(listener: (snapshot: TaskSnapshot, owner?: Agent) => void): () => void
  /** R-FEED-1: every transition; `dropped` for a record's removal. */
  watch(callback: (snapshot: TaskSnapshot, dropped: boolean) => void): () => void
  /** R-FORGET-1: drop a terminal record now. */
  forget(id: string, caller?: Agent): void
  /**
   * Start a process task (contract §3); returns its id ('bash-1').  What can be
   * checked before the spawn throws (EINVAL, ENOENT, ENOTDIR, EACCES,
   * E2BIG, UVT_*), with nothing registered; the spawn itself then runs on
   * a spawner thread (P-SPAWN-6), and what only it can report (ENOEXEC,
   * EAGAIN, ...) settles the task `failed`, "spawn failed: NAME".
   */
  spawn(options: SpawnOptions): string
  /**
   * Input for a task started with stdin 'pipe' or tty (P-IN-1): queued in
   * order, never blocking.  Throws ENOBUFS (beyond stdinCapBytes; nothing
   * queued), EPIPE (after closeStdin(), after the child closed its end,
   * after the task ended), EINVAL (no pipe or terminal, not a process
   * task), UVT_ENOTASK, UVT_EFOREIGN.  An empty write only checks.
   */
  write(id: string, data: string | Uint8Array, caller?: Agent): void
  /**
   * End of input once what was written has gone: the pipe is closed, or on
   * a terminal its end-of-file character (Ctrl-D) is sent, which a program
   * reading lines takes as the end at the start of a line (wait for its
   * prompt first).  Again, or after the end: nothing.  Throws EINVAL (no
   * pipe or terminal), UVT_ENOTASK, UVT_EFOREIGN.
   */
  closeStdin(id: string, caller?: Agent): void
  /**
   * A tty task's new window size (P-PTY-1); the job gets SIGWINCH.  Throws
   * EINVAL (0, or a task without tty), EPIPE (the task ended or is
   * ending), a RangeError ERR_OUT_OF_RANGE beyond 65535, UVT_ENOTASK,
   * UVT_EFOREIGN.
   */
  resize(id: string, cols: number, rows: number, caller?: Agent): void
  /**
   * The structured read of a process task (P-RES-1): consumes what is new
   * on both streams (the cursor read() uses too); with outputBackpressure
   * it lets a stream stopped at its cap go on.  Throws EINVAL (not a
   * process task), UVT_ENOTASK, UVT_EFOREIGN.
   */
  readProcess(id: string, caller?: Agent): ProcessRead
  /**
   * N-6: the task's stdout / stderr as a Readable (the same one on every
   * call), for a task spawned with onData or streams: true: it ends after
   * the task's last bytes; a consumer that is behind pauses the task's
   * output.  Throws EINVAL for a live task spawned without them,
   * UVT_ENOTASK, UVT_EFOREIGN.  After the end: an empty stream.
   */
  stdout(id: string, caller?: Agent): import('node:stream').Readable
  stderr(id: string, caller?: Agent): import('node:stream').Readable
  /**
   * N-6: the task's stdin (stdin 'pipe' or tty) as a Writable: write()
   * returns false past its highWaterMark and 'drain' follows; what the
   * task's stdinCapBytes refuses is retried until taken; end() is
   * closeStdin().  Throws EINVAL (no pipe or terminal), UVT_ENOTASK,
   * UVT_EFOREIGN.
   */
  stdin(id: string, caller?: Agent): import('node:stream').Writable
  /**
   * The leader's pid, which is also its session and process group id; it
   * stays after the leader was reaped (the number may then be another
   * process's: stop the task through kill()).  `undefined` while the spawn
   * is still out: it runs on a spawner thread (P-SPAWN-6) and its pid is
   * known from a later turn of the loop, never in the turn that called
   * spawn() (the C library answers 0; JS gets undefined because
   * process.kill(0) and process.kill(-0) would signal the host's own
   * process group).  Throws ESRCH if the task never had a process (its
   * spawn failed, or a kill came first), EINVAL for a task that is not a
   * process task, UVT_ENOTASK, UVT_EFOREIGN.
   */
  pid(id: string, caller?: Agent): number | undefined
  /**
   * N-7: resolves with the leader's pid once the process exists; rejects
   * with the error that kept it from existing (code 'ENOEXEC', 'EACCES',
   * ... and syscall 'spawn'), ESRCH if a kill came first, UVT_ENOTASK,
   * UVT_EFOREIGN, EINVAL (not a process task).
   */
  spawned(id: string, caller?: Agent): Promise<{ pid: number }>
  /**
   * N-7 / P-KILL-8: send one signal to every process of the live task's
   * session (SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM, SIGKILL,
   * SIGCONT, SIGSTOP, SIGWINCH, by name or number), with no escalation:
   * the task stays live unless the signal ends it.  N-13: while its spawn
   * is still out the signal is queued, in order, and sent once the pid is
   * known ('queued'; dropped if the process never exists).  Throws EINVAL
   * (another signal, not a process task), ESRCH (the task ended),
   * UVT_ENOTASK, UVT_EFOREIGN.
   */
  signal(id: string, signal: NodeJS.Signals | number, caller?: Agent): 'sent' | 'queued'
  metrics(): RegistryMetrics
  /**
   * D-3: open `stateDir` (made, mode 0700, if missing) as this registry's
   * state directory and take back every durable task it holds whose end
   * was not reported yet and whose recorded owner is `owner` (an agent of
   * the same id and session; none: the unowned tasks), under its old id,
   * with its label; reads go on where they stopped; one that ended while
   * no host ran ends now with its real outcome (onTaskDone hears it
   * once).  Returns the ids taken back.  Throws EPERM (not yours, or
   * others may write it), EBUSY (another registry holds it, here or in
   * another process), ENOENT (no uvtasks-keeper beside the addon),
   * EINVAL (another directory than this registry's).  Call it before
   * spawning: an id already taken cannot be taken back.  Tasks taken back
   * have no onOutput/onData (they were the old host's).
   */
  adopt(stateDir: string, owner?: Agent): string[]
  /**
   * R-CLOSE-1: stop every task, then resolve.  Once closing, a second
   * close() rejects with UVT_ECLOSING (the first still resolves), and every
   * other call throws UVT_ECLOSING.  D-1: durable tasks are left running
   * (a later adopt() takes them back) unless `stopDurable` is true.
   */
  close(options?: { stopDurable?: boolean }): Promise<void>
}

/**
 * What this package has of contract §3b: all of it, always (the binding and
 * the library ship together); for code that must also run against builds
 * from before it.
 */
export const features: Readonly<{
  stdinPipe: true
  tty: true
  outputBackpressure: true
  onOutput: true
  readProcess: true
}>

/**
 * The version of the library compiled into the addon ("major.minor.patch",
 * uvt_version_string()), which is also the package's version.
 */
export const version: string
