"""app_runs.py: what the application experiments (apps, scaling, dispatch, wan) share.

One application run is `iccs-cli run APP --clusters C --cluster-size S --transport T ... --json`
(the contract in perf/README.md, "Application runs"): stdout is one JSON object (run time of the
parallel section, runtime/ICCS/DSM counters), progress goes to stderr. This module starts such a
run, checks the object has the contract's keys, and fits the study's layout (16 compute threads,
a processor each, proxies on processors of their own) to this host's cores.

Host fitting, the one idea: the total of compute threads is what the figures hold fixed. It is
scaled down to what fits the cores (a power of two, at least 2 so that there are 2 clusters);
--oversubscribe runs 2 x cores (at most the study's 16) anyway, labelled; --threads N picks it
(more than the cores only with --oversubscribe). Proxies cannot be folded into the compute
threads here: the runtime refuses inline polling over iccs (compute/README.md), so proxy threads
poll adaptively (asleep when idle) and share the cores; every row says how many threads it had
and whether that exceeded the cores.
"""
import json
import math
import os
import subprocess
import time

from framework import STUDY_COMPUTE_THREADS, ExperimentError, Fit, median

APPS = ["jacobi", "matmul", "gauss", "fft", "tsp", "water", "barnes", "unstructured"]
COMM_BOUND = ["tsp", "water", "barnes", "unstructured"]  # the study's communication-bound four
# The contract's keys an experiment reads (more may come; none may go).
REQUIRED_KEYS = ("app", "threads", "clusters", "cluster_size", "proxies_per_cluster", "transport", "result",
                 "parallel_s", "rt", "iccs", "dsm")
STARTUP_S = 0.6  # a run's own cost beside the parallel section (processes, EAL, connections): measured
# about 0.7 s a run (test size, 2 clusters) on the 2-core development hosts


def pow2_floor(n):
    return 1 << (max(1, n).bit_length() - 1)


def add_app_options(ap, apps_nargs, default_apps_text):
    """Options every app experiment has."""
    ap.add_argument("apps", nargs=apps_nargs, metavar="APP",
                    help=f"application(s): {', '.join(APPS)} (default: {default_apps_text})")
    ap.add_argument("--threads", type=int,
                    help="compute threads in total, held fixed across cluster sizes (a power of two; the study: 16; "
                         "default: what fits the host's cores, or 2 x cores up to 16 with --oversubscribe)")
    ap.add_argument("--size", choices=["test", "paper"], default="test", help="problem size (default test)")
    ap.add_argument("--reps", type=int, help="runs per configuration; the figure is the median (default 3, "
                                             "--quick 1)")
    ap.add_argument("--timeout", type=int, default=900,
                    help="seconds one run may take before it is stopped (default 900)")


def check_apps(args, default, more=()):
    """args.app_list from the positional APPs (or `default`), each one of APPS or of `more`."""
    apps = list(args.apps) if args.apps else list(default)
    for a in apps:
        if a not in APPS and a not in more:
            raise ExperimentError(f"APP '{a}': allowed values are {', '.join(APPS + list(more))}")
    args.app_list = list(dict.fromkeys(apps))
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if not 1 <= args.reps <= 50:
        raise ExperimentError(f"--reps {args.reps}: expected 1..50")
    if not 10 <= args.timeout <= 86400:
        raise ExperimentError(f"--timeout {args.timeout}: expected 10..86400 seconds")


class HostLayout:
    """The total of compute threads for this host (see the module's comment), and its labels."""

    def __init__(self, args, cores, min_threads=2):
        if args.polling == "inline":
            raise ExperimentError("--polling inline: the runtime refuses inline polling over iccs (no proxy thread "
                                  "would serve the service endpoint while compute threads compute); use adaptive "
                                  "(default) or busy")
        self.polling = args.polling or "adaptive"
        if args.threads is not None:
            t = args.threads
            if t < min_threads or t > 1024 or t & (t - 1):
                raise ExperimentError(f"--threads {t}: expected a power of two, {min_threads}..1024")
            if t > cores and not args.oversubscribe:
                raise ExperimentError(f"--threads {t}: this host has {cores} cores; add --oversubscribe to run "
                                      f"{t} compute threads on them (figures then labelled OVERSUBSCRIBED)")
            how = "as asked (--threads)"
        elif args.oversubscribe:
            t = max(min_threads, min(STUDY_COMPUTE_THREADS, pow2_floor(2 * cores)))
            how = f"--oversubscribe: 2 x {cores} cores, at most the study's {STUDY_COMPUTE_THREADS}"
        else:
            t = max(min_threads, min(STUDY_COMPUTE_THREADS, pow2_floor(cores)))
            how = f"scaled to the host's {cores} cores (a power of two)"
        self.threads = t
        self.cores = cores
        oversub = t > cores
        if self.polling == "busy" and not args.oversubscribe:
            raise ExperimentError("--polling busy: proxy threads would spin beside the compute threads on "
                                  f"{cores} cores; add --oversubscribe, or use adaptive")
        self.fit = Fit(cores, t, args.oversubscribe or oversub, f"{t} compute threads in total")
        self.fit.scaled = t < STUDY_COMPUTE_THREADS
        self.fit.oversubscribed = oversub or self.polling == "busy"
        self.fit.mode = "oversubscribed" if self.fit.oversubscribed else "scaled" if self.fit.scaled else "dedicated"
        self.fit.text = (f"{t} compute threads in total (the study: {STUDY_COMPUTE_THREADS}), {how}; "
                         f"proxies poll {self.polling} and share the {cores} cores with them")
        if oversub:
            self.fit.text += f": OVERSUBSCRIBED ({t} compute threads > {cores} cores)"
        self.label = (" [OVERSUBSCRIBED]" if self.fit.oversubscribed else
                      f" [scaled: {t} compute threads; proxies share the cores]")
        self.layout = (f"the study used {STUDY_COMPUTE_THREADS} compute threads and a processor per proxy; here "
                       f"{t} compute threads in total; proxy threads ({self.polling} polling: asleep when idle) "
                       f"share the {cores} cores, so a row with more threads than cores is marked oversubscribed")


def threads_total(compute, clusters, proxies_per_cluster):
    return compute + clusters * proxies_per_cluster


def run_app(ctx, app, clusters, cluster_size, transport, proxies=None, dispatch=None, delay_us=None, extra=()):
    """One `iccs-cli run APP ... --json`; returns (the JSON object, seconds, thread counters). A
    failed run (exit 1: wrong answer or a cluster failed; 2: usage) or output that breaks the
    contract raises ExperimentError naming it."""
    a = ctx.args
    args = ["run", app, "--clusters", str(clusters), "--cluster-size", str(cluster_size),
            "--transport", transport, "--size", a.size, "--json", "--polling", ctx.polling]
    if transport == "iccs":
        args += ["--proxies", str(proxies), "--dispatch", dispatch or "round-robin"]
    if transport == "delay":
        args += ["--delay-us", str(delay_us if delay_us is not None else "auto")]
    args += list(extra)
    rc, out, err, took, counters = launch(ctx, args)
    line = next((ln for ln in reversed(out.splitlines()) if ln.strip()), "")
    if rc == 2:
        raise ExperimentError(f"iccs-cli {' '.join(args)}: usage error (exit 2): {err.strip()[-1500:]}")
    try:
        j = json.loads(line)
    except ValueError:
        raise ExperimentError(f"iccs-cli {' '.join(args)} (exit {rc}) printed no JSON object on stdout "
                              f"(does this build have `run APP --json`?):\nstdout: {out[-800:]}\nstderr: {err[-1500:]}")
    if rc != 0 or j.get("result") != "PASS":
        raise RunFailed(f"iccs-cli {' '.join(args)}: result {j.get('result')} (exit {rc}): "
                              f"{j.get('failure') or ''}\nstderr: {err[-1500:]}")
    missing = [k for k in REQUIRED_KEYS if k not in j]
    if missing:
        raise ExperimentError(f"iccs-cli {' '.join(args)}: the JSON lacks {missing} (the run --json contract)")
    if not isinstance(j["parallel_s"], (int, float)) or j["parallel_s"] <= 0:
        raise ExperimentError(f"iccs-cli {' '.join(args)}: parallel_s = {j['parallel_s']!r}, expected seconds > 0")
    return j, took, counters


def launch(ctx, args):
    """Runs `iccs-cli ARGS` with the experiment's hardware counters and --timeout; returns (exit
    status, stdout, stderr, seconds, thread counters); RunTimeout when it ran past --timeout."""
    t0 = time.monotonic()
    p = subprocess.Popen([ctx.cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = ctx.counters_for_run(p.pid)
    try:
        out, err = p.communicate(timeout=ctx.args.timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        done()
        raise RunTimeout(f"{' '.join(args)}: no end after {ctx.args.timeout} s (--timeout)")
    counters = done()
    return p.returncode, out, err, time.monotonic() - t0, counters


class RunTimeout(ExperimentError):
    """A run that exceeded --timeout: recorded as such, the sweep goes on."""


class RunFailed(ExperimentError):
    """A run that ended FAIL (wrong answer, a cluster failed): recorded with its output, the sweep
    goes on, and the experiment ends with exit status 1. (Usage errors and output that breaks the
    contract stop the experiment at once: every further run would repeat them.)"""


def fail_counts(rs):
    """(timeouts, failures) among the raw runs of one configuration."""
    return sum(1 for r in rs if r.get("timeout")), sum(1 for r in rs if r.get("error"))


def iccs_stats(runs):
    """Medians over runs of the ICCS's proxy statistics (None over direct/delay, or where the
    source gave null): message time [us], queue length, utilization, and the balance between
    proxies (max / mean of messages sent)."""
    def med(key):
        xs = [r["iccs"][key] for r in runs if r.get("iccs") and r["iccs"].get(key) is not None]
        return round(median(xs), 4) if xs else None

    def imbalance(r):
        px = (r.get("iccs") or {}).get("proxies") or []
        tx = [p.get("msgs_tx") for p in px if p.get("msgs_tx") is not None]
        if not tx or sum(tx) == 0:
            return None
        return max(tx) / (sum(tx) / len(tx))
    imb = [x for x in (imbalance(r) for r in runs) if x is not None]
    return {"msg_time_us": med("msg_time_us_mean"), "queue_len": med("queue_len_mean"),
            "proxy_util": med("utilization_mean"), "proxy_tx_imbalance": round(median(imb), 3) if imb else None}


def rt_stats(runs):
    def med(key):
        xs = [(r.get("rt") or {}).get(key) for r in runs]
        xs = [x for x in xs if x is not None]
        return median(xs) if xs else None
    return {"msgs": med("msgs"), "bytes": med("bytes"), "mean_msg_bytes": med("mean_msg_bytes")}


def times(runs):
    ts = [r["parallel_s"] for r in runs]
    return {"time_s": round(median(ts), 6), "time_min_s": round(min(ts), 6), "time_max_s": round(max(ts), 6),
            "reps": len(ts)}


def round_sqrt(n):
    """Round half up: sqrt(1)=1 -> 1, sqrt(2)=1.41 -> 1, sqrt(4)=2 -> 2, sqrt(8)=2.83 -> 3."""
    return max(1, int(math.floor(math.sqrt(n) + 0.5)))


def save_fig(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def env_cli_note():
    v = os.environ.get("ICCS_EXPERIMENT_CLI")
    return f"iccs-cli from ICCS_EXPERIMENT_CLI={v}" if v else None
