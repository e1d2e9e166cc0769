#!/usr/bin/env python3
"""The eight applications across clusters on the DSM (issue 8): `iccs-cli run <app> ... --json`.

usage: run_apps_clusters.py CLI --apps all|a,b,... CASE...      every app in every case
       run_apps_clusters.py CLI --apps ... --cross                the whole cross product (suite long)
       run_apps_clusters.py CLI --apps ... --inject-error CASE     a wrong answer: exit 1, FAIL
       run_apps_clusters.py CLI --usage                           bad flags: exit 2, one line naming them
       run_apps_clusters.py CLI --apps ... --app-size paper CASE   the runs at --size paper (default test)

CASE is clusters x cluster-size, transport and its options, e.g. 2x2:iccs:2:round-robin,
2x2:direct, 4x1:delay:30 (delay in us, or auto), 4x1:iccs:1:fixed.

Each run must exit 0, print exactly one line on stdout, a JSON object with every key of the
contract (apps/README.md, "iccs run <app> --json") and values that match what was asked: result
PASS, threads = clusters x cluster size, proxies_per_cluster (0 unless iccs), delay_us (null unless
delay), iccs null unless iccs and then one entry per proxy of every cluster, dsm_per_cluster one
entry per cluster; and the counters must show the run was across clusters (runtime messages, DSM
faults, proxy messages over iccs).
"""
import itertools
import json
import subprocess
import sys
import time

APPS = ["jacobi", "matmul", "gauss", "fft", "tsp", "water", "barnes", "unstructured"]
TOP_KEYS = ["app", "size", "threads", "clusters", "cluster_size", "proxies_per_cluster", "dispatch", "transport",
            "delay_us", "result", "parallel_s", "check", "host_cores", "oversubscribed", "rt", "iccs", "dsm",
            "dsm_per_cluster"]
RT_KEYS = ["msgs", "bytes", "mean_msg_bytes"]
ICCS_KEYS = ["msg_time_us_mean", "queue_len_mean", "utilization_mean", "proxies"]
PROXY_KEYS = ["cluster", "proxy", "msgs_tx", "msgs_rx", "bytes_tx", "bytes_rx", "msg_time_us_mean",
              "queue_len_mean", "utilization"]
APP_SIZE = "test"  # --size of every run (--app-size)
DSM_KEYS = ["read_faults", "write_faults", "page_fetches", "diffs_sent", "diff_bytes", "invalidations",
            "lock_wait_s", "barrier_wait_s"]


def parse_case(s):
    parts = s.split(":")
    c, t = parts[0].split("x")
    case = {"clusters": int(c), "size": int(t), "transport": parts[1], "proxies": None, "dispatch": None,
            "delay": None}
    if case["transport"] == "iccs":
        case["proxies"] = int(parts[2]) if len(parts) > 2 else 2
        case["dispatch"] = parts[3] if len(parts) > 3 else "round-robin"
    elif case["transport"] == "delay":
        case["delay"] = parts[2] if len(parts) > 2 else "20"
    return case


def case_args(case):
    a = ["--clusters", str(case["clusters"]), "--cluster-size", str(case["size"]), "--transport", case["transport"]]
    if case["proxies"] is not None:
        a += ["--proxies", str(case["proxies"]), "--dispatch", case["dispatch"]]
    if case["delay"] is not None:
        a += ["--delay-us", case["delay"]]
    return a


def check_run(cli, app, case, inject=False):
    """Returns a list of problems (empty: the run was right)."""
    cmd = [cli, "run", app] + case_args(case) + ["--json"] + (["--inject-error"] if inject else [])
    if APP_SIZE != "test":
        cmd += ["--size", APP_SIZE]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return ["timed out after 240 s: " + " ".join(cmd)], 240.0
    secs = time.monotonic() - t0
    errs = []
    want_rc = 1 if inject else 0
    if p.returncode != want_rc:
        errs.append("exit status %d, expected %d" % (p.returncode, want_rc))
    lines = p.stdout.splitlines()
    if len(lines) != 1:
        errs.append("stdout has %d lines, expected exactly 1: %r" % (len(lines), p.stdout[:300]))
        return errs + ["stderr tail: " + p.stderr[-2000:]], secs
    try:
        j = json.loads(lines[0])
    except ValueError as e:
        return errs + ["stdout is not JSON (%s): %r" % (e, lines[0][:300])], secs
    for k in TOP_KEYS:
        if k not in j:
            errs.append("key %s missing" % k)
    if errs:
        return errs + ["stderr tail: " + p.stderr[-2000:]], secs
    C, S = case["clusters"], case["size"]
    expect = {"app": app, "size": APP_SIZE, "threads": C * S, "clusters": C, "cluster_size": S,
              "transport": case["transport"], "result": "FAIL" if inject else "PASS",
              "proxies_per_cluster": case["proxies"] if case["transport"] == "iccs" else 0}
    if case["dispatch"]:
        expect["dispatch"] = case["dispatch"]
    for k, v in expect.items():
        if j[k] != v:
            errs.append("%s = %r, expected %r" % (k, j[k], v))
    if inject:
        if "failure" not in j:
            errs.append("FAIL without a 'failure' key")
        return errs, secs
    if not (isinstance(j["parallel_s"], (int, float)) and j["parallel_s"] > 0):
        errs.append("parallel_s = %r, expected a positive number" % j["parallel_s"])
    if not isinstance(j["check"], str) or not j["check"]:
        errs.append("check is empty")
    if not isinstance(j["oversubscribed"], bool) or not isinstance(j["host_cores"], int):
        errs.append("host_cores / oversubscribed of the wrong type")
    if case["transport"] == "delay":
        if not (isinstance(j["delay_us"], (int, float)) and j["delay_us"] >= 0):
            errs.append("delay_us = %r over delay, expected a number" % j["delay_us"])
        elif case["delay"] != "auto" and abs(j["delay_us"] - float(case["delay"])) > 1e-6:
            errs.append("delay_us = %r, expected %s" % (j["delay_us"], case["delay"]))
    elif j["delay_us"] is not None:
        errs.append("delay_us = %r, expected null (transport %s)" % (j["delay_us"], case["transport"]))
    rt = j["rt"]
    if not isinstance(rt, dict) or any(k not in rt for k in RT_KEYS):
        errs.append("rt = %r, expected an object with %s" % (rt, RT_KEYS))
    elif C > 1 and not rt["msgs"] > 0:
        errs.append("rt.msgs = %r across %d clusters, expected > 0" % (rt["msgs"], C))
    if case["transport"] == "iccs":
        ic = j["iccs"]
        if not isinstance(ic, dict) or any(k not in ic for k in ICCS_KEYS):
            errs.append("iccs = %r, expected an object with %s" % (ic, ICCS_KEYS))
        else:
            pr = ic["proxies"]
            if len(pr) != C * case["proxies"]:
                errs.append("iccs.proxies has %d entries, expected %d" % (len(pr), C * case["proxies"]))
            for x in pr:
                missing = [k for k in PROXY_KEYS if k not in x]
                if missing:
                    errs.append("iccs proxy entry %r lacks %s" % (x, missing))
                    break
            if sorted((x["cluster"], x["proxy"]) for x in pr) != \
                    sorted(itertools.product(range(C), range(case["proxies"]))):
                errs.append("iccs.proxies are not one per (cluster, proxy)")
            if C > 1 and not sum(x["msgs_tx"] for x in pr) > 0:
                errs.append("no proxy sent a message across %d clusters" % C)
            if C > 1 and not isinstance(ic["msg_time_us_mean"], (int, float)):
                errs.append("iccs.msg_time_us_mean = %r, expected a number" % ic["msg_time_us_mean"])
            if not (0 <= ic["utilization_mean"] <= 1):
                errs.append("iccs.utilization_mean = %r outside 0..1" % ic["utilization_mean"])
    elif j["iccs"] is not None:
        errs.append("iccs = %r over %s, expected null" % (j["iccs"], case["transport"]))
    d = j["dsm"]
    if not isinstance(d, dict) or any(k not in d for k in DSM_KEYS):
        errs.append("dsm = %r, expected an object with %s" % (d, DSM_KEYS))
    elif C > 1 and not d["write_faults"] > 0:
        errs.append("dsm.write_faults = %r: the app wrote no shared page?" % d["write_faults"])
    elif C == 1 and (d["write_faults"] != 0 or d["read_faults"] != 0 or d["diffs_sent"] != 0):
        # one cluster has nobody to keep coherent: its shared pages are never protected
        errs.append("dsm over 1 cluster: read_faults %r, write_faults %r, diffs_sent %r, expected 0 each"
                    % (d["read_faults"], d["write_faults"], d["diffs_sent"]))
    per = j["dsm_per_cluster"]
    if not isinstance(per, list) or sorted(x.get("cluster") for x in per) != list(range(C)):
        errs.append("dsm_per_cluster = %r, expected one entry per cluster" % per)
    elif any(k not in x for x in per for k in DSM_KEYS):
        errs.append("a dsm_per_cluster entry lacks a key of %s" % DSM_KEYS)
    if errs:
        errs.append("stderr tail: " + p.stderr[-2000:])
    return errs, secs


def usage_checks(cli):
    bad = [
        (["run", "water", "--size", "huge"], "--size"),
        (["run", "water", "--transport", "carrier-pigeon"], "--transport"),
        (["run", "water", "--clusters", "0"], "clusters"),
        (["run", "water", "--cluster-size", "2", "--threads", "3"], "--cluster-size"),
        (["run", "water", "--messages", "10"], "--messages"),
        (["run", "water", "--", "-p", "4"], "'--'"),
        (["run", "water", "--delay-us", "5"], "--delay-us"),
        (["run", "water", "--bogus", "1"], "--bogus"),
        (["run", "water", "--size"], "--size"),
    ]
    fails = 0
    for args, name in bad:
        p = subprocess.run([cli] + args + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60)
        ok = p.returncode == 2 and name in p.stderr and p.stdout == ""
        print("%s: %s -> exit %d, %s" % ("ok" if ok else "WRONG", " ".join(args), p.returncode, p.stderr.strip()))
        fails += not ok
    p = subprocess.run([cli, "run", "water", "--help"], stdout=subprocess.PIPE, text=True, timeout=30)
    ok = p.returncode == 0 and "--cluster-size" in p.stdout and "--json" in p.stdout
    print("%s: run water --help -> exit %d" % ("ok" if ok else "WRONG", p.returncode))
    fails += not ok
    # Text mode: the clusters' own output, then the summary with the DSM counters of both clusters.
    p = subprocess.run([cli, "run", "jacobi", "--transport", "direct"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    ok = (p.returncode == 0 and "jacobi: PASS, parallel section" in p.stdout and "dsm (2 clusters)" in p.stdout
          and "runtime:" in p.stdout)
    print("%s: run jacobi --transport direct (text) -> exit %d" % ("ok" if ok else "WRONG", p.returncode))
    if not ok:
        print(p.stdout[-3000:])
    return fails + (not ok)


def main():
    global APP_SIZE
    argv = sys.argv[1:]
    cli = argv.pop(0)
    if argv and argv[0] == "--usage":
        n = usage_checks(cli)
        print("%d usage checks wrong" % n)
        return 1 if n else 0
    apps = APPS
    cases, cross, inject = [], False, False
    while argv:
        a = argv.pop(0)
        if a == "--apps":
            v = argv.pop(0)
            apps = APPS if v == "all" else v.split(",")
        elif a == "--cross":
            cross = True
        elif a == "--inject-error":
            inject = True
        elif a == "--app-size":
            APP_SIZE = argv.pop(0)
        else:
            cases.append(parse_case(a))
    if cross:
        # 1, 2 and 4 clusters (2 compute threads each) over iccs with 1 and 2 proxies per cluster,
        # round-robin and fixed dispatch, and over direct and delay.
        for c in ("1x2", "2x2", "4x2"):
            for p, d in itertools.product((1, 2), ("round-robin", "fixed")):
                cases.append(parse_case("%s:iccs:%d:%s" % (c, p, d)))
            cases.append(parse_case(c + ":direct"))
            cases.append(parse_case(c + ":delay:20"))
    failures, total, t_all = [], 0, time.monotonic()
    for case in cases:
        for app in apps:
            total += 1
            errs, secs = check_run(cli, app, case, inject)
            label = "%s %s" % (app, " ".join(case_args(case)))
            print("%-4s %5.1f s  %s" % ("ok" if not errs else "FAIL", secs, label), flush=True)
            if errs:
                failures.append(label)
                for e in errs:
                    print("      " + e, flush=True)
    print("%d of %d runs right in %.0f s" % (total - len(failures), total, time.monotonic() - t_all))
    for f in failures:
        print("wrong: " + f)
    return 1 if failures or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
