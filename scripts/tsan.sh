#!/usr/bin/env bash
# ThreadSanitizer check run by scripts/test.sh (so by CI): builds the base module's tests (the
# thread pool's stress tests among them) with -fsanitize=thread into ./build-tsan and runs
# them; any report fails the run. Only test_base is built because the rest of the engine takes
# about an hour to build with TSan on two cores; the whole engine and server are checked by
# hand (docs/TESTING.md, "Sanitizers").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGELLM_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_base
TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" ./build-tsan/test_base
