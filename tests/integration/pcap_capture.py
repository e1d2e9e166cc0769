#!/usr/bin/env python3
"""Integration test of --pcap (proxy/pcapng.hpp) and the Wireshark dissector (tools/wireshark/iccs.lua).

Usage: pcap_capture.py ICCS_CLI SOURCE_ROOT --fabric memif|af_packet

1. A two-cluster run (2 proxies each) with --pcap DIR: every proxy's file is read by tshark with
   IPv4 and UDP checksum validation on: no malformed frame, no bad IPv4 header checksum, no bad UDP
   checksum; the inbound and outbound frames of each file equal the proxy's port counters
   ("frames tx N rx M") exactly (no fault injection in this run).
2. With the Lua dissector: per direction and sub-connection, DATA sequence numbers increase
   strictly except on retransmissions (RETX flag, a seq seen before), acks never go back, the
   convergence header is sane (known type, piece_idx < piece_cnt, src/dst clusters match the IP
   addresses, DATA for ports 1000.. of the compute threads with lengths in the run's range), and
   the retransmissions the sender flagged equal its slidwin retx counter.
   memif sends messages whole (stripe threshold above the largest), so datagrams of up to 9 KB
   cross as IPv4 fragments (Wireshark reassembles them; checksums hold on every fragment and on the
   reassembled UDP datagram); af_packet stripes them into MTU-sized pieces (piece_cnt > 1).
3. memif only (seconds): a tiny [machine] pcap_max_bytes stops the capture with one line naming the
   file and the limit, and the file stays complete; --pcap with fabric udp and an unwritable
   directory stop at start with a clear message. Then a run with [machine] udp_checksum =
   "off-on-memif": it passes, every UDP datagram in the captures has checksum 0 (RFC 768: none)
   and tshark finds no malformed or bad frame.
tshark missing and not installable (./iccs installs it for the tests): exit 77 (meson: skipped).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
MESSAGES = 300
MAX_SIZE = 9000
THREADS = 2


def tshark(*args):
    r = subprocess.run(["tshark", *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"tshark {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return [l for l in r.stdout.splitlines() if l.strip()]


# Checksum validation on. Without the dissector the iccs port is decoded as plain data: else
# Wireshark's heuristic UDP dissectors (CLASSIC-STUN, ...) claim some iccs datagrams and call them
# malformed, which says nothing about the frames.
CHECKS = ["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"]
PLAIN = CHECKS + ["-d", "udp.port==9410,data"]


def run(cli, fabric, pcap_dir, extra=()):
    cmd = [cli, "run", "alltoall", "--clusters", "2", "--proxies", "2", "--threads", str(THREADS),
           "--messages", str(MESSAGES), "--min-size", "1", "--max-size", str(MAX_SIZE), "--fabric", fabric,
           "--pcap", pcap_dir, "--timeout", "120", *extra]
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    print(out)
    return p.returncode, out


def proxy_counters(out):
    """{(cluster, proxy): (frames tx, frames rx, retx)}"""
    res = {}
    for c, p, tx, rx, retx in re.findall(
            r"^  proxy (\d+)\.(\d+): .*frames tx (\d+) rx (\d+) .*?retx (\d+)", out, re.M):
        res[(int(c), int(p))] = (int(tx), int(rx), int(retx))
    return res


def check_file(path, counters, lua, failures, fabric):
    name = os.path.basename(path)
    tx, rx, retx = counters
    # 1. tshark reads it, checksums validated
    dirs = tshark("-r", path, *PLAIN, "-T", "fields", "-e", "frame.packet_flags_direction")
    n_in = sum(1 for d in dirs if int(d, 16) & 3 == 1)
    n_out = sum(1 for d in dirs if int(d, 16) & 3 == 2)
    bad = tshark("-r", path, *PLAIN, "-Y",
                 '_ws.malformed || ip.checksum.status == "Bad" || udp.checksum.status == "Bad"')
    good_udp = tshark("-r", path, *PLAIN, "-Y", 'udp.checksum.status == "Good"', "-T", "fields", "-e", "frame.number")
    print(f"{name}: {len(dirs)} frames ({n_out} out, {n_in} in); proxy counters: frames tx {tx} rx {rx}; "
          f"malformed or bad checksum: {len(bad)}; UDP datagrams with a good checksum: {len(good_udp)}")
    if len(dirs) != n_in + n_out:
        failures.append(f"{name}: {len(dirs) - n_in - n_out} frames without a direction")
    if (n_out, n_in) != (tx, rx):
        failures.append(f"{name}: captured {n_out} out / {n_in} in, the proxy counted frames tx {tx} rx {rx}")
    if bad:
        failures.append(f"{name}: {len(bad)} malformed or bad-checksum frames, e.g. {bad[:3]}")
    if not good_udp:
        failures.append(f"{name}: no UDP datagram with a verified checksum (is validation on?)")
    frags = tshark("-r", path, *PLAIN, "-Y", "ip.flags.mf == 1 || ip.frag_offset > 0", "-T", "fields",
                   "-e", "frame.number")
    print(f"{name}: {len(frags)} IPv4 fragments")
    if fabric == "memif" and not frags:
        failures.append(f"{name}: no IPv4 fragment (messages up to {MAX_SIZE} bytes were sent whole)")

    # 2. the dissector
    fields = ["frame.packet_flags_direction", "ip.src", "ip.dst", "iccs.subconn", "iccs.flags", "iccs.seq", "iccs.ack",
              "iccs.retransmission", "iccs.conv.type", "iccs.conv.src_cluster", "iccs.conv.dst_cluster",
              "iccs.conv.dst_port", "iccs.conv.piece_idx", "iccs.conv.piece_cnt", "iccs.conv.msg_len"]
    rows = tshark("-X", f"lua_script:{lua}", "-r", path, *CHECKS, "-Y", "iccs", "-T", "fields", "-E", "separator=;",
                  "-E", "occurrence=l", *sum((["-e", f] for f in fields), []))
    streams = {}  # (dir, src, dst, subconn) -> {"max": seq, "seen": set, "ack": last ack}
    data = retx_flagged_out = seen_again = striped = 0
    problems = []
    for row in rows:
        v = row.split(";")
        if len(v) != len(fields):
            problems.append(f"unexpected row {row!r}")
            continue
        d, src, dst, sc, flags, seq, ack, _, ty, scl, dcl, dport, pidx, pcnt, mlen = v
        d, flags, sc = int(d, 16) & 3, int(flags, 16), int(sc)
        key = (d, src, dst, sc)
        st = streams.setdefault(key, {"max": -1, "seen": set(), "ack": -1})
        if flags & 0x02:  # ACK valid: cumulative acks never go back
            if int(ack) < st["ack"]:
                problems.append(f"{key}: ack {ack} after {st['ack']}")
            st["ack"] = max(st["ack"], int(ack))
        if not flags & 0x01:
            continue
        data += 1
        seq, is_retx = int(seq), bool(flags & 0x08)
        if seq in st["seen"]:
            seen_again += 1
            if not is_retx:
                problems.append(f"{key}: seq {seq} again without the RETX flag")
        elif seq <= st["max"] and not is_retx:
            problems.append(f"{key}: seq {seq} after {st['max']}, not a retransmission")
        elif is_retx and d == 2:
            problems.append(f"{key}: seq {seq} sent with RETX but never sent before")
        st["seen"].add(seq)
        st["max"] = max(st["max"], seq)
        if is_retx and d == 2:
            retx_flagged_out += 1
        ty, pidx, pcnt = int(ty), int(pidx), int(pcnt)
        striped += pcnt > 1
        if not 1 <= ty <= 7:
            problems.append(f"{key}: seq {seq}: unknown convergence type {ty}")
        if not pidx < pcnt:
            problems.append(f"{key}: seq {seq}: piece {pidx} of {pcnt}")
        if int(scl) != int(src.split(".")[2]) or int(dcl) != int(dst.split(".")[2]):
            problems.append(f"{key}: seq {seq}: clusters {scl}>{dcl} do not match the addresses {src}>{dst}")
        if ty == 1 and not (1000 <= int(dport) < 1000 + THREADS and 1 <= int(mlen) <= MAX_SIZE):
            problems.append(f"{key}: seq {seq}: DATA to port {dport}, length {mlen}")
    bad = tshark("-X", f"lua_script:{lua}", "-r", path, *CHECKS, "-Y",
                 '_ws.malformed || _ws.expert.severity >= "error" || ip.checksum.status == "Bad" || '
                 'udp.checksum.status == "Bad"')
    if bad:
        problems.append(f"{len(bad)} malformed or error frames with the dissector, e.g. {bad[:3]}")
    longest = max((len(s["seen"]) for s in streams.values()), default=0)
    print(f"{name}: dissector: {len(rows)} iccs datagrams, {data} with DATA in {len(streams)} streams "
          f"(longest {longest} seqs), {seen_again} seqs seen again, {retx_flagged_out} sent with RETX "
          f"(proxy retx counter {retx}), {striped} pieces of striped messages, {len(problems)} problems")
    if fabric == "af_packet" and striped == 0:
        failures.append(f"{name}: no piece of a striped message decoded")
    failures += [f"{name}: {p}" for p in problems[:10]]
    if data == 0 or longest < 10:
        failures.append(f"{name}: the dissector decoded too little ({data} DATA datagrams)")
    if retx_flagged_out != retx:
        failures.append(f"{name}: {retx_flagged_out} datagrams sent with RETX, the proxy counted retx {retx}")


def main():
    cli, root = sys.argv[1], sys.argv[2]
    fabric = sys.argv[sys.argv.index("--fabric") + 1]
    lua = os.path.join(root, "tools", "wireshark", "iccs.lua")
    if shutil.which("tshark") is None:
        print("SKIP: tshark is not installed (./iccs test installs the Debian package tshark when it can; "
              "apt-get install tshark)")
        return SKIP
    if fabric == "af_packet" and os.geteuid() != 0:
        print("SKIP: fabric af_packet needs root (a Linux bridge and veths)")
        return SKIP
    print(tshark("--version")[0])
    failures = []
    with tempfile.TemporaryDirectory(prefix="iccs-pcap-") as tmp:
        pcap_dir = os.path.join(tmp, "cap")  # created by the run
        # memif: messages whole, so IPv4 fragments; af_packet: striped into pieces
        rc, out = run(cli, fabric, pcap_dir, ["--stripe-threshold", "16000"] if fabric == "memif" else [])
        if rc != 0 or out.count(": PASS") != 2:
            failures.append(f"the run failed (exit {rc})")
        counters = proxy_counters(out)
        if len(counters) != 4:
            failures.append(f"expected 4 proxy lines, found {sorted(counters)}")
        for (c, p), ctr in sorted(counters.items()):
            path = os.path.join(pcap_dir, f"cluster{c}-proxy{p}.pcapng")
            if not os.path.exists(path):
                failures.append(f"{path} was not written")
                continue
            check_file(path, ctr, lua, failures, fabric)

        if fabric == "memif":
            # 3. the size limit: capture stops, says so once per file, the file stays readable
            small = os.path.join(tmp, "small")
            rc, out = run(cli, fabric, small, ["--set", "machine.pcap_max_bytes=65536"])
            if rc != 0:
                failures.append(f"the run with a 64 KiB capture limit failed (exit {rc})")
            stops = re.findall(r"^iccs: capture (\S+) reached its limit of 65536 bytes", out, re.M)
            if len(stops) != 4:
                failures.append(f"expected 4 'reached its limit' lines, found {len(stops)}")
            for f in sorted(os.listdir(small)):
                path = os.path.join(small, f)
                size = os.path.getsize(path)
                n = len(tshark("-r", path, *PLAIN, "-T", "fields", "-e", "frame.number"))
                bad = tshark("-r", path, *PLAIN, "-Y", "_ws.malformed")
                print(f"{f}: {size} bytes, {n} frames, {len(bad)} malformed")
                if size > 65536 or n == 0 or bad:
                    failures.append(f"{f}: {size} bytes (limit 65536), {n} frames, {len(bad)} malformed")
            if not re.search(r"capture \d\.\d: .*frames, stopped at \[machine\] pcap_max_bytes = 65536: \d+ frames "
                             r"missed", out):
                failures.append("the report does not say the capture stopped")
            # 4. [machine] udp_checksum = "off-on-memif": every datagram goes with checksum 0
            # (RFC 768: none), the run passes, and tshark reads the captures without a bad or
            # malformed frame (a zero checksum is not checked: "not present")
            nosum = os.path.join(tmp, "nosum")
            rc, out = run(cli, fabric, nosum, ["--stripe-threshold", "16000",
                                               "--set", "machine.udp_checksum=off-on-memif"])
            if rc != 0 or out.count(": PASS") != 2:
                failures.append(f"the run with udp_checksum = off-on-memif failed (exit {rc})")
            for f in sorted(os.listdir(nosum)) if os.path.isdir(nosum) else []:
                path = os.path.join(nosum, f)
                sums = tshark("-r", path, *PLAIN, "-Y", "udp", "-T", "fields", "-e", "udp.checksum")
                bad = tshark("-r", path, *PLAIN, "-Y",
                             '_ws.malformed || ip.checksum.status == "Bad" || udp.checksum.status == "Bad"')
                nonzero = [x for x in sums if int(x, 16) != 0]
                print(f"{f}: {len(sums)} UDP datagrams, {len(nonzero)} with a checksum, {len(bad)} malformed or bad")
                if not sums or nonzero or bad:
                    failures.append(f"{f} (udp_checksum off-on-memif): {len(sums)} datagrams, {len(nonzero)} with "
                                    f"a checksum (want 0), {len(bad)} malformed or bad, e.g. {(nonzero + bad)[:3]}")
            if not os.path.isdir(nosum) or len(os.listdir(nosum)) != 4:
                failures.append(f"udp_checksum off-on-memif: expected 4 captures in {nosum}")
            # start-up errors
            for args, want in ((["--fabric", "udp", "--pcap", os.path.join(tmp, "u")], "fabric udp"),
                               (["--pcap", "/proc/iccs-cannot-be-here"], "--pcap /proc/iccs-cannot-be-here")):
                cmd = [cli, "run", "alltoall", "--clusters", "2", "--messages", "1", *args]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
                print("$", " ".join(cmd), f"-> exit {p.returncode}:", p.stderr.strip())
                if p.returncode == 0 or want not in p.stderr:
                    failures.append(f"{' '.join(args)}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
