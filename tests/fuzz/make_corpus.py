#!/usr/bin/env python3
"""Seed inputs for the libFuzzer targets: tests/fuzz/corpus/<target>/<seed>.bin.

Rerun from the repository root after changing a target's input format:

    python3 tests/fuzz/make_corpus.py

It (re)writes only the seeds it knows (stdlib only, deterministic output). The formats are
described at the top of each tests/fuzz/fuzz_<target>.cpp. The stack under test is
02:00:00:00:00:02 / 10.0.0.2; its peer is 02:00:00:00:00:01 / 10.0.0.1.
"""

import os
import struct

MAC_A = bytes([2, 0, 0, 0, 0, 1])
MAC_B = bytes([2, 0, 0, 0, 0, 2])
BCAST_MAC = b"\xff" * 6
IP_A = bytes([10, 0, 0, 1])
IP_B = bytes([10, 0, 0, 2])
IP_BCAST = b"\xff" * 4


def csum(data: bytes) -> int:
    """RFC 1071 one's-complement checksum (as it goes on the wire)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(dst: bytes, src: bytes, ethertype: int) -> bytes:
    return dst + src + struct.pack("!H", ethertype)


def ipv4(src: bytes, dst: bytes, payload_len: int, proto: int = 17, ident: int = 1, frag: int = 0,
         ihl: int = 5) -> bytes:
    opts = b"\x01" * (ihl * 4 - 21) + b"\x00" if ihl > 5 else b""
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + payload_len, ident, frag, 64, proto, 0, src, dst) + opts
    return h[:10] + struct.pack("!H", csum(h)) + h[12:]


def udp(src: bytes, dst: bytes, sport: int, dport: int, payload: bytes) -> bytes:
    length = 8 + len(payload)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, length)
    h = struct.pack("!HHHH", sport, dport, length, 0)
    c = csum(pseudo + h + payload) or 0xFFFF
    return struct.pack("!HHHH", sport, dport, length, c) + payload


def ip_udp(payload: bytes, dport: int = 7, sport: int = 5000, src: bytes = IP_A, dst: bytes = IP_B,
           ihl: int = 5) -> bytes:
    u = udp(src, dst, sport, dport, payload)
    return ipv4(src, dst, len(u), ihl=ihl) + u


def arp(op: int, sha: bytes, spa: bytes, tha: bytes, tpa: bytes) -> bytes:
    return struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, sha, spa, tha, tpa)


def pad60(frame: bytes) -> bytes:
    return frame + b"\0" * max(0, 60 - len(frame))


def pattern(n: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def seeds_eth():
    yield "arp-request", b"\x00" + pad60(eth(BCAST_MAC, MAC_A, 0x0806) + arp(1, MAC_A, IP_A, b"\0" * 6, IP_B))
    yield "arp-reply", b"\x00" + pad60(eth(MAC_B, MAC_A, 0x0806) + arp(2, MAC_A, IP_A, MAC_B, IP_B))
    yield "udp-echo", b"\x00" + eth(MAC_B, MAC_A, 0x0800) + ip_udp(b"hello, fuzz", 7)
    yield "udp-echo-padded", b"\x00" + pad60(eth(MAC_B, MAC_A, 0x0800) + ip_udp(b"hi", 7))
    yield "udp-discard-cut", b"\x3d" + eth(MAC_B, MAC_A, 0x0800) + ip_udp(pattern(100), 9)
    yield "udp-echocopy-large", b"\x00" + eth(MAC_B, MAC_A, 0x0800) + ip_udp(pattern(1200, 3), 19)
    yield "udp-options", b"\x0e" + eth(MAC_B, MAC_A, 0x0800) + ip_udp(pattern(40), 7, ihl=6)
    yield "udp-broadcast", b"\x00" + eth(BCAST_MAC, MAC_A, 0x0800) + ip_udp(b"to all", 7, dst=IP_BCAST)
    u = udp(IP_A, IP_B, 5000, 7, pattern(64))
    yield "ip-first-fragment", b"\x00" + eth(MAC_B, MAC_A, 0x0800) + ipv4(IP_A, IP_B, 32, frag=0x2000) + u[:32]


def seeds_arp():
    req = arp(1, MAC_A, IP_A, b"\0" * 6, IP_B)
    yield "request", b"\x00" + b"\x01" + req
    # a datagram for 10.0.0.1 waits for ARP; the reply releases it
    yield "pending-then-reply", b"\x00" + b"\x04" + arp(1, bytes([2, 0, 0, 0, 0, 5]), bytes([10, 0, 0, 5]),
                                                         b"\0" * 6, IP_B) + b"\x00" + arp(2, MAC_A, IP_A, MAC_B, IP_B)
    yield "mixed", (b"\x03"
                    + b"\x01" + arp(1, MAC_A, IP_A, b"\0" * 6, bytes([10, 0, 0, 7]))      # for another host
                    + b"\x0a" + arp(2, bytes([2, 0, 0, 0, 0, 9]), bytes([10, 0, 0, 9]),   # reply, static entry
                                    MAC_B, IP_B)
                    + b"\x0e" + arp(1, MAC_A, IP_A, b"\0" * 6, IP_B)                      # retries, split frame
                    + b"\x38" + arp(1, bytes([2, 0, 0, 0, 0, 0x13]), bytes([10, 0, 0, 0x13]), b"\0" * 6, IP_B)
                    + b"\x00" + req[:20])                                                  # truncated
    yield "gratuitous", b"\x00" + b"\x01" + arp(1, MAC_A, IP_A, b"\0" * 6, IP_A) + b"\x00" + arp(
        2, MAC_A, IP_A, BCAST_MAC, IP_A)


def seeds_ipv4():
    yield "udp-echo", b"\x00\x00" + ip_udp(b"hello, ipv4", 7)
    p = bytearray(ip_udp(b"fix me", 9))
    p[10:12] = b"\0\0"
    p[26:28] = b"\0\0"
    yield "fixups", b"\x0f\x00" + bytes(p)
    yield "options-15", b"\x00\x00" + ip_udp(pattern(20), 7, ihl=15)
    yield "broadcast", b"\x40\x00" + ip_udp(b"bcast", 7, dst=IP_BCAST)
    yield "large-echo-576", b"\x00\x00" + ip_udp(pattern(3000, 1), 7)
    yield "large-echocopy-1280-cut", b"\x30\x3b" + ip_udp(pattern(2000, 2), 19)
    u = udp(IP_A, IP_B, 5000, 7, pattern(100))
    yield "first-fragment", b"\x80\x00" + ipv4(IP_A, IP_B, 64, frag=0x2000) + u[:64]
    yield "last-fragment", b"\x00\x00" + ipv4(IP_A, IP_B, len(u) - 64, frag=8) + u[64:]
    yield "not-udp", b"\x00\x00" + ipv4(IP_A, IP_B, 8, proto=6) + b"\0" * 8


def seeds_udp():
    yield "echo", b"\x00\x00" + udp(IP_A, IP_B, 5000, 7, b"hello, udp")
    yield "fixups-frag24", b"\x07\x30" + struct.pack("!HHHH", 5000, 0, 0, 0) + pattern(200)
    yield "discard-frag1000-cut", b"\x0f\x9d" + struct.pack("!HHHH", 5000, 0, 0, 0) + pattern(3000, 5)
    yield "echocopy-frag64-reverse", b"\x37\x4e" + struct.pack("!HHHH", 5000, 0, 0, 0) + pattern(500, 7)
    yield "broadcast", b"\x43\x00" + struct.pack("!HHHH", 5000, 7, 0, 0) + b"to all"
    yield "unbound-port", b"\x1f\x00" + struct.pack("!HHHH", 5000, 0, 0, 0) + b"nobody home"
    yield "large-echo-576", b"\x87\x00" + struct.pack("!HHHH", 5000, 0, 0, 0) + pattern(4000, 9)


def frag(b0: int, off_units: int, length: int, dt: int = 0, split: int = 0) -> bytes:
    return struct.pack("!BHHBB", b0, off_units, length, dt, split)


def seeds_reassembly():
    MF, STACK, SLICED, TWICE = 0x04, 0x08, 0x10, 0x20
    yield "two-in-order", frag(MF, 0, 16) + frag(0, 2, 10)
    yield "two-via-stack", frag(MF | STACK, 0, 16) + frag(STACK, 2, 10)
    yield "reverse-dup-sliced", frag(SLICED, 4, 5) + frag(MF | SLICED | TWICE, 2, 16) + frag(MF | SLICED, 0, 16, 0, 0x23)
    yield "overlap", frag(MF, 0, 24) + frag(MF, 1, 16) + frag(0, 3, 8)
    yield "timeout", frag(MF, 0, 16) + frag(0, 2, 8, 255) + frag(MF | 1, 0, 8, 1) + frag(1, 1, 8)
    yield "keys-options", (frag(MF | 0xC0, 0, 64) + frag(MF | 1, 0, 8) + frag(MF | 2 | 0x80, 0, 8) + frag(3, 1, 1)
                           + frag(2, 1, 3) + frag(1, 1, 100) + frag(MF | 3, 0, 8) + frag(0x40, 8, 30))
    yield "oversize", frag(MF, 0, 8) + frag(0, 0x1FFF, 100)
    yield "jumbo", frag(MF, 0, 8000) + frag(MF, 1000, 8000) + frag(0, 2000, 1000, 3, 0x9B)
    yield "not-a-fragment", frag(0, 0, 40) + frag(STACK, 0, 40)


def slidwin(h0: int, iss: int, bufs: int, limit: int, seed: int, ops: bytes) -> bytes:
    return struct.pack("!BIBBB", h0, iss, bufs, limit, seed) + ops


def seeds_slidwin():
    B = 0x08  # op bit: side B
    steps = b"\x07" * 6
    clean = b"\x00\x14" + bytes([B, 0x28]) + b"\x04" + b"\x00\x50\x00\x60" + steps
    yield "clean", slidwin(0x00, 0, 4 | 4 << 3, 0, 1, clean)
    yield "wrap", slidwin(0x00, 0xFFFFFFFA, 3 | 3 << 3 | 1 << 6, 0, 2, (b"\x00\x10" * 12) + steps + b"\x03\xff" + steps)
    lossy = b"".join(bytes([0x00 | (i & 1) << 4, 0x21 + 2 * i]) + struct.pack("!H", 1000 + 500 * i) for i in range(6))
    yield "lossy-two-subs-big", slidwin(0x78, 12345, 5 | 5 << 3, 0, 3, lossy + steps + b"\x03\x80" + steps)
    flow = bytes([0x06 | B | 1 << 4]) + b"\x00\x20" * 10 + steps + bytes([0x05 | B | 1 << 4]) + steps + bytes(
        [0x05 | B]) + steps
    yield "flow-control", slidwin(0x00, 7, 4 | 2 << 3, 0, 4, flow)
    # slidwin v3: 40-byte header, the sender's token last (inject flag 0x20 puts the real one in);
    # a SYN carries a 16-byte handshake block (nonce, echo)
    dgram = struct.pack("!BBHIIHHQIIQ", 3, 0x03, 0, 0, 0, 16, 0, 0, 0, 0, 0) + b"forged payload"
    inject = bytes([0x02, 0x3D, len(dgram) - 40]) + dgram
    inject_bad_token = bytes([0x02, 0x1D, len(dgram) - 40]) + dgram
    ack = struct.pack("!BBHIIHHQIIQ", 3, 0x06, 0, 0, 0, 0, 0, 1, 0, 0, 0)
    inject_ack = bytes([0x02 | B, 0x3D, 0]) + ack
    syn = struct.pack("!BBHIIHHQIIQ", 3, 0x20, 0, 5, 0, 0, 0, 0, 0, 0, 0x1122334455667788) + struct.pack(
        "!QQ", 0x5EED, 0)
    inject_syn = bytes([0x02, 0x45, 16]) + syn  # a well-formed SYN of a made-up token
    synack = struct.pack("!BBHIIHHQIIQ", 3, 0x22, 0, 5, 0, 0, 0, 0, 0, 0, 0x1122334455667788) + struct.pack(
        "!QQ", 0x5EED, 0x1234)
    inject_synack_wrong = bytes([0x02, 0x45, 16]) + synack  # answers a challenge wrongly
    inject_synack_proving = bytes([0x02, 0xE5, 16]) + synack  # the real token, acking the ISN, echoing the nonce
    yield "adversarial", slidwin(0x01, 100, 4 | 4 << 3, 0, 5, inject + b"\x04\x00\x30\x04" + inject_ack + steps)
    yield "adversarial-tight-pool", slidwin(0x01, 0, 6 | 6 << 3, 1, 6, (b"\x00\xf0" * 20) + inject + steps)
    yield "auth-lossy", slidwin(0xB8, 4242, 5 | 5 << 3, 0, 10, lossy + steps + b"\x03\x80" + steps)
    yield "auth-encrypt-lossy", slidwin(0xB8, 0xFFFFFFF0, 5 | 5 << 3, 0, 13, lossy + steps + b"\x03\x80" + steps)
    yield "auth-encrypt-adversarial", slidwin(0x81, 77, 4 | 4 << 3, 0, 11,
                                              b"\x00\x30" + steps + inject + inject_ack + steps)
    yield "adversarial-wrong-token", slidwin(0x01, 9, 4 | 4 << 3, 0, 9,
                                             b"\x00\x30" + steps + inject_bad_token + inject_syn + steps + inject + steps)
    # The handshake's states: a made-up SYN before the real one (tentative, replaced), the same
    # during and after it (a restart challenge, answered wrongly, rate-limited), and an insider's
    # proving SYN|ACK.
    yield "handshake-forged-syn-first", slidwin(0x01, 31, 4 | 4 << 3, 0, 14, inject_syn + b"\x00\x20" + steps)
    yield "handshake-challenge", slidwin(0x01, 32, 4 | 4 << 3, 0, 15, b"\x00\x20" + steps + inject_syn +
                                         inject_synack_wrong + inject_syn + steps + b"\x03\xff" + inject_syn + steps)
    yield "handshake-proving-insider", slidwin(0x01, 33, 4 | 4 << 3, 0, 16, inject_synack_proving + b"\x00\x20" +
                                               steps + inject_synack_proving + steps)
    yield "auth-handshake-forged", slidwin(0x81, 34, 4 | 4 << 3, 0, 17, inject_syn + b"\x00\x20" + steps +
                                           inject_synack_wrong + steps)
    yield "mtu576-big", slidwin(0x0A, 0, 4 | 4 << 3, 0, 7, b"\x00\x01\x10\x00" + bytes([B, 0x01, 0x05, 0xdc]) + steps)
    yield "mtu9000-reorder", slidwin(0x14, 0, 4 | 4 << 3, 0, 8, b"\x00\x40" * 8 + b"\x14" + steps)


TARGETS = {
    "eth": seeds_eth,
    "arp": seeds_arp,
    "ipv4": seeds_ipv4,
    "udp": seeds_udp,
    "reassembly": seeds_reassembly,
    "slidwin": seeds_slidwin,
}


def main() -> None:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for target, gen in TARGETS.items():
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        n = 0
        for name, data in gen():
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                f.write(data)
            n += 1
        print(f"{target}: {n} seeds in {os.path.relpath(d)}")


if __name__ == "__main__":
    main()
