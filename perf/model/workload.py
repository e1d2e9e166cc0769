"""workload.py: the message streams the model runs (perf/model/README.md, "Workloads").

synthetic(): every compute thread of every cluster issues `msgs` messages to uniformly chosen
other clusters, with compute gaps drawn around a mean (exponential or fixed), a fraction of them
requests that block the thread until the reply; sizes drawn from given samples (a trace's).
Profile: what a trace says about an application's stream, per compute thread (message count,
compute between messages, request fraction, sizes, handler time), and how it scales to another
layout (scaled()).
"""
from dataclasses import dataclass

import numpy as np

from sim import ThreadStream, Workload


@dataclass
class Profile:
    """An application's inter-cluster stream per compute thread, at a measured layout."""
    app: str
    threads: int                 # compute threads in total at the measured layout
    cluster_size: int
    msgs_per_thread: float       # inter-cluster messages a compute thread issues
    gap_ns: float                # mean compute time before a message
    tail_ns: float               # compute after the last message
    request_frac: float          # share of messages that block for a reply
    sizes: np.ndarray            # request (or one-way) sizes seen [bytes]
    reply_sizes: np.ndarray      # reply sizes seen
    handler_ns: float            # destination's time from a request's delivery to its reply

    def remote_share(self, threads, cluster_size):
        """The share of a thread's peers in other clusters: (T - S) / (T - 1)."""
        return (threads - cluster_size) / max(1, threads - 1)

    def scaled(self, threads, cluster_size):
        """The per-thread message count at another layout, the work per thread held: the traced
        count scaled by the share of peers outside the cluster (a page or lock a thread needs is
        remote that much more or less often). The compute per thread is the traced total."""
        f = self.remote_share(threads, cluster_size) / max(1e-12, self.remote_share(self.threads, self.cluster_size))
        n = max(1, int(round(self.msgs_per_thread * f)))
        compute = self.gap_ns * self.msgs_per_thread + self.tail_ns
        gap = compute / (n + 1)
        return n, gap


def synthetic(clusters, cluster_size, msgs, gap_ns, seed=1, gap_dist="exponential", request_frac=1.0,
              sizes=(100,), reply_sizes=None, handler_ns=0.0, tail_ns=0.0, senders=None):
    """A Workload: every compute thread (or only those in `senders`, a list of (cluster, thread))
    issues `msgs` messages."""
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes, dtype=np.int64)
    reply_sizes = np.asarray(reply_sizes if reply_sizes is not None else sizes, dtype=np.int64)
    who = senders if senders is not None else [(k, t) for k in range(clusters) for t in range(cluster_size)]
    threads = []
    for k, t in who:
        if gap_dist == "exponential":
            gaps = rng.exponential(gap_ns, msgs)
        elif gap_dist == "fixed":
            gaps = np.full(msgs, float(gap_ns))
        else:
            raise ValueError(f"gap_dist '{gap_dist}': allowed values are exponential, fixed")
        others = [c for c in range(clusters) if c != k]
        dst = rng.choice(others, msgs) if others else np.full(msgs, k)
        kind = (rng.random(msgs) < request_frac).astype(np.int8)
        threads.append(ThreadStream(cluster=k, thread=t, gap_ns=gaps, dst_cluster=np.asarray(dst),
                                    size=rng.choice(sizes, msgs), kind=kind, reply_size=rng.choice(reply_sizes, msgs),
                                    handler_ns=np.full(msgs, float(handler_ns)), tail_ns=tail_ns))
    return Workload(threads=threads, clusters=clusters, cluster_size=cluster_size,
                    note=f"synthetic: {msgs} messages a thread, gap {gap_ns:.0f} ns ({gap_dist}), "
                         f"requests {request_frac:.2f}")


def from_profile(p: Profile, clusters, cluster_size, seed=1, max_msgs=None):
    """The profile's stream scaled to `clusters` x `cluster_size` compute threads."""
    n, gap = p.scaled(clusters * cluster_size, cluster_size)
    if max_msgs is not None and n > max_msgs:  # a bound on the model's own run time: fewer, larger gaps
        gap = gap * (n + 1) / (max_msgs + 1)
        n = max_msgs
    wl = synthetic(clusters, cluster_size, n, gap, seed=seed, request_frac=p.request_frac, sizes=p.sizes,
                   reply_sizes=p.reply_sizes, handler_ns=p.handler_ns, tail_ns=gap)
    wl.note = f"{p.app} profile scaled to {clusters} x {cluster_size}: {n} messages a thread, gap {gap / 1e3:.1f} us"
    return wl
