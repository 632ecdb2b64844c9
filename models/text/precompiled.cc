// The Precompiled normalizer: SentencePiece's normalisation rules, as a
// model's "precompiled_charsmap" carries them (base64 of: a little-endian
// u32 byte size of a darts-clone double-array trie, the trie's u32 units,
// then NUL-terminated replacement strings the trie's values point into).
//
// Applied as Hugging Face `tokenizers` applies it: grapheme cluster by
// cluster, a cluster shorter than 6 bytes replaced whole when the trie
// knows a prefix of it (the shortest), otherwise character by character.
// Grapheme clusters are unicode-segmentation's (graphemes.h): ICU's break
// iterator follows an older Unicode version and would start a cluster at a
// combining mark of a later one, which changes what is looked up.
//
// Written here because no library reads this format outside SentencePiece
// itself, whose normaliser is not public API and tracks no offsets. Every
// index into the trie and the strings is bounds-checked: a corrupt charsmap
// normalises nothing rather than reading out of bounds.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "models/text/graphemes.h"
#include "models/text/json_fields.h"
#include "models/text/normalizers.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

// A darts-clone unit: has_leaf, value, label and offset bit fields.
bool HasLeaf(uint32_t u) { return (u >> 8) & 1; }
uint32_t Value(uint32_t u) { return u & ((1u << 31) - 1); }
uint32_t Label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

class PrecompiledNormalizer final : public Normalizer {
 public:
  PrecompiledNormalizer(std::vector<uint32_t> trie, std::string normalized)
      : trie_(std::move(trie)), normalized_(std::move(normalized)) {}

  void Normalize(NormalizedString* s) const override {
    const std::string& text = s->get();
    if (text.empty() || trie_.empty()) return;
    std::vector<CharChange> dest;
    dest.reserve(text.size());
    bool modified = false;
    auto each_char = [&](absl::string_view g) {
      for (size_t i = 0; i < g.size();) {
        const size_t b = i;
        const char32_t c = DecodeUtf8(g, &i);
        if (std::optional<absl::string_view> n = Transform(g.substr(b, i - b))) {
          modified = true;
          Replace(&dest, 1, *n);
        } else {
          dest.push_back({c, 0});
        }
      }
    };
    for (size_t start = 0; start < text.size();) {
      const size_t end = GraphemeEnd(text, start);
      const absl::string_view g(text.data() + start, end - start);
      start = end;
      if (g.size() < 6) {
        if (std::optional<absl::string_view> n = Transform(g)) {
          modified = true;
          Replace(&dest, CountChars(g), *n);
          continue;
        }
      }
      each_char(g);
    }
    if (modified) s->Transform(dest, 0);
  }

 private:
  // The replacement of the shortest prefix of `chunk` the trie holds.
  std::optional<absl::string_view> Transform(absl::string_view chunk) const {
    size_t node = Offset(trie_[0]);
    for (unsigned char c : chunk) {
      if (c == 0) break;
      node ^= c;
      if (node >= trie_.size()) return std::nullopt;
      const uint32_t unit = trie_[node];
      if (Label(unit) != c) return std::nullopt;
      node ^= Offset(unit);
      if (HasLeaf(unit)) {
        if (node >= trie_.size()) return std::nullopt;
        return At(Value(trie_[node]));
      }
    }
    return std::nullopt;
  }

  std::optional<absl::string_view> At(size_t index) const {
    if (index > normalized_.size()) return std::nullopt;
    size_t end = normalized_.find('\0', index);
    if (end == std::string::npos) end = normalized_.size();
    const absl::string_view s(normalized_.data() + index, end - index);
    if (!ValidUtf8(s)) return std::nullopt;
    return s;
  }

  // `old_chars` characters become `replacement`, with the original's change
  // tags: each new character replaces, the surplus are inserted (the last
  // ones), a shortfall is removed by the last character written.
  static void Replace(std::vector<CharChange>* dest, size_t old_chars,
                      absl::string_view replacement) {
    size_t added = 0;
    for (size_t i = 0; i < replacement.size(); ++added) {
      dest->push_back({DecodeUtf8(replacement, &i), 0});
    }
    const long diff = static_cast<long>(added) - static_cast<long>(old_chars);
    if (diff > 0) {
      for (long k = 0; k < diff && static_cast<size_t>(k) < dest->size(); ++k) {
        (*dest)[dest->size() - 1 - k].change = 1;
      }
    } else if (diff < 0 && !dest->empty()) {
      dest->back().change += static_cast<int>(diff);
    }
  }

  const std::vector<uint32_t> trie_;
  const std::string normalized_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> PrecompiledFromJson(const nlohmann::json& j) {
  const std::string type = "Precompiled";
  INFER_ASSIGN_OR_RETURN(std::string b64, RequiredString(j, type, "precompiled_charsmap"));
  std::string bytes;
  if (!absl::Base64Unescape(b64, &bytes)) {
    return absl::InvalidArgumentError("Precompiled: precompiled_charsmap is not base64");
  }
  if (bytes.empty()) {
    // An empty charsmap (some conversions write one) normalises nothing.
    return std::make_unique<PrecompiledNormalizer>(std::vector<uint32_t>{}, std::string());
  }
  auto u32 = [&bytes](size_t at) {
    return static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 8 |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 16 |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 3])) << 24;
  };
  if (bytes.size() < 4) return absl::InvalidArgumentError("Precompiled: charsmap is truncated");
  const uint32_t trie_bytes = u32(0);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > bytes.size() - 4) {
    return absl::InvalidArgumentError("Precompiled: charsmap's trie size is inconsistent");
  }
  std::vector<uint32_t> trie(trie_bytes / 4);
  for (size_t k = 0; k < trie.size(); ++k) trie[k] = u32(4 + 4 * k);
  std::string normalized = bytes.substr(4 + trie_bytes);
  if (!ValidUtf8(normalized)) {
    return absl::InvalidArgumentError("Precompiled: charsmap's strings are not valid UTF-8");
  }
  return std::make_unique<PrecompiledNormalizer>(std::move(trie), std::move(normalized));
}

}  // namespace infer::text
