"""infer-tokenize against Hugging Face `tokenizers` over the whole code space:
random strings drawn from every plane (assigned, unassigned and private-use
code points, no surrogates), the characters new in Unicode 15.1 and 16.0,
combining sequences, zero-width-joiner emoji, mixed with ordinary
multilingual words and unusual whitespace. The ids (the serving path,
--ids-only) must be identical for every string, on MiniLM's real
tokenizer.json and on tokenizers trained here (test_tokenizer_oracle.py's
builders): WordPiece with BertNormalizer lower-cased and cased, each with and
without strip_accents; byte-level BPE; a Qwen-style Split regex (\\p{L},
\\p{N}, \\s) BPE; NFKC/Strip/WhitespaceSplit/Punctuation/Digits WordPiece;
NFD/StripAccents/Lowercase/Whitespace BPE; Unigram (NFKC, Metaspace,
byte fallback); and multilingual-e5-small's real tokenizer.json, whose
SentencePiece Precompiled normalizer looks up whole grapheme clusters
(unicode-segmentation's, Unicode 17.0: models/text/graphemes.h).

200,000 strings per tokenizer (the same strings for each): 88 s for the
whole test on 2 cores (measured; 163 s with a build sharing them). INFER_CODESPACE_STRINGS sets
another number (e.g. 5000000 for a long run) and INFER_CODESPACE_SEED
another seed; a failure names the seed, the tokenizer and the first strings
that differ.

Environment: INFER_TOKENIZE_BINARY (the built infer-tokenize).
"""

import json
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from tokenizers import Tokenizer, normalizers

import test_tokenizer_oracle as oracle
import tokenizer_corpus

BINARY = os.environ.get("INFER_TOKENIZE_BINARY", "")
STRINGS = int(os.environ.get("INFER_CODESPACE_STRINGS", "200000"))
SEED = int(os.environ.get("INFER_CODESPACE_SEED", "20250101"))

# Blocks with characters new in Unicode 15.1 and 16.0 (whole blocks: the
# code points still unassigned in them are drawn too).
NEW_BLOCKS = [
    (0x2FF0, 0x2FFF), (0x31E0, 0x31EF), (0x2EBF0, 0x2EE5F),  # 15.1: IDCs, CJK strokes, Ext. I
    (0x0890, 0x089F), (0x1C80, 0x1C8F), (0xA7C0, 0xA7DF),  # 16.0: Arabic, Cyrillic, Latin case
    (0x105C0, 0x105FF), (0x10D40, 0x10D8F), (0x10EC0, 0x10EFF), (0x11380, 0x113FF),
    (0x116D0, 0x116FF), (0x11BC0, 0x11BFF), (0x11F00, 0x11F5F), (0x13460, 0x143FF),
    (0x16100, 0x1613F), (0x16D40, 0x16D7F), (0x1CC00, 0x1CEBF), (0x1E5D0, 0x1E5FF),
    (0x1B00, 0x1B7F), (0x1E030, 0x1E08F), (0x1E4D0, 0x1E4FF), (0x1F6D0, 0x1F6FF),
    (0x1FA70, 0x1FAFF), (0x0E00, 0x0E7F), (0x0590, 0x05FF),
]
MARK_BLOCKS = [(0x0300, 0x036F), (0x0483, 0x0489), (0x0591, 0x05C7), (0x0610, 0x061A),
               (0x064B, 0x065F), (0x0900, 0x0903), (0x093A, 0x094F), (0x0E31, 0x0E3A),
               (0x0E47, 0x0E4E), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF),
               (0x302A, 0x302F), (0x3099, 0x309A), (0xFE20, 0xFE2F), (0x1D165, 0x1D169),
               (0x1E8D0, 0x1E8D6), (0x11100, 0x11134), (0x16AF0, 0x16AF4)]
EMOJI = ["👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "🧑🏿‍🚀", "🇯🇵", "1️⃣", "❤️‍🔥", "🫨", "🪿", "🐦‍⬛",
         "🙂‍↔️", "\U0001FAE9", "\U0001FAC6", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
SPACES = [" ", " ", "  ", "\t", "\r", "\x0b", "\x0c", "\x85", "\u00a0", "\u1680", "\u2000",
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b", "\ufeff"]
BASES = "aeiouAEIOUnNcCsSzZ" + "αεοΑΕΟиеИЕ" + "가나한" + "あかカ" + "अकक" + "กข" + "אב" + "ابت"


def _random_code_point(rng):
    while True:
        c = rng.randrange(0x110000)
        if not 0xD800 <= c <= 0xDFFF and c != 0x0A:
            return chr(c)


def _in_blocks(rng, blocks):
    a, b = rng.choice(blocks)
    c = rng.randint(a, b)
    return chr(c)


def strings(n, seed):
    """n random strings, none containing a newline."""
    rng = random.Random(seed)
    words = [w for line in tokenizer_corpus.lines(2000, seed=seed) for w in line.split(" ") if w]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.random()
            if kind < 0.22:  # anywhere at all
                parts.append(_random_code_point(rng))
            elif kind < 0.32:  # the BMP, most of it assigned
                c = rng.randrange(0x10000)
                parts.append(chr(c) if not 0xD800 <= c <= 0xDFFF and c != 0x0A else "x")
            elif kind < 0.42:  # planes 1 to 3
                parts.append(chr(rng.randrange(0x10000, 0x40000)))
            elif kind < 0.55:  # blocks with Unicode 15.1 and 16.0 characters
                parts.append(_in_blocks(rng, NEW_BLOCKS))
            elif kind < 0.67:  # a base and combining marks, in any order
                parts.append(rng.choice(BASES) + "".join(
                    _in_blocks(rng, MARK_BLOCKS) for _ in range(rng.randint(1, 3))))
            elif kind < 0.72:
                parts.append(rng.choice(EMOJI))
            elif kind < 0.85:
                parts.append(rng.choice(words))
            else:
                parts.append(rng.choice(SPACES))
        out.append("".join(parts))
    return out


def build_wordpiece(train, lowercase, strip_accents):
    tok = oracle.build_wordpiece_bert(train)
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
    return tok


def build_unigram_nfkc(train):
    # NFKC here; SentencePiece's Precompiled rules come with the real e5 file.
    tok = oracle.build_unigram(train)
    tok.normalizer = normalizers.NFKC()
    return tok


BUILDERS = {
    "wordpiece_lower_strip": lambda t: build_wordpiece(t, True, True),
    "wordpiece_lower_keep_accents": lambda t: build_wordpiece(t, True, False),
    "wordpiece_cased_strip": lambda t: build_wordpiece(t, False, True),
    "wordpiece_cased_keep_accents": lambda t: build_wordpiece(t, False, False),
    "bpe_bytelevel": oracle.build_bpe_bytelevel,
    "bpe_split_regex": oracle.build_bpe_split_regex,
    "wordpiece_template": oracle.build_wordpiece_template,
    "bpe_whitespace": oracle.build_bpe_whitespace,
    "unigram_nfkc": build_unigram_nfkc,
}


def start_ours(path, input_path):
    """infer-tokenize over the strings, running while `tokenizers` runs."""
    with open(input_path, "rb") as f:
        return subprocess.Popen([BINARY, "--tokenizer", path, "--ids-only"], stdin=f,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish_ours(proc):
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"infer-tokenize exited {proc.returncode}: {err.decode()[-2000:]}")
    return [json.loads(line).get("ids") for line in out.decode("utf-8").split("\n") if line]


@unittest.skipUnless(BINARY, "INFER_TOKENIZE_BINARY is not set")
class TokenizerCodeSpaceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tokenizer-codespace-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        cls.texts = strings(STRINGS, SEED)
        cls.input = os.path.join(cls.dir, "strings.txt")
        with open(cls.input, "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(cls.texts) + "\n")
        train = tokenizer_corpus.lines(3000, seed=7)
        cls.files = {}
        for name, build in BUILDERS.items():
            path = os.path.join(cls.dir, name + ".json")
            build(train).save(path)
            cls.files[name] = path
        minilm = oracle.minilm_tokenizer_json()
        if minilm:
            cls.files["minilm_real"] = minilm
        e5 = oracle.e5_tokenizer_json()
        if e5:
            cls.files["multilingual_e5_real"] = e5

    def compare(self, name):
        if name not in self.files:
            self.skipTest(f"{name}: the real file's package is not installed "
                          "(scripts/setup-venv.sh --test installs it)")
        proc = start_ours(self.files[name], self.input)
        tok = Tokenizer.from_file(self.files[name])
        tok.no_truncation()
        tok.no_padding()
        want = [e.ids for e in tok.encode_batch(self.texts)]
        got = finish_ours(proc)
        self.assertEqual(len(got), len(self.texts))
        bad = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
        detail = ""
        for i in bad[:3]:
            detail += (f"\n {ascii(self.texts[i])}\n  want {want[i]}\n   got {got[i]}\n"
                       f"  want {tok.encode(self.texts[i]).tokens}")
        self.assertFalse(bad, f"{name}: {len(bad)} of {len(self.texts)} strings differ "
                              f"(seed {SEED}){detail}")

    def test_strings_cover_the_code_space(self):
        chars = {ord(c) for t in self.texts[:20000] for c in t}
        planes = {c >> 16 for c in chars}
        self.assertEqual(planes, set(range(17)))
        self.assertTrue(any(0xE000 <= c <= 0xF8FF for c in chars))
        self.assertTrue(any(0x2EBF0 <= c <= 0x2EE5D for c in chars))  # Unicode 15.1
        self.assertTrue(any(0x10D40 <= c <= 0x10D8F for c in chars))  # Unicode 16.0
        self.assertFalse(any(0xD800 <= c <= 0xDFFF or c == 0x0A for c in chars))


def _add_cases():
    for name in list(BUILDERS) + ["minilm_real", "multilingual_e5_real"]:
        setattr(TokenizerCodeSpaceTest, f"test_{name}", lambda self, name=name: self.compare(name))


_add_cases()

if __name__ == "__main__":
    unittest.main()
