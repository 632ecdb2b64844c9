#!/usr/bin/env python3
"""What does the server itself cost per request? infer-server serving the
`identity` model (input ids copied to the output, no device work: decoding,
validation, queueing, dynamic batching, pipeline hand-offs, encoding) against
echo-server, a bare gRPC server of the same service and payload that answers
at once. Both run side by side; infer-bench drives them in turn, closed loop,
same payload, at concurrency 1 and 64, alternating (A B, B A, ...) for
--repeats rounds so that drift on a shared machine falls on both alike.

Answers: throughput ratio (ours / bare gRPC), the difference of p50, and
the server's CPU time per answered request (ours - bare): the median over
the rounds, with the range of the rounds beside it. On a machine where the
client and the servers share a few cores, throughput swings from round to
round with whatever else runs; CPU time per request is the steadier measure
of what the server itself costs.

  python3 bench/frontend_overhead.py [--duration-s 5] [--repeats 3] [--length 128]
                                    [--baseline-binary OLD/infer-server]
                                    [--server-cpus 0 --client-cpus 1]

--server-cpus / --client-cpus pin every server to some CPUs and the load
generator to others (taskset), so that the throughput ratio measures the
servers rather than how the scheduler shares cores between them and the
client. On a 2-core machine: --server-cpus 0 --client-cpus 1.

--baseline-binary adds another build of infer-server (e.g. the previous
commit's) to the same alternating rounds, so that a change is measured
against what it replaces on the same machine at the same time.
"""

import argparse
import shutil

import benchlib

IDENTITY = """
backend: "identity"
max_batch_size: 64
dynamic_batching { max_queue_delay_microseconds: 0 }
"""


def measure(server, concurrency, a):
    """One infer-bench run; adds the server's CPU microseconds per request
    over the whole run (warm-up included, at the same load)."""
    cpu0 = server.cpu_seconds()
    r = benchlib.infer_bench(server.address, "identity", "--concurrency", concurrency,
                             "--lengths", a.length, "--duration-s", a.duration_s, "--warmup-s", 1,
                             cpus=a.client_cpus)
    requests = r["ok"] * (a.duration_s + 1) / a.duration_s
    r["server_cpu_us"] = (server.cpu_seconds() - cpu0) / max(requests, 1) * 1e6
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--length", type=int, default=128, help="tokens per request (INT64 ids)")
    ap.add_argument("--concurrency", default="1,64")
    ap.add_argument("--baseline-binary", help="another infer-server build to measure alongside")
    ap.add_argument("--server-cpus", help="taskset CPU list for the servers (e.g. 0)")
    ap.add_argument("--client-cpus", help="taskset CPU list for the load generator (e.g. 1)")
    a = ap.parse_args()
    levels = [int(c) for c in a.concurrency.split(",")]
    print(f"front-end overhead on {benchlib.machine()}")
    print(f"payload: INT64 [1, {a.length}] in and out ({8 * a.length} bytes each way); "
          f"{a.duration_s:g} s per point after 1 s warm-up, {a.repeats} alternating rounds; "
          + (f"servers on CPUs {a.server_cpus}, client on CPUs {a.client_cpus}"
           if a.server_cpus or a.client_cpus else "client and server share this machine"))
    repo = benchlib.write_repository({"identity": IDENTITY})
    servers = {}
    results = {}
    try:
        servers["infer-server"] = benchlib.start_infer_server(repo, "--device", "cpu",
                                                              cpus=a.server_cpus)
        servers["echo-server"] = benchlib.start_echo_server(cpus=a.server_cpus)
        if a.baseline_binary:
            servers["baseline"] = benchlib.start_infer_server(repo, "--device", "cpu",
                                                              binary=a.baseline_binary,
                                                              cpus=a.server_cpus)
        names = list(servers)
        for c in levels:
            results[c] = benchlib.interleaved(lambda name: measure(servers[name], c, a), names,
                                              a.repeats)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    rows = []
    for c in levels:
        for name in names:
            rs = results[c][name]
            rows.append([name, c, f"{benchlib.median([r['throughput_per_s'] for r in rs]):.0f}",
                         f"{benchlib.median([r['latency_ms']['p50'] for r in rs]):.3f}",
                         f"{benchlib.median([r['latency_ms']['p99'] for r in rs]):.3f}",
                         f"{benchlib.median([r['server_cpu_us'] for r in rs]):.1f}",
                         sum(r["sent"] - r["ok"] for r in rs)])
    benchlib.table(["server", "concurrency", "ok/s (median)", "p50 ms", "p99 ms", "server CPU us/req",
                   "errors"], rows)
    print()
    for c in levels:
        ours, bare = results[c]["infer-server"], results[c]["echo-server"]
        ratio = benchlib.ratio_spread(ours, bare, lambda r: r["throughput_per_s"])
        diffs = [x["latency_ms"]["p50"] - y["latency_ms"]["p50"] for x, y in zip(ours, bare)]
        print(f"concurrency {c}: throughput ours / bare gRPC = {benchlib.spread_text(*ratio)}; "
              f"p50 ours - bare = "
              f"{benchlib.spread_text(benchlib.median(diffs), min(diffs), max(diffs), '{:+.3f}')} ms")
        cpu = [x["server_cpu_us"] - y["server_cpu_us"] for x, y in zip(ours, bare)]
        print(f"concurrency {c}: server CPU per request ours - bare = "
              f"{benchlib.spread_text(benchlib.median(cpu), min(cpu), max(cpu), '{:+.1f}')} us")
        if "baseline" in results[c]:
            base = results[c]["baseline"]
            print(f"concurrency {c}: baseline / bare gRPC = "
                  f"{benchlib.spread_text(*benchlib.ratio_spread(base, bare, lambda r: r['throughput_per_s']))}"
                  f"; ours / baseline = "
                  f"{benchlib.spread_text(*benchlib.ratio_spread(ours, base, lambda r: r['throughput_per_s']))}")
            cpu = [x["server_cpu_us"] - y["server_cpu_us"] for x, y in zip(ours, base)]
            print(f"concurrency {c}: server CPU per request ours - baseline = "
                  f"{benchlib.spread_text(benchlib.median(cpu), min(cpu), max(cpu), '{:+.1f}')} us")


if __name__ == "__main__":
    main()
