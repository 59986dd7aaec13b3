/* D-7: `uvtasks-mcp --state-dir DIR`: run_in_background's tasks outlive
 * the server (uvt_process_options_t's `durable`), and a server started
 * again on DIR takes them back under their ids (uvt_process_adopt_all()).
 *
 * The client's agent keeps one session across restarts (D-5: a task is
 * taken back by the owner it was recorded with): it is kept in
 * DIR/mcp-session, made once with a random value, mode 0600, opened
 * relative to the directory without following links (S-7).  The
 * server's first tool result names the tasks taken back, and the tool
 * descriptions say that tasks outlive the server.  Its shutdown and its
 * guardian leave durable tasks running (main.c, guardian.c). */
#define _GNU_SOURCE
#include "mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uvtasks/process.h"

#define SESSION_FILE "mcp-session"

/* DIR/mcp-session into server->session: read, or made (a fresh random
 * session written there).  0, or -1 with the reason on stderr. */
int mcp_durable_session(mcp_server_t *server, const char *fresh) {
  const char *dir = server->config.state_dir;
  char buf[sizeof(server->session)];
  struct stat st;
  ssize_t n;
  int dfd;
  int fd;

  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "uvtasks-mcp: --state-dir %s: %s\n", dir, strerror(errno));
    return -1;
  }
  dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 || fstat(dfd, &st) != 0 || st.st_uid != geteuid() ||
      (st.st_mode & 022) != 0) {
    fprintf(stderr,
            "uvtasks-mcp: --state-dir %s must be a directory (not a link) "
            "of yours that only you can write%s%s\n",
            dir, dfd < 0 ? ": " : "", dfd < 0 ? strerror(errno) : "");
    if (dfd >= 0)
      close(dfd);
    return -1;
  }
  fd = openat(dfd, SESSION_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()
            ? read(fd, buf, sizeof(buf) - 1)
            : -1;
    close(fd);
    if (n > 4 && strncmp(buf, "mcp-", 4) == 0) {
      buf[n] = '\0';
      buf[strcspn(buf, "\n")] = '\0';
      snprintf(server->session, sizeof(server->session), "%s", buf);
      close(dfd);
      return 0;
    }
  }
  /* None yet (or not ours): this server's session from now on. */
  snprintf(server->session, sizeof(server->session), "%s", fresh);
  (void)unlinkat(dfd, SESSION_FILE, 0);
  fd = openat(dfd, SESSION_FILE,
              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, fresh, strlen(fresh)) != (ssize_t)strlen(fresh)) {
    fprintf(stderr,
            "uvtasks-mcp: --state-dir %s: cannot keep the session: "
            "%s\n",
            dir, strerror(errno));
    if (fd >= 0)
      close(fd);
    close(dfd);
    return -1;
  }
  close(fd);
  close(dfd);
  return 0;
}

/* Take back the session's tasks; the first result names them (D-7).
 * 0, or a library error (said on stderr). */
int mcp_durable_init(mcp_server_t *server) {
  uvt_snapshot_t *snaps = NULL;
  size_t count = 0;
  size_t i;
  size_t len;
  char *text;
  int n;

  n = uvt_process_adopt_all(server->reg, server->config.state_dir,
                            &server->agent);
  if (n == UV_EBUSY) {
    fprintf(stderr, "uvtasks-mcp: --state-dir %s is in use by another server\n",
            server->config.state_dir);
    return n;
  }
  if (n < 0) {
    fprintf(stderr, "uvtasks-mcp: --state-dir %s: %s\n",
            server->config.state_dir, uvt_strerror(n));
    return n;
  }
  if (n == 0)
    return 0;
  fprintf(stderr, "uvtasks-mcp: %d task(s) taken back from %s\n", n,
          server->config.state_dir);
  /* Every task the session has now was taken back (none was started). */
  if (uvt_list(server->reg, &server->agent, &snaps, &count) != 0)
    return 0;
  len = 160;
  for (i = 0; i < count; i++)
    len += strlen(snaps[i].id) + strlen(snaps[i].label) + 8;
  text = malloc(len);
  if (text != NULL) {
    size_t at = (size_t)snprintf(
        text, len,
        "The server restarted; %zu background task(s) from before it went "
        "on and were taken back under their ids:",
        count);
    for (i = 0; i < count && at < len; i++) {
      /* One line: no newline of a label may break it. */
      const char *l = snaps[i].label;
      at += (size_t)snprintf(text + at, len - at, "%s %s (%.*s)",
                             i == 0 ? "" : ",", snaps[i].id,
                             (int)strcspn(l, "\r\n"), l);
    }
    if (at < len)
      snprintf(text + at, len - at,
               ". task_output reads on from where you stopped.");
    mcp_rpc_notice(&server->tools, &server->agent, text);
    free(text);
  }
  uvt_snapshots_free(snaps, count);
  return 0;
}

/* The sentence run_in_background's description gets (D-7). */
void mcp_durable_describe(const mcp_server_t *server, json_t *tools) {
  json_t *tool;
  json_t *desc;
  size_t i;

  if (server->config.state_dir == NULL)
    return;
  json_array_foreach(tools, i, tool) {
    const char *name = json_string_value(json_object_get(tool, "name"));
    desc = json_object_get(tool, "description");
    if (name == NULL || !json_is_string(desc) ||
        strcmp(name, UVT_TOOL_RUN_IN_BACKGROUND) != 0)
      continue;
    json_object_set_new(
        tool, "description",
        json_sprintf("%s DURABLE: its tasks (unless tty) outlive this "
                     "server: when it stops, restarts or crashes they keep "
                     "running, and the restarted server takes them back "
                     "under the same ids (task_list, task_output and "
                     "task_kill work on them as before, and you get the "
                     "notice of their end once). run_command's commands "
                     "still end with their call.",
                     json_string_value(desc)));
  }
}
