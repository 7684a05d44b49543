#!/usr/bin/env python3
"""Teacher-forced next-token agreement between pagellm and llama.cpp on the same GGUF file.

llama.cpp's logits come from its own perplexity tool, which saves them when asked for a
KL-divergence base (llama.cpp built outside this repository):

    llama-perplexity -m MODEL.gguf -f TEXT -c 1024 --chunks 1 -t 2 --kl-divergence-base BASE

That file holds, in this order (all little-endian): the 8 bytes "_logits_", int32 n_ctx, int32
n_vocab, int32 n_chunk, int32 tokens[n_chunk * n_ctx] (the tokenized text, before the
tool puts BOS in front of each chunk), then for every chunk the positions n_ctx/2 .. n_ctx - 2,
each as nv = 2 * ceil(n_vocab / 2) + 4 uint16 values: two float32 (scale, log-probability of
the smallest kept logit) and n_vocab codes, code = round((logit - min_logit) / scale) where
min_logit = max(min logit, max logit - 16). So the argmax of the codes is llama.cpp's top-1
(ties within one code step, 16/65535 nats, are broken by the lowest id, as numpy does).

This script rebuilds each chunk's token ids exactly as llama-perplexity fed them (BOS in
position 0 when the model adds one), asks `pagellm logits` for the float32 logits of the
same ids in one causal pass, and compares, over the same scored positions:
  - top-1 agreement (pagellm's argmax == llama.cpp's code argmax; positions where llama.cpp's
    best two codes tie are counted as agreeing when pagellm picks either of them),
  - KL(llama.cpp || pagellm) from llama.cpp's decoded log-probabilities (codes of 0 are
    clamped logits: their probability is below e^-16 of the top and is kept as such).

    bench/llama_logits_agreement.py --base BASE --model MODEL.gguf [--bos-id N] [--json]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def read_base(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"_logits_":
        raise SystemExit(f"{path}: not a llama-perplexity logits file (no _logits_ magic)")
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<iii", data, 8)
    off = 20
    tokens = np.frombuffer(data, dtype="<i4", count=n_chunk * n_ctx, offset=off)
    off += 4 * n_chunk * n_ctx
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first = n_ctx // 2
    per_chunk = n_ctx - 1 - first
    need = off + 2 * nv * per_chunk * n_chunk
    if len(data) < need:
        # llama-perplexity stops early when the text is shorter than asked: keep whole chunks.
        n_chunk = (len(data) - off) // (2 * nv * per_chunk)
    records = np.frombuffer(data, dtype="<u2", count=nv * per_chunk * n_chunk, offset=off)
    records = records.reshape(n_chunk, per_chunk, nv)
    return n_ctx, n_vocab, n_chunk, tokens.reshape(-1, n_ctx)[:n_chunk], records


def pagellm_logits(binary, model, ids, threads, vocab):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")
        cmd = [binary, "logits", "--model", model, "--token-ids", ",".join(map(str, ids)),
               "--output", out]
        if threads:
            cmd += ["--threads", str(threads)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        logits = np.fromfile(out, dtype="<f4")
    if logits.size != len(ids) * vocab:
        raise SystemExit(f"pagellm logits: {logits.size} values for {len(ids)} ids x {vocab}")
    return logits.reshape(len(ids), vocab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="llama-perplexity --kl-divergence-base file")
    ap.add_argument("--model", required=True, help="the same GGUF file")
    ap.add_argument("--pagellm", default="build/pagellm")
    ap.add_argument("--bos-id", type=int, required=True,
                    help="BOS id that llama-perplexity puts in position 0 of each chunk (its log "
                    "prints it; -1 when the model adds none)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    n_ctx, n_vocab, n_chunk, tokens, records = read_base(args.base)
    first = n_ctx // 2
    agree = positions = 0
    kl_sum = 0.0
    kl_max = 0.0
    for c in range(n_chunk):
        ids = tokens[c].astype(np.int64).tolist()
        if args.bos_id >= 0:
            ids[0] = args.bos_id
        ours = pagellm_logits(args.pagellm, args.model, ids, args.threads, n_vocab)
        for i in range(records.shape[1]):
            rec = records[c, i]
            scale, min_log_prob = np.frombuffer(rec[:4].tobytes(), dtype="<f4")
            codes = rec[4:4 + n_vocab].astype(np.int64)
            row = ours[first + i].astype(np.float64)
            top = int(np.argmax(codes))
            best_two = np.sort(codes)[-2:]
            ties = np.flatnonzero(codes == codes[top]) if best_two[0] == best_two[1] else [top]
            positions += 1
            agree += int(int(np.argmax(row)) in set(int(t) for t in ties))
            # llama.cpp's log-probabilities: min_log_prob + scale * code.
            lp_ref = min_log_prob + scale * codes.astype(np.float64)
            m = row.max()
            lp_ours = row - m - np.log(np.exp(row - m).sum())
            p_ref = np.exp(lp_ref)
            p_ref /= p_ref.sum()
            kl = float(np.sum(p_ref * (np.log(p_ref) - lp_ours)))
            kl_sum += kl
            kl_max = max(kl_max, kl)
    result = {
        "positions": positions,
        "top1_agreement": agree / positions if positions else 0.0,
        "mean_kl": kl_sum / positions if positions else 0.0,
        "max_kl": kl_max,
        "n_ctx": n_ctx,
        "chunks": n_chunk,
        "vocab": n_vocab,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{positions} positions ({n_chunk} chunks of {n_ctx}, scored from {first}): "
              f"top-1 agreement {100 * result['top1_agreement']:.2f}%, "
              f"mean KL {result['mean_kl']:.3g} nats (max {kl_max:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
