#!/usr/bin/env bash
# Sets up, builds, and runs pagellm on a demo model.
#   ../shared/models/stories260K when present (real TinyStories weights and tokenizer);
#   otherwise a random-weight tiny Llama written by tools/gen_model.py into build/demo-model
#   (no tokenizer is available then, so the demo measures prefill/decode speed instead).
# Extra arguments are passed to `pagellm generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
model=../shared/models/stories260K
if [ -f "$model/model.safetensors" ]; then
  echo "demo: using $model (real weights)"
  ./build/pagellm inspect "$model"
  ./build/pagellm generate --model "$model" --prompt "Once upon a time" --max-tokens 128 \
    --temperature 0 "$@"
else
  model=build/demo-model
  echo "demo: ../shared is absent; generating a random-weight tiny Llama in $model"
  /usr/bin/python3 tools/gen_model.py --preset tiny --tokenizer none --out "$model" --quiet
  ./build/pagellm inspect "$model"
  ./build/pagellm bench latency --model "$model" -p 64 -n 32 -r 3
fi
