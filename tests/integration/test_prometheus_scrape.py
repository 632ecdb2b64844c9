"""A real Prometheus server scrapes infer-server and computes p99.

Starts infer-server on the CPU with a model whose batches wait 20 ms for
batch-mates (so every request's latency is known to be a little over 20 ms),
and Prometheus (Debian's binary, fetched by scripts/get-prometheus.sh)
scraping /metrics every second. Triton's Python client sends requests one at
a time for a few seconds; then Prometheus' own `histogram_quantile` over the
scraped buckets must agree with the client's measured p50/p99 within the
resolution of the buckets, and the queue time it reports must show the
20 ms wait. `promtool check metrics` must find nothing to complain about.

Run by CTest; needs INFER_SERVER_BINARY and INFER_PROMETHEUS_DIR (the folder
holding `prometheus` and `promtool`).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient

from infer_server_process import InferServer, fixed_port

DELAY_S = 0.020  # max_queue_delay: a request alone waits this long for batch-mates
LOAD_S = 8.0

CONFIG = f"""
backend: "embed_pool"
max_batch_size: 64
dynamic_batching {{ max_queue_delay_microseconds: {int(DELAY_S * 1e6)} length_buckets: [16, 64] }}
parameters {{ key: "vocab_size" value {{ string_value: "1000" }} }}
parameters {{ key: "embedding_size" value {{ string_value: "32" }} }}
"""

# Neighbouring latency bucket bounds are at most 1.67x apart (README,
# "Metrics"); histogram_quantile interpolates within one bucket.
BUCKET_RATIO = 1.67


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


class PrometheusScrapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="infer_prom_")
        repo = os.path.join(cls.work, "repo")
        os.makedirs(os.path.join(repo, "delayed"))
        with open(os.path.join(repo, "delayed", "config.pbtxt"), "w") as f:
            f.write(CONFIG)
        cls.server = InferServer(repo)
        cls.metrics_port = cls.server.metrics_port
        cls.client = grpcclient.InferenceServerClient(cls.server.address)

        prom_dir = os.environ["INFER_PROMETHEUS_DIR"]
        cls.promtool = os.path.join(prom_dir, "promtool")
        with open(os.path.join(cls.work, "prometheus.yml"), "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n"
                    "  - job_name: infer\n"
                    f"    static_configs: [{{targets: ['127.0.0.1:{cls.metrics_port}']}}]\n")
        cls.prom_port = fixed_port()
        cls.prom_log = open(os.path.join(cls.work, "prometheus.log"), "w")
        cls.prom = subprocess.Popen(
            [os.path.join(prom_dir, "prometheus"),
             f"--config.file={os.path.join(cls.work, 'prometheus.yml')}",
             f"--storage.tsdb.path={os.path.join(cls.work, 'data')}",
             f"--web.listen-address=127.0.0.1:{cls.prom_port}"],
            stdout=cls.prom_log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                http_get(f"http://127.0.0.1:{cls.prom_port}/-/ready", timeout=1)
                break
            except OSError:
                if time.time() > deadline or cls.prom.poll() is not None:
                    raise RuntimeError("Prometheus did not start: " + cls.prometheus_log())
                time.sleep(0.2)

    @classmethod
    def prometheus_log(cls):
        cls.prom_log.flush()
        with open(os.path.join(cls.work, "prometheus.log")) as f:
            return f.read()[-4000:]

    @classmethod
    def tearDownClass(cls):
        cls.prom.terminate()
        cls.prom.wait(timeout=60)
        cls.prom_log.close()
        cls.client.close()
        try:
            cls.server.stop()
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)

    def query(self, promql):
        url = (f"http://127.0.0.1:{self.prom_port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        body = json.loads(http_get(url))
        self.assertEqual(body["status"], "success", body)
        return body["data"]["result"]

    def scalar(self, promql):
        result = self.query(promql)
        self.assertEqual(len(result), 1, f"{promql}: {result}")
        return float(result[0]["value"][1])

    def test_histogram_quantile_agrees_with_the_client(self):
        # Wait for Prometheus to see the target up.
        deadline = time.time() + 30
        while time.time() < deadline:
            up = self.query('up{job="infer"}')
            if up and up[0]["value"][1] == "1":
                break
            time.sleep(0.5)
        else:
            self.fail("Prometheus never scraped infer-server: " + self.prometheus_log())

        ids = np.full((1, 12), 7, dtype=np.int64)  # length bucket 16
        inp = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
        inp.set_data_from_numpy(ids)
        latencies = []
        end = time.time() + LOAD_S
        while time.time() < end:
            t = time.perf_counter()
            self.client.infer("delayed", [inp])
            latencies.append(time.perf_counter() - t)
        time.sleep(3)  # at least two scrapes after the last request
        client_p50 = float(np.percentile(latencies, 50))
        client_p99 = float(np.percentile(latencies, 99))

        window = "[2m]"
        by_le = 'sum by (le) (increase(infer_request_duration_seconds_bucket{model="delayed"}%s))'
        prom_p50 = self.scalar(f"histogram_quantile(0.5, {by_le % window})")
        prom_p99 = self.scalar(f"histogram_quantile(0.99, {by_le % window})")
        queue_p50 = self.scalar(
            "histogram_quantile(0.5, sum by (le) (increase("
            f'infer_queue_duration_seconds_bucket{{model="delayed",length_bucket="16"}}{window})))')
        count = self.scalar(
            f'sum(increase(infer_request_duration_seconds_count{{model="delayed"}}{window}))')
        print(f"\n{len(latencies)} requests; client p50 {client_p50 * 1e3:.2f} ms, "
              f"p99 {client_p99 * 1e3:.2f} ms; Prometheus histogram_quantile p50 "
              f"{prom_p50 * 1e3:.2f} ms, p99 {prom_p99 * 1e3:.2f} ms, queue p50 "
              f"{queue_p50 * 1e3:.2f} ms")

        # increase() extrapolates to the window's edges; the count is close
        # to the requests sent, never far from it.
        self.assertGreater(count, 0.5 * len(latencies))
        # Every request waited DELAY_S in the queue, and the server saw it.
        self.assertGreaterEqual(queue_p50, DELAY_S / BUCKET_RATIO)
        self.assertLessEqual(queue_p50, DELAY_S * BUCKET_RATIO * 1.5)
        # The server's latency is the client's minus the client and network
        # overhead; both are dominated by the 20 ms wait, so the quantiles
        # agree within one bucket's width.
        for name, prom, client in (("p50", prom_p50, client_p50), ("p99", prom_p99, client_p99)):
            self.assertGreaterEqual(prom, client / BUCKET_RATIO, name)
            self.assertLessEqual(prom, client * BUCKET_RATIO, name)

    def test_promtool_finds_the_exposition_clean(self):
        body = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        r = subprocess.run([self.promtool, "check", "metrics"], input=body,
                           capture_output=True)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())
        self.assertIn(b"infer_request_duration_seconds_bucket", body)


if __name__ == "__main__":
    unittest.main()
