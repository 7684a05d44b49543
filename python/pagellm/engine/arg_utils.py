"""vLLM's EngineArgs / AsyncEngineArgs for pagellm: the same keyword names and defaults.

Arguments are in three groups: those this engine implements (passed to the C++ engine), those
that mean nothing on a CPU engine that loads local files (accepted; a value other than the
default logs one line saying why it has no effect), and values this engine cannot honour
(NotImplementedError, never silently ignored). Unknown keywords raise TypeError, as vLLM's
dataclass does.
"""

import json
import logging
import os
import re
from dataclasses import dataclass, fields
from typing import Any, Optional, Union

logger = logging.getLogger("pagellm")

# Argument -> why it has no effect here (a value other than the default logs this once).
_NO_EFFECT = {
    "tokenizer_mode": "the tokenizer is read from the model's own files",
    "skip_tokenizer_init": "the engine always detokenizes with the model's tokenizer",
    "trust_remote_code": "no model code is ever run",
    "download_dir": "models are local paths, nothing is downloaded",
    "load_format": "the weight format is read from the model files",
    "revision": "models are local paths",
    "code_revision": "no model code is ever run",
    "tokenizer_revision": "models are local paths",
    "hf_token": "nothing is downloaded",
    "hf_overrides": "the model's config.json is used as it is",
    "enforce_eager": "the CPU backend always runs eagerly",
    "max_seq_len_to_capture": "there are no CUDA graphs on the CPU backend",
    "compilation_config": "the CPU backend has no graph compilation",
    "cpu_offload_gb": "weights are already in host memory",
    "disable_custom_all_reduce": "the tensor-parallel all-reduce is the engine's own "
                                 "(a rank-order sum)",
    "distributed_executor_backend": "tensor-parallel ranks run as threads of this process",
    "max_parallel_loading_workers": "weights are memory-mapped",
    "disable_sliding_window": "the supported architectures have no sliding window",
    "disable_cascade_attn": "there is no cascade attention kernel",
    "disable_async_output_proc": "outputs are processed in the engine step",
    "use_tqdm_on_load": "weights are memory-mapped, loading has no progress to show",
    "enable_sleep_mode": "there is no accelerator memory to release",
    "mm_processor_kwargs": "multimodal models are not supported",
    "limit_mm_per_prompt": "multimodal models are not supported",
    "model_impl": "pagellm has one implementation of each architecture",
    "async_scheduling": "scheduling and execution run in one engine step",
    "served_model_name": "the offline API has no served names",
    "disable_log_stats": "the Python engines log no periodic stats",
    "allowed_local_media_path": "multimodal models are not supported",
    "logits_processors": "custom logits processors are not supported",
    "worker_cls": "one process, no workers",
    "prefix_caching_hash_algo": "block hashes are SHA-256 always",
}

_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


def parse_token_count(value: Union[int, str]) -> int:
    """vLLM's human-readable --max-model-len: 1k = 1000, 1K = 1024 (m/M, g/G likewise)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)([kmgKMG]?)\s*", value)
        if m:
            scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9,
                     "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
            return int(m.group(1)) * scale
    raise ValueError(f"max_model_len {value!r}: expected an integer, optionally with "
                     "k/m/g (x1000) or K/M/G (x1024)")


@dataclass
class EngineArgs:
    """vLLM's engine arguments (the subset with a meaning or a no-effect note here)."""

    model: str = ""
    tokenizer: Optional[str] = None
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False
    trust_remote_code: bool = False
    download_dir: Optional[str] = None
    load_format: str = "auto"
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    seed: Optional[int] = 0
    max_model_len: Optional[Union[int, str]] = None
    distributed_executor_backend: Optional[str] = None
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    max_parallel_loading_workers: Optional[int] = None
    block_size: Optional[int] = None
    enable_prefix_caching: Optional[bool] = None
    prefix_caching_hash_algo: str = "sha256"
    disable_sliding_window: bool = False
    disable_cascade_attn: bool = False
    swap_space: float = 4
    cpu_offload_gb: float = 0
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    long_prefill_token_threshold: int = 0
    max_num_seqs: Optional[int] = None
    max_logprobs: int = 20
    # vLLM's default is False (log stats); the Python engines here never log periodic stats.
    disable_log_stats: bool = True
    revision: Optional[str] = None
    code_revision: Optional[str] = None
    tokenizer_revision: Optional[str] = None
    hf_token: Optional[Union[bool, str]] = None
    hf_overrides: Optional[dict] = None
    quantization: Optional[str] = None
    enforce_eager: bool = False
    max_seq_len_to_capture: int = 8192
    disable_custom_all_reduce: bool = False
    limit_mm_per_prompt: Optional[dict] = None
    mm_processor_kwargs: Optional[dict] = None
    num_gpu_blocks_override: Optional[int] = None
    preemption_mode: Optional[str] = None
    enable_chunked_prefill: Optional[bool] = None
    speculative_config: Optional[Union[dict, str]] = None
    disable_async_output_proc: bool = False
    scheduling_policy: str = "fcfs"
    compilation_config: Optional[Union[dict, int]] = None
    generation_config: str = "auto"
    override_generation_config: Optional[dict] = None
    enable_sleep_mode: bool = False
    model_impl: str = "auto"
    calculate_kv_scales: bool = False
    use_tqdm_on_load: bool = True
    async_scheduling: bool = False
    served_model_name: Optional[Union[str, list]] = None
    allowed_local_media_path: str = ""
    logits_processors: Optional[list] = None
    worker_cls: str = "auto"
    # pagellm's own: CPU threads of the engine (0 = all available to the process), per rank
    # with tensor_parallel_size > 1 (0 = the available CPUs shared among the ranks).
    threads: int = 0

    def _defaults(self) -> dict:
        return {f.name: f.default for f in fields(EngineArgs)}

    def create_engine_config(self) -> dict:
        """Checks the arguments, logs the no-effect notes, and returns the dict the C++ engine
        takes (pagellm._pagellm.Engine)."""
        if not isinstance(self.model, (str, os.PathLike)) or not str(self.model):
            raise TypeError("model must be a path (str) to a model directory or .gguf file")
        model = os.fspath(self.model)
        defaults = self._defaults()
        for name, why in _NO_EFFECT.items():
            if getattr(self, name) != defaults[name]:
                logger.warning("%s=%r has no effect on this engine: %s", name,
                               getattr(self, name), why)
        tokenizer = None
        if self.tokenizer is not None:
            tokenizer = os.fspath(self.tokenizer)
            if not os.path.exists(tokenizer):
                raise ValueError(f"tokenizer={self.tokenizer!r}: no such file or directory "
                                 "(models and tokenizers are local paths)")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
            if value > 1 and name != "tensor_parallel_size":
                raise NotImplementedError(f"{name}={value}: this build runs one process; "
                                          "parallelism is not supported yet (use 1)")
        if self.quantization not in (None, "None", "none", "gguf", "awq", "awq_marlin", "gptq",
                                     "gptq_marlin"):
            raise NotImplementedError(
                f"quantization={self.quantization!r}: pagellm reads the weight format from the "
                "model files (safetensors F32/F16/BF16, AWQ and GPTQ checkpoints: awq, "
                "awq_marlin, gptq, gptq_marlin; GGUF files: gguf)")
        if self.generation_config not in ("auto", "vllm") and \
                not os.path.isdir(os.fspath(self.generation_config)):
            raise ValueError(f"generation_config={self.generation_config!r}: expected 'auto', "
                             "'vllm' or a directory holding a generation_config.json")
        if self.override_generation_config is not None and \
                not isinstance(self.override_generation_config, dict):
            raise TypeError("override_generation_config must be a dict")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: expected one of {', '.join(_DTYPES)}")
        config: dict[str, Any] = {"model": model, "dtype": self.dtype}
        if self.quantization not in (None, "None", "none"):
            config["quantization"] = self.quantization  # checked against the checkpoint at load
        if tokenizer is not None:
            config["tokenizer"] = tokenizer
        config["max_model_len"] = (None if self.max_model_len is None else
                                   parse_token_count(self.max_model_len))
        for name in ("block_size", "gpu_memory_utilization", "swap_space",
                     "kv_cache_memory_bytes", "num_gpu_blocks_override", "enable_prefix_caching",
                     "enable_chunked_prefill", "max_num_seqs", "max_num_batched_tokens",
                     "long_prefill_token_threshold", "kv_cache_dtype", "calculate_kv_scales",
                     "max_logprobs", "scheduling_policy", "preemption_mode", "threads"):
            config[name] = getattr(self, name)
        config["seed"] = 0 if self.seed is None else self.seed
        # Ranks 1..N-1 run as threads of this process (docs/PARALLELISM.md, "From Python").
        config["tensor_parallel_size"] = self.tensor_parallel_size
        if self.speculative_config is not None:
            spec = self.speculative_config
            config["speculative_config"] = spec if isinstance(spec, str) else json.dumps(spec)
        _check_types(config)
        return config


def _check_types(config: dict) -> None:
    ints = ("max_model_len", "block_size", "kv_cache_memory_bytes", "num_gpu_blocks_override",
            "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold",
            "max_logprobs", "threads", "seed")
    for name in ints:
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if name == "seed":
            config[name] = value % 2**64  # the engine's seeds are 64-bit
        elif not -1 <= value < 2**31 and name != "kv_cache_memory_bytes":
            raise ValueError(f"{name}={value} is out of range")
        elif name == "kv_cache_memory_bytes" and not 0 < value < 2**63:
            raise ValueError(f"kv_cache_memory_bytes={value} is out of range")
    for name in ("gpu_memory_utilization", "swap_space"):
        value = config[name]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"{name} must be a float, got {type(value).__name__}")
        config[name] = float(value)
    for name in ("enable_prefix_caching", "enable_chunked_prefill", "calculate_kv_scales"):
        value = config.get(name)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    for name in ("kv_cache_dtype", "scheduling_policy", "preemption_mode"):
        value = config.get(name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")


@dataclass
class AsyncEngineArgs(EngineArgs):
    """Engine arguments of AsyncLLM (vLLM's AsyncEngineArgs)."""

    enable_log_requests: bool = False
    disable_log_requests: bool = True
