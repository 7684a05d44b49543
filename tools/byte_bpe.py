"""A real byte-level BPE tokenizer (GPT-2 style) trained at generation time on a small built-in
English text, so that a random-weight model from tools/gen_model.py can serve text without any
downloaded or shared tokenizer (`--tokenizer byte-bpe`).

The files are Hugging Face's: tokenizer.json (model BPE over GPT-2's byte-to-unicode alphabet,
ByteLevel pre-tokenizer and decoder) and tokenizer_config.json (EOS <|endoftext|>, a ChatML chat
template with <|im_start|> / <|im_end|>). Training is the classic BPE loop: start from the 256
byte symbols and repeatedly merge the most frequent adjacent pair (ties: the pair that sorts
first), counted over the corpus's pre-tokenized words; deterministic for a given corpus and size.
"""

import collections
import json
import os
import re

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML, as Qwen-style models write it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Training text: plain sentences covering common English words, digits and punctuation.
CORPUS = """
Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.
One day, she saw a big red ball in the park. She ran to the ball and picked it up. Her mom
said, "Lily, be careful!" Lily smiled and said, "I will, Mom." They played together all day.
The dog was happy and wagged its tail. The cat sat on the mat and looked at the bird.
A boy named Tom wanted to build a tall tower with his blocks. He put one block on top of
another, and then another. The tower fell down, but Tom did not give up. He tried again.
Hello! How are you today? I am fine, thank you. What is your name? My name is Sam.
The quick brown fox jumps over the lazy dog. It is 10 o'clock and the time is 3:45 pm.
We can count: one, two, three, four, five, six, seven, eight, nine, ten; 1 2 3 4 5 6 7 8 9 0.
The server answers requests with text. A model reads the prompt and writes the next words.
They were friends, and they shared their toys. The sky was blue and the grass was green.
In the morning the birds sing; in the evening the stars shine and the moon is bright.
"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable unicode characters: the printable
    Latin-1 bytes map to themselves, the others to code points from 256 up, in byte order."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1)))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# GPT-2's pre-tokenization, approximated with Python's `re` (letters = [^\W\d_]). It only shapes
# which merges are learned; the engine splits text with the exact pattern.
WORD_RE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


def train(corpus: str, vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Returns (vocab: piece -> id, merges in order) with len(vocab) == vocab_size minus the
    special tokens (or fewer, when the corpus runs out of pairs)."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    words = collections.Counter(
        tuple(b2u[b] for b in w.encode("utf-8")) for w in WORD_RE.findall(corpus))
    merges = []
    target = vocab_size - len(SPECIAL_TOKENS)
    while len(vocab) < target:
        pairs = collections.Counter()
        for word, count in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merged = best[0] + best[1]
        merges.append(best)
        vocab[merged] = len(vocab)
        new_words = collections.Counter()
        for word, count in words.items():
            out = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += count
        words = new_words
    return vocab, merges


def write(out_dir: str, vocab_size: int, max_pos: int) -> dict:
    """Writes tokenizer.json and tokenizer_config.json; returns {"eos_id", "size"}."""
    vocab, merges = train(CORPUS, vocab_size)
    added = []
    for t in SPECIAL_TOKENS:
        vocab[t] = len(vocab)
        added.append({"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [f"{a} {b}" for a, b in merges]},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    config = {
        "tokenizer_class": "GPT2Tokenizer", "add_bos_token": False, "add_eos_token": False,
        "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "model_max_length": max_pos, "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"}
                                 for a in added},
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return {"eos_id": vocab["<|endoftext|>"], "size": len(vocab)}
