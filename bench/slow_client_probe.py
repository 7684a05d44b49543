#!/usr/bin/env python3
"""Latency of a normal completion while the server holds thousands of hostile connections.

Starts `pagellm serve` on a model, measures 20 probe completions unloaded, then opens IDLE
silent connections and SLOW ones trickling a request head (one byte per 0.2 s each), and
measures 20 probes again (each on a fresh connection, timeout 30 s). Prints p50/p99 and the
server's thread count. Default flags only, so that an older binary can be compared:

  bench/slow_client_probe.py --binary build/pagellm --model ../shared/models/stories260K
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "e2e"))
from connection_flood import Flood, raise_file_limit, timed_completion  # noqa: E402
from pagellm_server import free_port  # noqa: E402


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


def probes(port, body, count=20):
    out = []
    for _ in range(count):
        try:
            status, seconds = timed_completion("127.0.0.1", port, body, timeout=30)
            out.append(seconds if status == 200 else float("inf"))
        except OSError:
            out.append(float("inf"))
    return out


def summary(name, values):
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
    failed = sum(v == float("inf") for v in values)
    print(f"{name}: p50 {statistics.median(values) * 1000:.1f} ms  p99 {p99 * 1000:.1f} ms  "
          f"failed {failed}/{len(values)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--slow", type=int, default=1000)
    args = ap.parse_args()
    raise_file_limit(args.idle + args.slow + 1000)
    port = free_port()
    proc = subprocess.Popen([args.binary, "serve", args.model, "--port", str(port),
                             "--served-model-name", "m", "--disable-log-requests",
                             "--kv-cache-memory", "64MiB"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if timed_completion("127.0.0.1", port, body, timeout=5)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        summary("unloaded", probes(port, body))
        start = time.time()
        flood = Flood("127.0.0.1", port, idle=args.idle, slow=args.slow).start_trickling()
        print(f"opened {args.idle} idle + {args.slow} slow connections in "
              f"{time.time() - start:.1f} s; server threads {threads(proc.pid)}")
        try:
            summary("under flood", probes(port, body))
            print(f"server threads {threads(proc.pid)}")
        finally:
            flood.close()
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
