#!/usr/bin/env bash
# Decode comparisons on a memory bus shared with other tenants: runs one alternating round of
# bench/compare_latency.py (pagellm, then llama-bench, tg128) for each model in turn, but only
# in minutes when build/bench/roofline reads at least THRESH GB/s just before; the roofline is
# read again right after, so a round during which the bus filled up can be told apart.
# Prints one line per round: time, bus read before -> after, and compare_latency's table row.
#
#   LLAMA_BENCH=/path/to/llama-bench bench/quiet_rounds.sh MODEL.gguf [MODEL.gguf ...]
#   env: PAGELLM (build/pagellm), THRESH (68), MINUTES (60; or SECONDS_TOTAL), BANDWIDTH (80.1: the quiet
#        roofline for the % column), LOCK (a file to flock around each poll and round, so
#        that other jobs of the same machine can wait for them)
set -euo pipefail
cd "$(dirname "$0")/.."
pagellm=${PAGELLM:-build/pagellm}
thresh=${THRESH:-68}
bandwidth=${BANDWIDTH:-80.1}
lock=${LOCK:-/tmp/pagellm-bench.lock}
end=$(($(date +%s) + ${SECONDS_TOTAL:-$((${MINUTES:-60} * 60))}))
read_bw() {
  build/bench/roofline --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["read_bandwidth_gbs"])'
}
round() {  # model; exit 1 when the bus is busy
  local before after row
  before=$(read_bw)
  python3 -c "import sys; sys.exit(0 if $before >= $thresh else 1)" || return 1
  row=$(bench/compare_latency.py --pagellm "$pagellm" --llama-bench "$LLAMA_BENCH" --pp 0 \
    --tg 128 --reps 3 --rounds 1 --bandwidth-gbs "$bandwidth" "$1" | grep '^| ' | sed -n 2p)
  after=$(read_bw)
  echo "$(date -u +%T) bus $before -> $after GB/s $row"
}
export -f round read_bw
export pagellm thresh bandwidth LLAMA_BENCH
models=("$@")
n=0
while [ "$(date +%s)" -lt "$end" ]; do
  m=${models[$((n % ${#models[@]}))]}
  if flock "$lock" bash -c "round '$m'"; then n=$((n + 1)); fi
  sleep 15
done
