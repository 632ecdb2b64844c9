#!/usr/bin/env python3
"""A long run of mixed traffic against one infer-server: does anything grow,
leak, hang or fail that should not?

Traffic, from --workers closed-loop threads, each call drawn at random:
- ids (INT64 input_ids) to an embed_pool model with three length classes,
  lengths across all of them, and client batches from 1 to twice the model's
  max_batch_size (those are split by the server);
- text (BYTES) to all-MiniLM-L6-v2 on the CPU, 1 to 60 words;
- a ModelStreamInfer stream of 1-8 requests;
- a call cancelled by the client soon after it is sent;
- a call with a deadline too short to be met.
Every --burst-every-s seconds, infer-bench adds an open-loop Poisson burst
of ids requests for --burst-s seconds at twice the rate the server answered
over the last interval (so the offered load is about 3x what it keeps up
with); its calls are counted from its own report.

Every --sample-s seconds it samples the server's RSS and the device memory
the allocator holds (infer_device_memory_reserved_bytes). At the end it
reports the RSS slope and growth after --warmup-s, the errors by code and
kind, p99 per minute, and checks that every call sent was answered
(answers = calls). Exit 1 when an INTERNAL error, an unanswered call, or RSS
growth of 5% or more after warm-up was seen.

  .venv/bin/python bench/soak.py [--duration-s 600] [--workers 8]
"""

import argparse
import collections
import os
import random
import shutil
import struct
import sys
import threading
import time
import urllib.request

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

import benchlib

IDS_MODEL = """
backend: "embed_pool"
max_batch_size: 16
dynamic_batching { max_queue_delay_microseconds: 2000 length_buckets: [32, 128, 512]
                   default_queue_policy { max_queue_size: 256 } }
parameters { key: "hidden_size" value { string_value: "128" } }
parameters { key: "max_sequence_length" value { string_value: "512" } }
"""
TEXT_MODEL = """
backend: "bert"
max_batch_size: 32
dynamic_batching { max_queue_delay_microseconds: 2000
                   default_queue_policy { max_queue_size: 128 } }
"""
WORDS = ("the quick brown fox jumps over a lazy dog while serving embeddings "
         "under bounded batching never runs out of memory").split()


def ids_request(rng, model="ids"):
    rows = rng.randint(1, 32)
    length = rng.choice([rng.randint(1, 32), rng.randint(33, 128), rng.randint(129, 512)])
    req = service_pb2.ModelInferRequest(model_name=model)
    req.inputs.add(name="input_ids", datatype="INT64", shape=[rows, length])
    req.raw_input_contents.append(
        struct.pack(f"<{rows * length}q", *(rng.randrange(1000) for _ in range(rows * length))))
    return req


def text_request(rng):
    rows = rng.randint(1, 4)
    req = service_pb2.ModelInferRequest(model_name="text")
    req.inputs.add(name="text", datatype="BYTES", shape=[rows])
    raw = b""
    for _ in range(rows):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60))).encode()
        raw += struct.pack("<I", len(s)) + s
    req.raw_input_contents.append(raw)
    return req


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.answered = 0
        self.codes = collections.Counter()  # (kind, code)
        self.latencies = collections.defaultdict(list)  # minute -> seconds (OK ids/text)

    def send(self, n=1):
        with self.lock:
            self.sent += n

    def answer(self, kind, code, start, t0):
        with self.lock:
            self.answered += 1
            self.codes[(kind, code.name)] += 1
            if code == grpc.StatusCode.OK and kind in ("ids", "text"):
                self.latencies[int((start - t0) // 60)].append(time.monotonic() - start)


def one_call(stub, rng, tally, t0, kind):
    start = time.monotonic()
    if kind == "stream":
        n = rng.randint(1, 8)
        reqs = [ids_request(rng) for _ in range(n)]
        tally.send(n)
        got = 0
        try:
            for resp in stub.ModelStreamInfer(iter(reqs), timeout=60):
                got += 1
                tally.answer("stream", grpc.StatusCode.OK if not resp.error_message
                             else grpc.StatusCode.UNKNOWN, start, t0)
        except grpc.RpcError as e:
            for _ in range(n - got):
                tally.answer("stream", e.code(), start, t0)
                got += 1
        for _ in range(n - got):  # a stream that ended without answering
            tally.answer("stream", grpc.StatusCode.DATA_LOSS, start, t0)
        return
    req = text_request(rng) if kind == "text" else ids_request(rng)
    timeout = 0.0005 if kind == "deadline" else 60
    tally.send()
    future = stub.ModelInfer.future(req, timeout=timeout)
    if kind == "cancel":
        time.sleep(rng.uniform(0, 0.003))
        future.cancel()
    try:
        future.result()
        code = grpc.StatusCode.OK
    except grpc.FutureCancelledError:
        code = grpc.StatusCode.CANCELLED
    except grpc.RpcError as e:
        code = e.code()
    tally.answer(kind, code, start, t0)


def worker(address, stop, tally, t0, seed, kinds):
    rng = random.Random(seed)
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", -1),
                                                      ("grpc.max_receive_message_length", -1)])
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    while not stop.is_set():
        one_call(stub, rng, tally, t0, rng.choice(kinds))
    channel.close()


def gauge(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def slope_per_min(points):
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    return 60 * sum((p[0] - mx) * (p[1] - my) for p in points) / var if var else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=600)
    ap.add_argument("--warmup-s", type=float, default=60)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--sample-s", type=float, default=5)
    ap.add_argument("--burst-every-s", type=float, default=60)
    ap.add_argument("--burst-s", type=float, default=5)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()

    repo = benchlib.write_repository({"ids": IDS_MODEL, "text": TEXT_MODEL})
    minilm = benchlib.minilm_dir()
    for f in os.listdir(minilm):
        if os.path.isfile(os.path.join(minilm, f)):
            shutil.copy(os.path.join(minilm, f), os.path.join(repo, "text"))
    server = benchlib.start_infer_server(repo, "--device", a.device)
    print(f"machine: {benchlib.machine()}")
    print(f"soak: {a.duration_s:.0f} s, {a.workers} workers, bursts of {a.burst_s:.0f} s every "
          f"{a.burst_every_s:.0f} s at twice the rate answered (open loop, infer-bench)", flush=True)
    tally = Tally()
    stop = threading.Event()
    t0 = time.monotonic()
    kinds = ["ids"] * 5 + ["text"] * 2 + ["stream", "cancel", "deadline"]
    threads = [threading.Thread(target=worker, args=(server.address, stop, tally, t0, i, kinds))
               for i in range(a.workers)]
    for t in threads:
        t.start()
    samples = []  # (seconds, rss bytes, device reserved bytes)
    next_burst = a.burst_every_s
    burst = None
    bursts = []  # infer-bench's first step of each burst
    last = (0.0, 0)  # (seconds, answered) at the previous burst
    while (now := time.monotonic() - t0) < a.duration_s:
        samples.append((now, server.rss_bytes(),
                        gauge(server.metrics_port, "infer_device_memory_reserved_bytes")))
        if burst is None and now >= next_burst and now + a.burst_s < a.duration_s:
            rate = 2 * (tally.answered - last[1]) / (now - last[0])
            last = (now, tally.answered)
            burst = threading.Thread(target=lambda r=rate: bursts.append(benchlib.infer_bench(
                server.address, "ids", "--rate", f"{r:.0f}", "--duration-s", str(a.burst_s),
                "--warmup-s", "0", "--lengths", "16:0.5,100:0.3,400:0.2", "--batch-size", "4",
                "--channels", "4")))
            burst.start()
            next_burst += a.burst_every_s
        elif burst is not None and not burst.is_alive():
            burst.join()
            burst = None
        if int(now) % 60 < a.sample_s:
            print(f"  {now:5.0f} s: {tally.answered} answered, RSS {samples[-1][1] / 2**20:.1f} MiB",
                  flush=True)
        time.sleep(a.sample_s)
    stop.set()
    if burst is not None:
        burst.join()
    for t in threads:
        t.join()
    code = server.stop()
    shutil.rmtree(repo, ignore_errors=True)

    after = [s for s in samples if s[0] >= a.warmup_s]
    rss0, rss1 = after[0][1], after[-1][1]
    growth = (rss1 - rss0) / rss0
    print(f"\ncalls sent {tally.sent}, answered {tally.answered}; server exit {code}")
    print(f"RSS after warm-up: {rss0 / 2**20:.1f} -> {rss1 / 2**20:.1f} MiB ({100 * growth:+.2f}%), "
          f"slope {slope_per_min([(t, r / 2**20) for t, r, _ in after]):+.3f} MiB/min")
    print(f"device memory reserved: {after[0][2] / 2**20:.1f} -> {after[-1][2] / 2**20:.1f} MiB, "
          f"slope {slope_per_min([(t, d / 2**20) for t, _, d in after]):+.3f} MiB/min")
    print("answers by kind and code:")
    for (kind, c), n in sorted(tally.codes.items()):
        print(f"  {kind:9s} {c:18s} {n}")
    print("p99 of OK ids/text calls per minute (ms):",
          " ".join(f"{sorted(v)[int(0.99 * (len(v) - 1))] * 1e3:.0f}"
                   for _, v in sorted(tally.latencies.items())))
    burst_internal = 0
    burst_unanswered = 0
    for b in bursts:
        codes = {c: n for c, n in b["codes"].items() if c != "OK"}
        burst_internal += codes.get("INTERNAL", 0)
        burst_unanswered += b["sent"] - sum(b["codes"].values())
        print(f"burst at {b['value']:.0f}/s offered: {b['sent']} sent, {b['ok']} OK, refused {codes}, "
              f"p99 {b['latency_ms']['p99']:.0f} ms")
    internal = sum(n for (_, c), n in tally.codes.items() if c == "INTERNAL") + burst_internal
    unanswered = tally.sent - tally.answered + burst_unanswered
    bad = internal > 0 or unanswered != 0 or growth >= 0.05 or code != 0
    print("RESULT:", "FAIL" if bad else "ok",
          f"(INTERNAL {internal}, unanswered {unanswered}, "
          f"RSS growth {100 * growth:+.2f}%)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
