"""hwcounters.py: counters of every proxy and compute thread of a running iccs machine.

Sources, each probed once per experiment (probe()), and said once when missing, with the reason:
  - perf_event, hardware: cycles, instructions, last-level-cache misses (PERF_TYPE_HARDWARE), per
    thread. Guests without a virtual PMU (these machines: AMD EPYC, no vPMU) refuse them with
    ENOENT; they are then recorded as unavailable (null in the JSON, never 0).
  - perf_event, software: task-clock [ns] and context switches, per thread (work everywhere).
  - Intel PCM: Debian's `pcm` ships programs, not a library. The way chosen: `pcm-sensor-server`
    (HTTP, Prometheus text at /metrics) started by the runner for the run, read before and after
    each measurement (system-wide per core: instructions, cycles, L3 misses). Needs an Intel CPU,
    the msr module (/dev/cpu/0/msr) and the program; elsewhere it is reported unavailable, with
    which of the three is missing.

Threads are attached from outside (perf_event_open on each thread id, no inheritance) once the
cluster processes of a run have started, and read after the run ends (a counter of a thread that
exited keeps its final count). Which thread is what: in a cluster process (a child of the
`iccs-cli run` launcher, cluster id from its EAL runtime directory iccs-<launcher>-c<N>), DPDK's
`rte-worker-*` lcores are the proxies, the other threads named like the process (not its main
thread) are the compute threads. Under inline polling there is no proxy thread: the compute
threads run the proxies' loop, and their counters include it (the metadata says so).
"""
import ctypes
import errno
import os
import re
import struct
import subprocess
import threading
import time
import urllib.request

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
HW_EVENTS = {"cycles": 0, "instructions": 1, "llc_misses": 3}  # PERF_COUNT_HW_CPU_CYCLES, _INSTRUCTIONS, _CACHE_MISSES
SW_EVENTS = {"task_clock_ns": 1, "context_switches": 3}         # PERF_COUNT_SW_TASK_CLOCK, _CONTEXT_SWITCHES
NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}

_libc = ctypes.CDLL(None, use_errno=True)


def _perf_open(type_, config, tid):
    """A counting perf_event fd for one thread (any CPU), or raises OSError."""
    nr = NR_PERF_EVENT_OPEN.get(os.uname().machine)
    if nr is None:
        raise OSError(errno.ENOSYS, f"perf_event_open: unknown syscall number on {os.uname().machine}")
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config, sample_period,
    # sample_type, read_format, flags (all 0: enabled, counting user and kernel), wakeup_events,
    # bp_type, config1.
    attr = struct.pack("=IIQQQQQIIQ", type_, 64, config, 0, 0, 0, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _libc.syscall(nr, buf, ctypes.c_int(tid), ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return fd


def _read_count(fd):
    try:
        return struct.unpack("=Q", os.read(fd, 8))[0]
    except OSError:
        return None


class Sources:
    """What this host offers; `notes` says once what is missing and why."""

    def __init__(self):
        self.hw = False
        self.sw = False
        self.pcm = False
        self.notes = []
        self.hw_reason = ""
        self.sw_reason = ""
        self.pcm_reason = ""

    def as_json(self):
        return {"perf_event_hardware": self.hw, "perf_event_hardware_reason": self.hw_reason or None,
                "perf_event_software": self.sw, "perf_event_software_reason": self.sw_reason or None,
                "intel_pcm": self.pcm, "intel_pcm_reason": self.pcm_reason or None}


def probe():
    s = Sources()
    me = threading.get_native_id()
    try:
        os.close(_perf_open(PERF_TYPE_SOFTWARE, SW_EVENTS["task_clock_ns"], me))
        s.sw = True
    except OSError as e:
        s.sw_reason = f"perf_event_open(task-clock) failed: {e.strerror} (kernel.perf_event_paranoid = {_paranoid()})"
        s.notes.append(f"counters: perf_event software events unavailable: {s.sw_reason}")
    try:
        os.close(_perf_open(PERF_TYPE_HARDWARE, HW_EVENTS["cycles"], me))
        s.hw = True
    except OSError as e:
        why = ("the kernel offers no hardware events here (a guest without a virtual PMU?)"
               if e.errno == errno.ENOENT else f"kernel.perf_event_paranoid = {_paranoid()}")
        s.hw_reason = f"perf_event_open(cycles) failed: {e.strerror}: {why}"
        s.notes.append("counters: cycles, instructions and LLC misses unavailable (recorded as null): " + s.hw_reason)
    vendor = _cpu_vendor()
    if vendor != "GenuineIntel":
        s.pcm_reason = f"the CPU is {vendor or 'unknown'}, PCM needs an Intel CPU"
    elif not os.path.exists("/dev/cpu/0/msr"):
        s.pcm_reason = "no MSR access (/dev/cpu/0/msr missing: modprobe msr, as root)"
    elif not _which("pcm-sensor-server"):
        s.pcm_reason = "pcm-sensor-server not found (Debian package pcm)"
    else:
        s.pcm = True
    if not s.pcm:
        s.notes.append("counters: Intel PCM unavailable: " + s.pcm_reason)
    return s


def _paranoid():
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _cpu_vendor():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _which(prog):
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]:
        if os.access(os.path.join(d, prog), os.X_OK):
            return os.path.join(d, prog)
    return None


def _cluster_of(pid, launcher):
    """The cluster id of a cluster process, from its EAL runtime directory's open files."""
    pat = re.compile(rf"iccs-{launcher}-c(\d+)")
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                m = pat.search(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if m:
                return int(m.group(1))
    except OSError:
        pass
    return None


def _cluster_from_env(pid):
    """ICCS_CLUSTER of a program the launcher exec'd (compute/README.md, `run PATH`)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(b"ICCS_CLUSTER="):
                    return int(kv.split(b"=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def _children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


class RunCounters:
    """Attach to the proxy and compute threads of the run started by launcher `pid`; stop()
    reads them. Polls for threads every 50 ms while the run goes on."""

    def __init__(self, sources, launcher_pid, inline_polling):
        self.src = sources
        self.launcher = launcher_pid
        self.inline = inline_polling
        self.threads = {}  # tid -> {"cluster", "role", "fds": {name: fd}}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        if sources.sw or sources.hw:
            self._t.start()

    def _loop(self):
        while not self._stop.is_set():
            self._scan()
            self._stop.wait(0.05)

    def _scan(self):
        for pid in _children(self.launcher):
            cluster = _cluster_of(pid, self.launcher)
            if cluster is None:
                cluster = _cluster_from_env(pid)  # exec'd programs (`run APP`); direct/delay have no EAL
            if cluster is None:
                continue
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                if tid in self.threads or tid == pid:
                    continue
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        comm = f.read().strip()
                except OSError:
                    continue
                if comm.startswith("rte-worker"):
                    role = "proxy"
                elif comm == "iccs-cli" or comm.startswith("iccs-app"):  # forked / exec'd programs
                    role = "compute"
                else:
                    continue  # EAL's interrupt, mp and telemetry threads
                fds = {}
                events = []
                if self.src.sw:
                    events += [(PERF_TYPE_SOFTWARE, n, c) for n, c in SW_EVENTS.items()]
                if self.src.hw:
                    events += [(PERF_TYPE_HARDWARE, n, c) for n, c in HW_EVENTS.items()]
                for type_, name, config in events:
                    try:
                        fds[name] = _perf_open(type_, config, tid)
                    except OSError:
                        fds[name] = None
                self.threads[tid] = {"cluster": cluster, "role": role, "comm": comm, "fds": fds}

    def stop(self):
        """Per thread: cluster, role, and every counter (None where the source is unavailable)."""
        self._stop.set()
        if self._t.is_alive():
            self._t.join()
        out = []
        for tid, t in sorted(self.threads.items(), key=lambda kv: (kv[1]["cluster"], kv[1]["role"], kv[0])):
            row = {"cluster": t["cluster"], "role": t["role"], "tid": tid}
            if self.inline and t["role"] == "compute":
                row["includes_proxy_loop"] = True  # inline polling: the compute thread ran the proxy
            for name in list(SW_EVENTS) + list(HW_EVENTS):
                fd = t["fds"].get(name)
                row[name] = _read_count(fd) if fd is not None else None
                if fd is not None:
                    os.close(fd)
            out.append(row)
        return out


def summarize(per_run):
    """Sums per (cluster, role) over runs: {"c0 proxy": {...}, ...}; None stays None."""
    acc = {}
    for threads in per_run:
        for t in threads:
            key = f"cluster {t['cluster']} {t['role']}" if t.get("cluster") is not None else t["role"]
            a = acc.setdefault(key, {"threads_seen": 0})
            a["threads_seen"] += 1
            for name in list(SW_EVENTS) + list(HW_EVENTS):
                v = t.get(name)
                if v is None:
                    a.setdefault(name, None)
                else:
                    a[name] = (a.get(name) or 0) + v
    return acc


class Pcm:
    """Intel PCM through pcm-sensor-server (only where probe() found it): system-wide counters
    per core from its Prometheus endpoint, read before and after a measurement."""

    METRICS = {"instructions": "Instructions_Retired_Any", "cycles": "Clock_Unhalted_Thread",
               "l3_misses": "L3_Cache_Misses"}

    def __init__(self, port=9738):
        self.port = port
        self.proc = subprocess.Popen([_which("pcm-sensor-server"), "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)

    def sample(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode(errors="replace")
        out = {k: 0 for k in self.METRICS}
        for line in text.splitlines():
            for key, metric in self.METRICS.items():
                if line.startswith(metric + "{") and 'core="' in line:
                    try:
                        out[key] += float(line.rsplit(" ", 1)[1])
                    except ValueError:
                        pass
        return out

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=5)
