#!/usr/bin/env python3
"""iccs-run (cli/run_path_main.cpp), the launcher of `iccs run PATH` without DPDK.

Usage: run_path_no_dpdk.py ICCS_RUN ICCS_CLI
Checks: iccs-run's NEEDED libraries hold no DPDK library (librte_*) while iccs-cli's do (so the
check can see one); a command line that is not `run PATH` (here `run --rows`) is handed to
iccs-cli and prints exactly what iccs-cli prints; a usage error in `run PATH` is iccs-cli's (exit 2,
the flag named)."""
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def needed(exe):
    out = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True, check=True).stdout
    return [l.split("[")[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]


run_exe, cli_exe = sys.argv[1], sys.argv[2]
dpdk_run = [n for n in needed(run_exe) if n.startswith("librte_")]
dpdk_cli = [n for n in needed(cli_exe) if n.startswith("librte_")]
if dpdk_run:
    fail(f"{run_exe} needs DPDK's libraries: {', '.join(dpdk_run)}")
if not dpdk_cli:
    fail(f"{cli_exe} needs no DPDK library: the check cannot tell (readelf -d)")
a = subprocess.run([run_exe, "run", "--rows"], capture_output=True, text=True)
b = subprocess.run([cli_exe, "run", "--rows"], capture_output=True, text=True)
if a.returncode != 0 or a.stdout != b.stdout or not a.stdout:
    fail(f"iccs-run run --rows: exit {a.returncode}, {len(a.stdout)} bytes, not iccs-cli's "
         f"({b.returncode}, {len(b.stdout)} bytes): {a.stderr[-500:]}")
for exe in (run_exe, cli_exe):
    r = subprocess.run([exe, "run", "./no-such-program", "--bogus"], capture_output=True, text=True)
    if r.returncode != 2 or "--bogus" not in r.stderr:
        fail(f"{exe} run ./no-such-program --bogus: exit {r.returncode}, {r.stderr[-300:]!r}")
print(f"PASS: iccs-run needs {', '.join(needed(run_exe))} (no DPDK; iccs-cli needs {len(dpdk_cli)} of its "
      "libraries); other command lines go to iccs-cli")
