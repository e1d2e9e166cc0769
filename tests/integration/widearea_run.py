#!/usr/bin/env python3
"""Integration tests of the wide-area suite (apps/widearea/): `iccs run NAME ... --json`.

The programs come from `iccs run --list-widearea` (the registry), so a program added there is
covered without editing this file.

Usage: widearea_run.py ICCS_CLI MODE [ARGS...]
  matrix --clusters-list 1,2,4 ARGS   every program, --variant all (each of its variants), on each
                                      number of clusters (one site per cluster unless ARGS has
                                      --sites), with ARGS (transport, WAN, threads): exit 0, result
                                      PASS, every variant PASS with a check, the links sum to the totals
    --traffic                         and on the 4-cluster runs (4 sites): each study optimization
                                      against its original in the direction the study's Tables 4/5
                                      report (PAPER below), each of our own variants against the
                                      original (OURS below); sor (the Orca program's rule, the default):
                                      chaotic relaxation (optimized) and exact-halo within 1.1x the
                                      original's iterations, and once more with --sor-rule tight
                                      (4 sites: exact-halo within 1.1x, its original as the sequential);
                                      ra: the optimized variant's WAN messages on 4 sites
                                      of 1 and of 4 threads (must not grow; the original's do)
    --fewer-wan-messages A,B          and on every multi-site run: those programs' comparison variant
                                      sends fewer WAN messages than the original (Table 5)
  inject ARGS                         every program and variant with --inject-error: exit 1, result
                                      FAIL, a failure
  usage                               bad flags and values: exit 2 with a line naming the flag
"""
import json
import subprocess
import sys
import time


def fail(msg, out=""):
    print(out[-6000:])
    print("FAIL:", msg)
    sys.exit(1)


def registry(cli):
    """{program: [its variants]} from `iccs run --list-widearea` (name, help, variants)."""
    p = subprocess.run([cli, "run", "--list-widearea"], stdout=subprocess.PIPE, text=True, timeout=60)
    progs = {}
    for line in p.stdout.splitlines():
        f = line.split("\t")
        if len(f) == 3 and f[2]:
            progs[f[0]] = f[2].split(",")
    if p.returncode != 0 or not progs:
        fail("iccs run --list-widearea listed nothing (or no variants)", p.stdout)
    return progs


def programs(cli):
    return list(registry(cli))


def run_variants(cli, name):
    """What --variant all runs: every variant but grid (run only by name)."""
    return [v for v in registry(cli)[name] if v != "grid"]


def run_json(cli, name, args, timeout=900):
    cmd = [cli, "run", name] + args + ["--json"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    took = time.monotonic() - t0
    print(" ".join(cmd), "->", p.returncode, f"({took:.1f} s)", flush=True)
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if len(lines) != 1:
        fail(f"{name}: stdout is not exactly one line of JSON ({len(lines)} lines)", p.stdout + p.stderr)
    try:
        j = json.loads(lines[0])
    except ValueError as e:
        fail(f"{name}: bad JSON: {e}", p.stdout + p.stderr)
    return p.returncode, j, p.stderr


KEYS = ["app", "variant", "size", "result", "time_s", "seq_s", "speedup", "check", "problem", "sites", "wan_rpcs",
        "wan_rpc_bytes", "wan_bcasts", "wan_bcast_bytes", "msgs", "msg_bytes", "wan_links", "stats"]


def check_run(name, r, err, clusters):
    sites = r.get("sites", clusters)
    for k in KEYS:
        if k not in r:
            fail(f"{name} {r.get('variant')}: key {k} missing", json.dumps(r) + err)
    if r["result"] != "PASS" or not r["check"]:
        fail(f"{name} {r['variant']}: {r['result']}: {r.get('failure')}", json.dumps(r) + err)
    if len(r["wan_links"]) != sites * (sites - 1):
        fail(f"{name}: {len(r['wan_links'])} WAN links for {sites} sites", json.dumps(r))
    link_rpcs = sum(l["rpcs"] for l in r["wan_links"])
    link_bytes = sum(l["rpc_bytes"] for l in r["wan_links"])
    if link_rpcs != r["wan_rpcs"] or link_bytes != r["wan_rpc_bytes"]:
        fail(f"{name}: the links' RPCs {link_rpcs}/{link_bytes} do not sum to the totals", json.dumps(r))
    link_bc = sum(l["bcasts"] for l in r["wan_links"])
    link_bcb = sum(l["bcast_bytes"] for l in r["wan_links"])
    if link_bc != r["wan_bcasts"] or link_bcb != r["wan_bcast_bytes"]:
        fail(f"{name}: the links' broadcasts {link_bc}/{link_bcb} do not sum to the totals", json.dumps(r))
    if sites == 1 and (r["wan_rpcs"] or r["wan_bcasts"] or r["wan_rpc_bytes"] or r["wan_bcast_bytes"]):
        fail(f"{name}: WAN traffic on one site", json.dumps(r))


def take(args, flag, has_value=True):
    """(value or True, args without it), (None, args) when absent."""
    if flag not in args:
        return None, args
    i = args.index(flag)
    return (args[i + 1], args[:i] + args[i + 2:]) if has_value else (True, args[:i] + args[i + 1:])


def matrix(cli, args):
    """--traffic: on the 4-cluster runs (4 sites) the study's directions (traffic_checks), and RA on
    4 sites of 1 and 4 threads; --fewer-wan-messages A,B: on every multi-site run those programs'
    comparison variant sends fewer WAN messages than the original (fewer_wan_messages). The
    checks ride on the matrix's own runs: one command line, run once (issue 38)."""
    counts, args = take(args, "--clusters-list")
    counts = [int(x) for x in counts.split(",")]
    traffic_on, args = take(args, "--traffic", has_value=False)
    fewer, args = take(args, "--fewer-wan-messages")
    fewer = fewer.split(",") if fewer else []
    n = 0
    for name, variants in registry(cli).items():
        want = [v for v in variants if v != "grid"]
        for c in counts:
            rc, j, err = run_json(cli, name, ["--variant", "all", "--clusters", str(c)] + args)
            got = [r.get("variant") for r in j.get("runs", [])]
            if rc != 0 or j.get("result") != "PASS" or got != want:
                fail(f"{name} on {c} clusters: exit {rc}, result {j.get('result')}, variants {got} (expected {want})",
                     json.dumps(j) + err)
            for r in j["runs"]:
                check_run(name, r, err, c)
            runs = {r["variant"]: r for r in j["runs"]}
            if traffic_on and c == 4 and "--sites" not in args:
                traffic_checks(name, runs, j)
            if name in fewer and runs["original"]["sites"] > 1:
                fewer_wan_messages(name, runs, args, j)
            n += 1
    if traffic_on:
        ra_threads(cli, args)
        sor_tight(cli, args)
    print(f"PASS: {n} runs, every variant PASS in each" + (", the study's traffic directions on 4 sites" if traffic_on
                                                          else "") + (f", fewer WAN messages ({', '.join(fewer)})"
                                                                      if fewer else ""))


def fewer_wan_messages(name, runs, args, j):
    """The study's Table 5 expectation for atpg, ida, ra and acp on any multi-site run: the
    comparison variant (optimized; acp, which the study did not optimize: our async-bcast) sends
    fewer WAN messages (RPCs + broadcasts) than the original; RA with one thread a cluster no more
    (combining per destination thread is then combining per destination cluster)."""
    other = "async-bcast" if name == "acp" else "optimized"
    o, n = runs["original"], runs[other]
    one_thread = name == "ra" and "--threads" in args and args[args.index("--threads") + 1] == "1"
    print(f"  {name}: WAN messages original {msgs(o)} ({o['wan_rpcs']} RPCs, {o['wan_bcasts']} broadcasts), "
          f"{other} {msgs(n)} ({n['wan_rpcs']} RPCs, {n['wan_bcasts']} broadcasts), sites {o['sites']}")
    if not (msgs(n) <= msgs(o) if one_thread else msgs(n) < msgs(o)):
        fail(f"{name}: the {other} variant sent {msgs(n)} WAN messages, the original {msgs(o)}", json.dumps(j))


def msgs(r):
    return r["wan_rpcs"] + r["wan_bcasts"]


def wbytes(r):
    return r["wan_rpc_bytes"] + r["wan_bcast_bytes"]


# The study's Tables 4/5 (64 processes, 4 clusters): what its optimization did to each program's
# inter-cluster traffic, as checks of optimized (p) against original (o). The study: Water RPCs
# 25,665 -> 4,609 and 56.8 -> 5.2 MB; TSP RPCs 12,221 -> 111; ASP broadcasts 38,139 -> 9,558
# (sequencer messages are broadcast traffic), bytes about equal; ATPG RPCs 3,451 -> 573 (RPC bytes
# and broadcasts rose); IDA* RPCs 18,337 -> 6,461 and KB 1,655 -> 708, broadcasts 26,907 -> 31,239
# (the idle/active broadcasts); RA RPCs 1,308,409 -> 39,315; SOR RPCs 1,443 -> 807 and KB 4,395 ->
# 1,553. ACP: no optimization (Table 5: -).
PAPER = {
    "water-wa": [("fewer WAN RPCs", lambda o, p: p["wan_rpcs"] < o["wan_rpcs"]),
                 ("fewer WAN RPC bytes", lambda o, p: p["wan_rpc_bytes"] < o["wan_rpc_bytes"])],
    "tsp-wa": [("fewer WAN RPCs", lambda o, p: p["wan_rpcs"] < o["wan_rpcs"])],
    "asp": [("fewer WAN broadcast messages", lambda o, p: p["wan_bcasts"] < o["wan_bcasts"]),
            ("no more WAN broadcast bytes", lambda o, p: p["wan_bcast_bytes"] <= o["wan_bcast_bytes"])],
    "atpg": [("fewer WAN RPCs", lambda o, p: p["wan_rpcs"] < o["wan_rpcs"])],
    "ida": [("fewer WAN RPCs", lambda o, p: p["wan_rpcs"] < o["wan_rpcs"]),
            ("fewer WAN RPC bytes", lambda o, p: p["wan_rpc_bytes"] < o["wan_rpc_bytes"])],
    "ra": [("fewer WAN RPCs", lambda o, p: p["wan_rpcs"] < o["wan_rpcs"])],
    "sor": [("fewer WAN RPCs", lambda o, p: p["wan_rpcs"] < o["wan_rpcs"]),
            ("fewer WAN RPC bytes", lambda o, p: p["wan_rpc_bytes"] < o["wan_rpc_bytes"])],
}
# Our own variants against the original: fewer WAN messages.
OURS = {("sor", "exact-halo"), ("acp", "async-bcast")}


def traffic_checks(name, runs, j):
    """One program's variants on 4 sites against the study's Tables 4/5 (PAPER) and ours (OURS)."""
    o = runs["original"]
    if msgs(o) == 0 and wbytes(o) == 0:
        fail(f"{name}: the original sent nothing between sites on 4 sites", json.dumps(j))
    for v, p in runs.items():
        if v == "original":
            continue
        line = (f"  {name} {v}: WAN RPCs {o['wan_rpcs']} -> {p['wan_rpcs']}, RPC bytes {o['wan_rpc_bytes']} -> "
                f"{p['wan_rpc_bytes']}, broadcasts {o['wan_bcasts']} -> {p['wan_bcasts']}, broadcast bytes "
                f"{o['wan_bcast_bytes']} -> {p['wan_bcast_bytes']}")
        if v == "optimized":
            if name not in PAPER:
                fail(f"{name}: an optimized variant with no expectation from the study's tables in this test")
            for what, ok in PAPER[name]:
                if not ok(o, p):
                    fail(f"{name} optimized: not {what} than the original, as the study's tables report",
                         json.dumps(j))
            print(line + f" ({', '.join(w for w, _ in PAPER[name])}: as the study's tables)")
        elif (name, v) in OURS:
            if not msgs(p) < msgs(o):
                fail(f"{name} {v}: {msgs(p)} WAN messages, the original {msgs(o)}: no fewer", json.dumps(j))
            print(line + " (ours: fewer WAN messages)")
    if name == "sor":
        sor_iterations(runs, ["optimized", "exact-halo"], "orca", j)


def sor_iterations(runs, within, rule, j):
    """SOR under `rule`: the original stops with the sequential, and each variant of `within`
    within 1.1x its iterations (issue 32: chaotic relaxation at the Orca program's rule; the study
    accepted 5-10% more)."""
    it = {v: r["stats"]["iterations"] for v, r in runs.items()}
    o = runs["original"]["stats"]
    print(f"  sor iterations ({rule} rule): {it} (sequential {o['seq_iterations']}); ratios to the original: " +
          ", ".join(f"{v} {it[v] / it['original']:.3f}" for v in it if v != "original"))
    for v, r in runs.items():
        if r["stats"].get("rule") != rule:
            fail(f"sor {v}: ran the {r['stats'].get('rule')} rule, not {rule}", json.dumps(j))
    if it["original"] != o["seq_iterations"]:
        fail(f"sor original: {it['original']} iterations, the sequential {o['seq_iterations']}", json.dumps(j))
    for v in within:
        if it[v] > 1.1 * it["original"]:
            fail(f"sor {v}: {it[v]} iterations, more than 1.1 x the original's {it['original']} ({rule} rule)",
                 json.dumps(j))


def sor_tight(cli, args):
    """SOR with our tight rule on 4 sites: every variant PASS, exact-halo within 1.1x the
    original's iterations (chaotic relaxation is not: about 3.5x at this rule, README "SOR")."""
    rc, j, err = run_json(cli, "sor", ["--variant", "all", "--clusters", "4", "--sor-rule", "tight"] + args)
    if rc != 0 or j.get("result") != "PASS":
        fail(f"sor --sor-rule tight on 4 clusters: exit {rc}, result {j.get('result')}", json.dumps(j) + err)
    for r in j["runs"]:
        check_run("sor", r, err, 4)
    sor_iterations({r["variant"]: r for r in j["runs"]}, ["exact-halo"], "tight", j)


def ra_threads(cli, args):
    # RA: the study's combining per destination cluster sends the same WAN messages whatever the
    # threads per cluster (one combining buffer per cluster); per destination thread it grows.
    ra = {}
    base = [a for k, a in enumerate(args) if a != "--threads" and (k == 0 or args[k - 1] != "--threads")]
    for t in (1, 4):
        rc, j, err = run_json(cli, "ra", ["--variant", "original,optimized", "--clusters", "4", "--threads", str(t)] + base)
        if rc != 0 or j.get("result") != "PASS":
            fail(f"ra on 4 x {t}: exit {rc}, result {j.get('result')}", json.dumps(j) + err)
        ra[t] = {r["variant"]: msgs(r) for r in j["runs"]}
    print(f"  ra WAN messages on 4 sites of 1 and 4 threads: {ra}")
    if ra[4]["optimized"] > ra[1]["optimized"]:
        fail(f"ra optimized: {ra[1]['optimized']} WAN messages with 1 thread a cluster, {ra[4]['optimized']} with 4")
    if not ra[4]["original"] > ra[1]["original"]:
        fail(f"ra original: {ra[1]['original']} WAN messages with 1 thread a cluster, {ra[4]['original']} with 4: "
             "combining per destination thread should send more with more threads")


def inject(cli, args):
    for name in programs(cli):
        for v in run_variants(cli, name):
            rc, j, err = run_json(cli, name, ["--variant", v, "--inject-error"] + args)
            if rc != 1 or j.get("result") != "FAIL" or not j.get("failure"):
                fail(f"{name} {v} --inject-error: exit {rc}, result {j.get('result')}", json.dumps(j) + err)
            print(f"  {name} {v}: FAIL as it must: {j['failure'][:160]}")
    print("PASS: an injected error fails every program")


def usage(cli):
    name = programs(cli)[0]
    cases = [(["--variant", "fast"], "--variant"), (["--size", "huge"], "--size"), (["--bogus", "1"], "--bogus"),
             (["--messages", "3"], "--messages"), (["--cluster-size", "2", "--threads", "3"], "--cluster-size"),
             (["--transport", "pigeon"], "--transport"), (["--wait-timeout-ms", "x"], "--wait-timeout-ms")]
    cases += [(["--variant", "optimized"], "--variant", "acp"), (["--variant", "exact-halo"], "--variant", "asp"),
              (["--sor-rule", "loose"], "--sor-rule", "sor"), (["--sor-rule", "tight"], "--sor-rule", "asp")]
    for case in cases:
        args, flag, prog = case if len(case) == 3 else case + (name,)
        p = subprocess.run([cli, "run", prog] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        print(prog, " ".join(args), "->", p.returncode, p.stderr.strip())
        if p.returncode != 2 or flag not in p.stderr:
            fail(f"{args}: exit {p.returncode}, expected 2 with a message naming {flag}", p.stdout + p.stderr)
    print("PASS: usage errors exit 2 naming the flag")


def main():
    cli, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    # Over iccs a proxy reports a peer down after 5 s of silence; loaded CI hosts starved whole
    # cluster processes that long (group_run.py): allow 30 s.
    if "iccs" in args:
        args = args + ["--set", "cluster.peer_timeout_ms=30000"]
    {"matrix": lambda: matrix(cli, args), "inject": lambda: inject(cli, args),
     "usage": lambda: usage(cli)}[mode]()


if __name__ == "__main__":
    main()
