#!/usr/bin/env python3
"""Does infer-bench measure what Triton's own tool measures? One infer-server
(embed_pool on the CPU), driven in turn by Triton's perf_analyzer and by
infer-bench at the same concurrency, with the same payload (INT64 input_ids
[1, length], the same token ids), closed loop, alternating (A B, B A, ...)
for --repeats rounds. perf_analyzer measures windows of --duration-s until
three in a row agree and reports over those three merged, so infer-bench
measures one window three times as long: both figures rest on as many
requests. Also shows that
perf_analyzer users can point their tooling at this server as is.

Answers: throughput and p50 / p99 of each (medians over the rounds) and their
ratios (infer-bench / perf_analyzer). The tools agree on a figure when the
ratio of the medians is within the stated tolerance (TOLERANCE), or when the
two tools' per-round ranges overlap, i.e. they differ by no more than each
differs from itself between rounds (the p99 of a 2 ms request on a shared
2-core machine moves by half between rounds of one tool). Exits 1 when they
disagree.

  scripts/get-perf-analyzer.sh     # once: fetches perf_analyzer into .perf_analyzer/
  python3 bench/perf_analyzer_crosscheck.py [--concurrency 1,8] [--duration-s 5] [--repeats 3]
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import tempfile

import benchlib

MODEL = """
backend: "embed_pool"
max_batch_size: 32
dynamic_batching { max_queue_delay_microseconds: 500 }
"""
# Stated tolerances of infer-bench / perf_analyzer, on the medians of the
# rounds. The tail gets more room: the two tools run one after the other on a
# shared machine, and a p99 of a few thousand samples moves by more than the
# median between runs.
TOLERANCE = {"throughput": 0.15, "p50": 0.15, "p99": 0.30}


def ids(length):
    # The ids infer-bench sends (bench/loadgen/workload.cc), batch row 0.
    return [101 if t == 0 else 102 if t == length - 1 else 1000 + (t * 7) % 1000
            for t in range(length)]


def run_perf_analyzer(pa, address, concurrency, length, duration_s):
    work = tempfile.mkdtemp(prefix="infer_pa_")
    data = os.path.join(work, "data.json")
    with open(data, "w") as f:
        json.dump({"data": [{"input_ids": {"content": ids(length), "shape": [length]}}]}, f)
    # As a Triton user would: ModelConfig says the model batches, so -b 1 and
    # the shape without the batch dimension make requests of [1, length].
    out = os.path.join(work, "out.csv")
    argv = [pa, "-m", "embed_pool", "-u", address, "-i", "grpc", "-b", "1",
            "--shape", f"input_ids:{length}", "--input-data", data,
            "--concurrency-range", str(concurrency),
            "--measurement-interval", str(int(duration_s * 1000)),
            "--stability-percentage", "20", "--max-trials", "5", "-f", out]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed:\n{r.stdout}\n{r.stderr}")
    with open(out) as f:
        row = next(csv.DictReader(f))
    shutil.rmtree(work, ignore_errors=True)
    return {"throughput": float(row["Inferences/Second"]),
            "p50": float(row["p50 latency"]) / 1000.0,
            "p99": float(row["p99 latency"]) / 1000.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--duration-s", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--perf-analyzer",
                    default=os.path.join(benchlib.ROOT, ".perf_analyzer", "perf_analyzer"))
    a = ap.parse_args()
    if not os.path.exists(a.perf_analyzer):
        raise SystemExit(f"{a.perf_analyzer} not found: run scripts/get-perf-analyzer.sh")
    print(f"perf_analyzer cross-check on {benchlib.machine()}")
    print(f"embed_pool on the CPU, INT64 [1, {a.length}], closed loop; perf_analyzer: "
          f"{a.duration_s:g} s windows until three agree within 20%, reported over those three; "
          f"infer-bench: one {3 * a.duration_s:g} s window; {a.repeats} alternating rounds; "
          f"client and server share this machine")
    repo = benchlib.write_repository({"embed_pool": MODEL})
    server = benchlib.start_infer_server(repo, "--device", "cpu")
    rows, verdicts, all_ok = [], [], True
    try:
        for c in [int(x) for x in a.concurrency.split(",")]:
            def measure(tool):
                if tool == "perf_analyzer":
                    return run_perf_analyzer(a.perf_analyzer, server.address, c, a.length,
                                             a.duration_s)
                ib = benchlib.infer_bench(server.address, "embed_pool", "--concurrency", c,
                                          "--lengths", a.length, "--duration-s",
                                          3 * a.duration_s, "--warmup-s", 1)
                return {"throughput": ib["throughput_per_s"], "p50": ib["latency_ms"]["p50"],
                        "p99": ib["latency_ms"]["p99"]}
            rounds = benchlib.interleaved(measure, ["perf_analyzer", "infer-bench"], a.repeats)
            pa, ours = ({k: benchlib.median([r[k] for r in rounds[tool]]) for k in TOLERANCE}
                        for tool in ("perf_analyzer", "infer-bench"))
            for tool, r in (("perf_analyzer", pa), ("infer-bench", ours)):
                rows.append([tool, c, f"{r['throughput']:.1f}", f"{r['p50']:.3f}", f"{r['p99']:.3f}"])
            ratios = {k: ours[k] / pa[k] for k in TOLERANCE}
            # Each tool's own spread over the rounds: when the two tools'
            # ranges overlap, their difference is no larger than either
            # tool's disagreement with itself on this machine.
            spread = {tool: {k: (min(r[k] for r in rounds[tool]), max(r[k] for r in rounds[tool]))
                             for k in TOLERANCE} for tool in rounds}
            overlap = {k: spread["infer-bench"][k][0] <= spread["perf_analyzer"][k][1] and
                          spread["perf_analyzer"][k][0] <= spread["infer-bench"][k][1]
                       for k in TOLERANCE}
            outside = [k for k, r in ratios.items() if abs(r - 1) > TOLERANCE[k] and not overlap[k]]
            all_ok = all_ok and not outside
            for tool in ("perf_analyzer", "infer-bench"):
                verdicts.append(f"  rounds, {tool}: " + ", ".join(
                    f"{k} {lo:.3f}–{hi:.3f}" for k, (lo, hi) in spread[tool].items()))
            verdicts.append(f"concurrency {c}: infer-bench / perf_analyzer " +
                            ", ".join(f"{k} {r:.2f}" for k, r in ratios.items()) + " -> " +
                            ("agree" if not outside else "DISAGREE on " + ", ".join(outside)))
    finally:
        server.stop()
        shutil.rmtree(repo, ignore_errors=True)
    benchlib.table(["tool", "concurrency", "ok/s (median)", "p50 ms", "p99 ms"], rows)
    print()
    for v in verdicts:
        print(v)
    print("agreement: the medians within " +
          ", ".join(f"{k} ±{t:.0%}" for k, t in TOLERANCE.items()) +
          ", or the two tools' per-round ranges overlap (their difference is within the spread "
          "of each tool against itself)")
    if not all_ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
