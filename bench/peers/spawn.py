# Peer for workload 1: Python asyncio create_subprocess_exec/_shell.
#   python3 spawn.py COUNT LIVE argv|shell
# Runs COUNT `true`, at most LIVE at once, each read to the end
# (communicate()).  Prints "rate <tasks/s>".
import asyncio
import sys
import time

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
LIVE = int(sys.argv[2]) if len(sys.argv) > 2 else 64
SHELL = len(sys.argv) > 3 and sys.argv[3] == "shell"
PIPE = asyncio.subprocess.PIPE
DEVNULL = asyncio.subprocess.DEVNULL


async def one(sem):
    async with sem:
        if SHELL:
            p = await asyncio.create_subprocess_shell(
                "true", stdin=DEVNULL, stdout=PIPE, stderr=PIPE)
        else:
            p = await asyncio.create_subprocess_exec(
                "true", stdin=DEVNULL, stdout=PIPE, stderr=PIPE)
        await p.communicate()


async def main():
    sem = asyncio.Semaphore(LIVE)
    t0 = time.monotonic_ns()
    await asyncio.gather(*(one(sem) for _ in range(COUNT)))
    ns = time.monotonic_ns() - t0
    print(f"rate {COUNT * 1e9 / ns}")


asyncio.run(main())
