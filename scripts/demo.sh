#!/usr/bin/env bash
# Sets up, builds, and serves a demo model with the OpenAI-compatible server on
# http://127.0.0.1:${PORT:-8000} (Ctrl-C stops it).
#   ../shared/models/stories260K when present: real TinyStories weights and tokenizer; it has no
#   chat template of its own, so a ChatML template is passed for /v1/chat/completions.
#   Otherwise a random-weight tiny Llama written by tools/gen_model.py into build/demo-model, with
#   a byte-level BPE tokenizer (and ChatML template) the script trains itself: it serves text
#   (random words, since the weights are random) through the same API.
# Extra arguments are passed to `pagellm serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
port="${PORT:-8000}"
model=../shared/models/stories260K
if [ -f "$model/model.safetensors" ]; then
  echo "demo: serving $model on http://127.0.0.1:$port (real weights). Try:"
  echo "  curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\"
  echo "    -d '{\"model\": \"stories260K\", \"prompt\": \"Once upon a time\", \"max_tokens\": 64}'"
  exec ./build/pagellm serve "$model" --served-model-name stories260K --port "$port" \
    --chat-template tests/chat_templates/chatml.jinja "$@"
else
  model=build/demo-model
  echo "demo: ../shared is absent; generating a random-weight tiny Llama in $model"
  /usr/bin/python3 tools/gen_model.py --preset tiny --tokenizer byte-bpe --out "$model" --quiet
  echo "demo: serving $model on http://127.0.0.1:$port (random weights: the text is noise). Try:"
  echo "  curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\"
  echo "    -d '{\"model\": \"demo\", \"prompt\": \"Once upon a time\", \"max_tokens\": 16}'"
  exec ./build/pagellm serve "$model" --served-model-name demo --port "$port" "$@"
fi
