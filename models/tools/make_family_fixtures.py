#!/usr/bin/env python3
"""Reference fixtures for the transformer families, made by `transformers`'
own model classes: small random-weight checkpoints of XLM-RoBERTa, MPNet,
ModernBERT, Qwen3 (as the decoder embedder), BERT (with token types), and
the other decoders Qwen2, Llama and Mistral, each saved as a Hugging Face
folder with a tokenizer.json and sentence-transformers' pooling files, and
`transformers`' outputs on a fixed multilingual input set.

  python3 models/tools/make_family_fixtures.py [--out tests/fixtures/families]
                                              [--families bert,qwen3] [--head-dim 32]
                                              [--dense-head tests/fixtures/dense_head]

                                              [--classifiers tests/fixtures/classifiers]
                                              [--sparse tests/fixtures/sparse]

(--families "" with --dense-head, --classifiers or --sparse writes those alone.)

Run outside the README's two commands, in a virtual environment with torch,
transformers and tokenizers (pip install torch transformers safetensors). What
it writes is committed; the tests read the files and need none of these.

For each family, FOLDER/<family>/ holds:
  config.json, model.safetensors (F32)   the checkpoint (save_pretrained)
  tokenizer.json, tokenizer_config.json  a tokenizer trained here by
                                         `tokenizers`' own trainer, in the
                                         family's style (Unigram for XLM-R,
                                         WordPiece for MPNet and BERT, byte-level BPE
                                         for ModernBERT and the decoders)
  modules.json, 1_Pooling/config.json,   sentence-transformers' description
  sentence_bert_config.json              (pooling, max_seq_length)
  reference.json                         per input: its text (or null for
                                         an ids-only input), ids, and for
                                         BERT's (query, passage) pairs the
                                         token types; the pooling
  reference.safetensors                  per input i: hidden_i (last hidden
                                         states, [tokens, hidden], F32) and
                                         embedding_i (pooled, L2-normalised)

Each input is run alone (batch of one, no padding), in FP32 on the CPU,
eager attention. The inputs cover a single token, the longest sequence the
position table allows, and mixed scripts; ModernBERT's local attention
window (16) is shorter than its longer inputs, and Qwen3 has one KV head
(grouped-query attention) and causal attention with last-token pooling;
BERT's pairs have segment ids 0 and 1, one cut to the position table;
Qwen2 has q/k/v biases and 2 KV heads, Llama 1 KV head and θ 500000, and
Mistral a sliding window (16) shorter than its long inputs.
Weights use initializer_range 0.2 so that attention is far from uniform
and errors show.

--head-dim 32 --out tests/fixtures/families-cuda writes the same families
with heads of 32 (the smallest the CUDA encoder's attention takes; the
defaults are 16 and 8): hidden 64 with 2 heads, Qwen3 with 4 query heads
of 32 over one KV head (its query width, 128, past the hidden size), the
small decoders at hidden 64 with 2 heads (Llama's over one KV head).
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))

import tokenizer_corpus  # noqa: E402

VOCAB = 1000
TEXTS = [
    "A man is playing a guitar.",
    "Ein Mann spielt Gitarre, und die Straße ist laut!",
    "Человек играет на гитаре.",
    "一个男人在弹吉他。",
    "رجل يعزف على الغيتار",
    "नमस्ते दुनिया 👍🏽 ok",
    "x",
]


def train_corpus():
    return tokenizer_corpus.lines(3000, seed=5) + TEXTS * 20


def unigram_tokenizer(max_length):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import decoders
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" {2,}", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(train_corpus(), trainers.UnigramTrainer(
        vocab_size=VOCAB, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        unk_token="<unk>"))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", bos), ("</s>", eos)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return tok, {"bos": bos, "eos": eos, "pad": tok.token_to_id("<pad>")}


def wordpiece_tokenizer(specials, template_cls, template_sep):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import decoders
    tok = Tokenizer(models.WordPiece(unk_token=specials[3]))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(train_corpus(), trainers.WordPieceTrainer(
        vocab_size=VOCAB, special_tokens=specials))
    cls, sep = tok.token_to_id(template_cls), tok.token_to_id(template_sep)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{template_cls} $A {template_sep}",
        pair=f"{template_cls} $A {template_sep} {template_sep} $B {template_sep}",
        special_tokens=[(template_cls, cls), (template_sep, sep)])
    tok.decoder = decoders.WordPiece()
    return tok, {"bos": cls, "eos": sep, "pad": tok.token_to_id(specials[1])}


QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytelevel_tokenizer(specials, single, pair):
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
    from tokenizers import decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.train_from_iterator(train_corpus(), trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    ids = {s: tok.token_to_id(s) for s in specials}
    used = [s for s in specials if s in single or s in pair]
    tok.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(s, ids[s]) for s in used])
    tok.decoder = decoders.ByteLevel()
    return tok, ids


def families(head_dim=None):
    """name -> (make model, tokenizer, pooling, max tokens); head_dim: see
    --head-dim."""
    import transformers as tf
    def eager(cls, config, **kwargs):
        config._attn_implementation = "eager"
        return cls(config, **kwargs)

    # (vocab_size: the tokenizer's, which a trainer may take past VOCAB to
    # keep every character of the corpus.)
    common = dict(hidden_size=64, num_attention_heads=4, intermediate_size=128,
                  initializer_range=0.2)
    qwen3_heads = dict(num_attention_heads=4, head_dim=head_dim or 16)
    if head_dim:
        common["num_attention_heads"] = 64 // head_dim

    def xlmr():
        tok, ids = unigram_tokenizer(64)
        config = tf.XLMRobertaConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2, max_position_embeddings=66,
                                     type_vocab_size=1, pad_token_id=ids["pad"],
                                     bos_token_id=ids["bos"], eos_token_id=ids["eos"], **common)
        return eager(tf.XLMRobertaModel, config, add_pooling_layer=False), tok, "mean", 64

    def mpnet():
        tok, ids = wordpiece_tokenizer(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s>", "</s>")
        config = tf.MPNetConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2, max_position_embeddings=66,
                                relative_attention_num_buckets=32, pad_token_id=ids["pad"],
                                bos_token_id=ids["bos"], eos_token_id=ids["eos"], **common)
        return eager(tf.MPNetModel, config, add_pooling_layer=False), tok, "mean", 64

    def modernbert():
        tok, ids = bytelevel_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                       "[CLS] $A [SEP]", "[CLS] $A [SEP] $B [SEP]")
        config = tf.ModernBertConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=3, max_position_embeddings=128,
                                     global_attn_every_n_layers=3, local_attention=16,
                                     pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"],
                                     sep_token_id=ids["[SEP]"], bos_token_id=ids["[CLS]"],
                                     eos_token_id=ids["[SEP]"], **common)
        return eager(tf.ModernBertModel, config), tok, "mean", 128

    def qwen3():
        tok, ids = bytelevel_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                       "$A <|endoftext|>", "$A <|endoftext|> $B <|endoftext|>")
        config = tf.Qwen3Config(vocab_size=tok.get_vocab_size(), num_hidden_layers=2, num_key_value_heads=1,
                                max_position_embeddings=128, rope_theta=1000000.0,
                                rms_norm_eps=1e-6, tie_word_embeddings=True,
                                pad_token_id=ids["<|endoftext|>"],
                                eos_token_id=ids["<|endoftext|>"],
                                **{**common, **qwen3_heads})
        return eager(tf.Qwen3Model, config), tok, "lasttoken", 128

    def bert():
        # Token types: pairs get segment 0 then 1, as a cross-encoder's input.
        tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"],
                                       "[CLS]", "[SEP]")
        cls, sep = ids["bos"], ids["eos"]
        from tokenizers import processors
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        config = tf.BertConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                               max_position_embeddings=64, type_vocab_size=2,
                               pad_token_id=ids["pad"], **common)
        return eager(tf.BertModel, config, add_pooling_layer=False), tok, "mean", 64

    # The other decoders the description covers, smaller (hidden 32): Qwen2
    # (q/k/v biases, 2 KV heads), Llama (no biases, 1 KV head, θ 500000) and
    # Mistral (a sliding window of 16, shorter than the long inputs).
    small = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                 initializer_range=0.2, num_hidden_layers=2, max_position_embeddings=96,
                 rms_norm_eps=1e-6)
    if head_dim:
        small.update(hidden_size=64, num_attention_heads=64 // head_dim, intermediate_size=128)
    kv2 = min(2, small["num_attention_heads"])

    def decoder_tokenizer():
        return bytelevel_tokenizer(["<|endoftext|>", "<s>", "</s>"],
                                   "$A <|endoftext|>", "$A <|endoftext|> $B <|endoftext|>")

    def qwen2():
        tok, ids = decoder_tokenizer()
        config = tf.Qwen2Config(vocab_size=tok.get_vocab_size(), num_key_value_heads=kv2,
                                rope_theta=1000000.0, tie_word_embeddings=True,
                                pad_token_id=ids["<|endoftext|>"],
                                eos_token_id=ids["<|endoftext|>"], **small)
        return eager(tf.Qwen2Model, config), tok, "lasttoken", 96

    def llama():
        tok, ids = decoder_tokenizer()
        config = tf.LlamaConfig(vocab_size=tok.get_vocab_size(), num_key_value_heads=1,
                                rope_theta=500000.0, pad_token_id=ids["<|endoftext|>"],
                                bos_token_id=ids["<s>"], eos_token_id=ids["<|endoftext|>"],
                                **small)
        return eager(tf.LlamaModel, config), tok, "lasttoken", 96

    def mistral():
        tok, ids = decoder_tokenizer()
        config = tf.MistralConfig(vocab_size=tok.get_vocab_size(), num_key_value_heads=kv2,
                                  sliding_window=16, rope_theta=10000.0,
                                  pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<s>"],
                                  eos_token_id=ids["<|endoftext|>"], **small)
        return eager(tf.MistralModel, config), tok, "mean", 96

    return {"xlm-roberta": xlmr, "mpnet": mpnet, "modernbert": modernbert, "qwen3": qwen3,
            "bert": bert, "qwen2": qwen2, "llama": llama, "mistral": mistral}


# (query, passage) pairs for families with token types (bert): encoded as a
# pair, the passage's tokens are type 1.
PAIRS = [
    ("what does the man play?", "A man is playing a guitar."),
    ("Wer spielt?", "Ein Mann spielt Gitarre, und die Straße ist laut!"),
    ("x", "一个男人在弹吉他。"),
]


def long_text(tok, max_tokens):
    """A text whose encoding fills exactly max_tokens positions (cut there)."""
    words = " ".join(tokenizer_corpus.lines(200, seed=9))
    tok.enable_truncation(max_tokens)
    ids = tok.encode(words).ids
    tok.no_truncation()
    return words, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "fixtures", "families"))
    ap.add_argument("--families", help="comma-separated names to write (default: all)")
    ap.add_argument("--head-dim", type=int, help="every family's head size (32: the CUDA "
                    "encoder's fixtures, tests/fixtures/families-cuda)")
    ap.add_argument("--dense-head", help="also write the Dense-module fixture here "
                    "(tests/fixtures/dense_head; needs sentence-transformers)")
    ap.add_argument("--classifiers", help="also write the sequence-classification fixtures "
                    "here (tests/fixtures/classifiers)")
    ap.add_argument("--sparse", help="also write the SPLADE fixtures here (tests/fixtures/sparse; "
                    "needs sentence-transformers 5 or later)")
    a = ap.parse_args()
    if a.families == "":
        if a.dense_head:
            dense_head(a.dense_head, a.out)
        if a.classifiers:
            classifiers(a.classifiers)
        if a.sparse:
            sparse(a.sparse)
        return
    import torch
    from safetensors.torch import save_file
    for name, make in families(a.head_dim).items():
        if a.families and name not in a.families.split(","):
            continue
        torch.manual_seed(0)
        model, tok, pooling, max_tokens = make()
        model = model.float().eval()
        folder = os.path.join(a.out, name)
        os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"model_max_length": max_tokens}, f, indent=1)
        with open(os.path.join(folder, "sentence_bert_config.json"), "w") as f:
            json.dump({"max_seq_length": max_tokens, "do_lower_case": False}, f, indent=1)
        with open(os.path.join(folder, "modules.json"), "w") as f:
            json.dump([{"idx": 0, "name": "0", "path": "", "type":
                        "sentence_transformers.models.Transformer"},
                       {"idx": 1, "name": "1", "path": "1_Pooling", "type":
                        "sentence_transformers.models.Pooling"},
                       {"idx": 2, "name": "2", "path": "2_Normalize", "type":
                        "sentence_transformers.models.Normalize"}], f, indent=1)
        with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": model.config.hidden_size,
                       "pooling_mode_cls_token": False,
                       "pooling_mode_mean_tokens": pooling == "mean",
                       "pooling_mode_lasttoken": pooling == "lasttoken"}, f, indent=1)
        inputs = [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS]
        text, ids = long_text(tok, max_tokens)
        inputs.append({"text": None, "ids": ids, "note": f"the longest: {max_tokens} tokens"})
        inputs.append({"text": None, "ids": inputs[0]["ids"][:1], "note": "a single token"})
        if getattr(model.config, "type_vocab_size", 0) > 1:
            for q, p in PAIRS:
                e = tok.encode(q, p)
                inputs.append({"text": None, "pair": [q, p], "ids": e.ids, "types": e.type_ids})
            passage = long_text(tok, max_tokens)[0]
            tok.enable_truncation(max_tokens)  # longest_first, as a reranker cuts
            e = tok.encode(" ".join(TEXTS), passage)
            tok.no_truncation()
            inputs.append({"text": None, "ids": e.ids, "types": e.type_ids,
                           "note": f"a pair cut to {max_tokens} tokens"})
        tensors, records = {}, []
        for i, item in enumerate(inputs):
            x = torch.tensor([item["ids"]], dtype=torch.long)
            kwargs = {}
            if "types" in item:
                kwargs["token_type_ids"] = torch.tensor([item["types"]], dtype=torch.long)
            with torch.no_grad():
                h = model(input_ids=x, attention_mask=torch.ones_like(x),
                          **kwargs).last_hidden_state[0]
            pooled = h.mean(0) if pooling == "mean" else h[-1]
            tensors[f"hidden_{i}"] = h.contiguous()
            tensors[f"embedding_{i}"] = torch.nn.functional.normalize(pooled, dim=0).contiguous()
            records.append({k: v for k, v in item.items()})
        save_file(tensors, os.path.join(folder, "reference.safetensors"))
        with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
            json.dump({"family": name, "pooling": pooling, "dtype": "float32",
                       "transformers": __import__("transformers").__version__,
                       "torch": torch.__version__, "inputs": records}, f, ensure_ascii=False,
                      indent=1)
        print(f"{name}: {len(records)} inputs, lengths "
              f"{[len(r['ids']) for r in records]} -> {folder}", file=sys.stderr)
    if a.dense_head:
        dense_head(a.dense_head, a.out)
    if a.classifiers:
        classifiers(a.classifiers)


def dense_head(out, families_dir):
    """sentence-transformers' own pipeline on the BERT fixture with a Dense
    module (64 -> 32, tanh) between pooling and normalisation, as LaBSE has:
    writes `out`/modules.json, 2_Dense/ (config.json, model.safetensors) and
    reference.json + reference.safetensors (embedding_i of each text, as
    SentenceTransformer.encode gives it). The test serves the BERT fixture's
    folder with these files added."""
    import shutil
    import torch
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer, models
    torch.manual_seed(0)
    src = os.path.join(families_dir, "bert")
    dense = models.Dense(64, 32)
    torch.nn.init.normal_(dense.linear.weight, std=0.3)
    model = SentenceTransformer(modules=[models.Transformer(src), models.Pooling(64, "mean"),
                                         dense, models.Normalize()], device="cpu")
    saved = os.path.join(out, "saved")
    shutil.rmtree(out, ignore_errors=True)
    model.save(saved)
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(saved, "modules.json"), out)
    shutil.copytree(os.path.join(saved, "2_Dense"), os.path.join(out, "2_Dense"))
    shutil.rmtree(saved)
    embeddings = model.encode(TEXTS, convert_to_tensor=True)
    save_file({f"embedding_{i}": e.float().contiguous() for i, e in enumerate(embeddings)},
              os.path.join(out, "reference.safetensors"))
    import sentence_transformers
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"base": "families/bert", "sentence_transformers": sentence_transformers.__version__,
                   "torch": torch.__version__, "texts": TEXTS}, f, ensure_ascii=False, indent=1)
    print(f"dense head: {len(TEXTS)} texts -> {out}", file=sys.stderr)


def classifiers(out):
    """Sequence-classification checkpoints, as rerankers and classifiers
    ship: BertForSequenceClassification with one label (a cross-encoder such
    as ms-marco-MiniLM) and XLMRobertaForSequenceClassification with three
    named labels (hidden 32), each with its tokenizer and transformers'
    logits on (query, passage) pairs: `out`/<name>/reference.json (pairs,
    ids, types) and reference.safetensors (logits_i)."""
    import torch
    import transformers as tf
    from safetensors.torch import save_file
    small = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                 initializer_range=0.2, num_hidden_layers=2, max_position_embeddings=66)
    made = {}
    tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], "[CLS]", "[SEP]")
    from tokenizers import processors
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["bos"]), ("[SEP]", ids["eos"])])
    config = tf.BertConfig(vocab_size=tok.get_vocab_size(), type_vocab_size=2, num_labels=1,
                           pad_token_id=ids["pad"], **small)
    config.architectures = ["BertForSequenceClassification"]
    made["bert-reranker"] = (tf.BertForSequenceClassification, config, tok)
    tok, ids = unigram_tokenizer(64)
    config = tf.XLMRobertaConfig(vocab_size=tok.get_vocab_size(), type_vocab_size=1,
                                 pad_token_id=ids["pad"], bos_token_id=ids["bos"],
                                 eos_token_id=ids["eos"],
                                 id2label={0: "negative", 1: "neutral", 2: "positive"},
                                 label2id={"negative": 0, "neutral": 1, "positive": 2},
                                 **dict(small, max_position_embeddings=66))
    config.architectures = ["XLMRobertaForSequenceClassification"]
    made["xlm-roberta-classifier"] = (tf.XLMRobertaForSequenceClassification, config, tok)
    for name, (cls, config, tok) in made.items():
        torch.manual_seed(0)
        config._attn_implementation = "eager"
        model = cls(config).float().eval()
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"model_max_length": 64}, f, indent=1)
        records, tensors = [], {}
        for i, (q, p) in enumerate(PAIRS + [(t, TEXTS[0]) for t in TEXTS[1:4]]):
            e = tok.encode(q, p)
            x = torch.tensor([e.ids])
            kwargs = {}
            if config.type_vocab_size > 1:
                kwargs["token_type_ids"] = torch.tensor([e.type_ids])
            with torch.no_grad():
                logits = model(input_ids=x, attention_mask=torch.ones_like(x), **kwargs).logits[0]
            tensors[f"logits_{i}"] = logits.contiguous()
            records.append({"pair": [q, p], "ids": e.ids, "types": e.type_ids})
        save_file(tensors, os.path.join(folder, "reference.safetensors"))
        with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
            json.dump({"labels": [config.id2label[i] for i in range(config.num_labels)],
                       "transformers": tf.__version__, "torch": torch.__version__,
                       "inputs": records}, f, ensure_ascii=False, indent=1)
        print(f"{name}: {len(records)} pairs -> {folder}", file=sys.stderr)


def sparse(out):
    """SPLADE checkpoints as sentence-transformers' SparseEncoder saves them
    (an MLMTransformer, then SpladePooling): BertForMaskedLM with its decoder
    tied to the word embeddings and max pooling of log(1 + ReLU) (SPLADE v2
    and later, e.g. naver/splade-v3), and XLMRobertaForMaskedLM with an
    untied decoder, sum pooling and log1p twice (OpenSearch's
    log1p_relu). The reference is SparseEncoder.encode on TEXTS:
    `out`/<name>/reference.safetensors (sparse_i, the whole vocabulary-wide
    vector, F32) and reference.json (texts, ids)."""
    import shutil
    import torch
    import transformers as tf
    import sentence_transformers
    from safetensors.torch import save_file
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling
    small = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                 initializer_range=0.2, num_hidden_layers=2, max_position_embeddings=66)
    made = {}
    tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], "[CLS]", "[SEP]")
    config = tf.BertConfig(vocab_size=tok.get_vocab_size(), type_vocab_size=2,
                           pad_token_id=ids["pad"], **small)
    config.architectures = ["BertForMaskedLM"]
    made["bert-splade"] = (tf.BertForMaskedLM, config, tok, "max", "relu")
    tok, ids = unigram_tokenizer(64)
    config = tf.XLMRobertaConfig(vocab_size=tok.get_vocab_size(), type_vocab_size=1,
                                 pad_token_id=ids["pad"], bos_token_id=ids["bos"],
                                 eos_token_id=ids["eos"], tie_word_embeddings=False, **small)
    config.architectures = ["XLMRobertaForMaskedLM"]
    made["xlm-roberta-splade"] = (tf.XLMRobertaForMaskedLM, config, tok, "sum", "log1p_relu")
    for name, (cls, config, tok, strategy, activation) in made.items():
        torch.manual_seed(0)
        config._attn_implementation = "eager"
        model = cls(config).float().eval()
        # A trained SPLADE head puts most logits below zero; random weights
        # put half there. Shift the decoder's bias so that about 3% of the
        # logits on TEXTS stay positive, as in a real model's sparse output.
        with torch.no_grad():
            head = model.cls.predictions if hasattr(model, "cls") else model.lm_head
            logits = torch.cat([model(input_ids=torch.tensor([tok.encode(t).ids])).logits[0]
                                for t in TEXTS])
            shift = float(torch.quantile(logits.flatten(), 0.97))
            for bias in {id(b): b for b in (head.bias, head.decoder.bias) if b is not None}.values():
                bias -= shift
        base = os.path.join(out, name + ".base")
        shutil.rmtree(base, ignore_errors=True)
        model.save_pretrained(base, safe_serialization=True)
        tok.save(os.path.join(base, "tokenizer.json"))
        with open(os.path.join(base, "tokenizer_config.json"), "w") as f:
            json.dump({"model_max_length": 64}, f, indent=1)
        encoder = SparseEncoder(modules=[MLMTransformer(base, max_seq_length=64),
                                         SpladePooling(strategy, activation)], device="cpu")
        folder = os.path.join(out, name)
        shutil.rmtree(folder, ignore_errors=True)
        encoder.save(folder)
        shutil.rmtree(base)
        texts = TEXTS[:8]
        with torch.no_grad():
            got = encoder.encode(texts, convert_to_tensor=True, convert_to_sparse_tensor=False)
        save_file({f"sparse_{i}": e.float().contiguous() for i, e in enumerate(got)},
                  os.path.join(folder, "reference.safetensors"))
        with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
            json.dump({"texts": texts, "ids": [tok.encode(t).ids for t in texts],
                       "pooling_strategy": strategy, "activation_function": activation,
                       "sentence_transformers": sentence_transformers.__version__,
                       "transformers": tf.__version__, "torch": torch.__version__},
                      f, ensure_ascii=False, indent=1)
        nnz = [int((e > 0).sum()) for e in got]
        print(f"{name}: {len(texts)} texts, non-zero terms {nnz} of {config.vocab_size} -> {folder}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
