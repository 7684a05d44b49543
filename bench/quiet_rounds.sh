#!/usr/bin/env bash
# Decode comparisons on a memory bus shared with other tenants: runs one alternating round of
# bench/compare_latency.py (pagellm, then llama-bench, tg128) for each model in turn, but only
# in minutes when build/bench/roofline reads at least THRESH GB/s just before; the roofline is
# read again between the two engines' runs and after the round, so a round during which the bus
# filled up can be told apart, and pagellm's run is bracketed by the reads just before and just
# after it.
# Prints one line per round: time, bus read before -> between -> after, compare_latency's table
# row (whose last cell is the read between), and pagellm's decode GB/s as a share of the mean of
# the two reads around its run.
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
  local before after row between share
  before=$(read_bw)
  python3 -c "import sys; sys.exit(0 if $before >= $thresh else 1)" || return 1
  row=$(bench/compare_latency.py --pagellm "$pagellm" --llama-bench "$LLAMA_BENCH" --pp 0 \
    --tg 128 --reps 3 --rounds 1 --bandwidth-gbs "$bandwidth" --bus-between build/bench/roofline \
    "$1" | grep '^| ' | sed -n 2p)
  after=$(read_bw)
  # Cells: model, pp x3, pagellm tg, llama tg, ratio, "GB/s (x% of roofline)", bus between.
  between=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $10); print $10}')
  share=$(echo "$row" | awk -F'|' -v b="$before" -v m="$between" \
    '{split($9, g, " "); printf "%.0f%%", 200 * g[1] / (b + m)}')
  echo "$(date -u +%T) bus $before -> $between -> $after GB/s $row pagellm at $share of the mean of the reads around its run"
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
