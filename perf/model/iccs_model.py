#!/usr/bin/env python3
"""iccs_model.py: the proxy model on one trace, from the command line (perf/model/README.md).

  python3 perf/model/iccs_model.py TRACE --cluster-size S --costs COSTS.json
          [--proxies P[,P...]] [--dispatch fixed|round-robin|least-loaded] [--polling busy|adaptive]
          [--scale C:S ...] [--json]

Replays the trace (`iccs run APP --trace TRACE`, run with S compute threads per cluster) with
each proxy count given (default: 1..S) and prints a row per count: message time (mean, median),
queue length, utilization (true and as the adaptive counter counts it) and slowdown against no
delay. --scale C:S: instead of the replay, the trace's per-thread profile scaled to C clusters of
S compute threads (as `experiment scaling --model` does). Exit 2 on a bad argument or file.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np  # noqa: F401
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("iccs_model.py: numpy is missing (Debian package python3-numpy)")

import costs as costfile  # noqa: E402
import tracefile  # noqa: E402
from sim import DISPATCH, Config, simulate  # noqa: E402
from workload import from_profile  # noqa: E402


def main():
    ap = argparse.ArgumentParser(prog="iccs_model.py", description=__doc__.split("\n\n")[1])
    ap.add_argument("trace")
    ap.add_argument("--cluster-size", type=int, required=True, help="compute threads per cluster of the traced run")
    ap.add_argument("--costs", required=True, help="cost file of ./iccs experiment calibrate")
    ap.add_argument("--proxies", help="comma-separated proxies per cluster (default 1..S)")
    ap.add_argument("--dispatch", default="round-robin", choices=DISPATCH)
    ap.add_argument("--polling", default="adaptive", choices=["busy", "adaptive"])
    ap.add_argument("--scale", help="C:S, the profile scaled to C clusters of S compute threads")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        c = costfile.load(a.costs, a.polling)
        tr = tracefile.load(a.trace, a.cluster_size)
    except (costfile.CostFileError, tracefile.TraceError) as e:
        print(f"iccs_model.py: {e}", file=sys.stderr)
        return 2
    if a.scale:
        try:
            clusters, size = (int(x) for x in a.scale.split(":"))
            if clusters < 2 or size < 1:
                raise ValueError
        except ValueError:
            print(f"iccs_model.py: --scale '{a.scale}': expected C:S, C >= 2 clusters of S >= 1 threads", file=sys.stderr)
            return 2
        wl = from_profile(tracefile.profile(tr, "trace"), clusters, size, max_msgs=200)
        c.direct_latency_ns = c.handoff_ns  # the study's `no delay`, as experiment scaling --model projects
    else:
        clusters, size, wl = tr.clusters, a.cluster_size, tracefile.replay(tr)
    try:
        ps = [int(x) for x in a.proxies.split(",")] if a.proxies else list(range(1, size + 1))
        if any(p < 1 for p in ps):
            raise ValueError
    except ValueError:
        print(f"iccs_model.py: --proxies '{a.proxies}': expected whole numbers >= 1", file=sys.stderr)
        return 2
    d = simulate(wl, Config(clusters, size, 1, costs=c, transport="direct"))
    rows = []
    for p in ps:
        r = simulate(wl, Config(clusters, size, p, dispatch=a.dispatch, costs=c))
        row = {"clusters": clusters, "cluster_size": size, "proxies_per_cluster": p, **r.row(),
               "msg_time_median_us": float(np.median(r.msg_times)) / 1e3 if r.msgs else None,
               "slowdown": r.run_ns / d.run_ns if d.run_ns else None}
        rows.append(row)
    if a.json:
        print(json.dumps({"workload": wl.note, "rows": rows}))
        return 0
    print(f"{wl.note}; costs {a.costs} (polling {a.polling}), dispatch {a.dispatch}")
    print(f"{'proxies':>7} {'msgs':>7} {'msg us':>8} {'median':>8} {'queue':>7} {'util':>6} {'counted':>7} {'slowdown':>8}")
    for r in rows:
        print(f"{r['proxies_per_cluster']:>7} {r['msgs']:>7} {r['msg_time_us']:>8.2f} {r['msg_time_median_us']:>8.2f} "
              f"{r['queue_len']:>7.4f} {r['proxy_util']:>6.3f} {r['proxy_util_counted']:>7.3f} {r['slowdown']:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
