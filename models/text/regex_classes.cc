#include "models/text/regex_classes.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "models/text/unicode.h"
#include "models/text/unicode_tables.h"

namespace infer::text {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive, sorted, disjoint

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Ranges of a boundary list (unicode_tables.h).
Ranges FromBoundaries(const std::vector<uint32_t>& b) {
  Ranges out;
  for (size_t i = 0; i < b.size(); i += 2) {
    out.push_back({b[i], i + 1 < b.size() ? b[i + 1] - 1 : kMaxCodePoint});
  }
  return out;
}

// The boundaries of the symmetric difference of two sets.
std::vector<uint32_t> Xor(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  std::vector<uint32_t> out;
  for (uint32_t v : all) {
    if (!out.empty() && out.back() == v) {
      out.pop_back();  // flipped twice: no boundary
    } else {
      out.push_back(v);
    }
  }
  return out;
}

// Ranges of the categories whose bit is set in `mask`.
Ranges FromCategories(uint32_t mask) {
  // (first, category)
  static const auto* runs = new std::vector(tables::DecodeRuns(tables::kOnigCategoryRuns));
  Ranges out;
  const size_t n = runs->size();
  for (size_t i = 0; i < n; ++i) {
    if ((mask >> (*runs)[i].second & 1) == 0) continue;
    const uint32_t first = (*runs)[i].first;
    const uint32_t last = i + 1 < n ? (*runs)[i + 1].first - 1 : kMaxCodePoint;
    if (!out.empty() && out.back().second + 1 == first) {
      out.back().second = last;
    } else {
      out.push_back({first, last});
    }
  }
  return out;
}

// Without the surrogates (never in UTF-8 text, and not allowed in a UTF-8
// pattern; the generated runs pass over them).
Ranges WithoutSurrogates(const Ranges& r) {
  Ranges clean;
  for (auto [a, b] : r) {
    if (b < 0xD800 || a > 0xDFFF) {
      clean.push_back({a, b});
      continue;
    }
    if (a < 0xD800) clean.push_back({a, 0xD7FF});
    if (b > 0xDFFF) clean.push_back({0xE000, b});
  }
  return clean;
}

Ranges Complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [a, b] : r) {
    if (a > next) out.push_back({next, a - 1});
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

std::string Render(const Ranges& ranges) {
  std::string out;
  for (const auto& [a, b] : WithoutSurrogates(ranges)) {
    absl::StrAppendFormat(&out, "\\x{%x}", a);
    if (b > a) absl::StrAppendFormat(&out, "-\\x{%x}", b);
  }
  return out;
}

// Ranges of a, less those of b.
Ranges Minus(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t j = 0;
  for (auto [lo, hi] : a) {
    while (j < b.size() && b[j].second < lo) ++j;
    size_t k = j;
    while (lo <= hi) {
      if (k == b.size() || b[k].first > hi) {
        out.push_back({lo, hi});
        break;
      }
      if (b[k].first > lo) out.push_back({lo, b[k].first - 1});
      if (b[k].second >= hi) break;
      lo = std::max(lo, b[k].second + 1);
      ++k;
    }
  }
  return out;
}

// What PCRE2's own `escape` (e.g. \p{L}) matches, found by matching it over
// every code point once (about 10 ms).
Ranges NativeRanges(const std::string& escape) {
  static const std::string* all = [] {
    auto* s = new std::string;
    for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
      if (c < 0xD800 || c > 0xDFFF) AppendUtf8(c, s);
    }
    return s;
  }();
  Ranges out;
  const std::string pattern = escape + "+";
  int error = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
  if (code == nullptr) return out;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t pos = 0;
  while (pos < all->size() &&
         pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(all->data()), all->size(), pos,
                     PCRE2_NO_UTF_CHECK, data, nullptr) >= 0) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    size_t i = ov[0];
    const char32_t first = DecodeUtf8(*all, &i);
    size_t j = ov[1] - 1;
    while ((static_cast<unsigned char>((*all)[j]) & 0xC0) == 0x80) --j;
    const char32_t last = DecodeUtf8(*all, &j);
    out.push_back({first, last});
    pos = ov[1];
  }
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return WithoutSurrogates(out);
}

// The class body for a class whose exact members are `exact`: PCRE2's own
// `escape` and the ranges it lacks, when it has no member too many and that
// is shorter (PCRE2 looks a property up in a table, where a long list of
// ranges is searched in turn), else the ranges alone.
std::string Body(const std::string& escape, const Ranges& exact) {
  const Ranges native = NativeRanges(escape);
  const Ranges missing = Minus(exact, native);
  if (Minus(native, exact).empty() && missing.size() < exact.size()) {
    return escape + Render(missing);
  }
  return Render(exact);
}

// Bodies are made once per escape and process.
const std::string& CachedBody(const std::string& escape, const std::function<Ranges()>& exact) {
  static absl::Mutex mu;
  static auto* bodies = new std::map<std::string, std::string>;
  absl::MutexLock lock(&mu);
  auto it = bodies->find(escape);
  if (it == bodies->end()) it = bodies->emplace(escape, Body(escape, exact())).first;
  return it->second;
}

// The class body of a property name, or nullptr when it is not one of
// Oniguruma's general categories handled here.
const std::string* PropertyBody(const std::string& name, bool negated) {
  static const auto* masks = [] {
    auto* m = new std::map<std::string, uint32_t>;
    for (int i = 0; i < tables::kOnigCategories; ++i) {
      const std::string cat = tables::kOnigCategoryNames[i];
      (*m)[cat] |= 1u << i;
      (*m)[cat.substr(0, 1)] |= 1u << i;
      if (cat == "Lu" || cat == "Ll" || cat == "Lt") (*m)["LC"] |= 1u << i;
    }
    (*m)["L&"] = (*m)["LC"];
    return m;
  }();
  auto it = masks->find(name);
  if (it == masks->end()) return nullptr;
  const uint32_t mask = it->second;
  return &CachedBody(absl::StrCat(negated ? "\\P{" : "\\p{", name, "}"), [mask, negated] {
    const Ranges r = FromCategories(mask);
    return negated ? Complement(r) : r;
  });
}

// The class body of escape letter `e` (s S w W d D h H), or nullptr.
const std::string* EscapeBody(char e) {
  const char lower = static_cast<char>(e | 0x20);
  const char* encoded = lower == 's'   ? tables::kOnigSpace
                        : lower == 'd' ? tables::kOnigDigit
                        : lower == 'h' ? tables::kOnigHex
                        : lower == 'w' ? tables::kRegexWord
                                       : nullptr;
  if (encoded == nullptr) return nullptr;
  return &CachedBody(std::string("\\") + e, [e, lower, encoded] {
    std::vector<uint32_t> b = tables::CodePointSet(encoded).boundaries();
    if (lower == 'w') b = Xor(b, tables::CodePointSet(tables::kOnigWordDiff).boundaries());
    const Ranges r = FromBoundaries(b);
    return e == lower ? r : Complement(r);
  });
}

}  // namespace

std::string ExpandClasses(absl::string_view p) {
  std::string out;
  out.reserve(p.size());
  bool in_class = false;
  size_t i = 0;
  auto emit = [&](const std::string& body) {
    if (in_class) {
      out += body;
    } else {
      absl::StrAppend(&out, "[", body, "]");
    }
  };
  while (i < p.size()) {
    const char ch = p[i];
    if (ch == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'Q') {  // \Q...\E: literal, copied as it is
        const size_t end = p.find("\\E", i + 2);
        const size_t stop = end == absl::string_view::npos ? p.size() : end + 2;
        out.append(p.data() + i, stop - i);
        i = stop;
        continue;
      }
      if (e == 'p' || e == 'P') {
        // Only the braced form: Oniguruma has no \pL.
        const size_t close =
            i + 2 < p.size() && p[i + 2] == '{' ? p.find('}', i + 3) : absl::string_view::npos;
        if (close != absl::string_view::npos) {
          std::string name(p.substr(i + 3, close - i - 3));
          bool negated = e == 'P';
          if (!name.empty() && name[0] == '^') {
            negated = !negated;
            name.erase(0, 1);
          }
          if (const std::string* body = PropertyBody(name, negated)) {
            emit(*body);
            i = close + 1;
            continue;
          }
        }
      } else if (const std::string* body = EscapeBody(e)) {
        emit(*body);
        i += 2;
        continue;
      }
      // Any other escape: both characters as they are (\\, \[, \], \x...).
      out.append(p.data() + i, 2);
      i += 2;
      continue;
    }
    if (!in_class && ch == '[') {
      in_class = true;
      out.push_back(ch);
      ++i;
      if (i < p.size() && p[i] == '^') out.push_back(p[i++]);
      if (i < p.size() && p[i] == ']') out.push_back(p[i++]);  // a literal ]
      continue;
    }
    if (in_class && ch == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
      const size_t end = p.find(":]", i + 2);
      const size_t stop = end == absl::string_view::npos ? i + 1 : end + 2;
      out.append(p.data() + i, stop - i);
      i = stop;
      continue;
    }
    if (in_class && ch == ']') in_class = false;
    out.push_back(ch);
    ++i;
  }
  return out;
}

}  // namespace infer::text
