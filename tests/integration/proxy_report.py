"""proxy_report.py: the proxies' report lines of a run (`  proxy C.P: ...`) read back, and the
effect of each fault and fabric knob checked in them. Shared by run_clusters.py and runtime_run.py.
"""
import re


def proxy_lines(out):
    """{(cluster, proxy): {msgs_tx, msgs_rx, frames_tx, frames_rx, retx, dup}}"""
    res = {}
    for c, p, mtx, mrx, ftx, frx, retx, dup in re.findall(
            r"^  proxy (\d+)\.(\d+): msgs tx (\d+) rx (\d+), frames tx (\d+) rx (\d+) .*?, retx (\d+), dup (\d+),",
            out, re.M):
        res[(int(c), int(p))] = dict(msgs_tx=int(mtx), msgs_rx=int(mrx), frames_tx=int(ftx), frames_rx=int(frx),
                                     retx=int(retx), dup=int(dup))
    return res


def check_knobs(asked, out):
    """Each fault and fabric knob shows its effect in the proxies' counters: --drop: every proxy
    retransmitted; --duplicate: every proxy saw duplicates; an MTU above 1500 on a DPDK fabric:
    frames carry whole pieces (frames tx at most twice messages tx + retransmissions; at MTU 1500
    the same pieces would be cut into several fragments each)."""
    bad = []
    prox = proxy_lines(out)
    if len(prox) != asked["clusters"] * asked["proxies"]:
        return [f"{len(prox)} proxy lines, want {asked['clusters'] * asked['proxies']}"]
    for (c, p), v in sorted(prox.items()):
        if asked["drop"] > 0 and v["retx"] == 0:
            bad.append(f"--drop {asked['drop']}: proxy {c}.{p} retransmitted nothing")
        if asked["duplicate"] > 0 and v["dup"] == 0:
            bad.append(f"--duplicate {asked['duplicate']}: proxy {c}.{p} counted no duplicate")
        if asked["mtu"] > 1500 and asked["fabric"] != "udp" and v["frames_tx"] > 2 * (v["msgs_tx"] + v["retx"]):
            bad.append(f"MTU {asked['mtu']}: proxy {c}.{p} sent {v['frames_tx']} frames for {v['msgs_tx']} messages "
                       f"and {v['retx']} retransmissions: pieces were fragmented")
    if asked["drop"] > 0 or asked["duplicate"] > 0:
        print("knobs: " + ", ".join(f"proxy {c}.{p} retx {v['retx']} dup {v['dup']}" for (c, p), v in sorted(prox.items())))
    return bad
