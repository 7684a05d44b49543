"""--dtype (vLLM's flag) converts unquantized weight matrices at load.

Reference: a copy of stories260K whose 2-D tensors were rounded to bfloat16 (round to nearest
even, computed here with integer arithmetic on the float32 bits) and written as BF16
safetensors. `pagellm generate --dtype bfloat16` on the float32 model must give exactly the
tokens of the BF16 copy with --dtype auto (the same weight bits reach the same kernels), and
`--dtype float32` on the BF16 copy must give the tokens of a float32 copy holding the
bfloat16-rounded values (the conversion back is exact, and the float32 kernels run). Norms stay
float32 either way.
"""

import json
import os
import shutil
import struct
import subprocess

import numpy as np

from reference_forward import read_safetensors


def bf16_bits(x):
    """float32 -> bfloat16 bit patterns, rounded to nearest even (finite inputs)."""
    u = x.astype("<f4").view("<u4").astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype("<u2")


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def generate(binary, model, *flags):
    out = subprocess.run([binary, "generate", "--model", model, "--prompt", "Once upon a time",
                          "--max-tokens", "48", "--temperature", "0", "--json", "--logprobs", "1",
                          "--kv-cache-memory", "32MiB"] + list(flags),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def token_ids(result):
    """(token id, logprob) per generated token: the logprobs tell weights apart that give the
    same greedy tokens."""
    return [(e["token_id"], e["logprob"]) for e in result["logprobs"]]


def copy_model(src, dst, matrix_dtype):
    """stories260K with its 2-D tensors rounded to bfloat16, stored as BF16 or as float32."""
    dst.mkdir()
    for name in os.listdir(src):
        if name.endswith(".json") or name.startswith("tokenizer"):
            shutil.copy(os.path.join(src, name), dst / name)
    tensors = {}
    for name, t in read_safetensors(os.path.join(src, "model.safetensors"),
                                    to_float64=False).items():
        if t.ndim != 2:
            tensors[name] = ("F32", t.shape, t.astype("<f4").tobytes())
        elif matrix_dtype == "BF16":
            tensors[name] = ("BF16", t.shape, bf16_bits(t).tobytes())
        else:
            widened = (bf16_bits(t).astype("<u4") << 16).view("<f4")
            tensors[name] = ("F32", t.shape, widened.tobytes())
    write_safetensors(str(dst / "model.safetensors"), tensors)
    if matrix_dtype == "BF16":
        config = json.loads((dst / "config.json").read_text())
        config["torch_dtype"] = "bfloat16"
        (dst / "config.json").write_text(json.dumps(config))


def test_dtype_bfloat16_equals_a_bf16_checkpoint(pagellm_binary, shared_dir, tmp_path):
    src = os.path.join(shared_dir, "models", "stories260K")
    bf16_dir = tmp_path / "stories260K-bf16"
    copy_model(src, bf16_dir, "BF16")
    rounded_f32_dir = tmp_path / "stories260K-bf16-values-f32"
    copy_model(src, rounded_f32_dir, "F32")

    as_f32 = generate(pagellm_binary, src)
    cast = generate(pagellm_binary, src, "--dtype", "bfloat16")
    stored = generate(pagellm_binary, str(bf16_dir))
    assert token_ids(cast) == token_ids(stored)
    assert token_ids(cast) != token_ids(as_f32)  # the conversion took place
    back = generate(pagellm_binary, str(bf16_dir), "--dtype", "float32")
    assert token_ids(back) == token_ids(generate(pagellm_binary, str(rounded_f32_dir)))
    same = generate(pagellm_binary, src, "--dtype", "float")
    assert token_ids(same) == token_ids(as_f32)
    bad = subprocess.run([pagellm_binary, "generate", "--model", src, "--dtype", "int3"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--dtype int3" in bad.stderr
