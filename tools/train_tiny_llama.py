#!/usr/bin/env python3
"""Trains a small Llama-architecture model on a text file and writes it as a Hugging Face
directory (config.json, model.safetensors in float32, the tokenizer's files), for checks that
need a *trained* model of a shape the shared assets lack, e.g. K-quant-compatible rows
(multiples of 256) with hidden sizes where 8-bit activation noise averages out.

    /usr/bin/python3 tools/train_tiny_llama.py --text ../shared/data/tinystories_sample.txt \\
        --tokenizer-dir ../shared/models/stories260K --out /tmp/tiny512 --minutes 30

Needs PyTorch (Debian 12: apt-get install python3-torch); nothing in the build or the test suite
imports this tool. The model is the plain Llama block as Hugging Face's LlamaForCausalLM
computes it (RMSNorm, rotate-half RoPE on the HF-layout q/k weights, SwiGLU MLP, grouped-query
attention, tied embeddings), so tools/gen_model.py --weights-from converts it to GGUF like any
HF checkpoint. Documents are split on <|endoftext|>; the last --holdout-fraction of them is not
trained on and is written to OUT/holdout.txt (same separator) for evaluation. The learning
rate follows a cosine over the wall-clock budget (--minutes), after a linear warm-up.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model  # noqa: E402  (its SafetensorsWriter)

SEPARATOR = "<|endoftext|>"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text", required=True, help="training text, documents split on <|endoftext|>")
    p.add_argument("--tokenizer-dir", required=True,
                   help="directory with tokenizer.model (SentencePiece) and tokenizer_config.json")
    p.add_argument("--out", required=True, help="output Hugging Face directory")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--intermediate", type=int, default=1536)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ctx", type=int, default=256, help="training context (max_position_embeddings)")
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=30)
    p.add_argument("--minutes", type=float, default=30.0, help="wall-clock training budget")
    p.add_argument("--holdout-fraction", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--no-bf16", dest="bf16", action="store_false",
                   help="train in float32 (default: bfloat16 autocast for the matmuls, float32 "
                        "master weights and loss; ~4x faster on CPUs with AVX512-BF16)")
    return p.parse_args()


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        h, hd = a.hidden, a.hidden // a.heads
        self.heads, self.kv_heads, self.hd = a.heads, a.kv_heads, hd
        self.q = torch.nn.Linear(h, a.heads * hd, bias=False)
        self.k = torch.nn.Linear(h, a.kv_heads * hd, bias=False)
        self.v = torch.nn.Linear(h, a.kv_heads * hd, bias=False)
        self.o = torch.nn.Linear(a.heads * hd, h, bias=False)
        self.gate = torch.nn.Linear(h, a.intermediate, bias=False)
        self.up = torch.nn.Linear(h, a.intermediate, bias=False)
        self.down = torch.nn.Linear(a.intermediate, h, bias=False)
        self.attn_norm = torch.nn.Parameter(torch.ones(h))
        self.mlp_norm = torch.nn.Parameter(torch.ones(h))

    def forward(self, x, cos, sin, mask, eps):
        b, t, _ = x.shape
        y = rms_norm(x, self.attn_norm, eps)
        q = self.q(y).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(y).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(y).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.o(a)
        y = rms_norm(x, self.mlp_norm, eps)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    """Hugging Face's rotate-half RoPE: pairs (i, i + d/2) of each head."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class TinyLlama(torch.nn.Module):
    def __init__(self, a, vocab):
        super().__init__()
        self.eps, self.theta = 1e-5, 10000.0
        self.embed = torch.nn.Embedding(vocab, a.hidden)
        self.blocks = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = torch.nn.Parameter(torch.ones(a.hidden))
        hd = a.hidden // a.heads
        inv = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.outer(torch.arange(a.ctx, dtype=torch.float64), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        mask = torch.full((a.ctx, a.ctx), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, std=0.02)
        torch.nn.init.normal_(self.embed.weight, std=0.02)
        for blk in self.blocks:  # GPT-2's scaled init of the residual projections
            for m in (blk.o, blk.down):
                torch.nn.init.normal_(m.weight, std=0.02 / math.sqrt(2 * a.layers))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:t], self.sin[:t], self.mask[:t, :t], self.eps)
        return rms_norm(x, self.norm, self.eps) @ self.embed.weight.T


def tokenize(sp, docs, bos, eos):
    ids = []
    for d in docs:
        d = d.strip()
        if d:
            ids += [bos] + sp.encode(d) + [eos]
    return np.array(ids, dtype=np.int64)


def write_safetensors(out, tensors):
    """Writes float32 tensors as OUT/model.safetensors with gen_model.py's writer."""
    specs = [gen_model.TensorSpec(name, name, tuple(t.shape), "matrix")
             for name, t in tensors.items()]
    writer = gen_model.SafetensorsWriter(out, specs, "f32", None)
    for name, t in tensors.items():
        writer.write(name, t.detach().contiguous().float().numpy().astype("<f4"))
    writer.close()


def save(model, a, vocab, out):
    os.makedirs(out, exist_ok=True)
    t = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.norm}
    for i, blk in enumerate(model.blocks):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = blk.q.weight
        t[p + "self_attn.k_proj.weight"] = blk.k.weight
        t[p + "self_attn.v_proj.weight"] = blk.v.weight
        t[p + "self_attn.o_proj.weight"] = blk.o.weight
        t[p + "mlp.gate_proj.weight"] = blk.gate.weight
        t[p + "mlp.up_proj.weight"] = blk.up.weight
        t[p + "mlp.down_proj.weight"] = blk.down.weight
        t[p + "input_layernorm.weight"] = blk.attn_norm
        t[p + "post_attention_layernorm.weight"] = blk.mlp_norm
    write_safetensors(out, t)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": a.hidden, "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": a.hidden // a.heads,
        "vocab_size": vocab, "max_position_embeddings": a.ctx, "rms_norm_eps": model.eps,
        "rope_theta": model.theta, "rope_scaling": None, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f, indent=2)


def main():
    a = parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.tokenizer_dir, "tokenizer.model"))
    vocab = sp.get_piece_size()
    with open(a.text, encoding="utf-8") as f:
        docs = [d for d in f.read().split(SEPARATOR) if d.strip()]
    n_hold = max(1, int(len(docs) * a.holdout_fraction))
    train_docs, hold_docs = docs[:-n_hold], docs[-n_hold:]
    train = tokenize(sp, train_docs, sp.bos_id(), sp.eos_id())
    hold = tokenize(sp, hold_docs, sp.bos_id(), sp.eos_id())
    print(f"{len(train_docs)} training documents ({len(train)} tokens), "
          f"{len(hold_docs)} held out ({len(hold)} tokens), vocabulary {vocab}", flush=True)

    model = TinyLlama(a, vocab)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{n_params / 1e6:.2f}M parameters", flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    rng = np.random.default_rng(a.seed)
    budget, start, step = a.minutes * 60.0, time.time(), 0

    def batch(data):
        starts = rng.integers(0, len(data) - a.ctx - 1, size=a.batch)
        x = np.stack([data[s:s + a.ctx + 1] for s in starts])
        return torch.from_numpy(x[:, :-1]), torch.from_numpy(x[:, 1:])

    def held_out_loss(n=4):
        model.eval()
        with torch.no_grad():
            losses = []
            for _ in range(n):
                x, y = batch(hold)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                    logits = model(x)
                losses.append(F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).item())
        model.train()
        return sum(losses) / len(losses)

    while True:
        frac = (time.time() - start) / budget
        if frac >= 1.0:
            break
        lr = a.lr * min(1.0, (step + 1) / a.warmup_steps) * 0.5 * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(train)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0 or step <= 3:
            print(f"step {step}  {time.time() - start:6.0f} s  lr {lr:.2e}  train loss "
                  f"{loss.item():.3f}  held-out loss {held_out_loss():.3f}", flush=True)
    print(f"done: {step} steps, held-out loss {held_out_loss(16):.3f}", flush=True)
    save(model, a, vocab, a.out)
    for name in ("tokenizer.model", "tokenizer_config.json"):
        src = os.path.join(a.tokenizer_dir, name)
        if os.path.exists(src):
            shutil.copy(src, a.out)
    with open(os.path.join(a.out, "holdout.txt"), "w", encoding="utf-8") as f:
        f.write(SEPARATOR.join(hold_docs))
    # The trained function's own float32 logits for the first 64 held-out tokens, so a converted
    # copy (GGUF, another engine) can be checked against what was trained.
    model.eval()
    with torch.no_grad():
        ids = torch.from_numpy(hold[:64]).unsqueeze(0)
        np.save(os.path.join(a.out, "check_ids.npy"), hold[:64])
        np.save(os.path.join(a.out, "check_logits.npy"), model(ids)[0].numpy())
    print(f"wrote {a.out}", flush=True)


if __name__ == "__main__":
    main()
