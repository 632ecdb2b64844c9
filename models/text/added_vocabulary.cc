#include "models/text/added_vocabulary.h"

#include <utility>

namespace infer::text {

void AddedVocabulary::Trie::Add(absl::string_view pattern, int32_t token) {
  if (nodes.empty()) nodes.emplace_back();
  int32_t at = 0;
  for (char ch : pattern) {
    const uint8_t b = static_cast<uint8_t>(ch);
    auto it = nodes[at].next.find(b);
    if (it == nodes[at].next.end()) {
      nodes.emplace_back();
      const int32_t n = static_cast<int32_t>(nodes.size() - 1);
      nodes[at].next.emplace(b, n);
      at = n;
    } else {
      at = it->second;
    }
  }
  nodes[at].token = token;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  raw_.nodes.emplace_back();
  normalized_.nodes.emplace_back();
  strings_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_content_[t.content] = static_cast<int32_t>(i);
    by_id_[t.id] = static_cast<int32_t>(i);
    // A content given twice counts as special if any of its entries is.
    if (t.special) special_contents_.insert(t.content);
    if (t.normalized && normalizer != nullptr) {
      NormalizedString s(t.content);
      normalizer->Normalize(&s);
      strings_.push_back(s.get());
    } else {
      strings_.push_back(t.content);
    }
  }
  // A content given twice: the later entry wins, as in the original's map.
  for (const auto& [content, index] : by_content_) {
    const AddedToken& t = tokens_[index];
    if (t.content.empty()) continue;
    if (!t.normalized) {
      raw_.Add(t.content, index);
      continue;
    }
    const std::string& pattern = strings_[index];
    if (!pattern.empty()) normalized_.Add(pattern, index);
  }
}

std::optional<int32_t> AddedVocabulary::Find(absl::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

bool AddedVocabulary::IsSpecial(absl::string_view content) const {
  return special_contents_.contains(content);
}

const std::string* AddedVocabulary::TokenString(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &strings_[it->second];
}

namespace {

bool LastIsWord(absl::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  size_t k = i;
  return IsWordChar(DecodeUtf8(s, &k));
}

bool FirstIsWord(absl::string_view s) {
  if (s.empty()) return false;
  size_t k = 0;
  return IsWordChar(DecodeUtf8(s, &k));
}

// Start of the whitespace that ends s (s.size() when none).
size_t TrailingSpaceStart(absl::string_view s) {
  size_t start = s.size();
  while (start > 0) {
    size_t i = start - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    size_t k = i;
    if (!IsRegexSpace(DecodeUtf8(s, &k))) break;
    start = i;
  }
  return start;
}

// Length of the whitespace that starts s.
size_t LeadingSpaceEnd(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t k = i;
    if (!IsRegexSpace(DecodeUtf8(s, &k))) break;
    i = k;
  }
  return i;
}

}  // namespace

std::vector<AddedVocabulary::Match> AddedVocabulary::FindMatches(absl::string_view s,
                                                                 const Trie& trie) const {
  if (s.empty()) return {{std::nullopt, 0, 0}};
  if (trie.empty()) return {{std::nullopt, 0, s.size()}};
  std::vector<Match> out;
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    // Longest pattern starting at pos.
    int32_t at = 0;
    int32_t found = -1;
    size_t found_end = 0;
    for (size_t i = pos; i < s.size(); ++i) {
      const auto& next = trie.nodes[at].next;
      auto it = next.find(static_cast<uint8_t>(s[i]));
      if (it == next.end()) break;
      at = it->second;
      if (trie.nodes[at].token >= 0) {
        found = trie.nodes[at].token;
        found_end = i + 1;
      }
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = found_end;
    const AddedToken& t = tokens_[found];
    pos = found_end;  // the next match starts after this one, taken or not
    if (t.single_word) {
      const bool start_space = start == 0 || !LastIsWord(s.substr(0, start));
      const bool stop_space = stop == s.size() || !FirstIsWord(s.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) start = std::max(TrailingSpaceStart(s.substr(0, start)), start_offset);
    if (t.rstrip) stop += LeadingSpaceEnd(s.substr(stop));
    if (start_offset < start) out.push_back({std::nullopt, start_offset, start});
    out.push_back({found, start, stop});
    start_offset = stop;
  }
  if (start_offset != s.size()) out.push_back({std::nullopt, start_offset, s.size()});
  return out;
}

void AddedVocabulary::SplitWith(Piece piece, const Trie& trie, Pieces* out) const {
  for (const Match& m : FindMatches(piece.normalized.get(), trie)) {
    NormalizedString slice = piece.normalized.Slice(m.start, m.end);
    if (slice.empty()) continue;
    Piece p{std::move(slice), std::nullopt};
    if (m.token.has_value()) {
      p.tokens = std::vector<Token>{{tokens_[*m.token].id,
                                     p.normalized.get(),
                                     {0, static_cast<uint32_t>(p.normalized.size())}}};
    }
    out->push_back(std::move(p));
  }
}

Pieces AddedVocabulary::ExtractAndNormalize(absl::string_view text,
                                            const Normalizer* normalizer) const {
  Pieces first;
  SplitWith({NormalizedString(text), std::nullopt}, raw_, &first);
  Pieces out;
  out.reserve(first.size());
  for (Piece& p : first) {
    if (p.tokens.has_value()) {
      out.push_back(std::move(p));
      continue;
    }
    if (normalizer != nullptr) normalizer->Normalize(&p.normalized);
    SplitWith(std::move(p), normalized_, &out);
  }
  return out;
}

}  // namespace infer::text
