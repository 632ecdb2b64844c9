"""A model's base path, /models/{name}: one model of several answered as a
single-model TEI server answers, so that Hugging Face's InferenceClient
pointed at http://host:port/models/NAME works for feature_extraction,
sentence_similarity and text_classification.

One server holds an embedder (the BERT family fixture), a classifier
(tests/fixtures/classifiers/distilbert-classifier) and a re-ranker
(bert-reranker); two single-model servers hold the embedder and the
classifier alone. Each model's base path gives what its single-model
server's top-level routes give (and the embeddings and class scores match
transformers'); an unknown name is 404 in TEI's {"error", "error_type"};
the top-level POST / of the server with several models is still 422
naming them; a route the model cannot answer is refused as the
single-model server refuses it.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import os
import unittest
import urllib.error
import urllib.request

from huggingface_hub import InferenceClient
from huggingface_hub.errors import HfHubHTTPError
import numpy as np
import openai

from infer_server_process import InferServer
from test_families import cosine, reference
from test_scoring import reference as scoring_reference, softmax
from test_tei import Http

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = os.path.join(HERE, "..", "fixtures", "families", "bert")
CLASSIFIERS = os.path.join(HERE, "..", "fixtures", "classifiers")
CLASSIFIER = os.path.join(CLASSIFIERS, "distilbert-classifier")
RERANKER = os.path.join(CLASSIFIERS, "bert-reranker")


def raw(base, method, path, body=b""):
    """(status, headers, body bytes) of a request with any method."""
    req = urllib.request.Request(base + path, data=body or None, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class TeiModelPathsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        common = ("--precision", "fp32")
        cls.multi = InferServer(None, *common, "--model", f"embedder={BERT}",
                                "--model", f"classifier={CLASSIFIER}",
                                "--model", f"reranker={RERANKER}")
        cls.single_embedder = InferServer(None, *common, "--model", f"embedder={BERT}")
        cls.single_classifier = InferServer(None, *common, "--model", f"classifier={CLASSIFIER}")
        cls.base = f"http://127.0.0.1:{cls.multi.http_port}"
        cls.single_base = f"http://127.0.0.1:{cls.single_embedder.http_port}"
        cls.classifier_base = f"http://127.0.0.1:{cls.single_classifier.http_port}"
        cls.http = Http(cls.base)
        cls.ref = [(t, e) for t, _, e in reference("bert") if t is not None]
        cls.labels, cls.classified = scoring_reference("distilbert-classifier")
        _, cls.pairs = scoring_reference("bert-reranker")

    @classmethod
    def tearDownClass(cls):
        for server in (cls.multi, cls.single_embedder, cls.single_classifier):
            server.stop()

    def model_client(self, name):
        return InferenceClient(base_url=f"{self.base}/models/{name}")

    def test_feature_extraction(self):
        per_model = self.model_client("embedder")
        single = InferenceClient(base_url=self.single_base)
        for text, want in self.ref:
            got = per_model.feature_extraction(text)
            self.assertEqual(got.shape, (1, len(want)))
            self.assertGreaterEqual(cosine(got[0], want), 0.9999, text)
            np.testing.assert_allclose(got, single.feature_extraction(text), rtol=0, atol=1e-6)
        # TEI's /embed under the base path, against the single server's.
        texts = [t for t, _ in self.ref]
        status, got = self.http.call("/models/embedder/embed", {"inputs": texts})
        self.assertEqual(status, 200, got)
        status, want = Http(self.single_base).call("/embed", {"inputs": texts})
        self.assertEqual(status, 200, want)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)

    def test_sentence_similarity(self):
        source, others = self.ref[0][0], [t for t, _ in self.ref[1:]]
        got = self.model_client("embedder").sentence_similarity(source, others)
        want = InferenceClient(base_url=self.single_base).sentence_similarity(source, others)
        self.assertEqual(len(got), len(others))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        for score, (_, emb) in zip(got, self.ref[1:]):
            self.assertAlmostEqual(score, cosine(self.ref[0][1], emb), delta=1e-4)

    def test_text_classification(self):
        per_model = self.model_client("classifier")
        single = InferenceClient(base_url=self.classifier_base)
        # The client returns the top prediction of TEI's flat list (or a
        # list of them, by version).
        top = lambda got: got[0] if isinstance(got, list) else got  # noqa: E731
        for text in {q for q, _, _ in self.classified}:
            got = top(per_model.text_classification(text))
            want = top(single.text_classification(text))
            self.assertEqual(got.label, want.label)
            self.assertAlmostEqual(got.score, want.score, delta=1e-6)
        # POST /models/classifier on a pair: TEI's predict, against
        # transformers' logits.
        for query, passage, logits in self.classified:
            probs = softmax(np.asarray(logits).reshape(-1))
            status, got = self.http.call("/models/classifier", {"inputs": [query, passage]})
            self.assertEqual(status, 200, got)
            self.assertEqual(got[0]["label"], self.labels[int(np.argmax(probs))])
            for p in got:
                self.assertAlmostEqual(p["score"], float(probs[self.labels.index(p["label"])]),
                                       delta=1e-4)

    def test_root_reranks_on_the_rerankers_path(self):
        query = self.pairs[0][0]
        docs = [p for q, p, _ in self.pairs if q == query]
        body = {"query": query, "texts": docs, "raw_scores": True}
        status, ranks = self.http.call("/models/reranker/", body)
        self.assertEqual(status, 200, ranks)
        want = {p: float(l[0]) for q, p, l in self.pairs if q == query}
        for r in ranks:
            self.assertAlmostEqual(r["score"], want[docs[r["index"]]], delta=1e-4)
        self.assertEqual(self.http.call("/models/reranker/rerank", body), (status, ranks))

    def test_unknown_model_is_404_in_teis_shape(self):
        with self.assertRaises(HfHubHTTPError) as e:
            self.model_client("nope").feature_extraction("a")
        self.assertEqual(e.exception.response.status_code, 404)
        for path in ("/models/nope", "/models/nope/embed", "/models/nope/info"):
            status, body = self.http.call(path, None if path.endswith("info") else {"inputs": "a"})
            self.assertEqual(status, 404, path)
            self.assertEqual(set(body), {"error", "error_type"}, body)
            self.assertIn("unknown model 'nope'; loaded models: classifier, embedder, reranker",
                          body["error"])

    def test_top_level_still_refuses_to_choose_among_several(self):
        with self.assertRaises(HfHubHTTPError) as e:
            InferenceClient(base_url=self.base).feature_extraction("a")
        self.assertEqual(e.exception.response.status_code, 422)
        status, body = self.http.call("/", {"inputs": "a"})
        self.assertEqual(status, 422, body)
        self.assertEqual(body["error_type"], "Validation")
        self.assertIn("several loaded models can answer (classifier, embedder, reranker)",
                      body["error"])

    def test_single_model_server_unchanged(self):
        single = Http(self.single_base)
        text = self.ref[0][0]
        status, root = single.call("/", {"inputs": text})
        self.assertEqual(status, 200, root)
        self.assertGreaterEqual(cosine(np.array(root[0]), self.ref[0][1]), 0.9999)
        self.assertEqual(single.call("/models/embedder", {"inputs": text}), (200, root))
        status, info = single.call("/info")
        self.assertEqual((status, info["model_id"]), (200, "embedder"))
        self.assertEqual(single.call("/models/embedder/info"), (status, info))
        self.assertEqual(single.call("/health")[0], 200)

    def test_a_route_the_model_cannot_answer(self):
        # As the single-model server answers /rerank and /embed on a model of
        # another kind: TEI's 424 "Backend".
        body = {"query": "q", "texts": ["a", "b"]}
        status, single = Http(self.single_base).call("/rerank", body)
        self.assertEqual((status, single["error_type"]), (424, "Backend"), single)
        status, got = self.http.call("/models/embedder/rerank", body)
        self.assertEqual((status, got["error_type"]), (424, "Backend"), got)
        self.assertIn("model 'embedder' is not a re-ranker", got["error"])
        status, got = self.http.call("/models/classifier/embed", {"inputs": "a"})
        self.assertEqual((status, got["error_type"]), (424, "Backend"), got)
        # A body naming another model than the path's.
        status, got = self.http.call("/models/embedder/embed",
                                     {"inputs": "a", "model": "classifier"})
        self.assertEqual((status, got["error_type"]), (422, "Validation"), got)
        self.assertIn("'model' 'classifier' is not the model the path names ('embedder')",
                      got["error"])

    def test_openai_embeddings_under_the_path(self):
        text = self.ref[0][0]
        client = openai.OpenAI(base_url=f"{self.base}/models/embedder/v1", api_key="unused",
                               max_retries=0)
        got = client.embeddings.create(model="embedder", input=text).data[0].embedding
        self.assertGreaterEqual(cosine(np.array(got), self.ref[0][1]), 0.9999)
        # The path implies the model: the body may leave it out.
        status, body = self.http.call("/models/embedder/v1/embeddings", {"input": text})
        self.assertEqual(status, 200, body)
        np.testing.assert_allclose(body["data"][0]["embedding"], got, rtol=0, atol=1e-6)
        with self.assertRaises(openai.BadRequestError) as e:
            client.embeddings.create(model="classifier", input=text)
        self.assertEqual(e.exception.body["param"], "model")
        self.assertIn("is not the model the path names", e.exception.body["message"])

    def test_other_routes_under_the_path(self):
        status, info = self.http.call("/models/classifier/info")
        self.assertEqual(status, 200, info)
        self.assertEqual(info["model_id"], "classifier")
        self.assertNotIn("models", info)
        self.assertEqual(info["model_type"]["classifier"]["id2label"],
                         {str(i): l for i, l in enumerate(self.labels)})
        for path in ("/models/embedder", "/models/embedder/health", "/models/reranker/ping"):
            self.assertEqual(raw(self.base, "GET", path)[0], 200, path)
        status, got = self.http.call("/models/embedder/tokenize", {"inputs": self.ref[0][0]})
        self.assertEqual(status, 200, got)
        self.assertEqual((status, got),
                         Http(self.single_base).call("/tokenize", {"inputs": self.ref[0][0]}))
        ids = {"ids": [t["id"] for t in got[0]]}
        status, text = self.http.call("/models/embedder/decode", ids)
        self.assertEqual(status, 200, text)
        self.assertEqual((status, text), Http(self.single_base).call("/decode", ids))
        self.assertTrue(text[0])
        # Served for the whole server only, or not at all.
        for path in ("/models/embedder/metrics", "/models/embedder/v1/rerank",
                     "/models/embedder/nothing", "/models/", "/models//embed"):
            status, _, body = raw(self.base, "GET", path)
            self.assertEqual(status, 404, path)
            self.assertIn("error_type", body.decode(), path)
        status, headers, body = raw(self.base, "GET", "/models/embedder/embed")
        self.assertEqual((status, headers["Allow"]), (405, "POST"), body)
        status, headers, _ = raw(self.base, "PUT", "/models/embedder", b"{}")
        self.assertEqual((status, headers["Allow"]), (405, "GET, POST"))


if __name__ == "__main__":
    unittest.main()
