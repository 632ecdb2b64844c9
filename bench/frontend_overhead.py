#!/usr/bin/env python3
"""What does the server itself cost per request? infer-server serving the
`identity` model (input ids copied to the output, no device work: decoding,
validation, queueing, dynamic batching, pipeline hand-offs, encoding) against
echo-server, a bare gRPC server of the same service and payload that answers
at once. Both are driven by infer-bench, closed loop, same payload, at
concurrency 1 and 64, one after the other in this run.

Answers: throughput ratio (ours / bare gRPC) and the difference of p50.

  python3 bench/frontend_overhead.py [--duration-s 10] [--length 128]
"""

import argparse
import shutil

import benchlib

IDENTITY = """
backend: "identity"
max_batch_size: 64
dynamic_batching { max_queue_delay_microseconds: 0 }
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=10)
    ap.add_argument("--length", type=int, default=128, help="tokens per request (INT64 ids)")
    ap.add_argument("--concurrency", default="1,64")
    a = ap.parse_args()
    levels = [int(c) for c in a.concurrency.split(",")]
    print(f"front-end overhead on {benchlib.machine()}")
    print(f"payload: INT64 [1, {a.length}] in and out ({8 * a.length} bytes each way); "
          f"{a.duration_s:g} s per point after 1 s warm-up; client and server share this machine")
    repo = benchlib.write_repository({"identity": IDENTITY})
    results = {}
    try:
        for name, start in (("infer-server", lambda: benchlib.start_infer_server(repo, "--device", "cpu")),
                            ("echo-server", benchlib.start_echo_server)):
            server = start()
            try:
                for c in levels:
                    results[(name, c)] = benchlib.infer_bench(
                        server.address, "identity", "--concurrency", c, "--lengths", a.length,
                        "--duration-s", a.duration_s, "--warmup-s", 1)
            finally:
                server.stop()
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    rows = []
    for c in levels:
        ours, bare = results[("infer-server", c)], results[("echo-server", c)]
        for name, r in (("infer-server", ours), ("echo-server", bare)):
            rows.append([name, c, f"{r['throughput_per_s']:.0f}", f"{r['latency_ms']['p50']:.3f}",
                         f"{r['latency_ms']['p99']:.3f}", r["sent"] - r["ok"]])
    benchlib.table(["server", "concurrency", "ok/s", "p50 ms", "p99 ms", "errors"], rows)
    print()
    for c in levels:
        ours, bare = results[("infer-server", c)], results[("echo-server", c)]
        ratio = ours["throughput_per_s"] / bare["throughput_per_s"]
        diff = ours["latency_ms"]["p50"] - bare["latency_ms"]["p50"]
        print(f"concurrency {c}: throughput ours / bare gRPC = {ratio:.2f}; "
              f"p50 ours - bare = {diff:+.3f} ms")


if __name__ == "__main__":
    main()
