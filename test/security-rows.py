#!/usr/bin/env python3
"""S-10: the threat model's rows name tests that exist.

docs/security.md has one section per surface, each with a table whose
last column names the tests that prove its walls: a test function
(`test_s5_workspace`: a static C test function under test/), a meson test (`mcp-sandbox`,
`fuzz-terminal`: named in a meson.build under test/) or a test file, by
its path or by its name in a test folder (`bindings/node/test/sandbox.test.js`,
`origin.lua`).  This fails on a row that names
nothing, or a test that is not there; a section with no table yet is
reported, not failed (its surface's engineer adds it).
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))


def read(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


def test_files():
    names = set()
    for top in ('test', 'bindings'):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x not in ('node_modules', 'deps', 'build')]
            if top == 'bindings' and os.path.basename(d) != 'test' and \
                    '/test/' not in d + '/':
                continue
            names.update(files)
    return names


def known_tests():
    funcs = set()
    meson = set()
    for d, dirs, files in os.walk(os.path.join(ROOT, 'test')):
        dirs[:] = [x for x in dirs if x != 'node_modules']
        for f in files:
            path = os.path.join(d, f)
            if f.endswith('.c'):
                text = open(path, encoding='utf-8', errors='replace').read()
                funcs.update(re.findall(r'^static void (\w+)\(void \*\*', text, re.M))
            elif f == 'meson.build':
                text = open(path, encoding='utf-8').read()
                meson.update(re.findall(r"test\('([\w-]+)'", text))
                # A loop's names: `foreach t : [...]` then test('pre' + t, ...)
                # or unit_tests += [[t, ...]].
                for names, body in re.findall(
                        r"foreach t : \[([^\]]*)\](.*?)endforeach", text, re.S):
                    pre = re.search(r"test\('([\w-]*)' \+ t", body)
                    for n in re.findall(r"'([\w-]+)'", names):
                        meson.add((pre.group(1) if pre else '') + n)
                # the unit tests' table: [name, suite, timeout]
                meson.update(re.findall(r"\['([\w-]+)', '[\w-]+', \d+\]", text))
    return funcs, meson


def main():
    funcs, meson = known_tests()
    files = test_files()
    text = read('docs/security.md')
    bad = 0
    rows = 0
    for section in re.split(r'^## ', text, flags=re.M)[1:]:
        title = section.split('\n', 1)[0]
        tables = []
        for l in section.split('\n'):
            if l.startswith('|'):
                if not tables or tables[-1][1]:
                    tables.append([[], False])
                tables[-1][0].append(l)
            elif tables:
                tables[-1][1] = True  # the table ended
        if not tables:
            print('security-rows: "%s": no rows yet' % title)
            continue
        for lines, _ in tables:
            header = [c.strip() for c in lines[0].strip('|').split('|')]
            if not header[-1].endswith('test'):
                continue  # another table (the attacks tried)
            for line in lines[2:]:
                rows += 1
                cell = line.strip().rstrip('|').split('|')[-1]
                # What is in parentheses says which part of a test, and what
                # follows "by hand" a check made by hand: not names.
                cell = cell.split('by hand')[0]
                names = re.findall(r'`([^`]+)`', re.sub(r'\([^)]*\)', '', cell))
                if not names:
                    print('security-rows: "%s": a row names no test: %s' % (title, line[:80]))
                    bad += 1
                for n in names:
                    ok = (n in funcs or n in meson or n in files or
                          (('/' in n) and os.path.exists(os.path.join(ROOT, n))))
                    if not ok:
                        print('security-rows: "%s": no test %s' % (title, n))
                        bad += 1
    print('security-rows: %d rows, %d unknown tests' % (rows, bad))
    return 1 if bad else 0


sys.exit(main())
