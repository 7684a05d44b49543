#!/usr/bin/env python3
"""LLM.generate (the Python package) against `pagellm bench throughput` on the same workload:
num_prompts random-token prompts of input_len tokens, each generating exactly output_len tokens
(temperature 1, top_p 1, ignore_eos), all submitted at once. Both time from the first request
submitted to the last token out, with the model already loaded. Rounds alternate (binary,
Python, binary, Python, ...) so both see the same minutes of a shared machine; prints the median
output tokens/s of each and the median per-round ratio Python / binary (docs/BENCHMARKS.md).

Usage (from the repo root, after scripts/build.sh):
  PYTHONPATH=build/python bench/python_throughput.py --model MODEL [--num-prompts 256]
      [--input-len 128] [--output-len 128] [--threads 2] [--rounds 5]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import time


def run_binary(binary, a):
    out = subprocess.run([binary, "bench", "throughput", "--model", a.model, "--num-prompts",
                          str(a.num_prompts), "--input-len", str(a.input_len), "--output-len",
                          str(a.output_len), "--threads", str(a.threads), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["output_tokens_per_second"]


def run_python(llm, pagellm, a, vocab_size):
    rng = random.Random(0)
    prompts = [{"prompt_token_ids": [rng.randrange(3, vocab_size) for _ in range(a.input_len)]}
               for _ in range(a.num_prompts)]
    params = pagellm.SamplingParams(temperature=1.0, top_p=1.0, ignore_eos=True,
                                    max_tokens=a.output_len)
    llm.reset_prefix_cache()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - t0
    total = sum(len(o.outputs[0].token_ids) for o in outs)
    assert total == a.num_prompts * a.output_len
    return total / elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--binary", default=os.environ.get("PAGELLM_BINARY", "build/pagellm"))
    p.add_argument("--num-prompts", type=int, default=256)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    import pagellm
    llm = pagellm.LLM(model=a.model, threads=a.threads)
    vocab_size = llm.get_tokenizer().vocab_size
    binary_tps, python_tps, ratios = [], [], []
    for r in range(a.rounds):
        b = run_binary(a.binary, a)
        py = run_python(llm, pagellm, a, vocab_size)
        binary_tps.append(b)
        python_tps.append(py)
        ratios.append(py / b)
        print(f"round {r + 1}: bench throughput {b:.1f} out tok/s, LLM.generate {py:.1f} "
              f"out tok/s, ratio {py / b:.3f}", flush=True)
    print("| | output tokens/s (median) |\n|---|---:|")
    print(f"| `pagellm bench throughput` | {statistics.median(binary_tps):.1f} |")
    print(f"| `LLM.generate` | {statistics.median(python_tps):.1f} |")
    print(f"| median per-round ratio | {statistics.median(ratios):.3f} |")


if __name__ == "__main__":
    main()
