#!/usr/bin/env python3
"""Decode throughput with a JSON-schema constraint against the same decode without one
(issue 19's target: >= 95% of unconstrained), at batch 1 and batch 32, through LLM.generate
with the model loaded once.

The constrained requests (temperature 1, fixed seeds) stop where the schema lets the model end,
so their lengths vary; a warm-up run records each request's length (the engine is
deterministic: the same seeds give the same outputs every round, checked), and the
unconstrained requests then generate exactly those lengths (ignore_eos), so both sides decode
the same number of tokens with the same batch shape at every step. Rounds alternate the order
(constrained first, then unconstrained first, ...); prints per-round output tokens/s, the
medians and the median per-round ratio constrained / unconstrained (docs/BENCHMARKS.md).

Usage (from the repo root, after building the pagellm and _pagellm targets):
  PYTHONPATH=build/python bench/structured_throughput.py --model MODEL
      [--batches 1,32] [--max-tokens 64] [--threads 2] [--rounds 3]
"""
import argparse
import statistics
import time

# The nested schema of bench/grammar_bench.cc: objects, arrays, formats, enums, a tuple.
SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "name": {"type": "string", "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "created": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5},
        "address": {"type": "object", "properties": {
            "street": {"type": "string"}, "city": {"type": "string"},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            "geo": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                    "items": False}},
            "required": ["street", "city"]},
        "orders": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
            "sku": {"type": "string", "format": "uuid"},
            "qty": {"type": "integer", "minimum": 1, "maximum": 99},
            "status": {"enum": ["new", "paid", "shipped"]}},
            "required": ["sku", "qty", "status"]}},
        "active": {"type": "boolean"},
    },
    "required": ["id", "name", "tags", "address", "active"],
}
PROMPT = "Answer in JSON:"


def constrained_params(pagellm, seed, max_tokens):
    return pagellm.SamplingParams(
        temperature=1.0, seed=seed, max_tokens=max_tokens,
        structured_outputs=pagellm.StructuredOutputsParams(json=SCHEMA))


def timed(llm, prompts, params):
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - t0
    return [list(o.outputs[0].token_ids) for o in outs], elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batches", default="1,32")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    import pagellm
    llm = pagellm.LLM(model=a.model, threads=a.threads)
    rows = []
    for batch in [int(b) for b in a.batches.split(",")]:
        prompts = [PROMPT] * batch
        cparams = [constrained_params(pagellm, 1000 + i, a.max_tokens) for i in range(batch)]
        # Warm-up: compiles the grammar (cached afterwards) and records the lengths.
        ref_tokens, _ = timed(llm, prompts, cparams)
        lengths = [max(len(t), 1) for t in ref_tokens]
        uparams = [pagellm.SamplingParams(temperature=1.0, seed=1000 + i, max_tokens=n,
                                          ignore_eos=True)
                   for i, n in enumerate(lengths)]
        total = sum(lengths)
        c_tps, u_tps, ratios = [], [], []
        for r in range(a.rounds):
            order = ("c", "u") if r % 2 == 0 else ("u", "c")
            tps = {}
            for kind in order:
                llm.reset_prefix_cache()
                toks, elapsed = timed(llm, prompts, cparams if kind == "c" else uparams)
                if kind == "c":
                    assert toks == ref_tokens, "constrained outputs changed between rounds"
                else:
                    assert [len(t) for t in toks] == lengths
                tps[kind] = total / elapsed
            c_tps.append(tps["c"])
            u_tps.append(tps["u"])
            ratios.append(tps["c"] / tps["u"])
            print(f"batch {batch} round {r + 1} ({'/'.join(order)}): constrained "
                  f"{tps['c']:.2f} tok/s, unconstrained {tps['u']:.2f} tok/s, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
        rows.append((batch, total, statistics.median(c_tps), statistics.median(u_tps),
                     statistics.median(ratios)))
    print("| batch | tokens per run | constrained tok/s (median) | unconstrained tok/s (median) "
          "| median ratio |\n|---:|---:|---:|---:|---:|")
    for batch, total, c, u, ratio in rows:
        print(f"| {batch} | {total} | {c:.2f} | {u:.2f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
