/* The JSON-RPC 2.0 wire of uvtasks-mcp (M-MCP-1, M-MCP-3, M-MCP-8,
 * M-MCP-12): a line in, parsed with jansson (bounded before parsing, whole
 * reals made integers, a batch taken apart under 2025-03-26) and handed
 * to the method dispatch through server->on_message (rpc.c's, set by
 * main.c); a message out as one line, with the
 * answers of a batch collected into one array.  Every string put into a
 * message is valid UTF-8 (repaired if it was not); a tool result may hold
 * NUL bytes, written as \u0000. */
#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Sending                                                                 */

/* A JSON string of `len` bytes (NULs included), repaired to valid UTF-8 if
 * needed. */
json_t *mcp_rpc_string(const char *s, size_t len) {
  char *fixed;
  size_t n;
  json_t *j;

  j = json_stringn(s, len);
  if (j != NULL)
    return j;
  n = uvt_tools_utf8_repair(s, len, NULL);
  fixed = malloc(n > 0 ? n : 1);
  if (fixed == NULL)
    return NULL;
  uvt_tools_utf8_repair(s, len, fixed);
  j = json_stringn(fixed, n);
  free(fixed);
  return j;
}

/* A response (not a notification) of the batch being answered goes into
 * the batch's array instead of onto the wire. */
static int rpc_batch_take(mcp_server_t *server, json_t *msg) {
  if (server->batch == NULL || json_object_get(msg, "method") != NULL)
    return 0;
  json_array_append_new(server->batch->answers, msg);
  return 1;
}

/* Send `msg` as one line and release it. */
void mcp_rpc_send(mcp_server_t *server, json_t *msg) {
  char *s;
  size_t len;

  if (msg == NULL || rpc_batch_take(server, msg))
    return;
  /* M-MCP-8: a NUL in a string travels as \u0000 (jansson escapes it).
   * P-OUT-7: every character beyond ASCII travels as \uXXXX (a surrogate
   * pair beyond U+FFFF), so the line is ASCII: a client that decodes each
   * piece it reads from the pipe on its own (64 KiB at a time, as Node's
   * `data` events come) cannot split a character, whatever the size of
   * the answer. */
  s = json_dumps(msg,
                 JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(12));
  json_decref(msg);
  if (s == NULL) {
    fprintf(stderr, "uvtasks-mcp: could not encode a message\n");
    return;
  }
  len = strlen(s);
  /* json_dumps gives a NUL-terminated string with room only for itself;
   * the newline goes in a second write behind it. */
  mcp_out_write(&server->out, s, len);
  mcp_out_write(&server->out, "\n", 1);
  free(s);
}

void mcp_rpc_result(mcp_server_t *server, json_t *id, json_t *result) {
  json_t *msg = json_object();

  if (msg == NULL || result == NULL) {
    json_decref(msg);
    json_decref(result);
    return;
  }
  /* M-MCP-9: every 2026-era result names its type. */
  if (server->era == MCP_ERA_2026 && json_is_object(result) &&
      json_object_get(result, "resultType") == NULL)
    json_object_set_new(result, "resultType", json_string("complete"));
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set(msg, "id", id);
  json_object_set_new(msg, "result", result);
  mcp_rpc_send(server, msg);
}

/* An error answer whose message is `len` bytes (a tool's text may hold
 * NULs); `id` NULL means the request's id is unknown (null). */
void mcp_rpc_error_len(mcp_server_t *server, json_t *id, int code,
                       const char *message, size_t len) {
  json_t *msg = json_object();
  json_t *err = json_object();

  if (msg == NULL || err == NULL) {
    json_decref(msg);
    json_decref(err);
    return;
  }
  json_object_set_new(err, "code", json_integer(code));
  json_object_set_new(err, "message", mcp_rpc_string(message, len));
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set(msg, "id", id != NULL ? id : json_null());
  json_object_set_new(msg, "error", err);
  mcp_rpc_send(server, msg);
}

void mcp_rpc_error(mcp_server_t *server, json_t *id, int code,
                   const char *message) {
  mcp_rpc_error_len(server, id, code, message, strlen(message));
}

/* An error answer with `data` (released). */
void mcp_rpc_error_data(mcp_server_t *server, json_t *id, int code,
                        const char *message, json_t *data) {
  json_t *msg = json_object();
  json_t *err = json_object();

  if (msg == NULL || err == NULL || data == NULL) {
    json_decref(msg);
    json_decref(err);
    json_decref(data);
    mcp_rpc_error(server, id, code, message);
    return;
  }
  json_object_set_new(err, "code", json_integer(code));
  json_object_set_new(err, "message", mcp_rpc_string(message, strlen(message)));
  json_object_set_new(err, "data", data);
  json_object_set_new(msg, "jsonrpc", json_string("2.0"));
  json_object_set(msg, "id", id != NULL ? id : json_null());
  json_object_set_new(msg, "error", err);
  mcp_rpc_send(server, msg);
}

void mcp_rpc_errorf(mcp_server_t *server, json_t *id, int code, const char *fmt,
                    const char *arg) {
  char buf[512];

  snprintf(buf, sizeof(buf), fmt, arg);
  mcp_rpc_error(server, id, code, buf);
}

/* One answer fewer owed to `b`; the last one sends the array. */
void mcp_rpc_batch_release(mcp_server_t *server, mcp_batch_t *b) {
  json_t *answers;

  if (b == NULL || --b->pending > 0)
    return;
  answers = b->answers;
  free(b);
  /* A batch of notifications only gets no answer at all. */
  if (json_array_size(answers) > 0)
    mcp_rpc_send(server, answers);
  else
    json_decref(answers);
}

/* ---------------------------------------------------------------------- */
/* Lines                                                                   */

/* The id of a request from its first bytes alone (the rest was never
 * kept): the value of an "id" member of the top-level object, a number or
 * a string without escapes, when it comes before anything is cut.  NULL
 * when there is none to be sure of (JSON-RPC's null id then). */
static json_t *head_id(const char *p, size_t n) {
  size_t i = 0;
  int depth = 0;
  int key = 0; /* the next string at depth 1 is a member's name */

  while (i < n) {
    char c = p[i];
    if (c == '"') {
      size_t start = ++i;
      while (i < n && p[i] != '"') {
        if (p[i] == '\\')
          i++;
        i++;
      }
      if (i >= n)
        return NULL;
      if (depth == 1 && key && i - start == 2 &&
          memcmp(p + start, "id", 2) == 0) {
        size_t v = i + 1;
        while (v < n && (p[v] == ' ' || p[v] == '\t'))
          v++;
        if (v >= n || p[v] != ':')
          return NULL;
        v++;
        while (v < n && (p[v] == ' ' || p[v] == '\t'))
          v++;
        if (v < n && p[v] == '"') {
          size_t e = v + 1;
          while (e < n && p[e] != '"' && p[e] != '\\')
            e++;
          if (e >= n || p[e] != '"')
            return NULL;
          return json_stringn(p + v + 1, e - v - 1);
        }
        if (v < n && (p[v] == '-' || (p[v] >= '0' && p[v] <= '9'))) {
          size_t e = v;
          char num[32];
          while (e < n && strchr("-+.eE0123456789", p[e]) != NULL)
            e++;
          if (e >= n || e - v >= sizeof(num))
            return NULL;
          memcpy(num, p + v, e - v);
          num[e - v] = '\0';
          if (strpbrk(num, ".eE") == NULL)
            return json_integer(strtoll(num, NULL, 10));
          return json_real(strtod(num, NULL));
        }
        return NULL;
      }
      key = 0;
      i++;
      continue;
    }
    if (c == '{' || c == '[')
      depth++;
    else if (c == '}' || c == ']')
      depth--;
    if (depth == 1 && (c == '{' || c == ','))
      key = 1;
    else if (c == ':')
      key = 0;
    i++;
  }
  return NULL;
}

void mcp_rpc_oversized(mcp_server_t *server, const char *head, size_t len) {
  char buf[160];
  json_t *id = head != NULL ? head_id(head, len) : NULL;

  snprintf(buf, sizeof(buf),
           "Invalid Request: message longer than %u bytes; skipped",
           MCP_LINE_MAX);
  mcp_rpc_error(server, id, RPC_INVALID_REQUEST, buf);
  json_decref(id);
}

/* A JSON-RPC batch (M-MCP-8): only under 2025-03-26, the revision that had
 * them; the answers go back as one array once all are in. */
static void rpc_batch(mcp_server_t *server, json_t *msg) {
  mcp_batch_t *b;
  json_t *elem;
  size_t i;
  char buf[300];

  if (server->version == NULL ||
      strcmp(server->version, MCP_PROTOCOL_BATCHES) != 0) {
    snprintf(buf, sizeof(buf),
             "Invalid Request: batches are accepted only under protocol "
             "revision " MCP_PROTOCOL_BATCHES " (this session: %s)",
             server->version != NULL ? server->version : "not initialized");
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
    return;
  }
  if (json_array_size(msg) == 0) {
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST,
                  "Invalid Request: an empty batch");
    return;
  }
  /* M-MCP-12: the answer to one line is bounded like any other output. */
  if (json_array_size(msg) > MCP_BATCH_MAX) {
    snprintf(buf, sizeof(buf),
             "Invalid Request: batch too large (%zu requests; at most %u)",
             json_array_size(msg), (unsigned)MCP_BATCH_MAX);
    mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
    return;
  }
  b = calloc(1, sizeof(*b));
  if (b != NULL)
    b->answers = json_array();
  if (b == NULL || b->answers == NULL) {
    free(b);
    mcp_rpc_error(server, NULL, RPC_INTERNAL_ERROR,
                  "Internal error: out of memory");
    return;
  }
  b->pending = 1; /* ours, while the elements are dispatched */
  json_array_foreach(msg, i, elem) {
    server->batch = b;
    server->on_message(server, elem);
  }
  server->batch = NULL;
  mcp_rpc_batch_release(server, b);
}

/* `v` as an integer if it is a real with a whole value that fits int64,
 * else NULL. */
static json_t *rpc_whole(const json_t *v) {
  double d;

  if (!json_is_real(v))
    return NULL;
  d = json_real_value(v);
  if (d < -9.2e18 || d > 9.2e18 || d != (double)(json_int_t)d)
    return NULL;
  return json_integer((json_int_t)d);
}

/* Turn the reals of `v` that are whole numbers within int64 back into
 * integers (for a message read with JSON_DECODE_INT_AS_REAL, below).
 * Returns 0, or -1 out of memory. */
static int rpc_whole_reals(json_t *v);

/* One member of a container: its integer replacement in `*w` (a whole
 * real), or NULL after fixing its own members.  0, or -1 out of memory. */
static int rpc_whole_member(json_t *elem, json_t **w) {
  *w = rpc_whole(elem);
  return *w == NULL && !json_is_real(elem) ? rpc_whole_reals(elem) : 0;
}

static int rpc_whole_reals(json_t *v) {
  const char *key;
  json_t *elem;
  json_t *w;
  void *tmp;
  size_t i;

  if (json_is_object(v)) {
    json_object_foreach_safe(v, tmp, key, elem) {
      if (rpc_whole_member(elem, &w) != 0 ||
          (w != NULL && json_object_set_new(v, key, w) != 0))
        return -1;
    }
  } else if (json_is_array(v)) {
    json_array_foreach(v, i, elem) {
      if (rpc_whole_member(elem, &w) != 0 ||
          (w != NULL && json_array_set_new(v, i, w) != 0))
        return -1;
    }
  }
  return 0;
}

/* M-MCP-12: the values a line holds, counted before parsing (each costs
 * jansson tens of bytes, a line of "[1,1,...]" of 4 MiB some 100 MB):
 * every ',' '[' '{' outside strings, and the elements of a top-level
 * array apart.  Stops counting past the limits. */
static void rpc_count_values(const char *line, size_t len, size_t *values,
                             size_t *batch) {
  int in_string = 0;
  int depth = 0;
  size_t i;

  *values = 0;
  *batch = 0;
  for (i = 0; i < len && *values <= MCP_LINE_VALUES_MAX; i++) {
    char c = line[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = 0;
      continue;
    }
    if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      if (depth == 0 && c == '[')
        *batch = 1;
      depth++;
      (*values)++;
    } else if (c == ']' || c == '}') {
      depth--;
    } else if (c == ',') {
      (*values)++;
      if (depth == 1 && *batch > 0)
        (*batch)++;
    }
  }
}

void mcp_rpc_line(mcp_server_t *server, const char *line, size_t len) {
  json_error_t jerr;
  json_t *msg;
  size_t i;
  char buf[400];

  if (server->shutting_down)
    return;
  /* Blank lines between messages are harmless. */
  for (i = 0; i < len; i++)
    if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
      break;
  if (i == len)
    return;

  /* M-MCP-12: refuse before parsing what would cost more than a few MiB:
   * a batch of more than MCP_BATCH_MAX requests, or too many values. */
  {
    size_t values;
    size_t batch;

    rpc_count_values(line, len, &values, &batch);
    if (batch > MCP_BATCH_MAX && server->version != NULL &&
        strcmp(server->version, MCP_PROTOCOL_BATCHES) == 0) {
      snprintf(buf, sizeof(buf),
               "Invalid Request: batch too large (%s%zu requests; at most "
               "%u)",
               values > MCP_LINE_VALUES_MAX ? "over " : "", batch,
               (unsigned)MCP_BATCH_MAX);
      mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
      return;
    }
    if (values > MCP_LINE_VALUES_MAX) {
      snprintf(buf, sizeof(buf),
               "Invalid Request: a message of more than %u JSON values",
               (unsigned)MCP_LINE_VALUES_MAX);
      mcp_rpc_error(server, NULL, RPC_INVALID_REQUEST, buf);
      return;
    }
  }
  msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (msg == NULL && json_error_code(&jerr) == json_error_numeric_overflow) {
    /* An integer beyond int64 is still JSON, and JavaScript writes its
     * numbers from 2^63 up to 1e21 that way (JSON.stringify(1e20)): read
     * the message with every integer as a real, then make the whole ones
     * that fit integers again, so ids and arguments look as usual and the
     * big ones are reals, which the tools cap (arg_whole).  Integers above
     * 2^53 in such a message lose their low bits. */
    msg = json_loadb(line, len,
                     JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
                     &jerr);
    if (msg != NULL && rpc_whole_reals(msg) != 0) {
      json_decref(msg);
      mcp_rpc_error(server, NULL, RPC_INTERNAL_ERROR,
                    "Internal error: out of memory");
      return;
    }
  }
  if (msg == NULL) {
    snprintf(buf, sizeof(buf), "Parse error: %s (at byte %d)", jerr.text,
             jerr.position);
    mcp_rpc_error(server, NULL, RPC_PARSE_ERROR, buf);
    return;
  }
  if (json_is_array(msg))
    rpc_batch(server, msg);
  else
    server->on_message(server, msg);
  json_decref(msg);
}
