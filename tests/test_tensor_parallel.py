"""Tensor and pipeline parallelism end to end: `pagellm generate -tp N -pp M` starts its ranks
with mpirun and must give the greedy token ids of `-tp 1`, over both MPI transports (shared
memory and TCP forced, oversubscribed on a small machine); a killed worker must end a server
with an error quickly. The time in collectives shows in the server's metrics and stats line and
in `bench latency`; `eval kl -tp 2` agrees with `-tp 1`.

The exact numbers (logits within 1e-5, bitwise repeatability, every split) are checked in
process by tests/tensor_parallel_test.cc; here the launch, the messages between processes and
the engine features on top (batching of mixed lengths, chunked prefill, preemption).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "e2e"))
from pagellm_server import Server  # noqa: E402

import gen_model  # noqa: E402  (tools/ is on sys.path through conftest.py)

PROMPTS = [[1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69, 73],
           [1, 7], [1, 100, 200, 300, 400, 12, 34, 56], [1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]]


@pytest.fixture(scope="module")
def random_model(scratch_dir, shared_dir):
    """A random Llama with 4 query heads and 2 KV heads (replicated at TP 4), Q8_0."""
    path = os.path.join(scratch_dir, "tp-random.gguf")
    assert gen_model.main(["--quiet", "--preset", "small", "--layers", "2", "--gguf", path,
                           "--gguf-type", "q8_0", "--shared-dir", shared_dir]) == 0
    return path


def generate(binary, model, tp, scratch_dir, btl=None, extra=()):
    """Greedy outputs (token id lists) of PROMPTS, and the completed process."""
    inp = os.path.join(scratch_dir, "tp-prompts.jsonl")
    with open(inp, "w") as f:
        for p in PROMPTS:
            f.write(json.dumps({"prompt_token_ids": p, "max_tokens": 12, "temperature": 0,
                                "ignore_eos": True}) + "\n")
    env = os.environ.copy()
    if btl:
        env["OMPI_MCA_btl"] = btl
    args = [binary, "generate", "--model", model, "--input", inp, "--threads", "1",
            "--max-num-batched-tokens", "16", "--kv-cache-memory", "16MiB", "-tp", str(tp)]
    proc = subprocess.run(args + list(extra), capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return [line["token_ids"] for line in lines], proc


def test_random_model_tp2_tp4_match_tp1_on_both_transports(pagellm_binary, random_model,
                                                           scratch_dir):
    want, _ = generate(pagellm_binary, random_model, 1, scratch_dir)
    assert len(want) == len(PROMPTS) and all(len(ids) == 12 for ids in want)
    got, proc = generate(pagellm_binary, random_model, 2, scratch_dir, btl="self,vader")
    assert got == want
    assert "tensor-parallel rank 1/2" in proc.stderr, proc.stderr  # each rank logs its shard
    got, _ = generate(pagellm_binary, random_model, 4, scratch_dir, btl="self,tcp")
    assert got == want


def test_gemma3_tp2_matches_tp1(pagellm_binary, scratch_dir, shared_dir):
    """Gemma 3 (post-norms over the all-reduced projections, sliding-window layers, GeGLU)."""
    path = os.path.join(scratch_dir, "tp-gemma3")
    assert gen_model.main(["--quiet", "--preset", "tiny-gemma3",
                           "--out", path, "--shared-dir", shared_dir]) == 0
    want, _ = generate(pagellm_binary, path, 1, scratch_dir)
    got, _ = generate(pagellm_binary, path, 2, scratch_dir, btl="self,vader")
    assert got == want


@pytest.fixture(scope="module")
def moe_models(scratch_dir, shared_dir):
    """Random Qwen3-MoE (8 experts of 64, 2 per token) and Qwen2-MoE (plus a shared expert of
    128) models, HF safetensors: every expert split 32 / 16 wide at TP 2 / 4."""
    paths = {}
    for preset in ("tiny-qwen3moe", "tiny-qwen2moe"):
        path = os.path.join(scratch_dir, "tp-" + preset)
        assert gen_model.main(["--quiet", "--preset", preset, "--out", path,
                               "--shared-dir", shared_dir]) == 0
        paths[preset] = path
    return paths


@pytest.mark.parametrize("preset", ["tiny-qwen3moe", "tiny-qwen2moe"])
def test_moe_tp2_tp4_match_tp1(pagellm_binary, moe_models, scratch_dir, preset):
    """Mixture-of-experts layers split inside every expert; the router stays whole, so every
    rank picks the same experts."""
    path = moe_models[preset]
    want, _ = generate(pagellm_binary, path, 1, scratch_dir)
    assert len(want) == len(PROMPTS) and all(len(ids) == 12 for ids in want)
    got, proc = generate(pagellm_binary, path, 2, scratch_dir, btl="self,vader")
    assert got == want
    assert "tensor-parallel rank 1/2" in proc.stderr, proc.stderr
    got, _ = generate(pagellm_binary, path, 4, scratch_dir, btl="self,tcp")
    assert got == want
    again, _ = generate(pagellm_binary, path, 4, scratch_dir, btl="self,tcp")
    assert again == got


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8"])
def test_quantized_kv_cache_tp2_matches_tp1(pagellm_binary, stories_model, moe_models,
                                            scratch_dir, kv_dtype):
    """The start-up calibration of a quantised KV cache runs once, over the whole model on rank
    0; every rank stores its heads with their part of it, as one rank would."""
    extra = ("--kv-cache-dtype", kv_dtype, "--calculate-kv-scales")
    for model in (stories_model, moe_models["tiny-qwen3moe"]):
        want, _ = generate(pagellm_binary, model, 1, scratch_dir, extra=extra)
        got, _ = generate(pagellm_binary, model, 2, scratch_dir, btl="self,vader", extra=extra)
        assert got == want, model


def test_moe_server_tp2_frees_every_kv_block(pagellm_binary, shared_dir, moe_models,
                                             scratch_dir):
    """A server of a split MoE model with an int8 KV cache answers as TP 1 and, once idle,
    holds no KV blocks."""
    path = moe_models["tiny-qwen2moe"]
    want, _ = generate(pagellm_binary, path, 1, scratch_dir, extra=("--kv-cache-dtype", "int8"))
    server = Server(pagellm_binary, shared_dir, model=path, log_dir=scratch_dir,
                    extra_args=["-tp", "2", "--threads", "1", "--kv-cache-dtype", "int8"])
    try:
        server.wait_ready(timeout=90)
        for prompt, ids in zip(PROMPTS, want):
            status, body = server.post("/v1/completions", {
                "model": "stories", "prompt": prompt, "max_tokens": 12, "temperature": 0,
                "ignore_eos": True, "logprobs": 1, "return_tokens_as_token_ids": True})
            assert status == 200, body
            tokens = body["choices"][0]["logprobs"]["tokens"]
            assert tokens == [f"token_id:{i}" for i in ids], body
        metrics = server.metrics()
        assert metrics.get("vllm:num_requests_running") == 0
        assert metrics.get("vllm:kv_cache_usage_perc") == 0
        # Rank 0's time inside the collectives (docs/PARALLELISM.md, "Communication time").
        steps = metrics.get("pagellm:tensor_parallel_forward_steps_total")
        assert steps > 0
        assert metrics.get("pagellm:tensor_parallel_all_reduces_total") == 5 * steps  # 2 layers
        comm = metrics.get("pagellm:tensor_parallel_comm_seconds_total")
        assert 0 < metrics.get("pagellm:tensor_parallel_all_reduce_seconds_total") < comm
        assert comm < metrics.get("pagellm:tensor_parallel_forward_seconds_total")
        # The periodic stats line (every 5 s while there is traffic) ends with it too.
        deadline = time.time() + 8
        while "TP comm: " not in server.read_log() and time.time() < deadline:
            time.sleep(0.2)
        assert re.search(r"Prefix cache hit rate: [0-9.]+%, TP comm: [0-9.]+ ms/step "
                         r"\([0-9]+% of forward\)", server.read_log()), server.read_log()
    finally:
        assert server.stop() == 0, server.read_log()


def test_tp1_server_has_no_tensor_parallel_metrics(pagellm_binary, shared_dir, scratch_dir):
    server = Server(pagellm_binary, shared_dir, extra_args=["--threads", "1"],
                    log_dir=scratch_dir)
    try:
        server.wait_ready(timeout=60)
        status, _ = server.post("/v1/completions", {"model": "stories", "prompt": "Once",
                                                    "max_tokens": 4, "temperature": 0})
        assert status == 200
        assert not any(n.startswith("pagellm:tensor_parallel") for n in server.metrics().names())
    finally:
        assert server.stop() == 0, server.read_log()


def bench_latency(binary, model, tp):
    proc = subprocess.run([binary, "bench", "latency", "--model", model, "-tp", str(tp),
                           "--threads", "1", "-p", "16", "-n", "4", "-r", "1", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_bench_latency_reports_the_all_reduce_time(pagellm_binary, random_model):
    assert "tensor_parallel_comm" not in bench_latency(pagellm_binary, random_model, 1)
    comm = bench_latency(pagellm_binary, random_model, 2)["tensor_parallel_comm"]
    for kind, steps in (("prefill", 1), ("decode", 4)):
        c = comm[kind]
        assert c["steps"] == steps
        assert c["all_reduces_per_step"] == 5  # the embedding's and two per layer (2 layers)
        assert 0 < c["all_reduce_ms_per_step"] < c["comm_ms_per_step"]
        assert c["us_per_all_reduce"] == pytest.approx(1e3 * c["all_reduce_ms_per_step"] / 5)
        assert 0 < c["comm_share_of_step"] < 1


def eval_kl(binary, model, text, tp):
    proc = subprocess.run([binary, "eval", "kl", "--model", model, "--text", text,
                           "--kv-cache-dtype", "int8", "--max-documents", "2", "--threads", "1",
                           "--json", "-tp", str(tp)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_eval_kl_tp2_matches_tp1(pagellm_binary, stories_model, shared_dir):
    """The int8 cache runs split, its model-dtype reference on rank 0 alone (the whole model):
    the reference is TP 1's bit for bit, the candidate within rounding."""
    text = os.path.join(shared_dir, "data", "tinystories_sample.txt")
    one = eval_kl(pagellm_binary, stories_model, text, 1)
    two = eval_kl(pagellm_binary, stories_model, text, 2)
    assert two["positions"] == one["positions"] > 0
    assert two["reference"]["mean_nll"] == one["reference"]["mean_nll"]
    assert two["candidate"]["mean_nll"] == pytest.approx(one["candidate"]["mean_nll"], rel=1e-3)
    assert two["mean_kl"] == pytest.approx(one["mean_kl"], rel=0.1, abs=1e-6)
    assert two["top1_agreement"] == pytest.approx(one["top1_agreement"], abs=0.01)


def test_shared_model_tp2_matches_tp1_with_preemption(pagellm_binary, stories_model,
                                                      scratch_dir):
    # 12 blocks of 4 tokens cannot hold the four requests at once: some are preempted and
    # recomputed, on every rank alike (the scheduler runs on rank 0 only).
    extra = ("--num-gpu-blocks-override", "12", "--block-size", "4", "--max-model-len", "40")
    want, _ = generate(pagellm_binary, stories_model, 1, scratch_dir, extra=extra)
    got, _ = generate(pagellm_binary, stories_model, 2, scratch_dir, btl="self,tcp", extra=extra)
    assert got == want
    # Preemption by swapping: the block copies go to every rank too.
    swap = extra + ("--preemption-mode", "swap", "--swap-space", "0.001")
    got, _ = generate(pagellm_binary, stories_model, 2, scratch_dir, extra=swap)
    assert got == want


def test_split_that_does_not_divide_is_a_clear_error(pagellm_binary, random_model):
    proc = subprocess.run([pagellm_binary, "generate", "--model", random_model, "--prompt", "x",
                           "--max-tokens", "1", "-tp", "3"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "4 attention heads are not divisible" in proc.stderr, proc.stderr


def descends_from(pid, root):
    """Whether process `pid` is `root` or started (through any chain of parents) by it."""
    while pid > 1:
        if pid == root:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def rank_pids(rank, root=None):
    """Pids of this user's pagellm processes that mpirun started as `rank` (only those under
    process `root` when given: other test runs on the machine may have ranks of their own)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "pagellm" and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            if root is None or descends_from(int(entry), root):
                pids.append(int(entry))
    return pids


def test_killed_worker_ends_the_server(pagellm_binary, shared_dir, scratch_dir):
    server = Server(pagellm_binary, shared_dir, extra_args=["-tp", "2", "--threads", "1"],
                    log_dir=scratch_dir)
    try:
        server.wait_ready(timeout=90)
        status, body = server.post("/v1/completions", {"model": "stories", "prompt": "Once",
                                                       "max_tokens": 4, "temperature": 0})
        assert status == 200 and body["usage"]["completion_tokens"] == 4, body
        workers = [p for p in rank_pids(1, server.proc.pid) if p != server.proc.pid]
        assert workers, "no rank-1 process found"
        os.kill(workers[0], signal.SIGKILL)
        start = time.time()
        code = server.proc.wait(timeout=30)
        assert time.time() - start < 30
        assert code != 0
        log = server.read_log()
        assert "tensor-parallel ranks ended" in log, log
    finally:
        server.stop()


def test_sigterm_shuts_every_rank_down(pagellm_binary, shared_dir, scratch_dir):
    server = Server(pagellm_binary, shared_dir, extra_args=["-tp", "2", "--threads", "1"],
                    log_dir=scratch_dir)
    try:
        server.wait_ready(timeout=90)
        workers = rank_pids(1, server.proc.pid)
        assert workers
        start = time.time()
        assert server.stop(signal.SIGTERM, timeout=30) == 0, server.read_log()
        assert time.time() - start < 30
        deadline = time.time() + 10
        while any(alive(p) for p in workers) and time.time() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in workers), "a worker outlived the server"
    finally:
        server.stop()


# Pipeline parallelism (-pp): the same launch, the stages' hand-over between processes.

def test_random_model_pp2_and_tp2_pp2_match_tp1_on_both_transports(pagellm_binary,
                                                                   random_model, scratch_dir):
    """Two stages of one layer each over shared memory, then two stages of two TP ranks over
    TCP (stage 1's ranks receive the hidden states of stage 0's)."""
    want, _ = generate(pagellm_binary, random_model, 1, scratch_dir)
    got, proc = generate(pagellm_binary, random_model, 1, scratch_dir, btl="self,vader",
                         extra=("-pp", "2"))
    assert got == want
    assert "pipeline-parallel rank 1/2: stage 1/2, layers [1, 2)" in proc.stderr, proc.stderr
    got, _ = generate(pagellm_binary, random_model, 2, scratch_dir, btl="self,tcp",
                      extra=("-pp", "2"))
    assert got == want


def test_shared_model_pp2_matches_tp1_with_preemption_and_partition(pagellm_binary,
                                                                    stories_model, scratch_dir):
    """Swap preemption at PP 2 (block copies on every stage's cache), and an explicit layer
    partition; a partition that does not add up is a clear error."""
    extra = ("--num-gpu-blocks-override", "12", "--block-size", "4", "--max-model-len", "40",
             "--preemption-mode", "swap", "--swap-space", "0.001")
    want, _ = generate(pagellm_binary, stories_model, 1, scratch_dir, extra=extra)
    got, _ = generate(pagellm_binary, stories_model, 1, scratch_dir, extra=extra + ("-pp", "2"))
    assert got == want
    env = dict(os.environ, PAGELLM_PP_LAYER_PARTITION="1,4")
    proc = subprocess.run([pagellm_binary, "generate", "--model", stories_model, "--prompt", "x",
                           "--max-tokens", "2", "--threads", "1", "-pp", "2"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "layers [1, 5)" in proc.stderr, proc.stderr
    env["PAGELLM_PP_LAYER_PARTITION"] = "5,1"
    proc = subprocess.run([pagellm_binary, "generate", "--model", stories_model, "--prompt", "x",
                           "--max-tokens", "1", "--threads", "1", "-pp", "2"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    assert "adds up to 6 layers but the model has 5" in proc.stderr, proc.stderr


def test_eval_and_bench_take_pp(pagellm_binary, stories_model, shared_dir, scratch_dir):
    text = os.path.join(scratch_dir, "pp-eval.txt")
    with open(os.path.join(shared_dir, "data", "tinystories_sample.txt"), encoding="utf-8") as f:
        with open(text, "w", encoding="utf-8") as out:
            out.write(f.read(3000))
    results = []
    for extra in ((), ("-pp", "2")):
        proc = subprocess.run([pagellm_binary, "eval", "perplexity", "--model", stories_model,
                               "--text", text, "--threads", "1", "--json"] + list(extra),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert results[1]["mean_nll"] == results[0]["mean_nll"]  # the same bits: stages split no sum
    proc = subprocess.run([pagellm_binary, "bench", "latency", "--model", stories_model,
                           "-p", "16", "-n", "4", "-r", "1", "-t", "1", "--json", "-pp", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pipeline_parallel_size"] == 2


def test_pp_server_answers_and_a_killed_stage_ends_it(pagellm_binary, shared_dir, stories_model,
                                                      scratch_dir):
    """A server of 2 stages of 2 ranks answers as TP 1; killing a rank of the last stage ends
    it with an error within 30 s."""
    want, _ = generate(pagellm_binary, stories_model, 1, scratch_dir)
    server = Server(pagellm_binary, shared_dir, log_dir=scratch_dir,
                    extra_args=["-tp", "2", "-pp", "2", "--threads", "1"])
    try:
        server.wait_ready(timeout=90)
        status, body = server.post("/v1/completions", {
            "model": "stories", "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 0,
            "ignore_eos": True, "logprobs": 1, "return_tokens_as_token_ids": True})
        assert status == 200, body
        assert body["choices"][0]["logprobs"]["tokens"] == [f"token_id:{i}" for i in want[0]]
        workers = [p for p in rank_pids(3, server.proc.pid) if p != server.proc.pid]
        assert workers, "no rank-3 process found"
        os.kill(workers[0], signal.SIGKILL)
        start = time.time()
        code = server.proc.wait(timeout=30)
        assert time.time() - start < 30
        assert code != 0
        assert "tensor-parallel ranks ended" in server.read_log(), server.read_log()
    finally:
        server.stop()


def test_pp_server_sigterm_shuts_every_rank_down(pagellm_binary, shared_dir, scratch_dir):
    server = Server(pagellm_binary, shared_dir, extra_args=["-pp", "2", "--threads", "1"],
                    log_dir=scratch_dir)
    try:
        server.wait_ready(timeout=90)
        status, body = server.post("/v1/completions", {"model": "stories", "prompt": "Once",
                                                       "max_tokens": 4, "temperature": 0})
        assert status == 200 and body["usage"]["completion_tokens"] == 4, body
        workers = rank_pids(1, server.proc.pid)
        assert workers
        assert server.stop(signal.SIGTERM, timeout=30) == 0, server.read_log()
        deadline = time.time() + 10
        while any(alive(p) for p in workers) and time.time() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in workers), "a worker outlived the server"
    finally:
        server.stop()
