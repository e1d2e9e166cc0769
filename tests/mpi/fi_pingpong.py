#!/usr/bin/env python3
"""fi_pingpong (Debian's libfabric-bin) over the provider: a server and a client process as ranks 0
and 1 of a machine of 2 clusters x 1 rank (ICCS_RANK/ICCS_RANKS: no MPI launcher), RDM endpoints,
tagged or untagged messages, every size from 64 B to 1 MiB with fi_pingpong's data checks on
(-c): both must exit 0 and print a result line for every size; nothing of the run is left.

Usage: fi_pingpong.py PROVIDER_DIR [--fabric memif|udp] [--transport iccs|direct|delay] [--mode msg|tagged]
Exit status 77 (skip) when fi_pingpong is not installed.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_mpi import left_behind  # noqa: E402


def main():
    provider_dir = sys.argv[1]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    fabric, transport, mode = args.get("--fabric", "memif"), args.get("--transport", "iccs"), args.get("--mode", "msg")
    exe = shutil.which("fi_pingpong")
    if exe is None:
        print("SKIP: fi_pingpong is not installed (Debian's libfabric-bin; ./iccs installs it)")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="iccs-fipp-")
    run = f"p{os.getpid() % 1000000}"
    try:
        cfg = os.path.join(tmp, "machine.toml")
        with open(cfg, "w") as f:
            f.write(f'[machine]\nclusters = 2\nfabric = "{fabric}"\n[cluster]\ncompute_threads = 1\nproxies = 1\n'
                    'polling = "adaptive"\n')
        with socket.socket() as s:  # a free control port for the two to meet on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, FI_PROVIDER_PATH=provider_dir, ICCS_CONFIG=cfg, ICCS_RUN_ID=run, ICCS_RANKS="2",
                   ICCS_TRANSPORT=transport)
        common = [exe, "-p", "iccs", "-e", "rdm", "-m", mode, "-c", "-I", "20", "-S", "all"]
        server = subprocess.Popen(common + ["-B", str(port)], env=dict(env, ICCS_RANK="0"), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
        client = subprocess.Popen(common + ["-P", str(port), "127.0.0.1"], env=dict(env, ICCS_RANK="1"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            cout, _ = client.communicate(timeout=240)
            sout, _ = server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            client.kill()
            server.kill()
            print(client.communicate()[0], server.communicate()[0])
            print("FAIL: fi_pingpong did not end (a hang)")
            sys.exit(1)
        print("client:\n" + cout + "server:\n" + sout)
        if client.returncode != 0 or server.returncode != 0:
            print(f"FAIL: exit status client {client.returncode}, server {server.returncode}")
            sys.exit(1)
        sizes = re.findall(r"^(\d+[km]?)\s+20\s+=20\s", cout, re.M)
        for want in ("64", "1k", "4k", "64k", "1m"):
            if want not in sizes:
                print(f"FAIL: no result for {want} bytes (got {sizes})")
                sys.exit(1)
        left = left_behind("m" + run)
        if left:
            print(f"FAIL: left behind: {left}")
            sys.exit(1)
        print(f"PASS: {len(sizes)} sizes, data checked")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
