#!/usr/bin/env bash
# Builds the unit and integration tests with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-asan/ (CPU only: CUDA code cannot be
# instrumented by GCC's sanitizers and there is no GPU to run it) and runs
# them with CTest. Part of the test command (scripts/test.sh); also useful on
# its own after scripts/build.sh has installed what it needs.
#
# -O1 -g1 instead of the usual -O2 -g: a third less compile time, stack
# traces still name functions and lines; the CPU kernels too, without UBSan
# (models/CMakeLists.txt says why). UBSan stops at the first error
# (-fno-sanitize-recover, CMakeLists.txt), so undefined behaviour fails the
# test that hits it. Not built: the benchmarks (INFER_BUILD_BENCHMARKS=OFF).
# Left out of the run: the per-ISA repeats of the numeric tests (the same
# code as the default-ISA ones, run under every ISA oneDNN offers), the
# load-balancer test (a minute of load through Envoy and nginx, which tests
# the drain, not memory safety), and the tokenizer oracle, not registered
# here (tests/CMakeLists.txt: its pipelines are the unit tests' and the
# tokenizer fuzz targets', which run under these sanitizers too).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
t0=$SECONDS
scripts/build.sh -B build-asan -D CMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -D CMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -D INFER_SANITIZE=address,undefined \
  -D INFER_ENABLE_CUDA=OFF -D INFER_BUILD_BENCHMARKS=OFF
t1=$SECONDS
rc=0
ctest --test-dir build-asan --output-on-failure -j"$JOBS" --timeout 900 -E "_isa_|^load_balancers$" ||
  rc=$?
echo "test-sanitizers: build $((t1 - t0)) s, tests $((SECONDS - t1)) s"
exit "$rc"
