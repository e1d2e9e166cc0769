#!/usr/bin/env python3
"""iccs_stat.py: the proxy counters of every running iccs cluster, as one table (`./iccs stat`),
and the DSM counters of running PARMACS programs (telemetry /iccs/dsm over the iccs transport; the
file /tmp/iccs-<run>/dsm-c<cluster>.json over direct and delay, which have no EAL).

Each cluster is a process with its own DPDK EAL, file prefix `iccs-<run>-c<cluster>`, and so its
own telemetry socket `<runtime dir>/dpdk_telemetry.v2` (DESIGN.md §6, §8). This asks every live
one for `/iccs/proxies`, then `/iccs/proxy/stats,<n>` for each proxy, and prints one row a proxy.

DPDK telemetry v2: a SOCK_SEQPACKET unix socket; the server first sends a JSON greeting
({"version", "pid", "max_output_len"}), then answers each command (one packet) with one packet
{"<command>": <data>}; data is null for an unknown command or a callback that failed.

Python 3 standard library only. Exit status: 0, or 1 when a cluster that is there could not be
read (the others are still printed), or 2 for a wrong argument.
"""
import argparse
import errno
import json
import os
import re
import signal
import socket
import sys
import time

SOCKET_NAME = "dpdk_telemetry.v2"
TIMEOUT_S = 2.0
DEFAULT_MAX_OUTPUT = 16384
PREFIX_RE = re.compile(r"^iccs-(.+)-c(\d+)$")

# Table columns: (header, function of a proxy's counters -> value, format).
COLUMNS = [
    ("msgs tx", lambda p: p.get("msgs_tx", 0), "int"),
    ("msgs rx", lambda p: p.get("msgs_rx", 0), "int"),
    ("MB tx", lambda p: p.get("bytes_tx", 0) / 1e6, "mb"),
    ("MB rx", lambda p: p.get("bytes_rx", 0) / 1e6, "mb"),
    ("retx", lambda p: p.get("tx_retx", 0), "int"),
    ("dup rx", lambda p: p.get("rx_dup", 0), "int"),
    ("csum drops", lambda p: p.get("drop_ip_csum", 0) + p.get("drop_udp_csum", 0), "int"),
    ("reass drops", lambda p: sum(v for k, v in p.items() if k.startswith("drop_reass_")), "int"),
    # issues 17, 37: frames not of the run's own (another token, out of the window, before the
    # handshake, for no sub-connection, a failed tag, a replayed counter, beyond the handshake
    # budget); by reason in --json
    ("foreign", lambda p: sum(p.get(k, 0) for k in ("drop_token", "drop_out_of_window", "drop_unsynced",
                                                     "drop_unknown_subconn", "drop_auth", "drop_replay",
                                                     "drop_handshake_rate")), "int"),
    ("win stalls", lambda p: p.get("window_stalls", 0), "int"),
    ("ring full", lambda p: p.get("ring_full", 0), "int"),
    ("util", lambda p: p.get("utilization"), "ratio"),
    ("queue len", lambda p: p.get("queue_len"), "ratio"),
]
RATE_COLUMNS = {"msgs tx": "msgs_tx", "msgs rx": "msgs_rx", "MB tx": "bytes_tx", "MB rx": "bytes_rx"}


class TelemetryError(Exception):
    pass


class Stale(TelemetryError):
    """Nobody listens on the socket (the cluster died without cleaning up its runtime dir)."""


def runtime_base():
    """Where EAL runtime dirs live; mirrors eal_create_runtime_dir() and proxy/dpdk_env.cpp."""
    if os.getuid() == 0:
        base = "/var/run"
    else:
        base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, "dpdk")


ROOT_RUNTIME_BASE = "/var/run/dpdk"


def owner_denied(path):
    """The one-line reason another user's cluster cannot be read (issue 17: runtime dirs are
    0700, telemetry sockets 0600)."""
    try:
        uid = os.stat(path).st_uid
    except OSError:
        uid = "?"
    return f"{path}: permission denied: owned by UID {uid} (run this as that user)"


def foreign_denied(base):
    """Clusters started by root live in /var/run/dpdk, which another user may not list: say so
    instead of "no running cluster"."""
    if os.getuid() == 0 or base == ROOT_RUNTIME_BASE or not os.path.isdir(ROOT_RUNTIME_BASE):
        return []
    try:
        os.listdir(ROOT_RUNTIME_BASE)
    except PermissionError:
        return [owner_denied(ROOT_RUNTIME_BASE)]
    except OSError:
        pass
    return []


def prefix_key(prefix):
    m = PREFIX_RE.match(prefix)
    if not m:
        return (1, prefix, 0)
    run = m.group(1)
    return (0, (0, int(run), "") if run.isdigit() else (1, 0, run), int(m.group(2)))


class Telemetry:
    """One connection to a DPDK telemetry v2 socket."""

    def __init__(self, path, timeout=TIMEOUT_S):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as e:
            self.sock.close()
            if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
                raise Stale(f"{path}: {os.strerror(e.errno)} (no process listens: a stale runtime dir?)") from None
            if isinstance(e, socket.timeout):
                raise TelemetryError(f"{path}: connect timed out after {timeout:g} s") from None
            if e.errno in (errno.EACCES, errno.EPERM):
                raise TelemetryError(owner_denied(path)) from None
            raise TelemetryError(f"{path}: cannot connect: {e.strerror or e}") from None
        self.max_output = DEFAULT_MAX_OUTPUT
        try:
            greeting = self._read("greeting")
        except TelemetryError:
            self.close()
            raise
        if not isinstance(greeting, dict) or "max_output_len" not in greeting:
            self.close()
            raise TelemetryError(f"{path}: unexpected greeting {greeting!r} (not DPDK telemetry v2?)")
        self.version = greeting.get("version")
        self.pid = greeting.get("pid")
        try:
            self.max_output = max(int(greeting["max_output_len"]), 1024)
        except (TypeError, ValueError):
            pass

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_packet(self, what):
        """One whole packet. SEQPACKET keeps boundaries but truncates a packet longer than the
        buffer, so its length is peeked first (MSG_TRUNC returns the real length)."""
        try:
            # (a 1-byte buffer: Python does not call recv() at all for 0 bytes)
            size = self.sock.recv_into(bytearray(1), 1, socket.MSG_PEEK | socket.MSG_TRUNC)
            data = self.sock.recv(max(size, self.max_output)) if size > 0 else b""
        except socket.timeout:
            raise TelemetryError(f"{self.path}: no {what} within {self.sock.gettimeout():g} s") from None
        except OSError as e:
            raise TelemetryError(f"{self.path}: reading the {what}: {e.strerror or e}") from None
        return data

    def _read(self, what):
        """One JSON reply. A reply that does not parse yet is read on (in case the server ever
        splits it), until it parses, the connection closes, or the timeout."""
        buf = b""
        deadline = time.monotonic() + (self.sock.gettimeout() or TIMEOUT_S)
        while True:
            try:
                data = self._recv_packet(what)
            except TelemetryError:
                if buf:
                    raise TelemetryError(f"{self.path}: the {what} is not JSON: {buf[:120]!r}") from None
                raise
            if not data:
                if buf:
                    raise TelemetryError(f"{self.path}: connection closed in the middle of the {what} "
                                         f"({len(buf)} bytes: {buf[:80]!r}...)")
                raise TelemetryError(f"{self.path}: connection closed before the {what} (the cluster is "
                                     f"stopping, or has too many telemetry clients)")
            buf += data
            try:
                return json.loads(buf.decode("utf-8", errors="replace"))
            except ValueError:
                if time.monotonic() > deadline:
                    raise TelemetryError(f"{self.path}: the {what} is not JSON: {buf[:120]!r}") from None

    def query(self, command):
        """The data of one command (None when the server answers null: unknown or failed)."""
        try:
            self.sock.sendall(command.encode())
        except socket.timeout:
            raise TelemetryError(f"{self.path}: sending {command} timed out") from None
        except OSError as e:
            raise TelemetryError(f"{self.path}: sending {command}: {e.strerror or e}") from None
        reply = self._read(f"reply to {command}")
        name = command.split(",", 1)[0]
        if not isinstance(reply, dict) or name not in reply:
            raise TelemetryError(f"{self.path}: unexpected reply to {command}: {str(reply)[:120]}")
        return reply[name]


def derive(stats):
    total = stats.get("total_ns", 0)
    stats["utilization"] = round(stats.get("busy_ns", 0) / total, 4) if total else None
    stats["queue_len"] = round(stats.get("queue_ns_sum", 0) / total, 4) if total else None
    return stats


def read_cluster(base, prefix):
    """The cluster's description, with "error" set when it could not be read; raises Stale."""
    m = PREFIX_RE.match(prefix)
    cl = {"run": m.group(1) if m else None, "cluster": int(m.group(2)) if m else None,
          "prefix": prefix, "pid": None, "state": "running", "proxies": []}
    path = os.path.join(base, prefix, SOCKET_NAME)
    try:
        with Telemetry(path) as tel:
            cl["pid"] = tel.pid
            indexes = tel.query("/iccs/proxies")
            if indexes is None:
                # The EAL (and its telemetry) is up, the proxies are not yet: /iccs/* is
                # registered once the links are. Not an error.
                cl["state"] = "starting"
                return cl
            if not isinstance(indexes, list):
                raise TelemetryError(f"{path}: /iccs/proxies answered {str(indexes)[:80]}, not a list")
            for n in indexes:
                stats = tel.query(f"/iccs/proxy/stats,{n}")
                if not isinstance(stats, dict):
                    raise TelemetryError(f"{path}: /iccs/proxy/stats,{n} answered {stats!r}")
                stats.setdefault("proxy", n)
                cl["proxies"].append(derive(stats))
            # A PARMACS program's DSM counters (dsm/README.md), when the cluster runs one.
            dsm = tel.query("/iccs/dsm")
            if isinstance(dsm, dict):
                cl["dsm"] = dict(dsm, run=cl["run"], transport="iccs")
    except Stale:
        raise
    except TelemetryError as e:
        cl["state"] = "error"
        cl["error"] = str(e)
    return cl


def list_prefixes(base):
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    except PermissionError:
        raise TelemetryError(owner_denied(base)) from None
    except OSError as e:
        raise TelemetryError(f"cannot list {base}: {e.strerror or e}") from None
    return sorted((n for n in names if PREFIX_RE.match(n)), key=prefix_key)


def collect(base, only_prefix, verbose, log):
    """(clusters, errors): every live cluster read; errors are the ones that could not be."""
    if only_prefix is not None:
        prefixes = [only_prefix]
    else:
        prefixes = list_prefixes(base)
    clusters, errors = [], []
    for prefix in prefixes:
        sock = os.path.join(base, prefix, SOCKET_NAME)
        if only_prefix is None and not os.path.exists(sock):
            if verbose:
                log(f"skipping {prefix}: no {SOCKET_NAME} (stale, or telemetry not up yet)")
            continue
        if only_prefix is not None and not os.path.isdir(os.path.join(base, prefix)):
            errors.append(f"no running cluster with prefix {prefix} (no {os.path.join(base, prefix)})")
            continue
        try:
            cl = read_cluster(base, prefix)
        except Stale as e:
            if only_prefix is not None:
                errors.append(f"{prefix}: cannot connect: {e}")
            elif verbose:
                log(f"skipping {prefix}: {e}")
            continue
        if "error" in cl:
            errors.append(f"{prefix}: {cl['error']}")
        clusters.append(cl)
    if not clusters and only_prefix is None:
        errors += foreign_denied(base)
    return clusters, errors


DSM_FILE_GLOB = "/tmp/iccs-*/dsm-c*.json"
DSM_COLUMNS = [
    ("read flt", lambda d: d.get("read_faults", 0), "int"),
    ("write flt", lambda d: d.get("write_faults", 0), "int"),
    ("fetches", lambda d: d.get("page_fetches", 0), "int"),
    ("fetch us", lambda d: d["page_fetch_ns"] / d["page_fetches"] / 1e3 if d.get("page_fetches") else None, "float"),
    ("diffs", lambda d: d.get("diffs_sent", 0), "int"),
    ("diff MB", lambda d: d.get("diff_bytes", 0) / 1e6, "mb"),
    ("invals", lambda d: d.get("invalidations", 0), "int"),
    ("locks", lambda d: d.get("lock_acquires", 0), "int"),
    ("lock wait ms", lambda d: d.get("lock_wait_ns", 0) / 1e6, "float"),
    ("barriers", lambda d: d.get("barriers", 0), "int"),
    ("bar wait ms", lambda d: d.get("barrier_wait_ns", 0) / 1e6, "float"),
]


def dsm_files():
    """DSM counters of running PARMACS programs over direct/delay (no EAL, no telemetry): each
    cluster process rewrites /tmp/iccs-<run>/dsm-c<cluster>.json every second."""
    import glob
    out = []
    for path in sorted(glob.glob(DSM_FILE_GLOB)):
        try:
            with open(path) as f:
                d = json.load(f)
            os.kill(int(d["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue  # the run ended (or is ending) meanwhile
        out.append(d)
    return out


def dsm_table(rows):
    headers = ["run", "cluster", "transport"] + [c[0] for c in DSM_COLUMNS]
    cells = [[str(d.get("run", "-")), str(d.get("cluster", "-")), str(d.get("transport", "-"))] +
             [fmt(get(d), kind) for _, get, kind in DSM_COLUMNS] for d in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip()
    return "\n".join(["DSM (PARMACS programs)", line(headers)] + [line(r) for r in cells])


def fmt(value, kind):
    if value is None:
        return "-"
    if kind == "int":
        return str(int(round(value)))
    if kind == "mb":
        return f"{value:.2f}"
    return f"{value:.2f}"


def table(clusters, prev=None, dt=None):
    """The table's text. With prev (key -> counters) and dt, the msgs/MB columns are rates per
    second and util/queue len are over the interval."""
    headers = ["run", "cluster", "proxy"] + [c[0] for c in COLUMNS]
    rows = []
    for cl in clusters:
        run = cl["run"] if cl["run"] is not None else cl["prefix"]
        cnum = "-" if cl["cluster"] is None else str(cl["cluster"])
        if cl.get("state") == "starting":
            rows.append([run, cnum, "-", "(starting: telemetry is up, the proxies are not yet)"])
            continue
        if "error" in cl and not cl["proxies"]:
            rows.append([run, cnum, "-", "(could not be read: " + cl["error"].split(": ", 1)[-1] + ")"])
            continue
        for p in cl["proxies"]:
            key = (cl["prefix"], p.get("proxy"))
            old = prev.get(key) if prev is not None else None
            row = [run, cnum, str(p.get("proxy", "-"))]
            for name, get, kind in COLUMNS:
                if prev is not None and name in RATE_COLUMNS:
                    field = RATE_COLUMNS[name]
                    if old is None or dt is None or dt <= 0 or p.get(field, 0) < old.get(field, 0):
                        v = None
                    else:
                        v = (p.get(field, 0) - old.get(field, 0)) / dt
                        if kind == "mb":
                            v /= 1e6
                    row.append(fmt(v, kind))
                elif prev is not None and name in ("util", "queue len"):
                    row.append(fmt(interval_ratio(p, old, "busy_ns" if name == "util" else "queue_ns_sum"),
                                   kind))
                else:
                    row.append(fmt(get(p), kind))
            rows.append(row)
    if prev is not None:
        headers = [("%s/s" % h if h in RATE_COLUMNS else h) for h in headers]
    widths = [len(h) for h in headers]
    for r in rows:
        if len(r) == len(headers):
            widths = [max(w, len(c)) for w, c in zip(widths, r)]
    out = []

    def line(cells):
        parts = []
        for i, c in enumerate(cells):
            parts.append(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]))
        return "  ".join(parts).rstrip()

    out.append(line(headers))
    for r in rows:
        if len(r) == len(headers):
            out.append(line(r))
        else:  # a cluster that could not be read: its message after run, cluster, proxy
            out.append(line(r[:3]) + "  " + r[3])
    return "\n".join(out)


def interval_ratio(p, old, field):
    if old is None:
        total = p.get("total_ns", 0)
        return p.get(field, 0) / total if total else None
    dtot = p.get("total_ns", 0) - old.get("total_ns", 0)
    dval = p.get(field, 0) - old.get(field, 0)
    if dtot <= 0 or dval < 0:
        return None
    return dval / dtot


def snapshot(clusters):
    return {(cl["prefix"], p.get("proxy")): p for cl in clusters for p in cl["proxies"]}


def rates(clusters, prev, dt):
    """Adds "rates" (per second over the interval) to each proxy, for --watch --json."""
    for cl in clusters:
        for p in cl["proxies"]:
            old = prev.get((cl["prefix"], p.get("proxy")))
            r = {}
            for field in ("msgs_tx", "msgs_rx", "bytes_tx", "bytes_rx"):
                if old is not None and dt > 0 and p.get(field, 0) >= old.get(field, 0):
                    r[field + "_per_s"] = round((p.get(field, 0) - old.get(field, 0)) / dt, 1)
            for name, field in (("utilization", "busy_ns"), ("queue_len", "queue_ns_sum")):
                v = interval_ratio(p, old, field) if old is not None else None
                if v is not None:
                    r[name] = round(v, 4)
            p["interval"] = r


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="iccs stat",
        description="Counters of every running iccs cluster's proxies, read over DPDK telemetry "
                    "(/iccs/proxies, /iccs/proxy/stats,<n>), as one table: one row a proxy; then the DSM "
                    "counters of running PARMACS programs (/iccs/dsm; over direct/delay the file "
                    "/tmp/iccs-<run>/dsm-c<cluster>.json), one row a cluster.")
    ap.add_argument("--json", action="store_true",
                    help='one JSON object {"clusters": [...]} with every raw counter and the derived '
                         '"utilization" and "queue_len" (with --watch: one object a line)')
    ap.add_argument("--watch", type=float, metavar="SECONDS",
                    help="refresh every SECONDS until Ctrl-C; msgs and MB columns become rates per "
                         "second, util and queue len are over the interval")
    ap.add_argument("--prefix", metavar="PREFIX", help="only the cluster with this EAL file prefix")
    ap.add_argument("--verbose", "-v", action="store_true", help="say which runtime dirs were skipped and why")
    args = ap.parse_args(argv)
    if args.watch is not None and not args.watch > 0:
        ap.error("--watch needs a number of seconds > 0")
    if args.prefix is not None and (not args.prefix or "/" in args.prefix or args.prefix in (".", "..")):
        ap.error(f"--prefix needs an EAL file prefix such as iccs-1234-c0 (got {args.prefix!r})")

    base = runtime_base()

    def log(msg):
        print(f"iccs stat: {msg}", file=sys.stderr, flush=True)

    def none_found():
        if args.prefix is not None:
            return f"no running iccs cluster with prefix {args.prefix} (looked in {base})"
        return f"no running iccs cluster found (looked in {base})"

    def once():
        try:
            return collect(base, args.prefix, args.verbose, log)
        except TelemetryError as e:
            return [], [str(e)]

    def dsm_of(clusters):
        return [cl["dsm"] for cl in clusters if "dsm" in cl] + ([] if args.prefix else dsm_files())

    if args.watch is None:
        clusters, errors = once()
        dsm = dsm_of(clusters)
        for e in errors:
            log(e)
        if args.json:
            print(json.dumps({"clusters": clusters, "dsm": dsm}, indent=2))
        else:
            if clusters:
                print(table(clusters))
            if dsm:
                print(("\n" if clusters else "") + dsm_table(dsm))
            if not clusters and not dsm and not errors:
                print(none_found())
        return 1 if errors else 0

    # --watch. Ctrl-C stops it even when started with SIGINT ignored (a background job of a
    # non-interactive shell), and SIGTERM stops it quietly too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tty = sys.stdout.isatty() and not args.json
    prev, prev_t = None, None
    try:
        while True:
            clusters, errors = once()
            now = time.monotonic()
            dt = (now - prev_t) if prev_t is not None else None
            if args.json:
                if prev is not None:
                    rates(clusters, prev, dt)
                print(json.dumps({"time": round(time.time(), 3), "interval_s": round(dt, 3) if dt else None,
                                  "clusters": clusters, "dsm": dsm_of(clusters)}), flush=True)
                for e in errors:
                    log(e)
            else:
                if tty:
                    sys.stdout.write("\033[H\033[2J")
                head = (f"iccs stat  {time.strftime('%H:%M:%S')}  every {args.watch:g} s"
                        + ("" if prev is not None else "  (totals; rates from the next refresh)")
                        + "  Ctrl-C to stop")
                print(head)
                for e in errors:
                    print(f"  error: {e}")
                dsm = dsm_of(clusters)
                if clusters:
                    print(table(clusters, prev if prev is not None else None, dt))
                if dsm:
                    print(dsm_table(dsm))
                if not clusters and not dsm:
                    print(none_found())
                print(flush=True)
            prev, prev_t = snapshot(clusters), now
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
