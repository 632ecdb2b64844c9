#!/usr/bin/env python3
"""Reference fixtures for the families whose reference is their authors' own
modelling code, which transformers runs only as hub "remote code":
NomicBERT (model_type nomic_bert; nomic-ai/contrastors,
src/contrastors/models/huggingface/modeling_hf_nomic_bert.py) and GTE's
"new" architecture (Alibaba-NLP/new-impl, modeling.py).

  python3 models/tools/make_remote_code_fixtures.py [--out tests/fixtures/families]
                                                    [--families nomic_bert,new] [--head-dim 32]
                                                    [--classifiers tests/fixtures/classifiers]

The reference here is an independent transcription of that code's forward
pass into NumPy, in float64 (the rotary tables in float32, as the code
builds them), written from the code's published source and not from this
project's encoder. What each model computes, step by step:

NomicBERT (NomicBertModel, post-norm, swiglu):
  x = LayerNorm_emb_ln(word[ids] + token_type[types])
  per block: qkv = x Wqkv^T, split as (three, heads, head_dim); rotary
  positions on q and k (halves rotated, inv_freq = 1 / base^(2j / head_dim),
  float32 tables); softmax(q k^T / sqrt(head_dim)) v; out_proj;
  x = norm1(x + attn); x = norm2(x + fc2(fc11(x) * silu(fc12(x)))).
  The MLP width is n_inner rounded up to a multiple of 256.

GTE "new" (NewModel, post-norm, GeGLU, fixed NTK rotary scaling):
  x = LayerNorm(word[ids] (+ token_type[types]))
  per layer: q | k | v = qkv_proj(x); rotary positions with
  inv_freq = 1 / (base * f)^(2j / d) / f^(2 / d) (rope_scaling ntk, factor
  f), at every length; softmax(q k^T / sqrt(d)) v; o_proj;
  x = attn_ln(x + attn); up | gate = up_gate_proj(x) (no bias);
  x = mlp_ln(x + down_proj(gelu(gate) * up)).
  The sequence classifier (NewForSequenceClassification, "new." prefix):
  logits = classifier(tanh(pooler.dense(x[0]))).

The weights are random (normal, std 0.2; biases and norms perturbed so that
each is exercised), saved F32 under the checkpoints' own tensor names with a
config.json as the published models write it. Folders, inputs and files are
those of make_family_fixtures.py (reference.json, reference.safetensors with
hidden_i and embedding_i; classifiers: logits_i).

Needs numpy, safetensors and tokenizers (pip install numpy safetensors
tokenizers); run outside the README's commands. What it writes is committed.

  python3 models/tools/make_remote_code_fixtures.py --check-original NOMIC_DIR GTE_DIR

runs the authors' code itself on the committed fixtures (in a venv that also
has torch, transformers and einops) and prints its largest difference from
the references: NOMIC_DIR holds modeling_hf_nomic_bert.py and
configuration_hf_nomic_bert.py (contrastors' src/contrastors/models/
huggingface), GTE_DIR modeling.py and configuration.py (new-impl). Nothing
of that code is kept here. With torch 2.15 and transformers 5.24 it agreed
within 1.3e-5 (hidden states and logits, FP32). transformers 5 no longer
has get_extended_attention_mask, which both call; the check supplies it.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

from fixture_common import (HERE, PAIRS, TEXTS, bert_pair_tokenizer, long_text, unigram_tokenizer,
                            wordpiece_tokenizer, write_sentence_transformers_files)

STD = 0.2


class Weights:
    """Random F32 weights by name, drawn in the order asked."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors = {}

    def normal(self, name, shape, std=STD, mean=0.0):
        self.tensors[name] = (mean + std * self.rng.standard_normal(shape)).astype(np.float32)
        return self.tensors[name].astype(np.float64)

    def linear(self, name, out, inp, bias):
        w = self.normal(name + ".weight", (out, inp))
        b = self.normal(name + ".bias", (out,), std=0.1) if bias else np.zeros(out)
        return lambda x: x @ w.T + b

    def layer_norm(self, name, size, eps):
        g = self.normal(name + ".weight", (size,), std=0.1, mean=1.0)
        b = self.normal(name + ".bias", (size,), std=0.1)

        def norm(x):
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            return (x - mu) / np.sqrt(var + eps) * g + b
        return norm


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def rotary_tables(inv_freq, n):
    """cos and sin [n, head_dim] as the code builds them: float32 positions
    times float32 inverse frequencies, each half repeated."""
    t = np.arange(n, dtype=np.float32)
    freqs = np.outer(t, inv_freq.astype(np.float32)).astype(np.float32)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb).astype(np.float64), np.sin(emb).astype(np.float64)


def rotate(x, cos, sin):
    """x [n, heads, d]: x * cos + rotate_half(x) * sin."""
    d = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., d:], x[..., :d]], axis=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def attention(q, k, v):
    """Bidirectional attention of one sequence, q, k, v [n, heads, d]."""
    scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    scores -= scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", p, v).reshape(q.shape[0], -1)


def nomic_bert(config, seed):
    """NomicBertModel's forward pass with random weights: (tensors, forward)."""
    w = Weights(seed)
    h, heads, n_layer = config["n_embd"], config["n_head"], config["n_layer"]
    d = h // heads
    inter = (config["n_inner"] + 255) // 256 * 256
    eps = config["layer_norm_epsilon"]
    word = w.normal("embeddings.word_embeddings.weight", (config["vocab_size"], h))
    types = w.normal("embeddings.token_type_embeddings.weight", (config["type_vocab_size"], h))
    emb_ln = w.layer_norm("emb_ln", h, eps)
    layers = []
    for i in range(n_layer):
        p = f"encoder.layers.{i}."
        layers.append(dict(
            wqkv=w.linear(p + "attn.Wqkv", 3 * h, h, config["qkv_proj_bias"]),
            out=w.linear(p + "attn.out_proj", h, h, config["qkv_proj_bias"]),
            norm1=w.layer_norm(p + "norm1", h, eps),
            fc11=w.linear(p + "mlp.fc11", inter, h, config["mlp_fc1_bias"]),
            fc12=w.linear(p + "mlp.fc12", inter, h, config["mlp_fc1_bias"]),
            fc2=w.linear(p + "mlp.fc2", h, inter, config["mlp_fc2_bias"]),
            norm2=w.layer_norm(p + "norm2", h, eps)))
    base = config["rotary_emb_base"]
    inv_freq = (1.0 / (np.float32(base) ** (np.arange(0, d, 2, dtype=np.float32) / np.float32(d))))

    def forward(ids, type_ids):
        n = len(ids)
        x = emb_ln(word[ids] + types[type_ids if type_ids is not None else [0] * n])
        cos, sin = rotary_tables(inv_freq, n)
        for l in layers:
            qkv = l["wqkv"](x).reshape(n, 3, heads, d)
            q, k, v = rotate(qkv[:, 0], cos, sin), rotate(qkv[:, 1], cos, sin), qkv[:, 2]
            x = l["norm1"](x + l["out"](attention(q, k, v)))
            x = l["norm2"](x + l["fc2"](l["fc11"](x) * silu(l["fc12"](x))))
        return x
    return w.tensors, forward


def gte(config, seed, classifier=False):
    """NewModel's forward pass (and NewForSequenceClassification's logits
    when `classifier`): (tensors, forward[, classify])."""
    w = Weights(seed)
    h, heads = config["hidden_size"], config["num_attention_heads"]
    d, inter, eps = h // heads, config["intermediate_size"], config["layer_norm_eps"]
    pre = "new." if classifier else ""
    word = w.normal(pre + "embeddings.word_embeddings.weight", (config["vocab_size"], h))
    types = None
    if config["type_vocab_size"] > 0:
        types = w.normal(pre + "embeddings.token_type_embeddings.weight",
                         (config["type_vocab_size"], h))
    emb_ln = w.layer_norm(pre + "embeddings.LayerNorm", h, eps)
    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"{pre}encoder.layer.{i}."
        layers.append(dict(
            qkv=w.linear(p + "attention.qkv_proj", 3 * h, h, True),
            o=w.linear(p + "attention.o_proj", h, h, True),
            attn_ln=w.layer_norm(p + "attn_ln", h, eps),
            up_gate=w.linear(p + "mlp.up_gate_proj", 2 * inter, h, False),
            down=w.linear(p + "mlp.down_proj", h, inter, True),
            mlp_ln=w.layer_norm(p + "mlp_ln", h, eps)))
    base, f = config["rope_theta"], config["rope_scaling"]["factor"]
    exponent = np.arange(0, d, 2, dtype=np.float32) / np.float32(d)
    inv_freq = (1.0 / (np.float32(base * f) ** exponent)).astype(np.float32)
    inv_freq = (inv_freq / np.float32(f ** (2 / d))).astype(np.float32)

    def forward(ids, type_ids):
        n = len(ids)
        x = word[ids]
        if types is not None:
            x = x + types[type_ids if type_ids is not None else [0] * n]
        x = emb_ln(x)
        cos, sin = rotary_tables(inv_freq, n)
        for l in layers:
            q, k, v = np.split(l["qkv"](x), 3, axis=-1)
            q = rotate(q.reshape(n, heads, d), cos, sin)
            k = rotate(k.reshape(n, heads, d), cos, sin)
            x = l["attn_ln"](x + l["o"](attention(q, k, v.reshape(n, heads, d))))
            up, gate = np.split(l["up_gate"](x), 2, axis=-1)
            x = l["mlp_ln"](x + l["down"](gelu(gate) * up))
        return x
    if not classifier:
        return w.tensors, forward
    dense = w.linear("new.pooler.dense", h, h, True)
    out = w.linear("classifier", config["num_labels"], h, True)
    return w.tensors, forward, lambda ids, t: out(np.tanh(dense(forward(ids, t)[0])))


def families(head_dim=None):
    """name -> (config, tokenizer, weights and forward, pooling, max tokens)."""
    hidden, heads = 64, (64 // head_dim if head_dim else 4)

    def nomic():
        tok, ids = bert_pair_tokenizer()
        config = {"architectures": ["NomicBertModel"], "model_type": "nomic_bert",
                  "vocab_size": tok.get_vocab_size(), "pad_vocab_size_multiple": 8,
                  "n_embd": hidden, "n_layer": 2, "n_head": heads, "n_inner": 100,
                  "n_positions": 64, "max_trained_positions": 2048, "type_vocab_size": 2,
                  "pad_token_id": ids["pad"], "layer_norm_epsilon": 1e-12,
                  "activation_function": "swiglu", "prenorm": False, "causal": False,
                  "rotary_emb_fraction": 1.0, "rotary_emb_base": 1000,
                  "rotary_emb_interleaved": False, "rotary_emb_scale_base": None,
                  "rotary_scaling_factor": None, "qkv_proj_bias": False,
                  "mlp_fc1_bias": False, "mlp_fc2_bias": True,
                  # As the published configs: the code passes attn_pdrop to
                  # scaled_dot_product_attention in eval mode too.
                  "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}
        m = config["pad_vocab_size_multiple"]
        config["vocab_size"] = (config["vocab_size"] + m - 1) // m * m
        return config, tok, nomic_bert, "mean", 64

    def new():
        tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"],
                                       "[CLS]", "[SEP]")
        config = {"architectures": ["NewModel"], "model_type": "new",
                  "vocab_size": tok.get_vocab_size(), "hidden_size": hidden,
                  "num_hidden_layers": 2, "num_attention_heads": heads,
                  "intermediate_size": 128, "hidden_act": "gelu",
                  "max_position_embeddings": 64, "type_vocab_size": 0,
                  "layer_norm_type": "layer_norm", "layer_norm_eps": 1e-12,
                  "position_embedding_type": "rope", "rope_theta": 500000,
                  "rope_scaling": {"factor": 2.0, "type": "ntk"}, "pack_qkv": True,
                  "unpad_inputs": False, "use_memory_efficient_attention": False,
                  "logn_attention_scale": False, "logn_attention_clip1": False,
                  "pad_token_id": ids["pad"]}
        return config, tok, gte, "cls", 64

    return {"nomic_bert": nomic, "new": new}


def write_folder(folder, config, tensors, tok, max_tokens):
    from safetensors.numpy import save_file
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"model_max_length": max_tokens}, f, indent=1)


def write_family(out, name, make, seed=0):
    from safetensors.numpy import save_file
    config, tok, model, pooling, max_tokens = make()
    tensors, forward = model(config, seed)
    folder = os.path.join(out, name)
    write_folder(folder, config, tensors, tok, max_tokens)
    hidden = config.get("n_embd", config.get("hidden_size"))
    write_sentence_transformers_files(folder, hidden, pooling, max_tokens)
    inputs = [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS]
    inputs.append({"text": None, "ids": long_text(tok, max_tokens)[1],
                   "note": f"the longest: {max_tokens} tokens"})
    inputs.append({"text": None, "ids": inputs[0]["ids"][:1], "note": "a single token"})
    if config.get("type_vocab_size", 0) > 1:
        for q, p in PAIRS:
            e = tok.encode(q, p)
            inputs.append({"text": None, "pair": [q, p], "ids": e.ids, "types": e.type_ids})
    results = {}
    for i, item in enumerate(inputs):
        h = forward(np.array(item["ids"]), item.get("types"))
        pooled = h.mean(0) if pooling == "mean" else h[0]
        results[f"hidden_{i}"] = h.astype(np.float32)
        results[f"embedding_{i}"] = (pooled / np.linalg.norm(pooled)).astype(np.float32)
    save_file(results, os.path.join(folder, "reference.safetensors"))
    with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"family": name, "pooling": pooling, "dtype": "float32",
                   "reference": "NumPy transcription (models/tools/make_remote_code_fixtures.py)",
                   "numpy": np.__version__, "inputs": inputs}, f, ensure_ascii=False, indent=1)
    print(f"{name}: {len(inputs)} inputs, lengths {[len(r['ids']) for r in inputs]} -> {folder}",
          file=sys.stderr)


def write_gte_reranker(out):
    """A GTE cross-encoder as gte-multilingual-reranker-base ships
    (NewForSequenceClassification, one label, an XLM-R-style tokenizer whose
    pairs are all segment 0, one token type; one head of 32, which the CUDA
    encoder takes): logits on (query, passage)
    pairs, in make_family_fixtures.py's classifier layout."""
    from safetensors.numpy import save_file
    tok, ids = unigram_tokenizer(64)
    config = {"architectures": ["NewForSequenceClassification"], "model_type": "new",
              "vocab_size": tok.get_vocab_size(), "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 1, "intermediate_size": 64, "hidden_act": "gelu",
              "max_position_embeddings": 64, "type_vocab_size": 1,
              "layer_norm_type": "layer_norm", "layer_norm_eps": 1e-12,
              "position_embedding_type": "rope", "rope_theta": 20000,
              "rope_scaling": {"factor": 8.0, "type": "ntk"}, "pack_qkv": True,
              "num_labels": 1, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
              "pad_token_id": ids["pad"]}
    tensors, _, classify = gte(config, 1, classifier=True)
    folder = os.path.join(out, "gte-reranker")
    write_folder(folder, config, tensors, tok, 64)
    records, results = [], {}
    for i, (q, p) in enumerate(PAIRS + [(t, TEXTS[0]) for t in TEXTS[1:4]]):
        e = tok.encode(q, p)
        results[f"logits_{i}"] = classify(np.array(e.ids), e.type_ids).astype(np.float32)
        records.append({"pair": [q, p], "ids": e.ids, "types": e.type_ids})
    save_file(results, os.path.join(folder, "reference.safetensors"))
    with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"labels": ["LABEL_0"],
                   "reference": "NumPy transcription (models/tools/make_remote_code_fixtures.py)",
                   "numpy": np.__version__, "inputs": records}, f, ensure_ascii=False, indent=1)
    print(f"gte-reranker: {len(records)} pairs -> {folder}", file=sys.stderr)


def check_original(nomic_dir, gte_dir, fixtures):
    """The authors' modules on each fixture's weights and inputs, against
    its reference: prints the largest absolute difference."""
    import importlib.util
    import torch
    from safetensors.numpy import load_file

    def load(folder, name):
        spec = importlib.util.spec_from_file_location(
            f"original.{name}", os.path.join(folder, name + ".py"),
            submodule_search_locations=[])
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    def extended_mask(self, mask, shape, *args, **kwargs):
        return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min

    for folder in (nomic_dir, gte_dir):  # their relative imports: a package each
        pkg = type(sys)("original")
        pkg.__path__ = [folder]
        sys.modules["original"] = pkg
        if folder == nomic_dir:
            load(folder, "configuration_hf_nomic_bert")
            nomic = load(folder, "modeling_hf_nomic_bert")
        else:
            load(folder, "configuration")
            new = load(folder, "modeling")
    for cls in (nomic.NomicBertModel, new.NewModel, new.NewForSequenceClassification):
        cls.get_extended_attention_mask = extended_mask

    def build(config):
        fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type")}
        if config["model_type"] == "nomic_bert":
            return nomic.NomicBertModel(nomic.NomicBertConfig(**fields), add_pooling_layer=False)
        c = sys.modules["original.configuration"].NewConfig(**fields)
        c._attn_implementation = "eager"
        if "NewForSequenceClassification" in config["architectures"]:
            return new.NewForSequenceClassification(c)
        return new.NewModel(c, add_pooling_layer=False)

    for sub in ("families/nomic_bert", "families/new", "families-cuda/nomic_bert",
                "families-cuda/new", "classifiers/gte-reranker"):
        folder = os.path.join(fixtures, sub)
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(folder, "reference.json"), encoding="utf-8") as f:
            inputs = json.load(f)["inputs"]
        want = load_file(os.path.join(folder, "reference.safetensors"))
        model = build(config)
        state = {k: torch.from_numpy(v) for k, v in
                 load_file(os.path.join(folder, "model.safetensors")).items()}
        model.load_state_dict(state, strict=False)
        model = model.float().eval()
        worst = 0.0
        for i, item in enumerate(inputs):
            ids = torch.tensor([item["ids"]])
            kwargs = {"token_type_ids": torch.tensor([item["types"]])} if "types" in item else {}
            with torch.no_grad():
                out = model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
            if f"logits_{i}" in want:
                got, ref = out.logits[0].numpy(), want[f"logits_{i}"]
            else:
                got, ref = out[0][0].numpy(), want[f"hidden_{i}"]
            worst = max(worst, float(np.abs(got - ref).max()))
        print(f"{sub}: the authors' code is within {worst:.2g} of the reference")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "fixtures", "families"))
    ap.add_argument("--families", help="comma-separated names to write (default: all)")
    ap.add_argument("--head-dim", type=int, help="every family's head size (32: the CUDA "
                    "encoder's fixtures, tests/fixtures/families-cuda)")
    ap.add_argument("--classifiers", help="also write the GTE reranker fixture here "
                    "(tests/fixtures/classifiers)")
    ap.add_argument("--check-original", nargs=2, metavar=("NOMIC_DIR", "GTE_DIR"),
                    help="run the authors' modelling code on the committed fixtures instead")
    a = ap.parse_args()
    if a.check_original:
        check_original(*a.check_original, os.path.join(HERE, "..", "..", "tests", "fixtures"))
        return
    for name, make in families(a.head_dim).items():
        if a.families is None or name in a.families.split(","):
            write_family(a.out, name, make)
    if a.classifiers:
        write_gte_reranker(a.classifiers)


if __name__ == "__main__":
    main()
