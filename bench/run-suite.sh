#!/usr/bin/env bash
# Runs the bench/ suite — front-end overhead, batching gain (MiniLM at 16 and
# 128 tokens in the default precision, and at 16 in FP32), overload, and the perf_analyzer cross-check — and writes the
# report to bench-report.txt as well. Fetches perf_analyzer first
# (scripts/get-perf-analyzer.sh; needs network once). Needs build/
# (scripts/build.sh or the test command) and .venv (scripts/setup-venv.sh: the
# MiniLM checkpoint). About six minutes on two cores; exits non-zero if a
# script fails or the cross-check is outside its tolerance.
#   bench/run-suite.sh [--duration-s 5]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=5
if [ "${1:-}" = "--duration-s" ]; then DUR=$2; fi
LONG=$(awk "BEGIN { print 2 * $DUR }")  # the MiniLM and overload points
scripts/get-perf-analyzer.sh
{
  echo "# bench suite, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  python3 bench/frontend_overhead.py --duration-s "$DUR"
  echo
  python3 bench/batching_gain.py --duration-s "$LONG" --lengths 16
  echo
  python3 bench/batching_gain.py --duration-s "$LONG" --lengths 128
  echo
  python3 bench/batching_gain.py --duration-s "$LONG" --lengths 16 --precision fp32
  echo
  python3 bench/overload.py --duration-s "$LONG"
  echo
  python3 bench/perf_analyzer_crosscheck.py --duration-s "$DUR"
} 2>&1 | tee bench-report.txt
