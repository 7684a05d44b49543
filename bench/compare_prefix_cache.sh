#!/usr/bin/env bash
# Prefix-caching benchmark (RAG-like), one run, same GGUF file and same prompts everywhere:
#   1. `pagellm serve` with prefix caching on (the default),
#   2. `pagellm serve --no-enable-prefix-caching`,
#   3. llama.cpp's `llama-server` (its per-slot prompt cache is on by default: cache_prompt),
# each driven by `pagellm bench serve --dataset prefix-sharing` (one shared context of
# PREFIX_LEN tokens, each request adds SUFFIX_LEN unique tokens and asks for OUTPUT_LEN), and then
# the cost of caching when nothing is shared: pagellm on vs off on the random dataset (same
# lengths, no common prefix), REPEATS times alternating, so slow drift of the machine hits both.
# llama.cpp is built outside this repository (docs/BENCHMARKING.md).
#
#   LLAMA_SERVER=/path/to/llama-server bench/compare_prefix_cache.sh MODEL.gguf
# Environment: CONC (4), PROMPTS (32), PREFIX_LEN (2000), SUFFIX_LEN (50), OUTPUT_LEN (32),
#   REPEATS (3), PAGELLM (build/pagellm), OUT (build/compare_prefix_cache).
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
conc=${CONC:-4}
prompts=${PROMPTS:-32}
prefix_len=${PREFIX_LEN:-2000}
suffix_len=${SUFFIX_LEN:-50}
out_len=${OUTPUT_LEN:-32}
repeats=${REPEATS:-3}
pagellm=${PAGELLM:-build/pagellm}
out=${OUT:-build/compare_prefix_cache}
max_len=$((prefix_len + suffix_len + out_len + 64))
mkdir -p "$out"

source bench/lib/wait_ready.sh

bench() {  # name port dataset
  local extra=()
  if [ "$3" = prefix-sharing ]; then
    extra=(--num-prefixes 1 --prefix-len "$prefix_len" --suffix-len "$suffix_len")
  else
    extra=(--input-len $((prefix_len + suffix_len)))
  fi
  "$pagellm" bench serve --base-url "http://127.0.0.1:$2" --model "$model" \
    --tokenizer-model "$model" --dataset "$3" "${extra[@]}" --num-prompts "$prompts" \
    --output-len "$out_len" --max-concurrency "$conc" --seed 7 --json "$out/$1.json" \
    | tee "$out/$1.txt"
}

pagellm_run() {  # name dataset [server flags...]
  local name=$1 dataset=$2
  shift 2
  "$pagellm" serve "$model" --port 8021 --max-model-len "$max_len" --disable-log-requests "$@" \
    >"$out/$name-server.log" 2>&1 &
  local pid=$!
  wait_ready 8021
  bench "$name" 8021 "$dataset"
  kill "$pid"
  wait "$pid" || true
}

pagellm_run pagellm-cache-on prefix-sharing
pagellm_run pagellm-cache-off prefix-sharing --no-enable-prefix-caching

"$LLAMA_SERVER" -m "$model" --port 8022 -np "$conc" -c $((max_len * conc)) -t "$(nproc)" -cb \
  >"$out/llama-server.log" 2>&1 &
pid=$!
wait_ready 8022
bench llama-server 8022 prefix-sharing
kill "$pid"
wait "$pid" || true

for i in $(seq 1 "$repeats"); do
  pagellm_run "nosharing-on-$i" random
  pagellm_run "nosharing-off-$i" random --no-enable-prefix-caching
done
