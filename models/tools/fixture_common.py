"""What the fixture scripts share (make_family_fixtures.py and
head_fixtures.py): the input texts and pairs, and tokenizers trained here by
`tokenizers`' own trainers in each family's style (Unigram as XLM-R's,
WordPiece as BERT's and MPNet's, byte-level BPE as ModernBERT's and the
decoders', and as RoBERTa's with GPT-2's pre-tokenizer and RobertaProcessing)."""

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


def unigram_tokenizer(max_length, specials=("<s>", "<pad>", "</s>", "<unk>", "<mask>")):
    """XLM-R's style; `specials` in id order (the same five names)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import decoders
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" {2,}", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(train_corpus(), trainers.UnigramTrainer(
        vocab_size=VOCAB, special_tokens=list(specials), unk_token="<unk>"))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", bos), ("</s>", eos)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return tok, {"bos": bos, "eos": eos, "pad": tok.token_to_id("<pad>")}


def wordpiece_tokenizer(specials, template_cls, template_sep, unk=None, pad=None):
    """BERT's style; `specials` in id order, the unknown and padding tokens
    specials[3] and specials[1] unless `unk` and `pad` name others."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import decoders
    tok = Tokenizer(models.WordPiece(unk_token=unk or specials[3]))
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
    return tok, {"bos": cls, "eos": sep, "pad": tok.token_to_id(pad or specials[1])}


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


def roberta_tokenizer():
    """Byte-level BPE as roberta-base's tokenizer.json: no normalizer, GPT-2's
    ByteLevel pre-tokenizer (its own regex), RobertaProcessing (<s> A </s>,
    pairs <s> A </s></s> B </s>, all of segment 0)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers, decoders
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                 use_regex=True)
    tok.train_from_iterator(train_corpus(), trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.RobertaProcessing(("</s>", eos), ("<s>", bos),
                                                      trim_offsets=True, add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok, {"bos": bos, "eos": eos, "pad": tok.token_to_id("<pad>")}


def bert_pair_tokenizer():
    """BERT's WordPiece tokenizer whose pairs give the second text segment 1
    ([CLS] A [SEP] B [SEP], as bert-base's tokenizer.json), as a
    cross-encoder's input; DistilBERT's tokenizer is the same."""
    from tokenizers import processors
    tok, ids = wordpiece_tokenizer(["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], "[CLS]", "[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["bos"]), ("[SEP]", ids["eos"])])
    return tok, ids


# (query, passage) pairs for families with token types (bert): encoded as a
# pair, the passage's tokens are type 1.
PAIRS = [
    ("what does the man play?", "A man is playing a guitar."),
    ("Wer spielt?", "Ein Mann spielt Gitarre, und die Straße ist laut!"),
    ("x", "一个男人在弹吉他。"),
]


def write_sentence_transformers_files(folder, hidden, pooling, max_tokens):
    """sentence-transformers' description of a fixture folder: modules.json
    (Transformer, Pooling, Normalize), 1_Pooling/config.json ("mean", "cls"
    or "lasttoken") and sentence_bert_config.json (max_seq_length)."""
    import json
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
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
        json.dump({"word_embedding_dimension": hidden,
                   "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean",
                   "pooling_mode_lasttoken": pooling == "lasttoken"}, f, indent=1)


def long_text(tok, max_tokens):
    """A text whose encoding fills exactly max_tokens positions (cut there)."""
    words = " ".join(tokenizer_corpus.lines(200, seed=9))
    tok.enable_truncation(max_tokens)
    ids = tok.encode(words).ids
    tok.no_truncation()
    return words, ids
