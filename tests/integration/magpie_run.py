#!/usr/bin/env python3
"""libiccs-magpie.so under real mpirun over Open MPI's own TCP path (issue 36).

Usage: magpie_run.py MODE [OPTIONS]

  check   --binary PROG [--preload LIB] --sites SPEC --ranks N [--btl tcp,self] [--counts C,..]
          [--comms world,...] [--placement sites|machine|hosts] [--segment-bytes N]
          [--blocks N] [--wan-allreduce N]
          tests/mpi/magpie_check.c on N ranks: every rank must report 0 failures; the report
          summed over the ranks (ICCS_MAGPIE_REPORT as JSON) must show every collective called
          and none passed through (but the inter-communicator's), wan_bytes == wan_bytes_min
          and wan_hops_max <= 1 for each (MagPIe's two rules; allreduce and reduce by blocks over 3
          or more sites: wan_hops_max 2, and exactly 2 when their longest sum of ints reaches the
          switch point), wide-area traffic exactly when there is more than one site, and one counters
          file per rank. --segment-bytes and --blocks set ICCS_MAGPIE_SEGMENT_BYTES and
          ICCS_MAGPIE_BLOCKS_BYTES; --wan-allreduce N: one more allreduce of N ints on
          MPI_COMM_WORLD whose wide-area bytes must be exactly 2 (S - 1) x 4N by blocks (S >= 3 sites,
          4N at least the switch point), else S (S - 1) x 4N (every site's partial to every other),
          and a reduce of them to rank 0: (S - 1) x 4N plus the other sites' blocks by blocks, else
          (S - 1) x 4N. SITE:CLUSTER specs of --wan-allreduce: entries only (no bare SITE).
  sweep   --binary PROG [--counts ...]: check over every shape of 1..4 sites x 1..3 clusters x 1..2
          ranks (SxCxR).
  bad     --binary PROG --bad root|count|coll|skip: a mismatched call (or a rank that skips one)
          must end the job with a non-zero status and an iccs-magpie error naming the call,
          within ICCS_MAGPIE_TIMEOUT_MS plus a margin: never a hang.
  Over the iccs provider (--provider DIR: mpi/provider/'s build directory): pml cm, mtl ofi, the
  ranks placed by a machine file whose proxies emulate the WAN between the sites (--wan-latency-ms,
  --wan-bandwidth, --wan-loss: frames lost on the WAN links, which slidwin recovers).
  relink  --lib-dir DIR --pc-dir DIR: the documented line `mpicc prog.c -o prog $(pkg-config
          --libs iccs-magpie)` (from the build tree) gives a program whose collectives are the
          library's, and `ICCS_MAGPIE=off` hands them all to MPI.

Skipped (exit 77) when mpirun or mpicc is missing.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

COLLS = ["barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv", "allgather",
         "allgatherv", "alltoall", "alltoallv", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"]
# The library's default ICCS_MAGPIE_BLOCKS_BYTES (mpi/magpie/magpie.hpp, Settings).
BLOCKS_DEFAULT = 16384
# Collectives whose data crosses sites whenever there are two (barrier carries none).
DATA_COLLS = [c for c in COLLS if c != "barrier"]


def fail(msg, out=""):
    if out:
        print(out[-20000:])
    print("FAIL:", msg)
    sys.exit(1)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def mpirun_base(ranks, btl, provider=""):
    if shutil.which("mpirun") is None:
        skip("mpirun not found (Debian package openmpi-bin)")
    # As root (CI), Open MPI wants to be told; oversubscribe: more ranks than this host's cores.
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)]
    if provider:  # the iccs provider (mpi/provider/): Open MPI's cm PML and ofi MTL
        if not os.path.exists(os.path.join(provider, "libiccs-fi.so")):
            skip(f"the iccs provider is not built ({provider}/libiccs-fi.so)")
        return cmd + ["--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "iccs",
                      "-x", f"FI_PROVIDER_PATH={provider}", "-x", f"ICCS_RUN_ID=mg{os.getpid()}"]
    return cmd + ["--mca", "pml", "ob1", "--mca", "btl", btl, "--mca", "btl_tcp_if_include", "lo"]


def shape_ranks(spec):
    """Ranks of an ICCS_SITES spec: SxCxR or one entry per rank."""
    if "x" in spec:
        s, c, r = (int(v) for v in spec.split("x"))
        return s * c * r, s
    entries = [e for e in spec.replace(",", " ").split() if e]
    return len(entries), len({e.split(":")[0] for e in entries})


def clusters_by_site(spec):
    """The clusters of each site of an ICCS_SITES spec (SxCxR, or SITE:CLUSTER per rank), site by
    site in the order of their lowest rank."""
    if "x" in spec:
        s, c, _ = (int(v) for v in spec.split("x"))
        return {site: list(range(site * c, site * c + c)) for site in range(s)}
    out = {}
    for e in (e for e in spec.replace(",", " ").split() if e):
        site, cluster = e.split(":")
        if cluster not in out.setdefault(site, []):
            out[site].append(cluster)
    return out


def machine_file(path, spec, a):
    """A machine file placing the ranks of SxCxR as `iccs run --mpi` would (and, over the provider,
    its proxies and the WAN emulation between the sites)."""
    s, c, r = (int(v) for v in spec.split("x"))
    sites = ", ".join(str(k // c) for k in range(s * c))
    lines = [f"[machine]", f"clusters = {s * c}", "[cluster]", f"compute_threads = {r}"]
    if a.provider:
        lines += ["proxies = 1", 'polling = "adaptive"', "peer_timeout_ms = 60000"]
    lines += ["[wan]", f"sites = [{sites}]"]
    if a.provider:
        lines += [f"latency_ms = {a.wan_latency_ms}", f"bandwidth_bytes_per_s = {a.wan_bandwidth}", f"loss = {a.wan_loss}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run_check(a, spec, tmp):
    ranks, sites = shape_ranks(spec)
    report = os.path.join(tmp, "report.json")
    counters = os.path.join(tmp, "counters")
    for f in glob.glob(counters + ".r*") + [report]:
        if os.path.exists(f):
            os.remove(f)
    env = {"ICCS_MAGPIE_REPORT": report, "ICCS_MAGPIE_COUNTERS_FILE": counters, "ICCS_MAGPIE_TIMEOUT_MS": "120000"}
    if a.placement == "sites":
        env["ICCS_SITES"] = spec
    elif a.placement == "machine":
        mf = os.path.join(tmp, "machine.toml")
        machine_file(mf, spec, a)
        env["ICCS_CONFIG"] = mf
    if a.preload:
        env["LD_PRELOAD"] = a.preload
    if a.segment_bytes:
        env["ICCS_MAGPIE_SEGMENT_BYTES"] = a.segment_bytes
    if a.blocks:
        env["ICCS_MAGPIE_BLOCKS_BYTES"] = a.blocks
    cmd = mpirun_base(ranks, a.btl, a.provider)
    for k, v in env.items():
        cmd += ["-x", f"{k}={v}"]
    cmd += [a.binary, "--counts", a.counts]
    if a.comms:
        cmd += ["--comms", a.comms]
    if a.wan_allreduce:
        cmd += ["--wan-allreduce", a.wan_allreduce]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=a.timeout,
                       env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    took = time.time() - t0
    out = p.stdout
    if p.returncode != 0:
        fail(f"{spec}: mpirun exited {p.returncode}", out)
    done = [l for l in out.splitlines() if l.startswith("magpie_check rank")]
    if len(done) != ranks or any(not l.endswith(" 0 failures") for l in done):
        fail(f"{spec}: not every rank reported 0 failures", out)
    if any(int(l.split(": ")[1].split()[0]) == 0 for l in done):
        fail(f"{spec}: a rank checked nothing", out)
    try:
        with open(report) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{spec}: no report from the library ({e}): was it linked or preloaded?", out)
    files = glob.glob(counters + ".r*")
    if len(files) != ranks:
        fail(f"{spec}: {len(files)} counters files for {ranks} ranks", out)
    want_placement = {"sites": "ICCS_SITES", "machine": "machine file", "hosts": "host names"}[a.placement]
    if not rep["placement"].startswith(want_placement):
        fail(f"{spec}: placement from {rep['placement']}, expected {want_placement}", out)
    colls = rep["collectives"]
    sites = 1 if a.placement == "hosts" else sites
    # Allreduce and reduce by blocks (3 or more sites, vectors from the switch point on) pass
    # reduced blocks over a second wide-area link by design; the longest sum of ints of
    # MPI_COMM_WORLD takes it for sure when it reaches the switch point (others may too).
    blocks_at = int(a.blocks) if a.blocks else BLOCKS_DEFAULT
    by_blocks = lambda nbytes: sites >= 3 and blocks_at > 0 and nbytes >= blocks_at
    longest = max(int(c) for c in a.counts.split(","))
    if a.wan_allreduce:
        n = int(a.wan_allreduce)
        # By blocks: each site's partial less its own block to the other sites (S - 1 vectors),
        # then the reduced blocks (allreduce: each to the S - 1 other sites; reduce to rank 0: the
        # blocks of the sites but rank 0's to its site). Block of site t: its share of every lane,
        # the lanes as many as the fewest clusters of a site (pieces of at least the segment).
        seg = int(a.segment_bytes) if a.segment_bytes else 16384
        lanes = min(len(k) for k in clusters_by_site(spec).values())
        lanes = 1 if seg == 0 else max(1, min(lanes, 4 * n // seg, n))
        share = [0] * sites
        for lane in range(lanes):
            ln = n // lanes + (lane < n % lanes)
            for t in range(sites):
                share[t] += ln // sites + (t < ln % sites)
        want = {"allreduce": (2 * (sites - 1) if by_blocks(4 * n) else sites * (sites - 1)) * 4 * n,
                "reduce": ((sites - 1) * n + n - share[0]) * 4 if by_blocks(4 * n) else (sites - 1) * 4 * n}
        for coll, w in want.items():
            got = [l for l in out.splitlines() if l.startswith(f"magpie_check {coll} {n} wan_bytes ")]
            if len(got) != 1 or int(got[0].split()[-1]) != w:
                fail(f"{spec}: {coll} of {n} ints moved {got[0].split()[-1] if got else 'no report of'} wide-area "
                     f"bytes, expected exactly {w}", out)
    for name in COLLS:
        k = colls[name]
        if k["calls"] == 0:
            fail(f"{spec}: {name} was never run by the library", out)
        inter = name in ("allreduce", "barrier") and ranks >= 2  # the inter-communicator's calls
        if k["passthrough"] != (ranks if inter else 0):
            fail(f"{spec}: {name} passed through {k['passthrough']} times", out)
        if k["wan_bytes"] != k["wan_bytes_min"]:
            fail(f"{spec}: {name}: wan_bytes {k['wan_bytes']} != wan_bytes_min {k['wan_bytes_min']} (MagPIe's rule 2)", out)
        blocks = name in ("allreduce", "reduce")
        hops_max = 2 if blocks and sites >= 3 and blocks_at > 0 else 1
        if k["wan_hops_max"] > hops_max:
            fail(f"{spec}: {name}: a message behind {k['wan_hops_max']} wide-area links (MagPIe's rule 1)", out)
        if blocks and by_blocks(4 * longest) and k["wan_hops_max"] != 2:
            fail(f"{spec}: {name}: wan_hops_max {k['wan_hops_max']}: the long vectors did not go by blocks", out)
        crossed = k["wan_bytes"] > 0
        if name in DATA_COLLS and crossed != (sites > 1):
            fail(f"{spec}: {name}: wan_bytes {k['wan_bytes']} with {sites} site(s)", out)
        if sites > 1 and k["wan_hops_max"] not in (1, hops_max):
            fail(f"{spec}: {name}: wan_hops_max {k['wan_hops_max']} over {sites} sites", out)
    if ranks >= 2 and rep["passthrough"]["intercomm"] != 2 * ranks:
        fail(f"{spec}: {rep['passthrough']['intercomm']} inter-communicator pass-throughs, expected {2 * ranks}", out)
    print(f"{spec}: {ranks} ranks, {sites} site(s), placement {rep['placement']}: every rank 0 failures, "
          f"MagPIe's rules hold for all {len(COLLS)} collectives ({took:.1f} s)", flush=True)


def cmd_check(a):
    with tempfile.TemporaryDirectory(prefix="iccs-magpie-") as tmp:
        run_check(a, a.sites, tmp)
    print("PASS")


def cmd_sweep(a):
    shapes = [f"{s}x{c}x{r}" for s in range(1, 5) for c in range(1, 4) for r in range(1, 3)]
    with tempfile.TemporaryDirectory(prefix="iccs-magpie-") as tmp:
        for spec in shapes:
            run_check(a, spec, tmp)
    print("PASS:", len(shapes), "shapes")


def cmd_bad(a):
    timeout_ms = 3000
    cmd = mpirun_base(4, a.btl) + ["-x", "ICCS_SITES=2x1x2", "-x", f"ICCS_MAGPIE_TIMEOUT_MS={timeout_ms}"]
    if a.preload:
        cmd += ["-x", f"LD_PRELOAD={a.preload}"]
    cmd += [a.binary, "--bad", a.bad]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=50)
    except subprocess.TimeoutExpired as e:
        fail(f"--bad {a.bad}: still running after 50 s (a hang)", (e.stdout or b"").decode(errors="replace"))
    took = time.time() - t0
    if p.returncode == 0:
        fail(f"--bad {a.bad}: the job succeeded", p.stdout)
    # Whichever rank notices first reports: the call it is in, or the later call in which the
    # mismatched call's message arrives (e.g. "MPI_Barrier ...: rank 1 sent a message of another
    # call (MPI_Bcast ...)"); either way the line names the mismatched collective.
    want = {"root": "MPI_Bcast", "count": "MPI_Allreduce", "coll": "MPI_", "skip": "MPI_Allreduce"}[a.bad]
    lines = [l for l in p.stdout.splitlines() if l.startswith("iccs-magpie: MPI_") and want in l]
    if not lines:
        fail(f"--bad {a.bad}: no iccs-magpie error naming {want}", p.stdout)
    if a.bad == "skip" and "ICCS_MAGPIE_TIMEOUT_MS" not in lines[0]:
        fail("--bad skip: the error does not name the time-out", p.stdout)
    print(f"--bad {a.bad}: exit {p.returncode} after {took:.1f} s: {lines[0]}")
    print("PASS")


PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int r, n, sum = 0, x;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    x = r + 1;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(&sum, 1, MPI_INT, n - 1, MPI_COMM_WORLD);
    if (sum != n * (n + 1) / 2) { printf("rank %d: wrong sum %d\n", r, sum); return 1; }
    MPI_Finalize();
    return 0;
}
"""


def cmd_relink(a):
    if shutil.which("mpicc") is None:
        skip("mpicc not found (Debian package libopenmpi-dev)")
    with tempfile.TemporaryDirectory(prefix="iccs-magpie-") as tmp:
        src = os.path.join(tmp, "prog.c")
        with open(src, "w") as f:
            f.write(PROGRAM)
        env = dict(os.environ, PKG_CONFIG_PATH=a.pc_dir)
        # The documented line, through a shell as a user types it.
        line = f"mpicc {src} -o {tmp}/prog $(pkg-config --libs iccs-magpie)"
        p = subprocess.run(["sh", "-c", line], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            fail(f"`{line}` failed", p.stdout)
        ldd = subprocess.run(["ldd", f"{tmp}/prog"], stdout=subprocess.PIPE, text=True).stdout
        if os.path.join(a.lib_dir, "libiccs-magpie.so") not in ldd:
            fail("the program does not load libiccs-magpie.so from the build tree (no run path?)", ldd)
        for off in ("on", "off"):
            report = os.path.join(tmp, f"report-{off}.json")
            cmd = mpirun_base(3, a.btl) + ["-x", "ICCS_SITES=0:0,1:1,1:1", "-x", f"ICCS_MAGPIE={off}",
                                           "-x", f"ICCS_MAGPIE_REPORT={report}", f"{tmp}/prog"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            if p.returncode != 0:
                fail(f"the relinked program failed (ICCS_MAGPIE={off})", p.stdout)
            with open(report) as f:
                rep = json.load(f)["collectives"]
            calls = rep["allreduce"]["calls"] + rep["bcast"]["calls"]
            passed = rep["allreduce"]["passthrough"] + rep["bcast"]["passthrough"]
            if (off == "on" and (calls != 6 or passed != 0)) or (off == "off" and (calls != 0 or passed != 6)):
                fail(f"ICCS_MAGPIE={off}: {calls} calls by the library, {passed} passed through", json.dumps(rep))
            print(f"`{line}`; ICCS_MAGPIE={off}: {calls} calls by the library, {passed} passed to MPI")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["check", "sweep", "bad", "relink"])
    ap.add_argument("--binary")
    ap.add_argument("--preload", default="")
    ap.add_argument("--sites", default="2x2x2")
    ap.add_argument("--btl", default="tcp,self")
    ap.add_argument("--counts", default="0,1,7,5000")
    ap.add_argument("--comms", default="")
    ap.add_argument("--placement", default="sites", choices=["sites", "machine", "hosts"])
    ap.add_argument("--bad", default="root")
    ap.add_argument("--lib-dir", default="")
    ap.add_argument("--pc-dir", default="")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--provider", default="", help="over the iccs provider in DIR (placement from the machine file)")
    ap.add_argument("--wan-latency-ms", default="5")
    ap.add_argument("--wan-bandwidth", default="0")
    ap.add_argument("--wan-loss", default="0")
    ap.add_argument("--segment-bytes", default="", help="ICCS_MAGPIE_SEGMENT_BYTES")
    ap.add_argument("--blocks", default="", help="ICCS_MAGPIE_BLOCKS_BYTES")
    ap.add_argument("--wan-allreduce", default="", help="one more allreduce of N ints; its WAN bytes checked exactly")
    a = ap.parse_args()
    if a.provider:
        a.placement = "machine"  # the provider reads the machine file; so does the library
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    {"check": cmd_check, "sweep": cmd_sweep, "bad": cmd_bad, "relink": cmd_relink}[a.mode](a)


if __name__ == "__main__":
    main()
