#!/usr/bin/env python3
"""First run (issue 31): `./iccs demo` in a fresh build directory configures and then builds only
the demo's targets (iccs-demo, the command line without the other commands, and the demo's
application), never the fuzz targets or the tests, nor the code of the commands the demo does not
run (the benchmarks of perf/, group/, Satin, the wide-area suite, iccs-cli itself), and shows a
progress line (targets done / all) while it builds.

Cheap for CI: the build directory is configured for real (meson setup into a scratch directory),
but `ninja` is a stand-in that records what it is asked to build; what those targets would build
is then asked of the real ninja (`ninja -n`), whose plan must hold iccs-demo and the water
application and no fuzz target, no test and no object of the other commands' code. The controls:
the plan of a whole build holds that code (and the fuzz targets when clang is there), so the check
can see them; the stand-in must have been asked for targets, not for everything.

usage: first_run.py SOURCE_DIR
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

src = os.path.abspath(sys.argv[1])
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


real_ninja = shutil.which("ninja")
if real_ninja is None:
    print("SKIP: no ninja")
    sys.exit(77)

with tempfile.TemporaryDirectory(prefix="iccs-first-run-") as tmp:
    build = os.path.join(tmp, "build")
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    record = os.path.join(tmp, "ninja-calls")
    fake = os.path.join(bindir, "ninja")
    with open(fake, "w") as f:
        f.write(f"""#!/bin/sh
# records its arguments; a dry run says there is work, a build pretends two steps
[ "$1" = "--version" ] && exec {real_ninja} --version
echo "$*" >> {record}
for a in "$@"; do [ "$a" = "-n" ] && {{ echo "[1/2] plan"; exit 0; }}; done
echo "[1/2] Compiling C++ object x.o"
echo "[2/2] Linking target y"
exit 0
""")
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
    env = dict(os.environ, ICCS_BUILD_DIR=build, PATH=bindir + os.pathsep + os.environ["PATH"])
    # meson setup runs ninja only to print its version: the stand-in answers that too.
    env["NINJA"] = real_ninja
    p = subprocess.run([os.path.join(src, "iccs"), "demo"], env=env, capture_output=True, text=True, timeout=600)
    print(p.stderr[-2000:])
    check(os.path.exists(os.path.join(build, "build.ninja")), "the demo configured a fresh build directory")
    calls = open(record).read().splitlines() if os.path.exists(record) else []
    builds = [c for c in calls if " -n" not in f" {c}" and c.startswith("-C")]
    print("ninja was asked:", calls)
    check(len(builds) == 1, "one build (not counting the dry run that says whether there is work)")
    targets = builds[0].split()[2:] if builds else []
    check(sorted(targets) == ["apps/iccs-app-water-dsm", "cli/iccs-demo"],
          f"the demo asked for its targets only: {targets}")
    check("building: 2/2 targets" in p.stderr, "a progress line, targets done / all")

    if targets:
        plan = subprocess.run([real_ninja, "-C", build, "-n", "-v"] + targets, capture_output=True, text=True,
                              timeout=300).stdout
        steps = [l for l in plan.splitlines() if l.startswith("[")]
        check(any("iccs-demo" in l for l in steps) and any("iccs-app-water-dsm" in l for l in steps),
              f"the plan of the demo's targets builds iccs-demo and the water application ({len(steps)} steps)")
        bad = [l for l in steps if "tests/" in l or "fuzz" in l]
        check(not bad, f"no fuzz target and no test among them ({bad[:3]})")
        # The other commands' code: the benchmarks, group/ (and Satin, the wide-area suite on it),
        # the MPI launcher and the rows of every program, all in iccs-cli.
        cold = ("perf/libiccs_perf", "group/libiccs_group", "libiccs_satin", "libiccs_widearea", "cli/iccs-cli")
        bad = [l for l in steps if any(c in l for c in cold)]
        check(not bad, f"no code of the commands the demo does not run ({bad[:3]})")
        whole = subprocess.run([real_ninja, "-C", build, "-n", "-v"], capture_output=True, text=True,
                               timeout=300).stdout
        whole_steps = [l for l in whole.splitlines() if l.startswith("[")]
        print(f"the demo's targets: {len(steps)} steps of a whole build's {len(whole_steps)}")
        check(len(steps) < len(whole_steps), "fewer steps than a whole build")
        check(all(any(c in l for l in whole_steps) for c in cold),
              "control: a whole build's plan holds each of those (so the check can see them)")
        if shutil.which("clang"):
            check(any("fuzz" in l for l in whole_steps), "control: a whole build's plan holds the fuzz targets")

    # The other commands build what they need when first used (the same build dir, the stand-in
    # ninja; their binary is then missing, so they stop after the build: only the request counts).
    for args, want in ((["bench", "rtt", "--help"], ["cli/iccs-cli"]),
                       (["bench", "dsm", "--help"], ["cli/iccs-cli", "perf/iccs-dsm-vs-argo"]),
                       (["bench", "mpi-collectives", "--help"], []),
                       (["run", "sor", "--help"], ["cli/iccs-cli"]),
                       (["run", "water", "--help"], ["apps/iccs-app-water-dsm", "cli/iccs-cli"]),
                       (["run", "./no-such-program", "--help"], ["cli/iccs-cli", "cli/iccs-run"])):
        open(record, "w").close()
        q = subprocess.run([os.path.join(src, "iccs")] + args, env=env, capture_output=True, text=True, timeout=120)
        calls = open(record).read().splitlines()
        builds = [c for c in calls if " -n" not in f" {c}" and c.startswith("-C")]
        asked = sorted(builds[-1].split()[2:]) if builds else None
        check(asked == sorted(want), f"./iccs {' '.join(args)} asked ninja for {want or 'everything'}: {asked} "
                                     f"({q.stderr.strip()[-300:]!r})")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("PASS: a fresh ./iccs demo builds the demo's command line and its application only, with a progress line")
