#!/usr/bin/env python3
"""Our transformer encoder vs PyTorch eager on the same weights, shapes and sentences.

Runs build/bin/encoder-bench (ours) and the checkpoint's transformers model
(AutoModel: BertModel, XLMRobertaModel, MPNetModel, ModernBertModel,
Qwen3Model, ...) in PyTorch eager mode with its default attention (SDPA) in
alternating rounds (ours, torch, ours, torch, ...), both timing the forward
pass with pooling (torch the family's: mean, or the last token for decoders;
encoder-bench mean, which computes every token of every layer as torch does:
with [CLS] or last-token pooling ours would compute the last layer for the
pooled token alone, a gain that --layers' shallow models would overstate)
and L2 normalisation on
device-resident inputs (median of --runs after a warm-up,
per round), and prints the median over the rounds with the rounds' range,
and the ratio torch_ms / our_ms (above 1: we are faster).

--synthetic FAMILY times a random-weight checkpoint of that family's real
widths instead (made here by transformers from a config: xlm-roberta-base,
mpnet-base, modernbert-base, distilbert-base, nomic-embed-text-v1.5,
gte-base-en-v1.5, qwen3-0.6b), with --layers layers (default:
the real depth); fewer layers keep a CPU run short, and both sides run the
same layers.

--torch-compile also times torch.compile of the same model (inductor,
dynamic shapes: one graph for every batch and length, as a server with
varying batches needs) in the same rounds: eager is what most users run,
compile what a user who cares about speed runs. The first pass of each
shape is untimed, so compile time is not counted.

Precision: on the CPU, fp32 (torch in float32) or bf16 (torch with the model
in bfloat16, what a PyTorch user on a CPU with AMX or AVX512_BF16 runs; ours
with BF16 GEMMs); on a GPU, fp16 both.

Two modes:
  grid (default)  batch x length, every token real (no padding either side);
  --mixed N       N sentences with lengths drawn 70% 4-32, 20% 33-128,
                  10% 129-512 tokens, cut in arrival order into batches of
                  --mixed-batch; torch pads each batch to its longest
                  sentence with an attention mask, as Hugging Face does, ours
                  packs it (no padding). Torch also runs the sentences sorted
                  by length before batching, as sentence-transformers'
                  encode() does offline (a server cannot: requests arrive
                  over time).

    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --precision fp32
    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --precision bf16
    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --mixed 512
    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --device cuda:0
    bench/encoder_vs_torch.py --checkpoint model_repository/minilm --device cuda:0 --torch-compile
    bench/encoder_vs_torch.py --synthetic qwen3-0.6b --layers 4

Needs torch and transformers (the GPU host has them; on a CPU machine, a
virtual environment with torch from PyPI).
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time


def cpu_description():
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", "unknown CPU", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    shown = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    return f"{model} ({len(os.sched_getaffinity(0))} cores usable; {' '.join(shown) or 'no AVX2'})"


# Real widths of the families' common checkpoints (transformers config
# fields); --layers overrides the depth.
SYNTHETIC = {
    "xlm-roberta-base": dict(model_type="xlm-roberta", hidden_size=768, num_hidden_layers=12,
                             num_attention_heads=12, intermediate_size=3072,
                             max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                             vocab_size=250002),
    "mpnet-base": dict(model_type="mpnet", hidden_size=768, num_hidden_layers=12,
                       num_attention_heads=12, intermediate_size=3072,
                       max_position_embeddings=514, pad_token_id=1, vocab_size=30527),
    "modernbert-base": dict(model_type="modernbert", hidden_size=768, num_hidden_layers=22,
                            num_attention_heads=12, intermediate_size=1152,
                            max_position_embeddings=8192, local_attention=128,
                            global_attn_every_n_layers=3, vocab_size=50368,
                            pad_token_id=50283),
    "distilbert-base": dict(model_type="distilbert", dim=768, n_layers=6, n_heads=12,
                            hidden_dim=3072, max_position_embeddings=512, vocab_size=30522),
    # transformers' own NomicBertModel and GteModel (the hub's configs name
    # their authors' code; these are the same blocks).
    "nomic-embed-text-v1.5": dict(model_type="nomic_bert", hidden_size=768,
                                  num_hidden_layers=12, num_attention_heads=12,
                                  intermediate_size=3072, max_position_embeddings=2048,
                                  type_vocab_size=2, vocab_size=30528),
    "gte-base-en-v1.5": dict(model_type="gte", hidden_size=768, num_hidden_layers=12,
                             num_attention_heads=12, intermediate_size=3072,
                             max_position_embeddings=8192, type_vocab_size=0, vocab_size=30528,
                             rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}),
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       intermediate_size=3072, max_position_embeddings=40960,
                       vocab_size=151669, tie_word_embeddings=True),
}
DECODERS = ("qwen3", "qwen2", "llama", "mistral")


def make_synthetic(name, layers, out):
    """A random-weight checkpoint of SYNTHETIC[name] in `out` (F32)."""
    import torch
    import transformers
    fields = dict(SYNTHETIC[name])
    model_type = fields.pop("model_type")
    if layers:
        fields["n_layers" if model_type == "distilbert" else "num_hidden_layers"] = layers
    config = transformers.AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config)
    model.save_pretrained(out, safe_serialization=True)
    if model_type in DECODERS:
        os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
        with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
            json.dump({"pooling_mode_lasttoken": True}, f)


def family_pooling(checkpoint, model_type):
    """'mean', 'cls' or 'last': the folder's 1_Pooling, else the family's."""
    try:
        with open(os.path.join(checkpoint, "1_Pooling", "config.json")) as f:
            p = json.load(f)
        if p.get("pooling_mode_lasttoken"):
            return "last"
        if p.get("pooling_mode_cls_token"):
            return "cls"
        return "mean"
    except OSError:
        return "last" if model_type in DECODERS else "mean"


def mixed_batches(n, batch, vocab, max_len, seed):
    """Sentences of random ids with the mixed length distribution, batched."""
    rng = random.Random(seed)
    first = 1000 if vocab > 2000 else 0
    seqs = []
    for _ in range(n):
        u = rng.random()
        lo, hi = (4, 32) if u < 0.7 else (33, 128) if u < 0.9 else (129, 512)
        length = min(rng.randint(lo, hi), max_len)
        seqs.append([rng.randrange(first, vocab) for _ in range(length)])
    return [seqs[i:i + batch] for i in range(0, len(seqs), batch)]


class Torch:
    def __init__(self, checkpoint, device, precision, threads, compile_model=False):
        import torch
        import transformers
        self.torch = torch
        if threads > 0:
            torch.set_num_threads(threads)
        self.gpu = device.startswith("cuda")
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        try:  # BERT-like models: without the unused pooler layer
            model = transformers.AutoModel.from_pretrained(checkpoint, dtype=dtype,
                                                           add_pooling_layer=False)
        except TypeError:
            model = transformers.AutoModel.from_pretrained(checkpoint, dtype=dtype)
        self.model = model.to(device).eval()
        self.compiled = None
        if compile_model:  # one graph for every shape, as a server with varying batches needs
            self.compiled = torch.compile(self.model, dynamic=True)
        self.pooling = family_pooling(checkpoint, model.config.model_type)
        self.device = device
        self.desc = (f"torch {torch.__version__} eager, {precision}, "
                     f"attention '{getattr(model.config, '_attn_implementation', 'eager')}', "
                     f"{torch.get_num_threads()} CPU threads")

    def encode(self, ids, mask, compiled=False):
        torch = self.torch
        model = self.compiled if compiled else self.model
        h = model(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        if self.pooling == "mean":
            m = mask.unsqueeze(-1).float()
            e = (h * m).sum(1) / m.sum(1)
        elif self.pooling == "cls":
            e = h[:, 0]
        else:  # right padding: each row's last real token
            e = h[torch.arange(h.shape[0], device=h.device), mask.sum(1) - 1]
        e = torch.nn.functional.normalize(e, dim=-1)
        if self.gpu:
            torch.cuda.synchronize()
        else:
            e.sum().item()

    def time(self, batches, runs, compiled=False):
        """Median ms of `runs` passes over `batches` (lists of (ids, mask)),
        after one untimed pass (which compiles, for the compiled model)."""
        torch = self.torch
        times = []
        with torch.inference_mode():
            for r in range(runs + 1):
                if self.gpu:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                for ids, mask in batches:
                    self.encode(ids, mask, compiled)
                if r > 0:
                    times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    def padded(self, seqs):
        longest = max(len(s) for s in seqs)
        ids = [s + [0] * (longest - len(s)) for s in seqs]
        mask = [[1] * len(s) + [0] * (longest - len(s)) for s in seqs]
        return (self.torch.tensor(ids, device=self.device),
                self.torch.tensor(mask, device=self.device))


def run_ours(args, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([args.encoder_bench, "--checkpoint", args.checkpoint, "--device",
                        args.device, "--precision", args.precision, "--threads",
                        str(args.threads), "--runs", str(args.runs), "--json", f.name] + extra,
                       check=True, stdout=subprocess.DEVNULL)
        return json.load(open(f.name))


def spread(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", help="a Hugging Face folder (config.json, model.safetensors)")
    p.add_argument("--synthetic", choices=sorted(SYNTHETIC),
                   help="time a random-weight checkpoint of this family's real widths")
    p.add_argument("--layers", type=int, default=0, help="--synthetic: layers (0: real depth)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--precision", default=None,
                   help="fp32 or bf16 on the CPU (default fp32), fp16 on a GPU")
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--lengths", default="16,64,256")
    p.add_argument("--mixed", type=int, default=0,
                   help="mixed-length mode with this many sentences")
    p.add_argument("--mixed-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runs", type=int, default=5, help="timed passes per round (median)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="CPU threads for both (default: the usable cores)")
    p.add_argument("--encoder-bench", default=os.path.join(root, "build", "bin", "encoder-bench"))
    p.add_argument("--torch-compile", action="store_true",
                   help="grid only: also time torch.compile (inductor, dynamic shapes) of the "
                        "same model, in the same rounds")
    p.add_argument("--compare-graphs", action="store_true",
                   help="GPU grid only: also time ours with CUDA graphs off, in the same rounds")
    a = p.parse_args()
    if (a.checkpoint is None) == (a.synthetic is None):
        p.error("give --checkpoint or --synthetic")
    if a.synthetic:
        scratch = tempfile.TemporaryDirectory()
        a.checkpoint = scratch.name
        make_synthetic(a.synthetic, a.layers, a.checkpoint)
    gpu = a.device.startswith("cuda")
    if a.precision is None:
        a.precision = "fp16" if gpu else "fp32"
    torch_side = Torch(a.checkpoint, a.device, a.precision, 0 if gpu else a.threads,
                       a.torch_compile and not a.mixed)
    config = torch_side.model.config
    vocab = config.vocab_size
    max_len = config.max_position_embeddings
    if config.model_type in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        max_len -= config.pad_token_id + 1  # positions start past the padding id
    print(f"encoder vs PyTorch eager on {cpu_description() if not gpu else a.device}; "
          f"checkpoint {a.synthetic or a.checkpoint}"
          f"{f' ({a.layers} layers)' if a.synthetic and a.layers else ''}; {torch_side.desc}, "
          f"{torch_side.pooling} pooling; {a.rounds} alternating rounds, "
          f"median of {a.runs} runs each")

    if a.mixed > 0:
        batches = mixed_batches(a.mixed, a.mixed_batch, vocab, max_len, a.seed)
        tokens = sum(len(s) for b in batches for s in b)
        padded_tokens = sum(len(b) * max(len(s) for s in b) for b in batches)
        tensors = [torch_side.padded(b) for b in batches]
        by_length = sorted((s for b in batches for s in b), key=len)
        sorted_batches = [by_length[i:i + a.mixed_batch]
                          for i in range(0, len(by_length), a.mixed_batch)]
        sorted_tensors = [torch_side.padded(b) for b in sorted_batches]
        sorted_padded = sum(len(b) * max(len(s) for s in b) for b in sorted_batches)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"batches": batches}, f)
            f.flush()
            ours, theirs, theirs_sorted, impl = [], [], [], ""
            for _ in range(a.rounds):
                out = run_ours(a, ["--sequences", f.name])
                ours.append(out["results"][0]["ms"])
                impl = out["implementation"]
                theirs.append(torch_side.time(tensors, a.runs))
                theirs_sorted.append(torch_side.time(sorted_tensors, a.runs))
        ratios = [t / o for t, o in zip(theirs, ours)]
        sorted_ratios = [t / o for t, o in zip(theirs_sorted, ours)]
        print(f"ours: {impl}")
        print(f"{a.mixed} sentences in {len(batches)} batches of {a.mixed_batch}: {tokens} real "
              f"tokens, {padded_tokens} padded to each batch's longest "
              f"(padding efficiency {tokens / padded_tokens:.2f})")
        print(f"sorted by length first (torch only): {sorted_padded} padded tokens "
              f"(padding efficiency {tokens / sorted_padded:.2f})")
        print("| | ours (packed) | torch (padded) | torch, sorted by length |\n|---|---:|---:|---:|")
        print(f"| ms for all batches | {spread(ours)} | {spread(theirs)} | "
              f"{spread(theirs_sorted)} |")
        print(f"| real tokens/s | {tokens * 1000 / statistics.median(ours):.0f} | "
              f"{tokens * 1000 / statistics.median(theirs):.0f} | "
              f"{tokens * 1000 / statistics.median(theirs_sorted):.0f} |")
        print(f"torch/ours: {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f} over the rounds); sorted torch/ours: "
              f"{statistics.median(sorted_ratios):.2f} "
              f"({min(sorted_ratios):.2f}-{max(sorted_ratios):.2f})")
        return

    batch_sizes = [int(x) for x in a.batches.split(",")]
    lengths = [int(x) for x in a.lengths.split(",") if int(x) <= max_len]
    gen = torch_side.torch.Generator().manual_seed(a.seed)
    shapes = [(b, n) for b in batch_sizes for n in lengths]
    tensors = {}
    for b, n in shapes:
        first = 1000 if vocab > 2000 else 0
        ids = torch_side.torch.randint(first, vocab, (b, n), generator=gen).to(a.device)
        tensors[(b, n)] = (ids, torch_side.torch.ones_like(ids))
    ours = {s: [] for s in shapes}
    theirs = {s: [] for s in shapes}
    eager = {s: [] for s in shapes}  # ours with CUDA graphs off (--compare-graphs)
    compiled = {s: [] for s in shapes}  # torch.compile (--torch-compile)
    compare = a.compare_graphs and gpu
    grid = ["--batches", a.batches, "--lengths", ",".join(str(n) for n in lengths)]
    impl = ""
    for _ in range(a.rounds):
        out = run_ours(a, grid)
        impl = out["implementation"]
        for r in out["results"]:
            ours[(r["batch"], r["length"])].append(r["ms"])
        if compare:
            for r in run_ours(a, grid + ["--cuda-graphs", "off"])["results"]:
                eager[(r["batch"], r["length"])].append(r["ms"])
        for s in shapes:
            theirs[s].append(torch_side.time([tensors[s]], a.runs))
            if torch_side.compiled is not None:
                compiled[s].append(torch_side.time([tensors[s]], a.runs, compiled=True))
    print(f"ours: {impl}")
    extra_head = " ours, graphs off ms | graphs off/on |" if compare else ""
    if torch_side.compiled is not None:
        extra_head += " torch.compile ms | compiled/ours |"
    print(f"| batch | length | ours ms | torch ms | ours tokens/s | torch/ours |{extra_head}")
    print("|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if compare else "") +
          ("---:|---:|" if torch_side.compiled is not None else ""))
    medians, compiled_medians = [], []
    for b, n in shapes:
        ratios = [t / o for t, o in zip(theirs[(b, n)], ours[(b, n)])]
        medians.append(statistics.median(ratios))
        extra = ""
        if compare:
            g = [e / o for e, o in zip(eager[(b, n)], ours[(b, n)])]
            extra = (f" {spread(eager[(b, n)])} | {statistics.median(g):.2f} "
                     f"({min(g):.2f}-{max(g):.2f}) |")
        if torch_side.compiled is not None:
            c = [t / o for t, o in zip(compiled[(b, n)], ours[(b, n)])]
            compiled_medians.append(statistics.median(c))
            extra += (f" {spread(compiled[(b, n)])} | {statistics.median(c):.2f} "
                      f"({min(c):.2f}-{max(c):.2f}) |")
        print(f"| {b} | {n} | {spread(ours[(b, n)])} | {spread(theirs[(b, n)])} | "
              f"{b * n * 1000 / statistics.median(ours[(b, n)]):.0f} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |{extra}")
    print(f"geometric mean of torch/ours: {statistics.geometric_mean(medians):.2f}; "
          f"lowest shape: {min(medians):.2f}")
    if compiled_medians:
        print(f"geometric mean of torch.compile/ours: "
              f"{statistics.geometric_mean(compiled_medians):.2f}; lowest shape: "
              f"{min(compiled_medians):.2f}")


if __name__ == "__main__":
    sys.exit(main())
