# infer-server on NVIDIA's CUDA 13 runtime image.
#
#   docker build -t infer-server .
#   docker run --rm --gpus 1 -p 8001:8001 -p 8002:8002 -v /srv/models:/models infer-server
#   docker run --rm --gpus 1 -p 8080:8000 -v $PWD/data:/data infer-server \
#       --model-id BAAI/bge-small-en-v1.5          # TEI's arguments, as TEI's image takes them
#
# The ENTRYPOINT reads deploy/docker/container.toml (every port on every
# address, the drain's timings) before the arguments, which win over it.
# The CMD below is the default argument list; arguments given to `docker run`
# (or a Kubernetes container's `args`, see deploy/kubernetes/) replace it.
# Without a GPU: `docker run ... infer-server --device=cpu ...`.
# Models by hub id go to the Hugging Face cache at /data (a volume, as with
# TEI's image: docs/tei-command-line.md).
#
# Two stages:
# - build: Debian 12, the distribution the project is built and tested on
#   (the packages of scripts/install-deps.sh), plus the CUDA 13 compiler and
#   cuBLAS from NVIDIA's Debian 12 repository;
# - run: nvidia/cuda's runtime image, which brings libcudart and cuBLAS (the
#   driver's libcuda comes from the host through the NVIDIA container
#   toolkit). The binary and the Debian libraries it links (gRPC, protobuf,
#   Abseil, spdlog, oneDNN...; scripts/copy-shared-libs.sh) go to
#   /opt/infer-server. This is the set scripts/gpu-pack.sh carries to GPU
#   machines, where it runs as built here.
#
# Keep CUDA_MAJOR_MINOR, the nvidia/cuda tag and the CUDA package names on
# one CUDA version: the runtime's cuBLAS must match the headers built against.

ARG CUDA_IMAGE=nvidia/cuda:13.0.2-runtime-ubuntu24.04

FROM debian:12 AS build
ARG CUDA_PACKAGE_VERSION=13-0
ARG CUDA_MAJOR_MINOR=13.0
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && curl -fsSL -o /tmp/cuda-keyring.deb \
      https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
 && dpkg -i /tmp/cuda-keyring.deb \
 && rm /tmp/cuda-keyring.deb \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      "cuda-nvcc-${CUDA_PACKAGE_VERSION}" "cuda-cudart-dev-${CUDA_PACKAGE_VERSION}" \
      "libcublas-dev-${CUDA_PACKAGE_VERSION}" \
 && rm -rf /var/lib/apt/lists/*
ENV CUDACXX=/usr/local/cuda-${CUDA_MAJOR_MINOR}/bin/nvcc
WORKDIR /src
# The dependencies first, so that a source change does not reinstall them.
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Fails unless the CUDA backend is built: an image for GPUs without it would
# only be found out at `--device=cuda:0`.
RUN BUILD_TYPE=Release scripts/build.sh --target infer-server \
 && readelf -d build/bin/infer-server | grep -q "NEEDED.*libcudart" \
 && mkdir -p /opt/infer-server/bin \
 && cp build/bin/infer-server /opt/infer-server/bin/ \
 && strip --strip-debug /opt/infer-server/bin/infer-server \
 && scripts/copy-shared-libs.sh /opt/infer-server/lib /opt/infer-server/bin/infer-server

FROM ${CUDA_IMAGE}
COPY --from=build /opt/infer-server /opt/infer-server
COPY --from=build /src/deploy/docker/container.toml /opt/infer-server/container.toml
# --model-id talks to the hub over HTTPS: libcurl needs the CA bundle.
# hadolint ignore=DL3008
RUN if [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update && apt-get install -y --no-install-recommends ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi
# Ahead of the image's own path (where the container toolkit puts the
# driver's libraries), not instead of it.
ENV LD_LIBRARY_PATH=/opt/infer-server/lib:${LD_LIBRARY_PATH}
# Fails the build if a library the binary needs is missing here. (--help
# touches no device.)
RUN /opt/infer-server/bin/infer-server --help >/dev/null \
 && useradd --system --uid 10001 --no-create-home infer \
 && mkdir -p /data && chown 10001 /data
# The Hugging Face cache of --model-id, where TEI's image keeps it.
ENV HUGGINGFACE_HUB_CACHE=/data
USER 10001
# HTTP (KServe v2 REST, OpenAI, TEI and Cohere routes), gRPC (KServe v2,
# grpc.health.v1) and Prometheus metrics.
EXPOSE 8000 8001 8002
# SIGTERM starts the drain (NOT_SERVING, grace, GOAWAY, answer, exit 0): give
# `docker stop` more than grace + drain, e.g. `docker stop -t 30`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/infer-server/bin/infer-server", "--config=/opt/infer-server/container.toml"]
CMD ["--device=cuda:0", "--grpc-address=0.0.0.0:8001", "--metrics-address=0.0.0.0:8002", \
     "--model-repository=/models", "--drain-grace-s=5", "--drain-timeout-s=20"]
