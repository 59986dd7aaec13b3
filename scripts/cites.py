#!/usr/bin/env python3
"""Clauses are cited by their ids and the contract by its own name,
docs/contract.md: no file of the repository cites the design document the
contract was written from, by the name it had outside the repository.

  scripts/cites.py     prints each line that does; exits 1 if there is one
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
WORD = re.compile(r'\b' + 'SP' + 'EC' + r'\b')  # split so this file passes
SKIP = {'.git', 'node_modules'}

bad = 0
for d, dirs, files in os.walk(ROOT):
    # Build trees (build/, build-asan/, bindings/node/build/) are not ours.
    dirs[:] = sorted(x for x in dirs if x not in SKIP and not x.startswith('build'))
    for f in sorted(files):
        path = os.path.join(d, f)
        try:
            with open(path, encoding='utf-8') as fh:
                for n, line in enumerate(fh, 1):
                    if WORD.search(line):
                        print('%s:%d: %s' % (os.path.relpath(path, ROOT), n, line.strip()))
                        bad += 1
        except (UnicodeDecodeError, OSError):
            continue  # binary files
if bad:
    print('cites: %d lines cite the old design document: cite docs/contract.md and clause ids' % bad)
sys.exit(1 if bad else 0)
