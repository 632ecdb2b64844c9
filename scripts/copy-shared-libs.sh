#!/usr/bin/env bash
# Usage: scripts/copy-shared-libs.sh DEST BINARY...
# Copies into DEST the shared libraries the binaries link (as ldd resolves
# them here) that a machine with an NVIDIA driver and CUDA 13 may lack: gRPC,
# protobuf, Abseil, spdlog, oneDNN, OpenMP, libstdc++... Left out: the C
# library and loader (every Linux has its own, and they must match the
# kernel's), and the CUDA libraries (libcuda comes with the driver, libcudart
# and cuBLAS with the CUDA runtime the target provides). Used by
# scripts/gpu-pack.sh and the Dockerfile.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DEST BINARY..." >&2
  exit 2
fi
dest=$1
shift
mkdir -p "$dest"
cuda='^(libcuda|libcudart|libcublas(Lt)?)\.so'
for f in "$@"; do
  missing=$(ldd "$f" | awk '/not found/{print $1}' | grep -Ev "$cuda" || true)
  if [ -n "$missing" ]; then
    echo "copy-shared-libs: $f links libraries this machine lacks: $missing" >&2
    exit 1
  fi
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  if [[ "$name" =~ $cuda ]]; then continue; fi
  case "$name" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*) ;;
    *) cp -L "$lib" "$dest/" ;;
  esac
done
