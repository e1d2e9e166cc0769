#!/usr/bin/env python3
"""wan_accuracy.py: ping-pong across an emulated WAN link (issue 10's accuracy test).

Two clusters, one compute thread and one proxy each, each its own site; `iccs run pingpong` gives
the round trips of one message in flight (adaptive polling).

--bounds (test wan-accuracy, the default suite): one-sided bounds that hold whatever the host's
load: no round trip (the minimum of a few) is shorter than 2 x (latency + size / bandwidth), for
1 B and 1 MiB at latency 10, 30 ms x bandwidth 1, 10 MB/s. An emulator that delivered early, or
ignored the latency or the bandwidth, fails it.

Without --bounds (suite long: wan-accuracy-tolerance on the grid below, wan-accuracy-full on the
issue's), two-sided: for every (latency, bandwidth)

  one-way latency  = (RTT_wan(1 B) - RTT_lan_idle(1 B)) / 2      (the LAN path's own cost removed;
                                                                  minus 1 B / bandwidth, ~0)
  bandwidth        = S / ((RTT_wan(S) - RTT_wan(1 B)) / 2)        the large message (1 MiB): the time
                                                                  the link needs for S more bytes

each within 5% of the configured value. The 64 KiB figure is printed (and in the JSON) but not
checked: at 10 MB/s its 6.5 ms of serialization are of the order of the LAN path's own
size-dependent cost on a loaded 2-core host (copying and striping 45 pieces each way), which the
1 B reference does not remove. The LAN path's own cost is measured in the same run, just
before each latency's settings, for a message that finds the other cluster idle as a message
across the WAN does: RTT_lan_idle is the LAN ping-pong (no emulation) with the pinger pausing
2 x latency before each round (`--gap-us`). Without the pause the LAN round trip is shorter: on
this 2-core VM a cluster idle for a millisecond wakes some 50-100 us slower per one-way (futex
wake-ups of an idle vCPU) than one still busy from the last round; that is the LAN path's cost,
not the emulator's, and the plain LAN RTT is printed beside it. Inline polling (--polling inline)
has no sleeps at all but spins two threads, which a loaded shared host punishes more.
The host is shared: a setting whose figures fall outside the tolerance is measured again, up to 3
times in all; every attempt is printed. A run that fails (exit status, no round trips) fails the
test at once, its output printed: it is not measured again.
Default grid (CI): latency 10, 30 ms x bandwidth 1, 10 MB/s x sizes 1 B, 64 KiB, 1 MiB; --full is
the issue's grid, 1, 10, 100 ms x 0.1, 1, 10 MB/s (meson suite 'long'). 1 ms is not in the CI
subset: the LAN path's own round trip wanders by 0.1-0.3 ms on a shared 2-core host, which is
+-15% of a 1 ms latency (seen: +12%, -9%, +38% in three attempts while 10 ms read +1.2%). Prints a table of configured vs measured; --json too.
Usage: wan_accuracy.py ICCS_CLI [--bounds | --full] [--json FILE] [--tolerance 0.05]
"""
import argparse
import json
import re
import subprocess
import sys
import time

KIB, MIB = 1024, 1 << 20
POLLING = "adaptive"


def rtt(cli, size, samples, warmup, extra):
    return rtt_stats(cli, size, samples, warmup, extra)["median"]


def rtt_stats(cli, size, samples, warmup, extra):
    """{median, p99, min, max, n} of the round trips [s]. A run that fails fails the test at once
    (no retry: a crash is a finding, not noise), its output on stdout."""
    cmd = [cli, "run", "pingpong", "--clusters", "2", "--threads", "1", "--proxies", "1", "--polling", POLLING,
           "--min-size", str(size), "--max-size", str(max(size, 1)), "--messages", str(samples),
           "--warmup", str(warmup), "--timeout", "240"] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = re.search(r"^rtt_ns (\d+) (\d+) (\d+) (\d+) (\d+)$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        print(p.stdout[-3000:])
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode} without its round trips")
    med, p99, lo, hi, n = (int(x) for x in m.groups())
    return {"median": med / 1e9, "p99": p99 / 1e9, "min": lo / 1e9, "max": hi / 1e9, "n": n}


def samples_for(size, bw, lat_s):
    rtt_est = 2 * (lat_s + (size / bw if bw else 0))
    if rtt_est > 1.0:
        return 3, 1
    if rtt_est > 0.1:
        return 7, 1
    return 61, 5


def measure(a, lat, bw, extra, lan, sizes, attempt):
    """One (latency, bandwidth) setting: (row, errors beyond the tolerance)."""
    r = {}
    for s in sizes:
        n, w = samples_for(s, bw, lat / 1e3)
        r[s] = rtt(a.cli, s, n, w, extra)
    errs = []
    lat_meas = (r[1] - lan) / 2 - 1 / bw
    row = {"latency_ms": lat, "bandwidth_bytes_per_s": bw, "attempt": attempt, "rtt_s": {str(s): r[s] for s in sizes},
           "latency_measured_ms": lat_meas * 1e3, "latency_error": lat_meas * 1e3 / lat - 1}
    if abs(row["latency_error"]) > a.tolerance:
        errs.append(f"latency {lat} ms, bw {bw:g}: measured {lat_meas * 1e3:.4f} ms "
                    f"({row['latency_error'] * 100:+.2f}%)")
    print(f"latency {lat:>4} ms, bandwidth {bw / 1e6:>4g} MB/s (attempt {attempt}): one-way latency measured "
          f"{lat_meas * 1e3:8.4f} ms ({row['latency_error'] * 100:+6.2f}%)", flush=True)
    for s in sizes[1:]:
        t_ser = (r[s] - r[1]) / 2
        bw_meas = (s - 1) / t_ser if t_ser > 0 else float("inf")
        err = bw_meas / bw - 1
        row[f"bandwidth_measured_{s}"] = bw_meas
        row[f"bandwidth_error_{s}"] = err
        if s == sizes[-1] and abs(err) > a.tolerance:
            errs.append(f"latency {lat} ms, bw {bw:g}, size {s}: measured {bw_meas:.0f} B/s ({err * 100:+.2f}%)")
        print(f"    size {s:>8} B: RTT {r[s] * 1e3:10.3f} ms, bandwidth measured {bw_meas / 1e6:8.4f} MB/s "
              f"({err * 100:+6.2f}%)", flush=True)
    return row, errs


def bounds(a, lats, bws):
    """--bounds (the default suite): what the emulator guarantees whatever the host's load, as
    one-sided bounds on every round trip (the minimum of the samples): a message is held at least
    the link's latency and its serialization, so RTT(1 B) >= 2 x latency and RTT(S) >= 2 x
    (latency + S / bandwidth). Accuracy within a tolerance, two-sided, is the other modes' (suite
    long): a loaded shared host stretches round trips by more than 5%."""
    bad = []
    for lat in lats:
        for bw in bws:
            extra = ["--wan-latency-ms", str(lat), "--wan-bandwidth", str(int(bw))]
            for size in (1, MIB):
                n, w = samples_for(size, bw, lat / 1e3)
                st = rtt_stats(a.cli, size, min(n, 7), min(w, 1), extra)
                floor = 2 * (lat / 1e3 + (size / bw if size > 1 else 0))
                ok = st["min"] >= floor
                print(f"latency {lat:>4} ms, bandwidth {bw / 1e6:>4g} MB/s, size {size:>8} B: RTT min "
                      f"{st['min'] * 1e3:10.3f} ms, median {st['median'] * 1e3:10.3f} ms over {st['n']}; "
                      f"at least {floor * 1e3:.3f} ms: {'ok' if ok else 'BELOW'}", flush=True)
                if not ok:
                    bad.append(f"latency {lat} ms, bw {bw:g}, {size} B: a round trip of {st['min'] * 1e3:.3f} ms, "
                               f"below 2 x (latency + size / bandwidth) = {floor * 1e3:.3f} ms")
    if bad:
        print("FAIL:\n  " + "\n  ".join(bad))
        return 1
    print("PASS: no round trip beat the emulated link (latency and serialization), every setting")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--bounds", action="store_true", help="one-sided bounds only (the default suite)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--polling", default="adaptive", choices=["inline", "adaptive"])
    a = ap.parse_args()
    global POLLING
    POLLING = a.polling
    lats = [1, 10, 100] if a.full else [10, 30]
    bws = [1e5, 1e6, 1e7] if a.full else [1e6, 1e7]
    if a.bounds:
        return bounds(a, lats, bws)
    sizes = [1, 64 * KIB, MIB]
    t0 = time.monotonic()
    lan_busy = rtt(a.cli, 1, 31, 5, [])
    print(f"LAN path (no emulation), 1 B, median RTT {lan_busy * 1e3:.3f} ms", flush=True)
    rows, bad, lan = [], [], {}
    for lat in lats:
        for bw in bws:
            extra = ["--wan-latency-ms", str(lat), "--wan-bandwidth", str(int(bw))]
            for attempt in range(1, 4):
                # the baseline again right before each attempt: the host's load drifts
                lan[lat] = rtt(a.cli, 1, 61, 5, ["--gap-us", str(2 * lat * 1000)])
                print(f"LAN path (no emulation), 1 B, pinger pausing {2 * lat} ms a round: median RTT "
                      f"{lan[lat] * 1e3:.3f} ms", flush=True)
                row, errs = measure(a, lat, bw, extra, lan[lat], sizes, attempt)
                if not errs:
                    break
            row["lan_idle_rtt_s"] = lan[lat]
            rows.append(row)
            bad += errs
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"lan_rtt_s": lan_busy, "lan_idle_rtt_s": {str(k): v for k, v in lan.items()}, "rows": rows, "tolerance": a.tolerance}, f,
                      indent=1)
    print(f"{len(rows)} link settings in {time.monotonic() - t0:.0f} s")
    if bad:
        print("FAIL: beyond " + f"{a.tolerance * 100:g}%:\n  " + "\n  ".join(bad))
        return 1
    print(f"PASS: every measured latency and bandwidth within {a.tolerance * 100:g}% of the configured value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
