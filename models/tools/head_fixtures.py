"""The task-head fixtures (make_family_fixtures.py's --dense-head,
--classifiers and --sparse): sentence-transformers' Dense module on the BERT
family fixture, sequence-classification checkpoints, and SPLADE checkpoints,
each with the outputs of the library that defines it (transformers,
sentence-transformers). Run through make_family_fixtures.py."""

import json
import os
import sys

from fixture_common import (PAIRS, TEXTS, bert_pair_tokenizer, bytelevel_tokenizer, unigram_tokenizer,
                            wordpiece_tokenizer)


def distilbert_sizes(bert_sizes):
    """DistilBertConfig's names for BertConfig-style sizes."""
    names = {"hidden_size": "dim", "num_attention_heads": "n_heads",
             "intermediate_size": "hidden_dim", "num_hidden_layers": "n_layers"}
    return {names.get(k, k): v for k, v in bert_sizes.items()}


def decoder_biases(model):
    """The masked-LM decoder's bias parameters (BERT's and RoBERTa's head
    hold one under two names; DistilBERT's vocab_projector one)."""
    if hasattr(model, "vocab_projector"):
        return [model.vocab_projector.bias]
    head = model.cls.predictions if hasattr(model, "cls") else model.lm_head
    return list({id(b): b for b in (head.bias, head.decoder.bias) if b is not None}.values())


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


def classifiers(out, only=None):
    """Sequence-classification checkpoints, as rerankers and classifiers
    ship: BertForSequenceClassification with one label (a cross-encoder such
    as ms-marco-MiniLM), XLMRobertaForSequenceClassification with three
    named labels, and DistilBertForSequenceClassification with two (as
    distilbert-base-uncased-finetuned-sst-2-english; its head's ReLU is
    not BERT's tanh), MPNetForSequenceClassification with one label (its
    head is RoBERTa's), and ModernBertForSequenceClassification with two,
    pooled by the mean of the tokens and through its GELU and LayerNorm
    head (as Alibaba-NLP/gte-reranker-modernbert-base), and transformers'
    own GteForSequenceClassification with one label (tensors under "gte."),
    and Qwen3ForSequenceClassification with one (its `score` on the last
    token that is not the pad token: the pairs end with <|endoftext|>, which
    is that token, so the one before it is read),
    all hidden 32 in
    one head of 32 (a size the CUDA encoder's attention takes, so the GPU
    tests serve them too), each with its tokenizer and
    transformers' logits on (query, passage) pairs: `out`/<name>/
    reference.json (pairs, ids, types) and reference.safetensors
    (logits_i). `only`: the names to write (default all)."""
    import torch
    import transformers as tf
    from safetensors.torch import save_file
    small = dict(hidden_size=32, num_attention_heads=1, intermediate_size=64,
                 initializer_range=0.2, num_hidden_layers=2, max_position_embeddings=66)
    made = {}
    tok, ids = bert_pair_tokenizer()
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
    tok, ids = bert_pair_tokenizer()
    config = tf.DistilBertConfig(vocab_size=tok.get_vocab_size(), **distilbert_sizes(small),
                                 pad_token_id=ids["pad"],
                                 id2label={0: "NEGATIVE", 1: "POSITIVE"},
                                 label2id={"NEGATIVE": 0, "POSITIVE": 1})
    config.architectures = ["DistilBertForSequenceClassification"]
    made["distilbert-classifier"] = (tf.DistilBertForSequenceClassification, config, tok)
    tok, ids = wordpiece_tokenizer(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s>", "</s>")
    config = tf.MPNetConfig(vocab_size=tok.get_vocab_size(), relative_attention_num_buckets=32,
                            pad_token_id=ids["pad"], bos_token_id=ids["bos"],
                            eos_token_id=ids["eos"], num_labels=1,
                            **dict(small, max_position_embeddings=130))
    config.architectures = ["MPNetForSequenceClassification"]
    made["mpnet-reranker"] = (tf.MPNetForSequenceClassification, config, tok)
    tok, ids = bytelevel_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                   "[CLS] $A [SEP]", "[CLS] $A [SEP] $B [SEP]")
    config = tf.ModernBertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32,
                                 num_attention_heads=1, intermediate_size=64,
                                 initializer_range=0.2, num_hidden_layers=3,
                                 max_position_embeddings=128, global_attn_every_n_layers=3,
                                 local_attention=16, pad_token_id=ids["[PAD]"],
                                 cls_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"],
                                 bos_token_id=ids["[CLS]"], eos_token_id=ids["[SEP]"],
                                 classifier_pooling="mean", id2label={0: "no", 1: "yes"},
                                 label2id={"no": 0, "yes": 1})
    config.architectures = ["ModernBertForSequenceClassification"]
    made["modernbert-classifier"] = (tf.ModernBertForSequenceClassification, config, tok)
    tok, ids = bert_pair_tokenizer()
    config = tf.GteConfig(vocab_size=tok.get_vocab_size(), type_vocab_size=2, num_labels=1,
                          rope_parameters={"rope_theta": 500000.0, "rope_type": "default"},
                          pad_token_id=ids["pad"], **small)
    config.architectures = ["GteForSequenceClassification"]
    made["gte-native-reranker"] = (tf.GteForSequenceClassification, config, tok)
    tok, ids = bytelevel_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                   "$A <|endoftext|>", "$A <|endoftext|> $B <|endoftext|>")
    config = tf.Qwen3Config(vocab_size=tok.get_vocab_size(), hidden_size=32, num_attention_heads=1,
                            num_key_value_heads=1, head_dim=32, intermediate_size=64,
                            initializer_range=0.2, num_hidden_layers=2,
                            max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6,
                            pad_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"],
                            num_labels=1)
    config.architectures = ["Qwen3ForSequenceClassification"]
    made["qwen3-reranker"] = (tf.Qwen3ForSequenceClassification, config, tok)
    for name, (cls, config, tok) in made.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        config._attn_implementation = "eager"
        model = cls(config).float().eval()
        if hasattr(model, "head"):
            # ModernBERT's head norm starts at γ = 1: make it count.
            with torch.no_grad():
                model.head.norm.weight.uniform_(0.5, 1.5)
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
            if getattr(config, "type_vocab_size", 0) > 1:
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


def sparse(out, only=None):
    """SPLADE checkpoints as sentence-transformers' SparseEncoder saves them
    (an MLMTransformer, then SpladePooling): BertForMaskedLM with its decoder
    tied to the word embeddings and max pooling of log(1 + ReLU) (SPLADE v2
    and later, e.g. naver/splade-v3), and XLMRobertaForMaskedLM with an
    untied decoder, sum pooling and log1p twice (OpenSearch's
    log1p_relu), and DistilBertForMaskedLM with its tied decoder and max
    pooling (as OpenSearch's doc-v2-distill). The reference is
    SparseEncoder.encode on TEXTS:
    `out`/<name>/reference.safetensors (sparse_i, the whole vocabulary-wide
    vector, F32) and reference.json (texts, ids)."""
    import shutil
    import torch
    import transformers as tf
    import sentence_transformers
    from safetensors.torch import save_file
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling
    small = dict(hidden_size=32, num_attention_heads=1, intermediate_size=64,
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
    tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], "[CLS]", "[SEP]")
    config = tf.DistilBertConfig(vocab_size=tok.get_vocab_size(), **distilbert_sizes(small),
                                 pad_token_id=ids["pad"])
    config.architectures = ["DistilBertForMaskedLM"]
    made["distilbert-splade"] = (tf.DistilBertForMaskedLM, config, tok, "max", "relu")
    for name, (cls, config, tok, strategy, activation) in made.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        config._attn_implementation = "eager"
        model = cls(config).float().eval()
        # A trained SPLADE head puts most logits below zero; random weights
        # put half there. Shift the decoder's bias so that about 3% of the
        # logits on TEXTS stay positive, as in a real model's sparse output.
        with torch.no_grad():
            logits = torch.cat([model(input_ids=torch.tensor([tok.encode(t).ids])).logits[0]
                                for t in TEXTS])
            shift = float(torch.quantile(logits.flatten(), 0.97))
            for bias in decoder_biases(model):
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
