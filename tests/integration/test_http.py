"""The HTTP front end against clients we did not write: Triton's own
`tritonclient.http`, OpenAI's official `openai` package, and curl; plus many
keep-alive connections at once, IPv6, and slow or malformed clients written
byte by byte. Every answer is checked against the gRPC front end's answer
for the same request, or against the NumPy reference of embed_pool.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import base64
import http.client
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np
import openai
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from infer_server_process import InferServer
from test_tritonclient import make_test_repo, reference_embeddings

LIMIT = 1 << 20  # --max-receive-message-bytes: HTTP bodies too


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def recv_all(sock, timeout):
    """What the server sends until it closes, or until `timeout`."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data, True
            data += chunk
    except (socket.timeout, ConnectionResetError):
        return data, False


class HttpFrontEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = make_test_repo("infer_http_repo_")
        cls.server = InferServer(cls.repo, "--max-receive-message-bytes", str(LIMIT),
                                 "--http-request-timeout-s", "2", "--http-threads", "2")
        assert cls.server.http_port, "".join(cls.server.log)
        cls.url = f"127.0.0.1:{cls.server.http_port}"
        cls.http = httpclient.InferenceServerClient(cls.url, concurrency=4)
        cls.grpc = grpcclient.InferenceServerClient(cls.server.address)
        cls.openai = openai.OpenAI(base_url=f"http://{cls.url}/v1", api_key="unused",
                                   max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.http.close()
        cls.grpc.close()
        try:
            cls.server.stop()
        finally:
            shutil.rmtree(cls.repo, ignore_errors=True)

    def post(self, path, body, headers=None, conn=None):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=30)
        c.request("POST", path, body=body,
                  headers=headers if headers is not None else {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r.status, data

    def grpc_embedding(self, model, name, array, dtype):
        inp = grpcclient.InferInput(name, list(array.shape), dtype)
        inp.set_data_from_numpy(array)
        return self.grpc.infer(model, [inp]).as_numpy("embedding")

    # --- tritonclient.http -------------------------------------------------

    def test_tritonclient_http_health_metadata_config_stats_and_index(self):
        self.assertTrue(self.http.is_server_live())
        self.assertTrue(self.http.is_server_ready())
        self.assertTrue(self.http.is_model_ready("tiny"))
        self.assertTrue(self.http.is_model_ready("tiny", "1"))
        self.assertFalse(self.http.is_model_ready("tiny", "2"))
        self.assertFalse(self.http.is_model_ready("absent"))
        self.assertEqual(self.http.get_server_metadata(),
                         self.grpc.get_server_metadata(as_json=True))
        meta = self.http.get_model_metadata("minilm")
        self.assertEqual(meta["name"], "minilm")
        self.assertEqual(meta["versions"], ["1"])
        self.assertEqual({i["name"]: (i["datatype"], i["shape"]) for i in meta["inputs"]},
                         {"text": ("BYTES", [-1]), "input_ids": ("INT64", [-1, -1]),
                          "attention_mask": ("INT64", [-1, -1]),
                          "token_type_ids": ("INT64", [-1, -1])})
        # The pooled embedding, then the per-token outputs a request may name.
        self.assertEqual(meta["outputs"], [
            {"name": "embedding", "datatype": "FP32", "shape": [-1, 384]},
            {"name": "token_embeddings", "datatype": "FP32", "shape": [-1, 384]},
            {"name": "token_counts", "datatype": "INT64", "shape": [-1]}])
        config = self.http.get_model_config("tiny")
        grpc_config = self.grpc.get_model_config("tiny", as_json=True)["config"]
        self.assertEqual(config["max_batch_size"], 8)
        self.assertEqual(config["max_batch_size"], int(grpc_config["max_batch_size"]))
        self.assertEqual(config["input"][0]["dims"], [-1])  # numbers, not strings
        self.assertEqual(config["name"], grpc_config["name"])
        index = self.http.get_model_repository_index()
        self.assertEqual(sorted(m["name"] for m in index), ["minilm", "tiny"])
        self.assertTrue(all(m["state"] == "READY" for m in index))
        ids = np.array([[5, 6, 7]], dtype=np.int64)
        inp = httpclient.InferInput("input_ids", [1, 3], "INT64")
        inp.set_data_from_numpy(ids)
        before = self.http.get_inference_statistics("tiny")["model_stats"][0]
        self.http.infer("tiny", [inp])
        after = self.http.get_inference_statistics("tiny")["model_stats"][0]
        self.assertEqual(after["inference_count"], before["inference_count"] + 1)
        self.assertEqual(after["inference_stats"]["success"]["count"],
                         before["inference_stats"]["success"]["count"] + 1)
        both = self.http.get_inference_statistics()
        self.assertEqual(sorted(s["name"] for s in both["model_stats"]), ["minilm", "tiny"])

    def test_tritonclient_http_infer_binary_and_json_give_the_reference_embeddings(self):
        rng = np.random.default_rng(3)
        ids = rng.integers(1, 1000, size=(3, 9), dtype=np.int64)
        ids[1, 5:] = 0  # padding
        want = reference_embeddings(ids)
        for binary_in in (True, False):
            for binary_out in (True, False):
                for dtype in ("INT64", "INT32"):
                    with self.subTest(binary_in=binary_in, binary_out=binary_out, dtype=dtype):
                        inp = httpclient.InferInput("input_ids", list(ids.shape), dtype)
                        inp.set_data_from_numpy(ids.astype(np.int32 if dtype == "INT32"
                                                           else np.int64),
                                                binary_data=binary_in)
                        out = httpclient.InferRequestedOutput("embedding",
                                                              binary_data=binary_out)
                        r = self.http.infer("tiny", [inp], outputs=[out], request_id="r-7")
                        got = r.as_numpy("embedding")
                        self.assertEqual(got.dtype, np.float32)
                        np.testing.assert_allclose(got, want, atol=1e-5)
                        self.assertEqual(r.get_response()["id"], "r-7")
        # Without an outputs list every output comes back (as JSON).
        inp = httpclient.InferInput("input_ids", list(ids.shape), "INT64")
        inp.set_data_from_numpy(ids, binary_data=False)
        np.testing.assert_allclose(self.http.infer("tiny", [inp]).as_numpy("embedding"), want,
                                   atol=1e-5)

    def test_tritonclient_http_text_matches_grpc_bit_for_bit(self):
        texts = np.array([b"The quick brown fox.", "héllo wörld".encode()], dtype=np.object_)
        inp = httpclient.InferInput("text", [2], "BYTES")
        inp.set_data_from_numpy(texts)
        got = self.http.infer("minilm", [inp]).as_numpy("embedding")
        np.testing.assert_array_equal(got, self.grpc_embedding("minilm", "text", texts, "BYTES"))
        # JSON strings, too.
        inp = httpclient.InferInput("text", [2], "BYTES")
        inp.set_data_from_numpy(texts, binary_data=False)
        np.testing.assert_array_equal(self.http.infer("minilm", [inp]).as_numpy("embedding"), got)

    def test_errors_have_the_grpc_messages_and_triton_http_statuses(self):
        def grpc_error(model, array, dtype="INT64"):
            with self.assertRaises(InferenceServerException) as e:
                self.grpc_embedding(model, "input_ids", array, dtype)
            return e.exception.message()

        def http_error(model, array, dtype="INT64"):
            inp = httpclient.InferInput("input_ids", list(array.shape), dtype)
            inp.set_data_from_numpy(array)
            with self.assertRaises(InferenceServerException) as e:
                self.http.infer(model, [inp])
            return e.exception

        ids = np.array([[1, 2]], dtype=np.int64)
        e = http_error("absent", ids)
        self.assertEqual(e.status(), "404")
        self.assertEqual(e.message(), grpc_error("absent", ids))
        too_long = np.ones((1, 600), dtype=np.int64)
        e = http_error("tiny", too_long)
        self.assertEqual(e.status(), "400")
        self.assertEqual(e.message(), grpc_error("tiny", too_long))
        floats = np.ones((1, 2), dtype=np.float32)
        e = http_error("tiny", floats, "FP32")
        self.assertEqual(e.status(), "400")
        self.assertEqual(e.message(), grpc_error("tiny", floats, "FP32"))
        # JSON the gRPC path never sees, refused with the field named.
        cases = [
            (b"{not json", "not valid JSON"),
            (b'{"inputs": 3}', "no 'inputs' array"),
            (b'{"inputs":[{"name":"input_ids","shape":[1,2],"datatype":"INT64","data":[1]}]}',
             "has 1 values in 'data'; its shape [1,2] needs 2"),
            (b'{"inputs":[{"name":"input_ids","shape":[1,1],"datatype":"INT64","data":["x"]}]}',
             "is not an integer"),
            (b'{"inputs":[{"name":"input_ids","shape":[1,1],"datatype":"INT32",'
             b'"data":[4294967296]}]}', "does not fit INT32"),
            (b'{"inputs":[{"name":"input_ids","shape":[1,1],"datatype":"INT64",'
             b'"parameters":{"binary_data_size":8}}]}', "bytes of binary data are left"),
            (b'{"inputs":[{"name":"input_ids","shape":[1,1],"datatype":"INT64","data":'
             + b"[" * 40 + b"1" + b"]" * 40 + b"}]}", "nested deeper than 32"),
            (b'{"inputs":[{"name":"input_ids","shape":[1,1],"datatype":"INT64","data":'
             + b"[" * 100 + b"1" + b"]" * 100 + b"}]}", "deeper than 64 levels"),
        ]
        for body, message in cases:
            with self.subTest(message=message):
                status, data = self.post("/v2/models/tiny/infer", body)
                self.assertEqual(status, 400, data)
                self.assertIn(message, json.loads(data)["error"])
        status, data = self.post("/v2/models/tiny/infer", b"{}", {"Content-Type": "text/plain"})
        self.assertEqual(status, 415)
        self.assertIn("Content-Type 'text/plain' is not supported", json.loads(data)["error"])
        status, data = self.post("/v2/models/tiny/infer", b"{}",
                                 {"Content-Type": "application/json", "Content-Encoding": "gzip"})
        self.assertEqual(status, 415)
        c = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=10)
        c.request("GET", "/v2/models/tiny/infer")
        r = c.getresponse()
        self.assertEqual((r.status, r.getheader("Allow")), (405, "POST"))
        r.read()
        c.request("GET", "/v3/nothing")
        r = c.getresponse()
        self.assertEqual(r.status, 404)
        r.read()
        c.close()

    # --- OpenAI ------------------------------------------------------------

    def test_openai_client_text_embeddings_equal_the_grpc_answer(self):
        texts = ["A sentence to embed.", "Another one, a little longer than the first."]
        want = self.grpc_embedding("minilm", "text", np.array([t.encode() for t in texts],
                                                              dtype=np.object_), "BYTES")
        default = self.openai.embeddings.create(model="minilm", input=texts)  # base64 on the wire
        floats = self.openai.embeddings.create(model="minilm", input=texts,
                                               encoding_format="float")
        for r in (default, floats):
            self.assertEqual(r.model, "minilm")
            self.assertEqual([d.index for d in r.data], [0, 1])
            np.testing.assert_allclose(np.array([d.embedding for d in r.data]), want, atol=1e-7)
        # Token counts as the model's tokenizer counts them ([CLS] and [SEP] too).
        one = self.openai.embeddings.create(model="minilm", input="hello world")
        self.assertEqual(one.usage.prompt_tokens, 4)
        self.assertEqual(one.usage.total_tokens, 4)
        self.assertEqual(len(one.data[0].embedding), 384)
        self.assertEqual(self.openai.embeddings.create(model="minilm", input="hello world",
                                                       dimensions=384).data[0].embedding,
                         one.data[0].embedding)

    def test_openai_client_token_arrays_and_errors(self):
        rows = [[5, 6, 7, 8], [9, 10]]
        r = self.openai.embeddings.create(model="tiny", input=rows)
        padded = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], dtype=np.int64)
        np.testing.assert_allclose(np.array([d.embedding for d in r.data]),
                                   reference_embeddings(padded), atol=1e-5)
        self.assertEqual(r.usage.prompt_tokens, 6)
        single = self.openai.embeddings.create(model="tiny", input=[5, 6, 7, 8])
        np.testing.assert_allclose(single.data[0].embedding, r.data[0].embedding, atol=1e-6)
        # minilm takes token arrays too (with an attention mask), and gives
        # the text's embedding for the text's tokens.
        tokens = self.openai.embeddings.create(model="minilm", input=[[101, 7592, 2088, 102]])
        text = self.openai.embeddings.create(model="minilm", input="hello world")
        np.testing.assert_allclose(tokens.data[0].embedding, text.data[0].embedding, atol=1e-6)
        self.assertEqual({m.id for m in self.openai.models.list()}, {"minilm", "tiny"})
        self.assertEqual(self.openai.models.retrieve("tiny").id, "tiny")
        with self.assertRaises(openai.NotFoundError) as e:
            self.openai.embeddings.create(model="absent", input="x")
        self.assertEqual(e.exception.code, "model_not_found")
        self.assertIn("unknown model 'absent'", e.exception.message)
        with self.assertRaises(openai.BadRequestError) as e:
            self.openai.embeddings.create(model="tiny", input="text for a token model")
        self.assertIn("takes token ids", e.exception.message)
        with self.assertRaises(openai.BadRequestError) as e:
            self.openai.embeddings.create(model="tiny", input=[[1, 2], [-3]])
        self.assertIn("not a token id", e.exception.message)
        with self.assertRaises(openai.BadRequestError) as e:
            self.openai.embeddings.create(model="minilm", input="x", dimensions=128)
        self.assertIn("embeddings cannot be shortened", e.exception.message)
        with self.assertRaises(openai.BadRequestError) as e:
            self.openai.embeddings.create(model="tiny", input=[list(range(1, 600))])
        self.assertEqual(e.exception.body["type"], "invalid_request_error")
        # A ragged request whose padding would pass the model's limits is
        # refused before it is padded.
        status, data = self.post("/v1/embeddings", json.dumps(
            {"model": "tiny", "input": [[1]] * 20000 + [list(range(1, 500))]}).encode())
        self.assertEqual(status, 400, data)
        self.assertEqual(json.loads(data)["error"]["param"], "input")

    # --- curl --------------------------------------------------------------

    def test_curl_calls_as_the_readme_shows_them(self):
        base = f"http://{self.url}"
        def curl(*args):
            return subprocess.run(["curl", "-sS", *args], capture_output=True, text=True,
                                  timeout=60, check=True).stdout
        out = json.loads(curl("-X", "POST", f"{base}/v2/models/tiny/infer", "-d",
                              '{"inputs":[{"name":"input_ids","shape":[1,3],"datatype":"INT64",'
                              '"data":[[5,6,7]]}]}'))
        np.testing.assert_allclose(out["outputs"][0]["data"],
                                   reference_embeddings(np.array([[5, 6, 7]])).ravel(), atol=1e-5)
        out = json.loads(curl(f"{base}/v1/embeddings", "-H", "Content-Type: application/json",
                              "-d", '{"model":"minilm","input":"hello world"}'))
        self.assertEqual(len(out["data"][0]["embedding"]), 384)
        self.assertEqual(curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/v2/health/ready"),
                         "200")
        self.assertIn("infer_server_ready 1", curl(f"{base}/metrics"))
        # A body over the limit: curl sends "Expect: 100-continue" and gets
        # 413 before it sends the body.
        with tempfile.NamedTemporaryFile() as big:
            big.write(b" " * (LIMIT + 1))
            big.flush()
            t0 = time.monotonic()
            code = curl("-o", "/dev/null", "-w", "%{http_code}", "-H",
                        "Content-Type: application/json", "--data-binary", f"@{big.name}",
                        f"{base}/v1/embeddings")
            self.assertEqual(code, "413")
            self.assertLess(time.monotonic() - t0, 5)

    # --- connections, IPv6, hostile clients ---------------------------------

    def test_many_keep_alive_connections_at_once(self):
        rows = [[i % 900 + 1, 7, 8] for i in range(64)]
        want = reference_embeddings(np.array(rows))
        failures = []

        def client(i):
            conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=60)
            try:
                for _ in range(8):  # one connection, kept alive
                    status, data = self.post(
                        "/v1/embeddings", json.dumps({"model": "tiny", "input": rows[i],
                                                      "encoding_format": "base64"}), conn=conn)
                    got = np.frombuffer(base64.b64decode(json.loads(data)["data"][0]["embedding"]),
                                        dtype=np.float32)
                    if status != 200 or not np.allclose(got, want[i], atol=1e-5):
                        failures.append((i, status, data[:200]))
            except Exception as e:  # noqa: BLE001 - any failure is reported
                failures.append((i, repr(e)))
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])

    def test_slow_and_malformed_clients_harm_nothing(self):
        port = self.server.http_port
        # A body trickled a byte at a time is cut off at the request timeout
        # (2 s here), while another client is served meanwhile.
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 1000\r\n\r\n{")
        stop = threading.Event()

        def trickle():
            while not stop.is_set():
                try:
                    slow.send(b" ")
                except OSError:
                    return
                time.sleep(0.2)

        t = threading.Thread(target=trickle)
        t.start()
        self.assertTrue(self.http.is_server_ready())
        t0 = time.monotonic()
        _, closed = recv_all(slow, 10)
        stop.set()
        t.join()
        slow.close()
        self.assertTrue(closed)
        self.assertLess(time.monotonic() - t0, 6)
        # A declared body over the limit: 413 as soon as the headers arrive.
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 100000000000\r\n\r\n")
            data, closed = recv_all(s, 5)
            self.assertTrue(data.startswith(b"HTTP/1.1 413"), data)
            self.assertIn(b"over the server's limit of 1048576 bytes", data)
        # Headers past the limit, garbage, a half-sent request line.
        for payload, code in [(b"GET /v2 HTTP/1.1\r\nX: " + b"a" * 100000 + b"\r\n\r\n", b"431"),
                              (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"400")]:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(payload)
                data, _ = recv_all(s, 5)
                self.assertTrue(data.startswith(b"HTTP/1.1 " + code), data[:100])
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /v2 HTT")
            s.shutdown(socket.SHUT_WR)
            _, closed = recv_all(s, 5)
            self.assertTrue(closed)
        # The server is unharmed.
        r = self.openai.embeddings.create(model="tiny", input=[1, 2, 3])
        self.assertEqual(len(r.data[0].embedding), 32)

    @unittest.skipUnless(has_ipv6_loopback(), "this machine has no IPv6 loopback (::1)")
    def test_ipv6(self):
        server = InferServer(self.repo, "--http-address", "[::1]:0")
        try:
            self.assertIsNotNone(server.http_port)
            base = f"http://[::1]:{server.http_port}"
            code = subprocess.run(["curl", "-sS", "-g", "-o", "/dev/null", "-w", "%{http_code}",
                                   f"{base}/v2/health/ready"], capture_output=True, text=True,
                                  timeout=30).stdout
            self.assertEqual(code, "200")
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
            r = client.embeddings.create(model="tiny", input=[[5, 6, 7]])
            np.testing.assert_allclose(r.data[0].embedding,
                                       reference_embeddings(np.array([[5, 6, 7]]))[0], atol=1e-5)
            triton = httpclient.InferenceServerClient(f"[::1]:{server.http_port}")
            self.assertTrue(triton.is_server_ready())
            triton.close()
        finally:
            server.stop()


class DeeplyNestedJsonTest(unittest.TestCase):
    """A body nested a million deep, to every route that reads JSON: 400
    naming the depth limit, and the server goes on serving. (Before the
    depth was bounded while parsing, 50,000 levels overflowed the stack of
    the thread that serialised the value for its error message.) The server
    here takes bodies of up to 8 MiB, enough for the deepest bodies."""

    DEPTH = 1_000_000

    @classmethod
    def setUpClass(cls):
        cls.repo = make_test_repo("infer_http_deep_repo_")
        cls.server = InferServer(cls.repo, "--max-receive-message-bytes", str(8 << 20),
                                 "--http-threads", "1")
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop()
        finally:
            shutil.rmtree(cls.repo, ignore_errors=True)

    def post(self, path, body, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("POST", path, body=body,
                  headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def assert_serving(self):
        self.assertIsNone(self.server.proc.poll(), "the server died:\n" + "".join(self.server.log))
        status, data = self.post("/v1/embeddings", b'{"model": "tiny", "input": [1, 2, 3]}')
        self.assertEqual(status, 200, data)

    def test_every_json_route_refuses_a_million_levels_and_keeps_serving(self):
        arrays = b"[" * self.DEPTH + b"]" * self.DEPTH
        objects = b'{"a":' * (self.DEPTH // 5) + b"1" + b"}" * (self.DEPTH // 5)
        unclosed = b"[" * self.DEPTH
        tensor = b'{"name":"input_ids","shape":[1,1],"datatype":"INT64","data":%s}'
        bodies = {
            "/v1/embeddings": [b'{"model":"tiny","input":%s}', b'{"model":"minilm","input":%s}',
                               b"%s"],
            "/v2/models/tiny/infer": [b'{"inputs":[' + tensor + b"]}", b'{"id":%s}', b"%s"],
            "/v2/models/minilm/versions/1/infer": [b'{"parameters":{"p":%s},"inputs":[]}'],
        }
        for route, templates in bodies.items():
            for template in templates:
                for name, deep in (("arrays", arrays), ("objects", objects),
                                   ("unclosed", unclosed)):
                    with self.subTest(route=route, template=template[:40], nesting=name):
                        status, data = self.post(route, template.replace(b"%s", deep))
                        self.assertEqual(status, 400, data[:300])
                        error = json.loads(data)["error"]
                        message = error["message"] if isinstance(error, dict) else error
                        self.assertIn("the request body nests arrays and objects deeper than "
                                      "64 levels (the server's limit)", message)
                        self.assert_serving()
        # KServe's binary-data extension: the JSON part is bounded the same way.
        body = b'{"inputs":[' + tensor.replace(b"%s", arrays) + b"]}"
        status, data = self.post("/v2/models/tiny/infer", body + b"\0" * 8,
                                 {"Inference-Header-Content-Length": str(len(body))})
        self.assertEqual(status, 400, data[:300])
        self.assertIn("deeper than 64 levels", json.loads(data)["error"])
        self.assert_serving()

    def test_depth_up_to_the_limit_is_answered_normally(self):
        # 64 levels in all, the limit: the object and 63 arrays.
        body = b'{"model":"tiny","input":' + b"[" * 63 + b"1" + b"]" * 63 + b"}"
        status, data = self.post("/v1/embeddings", body)
        self.assertEqual(status, 400, data)  # a well-formed body, but not token ids
        self.assertIn("is not a token id", json.loads(data)["error"]["message"])
        self.assertIn("an array of 1 value", json.loads(data)["error"]["message"])
        body = b'{"model":"tiny","input":' + b"[" * 64 + b"1" + b"]" * 64 + b"}"
        status, data = self.post("/v1/embeddings", body)
        self.assertEqual(status, 400, data)
        self.assertIn("deeper than 64 levels", json.loads(data)["error"]["message"])


if __name__ == "__main__":
    unittest.main()
