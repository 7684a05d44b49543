"""A `vllm serve` command line runs under pagellm unchanged: vLLM's flags that mean nothing on
this CPU engine are accepted with a start-up note each, values it cannot honour fail with a
clear error (never silently ignored), --max-model-len takes vLLM's k/K suffixes and
--max-logprobs is enforced."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import Server  # noqa: E402

ONCE = "Once upon a time"


def test_vllm_flags_are_accepted_with_notes(pagellm_binary, shared_dir, scratch_dir):
    args = ["--dtype", "bfloat16", "--trust-remote-code", "--enforce-eager", "--download-dir",
            scratch_dir, "-tp", "1", "--pipeline-parallel-size", "1", "--max-model-len", "0.25K",
            "--max-logprobs", "2"]
    s = Server(pagellm_binary, shared_dir, args, log_dir=scratch_dir)
    try:
        # 0.25K is not an integer count: refused at start-up.
        assert s.proc.wait(timeout=30) != 0
    finally:
        s.stop()
    args[args.index("0.25K")] = "256"
    s = Server(pagellm_binary, shared_dir, args, log_dir=scratch_dir).wait_ready()
    try:
        status, out = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 3, "logprobs": 2})
        assert status == 200, out
        status, err = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 3, "logprobs": 3})
        assert status == 400 and "logprobs" in err["error"]["message"], err
        status, err = s.post("/v1/completions",
                             {"prompt": ONCE, "max_tokens": 3, "prompt_logprobs": 5})
        assert status == 400, err
        status, model = s.get_json("/v1/models")
        assert model["data"][0]["max_model_len"] == 256
    finally:
        assert s.stop() == 0
    with open(s.log_path) as f:
        log = f.read()
    for flag in ("--trust-remote-code", "--enforce-eager", "--download-dir"):
        assert f"{flag}" in log and "has no effect on this engine" in log, (flag, log)


def test_max_model_len_suffixes(pagellm_binary, shared_dir):
    model = os.path.join(shared_dir, "models", "stories260K")
    # stories260K has 512 positions: longer contexts need vLLM's explicit opt-in.
    env = dict(os.environ, VLLM_ALLOW_LONG_MAX_MODEL_LEN="1")
    for text, expected in (("1k", 1000), ("1K", 1024), ("300", 300)):
        proc = subprocess.run([pagellm_binary, "generate", "--model", model, "--prompt", "x",
                               "--max-tokens", "1", "--max-model-len", text, "--json"],
                              capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, proc.stderr
        assert f"maximum concurrency for {expected} tokens" in proc.stderr, proc.stderr
    env.pop("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    proc = subprocess.run([pagellm_binary, "generate", "--model", model, "--prompt", "x",
                           "--max-tokens", "1", "--max-model-len", "1k"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode != 0
    assert ("User-specified max_model_len (1000) is greater than the derived max_model_len "
            "(max_position_embeddings=512") in proc.stderr, proc.stderr


def test_unsupported_values_fail_clearly(pagellm_binary, shared_dir):
    model = os.path.join(shared_dir, "models", "stories260K")
    cases = ((["-tp", "3"], "8 attention heads are not divisible by it"),
             (["--tensor-parallel-size", "0"], "must be >= 1"),
             (["-pp", "0"], "must be >= 1"),
             (["--quantization", "awq"], "it is not an AWQ checkpoint"),
             (["--quantization", "fp8"], "--quantization fp8: not supported"),
             (["--dtype", "int3"], "--dtype int3"),
             (["--max-model-len", "32x"], "--max-model-len '32x'"))
    for extra, message in cases:
        proc = subprocess.run([pagellm_binary, "generate", "--model", model, "--prompt", "x",
                               "--max-tokens", "1"] + extra,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0, extra
        assert message in proc.stderr, (extra, proc.stderr)
