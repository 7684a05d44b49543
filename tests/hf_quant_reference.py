"""Independent numpy dequantizers of the Hugging Face integer checkpoint formats, written from
their public definitions (AutoAWQ's GEMM layout; AutoGPTQ / GPTQModel), sharing no code with
tools/hf_quantize.py or src/:

AWQ (bits 4): qweight int32 [in][out/8], qzeros int32 [in/g][out/8], scales fp16 [in/g][out].
  AutoAWQ packs the eight outputs 8j..8j+7 of word j in the order 0 2 4 6 1 3 5 7 (the value
  of output 8j + order[n] goes to bits 4n..4n+3), so unpacking reads output 8j + c from nibble
  (0 4 1 5 2 6 3 7)[c].  W[o][k] = scales[k // g][o] * (q[k][o] - z[k // g][o]).
GPTQ (bits b in {4, 8}, p = 32 // b): qweight int32 [in/p][out]: input k is bits b*(k % p)
  upwards of word row k // p; qzeros int32 [groups][out/p]: output o is bits b*(o % p) of word
  column o // p; scales fp16 [groups][out]; g_idx int32 [in].  W[o][k] = scales[g][o] *
  (q[k][o] - (z[g][o] + offset)), g = g_idx[k], offset 1 for checkpoint_format "gptq" (v1: the
  files hold z - 1) and 0 for "gptq_v2".

Values are computed as float32 scale * float32 (q - z): both exact, so the product is the
exact real number s * (q - z) rounded once (it fits float32's 24 bits: 11 + 9).
"""

from __future__ import annotations

import numpy as np

AWQ_UNPACK_NIBBLE = (0, 4, 1, 5, 2, 6, 3, 7)


def _fields(words: np.ndarray, bits: int) -> np.ndarray:
    """int32 [..., n] -> [..., n, 32 // bits] unsigned fields, lowest bits first."""
    u = words.astype(np.int64) & 0xFFFFFFFF
    shifts = np.arange(0, 32, bits, dtype=np.int64)
    return (u[..., None] >> shifts) & ((1 << bits) - 1)


def awq_unpack(words: np.ndarray) -> np.ndarray:
    """[r][out/8] -> [r][out] codes in output order."""
    nib = _fields(words, 4)  # [r][out/8][8], nibble n
    by_output = nib[:, :, list(AWQ_UNPACK_NIBBLE)]  # output c of each word
    return by_output.reshape(words.shape[0], -1)


def awq_dequantize(qweight, qzeros, scales, group_size: int) -> np.ndarray:
    """-> float32 [out][in]."""
    q = awq_unpack(qweight)  # [in][out]
    z = awq_unpack(qzeros)   # [in/g][out]
    s = scales.astype(np.float32)
    rows = np.arange(q.shape[0]) // group_size
    w = s[rows] * (q - z[rows]).astype(np.float32)
    return np.ascontiguousarray(w.T)


def gptq_dequantize(qweight, qzeros, scales, g_idx, bits: int, checkpoint_format: str
                    ) -> np.ndarray:
    """-> float32 [out][in]."""
    p = 32 // bits
    q = _fields(qweight, bits)                 # [in/p][out][p]
    q = q.transpose(0, 2, 1).reshape(-1, q.shape[1])  # [in][out]
    z = _fields(qzeros, bits).reshape(qzeros.shape[0], -1)  # [groups][out]
    offset = {"gptq": 1, "gptq_v2": 0}[checkpoint_format]
    g = np.asarray(g_idx, dtype=np.int64)
    assert q.shape[0] == len(g) and p * qweight.shape[0] == len(g)
    w = scales.astype(np.float32)[g] * (q - (z[g] + offset)).astype(np.float32)
    return np.ascontiguousarray(w.T)


def dequantize_module(tensors: dict, module: str, qcfg: dict) -> np.ndarray:
    """tensors: name -> numpy array as stored (int32 / float16); qcfg: quantization_config."""
    if qcfg["quant_method"] == "awq":
        return awq_dequantize(tensors[module + ".qweight"], tensors[module + ".qzeros"],
                              tensors[module + ".scales"], int(qcfg["group_size"]))
    qweight = tensors[module + ".qweight"]
    n_in = qweight.shape[0] * 32 // int(qcfg["bits"])
    g = int(qcfg["group_size"])
    g_idx = tensors.get(module + ".g_idx")
    if g_idx is None:
        g_idx = np.arange(n_in) // (n_in if g == -1 else g)
    return gptq_dequantize(qweight, tensors[module + ".qzeros"], tensors[module + ".scales"],
                           g_idx, int(qcfg["bits"]), qcfg.get("checkpoint_format", "gptq"))
