#!/usr/bin/env python3
"""iccs run --mpi from outside: the convenience launcher runs an MPI program of our own over the
provider (mpirun with every setting filled in), the program's output and exit status are
mpirun's, and --report FILE holds the agents' counters: shared memory inside a cluster, proxies
across. Then a program that fails: its exit status comes back.
Usage: run_mpi_cli.py ICCS_CLI MPI_P2P"""
import json
import os
import re
import subprocess
import sys
import tempfile


def fail(msg, out=""):
    print(f"FAIL: {msg}\n{out}")
    sys.exit(1)


def main():
    cli, program = sys.argv[1], sys.argv[2]
    if program.startswith("missing:"):
        print("SKIP: mpicc is not installed (Debian's libopenmpi-dev; ./iccs installs it)")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="iccs-run-mpi-") as tmp:
        rep = os.path.join(tmp, "report.json")
        cmd = [cli, "run", "--mpi", program, "--clusters", "2", "--cluster-size", "2", "--polling", "adaptive",
               "--report", rep]
        # Rings to the agents of 256 KiB instead of 4 MiB: the 1 and 4 MiB messages wait for room.
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240,
                           env=dict(os.environ, ICCS_MPI_AGENT_RING_BYTES="262144"))
        out = p.stdout
        if p.returncode != 0:
            fail(f"iccs run --mpi exited {p.returncode}", out)
        if not re.search(r"^iccs run --mpi: mpirun -n 4 .*--mca mtl_ofi_provider_include iccs", out, re.M):
            fail("the mpirun line is not printed", out)
        for r in range(4):
            if len(re.findall(rf"PASS rank {r} of 4$", out, re.M)) != 1:
                fail(f"rank {r} did not print its PASS line once", out)
        with open(rep) as f:
            doc = json.load(f)
        if doc["exit_status"] != 0 or doc["clusters"] != 2 or doc["cluster_size"] != 2 or len(doc["domains"]) != 2:
            fail(f"report: {doc}", out)
        ranks = [r for d in doc["domains"] for r in d["ranks"]]
        if sorted(r["rank"] for r in ranks) != [0, 1, 2, 3]:
            fail(f"report ranks: {ranks}", out)
        for r in ranks:
            if r["sent_local_msgs"] == 0 or r["sent_remote_msgs"] == 0 or r["recv_remote_bytes"] == 0:
                fail(f"rank {r['rank']} used not both paths: {r}", out)
        # Messages to the other cluster fill a rank's ring to its agent: a rank that waits for room
        # there sleeps (its bridge rings it when it takes records), it does not poll the core away
        # from the bridge and proxies that make the room.
        if sum(r["send_ring_full"] for r in ranks) == 0 or sum(r["room_blocks"] for r in ranks) == 0:
            fail(f"no rank waited for room in its ring to the agent, or none slept meanwhile: {ranks}", out)
        proxies = [q for d in doc["domains"] for q in d["proxies"]]
        if len(proxies) < 2 or any(q["msgs_tx"] == 0 for q in proxies):
            fail(f"report proxies: {proxies}", out)
        print(f"run --mpi 2x2: 4 PASS lines, report with {len(ranks)} ranks and {len(proxies)} proxies")
        # The program's exit status is mpirun's: a program that is not there fails the run.
        bad = subprocess.run([cli, "run", "--mpi", os.path.join(tmp, "no-such-program"), "--clusters", "2",
                              "--cluster-size", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=120)
        if bad.returncode == 0:
            fail("a missing program ran", bad.stdout)
        print(f"missing program: exit {bad.returncode}: {bad.stdout.strip().splitlines()[-1]}")
        # A reader that stops after one line (`| head -1`): the launcher's next write to the closed
        # pipe must not kill it before it removes its run directory (under TMPDIR).
        run_tmp = os.path.join(tmp, "tmpdir")
        os.mkdir(run_tmp)
        head = subprocess.Popen([cli, "run", "--mpi", program, "--clusters", "2", "--cluster-size", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, TMPDIR=run_tmp))
        first = head.stdout.readline()
        head.stdout.close()
        rc = head.wait(timeout=120)
        # (mpirun itself, killed by the closed pipe at its next write, may leave its own session
        # directory there: Open MPI's, not ours.)
        left = [f for f in os.listdir(run_tmp) if f.startswith("iccs-")]
        if not first.startswith(b"iccs run --mpi: mpirun") or left:
            fail(f"closed output after one line: exit {rc}, first line {first!r}, left under TMPDIR: {left}")
        print(f"closed output after one line: exit {rc}, nothing left under TMPDIR")
    print("PASS")


if __name__ == "__main__":
    main()
