#!/usr/bin/env python3
"""model_check.py: the proxy contention model (perf/model/) against what is known exactly.

  queueing  one proxy fed by one asynchronous thread with exponential gaps (Poisson arrivals):
            exponential service -> M/M/1, fixed service -> M/D/1; at rho 0.5 and 0.7, 300,000
            messages, fixed seeds: the queue length (time-average waiting) and the mean wait in
            the queue within 2% of the closed forms Lq = rho^2/(1-rho), rho^2/(2(1-rho)) and
            Wq = Lq / lambda; utilization within 2% of rho.
  trace     a deterministic trace (a request and its reply, and a one-way message that waits
            behind the request at the first proxy), every message time, the run time, the
            busy time and the queue length of the proxies exact (computed by hand below).
  dispatch  fixed, round-robin and least-loaded on 2 proxies: round-robin splits one thread's
            stream evenly; fixed puts it all on one proxy; least-loaded never picks a busier one.

  tracefile a trace file read back (request/reply pairing, gaps, handler time, sizes) and
            replayed exactly; the command-line tool iccs_model.py on it.

Usage: model_check.py [queueing|trace|dispatch|tracefile ...]   (default: all)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "perf", "model"))
try:
    import numpy as np  # noqa: F401
except ImportError:  # Debian's python3-numpy serves /usr/bin/python3; a pyenv python3 on PATH lacks it
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: numpy is missing (Debian package python3-numpy; ./iccs test installs it)")
    sys.exit(77)

from sim import Config, Costs, ThreadStream, Workload, simulate  # noqa: E402
from workload import synthetic  # noqa: E402

failures = []


def check(what, got, want, rel=None):
    ok = got == want if rel is None else abs(got - want) <= rel * abs(want)
    fmt = (lambda v: f"{v:.6g}") if isinstance(want, (int, float)) else repr
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {fmt(got)} (expected {fmt(want)}{'' if rel is None else f' within {rel:.0%}'})")
    if not ok:
        failures.append(what)


def queueing():
    mean_s = 1000.0
    for rho in (0.5, 0.7):
        gap = mean_s / rho
        for dist, name in (("exponential", "M/M/1"), ("deterministic", "M/D/1")):
            lq = rho * rho / (1 - rho) if dist == "exponential" else rho * rho / (2 * (1 - rho))
            wq = lq * gap  # Little: Lq = lambda Wq
            wl = synthetic(2, 1, 300_000, gap, seed=11, request_frac=0.0, senders=[(0, 0)])
            r = simulate(wl, Config(2, 1, 1, costs=Costs(tx_base_ns=mean_s, rx_base_ns=0.0, service_dist=dist), seed=5))
            p = r.per_proxy[0]
            check(f"{name} rho {rho}: queue length", p["queue_len"], lq, 0.02)
            check(f"{name} rho {rho}: wait in queue [ns]", p["wait_ns"], wq, 0.02)
            check(f"{name} rho {rho}: utilization", p["util"], rho, 0.02)


def trace():
    # Cluster 0: thread 0 sends a 100-byte request at 1000 ns; thread 1 a one-way 100 bytes at
    # 1200 ns. Cluster 1 answers the request 400 ns after its delivery with 200 bytes. One proxy a
    # cluster; ring hand-off 100, send cost 500 + 1/byte, receive 300, fabric 2000 (no bandwidth
    # term).
    c = Costs(tx_base_ns=400, tx_per_byte_ns=1.0, rx_base_ns=300, fabric_latency_ns=2000, handoff_ns=100)

    def stream(thread, gap, kind, reply=0, handler=0):
        return ThreadStream(cluster=0, thread=thread, gap_ns=np.array([gap], float), dst_cluster=np.array([1]),
                            size=np.array([100]), kind=np.array([kind]), reply_size=np.array([reply]),
                            handler_ns=np.array([handler], float))
    wl = Workload(threads=[stream(0, 1000, 1, 200, 400), stream(1, 1200, 0)], clusters=2, cluster_size=2)
    r = simulate(wl, Config(2, 2, 1, costs=c))
    # request: ring 1000->1100, proxy 0.0 1100..1600, fabric ->3600, proxy 1.0 3600..3900, ring ->4000
    # one-way: ring 1200->1300, waits 300 for proxy 0.0: 1600..2100, fabric ->4100, proxy 1.0
    #          4100..4400, ring ->4500
    # reply:   sent 4000+400 = 4400, ring ->4500, proxy 1.0 4500..5100 (400 + 200 bytes), fabric
    #          ->7100, proxy 0.0 7100..7400, ring ->7500: thread 0 done at 7500
    times = sorted(r.msg_times.tolist())
    check("messages", r.msgs, 3)
    for got, want, what in zip(times, [3000.0, 3100.0, 3300.0], ["request", "reply", "one-way"]):
        check(f"message time of the {what} [ns]", got, want)
    check("run time [ns]", r.run_ns, 7500.0)
    p0 = next(p for p in r.per_proxy if p["cluster"] == 0)
    p1 = next(p for p in r.per_proxy if p["cluster"] == 1)
    check("proxy 0.0 busy [ns]", p0["util"] * 7500.0, 1300.0, 1e-12)
    check("proxy 1.0 busy [ns]", p1["util"] * 7500.0, 1200.0, 1e-12)
    check("proxy 0.0 queue length x run [ns]", p0["queue_len"] * 7500.0, 300.0, 1e-12)
    check("proxy 1.0 queue length x run [ns]", p1["queue_len"] * 7500.0 + 1.0, 1.0, 1e-12)
    check("mean message time [ns]", r.msg_time_ns, (3000 + 3100 + 3300) / 3, 1e-12)
    # the same trace with `no delay` (direct, 50 ns a message): the request's thread ends at
    # 1000 + 50 + 400 + 50
    d = simulate(wl, Config(2, 2, 1, costs=Costs(direct_latency_ns=50), transport="direct"))
    check("no-delay run time [ns]", d.run_ns, 1500.0)
    # acks (ack_ns 50, delayed 5000): the request's ack rides on the reply (its timer at 8900 finds
    # nothing to ack); the reply's goes alone at 7400 + 5000: proxy 0.0 12400..12450, fabric 2000,
    # proxy 1.0 14450..14500. Busy: 0.0 500 + 300 + 50, 1.0 300 + 600 + 50; times unchanged.
    ca = Costs(tx_base_ns=400, tx_per_byte_ns=1.0, rx_base_ns=300, fabric_latency_ns=2000, handoff_ns=100,
               ack_ns=50, delack_ns=5000)
    wl = Workload(threads=[stream(0, 1000, 1, 200, 400)], clusters=2, cluster_size=2)
    a = simulate(wl, Config(2, 2, 1, costs=ca))
    check("acks: message times [ns]", sorted(a.msg_times.tolist()), [3000.0, 3100.0])
    p0 = next(p for p in a.per_proxy if p["cluster"] == 0)
    p1 = next(p for p in a.per_proxy if p["cluster"] == 1)
    check("acks: proxy 0.0 jobs (request, reply, 1 ack)", p0["jobs"], 3)
    check("acks: proxy 1.0 jobs (request, reply, 1 ack)", p1["jobs"], 3)
    check("acks: proxy 0.0 busy [ns]", p0["util"] * a.run_ns, 850.0, 1e-12)
    check("acks: proxy 1.0 busy [ns]", p1["util"] * a.run_ns, 950.0, 1e-12)


def dispatch():
    c = Costs(tx_base_ns=100, rx_base_ns=100)
    wl = synthetic(2, 1, 1000, 1000.0, seed=3, request_frac=0.0, senders=[(0, 0)])
    rr = simulate(wl, Config(2, 1, 2, dispatch="round-robin", costs=c))
    tx = [p["jobs"] for p in rr.per_proxy if p["cluster"] == 0]
    check("round-robin: proxy 0.0 jobs", tx[0], 500)
    check("round-robin: proxy 0.1 jobs", tx[1], 500)
    fx = simulate(wl, Config(2, 1, 2, dispatch="fixed", costs=c))
    tx = [p["jobs"] for p in fx.per_proxy if p["cluster"] == 0]
    check("fixed: proxy 0.0 jobs", tx[0], 1000)
    check("fixed: proxy 0.1 jobs", tx[1], 0)
    # least-loaded under load: a burst of 4 (gap 0) on 2 proxies of cost 1000 goes 2 + 2
    wl = synthetic(2, 1, 4, 0.0, seed=3, gap_dist="fixed", request_frac=0.0, senders=[(0, 0)])
    ll = simulate(wl, Config(2, 1, 2, dispatch="least-loaded", costs=Costs(tx_base_ns=1000, rx_base_ns=0)))
    tx = [p["jobs"] for p in ll.per_proxy if p["cluster"] == 0]
    check("least-loaded burst: proxy 0.0 jobs", tx[0], 2)
    check("least-loaded burst: proxy 0.1 jobs", tx[1], 2)


def tracefile_case():
    """A trace file as `iccs run APP --trace` writes it (a request, its reply from the service
    endpoint, then a one-way message 700 ns after the reply): the loader pairs the request with
    its reply (handler 400 ns), the replay has the thread's gaps 0 and 700 ns, and the model with
    the trace case's costs gives the traced message times 3000, 3100, 3000 ns. Then iccs_model.py
    on the file: one row per proxy count, exit 2 on a missing cost file."""
    import json
    import subprocess
    import tempfile
    import tracefile
    lines = ["dir,cluster,proxy,t_ns,enq_ns,src_cluster,dst_cluster,thread,src_port,dst_port,type,bytes,msg_id",
             "tx,0,0,1100,1000,0,1,0,49152,3000,1,140,1", "rx,1,0,4000,1000,0,1,0,49152,3000,1,140,1",
             "tx,1,0,4500,4400,1,0,1,3000,49152,1,240,7", "rx,0,0,7500,4400,1,0,0,3000,49152,1,240,7",
             "tx,0,0,8300,8200,0,1,0,49152,3000,1,140,2", "rx,1,0,11200,8200,0,1,0,49152,3000,1,140,2", "# dropped,0"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.trace")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        tr = tracefile.load(path, 1)
        check("trace: tx records", tr.tx, 3)
        check("trace: rx records", tr.rx, 3)
        check("trace: request/reply pairs", sum(1 for m in tr.msgs if m.reply is not None), 1)
        wl = tracefile.replay(tr)
        check("replay: threads that send (the reply is the model's)", len(wl.threads), 1)
        s = wl.threads[0]
        check("replay: gaps [ns]", s.gap_ns.tolist(), [0.0, 700.0])
        check("replay: kinds", s.kind.tolist(), [1, 0])
        check("replay: handler [ns]", float(s.handler_ns[0]), 400.0)
        check("replay: sizes (payload)", s.size.tolist() + [int(s.reply_size[0])], [100, 100, 200])
        c = Costs(tx_base_ns=400, tx_per_byte_ns=1.0, rx_base_ns=300, fabric_latency_ns=2000, handoff_ns=100)
        r = simulate(wl, Config(2, 1, 1, costs=c))
        check("replay: message times [ns]", sorted(r.msg_times.tolist()), [3000.0, 3000.0, 3100.0])
        costs = os.path.join(d, "costs.json")
        with open(costs, "w") as f:
            json.dump({"mtu_bytes": 1500, "header_bytes": 80, "ring_handoff_ns": 100, "direct_latency_ns": 50,
                       "proxy_service": {"tx_base_ns": 400, "tx_per_byte_ns": 1, "tx_per_fragment_ns": 0,
                                         "rx_base_ns": 300, "rx_per_byte_ns": 0, "rx_per_fragment_ns": 0},
                       "fabric": {"latency_ns": {"inline": 2000, "adaptive": 2000}, "bytes_per_ns": None},
                       "adaptive": {"spin_ns": 50000, "sleep_ns": 50000, "wake_ns": 0}}, f)
        tool = os.path.join(HERE, "..", "..", "perf", "model", "iccs_model.py")
        p = subprocess.run([sys.executable, tool, path, "--cluster-size", "1", "--costs", costs, "--proxies", "1,2",
                            "--polling", "busy", "--json"], capture_output=True, text=True, timeout=120)
        rows = json.loads(p.stdout)["rows"] if p.returncode == 0 else []
        check("iccs_model.py: a row per proxy count", [r["proxies_per_cluster"] for r in rows], [1, 2])
        check("iccs_model.py: mean message time [ns]", rows[0]["msg_time_us"] * 1e3 if rows else -1, 9100 / 3, 1e-9)
        p = subprocess.run([sys.executable, tool, path, "--cluster-size", "1", "--costs", os.path.join(d, "none")],
                           capture_output=True, text=True, timeout=120)
        check("iccs_model.py: a missing cost file exits 2", p.returncode, 2)


CASES = {"queueing": queueing, "trace": trace, "dispatch": dispatch, "tracefile": tracefile_case}

if __name__ == "__main__":
    names = sys.argv[1:] or list(CASES)
    for n in names:
        if n not in CASES:
            print(f"model_check.py: unknown case '{n}' (cases: {', '.join(CASES)})")
            sys.exit(2)
        CASES[n]()
    print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} check(s) failed" + (f": {failures}" if failures else ""))
    sys.exit(1 if failures else 0)
