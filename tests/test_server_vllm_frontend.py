"""vLLM's OpenAI-frontend flags and endpoints on `pagellm serve`: API keys, CORS, request ids,
--root-path, /load, /invocations, /openapi.json, the pooling runner's /v1/embeddings (against
the numpy reference forward pass), generation-config defaults, chat-template flags, vLLM's
max_tokens 400, --config YAML, and start-up errors that exit at once."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import Server, model_dir  # noqa: E402

import reference_forward as ref  # noqa: E402

ONCE = "Once upon a time"


def no_key_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PAGELLM_API_KEY", "VLLM_API_KEY")}
    env.update(extra)
    return env


def test_several_api_keys_and_vllm_env(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, ["--api-key", "k1", "k2"], env=no_key_env(),
               log_dir=scratch_dir).wait_ready()
    try:
        body = {"prompt": ONCE, "max_tokens": 2}
        assert s.post("/v1/completions", body)[0] == 401
        assert s.post("/v1/completions", body, {"Authorization": "Bearer k3"})[0] == 401
        for key in ("k1", "k2"):
            assert s.post("/v1/completions", body, {"Authorization": f"Bearer {key}"})[0] == 200
        assert s.post("/invocations", body)[0] == 401
    finally:
        assert s.stop() == 0
    s = Server(pagellm_binary, shared_dir, [], env=no_key_env(VLLM_API_KEY="vk"),
               log_dir=scratch_dir).wait_ready()
    try:
        assert s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 2})[0] == 401
        assert s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 2},
                      {"Authorization": "Bearer vk"})[0] == 200
    finally:
        assert s.stop() == 0


def preflight(s, origin, method="POST", headers="content-type"):
    return s.request("OPTIONS", "/v1/completions", None,
                     {"Origin": origin, "Access-Control-Request-Method": method,
                      "Access-Control-Request-Headers": headers})


def test_cors(pagellm_binary, shared_dir, scratch_dir):
    # Defaults (vLLM's): every origin, method and header.
    s = Server(pagellm_binary, shared_dir, [], log_dir=scratch_dir).wait_ready()
    try:
        status, h, body = preflight(s, "http://app.example")
        assert status == 200 and body == b"OK", body
        assert h["access-control-allow-origin"] == "*"
        assert "POST" in h["access-control-allow-methods"]
        assert h["access-control-allow-headers"] == "content-type"
        status, h, _ = s.request("POST", "/v1/completions", {"prompt": ONCE, "max_tokens": 1},
                                 {"Origin": "http://app.example"})
        assert status == 200 and h["access-control-allow-origin"] == "*"
    finally:
        assert s.stop() == 0
    args = ["--allowed-origins", '["http://good.example"]', "--allowed-methods", '["POST"]',
            "--allowed-headers", '["Authorization"]', "--allow-credentials"]
    s = Server(pagellm_binary, shared_dir, args, log_dir=scratch_dir).wait_ready()
    try:
        status, h, body = preflight(s, "http://good.example", headers="authorization")
        assert status == 200, body
        assert h["access-control-allow-origin"] == "http://good.example"
        assert h["access-control-allow-credentials"] == "true"
        status, _, body = preflight(s, "http://evil.example", headers="authorization")
        assert status == 400 and body == b"Disallowed CORS origin", body
        status, _, body = preflight(s, "http://good.example", method="DELETE",
                                    headers="x-secret")
        assert status == 400 and body == b"Disallowed CORS method, headers", body
        status, h, _ = s.request("POST", "/v1/completions", {"prompt": ONCE, "max_tokens": 1},
                                 {"Origin": "http://evil.example"})
        assert status == 200 and "access-control-allow-origin" not in h
        status, h, _ = s.request("POST", "/v1/completions", {"prompt": ONCE, "max_tokens": 1},
                                 {"Origin": "http://good.example"})
        assert h["access-control-allow-origin"] == "http://good.example"
    finally:
        assert s.stop() == 0


def test_request_ids_root_path_load_openapi(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, ["--enable-request-id-headers", "--root-path", "/api"],
               log_dir=scratch_dir).wait_ready()
    try:
        status, h, data = s.request("POST", "/v1/completions", {"prompt": ONCE, "max_tokens": 2},
                                    {"X-Request-Id": "abc"})
        assert status == 200 and h["x-request-id"] == "abc"
        assert json.loads(data)["id"] == "cmpl-abc"
        status, h, data = s.request("POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "hi"}],
                                     "max_tokens": 2, "request_id": "mine"})
        assert status == 200 and json.loads(data)["id"] == "chatcmpl-mine"
        assert len(h["x-request-id"]) == 32  # a fresh one
        # The same id twice at once is fine (the engine gets distinct ones).
        assert s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 2, "n": 2},
                      {"X-Request-Id": "abc"})[0] == 200
        assert s.post("/api/v1/completions", {"prompt": ONCE, "max_tokens": 1})[0] == 200
        assert s.request("GET", "/api/health")[0] == 200
        assert s.get_json("/load") == (200, {"server_load": 0})
        status, spec = s.get_json("/openapi.json")
        assert status == 200 and spec["servers"] == [{"url": "/api"}]
        assert "post" in spec["paths"]["/v1/completions"]
        # /invocations routes by shape.
        status, out = s.post("/invocations", {"prompt": ONCE, "max_tokens": 1})
        assert status == 200 and out["object"] == "text_completion"
        status, out = s.post("/invocations", {"messages": [{"role": "user", "content": "x"}],
                                              "max_tokens": 1})
        assert status == 200 and out["object"] == "chat.completion"
        status, out = s.post("/invocations", {"input": "x"})
        assert status == 400 and "Embeddings API" in out["error"]["message"]
        assert s.post("/invocations", {"foo": 1})[0] == 400
        status, out = s.post("/v1/embeddings", {"input": "x"})
        assert status == 400
    finally:
        assert s.stop() == 0
    log = open(s.log_path).read()
    assert '"POST /v1/completions HTTP/1.1" 200 OK' in log  # uvicorn-style access line


def test_embeddings_match_the_reference(pagellm_binary, shared_dir, scratch_dir):
    mdir = model_dir(shared_dir)
    cfg, weights = ref.load_config(mdir), ref.load_hf_weights(mdir)
    for extra, pooling in ((["--runner", "pooling"], "last"),
                           (["--convert", "embed", "--pooler-config",
                             '{"pooling_type": "MEAN", "normalize": false}'], "mean")):
        s = Server(pagellm_binary, shared_dir, extra, log_dir=scratch_dir).wait_ready()
        try:
            status, tok = s.post("/tokenize", {"prompt": ONCE})
            ids = tok["tokens"]
            status, out = s.post("/v1/embeddings", {"input": [ONCE, ids], "model": "stories"})
            assert status == 200, out
            assert out["object"] == "list" and out["usage"]["prompt_tokens"] == 2 * len(ids)
            hidden = ref.forward(cfg, weights, ids, hidden=True)
            want = hidden[-1] if pooling == "last" else hidden.mean(axis=0)
            if pooling == "last":
                want = want / np.linalg.norm(want)
            for item in out["data"]:
                got = np.asarray(item["embedding"])
                np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)
            status, out = s.post("/v1/embeddings", {"input": ONCE, "encoding_format": "base64",
                                                    "normalize": True})
            import base64
            got = np.frombuffer(base64.b64decode(out["data"][0]["embedding"]), dtype="<f4")
            np.testing.assert_allclose(got, want / np.linalg.norm(want), rtol=2e-3, atol=2e-4)
            assert s.post("/v1/embeddings", {"input": ONCE, "dimensions": 3})[0] == 400
            status, out = s.post("/v1/completions", {"prompt": ONCE})
            assert status == 400 and "Completions API" in out["error"]["message"]
            assert s.post("/invocations", {"input": ONCE})[0] == 200
        finally:
            assert s.stop() == 0


def test_max_tokens_beyond_the_context_is_400(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, ["--max-model-len", "64"],
               log_dir=scratch_dir).wait_ready()
    try:
        status, tok = s.post("/tokenize", {"prompt": ONCE})
        n = tok["count"]
        status, err = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 64})
        assert status == 400
        assert err["error"]["message"] == (
            f"'max_tokens' or 'max_completion_tokens' is too large: 64. This model's maximum "
            f"context length is 64 tokens and your request has {n} input tokens "
            f"(64 > 64 - {n}).")
        assert s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 64 - n})[0] == 200
        status, err = s.post("/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "x"}],
                              "max_completion_tokens": 1000})
        assert status == 400 and "is too large: 1000" in err["error"]["message"]
    finally:
        assert s.stop() == 0


def test_generation_config_flags(pagellm_binary, shared_dir, scratch_dir):
    gdir = os.path.join(scratch_dir, "gencfg")
    os.makedirs(gdir, exist_ok=True)
    with open(os.path.join(gdir, "generation_config.json"), "w") as f:
        json.dump({"temperature": 0.0, "max_new_tokens": 3}, f)
    s = Server(pagellm_binary, shared_dir, ["--generation-config", gdir],
               log_dir=scratch_dir).wait_ready()
    try:
        outs = [s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 10})[1]
                for _ in range(2)]
        # max_new_tokens caps; temperature 0 is greedy, so both runs agree.
        assert outs[0]["usage"]["completion_tokens"] == 3
        assert outs[0]["choices"][0]["text"] == outs[1]["choices"][0]["text"]
        greedy = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 3,
                                            "temperature": 0})[1]
        assert greedy["choices"][0]["text"] == outs[0]["choices"][0]["text"]
    finally:
        assert s.stop() == 0
    s = Server(pagellm_binary, shared_dir,
               ["--generation-config", "vllm", "--override-generation-config",
                '{"temperature": 0}'], log_dir=scratch_dir).wait_ready()
    try:
        a = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 8})[1]
        b = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 8, "temperature": 0})[1]
        assert a["choices"][0]["text"] == b["choices"][0]["text"]
    finally:
        assert s.stop() == 0


TEMPLATE_WITH_KWARGS = (
    "{% for m in messages %}{{ m['role'] }}:"
    "{% if m['content'] is string %}S{{ m['content'] }}{% else %}L{{ m['content'][0]['text'] }}"
    "{% endif %}|{% endfor %}effort={{ reasoning_effort }} think={{ enable_thinking }}")


def test_chat_template_flags(pagellm_binary, shared_dir, scratch_dir):
    tpath = os.path.join(scratch_dir, "kwargs.jinja")
    with open(tpath, "w") as f:
        f.write(TEMPLATE_WITH_KWARGS)
    args = ["--chat-template-content-format", "openai", "--trust-request-chat-template",
            "--default-chat-template-kwargs", '{"enable_thinking": false}',
            "--response-role", "narrator"]
    s = Server(pagellm_binary, shared_dir, args, log_dir=scratch_dir).wait_ready()

    def rendered(body):
        # /tokenize renders chat messages as the chat endpoint does; the text comes back from
        # /detokenize (the template's output is plain ASCII).
        status, tok = s.post("/tokenize", body)
        assert status == 200, tok
        return s.post("/detokenize", {"tokens": tok["tokens"]})[1]["prompt"].strip()

    try:
        msgs = [{"role": "user", "content": "hi"}]
        body = {"messages": msgs, "chat_template": TEMPLATE_WITH_KWARGS,
                "reasoning_effort": "low"}
        assert rendered(body) == "user:Lhi|effort=low think=False"
        body["chat_template_kwargs"] = {"enable_thinking": True}
        assert rendered(body) == "user:Lhi|effort=low think=True"
        status, out = s.post("/v1/chat/completions", dict(body, max_tokens=1))
        assert status == 200, out
        assert out["choices"][0]["message"]["role"] == "narrator"
        # With add_generation_prompt false the reply continues the last message's role.
        status, out = s.post("/v1/chat/completions",
                             dict(body, max_tokens=1, add_generation_prompt=False))
        assert out["choices"][0]["message"]["role"] == "user"
    finally:
        assert s.stop() == 0
    s = Server(pagellm_binary, shared_dir, ["--return-tokens-as-token-ids"],
               log_dir=scratch_dir).wait_ready()
    try:
        status, out = s.post("/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                              "chat_template": "x"})
        assert status == 400 and "--trust-request-chat-template" in out["error"]["message"]
        status, out = s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 1, "logprobs": 1})
        assert out["choices"][0]["logprobs"]["tokens"][0].startswith("token_id:")
    finally:
        assert s.stop() == 0


def test_config_yaml_and_underscores(pagellm_binary, shared_dir, scratch_dir):
    path = os.path.join(scratch_dir, "serve.yaml")
    with open(path, "w") as f:
        f.write("served-model-name: from-yaml\nmax_model_len: 1K\nenable-prefix-caching: false\n"
                "max-logprobs: 3\napi-key: [y1, y2]\nenforce-eager: true\n")
    # The command line's --max_logprobs (vLLM's underscore spelling) wins over the file's.
    s = Server(pagellm_binary, shared_dir, ["--config", path, "--max_logprobs", "5"],
               env=no_key_env(VLLM_ALLOW_LONG_MAX_MODEL_LEN="1"), log_dir=scratch_dir)
    s.wait_ready()
    try:
        auth = {"Authorization": "Bearer y2"}
        status, models = s.get_json("/v1/models", auth)
        assert status == 200, models
        # The command line's --served-model-name (the test harness's) wins over the file's.
        assert [m["id"] for m in models["data"]] == ["stories"]
        assert models["data"][0]["max_model_len"] == 1024
        assert s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 1, "logprobs": 5},
                      auth)[0] == 200
        assert s.post("/v1/completions", {"prompt": ONCE, "max_tokens": 1, "logprobs": 6},
                      auth)[0] == 400
    finally:
        assert s.stop() == 0
    assert "--enforce-eager has no effect on this engine" in open(s.log_path).read()


def run_fail(binary, args, env=None, timeout=30):
    t0 = time.time()
    p = subprocess.run([binary, "serve"] + args, capture_output=True, text=True, timeout=timeout,
                       env=env or no_key_env())
    return p.returncode, p.stderr, time.time() - t0


def test_start_up_errors(pagellm_binary, shared_dir, scratch_dir):
    model = model_dir(shared_dir)
    cases = [
        (["--max-model-len", "1m"], "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
        (["--revision", "main", "--model", "org/not-here"], "is not a local model"),
        (["--tokenizer", os.path.join(scratch_dir, "nope")], "--tokenizer"),
        (["--allowed-origins", "http://x"], "--allowed-origins"),
        (["--ssl-certfile", "/nonexistent.pem", "--ssl-keyfile", "/nonexistent.pem"],
         "--ssl-certfile"),
        (["--generation-config", "/nonexistent"], "--generation-config"),
        (["--lora-modules", "a=/b"], "not supported by this engine"),
        (["-dp", "2"], "--data-parallel-size 2: not supported by this engine"),
        (["--uvicorn-log-level", "loud"], "--uvicorn-log-level"),
        (["--runner", "draft"], "--runner"),
        (["--default-chat-template-kwargs", "[1]"], "--default-chat-template-kwargs"),
    ]
    for extra, message in cases:
        args = ([] if "--model" in extra else [model]) + extra + [
            "--port", "0", "--kv-cache-memory-bytes", "64M"]
        rc, err, _ = run_fail(pagellm_binary, args)
        assert rc != 0, (extra, err)
        assert message in err, (extra, err)


def test_bad_flag_200_times_exits_promptly(pagellm_binary, shared_dir):
    # A configuration error found after the port is bound: every run must exit non-zero at
    # once (a hang in shutting the listener down would show as a timeout).
    args = [model_dir(shared_dir), "--port", "0", "--block-size", "0",
            "--kv-cache-memory-bytes", "64M"]
    worst = 0.0
    for _ in range(200):
        rc, err, took = run_fail(pagellm_binary, args, timeout=20)
        assert rc != 0 and "--block-size" in err, err
        worst = max(worst, took)
    assert worst < 10, worst
