#!/usr/bin/env python3
"""Integration tests of the cluster runtime (compute/runtime.hpp) over real cluster processes.

Usage: runtime_run.py ICCS_CLI RT_PING_EXE CASE [ARGS...]
CASE:
  exchange ARGS...   `iccs run exchange ARGS` (e.g. --transport direct): every cluster says
                     "exchange ok", the run says PASS, exit 0, nothing left behind; and the printed
                     figures against what was asked (check_exchange_figures)
  inject-error ARGS...  `iccs run exchange --inject-error ARGS`: one message corrupted on purpose;
                     cluster 1 counts it corrupt and the run FAILs with exit 1
  delay-hold         `iccs run ping --transport delay --delay-us 5000`: every round trip (two
                     messages) takes at least 2 x 5 ms (strict), the median at most 2 x 5 ms + 100 ms
  delay-auto         `iccs run exchange --transport delay --delay-us auto`: says which D it used and
                     how it was obtained (mean size from a first run over direct, ping over iccs)
  path TRANSPORT     `iccs run RT_PING_EXE --transport T -- --rounds 50` with bytes on stdin: every
                     cluster got the same bytes and passed; a failing PATH program fails the run; a
                     launcher killed with SIGKILL leaves no copy of standard input behind
  peer-down TRANSPORT  cluster 1 of the example kills itself after the first barrier: cluster 0's
                     requests end with "peer down", it reports FAIL, and the run exits non-zero soon
                     (ICCS_KEEP_SURVIVORS=1: the launcher leaves cluster 0 to find out by itself)
  mpi-by-hand        2 processes of RT_PING_EXE started with OMPI_COMM_WORLD_RANK/SIZE (no launcher)
                     over a machine file with fabric udp on 127.0.0.1, transport iccs
  restart            as mpi-by-hand, then rank 1 is killed (SIGKILL) and started again with the same
                     machine file: cluster 0 reports "cluster 1 restarted" (a new run token that
                     answered the challenge), takes it as down, and never merges the new incarnation
  flag-errors        --transport on a convergence-level program, bad --transport / --delay-us values
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from proxy_report import check_knobs


def fail(msg, out=""):
    print(out)
    print("FAIL:", msg)
    sys.exit(1)


def leftovers(run_id):
    return (glob.glob(f"/dev/shm/iccs-{run_id}-rt") + glob.glob(f"/var/run/dpdk/iccs-{run_id}-*") +
            glob.glob(f"/tmp/iccs-{run_id}") + glob.glob(f"/tmp/iccs-{run_id}-stdin"))


def run(cmd, stdin=None, timeout=280, env=None):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out, _ = p.communicate(stdin, timeout=timeout)
    print(" ".join(cmd), "->", p.returncode)
    return p.returncode, out, p.pid


def udp_port():
    return 30000 + (os.getpid() % 64) * 256


def clusters_of(args):
    return int(args[args.index("--clusters") + 1]) if "--clusters" in args else 2


def flag(args, name, default):
    at = [i for i, a in enumerate(args) if a == name and i + 1 < len(args)]
    return args[at[-1] + 1] if at else default


REQUESTS_PER_THREAD = 20  # the exchange program's requests per compute thread (`iccs run --help`)


def check_exchange_figures(args, out):
    """exchange: every cluster's printed totals against what the test asked (not against the
    program's own expectation): each compute thread sends --messages to every compute thread of
    every other cluster, so a cluster sends and receives T x (C-1) x T x M, none corrupt or out of
    order; the clusters' received totals add up to their sent totals; every thread's requests were
    answered and every barrier round checked; and each compute endpoint's runtime counters show at
    least its data messages and their bytes (messages 0 and 1 are --min-size and --max-size long,
    the rest at least --min-size, each with an 8-byte number)."""
    bad = []
    C, T = clusters_of(args), int(flag(args, "--threads", "2"))
    M = int(flag(args, "--messages", "200"))
    lo, hi = int(flag(args, "--min-size", "1")), int(flag(args, "--max-size", "9000"))
    rounds = int(flag(args, "--barriers", "10"))
    per_cluster = T * (C - 1) * T * M
    lines = re.findall(r"^cluster (\d+): exchange (\w+): sent (\d+), received (\d+) of (\d+) \(corrupt (\d+), "
                       r"duplicated/out of order (\d+)\), requests answered (\d+), barrier \+ barrier_gather rounds "
                       r"checked (\d+)", out, re.M)
    if sorted(int(x[0]) for x in lines) != list(range(C)):
        return [f"exchange lines of clusters {sorted(int(x[0]) for x in lines)}, want one from each of {C}"]
    sent_all = recv_all = 0
    for c, word, sent, recv, of, corrupt, misordered, reqs, checked in lines:
        sent_all += int(sent)
        recv_all += int(recv)
        if (int(sent), int(recv), int(of)) != (per_cluster,) * 3:
            bad.append(f"cluster {c}: sent {sent}, received {recv} of {of}; asked: {T} threads x {C - 1} other "
                       f"clusters x {T} threads x {M} = {per_cluster} each way")
        if (corrupt, misordered) != ("0", "0"):
            bad.append(f"cluster {c}: corrupt {corrupt}, duplicated/out of order {misordered}")
        if int(reqs) != T * REQUESTS_PER_THREAD or int(checked) != rounds:
            bad.append(f"cluster {c}: {reqs} requests answered, {checked} barrier rounds; want "
                       f"{T * REQUESTS_PER_THREAD} and {rounds}")
    if sent_all != recv_all:
        bad.append(f"the clusters received {recv_all} messages in all but sent {sent_all}")
    data = (C - 1) * T * M  # data messages each compute endpoint sends and receives
    least = (C - 1) * T * (M * (8 + lo) + (hi - lo if M > 1 else 0))
    eps = re.findall(r"^  rt (\d+)\.(\d+): msgs sent (\d+) \((\d+) bytes\) received (\d+) \((\d+) bytes\)", out, re.M)
    if len(eps) != C * T:
        bad.append(f"{len(eps)} compute endpoints reported their counters, want {C * T}")
    for c, t, ns, bs, nr, br in eps:
        if int(ns) < data or int(nr) < data or int(bs) < least or int(br) < least:
            bad.append(f"endpoint {c}.{t}: sent {ns} ({bs} bytes), received {nr} ({br} bytes); its data alone is "
                       f"{data} messages of at least {least} bytes each way")
    m = re.search(r"runtime transport iccs \((\d+) proxies per cluster, fabric (\S+),", out)
    if flag(args, "--transport", "iccs") == "iccs":
        if not m:
            bad.append("no runtime header naming the proxies and fabric of transport iccs")
        else:  # the fault knobs' effect in the proxies' counters, as for the convergence programs
            bad += check_knobs({"clusters": C, "proxies": int(m.group(1)), "fabric": m.group(2), "mtu": 1500,
                                "drop": float(flag(args, "--drop", "0")),
                                "duplicate": float(flag(args, "--duplicate", "0"))}, out)
    print(f"figures: {C} clusters x {T} threads x {M} messages: {per_cluster} each way per cluster, "
          f"{sent_all} sent and {recv_all} received in all")
    return bad


def main():
    cli, exe, case, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if case == "exchange":
        extra = ["--set", f"machine.udp_port={udp_port()}"] if "udp" in rest else []
        rc, out, pid = run([cli, "run", "exchange"] + rest + extra)
        n = clusters_of(rest)
        oks = re.findall(r"^cluster \d+: exchange ok", out, re.M)
        if rc != 0 or len(oks) != n or "PASS: every message" not in out:
            fail(f"exit {rc}, {len(oks)} of {n} clusters ok", out)
        if len(re.findall(r"^  rt \d+\.service:", out, re.M)) != n:
            fail("the runtime counters of every cluster were not printed", out)
        bad = check_exchange_figures(rest, out)
        print(out)
        if bad:
            fail("; ".join(bad))
    elif case == "inject-error":  # the negative control: a corrupt message on purpose fails the run
        rc, out, pid = run([cli, "run", "exchange", "--inject-error"] + rest)
        print(out)
        lines = re.findall(r"^cluster (\d+): exchange (\w+): .*\(corrupt (\d+),", out, re.M)
        if rc != 1 or ("1", "FAILED", "1") not in lines or re.search(r"^PASS", out, re.M):
            fail(f"--inject-error: exit {rc} (1 expected); exchange lines {lines} (cluster 1 must count 1 corrupt)")
        if leftovers(pid):
            fail(f"left behind: {leftovers(pid)}")
    elif case == "delay-hold":
        d_us = 5000
        rc, out, pid = run([cli, "run", "ping", "--transport", "delay", "--delay-us", str(d_us), "--messages", "40",
                            "--warmup", "2"])
        m = re.search(r"median ([\d.]+) us, p99 [\d.]+ us, min ([\d.]+) us", out)
        if rc != 0 or not m:
            fail(f"exit {rc}", out)
        med, mn = float(m.group(1)), float(m.group(2))
        print(out)
        print(f"delay {d_us} us: round trip min {mn} us, median {med} us (lower bound {2 * d_us} us)")
        if mn < 2 * d_us:
            fail(f"a round trip took {mn} us < 2 x {d_us} us: a message was not held long enough")
        if med > 2 * d_us + 100_000:
            fail(f"median round trip {med} us: far above 2 x {d_us} us")
    elif case == "delay-auto":
        rc, out, pid = run([cli, "run", "exchange", "--transport", "delay", "--delay-us", "auto", "--messages", "100"])
        m = re.search(r"delay: D = ([\d.]+) us per message, obtained automatically: the application's mean message "
                      r"size (\d+) bytes", out)
        if rc != 0 or not m or "PASS" not in out:
            fail(f"exit {rc}", out)
        if float(m.group(1)) <= 0 or int(m.group(2)) <= 0:
            fail("D or the mean size is zero", out)
        if not re.search(r"runtime over delay [\d.]+ us per message", out):
            fail("the run did not use the delay transport", out)
        print(out)
    elif case == "path":
        transport = rest[0]
        data = "".join(f"line {i}\n" for i in range(5000))
        rc, out, pid = run([cli, "run", exe, "--clusters", "3", "--transport", transport, "--threads", "2",
                            "--", "--rounds", "50"], stdin=data)
        sums = re.findall(r"^cluster (\d+): stdin (\d+) bytes, checksum (\w+)", out, re.M)
        if rc != 0 or len(re.findall(r"rt_ping ok", out)) != 3 or "PASS: every cluster process" not in out:
            fail(f"exit {rc}", out)
        if len(sums) != 3 or any(int(s[1]) != len(data) for s in sums) or len({s[2] for s in sums}) != 1:
            fail(f"every cluster must get the same {len(data)} bytes on stdin: {sums}", out)
        if leftovers(pid):
            fail(f"left behind: {leftovers(pid)}", out)
        print(out)
        # a program that fails in one cluster fails the run
        rc, out, pid = run([cli, "run", "/bin/sh", "--clusters", "2", "--transport", transport, "--",
                            "-c", 'exit "$ICCS_CLUSTER"'])
        if rc == 0:
            fail("cluster 1 exited 1 but the run passed", out)
        rc, out, pid = run([cli, "run", "/bin/sh", "--clusters", "2", "--transport", transport, "--",
                            "-c", 'test "$ICCS_CLUSTERS" = 2 -a "$ICCS_TRANSPORT" = ' + transport])
        if rc != 0:
            fail("the ICCS_* environment of a cluster process is wrong", out)
        # A launcher killed outright (SIGKILL: no clean-up of its own) while its clusters run
        # leaves no copy of their standard input behind (it was /tmp/iccs-PID-stdin, left for ever).
        p = subprocess.Popen([cli, "run", "/bin/sh", "--clusters", "2", "--transport", transport, "--",
                              "-c", "cat > /dev/null; echo read-all; sleep 60"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        p.stdin.write(data)
        p.stdin.close()
        seen = ""
        deadline = time.time() + 60
        while seen.count("read-all") < 2 and time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            seen += line
        os.killpg(p.pid, 9)
        p.wait()
        left = glob.glob(f"/tmp/iccs-{p.pid}-stdin")
        for f in leftovers(p.pid):  # the rest of what a SIGKILLed launcher leaves (not this check's)
            subprocess.run(["rm", "-rf", f])
        if seen.count("read-all") < 2:
            fail("the clusters of the run to be killed did not both read their standard input", seen)
        if left:
            fail(f"a launcher killed with SIGKILL left its copy of standard input behind: {left}", seen)
        print("SIGKILLed launcher: no copy of standard input left behind")
    elif case == "peer-down":
        transport = rest[0]
        # ICCS_KEEP_SURVIVORS: the launcher lets cluster 0 find out by itself (as under mpirun)
        # instead of stopping it at once (compute/README.md).
        rc, out, pid = run([cli, "run", exe, "--clusters", "2", "--transport", transport,
                            "--set", "cluster.peer_timeout_ms=1000", "--timeout", "60", "--", "--die", "1"], timeout=90,
                           env=dict(os.environ, ICCS_KEEP_SURVIVORS="1"))
        if rc == 0:
            fail("a cluster died but the run passed", out)
        if "peer down" not in out or not re.search(r"^cluster 0: FAIL", out, re.M):
            fail("cluster 0 must see its peer down and report FAIL", out)
        if leftovers(pid):
            fail(f"left behind: {leftovers(pid)}", out)
        print(out)
    elif case == "restart":
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(f'[machine]\nclusters = 2\nfabric = "udp"\nudp_port = {udp_port()}\n'
                    f'udp_addresses = ["127.0.0.1", "127.0.0.1"]\n[cluster]\ncompute_threads = 1\nproxies = 1\n')
            cfg = f.name
        run_id = f"r{os.getpid() % 100000}"
        outs = {}

        def start(r, tag):
            env = dict(os.environ, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE="2", ICCS_CONFIG=cfg,
                       ICCS_RUN_ID=run_id)
            for k in list(env):
                if k.startswith("ICCS_CLUSTER") or k.startswith("SLURM_"):
                    del env[k]
            p = subprocess.Popen([exe, "--rounds", "100000000"], env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            outs[tag] = []
            threading.Thread(target=lambda: [outs[tag].append(line) for line in p.stdout], daemon=True).start()
            return p

        def text(tag):
            return "".join(outs.get(tag, []))

        def wait_for(pred, seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end and not pred():
                time.sleep(0.1)
            return pred()

        p0 = start(0, "rank0")
        p1 = start(1, "rank1")
        procs = [p0, p1]
        try:
            # Both up and talking (their stdout is a pipe, so buffered: judge by their being alive).
            time.sleep(3.0)
            if p0.poll() is not None or p1.poll() is not None:
                fail("the two ranks did not keep running", text("rank0") + text("rank1"))
            p1.kill()
            p1.wait()
            p1b = start(1, "rank1-again")
            procs.append(p1b)
            ok = wait_for(lambda: "cluster 1 restarted" in text("rank0"), 60)
            print("--- rank 0\n" + text("rank0") + "--- rank 1 (killed)\n" + text("rank1") +
                  "--- rank 1 (started again)\n" + text("rank1-again"))
            if not ok:
                fail("cluster 0 did not report cluster 1 restarted")
            if "new incarnation is not merged" not in text("rank0"):
                fail("the report must say the new incarnation is not merged")
            if "rt_ping ok" in text("rank0"):
                fail("cluster 0 must not pass: its peer restarted under it")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            os.unlink(cfg)
            for d in glob.glob(f"/var/run/dpdk/iccs-{run_id}-*"):
                subprocess.run(["rm", "-rf", d])
        print("PASS: the restarted cluster was reported and not merged")
    elif case == "mpi-by-hand":
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(f'[machine]\nclusters = 2\nfabric = "udp"\nudp_port = {udp_port()}\n'
                    f'udp_addresses = ["127.0.0.1", "127.0.0.1"]\n[cluster]\ncompute_threads = 2\nproxies = 1\n')
            cfg = f.name
        run_id = f"m{os.getpid() % 100000}"
        procs = []
        for r in range(2):
            env = dict(os.environ, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE="2", ICCS_CONFIG=cfg,
                       ICCS_RUN_ID=run_id)
            for k in list(env):
                if k.startswith("ICCS_CLUSTER") or k.startswith("SLURM_"):
                    del env[k]
            procs.append(subprocess.Popen([exe, "--rounds", "50"], env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = []
        for p in procs:
            try:
                o, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                fail("the processes did not finish")
            outs.append((p.returncode, o))
        os.unlink(cfg)
        for r, (rc, o) in enumerate(outs):
            print(f"--- rank {r}: exit {rc}\n{o}")
            if rc != 0 or f"cluster {r} of 2: rt_ping ok" not in o or "runtime over iccs" not in o:
                fail(f"rank {r} (OMPI_COMM_WORLD_RANK={r}) did not become cluster {r} and pass")
            if "fabric udp" not in o:
                fail(f"rank {r} did not use the machine file's fabric")
        if glob.glob(f"/var/run/dpdk/iccs-{run_id}-*"):
            fail("EAL runtime directories left behind")
    elif case == "flag-errors":
        rc, out, _ = run([cli, "run", "alltoall", "--transport", "direct"])
        if rc != 2 or "--transport is for programs on the cluster runtime" not in out:
            fail("--transport on alltoall must stop with a clear error", out)
        rc, out, _ = run([cli, "run", "exchange", "--transport", "fast"])
        if rc != 2 or "bad value 'fast' for --transport" not in out:
            fail("a bad --transport must be named", out)
        rc, out, _ = run([cli, "run", "exchange", "--transport", "direct", "--delay-us", "5"])
        if rc != 2 or "--delay-us is for --transport delay" not in out:
            fail("--delay-us without --transport delay must say so", out)
        rc, out, _ = run([cli, "run", "ping", "--set", "runtime.transport=slow"])
        if rc != 2 or "[runtime] transport" not in out:
            fail("a bad [runtime] transport must be named", out)
        rc, out, _ = run([cli, "run", "ping", "--set", "runtime.transport=delay", "--set", "runtime.delay_us=300",
                          "--messages", "20"])
        if rc != 0 or "D = 300.0 us per message (given by [runtime] delay_us)" not in out:
            fail("[runtime] transport/delay_us must be the defaults of iccs run", out)
        rc, out, _ = run([cli, "run", "exchange", "--transport", "delay", "--delay-us", "x"])
        if rc != 2 or "bad value 'x' for --delay-us" not in out:
            fail("a bad --delay-us must be named", out)
        rc, out, _ = run([cli, "run", "./no/such/program"])
        if rc != 2 or "not an executable file" not in out:
            fail("a missing program must be named", out)
    else:
        fail(f"unknown case {case}")
    print("PASS")


if __name__ == "__main__":
    main()
