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
