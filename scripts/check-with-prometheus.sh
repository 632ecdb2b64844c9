#!/usr/bin/env bash
# Checks the /metrics endpoint against a real Prometheus (Debian's package,
# downloaded and unpacked into a scratch folder, not installed): starts
# infer-server on the CPU, lets Prometheus scrape it every second while
# Triton's Python client sends ~20 s of mixed-length requests, then prints
# the client's own p50/p99 beside Prometheus' histogram_quantile over the
# same period, and lints a scrape with `promtool check metrics`.
# Needs: build/bin/infer-server, .venv (scripts/setup-venv.sh), network for
# `apt-get download prometheus`. Usage: scripts/check-with-prometheus.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
W=${TMPDIR:-/tmp}/infer-prometheus-check
mkdir -p "$W"
cd "$W"
if [ ! -x root/usr/bin/prometheus ]; then
  apt-get download prometheus >/dev/null
  dpkg -x prometheus_*.deb root
fi
rm -rf data
"$ROOT/build/bin/infer-server" --device cpu --grpc-address 127.0.0.1:0 \
  --metrics-address 127.0.0.1:0 --log-summary-interval-s 5 > server.log 2>&1 &
SP=$!
for _ in $(seq 100); do grep -q "listening on" server.log && break; sleep 0.1; done
MP=$(grep -o "metrics at http://127.0.0.1:[0-9]*" server.log | grep -o "[0-9]*$")
GP=$(grep -o "listening on 127.0.0.1:[0-9]*" server.log | grep -o "[0-9]*$")
cat > prom.yml <<EOT
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: infer
    static_configs: [{targets: ['127.0.0.1:$MP']}]
EOT
./root/usr/bin/prometheus --config.file=prom.yml --storage.tsdb.path="$W/data" \
  --web.listen-address=127.0.0.1:9099 > prom.log 2>&1 &
PP=$!
trap 'kill $PP 2>/dev/null; kill $SP 2>/dev/null' EXIT
sleep 2
"$ROOT/.venv/bin/python" - "$MP" "$GP" <<'PY'
import json, sys, time, urllib.parse, urllib.request
import numpy as np
import tritonclient.grpc as g
mp, gp = sys.argv[1], sys.argv[2]
c = g.InferenceServerClient(f"127.0.0.1:{gp}")
rng = np.random.default_rng(0)
lat, end = [], time.time() + 20
while time.time() < end:
    x = np.full((int(rng.integers(1, 9)), int(rng.choice([4, 64, 400]))), 5, dtype=np.int64)
    i = g.InferInput("input_ids", list(x.shape), "INT64")
    i.set_data_from_numpy(x)
    t = time.time()
    c.infer("embed_pool", [i])
    lat.append(time.time() - t)
time.sleep(3)  # two more scrapes
open("scrape.txt", "wb").write(urllib.request.urlopen(f"http://127.0.0.1:{mp}/metrics").read())
lat = np.array(lat)
print(f"client-side  ({len(lat)} requests): p50 {np.percentile(lat, 50) * 1e3:.2f} ms, "
      f"p99 {np.percentile(lat, 99) * 1e3:.2f} ms")
def query(q):
    r = json.load(urllib.request.urlopen(
        "http://127.0.0.1:9099/api/v1/query?" + urllib.parse.urlencode({"query": q})))
    return float(r["data"]["result"][0]["value"][1])
b = "sum by (le) (rate(infer_request_duration_seconds_bucket[30s]))"
print(f"Prometheus histogram_quantile over 30 s: p50 {query(f'histogram_quantile(0.5, {b})') * 1e3:.2f} ms, "
      f"p99 {query(f'histogram_quantile(0.99, {b})') * 1e3:.2f} ms")
PY
./root/usr/bin/promtool check metrics < scrape.txt && echo "promtool check metrics: clean"
kill -TERM $SP
wait $SP && echo "infer-server exited 0"
