"""Independent numpy dequantizers of ggml's block types, written from the format definitions
(ggml-common.h block layouts) and shared by the tests. Each follows ggml's float32 operation
order (scale products first, then one multiply by the code and one add/subtract of the min), so
the values equal llama.cpp's bit for bit. No code is shared with src/.

    dequantize(ggml_type, raw_bytes) -> float32 array of all elements, in row order
"""

from __future__ import annotations

import numpy as np

# ggml type id -> (name, elements per block, bytes per block)
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
         6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84),
         11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
         14: ("Q6_K", 256, 210), 20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136),
         30: ("BF16", 1, 2)}

IQ4NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                        dtype=np.float32)
_SHIFT2 = np.array([0, 2, 4, 6], dtype=np.uint8)[:, None]  # 2-bit planes k = 0..3


def nbytes(ggml_type: int, n_elements: int) -> int:
    _, elems, size = TYPES[ggml_type]
    return n_elements // elems * size


def _f16(b):
    return np.ascontiguousarray(b).view("<f2").astype(np.float32)  # (n, 2) bytes -> (n, 1)


def _nibbles(qs):
    """(n, 16) bytes -> (n, 32): low nibbles then high nibbles (Q4_0 order)."""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _q5_codes(qh4, qs):
    qh = np.ascontiguousarray(qh4).view("<u4")  # (n, 1)
    bits = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)
    return _nibbles(qs) | (bits << 4)


def _k_scale_min(s):
    """Q4_K / Q5_K: 12 bytes (n, 12) -> 8 scales and 8 mins (n, 8), 6 bits each."""
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    m = np.empty_like(sc)
    for j in range(8):
        if j < 4:
            sc[:, j], m[:, j] = s[:, j] & 63, s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc.astype(np.float32), m.astype(np.float32)


def _q3_scales(s):
    """Q3_K: 12 bytes (n, 12) -> 16 signed scales (n, 16) (6 bits minus 32)."""
    s = s.astype(np.int32)
    out = np.empty((s.shape[0], 16), np.int32)
    for j in range(16):
        lo = (s[:, j] & 15) if j < 8 else (s[:, j - 8] >> 4)
        hi = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
        out[:, j] = (lo | (hi << 4)) - 32
    return out.astype(np.float32)


def dequantize(kind: int, data: bytes) -> np.ndarray:
    name, elems, size = TYPES[kind]
    if name == "F32":
        return np.frombuffer(data, dtype="<f4").copy()
    if name == "F16":
        return np.frombuffer(data, dtype="<f2").astype(np.float32)
    if name == "BF16":
        return (np.frombuffer(data, dtype="<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
    blk = np.frombuffer(data, dtype=np.uint8).reshape(-1, size)
    n = blk.shape[0]
    if name == "Q8_0":
        x = _f16(blk[:, :2]) * blk[:, 2:].view(np.int8).astype(np.float32)
    elif name == "Q4_0":
        x = _f16(blk[:, :2]) * (_nibbles(blk[:, 2:]).astype(np.float32) - 8.0)
    elif name == "Q4_1":
        x = _nibbles(blk[:, 4:]).astype(np.float32) * _f16(blk[:, :2]) + _f16(blk[:, 2:4])
    elif name == "Q5_0":
        q = _q5_codes(blk[:, 2:6], blk[:, 6:]).astype(np.float32) - 16.0
        x = q * _f16(blk[:, :2])
    elif name == "Q5_1":
        q = _q5_codes(blk[:, 4:8], blk[:, 8:]).astype(np.float32)
        x = q * _f16(blk[:, :2]) + _f16(blk[:, 2:4])
    elif name == "IQ4_NL":
        x = _f16(blk[:, :2]) * IQ4NL_VALUES[_nibbles(blk[:, 2:])]
    elif name == "Q2_K":
        sc = blk[:, :16]
        qs = blk[:, 16:80].reshape(n, 2, 1, 32)
        q = ((qs >> _SHIFT2) & 3).reshape(n, 16, 16).astype(np.float32)  # (half, plane, l)
        d, dmin = _f16(blk[:, 80:82]), _f16(blk[:, 82:84])
        dl = d * (sc & 15).astype(np.float32)
        ml = dmin * (sc >> 4).astype(np.float32)
        x = dl[:, :, None] * q - ml[:, :, None]
    elif name == "Q3_K":
        hmask = blk[:, :32].reshape(n, 1, 1, 32)
        qs = blk[:, 32:96].reshape(n, 2, 1, 32)
        hbit_shift = np.arange(8, dtype=np.uint8).reshape(2, 4, 1)  # bit 4h + k
        hbit = (hmask >> hbit_shift) & 1
        q = ((qs >> _SHIFT2) & 3).astype(np.int32) - 4 * (1 - hbit.astype(np.int32))
        dl = _f16(blk[:, 108:110]) * _q3_scales(blk[:, 96:108])
        x = dl[:, :, None] * q.reshape(n, 16, 16).astype(np.float32)
    elif name in ("Q4_K", "Q5_K"):
        d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
        sc, m = _k_scale_min(blk[:, 4:16])
        qs_off = 16 if name == "Q4_K" else 48
        qs = blk[:, qs_off:qs_off + 128].reshape(n, 4, 1, 32)
        q = np.concatenate([qs & 15, qs >> 4], axis=2)  # (n, chunk, low/high, l)
        if name == "Q5_K":
            qh = blk[:, 16:48].reshape(n, 1, 1, 32)
            shift = np.arange(8, dtype=np.uint8).reshape(4, 2, 1)  # bit 2c + high
            q = q | (((qh >> shift) & 1) << 4)
        x = (d * sc)[:, :, None] * q.reshape(n, 8, 32).astype(np.float32) - (dmin * m)[:, :, None]
    elif name == "Q6_K":
        ql = blk[:, :128].reshape(n, 2, 64)
        qh = blk[:, 128:192].reshape(n, 2, 1, 32)
        sc = blk[:, 192:208].view(np.int8).astype(np.float32)
        d = _f16(blk[:, 208:210])
        ql0, ql1 = ql[:, :, :32], ql[:, :, 32:]
        lo = np.stack([ql0 & 15, ql1 & 15, ql0 >> 4, ql1 >> 4], axis=2)  # (n, half, k, l)
        q = (lo | (((qh >> _SHIFT2) & 3) << 4)).astype(np.int32) - 32
        x = (d * sc)[:, :, None] * q.reshape(n, 16, 16).astype(np.float32)
    elif name == "IQ4_XS":
        d = _f16(blk[:, 0:2])
        sh = np.ascontiguousarray(blk[:, 2:4]).view("<u2").astype(np.int32)  # (n, 1)
        sl = blk[:, 4:8].astype(np.int32)
        j = np.arange(8)
        ls = ((sl[:, j // 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4)
        dl = d * (ls - 32).astype(np.float32)
        qs = blk[:, 8:136].reshape(n, 8, 16)
        idx = np.concatenate([qs & 15, qs >> 4], axis=2)  # (n, sub-block, 32)
        x = dl[:, :, None] * IQ4NL_VALUES[idx]
    else:
        raise ValueError(f"unsupported ggml type {name}")
    return np.asarray(x, dtype=np.float32).reshape(-1)
