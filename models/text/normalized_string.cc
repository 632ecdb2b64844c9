#include "models/text/normalized_string.h"

#include <algorithm>

#include "models/text/regex.h"

namespace infer::text {

std::vector<PatternPiece> FindCharMatches(absl::string_view s, const CharPredicate& pred) {
  std::vector<PatternPiece> out;
  if (s.empty()) return {{0, 0, false}};
  size_t last = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t b = i;
    const char32_t c = DecodeUtf8(s, &i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (last < s.size()) out.push_back({last, s.size(), false});
  return out;
}

namespace {

std::vector<PatternPiece> FromMatches(absl::string_view s,
                                      const std::vector<std::pair<size_t, size_t>>& matches) {
  if (s.empty()) return {{0, 0, false}};
  std::vector<PatternPiece> out;
  size_t prev = 0;
  for (const auto& [start, end] : matches) {
    if (prev != start) out.push_back({prev, start, false});
    out.push_back({start, end, true});
    prev = end;
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
  return out;
}

}  // namespace

std::vector<PatternPiece> FindLiteralMatches(absl::string_view s, absl::string_view literal) {
  if (literal.empty()) return {{0, s.size(), false}};
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t pos = s.find(literal); pos != absl::string_view::npos;
       pos = s.find(literal, pos + literal.size())) {
    matches.push_back({pos, pos + literal.size()});
  }
  return FromMatches(s, matches);
}

std::vector<PatternPiece> FindRegexMatches(absl::string_view s, const Regex& re) {
  return FromMatches(s, re.FindAll(s));
}

void Invert(std::vector<PatternPiece>* pieces) {
  for (PatternPiece& p : *pieces) p.match = !p.match;
}

NormalizedString::NormalizedString(absl::string_view original)
    : normalized_(original), original_size_(original.size()) {
  alignments_.resize(original.size());
  for (size_t i = 0; i < original.size();) {
    const size_t b = i;
    DecodeUtf8(original, &i);
    for (size_t k = b; k < i; ++k) {
      alignments_[k] = {static_cast<uint32_t>(b), static_cast<uint32_t>(i)};
    }
  }
}

std::optional<Offsets> NormalizedString::ToOriginal(size_t start, size_t end) const {
  // As the original: an empty range is returned as it is, and a range over
  // an empty string covers the whole original.
  if (start == end) {
    if (normalized_.empty() && start == 0) {
      return Offsets{static_cast<uint32_t>(original_shift_),
                     static_cast<uint32_t>(original_shift_ + original_size_)};
    }
    return Offsets{static_cast<uint32_t>(original_shift_ + start),
                   static_cast<uint32_t>(original_shift_ + end)};
  }
  if (start > end || end > alignments_.size()) return std::nullopt;
  return Offsets{static_cast<uint32_t>(original_shift_ + alignments_[start].start),
                 static_cast<uint32_t>(original_shift_ + alignments_[end - 1].end)};
}

void NormalizedString::TransformRange(size_t start, size_t end, const std::vector<CharChange>& dest,
                                      size_t initial_removed) {
  // The characters being replaced, walked as dest consumes them (their
  // sizes from their lead bytes).
  const char* old = normalized_.data() + start;
  const size_t old_size = end - start;
  size_t cursor = 0;  // bytes of `old` consumed
  auto next_size = [&]() -> size_t {
    if (cursor >= old_size) return 0;
    const size_t n = Utf8LengthFromLead(static_cast<unsigned char>(old[cursor]));
    cursor += n;
    return n;
  };
  size_t offset = start;
  for (size_t k = 0; k < initial_removed; ++k) offset += next_size();
  std::string text;
  text.reserve(old_size + 8);
  std::vector<Offsets> aligns;
  aligns.reserve(old_size + 8);
  for (const CharChange& ch : dest) {
    Offsets align;
    if (ch.change > 0) {
      // Inserted: shares the alignment of the byte before it.
      align = offset < 1 ? Offsets{0, 0} : alignments_[offset - 1];
    } else {
      align = alignments_[offset];
      offset += next_size();
      for (int k = 0; k < -ch.change; ++k) offset += next_size();
    }
    const size_t n = static_cast<size_t>(Utf8Length(ch.c));
    AppendUtf8(ch.c, &text);
    for (size_t k = 0; k < n; ++k) aligns.push_back(align);
  }
  if (start == 0 && end == normalized_.size()) {
    normalized_.swap(text);
    alignments_.swap(aligns);
    return;
  }
  normalized_.replace(start, end - start, text);
  alignments_.erase(alignments_.begin() + start, alignments_.begin() + end);
  alignments_.insert(alignments_.begin() + start, aligns.begin(), aligns.end());
}

std::vector<char32_t> NormalizedString::Chars() const {
  std::vector<char32_t> out;
  out.reserve(normalized_.size());
  for (size_t i = 0; i < normalized_.size();) out.push_back(DecodeUtf8(normalized_, &i));
  return out;
}

void NormalizedString::Normalize(NormalForm form) {
  // Text that is all ASCII is in every normal form already.
  if (std::all_of(normalized_.begin(), normalized_.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return;
  }
  if (IsNormalized(normalized_, form)) return;
  Transform(text::Normalize(Chars(), form), 0);
}

// Filter, Map and Lowercase below are TransformRange's results written
// directly. In the original's transform a kept or mapped character takes the
// alignment of the character it comes from (change 0, or -n after which the
// n removed ones are skipped), and a character inserted after it (change +1,
// as the rest of a lower case that is several characters) takes the
// alignment of the byte before it, which is that same character's. Every
// byte of a character shares one alignment, so each output character simply
// carries its source character's.

void NormalizedString::Filter(const CharPredicate& keep) {
  // The kept characters, with their bytes and alignments, moved forward.
  size_t w = 0;
  for (size_t i = 0; i < normalized_.size();) {
    const size_t b = i;
    const char32_t c = DecodeUtf8(normalized_, &i);
    if (!keep(c)) continue;
    if (w != b) {
      std::copy(normalized_.begin() + b, normalized_.begin() + i, normalized_.begin() + w);
      std::copy(alignments_.begin() + b, alignments_.begin() + i, alignments_.begin() + w);
    }
    w += i - b;
  }
  normalized_.resize(w);
  alignments_.resize(w);
}

bool NormalizedString::ReplaceInPlace(size_t start, size_t end, char32_t c) {
  if (static_cast<size_t>(Utf8Length(c)) != end - start) return false;
  std::string bytes;
  AppendUtf8(c, &bytes);
  std::copy(bytes.begin(), bytes.end(), normalized_.begin() + start);
  return true;
}

void NormalizedString::RebuildFrom(
    size_t from, const std::function<void(char32_t, std::vector<char32_t>*)>& rewrite) {
  std::string text(normalized_, 0, from);
  std::vector<Offsets> aligns(alignments_.begin(), alignments_.begin() + from);
  text.reserve(normalized_.size() + 16);
  aligns.reserve(normalized_.size() + 16);
  std::vector<char32_t> out;
  for (size_t i = from; i < normalized_.size();) {
    const Offsets align = alignments_[i];
    out.clear();
    rewrite(DecodeUtf8(normalized_, &i), &out);
    for (char32_t c : out) {
      AppendUtf8(c, &text);
      aligns.resize(text.size(), align);
    }
  }
  normalized_ = std::move(text);
  alignments_ = std::move(aligns);
}

void NormalizedString::Map(const std::function<char32_t(char32_t)>& map) {
  // Characters mapped to one of the same length change in place; from the
  // first that does not, the rest is rebuilt.
  for (size_t i = 0; i < normalized_.size();) {
    const size_t b = i;
    const char32_t c = DecodeUtf8(normalized_, &i);
    const char32_t m = map(c);
    if (m == c || ReplaceInPlace(b, i, m)) continue;
    RebuildFrom(b, [&](char32_t ch, std::vector<char32_t>* out) { out->push_back(map(ch)); });
    return;
  }
}

void NormalizedString::Lowercase() {
  // As Map: ASCII and same-length lower cases in place, the rest rebuilt
  // from the first character whose lower case is longer, or several.
  std::vector<char32_t> lower;
  for (size_t i = 0; i < normalized_.size();) {
    const unsigned char byte = static_cast<unsigned char>(normalized_[i]);
    if (byte < 0x80) {
      if (byte >= 'A' && byte <= 'Z') normalized_[i] = static_cast<char>(byte + 32);
      ++i;
      continue;
    }
    const size_t b = i;
    lower.clear();
    AppendLowercase(DecodeUtf8(normalized_, &i), &lower);
    if (lower.size() == 1 && ReplaceInPlace(b, i, lower[0])) continue;
    RebuildFrom(b, AppendLowercase);
    return;
  }
}

void NormalizedString::Prepend(absl::string_view s) {
  if (normalized_.empty()) return;
  size_t i = 0;
  const char32_t next = DecodeUtf8(normalized_, &i);
  std::vector<CharChange> dest;
  bool first = true;
  for (size_t k = 0; k < s.size();) {
    dest.push_back({DecodeUtf8(s, &k), first ? 0 : 1});
    first = false;
  }
  dest.push_back({next, 1});
  TransformRange(0, i, dest, 0);
}

void NormalizedString::Strip(bool left, bool right) {
  const std::vector<char32_t> chars = Chars();
  size_t leading = 0;
  if (left) {
    while (leading < chars.size() && IsWhitespace(chars[leading])) ++leading;
  }
  size_t trailing = 0;
  if (right) {
    while (trailing < chars.size() - leading && IsWhitespace(chars[chars.size() - 1 - trailing])) {
      ++trailing;
    }
  }
  if (leading == 0 && trailing == 0) return;
  std::vector<CharChange> dest;
  const size_t count = chars.size();
  for (size_t i = 0; i < count; ++i) {
    if (i < leading || i >= count - trailing) continue;
    // The original compares a character index with the byte length here:
    // kept, so that offsets after a multi-byte text match it.
    if (normalized_.size() >= trailing + 1 && i == normalized_.size() - trailing - 1) {
      dest.push_back({chars[i], -static_cast<int>(trailing)});
    } else {
      dest.push_back({chars[i], 0});
    }
  }
  Transform(dest, leading);
}

void NormalizedString::Replace(const std::vector<PatternPiece>& matches,
                               absl::string_view content) {
  std::vector<char32_t> content_chars;
  for (size_t k = 0; k < content.size();) content_chars.push_back(DecodeUtf8(content, &k));
  std::string text;
  text.reserve(normalized_.size());
  std::vector<Offsets> aligns;
  aligns.reserve(normalized_.size());
  size_t last_end = 0;
  for (const PatternPiece& m : matches) {
    if (!m.match) continue;
    text.append(normalized_, last_end, m.start - last_end);
    aligns.insert(aligns.end(), alignments_.begin() + last_end, alignments_.begin() + m.start);
    // Every character of `content` is inserted after the removed match, so
    // it takes the alignment of the match's last byte (or (0,0) at the start).
    const Offsets align = m.end < 1 ? Offsets{0, 0} : alignments_[m.end - 1];
    for (char32_t c : content_chars) {
      const size_t before = text.size();
      AppendUtf8(c, &text);
      aligns.insert(aligns.end(), text.size() - before, align);
    }
    last_end = m.end;
  }
  text.append(normalized_, last_end, std::string::npos);
  aligns.insert(aligns.end(), alignments_.begin() + last_end, alignments_.end());
  normalized_ = std::move(text);
  alignments_ = std::move(aligns);
}

NormalizedString NormalizedString::Slice(size_t start, size_t end) const {
  NormalizedString out;
  // The original range it covers; an empty slice keeps its normalized
  // position as the original does.
  size_t o_start = start;
  size_t o_end = end;
  if (start < end) {
    o_start = alignments_[start].start;
    o_end = alignments_[end - 1].end;
  }
  out.normalized_ = normalized_.substr(start, end - start);
  out.alignments_.reserve(end - start);
  for (size_t i = start; i < end; ++i) {
    out.alignments_.push_back({static_cast<uint32_t>(alignments_[i].start - o_start),
                               static_cast<uint32_t>(alignments_[i].end - o_start)});
  }
  out.original_shift_ = original_shift_ + o_start;
  out.original_size_ = o_end >= o_start ? o_end - o_start : 0;
  return out;
}

std::vector<NormalizedString> NormalizedString::Split(const std::vector<PatternPiece>& matches,
                                                      SplitBehavior behavior) const {
  struct Cut {
    size_t start, end;
    bool remove;
  };
  std::vector<Cut> cuts;
  cuts.reserve(matches.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const PatternPiece& m : matches) cuts.push_back({m.start, m.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const PatternPiece& m : matches) cuts.push_back({m.start, m.end, m.match});
      break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (const PatternPiece& m : matches) {
        if (m.match == previous && !cuts.empty()) {
          cuts.back().end = m.end;
        } else {
          cuts.push_back({m.start, m.end, false});
        }
        previous = m.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const PatternPiece& m : matches) {
        if (m.match && !previous && !cuts.empty()) {
          cuts.back().end = m.end;
        } else {
          cuts.push_back({m.start, m.end, false});
        }
        previous = m.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->match && !previous && !cuts.empty()) {
          cuts.back().start = it->start;
        } else {
          cuts.push_back({it->start, it->end, false});
        }
        previous = it->match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
    }
  }
  std::vector<NormalizedString> out;
  out.reserve(cuts.size());
  for (const Cut& c : cuts) {
    if (!c.remove) out.push_back(Slice(c.start, c.end));
  }
  return out;
}

}  // namespace infer::text
