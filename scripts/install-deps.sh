#!/usr/bin/env bash
# Installs the Debian 12 packages the project builds with, and with --test
# also those only the tests use. Skips apt entirely when everything is
# already installed. Uses sudo when not root.
# The CUDA toolkit is optional and not installed here: when nvcc is present
# (e.g. /usr/local/cuda/bin/nvcc) the CUDA backend is built as well.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libgtest-dev libgmock-dev prometheus-cpp-dev
  libdnnl-dev libcli11-dev nlohmann-json3-dev libboost-dev libicu-dev libpcre2-dev openssl
  libcurl4-openssl-dev libssl-dev
  python3 python3-venv
)
if [ "${1:-}" = "--test" ]; then
  # The load-balancer test runs its own nginx. (On a machine with systemd the
  # package also starts one on port 80: systemctl disable --now nginx.)
  PACKAGES+=(nginx-light curl)
  # The GPU bundle's archives (scripts/gpu-pack.sh: tar -J).
  PACKAGES+=(xz-utils)
  # The fuzz targets: clang with libFuzzer and the sanitizers' runtimes, and
  # its OpenMP runtime (scripts/fuzz.sh).
  PACKAGES+=(clang libclang-rt-14-dev libomp-14-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
