"""A Hugging Face-like tokenizer over pagellm's C++ tokenizers (SentencePiece, byte-level BPE,
GGUF vocabularies) and chat-template renderer: encode, decode, apply_chat_template."""

import json
from typing import Any, Optional, Union

from pagellm import _pagellm


def _check_ids(token_ids: Any) -> list:
    if isinstance(token_ids, int) and not isinstance(token_ids, bool):
        return [token_ids]
    if not isinstance(token_ids, (list, tuple)) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in token_ids):
        raise TypeError("token_ids must be an int or a list of int")
    for t in token_ids:
        if not -2**63 <= t < 2**63:
            raise ValueError(f"token id {t} is out of vocabulary")
    return list(token_ids)


def _check_text(text: Any, what: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} is not valid UTF-8 text: {e}") from None
    return text


class Tokenizer:
    """The tokenizer of a model, with the parts of transformers' PreTrainedTokenizer API that
    vLLM users call."""

    def __init__(self, native: "_pagellm.Tokenizer", name_or_path: str = ""):
        self._native = native
        self.name_or_path = name_or_path

    @property
    def vocab_size(self) -> int:
        return self._native.vocab_size

    def __len__(self) -> int:
        return self._native.vocab_size

    @property
    def bos_token_id(self) -> Optional[int]:
        return None if self._native.bos_token_id < 0 else self._native.bos_token_id

    @property
    def eos_token_id(self) -> Optional[int]:
        return None if self._native.eos_token_id < 0 else self._native.eos_token_id

    @property
    def bos_token(self) -> Optional[str]:
        return self._native.bos_token if self.bos_token_id is not None else None

    @property
    def eos_token(self) -> Optional[str]:
        return self._native.eos_token if self.eos_token_id is not None else None

    @property
    def chat_template(self) -> Optional[str]:
        return self._native.chat_template or None

    def encode(self, text: str, add_special_tokens: bool = True, **kwargs) -> list:
        """Text -> ids; text spelling a special token becomes that token (transformers'
        default), and BOS/EOS are added as the tokenizer config says when add_special_tokens."""
        if kwargs:
            raise TypeError(f"encode() got unexpected keyword arguments {sorted(kwargs)}")
        return self._native.encode(_check_text(text), bool(add_special_tokens))

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, token_ids: Union[int, list], skip_special_tokens: bool = False) -> str:
        return self._native.decode(_check_ids(token_ids), bool(skip_special_tokens))

    def batch_decode(self, sequences: list, skip_special_tokens: bool = False) -> list:
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def convert_ids_to_tokens(self, ids: Union[int, list]) -> Union[str, list]:
        pieces = self._native.ids_to_pieces(_check_ids(ids))
        return pieces[0] if isinstance(ids, int) else pieces

    def convert_tokens_to_ids(self, tokens: Union[str, list]) -> Union[Optional[int], list]:
        if isinstance(tokens, str):
            return self._native.piece_to_id(tokens)
        return [self._native.piece_to_id(_check_text(t, "token")) for t in tokens]

    def apply_chat_template(self, conversation: list, tools: Optional[list] = None,
                            documents: Optional[list] = None,
                            chat_template: Optional[str] = None,
                            add_generation_prompt: bool = False,
                            continue_final_message: bool = False, tokenize: bool = True,
                            chat_template_content_format: str = "auto",
                            **kwargs) -> Union[str, list]:
        """transformers' apply_chat_template: renders `conversation` (a list of
        {"role", "content", ...} messages); returns the ids (tokenize=True, no special tokens
        added beyond the template's) or the text. Extra keyword arguments reach the template
        (e.g. enable_thinking). chat_template_content_format (vLLM's): how message content
        reaches the template, "string" (text parts joined) or "openai" (a list of parts);
        "auto" detects what the template expects."""
        if not isinstance(conversation, (list, tuple)):
            raise TypeError("conversation must be a list of messages")
        if chat_template is not None:
            _check_text(chat_template, "chat_template")
        if chat_template_content_format not in ("auto", "string", "openai"):
            raise ValueError("chat_template_content_format must be 'auto', 'string' or "
                             f"'openai', got {chat_template_content_format!r}")
        options = {"add_generation_prompt": bool(add_generation_prompt),
                   "continue_final_message": bool(continue_final_message),
                   "content_format": chat_template_content_format}
        if tools is not None:
            options["tools"] = tools
        if documents is not None:
            options["documents"] = documents
        if kwargs:
            options["chat_template_kwargs"] = kwargs
        try:
            messages_json = json.dumps(list(conversation))
            options_json = json.dumps(options)
        except (TypeError, ValueError) as e:
            raise TypeError(f"the conversation must be JSON-serializable: {e}") from None
        text = self._native.apply_chat_template(messages_json, options_json, chat_template or "")
        if not tokenize:
            return text
        return self.encode(text, add_special_tokens=False)


def get_tokenizer(tokenizer_name: str, *args, tokenizer_mode: str = "auto",
                  trust_remote_code: bool = False, revision: Optional[str] = None,
                  download_dir: Optional[str] = None, **kwargs) -> Tokenizer:
    """vLLM's get_tokenizer for a local model directory or .gguf file."""
    import os
    if args or kwargs:
        raise TypeError("get_tokenizer() takes the model path and vLLM's keyword arguments "
                        "tokenizer_mode, trust_remote_code, revision, download_dir")
    path = os.fspath(tokenizer_name)
    return Tokenizer(_pagellm.Tokenizer.load(path), path)
