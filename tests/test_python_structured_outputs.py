"""Structured outputs from Python: SamplingParams(structured_outputs=StructuredOutputsParams(...))
(and older vLLM's guided_decoding=GuidedDecodingParams(...)) constrain LLM.generate through
the same request parser and grammar engine as the server (tests/test_structured_outputs.py)."""

import json
import re

import pytest

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0,
                                                   "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def llm(pagellm_module, stories_model):
    return pagellm_module.LLM(model=stories_model, kv_cache_memory_bytes=32 << 20)


def run(pagellm_module, llm, constraint, seed, old_name=False, max_tokens=96):
    key = "guided_decoding" if old_name else "structured_outputs"
    params = pagellm_module.SamplingParams(temperature=1.0, seed=seed, max_tokens=max_tokens,
                                           **{key: constraint})
    return llm.generate(["Once upon a time"], params, use_tqdm=False)[0].outputs[0]


def test_json_schema_regex_choice(pagellm_module, llm):
    jsonschema = pytest.importorskip("jsonschema")
    P = pagellm_module.StructuredOutputsParams
    finished = 0
    for seed in range(4):
        out = run(pagellm_module, llm, P(json=SCHEMA), seed)
        if out.finish_reason == "stop":
            jsonschema.validate(json.loads(out.text), SCHEMA)
            finished += 1
        out = run(pagellm_module, llm, P(regex=r"[0-9]{3}-[a-z]{2}"), seed)
        assert re.fullmatch(r"[0-9]{3}-[a-z]{2}", out.text), out.text
        out = run(pagellm_module, llm, pagellm_module.GuidedDecodingParams(
            choice=["yes", "no", "maybe"]), seed, old_name=True)
        assert out.text in ("yes", "no", "maybe"), out.text
    assert finished >= 1
    out = run(pagellm_module, llm, P(json=json.dumps(SCHEMA)), 0)  # JSON text is accepted too
    if out.finish_reason == "stop":
        jsonschema.validate(json.loads(out.text), SCHEMA)


def test_bad_constraints_raise(pagellm_module, llm):
    P = pagellm_module.StructuredOutputsParams
    with pytest.raises(ValueError):
        P()
    with pytest.raises(ValueError):
        P(regex="a", choice=["b"])
    with pytest.raises(ValueError):
        P(json="{not json")
    with pytest.raises(ValueError):
        pagellm_module.SamplingParams(structured_outputs=P(regex="a"),
                                      guided_decoding=P(regex="b"))
    with pytest.raises(ValueError):
        llm.generate(["x"], pagellm_module.SamplingParams(structured_outputs=P(regex="(")),
                     use_tqdm=False)
    with pytest.raises(ValueError):
        llm.generate(["x"], pagellm_module.SamplingParams(
            structured_outputs=P(grammar="root ::= undefined_rule")), use_tqdm=False)
    # The engine is still usable and holds no blocks.
    out = llm.generate(["x"], pagellm_module.SamplingParams(max_tokens=2), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 2
    assert llm.engine_stats()["kv_usage"] == 0
