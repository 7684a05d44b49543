"""/metrics: every vLLM metric the issue lists is present with vLLM's name, type, labels and
buckets, the page parses as Prometheus text, and the counters move by exactly what known
requests imply.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e"))
from pagellm_server import MODEL_NAME, Server  # noqa: E402

ONCE = "Once upon a time"  # 5 prompt tokens with BOS

GAUGES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
          "vllm:gpu_cache_usage_perc", "vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc",
          "vllm:cache_config_info"]
COUNTERS = ["vllm:num_preemptions_total", "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total", "vllm:request_success_total",
            "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"]
HISTOGRAMS = ["vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
              "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
              "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
              "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
              "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
              "vllm:iteration_tokens_total", "vllm:request_params_n",
              "vllm:request_params_max_tokens", "vllm:request_max_num_generation_tokens"]

# vLLM V1's buckets (vllm/v1/metrics/loggers.py), as prometheus_client prints them.
TTFT_LE = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5",
           "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0",
           "640.0", "2560.0", "+Inf"]
ITL_LE = ["0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75",
          "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "+Inf"]
LATENCY_LE = ["0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0",
              "30.0", "40.0", "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0",
              "7680.0", "+Inf"]
ITERATION_LE = ["1.0", "8.0", "16.0", "32.0", "64.0", "128.0", "256.0", "512.0", "1024.0",
                "2048.0", "4096.0", "8192.0", "16384.0", "+Inf"]
# build_1_2_5_buckets(max_model_len=512)
TOKENS_LE = ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "+Inf"]


@pytest.fixture(scope="module")
def server(pagellm_binary, shared_dir, scratch_dir):
    s = Server(pagellm_binary, shared_dir, log_dir=scratch_dir).wait_ready()
    yield s
    assert s.stop() == 0, s.read_log()


def le_values(m, name):
    return [labels["le"] for n, labels, _ in m.samples if n == name + "_bucket"]


def test_every_metric_present_with_vllm_shape(server):
    m = server.metrics()
    for name in GAUGES:
        assert m.types.get(name) == "gauge", name
    for name in COUNTERS:
        assert m.types.get(name) == "counter", name
    for name in HISTOGRAMS:
        assert m.types.get(name) == "histogram", name
        assert m.get(name + "_count", model_name=MODEL_NAME, engine="0") == 0
    for name in GAUGES[:-1] + COUNTERS:
        for n, labels, _ in m.samples:
            if n == name:
                assert labels["model_name"] == MODEL_NAME and labels["engine"] == "0", labels
    for reason in ("stop", "length", "abort"):
        assert m.get("vllm:request_success_total", finished_reason=reason) == 0
    assert le_values(m, "vllm:time_to_first_token_seconds") == TTFT_LE
    assert le_values(m, "vllm:inter_token_latency_seconds") == ITL_LE
    assert le_values(m, "vllm:request_time_per_output_token_seconds") == ITL_LE
    for name in ("vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                 "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds"):
        assert le_values(m, name) == LATENCY_LE
    assert le_values(m, "vllm:iteration_tokens_total") == ITERATION_LE
    assert le_values(m, "vllm:request_prompt_tokens") == TOKENS_LE
    info = [labels for n, labels, v in m.samples if n == "vllm:cache_config_info" and v == 1.0]
    assert len(info) == 1
    assert info[0]["block_size"] == "16" and info[0]["enable_prefix_caching"] == "True"
    assert int(info[0]["num_gpu_blocks"]) > 0
    assert m.get("vllm:kv_cache_usage_perc") == 0 and m.get("vllm:num_requests_running") == 0


def test_counters_move_by_known_amounts(server):
    before = server.metrics()
    status, tok = server.post("/tokenize", {"messages": [{"role": "user", "content": "Hi"}]})
    chat_prompt = tok["count"]
    for _ in range(3):
        status, out = server.post("/v1/completions", {"prompt": ONCE, "max_tokens": 7,
                                                      "ignore_eos": True, "temperature": 0})
        assert status == 200 and out["usage"]["completion_tokens"] == 7
    status, out = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "ignore_eos": True})
    assert status == 200 and out["usage"] == dict(out["usage"], prompt_tokens=chat_prompt,
                                                  completion_tokens=4)
    status, events, done = server.stream("/v1/completions", {
        "prompt": ONCE, "n": 2, "max_tokens": 3, "ignore_eos": True, "seed": 1, "stream": True})
    assert status == 200 and done
    after = server.metrics()

    def delta(name, **labels):
        return after.get(name, **labels) - before.get(name, **labels)

    requests = 3 + 1 + 2
    assert delta("vllm:prompt_tokens_total") == 3 * 5 + chat_prompt + 2 * 5
    assert delta("vllm:generation_tokens_total") == 3 * 7 + 4 + 2 * 3
    assert delta("vllm:request_success_total", finished_reason="length") == requests
    assert delta("vllm:request_success_total", finished_reason="stop") == 0
    for name in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                 "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                 "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds",
                 "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
                 "vllm:request_time_per_output_token_seconds"):
        assert delta(name + "_count") == requests, name
    # One inter-token gap per token after the first.
    assert delta("vllm:inter_token_latency_seconds_count") == 3 * 6 + 3 + 2 * 2
    assert delta("vllm:request_generation_tokens_sum") == 3 * 7 + 4 + 2 * 3
    assert delta("vllm:request_prompt_tokens_sum") == 3 * 5 + chat_prompt + 2 * 5
    # Request parameters: once per client prompt (the n = 2 request counts once).
    assert delta("vllm:request_params_n_count") == 5
    assert delta("vllm:request_params_n_sum") == 3 + 1 + 2
    assert delta("vllm:request_params_max_tokens_sum") == 3 * 7 + 4 + 3
    assert delta("vllm:iteration_tokens_total_count") >= 7
    assert delta("vllm:iteration_tokens_total_sum") >= 3 * 5 + chat_prompt + 5 + 3 * 6
    assert delta("vllm:prefix_cache_queries_total") > 0
    assert after.get("vllm:num_requests_running") == 0
    assert after.get("vllm:num_requests_waiting") == 0
    assert after.get("vllm:kv_cache_usage_perc") == 0
    for name in HISTOGRAMS:
        counts = [v for n, _, v in after.samples if n == name + "_bucket"]
        assert counts == sorted(counts), name
        assert counts[-1] == after.get(name + "_count"), name


def test_prefix_cache_hits_counted(server):
    prompt = " ".join(["The little dog ran to the park and played with a ball."] * 4)
    server.post("/v1/completions", {"prompt": prompt, "max_tokens": 1})
    before = server.metrics()
    server.post("/v1/completions", {"prompt": prompt, "max_tokens": 1})
    after = server.metrics()
    hits = after.get("vllm:prefix_cache_hits_total") - before.get("vllm:prefix_cache_hits_total")
    assert hits >= 32 and hits % 16 == 0


def test_aborted_request_counted(server):
    before = server.metrics()
    conn = server.connection()
    conn.request("POST", "/v1/completions", body='{"prompt": "Once", "max_tokens": 500, '
                 '"ignore_eos": true, "stream": true}', headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.readline()
    conn.close()  # hang up mid-stream
    import time
    for _ in range(200):
        m = server.metrics()
        done = m.get("vllm:request_success_total") - before.get("vllm:request_success_total")
        if done == 1 and m.get("vllm:num_requests_running") == 0:
            break
        time.sleep(0.05)
    assert done == 1
    aborted = (m.get("vllm:request_success_total", finished_reason="abort")
               - before.get("vllm:request_success_total", finished_reason="abort"))
    assert aborted in (0, 1)  # 0 only if all 500 tokens were out before the hang-up was seen
    assert m.get("vllm:kv_cache_usage_perc") == 0


def test_structured_output_counters(server):
    """pagellm's structured-output counters: masks built, compile-cache misses then hits."""
    before = server.metrics()
    body = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 8,
            "structured_outputs": {"choice": ["yes", "no"]}}
    for _ in range(2):
        status, out = server.post("/v1/completions", body)
        assert status == 200 and out["choices"][0]["text"] in ("yes", "no"), out
    m = server.metrics()

    def delta(name):
        return m.get(name, model_name=MODEL_NAME) - before.get(name, model_name=MODEL_NAME)

    for name in ("pagellm:structured_output_masks_total",
                 "pagellm:structured_output_compile_cache_hits_total",
                 "pagellm:structured_output_compile_cache_misses_total",
                 "pagellm:structured_output_mask_seconds_total",
                 "pagellm:structured_output_compile_seconds_total"):
        assert m.types.get(name[:-len("_total")]) == "counter" or m.types.get(name) == "counter", name
    assert delta("pagellm:structured_output_masks_total") >= 2
    assert delta("pagellm:structured_output_compile_cache_misses_total") == 1
    assert delta("pagellm:structured_output_compile_cache_hits_total") >= 1
    assert delta("pagellm:structured_output_compile_seconds_total") > 0
