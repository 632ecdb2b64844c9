"""A multilingual test corpus for tokenizers, made from a seed (the same lines
on every machine): words in Latin (with accents, precomposed and decomposed),
Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, CJK, Hangul, Japanese
kana and emoji (with skin tones and zero-width-joiner sequences); combining
marks (stacked, unordered), zero-width and control characters, unusual
whitespace (tab, no-break, ideographic, line separators), digits of several
scripts, punctuation and symbols, casing traps (Turkish I, German sharp s,
Greek final sigma, ligatures), very long words, and the added tokens the
tests define, in and out of word boundaries.

  lines(n, seed) -> list of str, none containing "\\n"
"""

import random

LATIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZàáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœŒšžŠŽłŁđĐğĞıİşŞ"
CYRILLIC = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯіїєґ"
GREEK = "αβγδεζηθικλμνξοπρσςτυφχψωΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩάέήίόύώϊϋΐΰ"
ARABIC = "ابتثجحخدذرزسشصضطظعغفقكلمنهويءآأؤإئىةًٌٍَُِّْ"
HEBREW = "אבגדהוזחטיכךלמםנןסעפףצץקרשתְֱֲֳִֵֶַָֹֻּׁׂ"
DEVANAGARI = "अआइईउऊऋएऐओऔकखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसहािीुूृेैोौंःँ़्"
THAI = "กขฃคฅฆงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮะัาำิีึืุูเแโใไ่้๊๋็์"
CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明"
HANGUL = "가나다라마바사아자차카타파하한국어서울대학교사랑해요감사합니다"
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンー"
EMOJI = ["😀", "😂", "🥲", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇯🇵", "🇫🇷", "✈️", "🤖", "🧑🏿‍🚀"]
COMBINING = "\u0300\u0301\u0302\u0303\u0308\u030a\u0323\u0327\u0328\u0331\u0345\u05b0\u064b\u093c\u0e31"
ODD = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\x00", "\x01", "\x07", "\x1b",
       "\x7f", "\u0085", "\u2028", "\u2029", "\ufffd", "\ue000", "\U000f0000"]
SPACES = [" ", " ", " ", "  ", "\t", "\u00a0", "\u3000", "\u2003", "\u202f", "\x0b", "\x0c", "\r"]
DIGITS = "0123456789٠١٢٣٤٥٦٧٨٩०१२३४५६७८९๐๑๒๓๔๕๖๗๘๙²³½Ⅻ"
PUNCT = ".,;:!?-—–'\"()[]{}<>/\\@#$%^&*_+=~`|«»“”‘’…¡¿、。「」・؟،"
TRAPS = ["İstanbul", "ISTANBUL", "straße", "STRASSE", "ΣΟΦΟΣ", "σοφος", "ﬁnance", "ﬀ", "Å", "Å",
         "é", "é", "ñ", "ñ", "Ω", "Ω", "㍿", "①", "ｆｕｌｌ", "ＡＢＣ", "½", "x²", "ǅ", "ẞ", "K"]


def _word(rng, alphabet, lo=1, hi=9):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def _token(rng, added):
    r = rng.random()
    if r < 0.22:
        return _word(rng, LATIN[:26], 1, 8)
    if r < 0.30:
        return _word(rng, LATIN)
    if r < 0.35:
        return _word(rng, CYRILLIC)
    if r < 0.39:
        return _word(rng, GREEK)
    if r < 0.43:
        return _word(rng, ARABIC)
    if r < 0.46:
        return _word(rng, HEBREW)
    if r < 0.50:
        return _word(rng, DEVANAGARI)
    if r < 0.53:
        return _word(rng, THAI, 2, 14)
    if r < 0.58:
        return _word(rng, CJK, 1, 6)
    if r < 0.60:
        return _word(rng, HANGUL, 1, 5)
    if r < 0.63:
        return _word(rng, KANA, 1, 7)
    if r < 0.66:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    if r < 0.69:  # stacked combining marks, in no canonical order
        base = rng.choice("aeiouAEIOUnc")
        return base + "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 6)))
    if r < 0.72:
        return _word(rng, DIGITS, 1, 6)
    if r < 0.77:
        return _word(rng, PUNCT, 1, 3)
    if r < 0.80:
        return rng.choice(TRAPS)
    if r < 0.82:
        return rng.choice(ODD)
    if r < 0.83:  # a very long word
        return _word(rng, LATIN[:26] + "éü", 90, 320)
    if r < 0.88 and added:
        return rng.choice(added)
    return _word(rng, LATIN[:26], 2, 10).capitalize()


def lines(n, seed, added=()):
    """n lines of 0 to ~60 tokens; `added` strings (e.g. added tokens) appear
    inside them too."""
    rng = random.Random(seed)
    added = list(added)
    out = []
    for i in range(n):
        k = rng.choice([0, 1, 2, 3, 5, 8, 12, 20, 30, 60]) if i % 50 else rng.randint(0, 2)
        parts = []
        for _ in range(k):
            parts.append(_token(rng, added))
            # Mostly a space between tokens, sometimes none, sometimes odd ones.
            r = rng.random()
            parts.append(" " if r < 0.75 else "" if r < 0.9 else rng.choice(SPACES))
        text = "".join(parts)
        if rng.random() < 0.1:
            text = rng.choice(SPACES) + text
        out.append(text.replace("\n", " "))
    return out
