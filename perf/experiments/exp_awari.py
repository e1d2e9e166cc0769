"""exp_awari.py: `./iccs experiment awari`, the ablation of Awari's grid changes (issue 20; Verstoep
et al., Awari on a 10G grid): the wide-area suite's RA (apps/widearea/ra.cpp) in its grid variant
with all five changes (tree-sync, rings, polling, grain, autoflush), with each one removed, and with
none, over the ICCS with an emulated fast WAN (default 0.65 ms one way, a 1.3 ms round trip, and
125 MB/s per link) between --sites sites of one cluster process of --cluster-size compute threads.
Per configuration: the median parallel time over --reps runs (interleaved; every run is checked
against the sequential analysis in the same run, byte-exact, and a FAIL stops the experiment), its
WAN RPCs and broadcasts; and the study's measure, each change's share of the total improvement:
(time without it - time with all) / (time with none - time with all). The shares need not sum to
1. Default size paper (10^6 positions); --quick: test size, 2 sites, 1 rep.
"""
import json

from framework import ExperimentError, Fit, STUDY_COMPUTE_THREADS, host_cores, median, run_cli

OPTS = ["tree-sync", "rings", "polling", "grain", "autoflush"]
# What Verstoep et al. report as each change's share of the total improvement.
STUDY_SHARE = {"tree-sync": "about 30% (barrier) + 45% (termination detection)", "rings": "about 15%",
               "polling": "about 5%", "grain": "about 5%", "autoflush": "not given"}


class Layout:
    """sites x cluster_size compute threads plus one proxy per site, sharing the host's cores."""

    def __init__(self, args, cores):
        if args.polling == "inline":
            raise ExperimentError("--polling inline: the runtime refuses inline polling over iccs; use adaptive "
                                  "(default) or busy")
        self.polling = args.polling or "adaptive"
        self.threads = args.sites * args.cluster_size
        over = self.threads + args.sites > cores or self.polling == "busy"
        self.fit = Fit(cores, self.threads, True, f"{args.sites} sites x {args.cluster_size} compute threads")
        self.fit.oversubscribed = over
        self.fit.scaled = True
        self.fit.mode = "oversubscribed" if over else "scaled"
        self.fit.text = (f"{args.sites} sites x {args.cluster_size} compute threads ({self.threads} in all) and a "
                         f"proxy per site ({self.polling} polling) on {cores} cores"
                         + (": OVERSUBSCRIBED" if over else ""))
        self.label = " [OVERSUBSCRIBED]" if over else f" [scaled: {args.sites} sites x {args.cluster_size} threads]"
        self.layout = (f"the study ran Awari on 2-3 grid sites of many nodes; here {args.sites} sites of "
                       f"{args.cluster_size} compute threads (the study's 'processes': {STUDY_COMPUTE_THREADS} "
                       f"compute threads in the wide-area suite) on {cores} cores")


class Awari:
    name = "awari"
    figure = "Awari on a grid"
    title = "RA with Awari's five grid changes: all, each one removed, none (ablation)"
    columns = ["config", "grid_opts", "removed", "sites", "cluster_size", "size", "wan_latency_ms",
               "wan_bandwidth", "time_s", "time_min_s", "time_max_s", "reps", "wan_rpcs", "wan_rpc_bytes",
               "wan_bcasts", "share_of_improvement", "study_share", "oversubscribed", "result"]

    def add_options(self, ap):
        ap.add_argument("--sites", type=int, default=3, help="sites, one cluster process each (default 3; 2..4)")
        ap.add_argument("--cluster-size", type=int, default=1, help="compute threads per site (default 1)")
        ap.add_argument("--size", choices=["test", "paper"], help="RA's size (default paper; --quick: test)")
        ap.add_argument("--reps", type=int, help="runs per configuration (default 3; --quick: 1)")
        ap.add_argument("--wan-latency-ms", type=float, default=0.65, help="one-way WAN latency (default 0.65)")
        ap.add_argument("--wan-bandwidth", type=int, default=125_000_000,
                        help="WAN bandwidth per link, bytes/s (default 125000000)")
        ap.add_argument("--seed", type=int, default=1, help="RA's input (default 1)")

    def check(self, args):
        if args.quick:
            if "sites" not in args.explicit:
                args.sites = 2
            args.size = args.size or "test"
            args.reps = args.reps or 1
        args.size = args.size or "paper"
        args.reps = args.reps or 3
        if not 2 <= args.sites <= 4:
            raise ExperimentError(f"--sites {args.sites}: expected 2..4")
        if not 1 <= args.cluster_size <= 8:
            raise ExperimentError(f"--cluster-size {args.cluster_size}: expected 1..8")
        if not 1 <= args.reps <= 50:
            raise ExperimentError(f"--reps {args.reps}: expected 1..50")
        if not 0 <= args.wan_latency_ms <= 1000 or args.wan_bandwidth < 1000:
            raise ExperimentError("--wan-latency-ms 0..1000 and --wan-bandwidth >= 1000 bytes/s")

    def host_layout(self, args, cores):
        return Layout(args, cores)

    def plan(self, args):
        cfgs = [("all", ",".join(OPTS), "")]
        cfgs += [(f"without {o}", ",".join(x for x in OPTS if x != o), o) for o in OPTS]
        cfgs += [("none", "none", "")]
        cost = 2.5 if args.size == "paper" else 1.5
        return [{"id": f"{name} rep {rep + 1}/{args.reps}", "config": name, "grid_opts": opts, "removed": removed,
                 "rep": rep, "cost": cost} for rep in range(args.reps) for name, opts, removed in cfgs]

    def run_one(self, cfg, ctx):
        a = ctx.args
        args = ["run", "ra", "--variant", "grid", "--grid-opts", cfg["grid_opts"], "--size", a.size,
                "--clusters", str(a.sites), "--cluster-size", str(a.cluster_size), "--transport", "iccs",
                "--wan-latency-ms", str(a.wan_latency_ms), "--wan-bandwidth", str(a.wan_bandwidth),
                "--polling", ctx.polling, "--seed", str(a.seed), "--json",
                "--set", "cluster.peer_timeout_ms=30000"]
        out, took, counters = run_cli(ctx.cli, args, on_start=ctx.counters_for_run)
        j = None
        for line in out.splitlines():
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
        if j is None or j.get("result") != "PASS":
            raise ExperimentError(f"iccs-cli {' '.join(args)}: no PASS result:\n{out[-2000:]}")
        r = {k: cfg[k] for k in ("config", "grid_opts", "removed", "rep")}
        r.update({"parallel_s": j["time_s"], "wan_rpcs": j["wan_rpcs"], "wan_rpc_bytes": j["wan_rpc_bytes"],
                  "wan_bcasts": j["wan_bcasts"], "result": j["result"]})
        return r, took, counters

    def summarize(self, raw, args):
        by = {}
        for r in raw:
            by.setdefault(r["config"], []).append(r)
        t = {c: median([r["parallel_s"] for r in rs]) for c, rs in by.items()}
        gain = t["none"] - t["all"]
        rows = []
        for c, rs in by.items():
            ts = [r["parallel_s"] for r in rs]
            removed = rs[0]["removed"]
            share = round((t[c] - t["all"]) / gain, 3) if removed and gain > 0 else ""
            rows.append({"config": c, "grid_opts": rs[0]["grid_opts"], "removed": removed, "sites": args.sites,
                         "cluster_size": args.cluster_size, "size": args.size, "wan_latency_ms": args.wan_latency_ms,
                         "wan_bandwidth": args.wan_bandwidth, "time_s": round(t[c], 6),
                         "time_min_s": round(min(ts), 6), "time_max_s": round(max(ts), 6), "reps": len(ts),
                         "wan_rpcs": median([r["wan_rpcs"] for r in rs]),
                         "wan_rpc_bytes": median([r["wan_rpc_bytes"] for r in rs]),
                         "wan_bcasts": median([r["wan_bcasts"] for r in rs]), "share_of_improvement": share,
                         "study_share": STUDY_SHARE.get(removed, ""),
                         "oversubscribed": args.sites * (args.cluster_size + 1) > host_cores(), "result": "PASS"})
        ranked = sorted((r for r in rows if r["removed"]), key=lambda r: -(r["share_of_improvement"] or 0))
        notes = [f"awari: all {t['all']:.4f} s, none {t['none']:.4f} s (improvement {gain:.4f} s); shares: "
                 + ", ".join(f"{r['removed']} {r['share_of_improvement']}" for r in ranked)]
        if gain <= 0:
            notes.append("awari: the changes gave no improvement on this setting: shares not computed")
        return rows, {"time_all_s": t["all"], "time_none_s": t["none"],
                      "ranking": [r["removed"] for r in ranked]}, notes

    def plot(self, plt, rows, extra, meta, path):
        fig, ax = plt.subplots(figsize=(8, 4))
        xs = [r["config"] for r in rows]
        ax.bar(xs, [r["time_s"] for r in rows], color=["tab:green" if r["config"] == "all" else
                                                       "tab:red" if r["config"] == "none" else "tab:blue"
                                                       for r in rows])
        ax.errorbar(xs, [r["time_s"] for r in rows],
                    yerr=[[r["time_s"] - r["time_min_s"] for r in rows], [r["time_max_s"] - r["time_s"] for r in rows]],
                    fmt="none", ecolor="black", lw=0.8)
        for i, r in enumerate(rows):
            if r["share_of_improvement"] != "":
                ax.annotate(f"{r['share_of_improvement']:.0%}", (i, r["time_s"]), xytext=(0, 3),
                            textcoords="offset points", ha="center", fontsize=8)
        ax.set_ylabel("parallel time, median [s]")
        ax.set_title(meta["figure_title"], fontsize=9)
        ax.tick_params(axis="x", labelsize=8, rotation=20)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
