#include "models/text/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf16.h>

#include <algorithm>
#include <cstdlib>

#include "models/text/unicode_tables.h"

namespace infer::text {
namespace {

const icu::Normalizer2& Icu(NormalForm form) {
  // ICU's singletons live for the process; failure means ICU's data is
  // missing, which no tokenizer could survive.
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = form == NormalForm::kNfd    ? icu::Normalizer2::getNFDInstance(err)
                              : form == NormalForm::kNfkd ? icu::Normalizer2::getNFKDInstance(err)
                              : form == NormalForm::kNfc  ? icu::Normalizer2::getNFCInstance(err)
                                                          : icu::Normalizer2::getNFKCInstance(err);
  if (U_FAILURE(err) || n == nullptr) std::abort();
  return *n;
}

// A generated set (unicode_tables.h), decoded on first use.
#define INFER_SET(name)                                     \
  const tables::CodePointSet& name##Set() {                 \
    static const tables::CodePointSet set(tables::k##name); \
    return set;                                             \
  }
INFER_SET(Whitespace)
INFER_SET(RegexSpace)
INFER_SET(Numeric)
INFER_SET(Punctuation)
INFER_SET(BertRemoved)
INFER_SET(Chinese)
INFER_SET(NonspacingMark)
INFER_SET(CombiningMark)
INFER_SET(RegexWord)
INFER_SET(NormUnknown)
#undef INFER_SET

bool InSet(const tables::CodePointSet& set, char32_t c) { return set.Contains(c); }

struct LowerRun {
  uint32_t first, count;
  int64_t delta;
  uint32_t stride;
};

const std::vector<LowerRun>& LowerRuns() {
  static const std::vector<LowerRun> runs = [] {
    const std::vector<uint32_t> n = tables::DecodeNumbers(tables::kLowerRuns);
    std::vector<LowerRun> out;
    uint32_t first = 0;
    for (size_t i = 0; i + 3 < n.size(); i += 4) {
      first += n[i];
      const int64_t zigzag = n[i + 2];
      out.push_back({first, n[i + 1], zigzag % 2 == 0 ? zigzag / 2 : -(zigzag + 1) / 2, n[i + 3]});
    }
    return out;
  }();
  return runs;
}

// Code points the normalisation of `tokenizers` does not know (assigned
// after its tables' Unicode version): no decomposition, class 0, no
// composition, whatever ICU says.
bool NormUnknown(char32_t c) { return InSet(NormUnknownSet(), c); }

uint8_t CombiningClass(char32_t c) {
  return c < 0x300 || NormUnknown(c) ? 0 : u_getCombiningClass(static_cast<UChar32>(c));
}

// Full decomposition of c (canonical or compatibility), appended to out.
void Decompose(char32_t c, bool compat, std::vector<char32_t>* out) {
  if (c < 0xC0) {  // nothing below U+00C0 decomposes canonically
    if (!compat || c < 0xA0) {
      out->push_back(c);
      return;
    }
  }
  // The quick-check property is a table lookup; most characters pass it,
  // and those have no decomposition.
  if (u_getIntPropertyValue(static_cast<UChar32>(c),
                            compat ? UCHAR_NFKD_QUICK_CHECK : UCHAR_NFD_QUICK_CHECK) == UNORM_YES ||
      NormUnknown(c)) {
    out->push_back(c);
    return;
  }
  icu::UnicodeString d;
  if (!Icu(compat ? NormalForm::kNfkd : NormalForm::kNfd)
           .getDecomposition(static_cast<UChar32>(c), d)) {
    out->push_back(c);
    return;
  }
  for (int32_t i = 0; i < d.length();) {
    UChar32 cp = d.char32At(i);
    out->push_back(static_cast<char32_t>(cp));
    i += U16_LENGTH(cp);
  }
}

// Decomposition with canonical ordering: marks between two starters are
// sorted by combining class, stably, carrying their change tags with them.
std::vector<CharChange> Decompositions(const std::vector<char32_t>& in, bool compat) {
  std::vector<CharChange> out;
  out.reserve(in.size());
  std::vector<uint8_t> classes;
  classes.reserve(in.size());
  size_t pending = 0;
  auto sort_pending = [&] {
    // Marks already in canonical order (nearly always) need no sort.
    if (out.size() - pending > 1 && !std::is_sorted(classes.begin() + pending, classes.end())) {
      std::vector<size_t> order(out.size() - pending);
      for (size_t i = 0; i < order.size(); ++i) order[i] = pending + i;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return classes[a] < classes[b]; });
      std::vector<CharChange> chars;
      std::vector<uint8_t> cls;
      for (size_t i : order) {
        chars.push_back(out[i]);
        cls.push_back(classes[i]);
      }
      std::copy(chars.begin(), chars.end(), out.begin() + pending);
      std::copy(cls.begin(), cls.end(), classes.begin() + pending);
    }
    pending = out.size();
  };
  std::vector<char32_t> d;
  for (char32_t c : in) {
    d.clear();
    Decompose(c, compat, &d);
    for (size_t i = 0; i < d.size(); ++i) {
      const uint8_t cls = CombiningClass(d[i]);
      if (cls == 0) sort_pending();
      out.push_back({d[i], i == 0 ? 0 : 1});
      classes.push_back(cls);
    }
  }
  sort_pending();
  return out;
}

// Canonical composition of a decomposed sequence, as the
// unicode-normalization crate's Recompositions iterator does it (the same
// blocking rules as UAX #15), with the change tags of composed characters
// summed: a composed character replaces the first and removes the others.
std::vector<CharChange> Recompose(const std::vector<CharChange>& in) {
  std::vector<CharChange> out;
  out.reserve(in.size());
  std::vector<CharChange> blocked;
  bool has_composee = false;
  CharChange composee{};
  int last_ccc = -1;  // -1: none since the composee
  const icu::Normalizer2& nfc = Icu(NormalForm::kNfc);
  for (const CharChange& ch : in) {
    const int cls = CombiningClass(ch.c);
    if (!has_composee) {
      if (cls != 0) {
        out.push_back(ch);
        continue;
      }
      composee = ch;
      has_composee = true;
      continue;
    }
    if (last_ccc >= 0 && last_ccc >= cls) {  // blocked from the composee
      if (cls == 0) {
        out.push_back(composee);
        out.insert(out.end(), blocked.begin(), blocked.end());
        blocked.clear();
        composee = ch;
        last_ccc = -1;
        continue;
      }
      blocked.push_back(ch);
      last_ccc = cls;
      continue;
    }
    const UChar32 r = nfc.composePair(static_cast<UChar32>(composee.c), static_cast<UChar32>(ch.c));
    if (r >= 0 && !NormUnknown(static_cast<char32_t>(r))) {
      composee = {static_cast<char32_t>(r), composee.change + ch.change - 1};
      continue;
    }
    if (last_ccc < 0 && cls == 0) {
      out.push_back(composee);
      composee = ch;
      continue;
    }
    blocked.push_back(ch);
    last_ccc = cls;
  }
  if (has_composee) out.push_back(composee);
  out.insert(out.end(), blocked.begin(), blocked.end());
  return out;
}

}  // namespace

bool ValidUtf8(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len;
    char32_t c;
    if ((b & 0xE0) == 0xC0) {
      len = 2;
      c = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3;
      c = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4;
      c = b & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
        (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
      return false;
    }
    i += len;
  }
  return true;
}

char32_t DecodeUtf8(absl::string_view s, size_t* i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *i;
  const unsigned char b = p[0];
  if (b < 0x80) {
    *i += 1;
    return b;
  }
  if ((b & 0xE0) == 0xC0) {
    *i += 2;
    return (char32_t{b & 0x1Fu} << 6) | (p[1] & 0x3F);
  }
  if ((b & 0xF0) == 0xE0) {
    *i += 3;
    return (char32_t{b & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3F);
  }
  *i += 4;
  return (char32_t{b & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
         (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3F);
}

int Utf8Length(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

size_t CountChars(absl::string_view s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return InSet(WhitespaceSet(), c);
}

bool IsRegexSpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return InSet(RegexSpaceSet(), c);
}

bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return InSet(NumericSet(), c);
}

bool IsBertPunctuation(char32_t c) {
  if (c < 0x80) return IsAsciiPunctuation(c);
  return InSet(PunctuationSet(), c);
}

bool IsAsciiPunctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

bool IsBertRemoved(char32_t c) {
  if (c < 0x80) return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
  return InSet(BertRemovedSet(), c);
}

bool IsChineseChar(char32_t c) { return c >= 0x3400 && InSet(ChineseSet(), c); }

bool IsMarkNonspacing(char32_t c) { return c >= 0x300 && InSet(NonspacingMarkSet(), c); }

bool IsCombiningMark(char32_t c) { return c >= 0x300 && InSet(CombiningMarkSet(), c); }

bool IsWordChar(char32_t c) {
  if (c < 0x80) {
    return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '_';
  }
  return InSet(RegexWordSet(), c);
}

void AppendLowercase(char32_t c, std::vector<char32_t>* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  // The last run starting at or before c.
  const std::vector<LowerRun>& runs = LowerRuns();
  auto it = std::upper_bound(runs.begin(), runs.end(), c,
                             [](char32_t v, const LowerRun& r) { return v < r.first; });
  if (it != runs.begin()) {
    const LowerRun& r = *(it - 1);
    const uint32_t k = c - r.first;
    if (k % r.stride == 0 && k / r.stride < r.count) {
      out->push_back(static_cast<char32_t>(static_cast<int64_t>(c) + r.delta));
      return;
    }
  }
  for (size_t i = 0; i < tables::kLowerMultiSize; ++i) {
    const tables::LowerMulti& m = tables::kLowerMulti[i];
    if (m.c != c) continue;
    out->insert(out->end(), m.to, m.to + m.n);
    return;
  }
  out->push_back(c);
}

bool IsNormalized(absl::string_view s, NormalForm form) {
  const icu::Normalizer2& n = Icu(form);
  UErrorCode err = U_ZERO_ERROR;
  const bool yes =
      n.isNormalizedUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), err);
  return U_SUCCESS(err) && yes;
}

std::vector<CharChange> Normalize(const std::vector<char32_t>& in, NormalForm form) {
  const bool compat = form == NormalForm::kNfkd || form == NormalForm::kNfkc;
  std::vector<CharChange> decomposed = Decompositions(in, compat);
  if (form == NormalForm::kNfd || form == NormalForm::kNfkd) return decomposed;
  return Recompose(decomposed);
}

}  // namespace infer::text
