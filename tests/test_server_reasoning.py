"""--reasoning-parser end to end on a random-weight model with the Qwen3 tokenizer (whose
vocabulary has <think> and </think> tokens): the reasoning goes to reasoning_content (and
reasoning), streamed deltas add up to the non-streamed message, and a response_format
constraint starts only after the reasoning (vLLM's behaviour). logit_bias steers the random
model to the think tokens, so each case takes a known path:
  deepseek_r1, </think> banned: all reasoning, unconstrained, content null;
  deepseek_r1, </think> forced: empty reasoning, then JSON that validates;
  qwen3, <think> banned: no reasoning, JSON from the first token;
  qwen3, both favoured: <think> opens, reasoning is <think>s until </think>, then JSON.
Each with and without speculative decoding (n-gram drafts)."""

import json
import os
import subprocess
import sys

import pytest

jsonschema = pytest.importorskip("jsonschema")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "e2e"))
from pagellm_server import Server  # noqa: E402

SCHEMA = {"type": "object",
          "properties": {"ok": {"type": "boolean"},
                         "n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["ok", "n"], "additionalProperties": False}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA}}
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2,
                    "prompt_lookup_min": 1})
MESSAGES = [{"role": "user", "content": "Is it ok? Answer in JSON."}]


@pytest.fixture(scope="module")
def qwen3_model(shared_dir, scratch_dir):
    if not os.path.isfile(os.path.join(shared_dir, "tokenizers", "qwen3", "tokenizer.json")):
        pytest.skip("no Qwen3 tokenizer in the shared assets")
    out = os.path.join(scratch_dir, "reasoning-qwen3")
    subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(HERE), "tools", "gen_model.py"),
                    "--preset", "tiny", "--tokenizer", "qwen3", "--vocab", "151936",
                    "--shared-dir", shared_dir, "--out", out, "--quiet"], check=True)
    return out


def token_id(server, text):
    status, body = server.post("/tokenize", {"prompt": text, "add_special_tokens": False})
    assert status == 200, body
    assert len(body["tokens"]) == 1, body
    return body["tokens"][0]


def chat(server, **params):
    body = {"messages": MESSAGES, "temperature": 1.0, "seed": 3, "max_tokens": 48, **params}
    status, full = server.post("/v1/chat/completions", body)
    assert status == 200, full
    status, events, done = server.stream("/v1/chat/completions", {**body, "stream": True})
    assert status == 200 and done, events
    streamed = {"reasoning": "", "reasoning_content": "", "content": ""}
    for e in events:
        for c in e["choices"]:
            for key in streamed:
                streamed[key] += c["delta"].get(key) or ""
    message = full["choices"][0]["message"]
    # Streamed deltas add up to the non-streamed message.
    assert streamed["reasoning"] == streamed["reasoning_content"] == (message["reasoning_content"] or "")
    assert streamed["content"] == (message["content"] or "")
    assert message["reasoning"] == message["reasoning_content"]
    return full["choices"][0]


def check_json(content):
    value = json.loads(content)
    errors = [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(value)]
    assert not errors, (content, errors)


@pytest.mark.parametrize("spec", [False, True], ids=["plain", "ngram"])
def test_deepseek_r1(pagellm_binary, shared_dir, scratch_dir, qwen3_model, spec):
    extra = ["--reasoning-parser", "deepseek_r1", "--max-model-len", "512"]
    if spec:
        extra += ["--speculative-config", NGRAM]
    server = Server(pagellm_binary, shared_dir, extra_args=extra, log_dir=scratch_dir,
                    model=qwen3_model).wait_ready(timeout=180)
    try:
        end = token_id(server, "</think>")
        # The output starts inside the reasoning; without </think> it is all reasoning, and the
        # constraint never starts (the text is not JSON).
        c = chat(server, response_format=RESPONSE_FORMAT, max_tokens=16,
                 logit_bias={str(end): -100})
        assert c["finish_reason"] == "length"
        assert c["message"]["content"] is None
        assert len(c["message"]["reasoning_content"]) > 0
        # </think> first: empty reasoning, then the constraint holds.
        c = chat(server, response_format=RESPONSE_FORMAT, logit_bias={str(end): 100})
        assert c["message"]["reasoning_content"] == ""
        assert c["finish_reason"] == "stop", c
        check_json(c["message"]["content"])
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("spec", [False, True], ids=["plain", "ngram"])
def test_qwen3(pagellm_binary, shared_dir, scratch_dir, qwen3_model, spec):
    extra = ["--reasoning-parser", "qwen3", "--max-model-len", "512"]
    if spec:
        extra += ["--speculative-config", NGRAM]
    server = Server(pagellm_binary, shared_dir, extra_args=extra, log_dir=scratch_dir,
                    model=qwen3_model).wait_ready(timeout=180)
    try:
        start = token_id(server, "<think>")
        end = token_id(server, "</think>")
        # No <think>: no reasoning, the constraint from the first token.
        c = chat(server, response_format=RESPONSE_FORMAT, logit_bias={str(start): -100})
        assert c["message"]["reasoning_content"] is None
        assert c["finish_reason"] == "stop", c
        check_json(c["message"]["content"])
        # <think> opens the reasoning (free: it is <think>s until </think>), then JSON.
        c = chat(server, response_format=RESPONSE_FORMAT, max_tokens=96,
                 logit_bias={str(start): 100, str(end): 100})
        reasoning = c["message"]["reasoning_content"]
        assert reasoning is not None and reasoning.replace("<think>", "") == "", c
        assert c["finish_reason"] == "stop", c
        check_json(c["message"]["content"])
    finally:
        assert server.stop() == 0
