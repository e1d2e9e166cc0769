"""project.py: the model's rows for the experiments (`scaling --model`, `apps --model`).

validate(): a measured ICCS run (its --json object and its --trace) replayed through the model
at the same layout: the modeled message time, queue length and utilization beside the measured
ones. The counters' denominators are the proxies' loop time (`total_s`, start-up to stop, longer
than the traced span), so the modeled busy time and summed waits are divided by the same.
study(): the study's layouts (16 compute threads; clusters of 1, 2, 4, 8; 1 to cluster-size
proxies per cluster) and beyond (2 clusters of 16..256), from a traced profile scaled to each.
"""
import math

import numpy as np

from sim import Config, simulate
from workload import from_profile


def round_sqrt(n):
    return max(1, int(math.floor(math.sqrt(n) + 0.5)))


def _row(r, d):
    out = r.row()
    out["slowdown"] = round(r.run_ns / d.run_ns, 4) if d.run_ns > 0 else None
    out["direct_time_s"] = d.run_ns / 1e9
    out["msg_time_median_us"] = float(np.median(r.msg_times)) / 1e3 if r.msgs else None
    return out


def validate(run_json, wl, costs, seed=1):
    """Modeled counters of one traced run, on the measured counters' terms."""
    px = run_json["iccs"]["proxies"]
    cfg = Config(clusters=run_json["clusters"], cluster_size=run_json["cluster_size"],
                 proxies=run_json["proxies_per_cluster"], dispatch=run_json.get("dispatch") or "round-robin",
                 costs=costs, seed=seed)
    r = simulate(wl, cfg)
    d = simulate(wl, Config(cfg.clusters, cfg.cluster_size, cfg.proxies, costs=costs, transport="direct", seed=seed))
    out = _row(r, d)
    span = {(p["cluster"], p["proxy"]): p.get("total_s") for p in px}
    utils, queues = [], []
    for p in r.per_proxy:
        tot = span.get((p["cluster"], p["proxy"]))
        if not tot:
            continue
        utils.append(min(1.0, p["util_counted"] * r.run_ns / 1e9 / tot))
        queues.append(p["queue_len_tx"] * r.run_ns / 1e9 / tot)
    out["proxy_util_on_loop_time"] = float(np.mean(utils)) if utils else None
    tx = [p["tx_jobs"] for p in r.per_proxy]
    out["proxy_tx_imbalance"] = max(tx) / (sum(tx) / len(tx)) if tx and sum(tx) else None
    out["queue_len_on_loop_time"] = float(np.mean(queues)) if queues else None
    return out


def study_layouts(threads=16, sizes=(1, 2, 4, 8)):
    """(clusters, cluster size, proxies per cluster, sqrt rule?) of the study's Table 2 sweep."""
    out = []
    for s in sizes:
        if threads % s or threads // s < 2:
            continue
        for p in range(1, s + 1):
            out.append((threads // s, s, p, p == round_sqrt(s)))
    return out


def beyond_layouts(sizes=(16, 32, 64, 128, 256), clusters=2):
    out = []
    for s in sizes:
        ps = sorted({p for p in (1, 2, 4, 8, 16, 32, 64) if p <= s} | {round_sqrt(s)})
        for p in ps:
            out.append((clusters, s, p, p == round_sqrt(s)))
    return out


def project(profile, costs, layouts, dispatch="round-robin", seed=1, max_msgs=200):
    """A modeled row per layout (the profile scaled to it)."""
    rows = []
    for c, s, p, is_sqrt in layouts:
        wl = from_profile(profile, c, s, seed=seed, max_msgs=max_msgs)
        r = simulate(wl, Config(c, s, p, dispatch=dispatch, costs=costs, seed=seed))
        d = simulate(wl, Config(c, s, p, costs=costs, transport="direct", seed=seed))
        row = _row(r, d)
        row.update({"clusters": c, "cluster_size": s, "proxies_per_cluster": p, "threads": c * s,
                    "rule": "sqrt" if is_sqrt else "", "model_input": wl.note})
        rows.append(row)
    return rows


def flat_rule(rows, key="msg_time_us", tol=0.10):
    """Per cluster size, the fewest proxies whose `key` is within tol of the best the sweep reached
    at that size: what keeps the counter flat (compare with round(sqrt(S)))."""
    out = {}
    for s in sorted({r["cluster_size"] for r in rows}):
        rs = [r for r in rows if r["cluster_size"] == s and r.get(key) is not None]
        best = min(r[key] for r in rs)
        ok = [r["proxies_per_cluster"] for r in rs if r[key] <= best * (1 + tol)]
        out[s] = min(ok) if ok else None
    return out
