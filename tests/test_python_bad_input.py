"""Bad input from Python raises (TypeError / ValueError with vLLM's messages) and never
crashes the interpreter: SamplingParams validation, wrong types, NaN, huge n, invalid UTF-8,
token ids out of range, bad engine arguments, bad tokenizer and chat-template input."""

import math

import pytest

NAN = float("nan")

# (kwargs, message) as vLLM's SamplingParams._verify_args words them.
INVALID = [
    ({"n": 0}, "n must be at least 1, got 0."),
    ({"presence_penalty": 2.5}, "presence_penalty must be in [-2, 2], got 2.5."),
    ({"frequency_penalty": -3}, "frequency_penalty must be in [-2, 2], got -3.0."),
    ({"repetition_penalty": 0.0}, "repetition_penalty must be greater than zero, got 0.0."),
    ({"temperature": -1.0}, "temperature must be non-negative, got -1.0."),
    ({"temperature": NAN}, "temperature must be non-negative, got nan."),
    ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0."),
    ({"top_p": NAN}, "top_p must be in (0, 1], got nan."),
    ({"top_k": -5}, "top_k must be 0 (disable), or at least 1, got -5."),
    ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5."),
    ({"max_tokens": 0}, "max_tokens must be at least 1, got 0."),
    ({"min_tokens": -1}, "min_tokens must be greater than or equal to 0, got -1."),
    ({"min_tokens": 5, "max_tokens": 4},
     "min_tokens must be less than or equal to max_tokens=4, got 5."),
    ({"logprobs": -2}, "logprobs must be non-negative or -1, got -2."),
    ({"prompt_logprobs": -2}, "prompt_logprobs must be non-negative or -1, got -2."),
    ({"stop": ["ok", ""]}, "stop cannot contain an empty string."),
    ({"n": 10**12}, "n must be at most 65536, got 1000000000000."),
    ({"max_tokens": 2**40}, "max_tokens must be at most 2147483647, got 1099511627776."),
]


@pytest.mark.parametrize("kwargs,message", INVALID)
def test_invalid_sampling_params_raise_value_error(pagellm_module, kwargs, message):
    with pytest.raises(ValueError) as e:
        pagellm_module.SamplingParams(**kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize("kwargs", [
    {"n": "2"}, {"n": 2.0}, {"temperature": "hot"}, {"top_k": None}, {"seed": 1.5},
    {"stop": 5}, {"stop": [b"x"]}, {"stop_token_ids": ["1"]}, {"ignore_eos": 1},
    {"logit_bias": [1, 2]}, {"max_tokens": "16"},
])
def test_wrong_types_raise_type_error(pagellm_module, kwargs):
    with pytest.raises(TypeError):
        pagellm_module.SamplingParams(**kwargs)


def test_greedy_resets_the_other_knobs_and_valid_values_pass(pagellm_module):
    sp = pagellm_module.SamplingParams(temperature=0.0, top_p=0.5, top_k=3, min_p=0.2)
    assert (sp.top_p, sp.top_k, sp.min_p) == (1.0, 0, 0.0)
    sp = pagellm_module.SamplingParams(top_k=-1, stop="x", logprobs=0)
    assert sp.top_k == 0 and sp.stop == ["x"] and sp.logprobs == 0
    assert pagellm_module.SamplingParams().max_tokens == 16


@pytest.fixture(scope="module")
def llm(pagellm_module, stories_model):
    return pagellm_module.LLM(model=stories_model)


def test_bad_generate_input_raises(pagellm_module, llm):
    sp = pagellm_module.SamplingParams(max_tokens=4)
    bad = [
        (TypeError, lambda: llm.generate(123, sp)),
        (TypeError, lambda: llm.generate([None], sp)),
        (TypeError, lambda: llm.generate(["a"], "not params")),
        (TypeError, lambda: llm.generate(["a", "b"], [sp, 5])),
        (ValueError, lambda: llm.generate(["a", "b"], [sp])),
        (TypeError, lambda: llm.generate({"text": "a"}, sp)),
        (ValueError, lambda: llm.generate("bad \udcff surrogate", sp)),
        (ValueError, lambda: llm.generate({"prompt_token_ids": [-1]}, sp)),
        (ValueError, lambda: llm.generate({"prompt_token_ids": [2**40]}, sp)),
        (ValueError, lambda: llm.generate({"prompt_token_ids": [1, 100000]}, sp)),
        (ValueError, lambda: llm.generate({"prompt_token_ids": []}, sp)),
        (TypeError, lambda: llm.generate({"prompt_token_ids": [1, "2"]}, sp)),
        (TypeError, lambda: llm.generate({"prompt_token_ids": [1.0]}, sp)),
        (ValueError, lambda: llm.generate("a", pagellm_module.SamplingParams(
            stop_token_ids=[100000]))),
        (ValueError, lambda: llm.generate("a", pagellm_module.SamplingParams(
            logit_bias={100000: 1.0}))),
        (ValueError, lambda: llm.generate("a", pagellm_module.SamplingParams(logprobs=50))),
        (ValueError, lambda: llm.generate("a", pagellm_module.SamplingParams(
            prompt_logprobs=10**6))),
        (ValueError, lambda: llm.generate("x " * 2000, sp)),  # longer than max_model_len
        (TypeError, lambda: llm.generate("a", sp, priority=["high"])),
    ]
    for exc, call in bad:
        with pytest.raises(exc):
            call()
    # A SamplingParams changed after construction is checked again.
    changed = pagellm_module.SamplingParams()
    changed.temperature = NAN
    with pytest.raises(ValueError, match="temperature must be non-negative, got nan."):
        llm.generate("a", changed)
    # Nothing is left behind by the refused calls.
    stats = llm.engine_stats()
    assert stats["num_running"] == 0 and stats["num_waiting"] == 0 and stats["kv_usage"] == 0
    out = llm.generate("Once upon a time", sp, use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 4


def test_huge_n_and_huge_values_raise(pagellm_module, llm):
    for kwargs in ({"n": 2**70}, {"seed": 2**70 + 1, "n": 10**9}, {"logprobs": 2**64}):
        with pytest.raises(ValueError):
            llm.generate("a", pagellm_module.SamplingParams(**kwargs))
    # A seed of any size is fine (it is reduced to the engine's 64 bits).
    out = llm.generate("a", pagellm_module.SamplingParams(seed=2**70, max_tokens=2),
                       use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 2


def test_bad_engine_arguments_raise(pagellm_module, stories_model, tmp_path):
    LLM = pagellm_module.LLM
    with pytest.raises(TypeError):
        LLM(model=123)
    with pytest.raises(TypeError):
        LLM(stories_model, bogus=True)
    with pytest.raises((FileNotFoundError, ValueError)):
        LLM(model=str(tmp_path / "missing"))
    with pytest.raises(ValueError):
        LLM(model=stories_model, block_size=0)
    with pytest.raises(ValueError):
        LLM(model=stories_model, gpu_memory_utilization=math.nan)
    with pytest.raises(ValueError):
        LLM(model=stories_model, max_model_len="lots")
    with pytest.raises(ValueError):
        LLM(model=stories_model, kv_cache_dtype="int3")
    with pytest.raises(TypeError):
        LLM(model=stories_model, max_num_seqs="8")
    with pytest.raises(ValueError):
        LLM(model=stories_model, max_num_seqs=2**40)
    with pytest.raises(ValueError):
        LLM(model=stories_model, dtype="int7")


def test_bad_tokenizer_and_chat_input_raise(pagellm_module, llm):
    tok = llm.get_tokenizer()
    for exc, call in [
        (ValueError, lambda: tok.decode([10**6])),
        (ValueError, lambda: tok.decode([-1])),
        (ValueError, lambda: tok.decode([2**80])),
        (TypeError, lambda: tok.decode(["a"])),
        (TypeError, lambda: tok.encode(b"bytes")),
        (ValueError, lambda: tok.encode("\ud800")),
        (ValueError, lambda: tok.apply_chat_template([{"role": "user", "content": "hi"}])),
        (TypeError, lambda: tok.apply_chat_template([{"role": "user", "content": object()}],
                                                    chat_template="{{ messages }}")),
        (ValueError, lambda: tok.apply_chat_template(
            [{"role": "user", "content": "hi"}], chat_template="{% if %}")),
        (ValueError, lambda: tok.apply_chat_template(
            [{"role": "user", "content": "hi"}],
            chat_template="{{ raise_exception('no users here') }}")),
        (ValueError, lambda: llm.chat([{"role": "user", "content": "hi"}])),
        (TypeError, lambda: llm.chat("hi")),
    ]:
        with pytest.raises(exc):
            call()
