"""Writes models/text/unicode_tables.cc: the character classes of Hugging Face
`tokenizers` (the version .venv has), asked of `tokenizers` itself code point
by code point, so that models/text classifies every code point (assigned or
not) as the original does, whatever Unicode version each of its parts follows:

  Rust's std (char::is_whitespace, is_numeric, to_lowercase);
  the unicode_categories crate (BertNormalizer's control test and its
    nonspacing marks, the Bert/Punctuation pre-tokenizers' punctuation);
  the regex crate's \\w and \\s (the Whitespace pre-tokenizer, added tokens'
    single_word test);
  Oniguruma's general categories, \\s, \\w, \\d and \\h (Split and Replace
    patterns, ByteLevel's GPT-2 split);
  unicode-normalization-alignments (NFD/NFKD/NFC/NFKC, StripAccents' marks);
  unicode-segmentation (the grapheme clusters of SentencePiece's Precompiled
    normalizer), whose properties are not observable through `tokenizers`'
    API: they are taken from the `regex` package (PyPI, pinned by
    scripts/setup-venv.sh) at the Unicode version unicode-segmentation
    follows, 17.0 for the 1.13 that tokenizers 0.23.3 is built with; the
    script stops when `regex` is at another version, and the code-space test
    (tests/integration/test_tokenizer_codespace.py) compares the result with
    `tokenizers` through a real Precompiled charsmap.

Normalisation keeps ICU's data (decompositions, combining classes and
compositions are stable for assigned characters; a full copy would be
hundreds of KB) and the table lists the code points the normalisation crate
does not know, which are then left unchanged (no decomposition, class 0, no
composition). That list is derived with Python's unicodedata (Unicode
14.0): every code point it has data for that the crate leaves unchanged, and
every code point it does not have assigned (which covers whatever ICU knows
beyond 14.0); the script stops if the crate knows a code point unicodedata
does not (then this reasoning would not hold).

  .venv/bin/python models/tools/make_unicode_tables.py           # rewrite
  .venv/bin/python models/tools/make_unicode_tables.py --check   # compare

--check regenerates in memory and exits 1 when the committed file differs
(tests/CMakeLists.txt runs it as the ctest `unicode_tables_current`).
"""

import argparse
import os
import sys
import unicodedata

import regex
import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text", "unicode_tables.cc")
ALL = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
SEP = 0xE000  # private use: no case, no decomposition, class 0, composes with nothing
# Grapheme cluster classes (UAX #29): Grapheme_Cluster_Break combined with
# Extended_Pictographic and Indic_Conjunct_Break, in the order of
# GraphemeClass in models/text/graphemes.cc. Hangul syllables (LV or LVT by
# their index) are listed as LVT; the C++ side tells them apart.
GRAPHEME_CLASSES = [
    ("Other", False, "None"), ("CR", False, "None"), ("LF", False, "None"),
    ("Control", False, "None"), ("Extend", False, "None"), ("Extend", False, "Extend"),
    ("Extend", False, "Linker"), ("ZWJ", False, "Extend"), ("Regional_Indicator", False, "None"),
    ("Prepend", False, "None"), ("SpacingMark", False, "None"), ("L", False, "None"),
    ("V", False, "None"), ("T", False, "None"), ("LVT", False, "None"),
    ("Other", True, "None"), ("Other", False, "Consonant"),
]
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
ONIG_CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd",
                   "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc",
                   "Cf", "Co", "Cn"]


def covered(pieces, n):
    """Which of n characters the pre-tokenizer's pieces cover."""
    out = bytearray(n)
    for _, (a, b) in pieces:
        out[a:b] = b"\x01" * (b - a)
    return out


def not_removed(pre, cps):
    """Code points a pre-tokenizer keeps (run over them all at once)."""
    text = "".join(map(chr, cps))
    cov = covered(pre.pre_tokenize_str(text), len(cps))
    return {c for c, k in zip(cps, cov) if k}


def onig_class(pattern, cps=ALL):
    """Code points Oniguruma's `pattern` (one character) matches."""
    kept = not_removed(pre_tokenizers.Split(Regex(pattern), behavior="removed"), cps)
    return {c for c in cps if c not in kept}


def isolated_between(pre, cps, filler="a"):
    """Code points the pre-tokenizer cuts out alone between two fillers, and
    the ones it removes: the text is filler c1 filler c2 ... filler."""
    f = chr(ord(filler))
    text = f + f.join(map(chr, cps)) + f
    alone, removed = set(), set(cps)
    for _, (a, b) in pre.pre_tokenize_str(text):
        for pos in range(a, b):
            if pos % 2 == 1:
                removed.discard(cps[pos // 2])
        if b - a == 1 and a % 2 == 1:
            alone.add(cps[a // 2])
    return alone, removed


def mapped(normalizer, cps, before="", after="", sep=SEP):
    """normalizer over each of before+chr(c)+after, all in one call, with
    `sep` (which the normalizer must keep) between them; sep itself alone."""
    alone = [c for c in cps if c == sep]
    cps = [c for c in cps if c != sep]
    text = chr(sep).join(before + chr(c) + after for c in cps)
    parts = normalizer.normalize_str(text).split(chr(sep))
    assert len(parts) == len(cps), "a probe's separator was changed"
    out = dict(zip(cps, parts))
    for c in alone:
        out[c] = normalizer.normalize_str(before + chr(c) + after)
    return out


def probe():
    t = {}
    ws_split = not_removed(pre_tokenizers.WhitespaceSplit(), ALL)
    t["whitespace"] = {c for c in ALL if c not in ws_split}
    bert_punct, bert_removed = isolated_between(pre_tokenizers.BertPreTokenizer(), ALL)
    assert bert_removed == t["whitespace"]
    t["punctuation"] = bert_punct
    t["numeric"], _ = isolated_between(pre_tokenizers.Digits(individual_digits=True), ALL)
    # Whitespace's \w+|[^\w\s]+ over "a c !": a word character joins the a,
    # another joins the !, a space is removed.
    text = "".join("a" + chr(c) + "!" for c in ALL)
    word, space = set(), set(ALL)
    for _, (a, b) in pre_tokenizers.Whitespace().pre_tokenize_str(text):
        for pos in range(a, b):
            if pos % 3 == 1:
                space.discard(ALL[pos // 3])
                if pos > a:  # the a before it is in its piece
                    word.add(ALL[pos // 3])
    t["regex_word"], t["regex_space"] = word, space
    clean = mapped(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                              strip_accents=False, lowercase=False), ALL, sep=ord("0"))
    t["bert_removed"] = {c for c, s in clean.items() if s == ""}
    assert {c for c, s in clean.items() if s == " "} == (t["whitespace"] | {9, 10, 13}) - t["bert_removed"]
    chinese = mapped(normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                                strip_accents=False, lowercase=False), ALL)
    t["chinese"] = {c for c, s in chinese.items() if s != chr(c)}
    lower = mapped(normalizers.Lowercase(), ALL)
    t["lower"] = {c: s for c, s in lower.items() if s != chr(c)}
    t["combining_mark"] = {c for c, s in mapped(normalizers.StripAccents(), ALL).items() if s == ""}
    forms = {}
    for name, n in (("nfd", normalizers.NFD()), ("nfkd", normalizers.NFKD()),
                    ("nfc", normalizers.NFC()), ("nfkc", normalizers.NFKC())):
        forms[name] = mapped(n, ALL)
    stable = [c for c in ALL if c != SEP and forms["nfd"][c] == chr(c)]
    # Nonspacing marks (BertNormalizer's strip_accents runs NFD first, so
    # only characters NFD keeps matter).
    strip = mapped(normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                              strip_accents=True, lowercase=False), stable)
    t["nonspacing"] = {c for c, s in strip.items() if s == ""}
    # Canonical combining class, nonzero: ordered after U+0334 (class 1) or
    # before U+0301 (class 230).
    after = mapped(normalizers.NFD(), stable, after="\u0334")
    before = mapped(normalizers.NFD(), stable, before="\u0301")
    ccc = {c for c in stable if after[c] != chr(c) + "\u0334" or before[c] != "\u0301" + chr(c)}
    t["norm_unknown"], t["norm_dont_care"] = norm_unknown(forms, ccc)
    t["nfd_changed"] = {c for c in ALL if c != SEP and forms["nfd"][c] != chr(c)}
    # Each category's index, a bit at a time: five probes, each of the
    # categories with that bit set.
    index = dict.fromkeys(ALL, 0)
    for bit in range(5):
        cats = [cat for i, cat in enumerate(ONIG_CATEGORIES) if i >> bit & 1]
        for c in onig_class("[" + "".join(r"\p{" + cat + "}" for cat in cats) + "]"):
            index[c] |= 1 << bit
    for i, cat in enumerate(ONIG_CATEGORIES):
        t["onig_" + cat] = {c for c, k in index.items() if k == i}
    # Index 0 is also "in none": Lu asked alone.
    assert t["onig_Lu"] == onig_class(r"\p{Lu}"), "a code point in no category"
    for name, pat in (("s", r"\s"), ("w", r"\w"), ("d", r"\d"), ("h", r"\h")):
        t["onig_" + name] = onig_class(pat)
    t["grapheme"] = grapheme_classes()
    return t


def grapheme_classes():
    """Each code point's index in GRAPHEME_CLASSES, from `regex`'s Unicode
    data, which must be unicode-segmentation's version (17.0): U+1ADD (new
    in 17.0) extends a cluster and U+1AEC (18.0) does not."""
    def props(ch):
        return regex.match(r"\p{GCB=Extend}", ch) is not None
    assert props("\u1add") and not props("\u1aec"), (
        f"the regex package {regex.__version__} is not at Unicode 17.0 "
        "(scripts/setup-venv.sh pins the version that is)")
    text = "".join(map(chr, ALL))

    def members(pattern):
        return {ord(m) for m in regex.findall(pattern, text)}

    gcb, incb, lv = {}, {}, set()
    for name in ("CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
                 "SpacingMark", "L", "V", "T", "LV", "LVT"):
        for c in members(r"\p{GCB=" + name + "}"):
            assert c not in gcb
            gcb[c] = "LVT" if name == "LV" else name
            if name == "LV":
                lv.add(c)
    pict = members(r"\p{Extended_Pictographic}")
    for name in ("Consonant", "Linker", "Extend"):
        for c in members(r"\p{InCB=" + name + "}"):
            incb[c] = name
    index = {k: i for i, k in enumerate(GRAPHEME_CLASSES)}
    out = {}
    for c in ALL:
        key = (gcb.get(c, "Other"), c in pict, incb.get(c, "None"))
        assert key in index, f"U+{c:04X}: grapheme properties {key} have no class"
        out[c] = index[key]
        hangul = HANGUL_FIRST <= c <= HANGUL_LAST
        assert (key[0] == "LVT") == hangul, f"U+{c:04X}: LV/LVT outside the Hangul syllables"
        if hangul:
            assert (c in lv) == ((c - HANGUL_FIRST) % 28 == 0), f"U+{c:04X}: LV by its index"
    return out


def norm_unknown(forms, crate_ccc):
    """Code points whose normalisation data the crate lacks (see above)."""
    def has_data(c):
        ch = chr(c)
        return (unicodedata.decomposition(ch) != "" or unicodedata.combining(ch) != 0)

    crate_known = {c for c in ALL if c != SEP and (
        any(forms[f][c] != chr(c) for f in forms) or c in crate_ccc)}
    # Compositions: every canonical pair unicodedata composes.
    pairs = []
    for c in ALL:
        d = unicodedata.decomposition(chr(c))
        if d and not d.startswith("<"):
            parts = [int(x, 16) for x in d.split()]
            if len(parts) == 2 and unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(c):
                pairs.append((c, parts[0], parts[1]))
    probe_text = chr(SEP).join(chr(a) + chr(b) for _, a, b in pairs)
    got = normalizers.NFC().normalize_str(probe_text).split(chr(SEP))
    second = set()
    for (r, a, b), g in zip(pairs, got):
        if g == chr(r):
            second.add(b)
        else:
            assert r not in crate_known, f"U+{r:04X}: decomposed but not composed"
    crate_known |= second
    unknown, dont_care = set(), set()
    for c in ALL:
        if c == SEP:
            continue
        assigned = unicodedata.category(chr(c)) != "Cn"
        if c in crate_known:
            assert assigned, f"U+{c:04X}: normalisation data newer than unicodedata"
            continue
        if not assigned or has_data(c):
            unknown.add(c)
        else:
            dont_care.add(c)  # no data either way
    return unknown, dont_care


def toggles(members, dont_care=frozenset()):
    """Sorted boundaries where membership flips; don't-care code points join
    whichever side makes fewer boundaries (a run between two members)."""
    out, inside = [], False
    for c in range(0x110001):
        m = c in members
        if c in dont_care or 0xD800 <= c <= 0xDFFF:
            continue
        if m != inside:
            out.append(c)
            inside = m
    return out


def lower_runs(lower):
    """(first, count, delta, stride) runs of single-code-point mappings, and
    the longer ones apart."""
    single = sorted((c, ord(s) - c) for c, s in lower.items() if len(s) == 1)
    multi = sorted((c, s) for c, s in lower.items() if len(s) != 1)
    runs = []
    for c, d in single:
        if runs:
            first, count, delta, stride = runs[-1]
            last = first + (count - 1) * stride
            if delta == d and count == 1 and c - first in (1, 2):
                runs[-1] = (first, 2, delta, c - first)
                continue
            if delta == d and count > 1 and c == last + stride:
                runs[-1] = (first, count + 1, delta, stride)
                continue
        runs.append((c, 1, d, 1))
    return runs, multi


# Numbers as text: base-32 digits, high first; FINAL ends a number,
# MORE continues it (unicode_tables.h decodes them).
FINAL = "0123456789ABCDEFGHIJKLMNOPQRSTUV"
MORE = "abcdefghijklmnopqrstuvwxyz!#$%&*"


def encode(numbers):
    out = []
    for v in numbers:
        assert v >= 0
        digits = [FINAL[v & 31]]
        v >>= 5
        while v:
            digits.append(MORE[v & 31])
            v >>= 5
        out.append("".join(reversed(digits)))
    return "".join(out)


def deltas(values):
    prev, out = 0, []
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def emit(name, text, comment):
    lines = [f"// {comment}", f"extern const char {name}[] ="]
    for i in range(0, len(text), 92):
        lines.append(f'    "{text[i:i + 92]}"')
    if not text:
        lines.append('    ""')
    lines[-1] += ";"
    return "\n".join(lines) + "\n"


def render(t):
    sets = [
        ("kWhitespace", t["whitespace"], None,
         "Rust's char::is_whitespace (White_Space)"),
        ("kBertRemoved", t["bert_removed"], None,
         "BertNormalizer's clean_text removes: NUL, U+FFFD and unicode_categories' "
         "is_other (Cc, Cf, Cs, Co; not unassigned) but tab, LF and CR"),
        ("kPunctuation", t["punctuation"], None,
         "BertPreTokenizer's and Punctuation's punctuation: ASCII punctuation or "
         "unicode_categories' P*"),
        ("kNumeric", t["numeric"], None, "Rust's char::is_numeric (Nd, Nl, No)"),
        ("kRegexWord", t["regex_word"], None, "the regex crate's \\w"),
        ("kRegexSpace", t["regex_space"], None, "the regex crate's \\s"),
        ("kChinese", t["chinese"], None, "BertNormalizer's Chinese characters"),
        ("kCombiningMark", t["combining_mark"], None,
         "StripAccents' marks: unicode-normalization-alignments' is_combining_mark"),
        ("kNonspacingMark", t["nonspacing"], t["nfd_changed"],
         "BertNormalizer's strip_accents: unicode_categories' Mn (only where NFD "
         "keeps a character)"),
        ("kNormUnknown", t["norm_unknown"], t["norm_dont_care"],
         "code points unicode-normalization-alignments leaves unchanged where ICU "
         "may have normalisation data"),
        ("kOnigSpace", t["onig_s"], None, "Oniguruma's \\s"),
        ("kOnigDigit", t["onig_d"], None, "Oniguruma's \\d"),
        ("kOnigHex", t["onig_h"], None, "Oniguruma's \\h (a hexadecimal digit)"),
    ]
    body = []
    for name, members, dont_care, comment in sets:
        body.append(emit(name, encode(deltas(toggles(members, dont_care or frozenset()))),
                         comment + "; boundaries"))
    # Oniguruma's \w: where it differs from the regex crate's.
    diff = t["onig_w"] ^ t["regex_word"]
    body.append(emit("kOnigWordDiff", encode(deltas(toggles(diff))),
                     "Oniguruma's \\w: the code points where it differs from kRegexWord; "
                     "boundaries"))
    cat_of = {}
    for i, cat in enumerate(ONIG_CATEGORIES):
        for c in t["onig_" + cat]:
            assert c not in cat_of, f"U+{c:04X} in two categories"
            cat_of[c] = i
    missing = [c for c in ALL if c not in cat_of]
    assert not missing, f"U+{missing[0]:04X} in no category"
    runs, prev = [], None
    for c in ALL:
        if cat_of[c] != prev:
            runs.append((c, cat_of[c]))
            prev = cat_of[c]
    numbers, last = [], 0
    for c, cat in runs:
        numbers += [c - last, cat]
        last = c
    body.append(emit("kOnigCategoryRuns", encode(numbers),
                     "Oniguruma's general categories: runs, each the distance from the "
                     "previous run's first code point and the index in kOnigCategoryNames"))
    names = ", ".join(f'"{n}"' for n in ONIG_CATEGORIES)
    body.append(f"extern const char* const kOnigCategoryNames[] = {{{names}}};\n")
    numbers, last, prev = [], 0, None
    for c in ALL:
        k = t["grapheme"][c]
        if k != prev:
            numbers += [c - last, k]
            last, prev = c, k
    body.append(emit("kGraphemeRuns", encode(numbers),
                     "unicode-segmentation's grapheme cluster classes (Unicode 17.0, from the regex "
                     "package): runs, each the distance from the previous run's "
                     "first code point and the index in kGraphemeClassNames"))
    names = ", ".join(f'"{g}{"+ExtPict" if p else ""}{"" if i == "None" else "+InCB_" + i}"'
                      for g, p, i in GRAPHEME_CLASSES)
    body.append(f"extern const char* const kGraphemeClassNames[] = {{{names}}};\n")
    runs, multi = lower_runs(t["lower"])
    numbers, last = [], 0
    for first, count, delta, stride in runs:
        numbers += [first - last, count, 2 * delta if delta >= 0 else -2 * delta - 1, stride]
        last = first
    body.append(emit("kLowerRuns", encode(numbers),
                     "Rust's char::to_lowercase: runs of one-code-point mappings, each the "
                     "distance from the previous run's first code point, the count, the "
                     "difference (zigzag: 2d, or -2d-1 when negative) and the stride"))
    rows = ["// ... and the mappings to more than one code point.",
            "extern const LowerMulti kLowerMulti[] = {"]
    for c, s in multi:
        cps = ", ".join(f"0x{ord(x):X}" for x in s)
        rows.append(f"    {{0x{c:X}, {len(s)}, {{{cps}}}}},")
    rows.append("};")
    rows.append(f"extern const size_t kLowerMultiSize = {len(multi)};")
    body.append("\n".join(rows) + "\n")
    head = ("// Generated by models/tools/make_unicode_tables.py from Hugging Face tokenizers "
            f"{tokenizers.__version__}\n"
            "// (asked code point by code point; Python's unicodedata "
            f"{unicodedata.unidata_version} for kNormUnknown). Do not edit.\n"
            '#include "models/text/unicode_tables.h"\n\nnamespace infer::text::tables {\n\n')
    return head + "\n".join(body) + "\n}  // namespace infer::text::tables\n"


def load_cache(path):
    import pickle
    if not os.path.exists(path):
        with open(path, "wb") as f:
            pickle.dump(probe(), f)
    with open(path, "rb") as f:
        return pickle.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the committed file instead of writing it")
    ap.add_argument("--probe-cache", help=argparse.SUPPRESS)  # a pickle of probe(), for work on render
    args = ap.parse_args()
    text = render(probe() if not args.probe_cache else load_cache(args.probe_cache))
    if args.check:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUT} is not what `tokenizers` {tokenizers.__version__} gives: "
                      "run models/tools/make_unicode_tables.py", file=sys.stderr)
                return 1
        print(f"{OUT} matches `tokenizers` {tokenizers.__version__}")
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
