#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a serving process: installs
# the packages, builds infer-server, prepares the demo model repository (the
# real all-MiniLM-L6-v2 and the small embed_pool model; see
# scripts/export-demo-models.sh) and serves it on 127.0.0.1:8001, on the first
# GPU when one is usable, else on the CPU (infer-server's default device).
# Extra arguments go to infer-server (see build/bin/infer-server --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target infer-server
scripts/export-demo-models.sh
exec build/bin/infer-server --model-repository model_repository "$@"
