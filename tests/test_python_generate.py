"""pagellm.LLM (the Python package over the C++ engine) against `pagellm generate`.

The reference is the binary's JSONL batch mode (`pagellm generate --input`): for the same
prompts, sampling parameters and engine seed, LLM.generate must give the same tokens, text,
finish and stop reasons, logprobs and prompt logprobs, bit for bit. Also: the article's
offline snippet, two LLM objects in one process, Ctrl-C during generate (every KV block freed),
and vLLM's progress bar on a terminal.
"""

import json
import os
import signal
import struct
import subprocess
import sys
import threading

import pytest


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


CASES = [
    # greedy
    {"prompt": "Once upon a time", "temperature": 0.0, "max_tokens": 40},
    # seeded sampling
    {"prompt": "Lily went to the park", "temperature": 0.8, "top_p": 0.95, "seed": 1234,
     "max_tokens": 40},
    # n > 1 (sample k uses seed + k)
    {"prompt": "The cat", "n": 3, "temperature": 1.0, "seed": 7, "max_tokens": 24},
    # sample logprobs
    {"prompt": "Once upon a time", "temperature": 0.0, "logprobs": 3, "max_tokens": 12},
    # prompt logprobs
    {"prompt": "The little dog was happy", "temperature": 0.0, "prompt_logprobs": 2,
     "max_tokens": 8},
    # stop strings (one kept in the output)
    {"prompt": "Once upon a time", "temperature": 0.0, "stop": [".", "!"], "max_tokens": 64},
    {"prompt": "Tom had a ball", "temperature": 0.0, "stop": ["."],
     "include_stop_str_in_output": True, "max_tokens": 64},
    # token-id prompt
    {"prompt_token_ids": [1, 403, 407, 261, 300], "temperature": 0.0, "max_tokens": 20},
    # unseeded sampling: the engine seed decides, the same for both
    {"prompt": "The dog", "temperature": 1.0, "max_tokens": 20},
    # the other knobs
    {"prompt": "Tim", "temperature": 0.7, "seed": 3, "presence_penalty": 0.5,
     "frequency_penalty": 0.3, "repetition_penalty": 1.2, "top_k": 20, "min_p": 0.05,
     "max_tokens": 30, "ignore_eos": True, "min_tokens": 5},
]


def sampling_params(pagellm, case):
    kwargs = {k: v for k, v in case.items() if k not in ("prompt", "prompt_token_ids")}
    return pagellm.SamplingParams(**kwargs)


def prompt_of(case):
    if "prompt_token_ids" in case:
        return {"prompt_token_ids": case["prompt_token_ids"]}
    return case["prompt"]


def cli_generate(binary, model, cases, tmp):
    src = os.path.join(tmp, "cases.jsonl")
    out = os.path.join(tmp, "out.jsonl")
    with open(src, "w") as f:
        for case in cases:
            f.write(json.dumps(case) + "\n")
    subprocess.run([binary, "generate", "--model", model, "--input", src, "--output", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=600)
    with open(out) as f:
        return [json.loads(line) for line in f]


def check_position(position, entry):
    """A Python logprobs dict against the CLI's {token_id, logprob, top_logprobs} entry."""
    token = entry["token_id"]
    assert next(iter(position)) == token  # the token itself first, as vLLM
    assert f32(position[token].logprob) == f32(entry["logprob"])
    tops = entry["top_logprobs"]
    assert set(position) == {token} | {t["token_id"] for t in tops}
    for rank, t in enumerate(tops, start=1):
        lp = position[t["token_id"]]
        assert f32(lp.logprob) == f32(t["logprob"])
        assert lp.rank == rank
        assert isinstance(lp.decoded_token, str)


def check_completion(c, ref, case):
    assert c.token_ids == ref["token_ids"]
    assert c.text == ref["text"]
    assert c.finish_reason == ref["finish_reason"]
    if "stop_reason" in ref:
        assert str(c.stop_reason) == ref["stop_reason"]
    else:
        assert c.stop_reason is None
    if "logprobs" in case:
        assert len(c.logprobs) == len(ref["logprobs"]) == len(c.token_ids)
        for position, entry in zip(c.logprobs, ref["logprobs"]):
            check_position(position, entry)
        assert c.cumulative_logprob == pytest.approx(
            sum(e["logprob"] for e in ref["logprobs"]), rel=1e-6, abs=1e-6)
    else:
        assert c.logprobs is None and c.cumulative_logprob is None


def test_generate_equals_cli_token_for_token(pagellm_module, pagellm_binary, stories_model,
                                             scratch_dir):
    pagellm = pagellm_module
    refs = cli_generate(pagellm_binary, stories_model, CASES, scratch_dir)
    llm = pagellm.LLM(model=stories_model)
    outs = llm.generate([prompt_of(c) for c in CASES],
                        [sampling_params(pagellm, c) for c in CASES], use_tqdm=False)
    assert len(outs) == len(CASES)
    for i, (out, ref, case) in enumerate(zip(outs, refs, CASES)):
        assert isinstance(out, pagellm.RequestOutput)
        assert out.request_id == str(i)
        assert out.finished
        assert out.prompt == case.get("prompt")
        assert out.prompt_token_ids == ref["prompt_token_ids"]
        if "prompt_token_ids" in case:
            assert out.prompt_token_ids == case["prompt_token_ids"]
        refs_c = ref["outputs"] if "outputs" in ref else [ref]
        assert len(out.outputs) == case.get("n", 1)
        for k, (c, rc) in enumerate(zip(out.outputs, refs_c)):
            assert isinstance(c, pagellm.CompletionOutput) and c.index == k
            check_completion(c, rc, case)
        if "prompt_logprobs" in case:
            assert out.prompt_logprobs[0] is None
            assert len(out.prompt_logprobs) == len(out.prompt_token_ids)
            for position, entry, token in zip(out.prompt_logprobs[1:],
                                               ref["prompt_logprobs"][1:],
                                               out.prompt_token_ids[1:]):
                assert entry["token_id"] == token
                check_position(position, entry)
        else:
            assert out.prompt_logprobs is None
    # The cases exercise what they claim to.
    assert any(c.finish_reason == "stop" and isinstance(c.stop_reason, str)
               for c in outs[5].outputs)
    assert outs[6].outputs[0].text.endswith(".")
    assert len({tuple(c.token_ids) for c in outs[2].outputs}) > 1


def test_article_offline_snippet(pagellm_module, stories_model):
    from pagellm import LLM, SamplingParams  # noqa: the article's import line

    prompts = ["Hello, my name is", "The president of the United States is",
               "The capital of France is", "The future of AI is"]
    sampling_params = SamplingParams(temperature=0.8, top_p=0.95)
    llm = LLM(model=stories_model)
    outputs = llm.generate(prompts, sampling_params)
    assert [o.prompt for o in outputs] == prompts
    for output in outputs:
        generated_text = output.outputs[0].text
        assert isinstance(generated_text, str) and generated_text
        assert len(output.outputs[0].token_ids) == 16  # vLLM's default max_tokens
        assert output.outputs[0].finish_reason in ("length", "stop")


def test_two_llm_objects_in_one_process(pagellm_module, shared_dir, stories_model):
    pagellm = pagellm_module
    other_model = os.path.join(shared_dir, "models", "llama2xs-279K")
    greedy = pagellm.SamplingParams(temperature=0.0, max_tokens=24)
    a = pagellm.LLM(model=stories_model)
    b = pagellm.LLM(model=other_model)
    a2 = pagellm.LLM(model=stories_model)
    prompts = ["Once upon a time", "The cat sat"]
    ra = a.generate(prompts, greedy, use_tqdm=False)
    rb = b.generate(prompts, greedy, use_tqdm=False)
    ra2 = a2.generate(prompts, greedy, use_tqdm=False)
    # Interleaved use of the first again, after the others.
    ra_again = a.generate(prompts, greedy, use_tqdm=False)
    ids = lambda rs: [r.outputs[0].token_ids for r in rs]  # noqa: E731
    assert ids(ra) == ids(ra2) == ids(ra_again)
    assert ids(ra) != ids(rb)  # two different models, both alive
    # Concurrent generate from two threads, one per LLM (the GIL is released while each runs).
    results = {}

    def run(name, llm):
        results[name] = ids(llm.generate(prompts, greedy, use_tqdm=False))

    threads = [threading.Thread(target=run, args=("a", a)),
               threading.Thread(target=run, args=("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"] == ids(ra) and results["b"] == ids(rb)


def test_keyboard_interrupt_aborts_and_frees_every_block(pagellm_module, stories_model):
    pagellm = pagellm_module
    llm = pagellm.LLM(model=stories_model, max_num_seqs=16)
    greedy = pagellm.SamplingParams(temperature=0.0, max_tokens=24)
    before = llm.generate(["Once upon a time"], greedy, use_tqdm=False)
    steps_before = llm.engine_stats()["num_steps"]
    long = pagellm.SamplingParams(temperature=0.8, max_tokens=480, ignore_eos=True)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            llm.generate(["Once upon a time"] * 512, long, use_tqdm=False)
    finally:
        timer.cancel()
    stats = llm.engine_stats()
    assert stats["num_steps"] > steps_before  # it was interrupted while generating
    assert stats["num_running"] == 0 and stats["num_waiting"] == 0
    assert stats["kv_usage"] == 0.0
    assert stats["num_free_blocks"] == stats["num_usable_blocks"]
    # The engine is whole afterwards.
    after = llm.generate(["Once upon a time"], greedy, use_tqdm=False)
    assert after[0].outputs[0].token_ids == before[0].outputs[0].token_ids


PROGRESS_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from pagellm import LLM, SamplingParams
llm = LLM(model=sys.argv[2])
llm.generate(["Once upon a time"] * 8, SamplingParams(temperature=0.0, max_tokens=8))
print("DONE")
"""


def run_script(args, tty):
    if not tty:
        result = subprocess.run([sys.executable, "-c", PROGRESS_SCRIPT] + args,
                                capture_output=True, text=True, timeout=300)
        return result.stdout + result.stderr
    import pty
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", PROGRESS_SCRIPT] + args, stdout=follower,
                            stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_bar_on_a_terminal_only(pagellm_module, stories_model):
    pytest.importorskip("tqdm")
    args = [os.environ["PAGELLM_PYTHONPATH"], stories_model]
    on_tty = run_script(args, tty=True)
    assert "DONE" in on_tty
    assert "Processed prompts: 100%" in on_tty
    assert "8/8" in on_tty
    assert "est. speed input: " in on_tty and " toks/s, output: " in on_tty
    piped = run_script(args, tty=False)
    assert "DONE" in piped and "Processed prompts" not in piped


def test_no_effect_options_warn_and_unknown_ones_raise(pagellm_module, stories_model, caplog):
    pagellm = pagellm_module
    with caplog.at_level("WARNING", logger="pagellm"):
        llm = pagellm.LLM(model=stories_model, enforce_eager=True, trust_remote_code=True,
                          dtype="float16")
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("enforce_eager=True has no effect on this engine") for m in messages)
    assert any(m.startswith("trust_remote_code=True has no effect") for m in messages)
    assert not any(m.startswith("dtype=") for m in messages)  # dtype converts the weights
    assert llm.generate("Hi", pagellm.SamplingParams(max_tokens=2), use_tqdm=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_option'"):
        pagellm.LLM(model=stories_model, no_such_option=1)
    with pytest.raises(NotImplementedError):
        pagellm.LLM(model=stories_model, data_parallel_size=2)
    llm = pagellm.LLM(model=stories_model, max_model_len="256", block_size=32,
                      enable_prefix_caching=False, max_num_seqs=4)
    assert llm.generate("Hi", pagellm.SamplingParams(max_tokens=2), use_tqdm=False)


@pytest.mark.parametrize("name", ["stories260K", "llama2xs-279K"])
def test_greedy_matches_the_float64_reference(pagellm_module, shared_dir, name):
    """shared/models/*/expected.json: greedy continuations from an independent float64
    forward pass."""
    pagellm = pagellm_module
    model = os.path.join(shared_dir, "models", name)
    with open(os.path.join(model, "expected.json")) as f:
        refs = json.load(f)["prompts"]
    llm = pagellm.LLM(model=model)
    params = [pagellm.SamplingParams(temperature=0.0, max_tokens=len(r["out_ids"]),
                                     ignore_eos=True) for r in refs]
    outs = llm.generate([r["prompt"] for r in refs], params, use_tqdm=False)
    for out, ref in zip(outs, refs):
        assert out.prompt_token_ids == ref["prompt_ids"]
        assert out.outputs[0].token_ids == ref["out_ids"]


def test_separate_tokenizer_and_generation_config(pagellm_module, stories_model, tmp_path):
    """tokenizer= a directory of its own (vLLM's --tokenizer), generation_config "vllm" / a
    directory, and override_generation_config, as vLLM's LLM applies them."""
    import shutil
    tok_dir = tmp_path / "tokenizer"
    tok_dir.mkdir()
    for name in os.listdir(stories_model):
        if name.startswith("tokenizer") or name == "special_tokens_map.json":
            shutil.copy(os.path.join(stories_model, name), tok_dir / name)
    greedy = pagellm_module.SamplingParams(temperature=0.0, max_tokens=16)
    base = pagellm_module.LLM(model=stories_model, kv_cache_memory_bytes=32 << 20)
    expected = base.generate(["Once upon a time"], greedy, use_tqdm=False)[0].outputs[0]
    del base
    llm = pagellm_module.LLM(model=stories_model, tokenizer=str(tok_dir),
                             kv_cache_memory_bytes=32 << 20)
    got = llm.generate(["Once upon a time"], greedy, use_tqdm=False)[0].outputs[0]
    assert got.token_ids == expected.token_ids and got.text == expected.text
    assert llm.get_tokenizer().name_or_path == str(tok_dir)
    del llm
    with pytest.raises(ValueError):
        pagellm_module.LLM(model=stories_model, tokenizer=str(tmp_path / "missing"))

    gen_dir = tmp_path / "generation"
    gen_dir.mkdir()
    (gen_dir / "generation_config.json").write_text(
        json.dumps({"temperature": 0.5, "top_k": 1, "max_new_tokens": 7}))
    llm = pagellm_module.LLM(model=stories_model, generation_config=str(gen_dir),
                             override_generation_config={"max_new_tokens": 3},
                             kv_cache_memory_bytes=32 << 20)
    defaults = llm.get_default_sampling_params()
    # top_k 1: greedy whatever the temperature, so the tokens can be compared.
    assert defaults.temperature == 0.5 and defaults.top_k == 1 and defaults.max_tokens == 3
    out = llm.generate(["Once upon a time"], use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) == 3 and out.token_ids == expected.token_ids[:3]
    del llm
    llm = pagellm_module.LLM(model=stories_model, generation_config="vllm",
                             kv_cache_memory_bytes=32 << 20)
    assert llm.get_default_sampling_params().temperature == 1.0
    del llm
    with pytest.raises(ValueError):
        pagellm_module.LLM(model=stories_model, generation_config=str(tmp_path / "nowhere"))


def test_truncate_prompt_tokens(pagellm_module, stories_model):
    """SamplingParams.truncate_prompt_tokens keeps the last k prompt tokens, as vLLM does."""
    llm = pagellm_module.LLM(model=stories_model, kv_cache_memory_bytes=32 << 20)
    text = "Once upon a time there was a little girl named Lily who liked to play"
    ids = llm.get_tokenizer().encode(text)
    params = pagellm_module.SamplingParams(temperature=0.0, max_tokens=8,
                                           truncate_prompt_tokens=5)
    got = llm.generate([text], params, use_tqdm=False)[0]
    assert got.prompt_token_ids == ids[-5:]
    ref = llm.generate([{"prompt_token_ids": ids[-5:]}],
                       pagellm_module.SamplingParams(temperature=0.0, max_tokens=8),
                       use_tqdm=False)[0]
    assert got.outputs[0].token_ids == ref.outputs[0].token_ids
    whole = llm.generate([text], pagellm_module.SamplingParams(
        temperature=0.0, max_tokens=8, truncate_prompt_tokens=-1), use_tqdm=False)[0]
    assert whole.prompt_token_ids == ids
    for bad in (0, -2):
        with pytest.raises(ValueError, match="truncate_prompt_tokens"):
            pagellm_module.SamplingParams(truncate_prompt_tokens=bad)
