#!/usr/bin/env python3
"""Runs a PARMACS test program (tests/dsm/splash_sum.C built over the one-cluster loopback runtime)
with several thread counts and checks its verdict, its output, and the clear error of a CREATE
larger than the run. Usage: run_parmacs.py PROGRAM
With --misuse, PROGRAM is tests/dsm/parmacs_misuse.C's build: each wrong use of the macros must
stop the program with exit 1 and its one clear line."""
import os
import subprocess
import sys


def run(prog, args, threads, **extra_env):
    env = dict(os.environ, ICCS_TEST_THREADS=str(threads), **extra_env)
    return subprocess.run([prog] + args, capture_output=True, text=True, env=env, timeout=240)


MISUSE = {
    "bigalloc": ": G_MALLOC(1099511627776 bytes): the shared region is full (0 of 268435456 bytes used; "
                "the region's size is ICCS_DSM_SIZE: raise ICCS_DSM_SIZE; a page costs memory only when touched)",
    "lock-range": "LOCK: lock id 2139062143 is out of range (0 .. 65535)",
    "many-locks": "ALOCKINIT: no sync ids left (65536 in all",
    "noinit": "LOCK of an object that LOCKINIT never initialised",
    "barrier-n": "BARRIER(b, 3): n must be 1..1 (the threads CREATE started)",
}


def misuse(prog):
    failures = 0
    for mode, want in MISUSE.items():
        # bigalloc: a region of a set size (the default is tens of GiB of address space)
        r = run(prog, [mode], 4, **({"ICCS_DSM_SIZE": "256M"} if mode == "bigalloc" else {}))
        print(f"{mode}: exit {r.returncode}: {r.stderr.strip()}")
        if r.returncode != 1 or want not in r.stderr:
            print(f"  expected exit 1 and: {want}")
            failures += 1
    print("PASS" if failures == 0 else f"FAIL ({failures})")
    return 1 if failures else 0


def main():
    if sys.argv[1] == "--misuse":
        return misuse(sys.argv[2])
    prog = sys.argv[1]
    failures = 0
    answers = set()
    # (program arguments, compute threads of the simulated cluster)
    for args, threads in [(["-p", "1"], 1), (["-p", "4"], 4), (["-p", "3", "-n", "50000"], 4), (["-p", "8"], 8)]:
        r = run(prog, args, threads)
        ok = r.returncode == 0 and "PASS" in r.stdout and "dsm cluster 0:\n  read_faults" in r.stderr
        print(f"{' '.join(args)} on {threads} threads: exit {r.returncode}: {r.stdout.strip().splitlines()[-1:]}")
        if not ok:
            print(r.stdout, r.stderr)
            failures += 1
        elif "-n" not in args:
            answers.add(r.stdout.strip().splitlines()[-1])
    if len(answers) > 1:
        print(f"different answers for different thread counts: {answers}")
        failures += 1
    # CREATE beyond the run's compute threads: one clear line, exit 1.
    r = run(prog, ["-p", "5"], 4)
    want = "CREATE(fn, 5): the run has 1 clusters x 4 compute threads = 4; n must be 1..4"
    print(f"-p 5 on 4 threads: exit {r.returncode}: {r.stderr.strip()}")
    if r.returncode != 1 or want not in r.stderr:
        failures += 1
    print("PASS" if failures == 0 else f"FAIL ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
