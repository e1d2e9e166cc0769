"""exp_satin.py: `./iccs experiment satin`, Satin's Figure 6 (van Nieuwpoort, Kielmann, Bal et
al.): divide-and-conquer programs load-balanced by work stealing (group/steal.hpp) on 4 sites
joined by emulated WAN links, under the study's nine WAN scenarios (perf/wan_scenarios/), per
program (integrate, nqueens, raytrace, satin-tsp) and stealing policy (RS, CHS, CRS).
speedup = T(one cluster of the same total size, RS, no WAN) / T(4 clusters, policy, scenario)
(1 = the WAN costs nothing). Scenario `single`: the policy on that one big cluster against the
same baseline (RS's is the baseline, 1; CHS is worse than RS even there in the study).

Scaled to the host: the study had 4 clusters of 16 processors; here 4 clusters of --threads
compute threads (default 2) = 8 processes, each cluster with 1 proxy, over transport iccs, beside
each other on this host's cores: OVERSUBSCRIBED when the compute threads exceed the cores, and
labelled so. The WAN scenarios keep the study's latencies (10-300 ms) and bandwidths (1 KB/s -
1 MB/s), so at these problem sizes (about 0.1-2 s of work) a WAN round trip is a large share of a
run: the figures show the policies' WAN behaviour, not the study's absolute speedups.
--quick: every program and policy at test size, scenarios 1, 4 and 6 (48 runs, about 5 min).
The full default is 120 runs at paper size; in scenarios 4, 5 and 8 a stolen part of the ray
tracer's screen (up to 614 KB) may cross a link at 1-10 KB/s: such a run can reach --timeout
(600 s), is recorded as a FAIL row with its error, and the sweep goes on (exit status 1).
"""
import json
import os

from app_runs import save_fig
from framework import REPO, ExperimentError, Fit, median, run_cli

APPS = ["integrate", "nqueens", "raytrace", "satin-tsp"]
POLICIES = ["rs", "chs", "crs"]
SCENARIOS = [str(n) for n in range(1, 10)]
QUICK_SCENARIOS = ["1", "4", "6"]
SCEN_DIR = os.path.join(REPO, "perf", "wan_scenarios")
STARTUP_S = 4.0


def scenario_flags(s):
    if s == "9":
        return ["--wan-series", os.path.join(SCEN_DIR, "s9.series")]
    return ["--wan-script", os.path.join(SCEN_DIR, f"s{s}.wan")]


def parse_list(v, allowed, flag):
    xs = [x.strip() for x in v.split(",") if x.strip()]
    bad = [x for x in xs if x not in allowed]
    if bad or not xs:
        raise ExperimentError(f"{flag} '{v}': allowed values are {', '.join(allowed)}")
    return xs


class Layout:
    def __init__(self, args, cores):
        self.polling = args.polling or "adaptive"
        if self.polling == "inline":
            raise ExperimentError("--polling inline: the runtime refuses inline polling over iccs; use adaptive")
        self.threads = 4 * args.threads
        self.cores = cores
        over = self.threads > cores
        self.fit = Fit(cores, self.threads, True, f"4 clusters x {args.threads} compute threads")
        self.fit.oversubscribed = over
        self.fit.scaled = True
        self.fit.mode = "oversubscribed" if over else "scaled"
        self.fit.text = (f"4 clusters x {args.threads} compute threads (the study: 4 x 16) + 1 proxy per cluster "
                         f"({self.polling} polling) on {cores} cores" + (": OVERSUBSCRIBED" if over else ""))
        self.label = f" [scaled: 4 x {args.threads} threads" + ("; OVERSUBSCRIBED]" if over else "]")
        self.layout = (f"the study: 4 clusters x 16 processors; here 4 clusters x {args.threads} compute threads "
                       f"(baseline: 1 cluster x {4 * args.threads}), the study's WAN scenarios unscaled")


class Satin:
    name = "satin"
    figure = "Satin (van Nieuwpoort et al.), Figure 6"
    title = "work stealing RS / CHS / CRS: speedup relative to one cluster, nine WAN scenarios"
    columns = ["app", "policy", "scenario", "clusters", "processes", "time_s", "speedup", "wan_steals",
               "local_steals", "result"]

    def add_options(self, ap):
        ap.add_argument("--apps", default=",".join(APPS), help=f"comma-separated programs (default {','.join(APPS)})")
        ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policies (default rs,chs,crs)")
        ap.add_argument("--scenarios", help="comma-separated WAN scenarios 1..9 (default all; --quick: 1,4,6)")
        ap.add_argument("--size", choices=["test", "paper"], help="problem size (default paper; --quick: test)")
        ap.add_argument("--threads", type=int, default=2, help="compute threads per cluster (default 2)")
        ap.add_argument("--reps", type=int, default=1, help="runs per configuration, the median is reported (default 1)")
        ap.add_argument("--timeout", type=int, default=600, help="seconds one run may take (default 600)")

    def check(self, args):
        args.app_list = parse_list(args.apps, APPS, "--apps")
        args.policy_list = parse_list(args.policies, POLICIES, "--policies")
        args.scenario_list = parse_list(args.scenarios, SCENARIOS, "--scenarios") if args.scenarios else \
            (QUICK_SCENARIOS if args.quick else SCENARIOS)
        args.size = args.size or ("test" if args.quick else "paper")
        if not 1 <= args.threads <= 16:
            raise ExperimentError(f"--threads {args.threads}: expected 1..16")
        if not 1 <= args.reps <= 20:
            raise ExperimentError(f"--reps {args.reps}: expected 1..20")

    def host_layout(self, args, cores):
        self.layout = Layout(args, cores)
        return self.layout

    def plan(self, args):
        t = args.threads
        cfgs = []
        for rep in range(args.reps):
            for app in args.app_list:
                for pol in (["rs"] if "rs" not in args.policy_list else []) + args.policy_list:
                    cfgs.append(dict(app=app, policy=pol, scenario="single", clusters=1, threads=4 * t, rep=rep))
                    if pol in args.policy_list:
                        cfgs += [dict(app=app, policy=pol, scenario=s, clusters=4, threads=t, rep=rep)
                                 for s in args.scenario_list]
        for c in cfgs:
            c["cost"] = STARTUP_S + (3.0 if args.size == "paper" else 1.0) * (2 if c["clusters"] > 1 else 1)
            c["id"] = f"{c['app']} {c['policy']} scenario {c['scenario']} ({c['clusters']} x {c['threads']}) " \
                      f"rep {c['rep'] + 1}/{args.reps}"
            c["size"] = args.size
        return cfgs

    def run_one(self, cfg, ctx):
        a = ["run", cfg["app"], "--policy", cfg["policy"], "--size", cfg["size"], "--clusters", str(cfg["clusters"]),
             "--threads", str(cfg["threads"]), "--proxies", "1", "--transport", "iccs", "--polling", ctx.polling,
             "--json", "--timeout", str(ctx.args.timeout), "--set", "cluster.peer_timeout_ms=30000"]
        if cfg["scenario"] != "single":
            a += scenario_flags(cfg["scenario"])
        load = os.getloadavg()[0]
        try:
            out, took, _ = run_cli(ctx.cli, a, timeout=ctx.args.timeout + 60)
        except ExperimentError as e:
            return {"cfg": cfg, "run": None, "error": str(e)[-1500:], "load1": load}, 0.0, None
        run = None
        for line in out.splitlines():
            if line.startswith("{") and '"app"' in line:
                run = json.loads(line)
        if run is None:
            return {"cfg": cfg, "run": None, "error": "no JSON line:\n" + out[-1500:], "load1": load}, took, None
        return {"cfg": cfg, "run": run, "load1": load}, took, None

    def summarize(self, raw, args):
        def key(c):
            return (c["app"], c["policy"], c["scenario"])
        groups = {}
        for r in raw:
            groups.setdefault(key(r["cfg"]), []).append(r)
        base = {}
        for (app, pol, scen), rs in groups.items():
            if scen == "single" and pol == "rs":
                ok = [r["run"]["time_s"] for r in rs if r["run"] and r["run"]["result"] == "PASS"]
                base[app] = median(ok) if ok else None
        rows = []
        for (app, pol, scen), rs in groups.items():
            ok = [r["run"] for r in rs if r["run"] is not None]
            c = rs[0]["cfg"]
            row = {"app": app, "policy": pol, "scenario": scen, "clusters": c["clusters"],
                   "processes": c["clusters"] * c["threads"]}
            if ok:
                t = median([x["time_s"] for x in ok])
                row["time_s"] = round(t, 4)
                row["speedup"] = round(base[app] / t, 3) if base.get(app) and t > 0 else None
                row["wan_steals"] = median([x["wan_steals"] for x in ok])
                row["local_steals"] = median([x["local_steals"] for x in ok])
                row["result"] = "PASS" if all(x["result"] == "PASS" for x in ok) and len(ok) == len(rs) else "FAIL"
                row["max_outstanding_wan"] = max(x["max_outstanding_wan"] for x in ok)
            else:
                row["result"] = "FAIL"
            rows.append(row)
        loads = [r["load1"] for r in raw]
        notes = [f"scaling: {self.layout.layout}",
                 f"host load average (1 min) during the runs: min {min(loads):.1f}, median {median(loads):.1f}, "
                 f"max {max(loads):.1f}",
                 "speedup = T(1 cluster x %d threads, rs, no WAN) / T(row); scenario 'single': the policy on that one "
                 "cluster" % (4 * args.threads)]
        fails = [f"{r['app']} {r['policy']} scenario {r['scenario']}" for r in rows if r["result"] != "PASS"]
        if fails:
            notes.append("FAILED or missing: " + "; ".join(fails))
        for r in raw:
            if r.get("error"):
                notes.append(f"run {r['cfg']['id']}: {r['error'].splitlines()[0] if r['error'] else ''}")
        summary = {"baseline_time_s": base, "size": args.size, "threads_per_cluster": args.threads,
                   "load1": {"min": min(loads), "median": median(loads), "max": max(loads)}}
        return rows, summary, notes

    def plot(self, plt, rows, extra, meta, path):
        apps = sorted({r["app"] for r in rows}, key=APPS.index)
        fig, axes = plt.subplots(1, len(apps), figsize=(4.2 * len(apps), 3.6), squeeze=False)
        colors = {"rs": "#48c", "chs": "#c84", "crs": "#4a4"}
        for ax, app in zip(axes[0], apps):
            scen = [s for s in ["single"] + SCENARIOS if any(r["scenario"] == s and r["app"] == app for r in rows)]
            pols = [p for p in POLICIES if any(r["policy"] == p and r["app"] == app for r in rows)]
            w = 0.8 / max(1, len(pols))
            for k, p in enumerate(pols):
                ys = []
                for s in scen:
                    m = [r for r in rows if r["app"] == app and r["policy"] == p and r["scenario"] == s]
                    ys.append((m[0].get("speedup") or 0) if m else 0)
                ax.bar([i + k * w for i in range(len(scen))], ys, w, label=p.upper(), color=colors[p])
            ax.set_xticks([i + 0.4 - w / 2 for i in range(len(scen))])
            ax.set_xticklabels(scen, fontsize=8)
            ax.axhline(1.0, color="k", lw=0.6, ls="--")
            ax.set_title(app, fontsize=9)
            ax.set_xlabel("WAN scenario")
            ax.set_ylabel("speedup vs one cluster")
            ax.grid(True, axis="y", lw=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(meta["figure_title"], fontsize=8)
        save_fig(fig, path)
        plt.close(fig)
