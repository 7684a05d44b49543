"""pagellm.AsyncLLM (vLLM V1's async engine client): the streamed outputs end in the same
tokens as LLM.generate for the same prompts and parameters, each streamed output extends the
previous one, concurrent requests interleave, and abort ends a request with "abort"."""

import asyncio

import pytest

PROMPTS = ["Once upon a time", "Lily went to the park", "The cat"]


def params_list(pagellm):
    return [pagellm.SamplingParams(temperature=0.0, max_tokens=32),
            pagellm.SamplingParams(temperature=0.8, top_p=0.95, seed=11, max_tokens=32,
                                   logprobs=2),
            pagellm.SamplingParams(temperature=1.0, seed=5, n=2, max_tokens=20)]


async def stream(engine, prompt, params, request_id):
    outputs = []
    async for out in engine.generate(prompt, params, request_id):
        outputs.append(out)
    return outputs


def test_async_streams_more_than_the_final_output(pagellm_module, stories_model):
    """A long request is streamed, not answered once at the end. How many outputs arrive depends
    on when the event loop drains the request's queue (outputs waiting there are merged, as
    vLLM's collector does), so the request is long enough (300 steps) for the loop to run
    between steps even on a loaded machine; three 32-token requests were not (CI, 2026-12-03)."""
    pagellm = pagellm_module

    async def main():
        engine = pagellm.AsyncLLM.from_engine_args(pagellm.AsyncEngineArgs(model=stories_model))
        try:
            return await stream(engine, PROMPTS[0],
                                pagellm.SamplingParams(temperature=0.0, max_tokens=300,
                                                       ignore_eos=True), "long")
        finally:
            engine.shutdown()

    outputs = asyncio.run(main())
    assert len(outputs) > 1
    assert [o.finished for o in outputs] == [False] * (len(outputs) - 1) + [True]
    assert len(outputs[-1].outputs[0].token_ids) == 300


def test_async_streams_the_same_tokens_as_generate(pagellm_module, stories_model):
    pagellm = pagellm_module
    reference = pagellm.LLM(model=stories_model).generate(PROMPTS, params_list(pagellm),
                                                          use_tqdm=False)

    async def main():
        engine = pagellm.AsyncLLM.from_engine_args(pagellm.AsyncEngineArgs(model=stories_model))
        try:
            return await asyncio.gather(*[
                stream(engine, p, sp, f"req-{i}")
                for i, (p, sp) in enumerate(zip(PROMPTS, params_list(pagellm)))])
        finally:
            engine.shutdown()

    streams = asyncio.run(main())
    for i, (outputs, ref) in enumerate(zip(streams, reference)):
        assert all(o.request_id == f"req-{i}" for o in outputs)
        assert [o.finished for o in outputs] == [False] * (len(outputs) - 1) + [True]
        final = outputs[-1]
        assert final.prompt_token_ids == ref.prompt_token_ids
        assert len(final.outputs) == len(ref.outputs)
        for c, rc in zip(final.outputs, ref.outputs):
            assert c.token_ids == rc.token_ids
            assert c.text == rc.text
            assert c.finish_reason == rc.finish_reason
            if rc.logprobs is not None:
                assert [list(p) for p in c.logprobs] == [list(p) for p in rc.logprobs]
                assert [p[t].logprob for p, t in zip(c.logprobs, c.token_ids)] == \
                    [p[t].logprob for p, t in zip(rc.logprobs, rc.token_ids)]
        # Cumulative outputs: each one extends the one before.
        for prev, cur in zip(outputs, outputs[1:]):
            for a, b in zip(prev.outputs, cur.outputs):
                assert b.token_ids[:len(a.token_ids)] == a.token_ids
                assert b.text.startswith(a.text)


def test_async_abort_and_cancel_free_the_engine(pagellm_module, stories_model):
    pagellm = pagellm_module
    long = pagellm.SamplingParams(temperature=0.8, max_tokens=400, ignore_eos=True)

    async def main():
        engine = pagellm.AsyncLLM(pagellm.AsyncEngineArgs(model=stories_model))
        try:
            # abort(): the stream ends with finish_reason "abort".
            outputs = []
            async for out in engine.generate("Once upon a time", long, "a"):
                outputs.append(out)
                if len(outputs) == 2:
                    await engine.abort("a")
            assert outputs[-1].finished
            assert outputs[-1].outputs[0].finish_reason == "abort"
            assert len(outputs[-1].outputs[0].token_ids) < 400
            # Leaving the iteration early aborts the request too.
            agen = engine.generate("The cat", long, "b")
            await agen.__anext__()
            await agen.aclose()
            # A task cancelled while waiting.
            started = asyncio.Event()

            async def consume():
                async for _ in engine.generate("The dog", long, "c"):
                    started.set()

            task = asyncio.ensure_future(consume())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The engine frees everything (stats are as of its last step).
            for _ in range(200):
                stats = engine.engine_stats()
                if stats["num_running"] == 0 and stats["kv_usage"] == 0.0:
                    break
                await asyncio.sleep(0.05)
            assert stats["num_running"] == 0 and stats["num_waiting"] == 0
            assert stats["kv_usage"] == 0.0
            # Still serving, and a duplicate running id is refused.
            greedy = pagellm.SamplingParams(temperature=0.0, max_tokens=8)
            done = await stream(engine, "Once upon a time", greedy, "d")
            assert done[-1].outputs[0].finish_reason == "length"
            with pytest.raises(ValueError, match="cannot be empty"):
                await stream(engine, {"prompt_token_ids": []}, greedy, "e")
            first = engine.generate("The cat", long, "f")
            await first.__anext__()
            with pytest.raises(ValueError, match="Request id f already running"):
                await stream(engine, "The cat", greedy, "f")
            await first.aclose()
        finally:
            engine.shutdown()

    asyncio.run(main())
