"""pagellm logits vs the float64 numpy reference (tests/reference_forward.py).

1. The reference itself is checked against ../shared/models/stories260K/EXPECTED.md (top-5 logits
   at BOS, greedy ids of the 200-token BOS run and the three prompts, via teacher forcing) and
   against the llama.cpp GGUF of the same model.
2. Random models from tools/gen_model.py (GQA, MQA, MHA, q/k/v bias, tied/untied, head_dim
   8/32/64/128, linear and llama3 RoPE scaling, sliding window) are run through
   `$PAGELLM_BINARY logits --model PATH --token-ids 1,5,... --output FILE`, which must write
   little-endian float32 [n_tokens][vocab] (logits at every position), and compared with the
   reference.

Error metric: rel = max|engine - ref| / max|ref| over the whole [n_tokens, vocab] matrix.
Tolerances (reference = same weights as stored in the file, widened to float64):
  HF F32, GGUF F32 (exercises the Q/K un-permutation / interleaved RoPE)   rel <= 1e-4
  HF BF16/F16, GGUF BF16/F16                                              rel <= 1e-2
  GGUF Q8_0/Q4_0 vs the reference on the dequantized GGUF weights          rel <= 5e-2
      (room for 8-bit activation quantization as in llama.cpp's dot products: a float32 engine
      that rounds every matmul input to Q8_0 blocks lands at 1.3e-2 .. 1.7e-2 on these cases,
      one without it at 1e-6), plus argmax agreement wherever the reference's top-1/top-2 gap
      exceeds 2 x 5e-2 x max|ref|;
  GGUF Q8_0/Q4_0 vs the reference on the original (unquantized) weights
      rel <= rel(dequantized reference vs original) + 5e-2  (no worse than exact dequantization;
      that quantization error itself is ~3e-2 for Q8_0 and ~0.4-0.55 for Q4_0 on these
      random-weight models).
"""

import json
import os
import subprocess

import numpy as np
import pytest

import gen_model
import reference_forward as rf
from conftest import shared_dir_or_none

TOL = {"f32": 1e-4, "bf16": 1e-2, "f16": 1e-2, "quant": 5e-2}


def rel_err(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


# ---------------------------------------------------------------------------------------------
# 1. The reference against the published expectations.

@pytest.fixture(scope="module")
def stories(shared_dir):
    d = os.path.join(shared_dir, "models", "stories260K")
    with open(os.path.join(d, "expected.json")) as f:
        return d, json.load(f)


def test_reference_top5_and_greedy_bos(stories):
    d, exp = stories
    run = exp["bos200"]
    ids = run["prompt_ids"] + run["out_ids"]
    logits = rf.reference_logits(d, ids)
    top5 = np.argsort(-logits[0])[:5]
    want = run["top5_last_prompt"]
    assert [int(i) for i in top5] == [i for i, _ in want]  # 403 385 410 317 407
    np.testing.assert_allclose(logits[0, top5], [v for _, v in want], rtol=0, atol=1e-9)
    assert abs(logits[0, 403] - 17.023515) < 1e-6
    # teacher forcing: argmax at every position reproduces the 200 greedy ids
    assert np.argmax(logits[:-1], axis=1).tolist() == run["out_ids"]


def test_reference_greedy_prompts(stories):
    d, exp = stories
    for p in exp["prompts"]:
        ids = p["prompt_ids"] + p["out_ids"]
        logits = rf.reference_logits(d, ids)
        n = len(p["prompt_ids"])
        assert np.argmax(logits[n - 1:-1], axis=1).tolist() == p["out_ids"], p["prompt"]
        last = logits[n - 1]
        for i, v in p["top5_last_prompt"]:
            assert abs(last[i] - v) < 1e-9


def test_reference_reads_llama_cpp_gguf(stories):
    """stories260K.gguf (llama.cpp layout, interleaved Q/K) gives the HF logits."""
    d, exp = stories
    ids = exp["prompts"][0]["prompt_ids"] + exp["prompts"][0]["out_ids"][:20]
    a = rf.reference_logits(d, ids)
    b = rf.reference_logits(os.path.join(d, "stories260K.gguf"), ids)
    assert rel_err(b, a) < 1e-9


def test_reference_rope_scaling_formulas():
    cfg = {"hidden_size": 64, "num_attention_heads": 1, "head_dim": 64, "rope_theta": 10000.0}
    base = rf.rope_inv_freq(cfg)
    np.testing.assert_allclose(base, 10000.0 ** (-np.arange(0, 64, 2) / 64))
    lin = rf.rope_inv_freq({**cfg, "rope_scaling": {"type": "linear", "factor": 4.0}})
    np.testing.assert_allclose(lin, base / 4)
    l3 = rf.rope_inv_freq({**cfg, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}})
    wavelen = 2 * np.pi / base
    hi = wavelen < 16
    lo = wavelen > 64
    mid = ~hi & ~lo
    assert hi.any() and lo.any() and mid.any()
    np.testing.assert_allclose(l3[hi], base[hi])
    np.testing.assert_allclose(l3[lo], base[lo] / 8)
    smooth = (64 / wavelen[mid] - 1) / 3
    np.testing.assert_allclose(l3[mid], (1 - smooth) * base[mid] / 8 + smooth * base[mid])


# ---------------------------------------------------------------------------------------------
# 2. Random models through the engine.

TOKENIZER = "tok512" if shared_dir_or_none() else "none"

# name: (gen_model flags, HF dtype, GGUF types, n_tokens)
CASES = {
    # GQA 2:1, head_dim 64, tied
    "llama_gqa_hd64": (["--arch", "llama", "--hidden", 256, "--intermediate", 512, "--layers", 2,
                        "--heads", 4, "--kv-heads", 2, "--vocab", 768, "--tied"],
                       "f32", ["f32", "q8_0", "q4_0"], 24),
    # MQA, head_dim 128 (q_dim 512 != hidden 256), untied, llama3 RoPE scaling that bites at
    # short range (original context 64 -> wavelengths 16..64 blended, > 64 divided by 8)
    "llama_mqa_hd128_llama3": (["--arch", "llama", "--hidden", 256, "--intermediate", 384,
                                "--layers", 2, "--heads", 4, "--kv-heads", 1, "--head-dim", 128,
                                "--vocab", 640, "--untied", "--rope-scaling", "llama3:8:1:4:64"],
                               "f32", ["f32", "q8_0"], 24),
    # Qwen2: q/k/v bias, head_dim 8, GQA 4:1, theta 1e6, tied, rms eps 1e-6
    "qwen2_bias_hd8": (["--arch", "qwen2", "--hidden", 64, "--intermediate", 160, "--layers", 3,
                        "--heads", 8, "--kv-heads", 2, "--vocab", 512, "--tied",
                        "--rope-theta", 1e6, "--rms-eps", 1e-6], "f32", ["f32", "q8_0"], 20),
    # linear RoPE scaling, head_dim 32, GQA 2:1, untied, BF16 weights
    "llama_linear_bf16": (["--arch", "llama", "--hidden", 192, "--intermediate", 512,
                           "--layers", 2, "--heads", 6, "--kv-heads", 3, "--head-dim", 32,
                           "--vocab", 544, "--untied", "--rope-scaling", "linear:4"],
                          "bf16", ["bf16"], 20),
    # Qwen2 MHA, head_dim 64, untied, F16 weights, Q4_0
    "qwen2_mha_f16": (["--arch", "qwen2", "--hidden", 128, "--intermediate", 256, "--layers", 2,
                       "--heads", 2, "--kv-heads", 2, "--vocab", 576, "--untied"],
                      "f16", ["f16", "q4_0"], 16),
    # Qwen3: q/k norms, head_dim 64 with q_dim 256 != hidden 128, GQA 2:1, tied
    "qwen3_qknorm_tied": (["--arch", "qwen3", "--hidden", 128, "--intermediate", 256,
                           "--layers", 2, "--heads", 4, "--kv-heads", 2, "--head-dim", 64,
                           "--vocab", 512, "--tied", "--rope-theta", 1e6, "--rms-eps", 1e-6],
                          "f32", ["f32", "q8_0"], 20),
    # Qwen3 untied, MHA, head_dim 32, BF16 weights
    "qwen3_untied_bf16": (["--arch", "qwen3", "--hidden", 96, "--intermediate", 192,
                           "--layers", 2, "--heads", 3, "--kv-heads", 3, "--head-dim", 32,
                           "--vocab", 544, "--untied"], "bf16", ["bf16"], 16),
    # Mixtral: 4 experts, top 2 (softmax over the selected), llama GGUF layout (permuted Q/K)
    "mixtral_top2": (["--arch", "mixtral", "--hidden", 128, "--intermediate", 96, "--layers", 2,
                      "--heads", 4, "--kv-heads", 2, "--head-dim", 32, "--vocab", 512,
                      "--untied", "--experts", 4, "--experts-per-tok", 2],
                     "f32", ["f32", "f16"], 20),
    # Qwen3-MoE: 16 experts, top 4 renormalised, q/k norms, tied
    "qwen3moe_top4_norm": (["--arch", "qwen3moe", "--hidden", 128, "--intermediate", 256,
                            "--layers", 2, "--heads", 4, "--kv-heads", 2, "--head-dim", 32,
                            "--vocab", 512, "--tied", "--experts", 16, "--experts-per-tok", 4,
                            "--moe-intermediate", 64, "--norm-topk-prob"],
                           "f32", ["f32", "f16"], 20),
    # Qwen3-MoE with a dense layer (mlp_only_layers; HF only: GGUF MoE files are all sparse),
    # top-k weights not renormalised
    "qwen3moe_mlp_only": (["--arch", "qwen3moe", "--hidden", 96, "--intermediate", 192,
                                "--layers", 3, "--heads", 3, "--kv-heads", 1, "--head-dim", 32,
                                "--vocab", 512, "--untied", "--experts", 8,
                                "--experts-per-tok", 2, "--moe-intermediate", 32,
                                "--no-norm-topk-prob", "--mlp-only-layers", "1"],
                               "f32", [], 16),
    # Qwen2-MoE: q/k/v biases, 8 experts top 2 (not renormalised), sigmoid-gated shared expert
    "qwen2moe_shared": (["--arch", "qwen2moe", "--hidden", 128, "--intermediate", 256,
                         "--layers", 2, "--heads", 4, "--kv-heads", 2, "--head-dim", 32,
                         "--vocab", 512, "--untied", "--experts", 8, "--experts-per-tok", 2,
                         "--moe-intermediate", 64, "--shared-intermediate", 96,
                         "--no-norm-topk-prob"], "f32", ["f32"], 20),
    # Gemma 3: 5 local layers (window 5) per global one over 20 tokens, q/k norms, (1 + w)
    # norms, GeGLU, embedding scale, local RoPE base 1e4 and global 1e6 with linear x8 scaling
    # on the global layers only (as Gemma-3-4B), tied; GGUF norms stored as 1 + w
    "gemma3_swa_scaled": (["--arch", "gemma3", "--hidden", 128, "--intermediate", 256,
                           "--layers", 6, "--heads", 4, "--kv-heads", 2, "--head-dim", 32,
                           "--vocab", 512, "--tied", "--rope-theta", 1e6,
                           "--rope-scaling", "linear:8", "--sliding-window", 5],
                          "f32", ["f32", "q8_0"], 20),
    # Gemma 3 shapes GGUF cannot hold (HF only): query_pre_attn_scalar != head_dim, a global
    # layer every 3rd, local RoPE base 2e4, untied, MQA, head_dim 64
    "gemma3_qpas_pattern": (["--arch", "gemma3", "--hidden", 96, "--intermediate", 192,
                                  "--layers", 3, "--heads", 2, "--kv-heads", 1, "--head-dim", 64,
                                  "--vocab", 544, "--untied", "--sliding-window", 6,
                                  "--query-pre-attn-scalar", 40, "--sliding-window-pattern", 3,
                                  "--rope-local-theta", 20000], "f32", [], 18),
    # Gemma 2: local (window 6) and global layers alternate, soft-caps small enough to bite
    # (attention 3, final 2), no q/k norms, GQA 2:1
    "gemma2_softcap": (["--arch", "gemma2", "--hidden", 128, "--intermediate", 256,
                        "--layers", 4, "--heads", 4, "--kv-heads", 2, "--head-dim", 32,
                        "--vocab", 512, "--tied", "--sliding-window", 6, "--attn-softcap", 3,
                        "--final-softcap", 2], "f32", ["f32", "q8_0"], 20),
    # Gemma 2 with its default caps (50, 30), untied, F16 weights
    "gemma2_default_caps_f16": (["--arch", "gemma2", "--hidden", 128, "--intermediate", 192,
                                 "--layers", 2, "--heads", 2, "--kv-heads", 2, "--head-dim", 64,
                                 "--vocab", 512, "--untied", "--sliding-window", 7],
                                "f16", ["f16"], 16),
    # Mistral sliding window 5 over 16 tokens, MQA, head_dim 32
    "mistral_swa": (["--arch", "mistral", "--hidden", 128, "--intermediate", 256, "--layers", 2,
                     "--heads", 4, "--kv-heads", 1, "--vocab", 512, "--untied",
                     "--sliding-window", 5], "f32", ["f32"], 16),
}


class Case:
    def __init__(self, name, root):
        flags, self.dtype, self.gguf_types, n_tokens = CASES[name]
        seed = 1000 + sorted(CASES).index(name)
        self.dir = os.path.join(root, name)
        self.hf = os.path.join(self.dir, "hf")
        self.gguf = {t: os.path.join(self.dir, f"model-{t}.gguf") for t in self.gguf_types}
        for i, t in enumerate(self.gguf_types or [None]):
            args = ["--quiet", "--seed", seed, "--tokenizer", TOKENIZER, "--dtype", self.dtype,
                    *flags]
            if t is not None:
                args += ["--gguf", self.gguf[t], "--gguf-type", t]
            if i == 0:
                args += ["--out", self.hf]
            assert gen_model.main([str(a) for a in args]) == 0
        with open(os.path.join(self.hf, "config.json")) as f:
            self.vocab = json.load(f)["vocab_size"]
        rng = np.random.default_rng(seed)
        self.ids = [1] + rng.integers(0, self.vocab, n_tokens - 1).tolist()
        self.ids[3] = self.vocab - 1  # last embedding row
        self._ref = {}

    def reference(self, variant):
        """variant: 'hf' or a GGUF type (reference on that file's dequantized weights)."""
        if variant not in self._ref:
            path = self.hf if variant == "hf" else self.gguf[variant]
            self._ref[variant] = rf.reference_logits(path, self.ids)
        return self._ref[variant]

    def path(self, variant):
        return self.hf if variant == "hf" else self.gguf[variant]


_CASE_CACHE = {}


@pytest.fixture(scope="module")
def case_factory(scratch_dir):
    def get(name):
        if name not in _CASE_CACHE:
            _CASE_CACHE[name] = Case(name, os.path.join(scratch_dir, "reference_logits"))
        return _CASE_CACHE[name]
    return get


VARIANTS = [(name, v) for name, (_, _, gtypes, _) in CASES.items() for v in ["hf", *gtypes]]


def tolerance(case, variant):
    kind = case.dtype if variant == "hf" else variant
    return TOL["quant"] if kind.startswith("q") else TOL[kind]


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_model_reference_consistency(case_factory, name):
    """Without the binary: GGUF (F32/F16/BF16) reference == HF reference (permutation, rope
    metadata, biases, sliding window all round-trip), and the scaled-RoPE / sliding-window
    cases really differ from their plain versions."""
    c = case_factory(name)
    hf = c.reference("hf")
    assert hf.shape == (len(c.ids), c.vocab)
    assert 0.3 < hf.std() < 5, "logits should have a useful spread"
    for t in c.gguf_types:
        err = rel_err(c.reference(t), hf)
        if t in ("f32", c.dtype):  # differences: eps/theta/rope factors stored as float32
            assert err < 1e-6, (t, err)
        else:
            assert err < {"f16": 0.02, "q8_0": 0.1, "q4_0": 0.6}[t], (t, err)
    cfg = rf.load_config(c.hf)
    weights = rf.load_hf_weights(c.hf)
    if cfg.get("rope_scaling"):
        plain = rf.forward({**cfg, "rope_scaling": None}, weights, c.ids)
        assert rel_err(plain, hf) > 1e-3, "rope scaling has no visible effect in this case"
    if cfg.get("model_type") == "mistral" and cfg.get("sliding_window"):
        full = rf.forward({**cfg, "sliding_window": None}, weights, c.ids)
        assert rel_err(full, hf) > 1e-3, "sliding window has no visible effect in this case"
        n = cfg["sliding_window"]
        np.testing.assert_allclose(full[:n], hf[:n], rtol=0, atol=1e-12)
    if cfg.get("model_type") in rf.GEMMA_MODEL_TYPES:
        n = cfg["sliding_window"]
        assert len(c.ids) > 2 * n, "prompts must be longer than the window"
        full = rf.forward({**cfg, "sliding_window": 10 ** 6}, weights, c.ids)
        assert rel_err(full, hf) > 1e-3, "sliding window has no visible effect in this case"
        np.testing.assert_allclose(full[:n], hf[:n], rtol=0, atol=1e-12)
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            if cfg.get(key) is not None and cfg[key] < 10:
                uncapped = rf.forward({**cfg, key: None}, weights, c.ids)
                assert rel_err(uncapped, hf) > 1e-3, f"{key} has no visible effect"
        if cfg.get("rope_local_base_freq"):
            other = rf.forward({**cfg, "rope_local_base_freq": 1e6}, weights, c.ids)
            assert rel_err(other, hf) > 1e-3, "the local RoPE base has no visible effect"


def run_engine(binary, model_path, ids, out_path):
    cmd = [binary, "logits", "--model", model_path, "--token-ids", ",".join(map(str, ids)),
           "--output", out_path]
    if os.path.exists(out_path):
        os.remove(out_path)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(cmd)}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return np.fromfile(out_path, dtype="<f4")


@pytest.mark.parametrize("name,variant", VARIANTS, ids=[f"{n}-{v}" for n, v in VARIANTS])
def test_engine_logits(pagellm_binary, case_factory, name, variant):
    c = case_factory(name)
    out = os.path.join(c.dir, f"logits-{variant}.f32")
    raw = run_engine(pagellm_binary, c.path(variant), c.ids, out)
    n = len(c.ids)
    assert raw.size == n * c.vocab, f"expected {n}x{c.vocab} float32, got {raw.size} values"
    got = raw.reshape(n, c.vocab)
    assert np.isfinite(got).all()
    tol = tolerance(c, variant)
    ref = c.reference(variant)  # same weights as the file holds
    err = rel_err(got, ref)
    assert err <= tol, f"{name}/{variant}: rel err {err:.3e} > {tol:.0e}"
    if variant.startswith("q"):
        top2 = np.sort(ref, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > 2 * tol * np.abs(ref).max()
        assert (got.argmax(1) == ref.argmax(1))[clear].all(), f"{name}/{variant}: argmax differs"
        orig = c.reference("hf")
        budget = rel_err(ref, orig) + tol
        err_orig = rel_err(got, orig)
        assert err_orig <= budget, f"{name}/{variant}: {err_orig:.3e} vs original > {budget:.3e}"


GREEDY = [(name, v) for name, (_, dtype, gtypes, _) in CASES.items()
          for v in ["hf", *gtypes] if (dtype if v == "hf" else v) == "f32"]


@pytest.mark.parametrize("name,variant", GREEDY, ids=[f"{n}-{v}" for n, v in GREEDY])
def test_engine_greedy_ids(pagellm_binary, case_factory, name, variant):
    """`pagellm generate` at temperature 0 picks the reference's argmax at every step (teacher
    forcing the engine's ids through the reference), wherever the reference's top-2 gap is
    clear of the float32 tolerance."""
    if TOKENIZER == "none":
        pytest.skip("a model without a tokenizer (../shared absent): generate needs one")
    c = case_factory(name)
    prompt = c.ids[:8]
    inp = os.path.join(c.dir, f"greedy-{variant}.jsonl")
    out = os.path.join(c.dir, f"greedy-{variant}.out.jsonl")
    with open(inp, "w") as f:
        f.write(json.dumps({"prompt_token_ids": prompt, "temperature": 0, "max_tokens": 16,
                            "ignore_eos": True}) + "\n")
    cmd = [pagellm_binary, "generate", "--model", c.path(variant), "--input", inp,
           "--output", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    with open(out) as f:
        ids = json.loads(f.readline())["token_ids"]
    assert len(ids) == 16
    ref = rf.reference_logits(c.path(variant), prompt + ids)[len(prompt) - 1:-1]
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * TOL["f32"] * np.abs(ref).max()
    assert clear.sum() >= 12, "too many near-ties to say anything"
    assert (ref.argmax(1) == np.asarray(ids))[clear].all(), (ids, ref.argmax(1).tolist())


MOE_CASES = sorted(n for n in CASES if "moe" in n or "mixtral" in n)


@pytest.mark.parametrize("name", MOE_CASES)
def test_inspect_and_plan_count_active_parameters(pagellm_binary, case_factory, name):
    """`inspect` and `plan` report all parameters and those one token uses: everything but the
    (experts - experts_per_tok) unselected experts of each sparse layer."""
    c = case_factory(name)
    cfg = rf.load_config(c.hf)
    weights = rf.load_hf_weights(c.hf)
    total = sum(v.size for v in weights.values())
    n_exp = cfg.get("num_local_experts") or cfg["num_experts"]
    experts = sum(v.size for k, v in weights.items() if ".experts." in k)
    active = total - experts * (n_exp - cfg["num_experts_per_tok"]) // n_exp
    for variant in ["hf", *c.gguf_types]:
        r = subprocess.run([pagellm_binary, "inspect", "--json", c.path(variant)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["num_parameters"] == total
        assert j["moe"]["active_parameters"] == active
    r = subprocess.run([pagellm_binary, "plan", "--json", "--model", c.hf, "--max-model-len", "256"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    moe = json.loads(r.stdout)["moe"]
    assert (moe["num_parameters"], moe["active_parameters"]) == (total, active)
    assert moe["active_weights_bytes_per_token"] == 4 * active  # float32 weights
