#!/usr/bin/env bash
# Runs the bench/ suite — front-end overhead, batching gain, overload, and
# the perf_analyzer cross-check (when scripts/get-perf-analyzer.sh has
# fetched it) — and writes the report to bench-report.txt as well.
# Needs build/ (scripts/build.sh or the test command) and .venv
# (scripts/setup-venv.sh: the MiniLM checkpoint). About five minutes on two
# cores; exits non-zero if a script fails or the cross-check is outside its
# tolerance.
#   bench/run-suite.sh [--duration-s 10]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=10
if [ "${1:-}" = "--duration-s" ]; then DUR=$2; fi
{
  echo "# bench suite, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  python3 bench/frontend_overhead.py --duration-s "$DUR"
  echo
  python3 bench/batching_gain.py --duration-s "$DUR" --lengths 16
  echo
  python3 bench/batching_gain.py --duration-s "$DUR" --lengths 128
  echo
  python3 bench/overload.py --duration-s "$DUR"
  echo
  if [ -x .perf_analyzer/perf_analyzer ]; then
    python3 bench/perf_analyzer_crosscheck.py --duration-s "$DUR"
  else
    echo "perf_analyzer cross-check skipped: run scripts/get-perf-analyzer.sh first"
  fi
} 2>&1 | tee bench-report.txt
