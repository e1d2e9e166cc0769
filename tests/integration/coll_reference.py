"""coll_reference.py: what `iccs run collectives` must print, computed here from the definitions of
the collectives (not by group/): every rank's results of the plan in group/testing/coll_check.cpp
(the same inputs, roots and counts), as the CRC-32 per collective each thread prints, the WAN
data bytes of MagPIe's rule (each item once to each site that must receive it: what group/ prints
as wan_bytes_min and the hierarchical family must send exactly), and the least WAN data bytes any
algorithm can send (`floor`, below the former for allreduce and scan: see expected()).
And for `iccs run ordered`: the hash of a delivered sequence and the replay of the replicated
ledger from the senders' order thread 0.0 prints. Used by group_run.py.
"""
import functools
import operator
import zlib
from array import array

KINDS = ["bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "reduce_scatter", "scan"]
ALL_KINDS = ["barrier"] + KINDS
_cycles = {}


def gen(rank, n, salt):
    """gen(rank, i, salt) for i < n: ((rank * 1000003 + i * 7919 + salt * 31) mod 2001) - 1000, which
    repeats every 2001 elements (7919 = 1916 mod 2001)."""
    k0 = (rank * 1000003 + salt * 31) % 2001
    cyc = _cycles.get(k0)
    if cyc is None:
        cyc = _cycles[k0] = [(k0 + 1916 * j) % 2001 - 1000 for j in range(2001)]
    reps = n // 2001 + 1
    return (cyc * reps)[:n]


def _colwise(rows, fn):
    return [fn(col) for col in zip(*rows)] if rows and rows[0] else []


class Digests:
    def __init__(self):
        self.crc = {k: 0 for k in KINDS}

    def add(self, kind, values, code="q"):
        self.crc[kind] = zlib.crc32(array(code, values).tobytes(), self.crc[kind])


def expected(threads, site_of_cluster, sizes, rounds):
    """({rank: {kind: crc}}, {kind: MagPIe's WAN bytes}, {kind: least WAN bytes of any algorithm},
    {kind: calls}) for clusters of `threads` threads (rank = cluster x threads + thread) at the
    sites given per cluster, and the sizes and rounds of the run.

    MagPIe's items of a reduction are whole partials: a site's for allreduce (every site sends
    its partial to every other site, S(S-1) vectors, one WAN latency), a cluster's for scan. An
    algorithm may do with fewer bytes by shipping partials that already combine several sites, so
    that count is no floor. The floor, per element, with the operation opaque (a user function:
    messages can carry only inputs and partials, no coding):
    - allreduce: 2(S-1). At the first moment some site can compute the element's result, each of
      the other S-1 sites has sent at least one message carrying the element (its contribution had
      to leave it), and none of them can compute the result yet, so each receives at least one
      message afterwards (the one-way gossip bound). Reached by reduce-scatter + allgather between
      sites, and by the flat family's recursive doubling on 3 single-rank sites (0 -> 1, 1 <-> 2,
      1 -> 0: 4 vectors where MagPIe's count is 6). Equal to MagPIe's at S = 2 only.
    - scan: per site, one message per maximal run of other sites' clusters before its last
      cluster (the partial that brings a run into the site's result right after it holds nothing
      from later ranks, so each run needs its own message); MagPIe's count takes every such
      cluster's partial apart, equal when every run is one cluster.
    - every other collective: MagPIe's count (each item must reach each site that needs it; a
      reduce or reduce_scatter element needs one message from each other site)."""
    P = threads * len(site_of_cluster)
    site_of_rank = [site_of_cluster[r // threads] for r in range(P)]
    dig = [Digests() for _ in range(P)]
    wan = {k: 0 for k in ALL_KINDS}
    floor_allreduce = floor_scan = 0
    calls = {k: 0 for k in ALL_KINDS}
    sites = sorted(set(site_of_rank))
    S = len(sites)
    salt = 0

    def call(kind, per_rank=1):
        calls[kind] += P * per_rank

    for _ in range(rounds):
        for n in sizes:
            salt += 1
            call("barrier")
            root = salt * 7 % P
            b8 = 8 * n
            # bcast
            call("bcast")
            bc = gen(root, n, salt)
            for r in range(P):
                dig[r].add("bcast", bc)
            wan["bcast"] += (S - 1) * b8
            rows = [gen(r, n, salt) for r in range(P)]
            # allreduce and reduce: sum, min, max
            for fn in (sum, min, max):
                res = _colwise(rows, fn)
                call("allreduce")
                call("reduce")
                for r in range(P):
                    dig[r].add("allreduce", res)
                dig[root].add("reduce", res)
                wan["allreduce"] += S * (S - 1) * b8
                floor_allreduce += 2 * (S - 1) * b8
                wan["reduce"] += (S - 1) * b8
            # prod over (x & 1) + 1, xor, and the sum of doubles
            prod = _colwise([[(x & 1) + 1 for x in row] for row in rows], lambda c: functools.reduce(operator.mul, c, 1))
            xor = _colwise(rows, lambda c: functools.reduce(operator.xor, c, 0))
            dsum = [float(x) for x in _colwise(rows, sum)]
            for res, code in ((prod, "q"), (xor, "q"), (dsum, "d")):
                call("allreduce")
                for r in range(P):
                    dig[r].add("allreduce", res, code)
                wan["allreduce"] += S * (S - 1) * b8
                floor_allreduce += 2 * (S - 1) * b8
            # scan (inclusive prefix sum over ranks)
            call("scan")
            acc = [0] * n
            for r in range(P):
                acc = [a + x for a, x in zip(acc, rows[r])]
                dig[r].add("scan", acc)
            # a site needs the partial of every cluster of another site before its own last cluster
            for s in sites:
                last = max(c for c, x in enumerate(site_of_cluster) if x == s)
                wan["scan"] += b8 * sum(1 for c in range(last) if site_of_cluster[c] != s)
                floor_scan += b8 * sum(1 for c in range(1, last + 1)
                                       if site_of_cluster[c] == s and site_of_cluster[c - 1] != s)
            # counts of the v-variants
            counts = [0 if n == 0 else (r * 5 + salt) % (n + 1) + (n if r == 1 else 0) for r in range(P)]
            displ = [0]
            for c in counts:
                displ.append(displ[-1] + c)
            total = displ[-1]
            # reduce_scatter: the sum of everyone's whole vector, rank r's block
            call("reduce_scatter")
            big = _colwise([gen(r, total, salt + 1) for r in range(P)], sum)
            for r in range(P):
                dig[r].add("reduce_scatter", big[displ[r]:displ[r + 1]])
            wan["reduce_scatter"] += (S - 1) * total * 8
            # gather (root) and allgather: every rank's vector in rank order; then gatherv, allgatherv
            cat = [x for row in rows for x in row]
            catv = [x for r in range(P) for x in gen(r, counts[r], salt + 2)]
            for res, each in ((cat, [n] * P), (catv, counts)):
                call("gather")
                call("allgather")
                dig[root].add("gather", res)
                for r in range(P):
                    dig[r].add("allgather", res)
                wan["gather"] += 8 * sum(each[r] for r in range(P) if site_of_rank[r] != site_of_rank[root])
                wan["allgather"] += (S - 1) * 8 * sum(each)
            # scatter and scatterv: rank r gets the root's block r
            for base, each in ((100, [n] * P), (200, counts)):
                call("scatter")
                for r in range(P):
                    dig[r].add("scatter", gen(r + base, each[r], salt))
                wan["scatter"] += 8 * sum(each[r] for r in range(P) if site_of_rank[r] != site_of_rank[root])
            # alltoall: block (s -> d) is gen(s * P + d); alltoallv with counts (s * 3 + d * 5 + salt) mod 7
            blk = n // 4 + 1
            cnt = [[0 if n == 0 else (s * 3 + d * 5 + salt) % 7 for d in range(P)] for s in range(P)]
            for sl, how in ((0, lambda s, d: blk), (3, lambda s, d: cnt[s][d])):
                call("alltoall")
                for me in range(P):
                    dig[me].add("alltoall", [x for d in range(P) for x in gen(d * P + me, how(d, me), salt + sl)])
                wan["alltoall"] += 8 * sum(how(s, d) for s in range(P) for d in range(P)
                                           if site_of_rank[s] != site_of_rank[d])
    calls["barrier"] += P  # the last barrier
    floor = dict(wan, allreduce=floor_allreduce, scan=floor_scan)
    assert all(floor[k] <= wan[k] for k in ALL_KINDS), (floor, wan)
    return {r: dig[r].crc for r in range(P)}, wan, floor, calls


def fnv_sequence(senders, decode):
    """The hash `iccs run ordered` prints for a delivered sequence: FNV-1a over (sender << 32 | its
    message number) in delivery order, each sender's numbers counting from 0."""
    h, nxt = 1469598103934665603, {}
    for ch in senders:
        s = decode(ch)
        i = nxt.get(s, 0)
        nxt[s] = i + 1
        h = ((h ^ (s << 32 | i)) * 1099511628211) % (1 << 64)
    return h, nxt


def replay_ledger(writers, decode):
    """The ledger after the writes in the order applied: writer r's w-th write adds r * 1000 + w,
    every fifth (w mod 5 = 4) halves the balance. (balance, digest, writes)."""
    bal, dig, nxt = 0, 1469598103934665603, {}
    for ch in writers:
        r = decode(ch)
        w = nxt.get(r, 0)
        nxt[r] = w + 1
        if w % 5 == 4:
            bal = int(bal / 2)  # C++ division truncates toward zero
            dig = ((dig ^ 0xFFFF) * 1099511628211) % (1 << 64)
        else:
            v = r * 1000 + w
            bal += v
            dig = ((dig ^ v) * 1099511628211) % (1 << 64)
    return bal, dig, len(writers), nxt


RANK_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def rank_of(ch):
    return RANK_CHARS.index(ch)
