"""Bad input never hurts the server: malformed JSON, wrong types, out-of-range and huge
numbers, negative max_tokens, empty messages, 10 MB bodies, invalid UTF-8, unknown fields,
over-long prompts, unknown models and routes each get the right 4xx in OpenAI's error shape,
while requests already in flight finish with the right text and the server stays up.
"""

import json
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import MODEL_NAME, Server  # noqa: E402

ONCE = "Once upon a time"
CHAT = "/v1/chat/completions"
CMPL = "/v1/completions"
MSGS = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def server(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, log_dir=scratch_dir).wait_ready()
    yield s
    assert s.stop() == 0, s.read_log()


def cmpl(**kw):
    return dict({"model": MODEL_NAME, "prompt": ONCE, "max_tokens": 4}, **kw)


def chat(**kw):
    return dict({"model": MODEL_NAME, "messages": MSGS, "max_tokens": 4}, **kw)


# (name, method, path, body (dict -> JSON, str/bytes raw), expected status, message fragment)
CASES = [
    ("malformed json", "POST", CMPL, '{"prompt": "x",', 400, "Malformed JSON"),
    ("truncated json", "POST", CHAT, '{"messages": [', 400, "Malformed JSON"),
    ("not an object", "POST", CMPL, "[1, 2, 3]", 400, "JSON object"),
    ("empty body", "POST", CMPL, "", 400, "empty"),
    ("prompt wrong type", "POST", CMPL, cmpl(prompt=5), 400, "prompt"),
    ("prompt mixed list", "POST", CMPL, cmpl(prompt=["a", 3]), 400, "prompt"),
    ("prompt empty list", "POST", CMPL, cmpl(prompt=[]), 400, "prompt"),
    ("prompt missing", "POST", CMPL, {"max_tokens": 3}, 400, "prompt"),
    ("max_tokens string", "POST", CMPL, cmpl(max_tokens="10"), 400, "max_tokens"),
    ("max_tokens float", "POST", CMPL, cmpl(max_tokens=2.5), 400, "max_tokens"),
    ("temperature string", "POST", CHAT, chat(temperature="hot"), 400, "temperature"),
    ("stream string", "POST", CMPL, cmpl(stream="yes"), 400, "stream"),
    ("n float", "POST", CMPL, cmpl(n=1.5), 400, "n"),
    ("stop number", "POST", CMPL, cmpl(stop=3), 400, "stop"),
    ("messages string", "POST", CHAT, chat(messages="hi"), 400, "messages"),
    ("message without role", "POST", CHAT, chat(messages=[{"content": "x"}]), 400, "role"),
    ("message content number", "POST", CHAT, chat(messages=[{"role": "user", "content": 5}]),
     400, "content"),
    ("completions logprobs bool", "POST", CMPL, cmpl(logprobs=True), 400, "logprobs"),
    ("chat logprobs int", "POST", CHAT, chat(logprobs=3), 400, "logprobs"),
    ("top_logprobs without logprobs", "POST", CHAT, chat(top_logprobs=2), 400, "logprobs"),
    ("negative max_tokens", "POST", CMPL, cmpl(max_tokens=-5), 400, "max_tokens"),
    ("zero max_tokens", "POST", CHAT, chat(max_tokens=0), 400, "max_tokens"),
    ("negative temperature", "POST", CMPL, cmpl(temperature=-1), 400, "temperature"),
    ("top_p zero", "POST", CMPL, cmpl(top_p=0), 400, "top_p"),
    ("top_p above one", "POST", CHAT, chat(top_p=1.5), 400, "top_p"),
    ("top_k below -1", "POST", CMPL, cmpl(top_k=-5), 400, "top_k"),
    ("presence_penalty", "POST", CMPL, cmpl(presence_penalty=5), 400, "presence_penalty"),
    ("n zero", "POST", CMPL, cmpl(n=0), 400, "n must be"),
    ("n huge", "POST", CMPL, cmpl(n=100000), 400, "n must be"),
    ("logprobs too many", "POST", CMPL, cmpl(logprobs=50), 400, "logprobs"),
    ("top_logprobs too many", "POST", CHAT, chat(logprobs=True, top_logprobs=30), 400,
     "logprobs"),
    ("max_tokens huge int", "POST", CMPL, cmpl(max_tokens=2**40), 400, "max_tokens"),
    ("max_tokens beyond int64", "POST", CMPL, '{"prompt": "x", "max_tokens": 1' + "0" * 30 + "}",
     400, "max_tokens"),
    ("temperature overflow", "POST", CMPL, '{"prompt": "x", "temperature": 1e400}', 400, ""),
    ("seed float", "POST", CMPL, cmpl(seed=1.5), 400, "seed"),
    ("n beyond int32", "POST", CMPL, cmpl(n=2**31), 400, "n"),
    ("priority without policy", "POST", CMPL, cmpl(priority=5), 400, "Priority"),
    ("empty messages", "POST", CHAT, chat(messages=[]), 400, "messages"),
    ("missing messages", "POST", CHAT, {"model": MODEL_NAME}, 400, "messages"),
    ("empty stop string", "POST", CMPL, cmpl(stop=[""]), 400, "stop"),
    ("stop token out of vocab", "POST", CMPL, cmpl(stop_token_ids=[100000]), 400, "vocab"),
    ("logit_bias bad key", "POST", CMPL, cmpl(logit_bias={"abc": 1}), 400, "logit_bias"),
    ("prompt ids out of vocab", "POST", CMPL, cmpl(prompt=[1, 99999]), 400, "vocabulary"),
    ("prompt ids beyond int32", "POST", CMPL, cmpl(prompt=[1, 2**40]), 400, "vocabulary"),
    ("stream_options without stream", "POST", CMPL,
     cmpl(stream_options={"include_usage": True}), 400, "stream"),
    ("both generation prompt flags", "POST", CHAT,
     chat(add_generation_prompt=True, continue_final_message=True), 400, "continue_final"),
    ("request chat template", "POST", CHAT, chat(chat_template="{{ 1 }}"), 400, "template"),
    ("tool_choice required", "POST", CHAT, chat(tool_choice="required"), 400, "tool_choice"),
    ("structured output type", "POST", CHAT, chat(response_format={"type": "xml"}), 400,
     "response_format"),
    ("structured output bad schema", "POST", CHAT,
     chat(response_format={"type": "json_schema", "json_schema": {
         "name": "x", "schema": {"type": "array", "uniqueItems": True}}}), 400, "uniqueItems"),
    ("structured output bad regex", "POST", CMPL, cmpl(guided_regex="(a"), 400, "regex"),
    ("structured output bad grammar", "POST", CMPL, cmpl(grammar="root ::= x"), 400, "'x'"),
    ("two structured outputs", "POST", CMPL, cmpl(guided_regex="a", guided_choice=["a"]), 400,
     "only one"),
    ("prompt_logprobs too many", "POST", CMPL, cmpl(prompt_logprobs=50), 400, "prompt logprobs"),
    ("suffix", "POST", CMPL, cmpl(suffix="x"), 400, "suffix"),
    ("beam search", "POST", CMPL, cmpl(use_beam_search=True), 400, "Beam"),
    ("invalid utf-8", "POST", CMPL, b'{"prompt": "\xff\xfe abc", "max_tokens": 2}', 400,
     "UTF-8"),
    ("invalid utf-8 in chat", "POST", CHAT,
     b'{"messages": [{"role": "user", "content": "a\xc3"}]}', 400, "UTF-8"),
    ("lone surrogate", "POST", CMPL, '{"prompt": "\\ud800", "max_tokens": 2}', 400,
     "surrogate"),
    ("over-long prompt ids", "POST", CMPL, cmpl(prompt=[1] + [403] * 600), 400,
     "maximum context length is 512"),
    ("over-long prompt text", "POST", CMPL, cmpl(prompt="The little dog ran. " * 300), 400,
     "maximum context length is 512"),
    ("over-long chat", "POST", CHAT,
     chat(messages=[{"role": "user", "content": "The little dog ran. " * 300}]), 400,
     "maximum context length is 512"),
    ("unknown model", "POST", CMPL, cmpl(model="gpt-4"), 404, "does not exist"),
    ("unknown model chat", "POST", CHAT, chat(model="gpt-4"), 404, "does not exist"),
    ("model not a string", "POST", CMPL, cmpl(model=5), 400, "model"),
    ("unknown route", "GET", "/v1/nothing", None, 404, "Not Found"),
    ("unknown post route", "POST", "/v2/completions", cmpl(), 404, "Not Found"),
    ("wrong method", "GET", CMPL, None, 405, "Method"),
    ("tokenize both", "POST", "/tokenize", {"prompt": "x", "messages": MSGS}, 400, "Exactly"),
    ("detokenize strings", "POST", "/detokenize", {"tokens": ["a"]}, 400, "tokens"),
]


def check_error(status, data, expected_status, fragment):
    assert status == expected_status, data
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert err["code"] == expected_status and isinstance(err["type"], str)
    assert fragment in err["message"], err["message"]
    return err


def start_background(server, n=6):
    """Long greedy streams that run while the bad requests arrive."""
    results = [None] * n

    def run(i):
        results[i] = server.stream(CMPL, {"prompt": ONCE, "max_tokens": 120, "temperature": 0,
                                          "ignore_eos": True, "stream": True})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results


def test_bad_inputs_get_4xx_while_others_finish(server):
    status, ref = server.post(CMPL, {"prompt": ONCE, "max_tokens": 120, "temperature": 0,
                                     "ignore_eos": True})
    assert status == 200
    reference = ref["choices"][0]["text"]
    threads, results = start_background(server)
    for name, method, path, body, expected_status, fragment in CASES:
        status, _, data = server.request(method, path, body)
        try:
            check_error(status, data, expected_status, fragment)
        except AssertionError as e:
            raise AssertionError(f"case {name!r}: {e}") from None
    for t in threads:
        t.join()
    for status, events, done in results:
        assert status == 200 and done
        text = "".join(c["text"] for e in events for c in e["choices"])
        assert text == reference
    assert server.request("GET", "/health")[0] == 200
    assert server.proc.poll() is None


def test_ten_megabyte_bodies(server):
    big = json.dumps({"prompt": "a" * (10 << 20), "max_tokens": 2})
    status, _, data = server.request("POST", CMPL, big)
    check_error(status, data, 413, "--max-body-size")
    big_chat = json.dumps({"messages": [{"role": "user", "content": "a" * (10 << 20)}]})
    status, _, data = server.request("POST", CHAT, big_chat)
    check_error(status, data, 413, "--max-body-size")
    # The connection-level refusal leaves the server healthy.
    status, out = server.post(CMPL, {"prompt": ONCE, "max_tokens": 3})
    assert status == 200 and out["usage"]["completion_tokens"] == 3


def test_unknown_fields_are_ignored(server):
    # vLLM accepts and ignores fields it does not know (with a warning in its log).
    status, out = server.post(CMPL, cmpl(foo=1, bar={"x": [1, 2]}))
    assert status == 200 and out["usage"]["completion_tokens"] == 4
    status, out = server.post(CHAT, chat(unknown_option=True, user="someone"))
    assert status == 200
    assert "ignored: bar, foo" in server.read_log()


def test_over_long_prompt_says_by_how_much(server):
    status, _, data = server.request("POST", CMPL, cmpl(prompt=[1] + [403] * 600))
    err = check_error(status, data, 400, "601 input tokens")
    assert "90 over the limit" in err["message"]


def test_abrupt_clients(server):
    # Half a request line, then a hang-up; a body shorter than its Content-Length.
    import socket
    with socket.create_connection((server.host, server.port)) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len")
    with socket.create_connection((server.host, server.port)) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    with socket.create_connection((server.host, server.port)) as s:
        s.sendall(b"GARBAGE\r\n\r\n")
        s.settimeout(10)
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    status, out = server.post(CMPL, {"prompt": ONCE, "max_tokens": 3})
    assert status == 200


def test_startup_error_after_bind_exits_promptly(pagellm_binary, shared_dir):
    """A flag error found once the port is bound (--block-size 0) must end start-up with a
    non-zero exit every time, never hang in the listener shutdown (it did in ~1 of 10 tries)."""
    import subprocess
    model = os.path.join(shared_dir, "models", "stories260K")
    for attempt in range(30):
        proc = subprocess.run([pagellm_binary, "serve", model, "--port", "0", "--block-size", "0"],
                              capture_output=True, text=True, timeout=20)
        assert proc.returncode != 0, f"attempt {attempt}: exited 0\n{proc.stderr}"
        assert "block-size" in proc.stderr, proc.stderr
