"""exp_dispatch.py: `./iccs experiment dispatch [APP]`, the result the study omitted: the
convergence module's dispatch policy, fixed (thread t always uses proxy t mod P) against
round-robin against least-loaded (shortest ring), on one configuration: 2 clusters of T/2 compute
threads (the largest cluster size with inter-cluster traffic), --proxies per cluster (default 2:
dispatch only matters with 2 or more). Per policy: run time, slowdown against no delay, the
ICCS's message time, queue length and utilization, and how evenly the proxies were loaded
(proxy_tx_imbalance = the busiest proxy's messages sent / the mean over the proxies; 1 = even).
Default application: water. Runs interleaved over --reps; figures are medians.
"""
from app_runs import STARTUP_S, add_app_options, check_apps, fail_counts, iccs_stats, rt_stats, save_fig, threads_total, times
from exp_apps import AppExperiment
from framework import ExperimentError
import model_rows

POLICIES = ["fixed", "round-robin", "least-loaded"]


class Dispatch(AppExperiment):
    name = "dispatch"
    figure = "the omitted dispatch result"
    title = "fixed vs round-robin vs least-loaded dispatch"
    columns = ["app", "threads", "cluster_size", "clusters", "proxies_per_cluster", "dispatch", "time_s",
               "time_min_s", "time_max_s", "reps", "slowdown", "msg_time_us", "queue_len", "proxy_util",
               "proxy_tx_imbalance", "msgs", "mean_msg_bytes", "threads_total", "oversubscribed", "timeouts", "failures"]

    def add_options(self, ap):
        add_app_options(ap, "?", "water")
        ap.add_argument("--proxies", type=int, default=2, help="proxies per cluster (default 2)")
        ap.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated dispatch policies (default {','.join(POLICIES)})")
        ap.add_argument("--model", action="store_true",
                        help="also the proxy model's replay of every ICCS run's trace (perf/model/): a modeled row "
                             "per policy beside the measured one (measured_* columns); needs a cost file")
        ap.add_argument("--costs", help="--model: the cost file (default: the newest results/calibrate/*/costs.json)")

    def check(self, args):
        args.apps = [args.apps] if isinstance(args.apps, str) else args.apps
        check_apps(args, ["water"])
        if not 1 <= args.proxies <= 64:
            raise ExperimentError(f"--proxies {args.proxies}: expected 1..64 proxies per cluster")
        args.policy_list = [p.strip() for p in args.policies.split(",") if p.strip()]
        bad = [p for p in args.policy_list if p not in POLICIES]
        if bad or not args.policy_list:
            raise ExperimentError(f"--policies '{args.policies}': allowed values are {', '.join(POLICIES)}")
        args.model_threads = 16
        model_rows.check_model(args)
        if args.model:
            self.columns = Dispatch.columns + model_rows.MODEL_COLUMNS

    def plan(self, args):
        t = self.layout.threads
        s, c = t // 2, 2
        base = {"app": args.app_list[0], "threads": t, "cluster_size": s, "clusters": c}
        cfgs = [dict(base, config="no delay", transport="direct", proxies_per_cluster=0)]
        cfgs += [dict(base, config=p, transport="iccs", proxies_per_cluster=args.proxies, dispatch=p)
                 for p in args.policy_list]
        return model_rows.trace_cfgs(
            [dict(cfg, rep=rep, cost=STARTUP_S + 0.6, id=f"{cfg['app']} 2 x {s} {cfg['config']} rep {rep + 1}/{args.reps}")
             for rep in range(args.reps) for cfg in cfgs], args)

    def run_one(self, cfg, ctx):
        return self.run_cfg(cfg, ctx)

    def summarize(self, raw, args):
        direct = [r["run"] for r in raw if r["cfg"]["transport"] == "direct" and r["run"] is not None]
        dt = times(direct)["time_s"] if direct else None
        rows = []
        for pol in args.policy_list:
            rs = [r for r in raw if r["cfg"].get("dispatch") == pol and r["cfg"]["transport"] == "iccs"]
            c = rs[0]["cfg"]
            ok = [r["run"] for r in rs if r["run"] is not None]
            row = {k: c[k] for k in ("app", "threads", "cluster_size", "clusters", "proxies_per_cluster", "dispatch")}
            row["timeouts"], row["failures"] = fail_counts(rs)
            row["threads_total"] = threads_total(c["threads"], c["clusters"], c["proxies_per_cluster"])
            row["oversubscribed"] = row["threads_total"] > self.layout.cores
            if ok:
                row.update(times(ok))
                row.update(iccs_stats(ok))
                row.update(rt_stats(ok))
                row["slowdown"] = round(row["time_s"] / dt, 3) if dt else None
            rows.append(row)
        notes = [f"scaling: {self.layout.layout}"] + self.failure_notes(rows)
        if args.proxies < 2:
            notes.append("--proxies 1: every policy picks the only proxy; the policies cannot differ")
        summary = {"no_delay_time_s": dt, "threads": self.layout.threads,
                   "imbalance_definition": "busiest proxy's msgs_tx / mean msgs_tx over the run's proxies (1 = even)"}
        if args.model:  # the replays only: dispatch has no projection of its own
            for r in rows:
                r["source"] = "measured"
            val, pairs = model_rows.validation_rows(raw, args, ("app", "threads", "cluster_size", "clusters",
                                                                "proxies_per_cluster", "dispatch"))
            model_rows.copy_host_columns(val, rows, ("app", "threads", "cluster_size", "dispatch"))
            rows += val
            summary["model"] = {"costs_file": args.costs_path, "validation": pairs}
            notes += ["model validation {dispatch}: message time {msg_time_us} us modeled / {measured_msg_time_us} "
                      "measured (medians {msg_time_median_us} / {measured_msg_time_median_us}); queue {queue_len} / "
                      "{measured_queue_len}; utilization {proxy_util} / {measured_proxy_util}; tx imbalance "
                      "{proxy_tx_imbalance} / {measured_proxy_tx_imbalance}".format(**p) for p in pairs]
        return rows, summary, notes

    def plot(self, plt, rows, extra, meta, path):
        modeled = {r["dispatch"]: r for r in rows if r.get("source") == "modeled"}
        rows = [r for r in rows if r.get("source", "measured") == "measured"]
        over = ""  # the runner's label in figure_title says which rows were oversubscribed
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        names = [r["dispatch"] for r in rows]
        for ax, key, label in zip(axes, ("time_s", "msg_time_us", "proxy_tx_imbalance"),
                                  ("run time [ms]", "message time in the ICCS [us]",
                                   "proxy load imbalance (max/mean msgs)")):
            vals = [(r.get(key) or 0) * (1e3 if key == "time_s" else 1) for r in rows]
            ax.bar(names, vals, color=["#888", "#48c", "#c84"][:len(names)])
            mv = [(n, modeled[n].get(key)) for n in names if n in modeled and modeled[n].get(key) is not None]
            if mv:  # --model: the replay of the same runs, as points over the bars
                ax.plot([n for n, _ in mv], [v * (1e3 if key == "time_s" else 1) for _, v in mv], "kx", ms=9,
                        label="modeled (replay)")
                ax.legend(fontsize=7)
            if key == "time_s" and extra.get("no_delay_time_s"):
                ax.axhline(extra["no_delay_time_s"] * 1e3, color="k", ls="--", lw=0.8, label="no delay")
                ax.legend(fontsize=7)
            ax.set_ylabel(label)
            ax.grid(True, axis="y", lw=0.3)
        app = rows[0]["app"] if rows else ""
        fig.suptitle(f"{app}, 2 clusters x {rows[0]['cluster_size'] if rows else '?'}: {meta['figure_title']}{over}",
                     fontsize=9)
        save_fig(fig, path)
        plt.close(fig)
