"""AWQ and GPTQ checkpoints (Hugging Face layout) through the engine.

Checkpoints of the shared TinyStories models are written by tools/hf_quantize.py (round to
nearest, packing per the formats' public definitions). Checked here:
- the independent numpy dequantizer (tests/hf_quant_reference.py) on hand-packed words, and the
  tool's output against the float weights it came from (within half a step per weight);
- the engine's matrices as its kernels multiply them (`pagellm inspect --dump-weights`, after
  the repack at load, act-order permutation undone) equal the numpy dequantization bit for bit,
  for AWQ (groups 32 / 64 / 128, modules_to_not_convert) and GPTQ (4 and 8 bits, sym and asym,
  act-order, group -1, both zero-point conventions);
- greedy decoding equals a float64 reference forward over the numpy-dequantized weights
  (tests/reference_forward.py, rounding activations to 8 bits and K/V to float16 as the engine
  does), teacher-forced along the reference's greedy path up to its first near tie;
- `pagellm inspect` reports the repacked bytes;
- bad checkpoints and --quantization mismatches are clear errors naming the file and tensor.

Skips when the shared assets are absent.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import hf_quant_reference as hq
import reference_forward as rf

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOOL = os.path.join(ROOT, "tools", "hf_quantize.py")
LINEAR = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")

# name: (shared model, tool flags)
CASES = {
    "awq_g64_llama2xs": ("llama2xs-279K", ["--method", "awq", "--group-size", "64"]),
    "awq_g32_babyllama_skip_down": ("babyllama-tok105", ["--method", "awq", "--group-size", "32",
                                                         "--modules-to-not-convert", "down_proj"]),
    "gptq4_g32_sym_v1_babyllama": ("babyllama-tok105", ["--method", "gptq", "--group-size", "32"]),
    "gptq4_g32_asym_v2_actorder_babyllama": (
        "babyllama-tok105", ["--method", "gptq", "--group-size", "32", "--asym", "--desc-act",
                             "--checkpoint-format", "gptq_v2"]),
    "gptq4_g64_asym_v1_actorder_llama2xs": (
        "llama2xs-279K", ["--method", "gptq", "--group-size", "64", "--asym", "--desc-act"]),
    "gptq8_rowgroup_sym_v1_babyllama": ("babyllama-tok105", ["--method", "gptq", "--bits", "8",
                                                             "--group-size", "-1"]),
    "gptq8_g32_asym_v2_llama2xs": ("llama2xs-279K", ["--method", "gptq", "--bits", "8",
                                                     "--group-size", "32", "--asym",
                                                     "--checkpoint-format", "gptq_v2"]),
    # Groups of 128 (Q4_Z128); babyllama's down_proj has 352 inputs, which AWQ's groups must
    # divide (so it stays float), and which GPTQ's groups of 128 leave ragged (so it is Q4_Z).
    "awq_g128_babyllama_skip_down": ("babyllama-tok105", ["--method", "awq", "--group-size", "128",
                                                          "--modules-to-not-convert",
                                                          "down_proj"]),
    "gptq4_g128_asym_v2_babyllama": ("babyllama-tok105", ["--method", "gptq", "--group-size",
                                                          "128", "--asym", "--checkpoint-format",
                                                          "gptq_v2"]),
}
GREEDY_CASES = ["awq_g64_llama2xs", "awq_g32_babyllama_skip_down", "awq_g128_babyllama_skip_down",
                "gptq4_g32_asym_v2_actorder_babyllama", "gptq8_rowgroup_sym_v1_babyllama"]


def shared_model(shared_dir, name):
    d = os.path.join(shared_dir, "models", name)
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        pytest.skip(f"shared model absent: {d}")
    return d


_MADE = {}


def make_checkpoint(shared_dir, tmp_path_factory, case):
    if case not in _MADE:
        model, flags = CASES[case]
        src = shared_model(shared_dir, model)
        out = str(tmp_path_factory.mktemp(case))
        r = subprocess.run([sys.executable, TOOL, "--model", src, "--out", out] + flags,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        _MADE[case] = (src, out)
    return _MADE[case]


def load_checkpoint(path):
    """(config, {name: array as stored}) of a single-file checkpoint."""
    cfg = rf.load_config(path)
    return cfg, rf.read_safetensors(os.path.join(path, "model.safetensors"), to_float64=False)


def reference_matrices(path):
    """name.weight -> float32 [out][in] for every matrix, quantized ones dequantized by numpy;
    also the set of quantized names."""
    cfg, t = load_checkpoint(path)
    q = cfg["quantization_config"]
    out, quantized = {}, set()
    for name in t:
        if name.endswith(".qweight"):
            module = name[:-len(".qweight")]
            out[module + ".weight"] = hq.dequantize_module(t, module, q)
            quantized.add(module + ".weight")
        elif name.endswith(".weight") and t[name].ndim == 2:
            out[name] = t[name].astype(np.float32)
    return out, quantized


def engine_matrices(binary, path, dump_dir):
    r = subprocess.run([binary, "inspect", path, "--dump-weights", str(dump_dir), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = {}
    for f in os.listdir(dump_dir):
        out[f[:-len(".f32")]] = np.fromfile(os.path.join(dump_dir, f), dtype="<f4")
    return out, json.loads(r.stdout)


# ---------------------------------------------------------------------------------------------
# 1. The numpy dequantizer on hand-packed words, and the tool against its float source.

def test_reference_unpacks_hand_packed_words():
    # AWQ: outputs 0..7 hold codes 1..8; AutoAWQ stores output order[n] in nibble n with
    # order = 0 2 4 6 1 3 5 7, so the nibbles from the bottom are 1 3 5 7 2 4 6 8.
    word = np.array([[0x86427531]], dtype=np.uint32).view(np.int32)
    np.testing.assert_array_equal(hq.awq_unpack(word), [[1, 2, 3, 4, 5, 6, 7, 8]])
    # AWQ value: (q - z) * s with q = 9, z = 3, s = 0.5 for output 0 of input 0.
    qweight = np.array([[9]], dtype=np.int32).repeat(1, axis=1)  # [in 1][out 8 / 8]
    qzeros = np.array([[3]], dtype=np.int32)
    scales = np.full((1, 8), 0.5, dtype=np.float16)
    w = hq.awq_dequantize(qweight, qzeros, scales, group_size=1)
    assert w.shape == (8, 1) and w[0, 0] == 3.0 and w[1, 0] == 0.0
    # GPTQ 4-bit: inputs 0..7 of output 0 hold codes 1..8 from the low nibble up; v1 zeros are
    # stored minus one (stored 7 -> z 8), v2 as they are.
    # Output 1 has all codes 0 and zero point (0x70 >> 4) = 7 (+1 in v1).
    qweight = np.zeros((1, 8), dtype=np.uint32)          # [in 8 / 8][out 8]
    qweight[0, 0] = 0x87654321
    qzeros = np.array([[0x77]], dtype=np.uint32)         # [1 group][out 8 / 8]
    scales = np.ones((1, 8), dtype=np.float16)
    args = (qweight.view(np.int32), qzeros.view(np.int32), scales, np.zeros(8, np.int32), 4)
    v1 = hq.gptq_dequantize(*args, "gptq")
    v2 = hq.gptq_dequantize(*args, "gptq_v2")
    np.testing.assert_array_equal(v1[:2], [np.arange(1, 9) - 8, np.full(8, -8)])
    np.testing.assert_array_equal(v2[:2], [np.arange(1, 9) - 7, np.full(8, -7)])
    # GPTQ 8-bit: four inputs per word, four outputs per zero-point word.
    qweight = np.zeros((2, 4), dtype=np.uint32)
    qweight[:, 0] = [0x04030201, 0x08070605]
    qzeros = np.array([[0x00000300]], dtype=np.uint32)   # output 1: z 3
    w = hq.gptq_dequantize(qweight.view(np.int32), qzeros.view(np.int32),
                           np.ones((1, 4), np.float16), np.zeros(8, np.int32), 8, "gptq_v2")
    np.testing.assert_array_equal(w[:2], [np.arange(1, 9), np.full(8, -3)])


@pytest.mark.parametrize("case", sorted(CASES))
def test_tool_output_dequantizes_near_the_float_weights(shared_dir, tmp_path_factory, case):
    src, path = make_checkpoint(shared_dir, tmp_path_factory, case)
    ref, quantized = reference_matrices(path)
    cfg, t = load_checkpoint(path)
    flt = rf.read_safetensors(os.path.join(src, "model.safetensors"), to_float64=False)
    q = cfg["quantization_config"]
    assert quantized, case
    for name in quantized:
        module = name[:-len(".weight")]
        w = flt[name]
        s = t[module + ".scales"].astype(np.float32)
        g_idx = t.get(module + ".g_idx")
        if g_idx is None:
            g_idx = np.arange(w.shape[1]) // q["group_size"]
        step = s[g_idx].T  # [out][in]
        # Rounding error at most half a step (plus the float16 rounding of the scale, at most
        # 2^-11 relative per step of range), outside the clipped zero-point corner cases.
        err = np.abs(ref[name] - w)
        assert np.mean(err <= 0.5 * step * (1 + 1e-3) + 1e-6) > 0.99, (case, name)
    if "skip_down" in case:
        assert not any("down_proj" in n for n in quantized)
        assert all(f"model.layers.0.{m}.weight" in quantized for m in LINEAR[:6])


# ---------------------------------------------------------------------------------------------
# 2. The engine's repacked matrices against the numpy dequantizer, exactly.

@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_matrices_equal_numpy_dequantization(shared_dir, tmp_path_factory, pagellm_binary,
                                                    tmp_path, case):
    _, path = make_checkpoint(shared_dir, tmp_path_factory, case)
    ref, quantized = reference_matrices(path)
    got, info = engine_matrices(pagellm_binary, path, tmp_path / "dump")
    assert set(got) == set(ref), case
    for name, want in ref.items():
        np.testing.assert_array_equal(got[name].reshape(want.shape), want, err_msg=name)
    cfg = rf.load_config(path)
    q = info["quantization"]
    assert q["method"] == cfg["quantization_config"]["quant_method"]
    assert q["bits"] == cfg["quantization_config"]["bits"]
    assert q["file_bytes"] == quantized_tensor_bytes(path)
    # The repacked layout's bytes: for 4 bits Q4_Z128 (67 bytes per 128) where every 128
    # inputs share a group, else Q4_Z (19 bytes per 32); Q8_0 (34 per 32) or F32 for 8 bits;
    # weights_bytes counts what the kernels read.
    repacked = sum(info["dtype_bytes"].get(t, 0) for t in ("Q4_Z", "Q4_Z128", "Q8_0"))
    assert info["repacked_bytes"] >= repacked
    if cfg["quantization_config"]["bits"] == 4:
        g = cfg["quantization_config"]["group_size"]
        z32 = z128 = 0
        for name in quantized:
            out_features, in_features = ref[name].shape
            if (g if g > 0 else in_features) % 128 == 0 and in_features % 128 == 0:
                z128 += ref[name].size // 128 * 67
            else:
                z32 += ref[name].size // 32 * 19
        assert info["dtype_bytes"].get("Q4_Z", 0) == z32, case
        assert info["dtype_bytes"].get("Q4_Z128", 0) == z128, case
        if "g128" in case:
            assert z128 > 0, case


def quantized_tensor_bytes(path):
    header, _, _ = rf.read_safetensors_header(os.path.join(path, "model.safetensors"))
    quant_suffixes = (".qweight", ".qzeros", ".scales", ".g_idx")
    return sum(e["data_offsets"][1] - e["data_offsets"][0] for n, e in header.items()
               if n.endswith(quant_suffixes))


# ---------------------------------------------------------------------------------------------
# 3. Greedy decoding against the float64 reference over the dequantized weights.

def engine_logits(binary, model, ids, out):
    r = subprocess.run([binary, "logits", "--model", model, "--token-ids",
                        ",".join(map(str, ids)), "--output", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


@pytest.mark.parametrize("case", GREEDY_CASES)
def test_greedy_equals_float64_reference(shared_dir, tmp_path_factory, pagellm_binary, tmp_path,
                                         case):
    _, path = make_checkpoint(shared_dir, tmp_path_factory, case)
    mats, quantized = reference_matrices(path)
    cfg, t = load_checkpoint(path)
    weights = {n: a.astype(np.float64) for n, a in t.items() if a.dtype.kind == "f"}
    weights.update({n: m.astype(np.float64) for n, m in mats.items()})
    # The engine's integer kernels round each quantized matmul's input to 8 bits per 32 and the
    # KV cache of a quantized model is float16: the reference rounds the same way.
    cfg = dict(cfg, weight_blocks={n: 32 for n in quantized})
    ids = [1]
    n_new = 32
    for _ in range(n_new):
        logits = rf.forward(cfg, weights, ids, emulate_engine=True)[-1]
        top2 = np.sort(logits)[-2:]
        if top2[1] - top2[0] < 1e-3 * np.abs(logits).max():
            break  # a near tie: fp32 noise may pick either
        ids.append(int(np.argmax(logits)))
    assert len(ids) > 16, (case, ids)
    got = engine_logits(pagellm_binary, path, ids, tmp_path / "logits.f32")
    assert [int(i) for i in got[:-1].argmax(axis=-1)] == ids[1:], case
    # Logits: the emulating forward to fp32 precision, up to an activation that lands within
    # fp32 noise of a rounding boundary (bound 3e-2 x max|logit| as for the GGUF types,
    # tests/test_kquant_ref.py); the plain float64 forward (no activation or KV rounding) within
    # 1e-1 (measured up to 7.0e-2 on these 64/128-wide models, where 8-bit activations per 32
    # cost more than on real widths).
    emulated = rf.forward(cfg, weights, ids, emulate_engine=True)
    rel = np.abs(got - emulated).max() / np.abs(emulated).max()
    assert rel < 3e-2, (case, rel)
    plain = rf.forward(dict(cfg, weight_blocks={}), weights, ids)
    rel = np.abs(got - plain).max() / np.abs(plain).max()
    assert rel < 1e-1, (case, rel)


# ---------------------------------------------------------------------------------------------
# 4. Bad input.

def rewrite(path, edit):
    """Rewrites path/model.safetensors with edit(tensors) applied (name -> (dtype, array))."""
    st = os.path.join(path, "model.safetensors")
    header, _, start = rf.read_safetensors_header(st)
    raw = open(st, "rb").read()
    tensors = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        dt = {"F32": "<f4", "F16": "<f2", "I32": "<i4"}[e["dtype"]]
        tensors[name] = (e["dtype"], np.frombuffer(raw[start + b:start + en], dt).reshape(
            e["shape"]))
    edit(tensors)
    out_header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        out_header[name] = {"dtype": dtype, "shape": list(arr.shape),
                            "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(out_header).encode()
    text += b" " * (-len(text) % 8)
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def edit_config(path, **changes):
    p = os.path.join(path, "config.json")
    cfg = json.load(open(p))
    cfg["quantization_config"].update(changes)
    json.dump(cfg, open(p, "w"))


def run_generate(binary, path, *flags):
    return subprocess.run([binary, "generate", "--model", path, "--prompt", "Once",
                           "--max-tokens", "2", "--temperature", "0"] + list(flags),
                          capture_output=True, text=True, timeout=120)


Q = "model.layers.1.self_attn.k_proj"
BAD_TENSORS = {
    "qzeros_short": (lambda t: t.update({Q + ".qzeros": ("I32", t[Q + ".qzeros"][1][:-1])}),
                     [Q, "qzeros: expected I32"]),
    "qweight_misshaped": (lambda t: t.update({Q + ".qweight": ("I32", t[Q + ".qweight"][1][:, :-1])}),
                          [Q, "qweight: expected I32"]),
    "scales_f32": (lambda t: t.update({Q + ".scales": ("F32",
                                                       t[Q + ".scales"][1].astype("<f4"))}),
                   [Q, "scales: expected F16"]),
    "scales_3d": (lambda t: t.update({Q + ".scales": ("F16", t[Q + ".scales"][1][None])}),
                  [Q + ".scales", "expected 2 dimensions"]),
    "qzeros_missing": (lambda t: t.pop(Q + ".qzeros"), [Q + ".qzeros", "missing tensor"]),
}


@pytest.mark.parametrize("bad", sorted(BAD_TENSORS))
def test_bad_awq_tensors_are_clear_errors(shared_dir, tmp_path_factory, pagellm_binary, tmp_path,
                                          bad):
    _, good = make_checkpoint(shared_dir, tmp_path_factory, "awq_g64_llama2xs")
    path = str(tmp_path / "m")
    shutil.copytree(good, path)
    edit, needles = BAD_TENSORS[bad]
    rewrite(path, edit)
    r = run_generate(pagellm_binary, path)
    assert r.returncode == 1, (bad, r.returncode, r.stderr)
    assert "model.safetensors" in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, (bad, r.stderr)


def test_bad_gptq_g_idx_and_truncated_file(shared_dir, tmp_path_factory, pagellm_binary,
                                           tmp_path):
    _, good = make_checkpoint(shared_dir, tmp_path_factory, "gptq4_g32_asym_v2_actorder_babyllama")
    path = str(tmp_path / "m")
    shutil.copytree(good, path)

    def bad_g_idx(t):
        g = np.array(t[Q + ".g_idx"][1])
        g[5] = 99
        t[Q + ".g_idx"] = ("I32", g)
    rewrite(path, bad_g_idx)
    r = run_generate(pagellm_binary, path)
    assert r.returncode == 1 and Q in r.stderr and "g_idx: element 5 is 99" in r.stderr, r.stderr
    shutil.rmtree(path)
    shutil.copytree(good, path)
    st = os.path.join(path, "model.safetensors")
    with open(st, "r+b") as f:
        f.truncate(os.path.getsize(st) - 1000)
    r = run_generate(pagellm_binary, path)
    assert r.returncode == 1 and "model.safetensors" in r.stderr, r.stderr


@pytest.mark.parametrize("changes,needle", [
    ({"bits": 3}, "GPTQ bits 3 is not supported"),
    ({"group_size": 16}, "GPTQ group_size 16 is not supported"),
    ({"checkpoint_format": "marlin"}, "checkpoint_format 'marlin' is not supported"),
    ({"quant_method": "fp8"}, "quant_method 'fp8' is not supported"),
])
def test_unsupported_quantization_configs_are_clear_errors(shared_dir, tmp_path_factory,
                                                           pagellm_binary, tmp_path, changes,
                                                           needle):
    _, good = make_checkpoint(shared_dir, tmp_path_factory, "gptq4_g32_sym_v1_babyllama")
    path = str(tmp_path / "m")
    shutil.copytree(good, path)
    edit_config(path, **changes)
    r = run_generate(pagellm_binary, path)
    assert r.returncode == 1, r.stderr
    assert "config.json: quantization_config" in r.stderr and needle in r.stderr, r.stderr


def test_awq_bits_and_version_errors(shared_dir, tmp_path_factory, pagellm_binary, tmp_path):
    _, good = make_checkpoint(shared_dir, tmp_path_factory, "awq_g64_llama2xs")
    for changes, needle in (({"bits": 8}, "AWQ bits 8 is not supported"),
                            ({"group_size": 48}, "AWQ group_size 48 is not supported"),
                            ({"version": "gemv"}, "AWQ version 'gemv' is not supported")):
        path = str(tmp_path / "m")
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(good, path)
        edit_config(path, **changes)
        r = run_generate(pagellm_binary, path)
        assert r.returncode == 1 and needle in r.stderr, r.stderr


def test_quantization_flag_must_match_the_checkpoint(shared_dir, tmp_path_factory,
                                                     pagellm_binary):
    _, awq = make_checkpoint(shared_dir, tmp_path_factory, "awq_g64_llama2xs")
    _, gptq = make_checkpoint(shared_dir, tmp_path_factory, "gptq4_g32_sym_v1_babyllama")
    for path, flag in ((awq, "awq"), (awq, "awq_marlin"), (gptq, "gptq"), (gptq, "gptq_marlin")):
        r = run_generate(pagellm_binary, path, "--quantization", flag)
        assert r.returncode == 0, (flag, r.stderr)
    r = run_generate(pagellm_binary, awq, "--quantization", "gptq")
    assert r.returncode == 1
    assert "quantized with awq, not gptq" in r.stderr, r.stderr
    r = run_generate(pagellm_binary, gptq, "--quantization", "awq_marlin")
    assert r.returncode == 1 and "quantized with gptq, not awq" in r.stderr, r.stderr
    r = run_generate(pagellm_binary, awq, "--quantization", "gguf")
    assert r.returncode == 1 and "not a .gguf file" in r.stderr, r.stderr


def test_python_llm_takes_the_quantization_argument(shared_dir, tmp_path_factory,
                                                     pagellm_module):
    """LLM(quantization=...) as vLLM's: the checkpoint's method (or a marlin name) loads and
    gives the CLI's greedy tokens; another method is the loader's error."""
    _, awq = make_checkpoint(shared_dir, tmp_path_factory, "awq_g64_llama2xs")
    params = pagellm_module.SamplingParams(temperature=0, max_tokens=8)
    ids = []
    for q in (None, "awq", "awq_marlin"):
        llm = pagellm_module.LLM(model=awq, quantization=q, kv_cache_memory_bytes=1 << 24)
        ids.append(list(llm.generate(["Once upon a time"], params)[0].outputs[0].token_ids))
        del llm
    assert ids[0] == ids[1] == ids[2] and len(ids[0]) == 8
    with pytest.raises(Exception, match="quantized with awq, not gptq"):
        pagellm_module.LLM(model=awq, quantization="gptq", kv_cache_memory_bytes=1 << 24)
    with pytest.raises(NotImplementedError, match="quantization='fp8'"):
        pagellm_module.LLM(model=awq, quantization="fp8")


@pytest.mark.parametrize("case,sizes", [("gptq4_g32_asym_v2_actorder_babyllama", (2, 4)),
                                        ("gptq4_g64_asym_v1_actorder_llama2xs", (2,))])
def test_act_order_checkpoints_split_under_tensor_parallelism(shared_dir, tmp_path_factory,
                                                              pagellm_module, case, sizes):
    """GPTQ act-order at tensor_parallel_size 2 and 4 (the Python LLM's ranks, threads of this
    process): o_proj and down_proj split by their stored blocks, each rank multiplying the whole
    input (docs/PARALLELISM.md), give TP 1's greedy ids. (llama2xs's o_proj has two blocks of 32
    inputs: TP 2 only.) The logits within 1e-5 are tests/tensor_parallel_test.cc's, on random
    checkpoints: on these trained ones the 8-bit activation blocks of the 4-bit kernels can
    round one element differently when the residual stream differs from TP 1's in its last bits
    (as under any split of a quantized model, AWQ's included), moving logits by up to ~0.1."""
    _, path = make_checkpoint(shared_dir, tmp_path_factory, case)
    pagellm = pagellm_module
    params = pagellm.SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)

    def run(tp):
        llm = pagellm.LLM(model=path, tensor_parallel_size=tp, threads=1,
                          kv_cache_memory_bytes=1 << 24)
        outs = llm.generate(["Once upon a time", "The cat sat"], params, use_tqdm=False)
        llm.shutdown()
        return [list(o.outputs[0].token_ids) for o in outs]

    want = run(1)
    for tp in sizes:
        assert run(tp) == want, tp


def test_pagellm_quantize_writes_hf_checkpoints(shared_dir, tmp_path_factory, pagellm_binary,
                                                tmp_path):
    """`pagellm quantize DIR OUT rtn|awq|gptq` runs the quantizers: rtn is the tool's
    round-to-nearest AutoAWQ file byte for byte; awq and gptq (searched on TinyStories) write
    checkpoints of their formats that generate; bad requests are one-line errors."""
    src, tool_rtn = make_checkpoint(shared_dir, tmp_path_factory, "awq_g64_llama2xs")
    text = os.path.join(shared_dir, "data", "tinystories_sample.txt")
    rtn = str(tmp_path / "rtn")
    r = subprocess.run([pagellm_binary, "quantize", src, rtn, "rtn", "--group-size", "64"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "rtn int4 group 64 checkpoint written" in r.stdout, r.stdout
    with open(os.path.join(rtn, "model.safetensors"), "rb") as a, \
            open(os.path.join(tool_rtn, "model.safetensors"), "rb") as b:
        assert a.read() == b.read()
    calib = ["--calib-text", text, "--calib-docs", "4", "--calib-tokens", "64"]
    for method, flags, quant_method in (("awq", ["--group-size", "64"], "awq"),
                                        ("gptq", ["--group-size", "64", "--asym", "--desc-act"],
                                         "gptq")):
        out = str(tmp_path / method)
        r = subprocess.run([pagellm_binary, "quantize", src, out, method] + flags + calib,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "layer 5/5" in r.stderr, r.stderr  # progress per layer
        cfg = json.load(open(os.path.join(out, "config.json")))
        assert cfg["quantization_config"]["quant_method"] == quant_method
        g = run_generate(pagellm_binary, out)
        assert g.returncode == 0, g.stderr
    for args, message in (([src, str(tmp_path / "x"), "awq"], "give --calib-text"),
                          ([src, str(tmp_path / "y"), "rtn", "--bits", "8"], "gptq only"),
                          ([text, str(tmp_path / "z"), "rtn"], "float Hugging Face model")):
        r = subprocess.run([pagellm_binary, "quantize"] + args, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode != 0 and message in r.stderr, r.stderr
