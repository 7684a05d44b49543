#!/usr/bin/env python3
"""Tensor-parallel speed across machines, modelled from what one machine measures.

pagellm's tensor parallelism (docs/PARALLELISM.md) meets the ranks 2 x layers + 1 times per
forward step (an all-reduce after o_proj and after down_proj of every layer, one for the
embedding) plus one gather of the logits to rank 0 (V / N floats per rank and sampled row). Everything else is the rank's own work on
its 1/N of the heads, MLP columns and vocabulary. So a step at TP N on N machines costs

    t(N) = t_split / N + t_replicated + (2 L + 1) * t_allreduce(N, m) + t_gather(N, V)

with
    t_split        the measured TP-1 step time of the split work (everything but the norms,
                   RoPE and residual adds, which every rank repeats: t_replicated),
    m              bytes of one all-reduce: rows x hidden x 4 (fp32 partial sums),
    t_allreduce    pagellm's all-reduce is an all-gather of every rank's partial rows, then a
                   sum in rank order on each rank (bitwise reproducible): over a ring each rank
                   receives (N - 1) x m bytes in N - 1 steps,
                   (N - 1) x (alpha + m / B) + sum_time(N x m),
    t_gather       the logits of the step's last token: (N - 1) x (alpha + V / N x 4 / B).

Inputs are measured: the TP-1 decode and prefill step times and the replicated share come from
`pagellm bench latency --json` on this machine (one rank's arithmetic is what a machine of the
same kind does), the per-message software overhead from the all-reduce time `pagellm bench
latency -tp 2 --json` measures over shared memory (optional). The link is the assumption:
latency alpha per message and bandwidth B, given for 25 and 100 Gbit/s Ethernet below (TCP,
one message per step of the ring, no overlap of communication with compute, which pagellm does
not do). The output is a Markdown table of modelled decode and prefill tokens/s at TP 1/2/4/8.

  bench/tp_speed_model.py --tp1 tp1.json [--tp2 tp2.json] [--replicated-share 0.02]
"""
import argparse
import json

LINKS = {
    # name: (bandwidth in bytes/s, per-message latency in s). TCP round trips of small messages on
    # a 25 GbE / 100 GbE data-centre network are ~20-30 us / ~10-15 us (kernel TCP; RDMA is
    # several times lower); bandwidth at 90% of the line rate.
    "25 Gbit/s": (25e9 / 8 * 0.9, 25e-6),
    "100 Gbit/s": (100e9 / 8 * 0.9, 12e-6),
}


def allreduce_s(n, msg_bytes, bw, alpha, sum_bytes_per_s):
    if n == 1:
        return 0.0
    return (n - 1) * (alpha + msg_bytes / bw) + n * msg_bytes / sum_bytes_per_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tp1", required=True, help="bench latency --json at TP 1 (pp and tg)")
    ap.add_argument("--tp2", help="bench latency -tp 2 --json (all-reduce time per step)")
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--replicated-share", type=float, default=0.02,
                    help="share of a TP-1 step every rank repeats (norms, RoPE, residuals, "
                    "sampling)")
    ap.add_argument("--sum-gbs", type=float, default=20.0,
                    help="GB/s at which a rank sums the gathered partial rows")
    a = ap.parse_args()
    tp1 = json.load(open(a.tp1))
    pp = tp1["prompt_tokens"]
    t_decode = 1.0 / tp1["decode_tokens_per_s"]
    t_prefill = pp / tp1["prefill_tokens_per_s"]
    collectives = 2 * a.layers + 1
    local_overhead = None
    if a.tp2:
        tp2 = json.load(open(a.tp2))
        per = tp2.get("tensor_parallel_comm", {}).get("decode", {}).get("us_per_all_reduce")
        if per:
            # What one all-reduce of a decode step costs here over shared memory (including the
            # wait for the slower rank): the software floor a network message adds to.
            local_overhead = per / 1e6
    print(f"TP-1 step (measured): decode {t_decode * 1e3:.2f} ms/token, prefill of {pp} tokens "
          f"{t_prefill * 1e3:.1f} ms; {collectives} all-reduces per step, decode message "
          f"{a.hidden * 4} B, prefill message {pp * a.hidden * 4 / 1e6:.2f} MB")
    if local_overhead is not None:
        print(f"all-reduce at TP 2 over shared memory (measured): {local_overhead * 1e6:.1f} us "
              "per decode call")
    print()
    print("| link | TP | decode tok/s | decode comm share | pp tok/s | pp comm share |")
    print("|---|---:|---:|---:|---:|---:|")
    sum_bw = a.sum_gbs * 1e9
    for name, (bw, alpha) in LINKS.items():
        if local_overhead is not None:
            alpha = max(alpha, local_overhead)
        for n in (1, 2, 4, 8):
            rows = []
            for t1, tokens in ((t_decode, 1), (t_prefill, pp)):
                compute = t1 * (1 - a.replicated_share) / n + t1 * a.replicated_share
                msg = tokens * a.hidden * 4
                comm = collectives * allreduce_s(n, msg, bw, alpha, sum_bw)
                if n > 1:  # one logits row (the last token) gathered to rank 0
                    comm += (n - 1) * (alpha + a.vocab / n * 4 / bw)
                rows.append((tokens / (compute + comm), comm / (compute + comm)))
            (dt, dc), (pt, pc) = rows
            print(f"| {name} | {n} | {dt:.1f} | {dc:.0%} | {pt:.0f} | {pc:.0%} |")


if __name__ == "__main__":
    main()
