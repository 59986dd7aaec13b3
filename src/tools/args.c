/* The arguments every tool shares (M-TOOLS-8, M-TOOLS-16): task_id,
 * max_bytes, the view (head_lines, tail_lines, match, and what a match
 * pattern may cost: S-8) and timeout_ms,
 * each checked into the call; a bad one is answered with a tool error
 * here, so the tool that asked just returns. */
#include "uvtasks/tools.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools-int.h"

/* The task_id every tool but the starting ones and task_list needs:
 * 0, or -1 after answering that `tool` needs one. */
int uvt__tools_need_id(uvt_tools_call_t *req, const uvt_tools_args_t *args,
                       const char *tool) {
  uvt__text_t t;

  if (args->task_id != NULL && args->task_id[0] != '\0')
    return 0;
  uvt__text_init(&t);
  uvt__text_printf(&t, "%s needs task_id (a string such as bash-1).", tool);
  uvt__tools_result(req, &t, 1);
  return -1;
}

size_t uvt__tools_max_lines(const uvt_tools_t *tools, size_t max_bytes) {
  if (max_bytes <= tools->max_bytes_ || tools->max_bytes_ == 0)
    return tools->max_lines_;
  if (tools->max_lines_ > SIZE_MAX / (max_bytes / tools->max_bytes_ + 1))
    return SIZE_MAX;
  return tools->max_lines_ * (max_bytes / tools->max_bytes_);
}

/* The call's max_bytes (M-TOOLS-8) into req->max_bytes_: the options' when
 * not given, at least UVT_TOOLS_MAX_BYTES_MIN.  Zero or negative is a tool
 * error, already delivered when this returns -1. */
int uvt__tools_max_bytes(uvt_tools_call_t *req, const uvt_tools_args_t *args) {
  uvt__text_t t;

  if (args->max_bytes == 0 || args->max_bytes < -1) {
    uvt__text_init(&t);
    uvt__text_printf(&t,
                     "max_bytes must be a positive number of bytes "
                     "(default %zu; at least %d is used).",
                     req->tools->max_bytes_, UVT_TOOLS_MAX_BYTES_MIN);
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  if (args->max_bytes < 0)
    req->max_bytes_ = req->tools->max_bytes_;
  else if ((uint64_t)args->max_bytes > SIZE_MAX)
    req->max_bytes_ = SIZE_MAX;
  else if (args->max_bytes < UVT_TOOLS_MAX_BYTES_MIN)
    req->max_bytes_ = UVT_TOOLS_MAX_BYTES_MIN;
  else
    req->max_bytes_ = (size_t)args->max_bytes;
  return 0;
}

/* M-TOOLS-16, S-8: what a `match` pattern may cost.  regexec runs on the
 * loop thread, so a pattern the model chose must not stop the loop: a
 * back-reference (\1..\9) makes glibc's matcher backtrack, exponential in
 * the line ("(a*)*(a*)*\2\1b" on 300 characters never ended), and nested
 * bounds multiply the compiled automaton ("((a{255}){255}){255}" took
 * 11 s to compile).  Without back-references the matcher keeps sets of
 * states, linear in the line; so the rules are: no back-reference, at
 * most MATCH_MAX_BYTES, and at most MATCH_MAX_REPEAT for the product of
 * the bounds nested around any one atom.  NULL when the pattern may run,
 * else why not. */
#define MATCH_MAX_BYTES 1024
#define MATCH_MAX_REPEAT 4096
static const char *match_refused(const char *p) {
  uint64_t stack[64]; /* per open group: the largest product inside it */
  uint64_t atom = 1;  /* the product of the atom a bound would apply to */
  size_t top = 0;
  size_t n = strlen(p);

  if (n > MATCH_MAX_BYTES)
    return "it is longer than 1024 bytes";
  stack[0] = 1;
  while (*p != '\0') {
    if (*p == '\\') {
      if (p[1] >= '1' && p[1] <= '9')
        return "back-references (\\1 to \\9) are not taken: they can "
               "make a match take longer than any output";
      p += p[1] != '\0' ? 2 : 1;
      atom = 1;
    } else if (*p == '[') {
      /* A bracket expression: ']' first (after '^') is a member. */
      p++;
      if (*p == '^')
        p++;
      if (*p == ']')
        p++;
      while (*p != '\0' && *p != ']')
        p++;
      if (*p == ']')
        p++;
      atom = 1;
    } else if (*p == '(') {
      if (++top >= sizeof(stack) / sizeof(stack[0]))
        return "its groups nest deeper than 63";
      stack[top] = 1;
      p++;
    } else if (*p == ')') {
      atom = top > 0 ? stack[top--] : 1;
      p++;
    } else if (*p == '{') {
      char *end;
      unsigned long lo = strtoul(p + 1, &end, 10);
      unsigned long hi = lo;
      if (*end == ',')
        hi = end[1] == '}' ? lo + 1 : strtoul(end + 1, &end, 10);
      if (hi < lo)
        hi = lo;
      if (hi > MATCH_MAX_REPEAT || atom * hi > MATCH_MAX_REPEAT)
        return "its bounds, nested, repeat an atom more than 4096 times";
      atom *= hi;
      p = strchr(p, '}') != NULL ? strchr(p, '}') + 1 : p + strlen(p);
    } else {
      atom = 1;
      p++;
    }
    if (atom > stack[top])
      stack[top] = atom;
  }
  return NULL;
}

/* M-TOOLS-16: the call's view (head_lines, tail_lines, match) into req:
 * 0, or -1 after answering with a tool error. */
int uvt__tools_view(uvt_tools_call_t *req, const uvt_tools_args_t *args) {
  uvt__text_t t;
  regex_t *re;
  char why[200];
  const char *why_not;
  int err;

  uvt__text_init(&t);
  if (args->head_lines == 0 || args->head_lines < -1 || args->tail_lines == 0 ||
      args->tail_lines < -1) {
    uvt__text_printf(&t, "%s must be a positive number of lines.",
                     args->head_lines == 0 || args->head_lines < -1
                         ? "head_lines"
                         : "tail_lines");
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  req->head_lines_ = args->head_lines;
  req->tail_lines_ = args->tail_lines;
  if (args->match == NULL)
    return 0;
  if ((why_not = match_refused(args->match)) != NULL) {
    uvt__text_str(&t, "match is refused: ");
    uvt__text_str(&t, why_not);
    uvt__text_str(&t, ". Use a simpler pattern (or grep in the command).");
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  re = uvt__tools_malloc(sizeof(*re));
  if (re == NULL) {
    uvt__text_str(&t, "Not enough memory for match.");
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  err = regcomp(re, args->match, REG_EXTENDED | REG_NOSUB);
  if (err != 0) {
    regerror(err, re, why, sizeof(why));
    uvt__tools_free(re);
    uvt__text_str(&t, "match is not a valid POSIX extended regular "
                      "expression (");
    uvt__text_oneline(&t, why, sizeof(why));
    uvt__text_str(&t, "): ");
    uvt__text_oneline(&t, args->match, 200);
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  req->match_ = re;
  return 0;
}

/* The call's timeout_ms: `default_ms` when not given, capped at `max_ms`.
 * A zero or negative one is a tool error, already delivered when this
 * returns -1. */
int uvt__tools_timeout(uvt_tools_call_t *req, const uvt_tools_args_t *args,
                       uint64_t default_ms, uint64_t max_ms, uint64_t *out) {
  uvt__text_t t;
  if (args->timeout_ms == 0 || args->timeout_ms < -1) {
    uvt__text_init(&t);
    uvt__text_printf(&t,
                     "timeout_ms must be a positive number of milliseconds "
                     "(at most %llu).",
                     (unsigned long long)max_ms);
    uvt__tools_result(req, &t, 1);
    return -1;
  }
  if (args->timeout_ms < 0)
    *out = default_ms;
  else if ((uint64_t)args->timeout_ms > max_ms)
    *out = max_ms;
  else
    *out = (uint64_t)args->timeout_ms;
  return 0;
}

/* M-TOOLS-6 for waits (C-32's sibling): a wait answers at the tools' yield
 * at the latest, as run_command does, so that a client's request timeout
 * (60 s by default in the official SDKs) never ends a task_output or
 * task_wait that asked for more; the answer shows the task still running
 * and says to wait again.  A yield of 0 (the library's default) leaves
 * the wait as asked. */
uint64_t uvt__tools_wait_yield(const uvt_tools_t *tools, uint64_t timeout_ms) {
  if (tools->yield_ms_ > 0 && timeout_ms > tools->yield_ms_)
    return tools->yield_ms_;
  return timeout_ms;
}
