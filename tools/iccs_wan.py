#!/usr/bin/env python3
"""iccs_wan.py: the WAN emulation of running iccs clusters (`./iccs wan`), over DPDK telemetry.

    ./iccs wan show [--json] [--prefix P | --run R]  links each proxy emulates: parameters, counters,
                                                   and the recent parameter changes
    ./iccs wan set A B BW LAT_S [--sym] [--loss P] [--prefix P]   link A -> B (both ways with --sym):
                                                   bandwidth BW bytes/s (0 = unlimited), one-way latency
                                                   LAT_S s, and with --loss its loss probability
    ./iccs wan loss A B P [--sym] [--prefix P]         link A -> B (both ways with --sym) loses each
                                                   frame with probability P (0..1)
    ./iccs wan mode constant|script|series|live [--prefix P]
                                                   what drives the links from now on

Clusters are found as `./iccs stat` finds them (tools/iccs_stat.py: one telemetry socket per
cluster process); `--prefix` picks one cluster, `--run R` the clusters of one run (prefixes
iccs-R-c*: the launcher's pid unless set). `set` and `mode` go to every running cluster (a link matters to the proxies of
its receiving site, and to those downstream when it relays); each cluster answers ok or the error.
Telemetry commands: /iccs/wan/links,<proxy>, /iccs/wan/set,A,B,BW,LAT_S[,sym],
/iccs/wan/loss,A,B,P[,sym], /iccs/wan/mode,MODE. `set` keeps a link's loss; `loss` keeps the rest.
Exit status: 0 (also `show` with no cluster running); 1 when a cluster could not be read or
answered an error, or `set`/`mode` found no cluster; 2 for a wrong argument.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from iccs_stat import (SOCKET_NAME, Stale, Telemetry, TelemetryError, foreign_denied,  # noqa: E402
                       list_prefixes, runtime_base)

LINK_FIELDS = ["bw_bytes_per_s", "lat_ns", "present", "msgs", "bytes", "queue_ns_sum", "queue_ns_mean",
               "queue_ns_max", "changes", "loss_ppm", "dropped"]


def clusters(base, only_prefix, run=None):
    prefixes = [only_prefix] if only_prefix else list_prefixes(base)
    if run is not None:
        prefixes = [p for p in prefixes if p.startswith(f"iccs-{run}-c")]
    out = []
    for p in prefixes:
        if os.path.exists(os.path.join(base, p, SOCKET_NAME)):
            out.append(p)
    if not out and not only_prefix:
        for e in foreign_denied(base):
            raise TelemetryError(e)
    return out


def parse_links(d):
    """The flat telemetry dict of one proxy -> {mode, ..., links: {"A->B": {...}}, changes: [...]}."""
    links = {}
    rest = {}
    for k, v in d.items():
        if k.startswith("link_"):
            parts = k.split("_", 3)  # link, A, B, field
            if len(parts) == 4:
                links.setdefault(f"{parts[1]}->{parts[2]}", {})[parts[3]] = v
                continue
        if not k.startswith("change_"):
            rest[k] = v
    ch = []
    at = d.get("change_at_us") or []
    for i in range(len(at)):
        ch.append({"at_ms": at[i] / 1000.0, "a": d["change_a"][i], "b": d["change_b"][i],
                   "bw_bytes_per_s": d["change_bw"][i], "lat_s": d["change_lat_ns"][i] / 1e9})
    rest["links"] = links
    rest["changes"] = ch
    return rest


def show(base, prefix, run, as_json):
    found = []
    rc = 0
    for p in clusters(base, prefix, run):
        cl = {"prefix": p, "proxies": []}
        try:
            with Telemetry(os.path.join(base, p, SOCKET_NAME)) as tel:
                idx = tel.query("/iccs/proxies")
                for n in idx or []:
                    d = tel.query(f"/iccs/wan/links,{n}")
                    if d is None:  # a cluster of a build without the WAN stage (or just starting)
                        d = {"mode": "unknown to this cluster"}
                    if not isinstance(d, dict):
                        raise TelemetryError(f"/iccs/wan/links,{n} answered {d!r}")
                    v = parse_links(d)
                    v["proxy"] = n
                    cl["proxies"].append(v)
        except Stale:
            continue
        except TelemetryError as e:
            cl["error"] = str(e)
            rc = 1
        found.append(cl)
    if as_json:
        print(json.dumps({"clusters": found}))
        return rc
    if not found:
        print(f"no running iccs cluster found (looked in {base})")
        return 0
    for cl in found:
        if "error" in cl:
            print(f"{cl['prefix']}: error: {cl['error']}")
            continue
        for px in cl["proxies"]:
            head = f"{cl['prefix']} proxy {px['proxy']}: wan {px.get('mode')}"
            if px.get("mode") in ("off", "unknown to this cluster"):
                print(head)
                continue
            print(f"{head}, site {px.get('site')}, held {px.get('held_msgs')} msgs / {px.get('held_bytes')} B "
                  f"(most {px.get('held_max_msgs')}), hold-limit stops {px.get('hold_full')}, "
                  f"released {px.get('released')}")
            print(f"  {'link':>6} {'bw B/s':>12} {'lat ms':>9} {'msgs':>9} {'MB':>9} {'queue mean ms':>14} "
                  f"{'queue max ms':>13} {'changes':>8} {'loss':>8} {'dropped':>8}")
            for name, l in sorted(px["links"].items()):
                bw = l.get("bw_bytes_per_s", 0)
                print(f"  {name:>6} {('cut' if not l.get('present', 1) else (bw or 'unlimited')):>12} "
                      f"{l.get('lat_ns', 0) / 1e6:>9.3f} {l.get('msgs', 0):>9} {l.get('bytes', 0) / 1e6:>9.3f} "
                      f"{l.get('queue_ns_mean', 0) / 1e6:>14.3f} {l.get('queue_ns_max', 0) / 1e6:>13.3f} "
                      f"{l.get('changes', 0):>8} {l.get('loss_ppm', 0) / 1e6:>8.4f} {l.get('dropped', 0):>8}")
            for c in px["changes"][-8:]:
                print(f"  change at {c['at_ms']:.1f} ms: {c['a']}->{c['b']} bw {c['bw_bytes_per_s']} B/s "
                      f"lat {c['lat_s']:g} s")
    return rc


def command(base, prefix, run, cmd):
    rc = 0
    found = 0
    for p in clusters(base, prefix, run):
        try:
            with Telemetry(os.path.join(base, p, SOCKET_NAME)) as tel:
                r = tel.query(cmd)
        except Stale:
            continue
        except TelemetryError as e:
            print(f"{p}: error: {e}")
            rc = 1
            continue
        found += 1
        res = r.get("result") if isinstance(r, dict) else None
        if res is None:
            res = "error: the cluster does not know " + cmd.split(",", 1)[0] + " (still starting?)"
        print(f"{p}: {res}")
        if res != "ok":
            rc = 1
    if found == 0:
        print(f"no running iccs cluster found (looked in {base})")
        return 1
    return rc


def main(argv=None):
    ap = argparse.ArgumentParser(prog="iccs wan", description="WAN emulation of running iccs clusters")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="links each proxy emulates, with counters and recent changes")
    s.add_argument("--json", action="store_true")
    s.add_argument("--prefix", metavar="PREFIX")
    s.add_argument("--run", metavar="RUN", help="only the clusters of this run (prefixes iccs-RUN-c*)")
    t = sub.add_parser("set", help="set link A -> B (both ways with --sym)")
    t.add_argument("a", type=int)
    t.add_argument("b", type=int)
    t.add_argument("bw", type=float, help="bandwidth [bytes/s], 0 = unlimited")
    t.add_argument("lat", type=float, help="one-way latency [s]")
    t.add_argument("--sym", action="store_true", help="both directions")
    t.add_argument("--loss", type=float, metavar="P", help="also set the loss probability (0..1); without it the "
                   "link keeps its loss")
    t.add_argument("--prefix", metavar="PREFIX")
    t.add_argument("--run", metavar="RUN", help="only the clusters of this run (prefixes iccs-RUN-c*)")
    lo = sub.add_parser("loss", help="set the loss probability of link A -> B (both ways with --sym)")
    lo.add_argument("a", type=int)
    lo.add_argument("b", type=int)
    lo.add_argument("p", type=float, help="probability that a frame is lost, 0..1")
    lo.add_argument("--sym", action="store_true", help="both directions")
    lo.add_argument("--prefix", metavar="PREFIX")
    lo.add_argument("--run", metavar="RUN", help="only the clusters of this run (prefixes iccs-RUN-c*)")
    m = sub.add_parser("mode", help="what drives the links: constant, script, series, live")
    m.add_argument("mode", choices=["constant", "script", "series", "live"])
    m.add_argument("--prefix", metavar="PREFIX")
    m.add_argument("--run", metavar="RUN", help="only the clusters of this run (prefixes iccs-RUN-c*)")
    args = ap.parse_args(argv)
    base = runtime_base()
    if args.cmd == "show":
        return show(base, args.prefix, args.run, args.json)
    if args.cmd == "set":
        if args.bw < 0 or args.lat < 0:
            ap.error("bandwidth and latency must be >= 0")
        if args.loss is not None and not 0 <= args.loss <= 1:
            ap.error(f"--loss {args.loss:g}: expected a probability from 0 to 1")
        cmd = f"/iccs/wan/set,{args.a},{args.b},{args.bw:.17g},{args.lat:.17g}" + (",sym" if args.sym else "")
        rc = command(base, args.prefix, args.run, cmd)
        if args.loss is not None and rc == 0:
            cmd = f"/iccs/wan/loss,{args.a},{args.b},{args.loss:.17g}" + (",sym" if args.sym else "")
            rc = command(base, args.prefix, args.run, cmd)
        return rc
    if args.cmd == "loss":
        if not 0 <= args.p <= 1:
            ap.error(f"loss P = {args.p:g}: expected a probability from 0 to 1")
        cmd = f"/iccs/wan/loss,{args.a},{args.b},{args.p:.17g}" + (",sym" if args.sym else "")
        return command(base, args.prefix, args.run, cmd)
    return command(base, args.prefix, args.run, f"/iccs/wan/mode,{args.mode}")


def main_reporting_errors(argv=None):
    try:
        return main(argv)
    except TelemetryError as e:  # e.g. another user's clusters: "permission denied: owned by UID N"
        print(f"iccs wan: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main_reporting_errors())
