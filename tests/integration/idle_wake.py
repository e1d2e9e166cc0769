#!/usr/bin/env python3
"""Integration test (issue 21): wake on arrival for adaptive polling. Two clusters of one compute
thread and one proxy each, polling adaptive, open their connections, then idle (--gap-us) before
every compute thread sends its burst of checked messages (alltoall). While they idle, the proxies'
CPU time is read twice from /proc (schedstat: ns on the CPU) over a window of WINDOW_S seconds:
each proxy thread (rte-worker-*) must stay under 2% of a core. Then the run must PASS: every
message exactly once, intact, in order (the burst delivered whole).

It also checks that the start-up line says how a sleeping proxy is woken (memif: the peers'
doorbells; udp: the io_uring wait; af_packet: ppoll on its sockets), not the fallback.

Usage: idle_wake.py ICCS_CLI FABRIC
"""
import os
import re
import subprocess
import sys
import threading
import time

from run_clusters import children  # noqa: E402

GAP_S = 5.0       # the compute threads idle this long once connected
WINDOW_S = 2.0    # the measured window, inside the idle time
LIMIT = 0.02      # of one core, per proxy thread


def proxy_cpu_ns(pids):
    """{(pid, tid): ns on the CPU} of every proxy thread (rte-worker-*) of the cluster processes."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
                if not comm.startswith("rte-worker"):
                    continue
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    out[(pid, int(tid))] = int(f.read().split()[0])
            except OSError:
                pass
    return out


def main():
    cli, fabric = sys.argv[1], sys.argv[2]
    cmd = [cli, "run", "alltoall", "--fabric", fabric, "--clusters", "2", "--threads", "1", "--proxies", "1",
           "--polling", "adaptive", "--messages", "3000", "--min-size", "1", "--max-size", "9000",
           "--gap-us", str(int(GAP_S * 1e6)), "--timeout", "120"]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, started = [], []
    def reader():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if re.match(r"^cluster \d+: \d+ prox", line):
                started.append(time.time())
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    failures = []
    deadline = time.time() + 60
    while len(started) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if len(started) < 2:
        failures.append("the two clusters did not start")
    else:
        time.sleep(max(0.0, started[-1] + 1.0 - time.time()))  # connections open, idle begins
        pids = children(proc.pid)
        a = proxy_cpu_ns(pids)
        t0 = time.time()
        time.sleep(WINDOW_S)
        b = proxy_cpu_ns(pids)
        took = time.time() - t0
        if len(a) < 2:
            failures.append(f"found {len(a)} proxy threads (rte-worker-*) in {pids}, expected 2")
        for key in sorted(a):
            if key not in b:
                continue
            share = (b[key] - a[key]) / 1e9 / took
            print(f"idle proxy thread {key}: {100 * share:.2f}% of a core over {took:.2f} s")
            if share >= LIMIT:
                failures.append(f"idle proxy thread {key} used {100 * share:.2f}% of a core (limit {100 * LIMIT:.0f}%)")
    try:
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        failures.append("the run did not end")
    t.join(timeout=5)
    print("\n".join(lines))
    if proc.returncode != 0:
        failures.append(f"exit status {proc.returncode}")
    passes = [l for l in lines if re.match(r"^cluster \d+: PASS", l)]
    if len(passes) != 2:
        failures.append(f"{len(passes)} clusters said PASS, expected 2")
    starts = [l for l in lines if re.match(r"^cluster \d+: \d+ prox", l)]
    if any("NOT woken on arrival" in l for l in starts) or not all("woken on arrival" in l for l in starts):
        failures.append("a start-up line does not say the proxies are woken on arrival")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
