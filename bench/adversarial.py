#!/usr/bin/env python3
"""Twice the capacity under a tight memory budget: does the server stay inside
its budget, run out of memory never, and answer every request?

Serves a BERT checkpoint (--checkpoint, e.g. all-MiniLM-L6-v2) on --device
with --memory-budget-bytes as the hard cap (by default: what the server
reserves after loading the model, plus --batch-bytes, 160 MiB: room for a
few of the model's largest batches, 8192 tokens, and no more), then:
  1. capacity: a closed loop (concurrency 64, client batches of 4, lengths
     mixed 16:0.5,128:0.3,L:0.2 with L = --max-length, the model's longest
     sequence, 256 for all-MiniLM-L6-v2) for --capacity-s seconds;
  2. --duration-s seconds of two loads at once:
     - a Poisson open loop of that same mix at --factor x the capacity,
     - and heavy requests in a closed loop: client batches of 2 x
       max_batch_size (the server splits them) at --max-length, 8 in flight.
Every --sample-s seconds it scrapes /metrics: the allocator's reserved and
allocated bytes, OOMs, allocation retries, the admission's in-flight
estimate, and (GPU) the infer_gpu_* gauges. At the end it checks that
  - infer_device_memory_ooms_total stayed 0 (memory admission, not the
    allocator, is what refused work),
  - reserved bytes never passed the budget,
  - every request sent was answered (OK or a refusal: sent = sum of codes),
  - the server exits cleanly;
and exits 1 if one fails. It prints a table and the last scrape of the
infer_gpu_* and infer_device_memory_* series.

  python3 bench/adversarial.py --checkpoint model_repository/minilm \
      [--device cuda:0] [--memory-budget-bytes 0] [--duration-s 600]
"""

import argparse
import os
import re
import shutil
import sys
import threading
import urllib.request

import benchlib

CONFIG = """
backend: "bert"
max_batch_size: 32
dynamic_batching {{
  max_queue_delay_microseconds: 2000
  length_buckets: [16, 32, 64, 128, 256, 512]
  max_batch_tokens: 8192
  default_queue_policy {{ max_queue_size: 256 default_timeout_microseconds: 2000000 }}
}}
parameters {{ key: "checkpoint_dir" value {{ string_value: "{checkpoint}" }} }}
"""



def scrape(port):
    """{series name with labels: value} of one /metrics scrape."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                pass
    return out


def total(sample, name):
    return sum(v for k, v in sample.items() if k == name or k.startswith(name + "{"))


class Sampler(threading.Thread):
    def __init__(self, port, every_s):
        super().__init__(daemon=True)
        self.port, self.every_s = port, every_s
        self.samples, self.errors = [], 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append(scrape(self.port))
            except OSError:
                self.errors += 1
            self.stop.wait(self.every_s)

    def peak(self, name):
        return max((total(s, name) for s in self.samples), default=0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a BERT checkpoint folder")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--memory-budget-bytes", type=int, default=0,
                    help="the budget; 0: what the server reserves after loading the model "
                         "plus --batch-bytes")
    ap.add_argument("--batch-bytes", type=int, default=160 * 2**20,
                    help="with --memory-budget-bytes 0: room for batches above the load")
    ap.add_argument("--capacity-s", type=float, default=15)
    ap.add_argument("--duration-s", type=float, default=600)
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--sample-s", type=float, default=0.25)
    ap.add_argument("--max-length", type=int, default=256,
                    help="the model's longest sequence (the heavy requests' length)")
    a = ap.parse_args()
    checkpoint = os.path.abspath(a.checkpoint)
    mix = f"16:0.5,128:0.3,{a.max_length}:0.2"
    repo = benchlib.write_repository({"m": CONFIG.format(checkpoint=checkpoint)})
    if a.memory_budget_bytes == 0:  # probe what loading the model reserves
        probe = benchlib.start_infer_server(repo, "--device", a.device)
        m = re.search(r"device memory: budget \d+ bytes, (\d+) reserved", open(probe.log_path).read())
        probe.stop()
        if not m:
            raise SystemExit("the server did not log its reserved memory after loading")
        a.memory_budget_bytes = int(m.group(1)) + a.batch_bytes
        print(f"after loading the server reserves {int(m.group(1)) / 2**20:.1f} MiB")
    print(f"adversarial run on {benchlib.machine()}, device {a.device}, budget "
          f"{a.memory_budget_bytes / 2**20:.0f} MiB, {a.factor:g}x capacity for {a.duration_s:g} s")
    server = benchlib.start_infer_server(repo, "--device", a.device, "--memory-budget-bytes",
                                         str(a.memory_budget_bytes))
    failures = []
    try:
        with open(server.log_path) as f:
            for line in f:
                if "device memory:" in line or "precision" in line:
                    print("server:", line.strip())
        sampler = Sampler(server.metrics_port, a.sample_s)
        sampler.start()
        cap = benchlib.infer_bench(server.address, "m", "--concurrency", 64, "-b", 4,
                                   "--lengths", mix, "--duration-s", a.capacity_s,
                                   "--warmup-s", 2, "--channels", 4,
                                   metrics_port=server.metrics_port)
        capacity = cap["throughput_per_s"]
        results = {}

        def load(name, *args):
            try:
                results[name] = benchlib.infer_bench(server.address, "m", *args,
                                                     metrics_port=server.metrics_port)
            except RuntimeError as e:
                results[name] = e

        rate = a.factor * capacity
        threads = [
            threading.Thread(target=load, args=(
                "open loop", "--rate", f"{rate:.1f}", "--arrivals", "poisson", "-b", 4,
                "--lengths", mix, "--duration-s", a.duration_s, "--warmup-s", 0,
                "--timeout-ms", 10000, "--channels", 4, "--threads", 2)),
            threading.Thread(target=load, args=(
                "heavy", "--concurrency", 8, "-b", 64, "--lengths", a.max_length, "--duration-s",
                a.duration_s, "--warmup-s", 0, "--timeout-ms", 10000)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sampler.stop.set()
        sampler.join()
        last = scrape(server.metrics_port)
    finally:
        code = server.stop()
        shutil.rmtree(repo, ignore_errors=True)

    rows = [["capacity (closed loop, c=64, batch 4)", "-", f"{capacity:.0f}",
             f"{cap['latency_ms']['p50']:.1f}", f"{cap['latency_ms']['p99']:.1f}",
             cap["sent"], sum(cap["codes"].values()), {k: v for k, v in cap["codes"].items()}]]
    for name, r in results.items():
        if isinstance(r, Exception):
            failures.append(f"{name}: {r}")
            continue
        offered = f"{rate:.0f}" if name == "open loop" else f"c=8, batch 64 x {a.max_length}"
        rows.append([name, offered, f"{r['throughput_per_s']:.0f}",
                     f"{r['latency_ms']['p50']:.1f}", f"{r['latency_ms']['p99']:.1f}",
                     r["sent"], sum(r["codes"].values()), r["codes"]])
        if r["sent"] != sum(r["codes"].values()):
            failures.append(f"{name}: {r['sent']} sent, {sum(r['codes'].values())} answered")
    benchlib.table(["load", "offered/s", "ok/s", "p50 ms", "p99 ms", "sent", "answered",
                    "codes"], rows)
    budget = total(last, "infer_device_memory_budget_bytes")
    reserved_peak = sampler.peak("infer_device_memory_reserved_bytes")
    ooms = total(last, "infer_device_memory_ooms_total")
    print(f"\nbudget {budget / 2**20:.1f} MiB; reserved at most {reserved_peak / 2**20:.1f} MiB "
          f"over {len(sampler.samples)} scrapes ({sampler.errors} failed); peak allocated "
          f"{total(last, 'infer_device_memory_peak_allocated_bytes') / 2**20:.1f} MiB; admission's "
          f"in-flight estimate at most "
          f"{sampler.peak('infer_device_memory_batches_in_flight_bytes') / 2**20:.1f} MiB; "
          f"OOMs {ooms:.0f}; allocation retries "
          f"{total(last, 'infer_device_memory_alloc_retries_total'):.0f}; OOM batch splits "
          f"{total(last, 'infer_oom_batch_splits_total'):.0f}; server exit code {code}")
    if a.device.startswith("cuda"):
        gpu_used = sampler.peak("infer_gpu_memory_used_bytes")
        print(f"GPU memory in use (NVML, whole device) at most {gpu_used / 2**20:.0f} MiB")
    print("\nlast scrape:")
    for k in sorted(last):
        if k.startswith(("infer_gpu_", "infer_device_memory_", "infer_rejections_total")):
            print(f"  {k} {last[k]:g}")
    if ooms != 0:
        failures.append(f"{ooms:.0f} allocations ran out of memory")
    if budget <= 0 or reserved_peak > budget:
        failures.append(f"reserved {reserved_peak:.0f} bytes against a budget of {budget:.0f}")
    if code != 0:
        failures.append(f"server exit code {code}")
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("PASSED: no OOM, reserved within the budget, every request answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
