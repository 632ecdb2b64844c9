"""--model-id: models from the Hugging Face Hub, against a stand-in for the
hub on loopback (hub_standin.py) that answers as the hub does, and with
huggingface_hub itself on the same cache.

- The server downloads a private model with a token, only the files a
  served model needs, and serves embeddings equal to those transformers
  computed from the same files (the fixture's reference); the token never
  goes to the storage host; huggingface_hub then finds the cache the server
  wrote, offline, file for file, and its cache scan reports no problem.
- A cache huggingface_hub filled (a sharded model) is served with
  HF_HUB_OFFLINE=1 and when the hub cannot be reached.
- An unknown repository, a wrong token, a private or gated repository
  without one, an unknown revision, a repository without safetensors, an
  unreachable hub with an empty cache: start-up ends with one line naming
  the repository and the reason, and a non-zero exit.
- An interrupted download resumes with a Range request, within a run and
  from the .incomplete file a dead process left; corrupt bytes are never
  kept, nor more bytes than the file has; two servers starting at once on
  one cache download each file once.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

import numpy as np
from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download

from hub_standin import HubStandIn, Repo
from infer_server_process import InferServer, fixed_port
from test_families import cosine, reference

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = os.path.join(HERE, "..", "fixtures", "families", "bert")
TOKEN = "hf_stand_in_token"
COMMIT = "3c3d8e5b1a0f4e6d9b2a7c8e1f0a9b8c7d6e5f4a"
COMMIT2 = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"


def fixture_files():
    """The BERT fixture as a hub repository holds it, with files a served
    model does not need (PyTorch and ONNX copies, .gitattributes)."""
    files = {}
    for root, _, names in os.walk(BERT):
        for name in names:
            if name.startswith("reference."):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, BERT)] = f.read()
    files["README.md"] = b"---\nlibrary_name: sentence-transformers\n---\n# tiny\n"
    files[".gitattributes"] = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    files["pytorch_model.bin"] = b"not read" * 1000
    files["onnx/model.onnx"] = b"not read" * 1000
    return files


def sharded(files):
    """The same weights in two safetensors shards and an index."""
    data = files.pop("model.safetensors")
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    names = sorted(header)
    shards = {}
    index = {"metadata": {"total_size": len(data)}, "weight_map": {}}
    for i, part in enumerate((names[: len(names) // 2], names[len(names) // 2:])):
        shard = f"model-{i + 1:05d}-of-00002.safetensors"
        h, body = {}, b""
        for name in part:
            t = dict(header[name])
            b, e = t["data_offsets"]
            t["data_offsets"] = [len(body), len(body) + e - b]
            body += data[8 + n + b:8 + n + e]
            h[name] = t
            index["weight_map"][name] = shard
        if meta:
            h["__metadata__"] = meta
        hb = json.dumps(h).encode()
        hb += b" " * (-len(hb) % 8)
        shards[shard] = struct.pack("<Q", len(hb)) + hb + body
    files.update(shards)
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return files


def embed(server, texts):
    req = urllib.request.Request(
        f"http://127.0.0.1:{server.http_port}/v1/embeddings",
        data=json.dumps({"model": "tiny", "input": texts}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return [np.array(d["embedding"]) for d in json.load(r)["data"]]


class HubTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hub = HubStandIn(tokens=[TOKEN])
        cls.files = fixture_files()
        cls.hub.add(Repo("org/tiny", cls.files, COMMIT, private=True))
        cls.hub.add(Repo("org/tiny-sharded", sharded(fixture_files()), COMMIT2))
        cls.hub.add(Repo("org/gated", fixture_files(), COMMIT, gated=True))
        no_weights = {k: v for k, v in fixture_files().items() if k != "model.safetensors"}
        cls.hub.add(Repo("org/pt-only", no_weights, COMMIT))
        cls.weights_sha = hashlib.sha256(cls.files["model.safetensors"]).hexdigest()

    @classmethod
    def tearDownClass(cls):
        cls.hub.stop()

    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="hub-cache-")
        self.hub.requests.clear()

    def tearDown(self):
        shutil.rmtree(self.cache, ignore_errors=True)

    def env(self, token=TOKEN, **more):
        env = dict(os.environ, HF_ENDPOINT=self.hub.endpoint, HF_HUB_CACHE=self.cache,
                   HF_HOME=os.path.join(self.cache, "home"))
        for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HUGGING_FACE_HUB_TOKEN"):
            env.pop(k, None)
        if token is not None:
            env["HF_TOKEN"] = token
        env.update(more)
        return env

    def serve(self, *args, **env):
        return InferServer(None, *args, env=self.env(**env))

    def check_embeddings(self, server):
        ref = [(t, e) for t, _, e in reference("bert") if t is not None]
        for (text, want), got in zip(ref, embed(server, [t for t, _ in ref])):
            self.assertGreaterEqual(cosine(got, want), 0.9999, text)

    def refused(self, *args, **env):
        """The output of a start-up that must fail (exit status not 0)."""
        p = subprocess.run([os.environ["INFER_SERVER_BINARY"], "--device", "cpu",
                            "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                            "--metrics-address", "127.0.0.1:0", *args],
                           env=self.env(**env), capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = [line for line in p.stdout.splitlines() if "critical" in line]
        self.assertEqual(len(lines), 1, p.stdout)
        return lines[0]

    def test_downloads_serves_and_shares_the_cache_with_huggingface_hub(self):
        server = self.serve("--model-id", "tiny=org/tiny")
        try:
            self.check_embeddings(server)
        finally:
            server.stop()
        log = "".join(server.log)
        self.assertIn(f"org/tiny at revision 'main': commit {COMMIT}", log)
        fetched = {r["path"] for r in self.hub.requests}
        # Only what a served model reads; never the PyTorch or ONNX copies.
        for unwanted in ("pytorch_model.bin", "onnx/model.onnx", ".gitattributes"):
            self.assertFalse(any(p.endswith(unwanted) for p in fetched), unwanted)
        # The token goes to the hub, never to the storage host.
        for r in self.hub.requests:
            if r["path"].startswith("/cdn/"):
                self.assertIsNone(r["auth"], r)
                self.assertTrue(r["host"].startswith("localhost:"), r)
            else:
                self.assertEqual(r["auth"], f"Bearer {TOKEN}", r)
        # huggingface_hub finds what the server wrote, offline, file for file.
        folder = snapshot_download("org/tiny", cache_dir=self.cache, local_files_only=True)
        self.assertEqual(os.path.basename(folder), COMMIT)
        served = ["config.json", "tokenizer.json", "tokenizer_config.json", "modules.json",
                  "sentence_bert_config.json", "README.md", "model.safetensors",
                  "1_Pooling/config.json"]
        for name in served:
            path = hf_hub_download("org/tiny", name, cache_dir=self.cache, local_files_only=True)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), self.files[name], name)
        blob = os.readlink(os.path.join(folder, "model.safetensors"))
        self.assertEqual(blob, f"../../blobs/{self.weights_sha}")
        info = scan_cache_dir(self.cache)
        self.assertEqual(info.warnings, [])
        (repo,) = info.repos
        self.assertEqual(repo.repo_id, "org/tiny")
        (revision,) = repo.revisions
        self.assertEqual(revision.commit_hash, COMMIT)
        self.assertEqual(revision.refs, frozenset({"main"}))
        self.assertEqual(revision.nb_files, len(served))
        # A second start finds everything in the cache: no file is fetched.
        self.hub.requests.clear()
        server = self.serve("--model-id", "tiny=org/tiny")
        server.stop()
        self.assertIn("every file already in the cache", "".join(server.log))
        self.assertFalse([r for r in self.hub.requests if "/resolve/" in r["path"]
                          or r["path"].startswith("/cdn/")])

    def test_serves_a_cache_huggingface_hub_filled_offline(self):
        snapshot_download("org/tiny-sharded", cache_dir=self.cache, endpoint=self.hub.endpoint)
        self.hub.requests.clear()
        server = self.serve("--model-id", "tiny=org/tiny-sharded", HF_HUB_OFFLINE="1")
        try:
            self.check_embeddings(server)
        finally:
            server.stop()
        self.assertEqual(self.hub.requests, [])
        self.assertIn("HF_HUB_OFFLINE is set", "".join(server.log))
        # The hub out of reach: the cached copy, with the reason in the log.
        server = self.serve("--model-id", "tiny=org/tiny-sharded",
                            HF_ENDPOINT="http://127.0.0.1:9")
        try:
            self.check_embeddings(server)
        finally:
            server.stop()
        self.assertRegex("".join(server.log),
                         r"cannot reach the hub at http://127\.0\.0\.1:9 .*serving commit "
                         + COMMIT2)

    def test_clear_refusals(self):
        line = self.refused("--model-id", "org/nope", token=None)
        self.assertIn("--model-id org/nope@main: the hub at", line)
        self.assertIn("has no repository org/nope, or it is private or gated and needs a token",
                      line)
        line = self.refused("--model-id", "org/tiny", token="hf_wrong")
        self.assertIn("org/tiny@main: the hub refused the token (401: invalid credentials)", line)
        self.assertNotIn("hf_wrong", line)
        line = self.refused("--model-id", "org/tiny", token=None)
        self.assertIn("has no repository org/tiny, or it is private", line)
        line = self.refused("--model-id", "org/tiny", "--revision", "v9")
        self.assertIn("the hub has no revision 'v9' of org/tiny (404)", line)
        line = self.refused("--model-id", "org/gated", token=None)
        self.assertIn("org/gated is gated: its conditions must be accepted", line)
        line = self.refused("--model-id", "org/pt-only")
        self.assertIn("org/pt-only@main: has no safetensors weights", line)
        self.assertIn("pytorch_model.bin", line)
        line = self.refused("--model-id", "org/tiny", HF_ENDPOINT="http://127.0.0.1:9")
        self.assertIn("cannot reach the hub at http://127.0.0.1:9", line)
        self.assertIn("holds no copy of revision 'main'", line)
        line = self.refused("--model-id", "org/tiny", HF_HUB_OFFLINE="1")
        self.assertIn("HF_HUB_OFFLINE is set", line)
        line = self.refused("--model-id", "../etc/passwd")
        self.assertIn("is not a model id on the hub", line)

    def test_an_interrupted_download_resumes(self):
        # Cut within this run: the next try asks for the rest.
        self.hub.cut_once[self.weights_sha] = 200000
        server = self.serve("--model-id", "tiny=org/tiny")
        server.stop()
        gets = self.hub.storage_gets(self.weights_sha)
        self.assertEqual([g["range"] for g in gets], [None, "bytes=200000-"])
        self.assertIn("download of model.safetensors interrupted", "".join(server.log))
        # Left by a process that died: the next start resumes from it.
        shutil.rmtree(self.cache)
        os.makedirs(os.path.join(self.cache, "models--org--tiny", "blobs"))
        partial = os.path.join(self.cache, "models--org--tiny", "blobs",
                               self.weights_sha + ".incomplete")
        with open(partial, "wb") as f:
            f.write(self.files["model.safetensors"][:100000])
        self.hub.requests.clear()
        server = self.serve("--model-id", "tiny=org/tiny")
        try:
            self.check_embeddings(server)
        finally:
            server.stop()
        self.assertEqual([g["range"] for g in self.hub.storage_gets(self.weights_sha)],
                         ["bytes=100000-"])
        self.assertFalse(os.path.exists(partial))

    def test_corrupt_bytes_are_never_kept(self):
        self.hub.corrupt.add(self.weights_sha)
        try:
            line = self.refused("--model-id", "org/tiny")
        finally:
            self.hub.corrupt.discard(self.weights_sha)
        self.assertIn(f"the downloaded model.safetensors has SHA-256", line)
        self.assertIn(f"instead of the hub's {self.weights_sha}; it was deleted", line)
        blobs = os.listdir(os.path.join(self.cache, "models--org--tiny", "blobs"))
        self.assertFalse([b for b in blobs if b.startswith(self.weights_sha)], blobs)
        self.assertFalse(os.path.exists(os.path.join(
            self.cache, "models--org--tiny", "snapshots", COMMIT, "model.safetensors")))

    def test_a_server_that_sends_too_much_fills_no_disk(self):
        # 64 MiB of garbage after the file: cut off at the listed size.
        self.hub.extra[self.weights_sha] = 64 << 20
        try:
            server = self.serve("--model-id", "tiny=org/tiny")
        finally:
            self.hub.extra.pop(self.weights_sha, None)
        try:
            self.check_embeddings(server)
        finally:
            server.stop()
        self.assertIn("sent more than the 565288 bytes", "".join(server.log))
        blob = os.path.join(self.cache, "models--org--tiny", "blobs", self.weights_sha)
        self.assertEqual(os.path.getsize(blob), len(self.files["model.safetensors"]))

    def test_two_servers_on_one_cache_download_each_file_once(self):
        self.hub.slow[self.weights_sha] = 0.05
        try:
            servers = [None, None]
            starts = [threading.Thread(target=lambda i=i: servers.__setitem__(
                i, self.serve("--model-id", "tiny=org/tiny"))) for i in range(2)]
            for t in starts:
                t.start()
            for t in starts:
                t.join()
        finally:
            self.hub.slow.pop(self.weights_sha, None)
        try:
            for s in servers:
                self.assertIsNotNone(s)
                self.check_embeddings(s)
        finally:
            for s in servers:
                if s is not None:
                    s.stop()
        self.assertEqual(len(self.hub.storage_gets(self.weights_sha)), 1)
        self.assertEqual(scan_cache_dir(self.cache).warnings, [])


class TeiCommandLineTest(unittest.TestCase):
    """A TEI deployment's environment, unchanged: MODEL_ID, PORT, HF_TOKEN,
    JSON_OUTPUT, MAX_CLIENT_BATCH_SIZE, SERVED_MODEL_NAME, AUTO_TRUNCATE
    and DTYPE, with the model from the hub stand-in."""

    def test_a_tei_environment_serves(self):
        hub = HubStandIn(tokens=[TOKEN])
        cache = tempfile.mkdtemp(prefix="hub-cache-")
        try:
            hub.add(Repo("org/tiny", fixture_files(), COMMIT, private=True))
            port = fixed_port()
            env = dict(os.environ, HF_ENDPOINT=hub.endpoint, HUGGINGFACE_HUB_CACHE=cache,
                       HF_HOME=os.path.join(cache, "home"), MODEL_ID="org/tiny", PORT=str(port),
                       HF_TOKEN=TOKEN, JSON_OUTPUT="true", MAX_CLIENT_BATCH_SIZE="2",
                       SERVED_MODEL_NAME="tiny-embedder", AUTO_TRUNCATE="true", DTYPE="float32")
            env.pop("HF_HUB_CACHE", None)
            proc = subprocess.Popen(
                [os.environ["INFER_SERVER_BINARY"], "--device", "cpu", "--grpc-address",
                 "127.0.0.1:0", "--metrics-address", "127.0.0.1:0", "--drain-grace-s", "0"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            lines = []
            for raw in proc.stdout:
                lines.append(json.loads(raw))  # every line is a JSON object
                if "infer-server listening" in lines[-1]["message"]:
                    break
            threading.Thread(target=lambda: [lines.append(json.loads(x)) for x in proc.stdout],
                             daemon=True).start()
            try:
                messages = [line["message"] for line in lines]
                self.assertTrue(all(set(line) == {"timestamp", "level", "message", "target"}
                                    for line in lines), lines[0])
                self.assertIn("model 'tiny-embedder' also answers to 'org/tiny'", messages)
                self.assertTrue(any("precision fp32" in m for m in messages), messages)
                # TEI's port, on every address (0.0.0.0), as TEI listens.
                self.assertTrue(any(f"on http://0.0.0.0:{port}" in m for m in messages))
                base = f"http://127.0.0.1:{port}"
                from huggingface_hub import InferenceClient
                got = InferenceClient(model=base).feature_extraction("A man is playing a guitar.")
                ref = reference("bert")[0]
                self.assertGreaterEqual(cosine(np.ravel(got), ref[2]), 0.9999)
                # OpenAI's "model" may be the hub id, as TEI's clients send it.
                for model in ("org/tiny", "tiny-embedder"):
                    req = urllib.request.Request(
                        base + "/v1/embeddings",
                        data=json.dumps({"model": model, "input": ["a", "b"]}).encode(),
                        headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=30) as r:
                        self.assertEqual(len(json.load(r)["data"]), 2)
                # MAX_CLIENT_BATCH_SIZE=2: three inputs are refused, naming the limit.
                req = urllib.request.Request(
                    base + "/embed", data=json.dumps({"inputs": ["a", "b", "c"]}).encode(),
                    headers={"Content-Type": "application/json"})
                with self.assertRaises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(req, timeout=30)
                self.assertIn("max_client_batch_size", refused.exception.read().decode())
            finally:
                proc.send_signal(subprocess.signal.SIGTERM)
                self.assertEqual(proc.wait(timeout=60), 0)
        finally:
            hub.stop()
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
