/* The tools, one row each, and their schemas as JSON (M-TOOLS-3).  Each
 * tool's schema is its own literal (ISO C only promises literals of 4095
 * bytes); the array is put together once. */
#include "uvtasks/tools.h"

#include <string.h>

#include "tools-int.h"

/* One row per tool (M-TOOLS-3): its name, what kind of call it is, and
 * its schema's members after "name" (description, inputSchema, ...).
 * The names are uvtasks/tools.h's UVT_TOOL_* (spelled there only).
 * uvt_tools_has(), uvt_tools_call() and uvt_tools_schema_json() all read
 * this table; the function that runs each tool is the dispatch's
 * (tools.c), so the rows call nothing. */
/* M-TOOLS-16: the view arguments of task_output and run_command. */
#define VIEW_PROPS                                                             \
  "\"head_lines\":{\"type\":\"integer\",\"minimum\":1,"                        \
  "\"description\":\"Show only the first this many lines of the "              \
  "output (with tail_lines: both ends and one line saying how many were "      \
  "left out between).\"},"                                                     \
  "\"tail_lines\":{\"type\":\"integer\",\"minimum\":1,"                        \
  "\"description\":\"Show only the last this many lines of the "               \
  "output.\"},"                                                                \
  "\"match\":{\"type\":\"string\",\"description\":"                            \
  "\"A POSIX extended regular expression, without back-references: show "      \
  "only the lines it matches, each after its line number, and how many "       \
  "matched (for example error|warning).\"},"

const uvt__tool_def_t uvt__tool_defs[] = {
    {UVT_TOOL_RUN_IN_BACKGROUND, TOOL_OTHER,
     "\"description\":\"Start a shell command (bash) in the background and "
     "return its task id at once. The command runs in its own process group "
     "with no input (unless stdin or tty is set); its stdout and stderr are "
     "kept for task_output. If it ends before you have seen its end, you get "
     "a notice naming it. Use it for long-running work (builds, test suites, "
     "servers, downloads), and with stdin or tty for interactive programs "
     "(REPLs, debuggers, prompts) that you then drive with write_stdin.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"command\":{\"type\":\"string\",\"description\":"
     "\"The shell command to run.\"},"
     "\"cwd\":{\"type\":\"string\",\"description\":"
     "\"Directory to run it in (a relative one is relative to the default). "
     "Default: the server's working directory.\"},"
     "\"label\":{\"type\":\"string\",\"description\":"
     "\"Short description shown by task_list and in notices. Default: the "
     "command.\"},"
     "\"stdin\":{\"type\":\"boolean\",\"description\":"
     "\"Keep the command's stdin open so that write_stdin can send it input. "
     "Default false: a command that reads stdin gets end of file at once.\"},"
     "\"tty\":{\"type\":\"boolean\",\"description\":"
     "\"Run the command on a terminal (80x24), for programs that behave "
     "differently or only work on one (REPLs with line editing, password "
     "prompts, ssh). Its stdin is the terminal (write_stdin types into it), "
     "stdout and stderr come as one stream, and what you type is echoed. "
     "A program that reads whole lines from a terminal gets at most 4095 "
     "bytes of a line (the rest is lost, though the echo shows it): send "
     "long input with stdin instead. Default false.\"},"
     "\"memory_mb\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"Memory limit for the whole command (every process "
     "it starts), in MiB. Past it the command is ended and its status says "
     "out of memory. Default and maximum: the server's limit, if any.\"},"
     "\"max_processes\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"Most processes (and threads) the command may have "
     "alive at once; a fork beyond it fails (Resource temporarily "
     "unavailable) and the status says the limit was reached. Default and "
     "maximum: the server's limit, if any.\"},"
     "\"cpu_percent\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"CPU the command may use, in percent of one core "
     "(150 = one and a half cores); it is slowed down, never stopped, for "
     "it. Default and maximum: the server's limit, if any.\"},"
     "\"merge_stderr\":{\"type\":\"boolean\",\"description\":"
     "\"Put stderr into stdout's stream, in the order written (as a terminal "
     "shows them), with no [stderr] part. Default false.\"}},"
     "\"required\":[\"command\"],\"additionalProperties\":false}}"},

    {UVT_TOOL_RUN_COMMAND, TOOL_RUN_COMMAND,
     "\"description\":\"Run a shell command (bash) and wait until it ends, "
     "then return its output (stdout, then stderr after a [stderr] line) and "
     "its status line, for example [status: completed, exit code: 0]. A "
     "non-zero exit code is shown in the status line, not reported as a tool "
     "error. The command runs in its own process group with no input (or "
     "the stdin text, then end of file) and is stopped (SIGTERM, then SIGKILL) "
     "if it runs longer than timeout_ms. If "
     "it is still running after yield_ms, the call returns its output so "
     "far with [status: running] and the command goes on in the background "
     "as a task (read it with task_output, stop it with task_kill). Output "
     "is plain text (terminal escape sequences removed, a progress bar shows "
     "its last state) and at most max_bytes long: beyond it you get the "
     "beginning and the end, with a line saying how much was left out (the "
     "true beginning, even when the output was too big to keep whole), and "
     "a line naming the file that holds the whole output when the server "
     "keeps one. head_lines, tail_lines and match show only some lines. "
     "For work you want to check on later, use run_in_background.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"command\":{\"type\":\"string\",\"description\":"
     "\"The shell command to run.\"},"
     "\"cwd\":{\"type\":\"string\",\"description\":"
     "\"Directory to run it in (a relative one is relative to the default). "
     "Default: the server's working directory.\"},"
     "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"How long the command may run, in milliseconds. "
     "Default 600000, at most 3600000 (a longer one is cut to 3600000).\"},"
     "\"yield_ms\":{\"type\":\"integer\",\"minimum\":0,"
     "\"description\":\"Return after this many milliseconds if the "
     "command is still running; it then goes on in the background. 0 waits "
     "until it ends. Default: set by the server.\"},"
     "\"stdin\":{\"type\":\"string\",\"description\":"
     "\"Text the command reads on its stdin, then end of file (for example "
     "the body of gh pr create --body-file -). Default: no input.\"},"
     "\"memory_mb\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"Memory limit for the whole command (every process "
     "it starts), in MiB. Past it the command is ended and its status says "
     "out of memory. Default and maximum: the server's limit, if any.\"},"
     "\"max_processes\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"Most processes (and threads) the command may have "
     "alive at once; a fork beyond it fails (Resource temporarily "
     "unavailable) and the status says the limit was reached. Default and "
     "maximum: the server's limit, if any.\"},"
     "\"cpu_percent\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"CPU the command may use, in percent of one core "
     "(150 = one and a half cores); it is slowed down, never stopped, for "
     "it. Default and maximum: the server's limit, if any.\"},"
     "\"merge_stderr\":{\"type\":\"boolean\",\"description\":"
     "\"Put stderr into stdout's stream, in the order written (as a terminal "
     "shows them), with no [stderr] part. Default false.\"}," VIEW_PROPS
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"The most bytes of output to return. Default "
     "10000 (and at most 1000 lines) unless the server sets another; at "
     "least 256 is used.\"}},"
     "\"required\":[\"command\"],\"additionalProperties\":false}}"},

    {UVT_TOOL_TASK_OUTPUT, TOOL_OTHER,
     "\"description\":\"Return the output a background task produced since "
     "your last read of it (each read consumes what it returns), then its "
     "status line, last: [status: running], or for example [status: "
     "completed, exit code: 0]. With wait, first wait until the task ends or "
     "timeout_ms passes; a wait that times out still returns the new output, "
     "with [status: running]. Output is plain text (terminal escape "
     "sequences removed, a progress bar shows its last state) and at most "
     "max_bytes long: beyond it you get the beginning and the end of what is "
     "new, with a line saying how much was left out (and which file holds "
     "the whole output, when the server keeps one); head_lines, tail_lines "
     "and match show only some lines of what is new. A task that ended "
     "while processes it started still run goes on being read: their "
     "output comes with later reads.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"task_id\":{\"type\":\"string\",\"description\":"
     "\"The id run_in_background returned, for example bash-1.\"},"
     "\"wait\":{\"type\":\"boolean\",\"description\":"
     "\"Wait for the task to end before reading. Default: false, or true "
     "when timeout_ms is given.\"},"
     "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"How long to wait, in milliseconds. Default 30000, "
     "at most 600000 (a longer wait is cut to 600000).\"}," VIEW_PROPS
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"The most bytes of output to return. Default "
     "10000 (and at most 1000 lines) unless the server sets another; at "
     "least 256 is used.\"}},"
     "\"required\":[\"task_id\"],\"additionalProperties\":false}}"},

    {UVT_TOOL_TASK_LIST, TOOL_OTHER,
     "\"description\":\"List your background tasks, one line each: id, "
     "kind, status, label. Consumes no output.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{},"
     "\"additionalProperties\":false}}"},

    {UVT_TOOL_TASK_KILL, TOOL_OTHER,
     "\"description\":\"Stop a background task: SIGTERM to every process "
     "it started, SIGKILL to whatever is left after a grace period; it ends "
     "only when nothing of it runs. Says whether the stop was requested or "
     "the task had already ended, then its status line. With signal, only "
     "sends that signal (SIGINT to interrupt a test runner so it prints its "
     "summary, SIGHUP, SIGUSR1, ...) and does not stop the task. Consumes no "
     "output; read the rest with task_output.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"task_id\":{\"type\":\"string\",\"description\":"
     "\"The id of the task to stop, for example bash-1.\"},"
     "\"reason\":{\"type\":\"string\",\"description\":"
     "\"Why it is stopped; kept with the task.\"},"
     "\"signal\":{\"type\":\"string\",\"enum\":[\"SIGINT\",\"SIGHUP\","
     "\"SIGQUIT\",\"SIGUSR1\",\"SIGUSR2\",\"SIGTERM\",\"SIGKILL\","
     "\"SIGCONT\",\"SIGSTOP\",\"SIGWINCH\"],\"description\":"
     "\"Send only this signal to every process of the task instead of "
     "stopping it.\"}},"
     "\"required\":[\"task_id\"],\"additionalProperties\":false}}"},

    {UVT_TOOL_WRITE_STDIN, TOOL_WRITE_STDIN,
     "\"description\":\"Send input to a background task started with stdin "
     "or tty (run_in_background), then wait up to yield_ms and return what it "
     "printed since your last read, then its status line, as task_output "
     "does. The wait ends early when the task ends, or when it printed a "
     "prompt (output that stops inside a line, such as '>>> ' or 'Password: "
     "') and went quiet: it waits for input. chars is sent exactly as given: "
     "end a line with \\\\n (on a terminal \\\\r is Enter; both work for "
     "most programs), and on a terminal \\\\u0003 is Ctrl-C and \\\\u0004 is "
     "Ctrl-D. With empty "
     "chars nothing is sent: the call only waits for and returns new output "
     "(a poll), which works for any task, a run_command that went on in the "
     "background too. close_stdin ends the input after chars for good (end of "
     "file; on a terminal a last Ctrl-D): later writes are refused. Output is "
     "plain text and at most max_bytes long, as "
     "for task_output.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"task_id\":{\"type\":\"string\",\"description\":"
     "\"The id run_in_background returned, for example bash-1.\"},"
     "\"chars\":{\"type\":\"string\",\"description\":"
     "\"What to send, for example \\\"1+1\\\\n\\\". Default: empty (only "
     "read).\"},"
     "\"close_stdin\":{\"type\":\"boolean\",\"description\":"
     "\"After chars, end the task's input for good (end of file; on a "
     "terminal a last Ctrl-D, taken as end of input at the start of a "
     "line); later writes are refused. On a terminal, to end one program's "
     "input and keep typing, send \\\\u0004 in chars instead. Default "
     "false.\"},"
     "\"yield_ms\":{\"type\":\"integer\",\"minimum\":0,"
     "\"description\":\"How long to wait for output, in milliseconds. "
     "Default 250, at most 30000 (a longer one is cut to 30000); 0 returns "
     "what is there at once. Use more for slow answers: the call still "
     "returns as soon as a prompt appears or the task ends.\"},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"The most bytes of output to return. Default "
     "10000 (and at most 1000 lines) unless the server sets another; at "
     "least 256 is used.\"}},"
     "\"required\":[\"task_id\"],\"additionalProperties\":false}}"},

    {UVT_TOOL_TASK_WAIT, TOOL_TASK_WAIT,
     "\"description\":\"Wait for several background tasks at once instead "
     "of polling them one by one: with mode any (the default) the call "
     "returns as soon as one of them has ended, with mode all once every "
     "one has, or when timeout_ms passes. The answer has a section per task, "
     "in the order given: for a task that ended, its new output (as "
     "task_output shows it; max_bytes is shared between them) and its status "
     "line; for one still running, only its status line, [status: running] "
     "(its output stays unread). Waiting is cheap: prefer one task_wait with "
     "a long timeout_ms over repeated task_output calls.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"task_ids\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":32,"
     "\"items\":{\"type\":\"string\"},\"description\":"
     "\"The ids of the tasks to wait for (1 to 32), for example "
     "[\\\"bash-1\\\", \\\"bash-2\\\"].\"},"
     "\"mode\":{\"type\":\"string\",\"enum\":[\"any\",\"all\"],"
     "\"description\":\"any: return when one task ended (default); all: "
     "when every task ended.\"},"
     "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"How long to wait, in milliseconds. Default 30000, "
     "at most 600000 (a longer wait is cut to 600000).\"},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,"
     "\"description\":\"The most bytes of output to return, shared by the "
     "tasks that ended. Default 10000 (and at most 1000 lines) unless the "
     "server sets another; at least 256 is used.\"}},"
     "\"required\":[\"task_ids\"],\"additionalProperties\":false}}"},

    {UVT_TOOL_TASK_SCREEN, TOOL_OTHER,
     "\"description\":\"Show the current screen of a task started with tty "
     "(run_in_background): a line naming its size, whether the program is on "
     "the alternate screen (full-screen programs such as top, vim, less, "
     "htop), and the cursor's row and column, then its rows of text as a "
     "terminal shows them (rows and columns count from 1). Use it to see a "
     "full-screen program instead of the transcript of its redraws; while a "
     "program is on the alternate screen, task_output and write_stdin show "
     "this screen too. Consumes the task's new output (it is on the "
     "screen).\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"task_id\":{\"type\":\"string\",\"description\":"
     "\"The id of a task started with tty: true, for example bash-1.\"}},"
     "\"required\":[\"task_id\"],\"additionalProperties\":false}}"},
};
const size_t uvt__tool_defs_n =
    sizeof(uvt__tool_defs) / sizeof(uvt__tool_defs[0]);

static uv_once_t schema_once = UV_ONCE_INIT;
static char schema_json[32768];

/* Append `len` bytes at *n; a text longer than the buffer would be a
 * build-time mistake, so it is cut rather than overflow. */
static int schema_put(size_t *n, const char *bytes, size_t len) {
  if (*n + len + 2 > sizeof(schema_json))
    return -1;
  memcpy(schema_json + *n, bytes, len);
  *n += len;
  return 0;
}

static void schema_build(void) {
  static const char head[] = "{\"name\":\"";
  size_t n = 0;
  size_t i;

  schema_json[n++] = '[';
  for (i = 0; i < uvt__tool_defs_n; i++) {
    const uvt__tool_def_t *d = &uvt__tool_defs[i];

    if ((i > 0 && schema_put(&n, ",", 1) != 0) ||
        schema_put(&n, head, sizeof(head) - 1) != 0 ||
        schema_put(&n, d->name, strlen(d->name)) != 0 ||
        schema_put(&n, "\",", 2) != 0 ||
        schema_put(&n, d->schema, strlen(d->schema)) != 0)
      break;
  }
  schema_json[n++] = ']';
  schema_json[n] = '\0';
}

const char *uvt_tools_schema_json(void) {
  uv_once(&schema_once, schema_build);
  return schema_json;
}

const uvt__tool_def_t *uvt__tool_find(const char *name) {
  size_t i;

  if (name == NULL)
    return NULL;
  for (i = 0; i < uvt__tool_defs_n; i++)
    if (strcmp(name, uvt__tool_defs[i].name) == 0)
      return &uvt__tool_defs[i];
  return NULL;
}

int uvt_tools_has(const char *name) {
  return uvt__tool_find(name) != NULL;
}
