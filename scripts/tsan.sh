#!/usr/bin/env bash
# ThreadSanitizer check run by scripts/test.sh (so by CI): builds the base and engine modules'
# tests with -fsanitize=thread into ./build-tsan and runs them; any report fails the run.
#  - test_base: the thread pool's stress tests (20,000 jobs of alternating sizes on 3 threads,
#    ParallelFor over 1-3 threads, 5,000 jobs with idle threads reading ahead);
#  - test_engine: the engine loop's stress tests (AsyncEngineStressTest: 6 client threads
#    submitting, streaming and aborting 240 requests while another reads stats and resets the
#    prefix cache; shutdown racing submissions), over a scripted backend.
# They link only their modules (not the server, chat or CLI), and the kernels are built without
# instrumentation (CMakeLists.txt, PAGELLM_TSAN_UNINSTRUMENTED), which keeps this step to a few
# minutes on two cores. The server's stress suites under TSan need the whole tree; they are run
# by hand (docs/TESTING.md, "Sanitizers").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGELLM_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_base test_engine
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
./build-tsan/test_base
./build-tsan/test_engine
