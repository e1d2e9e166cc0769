#!/usr/bin/env python3
"""wan_script.py: the WAN emulation's drivers on a running machine (issue 10).

1. A script that changes link 0<->1 every second is followed: `./iccs wan show --json` (telemetry
   /iccs/wan/links) lists the changes with their times, one per second and never early (with
   --long, suite long: also at most 50 ms late), with the script's values, and the current parameters of the link are the script's latest.
2. Live: `./iccs wan mode live` stops the script; `./iccs wan set 0 1 0 0.003 --sym` changes the
   link at once (seen in the counters), and an invalid set is answered with the reason; `./iccs
   wan loss 0 1 0.2 --sym` makes the link lose frames (its `dropped` counter grows, its latency
   stays) and `set ... --loss 0` ends it; a loss of 1.5 is refused.
3. A measured series (TIME_S A B BW LAT_S) is replayed: its changes come at its times (never
   early; with --long at most 50 ms late).
Both runs are `iccs run pingpong` between 2 clusters (1 thread, 1 proxy each), which must PASS.
Usage: wan_script.py ICCS_CLI SOURCE_ROOT [--long]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CLI, ROOT = sys.argv[1], sys.argv[2]
LONG = "--long" in sys.argv[3:]  # suite long: also at most 50 ms late (a loaded host delays a proxy's step)


def on_time(times, want):
    """A change is logged when the proxy applies it: never before its time (0.5 ms for rounding);
    with --long also at most 50 ms after it (two-sided: a loaded host can starve the proxy)."""
    return len(times) >= len(want) and all(w - 0.5 <= t and (not LONG or t <= w + 50) for t, w in zip(times, want))
WAN = [sys.executable, os.path.join(ROOT, "tools", "iccs_wan.py")]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def start(extra, messages):
    cmd = [CLI, "run", "pingpong", "--clusters", "2", "--threads", "1", "--proxies", "1", "--min-size", "100",
           "--messages", str(messages), "--warmup", "1", "--timeout", "120"] + extra
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def show(run_pid):
    """Our run's clusters (prefix iccs-<pid>-c<n>) from `iccs wan show --json`."""
    p = subprocess.run(WAN + ["show", "--json", "--run", str(run_pid)], stdout=subprocess.PIPE, text=True,
                       timeout=30)
    data = json.loads(p.stdout)
    return [c for c in data["clusters"] if c["prefix"].startswith(f"iccs-{run_pid}-c")]


def wait_running(run, timeout=30):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        cls = show(run.pid)
        if len(cls) == 2 and all(c["proxies"] for c in cls):
            return cls
        time.sleep(0.2)
    raise SystemExit("FAIL: the clusters did not come up: " + (run.stdout.read() if run.poll() is not None else ""))


def finish(run, what):
    out, _ = run.communicate(timeout=180)
    check(run.returncode == 0 and "PASS" in out, f"{what}: the run passed")
    if run.returncode != 0:
        print(out[-3000:])


tmp = tempfile.mkdtemp(prefix="iccs-wan-")
script = os.path.join(tmp, "every_second.wan")
with open(script, "w") as f:
    f.write("# link 0<->1 changes every second\nforever {\n  set_sym 0 1 1000000 0.002\n  sleep 1000\n"
            "  set_sym 0 1 500000 0.004\n  sleep 1000\n}\n")

# --- 1. the script is followed --------------------------------------------------------------------
run = start(["--wan-script", script], 100000)
wait_running(run)
time.sleep(4.6)
cls = show(run.pid)
for cl in cls:
    px = cl["proxies"][0]
    check(px["mode"] == "script", f"{cl['prefix']}: mode script")
    ch = [c for c in px["changes"] if (c["a"], c["b"]) == (0, 1)]
    times = [c["at_ms"] for c in ch]
    print(f"  {cl['prefix']}: changes of 0->1 at {', '.join(f'{t:.1f}' for t in times)} ms")
    check(len(ch) >= 4, f"{cl['prefix']}: at least 4 changes of link 0->1 in 4.6 s (got {len(ch)})")
    check(on_time(times, [1000 * i for i in range(len(times))]),
          f"{cl['prefix']}: change i at i x 1000 ms, never early" + (", at most 50 ms late" if LONG else ""))
    check(all(c["bw_bytes_per_s"] == (1000000 if i % 2 == 0 else 500000) and
              abs(c["lat_s"] - (0.002 if i % 2 == 0 else 0.004)) < 1e-9 for i, c in enumerate(ch)),
          f"{cl['prefix']}: the script's values, alternating")
    link = next(iter(px["links"].values()))
    check(link["msgs"] > 0 and link["changes"] == len([c for c in px["changes"]
                                                       if (c["a"], c["b"]) == tuple(map(int, next(iter(px["links"])).split("->")))]),
          f"{cl['prefix']}: link counters (msgs {link['msgs']}, changes {link['changes']})")

# --- 2. live -------------------------------------------------------------------------------------
# --run: only this run's clusters (other runs may share the host and its telemetry dir)
RUN = ["--run", str(run.pid)]
p = subprocess.run(WAN + ["mode", "live"] + RUN, stdout=subprocess.PIPE, text=True)
check(p.returncode == 0 and p.stdout.count(": ok") == 2, "wan mode live: ok from both clusters: " + p.stdout.strip())
p = subprocess.run(WAN + ["set", "0", "1", "0", "0.003", "--sym"] + RUN, stdout=subprocess.PIPE, text=True)
check(p.returncode == 0 and p.stdout.count(": ok") == 2,
      "wan set 0 1 0 0.003 --sym: ok from both clusters: " + p.stdout.strip())
time.sleep(1.5)  # past the script's next step, which must not come any more
for cl in show(run.pid):
    px = cl["proxies"][0]
    link = next(iter(px["links"].values()))
    check(px["mode"] == "live" and link["lat_ns"] == 3_000_000 and link["bw_bytes_per_s"] == 0,
          f"{cl['prefix']}: live values stay (mode {px['mode']}, lat {link['lat_ns']} ns, bw {link['bw_bytes_per_s']})")
# live loss (issue 10): `wan loss` and `wan set --loss`; the link keeps its bandwidth and latency,
# frames are dropped (counted per link) and the ping-pong goes on (slidwin recovers them)
p = subprocess.run(WAN + ["loss", "0", "1", "0.2", "--sym"] + RUN, stdout=subprocess.PIPE, text=True)
check(p.returncode == 0 and p.stdout.count(": ok") == 2, "wan loss 0 1 0.2 --sym: ok from both clusters: " +
      p.stdout.strip())
time.sleep(1.0)
for cl in show(run.pid):
    link = next(iter(cl["proxies"][0]["links"].values()))
    check(link.get("loss_ppm") == 200000 and link["lat_ns"] == 3_000_000 and link.get("dropped", 0) > 0,
          f"{cl['prefix']}: loss 0.2 applied, latency kept, frames dropped (loss_ppm {link.get('loss_ppm')}, "
          f"lat {link['lat_ns']} ns, dropped {link.get('dropped')})")
p = subprocess.run(WAN + ["set", "0", "1", "0", "0.003", "--sym", "--loss", "0"] + RUN, stdout=subprocess.PIPE,
                   text=True)
check(p.returncode == 0 and p.stdout.count(": ok") == 4, "wan set ... --loss 0: ok from both clusters twice: " +
      p.stdout.strip())
time.sleep(0.5)
for cl in show(run.pid):
    link = next(iter(cl["proxies"][0]["links"].values()))
    check(link.get("loss_ppm") == 0, f"{cl['prefix']}: loss back to 0 (loss_ppm {link.get('loss_ppm')})")
p = subprocess.run(WAN + ["loss", "0", "1", "1.5"] + RUN, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
check(p.returncode == 2 and "expected a probability from 0 to 1" in p.stdout, "wan loss 1.5 is refused: " +
      p.stdout.strip().splitlines()[-1])
p = subprocess.run(WAN + ["set", "0", "7", "1000", "0.1"] + RUN, stdout=subprocess.PIPE, text=True)
check(p.returncode == 1 and "site '7': expected a site id from 0 to 1" in p.stdout,
      "an invalid set is refused with the reason: " + p.stdout.strip().splitlines()[0] if p.stdout else "")
run.terminate()  # SIGTERM: the launcher stops its clusters cleanly
try:
    run.communicate(timeout=30)
except subprocess.TimeoutExpired:
    run.kill()

# --- 3. a measured series is replayed -------------------------------------------------------------
series = os.path.join(tmp, "measured.series")
with open(series, "w") as f:
    f.write("# time_s a b bw_bytes_per_s lat_s\n0 0 1 2000000 0.001\n0 1 0 2000000 0.001\n"
            "0.5 0 1 1000000 0.005\n1.5 0 1 4000000 0.002\n")
run = start(["--wan-series", series], 100000)
wait_running(run)
time.sleep(2.2)
for cl in show(run.pid):
    px = cl["proxies"][0]
    ch = [c for c in px["changes"] if (c["a"], c["b"]) == (0, 1)]
    got = [(round(c["at_ms"]), c["bw_bytes_per_s"], c["lat_s"]) for c in ch]
    print(f"  {cl['prefix']}: mode {px['mode']}, changes of 0->1: {got}")
    check(len(ch) == 3 and on_time([c["at_ms"] for c in ch], [0, 500, 1500]) and
          [c["bw_bytes_per_s"] for c in ch] == [2000000, 1000000, 4000000],
          f"{cl['prefix']}: the series' changes at 0, 500, 1500 ms" + (" (at most 50 ms late)" if LONG else "") +
          " with its values")
run.terminate()
try:
    run.communicate(timeout=30)
except subprocess.TimeoutExpired:
    run.kill()

# --- 4. a short run ends on its own with the script running ----------------------------------------
run = start(["--wan-script", script], 200)
finish(run, "pingpong with a script, 200 rounds")

shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print(f"FAIL: {len(failures)} checks failed")
    sys.exit(1)
print("PASS: the script and the series were followed, live changes applied")
