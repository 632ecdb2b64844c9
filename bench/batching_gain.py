#!/usr/bin/env python3
"""What does dynamic batching buy? The same model served twice by one
infer-server: with dynamic batching (max_batch_size 32) and without
(max_batch_size 1), each driven by infer-bench at the same concurrency, in
turn, alternating (A B, B A, ...) for --repeats rounds. The model is the
real all-MiniLM-L6-v2 (bert backend) or the small embed_pool demo model.

Answers: throughput ratio (batched / unbatched) and the p99 of each: the
median over the rounds, with the range of the rounds beside it.

  python3 bench/batching_gain.py [--model minilm|embed_pool] [--lengths 16]
      [--precision auto|fp32|bf16] [--duration-s 10] [--repeats 2]
      [--concurrency 32] [--device cpu]
"""

import argparse
import shutil

import benchlib

MODELS = {
    "embed_pool": ("embed_pool (hidden 256 -> 384)", """
backend: "embed_pool"
max_batch_size: {max_batch}
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
parameters {{ key: "hidden_size" value {{ string_value: "256" }} }}
parameters {{ key: "embedding_size" value {{ string_value: "384" }} }}
"""),
    "minilm": ("all-MiniLM-L6-v2 (bert backend, precision {precision})", """
backend: "bert"
precision: "{precision}"
max_batch_size: {max_batch}
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
parameters {{ key: "checkpoint_dir" value {{ string_value: "{checkpoint}" }} }}
parameters {{ key: "max_sequence_length" value {{ string_value: "512" }} }}
"""),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=10)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--lengths", default="16")
    ap.add_argument("--model", choices=sorted(MODELS), default="minilm")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="auto", help="minilm: auto, fp32, bf16 (fp16 on a GPU)")
    a = ap.parse_args()
    title, template = MODELS[a.model]
    title = title.format(precision=a.precision)
    checkpoint = benchlib.minilm_dir() if a.model == "minilm" else ""
    print(f"batching gain on {benchlib.machine()}, device {a.device}")
    print(f"{title}, lengths {a.lengths}, concurrency {a.concurrency}, "
          f"{a.duration_s:g} s per point after 1 s warm-up, {a.repeats} alternating rounds; client "
          f"and server share this machine")
    repo = benchlib.write_repository({
        "batched": template.format(max_batch=32, delay_us=1000, checkpoint=checkpoint,
                                   precision=a.precision),
        "unbatched": template.format(max_batch=1, delay_us=0, checkpoint=checkpoint,
                                     precision=a.precision)})
    server = benchlib.start_infer_server(repo, "--device", a.device)
    try:
        results = benchlib.interleaved(
            lambda model: benchlib.infer_bench(
                server.address, model, "--concurrency", a.concurrency, "--lengths", a.lengths,
                "--duration-s", a.duration_s, "--warmup-s", 1, metrics_port=server.metrics_port),
            ["batched", "unbatched"], a.repeats)
    finally:
        server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    rows = []
    for model, rs in results.items():
        med = lambda key: benchlib.median([key(r) for r in rs])
        rows.append([model, f"{med(lambda r: r['throughput_per_s']):.0f}",
                     f"{med(lambda r: r['latency_ms']['p50']):.2f}",
                     f"{med(lambda r: r['latency_ms']['p99']):.2f}",
                     f"{med(lambda r: r.get('server', {}).get('batch_rows_mean', 0)):.1f}",
                     sum(r["sent"] - r["ok"] for r in rs)])
    benchlib.table(["model", "ok/s (median)", "p50 ms", "p99 ms", "mean batch", "errors"], rows)
    b, u = results["batched"], results["unbatched"]
    tp = benchlib.ratio_spread(b, u, lambda r: r["throughput_per_s"])
    p99 = benchlib.ratio_spread(b, u, lambda r: r["latency_ms"]["p99"])
    print(f"\nthroughput batched / unbatched = {benchlib.spread_text(*tp)}; "
          f"p99 batched / unbatched = {benchlib.spread_text(*p99)}")


if __name__ == "__main__":
    main()
