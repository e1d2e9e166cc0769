#!/usr/bin/env python3
"""runner.py: `./iccs experiment NAME [OPTIONS]` (perf/README.md, "Experiments").

One table of experiments (EXPERIMENTS); each runs its configurations through the same steps:
fit the configuration to the host's cores (or oversubscribe when asked), probe the counter
sources once, run every configuration with progress and the time left, then write
results/<experiment>/<timestamp>/<experiment>.csv, .json (metadata, counters, the raw runs) and
.png, and print where. Exit status: 0 done; 1 a run failed; 2 a wrong argument.
"""
import argparse
import os
import platform
import socket
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hwcounters  # noqa: E402
from exp_apps import Apps  # noqa: E402
from exp_awari import Awari  # noqa: E402
from exp_breakdown import Breakdown  # noqa: E402
from exp_calibrate import Calibrate  # noqa: E402
from exp_dispatch import Dispatch  # noqa: E402
from exp_latency import Latency  # noqa: E402
from exp_satin import Satin  # noqa: E402
from exp_scaling import Scaling  # noqa: E402
from exp_wan import Wan  # noqa: E402
from exp_widearea import Widearea  # noqa: E402
from framework import (REPO, STUDY_COMPUTE_THREADS, ExperimentError, Fit, Progress, fmt_s, host_cores,  # noqa: E402
                       out_dir, write_csv, write_json)

# The experiments, by name: a class with name, figure, title, columns, add_options, check,
# threads_wanted, plan, run_one, summarize, plot; optionally host_layout (the app experiments fit
# their own thread layout, app_runs.HostLayout) and reestimate (re-costs the pending runs).
EXPERIMENTS = {e.name: e for e in (Latency(), Breakdown(), Apps(), Scaling(), Dispatch(), Wan(), Widearea(),
                                   Satin(), Calibrate(), Awari())}
LATER = {}


class ArgError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse that names the bad flag and exits 2 through ArgError (no usage dump)."""

    def error(self, message):
        raise ArgError(message)


def list_text():
    lines = ["usage: ./iccs experiment NAME [OPTIONS]    (./iccs experiment NAME --help)", "", "experiments:"]
    for e in EXPERIMENTS.values():
        lines.append(f"  {e.name:<10} {e.figure}: {e.title}")
    for n, what in LATER.items():
        lines.append(f"  {n:<10} {what}: not built yet (needs the applications)")
    lines += ["", "Every experiment: --quick (smallest setting), --oversubscribe (run the study's thread layout even",
              "when it needs more cores than the host has; figures are then labelled oversubscribed), --polling MODE,",
              "--out DIR (default results/), --cli PATH. Results: results/<experiment>/<UTC timestamp>/.",
              "The app experiments (apps, scaling, dispatch, wan) run `iccs-cli run APP ... --json`; the environment",
              "variable ICCS_EXPERIMENT_CLI=PATH replaces the iccs-cli every experiment drives (default: this",
              "checkout's build/cli/iccs-cli)."]
    return "\n".join(lines)


def common_options(ap):
    ap.add_argument("--quick", action="store_true", help="the smallest setting (what ./iccs test runs)")
    ap.add_argument("--oversubscribe", action="store_true",
                    help="latency, breakdown: dedicated proxy threads even when the threads do not fit the cores; "
                         "apps, scaling, dispatch, wan: 2 x cores compute threads (at most 16) instead of what "
                         "fits (labelled so)")
    ap.add_argument("--polling", choices=["inline", "adaptive", "busy"],
                    help="proxy polling. latency, breakdown: default busy when the threads fit the cores; else "
                         "inline, the compute threads run the proxies' loop; adaptive with --oversubscribe. apps, "
                         "scaling, dispatch, wan: default adaptive; inline is refused (the runtime needs proxy "
                         "threads over iccs); busy only with --oversubscribe")
    ap.add_argument("--out", help="results root (default: results/ at the repository root)")


class Context:
    def __init__(self, cli, args, polling, sources):
        self.cli = cli
        self.args = args
        self.polling = polling
        self.sources = sources
        self.pcm = None
        self.pcm_error = None
        if sources.pcm:  # untested here (no Intel host): any failure is recorded, not fatal
            try:
                self.pcm = hwcounters.Pcm()
            except Exception as e:  # noqa: BLE001
                self.pcm_error = f"pcm-sensor-server did not start: {e}"

    def counters_for_run(self, launcher_pid):
        rc = hwcounters.RunCounters(self.sources, launcher_pid, self.polling == "inline")
        before = self._pcm_sample()

        def done():
            threads = rc.stop()
            after = self._pcm_sample()
            if before and after:  # system-wide, per run: one extra pseudo-thread row
                threads.append({"cluster": None, "role": "system (Intel PCM)",
                                **{k: after[k] - before[k] for k in after}})
            return threads
        return done

    def _pcm_sample(self):
        if self.pcm is None:
            return None
        try:
            return self.pcm.sample()
        except Exception as e:  # noqa: BLE001
            self.pcm_error = f"reading pcm-sensor-server failed: {e}"
            return None

    def close(self):
        if self.pcm is not None:
            self.pcm.close()


def reexec_debian_python(cli, argv):
    """Debian's python3-matplotlib and python3-numpy serve Debian's interpreter; a python3 earlier
    on PATH (pyenv, a venv) does not see them: run again under /usr/bin/python3 (once)."""
    deb = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(deb) and os.access(deb, os.X_OK) and \
            not os.environ.get("ICCS_EXPERIMENT_REEXEC"):
        os.environ["ICCS_EXPERIMENT_REEXEC"] = "1"
        os.execv(deb, [deb, os.path.abspath(__file__), "--cli", cli] + argv)


def main(argv):
    cli = os.path.join(REPO, "build", "cli", "iccs-cli")
    if len(argv) >= 2 and argv[0] == "--cli":
        cli, argv = argv[1], argv[2:]
    if os.environ.get("ICCS_EXPERIMENT_CLI"):  # e.g. another checkout's build (said in the output)
        cli = os.environ["ICCS_EXPERIMENT_CLI"]
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(list_text())
        return 0 if argv else 2
    name = argv[0]
    if name not in EXPERIMENTS:
        if name in LATER:
            print(f"iccs experiment: '{name}' ({LATER[name]}) is not built yet: it needs the applications "
                  f"(issue 8); available: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        else:
            print(f"iccs experiment: unknown experiment '{name}' (available: {', '.join(EXPERIMENTS)})",
                  file=sys.stderr)
        return 2
    exp = EXPERIMENTS[name]
    if name == "calibrate" or "--model" in argv[1:]:  # the model needs numpy
        try:
            import numpy  # noqa: F401
        except ImportError:
            reexec_debian_python(cli, argv)
    doc = sys.modules[type(exp).__module__].__doc__ or ""
    doc = doc.split(":", 1)[1].strip() if doc.startswith("exp_") else doc
    ap = Parser(prog=f"iccs experiment {name}", description=f"{exp.figure}: {exp.title}.\n\n{doc}",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    common_options(ap)
    exp.add_options(ap)
    try:
        args = ap.parse_args(argv[1:])
        args.explicit = {a.lstrip("-").split("=")[0].replace("-", "_") for a in argv[1:] if a.startswith("--")}
        args._cli = cli  # experiments that ask the build what it has (widearea: the program registry)
        exp.check(args)
    except ArgError as e:
        print(f"iccs experiment {name}: {e} (see ./iccs experiment {name} --help)", file=sys.stderr)
        return 2
    except ExperimentError as e:
        print(f"iccs experiment {name}: {e}", file=sys.stderr)
        return 2
    if not os.access(cli, os.X_OK):
        print(f"iccs experiment: {cli} is not built (./iccs builds it)", file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        reexec_debian_python(cli, argv)
        print("iccs experiment: matplotlib is missing (Debian package python3-matplotlib; ./iccs experiment "
              "installs it)", file=sys.stderr)
        return 1

    # Fit to the host: the layout the study implies (a dedicated core per compute thread and proxy).
    cores = host_cores()
    what = "2 clusters x (1 compute thread + 1 proxy)"
    lay = None
    if hasattr(exp, "host_layout"):  # the app experiments: app_runs.HostLayout
        try:
            lay = exp.host_layout(args, cores)
        except ExperimentError as e:
            print(f"iccs experiment {name}: {e}", file=sys.stderr)
            return 2
        fit, polling, layout = lay.fit, lay.polling, lay.layout
    elif args.polling:
        polling = args.polling
        fit = Fit(cores, exp.threads_wanted(polling), args.oversubscribe, f"{what}, polling {polling}")
        if fit.scaled:  # asked for a polling mode that does not fit, without --oversubscribe
            print(f"iccs experiment {name}: --polling {polling} needs {fit.threads_wanted} busy threads, this host has "
                  f"{cores} cores: add --oversubscribe, or use --polling inline", file=sys.stderr)
            return 2
    else:
        fit = Fit(cores, exp.threads_wanted("busy"), args.oversubscribe, what)
        polling = "busy" if fit.mode == "dedicated" else "adaptive" if fit.oversubscribed else "inline"
        if fit.scaled:
            fit.text += (f": proxies polled inline (each compute thread runs its cluster's proxy loop: "
                         f"{exp.threads_wanted('inline')} threads)")
    if lay is None:
        layout = (f"the study used {STUDY_COMPUTE_THREADS} compute threads; this experiment needs 1 per cluster "
                  f"(2 clusters), so that count is not scaled")
    print(f"experiment {name} ({exp.figure}): {exp.title}", flush=True)
    print(f"host: {cores} cores; {fit.text}; polling {polling}", flush=True)
    print(f"scaling: {layout}", flush=True)
    if os.environ.get("ICCS_EXPERIMENT_CLI"):
        print(f"iccs-cli: {cli} (from ICCS_EXPERIMENT_CLI)", flush=True)

    sources = hwcounters.probe()
    for n in sources.notes:  # once per experiment: which source is missing and why
        print(n, flush=True)

    try:
        configs = exp.plan(args)
    except ExperimentError as e:
        print(f"iccs experiment {name}: {e}", file=sys.stderr)
        return 2
    est = sum(c["cost"] for c in configs)
    print(f"{len(configs)} runs, estimated {fmt_s(est)}", flush=True)
    ctx = Context(cli, args, polling, sources)
    prog = Progress(configs)
    raw, counters = [], []
    t0 = time.monotonic()
    try:
        for c in configs:
            r, took, cnt = exp.run_one(c, ctx)
            raw.append(r)
            counters.append({"run": c["id"], "threads": cnt})
            prog.step(c, took)
            if hasattr(exp, "reestimate"):
                pending = configs[len(raw):]
                exp.reestimate(pending, raw)
                prog.replan(pending)
        rows, extra, notes = exp.summarize(raw, args)
    except ExperimentError as e:
        ctx.close()
        print(f"iccs experiment {name}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        ctx.close()
        print(f"iccs experiment {name}: interrupted", file=sys.stderr)
        return 130
    ctx.close()
    if ctx.pcm_error:
        print(f"counters: Intel PCM: {ctx.pcm_error}", flush=True)
        sources.notes.append(f"counters: Intel PCM: {ctx.pcm_error}")

    d = out_dir(name, args.out)
    label = " [OVERSUBSCRIBED]" if fit.oversubscribed else " [scaled: inline polling]" if fit.scaled else ""
    if lay is not None:
        label = lay.label
        n_over = sum(1 for r in rows if r.get("oversubscribed"))
        if n_over and "OVERSUBSCRIBED" not in label:
            label += f" [{n_over} of {len(rows)} rows OVERSUBSCRIBED: compute + proxy threads > cores]"
    meta = {
        "experiment": name, "reproduces": exp.figure, "title": exp.title,
        "figure_title": f"{exp.figure}: {exp.title}\n{cores} cores, polling {polling}{label}",
        "timestamp_utc": os.path.basename(d), "host": socket.gethostname(), "kernel": platform.release(),
        "cores": cores, "fit": fit.as_json(), "polling": polling, "oversubscribed": fit.oversubscribed,
        "study_compute_threads": STUDY_COMPUTE_THREADS, "scaling": layout, "quick": args.quick,
        "options": {k: v for k, v in vars(args).items() if k not in ("explicit",)},
        "seconds": round(time.monotonic() - t0, 1), "iccs_cli": cli,
    }
    if lay is not None:
        # narrow figures (one app): the label on lines of its own, wrapped
        meta["figure_title"] = "\n".join([f"{exp.figure}: {exp.title}", f"{cores} cores, polling {polling}"]
                                         + textwrap.wrap(label.strip(), 90))
        meta["threads"] = lay.threads
        meta["rows_oversubscribed"] = n_over
    csv_path = os.path.join(d, f"{name}.csv")
    json_path = os.path.join(d, f"{name}.json")
    png_path = os.path.join(d, f"{name}.png")
    write_csv(csv_path, exp.columns, rows,
              [f"experiment: {name} ({exp.figure})", f"cores: {cores}", f"polling: {polling}",
               f"fit: {fit.mode}", f"oversubscribed: {str(fit.oversubscribed).lower()}"]
              + ([f"threads: {lay.threads} compute threads in total", f"scaling: {layout}",
                  f"rows_oversubscribed: {meta['rows_oversubscribed']} of {len(rows)} rows have more threads "
                  f"(compute + proxies) than cores"] if lay else []))
    write_json(json_path, {"meta": meta, "results": rows, "summary": extra, "notes": notes,
                           "counters": {"sources": sources.as_json(), "notes": sources.notes,
                                        "per_role": hwcounters.summarize([c["threads"] or [] for c in counters]),
                                        "per_run": counters},
                           "raw": raw if name != "breakdown" else [{k: v for k, v in r.items() if k != "rounds"}
                                                                   for r in raw]})
    exp.plot(plt, rows, extra, meta, png_path)
    for n in notes:
        print(n, flush=True)
    rel = os.path.relpath(d, os.getcwd())
    print(f"results: {rel}/ ({name}.csv, {name}.json, {name}.png){label}", flush=True)
    failed = sum(1 for r in raw if isinstance(r, dict) and (r.get("error") or r.get("timeout")))
    if failed:  # the app experiments record a failed run and go on; the exit status still says so
        print(f"iccs experiment {name}: {failed} run(s) failed or timed out (the rows' failures/timeouts columns)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
