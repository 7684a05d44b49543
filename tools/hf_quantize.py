#!/usr/bin/env python3
"""Writes a Hugging Face integer checkpoint (AutoAWQ "gemm" or AutoGPTQ / GPTQModel layout) of a
float model by round-to-nearest, for tests and as the int4 baseline.

    python3 tools/hf_quantize.py --model DIR --out OUT --method awq --group-size 64
    python3 tools/hf_quantize.py --model DIR --out OUT --method gptq --bits 4 --group-size 32 \\
        --asym --desc-act --checkpoint-format gptq_v2
    python3 tools/hf_quantize.py --model DIR --out OUT --method awq --group-size 64 \\
        --awq-search --calib-text tinystories_sample.txt     # the AWQ algorithm (awq_search.py)
    python3 tools/hf_quantize.py --model DIR --out OUT --method gptq --group-size 64 --asym \\
        --gptq --calib-text tinystories_sample.txt           # the GPTQ algorithm (gptq_search.py)

Every linear layer of the decoder layers (q/k/v/o, gate/up/down) is quantized per group of
`group_size` consecutive inputs (GPTQ -1: the whole row) and per output; embeddings, norms and
the LM head are copied as they are. config.json gets a `quantization_config` as the tools write
it; tokenizer and generation files are copied.

Rounding (per group, w the float32 weights of one output over the group's inputs, maxq =
2^bits - 1; scales are rounded to float16 first, and the codes are computed with the float16
scale, so that the stored tensors reproduce scale * (q - z) exactly):
  asymmetric (AWQ; GPTQ --asym): s = max(max(w) - min(w), 1e-5) / maxq, z = clip(round(-min(w) /
      s), 0, maxq) (GPTQ v1 files cannot store z = 0, since they store z - 1: there z >= 1),
      q = clip(round(w / s) + z, 0, maxq);
  symmetric (GPTQ default): s = max(2 * max|w| / maxq, 1e-5), z = (maxq + 1) / 2.
GPTQ --desc-act: the inputs are taken in order of decreasing sum of squared weights (a
stand-in for GPTQ's Hessian diagonal), groups are consecutive in that order, and g_idx[k] is the
group of input k (GPTQ's definition).

Packing follows the formats' public definitions:
  AWQ: qweight int32 [in][out/8]: word j of input row k holds the codes of outputs 8j..8j+7, the
       code of output 8j + c in nibble n where (0 2 4 6 1 3 5 7)[n] = c; qzeros int32
       [in/g][out/8] likewise; scales float16 [in/g][out].
  GPTQ: qweight int32 [in*bits/32][out]: word row r of output o holds inputs r*p .. r*p+p-1
       (p = 32/bits) from the low bits up; qzeros int32 [groups][out*bits/32] packs outputs the
       same way; scales float16 [groups][out]; g_idx int32 [in]. The "gptq" (v1) checkpoint
       format stores z - 1, "gptq_v2" stores z.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
LINEAR = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "I32": "<i4"}


def read_safetensors(path: str) -> dict:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=_DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)
        out[name] = (info["dtype"], arr.reshape(info["shape"]))
    return out


def write_safetensors(path: str, tensors: dict) -> None:
    """tensors: name -> (safetensors dtype, numpy array already in that dtype's layout)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def quantize_groups(w: np.ndarray, cols_of_group: list, bits: int, sym: bool, min_zero: int):
    """w float32 [out, in]; cols_of_group[g] the input indices of group g. Returns codes
    [out, in] (uint32), zeros [groups, out] (int64), scales [groups, out] (float16)."""
    maxq = (1 << bits) - 1
    out_f, in_f = w.shape
    codes = np.zeros((out_f, in_f), dtype=np.int64)
    zeros = np.zeros((len(cols_of_group), out_f), dtype=np.int64)
    scales = np.zeros((len(cols_of_group), out_f), dtype=np.float16)
    for g, cols in enumerate(cols_of_group):
        x = w[:, cols].astype(np.float32)
        if sym:
            s = np.maximum(2 * np.abs(x).max(axis=1) / maxq, 1e-5)
            z = np.full(out_f, (maxq + 1) // 2, dtype=np.int64)
        else:
            lo, hi = x.min(axis=1), x.max(axis=1)
            s = np.maximum(hi - lo, 1e-5) / maxq
        s16 = s.astype(np.float16)
        s32 = s16.astype(np.float32)
        if not sym:
            z = np.clip(np.round(-lo / s32), min_zero, maxq).astype(np.int64)
        q = np.clip(np.round(x / s32[:, None]) + z[:, None], 0, maxq).astype(np.int64)
        codes[:, cols] = q
        zeros[g] = z
        scales[g] = s16
    return codes.astype(np.uint32), zeros, scales


def pack_awq(codes_in_out: np.ndarray) -> np.ndarray:
    """[rows][out] codes (4-bit) -> [rows][out/8] int32, AutoAWQ's nibble order."""
    rows, out_f = codes_in_out.shape
    words = np.zeros((rows, out_f // 8), dtype=np.uint32)
    for n, c in enumerate(AWQ_PACK_ORDER):
        words |= (codes_in_out[:, c::8].astype(np.uint32) & 15) << np.uint32(4 * n)
    return words.view(np.int32)


def pack_gptq_rows(codes_in_out: np.ndarray, bits: int) -> np.ndarray:
    """[in][out] -> [in*bits/32][out]: p consecutive inputs per word, low bits first."""
    p = 32 // bits
    rows, out_f = codes_in_out.shape
    words = np.zeros((rows // p, out_f), dtype=np.uint32)
    for i in range(p):
        words |= (codes_in_out[i::p].astype(np.uint32) & ((1 << bits) - 1)) << np.uint32(bits * i)
    return words.view(np.int32)


def pack_gptq_cols(values: np.ndarray, bits: int) -> np.ndarray:
    """[groups][out] -> [groups][out*bits/32]: p consecutive outputs per word, low bits first."""
    p = 32 // bits
    mask = (1 << bits) - 1
    groups, out_f = values.shape
    words = np.zeros((groups, out_f // p), dtype=np.uint32)
    for i in range(p):
        words |= (values[:, i::p].astype(np.uint32) & mask) << np.uint32(bits * i)
    return words.view(np.int32)


def quantize_linear(w: np.ndarray, args) -> dict:
    """One [out, in] matrix -> the checkpoint's tensors (suffix -> (dtype, array))."""
    out_f, in_f = w.shape
    g = in_f if args.group_size == -1 else args.group_size
    if args.method == "awq":
        groups = [np.arange(s, s + g) for s in range(0, in_f, g)]
        codes, zeros, scales = quantize_groups(w, groups, 4, sym=False, min_zero=0)
        return {"qweight": ("I32", pack_awq(codes.T)),
                "qzeros": ("I32", pack_awq(zeros)),
                "scales": ("F16", scales)}
    order = np.arange(in_f)
    if args.desc_act:
        order = np.argsort(-(w.astype(np.float64) ** 2).sum(axis=0), kind="stable")
    groups = [order[s:s + g] for s in range(0, in_f, g)]
    codes, zeros, scales = quantize_groups(w, groups, args.bits, sym=not args.asym,
                                           min_zero=gptq_min_zero(args))
    return gptq_tensors(codes, zeros, scales, groups, args)


def gptq_min_zero(args) -> int:
    """GPTQ v1 files store z - 1, so they cannot hold an asymmetric z of 0."""
    return 1 if args.checkpoint_format == "gptq" and args.asym else 0


def gptq_tensors(codes, zeros, scales, groups, args) -> dict:
    """Codes [out, in], zeros / scales [groups, out], groups' input indices -> GPTQ tensors."""
    in_f = codes.shape[1]
    v1 = args.checkpoint_format == "gptq"
    g_idx = np.zeros(in_f, dtype=np.int32)
    for gi, cols in enumerate(groups):
        g_idx[cols] = gi
    stored_zeros = zeros - 1 if v1 else zeros
    return {"qweight": ("I32", pack_gptq_rows(codes.T, args.bits)),
            "qzeros": ("I32", pack_gptq_cols(stored_zeros, args.bits)),
            "scales": ("F16", scales),
            "g_idx": ("I32", g_idx)}


def quantization_config(args) -> dict:
    if args.method == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": args.group_size,
                "zero_point": True, "version": "gemm",
                "modules_to_not_convert": args.modules_to_not_convert or None}
    return {"quant_method": "gptq", "bits": args.bits, "group_size": args.group_size,
            "desc_act": args.desc_act, "sym": not args.asym, "true_sequential": True,
            "checkpoint_format": args.checkpoint_format}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="float HF model directory (model.safetensors)")
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--method", choices=["awq", "gptq"], required=True)
    p.add_argument("--bits", type=int, default=4, choices=[4, 8], help="GPTQ: 4 or 8")
    p.add_argument("--group-size", type=int, default=128, help="inputs per group; GPTQ: -1 too")
    p.add_argument("--asym", action="store_true", help="GPTQ: asymmetric (sym false)")
    p.add_argument("--desc-act", action="store_true", help="GPTQ: act-order (g_idx)")
    p.add_argument("--checkpoint-format", default="gptq", choices=["gptq", "gptq_v2"],
                   help="GPTQ zero-point convention: gptq (v1, stores z - 1) or gptq_v2")
    p.add_argument("--awq-search", action="store_true",
                   help="AWQ: search activation-aware scales and clips on --calib-text first "
                        "(tools/awq_search.py) instead of plain round-to-nearest")
    p.add_argument("--gptq", action="store_true",
                   help="GPTQ: the GPTQ algorithm (Hessian-based error compensation, "
                        "tools/gptq_search.py) on --calib-text instead of round-to-nearest")
    p.add_argument("--calib-text", help="calibration text; documents split on <|endoftext|>")
    p.add_argument("--calib-docs", type=int, default=64,
                   help="calibration documents: the last N whole ones of the file")
    p.add_argument("--calib-tokens", type=int, default=128, help="tokens per document, at most")
    p.add_argument("--modules-to-not-convert", default="",
                   help="AWQ: comma-separated module names left in float (e.g. down_proj)")
    args = p.parse_args(argv)
    args.modules_to_not_convert = [m for m in args.modules_to_not_convert.split(",") if m]
    if args.method == "awq" and args.bits != 4:
        p.error("AWQ is 4-bit")
    if args.modules_to_not_convert and args.method != "awq":
        p.error("--modules-to-not-convert is AWQ's")
    if args.group_size != -1 and args.group_size <= 0:
        p.error("--group-size must be positive or -1")
    if args.group_size == -1 and args.method == "awq":
        p.error("AWQ needs a positive group size")
    if args.awq_search and (args.method != "awq" or not args.calib_text):
        p.error("--awq-search needs --method awq and --calib-text")
    if args.gptq and (args.method != "gptq" or not args.calib_text):
        p.error("--gptq needs --method gptq and --calib-text")
    return args


def calibration_ids(args, config) -> list:
    """Token ids (BOS first) of the last --calib-docs whole documents of --calib-text."""
    import sentencepiece  # python3-sentencepiece; only the AWQ / GPTQ searches need it
    sp = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(args.model, "tokenizer.model"))
    with open(args.calib_text, encoding="utf-8") as f:
        docs = [d.strip() for d in f.read().split("<|endoftext|>")][:-1]
    bos = config.get("bos_token_id", 1)
    return [[bos] + sp.encode(d)[:args.calib_tokens - 1] for d in docs[-args.calib_docs:]]


def main(argv=None) -> int:
    args = parse_args(argv)
    src = read_safetensors(os.path.join(args.model, "model.safetensors"))
    with open(os.path.join(args.model, "config.json")) as f:
        config = json.load(f)
    if args.awq_search:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import awq_search
        floats = {n: a.astype(np.float64) for n, (d, a) in src.items() if d != "I32"}
        searched = awq_search.awq(floats, config, calibration_ids(args, config),
                                  args.group_size, quantize_groups)
        src.update({n: ("F32", a.astype(np.float32)) for n, a in searched.items()})
    gptq_results = {}
    if args.gptq:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gptq_search
        floats = {n: a.astype(np.float64) for n, (d, a) in src.items() if d != "I32"}
        gptq_results = gptq_search.gptq(floats, config, calibration_ids(args, config),
                                        args.group_size, args.bits, not args.asym,
                                        gptq_min_zero(args), args.desc_act)
    tensors = {}
    for name, (dtype, arr) in src.items():
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        quantize = (module is not None and module.startswith("model.layers.")
                    and module.split(".", 3)[3] in LINEAR
                    and not any(m in module for m in args.modules_to_not_convert))
        if not quantize:
            tensors[name] = (dtype if dtype != "BF16" else "F32", arr)
            continue
        w = arr.astype(np.float32)
        g = w.shape[1] if args.group_size == -1 else args.group_size
        if w.shape[1] % g != 0 and not (args.method == "gptq"):
            sys.exit(f"{name}: {w.shape[1]} inputs are not a multiple of group size {g}")
        parts = (gptq_tensors(*gptq_results[name], args) if name in gptq_results
                 else quantize_linear(w, args))
        for suffix, t in parts.items():
            tensors[f"{module}.{suffix}"] = t
        print(f"quantized {name} {list(w.shape)}", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors)
    config["quantization_config"] = quantization_config(args)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for extra in ("generation_config.json", "tokenizer.model", "tokenizer.json",
                  "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(args.model, extra)):
            shutil.copy(os.path.join(args.model, extra), os.path.join(args.out, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
