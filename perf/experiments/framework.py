"""framework.py: what every experiment shares (perf/README.md, "Experiments").

An experiment is a class with: a name and the figure it reproduces; add_options(parser); plan()
-> the list of configurations (dicts with an "id" and a "cost" estimate in seconds); run_one()
-> a raw row (dict); summarize() -> the rows of the result CSV (columns in `columns`) and extra
JSON; plot() -> the PNG. The runner (runner.py) does the rest the same way for all: fitting the
configuration to the host's cores, progress with the time left, hardware counters, and the files
under results/<experiment>/<timestamp>/.
"""
import csv
import datetime
import json
import os
import re
import subprocess
import sys
import time


# The wire as the experiments see it (stack/README.md): inside a datagram's IP payload come UDP
# (8 bytes), slidwin (40, the run token included) and convergence (40) before the message; at MTU
# 1500 an IP fragment carries 1480. One place, so every boundary below follows a header change.
MTU = 1500
HEADERS_IN_IP_PAYLOAD = 8 + 40 + 40
IP_PAYLOAD_PER_FRAGMENT = (MTU - 20) // 8 * 8


def frames_of(size):
    """IP fragments of one message of `size` bytes sent as one datagram."""
    return max(1, -(-(size + HEADERS_IN_IP_PAYLOAD) // IP_PAYLOAD_PER_FRAGMENT))


def last_size_of_frames(k):
    """The largest message that fits k fragments: 1392 for one frame."""
    return k * IP_PAYLOAD_PER_FRAGMENT - HEADERS_IN_IP_PAYLOAD


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUDY_COMPUTE_THREADS = 16  # the study: 16 compute nodes in total


class ExperimentError(Exception):
    """A run that failed, or a wrong option: the message names it."""


def check_range(args, name, lo, hi, unit=""):
    """A numeric option within [lo, hi], or an ExperimentError naming the flag, its value and the range."""
    v = getattr(args, name.replace("-", "_"))
    if v < lo or v > hi:
        raise ExperimentError(f"--{name} {v}: expected {lo}..{hi}{' ' + unit if unit else ''}")


def host_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class Fit:
    """How a configuration that wants `threads` busy threads fits on this host's cores."""

    def __init__(self, cores, threads_wanted, oversubscribe, what):
        self.cores = cores
        self.threads_wanted = threads_wanted
        self.oversubscribed = False
        self.scaled = False
        if threads_wanted <= cores:
            self.mode = "dedicated"
            self.text = f"{what}: {threads_wanted} threads on {cores} cores (fits)"
        elif oversubscribe:
            self.mode = "oversubscribed"
            self.oversubscribed = True
            self.text = (f"{what}: {threads_wanted} threads on {cores} cores: OVERSUBSCRIBED (--oversubscribe): "
                         f"threads share cores, the figures include their waiting for a core")
        else:
            self.mode = "scaled"
            self.scaled = True
            self.text = f"{what}: {threads_wanted} threads do not fit on {cores} cores: scaled down"

    def as_json(self):
        return {"cores": self.cores, "threads_wanted": self.threads_wanted, "mode": self.mode,
                "oversubscribed": self.oversubscribed, "scaled": self.scaled, "text": self.text}


class Progress:
    """`[3/20] what: 1.2 s; 15% done, about 1m10s left` on stderr, from the configurations' cost
    estimates corrected by the time the finished ones really took."""

    def __init__(self, configs):
        self.total_cost = sum(c["cost"] for c in configs) or 1.0
        self.n = len(configs)
        self.done_cost = 0.0
        self.done = 0
        self.t0 = time.monotonic()

    def step(self, cfg, took_s, note=""):
        self.done += 1
        self.done_cost += cfg["cost"]
        elapsed = time.monotonic() - self.t0
        left = elapsed / self.done_cost * (self.total_cost - self.done_cost) if self.done_cost > 0 else 0
        pct = 100.0 * self.done_cost / self.total_cost
        print(f"[{self.done}/{self.n}] {cfg['id']}: {took_s:.1f} s{note}; {pct:.0f}% done, about {fmt_s(left)} left",
              file=sys.stderr, flush=True)

    def replan(self, pending):
        """The pending configurations were re-costed (by the finished runs, in real seconds): the
        time left is then their sum, so the done part counts as the seconds it really took."""
        self.done_cost = max(1e-9, time.monotonic() - self.t0)
        self.total_cost = self.done_cost + sum(c["cost"] for c in pending)


def fmt_s(s):
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def out_dir(experiment, base=None):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    root = base or os.path.join(REPO, "results")
    d = os.path.join(root, experiment, stamp)
    n = 1
    while os.path.exists(d):  # two runs in one second
        n += 1
        d = os.path.join(root, experiment, f"{stamp}-{n}")
    os.makedirs(d)
    return d


def write_csv(path, columns, rows, meta_lines=()):
    """CSV with a header row; metadata as leading '# key: value' lines (csv readers: skip '#')."""
    with open(path, "w", newline="") as f:
        for line in meta_lines:
            f.write(f"# {line}\n")
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def run_cli(cli, args, env=None, timeout=600, on_start=None):
    """Runs `iccs-cli ARGS`; returns (stdout+stderr, seconds). on_start(pid) is called once the
    launcher runs (hardware counters attach to its cluster processes); it returns a callable
    that is called when the run ended. A failed run raises ExperimentError with its output."""
    t0 = time.monotonic()
    p = subprocess.Popen([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, **(env or {})))
    done = on_start(p.pid) if on_start else None
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise ExperimentError(f"iccs-cli {' '.join(args)}: no end after {timeout} s\n{out[-2000:]}")
    finally:
        extra = done() if done else None
    took = time.monotonic() - t0
    if p.returncode != 0:
        raise ExperimentError(f"iccs-cli {' '.join(args)} failed (exit {p.returncode}):\n{out[-3000:]}")
    return out, took, extra


def parse_rtt(out):
    """The pingpong result line 'rtt_ns MEDIAN P99 MIN MAX N'."""
    m = re.search(r"^rtt_ns (\d+) (\d+) (\d+) (\d+) (\d+)$", out, re.M)
    if not m:
        raise ExperimentError("the run printed no 'rtt_ns' line:\n" + out[-2000:])
    med, p99, mn, mx, n = (int(x) for x in m.groups())
    return {"rtt_median_ns": med, "rtt_p99_ns": p99, "rtt_min_ns": mn, "rtt_max_ns": mx, "rounds": n}


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def quantile(xs, q):
    s = sorted(xs)
    if not s:
        return None
    return s[min(len(s) - 1, int(q * len(s)))]
