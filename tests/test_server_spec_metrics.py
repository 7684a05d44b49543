"""Speculative decoding through the server: with n-gram drafting on, /metrics exposes vLLM's
vllm:spec_decode_* counters (per-position ones labelled by position), they move by consistent
amounts after a request, and greedy output equals the output of a server without drafts.
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import Server  # noqa: E402

K = 4
SPEC = json.dumps({"method": "ngram", "num_speculative_tokens": K,
                   "prompt_lookup_min": 1, "prompt_lookup_max": 3})
# A prompt whose continuation repeats what it has already seen, so n-gram drafts get accepted.
PROMPT = "Lily had a ball. Lily had a ball. Lily had a ball. Lily had a"
BODY = {"prompt": PROMPT, "max_tokens": 24, "ignore_eos": True, "temperature": 0}


@pytest.fixture(scope="module")
def servers(pagellm_binary, shared_dir, scratch_dir):
    spec = Server(pagellm_binary, shared_dir, extra_args=["--speculative-config", SPEC],
                  log_dir=scratch_dir).wait_ready()
    plain = Server(pagellm_binary, shared_dir, log_dir=scratch_dir).wait_ready()
    yield spec, plain
    assert spec.stop() == 0, spec.read_log()
    assert plain.stop() == 0, plain.read_log()


def test_spec_counters_exposed_and_consistent(servers):
    spec, plain = servers
    before = spec.metrics()
    for name in ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                 "vllm:spec_decode_num_accepted_tokens_total"):
        assert before.get(name) == 0, name
    positions = sorted(int(labels["position"]) for n, labels, _ in before.samples
                       if n == "vllm:spec_decode_num_accepted_tokens_per_pos_total")
    assert positions == list(range(K))
    assert before.types.get("vllm:spec_decode_num_drafts_total") == "counter"

    status, out = spec.post("/v1/completions", BODY)
    assert status == 200, out
    status, ref = plain.post("/v1/completions", BODY)
    assert status == 200, ref
    assert out["choices"][0]["text"] == ref["choices"][0]["text"]
    assert out["usage"]["completion_tokens"] == 24

    after = spec.metrics()
    drafts = after.get("vllm:spec_decode_num_drafts_total")
    draft_tokens = after.get("vllm:spec_decode_num_draft_tokens_total")
    accepted = after.get("vllm:spec_decode_num_accepted_tokens_total")
    assert drafts > 0 and accepted > 0
    assert accepted <= draft_tokens <= K * drafts
    per_pos = [after.get("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(p))
               for p in range(K)]
    assert sum(per_pos) == accepted
    assert per_pos == sorted(per_pos, reverse=True)  # accepted as a prefix
    # Every verification emits accepted + 1 tokens; the first token comes from the prefill.
    assert accepted + drafts <= 24 - 1


def test_plain_server_has_no_spec_counters(servers):
    _, plain = servers
    assert "vllm:spec_decode_num_drafts_total" not in plain.metrics().types
