#!/usr/bin/env python3
"""Memory and latency of oversized requests against `pagellm serve`.

Sends request bodies of about 8 MiB (a completion prompt, and /tokenize) to a server on
stories260K and samples the server's RSS every 10 ms: prints the peak above the idle baseline,
the time to the answer, the status, and the RSS after 1 and after N requests (sequential, then
8 concurrent), so that a ratchet (memory kept by the allocator) shows:

  bench/big_request_memory.py --binary build/pagellm --model ../shared/models/stories260K
"""

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "e2e"))
from pagellm_server import free_port  # noqa: E402


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def settled_rss_mib(pid, timeout=3.0):
    """RSS once the server is done with the last request: a client has its response before
    the server thread frees the request's body (8 MiB), so an immediate sample can catch it."""
    deadline = time.time() + timeout
    last = rss_mib(pid)
    while time.time() < deadline:
        time.sleep(0.1)
        now = rss_mib(pid)
        if now == last:
            break
        last = now
    return last


class Sampler:
    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.01)

    def stop(self):
        self._stop.set()
        self._t.join()
        return self.peak


def post(port, path, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    start = time.perf_counter()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, time.perf_counter() - start, data


def big_text(size):
    rng = random.Random(1)
    words = ["the", "cat", "sat", "on", "a", "mat", "Lily", "went", "to", "park", "and", "ball"]
    out, n = [], 0
    while n < size:
        w = rng.choice(words)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--extra", nargs="*", default=[], help="more serve flags")
    args = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen([args.binary, "serve", args.model, "--port", str(port),
                             "--served-model-name", "m", "--disable-log-requests",
                             "--kv-cache-memory", "64MiB"] + args.extra,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if post(port, "/v1/completions", json.dumps(
                        {"model": "m", "prompt": "hi", "max_tokens": 2}))[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        text = big_text(8 * 1024 * 1024 - 200)
        bodies = {
            "/v1/completions": json.dumps({"model": "m", "prompt": text, "max_tokens": 4}),
            "/tokenize": json.dumps({"model": "m", "prompt": text}),
        }
        for path, body in bodies.items():
            base = settled_rss_mib(proc.pid)
            sampler = Sampler(proc.pid)
            status, seconds, data = post(port, path, body)
            peak = sampler.stop()
            after_one = settled_rss_mib(proc.pid)
            for _ in range(args.repeat - 1):
                post(port, path, body)
            after_seq = settled_rss_mib(proc.pid)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda _: post(port, path, body), range(args.repeat)))
            after_conc = settled_rss_mib(proc.pid)
            print(f"{path}: {len(body) / 2**20:.1f} MiB body -> {status} in {seconds:.2f} s; "
                  f"RSS base {base:.0f} MiB, peak +{peak - base:.0f} MiB, after 1: "
                  f"{after_one:.0f}, after {args.repeat} sequential: {after_seq:.0f}, after "
                  f"{args.repeat} more 8 at a time: {after_conc:.0f} MiB")
            print("   ", data[:200].decode("utf-8", "replace"))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
