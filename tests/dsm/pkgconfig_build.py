#!/usr/bin/env python3
"""Builds a PARMACS program (tests/dsm/splash_sum.C) outside the meson build, the way a user
would: `pkg-config --cflags --libs iccs`, both routes (C header; m4 over the file named by
`pkg-config --variable=parmacs_m4 iccs`), against the uninstalled build tree and against a
`meson install --destdir` copy; then runs every program built on 2 clusters of 2 threads
(`iccs run PATH --transport direct`; the first also over iccs), each of which must exit 0 and print the sum that this test
computes itself from the program's generator (a known answer, not the program's own check).
Any compile, link or run error fails it, and so does a program that loads libcrypto or DPDK's
libraries at start (libcrypto is linked from its static archive, the iccs transport is a module
loaded for a run over iccs: dsm/meson.build); the first program also runs over iccs.
Usage: pkgconfig_build.py BUILD_DIR splash_sum.C ICCS_CLI"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ELEMENTS, SEED = 5000, 12345


def expected_sum(n, seed):
    """splash_sum's data: data[i] = (x >> 33) % 1000 for the 64-bit LCG x = x * 6364136223846793005
    + 1442695040888963407 (Knuth's MMIX constants), from x = seed; the sum of them."""
    total = 0
    for _ in range(n):
        seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        total += (seed >> 33) % 1000
    return total


def sh(cmd, env=None, cwd=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)


def pkg(env, *args):
    r = sh(["pkg-config", *args, "iccs"], env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: pkg-config {' '.join(args)} iccs: {r.stderr.strip()}")
    return r.stdout.split() if args[0] != "--variable=parmacs_m4" else r.stdout.strip()


def needed(exe):
    """The shared libraries the program names (DT_NEEDED)."""
    r = sh(["readelf", "-d", exe])
    if r.returncode != 0:
        raise SystemExit(f"FAIL: readelf -d {exe}: {r.stderr}")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout)


def build(label, env, src, work):
    """The programs built (one per route); raises SystemExit on any error."""
    flags = pkg(env, "--cflags", "--libs")
    m4file = pkg(env, "--variable=parmacs_m4")
    if not os.path.isfile(m4file):
        raise SystemExit(f"FAIL: {label}: parmacs_m4 = {m4file}: no such file")
    routes = {}
    hdr_c = os.path.join(work, f"{label}-hdr.c")
    shutil.copy(src, hdr_c)
    routes["header"] = (hdr_c, ["-include", "parmacs.h"])
    m4_c = os.path.join(work, f"{label}-m4.c")
    r = sh(["m4", "-Ulen", "-Uindex", m4file, src])
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {label}: m4: {r.stderr}")
    open(m4_c, "w").write(r.stdout)
    routes["m4"] = (m4_c, [])
    exes = []
    for route, (c_file, extra) in routes.items():
        obj = c_file + ".o"
        cflags = [f for f in flags if not f.startswith(("-l", "-L", "-Wl"))]
        r = sh(["cc", "-c", *extra, c_file, "-o", obj, *cflags])
        if r.returncode != 0:
            raise SystemExit(f"FAIL: {label} {route}: compile: cc -c {' '.join(extra)} {c_file} {' '.join(cflags)}\n{r.stderr}")
        exe = c_file + ".exe"
        r = sh(["cc", obj, "-o", exe, *flags])
        if r.returncode != 0:
            raise SystemExit(f"FAIL: {label} {route}: link: cc {obj} {' '.join(flags)}\n{r.stderr[-3000:]}")
        # libcrypto comes from its static archive and the iccs transport (DPDK) from its module
        # (dsm/meson.build): a cluster process's dynamic loader binds neither over direct.
        libs = needed(exe)
        if any(n.startswith(("libcrypto", "librte_")) for n in libs):
            raise SystemExit(f"FAIL: {label} {route}: the program loads libcrypto or DPDK at start (NEEDED {libs})")
        print(f"{label} {route}: compiled and linked with pkg-config --cflags --libs iccs (NEEDED: {' '.join(libs)})")
        exes.append((f"{label} {route}", exe))
    return exes


def run(cli, what, exe, transport="direct"):
    """The program on 2 clusters of 2 threads: exit 0 and the known sum, printed once."""
    cmd = [cli, "run", exe, "--clusters", "2", "--threads", "2", "--transport", transport, "--",
           "-p", "4", "-n", str(ELEMENTS), "-s", str(SEED)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    want = expected_sum(ELEMENTS, SEED)
    got = re.findall(r"^PASS sum=(-?\d+) ", r.stdout, re.M)
    print(f"{what}: {' '.join(cmd[1:])} -> exit {r.returncode}, sum {got} (known answer {want})")
    if r.returncode != 0 or got != [str(want)]:
        raise SystemExit(f"FAIL: {what}: exit {r.returncode}, printed sums {got}, want [{want}] once\n"
                         f"{r.stdout[-2000:]}{r.stderr[-2000:]}")


def main():
    build_dir, src, cli = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    exes = []
    with tempfile.TemporaryDirectory(prefix="iccs-pc-") as work:
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(build_dir, "meson-uninstalled"))
        exes += build("uninstalled", env, src, work)
        dest = os.path.join(work, "dest")
        r = sh(["meson", "install", "--no-rebuild", "-C", build_dir, "--destdir", dest])
        if r.returncode != 0:
            raise SystemExit(f"FAIL: meson install --destdir: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        pcs = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f == "iccs.pc"]
        if len(pcs) != 1:
            raise SystemExit(f"FAIL: installed iccs.pc not found under {dest}")
        pc_dir = os.path.dirname(pcs[0])
        prefix = pc_dir[: pc_dir.index("/lib")]
        env = dict(os.environ, PKG_CONFIG_PATH=pc_dir, PKG_CONFIG_SYSROOT_DIR="")
        # The destdir copy stands where --prefix would be: point pkg-config's prefix at it.
        env["PKG_CONFIG"] = "pkg-config"
        flags_env = dict(env)
        flags_env["PKG_CONFIG_PATH"] = pc_dir
        orig = open(pcs[0]).read()
        open(pcs[0], "w").write(re.sub(r"^prefix=.*$", f"prefix={prefix}", orig, flags=re.M))
        exes += build("installed", flags_env, src, work)
        for what, exe in exes:
            run(cli, what, exe)
        # Over iccs the program loads the transport's module (compute/rt_iccs_module.cpp).
        run(cli, exes[0][0] + " over iccs", exes[0][1], "iccs")
    print(f"PASS: {len(exes)} programs built with pkg-config ran on 2 clusters and printed the known sum "
          f"{expected_sum(ELEMENTS, SEED)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
