"""exp_widearea.py: `./iccs experiment widearea [APP...]`, the wide-area suite of Bal, Plaat et al.
(1998-99; apps/widearea/): their Figure 15 and Tables 4/5.

Figure 15: per program four speedups: one cluster of N/4 compute threads (the lower bound of what
is acceptable), the original and the optimized (cluster-aware) program on 4 sites of N/4 threads
joined by emulated WAN links, and one cluster of N threads (the upper bound). The study: N = 60
(4 clusters of 15), WAN round trip 2.7 ms and 4.5 Mbit/s per link; here N is scaled to the host
(app_runs.HostLayout: a power of two, at least 4; labelled), the WAN is the study's by default
(--wan-latency-ms 1.35 one way, --wan-bandwidth 562500 bytes/s). Speedup = the program's
sequential time (seq_s, measured by the same runs: the median over the app's runs) / the parallel
section's time. Every run is `iccs-cli run APP --json` over transport iccs, 1 proxy per cluster;
the multi-site runs take every variant of the program in one launch (--variant all: original,
the study's optimized where it made one, and our own variants).

Tables 4/5: the inter-site traffic of every variant on the multi-site runs (RPCs and their KB,
broadcast messages and their KB, counted as Orca did: a sequencer's messages are broadcast
traffic), beside the study's cell for cell (64 processes on 4 clusters) with the ratio ours/study,
printed and in widearea-traffic.csv. The counts depend on the shape (sites, threads per site) and
the input: only --tables runs the study's shape (4 sites of 16 compute threads over transport
direct: 64 threads on this host's cores, so the times mean nothing there, the counts are exact;
no Figure 15 bars). Study cells not in our sources are empty.

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

# Bal et al. 1998, Tables 4 (original) and 5 (optimized): inter-cluster traffic with 64 processes
# on 4 clusters: RPCs, RPC kbytes, broadcasts, broadcast kbytes; None where our sources do not give
# the figure (water-wa's bytes are given in MB there). ACP: the study made no optimization (Table
# 5: "-") and its Table 4 row is not in our sources.
STUDY = {
    "water-wa": {"original": (25665, 56800, None, None), "optimized": (4609, 5200, None, None)},
    "tsp-wa": {"original": (12221, None, None, None), "optimized": (111, None, None, None)},
    "asp": {"original": (111, 976, 38139, 53171), "optimized": (313, 959, 9558, 52407)},
    "atpg": {"original": (3451, 206, 1659, 76), "optimized": (573, 481, 3531, 656)},
    "ida": {"original": (18337, 1655, 26907, 1653), "optimized": (6461, 708, 31239, 2065)},
    "ra": {"original": (1308409, None, None, None), "optimized": (39315, None, None, None)},
    "sor": {"original": (1443, 4395, 5199, 260), "optimized": (807, 1553, 4578, 219)},
}
STUDY_CELLS = ("rpcs", "rpc_kb", "bcasts", "bcast_kb")
KB = 1024                        # the study's kbytes (bytes / 1024 here)
TABLES_SITES, TABLES_THREADS = 4, 16  # the study's shape: 64 processes on 4 clusters
# Where a comparison with the study's row is not like for like.
CAVEATS = {"water-wa": "communication pattern only: not the study's Water physics",
           "acp": "the study's Table 4 row is not in our sources; async-bcast is ours"}
STUDY_WAN_LATENCY_MS = 1.35      # one way: the study's 2.7 ms round trip
STUDY_WAN_BANDWIDTH = 562500     # bytes/s: 4.5 Mbit/s
STARTUP_S = 1.5                  # a launch of 1..4 cluster processes over iccs, measured on the 2-core hosts


def registry(cli):
    """The wide-area programs the build has, from `iccs-cli run --list-widearea`."""
    return list(variants_of(cli))


def variants_of(cli):
    """{program: [its variants]} from `iccs-cli run --list-widearea` (name, help, variants)."""
    try:
        p = subprocess.run([cli, "run", "--list-widearea"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60)
    except OSError as e:
        raise ExperimentError(f"{cli}: {e}")
    progs = {f[0]: (f[2].split(",") if len(f) > 2 else []) for f in (ln.split("\t") for ln in p.stdout.splitlines()
                                                                     if ln.strip())}
    if p.returncode != 0 or not progs:
        raise ExperimentError(f"{cli} run --list-widearea listed no program (exit {p.returncode}): {p.stderr[-500:]}")
    return progs


class Widearea:
    name = "widearea"
    figure = "Bal et al. 1998, Figure 15 and Tables 4/5"
    title = "wide-area programs: speedup on 1 cluster, on 4 sites original / optimized, on 1 big cluster; WAN traffic"
    columns = ["app", "variant", "clusters", "processes", "time_s", "speedup", "wan_rpcs", "wan_rpc_bytes",
               "wan_bcasts", "wan_bcast_bytes", "result"]
    traffic_columns = ["app", "variant", "table", "sites", "processes", "rpcs", "rpc_kb", "bcasts", "bcast_kb",
                       "study_rpcs", "study_rpc_kb", "study_bcasts", "study_bcast_kb", "ratio_rpcs", "ratio_rpc_kb",
                       "ratio_bcasts", "ratio_bcast_kb", "caveat"]

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
        ap.add_argument("--tables", action="store_true",
                        help=f"Tables 4/5 only, at the study's shape: {TABLES_SITES} sites of {TABLES_THREADS} compute "
                             "threads over transport direct (counts exact, times meaningless; no Figure 15 bars)")

    def check(self, args):
        if args.reps is None:
            args.reps = 1 if args.quick or args.tables else 3
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
        if args.tables and args.quick:
            raise ExperimentError("--tables runs the study's shape (64 compute threads); --quick does not apply")

    def host_layout(self, args, cores):
        if args.tables:  # the study's shape whatever the host: the counts, not the times
            args.threads, args.sites = TABLES_SITES * TABLES_THREADS, TABLES_SITES
            args.oversubscribe = True
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
            if args.tables:
                configs.append({"app": app, "bar": "tables", "clusters": s, "per": per, "variant": "all"})
                continue
            configs.append({"app": app, "bar": "lower", "clusters": 1, "per": per, "variant": "original"})
            configs.append({"app": app, "bar": "sites", "clusters": s, "per": per, "variant": "all"})
            configs.append({"app": app, "bar": "upper", "clusters": 1, "per": n, "variant": "original"})
        out = []
        for rep in range(args.reps):
            for c in configs:
                out.append(dict(c, rep=rep, cost=STARTUP_S + 0.3 * c["clusters"] * (2 if c["variant"] == "all" else 1),
                                id=f"{c['app']} {c['bar']}: {c['clusters']} x {c['per']} {c['variant']} "
                                   f"rep {rep + 1}/{args.reps}"))
        return out

    def cli_of(self, args):
        return getattr(args, "_cli", None) or os.environ.get("ICCS_EXPERIMENT_CLI") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "cli", "iccs-cli")

    def run_one(self, cfg, ctx):
        a = ctx.args
        args = ["run", cfg["app"], "--clusters", str(cfg["clusters"]), "--threads", str(cfg["per"])]
        args += ["--transport", "direct"] if cfg["bar"] == "tables" else \
            ["--transport", "iccs", "--proxies", "1", "--polling", ctx.polling, "--set", "cluster.peer_timeout_ms=30000"]
        args += ["--size", a.size, "--variant", cfg["variant"], "--json"]
        if cfg["clusters"] > 1 and cfg["bar"] != "tables":
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
                                               "wan_bcasts", "wan_bcast_bytes", "msgs", "msg_bytes", "failure", "stats")}
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
            for x in r.get("runs") or [{"variant": c["variant"], "result": "FAIL"}]:
                groups.setdefault((c["app"], c["bar"], x["variant"]), []).append((r, x))
        rows = []
        order = {"lower": 0, "sites": 1, "tables": 1, "upper": 2}
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
                stats = ok[0].get("stats") or {}
                if "iterations" in stats and "seq_iterations" in stats:  # sor: the variant's iterations
                    row["iterations"], row["seq_iterations"] = stats["iterations"], stats["seq_iterations"]
            rows.append(row)
        traffic = self.tables(rows, args)
        n, s = self.layout.threads, args.sites
        notes = [f"scaling: {self.layout.layout}"]
        if args.tables:
            notes.append(f"Tables 4/5 at the study's shape: {s} sites x {n // s} compute threads over transport direct "
                         f"({n} threads on this host: times meaningless, counts exact), size {args.size}")
        else:
            notes += [f"Figure 15 scaled to the host: lower bound 1 cluster of {n // s}, {s} sites of {n // s} (every "
                      f"variant; WAN {args.wan_latency_ms} ms one way, {args.wan_bandwidth} bytes/s per link), upper "
                      f"bound 1 cluster of {n} (the study: 15, 4 x 15, 60)",
                      "speedup = the program's sequential time (median seq_s of its runs) / the parallel section",
                      f"Tables 4/5 below at {s} sites x {n // s} threads: the study's cells are at 4 x 16 (ratios "
                      f"compare shapes that differ unless --tables)"]
        notes += self.table_text(traffic, args)
        failed = [f"{r['app']} {r['bar']} {r['variant']}: FAIL (see raw in the JSON)" for r in rows if r["result"] != "PASS"]
        self.traffic = traffic
        return rows, {"threads": n, "sites": s, "traffic": traffic, "study": STUDY, "tables": bool(args.tables),
                      "wan": {"latency_ms": args.wan_latency_ms, "bandwidth_bytes_per_s": args.wan_bandwidth}}, \
            notes + failed

    def tables(self, rows, args):
        """Tables 4/5: a row per program and variant of the multi-site runs, with the study's cells
        (Table 4 for original, Table 5 for optimized; our own variants have none) and ours / study."""
        out = []
        for r in rows:
            if r["bar"] not in ("sites", "tables") or "wan_rpcs" not in r:
                continue
            ours = (r["wan_rpcs"], r["wan_rpc_bytes"] / KB, r["wan_bcasts"], r["wan_bcast_bytes"] / KB)
            study = STUDY.get(r["app"], {}).get(r["variant"], (None,) * 4)
            t = {"app": r["app"], "variant": r["variant"], "sites": r["clusters"], "processes": r["processes"],
                 "table": {"original": "4", "optimized": "5"}.get(r["variant"], "ours"),
                 "caveat": CAVEATS.get(r["app"], "")}
            for k, o, st in zip(STUDY_CELLS, ours, study):
                t[k] = round(o, 1) if isinstance(o, float) else o
                t["study_" + k] = st
                t["ratio_" + k] = (round(o / st, 3) if st else None) if st is not None else None
            if "iterations" in r:
                t["iterations"], t["seq_iterations"] = r["iterations"], r["seq_iterations"]
            out.append(t)
        return out

    def table_text(self, traffic, args):
        """The tables as text: per program and variant ours | study | ours/study, cell by cell."""
        def cell(v):
            return "-" if v is None else f"{v:,.0f}" if isinstance(v, (int, float)) else str(v)

        def ratio(v):
            return "-" if v is None else f"{v:.3g}"
        head = f"{'app':<9} {'variant':<11} {'tbl':<4}" + "".join(f" {h:>30}" for h in
                                                                  ("RPCs", "RPC KB", "broadcasts", "broadcast KB"))
        lines = ["Tables 4/5: WAN traffic, each cell ours | study | ours/study (study: 64 processes, 4 clusters; "
                 "'-': not in our sources or no study variant; KB = 1024 bytes)", head]
        for t in traffic:
            cells = "".join(f" {cell(t[k]):>12} |{cell(t['study_' + k]):>10} |{ratio(t['ratio_' + k]):>6}"
                            for k in STUDY_CELLS)
            extra = ""
            if "iterations" in t:
                extra = f"  [iterations {t['iterations']}, sequential {t['seq_iterations']}]"
            if t["caveat"]:
                extra += f"  [{t['caveat']}]"
            lines.append(f"{t['app']:<9} {t['variant']:<11} {t['table']:<4}{cells}{extra}")
        return lines

    def plot(self, plt, rows, extra, meta, path):
        d = os.path.dirname(path)
        with open(os.path.join(d, "widearea-traffic.csv"), "w", newline="") as f:
            f.write("# Tables 4/5 (Bal et al. 1998): inter-site traffic of every variant on the multi-site runs, "
                    "beside the study's (64 processes, 4 clusters) cell for cell, ratio = ours / study; KB = 1024 "
                    "bytes\n")
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
        names = [a for a in dict.fromkeys(t["app"] for t in tr)]

        def wan_msgs(app, variant, study=False):
            t = next((x for x in tr if x["app"] == app and x["variant"] == variant), None)
            if t is None:
                return None
            k = ("study_" if study else "")
            return t[k + "rpcs"] + (t[k + "bcasts"] or 0) if t[k + "rpcs"] is not None else None

        def factor(app, study=False):
            a, b = wan_msgs(app, "original", study), wan_msgs(app, "optimized", study)
            return 0 if not a or b is None else 1e4 if b == 0 else a / b
        ours = [factor(a) for a in names]
        study = [factor(a, True) for a in names]
        ax2.bar([i - 0.2 for i in range(len(names))], ours, 0.4, label="here: WAN messages orig/opt", color="tab:blue")
        ax2.bar([i + 0.2 for i in range(len(names))], study, 0.4, label="study: WAN messages before/after",
                color="0.6")
        ax2.set_yscale("log")
        ax2.set_xticks(range(len(names)))
        ax2.set_xticklabels(names, fontsize=8)
        ax2.set_ylabel("reduction factor (log)")
        ax2.set_title("Tables 4/5: inter-site traffic reduction", fontsize=8)
        ax2.legend(fontsize=7)
        ax2.grid(True, axis="y", lw=0.3)
        fig.suptitle(meta["figure_title"], fontsize=8)
        save_fig(fig, path)
        plt.close(fig)
