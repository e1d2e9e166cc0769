#!/usr/bin/env python3
"""Fails when a Catch2 test case is in none of the tag expressions meson runs (tests/meson.build),
so a new test cannot be silently skipped. Usage: check_areas.py UNIT_EXE TAG_EXPR..."""
import subprocess
import sys


def names(exe, spec=None):
    cmd = [exe, "--list-test-names-only"] + ([spec] if spec else [])
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def main():
    exe, specs = sys.argv[1], sys.argv[2:]
    every = names(exe)
    covered = set()
    for spec in specs:
        covered |= names(exe, spec)
    missing = sorted(every - covered)
    if not every:
        print("no test cases listed")
        return 1
    for m in missing:
        print(f"test case not run by any area: {m}")
    print(f"{len(every)} test cases, {len(every) - len(missing)} covered")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
