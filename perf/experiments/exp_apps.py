"""exp_apps.py: `./iccs experiment apps [APP...]`, the study's Figures 8-15: per application, its
run time against the cluster size with the total of compute threads held fixed, for `no delay`
(transport direct), `no contention` (transport delay, D = the idle ICCS's one-way latency at the
application's mean message size, `--delay-us auto`, or a given D) and the ICCS with total proxy
counts 2, 4, 8, 16 (those that fit: 1 to cluster-size proxies per cluster), round-robin dispatch.
Slowdown = T / T(no delay) at the same cluster size.

Scaled to the host (app_runs.py): T compute threads in total, cluster sizes 1, 2, 4, ... T (so T,
T/2, ..., 1 clusters); the cluster size T is one cluster, no inter-cluster message at all: run
once (direct) as the reference point. The time is the application's parallel section
(`parallel_s`), median over --reps runs; the runs go round-robin over the configurations (rep
1 of every configuration, then rep 2, ...) so a burst of load on the shared host hits all alike.
No delay must be a floor (floors.py): a configuration faster than it beyond noise is flagged, a
`FLOOR BROKEN` note, CSV `below_floor`, JSON summary `floor_ok` and `floor_broken`.
"""
from app_runs import (APPS, STARTUP_S, HostLayout, RunFailed, RunTimeout, add_app_options, check_apps, fail_counts,
                      iccs_stats, rt_stats, run_app, save_fig, threads_total, times)
from floors import FLOOR_TOLERANCE, floor_broken
from framework import ExperimentError
import model_rows

STUDY_PROXY_TOTALS = [2, 4, 8, 16]


def parse_int_list(text, flag):
    try:
        xs = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ExperimentError(f"{flag} '{text}': expected comma-separated whole numbers")
    if not xs:
        raise ExperimentError(f"{flag} '{text}': empty")
    return xs


def parse_float_list(text, flag):
    try:
        xs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ExperimentError(f"{flag} '{text}': expected comma-separated numbers")
    if not xs or any(x <= 0 for x in xs):
        raise ExperimentError(f"{flag} '{text}': expected numbers > 0")
    return xs


class AppExperiment:
    """What apps, scaling, dispatch and wan share: the host layout and the runner's hooks."""
    default_apps = APPS
    apps_nargs = "*"
    min_threads = 2

    def host_layout(self, args, cores):
        self.layout = HostLayout(args, cores, self.min_threads)
        return self.layout

    def threads_wanted(self, polling):
        return self.layout.threads

    def run_cfg(self, cfg, ctx):
        """Runs one configuration; a run past --timeout is recorded as such (the sweep goes on)."""
        try:
            j, took, cnt = run_app(ctx, cfg["app"], cfg["clusters"], cfg["cluster_size"], cfg["transport"],
                                   cfg.get("proxies_per_cluster"), cfg.get("dispatch"), cfg.get("delay_us"),
                                   cfg.get("extra", ()))
            # app_report repeats the app's own line (its keys are in the run's object already)
            j = {k: v for k, v in j.items() if k != "app_report"}
            return {"cfg": {k: v for k, v in cfg.items() if k not in ("extra",)}, "run": j, "took_s": round(took, 3)}, \
                took, cnt
        except RunTimeout as e:
            return {"cfg": {k: v for k, v in cfg.items() if k not in ("extra",)}, "run": None, "timeout": str(e),
                    "took_s": ctx.args.timeout}, float(ctx.args.timeout), None
        except RunFailed as e:
            print(f"run failed (recorded; the sweep goes on): {str(e)[:3000]}", flush=True)
            return {"cfg": {k: v for k, v in cfg.items() if k not in ("extra",)}, "run": None, "error": str(e),
                    "took_s": None}, 0.0, None

    def failure_notes(self, rows):
        """Notes for configurations with runs that timed out or failed."""
        return [f"{r['app']} {r.get('config') or r.get('dispatch') or ''} S={r['cluster_size']}"
                f"{' %s MB/s %s ms' % (r['bandwidth_mb_s'], r['latency_ms']) if r.get('latency_ms') else ''}: "
                f"{r['timeouts']} run(s) passed --timeout, {r['failures']} failed (see raw in the JSON)"
                for r in rows if r.get("timeouts") or r.get("failures")]


class Apps(AppExperiment):
    name = "apps"
    figure = "Figures 8-15"
    title = "run time against cluster size: no delay, no contention, ICCS with 2..16 proxies in total"
    columns = ["app", "threads", "cluster_size", "clusters", "config", "transport", "proxies_total",
               "proxies_per_cluster", "dispatch", "delay_us", "time_s", "time_min_s", "time_max_s", "reps",
               "slowdown", "msgs", "mean_msg_bytes", "msg_time_us", "queue_len", "proxy_util", "threads_total",
               "oversubscribed", "below_floor", "timeouts", "failures"]

    def add_options(self, ap):
        add_app_options(ap, "*", "all eight; --quick: water")
        ap.add_argument("--cluster-sizes", help="comma-separated cluster sizes (default 1, 2, 4, ... up to the total "
                                                "of compute threads)")
        ap.add_argument("--proxy-totals", default="2,4,8,16",
                        help="total proxy counts of the ICCS runs (default the study's 2,4,8,16; each kept where "
                             "it gives 1 to cluster-size proxies per cluster)")
        ap.add_argument("--delay-us", default="auto",
                        help="no contention's delay per message [us], or auto (default: the idle ICCS's one-way "
                             "latency at the app's mean message size, measured by the run)")
        model_rows.add_model_options(ap, beyond=False)

    def check(self, args):
        check_apps(args, ["water"] if args.quick else self.default_apps)
        model_rows.check_model(args)
        if args.model:
            self.columns = Apps.columns + model_rows.MODEL_COLUMNS
        args.proxy_total_list = parse_int_list(args.proxy_totals, "--proxy-totals")
        if any(p < 1 for p in args.proxy_total_list):
            raise ExperimentError(f"--proxy-totals '{args.proxy_totals}': each must be >= 1")
        if args.delay_us != "auto":
            try:
                if float(args.delay_us) < 0:
                    raise ValueError
            except ValueError:
                raise ExperimentError(f"--delay-us '{args.delay_us}': expected a number of microseconds >= 0, or auto")
        args.cluster_size_list = parse_int_list(args.cluster_sizes, "--cluster-sizes") if args.cluster_sizes else None

    def sizes(self, args):
        t = self.layout.threads
        if args.cluster_size_list is None:
            return [s for s in (1 << i for i in range(11)) if s <= t]
        for s in args.cluster_size_list:
            if s < 1 or t % s:
                raise ExperimentError(f"--cluster-sizes: {s} does not divide the {t} compute threads")
        return sorted(set(args.cluster_size_list))

    def plan(self, args):
        t = self.layout.threads
        configs = []
        for app in args.app_list:
            for s in self.sizes(args):
                c = t // s
                base = {"app": app, "threads": t, "cluster_size": s, "clusters": c}
                if c == 1:  # one cluster: no inter-cluster message, every transport is the same
                    configs.append(dict(base, config="1 cluster", transport="direct", proxies_total=0,
                                        proxies_per_cluster=0))
                    continue
                configs.append(dict(base, config="no delay", transport="direct", proxies_total=0, proxies_per_cluster=0))
                configs.append(dict(base, config="no contention", transport="delay", proxies_total=0,
                                    proxies_per_cluster=0, delay_us=args.delay_us))
                for ptot in args.proxy_total_list:
                    if ptot % c or not 1 <= ptot // c <= s:
                        continue
                    configs.append(dict(base, config=f"iccs P={ptot}", transport="iccs", proxies_total=ptot,
                                        proxies_per_cluster=ptot // c, dispatch="round-robin"))
        out = []
        for rep in range(args.reps):  # interleaved: rep 1 of all, then rep 2, ...
            for cfg in configs:
                # delay auto: a direct run and an idle ping first (compute/README.md)
                cost = STARTUP_S + 0.1 * cfg["clusters"] + (STARTUP_S + 0.4 if cfg["transport"] == "delay"
                                                            and cfg.get("delay_us") == "auto" else 0)
                out.append(dict(cfg, rep=rep, cost=cost,
                                id=f"{cfg['app']} S={cfg['cluster_size']} x{cfg['clusters']} {cfg['config']} "
                                   f"rep {rep + 1}/{args.reps}"))
        return model_rows.trace_cfgs(out, args)

    def run_one(self, cfg, ctx):
        return self.run_cfg(cfg, ctx)

    def summarize(self, raw, args):
        groups = {}
        for r in raw:
            c = r["cfg"]
            groups.setdefault((c["app"], c["cluster_size"], c["config"]), []).append(r)
        rows = []
        per_run = {}  # (app, cluster size, config) -> the runs' parallel_s, for the floor check
        for (app, s, config), rs in groups.items():
            c = rs[0]["cfg"]
            ok = [r["run"] for r in rs if r["run"] is not None]
            per_run[(app, s, config)] = [o["parallel_s"] for o in ok if o.get("parallel_s") is not None]
            row = {k: c.get(k) for k in ("app", "threads", "cluster_size", "clusters", "config", "transport",
                                         "proxies_total", "proxies_per_cluster", "dispatch")}
            row["timeouts"], row["failures"] = fail_counts(rs)
            row["threads_total"] = threads_total(c["threads"], c["clusters"], c["proxies_per_cluster"])
            row["oversubscribed"] = row["threads_total"] > self.layout.cores
            if ok:
                row.update(times(ok))
                row.update(rt_stats(ok))
                if c["transport"] == "iccs":
                    row.update({k: v for k, v in iccs_stats(ok).items() if k != "proxy_tx_imbalance"})
                if c["transport"] == "delay":
                    ds = [o.get("delay_us") for o in ok if o.get("delay_us") is not None]
                    row["delay_us"] = round(sum(ds) / len(ds), 3) if ds else None
            rows.append(row)
        base = {(r["app"], r["cluster_size"]): r.get("time_s") for r in rows
                if r["config"] in ("no delay", "1 cluster")}
        for r in rows:
            b = base.get((r["app"], r["cluster_size"]))
            r["slowdown"] = round(r["time_s"] / b, 3) if b and r.get("time_s") else None
        # no delay must be a floor (floors.py): a run faster than it beyond noise is flagged.
        broken = []
        for r in rows:
            if r["config"] in ("no delay", "1 cluster"):
                continue
            base_runs = per_run.get((r["app"], r["cluster_size"], "no delay"), [])
            r["below_floor"] = floor_broken(base_runs, per_run.get((r["app"], r["cluster_size"], r["config"]), []))
            if r["below_floor"]:
                broken.append(r)
        order = {"1 cluster": 0, "no delay": 1, "no contention": 2}
        rows.sort(key=lambda r: (APPS.index(r["app"]), r["cluster_size"], order.get(r["config"], 3),
                                 r["proxies_total"] or 0))
        notes = [f"scaling: {self.layout.layout}",
                 "proxy totals kept: those giving 1..cluster-size proxies per cluster (the study's rule)"]
        notes += self.failure_notes(rows)
        notes += [f"FLOOR BROKEN: {r['app']} S={r['cluster_size']}: no delay (direct) is slower than {r['config']} "
                  f"beyond noise (slowdown {r['slowdown']}: median over {FLOOR_TOLERANCE:.0%} higher and its best run "
                  f"slower too), so slowdowns against it understate the ICCS's cost (perf/README.md, issue 21)"
                  for r in broken]
        summary = {"threads": self.layout.threads, "cluster_sizes": sorted({r["cluster_size"] for r in rows}),
                   "slowdown_definition": "time_s / time_s of no delay (direct) at the same app and cluster size",
                   "floor_ok": not broken,
                   "floor_broken": [{k: r[k] for k in ("app", "cluster_size", "config", "slowdown")} for r in broken]}
        if args.model:
            rows, summary["model"], more = self.model(raw, args, rows)
            notes += more
        return rows, summary, notes

    def model(self, raw, args, rows):
        """Measured rows (source measured), the replays of the traced ICCS runs, and per app the
        study's layouts (--model-threads compute threads, the proxy totals) projected."""
        for r in rows:
            r["source"] = "measured"
        keys = ("app", "threads", "cluster_size", "clusters", "config", "transport", "proxies_total",
                "proxies_per_cluster", "dispatch")
        val, pairs = model_rows.validation_rows(raw, args, keys)
        model_rows.copy_host_columns(val, rows, ("app", "threads", "cluster_size", "config"))
        t = args.model_threads
        proj, profiles = [], {}
        for app in args.app_list:
            prof, info = model_rows.app_profile(raw, app)
            if prof is None:
                continue
            profiles[app] = info
            for ptot in args.proxy_total_list:
                lay = [(t // s, s, ptot // (t // s), False) for s in (1 << i for i in range(12))
                       if s < t and ptot % (t // s) == 0 and 1 <= ptot // (t // s) <= s]
                for r in model_rows.projected_rows(prof, args, lay, {"app": app}):
                    r.update({"config": f"iccs P={ptot}", "transport": "iccs", "proxies_total": ptot,
                              "dispatch": "round-robin"})
                    proj.append(r)
        notes = [f"model: costs {args.costs_path}"] + [
            "model validation {app} S={cluster_size} P={proxies_per_cluster}: message time {msg_time_us} us modeled / "
            "{measured_msg_time_us} measured; queue {queue_len} / {measured_queue_len}; utilization {proxy_util} / "
            "{measured_proxy_util}".format(**p) for p in pairs]
        return rows + val + proj, {"costs_file": args.costs_path, "profiles": profiles, "validation": pairs,
                                   "projection_threads": t}, notes

    def plot(self, plt, rows, extra, meta, path):
        modeled = [r for r in rows if r.get("source") == "modeled" and r.get("model_input", "").find("scaled") >= 0]
        rows = [r for r in rows if r.get("source", "measured") == "measured"]
        if modeled:
            self.plot_model(plt, modeled, meta, path.replace(".png", "-model.png"))
        apps = [a for a in APPS if any(r["app"] == a for r in rows)]
        n = len(apps)
        cols = min(4, n)
        nrows = (n + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(max(7.5, 4.2 * cols), 3.6 * nrows + 0.6), squeeze=False)
        for i, app in enumerate(apps):
            ax = axes[i // cols][i % cols]
            rs = [r for r in rows if r["app"] == app and r.get("time_s") is not None]
            single = [r for r in rs if r["config"] == "1 cluster"]
            for config in dict.fromkeys(r["config"] for r in rs if r["config"] != "1 cluster"):
                pts = sorted((r["cluster_size"], r["time_s"] * 1e3) for r in rs if r["config"] == config)
                pts += [(r["cluster_size"], r["time_s"] * 1e3) for r in single]  # the shared end point
                style = "k-o" if config == "no delay" else "k--s" if config == "no contention" else "-^"
                over = any(r["oversubscribed"] for r in rs if r["config"] == config)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=4,
                        label=config + (" (oversubscribed: threads > cores)" if over else ""))
            if single and not any(r["config"] != "1 cluster" for r in rs):
                ax.plot([r["cluster_size"] for r in single], [r["time_s"] * 1e3 for r in single], "ko", label="1 cluster")
            ax.set_xscale("log", base=2)
            ax.set_xticks(extra["cluster_sizes"])
            ax.set_xticklabels([str(s) for s in extra["cluster_sizes"]])
            ax.set_xlabel("cluster size (compute threads per cluster)")
            ax.set_ylabel("run time [ms]")
            ax.set_title(app, fontsize=10)
            ax.grid(True, lw=0.3)
            ax.legend(fontsize=7)
        for j in range(n, nrows * cols):
            axes[j // cols][j % cols].axis("off")
        fig.suptitle(meta["figure_title"], fontsize=9)
        save_fig(fig, path)
        plt.close(fig)

    def plot_model(self, plt, modeled, meta, path):
        """Figures 8-15 as the model projects them: slowdown against cluster size, a line per proxy total."""
        apps = [a for a in APPS if any(r["app"] == a for r in modeled)]
        cols = min(4, len(apps))
        nrows = (len(apps) + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(max(7.5, 4.2 * cols), 3.6 * nrows + 0.6), squeeze=False)
        for i, app in enumerate(apps):
            ax = axes[i // cols][i % cols]
            rs = [r for r in modeled if r["app"] == app]
            for ptot in sorted({r["proxies_total"] for r in rs}):
                pts = sorted((r["cluster_size"], r["slowdown"]) for r in rs if r["proxies_total"] == ptot)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-^", ms=4, label=f"modeled ICCS P={ptot}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("cluster size (compute threads per cluster)")
            ax.set_ylabel("slowdown vs no delay")
            ax.set_title(f"{app} (modeled, {rs[0]['threads']} compute threads)", fontsize=10)
            ax.grid(True, lw=0.3)
            ax.legend(fontsize=7)
        for j in range(len(apps), nrows * cols):
            axes[j // cols][j % cols].axis("off")
        fig.suptitle(meta["figure_title"] + "\nthe proxy model (perf/model/): dedicated proxy cores, costs from "
                     "./iccs experiment calibrate, each app's stream from its trace", fontsize=9)
        save_fig(fig, path)
        plt.close(fig)
