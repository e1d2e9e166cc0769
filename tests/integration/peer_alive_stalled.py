#!/usr/bin/env python3
"""A peer that is alive while nothing of it can be delivered is not reported down (proxy/README.md,
liveness). `iccs run alltoall` between 2 clusters (1 thread, 1 proxy each) whose link 0->1 loses
every frame for 1.5 s (a WAN script, 0.5 s after the links came up), with the retransmission
timer at 200 ms at least and 5 s at most, and the peer time-out at 2.2 s. The burst waits 0.7 s
after the connections are open (--gap-us), so it runs into the cut however fast the host: on a
quiet host the 10,000 messages were all through before the cut began.

During the cut cluster 0 fills its send window; every copy of the datagram at its head is lost,
and the timer backs off (resends 0.2, 0.6, 1.4 s after the first loss, all inside the cut, then
3.0 s). After the cut cluster 1 hears cluster 0 again (its acks, its keepalive frames), but holds
nothing in order from it until that resend: nothing of cluster 0 is delivered for some 3 s. The
old rule (heard = a message handed on) reported cluster 0 down at 2.2 s ('cluster 0 stopped
answering') and the run failed; now every valid frame counts, the run passes.

usage: peer_alive_stalled.py CLI memif|udp
"""
import os
import re
import subprocess
import sys
import tempfile

SCRIPT = "sleep 500\nloss 0 1 1.0\nsleep 1500\nloss 0 1 0\n"


def main():
    cli, fabric = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="iccs-alive-") as tmp:
        script = os.path.join(tmp, "cut.wan")
        with open(script, "w") as f:
            f.write(SCRIPT)
        cmd = [cli, "run", "alltoall", "--clusters", "2", "--threads", "1", "--proxies", "1", "--fabric", fabric,
               "--polling", "adaptive", "--messages", "10000", "--min-size", "1", "--max-size", "9000",
               "--gap-us", "700000",
               "--wan-script", script, "--timeout", "120",
               "--set", "cluster.peer_timeout_ms=2200", "--set", "slidwin.rto_min_us=200000",
               "--set", "slidwin.rto_initial_us=200000", "--set", "slidwin.rto_max_us=5000000"]
        print("$", " ".join(cmd), flush=True)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            print("FAIL: the run did not end within 240 s")
            return 1
    out = p.stdout
    sys.stdout.write(out)
    ok = True

    def check(cond, what):
        nonlocal ok
        print(("ok: " if cond else "FAIL: ") + what)
        ok &= bool(cond)

    dropped = [int(n) for n in re.findall(r"wan 1\.0: link 0->1 msgs \d+ bytes \d+ dropped (\d+)", out)]
    check(dropped and dropped[0] > 0, f"the cut happened: link 0->1 lost frames ({dropped})")
    check("stopped answering" not in out, "no cluster reported the other down")
    check(p.returncode == 0 and "PASS: every message arrived exactly once" in out,
          f"the run passed: every message once, intact, in order (exit status {p.returncode})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
