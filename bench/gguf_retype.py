#!/usr/bin/env python3
"""Rewrites a GGUF model's matrices as random blocks of llama.cpp's quantized types, with the
per-tensor mix of a llama.cpp preset, for throughput benchmarks of formats that pagellm reads
but does not write (K-quants, IQ4_XS). Values are random (random code bytes, fp16 scales of
about 1e-3), so the output is for speed only; use llama.cpp's llama-quantize for real files.

    bench/gguf_retype.py IN.gguf OUT.gguf --preset q4_k_m|q5_k_m|q6_k|iq4_xs|q4_0|q8_0

Mix (after llama.cpp's llama_tensor_get_type): the preset's base type everywhere; output.weight
(token_embd.weight when tied) Q6_K for the K and IQ4_XS presets; for *_K_M, attn_v and ffn_down Q6_K in layers i with
i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2. A row length that is not a multiple of the type's
block falls back as llama.cpp does: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL.
1-D tensors (norms) are kept as they are.
"""

import argparse
import struct

import numpy as np

# ggml id: (elements per block, bytes per block, byte offsets of fp16 scale fields)
BLOCKS = {2: (32, 18, [0]), 3: (32, 20, [0, 2]), 6: (32, 22, [0]), 7: (32, 24, [0, 2]),
          8: (32, 34, [0]), 12: (256, 144, [0, 2]), 13: (256, 176, [0, 2]),
          14: (256, 210, [208]), 20: (32, 18, [0]), 23: (256, 136, [0])}
Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS = 2, 8, 12, 13, 14, 23
FALLBACK = {Q4_K: 6, Q5_K: 7, Q6_K: Q8_0, IQ4_XS: 20}
BASE = {"q4_k_m": Q4_K, "q5_k_m": Q5_K, "q6_k": Q6_K, "iq4_xs": IQ4_XS, "q4_0": Q4_0,
        "q8_0": Q8_0}
SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def parse(buf):
    """-> (end of the KV section, tensors [(name, ne, type, offset)], alignment)."""
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    alignment = 32

    def string(p):
        n = struct.unpack_from("<Q", buf, p)[0]
        return buf[p + 8:p + 8 + n].decode(), p + 8 + n

    def skip_value(t, p):
        if t == 8:
            return string(p)[1]
        if t == 9:
            et, count = struct.unpack_from("<IQ", buf, p)
            p += 12
            for _ in range(count):
                p = skip_value(et, p)
            return p
        return p + SCALAR_SIZE[t]

    for _ in range(n_kv):
        key, pos = string(pos)
        t = struct.unpack_from("<I", buf, pos)[0]
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", buf, pos + 4)[0]
        pos = skip_value(t, pos + 4)
    kv_end = pos
    tensors = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        nd = struct.unpack_from("<I", buf, pos)[0]
        ne = list(struct.unpack_from(f"<{nd}Q", buf, pos + 4))
        t, off = struct.unpack_from("<IQ", buf, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        tensors.append((name, ne, t, off))
    return kv_end, tensors, alignment


def target_type(name, ne, base, preset, n_layers, tied):
    if len(ne) < 2:
        return None
    t = base
    head = "token_embd.weight" if tied else "output.weight"
    if name == head and base in (Q4_K, Q5_K, IQ4_XS):
        t = Q6_K
    if preset.endswith("_k_m") and (".attn_v." in name or ".ffn_down." in name):
        i = int(name.split(".")[1])
        if i < n_layers // 8 or i >= 7 * n_layers // 8 or (i - n_layers // 8) % 3 == 2:
            t = Q6_K
    if ne[0] % BLOCKS[t][0] != 0:
        t = FALLBACK[t]
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--preset", required=True, choices=sorted(BASE))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    with open(a.src, "rb") as f:
        buf = f.read()
    kv_end, tensors, align = parse(buf)
    layers = {int(n.split(".")[1]) for n, *_ in tensors if n.startswith("blk.")}
    tied = not any(n == "output.weight" for n, *_ in tensors)
    rng = np.random.default_rng(a.seed)
    infos, datas, off = b"", [], 0
    sizes = {0: 4, 1: 2, 30: 2}
    data_start = -(-(kv_end + sum(8 + len(n.encode()) + 4 + 8 * len(ne) + 12
                                  for n, ne, *_ in tensors)) // align) * align
    for name, ne, t, src_off in tensors:
        new = target_type(name, ne, BASE[a.preset], a.preset, len(layers), tied)
        n = int(np.prod(ne))
        if new is None:
            new = t
            b = data_start + src_off
            data = buf[b:b + n * sizes[t]]
        else:
            elems, size, halves = BLOCKS[new]
            blocks = rng.integers(0, 256, size=(n // elems, size), dtype=np.uint8)
            for h in halves:
                scale = rng.uniform(0.5e-3, 2e-3, size=n // elems).astype("<f2")
                blocks[:, h:h + 2] = scale.view(np.uint8).reshape(-1, 2)
            data = blocks.tobytes()
        nb = name.encode()
        infos += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(ne))
        infos += struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", new, off)
        pad = -len(data) % align
        datas.append(data + b"\0" * pad)
        off += len(data) + pad
    head = buf[:kv_end] + infos
    with open(a.dst, "wb") as f:
        f.write(head + b"\0" * (-len(head) % align))
        for d in datas:
            f.write(d)


if __name__ == "__main__":
    main()
