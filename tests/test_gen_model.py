"""Tests of tools/gen_model.py and tools/gguf_writer.py.

Generated files are read back with the readers in tests/reference_forward.py (which share no code
with tools/) and with the raw byte checks below; quantizers are compared with a scalar
re-implementation of ggml's reference routines.
"""

import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import gen_model
import gguf_writer as gw
import reference_forward as rf
from conftest import REPO_ROOT, shared_dir_or_none

TOK = "tok512" if shared_dir_or_none() else "none"


def gen(*args):
    assert gen_model.main(["--quiet", *map(str, args)]) == 0


SMALL = ["--arch", "llama", "--hidden", 64, "--intermediate", 172, "--layers", 2, "--heads", 4,
         "--kv-heads", 2, "--vocab", 520, "--tokenizer", TOK, "--seed", 7]


# ---------------------------------------------------------------------------------------------
# safetensors

def parse_safetensors_raw(path):
    """Byte-level checks of one safetensors file; returns (header, data_start)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        raw = f.read(n)
    header = json.loads(raw)
    assert (8 + n) % 8 == 0, "data section must start 8-byte aligned"
    assert header.pop("__metadata__") == {"format": "pt"}
    itemsize = {"F32": 4, "F16": 2, "BF16": 2}
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k, v) for k, v in header.items())
    pos = 0
    for b, e, name, v in spans:
        assert b == pos, f"{name}: gap or overlap at {b} (expected {pos})"
        assert e - b == int(np.prod(v["shape"])) * itemsize[v["dtype"]], name
        assert b % 8 == 0 or itemsize[v["dtype"]] < 8
        pos = e
    assert 8 + n + pos == size, "file size must equal header + data"
    return header, 8 + n


def expected_hf_names(layers, tied, bias=False):
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    if not tied:
        names.add("lm_head.weight")
    for i in range(layers):
        p = f"model.layers.{i}."
        names |= {p + s for s in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                  "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                  "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                  "mlp.down_proj.weight")}
        if bias:
            names |= {p + f"self_attn.{x}_proj.bias" for x in "qkv"}
    return names


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_safetensors_layout_and_values(tmp_path, dtype):
    out = tmp_path / dtype
    gen(*SMALL, "--dtype", dtype, "--out", out)
    header, _ = parse_safetensors_raw(out / "model.safetensors")
    assert set(header) == expected_hf_names(2, tied=True)
    st = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]
    assert all(v["dtype"] == st for v in header.values())
    assert header["model.layers.0.self_attn.q_proj.weight"]["shape"] == [64, 64]
    assert header["model.layers.0.self_attn.k_proj.weight"]["shape"] == [32, 64]
    assert header["model.layers.1.mlp.down_proj.weight"]["shape"] == [64, 172]
    assert header["model.embed_tokens.weight"]["shape"] == [520, 64]
    cfg = json.loads((out / "config.json").read_text())
    for key, want in dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                          vocab_size=520, tie_word_embeddings=True, model_type="llama",
                          architectures=["LlamaForCausalLM"], rope_scaling=None,
                          torch_dtype={"f32": "float32", "f16": "float16",
                                       "bf16": "bfloat16"}[dtype]).items():
        assert cfg[key] == want, key
    gcfg = json.loads((out / "generation_config.json").read_text())
    assert gcfg["bos_token_id"] == cfg["bos_token_id"] == 1
    if dtype != "f32":  # same seed: the f16/bf16 file holds the rounded f32 weights
        gen(*SMALL, "--dtype", "f32", "--out", tmp_path / "ref32")
        w32 = rf.read_safetensors(str(tmp_path / "ref32" / "model.safetensors"), to_float64=False)
        w = rf.read_safetensors(str(out / "model.safetensors"), to_float64=False)
        for name, x in w32.items():
            want = gen_model.round_to_dtype(x, dtype)
            np.testing.assert_array_equal(w[name], want, err_msg=name)


def test_weight_statistics(tmp_path):
    gen(*SMALL, "--out", tmp_path / "m")
    w = rf.read_safetensors(str(tmp_path / "m" / "model.safetensors"))
    norm = w["model.layers.0.input_layernorm.weight"]
    assert abs(norm.mean() - 1) < 0.05 and 0.05 < norm.std() < 0.15
    q = w["model.layers.0.self_attn.q_proj.weight"]
    assert abs(q.std() * math.sqrt(64) - 1) < 0.1  # rows scaled 1/sqrt(in)
    down = w["model.layers.0.mlp.down_proj.weight"]
    assert abs(down.std() * math.sqrt(172) - 1) < 0.1
    emb = w["model.embed_tokens.weight"]
    assert abs(emb.std() - max(0.02, 1 / 8)) < 0.01


def test_sharding(tmp_path):
    out = tmp_path / "sh"
    gen(*SMALL, "--out", out, "--shard-size", 60000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 3
    assert files == [f"model-{i + 1:05d}-of-{len(files):05d}.safetensors" for i in range(len(files))]
    assert not (out / "model.safetensors").exists()
    seen, total = set(), 0
    for fname in files:
        header, _ = parse_safetensors_raw(out / fname)
        for name, v in header.items():
            assert index["weight_map"][name] == fname
            total += v["data_offsets"][1] - v["data_offsets"][0]
        seen |= set(header)
    assert seen == set(index["weight_map"]) == expected_hf_names(2, tied=True)
    assert index["metadata"]["total_size"] == total
    # Sharded and single-file outputs hold identical weights.
    gen(*SMALL, "--out", tmp_path / "one")
    a = rf.load_hf_weights(str(out))
    b = rf.load_hf_weights(str(tmp_path / "one"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # Regenerating unsharded into the same directory removes the stale shards.
    gen(*SMALL, "--out", out)
    assert sorted(p.name for p in out.glob("model*")) == ["model.safetensors"]


def test_determinism_and_seed(tmp_path):
    gen(*SMALL, "--out", tmp_path / "a")
    gen(*SMALL, "--out", tmp_path / "b", "--gguf", tmp_path / "b.gguf")  # outputs do not matter
    a = (tmp_path / "a" / "model.safetensors").read_bytes()
    assert a == (tmp_path / "b" / "model.safetensors").read_bytes()
    gen(*[x if x != 7 else 8 for x in SMALL], "--out", tmp_path / "c")
    assert a != (tmp_path / "c" / "model.safetensors").read_bytes()


# ---------------------------------------------------------------------------------------------
# GGUF

def check_gguf_layout(path):
    g = rf.GgufReader(str(path))
    assert g.version == 3
    assert g.metadata["general.alignment"] == 32
    assert g.metadata_types["general.alignment"] == 4  # u32
    end = 0
    for name, t in sorted(g.tensors.items(), key=lambda kv: kv[1]["offset"]):
        assert t["offset"] % 32 == 0, name
        assert t["offset"] >= end, f"{name} overlaps the previous tensor"
        end = t["offset"] + g.tensor_nbytes(name)
    assert g.data_start % 32 == 0
    assert os.path.getsize(path) == g.data_start + end + (-end % 32)
    return g


@pytest.mark.parametrize("gtype", ["f32", "f16", "bf16", "q8_0", "q4_0"])
def test_gguf_layout_types_and_values(tmp_path, gtype):
    path = tmp_path / f"m-{gtype}.gguf"
    gen(*SMALL, "--untied", "--out", tmp_path / "hf", "--gguf", path, "--gguf-type", gtype)
    g = check_gguf_layout(path)
    md = g.metadata
    assert md["general.architecture"] == "llama"
    want = {"llama.context_length": 2048, "llama.embedding_length": 64, "llama.block_count": 2,
            "llama.feed_forward_length": 172, "llama.attention.head_count": 4,
            "llama.attention.head_count_kv": 2, "llama.attention.key_length": 16,
            "llama.attention.value_length": 16, "llama.rope.dimension_count": 16,
            "llama.vocab_size": 520}
    for k, v in want.items():
        assert md[k] == v, k
        assert g.metadata_types[k] == 4, k
    assert md["llama.rope.freq_base"] == 10000.0
    assert md["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    assert md["general.file_type"] == {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2}[gtype]
    assert len(g.tensors) == 1 + 2 * 9 + 2  # embd, 2 layers x 9, output_norm, output
    code = {"f32": 0, "f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2}[gtype]
    for name, t in g.tensors.items():
        if len(t["shape"]) == 1:
            assert t["type"] == 0, name  # norms stay F32
        elif t["shape"][1] % 32 and gtype.startswith("q"):
            assert t["type"] == 1, name  # rows of 172 cannot be blocked: F16 fallback
        else:
            assert t["type"] == code, name
    assert g.tensors["token_embd.weight"]["ne"] == [64, 520]
    assert g.tensors["blk.1.ffn_down.weight"]["ne"] == [172, 64]
    assert g.tensors["blk.0.attn_k.weight"]["ne"] == [64, 32]
    # Values: GGUF (un-permuted, dequantized) vs the HF file.
    hf = rf.load_hf_weights(str(tmp_path / "hf"))
    gg, _ = rf.load_gguf_weights(str(path))
    assert hf.keys() == gg.keys()
    for name, x in hf.items():
        y = gg[name]
        if gtype == "f32":
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            rel = np.abs(x - y).max() / np.abs(x).max()
            bound = {"f16": 1e-3, "bf16": 4e-3, "q8_0": 1e-2, "q4_0": 0.1}[gtype]
            assert rel <= bound, (name, rel)


def test_weights_from_an_hf_directory(tmp_path):
    """--weights-from: the GGUF of an HF directory's own weights, shape from its config.json,
    equals the GGUF written beside the same weights when they were generated."""
    gen(*SMALL, "--out", tmp_path / "hf", "--gguf", tmp_path / "direct.gguf")
    gen("--weights-from", tmp_path / "hf", "--tokenizer", TOK, "--gguf", tmp_path / "from.gguf")
    direct = check_gguf_layout(tmp_path / "direct.gguf")
    made = check_gguf_layout(tmp_path / "from.gguf")
    assert made.metadata["general.name"] == "hf"
    for k, v in direct.metadata.items():
        if k != "general.name":
            assert made.metadata[k] == v, k
    assert made.tensors.keys() == direct.tensors.keys()
    for name in direct.tensors:
        np.testing.assert_array_equal(made.tensor(name), direct.tensor(name), err_msg=name)
    with pytest.raises(SystemExit):  # a shape flag that contradicts the tensors
        gen("--weights-from", tmp_path / "hf", "--hidden", 128, "--gguf", tmp_path / "bad.gguf")


PAD_IDS = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338]


def check_padded(orig_dir, padded_dir, padded_gguf, pad=256):
    """Every matrix row length of the padded files is a multiple of pad, and both padded files
    give the original model's float64 reference logits."""
    g = check_gguf_layout(padded_gguf)
    for name, t in g.tensors.items():
        assert t["shape"][-1] % pad == 0, (name, t["shape"])
    cfg, pcfg = rf.load_config(str(orig_dir)), rf.load_config(str(padded_dir))
    assert pcfg["num_key_value_heads"] == cfg["num_key_value_heads"]
    assert pcfg["num_attention_heads"] % pcfg["num_key_value_heads"] == 0
    assert pcfg["head_dim"] == cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    ids = [t % cfg["vocab_size"] for t in PAD_IDS]
    want = rf.reference_logits(str(orig_dir), ids)
    scale = np.abs(want).max()
    for model in (str(padded_dir), str(padded_gguf)):
        got = rf.reference_logits(model, ids)
        assert np.abs(got - want).max() <= 1e-6 * scale, model
        np.testing.assert_array_equal(got.argmax(1), want.argmax(1))


@pytest.mark.parametrize("hidden,heads,kv_heads", [(64, 4, 2), (96, 4, 2), (64, 8, 4)])
def test_pad_to_keeps_the_function(tmp_path, hidden, heads, kv_heads):
    """--pad-to 256: zero padding of hidden (norm weights * sqrt(h/H), eps * h/H), intermediate
    and query heads (interleaved so each original head keeps its KV head) changes no logit."""
    shape = ["--arch", "llama", "--hidden", hidden, "--intermediate", 172, "--layers", 2,
             "--heads", heads, "--kv-heads", kv_heads, "--vocab", 520, "--tokenizer", TOK,
             "--seed", 11, "--untied"]
    gen(*shape, "--out", tmp_path / "hf")
    gen("--weights-from", tmp_path / "hf", "--pad-to", 256, "--tokenizer", TOK,
        "--out", tmp_path / "pad", "--gguf", tmp_path / "pad.gguf")
    cfg = rf.load_config(str(tmp_path / "pad"))
    d = hidden // heads
    assert (cfg["hidden_size"], cfg["intermediate_size"]) == (256, 256)
    assert cfg["num_attention_heads"] * d % 256 == 0
    assert cfg["rms_norm_eps"] == pytest.approx(1e-5 * hidden / 256)
    check_padded(tmp_path / "hf", tmp_path / "pad", tmp_path / "pad.gguf")
    with pytest.raises(SystemExit):  # padding needs a model to pad
        gen(*shape, "--pad-to", 256, "--gguf", tmp_path / "bad.gguf")


@pytest.mark.parametrize("model", ["llama2xs-279K", "stories260K", "babyllama-tok105"])
def test_pad_to_trained_model(shared_dir, tmp_path, model):
    """The padded trained models (llama.cpp Q4_K_M comparisons) give the shared models' logits."""
    src = os.path.join(shared_dir, "models", model)
    tok = "tok105" if model == "babyllama-tok105" else "tok512"
    gen("--weights-from", src, "--pad-to", 256, "--tokenizer", tok, "--out", tmp_path / "pad",
        "--gguf", tmp_path / "pad.gguf")
    check_padded(src, tmp_path / "pad", tmp_path / "pad.gguf")


def test_gguf_qwen2_not_permuted_and_biases(tmp_path):
    path = tmp_path / "q.gguf"
    gen("--preset", "tiny-qwen2", "--tokenizer", TOK, "--layers", 1, "--out", tmp_path / "hf",
        "--gguf", path)
    g = check_gguf_layout(path)
    assert g.metadata["general.architecture"] == "qwen2"
    assert g.metadata["qwen2.rope.freq_base"] == 1e6
    hf = rf.load_hf_weights(str(tmp_path / "hf"))
    for x in "qkv":
        np.testing.assert_array_equal(g.tensor(f"blk.0.attn_{x}.weight"),
                                      hf[f"model.layers.0.self_attn.{x}_proj.weight"])
        np.testing.assert_array_equal(g.tensor(f"blk.0.attn_{x}.bias"),
                                      hf[f"model.layers.0.self_attn.{x}_proj.bias"])
        assert g.tensors[f"blk.0.attn_{x}.bias"]["type"] == 0
    assert "output.weight" not in g.tensors  # tied


def test_gguf_rope_scaling_metadata(tmp_path):
    gen(*SMALL, "--rope-scaling", "linear:4", "--gguf", tmp_path / "lin.gguf")
    g = rf.GgufReader(str(tmp_path / "lin.gguf"))
    assert g.metadata["llama.rope.scaling.type"] == "linear"
    assert g.metadata["llama.rope.scaling.factor"] == 4.0
    assert "rope_freqs.weight" not in g.tensors
    gen(*SMALL, "--head-dim", 64, "--rope-theta", 500000, "--rope-scaling", "llama3:32",
        "--gguf", tmp_path / "l3.gguf")
    g = rf.GgufReader(str(tmp_path / "l3.gguf"))
    assert "llama.rope.scaling.type" not in g.metadata
    f = g.tensor("rope_freqs.weight")
    assert f.shape == (32,) and g.tensors["rope_freqs.weight"]["type"] == 0
    # As llama.cpp's converter: theta_i / f_i equals HF's llama3 inverse frequencies.
    cfg = {"head_dim": 64, "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 500000.0,
           "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    base = 1 / 500000.0 ** (np.arange(0, 64, 2) / 64)
    np.testing.assert_allclose(base / f, rf.rope_inv_freq(cfg), rtol=1e-6)
    assert f[0] == 1.0 and f[-1] == 32.0


# ---------------------------------------------------------------------------------------------
# Quantizers: scalar re-implementation of ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref.

def scalar_q8_0(block):
    f32 = np.float32
    amax = f32(0)
    for v in block:
        amax = max(amax, abs(f32(v)))
    d = f32(amax / f32(127))
    inv = f32(f32(1) / d) if d != 0 else f32(0)
    qs = []
    for v in block:
        x = float(f32(f32(v) * inv))
        qs.append(int(math.copysign(math.floor(abs(x) + 0.5), x)))  # roundf, exact in double
    return np.float16(d), qs


def scalar_q4_0(block):
    f32 = np.float32
    amax, mx = f32(0), f32(0)
    for v in block:
        if amax < abs(f32(v)):
            amax, mx = abs(f32(v)), f32(v)
    d = f32(mx / f32(-8))
    inv = f32(f32(1) / d) if d != 0 else f32(0)
    q = []
    for v in block:
        x0 = f32(f32(v) * inv)
        q.append(min(15, int(f32(x0 + f32(8.5)))))
    return np.float16(d), [q[j] | (q[j + 16] << 4) for j in range(16)]


def quant_test_data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 32)).astype(np.float32)
    x[1] = 0                                   # all-zero block
    x[2] = np.arange(32) - 15.5                # exact .5 products
    x[3] = 0.0; x[3, 5] = -3.0; x[3, 9] = 3.0  # tie on |max|: the first one wins (Q4_0)
    x[4] = np.float32(127) * np.linspace(-1, 1, 32, dtype=np.float32)
    x[5, :16] = 1e-30                          # tiny values
    x[6] = rng.standard_normal(32).astype(np.float32) * 1e4
    x[7, :] = np.float32(-2.5)
    return x


def test_q8_0_matches_ggml_reference_bitwise():
    x = quant_test_data()
    blocks = gw.quantize_q8_0(x)
    assert blocks.tobytes().__len__() == 40 * 34
    for i, row in enumerate(x):
        d, qs = scalar_q8_0(row)
        assert blocks["d"][i] == d, i
        assert blocks["qs"][i].tolist() == qs, i
    # round half away from zero: amax 127 -> d = 1, products x.5 exactly
    row = np.zeros(32, np.float32)
    row[:5] = [127, 0.5, -0.5, 1.5, -2.5]
    assert gw.quantize_q8_0(row)["qs"][0][:5].tolist() == [127, 1, -1, 2, -3]


def test_q4_0_matches_ggml_reference_bitwise():
    x = quant_test_data()
    blocks = gw.quantize_q4_0(x)
    assert blocks.tobytes().__len__() == 40 * 18
    for i, row in enumerate(x):
        d, qs = scalar_q4_0(row)
        assert blocks["d"][i] == d, i
        assert blocks["qs"][i].tolist() == qs, i
    assert gw.quantize_q4_0(x[3])["d"][0] == np.float16(3.0 / 8)  # first of +-3 is -3
    assert gw.quantize_q4_0(x[1])["qs"][0].tolist() == [0x88] * 16


def test_quantization_round_trip_error_bounds():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((256, 128)) * rng.uniform(0.01, 10, (256, 1))).astype(np.float32)
    blocks = x.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    # Q8_0: |x - dq| <= d/2 (d = amax/127, plus fp16 rounding of d applied to |q| <= 127)
    q8 = gw.quantize_q8_0(x)
    deq8 = dequant_raw(q8.tobytes(), 8).reshape(-1, 32)
    d8 = amax / 127
    assert np.all(np.abs(deq8 - blocks) <= d8[:, None] * (0.5 + 127 * 2.0 ** -11) + 1e-30)
    # Q4_0: |x - dq| <= |d| (one step at the clipped top end), typically |d|/2
    q4 = gw.quantize_q4_0(x)
    deq4 = dequant_raw(q4.tobytes(), 2).reshape(-1, 32)
    d4 = amax / 8
    err4 = np.abs(deq4 - blocks)
    assert np.all(err4 <= d4[:, None] * (1 + 8 * 2.0 ** -11))
    assert np.mean(err4 <= d4[:, None] * (0.5 + 8 * 2.0 ** -11)) > 0.95
    # relative RMS error of Gaussian-ish data: about 0.3% (Q8_0) and 5-8% (Q4_0)
    rms = lambda a: float(np.sqrt(np.mean(a ** 2)))
    g = rng.standard_normal((64, 256)).astype(np.float32)
    e8 = rms(dequant_raw(gw.quantize_q8_0(g).tobytes(), 8) - g.ravel()) / rms(g)
    e4 = rms(dequant_raw(gw.quantize_q4_0(g).tobytes(), 2) - g.ravel()) / rms(g)
    assert e8 < 0.006 and e4 < 0.1, (e8, e4)


def dequant_raw(data: bytes, ggml_type: int) -> np.ndarray:
    """Dequantize raw block bytes with the reader in reference_forward (no tools/ code)."""
    g = rf.GgufReader.__new__(rf.GgufReader)
    n = len(data) // {8: 34, 2: 18}[ggml_type] * 32
    g.tensors = {"t": {"ne": [n], "shape": [n], "type": ggml_type, "offset": 0}}
    g.buf, g.data_start = data, 0
    return g.tensor("t").astype(np.float64)


def test_bf16_rounding_is_nearest_even():
    x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20, -1.5],
                 dtype=np.float32)
    got = gw.bf16_bits_to_f32(gw.f32_to_bf16_bits(x))
    np.testing.assert_array_equal(got, np.array([1.0, 1.0, 1.0 + 2 ** -6, 1.0 + 2 ** -7, -1.5],
                                                dtype=np.float32))


# ---------------------------------------------------------------------------------------------
# Q/K permutation

def test_qk_permutation_inverse_and_mapping():
    rng = np.random.default_rng(5)
    for n_head, d, cols in ((4, 8, 3), (2, 64, 5), (1, 128, 1), (3, 16, 0)):
        w = rng.standard_normal((n_head * d, cols) if cols else (n_head * d,))
        p = gw.llama_permute_qk(w, n_head)
        np.testing.assert_array_equal(rf.unpermute_qk(p, n_head), w)
        for h in range(n_head):  # permuted row h*d + 2i + j  <-  HF row h*d + j*d/2 + i
            for i in range(d // 2):
                for j in range(2):
                    np.testing.assert_array_equal(p[h * d + 2 * i + j], w[h * d + j * d // 2 + i])


def test_qk_permutation_matches_llama_cpp_file(shared_dir):
    """stories260K: permuting the HF q/k rows gives exactly the tensors of the llama.cpp GGUF."""
    hf = rf.read_safetensors(os.path.join(shared_dir, "models/stories260K/model.safetensors"),
                             to_float64=False)
    g = rf.GgufReader(os.path.join(shared_dir, "models/stories260K/stories260K.gguf"))
    for layer in range(5):
        for x, heads in (("q", 8), ("k", 4)):
            w = hf[f"model.layers.{layer}.self_attn.{x}_proj.weight"]
            np.testing.assert_array_equal(gw.llama_permute_qk(w, heads),
                                          g.tensor(f"blk.{layer}.attn_{x}.weight"))
        np.testing.assert_array_equal(hf[f"model.layers.{layer}.self_attn.v_proj.weight"],
                                      g.tensor(f"blk.{layer}.attn_v.weight"))


# ---------------------------------------------------------------------------------------------
# Tokenizers

def test_tokenizer_llama2_spm_matches_llama_cpp_vocab(shared_dir, tmp_path):
    """Our tokenizer.ggml.* from tokenizer.model equals llama.cpp's own llama-spm vocab GGUF."""
    gen("--hidden", 32, "--layers", 1, "--heads", 1, "--intermediate", 32,
        "--tokenizer", "llama2-spm", "--gguf", tmp_path / "t.gguf", "--gguf-type", "q8_0",
        "--out", tmp_path / "hf")
    ours = rf.GgufReader(str(tmp_path / "t.gguf")).metadata
    ref = rf.GgufReader(os.path.join(shared_dir,
                                     "tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf")).metadata
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"):
        assert ours[key] == ref[key], key
    assert ours["llama.vocab_size"] == 32000
    assert (tmp_path / "hf" / "tokenizer.model").exists()
    cfg = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert cfg["add_bos_token"] is True and cfg["bos_token"] == "<s>"


@pytest.mark.parametrize("name,vocab,model,pre,bos,eos,add_bos,n_merges", [
    ("llama3", 128256, "gpt2", "llama-bpe", 128000, 128001, True, 280147),
    ("qwen3", 151936, "gpt2", "qwen2", 151643, 151645, False, 151387),
    ("mistral-v0.1", 32000, "llama", "default", 1, 2, True, None),
])
def test_tokenizer_hf_json(shared_dir, tmp_path, name, vocab, model, pre, bos, eos, add_bos,
                           n_merges):
    gen("--hidden", 32, "--layers", 1, "--heads", 1, "--intermediate", 32, "--tokenizer", name,
        "--gguf", tmp_path / "t.gguf", "--gguf-type", "q8_0", "--out", tmp_path / "hf")
    md = rf.GgufReader(str(tmp_path / "t.gguf")).metadata
    tj = json.load(open(os.path.join(shared_dir, "tokenizers", name, "tokenizer.json")))
    assert md["tokenizer.ggml.model"] == model
    assert md["tokenizer.ggml.pre"] == pre
    toks = md["tokenizer.ggml.tokens"]
    assert len(toks) == len(md["tokenizer.ggml.token_type"]) == vocab
    for t, i in list(tj["model"]["vocab"].items())[::997]:
        assert toks[i] == t
    for a in tj["added_tokens"]:
        assert toks[a["id"]] == a["content"]
        assert md["tokenizer.ggml.token_type"][a["id"]] in (2, 3, 4)
    n_real = max(a["id"] for a in tj["added_tokens"]) + 1 if tj["added_tokens"] else 0
    n_real = max(n_real, len(tj["model"]["vocab"]))
    assert toks[n_real:] == [f"[PAD{i}]" for i in range(n_real, vocab)]
    assert set(md["tokenizer.ggml.token_type"][n_real:]) <= {5}
    assert md["tokenizer.ggml.bos_token_id"] == bos
    assert md["tokenizer.ggml.eos_token_id"] == eos
    assert md["tokenizer.ggml.add_bos_token"] is add_bos
    if n_merges is None:
        assert "tokenizer.ggml.merges" not in md
        scores = md["tokenizer.ggml.scores"]
        types = md["tokenizer.ggml.token_type"]
        assert types[0] == 2 and types[1] == types[2] == 3 and types[3] == types[258] == 6
        normal = [s for s, t in zip(scores, types) if t == 1]
        assert normal[0] == 0 and all(a > b for a, b in zip(normal, normal[1:]))
    else:
        assert len(md["tokenizer.ggml.merges"]) == n_merges
        m0 = tj["model"]["merges"][0]
        assert md["tokenizer.ggml.merges"][0] == (m0 if isinstance(m0, str) else " ".join(m0))
        assert "tokenizer.ggml.scores" not in md
    assert name == "mistral-v0.1" or md["tokenizer.chat_template"]
    cfg = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert cfg["vocab_size"] == vocab
    assert cfg["eos_token_id"] == eos and cfg["bos_token_id"] == bos
    assert (tmp_path / "hf" / "tokenizer.json").exists()


def test_vocab_smaller_than_tokenizer_is_rejected(shared_dir, tmp_path):
    with pytest.raises(SystemExit):
        gen("--hidden", 32, "--layers", 1, "--heads", 1, "--tokenizer", "tok512", "--vocab", 300,
            "--out", tmp_path / "x")


# ---------------------------------------------------------------------------------------------
# Presets and CLI

def test_presets_shapes():
    want = {
        "smollm-135m": (576, 1536, 30, 9, 3, 64, 49152, True, False, 10000.0, "none"),
        "qwen2.5-0.5b": (896, 4864, 24, 14, 2, 64, 151936, True, True, 1e6, "none"),
        "llama-3.2-1b": (2048, 8192, 16, 32, 8, 64, 128256, True, False, 500000.0, "llama3"),
    }
    for preset, (h, i, l, nh, nkv, hd, v, tied, bias, theta, rs) in want.items():
        m, _ = gen_model.build_shape(gen_model.parse_args(["--preset", preset, "--gguf", "x.gguf"]))
        assert (m.hidden, m.intermediate, m.layers, m.heads, m.kv_heads, m.head_dim, m.vocab,
                m.tied, m.qkv_bias, m.rope_theta, m.rope_scaling.kind) == \
            (h, i, l, nh, nkv, hd, v, tied, bias, theta, rs), preset
    m, _ = gen_model.build_shape(gen_model.parse_args(["--preset", "llama-3.2-1b", "--gguf", "x"]))
    rs = m.rope_scaling
    assert (rs.factor, rs.low, rs.high, rs.orig) == (32.0, 1.0, 4.0, 8192)
    n = sum(int(np.prod(s.shape)) for s in gen_model.tensor_specs(m))
    assert 1.23e9 < n < 1.24e9  # Llama-3.2-1B: 1.236 B parameters (tied)
    m, _ = gen_model.build_shape(gen_model.parse_args(["--preset", "smollm-135m", "--gguf", "x"]))
    n = sum(int(np.prod(s.shape)) for s in gen_model.tensor_specs(m))
    assert 134e6 < n < 135e6


def test_gemma_presets_parameter_counts():
    """Gemma-3-1B: 999,885,952 parameters (tied), Gemma-3-4B's text decoder 3.88 B."""
    m, _ = gen_model.build_shape(gen_model.parse_args(["--preset", "gemma-3-1b", "--gguf", "x"]))
    assert (m.arch, m.layers, m.sliding_window, m.gemma_pattern(), m.gemma_qpas()) == \
        ("gemma3", 26, 512, 6, 256)
    assert sum(int(np.prod(s.shape)) for s in gen_model.tensor_specs(m)) == 999_885_952
    m, _ = gen_model.build_shape(gen_model.parse_args(["--preset", "gemma-3-4b", "--gguf", "x"]))
    assert m.rope_scaling.kind == "linear" and m.rope_scaling.factor == 8.0
    n = sum(int(np.prod(s.shape)) for s in gen_model.tensor_specs(m))
    assert n == 3_880_263_168
    m, _ = gen_model.build_shape(gen_model.parse_args(["--preset", "gemma-2-2b-reduced",
                                                       "--gguf", "x"]))
    assert m.softcaps() == (50.0, 30.0) and m.layer_types()[:2] == ["sliding_attention",
                                                                    "full_attention"]


@pytest.mark.parametrize("arch", ["gemma2", "gemma3"])
def test_gguf_gemma_norms_plus_one_and_metadata(tmp_path, arch):
    """Gemma GGUFs hold 1 + w for every norm (llama.cpp's converter), Q/K unpermuted, the
    window and (Gemma 2) the soft-caps in metadata; the HF config says what GGUF leaves to the
    loader (layer pattern, query_pre_attn_scalar, local RoPE base)."""
    path = tmp_path / "g.gguf"
    gen("--preset", f"tiny-{arch}", "--tokenizer", TOK, "--out", tmp_path / "hf", "--gguf", path)
    g = check_gguf_layout(path)
    md = g.metadata
    assert md["general.architecture"] == arch
    assert md[f"{arch}.attention.sliding_window"] == 8
    hf = rf.load_hf_weights(str(tmp_path / "hf"))
    np.testing.assert_array_equal(g.tensor("blk.0.attn_norm.weight"),
                                  (hf["model.layers.0.input_layernorm.weight"] + 1).astype(
                                      np.float32))
    np.testing.assert_array_equal(g.tensor("blk.1.post_ffw_norm.weight"),
                                  (hf["model.layers.1.post_feedforward_layernorm.weight"] + 1)
                                  .astype(np.float32))
    np.testing.assert_array_equal(g.tensor("blk.0.ffn_norm.weight"),
                                  (hf["model.layers.0.pre_feedforward_layernorm.weight"] + 1)
                                  .astype(np.float32))
    for x in "qk":
        np.testing.assert_array_equal(g.tensor(f"blk.0.attn_{x}.weight"),
                                      hf[f"model.layers.0.self_attn.{x}_proj.weight"])
    assert abs(float(np.mean(hf["model.layers.0.input_layernorm.weight"]))) < 0.05
    with open(tmp_path / "hf" / "config.json") as f:
        cfg = json.load(f)
    assert cfg["hidden_activation"] == "gelu_pytorch_tanh" and cfg["query_pre_attn_scalar"] == 32
    if arch == "gemma2":
        assert (md["gemma2.attn_logit_softcapping"], md["gemma2.final_logit_softcapping"]) == \
            (50.0, 30.0)
        assert "blk.0.attn_q_norm.weight" not in g.tensors
        assert (cfg["attn_logit_softcapping"], cfg["final_logit_softcapping"]) == (50.0, 30.0)
    else:
        assert g.tensors["blk.0.attn_q_norm.weight"]["shape"] == [32]
        assert cfg["layer_types"] == ["sliding_attention"] * 5 + ["full_attention"]
        assert cfg["rope_local_base_freq"] == 10000.0 and cfg["final_logit_softcapping"] is None
    with pytest.raises(SystemExit, match="global"):
        gen("--preset", f"tiny-{arch}", "--tokenizer", "none", "--sliding-window-pattern", 3,
            "--gguf", tmp_path / "bad.gguf")
    with pytest.raises(SystemExit, match="query_pre_attn_scalar"):
        gen("--preset", f"tiny-{arch}", "--tokenizer", "none", "--query-pre-attn-scalar", 64,
            "--gguf", tmp_path / "bad.gguf")


def test_cli_subprocess_and_repo_guard(tmp_path):
    script = os.path.join(REPO_ROOT, "tools", "gen_model.py")
    r = subprocess.run([sys.executable, script, "--preset", "tiny", "--tokenizer", TOK,
                        "--layers", "1", "--out", str(tmp_path / "t")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "params=" in r.stderr and (tmp_path / "t" / "model.safetensors").exists()
    r = subprocess.run([sys.executable, script, "--preset", "tiny", "--tokenizer", "none",
                        "--out", os.path.join(REPO_ROOT, "tools", "should_not_exist")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "refusing" in r.stderr
    assert not os.path.exists(os.path.join(REPO_ROOT, "tools", "should_not_exist"))


# ---------------------------------------------------------------------------------------------
# The built-in byte-level BPE tokenizer (serves text without ../shared)

def bpe_reference_encode(text, vocab, merges):
    """GPT-2 BPE from its public definition, one word at a time: bytes -> unicode symbols, then
    repeatedly merge the adjacent pair with the lowest merge rank."""
    import byte_bpe
    b2u = byte_bpe.bytes_to_unicode()
    rank = {tuple(m.split(" ")): i for i, m in enumerate(merges)}
    ids = []
    for word in byte_bpe.WORD_RE.findall(text):
        syms = [b2u[b] for b in word.encode("utf-8")]
        while len(syms) > 1:
            pairs = [(rank.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(syms, syms[1:]))]
            best, i = min(pairs)
            if best == 1 << 30:
                break
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        ids += [vocab[s] for s in syms]
    return ids


def test_byte_bpe_tokenizer_serves_text(tmp_path, pagellm_binary):
    out = tmp_path / "bpe"
    gen("--preset", "tiny", "--tokenizer", "byte-bpe", "--out", out)
    tok = json.loads((out / "tokenizer.json").read_text())
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vocab_size"] == len(tok["model"]["vocab"]) == 512
    eos = tok["model"]["vocab"]["<|endoftext|>"]
    assert cfg["eos_token_id"] == eos
    text = "Once upon a time, Lily saw 3 red balls!"
    want = bpe_reference_encode(text, tok["model"]["vocab"], tok["model"]["merges"])
    assert len(want) < len(text.encode())  # merges were learned
    got = subprocess.run([pagellm_binary, "tokenize", "--model", str(out), text],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == want
    gen_out = subprocess.run([pagellm_binary, "generate", "--model", str(out), "--prompt", text,
                              "--max-tokens", "8", "--temperature", "0", "--ignore-eos"],
                             capture_output=True, text=True, timeout=60)
    assert gen_out.returncode == 0, gen_out.stderr
    assert gen_out.stdout.strip()
