#!/usr/bin/env python3
"""Reference fixtures for the transformer families, made by `transformers`'
own model classes: small random-weight checkpoints of XLM-RoBERTa, RoBERTa,
CamemBERT, MPNet, ModernBERT, Qwen3 (as the decoder embedder), BERT (with
token types), DistilBERT, and the other decoders Qwen2 (also with scaled
RoPE, "qwen2-scaled"), Llama and Mistral, each saved as a Hugging Face
folder with a tokenizer.json and sentence-transformers' pooling files, and
`transformers`' outputs on a fixed multilingual input set.

  python3 models/tools/make_family_fixtures.py [--out tests/fixtures/families]
                                              [--families bert,qwen3] [--head-dim 32]
                                              [--dense-head tests/fixtures/dense_head]
                                              [--classifiers tests/fixtures/classifiers]
                                              [--sparse tests/fixtures/sparse]
                                              [--heads distilbert-classifier,...]

(--families "" with --dense-head, --classifiers or --sparse writes those alone;
--heads limits the classifier and SPARSE fixtures written to those named.
The task heads' fixtures are made in head_fixtures.py, the tokenizers and
inputs in fixture_common.py.)

Run outside the README's two commands, in a virtual environment with torch,
transformers and tokenizers (pip install torch transformers safetensors). What
it writes is committed; the tests read the files and need none of these.
`tokenizers`' trainers do not order a vocabulary's ties the same way from run
to run, so remaking a committed fixture changes its bytes: write only the
fixtures added (--families, --heads).

For each family, FOLDER/<family>/ holds:
  config.json, model.safetensors (F32)   the checkpoint (save_pretrained)
  tokenizer.json, tokenizer_config.json  a tokenizer trained here by
                                         `tokenizers`' own trainer, in the
                                         family's style (Unigram for XLM-R
                                         and CamemBERT, WordPiece for MPNet,
                                         BERT and DistilBERT, byte-level BPE
                                         for ModernBERT, RoBERTa (GPT-2's
                                         pre-tokenizer, RobertaProcessing)
                                         and the decoders)
  modules.json, 1_Pooling/config.json,   sentence-transformers' description
  sentence_bert_config.json              (pooling, max_seq_length)
  reference.json                         per input: its text (or null for
                                         an ids-only input), ids, and for
                                         BERT's and RoBERTa's (query,
                                         passage) pairs the token types; the
                                         pooling
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
Mistral a sliding window (16) shorter than its long inputs; DistilBERT has
BERT's blocks without token types; NomicBERT and GTE are transformers' own
classes (GTE with CLS pooling). RoBERTa and CamemBERT are XLM-R's blocks
under their own model_type (positions from pad_token_id + 1, LayerNorm ε
1e-5): RoBERTa with a token-type table of 2 and (query, passage) pairs (its
RobertaProcessing gives every token segment 0), CamemBERT with CLS pooling.
qwen2-scaled is Qwen2 with tanh GELU (gelu_pytorch_tanh) in its gated MLP,
"linear" RoPE scaling by 2 (rope_parameters) and use_sliding_window with a
window of 16 on the layers from max_window_layers (1) on: layer_types marks
layer 1 of 2 sliding; seven of its inputs (up to 96 tokens) are longer than
the window, and the halved positions change every input of two tokens or
more.
mpnet-pad0 and xlm-roberta-pad3 check RoBERTa's position ids
(create_position_ids_from_input_ids: the tokens whose id is the padding id
take its position and are not counted): MPNet whose config says
pad_token_id 0 (<pad> 0, <mask> 1: transformers' MPNetEmbeddings takes 1
as the padding id whatever the config says, so its positions start at 2
and <mask> takes position 1), and XLM-R whose pad_token_id is 3 (its
positions start at 4); both with texts that hold the pad token (and
MPNet's <mask>) inside them, which their tokenizers map to those ids.
Weights use initializer_range 0.2 so that attention is far from uniform
and errors show.

--head-dim 32 --out tests/fixtures/families-cuda writes the same families
with heads of 32 (the smallest the CUDA encoder's attention takes; the
defaults are 16 and 8): hidden 64 with 2 heads, Qwen3 with 4 query heads
of 32 over one KV head (its query width, 128, past the hidden size), the
small decoders (Qwen2's scaled one too) at hidden 64 with 2 heads (Llama's
over one KV head).
"""

import argparse
import json
import os
import sys

from fixture_common import (HERE, PAIRS, TEXTS, bert_pair_tokenizer, bytelevel_tokenizer,
                            long_text, roberta_tokenizer, unigram_tokenizer,
                            wordpiece_tokenizer, write_sentence_transformers_files)
from head_fixtures import classifiers, dense_head, distilbert_sizes, sparse


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

    # RoBERTa and CamemBERT: XLM-R's blocks under their own model_type
    # (positions from pad_token_id + 1, LayerNorm ε 1e-5 as their
    # checkpoints'). RoBERTa with a token-type table of 2, so that pairs are
    # run (RobertaProcessing gives every token segment 0) and byte-level BPE
    # with GPT-2's pre-tokenizer; CamemBERT with XLM-R's Unigram tokenizer and
    # CLS pooling.
    def roberta():
        tok, ids = roberta_tokenizer()
        config = tf.RobertaConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                                  max_position_embeddings=66, type_vocab_size=2,
                                  layer_norm_eps=1e-5, pad_token_id=ids["pad"],
                                  bos_token_id=ids["bos"], eos_token_id=ids["eos"], **common)
        return eager(tf.RobertaModel, config, add_pooling_layer=False), tok, "mean", 64

    def camembert():
        tok, ids = unigram_tokenizer(64)
        config = tf.CamembertConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                                    max_position_embeddings=66, type_vocab_size=1,
                                    layer_norm_eps=1e-5, pad_token_id=ids["pad"],
                                    bos_token_id=ids["bos"], eos_token_id=ids["eos"], **common)
        return eager(tf.CamembertModel, config, add_pooling_layer=False), tok, "cls", 64

    # XLM-R with pad_token_id 3 (not 1): its position table from row 4.
    def xlmr_pad3():
        tok, ids = unigram_tokenizer(64, specials=("<s>", "<unk>", "</s>", "<pad>", "<mask>"))
        assert ids["pad"] == 3
        config = tf.XLMRobertaConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                                     max_position_embeddings=68, type_vocab_size=1,
                                     pad_token_id=ids["pad"], bos_token_id=ids["bos"],
                                     eos_token_id=ids["eos"], **common)
        return eager(tf.XLMRobertaModel, config, add_pooling_layer=False), tok, "mean", 64

    # MPNet with pad_token_id 0: transformers still takes id 1 (<mask>
    # here) as the padding id, so positions start at row 2.
    def mpnet_pad0():
        tok, ids = wordpiece_tokenizer(["<pad>", "<mask>", "<s>", "</s>", "<unk>"], "<s>", "</s>",
                                       unk="<unk>", pad="<pad>")
        assert ids["pad"] == 0 and tok.token_to_id("<mask>") == 1
        config = tf.MPNetConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                                max_position_embeddings=66, relative_attention_num_buckets=32,
                                pad_token_id=ids["pad"], bos_token_id=ids["bos"],
                                eos_token_id=ids["eos"], **common)
        return eager(tf.MPNetModel, config, add_pooling_layer=False), tok, "mean", 64

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
        tok, ids = bert_pair_tokenizer()
        config = tf.BertConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                               max_position_embeddings=64, type_vocab_size=2,
                               pad_token_id=ids["pad"], **common)
        return eager(tf.BertModel, config, add_pooling_layer=False), tok, "mean", 64

    def distilbert():
        tok, ids = bert_pair_tokenizer()
        config = tf.DistilBertConfig(vocab_size=tok.get_vocab_size(), n_layers=2,
                                     max_position_embeddings=64, pad_token_id=ids["pad"],
                                     **distilbert_sizes(common))
        return eager(tf.DistilBertModel, config), tok, "mean", 64

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

    # Qwen2 with tanh-approximated GELU in its gated MLP, "linear" RoPE
    # scaling (positions halved) and Qwen's sliding window: 16 on the layers
    # from max_window_layers (1) on, as layer_types records.
    def qwen2_scaled():
        tok, ids = decoder_tokenizer()
        config = tf.Qwen2Config(vocab_size=tok.get_vocab_size(), num_key_value_heads=kv2,
                                hidden_act="gelu_pytorch_tanh",
                                rope_parameters={"rope_type": "linear", "factor": 2.0,
                                                 "rope_theta": 100000.0},
                                use_sliding_window=True, sliding_window=16, max_window_layers=1,
                                tie_word_embeddings=True, pad_token_id=ids["<|endoftext|>"],
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

    # NomicBERT and GTE as transformers' own classes write them (BERT's
    # config names, rope_parameters; the checkpoints' original tensor
    # names). Their authors' code, which the hub's configs name, is checked
    # by make_remote_code_fixtures.py.
    def nomic_native():
        tok, ids = bert_pair_tokenizer()
        config = tf.NomicBertConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                                    max_position_embeddings=64, type_vocab_size=2,
                                    rope_parameters={"rope_theta": 1000.0, "rope_type": "default"},
                                    pad_token_id=ids["pad"], **common)
        return eager(tf.NomicBertModel, config), tok, "mean", 64

    def gte():
        tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], "[CLS]", "[SEP]")
        config = tf.GteConfig(vocab_size=tok.get_vocab_size(), num_hidden_layers=2,
                              max_position_embeddings=64, type_vocab_size=1,
                              rope_parameters={"rope_theta": 500000.0, "rope_type": "default"},
                              pad_token_id=ids["pad"], **common)
        return eager(tf.GteModel, config, add_pooling_layer=False), tok, "cls", 64

    return {"xlm-roberta": xlmr, "mpnet": mpnet, "modernbert": modernbert, "qwen3": qwen3,
            "bert": bert, "qwen2": qwen2, "llama": llama, "mistral": mistral,
            "distilbert": distilbert, "nomic_bert-native": nomic_native, "gte": gte,
            "roberta": roberta, "camembert": camembert, "qwen2-scaled": qwen2_scaled,
            "xlm-roberta-pad3": xlmr_pad3, "mpnet-pad0": mpnet_pad0}


# Texts of a family's fixture after TEXTS: the padding id (and MPNet's
# fixed padding id, <mask>) inside the text.
EXTRA_TEXTS = {
    "xlm-roberta-pad3": ["A man <pad> is playing <pad><pad> a guitar.", "<pad> x",
                         "Человек <pad> играет"],
    "mpnet-pad0": ["A man <pad> is playing <mask> a guitar.", "<mask><mask> x <pad>",
                   "<pad> Человек <mask> играет"],
}


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
    ap.add_argument("--heads", help="comma-separated classifier and SPLADE fixtures to write "
                    "(default: all)")
    a = ap.parse_args()
    heads = a.heads.split(",") if a.heads else None
    if a.families == "":
        if a.dense_head:
            dense_head(a.dense_head, a.out)
        if a.classifiers:
            classifiers(a.classifiers, heads)
        if a.sparse:
            sparse(a.sparse, heads)
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
        model.save_pretrained(folder, safe_serialization=True)
        tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"model_max_length": max_tokens}, f, indent=1)
        write_sentence_transformers_files(folder, model.config.hidden_size, pooling, max_tokens)
        inputs = [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS + EXTRA_TEXTS.get(name, [])]
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
            pooled = h.mean(0) if pooling == "mean" else h[0] if pooling == "cls" else h[-1]
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
        classifiers(a.classifiers, heads)
    if a.sparse:
        sparse(a.sparse, heads)


if __name__ == "__main__":
    main()
