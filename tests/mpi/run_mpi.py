#!/usr/bin/env python3
"""Integration test: an MPI program of tests/mpi/ started by real mpirun (Debian's Open MPI, pml cm,
mtl ofi, provider iccs) on a machine file of C clusters x S ranks, and the run checked from outside:
every rank printed its PASS line once and mpirun exited 0; the agents' reports (ICCS_REPORT) say
every rank finished, the ranks of one cluster talked through shared memory (every byte a rank's
bridge carried was a byte it sent to another cluster, and nothing else), messages to other clusters
crossed the proxies (iccs transport); nothing of the run is left (run directory, EAL runtime
directories, agent processes).

Usage: run_mpi.py PROVIDER_DIR PROGRAM [OPTIONS] [-- PROGRAM ARGS]
  --clusters C --cluster-size S   the machine (default 2 x 2)
  --fabric memif|udp              (default memif)
  --proxies P                     proxies per cluster (default 2)
  --transport iccs|direct|delay   (default iccs)
  --mtu N                         [machine] mtu_bytes (default: the file sets none, 1500)
  --memif-zero-copy               [machine] memif_zero_copy = true: with 2 clusters of one proxy the
                                  link must have run zero-copy (its client end's report counts it:
                                  memif_zero_copy_links), otherwise none (they copy as before)
  --polling adaptive|inline       [cluster] polling (default adaptive). inline with --cluster-size 1:
                                  each cluster runs in its rank's process (no agent process may
                                  start: ICCS_MPI_AGENT names none), and every report must say so
  --drop P                        frames dropped on receive ([test] drop): slidwin must recover
  --key [encrypt]                 a fresh [security] key_file (and encrypt = true)
  --killed VICTIM                 the program kills rank VICTIM (mpi_killed.c): mpirun runs with
                                  orte_enable_recovery, and every other rank must end with an MPI
                                  error within the time-out, none with "no error"
  --stopped-agent D               the agent of domain D is stopped (SIGSTOP) once every rank runs
                                  (mpi_killed.c with no victim, [cluster] peer_timeout_ms 1500): the
                                  ranks of the other clusters must end with an MPI error within the
                                  time-out, and say why: the proxies of cluster D said nothing for
                                  the peer timeout, which may be a host that gave them no core (IMB's
                                  Uniband on 2 loaded cores); then the agent goes on (SIGCONT) and
                                  the run must end and leave nothing
  --bad-size N                    mpirun starts N ranks against the machine file's C*S: the run must
                                  fail with the one line naming both counts, said once
  --no-config                     ICCS_CONFIG not passed: the run must fail with the one line that
                                  says so, said once
  --again                         mpirun twice, the second started as soon as the first returned
                                  (a new run id, the same machine file: a script running one
                                  program after another); both must pass and leave nothing
  --timeout S                     seconds for the whole run (default 240)
Exit status 77 (skip) when mpirun is not installed.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HDR = 56  # mpi/provider/mpi_wire.hpp: the record header


AGENT_LOG = None  # where the agents (and their proxies) write (ICCS_MPI_AGENT_LOG): shown with a failure


def fail(msg, out=""):
    if out:
        sys.stdout.write(out[-6000:])
    if AGENT_LOG and os.path.exists(AGENT_LOG) and os.path.getsize(AGENT_LOG) > 0:
        with open(AGENT_LOG, errors="replace") as f:
            sys.stdout.write("the agents' log:\n" + f.read()[-6000:])
    print(f"FAIL: {msg}")
    sys.exit(1)


def leftovers(run):
    found = glob.glob(f"/tmp/iccs-{run}") + glob.glob(f"/var/run/dpdk/iccs-{run}-*")
    for env in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(env, "rb") as f:
                if f"ICCS_RUN_ID={run[1:]}".encode() + b"\0" in f.read():
                    with open(env.replace("environ", "cmdline"), "rb") as c:
                        cmd = c.read().replace(b"\0", b" ").decode(errors="replace")
                    if "iccs-mpi-agent" in cmd:
                        found.append(f"agent process {env.split('/')[2]}: {cmd}")
        except OSError:
            pass
    return found


def left_behind(run):
    """What the run left behind, once the agents had 20 s to end and clean up (they linger 1 s
    after their last rank, then write their report)."""
    deadline = time.monotonic() + 20
    while leftovers(run) and time.monotonic() < deadline:
        time.sleep(0.2)
    return leftovers(run)


PEER_TIMEOUT_MS = 1500  # --stopped-agent: the machine file's [cluster] peer_timeout_ms


def agent_pid(run, domain):
    for env in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(env, "rb") as f:
                if f"ICCS_RUN_ID={run[1:]}".encode() + b"\0" not in f.read():
                    continue
            with open(env.replace("environ", "cmdline"), "rb") as c:
                argv = c.read().split(b"\0")
            if argv[0].endswith(b"iccs-mpi-agent") and b"--domain" in argv and \
                    argv[argv.index(b"--domain") + 1] == str(domain).encode():
                return int(env.split("/")[2])
        except (OSError, IndexError):
            pass
    return None


def stopped_agent(cmd, env, run, domain, clusters, size, timeout):
    """--stopped-agent D: the agent of domain D stops (SIGSTOP) while every rank runs; the ranks of
    the other clusters end with an MPI error that says the proxies of cluster D were silent for the
    peer timeout; then the agent goes on (SIGCONT), the run ends and leaves nothing."""
    import signal
    import threading
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    survivors = [r for r in range(clusters * size) if r // size != domain]
    pid, stopped = None, False
    t0 = time.monotonic()
    try:
        # Every rank attached (each agent serves), and the rounds going: 2 s after both agents are up.
        while time.monotonic() - t0 < 60 and p.poll() is None:
            pids = [agent_pid(run, d) for d in range(clusters)]
            if all(pids):
                pid = pids[domain]
                break
            time.sleep(0.1)
        if pid is None:
            fail("the agents did not start", "".join(lines))
        time.sleep(2)
        # The agent detaches (its first process forks and ends): the one to stop is the one there now.
        for _ in range(50):
            pid = agent_pid(run, domain)
            try:
                if pid is not None:
                    os.kill(pid, signal.SIGSTOP)
                    break
            except ProcessLookupError:
                pass
            time.sleep(0.1)
        else:
            fail(f"no agent of domain {domain} to stop", "".join(lines))
        stopped = True
        t_stop = time.monotonic()
        print(f"agent of domain {domain} (pid {pid}) stopped {t_stop - t0:.1f} s after mpirun started", flush=True)
        while time.monotonic() - t_stop < timeout and p.poll() is None:
            out = "".join(lines)
            if all(re.search(rf"^survivor {r}: MPI error", out, re.M) for r in survivors):
                break
            time.sleep(0.1)
        took = time.monotonic() - t_stop
        os.kill(pid, signal.SIGCONT)
        stopped = False
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("mpirun did not end within 60 s after the agent went on", "".join(lines))
        reader.join(timeout=10)
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        if p.poll() is None:  # a failure above: mpirun ends its ranks (and their shared memory) on SIGTERM
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    out = "".join(lines)
    for r in survivors:
        if not re.search(rf"^survivor {r}: MPI error", out, re.M):
            fail(f"rank {r} did not end with an MPI error after the agent of domain {domain} stopped", out)
    why = (rf"^libiccs-fi: rank \d+: cluster {domain} is unreachable: its proxies said nothing for "
           rf"{PEER_TIMEOUT_MS} ms \(\[cluster\] peer_timeout_ms\): its agent was stopped or killed, or this host "
           rf"gave its proxies no core that long")
    if not re.search(why, out, re.M):
        fail(f"no rank said why cluster {domain} counts as gone (its proxies' silence for the peer timeout)", out)
    print(f"every rank of the other clusters ({survivors}) ended with an MPI error {took:.1f} s after the stop, "
          f"and said why: {re.search(why + '.*$', out, re.M).group(0)}")
    left = left_behind(run)
    if left:
        fail(f"left behind: {left}", out)
    print("PASS")


def main():
    argv = sys.argv[1:]
    prog_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, prog_args = argv[:i], argv[i + 1:]
    provider_dir, program = argv[0], argv[1]
    opts = {"--clusters": "2", "--cluster-size": "2", "--fabric": "memif", "--proxies": "2", "--transport": "iccs",
            "--drop": None, "--mtu": None, "--polling": "adaptive", "--killed": None, "--stopped-agent": None, "--bad-size": None, "--timeout": "240", "--again": None,
            "--memif-zero-copy": None}
    key = None
    no_config = False
    i = 2
    while i < len(argv):
        a = argv[i]
        if a == "--key":
            key = "plain"
            if i + 1 < len(argv) and argv[i + 1] == "encrypt":
                key = "encrypt"
                i += 1
        elif a in ("--again", "--memif-zero-copy"):
            opts[a] = "yes"
        elif a == "--no-config":
            no_config = True
        elif a in opts:
            opts[a] = argv[i + 1]
            i += 1
        else:
            fail(f"unknown option {a}")
        i += 1
    mpirun = shutil.which("mpirun")
    if program.startswith("missing:"):
        print(f"SKIP: {program[8:]} is not installed (Debian's libopenmpi-dev; ./iccs installs it)")
        sys.exit(77)
    if mpirun is None:
        print("SKIP: mpirun is not installed (Debian's openmpi-bin; ./iccs installs it)")
        sys.exit(77)
    clusters, size = int(opts["--clusters"]), int(opts["--cluster-size"])
    ranks = clusters * size
    started = ranks if opts["--bad-size"] is None else int(opts["--bad-size"])
    run = f"m{os.getpid() % 10000000}"  # the provider's run id: "m" + ICCS_RUN_ID
    tmp = tempfile.mkdtemp(prefix="iccs-mpi-test-")
    try:
        cfg = os.path.join(tmp, "machine.toml")
        lines = ["[machine]", f"clusters = {clusters}", f'fabric = "{opts["--fabric"]}"']
        if opts["--fabric"] == "udp":
            # fabric udp binds fixed ports (udp_port + 64*cluster + proxy): a range of this test's
            # own, so that a test of another worktree or a program run beside it is not met there
            lines += [f"udp_port = {20000 + (os.getpid() % 48) * 256}"]
        if opts["--mtu"] is not None:
            lines += [f"mtu_bytes = {opts['--mtu']}"]
        if opts["--memif-zero-copy"] is not None:
            lines += ["memif_zero_copy = true"]
        lines += ["[cluster]", f"compute_threads = {size}", f"proxies = {opts['--proxies']}", f'polling = "{opts["--polling"]}"']
        if opts["--stopped-agent"] is not None:
            lines += [f"peer_timeout_ms = {PEER_TIMEOUT_MS}"]
        if opts["--drop"] is not None:
            lines += ["[test]", f"drop = {opts['--drop']}", "seed = 7"]
        if key:
            kf = os.path.join(tmp, "key")
            fd = os.open(kf, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, os.urandom(32))
            os.close(fd)
            lines += ["[security]", f'key_file = "{kf}"'] + (["encrypt = true"] if key == "encrypt" else [])
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        rep = os.path.join(tmp, "rep")
        env = dict(os.environ)
        global AGENT_LOG
        AGENT_LOG = os.path.join(tmp, "agents.log")
        env.update({"FI_PROVIDER_PATH": provider_dir, "ICCS_CONFIG": cfg, "ICCS_RUN_ID": run[1:], "ICCS_REPORT": rep,
                    "ICCS_TRANSPORT": opts["--transport"], "OMPI_MCA_mtl_ofi_provider_include": "iccs",
                    "ICCS_MPI_AGENT_LOG": AGENT_LOG})
        if no_config:
            del env["ICCS_CONFIG"]
        if in_rank_expected(opts):
            # A cluster of one rank under inline polling runs in the rank's process: an agent
            # process started all the same would fail to start (and the run with it).
            env["ICCS_MPI_AGENT"] = os.path.join(tmp, "no-agent-may-start")
        cmd = [mpirun, "--oversubscribe", "-n", str(started), "--mca", "pml", "cm", "--mca", "mtl", "ofi",
               "--mca", "mtl_ofi_provider_include", "iccs", "--mca", "osc", "pt2pt"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        # Open MPI's shared-memory files in the test's directory (removed at the end), as `iccs run
        # --mpi` does: ranks ended by a signal (the victim, or a hung run's) never unlink them.
        cmd += ["--mca", "btl_vader_backing_directory", tmp]
        if opts["--killed"] is not None or opts["--stopped-agent"] is not None:
            cmd += ["--mca", "orte_enable_recovery", "1"]
        for var in ("FI_PROVIDER_PATH", "ICCS_CONFIG", "ICCS_RUN_ID", "ICCS_REPORT", "ICCS_TRANSPORT", "ICCS_MPI_AGENT_LOG",
                    "ICCS_MPI_AGENT"):
            if var in env:
                cmd += ["-x", var]
        cmd += [program] + prog_args
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.monotonic()
        if opts["--stopped-agent"] is not None:
            stopped_agent(cmd, env, run, int(opts["--stopped-agent"]), clusters, size, int(opts["--timeout"]))
            return
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=int(opts["--timeout"]))
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            fail(f"mpirun did not end within {opts['--timeout']} s (a hang, or a run far slower than it should be)", out)
        took = time.monotonic() - t0
        out = p.stdout
        print(f"mpirun exited {p.returncode} after {took:.1f} s")

        if opts["--bad-size"] is not None or no_config:
            want = (rf"OMPI_COMM_WORLD_SIZE={started}: the launcher started {started} ranks but the machine file "
                    rf"\S+ makes {ranks} \(\[machine\] clusters = {clusters} x \[cluster\] compute_threads = {size}\)"
                    if not no_config else r"ICCS_CONFIG is not set: it must name the iccs machine file")
            said = re.findall(r"^libiccs-fi: " + want, out, re.M)
            if p.returncode == 0:
                fail("the run passed", out)
            if len(said) != 1:
                fail(f"the reason was said {len(said)} times, not once (wanted: {want})", out)
            print(f"refused as expected: {re.search('^libiccs-fi: .*$', out, re.M).group(0)}")
        elif opts["--killed"] is not None:
            victim = int(opts["--killed"])
            survivors = [r for r in range(ranks) if r != victim]
            for r in survivors:
                if not re.search(rf"^survivor {r}: MPI error after a peer died", out, re.M):
                    fail(f"rank {r} did not end with an MPI error", out)
            if re.search(r"no error", out):
                fail("a rank ran to its end without an error", out)
            print(f"every survivor ({survivors}) ended with an MPI error, {took:.1f} s in all")
        else:
            runs = [(run, rep, p.returncode, out)]
            if opts["--again"] is not None:
                # The same command at once, as a script running one program after another does:
                # a new run (mpirun's own job id under a real launcher), the same machine file.
                again = f"m{os.getpid() % 10000000 + 10000000}"
                env_again = dict(env, ICCS_RUN_ID=again[1:], ICCS_REPORT=rep + "-again")
                try:
                    p2 = subprocess.run(cmd, env=env_again, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, timeout=int(opts["--timeout"]))
                except subprocess.TimeoutExpired as e:
                    out2 = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                    fail(f"the second mpirun did not end within {opts['--timeout']} s (a hang)", out2)
                print(f"the same mpirun again at once: exited {p2.returncode}")
                runs.append((again, rep + "-again", p2.returncode, p2.stdout))
            for run_id, run_rep, status, run_out in runs:
                if status != 0:
                    fail(f"mpirun of run {run_id} exited {status}", run_out)
                for r in range(ranks):
                    n = len(re.findall(rf"PASS rank {r} of {ranks}$", run_out, re.M))
                    if n != 1:
                        fail(f"rank {r} of run {run_id} printed its PASS line {n} times", run_out)
                sys.stdout.write("".join(l + "\n" for l in run_out.splitlines() if "PASS" in l))
                check_reports(run_rep, clusters, size, opts, run_out)
                left = left_behind(run_id)
                if left:
                    fail(f"left behind: {left}", run_out)
        left = left_behind(run)
        if left:
            fail(f"left behind: {left}", out)
        print("PASS")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def in_rank_expected(opts):
    """The machine's clusters run in their ranks' processes (mpi/provider/README.md, "Why an agent
    process"): one rank a cluster under inline polling, over the proxies."""
    return opts["--polling"] == "inline" and opts["--cluster-size"] == "1" and opts["--transport"] == "iccs"


def check_reports(rep, clusters, size, opts, out):
    bridged = opts["--transport"] == "iccs"
    domains = clusters if bridged else 1
    deadline = time.monotonic() + 20  # the agents write their report after the last rank left
    paths = [f"{rep}.mpi.c{d}" for d in range(domains)]
    while not all(os.path.exists(p) for p in paths) and time.monotonic() < deadline:
        time.sleep(0.2)
    reports = []
    for pth in paths:
        try:
            with open(pth) as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as e:
            fail(f"no agent report {pth}: {e}", out)
    remote_bytes = 0
    for r in reports:
        if not r["ok"]:
            fail(f"the agent of domain {r['domain']} says not ok: {r}", out)
        if opts["--memif-zero-copy"] is not None:
            want = r["domain"] if opts["--proxies"] == "1" and clusters == 2 else 0  # cluster 1's one link
            if r.get("memif_zero_copy_links") != want:
                fail(f"the agent of domain {r['domain']} ran {r.get('memif_zero_copy_links')!r} memif links "
                     f"zero-copy, not {want}", out)
        if in_rank_expected(opts):
            # The agent ran in its rank's process: the report was written there, and that
            # process's thread carried the records (the bridge's counters) and ran the proxies.
            rank_pids = [k["pid"] for k in r["ranks"]]
            if r.get("agent") != "in-rank" or rank_pids != [r.get("agent_pid")]:
                fail(f"domain {r['domain']}: its agent did not run in its rank's process (agent "
                     f"{r.get('agent')!r}, pid {r.get('agent_pid')}, rank pids {rank_pids})", out)
            # The rank's thread registered with the EAL (mempool caches of its own: each packet
            # buffer taken or given back was a compare-and-swap on the pool's ring without one).
            # Main's build before 2 Dec 2026 registered at the rank's first step, before its
            # cluster's EAL had finished coming up, and never had one.
            if not isinstance(r.get("rank_lcore"), int) or r["rank_lcore"] < 0:
                fail(f"domain {r['domain']}: the rank's thread has no lcore of the EAL (rank_lcore "
                     f"{r.get('rank_lcore')!r})", out)
            if any(p["msgs_tx"] == 0 or p["msgs_rx"] == 0 for p in r["proxies"]):
                fail(f"domain {r['domain']}: a proxy carried nothing: {r['proxies']}", out)
            # Records went between the engine and the bridge directly (no ring: the bridge's
            # direct_out / direct_in), those of messages of several records too (direct_out_multi:
            # each written from the user's buffer into the packet buffers it left in), and records
            # that arrived as a chain of packet segments (a datagram of several jumbo frames) went
            # from them into the engine (direct_in_chained). Main's build ran both through the
            # rank's rings (mpi/provider/README.md, "Why an agent process").
            for k in r["ranks"]:
                b = k["bridge"]
                direct_out, direct_in = b.get("direct_out", 0), b.get("direct_in", 0)
                if direct_out == 0 or direct_in == 0:
                    fail(f"rank {k['rank']}: no record went between its engine and its bridge without the "
                         f"rings (direct_out {direct_out}, direct_in {direct_in})", out)
                multi, chained = b.get("direct_out_multi", 0), b.get("direct_in_chained", 0)
                if b["records_out"] > k["sent_remote_msgs"] and not 0 < multi <= direct_out:
                    fail(f"rank {k['rank']}: its messages of several records went through the ring "
                         f"(direct_out_multi {multi} of direct_out {direct_out}: {b})", out)
                if opts["--mtu"] == "9000" and b["records_in"] > k["recv_remote_msgs"] and not 0 < chained <= direct_in:
                    fail(f"rank {k['rank']}: no record that arrived in several packet segments went straight "
                         f"into its engine (direct_in_chained {chained} of direct_in {direct_in}: {b})", out)
                # Its small records were written by the engine straight into the packet buffer
                # they left in (convergence's zero-copy send), not copied there from a record
                # built beside it.
                zero_copy = b.get("direct_out_zero_copy", 0)
                if zero_copy == 0 or zero_copy > direct_out:
                    fail(f"rank {k['rank']}: no record went from its engine into a packet buffer without a "
                         f"copy (direct_out_zero_copy {zero_copy} of direct_out {direct_out})", out)
        for k in r["ranks"]:
            if k["state"] != 2:
                fail(f"rank {k['rank']} did not finish (state {k['state']})", out)
            if k["errors"] != 0:
                fail(f"rank {k['rank']} counted {k['errors']} failed operations", out)
            if bridged:
                b = k["bridge"]
                # Every byte the bridge took from the rank was a record for another cluster.
                if b["bytes_out"] != k["sent_remote_bytes"] + HDR * b["records_out"]:
                    fail(f"rank {k['rank']}: its bridge carried {b['bytes_out']} bytes in {b['records_out']} records, "
                         f"but the rank sent {k['sent_remote_bytes']} bytes to other clusters", out)
                if b["bytes_in"] != k["recv_remote_bytes"] + HDR * b["records_in"]:
                    fail(f"rank {k['rank']}: its bridge delivered {b['bytes_in']} bytes in {b['records_in']} records, "
                         f"but the rank received {k['recv_remote_bytes']} bytes from other clusters", out)
                remote_bytes += k["sent_remote_bytes"]
            elif k["sent_remote_msgs"] + k["sent_local_msgs"] == 0:
                fail(f"rank {k['rank']} sent nothing", out)
    if bridged and clusters > 1:
        tx = sum(p["bytes_tx"] for r in reports for p in r["proxies"])
        if remote_bytes == 0 or tx < remote_bytes:
            fail(f"the proxies sent {tx} bytes, less than the {remote_bytes} the ranks sent to other clusters", out)
        local = sum(k["sent_local_msgs"] for r in reports for k in r["ranks"])
        print(f"ranks sent {remote_bytes} bytes to other clusters, the proxies {tx}; "
              f"{local} messages within clusters through shared memory"
              + ("; every cluster's agent ran in its rank's process" if in_rank_expected(opts) else ""))
        if opts["--drop"] is not None:
            retx = sum(p["retransmissions"] for r in reports for p in r["proxies"])
            if retx == 0:
                fail("frames were dropped but no proxy retransmitted", out)
            print(f"proxies retransmitted {retx} datagrams")


if __name__ == "__main__":
    main()
