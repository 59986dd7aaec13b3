#!/usr/bin/env python3
"""Check the relative links of the Markdown pages: README.md, CHANGELOG.md,
docs/*.md and bindings/node/README.md.  Every link to a file of the
repository must name a file or folder that exists, and a link with an
anchor (page.md#some-heading) must name a heading of that page (GitHub's
anchors: lower case, punctuation dropped, spaces as dashes).  Links in code
blocks and to other sites are not checked.

  scripts/links.py        prints each broken link, exits 1 if there is one
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..'))
LINK = re.compile(r'\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)')


def prose(path):
    """The lines of a page outside its fenced code blocks, numbered."""
    fence = False
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith('```'):
                fence = not fence
                continue
            if not fence:
                yield n, line


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(path):
    seen = {}
    out = set()
    for _, line in prose(path):
        m = re.match(r'(#+) (.*)', line)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else '%s-%d' % (base, k))
    return out


def main():
    pages = ['README.md', 'CHANGELOG.md', 'bindings/node/README.md']
    pages += sorted(os.path.relpath(p, ROOT)
                    for p in glob.glob(os.path.join(ROOT, 'docs', '*.md')))
    bad = 0
    for page in pages:
        path = os.path.join(ROOT, page)
        if not os.path.exists(path):
            continue
        for n, line in prose(path):
            for target in LINK.findall(line):
                if re.match(r'[a-z]+:', target):
                    continue  # https:, mailto:
                file, _, anchor = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
                if not os.path.exists(dest):
                    print('%s:%d: %s: no such file' % (page, n, target))
                    bad += 1
                elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                    print('%s:%d: %s: no such heading' % (page, n, target))
                    bad += 1
    if bad:
        print('links: %d broken' % bad)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
