#!/usr/bin/env python3
"""Everything a run creates is its owner's only (issue 17), and another user is told why it
cannot look.

Starts `iccs-cli run alltoall` (2 clusters of 1 proxy over memif) with --pcap into a directory
that does not exist yet, waits for both telemetry sockets, then checks that no group or other
permission bit is set on: the run directory /tmp/iccs-<run> and its memif sockets, each
cluster's EAL runtime directory and everything in it (config, telemetry and mp sockets, fbarray
files), the capture directory it created and the capture files. When run as root with setpriv
(util-linux) at hand, `iccs stat` and `iccs wan show` (tools/iccs_stat.py, tools/iccs_wan.py) are
run as user nobody and must fail with "permission denied: owned by UID 0" (without them the
test ends SKIP, exit 77, after its other checks). Then the run is stopped with SIGINT.

Usage: file_modes.py ICCS_CLI REPO_ROOT
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time


def runtime_base():
    if os.getuid() == 0:
        return "/var/run/dpdk"
    return os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", "dpdk")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    cli, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    failures = []
    skipped = []  # a part that could not run here: the test ends SKIP (exit 77), never PASS

    def check(ok, what):
        print(("ok: " if ok else "FAILED: ") + what, flush=True)
        if not ok:
            failures.append(what)

    work = tempfile.mkdtemp(prefix="iccs-modes-")
    cap = os.path.join(work, "cap")
    proc = subprocess.Popen([cli, "run", "alltoall", "--clusters", "2", "--proxies", "1", "--messages", "300000",
                             "--max-size", "200", "--pcap", cap],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = proc.pid
    rundir = f"/tmp/iccs-{run}"
    eal = [os.path.join(runtime_base(), f"iccs-{run}-c{c}") for c in range(2)]
    socks = [os.path.join(d, "dpdk_telemetry.v2") for d in eal]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not all(map(os.path.exists, socks)):
            time.sleep(0.1)
        if not all(map(os.path.exists, socks)):
            print("FAILED: the run's telemetry sockets never appeared")
            return 1
        # The capture files are opened after the ports, which on a loaded host can take seconds after
        # the telemetry sockets appear: wait for them (a fixed pause flaked in a loaded CI run).
        def captures():
            return [n for n in os.listdir(cap) if n.endswith(".pcapng")] if os.path.isdir(cap) else []

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and len(captures()) < 2:
            time.sleep(0.1)

        def owner_only(path):
            st = os.lstat(path)
            check(st.st_mode & 0o077 == 0 and st.st_uid == os.geteuid(),
                  f"{path}: {stat.filemode(st.st_mode)} uid {st.st_uid}: owner only")

        for d in [rundir] + eal + [cap]:
            if not os.path.isdir(d):
                check(False, f"{d} exists")
                continue
            owner_only(d)
            for name in sorted(os.listdir(d)):
                owner_only(os.path.join(d, name))
        check(any(n.endswith(".sock") for n in os.listdir(rundir)), f"{rundir} holds the memif sockets")
        check(len(captures()) == 2, f"{cap} holds 2 capture files")

        setpriv = shutil.which("setpriv")
        if os.getuid() == 0 and setpriv:
            env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
            as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3"]
            for tool, args in (("iccs_stat.py", []), ("iccs_wan.py", ["show"])):
                r = subprocess.run(as_nobody + [os.path.join(repo, "tools", tool)] + args, capture_output=True,
                                   text=True, timeout=60, env=env, cwd="/")
                out = (r.stdout + r.stderr).strip()
                print(f"  as nobody: {tool} {' '.join(args)} -> exit {r.returncode}: {out}")
                check(r.returncode != 0 and "permission denied" in out and "owned by UID 0" in out,
                      f"{tool} as another user: 'permission denied: owned by UID 0'")
        else:
            skipped.append("the other-user check needs root and setpriv (util-linux): `iccs stat`/`iccs wan` as "
                           "another user were not run")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        shutil.rmtree(work, ignore_errors=True)
    check(not os.path.exists(rundir), f"{rundir} removed at the end")
    if failures:
        print(f"FAIL: file modes ({len(failures)} failures)")
        return 1
    if skipped:
        print("SKIP: " + "; ".join(skipped) + " (every other check passed)")
        return 77
    print("PASS: file modes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
