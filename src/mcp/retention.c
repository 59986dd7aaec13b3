/* M-MCP-11: retention bounded for every ended task, read or not.
 *
 * Two bounds over the client's ended tasks: their number
 * (--keep-finished) and the unread output bytes they hold together
 * (--max-unread-bytes).  Past either, the oldest ended task that may be
 * forgotten (retention_forgettable: no MCP task holds it, nothing it
 * started is still running, P-LEFT-1) is forgotten, then the next, until both
 * hold or none is left to forget; the next tool result's notice names
 * what went and how many unread bytes went with it.  Whether the client
 * saw the end does not matter: a model that starts background work and
 * never reads it must not grow the server without bound.
 *
 * Looked at when a task of the session ends (the change feed) and after
 * every tool call. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvtasks/process.h"

/* Ids named in one notice; more are counted. */
#define RETENTION_NAMED 20

/* Unread bytes task `id` holds: an ended task's remainder in its record
 * (what reads have not consumed), and anything its streams still hold. */
static size_t unread_bytes(mcp_server_t *server, const char *id) {
  size_t n = 0;

  if (uvt_process_unread_bytes(server->reg, id, &server->agent, &n) != 0)
    return 0;
  return n;
}

/* P-LEFT-1: does ended task `id` still have processes running in its
 * session (or cgroup), whatever their process group (`set -m` jobs,
 * `nohup timeout 3600 cmd &`)?  Such a record is never forgotten by
 * retention: the model sees the count in its status lines, and a
 * forget would stop them without a word. */
int mcp_retention_leftovers(mcp_server_t *server, const char *id) {
  return uvt_process_leftovers(server->reg, id, &server->agent) > 0;
}

/* P-OUT-6: is ended task `id`'s output still read (held by a process that
 * may have left its session)?  Forgetting it would close the pipe under
 * that process, which then dies of SIGPIPE at its next write. */
static int rpc_still_read(mcp_server_t *server, const char *id) {
  return uvt_process_reading(server->reg, id, &server->agent) == 1;
}

/* Long sessions: beyond the --keep-finished count, forget the oldest
 * finished tasks whose end the model has seen (reported), so memory stays
 * bounded (R-FORGET-1).  Tasks with an unseen end are kept, and so are
 * tasks that left processes running (mcp_retention_leftovers). */
static int retention_forgettable(mcp_server_t *server,
                                 const uvt_snapshot_t *s) {
  if (!uvt_status_is_terminal(s->status) || !s->reported)
    return 0;
  /* MCP tasks keep their records for their ttl. */
  if (mcp_task_find(server, s->id) != NULL)
    return 0;
  return !mcp_retention_leftovers(server, s->id) &&
         !rpc_still_read(server, s->id);
}

void mcp_retention_bound(mcp_server_t *server) {
  uvt_snapshot_t *snaps = NULL;
  size_t *unread = NULL;
  char *may = NULL;
  size_t n = 0;
  size_t ended = 0;
  size_t total = 0;
  size_t forgot = 0;
  uint64_t dropped = 0;
  char *named = NULL; /* the first RETENTION_NAMED forgotten, listed */
  size_t named_len = 0;
  FILE *f;
  int bad;
  size_t i;

  if (server->reg == NULL || server->shutting_down ||
      uvt_list(server->reg, &server->agent, &snaps, &n) != 0)
    return;
  if (n > 0) {
    unread = calloc(n, sizeof(*unread));
    may = calloc(n, 1);
  }
  if (unread == NULL || may == NULL)
    goto done;
  for (i = 0; i < n; i++) {
    uvt_snapshot_t s = snaps[i];

    if (!uvt_status_is_terminal(s.status))
      continue;
    unread[i] = unread_bytes(server, s.id);
    total += unread[i];
    /* Read or not (M-MCP-11): the predicate is asked as if the end had
     * been seen; its other conditions (an MCP task's ttl, what the task
     * left running) still hold. */
    s.reported = 1;
    may[i] = (char)retention_forgettable(server, &s);
    /* The count is of the tasks that may go: one that must stay (its
     * leftovers) does not push a newer one out. */
    ended += (size_t)may[i];
  }
  f = open_memstream(&named, &named_len);
  /* Oldest first: uvt_list gives creation order. */
  for (i = 0; i < n; i++) {
    if (ended <= server->config.keep_finished &&
        total <= server->config.max_unread_bytes)
      break;
    if (!may[i])
      continue;
    /* Over the bytes only: a task holding none would free nothing. */
    if (ended <= server->config.keep_finished && unread[i] == 0)
      continue;
    if (uvt_forget(server->reg, snaps[i].id, &server->agent) != 0)
      continue;
    ended--;
    total -= unread[i];
    /* M-TOOLS-18: a task whose output was all read loses nothing by
     * going: no notice names it. */
    if (unread[i] == 0)
      continue;
    dropped += unread[i];
    forgot++;
    if (f != NULL && forgot <= RETENTION_NAMED)
      fprintf(f, "%s%s (%zu unread bytes)", forgot > 1 ? ", " : "", snaps[i].id,
              unread[i]);
  }
  if (f != NULL && forgot > RETENTION_NAMED)
    fprintf(f, " and %zu more", forgot - RETENTION_NAMED);
  bad = f == NULL || ferror(f);
  if (f != NULL && fclose(f) != 0)
    bad = 1;
  if (forgot > 0 && !bad) {
    char *msg = NULL;
    size_t msg_len = 0;

    f = open_memstream(&msg, &msg_len);
    if (f != NULL) {
      fprintf(f,
              "Forgot %zu ended task%s to stay within --keep-finished %zu and "
              "--max-unread-bytes %zu; %llu unread bytes of output dropped: "
              "%s.",
              forgot, forgot == 1 ? "" : "s", server->config.keep_finished,
              server->config.max_unread_bytes, (unsigned long long)dropped,
              named);
      bad = ferror(f);
      if (fclose(f) == 0 && !bad)
        mcp_rpc_notice(&server->tools, &server->agent, msg);
      free(msg);
    }
  }
  free(named);
done:
  free(unread);
  free(may);
  uvt_snapshots_free(snaps, n);
}

static void retention_feed_cb(uvt_watch_t *w, const uvt_snapshot_t *snap,
                              int dropped) {
  mcp_server_t *server = w->data;

  if (dropped || !uvt_status_is_terminal(snap->status) ||
      server->shutting_down || snap->owner_session == NULL ||
      strcmp(snap->owner_session, server->session) != 0)
    return;
  mcp_retention_bound(server);
}

int mcp_retention_init(mcp_server_t *server) {
  int err;

  server->retention_watch.data = server;
  err =
      uvt_watch_start(server->reg, &server->retention_watch, retention_feed_cb);
  if (err == 0)
    server->retention_watching = 1;
  return err;
}

void mcp_retention_stop(mcp_server_t *server) {
  if (server->retention_watching) {
    uvt_watch_stop(&server->retention_watch);
    server->retention_watching = 0;
  }
}
