"""Streaming GGUF v3 writer, ggml reference quantizers and tokenizer metadata, numpy only.

Used by tools/gen_model.py. The layout written here:

    magic "GGUF" | u32 version 3 | u64 tensor_count | u64 kv_count
    kv_count x (string key, u32 value type, value)
    tensor_count x (string name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type,
                    u64 offset relative to the data section)
    zero padding to general.alignment
    tensor data, every tensor starting at a multiple of general.alignment

Strings are u64 length + UTF-8 bytes (no terminator). Arrays are u32 element type, u64 count,
elements. Everything is little-endian.

Quantizers follow ggml's reference (scalar) routines bit for bit on IEEE float32 arithmetic:

    Q8_0  block of 32: amax = max|x|, d = amax / 127, id = 1/d (0 if d == 0),
          q = roundf(x * id) (half away from zero), stored as fp16 d then 32 x int8.
    Q4_0  block of 32: max = the element with the largest |x| (first one on ties, sign kept),
          d = max / -8, id = 1/d (0 if d == 0), q = min(15, (int8)(x * id + 8.5f)) (truncation),
          stored as fp16 d then 16 bytes: byte j = q[j] | q[j + 16] << 4.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

GGUF_MAGIC = 0x46554747  # b"GGUF" read as a little-endian u32
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# Metadata value types.
GGUF_UINT8, GGUF_INT8, GGUF_UINT16, GGUF_INT16 = 0, 1, 2, 3
GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL = 4, 5, 6, 7
GGUF_STRING, GGUF_ARRAY, GGUF_UINT64, GGUF_INT64, GGUF_FLOAT64 = 8, 9, 10, 11, 12

_SCALAR_FORMATS = {
    GGUF_UINT8: "<B", GGUF_INT8: "<b", GGUF_UINT16: "<H", GGUF_INT16: "<h",
    GGUF_UINT32: "<I", GGUF_INT32: "<i", GGUF_FLOAT32: "<f", GGUF_BOOL: "<?",
    GGUF_UINT64: "<Q", GGUF_INT64: "<q", GGUF_FLOAT64: "<d",
}
_ARRAY_NUMPY = {
    GGUF_UINT8: "<u1", GGUF_INT8: "<i1", GGUF_UINT16: "<u2", GGUF_INT16: "<i2",
    GGUF_UINT32: "<u4", GGUF_INT32: "<i4", GGUF_FLOAT32: "<f4", GGUF_BOOL: "<u1",
    GGUF_UINT64: "<u8", GGUF_INT64: "<i8", GGUF_FLOAT64: "<f8",
}

# ggml tensor types (subset) and their block geometry: (elements per block, bytes per block).
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
GGML_TYPE_NAMES = {"f32": GGML_F32, "f16": GGML_F16, "bf16": GGML_BF16,
                   "q8_0": GGML_Q8_0, "q4_0": GGML_Q4_0}
GGML_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2),
              GGML_Q8_0: (32, 34), GGML_Q4_0: (32, 18)}
# general.file_type (llama_ftype) for a file whose big matrices have this type.
LLAMA_FTYPE = {GGML_F32: 0, GGML_F16: 1, GGML_Q4_0: 2, GGML_Q8_0: 7, GGML_BF16: 32}

# tokenizer.ggml.token_type values (llama_token_type).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = (
    1, 2, 3, 4, 5, 6)

Q8_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", (32,))])
Q4_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
assert Q8_0_BLOCK.itemsize == 34 and Q4_0_BLOCK.itemsize == 18


# ---------------------------------------------------------------------------------------------
# Element conversions and quantizers.

def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (as torch and ggml)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    nan = np.isnan(x)
    if nan.any():  # keep NaNs quiet NaNs instead of letting the carry turn them into infinities
        rounded = np.where(nan, (u >> np.uint32(16)) | np.uint32(0x40), rounded)
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _roundf(v: np.ndarray) -> np.ndarray:
    """C roundf on float32: half away from zero, exact (no x + 0.5 double rounding)."""
    a = np.abs(v)
    t = np.floor(a)
    t += (a - t) >= np.float32(0.5)  # a - floor(a) is exact in binary floating point
    return np.copysign(t, v)


def _reciprocal_or_zero(d: np.ndarray) -> np.ndarray:
    out = np.zeros_like(d)
    np.divide(np.float32(1.0), d, out=out, where=d != 0)
    return out


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """Rows of float32 (last dim a multiple of 32) -> structured array of Q8_0 blocks."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1)
    d = amax / np.float32(127)
    inv = _reciprocal_or_zero(d)
    q = _roundf(blocks * inv[:, None])
    out = np.empty(blocks.shape[0], dtype=Q8_0_BLOCK)
    out["d"] = d.astype(np.float16)
    out["qs"] = q.astype(np.int8)
    return out


def quantize_q4_0(x: np.ndarray) -> np.ndarray:
    """Rows of float32 (last dim a multiple of 32) -> structured array of Q4_0 blocks."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    idx = np.argmax(np.abs(blocks), axis=1)  # first maximum, like ggml's strict '<' scan
    mx = blocks[np.arange(blocks.shape[0]), idx]
    d = mx / np.float32(-8)
    inv = _reciprocal_or_zero(d)
    v = blocks * inv[:, None]          # float32 product, rounded
    v += np.float32(8.5)               # then float32 sum, rounded (two separate operations)
    q = np.minimum(np.trunc(v), np.float32(15)).astype(np.uint8)  # (int8_t) truncates
    out = np.empty(blocks.shape[0], dtype=Q4_0_BLOCK)
    out["d"] = d.astype(np.float16)
    out["qs"] = q[:, :16] | (q[:, 16:] << np.uint8(4))
    return out


def dequantize_q8_0(blocks: np.ndarray) -> np.ndarray:
    return (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).reshape(-1)


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - np.float32(8)
    return (blocks["d"].astype(np.float32)[:, None] * q).reshape(-1)


def encode_rows(x: np.ndarray, ggml_type: int) -> np.ndarray:
    """float32 rows -> the array whose bytes are the tensor data in `ggml_type`."""
    if ggml_type == GGML_F32:
        return np.ascontiguousarray(x, dtype="<f4")
    if ggml_type == GGML_F16:
        return np.ascontiguousarray(x, dtype=np.float32).astype("<f2")
    if ggml_type == GGML_BF16:
        return f32_to_bf16_bits(x)
    if ggml_type == GGML_Q8_0:
        return quantize_q8_0(x)
    if ggml_type == GGML_Q4_0:
        return quantize_q4_0(x)
    raise ValueError(f"unsupported ggml type {ggml_type}")


def ggml_nbytes(shape: Sequence[int], ggml_type: int) -> int:
    """Bytes of a tensor of numpy-order `shape` (last dim innermost)."""
    per_block, block_bytes = GGML_BLOCK[ggml_type]
    inner = shape[-1] if shape else 1
    if inner % per_block:
        raise ValueError(f"row length {inner} is not a multiple of {per_block} for type {ggml_type}")
    n = 1
    for s in shape:
        n *= int(s)
    return n // per_block * block_bytes


def llama_permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate_half row order -> llama.cpp adjacent-pair row order, per head.

    Same transform as llama.cpp's convert_hf_to_gguf LlamaModel.permute: rows of each head
    [r_0 .. r_{d/2-1}, r_{d/2} .. r_{d-1}] become [r_0, r_{d/2}, r_1, r_{d/2+1}, ...]. Works on
    weights [n_head*d, in] and biases [n_head*d], and on any whole number of heads.
    """
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


# ---------------------------------------------------------------------------------------------
# Writer.

def _pack_string(s: str | bytes) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype: int, value) -> bytes:
    if vtype == GGUF_STRING:
        return _pack_string(value)
    if vtype == GGUF_ARRAY:
        etype, items = value
        head = struct.pack("<IQ", etype, len(items))
        if etype == GGUF_STRING:
            return head + b"".join(_pack_string(s) for s in items)
        if etype == GGUF_ARRAY:
            raise ValueError("nested GGUF arrays are not supported")
        return head + np.asarray(items, dtype=_ARRAY_NUMPY[etype]).tobytes()
    return struct.pack(_SCALAR_FORMATS[vtype], value)


@dataclass
class _TensorInfo:
    name: str
    shape: tuple  # numpy order, outermost first
    ggml_type: int
    offset: int
    nbytes: int
    written: int = 0


@dataclass
class GgufWriter:
    """Collect metadata and tensor infos, write the header, then stream tensor data in order.

        w = GgufWriter(path)
        w.add_string("general.architecture", "llama"); ...
        w.add_tensor("token_embd.weight", (vocab, hidden), GGML_Q8_0)
        w.write_header()
        w.write_tensor_data("token_embd.weight", encode_rows(rows, GGML_Q8_0))  # chunks ok
        w.close()
    """
    path: str
    alignment: int = DEFAULT_ALIGNMENT
    _kv: list = field(default_factory=list)
    _keys: set = field(default_factory=set)
    _tensors: list = field(default_factory=list)
    _by_name: dict = field(default_factory=dict)
    _data_size: int = 0
    _file: object = None
    _next: int = 0  # index of the tensor being written

    def add(self, key: str, vtype: int, value) -> None:
        if key in self._keys:
            raise ValueError(f"duplicate GGUF key {key}")
        if self._file is not None:
            raise RuntimeError("metadata added after the header was written")
        self._keys.add(key)
        self._kv.append((key, vtype, value))

    def add_string(self, key, v): self.add(key, GGUF_STRING, v)
    def add_u32(self, key, v): self.add(key, GGUF_UINT32, int(v))
    def add_i32(self, key, v): self.add(key, GGUF_INT32, int(v))
    def add_f32(self, key, v): self.add(key, GGUF_FLOAT32, float(v))
    def add_bool(self, key, v): self.add(key, GGUF_BOOL, bool(v))
    def add_array(self, key, etype, items): self.add(key, GGUF_ARRAY, (etype, list(items)))

    def add_tensor(self, name: str, shape: Sequence[int], ggml_type: int) -> None:
        if name in self._by_name:
            raise ValueError(f"duplicate tensor {name}")
        nbytes = ggml_nbytes(shape, ggml_type)
        offset = -(-self._data_size // self.alignment) * self.alignment
        info = _TensorInfo(name, tuple(int(s) for s in shape), ggml_type, offset, nbytes)
        self._tensors.append(info)
        self._by_name[name] = info
        self._data_size = offset + nbytes

    def tensor_type(self, name: str) -> int:
        return self._by_name[name].ggml_type

    def write_header(self) -> None:
        if "general.alignment" not in self._keys and self.alignment != DEFAULT_ALIGNMENT:
            self.add_u32("general.alignment", self.alignment)
        parts = [struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(self._tensors), len(self._kv))]
        for key, vtype, value in self._kv:
            parts.append(_pack_string(key) + struct.pack("<I", vtype) + _pack_value(vtype, value))
        for t in self._tensors:
            ne = tuple(reversed(t.shape)) or (1,)
            parts.append(_pack_string(t.name) + struct.pack("<I", len(ne))
                         + struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", t.ggml_type, t.offset))
        header = b"".join(parts)
        pad = -len(header) % self.alignment
        self._file = open(self.path, "wb")
        self._file.write(header + b"\0" * pad)
        self._data_start = len(header) + pad

    def write_tensor_data(self, name: str, data: np.ndarray) -> None:
        """Append bytes of tensor `name`; tensors must come in add_tensor order, chunks in order."""
        t = self._tensors[self._next]
        if t.name != name:
            raise RuntimeError(f"expected data for {t.name}, got {name}")
        if t.written == 0:
            pos = self._file.tell() - self._data_start
            if pos > t.offset:
                raise RuntimeError("tensor data overran its slot")
            self._file.write(b"\0" * (t.offset - pos))
        data = np.ascontiguousarray(data)
        if t.written + data.nbytes > t.nbytes:
            raise RuntimeError(f"too much data for {name}: {t.written + data.nbytes} > {t.nbytes}")
        data.tofile(self._file)
        t.written += data.nbytes
        if t.written == t.nbytes:
            self._next += 1

    def close(self) -> None:
        missing = [t.name for t in self._tensors if t.written != t.nbytes]
        if missing:
            self._file.close()
            raise RuntimeError(f"tensors not fully written: {missing[:5]}")
        pos = self._file.tell() - self._data_start
        self._file.write(b"\0" * (-pos % self.alignment))
        self._file.close()


# ---------------------------------------------------------------------------------------------
# Tokenizer metadata (tokenizer.ggml.*) from the tokenizer files copied into a model directory.

def _token_content(tok) -> str | None:
    if tok is None:
        return None
    if isinstance(tok, dict):
        return tok.get("content")
    return str(tok)


@dataclass
class TokenizerInfo:
    """What the generator needs to know about a tokenizer, independent of its file format."""
    ggml_model: str                  # "llama" (SentencePiece-style) or "gpt2" (byte-level BPE)
    pre: str | None                  # tokenizer.ggml.pre for gpt2 models
    tokens: list
    scores: list | None
    token_types: list
    merges: list | None
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None = None
    pad_id: int | None = None
    add_bos: bool = False
    add_eos: bool = False
    chat_template: str | None = None
    extra_eos_ids: list = field(default_factory=list)  # end-of-turn tokens for generation_config

    @property
    def size(self) -> int:
        return len(self.tokens)


def load_sentencepiece(model_path: str, config: dict | None = None) -> TokenizerInfo:
    import sentencepiece as spm  # python3-sentencepiece (Debian)

    sp = spm.SentencePieceProcessor(model_file=model_path)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        if sp.is_unknown(i):
            types.append(TOKEN_UNKNOWN)
        elif sp.is_control(i):
            types.append(TOKEN_CONTROL)
        elif sp.is_unused(i):
            types.append(TOKEN_UNUSED)
        elif sp.is_byte(i):
            types.append(TOKEN_BYTE)
        else:
            types.append(TOKEN_NORMAL)
    config = config or {}
    ids = {t: i for i, t in enumerate(tokens)}

    def cfg_id(key, default):
        content = _token_content(config.get(key))
        return ids.get(content, default) if content is not None else default

    def opt(v):
        return v if v is not None and v >= 0 else None

    return TokenizerInfo(
        ggml_model="llama", pre=None, tokens=tokens, scores=scores, token_types=types, merges=None,
        bos_id=cfg_id("bos_token", opt(sp.bos_id())), eos_id=cfg_id("eos_token", opt(sp.eos_id())),
        unk_id=opt(sp.unk_id()), pad_id=opt(sp.pad_id()),
        add_bos=bool(config.get("add_bos_token", True)), add_eos=bool(config.get("add_eos_token", False)),
        chat_template=config.get("chat_template"))


def load_hf_tokenizer(tokenizer_json: str, config_json: str | None, pre: str | None,
                      default_add_bos: bool) -> TokenizerInfo:
    """tokenizer.json (+ tokenizer_config.json) -> TokenizerInfo.

    Byte-level BPE (no byte_fallback) becomes ggml model "gpt2" with merges; SentencePiece-style
    BPE (byte_fallback, Metaspace) becomes "llama" with scores -rank over the normal pieces in id
    order, which is how SentencePiece BPE models score their pieces.
    """
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    config = {}
    if config_json and os.path.exists(config_json):
        with open(config_json, encoding="utf-8") as f:
            config = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"{tokenizer_json}: only BPE tokenizer.json models are supported")
    vocab = dict(model["vocab"])
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    for i, a in added.items():
        vocab[a["content"]] = i
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    spm_style = bool(model.get("byte_fallback"))
    types, scores = [], []
    rank = 0
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]"
            types.append(TOKEN_UNUSED)
            scores.append(-1000.0)
            continue
        if spm_style and t == model.get("unk_token"):
            types.append(TOKEN_UNKNOWN)
            scores.append(0.0)
        elif i in added:
            types.append(TOKEN_CONTROL if added[i].get("special") else TOKEN_USER_DEFINED)
            scores.append(0.0)
        elif spm_style and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(TOKEN_BYTE)
            scores.append(0.0)
        else:
            types.append(TOKEN_NORMAL)
            scores.append(-float(rank))
            rank += 1
    merges = None
    if not spm_style:
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    bos = _token_content(config.get("bos_token"))
    eos = _token_content(config.get("eos_token"))
    pad = _token_content(config.get("pad_token"))
    unk = _token_content(config.get("unk_token")) or model.get("unk_token")
    extra_eos = [vocab[t] for t in ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>")
                 if t in vocab and t != eos]
    return TokenizerInfo(
        ggml_model="llama" if spm_style else "gpt2", pre=None if spm_style else pre,
        tokens=tokens, scores=scores if spm_style else None, token_types=types, merges=merges,
        bos_id=vocab.get(bos) if bos else None, eos_id=vocab.get(eos) if eos else None,
        unk_id=vocab.get(unk) if unk else None, pad_id=vocab.get(pad) if pad else None,
        add_bos=bool(config.get("add_bos_token", default_add_bos)),
        add_eos=bool(config.get("add_eos_token", False)),
        chat_template=config.get("chat_template"), extra_eos_ids=extra_eos)


def add_tokenizer_metadata(w: GgufWriter, tok: TokenizerInfo, vocab_size: int) -> None:
    """tokenizer.ggml.* keys; the token list is padded with [PAD{i}] (unused) up to vocab_size."""
    if vocab_size < tok.size:
        raise ValueError(f"vocab_size {vocab_size} < tokenizer size {tok.size}")
    pad = range(tok.size, vocab_size)
    w.add_string("tokenizer.ggml.model", tok.ggml_model)
    if tok.pre or tok.ggml_model == "llama":
        w.add_string("tokenizer.ggml.pre", tok.pre or "default")
    w.add_array("tokenizer.ggml.tokens", GGUF_STRING,
                list(tok.tokens) + [f"[PAD{i}]" for i in pad])
    if tok.scores is not None:
        w.add_array("tokenizer.ggml.scores", GGUF_FLOAT32, list(tok.scores) + [-1000.0] * len(pad))
    w.add_array("tokenizer.ggml.token_type", GGUF_INT32,
                list(tok.token_types) + [TOKEN_UNUSED] * len(pad))
    if tok.merges is not None:
        w.add_array("tokenizer.ggml.merges", GGUF_STRING, tok.merges)
    for key, v in (("bos_token_id", tok.bos_id), ("eos_token_id", tok.eos_id),
                   ("unknown_token_id", tok.unk_id), ("padding_token_id", tok.pad_id)):
        if v is not None:
            w.add_u32(f"tokenizer.ggml.{key}", v)
    w.add_bool("tokenizer.ggml.add_bos_token", tok.add_bos)
    w.add_bool("tokenizer.ggml.add_eos_token", tok.add_eos)
    if tok.chat_template:
        w.add_string("tokenizer.chat_template", tok.chat_template)


def iter_row_chunks(rows: int, rows_per_chunk: int) -> Iterable[tuple[int, int]]:
    for r0 in range(0, rows, rows_per_chunk):
        yield r0, min(rows, r0 + rows_per_chunk)
