"""exp_latency.py: `./iccs experiment latency`, the study's Figure 6: one-way latency of one message
against its size, 0..4000 bytes, MTU 1500, through the whole ICCS path (convergence, a proxy per
cluster, the stack, the memif fabric), as RTT/2 of a ping-pong between thread 0 of two clusters.

A message is one datagram (stripe threshold 8000 > 4000: convergence does not cut it), which IP
fragments at MTU 1500: its IP payload is size + 88 bytes (UDP 8 + slidwin 40 + convergence 40), a
frame carries 1480, so 1 frame up to 1392 bytes, 2 up to 2872, 3 above: the steps of the curve.
(The study's headers were smaller: its steps sat at about 1500 and 3000 bytes.)

Interleaving: one run (a pair of cluster processes) measures every size: its round i sends size
S[i mod n] (ICCS_PINGPONG_SIZES, compute/cluster.cpp), sizes in a shuffled order per run, so a
burst of load on the shared host hits all sizes alike; `rounds` round trips per size and run. A
run's median RTT/2 of a size is its figure; the size's median_us is the median over `reps` runs
(p99_us likewise from the runs' p99 RTT/2).
Noise (the step test): The noise of the curve near a boundary is the
largest |median_us difference| between two neighbouring sizes of the sweep with the same fragment
count, within 600 bytes of the boundary. A step is detected when the latency just past a boundary
exceeds the latency at its last one-frame-fewer size by more than that noise.
"""
import math
import random
import re

from framework import (HEADERS_IN_IP_PAYLOAD, IP_PAYLOAD_PER_FRAGMENT, MTU, ExperimentError, Fit, check_range,
                       frames_of, last_size_of_frames, median, parse_rtt, run_cli)

HDR_BYTES = HEADERS_IN_IP_PAYLOAD  # UDP + slidwin + convergence headers inside the IP payload
ONE_FRAME = last_size_of_frames(1)  # 1392: the last size of one frame, the test pair with 1501
FRAG_PAYLOAD = IP_PAYLOAD_PER_FRAGMENT  # 1480
STRIPE_THRESHOLD = 8000             # > 4000: a message stays one datagram


fragments = frames_of


def boundaries(max_size):
    """The last size of each fragment count: [1392, 2872, ...] up to max_size."""
    out = []
    k = 1
    while last_size_of_frames(k) < max_size:
        out.append(last_size_of_frames(k))
        k += 1
    return out


def step_noise(rows, boundary, window=600):
    """Largest |median_us difference| between neighbouring sizes with the same fragment count
    within `window` bytes of `boundary` (rows sorted by size)."""
    near = [r for r in rows if abs(r["size_bytes"] - boundary) <= window + 1]
    diffs = [abs(b["median_us"] - a["median_us"]) for a, b in zip(near, near[1:])
             if fragments(a["size_bytes"]) == fragments(b["size_bytes"])]
    return max(diffs) if diffs else None


class Latency:
    name = "latency"
    figure = "Figure 6"
    title = "end-to-end one-way latency of one message against its size (MTU 1500)"
    columns = ["size_bytes", "fragments", "median_us", "p99_us", "min_us", "runs", "rounds_per_run",
               "run_medians_us"]

    def add_options(self, ap):
        ap.add_argument("--sizes", help="comma-separated message sizes [bytes] instead of the sweep")
        ap.add_argument("--step", type=int, default=100, help="sweep step [bytes] (default 100; 0..4000 plus the "
                        "sizes on both sides of each fragment boundary)")
        ap.add_argument("--max-size", type=int, default=4000, help="largest size [bytes] (default 4000)")
        ap.add_argument("--rounds", type=int, default=4000, help="round trips per size and run (default 4000)")
        ap.add_argument("--reps", type=int, default=5, help="runs, each over every size (default 5)")
        ap.add_argument("--seed", type=int, default=1, help="order of the sizes within a run (default 1)")

    def check(self, args):
        check_range(args, "step", 1, 4000, "bytes")
        check_range(args, "max-size", 0, 9000, "bytes")
        check_range(args, "rounds", 100, 10_000_000)
        check_range(args, "reps", 1, 100)
        if args.sizes:
            try:
                sizes = sorted({int(x) for x in args.sizes.split(",") if x.strip() != ""})
            except ValueError:
                raise ExperimentError(f"--sizes '{args.sizes}': expected comma-separated whole numbers of bytes")
            if not sizes or sizes[0] < 0 or sizes[-1] > 9000:
                raise ExperimentError(f"--sizes '{args.sizes}': each size must be 0..9000 bytes")
            args.size_list = sizes
        elif args.quick:
            # around the first boundary, enough neighbours for the noise measure; few rounds
            args.size_list = [1000, 1100, 1200, 1300, ONE_FRAME, 1501, 1600, 1700, 1800, 1900]
            if "rounds" not in args.explicit:
                args.rounds = 2000
            if "reps" not in args.explicit:
                args.reps = 3
        else:
            sizes = set(range(0, args.max_size + 1, args.step))
            for b in boundaries(args.max_size):
                sizes |= {b, b + 1}
            sizes |= {s for s in (1500, 1501, 3000, 3001) if s <= args.max_size}  # the study's step sizes
            args.size_list = sorted(sizes)

    def threads_wanted(self, polling):
        # 2 clusters x 1 compute thread, plus a proxy thread per cluster unless inline
        return 2 if polling == "inline" else 4

    def plan(self, args):
        configs = []
        rng = random.Random(args.seed)
        for rep in range(args.reps):
            order = list(args.size_list)
            rng.shuffle(order)
            configs.append({"id": f"run {rep + 1}/{args.reps}: {len(order)} sizes x {args.rounds} round trips",
                            "sizes": order, "rep": rep, "cost": 0.6 + len(order) * args.rounds * 12e-6})
        return configs

    def run_one(self, cfg, ctx):
        sizes = cfg["sizes"]
        n = len(sizes)
        args = ["run", "pingpong", "--clusters", "2", "--threads", "1", "--proxies", "1",
                "--polling", ctx.polling, "--mtu", str(MTU), "--stripe-threshold", str(STRIPE_THRESHOLD),
                "--min-size", str(sizes[0]), "--max-size", str(max(max(sizes), 1)),
                "--messages", str(ctx.args.rounds * n), "--warmup", str(20 * n), "--timeout", "600"]
        out, took, counters = run_cli(ctx.cli, args, env={"ICCS_PINGPONG_SIZES": ",".join(map(str, sizes))},
                                      on_start=ctx.counters_for_run)
        parse_rtt(out)  # the run's overall line must be there
        got = {}
        for m in re.finditer(r"^rtt_ns_size (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)$", out, re.M):
            s, med, p99, mn, mx, cnt = (int(x) for x in m.groups())
            got[s] = {"size_bytes": s, "rep": cfg["rep"], "rtt_median_ns": med, "rtt_p99_ns": p99, "rtt_min_ns": mn,
                      "rtt_max_ns": mx, "rounds": cnt, "one_way_median_us": med / 2000.0,
                      "one_way_p99_us": p99 / 2000.0, "one_way_min_us": mn / 2000.0}
        missing = [s for s in sizes if s not in got]
        if missing:
            raise ExperimentError(f"the run reported no round trips for sizes {missing} (is ICCS_PINGPONG_SIZES "
                                  f"supported by this build's pingpong?)\n{out[-1500:]}")
        return [got[s] for s in sizes], took, counters

    def summarize(self, raw, args):
        by = {}
        for run in raw:
            for r in run:
                by.setdefault(r["size_bytes"], []).append(r)
        rows = []
        for s in sorted(by):
            runs = by[s]
            rows.append({"size_bytes": s, "fragments": fragments(s),
                         "median_us": round(median([r["one_way_median_us"] for r in runs]), 3),
                         "p99_us": round(median([r["one_way_p99_us"] for r in runs]), 3),
                         "min_us": round(min(r["one_way_min_us"] for r in runs), 3),
                         "runs": len(runs), "rounds_per_run": runs[0]["rounds"],
                         "run_medians_us": " ".join(f"{r['one_way_median_us']:.3f}" for r in runs)})
        steps = []
        by_size = {r["size_bytes"]: r for r in rows}
        for b in boundaries(max(by_size)):
            before, after = by_size.get(b), by_size.get(b + 1)
            if before is None or after is None:
                continue
            noise = step_noise(rows, b)
            jump = after["median_us"] - before["median_us"]
            steps.append({"boundary_bytes": b, "last_size_with_fragments": fragments(b), "before_us": before["median_us"],
                          "after_us": after["median_us"], "step_us": round(jump, 3),
                          "noise_us": None if noise is None else round(noise, 3),
                          "detected": noise is not None and jump > noise})
        # the test pair: the last size of one frame (1392) against 1501 (two frames)
        pair = None
        if ONE_FRAME in by_size and 1501 in by_size:
            noise = step_noise(rows, ONE_FRAME)
            jump = by_size[1501]["median_us"] - by_size[ONE_FRAME]["median_us"]
            pair = {"one_frame_bytes": ONE_FRAME, "at_one_frame_us": by_size[ONE_FRAME]["median_us"],
                    "at_1501_us": by_size[1501]["median_us"],
                    "step_us": round(jump, 3), "noise_us": None if noise is None else round(noise, 3),
                    "detected": noise is not None and jump > noise}
        extra = {"mtu_bytes": MTU, "headers_in_ip_payload_bytes": HDR_BYTES,
                 "ip_payload_per_fragment_bytes": FRAG_PAYLOAD, "stripe_threshold_bytes": STRIPE_THRESHOLD,
                 "fragment_boundaries_bytes": boundaries(max(by_size)), "steps": steps, "step_one_frame_1501": pair,
                 "noise_definition": "largest |median_us difference| between neighbouring sizes with the same "
                                     "fragment count within 600 bytes of the boundary"}
        notes = [f"a message of S bytes is one datagram of S + {HDR_BYTES} bytes of IP payload (UDP 8 + slidwin 40 + "
                 f"convergence 40; stripe threshold {STRIPE_THRESHOLD} keeps it whole); at MTU {MTU} a frame carries "
                 f"{FRAG_PAYLOAD}: IP fragments it into 2 frames above {boundaries(9000)[0]} bytes and 3 above "
                 f"{boundaries(9000)[1]}: the steps (the study's smaller headers put them at ~1500 and ~3000)"]
        if pair is not None:
            notes.append(f"{ONE_FRAME} B (1 frame) -> 1501 B (2 frames): {pair['at_one_frame_us']:.2f} -> "
                         f"{pair['at_1501_us']:.2f} us "
                         f"(+{pair['step_us']:.2f}), noise of neighbouring points {pair['noise_us']} us: "
                         f"{'step detected' if pair['detected'] else 'step NOT detected'}")
        for st in steps:
            notes.append(f"step after {st['boundary_bytes']} B: {st['before_us']:.2f} -> {st['after_us']:.2f} us "
                         f"(+{st['step_us']:.2f}), noise of neighbouring points {st['noise_us']} us: "
                         f"{'detected' if st['detected'] else 'NOT detected'}")
        return rows, extra, notes

    def plot(self, plt, rows, extra, meta, path):
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
        xs = [r["size_bytes"] for r in rows]
        ax.plot(xs, [r["median_us"] for r in rows], "o-", ms=3, label="median one-way latency (RTT/2)")
        ax2.plot(xs, [r["p99_us"] for r in rows], "o-", ms=2, lw=0.8, color="grey", label="p99 (RTT/2)")
        for b in extra["fragment_boundaries_bytes"]:
            for a in (ax, ax2):
                a.axvline(b + 0.5, color="red", lw=0.8, ls=":")
            ax.annotate(f"{fragments(b) + 1} frames from {b + 1} B", xy=(b + 0.5, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -12), textcoords="offset points", color="red", fontsize=7)
        ax.set_ylabel("one-way latency, median [us]")
        ax2.set_ylabel("p99 [us]")
        ax2.set_yscale("log")
        ax2.set_xlabel("message size [bytes] (red: IP fragment boundaries at MTU 1500)")
        ax.set_title(meta["figure_title"], fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
        ax2.legend(fontsize=8, loc="lower right")
        for a in (ax, ax2):
            a.grid(True, which="both", lw=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
