"""tracefile.py: a trace of `iccs run APP --trace FILE` as the model's input (perf/model/README.md).

The trace has a tx line where a proxy took a message from a compute thread's ring and an rx line
where one delivered it (proxy/msg_trace.hpp). A message is matched across the two by (source
cluster, msg_id, enqueue time). Per sending thread (the compute threads 0..S-1 of a cluster and
its service endpoint, thread S) its messages in order give the stream:
  - a message is a request when the thread's next event is a delivery from the message's
    destination cluster (the reply) before the thread sends again; the reply is that delivery,
    the handler time is the reply's enqueue less the request's delivery;
  - the gap before a message is its send time less the thread's previous event (its previous
    send, or for a request the delivery of its reply);
  - replies are made by the model (from the request), so they leave the replying thread's stream.
load() -> Trace; replay() -> a Workload at the traced layout; profile() -> a Profile for scaling.
"""
import csv
from dataclasses import dataclass

import numpy as np

from sim import ThreadStream, Workload
from workload import Profile


class TraceError(Exception):
    pass


@dataclass
class Msg:
    src: int
    thread: int
    dst: int
    size: int
    send: float
    proxy: int
    deliver: float = None
    dst_thread: int = None
    is_reply: bool = False
    reply: "Msg" = None


@dataclass
class Trace:
    msgs: list           # Msg, by send time
    clusters: int
    cluster_size: int
    t0: float
    t_end: float
    tx: int
    rx: int
    dropped: int


def load(path, cluster_size):
    tx, rx = {}, {}
    dropped = 0
    ntx = nrx = 0
    try:
        with open(path, newline="") as f:
            rows = csv.reader(f)
            head = next(rows, None)
            if not head or head[0] != "dir":
                raise TraceError(f"trace {path}: no header line (written by iccs run APP --trace)")
            for n, r in enumerate(rows, 2):
                if r and r[0].startswith("# dropped"):
                    dropped += int(r[1])
                    continue
                if len(r) != 13 or r[0] not in ("tx", "rx"):
                    raise TraceError(f"trace {path}: line {n}: {','.join(r)!r} is not a tx or rx record")
                d, c, p, t, enq, sc, dc, thr, sp, dp, typ, size, mid = r
                key = (int(sc), int(mid), int(enq))
                if d == "tx":
                    ntx += 1
                    tx[key] = Msg(src=int(sc), thread=int(thr), dst=int(dc), size=max(0, int(size) - 40),
                                  send=float(enq), proxy=int(p))
                else:
                    nrx += 1
                    rx[key] = (float(t), int(thr))
    except OSError as e:
        raise TraceError(f"trace {path}: {e}")
    if not tx:
        raise TraceError(f"trace {path}: no tx records")
    msgs = sorted(tx.values(), key=lambda m: m.send)
    for key, m in tx.items():
        if key in rx:
            m.deliver, m.dst_thread = rx[key]
    t0 = msgs[0].send
    t_end = max([m.deliver for m in msgs if m.deliver is not None] + [msgs[-1].send])
    clusters = 1 + max(max(m.src, m.dst) for m in msgs)
    _pair(msgs, cluster_size)
    return Trace(msgs=msgs, clusters=clusters, cluster_size=cluster_size, t0=t0, t_end=t_end, tx=ntx, rx=nrx,
                 dropped=dropped)


def _pair(msgs, cluster_size):
    """Mark requests and their replies (see the module's comment)."""
    by_thread = {}
    for m in msgs:
        by_thread.setdefault((m.src, m.thread), []).append(m)
    inbox = {}
    for m in msgs:
        if m.deliver is not None:
            inbox.setdefault((m.dst, m.dst_thread), []).append(m)
    for v in inbox.values():
        v.sort(key=lambda m: m.deliver)
    for (c, t), mine in by_thread.items():
        if t >= cluster_size:
            continue  # the service endpoint answers; it does not wait
        got = inbox.get((c, t), [])
        j = 0
        for i, m in enumerate(mine):
            nxt = mine[i + 1].send if i + 1 < len(mine) else float("inf")
            while j < len(got) and got[j].deliver < m.send:
                j += 1
            k = j
            while k < len(got) and got[k].deliver <= nxt:
                if got[k].src == m.dst and not got[k].is_reply and got[k].send >= m.send:
                    m.reply = got[k]
                    got[k].is_reply = True
                    break
                k += 1


def replay(tr: Trace):
    """The traced streams as a Workload (same layout, same gaps, sizes and request/reply pairs)."""
    streams = []
    by_thread = {}
    for m in tr.msgs:
        if not m.is_reply:
            by_thread.setdefault((m.src, m.thread), []).append(m)
    for (c, t), mine in sorted(by_thread.items()):
        gaps, dst, size, kind, rsize, handler = [], [], [], [], [], []
        prev = tr.t0
        for m in mine:
            gaps.append(max(0.0, m.send - prev))
            dst.append(m.dst)
            size.append(m.size)
            if m.reply is not None and m.deliver is not None:
                kind.append(1)
                rsize.append(m.reply.size)
                handler.append(max(0.0, m.reply.send - m.deliver))
                prev = m.reply.deliver
            else:
                kind.append(0)
                rsize.append(0)
                handler.append(0.0)
                prev = m.send
        streams.append(ThreadStream(cluster=c, thread=t, gap_ns=np.array(gaps), dst_cluster=np.array(dst),
                                    size=np.array(size), kind=np.array(kind, dtype=np.int8),
                                    reply_size=np.array(rsize), handler_ns=np.array(handler),
                                    tail_ns=max(0.0, tr.t_end - prev)))
    return Workload(threads=streams, clusters=tr.clusters, cluster_size=tr.cluster_size,
                    note=f"trace replay: {len(tr.msgs)} messages, {sum(1 for m in tr.msgs if m.reply)} request/reply pairs")


def profile(tr: Trace, app, compute_s=None):
    """The per-compute-thread stream of the trace, as a Profile (workload.py) for other layouts.
    The service endpoint's own messages (not replies) are folded into the compute threads' (the
    endpoint acts for them). compute_s: the run's parallel section, when known."""
    wl = replay(tr)
    comp = [s for s in wl.threads if s.thread < tr.cluster_size]
    n_threads = tr.clusters * tr.cluster_size
    n = sum(len(s.gap_ns) for s in wl.threads) / n_threads
    reqs = [m for m in tr.msgs if not m.is_reply]
    req_frac = sum(1 for m in reqs if m.reply is not None) / max(1, len(reqs))
    handlers = [m.reply.send - m.deliver for m in reqs if m.reply is not None and m.deliver is not None]
    # compute per thread: the traced span less the time a thread waited for its replies
    waits = []
    for s in comp:
        w = 0.0
        for m in (x for x in reqs if (x.src, x.thread) == (s.cluster, s.thread) and x.reply is not None):
            if m.reply.deliver is not None:
                w += m.reply.deliver - m.send
        waits.append(w)
    span = (compute_s * 1e9) if compute_s else (tr.t_end - tr.t0)
    compute = max(1.0, span - (float(np.mean(waits)) if waits else 0.0))
    return Profile(app=app, threads=n_threads, cluster_size=tr.cluster_size, msgs_per_thread=n,
                   gap_ns=compute / (n + 1), tail_ns=compute / (n + 1), request_frac=req_frac,
                   sizes=np.array([m.size for m in reqs]),
                   reply_sizes=np.array([m.reply.size for m in reqs if m.reply is not None] or [64]),
                   handler_ns=float(np.median(handlers)) if handlers else 0.0)
