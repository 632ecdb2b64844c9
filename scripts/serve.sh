#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a serving process: installs
# the packages, builds infer-server, and serves the bundled demo model
# repository on 127.0.0.1:8001 (on the first GPU if one is usable, else on the
# CPU). Extra arguments go to infer-server (see build/bin/infer-server --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target infer-server
exec build/bin/infer-server --model-repository examples/model_repository "$@"
