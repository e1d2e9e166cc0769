"""exp_wan.py: `./iccs experiment wan [APP...]`, the sensitivity sweep of Plaat, Bal and Hofman
(1998): the clusters are sites joined by emulated wide-area links (proxy/wan_*: each message from
another site held until its emulated arrival from the link's latency, bandwidth and queue), swept
over bandwidth 10, 3, 1, 0.3, 0.1, 0.03 MB/s (1 MB = 10^6 bytes) and one-way latency 0.1, 0.3,
1, 3, 10, 30, 100, 300 ms; speedup relative to the same run with all links local (every cluster
in one site, nothing emulated): T_local / T_wan (1 = the WAN costs nothing). Their Figure 2:
speedup against latency, a line per bandwidth, and against bandwidth, a line per latency. Their
Figure 3: the share of the run time spent on WAN communication, (T_wan - T_local) / T_wan (column
wan_share, the PNG's third panel), and the WAN traffic per cluster (wan_bytes_per_cluster: the
wide-area programs of apps/widearea count it; empty for the DSM applications). APP may also be a
wide-area program (`iccs-cli run --list-widearea`), run as --variant (default optimized).

Scaled to the host (app_runs.py): 4 sites (the study's) of T/4 compute threads each, 1 proxy per
cluster (--proxies), transport iccs; with fewer than 4 compute threads (T = 2 on a 2-core host
without --oversubscribe) 2 sites, and the output says so. Subsets: --bandwidths, --latencies,
APP...; --quick: water, 1 and 0.1 MB/s x 1 and 10 ms, 1 run each. The full sweep is 48 WAN runs +
1 local per app and repetition, and a run at 300 ms pays 600 ms per round trip on its critical
path: the time-left estimate is re-made after every run from the local runs' message and byte counts and
the WAN runs finished so far (see reestimate), and --timeout bounds one run (recorded, the sweep
goes on).
"""
from app_runs import (APPS, COMM_BOUND, STARTUP_S, add_app_options, check_apps, fail_counts, rt_stats, save_fig, threads_total,
                      times)
from exp_apps import AppExperiment, parse_float_list
from exp_widearea import registry, variants_of
from framework import ExperimentError, median

BANDWIDTHS_MB_S = [10, 3, 1, 0.3, 0.1, 0.03]
LATENCIES_MS = [0.1, 0.3, 1, 3, 10, 30, 100, 300]
QUICK_BW, QUICK_LAT = [1, 0.1], [1, 10]


def _plot_family(ax, rows, line_key, line_values, x_key, style, unit, cmap, top, xlabel, ylabel, title):
    """One panel of Figure 2: speedup against x_key (log scale), a line per value of line_key."""
    for k, v in enumerate(line_values):
        pts = sorted((r[x_key], r["speedup"]) for r in rows if r[line_key] == v)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=3,
                color=cmap(k / max(1, len(line_values) - 1)), label=f"{v:g} {unit}")
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, top)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=7)


class Wan(AppExperiment):
    name = "wan"
    figure = "Plaat, Bal, Hofman 1998, Figures 2 and 3"
    title = "WAN sensitivity: speedup (T_local / T_wan) against wide-area latency and bandwidth"
    columns = ["app", "sites", "threads", "cluster_size", "proxies_per_cluster", "bandwidth_mb_s", "latency_ms",
               "time_s", "time_min_s", "time_max_s", "reps", "local_time_s", "speedup", "msgs", "mean_msg_bytes",
               "threads_total", "oversubscribed", "timeouts", "failures", "wan_share", "wan_bytes_per_cluster"]

    def add_options(self, ap):
        add_app_options(ap, "*", f"{', '.join(COMM_BOUND)}; --quick: water")
        ap.add_argument("--sites", type=int, help="sites (= clusters), each its own site (default 4, the study's; "
                                                  "2 when fewer than 4 compute threads)")
        ap.add_argument("--proxies", type=int, default=1, help="proxies per cluster (default 1)")
        ap.add_argument("--variant", default="optimized",
                        help="the wide-area programs' variant (APP one of `iccs-cli run --list-widearea`; one of "
                             "the program's variants, default optimized, as Plaat et al. ran them)")
        ap.add_argument("--bandwidths", help="comma-separated wide-area bandwidths [MB/s, 10^6 bytes] (default "
                                             f"{','.join(map(str, BANDWIDTHS_MB_S))})")
        ap.add_argument("--latencies", help="comma-separated one-way wide-area latencies [ms] (default "
                                            f"{','.join(map(str, LATENCIES_MS))})")

    def check(self, args):
        wide = registry(args._cli) if any(a not in APPS for a in args.apps) else []
        check_apps(args, ["water"] if args.quick else COMM_BOUND, wide)
        self.widearea = set(wide) & set(args.app_list)
        if self.widearea:
            have = variants_of(args._cli)
            for a in sorted(self.widearea):
                if args.variant not in have.get(a, []):
                    raise ExperimentError(f"--variant {args.variant}: {a} has no such variant (its variants: "
                                          f"{', '.join(have.get(a, []))})")
        self.timeout = args.timeout
        args.bw_list = parse_float_list(args.bandwidths, "--bandwidths") if args.bandwidths else \
            (QUICK_BW if args.quick else BANDWIDTHS_MB_S)
        args.lat_list = parse_float_list(args.latencies, "--latencies") if args.latencies else \
            (QUICK_LAT if args.quick else LATENCIES_MS)
        if not 1 <= args.proxies <= 64:
            raise ExperimentError(f"--proxies {args.proxies}: expected 1..64 proxies per cluster")
        if args.sites is not None and not 2 <= args.sites <= 64:
            raise ExperimentError(f"--sites {args.sites}: expected 2..64")

    def host_layout(self, args, cores):
        lay = super().host_layout(args, cores)
        t = lay.threads
        sites = args.sites if args.sites is not None else (4 if t >= 4 else 2)
        if t % sites:
            raise ExperimentError(f"--sites {sites}: does not divide the {t} compute threads (see --threads)")
        self.sites = sites
        if sites < 4:
            lay.layout += (f"; {sites} sites instead of the study's 4 (4 need 4 compute threads: --oversubscribe "
                           f"or --threads 4)")
        return lay

    def plan(self, args):
        t, sites = self.layout.threads, self.sites
        out = []
        for rep in range(args.reps):
            # every app's local run first: from its message count the WAN runs' time is estimated
            for app in args.app_list:
                base = {"app": app, "threads": t, "sites": sites, "clusters": sites, "cluster_size": t // sites,
                        "proxies_per_cluster": args.proxies, "transport": "iccs", "dispatch": "round-robin", "rep": rep}
                out.append(dict(base, bandwidth_mb_s=None, latency_ms=None, cost=STARTUP_S + 0.3 * sites,
                                extra=["--sites", ",".join("0" * sites)],
                                id=f"{app} local (1 site) rep {rep + 1}/{args.reps}"))
            for app in args.app_list:
                base = {"app": app, "threads": t, "sites": sites, "clusters": sites, "cluster_size": t // sites,
                        "proxies_per_cluster": args.proxies, "transport": "iccs", "dispatch": "round-robin", "rep": rep}
                for bw in args.bw_list:
                    for lat in args.lat_list:
                        out.append(dict(base, bandwidth_mb_s=bw, latency_ms=lat,
                                        cost=STARTUP_S + 0.3 * sites + 2.0 + 50 * 2 * lat / 1e3,
                                        extra=["--sites", ",".join(str(i) for i in range(sites)),
                                               "--wan-latency-ms", f"{lat:g}",
                                               "--wan-bandwidth", str(int(round(bw * 1e6)))],
                                        id=f"{app} {bw:g} MB/s {lat:g} ms rep {rep + 1}/{args.reps}"))
        for c in out:  # the wide-area programs: the variant
            if c["app"] in self.widearea:
                c["extra"] = c["extra"] + ["--variant", args.variant]
        return out

    def run_one(self, cfg, ctx):
        return self.run_cfg(cfg, ctx)

    def reestimate(self, pending, raw):
        """Cost of each pending WAN run = its app's local run time + k x (round trips on the
        critical path x 2 latency + bytes / (bandwidth x (sites - 1))). Round trips: the local
        run's messages / (2 x sites) (a message each way, the sites in parallel); the bytes queue
        on the links out of a site (the emulator serializes a link); k: calibrated on the WAN runs
        done (their extra time over the local run against the model's), 1 before any. Measured
        with water at 2 sites: 10 ms x 409 round trips = 8.2 s modelled, 8.1 s taken; 0.1 MB/s,
        0.74 MB: 7.4 s modelled, 7.1 s taken."""
        local, model, actual = {}, [], []

        def extra(c, rtts, nbytes):
            return rtts * 2 * c["latency_ms"] / 1e3 + nbytes / (c["bandwidth_mb_s"] * 1e6 * max(1, c["sites"] - 1))
        for r in raw:
            c, j = r["cfg"], r["run"]
            if c["latency_ms"] is None and j is not None:
                rs = rt_stats([j])
                local[c["app"]] = (r["took_s"], (rs["msgs"] or 0) / (2.0 * c["sites"]), rs["bytes"] or 0)
        for r in raw:
            c = r["cfg"]
            if c["latency_ms"] is not None and c["app"] in local and r["run"] is not None:
                took, rtts, nbytes = local[c["app"]]
                m = extra(c, rtts, nbytes)
                if m > 0.05:
                    model.append(m)
                    actual.append(max(0.0, r["took_s"] - took))
        k = median([a / m for a, m in zip(actual, model)]) if model else 1.0
        for c in pending:
            if c["latency_ms"] is not None and c["app"] in local:
                took, rtts, nbytes = local[c["app"]]
                c["cost"] = min(float(self.timeout), took + k * extra(c, rtts, nbytes))

    def summarize(self, raw, args):
        groups = {}
        for r in raw:
            c = r["cfg"]
            groups.setdefault((c["app"], c["bandwidth_mb_s"], c["latency_ms"]), []).append(r)
        local = {}
        for (app, bw, lat), rs in groups.items():
            ok = [r["run"] for r in rs if r["run"] is not None]
            if bw is None and ok:
                local[app] = times(ok)["time_s"]
        rows = []
        for (app, bw, lat), rs in groups.items():
            c = rs[0]["cfg"]
            ok = [r["run"] for r in rs if r["run"] is not None]
            row = {k: c[k] for k in ("app", "sites", "threads", "cluster_size", "proxies_per_cluster",
                                     "bandwidth_mb_s", "latency_ms")}
            row["timeouts"], row["failures"] = fail_counts(rs)
            row["threads_total"] = threads_total(c["threads"], c["clusters"], c["proxies_per_cluster"])
            row["oversubscribed"] = row["threads_total"] > self.layout.cores
            row["local_time_s"] = local.get(app)
            if ok:
                row.update(times(ok))
                row.update(rt_stats(ok))
                row["speedup"] = round(local[app] / row["time_s"], 4) if local.get(app) else None
                # Plaat et al. Figure 3: the share of the run time spent on WAN communication, and
                # (wide-area programs: their counters) the WAN bytes per cluster
                if local.get(app) and bw is not None:
                    row["wan_share"] = round((row["time_s"] - local[app]) / row["time_s"], 4)
                wb = [(o.get("wan_rpc_bytes") or 0) + (o.get("wan_bcast_bytes") or 0) for o in ok if "wan_rpc_bytes" in o]
                if wb:
                    row["wan_bytes_per_cluster"] = int(median(wb) / c["clusters"])
            rows.append(row)
        rows.sort(key=lambda r: (r["app"], r["bandwidth_mb_s"] is not None, -(r["bandwidth_mb_s"] or 0),
                                 r["latency_ms"] or 0))
        notes = [f"scaling: {self.layout.layout}",
                 f"{self.sites} sites, one cluster each ({self.layout.threads // self.sites} compute threads, "
                 f"{args.proxies} proxy per cluster); local = all clusters in one site (no link emulated); "
                 f"speedup = local time / WAN time; 1 MB = 10^6 bytes"]
        notes += self.failure_notes(rows)
        summary = {"sites": self.sites, "bandwidths_mb_s": args.bw_list, "latencies_ms": args.lat_list,
                   "local_time_s": local, "speedup_definition": "T_local / T_wan (same app, sites, threads)"}
        return rows, summary, notes

    def plot(self, plt, rows, extra, meta, path):
        over = ""  # the runner's label in figure_title says which rows were oversubscribed
        apps = list(dict.fromkeys(r["app"] for r in rows))
        fig, axes = plt.subplots(len(apps), 3, figsize=(16, 3.6 * len(apps)), squeeze=False)
        cmap = plt.get_cmap("viridis")
        for i, app in enumerate(apps):
            rs = [r for r in rows if r["app"] == app and r["bandwidth_mb_s"] is not None and r.get("speedup")]
            bws = sorted({r["bandwidth_mb_s"] for r in rs}, reverse=True)
            lats = sorted({r["latency_ms"] for r in rs})
            top = 1.1 * max([1.0] + [r["speedup"] for r in rs])
            _plot_family(axes[i][0], rs, "bandwidth_mb_s", bws, "latency_ms", "o-", "MB/s", cmap, top,
                         "one-way wide-area latency [ms]", "speedup vs all-local (T_local / T_wan)",
                         f"{app}: against latency, a line per bandwidth")
            _plot_family(axes[i][1], rs, "latency_ms", lats, "bandwidth_mb_s", "s-", "ms", cmap, top,
                         "wide-area bandwidth [MB/s]", "speedup vs all-local",
                         f"{app}: against bandwidth, a line per latency")
            # Plaat et al. Figure 3: the share of the run time on WAN communication
            sh = [dict(r, speedup=max(0.0, r["wan_share"])) for r in rs if r.get("wan_share") is not None]
            _plot_family(axes[i][2], sh, "bandwidth_mb_s", bws, "latency_ms", "^-", "MB/s", cmap, 1.05,
                         "one-way wide-area latency [ms]", "(T_wan - T_local) / T_wan",
                         f"{app}: share of the run time on WAN communication (Fig. 3)")
        fig.suptitle(f"{meta['figure_title']}{over}\n{extra['sites']} sites", fontsize=9)
        save_fig(fig, path)
        plt.close(fig)

