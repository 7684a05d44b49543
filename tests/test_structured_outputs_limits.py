"""Hostile constraints are refused in bounded time and memory (docs/STRUCTURED_OUTPUTS.md,
"Limits"): huge, deeply nested and self-referential-without-base-case JSON Schemas, invalid and
over-limit regular expressions and GBNF grammars each get a 400 with a message within
TIME_LIMIT seconds, on a server whose model carries a 151,669-token vocabulary (Qwen3's: the
token tables are built over it); the server's peak memory stays bounded, it keeps serving, and
a constrained request still works afterwards."""

import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "e2e"))
from pagellm_server import MODEL_NAME, Server  # noqa: E402

TIME_LIMIT = 30.0  # seconds per refused request (a loaded CI machine; typically well under 1 s)
PEAK_GROWTH_LIMIT = 1 << 30  # bytes of peak RSS the hostile requests may add


def nested(depth):
    # As JSON text (guided_json takes a schema or its text): Python's encoder would recurse.
    return '{"type": "array", "items": ' * depth + '{"type": "integer"}' + "}" * depth


CASES = [
    ("schema with 5000 bounded string properties",
     {"guided_json": {"type": "object", "properties": {
         f"p{i}": {"type": "string", "maxLength": 30} for i in range(5000)}}}),
    ("schema with a 300,000-value enum", {"guided_json": {"enum": [f"v{i}" for i in range(300000)]}}),
    ("schema nested 1000 deep", {"guided_json": nested(1000)}),
    ("schema recursion without base case",
     {"guided_json": {"$ref": "#/$defs/n", "$defs": {"n": {
         "type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}}}}),
    ("schema mutual recursion without base case",
     {"guided_json": {"$ref": "#/$defs/a", "$defs": {
         "a": {"type": "array", "items": {"$ref": "#/$defs/b"}, "minItems": 1},
         "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}}}),
    ("schema repetition over the limit", {"guided_json": {"type": "array", "minItems": 50000}}),
    ("regex unbalanced", {"guided_regex": "(ab"}),
    ("regex reversed range", {"guided_regex": "[z-a]"}),
    ("regex reversed count", {"guided_regex": "a{5,2}"}),
    ("regex nested 500 deep", {"guided_regex": "(" * 500 + "a" + ")" * 500}),
    ("regex repetition over the limit", {"guided_regex": "a{200000}"}),
    ("grammar undefined rule", {"grammar": 'root ::= "a" missing'}),
    ("grammar left recursion", {"grammar": 'root ::= root "a" | "a"'}),
    ("grammar without base case", {"grammar": 'root ::= "(" root ")"'}),
    ("grammar nested 500 deep", {"grammar": "root ::= " + "(" * 500 + '"a"' + ")" * 500}),
    ("grammar repetition over the limit", {"grammar": 'root ::= "a"{200000}'}),
    ("grammar unterminated string", {"grammar": 'root ::= "abc'}),
]


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def server(pagellm_binary, shared_dir, scratch_dir):
    if not os.path.isfile(os.path.join(shared_dir, "tokenizers", "qwen3", "tokenizer.json")):
        pytest.skip("no Qwen3 tokenizer in the shared assets")
    model = os.path.join(scratch_dir, "limits-qwen3")
    subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(HERE), "tools", "gen_model.py"),
                    "--preset", "tiny", "--tokenizer", "qwen3", "--vocab", "151936",
                    "--shared-dir", shared_dir, "--out", model, "--quiet"], check=True)
    s = Server(pagellm_binary, shared_dir, log_dir=scratch_dir, model=model).wait_ready(120)
    yield s
    assert s.stop() == 0, s.read_log()


def constrained(server, constraint, timeout=120):
    return server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "x", "max_tokens": 8,
                                           **constraint}, timeout=timeout)


def test_hostile_constraints_are_refused_in_bounded_time_and_memory(server):
    # A valid constraint first, so the baseline includes the vocabulary tables.
    status, body = constrained(server, {"guided_json": {"type": "boolean"}})
    assert status == 200, body
    baseline = peak_rss(server.proc.pid)
    for name, constraint in CASES:
        t0 = time.monotonic()
        status, body = constrained(server, constraint)
        elapsed = time.monotonic() - t0
        assert status == 400, (name, body)
        assert body["error"]["message"], name
        assert elapsed < TIME_LIMIT, (name, elapsed)
        assert server.proc.poll() is None, (name, server.read_log()[-3000:])
    growth = peak_rss(server.proc.pid) - baseline
    assert growth < PEAK_GROWTH_LIMIT, growth
    status, body = constrained(server, {"guided_choice": ["yes", "no"]})
    assert status == 200, body
    assert body["choices"][0]["text"] in ("yes", "no")
