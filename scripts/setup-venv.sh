#!/usr/bin/env bash
# Creates .venv (git-ignored) with the Python packages the tests use:
# Triton's own client (tritonclient[grpc]) and NumPy. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import tritonclient.grpc, numpy" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "tritonclient[grpc]" numpy
fi
