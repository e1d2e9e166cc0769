"""exp_breakdown.py: `./iccs experiment breakdown`, the study's Figure 7: the time line of one 100-byte
message through every stage of the path, from time stamps (stack/stamps.hpp) taken while a
ping-pong between thread 0 of two clusters sends one message at a time.

The cluster processes stamp when ICCS_STAMPS=PREFIX is set (compute/cluster.cpp, program
pingpong): the pinger writes the send side of each ping (PREFIX.c0), the ponger its receive side
(PREFIX.c1), one line per round. Both processes read CLOCK_MONOTONIC (one host: one clock), so a
ping's stamps from both files form one time line. Per stage the duration of every timed round
(warmup excluded) is taken, and the stage's figure is the median over all rounds of all runs; the
time line lays the stages end to end (start = the sum of the medians before it). The sum of the
stage medians is compared with the median end-to-end time (conv_send -> delivered) and with
RTT/2 of the same runs.
"""
import os
import tempfile

from framework import ExperimentError, check_range, last_size_of_frames, median, parse_rtt, quantile, run_cli

# (stage, from point, to point), in path order (stack/stamps.hpp names the points)
STAGES = [
    ("convergence", "conv_send", "ring_enq"),
    ("ring", "ring_enq", "slidwin_send"),
    ("slidwin_send", "slidwin_send", "udp_send"),
    ("udp_send", "udp_send", "ip_send"),
    ("ip_send", "ip_send", "fabric_tx"),
    ("fabric", "fabric_tx", "fabric_rx"),
    ("ip_receive", "fabric_rx", "udp_receive"),
    ("udp_receive", "udp_receive", "slidwin_receive"),
    ("slidwin_receive", "slidwin_receive", "ring_deliver"),
    ("ring", "ring_deliver", "conv_take"),
    ("delivery", "conv_take", "delivered"),
]
SEND_POINTS = ["conv_send", "ring_enq", "slidwin_send", "udp_send", "ip_send", "fabric_tx"]
WARMUP = 100


def read_stamps(path):
    with open(path) as f:
        head = f.readline().split()
        if head[:2] != ["#", "round"]:
            raise ExperimentError(f"{path}: not a stamps file (first line {' '.join(head)!r})")
        names = head[2:]
        rows = []
        for line in f:
            v = [int(x) for x in line.split()]
            rows.append(dict(zip(names, v[1:])))
    return rows


class Breakdown:
    name = "breakdown"
    figure = "Figure 7"
    title = "time line of one 100-byte message through every stage"
    columns = ["stage", "side", "from_point", "to_point", "start_us", "duration_us", "p10_us", "p90_us", "rounds"]

    def add_options(self, ap):
        ap.add_argument("--size", type=int, default=100, help="message size [bytes] (default 100, as the study)")
        ap.add_argument("--rounds", type=int, default=20000, help="messages per run, one at a time (default 20000)")
        ap.add_argument("--reps", type=int, default=3, help="runs (default 3)")

    def check(self, args):
        check_range(args, "size", 1, last_size_of_frames(1), "bytes (one frame)")
        check_range(args, "rounds", 100, 10_000_000)
        check_range(args, "reps", 1, 100)
        if args.quick:
            if "rounds" not in args.explicit:
                args.rounds = 2000
            if "reps" not in args.explicit:
                args.reps = 1

    def threads_wanted(self, polling):
        return 2 if polling == "inline" else 4

    def plan(self, args):
        return [{"id": f"run {i + 1}/{args.reps}: {args.rounds} messages of {args.size} B", "rep": i,
                 "cost": 0.5 + args.rounds * 12e-6} for i in range(args.reps)]

    def run_one(self, cfg, ctx):
        with tempfile.TemporaryDirectory(prefix="iccs-stamps-") as d:
            prefix = os.path.join(d, "stamps")
            args = ["run", "pingpong", "--clusters", "2", "--threads", "1", "--proxies", "1",
                    "--polling", ctx.polling, "--min-size", str(ctx.args.size), "--max-size", str(ctx.args.size),
                    "--messages", str(ctx.args.rounds), "--warmup", str(WARMUP), "--timeout", "300"]
            out, took, counters = run_cli(ctx.cli, args, env={"ICCS_STAMPS": prefix}, on_start=ctx.counters_for_run)
            rtt = parse_rtt(out)
            for c in (0, 1):
                if not os.path.exists(f"{prefix}.c{c}"):
                    raise ExperimentError(f"cluster {c} wrote no stamps file ({prefix}.c{c}): is this build's "
                                          f"pingpong stamping (stack/stamps.hpp)?\n{out[-1500:]}")
            send, recv = read_stamps(prefix + ".c0"), read_stamps(prefix + ".c1")
        if len(send) != len(recv):
            raise ExperimentError(f"the two clusters stamped {len(send)} and {len(recv)} rounds")
        rounds = []
        for s, r in list(zip(send, recv))[WARMUP:]:
            row = {p: (s[p] if p in SEND_POINTS else r[p]) for p in s}
            if any(row[p] == 0 for p in row):
                continue  # a point the round did not pass (never seen in steady state)
            rounds.append(row)
        return {"rep": cfg["rep"], "rounds": rounds, "rtt": rtt}, took, counters

    def summarize(self, raw, args):
        allr = [row for r in raw for row in r["rounds"]]
        if not allr:
            raise ExperimentError("no round was stamped at every point")
        rows = []
        t = 0.0
        negative = 0
        for i, (stage, a, b) in enumerate(STAGES):
            d = [(x[b] - x[a]) / 1000.0 for x in allr]
            negative += sum(1 for v in d if v < 0)
            med = median(d)
            rows.append({"stage": stage, "side": "send" if i < 5 else "fabric" if i == 5 else "receive",
                         "from_point": a, "to_point": b, "start_us": round(t, 3), "duration_us": round(med, 3),
                         "p10_us": round(quantile(d, 0.10), 3), "p90_us": round(quantile(d, 0.90), 3),
                         "rounds": len(d)})
            t += med
        e2e = median([(x["delivered"] - x["conv_send"]) / 1000.0 for x in allr])
        half_rtt = median([r["rtt"]["rtt_median_ns"] / 2000.0 for r in raw])
        extra = {"size_bytes": args.size, "rounds_used": len(allr), "sum_of_stage_medians_us": round(t, 3),
                 "end_to_end_median_us": round(e2e, 3), "rtt_half_median_us": round(half_rtt, 3),
                 "negative_durations": negative, "clock": "CLOCK_MONOTONIC (one host: shared by the processes)",
                 "study_network_share": "720 cycles = 36 us at 20 MHz for a 100-byte message (Alewife)"}
        notes = [f"{len(allr)} messages of {args.size} B stamped; sum of the stage medians {t:.2f} us, median "
                 f"end to end {e2e:.2f} us, RTT/2 {half_rtt:.2f} us"]
        return rows, extra, notes

    def plot(self, plt, rows, extra, meta, path):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        colors = {"send": "tab:blue", "fabric": "tab:grey", "receive": "tab:green"}
        n = len(rows)
        for i, r in enumerate(rows):
            y = n - 1 - i
            ax.barh(y, max(r["duration_us"], 0.0), left=r["start_us"], color=colors[r["side"]], height=0.6)
            ax.text(r["start_us"] + max(r["duration_us"], 0) + 0.02, y, f"{r['duration_us']:.2f} us", va="center",
                    fontsize=7)
        ax.set_yticks(range(n))
        ax.set_yticklabels([r["stage"] for r in reversed(rows)], fontsize=8)
        ax.set_xlabel("time since the application's send [us] (stage medians laid end to end)")
        ax.set_title(meta["figure_title"], fontsize=9)
        ax.grid(True, axis="x", lw=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
