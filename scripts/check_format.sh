#!/usr/bin/env bash
# Fails when a C++ source differs from what clang-format (.clang-format) makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
find src tests bench fuzz include \( -name '*.h' -o -name '*.cc' \) -print0 |
  xargs -0 clang-format --dry-run -Werror
echo "format: clean"
