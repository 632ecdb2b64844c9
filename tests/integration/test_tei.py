"""TEI's embedding routes and the embedding options, through the clients
that use them: Hugging Face's InferenceClient (feature_extraction and
sentence_similarity, pointed at the server as TEI users point it), OpenAI's
client with `dimensions`, Triton's gRPC client with the same options as
KServe parameters, and TEI's JSON over plain HTTP; the BERT fixture's
/embed_all against transformers' last hidden states. test_tei_models.py has
the other kinds of model (SPLADE, classifiers and re-rankers, folders
without a Normalize module or embedding options).

The embedding model is the BERT family fixture (tests/fixtures/families/bert,
made and run by transformers) copied with a model card that tags it as
trained with MatryoshkaLoss and a sentence-transformers prompts file.
Embeddings are checked against transformers' (cosine >= 0.9999 in FP32), a
cut embedding against the full one cut and normalised again, a prompt
against its text written out, and /tokenize and /decode against Hugging
Face's tokenizers on the folder's tokenizer.json.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import json
import os
import shutil
import tempfile
import unittest
import urllib.error
import urllib.request

from huggingface_hub import InferenceClient
import numpy as np
import openai
from tokenizers import Tokenizer
import tritonclient.grpc as grpcclient

from infer_server_process import InferServer
from test_families import cosine, inputs, read_safetensors, reference

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = os.path.join(HERE, "..", "fixtures", "families")
PROMPTS = {"query": "query: ", "passage": "passage: "}


def cut(v, d):
    v = np.asarray(v[:d], dtype=np.float64)
    return v / np.linalg.norm(v)


class Http:
    """POST and GET with TEI's JSON, (status, parsed body)."""

    def __init__(self, base):
        self.base = base

    def call(self, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


class TeiEmbeddingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tei_embedder_")
        shutil.copytree(os.path.join(FAMILIES, "bert"), cls.dir, dirs_exist_ok=True)
        with open(os.path.join(cls.dir, "README.md"), "w", encoding="utf-8") as f:
            f.write("---\ntags:\n- sentence-transformers\n- loss:MatryoshkaLoss\n---\n# BERT\n")
        with open(os.path.join(cls.dir, "config_sentence_transformers.json"), "w",
                  encoding="utf-8") as f:
            json.dump({"prompts": PROMPTS, "default_prompt_name": None}, f)
        # One model: POST / and the routes without "model" choose it.
        # FP32 on every CPU: compared with transformers' FP32 within 1e-4.
        cls.server = InferServer(None, "--precision", "fp32", "--model", f"embedder={cls.dir}")
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.http = Http(cls.base)
        cls.hf = InferenceClient(base_url=cls.base)
        cls.openai = openai.OpenAI(base_url=cls.base + "/v1", api_key="unused", max_retries=0)
        cls.ref = [(t, e) for t, _, e in reference("bert") if t is not None]
        cls.width = len(cls.ref[0][1])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_feature_extraction_matches_transformers(self):
        for text, want in self.ref:
            got = self.hf.feature_extraction(text)
            self.assertEqual(got.shape, (1, self.width))
            self.assertGreaterEqual(cosine(got[0], want), 0.9999, text)
            self.assertAlmostEqual(float(np.linalg.norm(got[0])), 1.0, places=5)
        # TEI's /embed, batched, and with token ids.
        status, body = self.http.call("/embed", {"inputs": [t for t, _ in self.ref]})
        self.assertEqual(status, 200, body)
        for (text, want), got in zip(self.ref, body):
            self.assertGreaterEqual(cosine(np.array(got), want), 0.9999, text)
        ids = [i for _, i, _ in reference("bert")]
        status, by_ids = self.http.call("/embed", {"inputs": ids[0]})
        self.assertEqual(status, 200, by_ids)
        self.assertGreaterEqual(cosine(np.array(by_ids[0]), self.ref[0][1]), 0.9999)

    def test_normalize_dimensions_and_prompt_name(self):
        text = self.ref[0][0]
        full = self.hf.feature_extraction(text)[0]
        raw = self.hf.feature_extraction(text, normalize=False)[0]
        self.assertGreater(abs(float(np.linalg.norm(raw)) - 1.0), 1e-3)
        self.assertGreaterEqual(cosine(raw, full), 0.99999)
        short = self.hf.feature_extraction(text, dimensions=16)[0]
        self.assertEqual(len(short), 16)
        np.testing.assert_allclose(short, cut(full, 16), atol=1e-5)
        prompted = self.hf.feature_extraction(text, prompt_name="query")[0]
        written = self.hf.feature_extraction("query: " + text)[0]
        np.testing.assert_allclose(prompted, written, atol=1e-5)
        self.assertLess(cosine(prompted, full), 0.9999)

    def test_openai_dimensions(self):
        text = self.ref[0][0]
        full = self.openai.embeddings.create(model="embedder", input=text).data[0].embedding
        short = self.openai.embeddings.create(model="embedder", input=text,
                                              dimensions=8).data[0].embedding
        np.testing.assert_allclose(short, cut(full, 8), atol=1e-5)
        for bad in (0, self.width + 1):
            with self.assertRaises(openai.BadRequestError) as e:
                self.openai.embeddings.create(model="embedder", input=text, dimensions=bad)
            self.assertIn(f"gives embeddings of 1 to {self.width}", str(e.exception))
            self.assertEqual(e.exception.body["param"], "dimensions")

    def test_kserve_parameters(self):
        text = self.ref[0][0]
        want = cut(self.hf.feature_extraction("passage: " + text)[0], 8)
        with grpcclient.InferenceServerClient(self.server.address) as c:
            inp = grpcclient.InferInput("text", [1], "BYTES")
            inp.set_data_from_numpy(np.array([text.encode()], dtype=object))
            r = c.infer("embedder", [inp], parameters={"dimensions": 8, "prompt_name": "passage"})
            np.testing.assert_allclose(r.as_numpy("embedding")[0], want, atol=1e-5)
            with self.assertRaises(Exception) as e:
                c.infer("embedder", [inp], parameters={"prompt_name": "document"})
            self.assertIn("has no prompt 'document'; its prompts: passage, query",
                          str(e.exception))
            # dimensions of 0, or past the width (named with the width).
            width = len(self.hf.feature_extraction(text)[0])
            for bad, message in ((0, "parameter 'dimensions' must be a positive integer"),
                                 (width + 1, f"'dimensions' is {width + 1}; model 'embedder' "
                                             f"gives embeddings of 1 to {width} dimensions")):
                with self.assertRaises(grpcclient.InferenceServerException) as e:
                    c.infer("embedder", [inp], parameters={"dimensions": bad})
                self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
                self.assertIn(message, e.exception.message())
            # No text at all.
            empty = grpcclient.InferInput("text", [0], "BYTES")
            empty.set_data_from_numpy(np.array([], dtype=object))
            with self.assertRaises(grpcclient.InferenceServerException) as e:
                c.infer("embedder", [empty])
            self.assertIn("input 'text' is empty", e.exception.message())
        # The same parameters over KServe's REST protocol.
        status, body = self.http.call("/v2/models/embedder/infer", {
            "parameters": {"dimensions": 8, "prompt_name": "passage", "normalize": True},
            "inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": [text]}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [1, 8])
        np.testing.assert_allclose(body["outputs"][0]["data"], want, atol=1e-5)
        status, body = self.http.call("/v2/models/embedder/infer", {
            "parameters": {"dimensions": "8"},
            "inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": [text]}]})
        self.assertEqual(status, 400, body)
        self.assertIn("'dimensions' must be a positive integer", body["error"])

    def test_embed_all_matches_transformers(self):
        """/embed_all: every token's last hidden state, as transformers'
        last_hidden_state (tests/fixtures/families/bert's hidden_i); the
        same through Triton's client, naming the outputs."""
        hidden = read_safetensors(os.path.join(FAMILIES, "bert", "reference.safetensors"))
        texts, want = [], []
        for i, (inp, _) in enumerate(inputs("bert")):
            if inp.get("text") is not None and "types" not in inp:
                texts.append(inp["text"])
                want.append(hidden[f"hidden_{i}"])
        status, body = self.http.call("/embed_all", {"inputs": texts})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body), len(texts))
        for text, got, w in zip(texts, body, want):
            self.assertEqual(np.asarray(got).shape, w.shape, text)
            np.testing.assert_allclose(got, w, atol=1e-4, err_msg=text)
        status, body = self.http.call("/embed_all", {"inputs": texts[0], "prompt_name": "query"})
        self.assertEqual(status, 200, body)
        self.assertGreater(len(body[0]), len(want[0]))
        with grpcclient.InferenceServerClient(self.server.address) as c:
            inp = grpcclient.InferInput("text", [2], "BYTES")
            inp.set_data_from_numpy(np.array([t.encode() for t in texts[:2]], dtype=object))
            outs = [grpcclient.InferRequestedOutput(n) for n in ("token_embeddings", "token_counts")]
            r = c.infer("embedder", [inp], outputs=outs)
            counts = r.as_numpy("token_counts")
            self.assertEqual(list(counts), [len(w) for w in want[:2]])
            np.testing.assert_allclose(r.as_numpy("token_embeddings"),
                                       np.concatenate(want[:2]), atol=1e-4)
            # Naming no outputs gives the embedding alone.
            r = c.infer("embedder", [inp])
            self.assertIsNone(r.as_numpy("token_embeddings"))
            self.assertEqual(r.as_numpy("embedding").shape, (2, self.width))

    def test_sentence_similarity(self):
        texts = [t for t, _ in self.ref]
        want = [cosine(self.ref[0][1], e) for _, e in self.ref[1:]] + [1.0]
        for client in (self.hf, InferenceClient(model=self.base + "/similarity")):
            got = client.sentence_similarity(texts[0], texts[1:] + [texts[0]])
            np.testing.assert_allclose(got, want, atol=1e-4)

    def test_tokenize_and_decode_match_tokenizers(self):
        tok = Tokenizer.from_file(os.path.join(self.dir, "tokenizer.json"))
        texts = [t for t, _ in self.ref]
        status, body = self.http.call("/tokenize", {"inputs": texts})
        self.assertEqual(status, 200, body)
        for text, got in zip(texts, body):
            enc = tok.encode(text)
            self.assertEqual([t["id"] for t in got], enc.ids, text)
            for t, (s, e), special, token in zip(got, enc.offsets, enc.special_tokens_mask,
                                                 enc.tokens):
                self.assertEqual(t["special"], bool(special))
                if special:
                    self.assertEqual((t["text"], t["start"], t["stop"]), (token, None, None))
                    continue
                # tokenizers' offsets count characters; TEI's, bytes.
                self.assertEqual((t["start"], t["stop"]),
                                 (len(text[:s].encode()), len(text[:e].encode())), text)
                self.assertEqual(t["text"], text[s:e])
        status, body = self.http.call("/tokenize", {"inputs": texts[0], "prompt_name": "query",
                                                    "add_special_tokens": False})
        self.assertEqual(status, 200, body)
        self.assertEqual([t["id"] for t in body[0]],
                         tok.encode("query: " + texts[0], add_special_tokens=False).ids)
        ids = [tok.encode(t).ids for t in texts]
        status, decoded = self.http.call("/decode", {"ids": ids})
        self.assertEqual(status, 200, decoded)
        self.assertEqual(decoded, [tok.decode(i) for i in ids])
        status, decoded = self.http.call("/decode", {"ids": ids[0], "skip_special_tokens": False})
        self.assertEqual(decoded, [tok.decode(ids[0], skip_special_tokens=False)])
        # Refusals, within the limits, before anything is tokenised.
        vocab = tok.get_vocab_size()
        for path, body, status, message in [
                ("/tokenize", {"inputs": []}, 400, "cannot be empty"),
                ("/tokenize", {"inputs": ""}, 400, "`inputs` cannot be empty"),
                ("/decode", {"ids": []}, 400, "`input_ids` cannot be empty"),
                ("/decode", {"ids": [[1], []]}, 400, "`input_ids` cannot be empty"),
                ("/tokenize", {"inputs": ["x"] * 2000}, 422, "maximum allowed batch size"),
                ("/tokenize", {"inputs": "x", "prompt_name": "document"}, 422,
                 "has no prompt 'document'"),
                ("/decode", {"ids": [vocab]}, 422, f"has ids in [0, {vocab})"),
                ("/decode", {"ids": [-1]}, 422, "has ids in"),
                ("/decode", {"ids": "x"}, 422, "'ids' must be")]:
            got, err = self.http.call(path, body)
            self.assertEqual(got, status, (path, err))
            self.assertIn(message, err["error"])

    def test_info_and_health(self):
        status, info = self.http.call("/info")
        self.assertEqual(status, 200, info)
        # A folder without a config.pbtxt truncates by default (TEI 1.9's).
        self.assertTrue(info["auto_truncate"])
        self.assertEqual(info["model_id"], "embedder")
        self.assertEqual(info["model_type"], {"embedding": {"pooling": "mean"}})
        self.assertEqual(info["model_dtype"], "float32")
        self.assertNotIn("model_dtype_reason", info)  # named (--precision), not chosen by auto
        self.assertEqual(sorted(info["prompts"]), ["passage", "query"])
        # The model's own length: the fixture's sentence_bert_config.json.
        with open(os.path.join(self.dir, "sentence_bert_config.json"), encoding="utf-8") as f:
            self.assertEqual(info["max_input_length"], json.load(f)["max_seq_length"])
        for key in ("max_input_length", "max_batch_tokens", "max_client_batch_size",
                    "max_concurrent_requests", "version"):
            self.assertIn(key, info)
        self.assertEqual(self.http.call("/health")[0], 200)
        self.assertEqual(self.http.call("/ping")[0], 200)
        self.assertEqual(self.http.call("/info?model=nothing")[0], 404)
        # OpenAI's embeddings at TEI's /embeddings too.
        status, a = self.http.call("/embeddings", {"input": "x", "model": "embedder"})
        self.assertEqual(status, 200, a)
        b = self.http.call("/v1/embeddings", {"input": "x", "model": "embedder"})[1]
        self.assertEqual(a["data"], b["data"])

    def test_refusals(self):
        cases = [
            ("/embed", {"inputs": []}, 400, "Empty", "cannot be empty"),
            ("/embed", {"inputs": ""}, 400, "Empty", "cannot be empty"),
            ("/embed", {"inputs": ["x", ""]}, 400, "Empty", "cannot be empty"),
            ("/embed", {"inputs": [[101, 102], []]}, 400, "Empty", "cannot be empty"),
            ("/embed", {"inputs": "x", "dimensions": 0}, 422, "Validation",
             f"gives embeddings of 1 to {self.width}"),
            ("/embed", {"inputs": "x", "prompt_name": "document"}, 422, "Validation",
             "has no prompt 'document'"),
            ("/embed", {"inputs": "x", "normalize": "yes"}, 422, "Validation",
             "'normalize' must be true or false"),
            ("/embed", {"inputs": "x", "model": "nothing"}, 404, "Validation", "nothing"),
            ("/similarity", {"inputs": {"source_sentence": "x", "sentences": []}}, 400,
             "Empty", "cannot be empty"),
            ("/similarity", {"inputs": {"source_sentence": "x"}}, 422, "Validation",
             "source_sentence"),
            ("/rerank", {"query": "x", "texts": ["y"]}, 424, "Backend",
             "no loaded model is a re-ranker"),
            ("/embed_sparse", {"inputs": "x"}, 424, "Backend",
             "no loaded model is a sparse (SPLADE) model"),
            # A model of another kind than the route's: TEI's backend error.
            ("/embed_sparse", {"inputs": "x", "model": "embedder"}, 424, "Backend",
             "has no sparse (SPLADE) output"),
            ("/embed_all", {"inputs": []}, 400, "Empty", "cannot be empty"),
        ]
        for path, body, status, kind, message in cases:
            got, err = self.http.call(path, body)
            self.assertEqual(got, status, (path, body, err))
            self.assertEqual(err["error_type"], kind, err)
            self.assertIn(message, err["error"])
        # OpenAI's route refuses an empty string as OpenAI's API does.
        status, err = self.http.call("/v1/embeddings", {"input": ["x", ""], "model": "embedder"})
        self.assertEqual(status, 400, err)
        self.assertIn("'input' element 1 is an empty string", err["error"]["message"])
        # The server keeps serving.
        self.assertEqual(self.http.call("/embed", {"inputs": "x"})[0], 200)

    def test_over_long_text_is_truncated_by_default(self):
        long_text, cut_ids, full = over_long(self.dir)
        status, body = self.http.call("/embed", {"inputs": long_text})
        self.assertEqual(status, 200, body)
        status, by_ids = self.http.call("/embed", {"inputs": cut_ids})
        self.assertEqual(status, 200, by_ids)
        np.testing.assert_allclose(body[0], by_ids[0], atol=1e-6)
        self.assertIn("longer ones truncated", "".join(self.server.log))
        # TEI's truncate: false refuses, naming both lengths.
        for path in ("/embed", "/embed_all"):
            status, err = self.http.call(path, {"inputs": long_text, "truncate": False})
            self.assertEqual((status, err["error_type"]), (422, "Validation"), err)
            self.assertIn(f"input 'text' element 0 has {len(full)} tokens; model 'embedder' "
                          f"allows {len(cut_ids)}", err["error"])
        # KServe's parameter of the same name.
        with grpcclient.InferenceServerClient(self.server.address) as c:
            inp = grpcclient.InferInput("text", [1], "BYTES")
            inp.set_data_from_numpy(np.array([long_text.encode()], dtype=object))
            r = c.infer("embedder", [inp])
            np.testing.assert_allclose(r.as_numpy("embedding")[0], by_ids[0], atol=1e-6)
            with self.assertRaises(grpcclient.InferenceServerException) as e:
                c.infer("embedder", [inp], parameters={"truncate": False})
            self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
            self.assertIn(f"has {len(full)} tokens; model 'embedder' allows {len(cut_ids)}",
                          e.exception.message())


def over_long(folder):
    """A text over the folder's max_seq_length, the ids sentence-transformers
    embeds for it (Hugging Face's tokenizer truncating at that length, the
    special tokens kept) and its ids uncut."""
    with open(os.path.join(folder, "sentence_bert_config.json"), encoding="utf-8") as f:
        limit = json.load(f)["max_seq_length"]
    text = " ".join(f"word{i % 7} and" for i in range(limit))
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    full = tok.encode(text).ids
    tok.enable_truncation(limit)
    cut_ids = tok.encode(text).ids
    assert len(full) > limit and len(cut_ids) == limit, (len(full), len(cut_ids))
    assert cut_ids[0] == full[0] and cut_ids[-1] == full[-1], "special tokens kept"
    assert cut_ids[1:-1] == full[1:limit - 1]
    return text, cut_ids, full


class RefusingServerTest(unittest.TestCase):
    """--auto-truncate=false: a folder without a config.pbtxt refuses texts
    over its length, unless a request asks for truncation."""

    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(FAMILIES, "bert")
        cls.server = InferServer(None, "--precision", "fp32", "--auto-truncate=false",
                                 "--model", f"strict={cls.dir}")
        cls.http = Http(f"http://127.0.0.1:{cls.server.http_port}")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_refuses_unless_asked(self):
        status, info = self.http.call("/info")
        self.assertEqual(status, 200, info)
        self.assertFalse(info["auto_truncate"])
        long_text, cut_ids, full = over_long(self.dir)
        status, err = self.http.call("/embed", {"inputs": long_text})
        self.assertEqual((status, err["error_type"]), (422, "Validation"), err)
        self.assertIn(f"input 'text' element 0 has {len(full)} tokens; model 'strict' allows "
                      f"{len(cut_ids)}", err["error"])
        status, body = self.http.call("/embed", {"inputs": long_text, "truncate": True})
        self.assertEqual(status, 200, body)
        status, by_ids = self.http.call("/embed", {"inputs": cut_ids})
        self.assertEqual(status, 200, by_ids)
        np.testing.assert_allclose(body[0], by_ids[0], atol=1e-6)
        self.assertIn("longer ones refused", "".join(self.server.log))


if __name__ == "__main__":
    unittest.main()
