// NormalizedString: a piece of the input text as the tokenizer pipeline
// rewrites it (normalisers, pre-tokenizers), with, for every byte of the
// rewritten text, the byte range of the original text it came from. Token
// offsets are read from it, so they point into what the client sent.
//
// It keeps Hugging Face `tokenizers`' alignment rules exactly (a changed
// character keeps the range of the one it replaces, an inserted one takes
// the range of the character before it, removed ones vanish), since offsets
// must be identical to the original's; the quirks of those rules are kept
// too, and noted where they are.
//
// Splits (Slice, Split) keep offsets into the whole text: each piece knows
// where its original starts (original_shift). Not thread-safe; each encode
// builds its own.
#ifndef INFER_MODELS_TEXT_NORMALIZED_STRING_H_
#define INFER_MODELS_TEXT_NORMALIZED_STRING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "models/text/unicode.h"

namespace infer::text {

class Regex;

// Byte offsets [start, end).
struct Offsets {
  uint32_t start = 0;
  uint32_t end = 0;
  bool operator==(const Offsets& o) const { return start == o.start && end == o.end; }
};

// What Split does with the pieces that match (Hugging Face's
// SplitDelimiterBehavior): drop them, keep each alone, glue each to the
// piece before or after it, or join runs of matches (and of non-matches).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A pattern's result over a string: contiguous pieces covering all of it,
// each flagged whether it matched.
struct PatternPiece {
  size_t start;
  size_t end;
  bool match;
};
using CharPredicate = std::function<bool(char32_t)>;
// Every character for which `pred` holds is a match of its own.
std::vector<PatternPiece> FindCharMatches(absl::string_view s, const CharPredicate& pred);
// Non-overlapping occurrences of a literal, left to right; an empty literal
// matches nothing.
std::vector<PatternPiece> FindLiteralMatches(absl::string_view s, absl::string_view literal);
// Non-overlapping matches of a regex, left to right.
std::vector<PatternPiece> FindRegexMatches(absl::string_view s, const Regex& re);
// Every match flag flipped.
void Invert(std::vector<PatternPiece>* pieces);

class NormalizedString {
 public:
  NormalizedString() = default;
  // The whole text, unchanged (valid UTF-8).
  explicit NormalizedString(absl::string_view original);

  const std::string& get() const { return normalized_; }
  bool empty() const { return normalized_.empty(); }
  size_t size() const { return normalized_.size(); }
  // Where this piece's original starts in the whole text, and its length.
  size_t original_shift() const { return original_shift_; }
  size_t original_size() const { return original_size_; }

  // The range of the whole text that normalized bytes [start, end) come
  // from. nullopt when the range is empty of alignments.
  std::optional<Offsets> ToOriginal(size_t start, size_t end) const;

  // Rewrites normalized bytes [start, end) (on character boundaries) as
  // `dest`, where the first `initial_removed` characters of the range are
  // removed before the first of dest (Hugging Face's transform_range).
  void TransformRange(size_t start, size_t end, const std::vector<CharChange>& dest,
                      size_t initial_removed);
  void Transform(const std::vector<CharChange>& dest, size_t initial_removed) {
    TransformRange(0, normalized_.size(), dest, initial_removed);
  }

  void Normalize(NormalForm form);
  // Keeps the characters for which `keep` holds.
  void Filter(const CharPredicate& keep);
  void Map(const std::function<char32_t(char32_t)>& map);
  void Lowercase();
  // `s` before the first character (nothing on an empty string).
  void Prepend(absl::string_view s);
  // Leading and/or trailing whitespace removed.
  void Strip(bool left, bool right);
  // Every matched piece replaced with `content`.
  void Replace(const std::vector<PatternPiece>& matches, absl::string_view content);

  // Normalized bytes [start, end) as a string of their own, keeping their
  // alignments (start and end on character boundaries).
  NormalizedString Slice(size_t start, size_t end) const;
  // The pieces `matches` (over get()) cut this into, by `behavior`.
  std::vector<NormalizedString> Split(const std::vector<PatternPiece>& matches,
                                      SplitBehavior behavior) const;

  // The characters of get().
  std::vector<char32_t> Chars() const;

 private:
  // Rewrites the character at normalized bytes [start, end) as `c` when
  // that takes the same bytes; false (nothing done) otherwise.
  bool ReplaceInPlace(size_t start, size_t end, char32_t c);
  // Each character from byte `from` on replaced by what `rewrite` appends
  // for it, all of those with its alignment.
  void RebuildFrom(size_t from,
                   const std::function<void(char32_t, std::vector<char32_t>*)>& rewrite);

  std::string normalized_;
  // Per normalized byte: original byte range, relative to original_shift_.
  std::vector<Offsets> alignments_;
  size_t original_shift_ = 0;
  size_t original_size_ = 0;
};

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_NORMALIZED_STRING_H_
