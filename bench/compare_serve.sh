#!/usr/bin/env bash
# Serving benchmark, side by side: `pagellm serve` and llama.cpp's `llama-server` on the same GGUF
# file, driven by `pagellm bench serve` with the same prompts (same seed) and concurrency, one
# after the other in one run. llama.cpp is built outside this repository (docs/BENCHMARKING.md).
#
#   LLAMA_SERVER=/path/to/llama-server bench/compare_serve.sh MODEL.gguf [CONCURRENCY] [PROMPTS] \
#       [INPUT_LEN] [OUTPUT_LEN]
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
conc="${2:-8}"
prompts="${3:-64}"
in_len="${4:-256}"
out_len="${5:-128}"
ctx=$(((in_len + out_len + 64) * conc))
pagellm=${PAGELLM:-build/pagellm}
out=${OUT:-build/compare_serve}
mkdir -p "$out"

wait_ready() {
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on port $1 did not come up" >&2
  return 1
}

run_bench() {  # name port
  "$pagellm" bench serve --base-url "http://127.0.0.1:$2" --model "$model" --tokenizer-model "$model" \
    --dataset random --num-prompts "$prompts" --input-len "$in_len" --output-len "$out_len" \
    --max-concurrency "$conc" --seed 7 --json "$out/$1-c$conc.json" | tee "$out/$1-c$conc.txt"
}

"$pagellm" serve "$model" --port 8011 --max-num-seqs "$conc" --max-model-len $((in_len + out_len + 64)) \
  --disable-log-requests >"$out/pagellm-server.log" 2>&1 &
pid=$!
wait_ready 8011
run_bench pagellm 8011
kill "$pid"; wait "$pid" || true

"$LLAMA_SERVER" -m "$model" --port 8012 -np "$conc" -c "$ctx" -t "$(nproc)" -cb \
  >"$out/llama-server.log" 2>&1 &
pid=$!
wait_ready 8012
run_bench llama-server 8012
kill "$pid"; wait "$pid" || true
