"""Sampling parameters for text generation, named, defaulted and checked as vLLM's."""

import json
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Union

# Below this a temperature means greedy sampling (vLLM's _SAMPLING_EPS).
_SAMPLING_EPS = 1e-5
# The most samples one prompt may ask for: each becomes an engine request with its own state.
_MAX_N = 65536


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class StructuredOutputsParams:
    """vLLM's StructuredOutputsParams (GuidedDecodingParams in older vLLM): exactly one of
    json (a JSON Schema, as a dict or JSON text), regex, choice, grammar (GBNF / EBNF) or
    json_object; whitespace_pattern optionally restricts the whitespace of JSON output. The
    engine's grammar engine enforces it (docs/STRUCTURED_OUTPUTS.md)."""

    json: Optional[Union[str, dict]] = None
    regex: Optional[str] = None
    choice: Optional[list[str]] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    whitespace_pattern: Optional[str] = None

    def __post_init__(self) -> None:
        given = [name for name in ("json", "regex", "choice", "grammar")
                 if getattr(self, name) is not None]
        if self.json_object:
            given.append("json_object")
        if len(given) != 1:
            raise ValueError("You must use one kind of structured outputs constraint but got "
                             f"{len(given)}: {', '.join(given) or 'none'}")
        if isinstance(self.json, str):
            try:
                self.json = json.loads(self.json)
            except ValueError as e:
                raise ValueError(f"structured_outputs.json is not valid JSON: {e}") from None
        if self.choice is not None and (not isinstance(self.choice, (list, tuple)) or not all(
                isinstance(c, str) for c in self.choice)):
            raise TypeError("structured_outputs.choice must be a list of str")

    def to_request(self) -> dict:
        """The constraint in vLLM's request spelling ({"json": ..., ...})."""
        out = {}
        for name in ("json", "regex", "grammar", "whitespace_pattern"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.choice is not None:
            out["choice"] = list(self.choice)
        if self.json_object:
            out["json_object"] = True
        return out


GuidedDecodingParams = StructuredOutputsParams


@dataclass
class SamplingParams:
    """vLLM's SamplingParams: same fields, defaults and ValueError messages.

    Fields that need the model (token ids against the vocabulary, logprobs against
    max_logprobs) are checked again by the engine when a request is added.
    """

    n: int = 1
    best_of: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, list[str]]] = None
    stop_token_ids: Optional[list[int]] = None
    ignore_eos: bool = False
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: Optional[dict[int, float]] = None
    allowed_token_ids: Optional[list[int]] = None
    bad_words: Optional[list[str]] = None
    truncate_prompt_tokens: Optional[int] = None
    extra_args: Optional[dict[str, Any]] = None
    structured_outputs: Optional[StructuredOutputsParams] = None
    guided_decoding: Optional[StructuredOutputsParams] = None  # older vLLM's name

    def __post_init__(self) -> None:
        self._check_types()
        if self.guided_decoding is not None:
            if self.structured_outputs is not None:
                raise ValueError("Only one of structured_outputs and guided_decoding may be set")
            self.structured_outputs = self.guided_decoding
            self.guided_decoding = None
        if self.structured_outputs is not None and not isinstance(self.structured_outputs,
                                                                  StructuredOutputsParams):
            raise TypeError("structured_outputs must be a StructuredOutputsParams")
        if self.best_of is not None and self.best_of != self.n:
            # vLLM V1 no longer supports best_of; an explicit value other than n is refused there too.
            raise ValueError("best_of must be equal to n, got n=%d and best_of=%d." %
                             (self.n, self.best_of))
        if self.stop is None:
            self.stop = []
        elif isinstance(self.stop, str):
            self.stop = [self.stop]
        else:
            self.stop = list(self.stop)
        self.stop_token_ids = [] if self.stop_token_ids is None else list(self.stop_token_ids)
        if self.logprobs is True:
            self.logprobs = 1
        if self.prompt_logprobs is True:
            self.prompt_logprobs = 1
        if self.top_k == -1:
            self.top_k = 0  # vLLM's "disabled" spelling
        self.temperature = float(self.temperature)
        self.top_p = float(self.top_p)
        self.min_p = float(self.min_p)
        self.presence_penalty = float(self.presence_penalty)
        self.frequency_penalty = float(self.frequency_penalty)
        self.repetition_penalty = float(self.repetition_penalty)
        self._verify_args()
        if self.truncate_prompt_tokens is not None and (
                self.truncate_prompt_tokens < -1 or self.truncate_prompt_tokens == 0):
            raise ValueError("truncate_prompt_tokens must be >= 1 or -1 (the model's maximum "
                             f"length), got {self.truncate_prompt_tokens}")
        for name, default in (("allowed_token_ids", None), ("bad_words", None)):
            if getattr(self, name) != default:
                raise NotImplementedError(f"SamplingParams.{name} is not supported by pagellm yet")
        if not self.spaces_between_special_tokens:
            _warn_unused("spaces_between_special_tokens=False",
                         "special tokens are detokenized without added spaces either way")
        if self.extra_args:
            _warn_unused("extra_args", "no custom sampler reads them")
        if not self.detokenize:
            raise NotImplementedError("SamplingParams.detokenize=False is not supported by "
                                      "pagellm yet")
        if self.temperature < _SAMPLING_EPS:
            # Greedy: the other sampling knobs mean nothing (vLLM resets them the same way).
            self.top_p = 1.0
            self.top_k = 0
            self.min_p = 0.0

    def _structured_outputs_json(self) -> Optional[str]:
        """For the engine: {"structured_outputs": {...}} as JSON text, or None."""
        if self.structured_outputs is None:
            return None
        return json.dumps({"structured_outputs": self.structured_outputs.to_request()})

    def _check_types(self) -> None:
        ints = ("n", "top_k", "min_tokens")
        optional_ints = ("best_of", "seed", "max_tokens", "logprobs", "prompt_logprobs",
                         "truncate_prompt_tokens")
        floats = ("presence_penalty", "frequency_penalty", "repetition_penalty", "temperature",
                  "top_p", "min_p")
        bools = ("ignore_eos", "detokenize", "skip_special_tokens",
                 "spaces_between_special_tokens", "include_stop_str_in_output")
        for name in ints:
            if not _is_int(getattr(self, name)):
                raise TypeError(f"{name} must be an int, but is of type "
                                f"{type(getattr(self, name))}")
        for name in optional_ints:
            value = getattr(self, name)
            if value is not None and not _is_int(value) and not (
                    name in ("logprobs", "prompt_logprobs") and isinstance(value, bool)):
                raise TypeError(f"{name} must be an int or None, but is of type {type(value)}")
        for name in floats:
            if not _is_number(getattr(self, name)):
                raise TypeError(f"{name} must be a float, but is of type "
                                f"{type(getattr(self, name))}")
        for name in bools:
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, but is of type "
                                f"{type(getattr(self, name))}")
        stop = self.stop
        if stop is not None and not isinstance(stop, str):
            if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
                raise TypeError("stop must be a str or a list of str")
        for s in [stop] if isinstance(stop, str) else (stop or []):
            try:
                s.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(f"stop string is not valid UTF-8: {e}") from None
        if self.stop_token_ids is not None and (
                not isinstance(self.stop_token_ids, (list, tuple)) or
                not all(_is_int(t) for t in self.stop_token_ids)):
            raise TypeError("stop_token_ids must be a list of int")
        if self.logit_bias is not None:
            if not isinstance(self.logit_bias, dict):
                raise TypeError("logit_bias must be a dict of token id to bias")
            bias = {}
            for k, v in self.logit_bias.items():
                try:
                    key = int(k)
                except (TypeError, ValueError):
                    raise TypeError(f"logit_bias key {k!r} is not a token id") from None
                if not _is_number(v):
                    raise TypeError(f"logit_bias value for token_id {key} must be a float")
                if not 0 <= key < 2**31:
                    raise ValueError(f"token_id(s) [{key}] in logit_bias contain out-of-vocab "
                                     "token ids.")
                bias[key] = float(v)
            self.logit_bias = bias

    def _verify_args(self) -> None:
        # Same order and wording as vLLM's SamplingParams._verify_args.
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if self.n > _MAX_N:
            raise ValueError(f"n must be at most {_MAX_N}, got {self.n}.")
        if not -2.0 <= self.presence_penalty <= 2.0:
            raise ValueError("presence_penalty must be in [-2, 2], got "
                             f"{self.presence_penalty}.")
        if not -2.0 <= self.frequency_penalty <= 2.0:
            raise ValueError("frequency_penalty must be in [-2, 2], got "
                             f"{self.frequency_penalty}.")
        if not self.repetition_penalty > 0.0:
            raise ValueError("repetition_penalty must be greater than zero, got "
                             f"{self.repetition_penalty}.")
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if math.isinf(self.temperature):
            raise ValueError(f"temperature must be finite, got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < 0:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.min_tokens < 0:
            raise ValueError("min_tokens must be greater than or equal to 0, got "
                             f"{self.min_tokens}.")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError("min_tokens must be less than or equal to "
                             f"max_tokens={self.max_tokens}, got {self.min_tokens}.")
        if self.logprobs is not None and self.logprobs != -1 and self.logprobs < 0:
            raise ValueError(f"logprobs must be non-negative or -1, got {self.logprobs}.")
        if (self.prompt_logprobs is not None and self.prompt_logprobs != -1 and
                self.prompt_logprobs < 0):
            raise ValueError("prompt_logprobs must be non-negative or -1, got "
                             f"{self.prompt_logprobs}.")
        if any(not s for s in self.stop):
            raise ValueError("stop cannot contain an empty string.")
        for name in ("max_tokens", "min_tokens", "logprobs", "prompt_logprobs", "top_k"):
            value = getattr(self, name)
            if value is not None and value > 2**31 - 1:
                raise ValueError(f"{name} must be at most {2**31 - 1}, got {value}.")
        for t in self.stop_token_ids:
            if not 0 <= t < 2**31:
                raise ValueError(f"token_id(s) [{t}] in stop_token_ids contain out-of-vocab "
                                 "token ids.")

    @property
    def sampling_type(self) -> str:
        if self.temperature < _SAMPLING_EPS:
            return "greedy"
        return "random_seed" if self.seed is not None else "random"

    def clone(self) -> "SamplingParams":
        import copy
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        fields = ("n", "presence_penalty", "frequency_penalty", "repetition_penalty",
                  "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids",
                  "include_stop_str_in_output", "ignore_eos", "max_tokens", "min_tokens",
                  "logprobs", "prompt_logprobs", "skip_special_tokens")
        body = ", ".join(f"{f}={getattr(self, f)!r}" for f in fields)
        return f"SamplingParams({body})"


def _warn_unused(name: str, why: str) -> None:
    warnings.warn(f"{name} has no effect on this engine: {why}", stacklevel=3)
