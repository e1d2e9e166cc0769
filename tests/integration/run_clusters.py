#!/usr/bin/env python3
"""Integration test: start real cluster processes with `iccs-cli run alltoall ARGS...` and check
that every cluster reports PASS (every message exactly once and intact), that the counters show
the traffic crossed the proxies, and that nothing is left behind: no iccs process of this run, no
EAL runtime directory, no memif socket directory.

Usage: run_clusters.py ICCS_CLI [ARGS for `run alltoall`...]
"""
import glob
import os
import re
import subprocess
import sys
import time


def leftovers(run_id):
    found = []
    found += glob.glob(f"/var/run/dpdk/iccs-{run_id}-*")
    found += glob.glob(f"/tmp/iccs-{run_id}")
    # fabric af_packet: the run's bridge and veth pairs
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [l.split(":")[1].strip() for l in links.splitlines()
              if re.match(rf"^\d+: i[cb](br)?{run_id}(c\d+p\d+)?[@:]", l)]
    return found


def udp_port_args(args):
    """fabric udp binds fixed ports (udp_port + 64*cluster + proxy): a test picks its own range,
    so two test runs on one host (two worktrees, two CI jobs) do not take each other's ports."""
    if args[args.index("--fabric") + 1:][:1] != ["udp"] or any("udp_port" in a for a in args):
        return []
    return ["--set", f"machine.udp_port={20000 + (os.getpid() % 48) * 256}"]


def main():
    cli, args = sys.argv[1], sys.argv[2:]
    if "--fabric" in args:
        args = args + udp_port_args(args)
    cmd = [cli, "run", "alltoall"] + args
    print("$", " ".join(cmd), flush=True)
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_id = str(proc.pid)
    out, _ = proc.communicate(timeout=900)
    print(out)
    print(f"(took {time.time() - start:.1f} s)")
    failures = []
    if proc.returncode != 0:
        failures.append(f"exit status {proc.returncode}")
    m = re.search(r"(\d+) clusters x (\d+) compute threads", out)
    clusters = int(m.group(1)) if m else 0
    passes = re.findall(r"^cluster (\d+): PASS", out, re.M)
    if clusters == 0 or len(passes) != clusters:
        failures.append(f"{len(passes)} of {clusters} clusters passed")
    # every proxy moved messages both ways
    for line in re.findall(r"^  proxy .*$", out, re.M):
        tx = int(re.search(r"msgs tx (\d+)", line).group(1))
        rx = int(re.search(r"rx (\d+)", line).group(1))
        if tx == 0 and rx == 0:
            failures.append(f"idle proxy: {line.strip()}")
    time.sleep(0.2)
    left = leftovers(run_id)
    if left:
        failures.append(f"left behind: {left}")
    # Only this test's process group: runs of another worktree or CI job on the host are not ours.
    ps = subprocess.run(["pgrep", "-g", str(os.getpgid(0)), "-f", "iccs-cli run alltoall"],
                        capture_output=True, text=True).stdout.split()
    ps = [p for p in ps if int(p) != os.getpid()]
    if ps:
        failures.append(f"iccs processes still running: {ps}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
