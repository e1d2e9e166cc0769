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
import model_rows

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
        model_rows.add_model_options(ap, beyond=True)
        ap.add_argument("--beyond", default="16,32,64,128,256",
                        help="--model: cluster sizes projected beyond the study, 2 clusters each (default "
                             "16,32,64,128,256)")

    def check(self, args):
        args.apps = [args.apps] if isinstance(args.apps, str) else args.apps
        check_apps(args, ["water"])
        model_rows.check_model(args)
        if args.model:
            self.columns = Scaling.columns + model_rows.MODEL_COLUMNS
            args.beyond_list = parse_int_list(args.beyond, "--beyond")
            if any(b < 1 or b > 4096 for b in args.beyond_list):
                raise ExperimentError(f"--beyond '{args.beyond}': each cluster size must be 1..4096")
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
        return model_rows.trace_cfgs(out, args)

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
        if args.model:
            rows, model_summary, model_notes = self.model(raw, args, rows)
            notes += model_notes
        summary = {"threads": self.layout.threads, "rounding": "nearest integer, half up",
                   "study_water_table2": {"cluster_size": [1, 2, 4, 8], "msg_time_cycles": [8920, 9232, 8017, 8243],
                                          "queue_len": [0.53, 0.64, 0.50, 0.56],
                                          "proxy_util": [0.35, 0.39, 0.36, 0.38],
                                          "slowdown": [2.40, 2.26, 1.92, 1.57]}}
        if args.model:
            summary["model"] = model_summary
        return rows, summary, notes

    def model(self, raw, args, rows):
        """The measured rows (source measured), the replays of their traces, and the projections."""
        import project
        for r in rows:
            r["source"] = "measured"
        keys = ("app", "threads", "cluster_size", "clusters", "proxies_per_cluster")
        val, pairs = model_rows.validation_rows(raw, args, keys)
        model_rows.copy_host_columns(val, rows, ("app", "threads", "cluster_size", "proxies_per_cluster"))
        app = args.app_list[0]
        prof, pinfo = model_rows.app_profile(raw, app)
        notes = [f"model: costs {args.costs_path}"]
        for p in pairs:
            notes.append("model validation S={cluster_size} x{clusters} P={proxies_per_cluster}: message time "
                         "{msg_time_us} us modeled / {measured_msg_time_us} measured (medians {msg_time_median_us} / "
                         "{measured_msg_time_median_us}); queue length {queue_len} / {measured_queue_len}; "
                         "utilization {proxy_util} / {measured_proxy_util}".format(**p))
        study, beyond, flat = [], [], {}
        if prof is None:
            notes.append("model: no traced ICCS run succeeded: no projection")
        else:
            base = {"app": app}
            study = model_rows.projected_rows(prof, args, project.study_layouts(args.model_threads), base)
            beyond = model_rows.projected_rows(prof, args, project.beyond_layouts(args.beyond_list), base)
            for r in study:
                r["model_set"] = "study"
            for r in beyond:
                r["model_set"] = "beyond"
            flat = {"study": project.flat_rule(study), "beyond": project.flat_rule(beyond)}
            for name, rs in (("study", study), ("beyond", beyond)):
                sq = [r for r in rs if r["rule"] == "sqrt"]
                notes.append(f"model, {name} layouts, proxies = round(sqrt(S)): " + "; ".join(
                    f"S={r['cluster_size']} P={r['proxies_per_cluster']}: {r['msg_time_us']:.1f} us, queue "
                    f"{r['queue_len']:.3f}, util {r['proxy_util']:.3f}, slowdown {r['slowdown']:.2f}" for r in sq))
                notes.append(f"model, {name} layouts: fewest proxies per cluster whose message time is within 10% of "
                             f"the best at that size: " + ", ".join(f"S={s}: {p}" for s, p in flat[name].items()))
        summary = {"costs_file": args.costs_path, "profile": pinfo, "validation": pairs, "flat_rule_msg_time": flat,
                   "projection_polling": "busy (dedicated proxy cores)", "validation_polling": "adaptive (as run)"}
        return rows + val + study + beyond, summary, notes

    def plot(self, plt, rows, extra, meta, path):
        modeled = [r for r in rows if r.get("source") == "modeled"]
        rows = [r for r in rows if r.get("source", "measured") == "measured"]
        if modeled:
            return self.plot_model(plt, rows, modeled, extra, meta, path)
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

    def plot_model(self, plt, measured, modeled, extra, meta, path):
        """Table 2 redrawn: top, the study's layouts (modeled: a line per proxies-per-cluster, the
        sqrt rule bold; the study's Water figures for the shape; this host's measured rows and their
        replays as points); bottom, clusters beyond the study (2 clusters each)."""
        keys = (("msg_time_us", "message time [us]"), ("queue_len", "queue length (mean)"),
                ("proxy_util", "proxy utilization"), ("slowdown", "slowdown vs no delay"))
        fig, axes = plt.subplots(2, 4, figsize=(17, 7.5))
        study = [r for r in modeled if r.get("model_set") == "study"]
        beyond = [r for r in modeled if r.get("model_set") == "beyond"]
        replay = [r for r in modeled if r.get("rule", "").startswith("replay")]
        t2 = extra.get("study_water_table2", {})
        threads = study[0]["threads"] if study else None
        for row_i, (rs, title) in enumerate(((study, f"modeled: {threads} compute threads (the study's "
                                                       f"layouts), dedicated proxies"),
                                             (beyond, "modeled: 2 clusters of S compute threads"))):
            for ax, (k, label) in zip(axes[row_i], keys):
                for p in sorted({r["proxies_per_cluster"] for r in rs}):
                    pts = sorted((r["cluster_size"], r[k]) for r in rs if r["proxies_per_cluster"] == p
                                 and r.get(k) is not None)
                    if pts:
                        ax.plot([x for x, _ in pts], [y for _, y in pts], "-", lw=0.7, alpha=0.6, label=f"P={p}")
                sq = sorted((r["cluster_size"], r[k]) for r in rs if r.get("rule") == "sqrt" and r.get(k) is not None)
                if sq:
                    ax.plot([x for x, _ in sq], [y for _, y in sq], "k-o", lw=2, label="P = round(sqrt(S))")
                if row_i == 0:
                    mp = [(r["cluster_size"], r.get(k)) for r in measured if r.get(k) is not None]
                    if mp:
                        ax.plot([x for x, _ in mp], [y for _, y in mp], "rs", label="measured on this host")
                    rp = [(r["cluster_size"], r.get(k)) for r in replay if r.get(k) is not None]
                    if rp:
                        ax.plot([x for x, _ in rp], [y for _, y in rp], "bx", ms=8, label="modeled replay of those runs")
                    if k in ("queue_len", "proxy_util", "slowdown") and t2:
                        ax.plot(t2["cluster_size"], t2[k], "g:^", label="the study (Water, Alewife)")
                ax.set_xscale("log", base=2)
                ax.set_xlabel("cluster size S (compute threads per cluster)")
                ax.set_ylabel(label)
                ax.set_ylim(bottom=0)
                ax.grid(True, lw=0.3)
            axes[row_i][0].set_title(title, fontsize=9, loc="left")
            axes[row_i][3].legend(fontsize=6, ncol=2)
        axes[0][0].legend(fontsize=6)
        app = measured[0]["app"] if measured else modeled[0]["app"]
        fig.suptitle(f"{app}: {meta['figure_title']} + the proxy model (perf/model/)", fontsize=9)
        save_fig(fig, path)
        plt.close(fig)

