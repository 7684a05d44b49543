"""Real `vllm serve` command lines, from vLLM's documentation and model recipes, run unchanged
under pagellm: the binary name and the model are replaced (by ../shared's stories260K), a free
port and a small KV cache are appended, and each server must start, answer one request (a
completion, or an embedding for the pooling runner) and stop cleanly.

The tiny model has 512 positions, so the commands' long contexts need vLLM's
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, set for every server here."""

import json
import os
import shlex
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import free_port, model_dir  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHATML = os.path.join(REPO, "tests", "chat_templates", "chatml.jinja")

# (command line as vLLM documents it, endpoint exercised). The model named after `serve` is
# replaced; file paths of vLLM's examples are replaced by this repository's ChatML template.
COMMANDS = [
    ("vllm serve NousResearch/Meta-Llama-3-8B-Instruct --dtype auto --api-key token-abc123",
     "completions"),
    ("vllm serve Qwen/Qwen2.5-1.5B-Instruct", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 "
     "--gpu-memory-utilization 0.9", "completions"),
    ("vllm serve facebook/opt-125m --chat-template ./examples/template_chatml.jinja", "chat"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-auto-tool-choice "
     "--tool-call-parser llama3_json --chat-template examples/tool_chat_template_llama3.1_json.jinja",
     "chat"),
    ("vllm serve Qwen/QwQ-32B --reasoning-parser deepseek_r1", "completions"),
    ("vllm serve deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --reasoning-parser deepseek_r1 "
     "--max-model-len 32k", "completions"),
    ("vllm serve unsloth/Llama-3.2-1B-Instruct --max-model-len 4096 --enforce-eager",
     "completions"),
    ("vllm serve meta-llama/Llama-2-7b-hf --enable-lora --max-loras 4 --max-lora-rank 16",
     "completions"),
    ("vllm serve facebook/opt-125m --speculative-config "
     "'{\"method\": \"ngram\", \"num_speculative_tokens\": 5, \"prompt_lookup_max\": 4}'",
     "completions"),
    ("vllm serve meta-llama/Meta-Llama-3-8B-Instruct --kv-cache-dtype fp8", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-prefix-caching", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 256 "
     "--max-num-batched-tokens 8192 --enable-chunked-prefill", "completions"),
    ("vllm serve Qwen/Qwen2.5-7B-Instruct --host 0.0.0.0 --served-model-name qwen",
     "completions"),
    ("vllm serve mistralai/Mistral-7B-Instruct-v0.3 --tokenizer-mode mistral "
     "--config-format mistral --load-format mistral", "completions"),
    ("vllm serve google/gemma-2-2b-it --trust-remote-code --download-dir /tmp/models",
     "completions"),
    ("vllm serve meta-llama/Llama-3.2-3B-Instruct --compilation-config "
     "'{\"cudagraph_capture_sizes\": [1, 2, 4, 8]}'", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B -O3", "completions"),
    ("vllm serve Qwen/Qwen2.5-1.5B-Instruct --generation-config vllm", "completions"),
    ("vllm serve Qwen/Qwen2.5-1.5B-Instruct --generation-config auto "
     "--override-generation-config '{\"temperature\": 0.5, \"top_p\": 0.9}'", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --disable-log-requests --disable-log-stats",
     "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --uvicorn-log-level warning "
     "--disable-uvicorn-access-log", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --swap-space 16 --cpu-offload-gb 10",
     "completions"),
    ("vllm serve intfloat/e5-mistral-7b-instruct --runner pooling", "embeddings"),
    ("vllm serve Alibaba-NLP/gte-Qwen2-1.5B-instruct --task embed --trust-remote-code",
     "embeddings"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --data-parallel-size 1 "
     "--tensor-parallel-size 1", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --otlp-traces-endpoint grpc://localhost:4317",
     "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-logprobs 10 --return-tokens-as-token-ids",
     "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-prompt-tokens-details "
     "--enable-force-include-usage", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --allowed-origins '[\"http://localhost:3000\"]' "
     "--allow-credentials", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --scheduling-policy priority", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --seed 42 --max-num-seqs 64 "
     "--block-size 32", "completions"),
    ("vllm serve Qwen/Qwen3-8B --async-scheduling --max-model-len 1k", "completions"),
    ("vllm serve deepseek-ai/DeepSeek-V2-Lite-Chat --trust-remote-code --enable-expert-parallel "
     "-dp 1", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-request-id-headers "
     "--enable-log-requests --max-log-len 100", "completions"),
    ("vllm serve Qwen/Qwen2.5-VL-3B-Instruct --limit-mm-per-prompt '{\"image\": 2}' "
     "--mm-processor-kwargs '{\"max_pixels\": 1003520}'", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-cache-memory-bytes 256M "
     "--no-enable-prefix-caching", "completions"),
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct --hf-token --revision main "
     "--tokenizer-revision main --code-revision main", "completions"),
]


def to_pagellm(binary, shared_dir, command, port):
    args = shlex.split(command)
    assert args[:2] == ["vllm", "serve"], command
    args = [binary, "serve", model_dir(shared_dir)] + args[3:]
    for i, a in enumerate(args):
        if a.endswith(".jinja"):
            args[i] = CHATML
    if "--kv-cache-memory-bytes" not in args:
        args += ["--kv-cache-memory-bytes", "256M"]
    return args + ["--port", str(port)]


def request(port, path, body, headers=None):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def wait_health(proc, port, log_path, timeout=60):
    import http.client
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            with open(log_path) as f:
                raise AssertionError(f"exited {proc.returncode}:\n{f.read()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("not ready")


def test_there_are_at_least_30_commands():
    assert len(COMMANDS) >= 30


@pytest.mark.parametrize("command,endpoint", COMMANDS, ids=[c[0][11:60] for c in COMMANDS])
def test_vllm_serve_command(pagellm_binary, shared_dir, scratch_dir, command, endpoint):
    env = {k: v for k, v in os.environ.items() if k not in ("PAGELLM_API_KEY", "VLLM_API_KEY")}
    env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
    # free_port's port can be taken by a test running in parallel before the server binds it
    # (seen in CI): a bind failure is retried on a new port.
    for attempt in range(3):
        port = free_port()
        args = to_pagellm(pagellm_binary, shared_dir, command, port)
        log_path = os.path.join(scratch_dir, f"serve-{port}.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_health(proc, port, log_path)
            break
        except AssertionError as e:
            if "cannot bind" not in str(e) or attempt == 2:
                proc.kill()
                proc.wait()
                raise
    try:
        headers = {}
        if "--api-key" in args:
            headers["Authorization"] = "Bearer " + args[args.index("--api-key") + 1]
        if endpoint == "completions":
            status, out = request(port, "/v1/completions",
                                  {"prompt": "Once upon a time", "max_tokens": 4,
                                   "temperature": 0}, headers)
            assert status == 200, out
            assert out["choices"][0]["text"] and out["usage"]["completion_tokens"] == 4
        elif endpoint == "chat":
            status, out = request(port, "/v1/chat/completions",
                                  {"messages": [{"role": "user", "content": "Hi"}],
                                   "max_tokens": 4}, headers)
            assert status == 200, out
            assert out["choices"][0]["message"]["role"] == "assistant"
        else:
            status, out = request(port, "/v1/embeddings", {"input": "Once upon a time"}, headers)
            assert status == 200, out
            vec = out["data"][0]["embedding"]
            assert abs(sum(v * v for v in vec) - 1.0) < 1e-4
    finally:
        proc.terminate()
        rc = proc.wait(timeout=30)
    assert rc == 0, open(log_path).read()
