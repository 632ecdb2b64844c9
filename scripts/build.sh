#!/usr/bin/env bash
# Configures and builds into build/ (binaries in build/bin). Extra arguments
# are passed to the build tool, e.g. a target name.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
# ccache (when installed) finds objects compiled in another clone too.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
log=$(mktemp)
if ! cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >"$log" 2>&1; then
  cat "$log"
  rm -f "$log"
  exit 1
fi
grep -E "^-- infer:|CMake Warning" "$log" || true
rm -f "$log"
cmake --build build -j"$JOBS" "$@"
