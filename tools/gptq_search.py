"""The GPTQ algorithm (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for
Generative Pre-trained Transformers") for tools/hf_quantize.py: round-to-nearest per group with
the rounding error of each input column spread over the columns not yet quantized, weighted by
the inverse Hessian of the layer's squared output error, on a float Llama-family model held as
numpy arrays.

Layer by layer and, inside a layer, in the order the inputs are produced ("true sequential":
q/k/v, then o_proj on the attention output of the quantized q/k/v, then gate/up, then down), on
the hidden states of a calibration text run through the already quantized layers:
  1. H = 2 X^T X / n over the n calibration tokens X [n, in] that the linear layer reads (q/k/v
     share one, gate/up share one); inputs never active get H_kk = 1 and zero weights; H gets
     1% of its mean diagonal added (dampening);
  2. with act-order (--desc-act) the inputs are visited by decreasing H_kk (GPTQ's order; the
     groups are consecutive in that order and g_idx records them), else in order;
  3. U = the upper Cholesky factor of H^-1. For each input k in the visiting order: at the first
     input of a group, the group's scale and zero point come from the current (already updated)
     weights of its inputs by hf_quantize's round-to-nearest rule; q = the code of w_k;
     e = (w_k - s (q - z)) / U_kk; every later input j gets w_j -= e U_kj.
The rule that turns a group's weights into scale, zero and codes is hf_quantize's, so GPTQ and
the RTN baseline differ only by the error compensation.
"""

from __future__ import annotations

import sys

import numpy as np

import awq_search

DAMP = 0.01


def group_params(w, bits, sym, min_zero):
    """Scale (float16), zero and float32 scale of each row of the group's weights w [out, g],
    by hf_quantize.quantize_groups' rule."""
    maxq = (1 << bits) - 1
    if sym:
        s = np.maximum(2 * np.abs(w).max(axis=1) / maxq, 1e-5)
    else:
        lo, hi = w.min(axis=1), w.max(axis=1)
        s = np.maximum(hi - lo, 1e-5) / maxq
    s16 = s.astype(np.float16)
    s32 = s16.astype(np.float64)
    if sym:
        z = np.full(w.shape[0], (maxq + 1) // 2, dtype=np.int64)
    else:
        z = np.clip(np.round(-lo / s32), min_zero, maxq).astype(np.int64)
    return s16, z, s32


def gptq_matrix(w, h, group, bits, sym, min_zero, desc_act):
    """w float64 [out, in], h [in, in]. -> (codes [out, in] uint32, zeros [groups, out],
    scales [groups, out] float16, groups: input indices of each group, dequantized w)."""
    out_f, in_f = w.shape
    maxq = (1 << bits) - 1
    w = w.copy()
    h = h.copy()
    dead = np.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    order = np.argsort(-np.diag(h), kind="stable") if desc_act else np.arange(in_f)
    w = w[:, order]
    h = h[np.ix_(order, order)]
    h[np.diag_indices(in_f)] += DAMP * np.mean(np.diag(h))
    u = np.linalg.cholesky(np.linalg.inv(h)).T  # upper: H^-1 = U^T U
    codes = np.zeros((out_f, in_f), dtype=np.int64)
    deq = np.zeros((out_f, in_f))
    ng = (in_f + group - 1) // group
    zeros = np.zeros((ng, out_f), dtype=np.int64)
    scales = np.zeros((ng, out_f), dtype=np.float16)
    s32 = z = None
    for k in range(in_f):
        if k % group == 0:
            gi = k // group
            scales[gi], zeros[gi], s32 = group_params(w[:, k:k + group], bits, sym, min_zero)
            z = zeros[gi]
        q = np.clip(np.round(w[:, k] / s32) + z, 0, maxq)
        codes[:, k] = q
        deq[:, k] = s32 * (q - z)
        e = (w[:, k] - deq[:, k]) / u[k, k]
        w[:, k + 1:] -= np.outer(e, u[k, k + 1:])
    inv = np.argsort(order)
    groups = [order[s:s + group] for s in range(0, in_f, group)]
    return codes[:, inv].astype(np.uint32), zeros, scales, groups, deq[:, inv]


def hessian(x):
    return 2.0 * (x.T @ x) / x.shape[0]


def gptq(weights: dict, cfg: dict, calib: list, group: int, bits: int, sym: bool,
         min_zero: int, desc_act: bool) -> dict:
    """weights: name -> float64 arrays; calib: token id lists. -> {linear weight name: (codes,
    zeros, scales, groups)} for every decoder linear layer; group -1: one group per row."""
    w = {k: np.array(v, dtype=np.float64) for k, v in weights.items()}
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    out = {}
    xs = [w["model.embed_tokens.weight"][np.asarray(ids)] for ids in calib]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        L = lambda name: p + name + ".weight"  # noqa: E731

        def quantize(x, names):
            hx = hessian(x)
            for n in names:
                g = w[L(n)].shape[1] if group == -1 else group
                codes, zeros, scales, groups, deq = gptq_matrix(w[L(n)], hx, g, bits, sym,
                                                                min_zero, desc_act)
                out[L(n)] = (codes, zeros, scales, groups)
                w[L(n)] = deq  # later layers see the quantized model

        quantize(np.concatenate([awq_search.rmsnorm(x, w[L("input_layernorm")], eps)
                                 for x in xs]),
                 ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"])
        att = [awq_search.attention(awq_search.rmsnorm(x, w[L("input_layernorm")], eps), w, p, cfg)
               for x in xs]
        quantize(np.concatenate(att), ["self_attn.o_proj"])
        xs = [x + a @ w[L("self_attn.o_proj")].T for x, a in zip(xs, att)]
        hs = [awq_search.rmsnorm(x, w[L("post_attention_layernorm")], eps) for x in xs]
        quantize(np.concatenate(hs), ["mlp.gate_proj", "mlp.up_proj"])
        act = [(lambda g, u: g / (1 + np.exp(-g)) * u)(hh @ w[L("mlp.gate_proj")].T,
                                                        hh @ w[L("mlp.up_proj")].T) for hh in hs]
        quantize(np.concatenate(act), ["mlp.down_proj"])
        xs = [x + a @ w[L("mlp.down_proj")].T for x, a in zip(xs, act)]
        print(f"gptq: layer {layer + 1}/{cfg['num_hidden_layers']} quantized", file=sys.stderr,
              flush=True)
    return out
