#!/usr/bin/env python3
"""The provider's own conformance checks (fi_conformance.cpp) between two processes, ranks 0 and 1
of a machine of 2 clusters x 1 rank (ICCS_RANK/ICCS_RANKS, no MPI launcher), for each given
configuration: both must print every "ok" line and "conformance PASS", none "FAIL"; nothing of
the run may be left.

Usage: fi_conformance.py PROVIDER_DIR EXE [--transport iccs|direct|delay] [--fabric memif|udp]
                         [--polling adaptive|inline] CONFIG... (CONFIG: AV,THREADING,CQ e.g. map,safe,tagged, or
                         --sent-and-left: rank 1 sends and ends before rank 0 starts;
                         --alone: rank 0 alone, its agent must end within peer_timeout_ms + 2 s)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_mpi import left_behind, leftovers  # noqa: E402


def expect_nothing_left(run):
    left = left_behind("m" + run)
    if left:
        print(f"FAIL: left behind: {left}")
        sys.exit(1)


def machine_env(tmp, provider_dir, transport, fabric, run, proxies=2, polling="adaptive", extra=""):
    """polling inline: each cluster (of one rank) runs in its rank's process (mpi/provider/README.md)."""
    cfg = os.path.join(tmp, "machine.toml")
    with open(cfg, "w") as f:
        f.write(f'[machine]\nclusters = 2\nfabric = "{fabric}"\n[cluster]\ncompute_threads = 1\nproxies = {proxies}\n'
                f'polling = "{polling}"\n{extra}')
    env = dict(os.environ, FI_PROVIDER_PATH=provider_dir, ICCS_CONFIG=cfg, ICCS_RUN_ID=run, ICCS_RANKS="2",
               ICCS_TRANSPORT=transport, ICCS_MPI_AGENT_LOG=os.path.join(tmp, "agents.log"))
    if polling == "inline" and transport == "iccs":
        env["ICCS_CONFORMANCE_IN_RANK"] = "1"  # the checks expect no agent process
    return env


def agents_log(tmp):
    """What the agents (and their proxies) said: shown with a failure, as it names the cause."""
    try:
        with open(os.path.join(tmp, "agents.log")) as f:
            text = f.read()
    except OSError:
        return "(the agents wrote no log)\n"
    return "the agents' log:\n" + (text if text else "(empty)\n")


def sent_and_left(exe, provider_dir, transport, fabric):
    """Rank 1 sends one message and ends; rank 0 starts then, when rank 1's agent has stopped
    before its bridge could connect to rank 0's (whose cluster did not exist yet); rank 0's
    bridge listens 1.5 s late (a test seam of the agent), so rank 1's bridge meets a cluster that
    answers and refuses it for a while. The message must still arrive intact."""
    tmp = tempfile.mkdtemp(prefix="iccs-ficonf-")
    run = f"c{os.getpid() % 100000}sl"
    try:
        env = machine_env(tmp, provider_dir, transport, fabric, run)
        t0 = time.monotonic()
        outs = []
        for r in (1, 0):
            renv = dict(env, ICCS_RANK=str(r))
            if r == 0:
                renv["ICCS_MPI_TEST_LISTEN_DELAY_MS"] = "1500"
            try:
                p = subprocess.run([exe, tmp, "sent-and-left"], env=renv, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                print(f"FAIL: rank {r} hangs\n" + "".join(outs) + agents_log(tmp))
                sys.exit(1)
            outs.append(p.stdout)
            if p.returncode != 0 or f"conformance PASS rank {r}" not in p.stdout:
                print(f"FAIL: rank {r} exit {p.returncode}\n" + "".join(outs) + agents_log(tmp))
                sys.exit(1)
        print(f"== sent-and-left over {transport}/{fabric}: {time.monotonic() - t0:.1f} s\n" + "".join(outs))
        expect_nothing_left(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ALONE_PEER_TIMEOUT_MS = 1500


def alone(exe, provider_dir, transport, fabric):
    """Rank 0 alone on a machine file of two clusters (a one-process program, as fabtests'
    fi_dom_test): it ends at once; its agent, whose peer cluster never came, must end within the
    peer time-out + 2 s (its 1 s linger after the last rank, and the start-up) and leave nothing
    behind. It waited for that cluster 20 s (memif's link, udp's start grace) before."""
    tmp = tempfile.mkdtemp(prefix="iccs-ficonf-")
    run = f"c{os.getpid() % 100000}al"
    try:
        env = machine_env(tmp, provider_dir, transport, fabric, run, proxies=1,
                          extra=f"peer_timeout_ms = {ALONE_PEER_TIMEOUT_MS}\n")
        t0 = time.monotonic()
        p = subprocess.run([exe, tmp, "alone"], env=dict(env, ICCS_RANK="0"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        t_rank = time.monotonic() - t0
        if p.returncode != 0 or "conformance PASS rank 0" not in p.stdout:
            print(f"FAIL: rank 0 exit {p.returncode}\n" + p.stdout + agents_log(tmp))
            sys.exit(1)
        while leftovers("m" + run) and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        t_agent = time.monotonic() - t0
        print(f"== alone over {transport}/{fabric}: rank 0 ended after {t_rank:.1f} s, its agent after {t_agent:.1f} s")
        bound = t_rank + ALONE_PEER_TIMEOUT_MS / 1000 + 2
        if t_agent > bound:
            print(f"FAIL: the agent ended {t_agent:.1f} s after the start, later than {bound:.1f} s\n" + agents_log(tmp))
            sys.exit(1)
        expect_nothing_left(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    provider_dir, exe = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    transport, fabric, polling, configs = "iccs", "memif", "adaptive", []
    i = 0
    while i < len(rest):
        if rest[i] in ("--sent-and-left", "--alone"):
            configs.append([rest[i][2:]])
            i += 1
        elif rest[i] == "--transport":
            transport = rest[i + 1]
            i += 2
        elif rest[i] == "--fabric":
            fabric = rest[i + 1]
            i += 2
        elif rest[i] == "--polling":
            polling = rest[i + 1]
            i += 2
        else:
            configs.append(rest[i].split(","))
            i += 1
    for config in configs:
        if config == ["sent-and-left"]:
            sent_and_left(exe, provider_dir, transport, fabric)
            continue
        if config == ["alone"]:
            alone(exe, provider_dir, transport, fabric)
            continue
        av, threading, cq = config
        tmp = tempfile.mkdtemp(prefix="iccs-ficonf-")
        run = f"c{os.getpid() % 100000}{len(av)}{len(cq)}"
        try:
            env = machine_env(tmp, provider_dir, transport, fabric, run, polling=polling)
            procs = [subprocess.Popen([exe, tmp, av, threading, cq], env=dict(env, ICCS_RANK=str(r)),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
            outs = []
            t0 = time.monotonic()
            for p in procs:
                try:
                    outs.append(p.communicate(timeout=max(10, 280 - (time.monotonic() - t0)))[0])
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    print("FAIL: a hang\n" + "".join(q.communicate()[0] or "" for q in procs) + agents_log(tmp))
                    sys.exit(1)
            print(f"== {av} {threading} {cq} over {transport}/{fabric}, polling {polling}: {time.monotonic() - t0:.1f} s")
            print(outs[0] + ("" if procs[1].returncode == 0 else "rank 1:\n" + outs[1]))
            for r, p in enumerate(procs):
                if p.returncode != 0 or f"conformance PASS rank {r}" not in outs[r] or "FAIL" in outs[r]:
                    print(f"FAIL: rank {r} exit {p.returncode}\n" + agents_log(tmp))
                    sys.exit(1)
            expect_nothing_left(run)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
