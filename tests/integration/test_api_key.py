"""--api-key: every HTTP route and gRPC call that touches a model needs
`Authorization: Bearer KEY` (the metadata `authorization` on gRPC); the
health checks and /metrics stay open, as TEI leaves them.

One server takes its key from --api-key-file, one from the API_KEY
environment variable (TEI's). Without the key, or with a wrong one: 401 in
each route's own error shape with WWW-Authenticate: Bearer (TEI's, OpenAI's
and KServe's routes, a model's base path, a path with no route), gRPC
UNAUTHENTICATED (unary calls and a stream); with it, the answers are those
of a server without a key, through the official clients (huggingface_hub's
InferenceClient, OpenAI's, Triton's). Every refusal is counted in
infer_unauthenticated_requests_total; the key is in no log line and no
answer. Two key flags at once end start-up with a line naming them.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import json
import os
import queue
import secrets
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

from huggingface_hub import InferenceClient
import numpy as np
import openai
import tritonclient.grpc as grpcclient

from infer_server_process import InferServer

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = os.path.join(HERE, "..", "fixtures", "families", "bert")


def request(base, method, path, body=None, key=None, scheme="Bearer"):
    """(status, headers, parsed JSON body or text) of one request."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"{scheme} {key}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, got_headers, raw = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, got_headers, raw = e.code, e.headers, e.read()
    try:
        return status, got_headers, json.loads(raw or b"null")
    except ValueError:
        return status, got_headers, raw.decode("utf-8", "replace")


def refusals(base, frontend):
    status, _, text = request(base, "GET", "/metrics")
    assert status == 200, status
    for line in text.splitlines():
        if line.startswith(f'infer_unauthenticated_requests_total{{frontend="{frontend}"}}'):
            return float(line.split()[-1])
    raise AssertionError("no infer_unauthenticated_requests_total in /metrics")


def text_input(text):
    inp = grpcclient.InferInput("text", [1], "BYTES")
    inp.set_data_from_numpy(np.array([text.encode()], dtype=object))
    return inp


class ApiKeyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.key = "k-" + secrets.token_hex(16)
        cls.dir = tempfile.TemporaryDirectory(prefix="api_key_")
        key_file = os.path.join(cls.dir.name, "key")
        with open(key_file, "w") as f:
            f.write(cls.key + "\n")
        common = ("--precision", "fp32", "--model", f"embedder={BERT}")
        cls.server = InferServer(None, *common, "--api-key-file", key_file)
        cls.base = f"http://127.0.0.1:{cls.server.http_port}"
        cls.open_server = InferServer(None, *common)
        cls.open_base = f"http://127.0.0.1:{cls.open_server.http_port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.open_server.stop()
        cls.dir.cleanup()

    def assert_refused(self, method, path, body=None, key=None, shape="tei"):
        status, headers, got = request(self.base, method, path, body, key=key)
        self.assertEqual(status, 401, f"{method} {path}: {got}")
        self.assertEqual(headers.get("WWW-Authenticate"), "Bearer")
        message = {"tei": lambda g: g["error"], "openai": lambda g: g["error"]["message"],
                   "kserve": lambda g: g["error"]}[shape](got)
        self.assertIn("Authorization: Bearer KEY", message)
        if shape == "tei":
            self.assertEqual(set(got), {"error", "error_type"})
        self.assertNotIn(self.key, json.dumps(got))

    def test_http_routes_need_the_key(self):
        before = refusals(self.base, "http")
        embed = {"inputs": "hello"}
        cases = [("POST", "/embed", embed, "tei"), ("POST", "/", embed, "tei"),
                 ("GET", "/info", None, "tei"),
                 ("POST", "/v1/embeddings", {"input": "hello", "model": "embedder"}, "openai"),
                 ("GET", "/v1/models", None, "openai"),
                 ("GET", "/v2/models/embedder", None, "kserve"),
                 ("POST", "/v2/repository/index", {}, "kserve"),
                 ("POST", "/models/embedder/embed", embed, "tei"),
                 ("GET", "/models/nobody/health", None, "tei"),  # no model name is revealed
                 ("GET", "/no/such/route", None, "kserve")]
        for method, path, body, shape in cases:
            with self.subTest(path=path):
                self.assert_refused(method, path, body, shape=shape)
                self.assert_refused(method, path, body, key=self.key + "x", shape=shape)
                self.assert_refused(method, path, body, key=self.key[:-1], shape=shape)
        self.assertEqual(refusals(self.base, "http") - before, 3 * len(cases))
        # With the key: what a server without one answers.
        for path, body in (("/embed", embed), ("/models/embedder/embed", embed)):
            status, _, got = request(self.base, "POST", path, body, key=self.key)
            self.assertEqual(status, 200, got)
            _, _, want = request(self.open_base, "POST", path, body)
            np.testing.assert_allclose(got, want, atol=1e-6)
        # The scheme's case does not matter (RFC 7235); the key's does.
        self.assertEqual(request(self.base, "GET", "/info", key=self.key, scheme="bearer")[0], 200)
        self.assertEqual(request(self.base, "GET", "/info", key=self.key.upper())[0], 401)

    def test_health_and_metrics_stay_open(self):
        for path in ("/health", "/", "/ping", "/v2/health/live", "/v2/health/ready", "/metrics"):
            with self.subTest(path=path):
                self.assertEqual(request(self.base, "GET", path)[0], 200)

    def test_official_clients_with_the_key(self):
        client = InferenceClient(base_url=self.base, api_key=self.key)
        want = InferenceClient(base_url=self.open_base).feature_extraction("hello")
        np.testing.assert_allclose(client.feature_extraction("hello"), want, atol=1e-6)
        per_model = InferenceClient(base_url=f"{self.base}/models/embedder", api_key=self.key)
        np.testing.assert_allclose(per_model.feature_extraction("hello"), want, atol=1e-6)
        oa = openai.OpenAI(base_url=f"{self.base}/v1", api_key=self.key)
        got = oa.embeddings.create(model="embedder", input="hello").data[0].embedding
        np.testing.assert_allclose(got, np.ravel(want), atol=1e-6)
        with self.assertRaises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{self.base}/v1", api_key="wrong").embeddings.create(
                model="embedder", input="hello")

    def test_grpc_calls_need_the_key(self):
        before = refusals(self.base, "grpc")
        with grpcclient.InferenceServerClient(self.server.address) as c:
            # Health stays open.
            self.assertTrue(c.is_server_live())
            self.assertTrue(c.is_server_ready())
            for call in (lambda h: c.infer("embedder", [text_input("hello")], headers=h),
                         lambda h: c.get_model_metadata("embedder", headers=h),
                         lambda h: c.is_model_ready("embedder", headers=h),
                         lambda h: c.get_model_repository_index(headers=h)):
                for headers in (None, {"authorization": "Bearer wrong"}):
                    with self.assertRaises(grpcclient.InferenceServerException) as e:
                        call(headers)
                    self.assertEqual(e.exception.status(), "StatusCode.UNAUTHENTICATED")
                    self.assertIn("authorization: Bearer KEY", e.exception.message())
            good = {"authorization": f"Bearer {self.key}"}
            r = c.infer("embedder", [text_input("hello")], headers=good)
            with grpcclient.InferenceServerClient(self.open_server.address) as o:
                want = o.infer("embedder", [text_input("hello")]).as_numpy("embedding")
            np.testing.assert_allclose(r.as_numpy("embedding"), want, atol=1e-6)
            self.assertTrue(c.is_model_ready("embedder", headers=good))
        # A stream without the key ends UNAUTHENTICATED.
        results = queue.Queue()
        with grpcclient.InferenceServerClient(self.server.address) as c:
            c.start_stream(callback=lambda result, error: results.put(error))
            try:
                c.async_stream_infer("embedder", [text_input("hello")])
            except grpcclient.InferenceServerException as e:
                # The refusal may end the stream before the request is sent;
                # the client then says so and the callback has the error.
                self.assertIn("no longer in valid state", e.message())
            error = results.get(timeout=30)
            c.stop_stream()
        self.assertIsNotNone(error)
        self.assertIn("UNAUTHENTICATED", str(error.status()))
        self.assertEqual(refusals(self.base, "grpc") - before, 9)

    def test_the_key_is_never_logged(self):
        request(self.base, "POST", "/embed", {"inputs": "x"}, key=self.key + "wrong")
        self.assertNotIn(self.key, "".join(self.server.log))

    def test_the_key_from_the_environment(self):
        env_key = "e-" + secrets.token_hex(8)
        old = os.environ.get("API_KEY")
        os.environ["API_KEY"] = env_key
        try:
            server = InferServer(None, "--precision", "fp32", "--model", f"embedder={BERT}")
        finally:
            if old is None:
                del os.environ["API_KEY"]
            else:
                os.environ["API_KEY"] = old
        try:
            base = f"http://127.0.0.1:{server.http_port}"
            self.assertEqual(request(base, "GET", "/info")[0], 401)
            self.assertEqual(request(base, "GET", "/info", key=env_key)[0], 200)
        finally:
            server.stop()

    def test_two_key_flags_end_start_up(self):
        key_file = os.path.join(self.dir.name, "key")
        r = subprocess.run([os.environ["INFER_SERVER_BINARY"], "--device", "cpu",
                            "--api-key", "a", "--api-key-file", key_file, "--model", BERT],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--api-key and --api-key-file: give one of them", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
