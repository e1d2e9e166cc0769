#!/usr/bin/env python3
"""Tests of the applications (apps/, issue 8) as a user runs them, one executable at a time.

Modes:
  run_app.py EXE [--threads 1,2,4] [--size test]
      EXE at that size with each -p: exit 0, and one JSON object (--json) with the keys the
      experiment runner reads (app, size, threads, result = PASS, parallel_s, check); once more in
      text mode: the PASS line and the parallel time.
  run_app.py --inject-error EXE...
      each with the test hook --inject-error (one value of the parallel result corrupted before
      the check), -p 2: exit 1, JSON result FAIL with a failure message; text mode ends with
      "FAIL: <what differed>".
  run_app.py --tsan EXE...
      each (built with -fsanitize=thread) at -p 4: PASS and no ThreadSanitizer report, i.e. no
      read of another thread's write that a lock, barrier or pause does not order. Skipped (77)
      where ThreadSanitizer cannot start on this kernel.
  run_app.py --bad-args EXE...
      wrong arguments: exit 2 and one line on stderr naming the argument; --help exits 0.
"""
import json
import os
import subprocess
import sys

TIMEOUT_S = 300  # generous: a loaded 2-core host


def run(cmd, env=None):
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S,
                          env=env)
    if proc.stdout:
        print(proc.stdout, end="" if proc.stdout.endswith("\n") else "\n")
    if proc.stderr:
        print("[stderr]", proc.stderr, end="" if proc.stderr.endswith("\n") else "\n")
    print(f"(exit {proc.returncode})", flush=True)
    return proc


def parse_json(out, failures, what):
    lines = [line for line in out.splitlines() if line.strip()]
    if len(lines) != 1:
        failures.append(f"{what}: --json printed {len(lines)} lines, expected one JSON object on one line")
        return None
    try:
        obj = json.loads(lines[0])
    except ValueError as e:
        failures.append(f"{what}: --json output is not JSON ({e})")
        return None
    for key in ("app", "size", "threads", "result", "parallel_s", "check"):
        if key not in obj:
            failures.append(f"{what}: JSON key '{key}' missing")
    return obj


def app_name(exe):
    base = os.path.basename(exe)  # iccs-app-<name>-<backend>; app names have no '-'
    return base[len("iccs-app-"):].split("-", 1)[0] if base.startswith("iccs-app-") else base


def check_runs(exe, threads, size, failures):
    name = app_name(exe)
    for p in threads:
        what = f"{name} -p {p} --size {size}"
        proc = run([exe, "-p", str(p), "--size", size, "--json"])
        if proc.returncode != 0:
            failures.append(f"{what}: exit {proc.returncode}")
        obj = parse_json(proc.stdout, failures, what)
        if obj is None:
            continue
        if obj.get("result") != "PASS":
            failures.append(f"{what}: result {obj.get('result')!r}: {obj.get('failure')}")
        if obj.get("app") != name or obj.get("threads") != p or obj.get("size") != size:
            failures.append(f"{what}: JSON says app {obj.get('app')!r}, threads {obj.get('threads')!r}, "
                            f"size {obj.get('size')!r}")
        if not isinstance(obj.get("parallel_s"), (int, float)) or obj["parallel_s"] < 0:
            failures.append(f"{what}: parallel_s {obj.get('parallel_s')!r} is not a time")
        if not obj.get("check"):
            failures.append(f"{what}: 'check' is empty: nothing was compared")
    what = f"{name} -p {threads[-1]} (text)"
    proc = run([exe, "-p", str(threads[-1]), "--size", size])
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines or lines[-1] != "PASS":
        failures.append(f"{what}: exit {proc.returncode}, last line {lines[-1] if lines else ''!r}, expected PASS")
    if not any(line.startswith("parallel section: ") and line.endswith(" s") for line in lines):
        failures.append(f"{what}: no 'parallel section: T s' line")


def check_inject(exes, failures):
    for exe in exes:
        name = app_name(exe)
        proc = run([exe, "-p", "2", "--inject-error", "--json"])
        obj = parse_json(proc.stdout, failures, f"{name} --inject-error")
        if proc.returncode != 1:
            failures.append(f"{name} --inject-error: exit {proc.returncode}, expected 1")
        if obj is not None and (obj.get("result") != "FAIL" or not obj.get("failure")):
            failures.append(f"{name} --inject-error: result {obj.get('result')!r}, failure {obj.get('failure')!r}")
        proc = run([exe, "-p", "2", "--inject-error"])
        lines = proc.stdout.splitlines()
        if proc.returncode != 1 or not lines or not lines[-1].startswith("FAIL: "):
            failures.append(f"{name} --inject-error (text): exit {proc.returncode}, last line "
                            f"{lines[-1] if lines else ''!r}, expected 'FAIL: ...'")


def check_tsan(exes, failures):
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    for exe in exes:
        name = app_name(exe)
        proc = run([exe, "-p", "4"], env=env)
        if "FATAL: ThreadSanitizer" in proc.stderr:
            print(f"SKIP: ThreadSanitizer cannot run here ({name})")
            sys.exit(77)
        lines = proc.stdout.splitlines()
        if "WARNING: ThreadSanitizer" in proc.stderr or proc.returncode == 66:
            failures.append(f"{name} -p 4: ThreadSanitizer reports a race (see the log above)")
        elif proc.returncode != 0 or not lines or lines[-1] != "PASS":
            failures.append(f"{name} -p 4 under ThreadSanitizer: exit {proc.returncode}, last line "
                            f"{lines[-1] if lines else ''!r}")


def check_bad_args(exes, failures):
    cases = [(["--bogus"], "--bogus"), (["-p", "0"], "-p 0"), (["-p", "x"], "-p x"), (["-p"], "-p"),
             (["--size", "huge"], "--size huge"), (["--size"], "--size")]
    for exe in exes:
        name = app_name(exe)
        for args, named in cases:
            proc = run([exe] + args)
            err = [line for line in proc.stderr.splitlines() if line.strip()]
            if proc.returncode != 2:
                failures.append(f"{name} {' '.join(args)}: exit {proc.returncode}, expected 2")
            if len(err) != 1 or named not in err[0]:
                failures.append(f"{name} {' '.join(args)}: stderr {err!r}, expected one line naming {named!r}")
            if proc.stdout.strip():
                failures.append(f"{name} {' '.join(args)}: printed on stdout: {proc.stdout.strip()!r}")
        proc = run([exe, "--help"])
        if proc.returncode != 0 or "--size test|paper" not in proc.stdout:
            failures.append(f"{name} --help: exit {proc.returncode}, usage missing")


def main():
    args = sys.argv[1:]
    failures = []
    if args and args[0] == "--inject-error":
        check_inject(args[1:], failures)
    elif args and args[0] == "--tsan":
        check_tsan(args[1:], failures)
    elif args and args[0] == "--bad-args":
        check_bad_args(args[1:], failures)
    else:
        exe, threads, size = None, [1, 2, 4], "test"
        i = 0
        while i < len(args):
            if args[i] == "--threads":
                threads = [int(t) for t in args[i + 1].split(",")]
                i += 2
            elif args[i] == "--size":
                size = args[i + 1]
                i += 2
            else:
                exe = args[i]
                i += 1
        if exe is None:
            sys.exit("usage: run_app.py EXE [--threads 1,2,4] [--size test|paper]")
        check_runs(exe, threads, size, failures)
    if failures:
        print("FAILED:")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
