#!/usr/bin/env bash
# Builds and runs the full test suite (unit, kernel, model, e2e). Tests that need ../shared
# skip cleanly when it is absent. Then the ThreadSanitizer check (scripts/tsan.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_format.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
bash scripts/tsan.sh
