#!/usr/bin/env bash
# Fetches the real Prometheus server and promtool from Debian's `prometheus`
# package into .prometheus/ (git-ignored), unpacked, not installed: no
# service is started and nothing outside the checkout changes. The test
# tests/integration/test_prometheus_scrape.py uses them. Needs network (a
# Debian mirror). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
D=.prometheus
if [ -x "$D/prometheus" ] && [ -x "$D/promtool" ]; then exit 0; fi
rm -rf "$D" && mkdir -p "$D/tmp"
if ! (cd "$D/tmp" && apt-get download -q prometheus >/dev/null 2>&1); then
  # No package lists yet (e.g. a fresh container): fetch them, then retry.
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  (cd "$D/tmp" && apt-get download -q prometheus >/dev/null)
fi
dpkg -x "$D"/tmp/prometheus_*.deb "$D/tmp/root"
mv "$D/tmp/root/usr/bin/prometheus" "$D/tmp/root/usr/bin/promtool" "$D/"
rm -rf "$D/tmp"
"$D/prometheus" --version 2>&1 | head -n 1
