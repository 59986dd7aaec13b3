#!/usr/bin/env python3
"""The API reference, docs/api.md, generated from the public headers
(include/uvtasks.h and include/uvtasks/*.h): every exported function (each
UVT_EXTERN declaration) with its declaration, its doc comment and the
version that added it, and the callback types, header by header.

The header is the reference; this page is a view of it, so it cannot show
a signature the header lacks.  A function's doc comment is the comment
that ends on the line just above its declaration; its last line says the
version that added it, as libuv's versionadded does:

    /* Kill (R-KILL-1..4, P-KILL-6).  ...
     * Thread: loop thread; the cancel hook runs inside this call.
     * Since: 0.1.0 */

  scripts/apiref.py                 print the page
  scripts/apiref.py --write         write docs/api.md
  scripts/apiref.py --check [BUILDDIR]
        exit 1 if docs/api.md is not what --write would write, if an
        exported function has no doc comment or no "Since: X.Y.Z" last
        line, if a Since disagrees with the ABI dumps of the releases
        (abi/libuvtasks-X.Y.Z.abi: a function in a release's dump came
        in that release or earlier, one missing from it came later) or is
        newer than the project version, or if a page of docs/ or the
        README calls a function with another number of arguments than
        its header declares.  With BUILDDIR (a meson build), also if the
        built libuvtasks.so exports a function the headers do not
        declare or the other way round (uvt_slurm_* are excused in a
        build without the Slurm engine).
  scripts/apiref.py --since-from-git
        print, for each function, the version that added it according to
        git: the project version in meson.build at the first commit whose
        include/ declares it, or, when the ABI dump of a release of that
        version or later (abi/) lacks the function, the release after the
        last dump that lacks it (a function removed and declared again,
        or added after the commit that set a version, came later).
        The first Since markers were written from this.
"""
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
OUT = 'docs/api.md'
FIRST = ['include/uvtasks.h', 'include/uvtasks/producer.h', 'include/uvtasks/process.h',
         'include/uvtasks/thread.h', 'include/uvtasks/tools.h', 'include/uvtasks/slurm.h']
TITLES = {
    'include/uvtasks.h': 'The registry',
    'include/uvtasks/producer.h': 'For producer authors',
    'include/uvtasks/process.h': 'The process producer',
    'include/uvtasks/thread.h': 'The thread producer',
    'include/uvtasks/tools.h': 'The tool surface',
    'include/uvtasks/slurm.h': 'The Slurm engine',
}
PAGES = {  # the docs page of each header, where there is one
    'include/uvtasks/process.h': 'process.md',
    'include/uvtasks/thread.h': 'thread.md',
    'include/uvtasks/tools.h': 'mcp.md',
    'include/uvtasks/slurm.h': 'slurm.md',
}
PART = re.compile(r'(Returns|Callback|Ownership|Thread)\b')
SINCE = re.compile(r'^Since: (\d+)\.(\d+)\.(\d+)$')
VERSION = re.compile(r'(\d+)\.(\d+)\.(\d+)')


def headers():
    found = ['include/uvtasks.h'] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'include/uvtasks/*.h')))
    return [h for h in FIRST if h in found] + [h for h in found if h not in FIRST]


def comment_text(lines):
    """The text of a /* ... */ comment, without its markers."""
    out = []
    for i, line in enumerate(lines):
        s = line.strip()
        if i == 0:
            s = s[2:]
        if s.endswith('*/'):
            s = s[:-2]
        s = s.rstrip()
        if i > 0:
            s = re.sub(r'^\* ?', '', s)
        out.append(s.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


# Function-like macros of an exported function's own name (name -> the
# #define, on one line), filled by parse().
MACROS = {}


def parse(path, text=None):
    """The items of a header, in order: ('section', title),
    ('func', name, decl, comment, line) and ('cb', name, decl, comment,
    line).  `comment` is None when no comment ends just above."""
    if text is None:
        text = open(os.path.join(ROOT, path), encoding='utf-8').read()
    lines = text.split('\n')
    items = []
    last = None  # (end line index, text lines)
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith('/*'):
            j = i
            while '*/' not in lines[j]:
                j += 1
            body = comment_text(lines[i:j + 1])
            if body and re.fullmatch(r'-{10,}', body[0].strip()) and j + 1 < len(lines):
                title = comment_text([lines[j + 1]])
                if title:
                    items.append(('section', title[0].strip()))
                    i = j + 2
                    last = None
                    continue
            last = (j, body)
            i = j + 1
            continue
        m = re.match(r'#define (uvt_\w+)\(', s)
        if m and items and items[-1][0] == 'func' and items[-1][1] == m.group(1):
            # a function hidden by a macro of its name (the _init
            # macros that pass the host's sizeof): shown with it.
            j = i
            while lines[j].rstrip().endswith('\\'):
                j += 1
            text = ' '.join(x.strip().rstrip('\\').strip() for x in lines[i:j + 1])
            MACROS[m.group(1)] = re.sub(r'\s+', ' ', text)
            last = None
            i = j + 1
            continue
        if s.startswith('UVT_EXTERN ') or (s.startswith('typedef') and '(*' in s):
            j = i
            while ';' not in lines[j]:
                j += 1
            decl = ' '.join(x.strip() for x in lines[i:j + 1])
            decl = re.sub(r'\s+', ' ', decl).replace('( ', '(')
            comment = last[1] if last and last[0] == i - 1 else None
            if s.startswith('UVT_EXTERN'):
                decl = decl[len('UVT_EXTERN '):]
                name = re.search(r'(\w+)\s*\(', decl).group(1)
                items.append(('func', name, decl, comment, i + 1))
            else:
                name = re.search(r'\(\*\s*(\w+)\)', decl).group(1)
                items.append(('cb', name, decl, comment, i + 1))
            last = None
            i = j + 1
            continue
        if s:
            last = None
        i += 1
    return items


def since_of(comment):
    if not comment:
        return None
    m = SINCE.match(comment[-1].strip())
    return tuple(int(x) for x in m.groups()) if m else None


def vstr(v):
    return '%d.%d.%d' % v


def escape(text):
    """Markdown specials outside code spans: * < [ ] (underscores
    inside words never make emphasis)."""
    parts = text.split('`')
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r'([*<\[\]])', r'\\\1', parts[k])
    return '`'.join(parts)


def paragraphs(comment):
    """The comment as Markdown: paragraphs and "- " list items."""
    blocks, cur = [], []
    for line in comment:
        s = line.strip()
        if not s:
            if cur:
                blocks.append(cur)
            cur = []
            continue
        if cur and PART.match(s):
            # Returns, Callback, Ownership, Thread: a paragraph each, as
            # the house style orders them.
            blocks.append(cur)
            cur = []
        if s.startswith('- ') or not cur:
            cur.append(s)
        else:
            cur[-1] += ' ' + s
    if cur:
        blocks.append(cur)
    return '\n\n'.join('\n'.join(escape(x) for x in b) for b in blocks)


def params(decl, name):
    """The parameters of a declaration, split at the top level."""
    start = decl.index(name + '(') + len(name) + 1
    depth, cur, out = 0, '', []
    for ch in decl[start:]:
        if ch == '(':
            depth += 1
        elif ch == ')':
            if depth == 0:
                break
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return [] if out == ['void'] else out


def render():
    out = []
    out.append('# API reference\n')
    out.append('Every function the library exports, header by header: its declaration,')
    out.append('what its header comment says (Returns, Callback, Ownership, Thread and')
    out.append('the clause ids), and the version that added it. Generated from the')
    out.append('headers by `scripts/apiref.py --write`; the `docs` suite fails when this')
    out.append('page and the headers differ (`docs-apiref`), so edit the header, not this')
    out.append('page. The conventions every function follows are in')
    out.append('[Conventions](conventions.md); the contract the clause ids name is')
    out.append('[the contract](contract.md).\n')
    parsed = [(h, parse(h)) for h in headers()]
    for h, items in parsed:
        funcs = [x for x in items if x[0] == 'func']
        if not funcs:
            continue
        title = TITLES.get(h, h)
        out.append('- [%s](#%s) (`%s`): %s' % (
            title, slug(title), h[len('include/'):], ', '.join(
                '[`%s`](#%s)' % (f[1], f[1].lower()) for f in funcs)))
    out.append('')
    for h, items in parsed:
        if not any(x[0] == 'func' for x in items):
            continue
        title = TITLES.get(h, h)
        out.append('## %s\n' % title)
        page = PAGES.get(h)
        link = '[`%s`](../%s)' % (h, h)
        if page:
            link += '; the guide is [%s](%s)' % (page, page)
        out.append('The header: %s.\n' % link)
        cbs = [x for x in items if x[0] == 'cb']
        if cbs:
            out.append('Callback types:\n')
            out.append('```c')
            for c in cbs:
                out.append(c[2])
            out.append('```\n')
        section = None
        for it in items:
            if it[0] == 'section':
                section = it[1]
                continue
            if it[0] != 'func':
                continue
            _, name, decl, comment, line = it
            out.append('### `%s`\n' % name)
            out.append('```c')
            out.append(decl)
            if name in MACROS:
                out.append(MACROS[name])
            out.append('```\n')
            v = since_of(comment)
            body = comment[:-1] if v else (comment or [])
            if body:
                out.append(paragraphs(body) + '\n')
            out.append('Since %s. [`%s`](../%s)%s.\n' % (
                vstr(v) if v else '(no marker)', h[len('include/'):], h,
                ', ' + section if section else ''))
    return '\n'.join(out).rstrip('\n') + '\n'


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def project_version():
    text = open(os.path.join(ROOT, 'meson.build'), encoding='utf-8').read()
    m = re.search(r"^\s*version:\s*'(\d+)\.(\d+)\.(\d+)'", text, re.M)
    return tuple(int(x) for x in m.groups())


def dumps():
    """{version: set of function symbols} of abi/libuvtasks-X.Y.Z.abi."""
    out = {}
    for p in glob.glob(os.path.join(ROOT, 'abi', 'libuvtasks-*.abi')):
        m = re.search(r'libuvtasks-(\d+)\.(\d+)\.(\d+)\.abi$', p)
        if not m:
            continue
        xml = open(p, encoding='utf-8').read()
        fs = re.search(r'<elf-function-symbols>(.*?)</elf-function-symbols>', xml, re.S)
        out[tuple(int(x) for x in m.groups())] = set(
            re.findall(r"<elf-symbol name='(\w+)'", fs.group(1) if fs else ''))
    return out


def built_exports(builddir):
    info = os.path.join(builddir, 'meson-info', 'intro-targets.json')
    lib = None
    for t in json.load(open(info)):
        if t['name'] == 'uvtasks' and t['type'] == 'shared library':
            lib = t['filename'][0]
    r = subprocess.run(['nm', '-D', '--defined-only', lib], capture_output=True, text=True,
                       check=True)
    return {p[2] for p in (l.split() for l in r.stdout.splitlines())
            if len(p) == 3 and p[1] == 'T'}


def doc_pages():
    pages = ['README.md'] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'docs', '*.md')))
    return [p for p in pages if p not in (OUT, 'docs/clauses.md')]


CALL = re.compile(r'\b(uvt_\w+)\(((?:[^()]|\([^()]*\))*)\)')


def check(builddir):
    problems = []
    want = render()
    path = os.path.join(ROOT, OUT)
    have = open(path, encoding='utf-8').read() if os.path.exists(path) else ''
    if have != want:
        problems.append('%s is stale: run scripts/apiref.py --write and commit it' % OUT)
    funcs = {}
    for h in headers():
        for it in parse(h):
            if it[0] == 'func':
                funcs[it[1]] = (h,) + it[1:]
    pv = project_version()
    ds = dumps()
    for name, (h, _, decl, comment, line) in sorted(funcs.items()):
        where = '%s:%d: %s' % (h, line, name)
        if not comment:
            problems.append('%s has no doc comment just above it' % where)
            continue
        v = since_of(comment)
        if not v:
            problems.append('%s: its comment\'s last line is not "Since: X.Y.Z" '
                            '(a function new in this round: Since: %s)' % (where, vstr(pv)))
            continue
        if v > pv:
            problems.append('%s: Since %s is newer than the project version %s' % (
                where, vstr(v), vstr(pv)))
        for dv, syms in sorted(ds.items()):
            if name in syms and v > dv:
                problems.append('%s: Since %s, but the %s release has it (abi/libuvtasks-%s.abi)'
                                % (where, vstr(v), vstr(dv), vstr(dv)))
            if name not in syms and v <= dv and not (
                    name.startswith('uvt_slurm_') and not any(s.startswith('uvt_slurm_') for s in syms)):
                problems.append('%s: Since %s, but the %s release lacks it (abi/libuvtasks-%s.abi)'
                                % (where, vstr(v), vstr(dv), vstr(dv)))
    # The pages' calls against the declarations.
    for page in doc_pages():
        fence = False
        for n, line in enumerate(open(os.path.join(ROOT, page), encoding='utf-8'), 1):
            for m in CALL.finditer(line):
                name, args = m.group(1), m.group(2)
                if name not in funcs or not args.strip():
                    continue
                ps = params(funcs[name][2], name)
                got = len(params(name + '(' + args + ')', name))
                variadic = ps and ps[-1] == '...'
                if (got != len(ps)) if not variadic else (got < len(ps) - 1):
                    problems.append('%s:%d: %s(%s) has %d arguments; %s declares %d: %s' % (
                        page, n, name, args, got, funcs[name][0], len(ps), funcs[name][2]))
    if builddir:
        exported = {s for s in built_exports(builddir) if s.startswith('uvt')}
        declared = set(funcs)
        no_slurm = not any(s.startswith('uvt_slurm_') for s in exported)
        for s in sorted(exported - declared):
            problems.append('libuvtasks.so exports %s, which no public header declares with UVT_EXTERN' % s)
        for s in sorted(declared - exported):
            if no_slurm and funcs[s][0] == 'include/uvtasks/slurm.h':
                continue
            problems.append('%s declares %s, which the built libuvtasks.so does not export' % (
                funcs[s][0], s))
    for p in problems:
        print(p)
    if problems:
        print('apiref: %d problems' % len(problems))
        return 1
    print('apiref: %s matches the headers; %d functions, each with its comment and version'
          % (OUT, len(funcs)))
    return 0


def since_from_git():
    """Each function's version from git history (see the module comment)."""
    def git(*args):
        return subprocess.run(['git', '-C', ROOT] + list(args), capture_output=True, text=True,
                              check=True).stdout
    commits = git('log', '--reverse', '--format=%H', 'HEAD', '--', 'include/').split()
    first = {}
    for c in commits:
        files = [f for f in git('ls-tree', '-r', '--name-only', c, '--', 'include/').split()
                 if f.endswith('.h')]
        for f in files:
            text = git('show', '%s:%s' % (c, f))
            text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
            for m in re.finditer(r'^[A-Za-z_][\w \t\*]*?\b(uvt_\w+)\s*\(', text, re.M):
                if m.group(0).lstrip().startswith(('#', 'typedef', 'return')):
                    continue
                first.setdefault(m.group(1), c)
    versions = {}
    ds = dumps()
    pv = project_version()
    out = {}
    for name, c in first.items():
        if c not in versions:
            m = re.search(r"version:\s*'(\d+)\.(\d+)\.(\d+)'", git('show', c + ':meson.build'))
            versions[c] = tuple(int(x) for x in m.groups())
        v = versions[c]
        # A release whose dump lacks the function (made at or after the
        # version git gives) did not have it: it came with a later one.
        for d in sorted(x for x in ds if x >= v):
            if name not in ds[d]:
                later = sorted(x for x in ds if x > d)
                v = later[0] if later else pv
        out[name] = (v, c[:7])
    return out


def main(argv):
    if len(argv) > 1 and argv[1] == '--write':
        with open(os.path.join(ROOT, OUT), 'w', encoding='utf-8') as f:
            f.write(render())
        return 0
    if len(argv) > 1 and argv[1] == '--check':
        return check(argv[2] if len(argv) > 2 else None)
    if len(argv) > 1 and argv[1] == '--since-from-git':
        funcs = {it[1] for h in headers() for it in parse(h) if it[0] == 'func'}
        for name, (v, c) in sorted(since_from_git().items()):
            if name in funcs:
                print('%s %s %s' % (name, vstr(v), c))
        return 0
    if len(argv) > 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sys.stdout.write(render())
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
