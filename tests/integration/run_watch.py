#!/usr/bin/env python3
"""Helpers of the tests that stop runs on purpose (issue 34: fault_kill.py, signal_stops_run.py,
peer_exit.py, soak_run.py): start `iccs-cli run ...` with a tag every process of the run inherits,
read its output line by line with the time each line came, find its cluster processes, and list
what a run left behind.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_clusters import children, leftovers as fabric_leftovers  # noqa: E402  (EAL dirs, run dir, veths)


class Run:
    """One `iccs-cli ARGS...`: stdout and stderr merged, each line kept with its arrival time
    (time.monotonic(), CLOCK_MONOTONIC: the clock the clusters stamp with)."""

    def __init__(self, cli, args, env=None):
        self.tag = f"{os.getpid()}-{time.time_ns()}"
        e = dict(os.environ if env is None else env, ICCS_TEST_TAG=self.tag)
        self.cmd = [cli] + list(args)
        print("$", " ".join(self.cmd), flush=True)
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                                     errors="replace")
        self.lines = []  # (time, line)
        self.lock = threading.Condition()
        self.ended_at = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append((time.monotonic(), line))
                self.lock.notify_all()
        with self.lock:
            self.lock.notify_all()

    @property
    def run_id(self):
        return str(self.proc.pid)

    def output(self):
        with self.lock:
            return "".join(l for _, l in self.lines)

    def wait_for(self, pattern, timeout, count=1):
        """The first `count` lines matching pattern (re.search) have come: True; the run ended or the
        time ran out first: False."""
        rx = re.compile(pattern)
        until = time.monotonic() + timeout
        with self.lock:
            while True:
                if sum(1 for _, l in self.lines if rx.search(l)) >= count:
                    return True
                if self.proc.poll() is not None and not self.reader.is_alive():
                    return False
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.1))

    def wait(self, timeout):
        """The launcher's exit status, and when it exited (time.monotonic(); None: killed at the time-out)."""
        try:
            rc = self.proc.wait(timeout=timeout)
            self.ended_at = time.monotonic()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.reader.join(5)
        return rc

    def clusters(self):
        """{cluster id: pid} of the run's cluster processes (their EAL files name the cluster), or
        fork order when a process has none open yet."""
        kids = sorted(children(self.proc.pid))
        out = {}
        for i, pid in enumerate(kids):
            c = i
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    m = re.search(rf"iccs-{self.run_id}-c(\d+)", os.readlink(f"/proc/{pid}/fd/{fd}"))
                    if m:
                        c = int(m.group(1))
                        break
            except OSError:
                pass
            out[c] = pid
        return out

    def tagged_processes(self):
        """pids of processes that still carry this run's tag (none once every process ended)."""
        ps = []
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(f"{d}/environ", "rb") as f:
                    if f"ICCS_TEST_TAG={self.tag}".encode() in f.read().split(b"\0"):
                        ps.append(int(d.split("/")[-1]))
            except OSError:
                pass
        return ps

    def gone_by(self, timeout):
        """Wait until no process of the run is left (the launcher reaped): the time it happened, or None."""
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if self.proc.poll() is not None and not self.tagged_processes():
                return time.monotonic()
            time.sleep(0.01)
        return None


def leftovers(run_id):
    """What a run left: its EAL runtime dirs, run directory, af_packet bridge and veths, and its
    shared memory in /dev/shm."""
    return fabric_leftovers(run_id) + glob.glob(f"/dev/shm/iccs-{run_id}*")


def unreadable_captures(pcap_dir):
    """Capture files tshark cannot read to their end: [(file, tshark's complaint)]. None when
    tshark is not installed."""
    if shutil.which("tshark") is None:
        return None
    bad = []
    for f in sorted(glob.glob(os.path.join(pcap_dir, "*.pcapng"))):
        r = subprocess.run(["tshark", "-r", f, "-q"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or "cut short" in r.stderr or "appears to be damaged" in r.stderr:
            bad.append((os.path.basename(f), (r.stderr.strip() or f"exit {r.returncode}")[:200]))
    return bad


class Checks:
    """ok/FAIL lines and the verdict."""

    def __init__(self):
        self.failed = 0

    def check(self, cond, what):
        print(("ok: " if cond else "FAIL: ") + what, flush=True)
        if not cond:
            self.failed += 1
        return bool(cond)

    def verdict(self):
        print("PASS" if self.failed == 0 else f"FAILED ({self.failed} checks)", flush=True)
        return 0 if self.failed == 0 else 1
