"""vLLM V1's AsyncLLM for people who build their own servers: generate() is an async iterator
of cumulative RequestOutputs, abort() stops a request. The C++ engine runs on its own loop
thread (engine/async_engine.h); its outputs reach the asyncio event loop through a pipe that
the loop watches (loop.add_reader), so no thread waits per request."""

import asyncio
from typing import Any, AsyncGenerator, Optional

from pagellm import _pagellm, _shutdown
from pagellm.engine.arg_utils import AsyncEngineArgs
from pagellm.inputs import parse_prompt
from pagellm.outputs import (CompletionOutput, RequestOutput, logprobs_position,
                             prompt_logprobs_list)
from pagellm.sampling_params import SamplingParams
from pagellm.transformers_utils.tokenizer import Tokenizer


class _Request:
    """One generate() call: its samples' cumulative state and the queue that wakes it."""

    def __init__(self, request_id: str, prompt: Optional[str], prompt_token_ids: list,
                 params: SamplingParams):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.want_logprobs = params.logprobs is not None
        self.outputs = [CompletionOutput(index=k, text="", token_ids=[],
                                         cumulative_logprob=0.0 if self.want_logprobs else None,
                                         logprobs=[] if self.want_logprobs else None)
                        for k in range(params.n)]
        self.prompt_logprobs = None
        self.num_cached_tokens = 0
        self.unfinished = params.n
        self.error: Optional[str] = None
        self.queue: asyncio.Queue = asyncio.Queue()

    def apply(self, index: int, native) -> None:
        (_, token_ids, text, logprobs, prompt_logprobs, finished, finish_reason, stop_reason,
         num_cached, error) = native
        out = self.outputs[index]
        out.token_ids.extend(token_ids)
        out.text += text
        if self.want_logprobs:
            for entry in logprobs:
                out.logprobs.append(logprobs_position(entry))
                out.cumulative_logprob += entry[1]
        if prompt_logprobs is not None and self.prompt_logprobs is None:
            self.prompt_logprobs = prompt_logprobs_list(prompt_logprobs)
        if finished:
            out.finish_reason = finish_reason
            out.stop_reason = stop_reason
            self.num_cached_tokens = num_cached
            self.unfinished -= 1
            if error:
                self.error = error

    def snapshot(self) -> RequestOutput:
        outputs = [CompletionOutput(index=o.index, text=o.text, token_ids=list(o.token_ids),
                                    cumulative_logprob=o.cumulative_logprob,
                                    logprobs=None if o.logprobs is None else list(o.logprobs),
                                    finish_reason=o.finish_reason, stop_reason=o.stop_reason)
                   for o in self.outputs]
        return RequestOutput(request_id=self.request_id, prompt=self.prompt,
                             prompt_token_ids=self.prompt_token_ids,
                             prompt_logprobs=self.prompt_logprobs, outputs=outputs,
                             finished=self.unfinished == 0,
                             num_cached_tokens=self.num_cached_tokens)


class AsyncLLM:
    """An asynchronous engine client (vLLM V1's AsyncLLM)."""

    def __init__(self, engine_args: AsyncEngineArgs) -> None:
        if not isinstance(engine_args, AsyncEngineArgs):
            raise TypeError("AsyncLLM takes an AsyncEngineArgs (or use "
                            "AsyncLLM.from_engine_args)")
        self.engine_args = engine_args
        self._engine = _pagellm.AsyncEngine(engine_args.create_engine_config())
        _shutdown.register(self)
        self._tokenizer = Tokenizer(self._engine.tokenizer(), str(engine_args.model))
        self._requests: dict = {}  # engine request id -> (_Request, sample index)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._closed = False

    @classmethod
    def from_engine_args(cls, engine_args: AsyncEngineArgs, **kwargs: Any) -> "AsyncLLM":
        return cls(engine_args)

    @property
    def is_running(self) -> bool:
        return not self._closed

    @property
    def errored(self) -> bool:
        return False

    async def get_tokenizer(self, lora_request: Any = None) -> Tokenizer:
        return self._tokenizer

    def engine_stats(self) -> dict:
        """As LLM.engine_stats(): kv_usage, num_running, num_waiting, ... (as of the last
        step)."""
        return self._engine.stats()

    async def generate(self, prompt: Any, sampling_params: SamplingParams, request_id: str,
                       *, lora_request: Any = None, priority: int = 0,
                       **kwargs: Any) -> AsyncGenerator[RequestOutput, None]:
        """Streams cumulative RequestOutputs for one prompt until the last has
        finished=True. Leaving the iteration early (or cancelling the task) aborts the
        request."""
        if self._closed:
            raise RuntimeError("AsyncLLM has been shut down")
        if lora_request is not None:
            raise NotImplementedError("LoRA adapters are not supported by pagellm yet")
        for name, value in kwargs.items():
            if name not in ("tokenization_kwargs", "trace_headers", "data_parallel_rank"):
                raise TypeError(f"generate() got an unexpected keyword argument {name!r}")
            if value is not None:
                raise NotImplementedError(f"generate({name}=...) is not supported by pagellm")
        if not isinstance(sampling_params, SamplingParams):
            raise TypeError("sampling_params must be a SamplingParams")
        if not isinstance(request_id, str):
            raise TypeError("request_id must be a str")
        if not isinstance(priority, int) or isinstance(priority, bool) or \
                not -2**31 <= priority < 2**31:
            raise TypeError("priority must be an int")
        sampling_params._verify_args()
        text, ids = parse_prompt(prompt)
        if ids is None:
            ids = self._engine.tokenize(text)
        self._ensure_reader()
        req = _Request(request_id, text, ids, sampling_params)
        n = sampling_params.n
        child_ids = [request_id] if n == 1 else [f"{k}_{request_id}" for k in range(n)]
        for cid in child_ids:
            if cid in self._requests:
                raise ValueError(f"Request id {request_id} already running.")
        submitted = []
        try:
            for k, cid in enumerate(child_ids):
                child = sampling_params.clone()
                child.n = 1
                if child.seed is not None:
                    child.seed = child.seed + k  # as LLM.generate: sample k uses seed + k
                self._requests[cid] = (req, k)
                self._engine.add_request(cid, ids, child, priority)
                submitted.append(cid)
            while True:
                await req.queue.get()
                while not req.queue.empty():
                    req.queue.get_nowait()
                if req.error:
                    raise ValueError(req.error)
                output = req.snapshot()
                yield output
                if output.finished:
                    break
        finally:
            for k, cid in enumerate(child_ids):
                entry = self._requests.pop(cid, None)
                if entry is not None and cid in submitted and \
                        req.outputs[k].finish_reason is None:
                    self._engine.abort(cid)

    async def abort(self, request_id: Any) -> None:
        """Aborts one request id or a list of them (its samples included); unknown ids are
        ignored."""
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        for rid in ids:
            for cid, (req, _) in list(self._requests.items()):
                if req.request_id == rid:
                    self._engine.abort(cid)

    async def reset_prefix_cache(self) -> bool:
        raise NotImplementedError("reset_prefix_cache is offered by LLM, not AsyncLLM, in "
                                  "pagellm")

    def shutdown(self) -> None:
        """Aborts everything in flight and stops the engine thread."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._engine.notify_fd())
        self._engine.shutdown()

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # interpreter teardown: the engine's destructor still joins
            pass

    def _ensure_reader(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._engine.notify_fd())
        self._loop = loop
        loop.add_reader(self._engine.notify_fd(), self._on_outputs)

    def _on_outputs(self) -> None:
        for native in self._engine.take_outputs():
            entry = self._requests.get(native[0])
            if entry is None:
                continue  # a request whose generate() has already returned
            req, index = entry
            req.apply(index, native)
            req.queue.put_nowait(None)
