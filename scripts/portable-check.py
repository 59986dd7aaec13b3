#!/usr/bin/env python3
"""The portable build holds no Linux (docs/porting.md): given a build
configured with -Dportable=true, every source compiled into libuvtasks is
outside the Linux-only folders (src/process, src/slurm, src/mcp), defines
no _GNU_SOURCE or _DEFAULT_SOURCE, and includes only headers of C11,
POSIX.1-2008, libuv (uv.h) and libvterm (vterm.h), besides the library's
own.  The build itself compiles them under -D_POSIX_C_SOURCE=200809L, so
a GNU or Linux function fails to compile; this catches the Linux header
that a build on Linux would still find.

  scripts/portable-check.py BUILDDIR    exits 1 on a violation
"""
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
LINUX_ONLY = ('src/process/', 'src/slurm/', 'src/mcp/')
C11 = {'assert.h', 'complex.h', 'ctype.h', 'errno.h', 'fenv.h', 'float.h', 'inttypes.h',
       'iso646.h', 'limits.h', 'locale.h', 'math.h', 'setjmp.h', 'signal.h', 'stdalign.h',
       'stdarg.h', 'stdatomic.h', 'stdbool.h', 'stddef.h', 'stdint.h', 'stdio.h', 'stdlib.h',
       'stdnoreturn.h', 'string.h', 'tgmath.h', 'threads.h', 'time.h', 'uchar.h', 'wchar.h',
       'wctype.h'}
POSIX = {'aio.h', 'arpa/inet.h', 'cpio.h', 'dirent.h', 'dlfcn.h', 'fcntl.h', 'fmtmsg.h',
         'fnmatch.h', 'ftw.h', 'glob.h', 'grp.h', 'iconv.h', 'langinfo.h', 'libgen.h',
         'monetary.h', 'mqueue.h', 'ndbm.h', 'net/if.h', 'netdb.h', 'netinet/in.h',
         'netinet/tcp.h', 'nl_types.h', 'poll.h', 'pthread.h', 'pwd.h', 'regex.h',
         'sched.h', 'search.h', 'semaphore.h', 'spawn.h', 'strings.h', 'stropts.h',
         'sys/ipc.h', 'sys/mman.h', 'sys/msg.h', 'sys/resource.h', 'sys/select.h',
         'sys/sem.h', 'sys/shm.h', 'sys/socket.h', 'sys/stat.h', 'sys/statvfs.h',
         'sys/time.h', 'sys/times.h', 'sys/types.h', 'sys/uio.h', 'sys/un.h',
         'sys/utsname.h', 'sys/wait.h', 'syslog.h', 'tar.h', 'termios.h', 'ulimit.h',
         'unistd.h', 'utime.h', 'utmpx.h', 'wordexp.h'}
LIBS = {'uv.h', 'vterm.h'}
INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')
FEATURE = re.compile(r'^\s*#\s*define\s+(_GNU_SOURCE|_DEFAULT_SOURCE|_BSD_SOURCE)\b')


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    builddir = argv[1]
    cc = json.load(open(os.path.join(builddir, 'compile_commands.json')))
    srcs = set()
    for e in cc:
        out = e['output']
        if not os.path.basename(os.path.dirname(os.path.join(e['directory'], out))).startswith('libuvtasks.'):
            continue
        src = os.path.relpath(os.path.normpath(os.path.join(e['directory'], e['file'])), ROOT)
        srcs.add(src)
        if '-D_POSIX_C_SOURCE=200809L' not in e['command'] or '_XOPEN_SOURCE' in e['command']:
            print('%s: not compiled with -D_POSIX_C_SOURCE=200809L alone: is %s a -Dportable=true build?'
                  % (src, builddir))
            return 1
    if not srcs:
        print('portable-check: no library sources in %s/compile_commands.json' % builddir)
        return 1
    # The library's own headers that those sources reach.
    files, seen = sorted(srcs), set()
    bad = 0
    while files:
        f = files.pop()
        if f in seen:
            continue
        seen.add(f)
        if f.startswith(LINUX_ONLY):
            print('%s: a Linux-only file in the portable build' % f)
            bad += 1
        for n, line in enumerate(open(os.path.join(ROOT, f), encoding='utf-8'), 1):
            m = FEATURE.match(line)
            if m:
                print('%s:%d: defines %s' % (f, n, m.group(1)))
                bad += 1
            m = INCLUDE.match(line)
            if m and m.group(1) not in C11 | POSIX | LIBS:
                print('%s:%d: includes <%s>, not a header of C11, POSIX.1-2008, libuv or libvterm'
                      % (f, n, m.group(1)))
                bad += 1
            q = re.match(r'^\s*#\s*include\s*"([^"]+)"', line)
            if q:
                for base in (os.path.dirname(f), 'include', 'src'):
                    p = os.path.normpath(os.path.join(base, q.group(1)))
                    if os.path.isfile(os.path.join(ROOT, p)):
                        files.append(p)
                        break
    if bad:
        print('portable-check: %d problems' % bad)
        return 1
    print('portable-check: %d files (%d sources), POSIX.1-2008 and C11 only, no Linux-only file'
          % (len(seen), len(srcs)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
