"""`pagellm serve` end to end over HTTP: every endpoint's shape and semantics, vLLM's extras,
streaming, n > 1, seeds, logprobs, API keys, the queue limit and graceful shutdown.

Runs the real binary ($PAGELLM_BINARY) on ../shared/models/stories260K; skips without them.
"""

import json
import os
import signal
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import MODEL_NAME, Server, parse_sse  # noqa: E402

ONCE = "Once upon a time"
ONCE_IDS = [1, 403, 407, 261, 378]


@pytest.fixture(scope="module")
def server(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, log_dir=scratch_dir).wait_ready()
    yield s
    assert s.stop() == 0, s.read_log()


@pytest.fixture(scope="module")
def expected(shared_dir):
    with open(os.path.join(shared_dir, "models", "stories260K", "expected.json")) as f:
        return json.load(f)


def completion(server, **body):
    body.setdefault("model", MODEL_NAME)
    status, out = server.post("/v1/completions", body)
    assert status == 200, out
    return out


def chat(server, **body):
    body.setdefault("model", MODEL_NAME)
    status, out = server.post("/v1/chat/completions", body)
    assert status == 200, out
    return out


def same_counts(a, b):
    """Usage equality up to prefix-cache hits (a repeated prompt is served from the cache)."""
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return all(a[k] == b[k] for k in keys)


def stream_texts(events, key):
    """Concatenates streamed text per choice index; returns (texts, finish reasons)."""
    texts, reasons = {}, {}
    for e in events:
        for c in e.get("choices", []):
            piece = c["text"] if key == "text" else c["delta"].get("content", "")
            texts[c["index"]] = texts.get(c["index"], "") + (piece or "")
            if c.get("finish_reason"):
                reasons[c["index"]] = c["finish_reason"]
    return texts, reasons


def test_probes_and_models(server):
    status, _, body = server.request("GET", "/health")
    assert status == 200 and body == b""
    status, v = server.get_json("/version")
    assert status == 200 and v["version"]
    status, models = server.get_json("/v1/models")
    assert status == 200 and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == [MODEL_NAME]
    assert models["data"][0]["max_model_len"] == 512
    assert server.get_json(f"/v1/models/{MODEL_NAME}")[0] == 200
    status, err = server.get_json("/v1/models/nope")
    assert status == 404 and err["error"]["code"] == 404


def test_completion_matches_reference(server, expected):
    for case in expected["prompts"][:2]:
        out = completion(server, prompt=case["prompt"], max_tokens=len(case["out_ids"]),
                         temperature=0, ignore_eos=True)
        assert out["object"] == "text_completion" and out["id"].startswith("cmpl-")
        assert out["model"] == MODEL_NAME
        (choice,) = out["choices"]
        assert choice["text"] == case["continuation"]
        assert choice["finish_reason"] == "length" and choice["stop_reason"] is None
        usage = out["usage"]
        assert usage["prompt_tokens"] == len(case["prompt_ids"])
        assert usage["completion_tokens"] == len(case["out_ids"])
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert "cached_tokens" in usage["prompt_tokens_details"]


def test_prompt_forms(server):
    text = completion(server, prompt=ONCE, max_tokens=8, temperature=0)["choices"][0]["text"]
    by_ids = completion(server, prompt=ONCE_IDS, max_tokens=8, temperature=0)
    assert by_ids["choices"][0]["text"] == text
    batch = completion(server, prompt=[ONCE, "The little dog"], n=2, max_tokens=8, temperature=0)
    assert [c["index"] for c in batch["choices"]] == [0, 1, 2, 3]
    assert batch["choices"][0]["text"] == batch["choices"][1]["text"] == text
    assert batch["usage"]["prompt_tokens"] == 10
    assert batch["usage"]["completion_tokens"] == 32
    ids_batch = completion(server, prompt=[ONCE_IDS, ONCE_IDS], max_tokens=8, temperature=0)
    assert [c["text"] for c in ids_batch["choices"]] == [text, text]


def test_echo_and_stop(server):
    out = completion(server, prompt=ONCE, max_tokens=8, temperature=0, echo=True)
    assert out["choices"][0]["text"].startswith(ONCE + ",")
    out = completion(server, prompt=ONCE, max_tokens=40, temperature=0, stop=[" girl"])
    choice = out["choices"][0]
    assert choice["text"] == ", there was a little"
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == " girl"
    out = completion(server, prompt=ONCE, max_tokens=40, temperature=0, stop=" girl",
                     include_stop_str_in_output=True)
    assert out["choices"][0]["text"] == ", there was a little girl"
    # Token 286 is " was"; vLLM reports a stop token id as an integer stop_reason.
    out = completion(server, prompt=ONCE, max_tokens=40, temperature=0, stop_token_ids=[286])
    assert out["choices"][0]["text"] == ", there"
    assert out["choices"][0]["stop_reason"] == 286


def test_vllm_sampling_extras(server):
    base = dict(prompt=ONCE, max_tokens=12, seed=3, temperature=0.9)
    for extra in ({"top_k": 5}, {"min_p": 0.1}, {"repetition_penalty": 1.3}, {"min_tokens": 4},
                  {"presence_penalty": 0.5, "frequency_penalty": 0.5}, {"logit_bias": {"432": -100}},
                  {"skip_special_tokens": False}, {"ignore_eos": True}, {"top_p": 0.5}):
        out = completion(server, **base, **extra)
        assert out["usage"]["completion_tokens"] >= 1, extra
    biased = completion(server, prompt=ONCE, max_tokens=1, temperature=0, logit_bias={"432": -100})
    assert not biased["choices"][0]["text"].startswith(",")


def test_completion_logprobs(server):
    out = completion(server, prompt=ONCE, max_tokens=10, temperature=0, logprobs=3)
    lp = out["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 10
    assert "".join(lp["tokens"]) == out["choices"][0]["text"]
    assert all(v <= 0 for v in lp["token_logprobs"])
    for tok, top in zip(lp["tokens"], lp["top_logprobs"]):
        assert 3 <= len(top) <= 4 and tok in top
    assert lp["text_offset"][0] == 0
    assert lp["text_offset"] == sorted(lp["text_offset"])


def test_echo_logprobs_and_prompt_logprobs(server):
    plain = completion(server, prompt=ONCE, max_tokens=4, temperature=0, logprobs=1)
    out = completion(server, prompt=ONCE, max_tokens=4, temperature=0, logprobs=1, echo=True)
    choice = out["choices"][0]
    assert choice["text"] == ONCE + plain["choices"][0]["text"]
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(ONCE_IDS) + 4
    assert lp["tokens"][0] == "<s>" and lp["token_logprobs"][0] is None
    assert lp["top_logprobs"][0] is None
    assert all(v <= 0 for v in lp["token_logprobs"][1:])
    assert lp["token_logprobs"][5:] == plain["choices"][0]["logprobs"]["token_logprobs"]
    # The streamed echo carries the same prompt logprobs in its first chunk.
    status, events, done = server.stream("/v1/completions", dict(
        model=MODEL_NAME, prompt=ONCE, max_tokens=4, temperature=0, logprobs=1, echo=True,
        stream=True))
    streamed = [t for e in events for c in e["choices"] for t in c["logprobs"]["tokens"]]
    assert streamed == lp["tokens"]

    out = completion(server, prompt=ONCE, max_tokens=2, temperature=0, prompt_logprobs=2)
    plp = out["choices"][0]["prompt_logprobs"]
    assert len(plp) == len(ONCE_IDS) and plp[0] is None
    for token_id, position in zip(ONCE_IDS[1:], plp[1:]):
        assert str(token_id) in position and 2 <= len(position) <= 3
        entry = position[str(token_id)]
        assert entry["logprob"] <= 0 and isinstance(entry["decoded_token"], str)
    # Prompt logprobs of the echoed request agree with the separate ones.
    assert abs(plp[1][str(ONCE_IDS[1])]["logprob"] - lp["token_logprobs"][1]) < 1e-5


def test_chat_completion(server):
    out = chat(server, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=12,
               temperature=0)
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    (choice,) = out["choices"]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    status, tok = server.post("/tokenize", {"model": MODEL_NAME, "messages": [
        {"role": "user", "content": "Tell me a story."}]})
    assert status == 200 and tok["tokens"][0] == 1  # BOS from the template, once
    assert out["usage"]["prompt_tokens"] == tok["count"]


def test_chat_logprobs(server):
    out = chat(server, messages=[{"role": "user", "content": "Hi"}], max_tokens=6, temperature=0,
               logprobs=True, top_logprobs=2)
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"]
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
        assert len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][1]["logprob"]
    assert "".join(e["token"] for e in content) == out["choices"][0]["message"]["content"]


def test_continue_final_message(server):
    messages = [{"role": "user", "content": "Story?"},
                {"role": "assistant", "content": "Once upon a time"}]
    out = chat(server, messages=messages, max_tokens=5, temperature=0,
               continue_final_message=True, add_generation_prompt=False, echo=True)
    assert out["choices"][0]["message"]["content"].startswith("Once upon a time")
    status, err = server.post("/v1/chat/completions", {
        "messages": messages, "continue_final_message": True, "add_generation_prompt": True})
    assert status == 400 and "continue_final_message" in err["error"]["message"]


def test_streaming_equals_non_streaming(server):
    for n, seed, temp in ((1, None, 0), (3, 11, 1.0)):
        body = dict(model=MODEL_NAME, prompt=ONCE, max_tokens=20, temperature=temp, n=n)
        if seed is not None:
            body["seed"] = seed
        full = completion(server, **body)
        status, events, done = server.stream("/v1/completions", dict(
            body, stream=True, stream_options={"include_usage": True}))
        assert status == 200 and done
        texts, reasons = stream_texts(events, "text")
        for c in full["choices"]:
            assert texts[c["index"]] == c["text"]
            assert reasons[c["index"]] == c["finish_reason"]
        assert events[-1]["choices"] == [] and same_counts(events[-1]["usage"], full["usage"])
        assert all(e["object"] == "text_completion" and e["id"] == events[0]["id"] for e in events)

        chat_body = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "A story"}],
                         max_tokens=20, temperature=temp, n=n, seed=seed)
        full = chat(server, **chat_body)
        status, events, done = server.stream("/v1/chat/completions", dict(
            chat_body, stream=True, stream_options={"include_usage": True}))
        assert status == 200 and done
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert all(e["object"] == "chat.completion.chunk" for e in events)
        texts, reasons = stream_texts(events, "delta")
        for c in full["choices"]:
            assert texts[c["index"]] == c["message"]["content"]
            assert reasons[c["index"]] == c["finish_reason"]
        assert same_counts(events[-1]["usage"], full["usage"])


def test_seeds(server):
    body = dict(prompt=ONCE, max_tokens=16, temperature=1.0)
    a = completion(server, seed=42, **body)["choices"][0]["text"]
    b = completion(server, seed=42, **body)["choices"][0]["text"]
    assert a == b
    # Sample i of a seeded n > 1 request uses seed + i.
    fan = completion(server, seed=42, n=3, **body)["choices"]
    assert fan[0]["text"] == a
    assert fan[2]["text"] == completion(server, seed=44, **body)["choices"][0]["text"]


def test_tokenize_detokenize(server):
    status, tok = server.post("/tokenize", {"prompt": ONCE, "return_token_strs": True})
    assert status == 200
    assert tok["tokens"] == ONCE_IDS and tok["count"] == 5 and tok["max_model_len"] == 512
    assert tok["token_strs"][0] == "<s>"
    status, tok = server.post("/tokenize", {"prompt": ONCE, "add_special_tokens": False})
    assert tok["tokens"] == ONCE_IDS[1:]
    status, detok = server.post("/detokenize", {"tokens": ONCE_IDS[1:]})
    assert status == 200 and detok["prompt"] == ONCE
    status, err = server.post("/detokenize", {"tokens": [1, 99999]})
    assert status == 400 and "vocabulary" in err["error"]["message"]
    status, err = server.post("/tokenize", {"prompt": "x", "messages": []})
    assert status == 400


def test_prefix_cache_and_reset(server):
    long_prompt = " ".join(["The little dog ran to the park and played with a ball."] * 4)
    first = completion(server, prompt=long_prompt, max_tokens=2, temperature=0)
    second = completion(server, prompt=long_prompt, max_tokens=2, temperature=0)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 32
    assert second["choices"][0]["text"] == first["choices"][0]["text"]
    status, out = server.post("/reset_prefix_cache", {})
    assert status == 200 and out == {"reset": True}
    third = completion(server, prompt=long_prompt, max_tokens=2, temperature=0)
    assert third["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_api_key(pagellm_binary, shared_dir, scratch_dir):
    no_keys = {k: v for k, v in os.environ.items() if k not in ("PAGELLM_API_KEY", "VLLM_API_KEY")}
    for args, env in ((["--api-key", "sekrit"], None),
                      ([], dict(no_keys, PAGELLM_API_KEY="sekrit")),
                      ([], dict(no_keys, VLLM_API_KEY="sekrit")),  # vLLM's variable
                      ([], dict(no_keys, PAGELLM_API_KEY="sekrit", VLLM_API_KEY="other")),
                      (["--api-key", "sekrit"], dict(no_keys, VLLM_API_KEY="other"))):
        s = Server(pagellm_binary, shared_dir, args, env=env, log_dir=scratch_dir).wait_ready()
        try:
            body = {"prompt": ONCE, "max_tokens": 2}
            status, err = s.post("/v1/completions", body)
            assert status == 401 and err["error"]["code"] == 401
            status, _ = s.post("/v1/completions", body, {"Authorization": "Bearer wrong"})
            assert status == 401
            assert s.get_json("/v1/models")[0] == 401
            status, _ = s.post("/v1/completions", body, {"Authorization": "Bearer sekrit"})
            assert status == 200
            assert s.request("GET", "/health")[0] == 200
            assert s.request("GET", "/ping")[0] == 200 and s.request("POST", "/ping")[0] == 200
            assert s.request("GET", "/metrics")[0] == 200
            assert s.post("/tokenize", {"prompt": "x"})[0] == 200
        finally:
            assert s.stop() == 0


def test_queue_limit(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, ["--max-queued-requests", "2", "--max-num-seqs", "1"],
               log_dir=scratch_dir).wait_ready()
    try:
        results = []

        def one():
            results.append(s.post("/v1/completions", {
                "prompt": ONCE, "max_tokens": 150, "ignore_eos": True, "temperature": 0}))

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(status for status, _ in results)
        assert 200 in codes and 503 in codes, codes
        for status, out in results:
            if status == 503:
                assert out["error"]["code"] == 503 and "queued" in out["error"]["message"]
            else:
                assert out["usage"]["completion_tokens"] == 150
    finally:
        assert s.stop() == 0


def test_graceful_shutdown(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, log_dir=scratch_dir).wait_ready()
    conn = s.connection()
    conn.request("POST", "/v1/completions", body=json.dumps({
        "prompt": ONCE, "max_tokens": 500, "ignore_eos": True, "stream": True}),
        headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = resp.readline()
    assert first.startswith(b"data: ")
    s.proc.send_signal(signal.SIGTERM)
    events, done = parse_sse(first.decode() + resp.read().decode())
    conn.close()
    assert done, "the stream must end with [DONE]"
    reasons = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
    assert reasons in (["abort"], ["length"])
    print("finish reason at shutdown:", reasons)
    s.proc.wait(30)
    assert s.stop() == 0
    assert "Shutdown complete" in s.read_log()
