#!/usr/bin/env python3
"""A/B of two pagellm binaries: single-stream prefill and decode speed (`bench latency`) on the
same GGUF files, alternating the binaries round by round (A, B, A, B, ...) so both see the same
minutes of the shared memory bus. Prints a Markdown table of the median t/s of each binary and
the median of the per-round B/A ratios. Used to show that a change did not slow anything down
(docs/BENCHMARKS.md).

Usage:
  bench/ab_latency.py --a OLD_BINARY --b NEW_BINARY [--threads 2] [--pp 512] [--tg 128]
      [--depth 0] [--reps 3] [--rounds 5] model1.gguf [model2.gguf ...]
"""
import argparse
import json
import os
import statistics
import subprocess


def run(binary, model, a):
    out = subprocess.run([binary, "bench", "latency", "--model", model, "-p", str(a.pp), "-n",
                          str(a.tg), "-d", str(a.depth), "-r", str(a.reps), "-t", str(a.threads),
                          "--json"], check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["prefill_tokens_per_s"], j["decode_tokens_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="baseline binary")
    p.add_argument("--b", required=True, help="candidate binary")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pp", type=int, default=512)
    p.add_argument("--tg", type=int, default=128)
    p.add_argument("--depth", type=int, default=0)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("models", nargs="+")
    a = p.parse_args()
    print(f"pp{a.pp} / tg{a.tg} at depth {a.depth}, {a.threads} threads, {a.rounds} alternating "
          f"rounds of {a.reps} reps; A = {a.a}, B = {a.b}\n")
    print("| model | A pp t/s | B pp t/s | B/A pp | A tg t/s | B tg t/s | B/A tg |")
    print("|---|---|---|---|---|---|---|")
    for model in a.models:
        res = {"a": [], "b": []}
        for r in range(a.rounds):
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            for which in order:
                res[which].append(run(getattr(a, which), model, a))
        med = lambda xs: statistics.median(xs)
        pp_a, pp_b = med([x[0] for x in res["a"]]), med([x[0] for x in res["b"]])
        tg_a, tg_b = med([x[1] for x in res["a"]]), med([x[1] for x in res["b"]])
        ratio = lambda i: med([b[i] / a_[i] if a_[i] > 0 else float("nan")
                               for a_, b in zip(res["a"], res["b"])])
        pp_ratio, tg_ratio = ratio(0), ratio(1)  # nan where a phase was not run (--pp 0)
        print(f"| {os.path.basename(model)} | {pp_a:.1f} | {pp_b:.1f} | {pp_ratio:.3f} | "
              f"{tg_a:.2f} | {tg_b:.2f} | {tg_ratio:.3f} |", flush=True)


if __name__ == "__main__":
    main()
