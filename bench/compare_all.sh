#!/usr/bin/env bash
# Regenerates the pagellm vs llama.cpp comparison table of docs/BENCHMARKS.md on this machine:
# records the CPU (model name, family/model/stepping, ISA) and its roofline, makes the random-
# weight GGUF files when MODELS_DIR lacks them (tools/gen_model.py), then for every row runs
# bench/compare_latency.py (pagellm and llama-bench alternately, ROUNDS rounds, medians and the
# median of per-round ratios) with the memory bus read by build/bench/roofline right before and
# right after the row, so that rows measured on a busy bus can be told apart.
#
#   bench/compare_all.sh LLAMA_DIR MODELS_DIR [ROWS...]
#     LLAMA_DIR   a llama.cpp build tree holding bin/llama-bench and, for the K-quant rows (whose
#                 files its llama-quantize makes from the F16 ones), bin/llama-quantize (built
#                 outside this repository; docs/BENCHMARKING.md says how)
#     MODELS_DIR  where the GGUF files live (or are written: a few GB)
#     ROWS        row names to run (default: all of them, listed in `rows` below)
#   env: ROUNDS (3), REPS (3), THREADS (2), PAGELLM (build/pagellm)
#
# Prints Markdown: the machine block, then one table per row group.
set -euo pipefail
cd "$(dirname "$0")/.."
llama_dir=$(realpath "$1")
models=$(realpath -m "$2")
shift 2
bench_bin="$llama_dir/bin/llama-bench"
[ -x "$bench_bin" ] || { echo "no llama-bench at $bench_bin" >&2; exit 1; }
pagellm=${PAGELLM:-build/pagellm}
rounds=${ROUNDS:-3}
reps=${REPS:-3}
threads=${THREADS:-2}
py=/usr/bin/python3
mkdir -p "$models"

# name | model file | compare_latency.py flags | extra pagellm flags | extra llama-bench flags
rows_table=$(cat <<'ROWS'
q8_0-pp-tg        | llama-3.2-1b-q8_0.gguf | --pp 512 --tg 128              |                        |
q4_0-pp-tg        | llama-3.2-1b-q4_0.gguf | --pp 512 --tg 128              |                        |
f16-pp-tg         | llama-3.2-1b-f16.gguf  | --pp 512 --tg 128              |                        |
f16-bf16-pp       | llama-3.2-1b-f16.gguf  | --pp 512 --tg 0                | --dtype bfloat16       |
q8_0-d4096        | llama-3.2-1b-q8_0.gguf | --pp 512 --tg 128 --depth 4096 |                        |
q8_0-d4096-int8kv | llama-3.2-1b-q8_0.gguf | --pp 512 --tg 128 --depth 4096 | --kv-cache-dtype int8  | -ctk q8_0 -ctv q8_0
q8_0-d16384       | llama-3.2-1b-q8_0.gguf | --pp 512 --tg 128 --depth 16384 |                       |
qwen1.5b-q4_0     | qwen2.5-1.5b-q4_0.gguf | --pp 512 --tg 128              |                        |
q4_k_m            | llama-3.2-1b-q4_k_m.gguf | --pp 512 --tg 128            |                        |
q5_k_m            | llama-3.2-1b-q5_k_m.gguf | --pp 512 --tg 128            |                        |
q6_k              | llama-3.2-1b-q6_k.gguf   | --pp 512 --tg 128            |                        |
iq4_xs            | llama-3.2-1b-iq4_xs.gguf | --pp 512 --tg 128            |                        |
qwen1.5b-q4_k_m   | qwen2.5-1.5b-q4_k_m.gguf | --pp 512 --tg 128            |                        |
qwen1.5b-q5_k_m   | qwen2.5-1.5b-q5_k_m.gguf | --pp 512 --tg 128            |                        |
qwen1.5b-q6_k     | qwen2.5-1.5b-q6_k.gguf   | --pp 512 --tg 128            |                        |
qwen1.5b-iq4_xs   | qwen2.5-1.5b-iq4_xs.gguf | --pp 512 --tg 128            |                        |
ROWS
)

make_model() {  # file name -> writes it unless present
  local f=$1 preset type
  [ -s "$models/$f" ] && return 0
  case $f in
    llama-3.2-1b-*) preset=llama-3.2-1b ;;
    qwen2.5-1.5b-*) preset=qwen2.5-1.5b ;;
    *) echo "unknown model file $f" >&2; return 1 ;;
  esac
  type=${f#"$preset"-}
  type=${type%.gguf}
  case $type in
    q4_k_m | q5_k_m | q6_k | iq4_xs)
      # K-quant files are made by llama.cpp's own quantizer from the F16 file, as users get them.
      make_model "$preset-f16.gguf"
      echo "writing $models/$f (llama-quantize ${type^^})" >&2
      "$llama_dir/bin/llama-quantize" "$models/$preset-f16.gguf" "$models/$f" "${type^^}" >&2
      ;;
    *)
      echo "writing $models/$f ($preset, $type)" >&2
      "$py" tools/gen_model.py --preset "$preset" --gguf "$models/$f" --gguf-type "$type" >&2
      ;;
  esac
}

read_bw() {
  build/bench/roofline --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["read_bandwidth_gbs"])'
}

echo "## Machine"
echo
echo '```'
lscpu | grep -E '^(Model name|CPU family|Model|Stepping|CPU\(s\)|L2 cache|L3 cache):' || true
echo "ISA: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|avx512_vnni|avx512_fp16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "roofline: $(build/bench/roofline --json)"
echo "pagellm: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'); llama.cpp: $(git -C "$llama_dir/.." rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "date: $(date -u +%FT%TZ); threads $threads; $rounds alternating rounds of $reps repetitions"
echo '```'
echo
wanted=("$@")
while IFS='|' read -r name file flags pagellm_args llama_args; do
  name=$(echo "$name" | xargs)
  file=$(echo "$file" | xargs)
  [ -z "$name" ] && continue
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then continue; fi
  make_model "$file"
  read -r -a args <<<"$flags"
  before=$(read_bw)
  echo "### $name (bus $before GB/s before)"
  echo
  "$py" bench/compare_latency.py --pagellm "$pagellm" --llama-bench "$bench_bin" \
    --threads "$threads" --reps "$reps" --rounds "$rounds" --bandwidth-gbs "$before" \
    "--pagellm-args=$(echo "$pagellm_args" | xargs)" "--llama-args=$(echo "$llama_args" | xargs)" \
    "${args[@]}" "$models/$file"
  echo
  echo "bus after: $(read_bw) GB/s"
  echo
done <<<"$rows_table"
