/* A libuv host driving interactive tasks (docs/contract.md §3b):
 *
 *  - a shell session on a terminal (`pty`), driven by on_output alone: the
 *    host answers each prompt, resizes the terminal, and ends the session;
 *  - a command fed through a stdin pipe (`stdin_pipe`) and ended with
 *    uvt_process_close_stdin(), its output kept whole
 *    (`output_backpressure`) and read structured: stdout and stderr apart,
 *    the exit code as a number.
 *
 *   build/examples/uvtasks-interactive
 */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "uvtasks.h"
#include "uvtasks/process.h"

static uvt_registry_t *reg;
static uvt_surface_t surface;
static uvt_wait_t shell_wait;
static uvt_wait_t sort_wait;
static int ended;

/* ---- a shell on a terminal, driven by its output ---------------------- */

typedef struct {
  char seen[4096]; /* what the terminal showed since the last step */
  size_t len;
  int step;
} session_t;

static void say(const char *id, const char *line) {
  uvt_process_write(reg, id, NULL, line, strlen(line));
}

/* Show what the terminal shows, and keep it for prompted(). */
static void remember(session_t *s, const char *bytes, size_t len) {
  fwrite(bytes, 1, len, stdout);
  fflush(stdout);
  if (s->len + len < sizeof(s->seen)) {
    memcpy(s->seen + s->len, bytes, len);
    s->len += len;
    s->seen[s->len] = '\0';
  }
}

/* Has the terminal shown `answer` and then a prompt? */
static int prompted(const session_t *s, const char *answer) {
  const char *at = strstr(s->seen, answer);
  return at != NULL && (strstr(at, "$ ") != NULL || strstr(at, "# ") != NULL);
}

/* "There is new output": read it, and answer when it is what we wait for. */
static void on_output(const char *id, void *data) {
  session_t *s = data;
  uvt_process_read_t r;

  if (uvt_process_read(reg, id, NULL, &r) != 0)
    return;
  remember(s, r.out, r.out_len); /* prompts, echo, "\r\n" line ends */
  uvt_process_read_cleanup(&r);
  /* Each answer waits for the shell's next prompt ("$ ", or "# " as
   * root), so it reaches the line editor, not the command before it. */
  if (s->step == 0 && prompted(s, "")) {
    s->step = 1;
    s->len = 0;
    say(id, "echo $((6 * 7))\r"); /* Enter is "\r" on a terminal */
  } else if (s->step == 1 && prompted(s, "42\r\n")) {
    s->step = 2;
    s->len = 0;
    uvt_process_resize(reg, id, NULL, 100, 30); /* the job gets SIGWINCH */
    say(id, "tput cols\r");
  } else if (s->step == 2 && prompted(s, "100\r\n")) {
    s->step = 3;
    uvt_process_close_stdin(reg, id, NULL); /* Ctrl-D: the shell exits */
  }
}

static void on_shell_end(uvt_wait_t *req, int status,
                         const uvt_snapshot_t *snap) {
  (void)req;
  if (status == 0)
    printf("\n[%s %s (%s)]\n", snap->id, uvt_status_name(snap->status),
           snap->detail);
  if (++ended == 2)
    uvt_registry_close(reg, NULL, NULL);
}

/* ---- a command fed through its stdin --------------------------------- */

static void on_sort_end(uvt_wait_t *req, int status,
                        const uvt_snapshot_t *snap) {
  uvt_process_read_t r;

  (void)req;
  (void)snap;
  if (status == 0 && uvt_process_read(reg, snap->id, NULL, &r) == 0) {
    printf("[%s] stdout:\n%s[%s] stderr: \"%s\", exit code %d\n", snap->id,
           r.out, snap->id, r.err, r.exit_code);
    uvt_process_read_cleanup(&r);
  }
  if (++ended == 2)
    uvt_registry_close(reg, NULL, NULL);
}

int main(void) {
  static session_t session;
  static const char *const bash[] = {"bash", "--norc", "--noprofile", "-i",
                                     NULL};
  static const char words[] = "pear\napple\npear\nfig\napple\npear\n";
  uv_loop_t loop;
  uvt_process_options_t o;
  char shell_id[UVT_ID_MAX];
  char sort_id[UVT_ID_MAX];

  uv_loop_init(&loop);
  uvt_registry_new(&loop, NULL, &reg);
  uvt_surface_attach(reg, &surface, "example");

  uvt_process_options_init(&o);
  o.argv = bash;
  o.pty = 1; /* its controlling terminal: prompts, job control, Ctrl-C */
  o.pty_cols = 80;
  o.pty_rows = 24;
  o.on_output = on_output;
  o.on_output_data = &session;
  if (uvt_process_start(reg, &o, shell_id) != 0)
    return 1;
  uvt_wait(reg, &shell_wait, shell_id, 30000, NULL, on_shell_end);

  uvt_process_options_init(&o);
  o.command = "sort | uniq -c | sort -rn";
  o.stdin_pipe = 1;          /* keep stdin open for uvt_process_write() */
  o.output_backpressure = 1; /* never drop output: the child waits */
  if (uvt_process_start(reg, &o, sort_id) != 0)
    return 1;
  /* Written now, before the child even exists: it reads them later. */
  uvt_process_write(reg, sort_id, NULL, words, sizeof(words) - 1);
  uvt_process_close_stdin(reg, sort_id, NULL); /* sort sees end of file */
  uvt_wait(reg, &sort_wait, sort_id, 30000, NULL, on_sort_end);

  uv_run(&loop, UV_RUN_DEFAULT);
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}
