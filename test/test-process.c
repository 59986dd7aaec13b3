/* The process producer (the contract §3): options, ids, the spawn (P-SPAWN-*)
 * and case C-04.  Children are this binary in a helper mode where the test
 * is not about the shell (test-process-util.c); every suite of the
 * producer runs as a child subreaper and checks that no child is left
 * (L-2). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-process-util.h"

/* ---------------------------------------------------------------------- */
/* Options, defaults, ids                                                  */

/* The defaults of contract §3 and one task run with them (drain 500, grace
 * 3000, cap 1 MiB). */
static void test_defaults(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  uvt_agent_t a;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  uvt_snapshot_t s;
  (void)state;

  uvt_process_options_init(&o);
  assert_null(o.command);
  assert_null(o.argv);
  assert_null(o.kind);
  assert_null(o.label);
  assert_null(o.cwd);
  assert_null(o.env);
  assert_null(o.stdin_data);
  assert_int_equal(o.grace_ms, 3000);
  assert_int_equal(o.drain_ms, 500);
  assert_int_equal(o.output_cap_bytes, 1024 * 1024);
  assert_int_equal(o.max_runtime_ms, 0);

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  o.command = "echo hi";
  o.owner = &a;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  assert_int_equal(uvt_get(f.reg, id, &a, &s), 0);
  assert_string_equal(s.kind, "bash");
  assert_string_equal(s.label, "echo hi");
  assert_string_equal(s.owner_session, "S1");
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, &a, &sb);
  assert_string_equal(sb.buf, "hi\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* contract §3 kind and label: "bash" and the command unless given; argv mode
 * labels with its words. */
static void test_kind_label(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  uvt_snapshot_t s;
  waitres_t w;
  const char *const av[] = {"true", "x", NULL};
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_string_equal(s.label, "true x");
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);

  o.kind = "shell";
  o.label = "my label";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "shell-1");
  assert_int_equal(uvt_get(f.reg, id, NULL, &s), 0);
  assert_string_equal(s.label, "my label");
  uvt_snapshot_cleanup(&s);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* contract §3 options, R-START-1, R-START-2: bad options are refused before
 * anything starts; no id is used. */
static void test_invalid_options(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *const av[] = {"true", NULL};
  const char *const empty[] = {NULL};
  const char *const empty_word[] = {"", NULL};
  const char *const bad_env[] = {"NOEQUALS", NULL};
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(uvt_process_start(NULL, &o, id), UV_EINVAL);
  assert_int_equal(uvt_process_start(f.reg, NULL, id), UV_EINVAL);
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.command = "true";
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.command = NULL;
  o.argv = empty;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.argv = av;
  o.env = bad_env;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.env = NULL;
  o.output_cap_bytes = 3;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.output_cap_bytes = 4;
  o.kind = "bad kind";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.kind = NULL;
  o.command = "";
  o.argv = NULL;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  /* An empty command is refused whatever the label (a label used to
   * stand in for the label check that caught it). */
  o.label = "a label";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.command = " \t\n ";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.command = NULL;
  o.argv = empty_word;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EINVAL);
  o.argv = NULL;
  o.label = NULL;
  /* No surface: refused by the registry before spawning. */
  uvt_surface_detach(&f.surface);
  o.command = "true";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UVT_ENOSURFACE);
  assert_int_equal(uvt_surface_attach(f.reg, &f.surface, "test"), 0);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* contract §3 uvt_process_pid, R-OWN-2: the leader's pid (= group and session
 * id), behind the session fence. */
static void test_pid(void **state) {
  fixture_t f;
  uvt_agent_t a, b;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char fid[UVT_ID_MAX];
  fake_t fk;
  int pid;
  uvt_kill_result_t kr;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  agent_setup(&f, &b, "B", "S2");
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, &a, &o, "--helper=sleep", "10000", NULL, id), 0);
  pid = task_pid(&f, id, &a);
  assert_true(pid > 0);
  assert_int_equal(getpgid(pid), pid);
  assert_int_equal(getsid(pid), pid);
  assert_int_equal(uvt_process_pid(f.reg, id, &b), UVT_EFOREIGN);
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), UVT_EFOREIGN);
  assert_int_equal(uvt_process_pid(f.reg, "bash-99", &a), UVT_ENOTASK);
  assert_int_equal(uvt_process_pid(NULL, id, &a), UV_EINVAL);
  assert_int_equal(uvt_process_pid(f.reg, NULL, &a), UV_EINVAL);
  memset(&fk, 0, sizeof(fk));
  fk.settle_on_cancel = 1;
  assert_int_equal(fake_start(f.reg, &fk, NULL, NULL, NULL, fid), 0);
  assert_int_equal(uvt_process_pid(f.reg, fid, NULL), UV_EINVAL);
  assert_int_equal(uvt_kill(f.reg, id, &a, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, &a);
  assert_outcome(&w.snap, UVT_KILLED, "signal: SIGTERM");
  /* Still answered after the end, while the record exists. */
  assert_int_equal(uvt_process_pid(f.reg, id, &a), pid);
  wait_end(&w);
  fixture_close(&f);
}

/* ---------------------------------------------------------------------- */
/* Spawn                                                                   */

/* P-SPAWN-1: own session and group; stdin /dev/null. */
static void test_spawn_session(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char want[128];
  waitres_t w;
  sbuf_t sb = {0};
  int pid;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=ids", NULL, NULL, id),
                   0);
  pid = task_pid(&f, id, NULL);
  assert_true(pid > 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  snprintf(want, sizeof(want), "pid=%d pgid=%d sid=%d stdin=devnull\n", pid,
           pid, pid);
  assert_string_equal(sb.buf, want);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-SPAWN-1: input bytes are written, then end of file. */
static void test_spawn_stdin_data(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  static const char data[] = "hello\nworld\0bin";
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.stdin_data = data;
  o.stdin_len = sizeof(data) - 1;
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=cat", NULL, NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_int_equal(sb.len, sizeof(data) - 1);
  assert_memory_equal(sb.buf, data, sizeof(data) - 1);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-SPAWN-2: the command text is in no process's argv, and the wrapper's
 * variables do not reach the command or its children. */
static void test_spawn_argv_hidden(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  char cmd[PATH_MAX + 128];
  char marker[64];
  pid_t pid;
  uvt_kill_result_t kr;
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  snprintf(marker, sizeof(marker), "UVTMARK%dX", (int)getpid());
  snprintf(cmd, sizeof(cmd), ": %s; sleep 30", marker);
  assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
  pid = task_pid(&f, id, NULL);
  assert_true(run_until(&f, group_runs_sleep, &pid, 10000));
  assert_int_equal(cmdline_count(marker), 0);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);

  snprintf(cmd, sizeof(cmd),
           "echo \"cmd=[$UVTASKS_CMD] c=[$__uvt_c]\"; '%s' --helper=env "
           "UVTASKS_CMD",
           self_exe);
  assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "cmd=[] c=[]\nUVTASKS_CMD unset\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
}

/* C-04, P-SPAWN-2: `pkill -f` in one task matches the other task's command,
 * never its own wrapper shell.  The pattern carries our pid so that no
 * unrelated `sleep 999` on the machine is touched. */
static void test_c04_pkill(void **state) {
  fixture_t f;
  uvt_agent_t a;
  char id1[UVT_ID_MAX];
  char id2[UVT_ID_MAX];
  char cmd[256];
  pid_t pid1;
  waitres_t w1, w2;
  sbuf_t sb = {0};
  (void)state;

  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  snprintf(cmd, sizeof(cmd), "sleep 999.%d", (int)getpid());
  assert_int_equal(start_sh(&f, &a, cmd, id1), 0);
  pid1 = task_pid(&f, id1, &a);
  assert_true(run_until(&f, group_runs_sleep, &pid1, 10000));
  snprintf(cmd, sizeof(cmd), "pkill -f 'sleep 999.%d'; echo rc=$?",
           (int)getpid());
  assert_int_equal(start_sh(&f, &a, cmd, id2), 0);
  wait_task(&f, &w2, id2, 5000, &a);
  assert_outcome(&w2.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id2, &a, &sb);
  assert_string_equal(sb.buf, "rc=0\n");
  /* t1's sleep got the signal; its shell reports it, or died with it. */
  wait_task(&f, &w1, id1, 5000, &a);
  if (w1.snap.status == UVT_COMPLETED)
    assert_string_equal(w1.snap.detail, "exit code: 143");
  else
    assert_outcome(&w1.snap, UVT_KILLED, "signal: SIGTERM");
  wait_end(&w1);
  wait_end(&w2);
  sb_free(&sb);
  fixture_close(&f);
}

/* P-SPAWN-3: credentials filtered, fixed additions, options win. */
static void test_spawn_env(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  const char *const extra[] = {"UVT_EXTRA=1", "PAGER=more",
                               "UVT_MY_TOKEN=given", NULL};
  const char *av[16];
  int i = 0;
  (void)state;

  setenv("UVT_TEST_API_KEY", "k", 1);
  setenv("uvt_test_secret_x", "s", 1);
  setenv("UVT_GH_TOKEN", "t", 1);
  setenv("UVT_DB_Password", "p", 1);
  setenv("UVT_PLAIN", "ok", 1);
  setenv("PAGER", "less", 1);
  setenv("TERM", "xterm", 1);
  setenv("NO_COLOR", "0", 1);

  fixture_init(&f, NULL);
  test_opts(&o);
  o.env = extra;
  av[i++] = self_exe;
  av[i++] = "--helper=env";
  av[i++] = "UVT_TEST_API_KEY";
  av[i++] = "uvt_test_secret_x";
  av[i++] = "UVT_GH_TOKEN";
  av[i++] = "UVT_DB_Password";
  av[i++] = "UVT_PLAIN";
  av[i++] = "PAGER";
  av[i++] = "TERM";
  av[i++] = "NO_COLOR";
  av[i++] = "GIT_PAGER";
  av[i++] = "UVT_EXTRA";
  av[i++] = "UVT_MY_TOKEN";
  av[i] = NULL;
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "UVT_TEST_API_KEY unset\n"
                              "uvt_test_secret_x unset\n"
                              "UVT_GH_TOKEN unset\n"
                              "UVT_DB_Password unset\n"
                              "UVT_PLAIN=ok\n"
                              "PAGER=more\n"
                              "TERM=dumb\n"
                              "NO_COLOR=1\n"
                              "GIT_PAGER=cat\n"
                              "UVT_EXTRA=1\n"
                              "UVT_MY_TOKEN=given\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  unsetenv("UVT_TEST_API_KEY");
  unsetenv("uvt_test_secret_x");
  unsetenv("UVT_GH_TOKEN");
  unsetenv("UVT_DB_Password");
  unsetenv("UVT_PLAIN");
  unsetenv("NO_COLOR");
}

typedef struct {
  const char *name;
  const char *host; /* set in the host's environment first, NULL = unset */
  const char *want; /* the helper's line for it */
} env_case_t;

/* Run this binary's env helper over the names of `cases` (host values set
 * first, `extra` as the options' env) and compare its lines. */
static void check_env(const env_case_t *cases, size_t n,
                      const char *const *extra) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  sbuf_t want = {0};
  const char *av[64];
  size_t i;

  assert_true(n + 3 <= sizeof(av) / sizeof(av[0]));
  av[0] = self_exe;
  av[1] = "--helper=env";
  for (i = 0; i < n; i++) {
    if (cases[i].host != NULL)
      setenv(cases[i].name, cases[i].host, 1);
    else
      unsetenv(cases[i].name);
    av[i + 2] = cases[i].name;
    sb_add(&want, cases[i].want, strlen(cases[i].want));
    sb_add(&want, "\n", 1);
  }
  av[n + 2] = NULL;
  fixture_init(&f, NULL);
  test_opts(&o);
  o.env = extra;
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, want.buf);
  wait_end(&w);
  sb_free(&sb);
  sb_free(&want);
  fixture_close(&f);
  for (i = 0; i < n; i++)
    unsetenv(cases[i].name);
}

/* P-SPAWN-3b: the credential scrub matches whole name parts (split at
 * '_', any case) and keeps names that merely contain the letters. */
static void test_spawn_env_scrub(void **state) {
  static const env_case_t cases[] = {
      {"UVT_AWS_SECRET_ACCESS_KEY", "x", "UVT_AWS_SECRET_ACCESS_KEY unset"},
      {"UVT_GITHUB_TOKEN", "x", "UVT_GITHUB_TOKEN unset"},
      {"UVT_DB_PASSWORD", "x", "UVT_DB_PASSWORD unset"},
      {"UVT_GITHUB_PAT", "x", "UVT_GITHUB_PAT unset"},
      {"UVT_OPENAI_API_KEY", "x", "UVT_OPENAI_API_KEY unset"},
      {"UVT_OPENAI_APIKEY", "x", "UVT_OPENAI_APIKEY unset"},
      {"uvt_smtp_passwd", "x", "uvt_smtp_passwd unset"},
      {"UVT_SMTP_PASS", "x", "UVT_SMTP_PASS unset"},
      {"UVT_GPG_PASSPHRASE", "x", "UVT_GPG_PASSPHRASE unset"},
      {"UVT_GCP_CREDENTIALS", "x", "UVT_GCP_CREDENTIALS unset"},
      {"Uvt_Cloud_Credential_File", "x", "Uvt_Cloud_Credential_File unset"},
      {"UVT_NGROK_AUTHTOKEN", "x", "UVT_NGROK_AUTHTOKEN unset"},
      {"UVT_OAUTH_CLIENT_SECRET", "x", "UVT_OAUTH_CLIENT_SECRET unset"},
      {"UVT_SSH_PRIVATE_KEYS", "x", "UVT_SSH_PRIVATE_KEYS unset"},
      {"TOKEN", "x", "TOKEN unset"},
      /* Kept: the letters inside a longer part. */
      {"KEYBOARD_LAYOUT", "us", "KEYBOARD_LAYOUT=us"},
      {"MONKEY", "m", "MONKEY=m"},
      {"UVT_TOKENIZERS_PARALLELISM", "false",
       "UVT_TOKENIZERS_PARALLELISM=false"},
      {"UVT_PATH_EXTRA", "/x", "UVT_PATH_EXTRA=/x"},
      {"UVT_PASSAGE", "p", "UVT_PASSAGE=p"},
      {"UVT_KEYSTONE_URL", "u", "UVT_KEYSTONE_URL=u"},
      {"UVT_SECRETARY", "s", "UVT_SECRETARY=s"},
      /* An entry the host gives on purpose goes through the options. */
      {"UVT_GIVEN_TOKEN", "host", "UVT_GIVEN_TOKEN=given"},
  };
  const char *const extra[] = {"UVT_GIVEN_TOKEN=given", NULL};
  (void)state;
  check_env(cases, sizeof(cases) / sizeof(cases[0]), extra);
}

/* M-MCP-14: the wider scrub: more whole parts, parts fused at their end,
 * passwords in URLs; and what stays. */
static void test_spawn_env_scrub_wider(void **state) {
  static const env_case_t cases[] = {
      {"UVT_MYSQL_PWD", "x", "UVT_MYSQL_PWD unset"},
      {"UVT_CI_JOB_JWT", "x", "UVT_CI_JOB_JWT unset"},
      {"UVT_COOKIE", "a=b", "UVT_COOKIE unset"},
      {"UVT_AUTH_HEADER", "x", "UVT_AUTH_HEADER unset"},
      {"UVT_BEARER", "x", "UVT_BEARER unset"},
      {"UVT_SENTRY_DSN", "https://k@h/1", "UVT_SENTRY_DSN unset"},
      {"UVT_SLACK_WEBHOOK_URL", "https://h/x", "UVT_SLACK_WEBHOOK_URL unset"},
      {"UVT_HTTP_AUTHORIZATION", "x", "UVT_HTTP_AUTHORIZATION unset"},
      {"UVTPGPASSWORD", "x", "UVTPGPASSWORD unset"},
      {"UVT_SSHPASS", "x", "UVT_SSHPASS unset"},
      {"UVT_VAULTTOKEN", "x", "UVT_VAULTTOKEN unset"},
      {"UVT_APPSECRET", "x", "UVT_APPSECRET unset"},
      {"UVT_DATABASE_URL", "postgres://u:p@h/db", "UVT_DATABASE_URL unset"},
      {"UVT_REDIS_URL", "redis://:p@h:6379", "UVT_REDIS_URL unset"},
      {"uvt_https_proxy", "http://u:p@proxy:3128", "uvt_https_proxy unset"},
      {"UVT_UPSTREAMS", "http://a,https://u:p@b", "UVT_UPSTREAMS unset"},
      /* Kept. */
      {"UVT_BYPASS_CACHE", "1", "UVT_BYPASS_CACHE=1"},
      {"UVT_COMPASS", "n", "UVT_COMPASS=n"},
      {"UVT_AUTHOR", "me", "UVT_AUTHOR=me"},
      {"UVT_REPO_URL", "ssh://git@h/x", "UVT_REPO_URL=ssh://git@h/x"},
      {"UVT_DOCS", "https://h/a:b@c", "UVT_DOCS=https://h/a:b@c"},
      {"UVT_TIME", "12:30@home", "UVT_TIME=12:30@home"},
      {"SSH_AUTH_SOCK", "/tmp/a.sock", "SSH_AUTH_SOCK=/tmp/a.sock"},
      {"OLDPWD", "/tmp", "OLDPWD=/tmp"},
  };
  (void)state;
  check_env(cases, sizeof(cases) / sizeof(cases[0]), NULL);
}

/* P-SPAWN-3b: editors that never wait for a person, git that never asks
 * for credentials, unbuffered python; the options still win, and so does
 * nothing the host set. */
static void test_spawn_env_model(void **state) {
  static const env_case_t cases[] = {
      {"EDITOR", "sleep 600;", "EDITOR=true"},
      {"VISUAL", "sleep 600;", "VISUAL=true"},
      {"GIT_EDITOR", "vim", "GIT_EDITOR=true"},
      {"GIT_SEQUENCE_EDITOR", "vim", "GIT_SEQUENCE_EDITOR=true"},
      {"GIT_TERMINAL_PROMPT", "1", "GIT_TERMINAL_PROMPT=0"},
      {"PYTHONUNBUFFERED", NULL, "PYTHONUNBUFFERED=1"},
      {"NO_COLOR", NULL, "NO_COLOR=1"},
      {"TERM", "xterm", "TERM=dumb"},
      {"PAGER", "less", "PAGER=cat"},
      {"GIT_PAGER", NULL, "GIT_PAGER=cat"},
  };
  static const env_case_t given[] = {
      {"EDITOR", "sleep 600;", "EDITOR=ed"},
      {"GIT_TERMINAL_PROMPT", "1", "GIT_TERMINAL_PROMPT=1"},
      {"PYTHONUNBUFFERED", NULL, "PYTHONUNBUFFERED="},
      {"VISUAL", "sleep 600;", "VISUAL=true"},
  };
  const char *const extra[] = {"EDITOR=ed", "GIT_TERMINAL_PROMPT=1",
                               "PYTHONUNBUFFERED=", NULL};
  (void)state;
  check_env(cases, sizeof(cases) / sizeof(cases[0]), NULL);
  check_env(given, sizeof(given) / sizeof(given[0]), extra);
}

/* Run `cmd` in `dir` through /bin/sh for a test's setup; asserts exit 0. */
static void setup_sh(const char *dir, const char *cmd) {
  char line[1024];
  snprintf(line, sizeof(line), "cd '%s' && { %s; } >/dev/null 2>&1", dir, cmd);
  assert_int_equal(system(line), 0);
}

/* C-27, P-SPAWN-3b: an editor that never returns in the host's
 * environment (what vim does without a terminal) cannot hang git: `git
 * commit` without -m ends at once with git's own message, and so does a
 * repository whose core.editor never returns; `git rebase -i` proceeds
 * without a person.  Nothing of the tasks is left. */
static void test_c27_git_editor(void **state) {
  static const char *const cmds[] = {
      "git commit",
      "git -c core.editor='sleep 600;' commit",
  };
  fixture_t f;
  uvt_agent_t a;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char dir[] = "/tmp/uvt-git-XXXXXX";
  waitres_t w;
  sbuf_t sb = {0};
  pid_t pid;
  size_t i;
  (void)state;

  if (system("command -v git >/dev/null 2>&1") != 0) {
    print_message("git not found: C-27 skipped\n");
    return;
  }
  assert_non_null(mkdtemp(dir));
  setup_sh(dir, "git init -q . && git config user.name uvt && "
                "git config user.email uvt@example.invalid && "
                "echo one > a && git add a && git commit -qm one && "
                "echo two > a && git add a");
  setenv("EDITOR", "sleep 600;", 1);
  setenv("VISUAL", "sleep 600;", 1);
  setenv("GIT_SEQUENCE_EDITOR", "sleep 600;", 1);
  fixture_init(&f, NULL);
  agent_setup(&f, &a, "A", "S1");
  test_opts(&o);
  o.cwd = dir;
  o.owner = &a;
  for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    o.command = cmds[i];
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    pid = task_pid(&f, id, &a);
    /* Far below the editor's 600 s, and well above what git needs. */
    wait_task(&f, &w, id, 30000, &a);
    assert_int_equal(w.snap.status, UVT_COMPLETED);
    assert_string_not_equal(w.snap.detail, "exit code: 0");
    read_into(&f, id, &a, &sb);
    assert_non_null(strstr(sb.buf, "Aborting commit due to empty commit"));
    assert_true(group_gone(&f, pid));
    wait_end(&w);
    sb_free(&sb);
  }
  /* The sequence editor accepts git's own plan. */
  o.command = "git rebase -q -i HEAD~1 && git log --format=%s -1 HEAD";
  setup_sh(dir, "git commit -qm two");
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 30000, &a);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, &a, &sb);
  assert_string_equal(sb.buf, "two\n");
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  unsetenv("EDITOR");
  unsetenv("VISUAL");
  unsetenv("GIT_SEQUENCE_EDITOR");
  {
    char rm[128];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
  }
}

typedef struct {
  fixture_t *f;
  const char *id;
  sbuf_t sb;
  uvt_status_t status_at_ready;
} ready_t;

static int ready_seen(void *arg) {
  ready_t *r = arg;
  uvt_status_t st = read_into(r->f, r->id, NULL, &r->sb);
  if (r->sb.len > 0 && strstr(r->sb.buf, "ready\n") != NULL) {
    r->status_at_ready = st;
    return 1;
  }
  return 0;
}

/* C-31, P-SPAWN-3b: python's output arrives while it runs, even when the
 * host's environment does not ask for unbuffered output. */
static void test_c31_python_unbuffered(void **state) {
  fixture_t f;
  char id[UVT_ID_MAX];
  uvt_kill_result_t kr;
  waitres_t w;
  ready_t r;
  (void)state;

  if (system("command -v python3 >/dev/null 2>&1") != 0) {
    print_message("python3 not found: C-31 skipped\n");
    return;
  }
  unsetenv("PYTHONUNBUFFERED");
  fixture_init(&f, NULL);
  assert_int_equal(
      start_sh(&f, NULL,
               "python3 -c 'import time; print(\"ready\"); time.sleep(5)'", id),
      0);
  memset(&r, 0, sizeof(r));
  r.f = &f;
  r.id = id;
  r.status_at_ready = UVT_COMPLETED;
  /* Buffered, "ready" would only come with the exit after 5 s. */
  assert_true(run_until(&f, ready_seen, &r, 4500));
  assert_int_equal(r.status_at_ready, UVT_RUNNING);
  assert_int_equal(uvt_kill(f.reg, id, NULL, NULL, &kr), 0);
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  sb_free(&r.sb);
  fixture_close(&f);
}

/* P-SPAWN-3: cwd as given (the host's otherwise). */
static void test_spawn_cwd(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char dir[] = "/tmp/uvt-cwd-XXXXXX";
  char want[PATH_MAX + 2];
  char real[PATH_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  assert_non_null(mkdtemp(dir));
  assert_non_null(realpath(dir, real));
  fixture_init(&f, NULL);
  test_opts(&o);
  o.cwd = dir;
  assert_int_equal(start_helper(&f, NULL, &o, "--helper=pwd", NULL, NULL, id),
                   0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  snprintf(want, sizeof(want), "%s\n", real);
  assert_string_equal(sb.buf, want);
  wait_end(&w);
  sb_free(&sb);
  fixture_close(&f);
  rmdir(dir);
}

/* P-SPAWN-4: a failed spawn is a clean error: no id used, every handle
 * closed (the loop closes), no descriptor and no zombie left. */
static void test_spawn_fail(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *const missing[] = {"/nonexistent/uvt-no-such-program", NULL};
  const char *const nopath[] = {"uvt-no-such-program-in-path", NULL};
  waitres_t w;
  int fds;
  (void)state;

  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "true";
  o.cwd = "/nonexistent/uvt-no-such-dir";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  /* The registry's producer context exists from the first start on. */
  fds = count_fds();
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  o.cwd = NULL;
  o.command = NULL;
  o.argv = missing;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  o.argv = nopath;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  /* A command beyond the kernel's limit for one environment string. */
  {
    char *big = malloc(200 * 1024);
    assert_non_null(big);
    memset(big, ':', 200 * 1024 - 1);
    big[200 * 1024 - 1] = '\0';
    o.argv = NULL;
    o.command = big;
    assert_int_equal(uvt_process_start(f.reg, &o, id), UV_E2BIG);
    free(big);
  }
  run_for(&f, 20);
  assert_int_equal(count_fds(), fds);
  o.argv = NULL;
  o.command = "true";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* P-SPAWN-4: EMFILE. */
static void test_spawn_emfile(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  struct rlimit old, lim;
  int lowest;
  int fds;
  waitres_t w;
  (void)state;

  fixture_init(&f, NULL);
  fds = count_fds();
  lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
  assert_true(lowest >= 0);
  close(lowest);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  lim = old;
  lim.rlim_cur = (rlim_t)lowest;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
  test_opts(&o);
  o.command = "true";
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_EMFILE);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  run_for(&f, 10);
  assert_int_equal(count_fds(), fds);
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-1");
  wait_task(&f, &w, id, 5000, NULL);
  wait_end(&w);
  fixture_close(&f);
}

/* P-SPAWN-5: descriptors the host opened without O_CLOEXEC stay home. */
static void test_spawn_fds(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  waitres_t w;
  sbuf_t sb = {0};
  int leak = open("/dev/null", O_RDONLY);
  int p[2];
  (void)state;

  assert_true(leak >= 0);
  assert_int_equal(pipe(p), 0);
  fixture_init(&f, NULL);
  test_opts(&o);
  assert_int_equal(
      start_helper(&f, NULL, &o, "--helper=check-fds", NULL, NULL, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "fds: none\n");
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  sb_free(&sb);
  /* Through the shell as well. */
  {
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "'%s' --helper=check-fds", self_exe);
    assert_int_equal(start_sh(&f, NULL, cmd, id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, "fds: none\n");
    wait_end(&w);
    sb_free(&sb);
  }
  fixture_close(&f);
  close(leak);
  close(p[0]);
  close(p[1]);
}

/* Write an executable file holding `text` into a fresh directory; the
 * path goes to `path`, the directory to `dir`. */
static void make_script(char dir[64], char path[128], const char *name,
                        const char *text) {
  FILE *fp;
  snprintf(dir, 64, "/tmp/uvt-bin-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, 128, "%s/%s", dir, name);
  fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
  assert_int_equal(chmod(path, 0755), 0);
}

static void remove_script(const char dir[64], const char path[128]) {
  unlink(path);
  rmdir(dir);
}

/* P-SPAWN-4 (amended), P-SPAWN-6: a file that exec refuses (executable,
 * but neither a binary nor a script) is an error only the spawn itself
 * reports: the task is registered, then settles `failed`, "spawn failed:
 * ENOEXEC", with no child and no descriptor left. */
static void test_spawn_fail_exec(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char dir[64];
  char path[128];
  const char *av[2];
  waitres_t w;
  int fds;
  (void)state;
  if (under_valgrind())
    skip(); /* the exec's error cannot reach us there */

  make_script(dir, path, "not-a-program", "\x01\x02 not a program\n");
  fixture_init(&f, NULL);
  test_opts(&o);
  av[0] = path;
  av[1] = NULL;
  o.argv = av;
  /* The first start creates the registry's spawner; count after it. */
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_FAILED, "spawn failed: ENOEXEC");
  wait_end(&w);
  fds = count_fds();
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  assert_string_equal(id, "bash-2");
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_FAILED, "spawn failed: ENOEXEC");
  assert_int_equal(uvt_process_pid(f.reg, id, NULL), UV_ESRCH);
  assert_int_equal(uvt_process_leftovers(f.reg, id, NULL), 0);
  wait_end(&w);
  run_for(&f, 10);
  assert_int_equal(count_fds(), fds);
  fixture_close(&f);
  remove_script(dir, path);
}

/* P-SPAWN-3: argv[0] is found in the child's PATH, the options' entry
 * when they give one. */
static void test_spawn_path(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char dir[64];
  char path[128];
  char pathvar[128];
  const char *env[2];
  const char *av[] = {"uvt-only-here", NULL};
  waitres_t w;
  sbuf_t sb = {0};
  (void)state;

  make_script(dir, path, "uvt-only-here", "#!/bin/sh\necho found me\n");
  fixture_init(&f, NULL);
  test_opts(&o);
  o.argv = av;
  assert_int_equal(uvt_process_start(f.reg, &o, id), UV_ENOENT);
  snprintf(pathvar, sizeof(pathvar), "PATH=/usr/bin:/bin:%s", dir);
  env[0] = pathvar;
  env[1] = NULL;
  o.env = env;
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  read_into(&f, id, NULL, &sb);
  assert_string_equal(sb.buf, "found me\n");
  wait_end(&w);
  sb_free(&sb);
  /* Relative to the child's working directory. */
  o.env = NULL;
  o.cwd = dir;
  av[0] = "./uvt-only-here";
  assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
  wait_task(&f, &w, id, 5000, NULL);
  assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
  wait_end(&w);
  fixture_close(&f);
  remove_script(dir, path);
}

/* P-SPAWN-3 with the environment built once per registry: a change of the
 * host's environment (set, replaced, removed) or of the options' entries
 * reaches the next start. */
static void test_spawn_env_changes(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  const char *av[] = {self_exe, "--helper=env", "UVT_CHANGING", NULL};
  const char *e1[] = {"UVT_CHANGING=from options", NULL};
  char e2buf[64];
  const char *e2[] = {e2buf, NULL};
  static const char *const want[] = {
      "UVT_CHANGING unset\n",        "UVT_CHANGING=one\n",
      "UVT_CHANGING=two\n",          "UVT_CHANGING unset\n",
      "UVT_CHANGING=from options\n", "UVT_CHANGING=from options\n",
      "UVT_CHANGING=other options\n"};
  waitres_t w;
  sbuf_t sb = {0};
  int i;
  (void)state;

  unsetenv("UVT_CHANGING");
  fixture_init(&f, NULL);
  test_opts(&o);
  o.argv = av;
  for (i = 0; i < 7; i++) {
    if (i == 1)
      setenv("UVT_CHANGING", "one", 1);
    if (i == 2)
      setenv("UVT_CHANGING", "two", 1);
    if (i == 3)
      unsetenv("UVT_CHANGING");
    if (i == 4)
      o.env = e1;
    if (i == 5) {
      /* The same entries in another array: the same environment. */
      snprintf(e2buf, sizeof(e2buf), "UVT_CHANGING=from options");
      o.env = e2;
    }
    if (i == 6)
      snprintf(e2buf, sizeof(e2buf), "UVT_CHANGING=other options");
    assert_int_equal(uvt_process_start(f.reg, &o, id), 0);
    wait_task(&f, &w, id, 5000, NULL);
    read_into(&f, id, NULL, &sb);
    assert_string_equal(sb.buf, want[i]);
    wait_end(&w);
    sb_free(&sb);
  }
  fixture_close(&f);
}

/* The spawn without posix_spawn's closefrom (glibc before 2.34, chosen at
 * configure time): the fork path gives the same children (P-SPAWN-1, -3,
 * -4, -5).  The spawn tests run again through it. */
static void test_spawn_fork_fallback(void **state) {
  uvt__process_force_fork = 1;
  test_spawn_session(state);
  test_spawn_stdin_data(state);
  test_spawn_env(state);
  test_spawn_cwd(state);
  test_spawn_fds(state);
  test_spawn_fail(state);
  if (!under_valgrind())
    test_spawn_fail_exec(state);
  test_spawn_path(state);
  uvt__process_force_fork = 0;
}

/* P-SPAWN-4 (and R-START-3 for this producer): failing the n-th allocation
 * of a start, for every n, is a clean UV_ENOMEM with no id used, no child
 * and no handle left, or a success. */
static void test_start_failmalloc(void **state) {
  fixture_t f;
  uvt_process_options_t o;
  char id[UVT_ID_MAX];
  char want[UVT_ID_MAX];
  const char *const env[] = {"UVT_X=1", NULL};
  waitres_t w;
  int n;
  int err;
  int next = 1;
  int fds;
  (void)state;

  fds = count_fds();
  assert_int_equal(
      uvt_replace_allocator(fm_malloc, fm_realloc, fm_calloc, free), 0);
  fixture_init(&f, NULL);
  test_opts(&o);
  o.command = "echo hi";
  o.env = env;
  o.stdin_data = "x";
  o.stdin_len = 1;
  for (n = 1;; n++) {
    fm_arm(n);
    err = uvt_process_start(f.reg, &o, id);
    fm_armed = 0;
    if (err != 0) {
      assert_int_equal(err, UV_ENOMEM);
      assert_true(fm_failed);
      run_for(&f, 5);
      continue;
    }
    snprintf(want, sizeof(want), "bash-%d", next++);
    assert_string_equal(id, want);
    wait_task(&f, &w, id, 5000, NULL);
    assert_outcome(&w.snap, UVT_COMPLETED, "exit code: 0");
    wait_end(&w);
    if (!fm_failed)
      break;
  }
  assert_true(n > 3);
  fixture_close(&f);
  assert_int_equal(uvt_replace_allocator(malloc, realloc, calloc, free), 0);
  assert_int_equal(count_fds(), fds);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_defaults),
      T(test_kind_label),
      T(test_invalid_options),
      T(test_pid),
      T(test_spawn_session),
      T(test_spawn_stdin_data),
      T(test_spawn_argv_hidden),
      T(test_c04_pkill),
      T(test_spawn_env),
      T(test_spawn_env_scrub),
      T(test_spawn_env_scrub_wider),
      T(test_spawn_env_model),
      T(test_c27_git_editor),
      T(test_c31_python_unbuffered),
      T(test_spawn_cwd),
      T(test_spawn_fail),
      T(test_spawn_emfile),
      T(test_spawn_fds),
      T(test_spawn_fail_exec),
      T(test_spawn_path),
      T(test_spawn_env_changes),
      T(test_spawn_fork_fallback),
      T(test_start_failmalloc),
  };
  return PROCESS_TESTS("process", tests);
}
