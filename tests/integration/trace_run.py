#!/usr/bin/env python3
"""trace_run.py: `iccs run APP --trace FILE` loses no message (issue 22).

Runs water across 2 clusters of 2 compute threads with 2 proxies each over iccs, --trace and
--json, and checks: one header, every line well formed (tx: the proxy's own cluster is the
source, the destination another cluster; rx: the other way round; the thread index within the
cluster's compute threads and its service endpoint), and per proxy the tx lines equal its msgs_tx
counter and the rx lines its msgs_rx counter, nothing dropped, the JSON's trace summary the same;
across the clusters, every message delivered was sent once and every message sent was delivered,
but connects refused by the peer's proxy (no listener yet; the refusal is checked) and closes sent
at the end to a peer that had already finished (match_across).
Then --trace with --transport direct is refused (exit 2, naming --trace).
Usage: trace_run.py ICCS_CLI
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

COLS = "dir,cluster,proxy,t_ns,enq_ns,src_cluster,dst_cluster,thread,src_port,dst_port,type,bytes,msg_id".split(",")


KCONNECT, KREFUSE, KCLOSE = "2", "4", "5"  # ConvType (stack/conv_hdr.hpp)


def match_across(lines):
    """Each message's tx record (at its sender's proxy) against its rx record (at the receiver's):
    every message delivered was sent, exactly once, and every message sent was delivered, but for
    two kinds the proxies handle themselves. A connect that finds no listener yet (the runtime
    connects before its peer listens, and retries) is answered by the receiving proxy with a
    refusal, which no compute thread sent: each undelivered connect has its refusal, back to its
    port. And closes (kClose) sent at the end reach a peer whose compute threads had already
    ended. msgs_tx counts messages taken from the threads, delivered or not, msgs_rx those handed
    to one: the difference between one cluster's msgs_tx and the other's msgs_rx is these."""
    rows = [dict(zip(COLS, line.split(","))) for line in lines[1:] if not line.startswith("#")]
    key = lambda r: (r["src_cluster"], r["dst_cluster"], r["src_port"], r["dst_port"], r["type"], r["msg_id"])  # noqa: E731
    tx = collections.Counter(key(r) for r in rows if r["dir"] == "tx")
    rx = collections.Counter(key(r) for r in rows if r["dir"] == "rx")
    bad = [f"delivered {n} times, sent {tx[k]}: {k}" for k, n in rx.items() if n > tx[k] and k[4] != KREFUSE]
    lost = [k for k, n in tx.items() for _ in range(n - rx[k]) if n > rx[k]]
    # a refusal goes from the listener's cluster and port back to the connecting one
    refused = collections.Counter((k[1], k[0], k[3], k[2]) for k, n in rx.items() for _ in range(n) if k[4] == KREFUSE)
    connects = collections.Counter(k[:4] for k in lost if k[4] == KCONNECT)
    if connects != refused:
        bad.append(f"undelivered connects {dict(connects)} against the refusals sent back {dict(refused)}")
    bad += [f"sent but never delivered: (src, dst, src_port, dst_port, type, msg_id) = {k}" for k in lost
            if k[4] not in (KCLOSE, KCONNECT)]
    closes = sum(1 for k in lost if k[4] == KCLOSE)
    print(f"across the clusters: {sum(rx.values())} messages delivered, each sent once, or a refusal of a connect; "
          f"{sum(tx.values())} sent, all delivered but {sum(connects.values())} connects refused (no listener yet) "
          f"and {closes} closes (kClose) to a peer that had finished")
    return bad[:20]


def main():
    cli = sys.argv[1]
    fails = []
    with tempfile.TemporaryDirectory(prefix="iccs-trace-") as d:
        path = os.path.join(d, "water.trace")
        p = subprocess.run([cli, "run", "water", "--clusters", "2", "--cluster-size", "2", "--proxies", "2",
                            "--transport", "iccs", "--trace", path, "--json"], capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            print(f"FAIL: the run exited {p.returncode}:\n{p.stderr[-3000:]}")
            return 1
        j = json.loads(p.stdout.strip().splitlines()[-1])
        with open(path) as f:
            lines = f.read().splitlines()
        if lines[0] != ",".join(COLS):
            fails.append(f"header: {lines[0]!r}")
        counts, dropped = {}, None
        for n, line in enumerate(lines[1:], 2):
            if line.startswith("# dropped,"):
                dropped = int(line.split(",")[1])
                continue
            f = line.split(",")
            if len(f) != len(COLS) or f[0] not in ("tx", "rx"):
                fails.append(f"line {n}: {line!r}")
                continue
            r = dict(zip(COLS, f))
            c, src, dst, thr = int(r["cluster"]), int(r["src_cluster"]), int(r["dst_cluster"]), int(r["thread"])
            mine, other = (src, dst) if r["dir"] == "tx" else (dst, src)
            if mine != c or other == c or not 0 <= other < 2 or not 0 <= thr <= 2 or int(r["bytes"]) < 40:
                fails.append(f"line {n}: fields do not fit a {r['dir']} record of cluster {c}: {line!r}")
            key = (c, int(r["proxy"]), r["dir"])
            counts[key] = counts.get(key, 0) + 1
        if dropped != 0:
            fails.append(f"dropped: {dropped} (expected 0)")
        fails += match_across(lines)
        tx_all = rx_all = 0
        for px in j["iccs"]["proxies"]:
            c, i = px["cluster"], px["proxy"]
            for d_, k in (("tx", "msgs_tx"), ("rx", "msgs_rx")):
                got = counts.get((c, i, d_), 0)
                ok = got == px[k]
                print(f"{'ok  ' if ok else 'FAIL'} proxy {c}.{i}: {got} {d_} records, counter {k} {px[k]:.0f}")
                if not ok:
                    fails.append(f"proxy {c}.{i} {d_}")
            tx_all += px["msgs_tx"]
            rx_all += px["msgs_rx"]
        t = j.get("trace") or {}
        if (t.get("tx"), t.get("rx"), t.get("dropped")) != (tx_all, rx_all, 0):
            fails.append(f"JSON trace summary {t} against counters tx {tx_all} rx {rx_all}")
        if tx_all < 100:
            fails.append(f"only {tx_all} messages: water should send hundreds")
        left = [x for x in os.listdir(d) if ".part" in x]
        if left:
            fails.append(f"parts left behind: {left}")
    p = subprocess.run([cli, "run", "water", "--clusters", "2", "--transport", "direct", "--trace", "/tmp/x.trace"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 2 or "--trace" not in p.stderr:
        fails.append(f"--trace over direct: exit {p.returncode}, stderr {p.stderr[-300:]!r} (expected 2 naming --trace)")
    print("PASS" if not fails else f"FAIL: {fails}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
