#!/usr/bin/env python3
"""Rerank throughput and latency, this server against Infinity, on the CPU.

One cross-encoder of ms-marco-MiniLM-L-6's shape (BERT, 6 layers, hidden 384,
12 heads, a 30522-word WordPiece vocabulary, one label) is served by both:
infer-server's Cohere route (POST /v1/rerank) and Infinity's (POST /rerank,
`infinity_emb v2 --engine torch --device cpu`). One load generator sends the
same requests to each, one query with 20 passages a request, at a fixed
concurrency (a closed loop: each of `c` clients sends its next request when
the last is answered), for the same time, in alternating rounds (ours,
Infinity, ours, ...) so that drift on a shared machine falls on both.
Reported per concurrency: requests/s (and pairs/s), p50 and p99 latency of
each round, and the ratio of the medians.

The weights are random (no package ships a cross-encoder's weights; both
servers load the same folder, and the script first checks that they give
the same scores for one request, within 1e-4 after the sigmoid in FP32, 0.02
with a reduced precision on either side; ours in INT8 is served without its
quality gate, which random weights cannot pass: see Ours), the
vocabulary synthetic (infer-model-gen's), the passages made of its whole
words (query 8, passages 20 to 120 words, uniformly: MS MARCO's passages
average about 60 words and vary as widely). The
work per pair is that of the real model: the same shapes, the same tokens.

  python3 bench/rerank_vs_infinity.py --infinity /path/to/venv/bin/infinity_emb \\
      [--server build/bin/infer-server] [--model-gen build/bin/infer-model-gen] \\
      [--concurrency 1,16] [--seconds 30] [--rounds 3] [--precision fp32|bf16|int8]
      [--infinity-dtype float32|bfloat16|int8]

Needs, outside the README's commands: a virtual environment with
infinity-emb[server,torch] 0.0.78 (which pins sentence-transformers < 4 and
numpy < 2) and this script's own torch and transformers (to add the
classification head to infer-model-gen's checkpoint).
"""

import argparse
import http.client
import json
import math
import os
import platform
import random
import re
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from infer_server_process import fixed_port  # noqa: E402


def make_cross_encoder(model_gen, out):
    """infer-model-gen's minilm-l6 checkpoint with a one-label
    classification head (transformers' BertForSequenceClassification,
    seeded), saved as a Hugging Face folder both servers load."""
    import torch
    import transformers as tf
    base = os.path.join(out, "base")
    subprocess.run([model_gen, "--out", base, "--preset", "minilm-l6", "--seed", "7"], check=True,
                   stdout=subprocess.DEVNULL)
    config = tf.BertConfig.from_pretrained(base)
    config.num_labels = 1
    config.architectures = ["BertForSequenceClassification"]
    torch.manual_seed(7)
    model = tf.BertForSequenceClassification.from_pretrained(base, config=config)
    # A head that spreads the scores, so that the check below means something.
    torch.nn.init.normal_(model.classifier.weight, std=0.5)
    folder = os.path.join(out, "cross-encoder")
    model.save_pretrained(folder, safe_serialization=True)
    tok = tf.BertTokenizerFast(vocab_file=os.path.join(base, "vocab.txt"), do_lower_case=True,
                               model_max_length=512)
    tok.save_pretrained(folder)
    words = [w.strip() for w in open(os.path.join(base, "vocab.txt"), encoding="utf-8")
             if re.fullmatch(r"[a-z]{3,}", w.strip())]
    return folder, words


def make_requests(words, n, seed=3):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        query = " ".join(rng.choice(words) for _ in range(8))
        passages = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 120)))
                    for _ in range(20)]
        out.append((query, passages))
    return out


class Server:
    def __init__(self, name, args, port, path, ready_path, env=None):
        self.name, self.port, self.path = name, port, path
        self.log = tempfile.NamedTemporaryFile(prefix=f"{name}_", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        deadline = time.time() + 600
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited; see {self.log.name}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", ready_path)
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"{name} did not become ready; see {self.log.name}")

    def body(self, query, passages):
        raise NotImplementedError

    def scores(self, answer):
        """[(index, score)] of a rerank answer."""
        return [(r["index"], r["relevance_score"]) for r in answer["results"]]

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


class Ours(Server):
    def __init__(self, binary, folder, precision, work):
        port = fixed_port()
        if precision == "int8":
            # The INT8 quality gate ranks the model's scores against FP32's;
            # random weights score every pair nearly alike (a spread of about
            # 0.02), so the ranks are noise and the gate refuses the load.
            # Served unchecked here: main() compares the scores with
            # Infinity's instead.
            folder_config = os.path.join(work, "ours-int8")
            os.makedirs(folder_config)
            with open(os.path.join(folder_config, "config.pbtxt"), "w") as f:
                f.write('backend: "transformer"\nprecision: "int8"\n'
                        f'parameters {{ key: "checkpoint_dir" value {{ string_value: "{folder}" }} }}\n'
                        'parameters { key: "precision_gate" value { string_value: "false" } }\n')
            print("ours in INT8 without its quality gate (random weights: see Ours)")
            folder = folder_config
        super().__init__("infer-server", [
            binary, "--device", "cpu", "--http-address", f"127.0.0.1:{port}",
            "--grpc-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0",
            "--precision", precision, "--model", f"reranker={folder}"], port, "/v1/rerank",
            "/v2/health/ready")

    def body(self, query, passages):
        return {"model": "reranker", "query": query, "documents": passages}


class Infinity(Server):
    def __init__(self, binary, folder, dtype):
        port = fixed_port()
        super().__init__("infinity", [
            binary, "v2", "--model-id", folder, "--served-model-name", "reranker",
            "--engine", "torch", "--device", "cpu", "--dtype", dtype, "--port", str(port)],
            port, "/rerank", "/health",
            env={"HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0",
                 "DO_NOT_TRACK": "1"})

    def body(self, query, passages):
        return {"model": "reranker", "query": query, "documents": passages,
                "return_documents": False}


def post(conn, server, body):
    conn.request("POST", server.path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"{server.name}: {r.status} {data[:300]!r}")
    return json.loads(data)


def run_round(server, requests, concurrency, seconds, warmup=5.0):
    """Closed loop: `concurrency` clients for `warmup` + `seconds`;
    (requests/s, latencies in seconds) of the requests answered inside the
    measured window (the last `seconds`). The round ends when every
    client's last request is answered, so the next starts on an idle
    machine."""
    stop = time.perf_counter() + warmup + seconds
    begin = time.perf_counter() + warmup
    latencies, lock, errors = [], threading.Lock(), []

    def client(k):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        i = k
        try:
            while True:
                t0 = time.perf_counter()
                if t0 >= stop:
                    return
                post(conn, server, server.body(*requests[i % len(requests)]))
                t1 = time.perf_counter()
                if begin <= t1 <= stop:
                    with lock:
                        latencies.append(t1 - t0)
                i += concurrency
        except Exception as e:  # reported after the round
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return len(latencies) / seconds, latencies


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
        model = re.search(r"model name\s*:\s*(.*)", text).group(1)
        flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split())
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
        return f"{model}, {os.cpu_count()} cores, {' '.join(isa)}"
    except (OSError, AttributeError):
        return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--infinity", required=True, help="the infinity_emb command")
    ap.add_argument("--server", default=os.path.join(ROOT, "build", "bin", "infer-server"))
    ap.add_argument("--model-gen", default=os.path.join(ROOT, "build", "bin", "infer-model-gen"))
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "int8"],
                    help="ours (infer-server --precision)")
    ap.add_argument("--infinity-dtype", default="float32",
                    help="Infinity's --dtype (float32, bfloat16, int8, ...)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rerank_vs_infinity_")
    folder, words = make_cross_encoder(a.model_gen, work)
    requests = make_requests(words, 64)
    servers = [Ours(a.server, folder, a.precision, work), Infinity(a.infinity, folder, a.infinity_dtype)]
    try:
        # Same model, same scores: one request through both.
        query, passages = requests[0]
        got = []
        for s in servers:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=300)
            got.append(dict(s.scores(post(conn, s, s.body(query, passages)))))
        worst = max(abs(got[0][i] - got[1][i]) for i in range(len(passages)))
        spread = max(got[0].values()) - min(got[0].values())
        print(f"scores agree within {worst:.2e} (spread {spread:.3f}) over {len(passages)} pairs")
        # FP32 on both sides: the same numbers; a reduced precision on
        # either side moves the scores by up to about a hundredth.
        exact = a.precision == "fp32" and a.infinity_dtype == "float32"
        if worst > (1e-4 if exact else 0.02):
            raise SystemExit("the two servers disagree: not the same model")
        print(f"ours in {a.precision}, Infinity in {a.infinity_dtype}")
        print(f"CPU: {cpu_name()}")
        print(f"{len(passages)} passages a request; {a.seconds:.0f} s a round, {a.rounds} rounds")
        for c in [int(x) for x in a.concurrency.split(",")]:
            results = {s.name: [] for s in servers}
            for r in range(a.rounds):
                for s in servers:
                    rps, lat = run_round(s, requests, c, a.seconds)
                    results[s.name].append((rps, percentile(lat, 50), percentile(lat, 99)))
                    print(f"  c={c:<3} round {r + 1} {s.name:<12} {rps:7.2f} req/s "
                          f"({rps * 20:7.1f} pairs/s)  p50 {percentile(lat, 50) * 1e3:8.1f} ms  "
                          f"p99 {percentile(lat, 99) * 1e3:8.1f} ms", flush=True)
            med = {n: [statistics.median(x[i] for x in v) for i in range(3)]
                   for n, v in results.items()}
            o, i = med["infer-server"], med["infinity"]
            print(f"c={c}: throughput {o[0] / i[0]:.2f}x Infinity's "
                  f"({o[0]:.2f} vs {i[0]:.2f} req/s); p50 {o[1] * 1e3:.1f} vs "
                  f"{i[1] * 1e3:.1f} ms; p99 {o[2] * 1e3:.1f} vs {i[2] * 1e3:.1f} ms (medians)")
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
