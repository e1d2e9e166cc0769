#!/usr/bin/env python3
"""SPLASH-3 conformance: a SPLASH-style program of our own (tests/dsm/splash3/: a header with
declaration macros included before MAIN_ENV, a set-up file that G_MALLOCs before MAIN_INITENV and
writes `p = G_MALLOC(n)` without a semicolon, PAGE_SIZE, a 2 GiB G_MALLOC, a relative input file,
a title on standard input, and every other macro of the suite's pthread macro file) is built the
suite's way, outside the meson build, with `pkg-config --cflags --libs iccs`:
  REF  m4 over tests/dsm/splash3/pthreads_ref.m4 (plain pthreads in one process: the reference)
  M4   m4 over `pkg-config --variable=parmacs_m4 iccs` (the suite's route, .H -> .h and .C -> .c)
  HDR  the sources as C with `-include parmacs.h` (the header route)
Each is compiled with the suite's flags (-std=c11 -D_POSIX_C_SOURCE=200112) and -Wall -Werror.
Then, from a directory that is not the repository, `iccs run ./M4|./HDR --clusters C --threads T
--transport iccs|direct -- -p P` for 2x2 and 3x2: standard output must equal the pthread build's
byte for byte (the timing line and the threads' own lines aside, whose order no backend fixes),
every thread's line must arrive whole, nothing of the launcher may be on standard output, and the
launcher's report must be on standard error; with --report FILE, standard error is empty and FILE
holds the report as JSON. A usage error of the program (exit 2 in every cluster) is the run's
exit status.
The shapes program (tests/dsm/splash3/shapes.C: a global pointer one thread sets, a global counter
under a lock, bytes of one word written by threads of different clusters, five CREATEs without
WAIT_FOR_END and one after it, main's code after WAIT_FOR_END writing a file and freeing into
shared memory once) is built by m4, by the header, and by make the suite's way (a Makefile.config
of the suite's shape ending in `-include $(ICCS_MK)`, a program Makefile that adds its own -I
flag the source needs and builds a library in a sub-make, `make ICCS_MK=$(pkg-config
--variable=parmacs_mk iccs)`), run on 2x2 and 3x2 over direct and iccs: standard output equal to
the pthread build's, shapes.log written once.
Usage: splash3_conformance.py CLI BUILD_DIR SPLASH3_SOURCE_DIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The suite's own compiler flags (its Makefile.config), and every warning an error.
CFLAGS = ["-O2", "-pthread", "-D_XOPEN_SOURCE=500", "-D_POSIX_C_SOURCE=200112", "-std=c11", "-fno-strict-aliasing",
          "-Wall", "-Werror"]
SOURCES = ["conform.C", "conform_setup.C"]
HEADERS = ["conform.H"]
WORKER = re.compile(r"^worker (\d+) line ([0-2]): \.{139} end$")
# What the launcher and the clusters print about a run: never on the program's standard output.
LAUNCHER = re.compile(r"^(iccs run |iccs: |cluster \d+: |dsm cluster |  rt \d+\.|  proxy \d+\.|  thread \d+\.|PASS: every)",
                      re.M)


TITLE = "a title on standard input\n"  # the program echoes it: every cluster must get the same bytes


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def build(name, src_dir, work, env, macros=None, header_route=False, sources=SOURCES, headers=HEADERS):
    """Compiles the program into work/name/; returns the binary's path."""
    d = os.path.join(work, name)
    os.makedirs(d)
    cflags = sh(["pkg-config", "--cflags", "iccs"], env=env).stdout.split()
    libs = sh(["pkg-config", "--libs", "iccs"], env=env).stdout.split()
    if name.endswith("REF"):
        cflags, libs = [], []
    for f in sources + headers:
        out = os.path.join(d, f[:-2] + "." + f[-1].lower())  # conform.C -> conform.c, .H -> .h
        if header_route:
            shutil.copy(os.path.join(src_dir, f), out)
            continue
        r = sh(["m4", "-Ulen", "-Uindex", macros, os.path.join(src_dir, f)])
        if r.returncode != 0:
            fail(f"{name}: m4 {macros} {f}: {r.stderr}")
        open(out, "w").write(r.stdout)
    extra = ["-include", "parmacs.h"] if header_route else []
    exe = os.path.join(d, name)
    cmd = ["cc", *CFLAGS, *extra, *cflags, *[s[:-2] + ".c" for s in sources], "-o", exe, *libs, "-lm"]
    r = sh(cmd, cwd=d, env=env)
    if r.returncode != 0:
        fail(f"{name}: {' '.join(cmd)}\n{r.stderr[-4000:]}")
    print(f"built {name}: {'-include parmacs.h' if header_route else 'm4 ' + os.path.basename(macros)}, "
          f"{' '.join(CFLAGS)}")
    return exe


# The suite's Makefile.config, in its shape (our text), with the one line of the recipe at the end;
# a program Makefile that adds its own flags after including it and builds a library in a sub-make
# (radiosity's -I./glibdumb and glibdumb/glib.a), whose source needs the program's m4 header.
MAKEFILE_CONFIG = """CC := cc
CFLAGS := {cflags}
LDFLAGS := -lm
BASEDIR := $(shell dirname $(realpath $(lastword $(MAKEFILE_LIST))))
MACROS := $(BASEDIR)/pthreads_ref.m4
M4 := m4 -Ulen -Uindex

$(TARGET): $(OBJS) $(EXTRADEPS)
	$(CC) $(CFLAGS) -o $(TARGET) $(OBJS) $(LDFLAGS)

%.h: %.h.in
	$(M4) $(MACROS) $< > $@

%.c: %.c.in
	$(M4) $(MACROS) $< > $@

%.o: %.c $(EXTRADEPS)
	$(CC) -c $(CFLAGS) $<
-include $(ICCS_MK)
"""
PROGRAM_MAKEFILE = """TARGET = SHAPES
OBJS = shapes.o
include ../../Makefile.config
CFLAGS := $(CFLAGS) -I./extra
LOADLIBES = extra/extra.a

$(TARGET): $(OBJS) $(LOADLIBES)
	$(CC) $(OBJS) $(CFLAGS) $(LOADLIBES) -o $(TARGET) $(LDFLAGS)

shapes.o: shapes.h

extra/extra.a:
	$(MAKE) -C extra
"""
EXTRA_MAKEFILE = """OBJS = extra.o
TARGET = extra.a
include ../../../Makefile.config

$(TARGET): $(OBJS)
	ar crv $(TARGET) $(OBJS)
"""


def build_with_make(name, src_dir, work, env, iccs):
    """SHAPES built by make in a tree of the suite's shape: with ICCS_MK (iccs) or without (the
    pthread build of the same tree)."""
    codes = os.path.join(work, name, "codes")
    prog = os.path.join(codes, "apps", "shapes")
    os.makedirs(os.path.join(prog, "extra"))
    open(os.path.join(codes, "Makefile.config"), "w").write(MAKEFILE_CONFIG.format(cflags=" ".join(CFLAGS)))
    shutil.copy(os.path.join(src_dir, "pthreads_ref.m4"), codes)
    open(os.path.join(prog, "Makefile"), "w").write(PROGRAM_MAKEFILE)
    open(os.path.join(prog, "extra", "Makefile"), "w").write(EXTRA_MAKEFILE)
    # The program's source needs its own -I (extra/shapes_flags.h); the sub-make's source needs
    # the program's header made by m4 (so, on the iccs route, parmacs.h and its -I).
    open(os.path.join(prog, "extra", "shapes_flags.h"), "w").write("#define SHAPES_FLAGS_SEEN 1\n")
    open(os.path.join(prog, "extra", "extra.c"), "w").write(
        '#include "../shapes.h"\nint shapes_extra(void) { return SHAPES_FLAGS; }\n')
    open(os.path.join(prog, "shapes.h.in"), "w").write("EXTERN_ENV\n#define SHAPES_FLAGS 1\n")
    open(os.path.join(prog, "shapes.c.in"), "w").write(
        '#include "shapes_flags.h"\n' + open(os.path.join(src_dir, "shapes.C")).read())
    cmd = ["make"]
    if iccs:
        mk = sh(["pkg-config", "--variable=parmacs_mk", "iccs"], env=env).stdout.strip()
        if not os.path.isfile(mk):
            fail(f"pkg-config --variable=parmacs_mk iccs gave {mk!r}: no such file")
        cmd.append("ICCS_MK=" + mk)
    r = sh(cmd, cwd=prog, env=env)
    if r.returncode != 0:
        fail(f"{name}: {' '.join(cmd)} in {prog}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    if iccs and ("-I./extra" not in r.stdout or "parmacs.m4" not in r.stdout):
        fail(f"{name}: make did not keep the program's flags with ours:\n{r.stdout[-3000:]}")
    if iccs:
        # Linked against libiccs.a: make again is a no-op, and make as if the archive (iccs
        # rebuilt) were new relinks the program (parmacs.mk), not only what its objects changed.
        again = sh(cmd + ["-q"], cwd=prog, env=env)
        if again.returncode != 0:
            fail(f"{name}: make -q right after the build says the program is out of date:\n{again.stdout[-2000:]}")
        archive = sh(["pkg-config", "--variable=libiccs_archive", "iccs"], env=env).stdout.strip()
        if not os.path.isfile(archive):
            fail(f"pkg-config --variable=libiccs_archive iccs gave {archive!r}: no such file")
        relink = sh(cmd + ["-n", "-W", archive], cwd=prog, env=env)
        if "-o SHAPES" not in relink.stdout:
            fail(f"{name}: make did not relink the program when {archive} changed:\n{relink.stdout[-2000:]}")
    print(f"built {name}: make{' ICCS_MK=' + os.path.basename(cmd[-1]) if iccs else ''} in a tree of the suite's shape "
          f"(the program's -I./extra and its sub-make kept)")
    return os.path.join(prog, "SHAPES")


def split_output(out, nprocs, label):
    """(the lines every backend prints alike, the workers' lines); checks the workers' lines."""
    same, seen = [], set()
    for line in out.splitlines():
        if line.startswith("worker "):
            m = WORKER.match(line)
            if not m:
                fail(f"{label}: a thread's line did not arrive whole: {line[:200]!r}")
            seen.add((int(m.group(1)), int(m.group(2))))
        elif not line.startswith("time "):
            same.append(line)
    want = {(p, k) for p in range(nprocs) for k in range(3)}
    if seen != want:
        fail(f"{label}: threads' lines: missing {sorted(want - seen)[:6]}, unexpected {sorted(seen - want)[:6]}")
    return "\n".join(same)


def shapes(cli, src_dir, work, env, m4file):
    """The shapes program: every build's output equal to the pthread build's; the epilogue once."""
    one = {"sources": ["shapes.C"], "headers": []}
    ref = build("SHAPES-REF", src_dir, work, env, macros=os.path.join(src_dir, "pthreads_ref.m4"), **one)
    bins = {"SHAPES-M4": build("SHAPES-M4", src_dir, work, env, macros=m4file, **one),
            "SHAPES-HDR": build("SHAPES-HDR", src_dir, work, env, header_route=True, **one),
            "SHAPES-MK": build_with_make("SHAPES-MK", src_dir, work, env, iccs=True)}
    mk_ref = build_with_make("SHAPES-MKREF", src_dir, work, env, iccs=False)
    run_dir = os.path.join(work, "run-shapes")
    os.makedirs(run_dir)
    log = os.path.join(run_dir, "shapes.log")
    refs = {}
    for p in (4, 6):
        for exe in (ref, mk_ref):
            if os.path.exists(log):
                os.remove(log)
            r = sh([exe, "-p", str(p)], cwd=run_dir, timeout=120)
            if r.returncode != 0 or not r.stdout.rstrip().endswith("PASS"):
                fail(f"the pthread build of shapes failed at -p {p}: exit {r.returncode}\n{r.stdout}{r.stderr}")
            if refs.get(p, r.stdout) != r.stdout:
                fail(f"shapes: the pthread builds by m4 and by make differ:\n{refs[p]}\n{r.stdout}")
            refs[p] = r.stdout
    for (b, clusters, transport) in (("SHAPES-M4", 2, "direct"), ("SHAPES-HDR", 3, "direct"), ("SHAPES-MK", 2, "iccs"),
                                     ("SHAPES-M4", 3, "iccs")):
        if os.path.exists(log):
            os.remove(log)
        p = clusters * 2
        label = f"{b} {clusters}x2 {transport}"
        r = sh([cli, "run", bins[b], "--clusters", str(clusters), "--threads", "2", "--transport", transport, "--",
                "-p", str(p)], cwd=run_dir, timeout=300)
        if r.returncode != 0 or r.stdout != refs[p]:
            fail(f"{label}: exit {r.returncode}, standard output\n{r.stdout}\n--- the pthread build's\n{refs[p]}"
                 f"\n--- stderr\n{r.stderr[-3000:]}")
        lines = open(log).read().splitlines() if os.path.exists(log) else []
        if lines != [f"epilogue of a run of {p} processes"]:
            fail(f"{label}: main's code after WAIT_FOR_END ran {len(lines)} times (shapes.log: {lines})")
        print(f"{label}: PASS, standard output identical to the pthread build's (-p {p}), shapes.log written once")


def main():
    cli, build_dir, src_dir = (os.path.abspath(a) for a in sys.argv[1:4])
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(build_dir, "meson-uninstalled"))
    m4file = sh(["pkg-config", "--variable=parmacs_m4", "iccs"], env=env).stdout.strip()
    if not os.path.isfile(m4file):
        fail(f"pkg-config --variable=parmacs_m4 iccs gave {m4file!r}: no such file")
    with tempfile.TemporaryDirectory(prefix="iccs-splash3-") as work:
        ref = build("REF", src_dir, work, env, macros=os.path.join(src_dir, "pthreads_ref.m4"))
        bins = {"M4": build("M4", src_dir, work, env, macros=m4file),
                "HDR": build("HDR", src_dir, work, env, header_route=True)}
        # The run directory: neither the repository nor the build; the input is relative to it.
        run_dir = os.path.join(work, "run")
        os.makedirs(os.path.join(run_dir, "inputs"))
        with open(os.path.join(run_dir, "inputs", "conform.in"), "w") as f:
            n = 5000
            f.write(f"{n}\n" + " ".join(str((i * 7919 + 13) % 1000) for i in range(n)) + "\n")
        for b in list(bins):
            shutil.copy(bins[b], os.path.join(run_dir, b))
        refs = {}
        for p in (4, 6):
            r = sh([ref, "-p", str(p)], cwd=run_dir, timeout=120, input=TITLE)
            if r.returncode != 0 or "PASS" not in r.stdout or "title: " + TITLE not in r.stdout:
                fail(f"the pthread build itself failed at -p {p}: exit {r.returncode}\n{r.stdout}{r.stderr}")
            refs[p] = split_output(r.stdout, p, f"REF -p {p}")
        print("pthread build: PASS at -p 4 and -p 6")

        def run(b, clusters, threads, transport, extra=(), args=None):
            p = clusters * threads
            cmd = [cli, "run", "./" + b, "--clusters", str(clusters), "--threads", str(threads),
                   "--transport", transport, *extra, "--", *(args or ["-p", str(p)])]
            return p, sh(cmd, cwd=run_dir, timeout=300, input=TITLE)

        for b in ("M4", "HDR"):
            for clusters, threads in ((2, 2), (3, 2)):
                for transport in ("iccs", "direct"):
                    label = f"{b} {clusters}x{threads} {transport}"
                    p, r = run(b, clusters, threads, transport)
                    if r.returncode != 0:
                        fail(f"{label}: exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")
                    if LAUNCHER.search(r.stdout):
                        fail(f"{label}: the launcher's report is on the program's standard output: "
                             f"{LAUNCHER.search(r.stdout).group(0)!r}\n{r.stdout[-2000:]}")
                    got = split_output(r.stdout, p, label)
                    if got != refs[p]:
                        fail(f"{label}: standard output differs from the pthread build's:\n--- iccs\n{got}\n"
                             f"--- pthreads\n{refs[p]}")
                    if "runtime over" not in r.stderr or "dsm cluster" not in r.stderr:
                        fail(f"{label}: the launcher's report is not on standard error:\n{r.stderr[-2000:]}")
                    print(f"{label}: PASS, standard output identical to the pthread build's (-p {p}), "
                          f"{3 * p} thread lines whole, the report on standard error")

        # --report FILE: nothing of the launcher on standard error; the report in the file.
        report = os.path.join(work, "report.json")
        p, r = run("M4", 3, 2, "iccs", extra=["--report", report])
        if r.returncode != 0 or split_output(r.stdout, p, "--report") != refs[p]:
            fail(f"--report: exit {r.returncode} or standard output differs\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        if r.stderr.strip():
            fail(f"--report: standard error is not empty:\n{r.stderr[-2000:]}")
        j = json.load(open(report))
        want = {"program": "./M4", "args": ["-p", "6"], "clusters": 3, "cluster_size": 2, "transport": "iccs",
                "result": "PASS", "exit_status": 0}
        for k, v in want.items():
            if j.get(k) != v:
                fail(f"--report: {k} = {j.get(k)!r}, expected {v!r}")
        if not (j["rt"]["msgs"] > 0 and j["dsm"]["page_fetches"] > 0 and len(j["iccs"]["proxies"]) == 6
                and len(j["rt_per_cluster"]) == 3 and len(j["dsm_per_cluster"]) == 3):
            fail(f"--report: counters missing: {json.dumps(j)[:1500]}")
        print(f"--report FILE: standard error empty, standard output unchanged, FILE has the run "
              f"({j['rt']['msgs']} runtime messages, {len(j['iccs']['proxies'])} proxies, "
              f"{j['dsm']['page_fetches']} page fetches)")

        # The program's exit status is the run's: a usage error (exit 2 in every cluster).
        _, r = run("M4", 2, 2, "direct", args=["-p", "99"])
        if r.returncode != 2 or "usage: CONFORM" not in r.stderr:
            fail(f"exit status: the program exited 2, the run {r.returncode}\n{r.stderr[-2000:]}")
        print("exit status: the program's usage error (2) is the run's")

        shapes(cli, src_dir, work, env, m4file)

        # An application of apps/: its own lines on standard output, the report on standard error.
        r = sh([cli, "run", "jacobi", "--transport", "direct"], cwd=run_dir, timeout=300)
        if (r.returncode != 0 or not r.stdout.rstrip().endswith("PASS") or LAUNCHER.search(r.stdout)
                or "jacobi: PASS, parallel section" not in r.stderr):
            fail(f"run jacobi: exit {r.returncode}\n--- stdout\n{r.stdout[-2000:]}\n--- stderr\n{r.stderr[-2000:]}")
        print("run jacobi: the application's lines on standard output, the report on standard error")
    print("PASS")


if __name__ == "__main__":
    main()
