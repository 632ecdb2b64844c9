#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, from the repository root, after
# scripts/gpu-pack.sh made .device/bundle.tar.xz on a build machine: every
# test binary (the GPU tests run instead of skipping), the embedded example on
# cuda:0, and the server on cuda:0. Logs go to $OUT (default /tmp/gpu-run).
# Prints a summary; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
D=/tmp/infer-device
rm -rf "$D" && mkdir -p "$D" && tar -C "$D" -xJf .device/bundle.tar.xz || exit 1
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export INFER_SERVER_BINARY="$D/bin/infer-server"
OUT="${OUT:-/tmp/gpu-run}"  # a few files: the summary log and the benchmark tables
LOGS=/tmp/gpu-run-logs        # one log per test binary (failures are echoed to the summary)
mkdir -p "$OUT" "$LOGS"
exec > >(tee "$OUT/gpu-run.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
failed=()
for t in "$D"/tests/*; do
  name=$(basename "$t")
  if "$t" --gtest_brief=1 > "$LOGS/$name.log" 2>&1; then
    echo "PASS $name ($(grep -c '\[  SKIPPED \]' "$LOGS/$name.log") skipped)"
  else
    echo "FAIL $name"; tail -30 "$LOGS/$name.log"; failed+=("$name")
  fi
done
echo "--- allocator-bench cuda:0"
"$D/bin/allocator-bench" --device cuda:0 | tee "$OUT/allocator-bench.txt" || failed+=(allocator-bench)
echo "--- overlap-bench cuda:0"
"$D/bin/overlap-bench" --device cuda:0 --n 4096 --gemms 1 --batches 24 | tee "$OUT/overlap-bench.txt" \
  || failed+=(overlap-bench)
echo "--- bucketing-bench cuda:0"
"$D/bin/bucketing-bench" --device cuda:0 --requests 4000 | tee "$OUT/bucketing-bench.txt" \
  || failed+=(bucketing-bench)
echo "--- embedded_engine cuda:0"
"$D/bin/embedded_engine" cuda:0 || failed+=(embedded_engine)
echo "--- infer-server on cuda:0"
"$D/bin/infer-server" --device cuda:0 --grpc-address 127.0.0.1:0 > "$LOGS/server.log" 2>&1 &
pid=$!
sleep 3
grep -E "device|listening" "$LOGS/server.log"
kill -TERM $pid; wait $pid || failed+=(infer-server)
if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}"; exit 1; fi
echo "ALL PASSED"
