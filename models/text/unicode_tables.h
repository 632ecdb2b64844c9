// The character classes of Hugging Face `tokenizers`, generated from it
// code point by code point by models/tools/make_unicode_tables.py into
// unicode_tables.cc (never edited by hand; the ctest unicode_tables_current
// regenerates it and fails when it differs). models/text/unicode.cc,
// regex.cc and graphemes.cc read them; nothing else should.
//
// The data are text (numbers in base-32 digits, high first: a digit of
// FINAL ends a number, one of MORE continues it), decoded once on first use.
// A set is a sorted list of boundaries: code point c is a member when the
// number of boundaries <= c is odd. Each set follows the library part of
// `tokenizers` that uses it, at that part's Unicode version (noted at each
// array in the .cc). Decoded sets are immutable; thread-safe.
#ifndef INFER_MODELS_TEXT_UNICODE_TABLES_H_
#define INFER_MODELS_TEXT_UNICODE_TABLES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace infer::text::tables {

struct LowerMulti {
  uint32_t c;
  uint8_t n;
  uint32_t to[3];
};

extern const char kWhitespace[];
extern const char kBertRemoved[];
extern const char kPunctuation[];
extern const char kNumeric[];
extern const char kRegexWord[];
extern const char kRegexSpace[];
extern const char kChinese[];
extern const char kCombiningMark[];
extern const char kNonspacingMark[];
extern const char kNormUnknown[];
extern const char kOnigSpace[];
extern const char kOnigDigit[];
extern const char kOnigHex[];
extern const char kOnigWordDiff[];              // Oniguruma's \w xor kRegexWord
extern const char kOnigCategoryRuns[];          // (distance, index in kOnigCategoryNames) pairs
extern const char* const kOnigCategoryNames[];  // the 29 two-letter categories
constexpr int kOnigCategories = 29;
extern const char kGraphemeRuns[];               // (distance, index in kGraphemeClassNames) pairs
extern const char* const kGraphemeClassNames[];  // in GraphemeClass's order (graphemes.cc)
extern const char kLowerRuns[];                  // (distance, count, zigzag difference, stride)
extern const LowerMulti kLowerMulti[];
extern const size_t kLowerMultiSize;

// The numbers of an encoded table.
inline std::vector<uint32_t> DecodeNumbers(const char* text) {
  std::vector<uint32_t> out;
  uint32_t v = 0;
  for (const char* p = text; *p != 0; ++p) {
    const char* more = std::strchr("abcdefghijklmnopqrstuvwxyz!#$%&*", *p);
    if (more != nullptr) {
      v = (v << 5) | static_cast<uint32_t>(more - "abcdefghijklmnopqrstuvwxyz!#$%&*");
      continue;
    }
    const char* digits = "0123456789ABCDEFGHIJKLMNOPQRSTUV";
    v = (v << 5) | static_cast<uint32_t>(std::strchr(digits, *p) - digits);
    out.push_back(v);
    v = 0;
  }
  return out;
}

// Runs of an encoded (distance, value) table: each run's first code point
// (the distances summed) and its value, ascending.
inline std::vector<std::pair<uint32_t, uint32_t>> DecodeRuns(const char* text) {
  const std::vector<uint32_t> n = DecodeNumbers(text);
  std::vector<std::pair<uint32_t, uint32_t>> out;
  uint32_t first = 0;
  for (size_t i = 0; i + 1 < n.size(); i += 2) {
    first += n[i];
    out.push_back({first, n[i + 1]});
  }
  return out;
}

// A set of code points from its encoded boundaries (distances).
class CodePointSet {
 public:
  explicit CodePointSet(const char* encoded) : bounds_(DecodeNumbers(encoded)) {
    for (size_t i = 1; i < bounds_.size(); ++i) bounds_[i] += bounds_[i - 1];
  }
  bool Contains(char32_t c) const {
    return ((std::upper_bound(bounds_.begin(), bounds_.end(), static_cast<uint32_t>(c)) -
             bounds_.begin()) &
            1) != 0;
  }
  const std::vector<uint32_t>& boundaries() const { return bounds_; }

 private:
  std::vector<uint32_t> bounds_;
};

}  // namespace infer::text::tables

#endif  // INFER_MODELS_TEXT_UNICODE_TABLES_H_
