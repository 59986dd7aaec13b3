/* S-4: `--sandbox off|read-only|workspace [--allow-net] [--writable DIR]...
 * [--writable-git]`
 * puts every command of the server in one sandbox (uvtasks/process.h,
 * uvt_sandbox_t), and the tool descriptions say which, so that a model
 * does not retry a write or a connection that cannot succeed.  What a
 * refused write or connection says comes from the command itself
 * ("Read-only file system", "Network is unreachable"), in its result. */
#include "mcp.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mcp_sandbox_arg(mcp_config_t *c, const char *opt, const char *val) {
  if (strcmp(opt, "--sandbox") == 0) {
    if (val == NULL)
      return -1;
    if (strcmp(val, "off") == 0)
      c->sandbox_on = 0;
    else if (strcmp(val, "read-only") == 0)
      c->sandbox_on = 1, c->sandbox.fs = UVT_SANDBOX_FS_READONLY;
    else if (strcmp(val, "workspace") == 0)
      c->sandbox_on = 1, c->sandbox.fs = UVT_SANDBOX_FS_WORKSPACE;
    else
      return -1;
    return 2;
  }
  if (strcmp(opt, "--allow-net") == 0) {
    c->sandbox.network = UVT_SANDBOX_NET_HOST;
    return 1;
  }
  if (strcmp(opt, "--writable-git") == 0) {
    /* S-6: the repositories' hooks and config writable too. */
    c->sandbox.writable_git = 1;
    return 1;
  }
  if (strcmp(opt, "--writable") == 0) {
    if (val == NULL || val[0] == '\0' ||
        c->writable_n + 1 >= sizeof(c->writable) / sizeof(c->writable[0]))
      return -1;
    c->writable[c->writable_n++] = val;
    c->writable[c->writable_n] = NULL;
    c->sandbox.writable = c->writable;
    return 2;
  }
  return 0;
}

int mcp_sandbox_start(mcp_config_t *c) {
  const char *dir = c->cwd != NULL ? c->cwd : ".";

  if (!c->sandbox_on)
    return 0;
  /* S-5: the workspace is the host's choice, fixed here; a tool call's
   * cwd must lie inside it (or a --writable path), never widens it. */
  if (realpath(dir, c->workspace) == NULL) {
    fprintf(stderr, "uvtasks-mcp: --cwd %s: %s\n", dir, strerror(errno));
    return -1;
  }
  c->sandbox.workspace = c->workspace;
  return 0;
}

/* The sentence every command tool's description gets. */
static json_t *profile_text(const mcp_config_t *c) {
  char text[8192];
  size_t n;
  unsigned i;
  int ws = c->sandbox.fs == UVT_SANDBOX_FS_WORKSPACE;

#define MORE(...)                                                              \
  do {                                                                         \
    if (n < sizeof(text))                                                      \
      n += (size_t)snprintf(text + n, sizeof(text) - n, __VA_ARGS__);          \
  } while (0)
  n = 0;
  MORE(" SANDBOX: every command runs in a sandbox (profile %s%s). The file "
       "system is read-only except ",
       ws ? "workspace" : "read-only",
       c->sandbox.network == UVT_SANDBOX_NET_HOST ? ", network allowed" : "");
  if (ws)
    MORE("the workspace %s, ", c->workspace);
  for (i = 0; i < c->writable_n; i++)
    MORE("%s, ", c->writable[i]);
  if (ws || c->writable_n > 0)
    MORE("and ");
  MORE("/tmp (private to the command, empty at its start): any other "
       "write fails with \"Read-only file system\", so do not retry it or "
       "work around it; write inside the writable places instead. Commands "
       "start in %s; a cwd argument must lie inside it%s, else the call is "
       "refused and nothing runs.%s ~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh, "
       "~/.netrc, ~/.npmrc and ~/.docker read as empty. Other processes of "
       "the machine are not visible.%s",
       c->workspace, c->writable_n > 0 ? " or inside a writable directory" : "",
       c->sandbox.writable_git
           ? ""
           : " The hooks and config of the git repositories there "
             "(.git/hooks, .git/config, core.hooksPath) are read-only: git "
             "commit works, git config and installing hooks do not.",
       c->sandbox.network == UVT_SANDBOX_NET_HOST
           ? " The network is available."
           : " There is no network at all (not even localhost): every "
             "connection and name lookup fails, so do not retry downloads, "
             "package installs or requests to servers; ask the user "
             "instead.");
#undef MORE
  return json_string(text);
}

void mcp_sandbox_describe(const mcp_server_t *server, json_t *tools) {
  json_t *tool;
  json_t *desc;
  json_t *more;
  const char *name;
  size_t i;

  if (!server->config.sandbox_on)
    return;
  more = profile_text(&server->config);
  if (more == NULL)
    return;
  json_array_foreach(tools, i, tool) {
    name = json_string_value(json_object_get(tool, "name"));
    desc = json_object_get(tool, "description");
    if (name == NULL || !json_is_string(desc) || !mcp_tool_starts(name))
      continue;
    json_object_set_new(
        tool, "description",
        json_sprintf("%s%s", json_string_value(desc), json_string_value(more)));
  }
  json_decref(more);
}
