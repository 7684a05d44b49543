#!/usr/bin/env bash
# Serving benchmark, side by side: `pagellm serve` and llama.cpp's `llama-server` on the same GGUF
# file, driven by `pagellm bench serve` with the same prompts (same seed), for each concurrency
# in turn, both engines one after the other in one run. llama.cpp is built outside this
# repository (docs/BENCHMARKING.md).
#
#   LLAMA_SERVER=/path/to/llama-server bench/compare_serve.sh MODEL.gguf \
#       [CONCURRENCIES (default "1 8 32")] [PROMPTS (64)] [INPUT_LEN (256)] [OUTPUT_LEN (128)]
#
# llama-server gets SLOTS parallel slots (default 8, continuous batching on) of the longest
# prompt + the longest output + 64 tokens of context each: it cannot run more sequences at once
# than it has slots. pagellm serve gets the same per-request context (--max-model-len) and sizes
# its paged KV cache as it does by default; its start-up log (kept in OUT) states how many
# blocks that is. Percentiles of TTFT, TPOT, ITL and end-to-end latency: 50, 90, 99.
#
# env: RANGE_RATIO (0) and OUTPUT_RANGE_RATIO (RANGE_RATIO) spread the prompt and output lengths
# (`pagellm bench serve --range-ratio/--output-range-ratio`); ROUNDS (1) repeats the pair of
# runs, engines alternating, and the summary at the end gives per-round ratios and medians.
# EXTRA_BODY_FILE: a JSON object merged into every request of both engines (`--extra-body`),
# e.g. the output of bench/utf8_logit_bias.py, which keeps a random-weight model's text valid
# UTF-8 so that llama-server does not cancel requests (see that script).
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
concurrencies="${2:-1 8 32}"
prompts="${3:-64}"
in_len="${4:-256}"
out_len="${5:-128}"
slots=${SLOTS:-8}
rounds=${ROUNDS:-1}
range_ratio=${RANGE_RATIO:-0}
output_range_ratio=${OUTPUT_RANGE_RATIO:-$range_ratio}
# The longest request the dataset can draw (SampleLengths: ceil(L * (1 + R))).
in_max=$(/usr/bin/python3 -c "import math; print(math.ceil($in_len * (1 + $range_ratio)))")
out_max=$(/usr/bin/python3 -c "import math; print(math.ceil($out_len * (1 + $output_range_ratio)))")
max_len=$((in_max + out_max + 64))
pagellm=${PAGELLM:-build/pagellm}
out=${OUT:-build/compare_serve}
mkdir -p "$out"

source bench/lib/wait_ready.sh
extra_body=()
if [ -n "${EXTRA_BODY_FILE:-}" ]; then extra_body=(--extra-body "$(cat "$EXTRA_BODY_FILE")"); fi

run_bench() {  # name port concurrency round
  "$pagellm" bench serve --base-url "http://127.0.0.1:$2" --model "$model" --tokenizer-model "$model" \
    --dataset random --num-prompts "$prompts" --input-len "$in_len" --output-len "$out_len" \
    --range-ratio "$range_ratio" --output-range-ratio "$output_range_ratio" \
    --max-concurrency "$3" --seed 7 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --json "$out/$1-c$3-r$4.json" "${extra_body[@]}" |
    tee "$out/$1-c$3-r$4.txt"
}

echo "compare_serve: $model, prompts $prompts, input $in_len (ratio $range_ratio, max $in_max)," \
  "output $out_len (ratio $output_range_ratio, max $out_max), context per request $max_len," \
  "llama-server slots $slots, rounds $rounds, extra body ${EXTRA_BODY_FILE:-none}"
for round in $(seq 1 "$rounds"); do
  for conc in $concurrencies; do
    "$pagellm" serve "$model" --port 8011 --max-num-seqs "$(( conc > 8 ? conc : 8 ))" \
      --max-model-len "$max_len" --disable-log-requests >"$out/pagellm-server-c$conc-r$round.log" 2>&1 &
    pid=$!
    wait_ready 8011
    run_bench pagellm 8011 "$conc" "$round"
    kill "$pid"; wait "$pid" || true

    "$LLAMA_SERVER" -m "$model" --port 8012 -np "$slots" -c $((max_len * slots)) -t "$(nproc)" -cb \
      >"$out/llama-server-c$conc-r$round.log" 2>&1 &
    pid=$!
    wait_ready 8012
    run_bench llama-server 8012 "$conc" "$round"
    kill "$pid"; wait "$pid" || true
  done
done

# Summary: per concurrency, each round's output tokens/s and TTFT p50/p99 of both engines, the
# ratios (pagellm over llama-server for throughput, llama-server over pagellm for TTFT: > 1 means
# pagellm is better) and their medians over the rounds. A request that failed counts no tokens
# but its work may have been done (llama-server 3f545becc cancels a stream when its output
# parser rejects the text of a random-weight model), so a round in which either engine lost
# requests is flagged and left out of the median: its throughput ratio is not like for like.
/usr/bin/python3 - "$out" "$rounds" $concurrencies <<'PY'
import json, statistics, sys
out, rounds, concs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| concurrency | round | pagellm out tok/s | llama-server out tok/s | ratio | "
      "pagellm TTFT p50 / p99 ms | llama-server TTFT p50 / p99 ms | failed (pagellm / llama-server) |")
print("|---:|---:|---:|---:|---:|---|---|---|")
for c in concs:
    ratios = []
    for r in range(1, rounds + 1):
        a = json.load(open(f"{out}/pagellm-c{c}-r{r}.json"))
        b = json.load(open(f"{out}/llama-server-c{c}-r{r}.json"))
        ratio = a["output_throughput"] / b["output_throughput"]
        failed = (a.get("failed", 0), b.get("failed", 0))
        if failed == (0, 0):
            ratios.append(ratio)
        first = next((e for e in a.get("errors", []) + b.get("errors", []) if e), "")
        note = f"{failed[0]} / {failed[1]}" + (f" (not comparable: {first[:80]})" if first else "")
        print(f"| {c} | {r} | {a['output_throughput']:.1f} | {b['output_throughput']:.1f} | "
              f"{ratio:.2f}x | {a['median_ttft_ms']:.0f} / {a['p99_ttft_ms']:.0f} | "
              f"{b['median_ttft_ms']:.0f} / {b['p99_ttft_ms']:.0f} | {note} |")
    med = f"**{statistics.median(ratios):.2f}x**" if ratios else "none without failures"
    print(f"| {c} | median | | | {med} | | | |")
PY
