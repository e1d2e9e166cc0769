#!/usr/bin/env python3
"""dsm-vs-argo: what of `iccs bench dsm --vs argo` runs without ArgoDSM (Argo is never fetched or
built here, so the comparison itself is not run by the suite).

1. The refusals: --vs argo without --argo, --argo naming a missing directory, a directory without
   an Argo install (the missing file named), --argo without --vs, --rounds with --vs: exit 2, one
   line naming the flag or path.
2. Our side's four programs (perf/dsm_vs_argo/, the same C++ the Argo side runs) at small sizes on
   2 clusters x 2 threads over direct, and matmul and taskq over iccs: each PASS against its
   sequential reference, exit 0.
3. --inject-error (one value of the result corrupted after the run): each program reports FAIL
   naming the element, and `iccs run` exits 1: the checks can fail.

usage: dsm_vs_argo.py ICCS_CLI OUR_PROGRAMS
"""
import os
import subprocess
import sys
import tempfile

CLI, PROGS = sys.argv[1], sys.argv[2]
SMALL = {"matmul": ["--n", "96"], "jacobi": ["--n", "128", "--iters", "4"], "fft": ["--n", "64", "--iters", "1"],
         "taskq": ["--tasks", "256", "--work", "200"]}
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def refused(args, needle):
    r = subprocess.run([CLI, "bench", "dsm"] + args, capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and needle in r.stderr,
          f"bench dsm {' '.join(args)}: exit 2 naming {needle!r} (exit {r.returncode}: {r.stderr.strip()[-300:]})")


with tempfile.TemporaryDirectory() as empty:
    refused(["--vs", "argo"], "--vs argo needs --argo DIR")
    refused(["--vs", "argo", "--argo", "/nonexistent/argo"], "--argo /nonexistent/argo: no such directory")
    refused(["--vs", "argo", "--argo", empty], os.path.join(empty, "include/argo/argo.hpp") + " is not there")
    refused(["--argo", empty], "--argo belongs to --vs argo")
    refused(["--vs", "argo", "--argo", empty, "--rounds", "20"], "--rounds is the operation benchmark's")
    refused(["--vs", "argo", "--argo", empty, "--programs", "lu"], "unknown program 'lu'")


def run(prog, transport, extra=()):
    cmd = [CLI, "run", PROGS, "--clusters", "2", "--threads", "2", "--transport", transport, "--polling", "adaptive",
           "--", prog, "-p", "4"] + SMALL[prog] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [l for l in r.stdout.splitlines() if l.startswith("dsm-vs-argo ")]
    return r, lines


for prog, transport in [("matmul", "direct"), ("jacobi", "direct"), ("fft", "direct"), ("taskq", "direct"),
                        ("matmul", "iccs"), ("taskq", "iccs")]:
    r, lines = run(prog, transport)
    ok = r.returncode == 0 and len(lines) == 1 and "result=PASS" in lines[0] and "parallel_s=" in lines[0]
    check(ok, f"{prog} over {transport}: one result line, PASS, exit 0 ({lines or r.stderr.strip()[-300:]})")

for prog in SMALL:
    r, lines = run(prog, "direct", ["--inject-error"])
    ok = r.returncode == 1 and len(lines) == 1 and "result=FAIL failure=" in lines[0]
    check(ok, f"{prog} --inject-error: FAIL naming the element, exit 1 (exit {r.returncode}: {lines})")

print(f"{len(failures)} failed" if failures else "PASS")
sys.exit(1 if failures else 0)
