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


def main():
    cli, case = sys.argv[1], sys.argv[2]
    cmd = [cli, "run", "pingpong", "--clusters", "2", "--threads", "1", "--proxies", "1", "--fabric", "memif",
           "--polling", "adaptive", "--messages", "40", "--gap-us", "100000"]
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
    if not banners.wait(60):
        print("FAIL: the clusters did not start")
        p.kill()
        return 1
    time.sleep(0.8)  # some round trips first
    kids = children(p.pid)
    if len(kids) != 2:
        print(f"FAIL: expected 2 cluster processes, found {kids}")
        p.kill()
        return 1
    kids.sort(key=cluster_of)
    targets = kids if case == "both" else kids[1:]
    print(f"stopping {targets} for {STOP_S} s", flush=True)
    for k in targets:
        os.kill(k, signal.SIGSTOP)
    time.sleep(STOP_S)
    for k in targets:
        os.kill(k, signal.SIGCONT)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        print("FAIL: the run did not end")
        return 1
    reader.join(5)
    out = "".join(lines)
    ok = True

    def check(cond, what):
        nonlocal ok
        print(("ok: " if cond else "FAIL: ") + what)
        ok &= bool(cond)

    if case == "both":
        check(p.returncode == 0, f"the run passed (exit status {p.returncode})")
        check("stopped answering" not in out, "no cluster reported the other down")
        check("PASS: every round trip completed" in out, "every round trip completed")
        check("was not run for" in out, "a proxy said it was not run")
    else:
        check(p.returncode != 0, f"the run failed (exit status {p.returncode})")
        check("proxy 0.0: cluster 1 stopped answering" in out, "cluster 0 reported the stopped cluster 1 down")
        check("proxy 1.0: this proxy was not run for" in out, "cluster 1 said it was not run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
