"""exp_scaling.py: `./iccs experiment scaling [APP]`, the study's Table 2: cluster sizes 1, 2, 4, 8
with the proxies per cluster scaled as sqrt(cluster size), ROUNDED TO THE NEAREST integer, half up
(1 -> 1, 2 -> 1.41 -> 1, 4 -> 2, 8 -> 2.83 -> 3; the config's `auto` rounds up instead, so it is
not used here): the ICCS's message time, queue length and proxy utilization (means over the
proxies, from the run's `iccs` counters), and the slowdown against `no delay` (transport direct)
at the same cluster size. Default application: water (the study's Table 2).

Scaled to the host (app_runs.py): T compute threads in total; the cluster sizes are 1, 2, 4, 8
that leave at least 2 clusters (T / size >= 2). Each cluster size runs the ICCS and no delay,
--reps times each, interleaved; figures are medians over the runs.
"""
from app_runs import STARTUP_S, iccs_stats, round_sqrt, rt_stats, save_fig, threads_total, times
from exp_apps import AppExperiment, parse_int_list
from app_runs import add_app_options, check_apps, fail_counts
from framework import ExperimentError

STUDY_SIZES = [1, 2, 4, 8]


class Scaling(AppExperiment):
    name = "scaling"
    figure = "Table 2"
    title = "proxies per cluster = round(sqrt(cluster size)): message time, queue length, utilization, slowdown"
    columns = ["app", "threads", "cluster_size", "clusters", "proxies_per_cluster", "msg_time_us", "queue_len",
               "proxy_util", "slowdown", "time_s", "direct_time_s", "reps", "msgs", "mean_msg_bytes",
               "proxy_tx_imbalance", "threads_total", "oversubscribed", "timeouts", "failures"]

    def add_options(self, ap):
        add_app_options(ap, "?", "water")
        ap.add_argument("--cluster-sizes", help="comma-separated cluster sizes (default the study's 1,2,4,8 that "
                                                "leave at least 2 clusters)")

    def check(self, args):
        args.apps = [args.apps] if isinstance(args.apps, str) else args.apps
        check_apps(args, ["water"])
        args.cluster_size_list = parse_int_list(args.cluster_sizes, "--cluster-sizes") if args.cluster_sizes else None

    def sizes(self, args):
        t = self.layout.threads
        if args.cluster_size_list is None:
            return [s for s in STUDY_SIZES if t // s >= 2 and t % s == 0]
        for s in args.cluster_size_list:
            if s < 1 or t % s or t // s < 2:
                raise ExperimentError(f"--cluster-sizes: {s} does not leave at least 2 clusters of the {t} compute "
                                      f"threads")
        return sorted(set(args.cluster_size_list))

    def plan(self, args):
        t = self.layout.threads
        app = args.app_list[0]
        cfgs = []
        for s in self.sizes(args):
            c = t // s
            base = {"app": app, "threads": t, "cluster_size": s, "clusters": c}
            cfgs.append(dict(base, config="no delay", transport="direct", proxies_per_cluster=0))
            cfgs.append(dict(base, config="iccs", transport="iccs", proxies_per_cluster=round_sqrt(s),
                             dispatch="round-robin"))
        out = []
        for rep in range(args.reps):
            for cfg in cfgs:
                out.append(dict(cfg, rep=rep, cost=STARTUP_S + 0.3 * cfg["clusters"],
                                id=f"{app} S={cfg['cluster_size']} x{cfg['clusters']} {cfg['config']}"
                                   f"{' P/cluster=%d' % cfg['proxies_per_cluster'] if cfg['transport'] == 'iccs' else ''}"
                                   f" rep {rep + 1}/{args.reps}"))
        return out

    def run_one(self, cfg, ctx):
        return self.run_cfg(cfg, ctx)

    def summarize(self, raw, args):
        by = {}
        for r in raw:
            by.setdefault((r["cfg"]["cluster_size"], r["cfg"]["transport"]), []).append(r)
        rows = []
        for s in sorted({k[0] for k in by}):
            ic, dr = by.get((s, "iccs"), []), by.get((s, "direct"), [])
            c = ic[0]["cfg"]
            ok = [r["run"] for r in ic if r["run"] is not None]
            okd = [r["run"] for r in dr if r["run"] is not None]
            row = {k: c[k] for k in ("app", "threads", "cluster_size", "clusters", "proxies_per_cluster")}
            row["timeouts"], row["failures"] = fail_counts(ic + dr)
            row["threads_total"] = threads_total(c["threads"], c["clusters"], c["proxies_per_cluster"])
            row["oversubscribed"] = row["threads_total"] > self.layout.cores
            if ok:
                row.update(times(ok))
                row.update(iccs_stats(ok))
                row.update(rt_stats(ok))
                del row["time_min_s"], row["time_max_s"]
            if okd:
                row["direct_time_s"] = times(okd)["time_s"]
            row["slowdown"] = round(row["time_s"] / row["direct_time_s"], 3) \
                if row.get("time_s") and row.get("direct_time_s") else None
            rows.append(row)
        notes = [f"scaling: {self.layout.layout}",
                 "proxies per cluster = round(sqrt(cluster size)), to the nearest integer, half up: "
                 + ", ".join(f"{r['cluster_size']} -> {r['proxies_per_cluster']}" for r in rows)]
        notes += self.failure_notes(rows)
        for r in rows:
            if r.get("msg_time_us") is None and r.get("time_s") is not None:
                notes.append(f"cluster size {r['cluster_size']}: the run gave no message time (null in its iccs "
                             f"counters): left empty")
        summary = {"threads": self.layout.threads, "rounding": "nearest integer, half up",
                   "study_water_table2": {"cluster_size": [1, 2, 4, 8], "msg_time_cycles": [8920, 9232, 8017, 8243],
                                          "queue_len": [0.53, 0.64, 0.50, 0.56],
                                          "proxy_util": [0.35, 0.39, 0.36, 0.38],
                                          "slowdown": [2.40, 2.26, 1.92, 1.57]}}
        return rows, summary, notes

    def plot(self, plt, rows, extra, meta, path):
        over = ""  # the runner's label in figure_title says which rows were oversubscribed
        fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
        xs = [r["cluster_size"] for r in rows]
        for ax, key, label in zip(axes, ("msg_time_us", "queue_len", "proxy_util", "slowdown"),
                                  ("message time in the ICCS [us]", "queue length (mean)", "proxy utilization",
                                   "slowdown vs no delay")):
            pts = [(x, r.get(key)) for x, r in zip(xs, rows) if r.get(key) is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-")
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs)
            ax.set_xticklabels([f"{r['cluster_size']}\n({r['proxies_per_cluster']} px)" for r in rows])
            ax.set_xlabel("cluster size (proxies per cluster)")
            ax.set_ylabel(label)
            ax.set_ylim(bottom=0)
            ax.grid(True, lw=0.3)
        app = rows[0]["app"] if rows else ""
        fig.suptitle(f"{app}: {meta['figure_title']}{over}", fontsize=9)
        save_fig(fig, path)
        plt.close(fig)
