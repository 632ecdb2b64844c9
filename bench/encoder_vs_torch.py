#!/usr/bin/env python3
"""Our BERT encoder vs PyTorch eager on the same weights and shapes.

Runs build/bin/encoder-bench (ours) and transformers.BertModel in PyTorch
eager mode (FP16 on a GPU, FP32 on the CPU, as our encoder computes there)
over the same batch × length grid, both timing one forward pass with mean
pooling and L2 normalisation on device-resident inputs (median of --runs
after a warm-up), and prints the table with the ratio torch_ms / our_ms
(above 1: we are faster).

    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --device cuda:0
    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --device cpu \\
        --batches 1,8 --lengths 16,64

Needs torch and transformers (the GPU host has them; locally a venv).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def torch_times(checkpoint, device, batches, lengths, runs):
    import torch
    import transformers
    gpu = device.startswith("cuda")
    dtype = torch.float16 if gpu else torch.float32
    model = transformers.BertModel.from_pretrained(checkpoint, torch_dtype=dtype,
                                                   add_pooling_layer=False)
    model = model.to(device).eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(1)
    out = {}
    for b in batches:
        for n in lengths:
            if n > model.config.max_position_embeddings:
                continue
            ids = torch.randint(1000, vocab, (b, n), generator=gen).to(device)
            mask = torch.ones_like(ids)
            times = []
            with torch.inference_mode():
                for r in range(runs + 1):
                    if gpu:
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    h = model(input_ids=ids, attention_mask=mask).last_hidden_state
                    m = mask.unsqueeze(-1).to(h.dtype)
                    e = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)
                    if gpu:
                        torch.cuda.synchronize()
                    else:
                        e.sum().item()
                    if r > 0:
                        times.append((time.perf_counter() - t0) * 1000)
            out[(b, n)] = statistics.median(times)
    return out, f"torch {torch.__version__}, {'FP16' if gpu else 'FP32'}, " \
                f"{torch.get_num_threads()} CPU threads"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--lengths", default="16,64,256")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--encoder-bench", default=os.path.join(root, "build", "bin", "encoder-bench"))
    a = p.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    lengths = [int(x) for x in a.lengths.split(",")]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([a.encoder_bench, "--checkpoint", a.checkpoint, "--device", a.device,
                        "--batches", a.batches, "--lengths", a.lengths, "--runs", str(a.runs),
                        "--json", f.name], check=True, stdout=sys.stderr)
        ours_json = json.load(open(f.name))
    ours = {(r["batch"], r["length"]): r["ms"] for r in ours_json["results"]}
    theirs, torch_desc = torch_times(a.checkpoint, a.device, batches, lengths, a.runs)
    print(f"encoder vs PyTorch eager on {ours_json['device']} ({a.device}); "
          f"checkpoint {a.checkpoint}; {torch_desc}")
    print("| batch | length | ours ms | torch ms | ours tokens/s | torch/ours |")
    print("|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for (b, n), ms in sorted(ours.items()):
        t = theirs[(b, n)]
        ratios.append(t / ms)
        print(f"| {b} | {n} | {ms:.3f} | {t:.3f} | {b * n * 1000 / ms:.0f} | {t / ms:.2f} |")
    print(f"geometric mean of torch/ours: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    main()
