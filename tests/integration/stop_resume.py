#!/usr/bin/env python3
"""A cluster process the host does not run for a while (issue 21): `iccs run pingpong` over
memif, adaptive polling; once both cluster processes are up, SIGSTOP for 6.5 s (longer than the
5 s peer time-out), then SIGCONT.

  both  every cluster process stopped (a paused host): none may report the other down on
        resuming, since none listened meanwhile; the run completes every round trip.
  one   cluster 1 stopped only: cluster 0, which ran and heard nothing, reports it down and
        the run fails; cluster 1, on resuming, says it was not run.

usage: stop_resume.py CLI both|one
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idle_wake import children  # noqa: E402  (the cluster processes: /proc, no procps)

STOP_S = 6.5


def cluster_of(pid):
    """The cluster a cluster process runs: its EAL files are named iccs-<run>-c<cluster>."""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            m = re.search(r"iccs-\d+-c(\d+)", os.readlink(f"/proc/{pid}/fd/{fd}"))
            if m:
                return int(m.group(1))
    except OSError:
        pass
    return pid  # not found: fork order (cluster 0 first)


def start_two_clusters(cmd):
    """Starts cmd (a run of 2 cluster processes), echoes its output, and waits until both clusters
    are up and have run 0.8 s. Returns (the run, its lines so far, the reader thread, the cluster
    processes in cluster order), or None after a FAIL line (the run then killed)."""
    print("$", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    banners = threading.Event()

    def read():
        for line in p.stdout:
            lines.append(line)
            sys.stdout.write(line)
            if sum(1 for l in lines if l.startswith("cluster ") and " proxies, " in l) >= 2:
                banners.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not banners.wait(0.2) and p.poll() is None and time.monotonic() < deadline:
        pass
    if not banners.is_set():
        print("FAIL: the clusters did not start")
        p.kill()
        return None
    time.sleep(0.8)  # some round trips first
    kids = children(p.pid)
    if len(kids) != 2:
        print(f"FAIL: expected 2 cluster processes, found {kids}")
        p.kill()
        return None
    kids.sort(key=cluster_of)
    return p, lines, reader, kids


def finish(p, lines, reader, timeout):
    """Waits for the run to end; returns its whole output, or None after a FAIL line (killed)."""
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        print("FAIL: the run did not end")
        return None
    reader.join(5)
    return "".join(lines)


class Checks:
    """check(cond, what) prints ok: or FAIL: and what; .ok is whether every one held."""

    def __init__(self):
        self.ok = True

    def __call__(self, cond, what):
        print(("ok: " if cond else "FAIL: ") + what)
        self.ok &= bool(cond)


def main():
    cli, case = sys.argv[1], sys.argv[2]
    started = start_two_clusters([cli, "run", "pingpong", "--clusters", "2", "--threads", "1", "--proxies", "1",
                                  "--fabric", "memif", "--polling", "adaptive", "--messages", "40", "--gap-us",
                                  "100000"])
    if started is None:
        return 1
    p, lines, reader, kids = started
    targets = kids if case == "both" else kids[1:]
    print(f"stopping {targets} for {STOP_S} s", flush=True)
    for k in targets:
        os.kill(k, signal.SIGSTOP)
    time.sleep(STOP_S)
    for k in targets:
        os.kill(k, signal.SIGCONT)
    out = finish(p, lines, reader, 120)
    if out is None:
        return 1
    check = Checks()
    if case == "both":
        check(p.returncode == 0, f"the run passed (exit status {p.returncode})")
        check("stopped answering" not in out, "no cluster reported the other down")
        check("PASS: every round trip completed" in out, "every round trip completed")
        check("was not run for" in out, "a proxy said it was not run")
    else:
        check(p.returncode != 0, f"the run failed (exit status {p.returncode})")
        check("proxy 0.0: cluster 1 stopped answering" in out, "cluster 0 reported the stopped cluster 1 down")
        check("proxy 1.0: this proxy was not run for" in out, "cluster 1 said it was not run")
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
