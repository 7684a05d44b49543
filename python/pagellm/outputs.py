"""Generation results, shaped as vLLM's RequestOutput / CompletionOutput / Logprob."""

from dataclasses import dataclass
from typing import Optional, Union



@dataclass
class Logprob:
    """vLLM's Logprob: the log-probability of a token, its 1-based rank in the vocabulary and
    its text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One sample of a request (vLLM's CompletionOutput)."""

    index: int
    text: str
    token_ids: list
    cumulative_logprob: Optional[float]
    logprobs: Optional[list]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None
    lora_request: None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


class RequestOutput:
    """The result of one prompt (vLLM's RequestOutput)."""

    def __init__(self, request_id: str, prompt: Optional[str], prompt_token_ids: list,
                 prompt_logprobs: Optional[list], outputs: list, finished: bool,
                 num_cached_tokens: int = 0, metrics=None, lora_request=None,
                 encoder_prompt=None, encoder_prompt_token_ids=None, kv_transfer_params=None):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished
        self.num_cached_tokens = num_cached_tokens
        self.metrics = metrics
        self.lora_request = lora_request
        self.encoder_prompt = encoder_prompt
        self.encoder_prompt_token_ids = encoder_prompt_token_ids
        self.kv_transfer_params = kv_transfer_params
        self.multi_modal_placeholders = {}

    def __repr__(self) -> str:
        return (f"RequestOutput(request_id={self.request_id}, prompt={self.prompt!r}, "
                f"prompt_token_ids={self.prompt_token_ids}, "
                f"prompt_logprobs={self.prompt_logprobs}, outputs={self.outputs}, "
                f"finished={self.finished}, num_cached_tokens={self.num_cached_tokens})")


def logprobs_position(entry) -> dict:
    """A native logprob entry (token_id, logprob, rank, text, [(id, logprob, text)]) -> the
    position's dict: the token itself first, then the alternatives with ranks 1..N."""
    token_id, logprob, rank, text, top = entry
    position = {token_id: Logprob(logprob, rank, text)}
    for k, (alt_id, alt_logprob, alt_text) in enumerate(top):
        if alt_id not in position:
            position[alt_id] = Logprob(alt_logprob, k + 1, alt_text)
    return position


def prompt_logprobs_list(entries) -> Optional[list]:
    if entries is None:
        return None
    return [None if e is None else logprobs_position(e) for e in entries]


def completion_from_native(native) -> CompletionOutput:
    index, text, token_ids, logprobs, finish_reason, stop_reason = native
    cumulative = None
    positions = None
    if logprobs is not None:
        positions = [logprobs_position(e) for e in logprobs]
        cumulative = float(sum(e[1] for e in logprobs))
    return CompletionOutput(index=index, text=text, token_ids=token_ids,
                            cumulative_logprob=cumulative, logprobs=positions,
                            finish_reason=finish_reason, stop_reason=stop_reason)


def request_output_from_native(native, prompt: Optional[str]) -> RequestOutput:
    request_id, _, prompt_token_ids, prompt_logprobs, num_cached, outputs = native
    return RequestOutput(request_id=request_id, prompt=prompt,
                         prompt_token_ids=prompt_token_ids,
                         prompt_logprobs=prompt_logprobs_list(prompt_logprobs),
                         outputs=[completion_from_native(o) for o in outputs], finished=True,
                         num_cached_tokens=num_cached)
