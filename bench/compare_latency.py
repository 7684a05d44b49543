#!/usr/bin/env python3
"""Single-stream prefill/decode: pagellm `bench latency` vs llama.cpp `llama-bench` on the same
GGUF files, measured back to back in one run. Prints a Markdown table of medians and ratios.

Usage:
  bench/compare_latency.py --llama-bench /path/to/llama-bench [--threads 2] [--pp 512] [--tg 128]
      [--depth 0] [--reps 5] [--rounds 1] [--flash-attn 1] [--bus-between ROOFLINE]
      model1.gguf [model2.gguf ...]

--rounds N alternates the engines N times per model (pagellm, llama.cpp, pagellm, ...), each
time with --reps repetitions; the table gives the median t/s of each engine over the rounds and
the median of the per-round ratios. On a machine whose memory bus is shared with other VMs the
bandwidth moves between minutes; ratios of adjacent runs are what stays comparable.

--bus-between build/bench/roofline reads the memory bus (roofline --json) right after each
pagellm run, before llama-bench's, and adds that read as a last column (median over rounds): with
a read taken just before the round, it brackets pagellm's own run on a bus whose load moves from
minute to minute.

llama.cpp is built outside this repository (see docs/BENCHMARKING.md); nothing of it is
committed here.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def pagellm(binary, model, a):
    j = run_json([binary, "bench", "latency", "--model", model, "-p", str(a.pp), "-n",
                  str(a.tg), "-d", str(a.depth), "-r", str(a.reps), "-t", str(a.threads),
                  "--json"] + a.pagellm_args.split())
    return j["prefill_tokens_per_s"], j["decode_tokens_per_s"], j["weights_bytes"]


def bus_read(roofline):
    return run_json([roofline, "--json"])["read_bandwidth_gbs"]


def llama_bench(binary, model, a):
    rows = run_json([binary, "-m", model, "-p", str(a.pp), "-n", str(a.tg), "-d", str(a.depth),
                     "-r", str(a.reps), "-t", str(a.threads), "-fa", str(a.flash_attn),
                     "-o", "json"] + a.llama_args.split())
    pp = tg = None
    commit = rows[0].get("build_commit", "?") if rows else "?"
    for r in rows:
        # llama-bench reports the mean and stddev of its repetitions; take the median of the
        # raw samples when present so both engines are compared on medians.
        samples = r.get("samples_ts") or [r["avg_ts"]]
        v = statistics.median(samples)
        if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0:
            pp = v
        elif r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0:
            tg = v
    return pp, tg, commit


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--llama-bench", required=True)
    p.add_argument("--pagellm", default=os.path.join(REPO, "build", "pagellm"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pp", type=int, default=512)
    p.add_argument("--tg", type=int, default=128)
    p.add_argument("--depth", type=int, default=0)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate the engines this many times per model (medians over rounds)")
    p.add_argument("--flash-attn", type=int, default=1)
    p.add_argument("--pagellm-args", default="",
                   help="extra `pagellm bench latency` flags, e.g. '--kv-cache-dtype int8'")
    p.add_argument("--llama-args", default="",
                   help="extra llama-bench flags, e.g. '-ctk q8_0 -ctv q8_0'")
    p.add_argument("--bandwidth-gbs", type=float, default=0.0,
                   help="measured read bandwidth roofline, for the %% column")
    p.add_argument("--bus-between", default="",
                   help="roofline binary: read the bus after each pagellm run (last column)")
    a = p.parse_args()
    d = f"@d{a.depth}" if a.depth else ""
    print(f"| model | pagellm pp{a.pp}{d} t/s | llama.cpp pp{a.pp}{d} t/s | ratio | "
          f"pagellm tg{a.tg}{d} t/s | llama.cpp tg{a.tg}{d} t/s | ratio | pagellm decode GB/s |"
          + (" bus after pagellm GB/s |" if a.bus_between else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if a.bus_between else ""))
    commit = "?"
    for m in a.models:
        rounds = []  # (pagellm pp, pagellm tg, llama pp, llama tg) per round
        wbytes = 0
        between = []  # bus reads after each pagellm run
        for _ in range(a.rounds):
            ppp, ptg, wbytes = pagellm(a.pagellm, m, a)
            if a.bus_between:
                between.append(bus_read(a.bus_between))
            lpp, ltg, commit = llama_bench(a.llama_bench, m, a)
            rounds.append((ppp, ptg, lpp, ltg))

        def med(i):
            vals = [r[i] for r in rounds if r[i]]
            return statistics.median(vals) if vals else None

        def ratio(i, j):
            vals = [r[i] / r[j] for r in rounds if r[i] and r[j]]
            return statistics.median(vals) if vals else None

        ppp, ptg, lpp, ltg = med(0), med(1), med(2), med(3)
        if a.pp > 0 and ppp and lpp:
            pp_cells = f"{ppp:.1f} | {lpp:.1f} | {ratio(0, 2):.2f}x"
        else:  # --pp 0: decode only (e.g. tg at a context depth)
            pp_cells = "- | - | -"
        if a.tg > 0 and ptg and ltg:
            gbs = ptg * wbytes / 1e9
            roof = f" ({100 * gbs / a.bandwidth_gbs:.0f}% of roofline)" if a.bandwidth_gbs else ""
            tg_cells = f"{ptg:.2f} | {ltg:.2f} | {ratio(1, 3):.2f}x | {gbs:.1f}{roof}"
        else:  # --tg 0: prefill only
            tg_cells = "- | - | - | -"
        bus_cell = f" {statistics.median(between):.1f} |" if between else ""
        print(f"| {os.path.basename(m)} | {pp_cells} | {tg_cells} |{bus_cell}")
        if a.rounds > 1:
            per = ", ".join(
                f"{r[1] / r[3]:.2f}x" if a.tg > 0 and r[1] and r[3] else f"{r[0] / r[2]:.2f}x"
                for r in rounds)
            print(f"|   per round | {per} |")
        sys.stdout.flush()
    print(f"\nllama.cpp build {commit}; threads {a.threads}; medians of {a.reps} runs each"
          + (f", {a.rounds} alternating rounds (median t/s, median of per-round ratios)."
             if a.rounds > 1 else "."))


if __name__ == "__main__":
    main()
