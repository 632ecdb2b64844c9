#!/usr/bin/env bash
# Packs what a GPU machine needs into .device/bundle.tar.xz (git-ignored): the
# built binaries and test binaries (debug info stripped), the shared
# libraries they link that such a machine may lack (gRPC, protobuf, Abseil,
# spdlog, oneDNN...), and all-MiniLM-L6-v2 converted to FP16 (45 MB instead
# of 90), xz-compressed, in two files small enough to copy over one at a time
# (.device/minilm.tar.xz, the weights; .device/bundle.tar.xz, the rest). The
# CUDA libraries (libcudart, libcublas*, libcuda) are not packed: the GPU
# machine has its own CUDA 13. There, scripts/gpu-run.sh unpacks and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/tests" "$STAGE/lib" "$STAGE/buildlib"
scripts/export-demo-models.sh >/dev/null
build/bin/infer-model-gen --from model_repository/minilm --dtype f16 --out "$STAGE/minilm"
find build/bin -maxdepth 1 -type f -executable -exec cp {} "$STAGE/bin/" \;
find build/tests -maxdepth 1 -type f -executable -exec cp {} "$STAGE/tests/" \;
# Test-only shared libraries the tests name by build-tree path (the fake
# libnvidia-ml), and that path, which scripts/gpu-run.sh recreates.
cp build/lib/*.so "$STAGE/buildlib/"
echo "$(pwd)/build" > "$STAGE/build-dir"
strip --strip-debug "$STAGE"/bin/* "$STAGE"/tests/*
scripts/copy-shared-libs.sh "$STAGE/lib" "$STAGE"/bin/* "$STAGE"/tests/*
rm -rf .device
mkdir -p .device
# Two files, each under the device machine's 64 MiB a call: the FP16 weights
# (about 40 MB; they do not compress) and everything else (about 47 MB).
# xz on every core (the archives are the same format).
export XZ_OPT="${XZ_OPT:--6 -T0}"
tar -C "$STAGE" -cJf .device/bundle.tar.xz bin tests lib buildlib build-dir
tar -C "$STAGE" -cJf .device/minilm.tar.xz minilm
du -sh .device/bundle.tar.xz .device/minilm.tar.xz
