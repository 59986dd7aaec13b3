/* uvtasks process producer: shell commands (or an argv) as stream-kind
 * tasks, each in a session of its own, stopped as a whole session
 * (docs/contract.md §3).
 *
 * Lifecycle of one task, as the producer sees it:
 *
 *   uvt_process_start()  checks; the record exists ("bash-1"), running;
 *                        the spawn runs on a spawner thread (P-SPAWN-6)
 *   child writes         stdout/stderr are buffered, capped per stream
 *                        (or, with output_backpressure, not read while at
 *                        the cap, P-OUT-4); on_output hears of it (P-EVT-1)
 *   uvt_process_write()  input for a stdin_pipe or pty task (P-IN-1)
 *   uvt_read()           returns and consumes what is new (P-OUT-1..3);
 *   uvt_process_read()   the same, stdout and stderr apart (P-RES-1)
 *   uvt_kill()           SIGTERM to the session, SIGKILL after grace_ms
 *   leader exits         reaped at once; pipes get drain_ms to reach EOF
 *   quiescence           leader reaped, pipes closed, every handle closed:
 *                        the task settles (P-END-1, P-END-2, P-KILL-2)
 *   kill of the ended    what it left running in its session is stopped
 *   task, disposal       (P-KILL-6, P-KILL-4)
 *
 * Which processes are the task (P-KILL-5): every process of its session,
 * the session whose id is the leader's pid (uvt_process_pid()), whatever
 * process group it is in: `set -m` jobs, which get groups of their own,
 * are stopped with the rest.  Each group of the session gets the signal
 * as a whole; the leader's group at once, the others after one pass over
 * /proc (batched per loop turn).  After the leader was reaped a process
 * counts as a member only while that is sure (P-KILL-3): the session id
 * has not been reused (no process has the leader's pid) and the process
 * started no earlier than the leader.  Where the host enabled it with
 * uvt_process_cgroups() (or the task has limits, L-LIM-1), a task is also
 * its own cgroup, and what left the session is stopped through that
 * group.  Without it (the default, and on a host that cannot create
 * groups) a process that left the session on purpose (`setsid cmd &`, a
 * daemon that double-forks into a new session) is still the task's while
 * it descends from it (S-11): a kill walks the leader's children before it
 * signals, every pass over /proc follows parent links out of the session,
 * and what was found once (pid and start time, and its session) stays the
 * task's after its parent dies and it is re-parented.  What left before
 * anything looked, and whose parent is gone, is out of reach (see
 * uvt_process_orphans() for a host that wants it stopped at its end).
 * Without /proc only the leader's group is reached.
 *
 * The leader is reaped by the library (waitpid on its pid, woken by a
 * pidfd; where pidfds are unavailable, by one SIGCHLD watch per registry
 * that reaps every exited leader per signal, with a re-check every second
 * so that a lost signal delays a task's end by at most that, P-REAP-2).  The
 * host must not reap children it did not spawn (waitpid(-1, ...)) nor ignore
 * SIGCHLD: a leader reaped elsewhere settles `failed`, "exit status lost:
 * reaped elsewhere".  A host that is a child subreaper or pid 1 inherits
 * the members of a session whose parents died; the library reaps those
 * that belong to a task it still holds (their own pids, nothing else),
 * on SIGCHLD and whenever it checks a session, so disposal's "the session
 * is gone" means reaped (P-REAP-1).  Members still running when their
 * task's record was dropped are the host's to reap.
 *
 * Ownership: the producer's per-task state is library-allocated and freed
 * by the library once the task has settled AND its record was dropped (the
 * release hook ran) AND every libuv handle it opened has been closed.  The
 * host never frees anything of it.  Every function here is called on the
 * loop thread, and every callback runs there; the spawns themselves run on
 * the registry's spawner threads (P-SPAWN-6), which touch no task state.
 * Per registry the producer keeps (until registry close): its spawner
 * threads and an async handle, an idle handle for batched passes, an
 * eventfd, and where needed an unreferenced SIGCHLD watch and timer, a
 * check handle for on_output calls and a timer for giving memory back.
 *
 * Interactive tasks (the contract §3b).  A stdin_pipe task's stdin is one end
 * of a Unix socket pair (see uvt_process_write()); a pty task runs on a
 * pseudo-terminal that is its session's controlling terminal, with the
 * master side close-on-exec in the host, so it reaches no child of this
 * or another task (P-SPAWN-5).  The terminal starts with the kernel's
 * settings (canonical mode, echo, ISIG, CR-LF on output) plus IUTF8:
 * what the task prints arrives with "\r\n" line ends, and what is
 * written is echoed until the program turns echoing off (a shell or REPL
 * with readline, a password prompt).  Its end of stream is EIO from the
 * master once every descriptor of the slave side is closed, after every
 * buffered byte (P-PTY-2); when the leader (the session leader) exits,
 * the kernel sends SIGHUP to the terminal's foreground group, and a job
 * that survives it and keeps the terminal open gets drain_ms like one
 * holding a pipe.
 *
 * Memory given back (issue #12).  Output lives in rings that grow up to
 * output_cap_bytes, then in read texts and outcomes, all from the
 * library's allocator.  With glibc, freed large blocks stay in the heap,
 * so after a burst of large outputs the producer calls malloc_trim(0)
 * once the burst is over (at least 4 MiB of blocks of 64 KiB or more
 * freed or handed over, then 100 ms without another, or 1 s after the
 * first); it only returns free pages to the system, the host's as well
 * as ours.  bench-output's burst rows measure it.
 *
 * Beyond docs/contract.md §3, and why:
 *  - uvt_process_pid() answers 0 while the spawn is out and
 *    UV_ESRCH for a task that never had a process: with P-SPAWN-6 the pid
 *    exists only once the spawner answered.
 *  - A kill before the child existed ends the task `killed`, "killed before
 *    it started" (P-KILL-2 names only the details of a child that ran).
 *  - uvt_process_leftovers() (what a kill of an ended task will stop) and
 *    uvt_process_cgroups() (an optional cgroup per task, P-KILL-5's "may")
 *    are additions.
 *  - A kill, the runtime limit and disposal end with nothing of the task
 *    left (P-KILL-7): after grace_ms every process still in the session
 *    (and cgroup) gets SIGKILL, leader reaped or not, again every 10 ms
 *    until none is left, and the task settles only then.  While the
 *    leader is gone and the grace runs, the session is looked at every
 *    10 ms (one batched pass over /proc), so a task whose members all
 *    die of SIGTERM settles at once.  A process that SIGKILL cannot end
 *    (uninterruptible sleep on a hung file system) holds the task at most
 *    10 s past the grace; then it settles anyway, with a log line.  A
 *    kill that comes after the leader exited on its own (while the output
 *    drains) keeps the task's own outcome (P-KILL-2) and stops what the
 *    leader left once the task settled, as a kill of the ended task does.
 *  - argv[0]'s PATH lookup is remembered per registry (see `argv`).
 *  - docs/contract.md §3b: stdin_pipe's "pipe" is a Unix socket pair, so that a
 *    write to a child that closed its end is UV_EPIPE and never SIGPIPE
 *    in the host; on a pty, uvt_process_close_stdin() sends the
 *    terminal's end-of-file character instead of closing (the terminal
 *    is also the output); uvt_process_resize() of an ended task is
 *    UV_EPIPE; with output_backpressure the drain keeps what the pipe
 *    holds beyond the cap (see uvt_process_start()); on_output may stay
 *    silent for the last bytes before the end (never after it);
 *    uvt_process_read_t's exit_code is -1 when the leader died of a
 *    signal or has no status.  The memory trim above is an addition.
 */
#ifndef UVTASKS_PROCESS_H
#define UVTASKS_PROCESS_H

#include "../uvtasks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults filled by uvt_process_options_init(). */
#define UVT_PROCESS_GRACE_MS 3000
#define UVT_PROCESS_DRAIN_MS 500
#define UVT_PROCESS_OUTPUT_CAP_BYTES (1024 * 1024)
#define UVT_PROCESS_STDIN_CAP_BYTES (1024 * 1024)
#define UVT_PROCESS_PTY_COLS 80
#define UVT_PROCESS_PTY_ROWS 24
/* L-LIM-1: the smallest memory limit, the largest CPU share. */
#define UVT_PROCESS_MEMORY_MIN (1024 * 1024)
#define UVT_PROCESS_CPU_PERCENT_MAX (100 * 1024)

/* "There is new output to read" (P-EVT-1): the task's id and the options'
 * on_output_data.  No bytes: read them with uvt_read() or
 * uvt_process_read().  See `on_output`. */
typedef void (*uvt_output_cb)(const char *id, void *on_output_data);

/* ---- Sandboxed tasks (S-1..S-4, docs/contract.md) ------------------------
 *
 * A process task may run inside a sandbox made by bubblewrap (`bwrap`, the
 * Debian package bubblewrap): mount, pid and IPC namespaces (and network,
 * with UVT_SANDBOX_NET_NONE), nothing of our own.  Where user namespaces
 * are allowed bwrap needs no privilege, so this works as root and as an
 * unprivileged user.  What the task sees (S-1):
 *
 *   /              the host's file system, read-only (writes: EROFS)
 *   workspace      writable with UVT_SANDBOX_FS_WORKSPACE, else read-only:
 *                  `workspace` (v4, S-5), or the task's cwd without one
 *   writable[]     writable, each (must exist at start)
 *   readonly[]     read-only again inside the writable places (v4, S-6)
 *   /tmp           a private, empty, writable tmpfs (gone with the task)
 *   /dev           a minimal one (null, zero, full, random, urandom, tty,
 *                  a private devpts); the task's terminal still works
 *   /proc          the task's own pid namespace: no process of the host
 *                  is visible, nor can it be signalled from inside
 *   hidden[]       directories read as empty, files as empty files
 *   sockets        hidden too, whatever hidden[] says: $XDG_RUNTIME_DIR
 *                  and /run/user/<uid> (the session bus, through which
 *                  `systemd-run --user` would run anything outside; the
 *                  agents), $SSH_AUTH_SOCK, /run/docker.sock: a Unix
 *                  socket on the file system can be connected to through
 *                  a read-only mount and from another network namespace
 *   network        none at all with UVT_SANDBOX_NET_NONE (not even the
 *                  host's loopback: a fresh namespace with only its own
 *                  `lo`); the host's with UVT_SANDBOX_NET_HOST
 *
 * As root the command runs with every capability dropped (`--cap-drop
 * ALL`), so it cannot remount what is read-only.  The environment is the
 * task's usual one (P-SPAWN-3: credential-looking variables are already
 * gone).
 *
 * How it is run (S-2).  The leader the library spawns is bwrap itself, in
 * the task's session as any leader: `env --ignore-signal=HUP,INT,QUIT,PIPE,
 * TERM,USR1,USR2 bwrap ... -- uvtasks-sandbox COMMAND` (v4, S-2, S-9: the
 * library's own program, installed in libexecdir, or the one
 * $UVTASKS_SANDBOX_HELPER names, bound inside at /dev/uvtasks-sandbox;
 * src/sandbox/uvtasks-sandbox.c says how it works).  bwrap's two
 * processes (the monitor, our child, and pid 1 of the sandbox) and the
 * program's two (its front, bwrap's command, and its keeper, the
 * command's parent and the subreaper of what the command leaves) ignore
 * the signals a kill or uvt_process_signal() sends, so they live exactly
 * as long as the command does, while the command gets every signal with
 * its default action as an unsandboxed one would (^C on a pty interrupts
 * the command, not the sandbox).  SIGKILL reaches them all.  Without the
 * program (not installed, no variable) the command runs through `env
 * --default-signal=(the same)` as in v3, and one log line at
 * UVT_LOG_WARN says what is lost (the honest status, the lifeline); a
 * variable naming nothing runnable fails the start with UV_ENOTSUP.
 * The choices, and why:
 *  - --unshare-pid: yes.  The task cannot see or signal the host's
 *    processes (nor read their environment through /proc), and everything
 *    the command starts, even what calls setsid() and so leaves the
 *    session, dies when the sandbox's pid 1 gets the kill's SIGKILL.  From
 *    the host every one of them is an ordinary process of the host's pid
 *    namespace, with a host pid, in the task's session (except what left
 *    it): the session kill, P-KILL-3's checks and the leftover count work
 *    unchanged.  bwrap's pid 1 stays while anything runs in the sandbox
 *    (and may outlive the command by a moment): it is signalled and waited
 *    for like any member, but bwrap's processes are not counted as what
 *    the task left running (P-LEFT-1, uvt_process_leftovers(): one
 *    `sleep 30 &` reads "exit code: 0; 1 process still running"); a kill
 *    of that ended task stops it and, with it, the whole sandbox.
 *  - --new-session: no.  It would put the command in a session of its own,
 *    out of the task's: the session kill, the leftover count and the
 *    terminal (a pty task's controlling terminal belongs to the task's
 *    session) would all lose it.  What it guards against, TIOCSTI into the
 *    controlling terminal, reaches nothing here: the only terminal a task
 *    can have is its own pty.
 *  - --die-with-parent: no.  It kills the sandbox when bwrap's monitor
 *    exits, which it does as soon as the command exits: background jobs
 *    (leftovers, P-LEFT-1) would die with the command.  What it is for
 *    (v4, S-9) is done by a lifeline instead: uvtasks-sandbox's keeper
 *    holds the write end of a pipe (descriptor 3) whose only read end is
 *    the host's, kept until the task's record is dropped; when it goes
 *    (the host killed, crashed, or done with the task), the keeper sends
 *    SIGKILL to every process of the sandbox, so nothing sandboxed
 *    outlives the host, with or without the MCP server's guardian.
 *  - --as-pid-1: no.  The command as pid 1 of its namespace would drop
 *    every signal from the host it has no handler for (a kill's SIGTERM,
 *    uvt_process_signal()), and its exit would kill its background jobs.
 *
 * What the task's outcome says (v4, S-2).  bwrap's monitor exits with
 * the command's exit status, and with 128 + N when the command died of
 * signal N (bwrap 0.8's --json-status-fd says no more than that), so the
 * library reads the command's own wait status from uvtasks-sandbox's
 * pipe instead: a sandboxed task's outcome reads exactly as the same
 * command's outside ("signal: SIGTERM" for a kill's SIGTERM, "signal:
 * SIGSEGV", "exit code: 143" for a command that exits 143 itself; a kill
 * that reached SIGKILL reads "signal: SIGKILL").  Without the program,
 * v3's reading: a death by signal N is "exit code: 128+N".  A leftover
 * count (P-LEFT-1) counts every process inside the sandbox, those that
 * left the session (setsid) too: each descends from bwrap's pid 1, which
 * stays in the session, so the task's cgroup or S-11's descent finds it,
 * and a kill signals it with the session.  uvt_process_pid()
 * gives bwrap's pid, which is the session and group id that everything
 * signalling the task uses (the MCP server's guardian, a host's kill(-pid,
 * 0) probe); the command's own pid is uvt_process_command_pid().
 *
 * Which bwrap (S-3): $UVTASKS_BWRAP when set (a path), else `bwrap` in
 * PATH.  The first sandboxed start of a registry for each network setting
 * runs that bwrap once with the same namespaces (`... -- env
 * --default-signal=... true`, on the loop thread, a few milliseconds) and
 * remembers the answer: no bwrap, a bwrap that cannot make the namespaces
 * (user namespaces refused: kernel.unprivileged_userns_clone=0,
 * user.max_user_namespaces=0, an AppArmor rule), or an `env` without
 * --default-signal (coreutils < 8.31) make that start, and every later
 * sandboxed start of the registry, fail with UV_ENOTSUP, and the reason
 * (bwrap's own message) is logged at UVT_LOG_ERROR.  The command never
 * runs without the sandbox it was asked to run in.
 *
 * What it does not do: it is no defence against a kernel exploit (it is
 * namespaces and mounts, no seccomp filter); the network is all or
 * nothing (no per-domain allowlist); what the task may read is everything
 * the user may read except the hidden paths; a Unix socket elsewhere on
 * the file system (the system bus, a database's; those under /tmp are
 * out of reach, /tmp being private) can still be connected to; and it
 * adds no limit on CPU, memory or processes (`limits` does that, L-LIM-1:
 * a sandboxed task takes them too, and cannot raise them, the cgroup
 * files being read-only inside). */
#define UVT_SANDBOX_FS_READONLY 0  /* only writable[] and /tmp */
#define UVT_SANDBOX_FS_WORKSPACE 1 /* workspace, writable[] and /tmp */
#define UVT_SANDBOX_NET_NONE 0     /* no network, loopback included */
#define UVT_SANDBOX_NET_HOST 1     /* the host's network */

/* not sized yet.  The options point at it (they do not hold it), so
 * their size does not cover it: its layout is fixed as of 0.3.0, and a
 * field added later needs a leading size field and an _init first (left
 * open: docs/contract.md §10h). */
typedef struct {
  /* UVT_SANDBOX_FS_READONLY (0) or UVT_SANDBOX_FS_WORKSPACE (1). */
  int fs;
  /* Extra writable paths (files or directories, absolute or relative to
   * the host's cwd), NULL-terminated; NULL = none.  Each must exist when
   * the task starts (else UV_ENOENT). */
  const char *const *writable;
  /* Paths that read as empty inside: a directory as an empty read-only
   * one, a file as an empty file.  "~/" at the start means the host's
   * $HOME.  Paths that do not exist are skipped.  NULL = the default
   * list: ~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh, ~/.netrc, ~/.npmrc,
   * ~/.docker; an empty list (just the NULL) = none. */
  const char *const *hidden;
  /* UVT_SANDBOX_NET_NONE (0) or UVT_SANDBOX_NET_HOST (1). */
  int network;
  /* v4 (S-6): paths inside the writable places that stay read-only (a
   * host's own files in the workspace: state it keeps there, a
   * repository's hooks), NULL-terminated; NULL = none.  Each (a file or
   * a directory, absolute or relative to the host's cwd) must exist when
   * the task starts (else UV_ENOENT); it is resolved with symlinks
   * followed and bound read-only over the writable bind, so a write
   * inside it fails with EROFS, and it cannot be removed, renamed or
   * replaced by a link from inside (it is a mount point there).  Every
   * directory between its writable root and it is bound onto itself
   * too, so no rename of a parent moves it out of its place.  One inside
   * another read-only path adds nothing; one outside every writable
   * place is read-only already and adds nothing; read-only wins over a
   * writable path inside it; a hidden path wins over both. */
  const char *const *readonly;
  /* v4 (S-5): the workspace, the one directory UVT_SANDBOX_FS_WORKSPACE
   * makes writable (read-only with UVT_SANDBOX_FS_READONLY), chosen by
   * the host apart from the command's cwd; absolute or relative to the
   * host's cwd, resolved with symlinks followed at each start; it must
   * exist and be a directory (else UV_ENOENT, UV_ENOTDIR).  With one, the
   * task's cwd (the host's cwd when the options give none), resolved with
   * symlinks followed, must lie inside the workspace or inside one of
   * writable[], else the start fails with UV_EPERM: a cwd of "/", "..",
   * or a link in the workspace naming a directory outside it widens
   * nothing.  The cwd is then only where the command starts (bwrap's
   * --chdir); the writable binds are the workspace and writable[], never
   * the cwd.  NULL (v3's behaviour): the task's cwd is the workspace;
   * a host that lets anyone else (a model's tool argument) choose the
   * cwd must set this, as uvtasks-mcp and the tools do. */
  const char *workspace;
  /* v4 (S-6): 0 (the default): a git repository at a writable root (the
   * workspace, each of writable[]) keeps what the host's own git runs
   * later outside the sandbox read-only inside it, as readonly[] would:
   * .git/hooks (made, empty, when missing), .git/config,
   * .git/config.worktree, the directory core.hooksPath names when it
   * lies in a writable place (husky's .husky), the hooks and config of
   * each submodule (.git/modules/NAME, NAME with '/' in it, and nested
   * ones, .git/modules/NAME/modules/...: 64 at most, 8 levels), every
   * file a config includes (include.path, includeIf.*.path, also from
   * ~/.gitconfig, ~/.config/git/config, /etc/gitconfig: an existing one
   * read-only, a missing one made an empty read-only file), and a .git
   * that is a file
   * (a worktree's or submodule's link to its git directory); .git itself
   * cannot be renamed or replaced.  Objects, refs and the index stay
   * writable: `git commit` works inside.  Only each root's own .git is
   * looked at, not repositories deeper in the tree (a scan of a whole
   * workspace has no bound: node_modules); a repository the task creates
   * later is its own.  1: .git stays writable like the rest. */
  int writable_git;
} uvt_sandbox_t;
/* ---- Limits per task (L-LIM-1..L-LIM-3, docs/contract.md §10d) ----------
 *
 * What a task may use, all of it together (every process of it, whatever
 * its session): enforced by the kernel through a cgroup of the task's own
 * (cgroup v2 where the registry's v2 directory has the controller, else a
 * cgroup v1 hierarchy of the controller where the host mounts one).  0 in
 * a field means no limit on that; all 0 (uvt_process_options_init())
 * means no limits and no cgroup for them.
 *
 *   memory_bytes   the task's memory (anonymous memory, page cache and
 *                  kernel memory charged to it; not swap).  Past it the
 *                  kernel reclaims, then its OOM killer ends a process
 *                  of the task; the task settles `killed`, "out of memory
 *                  (limit 100 MiB)" (L-LIM-2).  At least 1 MiB.
 *   max_processes  processes (and threads) alive at once; a fork past it
 *                  fails with EAGAIN, and the task's detail adds
 *                  "process limit reached (16)" (L-LIM-2).
 *   cpu_percent    CPU time per wall time, in percent of one core (150 =
 *                  one and a half cores), enforced over 100 ms periods:
 *                  the task is throttled, never ended, for it.  At most
 *                  100 * 1024.
 *
 * Where no cgroup can enforce a limit asked for, uvt_process_start() fails
 * with UV_ENOTSUP and logs why (uvt_process_limits_check() gives the
 * sentence): never an unlimited run.  Kills, the runtime limit and
 * disposal reach every process of the group (P-KILL-7). */
/* no size field of its own.  As a field of uvt_process_options_t and
 * uvt_tools_options_t it is covered by their size; uvt_process_limits_check()
 * takes it alone, so its layout is fixed: a new limit goes into the
 * enclosing options, never here. */
typedef struct {
  uint64_t memory_bytes;  /* 0 = no memory limit */
  uint32_t max_processes; /* 0 = no process limit */
  uint32_t cpu_percent;   /* 0 = no CPU limit; 100 = one core */
} uvt_process_limits_t;

/* Bytes the output cap is about to drop (M-TOOLS-10): the task's id, the
 * bytes (valid for the call only) and the options' on_drop_data.  See
 * `on_drop`. */
typedef void (*uvt_drop_cb)(const char *id, const char *bytes, size_t len,
                            void *on_drop_data);
/* Every byte of a task's output as it is read (M-TOOLS-17, v4): the task's
 * id, the stream (0: stdout, the merged stream or the terminal; 1:
 * stderr), the bytes (valid for the call only) and the options'
 * on_tee_data.  See `on_tee`. */
typedef void (*uvt_tee_cb)(const char *id, int stream, const char *bytes,
                           size_t len, void *on_tee_data);

/* What to run and how.  Initialise with uvt_process_options_init(); every
 * pointer is only read during uvt_process_start() (the strings are copied
 * or consumed before it returns).  Only its first `size` bytes are read
 * see "Option structs and the ABI" in uvtasks.h). */
typedef struct {
  /* sizeof the struct in the host's headers; set by
   * uvt_process_options_init().  0 is refused. */
  size_t size;
  /* The command, run by bash --norc (sh if there is no bash: no rc file
   * of the user's is read, even with a socket for stdin and SHLVL unset,
   * where bash -c alone reads ~/.bashrc).  Exactly one of
   * `command` and `argv` must be set.  The text never appears in any
   * process's argv (P-SPAWN-2): a fixed wrapper reads it from its
   * environment and unsets it before evaluating it.  Less than 128 KiB
   * (the kernel's limit for one environment string; longer is UV_E2BIG). */
  const char *command;
  /* NULL-terminated; run directly.  argv[0] with a '/' is used as it is
   * (relative to cwd); else it is looked up as execvp does, in the child's
   * PATH: the `env` entry PATH=... when given, else the host's.  The
   * registry remembers its last lookup (name, PATH, cwd) and reuses the
   * answer while that file is still executable, so a program put earlier
   * in PATH later is found only once the remembered one goes. */
  const char *const *argv;
  /* Task kind, default "bash"; label, default the command (or the argv
   * joined by spaces). */
  const char *kind;
  const char *label;
  /* NULL = unowned. */
  uvt_agent_t *owner;
  /* Working directory; NULL = the host's. */
  const char *cwd;
  /* Extra "NAME=value" entries, NULL-terminated; they win over the
   * inherited environment and the fixed additions (P-SPAWN-3, P-SPAWN-3b).
   *
   * The child's environment is the host's, minus every variable that
   * looks like a credential, plus fixed additions, plus these entries.
   * The rule (P-SPAWN-3b, M-MCP-14), on the name split into parts at every
   * character that is not a letter or digit (so at '_'), in any case:
   *  - a whole part is KEY, KEYS, APIKEY, ACCESSKEY, SECRETKEY,
   *    PRIVATEKEY, SECRET, SECRETS, TOKEN, TOKENS, AUTHTOKEN, ACCESSTOKEN,
   *    PASSWORD, PASSWORDS, PASSWD, PASS, PASSPHRASE, PAT, CREDENTIAL,
   *    CREDENTIALS, CREDS, PWD, JWT, COOKIE, COOKIES, AUTH, AUTHORIZATION,
   *    BEARER, DSN, WEBHOOK or WEBHOOKS: AWS_SECRET_ACCESS_KEY,
   *    GITHUB_TOKEN, MYSQL_PWD, CI_JOB_JWT, AUTH_HEADER, SENTRY_DSN,
   *    SLACK_WEBHOOK_URL go;
   *  - a part ends with PASSWORD, PASSWD, PASSPHRASE, PASS, TOKEN, SECRET
   *    or JWT (fused: PGPASSWORD, SSHPASS, GIT_ASKPASS, NGROK_AUTHTOKEN),
   *    unless the part is an ordinary word (BYPASS, COMPASS, ENCOMPASS,
   *    SURPASS, TRESPASS, OVERPASS, UNDERPASS): only the end counts, so
   *    PASSAGE and TOKENIZERS stay, and KEY is never fused (MONKEY stays);
   *  - or the value holds a password in a URL, `scheme://user:password@`
   *    (DATABASE_URL, REDIS_URL=redis://:pw@host, https_proxy); a URL
   *    with a user and no password (ssh://git@host) stays;
   *  - (v4) or the value is a credential by its form, whatever the name:
   *    an HTTP authorization ("Bearer x", "Basic x", "Authorization: x",
   *    "token x"), a private key ("...PRIVATE KEY-----"), a token with a
   *    well-known prefix (ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ glpat-
   *    xoxb- xoxp- xoxa- xoxr- xoxs- sk_live_ rk_live_ sk-ant-, an AWS key
   *    id AKIA + 16), or a connection string's "Password=" or "pwd="
   *    field; a part SESSIONID or SESSIONKEY;
   *  - (v4) git's configuration family (GIT_CONFIG_COUNT,
   *    GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>, GIT_CONFIG_PARAMETERS)
   *    goes whole, unless these entries hold GIT_CONFIG_COUNT: then the
   *    host's members are passed too (a value may be a credential, and a
   *    family missing a member breaks every git command).
   * PWD, OLDPWD and SSH_AUTH_SOCK (a socket path) always stay, as do
   * KEYBOARD_LAYOUT, MONKEY, TOKENIZERS_PARALLELISM and PATH.  Pass a
   * credential a command needs here (uvtasks-mcp: --pass-env NAME).
   *
   * The fixed additions make output plain and every interactive step
   * proceed without a person or fail at once: NO_COLOR=1 TERM=dumb
   * PAGER=cat GIT_PAGER=cat; EDITOR, VISUAL, GIT_EDITOR and
   * GIT_SEQUENCE_EDITOR are `true` (as if a person closed the editor
   * without a change: git rebase -i and git revert go on with git's own
   * text, git commit without -m stops with "Aborting commit due to empty
   * commit message"; GIT_EDITOR also overrides a repository's
   * core.editor); GIT_TERMINAL_PROMPT=0 (git fails instead of asking for
   * a password); PYTHONUNBUFFERED=1 (a server's "ready" line arrives when
   * printed). */
  const char *const *env;
  /* Bytes for the child's stdin, then end of file; NULL = /dev/null.  They
   * are copied into an in-memory file (memfd) that becomes the child's
   * stdin, so the host never blocks on a child that does not read. */
  const char *stdin_data;
  size_t stdin_len;
  /* SIGTERM -> SIGKILL delay after a kill request, default 3000. */
  uint64_t grace_ms;
  /* How long the pipes may stay open after the leader exited, default 500;
   * what is buffered then is read and the pipes are closed. */
  uint64_t drain_ms;
  /* Unread bytes kept per stream, default 1 MiB, at least 4 (P-OUT-2). */
  size_t output_cap_bytes;
  /* Stop the task like a kill this long after uvt_process_start() was
   * called; 0 = never (P-LIMIT-1, R-TIME-1). */
  uint64_t max_runtime_ms;

  /* ---- Interactive tasks and host-facing results (the contract §3b) ---- */

  /* 1: stdin is a pipe kept open for uvt_process_write() (P-IN-1); not
   * together with stdin_data.  0 (the default): stdin is /dev/null or
   * stdin_data, so a command that waits for input gets end of file at once
   * (C-05).  A pty task (below) is always writable; this is then ignored. */
  int stdin_pipe;
  /* Input bytes accepted by uvt_process_write() and not yet taken by the
   * pipe (or terminal) that a task may have pending; default 1 MiB, at
   * least 1.  A write that would go beyond it is refused whole
   * (UV_ENOBUFS). */
  size_t stdin_cap_bytes;
  /* 1: run on a pseudo-terminal (P-PTY-1, P-PTY-2): the terminal is the
   * session's controlling terminal and its stdin, stdout and stderr; reads
   * return its one stream (no "[stderr]" section), writes go through its
   * line discipline ("\x03" interrupts the foreground job), TERM is
   * xterm-256color unless `env` gives one.  Not together with stdin_data. */
  int pty;
  /* The terminal's size in character cells, default 80 x 24 (pty only;
   * both at least 1).  uvt_process_resize() changes it later. */
  uint16_t pty_cols, pty_rows;
  /* 1: never drop output (P-OUT-4): a stream whose unread bytes reach
   * output_cap_bytes is not read until a read consumes some, so the child
   * blocks in write.  0 (the default): the oldest unread bytes are dropped
   * beyond the cap (P-OUT-2).  See uvt_process_start() for the drain. */
  int output_backpressure;
  /* Optional (P-EVT-1): called on the loop thread when new output of this
   * task became readable, at most once per loop iteration (coalesced), and
   * never once the task ended (its last bytes may come with no call: the
   * end itself is what listeners and waits report).  A call says "there is
   * something": by the time the host reads, it may already have been read.
   * It names no caller: a task with an `owner` is read (and written) with
   * that agent as the caller, since a NULL caller never matches an owned
   * task (R-OWN-2, UVT_EFOREIGN), so keep the agent in on_output_data.
   * Any function of the library may be called from it (the task's own
   * kill, read or forget included). */
  uvt_output_cb on_output;
  void *on_output_data;

  /* ---- Sandboxed tasks (S-1..S-4) ---- */

  /* NULL (the default): no sandbox.  Else the task runs inside bwrap as
   * the uvt_sandbox_t above describes; read only during
   * uvt_process_start().  A start that cannot make the sandbox fails with
   * UV_ENOTSUP (S-3). */
  const uvt_sandbox_t *sandbox;

  /* ---- For tool results (M-TOOLS-12, M-TOOLS-15) ---- */

  /* 1: the child's stderr is a second descriptor of its stdout pipe, so
   * what it writes to either lands in the stdout stream in the order
   * written (as a terminal shows it), and reads have no "[stderr]" part.
   * 0 (the default): kept apart (P-OUT-1, P-RES-1).  Ignored with pty
   * (already one stream). */
  int merge_stderr;
  /* Keep the first this many bytes of each stream apart from its ring
   * until the stream is first read; 0 (the default) = none.  A stream that
   * dropped bytes at its cap before its first read then begins, in that
   * read's text, with those first bytes (up to their last newline; with
   * none, no character cut at their end and a newline added), then "[... N bytes dropped ...]\n"
   * counting only what is missing between them and the ring, so the true
   * beginning of a big output (a build's first error) is not lost.  The
   * structured read (uvt_process_read) does not show them. */
  size_t keep_head_bytes;
  /* Optional (M-TOOLS-10): called on the loop thread, in stream order,
   * with bytes the cap is about to drop (P-OUT-2), so a host can keep
   * them elsewhere (uvtasks-mcp's --spill-dir); `bytes` is valid for the
   * call only.  Exactly the bytes that more output pushes out come here:
   * a stream that holds output_cap_bytes and gets no more keeps them all.
   * The stream's id names the task; both streams come here.  It must not call
   * back into the library for this task. */
  uvt_drop_cb on_drop;
  void *on_drop_data;

  /* ---- Limits (L-LIM-1) ---- */

  /* Memory, processes and CPU for the whole task (uvt_process_limits_t
   * above); all 0 (the default) = none.  A durable task's (L-LIM-3) are
   * enforced by a cgroup that outlives the host, in `uvtasks-durable`
   * beside the registry's cgroup directory, recorded in the state
   * directory's journal and found again by the next host's
   * uvt_process_adopt_all(); its keeper is in the group too and is not
   * counted against max_processes. */
  uvt_process_limits_t limits;

  /* ---- v4: the whole output, once (M-TOOLS-17) ---- */

  /* Optional: called on the loop thread with every byte of the output as
   * it is read from the task's pipes or terminal, per stream, in the order
   * read and before the cap can drop any of it, also what the task's
   * leftovers write after its end (P-OUT-6): a host keeps the raw output
   * with it (uvtasks-mcp's spill files are exactly these bytes).  It must
   * not call back into the library for this task. */
  uvt_tee_cb on_tee;
  void *on_tee_data;

  /* ---- For hosts that take output as it comes (N-12) ---- */

  /* The kernel's buffer of the child's stdout pipe, in bytes (rounded up
   * by the kernel to a power of two of pages); 0 (the default): the
   * system's, 64 KiB on Linux.  What the library holds is still bounded
   * by output_cap_bytes: this is how far the child can write ahead of
   * the library's reads before it blocks, as a socket's send buffer is
   * (child_process's stdout socket holds about 208 KiB).  A host that
   * reads as output comes (the Node package's onData: 256 KiB) lets a
   * producer that is scheduled late write several reads' worth at once.
   * At most 1 MiB (larger is taken as 1 MiB); a size the system refuses
   * (above fs.pipe-max-size, or the user's pipe pages used up) leaves the
   * system's.  Each enlarged pipe counts against the user's pipe pages
   * (fs.pipe-user-pages-soft) while it exists.  Ignored with pty; stderr
   * keeps the system's size. */
  size_t stdout_pipe_bytes;

  /* ---- Tasks that outlive the host (D-1..D-7, docs/durable.md) ---- */

  /* 1: a durable task.  It runs detached from the host's life: its
   * output goes to files in the registry's state directory (opened by
   * uvt_process_adopt_all(), which must have been called first), its end
   * is recorded there by a small keeper process that owns the command
   * (uvtasks-keeper, the task's leader: the one process added per task),
   * and it does not end when the host, its loop or its registry ends,
   * crashes or is killed: a registry close or the owner's disposal
   * detaches it (the record settles `killed`, "detached: keeps running
   * as pid N", and is dropped without a notice) and the next host takes
   * it back with uvt_process_adopt_all().  A kill, max_runtime_ms and
   * uvt_process_signal() act on it as on any task (P-KILL-7), and so
   * does a close after uvt_process_stop_durable().  Reads, caps, drops,
   * UTF-8 and structured reads are as for pipes (P-OUT-*); the bytes go
   * through the files, so what the command writes while no host runs is
   * kept (up to the cap, as a pipe's ring would).  stdin is /dev/null,
   * stdin_data, or with stdin_pipe a FIFO in the state directory (which
   * a later host writes to as well); not with pty (UV_EINVAL: a terminal
   * dies with its host) nor sandbox (UV_ENOTSUP).  With `limits`, a
   * cgroup of its own that outlives the host (L-LIM-3, above); without,
   * none (not even with uvt_process_cgroups()).  Never through the spawn
   * helper.  See uvt_process_adopt_all() for what a restart keeps. */
  int durable;

  /* private */
  void *reserved_[2]; /* for fields to come without an ABI break */
} uvt_process_options_t;

/* Fill the first `size` bytes of `o` with the defaults and set o->size =
 * size: what the macro uvt_process_options_init(o) calls with the
 * host's sizeof *o.  The defaults: no command, kind "bash", unowned, the
 * host's cwd, no extra environment, stdin /dev/null, grace 3000 ms, drain
 * 500 ms, output cap 1 MiB per stream, no runtime limit; no stdin pipe
 * (1 MiB of pending input when one is asked for), no terminal (80 x 24
 * when one is), no backpressure, no on_output.  Writes nothing past
 * `size` bytes; bytes past the library's own struct are zeroed.  Accepts
 * NULL.
 * Ownership: nothing is allocated.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_process_options_init_size(uvt_process_options_t *o,
                                              size_t size);

/* uvt_process_options_init_size(o, sizeof(uvt_process_options_t)) with
 * this library's sizeof: for a host built against the same headers as
 * the library (a binding, a dlsym() user).  A C host gets the macro of this name.
 * Accepts NULL.  Thread: any.
 * Since: 0.1.0 */
UVT_EXTERN void uvt_process_options_init(uvt_process_options_t *o);
#define uvt_process_options_init(o)                                            \
  uvt_process_options_init_size((o), sizeof *(o))

/* Start a process task: check and prepare everything here, register the
 * task, and spawn the command (or argv) off the loop thread (P-SPAWN-6) in
 * a session of its own (P-SPAWN-1) with stdin /dev/null, the given bytes
 * or a pipe kept open (P-IN-1), stdout and stderr captured separately (or
 * all three on a terminal, P-PTY-1), the filtered environment (P-SPAWN-3)
 * and no descriptor of the host other than stdio (P-SPAWN-5).
 *
 * The spawn (P-SPAWN-6).  This call never waits for a child to exec: it
 * checks the options, that cwd exists and is a directory, that argv[0]
 * resolves in PATH (or that a shell exists), makes the pipes and stdin's
 * memfd (or socket pair, or the terminal), builds an immutable request
 * and returns the id; one of the
 * registry's spawner threads (one per core, at most 4, started with the
 * first spawn) runs posix_spawn and the loop hears the answer through an
 * async handle.  Until then the task is running like any other: get, read
 * (nothing yet), wait and kill work, uvt_process_pid() says 0.  A
 * kill, the runtime limit or a disposal before the child exists settles
 * it `killed` ("killed before it started", or "timed out after N ms")
 * without running the command; one that comes while the spawner is
 * already spawning reaches the child as soon as the answer brings its
 * pid, its grace counted from the kill.  Registry close with spawns out
 * answers the queued ones unspawned and joins the threads before its
 * callback (L-1).
 *
 * The task settles at quiescence (P-END-1): `completed` "exit code: N";
 * an end without a kill while processes of the session (or cgroup) still
 * run adds their count, "exit code: 0; 2 processes still running"
 * (P-LEFT-1; the detail keeps that count, uvt_process_leftovers() gives
 * the count of the moment);
 * `killed` "signal: NAME" when the leader itself died of a signal, and
 * only then (P-END-3: a status above 128 that a program or the shell
 * returned, as `exit 130` or a shell whose last command was killed, is
 * "exit code: N"; no status makes the task stop or hang); after a kill
 * request `killed` "signal: NAME" or "exit code: N after kill request";
 * after max_runtime_ms `killed` "timed out after N ms", N being what
 * really elapsed from this call to the SIGTERM (at least max_runtime_ms),
 * unless the leader had ended on its own before any SIGTERM went out
 * (its own outcome then, even when a stalled loop heard of its spawn and
 * its exit only after the limit passed); `failed` "spawn failed: NAME"
 * when the spawn itself failed (below).
 * Every duration (max_runtime_ms, grace_ms, drain_ms, the grace of
 * disposal's stop) counts from the call or event that starts it, even
 * when the host blocked its loop before calling (R-TIME-1).  A kill (the
 * cancel hook) sends SIGTERM to the session and, once grace_ms has passed,
 * SIGKILL to every process still in it, repeated until none is left,
 * whether or not the leader exited; a second kill sends SIGKILL at once
 * (P-KILL-1, P-KILL-5, P-KILL-7).  A killed task settles only when nothing
 * of its session is left: at most about grace_ms + 1 s after the kill.
 *
 * Reads (uvt_read) return the new stdout bytes, then, if stderr has new
 * bytes, a line "[stderr]" (preceded by a newline when the stdout part
 * did not end with one) and those bytes (P-OUT-1).  A stream that dropped
 * bytes at its cap starts with "[... N bytes dropped ...]\n" (P-OUT-2).
 * An incomplete trailing UTF-8 sequence waits for the rest or the end of
 * the stream; bytes that are not UTF-8 pass through (P-OUT-3).  A pty
 * task has one stream, so its reads have no "[stderr]" part (P-PTY-1).
 *
 * Output backpressure (P-OUT-4).  With output_backpressure a stream whose
 * unread bytes reach output_cap_bytes is not read (the child blocks in
 * write once the pipe, or the terminal's buffer, is full) until a read of
 * either kind consumes some; nothing is dropped (except bytes that could
 * not be stored because memory ran out, which are counted as dropped).
 * The drain still bounds the task: drain_ms after the leader's exit the
 * streams are read of what they hold, at most 1 MiB each beyond the cap
 * (a pipe holds 64 KiB unless its writer enlarged it, at most 1 MiB by
 * default), kept beyond the cap so that no byte that reached the pipe is
 * lost, and closed; a job still writing then gets EPIPE (or SIGPIPE).  So
 * a task whose host does not read ends drain_ms after its leader, with
 * everything its leader wrote.
 *
 * Returns 0, or an error found before the spawn (P-SPAWN-4): UV_EINVAL
 * (NULL reg or o; none or both of command and argv; an empty or blank
 * command, whatever the label; an empty argv or an empty argv[0]; an env
 * entry without '='; output_cap_bytes < 4; stdin_data with stdin_pipe
 * or pty; stdin_cap_bytes 0 with stdin_pipe or pty; pty_cols or pty_rows
 * 0 with pty), the errors of uvt_start()
 * (UVT_ENOSURFACE, UVT_ESTALE, UVT_ECLOSING, UVT_ELIMIT, UV_ENOMEM, ...),
 * UV_ENOENT (no such cwd, argv[0] not found, no shell), UV_ENOTDIR (cwd is
 * not a directory), UV_EACCES (cwd or argv[0] not accessible),
 * UV_ENAMETOOLONG, UV_E2BIG (the command or one argument beyond the
 * kernel's 128 KiB for one string), UV_EMFILE or UV_ENFILE (no descriptor
 * for the pipes, the socket or the terminal), or the error of opening a
 * pseudo-terminal (posix_openpt, grantpt, unlockpt: UV_ENOENT without
 * /dev/ptmx, UV_EAGAIN when the system has no more); with `sandbox`:
 * UV_ENOTSUP (no sandbox can be made, S-3: the reason is logged),
 * UV_EINVAL (fs or network not one of the constants), UV_ENOENT (a
 * writable, read-only or workspace path does not exist), UV_ENOTDIR (the
 * workspace is not a directory), UV_EPERM (S-5: the cwd, resolved, lies
 * outside the workspace and every writable path), UV_ENAMETOOLONG.  On
 * error nothing is
 * registered, no id number is used and no child exists; handles opened for the
 * attempt are closed through the loop (run it to let their close callbacks
 * finish).  An error only the spawn itself reports (exec refusing the file,
 * ENOEXEC; an environment and arguments too big together, E2BIG; no process
 * left, EAGAIN; a cwd removed in between) settles the registered task `failed`,
 * "spawn failed: NAME" (the libuv error name), with no child and every
 * handle closed.
 * Ownership: every option is copied or consumed before this returns.
 * Thread: the loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_process_start(uvt_registry_t *reg,
                                 const uvt_process_options_t *o,
                                 char id_out[UVT_ID_MAX]);

/* The leader's pid, which is also the task's process group and session id.
 * It stays the value the task had after the leader was reaped (the number
 * may then belong to another process: signal it only through the registry).
 *
 * Returns the pid (> 0), 0 while the spawn is out (P-SPAWN-6: the pid is
 * known from the loop turn in which the spawner's answer arrives),
 * UV_ESRCH if the task never had a process (its spawn failed, or a kill
 * came first), UV_EINVAL (NULL reg or id, or a task that is not a process
 * task), UVT_ENOTASK, UVT_EFOREIGN (R-OWN-2).
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.1.0 */
UVT_EXTERN int uvt_process_pid(uvt_registry_t *reg, const char *id,
                               const uvt_agent_t *caller);

/* The pid of the command itself (S-2): for a sandboxed task the process
 * bwrap started (a host pid: the host's kill(2) reaches it), for any
 * other task the same as uvt_process_pid().  Found through /proc while
 * the task runs (down from bwrap's monitor through bwrap's pid 1 and
 * uvtasks-sandbox's two processes, the first child of each, to the first
 * process that is none of them) and remembered from then on.
 *
 * Returns the pid (> 0), 0 while the spawn is out or the sandbox is not
 * made yet, UV_ESRCH (no process, or the sandbox ended before its
 * command was seen), UV_EINVAL, UVT_ENOTASK, UVT_EFOREIGN.
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_command_pid(uvt_registry_t *reg, const char *id,
                                       const uvt_agent_t *caller);

/* Contain every task this registry starts from now on in a cgroup v2
 * group of its own as well as its session (P-KILL-5, S-11), so that a
 * kill, the runtime limit and disposal also stop what left the session
 * (`setsid cmd &`, a daemon that double-forks): SIGTERM to every process
 * of the group, SIGKILL through its cgroup.kill.
 *
 * Off unless asked for (S-11: the C and Node APIs keep it opt-in because
 * it costs more than a tenth of the spawn rate; uvtasks-mcp turns it on).
 * The child enters its group before it execs, from a clone that shares
 * the spawner thread's memory (as posix_spawn's, so the host's size does
 * not matter) rather than posix_spawn itself, and each task's first
 * process costs the kernel a set of links to its groups; empty groups are
 * reused rather than removed.  Measured on this project's 2-core runner:
 * 0.67x to 0.82x of the plain rate (docs/performance.md).  And only the
 * owner of a cgroup subtree (a delegated systemd unit, a container's own
 * hierarchy) may create groups in it.
 *
 * The registry gets a directory `uvtasks-<pid>-<n>` in `parent_dir` (a
 * cgroup v2 directory the host may write; NULL = the host's own cgroup,
 * found through /proc/self/cgroup and /proc/self/mountinfo), each task a
 * group in it, removed when the task is freed; the directory is removed
 * at registry close (a warning is logged if something was left).  The
 * child enters its group before it execs, so everything the command
 * starts is in it.  A task whose group could not be made runs without one
 * (logged once per registry); one whose child could not enter it is a
 * failed spawn ("spawn failed: NAME"), never a run outside it.  uvt_process_leftovers() counts
 * the group's processes too.
 *
 * Returns 0, UV_EINVAL (NULL reg), UV_EALREADY (enabled before),
 * UV_ENOSYS (no cgroup v2 there), UVT_ECLOSING, UV_ENOMEM,
 * UV_ENAMETOOLONG, or the error of mkdir (UV_EACCES, UV_EPERM, UV_EROFS,
 * UV_ENOENT, ...).
 * Ownership: parent_dir is only read during the call.
 * Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_cgroups(uvt_registry_t *reg, const char *parent_dir);

/* Can this registry enforce `limits` (L-LIM-1)?  Looks for the cgroup
 * hierarchies they need (once per registry: the host's own cgroup v2
 * directory, then a cgroup v1 hierarchy per controller that v2 does not
 * have) and makes the registry's directory in each.  uvt_process_start()
 * makes the same check for a task with limits; a host calls this to learn
 * at start-up whether its limits will hold, and why not.
 *
 * Returns 0 (every limit asked for can be enforced), UV_ENOTSUP (one
 * cannot: `why`, when not NULL, gets a sentence naming the controller and
 * what is missing, cut to `size` - 1 bytes), UV_EINVAL (NULL reg or
 * limits; memory_bytes below 1 MiB or cpu_percent above 102400, and then
 * `why` names the field and its bound), UVT_ECLOSING, UV_ENOMEM.
 * Ownership: `why` is the caller's.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_limits_check(uvt_registry_t *reg,
                                        const uvt_process_limits_t *limits,
                                        char *why, size_t size);

/* S-11: this host is a child subreaper (PR_SET_CHILD_SUBREAPER, or pid 1)
 * and, from this call on, every child it gets other than the children it
 * has now is this registry's: a task leader, or a process of a task
 * re-parented to it when its parent died (uvtasks-mcp is such a host).
 * Then such a process that no task claims (it left its task's session and
 * its parent died before a kill, a limit or a look of the task followed
 * its descent) is reaped by the library when it exits (no zombie stays),
 * and at registry close every one still running gets SIGKILL, and so does
 * what it started (re-parented in turn), so nothing a task started
 * outlives the host's end.  Call it once, after making the host a
 * subreaper and before the first task; a host that spawns children of
 * its own (Node's child_process), or whose uvt_process_guardian() runs
 * (the guardian is re-parented to a subreaper host), must not call it:
 * they would be taken for strays.
 *
 * Returns 0, UV_EINVAL (NULL reg), UVT_ECLOSING, UV_ENOMEM.
 * Ownership: nothing is allocated for the caller.  Thread: the loop
 * thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_orphans(uvt_registry_t *reg);

/* The spawn helper on (`on` nonzero) or off for the registry's later
 * starts (P-SPAWN-7).  The helpers are small processes, one per spawner
 * thread, made by the first call that turns them on (off by default, see
 * below); each creates task leaders for its spawner thread: it shares the
 * host's memory (nothing is copied) but has a descriptor table of its own
 * with four entries (0-2 on /dev/null and its socket), so a spawn's cost
 * does not grow with the host's descriptors.  Its leaders are the
 * host's own children (clone(2) with CLONE_PARENT), so every clause of
 * the process producer holds unchanged: the same sessions, stdio, pty,
 * environment, cwd, descriptor hygiene (0..2 only), start errors, reaping
 * and kills.  A task with a cgroup of its own (uvt_process_cgroups(),
 * limits) is still spawned by the spawner thread itself, as is every task once the
 * helper has died (it is noticed by the next spawn; a spawn it had in
 * hand is finished by the thread, or adopted if the helper had made the
 * child).  The helper ends at registry close, at end of file on its
 * socket (close-on-exec: a host that execs ends it) and with the thread
 * that made it (PR_SET_PDEATHSIG); the registry reaps it.  A forked child
 * of the host never uses its parent's helper.
 *
 * What it needs, as found on Linux 6.x with glibc 2.36: clone() with
 * CLONE_VM | CLONE_PIDFD for the helper and CLONE_VM | CLONE_VFORK |
 * CLONE_PARENT | CLONE_PARENT_SETTID for each leader (glibc 2.36 has no
 * clone3() wrapper; clone(2) has every flag needed, and CLONE_PARENT is
 * refused only to a pid namespace's init).  Not under valgrind (which
 * refuses CLONE_VM without CLONE_VFORK or CLONE_THREAD) nor in a build
 * with ThreadSanitizer.
 *
 * Off by default: on this project's 2-core runner (Linux 6.18) no row won
 * in every run (four full runs of one night: argv 0.97x to 1.07x of off,
 * shell 0.99x to 1.14x; in the last, 500 idle tasks at 0.99x of plain
 * against 0.88x off, the start call's p99 slower by 25 us, the loop's
 * lateness during spawn storms 0.4x of off's; docs/performance.md).
 *
 * A helper that is stopped (SIGSTOP, a debugger) holds the spawns it
 * was handed, and the tasks queued behind them, until it runs again: a
 * helper blocks every signal, so only SIGSTOP or ptrace can do that.  A
 * registry close force-fails those tasks at its grace and then waits for
 * the helper; the children it makes once it runs again are killed and
 * reaped before the close callback.  Turning the helper off leaves the
 * running helpers in place (idle) until registry close.  A host that
 * execs leaves its helpers, ended, as zombies of the new program.
 *
 * Returns 0, UV_EINVAL (NULL reg), UVT_ECLOSING (the registry closes and
 * no process was started in it; a call earlier in a close starts helpers
 * that the close ends and reaps), UV_ENOMEM, UV_ENOTSUP
 * (no helper possible here, or it died: the spawner threads spawn), or
 * the error of making its socket or thread.
 * Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_spawn_helper(uvt_registry_t *reg, int on);

/* The number of live processes in the task's session (P-KILL-5): for a
 * live task its leader and everything it started that stayed in the
 * session; for an ended task what it left running there (`server &`),
 * which a kill of the ended task stops (P-KILL-6).  One pass over /proc
 * now; zombies count as gone (those reparented to a subreaper host are
 * reaped on the way, P-REAP-1).  A surface calls it before a kill to say
 * what the kill will stop.
 *
 * Returns the count (>= 0), UV_EINVAL (NULL reg or id, or a task that is
 * not a process task), UVT_ENOTASK, UVT_EFOREIGN (R-OWN-2).
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_leftovers(uvt_registry_t *reg, const char *id,
                                     const uvt_agent_t *caller);

/* P-OUT-6 (v4): whether the ended task's output is still read.  A task
 * that ended on its own while what it left running (`server &`) holds its
 * stdout or stderr (or its terminal) settles `drain_ms` after its leader's
 * exit without closing them: the leftovers write on (no SIGPIPE or EPIPE
 * from us), what they write is kept (capped like any output, drops
 * counted, on_drop called) and uvt_read() and uvt_process_read() of the
 * ended task return it.  The pipes close at their end of file (the last
 * holder exited), at a kill of the ended task (uvt_kill(), P-KILL-6: what
 * they still hold is read first), when the record is dropped (forget,
 * disposal, registry close), and at once for a task that was killed or
 * hit its runtime limit.  on_output is not called after the end (P-EVT-1).
 *
 * Returns 1 (ended, and a stream is still open and read), 0 (running,
 * ended with its streams closed, or a kill of the ended task is stopping
 * what holds them), UV_EINVAL (NULL reg or id, not a process
 * task), UVT_ENOTASK, UVT_EFOREIGN (R-OWN-2), UVT_ETHREAD.
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_reading(uvt_registry_t *reg, const char *id,
                                   const uvt_agent_t *caller);

/* Send `signum` to every process of a live task's session (P-KILL-8), as
 * a terminal's Ctrl-C (SIGINT) or a supervisor's reload (SIGHUP) would:
 * the leader's process group at once, the session's other groups (`set
 * -m` jobs) from a pass over /proc made by the call, the task's cgroup
 * too where it has one.  No escalation follows: the task stays live unless
 * the signal ends it, and then it settles as a death by that signal
 * ("signal: NAME", P-END-2) when the leader itself died of it.  The
 * leader of a `command` task is the shell: a shell that ignores the
 * signal (bash ignores SIGQUIT; one in a sandbox is the library's own
 * program) outlives the command it ran and exits 128 + N, which reads
 * "exit code: N" as any exit status does (P-END-3: nothing is guessed
 * from a status); an `argv` task's leader is the program itself.  A kill
 * is still uvt_kill() (SIGTERM, then
 * SIGKILL).  Each process gets the signal once, and calls made one after
 * the other arrive in their order (SIGSTOP then SIGCONT leaves the task
 * running); SIGSTOP goes to each process, not to its group.  A SIGTERM,
 * here as in a kill, is followed by SIGCONT, so that a stopped process
 * acts on it.
 *
 * Allowed: SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM, SIGKILL,
 * SIGCONT, SIGSTOP, SIGWINCH.
 *
 * Returns 0 (sent), UV_EINVAL (a signal outside that list, NULL reg or
 * id, or a task that is not a process task), UVT_ENOTASK, UVT_EFOREIGN
 * (R-OWN-2, the fence of uvt_kill()), UV_ESRCH (the task ended, or its
 * leader exited and it is ending: P-KILL-3 forbids signalling it; a kill
 * of the ended task stops what it left), UV_EAGAIN (the spawn is still
 * out, P-SPAWN-6: there is no process yet), UV_EPERM (the kernel refused).
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_signal(uvt_registry_t *reg, const char *id,
                                  const uvt_agent_t *caller, int signum);

/* Write `len` bytes to the task's stdin (P-IN-1): its pipe (stdin_pipe)
 * or its terminal (pty).  The bytes are copied; they go out in the order of
 * the calls, without ever blocking the loop: what the pipe or terminal
 * cannot take now waits in the task's queue and goes out when it can.  A
 * write to a task whose spawn is still out (P-SPAWN-6) is accepted the same
 * way and read by the child once it exists.  On a terminal the bytes go
 * through its line discipline: "\x03" (Ctrl-C) sends SIGINT to the
 * foreground job, "\x04" (Ctrl-D) at the start of a line is end of file,
 * and the terminal echoes what it receives unless the program turned
 * echoing off.  A write of 0 bytes checks the task and queues nothing.
 *
 * The pipe is a Unix socket pair (the child's end blocking, ours shut for
 * reading): a write to a child that closed its end reports EPIPE, where a
 * pipe would raise SIGPIPE in the host.  A pty task writes to the master
 * side of its terminal.
 *
 * Returns 0 (accepted: written or queued), UV_ENOBUFS (the pending bytes
 * plus `len` would exceed stdin_cap_bytes; nothing of this write was
 * written or queued, so it may be retried as it is), UV_EPIPE (the child
 * closed its end, as `head -c 1` does when it exits, or nobody holds it
 * any more; or uvt_process_close_stdin() was called; or the task reached
 * quiescence: its leader was reaped and its output closed, or it
 * settled), UV_EINVAL (NULL reg or id, NULL bytes with len > 0, a task
 * started without stdin_pipe or pty, or not a process task),
 * UVT_ENOTASK, UVT_EFOREIGN (R-OWN-2), UV_ENOMEM (nothing written or
 * queued).  A child that closes its end while bytes are queued is seen at
 * the next write attempt: those bytes, and any queued at quiescence, are
 * discarded (nobody would read them); the write that finds it out returns
 * UV_EPIPE.
 * Ownership: `bytes` is only read during the call.
 * Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_write(uvt_registry_t *reg, const char *id,
                                 const uvt_agent_t *caller, const char *bytes,
                                 size_t len);

/* End the task's input (P-IN-1): once the bytes queued by
 * uvt_process_write() have gone out, a pipe is closed (the child reads end
 * of file) and a terminal receives its end-of-file character (VEOF,
 * Ctrl-D unless the program changed it), which a program reading lines
 * takes as end of file when it comes at the start of a line.  Later writes
 * give UV_EPIPE.  Calling it again, or after the child closed its end or
 * the task ended, does nothing and returns 0.
 *
 * Returns 0, UV_EINVAL (NULL reg or id, a task without stdin_pipe or pty,
 * not a process task), UVT_ENOTASK, UVT_EFOREIGN.
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_close_stdin(uvt_registry_t *reg, const char *id,
                                       const uvt_agent_t *caller);

/* Change a pty task's window size (P-PTY-1): TIOCSWINSZ on its terminal,
 * so the kernel sends SIGWINCH to the terminal's foreground job
 * (`tput cols`, `stty size` and full-screen programs see the new size).
 * Before the spawn, it sets the size the child starts with.
 *
 * Returns 0, UV_EINVAL (NULL reg or id, cols or rows 0, a task without
 * pty, not a process task), UV_EPIPE (the task ended or is ending: its
 * terminal is closed), UVT_ENOTASK, UVT_EFOREIGN, or the error of the
 * ioctl.
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_resize(uvt_registry_t *reg, const char *id,
                                  const uvt_agent_t *caller, uint16_t cols,
                                  uint16_t rows);

/* A structured read (P-RES-1): see uvt_process_read(). */
typedef struct {
  /* The new stdout bytes (a pty task: the terminal's one stream) and the
   * new stderr bytes (always empty for a pty task).  Each is
   * NUL-terminated after its length and may hold any bytes (a NUL too);
   * never NULL after a successful read.  No notice or marker is ever added
   * to them. */
  char *out;
  size_t out_len;
  char *err;
  size_t err_len;
  /* Bytes of each stream lost since the previous read (P-OUT-2: the cap
   * dropped them; also the bytes of a character cut by a drop, and any
   * bytes lost because memory ran out).  Always 0 with
   * output_backpressure, unless memory ran out. */
  uint64_t out_dropped, err_dropped;
  /* 1 once the task ended (the snapshot is terminal), else 0 and the two
   * below are 0.  When it ended: exit_code is the leader's exit status
   * (0..255) and term_signal 0; or exit_code -1 and term_signal the signal
   * that killed the leader (SIGTERM = 15); or both -1 and 0 when there is
   * no status: the spawn failed, a kill came before the child existed, or
   * the leader was reaped elsewhere.  The snapshot's status and detail say
   * the same in words (P-END-2, P-KILL-2). */
  int exited;
  int exit_code;
  int term_signal;
  uvt_snapshot_t snapshot;
  /* private */
  void *reserved_[4]; /* for fields to come without an ABI break */
} uvt_process_read_t;

/* Read and consume what the task produced since the previous read, stdout
 * and stderr apart (P-RES-1).  It shares the task's cursor with uvt_read()
 * (R-READ-1): bytes one of them returned, the other never returns; hosts
 * may mix them.  uvt_read() keeps its text format (P-OUT-1..3), for
 * models; this one is for programs.  The UTF-8 rule of P-OUT-3 holds for
 * each stream: an incomplete trailing sequence waits for the rest.  Once
 * the task ended, the first read returns what was left unread and later
 * ones empty streams; a read that finds the task ended marks it reported
 * (R-READ-3), as uvt_read() does.  With output_backpressure a read also
 * lets a stream stopped at its cap be read again (P-OUT-4).
 *
 * Returns 0 and fills *out (free it with uvt_process_read_cleanup()),
 * UV_EINVAL (NULL reg, id or out, not a process task), UVT_ENOTASK,
 * UVT_EFOREIGN (R-OWN-2), UV_ENOMEM.  On error *out is zeroed and nothing
 * was consumed.
 * Ownership: *out's buffers and snapshot are the caller's.
 * Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_read(uvt_registry_t *reg, const char *id,
                                const uvt_agent_t *caller,
                                uvt_process_read_t *out);

/* The task's exit status without reading anything (N-7): *exited is 1
 * once the task ended, and *exit_code / *term_signal are then as in
 * uvt_process_read_t (the leader's status 0..255 and 0; -1 and the signal
 * that killed it; or -1 and 0 when there is none); while it runs all three
 * are 0.  Consumes no output and marks nothing reported.
 *
 * Returns 0, UV_EINVAL (NULL reg, id or out pointer, not a process task),
 * UVT_ENOTASK, UVT_EFOREIGN (R-OWN-2).
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_status(uvt_registry_t *reg, const char *id,
                                  const uvt_agent_t *caller, int *exited,
                                  int *exit_code, int *term_signal);

/* Free what uvt_process_read() put in `r` and zero its fields; accepts
 * NULL and a zeroed struct.  Thread: any.
 * Since: 0.3.0 */
UVT_EXTERN void uvt_process_read_cleanup(uvt_process_read_t *r);

/* ---- Looks that consume nothing (src/process/look.c) ------------------
 * For surfaces over the library (the tool surface, uvtasks-mcp): what a
 * task holds and how it was started, without reading it, marking it
 * reported (R-READ-3) or touching its cursor. */

/* Bytes of a stream's line being written that uvt_process_peek() copies. */
#define UVT_PROCESS_PEEK_TAIL 256

/* What a process task holds unread (M-TOOLS-5).  Per stream (index 0:
 * stdout, or a tty task's terminal; 1: stderr). */
typedef struct {
  size_t unread[2];    /* bytes held in the stream, not yet read */
  uint64_t dropped[2]; /* bytes dropped at the cap since the last read
                        * (P-OUT-2) */
  size_t tail_len[2];  /* length of tail[i]: the unread bytes after the
                        * last newline (the line being written; its last
                        * UVT_PROCESS_PEEK_TAIL bytes if longer); 0 when
                        * the unread bytes end with a newline */
  char tail[2][UVT_PROCESS_PEEK_TAIL]; /* as written: not UTF-8-checked,
                                        * not NUL-terminated */
  int tty;        /* 1: started with tty (the terminal takes input) */
  int stdin_pipe; /* 1: started with stdin_pipe and no tty */
} uvt_process_peek_t;

/* Look at what process task `id` holds unread: write_stdin tells from two
 * looks that output arrived, and from the tail whether it stopped inside a
 * line (a prompt).  Consumes nothing.
 *
 * Returns 0 and fills *out, UV_EINVAL (NULL reg, id or out, not a process
 * task), UVT_ENOTASK (none, or dropped), UVT_EFOREIGN (R-OWN-2),
 * UVT_ETHREAD.  On error *out is zeroed.
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_peek(uvt_registry_t *reg, const char *id,
                                const uvt_agent_t *caller,
                                uvt_process_peek_t *out);

/* The last unread line of process task `id` (M-MCP-5, a progress line):
 * of stdout, else of stderr, the last one that is not blank, after its
 * last carriage return and without trailing blanks, cut to `size` - 1
 * bytes and NUL-terminated in `buf` ("" when there is none).
 * The bytes are as the command wrote them (not UTF-8-checked).  Consumes
 * nothing.
 *
 * Returns 0, UV_EINVAL (NULL reg, id or buf, size 0, not a process task),
 * UVT_ENOTASK, UVT_EFOREIGN (R-OWN-2), UVT_ETHREAD.
 * Ownership: `buf` is the caller's.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_last_line(uvt_registry_t *reg, const char *id,
                                     const uvt_agent_t *caller, char *buf,
                                     size_t size);

/* The output bytes task `id` holds that no read has returned (M-MCP-11,
 * what forgetting it would drop): for a task of any producer, what its
 * record kept at its end and reads have not consumed; for a process task
 * also what its streams hold.  Consumes nothing.
 *
 * Returns 0 and *bytes, UV_EINVAL (NULL reg, id or bytes), UVT_ENOTASK,
 * UVT_EFOREIGN (R-OWN-2), UVT_ETHREAD; *bytes is 0 on error.
 * Ownership: nothing is allocated.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_unread_bytes(uvt_registry_t *reg, const char *id,
                                        const uvt_agent_t *caller,
                                        size_t *bytes);

/* M-TOOLS-18 (v4): why the last sandbox that could not be made here was
 * refused (S-3: "no bwrap at ...", or what bwrap said when its probe
 * failed, such as user namespaces refused), the reason uvt_process_start()
 * logged with its UV_ENOTSUP, NUL-terminated in `buf` and cut to fit; ""
 * when none was refused.  A surface puts it in its answer, so that the
 * reason reaches whoever asked, not only the log.
 * Returns 0, UV_EINVAL (NULL reg or buf, size 0), UVT_ETHREAD.
 * Ownership: `buf` is the caller's.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_sandbox_why(uvt_registry_t *reg, char *buf,
                                       size_t size);

/* The registry's cgroup directory made by uvt_process_cgroups() (P-KILL-5,
 * M-MCP-15), or NULL when it has none (not enabled, or reg NULL).
 * Ownership: the string is the registry's; it lives until registry close.
 * Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN const char *uvt_process_cgroup_dir(uvt_registry_t *reg);

/* ---- Tasks that outlive the host (D-1..D-7, docs/durable.md) ----------
 *
 * The state directory holds a journal ("journal", one line per event,
 * compacted to a line per task, with "journal.lock") and per task its
 * output files (<key>.out, <key>.err), its keeper's status file
 * (<key>.rc) and a stdin_pipe task's FIFO (<key>.in), where <key> is
 * "d" and 16 random hex digits.  Every file is opened relative to the
 * directory's descriptor with O_NOFOLLOW (S-7).  The keeper is the
 * program uvtasks-keeper: $UVTASKS_KEEPER if set, else beside the library
 * (or the program the library is linked into), else in ../libexec from
 * it, else where it was installed. */

/* Open the registry's state directory `state_dir` (made, mode 0700, if
 * missing) and take back every durable task of its journal whose end was
 * not yet delivered and whose recorded owner is `owner` (the same agent
 * id and session, D-5; owner NULL: the unowned ones): the same id
 * (R-START-6), kind, label, output cap, grace, drain and runtime limit
 * (counted from the task's own start), and its limits with its cgroup
 * (L-LIM-3: opened again from the path the journal recorded, by
 * descriptor and only a cgroup file system's uvtasks-durable/<key>; a
 * group that is gone is logged and the task taken back without it, so
 * its outcome cannot name the limit); reads go on from the offsets the
 * last reads consumed, so nothing read is returned again and nothing
 * unread is lost (beyond the cap, as P-OUT-2 says); a kill or runtime
 * limit in progress goes on.  A task whose keeper still runs is a live
 * task like any other (waits, kills of its whole session, signals,
 * leftovers, stdin through its FIFO while one is kept); one that ended
 * while no host ran settles at once with its real outcome ("exit code:
 * N", "signal: NAME", "spawn failed: NAME", or failed "exit status lost:
 * its keeper (pid N) ended without recording it" when the keeper itself
 * was killed), and is reported once.  A task whose end was delivered
 * before (its listeners ran: D is journalled before they run) is never
 * taken back, so no end is reported twice.
 *
 * Identity (D-4): a keeper is taken back only if its pid still names it:
 * a pidfd is opened, then its start time (clock ticks after boot) and
 * session are read and must be those the keeper recorded; otherwise the
 * pid names another process (reused) and it is neither adopted nor ever
 * signalled: the task settles from what its status file says.
 *
 * The first call opens the directory and holds it (and the journal's
 * lock) until registry close: another registry, in this process or
 * another, gets UV_EBUSY for the same directory (two hosts never both
 * adopt).  Later calls (other owners) take the same directory's tasks
 * of their owner.  It also compacts the journal (D-6) and removes the
 * files of tasks that are gone.  The first call moves each kind's id
 * counter past every id the journal ever named (D-3: delivered and
 * dropped tasks' too, uvt_reserve_ids()), so no new task gets an id a
 * task of the directory had.  Call it before starting new tasks: one
 * started before may take such an id (the journal is not read yet), and
 * a journalled task whose id is taken is not taken back (logged,
 * skipped, kept in the journal); two tasks never share an id either way.
 *
 * Returns the number of tasks taken back (>= 0); UV_EINVAL (NULL reg or
 * state_dir, or another directory than the registry's); UV_EPERM (not a
 * directory owned by the effective user, or group or others may write
 * it: refused, D-4); UV_EBUSY (another registry holds it); UV_ENOENT (no
 * uvtasks-keeper found; logged); UVT_ECLOSING, UVT_ESTALE (owner not
 * live, R-OWN-1); UV_ENOMEM; or the error of making, opening or reading
 * it (UV_ENOTDIR for a file, UV_ELOOP or UV_ENOTDIR for a symlink,
 * UV_EACCES...).  A task that cannot be taken back (its id taken, or no
 * pidfds on this kernel while its keeper may run: Linux < 5.3, valgrind)
 * is logged and left in the journal.
 * Ownership: state_dir is only read during the call.
 * Thread: the loop thread (it reads the journal and may wait up to 2 s
 * for a keeper spawned just before its host died to record itself).
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_adopt_all(uvt_registry_t *reg,
                                     const char *state_dir,
                                     uvt_agent_t *owner);

/* `on` nonzero: from now on a registry close or an owner's disposal stops
 * this registry's durable tasks as any task (P-KILL-7) instead of leaving
 * them running; 0 (the default) leaves them (D-1).
 * Returns 0, UV_EINVAL (NULL reg, or no state directory opened),
 * UVT_ECLOSING, UV_ENOMEM.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_stop_durable(uvt_registry_t *reg, int on);

/* 1 if process task `id` is durable (started with `durable`, or taken
 * back by uvt_process_adopt_all()), 0 if not.  For a surface that leaves
 * such tasks out of what it stops at its own exit (the MCP server's
 * guardian and shutdown, D-1).
 * Returns 1 or 0, UV_EINVAL (NULL reg or id, not a process task),
 * UVT_ENOTASK, UVT_EFOREIGN.  Thread: the loop thread.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_is_durable(uvt_registry_t *reg, const char *id,
                                      const uvt_agent_t *caller);

/* Send SIGKILL at once to every live process task of every registry in
 * this process (their sessions, and their cgroups where enabled; not
 * durable tasks, D-1), without the loop: for a host that ends the process on a path where no registry
 * gets to close (Node's process.exit() or an uncaught exception, a second
 * shutdown signal).  A spawn in progress on a spawner thread is waited for
 * (it ends when the child has exec'd) and its child killed too; after
 * this call no existing registry spawns again (its later starts settle
 * `killed`, "killed before it started").  The tasks settle, and their
 * registries close, as usual if their loops run again.
 *
 * Returns the number of sessions signalled (>= 0).
 * Ownership: nothing is allocated.
 * Thread: any (it takes locks: not from a signal handler).
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_stop_all_now(void);

/* Room for the guardian's mark, NUL included (uvt_process_guardian()). */
#define UVT_GUARDIAN_MARK_MAX 64

/* This process's guardian (LU-3; N-10 for any host): a small process
 * that, when this process ends however it ends (SIGKILL, a crash, a
 * normal exit), sends SIGKILL to every process whose environment holds
 * the mark, again until none is left, and then exits.  The first call in
 * a process starts it (a shell script, POSIX sh with grep, sed and kill,
 * started with posix_spawn: nothing of the host is copied, so any host,
 * threads and a large heap included, may call it at any time); later
 * calls give the same mark.  The host puts the mark
 * ("UVTASKS_GUARDIAN=<pid>-<random>") in the `env` of each task it wants
 * guarded, so the guardian also finds what left the task's session
 * (`setsid cmd &`, a daemon), and leaves alone tasks not marked (a task
 * meant to outlive the host).  Its trigger is the end of a Unix socket
 * whose only end the host holds (close-on-exec; a socket, unlike a pipe,
 * cannot be opened again through /proc): a child the host forks without
 * exec holds it too and keeps the guardian waiting until it exits.  The
 * guardian runs in a session of its own, ignores the shutdown signals and
 * is not the host's child (its shell exits at once and is reaped here).
 * Limits: a process that clears its environment (env -i) is out of
 * reach; a process of the same user can kill the guardian.
 *
 * Returns 0 and the mark in `mark` (NUL-terminated), UV_EINVAL (NULL
 * mark), UV_ENOENT (the shell did not start the guardian: no /bin/sh),
 * or the error of socketpair, posix_spawn or of reading random bytes.
 * Ownership: nothing is allocated; the socket lives until the process
 * ends.  Thread: any (it takes a lock); it blocks for the shell's start
 * (about a millisecond), once per process.
 * Since: 0.3.0 */
UVT_EXTERN int uvt_process_guardian(char mark[UVT_GUARDIAN_MARK_MAX]);

#ifdef __cplusplus
}
#endif

#endif /* UVTASKS_PROCESS_H */
