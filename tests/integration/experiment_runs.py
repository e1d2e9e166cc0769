#!/usr/bin/env python3
"""experiment_runs.py: `./iccs experiment NAME --quick` end to end (issue 9), through the runner
the `iccs` script calls (perf/experiments/runner.py), into a scratch results directory.

  latency    the CSV has size_bytes, median_us, p99_us (and the metadata lines), the JSON its
             meta/results/counters, the PNG exists; and the fragmentation step is in the CSV:
             median_us at 1501 bytes (2 frames) exceeds median_us at 1400 (1 frame) by more than
             the noise of neighbouring points = the largest |median_us difference| between two
             neighbouring sizes of the sweep with the same fragment count (this test computes it
             from the CSV itself, over the quick sweep 1000..1900).
  breakdown  every stage of the path is in the CSV, once, in path order, each duration >= 0 and
             starts laid end to end; the JSON and PNG exist; the sum of the stages is close to the
             median end-to-end time.
  errors     a bad flag and a bad value each stop with exit 2 and a message naming them.
Counters: hardware counters are null (unavailable) or numbers, never a made-up 0 on a host
whose probe said unavailable.
Usage: experiment_runs.py ICCS_CLI SOURCE_ROOT latency|breakdown|errors
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

CLI, ROOT, WHAT = sys.argv[1], sys.argv[2], sys.argv[3]
RUNNER = os.path.join(ROOT, "perf", "experiments", "runner.py")
failures = []

STAGES = ["convergence", "ring", "slidwin_send", "udp_send", "ip_send", "fabric", "ip_receive", "udp_receive",
          "slidwin_receive", "ring", "delivery"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def have_matplotlib():
    for py in (sys.executable, "/usr/bin/python3"):
        if os.access(py, os.X_OK) and subprocess.run([py, "-c", "import matplotlib"],
                                                     capture_output=True).returncode == 0:
            return True
    return False


def run(name, extra, out):
    cmd = [sys.executable, RUNNER, "--cli", CLI, name, "--quick", "--out", out] + extra
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    print(p.stdout)
    return p


def files(out, name):
    base = os.path.join(out, name)
    dirs = sorted(os.listdir(base)) if os.path.isdir(base) else []
    check(len(dirs) == 1, f"{name}: one timestamped directory under results/{name}/ ({dirs})")
    d = os.path.join(base, dirs[0]) if dirs else base
    paths = {ext: os.path.join(d, f"{name}.{ext}") for ext in ("csv", "json", "png")}
    for ext, p in paths.items():
        check(os.path.isfile(p) and os.path.getsize(p) > 0, f"{name}: {name}.{ext} written")
    return paths


def read_csv(path):
    with open(path, newline="") as f:
        lines = f.readlines()
    meta = [l for l in lines if l.startswith("#")]
    rows = list(csv.DictReader(l for l in lines if not l.startswith("#")))
    return meta, rows


def check_json_common(j, name):
    for k in ("meta", "results", "summary", "counters"):
        check(k in j, f"{name}: JSON has '{k}'")
    m = j.get("meta", {})
    for k in ("cores", "polling", "oversubscribed", "fit", "study_compute_threads"):
        check(k in m, f"{name}: JSON meta has '{k}'")
    src = j.get("counters", {}).get("sources", {})
    per_role = j.get("counters", {}).get("per_role", {})
    for role, c in per_role.items():
        for hw in ("cycles", "instructions", "llc_misses"):
            v = c.get(hw)
            if not src.get("perf_event_hardware"):
                check(v is None, f"{name}: {role} {hw} recorded as unavailable (null), not 0")
        if src.get("perf_event_software"):
            check(isinstance(c.get("task_clock_ns"), int) and c["task_clock_ns"] > 0,
                  f"{name}: {role} task_clock_ns counted ({c.get('task_clock_ns')})")


def latency(out):
    p = run("latency", [], out)
    check(p.returncode == 0, "latency: exit status 0")
    check("results: " in p.stdout, "latency: prints where the results are")
    check("time" in p.stdout or "left" in p.stdout, "latency: shows progress with the time left")
    paths = files(out, "latency")
    meta, rows = read_csv(paths["csv"])
    cols = rows[0].keys() if rows else []
    for c in ("size_bytes", "median_us", "p99_us"):
        check(c in cols, f"latency: CSV column {c}")
    check(any("oversubscribed" in l for l in meta) and any("cores" in l for l in meta),
          "latency: CSV metadata says cores and oversubscribed")
    pts = sorted(((int(r["size_bytes"]), float(r["median_us"]), float(r["p99_us"])) for r in rows))
    check(all(m > 0 and p99 >= m for _, m, p99 in pts), "latency: every median > 0 and p99 >= median")
    by = {s: m for s, m, _ in pts}
    check(1400 in by and 1501 in by, "latency: 1400 and 1501 bytes measured")
    # noise: neighbouring sizes with the same fragment count (1 frame up to 1400, 2 up to 2880)
    frag = lambda s: 1 if s <= 1400 else 2 if s <= 2880 else 3  # noqa: E731
    diffs = [abs(b[1] - a[1]) for a, b in zip(pts, pts[1:]) if frag(a[0]) == frag(b[0])]
    noise = max(diffs) if diffs else float("inf")
    if 1400 in by and 1501 in by:
        step = by[1501] - by[1400]
        print(f"step 1400 -> 1501: {by[1400]:.3f} -> {by[1501]:.3f} us = +{step:.3f} us; noise {noise:.3f} us")
        check(step > noise, f"latency: fragmentation step detected (+{step:.3f} us > noise {noise:.3f} us)")
    with open(paths["json"]) as f:
        j = json.load(f)
    check_json_common(j, "latency")
    check(j["summary"].get("fragment_boundaries_bytes", [None])[0] == 1400, "latency: JSON names the boundary 1400")


def breakdown(out):
    p = run("breakdown", [], out)
    check(p.returncode == 0, "breakdown: exit status 0")
    paths = files(out, "breakdown")
    _, rows = read_csv(paths["csv"])
    for c in ("stage", "start_us", "duration_us"):
        check(rows and c in rows[0], f"breakdown: CSV column {c}")
    check([r["stage"] for r in rows] == STAGES, f"breakdown: every stage, in path order ({[r['stage'] for r in rows]})")
    durs = [float(r["duration_us"]) for r in rows]
    starts = [float(r["start_us"]) for r in rows]
    check(all(d >= 0 for d in durs), f"breakdown: every duration >= 0 ({durs})")
    check(all(abs(starts[i + 1] - (starts[i] + durs[i])) < 0.01 for i in range(len(rows) - 1)),
          "breakdown: stages laid end to end (start = previous start + duration)")
    with open(paths["json"]) as f:
        j = json.load(f)
    check_json_common(j, "breakdown")
    s = j["summary"]
    check(s.get("negative_durations") == 0, f"breakdown: no round had a negative stage ({s.get('negative_durations')})")
    total, e2e = s["sum_of_stage_medians_us"], s["end_to_end_median_us"]
    # medians do not add exactly; a factor 2 either way would mean stages measure the wrong message
    check(0.5 * e2e <= total <= 2.0 * e2e, f"breakdown: sum of stages {total} us close to end to end {e2e} us")


def errors(out):
    for args, want in ((["latency", "--bogus"], "--bogus"), (["latency", "--step", "0"], "--step 0"),
                       (["breakdown", "--size", "5000"], "--size 5000"), (["nosuch"], "nosuch"),
                       (["latency", "--polling", "fast"], "fast")):
        p = subprocess.run([sys.executable, RUNNER, "--cli", CLI] + args + ["--out", out], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        check(p.returncode == 2 and want in p.stdout, f"errors: {' '.join(args)}: exit 2 naming '{want}' "
                                                      f"(got {p.returncode}: {p.stdout.strip()[:200]})")
    p = subprocess.run([sys.executable, RUNNER, "--cli", CLI, "latency", "--help"], stdout=subprocess.PIPE,
                       text=True, timeout=60)
    check(p.returncode == 0 and "--quick" in p.stdout and "--oversubscribe" in p.stdout, "errors: latency --help")


def main():
    if WHAT != "errors" and not have_matplotlib():
        print("SKIP: matplotlib is not installed (Debian package python3-matplotlib; ./iccs test installs it)")
        return 77
    out = tempfile.mkdtemp(prefix="iccs-exp-test-")
    try:
        {"latency": latency, "breakdown": breakdown, "errors": errors}[WHAT](out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
