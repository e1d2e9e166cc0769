#!/usr/bin/env python3
"""Integration test: start real cluster processes with `iccs-cli run PROGRAM ARGS...` and check
that every cluster reports PASS (alltoall: every message exactly once, intact, and in order on
ordered connections), that the counters show the traffic crossed the proxies, and that nothing is
left behind: no iccs process of this run, no EAL runtime directory, no memif socket directory.

Usage: run_clusters.py ICCS_CLI [CHECKS] [ARGS for `run PROGRAM`...]
CHECKS (read from the convergence counters each compute thread prints, "to proxies [a b ...]",
and the proxies' own "msgs tx" counters):
  --program NAME          alltoall (default) or errors
  --expect-fixed          every compute thread t used exactly one proxy, t mod P, and each
                          proxy's msgs tx equals what its threads handed it
  --expect-all-proxies    every compute thread used every proxy of its cluster
  --expect-less-on P      proxy P of every cluster got under 45% of the messages (it is slowed on
                          purpose; least-loaded dispatch must avoid it; round-robin gives it 50%)
  --with-key [encrypt]    issue 17: a fresh random key file (mode 0600) as [security] key_file
                          (and encrypt = true): every cluster must say its datagrams are
                          authenticated (and encrypted); delivery is checked as for every run
  --expect-combined       message combining (issue 21): every proxy sent and received bundles (the
                          report's "combining C.P:" line), none malformed
  --expect-not-combined   combining off ([cluster] combine_max_bytes = 0): no proxy sent a bundle
  --inject-error          (passed on) one message corrupted on purpose: the run must exit 1 with
                          cluster 1 FAILing on corrupt messages (the negative control)
  --expect-wan-dropped    WAN loss (issue 10): every emulated link with loss > 0 in the run's
                          report ("wan C.P: link A->B ... dropped N (loss P)") dropped frames, and
                          there is at least one such link (delivery is checked as for every run)
"""
import atexit
import glob
import os
import re
import tempfile
import subprocess
import sys
import time

from proxy_report import check_knobs, proxy_lines


def children(pid):
    """The pids whose parent is pid."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                kids.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return kids


def leftovers(run_id):
    found = []
    found += glob.glob(f"/var/run/dpdk/iccs-{run_id}-*")
    found += glob.glob(f"/tmp/iccs-{run_id}")
    # fabric af_packet: the run's bridge and veth pairs
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [l.split(":")[1].strip() for l in links.splitlines()
              if re.match(rf"^\d+: i[cb](br)?{run_id}(c\d+p\d+)?[@:]", l)]
    return found


def thread_lines(out):
    """(cluster, thread, [messages per proxy]) of every compute thread."""
    res = []
    for c, t, per in re.findall(r"^  thread (\d+)\.(\d+): .*to proxies \[([\d ]*)\]", out, re.M):
        res.append((int(c), int(t), [int(x) for x in per.split()]))
    return res


def proxy_tx(out):
    """{(cluster, proxy): msgs tx}"""
    return {(int(c), int(p)): int(tx) for c, p, tx in re.findall(r"^  proxy (\d+)\.(\d+): msgs tx (\d+)", out, re.M)}


def udp_port_args(args):
    """fabric udp binds fixed ports (udp_port + 64*cluster + proxy): a test picks its own range,
    so two test runs on one host (two worktrees, two CI jobs) do not take each other's ports."""
    if args[args.index("--fabric") + 1:][:1] != ["udp"] or any("udp_port" in a for a in args):
        return []
    return ["--set", f"machine.udp_port={20000 + (os.getpid() % 48) * 256}"]


def last_value(args, flag, default=None):
    """The value of the last `flag` in args (the CLI takes the last one), else `default`."""
    at = [i for i, a in enumerate(args) if a == flag and i + 1 < len(args)]
    return args[at[-1] + 1] if at else default


def set_value(args, key, default=None):
    """The value of the last `--set KEY=VALUE` in args, else `default`."""
    vals = [args[i + 1].split("=", 1)[1] for i, a in enumerate(args)
            if a == "--set" and i + 1 < len(args) and args[i + 1].startswith(key + "=")]
    return vals[-1] if vals else default


def asked_of(args):
    """What the test asked for, from its own arguments and environment (never from the run's output):
    the CLI's defaults where a flag is absent."""
    return {
        "clusters": int(last_value(args, "--clusters", "2")),
        "threads": int(last_value(args, "--threads", "2")),
        "proxies": int(last_value(args, "--proxies", "1")),
        "messages": int(last_value(args, "--messages", "1000")),
        "max_size": int(last_value(args, "--max-size", "9000")),
        "fabric": last_value(args, "--fabric", "memif"),
        "polling": last_value(args, "--polling", "adaptive"),
        "dispatch": last_value(args, "--dispatch", "round-robin"),
        "order": last_value(args, "--order", "ordered"),
        "mtu": int(last_value(args, "--mtu", "1500")),
        "drop": float(last_value(args, "--drop", "0")),
        "duplicate": float(last_value(args, "--duplicate", "0")),
        "stripe_set": set_value(args, "convergence.stripe_threshold_bytes") is not None,
        "keyed": set_value(args, "security.key_file") is not None,
        "uring_rx": os.environ.get("ICCS_URING_RX", ""),
        "gso_off": os.environ.get("ICCS_URING_GSO") == "0",
        "gro_off": os.environ.get("ICCS_URING_GRO") == "0",
    }


# Per frame: IPv4 20 + UDP 8 + slidwin 40 + convergence 40 bytes of headers (DESIGN.md §6).
FRAME_HEADERS = 108
# Under a key every datagram also carries the auth block after the slidwin header: counter 8 +
# GCM tag 16 (stack/slidwin_auth.hpp kSlidwinAuthLen); the default piece leaves room for it.
AUTH_BLOCK = 24

HEADER_RE = (r"^iccs run \S+: (\d+) clusters x (\d+) compute threads, (\d+) proxies per cluster.*?, fabric (\S+) .*?"
             r"polling (\S+), dispatch (\S+), (ordered|unordered) connections, stripe threshold (\d+) bytes, MTU (\d+)")


def check_header(asked, out, whole):
    """The run's first line and every cluster's start-up line name what was asked: shape, fabric,
    polling, dispatch, order, MTU and its stripe threshold; the io_uring receive mode and GSO/GRO
    as the environment asked."""
    bad = []
    m = re.search(HEADER_RE, out, re.M)
    if not m:
        return ["no run header line"]
    c, t, p, fab, pol, disp, order, thr, mtu = m.groups()
    said = {"clusters": int(c), "threads": int(t), "proxies": int(p), "fabric": fab, "polling": pol,
            "dispatch": disp, "order": order, "mtu": int(mtu)}
    for k, v in said.items():
        if v != asked[k]:
            bad.append(f"the run header says {k} {v}, the test asked for {asked[k]}")
    headers = FRAME_HEADERS + (AUTH_BLOCK if asked["keyed"] else 0)
    if not asked["stripe_set"] and int(thr) != asked["mtu"] - headers:
        bad.append(f"stripe threshold {thr} bytes at MTU {asked['mtu']}: want MTU - {headers} bytes of headers"
                   + (" (with the auth block)" if asked["keyed"] else ""))
    starts = re.findall(r"^cluster (\d+): (\d+) proxies, (\d+) compute threads, fabric (\S+) \((.*?)\), polling (\w+)",
                        out, re.M)
    if sorted(int(s[0]) for s in starts) != list(range(asked["clusters"])):
        bad.append(f"start-up lines of clusters {sorted(int(s[0]) for s in starts)}, "
                   f"want one from each of {asked['clusters']}")
    for cl, np_, nt, fab, io, pol in starts:
        if (int(np_), int(nt), fab, pol) != (asked["proxies"], asked["threads"], asked["fabric"], asked["polling"]):
            bad.append(f"cluster {cl} started {np_} proxies, {nt} threads, fabric {fab}, polling {pol}: not what was asked")
        if asked["fabric"] != "udp":
            continue
        if asked["uring_rx"] == "batched" and ("batched recvmsg (" not in io or "multishot" in io):
            bad.append(f"cluster {cl}: ICCS_URING_RX=batched but its receive is: {io}")
        if asked["gso_off"] and "UDP GSO" in io:
            bad.append(f"cluster {cl}: ICCS_URING_GSO=0 but it says UDP GSO: {io}")
        if asked["gro_off"] and "UDP GRO" in io:
            bad.append(f"cluster {cl}: ICCS_URING_GRO=0 but it says UDP GRO: {io}")
    # adaptive polling reports who ran each proxy's iterations; inline has no proxy thread to report
    polled = re.findall(r"^  polling (\d+\.\d+): adaptive", out, re.M)
    nprox = asked["clusters"] * asked["proxies"]
    if whole and asked["polling"] == "adaptive" and len(polled) != nprox:
        bad.append(f"adaptive polling: {len(polled)} proxies report their polling, want {nprox}")
    if asked["polling"] != "adaptive" and polled:
        bad.append(f"polling {asked['polling']} asked, but proxies {polled} report adaptive polling")
    return bad


def check_figures(asked, out):
    """alltoall: the printed totals against what was asked. Every compute thread sends --messages
    to every compute thread of every other cluster: each thread sends and receives (C-1) x T x M,
    each cluster T times that; none missing, duplicated or corrupt; the clusters' received totals
    add up to their sent totals; and the proxies carried at least that many messages each way."""
    bad = []
    C, T, M = asked["clusters"], asked["threads"], asked["messages"]
    per_thread = (C - 1) * T * M
    per_cluster = T * per_thread
    lines = re.findall(r"^cluster (\d+): (PASS|FAIL)  sent (\d+), received (\d+), missing (\d+), duplicated (\d+), "
                       r"corrupt (\d+)", out, re.M)
    if sorted(int(x[0]) for x in lines) != list(range(C)):
        bad.append(f"result lines of clusters {sorted(int(x[0]) for x in lines)}, want one from each of {C}")
    sent_all = recv_all = 0
    for cl, _, sent, recv, miss, dup, corrupt in lines:
        sent, recv = int(sent), int(recv)
        sent_all += sent
        recv_all += recv
        if sent != per_cluster or recv != per_cluster:
            bad.append(f"cluster {cl}: sent {sent}, received {recv}; asked: {T} threads x {C - 1} other clusters x "
                       f"{T} threads x {M} messages = {per_cluster} each way")
        if (miss, dup, corrupt) != ("0", "0", "0"):
            bad.append(f"cluster {cl}: missing {miss}, duplicated {dup}, corrupt {corrupt} (want 0, 0, 0)")
    if sent_all != recv_all:
        bad.append(f"the clusters received {recv_all} messages in all but sent {sent_all}")
    threads = re.findall(r"^  thread (\d+)\.(\d+): msgs sent (\d+) received (\d+), pieces sent (\d+)", out, re.M)
    if len(threads) != C * T:
        bad.append(f"{len(threads)} compute threads reported, want {C * T}")
    thr = asked["mtu"] - FRAME_HEADERS
    most_pieces = -(-asked["max_size"] // thr) if asked["max_size"] > 0 else 1  # ceil
    for cl, t, sent, recv, pieces in threads:
        sent, recv, pieces = int(sent), int(recv), int(pieces)
        if sent != per_thread or recv != per_thread:
            bad.append(f"thread {cl}.{t}: sent {sent}, received {recv}; asked: {per_thread} each way")
        # every message is at least one piece and at most ceil(max size / stripe threshold): a
        # stripe threshold that ignored the MTU cuts more
        if not asked["stripe_set"] and not sent <= pieces <= sent * most_pieces:
            bad.append(f"thread {cl}.{t}: {pieces} pieces for {sent} messages of at most {asked['max_size']} bytes: "
                       f"want between 1 and {most_pieces} (stripe threshold {thr} at MTU {asked['mtu']}) each")
    prox = proxy_lines(out)
    for cl in range(C):
        mine = [v for (c, _), v in prox.items() if c == cl]
        tx, rx = sum(v["msgs_tx"] for v in mine), sum(v["msgs_rx"] for v in mine)
        if tx < per_cluster or rx < per_cluster:
            bad.append(f"cluster {cl}: its proxies sent {tx} and delivered {rx} messages, fewer than the "
                       f"{per_cluster} each way the threads exchanged")
    return bad


def main():
    cli, rest = sys.argv[1], sys.argv[2:]
    program, checks, args = "alltoall", {}, []
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--program":
            program = rest[i + 1]
            i += 2
        elif a in ("--expect-fixed", "--expect-all-proxies", "--expect-wan-dropped", "--expect-combined",
                   "--expect-not-combined"):
            checks[a] = True
            i += 1
        elif a == "--expect-less-on":
            checks[a] = int(rest[i + 1])
            i += 2
        elif a == "--with-key":
            encrypt = i + 1 < len(rest) and rest[i + 1] == "encrypt"
            checks[a] = "authenticated and encrypted" if encrypt else "authenticated (AES"
            fd, key_path = tempfile.mkstemp(prefix="iccs-key-")
            os.write(fd, os.urandom(32))
            os.close(fd)  # mkstemp: mode 0600
            atexit.register(os.unlink, key_path)
            args += ["--set", f"security.key_file={key_path}"] + (["--set", "security.encrypt=true"] if encrypt else [])
            i += 2 if encrypt else 1
        else:
            args.append(a)
            i += 1
    if "--fabric" in args:
        args = args + udp_port_args(args)
    cmd = [cli, "run", program] + args
    print("$", " ".join(cmd), flush=True)
    start = time.time()
    # A tag in the environment that every cluster process inherits: what is still running after
    # the run is found by it, not by its command line (another run may be going on).
    tag = f"{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, ICCS_TEST_TAG=tag)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    run_id = str(proc.pid)
    out, _ = proc.communicate(timeout=900)
    print(out)
    print(f"(took {time.time() - start:.1f} s)")
    failures = []
    if proc.returncode != 0:
        failures.append(f"exit status {proc.returncode}")
    m = re.search(r"(\d+) clusters x (\d+) compute threads", out)
    clusters = int(m.group(1)) if m else 0
    passes = re.findall(r"^cluster (\d+): PASS", out, re.M)
    if program == "errors":  # cluster 1 kills itself on purpose; cluster 0 checks and reports
        for n in (1, 2, 3):
            if f"check {n} ok" not in out:
                failures.append(f"errors: check {n} did not pass")
        if passes != ["0"]:
            failures.append(f"errors: cluster 0 did not pass ({passes})")
    elif clusters == 0 or len(passes) != clusters:
        failures.append(f"{len(passes)} of {clusters} clusters passed")
    asked = asked_of(args)
    failures += check_header(asked, out, whole=program == "alltoall")
    if "--inject-error" in args:
        # the negative control: one message corrupted on purpose; only the failure is checked
        lines = re.findall(r"^cluster (\d+): (PASS|FAIL)  sent \d+, received \d+, missing \d+, duplicated \d+, corrupt (\d+)",
                           out, re.M)
        failures = [f for f in failures if not f.startswith(("exit status", f"{len(passes)} of"))]
        # on an ordered connection every message after the corrupt one is out of order: corrupt too
        if proc.returncode != 1 or not any(c == "1" and r == "FAIL" and int(n) >= 1 for c, r, n in lines) or \
                ("0", "PASS", "0") not in lines:
            failures.append(f"--inject-error: exit {proc.returncode} (1 expected), result lines {lines}: cluster 1 "
                            "must FAIL counting the corrupt message, cluster 0 PASS")
    elif program == "alltoall":  # errors: cluster 1 dies on purpose, only cluster 0 reports
        failures += check_figures(asked, out) + check_knobs(asked, out)
    # every proxy moved messages both ways
    for line in re.findall(r"^  proxy .*$", out, re.M):
        tx = int(re.search(r"msgs tx (\d+)", line).group(1))
        rx = int(re.search(r"rx (\d+)", line).group(1))
        if tx == 0 and rx == 0:
            failures.append(f"idle proxy: {line.strip()}")
    threads, ptx = thread_lines(out), proxy_tx(out)
    if checks and not threads:
        failures.append("no compute thread counters printed")
    if "--expect-fixed" in checks:
        handed = {}
        for c, t, per in threads:
            used = [p for p, n in enumerate(per) if n > 0]
            if used != [t % len(per)]:
                failures.append(f"fixed dispatch: thread {c}.{t} used proxies {used}, expected only {t % len(per)}")
            for p, n in enumerate(per):
                handed[(c, p)] = handed.get((c, p), 0) + n
        for key, n in handed.items():
            if ptx.get(key) != n:
                failures.append(f"fixed dispatch: proxy {key[0]}.{key[1]} sent {ptx.get(key)} messages, its threads handed it {n}")
        print(f"fixed dispatch: {[(c, t, per) for c, t, per in threads]}")
    if "--with-key" in checks:
        said = re.findall(r"^cluster \d+: .*datagrams (authenticated.*)$", out, re.M)
        if clusters == 0 or len(said) != clusters or not all(checks["--with-key"] in s for s in said):
            failures.append(f"--with-key: not every cluster said its datagrams are {checks['--with-key']}: {said}")
    if "--expect-all-proxies" in checks:
        for c, t, per in threads:
            if len(per) < 2 or min(per) == 0:
                failures.append(f"thread {c}.{t} did not use every proxy: {per}")
        print(f"proxies used: {[(c, t, per) for c, t, per in threads]}")
    if "--expect-less-on" in checks:
        slow = checks["--expect-less-on"]
        for c, t, per in threads:
            share = per[slow] / max(1, sum(per))
            print(f"thread {c}.{t}: {per}, slowed proxy {slow} got {share:.0%}")
            if share >= 0.45:
                failures.append(f"thread {c}.{t}: slowed proxy {slow} got {share:.0%} of the messages (want < 45%)")
    if "--expect-combined" in checks or "--expect-not-combined" in checks:
        comb = re.findall(r"^  combining (\d+\.\d+): sent (\d+) messages in (\d+) bundles \(([\d.]+) per datagram\), "
                          r"received (\d+) messages in (\d+) bundles, bad bundles (\d+)", out, re.M)
        for proxy, sent, bundles, per, got, got_bundles, bad in comb:
            print(f"combining proxy {proxy}: sent {sent} messages in {bundles} bundles ({per} per datagram), "
                  f"received {got} in {got_bundles}, bad {bad}")
            if int(bad) != 0:
                failures.append(f"proxy {proxy}: {bad} bad bundles")
        if "--expect-combined" in checks:
            if not comb or not all(int(c[1]) > 0 and int(c[4]) > 0 for c in comb):
                failures.append("message combining is on but some proxy sent or received no bundle")
        elif comb:
            failures.append("message combining is off but bundles went out")
    if "--expect-wan-dropped" in checks:
        links = re.findall(r"^  wan (\d+\.\d+): link (\d+->\d+) msgs (\d+) bytes \d+ dropped (\d+) \(loss ([\d.e+-]+)\)",
                           out, re.M)
        lossy = [l for l in links if float(l[4]) > 0]
        if not lossy:
            failures.append("no WAN link with loss in the report")
        for proxy, link, msgs, dropped, loss in lossy:
            print(f"wan proxy {proxy} link {link}: {msgs} messages, {dropped} frames dropped (loss {loss})")
            if int(dropped) == 0:
                failures.append(f"wan proxy {proxy} link {link}: loss {loss} but nothing dropped")
    time.sleep(0.2)
    left = leftovers(run_id)
    if left:
        failures.append(f"left behind: {left}")
    ps = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{d}/environ", "rb") as f:
                if f"ICCS_TEST_TAG={tag}".encode() in f.read().split(b"\0"):
                    ps.append(d.split("/")[-1])
        except OSError:
            pass
    if ps:
        failures.append(f"iccs processes still running: {ps}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
