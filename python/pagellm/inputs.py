"""Prompt normalization as vLLM's LLM.generate accepts prompts: a str, a list of str, a
{"prompt": str} / {"prompt_token_ids": [int]} dict (TextPrompt / TokensPrompt), or a list of
those."""

from typing import Any

_MAX_TOKEN_ID = 2**31 - 1


def _check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"prompt must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"prompt is not valid UTF-8 text: {e}") from None
    return text


def _check_token_ids(ids: Any) -> list:
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"prompt_token_ids must be a list of int, got {type(ids).__name__}")
    out = []
    for t in ids:
        if not isinstance(t, int) or isinstance(t, bool):
            raise TypeError(f"prompt_token_ids must be a list of int, got an item of type "
                            f"{type(t).__name__}")
        if not 0 <= t <= _MAX_TOKEN_ID:
            raise ValueError(f"Token id {t} is out of vocabulary")
        out.append(t)
    if not out:
        raise ValueError("The decoder prompt cannot be empty")
    return out


def parse_prompt(prompt: Any) -> tuple:
    """-> (text or None, token ids or None): ids are None for a text prompt."""
    if isinstance(prompt, str):
        return _check_text(prompt), None
    if isinstance(prompt, dict):
        if "prompt_token_ids" in prompt:
            return prompt.get("prompt"), _check_token_ids(prompt["prompt_token_ids"])
        if "prompt" in prompt:
            return _check_text(prompt["prompt"]), None
        raise TypeError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
    raise TypeError(f"prompt must be a str, a dict or a list of them, got "
                    f"{type(prompt).__name__}")


def parse_prompts(prompts: Any) -> list:
    """A single prompt or a sequence of prompts -> list of (text, token ids)."""
    if isinstance(prompts, (str, dict)):
        return [parse_prompt(prompts)]
    if isinstance(prompts, (list, tuple)):
        return [parse_prompt(p) for p in prompts]
    raise TypeError(f"prompts must be a str, a dict or a list of them, got "
                    f"{type(prompts).__name__}")
