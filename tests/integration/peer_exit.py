#!/usr/bin/env python3
"""Integration test (issue 34): a cluster whose memif peer ends never crashes.

DPDK 22.11's net_memif unmaps a link's memory on the EAL interrupt thread the moment the peer's
socket closes, under any thread still inside rx_burst/tx_burst on that port (proxy/memif_guard.hpp);
the guard keeps that thread from doing it. This runs RUNS short 2-cluster exchanges over memif
(`iccs run alltoall`, 1 thread and 1 proxy each, polling adaptive, inline and busy in turn) in
which cluster 1 ends at a random moment: every other run it is killed (SIGKILL from outside, at a
time drawn from the whole length of a run, start-up and end included), the others end normally
(both clusters leave at the end, one before the other).

usage: peer_exit.py CLI RUNS [SEED]
Checks, every run: the survivor never crashes (dies of SIGSEGV, SIGBUS, SIGABRT, SIGILL, or prints
a crash backtrace) and is not killed either (the launcher stops it: it exits by itself); a normal run PASSes on both clusters; a killed run exits with cluster 1's status (137).
Prints the runs, the kills, and how often the survivor saw the hang-up itself before the
launcher stopped it.
"""
import os
import random
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_watch import Checks, Run, leftovers  # noqa: E402

POLLING = ["adaptive", "inline", "busy"]


def start(cli, polling):
    return Run(cli, ["run", "alltoall", "--clusters", "2", "--threads", "1", "--proxies", "1", "--fabric", "memif",
                     "--polling", polling, "--messages", "3000", "--min-size", "1", "--max-size", "3000",
                     "--timeout", "60"])


def main():
    cli, runs = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time())
    rng = random.Random(seed)
    print(f"{runs} runs, seed {seed}", flush=True)
    t = Checks()
    crashes = kills = hangups_seen = 0
    span = None  # a normal run's length from its start [s]: kill times are drawn over it
    for i in range(runs):
        polling = POLLING[i % len(POLLING)]
        kill = i % 2 == 1 and span is not None
        run = start(cli, polling)
        t0 = time.monotonic()
        when = None
        if kill:
            when = rng.uniform(0.0, span * 1.1)
            while time.monotonic() < t0 + when and run.proc.poll() is None:
                time.sleep(0.005)
            pid = run.clusters().get(1)
            if pid is not None and run.proc.poll() is None:
                try:
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pid = None
            kill = pid is not None
        rc = run.wait(90)
        out = run.output()
        if not kill and span is None and rc == 0:
            span = time.monotonic() - t0
        crashed = bool(re.search(r"^iccs: cluster 0 died of signal (11|7|6|4) ", out, re.M)) or "crashed; backtrace" in out
        crashes += crashed
        # Not a crash, but not the survivor's fault either: the launcher stops it, never kills it.
        killed = re.search(r"^iccs: cluster 0 died of signal 9 ", out, re.M) is not None
        hangups_seen += bool(re.search(r"^proxy 0\.\d+: cluster 1 hung up its memif link", out, re.M))
        what = f"run {i}: polling {polling}, " + (f"cluster 1 killed at {when:.3f} s" if kill else "normal end")
        both_passed = rc == 0 and len(re.findall(r"^cluster \d: PASS", out, re.M)) == 2
        # Kill times are drawn up to 1.1 x a normal run: a SIGKILL that lands after cluster 1 has
        # passed and is exiting does nothing, and the run then ends 0 with both PASS lines.
        late = kill and both_passed
        if late:
            what += " (after it had passed and was exiting)"
        ok = not crashed and not killed and (rc == 137 or late if kill else both_passed)
        if not ok or crashed:
            print(out)
        t.check(ok, f"{what}: exit {rc}{', the survivor CRASHED' if crashed else ''}"
                    f"{', the survivor was killed by the launcher' if killed else ''}")
        left = leftovers(run.run_id) + [str(p) for p in run.tagged_processes()]
        if left:
            t.check(False, f"{what}: left behind {left}")
    print(f"survivor crashes: {crashes} in {runs} runs ({kills} kills); the survivor saw the hang-up itself in "
          f"{hangups_seen} runs")
    t.check(crashes == 0, "no survivor crashed")
    return t.verdict()


if __name__ == "__main__":
    sys.exit(main())
