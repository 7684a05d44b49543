"""Independent float64 numpy reference for Llama-family decoders (Llama, Mistral, Qwen2, Qwen3)
and their mixture-of-experts versions (Mixtral, Qwen2-MoE, Qwen3-MoE).

Reads a Hugging Face directory (config.json + model.safetensors or sharded safetensors with
model.safetensors.index.json; F32/F16/BF16 widened to float64) and runs a full causal forward
over a token list, no KV cache:

    x = embed[ids]
    per layer: h = rmsnorm(x) ; q,k,v = h W^T (+ bias) ;
               Qwen3: q, k = rmsnorm over head_dim of each head * q_norm / k_norm ;
               rotate_half RoPE on q,k ;
               GQA: KV head j serves query heads j*g .. j*g+g-1 (g = heads / kv_heads) ;
               softmax(q k^T / sqrt(head_dim) + causal [sliding-window] mask) v ; x += o_proj ;
               x += down(silu(gate(rmsnorm(x))) * up(rmsnorm(x)))
               or, in a sparse layer (transformers' MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock
               / Qwen3MoeSparseMoeBlock), with h = rmsnorm(x):
               p = softmax(h router^T) over all experts ; the top num_experts_per_tok p
               (divided by their sum: Mixtral always, Qwen when norm_topk_prob) ;
               x += sum_k p_k down_k(silu(gate_k(h)) * up_k(h))
                    [+ sigmoid(h shared_expert_gate^T) * shared_expert(h)   (Qwen2-MoE)]
    logits = rmsnorm(x) lm_head^T   (lm_head = embed when tied)

Gemma 2 / Gemma 3 (transformers' modeling_gemma2 / modeling_gemma3, eager attention) run
gemma_forward instead:

    x = embed[ids] * sqrt(hidden_size)
    norm(x, w) = x / sqrt(mean(x^2) + eps) * (1 + w)          (every norm, q/k norms included)
    per layer (local when layer_types[l] == "sliding_attention"; without layer_types, Gemma 2's
    even layers and Gemma 3's layers with (l + 1) % sliding_window_pattern != 0):
        h = norm(x, input_layernorm) ; q,k,v = h W^T ; Gemma 3: q, k = norm per head (q/k_norm)
        rotate_half RoPE (Gemma 3 local layers: rope_local_base_freq, no scaling; global layers
        rope_theta with rope_scaling) ;
        s = q k^T * query_pre_attn_scalar^-0.5 ; Gemma 2: s = cap * tanh(s / cap) ;
        causal mask, local layers also i - j < sliding_window ; softmax ; o = att W_o^T
        x += norm(o, post_attention_layernorm)
        h = norm(x, pre_feedforward_layernorm)
        x += norm(down(gelu_tanh(gate(h)) * up(h)), post_feedforward_layernorm)
          gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
    logits = norm(x, model.norm) lm_head^T, then cap * tanh(logits / cap) (final soft-cap)

RoPE frequencies follow Hugging Face: inv_freq_i = theta^(-2i/d); "linear" scaling divides
them by factor; "llama3" is _compute_llama3_parameters (wavelen = 2 pi / inv_freq; wavelen >
orig/low -> inv/factor; wavelen < orig/high -> unchanged; else smooth blend).

Also contains small readers for safetensors and GGUF (every block type of tests/gguf_blocks.py:
F32/F16/BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS) used by the tests; they
share no code with tools/ or src/ on purpose.

    python3 tests/reference_forward.py MODEL_DIR 1,5,9   # prints top-5 at the last position
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_blocks  # noqa: E402  (the block dequantizers, beside this file)

# ---------------------------------------------------------------------------------------------
# safetensors

_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8", "I32": "<i4", "I64": "<i8",
              "U8": "u1", "I8": "i1"}


def read_safetensors_header(path: str):
    """-> (header dict without __metadata__, metadata, data section offset)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", {})
    return header, meta, 8 + n


def read_safetensors(path: str, to_float64: bool = True) -> dict:
    header, _, start = read_safetensors_header(path)
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(raw[start + b:start + e], dtype=_ST_DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)
        arr = arr.reshape(info["shape"])
        out[name] = arr.astype(np.float64) if to_float64 else np.array(arr)
    return out


def load_hf_weights(model_dir: str) -> dict:
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for fname in files:
        weights.update(read_safetensors(os.path.join(model_dir, fname)))
    return weights


# ---------------------------------------------------------------------------------------------
# GGUF

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}


class GgufReader:
    """Minimal GGUF v2/v3 reader: .version, .metadata {key: value}, .tensors {name: info}."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        magic, self.version = struct.unpack_from("<4sI", self.buf, 0)
        if magic != b"GGUF":
            raise ValueError(f"{path}: bad magic {magic!r}")
        self.pos = 8
        n_tensors, n_kv = self._u("<QQ")
        self.metadata = {}
        self.metadata_types = {}
        for _ in range(n_kv):
            key = self._str()
            vtype = self._u("<I")[0]
            self.metadata_types[key] = vtype
            self.metadata[key] = self._value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u("<I")[0]
            ne = self._u(f"<{n_dims}Q")
            ttype, offset = self._u("<IQ")
            self.tensors[name] = {"ne": list(ne), "shape": list(reversed(ne)), "type": ttype,
                                  "offset": offset}
        self.alignment = int(self.metadata.get("general.alignment", 32))
        self.data_start = -(-self.pos // self.alignment) * self.alignment

    def _u(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _str(self):
        n = self._u("<Q")[0]
        s = self.buf[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def _value(self, vtype):
        if vtype == 8:
            return self._str()
        if vtype == 9:
            etype, count = self._u("<IQ")
            if etype == 8:
                return [self._str() for _ in range(count)]
            fmt = _GGUF_SCALARS[etype]
            size = struct.calcsize(fmt)
            arr = np.frombuffer(self.buf, dtype=np.dtype(fmt), count=count, offset=self.pos)
            self.pos += size * count
            return arr.tolist()
        return self._u(_GGUF_SCALARS[vtype])[0]

    def tensor_nbytes(self, name: str) -> int:
        t = self.tensors[name]
        return gguf_blocks.nbytes(t["type"], int(np.prod(t["ne"])))

    def raw(self, name: str) -> bytes:
        t = self.tensors[name]
        b = self.data_start + t["offset"]
        return self.buf[b:b + self.tensor_nbytes(name)]

    def tensor(self, name: str) -> np.ndarray:
        """Dequantized float32 array in numpy (outermost-first) shape."""
        t = self.tensors[name]
        if t["type"] not in gguf_blocks.TYPES:
            raise ValueError(f"{name}: unsupported ggml type {t['type']}")
        return gguf_blocks.dequantize(t["type"], self.raw(name)).reshape(t["shape"])


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp adjacent-pair Q/K row order -> HF rotate_half order (inverse of the converter)."""
    rows = w.shape[0]
    return (w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def load_gguf_weights(path: str) -> tuple[dict, dict]:
    """GGUF (llama or qwen2) -> (HF-named float64 weights, HF-style config dict).

    Quantized tensors are dequantized; llama Q/K rows are put back in rotate_half order; the
    config carries rope scaling from rope.scaling.* or the rope_freqs tensor (as 'rope_freqs').
    """
    g = GgufReader(path)
    md = g.metadata
    arch = md["general.architecture"]
    if arch in ("gemma2", "gemma3"):
        return load_gemma_gguf_weights(g)

    def k(name, default=None):
        return md.get(f"{arch}.{name}", default)

    heads, kv_heads = int(k("attention.head_count")), int(k("attention.head_count_kv"))
    hidden = int(k("embedding_length"))
    head_dim = int(k("attention.key_length", hidden // heads))
    experts = int(k("expert_count", 0))
    model_type = "mixtral" if arch == "llama" and experts else arch
    cfg = {"model_type": model_type, "hidden_size": hidden,
           "intermediate_size": int(k("feed_forward_length")),
           "num_hidden_layers": int(k("block_count")), "num_attention_heads": heads,
           "num_key_value_heads": kv_heads, "head_dim": head_dim,
           "vocab_size": g.tensors["token_embd.weight"]["shape"][0],
           "rms_norm_eps": float(k("attention.layer_norm_rms_epsilon")),
           "rope_theta": float(k("rope.freq_base", 10000.0)), "rope_scaling": None,
           "tie_word_embeddings": "output.weight" not in g.tensors,
           "sliding_window": k("attention.sliding_window"),
           "use_sliding_window": bool(k("attention.sliding_window"))}
    if experts:
        cfg.update(num_experts=experts, num_local_experts=experts,
                   num_experts_per_tok=int(k("expert_used_count")),
                   moe_intermediate_size=int(k("expert_feed_forward_length",
                                               cfg["intermediate_size"])),
                   shared_expert_intermediate_size=int(k("expert_shared_feed_forward_length", 0)),
                   # llama.cpp: Mixtral and Qwen3-MoE renormalise the top-k, Qwen2-MoE does not
                   norm_topk_prob=bool(k("expert_weights_norm", arch != "qwen2moe")))
    if k("rope.scaling.type") == "linear":
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": float(k("rope.scaling.factor"))}
    if "rope_freqs.weight" in g.tensors:
        cfg["rope_freqs"] = g.tensor("rope_freqs.weight").astype(np.float64)
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm.weight": "input_layernorm.weight",
                 "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
                 "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
                 "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
                 "attn_output.weight": "self_attn.o_proj.weight",
                 "ffn_gate_inp.weight": "mlp.gate.weight",
                 "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
                 "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
                 "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
                 "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
                 "attn_q_norm.weight": "self_attn.q_norm.weight",
                 "attn_k_norm.weight": "self_attn.k_norm.weight",
                 "ffn_norm.weight": "post_attention_layernorm.weight",
                 "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
                 "ffn_down.weight": "mlp.down_proj.weight",
                 "ffn_gate_exps.weight": None, "ffn_up_exps.weight": None,
                 "ffn_down_exps.weight": None}
    out = {}
    cfg["weight_blocks"] = {}  # HF name -> activation block of a quantized type (forward)
    for name in g.tensors:
        if name == "rope_freqs.weight":
            continue
        rest = None
        if name in names:
            hf = names[name]
        else:
            _, layer, rest = name.split(".", 2)
            hf = f"model.layers.{layer}.{per_layer[rest]}"
        w = g.tensor(name).astype(np.float64)
        block = gguf_blocks.TYPES[g.tensors[name]["type"]][1]
        stacked = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj",
                   "ffn_down_exps.weight": "down_proj"}
        if rest in stacked:  # [experts][rows][cols]
            for e in range(w.shape[0]):
                hf_e = f"model.layers.{layer}.mlp.experts.{e}.{stacked[rest]}.weight"
                out[hf_e] = w[e]
                if block > 1:
                    cfg["weight_blocks"][hf_e] = block
            continue
        if rest == "ffn_gate_inp_shexp.weight":
            w = w.reshape(1, -1)
        if block > 1:
            cfg["weight_blocks"][hf] = block
        if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            w = unpermute_qk(w, heads if ".attn_q." in name else kv_heads)
        out[hf] = w
    return out, cfg


def load_gemma_gguf_weights(g: GgufReader) -> tuple[dict, dict]:
    """A gemma2 / gemma3 GGUF -> (HF-named float64 weights, HF-style config). llama.cpp's
    converter stores every norm as 1 + w (undone here) and leaves implicit what its loader fixes:
    every 2nd (gemma2) / 6th (gemma3) layer global, the local RoPE base 10000 (gemma3), and
    query_pre_attn_scalar = hidden / heads for the 27B shapes (46 / 62 layers), else head_dim."""
    md = g.metadata
    arch = md["general.architecture"]

    def k(name, default=None):
        return md.get(f"{arch}.{name}", default)

    heads, hidden = int(k("attention.head_count")), int(k("embedding_length"))
    layers = int(k("block_count"))
    head_dim = int(k("attention.key_length", hidden // heads))
    big = layers == (46 if arch == "gemma2" else 62)
    cfg = {"model_type": arch if arch == "gemma2" else "gemma3_text", "hidden_size": hidden,
           "intermediate_size": int(k("feed_forward_length")), "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": int(k("attention.head_count_kv")),
           "head_dim": head_dim, "vocab_size": g.tensors["token_embd.weight"]["shape"][0],
           "rms_norm_eps": float(k("attention.layer_norm_rms_epsilon")),
           "rope_theta": float(k("rope.freq_base", 10000.0)), "rope_scaling": None,
           "tie_word_embeddings": "output.weight" not in g.tensors,
           "sliding_window": int(k("attention.sliding_window", 4096)),
           "query_pre_attn_scalar": hidden // heads if big else head_dim,
           "sliding_window_pattern": 2 if arch == "gemma2" else 6,
           "attn_logit_softcapping": k("attn_logit_softcapping", 50.0 if arch == "gemma2" else None),
           "final_logit_softcapping": k("final_logit_softcapping",
                                        30.0 if arch == "gemma2" else None),
           "rope_local_base_freq": 10000.0, "weight_blocks": {}}
    if k("rope.scaling.type") == "linear":
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": float(k("rope.scaling.factor"))}
    names = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm.weight": "input_layernorm.weight",
                 "attn_q.weight": "self_attn.q_proj.weight",
                 "attn_k.weight": "self_attn.k_proj.weight",
                 "attn_v.weight": "self_attn.v_proj.weight",
                 "attn_output.weight": "self_attn.o_proj.weight",
                 "attn_q_norm.weight": "self_attn.q_norm.weight",
                 "attn_k_norm.weight": "self_attn.k_norm.weight",
                 "post_attention_norm.weight": "post_attention_layernorm.weight",
                 "ffn_norm.weight": "pre_feedforward_layernorm.weight",
                 "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
                 "ffn_down.weight": "mlp.down_proj.weight",
                 "post_ffw_norm.weight": "post_feedforward_layernorm.weight"}
    out = {}
    for name in g.tensors:
        if name in names:
            hf = names[name]
        else:
            _, layer, rest = name.split(".", 2)
            hf = f"model.layers.{layer}.{per_layer[rest]}"
        w = g.tensor(name).astype(np.float64)
        if name.endswith("norm.weight"):
            w = w - 1.0
        block = gguf_blocks.TYPES[g.tensors[name]["type"]][1]
        if block > 1:
            cfg["weight_blocks"][hf] = block
        out[hf] = w
    return out, cfg


# ---------------------------------------------------------------------------------------------
# Forward pass

def rope_inv_freq(cfg: dict) -> np.ndarray:
    d = int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    theta = float(cfg.get("rope_theta", 10000.0))
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    if cfg.get("rope_freqs") is not None:  # GGUF llama3: theta_i / rope_freqs[i]
        return inv / np.asarray(cfg["rope_freqs"], dtype=np.float64)
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    factor = float(rs["factor"])
    if kind == "linear":
        return inv / factor
    if kind == "llama3":
        low, high = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        orig = float(rs["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > orig / low, inv / factor, inv)
        smooth = (orig / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < orig / high) & ~(wavelen > orig / low)
        return np.where(medium, blended, scaled)
    raise ValueError(f"unsupported rope_scaling {rs}")


def _rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def quantize_acts(x: np.ndarray, block: int) -> np.ndarray:
    """A quantized-weight matmul's input as the engine rounds it (src/kernels/matmul.h): the
    float32 values per token in blocks of `block` (32 for Q8_0-style, 256 for Q8_K-style),
    d = amax / 127 in float32, q = roundf(x * (1/d)) (halves away from zero); returns q * d."""
    x32 = x.astype(np.float32).reshape(x.shape[0], -1, block)
    d = np.abs(x32).max(axis=-1, keepdims=True) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    v = (x32 * inv).astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return (q * d.astype(np.float64)).reshape(x.shape)


def _sparse_layer(cfg: dict, layer: int) -> bool:
    """Which layers have experts, from the config alone (transformers' rules)."""
    if cfg.get("model_type") == "mixtral":
        return True
    if not cfg.get("num_experts"):
        return False
    step = int(cfg.get("decoder_sparse_step") or 1)
    return (layer + 1) % step == 0 and layer not in (cfg.get("mlp_only_layers") or [])


def _moe(cfg: dict, weights: dict, layer: int, h: np.ndarray, mm):
    """The sparse FFN of `layer` for h [n, hidden], or None for a dense layer."""
    p = f"model.layers.{layer}."
    if p + "block_sparse_moe.gate.weight" in weights:  # Mixtral
        router, ex, names = (p + "block_sparse_moe.gate.weight", p + "block_sparse_moe.experts.",
                             ("w1", "w3", "w2"))
        norm = True
    elif p + "mlp.gate.weight" in weights:  # Qwen2-MoE, Qwen3-MoE
        router, ex, names = p + "mlp.gate.weight", p + "mlp.experts.", ("gate_proj", "up_proj",
                                                                         "down_proj")
        norm = bool(cfg.get("norm_topk_prob", False))
    else:
        assert not _sparse_layer(cfg, layer), f"layer {layer} should have experts"
        return None
    assert _sparse_layer(cfg, layer), f"layer {layer} should be dense"
    logits = mm(h, router)
    prob = np.exp(logits - logits.max(axis=-1, keepdims=True))
    prob /= prob.sum(axis=-1, keepdims=True)
    top_k = int(cfg["num_experts_per_tok"])
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        sel = np.argsort(-prob[t], kind="stable")[:top_k]
        w = prob[t, sel]
        if norm:
            w = w / w.sum()
        ht = h[t:t + 1]
        for e, we in zip(sel, w):
            e_p = f"{ex}{e}."
            gate = mm(ht, e_p + names[0] + ".weight")
            up = mm(ht, e_p + names[1] + ".weight")
            out[t] += we * mm(gate / (1.0 + np.exp(-gate)) * up, e_p + names[2] + ".weight")[0]
    if p + "mlp.shared_expert_gate.weight" in weights:  # Qwen2-MoE
        sp = p + "mlp.shared_expert."
        gate = mm(h, sp + "gate_proj.weight")
        up = mm(h, sp + "up_proj.weight")
        shared = mm(gate / (1.0 + np.exp(-gate)) * up, sp + "down_proj.weight")
        g = h @ weights[p + "mlp.shared_expert_gate.weight"].T  # [n, 1], an F32 vector in GGUF
        out += shared / (1.0 + np.exp(-g))
    return out


def forward(cfg: dict, weights: dict, token_ids, positions=None,
            emulate_engine: bool = False, hidden: bool = False) -> np.ndarray:
    """logits [n_tokens, vocab] (float64) at every position of `token_ids`; with `hidden`, the
    final-normed hidden states [n_tokens, hidden_size] (the LM head's input) instead.

    emulate_engine: round as the engine does what float64 cannot reproduce by accident -- the
    8-bit activations of quantized-weight matmuls (cfg["weight_blocks"], from
    load_gguf_weights: 32-element block types use 32-element activation blocks, 256-element
    super-block types 256) and the float16 KV cache that quantized GGUF weights get -- and
    stay float64 otherwise."""
    if cfg.get("model_type") in GEMMA_MODEL_TYPES:
        return gemma_forward(cfg, weights, token_ids, positions, emulate_engine, hidden)
    ids = np.asarray(token_ids, dtype=np.int64)
    blocks = cfg.get("weight_blocks", {}) if emulate_engine else {}

    def mm(a, name, w=None):
        w = weights[name] if w is None else w
        if name in blocks:
            a = quantize_acts(a, blocks[name])
        return a @ w.T

    n = len(ids)
    H = cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d = int(cfg.get("head_dim") or H // nh)
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    group = nh // nkv
    pos = np.arange(n, dtype=np.float64) if positions is None else np.asarray(positions, np.float64)
    ang = pos[:, None] * rope_inv_freq(cfg)[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :]  # [n, 1, d]
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :]

    # Sliding window (Mistral; HF/llama.cpp semantics): position i sees j when i - j < window.
    window = cfg.get("sliding_window") if (cfg.get("model_type") == "mistral"
                                           or cfg.get("use_sliding_window")) else None
    i_idx = np.arange(n)[:, None]
    j_idx = np.arange(n)[None, :]
    allowed = j_idx <= i_idx
    if window:
        allowed &= (i_idx - j_idx) < int(window)
    mask = np.where(allowed, 0.0, -np.inf)

    x = weights["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = _rmsnorm(x, weights[p + "input_layernorm.weight"], eps)

        def proj(name, rows_heads):
            y = mm(h, p + f"self_attn.{name}.weight")
            b = weights.get(p + f"self_attn.{name}.bias")
            if b is not None:
                y = y + b
            return y.reshape(n, rows_heads, d)

        q, k, v = proj("q_proj", nh), proj("k_proj", nkv), proj("v_proj", nkv)
        if p + "self_attn.q_norm.weight" in weights:  # Qwen3: RMSNorm over each head's dims
            q = _rmsnorm(q, weights[p + "self_attn.q_norm.weight"], eps)
            k = _rmsnorm(k, weights[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if blocks:
            k = k.astype(np.float16).astype(np.float64)
            v = v.astype(np.float16).astype(np.float64)
        k = np.repeat(k, group, axis=1)  # KV head j -> query heads j*group .. j*group+group-1
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, k) / math.sqrt(d) + mask[None]
        scores -= scores.max(axis=-1, keepdims=True)
        prob = np.exp(scores)
        prob /= prob.sum(axis=-1, keepdims=True)
        att = np.einsum("hij,jhd->ihd", prob, v).reshape(n, nh * d)
        x = x + mm(att, p + "self_attn.o_proj.weight")
        h = _rmsnorm(x, weights[p + "post_attention_layernorm.weight"], eps)
        routed = _moe(cfg, weights, layer, h, mm)
        if routed is not None:
            x = x + routed
            continue
        gate = mm(h, p + "mlp.gate_proj.weight")
        up = mm(h, p + "mlp.up_proj.weight")
        x = x + mm(gate / (1.0 + np.exp(-gate)) * up, p + "mlp.down_proj.weight")
    x = _rmsnorm(x, weights["model.norm.weight"], eps)
    if hidden:
        return x
    head_name = "lm_head.weight"
    if head_name not in weights or cfg.get("tie_word_embeddings"):
        head_name = "model.embed_tokens.weight"
    return mm(x, head_name)


GEMMA_MODEL_TYPES = ("gemma2", "gemma3_text", "gemma3")


def gemma_local_layers(cfg: dict) -> list:
    """Which layers use the sliding window (transformers' rules, see the module docstring)."""
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    if cfg["model_type"] == "gemma2":
        return [i % 2 == 0 for i in range(n)]
    pattern = int(cfg.get("sliding_window_pattern") or 6)
    return [(i + 1) % pattern != 0 for i in range(n)]


def gemma_forward(cfg: dict, weights: dict, token_ids, positions=None,
                  emulate_engine: bool = False, hidden: bool = False) -> np.ndarray:
    """Gemma 2 / Gemma 3 logits [n_tokens, vocab] (float64); see the module docstring and
    forward() for `emulate_engine` and `hidden`."""
    ids = np.asarray(token_ids, dtype=np.int64)
    blocks = cfg.get("weight_blocks", {}) if emulate_engine else {}

    def mm(a, name):
        if name in blocks:
            a = quantize_acts(a, blocks[name])
        return a @ weights[name].T

    n = len(ids)
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    d = int(cfg.get("head_dim") or 256)
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    group = nh // nkv
    is_gemma3 = cfg["model_type"] != "gemma2"
    scale = float(cfg.get("query_pre_attn_scalar") or 256) ** -0.5
    attn_cap = cfg.get("attn_logit_softcapping", None if is_gemma3 else 50.0)
    final_cap = cfg.get("final_logit_softcapping", None if is_gemma3 else 30.0)
    window = int(cfg.get("sliding_window") or 4096)
    local = gemma_local_layers(cfg)

    def norm(v, w):
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * (1.0 + w)

    pos = np.arange(n, dtype=np.float64) if positions is None else np.asarray(positions, np.float64)

    def rope_tables(rcfg):
        ang = pos[:, None] * rope_inv_freq(rcfg)[None, :]
        return (np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :],
                np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :])

    rope_global = rope_tables({**cfg, "head_dim": d, "rope_theta": cfg.get(
        "rope_theta", 1e6 if is_gemma3 else 10000.0)})
    rope_local = rope_global
    if is_gemma3:  # local layers: their own base, never scaled
        rope_local = rope_tables({**cfg, "head_dim": d, "rope_scaling": None,
                                  "rope_theta": float(cfg.get("rope_local_base_freq", 10000.0))})
    i_idx = np.arange(n)[:, None]
    j_idx = np.arange(n)[None, :]
    causal = j_idx <= i_idx
    masks = {False: np.where(causal, 0.0, -np.inf),
             True: np.where(causal & ((i_idx - j_idx) < window), 0.0, -np.inf)}

    x = weights["model.embed_tokens.weight"][ids] * math.sqrt(H)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = norm(x, weights[p + "input_layernorm.weight"])
        q = mm(h, p + "self_attn.q_proj.weight").reshape(n, nh, d)
        k = mm(h, p + "self_attn.k_proj.weight").reshape(n, nkv, d)
        v = mm(h, p + "self_attn.v_proj.weight").reshape(n, nkv, d)
        if is_gemma3:
            q = norm(q, weights[p + "self_attn.q_norm.weight"])
            k = norm(k, weights[p + "self_attn.k_norm.weight"])
        cos, sin = rope_local if local[layer] else rope_global
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if blocks:
            k = k.astype(np.float16).astype(np.float64)
            v = v.astype(np.float16).astype(np.float64)
        k = np.repeat(k, group, axis=1)
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, k) * scale
        if attn_cap:
            scores = np.tanh(scores / attn_cap) * attn_cap
        scores = scores + masks[local[layer]][None]
        scores -= scores.max(axis=-1, keepdims=True)
        prob = np.exp(scores)
        prob /= prob.sum(axis=-1, keepdims=True)
        att = np.einsum("hij,jhd->ihd", prob, v).reshape(n, nh * d)
        x = x + norm(mm(att, p + "self_attn.o_proj.weight"),
                     weights[p + "post_attention_layernorm.weight"])
        h = norm(x, weights[p + "pre_feedforward_layernorm.weight"])
        gate = mm(h, p + "mlp.gate_proj.weight")
        up = mm(h, p + "mlp.up_proj.weight")
        act = 0.5 * gate * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (gate + 0.044715 * gate ** 3)))
        x = x + norm(mm(act * up, p + "mlp.down_proj.weight"),
                     weights[p + "post_feedforward_layernorm.weight"])
    x = norm(x, weights["model.norm.weight"])
    if hidden:
        return x
    head_name = "lm_head.weight"
    if head_name not in weights or cfg.get("tie_word_embeddings", True):
        head_name = "model.embed_tokens.weight"
    logits = mm(x, head_name)
    if final_cap:
        logits = np.tanh(logits / final_cap) * final_cap
    return logits


def load_config(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def reference_logits(model: str, token_ids) -> np.ndarray:
    """HF directory or .gguf file -> float64 logits [n_tokens, vocab]."""
    if model.endswith(".gguf"):
        weights, cfg = load_gguf_weights(model)
    else:
        cfg, weights = load_config(model), load_hf_weights(model)
    return forward(cfg, weights, token_ids)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    ids = [int(t) for t in argv[2].split(",")]
    logits = reference_logits(argv[1], ids)
    last = logits[-1]
    top = np.argsort(-last)[:5]
    print(" ".join(f"{i}:{last[i]:.6f}" for i in top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
