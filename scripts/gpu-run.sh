#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, from the repository root, after
# scripts/gpu-pack.sh made .device/bundle.tar.xz and .device/minilm.tar.xz on
# a build machine. Each is copied over in a call of its own (together they
# pass a call's 64 MiB): first `scripts/gpu-run.sh --stage-model` with
# .device/minilm.tar.xz (unpacks the weights into /tmp/infer-device-model and
# returns), then, while the machine is still warm, `scripts/gpu-run.sh` with
# .device/bundle.tar.xz. With both files present, one call does it all. It runs:
#   - sentence-transformers' MiniLM embeddings computed on this GPU
#     (scripts/make-minilm-fixture.py, needs torch + transformers), which the
#     GPU tests then compare our CUDA encoder against;
#   - the test binaries that have GPU tests (GPU_RUN_TESTS: a space-separated
#     list of names, or "all" for every binary), each under a time limit
#     (GPU_RUN_TEST_TIMEOUT seconds, default 180);
#   - the benchmarks on cuda:0: our encoder vs PyTorch FP16 eager and
#     torch.compile on MiniLM and on a synthetic BERT-base
#     (bench/encoder_vs_torch.py), the cuBLASLt bias + GELU epilogue against
#     the GELU kernel (encoder-bench --cuda-fused-epilogues), packed vs padded on mixed lengths, the
#     server at saturation against the in-process forward pass
#     (bench/saturation.py), and the adversarial run at 2x capacity under a
#     tight memory budget with a live scrape of the infer_gpu_* metrics
#     (bench/adversarial.py, GPU_RUN_ADVERSARIAL_S seconds, default 600; 0
#     skips it);
#   - the embedded example and the server (serving MiniLM) on cuda:0.
# GPU_RUN_BENCH=0 runs the tests alone. GPU_RUN_SECTIONS (comma-separated; default
# all) runs only the named benchmark sections: minilm, bert-base, fused-epilogues, fp8,
# families, saturation, adversarial, copies, mixed, allocator, bucketing, serve. A
# lent GPU's minutes are few: e.g. GPU_RUN_TESTS="encoder_cuda_families_test
# packed_attention_cuda_test" GPU_RUN_SECTIONS=fp8,families. The summary log goes to $OUT/gpu-run.log (default $OUT: /tmp/gpu-run), and
# it, the tables and one log per test binary to $OUT/gpu-run.tgz. Exits
# non-zero on any failure.
#
# `scripts/gpu-run.sh --dry-run` (CI, on a machine without a GPU) proves the
# bundle complete before a GPU is lent: both archives are under the 64 MiB a
# call carries and unpack; every binary
# resolves every shared library from the bundle, or is allowed to take it
# from the GPU machine (the C library and loader, libgcc_s, and CUDA's
# libcuda, libcudart and cuBLAS), checked with `ldd` in an empty environment;
# every test binary the run names is there, with the MiniLM weights and the
# repository files the run reads; and this script and the Python scripts it
# runs parse.
set -uo pipefail
cd "$(dirname "$0")/.."
D=/tmp/infer-device
MODEL=/tmp/infer-device-model
# The test binaries with GPU tests (the rest are CPU-only and run in CI).
GPU_TESTS="cuda_runtime_test device_lost_test packed_attention_cuda_test bert_cuda_kernels_test
  bert_cuda_graphs_test transformer_cuda_kernels_test encoder_cuda_families_test bert_model_test
  embed_pool_test caching_allocator_test device_lock_test device_test nvml_telemetry_test
  model_repository_test proto_codec_test metrics_test grpc_server_test device_lost_grpc_test
  classifier_model_test dense_head_test sparse_model_test"
if [ "${1:-}" = "--dry-run" ]; then
  problems=0
  bad() { echo "gpu-run --dry-run: $*" >&2; problems=$((problems + 1)); }
  for f in .device/bundle.tar.xz .device/minilm.tar.xz; do
    [ -e "$f" ] || { echo "gpu-run --dry-run: no $f (scripts/gpu-pack.sh makes it)" >&2; exit 1; }
    # Each is copied over in one call of the device machine's, 64 MiB at most.
    [ "$(stat -c %s "$f")" -lt $((64 << 20)) ] || bad "$f is over the 64 MiB a call carries"
  done
  DRY=$(mktemp -d)
  trap 'rm -rf "$DRY"' EXIT
  tar -C "$DRY" -xJf .device/bundle.tar.xz || bad "bundle.tar.xz does not unpack"
  tar -C "$DRY" -xJf .device/minilm.tar.xz || bad "minilm.tar.xz does not unpack"
  # What the GPU machine brings itself.
  allowed='^(libc|libm|libpthread|libdl|librt|libgcc_s|ld-linux-x86-64|linux-vdso|libcuda|libcudart|libcublas|libcublasLt)\.so'
  binaries=0
  for b in "$DRY"/bin/* "$DRY"/tests/*; do
    binaries=$((binaries + 1))
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      [[ "$name" =~ $allowed ]] && continue
      case "$path" in
        "$DRY/lib/"*) ;;
        not) bad "$(basename "$b") needs $name, which the bundle lacks" ;;
        *) bad "$(basename "$b") takes $name from $path, outside the bundle" ;;
      esac
    done < <(env -i LD_LIBRARY_PATH="$DRY/lib" ldd "$b" 2>&1)
  done
  for name in $GPU_TESTS; do [ -x "$DRY/tests/$name" ] || bad "no test binary $name"; done
  for name in infer-server infer-model-gen encoder-bench overlap-bench allocator-bench \
      bucketing-bench embedded_engine; do
    [ -x "$DRY/bin/$name" ] || bad "no binary $name"
  done
  for f in config.json model.safetensors; do
    [ -s "$DRY/minilm/$f" ] || bad "the MiniLM weights lack $f"
  done
  [ -s "$DRY/build-dir" ] || bad "no build-dir"
  for f in examples/model_repository/embed_pool/config.pbtxt tests/fixtures/families-cuda; do
    [ -e "$f" ] || bad "the repository lacks $f"
  done
  bash -n "$0" || bad "$0 does not parse"
  for py in scripts/make-minilm-fixture.py bench/encoder_vs_torch.py bench/saturation.py \
      bench/adversarial.py; do
    python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$py" || bad "$py does not parse"
  done
  if [ "$problems" -gt 0 ]; then
    echo "gpu-run --dry-run: $problems problems" >&2
    exit 1
  fi
  echo "gpu-run --dry-run: the bundle is complete ($binaries binaries, $(ls "$DRY/lib" | wc -l)" \
    "libraries, $(du -sh .device/bundle.tar.xz | cut -f1) + $(du -sh .device/minilm.tar.xz | cut -f1))"
  exit 0
fi
if [ -e .device/minilm.tar.xz ]; then
  rm -rf "$MODEL" && mkdir -p "$MODEL" && tar -C "$MODEL" -xJf .device/minilm.tar.xz || exit 1
fi
if [ "${1:-}" = "--stage-model" ]; then
  [ -d "$MODEL/minilm" ] && echo "gpu-run: MiniLM staged in $MODEL" && exit 0
  echo "gpu-run: --stage-model needs .device/minilm.tar.xz" >&2
  exit 1
fi
if [ ! -d "$MODEL/minilm" ]; then
  echo "gpu-run: no MiniLM: copy .device/minilm.tar.xz first (scripts/gpu-run.sh --stage-model)" >&2
  exit 1
fi
rm -rf "$D" && mkdir -p "$D" && tar -C "$D" -xJf .device/bundle.tar.xz || exit 1
ln -s "$MODEL/minilm" "$D/minilm"
export LD_LIBRARY_PATH="$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export INFER_SERVER_BINARY="$D/bin/infer-server" INFER_BIN_DIR="$D/bin"
# Some tests name built files by their build-tree path (infer-bench, the fake
# libnvidia-ml): recreate that path here when this machine has no build tree.
BUILD_DIR=$(cat "$D/build-dir")
if [ ! -e "$BUILD_DIR/bin/infer-server" ]; then
  mkdir -p "$BUILD_DIR" && ln -sfn "$D/bin" "$BUILD_DIR/bin" && ln -sfn "$D/buildlib" "$BUILD_DIR/lib"
fi
RESULTS="${OUT:-/tmp/gpu-run}"
OUT=/tmp/gpu-run-work      # the tables, packed into $RESULTS/gpu-run.tgz at the end
LOGS="$OUT/logs"           # one log per test binary (failures are echoed to the summary)
rm -rf "$OUT" && mkdir -p "$RESULTS" "$OUT" "$LOGS"
# The summary goes to $RESULTS as it is written: a run stopped early still returns it.
exec > >(tee "$OUT/gpu-run.log" "$RESULTS/gpu-run.log") 2>&1
finish() {
  tar -C "$OUT" -czf "$RESULTS/gpu-run.tgz" .
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
failed=()
export INFER_MINILM_DIR="$D/minilm"
echo "--- sentence-transformers reference on cuda (FP32)"
if python3 scripts/make-minilm-fixture.py --model "$D/minilm" --device cuda \
    --out "$OUT/minilm_embeddings_cuda.tsv"; then
  export INFER_MINILM_FIXTURE="$OUT/minilm_embeddings_cuda.tsv"
else
  failed+=(make-minilm-fixture)
fi
tests="${GPU_RUN_TESTS:-$GPU_TESTS}"
[ "$tests" = all ] && tests=$(ls "$D/tests")
for name in $tests; do
  t="$D/tests/$name"
  [ -x "$t" ] || { echo "MISSING $name"; failed+=("$name"); continue; }
  if timeout "${GPU_RUN_TEST_TIMEOUT:-180}" "$t" --gtest_brief=1 > "$LOGS/$name.log" 2>&1; then
    echo "PASS $name ($(grep -c '\[  SKIPPED \]' "$LOGS/$name.log") skipped)"
  else
    echo "FAIL $name"; tail -30 "$LOGS/$name.log"; failed+=("$name")
  fi
done
if [ "${GPU_RUN_BENCH:-1}" = 0 ]; then  # tests only
  if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}"; finish; exit 1; fi
  echo "ALL PASSED (tests only)"; finish; exit 0
fi
# Whether benchmark section $1 is asked for (GPU_RUN_SECTIONS).
want() { [ "${GPU_RUN_SECTIONS:-all}" = all ] || [[ ",${GPU_RUN_SECTIONS}," == *",$1,"* ]]; }
# The synthetic BERT-base checkpoint several sections time.
bert_base() {
  [ -e /tmp/bert-base/config.json ] ||
    "$D/bin/infer-model-gen" --preset bert-base --dtype f16 --out /tmp/bert-base >/dev/null
}
# Most telling first: a run cut short by its time limit keeps what came first.
if want minilm; then
echo "--- encoder vs PyTorch FP16 eager and torch.compile: MiniLM (and ours with CUDA graphs off)"
timeout 240 python3 bench/encoder_vs_torch.py --checkpoint "$D/minilm" --device cuda:0 --compare-graphs \
  --torch-compile --encoder-bench "$D/bin/encoder-bench" --batches 1,32,128 --lengths 16,128,512 \
  2>"$LOGS/evt-minilm.log" | tee "$OUT/encoder-vs-torch-minilm.txt" || failed+=(encoder-vs-torch-minilm)
fi
if want bert-base; then
echo "--- encoder vs PyTorch FP16 eager and torch.compile: synthetic BERT-base"
bert_base &&
timeout 240 python3 bench/encoder_vs_torch.py --checkpoint /tmp/bert-base --device cuda:0 --torch-compile \
  --encoder-bench "$D/bin/encoder-bench" --batches 8,128 --lengths 128,512 \
  2>"$LOGS/evt-bert-base.log" | tee "$OUT/encoder-vs-torch-bert-base.txt" \
  || failed+=(encoder-vs-torch-bert-base)
fi
if want fused-epilogues; then
echo "--- the FFN's bias + GELU in cuBLASLt's epilogue vs the GELU kernel: BERT-base, 3 alternating rounds"
bert_base || failed+=(bert-base)
for round in 1 2 3; do
  for fused in off on; do
    echo "round $round, --cuda-fused-epilogues $fused" >> "$OUT/fused-epilogues.txt"
    timeout 60 "$D/bin/encoder-bench" --checkpoint /tmp/bert-base --device cuda:0 --batches 32,128 \
      --lengths 128,512 --cuda-fused-epilogues "$fused" >> "$OUT/fused-epilogues.txt" 2>&1 \
      || failed+=("fused-epilogues-$fused")
  done
done
cat "$OUT/fused-epilogues.txt"
fi
if want fp8; then
echo "--- FP8 (E4M3 GEMMs, per-channel x per-token scales) vs FP16: BERT-base, 3 alternating rounds"
bert_base || failed+=(bert-base)
for round in 1 2 3; do
  for precision in fp16 fp8; do
    echo "round $round, --precision $precision" >> "$OUT/fp8.txt"
    timeout 60 "$D/bin/encoder-bench" --checkpoint /tmp/bert-base --device cuda:0 --batches 32,128 \
      --lengths 128,512 --precision "$precision" >> "$OUT/fp8.txt" 2>&1 || failed+=("fp8-$precision")
  done
done
cat "$OUT/fp8.txt"
fi
if want families; then
echo "--- the other families on CUDA vs PyTorch FP16 SDPA: synthetic XLM-R, ModernBERT, Qwen3-0.6B"
for fam in xlm-roberta-base:0 modernbert-base:0 qwen3-0.6b:8; do
  name=${fam%%:*}; layers=${fam##*:}
  timeout 300 python3 bench/encoder_vs_torch.py --synthetic "$name" --layers "$layers" --device cuda:0 \
    --precision fp16 --encoder-bench "$D/bin/encoder-bench" --batches 32,128 --lengths 128,512 \
    --rounds 2 2>"$LOGS/evt-$name.log" | tee "$OUT/encoder-vs-torch-$name.txt" \
    || failed+=("encoder-vs-torch-$name")
done
timeout 240 python3 bench/encoder_vs_torch.py --synthetic qwen3-0.6b --layers 8 --device cuda:0 \
  --precision fp16 --encoder-bench "$D/bin/encoder-bench" --mixed 512 --rounds 2 \
  2>"$LOGS/evt-qwen3-mixed.log" | tee "$OUT/encoder-vs-torch-qwen3-mixed.txt" \
  || failed+=(encoder-vs-torch-qwen3-mixed)
fi
if want saturation; then
echo "--- the server at saturation vs the in-process forward pass: MiniLM on cuda:0"
timeout 120 python3 bench/saturation.py --checkpoint "$D/minilm" --device cuda:0 --duration-s 8 \
  | tee "$OUT/saturation.txt" || failed+=(saturation)
fi
if want adversarial && [ "${GPU_RUN_ADVERSARIAL_S:-600}" != 0 ]; then
  echo "--- adversarial: 2x capacity under a tight memory budget for ${GPU_RUN_ADVERSARIAL_S:-600} s"
  timeout $((${GPU_RUN_ADVERSARIAL_S:-600} + 90)) python3 bench/adversarial.py --checkpoint "$D/minilm" --device cuda:0 \
    --batch-bytes 268435456 --duration-s "${GPU_RUN_ADVERSARIAL_S:-600}" \
    | tee "$OUT/adversarial.txt" || failed+=(adversarial)
fi
if want copies; then
echo "--- host<->device copy bandwidth through PyTorch (pinned and pageable), for overlap-bench"
timeout 60 python3 - <<'PY' | tee "$OUT/torch-copy-bandwidth.txt" || failed+=(torch-copy-bandwidth)
import time, torch
n = 64 << 20
d = torch.empty(n, dtype=torch.uint8, device="cuda")
for pinned in (True, False):
    h = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
    for name, copy in (("H2D", lambda: d.copy_(h, non_blocking=True)),
                       ("D2H", lambda: h.copy_(d, non_blocking=True))):
        copy(); torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            copy()
        torch.cuda.synchronize()
        gbs = 10 * n / (time.perf_counter() - t) / 1e9
        print(f"torch {'pinned' if pinned else 'pageable'} {name} 64 MiB: {gbs:.1f} GB/s")
PY
echo "--- overlap-bench cuda:0"
timeout 60 "$D/bin/overlap-bench" --device cuda:0 --n 4096 --gemms 1 --batches 24 | tee "$OUT/overlap-bench.txt" \
  || failed+=(overlap-bench)
fi
if want mixed; then
echo "--- encoder vs PyTorch eager FP16: MiniLM, mixed lengths (packed vs padded)"
timeout 240 python3 bench/encoder_vs_torch.py --checkpoint "$D/minilm" --device cuda:0 \
  --encoder-bench "$D/bin/encoder-bench" --mixed 1024 \
  2>"$LOGS/evt-minilm-mixed.log" | tee "$OUT/encoder-vs-torch-minilm-mixed.txt" \
  || failed+=(encoder-vs-torch-minilm-mixed)
fi
if want allocator; then
echo "--- allocator-bench cuda:0"
timeout 60 "$D/bin/allocator-bench" --device cuda:0 | tee "$OUT/allocator-bench.txt" || failed+=(allocator-bench)
fi
if want bucketing; then
echo "--- bucketing-bench cuda:0"
timeout 60 "$D/bin/bucketing-bench" --device cuda:0 --requests 4000 --model minilm --checkpoint "$D/minilm" \
  | tee "$OUT/bucketing-bench-minilm.txt" || failed+=(bucketing-bench-minilm)
fi
if want serve; then
echo "--- embedded_engine cuda:0"
"$D/bin/embedded_engine" cuda:0 || failed+=(embedded_engine)
echo "--- infer-server on cuda:0 (embed_pool and MiniLM)"
REPO=/tmp/gpu-repo
rm -rf "$REPO" && mkdir -p "$REPO" && cp -r examples/model_repository/embed_pool "$REPO/"
cp -rL "$D/minilm" "$REPO/minilm"
printf 'backend: "bert"\nmax_batch_size: 32\n' > "$REPO/minilm/config.pbtxt"
"$D/bin/infer-server" --device cuda:0 --grpc-address 127.0.0.1:0 --http-address 127.0.0.1:0 --model-repository "$REPO" \
  > "$LOGS/server.log" 2>&1 &
pid=$!
sleep 3
grep -E "device|listening|ready|cannot" "$LOGS/server.log"
grep -q "model .minilm. ready" "$LOGS/server.log" || failed+=(server-minilm-on-cuda)
kill -TERM $pid; wait $pid || failed+=(infer-server)
fi
if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}"; finish; exit 1; fi
echo "ALL PASSED"
finish
