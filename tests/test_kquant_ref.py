"""GGUF block types against llama.cpp's own files (shared/models/kquant-ref, made by
llama-quantize; expected.json by llama.cpp's gguf-py and a float64 forward):

- the independent numpy dequantizer (tests/gguf_blocks.py) reproduces llama.cpp's dequantized
  values bit for bit (sha256 of every tensor as float32); tests/kquant_ref_test.cc checks the
  engine's dequantizers against the same sha256s, so engine and numpy agree exactly;
- the float64 forward (tests/reference_forward.py) over the numpy-dequantized weights gives the
  expected top-5 logits and greedy ids (the engine's greedy ids are checked in
  kquant_ref_test.cc).

Skips when the shared assets are absent.
"""

import hashlib
import json
import os
import subprocess

import numpy as np
import pytest

import gguf_blocks
import reference_forward as rf

SHARED = os.environ.get("PAGELLM_SHARED_DIR",
                        os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
KDIR = os.path.join(SHARED, "models", "kquant-ref")
EXPECTED = os.path.join(KDIR, "expected.json")
FILES = ["F16", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "Q2_K", "Q3_K_S", "Q3_K_M",
         "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"]


@pytest.fixture(scope="module")
def expected():
    if not os.path.exists(EXPECTED):
        pytest.skip(f"shared assets absent: {KDIR}")
    with open(EXPECTED) as f:
        return json.load(f)


@pytest.mark.parametrize("preset", FILES)
def test_numpy_dequantizer_equals_llama_cpp(expected, preset):
    fn = f"kquant-ref-{preset}.gguf"
    g = rf.GgufReader(os.path.join(KDIR, fn))
    tensors = expected["files"][fn]["tensors"]
    assert tensors
    for name, e in tensors.items():
        t = g.tensors[name]
        assert gguf_blocks.TYPES[t["type"]][0] == e["type"], name
        assert t["shape"] == e["shape"], name
        x = g.tensor(name).reshape(-1, e["shape"][-1])
        np.testing.assert_array_equal(x[0, :16], np.float32(e["row0_first16"]), err_msg=name)
        np.testing.assert_array_equal(x[-1, :16], np.float32(e["last_row_first16"]), err_msg=name)
        digest = hashlib.sha256(x.astype("<f4").tobytes()).hexdigest()
        assert digest == e["sha256_f32"], f"{fn}: {name} ({e['type']})"


@pytest.mark.parametrize("preset", ["Q4_K_M", "Q6_K", "IQ4_XS", "Q2_K", "Q5_1"])
def test_float64_forward_over_numpy_dequantization(expected, preset):
    fn = f"kquant-ref-{preset}.gguf"
    weights, cfg = rf.load_gguf_weights(os.path.join(KDIR, fn))
    for g in expected["files"][fn]["greedy"]:
        ids = list(g["prompt_ids"])
        logits = rf.forward(cfg, weights, ids)[-1]
        top = np.argsort(-logits)[:5]
        want = g["top5_last_prompt"]
        assert [int(i) for i in top] == [w[0] for w in want], fn
        np.testing.assert_allclose(logits[top], [w[1] for w in want], rtol=0, atol=1e-9)
        out = []
        for _ in g["greedy_ids"]:
            nxt = int(np.argmax(rf.forward(cfg, weights, ids)[-1]))
            out.append(nxt)
            ids.append(nxt)
        assert out == g["greedy_ids"], fn


def run_logits(binary, model, ids, out):
    cmd = [binary, "logits", "--model", model, "--token-ids", ",".join(map(str, ids)),
           "--output", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


@pytest.mark.parametrize("preset", FILES[1:])
def test_engine_logits_teacher_forced(expected, pagellm_binary, tmp_path, preset):
    """Engine logits along the float64 greedy path of every prompt, against
    - the float64 forward that rounds activations to 8 bits and K/V to float16 as the engine
      does (reference_forward.forward(emulate_engine=True)): the engine's integer dot products
      reproduce it to fp32 precision (~1e-7) until an activation lands within fp32 noise of a
      rounding boundary; such a flip moves later logits by up to 1.8e-2 x max|logit|
      (measured), bound 3e-2;
    - the plain float64 forward: within the project's quantized-logits tolerance 5e-2
      (tests/test_reference_logits.py; 4.1e-2 measured, 8-bit activations included)."""
    fn = f"kquant-ref-{preset}.gguf"
    path = os.path.join(KDIR, fn)
    weights, cfg = rf.load_gguf_weights(path)
    for i, g in enumerate(expected["files"][fn]["greedy"]):
        ids = list(g["prompt_ids"]) + list(g["greedy_ids"])
        got = run_logits(pagellm_binary, path, ids, str(tmp_path / f"logits{i}.f32"))
        assert np.isfinite(got).all()
        emul = rf.forward(cfg, weights, ids, emulate_engine=True)
        plain = rf.forward(cfg, weights, ids)
        scale = np.abs(plain).max()
        assert np.abs(got - emul).max() <= 3e-2 * scale, fn
        assert np.abs(got - plain).max() <= 5e-2 * scale, fn


@pytest.mark.parametrize("preset", ["Q4_K_M", "IQ4_XS", "Q5_1"])
def test_inspect_reports_the_bytes_of_each_type(expected, pagellm_binary, preset):
    """`pagellm inspect --json`: bytes per type = the GGUF's tensors of that type at the
    format's block geometry (tests/gguf_blocks.py); 1-D tensors are norms (F32), not in the
    per-type table. `pagellm plan` counts the same weight bytes."""
    fn = f"kquant-ref-{preset}.gguf"
    path = os.path.join(KDIR, fn)
    r = subprocess.run([pagellm_binary, "inspect", "--json", path], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    g = rf.GgufReader(path)
    want = {}
    for t in g.tensors.values():
        if len(t["shape"]) == 2:
            name = gguf_blocks.TYPES[t["type"]][0]
            want[name] = want.get(name, 0) + gguf_blocks.nbytes(t["type"], int(np.prod(t["ne"])))
    assert report["dtype_bytes"] == want, fn
    r = subprocess.run([pagellm_binary, "plan", "--model", path, "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    norms = sum(4 * int(np.prod(t["ne"])) for t in g.tensors.values() if len(t["shape"]) == 1)
    assert plan["weights_bytes"] == report["weights_bytes"] == sum(want.values()) + norms, fn
