#!/usr/bin/env python3
"""Interoperability test: the iccs stack against the Linux kernel's UDP, on a real link.

Two network namespaces joined by a veth pair:

    ns A (iccs-a-PID): veth iccsa-PID, no kernel address; `iccs-cli interop` runs the iccs stack on
                       it through DPDK's net_af_packet with 10.77.0.2
    ns K (iccs-k-PID): veth iccsk-PID, 10.77.0.1/24; a kernel UDP echo server on 8888 and a
                       kernel UDP client

Both directions, with datagrams that need IP fragmentation each way (1473, 4000, 9000 and 65507
bytes at MTU 1500):
  - the kernel client sends datagrams of 1,100,1472,1473,4000,9000,65507 bytes to 10.77.0.2:7777
    and checks that each echo is byte-identical (the kernel ARPs for 10.77.0.2 first: iccs answers);
  - iccs sends 20 datagrams of those sizes to the kernel echo server and checks each echo.
Checks: every echo arrived intact both ways, `iccs-cli interop` exited 0, the kernel's neighbour
table holds 10.77.0.2 with the iccs port's MAC, iccs answered ARP (arp_tx_reply), and fragments
went both ways (ip_frag_rx and ip_frag_tx > 0).

Usage: interop_afpacket.py ICCS_CLI        (as root; exit 77 = skipped when netns is unavailable)
Internal modes (run inside ns K with `ip netns exec`): --echo-server PORT, --client HOST PORT SIZES.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SIZES = [1, 100, 1472, 1473, 4000, 9000, 65507]
ICCS_IP, KERNEL_IP = "10.77.0.2", "10.77.0.1"
ICCS_PORT, ECHO_PORT = 7777, 8888
SKIP = 77


def pattern(seq, size):
    # distinct per datagram, so a stale echo is not mistaken for the right one
    return bytes(((j * 7 + seq * 13 + size) ^ (j >> 8)) & 0xFF for j in range(size))


# ---------------------------------------------------------------- helpers run inside ns K

def echo_server(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", port))
    print("echo-server: ready", flush=True)
    n = 0
    while True:
        data, addr = s.recvfrom(65535)
        s.sendto(data, addr)
        n += 1
        print(f"echo-server: echoed {len(data)} bytes to {addr[0]}:{addr[1]} (#{n})", flush=True)


def client(host, port, sizes):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", 0))
    s.settimeout(2.0)
    ok = 0
    for seq, size in enumerate(sizes):
        payload = pattern(seq, size)
        got = False
        for attempt in range(1, 4):  # UDP: a few tries
            s.sendto(payload, (host, port))
            deadline = time.time() + 2.0
            while time.time() < deadline:
                try:
                    s.settimeout(max(0.01, deadline - time.time()))
                    data, addr = s.recvfrom(65535)
                except socket.timeout:
                    break
                if addr != (host, port):
                    print(f"client: stray datagram from {addr}", flush=True)
                    continue
                if data == payload:
                    got = True
                    break
                print(f"client: echo of {len(data)} bytes does not match datagram {seq} ({size} bytes)"
                      " (late echo of an earlier one?)", flush=True)
            if got:
                break
            print(f"client: no echo for {size} bytes, try {attempt}", flush=True)
        print(f"client: {size} bytes: {'echo OK' if got else 'NO ECHO'}", flush=True)
        ok += got
    print(f"client: {ok} of {len(sizes)} echoes intact", flush=True)
    return 0 if ok == len(sizes) else 1


# ---------------------------------------------------------------- the test (root namespace)

def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


class Reader(threading.Thread):
    """Collects a child's output lines (and echoes them, prefixed) without blocking it."""

    def __init__(self, proc, tag):
        super().__init__(daemon=True)
        self.proc, self.tag, self.lines = proc, tag, []
        self.cv = threading.Condition()
        self.start()

    def run(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
            print(f"[{self.tag}] {line}", end="", flush=True)
        with self.cv:
            self.cv.notify_all()

    def wait_for(self, regex, timeout):
        end = time.time() + timeout
        with self.cv:
            while True:
                for line in self.lines:
                    m = re.search(regex, line)
                    if m:
                        return m
                if self.proc.poll() is not None and not self.is_alive():
                    return None
                left = end - time.time()
                if left <= 0:
                    return None
                self.cv.wait(min(left, 0.2))

    def text(self):
        with self.cv:
            return "\n".join(self.lines)


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def remove_stale_namespaces():
    """Namespaces of an earlier run that was killed before it could clean up (its pid is gone)."""
    r = run(["ip", "netns", "list"], check=False)
    for m in re.finditer(r"^(iccs-[ak]-(\d+))\b", r.stdout, re.M):
        if not os.path.exists(f"/proc/{m.group(2)}"):
            print(f"removing stale namespace {m.group(1)}")
            run(["ip", "netns", "del", m.group(1)], check=False)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--echo-server":
        echo_server(int(sys.argv[2]))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "--client":
        return client(sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")])
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    cli = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0:
        print("SKIP: network namespaces cannot be created here: not running as root")
        return SKIP
    if shutil.which("ip") is None:
        print("SKIP: network namespaces cannot be created here: the `ip` command (iproute2) is missing")
        return SKIP

    # meson's timeout sends SIGTERM: unwind through `finally` so nothing is left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    remove_stale_namespaces()
    pid = os.getpid()
    ns_a, ns_k = f"iccs-a-{pid}", f"iccs-k-{pid}"
    if_a, if_k = f"iccsa-{pid}"[:15], f"iccsk-{pid}"[:15]
    me = os.path.abspath(__file__)
    py = sys.executable
    procs = []
    created = []
    failures = []
    passed = False
    try:
        r = run(["ip", "netns", "add", ns_a], check=False)
        if r.returncode != 0:
            print(f"SKIP: network namespaces cannot be created here: {r.stderr.strip() or 'ip netns add failed'}")
            return SKIP
        created.append(ns_a)
        run(["ip", "netns", "add", ns_k])
        created.append(ns_k)
        run(["ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_k, "netns", ns_k])
        for ns, ifn in ((ns_a, if_a), (ns_k, if_k)):
            # no IPv6 noise (router solicitations, MLD) on the link
            run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{ifn}.disable_ipv6=1"], check=False)
            run(["ip", "-n", ns, "link", "set", ifn, "mtu", "1500"])
            if shutil.which("ethtool"):
                # DESIGN.md §8: else the kernel leaves UDP checksums partial for the raw reader
                r = run(["ip", "netns", "exec", ns, "ethtool", "-K", ifn, "tx", "off"], check=False)
                if r.returncode != 0:
                    print(f"warning: ethtool -K {ifn} tx off failed: {r.stderr.strip()}")
            else:
                print("warning: ethtool is missing: TX checksum offload stays on; the kernel's unfragmented "
                      "UDP may reach iccs with partial checksums (drop_udp_csum)")
        run(["ip", "-n", ns_k, "addr", "add", f"{KERNEL_IP}/24", "dev", if_k])
        run(["ip", "-n", ns_k, "link", "set", "lo", "up"])
        run(["ip", "-n", ns_a, "link", "set", if_a, "up"])
        run(["ip", "-n", ns_k, "link", "set", if_k, "up"])
        km = re.search(r"link/ether (\S+)", run(["ip", "-n", ns_k, "-o", "link", "show", if_k]).stdout)
        print(f"ns {ns_a}: {if_a} (iccs {ICCS_IP});  ns {ns_k}: {if_k} {KERNEL_IP} "
              f"({km.group(1) if km else '?'})", flush=True)

        # 1. the kernel's echo server
        srv = subprocess.Popen(["ip", "netns", "exec", ns_k, py, "-u", me, "--echo-server", str(ECHO_PORT)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append(srv)
        srv_out = Reader(srv, "kernel echo")
        if srv_out.wait_for(r"echo-server: ready", 10) is None:
            failures.append("the kernel echo server did not start")
            return 1

        # 2. iccs on af_packet; it waits 3 s before sending so the kernel ARPs for it first
        #    (the kernel client starts right away) and the ARP answer is iccs's to give.
        cmd = ["ip", "netns", "exec", ns_a, cli, "interop", "--iface", if_a, "--ip", ICCS_IP,
               "--port", str(ICCS_PORT), "--peer", KERNEL_IP, "--peer-port", str(ECHO_PORT),
               "--send", "20", "--sizes", ",".join(map(str, SIZES)), "--seconds", "30",
               "--expect", str(len(SIZES)), "--send-delay", "3000"]
        print("$", " ".join(cmd), flush=True)
        iccs = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        procs.append(iccs)
        iccs_out = Reader(iccs, "iccs")
        m = iccs_out.wait_for(r"interop: ready on .* mac (\S+)", 30)
        if m is None:
            failures.append("iccs-cli interop did not come up")
            return 1
        iccs_mac = m.group(1).lower()

        # 3. the kernel client
        ccmd = ["ip", "netns", "exec", ns_k, py, "-u", me, "--client", ICCS_IP, str(ICCS_PORT),
                ",".join(map(str, SIZES))]
        cl = subprocess.Popen(ccmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
        procs.append(cl)
        cl_out = Reader(cl, "kernel client")
        try:
            crc = cl.wait(timeout=90)
        except subprocess.TimeoutExpired:
            crc = None
        cl_out.join(5)
        if crc != 0:
            failures.append(f"kernel client: not every echo came back intact (exit {crc})")

        # the kernel's neighbour entry for iccs, before anything ages out
        neigh = run(["ip", "-n", ns_k, "neigh", "show", "dev", if_k]).stdout
        print("kernel neighbours:", neigh.strip() or "(none)", flush=True)
        if not re.search(rf"^{re.escape(ICCS_IP)} .*lladdr {re.escape(iccs_mac)}\b", neigh, re.M | re.I):
            failures.append(f"the kernel's ARP table has no {ICCS_IP} lladdr {iccs_mac}")

        # 4. iccs finishes by itself once its 20 datagrams came back and the kernel's 7 arrived
        try:
            irc = iccs.wait(timeout=60)
        except subprocess.TimeoutExpired:
            irc = None
        iccs_out.join(5)
        out = iccs_out.text()
        if irc != 0:
            failures.append(f"iccs-cli interop exited {irc}")
        fin = re.search(r"^interop: sent (\d+), echoed back (\d+), received (\d+), echoed (\d+)", out, re.M)
        if not fin:
            failures.append("iccs printed no final `interop: sent ...` line")
        else:
            sent, back, rcvd, echoed = map(int, fin.groups())
            if sent != 20 or back != 20:
                failures.append(f"iccs -> kernel: sent {sent}, echoed back {back} (want 20, 20)")
            if rcvd < len(SIZES) or echoed != rcvd:
                failures.append(f"kernel -> iccs: received {rcvd}, echoed {echoed} (want >= {len(SIZES)}, all)")

        def counter(name):
            c = re.search(rf"^\s+{name}\s+(\d+)\s*$", out, re.M)
            return int(c.group(1)) if c else 0

        for name in ("ip_frag_rx", "ip_frag_tx", "ip_reass_ok", "arp_rx_request", "arp_tx_reply"):
            if counter(name) == 0:
                failures.append(f"iccs counter {name} is 0")
        if counter("drop_udp_csum"):
            failures.append(f"iccs dropped {counter('drop_udp_csum')} datagrams for bad UDP checksums")
        if "leak" in out:
            failures.append("iccs reported leaked buffers")
        left = [d for d in os.listdir("/var/run/dpdk")
                if d == f"iccs-interop-{iccs.pid}"] if os.path.isdir("/var/run/dpdk") else []
        # (iccs-cli runs under `ip netns exec`, which execs it: same pid)
        if left:
            failures.append(f"EAL runtime dir left behind: /var/run/dpdk/{left[0]}")
        passed = not failures
        return 0 if passed else 1
    finally:
        for p in reversed(procs):
            stop(p)
        for ns in reversed(created):
            run(["ip", "netns", "del", ns], check=False)
        for f in failures:
            print("FAILED:", f, flush=True)
        if passed:
            print("PASS: iccs and the kernel exchanged UDP both ways (with fragmentation) and iccs answered ARP",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
