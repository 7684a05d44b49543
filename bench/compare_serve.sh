#!/usr/bin/env bash
# Serving benchmark, side by side: `pagellm serve` and llama.cpp's `llama-server` on the same GGUF
# file, driven by `pagellm bench serve` with the same prompts (same seed), for each concurrency
# in turn, both engines one after the other in one run. llama.cpp is built outside this
# repository (docs/BENCHMARKING.md).
#
#   LLAMA_SERVER=/path/to/llama-server bench/compare_serve.sh MODEL.gguf \
#       [CONCURRENCIES (default "1 8 32")] [PROMPTS (64)] [INPUT_LEN (256)] [OUTPUT_LEN (128)]
#
# llama-server gets SLOTS parallel slots (default 8, continuous batching on) of INPUT_LEN +
# OUTPUT_LEN + 64 tokens of context each: it cannot run more sequences at once than it has
# slots. pagellm serve gets the same per-request context (--max-model-len) and sizes its paged
# KV cache as it does by default; its start-up log (kept in OUT) states how many blocks that is.
# Percentiles of TTFT, TPOT, ITL and end-to-end latency: 50, 90, 99.
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
concurrencies="${2:-1 8 32}"
prompts="${3:-64}"
in_len="${4:-256}"
out_len="${5:-128}"
slots=${SLOTS:-8}
max_len=$((in_len + out_len + 64))
pagellm=${PAGELLM:-build/pagellm}
out=${OUT:-build/compare_serve}
mkdir -p "$out"

source bench/lib/wait_ready.sh

run_bench() {  # name port concurrency
  "$pagellm" bench serve --base-url "http://127.0.0.1:$2" --model "$model" --tokenizer-model "$model" \
    --dataset random --num-prompts "$prompts" --input-len "$in_len" --output-len "$out_len" \
    --max-concurrency "$3" --seed 7 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --json "$out/$1-c$3.json" | tee "$out/$1-c$3.txt"
}

for conc in $concurrencies; do
  "$pagellm" serve "$model" --port 8011 --max-num-seqs "$(( conc > 8 ? conc : 8 ))" \
    --max-model-len "$max_len" --disable-log-requests >"$out/pagellm-server-c$conc.log" 2>&1 &
  pid=$!
  wait_ready 8011
  run_bench pagellm 8011 "$conc"
  kill "$pid"; wait "$pid" || true

  "$LLAMA_SERVER" -m "$model" --port 8012 -np "$slots" -c $((max_len * slots)) -t "$(nproc)" -cb \
    >"$out/llama-server-c$conc.log" 2>&1 &
  pid=$!
  wait_ready 8012
  run_bench llama-server 8012 "$conc"
  kill "$pid"; wait "$pid" || true
done
