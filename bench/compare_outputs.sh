#!/usr/bin/env bash
# Runs the same generation workloads through two pagellm binaries and reports, per workload,
# whether their JSONL outputs (token ids, text, logprobs, prompt logprobs, finish reasons) are
# byte-identical. Used to show that a refactor changed nothing (docs/BENCHMARKS.md).
#
#   bench/compare_outputs.sh OLD_BINARY NEW_BINARY [WORKDIR]
#
# Workloads: the invariance set (batched vs one at a time, chunked prefill, preemption by
# recompute and by swap), prefix caching on/off, every KV cache dtype, speculative decoding
# (draft model and n-gram), on ../shared's stories260K / llama2xs-279K / kquant-ref F16 when
# present and on random-weight GGUF Q8_0 / Q4_0 / BF16 models from tools/gen_model.py.
set -euo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
here="$(cd "$(dirname "$0")/.." && pwd)"
work="${3:-$(mktemp -d)}"
mkdir -p "$work"
shared="${PAGELLM_SHARED_DIR:-$here/../shared}"
py=/usr/bin/python3

# Prompts: 24 token-id prompts of varied lengths; every third greedy, others seeded sampling
# with logprobs; some with prompt_logprobs, stop tokens, penalties.
make_prompts() {  # vocab out
  "$py" - "$1" "$2" <<'PY'
import json, random, sys
vocab, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1234)
shared_prefix = [rng.randrange(3, vocab) for _ in range(40)]
with open(out, "w") as f:
    for i in range(24):
        n = rng.choice([1, 5, 17, 33, 64, 100])
        ids = [rng.randrange(3, vocab) for _ in range(n)]
        if i % 4 == 0:
            ids = shared_prefix + ids  # prefix-cache hits
        r = {"prompt_token_ids": ids, "max_tokens": rng.choice([8, 24, 48]), "ignore_eos": True}
        if i % 3 == 0:
            r["temperature"] = 0.0
        else:
            r.update(temperature=0.9, top_p=0.95, top_k=40, seed=100 + i, logprobs=3)
        if i % 5 == 0:
            r["prompt_logprobs"] = 2
        if i % 7 == 0:
            r.update(repetition_penalty=1.2, presence_penalty=0.3, frequency_penalty=0.2)
        if i % 6 == 0:
            r["stop_token_ids"] = [ids[-1]]
        f.write(json.dumps(r) + "\n")
PY
}

models=()
if [ -d "$shared/models/stories260K" ]; then
  models+=("stories260K=$shared/models/stories260K")
  models+=("kquant-F16=$shared/models/kquant-ref/kquant-ref-F16.gguf")
fi
gen() {  # name args...
  local name=$1
  shift
  [ -f "$work/$name.gguf" ] || "$py" "$here/tools/gen_model.py" --quiet --tokenizer tok512 \
    --out "$work/$name-hf" --gguf "$work/$name.gguf" "$@" >/dev/null
  models+=("$name=$work/$name.gguf")
}
if [ -d "$shared/tokenizers" ]; then
  gen tiny-q8 --preset tiny --gguf-type q8_0
  gen qwen-q4 --preset tiny-qwen2 --gguf-type q4_0
  gen mistral-bf16 --preset mistral-tiny --gguf-type bf16
fi

printf '%-14s %-44s %s\n' model workload result
fails=0
for entry in "${models[@]}"; do
  name=${entry%%=*}
  path=${entry#*=}
  vocab=$("$new" inspect "$path" | awk '/^vocab:/ {print $2}')
  make_prompts "$vocab" "$work/$name.prompts.jsonl"
  workloads=(
    "batched|--max-model-len 512 --max-num-seqs 32"
    "one-at-a-time|--max-model-len 512 --max-num-seqs 1"
    "chunked-prefill-16|--max-model-len 512 --max-num-batched-tokens 16 --max-num-seqs 8"
    "preempt-recompute|--max-model-len 192 --num-gpu-blocks-override 24 --block-size 8"
    "preempt-swap|--max-model-len 192 --num-gpu-blocks-override 24 --block-size 8 --preemption-mode swap"
    "no-prefix-cache|--max-model-len 512 --no-enable-prefix-caching"
    "kv-int8|--max-model-len 512 --kv-cache-dtype int8"
    "kv-fp8|--max-model-len 512 --kv-cache-dtype fp8"
    "kv-int4|--max-model-len 512 --kv-cache-dtype int4"
    "ngram-k4|--max-model-len 512 --speculative-config {\"method\":\"ngram\",\"num_speculative_tokens\":4}"
  )
  if [ "$name" = stories260K ]; then
    workloads+=("draft-model-k4|--max-model-len 512 --speculative-config {\"method\":\"draft_model\",\"model\":\"$shared/models/llama2xs-279K\",\"num_speculative_tokens\":4}")
  fi
  for w in "${workloads[@]}"; do
    label=${w%%|*}
    read -r -a flags <<<"${w#*|}"
    for b in old new; do
      bin=$old
      [ $b = new ] && bin=$new
      "$bin" generate --model "$path" --input "$work/$name.prompts.jsonl" \
        --output "$work/$name.$label.$b.jsonl" --threads 2 "${flags[@]}" \
        >/dev/null 2>"$work/$name.$label.$b.log" || echo "($b failed: $work/$name.$label.$b.log)"
    done
    if cmp -s "$work/$name.$label.old.jsonl" "$work/$name.$label.new.jsonl" &&
      [ -s "$work/$name.$label.new.jsonl" ]; then
      result="identical ($(wc -l <"$work/$name.$label.new.jsonl") requests)"
    else
      result=DIFFERENT
      fails=$((fails + 1))
    fi
    printf '%-14s %-44s %s\n' "$name" "$label" "$result"
  done
done
echo "workloads differing: $fails"
[ "$fails" = 0 ]
