#include "models/text/pre_tokenizers.h"

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "models/text/json_fields.h"
#include "models/text/regex.h"
#include "models/text/text_pattern.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

// Cuts every piece that has no tokens yet with `cut`; empty results vanish.
template <typename Cut>
void CutPieces(Pieces* pieces, Cut cut) {
  Pieces out;
  out.reserve(pieces->size());
  for (Piece& p : *pieces) {
    if (p.tokens.has_value()) {
      out.push_back(std::move(p));
      continue;
    }
    for (NormalizedString& s : cut(std::move(p.normalized))) {
      if (!s.empty()) out.push_back({std::move(s), std::nullopt});
    }
  }
  *pieces = std::move(out);
}

class BertPreTokenizer final : public PreTokenizer {
 public:
  // Split on whitespace (removed), then each piece on punctuation
  // (isolated), as the original's two splits; written as one scan that
  // slices the final pieces directly, which gives the same pieces and
  // offsets (a slice of a slice is the slice of the whole).
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [](NormalizedString s) {
      std::vector<NormalizedString> out;
      const std::string& t = s.get();
      size_t word = 0;  // where the current run of other characters starts
      for (size_t i = 0; i < t.size();) {
        const size_t b = i;
        const char32_t c = DecodeUtf8(t, &i);
        const bool space = IsWhitespace(c);
        if (!space && !IsBertPunctuation(c)) continue;
        if (word < b) out.push_back(s.Slice(word, b));
        if (!space) out.push_back(s.Slice(b, i));
        word = i;
      }
      if (word < t.size()) out.push_back(s.Slice(word, t.size()));
      return out;
    });
  }
};

// `\w+|[^\w\s]+` with the regex crate's Unicode \w and \s, kept as the
// pieces: runs of word characters and runs of other non-space characters,
// written as a scan over the generated classes.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [](NormalizedString s) {
      const std::string& t = s.get();
      std::vector<std::pair<size_t, size_t>> runs;
      int run_kind = 0;  // 0: none, 1: word, 2: other
      size_t run_start = 0;
      for (size_t i = 0; i < t.size();) {
        const size_t b = i;
        const char32_t c = DecodeUtf8(t, &i);
        const int kind = IsWordChar(c) ? 1 : IsRegexSpace(c) ? 0 : 2;
        if (kind != run_kind) {
          if (run_kind != 0) runs.push_back({run_start, b});
          run_kind = kind;
          run_start = b;
        }
      }
      if (run_kind != 0) runs.push_back({run_start, t.size()});
      std::vector<PatternPiece> pieces;
      size_t prev = 0;
      for (const auto& [start, end] : runs) {
        if (prev != start) pieces.push_back({prev, start, false});
        pieces.push_back({start, end, true});
        prev = end;
      }
      if (t.empty()) {
        pieces.push_back({0, 0, false});
      } else if (prev != t.size()) {
        pieces.push_back({prev, t.size(), false});
      }
      Invert(&pieces);
      return s.Split(pieces, SplitBehavior::kRemoved);
    });
  }
};

class WhitespaceSplitPreTokenizer final : public PreTokenizer {
 public:
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [](NormalizedString s) {
      return s.Split(FindCharMatches(s.get(), IsWhitespace), SplitBehavior::kRemoved);
    });
  }
};

class PunctuationPreTokenizer final : public PreTokenizer {
 public:
  explicit PunctuationPreTokenizer(SplitBehavior behavior) : behavior_(behavior) {}
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [this](NormalizedString s) {
      return s.Split(FindCharMatches(s.get(), IsBertPunctuation), behavior_);
    });
  }

 private:
  const SplitBehavior behavior_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [this](NormalizedString s) {
      return s.Split(FindCharMatches(s.get(), IsNumeric),
                     individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
    });
  }

 private:
  const bool individual_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    AppendUtf8(replacement, &rep_);
  }
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [this](NormalizedString s) {
      s.Replace(FindCharMatches(s.get(), [](char32_t c) { return c == U' '; }), rep_);
      const bool starts = s.get().compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && s.original_shift() == 0))) {
        s.Prepend(rep_);
      }
      if (!split_) return std::vector<NormalizedString>{std::move(s)};
      const char32_t r = replacement_;
      return s.Split(FindCharMatches(s.get(), [r](char32_t c) { return c == r; }),
                     SplitBehavior::kMergedWithNext);
    });
  }

 private:
  const char32_t replacement_;
  const PrependScheme scheme_;
  const bool split_;
  std::string rep_;
};

const std::array<char32_t, 256>& ByteTable() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    }
    return t;
  }();
  return table;
}

// GPT-2's split: contractions, letters, numbers, other symbols, each with
// an optional leading space, and whitespace (the last run before a word
// left for the word's leading space).
constexpr char kByteLevelPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [this](NormalizedString s) {
      if (add_prefix_space_ && (s.get().empty() || s.get()[0] != ' ')) s.Prepend(" ");
      if (!regex_) return std::vector<NormalizedString>{std::move(s)};
      return s.Split(FindRegexMatches(s.get(), *regex_), SplitBehavior::kIsolated);
    });
    // Every byte becomes its stand-in character: the first of a character's
    // bytes replaces it, the others are inserted.
    const auto& table = ByteTable();
    for (Piece& p : *pieces) {
      if (p.tokens.has_value()) continue;
      const std::string& t = p.normalized.get();
      std::vector<CharChange> dest;
      dest.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        const size_t b = i;
        DecodeUtf8(t, &i);
        for (size_t k = b; k < i; ++k) {
          dest.push_back({table[static_cast<uint8_t>(t[k])], k > b ? 1 : 0});
        }
      }
      p.normalized.Transform(dest, 0);
    }
  }

 private:
  const bool add_prefix_space_;
  const std::unique_ptr<Regex> regex_;  // null: use_regex false
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(TextPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(Pieces* pieces) const override {
    CutPieces(pieces, [this](NormalizedString s) {
      std::vector<PatternPiece> m = pattern_.Find(s.get());
      if (invert_) Invert(&m);
      return s.Split(m, behavior_);
    });
  }

 private:
  const TextPattern pattern_;
  const SplitBehavior behavior_;
  const bool invert_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void PreTokenize(Pieces* pieces) const override {
    for (const auto& p : parts_) p->PreTokenize(pieces);
  }

 private:
  const std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

absl::StatusOr<SplitBehavior> BehaviorFromJson(const nlohmann::json& j, const std::string& type,
                                               SplitBehavior fallback) {
  auto it = j.find("behavior");
  if (it == j.end() || it->is_null()) return fallback;
  const std::string b = it->is_string() ? it->get<std::string>() : "";
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return FieldError(type, "behavior",
                    "one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MetaspaceFromJson(const nlohmann::json& j,
                                                                const std::string& type) {
  INFER_ASSIGN_OR_RETURN(std::string rep, RequiredString(j, type, "replacement"));
  size_t i = 0;
  if (rep.empty() || !ValidUtf8(rep) || (DecodeUtf8(rep, &i), i != rep.size())) {
    return FieldError(type, "replacement", "one character");
  }
  i = 0;
  const char32_t replacement = DecodeUtf8(rep, &i);
  INFER_ASSIGN_OR_RETURN(std::optional<std::string> scheme_name,
                         OptionalString(j, type, "prepend_scheme"));
  PrependScheme scheme = PrependScheme::kAlways;
  if (scheme_name.has_value()) {
    if (*scheme_name == "always") {
      scheme = PrependScheme::kAlways;
    } else if (*scheme_name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (*scheme_name == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return FieldError(type, "prepend_scheme", "always, first or never");
    }
  }
  // Files older than prepend_scheme say add_prefix_space; false means never.
  INFER_ASSIGN_OR_RETURN(bool add_prefix_space, OptionalBool(j, type, "add_prefix_space", true));
  if (!add_prefix_space) {
    if (scheme_name.has_value() && scheme != PrependScheme::kNever) {
      return absl::InvalidArgumentError(
          "Metaspace: add_prefix_space false contradicts prepend_scheme");
    }
    scheme = PrependScheme::kNever;
  }
  INFER_ASSIGN_OR_RETURN(bool split, OptionalBool(j, type, "split", true));
  return std::make_unique<MetaspacePreTokenizer>(replacement, scheme, split);
}

}  // namespace

char32_t ByteToChar(uint8_t b) { return ByteTable()[b]; }

int CharToByte(char32_t c) {
  static const std::array<int, 512> reverse = [] {
    std::array<int, 512> r;
    r.fill(-1);
    for (int b = 0; b < 256; ++b) r[ByteTable()[b]] = b;
    return r;
  }();
  return c < reverse.size() ? reverse[c] : -1;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const nlohmann::json& j) {
  INFER_ASSIGN_OR_RETURN(std::string type, ComponentType(j, "pre_tokenizer"));
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
  if (type == "Punctuation") {
    INFER_ASSIGN_OR_RETURN(SplitBehavior b, BehaviorFromJson(j, type, SplitBehavior::kIsolated));
    return std::make_unique<PunctuationPreTokenizer>(b);
  }
  if (type == "Digits") {
    INFER_ASSIGN_OR_RETURN(bool individual, OptionalBool(j, type, "individual_digits", false));
    return std::make_unique<DigitsPreTokenizer>(individual);
  }
  if (type == "Metaspace") return MetaspaceFromJson(j, type);
  if (type == "ByteLevel") {
    INFER_ASSIGN_OR_RETURN(bool prefix, OptionalBool(j, type, "add_prefix_space", true));
    INFER_ASSIGN_OR_RETURN(bool use_regex, OptionalBool(j, type, "use_regex", true));
    std::unique_ptr<Regex> regex;
    if (use_regex) {
      INFER_ASSIGN_OR_RETURN(regex, Regex::Compile(kByteLevelPattern));
    }
    return std::make_unique<ByteLevelPreTokenizer>(prefix, std::move(regex));
  }
  if (type == "Split") {
    INFER_ASSIGN_OR_RETURN(TextPattern pattern, TextPatternFromJson(j, type));
    INFER_ASSIGN_OR_RETURN(SplitBehavior b, BehaviorFromJson(j, type, SplitBehavior::kRemoved));
    if (j.find("behavior") == j.end()) return FieldError(type, "behavior", "a string");
    INFER_ASSIGN_OR_RETURN(bool invert, OptionalBool(j, type, "invert", false));
    return std::make_unique<SplitPreTokenizer>(std::move(pattern), b, invert);
  }
  if (type == "Sequence") {
    INFER_ASSIGN_OR_RETURN(
        auto parts, ComponentList<PreTokenizer>(j, type, "pretokenizers", PreTokenizerFromJson));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pre_tokenizer type \"", type, "\" is not supported"));
}

}  // namespace infer::text
