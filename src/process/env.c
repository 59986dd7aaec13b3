/* The child's environment (P-SPAWN-3, P-SPAWN-3b), built once per
 * registry and rebuilt only when it would differ.
 *
 * The environment is the host's minus credentials, plus fixed additions,
 * plus the entries the options give (which win).  Building it walks the
 * host's environment and splits every name, which cost a noticeable share
 * of a spawn when it was done for every task; now the registry's context
 * keeps the result.  It is rebuilt when the host's environment changed (the
 * `environ` array or any of its pointers: setenv, putenv and unsetenv all
 * change one or the other, glibc never rewrites a string in place) or when
 * a start gives other option entries than the last one did (compared by
 * content).  A block is immutable once built and reference-counted on the
 * loop thread: a spawn in flight keeps the block it was given even if the
 * next start builds a new one. */
#include <string.h>

#include "process-internal.h"

extern char **environ;

/* Fixed additions to every child's environment (P-SPAWN-3, P-SPAWN-3b).
 * The editors are `true`: what a person does who closes the editor without
 * a change, so every program either goes on with its own default (git
 * rebase -i, git merge, git revert) or refuses with its own message where
 * it needs a person's text (git commit: "Aborting commit due to empty
 * commit message"), and nothing waits for a terminal that is not there.
 * `false` would make git abort some operations half-way (a revert left in
 * progress), which is harder for a model to recover from. */
static const char *const fixed_env[] = {"NO_COLOR=1",
                                        "TERM=dumb",
                                        "PAGER=cat",
                                        "GIT_PAGER=cat",
                                        "EDITOR=true",
                                        "VISUAL=true",
                                        "GIT_EDITOR=true",
                                        "GIT_SEQUENCE_EDITOR=true",
                                        "GIT_TERMINAL_PROMPT=0",
                                        "PYTHONUNBUFFERED=1"};
#define FIXED_ENV_N (sizeof(fixed_env) / sizeof(fixed_env[0]))

/* Name parts that mark a credential (P-SPAWN-3b, M-MCP-14), upper case.
 * A name is split at every character that is not a letter or a digit
 * ('_' in practice) and matches when one of its parts equals one of these,
 * in any case: AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, DB_PASSWORD, GITHUB_PAT,
 * OPENAI_API_KEY, MYSQL_PWD, CI_JOB_JWT, AUTH_HEADER, SENTRY_DSN,
 * SLACK_WEBHOOK_URL; but KEYBOARD_LAYOUT, MONKEY, TOKENIZERS_PARALLELISM
 * and PATH stay. */
static const char *const credential_parts[] = {
    "KEY",          "KEYS",        "APIKEY",   "ACCESSKEY",  "SECRETKEY",
    "PRIVATEKEY",   "SECRET",      "SECRETS",  "TOKEN",      "TOKENS",
    "AUTHTOKEN",    "ACCESSTOKEN", "PASSWORD", "PASSWORDS",  "PASSWD",
    "PASS",         "PASSPHRASE",  "PAT",      "CREDENTIAL", "CREDENTIALS",
    "CREDS",        "PWD",         "JWT",      "COOKIE",     "COOKIES",
    "AUTH",         "BEARER",      "DSN",      "WEBHOOK",    "WEBHOOKS",
    "AUTHORIZATION", "SESSIONID",  "SESSIONKEY"};

/* M-MCP-14: a part that ends with one of these is a credential too, the
 * word fused to what it guards: PGPASSWORD, SSHPASS, NGROK_AUTHTOKEN,
 * GITASKPASS.  Only at the end: PASSAGE and TOKENIZERS stay. */
static const char *const credential_suffixes[] = {
    "PASSWORD", "PASSWD", "PASSPHRASE", "PASS", "TOKEN", "SECRET", "JWT"};

/* Parts that end like a credential but are words (BYPASS, COMPASS). */
static const char *const plain_words[] = {"BYPASS",   "COMPASS",  "SURPASS",
                                          "TRESPASS", "OVERPASS", "UNDERPASS",
                                          "ENCOMPASS"};

/* Whole names that match the parts but name no credential: the working
 * directories and the ssh agent's socket (a path; git over ssh needs it). */
static const char *const plain_names[] = {"PWD=", "OLDPWD=", "SSH_AUTH_SOCK="};

static size_t name_len(const char *entry) {
  const char *eq = strchr(entry, '=');
  return eq ? (size_t)(eq - entry) : strlen(entry);
}

static int same_name(const char *a, const char *b) {
  size_t n = name_len(a);
  return n == name_len(b) && memcmp(a, b, n) == 0;
}

static int upper(int c) {
  return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

static int alnum(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* Case-insensitive: does part[0, n) end with the upper-case word `w`
 * (`whole`: equal it)? */
static int part_is(const char *part, size_t n, const char *w, int whole) {
  size_t len = strlen(w);
  size_t j;

  if (len > n || (whole && len != n))
    return 0;
  part += n - len;
  for (j = 0; j < len; j++)
    if (upper((unsigned char)part[j]) != w[j])
      return 0;
  return 1;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Is part[0, n) a credential part: one of credential_parts, or a part that
 * ends with one of credential_suffixes and is not a plain word? */
static int credential_part(const char *part, size_t n) {
  size_t i;

  for (i = 0; i < COUNT(credential_parts); i++)
    if (part_is(part, n, credential_parts[i], 1))
      return 1;
  for (i = 0; i < COUNT(plain_words); i++)
    if (part_is(part, n, plain_words[i], 1))
      return 0;
  for (i = 0; i < COUNT(credential_suffixes); i++)
    if (part_is(part, n, credential_suffixes[i], 0))
      return 1;
  return 0;
}

static int scheme_char(int c) {
  return alnum(c) || c == '+' || c == '-' || c == '.';
}

/* M-MCP-14: does the value carry a password in a URL, as in
 * `scheme://user:password@host` (also `redis://:password@host`)?  Every
 * "://" in it is looked at: the authority runs to the next '/', '?', '#',
 * white space, ',' or ';', and its user information (before its last '@')
 * holding a ':' is a password. */
static int url_with_password(const char *value) {
  const char *p = value;
  const char *a;
  const char *end;
  const char *at;
  const char *c;

  while ((p = strstr(p, "://")) != NULL) {
    if (p == value || !scheme_char((unsigned char)p[-1])) {
      p += 3;
      continue;
    }
    a = p + 3;
    end = a + strcspn(a, "/?# \t\n,;");
    at = NULL;
    for (c = a; c < end; c++)
      if (*c == '@')
        at = c;
    if (at != NULL && memchr(a, ':', (size_t)(at - a)) != NULL)
      return 1;
    p = end;
  }
  return 0;
}

/* M-MCP-14: git's configuration from the environment is one family,
 * GIT_CONFIG_COUNT with GIT_CONFIG_KEY_<n> and GIT_CONFIG_VALUE_<n> (and
 * the older GIT_CONFIG_PARAMETERS).  A value may be a credential
 * (`http.extraheader` "AUTHORIZATION: basic ..."), and a family with a
 * member missing breaks every git command ("missing config key
 * GIT_CONFIG_KEY_0", when the scrub took the KEY and passed the VALUE),
 * so the family goes whole; `--pass-env GIT_CONFIG_COUNT` passes it
 * whole. */
static int git_config(const char *entry) {
  return strncmp(entry, "GIT_CONFIG_COUNT=", 17) == 0 ||
         strncmp(entry, "GIT_CONFIG_KEY_", 15) == 0 ||
         strncmp(entry, "GIT_CONFIG_VALUE_", 17) == 0 ||
         strncmp(entry, "GIT_CONFIG_PARAMETERS=", 22) == 0;
}

static int starts_nocase(const char *s, const char *w) {
  for (; *w != '\0'; s++, w++)
    if (upper((unsigned char)*s) != upper((unsigned char)*w))
      return 0;
  return 1;
}

/* M-MCP-14: a value that is a credential whatever its name: an HTTP
 * authorization ("Bearer x", "Basic eDp5", "Authorization: ..."), a
 * private key, a token in one of the well-known prefixed forms (GitHub's
 * ghp_ gho_ ghu_ ghs_ ghr_ github_pat_, GitLab's glpat-, Slack's xox?-,
 * Stripe's sk_live_ rk_live_, Anthropic's sk-ant-, an AWS access key id
 * AKIA + 16), or a connection string's "password=" / "pwd=" field. */
static int value_is_credential(const char *v) {
  static const char *const prefixes[] = {
      "ghp_",  "gho_",  "ghu_",     "ghs_",     "ghr_",   "github_pat_",
      "glpat-", "xoxb-", "xoxp-",   "xoxa-",    "xoxr-",  "xoxs-",
      "sk_live_", "rk_live_", "sk-ant-"};
  const char *p;
  size_t i;

  while (*v == ' ' || *v == '\t')
    v++;
  if (starts_nocase(v, "authorization:") || starts_nocase(v, "bearer ") ||
      starts_nocase(v, "basic ") || starts_nocase(v, "token ") ||
      strstr(v, "PRIVATE KEY-----") != NULL)
    return 1;
  for (i = 0; i < COUNT(prefixes); i++)
    if (strncmp(v, prefixes[i], strlen(prefixes[i])) == 0)
      return 1;
  if (strncmp(v, "AKIA", 4) == 0 && strlen(v) == 20 &&
      strspn(v + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == 16)
    return 1;
  for (p = v; *p != '\0'; p++)
    if ((p == v || *p == ';' || *p == '&' || *p == ' ') &&
        (starts_nocase(p + (p != v), "password=") ||
         starts_nocase(p + (p != v), "pwd=")))
      return 1;
  return 0;
}

static int looks_like_credential(const char *entry) {
  size_t n = name_len(entry);
  size_t i = 0;
  size_t start;

  for (i = 0; i < COUNT(plain_names); i++)
    if (same_name(entry, plain_names[i]))
      return 0;
  if (git_config(entry))
    return 1;
  if (entry[n] == '=' && value_is_credential(entry + n + 1))
    return 1;
  i = 0;
  while (i < n) {
    while (i < n && !alnum((unsigned char)entry[i]))
      i++;
    start = i;
    while (i < n && alnum((unsigned char)entry[i]))
      i++;
    if (i > start && credential_part(entry + start, i - start))
      return 1;
  }
  return entry[n] == '=' && url_with_password(entry + n + 1);
}

static int in_list(const char *entry, const char *const *list) {
  if (list == NULL)
    return 0;
  for (; *list != NULL; list++)
    if (same_name(entry, *list))
      return 1;
  return 0;
}

static int in_fixed(const char *entry) {
  size_t i;
  for (i = 0; i < FIXED_ENV_N; i++)
    if (same_name(entry, fixed_env[i]))
      return 1;
  return 0;
}

/* Does `entry` go from the host's environment to the child's?  git's
 * configuration family goes whole when the host passes GIT_CONFIG_COUNT
 * itself (uvtasks-mcp's --pass-env GIT_CONFIG_COUNT), else not at all. */
static int inherited(const char *entry, const char *const *extra) {
  if (strchr(entry, '=') == NULL || in_fixed(entry) || in_list(entry, extra) ||
      same_name(entry, UVT__CMD_VAR "="))
    return 0;
  if (git_config(entry))
    return in_list("GIT_CONFIG_COUNT=", extra);
  return !looks_like_credential(entry);
}

/* Build a block: the inherited entries, the fixed additions the options do
 * not replace, then the options' entries.  One allocation: the header, the
 * NULL-terminated pointer array, the strings. */
static uvt__env_t *env_build(const char *const *extra) {
  size_t n = 0;
  size_t bytes = 0;
  size_t i;
  char **e;
  const char *const *x;
  uvt__env_t *env;
  char *w;
  size_t k = 0;

  for (e = environ; e != NULL && *e != NULL; e++) {
    if (inherited(*e, extra)) {
      n++;
      bytes += strlen(*e) + 1;
    }
  }
  for (i = 0; i < FIXED_ENV_N; i++) {
    if (!in_list(fixed_env[i], extra)) {
      n++;
      bytes += strlen(fixed_env[i]) + 1;
    }
  }
  for (x = extra; x != NULL && *x != NULL; x++) {
    n++;
    bytes += strlen(*x) + 1;
  }
  env = uvt__malloc(sizeof(*env) + (n + 1) * sizeof(char *) + bytes);
  if (env == NULL)
    return NULL;
  env->refs = 1;
  env->n = n;
  env->envp = (char **)(env + 1);
  w = (char *)(env->envp + n + 1);
#define ENV_ADD(s)                                                             \
  do {                                                                         \
    size_t len_ = strlen(s) + 1;                                               \
    memcpy(w, (s), len_);                                                      \
    env->envp[k++] = w;                                                        \
    w += len_;                                                                 \
  } while (0)
  for (e = environ; e != NULL && *e != NULL; e++)
    if (inherited(*e, extra))
      ENV_ADD(*e);
  for (i = 0; i < FIXED_ENV_N; i++)
    if (!in_list(fixed_env[i], extra))
      ENV_ADD(fixed_env[i]);
  for (x = extra; x != NULL && *x != NULL; x++)
    ENV_ADD(*x);
#undef ENV_ADD
  env->envp[k] = NULL;
  return env;
}

void uvt__env_unref(uvt__env_t *env) {
  if (env != NULL && --env->refs == 0)
    uvt__free(env);
}

/* Has the host's environment changed since the base block was built? */
static int environ_changed(const uvt__envcache_t *c) {
  size_t i;

  if (c->base == NULL || environ != c->environ_array)
    return 1;
  for (i = 0; i < c->environ_n; i++)
    if (environ == NULL || environ[i] != c->environ_seen[i])
      return 1;
  return environ != NULL && environ[c->environ_n] != NULL;
}

/* Remember the host's environment as it is now (pointers only). */
static int environ_remember(uvt__envcache_t *c) {
  size_t n = 0;
  char **seen;

  while (environ != NULL && environ[n] != NULL)
    n++;
  seen = uvt__malloc((n + 1) * sizeof(*seen));
  if (seen == NULL)
    return UV_ENOMEM;
  if (n > 0)
    memcpy(seen, environ, n * sizeof(*seen));
  uvt__free(c->environ_seen);
  c->environ_seen = seen;
  c->environ_n = n;
  c->environ_array = environ;
  return 0;
}

/* Are `extra` the entries the last block with extras was built from? */
static int same_extra(const uvt__envcache_t *c, const char *const *extra) {
  size_t i;

  if (c->with_extra == NULL)
    return 0;
  for (i = 0; extra[i] != NULL; i++)
    if (i >= c->extra_n || strcmp(extra[i], c->extra[i]) != 0)
      return 0;
  return i == c->extra_n;
}

static int extra_remember(uvt__envcache_t *c, const char *const *extra) {
  size_t n = 0;
  size_t bytes = 0;
  size_t i;
  char **copy;
  char *w;

  while (extra[n] != NULL)
    bytes += strlen(extra[n++]) + 1;
  copy = uvt__malloc((n + 1) * sizeof(*copy) + bytes);
  if (copy == NULL)
    return UV_ENOMEM;
  w = (char *)(copy + n + 1);
  for (i = 0; i < n; i++) {
    size_t len = strlen(extra[i]) + 1;
    memcpy(w, extra[i], len);
    copy[i] = w;
    w += len;
  }
  copy[n] = NULL;
  uvt__free(c->extra);
  c->extra = copy;
  c->extra_n = n;
  return 0;
}

int uvt__env_get(uvt__envcache_t *c, const char *const *extra,
                 uvt__env_t **out) {
  uvt__env_t *env;

  if (environ_changed(c)) {
    env = env_build(NULL);
    if (env == NULL || environ_remember(c) != 0) {
      uvt__env_unref(env);
      return UV_ENOMEM;
    }
    uvt__env_unref(c->base);
    c->base = env;
    /* Built on the old host environment too. */
    uvt__env_unref(c->with_extra);
    c->with_extra = NULL;
  }
  if (extra == NULL || extra[0] == NULL) {
    c->base->refs++;
    *out = c->base;
    return 0;
  }
  if (!same_extra(c, extra)) {
    env = env_build(extra);
    if (env == NULL || extra_remember(c, extra) != 0) {
      uvt__env_unref(env);
      return UV_ENOMEM;
    }
    uvt__env_unref(c->with_extra);
    c->with_extra = env;
  }
  c->with_extra->refs++;
  *out = c->with_extra;
  return 0;
}

void uvt__env_cache_free(uvt__envcache_t *c) {
  uvt__env_unref(c->base);
  uvt__env_unref(c->with_extra);
  uvt__free(c->environ_seen);
  uvt__free(c->extra);
  uvt__free(c->resolved);
  uvt__free(c->sb_bwrap);
  uvt__free(c->sb_helper);
  memset(c, 0, sizeof(*c));
}

/* E-10: a local task's environment for a producer that hands it to
 * something else (the Slurm engine's jobs): a new NULL-terminated array
 * of new strings, freed by the caller with uvt__free. */
char **uvt__env_scrubbed_copy(const char *const *extra, size_t *n) {
  uvt__env_t *env = env_build(extra);
  char **out;
  size_t i;

  if (env == NULL)
    return NULL;
  out = uvt__calloc(env->n + 1, sizeof(char *));
  for (i = 0; out != NULL && i < env->n; i++) {
    if ((out[i] = uvt__strdup(env->envp[i])) == NULL) {
      while (i > 0)
        uvt__free(out[--i]);
      uvt__free(out);
      out = NULL;
    }
  }
  if (out != NULL)
    *n = env->n;
  uvt__env_unref(env);
  return out;
}
