#!/usr/bin/env python3
"""Time to first token of short requests while one huge `n` request runs (issue 23, fairness).

Starts `pagellm serve` on a model and alternates two kinds of rounds:
  unloaded: CONCURRENCY short streaming completions at once;
  loaded:   one streaming completion with n=N, max_tokens=TOKENS, logprobs=LOGPROBS is started,
            and once it streams its first tokens (plus --settle seconds) the same
            CONCURRENCY short completions are sent; the big one is then dropped (the server
            aborts it on disconnect) and the server is let go idle.
Each short request's TTFT is the time from sending it to its first streamed text. Per round
the p99 (nearest rank) is taken; the medians of those p99s over the rounds and their ratio
are printed. Example (SmolLM-135M shape, random weights from tools/gen_model.py):

  bench/fairness_probe.py --binary build/pagellm --model /tmp/smollm --rounds 5 \
      --extra --max-num-seqs 256
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "e2e"))
from pagellm_server import free_port  # noqa: E402

SHORT_PROMPT = "Once upon a time there was a little girl who lived in a village near the forest"


def open_stream(port, body, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"status {resp.status}: {resp.read()[:300]!r}")
    return conn, resp


def first_text(resp):
    """Reads SSE events until one carries text; returns False at the end of the stream."""
    while True:
        line = resp.readline()
        if not line:
            return False
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        event = json.loads(line[6:])
        if any(c.get("text") for c in event.get("choices", [])):
            return True


def short_ttft(port, max_tokens, seed, tag):
    # A distinct first word per request, so that no short prompt is a prefix-cache hit.
    body = {"model": "m", "prompt": f"{tag} {SHORT_PROMPT}", "max_tokens": max_tokens, "stream": True,
            "seed": seed, "ignore_eos": True}
    start = time.perf_counter()
    conn, resp = open_stream(port, body)
    ok = first_text(resp)
    ttft = time.perf_counter() - start
    resp.read()
    conn.close()
    if not ok:
        raise RuntimeError("short request streamed no text")
    return ttft


def short_round(port, concurrency, max_tokens, tag):
    out = [None] * concurrency
    errors = []

    def one(i):
        try:
            out[i] = short_ttft(port, max_tokens, i, f"{tag}x{i}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_idle(port, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metric(port, "vllm:num_requests_running") == 0 and \
                metric(port, "vllm:num_requests_waiting") == 0:
            return
        time.sleep(0.05)
    raise RuntimeError("server did not go idle")


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each kind")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--short-tokens", type=int, default=8, help="max_tokens of a short request")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=512, help="max_tokens of the big request")
    ap.add_argument("--logprobs", type=int, default=20)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between the big request's first tokens and the short ones")
    ap.add_argument("--verbose", action="store_true", help="print every TTFT (ms)")
    ap.add_argument("--server-log", help="file for the server's output (default: discarded)")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more serve flags")
    args = ap.parse_args()
    port = free_port()
    cmd = [args.binary, "serve", args.model, "--port", str(port), "--served-model-name", "m",
           "--disable-log-requests", "--kv-cache-memory", "2GiB"] + args.extra
    log = open(args.server_log, "w") if args.server_log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        short_round(port, 2, args.short_tokens, "warm")
        big = {"model": "m", "prompt": SHORT_PROMPT, "n": args.n, "max_tokens": args.tokens,
               "logprobs": args.logprobs, "stream": True, "ignore_eos": True, "seed": 7}
        unloaded, loaded = [], []
        for r in range(args.rounds):
            wait_idle(port)
            u = short_round(port, args.concurrency, args.short_tokens, f"u{r}")
            unloaded.append(p99(u))
            wait_idle(port)
            conn, resp = open_stream(port, big)
            if not first_text(resp):
                raise RuntimeError("big request streamed no text")
            time.sleep(args.settle)
            running = metric(port, "vllm:num_requests_running")
            l_ttft = short_round(port, args.concurrency, args.short_tokens, f"l{r}")
            conn.close()  # the server aborts the big request on disconnect
            loaded.append(p99(l_ttft))
            if args.verbose:
                print("  unloaded", sorted(round(x * 1000) for x in u))
                print("  loaded", sorted(round(x * 1000) for x in l_ttft))
            print(f"round {r}: unloaded p99 {unloaded[-1] * 1000:.0f} ms, loaded p99 "
                  f"{loaded[-1] * 1000:.0f} ms (median {statistics.median(l_ttft) * 1000:.0f}"
                  f" ms; {running:.0f} running when the short ones came)", flush=True)
        mu, ml = statistics.median(unloaded), statistics.median(loaded)
        print(f"median of p99 TTFT over {args.rounds} rounds: unloaded {mu * 1000:.0f} ms, "
              f"loaded {ml * 1000:.0f} ms, ratio {ml / mu:.2f}")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
