"""TEI's routes on the other kinds of model folder: SPLADE models
(tests/fixtures/sparse, sentence-transformers SparseEncoder folders) answer
/embed_sparse, checked against SparseEncoder.encode, and the root routes and
model lists name them; a folder without a Normalize module is normalised by
each route as its API does; a model without embedding options answers
/embed without them; a classifier and a re-ranker (tests/fixtures/classifiers)
answer text_classification and POST / as TEI's do, their scores against
transformers' logits. test_tei.py has the embedding routes.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import json
import os
import shutil
import tempfile
import unittest

from huggingface_hub import InferenceClient
import numpy as np
import openai
import tritonclient.grpc as grpcclient

from infer_server_process import InferServer
from test_families import cosine, read_safetensors, reference
from test_scoring import reference as scoring_reference, softmax
from test_tei import Http

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = os.path.join(HERE, "..", "fixtures", "families")
CLASSIFIERS = os.path.join(HERE, "..", "fixtures", "classifiers")
SPARSE = os.path.join(HERE, "..", "fixtures", "sparse")


def sparse_to_dense(test, terms, vocab):
    """TEI's /embed_sparse terms of one text as a vector of `vocab` values,
    checking on `test` that the ids ascend and the values are positive."""
    v = np.zeros(vocab, dtype=np.float32)
    indices = [t["index"] for t in terms]
    test.assertEqual(indices, sorted(indices))
    for t in terms:
        test.assertGreater(t["value"], 0)
        v[t["index"]] = t["value"]
    return v


class TeiSparseTest(unittest.TestCase):
    """SPLADE models served from sentence-transformers SparseEncoder folders
    (tests/fixtures/sparse: max pooling with a tied decoder, sum pooling with
    log1p twice), against SparseEncoder.encode's vectors: TEI's /embed_sparse
    and POST /, /info, OpenAI's /v1/models, and Triton's client."""

    @classmethod
    def setUpClass(cls):
        cls.names = ["bert-splade", "xlm-roberta-splade", "distilbert-splade"]
        args = []
        for name in cls.names:
            args += ["--model", f"{name}={os.path.join(SPARSE, name)}"]
        cls.server = InferServer(None, "--precision", "fp32", *args)
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.http = Http(cls.base)
        cls.ref = {}
        for name in cls.names:
            with open(os.path.join(SPARSE, name, "reference.json"), encoding="utf-8") as f:
                texts = json.load(f)["texts"]
            tensors = read_safetensors(os.path.join(SPARSE, name, "reference.safetensors"))
            cls.ref[name] = [(t, tensors[f"sparse_{i}"]) for i, t in enumerate(texts)]

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def dense(self, terms, vocab):
        return sparse_to_dense(self, terms, vocab)

    def test_embed_sparse_matches_sparse_encoder(self):
        for name in self.names:
            texts = [t for t, _ in self.ref[name]]
            status, body = self.http.call("/embed_sparse", {"inputs": texts, "model": name})
            self.assertEqual(status, 200, body)
            self.assertEqual(len(body), len(texts))
            for (text, want), got in zip(self.ref[name], body):
                np.testing.assert_allclose(self.dense(got, len(want)), want, atol=2e-4,
                                           err_msg=f"{name}: {text}")
            # Many texts: split over batches, joined in order.
            many = texts * 20
            status, body = self.http.call("/embed_sparse", {"inputs": many, "model": name})
            self.assertEqual(status, 200)
            for (text, want), got in zip(self.ref[name] * 20, body):
                np.testing.assert_allclose(self.dense(got, len(want)), want, atol=2e-4)

    def test_root_info_models_and_kserve(self):
        name = self.names[0]
        text, want = self.ref[name][0]
        status, body = self.http.call("/", {"inputs": text, "model": name})
        self.assertEqual(status, 200, body)
        np.testing.assert_allclose(self.dense(body[0], len(want)), want, atol=2e-4)
        # TEI's SageMaker route is POST / under another name.
        status, again = self.http.call("/invocations", {"inputs": text, "model": name})
        self.assertEqual((status, again), (200, body))
        status, info = self.http.call(f"/info?model={name}")
        self.assertEqual(status, 200, info)
        self.assertEqual(info["model_type"], {"embedding": {"pooling": "splade"}})
        status, models = self.http.call("/v1/models")
        self.assertEqual({m["id"]: m["task"] for m in models["data"]},
                         {n: "sparse" for n in self.names})
        texts = [t for t, _ in self.ref[name][:3]]
        with grpcclient.InferenceServerClient(self.server.address) as c:
            inp = grpcclient.InferInput("text", [3], "BYTES")
            inp.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
            r = c.infer(name, [inp])
            counts = r.as_numpy("sparse_counts")
            indices, values = r.as_numpy("sparse_indices"), r.as_numpy("sparse_values")
            self.assertEqual(len(indices), int(counts.sum()))
            at = 0
            for (text, want), n in zip(self.ref[name], counts):
                got = np.zeros(len(want), dtype=np.float32)
                got[indices[at:at + n]] = values[at:at + n]
                np.testing.assert_allclose(got, want, atol=2e-4, err_msg=text)
                at += n
        # Embedding routes refuse a sparse model, naming it (TEI's backend
        # error: the model is of another kind).
        status, err = self.http.call("/embed", {"inputs": "x", "model": name})
        self.assertEqual((status, err["error_type"]), (424, "Backend"), err)
        self.assertIn("has no embedding output", err["error"])
        # /tokenize serves a sparse model's tokenizer.
        status, tokens = self.http.call("/tokenize", {"inputs": "x", "model": name})
        self.assertEqual(status, 200, tokens)
        status, err = self.http.call("/embed_sparse", {"inputs": "x"})
        self.assertEqual(status, 422, err)
        self.assertIn("several loaded models can answer", err["error"])


class UnnormalisedFolderTest(unittest.TestCase):
    """A sentence-transformers folder whose modules.json lists no Normalize
    (as paraphrase-multilingual-mpnet-base-v2 ships): KServe answers its
    embeddings as sentence-transformers' encode() gives them, not
    normalised; OpenAI's route and TEI's /embed normalise them by default,
    as TEI answers both, and /embed with normalize false gives KServe's."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tei_unnormalised_")
        shutil.copytree(os.path.join(FAMILIES, "bert"), cls.dir, dirs_exist_ok=True)
        modules_path = os.path.join(cls.dir, "modules.json")
        with open(modules_path, encoding="utf-8") as f:
            modules = [m for m in json.load(f) if not m["type"].endswith("Normalize")]
        with open(modules_path, "w", encoding="utf-8") as f:
            json.dump(modules, f)
        shutil.rmtree(os.path.join(cls.dir, "2_Normalize"), ignore_errors=True)
        cls.server = InferServer(None, "--precision", "fp32", "--model", f"plain={cls.dir}")
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.http = Http(cls.base)
        cls.openai = openai.OpenAI(base_url=cls.base + "/v1", api_key="unused", max_retries=0)
        cls.ref = [(t, e) for t, _, e in reference("bert") if t is not None]

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_each_route_normalises_as_its_api_does(self):
        texts = [t for t, _ in self.ref]
        status, body = self.http.call("/v2/models/plain/infer", {
            "inputs": [{"name": "text", "shape": [len(texts)], "datatype": "BYTES",
                        "data": texts}]})
        self.assertEqual(status, 200, body)
        kserve = np.array(body["outputs"][0]["data"]).reshape(len(texts), -1)
        norms = np.linalg.norm(kserve, axis=1)
        self.assertTrue(np.all(np.abs(norms - 1.0) > 1e-3), norms)
        openai_rows = [np.array(d.embedding) for d in
                       self.openai.embeddings.create(model="plain", input=texts).data]
        status, tei = self.http.call("/embed", {"inputs": texts})
        self.assertEqual(status, 200, tei)
        status, tei_raw = self.http.call("/embed", {"inputs": texts, "normalize": False})
        self.assertEqual(status, 200, tei_raw)
        for i, (text, want) in enumerate(self.ref):
            unit = kserve[i] / norms[i]
            self.assertGreaterEqual(cosine(kserve[i], want), 0.9999, text)
            np.testing.assert_allclose(openai_rows[i], unit, atol=1e-5)
            np.testing.assert_allclose(tei[i], unit, atol=1e-5)
            np.testing.assert_allclose(tei_raw[i], kserve[i], rtol=1e-5, atol=1e-5)


class TeiWithoutEmbeddingOptionsTest(unittest.TestCase):
    """A model whose embedding has no options (the built-in embed_pool, token
    ids in): TEI's /embed answers it with TEI's default, and refuses the
    options it does not have."""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp(prefix="tei_pool_")
        os.makedirs(os.path.join(cls.repo, "pool"))
        with open(os.path.join(cls.repo, "pool", "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write('backend: "embed_pool"\n'
                    'parameters { key: "embedding_size" value { string_value: "8" } }\n')
        cls.server = InferServer(cls.repo)
        cls.http = Http(f"http://127.0.0.1:{cls.server.http_port}")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo, ignore_errors=True)

    def test_embed_without_options(self):
        status, body = self.http.call("/embed", {"inputs": [[1, 2, 3], [4, 5]]})
        self.assertEqual(status, 200, body)
        self.assertEqual([len(e) for e in body], [8, 8])
        for option, message in (({"normalize": False}, "offers no 'normalize'"),
                                ({"dimensions": 4}, "embeddings cannot be shortened")):
            status, err = self.http.call("/embed", {"inputs": [1, 2], **option})
            self.assertEqual(status, 422, err)
            self.assertIn(message, err["error"])


class TeiScoringRootTest(unittest.TestCase):
    """POST / on a classifier (XLM-R's tanh head, DistilBERT's ReLU head,
    ModernBERT's GELU and LayerNorm head on the mean of the tokens) and
    on a re-ranker (TEI serves one model; so do these servers), and
    text_classification through InferenceClient."""

    @classmethod
    def setUpClass(cls):
        cls.classifiers = {}
        for name in ("xlm-roberta-classifier", "distilbert-classifier", "modernbert-classifier"):
            server = InferServer(None, "--precision", "fp32",
                                 "--model", f"classifier={os.path.join(CLASSIFIERS, name)}")
            cls.classifiers[name] = (server, *scoring_reference(name))
        cls.reranker = InferServer(
            None, "--precision", "fp32",
            "--model", f"reranker={os.path.join(CLASSIFIERS, 'bert-reranker')}")
        _, cls.pairs = scoring_reference("bert-reranker")

    @classmethod
    def tearDownClass(cls):
        for server, _, _ in cls.classifiers.values():
            server.stop()
        cls.reranker.stop()

    def test_text_classification(self):
        for name in self.classifiers:
            with self.subTest(name):
                self.check_text_classification(*self.classifiers[name])

    def check_text_classification(self, server, labels, classified):
        self.labels, self.classified = labels, classified
        base = f"http://127.0.0.1:{server.http_port}"
        http = Http(base)
        # POST / on a pair: TEI's predict, against transformers' logits.
        for query, passage, logits in self.classified:
            want = softmax(np.asarray(logits).reshape(-1))
            status, got = http.call("/", {"inputs": [query, passage]})
            self.assertEqual(status, 200, got)
            self.assertEqual(got[0]["label"], self.labels[int(np.argmax(want))])
            for p in got:
                self.assertAlmostEqual(p["score"], float(want[self.labels.index(p["label"])]),
                                       delta=1e-4)
        # InferenceClient on a single text (the fixture's references are
        # pairs): what TEI's /predict answers, parsed by the client, which
        # returns the top prediction of TEI's flat list.
        client = InferenceClient(base_url=base)
        for text in {q for q, _, _ in self.classified}:
            status, want = http.call("/predict", {"inputs": text})
            self.assertEqual(status, 200, want)
            got = client.text_classification(text)
            top = got[0] if isinstance(got, list) else got
            self.assertEqual(top.label, want[0]["label"])
            self.assertAlmostEqual(top.score, want[0]["score"], delta=1e-6)
            self.assertAlmostEqual(sum(p["score"] for p in want), 1.0, delta=1e-5)
        status, top2 = http.call("/", {"inputs": self.classified[0][0],
                                       "parameters": {"top_k": 2, "function_to_apply": "none"}})
        self.assertEqual(status, 200, top2)
        self.assertEqual(len(top2), 2)
        self.assertGreaterEqual(top2[0]["score"], top2[1]["score"])
        status, raw = http.call("/predict", {"inputs": self.classified[0][0], "raw_scores": True})
        self.assertEqual([p["score"] for p in top2], [p["score"] for p in raw[:2]])
        status, info = http.call("/info")
        self.assertEqual(status, 200, info)
        self.assertEqual(list(info["model_type"]), ["classifier"])
        self.assertEqual(info["model_type"]["classifier"]["id2label"],
                         {str(i): l for i, l in enumerate(self.labels)})

    def test_root_reranks_on_a_reranker(self):
        http = Http(f"http://127.0.0.1:{self.reranker.http_port}")
        query = self.pairs[0][0]
        docs = [p for q, p, _ in self.pairs if q == query]
        status, ranks = http.call("/", {"query": query, "texts": docs, "raw_scores": True})
        self.assertEqual(status, 200, ranks)
        want = {p: float(l[0]) for q, p, l in self.pairs if q == query}
        for r in ranks:
            self.assertAlmostEqual(r["score"], want[docs[r["index"]]], delta=1e-4)
        status, info = http.call("/info")
        self.assertEqual(list(info["model_type"]), ["reranker"])


if __name__ == "__main__":
    unittest.main()
