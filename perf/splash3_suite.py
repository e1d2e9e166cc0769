#!/usr/bin/env python3
"""splash3_suite.py: SPLASH-3's 14 programs built the suite's way twice (pthreads, and iccs with
dsm/parmacs.mk), run from each program's directory with the inputs its README names, the iccs
build by `iccs run ./PROGRAM --clusters C --threads T`, and compared with the pthread build:
results (the output lines that are not timings, as a multiset; outputs holding the same lines, one
printed a different number of times, count as the same results and the line is named: a print a
program guards with an unsynchronised flag, fft's FFt1DOnce; radiosity's statistics that its
task schedule decides, which differ between pthread runs too, are left out and their totals
printed; a difference is checked against up to two more runs of the pthread build, which has
races of its own, and a match says so), raytrace's and volrend's images, exit status,
whole-run wall time; under each program a line of the iccs run's parallel section (the program's
region of interest), the rest of the run (start-up, prefix, end) and DSM counters of all clusters. SPLASH-3 is never fetched here: give the directory of a copy you fetched
(its license forbids redistributing it). dsm/README.md, "SPLASH-3 over the DSM" (results: dsm/SPLASH3.md).

    perf/splash3_suite.py SPLASH_DIR [--out DIR] [--clusters 2] [--threads 1] [--transport direct]
                          [--timeout 900] [--runs 1] [--json FILE] [PROGRAM...]

With --runs N each program runs N times, the pthread build and the iccs run alternated (the
host's noise falls on both alike); the times printed are medians (the spread in brackets), the
ratio is the medians', every run's results are checked, and the counters are the last run's. The
last line counts the programs within 4x of their pthread build (issue 33's item 6).

SPLASH_DIR is the suite's top directory (holding codes/) or codes/ itself. The suite is copied
into OUT/pthread and OUT/iccs (OUT: /tmp/iccs-splash3-<pid> unless --out), so the fetched copy
is not touched; the iccs copy's Makefile.config gets the one line of the recipe. Exit status 0
when every program ran and gave the pthread build's results, 1 otherwise."""
import argparse
import os
import re
import shutil
import statistics
import json
import subprocess
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name, directory under codes/, binary, arguments (P: the processes), standard input, files it
# writes that are compared byte for byte (volrend's TIFFs but their directory's padding).
PROGRAMS = [
    ("fft", "kernels/fft", "FFT", "-pP -m16 -t", None, []),
    ("lu", "kernels/lu/contiguous_blocks", "LU", "-pP -n512 -t", None, []),
    ("lu-nc", "kernels/lu/non_contiguous_blocks", "LU", "-pP -n512 -t", None, []),
    ("radix", "kernels/radix", "RADIX", "-pP -n1048576 -t", None, []),
    ("cholesky", "kernels/cholesky", "CHOLESKY", "-pP -t", "inputs/tk15.O", []),
    ("barnes", "apps/barnes", "BARNES", "", "inputs/n16384-pP", []),
    ("fmm", "apps/fmm", "FMM", "", "inputs/input.P.16384", []),
    ("ocean", "apps/ocean/contiguous_partitions", "OCEAN", "-pP -n258", None, []),
    ("ocean-nc", "apps/ocean/non_contiguous_partitions", "OCEAN", "-pP -n258", None, []),
    ("radiosity", "apps/radiosity", "RADIOSITY", "-p P -ae 5000 -bf 0.1 -en 0.05 -room -batch", None, []),
    ("raytrace", "apps/raytrace", "RAYTRACE", "-pP -m64 inputs/teapot.env", None, ["inputs/teapot.rl"]),
    ("volrend", "apps/volrend", "VOLREND", "P inputs/head-scaleddown2 8", None,
     [f"inputs/head-scaleddown2_{1000 + k}" for k in range(24)]),
    ("water-nsq", "apps/water-nsquared", "WATER-NSQUARED", "", "inputs/n512-pP", []),
    ("water-sp", "apps/water-spatial", "WATER-SPATIAL", "", "inputs/n512-pP", []),
]
# Lines that are timings (CLOCK is seconds in the suite's macro file, microseconds in ours) or a
# per-process statistics table of them.
TIMING = re.compile(r"time|TIME|Time|COMPUTE|Elapsed|elapsed|^Step \d+:|fraction")


# Lines of statistics that the threads' schedule decides, so that two runs of the pthread build
# differ in them too: radiosity refines its mesh in the order its task queues run (elements
# 2668-2688 and ~118 lines of its histogram between pthread runs). They are left out of the
# comparison and their totals are printed beside the verdict; the other lines must be the same.
SCHEDULE_DEPENDENT = {
    "radiosity": re.compile(r"^\s+(\(Over 100\)|\d+)\s+\d+ \(|Total number of|completely (in)?visible|partially visible|"
                            r"Common for|Avg\. |equivalent uniform mesh|Elem\(hierarchical\)"),
}
SCHEDULE_TOTALS = {"radiosity": re.compile(r"Total number of (elements|interactions):\s*(\d+)")}


def schedule_totals(name, text):
    pat = SCHEDULE_TOTALS.get(name)
    return {m.group(1): m.group(2) for m in pat.finditer(text)} if pat else {}


def results(text, name=""):
    """The output's result lines, whitespace folded, sorted (threads print in any order), without
    the program's schedule-dependent statistics."""
    varies = SCHEDULE_DEPENDENT.get(name)
    out, skip = [], False
    for line in text.splitlines():
        if "PROCESS STATISTICS" in line or "itime" in line:  # a per-process timing table follows
            skip = True
            continue
        if skip:
            skip = line.strip() != "" or "TIMING INFORMATION" in line
            continue
        if line.strip() and not TIMING.search(line) and not (varies and varies.search(line)):
            out.append(" ".join(line.split()))
    return sorted(out)


def tiff_without_padding(path):
    """volrend's bundled libtiff (LP64) writes directory entries of 24 bytes whose bytes 4..7 are
    uninitialised: those are left out, every other byte counts."""
    b = bytearray(open(path, "rb").read())
    if len(b) < 16:
        return bytes(b)
    off = int.from_bytes(b[8:16], "little") if b[4:8] == b"\0\0\0\0" else int.from_bytes(b[4:8], "little")
    if off + 2 > len(b):
        return bytes(b)
    n = int.from_bytes(b[off:off + 2], "little")
    if n > 100 or off + 2 + 24 * n > len(b):
        return bytes(b)
    for i in range(n):
        e = off + 2 + 24 * i
        b[e + 4:e + 8] = b"\0\0\0\0"
    return bytes(b)


def same_file(name, a, b):
    if not (os.path.exists(a) and os.path.exists(b)):
        return False
    if name == "volrend":
        return tiff_without_padding(a) == tiff_without_padding(b)
    return open(a, "rb").read() == open(b, "rb").read()


def build(tree, env, icc_mk, prog):
    d = os.path.join(tree, prog[1])
    cmd = ["make", "-j2"] + ([f"ICCS_MK={icc_mk}"] if icc_mk else [])
    r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(os.path.join(d, prog[2])):
        return f"{' '.join(cmd)} failed in {d}:\n{r.stdout[-1500:]}{r.stderr[-1500:]}"
    return None


def run(tree, prog, p, launch, timeout, keep):
    """Runs the program from its directory (launch: [cli, run options...], or [] for the pthread
    build); returns (status, seconds, stdout, {file: copy})."""
    name, sub, exe, args, stdin, files = prog
    d = os.path.join(tree, sub)
    for f in files:
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    argv = args.replace("P", str(p)).split()
    cmd = ([launch[0], "run", f"./{exe}", *launch[1:], "--"] if launch else [f"./{exe}"]) + argv
    inp = open(os.path.join(d, stdin.replace("P", str(p)))) if stdin else subprocess.DEVNULL
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=d, stdin=inp, capture_output=True, text=True, errors="replace", timeout=timeout)
        status, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        status, out, err = "timeout", (e.stdout or b"").decode(errors="replace"), ""
    secs = time.monotonic() - t0
    copies = {}
    for f in files:
        src = os.path.join(d, f)
        if os.path.exists(src):
            copies[f] = os.path.join(keep, f"{name}.{os.path.basename(f)}")
            shutil.copy(src, copies[f])
    open(os.path.join(keep, f"{name}.out"), "w").write(out)
    open(os.path.join(keep, f"{name}.err"), "w").write(err)
    return status, secs, out, copies, err


# The DSM counters an iccs run prints on standard error (one block a cluster), summed over the
# clusters but homes_moved (the same at every cluster) and roi_us (cluster 0's region of
# interest: the parallel section, where the program marks one).
COUNTERS = ("write_faults", "page_fetches", "diffs_sent", "lock_requests", "barriers", "homes_moved", "roi_us")


def dsm_counters(err):
    vals = {k: [float(v) for v in re.findall(rf"\b{k} ([0-9.]+)", err)] for k in COUNTERS}
    return {k: (max(v, default=0) if k in ("homes_moved", "roi_us") else sum(v)) for k, v in vals.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("splash_dir")
    ap.add_argument("programs", nargs="*", help="names (default: all 14): " + " ".join(p[0] for p in PROGRAMS))
    ap.add_argument("--out", default=f"/tmp/iccs-splash3-{os.getpid()}")
    ap.add_argument("--clusters", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="compute threads per cluster")
    ap.add_argument("--transport", default="direct", choices=["direct", "iccs", "delay"])
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    # iccs-run: the launcher of programs given by path without DPDK (cli/README.md); any other
    # launcher of this command line can be given (build/cli/iccs-cli, an older build's).
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "cli", "iccs-run"))
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=1, help="runs of each build, alternated; medians")
    ap.add_argument("--json", help="write each program's times, ratio and counters to this file")
    a = ap.parse_intermixed_args()
    if a.runs < 1:
        sys.exit(f"splash3_suite: --runs {a.runs}: give 1 or more")
    codes = a.splash_dir if os.path.exists(os.path.join(a.splash_dir, "Makefile.config")) else \
        os.path.join(a.splash_dir, "codes")
    if not os.path.exists(os.path.join(codes, "Makefile.config")):
        sys.exit(f"splash3_suite: {a.splash_dir}: neither it nor its codes/ holds SPLASH-3's Makefile.config")
    unknown = set(a.programs) - {p[0] for p in PROGRAMS}
    if unknown:
        sys.exit(f"splash3_suite: unknown program(s) {' '.join(sorted(unknown))}")
    if not os.access(a.cli, os.X_OK):
        sys.exit(f"splash3_suite: {a.cli}: not built (run ./iccs once, e.g. ./iccs run --help, to build it)")
    a.cli, a.build_dir, a.out = (os.path.abspath(x) for x in (a.cli, a.build_dir, a.out))
    progs = [p for p in PROGRAMS if not a.programs or p[0] in a.programs]
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(a.build_dir, "meson-uninstalled"))
    icc_mk = subprocess.run(["pkg-config", "--variable=parmacs_mk", "iccs"], env=env, capture_output=True,
                            text=True).stdout.strip()
    if not os.path.isfile(icc_mk):
        sys.exit(f"splash3_suite: pkg-config --variable=parmacs_mk iccs gave {icc_mk!r} (build dir {a.build_dir})")
    p = a.clusters * a.threads
    trees = {}
    for kind in ("pthread", "iccs"):
        trees[kind] = os.path.join(a.out, kind)
        if not os.path.exists(trees[kind]):
            shutil.copytree(codes, trees[kind], symlinks=True)
            if kind == "iccs":
                with open(os.path.join(trees[kind], "Makefile.config"), "a") as f:
                    f.write("\n-include $(ICCS_MK)\n")
        os.makedirs(os.path.join(a.out, f"results-{kind}"), exist_ok=True)
    launch = [a.cli, "--clusters", str(a.clusters), "--threads", str(a.threads), "--transport", a.transport]
    print(f"splash3_suite: {len(progs)} programs, pthread build with {p} threads vs iccs run --clusters {a.clusters} "
          f"--threads {a.threads} --transport {a.transport}; trees and outputs under {a.out}", flush=True)
    print(f"{'program':10s} {'pthread s':>9s} {'iccs s':>9s} {'ratio':>6s}  result", flush=True)
    bad = 0
    ratios, report = {}, {}
    for prog in progs:
        why = build(trees["pthread"], env, None, prog) or build(trees["iccs"], env, icc_mk, prog)
        if why:
            print(f"{prog[0]:10s} BUILD FAILED: {why}", flush=True)
            bad += 1
            continue
        refs, gots = [], []
        for _ in range(a.runs):
            refs.append(run(trees["pthread"], prog, p, [], a.timeout, os.path.join(a.out, "results-pthread")))
            gots.append(run(trees["iccs"], prog, p, launch, a.timeout, os.path.join(a.out, "results-iccs")))
        verdicts, ok = [], True
        for ref, got in zip(refs, gots):
            verdict = []
            ra, rb = results(ref[2], prog[0]), results(got[2], prog[0])
            if set(ra) != set(rb):
                # The pthread build has races of its own (cholesky with 4 threads printed
                # "**** Termination error ***" and "Bad received" in 1 of 6 runs): before calling
                # the iccs run's results different, check them against up to two more pthread
                # runs, and say so. Their times are not used.
                for k in range(2):
                    again = run(trees["pthread"], prog, p, [], a.timeout, os.path.join(a.out, "results-pthread"))
                    r2 = results(again[2], prog[0])
                    if again[0] == 0 and set(r2) == set(rb):
                        ca, c2 = Counter(ra), Counter(r2)
                        first = [f"-{x}" for x in (ca - c2).elements()] + [f"+{x}" for x in (c2 - ca).elements()]
                        verdict.append(f"pthread run {k + 2} matched (the first pthread run differed from it in "
                                       f"{len(first)} lines, e.g. {' | '.join(sorted(set(first))[:2])})")
                        ref, ra = again, r2
                        break
            if ref[0] != 0:
                verdict.append(f"pthread build exited {ref[0]}")
            if got[0] != 0:
                verdict.append(f"iccs run exited {got[0]}")
            if ra == rb:
                verdict.append("same results")
            elif set(ra) == set(rb):
                # Every line of each output is in the other, only printed a different number of
                # times: a print the program guards with an unsynchronised flag (fft's FFt1DOnce
                # line, dsm/SPLASH3.md), whose count the threads' timing decides in the pthread
                # build too. The values are the same; the line is named, not hidden.
                ca, cb = Counter(ra), Counter(rb)
                diff = sorted(x for x in set(ra) if ca[x] != cb[x])
                verdict.append("same results")
                verdict.append(f"{len(diff)} line(s) printed a different number of times ("
                               + " | ".join(f"{x!r} {ca[x]} -> {cb[x]}" for x in diff[:2]) + ")")
            else:  # say which lines, so a timing line we do not know is told from a wrong result
                ca, cb = Counter(ra), Counter(rb)
                only = [f"-{x}" for x in (ca - cb).elements()] + [f"+{x}" for x in (cb - ca).elements()]
                verdict.append(f"results DIFFER ({len(only)} lines, e.g. {' | '.join(sorted(set(only))[:2])})")
            ta, tb = schedule_totals(prog[0], ref[2]), schedule_totals(prog[0], got[2])
            if ta or tb:
                verdict.append("schedule-dependent statistics left out (they vary between pthread runs too): "
                               + ", ".join(f"{k} {ta.get(k, '?')} -> {tb.get(k, '?')}" for k in sorted(set(ta) | set(tb))))
            ok_files = True
            if prog[5]:
                same = sum(same_file(prog[0], ref[3].get(f, ""), got[3].get(f, "")) for f in prog[5])
                verdict.append(f"images {same}/{len(prog[5])} identical")
                ok_files = same == len(prog[5])
            ok = ok and ref[0] == 0 and got[0] == 0 and "same results" in verdict and ok_files
            verdicts.append("; ".join(verdict))
        bad += not ok
        # the first run's verdict unless a later one differs from it
        verdict = verdicts[0] if len(set(verdicts)) == 1 else \
            " / ".join(f"run {i + 1}: {v}" for i, v in enumerate(verdicts))
        tp = statistics.median(r[1] for r in refs)
        ti = statistics.median(g[1] for g in gots)
        ratio = ti / tp if tp > 0 else float("inf")
        ratios[prog[0]] = ratio
        spread = lambda rs: f" [{min(r[1] for r in rs):.2f}-{max(r[1] for r in rs):.2f}]" if a.runs > 1 else ""
        print(f"{prog[0]:10s} {tp:9.2f} {ti:9.2f} {ratio:6.1f}  {verdict}"
              + (f"  (medians of {a.runs}: pthread{spread(refs)}, iccs{spread(gots)})" if a.runs > 1 else ""),
              flush=True)
        c = dsm_counters(gots[-1][4])
        roi = c.pop("roi_us") / 1e6
        print(f"{'':10s} iccs: {f'parallel section {roi:.2f} s, the rest (start-up, prefix, end) {gots[-1][1] - roi:.2f} s; ' if roi else ''}"
              + ", ".join(f"{k} {int(v)}" for k, v in c.items()), flush=True)
        report[prog[0]] = {"pthread_s": [r[1] for r in refs], "iccs_s": [g[1] for g in gots],
                           "pthread_median_s": tp, "iccs_median_s": ti, "ratio": ratio, "ok": ok,
                           "verdict": verdict, "parallel_section_s": roi, "counters": c}
    within = [n for n, r in ratios.items() if r <= 4.0]
    print(f"splash3_suite: {len(within)} of {len(ratios)} programs within 4x of their pthread build"
          + (f" ({' '.join(within)})" if within else ""), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"clusters": a.clusters, "threads": a.threads, "transport": a.transport,
                       "runs": a.runs, "programs": report}, f, indent=1)
    print(f"splash3_suite: {len(progs) - bad} of {len(progs)} programs gave the pthread build's results "
          f"(outputs: {a.out}/results-pthread, results-iccs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
