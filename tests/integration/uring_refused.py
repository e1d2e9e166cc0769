#!/usr/bin/env python3
"""Integration test: fabric "udp" where io_uring is refused. ICCS_URING_DISABLE=1 makes the
io_uring probe fail as a kernel that refuses io_uring_queue_init (EPERM: seccomp, or
kernel.io_uring_disabled) would. `run alltoall --fabric udp` and `bench rtt --fabric udp` and `bench compare` must stop
at once, before any cluster starts, with the one line that says so and names the alternatives,
exit non-zero, and leave nothing behind.

Usage: uring_refused.py ICCS_CLI
"""
import glob
import os
import subprocess
import sys
import time

EXPECTED = ('iccs: fabric "udp" needs io_uring, which this kernel refused (io_uring_queue_init: '
            'Operation not permitted); use fabric = "memif" or "af_packet"')


def main():
    cli = sys.argv[1]
    env = dict(os.environ, ICCS_URING_DISABLE="1")
    failures = []
    for args in (["run", "alltoall", "--fabric", "udp", "--clusters", "2", "--messages", "10"],
                 ["bench", "rtt", "--fabric", "udp", "--samples", "100"],
                 ["bench", "compare", "--runs", "1", "--samples", "100", "--messages", "1000"]):
        cmd = [cli] + args
        print("$ ICCS_URING_DISABLE=1", " ".join(cmd), flush=True)
        start = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = proc.communicate(timeout=60)
        took = time.time() - start
        print(out)
        print(f"(exit {proc.returncode}, took {took:.1f} s)")
        if proc.returncode == 0:
            failures.append(f"{' '.join(args[:2])}: exit status 0")
        lines = out.splitlines()
        if not any(line.startswith(EXPECTED) for line in lines):
            failures.append(f"{' '.join(args[:2])}: no line starting with: {EXPECTED}")
        if any(line.startswith("cluster ") for line in lines):
            failures.append(f"{' '.join(args[:2])}: a cluster started before the refusal was seen")
        if took > 20:
            failures.append(f"{' '.join(args[:2])}: took {took:.1f} s to fail (should fail at start)")
        left = glob.glob(f"/var/run/dpdk/iccs-{proc.pid}-*") + glob.glob(f"/tmp/iccs-{proc.pid}")
        if left:
            failures.append(f"left behind: {left}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
