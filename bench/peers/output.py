# Peer for workload 3: read a command's stdout through Python asyncio.
#   python3 output.py head|dd MIB
# Prints "mib_per_s <value>".
import asyncio
import sys
import time

CMD = sys.argv[1] if len(sys.argv) > 1 else "head"
MIB = int(sys.argv[2]) if len(sys.argv) > 2 else 256


async def main():
    if CMD == "dd":
        args = ["dd", "if=/dev/zero", "bs=64K", f"count={MIB * 16}",
                "status=none"]
    else:
        args = ["head", "-c", str(MIB << 20), "/dev/zero"]
    t0 = time.monotonic_ns()
    p = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE)
    n = 0
    while True:
        chunk = await p.stdout.read(1 << 16)
        if not chunk:
            break
        n += len(chunk)
    await p.wait()
    ns = time.monotonic_ns() - t0
    if n != MIB << 20:
        sys.exit(f"output.py: got {n} bytes")
    print(f"mib_per_s {MIB * 1e9 / ns}")


asyncio.run(main())
