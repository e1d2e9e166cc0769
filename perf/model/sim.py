"""sim.py: a discrete-event model of the ICCS's proxies (perf/model/README.md).

Compute threads issue inter-cluster messages; each message is handed over a ring to a proxy of
its cluster (dispatch: fixed, round-robin, least-loaded), waits in that proxy's FIFO queue, is
served (its send cost), crosses the fabric (latency + bytes / bandwidth) to the remote proxy
(sending proxy index mod the remote cluster's proxy count), waits in that proxy's FIFO queue, is
served (its receive cost) and is delivered. A request blocks its thread until the reply (made by
the destination cluster after a handler time, dispatched there as any message) is delivered; an
asynchronous message does not block. Every proxy is one FIFO server for both directions.

The one idea that keeps it fast: a FIFO single server needs no events of its own. Arrivals are
processed in time order (one heap), so a job's start is max(arrival, the server's free time) and
its end start + service. The time-average queue length is then exact from Little's law over the
run: the integral of the number waiting = the sum of the waits (every job ends within the run).

Times are in nanoseconds (floats). Inputs: a Workload (per thread arrays, from a trace or
synthetic) and a Config (clusters, proxies, dispatch, Costs). Output: a Result with the columns of
the measured experiments (message time, queue length, utilization, run time; slowdown against
the same workload with `no delay`).
"""
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

DISPATCH = ("fixed", "round-robin", "least-loaded")


@dataclass
class Costs:
    """Service and transfer costs [ns]. A proxy's cost for a message of n bytes in f IP fragments:
    base + per_byte * n + per_fragment * (f - 1), for sending (tx) and for receiving (rx)."""
    tx_base_ns: float = 1000.0
    tx_per_byte_ns: float = 0.0
    tx_per_fragment_ns: float = 0.0
    rx_base_ns: float = 1000.0
    rx_per_byte_ns: float = 0.0
    rx_per_fragment_ns: float = 0.0
    fabric_latency_ns: float = 0.0
    fabric_bytes_per_ns: float = math.inf  # bandwidth [bytes/ns] (1 byte/ns = 1 GB/s)
    handoff_ns: float = 0.0                # compute thread -> proxy ring (and proxy -> thread)
    direct_latency_ns: float = 0.0         # `no delay`: one message between clusters without the ICCS
    mtu_bytes: int = 1500
    header_bytes: int = 8 + 40 + 40        # UDP + slidwin (run token included) + convergence headers in the IP payload
    # Adaptive polling (proxy/README.md): an idle proxy spins spin_ns, then sleeps in segments of
    # sleep_ns; a ring hand-off wakes it after wake_ns, a frame from the fabric waits for the end
    # of the segment. polling "busy" (or spin_ns = inf): never asleep.
    polling: str = "busy"
    spin_ns: float = 50_000.0
    sleep_ns: float = 50_000.0
    wake_ns: float = 0.0
    service_dist: str = "deterministic"    # or "exponential" (mean = the cost): the M/M/1 check
    # slidwin's acks (stack/slidwin.hpp): a receiving proxy acks at once every ack_every datagrams
    # of a sub-connection, after delack_ns otherwise, and not at all when data it sends on that
    # sub-connection first carries the ack. An ack frame costs ack_ns at each end. acks off: 0.
    ack_ns: float = 0.0
    ack_every: int = 2
    delack_ns: float = 50_000.0

    def fragments(self, size):
        per = self.mtu_bytes - 20  # IPv4 header; fragment payloads are multiples of 8
        per -= per % 8
        return max(1, -(-(int(size) + self.header_bytes) // per))

    def tx_ns(self, size):
        return self.tx_base_ns + self.tx_per_byte_ns * size + self.tx_per_fragment_ns * (self.fragments(size) - 1)

    def rx_ns(self, size):
        return self.rx_base_ns + self.rx_per_byte_ns * size + self.rx_per_fragment_ns * (self.fragments(size) - 1)

    def fabric_ns(self, size):
        wire = size + self.fragments(size) * (self.header_bytes + 20 + 14)
        return self.fabric_latency_ns + (wire / self.fabric_bytes_per_ns if self.fabric_bytes_per_ns else 0.0)


@dataclass
class ThreadStream:
    """One thread's messages in issue order. gap_ns[i]: compute time before message i, counted
    from the thread's previous event (its previous send, or for a blocking thread the delivery
    of the reply it waited for). kind[i]: 1 request (the thread blocks for the reply), 0 one-way.
    After the last message the thread computes tail_ns more."""
    cluster: int
    thread: int
    gap_ns: np.ndarray
    dst_cluster: np.ndarray
    size: np.ndarray
    kind: np.ndarray
    reply_size: np.ndarray
    handler_ns: np.ndarray     # destination's time from the request's delivery to the reply's send
    tail_ns: float = 0.0
    start_ns: float = 0.0


@dataclass
class Workload:
    threads: list                 # ThreadStream
    clusters: int
    cluster_size: int
    note: str = ""


@dataclass
class Config:
    clusters: int
    cluster_size: int
    proxies: int                  # per cluster
    dispatch: str = "round-robin"
    costs: Costs = field(default_factory=Costs)
    transport: str = "iccs"       # or "direct": `no delay`, a message takes direct_latency_ns
    seed: int = 1


@dataclass
class Result:
    run_ns: float
    msgs: int
    msg_time_ns: float            # mean, sender's enqueue to delivery (as the proxies count it)
    queue_len: float              # time-average jobs waiting (not in service), mean over proxies
    queue_len_tx: float           # the same, messages from compute threads only (the counter's ring)
    wait_ns: float                # mean wait in a proxy queue per job
    util: float                   # busy time / run time, mean over proxies
    util_counted: float           # as the proxy's counter counts it under adaptive polling
    per_proxy: list               # dicts: cluster, proxy, jobs, util, queue_len, wait_ns
    msg_times: np.ndarray = None

    def row(self):
        return {"msgs": self.msgs, "msg_time_us": self.msg_time_ns / 1e3, "queue_len": self.queue_len,
                "queue_len_tx": self.queue_len_tx, "proxy_util": self.util, "proxy_util_counted": self.util_counted,
                "wait_us": self.wait_ns / 1e3, "time_s": self.run_ns / 1e9}


class _Proxy:
    __slots__ = ("cluster", "index", "free_at", "busy", "counted", "wait", "wait_tx", "jobs", "tx_jobs", "ends",
                 "last_service")

    def __init__(self, cluster, index):
        self.cluster, self.index = cluster, index
        self.free_at = 0.0
        self.busy = self.counted = self.wait = self.wait_tx = 0.0
        self.jobs = self.tx_jobs = 0
        self.last_service = 0.0
        self.ends = {}  # per sending thread, the start times of its messages in the ring (least-loaded)


# event kinds
_SEND, _AT_TX, _AT_RX, _DELIVER, _REPLY, _ACK_TIMER, _ACK_RX = 0, 1, 2, 3, 4, 5, 6
# how a job reaches a proxy: its ring (a compute thread wakes it), its port (the end of a sleep
# segment finds it), a timer (it wakes on time)
_RING, _PORT, _TIMER = 0, 1, 2


def simulate(wl: Workload, cfg: Config) -> Result:
    if cfg.dispatch not in DISPATCH:
        raise ValueError(f"dispatch '{cfg.dispatch}': allowed values are {', '.join(DISPATCH)}")
    if cfg.proxies < 1:
        raise ValueError(f"proxies {cfg.proxies}: expected at least 1 per cluster")
    c = cfg.costs
    rng = np.random.default_rng(cfg.seed)
    direct = cfg.transport == "direct"
    px = [[_Proxy(k, i) for i in range(cfg.proxies)] for k in range(cfg.clusters)]
    rr = {}  # round-robin position per (cluster, thread)
    heap = []
    seq = 0
    times = []
    # A message: [src_cluster, src_thread, dst_cluster, size, send_t, kind, stream index i, reply?]
    streams = {(s.cluster, s.thread): s for s in wl.threads}
    pos = {k: 0 for k in streams}
    done_at = {}

    def push(t, kind, data):
        nonlocal seq
        heapq.heappush(heap, (t, seq, kind, data))
        seq += 1

    def pick(cluster, thread, now):
        """As convergence/dispatch.hpp: fixed t mod P; round-robin from a per-thread cursor that
        advances before each pick; least-loaded: the fewest of this thread's messages still in
        the ring to the proxy (not yet taken), ties going round-robin from the cursor."""
        p = px[cluster]
        n = len(p)
        if cfg.dispatch == "fixed":
            return p[thread % n]
        k = (rr.get((cluster, thread), 0) + 1) % n
        rr[(cluster, thread)] = k
        if cfg.dispatch == "round-robin":
            return p[k]
        best, best_load = None, None
        for j in range(n):
            q = p[(k + j) % n]
            starts = q.ends.setdefault(thread, [])
            while starts and starts[0] <= now:
                heapq.heappop(starts)
            if best is None or len(starts) < best_load:
                best, best_load = q, len(starts)
            if best_load == 0:
                break
        return best

    def service(mean):
        return rng.exponential(mean) if c.service_dist == "exponential" else mean

    def start_of(q, arrival, how):
        """When q can start a job arriving at `arrival`, and the extra time its counter counts busy."""
        if arrival < q.free_at:
            return q.free_at, 0.0
        if c.polling != "adaptive":
            return arrival, 0.0
        idle = arrival - q.free_at
        if idle <= c.spin_ns:
            return arrival, 0.0
        into = (idle - c.spin_ns) % c.sleep_ns  # position in the current sleep segment
        if how == _RING:
            wake = min(c.wake_ns, c.sleep_ns - into)
            return arrival + wake, into + wake
        if how == _TIMER:
            return arrival, into
        return arrival + (c.sleep_ns - into), c.sleep_ns

    def serve(q, arrival, cost, how):
        """FIFO: the job waits for the jobs before it (queue wait, what the queue length counts),
        and, when the proxy was asleep, for its wake (part of the message time, not of the queue)."""
        start, counted = start_of(q, arrival, how)
        s = service(cost)
        queued = max(0.0, q.free_at - arrival)
        q.wait += queued
        if how == _RING:
            q.wait_tx += queued
            q.tx_jobs += 1
        q.busy += s
        q.last_service = s
        q.counted += s + counted
        q.jobs += 1
        q.free_at = start + s
        return q.free_at

    # acks: per sub-connection (receiving proxy, sending proxy) the datagrams not yet acked and a
    # generation number that a stale delayed-ack timer does not match
    unacked = {}

    def ack_now(q, peer, t):
        unacked[(q, peer)] = [0, unacked.get((q, peer), [0, 0])[1] + 1]
        end = serve(q, t, c.ack_ns, _TIMER)
        push(end + c.fabric_ns(0), _ACK_RX, peer)

    def on_data_rx(q, peer, end):
        if c.ack_ns <= 0:
            return
        st = unacked.setdefault((q, peer), [0, 0])
        st[0] += 1
        if st[0] >= c.ack_every:
            ack_now(q, peer, end)
        elif st[0] == 1:
            push(end + c.delack_ns, _ACK_TIMER, (q, peer, st[1]))

    def on_data_tx(q, peer):
        st = unacked.get((q, peer))  # data q sends to peer carries the ack of what peer sent q
        if st is not None and st[0]:
            st[0] = 0
            st[1] += 1

    def issue(key, now):
        """The thread `key` issues its message pos[key] at `now` (after its gap)."""
        s = streams[key]
        i = pos[key]
        msg = (s.cluster, s.thread, int(s.dst_cluster[i]), int(s.size[i]), now, int(s.kind[i]), i, False)
        pos[key] = i + 1
        launch(msg, now)
        if not s.kind[i]:  # one-way: the thread goes on
            next_or_finish(key, now)

    def launch(msg, now):
        if direct:
            push(now + c.direct_latency_ns, _DELIVER, msg)
            return
        q = pick(msg[0], msg[1], now)
        push(now + c.handoff_ns, _AT_TX, (msg, q))

    def next_or_finish(key, now):
        s = streams[key]
        i = pos[key]
        if i < len(s.gap_ns):
            push(now + float(s.gap_ns[i]), _SEND, key)
        else:
            done_at[key] = now + s.tail_ns

    for key, s in streams.items():
        if len(s.gap_ns):
            push(s.start_ns + float(s.gap_ns[0]), _SEND, key)
        else:
            done_at[key] = s.start_ns + s.tail_ns
    last = 0.0
    while heap:
        t, _, kind, data = heapq.heappop(heap)
        last = t
        if kind == _SEND:
            issue(data, t)
        elif kind == _AT_TX:
            msg, q = data
            end = serve(q, t, c.tx_ns(msg[3]), _RING)
            if cfg.dispatch == "least-loaded":  # in the ring until its service starts
                heapq.heappush(q.ends.setdefault(msg[1], []), end - q.last_service)
            rq = px[msg[2]][q.index % len(px[msg[2]])]
            on_data_tx(q, rq)
            push(end + c.fabric_ns(msg[3]), _AT_RX, (msg, rq, q))
        elif kind == _AT_RX:
            msg, q, peer = data
            end = serve(q, t, c.rx_ns(msg[3]), _PORT)
            on_data_rx(q, peer, end)
            push(end + c.handoff_ns, _DELIVER, msg)
        elif kind == _DELIVER:
            msg = data
            times.append(t - msg[4])
            src, thr, dst, size, sent, mkind, i, is_reply = msg
            key = (src, thr)
            if is_reply:  # the requester (thread i[0] of this cluster) goes on
                next_or_finish((dst, i[0]), t)
            elif mkind:  # a request: the destination answers after its handler time
                s = streams[key]
                # the reply leaves from the destination's service endpoint (thread index cluster_size)
                rmsg = (dst, wl.cluster_size, src, int(s.reply_size[i]), t + float(s.handler_ns[i]), 0, (thr, i), True)
                push(rmsg[4], _REPLY, rmsg)
        if kind == _REPLY:
            launch(data, t)
        elif kind == _ACK_TIMER:
            q, peer, gen = data
            st = unacked[(q, peer)]
            if st[1] == gen and st[0]:
                ack_now(q, peer, t)
        elif kind == _ACK_RX:
            serve(data, t, c.ack_ns, _PORT)
    return _finish(px, times, done_at, last, cfg)


def _finish(px, times, done_at, last, cfg):
    # The run ends when the last compute thread ends (threads >= cluster_size: service endpoints)
    comp = [t for (k, th), t in done_at.items() if th < cfg.cluster_size]
    run = max(comp) if comp else max(list(done_at.values()) + [last]) if (done_at or last) else 0.0
    run = max(run, 1.0)
    per = []
    for row in px:
        for q in row:
            per.append({"cluster": q.cluster, "proxy": q.index, "jobs": q.jobs, "tx_jobs": q.tx_jobs, "util": q.busy / run,
                        "util_counted": min(1.0, q.counted / run), "queue_len": q.wait / run,
                        "queue_len_tx": q.wait_tx / run, "wait_ns": q.wait / q.jobs if q.jobs else 0.0})
    tarr = np.asarray(times, dtype=float)
    n = len(per) or 1
    jobs = sum(p["jobs"] for p in per)
    return Result(run_ns=run, msgs=len(tarr), msg_time_ns=float(tarr.mean()) if len(tarr) else 0.0,
                  queue_len=sum(p["queue_len"] for p in per) / n, queue_len_tx=sum(p["queue_len_tx"] for p in per) / n,
                  wait_ns=sum(q.wait for row in px for q in row) / jobs if jobs else 0.0,
                  util=sum(p["util"] for p in per) / n, util_counted=sum(p["util_counted"] for p in per) / n,
                  per_proxy=per, msg_times=tarr)
