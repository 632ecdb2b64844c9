#!/usr/bin/env python3
"""The server at saturation against the encoder's in-process forward pass.

How much of the encoder's own throughput does a client get through the
server? encoder-bench times the forward pass in-process on --device at
batch --batch x --length (the server's max_batch_size, one length class, no
padding: the best case). Then infer-server serves the same checkpoint on the
same device (max_batch_size --batch, one length bucket) and infer-bench
drives it in a closed loop with single-row requests of --length tokens at
each --concurrency: the server must form the batches itself from many
clients. Then the same with whole batches per request (--batch rows each,
at each --batch-concurrency): what the per-request cost of the front end
(gRPC, decoding, admission) is, apart from the batching and the device
pipeline. Prints rows/s of each and the ratio server/in-process (1.0: the
serving stack costs nothing at saturation).

  python3 bench/saturation.py --checkpoint model_repository/minilm [--device cuda:0]
"""

import argparse
import os
import shutil
import sys

import benchlib

CONFIG = """
backend: "bert"
max_batch_size: {batch}
dynamic_batching {{
  max_queue_delay_microseconds: 2000
  length_buckets: [{length}]
  default_queue_policy {{ max_queue_size: 4096 }}
}}
parameters {{ key: "checkpoint_dir" value {{ string_value: "{checkpoint}" }} }}
"""


def in_process(a):
    out = benchlib.encoder_bench("--checkpoint", a.checkpoint, "--device", a.device, "--batches",
                                 a.batch, "--lengths", a.length, "--runs", 20)
    ms = out["results"][0]["ms"]
    return a.batch * 1000 / ms, out["implementation"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--concurrency", default="64,256")
    ap.add_argument("--batch-concurrency", default="4,16",
                    help="closed-loop levels for requests of --batch rows each")
    ap.add_argument("--duration-s", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    a = ap.parse_args()
    a.checkpoint = os.path.abspath(a.checkpoint)
    print(f"server vs in-process on {benchlib.machine()}, device {a.device}, batch {a.batch} x "
          f"{a.length} tokens")
    repo = benchlib.write_repository(
        {"m": CONFIG.format(batch=a.batch, length=a.length, checkpoint=a.checkpoint)})
    levels = [(1, int(c)) for c in a.concurrency.split(",")]
    levels += [(a.batch, int(c)) for c in a.batch_concurrency.split(",") if c]
    inproc, served, impl = [], {lv: [] for lv in levels}, ""
    server = benchlib.start_infer_server(repo, "--device", a.device)
    try:
        for r in range(a.rounds):
            # Alternate which side goes first; the server stays up between.
            order = ["in", "srv"] if r % 2 == 0 else ["srv", "in"]
            for side in order:
                if side == "in":
                    rows, impl = in_process(a)
                    inproc.append(rows)
                    continue
                for b, c in levels:
                    res = benchlib.infer_bench(server.address, "m", "--concurrency", c, "-b", b,
                                               "--lengths", a.length, "--duration-s",
                                               a.duration_s, "--warmup-s", 2, "--channels", 8,
                                               metrics_port=server.metrics_port)
                    served[(b, c)].append((res["rows_per_s"], res["latency_ms"]["p99"],
                                           res.get("server", {}).get("batch_rows_mean", 0)))
    finally:
        code = server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    print(f"encoder: {impl}")
    best_in = max(inproc)
    rows = [["in-process forward pass", "-", " / ".join(f"{x:.0f}" for x in inproc), "-", "-",
             "1.00"]]
    for b, c in levels:
        best = max(served[(b, c)])
        rows.append([f"server, requests of {b} row{'s' if b > 1 else ''}", c,
                     " / ".join(f"{x[0]:.0f}" for x in served[(b, c)]), f"{best[1]:.1f}",
                     f"{best[2]:.1f}", f"{best[0] / best_in:.2f}"])
    benchlib.table(["", "concurrency", "rows/s (each round)", "p99 ms (request)",
                    "mean batch rows", "best / best in-process"], rows)
    print(f"server exit code {code}")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
