"""Every model family served from a plain Hugging Face folder, with no
config.pbtxt: `infer-server --model DIR` for each folder of
tests/fixtures/families (small random-weight checkpoints that transformers
made and ran, models/tools/make_family_fixtures.py), queried with Triton's
gRPC client (text, token ids, and BERT's pairs with token_type_ids) and
OpenAI's official client over HTTP; and the BERT fixture with a
sentence-transformers Dense module, against sentence-transformers' encode().
Each embedding is checked against transformers' own (cosine >= 0.9999), so
the folder's tokenizer, family, pooling and length were all read right.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

import numpy as np
import openai
from tokenizers import Tokenizer
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from infer_server_process import InferServer

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "families")
DENSE = os.path.join(HERE, "..", "fixtures", "dense_head")
FAMILIES = ["xlm-roberta", "mpnet", "modernbert", "qwen3", "bert", "qwen2", "llama", "mistral",
            "distilbert", "nomic_bert", "new", "nomic_bert-native", "gte", "roberta", "camembert",
            "qwen2-scaled", "xlm-roberta-pad3", "mpnet-pad0"]


def read_safetensors(path):
    """{name: float32 array} of an F32 safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        assert t["dtype"] == "F32"
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=np.float32).reshape(
            t["shape"])
    return out


def inputs(family):
    """(input record, its embedding) for each input of the family's fixture."""
    folder = os.path.join(FIXTURES, family)
    with open(os.path.join(folder, "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    tensors = read_safetensors(os.path.join(folder, "reference.safetensors"))
    return [(inp, tensors[f"embedding_{i}"]) for i, inp in enumerate(ref["inputs"])]


def reference(family):
    """(text, ids, embedding) of the single-sequence inputs."""
    return [(inp["text"], inp["ids"], e) for inp, e in inputs(family) if "types" not in inp]


def pairs(family):
    """(ids, token types, embedding) of the fixture's (query, passage) pairs."""
    return [(inp["ids"], inp["types"], e) for inp, e in inputs(family) if "types" in inp]


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


class FamiliesServedFromFoldersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        args = []
        for family in FAMILIES:
            args += ["--model", f"{family}={os.path.join(FIXTURES, family)}"]
        # The BERT fixture with a sentence-transformers Dense module added
        # (tests/fixtures/dense_head, made by sentence-transformers).
        cls.dense_dir = tempfile.mkdtemp(prefix="families_dense_")
        shutil.copytree(os.path.join(FIXTURES, "bert"), cls.dense_dir, dirs_exist_ok=True)
        shutil.copy(os.path.join(DENSE, "modules.json"), cls.dense_dir)
        shutil.copytree(os.path.join(DENSE, "2_Dense"), os.path.join(cls.dense_dir, "2_Dense"))
        args += ["--model", f"dense={cls.dense_dir}"]
        # FP32 on every CPU: the comparisons below are against transformers'
        # FP32 outputs (auto would pick BF16 on a CPU with native BF16).
        cls.server = InferServer(None, "--precision", "fp32", *args)
        cls.grpc = grpcclient.InferenceServerClient(cls.server.address)
        cls.openai = openai.OpenAI(base_url=f"http://127.0.0.1:{cls.server.http_port}/v1",
                                   api_key="unused", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.grpc.close()
        cls.server.stop()
        shutil.rmtree(cls.dense_dir, ignore_errors=True)

    def grpc_embed(self, family, name, array, dtype, parameters=None):
        inp = grpcclient.InferInput(name, list(array.shape), dtype)
        inp.set_data_from_numpy(array)
        return self.grpc.infer(family, [inp], parameters=parameters).as_numpy("embedding")

    def test_the_log_says_what_was_detected(self):
        log = "".join(self.server.log)
        self.assertIn("model 'qwen3': qwen3: 2 layers", log)
        self.assertIn("last_token pooling", log)
        self.assertIn("tokenizer.json", log)
        self.assertIn("backend transformer", log)
        # Every family's line: its model_type, tokenizer, pooling as its
        # 1_Pooling says, and the normalisation its modules.json lists.
        names = {"lasttoken": "last_token"}
        for family in FAMILIES:
            with open(os.path.join(FIXTURES, family, "config.json"), encoding="utf-8") as f:
                model_type = json.load(f)["model_type"]
            with open(os.path.join(FIXTURES, family, "reference.json"), encoding="utf-8") as f:
                pooling = json.load(f)["pooling"]
            lines = [line for line in self.server.log if f"model '{family}': " in line]
            self.assertEqual(len(lines), 1, family)
            self.assertIn(f"model '{family}': {model_type}: ", lines[0])
            self.assertIn(f"/{family}/tokenizer.json;", lines[0])
            self.assertIn(f"; {names.get(pooling, pooling)} pooling, L2-normalised (modules.json "
                          "lists Normalize);", lines[0])

    def test_grpc_text_and_ids_match_transformers(self):
        for family in FAMILIES:
            ref = reference(family)
            texts = [(t, e) for t, _, e in ref if t is not None]
            got = self.grpc_embed(family, "text",
                                  np.array([t.encode() for t, _ in texts], dtype=object), "BYTES")
            for (text, want), row in zip(texts, got):
                self.assertGreaterEqual(cosine(row, want), 0.9999, f"{family}: {text!r}")
            # Token ids, one request per input (lengths 1 to the table's end).
            for text, ids, want in ref:
                row = self.grpc_embed(family, "input_ids", np.array([ids], dtype=np.int64),
                                      "INT64")[0]
                self.assertGreaterEqual(cosine(row, want), 0.9999, f"{family}: ids of {text!r}")

    def test_grpc_token_type_ids_reach_the_encoder(self):
        # BERT's pairs with segment ids 0 and 1, as a cross-encoder gets them.
        cases = pairs("bert")
        self.assertGreaterEqual(len(cases), 3)
        for ids, types, want in cases:
            inputs = []
            for name, values in (("input_ids", ids), ("token_type_ids", types)):
                inp = grpcclient.InferInput(name, [1, len(values)], "INT64")
                inp.set_data_from_numpy(np.array([values], dtype=np.int64))
                inputs.append(inp)
            row = self.grpc.infer("bert", inputs).as_numpy("embedding")[0]
            self.assertGreaterEqual(cosine(row, want), 0.9999, f"pair of {len(ids)} tokens")
        meta = self.grpc.get_model_metadata("bert", as_json=True)
        self.assertIn("token_type_ids", [i["name"] for i in meta["inputs"]])
        meta = self.grpc.get_model_metadata("mpnet", as_json=True)
        self.assertNotIn("token_type_ids", [i["name"] for i in meta["inputs"]])

    def test_a_dense_module_is_computed_as_sentence_transformers_does(self):
        with open(os.path.join(DENSE, "reference.json"), encoding="utf-8") as f:
            texts = json.load(f)["texts"]
        want = read_safetensors(os.path.join(DENSE, "reference.safetensors"))
        r = self.openai.embeddings.create(model="dense", input=texts)
        self.assertEqual(len(r.data), len(texts))
        for i, d in enumerate(r.data):
            self.assertEqual(len(d.embedding), 32)
            self.assertGreaterEqual(cosine(np.array(d.embedding), want[f"embedding_{i}"]), 0.9999,
                                    texts[i])

    def test_openai_client_matches_transformers(self):
        for family in FAMILIES:
            ref = [(t, e) for t, _, e in reference(family) if t is not None]
            r = self.openai.embeddings.create(model=family, input=[t for t, _ in ref])
            self.assertEqual(len(r.data), len(ref))
            for (text, want), d in zip(ref, r.data):
                self.assertGreaterEqual(cosine(np.array(d.embedding), want), 0.9999,
                                        f"{family} over HTTP: {text!r}")

    def test_a_text_past_the_folders_limit_is_cut_or_refused_on_request(self):
        # sentence_bert_config.json's max_seq_length for XLM-R's fixture is
        # 64: cut there by default (a folder without a config.pbtxt), as
        # sentence-transformers cuts it; refused when the request says
        # truncate false.
        text = np.array([" ".join(["word"] * 200).encode()], dtype=object)
        got = self.grpc_embed("xlm-roberta", "text", text, "BYTES")
        tok = Tokenizer.from_file(os.path.join(FIXTURES, "xlm-roberta", "tokenizer.json"))
        tok.enable_truncation(64)
        ids = np.array([tok.encode(text[0].decode()).ids], dtype=np.int64)
        self.assertEqual(ids.shape, (1, 64))
        np.testing.assert_allclose(got, self.grpc_embed("xlm-roberta", "input_ids", ids, "INT64"),
                                   atol=1e-6)
        with self.assertRaises(InferenceServerException) as e:
            self.grpc_embed("xlm-roberta", "text", text, "BYTES", parameters={"truncate": False})
        self.assertIn("model 'xlm-roberta' allows 64", str(e.exception))


class UnsupportedFamilyTest(unittest.TestCase):
    def test_the_server_refuses_naming_the_model_type_and_the_supported_ones(self):
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
                json.dump({"model_type": "gpt2", "vocab_size": 10}, f)
            proc = subprocess.run(
                [os.environ["INFER_SERVER_BINARY"], "--device", "cpu", "--grpc-address",
                 "127.0.0.1:0", "--metrics-address", "127.0.0.1:0", "--http-address",
                 "127.0.0.1:0", "--model", folder],
                capture_output=True, text=True, timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("model_type 'gpt2' is not supported; supported: bert", proc.stdout + proc.stderr)
        self.assertIn("qwen3", proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
