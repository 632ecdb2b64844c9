#!/usr/bin/env bash
# Configures and builds into build/ (binaries in build/bin). Extra arguments
# are passed to the build tool, e.g. a target name.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build build -j"$JOBS" "$@"
