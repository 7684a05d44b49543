#!/usr/bin/env python3
"""Prints a request body fragment, {"logit_bias": {id: -100, ...}}, that bans every token of a
GGUF model's vocabulary whose bytes are not valid UTF-8 on their own (byte-level BPE pieces of
a multi-byte character, SentencePiece byte tokens <0x80>..<0xFF>), for serving benchmarks of
random-weight models against llama-server.

Why: a random-weight model emits such tokens freely, and llama-server (3f545becc) cancels a
streamed request when its output parser meets an incomplete UTF-8 sequence inside the text
("The model produced output that does not match the expected Content-only format"). The
cancelled requests count no tokens, so the two servers' throughputs stop being comparable.
With these tokens banned every generated text is valid UTF-8 in both servers, which get the
same body (bench/compare_serve.sh: EXTRA_BODY_FILE).

    bench/utf8_logit_bias.py MODEL.gguf > bias.json
"""

import json
import mmap
import struct
import sys

from gguf_retype import SCALAR_SIZE  # GGUF scalar value sizes by type id (same directory)


def read_vocab(path):
    """-> (tokenizer.ggml.model, tokenizer.ggml.tokens) of a GGUF file."""
    with open(path, "rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if buf[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    n_kv = struct.unpack_from("<Q", buf, 16)[0]
    pos = 24

    def string(p):
        n = struct.unpack_from("<Q", buf, p)[0]
        return bytes(buf[p + 8:p + 8 + n]), p + 8 + n

    def value(t, p):
        """-> (value or None when not needed, next position)."""
        if t == 8:
            return string(p)
        if t == 9:
            et, count = struct.unpack_from("<IQ", buf, p)
            p += 12
            items = []
            for _ in range(count):
                v, p = value(et, p)
                items.append(v)
            return items, p
        return None, p + SCALAR_SIZE[t]

    model, tokens = None, None
    for _ in range(n_kv):
        key, pos = string(pos)
        t = struct.unpack_from("<I", buf, pos)[0]
        v, pos = value(t, pos + 4)
        if key == b"tokenizer.ggml.model":
            model = v.decode()
        elif key == b"tokenizer.ggml.tokens":
            tokens = v
    if tokens is None:
        sys.exit(f"{path}: no tokenizer.ggml.tokens")
    return model, tokens


def gpt2_byte_decoder():
    """The inverse of GPT-2's byte-to-printable-character table (byte-level BPE vocabularies)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def token_bytes(model, piece, decoder):
    text = piece.decode("utf-8", errors="surrogateescape")
    if model == "gpt2":
        if any(ch not in decoder for ch in text):
            return None  # a special or added token written as plain text
        return bytes(decoder[ch] for ch in text)
    if text.startswith("<0x") and text.endswith(">") and len(text) == 6:
        return bytes([int(text[3:5], 16)])  # SentencePiece byte token
    return piece


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    model, tokens = read_vocab(sys.argv[1])
    decoder = gpt2_byte_decoder()
    banned = []
    for i, piece in enumerate(tokens):
        b = token_bytes(model, piece, decoder)
        if b is None:
            continue
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            banned.append(i)
    print(f"{len(banned)} of {len(tokens)} tokens banned ({model} vocabulary)", file=sys.stderr)
    json.dump({"logit_bias": {str(i): -100 for i in banned}}, sys.stdout, separators=(",", ":"))
    print()


if __name__ == "__main__":
    main()
