#!/usr/bin/env python3
"""What happens at 2-3x capacity? First the capacity of an embed_pool model
(closed loop, concurrency 32); then an open-loop Poisson load at --factor x
that rate for a fixed time. The queue is bounded (max_queue_size 64) and
requests carry a 1 s default timeout, so the excess must be refused quickly
rather than queued without end.

Answers: accepted throughput / capacity, p99 of the accepted requests at
overload / at capacity, how fast refusals come back, and the server's memory
(RSS and device memory) before and after.

  python3 bench/overload.py [--duration-s 10] [--factor 2.5] [--device cpu]
"""

import argparse
import shutil
import urllib.request

import benchlib

MODEL = """
backend: "embed_pool"
max_batch_size: 32
dynamic_batching {
  max_queue_delay_microseconds: 1000
  default_queue_policy { max_queue_size: 64 default_timeout_microseconds: 1000000 }
}
parameters { key: "hidden_size" value { string_value: "256" } }
"""


def gauge(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=10)
    ap.add_argument("--factor", type=float, default=2.5)
    ap.add_argument("--lengths", default="128")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    print(f"overload on {benchlib.machine()}, device {a.device}")
    repo = benchlib.write_repository({"m": MODEL})
    server = benchlib.start_infer_server(repo, "--device", a.device)
    try:
        rss0 = server.rss_bytes()
        dev0 = gauge(server.metrics_port, "infer_device_memory_reserved_bytes")
        cap = benchlib.infer_bench(server.address, "m", "--concurrency", 32, "--lengths", a.lengths,
                                   "--duration-s", a.duration_s, "--warmup-s", 1,
                                   metrics_port=server.metrics_port)
        capacity = cap["throughput_per_s"]
        rate = a.factor * capacity
        over = benchlib.infer_bench(server.address, "m", "--rate", f"{rate:.1f}", "--arrivals",
                                    "poisson", "--lengths", a.lengths, "--duration-s",
                                    a.duration_s, "--warmup-s", 1, "--timeout-ms", 5000,
                                    metrics_port=server.metrics_port)
        rss1 = server.rss_bytes()
        dev1 = gauge(server.metrics_port, "infer_device_memory_reserved_bytes")
        peak = gauge(server.metrics_port, "infer_device_memory_peak_allocated_bytes")
        budget = gauge(server.metrics_port, "infer_device_memory_budget_bytes")
    finally:
        code = server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    errors = {k: v for k, v in over["codes"].items() if k != "OK"}
    benchlib.table(
        ["phase", "offered/s", "ok/s", "p50 ms", "p99 ms", "refused", "refusal p50 ms",
         "refusal p99 ms"],
        [["capacity (closed loop, c=32)", "-", f"{capacity:.0f}", f"{cap['latency_ms']['p50']:.1f}",
          f"{cap['latency_ms']['p99']:.1f}", cap["sent"] - cap["ok"], "-", "-"],
         [f"overload ({a.factor:g}x, Poisson)", f"{rate:.0f}", f"{over['throughput_per_s']:.0f}",
          f"{over['latency_ms']['p50']:.1f}", f"{over['latency_ms']['p99']:.1f}",
          over["sent"] - over["ok"], f"{over['error_latency_ms']['p50']:.2f}",
          f"{over['error_latency_ms']['p99']:.2f}"]])
    print(f"\nrefusals by code: {errors or 'none'}")
    print(f"accepted throughput at overload / capacity = {over['throughput_per_s'] / capacity:.2f}")
    print(f"p99 of accepted requests at overload / at capacity = "
          f"{over['latency_ms']['p99'] / cap['latency_ms']['p99']:.2f}")
    if "server" in cap and "server" in over:
        print(f"server-side p99 (arrival to answer, from /metrics): {cap['server']['p99_ms']:.1f} "
              f"ms at capacity, {over['server']['p99_ms']:.1f} ms at overload; peak queue depth "
              f"{over['server']['queue_depth_peak']:.0f} (max_queue_size 64; up to 3 batches of "
              f"32 rows more are in the device pipeline)")
    else:
        print("server-side figures: /metrics could not be scraped")
    pacing = over["pacing"]
    print(f"sender: {pacing['late']} of {pacing['issued']} requests sent over 1 ms after their "
          f"intended time (max {pacing['max_lag_ms']:.1f} ms); client latency counts from the "
          f"intended time, so a late sender shows in the client's p99")
    print(f"server RSS {rss0 / 2**20:.0f} MiB before, {rss1 / 2**20:.0f} MiB after; device memory "
          f"reserved {dev0 / 2**20:.0f} -> {dev1 / 2**20:.0f} MiB (peak allocated "
          f"{peak / 2**20:.0f} MiB of a {budget / 2**30:.1f} GiB budget); server exit code {code}")


if __name__ == "__main__":
    main()
