#!/usr/bin/env python3
"""Random-weight Llama-family models (dense and mixture-of-experts) and Gemma 2 / Gemma 3 models for
tests and benchmarks (numpy only).

Writes a Hugging Face directory (config.json, generation_config.json, model.safetensors or
shards + index, tokenizer files) and/or a GGUF v3 file with the same weights. See
docs/MODEL_GENERATOR.md for the presets, the weight distribution and benchmark recipes.

    /usr/bin/python3 tools/gen_model.py --preset tiny --out /tmp/tiny
    /usr/bin/python3 tools/gen_model.py --preset llama-3.2-1b --dtype bf16 --out build/models/l1b \
        --gguf build/models/l1b-q8_0.gguf --gguf-type q8_0

Weights are drawn in float32 per tensor (seeded from --seed and the tensor name), rounded to
--dtype (this is "the model"), written chunk by chunk to every output, and never held whole.
GGUF tensors are derived from the same rounded values (then converted or quantized).

--weights-from DIR takes the weights of a dense Llama-family Hugging Face directory
(F32/F16/BF16 safetensors, one file) instead, its config.json supplying every shape flag not
given, e.g. a GGUF of a shared model for `pagellm quantize`:

    /usr/bin/python3 tools/gen_model.py --weights-from ../shared/models/llama2xs-279K \
        --tokenizer tok512 --gguf /tmp/llama2xs-f32.gguf

--pad-to N (with --weights-from) zero-pads that model into one computing the same function whose
matrix row lengths are all multiples of N (256: K-quants; see pad_weights), e.g. a trained model
llama.cpp's llama-quantize can turn into Q4_K_M.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import byte_bpe  # noqa: E402
import gguf_writer as gw  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------
# Presets: shapes of public models (weights are random). Any field can be overridden by a flag.

PRESETS = {
    # stories260K's shape (see ../shared/models/stories260K), tok512 vocabulary.
    "tiny": dict(arch="llama", hidden=64, intermediate=172, layers=5, heads=8, kv_heads=4,
                 head_dim=8, vocab=512, tied=True, rope_theta=10000.0, max_pos=512,
                 rms_eps=1e-5, tokenizer="tok512"),
    # A little bigger, Q8_0/Q4_0-friendly (every row length a multiple of 32).
    "small": dict(arch="llama", hidden=256, intermediate=768, layers=4, heads=4, kv_heads=2,
                  head_dim=64, vocab=1024, tied=True, rope_theta=10000.0, max_pos=2048,
                  rms_eps=1e-5, tokenizer="tok512"),
    "tiny-qwen2": dict(arch="qwen2", hidden=128, intermediate=384, layers=3, heads=4, kv_heads=2,
                       head_dim=32, vocab=1024, tied=True, qkv_bias=True, rope_theta=1e6,
                       max_pos=4096, rms_eps=1e-6, tokenizer="tok512"),
    "smollm-135m": dict(arch="llama", hidden=576, intermediate=1536, layers=30, heads=9,
                        kv_heads=3, head_dim=64, vocab=49152, tied=True, rope_theta=10000.0,
                        max_pos=2048, rms_eps=1e-5, tokenizer="llama2-spm"),
    "qwen2.5-0.5b": dict(arch="qwen2", hidden=896, intermediate=4864, layers=24, heads=14,
                         kv_heads=2, head_dim=64, vocab=151936, tied=True, qkv_bias=True,
                         rope_theta=1e6, max_pos=32768, rms_eps=1e-6, tokenizer="qwen3"),
    "qwen2.5-1.5b": dict(arch="qwen2", hidden=1536, intermediate=8960, layers=28, heads=12,
                         kv_heads=2, head_dim=128, vocab=151936, tied=True, qkv_bias=True,
                         rope_theta=1e6, max_pos=32768, rms_eps=1e-6, tokenizer="qwen3"),
    # Qwen3: head_dim 128 independent of hidden / heads, q/k norms, no biases.
    "tiny-qwen3": dict(arch="qwen3", hidden=128, intermediate=384, layers=3, heads=4, kv_heads=2,
                       head_dim=64, vocab=1024, tied=True, rope_theta=1e6, max_pos=4096,
                       rms_eps=1e-6, tokenizer="tok512"),
    "qwen3-0.6b": dict(arch="qwen3", hidden=1024, intermediate=3072, layers=28, heads=16,
                       kv_heads=8, head_dim=128, vocab=151936, tied=True, rope_theta=1e6,
                       max_pos=40960, rms_eps=1e-6, tokenizer="qwen3"),
    "qwen3-1.7b": dict(arch="qwen3", hidden=2048, intermediate=6144, layers=28, heads=16,
                       kv_heads=8, head_dim=128, vocab=151936, tied=True, rope_theta=1e6,
                       max_pos=40960, rms_eps=1e-6, tokenizer="qwen3"),
    # Mixture of experts (every row length a multiple of 32 for Q8_0/Q4_0).
    "tiny-mixtral": dict(arch="mixtral", hidden=128, intermediate=256, layers=2, heads=4,
                         kv_heads=2, head_dim=32, vocab=512, tied=False, rope_theta=1e6,
                         max_pos=4096, rms_eps=1e-5, experts=4, experts_per_tok=2,
                         tokenizer="tok512"),
    "tiny-qwen3moe": dict(arch="qwen3moe", hidden=128, intermediate=256, layers=3, heads=4,
                          kv_heads=2, head_dim=32, vocab=512, tied=False, rope_theta=1e6,
                          max_pos=4096, rms_eps=1e-6, experts=8, experts_per_tok=2,
                          moe_intermediate=64, norm_topk_prob=True, tokenizer="tok512"),
    "tiny-qwen2moe": dict(arch="qwen2moe", hidden=128, intermediate=256, layers=2, heads=4,
                          kv_heads=2, head_dim=32, vocab=512, tied=False, qkv_bias=True,
                          rope_theta=1e6, max_pos=4096, rms_eps=1e-6, experts=8,
                          experts_per_tok=2, moe_intermediate=64, shared_intermediate=128,
                          norm_topk_prob=False, tokenizer="tok512"),
    "qwen3-30b-a3b": dict(arch="qwen3moe", hidden=2048, intermediate=6144, layers=48, heads=32,
                          kv_heads=4, head_dim=128, vocab=151936, tied=False, rope_theta=1e6,
                          max_pos=40960, rms_eps=1e-6, experts=128, experts_per_tok=8,
                          moe_intermediate=768, norm_topk_prob=True, tokenizer="qwen3"),
    # Mixtral-8x7B's widths, 4 of its 32 layers.
    "mixtral-8x7b-reduced": dict(arch="mixtral", hidden=4096, intermediate=14336, layers=4,
                                 heads=32, kv_heads=8, head_dim=128, vocab=32000, tied=False,
                                 rope_theta=1e6, max_pos=32768, rms_eps=1e-5, experts=8,
                                 experts_per_tok=2, tokenizer="mistral-v0.1"),
    "llama-3.2-1b": dict(arch="llama", hidden=2048, intermediate=8192, layers=16, heads=32,
                         kv_heads=8, head_dim=64, vocab=128256, tied=True, rope_theta=500000.0,
                         rope_scaling="llama3:32:1:4:8192", max_pos=131072, rms_eps=1e-5,
                         tokenizer="llama3"),
    "tinyllama-1.1b": dict(arch="llama", hidden=2048, intermediate=5632, layers=22, heads=32,
                           kv_heads=4, head_dim=64, vocab=32000, tied=False, rope_theta=10000.0,
                           max_pos=2048, rms_eps=1e-5, tokenizer="llama2-spm"),
    # Gemma 3: 5 local (sliding-window) layers per global one, q/k norms, local RoPE base 1e4,
    # global 1e6 (4B: linear x8 on the global layers), tied. Small: window 8 so that short test
    # prompts cross it.
    "tiny-gemma3": dict(arch="gemma3", hidden=128, intermediate=256, layers=6, heads=4,
                        kv_heads=2, head_dim=32, vocab=512, tied=True, rope_theta=1e6,
                        max_pos=4096, rms_eps=1e-6, sliding_window=8, tokenizer="tok512"),
    "gemma-3-1b": dict(arch="gemma3", hidden=1152, intermediate=6912, layers=26, heads=4,
                       kv_heads=1, head_dim=256, vocab=262144, tied=True, rope_theta=1e6,
                       max_pos=32768, rms_eps=1e-6, sliding_window=512, tokenizer=None),
    "gemma-3-4b": dict(arch="gemma3", hidden=2560, intermediate=10240, layers=34, heads=8,
                       kv_heads=4, head_dim=256, vocab=262208, tied=True, rope_theta=1e6,
                       rope_scaling="linear:8", max_pos=131072, rms_eps=1e-6,
                       sliding_window=1024, tokenizer=None),
    # Gemma 2: local and global layers alternate, attention (50) and final (30) soft-caps.
    "tiny-gemma2": dict(arch="gemma2", hidden=128, intermediate=256, layers=4, heads=4,
                        kv_heads=2, head_dim=32, vocab=512, tied=True, rope_theta=10000.0,
                        max_pos=4096, rms_eps=1e-6, sliding_window=8, tokenizer="tok512"),
    # Gemma-2-2B's widths and vocabulary, 4 of its 26 layers.
    "gemma-2-2b-reduced": dict(arch="gemma2", hidden=2304, intermediate=9216, layers=4, heads=8,
                               kv_heads=4, head_dim=256, vocab=256000, tied=True,
                               rope_theta=10000.0, max_pos=8192, rms_eps=1e-6,
                               sliding_window=4096, tokenizer=None),
    "mistral-tiny": dict(arch="mistral", hidden=256, intermediate=768, layers=3, heads=8,
                         kv_heads=2, head_dim=32, vocab=32000, tied=False, rope_theta=10000.0,
                         max_pos=4096, rms_eps=1e-5, sliding_window=16,
                         tokenizer="mistral-v0.1"),
}

# Tokenizers in ../shared: files copied into the model directory, how to read them, and the
# vocab_size of the real models that use them (default when neither preset nor --vocab says).
TOKENIZERS = {
    "llama3": dict(dir="tokenizers/llama3", files=["tokenizer.json", "tokenizer_config.json"],
                   kind="hf", pre="llama-bpe", add_bos=True, model_vocab=128256),
    "qwen3": dict(dir="tokenizers/qwen3", files=["tokenizer.json", "tokenizer_config.json"],
                  kind="hf", pre="qwen2", add_bos=False, model_vocab=151936),
    "mistral-v0.1": dict(dir="tokenizers/mistral-v0.1",
                         files=["tokenizer.json", "tokenizer_config.json"], kind="hf", pre=None,
                         add_bos=True, model_vocab=32000),
    "llama2-spm": dict(dir="tokenizers/llama2-spm", files=["tokenizer.model"], kind="spm",
                       model_vocab=32000),
    "tok512": dict(dir="models/stories260K", files=["tokenizer.model", "tokenizer_config.json"],
                   kind="spm", model_vocab=512),
    # Built by the script itself (tools/byte_bpe.py), needing nothing from ../shared.
    "byte-bpe": dict(dir=".", files=["tokenizer.json", "tokenizer_config.json"], kind="hf",
                     pre="gpt2", add_bos=False, model_vocab=512, builtin=True),
    "tok105": dict(dir="models/babyllama-tok105",
                   files=["tokenizer.model", "tokenizer_config.json"], kind="spm", model_vocab=105),
}
TOKENIZER_ALIASES = {"qwen": "qwen3", "qwen2": "qwen3", "mistral": "mistral-v0.1",
                     "llama2": "llama2-spm", "stories": "tok512", "stories260k": "tok512",
                     "babyllama": "tok105"}

HF_DTYPES = {"f32": ("F32", "float32", 4), "f16": ("F16", "float16", 2),
             "bf16": ("BF16", "bfloat16", 2)}
ARCHS = {"llama": ("LlamaForCausalLM", "llama"), "mistral": ("MistralForCausalLM", "mistral"),
         "qwen2": ("Qwen2ForCausalLM", "qwen2"), "qwen3": ("Qwen3ForCausalLM", "qwen3"),
         "mixtral": ("MixtralForCausalLM", "mixtral"),
         "qwen2moe": ("Qwen2MoeForCausalLM", "qwen2_moe"),
         "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
         "gemma2": ("Gemma2ForCausalLM", "gemma2"), "gemma3": ("Gemma3ForCausalLM", "gemma3_text")}
MOE_ARCHS = ("mixtral", "qwen2moe", "qwen3moe")
# GGUF general.architecture: Mistral and Mixtral files say "llama" (with expert_count for
# Mixtral), as llama.cpp's converter writes them.
GGUF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
             "mixtral": "llama", "qwen2moe": "qwen2moe", "qwen3moe": "qwen3moe",
             "gemma2": "gemma2", "gemma3": "gemma3"}
GEMMA_ARCHS = ("gemma2", "gemma3")
# What llama.cpp's Gemma loaders fix rather than read from GGUF metadata: every Nth layer is
# global, the local RoPE base, and the 27B shapes' (layers) query_pre_attn_scalar = hidden / heads.
GEMMA_GGUF_FIXED = {"gemma2": dict(pattern=2, local_theta=None, layers_27b=46),
                    "gemma3": dict(pattern=6, local_theta=10000.0, layers_27b=62)}

CHUNK_ELEMENTS = 1 << 22  # rows are generated/converted/written in pieces of about this size


# ---------------------------------------------------------------------------------------------
# Model description.

@dataclass
class RopeScaling:
    kind: str = "none"  # none | linear | llama3
    factor: float = 1.0
    low: float = 1.0
    high: float = 4.0
    orig: int = 8192

    @staticmethod
    def parse(text: str | None) -> "RopeScaling":
        if not text or text == "none":
            return RopeScaling()
        parts = text.split(":")
        kind = parts[0]
        if kind == "linear" and len(parts) == 2:
            return RopeScaling("linear", float(parts[1]))
        if kind == "llama3" and len(parts) in (2, 5):
            rs = RopeScaling("llama3", float(parts[1]))
            if len(parts) == 5:
                rs.low, rs.high, rs.orig = float(parts[2]), float(parts[3]), int(parts[4])
            return rs
        raise ValueError(f"bad --rope-scaling {text!r}: none | linear:F | llama3:F[:LOW:HIGH:ORIG]")

    def hf(self):
        if self.kind == "none":
            return None
        if self.kind == "linear":
            return {"factor": self.factor, "rope_type": "linear", "type": "linear"}
        return {"factor": self.factor, "low_freq_factor": self.low, "high_freq_factor": self.high,
                "original_max_position_embeddings": self.orig, "rope_type": "llama3",
                "type": "llama3"}


@dataclass
class ModelShape:
    arch: str = "llama"
    hidden: int = 64
    intermediate: int = 172
    layers: int = 2
    heads: int = 8
    kv_heads: int = 4
    head_dim: int = 8
    vocab: int = 512
    tied: bool = True
    qkv_bias: bool = False
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    max_pos: int = 2048
    rms_eps: float = 1e-5
    sliding_window: int | None = None
    # Mixture of experts (arch mixtral / qwen2moe / qwen3moe).
    experts: int = 0
    experts_per_tok: int = 0
    moe_intermediate: int = 0          # qwen*moe expert width (mixtral: intermediate)
    shared_intermediate: int = 0       # qwen2moe shared expert width
    norm_topk_prob: bool = True
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple = ()
    # Gemma 2 / 3 (defaults of the transformers config classes where None).
    query_pre_attn_scalar: int | None = None  # None: head_dim
    sliding_window_pattern: int | None = None  # every Nth layer global; None: 2 / 6
    rope_local_theta: float = 10000.0          # gemma3 local layers
    attn_softcap: float | None = None          # None: gemma2 50, gemma3 none
    final_softcap: float | None = None         # None: gemma2 30, gemma3 none

    def gemma_pattern(self) -> int:
        return self.sliding_window_pattern or (2 if self.arch == "gemma2" else 6)

    def gemma_qpas(self) -> int:
        return self.query_pre_attn_scalar or self.head_dim

    def softcaps(self) -> tuple:
        """(attention, final) soft-caps; 0 = none."""
        if self.arch == "gemma2":
            return (50.0 if self.attn_softcap is None else self.attn_softcap,
                    30.0 if self.final_softcap is None else self.final_softcap)
        return (self.attn_softcap or 0.0, self.final_softcap or 0.0)

    def layer_types(self) -> list:
        """transformers' rule: layer l is local unless (l + 1) % pattern == 0."""
        n = self.gemma_pattern()
        return ["sliding_attention" if (i + 1) % n else "full_attention" for i in range(self.layers)]

    def sparse(self, layer: int) -> bool:
        """transformers' rule: experts where (l + 1) % step == 0 and l not in mlp_only_layers."""
        return (self.experts > 0 and (layer + 1) % self.decoder_sparse_step == 0
                and layer not in self.mlp_only_layers)

    def expert_width(self) -> int:
        return self.intermediate if self.arch == "mixtral" else self.moe_intermediate

    def validate(self):
        if self.arch not in ARCHS:
            raise ValueError(f"unknown --arch {self.arch}")
        for k in ("hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim", "vocab"):
            if getattr(self, k) <= 0:
                raise ValueError(f"{k} must be positive")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} not a multiple of kv_heads {self.kv_heads}")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even")
        if self.sliding_window and self.arch not in ("mistral", *GEMMA_ARCHS):
            raise ValueError("--sliding-window is only supported for --arch mistral / gemma2 / "
                             "gemma3")
        if self.arch in GEMMA_ARCHS and not self.sliding_window:
            raise ValueError("gemma2 / gemma3 need --sliding-window (the local layers' window)")
        if (self.arch in MOE_ARCHS) != (self.experts > 0):
            raise ValueError("--experts > 0 goes with --arch mixtral / qwen2moe / qwen3moe")
        if self.experts and not 1 <= self.experts_per_tok <= self.experts:
            raise ValueError("--experts-per-tok must be in [1, --experts]")
        if self.experts and self.expert_width() <= 0:
            raise ValueError("--moe-intermediate must be positive")
        if self.shared_intermediate and self.arch != "qwen2moe":
            raise ValueError("--shared-intermediate is only for --arch qwen2moe")
        if self.arch == "mixtral" and (self.decoder_sparse_step != 1 or self.mlp_only_layers):
            raise ValueError("mixtral layers are all sparse")
        if self.qkv_bias and self.arch not in ("qwen2", "qwen2moe"):
            raise ValueError("--qkv-bias is only supported for --arch qwen2 (HF llama's "
                             "attention_bias would also add an o_proj bias)")


@dataclass
class TensorSpec:
    hf_name: str
    gguf_name: str
    shape: tuple
    kind: str              # embed | norm | matrix | bias | head
    permute_heads: int = 0  # >0: llama Q/K, permute rows for GGUF with this many heads
    # experts > 0: shape is (experts, rows, cols), one HF tensor per expert (hf_name holds
    # "{}" for the expert id) and one stacked GGUF tensor.
    experts: int = 0
    gguf_shape: tuple | None = None  # when the GGUF tensor's shape differs (a [1, n] as [n])
    # Added to the values in GGUF only: Gemma's norms are applied as (1 + w); HF stores w and
    # llama.cpp's converter stores 1 + w.
    gguf_offset: float = 0.0


def moe_tensor_specs(m: ModelShape, p: str, g: str) -> list[TensorSpec]:
    """A sparse layer: router, experts (HF: one tensor each; GGUF: stacked), shared expert."""
    H, E, W = m.hidden, m.experts, m.expert_width()
    if m.arch == "mixtral":
        router, ex = p + "block_sparse_moe.gate.weight", p + "block_sparse_moe.experts.{}."
        names = ("w1", "w3", "w2")
    else:
        router, ex = p + "mlp.gate.weight", p + "mlp.experts.{}."
        names = ("gate_proj", "up_proj", "down_proj")
    specs = [TensorSpec(router, g + "ffn_gate_inp.weight", (E, H), "router")]
    for hf, gg, shape in zip(names, ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"),
                             ((E, W, H), (E, W, H), (E, H, W))):
        specs.append(TensorSpec(ex + hf + ".weight", g + gg + ".weight", shape, "matrix",
                                experts=E))
    if m.shared_intermediate:
        S = m.shared_intermediate
        sp = p + "mlp.shared_expert."
        specs += [TensorSpec(sp + "gate_proj.weight", g + "ffn_gate_shexp.weight", (S, H), "matrix"),
                  TensorSpec(sp + "up_proj.weight", g + "ffn_up_shexp.weight", (S, H), "matrix"),
                  TensorSpec(sp + "down_proj.weight", g + "ffn_down_shexp.weight", (H, S), "matrix"),
                  TensorSpec(p + "mlp.shared_expert_gate.weight", g + "ffn_gate_inp_shexp.weight",
                             (1, H), "matrix", gguf_shape=(H,))]
    return specs


def hf_tensors(specs: list[TensorSpec]) -> list[TensorSpec]:
    """The safetensors entries: an expert spec becomes one [rows, cols] tensor per expert."""
    out = []
    for s in specs:
        if s.experts:
            out += [TensorSpec(s.hf_name.format(e), "", s.shape[1:], s.kind)
                    for e in range(s.experts)]
        else:
            out.append(s)
    return out


def gemma_tensor_specs(m: ModelShape) -> list[TensorSpec]:
    """Gemma 2 / 3: four norms per layer (HF post_attention_layernorm is the attention output's
    norm), q/k norms in Gemma 3, no Q/K permutation in GGUF, norms as `gnorm` (w around 0)."""
    H, I, D = m.hidden, m.intermediate, m.head_dim
    q, kv = m.heads * D, m.kv_heads * D

    def norm(hf, gg, n=H):
        return TensorSpec(hf, gg, (n,), "gnorm", gguf_offset=1.0)

    specs = [TensorSpec("model.embed_tokens.weight", "token_embd.weight", (m.vocab, H), "embed")]
    for i in range(m.layers):
        p, g = f"model.layers.{i}.", f"blk.{i}."
        specs.append(norm(p + "input_layernorm.weight", g + "attn_norm.weight"))
        for name, gname, rows in (("q_proj", "attn_q", q), ("k_proj", "attn_k", kv),
                                  ("v_proj", "attn_v", kv)):
            specs.append(TensorSpec(p + f"self_attn.{name}.weight", g + f"{gname}.weight",
                                    (rows, H), "matrix"))
        if m.arch == "gemma3":
            specs.append(norm(p + "self_attn.q_norm.weight", g + "attn_q_norm.weight", D))
            specs.append(norm(p + "self_attn.k_norm.weight", g + "attn_k_norm.weight", D))
        specs.append(TensorSpec(p + "self_attn.o_proj.weight", g + "attn_output.weight", (H, q),
                                "matrix"))
        specs.append(norm(p + "post_attention_layernorm.weight", g + "post_attention_norm.weight"))
        specs.append(norm(p + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight"))
        specs.append(TensorSpec(p + "mlp.gate_proj.weight", g + "ffn_gate.weight", (I, H), "matrix"))
        specs.append(TensorSpec(p + "mlp.up_proj.weight", g + "ffn_up.weight", (I, H), "matrix"))
        specs.append(TensorSpec(p + "mlp.down_proj.weight", g + "ffn_down.weight", (H, I), "matrix"))
        specs.append(norm(p + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight"))
    specs.append(norm("model.norm.weight", "output_norm.weight"))
    if not m.tied:
        specs.append(TensorSpec("lm_head.weight", "output.weight", (m.vocab, H), "head"))
    return specs


def tensor_specs(m: ModelShape) -> list[TensorSpec]:
    if m.arch in GEMMA_ARCHS:
        return gemma_tensor_specs(m)
    H, I, D = m.hidden, m.intermediate, m.head_dim
    q, kv = m.heads * D, m.kv_heads * D
    perm = GGUF_ARCH[m.arch] == "llama"  # llama.cpp "llama" arch wants adjacent-pair Q/K rows
    specs = [TensorSpec("model.embed_tokens.weight", "token_embd.weight", (m.vocab, H), "embed")]
    for i in range(m.layers):
        p, g = f"model.layers.{i}.", f"blk.{i}."
        specs.append(TensorSpec(p + "input_layernorm.weight", g + "attn_norm.weight", (H,), "norm"))
        for name, gname, rows, heads in (("q_proj", "attn_q", q, m.heads),
                                         ("k_proj", "attn_k", kv, m.kv_heads),
                                         ("v_proj", "attn_v", kv, 0)):
            ph = heads if perm else 0
            specs.append(TensorSpec(p + f"self_attn.{name}.weight", g + f"{gname}.weight",
                                    (rows, H), "matrix", ph))
            if m.qkv_bias:
                specs.append(TensorSpec(p + f"self_attn.{name}.bias", g + f"{gname}.bias",
                                        (rows,), "bias", ph))
            if m.arch in ("qwen3", "qwen3moe") and name != "v_proj":  # per-head q/k RMSNorm
                specs.append(TensorSpec(p + f"self_attn.{name[0]}_norm.weight",
                                        g + f"{gname}_norm.weight", (D,), "norm"))
        specs.append(TensorSpec(p + "self_attn.o_proj.weight", g + "attn_output.weight", (H, q),
                                "matrix"))
        specs.append(TensorSpec(p + "post_attention_layernorm.weight", g + "ffn_norm.weight", (H,),
                                "norm"))
        if m.sparse(i):
            specs.extend(moe_tensor_specs(m, p, g))
            continue
        specs.append(TensorSpec(p + "mlp.gate_proj.weight", g + "ffn_gate.weight", (I, H), "matrix"))
        specs.append(TensorSpec(p + "mlp.up_proj.weight", g + "ffn_up.weight", (I, H), "matrix"))
        specs.append(TensorSpec(p + "mlp.down_proj.weight", g + "ffn_down.weight", (H, I), "matrix"))
    specs.append(TensorSpec("model.norm.weight", "output_norm.weight", (H,), "norm"))
    if not m.tied:
        specs.append(TensorSpec("lm_head.weight", "output.weight", (m.vocab, H), "head"))
    return specs


# ---------------------------------------------------------------------------------------------
# Weight generation: float32, seeded per tensor, in row chunks.

def round_to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 -> values representable in `dtype`, still float32 (the model's true weights)."""
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    return gw.bf16_bits_to_f32(gw.f32_to_bf16_bits(x))


def hf_bytes(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f32":
        return np.ascontiguousarray(x, dtype="<f4")
    if dtype == "f16":
        return x.astype("<f2")
    return gw.f32_to_bf16_bits(x)


def rows_per_chunk(spec: TensorSpec, head_dim: int) -> int:
    if spec.experts:
        return spec.shape[1]  # one expert per chunk (its HF tensor)
    if len(spec.shape) == 1:
        return spec.shape[0]
    cols = spec.shape[1]
    return head_dim * max(1, CHUNK_ELEMENTS // (cols * head_dim))


def generate_chunks(spec: TensorSpec, m: ModelShape, seed: int, embed_std: float):
    """Yields (row0, float32 array) covering the tensor in order."""
    rng = np.random.default_rng([seed, zlib.crc32(spec.hf_name.encode())])
    rows = spec.shape[0] * spec.shape[1] if spec.experts else spec.shape[0]
    cols = spec.shape[-1] if len(spec.shape) >= 2 else None
    step = rows_per_chunk(spec, m.head_dim)
    for r0, r1 in gw.iter_row_chunks(rows, step):
        shape = (r1 - r0, cols) if cols else (r1 - r0,)
        x = rng.standard_normal(shape, dtype=np.float32)
        if spec.kind == "norm":
            x *= np.float32(0.1)
            x += np.float32(1.0)
        elif spec.kind == "gnorm":  # Gemma stores w of (1 + w): around 0
            x *= np.float32(0.1)
        elif spec.kind == "bias":
            x *= np.float32(0.1)
        elif spec.kind == "embed":
            x *= np.float32(embed_std)
        elif spec.kind == "router":  # logits of std 4: the top-k choice has clear margins
            x *= np.float32(4.0 / math.sqrt(cols))
        else:  # matrix, head: unit-variance outputs for unit-variance inputs
            x *= np.float32(1.0 / math.sqrt(cols))
        yield r0, x


def random_blocks(spec: TensorSpec, ggml_type: int, seed: int) -> np.ndarray:
    """The tensor as random Q4_0 / Q8_0 blocks (uint8 [blocks][block bytes]): uniform codes
    (Q4_0 nibbles 0..15 -> -8..7, std 4.61; Q8_0 int8 -127..127, std 73.6) and one fp16 scale
    that gives weights of std 1/sqrt(in), as generate_chunks' normal values have."""
    rng = np.random.default_rng([seed, zlib.crc32(spec.hf_name.encode()), 7])
    cols = spec.shape[-1]
    n = int(np.prod(spec.shape)) // 32
    code_std, size = (4.61, 18) if ggml_type == gw.GGML_Q4_0 else (73.6, 34)
    blocks = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    if ggml_type == gw.GGML_Q8_0:
        blocks[:, 2:][blocks[:, 2:] == 128] = 129  # int8 -128 is outside Q8_0's range
    scale = np.full(n, 1.0 / (code_std * math.sqrt(cols)), dtype="<f2")
    blocks[:, 0:2] = scale.view(np.uint8).reshape(-1, 2)
    return blocks


# config.json keys of the shape flags --weights-from fills in.
HF_SHAPE_KEYS = {"hidden": "hidden_size", "intermediate": "intermediate_size",
                 "layers": "num_hidden_layers", "heads": "num_attention_heads",
                 "kv_heads": "num_key_value_heads", "head_dim": "head_dim", "vocab": "vocab_size",
                 "tied": "tie_word_embeddings", "rope_theta": "rope_theta",
                 "max_pos": "max_position_embeddings", "rms_eps": "rms_norm_eps"}


def shape_from_hf_config(args) -> None:
    """Sets the shape flags of args left unset from --weights-from's config.json."""
    with open(os.path.join(args.weights_from, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llama" or cfg.get("quantization_config"):
        raise SystemExit(f"--weights-from {args.weights_from}: only unquantized llama models")
    if args.arch is None:
        args.arch = "llama"
    for flag, key in HF_SHAPE_KEYS.items():
        if getattr(args, flag) is None and cfg.get(key) is not None:
            setattr(args, flag, cfg[key])
    if args.rope_scaling is None and cfg.get("rope_scaling") is None:
        args.rope_scaling = "none"


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def pad_weights(args, tensors: dict) -> dict:
    """--pad-to P: --weights-from's tensors padded with zeros into a model computing the same
    function (up to float rounding) whose hidden size, intermediate size and query width
    (heads * head_dim) are multiples of P, so every matrix row length is; updates the shape flags.

    - hidden h -> H: zero embedding (and lm_head) columns, zero columns in q/k/v/gate/up and
      zero rows in o/down, so the residual stream's extra entries stay exactly 0.
    - RMSNorm over H entries of which H - h are 0: mean(x^2) is c = h/H times the real one, so
      every norm weight becomes w * sqrt(c) (0 in the padding) and eps becomes eps * c:
      x / sqrt(c (mean + eps)) * w sqrt(c) = x / sqrt(mean + eps) * w.
    - intermediate -> multiple of P: zero gate/up rows and down columns (silu(0) * 0 = 0).
    - heads n -> N (N % kv_heads == 0, N * head_dim % P == 0, head_dim unchanged, so RoPE and the
      1/sqrt(head_dim) scale are too): query head i uses KV head i // (N / kv) in HF and
      llama.cpp, so original head j (KV head j // g, g = n / kv) moves to (j // g) * (N / kv) + j % g
      and keeps its KV head; the added heads have zero q rows (uniform attention, finite) and
      zero o_proj columns, so they add nothing.
    """
    P = args.pad_to
    if P <= 0:
        raise SystemExit("--pad-to must be positive")
    for key in ("model.layers.0.self_attn.q_proj.bias",):
        if key in tensors:
            raise SystemExit("--pad-to: models with q/k/v biases are not supported")
    h, inter, n, kv = args.hidden, args.intermediate, args.heads, args.kv_heads
    d = args.head_dim or h // n
    H, I = _round_up(h, P), _round_up(inter, P)
    N = n
    while N % kv or (N * d) % P:
        N += 1
    g, G = n // kv, N // kv
    head_at = [(j // g) * G + j % g for j in range(n)]
    c = h / H
    scale = math.sqrt(c)

    def get(name, shape):
        if name not in tensors:
            raise SystemExit(f"--weights-from: no tensor {name}")
        dtype, x = tensors[name]
        if dtype not in ("F32", "F16", "BF16") or tuple(x.shape) != tuple(shape):
            raise SystemExit(f"--weights-from: {name} is {dtype} {list(x.shape)}, "
                             f"expected a float tensor {list(shape)}")
        return x.astype(np.float32)

    def pad2(x, rows, cols):
        y = np.zeros((rows, cols), dtype=np.float32)
        y[:x.shape[0], :x.shape[1]] = x
        return y

    def norm(x):
        y = np.zeros(H, dtype=np.float32)
        y[:h] = (x.astype(np.float64) * scale).astype(np.float32)
        return y

    out = {}
    for name, (dtype, x) in tensors.items():
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            out[name] = ("F32", norm(get(name, (h,))))
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            x = get(name, (args.vocab, h))
            out[name] = ("F32", pad2(x, x.shape[0], H))
        elif name.endswith("self_attn.q_proj.weight"):
            x = get(name, (n * d, h))
            y = np.zeros((N * d, H), dtype=np.float32)
            for j, t in enumerate(head_at):
                y[t * d:(t + 1) * d, :h] = x[j * d:(j + 1) * d]
            out[name] = ("F32", y)
        elif name.endswith("self_attn.o_proj.weight"):
            x = get(name, (h, n * d))
            y = np.zeros((H, N * d), dtype=np.float32)
            for j, t in enumerate(head_at):
                y[:h, t * d:(t + 1) * d] = x[:, j * d:(j + 1) * d]
            out[name] = ("F32", y)
        elif name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
            out[name] = ("F32", pad2(get(name, (kv * d, h)), kv * d, H))
        elif name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")):
            out[name] = ("F32", pad2(get(name, (inter, h)), I, H))
        elif name.endswith("mlp.down_proj.weight"):
            out[name] = ("F32", pad2(get(name, (h, inter)), H, I))
        else:
            raise SystemExit(f"--pad-to: no rule for tensor {name}")
    args.hidden, args.intermediate, args.heads, args.head_dim = H, I, N, d
    args.rms_eps = args.rms_eps * c
    return out


def file_chunks(spec: TensorSpec, m: ModelShape, tensors: dict):
    """Yields (row0, float32 array) of the tensor spec.hf_name of --weights-from, in order."""
    if spec.hf_name not in tensors:
        raise SystemExit(f"--weights-from: no tensor {spec.hf_name}")
    dtype, x = tensors[spec.hf_name]
    if dtype not in ("F32", "F16", "BF16") or tuple(x.shape) != tuple(spec.shape):
        raise SystemExit(f"--weights-from: {spec.hf_name} is {dtype} {list(x.shape)}, "
                         f"expected a float tensor {list(spec.shape)}")
    x = x.astype(np.float32)
    if len(spec.shape) == 1:
        yield 0, x
        return
    for r0, r1 in gw.iter_row_chunks(spec.shape[0], rows_per_chunk(spec, m.head_dim)):
        yield r0, x[r0:r1]


def llama3_rope_factors(m: ModelShape) -> np.ndarray:
    """rope_freqs.weight as llama.cpp's converter writes it: theta_i is divided by factor_i."""
    rs = m.rope_scaling
    d = m.head_dim
    freqs = 1.0 / (m.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    low_wavelen, high_wavelen = rs.orig / rs.low, rs.orig / rs.high
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(rs.factor)
        else:
            smooth = (rs.orig / wavelen - rs.low) / (rs.high - rs.low)
            out.append(1.0 / ((1 - smooth) / rs.factor + smooth))
    return np.asarray(out, dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# safetensors (optionally sharded) streaming writer.

class SafetensorsWriter:
    """Plans files/offsets up front from the specs, then accepts tensor bytes in spec order."""

    def __init__(self, out_dir: str, specs: list[TensorSpec], dtype: str, shard_size: int | None):
        st_dtype, _, itemsize = HF_DTYPES[dtype]
        sizes = [int(np.prod(s.shape)) * itemsize for s in specs]
        groups, cur, cur_size = [], [], 0
        for s, n in zip(specs, sizes):
            if shard_size and cur and cur_size + n > shard_size:
                groups.append(cur)
                cur, cur_size = [], 0
            cur.append((s, n))
            cur_size += n
        groups.append(cur)
        n_files = len(groups)
        self.files = []  # (path, header bytes, [(name, nbytes)])
        self.weight_map = {}
        for k, group in enumerate(groups):
            fname = ("model.safetensors" if n_files == 1
                     else f"model-{k + 1:05d}-of-{n_files:05d}.safetensors")
            header = {"__metadata__": {"format": "pt"}}
            off = 0
            for s, n in group:
                header[s.hf_name] = {"dtype": st_dtype, "shape": list(s.shape),
                                     "data_offsets": [off, off + n]}
                self.weight_map[s.hf_name] = fname
                off += n  # every size is a multiple of the itemsize; data stays aligned
            hb = json.dumps(header, separators=(",", ":")).encode()
            hb += b" " * (-(8 + len(hb)) % 8)  # data section starts 8-byte aligned
            self.files.append((os.path.join(out_dir, fname), hb, [(s.hf_name, n) for s, n in group]))
        self.total_size = sum(sizes)
        self.out_dir = out_dir
        self._file_idx = -1
        self._f = None
        self._queue = []  # remaining (name, nbytes) in the open file
        self._written = 0

    def write(self, name: str, data: np.ndarray):
        if self._written == 0:
            if not self._queue:
                self._open_next()
            if self._queue[0][0] != name:
                raise RuntimeError(f"safetensors: expected {self._queue[0][0]}, got {name}")
        data = np.ascontiguousarray(data)
        data.tofile(self._f)
        self._written += data.nbytes
        if self._written == self._queue[0][1]:
            self._queue.pop(0)
            self._written = 0
        elif self._written > self._queue[0][1]:
            raise RuntimeError(f"safetensors: too much data for {name}")

    def _open_next(self):
        if self._f:
            self._f.close()
        self._file_idx += 1
        path, hb, names = self.files[self._file_idx]
        self._f = open(path, "wb")
        self._f.write(len(hb).to_bytes(8, "little") + hb)
        self._queue = list(names)

    def close(self):
        if self._queue or self._file_idx != len(self.files) - 1:
            raise RuntimeError("safetensors: not every tensor was written")
        self._f.close()
        if len(self.files) > 1:
            index = {"metadata": {"total_size": self.total_size},
                     "weight_map": dict(sorted(self.weight_map.items()))}
            with open(os.path.join(self.out_dir, "model.safetensors.index.json"), "w") as f:
                json.dump(index, f, indent=2)
                f.write("\n")


# ---------------------------------------------------------------------------------------------
# Tokenizers.

def shared_dir_default() -> str:
    return os.environ.get("PAGELLM_SHARED_DIR") or os.path.join(os.path.dirname(REPO_ROOT), "shared")


def resolve_tokenizer(name: str | None) -> str | None:
    if name is None or name == "none":
        return None
    name = TOKENIZER_ALIASES.get(name.lower(), name)
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; one of: none, " + ", ".join(TOKENIZERS))
    return name


def load_tokenizer(name: str, shared: str) -> gw.TokenizerInfo:
    t = TOKENIZERS[name]
    base = os.path.join(shared, t["dir"])
    if not os.path.isdir(base):
        raise SystemExit(f"tokenizer {name}: {base} not found (set --shared-dir or "
                         "PAGELLM_SHARED_DIR, or use --tokenizer none)")
    cfg_path = os.path.join(base, "tokenizer_config.json")
    if t["kind"] == "spm":
        cfg = None
        if os.path.exists(cfg_path):
            with open(cfg_path, encoding="utf-8") as f:
                cfg = json.load(f)
        return gw.load_sentencepiece(os.path.join(base, "tokenizer.model"), cfg)
    return gw.load_hf_tokenizer(os.path.join(base, "tokenizer.json"), cfg_path, t["pre"],
                                t["add_bos"])


def copy_tokenizer(name: str, shared: str, out_dir: str, max_pos: int):
    t = TOKENIZERS[name]
    base = os.path.join(shared, t["dir"])
    for fname in t["files"]:
        shutil.copyfile(os.path.join(base, fname), os.path.join(out_dir, fname))
    if "tokenizer_config.json" not in t["files"]:  # bare SentencePiece model: describe it
        cfg = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
               "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "legacy": True,
               "model_max_length": max_pos, "clean_up_tokenization_spaces": False}
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")


# ---------------------------------------------------------------------------------------------
# Config files.

def hf_config(m: ModelShape, dtype: str, bos: int | None, eos: int | None) -> dict:
    hf_arch, model_type = ARCHS[m.arch]
    c = {
        "architectures": [hf_arch], "model_type": model_type,
        "hidden_size": m.hidden, "intermediate_size": m.intermediate,
        "num_hidden_layers": m.layers, "num_attention_heads": m.heads,
        "num_key_value_heads": m.kv_heads, "head_dim": m.head_dim, "vocab_size": m.vocab,
        "max_position_embeddings": m.max_pos, "rms_norm_eps": m.rms_eps,
        "rope_theta": m.rope_theta, "rope_scaling": m.rope_scaling.hf(), "hidden_act": "silu",
        "initializer_range": 0.02, "tie_word_embeddings": m.tied,
        "bos_token_id": bos, "eos_token_id": eos, "torch_dtype": HF_DTYPES[dtype][1],
        "use_cache": True,
    }
    if m.arch == "llama":
        c.update(attention_bias=False, mlp_bias=False, attention_dropout=0.0)
    elif m.arch == "mistral":
        c.update(sliding_window=m.sliding_window, attention_dropout=0.0)
    elif m.arch == "mixtral":
        c.update(sliding_window=None, attention_dropout=0.0, num_local_experts=m.experts,
                 num_experts_per_tok=m.experts_per_tok, router_aux_loss_coef=0.02)
    elif m.arch in ("qwen2", "qwen2moe"):  # q/k/v biases are implicit in the architecture
        c.update(use_sliding_window=False, sliding_window=m.max_pos, max_window_layers=m.layers,
                 attention_dropout=0.0)
    elif m.arch in GEMMA_ARCHS:
        attn_cap, final_cap = m.softcaps()
        c.update(hidden_activation="gelu_pytorch_tanh", sliding_window=m.sliding_window,
                 query_pre_attn_scalar=m.gemma_qpas(), attention_bias=False,
                 attention_dropout=0.0, attn_logit_softcapping=attn_cap or None,
                 final_logit_softcapping=final_cap or None)
        if m.arch == "gemma2":  # older configs: both activation keys, alternation implicit
            c["hidden_act"] = "gelu_pytorch_tanh"
            if m.sliding_window_pattern not in (None, 2):
                c["layer_types"] = m.layer_types()
        else:  # both the newer layer_types and the older sliding_window_pattern
            del c["hidden_act"]
            c.update(rope_local_base_freq=m.rope_local_theta,
                     sliding_window_pattern=m.gemma_pattern(), layer_types=m.layer_types())
    else:  # qwen3, qwen3moe: q/k norms are implicit in the architecture
        c.update(attention_bias=False, use_sliding_window=False, sliding_window=None,
                 max_window_layers=m.layers, attention_dropout=0.0)
    if m.arch in ("qwen2moe", "qwen3moe"):
        c.update(num_experts=m.experts, num_experts_per_tok=m.experts_per_tok,
                 moe_intermediate_size=m.moe_intermediate, norm_topk_prob=m.norm_topk_prob,
                 decoder_sparse_step=m.decoder_sparse_step,
                 mlp_only_layers=list(m.mlp_only_layers))
        if m.arch == "qwen2moe":
            c["shared_expert_intermediate_size"] = m.shared_intermediate
    return c


def write_json(path: str, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def gguf_metadata(w: gw.GgufWriter, m: ModelShape, name: str, ftype: int,
                  tok: gw.TokenizerInfo | None):
    arch = GGUF_ARCH[m.arch]
    w.add_string("general.architecture", arch)
    w.add_string("general.name", name)
    w.add_u32("general.alignment", gw.DEFAULT_ALIGNMENT)
    w.add_u32("general.file_type", gw.LLAMA_FTYPE[ftype])
    if ftype in (gw.GGML_Q8_0, gw.GGML_Q4_0):
        w.add_u32("general.quantization_version", 2)
    w.add_u32(f"{arch}.vocab_size", m.vocab)
    w.add_u32(f"{arch}.context_length", m.max_pos)
    w.add_u32(f"{arch}.embedding_length", m.hidden)
    w.add_u32(f"{arch}.block_count", m.layers)
    w.add_u32(f"{arch}.feed_forward_length", m.intermediate)
    w.add_u32(f"{arch}.attention.head_count", m.heads)
    w.add_u32(f"{arch}.attention.head_count_kv", m.kv_heads)
    w.add_u32(f"{arch}.attention.key_length", m.head_dim)
    w.add_u32(f"{arch}.attention.value_length", m.head_dim)
    w.add_f32(f"{arch}.attention.layer_norm_rms_epsilon", m.rms_eps)
    w.add_f32(f"{arch}.rope.freq_base", m.rope_theta)
    w.add_u32(f"{arch}.rope.dimension_count", m.head_dim)
    if m.rope_scaling.kind == "linear":
        w.add_string(f"{arch}.rope.scaling.type", "linear")
        w.add_f32(f"{arch}.rope.scaling.factor", m.rope_scaling.factor)
    if m.sliding_window:
        w.add_u32(f"{arch}.attention.sliding_window", m.sliding_window)
    if m.arch == "gemma2":
        attn_cap, final_cap = m.softcaps()
        w.add_f32(f"{arch}.attn_logit_softcapping", attn_cap)
        w.add_f32(f"{arch}.final_logit_softcapping", final_cap)
    if m.experts:
        w.add_u32(f"{arch}.expert_count", m.experts)
        w.add_u32(f"{arch}.expert_used_count", m.experts_per_tok)
        if m.arch != "mixtral":
            w.add_u32(f"{arch}.expert_feed_forward_length", m.moe_intermediate)
        if m.shared_intermediate:
            w.add_u32(f"{arch}.expert_shared_feed_forward_length", m.shared_intermediate)
        w.add_bool(f"{arch}.expert_weights_norm", m.norm_topk_prob)
    if tok is not None:
        gw.add_tokenizer_metadata(w, tok, m.vocab)


def gguf_tensor_type(spec: TensorSpec, requested: int) -> int:
    if len(spec.shape) == 1 or spec.gguf_shape is not None or spec.kind == "router":
        return gw.GGML_F32  # norms, biases and routers stay F32, as in llama.cpp
    per_block = gw.GGML_BLOCK[requested][0]
    if spec.shape[1] % per_block:
        return gw.GGML_F16  # llama.cpp's fallback for rows that do not fill whole blocks
    return requested


# ---------------------------------------------------------------------------------------------
# Driver.

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), help="model shape (flags override)")
    p.add_argument("--out", help="HF output directory (outside the repo, or under build/)")
    p.add_argument("--dtype", choices=sorted(HF_DTYPES), default="f32",
                   help="dtype of the safetensors weights; also the precision of the model "
                        "the GGUF is converted from (default f32)")
    p.add_argument("--shard-size", type=int, help="max bytes per safetensors shard")
    p.add_argument("--gguf", help="also (or only) write this GGUF file")
    p.add_argument("--gguf-type", choices=sorted(gw.GGML_TYPE_NAMES), default="f32")
    p.add_argument("--tokenizer", help="none | " + " | ".join(TOKENIZERS) + " (default: preset's)")
    p.add_argument("--shared-dir", default=None, help="test assets (default $PAGELLM_SHARED_DIR "
                   "or ../shared next to the repo)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights-from", help="take the weights of this HF directory (dense llama, "
                   "float safetensors) instead of random ones; its config.json gives the shape "
                   "flags not set")
    p.add_argument("--pad-to", type=int, help="with --weights-from: zero-pad hidden, intermediate "
                   "and heads * head_dim to multiples of this (256 for K-quants), keeping the "
                   "model's function (norm weights * sqrt(h/H), eps * h/H; added query heads "
                   "with zero weights)")
    p.add_argument("--name", help="general.name in the GGUF (default: preset or 'random')")
    p.add_argument("--arch", choices=sorted(ARCHS))
    p.add_argument("--hidden", type=int)
    p.add_argument("--intermediate", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int)
    p.add_argument("--head-dim", type=int, help="default hidden / heads")
    p.add_argument("--vocab", type=int, help="default: preset's, else the tokenizer's model vocab")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tied", dest="tied", action="store_true", default=None)
    g.add_argument("--untied", dest="tied", action="store_false")
    p.add_argument("--qkv-bias", action="store_true", default=None, help="(qwen2 always has it)")
    p.add_argument("--rope-theta", type=float)
    p.add_argument("--rope-scaling", help="none | linear:F | llama3:F[:LOW:HIGH:ORIG] "
                   "(llama3 defaults LOW 1, HIGH 4, ORIG 8192)")
    p.add_argument("--max-pos", type=int)
    p.add_argument("--rms-eps", type=float)
    p.add_argument("--sliding-window", type=int,
                   help="mistral / gemma2 / gemma3 (local layers) sliding window (tokens)")
    p.add_argument("--query-pre-attn-scalar", type=int,
                   help="gemma2/gemma3 attention scale^-2 (default head_dim)")
    p.add_argument("--sliding-window-pattern", type=int,
                   help="gemma2/gemma3: every Nth layer is global (default 2 / 6)")
    p.add_argument("--rope-local-theta", type=float, help="gemma3 local layers' RoPE base (1e4)")
    p.add_argument("--attn-softcap", type=float, help="attention logit soft-cap, 0 = none "
                   "(default gemma2 50, gemma3 none)")
    p.add_argument("--final-softcap", type=float, help="final logit soft-cap, 0 = none "
                   "(default gemma2 30, gemma3 none)")
    p.add_argument("--experts", type=int, help="mixture of experts: experts per sparse layer")
    p.add_argument("--experts-per-tok", type=int, help="experts a token uses (top-k)")
    p.add_argument("--moe-intermediate", type=int, help="qwen2moe/qwen3moe expert width")
    p.add_argument("--shared-intermediate", type=int, help="qwen2moe shared expert width")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--norm-topk-prob", dest="norm_topk_prob", action="store_true", default=None,
                   help="renormalise the top-k routing weights (mixtral always does)")
    g.add_argument("--no-norm-topk-prob", dest="norm_topk_prob", action="store_false")
    p.add_argument("--decoder-sparse-step", type=int, help="qwen*moe: every Nth layer is sparse")
    p.add_argument("--mlp-only-layers", help="qwen*moe: comma-separated dense layer indices")
    p.add_argument("--embed-std", type=float,
                   help="embedding std (default max(0.02, 1/sqrt(hidden)))")
    p.add_argument("--allow-in-repo", action="store_true", help="permit outputs inside the repo")
    p.add_argument("--random-blocks", action="store_true",
                   help="GGUF q4_0/q8_0 only, no --out: write the decoder and expert matrices as "
                   "random quantized blocks (uniform codes, scales giving the same 1/sqrt(in) "
                   "spread) instead of quantizing normal values; ~50x faster, for speed "
                   "benchmarks of large shapes (Qwen3-30B-A3B)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if not args.out and not args.gguf:
        p.error("nothing to write: give --out and/or --gguf")
    return args


def build_shape(args) -> tuple[ModelShape, str | None]:
    """Preset (default: the fields of ModelShape) overridden by explicit flags."""
    base = dict(PRESETS[args.preset]) if args.preset else {}
    preset_tok = base.pop("tokenizer", None)
    tok_name = resolve_tokenizer(args.tokenizer if args.tokenizer is not None else preset_tok)
    for k in ("arch", "hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim",
              "vocab", "tied", "qkv_bias", "rope_theta", "max_pos", "rms_eps", "sliding_window",
              "experts", "experts_per_tok", "moe_intermediate", "shared_intermediate",
              "norm_topk_prob", "decoder_sparse_step", "query_pre_attn_scalar",
              "sliding_window_pattern", "rope_local_theta", "attn_softcap", "final_softcap"):
        v = getattr(args, k)
        if v is not None:
            base[k] = v
    if args.rope_scaling is not None:
        base["rope_scaling"] = args.rope_scaling
    if args.mlp_only_layers is not None:
        base["mlp_only_layers"] = tuple(int(v) for v in args.mlp_only_layers.split(",") if v)
    defaults = ModelShape()
    if args.head_dim is None and (args.hidden is not None or args.heads is not None
                                  or "head_dim" not in base):
        base["head_dim"] = (base.get("hidden", defaults.hidden)
                            // base.get("heads", defaults.heads))
    if args.kv_heads is None and "kv_heads" not in base:
        base["kv_heads"] = base.get("heads", defaults.heads)
    if "vocab" not in base:
        base["vocab"] = TOKENIZERS[tok_name]["model_vocab"] if tok_name else defaults.vocab
    if "intermediate" not in base and "hidden" in base:
        base["intermediate"] = base["hidden"] * 8 // 3 // 32 * 32 or 32
    base["rope_scaling"] = RopeScaling.parse(base.get("rope_scaling"))
    if base.get("arch") in ("qwen2", "qwen2moe"):
        base["qkv_bias"] = True
    if base.get("arch") == "mixtral":
        base["norm_topk_prob"] = True
    if base.get("qkv_bias") is None:
        base.pop("qkv_bias", None)
    m = ModelShape(**base)
    m.validate()
    return m, tok_name


def check_gemma_gguf(m: ModelShape):
    """GGUF Gemma files cannot say what llama.cpp fixes (GEMMA_GGUF_FIXED): refuse shapes that
    differ, since the file would describe another model."""
    fixed = GEMMA_GGUF_FIXED[m.arch]
    qpas = m.hidden // m.heads if m.layers == fixed["layers_27b"] else m.head_dim
    if m.gemma_pattern() != fixed["pattern"]:
        raise SystemExit(f"GGUF {m.arch}: every {fixed['pattern']}th layer is global "
                         "(drop --sliding-window-pattern for --gguf)")
    if m.gemma_qpas() != qpas:
        raise SystemExit(f"GGUF {m.arch}: query_pre_attn_scalar is {qpas} for this shape")
    if fixed["local_theta"] is not None and m.rope_local_theta != fixed["local_theta"]:
        raise SystemExit(f"GGUF {m.arch}: the local RoPE base is {fixed['local_theta']}")
    if m.arch == "gemma3" and any(m.softcaps()):
        raise SystemExit("GGUF gemma3: no soft-capping")


def check_output_path(path: str, allow: bool):
    real = os.path.realpath(path)
    repo = os.path.realpath(REPO_ROOT)
    if allow or not (real == repo or real.startswith(repo + os.sep)):
        return
    rel = os.path.relpath(real, repo)
    if rel.split(os.sep)[0].startswith("build"):  # build/, build-asan/, ... are ignored by git
        return
    raise SystemExit(f"refusing to write {path} inside the repository (use /tmp or build/, "
                     "or --allow-in-repo)")


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.time()
    tensors = None
    if args.weights_from:
        import hf_quantize  # its safetensors reader
        shape_from_hf_config(args)
        tensors = hf_quantize.read_safetensors(os.path.join(args.weights_from, "model.safetensors"))
        if args.pad_to:
            tensors = pad_weights(args, tensors)
    elif args.pad_to:
        raise SystemExit("--pad-to needs --weights-from")
    m, tok_name = build_shape(args)
    if tensors is not None and m.experts:
        raise SystemExit("--weights-from reads dense models only")
    shared = args.shared_dir or shared_dir_default()
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))

    if tok_name and TOKENIZERS[tok_name].get("builtin"):
        # Trained now into a scratch directory, then read and copied like a shared one.
        shared = tempfile.mkdtemp(prefix="gen_model_tokenizer-")
        byte_bpe.write(shared, m.vocab, m.max_pos)
    tok = load_tokenizer(tok_name, shared) if tok_name else None
    if tok is not None and m.vocab < tok.size:
        raise SystemExit(f"--vocab {m.vocab} is smaller than tokenizer {tok_name} ({tok.size})")
    if tok is not None:
        bos, eos = tok.bos_id, tok.eos_id
        if bos is None:  # Qwen: no BOS token; HF configs (and llama.cpp's GGUFs, with
            bos = tok.pad_id if tok.pad_id is not None else eos  # add_bos false) name the pad
            tok.bos_id = bos
    else:
        bos, eos = (1, 2) if m.vocab > 2 else (None, None)

    specs = tensor_specs(m)
    n_params = sum(int(np.prod(s.shape)) for s in specs)
    embed_std = args.embed_std if args.embed_std is not None else max(0.02, 1 / math.sqrt(m.hidden))
    name = (args.name or args.preset
            or (os.path.basename(os.path.normpath(args.weights_from)) if args.weights_from
                else "random"))
    log(f"gen_model: {name} arch={m.arch} hidden={m.hidden} inter={m.intermediate} "
        f"layers={m.layers} heads={m.heads}/{m.kv_heads} head_dim={m.head_dim} vocab={m.vocab} "
        f"tied={m.tied} params={n_params / 1e6:.2f}M tokenizer={tok_name}"
        + (f" experts={m.experts} top{m.experts_per_tok}" if m.experts else ""))

    st = None
    if args.out:
        check_output_path(args.out, args.allow_in_repo)
        os.makedirs(args.out, exist_ok=True)
        for f in os.listdir(args.out):  # stale outputs of an earlier run (other shard counts)
            if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".index.json")):
                os.remove(os.path.join(args.out, f))
        write_json(os.path.join(args.out, "config.json"), hf_config(m, args.dtype, bos, eos))
        gen_eos = eos
        if tok is not None and tok.extra_eos_ids and eos is not None:
            gen_eos = [eos] + [e for e in tok.extra_eos_ids if e != eos]
        write_json(os.path.join(args.out, "generation_config.json"),
                   {"bos_token_id": bos, "eos_token_id": gen_eos})
        if tok_name:
            copy_tokenizer(tok_name, shared, args.out, m.max_pos)
        st = SafetensorsWriter(args.out, hf_tensors(specs), args.dtype, args.shard_size)

    gg = None
    if args.gguf:
        check_output_path(args.gguf, args.allow_in_repo)
        if os.path.dirname(args.gguf):
            os.makedirs(os.path.dirname(args.gguf), exist_ok=True)
        gtype = gw.GGML_TYPE_NAMES[args.gguf_type]
        gg = gw.GgufWriter(args.gguf)
        gguf_metadata(gg, m, name, gtype, tok)
        rope_factors = None
        if m.rope_scaling.kind == "llama3":
            rope_factors = llama3_rope_factors(m)
            gg.add_tensor("rope_freqs.weight", rope_factors.shape, gw.GGML_F32)
        if m.arch in GEMMA_ARCHS:
            check_gemma_gguf(m)
        if m.experts and (m.decoder_sparse_step != 1 or m.mlp_only_layers):
            raise SystemExit("GGUF MoE files have experts in every layer (llama.cpp); drop "
                             "--decoder-sparse-step / --mlp-only-layers for --gguf")
        for s in specs:
            gg.add_tensor(s.gguf_name, s.gguf_shape or s.shape, gguf_tensor_type(s, gtype))
        gg.write_header()
        if rope_factors is not None:
            gg.write_tensor_data("rope_freqs.weight", rope_factors)

    for s in specs:
        gtype_t = gg.tensor_type(s.gguf_name) if gg else None
        chunks = (file_chunks(s, m, tensors) if tensors is not None
                  else generate_chunks(s, m, args.seed, embed_std))
        if (args.random_blocks and gg and not st and s.kind == "matrix"
                and gtype_t in (gw.GGML_Q4_0, gw.GGML_Q8_0)):
            gg.write_tensor_data(s.gguf_name, random_blocks(s, gtype_t, args.seed))
            continue
        for r0, x in chunks:
            x = round_to_dtype(x, args.dtype)
            if st:
                name = s.hf_name.format(r0 // s.shape[1]) if s.experts else s.hf_name
                st.write(name, hf_bytes(x, args.dtype))
            if gg:
                if s.permute_heads:
                    x = gw.llama_permute_qk(x, x.shape[0] // m.head_dim)
                if s.gguf_offset:
                    x = x + np.float32(s.gguf_offset)
                gg.write_tensor_data(s.gguf_name, gw.encode_rows(x, gtype_t))
    if st:
        st.close()
    if gg:
        gg.close()
    log(f"gen_model: done in {time.time() - t0:.1f}s"
        + (f"; HF {args.dtype} -> {args.out}" if args.out else "")
        + (f"; GGUF {args.gguf_type} -> {args.gguf}" if args.gguf else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
