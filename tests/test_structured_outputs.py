"""Structured outputs end to end: `pagellm generate` with constraints on random-weight models
(temperature 1.0, several seeds), every output that finishes with "stop" checked by an
independent reference: python3-jsonschema for JSON Schemas, `re.fullmatch` for regexes, set
membership for choices. Tight schemas (enums, booleans, bounded arrays) must always finish.
Runs with and without speculative decoding (n-gram drafts), on byte-level BPE vocabularies
(Qwen3's, 151,669 tokens; Llama-3's, 128,256) and on the shared SentencePiece model with byte
fallback."""

import json
import os
import re
import subprocess

import pytest

jsonschema = pytest.importorskip("jsonschema")

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = json.load(open(os.path.join(HERE, "structured_outputs", "json_schemas.json")))
VALIDATORS = {4: jsonschema.Draft4Validator, 7: jsonschema.Draft7Validator,
              2020: jsonschema.Draft202012Validator}
SEEDS = (1, 2, 3)
MAX_TOKENS = 160
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2,
                    "prompt_lookup_min": 1})


def random_model(shared_dir, scratch_dir, tokenizer, vocab):
    if not os.path.isfile(os.path.join(shared_dir, "tokenizers", tokenizer, "tokenizer.json")):
        pytest.skip(f"no {tokenizer} tokenizer in the shared assets")
    out = os.path.join(scratch_dir, "so-" + tokenizer)
    subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(HERE), "tools", "gen_model.py"),
                    "--preset", "tiny", "--tokenizer", tokenizer, "--vocab", str(vocab),
                    "--shared-dir", shared_dir, "--out", out, "--quiet"], check=True)
    return out


@pytest.fixture(scope="module")
def qwen3_model(shared_dir, scratch_dir):
    return random_model(shared_dir, scratch_dir, "qwen3", 151936)


@pytest.fixture(scope="module")
def llama3_model(shared_dir, scratch_dir):
    return random_model(shared_dir, scratch_dir, "llama3", 128256)


def run_generate(binary, model, lines, tmp, extra=()):
    inp = os.path.join(tmp, "in.jsonl")
    outp = os.path.join(tmp, "out.jsonl")
    with open(inp, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    proc = subprocess.run([binary, "generate", "--model", model, "--input", inp, "--output", outp,
                           *extra], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(outp) as f:
        return [json.loads(l) for l in f]


def check_json_suite(binary, model, tmp, extra=()):
    cases = [c for c in SCHEMAS if not c.get("invalid")]
    lines = []
    for c in cases:
        for seed in SEEDS:
            lines.append({"prompt": "Answer in JSON:", "temperature": 1.0, "seed": seed,
                          "max_tokens": MAX_TOKENS, "guided_json": c["schema"]})
    results = run_generate(binary, model, lines, tmp, extra)
    finished = 0
    for i, r in enumerate(results):
        c = cases[i // len(SEEDS)]
        if r["finish_reason"] != "stop":
            assert not c.get("tight"), f"{c['name']}: tight schema did not finish: {r['text']!r}"
            continue
        finished += 1
        try:
            value = json.loads(r["text"])
        except json.JSONDecodeError as e:
            pytest.fail(f"{c['name']}: not JSON ({e}): {r['text']!r}")
        cls = VALIDATORS[c.get("draft", 2020)]
        validator = cls(c["schema"], format_checker=cls.FORMAT_CHECKER)
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"{c['name']}: {r['text']!r}: {errors}"
    # Most finish within the budget; the length-limited ones are long free strings.
    assert finished >= len(results) // 2


def test_json_schemas_qwen3(pagellm_binary, qwen3_model, tmp_path):
    check_json_suite(pagellm_binary, qwen3_model, str(tmp_path))


def test_json_schemas_qwen3_speculative(pagellm_binary, qwen3_model, tmp_path):
    check_json_suite(pagellm_binary, qwen3_model, str(tmp_path), ["--speculative-config", NGRAM])


def test_json_schemas_llama3(pagellm_binary, llama3_model, tmp_path):
    check_json_suite(pagellm_binary, llama3_model, str(tmp_path))


def test_json_schemas_llama3_speculative(pagellm_binary, llama3_model, tmp_path):
    check_json_suite(pagellm_binary, llama3_model, str(tmp_path), ["--speculative-config", NGRAM])


def test_json_schemas_sentencepiece(pagellm_binary, shared_dir, tmp_path):
    model = os.path.join(shared_dir, "models", "stories260K")
    check_json_suite(pagellm_binary, model, str(tmp_path))


def test_json_schemas_sentencepiece_draft_model(pagellm_binary, shared_dir, tmp_path):
    # The shared draft/target pair (same tokenizer): drafted tokens the grammar forbids are
    # rejected and the matcher rolls back with the KV cache.
    model = os.path.join(shared_dir, "models", "stories260K")
    draft = json.dumps({"method": "draft_model", "num_speculative_tokens": 3,
                        "model": os.path.join(shared_dir, "models", "llama2xs-279K")})
    check_json_suite(pagellm_binary, model, str(tmp_path), ["--speculative-config", draft])


REGEXES = [r"[a-z]{2,5}", r"(yes|no|maybe)", r"\d{3}-\d{4}", r"[A-Z][a-z]* [0-9]+\.", r"(ab|c)+d?",
           r"[^\n]{1,8}"]
CHOICES = [["alpha", "beta", "gamma"], ["A", "AB", "ABC"], ["\u00e9t\u00e9", "hiver"]]
# GBNF grammars with an equivalent Python regex as their reference.
GRAMMARS = [
    ('root ::= "(" item ("," item)* ")"\nitem ::= [0-9] | "x"', r"\((?:[0-9]|x)(?:,(?:[0-9]|x))*\)"),
    ('root ::= greeting " " name\ngreeting ::= "hi" | "hello"\nname ::= [A-Z] [a-z]{1,4}',
     r"(?:hi|hello) [A-Z][a-z]{1,4}"),
]


@pytest.mark.parametrize("spec_decode", [False, True])
def test_regex_choice_grammar(pagellm_binary, qwen3_model, tmp_path, spec_decode):
    lines, checks = [], []
    for seed in SEEDS:
        for r in REGEXES:
            lines.append({"prompt": "x", "temperature": 1.0, "seed": seed, "max_tokens": 40,
                          "structured_outputs": {"regex": r}})
            checks.append(("regex", r))
        for c in CHOICES:
            lines.append({"prompt": "x", "temperature": 1.0, "seed": seed, "max_tokens": 40,
                          "guided_choice": c})
            checks.append(("choice", c))
        for g, ref in GRAMMARS:
            lines.append({"prompt": "x", "temperature": 1.0, "seed": seed, "max_tokens": 60,
                          "grammar": g})
            checks.append(("regex", ref))
    extra = ["--speculative-config", NGRAM] if spec_decode else []
    results = run_generate(pagellm_binary, qwen3_model, lines, str(tmp_path), extra)
    for (kind, ref), r in zip(checks, results):
        if r["finish_reason"] != "stop":
            assert kind != "choice", r
            continue
        if kind == "choice":
            assert r["text"] in ref, r
        else:
            assert re.fullmatch(ref, r["text"]), (ref, r["text"])


def test_response_format_spellings(pagellm_binary, qwen3_model, tmp_path):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    lines = [
        {"prompt": "x", "seed": 1, "max_tokens": 60,
         "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema,
                                                                    "strict": True}}},
        {"prompt": "x", "seed": 1, "max_tokens": 60, "structured_outputs": {"json": schema}},
        {"prompt": "x", "seed": 1, "max_tokens": 60, "json_schema": schema},
        {"prompt": "x", "seed": 1, "max_tokens": 60, "guided_json": json.dumps(schema),
         "guided_whitespace_pattern": ""},
        {"prompt": "x", "seed": 1, "max_tokens": 60, "response_format": {"type": "json_object"}},
    ]
    results = run_generate(pagellm_binary, qwen3_model, lines, str(tmp_path))
    for r in results[:4]:
        assert r["finish_reason"] == "stop", r
        jsonschema.validate(json.loads(r["text"]), schema)
    assert " " not in results[3]["text"] and "\n" not in results[3]["text"]
    if results[4]["finish_reason"] == "stop":
        assert isinstance(json.loads(results[4]["text"]), dict)


@pytest.mark.parametrize("line,message", [
    ({"guided_json": {"type": "array", "uniqueItems": True}}, "uniqueItems"),
    ({"guided_regex": "(a"}, "regex"),
    ({"grammar": "root ::= foo"}, "foo"),
    ({"guided_json": {"type": "object"}, "guided_regex": "a"}, "only one"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"guided_json": {"$ref": "#/$defs/a", "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}}}, "never complete"),
])
def test_invalid_constraints_are_errors(pagellm_binary, qwen3_model, tmp_path, line, message):
    inp = os.path.join(str(tmp_path), "in.jsonl")
    with open(inp, "w") as f:
        f.write(json.dumps({"prompt": "x", "max_tokens": 4, **line}) + "\n")
    proc = subprocess.run([pagellm_binary, "generate", "--model", qwen3_model, "--input", inp],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
