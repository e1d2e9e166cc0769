"""model_rows.py: `--model` of the app experiments (scaling, apps): the proxy model's rows beside
the measured ones (perf/model/README.md).

With --model every ICCS run is traced (`iccs run APP --trace`); after the sweep each traced run is
replayed through the model at its own layout (the validation: modeled against measured, on
the rows' measured_* columns), and the trace of the smallest cluster size gives the application's
per-thread profile, scaled to the study's layouts (16 compute threads) and beyond. Costs: the
cost file of `./iccs experiment calibrate` (--costs FILE, default the newest under results/).
Validation replays use the host's polling (adaptive: sleeps and wakes in the model too);
projections assume dedicated proxy cores (busy polling), as the study had.
"""
import atexit
import os
import shutil
import sys
import tempfile

from framework import REPO, ExperimentError, median

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "model"))

MODEL_COLUMNS = ["source", "rule", "measured_msg_time_us", "measured_queue_len", "measured_proxy_util",
                 "msg_time_median_us", "model_input"]


def add_model_options(ap, beyond):
    ap.add_argument("--model", action="store_true",
                    help="also the proxy model's rows (perf/model/): every ICCS run traced and replayed (modeled "
                         "beside measured), and the study's layouts (16 compute threads, the proxy totals)"
                         + (" and 2 clusters of 16..256 (--beyond)" if beyond else "") +
                         " projected from the trace; needs a cost file (./iccs experiment calibrate)")
    ap.add_argument("--costs", help="--model: the cost file (default: the newest results/calibrate/*/costs.json)")
    ap.add_argument("--model-threads", type=int, default=16,
                    help="--model: compute threads in total of the projected study layouts (default 16)")


def check_model(args):
    if not args.model:
        if args.costs:
            raise ExperimentError("--costs is for --model")
        return
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise ExperimentError("--model needs numpy (Debian package python3-numpy; ./iccs experiment installs it)")
    import costs
    path = args.costs or costs.newest(args.out or os.path.join(REPO, "results"))
    if not path:
        raise ExperimentError("--model needs a cost file: run ./iccs experiment calibrate first (or give --costs FILE)")
    for polling in ("adaptive", "busy"):
        try:
            costs.load(path, polling)
        except costs.CostFileError as e:
            raise ExperimentError(str(e))
    args.costs_path = path
    t = args.model_threads
    if t < 2 or t > 4096 or t & (t - 1):
        raise ExperimentError(f"--model-threads {t}: expected a power of two, 2..4096")
    args.trace_dir = tempfile.mkdtemp(prefix="iccs-model-traces-")
    atexit.register(shutil.rmtree, args.trace_dir, True)  # scratch: the JSON keeps what the model took from them


def trace_cfgs(configs, args):
    """With --model: every ICCS configuration runs with --trace into the sweep's scratch folder."""
    if not args.model:
        return configs
    for i, c in enumerate(configs):
        if c["transport"] == "iccs":
            c["trace"] = os.path.join(args.trace_dir, f"run{i}.trace")
            c["extra"] = tuple(c.get("extra", ())) + ("--trace", c["trace"])
    return configs


def _traced(raw):
    return [r for r in raw if r["cfg"].get("trace") and r.get("run") and os.path.exists(r["cfg"]["trace"])]


def validation_rows(raw, args, base_keys):
    """One modeled row per measured ICCS configuration: medians over its traced runs' replays."""
    import costs
    import project
    import tracefile as trace
    c = costs.load(args.costs_path, "adaptive")
    groups = {}
    for r in _traced(raw):
        cf = r["cfg"]
        groups.setdefault((cf["app"], cf["cluster_size"], cf["proxies_per_cluster"], cf.get("dispatch")), []).append(r)
    rows, pairs = [], []
    for key, rs in groups.items():
        modeled, measured = [], []
        for r in rs:
            tr = trace.load(r["cfg"]["trace"], r["cfg"]["cluster_size"])
            m = project.validate(r["run"], trace.replay(tr), c)
            modeled.append(m)
            measured.append(r["run"]["iccs"])
        cf = rs[0]["cfg"]
        row = {k: cf.get(k) for k in base_keys if k in cf}
        row.update({"source": "modeled", "rule": "replay of the measured runs' traces",
                    "msg_time_us": _med(modeled, "msg_time_us"), "msg_time_median_us": _med(modeled, "msg_time_median_us"),
                    "queue_len": _med(modeled, "queue_len_on_loop_time"),
                    "proxy_util": _med(modeled, "proxy_util_on_loop_time"), "slowdown": _med(modeled, "slowdown"),
                    "proxy_tx_imbalance": _med(modeled, "proxy_tx_imbalance"),
                    "measured_msg_time_us": _med(measured, "msg_time_us_mean"),
                    "measured_queue_len": _med(measured, "queue_len_mean"),
                    "measured_proxy_util": _med(measured, "utilization_mean"),
                    "model_input": f"trace replay of {len(rs)} run(s), costs {args.costs_path}"})
        rows.append(row)
        pairs.append({k: row.get(k) for k in ("app", "cluster_size", "clusters", "proxies_per_cluster", "dispatch",
                                               "proxy_tx_imbalance", "msg_time_us",
                                               "measured_msg_time_us", "msg_time_median_us", "queue_len",
                                               "measured_queue_len", "proxy_util", "measured_proxy_util")})
        pairs[-1]["measured_msg_time_median_us"] = _med([{"x": _trace_median(r)} for r in rs], "x")
        pairs[-1]["measured_proxy_tx_imbalance"] = _med([{"x": _imbalance(r["run"])} for r in rs], "x")
    return rows, pairs


def copy_host_columns(val, measured, keys):
    """A replay row is of a configuration run on this host: its threads_total and oversubscribed."""
    for v in val:
        m = next((r for r in measured if all(r.get(k) == v.get(k) for k in keys)), None)
        if m is not None:
            v["threads_total"], v["oversubscribed"] = m.get("threads_total"), m.get("oversubscribed")


def _imbalance(run):
    tx = [p.get("msgs_tx") or 0 for p in (run.get("iccs") or {}).get("proxies") or []]
    return max(tx) / (sum(tx) / len(tx)) if tx and sum(tx) else None


def _trace_median(r):
    import numpy as np
    import tracefile as trace
    tr = trace.load(r["cfg"]["trace"], r["cfg"]["cluster_size"])
    t = [m.deliver - m.send for m in tr.msgs if m.deliver is not None]
    return float(np.median(t)) / 1e3 if t else None


def _med(xs, k):
    v = [x.get(k) for x in xs if x.get(k) is not None]
    return round(median(v), 4) if v else None


def app_profile(raw, app):
    """The profile of `app` from its traced ICCS run at the smallest cluster size (the median
    time's run), the compute time per thread from the no-delay runs at that size."""
    import tracefile as trace
    rs = [r for r in _traced(raw) if r["cfg"]["app"] == app]
    if not rs:
        return None, None
    s = min(r["cfg"]["cluster_size"] for r in rs)
    rs = sorted((r for r in rs if r["cfg"]["cluster_size"] == s), key=lambda r: r["run"]["parallel_s"])
    r = rs[len(rs) // 2]
    direct = [x["run"]["parallel_s"] for x in raw if x.get("run") and x["cfg"]["app"] == app
              and x["cfg"]["cluster_size"] == s and x["cfg"]["transport"] == "direct"]
    tr = trace.load(r["cfg"]["trace"], s)
    p = trace.profile(tr, app, compute_s=median(direct) if direct else None)
    return p, {"app": app, "from_cluster_size": s, "from_clusters": r["cfg"]["clusters"],
               "msgs_per_thread": round(p.msgs_per_thread, 1), "gap_us": round(p.gap_ns / 1e3, 3),
               "request_frac": round(p.request_frac, 3), "mean_size_bytes": round(float(p.sizes.mean()), 1),
               "handler_us": round(p.handler_ns / 1e3, 3), "compute_s_per_thread_from": "no delay runs" if direct
               else "trace span less reply waits"}


def projected_rows(profile, args, layouts, base):
    import costs
    import project
    c = costs.load(args.costs_path, "busy")
    # the study's `no delay`: a message goes straight to the other cluster's memory (a ring
    # hand-off), not this host's direct transport with its waiting (compute/README.md)
    c.direct_latency_ns = c.handoff_ns
    rows = []
    for m in project.project(profile, c, layouts):
        row = dict(base)
        row.update({k: m.get(k) for k in ("threads", "cluster_size", "clusters", "proxies_per_cluster", "msg_time_us",
                                           "msg_time_median_us", "slowdown", "rule", "model_input")})
        # the projections assume a core per compute thread and per proxy (the study's machine)
        row.update({"threads_total": m["threads"] + m["clusters"] * m["proxies_per_cluster"], "oversubscribed": False})
        row.update({"source": "modeled", "queue_len": round(m["queue_len_tx"], 5), "proxy_util": round(m["proxy_util"], 5),
                    "time_s": m["time_s"], "direct_time_s": m["direct_time_s"], "msgs": m["msgs"]})
        rows.append(row)
    return rows
