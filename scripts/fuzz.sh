#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzzer.cc, clang with ASan + UBSan) into ./build-fuzz
# and runs each for N seconds.
#
#   scripts/fuzz.sh [seconds=60] [target...]     e.g. scripts/fuzz.sh 300 gguf_fuzzer
#
# Seeds come from fuzz/corpus/<target>/ (read-only; the jinja fuzzer also reads
# tests/chat_templates/); new inputs go to
# build-fuzz/corpus/<target>/, crash/leak/timeout reproducers to build-fuzz/crashes/<target>/,
# the full log to build-fuzz/<target>.log. Exits non-zero if any target found a failure.
# Reproduce one with: build-fuzz/<target> build-fuzz/crashes/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
if (($# > 0)); then shift; fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in fuzz/*_fuzzer.cc; do
    targets+=("$(basename "$src" .cc)")
  done
fi

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPAGELLM_FUZZ=ON -DPAGELLM_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"${JOBS:-2}" --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/crashes/$t"
  seeds=()
  if [ -d "fuzz/corpus/$t" ]; then seeds+=("fuzz/corpus/$t"); fi
  # The chat templates the tests render are seeds too (kept once, in tests/).
  if [ "$t" = jinja_fuzzer ]; then seeds+=("tests/chat_templates"); fi
  echo "== $t: ${secs}s"
  set +e
  "build-fuzz/$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix="build-fuzz/crashes/$t/" "build-fuzz/corpus/$t" "${seeds[@]}" \
    >"build-fuzz/$t.log" 2>&1
  rc=$?
  set -e
  grep -E '^#[0-9]+[[:space:]]+DONE' "build-fuzz/$t.log" || true
  if ((rc != 0)); then
    failed+=("$t")
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "build-fuzz/$t.log" | head -20 || true
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: failures in ${failed[*]} (see build-fuzz/<target>.log)"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${secs}s each without failures"
