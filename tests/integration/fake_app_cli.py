#!/usr/bin/env python3
"""fake_app_cli.py: a test double of `iccs-cli run APP ... --json` (the run contract, perf/README.md)
for the experiment runner's own error paths (test experiment-app-failures), so they are tested
without cluster processes. Not a measurement: every number is made up, and says so ("fake": true).

  FAKE_FAIL_TRANSPORT=T   runs over transport T end FAIL (exit 1), as a run whose cluster died
  FAKE_DROP_KEY=K         the JSON object lacks key K (a build that breaks the contract)
"""
import json
import os
import sys

a = sys.argv[1:]
if len(a) < 2 or a[0] != "run":
    print("fake_app_cli: expected `run APP ...`", file=sys.stderr)
    sys.exit(2)
opt, i = {}, 2
while i < len(a):
    if a[i] == "--json":
        i += 1
        continue
    opt[a[i]] = a[i + 1] if i + 1 < len(a) else ""
    i += 2
c, s, t = int(opt.get("--clusters", 2)), int(opt.get("--cluster-size", 1)), opt.get("--transport", "iccs")
p = int(opt.get("--proxies", 1)) if t == "iccs" else 0
j = {"fake": True, "app": a[1], "size": opt.get("--size", "test"), "threads": c * s, "clusters": c, "cluster_size": s,
     "proxies_per_cluster": p, "dispatch": opt.get("--dispatch", "round-robin"), "transport": t,
     "delay_us": 10.0 if t == "delay" else None, "result": "PASS",
     "parallel_s": 0.01 * (1 + (t != "direct") + float(opt.get("--wan-latency-ms", 0))),
     "check": "fake", "host_cores": 2, "oversubscribed": False,
     "rt": {"msgs": 100, "bytes": 10000, "mean_msg_bytes": 100.0},
     "iccs": None if t != "iccs" else {
         "msg_time_us_mean": 20.0, "queue_len_mean": 0.5, "utilization_mean": 0.25,
         "proxies": [{"cluster": k, "proxy": q, "msgs_tx": 50, "msgs_rx": 50, "bytes_tx": 5000, "bytes_rx": 5000,
                      "msg_time_us_mean": 20.0, "queue_len_mean": 0.5, "utilization": 0.25}
                     for k in range(c) for q in range(p)]},
     "dsm": {"read_faults": 1, "write_faults": 1, "page_fetches": 1, "diffs_sent": 1, "diff_bytes": 1,
             "invalidations": 1, "lock_wait_s": 0.0, "barrier_wait_s": 0.0}, "dsm_per_cluster": []}
if os.environ.get("FAKE_DROP_KEY"):
    j.pop(os.environ["FAKE_DROP_KEY"], None)
if os.environ.get("FAKE_FAIL_TRANSPORT") == t:
    j["result"] = "FAIL"
    print(json.dumps(j))
    print("cluster 1 went down before it finished (fake)", file=sys.stderr)
    sys.exit(1)
print(json.dumps(j))
