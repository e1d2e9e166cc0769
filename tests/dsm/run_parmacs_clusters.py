#!/usr/bin/env python3
"""Runs a PARMACS program as C cluster processes joined by Unix stream sockets (the test runtime of
dsm/testing/socket_runtime.hpp; with the real runtime `./iccs run PATH --clusters C` does this),
and checks the replayed start-up across processes: the parallel answer equals the sequential one,
only cluster 0 prints the prefix and epilogue, every cluster's DSM counters show real traffic,
and a prefix that differs between clusters stops every cluster with the clear error.
Usage: run_parmacs_clusters.py PROGRAM"""
import os
import socket
import subprocess
import sys


def launch(prog, clusters, threads, args_of, timeout=240):
    """Starts one process per cluster; args_of(c) gives cluster c's arguments. Returns [(rc, out, err)]."""
    pairs = {}
    for i in range(clusters):
        for j in range(i + 1, clusters):
            pairs[(i, j)] = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    procs = []
    for c in range(clusters):
        fds = []
        for k in range(clusters):
            if k == c:
                fds.append("-")
            else:
                a, b = pairs[(min(c, k), max(c, k))]
                fds.append(str((a if c < k else b).fileno()))
        env = dict(os.environ, ICCS_TEST_CLUSTER=str(c), ICCS_TEST_CLUSTERS=str(clusters),
                   ICCS_TEST_THREADS=str(threads), ICCS_TEST_FDS=",".join(fds))
        keep = [int(f) for f in fds if f != "-"]
        procs.append(subprocess.Popen([prog] + args_of(c), env=env, pass_fds=keep, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for a, b in pairs.values():
        a.close()
        b.close()
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            results.append((-999, out, err + "\n(timed out)"))
            continue
        results.append((p.returncode, out, err))
    return results


def counter(err, cluster, name):
    for line in err.splitlines():
        if line.startswith(f"dsm cluster {cluster}:") and f" {name} " in line:
            return int(line.split(f" {name} ")[1].split()[0])
    return None


def main():
    prog = sys.argv[1]
    failures = 0

    def fail(msg, results=None):
        nonlocal failures
        failures += 1
        print("FAIL:", msg)
        for c, (rc, out, err) in enumerate(results or []):
            print(f"--- cluster {c} exit {rc}\n{out}{err}")

    for clusters, threads, nprocs, n in [(2, 2, 4, 20000), (3, 2, 5, 30000), (2, 2, 3, 5000)]:
        label = f"{clusters} clusters x {threads} threads, -p {nprocs} -n {n}"
        res = launch(prog, clusters, threads, lambda c: ["-p", str(nprocs), "-n", str(n)])
        rc0, out0, err0 = res[0]
        if any(r[0] != 0 for r in res):
            fail(f"{label}: exit codes {[r[0] for r in res]}", res)
            continue
        if "PASS" not in out0 or f"splash_sum: {n} elements, {nprocs} processes" not in out0:
            fail(f"{label}: cluster 0 did not print the banner and PASS", res)
            continue
        if any(r[1].strip() for r in res[1:]):
            fail(f"{label}: clusters other than 0 printed on stdout outside the parallel section", res)
            continue
        fetches = [counter(r[2], c, "page_fetches") for c, r in enumerate(res)]
        if any(f is None for f in fetches) or sum(fetches) == 0:
            fail(f"{label}: no page fetches counted: {fetches}", res)
            continue
        print(f"{label}: {out0.strip().splitlines()[-1]}; page fetches per cluster {fetches}")

    # A prefix that is not deterministic (a different seed on cluster 1) is caught at CREATE.
    res = launch(prog, 2, 2, lambda c: ["-p", "4", "-s", str(1 + c)])
    msgs = [r[2] for r in res]
    if any(r[0] != 1 for r in res) or not all("not deterministic" in m for m in msgs):
        fail("a non-deterministic prefix was not stopped with the clear error on every cluster", res)
    else:
        line = [l for l in msgs[0].splitlines() if "not deterministic" in l][0]
        print(f"non-deterministic prefix: every cluster exits 1: {line}")
    print("PASS" if failures == 0 else f"FAIL ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
