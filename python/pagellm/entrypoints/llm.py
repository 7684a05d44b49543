"""vLLM's offline API: LLM(model, ...).generate(prompts, SamplingParams(...)) over pagellm's
C++ engine (continuous batching in the calling thread, the GIL released while it steps)."""

import json
import os
from typing import Any, Optional, Sequence, Union

from pagellm import _pagellm, _shutdown
from pagellm._progress import ProgressBar
from pagellm.engine.arg_utils import EngineArgs
from pagellm.inputs import parse_prompts
from pagellm.outputs import request_output_from_native
from pagellm.sampling_params import SamplingParams
from pagellm.transformers_utils.tokenizer import Tokenizer


# generation_config.json keys that are sampling defaults, with their SamplingParams names.
_GENERATION_KEYS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
                    "min_p": "min_p", "repetition_penalty": "repetition_penalty",
                    "max_new_tokens": "max_tokens"}


def _sampling_keys(config: dict) -> dict:
    return {_GENERATION_KEYS[k]: v for k, v in config.items() if k in _GENERATION_KEYS}


def generation_defaults(path: str) -> dict:
    """SamplingParams keyword arguments from a generation_config.json (none if it is absent,
    as vLLM falls back to its own defaults)."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return _sampling_keys(config)


class LLM:
    """An LLM for offline batched generation (vLLM's vllm.LLM).

    Keyword arguments are vLLM's engine arguments (pagellm.EngineArgs); an unknown one raises
    TypeError, and one that means nothing on this engine logs a one-line warning.

    tensor_parallel_size=N > 1 splits the model across N ranks run as threads of this process
    (one machine; across machines run the pagellm binary under mpirun, docs/PARALLELISM.md);
    `threads` is then per rank (0: the available CPUs shared among the ranks). shutdown() (also
    called when the LLM is collected and at interpreter exit) stops the ranks.
    """

    def __init__(self, model: str, *, tokenizer: Optional[str] = None,
                 tokenizer_mode: str = "auto", skip_tokenizer_init: bool = False,
                 trust_remote_code: bool = False, tensor_parallel_size: int = 1,
                 dtype: str = "auto", quantization: Optional[str] = None,
                 revision: Optional[str] = None, tokenizer_revision: Optional[str] = None,
                 seed: Optional[int] = 0, gpu_memory_utilization: float = 0.9,
                 swap_space: float = 4, cpu_offload_gb: float = 0, enforce_eager: bool = False,
                 kv_cache_memory_bytes: Optional[int] = None, **kwargs: Any) -> None:
        args = EngineArgs(model=model, tokenizer=tokenizer, tokenizer_mode=tokenizer_mode,
                          skip_tokenizer_init=skip_tokenizer_init,
                          trust_remote_code=trust_remote_code,
                          tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                          quantization=quantization, revision=revision,
                          tokenizer_revision=tokenizer_revision, seed=seed,
                          gpu_memory_utilization=gpu_memory_utilization, swap_space=swap_space,
                          cpu_offload_gb=cpu_offload_gb, enforce_eager=enforce_eager,
                          kv_cache_memory_bytes=kv_cache_memory_bytes, **kwargs)
        self.engine_args = args
        self._engine = _pagellm.Engine(args.create_engine_config())
        _shutdown.register(self)
        self._info = self._engine.info()
        self._tokenizer = Tokenizer(self._engine.tokenizer(), str(tokenizer or model))

    def get_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def get_default_sampling_params(self) -> SamplingParams:
        """The sampling defaults vLLM derives from `generation_config`: "auto" applies the
        model's generation_config.json over vLLM's defaults, "vllm" keeps vLLM's alone, a
        directory applies its generation_config.json; `override_generation_config` goes on
        top. Used when generate/chat get no SamplingParams."""
        source = self.engine_args.generation_config
        if source == "auto":
            values = dict(self._info["default_sampling"])
        elif source == "vllm":
            values = {}
        else:
            values = generation_defaults(os.path.join(source, "generation_config.json"))
        values.update(_sampling_keys(self.engine_args.override_generation_config or {}))
        return SamplingParams(**values)

    def generate(self, prompts: Union[str, dict, Sequence[Union[str, dict]]],
                 sampling_params: Optional[Union[SamplingParams,
                                                 Sequence[SamplingParams]]] = None,
                 *, use_tqdm: bool = True, lora_request: Any = None,
                 priority: Optional[list] = None) -> list:
        """Generates completions for the prompts; returns one RequestOutput per prompt, in
        input order. Ctrl-C aborts every request of the call (their KV blocks are freed) and
        raises KeyboardInterrupt."""
        if lora_request is not None:
            raise NotImplementedError("LoRA adapters are not supported by pagellm yet")
        parsed = parse_prompts(prompts)
        params = self._resolve_params(sampling_params, len(parsed))
        parsed = self._truncate(parsed, params)
        if priority is not None:
            if not isinstance(priority, (list, tuple)) or len(priority) != len(parsed):
                raise ValueError("The lengths of prompts and priority must be the same.")
            if not all(isinstance(p, int) and not isinstance(p, bool) and -2**31 <= p < 2**31
                       for p in priority):
                raise TypeError("priority must be a list of int")
        return self._run(parsed, params, list(priority or []), use_tqdm)

    def chat(self, messages: Union[list, Sequence[list]],
             sampling_params: Optional[Union[SamplingParams,
                                             Sequence[SamplingParams]]] = None,
             use_tqdm: bool = True, lora_request: Any = None,
             chat_template: Optional[str] = None,
             chat_template_content_format: str = "auto", add_generation_prompt: bool = True,
             continue_final_message: bool = False, tools: Optional[list] = None,
             chat_template_kwargs: Optional[dict] = None,
             mm_processor_kwargs: Optional[dict] = None) -> list:
        """Renders each conversation with the chat template, then generates (vLLM's LLM.chat).
        `messages` is one conversation (a list of {"role", "content"} dicts) or a list of
        them."""
        if lora_request is not None:
            raise NotImplementedError("LoRA adapters are not supported by pagellm yet")
        if mm_processor_kwargs is not None:
            raise NotImplementedError("multimodal inputs are not supported by pagellm yet")
        if continue_final_message and add_generation_prompt and messages:
            # vLLM's rule: the two cannot both be set.
            raise ValueError("continue_final_message and add_generation_prompt cannot both "
                             "be True.")
        if not isinstance(messages, (list, tuple)):
            raise TypeError("messages must be a list of messages or a list of conversations")
        conversations = ([messages] if not messages or isinstance(messages[0], dict)
                         else list(messages))
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, dict):
            raise TypeError("chat_template_kwargs must be a dict")
        prompts = []
        for conversation in conversations:
            text = self._tokenizer.apply_chat_template(
                conversation, tools=tools, chat_template=chat_template,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message, tokenize=False,
                chat_template_content_format=chat_template_content_format,
                **(chat_template_kwargs or {}))
            ids = self._tokenizer.encode(text, add_special_tokens=False)
            prompts.append({"prompt": text, "prompt_token_ids": ids})
        return self.generate(prompts, sampling_params, use_tqdm=use_tqdm)

    def reset_prefix_cache(self) -> bool:
        return self._engine.reset_prefix_cache()

    def engine_stats(self) -> dict:
        """The engine's state: kv_usage (0..1), num_running, num_waiting, num_free_blocks,
        num_usable_blocks, num_preemptions, prefix-cache counters, and with
        tensor_parallel_size > 1 the forward steps' time and, of it, the time inside the ranks'
        collectives (tp_forward_seconds, tp_comm_seconds, tp_all_reduce_seconds; pagellm's
        addition)."""
        return self._engine.stats()

    def shutdown(self) -> None:
        """Stops the tensor-parallel ranks (waiting for a generate() running in another
        thread); generate() then raises RuntimeError. Idempotent (pagellm's addition)."""
        self._engine.shutdown()

    def _resolve_params(self, sampling_params: Any, num_prompts: int) -> list:
        if sampling_params is None:
            return [self.get_default_sampling_params()]
        if isinstance(sampling_params, SamplingParams):
            params = [sampling_params]
        elif isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != num_prompts:
                raise ValueError("The lengths of prompts and sampling_params must be the same.")
            params = list(sampling_params)
            if not all(isinstance(p, SamplingParams) for p in params):
                raise TypeError("sampling_params must be a SamplingParams or a list of them")
        else:
            raise TypeError("sampling_params must be a SamplingParams or a list of them, got "
                            f"{type(sampling_params).__name__}")
        for p in params:
            p._verify_args()  # fields may have been changed after construction
            self._engine.validate(p)
        return params

    def _truncate(self, parsed: list, params: list) -> list:
        """truncate_prompt_tokens: the last k tokens of each prompt (k = -1: max_model_len),
        tokenized as the engine tokenizes a text prompt."""
        out = []
        for i, (text, ids) in enumerate(parsed):
            k = params[i if len(params) > 1 else 0].truncate_prompt_tokens
            if k is not None:
                if k == -1:
                    k = self._info["max_model_len"]
                if ids is None:
                    ids = self._tokenizer.encode(text, add_special_tokens=True)
                ids = ids[-k:]
            out.append((text, ids))
        return out

    def _run(self, parsed: list, params: list, priority: list, use_tqdm: bool) -> list:
        native_prompts = [ids if ids is not None else text for text, ids in parsed]
        bar = ProgressBar(len(parsed), use_tqdm)
        try:
            native = self._engine.generate(native_prompts, params, priority, bar.callback())
        finally:
            bar.close()
        return [request_output_from_native(n, text) for n, (text, _) in zip(native, parsed)]
