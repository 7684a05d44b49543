"""The AWQ algorithm (activation-aware weight quantization, Lin et al. 2023) for
tools/hf_quantize.py: per-input-channel scales searched from activation statistics and a
weight-clipping search, on a float Llama-family model held as numpy arrays.

Layer by layer, on the hidden states of a calibration text run through the float model:
  1. each group of linear layers that reads one input (q/k/v after input_layernorm; gate/up
     after post_attention_layernorm; down after up * silu(gate); o_proj after attention when
     v_proj's rows can absorb its scales, i.e. without grouped-query attention) gets scales
     s_c = mean|x_c|^a / mean_rows(|W_rc| / max_group|W|)^(1 - a), normalised by
     sqrt(max s * min s); the exponent a from {0, 1/20, ..., 19/20} is the one whose quantized
     outputs X/s . Q(W s)^T are closest (squared error) to the float outputs X W^T, summed over
     the group's layers. The scales are folded into the op before (the norm's weight, v_proj's
     or up_proj's rows: divided by s) and into the layers (columns times s): the float model is
     unchanged;
  2. clipping: per output row and group, the clip c = max|w| * (1 - i/20), i = 0..9, whose
     quantized outputs on (a sample of) the group's inputs are closest to the float ones; the
     weights are clamped to [-c, c] (q_proj and k_proj are left unclipped: their errors are
     amplified by the attention softmax);
  3. the next layer's input is this layer's output with the (scaled, clipped) float weights.
The quantizer is hf_quantize's round-to-nearest, so AWQ and the RTN baseline differ only by
the searched scales and clips.
"""

from __future__ import annotations

import sys

import numpy as np

N_GRID = 20
CLIP_STEPS = 10          # shrink by up to 45%
CLIP_MAX_TOKENS = 512    # tokens sampled for the clipping loss


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, theta):
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :]
    h = d // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos + rot * sin


def attention(h, w, p, cfg):
    """h [n, hidden] (one sequence) -> (attention output before o_proj [n, q_dim])."""
    n = h.shape[0]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    d = int(cfg.get("head_dim") or cfg["hidden_size"] // nh)
    pos = np.arange(n, dtype=np.float64)
    theta = float(cfg.get("rope_theta", 10000.0))
    q = rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, nh, d), pos, theta)
    k = rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, nkv, d), pos, theta)
    v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, nkv, d)
    k = np.repeat(k, nh // nkv, axis=1)
    v = np.repeat(v, nh // nkv, axis=1)
    s = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(d)
    s = s + np.triu(np.full((n, n), -np.inf), 1)[None]
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return np.einsum("hij,jhd->ihd", s, v).reshape(n, nh * d)


def fake_quantize(w, group, quantize_groups):
    """W [out, in] -> its dequantized round-to-nearest 4-bit version (AWQ's asymmetric rule)."""
    groups = [np.arange(s, s + group) for s in range(0, w.shape[1], group)]
    codes, zeros, scales = quantize_groups(w.astype(np.float32), groups, 4, sym=False,
                                           min_zero=0)
    s = scales.astype(np.float32)[np.arange(w.shape[1]) // group].T
    z = zeros[np.arange(w.shape[1]) // group].T
    return s * (codes.astype(np.float32) - z)


def search_scales(x, mats, group, quantize_groups):
    """x [tokens, in]; mats: list of [out, in] float weights read from x. -> best scales [in]."""
    x_mean = np.abs(x).mean(axis=0)
    cat = np.concatenate(mats, axis=0)
    g = cat.reshape(cat.shape[0], -1, group)
    w_norm = (np.abs(g) / (np.abs(g).max(axis=-1, keepdims=True) + 1e-12)).reshape(cat.shape)
    w_mean = w_norm.mean(axis=0)
    ref = [x @ m.T for m in mats]
    best, best_s, losses = None, np.ones_like(x_mean), []
    for i in range(N_GRID):
        a = i / N_GRID
        s = np.maximum(x_mean ** a / (w_mean ** (1 - a) + 1e-4), 1e-4)
        s = s / np.sqrt(s.max() * s.min())
        loss = 0.0
        for m, r in zip(mats, ref):
            wq = fake_quantize(m * s[None, :], group, quantize_groups) / s[None, :]
            loss += float(((x @ wq.T - r) ** 2).mean())
        losses.append(loss)
        if best is None or loss < best:
            best, best_s = loss, s
    return best_s, losses


def search_clip(x, w, group, quantize_groups):
    """Per (row, group) clip of W [out, in] minimising the group's output error on x."""
    if x.shape[0] > CLIP_MAX_TOKENS:
        x = x[np.linspace(0, x.shape[0] - 1, CLIP_MAX_TOKENS).astype(np.int64)]
    out_f, in_f = w.shape
    ng = in_f // group
    xg = x.reshape(x.shape[0], ng, group)             # [t, ng, g]
    wg = w.reshape(out_f, ng, group)                   # [o, ng, g]
    org_max = np.abs(wg).max(axis=-1, keepdims=True)   # [o, ng, 1]
    ref = np.einsum("tgk,ogk->tog", xg, wg)
    best_err = np.full((out_f, ng), np.inf)
    best_max = org_max.copy()
    for i in range(CLIP_STEPS):
        mx = org_max * (1 - i / N_GRID)
        cw = np.clip(wg, -mx, mx).reshape(out_f, in_f)
        q = fake_quantize(cw, group, quantize_groups).reshape(out_f, ng, group)
        err = ((np.einsum("tgk,ogk->tog", xg, q) - ref) ** 2).mean(axis=0)  # [o, ng]
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best_max = np.where(better[..., None], mx, best_max)
    return np.clip(wg, -best_max, best_max).reshape(out_f, in_f)


def awq(weights: dict, cfg: dict, calib: list, group: int, quantize_groups) -> dict:
    """weights: name -> float64 arrays (modified copies returned); calib: token id lists."""
    w = {k: np.array(v, dtype=np.float64) for k, v in weights.items()}
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    xs = [w["model.embed_tokens.weight"][np.asarray(ids)] for ids in calib]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        L = lambda name: p + name + ".weight"  # noqa: E731

        def scale_group(x, names, prev, prev_is_rows):
            mats = [w[L(n)] for n in names]
            s, losses = search_scales(x, mats, group, quantize_groups)
            for n in names:
                w[L(n)] = w[L(n)] * s[None, :]
            if prev_is_rows:
                w[L(prev)] = w[L(prev)] / s[:, None]
            else:
                w[L(prev)] = w[L(prev)] / s
            return s, int(np.argmin(losses))

        def clip_group(x, names):
            for n in names:
                if n not in ("self_attn.q_proj", "self_attn.k_proj"):
                    w[L(n)] = search_clip(x, w[L(n)], group, quantize_groups)

        # q/k/v: input_layernorm output.
        h = np.concatenate([rmsnorm(x, w[L("input_layernorm")], eps) for x in xs])
        qkv = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]
        s_qkv, a_qkv = scale_group(h, qkv, "input_layernorm", False)
        h = np.concatenate([rmsnorm(x, w[L("input_layernorm")], eps) for x in xs])
        clip_group(h, qkv)
        att = [attention(rmsnorm(x, w[L("input_layernorm")], eps), w, p, cfg) for x in xs]
        a_o = "-"
        if nkv == nh:
            s_o, a_o = scale_group(np.concatenate(att), ["self_attn.o_proj"], "self_attn.v_proj",
                                   True)
            att = [a / s_o for a in att]
        clip_group(np.concatenate(att), ["self_attn.o_proj"])
        xs = [x + a @ w[L("self_attn.o_proj")].T for x, a in zip(xs, att)]
        # gate/up: post_attention_layernorm output.
        h = np.concatenate([rmsnorm(x, w[L("post_attention_layernorm")], eps) for x in xs])
        gu = ["mlp.gate_proj", "mlp.up_proj"]
        _, a_gu = scale_group(h, gu, "post_attention_layernorm", False)
        h = np.concatenate([rmsnorm(x, w[L("post_attention_layernorm")], eps) for x in xs])
        clip_group(h, gu)
        hs = [rmsnorm(x, w[L("post_attention_layernorm")], eps) for x in xs]
        act = [(lambda g, u: g / (1 + np.exp(-g)) * u)(hh @ w[L("mlp.gate_proj")].T,
                                                        hh @ w[L("mlp.up_proj")].T) for hh in hs]
        # down: up * silu(gate); its scales go into up_proj's rows.
        _, a_d = scale_group(np.concatenate(act), ["mlp.down_proj"], "mlp.up_proj", True)
        act = [(lambda g, u: g / (1 + np.exp(-g)) * u)(hh @ w[L("mlp.gate_proj")].T,
                                                        hh @ w[L("mlp.up_proj")].T) for hh in hs]
        clip_group(np.concatenate(act), ["mlp.down_proj"])
        xs = [x + a @ w[L("mlp.down_proj")].T for x, a in zip(xs, act)]
        print(f"awq: layer {layer + 1}/{cfg['num_hidden_layers']}: scale exponents "
              f"qkv {a_qkv}/{N_GRID} o {a_o} gate/up {a_gu}/{N_GRID} down {a_d}/{N_GRID}",
              file=sys.stderr, flush=True)
    return w
