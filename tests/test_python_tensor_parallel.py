"""pagellm.LLM(model, tensor_parallel_size=N): the ranks run as threads of the Python process
(rank 0 the engine, ranks 1..N-1 workers, over the thread communicator). Greedy outputs at TP 2
and 4 equal TP 1 on a shared model and on a random one (2 KV heads, replicated at TP 4); the
async engine takes the same argument; the engine stats carry the time in collectives; a split
that fails on the workers surfaces as a Python exception; shutdown, garbage collection and
interpreter exit stop the workers without hanging. (A worker failing on its own, which ends the
group at once, is tests/tensor_parallel_test.cc's TensorParallelThreads test.)

The exact numbers of the split (logits within 1e-5, every architecture) are checked by
tests/tensor_parallel_test.cc, the binary's ranks under mpirun by tests/test_tensor_parallel.py.
"""

import asyncio
import gc
import os
import subprocess
import sys
import time

import pytest

import gen_model  # noqa: E402  (tools/ is on sys.path through conftest.py)

PROMPTS = [[1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45], [1, 7], [1, 100, 200, 300, 400, 12],
           [1, 3, 3, 3, 3, 3, 3, 3, 3]]


def greedy(pagellm, model, tp, **kwargs):
    """Greedy token ids of PROMPTS and the engine stats after them."""
    llm = pagellm.LLM(model=model, tensor_parallel_size=tp, threads=1,
                      kv_cache_memory_bytes=16 << 20, max_num_batched_tokens=16, **kwargs)
    params = pagellm.SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    stats = llm.engine_stats()
    llm.shutdown()
    return [o.outputs[0].token_ids for o in outs], stats


@pytest.fixture(scope="module")
def random_model(scratch_dir, shared_dir):
    """A random Llama with 4 query heads and 2 KV heads, Q8_0."""
    path = os.path.join(scratch_dir, "py-tp-random.gguf")
    assert gen_model.main(["--quiet", "--preset", "small", "--layers", "2", "--gguf", path,
                           "--gguf-type", "q8_0", "--shared-dir", shared_dir]) == 0
    return path


def test_shared_model_tp2_tp4_equal_tp1(pagellm_module, stories_model):
    want, stats = greedy(pagellm_module, stories_model, 1)
    assert all(len(ids) == 12 for ids in want)
    assert stats["tensor_parallel_size"] == 1
    assert stats["tp_comm_seconds"] == 0 and stats["tp_forward_steps"] == 0
    for tp in (2, 4):
        got, stats = greedy(pagellm_module, stories_model, tp)
        assert got == want, tp
        # Rank 0's time inside the collectives: an embedding all-reduce and two per layer (5
        # layers) in every step, plus the step broadcast and the logits gather.
        steps = stats["tp_forward_steps"]
        assert stats["tensor_parallel_size"] == tp
        assert steps > 0
        assert stats["tp_all_reduces"] == 11 * steps
        assert 0 < stats["tp_all_reduce_seconds"] < stats["tp_comm_seconds"]
        assert stats["tp_comm_seconds"] < stats["tp_forward_seconds"]


def test_random_model_tp2_tp4_equal_tp1(pagellm_module, random_model):
    want, _ = greedy(pagellm_module, random_model, 1)
    for tp in (2, 4):
        got, _ = greedy(pagellm_module, random_model, tp)
        assert got == want, tp


def test_async_llm_takes_tensor_parallel_size(pagellm_module, stories_model):
    pagellm = pagellm_module
    params = pagellm.SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    want = pagellm.LLM(model=stories_model, threads=1).generate(
        "Once upon a time", params, use_tqdm=False)[0].outputs[0].token_ids

    async def main():
        engine = pagellm.AsyncLLM(pagellm.AsyncEngineArgs(model=stories_model,
                                                          tensor_parallel_size=2, threads=1))
        try:
            final = None
            async for out in engine.generate("Once upon a time", params, "tp"):
                final = out
            return final.outputs[0].token_ids, engine.engine_stats()
        finally:
            engine.shutdown()

    got, stats = asyncio.run(main())
    assert got == want
    assert stats["tp_comm_seconds"] > 0


def test_split_errors_are_exceptions_and_do_not_hang(pagellm_module, scratch_dir, shared_dir,
                                                     stories_model):
    pagellm = pagellm_module
    start = time.time()
    with pytest.raises(ValueError, match="8 attention heads are not divisible"):
        pagellm.LLM(model=stories_model, tensor_parallel_size=3, threads=1)
    # An intermediate of 5 columns leaves rank 3 of 4 none (ceil(5 / 4) = 2 per rank): every
    # rank reports it, the workers stop, and the error is the exception.
    path = os.path.join(scratch_dir, "py-tp-narrow.gguf")
    assert gen_model.main(["--quiet", "--preset", "small", "--layers", "1", "--intermediate",
                           "5", "--gguf", path, "--shared-dir", shared_dir]) == 0
    with pytest.raises(ValueError, match="leaves rank 3 no MLP columns"):
        pagellm.LLM(model=path, tensor_parallel_size=4, threads=1)
    # The same engine at TP 2 still starts in this process afterwards.
    llm = pagellm.LLM(model=path, tensor_parallel_size=2, threads=1)
    llm.shutdown()
    assert time.time() - start < 30


def test_shutdown_then_generate_raises(pagellm_module, stories_model):
    pagellm = pagellm_module
    llm = pagellm.LLM(model=stories_model, tensor_parallel_size=2, threads=1)
    params = pagellm.SamplingParams(temperature=0.0, max_tokens=4)
    assert llm.generate("Once", params, use_tqdm=False)[0].outputs[0].token_ids
    llm.shutdown()
    llm.shutdown()  # idempotent
    with pytest.raises(RuntimeError, match="shut down"):
        llm.generate("Once", params, use_tqdm=False)
    assert llm.get_tokenizer().encode("Once")  # the tokenizer outlives the workers
    # Collected without shutdown(): the destructor stops the workers.
    llm = pagellm.LLM(model=stories_model, tensor_parallel_size=2, threads=1)
    del llm
    gc.collect()


EXIT_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from pagellm import LLM, SamplingParams
llm = LLM(model=sys.argv[2], tensor_parallel_size=2, threads=1)
out = llm.generate("Once upon a time", SamplingParams(temperature=0.0, max_tokens=4),
                   use_tqdm=False)
cycle = [llm]
cycle.append(cycle)  # alive until interpreter exit: the atexit hook stops its workers
print("DONE", len(out[0].outputs[0].token_ids))
"""


def test_interpreter_exit_stops_the_workers(pagellm_module, stories_model):
    path = os.environ["PAGELLM_PYTHONPATH"]
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, path, stories_model],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "DONE 4" in proc.stdout
    assert time.time() - start < 60
