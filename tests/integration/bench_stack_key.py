#!/usr/bin/env python3
"""bench_stack_key.py: `iccs bench stack --key` measures authentication stage by stage (issue 37).

Runs `bench stack --key K --json` once and once more with --encrypt, small, and checks that every
stage was timed (a positive figure for each of the stages the mode has), that the EVP baseline
and the provider's GCM alone sealed the same bytes as SlidwinCipher (the benchmark refuses to
report otherwise, with auth_stages_error), that MAC-only data datagrams went through SlidwinGmac
(AES-NI, PCLMULQDQ) where /proc/cpuinfo lists aes (auth_mac_on_aesni) and encrypted ones did not,
and that the one-thread round trip ran plain and authenticated. Then `bench rtt
--key K --only iccs --blocks 4 --json` between two pairs of cluster processes taking turns: both
round trips timed (a positive median each; it printed 0 for the keyed one before), four blocks,
auth_overhead within its blocks' ratios, and `--only raw`
with a key refused (exit 2, naming --key). No figure is compared with another: speed is the
benchmark's to show, not this test's.
Usage: bench_stack_key.py ICCS_CLI
"""
import json
import os
import subprocess
import sys
import tempfile


def cpu_has_aes():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()  # SlidwinGmac's instructions
                return "aes" in flags and "pclmulqdq" in flags and "ssse3" in flags
    return False

MAC_STAGES = ["kdf_expand", "key_schedule", "seal_ack", "open_ack", "seal_data", "open_data", "seal_ack_provider",
              "seal_data_provider", "open_data_provider", "seal_ack_evp", "seal_data_evp", "replay_window"]


def rtt_checks(cli, key, failures):
    cmd = [cli, "bench", "rtt", "--key", key, "--only", "iccs", "--samples", "400", "--blocks", "4", "--polling",
           "adaptive", "--json"]
    what = " ".join(cmd[1:])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        failures.append(f"{what}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    else:
        r = json.loads(p.stdout)
        plain, auth, ratio = r.get("iccs_rtt_median_us", 0), r.get("auth_rtt_median_us", 0), r.get("auth_overhead", 0)
        of_medians = r.get("auth_overhead_of_medians", 0)
        lo, hi = r.get("auth_overhead_block_min", 0), r.get("auth_overhead_block_max", 0)
        # The plain and the keyed run took turns in 4 blocks of 100 round trips: auth_overhead is
        # the median of the 4 blocks' ratios, auth_overhead_of_medians the ratio of the runs' medians.
        if not (plain > 0 and auth > 0):
            failures.append(f"{what}: round trips plain {plain} us, authenticated {auth} us")
        elif abs(of_medians - auth / plain) > 0.01 * of_medians + 1e-3:
            failures.append(f"{what}: auth_overhead_of_medians {of_medians}, but {auth} / {plain} = {auth / plain:.4f}")
        if r.get("auth_blocks") != 4 or r.get("auth_block_rounds") != 100:
            failures.append(f"{what}: auth_blocks {r.get('auth_blocks')}, auth_block_rounds {r.get('auth_block_rounds')} "
                            "(expected 4 and 100)")
        if not (0 < lo <= ratio <= hi):
            failures.append(f"{what}: auth_overhead {ratio} not within its blocks' [{lo} .. {hi}]")
        print(f"{what}: plain {plain} us, authenticated {auth} us, auth_overhead {ratio} [{lo} .. {hi}]")
    cmd = [cli, "bench", "rtt", "--key", key, "--only", "raw"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if p.returncode != 2 or "--key" not in p.stderr:
        failures.append(f"{' '.join(cmd[1:])}: exit {p.returncode} (expected 2 naming --key): {p.stderr.strip()}")


def main():
    cli = sys.argv[1]
    fd, key = tempfile.mkstemp(prefix="iccs-key-")  # mode 0600
    os.write(fd, os.urandom(32))
    os.close(fd)
    failures = []
    try:
        for extra, stages in (([], MAC_STAGES), (["--encrypt"], MAC_STAGES + ["seal_copy"])):
            cmd = [cli, "bench", "stack", "--key", key, "--messages", "2000", "--runs", "1", "--json"] + extra
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            what = " ".join(cmd[1:])
            if p.returncode != 0:
                failures.append(f"{what}: exit {p.returncode}: {p.stderr.strip()}")
                continue
            r = json.loads(p.stdout)
            if "auth_stages_error" in r:
                failures.append(f"{what}: {r['auth_stages_error']}")
                continue
            got = r.get("auth_stages_ns", {})
            if sorted(got) != sorted(stages):
                failures.append(f"{what}: stages {sorted(got)}, expected {sorted(stages)}")
            for k, v in got.items():
                if not v > 0:
                    failures.append(f"{what}: stage {k} timed {v} ns")
            want_aesni = not extra and cpu_has_aes()
            if r.get("auth_mac_on_aesni") is not want_aesni:
                failures.append(f"{what}: auth_mac_on_aesni {r.get('auth_mac_on_aesni')}, expected {want_aesni}")
            for k in ("auth_seal_evp_over_ours", "auth_seal_provider_over_ours", "pingpong_plain_ns",
                      "pingpong_auth_ns", "auth_ns_per_msg"):
                if not r.get(k, 0) > 0:
                    failures.append(f"{what}: {k} = {r.get(k)}")
            want_mode = "aes-128-gcm aead" if extra else "aes-128-gcm mac"
            if r.get("auth_mode") != want_mode:
                failures.append(f"{what}: auth_mode {r.get('auth_mode')}, expected {want_mode}")
            print(f"{what}: stages {json.dumps(got)}, EVP/ours {r.get('auth_seal_evp_over_ours')}")
        rtt_checks(cli, key, failures)
    finally:
        os.unlink(key)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
