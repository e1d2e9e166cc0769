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


def fault_lines(out):
    """{(cluster, proxy): (dropped, duplicated, frames received)} from the `  faults C.P:` lines."""
    return {(int(c), int(p)): (int(d), int(u), int(n)) for c, p, d, u, n in re.findall(
        r"^  faults (\d+)\.(\d+): dropped (\d+) and duplicated (\d+) of (\d+) frames received", out, re.M)}


def share_ok(count, frames, p):
    """The fault injection's count against its probability: between half and twice p x frames, or
    within 4.5 standard deviations of it (a binomial count: with p x frames = 26, 13 is 2.5 sigma
    low, which the band alone refused about once in 170 proxies; 4.5 sigma, about once in 300,000);
    a knob ignored gives 0, refused whenever p x frames >= 10 (P(0) = e^-10 for a working knob)."""
    if frames <= 0:
        return False
    mean = p * frames
    sigma = (frames * p * (1 - p)) ** 0.5
    if count == 0 and mean >= 10:
        return False
    return 0.5 * mean <= count <= 2 * mean + 10 or abs(count - mean) <= 4.5 * sigma


def check_knobs(asked, out):
    """Each fault and fabric knob shows its effect in the proxies' counters: --drop P: every proxy's
    fault injection dropped about P of the frames it received (the `faults` line) and it
    retransmitted; --duplicate P: about P duplicated and it counted duplicates; an MTU above 1500
    on a DPDK fabric: frames carry whole pieces (frames tx at most twice messages tx +
    retransmissions; at MTU 1500 the same pieces would be cut into several fragments each)."""
    bad = []
    prox = proxy_lines(out)
    faults = fault_lines(out)
    if len(prox) != asked["clusters"] * asked["proxies"]:
        return [f"{len(prox)} proxy lines, want {asked['clusters'] * asked['proxies']}"]
    for (c, p), v in sorted(prox.items()):
        if asked["drop"] > 0 or asked["duplicate"] > 0:
            if (c, p) not in faults:
                bad.append(f"proxy {c}.{p}: no faults line although --drop/--duplicate was given")
                continue
            dropped, duplicated, frames = faults[(c, p)]
            if asked["drop"] > 0 and not share_ok(dropped, frames, asked["drop"]):
                bad.append(f"--drop {asked['drop']}: proxy {c}.{p} dropped {dropped} of {frames} frames")
            if asked["duplicate"] > 0 and not share_ok(duplicated, frames, asked["duplicate"]):
                bad.append(f"--duplicate {asked['duplicate']}: proxy {c}.{p} duplicated {duplicated} of {frames} frames")
        elif (c, p) in faults:
            bad.append(f"proxy {c}.{p}: fault injection reported although none was asked")
        if asked["drop"] > 0 and v["retx"] == 0:
            bad.append(f"--drop {asked['drop']}: proxy {c}.{p} retransmitted nothing")
        if asked["duplicate"] > 0 and v["dup"] == 0:
            bad.append(f"--duplicate {asked['duplicate']}: proxy {c}.{p} counted no duplicate")
        if asked["mtu"] > 1500 and asked["fabric"] != "udp" and v["frames_tx"] > 2 * (v["msgs_tx"] + v["retx"]):
            bad.append(f"MTU {asked['mtu']}: proxy {c}.{p} sent {v['frames_tx']} frames for {v['msgs_tx']} messages "
                       f"and {v['retx']} retransmissions: pieces were fragmented")
    if asked["drop"] > 0 or asked["duplicate"] > 0:
        print("knobs: " + ", ".join(f"proxy {c}.{p} retx {v['retx']} dup {v['dup']} faults {faults.get((c, p))}"
                                    for (c, p), v in sorted(prox.items())))
    return bad
