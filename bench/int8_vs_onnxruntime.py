#!/usr/bin/env python3
"""Our CPU encoder in INT8 against our FP32, and against ONNX Runtime's INT8.

Four contestants on the same checkpoint, shapes and threads, timed in
alternating rounds (the order reversed every other round, so that drift on a
shared machine falls on all alike):

  ours fp32   build/bin/encoder-bench --precision fp32
  ours int8   build/bin/encoder-bench --precision int8 (s8 weights per
              channel, u8 activations per token, models/quantize.h)
  ort fp32    the checkpoint exported to ONNX by torch.onnx (transformers'
              AutoModel, opset 17), ONNX Runtime's CPU provider with every
              graph optimisation
  ort int8    that model through ONNX Runtime's pre-processing and
              onnxruntime.quantization.quantize_dynamic with s8 weights, its
              documented dynamic quantization (u8 activations per tensor,
              computed per batch)

Grid: batch x length, random token ids, every token real. Each contestant
times the forward pass (ours with mean pooling, which costs about nothing
beside it) as the median of --runs after a warm-up, per round; the table
gives the median over rounds, and the geometric mean over the grid of each
ratio. ONNX Runtime runs with intra_op_num_threads = --threads and one
inter-op thread, ours with --threads compute threads; each measurement is
a process of its own, so no contestant's idle threads spin beside another.

The ONNX export and the quantization run once per checkpoint into
--work (default a temporary folder). Needs torch, transformers, onnx and
onnxruntime in the Python that runs it (a venv outside the README's
commands):

    python3 -m venv /tmp/ort && /tmp/ort/bin/pip install torch transformers onnx onnxruntime
    /tmp/ort/bin/python bench/int8_vs_onnxruntime.py        # all-MiniLM-L6-v2 from .venv
    /tmp/ort/bin/python bench/int8_vs_onnxruntime.py --checkpoint DIR
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def export_onnx(checkpoint, work):
    """checkpoint -> work/model.onnx (FP32) and work/model.int8.onnx. Runs in
    `work`: the quantization tools leave temporary files in the current
    folder."""
    here = os.getcwd()
    os.chdir(work)
    try:
        return export_onnx_here(checkpoint, work)
    finally:
        os.chdir(here)


def export_onnx_here(checkpoint, work):
    fp32 = os.path.join(work, "model.onnx")
    int8 = os.path.join(work, "model.int8.onnx")
    if not os.path.exists(fp32):
        import torch
        from transformers import AutoModel
        model = AutoModel.from_pretrained(checkpoint, dtype=torch.float32).eval()

        class LastHiddenState(torch.nn.Module):  # keyword arguments in, one tensor out
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.model(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state

        ids = torch.ones((2, 8), dtype=torch.int64)
        axes = {0: "batch", 1: "length"}
        torch.onnx.export(LastHiddenState(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), fp32,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                        "token_type_ids": axes, "last_hidden_state": axes},
                          opset_version=17, dynamo=False)
    if not os.path.exists(int8):
        # ONNX Runtime's recommended order: its pre-processing (shape
        # inference and graph optimisation), then dynamic quantization.
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
        pre = os.path.join(work, "model.pre.onnx")
        quant_pre_process(fp32, pre, skip_symbolic_shape=True)
        quantize_dynamic(pre, int8, weight_type=QuantType.QInt8)
    return fp32, int8


def ort_session(path, threads):
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def time_ort(session, batches, lengths, runs, vocab, seed=1):
    """{(batch, length): ms}, median of `runs` after one warm-up."""
    rng = np.random.default_rng(seed)
    names = {i.name for i in session.get_inputs()}
    out = {}
    for b in batches:
        for n in lengths:
            feed = {"input_ids": rng.integers(1000, vocab, size=(b, n), dtype=np.int64),
                    "attention_mask": np.ones((b, n), dtype=np.int64),
                    "token_type_ids": np.zeros((b, n), dtype=np.int64)}
            feed = {k: v for k, v in feed.items() if k in names}
            session.run(None, feed)
            ms = []
            for _ in range(runs):
                t = time.perf_counter()
                session.run(None, feed)
                ms.append((time.perf_counter() - t) * 1e3)
            out[(b, n)] = benchlib.median(ms)
    return out


def time_ours(args, precision):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([args.encoder_bench, "--checkpoint", args.checkpoint, "--precision",
                        precision, "--threads", str(args.threads), "--runs", str(args.runs),
                        "--batches", ",".join(map(str, args.batches)),
                        "--lengths", ",".join(map(str, args.lengths)), "--json", f.name],
                       check=True, stdout=subprocess.DEVNULL)
        result = json.load(open(f.name))
    return {(r["batch"], r["length"]): r["ms"] for r in result["results"]}, result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", help="Hugging Face folder, BERT family (default: .venv's "
                   "all-MiniLM-L6-v2)")
    p.add_argument("--encoder-bench", default=os.path.join(benchlib.BIN, "encoder-bench"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--work", help="folder for the ONNX files (kept; default: temporary)")
    p.add_argument("--ort-model", help=argparse.SUPPRESS)  # one ONNX Runtime measurement
    args = p.parse_args()
    # The export runs in --work: a relative folder must not be read from there.
    args.checkpoint = os.path.abspath(args.checkpoint)
    if args.ort_model:
        # A process of its own, so that ONNX Runtime's threads (which spin
        # a while after each run) are gone while encoder-bench runs.
        vocab = json.load(open(os.path.join(args.checkpoint, "config.json")))["vocab_size"]
        times = time_ort(ort_session(args.ort_model, args.threads), args.batches, args.lengths,
                         args.runs, vocab)
        print(json.dumps([[b, n, ms] for (b, n), ms in times.items()]))
        return
    args.checkpoint = args.checkpoint or benchlib.minilm_dir()

    work = args.work or tempfile.mkdtemp(prefix="int8-ort-")
    os.makedirs(work, exist_ok=True)
    fp32_path, int8_path = export_onnx(args.checkpoint, work)
    models = {"ort fp32": fp32_path, "ort int8": int8_path}
    implementation = {}

    def measure(name):
        if name.startswith("ort"):
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--checkpoint", args.checkpoint,
                 "--ort-model", models[name], "--threads", str(args.threads), "--runs",
                 str(args.runs), "--batches", *map(str, args.batches), "--lengths",
                 *map(str, args.lengths)], check=True, capture_output=True, text=True).stdout
            return {(b, n): ms for b, n, ms in json.loads(out.strip().splitlines()[-1])}
        times, result = time_ours(args, name.split()[1])
        implementation[name] = result["implementation"]
        return times

    names = ["ours fp32", "ours int8", "ort fp32", "ort int8"]
    rounds = benchlib.interleaved(measure, names, args.rounds)
    print(benchlib.machine())
    for name in names[:2]:
        print(f"{name}: {implementation[name]}")
    import onnxruntime
    print(f"onnxruntime {onnxruntime.__version__}, {args.threads} intra-op threads; "
          f"{args.rounds} rounds x {args.runs} runs, median ms")
    ms = {n: {k: benchlib.median([r[k] for r in rounds[n]]) for k in rounds[n][0]}
          for n in names}
    keys = sorted(ms["ours fp32"])
    rows, logs = [], {"int8/fp32": [], "int8/ort int8": [], "ort int8/ort fp32": []}
    for k in keys:
        a, b = ms["ours fp32"][k] / ms["ours int8"][k], ms["ort int8"][k] / ms["ours int8"][k]
        c = ms["ort fp32"][k] / ms["ort int8"][k]
        logs["int8/fp32"].append(math.log(a))
        logs["int8/ort int8"].append(math.log(b))
        logs["ort int8/ort fp32"].append(math.log(c))
        rows.append([k[0], k[1]] + [f"{ms[n][k]:.2f}" for n in names] +
                    [f"{a:.2f}x", f"{b:.2f}x", f"{c:.2f}x"])
    benchlib.table(["batch", "length"] + names +
                   ["ours int8 vs fp32", "ours int8 vs ort int8", "ort int8 vs fp32"], rows)
    for label, xs in logs.items():
        print(f"geometric mean, {label}: {math.exp(sum(xs) / len(xs)):.2f}x")


if __name__ == "__main__":
    main()
