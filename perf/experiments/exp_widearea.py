"""exp_widearea.py: `./iccs experiment widearea [APP...]`, the wide-area suite of Bal, Plaat et al.
(1998; apps/widearea/): their Figure 15 and Tables 4/5.

Figure 15: per program four speedups: one cluster of N/4 compute threads (the lower bound of what
is acceptable), the original and the optimized (cluster-aware) program on 4 sites of N/4 threads
joined by emulated WAN links, and one cluster of N threads (the upper bound). The study: N = 60
(4 clusters of 15), WAN round trip 2.7 ms and 4.5 Mbit/s per link; here N is scaled to the host
(app_runs.HostLayout: a power of two, at least 4; labelled), the WAN is the study's by default
(--wan-latency-ms 1.35 one way, --wan-bandwidth 562500 bytes/s). Speedup = the program's
sequential time (seq_s, measured by the same runs: the median over the app's runs) / the parallel
section's time. Every run is `iccs-cli run APP --json` over transport iccs, 1 proxy per cluster;
the 4-site runs take both variants in one launch (--variant both).

Tables 4/5: the inter-site traffic of the original and the optimized program on 4 sites (RPCs and
their bytes, broadcasts and their bytes, summed over the clusters by the program's counters), the
reduction factor, and the study's (64 processes, 4 clusters) beside it where known.

The programs are the registry's (`iccs-cli run --list-widearea`), so programs added there appear.
--quick: every program at test size on 1 and 2 clusters (2 sites), one run each.
CSV widearea.csv: app, variant, clusters, processes, time_s, speedup, wan_rpcs, wan_rpc_bytes,
wan_bcasts, wan_bcast_bytes, result (the two single-cluster bounds as variant original with
clusters 1); widearea-traffic.csv beside it: Tables 4/5.
"""
import csv
import json
import os
import subprocess

from app_runs import HostLayout, RunTimeout, launch, save_fig
from framework import ExperimentError, median

# Bal et al. 1998, Tables 4/5 (64 processes, 4 clusters): inter-cluster RPCs and bytes before/after.
STUDY = {
    "water-wa": {"rpcs_before": 25665, "rpcs_after": 4609, "bytes_before": 56.8e6, "bytes_after": 5.2e6},
    "tsp-wa": {"rpcs_before": 12221, "rpcs_after": 111},
    "ra": {"rpcs_before": 1308409, "rpcs_after": 39315},
}
STUDY_WAN_LATENCY_MS = 1.35      # one way: the study's 2.7 ms round trip
STUDY_WAN_BANDWIDTH = 562500     # bytes/s: 4.5 Mbit/s
STARTUP_S = 1.5                  # a launch of 1..4 cluster processes over iccs, measured on the 2-core hosts


def registry(cli):
    """The wide-area programs the build has, from `iccs-cli run --list-widearea`."""
    try:
        p = subprocess.run([cli, "run", "--list-widearea"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60)
    except OSError as e:
        raise ExperimentError(f"{cli}: {e}")
    names = [ln.split("\t")[0] for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not names:
        raise ExperimentError(f"{cli} run --list-widearea listed no program (exit {p.returncode}): {p.stderr[-500:]}")
    return names


def fmt_factor(a, b):
    """a / b; "inf" when only b is 0 (the optimized sent none); None when a is unknown or 0."""
    if not a:
        return None
    return round(a / b, 2) if b else "inf"


class Widearea:
    name = "widearea"
    figure = "Bal et al. 1998, Figure 15 and Tables 4/5"
    title = "wide-area programs: speedup on 1 cluster, on 4 sites original / optimized, on 1 big cluster; WAN traffic"
    columns = ["app", "variant", "clusters", "processes", "time_s", "speedup", "wan_rpcs", "wan_rpc_bytes",
               "wan_bcasts", "wan_bcast_bytes", "result"]
    traffic_columns = ["app", "wan_rpcs_original", "wan_rpcs_optimized", "rpc_reduction", "wan_rpc_bytes_original",
                       "wan_rpc_bytes_optimized", "rpc_bytes_reduction", "wan_bcasts_original", "wan_bcasts_optimized",
                       "wan_bcast_bytes_original", "wan_bcast_bytes_optimized", "msgs_reduction", "bytes_reduction",
                       "study_rpcs_before", "study_rpcs_after", "study_rpc_reduction", "study_bytes_before",
                       "study_bytes_after", "study_bytes_reduction"]

    def add_options(self, ap):
        ap.add_argument("apps", nargs="*", metavar="APP",
                        help="wide-area program(s) (default: every one of `iccs-cli run --list-widearea`)")
        ap.add_argument("--threads", type=int,
                        help="N, compute threads of the big cluster (a power of two, at least 2 x --sites; the study: "
                             "60; default: what fits the host, at least 4)")
        ap.add_argument("--sites", type=int, help="sites of the multi-cluster runs (default 4, --quick 2)")
        ap.add_argument("--size", choices=["test", "paper"], default="test", help="problem size (default test)")
        ap.add_argument("--reps", type=int, help="runs per configuration; the figure is the median (default 3, "
                                                 "--quick 1)")
        ap.add_argument("--wan-latency-ms", type=float, default=STUDY_WAN_LATENCY_MS,
                        help=f"one-way WAN latency [ms] (default {STUDY_WAN_LATENCY_MS}: the study's 2.7 ms round trip)")
        ap.add_argument("--wan-bandwidth", type=int, default=STUDY_WAN_BANDWIDTH,
                        help=f"WAN bandwidth per link [bytes/s] (default {STUDY_WAN_BANDWIDTH}: 4.5 Mbit/s)")
        ap.add_argument("--timeout", type=int, default=900, help="seconds one run may take (default 900)")

    def check(self, args):
        if args.reps is None:
            args.reps = 1 if args.quick else 3
        if not 1 <= args.reps <= 50:
            raise ExperimentError(f"--reps {args.reps}: expected 1..50")
        if args.sites is None:
            args.sites = 2 if args.quick else 4
        if not 2 <= args.sites <= 16:
            raise ExperimentError(f"--sites {args.sites}: expected 2..16")
        if args.wan_latency_ms < 0 or args.wan_bandwidth < 0:
            raise ExperimentError("--wan-latency-ms and --wan-bandwidth must be >= 0")
        if not 10 <= args.timeout <= 86400:
            raise ExperimentError(f"--timeout {args.timeout}: expected 10..86400 seconds")
        if args.quick:
            args.size = "test"

    def host_layout(self, args, cores):
        self.layout = HostLayout(args, cores, min_threads=args.sites)
        if self.layout.threads % args.sites:
            raise ExperimentError(f"--sites {args.sites}: does not divide the {self.layout.threads} compute threads")
        return self.layout

    def threads_wanted(self, polling):
        return self.layout.threads

    def plan(self, args):
        names = registry(self.cli_of(args))
        apps = list(args.apps) or names
        for a in apps:
            if a not in names:
                raise ExperimentError(f"APP '{a}': allowed values are {', '.join(names)} (iccs-cli run --list-widearea)")
        args.app_list = list(dict.fromkeys(apps))
        n, s = self.layout.threads, args.sites
        per = n // s
        configs = []
        for app in args.app_list:
            configs.append({"app": app, "bar": "lower", "clusters": 1, "per": per, "variant": "original"})
            configs.append({"app": app, "bar": "sites", "clusters": s, "per": per, "variant": "both"})
            configs.append({"app": app, "bar": "upper", "clusters": 1, "per": n, "variant": "original"})
        out = []
        for rep in range(args.reps):
            for c in configs:
                out.append(dict(c, rep=rep, cost=STARTUP_S + 0.3 * c["clusters"] * (2 if c["variant"] == "both" else 1),
                                id=f"{c['app']} {c['bar']}: {c['clusters']} x {c['per']} {c['variant']} "
                                   f"rep {rep + 1}/{args.reps}"))
        return out

    def cli_of(self, args):
        return getattr(args, "_cli", None) or os.environ.get("ICCS_EXPERIMENT_CLI") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "cli", "iccs-cli")

    def run_one(self, cfg, ctx):
        a = ctx.args
        args = ["run", cfg["app"], "--clusters", str(cfg["clusters"]), "--threads", str(cfg["per"]),
                "--transport", "iccs", "--proxies", "1", "--polling", ctx.polling, "--size", a.size,
                "--variant", cfg["variant"], "--json", "--set", "cluster.peer_timeout_ms=30000"]
        if cfg["clusters"] > 1:
            args += ["--wan-latency-ms", str(a.wan_latency_ms), "--wan-bandwidth", str(a.wan_bandwidth)]
        rec = {"cfg": {k: v for k, v in cfg.items() if k != "cost"}}
        try:
            rc, out, err, took, cnt = launch(ctx, args)
        except RunTimeout as e:
            rec["timeout"] = str(e)
            return rec, float(a.timeout), None
        if rc == 2:
            raise ExperimentError(f"iccs-cli {' '.join(args)}: usage error: {err.strip()[-1500:]}")
        line = next((ln for ln in reversed(out.splitlines()) if ln.strip()), "")
        try:
            j = json.loads(line)
        except ValueError:
            raise ExperimentError(f"iccs-cli {' '.join(args)} (exit {rc}) printed no JSON:\n{err[-1500:]}")
        runs = j.get("runs") or [j]
        rec["runs"] = [{k: r.get(k) for k in ("variant", "result", "time_s", "seq_s", "wan_rpcs", "wan_rpc_bytes",
                                               "wan_bcasts", "wan_bcast_bytes", "msgs", "msg_bytes", "failure")}
                       for r in runs]
        rec["took_s"] = round(took, 3)
        if rc != 0 or j.get("result") != "PASS":
            rec["error"] = f"iccs-cli {' '.join(args)}: {j.get('result')} (exit {rc}): " + \
                           "; ".join(str(r.get("failure")) for r in runs if r.get("failure"))
            print(f"run failed (recorded; the sweep goes on): {rec['error'][:2000]}", flush=True)
        return rec, took, cnt

    def summarize(self, raw, args):
        seq = {}
        for r in raw:
            for x in r.get("runs", []):
                if x.get("seq_s"):
                    seq.setdefault(r["cfg"]["app"], []).append(x["seq_s"])
        groups = {}
        for r in raw:
            c = r["cfg"]
            variants = ("original", "optimized") if c["variant"] == "both" else (c["variant"],)
            for x in r.get("runs") or [{"variant": v, "result": "FAIL"} for v in variants]:
                groups.setdefault((c["app"], c["bar"], x["variant"]), []).append((r, x))
        rows = []
        order = {"lower": 0, "sites": 1, "upper": 2}
        for (app, bar, variant), rs in sorted(groups.items(), key=lambda kv: (args.app_list.index(kv[0][0]),
                                                                              order[kv[0][1]],
                                                                              kv[0][2] != "original")):
            c = rs[0][0]["cfg"]
            ok = [x for r, x in rs if x.get("result") == "PASS" and x.get("time_s")]
            row = {"app": app, "variant": variant, "clusters": c["clusters"], "processes": c["clusters"] * c["per"],
                   "bar": bar, "result": "PASS" if ok and len(ok) == len(rs) else "FAIL"}
            if ok:
                row["time_s"] = round(median([x["time_s"] for x in ok]), 6)
                base = median(seq.get(app, []))
                row["speedup"] = float(f"{base / row['time_s']:.4g}") if base else None
                for k in ("wan_rpcs", "wan_rpc_bytes", "wan_bcasts", "wan_bcast_bytes"):
                    row[k] = int(median([x[k] for x in ok]))
            rows.append(row)
        traffic = []
        for app in args.app_list:
            o = next((r for r in rows if r["app"] == app and r["bar"] == "sites" and r["variant"] == "original"), {})
            p = next((r for r in rows if r["app"] == app and r["bar"] == "sites" and r["variant"] == "optimized"), {})
            if "wan_rpcs" not in o or "wan_rpcs" not in p:
                continue
            t = {"app": app}
            for k in ("wan_rpcs", "wan_rpc_bytes", "wan_bcasts", "wan_bcast_bytes"):
                t[k + "_original"], t[k + "_optimized"] = o[k], p[k]
            t["rpc_reduction"] = fmt_factor(o["wan_rpcs"], p["wan_rpcs"])
            t["rpc_bytes_reduction"] = fmt_factor(o["wan_rpc_bytes"], p["wan_rpc_bytes"])
            t["msgs_reduction"] = fmt_factor(o["wan_rpcs"] + o["wan_bcasts"], p["wan_rpcs"] + p["wan_bcasts"])
            t["bytes_reduction"] = fmt_factor(o["wan_rpc_bytes"] + o["wan_bcast_bytes"],
                                              p["wan_rpc_bytes"] + p["wan_bcast_bytes"])
            st = STUDY.get(app, {})
            t["study_rpcs_before"], t["study_rpcs_after"] = st.get("rpcs_before"), st.get("rpcs_after")
            t["study_rpc_reduction"] = fmt_factor(st.get("rpcs_before"), st.get("rpcs_after"))
            t["study_bytes_before"], t["study_bytes_after"] = st.get("bytes_before"), st.get("bytes_after")
            t["study_bytes_reduction"] = fmt_factor(st.get("bytes_before"), st.get("bytes_after"))
            traffic.append(t)
        n, s = self.layout.threads, args.sites
        notes = [f"scaling: {self.layout.layout}",
                 f"Figure 15 scaled to the host: lower bound 1 cluster of {n // s}, {s} sites of {n // s} (original and "
                 f"optimized; WAN {args.wan_latency_ms} ms one way, {args.wan_bandwidth} bytes/s per link), upper bound "
                 f"1 cluster of {n} (the study: 15, 4 x 15, 60)",
                 "speedup = the program's sequential time (median seq_s of its runs) / the parallel section"]
        for t in traffic:
            notes.append(f"traffic {t['app']}: WAN RPCs {t['wan_rpcs_original']} -> {t['wan_rpcs_optimized']} "
                         f"({t['rpc_reduction'] or '-'}x; study {t['study_rpc_reduction'] or '-'}x), RPC bytes "
                         f"{t['wan_rpc_bytes_original']} -> {t['wan_rpc_bytes_optimized']} ({t['rpc_bytes_reduction'] or '-'}x; "
                         f"study {t['study_bytes_reduction'] or '-'}x), broadcasts {t['wan_bcasts_original']} -> "
                         f"{t['wan_bcasts_optimized']}, messages {t['msgs_reduction']}x, bytes {t['bytes_reduction']}x")
        failed = [f"{r['app']} {r['bar']} {r['variant']}: FAIL (see raw in the JSON)" for r in rows if r["result"] != "PASS"]
        self.traffic = traffic
        return rows, {"threads": n, "sites": s, "traffic": traffic, "study": STUDY,
                      "wan": {"latency_ms": args.wan_latency_ms, "bandwidth_bytes_per_s": args.wan_bandwidth}}, \
            notes + failed

    def plot(self, plt, rows, extra, meta, path):
        d = os.path.dirname(path)
        with open(os.path.join(d, "widearea-traffic.csv"), "w", newline="") as f:
            f.write("# Tables 4/5 (Bal et al. 1998): inter-site traffic on the multi-site runs, original -> optimized, "
                    "with the study's (64 processes, 4 clusters) where known\n")
            w = csv.DictWriter(f, fieldnames=self.traffic_columns, extrasaction="ignore")
            w.writeheader()
            for t in extra["traffic"]:
                w.writerow({k: ("" if t.get(k) is None else t.get(k)) for k in self.traffic_columns})
        apps = list(dict.fromkeys(r["app"] for r in rows))
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(max(8, 2.2 * len(apps) + 5), 4.2),
                                      gridspec_kw={"width_ratios": [2, 1]})
        bars = [("lower", "original", "1 cluster of N/S (lower bound)", "0.75"),
                ("sites", "original", "S sites, original", "tab:red"),
                ("sites", "optimized", "S sites, optimized", "tab:green"),
                ("upper", "original", "1 cluster of N (upper bound)", "0.3")]
        wdt = 0.2
        for k, (bar, variant, label, color) in enumerate(bars):
            ys = [next((r.get("speedup") or 0 for r in rows if r["app"] == a and r["bar"] == bar
                        and r["variant"] == variant), 0) for a in apps]
            ax.bar([i + (k - 1.5) * wdt for i in range(len(apps))], ys, wdt, label=label, color=color)
        ax.set_xticks(range(len(apps)))
        ax.set_xticklabels(apps)
        ax.set_ylabel("speedup (sequential / parallel)")
        ax.set_title(f"N = {extra['threads']}, S = {extra['sites']} sites; WAN {extra['wan']['latency_ms']} ms, "
                     f"{extra['wan']['bandwidth_bytes_per_s']} B/s", fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", lw=0.3)
        tr = extra["traffic"]
        names = [t["app"] for t in tr]
        def num(v):
            return 0 if v is None else 1e4 if v == "inf" else v
        ours = [num(t["msgs_reduction"]) for t in tr]
        study = [num(t["study_rpc_reduction"]) for t in tr]
        ax2.bar([i - 0.2 for i in range(len(tr))], ours, 0.4, label="here: WAN messages orig/opt", color="tab:blue")
        ax2.bar([i + 0.2 for i in range(len(tr))], study, 0.4, label="study: WAN RPCs before/after", color="0.6")
        ax2.set_yscale("log")
        ax2.set_xticks(range(len(tr)))
        ax2.set_xticklabels(names, fontsize=8)
        ax2.set_ylabel("reduction factor (log)")
        ax2.set_title("Tables 4/5: inter-site traffic reduction", fontsize=8)
        ax2.legend(fontsize=7)
        ax2.grid(True, axis="y", lw=0.3)
        fig.suptitle(meta["figure_title"], fontsize=8)
        save_fig(fig, path)
        plt.close(fig)
