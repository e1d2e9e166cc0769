#!/usr/bin/env python3
"""Integration test (issue 34): `iccs soak` keeps every message exactly once and in order for its
whole length under loss, duplication, reordering, WAN emulation and a key, says where it is while
it runs, and fails at once, naming the message, when a message arrives wrong.

usage: soak_run.py CLI MINUTES EVERY [inject-error]

Checks, from the run's own lines (not only its verdict):
- exit status 0 and the PASS line (inject-error: exit 1, the line naming the bad message, the FAIL
  line, within 60 s of the soak's start whatever its length);
- progress lines every EVERY seconds (at least length / EVERY - 1 of them, times increasing by EVERY,
  delivered counts increasing), each with every cluster's RSS;
- each cluster's report: PASS, and the messages sent by all clusters equal those received by all;
- the soak really was lossy and keyed: every proxy's faults line shows drops and duplicates, its WAN
  line is there, the clusters authenticate datagrams;
- the RSS line compares the baseline with the largest later figure for every cluster;
- nothing left behind (run directory, EAL files, /dev/shm, processes) and the soak's own key file gone.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_watch import Checks, Run, leftovers  # noqa: E402


def main():
    cli, minutes, every = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    inject = len(sys.argv) > 4 and sys.argv[4] == "inject-error"
    seconds = max(1, round(minutes * 60))
    t = Checks()
    keys_before = set(glob.glob("/tmp/iccs-soak-key-*"))
    args = ["soak", "--minutes", str(minutes), "--every", str(every)] + (["--inject-error"] if inject else [])
    run = Run(cli, args)
    rc = run.wait(seconds + 400)
    out = run.output()
    print(out)
    if inject:
        t.check(rc == 1, f"exit status {rc} (want 1)")
        t.check(re.search(r"^cluster 1: soak: thread 0: message 1 from cluster 0 arrived corrupt, out of order or twice",
                          out, re.M) is not None, "cluster 1 names the bad message (message 1 from cluster 0)")
        t.check(re.search(r"^FAIL: ", out, re.M) is not None, "the FAIL line")
        start = next((tl for tl, l in run.lines if l.startswith("soak: ")), None)
        took = run.ended_at - start if run.ended_at and start else None
        t.check(took is not None and took < 60, f"it ended at once, not after the soak's {seconds} s (took {took})")
    else:
        t.check(rc == 0, f"exit status {rc} (want 0)")
        t.check(re.search(r"^PASS: every message arrived exactly once, intact and in order", out, re.M) is not None,
                "the PASS line")
        prog = [(int(m.group(1)) * 60 + int(m.group(2)), int(m.group(3)), m.group(4))
                for m in re.finditer(r"^soak: +(\d+):(\d\d)  delivered (\d+) messages .*?((?:; cluster \d+ RSS [\d.]+ MiB)+)$",
                                     out, re.M)]
        t.check(len(prog) >= seconds // every - 1, f"{len(prog)} progress lines (want >= {seconds // every - 1})")
        t.check(all(abs(b[0] - a[0] - every) <= 1 for a, b in zip(prog, prog[1:])), f"one line every {every} s "
                f"({[p[0] for p in prog]})")
        t.check(all(b[1] > a[1] for a, b in zip(prog, prog[1:])) and prog and prog[-1][1] > 0,
                f"delivered counts increase ({[p[1] for p in prog]})")
        t.check(all(len(re.findall(r"cluster \d+ RSS", p[2])) == 2 for p in prog), "every line has both clusters' RSS")
        reports = re.findall(r"^cluster (\d+): (PASS|FAIL)  sent (\d+), received (\d+)", out, re.M)
        t.check(len(reports) == 2 and all(r[1] == "PASS" for r in reports), f"both clusters PASS ({reports})")
        sent, got = sum(int(r[2]) for r in reports), sum(int(r[3]) for r in reports)
        t.check(sent == got and sent > 0, f"messages sent by all ({sent}) = received by all ({got})")
        t.check(prog and got >= prog[-1][1], f"the reports' count ({got}) >= the last progress line's")
        faults = re.findall(r"^  faults \d+\.\d+: dropped (\d+) and duplicated (\d+)", out, re.M)
        t.check(len(faults) == 4 and all(int(d) > 0 and int(u) > 0 for d, u in faults),
                f"every proxy dropped and duplicated frames ({faults})")
        t.check(len(re.findall(r"^  wan \d+\.\d+: link", out, re.M)) >= 4, "every proxy's WAN line")
        t.check(len(re.findall(r"datagrams authenticated", out)) == 2, "both clusters authenticate datagrams")
        t.check(re.search(r"^soak: RSS from \d+ s to the end \(largest\): cluster 0 [\d.]+ -> [\d.]+ MiB \([+-][\d.]+%\), "
                          r"cluster 1 ", out, re.M) is not None, "the RSS line for both clusters")
    left = leftovers(run.run_id)
    t.check(not left, f"nothing left behind ({left})")
    t.check(not run.tagged_processes(), "no process of the run left")
    keys = set(glob.glob("/tmp/iccs-soak-key-*")) - keys_before
    t.check(not keys, f"the soak's key file removed ({keys})")
    return t.verdict()


if __name__ == "__main__":
    sys.exit(main())
