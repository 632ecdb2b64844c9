#!/usr/bin/env bash
# Usage: scripts/build.sh [-B DIR] [-D VAR=VALUE]... [BUILD-TOOL ARGS]
#
# Configures and builds into build/ (binaries in build/bin), or into DIR
# with -B; each -D is passed to CMake (e.g. -D INFER_SANITIZE=address). The
# remaining arguments go to the build tool, e.g. --target infer-server.
# BUILD_TYPE (default RelWithDebInfo) and JOBS (default: every core) apply;
# CC and CXX pick the compilers on a first configure.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
dir=build
defs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -B) dir=$2; shift 2 ;;
    -D) defs+=("-D$2"); shift 2 ;;
    *) break ;;
  esac
done
# ccache (when installed) finds objects compiled in another clone too.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# Ninja (when installed) for a new build folder: it schedules the two cores
# across targets better than recursive make and logs each step's time in
# DIR/.ninja_log. A folder configured before keeps its generator.
gen=()
if [ ! -e "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
log=$(mktemp)
if ! cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "${defs[@]}" \
    >"$log" 2>&1; then
  cat "$log"
  rm -f "$log"
  exit 1
fi
grep -E "^-- infer:|CMake Warning" "$log" || true
rm -f "$log"
cmake --build "$dir" -j"$JOBS" "$@"
