"""Rerank and classification served from plain Hugging Face folders
(tests/fixtures/classifiers: a one-label BERT cross-encoder and a
three-label XLM-R classifier that transformers made and ran,
models/tools/make_family_fixtures.py --classifiers; and a GTE cross-encoder
as gte-multilingual-reranker-base ships, made and run by the NumPy
transcription of its authors' code, make_remote_code_fixtures.py), through the clients
that speak them: Cohere's SDK (Client on /v1/rerank, ClientV2 on
/v2/rerank), TEI's /rerank and /predict over plain HTTP, and Triton's gRPC
client with the KServe inputs query/documents and text/text_pair. Every
score is checked against transformers' logits (through a sigmoid or a
softmax, as TEI and Cohere give them); and the refusals name what was
wrong, with the status each API uses.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import json
import math
import os
import shutil
import tempfile
import unittest
import urllib.error
import urllib.request

import cohere
from cohere.core.api_error import ApiError
import numpy as np
import tritonclient.grpc as grpcclient

from infer_server_process import InferServer
from test_families import read_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "classifiers")
# The fixtures' tokenizer_config.json says 64 tokens; longer reference
# pairs are left out (the model refuses them without truncation).
MAX_TOKENS = 64


def reference(name):
    """[(query, passage, logits)] of a fixture, the pairs within its length."""
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    tensors = read_safetensors(os.path.join(folder, "reference.safetensors"))
    return ref["labels"], [(inp["pair"][0], inp["pair"][1], tensors[f"logits_{i}"])
                           for i, inp in enumerate(ref["inputs"])
                           if len(inp["ids"]) <= MAX_TOKENS]


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def softmax(v):
    e = np.exp(v - np.max(v))
    return e / e.sum()


def post_json(base, path, body):
    """(status, parsed JSON) of a POST to the server at `base`."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class ScoringTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # FP32 on every CPU: the scores are compared with transformers' FP32
        # logits within 1e-4 (auto would pick BF16 on a CPU with native BF16).
        cls.server = InferServer(
            None, "--precision", "fp32",
            "--model", f"reranker={os.path.join(FIXTURES, 'bert-reranker')}",
            "--model", f"classifier={os.path.join(FIXTURES, 'xlm-roberta-classifier')}")
        base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.base = base
        cls.cohere = cohere.Client(base_url=base, api_key="unused", timeout=30)
        cls.cohere2 = cohere.ClientV2(base_url=base, api_key="unused", timeout=30)
        cls.grpc = grpcclient.InferenceServerClient(cls.server.address)
        _, cls.pairs = reference("bert-reranker")
        cls.labels, cls.classified = reference("xlm-roberta-classifier")

    @classmethod
    def tearDownClass(cls):
        cls.grpc.close()
        cls.server.stop()

    def post(self, path, body):
        return post_json(self.base, path, body)

    def rerank_case(self):
        """One query against every passage of the fixture, with transformers'
        logit of each pair that is a reference pair (others: None)."""
        query = self.pairs[0][0]
        docs = [p for _, p, _ in self.pairs]
        want = [float(l[0]) if q == query else None for q, _, l in self.pairs]
        return query, docs, want

    def test_cohere_v1_rerank_matches_transformers(self):
        query, docs, want = self.rerank_case()
        r = self.cohere.rerank(model="reranker", query=query, documents=docs,
                               return_documents=True)
        self.assertEqual(len(r.results), len(docs))
        scores = [x.relevance_score for x in r.results]
        self.assertEqual(scores, sorted(scores, reverse=True))
        for x in r.results:
            self.assertEqual(x.document.text, docs[x.index])
            if want[x.index] is not None:
                self.assertAlmostEqual(x.relevance_score, sigmoid(want[x.index]), delta=1e-4)
        # top_n keeps the best; past N it returns all N, as Cohere does.
        top = self.cohere.rerank(model="reranker", query=query, documents=docs, top_n=2)
        self.assertEqual([x.index for x in top.results], [x.index for x in r.results[:2]])
        self.assertIsNone(top.results[0].document)
        self.assertEqual(len(self.cohere.rerank(model="reranker", query=query, documents=docs,
                                                top_n=100).results), len(docs))
        # Documents as objects with a text field (v1).
        obj = self.cohere.rerank(model="reranker", query=query,
                                 documents=[{"text": d} for d in docs])
        self.assertEqual([x.index for x in obj.results], [x.index for x in r.results])

    def test_cohere_v2_rerank_matches_transformers(self):
        query, docs, want = self.rerank_case()
        r = self.cohere2.rerank(model="reranker", query=query, documents=docs, top_n=3)
        self.assertEqual(len(r.results), 3)
        v1 = self.cohere.rerank(model="reranker", query=query, documents=docs)
        self.assertEqual([x.index for x in r.results], [x.index for x in v1.results[:3]])
        for x in r.results:
            if want[x.index] is not None:
                self.assertAlmostEqual(x.relevance_score, sigmoid(want[x.index]), delta=1e-4)

    def test_tei_rerank_and_predict_match_transformers(self):
        query, docs, want = self.rerank_case()
        # No "model": the one loaded re-ranker answers, as TEI serves one.
        status, ranks = self.post("/rerank", {"query": query, "texts": docs,
                                              "return_text": True})
        self.assertEqual(status, 200, ranks)
        self.assertEqual(sorted(r["index"] for r in ranks), list(range(len(docs))))
        for r in ranks:
            self.assertEqual(r["text"], docs[r["index"]])
            if want[r["index"]] is not None:
                self.assertAlmostEqual(r["score"], sigmoid(want[r["index"]]), delta=1e-4)
        status, raw = self.post("/rerank", {"query": query, "texts": docs, "raw_scores": True})
        self.assertEqual(status, 200, raw)
        for r in raw:
            if want[r["index"]] is not None:
                self.assertAlmostEqual(r["score"], want[r["index"]], delta=1e-4)
        # /predict on the classifier: a pair, a batch of pairs, softmax.
        q, p, logits = self.classified[0]
        # The re-ranker classifies too: without "model", the choice is
        # refused naming both.
        status, body = self.post("/predict", {"inputs": [q, p]})
        self.assertEqual(status, 422, body)
        self.assertIn("(classifier, reranker); name one in 'model'", body["error"])
        status, one = self.post("/predict", {"model": "classifier", "inputs": [q, p]})
        self.assertEqual(status, 200, one)
        probs = softmax(logits)
        self.assertEqual([x["label"] for x in one],
                         [self.labels[i] for i in np.argsort(-probs, kind="stable")])
        for x in one:
            self.assertAlmostEqual(x["score"], probs[self.labels.index(x["label"])], delta=1e-4)
        status, batch = self.post("/predict", {"model": "classifier",
                                               "inputs": [[a, b] for a, b, _ in self.classified],
                                               "raw_scores": True})
        self.assertEqual(status, 200, batch)
        self.assertEqual(len(batch), len(self.classified))
        for got, (_, _, logits) in zip(batch, self.classified):
            for x in got:
                self.assertAlmostEqual(x["score"], logits[self.labels.index(x["label"])],
                                       delta=1e-4)

    def test_predict_batch_mixing_texts_and_pairs(self):
        """TEI takes a batch of single texts and pairs together: each row is
        answered as it is alone (pairs as transformers' logits), in the
        batch's order."""
        pairs = [[a, b] for a, b, _ in self.classified]
        singles = [[a] for a, _, _ in self.classified]
        mixed = [row for two in zip(singles, pairs) for row in two]
        status, alone = self.post("/predict", {"model": "classifier", "inputs": singles,
                                               "raw_scores": True})
        self.assertEqual(status, 200, alone)
        status, got = self.post("/predict", {"model": "classifier", "inputs": mixed,
                                             "raw_scores": True})
        self.assertEqual(status, 200, got)
        self.assertEqual(len(got), len(mixed))
        for i, (_, _, logits) in enumerate(self.classified):
            single, pair = got[2 * i], got[2 * i + 1]
            self.assertEqual(len(single), len(self.labels))
            self.assertEqual(len(pair), len(self.labels))
            self.assertEqual([x["label"] for x in single], [x["label"] for x in alone[i]])
            for x, y in zip(single, alone[i]):
                self.assertAlmostEqual(x["score"], y["score"], delta=1e-4)
            for x in pair:
                self.assertAlmostEqual(x["score"], logits[self.labels.index(x["label"])],
                                       delta=1e-4)
        # top_k and the function apply to every row of both kinds: the best
        # label of each, through a sigmoid of its logit.
        a, b, _ = self.classified[0]
        inputs = [[a], [a, b]]
        status, raw = self.post("/predict", {"model": "classifier", "inputs": inputs,
                                             "raw_scores": True})
        self.assertEqual(status, 200, raw)
        status, top = self.post("/predict", {"model": "classifier", "inputs": inputs,
                                             "parameters": {"top_k": 1,
                                                            "function_to_apply": "sigmoid"}})
        self.assertEqual(status, 200, top)
        self.assertEqual([len(row) for row in top], [1, 1])
        for best, row in zip(top, raw):
            self.assertEqual(best[0]["label"], row[0]["label"])
            self.assertAlmostEqual(best[0]["score"], sigmoid(row[0]["score"]), delta=1e-5)

    def test_kserve_query_and_documents_give_the_logits(self):
        query, docs, want = self.rerank_case()
        q = grpcclient.InferInput("query", [1], "BYTES")
        q.set_data_from_numpy(np.array([query.encode()], dtype=object))
        d = grpcclient.InferInput("documents", [len(docs)], "BYTES")
        d.set_data_from_numpy(np.array([x.encode() for x in docs], dtype=object))
        scores = self.grpc.infer("reranker", [q, d]).as_numpy("scores")
        self.assertEqual(scores.shape, (len(docs), 1))
        for row, w in zip(scores, want):
            if w is not None:
                self.assertAlmostEqual(float(row[0]), w, delta=1e-4)
        # A query over the length: cut (a folder without a config.pbtxt
        # truncates by default), or refused with the KServe parameter
        # "truncate" (TEI's name) false.
        q.set_data_from_numpy(np.array([" ".join(["guitar"] * 200).encode()], dtype=object))
        with self.assertRaises(grpcclient.InferenceServerException) as e:
            self.grpc.infer("reranker", [q, d], parameters={"truncate": False})
        self.assertIn("input 'query' has", e.exception.message())
        cut = self.grpc.infer("reranker", [q, d])
        self.assertEqual(cut.as_numpy("scores").shape, (len(docs), 1))
        config = self.grpc.get_model_metadata("classifier", as_json=True)
        self.assertIn("scores", [o["name"] for o in config["outputs"]])

    def test_kserve_refusals_name_the_limit(self):
        """The rerank limits over gRPC: no documents, 100,000 documents and
        a query over max_text_bytes, each refused naming what is wrong; the
        server then still answers."""
        def infer(query, docs):
            q = grpcclient.InferInput("query", [1], "BYTES")
            q.set_data_from_numpy(np.array([query.encode()], dtype=object))
            d = grpcclient.InferInput("documents", [len(docs)], "BYTES")
            d.set_data_from_numpy(np.array([x.encode() for x in docs], dtype=object))
            return self.grpc.infer("reranker", [q, d])
        for query, docs, message in (
                ("q", [], "input 'documents' is empty"),
                ("q", ["a"] * 100_000, "over the limit of 1024 per request of model 'reranker' "
                                       "(request_limits.max_client_batch_size)"),
                ("guitar " * ((4 << 20) // 7 + 1), ["a"], "request_limits.max_text_bytes")):
            with self.assertRaises(grpcclient.InferenceServerException) as e:
                infer(query, docs)
            self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
            self.assertIn(message, e.exception.message())
        self.assertEqual(infer("q", ["a", "b"]).as_numpy("scores").shape, (2, 1))

    def test_v1_models_lists_each_models_task(self):
        with urllib.request.urlopen(self.base + "/v1/models", timeout=30) as r:
            models = {m["id"]: m["task"] for m in json.loads(r.read())["data"]}
        self.assertEqual(models, {"reranker": "rerank", "classifier": "classify"})

    def test_bad_requests_are_refused_naming_the_problem(self):
        query, docs, _ = self.rerank_case()
        status, body = self.post("/rerank", {"query": query, "texts": []})
        self.assertEqual((status, body["error_type"]), (400, "Empty"), body)
        # As TEI: an empty list before the model's kind; a pair of two empty
        # texts, or an empty single text, is empty too.
        for path, body in (("/rerank", {"model": "classifier", "query": "q", "texts": []}),
                           ("/rerank", {"query": "", "texts": ["a", ""]}),
                           ("/predict", {"model": "classifier", "inputs": ""}),
                           ("/predict", {"model": "classifier", "inputs": [["", ""]]})):
            status, err = self.post(path, body)
            self.assertEqual((status, err["error_type"]), (400, "Empty"), (path, body, err))
        self.assertEqual(self.post("/rerank", {"query": "", "texts": ["a"]})[0], 200)
        status, body = self.post("/rerank", {"query": query, "texts": ["a"] * 1025})
        self.assertEqual((status, body["error_type"]), (422, "Validation"), body)
        self.assertIn("max_client_batch_size", body["error"])
        # A model of another kind: TEI's backend error.
        status, body = self.post("/rerank", {"model": "classifier", "query": "q", "texts": ["a"]})
        self.assertEqual((status, body["error_type"]), (424, "Backend"), body)
        self.assertIn("not a re-ranker", body["error"])
        # A batch mixing single texts and pairs is checked whole: 1,025 rows
        # are over the limit though each kind alone is within it; the
        # refusal is counted in the model's statistics as one failure.
        failed = self.grpc.get_inference_statistics("classifier").model_stats[0]
        status, body = self.post("/predict", {"model": "classifier",
                                              "inputs": [["a"]] * 513 + [["a", "b"]] * 512})
        self.assertEqual((status, body["error_type"]), (422, "Validation"), body)
        self.assertIn("max_client_batch_size", body["error"])
        after = self.grpc.get_inference_statistics("classifier").model_stats[0]
        self.assertEqual(after.inference_stats.fail.count,
                         failed.inference_stats.fail.count + 1)
        self.assertEqual(after.inference_stats.success.count,
                         failed.inference_stats.success.count)
        # A refusal of either part answers the whole, naming the row by its
        # place in the batch (truncation off: the folder cuts by default).
        long = " ".join(["guitar"] * 200)
        for inputs, row in (([["a"], ["a", "b"], ["a", long]], "element 2 has"),
                            ([["a", "b"], [long]], "input 'text' element 1 has")):
            status, body = self.post("/predict", {"model": "classifier", "inputs": inputs,
                                                  "truncate": False})
            self.assertEqual((status, body["error_type"]), (422, "Validation"), body)
            self.assertIn(row, body["error"])
        status, body = self.post("/predict", {"model": "classifier",
                                              "inputs": [["a"], ["a", "b"], ["a", "b", "c"]]})
        self.assertEqual(status, 422, body)
        self.assertIn("'inputs' must be", body["error"])
        # A query over the model's length, with truncation off and on (the
        # folder's default).
        long_query = " ".join(["guitar"] * 200)
        status, body = self.post("/rerank", {"query": long_query, "texts": ["a"],
                                             "truncate": False})
        self.assertEqual(status, 422, body)
        self.assertIn("input 'query' has", body["error"])
        status, body = self.post("/rerank", {"query": long_query, "texts": ["a"]})
        self.assertEqual(status, 200, body)
        for top_n in (0, -1):
            with self.assertRaises(ApiError) as e:
                self.cohere.rerank(model="reranker", query=query, documents=docs, top_n=top_n)
            self.assertEqual(e.exception.status_code, 400)
        for top_n in (0, -1):
            with self.assertRaises(ApiError) as e:
                self.cohere2.rerank(model="reranker", query=query, documents=docs, top_n=top_n)
            self.assertEqual(e.exception.status_code, 400)
        # top_n past N gives the N.
        self.assertEqual(len(self.cohere2.rerank(model="reranker", query=query, documents=docs,
                                                 top_n=len(docs) + 5).results), len(docs))
        with self.assertRaises(ApiError) as e:
            self.cohere.rerank(model="nope", query=query, documents=docs)
        self.assertEqual(e.exception.status_code, 404)
        # 100,000 documents: refused by the per-request limit, naming it.
        with self.assertRaises(ApiError) as e:
            self.cohere.rerank(model="reranker", query=query, documents=["a"] * 100_000)
        self.assertEqual(e.exception.status_code, 400)
        self.assertIn("max_client_batch_size", str(e.exception.body))
        # A query of more than 4 MiB: over max_text_bytes.
        huge = "guitar " * ((4 << 20) // 7 + 1)
        status, body = self.post("/rerank", {"query": huge, "texts": ["a"]})
        self.assertEqual((status, body["error_type"]), (422, "Validation"), body)
        self.assertIn("max_text_bytes", body["error"])
        # The server still answers.
        self.assertEqual(len(self.cohere.rerank(model="reranker", query=query,
                                                documents=docs).results), len(docs))


class MultiLabelTest(unittest.TestCase):
    """A classifier whose config.json says problem_type
    multi_label_classification (the XLM-R classifier fixture with that
    field): each label's score is its own sigmoid, as transformers'
    text-classification pipeline gives it, not one softmax."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        folder = os.path.join(cls.dir.name, "multi")
        shutil.copytree(os.path.join(FIXTURES, "xlm-roberta-classifier"), folder)
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        config["problem_type"] = "multi_label_classification"
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        cls.server = InferServer(None, "--precision", "fp32", "--model", f"multi={folder}")
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.labels, cls.classified = reference("xlm-roberta-classifier")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_each_label_through_a_sigmoid(self):
        q, p, logits = self.classified[0]
        req = urllib.request.Request(
            self.base + "/predict", headers={"Content-Type": "application/json"},
            data=json.dumps({"inputs": [q, p], "raw_scores": False}).encode())
        with urllib.request.urlopen(req, timeout=30) as resp:
            got = {x["label"]: x["score"] for x in json.loads(resp.read())}
        self.assertEqual(sorted(got), sorted(self.labels))
        for i, label in enumerate(self.labels):
            self.assertAlmostEqual(got[label], sigmoid(float(logits[i])), delta=1e-4)
        self.assertNotAlmostEqual(sum(got.values()), 1.0, delta=1e-3)


class MixedPredictTokenLimitTest(unittest.TestCase):
    """max_request_tokens on a /predict batch mixing single texts and pairs:
    each kind is one engine request, so the limit applies to each part, and
    a refusal says which part it counted."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        folder = os.path.join(cls.dir.name, "limited")
        os.makedirs(folder)
        with open(os.path.join(folder, "config.pbtxt"), "w", encoding="utf-8") as f:
            checkpoint = os.path.abspath(os.path.join(FIXTURES, "xlm-roberta-classifier"))
            f.write('backend: "transformer"\nprecision: "fp32"\n'
                    'request_limits { max_request_tokens: 64 }\n'
                    f'parameters {{ key: "checkpoint_dir" value {{ string_value: "{checkpoint}" }} }}\n')
        cls.server = InferServer(None, "--model", f"limited={folder}")
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def post(self, body):
        return post_json(self.base, "/predict", body)

    def test_each_part_is_held_to_the_limit_and_the_refusal_names_it(self):
        # Short singles and pairs of a few tokens each: both parts within 64.
        status, body = self.post({"inputs": [["a"]] * 4 + [["a", "b"]] * 4})
        self.assertEqual(status, 200, body)
        # Twelve pairs of at least 5 tokens ([CLS] a [SEP] [SEP] b [SEP] for
        # XLM-R) are over 64 tokens; the four singles are not.
        for pairs_first in (False, True):
            inputs = [["a"]] * 4
            inputs = [["a", "b"]] * 12 + inputs if pairs_first else inputs + [["a", "b"]] * 12
            status, body = self.post({"inputs": inputs})
            self.assertEqual((status, body["error_type"]), (422, "Validation"), body)
            self.assertIn("max_request_tokens", body["error"])
            self.assertIn("(the batch's 12 pairs, served apart from its single texts)",
                          body["error"])
        status, body = self.post({"inputs": [["a b c d e f g h"]] * 12 + [["a", "b"]]})
        self.assertEqual(status, 422, body)
        self.assertIn("(the batch's 12 single texts, served apart from its pairs)", body["error"])


class GteRerankerTest(unittest.TestCase):
    """A GTE ("new") cross-encoder, the family's reranker head (pooler.dense,
    tanh, classifier under the "new." prefix), through Cohere's SDK and TEI's
    /rerank, against the reference's logits."""

    @classmethod
    def setUpClass(cls):
        cls.server = InferServer(
            None, "--precision", "fp32",
            "--model", f"gte={os.path.join(FIXTURES, 'gte-reranker')}")
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.cohere = cohere.ClientV2(base_url=cls.base, api_key="unused", timeout=30)
        _, cls.pairs = reference("gte-reranker")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_rerank_scores_match_the_reference(self):
        self.assertGreaterEqual(len(self.pairs), 4)
        # Each reference pair: its passage ranked beside a one-word one
        # (every pair stays within the model's 64 tokens).
        for query, passage, logits in self.pairs:
            docs = ["x", passage]
            r = self.cohere.rerank(model="gte", query=query, documents=docs)
            got = {x.index: x.relevance_score for x in r.results}
            self.assertEqual(sorted(got), [0, 1])
            self.assertAlmostEqual(got[1], sigmoid(float(logits[0])), delta=1e-4, msg=query)
            req = urllib.request.Request(
                self.base + "/rerank", headers={"Content-Type": "application/json"},
                data=json.dumps({"query": query, "texts": docs, "raw_scores": True}).encode())
            with urllib.request.urlopen(req, timeout=30) as resp:
                ranks = {x["index"]: x["score"] for x in json.loads(resp.read())}
            self.assertAlmostEqual(ranks[1], float(logits[0]), delta=1e-4, msg=query)
            self.assertAlmostEqual(ranks[0], math.log(got[0] / (1 - got[0])), delta=1e-3)

if __name__ == "__main__":
    unittest.main()
