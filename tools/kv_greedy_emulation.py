#!/usr/bin/python3
"""Greedy agreement of an fp8_e4m3 KV cache with the exact cache, in float64 emulation.

Question answered: on stories260K's EXPECTED.md prompts (BOS + 200 tokens, three prompts + 64),
how many greedy tokens does a cache that rounds K and/or V to e4m3 keep before its output first
differs from the exact model's (free-running), and how many of the exact output's greedy choices
does it reproduce given the exact prefix (teacher-forced)? It separates what the format does from
what the engine does (tests/kv_cache_greedy_agreement_test.cc measures the engine).

  /usr/bin/python3 tools/kv_greedy_emulation.py --shared ../shared --round k,v   # K and V
  /usr/bin/python3 tools/kv_greedy_emulation.py --shared ../shared --round v     # V only
  /usr/bin/python3 tools/kv_greedy_emulation.py --shared ../shared --round k     # K only

The e4m3 round trip is the one tests/test_kv_cache_emulation.py checks the engine against
(unscaled, round to nearest, saturating at 448, subnormals below 2^-6). Each generated token
reruns the whole float64 forward pass (tests/reference_forward.py): ~10 s per mode.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import reference_forward as rf  # noqa: E402
from test_kv_cache_emulation import _e4m3  # noqa: E402


def forward_rounded(cfg, weights, ids, round_k, round_v):
    # reference_forward repeats K, then V, per query group right after RoPE: round them there.
    original, calls = np.repeat, [0]

    def repeat_rounded(a, g, axis=None):
        is_k = calls[0] % 2 == 0
        calls[0] += 1
        if (is_k and round_k) or (not is_k and round_v):
            a = _e4m3(a)
        return original(a, g, axis=axis)

    rf.np.repeat = repeat_rounded
    try:
        return rf.forward(cfg, weights, ids)
    finally:
        rf.np.repeat = original


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default="../shared")
    p.add_argument("--round", default="k,v", help="which of k, v to round to e4m3 (k,v | k | v)")
    a = p.parse_args()
    model = os.path.join(a.shared, "models", "stories260K")
    cfg, weights = rf.load_config(model), rf.load_hf_weights(model)
    with open(os.path.join(model, "expected.json")) as f:
        j = json.load(f)
    cases = [(j["bos200"]["prompt_ids"], j["bos200"]["out_ids"])]
    cases += [(c["prompt_ids"], c["out_ids"]) for c in j["prompts"]]
    parts = a.round.split(",")
    round_k, round_v = "k" in parts, "v" in parts

    kept = forced = total = 0
    first_diffs = []
    for prompt, want in cases:
        logits = forward_rounded(cfg, weights, prompt + want[:-1], round_k, round_v)
        forced += int((logits[len(prompt) - 1:].argmax(1) == np.asarray(want)).sum())
        ids, first = list(prompt), len(want)
        for t in range(len(want)):
            nxt = int(forward_rounded(cfg, weights, ids, round_k, round_v)[-1].argmax())
            if nxt != want[t]:
                first = t
                break
            ids.append(nxt)
        first_diffs.append(first)
        kept += first
        total += len(want)
    print(json.dumps({"round": a.round, "tokens": total, "free_running_before_first_diff": kept,
                      "first_diff_per_case": first_diffs, "teacher_forced_agree": forced}))


if __name__ == "__main__":
    main()
