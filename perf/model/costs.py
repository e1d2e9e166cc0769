"""costs.py: the cost file (`./iccs experiment calibrate` writes it, the model reads it).

JSON, times in ns (perf/model/README.md, "The cost file"):
  proxy_service  tx_base_ns, tx_per_byte_ns, tx_per_fragment_ns, rx_... : one proxy's CPU time for
                 one message of n bytes in f IP fragments (half the stack's send + receive + ack
                 cost each way, the fragment cost from the one-way latency's steps)
  fabric         latency_ns per polling mode (inline, adaptive: the idle one-way latency less the
                 two proxies' service and the ring hand-offs), bytes_per_ns (null: no bandwidth term)
  ring_handoff_ns  compute thread <-> proxy ring (half the shared-memory floor round trip)
  adaptive       spin_ns, sleep_ns (the proxy's configuration), wake_ns (a sleeping proxy woken
                 by a ring hand-off: the one-way latency after a long idle, less the one right after
                 work, less half a sleep for the receiving proxy's segment)
  acks           ack_ns (one ack frame at each end), ack_every, delack_ns (slidwin's)
  direct_latency_ns  `no delay`: a one-way message between clusters over transport direct
  mtu_bytes, header_bytes
"""
import glob
import json
import math
import os

from sim import Costs

FIELDS = ("tx_base_ns", "tx_per_byte_ns", "tx_per_fragment_ns", "rx_base_ns", "rx_per_byte_ns", "rx_per_fragment_ns")


class CostFileError(Exception):
    pass


def load(path, polling="adaptive"):
    """Costs from a cost file, for proxies polling `polling` (adaptive or busy/inline)."""
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise CostFileError(f"cost file {path}: {e}")
    try:
        ps = j["proxy_service"]
        fab = j["fabric"]
        mode = "adaptive" if polling == "adaptive" else "inline"
        lat = fab["latency_ns"][mode]
        bw = fab.get("bytes_per_ns")
        ad = j["adaptive"]
        c = Costs(**{k: float(ps[k]) for k in FIELDS}, fabric_latency_ns=float(lat),
                  fabric_bytes_per_ns=float(bw) if bw else math.inf, handoff_ns=float(j["ring_handoff_ns"]),
                  direct_latency_ns=float(j["direct_latency_ns"]), mtu_bytes=int(j["mtu_bytes"]),
                  header_bytes=int(j["header_bytes"]), polling=polling if polling == "adaptive" else "busy",
                  spin_ns=float(ad["spin_ns"]), sleep_ns=float(ad["sleep_ns"]), wake_ns=float(ad["wake_ns"]))
        acks = j.get("acks")  # absent in a file from before acks were modeled: no ack frames
        if acks:
            c.ack_ns, c.ack_every, c.delack_ns = float(acks["ack_ns"]), int(acks["ack_every"]), float(acks["delack_ns"])
    except (KeyError, TypeError, ValueError) as e:
        raise CostFileError(f"cost file {path}: missing or bad key {e} (written by ./iccs experiment calibrate)")
    return c


def newest(results_root):
    """The newest results/calibrate/*/costs.json, or None."""
    found = sorted(glob.glob(os.path.join(results_root, "calibrate", "*", "costs.json")))
    return found[-1] if found else None
